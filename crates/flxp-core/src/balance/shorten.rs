//! A local search over final placements for a plan with fewer migrations than the one in hand:
//! it drops a move (putting its guest back), drops one and re-routes another, replaces two moves
//! by one move of a guest the plan leaves, and, when none of these keeps the goal, trades one
//! move for another that lowers the measure (slack for the next drop). The exact search near the
//! greedy plan (`refine.rs`) proves nothing on clusters of a hundred guests and often runs out of
//! states before it finds a shorter plan: the greedy plan fixes broken rules with the smallest
//! guest of a pair, and balances with small guests a few larger ones replace. This search looks
//! only at where guests end; the exact search then orders the placement it finds (every step
//! safe, strict mode), over its moved guests alone, or the placement is dropped.
//!
//! Its cost is counted in placements tried, never in time, so the same snapshot gives the same
//! plan on every machine.

use crate::cluster::{Cluster, GuestIdx, NodeIdx};
use crate::constraints::{Rules, violations};
use crate::placement::{Ctx, Placer, Subject};
use crate::state::State;

use super::exact::{Goal, allowed};
use super::measure::{balanced_loads, balanced_nodes, imbalance_in};
use super::units::Units;

/// Slack for "reaches the goal's imbalance": float noise.
const EPS: f64 = 1e-9;
/// Least drop of Σ(load − mean)² (pp²) a trade of one move for another must bring.
const GAIN: f64 = 1e-3;
/// Moves off one node a bundle replacement looks at (its largest).
const BUNDLE_FROM: usize = 6;

/// A placement reaching `goal` from `start` that moves fewer guests than `end` (which must reach
/// it), within `budget` placements tried; `None` if none was found. Only guests in `may` that
/// move alone (no affinity group) change; the others stay where `end` has them.
pub(crate) fn fewer_moves(
    (cluster, rules, start, placer): (&Cluster, &Rules, &State, &Placer),
    goal: &Goal,
    end: &State,
    may: &[GuestIdx],
    budget: u64,
) -> Option<State> {
    let units = Units::new(cluster, rules);
    let balanced: Vec<NodeIdx> = balanced_nodes(cluster).collect();
    let allowed = |g: GuestIdx, n: NodeIdx| allowed(cluster, rules, g, n);
    let guests: Vec<GuestIdx> = may
        .iter()
        .copied()
        .filter(|&g| units.get(units.of(g)).members.len() == 1)
        .collect();
    let targets = guests
        .iter()
        .map(|&g| {
            balanced
                .iter()
                .copied()
                .filter(|&n| n != start.location(g) && allowed(g, n))
                .collect()
        })
        .collect();
    let back = guests
        .iter()
        .map(|&g| !goal.must_leave.contains(&g) && allowed(g, start.location(g)))
        .collect();
    let mut s = Local {
        cluster,
        rules,
        placer,
        goal,
        start,
        cur: end.clone(),
        guests,
        targets,
        back,
        tries: 0,
        budget,
    };
    let before = s.count();
    while !s.spent() && s.step() {}
    (s.count() < before).then_some(s.cur)
}

struct Local<'a> {
    cluster: &'a Cluster,
    rules: &'a Rules,
    placer: &'a Placer,
    goal: &'a Goal,
    start: &'a State,
    /// The placement so far: it always reaches the goal.
    cur: State,
    /// Guests the search may place.
    guests: Vec<GuestIdx>,
    /// For each, the balanced nodes its hard node rules allow, not its starting node.
    targets: Vec<Vec<NodeIdx>>,
    /// For each, whether it may end where it starts.
    back: Vec<bool>,
    tries: u64,
    budget: u64,
}

impl Local<'_> {
    fn spent(&self) -> bool {
        self.tries >= self.budget
    }

    /// Guests whose node differs from the start.
    fn count(&self) -> usize {
        (0..self.cluster.guests().len())
            .filter(|&i| {
                let g = GuestIdx(i as u32);
                self.cur.location(g) != self.start.location(g)
            })
            .count()
    }

    /// The imbalance in the load kind the goal weighs (not [`super::measure::Metric::effective`]
    /// of the current placement, which may weigh memory alone where the goal weighs both).
    fn measure(&self) -> f64 {
        imbalance_in(
            self.cluster,
            &self.cur,
            self.goal.measure,
            self.goal.measure.load_kind(self.goal.metric),
        )
    }

    fn reaches(&self) -> bool {
        self.measure() <= self.goal.imbalance + EPS
            && balanced_nodes(self.cluster)
                .all(|n| self.cur.usage(n).mem_held() <= self.cluster.node(n).maxmem)
            && violations(self.cluster, self.rules, &self.cur).len() <= self.goal.violations
    }

    /// Positions (in `guests`) of the guests the placement moves, and of those it leaves.
    fn split(&self) -> (Vec<usize>, Vec<usize>) {
        (0..self.guests.len()).partition(|&i| {
            let g = self.guests[i];
            self.cur.location(g) != self.start.location(g)
        })
    }

    /// Where guest `i` may end, other than where it is now.
    fn places(&self, i: usize) -> Vec<NodeIdx> {
        let g = self.guests[i];
        let here = self.cur.location(g);
        let mut out: Vec<NodeIdx> = self.targets[i]
            .iter()
            .copied()
            .filter(|&n| n != here)
            .collect();
        let home = self.start.location(g);
        if self.back[i] && home != here {
            out.push(home);
        }
        out
    }

    /// Moves guest `i` to `t` if the placement filters take it there on the current placement
    /// (memory, hard rules); counts one try. Returns where it was.
    fn put(&mut self, i: usize, t: NodeIdx) -> Option<NodeIdx> {
        self.tries += 1;
        let g = self.guests[i];
        let from = self.cur.location(g);
        let subject = Subject::guest(self.cluster, self.rules, g, from);
        let ctx = Ctx::new(
            self.cluster,
            self.rules,
            &self.cur,
            self.placer.options(),
            &subject,
        );
        if !self.placer.feasible(&ctx, t) {
            return None;
        }
        self.cur.move_guest(self.cluster, g, t);
        Some(from)
    }

    /// Puts guest `i` back where it started, unchecked (a placement, not a step: the rules and
    /// memory are checked on the whole placement, the steps by the order search); returns where
    /// it was.
    fn back_home(&mut self, i: usize) -> NodeIdx {
        let g = self.guests[i];
        let was = self.cur.location(g);
        self.cur.move_guest(self.cluster, g, self.start.location(g));
        was
    }

    fn undo(&mut self, i: usize, to: NodeIdx) {
        self.cur.move_guest(self.cluster, self.guests[i], to);
    }

    /// The measure with guest `i` at `t`, without the filters (a cheap first look).
    fn measure_at(&mut self, i: usize, t: NodeIdx) -> f64 {
        self.tries += 1;
        let g = self.guests[i];
        let from = self.cur.location(g);
        self.cur.move_guest(self.cluster, g, t);
        let m = self.measure();
        self.cur.move_guest(self.cluster, g, from);
        m
    }

    /// Σ(load − mean)² over the balanced nodes.
    fn smoothness(&self) -> f64 {
        let kind = self.goal.measure.load_kind(self.goal.metric);
        let loads = balanced_loads(self.cluster, &self.cur, kind);
        let mean = loads.iter().sum::<f64>() / loads.len().max(1) as f64;
        loads.iter().map(|l| (l - mean) * (l - mean)).sum()
    }

    /// [`Local::smoothness`] with guest `i` at `t`, if that is below `than` and the measure
    /// still reaches the goal (without the filters); counts one try.
    fn smoothness_at(&mut self, i: usize, t: NodeIdx, than: f64) -> Option<f64> {
        if self.spent() {
            return None;
        }
        self.tries += 1;
        let g = self.guests[i];
        let from = self.cur.location(g);
        self.cur.move_guest(self.cluster, g, t);
        let v = self.smoothness();
        let ok = v < than - GAIN && self.measure() <= self.goal.imbalance + EPS;
        self.cur.move_guest(self.cluster, g, from);
        ok.then_some(v)
    }

    /// Guest `i` to `t` if that reaches the goal; true if it stays there.
    fn try_finish(&mut self, i: usize, t: NodeIdx) -> bool {
        if self.spent() || self.measure_at(i, t) > self.goal.imbalance + EPS {
            return false;
        }
        let Some(from) = self.put(i, t) else {
            return false;
        };
        if self.reaches() {
            return true;
        }
        self.undo(i, from);
        false
    }

    /// One change that moves fewer guests (or as many, with a lower measure); false if none.
    fn step(&mut self) -> bool {
        let (moved, left) = self.split();
        let dropping: Vec<usize> = moved.iter().copied().filter(|&a| self.back[a]).collect();
        // Drop one move, and re-route at most one other.
        for &a in &dropping {
            let was = self.back_home(a);
            if self.reaches() {
                return true;
            }
            for &b in &moved {
                if b == a {
                    continue;
                }
                for t in self.places(b) {
                    if self.try_finish(b, t) {
                        return true;
                    }
                }
            }
            self.undo(a, was);
        }
        // Two to four moves off one node become one move of a larger guest of that node (the
        // greedy plan unloads a node with many small guests where one large one does).
        let mut nodes: Vec<NodeIdx> = dropping
            .iter()
            .map(|&a| self.start.location(self.guests[a]))
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        for n in nodes {
            let mut off: Vec<usize> = dropping
                .iter()
                .copied()
                .filter(|&a| self.start.location(self.guests[a]) == n)
                .collect();
            off.sort_by_key(|&a| {
                std::cmp::Reverse(self.cluster.guest(self.guests[a]).mem_footprint())
            });
            off.truncate(BUNDLE_FROM);
            let stay: Vec<usize> = left
                .iter()
                .copied()
                .filter(|&c| self.start.location(self.guests[c]) == n)
                .collect();
            for mask in 1u32..(1 << off.len()) {
                if !(2..=4).contains(&mask.count_ones()) {
                    continue;
                }
                let chosen: Vec<usize> = (0..off.len())
                    .filter(|&k| mask & (1 << k) != 0)
                    .map(|k| off[k])
                    .collect();
                let undone: Vec<(usize, NodeIdx)> =
                    chosen.iter().map(|&a| (a, self.back_home(a))).collect();
                for &c in &stay {
                    for t in self.places(c) {
                        if self.try_finish(c, t) {
                            return true;
                        }
                    }
                }
                for &(a, was) in undone.iter().rev() {
                    self.undo(a, was);
                }
                if self.spent() {
                    return false;
                }
            }
        }
        // Two moves become one move of a guest the placement leaves.
        for (x, &a) in dropping.iter().enumerate() {
            let was_a = self.back_home(a);
            for &b in &dropping[x + 1..] {
                let was_b = self.back_home(b);
                for &c in &left {
                    for t in self.places(c) {
                        if self.try_finish(c, t) {
                            return true;
                        }
                    }
                }
                self.undo(b, was_b);
            }
            self.undo(a, was_a);
            if self.spent() {
                return false;
            }
        }
        // As many moves, loads closer to their mean (room for the next drop): one move traded
        // for a move of a guest left, or re-routed.
        let now = self.smoothness();
        let mut better: Vec<(f64, Option<usize>, usize, NodeIdx)> = Vec::new();
        for &a in &dropping {
            let was = self.back_home(a);
            for &c in &left {
                for t in self.places(c) {
                    if let Some(v) = self.smoothness_at(c, t, now) {
                        better.push((v, Some(a), c, t));
                    }
                }
            }
            self.undo(a, was);
        }
        for &b in &moved {
            for t in self.places(b) {
                if let Some(v) = self.smoothness_at(b, t, now) {
                    better.push((v, None, b, t));
                }
            }
        }
        better.sort_by(|x, y| x.0.total_cmp(&y.0));
        for (_, a, c, t) in better {
            if self.spent() {
                return false;
            }
            let was = a.map(|a| (a, self.back_home(a)));
            if self.try_finish(c, t) {
                return true;
            }
            if let Some((a, was)) = was {
                self.undo(a, was);
            }
        }
        false
    }
}
