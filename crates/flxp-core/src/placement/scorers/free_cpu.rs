//! `free-cpu`: the most idle CPU cores after placement wins (a new VM counts with all its vCPUs).

use crate::placement::registry::BuiltinScorer;
use crate::placement::{Ctx, NodeView};

/// Registered name.
pub const NAME: &str = "free-cpu";

/// Prefers nodes with the most idle cores left.
pub static SCORER: BuiltinScorer = BuiltinScorer::each(NAME, "most idle CPU cores after placement", score);

fn score(ctx: &Ctx, node: &NodeView) -> f64 {
    node.node.maxcpu - node.usage.cpu - ctx.subject.cpu
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::filters::testing::new_vm;
    use crate::placement::scorers::testing::scores;
    use crate::testutil::*;

    #[test]
    fn most_idle_cores_wins() {
        let c = ClusterBuilder::new()
            .node(node("a").cpus(16.0).load(0.5))
            .node(node("b").cpus(8.0).load(0.0))
            .build();
        // Idle after a 2-vCPU VM: a 16 − 8 − 2 = 6, b 8 − 0 − 2 = 6: a tie at 100.
        let got = scores(&SCORER, &c, &new_vm(&c, GIB, 2, &[])).unwrap();
        assert_eq!(got, vec![("a".into(), 100.0), ("b".into(), 100.0)]);
    }
}
