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

use std::collections::HashMap;

use serde::Serialize;

use crate::Result;
use crate::cluster::{Cluster, NodeIdx};
use crate::constraints::Rules;
use crate::placement::{Ctx, Placer};
use crate::pve_crs::{
    Imbalance, Migration as CrsMove, MigrationCandidate, NodeStats, NodeUsage, ResourceStats,
    rank_bruteforce, rank_topsis,
};
use crate::state::State;

use super::draft::Draft;
use super::measure::{Measure, Metric, balanced_nodes};
use super::methods::{MethodName, pve_bruteforce, pve_topsis};
use super::movable::Intent;
use super::options::BalanceOptions;
use super::plan::{Migration, Plan, Purpose};
use super::planner::finish;
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

/// Every (bundle, target) move; with `filter`, only targets the placement filters accept.
fn candidates(sim: &Draft, filter: bool) -> Candidates {
    let (cluster, state) = (sim.cluster, &sim.state);
    let scorable: Vec<NodeIdx> = balanced_nodes(cluster)
        .filter(|&n| cluster.node(n).maxcpu > 0.0 && cluster.node(n).maxmem > 0)
        .collect();
    let nodes: Vec<NodeUsage> = scorable
        .iter()
        .map(|&n| {
            let (node, u) = (cluster.node(n), state.usage(n));
            NodeUsage::new(
                node.name.clone(),
                NodeStats {
                    cpu: u.cpu,
                    maxcpu: node.maxcpu,
                    mem: u.mem,
                    maxmem: node.maxmem,
                },
            )
        })
        .collect();
    let mut moves = Vec::new();
    let mut units = Vec::new();
    for (id, unit) in sim.units.all.iter().enumerate() {
        let Some(from) = unit.node(state) else {
            continue;
        };
        if !scorable.contains(&from) || sim.unit_stays(id, Intent::Balance).is_some() {
            continue;
        }
        let members: Vec<&crate::cluster::Guest> =
            unit.members.iter().map(|&m| cluster.guest(m)).collect();
        let Some(sid) = members.iter().map(|g| g.sid()).min() else {
            continue;
        };
        let stats = members
            .iter()
            .map(|g| ResourceStats {
                cpu: g.cpu_cores(),
                maxcpu: g.maxcpu,
                mem: g.mem_footprint(),
                maxmem: g.maxmem,
            })
            .sum();
        let subject = sim.subject(&unit.members, unit.group.as_deref());
        let ctx =
            filter.then(|| Ctx::new(cluster, sim.rules, state, sim.placer.options(), &subject));
        for &to in scorable.iter().filter(|&&t| t != from) {
            if ctx.as_ref().is_none_or(|ctx| sim.placer.feasible(ctx, to)) {
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
fn allowed(sim: &Draft, unit: UnitId, to: NodeIdx) -> bool {
    let u = sim.units.get(unit);
    let subject = sim.subject(&u.members, u.group.as_deref());
    sim.feasible(&subject, to)
}

/// How Proxmox ranks the candidate moves: its two auto-rebalance methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ranking {
    /// `bruteforce`: by the imbalance each move leaves.
    Bruteforce,
    /// `topsis`: TOPSIS over every move.
    Topsis,
}

impl Ranking {
    /// The ranking of a Proxmox method; other methods are refused, not ranked as bruteforce.
    fn of(method: MethodName) -> Result<Self> {
        if method == pve_bruteforce::NAME {
            Ok(Self::Bruteforce)
        } else if method == pve_topsis::NAME {
            Ok(Self::Topsis)
        } else {
            Err(crate::Error::Option {
                name: "method".into(),
                message: format!(
                    "{method} is not one of Proxmox's methods ({}, {})",
                    pve_bruteforce::NAME,
                    pve_topsis::NAME
                ),
            })
        }
    }

    /// The method's name, as plans report it.
    fn name(self) -> &'static str {
        match self {
            Self::Bruteforce => pve_bruteforce::NAME.as_str(),
            Self::Topsis => pve_topsis::NAME.as_str(),
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

/// Every move Proxmox's method would consider on this state, ranked best first; `options.method`
/// must be `pve-bruteforce` or `pve-topsis`.
pub fn rank_moves(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    placer: &Placer,
    options: &BalanceOptions,
) -> Result<Vec<PveMove>> {
    let ranking = Ranking::of(options.method)?;
    let sim = new_sim(cluster, rules, state, placer, options);
    let c = candidates(&sim, true);
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
    let mut sim = Draft::new(
        cluster,
        rules,
        placer,
        state,
        measure.load_kind(Metric::Memory),
        measure,
        options.cooldown_secs,
        options.max_migrations,
    );
    sim.restart_containers = options.restart_containers;
    sim
}

/// Proxmox judges by its CV; a spread setting means the normalised CV with its default threshold.
fn pve_measure(options: &BalanceOptions) -> Measure {
    match options.measure {
        Measure::Spread => Measure::Cv,
        m => m,
    }
}

/// One round of Proxmox's balancing as a plan of at most one move (one bundle).
pub(crate) fn plan(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    placer: &Placer,
    options: &BalanceOptions,
    ranking: Ranking,
) -> Result<Plan> {
    let measure = pve_measure(options);
    let threshold = match options.measure {
        Measure::Spread => measure.default_threshold(),
        m => options.trigger.threshold_for(m),
    };
    let mut sim = new_sim(cluster, rules, state, placer, options);
    // TOPSIS judges each move against all the others, so its candidate set must be exactly the
    // allowed moves; bruteforce scores each move alone, so it may rank all and check filters
    // only down the ranking until one passes.
    let lazy = ranking == Ranking::Bruteforce;
    let c = candidates(&sim, !lazy);
    let n = c.nodes.len();
    let now = Imbalance::of_nodes(&c.nodes)?;
    let scale = |normalized: f64| match measure {
        Measure::CvRaw => Imbalance::raw_from_normalized(normalized, n),
        _ => normalized,
    };
    let value = scale(now.normalized);
    let method = ranking.name();
    let summary;
    if value <= threshold {
        summary = format!("cv {value:.3} is within the threshold {threshold}: no move");
    } else {
        let mut ranked = rank(&c, ranking)?;
        if lazy {
            if let Some(pos) = ranked
                .iter()
                .position(|(i, _)| c.units.get(*i).is_some_and(|&(u, to)| allowed(&sim, u, to)))
            {
                ranked.drain(..pos);
            } else {
                ranked.clear();
            }
        }
        match ranked.first() {
            Some((i, best)) if *i < c.units.len() => {
                let after = scale(best.imbalance);
                let relative = (value - after) / value;
                let (unit, to) = c.units[*i];
                let members = sim.units.get(unit).members.clone();
                if relative < options.trigger.margin {
                    summary = format!(
                        "the best move ({} to {}) would change cv {value:.3} → {after:.3} ({:.0} %), less than the {:.0} % margin: no move",
                        best.sid,
                        best.to,
                        100.0 * relative,
                        100.0 * options.trigger.margin
                    );
                } else if members.len() > sim.budget_left() {
                    summary =
                        "the best move needs more migrations than the budget allows".to_owned();
                } else {
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
                    let group = sim.units.get(unit).group.clone();
                    sim.apply(&members, to, Purpose::Balance, &why, group.as_deref());
                    summary = format!(
                        "{method}: move {} from {} to {}: cv {value:.3} → {after:.3}",
                        best.sid, best.from, best.to
                    );
                }
            }
            _ => {
                summary = format!(
                    "cv {value:.3} is above the threshold {threshold}, but no bundle can move"
                )
            }
        }
    }
    let mut plan = finish(sim, state, method, Metric::Memory, threshold, threshold);
    plan.summary = summary;
    Ok(plan)
}

/// Repeats Proxmox's one-move round on the state each move leaves, until it makes no move or
/// `max_rounds` rounds ran: the sequence Proxmox would carry out over that many balancing rounds.
/// Guests may move more than once, as Proxmox keeps no memory between rounds. `options.method`
/// must be `pve-bruteforce` or `pve-topsis`.
pub fn run_until_stable(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    placer: &Placer,
    options: &BalanceOptions,
    max_rounds: usize,
) -> Result<(State, Vec<Migration>)> {
    let ranking = Ranking::of(options.method)?;
    let mut s = state.clone();
    let mut all = Vec::new();
    for _ in 0..max_rounds {
        let p = plan(cluster, rules, &s, placer, options, ranking)?;
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
                    .cores(2.0, 1.0)
                    .mem(8 * GIB, 8 * GIB)
                    .tagged("flxp.affinity.db"),
            )
            .guest(
                vm(1000, "a")
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
        let moves = rank_moves(&c, &rules, &s, &p, &o).unwrap();
        assert_eq!(moves.len(), 1, "{moves:?}");
        assert_eq!(
            (moves[0].sid.as_str(), moves[0].to.as_str()),
            ("vm:1000", "b")
        );
        let plan = plan(&c, &rules, &s, &p, &o, Ranking::Bruteforce).unwrap();
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
}
