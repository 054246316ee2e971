//! Building the node stats the CRS math scores, the way each Proxmox CRS mode does (§1.3-1.4).
//!
//! - Static ([`static_node_stats`]): nodes start empty; every guest given counts on its node (and
//!   on its target too while migrating) with all it may use: its `maxcpu`, or the node's cores
//!   when 0, and its `maxmem`. The running flag does not matter.
//! - Dynamic ([`dynamic_node_stats`]): nodes keep their measured `cpu` and `mem`; only guests still
//!   starting (`running == false`) add their maximum as above, so that a burst of starts is not
//!   all sent to the node whose measurements have not caught up yet. Running guests are already in
//!   the measurements, even when migrating.
//!
//! Which guests to pass is the caller's choice (Proxmox passes every HA service that holds a node,
//! plus running non-HA guests); every node they name must be among the nodes given. Nodes come
//! back in input order, guests are added in input order.

use std::collections::HashSet;

use serde::Serialize;

use super::error::{CrsError, CrsResult};
use super::stats::{NodeStats, NodeUsage, ResourceStats, index_nodes};

/// A guest as the node-stats builders see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GuestUsage {
    /// The guest's id (`vm:101`, `ct:200`), for errors.
    pub sid: String,
    /// The node it is on.
    pub node: String,
    /// The node it is migrating to, if any.
    pub target: Option<String>,
    /// Running (in the measurements) rather than starting.
    pub running: bool,
    /// Its usage and limits.
    pub stats: ResourceStats,
}

/// Node stats as static mode scores them: empty nodes plus every guest at its maximum (§1.3).
///
/// The nodes' measured `cpu` and `mem` are ignored. Fails on unscorable nodes, repeated guests,
/// unknown nodes or bad stats, naming them.
pub fn static_node_stats(nodes: &[NodeUsage], guests: &[GuestUsage]) -> CrsResult<Vec<NodeUsage>> {
    let bare = nodes.iter().map(|n| {
        NodeUsage::new(
            n.name.clone(),
            NodeStats {
                cpu: 0.0,
                mem: 0,
                ..n.stats
            },
        )
    });
    aggregate(nodes, bare.collect(), guests, |_| true)
}

/// Node stats as dynamic mode scores starts: measured usage plus starting guests at their
/// maximum (§1.4).
///
/// Fails like [`static_node_stats`].
pub fn dynamic_node_stats(nodes: &[NodeUsage], guests: &[GuestUsage]) -> CrsResult<Vec<NodeUsage>> {
    aggregate(nodes, nodes.to_vec(), guests, |g| !g.running)
}

fn aggregate(
    nodes: &[NodeUsage],
    mut out: Vec<NodeUsage>,
    guests: &[GuestUsage],
    counts: impl Fn(&GuestUsage) -> bool,
) -> CrsResult<Vec<NodeUsage>> {
    let index = index_nodes(nodes)?;
    let mut seen = HashSet::with_capacity(guests.len());
    for guest in guests {
        let fail = |message: String| CrsError::Resource {
            resource: guest.sid.clone(),
            message,
        };
        if !seen.insert(guest.sid.as_str()) {
            return Err(fail("listed twice".to_owned()));
        }
        guest.stats.check(&guest.sid)?;
        let find = |node: &str| {
            index
                .get(node)
                .copied()
                .ok_or_else(|| fail(format!("node {node} is not among the nodes given")))
        };
        let on = find(&guest.node)?;
        let target = guest.target.as_deref().map(find).transpose()?;
        if target == Some(on) {
            return Err(fail(format!("migrating from {} to itself", guest.node)));
        }
        if counts(guest) {
            for i in std::iter::once(on).chain(target) {
                out[i].stats.add_started(&guest.stats);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::super::start::rank_nodes_to_start;
    use super::super::testutil::*;
    use super::*;

    fn guest(sid: &str, node: &str, running: bool, stats: ResourceStats) -> GuestUsage {
        GuestUsage {
            sid: sid.to_owned(),
            node: node.to_owned(),
            target: None,
            running,
            stats,
        }
    }

    fn stats_of(nodes: &[NodeUsage]) -> Vec<(f64, u64)> {
        nodes.iter().map(|n| (n.stats.cpu, n.stats.mem)).collect()
    }

    #[test]
    fn static_mode_counts_every_guest_at_its_maximum_on_an_empty_node() {
        let nodes = three_nodes_homogeneous();
        let mut moving = guest("vm:102", "node1", true, resource(0.1, 2.0, GIB, 4 * GIB));
        moving.target = Some("node3".to_owned());
        let guests = [
            guest("vm:100", "node1", true, resource(0.5, 4.0, GIB, 8 * GIB)),
            // Unlimited CPU counts as the node's 16 cores; not running makes no difference.
            guest("ct:101", "node2", false, resource(0.0, 0.0, 0, 512 * MIB)),
            moving,
        ];
        let built = static_node_stats(&nodes, &guests).unwrap();
        assert_eq!(names(&built, |n| &n.name), ["node1", "node2", "node3"]);
        assert_eq!(
            stats_of(&built),
            [(6.0, 12 * GIB), (16.0, 512 * MIB), (2.0, 4 * GIB)]
        );
        assert_eq!(built[1].stats.maxcpu, 16.0);
    }

    #[test]
    fn dynamic_mode_adds_only_starting_guests_to_measurements() {
        let nodes = three_nodes_homogeneous();
        let mut migrating = guest(
            "vm:103",
            "node2",
            true,
            resource(1.0, 8.0, 2 * GIB, 8 * GIB),
        );
        migrating.target = Some("node3".to_owned());
        let guests = [
            guest("vm:100", "node1", true, resource(0.5, 4.0, GIB, 8 * GIB)),
            guest("vm:101", "node1", false, resource(0.0, 2.0, 0, 4 * GIB)),
            guest("ct:102", "node3", false, resource(0.0, 0.0, 0, GIB)),
            migrating,
        ];
        let built = dynamic_node_stats(&nodes, &guests).unwrap();
        assert_eq!(
            stats_of(&built),
            [
                (1.7 + 2.0, 12334 * MIB + 4 * GIB),
                (15.184, 529 * MIB),
                (5.2 + 16.0, 9381 * MIB + GIB)
            ]
        );
    }

    #[test]
    fn starting_guests_steer_the_next_start_away() {
        // Three equal nodes, measured idle; two guests are starting on node1 and do not show in
        // the measurements yet. Without counting them, node1 would win the tie by name.
        let nodes: Vec<NodeUsage> = ["node1", "node2", "node3"]
            .map(|n| node(n, 0.0, 16.0, 0, 64 * GIB))
            .into();
        let small = resource(0.0, 2.0, 0, 4 * GIB);
        let idle = rank_nodes_to_start(&dynamic_node_stats(&nodes, &[]).unwrap(), &small).unwrap();
        assert_eq!(idle[0].node, "node1");
        let starting = [
            guest("vm:100", "node1", false, small),
            guest("vm:101", "node1", false, small),
        ];
        let built = dynamic_node_stats(&nodes, &starting).unwrap();
        let ranked = rank_nodes_to_start(&built, &small).unwrap();
        assert_eq!(names(&ranked, |s| &s.node), ["node2", "node3", "node1"]);
    }

    #[test]
    fn static_placement_follows_capacity() {
        // One node with twice the cores and memory of the other takes two of every three
        // equal guests, placed one after the other as ha-manager does (§1.1).
        let nodes = vec![
            node("node2", 0.0, 64.0, 0, 256 * GIB),
            node("node3", 0.0, 32.0, 0, 128 * GIB),
        ];
        let each = resource(0.0, 4.0, 0, 16 * GIB);
        let mut placed: Vec<GuestUsage> = Vec::new();
        for i in 0..9 {
            let built = static_node_stats(&nodes, &placed).unwrap();
            let best = rank_nodes_to_start(&built, &each).unwrap().remove(0).node;
            placed.push(guest(&format!("vm:{}", 100 + i), &best, true, each));
        }
        let on = |n: &str| placed.iter().filter(|g| g.node == n).count();
        assert_eq!((on("node2"), on("node3")), (6, 3));
    }

    #[test]
    fn bad_guests_are_named_errors() {
        let nodes = three_nodes_homogeneous();
        let ok = resource(0.0, 1.0, 0, GIB);
        let err =
            |guests: &[GuestUsage]| static_node_stats(&nodes, guests).unwrap_err().to_string();
        assert_eq!(
            err(&[guest("vm:1", "node9", true, ok)]),
            "resource vm:1: node node9 is not among the nodes given"
        );
        assert_eq!(
            err(&[
                guest("vm:1", "node1", true, ok),
                guest("vm:1", "node2", true, ok)
            ]),
            "resource vm:1: listed twice"
        );
        let mut to_self = guest("vm:2", "node1", true, ok);
        to_self.target = Some("node1".to_owned());
        assert_eq!(
            err(&[to_self]),
            "resource vm:2: migrating from node1 to itself"
        );
        let bad = guest("vm:3", "node1", false, resource(0.0, f64::NAN, 0, 0));
        assert_eq!(
            dynamic_node_stats(&nodes, &[bad]).unwrap_err().to_string(),
            "resource vm:3: maxcpu is NaN, expected cores (>= 0)"
        );
    }
}
