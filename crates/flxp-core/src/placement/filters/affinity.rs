//! `affinity`: hard affinity groups (`flxp.affinity.<g>`, `plb_affinity_<x>`, positive HA
//! resource-affinity). Running members decide the node: the one holding most of them (ties: first
//! by name, as Proxmox picks). A group with no running member elsewhere constrains nothing.

use crate::placement::registry::BuiltinFilter;
use crate::placement::{Ctx, FilterKind, GroupPresence, NodeView, Reason};

/// Registered name.
pub const NAME: &str = "affinity";

/// Rejects nodes other than the one each hard affinity group runs on.
pub static FILTER: BuiltinFilter = BuiltinFilter::new(NAME, FilterKind::Rule, "hard affinity groups run on this node (or nowhere yet)", check).with_passes(passes).applies_when(applies);

/// Only a group with running members somewhere decides the node.
fn applies(ctx: &Ctx) -> bool {
    GroupPresence::any_running(&ctx.affinity)
}

fn passes(ctx: &Ctx, node: &NodeView) -> bool {
    ctx.affinity
        .iter()
        .all(|p| p.majority().is_none_or(|t| t == node.idx))
}

fn check(ctx: &Ctx, node: &NodeView) -> Result<(), Reason> {
    for p in &ctx.affinity {
        if let Some(target) = p.majority() {
            if target != node.idx {
                return Err(Reason::AffinityElsewhere {
                    group: ctx.rules.group(p.group).name.clone(),
                    node: ctx.cluster.node(target).name.clone(),
                });
            }
        }
    }
    Ok(())
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
