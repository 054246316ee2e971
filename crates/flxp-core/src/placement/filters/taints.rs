//! `taints`: a node tainted `flxp.taint.<t>` takes no new guest and no migration unless the guest
//! tolerates `<t>`. Guests already there stay (that is not a violation).

use super::refuse_any;
use crate::cluster::Node;
use crate::constraints::GuestRules;
use crate::placement::registry::BuiltinFilter;
use crate::placement::{Ctx, FilterKind, NodeView, Reason};

/// Registered name.
pub const NAME: &str = "taints";

/// Rejects nodes with a taint the subject does not tolerate.
pub static FILTER: BuiltinFilter = BuiltinFilter::new(NAME, FilterKind::Rule, "every flxp.taint of the node is tolerated", check).with_passes(passes);

/// The node's hard taints that the rules do not tolerate.
pub fn untolerated(rules: &GuestRules, node: &Node) -> Vec<String> {
    node.taints
        .iter()
        .filter(|t| !rules.tolerates(t))
        .cloned()
        .collect()
}

fn passes(ctx: &Ctx, node: &NodeView) -> bool {
    node.node
        .taints
        .iter()
        .all(|t| ctx.subject.rules.tolerates(t))
}

fn check(ctx: &Ctx, node: &NodeView) -> Result<(), Reason> {
    if node.node.taints.is_empty() {
        return Ok(());
    }
    refuse_any(untolerated(&ctx.subject.rules, node.node), |taints| {
        Reason::Tainted { taints }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::PlacementOptions;
    use crate::placement::filters::testing::*;
    use crate::testutil::*;

    #[test]
    fn untolerated_taint_rejects_node_and_toleration_admits_it() {
        let c = ClusterBuilder::new()
            .node(node("gpu").notes("flxp.taint.gpu"))
            .node(node("plain").notes("flxp.prefer-no.batch"))
            .build();
        let o = PlacementOptions::default();
        let plain_vm = new_vm(&c, GIB, 1, &[]);
        assert_eq!(
            verdict(&FILTER, &c, &plain_vm, &o, "gpu"),
            Err(Reason::Tainted {
                taints: vec!["gpu".into()]
            })
        );
        assert_eq!(
            verdict(&FILTER, &c, &plain_vm, &o, "plain"),
            Ok(()),
            "prefer-no is soft"
        );
        let tolerant = new_vm(&c, GIB, 1, &["flxp.tolerate.gpu"]);
        assert_eq!(verdict(&FILTER, &c, &tolerant, &o, "gpu"), Ok(()));
    }
}
