//! Proxmox's own auto-rebalance selection as plan methods: `pve-bruteforce` and `pve-topsis`
//! (docs/proxmox-behaviour.md §2.2-2.5), computed by [`crate::pve_crs`].
//!
//! One move per call, as Proxmox makes one per balancing round: if the normalised CV is above the
//! threshold, rank every (bundle, target) move, take the first, and make it only if it lowers the
//! imbalance by at least the margin. Bundles are the running members of hard affinity groups on
//! one node, led by the alphabetically first sid. Unlike Proxmox, targets must pass flxp's
//! placement filters (memory, rules, anti-affinity), because flxp never plans an unsafe step;
//! Proxmox only checks node affinity and negative affinity. Rule fixes are not part of these
//! methods. [`run_until_stable`] repeats the call, applying each move, for comparisons.
//!
//! A node's load is what the cluster's `crs: ha=` mode names (or the `usage` option): static usage
//! is the sum of the configured CPUs and memory of its running guests against its CPUs and memory,
//! measurements unused; dynamic usage is measured. With `ha=basic` Proxmox does not rebalance at
//! all; these methods then show what its dynamic mode would do. Like Proxmox, they make no move
//! while any HA guest is migrating or relocating (`Manager::load_balance`).

use std::collections::HashMap;

use serde::Serialize;

use crate::Result;
use crate::cluster::{Cluster, CrsMode, Guest, NodeIdx};
use crate::constraints::Rules;
use crate::placement::{Ctx, Placer};
use crate::pve_crs::{
    CrsMigration as CrsMove, Imbalance, MigrationCandidate, NodeStats, NodeUsage, ResourceStats,
    rank_bruteforce, rank_topsis,
};
use crate::state::State;

use super::draft::{Draft, Step};
use super::explain::{left_in_place, left_phrase};
use super::measure::{Measure, Metric, balanced_nodes};
use super::methods::{BalanceMethod, MethodName, PlanInput, pve_bruteforce, pve_topsis};
use super::movable::{Intent, Mover};
use super::options::{BalanceOptions, UsageChoice};
use super::plan::{Migration, Plan, PlanSource, Purpose, UsageMode, UsageUsed};
use super::planner::finish;
use super::stop::PlanStop;
use super::units::UnitId;

/// One ranked move of Proxmox's method.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PveMove {
    /// The bundle's leading sid (`vm:101`).
    pub sid: String,
    /// Source node.
    pub from: String,
    /// Target node.
    pub to: String,
    /// Normalised imbalance after the move (15 decimals, as Proxmox compares it).
    pub imbalance: f64,
    /// TOPSIS score (0..=1) for `pve-topsis`; `None` for bruteforce.
    pub score: Option<f64>,
}

struct Candidates {
    nodes: Vec<NodeUsage>,
    moves: Vec<MigrationCandidate>,
    units: Vec<(UnitId, NodeIdx)>,
}

/// The usage the methods balance on: the option when set, else the cluster's `crs` mode.
pub(crate) fn usage_of(cluster: &Cluster, choice: UsageChoice) -> UsageUsed {
    let (mode, from) = match (choice, cluster.crs.mode) {
        (UsageChoice::Static, _) => (UsageMode::Static, "the usage option"),
        (UsageChoice::Dynamic, _) => (UsageMode::Dynamic, "the usage option"),
        (UsageChoice::Auto, CrsMode::Static) => (UsageMode::Static, "crs ha=static"),
        (UsageChoice::Auto, CrsMode::Dynamic) => (UsageMode::Dynamic, "crs ha=dynamic"),
        (UsageChoice::Auto, CrsMode::Basic) => (
            UsageMode::Dynamic,
            "crs ha=basic (Proxmox does not rebalance in basic mode; shown as ha=dynamic would)",
        ),
    };
    UsageUsed {
        mode,
        from: from.to_owned(),
    }
}

/// Nodes Proxmox scores: balanced, with CPUs and memory.
fn scorable(cluster: &Cluster) -> Vec<NodeIdx> {
    balanced_nodes(cluster)
        .filter(|&n| cluster.node(n).maxcpu > 0.0 && cluster.node(n).maxmem > 0)
        .collect()
}

/// A node's usage as the mode sees it: measured, or the configured sizes of its running guests.
fn node_stats(cluster: &Cluster, state: &State, n: NodeIdx, mode: UsageMode) -> NodeStats {
    let (node, u) = (cluster.node(n), state.usage(n));
    let (cpu, mem) = match mode {
        UsageMode::Dynamic => (u.cpu, u.mem),
        UsageMode::Static => (
            u.committed_cpus + unlimited_ct_cpus(cluster, state, n),
            u.committed_mem,
        ),
    };
    NodeStats {
        cpu,
        maxcpu: node.maxcpu,
        mem,
        maxmem: node.maxmem,
    }
}

/// What Proxmox's static usage adds to a node's committed CPUs: its running containers without a
/// CPU limit count as the node's CPU count there (`Guest::static_cpus`), as 0 in the commitment.
fn unlimited_ct_cpus(cluster: &Cluster, state: &State, n: NodeIdx) -> f64 {
    let cpus = cluster.node(n).maxcpu;
    cluster
        .guest_indexes()
        .filter(|&g| state.location(g) == n)
        .map(|g| cluster.guest(g))
        .filter(|g| g.running)
        .map(|g| g.static_cpus(cpus) - g.maxcpu)
        .sum()
}

/// A guest's usage as the mode sees it: measured, or its configured CPUs and memory (an unlimited
/// container at the CPU count of `node_cpus`, the node it runs on).
fn guest_stats(g: &Guest, mode: UsageMode, node_cpus: f64) -> ResourceStats {
    let (cpu, maxcpu, mem) = match mode {
        UsageMode::Dynamic => (g.cpu_cores(), g.maxcpu, g.mem_footprint()),
        UsageMode::Static => {
            let cpus = g.static_cpus(node_cpus);
            (cpus, cpus, g.maxmem)
        }
    };
    ResourceStats {
        cpu,
        maxcpu,
        mem,
        maxmem: g.maxmem,
    }
}

/// The scorable nodes' usage in a state.
/// The imbalance of a state as the `pve-*` methods measure it on `mode`'s usage (`None` when
/// Proxmox's measure is undefined for it, e.g. no node to score).
pub(crate) fn usage_imbalance(
    cluster: &Cluster,
    state: &State,
    mode: UsageMode,
    measure: Measure,
) -> Option<f64> {
    let nodes = node_usages(cluster, state, mode);
    let normalized = Imbalance::of_nodes(&nodes).ok()?.normalized;
    Some(match measure {
        Measure::CvRaw => Imbalance::raw_from_normalized(normalized, nodes.len()),
        _ => normalized,
    })
}

fn node_usages(cluster: &Cluster, state: &State, mode: UsageMode) -> Vec<NodeUsage> {
    scorable(cluster)
        .into_iter()
        .map(|n| {
            NodeUsage::new(
                cluster.node(n).name.clone(),
                node_stats(cluster, state, n, mode),
            )
        })
        .collect()
}

/// HA guests Proxmox counts as in motion: HA state `migrate` / `relocate`, or a running migration.
fn ha_in_motion(cluster: &Cluster) -> Vec<String> {
    cluster
        .guests()
        .iter()
        .filter(|g| {
            g.ha_managed
                && (matches!(g.hastate.as_deref(), Some("migrate" | "relocate"))
                    || g.migrating.is_some()
                    || cluster.tasks.is_migrating(g.vmid))
        })
        .map(Guest::sid)
        .collect()
}

/// Every (bundle, target) move; with `filter`, only targets the placement filters accept.
fn candidates(draft: &Draft, filter: bool, mode: UsageMode) -> Candidates {
    let (cluster, state) = (draft.cluster, &draft.state);
    let scorable = scorable(cluster);
    let nodes = node_usages(cluster, state, mode);
    let mut moves = Vec::new();
    let mut units = Vec::new();
    for (id, unit) in draft.units.all.iter().enumerate() {
        let Some(from) = unit.node(state) else {
            continue;
        };
        if !scorable.contains(&from) || draft.unit_stays(id, Intent::Balance).is_some() {
            continue;
        }
        let members: Vec<&crate::cluster::Guest> =
            unit.members.iter().map(|&m| cluster.guest(m)).collect();
        let Some(sid) = members.iter().map(|g| g.sid()).min() else {
            continue;
        };
        let stats = members
            .iter()
            .map(|g| guest_stats(g, mode, cluster.node(from).maxcpu))
            .sum();
        let subject = draft.subject(&unit.members, unit.group.as_deref());
        let ctx = filter.then(|| {
            Ctx::new(
                cluster,
                draft.rules,
                state,
                draft.placer.options(),
                &subject,
            )
        });
        for &to in scorable.iter().filter(|&&t| t != from) {
            if ctx
                .as_ref()
                .is_none_or(|ctx| draft.placer.feasible(ctx, to))
                && draft.returning(&unit.members, to).is_none()
            {
                moves.push(MigrationCandidate {
                    migration: CrsMove::new(
                        sid.clone(),
                        cluster.node(from).name.clone(),
                        cluster.node(to).name.clone(),
                    ),
                    stats,
                });
                units.push((id, to));
            }
        }
    }
    Candidates {
        nodes,
        moves,
        units,
    }
}

/// Whether the placement filters let a unit go to a node on the current state.
fn allowed(draft: &Draft, unit: UnitId, to: NodeIdx) -> bool {
    let u = draft.units.get(unit);
    let subject = draft.subject(&u.members, u.group.as_deref());
    draft.feasible(&subject, to)
}

/// How Proxmox ranks the candidate moves: its two auto-rebalance methods. Each method's file
/// names its own (`pve_bruteforce::RANKING`, `pve_topsis::RANKING`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranking {
    /// `bruteforce`: by the imbalance each move leaves.
    Bruteforce,
    /// `topsis`: TOPSIS over every move.
    Topsis,
}

impl Ranking {
    /// The method, as plans report it.
    fn method(self) -> MethodName {
        match self {
            Self::Bruteforce => pve_bruteforce::NAME,
            Self::Topsis => pve_topsis::NAME,
        }
    }

    /// The method's name, for reasons and summaries.
    fn name(self) -> &'static str {
        match self {
            Self::Bruteforce => pve_bruteforce::METHOD.name(),
            Self::Topsis => pve_topsis::METHOD.name(),
        }
    }
}

/// Ranks `(candidate index, move)` by the method, best first.
fn rank(c: &Candidates, ranking: Ranking) -> Result<Vec<(usize, PveMove)>> {
    let positions: HashMap<&CrsMove, usize> = c
        .moves
        .iter()
        .enumerate()
        .map(|(i, m)| (&m.migration, i))
        .collect();
    // Every ranked move is one of the candidates handed in.
    let index = |m: &CrsMove| positions.get(m).copied().unwrap_or(usize::MAX);
    let to_move = |m: &CrsMove, imbalance: f64, score: Option<f64>| PveMove {
        sid: m.sid.clone(),
        from: m.source.clone(),
        to: m.target.clone(),
        imbalance,
        score,
    };
    Ok(match ranking {
        Ranking::Topsis => rank_topsis(&c.nodes, &c.moves)?
            .into_iter()
            .map(|t| {
                let m = &t.scored.migration;
                (index(m), to_move(m, t.scored.imbalance, Some(t.score)))
            })
            .collect(),
        Ranking::Bruteforce => rank_bruteforce(&c.nodes, &c.moves)?
            .into_iter()
            .map(|s| {
                (
                    index(&s.migration),
                    to_move(&s.migration, s.imbalance, None),
                )
            })
            .collect(),
    })
}

/// Every move Proxmox's method of this `ranking` would consider on this state, ranked best first.
pub fn rank_moves(
    input: &PlanInput<'_>,
    options: &BalanceOptions,
    ranking: Ranking,
) -> Result<Vec<PveMove>> {
    let draft = new_sim(
        input.cluster,
        input.rules,
        input.state,
        input.placer,
        options,
    );
    let c = candidates(&draft, true, usage_of(input.cluster, options.usage).mode);
    Ok(rank(&c, ranking)?.into_iter().map(|(_, m)| m).collect())
}

fn new_sim<'a>(
    cluster: &'a Cluster,
    rules: &'a Rules,
    state: &State,
    placer: &'a Placer,
    options: &BalanceOptions,
) -> Draft<'a> {
    let measure = pve_measure(options);
    let mut draft = Draft::new(
        cluster,
        rules,
        placer,
        state,
        measure.load_kind(Metric::Memory),
        measure,
        options.cooldown_secs,
        options.max_migrations,
    );
    draft.restart_containers = options.restart_containers;
    draft.return_hold_secs = options.return_hold_secs;
    draft.mover = Mover::ProxmoxHa;
    draft
}

/// Proxmox judges by its CV; a spread setting means the normalised CV with its default threshold
/// (Proxmox VE 9.2: the imbalance normalised to 0..=1, threshold 30 %). ha-manager 5.2.0, whose
/// test logs show the raw CV against a raw threshold of 0.3, is `cv-raw`.
fn pve_measure(options: &BalanceOptions) -> Measure {
    match options.measure {
        Measure::Spread => Measure::Cv,
        m => m,
    }
}

/// One round of Proxmox's balancing as a plan of at most one move (one bundle).
pub(crate) fn plan(
    input: &PlanInput<'_>,
    options: &BalanceOptions,
    ranking: Ranking,
) -> Result<Plan> {
    let &PlanInput {
        cluster,
        rules,
        state,
        placer,
    } = input;
    let measure = pve_measure(options);
    let threshold = match options.measure {
        Measure::Spread => measure.default_threshold(),
        m => options.trigger.threshold_for(m),
    };
    let usage = usage_of(cluster, options.usage);
    let mode = usage.mode;
    let mut draft = new_sim(cluster, rules, state, placer, options);
    let scale = |normalized: f64, n: usize| match measure {
        Measure::CvRaw => Imbalance::raw_from_normalized(normalized, n),
        _ => normalized,
    };
    let before_nodes = node_usages(cluster, state, mode);
    let value = scale(
        Imbalance::of_nodes(&before_nodes)?.normalized,
        before_nodes.len(),
    );
    let moving = ha_in_motion(cluster);
    let (summary, stop) = if moving.is_empty() {
        choose(&mut draft, ranking, mode, value, threshold, options, &scale)?
    } else {
        // Proxmox's `load_balance` returns before it looks at the imbalance while any HA
        // resource is migrating or relocating, or has such a command queued.
        (
            format!(
                "no move: {} HA guest(s) in motion ({}); Proxmox's auto-rebalance makes no move while any HA guest is migrating or relocating",
                moving.len(),
                moving.join(", ")
            ),
            Some(PlanStop::HaInMotion {
                guests: moving.clone(),
            }),
        )
    };
    let left = left_in_place(&draft);
    let after_nodes = node_usages(cluster, &draft.state, mode);
    let after = scale(
        Imbalance::of_nodes(&after_nodes)?.normalized,
        after_nodes.len(),
    );
    let source = PlanSource::Balance(ranking.method());
    let mut plan = finish(draft, state, source, threshold, threshold);
    if mode == UsageMode::Static {
        // The plan's figures are those the method balanced on, not the measured ones.
        plan.imbalance_before = value;
        plan.imbalance_after = after;
        for m in &mut plan.migrations {
            m.imbalance_after = after;
        }
        for (rows, s) in [
            (&mut plan.nodes_before, state),
            (
                &mut plan.nodes_after,
                &plan_state(cluster, state, &plan.migrations),
            ),
        ] {
            for row in rows.iter_mut() {
                if let Some(n) = cluster.node_idx(&row.node) {
                    row.load = static_load(cluster, s, n);
                }
            }
        }
    }
    // The summary's cause is the headline's and `unmet`'s too.
    plan.stop = stop;
    plan.summary = summary;
    plan.left_in_place = left;
    plan.usage = Some(usage);
    Ok(plan)
}

/// The state after a plan's migrations.
fn plan_state(cluster: &Cluster, state: &State, migrations: &[Migration]) -> State {
    let mut s = state.clone();
    for m in migrations {
        if let (Some(g), Some(to)) = (cluster.guest_idx(m.vmid), cluster.node_idx(&m.to)) {
            s.move_guest(cluster, g, to);
        }
    }
    s
}

/// A node's static load in percent: the mean of its configured CPU and memory shares.
fn static_load(cluster: &Cluster, state: &State, n: NodeIdx) -> f64 {
    let st = node_stats(cluster, state, n, UsageMode::Static);
    let share = |used: f64, total: f64| if total > 0.0 { used / total } else { 0.0 };
    let pct = 50.0 * (share(st.cpu, st.maxcpu) + share(st.mem as f64, st.maxmem as f64));
    (pct * 100.0).round() / 100.0
}

/// Picks and applies the round's move, if any; returns the plan's summary.
fn choose(
    draft: &mut Draft,
    ranking: Ranking,
    mode: UsageMode,
    value: f64,
    threshold: f64,
    options: &BalanceOptions,
    scale: &dyn Fn(f64, usize) -> f64,
) -> Result<(String, Option<PlanStop>)> {
    let method = ranking.name();
    if value <= threshold {
        return Ok((
            format!("cv {value:.3} is within the threshold {threshold}: no move"),
            None,
        ));
    }
    // TOPSIS judges each move against all the others, so its candidate set must be exactly the
    // allowed moves; bruteforce scores each move alone, so it may rank all and check filters
    // only down the ranking until one passes.
    let lazy = ranking == Ranking::Bruteforce;
    let c = candidates(draft, !lazy, mode);
    let n = c.nodes.len();
    let mut ranked = rank(&c, ranking)?;
    if lazy {
        if let Some(pos) = ranked.iter().position(|(i, _)| {
            c.units
                .get(*i)
                .is_some_and(|&(u, to)| allowed(draft, u, to))
        }) {
            ranked.drain(..pos);
        } else {
            ranked.clear();
        }
    }
    let Some((i, best)) = ranked.first().filter(|(i, _)| *i < c.units.len()) else {
        let left = left_phrase(&left_in_place(draft));
        let why = match (c.moves.is_empty(), left.is_empty()) {
            (false, _) => "no target passes the placement filters for any movable guest".to_owned(),
            (true, true) => "no guest is on a node that can be balanced".to_owned(),
            (true, false) => left,
        };
        return Ok((
            format!(
                "cv {value:.3} is above the threshold {threshold}, but nothing can move: {why}"
            ),
            Some(PlanStop::NothingCanMove { why }),
        ));
    };
    let after = scale(best.imbalance, n);
    let relative = (value - after) / value;
    let (unit, to) = c.units[*i];
    let members = draft.units.get(unit).members.clone();
    if relative < options.trigger.margin {
        let gain = format!(
            "the best move ({} to {}) would change cv {value:.3} → {after:.3} ({:.0} %), less than the {:.0} % margin",
            best.sid,
            best.to,
            100.0 * relative,
            100.0 * options.trigger.margin
        );
        return Ok((
            format!("{gain}: no move"),
            Some(PlanStop::BestMoveBelowMargin { detail: gain }),
        ));
    }
    if members.len() > draft.budget_left() {
        let stop = PlanStop::MoveOverBudget {
            needed: members.len(),
            budget: draft.budget,
        };
        return Ok((stop.to_string(), Some(stop)));
    }
    let why = match ranking {
        Ranking::Topsis => format!(
            "{method}: TOPSIS ranks this move first of {} (score {:.3})",
            ranked.len(),
            best.score.unwrap_or(0.0)
        ),
        Ranking::Bruteforce => format!(
            "{method}: the lowest imbalance after any of {} single moves",
            ranked.len()
        ),
    };
    let group = draft.units.get(unit).group.clone();
    let first = draft.migrations.len();
    draft.apply(
        &members,
        to,
        Purpose::Balance,
        &why,
        group.as_deref(),
        Step::New,
    );
    // The draft appends its own measured figures; the why line quotes those of the usage the
    // method balanced on (static or dynamic), as the summary does.
    let m = draft.measure;
    let text = format!("{why}; {} {} → {}", m.as_str(), m.fmt(value), m.fmt(after));
    for mig in &mut draft.migrations[first..] {
        mig.reason.clone_from(&text);
        mig.imbalance_after = after;
    }
    Ok((
        format!(
            "{method}: move {} from {} to {}: cv {value:.3} → {after:.3}",
            best.sid, best.from, best.to
        ),
        None,
    ))
}

/// Repeats Proxmox's one-move round on the state each move leaves, until it makes no move or
/// `max_rounds` rounds ran: the sequence Proxmox would carry out over that many balancing rounds.
/// Guests may move more than once, as Proxmox keeps no memory between rounds. The `ranking` says
/// which of Proxmox's methods.
pub fn run_until_stable(
    start: &PlanInput<'_>,
    options: &BalanceOptions,
    ranking: Ranking,
    max_rounds: usize,
) -> Result<(State, Vec<Migration>)> {
    let cluster = start.cluster;
    let mut s = start.state.clone();
    let mut all = Vec::new();
    for _ in 0..max_rounds {
        let input = PlanInput {
            state: &s,
            ..*start
        };
        let p = plan(&input, options, ranking)?;
        if p.migrations.is_empty() {
            break;
        }
        for m in p.migrations {
            if let (Some(g), Some(to)) = (cluster.guest_idx(m.vmid), cluster.node_idx(&m.to)) {
                s.move_guest(cluster, g, to);
            }
            all.push(m);
        }
    }
    Ok((s, all))
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::balance::measure::round;
    use crate::placement::PlacementOptions;
    use crate::testutil::*;

    #[test]
    fn a_bundle_is_one_candidate_led_by_its_alphabetically_first_sid_and_moves_whole() {
        // vm:1000 sorts before vm:999, as Proxmox compares sids as strings.
        let c = ClusterBuilder::new()
            .node(node("a").cpus(8.0))
            .node(node("b").cpus(8.0))
            .guest(
                vm(999, "a")
                    .hastate("started")
                    .cores(2.0, 1.0)
                    .mem(8 * GIB, 8 * GIB)
                    .tagged("flxp.affinity.db"),
            )
            .guest(
                vm(1000, "a")
                    .hastate("started")
                    .cores(2.0, 1.0)
                    .mem(8 * GIB, 8 * GIB)
                    .tagged("flxp.affinity.db"),
            )
            .guest(
                vm(1001, "a")
                    .cores(1.0, 1.0)
                    .mem(GIB, GIB)
                    .tagged("flxp.ignore"),
            )
            .build();
        let rules = Rules::compile(&c);
        let s = State::new(&c);
        let p = Placer::new(PlacementOptions::default(), Vec::new()).unwrap();
        let o = BalanceOptions {
            method: pve_bruteforce::NAME,
            measure: Measure::Cv,
            ..BalanceOptions::default()
        };
        let moves =
            rank_moves(&PlanInput::new(&c, &rules, &s, &p), &o, Ranking::Bruteforce).unwrap();
        assert_eq!(moves.len(), 1, "{moves:?}");
        assert_eq!(
            (moves[0].sid.as_str(), moves[0].to.as_str()),
            ("vm:1000", "b")
        );
        let input = PlanInput {
            cluster: &c,
            rules: &rules,
            state: &s,
            placer: &p,
        };
        let plan = plan(&input, &o, Ranking::Bruteforce).unwrap();
        let got: Vec<u32> = plan.migrations.iter().map(|m| m.vmid).collect();
        assert_eq!(got, vec![999, 1000]);
        assert!(
            plan.migrations[0]
                .reason
                .starts_with("pve-bruteforce: the lowest imbalance after any of 1 single moves"),
            "{}",
            plan.migrations[0].reason
        );
        assert!(
            plan.summary
                .starts_with("pve-bruteforce: move vm:1000 from a to b: cv "),
            "{}",
            plan.summary
        );
        // One round is one move: the plan holds a single decision.
        assert!(plan.migrations.iter().all(|m| m.step == 0));
    }

    /// Proxmox's `test-crs-static-auto-rebalance2`: three nodes of 24 CPUs and 32 GiB, four guests
    /// of 2 CPUs and 8 GiB on node1, no measurements at all.
    fn four_on_node1(crs: &str) -> ClusterBuilder {
        let mut b = ClusterBuilder::new();
        for n in ["node1", "node2", "node3"] {
            b = b.node(node(n).cpus(24.0).memory(32 * GIB).load(0.0));
        }
        for vmid in 101..=104 {
            b = b.guest(
                vm(vmid, "node1")
                    .cores(2.0, 0.0)
                    .mem(0, 8 * GIB)
                    .hastate("started"),
            );
        }
        b.option("crs", serde_json::json!(crs))
    }

    fn raw_cv(method: super::super::methods::MethodName) -> BalanceOptions {
        BalanceOptions {
            method,
            measure: Measure::CvRaw,
            ..BalanceOptions::default()
        }
    }

    fn placer() -> Placer {
        Placer::new(PlacementOptions::default(), Vec::new()).unwrap()
    }

    /// `pve-bruteforce`'s plan of `c` from where its guests are, on Proxmox's raw CV.
    fn bruteforce(c: &Cluster) -> Plan {
        bruteforce_with(c, &raw_cv(pve_bruteforce::NAME))
    }

    /// `pve-bruteforce`'s plan of `c` from where its guests are, with options `o`.
    fn bruteforce_with(c: &Cluster, o: &BalanceOptions) -> Plan {
        let (rules, state, placer) = (Rules::compile(c), State::new(c), placer());
        let input = PlanInput {
            cluster: c,
            rules: &rules,
            state: &state,
            placer: &placer,
        };
        plan(&input, o, Ranking::Bruteforce).unwrap()
    }

    #[test]
    fn static_mode_balances_configured_sizes_as_proxmox_does() {
        // Under `crs: ha=static` Proxmox's load is the configured CPUs and memory of the guests:
        // all four on node1 give a raw CV of 1.41, and its bruteforce moves vm:101 to node2 (ties
        // go to the first sid and target), then vm:102 to node3 (0.94 → 0.35), then stops.
        let c = four_on_node1("ha=static").build();
        let rules = Rules::compile(&c);
        let s = State::new(&c);
        let o = raw_cv(pve_bruteforce::NAME);
        let p = bruteforce_with(&c, &o);
        let got: Vec<(u32, &str)> = p
            .migrations
            .iter()
            .map(|m| (m.vmid, m.to.as_str()))
            .collect();
        assert_eq!(got, vec![(101, "node2")], "{}", p.summary);
        assert_eq!(
            (round(p.imbalance_before, 2), round(p.imbalance_after, 2)),
            (1.41, 0.94)
        );
        // The why line quotes the figures of the usage balanced on, not the measured ones.
        assert!(
            p.migrations[0].reason.ends_with("; cv-raw 1.414 → 0.935"),
            "{}",
            p.migrations[0].reason
        );
        let usage = p.usage.as_ref().unwrap();
        assert_eq!(
            (usage.mode, usage.from.as_str()),
            (UsageMode::Static, "crs ha=static")
        );
        assert_eq!(p.nodes_before[0].load, round(50.0 * (8.0 / 24.0 + 1.0), 2));
        let (_, all) = run_until_stable(
            &PlanInput::new(&c, &rules, &s, &placer()),
            &o,
            Ranking::Bruteforce,
            10,
        )
        .unwrap();
        let got: Vec<(u32, &str)> = all.iter().map(|m| (m.vmid, m.to.as_str())).collect();
        assert_eq!(got, vec![(101, "node2"), (102, "node3")]);
        // TOPSIS balances on the same static figures.
        let placer = placer();
        let input = PlanInput {
            cluster: &c,
            rules: &rules,
            state: &s,
            placer: &placer,
        };
        let t = plan(&input, &raw_cv(pve_topsis::NAME), Ranking::Topsis).unwrap();
        assert_eq!(t.migrations.len(), 1, "{}", t.summary);
    }

    #[test]
    fn static_mode_counts_a_container_without_cpu_limit_at_the_node_cpu_count() {
        // Proxmox's static usage takes an unlimited container's `max-cpu` (no `cpulimit`) as the
        // node's CPU count (`PVE::LXC::Config::get_derived_property`), as placement does.
        let c = ClusterBuilder::new()
            .node(node("node1").cpus(8.0).memory(32 * GIB).load(0.0))
            .node(node("node2").cpus(8.0).memory(32 * GIB).load(0.0))
            .guest(ct(101, "node1").cores(0.0, 0.0).mem(0, GIB))
            .guest(vm(102, "node2").cores(2.0, 0.0).mem(0, GIB))
            .option("crs", serde_json::json!("ha=static"))
            .build();
        let p = bruteforce(&c);
        assert_eq!(
            p.nodes_before[0].load,
            round(50.0 * (8.0 / 8.0 + 1.0 / 32.0), 2)
        );
        assert_eq!(
            p.nodes_before[1].load,
            round(50.0 * (2.0 / 8.0 + 1.0 / 32.0), 2)
        );
    }

    #[test]
    fn dynamic_usage_sees_no_imbalance_without_measurements_and_the_option_overrides_crs() {
        // Measured usage is zero everywhere: dynamic mode (Proxmox's ha=dynamic) moves nothing.
        let c = four_on_node1("ha=dynamic").build();
        let o = raw_cv(pve_bruteforce::NAME);
        let p = bruteforce_with(&c, &o);
        assert!(p.migrations.is_empty());
        assert_eq!(p.usage.unwrap().mode, UsageMode::Dynamic);
        let o = BalanceOptions {
            usage: UsageChoice::Static,
            ..o
        };
        let p = bruteforce_with(&c, &o);
        assert_eq!(p.migrations.len(), 1);
        assert_eq!(p.usage.unwrap().from, "the usage option");
        // Basic mode: Proxmox does not rebalance; flxp shows what ha=dynamic would do, and says so.
        let c = four_on_node1("ha=basic").build();
        let u = usage_of(&c, UsageChoice::Auto);
        assert_eq!(u.mode, UsageMode::Dynamic);
        assert!(u.from.starts_with("crs ha=basic"), "{}", u.from);
    }

    /// [`four_on_node1`] under `ha=static` with HA guest 105 on node2 in `hastate`.
    fn beside_an_ha_guest_on_node2(hastate: &str) -> Cluster {
        four_on_node1("ha=static")
            .guest(
                vm(105, "node2")
                    .hastate(hastate)
                    .mem(0, GIB)
                    .cores(1.0, 0.0),
            )
            .build()
    }

    #[test]
    fn no_move_while_an_ha_guest_migrates_or_relocates() {
        // Proxmox's load_balance returns at once while any HA resource is in state migrate or
        // relocate, however imbalanced the cluster is; other guests' migrations do not hold it.
        for hastate in ["migrate", "relocate"] {
            let c = beside_an_ha_guest_on_node2(hastate);
            let p = bruteforce(&c);
            assert!(p.migrations.is_empty());
            assert!(
                p.summary.starts_with("no move: 1 HA guest(s) in motion (vm:105); Proxmox's auto-rebalance makes no move"),
                "{}",
                p.summary
            );
        }
        let c = beside_an_ha_guest_on_node2("started");
        let p = bruteforce(&c);
        assert_eq!(p.migrations.len(), 1, "{}", p.summary);
    }

    #[test]
    fn an_ha_guest_in_motion_is_the_typed_stop() {
        let c = beside_an_ha_guest_on_node2("migrate");
        let p = bruteforce(&c);
        assert_eq!(
            p.stop,
            Some(PlanStop::HaInMotion {
                guests: vec!["vm:105".to_owned()]
            })
        );
    }

    #[test]
    fn pve_methods_move_only_ha_guests_even_with_proxmox_auto_rebalance_on() {
        // Proxmox's auto-rebalance (Manager::load_balance) picks its candidates from the HA
        // service status only, and it is what the pve-* methods replay: HA guests are theirs to
        // move even while ha-auto-rebalance is on, other guests are never moved (their load still
        // counts). Four HA guests of 8 GiB and a larger non-HA one on node1.
        let c = four_on_node1("ha=static,ha-auto-rebalance=1")
            .guest(vm(105, "node1").cores(4.0, 0.0).mem(0, 16 * GIB))
            .build();
        let p = bruteforce(&c);
        let got: Vec<u32> = p.migrations.iter().map(|m| m.vmid).collect();
        assert_eq!(got, vec![101], "{}", p.summary);
        let counted: Vec<(&str, usize)> = p
            .left_in_place
            .iter()
            .map(|l| (l.kind.as_str(), l.count))
            .collect();
        assert_eq!(counted, vec![("not-ha", 1)]);
        assert_eq!(
            p.left_in_place[0].reason,
            "1 guest is not HA-managed: Proxmox's auto-rebalance moves only HA resources"
        );
    }

    #[test]
    fn a_plan_that_moves_nothing_counts_why() {
        // flxp leaves HA guests to Proxmox when its auto-rebalance is on; locked guests stay.
        let mut b = ClusterBuilder::new().nodes(&["a", "b", "c"]);
        for vmid in 101..=104 {
            b = b.guest(vm(vmid, "a").hastate("started"));
        }
        let c = b
            .guest(vm(105, "a").locked("backup"))
            .guest(vm(106, "a").locked("snapshot"))
            .guest(vm(107, "b").stopped())
            .option("crs", serde_json::json!("ha=dynamic,ha-auto-rebalance=1"))
            .build();
        let rules = Rules::compile(&c);
        let s = State::new(&c);
        let f =
            crate::balance::plan(&c, &rules, &s, &placer(), &BalanceOptions::default()).unwrap();
        assert!(f.migrations.is_empty());
        let counted = |p: &Plan| -> Vec<(String, usize)> {
            p.left_in_place
                .iter()
                .map(|l| (l.kind.as_str().to_owned(), l.count))
                .collect()
        };
        let want = |v: &[(&str, usize)]| -> Vec<(String, usize)> {
            v.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect()
        };
        assert_eq!(
            counted(&f),
            want(&[("ha-auto-rebalance", 4), ("locked", 2), ("stopped", 1)])
        );
        assert_eq!(
            left_phrase(&f.left_in_place),
            "4 guests are HA-managed while Proxmox's auto-rebalance is on: left to Proxmox; 2 guests are locked (backup, snapshot); 1 guest is stopped: moving them changes no load"
        );
        assert_eq!(f.left_in_place[1].vmids, vec![105, 106]);
        // The pve-* methods replay Proxmox's auto-rebalance: the HA guests are theirs to move,
        // the others are not HA resources (the locks are named first).
        let p = bruteforce(&c);
        assert_eq!(counted(&p), want(&[("not-ha", 1), ("locked", 2)]));
    }
}
