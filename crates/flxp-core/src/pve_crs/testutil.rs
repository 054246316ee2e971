//! Fixtures shared by the CRS tests: the clusters of `proxmox-resource-scheduling`'s
//! `tests/scheduler.rs` (docs/proxmox-behaviour.md §4), in Proxmox units.

use super::stats::{NodeStats, NodeUsage, ResourceStats};

pub use crate::units::{GIB, MIB};

/// A node named `name` with `cpu` cores in use of `maxcpu`, and `mem` of `maxmem` bytes.
pub fn node(name: &str, cpu: f64, maxcpu: f64, mem: u64, maxmem: u64) -> NodeUsage {
    NodeUsage::new(
        name,
        NodeStats {
            cpu,
            maxcpu,
            mem,
            maxmem,
        },
    )
}

/// Three 16-core, 64 GiB nodes: node2 busy on CPU, node1 and node3 on memory.
pub fn three_nodes_homogeneous() -> Vec<NodeUsage> {
    vec![
        node("node1", 1.7, 16.0, 12334 * MIB, 64 * GIB),
        node("node2", 15.184, 16.0, 529 * MIB, 64 * GIB),
        node("node3", 5.2, 16.0, 9381 * MIB, 64 * GIB),
    ]
}

/// The same usage on unequal nodes: 16 cores/128 GiB, 32/96 GiB and 24/64 GiB.
pub fn three_nodes_heterogeneous() -> Vec<NodeUsage> {
    vec![
        node("node1", 1.7, 16.0, 12334 * MIB, 128 * GIB),
        node("node2", 15.184, 32.0, 529 * MIB, 96 * GIB),
        node("node3", 5.2, 24.0, 9381 * MIB, 64 * GIB),
    ]
}

/// Nodes `node0`, `node1`, ... from generated figures: `(cores, share of them in use, GiB, share
/// of the memory in use)`; the property tests' clusters.
pub fn nodes_from_shares(figures: Vec<(u32, f64, u64, f64)>) -> Vec<NodeUsage> {
    figures
        .into_iter()
        .enumerate()
        .map(|(i, (cores, cpu, gib, mem))| {
            let (maxcpu, maxmem) = (f64::from(cores), gib * GIB);
            node(
                &format!("node{i}"),
                cpu * maxcpu,
                maxcpu,
                (mem * maxmem as f64) as u64,
                maxmem,
            )
        })
        .collect()
}

/// Resource stats, all four figures explicit.
pub fn resource(cpu: f64, maxcpu: f64, mem: u64, maxmem: u64) -> ResourceStats {
    ResourceStats {
        cpu,
        maxcpu,
        mem,
        maxmem,
    }
}

/// Names of nodes in the order given.
pub fn names<T>(items: &[T], name: impl Fn(&T) -> &str) -> Vec<String> {
    items.iter().map(|i| name(i).to_owned()).collect()
}
