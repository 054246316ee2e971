//! Balancing: a greedy search over single moves (guests and affinity bundles), and swaps where no
//! single move helps, toward the lowest objective (see `objective.rs`).
//!
//! Each step takes the move with the largest gain per cost, where a migration costs as much as
//! copying `move_cost_gib` GiB plus the bytes it copies (for equal gain, fewer bytes to copy, then
//! the lower vmid, then the target name) among moves off the most loaded nodes onto the
//! least loaded ones, that the placement filters accept on the current state, that makes none of
//! the guest's soft rules worse, and that does not raise the reported measure. It stops when the
//! measure is at or under the target, when no move gains the minimum, or when the budget is spent.
//! Moves after the last improvement of the reported measure are dropped (they would cost
//! migrations without changing what the user sees), and if the whole balancing falls short of the
//! relative margin, it is dropped too.
//!
//! Scaling: a step looks at the `candidate_nodes` fullest nodes as sources and the as many emptiest
//! as targets, evaluates every (unit, target) pair in O(1), sorts, and runs the placement filters
//! only on the best candidates until one passes, so no step runs filters for every guest and node.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};

use crate::Result;
use crate::cluster::{GuestIdx, NodeIdx};
use crate::placement::Subject;
use crate::state::State;
use crate::units::{fmt_bytes, one_decimal};
use crate::warning::{Warning, WarningKind};

use super::commit::{self, Commit};
use super::draft::{Draft, Step};
use super::movable::{Intent, Stay};
use super::objective::{Effect, Shift};
use super::options::BalanceOptions;
use super::plan::Purpose;
use super::softness::{penalty, traded, worth_trading};
use super::units::UnitId;

/// Most candidates run through the filters in one step before giving up on it.
const MAX_CHECKS: usize = 4096;
/// Node pairs of the fullest and emptiest nodes searched for swaps, per side.
const SWAP_NODES: usize = 6;
/// Bytes in a GiB, for the migration cost.
const GIB_BYTES: f64 = crate::units::GIB as f64;
/// Work the post-pass may spend (nodes touched by replays and units screened), so it stays a
/// small part of a plan's time however many decisions the plan has.
const POLISH_WORK: usize = 400_000;
/// Slack for "does not raise the measure": float noise, not a real rise.
const EPS: f64 = 1e-9;
/// Slack of the O(1) screen: it may let through a rise this small, which the exact check after
/// the move (the trimmed history) then judges.
const SCREEN: f64 = 1e-9;

/// Why balancing stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The imbalance was within the threshold: nothing done.
    Within,
    /// The target was reached.
    Target,
    /// The migration budget is spent.
    Budget,
    /// No move gains enough.
    NoGain,
    /// Moves were found, but together they fall short of the margin: dropped.
    Margin,
}

/// What balancing did.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// Why it stopped.
    pub stop: Stop,
    /// Whether the search ran into the migration budget (even if moves were then dropped).
    pub budget_bound: bool,
    /// Whether trailing moves that did not lower the measure were dropped.
    pub rewound: bool,
    /// When no move was found: why the best moves that only storage room refused were refused
    /// (`storage local-lvm on b has 12.0 GiB free, ...`), the best first.
    pub storage: Vec<String>,
}

/// Most storage refusals a stop reason names.
const STORAGE_REASONS: usize = 2;
/// Most refused candidates per step asked why (every filter runs again): the best ones are what
/// a stop reason needs, and a cluster with local disks must not plan much slower for it.
const REFUSALS_ASKED: usize = 32;

/// Sort key of a candidate: larger gain per migration first (to 1e-6 pp², so float noise never
/// outranks fewer bytes), then fewer bytes, lower vmid, target node.
type Key = (Reverse<i64>, u64, u32, NodeIdx);

/// A candidate: one unit move, or the two unit moves of a swap (in the order they run).
#[derive(Debug, Clone, Copy)]
struct Move {
    units: [(UnitId, NodeIdx, NodeIdx); 2],
    count: usize,
    effect: Effect,
    key: Key,
}

impl Move {
    /// A candidate ranked by its gain per cost: `migrations` each cost as much as copying
    /// `move_cost_gib` GiB, plus the bytes it copies (0: by gain per migration alone).
    fn new(
        units: &[(UnitId, NodeIdx, NodeIdx)],
        effect: Effect,
        migrations: usize,
        bytes: u64,
        vmid: u32,
        move_cost_gib: f64,
    ) -> Self {
        let mut arr = [units[0]; 2];
        arr[..units.len()].copy_from_slice(units);
        let mut cost = migrations as f64;
        if move_cost_gib > 0.0 {
            cost += bytes as f64 / (move_cost_gib * GIB_BYTES);
        }
        Self {
            units: arr,
            count: units.len(),
            effect,
            key: (
                Reverse((effect.gain / cost * 1e6).round() as i64),
                bytes,
                vmid,
                units[0].2,
            ),
        }
    }

    fn moves(&self) -> &[(UnitId, NodeIdx, NodeIdx)] {
        &self.units[..self.count]
    }
}

/// Candidates best first, without sorting them all: only the first few are usually looked at.
fn best_first(cands: Vec<Move>) -> impl Iterator<Item = Move> {
    let mut heap: BinaryHeap<Reverse<(Key, usize)>> = cands
        .iter()
        .enumerate()
        .map(|(i, m)| Reverse((m.key, i)))
        .collect();
    std::iter::from_fn(move || heap.pop().map(|Reverse((_, i))| cands[i]))
}

/// Balances the draft's state within its budget.
pub(crate) fn balance(draft: &mut Draft, opts: &BalanceOptions) -> Result<Outcome> {
    let measure = draft.measure;
    let trigger = &opts.trigger;
    let start_value = draft.objective.measure(measure);
    if start_value <= trigger.threshold_for(measure) {
        return Ok(Outcome {
            stop: Stop::Within,
            budget_bound: false,
            rewound: false,
            storage: Vec::new(),
        });
    }
    let target = trigger.target_for(measure);
    let n = draft.cluster.nodes().len();
    let mut by_node: Vec<Vec<UnitId>> = vec![Vec::new(); n];
    let mut shifts: Vec<Option<Shift>> = vec![None; draft.units.all.len()];
    let labels: HashSet<&str> = draft
        .cluster
        .nodes()
        .iter()
        .flat_map(|n| n.labels.iter().map(String::as_str))
        .collect();
    for (id, shift) in shifts.iter_mut().enumerate() {
        if draft.unit_moved(id) {
            continue;
        }
        let Some(node) = draft.units.get(id).node(&draft.state) else {
            continue;
        };
        if held_in_place(draft, id, node, &labels) {
            continue;
        }
        if !draft.objective.is_balanced(node) {
            continue;
        }
        if let Some((g, stay)) = draft.unit_stays(id, Intent::Balance) {
            if !matches!(stay, Stay::Stopped | Stay::Template) {
                draft.skip(g, format!("not moved to balance: {stay}"));
            }
            continue;
        }
        *shift = Some(draft.shift(&draft.units.get(id).members));
        by_node[node.get()].push(id);
    }

    let start_state = draft.state.clone();
    let start_len = draft.migrations.len();
    let mut history: Vec<(usize, f64)> = Vec::new();
    let mut applied: Vec<Move> = Vec::new();
    let mut value = start_value;
    let mut storage: Vec<String> = Vec::new();
    let mut held: BTreeMap<GuestIdx, Stay> = BTreeMap::new();
    let stop = loop {
        if value <= target {
            break Stop::Target;
        }
        if draft.budget_left() == 0 {
            break Stop::Budget;
        }
        storage.clear();
        let found = match best_move(
            draft,
            opts,
            (&by_node, &shifts),
            value,
            &mut storage,
            &mut held,
        )? {
            Some(m) => Some(m),
            None if opts.swaps => best_swap(draft, opts, &by_node, &shifts, value)?,
            None => None,
        };
        let Some(m) = found else {
            break Stop::NoGain;
        };
        apply(draft, &m);
        for &(u, from, _) in m.moves() {
            by_node[from.get()].retain(|&x| x != u);
        }
        value = draft.objective.measure(measure);
        history.push((draft.migrations.len() - start_len, value));
        applied.push(m);
    };

    // Keep the moves up to the first time the lowest measure was reached.
    let best = history
        .iter()
        .fold(None::<(usize, f64)>, |b, &(len, v)| match b {
            Some((_, bv)) if bv <= v + EPS => b,
            _ => Some((len, v)),
        });
    let kept = best.filter(|&(_, v)| v < start_value - EPS);
    let keep = kept.map_or(0, |(len, _)| len);
    let rewound = keep < draft.migrations.len() - start_len;
    if rewound {
        draft.rewind(&start_state, start_len, keep);
    }
    let budget_bound = stop == Stop::Budget;
    let end_value = kept.map_or(start_value, |(_, v)| v);
    let steps = history.iter().take_while(|(len, _)| *len <= keep).count();
    applied.truncate(steps);
    // Thorough mode affords a longer post-pass.
    let mut work = if opts.effort_secs > 0.0 {
        POLISH_WORK * 50
    } else {
        POLISH_WORK
    };
    // With `vcpu-tolerance`, the post-pass may not leave configured vCPUs less even than the
    // search did: it chooses by migrations and bytes alone.
    let searched = (opts.vcpu_tolerance > 0.0)
        .then(|| (applied.clone(), commit::score(draft.cluster, &draft.state)));
    if opts.prune
        && (prune(draft, &start_state, &mut applied, start_value, end_value)
            | merge(
                draft,
                opts,
                &start_state,
                &shifts,
                &mut applied,
                (start_value, end_value),
                &mut work,
            ))
    {
        draft.rewind(&start_state, start_len, 0);
        for m in &applied {
            apply(draft, m);
        }
        if let Some((searched, score)) = searched
            && commit::score(draft.cluster, &draft.state) > score + EPS
        {
            applied = searched;
            draft.rewind(&start_state, start_len, 0);
            for m in &applied {
                apply(draft, m);
            }
        }
    }
    // A guest whose best target the return hold refused, and that did not move after all (the
    // post-pass may have moved it elsewhere), says so; the left-in-place counts read `draft.held`.
    for (g, stay) in held {
        if !draft.has_moved(g) {
            draft.skip(g, format!("not moved to balance: its best target {stay}"));
            draft.held.entry(g).or_insert(stay);
        }
    }
    if keep > 0 && !trigger.worth(start_value, end_value) {
        draft.warnings.push(Warning::general(format!(
            "balancing would lower {} only from {} to {} ({:.0} %), less than the {:.0} % margin: no balancing moves",
            measure.as_str(),
            measure.fmt(start_value),
            measure.fmt(end_value),
            100.0 * (start_value - end_value) / start_value,
            100.0 * trigger.margin
        )));
        draft.rewind(&start_state, start_len, 0);
        return Ok(Outcome {
            stop: Stop::Margin,
            budget_bound,
            rewound: true,
            storage: Vec::new(),
        });
    }
    if budget_bound && !rewound && end_value > target {
        draft.warnings.push(
            Warning::general(format!(
                "migration budget of {} spent before {} reached the target {}",
                draft.budget,
                measure.as_str(),
                measure.fmt(target)
            ))
            .with_kind(WarningKind::BudgetSpent),
        );
    }
    if stop != Stop::NoGain {
        storage.clear();
    }
    Ok(Outcome {
        stop,
        budget_bound,
        rewound,
        storage,
    })
}

/// Drops balancing decisions the result does not need: each decision, most migrations and then
/// most bytes first, is left out if the others still run safely in order, never raise the measure,
/// end on a decision that lowers it, and reach `end_value` or better. Greedy steps that lowered the
/// sum of squares but not the extremes the reported measure looks at are what it removes. Whether
/// any was dropped (the draft is untouched; the caller replays what is left).
fn prune(
    draft: &mut Draft,
    start: &State,
    applied: &mut Vec<Move>,
    start_value: f64,
    end_value: f64,
) -> bool {
    let mut order: Vec<usize> = (0..applied.len()).collect();
    let weight = |m: &Move| {
        let bytes: u64 = m
            .moves()
            .iter()
            .map(|&(u, _, _)| draft.bytes(&draft.units.get(u).members))
            .sum();
        let count: usize = m
            .moves()
            .iter()
            .map(|&(u, _, _)| draft.units.get(u).members.len())
            .sum();
        (Reverse(count), Reverse(bytes))
    };
    order.sort_by_key(|&i| weight(&applied[i]));
    let saved = draft.state.clone();
    let mut dropped = vec![false; applied.len()];
    let mut any = false;
    for i in order {
        dropped[i] = true;
        let trial: Vec<&Move> = applied
            .iter()
            .zip(&dropped)
            .filter(|(_, d)| !**d)
            .map(|(m, _)| m)
            .collect();
        if replays_within(draft, start, &trial, start_value, end_value) {
            any = true;
        } else {
            dropped[i] = false;
        }
    }
    draft.state = saved;
    draft.objective.refresh_all(draft.cluster, &draft.state);
    if any {
        let mut keep = dropped.iter().map(|d| !d);
        applied.retain(|_| keep.next().unwrap_or(true));
    }
    any
}

/// Replaces two decisions by one single move, or one decision by a move copying fewer bytes, where
/// the result still reaches `end_value`: the greedy search often takes two small steps where one
/// larger guest does, or a larger guest where a smaller one does. A single move changes two
/// nodes, so it can only help when the rest already fit the window; its source is one of the two
/// fullest nodes and its target one of the two emptiest, screened in O(1) before a full replay.
/// Whether anything changed (the draft's state is restored).
fn merge(
    draft: &mut Draft,
    opts: &BalanceOptions,
    start: &State,
    shifts: &[Option<Shift>],
    applied: &mut Vec<Move>,
    (start_value, end_value): (f64, f64),
    work: &mut usize,
) -> bool {
    let saved = draft.state.clone();
    let mut any = false;
    let mut home: Vec<Vec<UnitId>> = vec![Vec::new(); draft.cluster.nodes().len()];
    for (u, shift) in shifts.iter().enumerate() {
        if shift.is_some() {
            if let Some(n) = draft.units.get(u).node(start) {
                home[n.get()].push(u);
            }
        }
    }
    // Fewer decisions first (pairs), then fewer bytes (singles); each success restarts the scan.
    'scan: loop {
        let k = applied.len();
        let mut tries: Vec<(usize, Option<usize>)> = Vec::new();
        for i in 0..k {
            for j in i + 1..k {
                tries.push((i, Some(j)));
            }
        }
        tries.extend((0..k).map(|i| (i, None)));
        for (i, j) in tries {
            let cost =
                applied.len() + draft.cluster.nodes().len() + draft.cluster.guests().len() / 8;
            if *work < cost {
                break 'scan;
            }
            *work -= cost;
            let rest: Vec<&Move> = applied
                .iter()
                .enumerate()
                .filter(|(x, _)| *x != i && Some(*x) != j)
                .map(|(_, m)| m)
                .collect();
            let removed: Vec<&Move> = std::iter::once(&applied[i])
                .chain(j.map(|j| &applied[j]))
                .collect();
            let count = |m: &Move| -> usize {
                m.moves()
                    .iter()
                    .map(|&(u, _, _)| draft.units.get(u).members.len())
                    .sum()
            };
            let bytes_of = |m: &Move| -> u64 {
                m.moves()
                    .iter()
                    .map(|&(u, _, _)| shifts[u].map_or(0, |s| s.mem))
                    .sum()
            };
            let old_count: usize = removed.iter().map(|m| count(m)).sum();
            let old_bytes: u64 = removed.iter().map(|m| bytes_of(m)).sum();
            let Some(new) = one_move(
                draft,
                opts,
                start,
                (shifts, &home),
                &rest,
                end_value,
                |c, b| c < old_count || (j.is_none() && c == old_count && b < old_bytes),
            ) else {
                continue;
            };
            // The new move at the end, or where the first removed decision was.
            for at in [rest.len(), i] {
                *work = work.saturating_sub(applied.len() * 8);
                let mut trial = rest.clone();
                trial.insert(at.min(trial.len()), &new);
                if replays_within(draft, start, &trial, start_value, end_value) {
                    let trial: Vec<Move> = trial.into_iter().copied().collect();
                    *applied = trial;
                    any = true;
                    continue 'scan;
                }
            }
        }
        break;
    }
    draft.state = saved;
    draft.objective.refresh_all(draft.cluster, &draft.state);
    any
}

/// The cheapest single move (fewest migrations, then bytes, that `better` accepts) that brings
/// the state the `rest` leave to `end_value` or better, by the O(1) screen; not yet checked for
/// safety.
fn one_move(
    draft: &mut Draft,
    opts: &BalanceOptions,
    start: &State,
    (shifts, home): (&[Option<Shift>], &[Vec<UnitId>]),
    rest: &[&Move],
    end_value: f64,
    better: impl Fn(usize, u64) -> bool,
) -> Option<Move> {
    draft.state.clone_from(start);
    let mut moved: HashSet<UnitId> = HashSet::new();
    for m in rest {
        for &(u, _, t) in m.moves() {
            moved.insert(u);
            for &g in &draft.units.get(u).members {
                draft.state.move_guest(draft.cluster, g, t);
            }
        }
    }
    draft.objective.refresh_all(draft.cluster, &draft.state);
    let hot = draft.objective.hottest_first();
    let sources: Vec<NodeIdx> = hot.iter().copied().take(2).collect();
    let targets: Vec<NodeIdx> = hot.iter().rev().copied().take(2).collect();
    let mut best: Option<(usize, u64, u32, Move)> = None;
    let units = sources.iter().flat_map(|s| home[s.get()].iter().copied());
    for u in units {
        let Some(shift) = &shifts[u] else {
            continue;
        };
        if moved.contains(&u) {
            continue;
        }
        let unit = draft.units.get(u);
        let Some(s) = unit.node(&draft.state) else {
            continue;
        };
        if !sources.contains(&s) {
            continue;
        }
        let (c, b) = (unit.members.len(), shift.mem);
        if !better(c, b) {
            continue;
        }
        let vmid = draft.cluster.guest(unit.members[0]).vmid;
        if best
            .as_ref()
            .is_some_and(|&(bc, bb, bv, _)| (bc, bb, bv) <= (c, b, vmid))
        {
            continue;
        }
        for &t in targets.iter().filter(|&&t| t != s) {
            let effect = draft
                .objective
                .effect(draft.cluster, &draft.state, s, t, shift);
            if draft
                .objective
                .raises(draft.measure, &[effect.from, effect.to], end_value, SCREEN)
            {
                continue;
            }
            let m = Move::new(&[(u, s, t)], effect, c, b, vmid, opts.move_cost_gib);
            best = Some((c, b, vmid, m));
            break;
        }
    }
    best.map(|(_, _, _, m)| m)
}

/// Whether decisions run safely one after the other from `start` (on the draft's state, which is
/// left changed), never raise the measure, end on one that lowers it, and reach `end_value`.
fn replays_within(
    draft: &mut Draft,
    start: &State,
    moves: &[&Move],
    start_value: f64,
    end_value: f64,
) -> bool {
    draft.state = start.clone();
    let mut before = start_value;
    let mut last_gain = false;
    for m in moves {
        let mut worse = 0;
        for &(u, s, t) in m.moves() {
            let unit = draft.units.get(u);
            if unit.members.iter().any(|&g| draft.state.location(g) != s) {
                return false;
            }
            if draft.returning(&unit.members, t).is_some() {
                return false;
            }
            let subject = draft.subject(&unit.members, unit.group.as_deref());
            let Some(w) = soft_cost(draft, &subject, s, t) else {
                return false;
            };
            worse += w;
            for &g in &draft.units.get(u).members {
                draft.state.move_guest(draft.cluster, g, t);
            }
        }
        draft.objective.refresh_all(draft.cluster, &draft.state);
        let v = draft.objective.measure(draft.measure);
        if v > before + EPS || !worth_trading(draft.soft_weight, worse, before - v) {
            return false;
        }
        last_gain = v < before - 1e-12;
        before = v;
    }
    (moves.is_empty() || last_gain) && before <= end_value + EPS
}

fn candidates_nodes(
    draft: &Draft,
    opts: &BalanceOptions,
    by_node: &[Vec<UnitId>],
    width: usize,
) -> (Vec<NodeIdx>, Vec<NodeIdx>) {
    let hot = draft.objective.hottest_first();
    let sources: Vec<NodeIdx> = hot
        .iter()
        .copied()
        .filter(|n| !by_node[n.get()].is_empty())
        .take(width.min(opts.candidate_nodes))
        .collect();
    let targets: Vec<NodeIdx> = hot
        .iter()
        .rev()
        .copied()
        .take(width.min(opts.candidate_nodes))
        .collect();
    (sources, targets)
}

/// The best single move, or `None`; the best candidates that only storage room refused go to
/// `storage` (their reasons, for the stop reason), and guests whose best target the return hold
/// refuses to `held`.
fn best_move(
    draft: &Draft,
    opts: &BalanceOptions,
    (by_node, shifts): (&[Vec<UnitId>], &[Option<Shift>]),
    value: f64,
    storage: &mut Vec<String>,
    held: &mut BTreeMap<GuestIdx, Stay>,
) -> Result<Option<Move>> {
    let (sources, targets) = candidates_nodes(draft, opts, by_node, usize::MAX);
    let mut cands: Vec<Move> = Vec::new();
    for &s in &sources {
        for &u in &by_node[s.get()] {
            let Some(shift) = &shifts[u] else {
                continue;
            };
            let members = &draft.units.get(u).members;
            if members.len() > draft.budget_left() {
                continue;
            }
            let count = members.len() as f64;
            for &t in targets.iter().filter(|&&t| t != s) {
                let effect = draft
                    .objective
                    .effect(draft.cluster, &draft.state, s, t, shift);
                if opts.trigger.gain_ok(effect.gain / count) {
                    let vmid = draft.cluster.guest(members[0]).vmid;
                    cands.push(Move::new(
                        &[(u, s, t)],
                        effect,
                        members.len(),
                        shift.mem,
                        vmid,
                        opts.move_cost_gib,
                    ));
                }
            }
        }
    }
    let subjects = &mut HashMap::new();
    let mut asked = 0;
    // Units whose best candidate was seen: later candidates of theirs are second choices.
    let mut seen: HashSet<UnitId> = HashSet::new();
    // Kept for the near-ties on configured vCPUs, once the best move is known.
    let near = (opts.vcpu_tolerance > 0.0).then(|| cands.clone());
    for m in best_first(cands).take(MAX_CHECKS) {
        let (u, s, t) = m.units[0];
        if draft
            .objective
            .raises(draft.measure, &[m.effect.from, m.effect.to], value, SCREEN)
        {
            continue;
        }
        let best_of_unit = seen.insert(u);
        if let Some((g, stay)) = draft.returning(&draft.units.get(u).members, t) {
            if best_of_unit {
                held.entry(g).or_insert(stay);
            }
            continue;
        }
        let (subject, reduction) = judged(draft, subjects, &m, value);
        match soft_cost(draft, subject, s, t) {
            Some(w) if worth_trading(draft.soft_weight, w, reduction) => {
                return Ok(Some(match near {
                    Some(near) => evener(draft, opts, (near, shifts), m, value, subjects),
                    None => m,
                }));
            }
            Some(_) => {}
            None if storage.len() < STORAGE_REASONS
                && asked < REFUSALS_ASKED
                && draft.cluster.has_local_disks() =>
            {
                asked += 1;
                if let Some(why) = storage_refusal(draft, subject, t)
                    && !storage.contains(&why)
                {
                    storage.push(why);
                }
            }
            None => {}
        }
    }
    Ok(None)
}

/// A single-move candidate's subject (made once per unit) and how much it lowers the measure
/// from `value`.
fn judged<'a>(
    draft: &Draft,
    subjects: &'a mut HashMap<UnitId, Subject>,
    m: &Move,
    value: f64,
) -> (&'a Subject, f64) {
    let (u, _, _) = m.units[0];
    let subject = subjects.entry(u).or_insert_with(|| {
        let unit = draft.units.get(u);
        draft.subject(&unit.members, unit.group.as_deref())
    });
    let reduction = value
        - draft
            .objective
            .measure_with(draft.measure, &[m.effect.from, m.effect.to]);
    (subject, reduction)
}

/// Among the candidates whose gain per cost is within `vcpu_tolerance` of the `best` move's,
/// the safe one that evens out configured vCPUs per core most, if it does so more than `best`
/// (equal evening: the better ranked one); `best` otherwise.
fn evener(
    draft: &Draft,
    opts: &BalanceOptions,
    (cands, shifts): (Vec<Move>, &[Option<Shift>]),
    best: Move,
    value: f64,
    subjects: &mut HashMap<UnitId, Subject>,
) -> Move {
    let commit = Commit::new(draft.cluster, &draft.state);
    let evens = |m: &Move| {
        let (u, s, t) = m.units[0];
        let vcpus = shifts[u].map_or(0.0, |x| x.committed_cpus);
        commit.gain(draft.cluster, s, t, vcpus)
    };
    let floor = best.key.0.0 as f64 * (1.0 - opts.vcpu_tolerance);
    let best_evens = evens(&best);
    let mut near: Vec<(f64, Move)> = cands
        .into_iter()
        .filter(|m| m.key.0.0 as f64 >= floor)
        .map(|m| (evens(&m), m))
        .filter(|(e, _)| *e > best_evens + EPS)
        .collect();
    near.sort_by(|(ea, a), (eb, b)| eb.total_cmp(ea).then(a.key.cmp(&b.key)));
    for (_, m) in near.into_iter().take(MAX_CHECKS) {
        let (u, s, t) = m.units[0];
        if draft
            .objective
            .raises(draft.measure, &[m.effect.from, m.effect.to], value, SCREEN)
            || draft.returning(&draft.units.get(u).members, t).is_some()
        {
            continue;
        }
        let (subject, reduction) = judged(draft, subjects, &m, value);
        if soft_cost(draft, subject, s, t)
            .is_some_and(|w| worth_trading(draft.soft_weight, w, reduction))
        {
            return m;
        }
    }
    best
}

/// Why a move to `t` is refused when the `storage` filter is the only one that refuses it.
fn storage_refusal(draft: &Draft, subject: &Subject, t: NodeIdx) -> Option<String> {
    let ctx = draft.ctx(subject);
    match draft.placer.failures(&ctx, t).as_slice() {
        [(name, _, reason)] if *name == crate::placement::filters::storage::NAME => {
            Some(reason.to_string())
        }
        _ => None,
    }
}

/// Whether a subject may go from `s` to `t` on the current state (every filter passes), and if so
/// how many more of its soft rules the move leaves unmet (0: none worse off).
fn soft_cost(draft: &Draft, subject: &Subject, s: NodeIdx, t: NodeIdx) -> Option<usize> {
    let ctx = draft.ctx(subject);
    draft
        .placer
        .feasible(&ctx, t)
        .then(|| penalty(&ctx, t).saturating_sub(penalty(&ctx, s)))
}

fn best_swap(
    draft: &mut Draft,
    opts: &BalanceOptions,
    by_node: &[Vec<UnitId>],
    shifts: &[Option<Shift>],
    value: f64,
) -> Result<Option<Move>> {
    let (sources, _) = candidates_nodes(draft, opts, by_node, SWAP_NODES);
    let hot = draft.objective.hottest_first();
    let targets: Vec<NodeIdx> = hot
        .iter()
        .rev()
        .copied()
        .filter(|n| !by_node[n.get()].is_empty())
        .take(SWAP_NODES.min(opts.candidate_nodes))
        .collect();
    let mut cands: Vec<Move> = Vec::new();
    for &s in &sources {
        for &t in targets.iter().filter(|&&t| t != s) {
            for &x in &by_node[s.get()] {
                for &y in &by_node[t.get()] {
                    let (Some(sx), Some(sy)) = (&shifts[x], &shifts[y]) else {
                        continue;
                    };
                    let effect =
                        draft
                            .objective
                            .swap_effect(draft.cluster, &draft.state, (s, t), sx, sy);
                    let count = (draft.units.get(x).members.len()
                        + draft.units.get(y).members.len()) as f64;
                    let per_migration = effect.gain / count;
                    if opts.trigger.gain_ok(per_migration) && count as usize <= draft.budget_left()
                    {
                        let vmid = draft.cluster.guest(draft.units.get(x).members[0]).vmid;
                        let units = [(x, s, t), (y, t, s)];
                        cands.push(Move::new(
                            &units,
                            effect,
                            count as usize,
                            sx.mem + sy.mem,
                            vmid,
                            opts.move_cost_gib,
                        ));
                    }
                }
            }
        }
    }
    for mut m in best_first(cands).take(64) {
        if draft
            .objective
            .raises(draft.measure, &[m.effect.from, m.effect.to], value, SCREEN)
        {
            continue;
        }
        let reduction = value
            - draft
                .objective
                .measure_with(draft.measure, &[m.effect.from, m.effect.to]);
        // Either order may be the safe one: the first move needs room before the second frees it.
        for order in [m.units, [m.units[1], m.units[0]]] {
            if swap_is_safe(draft, &order, reduction) {
                m.units = order;
                return Ok(Some(m));
            }
        }
    }
    Ok(None)
}

/// Whether a member's hard rules refuse every other node whatever moves: a node rule allowing no
/// node but this one, or a selected label no node has. Every move of such a unit fails the
/// filters, so it is no candidate: as one, it would only cost work (pairs of them in swaps grow
/// with the square of the guests per node).
fn held_in_place(draft: &Draft, unit: UnitId, node: NodeIdx, labels: &HashSet<&str>) -> bool {
    draft.units.get(unit).members.iter().any(|&m| {
        let r = draft.rules.guest(m);
        r.node_rules
            .iter()
            .any(|nr| nr.nodes.iter().all(|&n| n == node))
            || r.selectors.iter().any(|l| !labels.contains(l.as_str()))
    })
}

/// Whether two unit moves pass the filters one after the other, each on the state the previous
/// leaves, and leave no soft rule worse off unless the swap's `reduction` of the measure is worth
/// it.
fn swap_is_safe(draft: &mut Draft, order: &[(UnitId, NodeIdx, NodeIdx)], reduction: f64) -> bool {
    let saved = draft.state.clone();
    let mut worse = Some(0);
    for &(u, s, t) in order {
        let unit = draft.units.get(u);
        if draft.returning(&unit.members, t).is_some() {
            worse = None;
            break;
        }
        let subject = draft.subject(&unit.members, unit.group.as_deref());
        worse = worse
            .zip(soft_cost(draft, &subject, s, t))
            .map(|(a, b)| a + b);
        if worse.is_none() {
            break;
        }
        for &g in &draft.units.get(u).members {
            draft.state.move_guest(draft.cluster, g, t);
        }
    }
    draft.state = saved;
    worse.is_some_and(|w| worth_trading(draft.soft_weight, w, reduction))
}

fn apply(draft: &mut Draft, m: &Move) {
    let kind = m.count;
    for (i, &(u, s, t)) in m.moves().iter().enumerate() {
        let unit = draft.units.get(u).clone();
        let subject = draft.subject(&unit.members, unit.group.as_deref());
        let trade = soft_cost(draft, &subject, s, t)
            .map_or(String::new(), |w| traded(draft.soft_weight, w));
        let (ls, lt) = (draft.objective.load(s), draft.objective.load(t));
        let shift = draft.shift(&unit.members);
        let e = draft
            .objective
            .effect(draft.cluster, &draft.state, s, t, &shift);
        let (cs, ct) = (&draft.cluster.node(s).name, &draft.cluster.node(t).name);
        let who = match &unit.group {
            Some(g) => format!("group {g} moves together, "),
            None => String::new(),
        };
        let why = if kind == 1 {
            format!(
                "the largest balance gain per migration among moves off the fullest nodes ({} to copy)",
                fmt_bytes(draft.bytes(&unit.members))
            )
        } else {
            let other = m.units[1 - i].0;
            let vmid = draft.cluster.guest(draft.units.get(other).members[0]).vmid;
            format!(
                "swapped with {vmid} because no single move helps ({} to copy)",
                fmt_bytes(draft.bytes(&unit.members))
            )
        };
        let reason = format!(
            "balance {}: {who}{cs} {} % → {} %, {ct} {} % → {} %; {why}{trade}",
            draft.objective.kind().as_str(),
            one_decimal(ls),
            one_decimal(e.from.1),
            one_decimal(lt),
            one_decimal(e.to.1),
        );
        let (purpose, step) = match (kind, i) {
            (1, _) => (Purpose::Balance, Step::New),
            (_, 0) => (Purpose::Swap, Step::New),
            _ => (Purpose::Swap, Step::Joined),
        };
        draft.apply(
            &unit.members,
            t,
            purpose,
            &reason,
            unit.group.as_deref(),
            step,
        );
    }
}
