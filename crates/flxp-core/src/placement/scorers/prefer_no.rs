//! `prefer-no`: soft taints (`flxp.prefer-no.<t>` in node notes). A node with an untolerated soft
//! taint scores 0, others 100: avoided unless nothing else fits.

use crate::cluster::Node;
use crate::placement::registry::BuiltinScorer;
use crate::placement::{Ctx, NodeView, as_is};

/// Registered name.
pub const NAME: &str = "prefer-no";

/// Avoids nodes with soft taints the subject does not tolerate.
pub static SCORER: BuiltinScorer = BuiltinScorer::each(NAME, "nodes without untolerated flxp.prefer-no taints", score).applies_when(applies).normalized(as_is);

/// Whether `node` has a soft taint the subject does not tolerate.
fn avoided(ctx: &Ctx, node: &Node) -> bool {
    node.prefer_no.iter().any(|t| !ctx.subject.rules.tolerates(t))
}

fn applies(ctx: &Ctx) -> bool {
    ctx.cluster.nodes().iter().any(|n| avoided(ctx, n))
}

fn score(ctx: &Ctx, node: &NodeView) -> f64 {
    if avoided(ctx, node.node) { 0.0 } else { 100.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::filters::testing::new_vm;
    use crate::placement::scorers::testing::scores;
    use crate::testutil::*;

    #[test]
    fn soft_tainted_node_scores_zero_unless_tolerated() {
        let c = ClusterBuilder::new()
            .node(node("a").notes("flxp.prefer-no.batch"))
            .node(node("b"))
            .build();
        let got = scores(&SCORER, &c, &new_vm(&c, GIB, 1, &[])).unwrap();
        assert_eq!(got, vec![("a".into(), 0.0), ("b".into(), 100.0)]);
        assert!(scores(&SCORER, &c, &new_vm(&c, GIB, 1, &["flxp.tolerate.batch"])).is_none());
    }
}
