//! `online`: only nodes that report `online` take guests.

use crate::placement::{Ctx, Filter, FilterKind, NodeView, Reason};

/// Registered name.
pub const NAME: &str = "online";

/// Rejects nodes that are offline or unknown.
#[derive(Debug, Default)]
pub struct Online;

impl Filter for Online {
    fn name(&self) -> &'static str {
        NAME
    }
    fn kind(&self) -> FilterKind {
        FilterKind::Availability
    }
    fn passes(&self, _ctx: &Ctx, node: &NodeView) -> bool {
        node.node.is_online()
    }
    fn check(&self, _ctx: &Ctx, node: &NodeView) -> Result<(), Reason> {
        if node.node.is_online() {
            Ok(())
        } else {
            Err(Reason::NotOnline {
                status: node.node.status.as_str().to_owned(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::PlacementOptions;
    use crate::placement::filters::testing::*;
    use crate::testutil::*;

    #[test]
    fn offline_node_is_rejected_with_its_status() {
        let c = ClusterBuilder::new()
            .node(node("a"))
            .node(node("b").offline())
            .build();
        let s = new_vm(&c, GIB, 1, &[]);
        let o = PlacementOptions::default();
        assert_eq!(verdict(&Online, &c, &s, &o, "a"), Ok(()));
        assert_eq!(
            verdict(&Online, &c, &s, &o, "b"),
            Err(Reason::NotOnline {
                status: "offline".into()
            })
        );
    }
}
