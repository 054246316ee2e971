//! An exact baseline for small clusters: the fewest migrations (then the fewest bytes) that reach
//! a given imbalance, every step safe. For benchmarks and tests only (feature `exact`): its cost
//! grows exponentially with the migrations it needs.
//!
//! The search is over final placements: a plan's migrations are at least the guests whose node
//! changes, so the fewest guests that must change node to reach the goal (hard rules broken no
//! more than the goal allows, the imbalance at most its value, every `must_leave` guest gone) is a
//! lower bound on every plan. For each such set the search then looks for an order in which each
//! guest moves once and every step passes the placement filters on the state the earlier steps
//! leave. Depth-first over guests (largest first), iterative deepening on the migrations, pruned by
//! [`need_for_spread`] on what is still undecided and, within a depth, by bytes.
//!
//! When no order exists for any placement of the fewest changes, a plan needs more migrations, and
//! the result says so: `migrations` is then the fewest once-per-guest plan found and `floor` the
//! proven lower bound (equal when `exact`).

use std::collections::HashSet;

use crate::cluster::{Cluster, GuestIdx, NodeIdx};
use crate::constraints::{Rules, violations};
use crate::placement::{Ctx, Placer, Subject};
use crate::state::State;

use super::bounds::need_for_spread;
use super::measure::{Measure, Metric, balanced_nodes, imbalance};
use super::movable::{Intent, stays};

/// What a plan must reach.
#[derive(Debug, Clone)]
pub struct Goal {
    /// How imbalance is measured.
    pub measure: Measure,
    /// Of what.
    pub metric: Metric,
    /// The imbalance to reach (at most).
    pub imbalance: f64,
    /// Most hard-rule violations left.
    pub violations: usize,
    /// Guests that must end off their node (those off nodes outside the balance).
    pub must_leave: Vec<GuestIdx>,
    /// Cooldown for balancing moves, as the planner applies it.
    pub cooldown_secs: i64,
}

/// The best plan the search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Optimum {
    /// Migrations of the best plan found (each guest moved once).
    pub migrations: usize,
    /// Bytes it copies.
    pub bytes: u64,
    /// Proven lower bound on the migrations of any plan (equals `migrations` when exact).
    pub floor: usize,
    /// Whether `migrations` is proven the fewest.
    pub exact: bool,
    /// The plan: guests and targets in a safe order.
    pub moves: Vec<(GuestIdx, NodeIdx)>,
}

/// Why the search gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gave {
    /// More than the allowed migrations are needed (or the goal is unreachable once per guest).
    Limit,
    /// The node budget ran out first.
    Budget,
}

struct Search<'a> {
    cluster: &'a Cluster,
    rules: &'a Rules,
    placer: &'a Placer,
    goal: &'a Goal,
    /// Guests that may move, largest first.
    guests: Vec<GuestIdx>,
    /// For each of them, the balanced nodes its hard node rules allow (not its own).
    targets: Vec<Vec<NodeIdx>>,
    mandatory: Vec<bool>,
    start: State,
    state: State,
    chosen: Vec<(GuestIdx, NodeIdx)>,
    bytes: u64,
    best: Option<(u64, Vec<(GuestIdx, NodeIdx)>)>,
    expanded: u64,
    budget: u64,
    out_of_budget: bool,
    /// A placement reached the goal at this depth but had no safe order.
    unordered: bool,
}

/// The fewest migrations (then bytes) reaching `goal` from `state`, searching at most
/// `max_migrations` deep and expanding at most `budget` search nodes.
pub fn fewest_migrations(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    placer: &Placer,
    goal: &Goal,
    max_migrations: usize,
    budget: u64,
) -> Result<Optimum, Gave> {
    let balanced: Vec<NodeIdx> = balanced_nodes(cluster).collect();
    let mut guests: Vec<GuestIdx> = cluster
        .guest_indexes()
        .filter(|&g| {
            goal.must_leave.contains(&g)
                || (cluster.guest(g).running
                    && stays(cluster, rules, g, Intent::Balance, goal.cooldown_secs).is_none())
        })
        .collect();
    guests.sort_by_key(|&g| (std::cmp::Reverse(cluster.guest(g).mem_footprint()), g));
    let targets = guests
        .iter()
        .map(|&g| {
            let r = rules.guest(g);
            balanced
                .iter()
                .copied()
                .filter(|&n| n != state.location(g) && r.allows(n))
                .filter(|&n| {
                    r.selectors
                        .iter()
                        .all(|l| cluster.node(n).labels.contains(l))
                })
                .collect()
        })
        .collect();
    let mandatory = guests.iter().map(|g| goal.must_leave.contains(g)).collect();
    let mut s = Search {
        cluster,
        rules,
        placer,
        goal,
        guests,
        targets,
        mandatory,
        start: state.clone(),
        state: state.clone(),
        chosen: Vec::new(),
        bytes: 0,
        best: None,
        expanded: 0,
        budget,
        out_of_budget: false,
        unordered: false,
    };
    let floor = s.need(0).map_or(usize::MAX, |n| n.migrations);
    let mut proven = floor;
    for k in floor..=max_migrations {
        s.dfs(0, k);
        if s.out_of_budget {
            return Err(Gave::Budget);
        }
        if let Some((bytes, moves)) = s.best.take() {
            return Ok(Optimum {
                migrations: moves.len(),
                bytes,
                floor: proven,
                exact: proven == moves.len(),
                moves,
            });
        }
        // No placement with k changes reaches the goal, so every plan needs more; placements
        // with k changes but no safe order do not raise the floor.
        if std::mem::take(&mut s.unordered) {
            continue;
        }
        proven = k + 1;
    }
    Err(Gave::Limit)
}

impl Search<'_> {
    /// Lower bound on the migrations and bytes still needed, guests from `i` on undecided.
    fn need(&self, i: usize) -> Option<super::bounds::Need> {
        let kind = self.goal.measure.load_kind(self.goal.metric);
        let undecided: HashSet<GuestIdx> = self.guests[i..].iter().copied().collect();
        let must: Vec<GuestIdx> = self.guests[i..]
            .iter()
            .zip(&self.mandatory[i..])
            .filter(|(_, m)| **m)
            .map(|(g, _)| *g)
            .collect();
        if self.goal.measure != Measure::Spread {
            return Some(super::bounds::Need {
                migrations: must.len(),
                bytes: must
                    .iter()
                    .map(|&g| self.cluster.guest(g).move_bytes())
                    .sum(),
            });
        }
        need_for_spread(
            self.cluster,
            &self.state,
            kind,
            self.goal.imbalance,
            &must,
            |g| undecided.contains(&g),
        )
    }

    fn dfs(&mut self, i: usize, k: usize) {
        if self.out_of_budget {
            return;
        }
        self.expanded += 1;
        if self.expanded > self.budget {
            self.out_of_budget = true;
            return;
        }
        let used = self.chosen.len();
        let Some(need) = self.need(i) else {
            return;
        };
        if used + need.migrations > k {
            return;
        }
        if let Some((best, _)) = &self.best {
            if self.bytes + need.bytes >= *best {
                return;
            }
        }
        if used == k || i == self.guests.len() {
            if self.guests[i..]
                .iter()
                .zip(&self.mandatory[i..])
                .any(|(_, m)| *m)
            {
                return;
            }
            if used == k && self.reaches_goal() {
                if let Some(order) = self.safe_order() {
                    self.best = Some((self.bytes, order));
                } else {
                    self.unordered = true;
                }
            }
            return;
        }
        let g = self.guests[i];
        if !self.mandatory[i] {
            self.dfs(i + 1, k);
        }
        let from = self.state.location(g);
        let bytes = self.cluster.guest(g).move_bytes();
        for t in self.targets[i].clone() {
            self.state.move_guest(self.cluster, g, t);
            self.chosen.push((g, t));
            self.bytes += bytes;
            self.dfs(i + 1, k);
            self.bytes -= bytes;
            self.chosen.pop();
            self.state.move_guest(self.cluster, g, from);
        }
    }

    fn reaches_goal(&self) -> bool {
        let g = self.goal;
        imbalance(self.cluster, &self.state, g.measure, g.metric) <= g.imbalance + 1e-9
            && violations(self.cluster, self.rules, &self.state).len() <= g.violations
    }

    /// An order of the chosen moves in which every step passes the filters, if any.
    fn safe_order(&self) -> Option<Vec<(GuestIdx, NodeIdx)>> {
        let moves = &self.chosen;
        let mut dead: HashSet<u64> = HashSet::new();
        let mut order = Vec::with_capacity(moves.len());
        let mut state = self.start.clone();
        if self.order_from(moves, 0, &mut state, &mut order, &mut dead) {
            Some(order)
        } else {
            None
        }
    }

    fn order_from(
        &self,
        moves: &[(GuestIdx, NodeIdx)],
        done: u64,
        state: &mut State,
        order: &mut Vec<(GuestIdx, NodeIdx)>,
        dead: &mut HashSet<u64>,
    ) -> bool {
        if order.len() == moves.len() {
            return true;
        }
        if dead.contains(&done) {
            return false;
        }
        for (j, &(g, t)) in moves.iter().enumerate() {
            if done & (1 << j) != 0 {
                continue;
            }
            let from = state.location(g);
            let subject = Subject::guest(self.cluster, self.rules, g, from);
            let ctx = Ctx::new(
                self.cluster,
                self.rules,
                state,
                self.placer.options(),
                &subject,
            );
            if !self.placer.feasible(&ctx, t) {
                continue;
            }
            state.move_guest(self.cluster, g, t);
            order.push((g, t));
            if self.order_from(moves, done | (1 << j), state, order, dead) {
                return true;
            }
            order.pop();
            state.move_guest(self.cluster, g, from);
        }
        dead.insert(done);
        false
    }
}

impl Goal {
    /// What a plan reached: its imbalance, its violations left, and the guests it moved off nodes
    /// outside the balance.
    pub fn of_plan(cluster: &Cluster, plan: &super::Plan, options: &super::BalanceOptions) -> Self {
        let must_leave = super::planner::leaving_unschedulable(cluster, &plan.migrations);
        Self {
            measure: plan.measure,
            metric: options.metric,
            imbalance: plan.imbalance_after,
            violations: plan.violations_after.len(),
            must_leave,
            cooldown_secs: options.cooldown_secs,
        }
    }
}

impl Optimum {
    /// The optimum as plan migrations, for replaying it.
    pub fn migrations(&self, cluster: &Cluster) -> Vec<super::Migration> {
        self.moves
            .iter()
            .enumerate()
            .map(|(i, &(g, t))| {
                let guest = cluster.guest(g);
                super::Migration {
                    vmid: guest.vmid,
                    kind: guest.kind,
                    name: guest.name.clone(),
                    from: cluster.node(guest.node).name.clone(),
                    to: cluster.node(t).name.clone(),
                    reason: "exact baseline".to_owned(),
                    purpose: super::Purpose::Balance,
                    online: guest.running,
                    bytes: guest.move_bytes(),
                    bundle: Vec::new(),
                    group: None,
                    step: i as u32,
                    wave: i as u32,
                    imbalance_after: 0.0,
                }
            })
            .collect()
    }
}

/// Families of small generated clusters the baseline is measured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Equal nodes, most guests on one.
    Skewed,
    /// Nodes of 32, 64 and 128 GiB, guests anywhere.
    Heterogeneous,
    /// Small nodes filled to about 80 %: capacity decides the order of moves.
    Tight,
    /// Anti-affinity pairs sharing a node and a guest pinned elsewhere.
    BrokenRules,
    /// One node in maintenance holding a few guests.
    Maintenance,
}

impl Family {
    /// Every family, in report order.
    pub const ALL: [Family; 5] = [
        Family::Skewed,
        Family::Heterogeneous,
        Family::Tight,
        Family::BrokenRules,
        Family::Maintenance,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Family::Skewed => "skewed",
            Family::Heterogeneous => "heterogeneous",
            Family::Tight => "tight",
            Family::BrokenRules => "broken rules",
            Family::Maintenance => "maintenance",
        }
    }

    /// A cluster of this family: 4–6 nodes, 10–16 running VMs, the same for the same seed.
    pub fn generate(self, seed: u64) -> crate::Snapshot {
        use crate::builder::{ClusterBuilder, node, vm};
        const GIB: u64 = crate::units::GIB;
        let mut r = Lcg(seed.wrapping_mul(2654435761).wrapping_add(self as u64));
        let nodes = 4 + r.next(3) as usize;
        let guests = 10 + r.next(7) as usize;
        let sizes: Vec<u64> = (0..nodes)
            .map(|_| match self {
                Family::Heterogeneous | Family::BrokenRules => [32, 64, 128][r.next(3) as usize],
                Family::Tight => 32,
                _ => 64,
            })
            .collect();
        let mut b = ClusterBuilder::new().time(1_000_000);
        for (i, gib) in sizes.iter().enumerate() {
            let mut spec = node(&format!("n{i}")).memory(gib * GIB).cpus(32.0);
            if self == Family::Maintenance && i == nodes - 1 {
                spec = spec.notes("flxp.maintenance");
            }
            b = b.node(spec);
        }
        let mut used = vec![0u64; nodes];
        let total: u64 = sizes.iter().sum();
        // Tight: about 80 % of all memory in guests; others 40-60 %.
        let fill = match self {
            Family::Tight => 80,
            _ => 40 + r.next(21),
        };
        let avg = (total * fill / 100 / guests as u64).max(1);
        let mut placed: Vec<usize> = Vec::new();
        for k in 0..guests {
            let size = (avg * (40 + r.next(121)) / 100).clamp(1, 16);
            let want = match self {
                Family::Skewed if r.next(10) < 7 => 0,
                Family::Maintenance if k < 3 => nodes - 1,
                Family::Tight if r.next(10) < 4 => 0,
                // Each anti-affinity pair starts on one node.
                Family::BrokenRules if k == 1 || k == 3 => placed[k - 1],
                _ => r.next(nodes as u64) as usize,
            };
            // The first node from `want` with room (under 95 %).
            let Some(at) = (0..nodes)
                .map(|d| (want + d) % nodes)
                .find(|&n| (used[n] + size) * 100 <= sizes[n] * 95)
            else {
                placed.push(want);
                continue;
            };
            used[at] += size;
            placed.push(at);
            let vmid = 100 + k as u32;
            let mut tags: Vec<String> = Vec::new();
            if self == Family::BrokenRules {
                if k < 4 {
                    tags.push(format!("flxp.anti-affinity.pair{}", k / 2));
                }
                if k == 4 {
                    tags.push(format!("flxp.node.n{}", (at + 1) % nodes));
                }
            }
            let mut g = vm(vmid, &format!("n{at}"))
                .mem(size * GIB, size * GIB)
                .cores(2.0, 0.2);
            if !tags.is_empty() {
                g = g.tagged(&tags.join(";"));
            }
            b = b.guest(g);
        }
        b.snapshot()
    }
}

/// A small LCG: the same seed gives the same cluster on every machine.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, m: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % m.max(1)
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::Overrides;
    use crate::balance::{BalanceOptions, plan, replay};
    use crate::placement::PlacementOptions;
    use proptest::prelude::*;

    fn options() -> BalanceOptions {
        BalanceOptions {
            max_migrations: 50,
            ..BalanceOptions::default()
        }
    }

    /// flxp's plan and the exact optimum for the same goal, on a generated cluster.
    fn solve(f: Family, seed: u64) -> Option<(crate::balance::Plan, Optimum, Cluster)> {
        let c = Cluster::from_snapshot(&f.generate(seed), &Overrides::default()).unwrap();
        let (r, s) = (Rules::compile(&c), State::new(&c));
        let placer = Placer::new(PlacementOptions::default(), Vec::new()).unwrap();
        let o = options();
        let p = plan(&c, &r, &s, &placer, &o).unwrap();
        let goal = Goal::of_plan(&c, &p, &o);
        let best =
            fewest_migrations(&c, &r, &s, &placer, &goal, p.migrations.len(), 3_000_000).ok()?;
        // The optimum's own plan is safe and reaches the goal.
        let end = replay(&c, &r, &s, &placer, &best.migrations(&c)).unwrap();
        assert!(imbalance(&c, &end, goal.measure, goal.metric) <= goal.imbalance + 1e-9);
        Some((p, best, c))
    }

    #[test]
    fn the_exact_method_never_needs_more_than_the_plan() {
        for f in Family::ALL {
            for seed in 1..=3 {
                let Some((p, best, _)) = solve(f, seed) else {
                    continue;
                };
                assert!(
                    best.migrations <= p.migrations.len(),
                    "{} #{seed}: {} > {}",
                    f.name(),
                    best.migrations,
                    p.migrations.len()
                );
            }
        }
    }

    #[test]
    fn the_post_pass_brings_plans_within_a_fifth_of_the_fewest_migrations() {
        let placer = Placer::new(PlacementOptions::default(), Vec::new()).unwrap();
        let (mut with, mut without, mut fewest) = (0, 0, 0);
        for f in [Family::Skewed, Family::Heterogeneous, Family::BrokenRules] {
            for seed in 1..=4 {
                let c = Cluster::from_snapshot(&f.generate(seed), &Overrides::default()).unwrap();
                let (r, s) = (Rules::compile(&c), State::new(&c));
                let o = options();
                let p = plan(&c, &r, &s, &placer, &o).unwrap();
                let raw = plan(
                    &c,
                    &r,
                    &s,
                    &placer,
                    &BalanceOptions {
                        prune: false,
                        ..o.clone()
                    },
                )
                .unwrap();
                assert!(p.imbalance_after <= raw.imbalance_after + 1e-9);
                let best = fewest_migrations(
                    &c,
                    &r,
                    &s,
                    &placer,
                    &Goal::of_plan(&c, &p, &o),
                    p.migrations.len(),
                    3_000_000,
                )
                .unwrap();
                with += p.migrations.len();
                without += raw.migrations.len();
                fewest += best.migrations;
            }
        }
        assert!(with < without, "{with} vs {without} without the post-pass");
        assert!(
            with as f64 <= 1.2 * fewest as f64,
            "{with} migrations, the fewest {fewest}"
        );
    }

    #[test]
    fn thorough_mode_never_returns_a_worse_plan() {
        let placer = Placer::new(PlacementOptions::default(), Vec::new()).unwrap();
        for f in Family::ALL {
            let c = Cluster::from_snapshot(&f.generate(7), &Overrides::default()).unwrap();
            let (r, s) = (Rules::compile(&c), State::new(&c));
            let fast = plan(&c, &r, &s, &placer, &options()).unwrap();
            let o = BalanceOptions {
                effort_secs: 0.3,
                ..options()
            };
            let slow = plan(&c, &r, &s, &placer, &o).unwrap();
            replay(&c, &r, &s, &placer, &slow.migrations).unwrap();
            assert!(
                slow.imbalance_after <= fast.imbalance_after + 1e-9,
                "{}",
                f.name()
            );
            assert!(
                slow.migrations.len() <= fast.migrations.len(),
                "{}",
                f.name()
            );
            assert!(slow.violations_after.len() <= fast.violations_after.len());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        #[test]
        fn reported_bounds_never_exceed_the_exact_optimum(f in 0usize..5, seed in 1u64..10_000) {
            let f = Family::ALL[f];
            if let Some((p, best, _)) = solve(f, seed) {
                if let Some(k) = p.bounds.migrations {
                    prop_assert!(k <= best.floor, "{}: bound {k} > optimum {}", f.name(), best.floor);
                }
                if let (Some(b), true) = (p.bounds.bytes, best.exact) {
                    prop_assert!(b <= best.bytes, "{}: bound {b} B > optimum {} B", f.name(), best.bytes);
                }
            }
        }
    }
}
