//! Which nodes flxp switched off for power saving, kept in Proxmox itself so that any flxp, after
//! any restart, knows which nodes it may wake.
//!
//! A switched-off node cannot say so: Proxmox proxies `GET /nodes/{node}/config` to the node
//! itself (pve-manager `PVE/API2/NodeConfig.pm`, `proxyto => 'node'`), so its notes are out of
//! reach while it is down. The mark therefore lives in the notes of a node that stays online, as
//! one HTML comment line per node (invisible in the rendered notes, like the lease):
//! `<!-- flxp-power node=<node> state=off|waking since=<epoch secs> -->`. `off`: a consolidation
//! chose the node (it is emptied, then switched off); `waking`: Wake-on-LAN was sent. The line
//! goes when the node is back in service. Writes carry the config's `digest`, as the maintenance
//! mark's do.

use std::collections::BTreeMap;

use flxp_pve::Pve;
use serde::Serialize;

/// The start of a mark line.
const PREFIX: &str = "<!-- flxp-power ";

/// Where a marked node is in its power cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PowerState {
    /// Chosen by a consolidation: emptied, then switched off (or off already).
    Off,
    /// Wake-on-LAN sent; back in service once it is online.
    Waking,
}

/// One node flxp powered off or is waking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PowerMark {
    /// The node switched off or waking.
    pub node: String,
    /// Off or waking.
    pub state: PowerState,
    /// When the state began, epoch seconds.
    pub since: i64,
    /// The node whose notes hold the line.
    pub holder: String,
}

/// Why a power mark could not be written or removed.
#[derive(Debug, thiserror::Error)]
#[error("cannot update the power mark of node {node} in the notes of node {holder}")]
pub struct PowerMarkError {
    /// The marked node.
    pub node: String,
    /// The node whose notes hold the mark.
    pub holder: String,
    /// Proxmox's answer.
    #[source]
    pub source: flxp_pve::Error,
}

/// The mark's line.
fn line(node: &str, state: PowerState, since: i64) -> String {
    let state = match state {
        PowerState::Off => "off",
        PowerState::Waking => "waking",
    };
    format!("{PREFIX}node={node} state={state} since={since} -->")
}

/// The node, state and time of a mark line; `None` for any other line.
fn parse(line: &str) -> Option<(String, PowerState, i64)> {
    let body = line.trim().strip_prefix(PREFIX)?.strip_suffix("-->")?;
    let (mut node, mut state, mut since) = (None, None, None);
    for word in body.split_whitespace() {
        match word.split_once('=') {
            Some(("node", v)) if !v.is_empty() => node = Some(v.to_owned()),
            Some(("state", "off")) => state = Some(PowerState::Off),
            Some(("state", "waking")) => state = Some(PowerState::Waking),
            Some(("since", v)) => since = v.parse().ok(),
            _ => {}
        }
    }
    Some((node?, state?, since?))
}

/// Every mark in the notes of the online nodes (node name → notes); a node marked twice counts
/// once, with its latest state.
pub fn read(notes: &BTreeMap<String, String>) -> Vec<PowerMark> {
    let mut by_node: BTreeMap<String, PowerMark> = BTreeMap::new();
    for (holder, text) in notes {
        for (node, state, since) in text.lines().filter_map(parse) {
            let newer = by_node.get(&node).is_none_or(|m| m.since <= since);
            if newer {
                by_node.insert(
                    node.clone(),
                    PowerMark {
                        node,
                        state,
                        since,
                        holder: holder.clone(),
                    },
                );
            }
        }
    }
    by_node.into_values().collect()
}

/// The notes without the lines marking `node`, and with `mark` added when given; `None` when
/// nothing changes.
fn edited(text: &str, node: &str, mark: Option<(PowerState, i64)>) -> Option<String> {
    let new = mark.map(|(state, since)| line(node, state, since));
    crate::notes_edit::with_line(
        text,
        |l| parse(l).is_some_and(|(n, _, _)| n == node),
        new.as_deref(),
    )
}

/// Writes (`Some`) or removes (`None`) the mark of `node` in the notes of `holder`. A write that
/// lost a race with another edit (digest mismatch) is retried once on the notes read again.
pub async fn set(
    api: &Pve,
    holder: &str,
    node: &str,
    mark: Option<(PowerState, i64)>,
) -> Result<(), PowerMarkError> {
    let changed = crate::notes_edit::edit(api, holder, |text| edited(text, node, mark))
        .await
        .map_err(|source| PowerMarkError {
            node: node.to_owned(),
            holder: holder.to_owned(),
            source,
        })?;
    if changed {
        tracing::info!(node, holder, ?mark, "power mark written");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_read_from_any_online_nodes_notes() {
        let notes = BTreeMap::from([
            (
                "pve1".to_owned(),
                format!("Rack 4\n{}", line("pve2", PowerState::Off, 100)),
            ),
            (
                "pve3".to_owned(),
                format!(
                    "{}\n{}",
                    line("pve4", PowerState::Waking, 200),
                    line("pve2", PowerState::Waking, 150)
                ),
            ),
        ]);
        let marks = read(&notes);
        assert_eq!(marks.len(), 2);
        assert_eq!(marks[0].node, "pve2");
        assert_eq!(marks[0].state, PowerState::Waking, "the newer one counts");
        assert_eq!(marks[0].holder, "pve3");
        assert_eq!(marks[1].since, 200);
    }

    #[test]
    fn editing_keeps_the_admins_text() {
        let added = edited("Rack 4\n\n", "pve2", Some((PowerState::Off, 7))).unwrap();
        assert_eq!(
            added,
            "Rack 4\n<!-- flxp-power node=pve2 state=off since=7 -->"
        );
        assert_eq!(edited(&added, "pve2", Some((PowerState::Off, 7))), None);
        assert_eq!(edited(&added, "pve2", None).as_deref(), Some("Rack 4"));
        assert_eq!(edited("Rack 4", "pve2", None), None);
        assert_eq!(
            parse("<!-- flxp-power node=a state=asleep since=1 -->"),
            None
        );
    }
}
