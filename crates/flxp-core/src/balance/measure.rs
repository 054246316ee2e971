//! Measuring balance: per-node load of one resource, and the spread between the most and least
//! loaded nodes (ProxLB's "balanciness", in percentage points).
//!
//! Offline nodes and nodes in maintenance are left out: they are not part of the balance, and a
//! near-empty maintenance node would otherwise keep the spread high forever.

use serde::{Deserialize, Serialize};

use crate::cluster::{Cluster, NodeIdx};
use crate::state::State;

/// What a node's load is measured in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// Used memory (node `mem`, guests' `mem`) as a share of node memory.
    #[default]
    Memory,
    /// Configured memory of running guests (`maxmem`) as a share of node memory.
    MemoryAssigned,
    /// CPU cores in use as a share of node CPUs.
    Cpu,
}

impl Metric {
    /// The name used in options and output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::MemoryAssigned => "memory-assigned",
            Self::Cpu => "cpu",
        }
    }

    /// Parses the name used in options.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "memory" | "memory-used" => Some(Self::Memory),
            "memory-assigned" => Some(Self::MemoryAssigned),
            "cpu" => Some(Self::Cpu),
            _ => None,
        }
    }
}

/// Nodes that take part in the balance: online and not in maintenance.
pub fn balanced_nodes(cluster: &Cluster) -> impl Iterator<Item = NodeIdx> + '_ {
    cluster
        .node_indexes()
        .filter(|&n| cluster.node(n).is_schedulable())
}

/// A node's load in percent of its capacity (0 for a node without capacity).
pub fn node_load(cluster: &Cluster, state: &State, metric: Metric, node: NodeIdx) -> f64 {
    let n = cluster.node(node);
    let u = state.usage(node);
    let (used, total) = match metric {
        Metric::Memory => (u.mem as f64, n.maxmem as f64),
        Metric::MemoryAssigned => (u.committed_mem as f64, n.maxmem as f64),
        Metric::Cpu => (u.cpu, n.maxcpu),
    };
    if total > 0.0 {
        100.0 * used / total
    } else {
        0.0
    }
}

/// Gap in percentage points between the most and least loaded balanced node; 0 with fewer than two.
pub fn spread(cluster: &Cluster, state: &State, metric: Metric) -> f64 {
    let (mut lo, mut hi, mut count) = (f64::INFINITY, f64::NEG_INFINITY, 0usize);
    for n in balanced_nodes(cluster) {
        let l = node_load(cluster, state, metric, n);
        lo = lo.min(l);
        hi = hi.max(l);
        count += 1;
    }
    if count < 2 { 0.0 } else { hi - lo }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    #[test]
    fn spread_is_max_minus_min_over_online_nodes_outside_maintenance() {
        let c = ClusterBuilder::new()
            .node(
                node("a")
                    .memory(100 * GIB)
                    .used(80 * GIB)
                    .cpus(10.0)
                    .load(0.5),
            )
            .node(
                node("b")
                    .memory(100 * GIB)
                    .used(20 * GIB)
                    .cpus(10.0)
                    .load(0.1),
            )
            .node(
                node("c")
                    .memory(100 * GIB)
                    .used(0)
                    .notes("flxp.maintenance"),
            )
            .node(node("d").offline())
            .guest(vm(101, "a").mem(8 * GIB, 16 * GIB))
            .build();
        let s = State::new(&c);
        assert_eq!(spread(&c, &s, Metric::Memory), 60.0);
        assert_eq!(spread(&c, &s, Metric::MemoryAssigned), 16.0);
        assert!((spread(&c, &s, Metric::Cpu) - 40.0).abs() < 1e-9);
    }
}
