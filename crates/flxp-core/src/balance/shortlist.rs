//! Targets for a long run of placements on a large cluster, without judging every node for every
//! guest: the open nodes are kept ordered by the share of their memory in use (least loaded
//! first), up to date as the draft moves guests, and a guest's target is chosen by the policy
//! among the first [`SHORT`] of them its filters accept. With the `least-loaded` policy and nodes
//! of one size that is the node a full ranking picks; the walk stops after a few nodes instead of
//! looking at all of them.

use std::cell::Cell;
use std::collections::BTreeSet;

use crate::cluster::{Cluster, NodeIdx};
use crate::state::State;

/// Feasible nodes a shortlisted pick ranks (the walk stops once it has found this many).
pub(crate) const SHORT: usize = 4;

/// The open nodes, least loaded first (see the module doc).
#[derive(Debug, Clone)]
pub(crate) struct Shortlist {
    /// Open nodes by (share of memory in use, node).
    order: BTreeSet<(u64, NodeIdx)>,
    /// Each node's current key, indexed like `Cluster::nodes`.
    key: Vec<u64>,
    /// Nodes that may take guests at all (a node freed leaves for good).
    host: Vec<bool>,
    /// Hosts closed for now ([`Self::close`]).
    closed: Vec<bool>,
    /// The closed hosts, as last set.
    closed_list: Vec<NodeIdx>,
    /// Nodes whose key a draft changed since the last [`Self::settle`] or [`Self::revert`].
    touched: Vec<NodeIdx>,
    /// Nodes judged through the filters (and ranked), for the caller's work count.
    checks: Cell<u64>,
}

/// A node's memory in use as a share of its size, as an integer that sorts the same way.
fn share(used: u64, maxmem: u64) -> u64 {
    if maxmem == 0 {
        return u64::MAX;
    }
    let scaled = (u128::from(used) << 32) / u128::from(maxmem);
    u64::try_from(scaled).unwrap_or(u64::MAX)
}

impl Shortlist {
    /// The hosts open, keyed by their load in `state`.
    pub(crate) fn new(cluster: &Cluster, state: &State, hosts: &[NodeIdx]) -> Self {
        let n = cluster.nodes().len();
        let mut s = Self {
            order: BTreeSet::new(),
            key: vec![0; n],
            host: vec![false; n],
            closed: vec![false; n],
            closed_list: Vec::new(),
            touched: Vec::new(),
            checks: Cell::new(0),
        };
        for node in cluster.node_indexes() {
            s.key[node.get()] = share(state.usage(node).mem, cluster.node(node).maxmem);
        }
        for &h in hosts {
            s.host[h.get()] = true;
            s.order.insert((s.key[h.get()], h));
        }
        s
    }

    fn open(&self, n: NodeIdx) -> bool {
        self.host[n.get()] && !self.closed[n.get()]
    }

    /// Closes exactly `nodes` (the ones closed before and not named open again): a walk skips
    /// them without looking at them.
    pub(crate) fn close(&mut self, nodes: &[NodeIdx]) {
        let before = std::mem::take(&mut self.closed_list);
        for &n in &before {
            self.closed[n.get()] = false;
        }
        for &n in nodes {
            if self.open(n) {
                self.order.remove(&(self.key[n.get()], n));
            }
            if !self.closed[n.get()] {
                self.closed[n.get()] = true;
                self.closed_list.push(n);
            }
        }
        for &n in &before {
            if self.open(n) {
                self.order.insert((self.key[n.get()], n));
            }
        }
    }

    /// Takes a node out for good (it is freed).
    pub(crate) fn remove(&mut self, n: NodeIdx) {
        if self.open(n) {
            self.order.remove(&(self.key[n.get()], n));
        }
        self.host[n.get()] = false;
    }

    /// Re-keys a node whose memory in use changed.
    pub(crate) fn update(&mut self, cluster: &Cluster, state: &State, n: NodeIdx) {
        let key = share(state.usage(n).mem, cluster.node(n).maxmem);
        let old = std::mem::replace(&mut self.key[n.get()], key);
        if old != key && self.open(n) {
            self.order.remove(&(old, n));
            self.order.insert((key, n));
        }
        self.touched.push(n);
    }

    /// Keeps the changes since the last settle (the moves were accepted).
    pub(crate) fn settle(&mut self) {
        self.touched.clear();
    }

    /// Undoes the changes since the last settle: the touched nodes re-keyed from `state`.
    pub(crate) fn revert(&mut self, cluster: &Cluster, state: &State) {
        for n in std::mem::take(&mut self.touched) {
            self.update(cluster, state, n);
        }
        self.touched.clear();
    }

    /// The open nodes, least loaded first.
    pub(crate) fn walk(&self) -> impl Iterator<Item = NodeIdx> + '_ {
        self.order.iter().map(|&(_, n)| n)
    }

    /// Counts nodes judged.
    pub(crate) fn count(&self, n: u64) {
        self.checks.set(self.checks.get() + n);
    }

    /// The nodes judged since the last call, and starts counting again.
    pub(crate) fn take_checks(&self) -> u64 {
        self.checks.replace(0)
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::testutil::*;

    #[test]
    fn the_walk_is_least_loaded_first_skips_closed_and_follows_moves() {
        let c = ClusterBuilder::new()
            .node(node("a").memory(64 * GIB))
            .node(node("b").memory(64 * GIB))
            .node(node("c").memory(64 * GIB))
            .node(node("d").memory(64 * GIB))
            .guest(vm(101, "a").mem(8 * GIB, 8 * GIB))
            .guest(vm(102, "b").mem(2 * GIB, 2 * GIB))
            .guest(vm(103, "d").mem(4 * GIB, 4 * GIB))
            .build();
        let mut state = State::new(&c);
        let idx = |n: &str| c.node_idx(n).unwrap();
        let hosts: Vec<NodeIdx> = c.node_indexes().collect();
        let mut s = Shortlist::new(&c, &state, &hosts);
        let names =
            |s: &Shortlist| -> Vec<String> { s.walk().map(|n| c.node(n).name.clone()).collect() };
        assert_eq!(names(&s), ["c", "b", "d", "a"]);
        s.close(&[idx("c"), idx("b")]);
        assert_eq!(names(&s), ["d", "a"]);
        // Closing another set opens the ones it leaves out.
        s.close(&[idx("d")]);
        assert_eq!(names(&s), ["c", "b", "a"]);
        s.close(&[]);
        // 101 moves from a to c: c is now the fullest; undone, it is the emptiest again.
        let g = c.guest_idx(101).unwrap();
        let before = state.clone();
        state.move_guest(&c, g, idx("c"));
        s.update(&c, &state, idx("a"));
        s.update(&c, &state, idx("c"));
        assert_eq!(names(&s), ["a", "b", "d", "c"]);
        s.revert(&c, &before);
        assert_eq!(names(&s), ["c", "b", "d", "a"]);
        s.remove(idx("c"));
        s.close(&[idx("c")]);
        s.close(&[]);
        assert_eq!(names(&s), ["b", "d", "a"]);
    }
}
