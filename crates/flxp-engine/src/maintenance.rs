//! Marking a node as in maintenance where flxp reads it: the `flxp.maintenance` token in the
//! node's notes (the `description` of `GET/PUT /nodes/{node}/config`).
//!
//! An evacuation writes the mark before it empties a node, so the node stays empty (no rebalance
//! or placement sends guests back) until an admin or flxp removes the token. The write carries the
//! config's `digest`, so an admin's edit made meanwhile is never overwritten: on a digest mismatch
//! the notes are read again and the change is made once more.

use flxp_core::constraints::notes;
use flxp_pve::Pve;

/// The notes token that puts a node in maintenance.
pub const TOKEN: &str = "flxp.maintenance";

/// Why a node's maintenance mark could not be changed.
#[derive(Debug, thiserror::Error)]
#[error("cannot {} the maintenance mark of node {node}", if *.on { "set" } else { "clear" })]
pub struct MarkError {
    /// The node.
    pub node: String,
    /// Whether the mark was being set.
    pub on: bool,
    /// Proxmox's answer.
    #[source]
    pub source: flxp_pve::Error,
}

/// The notes with the token added on its own line, or `None` when they already read as in
/// maintenance. The admin's text is kept as it is.
pub fn marked(text: &str) -> Option<String> {
    if notes::parse("", text).maintenance {
        return None;
    }
    let trimmed = text.trim_end();
    Some(if trimmed.is_empty() {
        TOKEN.to_owned()
    } else {
        format!("{trimmed}\n{TOKEN}")
    })
}

/// The notes without any exact `flxp.maintenance` token (a line holding only the token goes
/// whole), or `None` when there is none.
pub fn unmarked(text: &str) -> Option<String> {
    let is_token_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    let mut changed = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.trim() == TOKEN {
            changed = true;
            continue;
        }
        let mut out = String::with_capacity(line.len());
        let mut rest = line;
        while let Some(at) = rest.find(TOKEN) {
            let before = rest[..at].chars().next_back();
            let after = rest[at + TOKEN.len()..].chars().next();
            let whole = !before.is_some_and(is_token_char) && !after.is_some_and(is_token_char);
            out.push_str(&rest[..at]);
            if whole {
                changed = true;
            } else {
                out.push_str(TOKEN);
            }
            rest = &rest[at + TOKEN.len()..];
        }
        out.push_str(rest);
        lines.push(out);
    }
    changed.then(|| lines.join("\n"))
}

/// Sets (`on`) or clears the maintenance mark in a node's notes; `Ok(true)` when the notes
/// changed. A write that lost a race with another edit (digest mismatch) is retried once on the
/// notes read again.
pub async fn set(api: &Pve, node: &str, on: bool) -> Result<bool, MarkError> {
    let changed =
        crate::notes_edit::edit(
            api,
            node,
            |text| {
                if on { marked(text) } else { unmarked(text) }
            },
        )
        .await
        .map_err(|source| MarkError {
            node: node.to_owned(),
            on,
            source,
        })?;
    if changed {
        tracing::info!(node, on, "maintenance mark written to the node's notes");
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_goes_on_its_own_line_and_keeps_the_admins_text() {
        assert_eq!(marked("").as_deref(), Some("flxp.maintenance"));
        assert_eq!(
            marked("Rack 4 flxp.label.ssd\n\n").as_deref(),
            Some("Rack 4 flxp.label.ssd\nflxp.maintenance")
        );
        assert_eq!(marked("**flxp.maintenance** until friday"), None);
        assert_eq!(
            marked("~~flxp.maintenance~~").as_deref(),
            Some("~~flxp.maintenance~~\nflxp.maintenance"),
            "a struck-through token is not read"
        );
    }

    #[test]
    fn clearing_removes_exact_tokens_only() {
        assert_eq!(
            unmarked("Rack 4 flxp.label.ssd\nflxp.maintenance").as_deref(),
            Some("Rack 4 flxp.label.ssd")
        );
        assert_eq!(unmarked("a flxp.maintenance, b").as_deref(), Some("a , b"));
        assert_eq!(unmarked("flxp.maintenance.now flxp.maintenances"), None);
        assert_eq!(unmarked("Rack 4"), None);
        assert_eq!(unmarked("flxp.maintenance").as_deref(), Some(""));
    }

    #[test]
    fn a_mark_written_then_cleared_gives_the_notes_back() {
        let notes = "Rack 4 (flxp.label.ssd)";
        let on = marked(notes).unwrap();
        assert!(notes::parse("n", &on).maintenance);
        assert_eq!(unmarked(&on).as_deref(), Some(notes));
    }
}
