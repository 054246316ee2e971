//! The planner's objective: Σ(load − mean)² over the balanced nodes, in squared percentage points.
//!
//! Why this and not the reported measure itself: spread (max − min) is flat for most single moves
//! (with two nodes tied at the top, moving a guest off one of them changes nothing), so a greedy
//! search on spread stalls exactly where ProxLB does. The sum of squared deviations falls with
//! every move from a fuller to an emptier node that does not overshoot, so each greedy step is
//! meaningful, and driving it down drives both spread and CV down. A move of `s` pp between two
//! equal-sized nodes `d` pp apart gains `2s(d − s)`, whatever the cluster size, so one absolute
//! minimum gain means the same on 3 nodes and on 1,000 (docs/rebalancing-reference.md §2, bound 7).
//! The reported measure is checked separately: a step may never raise it.
//!
//! Deltas are O(1): a move changes two loads, and the change of the objective follows from them
//! and the running sum of loads, without the cancellation `Σx² − (Σx)²/n` would suffer.

use super::measure::{LoadKind, Measure, spread_of};
use crate::cluster::{Cluster, Guest, NodeIdx};
use crate::state::{State, Usage};

/// What a unit takes along when it moves: memory, CPU cores and commitments of running members.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Shift {
    /// Used memory, bytes.
    pub mem: u64,
    /// CPU cores in use.
    pub cpu: f64,
    /// Configured memory, bytes.
    pub committed_mem: u64,
    /// vCPUs.
    pub committed_cpus: f64,
    /// Running guests.
    pub guests: u32,
}

impl Shift {
    /// The load a set of guests carries (stopped ones carry none).
    pub fn of<'a>(guests: impl IntoIterator<Item = &'a Guest>) -> Self {
        let mut s = Self::default();
        for g in guests.into_iter().filter(|g| g.running) {
            s.mem += g.mem_footprint();
            s.cpu += g.cpu_cores();
            s.committed_mem += g.maxmem;
            s.committed_cpus += g.maxcpu;
            s.guests += 1;
        }
        s
    }

    /// Usage after this leaves or arrives, as `State` would have it (clamped at zero; memory
    /// leaving a node counted as full comes off its reported excess first).
    pub fn apply(&self, u: &Usage, arriving: bool) -> Usage {
        let mut after = *u;
        if arriving {
            after.take_mem(self.mem);
            after.cpu += self.cpu;
            after.committed_mem = u.committed_mem.saturating_add(self.committed_mem);
            after.committed_cpus += self.committed_cpus;
            after.guests = u.guests.saturating_add(self.guests);
        } else {
            after.release_mem(self.mem);
            after.cpu = (u.cpu - self.cpu).max(0.0);
            after.committed_mem = u.committed_mem.saturating_sub(self.committed_mem);
            after.committed_cpus = (u.committed_cpus - self.committed_cpus).max(0.0);
            after.guests = u.guests.saturating_sub(self.guests);
        }
        after
    }
}

/// Loads of the balanced nodes and the running sum the objective needs.
#[derive(Debug, Clone)]
pub(crate) struct Objective {
    kind: LoadKind,
    balanced: Vec<bool>,
    loads: Vec<f64>,
    sum: f64,
    sum_sq: f64,
    count: usize,
    /// The three highest and three lowest balanced loads, for O(1) spread of a candidate.
    top: Vec<(f64, NodeIdx)>,
    bottom: Vec<(f64, NodeIdx)>,
}

/// A candidate's effect: the two nodes' new loads and the objective's gain.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Effect {
    /// Source node and its load after.
    pub from: (NodeIdx, f64),
    /// Target node and its load after.
    pub to: (NodeIdx, f64),
    /// Decrease of Σ(load − mean)²; positive is better.
    pub gain: f64,
}

impl Objective {
    /// The objective of a state.
    pub fn new(cluster: &Cluster, state: &State, kind: LoadKind) -> Self {
        let balanced: Vec<bool> = cluster.nodes().iter().map(|n| n.is_schedulable()).collect();
        let mut o = Self {
            kind,
            loads: vec![0.0; balanced.len()],
            balanced,
            sum: 0.0,
            sum_sq: 0.0,
            count: 0,
            top: Vec::new(),
            bottom: Vec::new(),
        };
        o.refresh_all(cluster, state);
        o
    }

    /// Recomputes every load from the state (after moves), so rounding never accumulates.
    pub fn refresh_all(&mut self, cluster: &Cluster, state: &State) {
        for n in cluster.node_indexes() {
            if self.balanced[n.get()] {
                self.loads[n.get()] = self.kind.load(cluster.node(n), state.usage(n));
            }
        }
        self.sum = 0.0;
        self.sum_sq = 0.0;
        self.count = 0;
        self.top.clear();
        self.bottom.clear();
        for (i, (&l, &b)) in self.loads.iter().zip(&self.balanced).enumerate() {
            if b {
                self.sum += l;
                self.sum_sq += l * l;
                self.count += 1;
                let n = NodeIdx(i as u32);
                keep_extreme(&mut self.top, (l, n), |a, b| a > b);
                keep_extreme(&mut self.bottom, (l, n), |a, b| a < b);
            }
        }
    }

    /// Whether a candidate's two new loads would raise the measure above `value`, in O(1):
    /// spread from the kept extremes, CVs from the running sums. A screen before the exact
    /// figure; `slack` absorbs float noise.
    pub fn raises(
        &self,
        measure: Measure,
        changes: &[(NodeIdx, f64); 2],
        value: f64,
        slack: f64,
    ) -> bool {
        let changed = |n: NodeIdx| changes.iter().any(|(c, _)| *c == n);
        match measure {
            Measure::Spread => {
                let others_max = self.top.iter().find(|(_, n)| !changed(*n)).map(|(l, _)| *l);
                let others_min = self
                    .bottom
                    .iter()
                    .find(|(_, n)| !changed(*n))
                    .map(|(l, _)| *l);
                let new = changes.iter().map(|(_, l)| *l);
                let hi = new
                    .clone()
                    .chain(others_max)
                    .fold(f64::NEG_INFINITY, f64::max);
                let lo = new.chain(others_min).fold(f64::INFINITY, f64::min);
                self.count >= 2 && hi - lo > value + slack
            }
            Measure::Cv | Measure::CvRaw => {
                let n = self.count as f64;
                if self.count < 2 {
                    return false;
                }
                let (mut s1, mut s2) = (self.sum, self.sum_sq);
                for &(node, l) in changes {
                    let old = self.loads[node.get()];
                    s1 += l - old;
                    s2 += l * l - old * old;
                }
                if s1 <= 0.0 {
                    return false;
                }
                let mean = s1 / n;
                let cv = ((s2 / n - mean * mean).max(0.0)).sqrt() / mean;
                let cv = if measure == Measure::Cv {
                    cv / (n - 1.0).sqrt()
                } else {
                    cv
                };
                cv > value + slack
            }
        }
    }

    /// What the loads are of.
    pub fn kind(&self) -> LoadKind {
        self.kind
    }

    /// Whether a node counts.
    pub fn is_balanced(&self, node: NodeIdx) -> bool {
        self.balanced[node.get()]
    }

    /// A balanced node's load, percent.
    pub fn load(&self, node: NodeIdx) -> f64 {
        self.loads[node.get()]
    }

    /// Balanced nodes by load, highest first (ties by name).
    pub fn hottest_first(&self) -> Vec<NodeIdx> {
        let mut v: Vec<NodeIdx> = (0..self.loads.len() as u32)
            .map(NodeIdx)
            .filter(|&n| self.balanced[n.get()])
            .collect();
        v.sort_by(|a, b| self.load(*b).total_cmp(&self.load(*a)).then(a.cmp(b)));
        v
    }

    /// The load of a node after a shift leaves or arrives.
    pub fn load_after(
        &self,
        cluster: &Cluster,
        state: &State,
        node: NodeIdx,
        shift: &Shift,
        arriving: bool,
    ) -> f64 {
        self.kind.load(
            cluster.node(node),
            &shift.apply(state.usage(node), arriving),
        )
    }

    /// Change of Σ(load − mean)² when some balanced nodes take new loads (others unchanged).
    pub fn delta(&self, changes: &[(NodeIdx, f64)]) -> f64 {
        sq_dev_delta(&self.loads, &self.balanced, (self.sum, self.count), changes)
    }

    /// The effect of moving a shift from one node to another.
    pub fn effect(
        &self,
        cluster: &Cluster,
        state: &State,
        from: NodeIdx,
        to: NodeIdx,
        shift: &Shift,
    ) -> Effect {
        let lf = self.load_after(cluster, state, from, shift, false);
        let lt = self.load_after(cluster, state, to, shift, true);
        Effect {
            from: (from, lf),
            to: (to, lt),
            gain: -self.delta(&[(from, lf), (to, lt)]),
        }
    }

    /// The effect of swapping two shifts: `out` leaves `a` for `b`, `back` leaves `b` for `a`.
    pub fn swap_effect(
        &self,
        cluster: &Cluster,
        state: &State,
        (a, b): (NodeIdx, NodeIdx),
        out: &Shift,
        back: &Shift,
    ) -> Effect {
        let ua = back.apply(&out.apply(state.usage(a), false), true);
        let ub = back.apply(&out.apply(state.usage(b), true), false);
        let la = self.kind.load(cluster.node(a), &ua);
        let lb = self.kind.load(cluster.node(b), &ub);
        Effect {
            from: (a, la),
            to: (b, lb),
            gain: -self.delta(&[(a, la), (b, lb)]),
        }
    }

    /// The measure now.
    pub fn measure(&self, measure: Measure) -> f64 {
        self.measure_with(measure, &[])
    }

    /// The measure if some balanced nodes took new loads.
    pub fn measure_with(&self, measure: Measure, changes: &[(NodeIdx, f64)]) -> f64 {
        let loads: Vec<f64> = (0..self.loads.len())
            .filter(|&i| self.balanced[i])
            .map(|i| {
                changes
                    .iter()
                    .rev()
                    .find(|(n, _)| n.get() == i)
                    .map_or(self.loads[i], |(_, l)| *l)
            })
            .collect();
        match measure {
            Measure::Spread => spread_of(&loads),
            Measure::Cv | Measure::CvRaw => measure.of_loads(&loads),
        }
    }
}

/// Change of Σ(value − mean)² over the counted entries of `values` (their sum and count given)
/// when some take new values, the others unchanged: O(1), from the running sum.
pub(crate) fn sq_dev_delta(
    values: &[f64],
    counted: &[bool],
    (sum, count): (f64, usize),
    changes: &[(NodeIdx, f64)],
) -> f64 {
    if count == 0 {
        return 0.0;
    }
    let (mut d_sum, mut d_sq) = (0.0, 0.0);
    for &(n, new) in changes {
        if !counted[n.get()] {
            continue;
        }
        let old = values[n.get()];
        let d = new - old;
        d_sum += d;
        d_sq += d * (2.0 * old + d);
    }
    let n = count as f64;
    d_sq - (2.0 * sum * d_sum + d_sum * d_sum) / n
}

/// Keeps the three most extreme entries under `better`, ties by node order (first seen).
fn keep_extreme(v: &mut Vec<(f64, NodeIdx)>, e: (f64, NodeIdx), better: fn(f64, f64) -> bool) {
    let pos = v.iter().position(|x| better(e.0, x.0)).unwrap_or(v.len());
    if pos < 3 {
        v.insert(pos, e);
        v.truncate(3);
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::testutil::*;

    fn sum_sq_dev(loads: &[f64]) -> f64 {
        let m = loads.iter().sum::<f64>() / loads.len() as f64;
        loads.iter().map(|l| (l - m) * (l - m)).sum()
    }

    #[test]
    fn gain_matches_recomputing_the_sum_of_squared_deviations() {
        let c = ClusterBuilder::new()
            .node(node("a").memory(100 * GIB))
            .node(node("b").memory(50 * GIB))
            .node(node("c").memory(100 * GIB))
            .node(node("m").memory(100 * GIB).notes("flxp.maintenance"))
            .guest(vm(101, "a").mem(30 * GIB, 32 * GIB))
            .guest(vm(102, "a").mem(40 * GIB, 48 * GIB))
            .guest(vm(103, "b").mem(10 * GIB, 16 * GIB))
            .guest(vm(104, "m").mem(10 * GIB, 16 * GIB))
            .build();
        let s = State::new(&c);
        let o = Objective::new(&c, &s, LoadKind::Memory);
        let (a, b, cc) = (NodeIdx(0), NodeIdx(1), NodeIdx(2));
        assert_eq!((o.load(a), o.load(b), o.load(cc)), (70.0, 20.0, 0.0));
        let shift = Shift::of([c.guest(c.guest_idx(101).unwrap())]);
        let e = o.effect(&c, &s, a, b, &shift);
        assert_eq!(e.to.1, 80.0, "30 GiB on a 50 GiB node");
        let before = sum_sq_dev(&[70.0, 20.0, 0.0]);
        let after = sum_sq_dev(&[40.0, 80.0, 0.0]);
        assert!(
            (e.gain - (before - after)).abs() < 1e-9,
            "{} vs {}",
            e.gain,
            before - after
        );
        let e = o.effect(&c, &s, a, cc, &shift);
        assert!((e.gain - (before - sum_sq_dev(&[40.0, 20.0, 30.0]))).abs() < 1e-9);
        assert_eq!(
            o.measure(Measure::Spread),
            70.0,
            "the maintenance node does not count"
        );
        assert_eq!(o.measure_with(Measure::Spread, &[e.from, e.to]), 20.0);
        assert_eq!(o.hottest_first(), vec![a, b, cc]);
        // The O(1) screen agrees with the exact measure.
        let to_b = o.effect(&c, &s, a, b, &shift);
        let exact = o.measure_with(Measure::Spread, &[to_b.from, to_b.to]);
        assert_eq!(exact, 80.0);
        assert!(o.raises(Measure::Spread, &[to_b.from, to_b.to], 70.0, 1e-9));
        assert!(!o.raises(Measure::Spread, &[to_b.from, to_b.to], 80.0, 1e-9));
        for m in [Measure::Cv, Measure::CvRaw] {
            let now = o.measure(m);
            let after = o.measure_with(m, &[e.from, e.to]);
            assert!(after < now);
            assert!(!o.raises(m, &[e.from, e.to], after, 1e-9));
            assert!(o.raises(m, &[e.from, e.to], after - 1e-6, 1e-9));
        }
    }

    #[test]
    fn equal_nodes_gain_two_s_times_gap_minus_s() {
        let c = sized(&[("a", 100, &[10, 50]), ("b", 100, &[])]);
        let s = State::new(&c);
        let o = Objective::new(&c, &s, LoadKind::Memory);
        let shift = Shift::of([c.guest(c.guest_idx(101).unwrap())]);
        let e = o.effect(&c, &s, NodeIdx(0), NodeIdx(1), &shift);
        // s = 10, d = 60: 2 · 10 · 50 = 1000.
        assert!((e.gain - 1000.0).abs() < 1e-9, "{}", e.gain);
    }
}
