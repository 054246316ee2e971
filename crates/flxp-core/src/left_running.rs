//! Running guests an evacuation leaves on the nodes it empties: the answer to "may I reboot it
//! now?". A guest counts when it runs on one of the nodes, or is migrating onto one (it lands
//! there and keeps running). Each says why it is there: the plan's reason when the plan skipped
//! it, else that it arrives, that the plan moves it (before a run), or that it did not leave.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::balance::Plan;
use crate::cluster::{Cluster, NodeIdx};

/// A running guest on a node being emptied, and why it is there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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

/// The running guests on `nodes` (or arriving there) that `plan` does not take away, in vmid
/// order. With `carried_out`, the cluster was read after the plan ran: every guest still there
/// stayed, whatever the plan meant to do with it.
pub fn left_running(
    cluster: &Cluster,
    nodes: &[NodeIdx],
    plan: &Plan,
    carried_out: bool,
) -> Vec<LeftRunning> {
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
            let reason = match (arriving, skipped.get(&g.vmid)) {
                (Some(_), _) => format!(
                    "migrating onto it from {}: it lands there and keeps running",
                    cluster.node(g.node).name
                ),
                (None, Some(why)) => why.clone(),
                (None, None) if carried_out => match moved.get(&g.vmid) {
                    Some(to) => format!("its migration to {to} did not happen (see the report)"),
                    None => "not moved: it came after the plan was made".to_owned(),
                },
                (None, None) => "not moved by the plan".to_owned(),
            };
            Some(LeftRunning {
                vmid: g.vmid,
                name: g.name.clone(),
                node: cluster.node(here).name.clone(),
                reason,
            })
        })
        .collect();
    left.sort_by_key(|l| l.vmid);
    left
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::builder::{ClusterBuilder, vm};
    use crate::evacuate::evacuate_node;

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
