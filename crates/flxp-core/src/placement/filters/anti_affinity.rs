//! `anti-affinity`: hard anti-affinity groups (`flxp.anti-affinity.<g>`, `plb_anti_affinity_<x>`,
//! negative HA resource-affinity). A node with a running member takes no other member.

use crate::constraints::GroupKind;
use crate::placement::registry::StatefulFilter;
use crate::placement::{Ctx, FilterKind, GroupPresence, NodeView, Reason};

/// Registered name.
pub const NAME: &str = "anti-affinity";

/// Rejects nodes already running a member of one of the subject's hard anti-affinity groups.
pub static FILTER: StatefulFilter<Present> = StatefulFilter::new(NAME, FilterKind::Rule, "no member of a hard anti-affinity group runs here", prepare, check).with_passes(passes);

/// The subject's hard anti-affinity groups with running members, in group order.
pub struct Present(Vec<GroupPresence>);

fn prepare(ctx: &Ctx) -> Option<Present> {
    let mut groups = GroupPresence::of(ctx, GroupKind::AntiAffinity, true);
    groups.retain(|p| !p.nodes.is_empty());
    (!groups.is_empty()).then_some(Present(groups))
}

fn passes(_ctx: &Ctx, present: &Present, node: &NodeView) -> bool {
    present.0.iter().all(|p| p.on(node.idx).is_empty())
}

fn check(ctx: &Ctx, present: &Present, node: &NodeView) -> Result<(), Reason> {
    for p in &present.0 {
        let here = p.on(node.idx);
        if !here.is_empty() {
            return Err(Reason::AntiAffinity {
                group: ctx.rules.group(p.group).name.clone(),
                vmids: here.to_vec(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{Filter, PlacementOptions};
    use crate::placement::filters::testing::*;
    use crate::testutil::*;

    #[test]
    fn a_node_with_a_running_member_is_rejected() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b", "c"])
            .guest(vm(101, "a").tagged("flxp.anti-affinity.web"))
            .guest(vm(102, "b").tagged("flxp.anti-affinity.web").stopped())
            .build();
        let o = PlacementOptions::default();
        let s = new_vm(&c, GIB, 1, &["flxp.anti-affinity.web"]);
        assert_eq!(
            verdict(&FILTER, &c, &s, &o, "a"),
            Err(Reason::AntiAffinity {
                group: "flxp.anti-affinity.web".into(),
                vmids: vec![101]
            })
        );
        assert_eq!(
            verdict(&FILTER, &c, &s, &o, "b"),
            Ok(()),
            "stopped members do not count"
        );
        assert_eq!(verdict(&FILTER, &c, &s, &o, "c"), Ok(()));
    }

    #[test]
    fn negative_ha_resource_affinity_is_enforced() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b"])
            .guest(vm(101, "a"))
            .guest(vm(102, "b"))
            .ha_resource_affinity("apart", "vm:101,vm:102", "negative")
            .build();
        let rules = crate::Rules::compile(&c);
        let state = crate::State::new(&c);
        let s = crate::placement::Subject::guest(
            &c,
            &rules,
            c.guest_idx(102).unwrap(),
            c.node_idx("b").unwrap(),
        );
        let opts = o();
        let ctx = Ctx::new(&c, &rules, &state, &opts, &s);
        assert!(
            FILTER
                .check(&ctx, &ctx.view(c.node_idx("a").unwrap()))
                .is_err()
        );
    }

    fn o() -> PlacementOptions {
        PlacementOptions::default()
    }
}
