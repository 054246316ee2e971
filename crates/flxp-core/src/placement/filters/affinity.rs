//! `affinity`: hard affinity groups (`flxp.affinity.<g>`, `plb_affinity_<x>`, positive HA
//! resource-affinity). Running members decide the node: the one holding most of them (ties: first
//! by name, as Proxmox picks). A group with no running member elsewhere constrains nothing.

use crate::cluster::NodeIdx;
use crate::constraints::{GroupId, GroupKind};
use crate::placement::registry::StatefulFilter;
use crate::placement::{Ctx, FilterKind, GroupPresence, NodeView, Reason};

/// Registered name.
pub const NAME: &str = "affinity";

/// Rejects nodes other than the one each hard affinity group runs on.
pub static FILTER: StatefulFilter<Targets> = StatefulFilter::new(NAME, FilterKind::Rule, "hard affinity groups run on this node (or nowhere yet)", prepare, check).with_passes(passes);

/// Each hard affinity group with running members, and the node they decide, in group order.
pub struct Targets(Vec<(GroupId, NodeIdx)>);

/// Only a group with running members somewhere decides the node.
fn prepare(ctx: &Ctx) -> Option<Targets> {
    let targets: Vec<(GroupId, NodeIdx)> = GroupPresence::of(ctx, GroupKind::Affinity, true)
        .iter()
        .filter_map(|p| p.majority().map(|t| (p.group, t)))
        .collect();
    (!targets.is_empty()).then_some(Targets(targets))
}

fn passes(_ctx: &Ctx, targets: &Targets, node: &NodeView) -> bool {
    targets.0.iter().all(|&(_, t)| t == node.idx)
}

fn check(ctx: &Ctx, targets: &Targets, node: &NodeView) -> Result<(), Reason> {
    match targets.0.iter().find(|&&(_, t)| t != node.idx) {
        Some(&(group, target)) => Err(Reason::AffinityElsewhere {
            group: ctx.rules.group(group).name.clone(),
            node: ctx.cluster.node(target).name.clone(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::PlacementOptions;
    use crate::placement::filters::testing::*;
    use crate::testutil::*;

    #[test]
    fn running_members_decide_the_node_and_stopped_ones_do_not() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b", "c"])
            .guest(vm(101, "b").tagged("flxp.affinity.app"))
            .guest(vm(102, "c").tagged("flxp.affinity.app").stopped())
            .build();
        let o = PlacementOptions::default();
        let s = new_vm(&c, GIB, 1, &["flxp.affinity.app"]);
        assert_eq!(verdict(&FILTER, &c, &s, &o, "b"), Ok(()));
        assert_eq!(
            verdict(&FILTER, &c, &s, &o, "c"),
            Err(Reason::AffinityElsewhere {
                group: "flxp.affinity.app".into(),
                node: "b".into()
            })
        );
    }

    #[test]
    fn a_split_group_follows_its_majority_and_ties_go_to_the_first_node() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b"])
            .guest(vm(101, "b").tagged("flxp.affinity.app"))
            .guest(vm(102, "a").tagged("flxp.affinity.app"))
            .guest(vm(103, "b").tagged("flxp.affinity.app;flxp.affinity.other"))
            .guest(vm(104, "a").tagged("flxp.affinity.other"))
            .build();
        let o = PlacementOptions::default();
        assert_eq!(
            verdict(
                &FILTER,
                &c,
                &new_vm(&c, GIB, 1, &["flxp.affinity.app"]),
                &o,
                "b"
            ),
            Ok(())
        );
        assert_eq!(
            verdict(
                &FILTER,
                &c,
                &new_vm(&c, GIB, 1, &["flxp.affinity.other"]),
                &o,
                "a"
            ),
            Ok(())
        );
    }
}
