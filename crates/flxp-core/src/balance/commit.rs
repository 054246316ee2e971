//! Configured vCPUs over a node's cores: the CPU a node's running guests may reach, whatever they
//! use now.
//!
//! The planner balances what is measured; a quiet night says nothing about the morning. Where
//! `vcpu-tolerance` is set, the greedy search breaks near-ties on the measured metric by this
//! commitment (`search.rs`), and the post-pass and the exact step may not leave it less even
//! than the greedy plan did. It never decides whether to balance: the trigger still judges
//! measured load, so idle guests alone never cause a migration.

use super::objective::sq_dev_delta;
use crate::cluster::{Cluster, NodeIdx};
use crate::state::State;

/// Each balanced node's configured vCPUs of running guests in percent of its cores, and the
/// running sum the O(1) gain of a move needs.
#[derive(Debug, Clone)]
pub(crate) struct Commit {
    counted: Vec<bool>,
    ratios: Vec<f64>,
    sum: f64,
    count: usize,
}

impl Commit {
    /// The commitments of a state, over the nodes that take part in the balance and have cores.
    pub fn new(cluster: &Cluster, state: &State) -> Self {
        let mut c = Self {
            counted: Vec::with_capacity(cluster.nodes().len()),
            ratios: Vec::with_capacity(cluster.nodes().len()),
            sum: 0.0,
            count: 0,
        };
        for n in cluster.node_indexes() {
            let node = cluster.node(n);
            let counted = node.is_schedulable() && node.maxcpu > 0.0;
            let r = if counted {
                100.0 * state.usage(n).committed_cpus / node.maxcpu
            } else {
                0.0
            };
            c.counted.push(counted);
            c.ratios.push(r);
            if counted {
                c.sum += r;
                c.count += 1;
            }
        }
        c
    }

    /// The commitment of a counted node after `vcpus` leave it or arrive, percent.
    fn after(&self, cluster: &Cluster, node: NodeIdx, vcpus: f64) -> f64 {
        let cores = cluster.node(node).maxcpu;
        if cores > 0.0 {
            (self.ratios[node.get()] + 100.0 * vcpus / cores).max(0.0)
        } else {
            0.0
        }
    }

    /// Decrease of Σ(commitment − mean)² when `vcpus` configured vCPUs go from `from` to `to`;
    /// positive is more even. A swap passes the net vCPUs `from` sends.
    pub fn gain(&self, cluster: &Cluster, from: NodeIdx, to: NodeIdx, vcpus: f64) -> f64 {
        let changes = [
            (from, self.after(cluster, from, -vcpus)),
            (to, self.after(cluster, to, vcpus)),
        ];
        -sq_dev_delta(
            &self.ratios,
            &self.counted,
            (self.sum, self.count),
            &changes,
        )
    }

    /// Σ(commitment − mean)² over the counted nodes: lower is more even.
    pub fn score(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let mean = self.sum / self.count as f64;
        self.ratios
            .iter()
            .zip(&self.counted)
            .filter(|(_, c)| **c)
            .map(|(r, _)| (r - mean) * (r - mean))
            .sum()
    }
}

/// Σ(commitment − mean)² of a state (see [`Commit::score`]).
pub(crate) fn score(cluster: &Cluster, state: &State) -> f64 {
    Commit::new(cluster, state).score()
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::testutil::*;

    #[test]
    fn the_gain_matches_recomputing_the_score() {
        let c = ClusterBuilder::new()
            .node(node("a").cpus(8.0))
            .node(node("b").cpus(16.0))
            .node(node("m").cpus(8.0).notes("flxp.maintenance"))
            .guest(vm(101, "a").cores(8.0, 0.0))
            .guest(vm(102, "a").cores(4.0, 0.0))
            .guest(vm(103, "b").cores(4.0, 0.0))
            .guest(vm(104, "m").cores(4.0, 0.0))
            .build();
        let s = State::new(&c);
        let k = Commit::new(&c, &s);
        // a 150 %, b 25 %; m is in maintenance and does not count.
        assert_eq!((k.ratios[0], k.ratios[1]), (150.0, 25.0));
        assert!(
            (k.score() - 2.0 * 62.5 * 62.5).abs() < 1e-9,
            "{}",
            k.score()
        );
        let mut after = s.clone();
        after.move_guest(&c, c.guest_idx(101).unwrap(), NodeIdx(1));
        let g = k.gain(&c, NodeIdx(0), NodeIdx(1), 8.0);
        assert!((g - (k.score() - score(&c, &after))).abs() < 1e-9, "{g}");
        // 50 % and 75 %: nearly even.
        assert!((score(&c, &after) - 312.5).abs() < 1e-9);
    }
}
