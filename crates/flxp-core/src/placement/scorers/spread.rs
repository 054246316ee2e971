//! `spread`: the node running the fewest guests wins.

use crate::placement::{Ctx, NodeView, Scorer, min_max};
use crate::placement::scorers::Registered;

/// Registered name.
pub const NAME: &str = "spread";

/// Prefers nodes with fewer running guests.
#[derive(Debug, Default)]
pub struct Spread;

impl Registered for Spread {
    const NAME: &'static str = NAME;
    const DOC: &'static str = "fewest running guests";
}

impl Scorer for Spread {
    fn name(&self) -> &'static str {
        NAME
    }
    fn score(&self, _ctx: &Ctx, node: &NodeView) -> f64 {
        -f64::from(node.usage.guests)
    }
    fn normalize(&self, scores: &mut [f64]) {
        min_max(scores);
    }
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
        let got = scores(&Spread, &c, &new_vm(&c, GIB, 1, &[])).unwrap();
        assert_eq!(
            got,
            vec![("a".into(), 0.0), ("b".into(), 50.0), ("c".into(), 100.0)]
        );
    }
}
