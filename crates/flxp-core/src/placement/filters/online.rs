//! `online`: only nodes that report `online` take guests, and, where HA is in use, only those
//! whose HA node state is `online` too (or `maintenance`, which the maintenance filter judges):
//! a node HA is fencing or has lost track of may be gone at any moment.

use crate::placement::registry::BuiltinFilter;
use crate::placement::{Ctx, FilterKind, NodeView, Reason};

/// Registered name.
pub const NAME: &str = "online";

/// Rejects nodes that are offline or unknown.
pub static FILTER: BuiltinFilter = BuiltinFilter::new(NAME, FilterKind::Availability, "the node reports online", check).with_passes(passes);

fn passes(_ctx: &Ctx, node: &NodeView) -> bool {
    node.node.is_online() && node.node.ha_lost().is_none()
}

fn check(_ctx: &Ctx, node: &NodeView) -> Result<(), Reason> {
    if !node.node.is_online() {
        return Err(Reason::NotOnline {
            status: node.node.status.as_str().to_owned(),
        });
    }
    match node.node.ha_lost() {
        Some(state) => Err(Reason::HaNotOnline {
            state: state.to_owned(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::filters::testing::*;
    use crate::testutil::*;

    #[test]
    fn offline_node_is_rejected_with_its_status() {
        let c = ClusterBuilder::new()
            .node(node("a"))
            .node(node("b").offline())
            .build();
        assert_eq!(plain_verdict(&FILTER, &c, "a"), Ok(()));
        assert_eq!(
            plain_verdict(&FILTER, &c, "b"),
            Err(Reason::NotOnline {
                status: "offline".into()
            })
        );
    }

    #[test]
    fn a_node_ha_fences_or_lost_is_rejected_with_its_ha_state() {
        let mut c = ClusterBuilder::new().nodes(&["a", "b", "c", "d"]).build();
        for (name, state) in [("a", "online"), ("b", "fence"), ("c", "unknown")] {
            let i = c.node_idx(name).unwrap();
            c.node_mut(i).ha_state = Some(state.into());
        }
        assert_eq!(plain_verdict(&FILTER, &c, "a"), Ok(()));
        assert_eq!(
            plain_verdict(&FILTER, &c, "b"),
            Err(Reason::HaNotOnline {
                state: "fence".into()
            })
        );
        assert!(plain_verdict(&FILTER, &c, "c").is_err());
        assert_eq!(plain_verdict(&FILTER, &c, "d"), Ok(()), "no HA in use");
    }
}
