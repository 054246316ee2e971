//! `node-rules`: `flxp.node.<node>` tags, ProxLB pins and strict HA node-affinity. A node must be
//! allowed by every one of them.

use super::refuse_any;
use crate::placement::registry::BuiltinFilter;
use crate::placement::{Ctx, FilterKind, NodeView, Reason};

/// Registered name.
pub const NAME: &str = "node-rules";

/// Rejects nodes that a hard node rule does not allow.
pub static FILTER: BuiltinFilter = BuiltinFilter::new(NAME, FilterKind::Rule, "flxp.node tags, ProxLB pins and strict HA node-affinity allow the node", check).with_passes(passes).applies_when(applies);

fn applies(ctx: &Ctx) -> bool {
    !ctx.subject.rules.node_rules.is_empty()
}

fn passes(ctx: &Ctx, node: &NodeView) -> bool {
    ctx.subject.rules.allows(node.idx)
}

fn check(ctx: &Ctx, node: &NodeView) -> Result<(), Reason> {
    let refusing: Vec<(String, Vec<String>)> = ctx
        .subject
        .rules
        .rules_refusing(node.idx)
        .map(|r| {
            let nodes = r
                .nodes
                .iter()
                .map(|&n| ctx.cluster.node(n).name.clone())
                .collect();
            (r.rule.clone(), nodes)
        })
        .collect();
    refuse_any(refusing, |rules| Reason::NodeRules { rules })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::PlacementOptions;
    use crate::placement::filters::testing::*;
    use crate::testutil::*;

    #[test]
    fn several_node_tags_mean_any_of_them_and_pins_must_also_agree() {
        let c = ClusterBuilder::new().nodes(&["a", "b", "c"]).build();
        let o = PlacementOptions::default();
        let s = new_vm(&c, GIB, 1, &["flxp.node.a", "flxp.node.b", "plb_pin_b"]);
        assert!(
            verdict(&FILTER, &c, &s, &o, "a").is_err(),
            "the pin excludes a"
        );
        assert_eq!(verdict(&FILTER, &c, &s, &o, "b"), Ok(()));
        let err = verdict(&FILTER, &c, &s, &o, "c")
            .unwrap_err()
            .to_string();
        assert_eq!(err, "flxp.node allows only {a, b}; plb_pin allows only {b}");
    }

    #[test]
    fn strict_ha_node_affinity_is_a_hard_rule_and_non_strict_is_not() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b"])
            .guest(vm(101, "a"))
            .guest(vm(102, "a"))
            .ha_node_affinity("pin-a", "vm:101", "a", true)
            .ha_node_affinity("prefer-a", "vm:102", "a:2", false)
            .ha_no_failback("vm:102")
            .build();
        let rules = crate::Rules::compile(&c);
        let b = c.node_idx("b").unwrap();
        assert!(!rules.guest(c.guest_idx(101).unwrap()).allows(b));
        assert!(rules.guest(c.guest_idx(102).unwrap()).allows(b));
    }

    #[test]
    fn with_failback_a_guest_in_its_top_class_stays_in_it() {
        // HA would move it straight back (docs/proxmox-behaviour.md §1.6), so only the top class is
        // allowed.
        let c = ClusterBuilder::new()
            .nodes(&["a", "b", "c", "d"])
            .guest(vm(101, "a"))
            .guest(vm(102, "d"))
            .ha_node_affinity("prefer-ab", "vm:101,vm:102", "a:2,b:2,c:1", false)
            .build();
        let rules = crate::Rules::compile(&c);
        let n = |x: &str| c.node_idx(x).unwrap();
        let r101 = rules.guest(c.guest_idx(101).unwrap());
        assert!(r101.allows(n("a")) && r101.allows(n("b")));
        assert!(!r101.allows(n("c")) && !r101.allows(n("d")));
        assert_eq!(r101.node_rules[0].rule, "ha:prefer-ab (failback)");
        // Off its class, HA moves it itself: no rule is added for flxp to "fix" at the same time.
        assert!(rules.guest(c.guest_idx(102).unwrap()).allows(n("c")));
        // HA keeps resource-affinity before failing back: of two guests that must be apart, one
        // may leave the one-node top class.
        let c = ClusterBuilder::new()
            .nodes(&["a", "b"])
            .guest(vm(101, "a"))
            .guest(vm(102, "a"))
            .ha_node_affinity("prefer-a", "vm:101,vm:102", "a:2", false)
            .ha_resource_affinity("apart", "vm:101,vm:102", "negative")
            .build();
        let rules = crate::Rules::compile(&c);
        let b = c.node_idx("b").unwrap();
        assert!(rules.guest(c.guest_idx(101).unwrap()).allows(b));
        assert!(rules.conflicts.is_empty(), "{:?}", rules.conflicts);
    }
}
