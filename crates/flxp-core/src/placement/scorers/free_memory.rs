//! `free-memory`: the most available memory after placement wins (the default policy). Scores are
//! proportional to the best node's free bytes, so a node with half as much free scores 50.

use crate::placement::filters::memory::available;
use crate::placement::registry::BuiltinScorer;
use crate::placement::{Ctx, NodeView};

/// Registered name.
pub const NAME: &str = "free-memory";

/// Prefers nodes with the most bytes left after placement.
pub static SCORER: BuiltinScorer = BuiltinScorer::each(NAME, "most available memory after placement", score);

fn score(ctx: &Ctx, node: &NodeView) -> f64 {
    available(ctx, node).saturating_sub(ctx.subject.memory) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::filters::testing::new_vm;
    use crate::placement::scorers::testing::scores;
    use crate::testutil::*;

    #[test]
    fn most_free_bytes_after_placement_scores_100_and_others_proportionally() {
        let c = ClusterBuilder::new()
            .node(node("a").memory(64 * GIB).used(54 * GIB))
            .node(node("b").memory(32 * GIB).used(10 * GIB))
            .node(node("c").memory(16 * GIB).used(4 * GIB))
            .build();
        // Free after a 2 GiB VM: a 8, b 20, c 10.
        let got = scores(&SCORER, &c, &new_vm(&c, 2 * GIB, 1, &[])).unwrap();
        assert_eq!(
            got,
            vec![("a".into(), 40.0), ("b".into(), 100.0), ("c".into(), 50.0)]
        );
    }
}
