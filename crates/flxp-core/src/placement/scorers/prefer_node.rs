//! `prefer-node`: soft node preferences: `flxp.prefer-node.<node>` tags and the priority classes
//! of HA node-affinity rules (strict or not). Within each preference a node's priority is scaled
//! to 0..1 between the lowest and highest class; the sums are rescaled so the best feasible node
//! scores 100. With the policy's soft-rule weight this makes the highest available class win, as
//! Proxmox HA picks it.

use crate::placement::registry::BuiltinScorer;
use crate::placement::{Ctx, NodeView, min_max};

/// Registered name.
pub const NAME: &str = "prefer-node";

/// Prefers nodes the subject's soft node rules rank higher.
pub static SCORER: BuiltinScorer = BuiltinScorer::each(NAME, "flxp.prefer-node tags and HA node-affinity priority classes", score).applies_when(applies).normalized(min_max);

fn applies(ctx: &Ctx) -> bool {
    !ctx.subject.rules.preferences.is_empty()
}

fn score(ctx: &Ctx, node: &NodeView) -> f64 {
    ctx.subject
        .rules
        .preferences
        .iter()
        .map(|p| {
            let classes = || p.priorities.iter().map(|(_, v)| *v).chain([p.default]);
            let lo = classes().min().unwrap_or(0);
            let hi = classes().max().unwrap_or(0);
            if hi == lo {
                0.0
            } else {
                (p.priority(node.idx) - lo) as f64 / (hi - lo) as f64
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::filters::testing::new_vm;
    use crate::placement::scorers::testing::scores;
    use crate::testutil::*;

    #[test]
    fn preferred_nodes_score_100_and_others_0() {
        let c = ClusterBuilder::new().nodes(&["a", "b", "c"]).build();
        let got = scores(
            &SCORER,
            &c,
            &new_vm(&c, GIB, 1, &["flxp.prefer-node.b"]),
        )
        .unwrap();
        assert_eq!(
            got,
            vec![("a".into(), 0.0), ("b".into(), 100.0), ("c".into(), 0.0)]
        );
        assert!(
            scores(&SCORER, &c, &new_vm(&c, GIB, 1, &[])).is_none(),
            "no preference, no say"
        );
    }

    #[test]
    fn ha_priority_classes_rank_nodes_above_unlisted_ones() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b", "c"])
            .guest(vm(101, "a"))
            .ha_node_affinity("prio", "vm:101", "a:1,b:2", false)
            .build();
        let rules = crate::Rules::compile(&c);
        let s = crate::placement::Subject::guest(
            &c,
            &rules,
            c.guest_idx(101).unwrap(),
            c.node_idx("a").unwrap(),
        );
        let got = scores(&SCORER, &c, &s).unwrap();
        // Priorities 1, 2 and the fallback −1 scale to 2/3, 1, 0.
        let want = [("a", 200.0 / 3.0), ("b", 100.0), ("c", 0.0)];
        for ((n, s), (wn, ws)) in got.iter().zip(want) {
            assert_eq!(n, wn);
            assert!((s - ws).abs() < 1e-4, "{n}: {s} vs {ws}");
        }
    }
}
