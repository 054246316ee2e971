//! The daemon's power decisions as pure functions: what to finish of the power transitions the
//! marks record, then whether to wake a node, consolidate or wait, and whether a node may be
//! switched off now. The daemon reads the cluster and its marks, asks these, and carries the
//! answers out (API calls, Wake-on-LAN, planning and running a consolidation).
//!
//! A round finishes what earlier rounds began first ([`finish`]): a node marked `waking` that is
//! online goes back in service; one still offline past `wake-timeout` gets Wake-on-LAN again; a
//! node marked `off` that an admin put back in service loses its stale mark; one online, in
//! maintenance and (with `shutdown`, or not empty yet) is finished. Only when nothing is to be
//! finished does it [`decide`]: wake the roomiest node flxp switched off when room is needed or
//! the load is above `wake-above` (and no power change for `min-interval`), consolidate once the
//! load stays below `consolidate-below` for `min-interval`, else wait, each with why.

use std::collections::BTreeSet;

use super::{arriving, load};
use crate::cluster::{Cluster, Landing, NodeIdx};
use crate::state::State;

/// What a power mark says a node is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkState {
    /// Chosen by a consolidation: emptied, then switched off (or off already).
    Off,
    /// Wake-on-LAN sent; back in service once it is online.
    Waking,
}

/// A power mark as the decisions read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// The marked node.
    pub node: String,
    /// Off or waking.
    pub state: MarkState,
    /// When the state began, epoch seconds.
    pub since: i64,
}

/// The power saving's settings (`[consolidate]` with `enabled = true`), in seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Levels {
    /// Switch emptied nodes off (else they stay online, empty and in maintenance).
    pub shutdown: bool,
    /// Consolidate when the zone's load stays below this share.
    pub consolidate_below: f64,
    /// Wake a node when the zone's load is above this share.
    pub wake_above: f64,
    /// Least time between two power changes, and how long the load must stay low first.
    pub min_interval_secs: i64,
    /// How long a woken node may take to come online before Wake-on-LAN is sent again.
    pub wake_timeout_secs: i64,
}

/// One thing to carry out to finish a transition the marks record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finishing {
    /// Marked `waking` and online: clear its maintenance mark, then its power mark.
    BackInService(String),
    /// Marked `waking` and still offline `late_secs` after Wake-on-LAN, past `wake-timeout`:
    /// re-date the mark, then send Wake-on-LAN again.
    WakeAgain {
        /// The node.
        node: String,
        /// Seconds since the mark's date.
        late_secs: i64,
    },
    /// Marked `off` but online and out of maintenance (an admin put it back): clear the mark.
    ClearStaleMark(String),
    /// Marked `off` and offline: it went down; forget that this process asked it to.
    WentDown(String),
}

/// What [`finish`] found in the marks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Marks {
    /// What to carry out, in the marks' order.
    pub finishing: Vec<Finishing>,
    /// Nodes marked `off`, online and in maintenance that a consolidation must finish (empty,
    /// and with `shutdown` switch off): any of them ends the round with that.
    pub pending: Vec<NodeIdx>,
    /// Nodes marked `off` that are asleep (or empty and left on): the ones a wake may pick.
    pub asleep: Vec<String>,
    /// A node marked `waking` is not online yet: no other power change meanwhile.
    pub waking: bool,
}

/// What to finish of the transitions the marks record. `going_down`: the nodes this process
/// asked to shut down less than `wake-timeout` ago (they may still be going down, and are not
/// asked again, which would re-date their marks).
pub fn finish(
    cluster: &Cluster,
    state: &State,
    marks: &[Mark],
    now: i64,
    levels: &Levels,
    going_down: &BTreeSet<String>,
) -> Marks {
    let mut out = Marks::default();
    for m in marks {
        let Some(idx) = cluster.node_idx(&m.node) else {
            continue;
        };
        let n = cluster.node(idx);
        match (m.state, n.is_online()) {
            (MarkState::Waking, true) => {
                out.finishing.push(Finishing::BackInService(m.node.clone()))
            }
            (MarkState::Waking, false) => {
                out.waking = true;
                let late = now - m.since;
                if late > levels.wake_timeout_secs {
                    out.finishing.push(Finishing::WakeAgain {
                        node: m.node.clone(),
                        late_secs: late,
                    });
                }
            }
            (MarkState::Off, true) if !n.in_maintenance() => out
                .finishing
                .push(Finishing::ClearStaleMark(m.node.clone())),
            (MarkState::Off, true) => {
                // A guest migrating onto it counts: it is not empty until that lands.
                let empty = occupied(cluster, state, idx).is_none();
                if empty && going_down.contains(&m.node) {
                    out.asleep.push(m.node.clone());
                } else if levels.shutdown || !empty {
                    out.pending.push(idx);
                } else {
                    out.asleep.push(m.node.clone());
                }
            }
            (MarkState::Off, false) => {
                out.finishing.push(Finishing::WentDown(m.node.clone()));
                out.asleep.push(m.node.clone());
            }
        }
    }
    out
}

/// What the timing the daemon remembers says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timing {
    /// This process's last power change, epoch seconds.
    pub last_power: Option<i64>,
    /// Since when the load is below `consolidate-below` (`None`: it is not).
    pub low_since: Option<i64>,
    /// Room was asked for (an evacuation or a VM creation found none).
    pub room: bool,
}

/// The one power change a round decides, when nothing is to be finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Wake this node (the roomiest flxp switched off), for the reason given.
    Wake {
        /// The node.
        node: String,
        /// Why, in words.
        why: String,
    },
    /// Plan a consolidation and carry it out.
    Consolidate,
    /// Change nothing.
    Nothing,
}

/// What [`decide`] decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The zone's load on the nodes in service.
    pub load: f64,
    /// The change.
    pub change: Change,
    /// Why, in a sentence (empty for a wake or a consolidation: their own words follow).
    pub sentence: String,
    /// Since when the load is low, to remember for the next round.
    pub low_since: Option<i64>,
    /// Waiting for a consolidation: say which nodes it would free (balancing then keeps off
    /// them).
    pub preview: bool,
}

/// Nodes in service: online, not in maintenance, not lost by HA.
pub fn in_service(cluster: &Cluster) -> Vec<NodeIdx> {
    cluster
        .node_indexes()
        .filter(|&n| cluster.node(n).is_schedulable())
        .collect()
}

/// Whether to wake a node, consolidate or wait, once nothing is to be finished (module doc).
pub fn decide(
    cluster: &Cluster,
    state: &State,
    marks: &[Mark],
    found: &Marks,
    now: i64,
    levels: &Levels,
    timing: Timing,
) -> Decision {
    let load = load(cluster, state, &in_service(cluster));
    let last = marks.iter().map(|m| m.since).chain(timing.last_power).max();
    let interval = levels.min_interval_secs;
    let quiet_for = last.map(|t| now - t);
    let quiet = quiet_for.is_none_or(|q| q >= interval);
    let low = load < levels.consolidate_below;
    let low_since = if low {
        Some(timing.low_since.unwrap_or(now))
    } else {
        None
    };
    let since = low_since.unwrap_or(now);
    let mut out = Decision {
        load,
        change: Change::Nothing,
        sentence: String::new(),
        low_since,
        preview: false,
    };
    let high = load > levels.wake_above;
    if (timing.room || (high && quiet)) && !found.waking {
        // The roomiest node flxp switched off.
        let pick = found
            .asleep
            .iter()
            .filter_map(|m| cluster.node_idx(m).map(|i| (cluster.node(i).maxmem, m)))
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(a.1)));
        if let Some((_, node)) = pick {
            let why = if timing.room {
                "room is needed".to_owned()
            } else {
                format!(
                    "load {:.0}% is above wake-above {:.0}%",
                    100.0 * load,
                    100.0 * levels.wake_above
                )
            };
            out.change = Change::Wake {
                node: node.clone(),
                why,
            };
            return out;
        }
        if timing.room {
            out.sentence = "room is needed, but no node flxp switched off is left".into();
        }
    }
    if high && !quiet && !found.asleep.is_empty() {
        out.sentence = format!(
            "load {:.0}% is above wake-above {:.0}%, but the last power change was {} s ago \
             (min-interval-secs = {interval})",
            100.0 * load,
            100.0 * levels.wake_above,
            quiet_for.unwrap_or(0)
        );
    }
    if low {
        if now - since < interval || !quiet {
            out.sentence = format!(
                "load {:.0}% is below consolidate-below {:.0}% since {} s; waiting for \
                 min-interval-secs = {interval}{}",
                100.0 * load,
                100.0 * levels.consolidate_below,
                now - since,
                if quiet {
                    ""
                } else {
                    " since the last power change"
                }
            );
            out.preview = !found.waking;
        } else if !found.waking {
            out.change = Change::Consolidate;
            out.sentence.clear();
            return out;
        }
    }
    if out.sentence.is_empty() {
        out.sentence = format!("load {:.0}%: nothing to change", 100.0 * load);
    }
    out
}

/// Why a node is not empty: a guest on it, one migrating onto it, or a migration whose target
/// is unknown (it may land there); `None` when it is empty.
pub fn occupied(cluster: &Cluster, state: &State, idx: NodeIdx) -> Option<String> {
    let left: Vec<u32> = cluster
        .guest_indexes()
        .filter(|&g| state.location(g) == idx)
        .map(|g| cluster.guest(g).vmid)
        .collect();
    if !left.is_empty() {
        return Some(format!("it still holds guest(s) {left:?}"));
    }
    if let Some(why) = arriving(cluster, &[idx]) {
        return Some(why);
    }
    // A migration without a known target (its task names none, or only the lock shows it).
    cluster
        .guests()
        .iter()
        .find(|g| {
            g.migrating == Some(Landing::Unknown)
                || (g.migrating.is_none() && g.lock.as_deref() == Some("migrate"))
        })
        .map(|g| {
            format!(
                "guest {} is migrating off {} to a node flxp cannot tell: it may land on this one",
                g.label(),
                cluster.node(g.node).name
            )
        })
}

/// Whether `node` may be switched off now, else why not: online, in maintenance, empty (no
/// guest on it or arriving) and not the node whose loss would leave half the cluster or fewer
/// online (corosync counts every configured node).
pub fn may_switch_off(cluster: &Cluster, state: &State, node: &str) -> Result<(), String> {
    let idx = cluster
        .node_idx(node)
        .ok_or_else(|| "it is not in the cluster".to_owned())?;
    let n = cluster.node(idx);
    if !n.is_online() {
        return Err(format!("it is {}", n.status_text()));
    }
    if !n.in_maintenance() {
        return Err("it is not in maintenance".into());
    }
    if let Some(why) = occupied(cluster, state, idx) {
        return Err(why);
    }
    let total = cluster.nodes().len();
    let online = cluster.nodes().iter().filter(|n| n.is_online()).count();
    if 2 * (online - 1) <= total {
        return Err(format!(
            "{} of {total} node(s) would stay online: quorum needs more than half",
            online - 1
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
