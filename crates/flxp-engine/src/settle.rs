//! What a round looks at once its queue is done, before it ends: migrations in flight that it did
//! not start and that its goal depends on (a `qmigrate` left running by a flxp that was killed,
//! an admin's), and guests that came onto the nodes it empties after its plan was made.
//!
//! A plan leaves a guest in flight where it is (locked), and with it every partner of its
//! affinity group; a guest in flight onto a node being emptied lands there after the plan. The
//! round waits for such migrations to end and plans again on the settled cluster, so that the
//! partners follow and the node ends empty. Pure: the round reads and waits (`round.rs`).

use std::collections::BTreeSet;
use std::fmt;

use flxp_core::Model;
use flxp_core::cluster::{Guest, NodeIdx};
use flxp_core::constraints::GroupKind;

use crate::planning::Goal;

/// A migration in flight that the round did not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InFlight {
    /// The guest.
    pub vmid: u32,
    /// The node it is leaving.
    pub from: String,
    /// Where it goes, when the task list says.
    pub to: Option<String>,
}

impl fmt::Display for InFlight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.to {
            Some(to) => write!(f, "{} ({} → {to})", self.vmid, self.from),
            None => write!(f, "{} (from {})", self.vmid, self.from),
        }
    }
}

/// A running guest on a node the round empties that no plan of the round has seen there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Arrived {
    /// The guest.
    pub vmid: u32,
    /// The node it is on.
    pub node: String,
}

/// What keeps a round from ending on a fresh read.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Unsettled {
    /// Migrations in flight to wait for, then plan again.
    pub in_flight: Vec<InFlight>,
    /// Guests to plan again for.
    pub arrived: Vec<Arrived>,
}

/// The nodes `goal` empties on `model`: those it names, or (none named) those in maintenance.
pub(crate) fn emptied(model: &Model, goal: &Goal) -> Vec<NodeIdx> {
    match goal {
        Goal::Evacuate { nodes, .. } if nodes.is_empty() => model
            .cluster
            .node_indexes()
            .filter(|&n| model.cluster.node(n).in_maintenance())
            .collect(),
        Goal::Evacuate { nodes, .. } => nodes.iter().filter_map(|n| model.node_named(n)).collect(),
        Goal::Balance(_) | Goal::ReturnHome { .. } => Vec::new(),
    }
}

/// Whether a migration of the guest runs now: its task, or its `migrate` lock while the task
/// list does not show the task yet.
pub(crate) fn in_flight(model: &Model, g: &Guest) -> bool {
    model.cluster.tasks.is_migrating(g.vmid) || g.lock.as_deref() == Some("migrate")
}

/// What on `model` keeps a round for `goal` from ending: migrations in flight of guests not in
/// `skip` (the round's own, and those it already waited or planned for) that leave or reach a
/// node it empties or move a member of an affinity group with partners; and running guests on the
/// nodes it empties that no plan of the round named (`known`).
pub(crate) fn unsettled(
    model: &Model,
    goal: &Goal,
    skip: &BTreeSet<u32>,
    known: &BTreeSet<u32>,
) -> Unsettled {
    let cluster = &model.cluster;
    let emptied = emptied(model, goal);
    let mut found = Unsettled::default();
    for gi in cluster.guest_indexes() {
        let g = cluster.guest(gi);
        if skip.contains(&g.vmid) || g.template {
            continue;
        }
        if in_flight(model, g) {
            let to = cluster
                .tasks
                .migration_target(g.vmid)
                .map(str::to_owned)
                .or_else(|| g.migrating_to().map(|n| cluster.node(n).name.clone()));
            let touches_emptied = emptied.contains(&g.node)
                || to
                    .as_deref()
                    .and_then(|t| cluster.node_idx(t))
                    .is_some_and(|t| emptied.contains(&t));
            let partners = model.rules.guest(gi).groups.iter().any(|&id| {
                let group = model.rules.group(id);
                group.kind == GroupKind::Affinity && group.members.len() > 1
            });
            if touches_emptied || partners {
                found.in_flight.push(InFlight {
                    vmid: g.vmid,
                    from: cluster.node(g.node).name.clone(),
                    to,
                });
            }
        } else if g.running && emptied.contains(&g.node) && !known.contains(&g.vmid) {
            found.arrived.push(Arrived {
                vmid: g.vmid,
                node: cluster.node(g.node).name.clone(),
            });
        }
    }
    found
}

/// The guests listed, for a sentence: `108 (pve2 → pve1), 116 (pve2 → pve6)`.
pub(crate) fn list<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use flxp_core::balance::{BalanceOptions, EvacuateOptions};
    use flxp_core::builder::{ClusterBuilder, vm};

    use super::*;

    fn evacuate(node: &str) -> Goal {
        Goal::Evacuate {
            nodes: vec![node.into()],
            options: EvacuateOptions::default(),
        }
    }

    fn in_flight(vmid: u32, from: &str, to: &str) -> InFlight {
        InFlight {
            vmid,
            from: from.into(),
            to: Some(to.into()),
        }
    }

    #[test]
    fn a_group_member_in_flight_is_waited_for_and_a_lone_guest_elsewhere_is_not() {
        // 101 and 102 must share a node; someone else moves 101 from b to c, and 103 from c to d.
        let m = Model::from_cluster(
            ClusterBuilder::new()
                .nodes(&["a", "b", "c", "d"])
                .guest(vm(101, "b").tagged("flxp.affinity.cache").locked("migrate"))
                .guest(vm(102, "b").tagged("flxp.affinity.cache"))
                .guest(vm(103, "c").locked("migrate"))
                .migrating(101, "b", "c")
                .migrating(103, "c", "d")
                .build(),
        );
        let none = BTreeSet::new();
        let found = unsettled(&m, &evacuate("a"), &none, &none);
        assert_eq!(found.in_flight, [in_flight(101, "b", "c")]);
        assert_eq!(found.arrived, []);
        assert_eq!(list(&found.in_flight), "101 (b → c)");
        // A migration the round started itself is never waited for.
        let ours = BTreeSet::from([101]);
        assert_eq!(
            unsettled(&m, &evacuate("a"), &ours, &none),
            Unsettled::default()
        );
    }

    #[test]
    fn on_a_node_being_emptied_a_guest_arriving_is_waited_for_and_one_no_plan_named_is_planned_for()
    {
        // 104 migrates onto a; 105 is on a and no plan named it; 106 is on a and was planned.
        let m = Model::from_cluster(
            ClusterBuilder::new()
                .nodes(&["a", "b", "c"])
                .guest(vm(104, "c").locked("migrate"))
                .guest(vm(105, "a"))
                .guest(vm(106, "a"))
                .migrating(104, "c", "a")
                .build(),
        );
        let known = BTreeSet::from([106]);
        let found = unsettled(&m, &evacuate("a"), &BTreeSet::new(), &known);
        assert_eq!(found.in_flight, [in_flight(104, "c", "a")]);
        assert_eq!(
            found.arrived,
            [Arrived {
                vmid: 105,
                node: "a".into()
            }]
        );
        // Balancing empties no node, and 104 has no partner to wait for.
        let balance = Goal::Balance(BalanceOptions::default());
        assert_eq!(
            unsettled(&m, &balance, &BTreeSet::new(), &known),
            Unsettled::default()
        );
    }
}
