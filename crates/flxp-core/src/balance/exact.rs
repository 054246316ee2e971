//! The exact search: the fewest migrations (then the fewest bytes) that reach a given imbalance,
//! every step safe. The planner runs it, within a work budget, on small clusters (see
//! `refine.rs`); the quality benchmark runs it as its baseline. Its cost grows exponentially with
//! the migrations it needs, so every caller bounds the search states it may visit.
//!
//! The search is over final placements: a plan's migrations are at least the guests whose node
//! changes, so the fewest guests that must change node to reach the goal (hard rules broken no
//! more than the goal allows, the imbalance at most its value, every `must_leave` guest gone) is a
//! lower bound on every plan. For each such set the search then looks for an order in which each
//! guest moves once and every step passes the placement filters on the state the earlier steps
//! leave. Depth-first over guests (largest first), iterative deepening on the migrations, pruned by
//! `bounds::need_for_spread` at `Tightness::Window` on what is still undecided and, within a depth, by bytes.
//!
//! The running members of a hard affinity group that share a node are one decision, as in the
//! greedy planner: they move together to one node in one step, and each member counts as a
//! migration. A group the search cannot move that way (split over nodes, or its rules conflict)
//! stays where it is; then the result is not proven the fewest (`exact` is false).
//!
//! When no order exists for any placement of the fewest changes, a plan needs more migrations, and
//! the result says so: `migrations` is then the fewest once-per-guest plan found and `floor` the
//! proven lower bound (equal when `exact`).
//!
//! When the planner asks to beat its own plan and proving the fewest runs out of budget, the
//! search takes, with half as many states again, the first plan it finds with one migration fewer
//! than the incumbent, then one fewer than that, and so on (not proven the fewest). That search
//! tries each guest's node in the incumbent's final placement first: on medium clusters a goal
//! placement is rare far from it (none within 125,000 states from the largest guests
//! staying put), and common near it.
//!
//! In strict mode (the planner's) an order must also keep what the greedy planner keeps: a
//! balancing decision (one that neither empties a node outside the balance nor fixes a broken
//! rule) never raises the measure and leaves no soft rule of its guests worse off (unless the soft
//! weight says the imbalance it removes is worth it), and the last one lowers the measure. A
//! decision is one balancing move, or two in a row when the first alone would break that rule:
//! the pair is judged as a whole, as the greedy planner judges a swap (each move still passes the
//! placement filters on the state before it). Without pairs some clusters need an extra migration
//! only to keep every single step from raising the measure (two guests trading places
//! so that a third move reaches the target). The baseline leaves strict mode off: it is the
//! optimum of every safe plan.

use std::time::Instant;

use crate::cluster::{Cluster, GuestIdx, GuestKind, NodeIdx};
use crate::constraints::{Rules, violations};
use crate::placement::{Ctx, Placer, Subject};
use crate::state::State;

use super::bounds::{Tightness, need_among};
use super::measure::{Measure, Metric, balanced_nodes, imbalance_in};
use super::movable::{Intent, returns, stays};
use super::plan::Purpose;
use super::refine::WORK;
use super::softness::{penalty, worth_trading};
use super::units::Units;

/// Slack for "does not raise the measure": float noise, not a real rise.
const EPS: f64 = 1e-9;

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
    /// In strict mode, the return hold: no balancing move takes a guest back to a node it left
    /// less than this many seconds ago (0: off), as the planner applies it.
    pub return_hold_secs: i64,
    /// Whether running containers may move (by a restart), as the planner's option says.
    pub restart_containers: bool,
    /// Strict mode: the orders the planner itself may return (see the module docs).
    pub strict: bool,
    /// In strict mode, what one soft rule is worth in imbalance (the planner's `soft_weight`).
    pub soft_weight: Option<f64>,
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
    /// The plan: guests, targets and what each move is for, in a safe order.
    pub moves: Moves,
    /// Affinity groups the plan moves as one step (their members, in `moves` order).
    pub bundles: Vec<Vec<GuestIdx>>,
    /// Positions in `moves` that close a two-move balancing decision begun by the move before
    /// (strict mode only): the first alone raises the measure, the pair does not.
    pub joined: Vec<usize>,
}

/// A plan as the search keeps it: guests, targets and what each move is for, in run order.
pub type Moves = Vec<(GuestIdx, NodeIdx, Purpose)>;

/// Why the search gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gave {
    /// More than the allowed migrations are needed (or the goal is unreachable once per guest).
    Limit,
    /// The budget of search states ran out first.
    Budget,
}

struct Search<'a> {
    cluster: &'a Cluster,
    rules: &'a Rules,
    placer: &'a Placer,
    goal: &'a Goal,
    /// What may move, largest first, by its first member.
    guests: Vec<GuestIdx>,
    /// For each of them, the guests that move in that decision (one, or an affinity group's).
    members: Vec<Vec<GuestIdx>>,
    /// Each guest's position in `guests` (`usize::MAX` for guests that stay).
    pos: Vec<usize>,
    /// For each of them, the balanced nodes its hard node rules allow (not its own).
    targets: Vec<Vec<NodeIdx>>,
    mandatory: Vec<bool>,
    /// Guests that must move though not off an unschedulable node: they break a hard node rule
    /// where they are and the goal leaves no rule broken.
    forced: Vec<bool>,
    /// Whether a guest is interchangeable with the one before it (same node, size, load and
    /// rules): of two such, the later moves only if the earlier does, to a target no later in
    /// the list, so each set of placements is searched once.
    same_as_prev: Vec<bool>,
    /// Each position's choice on the current path: 0 stays, `j + 1` moves to `targets[i][j]`.
    choice: Vec<usize>,
    /// Whether a decision's guests must leave or share a rule broken at the start: an order
    /// tries these first, so that fixes come before balancing, as in the greedy plan.
    mends: Vec<bool>,
    /// Whether the start breaks a hard rule: then a rule still broken among decided guests
    /// prunes.
    rules_broken: bool,
    start: State,
    state: State,
    /// Decisions on the current path, by first member.
    chosen: Vec<(GuestIdx, NodeIdx)>,
    /// Migrations on the current path (a group's members each count).
    migrations: usize,
    bytes: u64,
    best: Option<(u64, Moves, Vec<usize>)>,
    /// At the last depth, only plans copying fewer bytes than this count (an incumbent's bytes).
    cap: Option<u64>,
    /// Whether the current depth is the last.
    last_depth: bool,
    expanded: u64,
    budget: u64,
    out_of_budget: bool,
    /// A placement reached the goal at this depth but had no safe order.
    unordered: bool,
    /// Stop at the first plan found (see [`Search::descend`]).
    first_only: bool,
    /// For [`Search::descend`]: each decision's target in the incumbent's final placement, as
    /// an index into its `targets` (`None`: it stays there); empty without an incumbent.
    hint: Vec<Option<usize>>,
    /// Thorough mode: when the search stops whatever states are left (proving the fewest stops
    /// earlier, see [`beating`]); `None` in the deterministic default.
    until: Option<Instant>,
    /// Thorough mode: the clock stops nothing before this many states, so thorough mode never
    /// searches less than the default does (`refine::WORK`, and half as much for the fallback).
    clock_after: u64,
    /// Thorough mode: the end of its time budget.
    deadline: Option<Instant>,
}

/// The guests the search may move (alone or with their affinity group).
pub(crate) fn movable(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    goal: &Goal,
) -> Vec<GuestIdx> {
    decisions(cluster, rules, state, goal, None)
        .0
        .into_iter()
        .flatten()
        .collect()
}

/// What the search may move, each as one decision: guests that must leave, running guests
/// balancing may move, and the running members of a hard affinity group on one node, all of which
/// balancing may move (together). Also whether a guest a plan might move is left out (a member of
/// a group split over nodes or whose rules conflict, or one outside `only`): then the search
/// proves nothing fewest. With `only`, a decision some of whose guests are not in it stays.
fn decisions(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    goal: &Goal,
    only: Option<&[GuestIdx]>,
) -> (Vec<Vec<GuestIdx>>, bool) {
    let units = Units::new(cluster, rules);
    let may = |g: GuestIdx| {
        let guest = cluster.guest(g);
        goal.must_leave.contains(&g)
            || (guest.running
                && (goal.restart_containers || guest.kind != GuestKind::Lxc)
                && stays(cluster, rules, g, Intent::Balance, goal.cooldown_secs).is_none())
    };
    let mut out = Vec::new();
    let mut left_out = false;
    for unit in &units.all {
        if unit.members.len() == 1 {
            if may(unit.members[0]) {
                out.push(unit.members.clone());
            }
            continue;
        }
        if unit.conflict.is_none()
            && unit.node(state).is_some()
            && unit.members.iter().all(|&g| may(g))
        {
            out.push(unit.members.clone());
            continue;
        }
        left_out |= unit.members.iter().any(|&g| may(g));
        // A guest that must leave still may, alone (the rules it breaks then count).
        out.extend(
            unit.members
                .iter()
                .filter(|g| goal.must_leave.contains(g))
                .map(|&g| vec![g]),
        );
    }
    if let Some(only) = only {
        let before = out.len();
        out.retain(|m| m.iter().all(|g| only.contains(g)));
        left_out |= out.len() < before;
    }
    (out, left_out)
}

/// Whether a guest's hard node rules (pins, selectors) allow it on a node.
pub(crate) fn allowed(cluster: &Cluster, rules: &Rules, g: GuestIdx, n: NodeIdx) -> bool {
    let r = rules.guest(g);
    r.allows(n)
        && r.selectors
            .iter()
            .all(|l| cluster.node(n).labels.contains(l))
}

/// The fewest migrations (then bytes) reaching `goal` from `state`, searching at most
/// `max_migrations` deep and visiting at most `budget` search states.
pub fn fewest_migrations(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    placer: &Placer,
    goal: &Goal,
    max_migrations: usize,
    budget: u64,
) -> Result<Optimum, Gave> {
    beating(
        (cluster, rules, state, placer),
        goal,
        (max_migrations, None, None),
        (budget, None),
        None,
    )
}

/// A plan reaching `goal` within `max_migrations`: the fewest migrations (then bytes), or with an
/// incumbent (`cap` bytes, leaving the cluster as `hint`) a plan that beats it: fewer migrations,
/// or as many and fewer bytes; the best such plan within `budget` states. When proving the fewest
/// runs out, the first plans with fewer migrations are looked for near `hint` first (see
/// [`Search::descend`]). With a `deadline` (thorough mode, not deterministic) the search also
/// stops there, proving the fewest at two thirds of the time left, so the fallback keeps a third;
/// never before the default's states. With `only`, the search moves those guests alone (the
/// others stay where they are), and proves nothing fewest.
pub(crate) fn beating(
    (cluster, rules, state, placer): (&Cluster, &Rules, &State, &Placer),
    goal: &Goal,
    (max_migrations, cap, hint): (usize, Option<u64>, Option<&State>),
    (budget, deadline): (u64, Option<Instant>),
    only: Option<&[GuestIdx]>,
) -> Result<Optimum, Gave> {
    let balanced: Vec<NodeIdx> = balanced_nodes(cluster).collect();
    let (mut members, left_out) = decisions(cluster, rules, state, goal, only);
    let footprint =
        |m: &[GuestIdx]| -> u64 { m.iter().map(|&g| cluster.guest(g).mem_footprint()).sum() };
    members.sort_by_key(|m| (std::cmp::Reverse(footprint(m)), state.location(m[0]), m[0]));
    let guests: Vec<GuestIdx> = members.iter().map(|m| m[0]).collect();
    let mut pos = vec![usize::MAX; cluster.guests().len()];
    for (i, m) in members.iter().enumerate() {
        for g in m {
            pos[g.get()] = i;
        }
    }
    let fits = |g: GuestIdx, n: NodeIdx| allowed(cluster, rules, g, n);
    let targets = members
        .iter()
        .map(|m| {
            balanced
                .iter()
                .copied()
                .filter(|&n| n != state.location(m[0]) && m.iter().all(|&g| fits(g, n)))
                .collect()
        })
        .collect();
    let mandatory: Vec<bool> = members
        .iter()
        .map(|m| m.iter().any(|g| goal.must_leave.contains(g)))
        .collect();
    let forced: Vec<bool> = members
        .iter()
        .map(|m| goal.violations == 0 && m.iter().any(|&g| !fits(g, state.location(g))))
        .collect();
    let same_as_prev: Vec<bool> = (0..guests.len())
        .map(|i| {
            i > 0
                && members[i].len() == 1
                && members[i - 1].len() == 1
                && mandatory[i] == mandatory[i - 1]
                && forced[i] == forced[i - 1]
                && interchangeable(cluster, rules, state, guests[i - 1], guests[i])
        })
        .collect();
    let broken = violations(cluster, rules, state);
    let rules_broken = !broken.is_empty();
    let mends: Vec<bool> = members
        .iter()
        .map(|m| {
            m.iter().any(|&g| {
                goal.must_leave.contains(&g)
                    || broken
                        .iter()
                        .any(|v| v.vmids.contains(&cluster.guest(g).vmid))
            })
        })
        .collect();
    let n_guests = guests.len();
    let mut s = Search {
        cluster,
        rules,
        placer,
        goal,
        guests,
        members,
        pos,
        targets,
        mandatory,
        forced,
        same_as_prev,
        mends,
        choice: vec![0; n_guests],
        rules_broken,
        start: state.clone(),
        state: state.clone(),
        chosen: Vec::new(),
        migrations: 0,
        bytes: 0,
        best: None,
        cap: None,
        last_depth: false,
        expanded: 0,
        budget,
        out_of_budget: false,
        unordered: false,
        first_only: false,
        hint: Vec::new(),
        until: deadline.map(|d| {
            let now = Instant::now();
            now + d.saturating_duration_since(now) * 2 / 3
        }),
        deadline,
        clock_after: WORK,
    };
    if let Some(end) = hint {
        s.hint = (0..s.guests.len())
            .map(|i| {
                let at = end.location(s.guests[i]);
                s.targets[i].iter().position(|&t| t == at)
            })
            .collect();
    }
    // A must-leave guest the search may not move: no plan it finds can reach the goal.
    if goal.must_leave.iter().any(|g| s.pos[g.get()] == usize::MAX) {
        return Err(Gave::Limit);
    }
    let floor = s.need(0).map_or(usize::MAX, |n| n.migrations);
    let mut proven = floor;
    // A guest left out may be what a shorter plan moves: only the guests that must leave bound
    // every plan then.
    let proof = |proven: usize| {
        if left_out {
            goal.must_leave.len().min(proven)
        } else {
            proven
        }
    };
    for k in floor..=max_migrations {
        s.last_depth = k == max_migrations;
        s.cap = cap.filter(|_| s.last_depth);
        s.dfs(0, k);
        if s.out_of_budget {
            if cap.is_some() {
                return s.descend(proof(proven), max_migrations, budget / 2);
            }
            return Err(Gave::Budget);
        }
        if let Some((bytes, moves, joined)) = s.best.take() {
            let bundles = s.bundles(&moves);
            return Ok(Optimum {
                migrations: moves.len(),
                bytes,
                floor: proof(proven),
                exact: !left_out && proven == moves.len(),
                moves,
                bundles,
                joined,
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
    /// When proving the fewest ran out of budget while beating an incumbent of `incumbent`
    /// migrations: with `extra` more states, the first plan found with one migration fewer, then
    /// one fewer than that, and so on (plans are plentiful near the incumbent, so the first comes
    /// quickly where proving that none exists further down does not). Not proven the fewest.
    fn descend(&mut self, floor: usize, incumbent: usize, extra: u64) -> Result<Optimum, Gave> {
        self.out_of_budget = false;
        self.budget = self.expanded.saturating_add(extra);
        self.until = self.deadline;
        self.clock_after = self.expanded.saturating_add(WORK / 2);
        self.first_only = true;
        self.cap = None;
        self.last_depth = false;
        // A plan the proof found at the depth where it ran out beats the incumbent already.
        let mut found = self.best.take();
        let top = found
            .as_ref()
            .map_or(incumbent, |(_, moves, _)| moves.len());
        for k in (floor..top).rev() {
            self.dfs(0, k);
            match self.best.take() {
                Some(best) => found = Some(best),
                None => break,
            }
        }
        let (bytes, moves, joined) = found.ok_or(Gave::Budget)?;
        let bundles = self.bundles(&moves);
        Ok(Optimum {
            migrations: moves.len(),
            bytes,
            floor,
            exact: false,
            moves,
            bundles,
            joined,
        })
    }

    /// The affinity groups `moves` moves as one step (their members, in `moves` order).
    fn bundles(&self, moves: &Moves) -> Vec<Vec<GuestIdx>> {
        let mut bundles: Vec<Vec<GuestIdx>> = Vec::new();
        for &(g, _, _) in moves {
            let m = &self.members[self.pos[g.get()]];
            if m.len() > 1 && !bundles.contains(m) {
                bundles.push(m.clone());
            }
        }
        bundles
    }
}

/// Whether two guests are interchangeable for the search: on the same node, alike in every field
/// but their ids and names, under the same rules.
fn interchangeable(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    a: GuestIdx,
    b: GuestIdx,
) -> bool {
    if state.location(a) != state.location(b) || rules.guest(a) != rules.guest(b) {
        return false;
    }
    let strip = |g: GuestIdx| {
        let mut x = cluster.guest(g).clone();
        x.vmid = 0;
        x.name.clear();
        x
    };
    strip(a) == strip(b)
}

impl Search<'_> {
    /// Lower bound on the migrations and bytes still needed, guests from `i` on undecided.
    fn need(&self, i: usize) -> Option<super::bounds::Need> {
        let kind = self.goal.measure.load_kind(self.goal.metric);
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
        let mut among: Vec<GuestIdx> = self.members[i..].iter().flatten().copied().collect();
        among.sort_unstable();
        need_among(
            self.cluster,
            &self.state,
            kind,
            self.goal.imbalance,
            Tightness::Window,
            &must,
            &among,
        )
    }

    /// Counts one visited state; false once the budget is spent.
    fn visit(&mut self) -> bool {
        if self.out_of_budget || (self.first_only && self.best.is_some()) {
            return false;
        }
        self.expanded += 1;
        // The clock is read once every 1,024 states: it costs more than a state.
        let late = self.expanded % 1024 == 0
            && self.expanded > self.clock_after
            && self.until.is_some_and(|t| Instant::now() >= t);
        if self.expanded > self.budget || late {
            self.out_of_budget = true;
            return false;
        }
        true
    }

    fn dfs(&mut self, i: usize, k: usize) {
        if !self.visit() {
            return;
        }
        let used = self.migrations;
        let Some(need) = self.need(i) else {
            return;
        };
        if used + need.migrations > k {
            return;
        }
        if self.rules_broken && self.settled_violations(i) > self.goal.violations {
            return;
        }
        let bound = self.best.as_ref().map(|(b, _, _)| *b).or(self.cap);
        if bound.is_some_and(|b| self.bytes + need.bytes >= b) {
            return;
        }
        if used == k || i == self.guests.len() {
            if (i..self.guests.len()).any(|x| self.mandatory[x] || self.forced[x]) {
                return;
            }
            if used == k && self.reaches_goal() {
                if let Some((order, joined)) = self.safe_order() {
                    self.best = Some((self.bytes, order, joined));
                } else if !self.out_of_budget {
                    self.unordered = true;
                }
            }
            return;
        }
        let may_stay = !self.mandatory[i] && !self.forced[i];
        // Looking for a first plan near the incumbent: its own choice for this guest first, then
        // the others (it alone decides, so interchangeable guests are not pruned: it is no
        // longer a proof).
        if self.first_only && !self.hint.is_empty() {
            let hinted = self.hint[i];
            let mut options: Vec<Option<usize>> = Vec::with_capacity(self.targets[i].len() + 1);
            options.push(hinted);
            options.extend(
                (0..self.targets[i].len())
                    .map(Some)
                    .filter(|&j| j != hinted),
            );
            if hinted.is_some() {
                options.push(None);
            }
            for o in options {
                match o {
                    None if may_stay => {
                        self.choice[i] = 0;
                        self.dfs(i + 1, k);
                    }
                    None => {}
                    Some(j) => self.move_and_search(i, j, k),
                }
            }
            return;
        }
        if may_stay {
            self.choice[i] = 0;
            self.dfs(i + 1, k);
        }
        let most = if self.same_as_prev[i] {
            self.choice[i - 1]
        } else {
            usize::MAX
        };
        for j in 0..self.targets[i].len().min(most) {
            self.move_and_search(i, j, k);
        }
    }

    /// Moves decision `i` to its `j`-th target and searches on from `i + 1`.
    fn move_and_search(&mut self, i: usize, j: usize, k: usize) {
        let g = self.guests[i];
        let from = self.state.location(g);
        let n = self.members[i].len();
        let bytes: u64 = self.members[i]
            .iter()
            .map(|&m| self.cluster.guest(m).move_bytes())
            .sum();
        let t = self.targets[i][j];
        self.choice[i] = j + 1;
        for &m in &self.members[i] {
            self.state.move_guest(self.cluster, m, t);
        }
        self.chosen.push((g, t));
        self.migrations += n;
        self.bytes += bytes;
        self.dfs(i + 1, k);
        self.bytes -= bytes;
        self.migrations -= n;
        self.chosen.pop();
        for &m in &self.members[i] {
            self.state.move_guest(self.cluster, m, from);
        }
    }

    /// Hard rules broken on the current state among guests that are all decided (before
    /// position `i`, or not movable): no later choice can fix them.
    fn settled_violations(&self, i: usize) -> usize {
        violations(self.cluster, self.rules, &self.state)
            .iter()
            .filter(|v| {
                v.vmids.iter().all(|&vmid| {
                    self.cluster
                        .guest_idx(vmid)
                        .is_none_or(|g| self.pos[g.get()] == usize::MAX || self.pos[g.get()] < i)
                })
            })
            .count()
    }

    fn reaches_goal(&self) -> bool {
        let g = self.goal;
        imbalance_in(
            self.cluster,
            &self.state,
            g.measure,
            g.measure.load_kind(g.metric),
        ) <= g.imbalance + EPS
            && violations(self.cluster, self.rules, &self.state).len() <= g.violations
    }

    /// An order of the chosen moves in which every step passes the filters (and, in strict mode,
    /// keeps the planner's rules for balancing decisions), if any, with the positions of moves
    /// that complete a decision begun by the move before them (a group's first member).
    fn safe_order(&mut self) -> Option<(Moves, Vec<usize>)> {
        let mut moves = self.chosen.clone();
        // Stable: the search's order otherwise.
        moves.sort_by_key(|&(g, _)| !self.mends[self.pos[g.get()]]);
        let mut dead: std::collections::HashSet<DeadKey> = std::collections::HashSet::new();
        let mut order = Vec::with_capacity(moves.len());
        let mut joined = Vec::new();
        let mut state = self.start.clone();
        let walk = Walk {
            measure: imbalance_in(
                self.cluster,
                &state,
                self.goal.measure,
                self.goal.measure.load_kind(self.goal.metric),
            ),
            broken: violations(self.cluster, self.rules, &state).len(),
            last_balance_lowered: None,
            open: None,
        };
        let mut out = Order {
            moves: &mut order,
            joined: &mut joined,
            dead: &mut dead,
        };
        if self.order_from(&moves, 0, &mut state, walk, &mut out) {
            Some((order, joined))
        } else {
            None
        }
    }

    fn order_from(
        &mut self,
        moves: &[(GuestIdx, NodeIdx)],
        done: u64,
        state: &mut State,
        walk: Walk,
        out: &mut Order,
    ) -> bool {
        if done.count_ones() as usize == moves.len() {
            return !self.goal.strict
                || (walk.open.is_none() && walk.last_balance_lowered != Some(false));
        }
        let key = (done, walk.open.map(|o| o.first), walk.last_balance_lowered);
        if out.dead.contains(&key) || !self.visit() {
            return false;
        }
        for (j, &(g, t)) in moves.iter().enumerate() {
            if done & (1 << j) != 0 {
                continue;
            }
            let from = state.location(g);
            // An affinity group moves as one step, checked as a whole.
            let members = self.members[self.pos[g.get()]].clone();
            let subject = if members.len() == 1 {
                Subject::guest(self.cluster, self.rules, g, from)
            } else {
                Subject::bundle(self.cluster, self.rules, "group".into(), &members, from)
            };
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
            let worse = penalty(&ctx, t).saturating_sub(penalty(&ctx, from));
            for &m in &members {
                state.move_guest(self.cluster, m, t);
            }
            let next = Walk {
                measure: imbalance_in(
                    self.cluster,
                    state,
                    self.goal.measure,
                    self.goal.measure.load_kind(self.goal.metric),
                ),
                broken: violations(self.cluster, self.rules, state).len(),
                ..walk
            };
            let purpose = if members.iter().any(|m| self.goal.must_leave.contains(m)) {
                Purpose::Evacuate
            } else if next.broken < walk.broken {
                Purpose::Fix
            } else {
                Purpose::Balance
            };
            let left = moves.len() - done.count_ones() as usize;
            // Strict mode: a balancing move takes no guest back within the return hold.
            let back = self.goal.strict
                && purpose == Purpose::Balance
                && members
                    .iter()
                    .any(|&m| returns(self.cluster, m, t, self.goal.return_hold_secs).is_some());
            let judged = if back {
                None
            } else {
                self.judge(walk, next, purpose, worse, j, left)
            };
            let Some(next) = judged else {
                for &m in &members {
                    state.move_guest(self.cluster, m, from);
                }
                continue;
            };
            let completes = walk.open.is_some();
            let len = out.moves.len();
            out.moves.extend(members.iter().map(|&m| (m, t, purpose)));
            if completes {
                out.joined.push(len);
            }
            if self.order_from(moves, done | (1 << j), state, next, out) {
                return true;
            }
            if completes {
                out.joined.pop();
            }
            out.moves.truncate(len);
            for &m in &members {
                state.move_guest(self.cluster, m, from);
            }
        }
        out.dead.insert(key);
        false
    }

    /// Where an order stands after one more move (`next`, from `walk`), or `None` if strict mode
    /// refuses that move there. A balancing move that alone raises the measure (or trades a soft
    /// rule for less than it is worth) may open a decision of two moves, which the next balancing
    /// move must close with the pair judged as one, as the greedy planner judges a swap.
    fn judge(
        &self,
        walk: Walk,
        mut next: Walk,
        purpose: Purpose,
        worse: usize,
        j: usize,
        left: usize,
    ) -> Option<Walk> {
        if !self.goal.strict {
            return Some(next);
        }
        if let Some(open) = walk.open {
            // Only a balancing move closes the decision; both halves together must pass.
            let reduction = open.measure - next.measure;
            if purpose != Purpose::Balance
                || next.measure > open.measure + EPS
                || !worth_trading(self.goal.soft_weight, open.worse + worse, reduction)
            {
                return None;
            }
            next.open = None;
            next.last_balance_lowered = Some(next.measure < open.measure - 1e-12);
            return Some(next);
        }
        if purpose != Purpose::Balance {
            return Some(next);
        }
        let reduction = walk.measure - next.measure;
        if next.measure > walk.measure + EPS
            || !worth_trading(self.goal.soft_weight, worse, reduction)
        {
            // A pair needs a second move still to come.
            if left < 2 {
                return None;
            }
            next.open = Some(Open {
                measure: walk.measure,
                worse,
                first: j,
            });
            return Some(next);
        }
        next.last_balance_lowered = Some(next.measure < walk.measure - 1e-12);
        Some(next)
    }
}

/// What an order search writes: the moves so far, the positions that close a two-move decision,
/// and the states (done set, open decision, last balancing step lowered) known to lead nowhere.
struct Order<'o> {
    moves: &'o mut Moves,
    joined: &'o mut Vec<usize>,
    dead: &'o mut std::collections::HashSet<DeadKey>,
}

/// A state of the order search: the moves done (bits), the first half of an open decision, and
/// whether the last balancing decision lowered the measure.
type DeadKey = (u64, Option<usize>, Option<bool>);

/// Where an order stands: the measure and broken rules now, whether the last balancing decision
/// lowered the measure, and a two-move decision waiting for its second move.
#[derive(Debug, Clone, Copy)]
struct Walk {
    measure: f64,
    broken: usize,
    last_balance_lowered: Option<bool>,
    open: Option<Open>,
}

/// The first half of a two-move balancing decision: the measure before it, the soft rules it left
/// worse off, and its position among the moves.
#[derive(Debug, Clone, Copy)]
struct Open {
    measure: f64,
    worse: usize,
    first: usize,
}

impl Goal {
    /// What a plan reached: its imbalance, its violations left, and the guests it moved off nodes
    /// outside the balance (strict mode off).
    pub fn of_plan(cluster: &Cluster, plan: &super::Plan, options: &super::BalanceOptions) -> Self {
        let must_leave = super::planner::leaving_unschedulable(cluster, &plan.migrations);
        Self {
            measure: plan.measure,
            // The metric the plan weighed (`dominant` may have planned on memory).
            metric: plan.metric.metric().unwrap_or(options.metric),
            imbalance: plan.imbalance_after,
            violations: plan.violations_after.len(),
            must_leave,
            cooldown_secs: options.cooldown_secs,
            return_hold_secs: options.return_hold_secs,
            restart_containers: options.restart_containers,
            strict: false,
            soft_weight: options.soft_weight,
        }
    }
}

impl Optimum {
    /// The optimum as plan migrations, for replaying it.
    pub fn migrations(&self, cluster: &Cluster) -> Vec<super::Migration> {
        let mut step = 0u32;
        self.moves
            .iter()
            .enumerate()
            .map(|(i, &(g, t, purpose))| {
                let group = self.bundles.iter().find(|b| b.contains(&g));
                // The second half of a two-move decision shares the first half's step, and a
                // group's members share their first member's.
                let later_member = group.is_some_and(|b| b[0] != g);
                if i > 0 && !self.joined.contains(&i) && !later_member {
                    step += 1;
                }
                let guest = cluster.guest(g);
                let bundle = group
                    .map(|b| b.iter().map(|&m| cluster.guest(m).vmid).collect())
                    .unwrap_or_default();
                super::Migration {
                    vmid: guest.vmid,
                    kind: guest.kind,
                    name: guest.name.clone(),
                    from: cluster.node(guest.node).name.clone(),
                    to: cluster.node(t).name.clone(),
                    reason: "exact baseline".to_owned(),
                    purpose,
                    online: guest.running,
                    bytes: guest.move_bytes(),
                    bundle,
                    group: None,
                    step,
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
    /// Slightly larger: 7–9 nodes of 64 and 128 GiB, 20–36 guests, a third of them on the first
    /// node, an anti-affinity pair sharing a node; past the planner's former size cap of 192.
    Medium,
    /// 4–8 equal nodes, 60–130 guests, most on one node.
    BigSkewed,
    /// 4–8 nodes of 32, 64 and 128 GiB, 60–130 guests anywhere.
    BigHeterogeneous,
    /// 4–8 nodes of 64 GiB filled to about 83 %, 60–130 guests.
    BigTight,
    /// 4–8 nodes of 32, 64 and 128 GiB, 60–130 guests, anti-affinity pairs sharing a node and a
    /// guest pinned elsewhere.
    BigBrokenRules,
    /// 16 nodes of 64 and 128 GiB, 700–800 guests, a third of them on the first four nodes.
    Wide,
}

impl Family {
    /// Every family of small clusters (4–6 nodes), in report order.
    pub const ALL: [Family; 5] = [
        Family::Skewed,
        Family::Heterogeneous,
        Family::Tight,
        Family::BrokenRules,
        Family::Maintenance,
    ];

    /// Families of larger clusters, reported after the small ones: the exact baseline takes
    /// seconds on each, too slow for unit tests.
    pub const LARGER: [Family; 1] = [Family::Medium];

    /// Families past the exact search's reach (4–16 nodes, 60–800 guests): the quality
    /// benchmark compares them with an external CP-SAT model of the final placement.
    pub const BIG: [Family; 5] = [
        Family::BigSkewed,
        Family::BigHeterogeneous,
        Family::BigTight,
        Family::BigBrokenRules,
        Family::Wide,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Family::Skewed => "skewed",
            Family::Heterogeneous => "heterogeneous",
            Family::Tight => "tight",
            Family::BrokenRules => "broken rules",
            Family::Maintenance => "maintenance",
            Family::Medium => "medium",
            Family::BigSkewed => "big skewed",
            Family::BigHeterogeneous => "big heterogeneous",
            Family::BigTight => "big tight",
            Family::BigBrokenRules => "big broken rules",
            Family::Wide => "wide",
        }
    }

    /// A cluster of this family: 4–6 nodes and 10–16 running VMs (medium: 7–9 and 20–36; big:
    /// 4–8 and 60–130; wide: 16 and 700–800), the same for the same seed.
    pub fn generate(self, seed: u64) -> crate::Snapshot {
        use crate::builder::{ClusterBuilder, Lcg, node, vm};
        const GIB: u64 = crate::units::GIB;
        const MIB: u64 = GIB / 1024;
        let mut r = Lcg(seed.wrapping_mul(2654435761).wrapping_add(self as u64));
        let (nodes, guests) = match self {
            Family::Medium => (7 + r.next(3) as usize, 20 + r.next(17) as usize),
            Family::BigSkewed
            | Family::BigHeterogeneous
            | Family::BigTight
            | Family::BigBrokenRules => (4 + r.next(5) as usize, 60 + r.next(71) as usize),
            Family::Wide => (16, 700 + r.next(101) as usize),
            _ => (4 + r.next(3) as usize, 10 + r.next(7) as usize),
        };
        let sizes: Vec<u64> = (0..nodes)
            .map(|_| match self {
                Family::Heterogeneous
                | Family::BrokenRules
                | Family::BigHeterogeneous
                | Family::BigBrokenRules => [32, 64, 128][r.next(3) as usize],
                Family::Medium | Family::Wide => [64, 128][r.next(2) as usize],
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
        // Tight: about 80 % of all memory in guests (big tight 83 %); others 40-60 %.
        let fill = match self {
            Family::Tight => 80,
            Family::BigTight => 83,
            _ => 40 + r.next(21),
        };
        let avg = (total * fill / 100 / guests as u64).max(1);
        // Sizes in MiB. The big families draw them from a wider, heavy-tailed range (a fifth of
        // the guests 1.5–4.5× the mean), not rounded to whole GiB, as real clusters hold.
        let big = Family::BIG.contains(&self);
        let avg_mib = total * 1024 * fill / 100 / guests as u64;
        let mut placed: Vec<usize> = Vec::new();
        for k in 0..guests {
            let size = if big {
                let factor = if r.next(5) == 0 {
                    150 + r.next(301)
                } else {
                    20 + r.next(101)
                };
                (avg_mib * factor / 100).clamp(256, 32 * 1024)
            } else {
                (avg * (40 + r.next(121)) / 100).clamp(1, 16) * 1024
            };
            let want = match self {
                Family::Skewed | Family::BigSkewed if r.next(10) < 7 => 0,
                Family::BigTight if r.next(10) < 4 => 0,
                Family::Wide if r.next(3) == 0 => r.next(4) as usize,
                Family::Maintenance if k < 3 => nodes - 1,
                Family::Tight if r.next(10) < 4 => 0,
                // Each anti-affinity pair starts on one node.
                Family::BrokenRules | Family::BigBrokenRules if k == 1 || k == 3 => placed[k - 1],
                Family::Medium if k == 1 => placed[0],
                Family::Medium if r.next(3) == 0 => 0,
                _ => r.next(nodes as u64) as usize,
            };
            // The first node from `want` with room (under 95 %).
            let Some(at) = (0..nodes)
                .map(|d| (want + d) % nodes)
                .find(|&n| (used[n] + size) * 100 <= sizes[n] * 1024 * 95)
            else {
                placed.push(want);
                continue;
            };
            used[at] += size;
            placed.push(at);
            let vmid = 100 + k as u32;
            let mut tags: Vec<String> = Vec::new();
            if self == Family::Medium && k < 2 {
                tags.push("flxp.anti-affinity.pair0".to_owned());
            }
            if matches!(self, Family::BrokenRules | Family::BigBrokenRules) {
                if k < 4 {
                    tags.push(format!("flxp.anti-affinity.pair{}", k / 2));
                }
                if k == 4 {
                    tags.push(format!("flxp.node.n{}", (at + 1) % nodes));
                }
            }
            let mut g = vm(vmid, &format!("n{at}"))
                .mem(size * MIB, size.div_ceil(1024) * GIB)
                .cores(2.0, 0.2);
            if !tags.is_empty() {
                g = g.tagged(&tags.join(";"));
            }
            b = b.guest(g);
        }
        b.snapshot()
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::Overrides;
    use crate::balance::{BalanceOptions, plan, replay};
    use crate::testutil::placer;
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
        let placer = placer();
        let o = options();
        let p = plan(&c, &r, &s, &placer, &o).unwrap();
        let goal = Goal::of_plan(&c, &p, &o);
        let best =
            fewest_migrations(&c, &r, &s, &placer, &goal, p.migrations.len(), 3_000_000).ok()?;
        // The optimum's own plan is safe and reaches the goal.
        let end = replay(&c, &r, &s, &placer, &best.migrations(&c)).unwrap();
        assert!(
            imbalance_in(&c, &end, goal.measure, goal.measure.load_kind(goal.metric))
                <= goal.imbalance + 1e-9
        );
        Some((p, best, c))
    }

    /// a holds 30 GiB and one member of the split group db (the other on b); c is empty.
    fn split_group() -> (Cluster, Goal) {
        use crate::testutil::*;
        let c = ClusterBuilder::new()
            .nodes(&["a", "b", "c"])
            .guest(vm(101, "a").mem(20 * GIB, 20 * GIB))
            .guest(
                vm(102, "a")
                    .mem(6 * GIB, 6 * GIB)
                    .tagged("flxp.affinity.db"),
            )
            .guest(
                vm(103, "b")
                    .mem(4 * GIB, 4 * GIB)
                    .tagged("flxp.affinity.db"),
            )
            .build();
        let goal = Goal {
            measure: Measure::Spread,
            metric: Metric::Memory,
            imbalance: 25.0,
            violations: 1,
            must_leave: Vec::new(),
            cooldown_secs: 0,
            return_hold_secs: 0,
            restart_containers: false,
            strict: false,
            soft_weight: None,
        };
        (c, goal)
    }

    #[test]
    fn a_split_group_the_search_leaves_makes_its_result_unproven() {
        let (c, goal) = split_group();
        let (r, s) = (Rules::compile(&c), State::new(&c));
        let placer = placer();
        let best = fewest_migrations(&c, &r, &s, &placer, &goal, 5, 100_000).unwrap();
        // 101 to c: a 10, b 4, c 20 GiB of 64, spread 25 pp.
        let moved: Vec<u32> = best.moves.iter().map(|m| c.guest(m.0).vmid).collect();
        assert_eq!(moved, vec![101]);
        assert!(!best.exact);
        assert_eq!(best.floor, 0);
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
        let placer = placer();
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
        let placer = placer();
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
