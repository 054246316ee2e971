//! Node and resource usage numbers in Proxmox's units, and how a resource changes a node's figures.
//!
//! Mirrors the stats types of `proxmox-resource-scheduling` (docs/proxmox-behaviour.md §1.3-1.4):
//! CPU in cores (not fractions), memory in bytes. No scoring happens here.

use std::collections::HashMap;
use std::iter::Sum;
use std::ops::Add;

use serde::Serialize;

use super::error::{CrsError, CrsResult};

/// What a node has and uses, as the CRS math sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct NodeStats {
    /// CPU in use, in cores (a fraction of `maxcpu` times `maxcpu`).
    pub cpu: f64,
    /// CPU cores.
    pub maxcpu: f64,
    /// Memory in use, in bytes.
    pub mem: u64,
    /// Memory, in bytes.
    pub maxmem: u64,
}

/// What a resource (a guest, or a bundle of guests moved together) uses and may use at most.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ResourceStats {
    /// CPU in use, in cores.
    pub cpu: f64,
    /// Assigned cores or CPU limit; 0 means unlimited.
    pub maxcpu: f64,
    /// Memory in use, in bytes.
    pub mem: u64,
    /// Assigned memory, in bytes.
    pub maxmem: u64,
}

/// A named node with its stats: one row of the scheduler's view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeUsage {
    /// Node name as Proxmox spells it.
    pub name: String,
    /// Its stats.
    pub stats: NodeStats,
}

impl NodeUsage {
    /// A node named `name` with `stats`.
    pub fn new(name: impl Into<String>, stats: NodeStats) -> Self {
        Self {
            name: name.into(),
            stats,
        }
    }
}

impl NodeStats {
    /// CPU in use as a fraction of the node's cores (may exceed 1 when overcommitted).
    pub fn cpu_load(&self) -> f64 {
        self.cpu / self.maxcpu
    }

    /// Memory in use as a fraction of the node's memory.
    pub fn mem_load(&self) -> f64 {
        self.mem as f64 / self.maxmem as f64
    }

    /// CPU and memory load weighed equally: the per-node load of the imbalance metric (§2.3).
    pub fn load(&self) -> f64 {
        (self.cpu_load() + self.mem_load()) / 2.0
    }

    /// Adds a resource as started: its `maxcpu` (the whole node's cores when 0, "unlimited") and
    /// its `maxmem` (§1.3).
    pub fn add_started(&mut self, resource: &ResourceStats) {
        self.cpu += resource.cpu_on(self.maxcpu);
        self.mem = self.mem.saturating_add(resource.maxmem);
    }

    /// Adds a running resource's measured `cpu` and `mem` (the target side of a migration, §2.5).
    pub fn add_running(&mut self, resource: &ResourceStats) {
        self.cpu += resource.cpu;
        self.mem = self.mem.saturating_add(resource.mem);
    }

    /// Removes a running resource's measured `cpu` and `mem`, clamped at 0 (the source side of a
    /// migration, §2.5): measured node figures need not include every guest exactly.
    pub fn remove_running(&mut self, resource: &ResourceStats) {
        self.cpu = f64::max(0.0, self.cpu - resource.cpu);
        self.mem = self.mem.saturating_sub(resource.mem);
    }

    /// Checks the stats can be scored: capacity above 0, usage finite and not negative.
    pub fn check(&self, node: &str) -> CrsResult<()> {
        let fail = |message: String| {
            Err(CrsError::Node {
                node: node.to_owned(),
                message,
            })
        };
        if !(self.maxcpu.is_finite() && self.maxcpu > 0.0) {
            return fail(format!(
                "maxcpu is {}, expected a number of cores above 0",
                self.maxcpu
            ));
        }
        if self.maxmem == 0 {
            return fail("maxmem is 0, expected the node's memory in bytes".to_owned());
        }
        if !(self.cpu.is_finite() && self.cpu >= 0.0) {
            return fail(format!("cpu is {}, expected cores in use (>= 0)", self.cpu));
        }
        Ok(())
    }
}

impl ResourceStats {
    /// The cores this resource counts for when started on a node with `node_maxcpu` cores.
    pub fn cpu_on(&self, node_maxcpu: f64) -> f64 {
        // maxcpu 0 means "no limit": the guest may use the whole node (§1.3).
        if self.maxcpu == 0.0 {
            node_maxcpu
        } else {
            self.maxcpu
        }
    }

    /// Stats of a guest known only by its configuration (static mode, §2.5): it is taken to use
    /// all it may, `cpu = maxcpu` and `mem = maxmem`.
    pub fn from_static(maxcpu: f64, maxmem: u64) -> Self {
        Self {
            cpu: maxcpu,
            maxcpu,
            mem: maxmem,
            maxmem,
        }
    }

    /// Checks the CPU figures are finite and not negative; `resource` names it in the error.
    pub fn check(&self, resource: &str) -> CrsResult<()> {
        for (field, value) in [("cpu", self.cpu), ("maxcpu", self.maxcpu)] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(CrsError::Resource {
                    resource: resource.to_owned(),
                    message: format!("{field} is {value}, expected cores (>= 0)"),
                });
            }
        }
        Ok(())
    }
}

impl Add for ResourceStats {
    type Output = Self;

    /// Sums a bundle's members, as moved together (§2.4).
    fn add(self, other: Self) -> Self {
        Self {
            cpu: self.cpu + other.cpu,
            maxcpu: self.maxcpu + other.maxcpu,
            mem: self.mem.saturating_add(other.mem),
            maxmem: self.maxmem.saturating_add(other.maxmem),
        }
    }
}

impl Sum for ResourceStats {
    fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
        iter.fold(Self::default(), Add::add)
    }
}

/// Checks every node can be scored and no name repeats.
pub(crate) fn check_nodes(nodes: &[NodeUsage]) -> CrsResult<()> {
    let mut seen = std::collections::HashSet::with_capacity(nodes.len());
    for node in nodes {
        node.stats.check(&node.name)?;
        if !seen.insert(node.name.as_str()) {
            return Err(CrsError::Node {
                node: node.name.clone(),
                message: "listed twice".to_owned(),
            });
        }
    }
    Ok(())
}

/// Checks the nodes as [`check_nodes`] does, then maps each name to its position.
pub(crate) fn index_nodes(nodes: &[NodeUsage]) -> CrsResult<HashMap<&str, usize>> {
    check_nodes(nodes)?;
    Ok(nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect())
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;

    use crate::units::GIB;

    fn node(cpu: f64, maxcpu: f64, mem: u64, maxmem: u64) -> NodeStats {
        NodeStats {
            cpu,
            maxcpu,
            mem,
            maxmem,
        }
    }

    #[test]
    fn loads_are_fractions_of_capacity() {
        let n = node(4.0, 16.0, 16 * GIB, 64 * GIB);
        assert_eq!(n.cpu_load(), 0.25);
        assert_eq!(n.mem_load(), 0.25);
        assert_eq!(node(8.0, 16.0, 0, 64 * GIB).load(), 0.25);
    }

    #[test]
    fn unlimited_resource_starts_as_whole_node() {
        let mut n = node(1.0, 24.0, GIB, 64 * GIB);
        n.add_started(&ResourceStats {
            cpu: 0.5,
            maxcpu: 0.0,
            mem: GIB,
            maxmem: 4 * GIB,
        });
        assert_eq!(n, node(25.0, 24.0, 5 * GIB, 64 * GIB));
        n.add_started(&ResourceStats::from_static(2.0, GIB));
        assert_eq!(n, node(27.0, 24.0, 6 * GIB, 64 * GIB));
    }

    #[test]
    fn removing_running_resource_clamps_at_zero() {
        let mut n = node(1.0, 8.0, GIB, 8 * GIB);
        let big = ResourceStats {
            cpu: 3.0,
            maxcpu: 4.0,
            mem: 2 * GIB,
            maxmem: 4 * GIB,
        };
        n.remove_running(&big);
        assert_eq!(n, node(0.0, 8.0, 0, 8 * GIB));
        n.add_running(&big);
        assert_eq!(n, node(3.0, 8.0, 2 * GIB, 8 * GIB));
    }

    #[test]
    fn bundle_stats_sum_member_stats() {
        let a = ResourceStats {
            cpu: 0.5,
            maxcpu: 2.0,
            mem: GIB,
            maxmem: 2 * GIB,
        };
        let total: ResourceStats = [a, a, a].into_iter().sum();
        assert_eq!(
            total,
            ResourceStats {
                cpu: 1.5,
                maxcpu: 6.0,
                mem: 3 * GIB,
                maxmem: 6 * GIB
            }
        );
    }

    #[test]
    fn unscorable_stats_are_named_errors() {
        let err = node(0.0, 0.0, 0, GIB).check("pve1").unwrap_err();
        assert_eq!(
            err.to_string(),
            "node pve1: maxcpu is 0, expected a number of cores above 0"
        );
        let err = node(f64::NAN, 4.0, 0, GIB).check("pve2").unwrap_err();
        assert_eq!(
            err.to_string(),
            "node pve2: cpu is NaN, expected cores in use (>= 0)"
        );
        assert!(node(1.0, 4.0, 0, 0).check("pve3").is_err());
        let bad = ResourceStats {
            maxcpu: -1.0,
            ..ResourceStats::default()
        };
        assert_eq!(
            bad.check("vm:101").unwrap_err().to_string(),
            "resource vm:101: maxcpu is -1, expected cores (>= 0)"
        );
        let twice = [
            NodeUsage::new("a", node(0.0, 1.0, 0, 1)),
            NodeUsage::new("a", node(0.0, 1.0, 0, 1)),
        ];
        assert_eq!(
            check_nodes(&twice).unwrap_err().to_string(),
            "node a: listed twice"
        );
    }
}
