//! `prefer-affinity` and `prefer-anti-affinity`: soft VM-VM groups. Nodes with more running members
//! of a soft affinity group score higher; nodes with members of a soft anti-affinity group lower.

use crate::placement::registry::BuiltinScorer;
use crate::placement::{Ctx, GroupPresence, NodeView, min_max};

/// Registered name of the soft affinity scorer.
pub const NAME: &str = "prefer-affinity";
/// Registered name of the soft anti-affinity scorer.
pub const ANTI_NAME: &str = "prefer-anti-affinity";

fn members_on(groups: &[GroupPresence], node: &NodeView) -> f64 {
    groups.iter().map(|p| p.on(node.idx).len() as f64).sum()
}

/// Prefers nodes holding members of the subject's soft affinity groups.
pub static AFFINITY: BuiltinScorer = BuiltinScorer::each(NAME, "nodes holding members of soft affinity groups", affinity_score).applies_when(affinity_applies).normalized(min_max);

fn affinity_applies(ctx: &Ctx) -> bool {
    GroupPresence::any_running(&ctx.prefer_affinity)
}

fn affinity_score(ctx: &Ctx, node: &NodeView) -> f64 {
    members_on(&ctx.prefer_affinity, node)
}

/// Prefers nodes without members of the subject's soft anti-affinity groups.
pub static ANTI_AFFINITY: BuiltinScorer = BuiltinScorer::each(ANTI_NAME, "nodes without members of soft anti-affinity groups", anti_affinity_score).applies_when(anti_affinity_applies).normalized(min_max);

fn anti_affinity_applies(ctx: &Ctx) -> bool {
    GroupPresence::any_running(&ctx.prefer_anti_affinity)
}

fn anti_affinity_score(ctx: &Ctx, node: &NodeView) -> f64 {
    -members_on(&ctx.prefer_anti_affinity, node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::filters::testing::new_vm;
    use crate::placement::scorers::testing::scores;
    use crate::testutil::*;

    fn cluster() -> crate::Cluster {
        ClusterBuilder::new()
            .nodes(&["a", "b", "c"])
            .guest(vm(101, "a").tagged("flxp.prefer-affinity.cache;flxp.prefer-anti-affinity.web"))
            .guest(vm(102, "a").tagged("flxp.prefer-affinity.cache"))
            .guest(vm(103, "b").tagged("flxp.prefer-affinity.cache;flxp.prefer-anti-affinity.web"))
            .build()
    }

    /// The scores of a new VM tagged `tag` on [`cluster`].
    fn scores_on_cluster(scorer: &BuiltinScorer, tag: &str) -> Vec<(String, f64)> {
        let c = cluster();
        scores(scorer, &c, &new_vm(&c, GIB, 1, &[tag])).unwrap()
    }

    #[test]
    fn soft_affinity_prefers_where_most_members_run() {
        assert_eq!(
            scores_on_cluster(&AFFINITY, "flxp.prefer-affinity.cache"),
            vec![("a".into(), 100.0), ("b".into(), 50.0), ("c".into(), 0.0)]
        );
    }

    #[test]
    fn soft_anti_affinity_avoids_members() {
        assert_eq!(
            scores_on_cluster(&ANTI_AFFINITY, "flxp.prefer-anti-affinity.web"),
            vec![("a".into(), 0.0), ("b".into(), 0.0), ("c".into(), 100.0)]
        );
    }
}
