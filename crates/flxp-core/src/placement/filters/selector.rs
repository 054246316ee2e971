//! `selector`: `flxp.select.<label>` tags; a node must carry every selected label.

use super::refuse_any;
use crate::placement::registry::BuiltinFilter;
use crate::placement::{Ctx, FilterKind, NodeView, Reason};

/// Registered name.
pub const NAME: &str = "selector";

/// Rejects nodes lacking a selected label.
pub static FILTER: BuiltinFilter = BuiltinFilter::new(NAME, FilterKind::Rule, "the node carries every flxp.select label", check).with_passes(passes).applies_when(applies);

fn applies(ctx: &Ctx) -> bool {
    !ctx.subject.rules.selectors.is_empty()
}

/// The selected labels the node does not carry, in selector order.
fn missing<'a>(ctx: &'a Ctx, node: &'a NodeView) -> impl Iterator<Item = &'a String> {
    ctx.subject
        .rules
        .selectors
        .iter()
        .filter(|l| !node.node.labels.contains(*l))
}

fn passes(ctx: &Ctx, node: &NodeView) -> bool {
    missing(ctx, node).next().is_none()
}

fn check(ctx: &Ctx, node: &NodeView) -> Result<(), Reason> {
    refuse_any(missing(ctx, node).cloned().collect(), |labels| {
        Reason::MissingLabels { labels }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::PlacementOptions;
    use crate::placement::filters::testing::*;
    use crate::testutil::*;

    #[test]
    fn every_selected_label_is_required() {
        let c = ClusterBuilder::new()
            .node(node("a").notes("flxp.label.ssd flxp.label.eu"))
            .node(node("b").notes("flxp.label.ssd"))
            .build();
        let o = PlacementOptions::default();
        let s = new_vm(&c, GIB, 1, &["flxp.select.ssd", "flxp.select.eu"]);
        assert_eq!(verdict(&FILTER, &c, &s, &o, "a"), Ok(()));
        assert_eq!(
            verdict(&FILTER, &c, &s, &o, "b"),
            Err(Reason::MissingLabels {
                labels: vec!["eu".into()]
            })
        );
    }
}
