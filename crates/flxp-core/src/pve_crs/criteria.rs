//! The four load criteria Proxmox judges a cluster state by (docs/proxmox-behaviour.md §1.5).
//!
//! For one hypothetical state (all nodes' stats after a start or a move): 1 + the RMS of the nodes'
//! CPU loads, 1 + the highest CPU load, and the same two for memory. All four are minimised, with
//! weights 1, 2, 5 and 10: memory counts five times CPU, and peaks twice averages. The "+1" keeps
//! TOPSIS's column normalisation from magnifying tiny differences (0.004 is twice 0.002; 1.004 is
//! barely more than 1.002). Loads are fractions of each node's own capacity, so unequal nodes
//! compare fairly. Sums run in node order, so results are reproducible bit for bit.

use serde::Serialize;

use super::error::CrsResult;
use super::stats::NodeStats;
use super::topsis::{Criteria, Criterion};

/// Names and signed weights of the four criteria, in column order (negative: minimised).
pub const PVE_CRITERIA: [(&str, f64); 4] = [
    ("average CPU", -1.0),
    ("highest CPU", -2.0),
    ("average memory", -5.0),
    ("highest memory", -10.0),
];

/// The four criteria, normalised for TOPSIS (weights 1/18, 2/18, 5/18, 10/18, all minimised).
pub fn pve_criteria() -> CrsResult<Criteria<4>> {
    Criteria::new(PVE_CRITERIA.map(|(name, weight)| Criterion::new(name, weight)))
}

/// One cluster state summarised by the four criteria; lower is better for each.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LoadCriteria {
    /// 1 + root mean square of the nodes' CPU loads.
    pub average_cpu: f64,
    /// 1 + the highest CPU load.
    pub highest_cpu: f64,
    /// 1 + root mean square of the nodes' memory loads.
    pub average_memory: f64,
    /// 1 + the highest memory load.
    pub highest_memory: f64,
}

impl LoadCriteria {
    /// Summarises the stats of every node of one state, in the order given.
    ///
    /// The stats must have been checked ([`NodeStats::check`]); with no node the result is NaN.
    pub fn of_nodes(nodes: impl IntoIterator<Item = NodeStats>) -> Self {
        let mut acc = LoadAccumulator::default();
        for stats in nodes {
            acc.push(stats.cpu_load(), stats.mem_load());
        }
        acc.finish()
    }

    /// The criteria as a TOPSIS row, in [`PVE_CRITERIA`] order.
    pub fn to_row(self) -> [f64; 4] {
        [
            self.average_cpu,
            self.highest_cpu,
            self.average_memory,
            self.highest_memory,
        ]
    }
}

/// Running sums of squares and maxima of per-node loads.
#[derive(Debug, Default)]
pub(crate) struct LoadAccumulator {
    nodes: usize,
    squares_cpu: f64,
    highest_cpu: f64,
    squares_mem: f64,
    highest_mem: f64,
}

impl LoadAccumulator {
    /// Adds one node's CPU and memory load.
    pub(crate) fn push(&mut self, cpu: f64, mem: f64) {
        self.nodes += 1;
        self.squares_cpu += cpu * cpu;
        self.highest_cpu = f64::max(self.highest_cpu, cpu);
        self.squares_mem += mem * mem;
        self.highest_mem = f64::max(self.highest_mem, mem);
    }

    /// The criteria over the nodes pushed so far.
    pub(crate) fn finish(&self) -> LoadCriteria {
        from_sums(
            self.nodes,
            [self.squares_cpu, self.highest_cpu],
            [self.squares_mem, self.highest_mem],
        )
    }
}

/// Criteria from the sum of squared loads and the highest load, per resource, over `nodes` nodes.
pub(crate) fn from_sums(nodes: usize, cpu: [f64; 2], mem: [f64; 2]) -> LoadCriteria {
    let n = nodes as f64;
    LoadCriteria {
        average_cpu: 1.0 + (cpu[0] / n).sqrt(),
        highest_cpu: 1.0 + cpu[1],
        average_memory: 1.0 + (mem[0] / n).sqrt(),
        highest_memory: 1.0 + mem[1],
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn criteria_are_one_plus_rms_and_one_plus_max() {
        let gib = crate::units::GIB;
        let c = LoadCriteria::of_nodes([
            NodeStats {
                cpu: 3.0,
                maxcpu: 4.0,
                mem: 0,
                maxmem: gib,
            },
            NodeStats {
                cpu: 1.0,
                maxcpu: 4.0,
                mem: gib,
                maxmem: gib,
            },
        ]);
        // CPU loads 0.75 and 0.25: RMS sqrt((0.5625 + 0.0625) / 2) = sqrt(0.3125).
        assert_eq!(c.average_cpu, 1.0 + 0.3125f64.sqrt());
        assert_eq!(c.highest_cpu, 1.75);
        assert_eq!(c.average_memory, 1.0 + 0.5f64.sqrt());
        assert_eq!(c.highest_memory, 2.0);
        assert_eq!(c.to_row()[1], 1.75);
    }

    #[test]
    fn pve_weights_favour_memory_and_peaks() {
        let c = pve_criteria().unwrap();
        assert_eq!(c.names()[3], "highest memory");
        let w = c.weights();
        assert!(w[3] > w[2] && w[2] > w[1] && w[1] > w[0]);
        assert_eq!(w.iter().sum::<f64>(), 1.0);
    }
}
