//! `maintenance`: a node being emptied takes nothing new.

use crate::placement::registry::BuiltinFilter;
use crate::placement::{Ctx, FilterKind, NodeView, Reason};

/// Registered name.
pub const NAME: &str = "maintenance";

/// Rejects nodes in maintenance (notes, Proxmox HA, or requested).
pub static FILTER: BuiltinFilter = BuiltinFilter::new(NAME, FilterKind::Rule, "the node is not in maintenance", check).with_passes(passes);

fn passes(_ctx: &Ctx, node: &NodeView) -> bool {
    !node.node.in_maintenance()
}

fn check(_ctx: &Ctx, node: &NodeView) -> Result<(), Reason> {
    if node.node.is_being_freed() {
        Err(Reason::BeingFreed)
    } else if node.node.in_maintenance() {
        Err(Reason::Maintenance {
            sources: node
                .node
                .maintenance
                .iter()
                .map(|m| m.describe().to_owned())
                .collect(),
        })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::filters::testing::*;
    use crate::testutil::*;

    #[test]
    fn node_in_maintenance_is_rejected_naming_the_source() {
        let c = ClusterBuilder::new()
            .node(node("a").notes("flxp.maintenance"))
            .node(node("b").hastate("maintenance"))
            .node(node("c"))
            .build();
        let a = plain_verdict(&FILTER, &c, "a")
            .unwrap_err()
            .to_string();
        assert!(a.contains("flxp.maintenance in node notes"), "{a}");
        let b = plain_verdict(&FILTER, &c, "b")
            .unwrap_err()
            .to_string();
        assert!(b.contains("Proxmox HA"), "{b}");
        assert_eq!(plain_verdict(&FILTER, &c, "c"), Ok(()));
    }

    #[test]
    fn a_node_being_freed_takes_nothing_and_says_so() {
        let mut c = ClusterBuilder::new().node(node("a")).node(node("b")).build();
        let a = c.node_idx("a").unwrap();
        c.empty_for(a, crate::cluster::MaintenanceSource::Consolidation);
        let refused = plain_verdict(&FILTER, &c, "a").unwrap_err();
        assert_eq!(refused, Reason::BeingFreed);
        assert!(refused.reads_alone());
        assert_eq!(refused.to_string(), "being freed by this plan");
        assert_eq!(plain_verdict(&FILTER, &c, "b"), Ok(()));
    }
}
