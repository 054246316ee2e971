//! `spread`: the node running the fewest guests wins.

use crate::placement::registry::BuiltinScorer;
use crate::placement::{Ctx, NodeView, min_max};

/// Registered name.
pub const NAME: &str = "spread";

/// Prefers nodes with fewer running guests.
pub static SCORER: BuiltinScorer = BuiltinScorer::each(NAME, "fewest running guests", score).normalized(min_max);

fn score(_ctx: &Ctx, node: &NodeView) -> f64 {
    -f64::from(node.usage.guests)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::filters::testing::new_vm;
    use crate::placement::scorers::testing::scores;
    use crate::testutil::*;

    #[test]
    fn fewest_running_guests_wins() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b", "c"])
            .guest(vm(101, "a"))
            .guest(vm(102, "a"))
            .guest(vm(103, "b"))
            .guest(vm(104, "c").stopped())
            .build();
        let got = scores(&SCORER, &c, &new_vm(&c, GIB, 1, &[])).unwrap();
        assert_eq!(
            got,
            vec![("a".into(), 0.0), ("b".into(), 50.0), ("c".into(), 100.0)]
        );
    }
}
