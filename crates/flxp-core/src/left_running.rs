//! Running guests an evacuation leaves on the nodes it empties: the answer to "may I reboot it
//! now?". A guest counts when it runs on one of the nodes, or is migrating onto one (it lands
//! there and keeps running). Each says why it is there: the plan's reason when the plan skipped
//! it, else that it arrives, that the plan moves it (before a run), or that it did not leave.
//!
//! [`maintenance_state`] answers the same question for one node in maintenance without a plan
//! (`flxp status`, the dashboard, the daemon's warning): empty, stopped guests only, or which
//! guests still run there and why.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use crate::balance::{Intent, Plan, stays};
use crate::cluster::{Cluster, Guest, NodeIdx};
use crate::constraints::Rules;

/// A running guest on a node being emptied, and why it is there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(
    feature = "graphql",
    derive(async_graphql::SimpleObject),
    graphql(name = "GuestLeft")
)]
pub struct LeftRunning {
    /// Guest id.
    pub vmid: u32,
    /// Guest name.
    pub name: String,
    /// The node it keeps running on (the target, for a guest arriving).
    pub node: String,
    /// Why it is there, in words.
    pub reason: String,
}

impl LeftRunning {
    /// Guest `g` on `node`, for `reason`.
    fn of(g: &Guest, node: &str, reason: String) -> Self {
        Self {
            vmid: g.vmid,
            name: g.name.clone(),
            node: node.to_owned(),
            reason,
        }
    }
}

/// Why a guest migrating onto a node is there.
fn arriving_from(cluster: &Cluster, g: &Guest) -> String {
    format!(
        "migrating onto it from {}: it lands there and keeps running",
        cluster.node(g.node).name
    )
}

/// The running guests on `nodes` (or arriving there) that `plan` does not take away, in vmid
/// order. With `carried_out`, the cluster was read after the plan ran: every guest still there
/// stayed, whatever the plan meant to do with it ([`left_running_after`] says what became of
/// each migration when the run's report is at hand).
pub fn left_running(
    cluster: &Cluster,
    nodes: &[NodeIdx],
    plan: &Plan,
    carried_out: bool,
) -> Vec<LeftRunning> {
    left(
        cluster,
        nodes,
        plan,
        carried_out.then_some(&BTreeMap::new()),
    )
}

/// [`left_running`] on a cluster read after `plan` ran, each guest the run tried to move, or
/// planned to and did not start, saying what became of it: `outcomes` by vmid, in words (its
/// migration failed, to which node and why; was not started, and why), as the run's report
/// tells. A guest the plan moves with no outcome is said not to have moved, naming the report.
pub fn left_running_after(
    cluster: &Cluster,
    nodes: &[NodeIdx],
    plan: &Plan,
    outcomes: &BTreeMap<u32, String>,
) -> Vec<LeftRunning> {
    left(cluster, nodes, plan, Some(outcomes))
}

/// [`left_running`]; `outcomes` is `Some` after the run.
fn left(
    cluster: &Cluster,
    nodes: &[NodeIdx],
    plan: &Plan,
    outcomes: Option<&BTreeMap<u32, String>>,
) -> Vec<LeftRunning> {
    let carried_out = outcomes.is_some();
    let skipped: BTreeMap<u32, String> = plan
        .skipped
        .iter()
        .map(|s| (s.vmid, s.reason.clone()))
        .chain(
            plan.unplaced
                .iter()
                .map(|u| (u.vmid, format!("fits on no node: {}", u.reason))),
        )
        .collect();
    let moved: BTreeMap<u32, &str> = plan
        .migrations
        .iter()
        .map(|m| (m.vmid, m.to.as_str()))
        .collect();
    let mut left: Vec<LeftRunning> = cluster
        .guests()
        .iter()
        .filter(|g| g.running && !g.template)
        .filter_map(|g| {
            let arriving = g.migrating_to().filter(|to| nodes.contains(to));
            let here = arriving.unwrap_or(g.node);
            if !nodes.contains(&here) {
                return None;
            }
            // Before a run, a guest the plan moves away is not left (unless it is only arriving).
            if !carried_out && arriving.is_none() && moved.contains_key(&g.vmid) {
                return None;
            }
            let outcome = outcomes.and_then(|o| o.get(&g.vmid));
            let reason = match (arriving, outcome, skipped.get(&g.vmid)) {
                (Some(_), _, _) => arriving_from(cluster, g),
                (None, Some(what), _) => what.clone(),
                (None, None, Some(why)) => why.clone(),
                (None, None, None) if carried_out => match moved.get(&g.vmid) {
                    Some(to) => format!("its migration to {to} did not happen (see the report)"),
                    None => "not moved: it came after the plan was made".to_owned(),
                },
                (None, None, None) => "not moved by the plan".to_owned(),
            };
            Some(LeftRunning::of(g, &cluster.node(here).name, reason))
        })
        .collect();
    left.sort_by_key(|l| l.vmid);
    left
}

/// Whether a node in maintenance may be rebooted now, from what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum MaintenanceState {
    /// No guest at all: safe to reboot.
    Empty,
    /// Stopped guests and templates only: safe to reboot.
    StoppedOnly {
        /// How many guests (stopped ones and templates).
        stopped: u32,
    },
    /// Guests still run there (or are migrating onto it): not safe to reboot.
    Running {
        /// Each with why it is there, in vmid order.
        guests: Vec<LeftRunning>,
    },
}

impl MaintenanceState {
    /// From the running guests already found on `node` (by [`left_running`], say, read after a
    /// run): those on other nodes are left out.
    pub fn from_left(cluster: &Cluster, node: NodeIdx, left: &[LeftRunning]) -> Self {
        let name = &cluster.node(node).name;
        let guests: Vec<LeftRunning> = left.iter().filter(|l| &l.node == name).cloned().collect();
        if !guests.is_empty() {
            return Self::Running { guests };
        }
        match u32::try_from(cluster.guests_on(node).len()).unwrap_or(u32::MAX) {
            0 => Self::Empty,
            stopped => Self::StoppedOnly { stopped },
        }
    }

    /// Whether nothing runs there: rebooting stops no guest.
    pub fn safe_to_reboot(&self) -> bool {
        !matches!(self, Self::Running { .. })
    }

    /// The running guests still there (none when safe).
    pub fn running(&self) -> &[LeftRunning] {
        match self {
            Self::Running { guests } => guests,
            _ => &[],
        }
    }

    /// The state's name as serialised (`empty`, `stopped-only`, `running`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::StoppedOnly { .. } => "stopped-only",
            Self::Running { .. } => "running",
        }
    }
}

impl fmt::Display for MaintenanceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("empty, safe to reboot"),
            Self::StoppedOnly { stopped } => {
                write!(f, "stopped guests only ({stopped}), safe to reboot")
            }
            Self::Running { guests } => write!(
                f,
                "{} running guest{} still here, not safe to reboot",
                guests.len(),
                if guests.len() == 1 { "" } else { "s" }
            ),
        }
    }
}

/// What `node` holds now, without a plan: each running guest says why it stays (what the core
/// says when it would not move it), or that it simply runs there and an evacuation would move it.
pub fn maintenance_state(cluster: &Cluster, rules: &Rules, node: NodeIdx) -> MaintenanceState {
    state_without(cluster, rules, node, &BTreeSet::new())
}

/// What `node` holds once `plan` has run as planned: the guests it migrates are gone, the rest
/// stay as [`maintenance_state`] says.
pub fn maintenance_state_planned(
    cluster: &Cluster,
    rules: &Rules,
    node: NodeIdx,
    plan: &Plan,
) -> MaintenanceState {
    let moved: BTreeSet<u32> = plan.migrations.iter().map(|m| m.vmid).collect();
    state_without(cluster, rules, node, &moved)
}

/// [`maintenance_state`] with the guests in `moved` gone from the node.
fn state_without(
    cluster: &Cluster,
    rules: &Rules,
    node: NodeIdx,
    moved: &BTreeSet<u32>,
) -> MaintenanceState {
    let mut guests: Vec<LeftRunning> = cluster
        .guests()
        .iter()
        .filter(|g| g.running && !g.template)
        .filter_map(|g| {
            let arriving = g.migrating_to().filter(|&to| to == node);
            if arriving.is_none() && (g.node != node || moved.contains(&g.vmid)) {
                return None;
            }
            let reason = if arriving.is_some() {
                arriving_from(cluster, g)
            } else {
                cluster
                    .guest_idx(g.vmid)
                    .and_then(|i| stays(cluster, rules, i, Intent::Fix, 0))
                    .map_or_else(
                        || "runs here; an evacuation would move it".to_owned(),
                        |stay| stay.to_string(),
                    )
            };
            Some(LeftRunning::of(g, &cluster.node(node).name, reason))
        })
        .collect();
    guests.sort_by_key(|l| l.vmid);
    if !guests.is_empty() {
        return MaintenanceState::Running { guests };
    }
    let staying = cluster
        .guests_on(node)
        .iter()
        .filter(|&&g| !moved.contains(&cluster.guest(g).vmid))
        .count();
    match u32::try_from(staying).unwrap_or(u32::MAX) {
        0 => MaintenanceState::Empty,
        stopped => MaintenanceState::StoppedOnly { stopped },
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::builder::{ClusterBuilder, vm};
    use crate::evacuate::evacuate_node;

    fn state_of(c: &Cluster, node: &str) -> MaintenanceState {
        maintenance_state(c, &Rules::compile(c), c.node_idx(node).unwrap())
    }

    #[test]
    fn a_node_with_no_guest_is_empty_and_safe_to_reboot() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b"])
            .guest(vm(101, "b"))
            .build();
        let s = state_of(&c, "a");
        assert_eq!(s, MaintenanceState::Empty);
        assert_eq!(s.to_string(), "empty, safe to reboot");
        assert!(s.safe_to_reboot());
    }

    #[test]
    fn a_node_with_stopped_guests_and_templates_only_is_safe_to_reboot() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b"])
            .guest(vm(101, "a").stopped())
            .guest(vm(102, "a").stopped().tagged("flxp.ignore"))
            .build();
        let s = state_of(&c, "a");
        assert_eq!(s, MaintenanceState::StoppedOnly { stopped: 2 });
        assert_eq!(s.to_string(), "stopped guests only (2), safe to reboot");
        assert!(s.safe_to_reboot());
    }

    #[test]
    fn running_guests_say_why_they_stay_or_that_they_only_run_there() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b", "c"])
            .guest(vm(101, "a"))
            .guest(vm(102, "a").tagged("flxp.ignore"))
            .guest(vm(103, "a").stopped())
            .guest(vm(105, "c"))
            .migrating(105, "c", "a")
            .build();
        let s = state_of(&c, "a");
        let got: Vec<(u32, &str)> = s
            .running()
            .iter()
            .map(|l| (l.vmid, l.reason.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (101, "runs here; an evacuation would move it"),
                (102, "tagged flxp.ignore / plb_ignore: never moved"),
                (
                    105,
                    "migrating onto it from c: it lands there and keeps running"
                ),
            ]
        );
        assert_eq!(
            s.to_string(),
            "3 running guests still here, not safe to reboot"
        );
        assert!(!s.safe_to_reboot());
        assert!(s.running().iter().all(|l| l.node == "a"));
        // b is the source of nothing and holds nothing.
        assert_eq!(state_of(&c, "b"), MaintenanceState::Empty);
    }

    #[test]
    fn once_its_evacuation_has_run_only_what_the_plan_leaves_is_counted() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b"])
            .guest(vm(101, "a"))
            .guest(vm(102, "a").tagged("flxp.ignore"))
            .guest(vm(103, "a").stopped())
            .build();
        let a = c.node_idx("a").unwrap();
        let plan = evacuate_node(&c, "a");
        let s = maintenance_state_planned(&c, &Rules::compile(&c), a, &plan);
        assert_eq!(
            s.running().iter().map(|l| l.vmid).collect::<Vec<_>>(),
            [102]
        );
        // Without the ignored guest, the plan moves both (stopped guests go offline by default).
        let c = ClusterBuilder::new()
            .nodes(&["a", "b"])
            .guest(vm(101, "a"))
            .guest(vm(103, "a").stopped())
            .build();
        let plan = evacuate_node(&c, "a");
        let s = maintenance_state_planned(&c, &Rules::compile(&c), a, &plan);
        assert_eq!(plan.migrations.len(), 2);
        assert_eq!(s, MaintenanceState::Empty);
        // Before the run, the stopped guest is still there.
        assert_eq!(
            maintenance_state(&c, &Rules::compile(&c), a)
                .running()
                .len(),
            1
        );
    }

    #[test]
    fn after_a_run_a_guest_still_there_says_what_became_of_its_migration() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b"])
            .guest(vm(101, "a"))
            .guest(vm(102, "a"))
            .build();
        let plan = evacuate_node(&c, "a");
        assert_eq!(plan.migrations.len(), 2);
        let a = c.node_idx("a").unwrap();
        let outcomes: BTreeMap<u32, String> = [(
            101,
            "its migration to b failed: migration aborted".to_owned(),
        )]
        .into();
        let reasons: Vec<(u32, String)> = left_running_after(&c, &[a], &plan, &outcomes)
            .into_iter()
            .map(|l| (l.vmid, l.reason))
            .collect();
        assert_eq!(
            reasons,
            [
                (
                    101,
                    "its migration to b failed: migration aborted".to_owned()
                ),
                (
                    102,
                    "its migration to b did not happen (see the report)".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn a_guest_arriving_on_the_emptied_node_is_left_running_and_named_with_its_source() {
        // 105 migrates from b onto a while a is evacuated: the plan cannot move it (it is on b
        // until it lands), and once it lands it runs on a.
        let c = ClusterBuilder::new()
            .nodes(&["a", "b", "c"])
            .guest(vm(101, "a"))
            .guest(vm(105, "b"))
            .migrating(105, "b", "a")
            .build();
        let plan = evacuate_node(&c, "a");
        let a = c.node_idx("a").unwrap();
        let left = left_running(&c, &[a], &plan, false);
        assert_eq!(
            left,
            [LeftRunning {
                vmid: 105,
                name: "qemu105".into(),
                node: "a".into(),
                reason: "migrating onto it from b: it lands there and keeps running".into(),
            }]
        );
    }

    #[test]
    fn ignored_and_stopped_guests_and_templates_are_told_apart() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b"])
            .guest(vm(101, "a"))
            .guest(vm(102, "a").tagged("flxp.ignore"))
            .guest(vm(103, "a").stopped().tagged("flxp.ignore"))
            .build();
        let plan = evacuate_node(&c, "a");
        let a = c.node_idx("a").unwrap();
        let before: Vec<u32> = left_running(&c, &[a], &plan, false)
            .iter()
            .map(|l| l.vmid)
            .collect();
        // 101 is moved by the plan; 102 runs and may not move; 103 is stopped.
        assert_eq!(before, [102]);
        // Read after a run in which nothing moved (say the migration failed): 101 stayed too.
        let after = left_running(&c, &[a], &plan, true);
        assert_eq!(after.iter().map(|l| l.vmid).collect::<Vec<_>>(), [101, 102]);
        assert!(
            after[0]
                .reason
                .starts_with("its migration to b did not happen"),
            "{after:?}"
        );
        assert!(after[1].reason.contains("flxp.ignore"), "{after:?}");
    }
}
