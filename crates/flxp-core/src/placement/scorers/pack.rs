//! `pack`: the most allocated node that still fits wins (consolidation). Allocation is memory
//! used after placement as a share of the node's memory.

use crate::placement::registry::BuiltinScorer;
use crate::placement::{Ctx, NodeView};

/// Registered name.
pub const NAME: &str = "pack";

/// Prefers the fullest nodes.
pub static SCORER: BuiltinScorer = BuiltinScorer::each(NAME, "most allocated memory that still fits (consolidation)", score);

fn score(ctx: &Ctx, node: &NodeView) -> f64 {
    if node.node.maxmem == 0 {
        return 0.0;
    }
    100.0 * (node.usage.mem + ctx.subject.memory) as f64 / node.node.maxmem as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::filters::testing::new_vm;
    use crate::placement::scorers::testing::scores;
    use crate::testutil::*;

    #[test]
    fn fullest_node_wins() {
        let c = ClusterBuilder::new()
            .node(node("a").memory(100 * GIB).used(20 * GIB))
            .node(node("b").memory(100 * GIB).used(70 * GIB))
            .build();
        let got = scores(&SCORER, &c, &new_vm(&c, 10 * GIB, 1, &[])).unwrap();
        assert_eq!(got, vec![("a".into(), 37.5), ("b".into(), 100.0)]);
    }
}
