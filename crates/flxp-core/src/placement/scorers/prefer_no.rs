//! `prefer-no`: soft taints (`flxp.prefer-no.<t>` in node notes). A node with an untolerated soft
//! taint scores 0, others 100: avoided unless nothing else fits.

use crate::placement::{Ctx, NodeView, Scorer};
use crate::placement::scorers::Registered;

/// Registered name.
pub const NAME: &str = "prefer-no";

/// Avoids nodes with soft taints the subject does not tolerate.
#[derive(Debug, Default)]
pub struct PreferNo;

impl Registered for PreferNo {
    const NAME: &'static str = NAME;
    const DOC: &'static str = "nodes without untolerated flxp.prefer-no taints";
}

impl Scorer for PreferNo {
    fn name(&self) -> &'static str {
        NAME
    }
    fn applies(&self, ctx: &Ctx) -> bool {
        ctx.cluster
            .nodes()
            .iter()
            .any(|n| n.prefer_no.iter().any(|t| !ctx.subject.rules.tolerates(t)))
    }
    fn score(&self, ctx: &Ctx, node: &NodeView) -> f64 {
        if node
            .node
            .prefer_no
            .iter()
            .any(|t| !ctx.subject.rules.tolerates(t))
        {
            0.0
        } else {
            100.0
        }
    }
    fn normalize(&self, _scores: &mut [f64]) {}
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
        let got = scores(&PreferNo, &c, &new_vm(&c, GIB, 1, &[])).unwrap();
        assert_eq!(got, vec![("a".into(), 0.0), ("b".into(), 100.0)]);
        assert!(scores(&PreferNo, &c, &new_vm(&c, GIB, 1, &["flxp.tolerate.batch"])).is_none());
    }
}
