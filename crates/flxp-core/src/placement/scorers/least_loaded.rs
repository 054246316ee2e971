//! `least-loaded`: the node whose memory is least used, as a share of its size, after placement
//! wins. Unlike `free-memory` (absolute bytes), a big node does not take everything while a small
//! one sits idle: guests spread so the nodes' load percentages even out, which is what the spread
//! measure of balancing rewards. Evacuation uses it by default.

use crate::placement::registry::BuiltinScorer;
use crate::placement::{Ctx, NodeView, min_max};

/// Registered name.
pub const NAME: &str = "least-loaded";

/// Prefers the node with the lowest memory share after placement.
pub static SCORER: BuiltinScorer = BuiltinScorer::each(NAME, "lowest memory share after placement (evens out load percentages)", score).normalized(min_max);

fn score(ctx: &Ctx, node: &NodeView) -> f64 {
    if node.node.maxmem == 0 {
        return f64::MIN;
    }
    -((node.usage.mem + ctx.subject.memory) as f64 / node.node.maxmem as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::filters::testing::new_vm;
    use crate::placement::scorers::testing::scores;
    use crate::testutil::*;

    #[test]
    fn lowest_share_after_placement_wins_not_most_bytes() {
        let c = ClusterBuilder::new()
            .node(node("big").memory(384 * GIB).used(120 * GIB))
            .node(node("small").memory(128 * GIB).used(13 * GIB))
            .build();
        // After 10 GiB: big 130/384 = 33.9 %, small 23/128 = 18.0 %: small wins although big has
        // more bytes free.
        let got = scores(&SCORER, &c, &new_vm(&c, 10 * GIB, 1, &[])).unwrap();
        assert_eq!(got, vec![("big".into(), 0.0), ("small".into(), 100.0)]);
    }
}
