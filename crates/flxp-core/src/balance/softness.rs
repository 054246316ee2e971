//! Soft rules during balancing: a balancing move may not leave a guest worse off under its own
//! preferences (preferred nodes, soft affinity and anti-affinity, `prefer-no` taints), unless a
//! configured `soft-weight` says the imbalance it removes is worth more ([`worth_trading`]).
//!
//! Fixes and evacuation rank targets with the placement policy, where soft rules already weigh in;
//! balancing picks targets by load, so without this check it would happily move a guest off its
//! preferred node and the next placement decision would want it back.

use crate::cluster::NodeIdx;
use crate::placement::Ctx;

/// How many of the subject's soft rules a node fails (0 is best).
pub(crate) fn penalty(ctx: &Ctx, node: NodeIdx) -> usize {
    let rules = &ctx.subject.rules;
    let mut p = 0;
    for pref in &rules.preferences {
        let best = pref
            .priorities
            .iter()
            .map(|(_, v)| *v)
            .chain([pref.default])
            .max()
            .unwrap_or(pref.default);
        if pref.priority(node) < best {
            p += 1;
        }
    }
    p += ctx
        .prefer_affinity
        .iter()
        .filter(|g| !g.nodes.is_empty() && g.on(node).is_empty())
        .count();
    p += ctx
        .prefer_anti_affinity
        .iter()
        .map(|g| g.on(node).len())
        .sum::<usize>();
    p += ctx
        .cluster
        .node(node)
        .prefer_no
        .iter()
        .filter(|t| !rules.tolerates(t))
        .count();
    p
}

/// Whether a balancing move that leaves `worse` more soft rules unmet is worth the `reduction` of
/// the measure it brings: always when none is worse, never without a weight, else when the
/// reduction is at least weight × `worse`.
pub(crate) fn worth_trading(weight: Option<f64>, worse: usize, reduction: f64) -> bool {
    worse == 0 || weight.is_some_and(|w| reduction + 1e-9 >= w * worse as f64)
}

/// The note a migration's reason gets when it leaves soft rules unmet for balance ("" if none).
pub(crate) fn traded(weight: Option<f64>, worse: usize) -> String {
    match (worse, weight) {
        (0, _) | (_, None) => String::new(),
        (n, Some(w)) => format!(
            "; trades {n} soft rule{} (soft-weight {w} per rule) for balance",
            if n == 1 { "" } else { "s" }
        ),
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::placement::{PlacementOptions, Subject};
    use crate::testutil::*;
    use crate::{Rules, State};

    #[test]
    fn each_unmet_soft_rule_counts_once_per_rule_or_member() {
        let c = ClusterBuilder::new()
            .node(node("a"))
            .node(node("b").notes("flxp.prefer-no.batch"))
            .node(node("c"))
            .guest(vm(101, "a").tagged("flxp.prefer-node.a;flxp.prefer-affinity.app"))
            .guest(vm(102, "a").tagged("flxp.prefer-affinity.app"))
            .guest(vm(103, "c").tagged("flxp.prefer-anti-affinity.x"))
            .guest(vm(104, "c").tagged("flxp.prefer-anti-affinity.x"))
            .build();
        let r = Rules::compile(&c);
        let s = State::new(&c);
        let o = PlacementOptions::default();
        let n = |name: &str| c.node_idx(name).unwrap();
        let g = c.guest_idx(101).unwrap();
        let subject = Subject::guest(&c, &r, g, n("a"));
        let ctx = Ctx::new(&c, &r, &s, &o, &subject);
        assert_eq!(penalty(&ctx, n("a")), 0);
        assert_eq!(
            penalty(&ctx, n("b")),
            3,
            "not preferred, away from 102, prefer-no"
        );
        assert_eq!(penalty(&ctx, n("c")), 2);
        let g = c.guest_idx(103).unwrap();
        let subject = Subject::guest(&c, &r, g, n("c"));
        let ctx = Ctx::new(&c, &r, &s, &o, &subject);
        assert_eq!(penalty(&ctx, n("c")), 1, "104 is here");
        assert_eq!(penalty(&ctx, n("a")), 0);
    }
}
