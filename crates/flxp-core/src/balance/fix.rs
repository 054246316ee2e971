//! Hard rules first: guests where they may not be are moved before any balancing.
//!
//! Found on the current state of the plan, in this order: guests on nodes their node rules or
//! selectors refuse (the most constrained, so they get room first), affinity groups split over
//! nodes, anti-affinity groups crowded on a node, then guests on nodes in maintenance, largest
//! first. Each goes to the node the placement pipeline ranks best among those its filters accept
//! on that state, so a fix never creates a new violation. A guest that fits nowhere may get room
//! made for it by moving up to `make_room` other guests off a node it could then take; a fix
//! that still cannot be placed is reported with every node's reason, and nothing else moves
//! because of it.

use std::collections::BTreeMap;

use crate::Result;
use crate::Warning;
use crate::cluster::{GuestIdx, NodeIdx};
use crate::units::fmt_bytes;

use super::draft::Draft;
use super::explain::target_phrase;
use super::movable::Intent;
use super::plan::Purpose;
use super::problems::{Problem, detect};
use super::room;
use super::units::UnitId;

/// Which broken rules to fix.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scope {
    /// Only guests on these nodes (evacuation); `None` fixes everything.
    pub only_nodes: Option<Vec<NodeIdx>>,
    /// Move stopped guests off nodes in maintenance.
    pub stopped_off_maintenance: bool,
    /// Guests other guests may be moved for (0: none).
    pub make_room: usize,
}

/// Fixes what can be fixed, in order, within the budget; records what cannot.
pub(crate) fn fix_all(sim: &mut Draft, scope: &Scope) -> Result<()> {
    // With a scope, only units with a member on its nodes can have a problem there; nothing moves
    // onto those nodes (they are in maintenance), so finding them once is enough.
    let mut scoped: Option<Vec<UnitId>> = scope.only_nodes.as_ref().map(|nodes| {
        let mut v: Vec<UnitId> = sim
            .cluster
            .guest_indexes()
            .filter(|&g| nodes.contains(&sim.state.location(g)))
            .map(|g| sim.units.of(g))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    });
    // Unit → migrations planned when its fix last failed; it is retried only after progress.
    let mut failed: BTreeMap<UnitId, (usize, u32, String)> = BTreeMap::new();
    // Fixes never break a rule (every target passes the filters), so only units with a problem
    // now can have one later: after one full pass, only they are looked at again.
    if scoped.is_none() {
        let mut v: Vec<UnitId> = detect(sim, scope, None).iter().map(|p| p.unit).collect();
        v.sort_unstable();
        v.dedup();
        scoped = Some(v);
    }
    loop {
        let problems = detect(sim, scope, scoped.as_deref());
        let next = problems.into_iter().find(|p| match failed.get(&p.unit) {
            None => true,
            Some((at, tries, _)) => *tries < 3 && sim.migrations.len() > *at,
        });
        let Some(problem) = next else { break };
        if sim.budget_left() < problem.members.len() {
            let left = detect(sim, scope, scoped.as_deref()).len();
            sim.warnings.push(Warning::general(format!(
                "migration budget of {} spent: {left} broken rule(s) left for the next plan",
                sim.budget
            )));
            return Ok(());
        }
        match try_fix(sim, &problem, scope)? {
            None => {
                failed.remove(&problem.unit);
            }
            Some(reason) => {
                let tries = failed.get(&problem.unit).map_or(0, |f| f.1) + 1;
                failed.insert(problem.unit, (sim.migrations.len(), tries, reason));
            }
        }
    }
    let still: Vec<Problem> = detect(sim, scope, scoped.as_deref());
    for p in still {
        if let Some((_, _, reason)) = failed.get(&p.unit) {
            let reason = reason.clone();
            sim.unplaced(&p.members, &p.rule, &reason);
        }
    }
    Ok(())
}

/// Fixes one problem; `Some(why not)` when nothing fits.
fn try_fix(sim: &mut Draft, p: &Problem, scope: &Scope) -> Result<Option<String>> {
    if p.split {
        return join(sim, p);
    }
    let label = sim.units.get(p.unit).group.clone();
    let subject = sim.subject(&p.members, label.as_deref());
    let from = sim.state.location(p.members[0]);
    let ranked = sim.ranked_targets(&subject, &[from])?;
    let stopped = p.members.len() == 1 && !sim.cluster.guest(p.members[0]).running;
    let prefix = if stopped {
        "offline migration (guest is stopped): "
    } else {
        ""
    };
    let what = match (&label, p.purpose) {
        (Some(g), _) => format!("group {g} moves together; "),
        (None, _) => String::new(),
    };
    let verb = match p.purpose {
        Purpose::Evacuate => format!("evacuate: {}", p.why),
        _ => format!("fix {}: {}", p.rule, p.why),
    };
    if let Some(best) = ranked.first() {
        let to = best.node;
        let reason = format!(
            "{prefix}{verb}; {what}{}",
            target_phrase(sim.cluster, sim.target_policy_name(), &ranked)
        );
        sim.apply(&p.members, to, p.purpose, &reason, label.as_deref());
        return Ok(None);
    }
    if scope.make_room > 0
        && room::make_room(
            sim,
            p.unit,
            &p.members,
            p.purpose,
            scope.make_room,
            &format!("{prefix}{verb}"),
        )?
    {
        return Ok(None);
    }
    Ok(Some(sim.why_nowhere(&subject, &[from])))
}

/// Brings a split affinity group together on the node that needs the fewest bytes moved.
fn join(sim: &mut Draft, p: &Problem) -> Result<Option<String>> {
    let label = sim.units.get(p.unit).group.clone();
    let mut best: Option<(u64, usize, NodeIdx, Vec<GuestIdx>)> = None;
    for t in sim.cluster.node_indexes() {
        let mut moving: Vec<GuestIdx> = p
            .members
            .iter()
            .copied()
            .filter(|&m| sim.state.location(m) != t)
            .collect();
        if moving.is_empty()
            || moving
                .iter()
                .any(|&m| sim.unit_stays(sim.units.of(m), Intent::Fix).is_some())
        {
            continue;
        }
        moving.sort_by_key(|&m| {
            (
                std::cmp::Reverse(sim.cluster.guest(m).mem_footprint()),
                sim.cluster.guest(m).vmid,
            )
        });
        let subject = sim.subject(&moving, label.as_deref());
        if !sim.feasible(&subject, t) {
            continue;
        }
        let key = (sim.bytes(&moving), moving.len(), t);
        if best
            .as_ref()
            .is_none_or(|b| (key.0, key.1, key.2) < (b.0, b.1, b.2))
        {
            best = Some((key.0, key.1, key.2, moving));
        }
    }
    match best {
        Some((bytes, _, t, moving)) => {
            let reason = format!(
                "fix {}: {}; {} needs the fewest bytes moved ({})",
                p.rule,
                p.why,
                sim.cluster.node(t).name,
                fmt_bytes(bytes)
            );
            sim.apply(&moving, t, Purpose::Fix, &reason, label.as_deref());
            Ok(None)
        }
        None => {
            let subject = sim.subject(&p.members, label.as_deref());
            Ok(Some(format!(
                "no node can take the whole group: {}",
                sim.why_nowhere(&subject, &[])
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::balance::measure::{LoadKind, Measure};
    use crate::placement::{PlacementOptions, Placer};
    use crate::testutil::*;
    use crate::{Cluster, Rules, State};

    fn fixes(c: &Cluster, budget: usize) -> (Vec<(u32, String, Purpose)>, Vec<String>) {
        let rules = Rules::compile(c);
        let placer = Placer::new(PlacementOptions::default(), Vec::new()).unwrap();
        let state = State::new(c);
        let mut sim = Draft::new(
            c,
            &rules,
            &placer,
            &state,
            LoadKind::Memory,
            Measure::Spread,
            0,
            budget,
        );
        fix_all(
            &mut sim,
            &Scope {
                stopped_off_maintenance: true,
                make_room: 0,
                ..Scope::default()
            },
        )
        .unwrap();
        let moves = sim
            .migrations
            .iter()
            .map(|m| (m.vmid, m.to.clone(), m.purpose))
            .collect();
        let notes = sim
            .skipped
            .iter()
            .map(|s| format!("{}: {}", s.vmid, s.reason))
            .collect();
        (moves, notes)
    }

    #[test]
    fn pinned_guests_go_first_then_groups_then_maintenance_largest_first() {
        let c = ClusterBuilder::new()
            .node(node("a").notes("flxp.maintenance"))
            .node(node("b"))
            .node(node("c"))
            .guest(vm(101, "a").mem(2 * GIB, 4 * GIB))
            .guest(vm(102, "a").mem(6 * GIB, 8 * GIB))
            .guest(
                vm(103, "b")
                    .mem(GIB, 2 * GIB)
                    .tagged("flxp.anti-affinity.x"),
            )
            .guest(
                vm(104, "b")
                    .mem(3 * GIB, 4 * GIB)
                    .tagged("flxp.anti-affinity.x"),
            )
            .guest(vm(105, "c").mem(GIB, 2 * GIB).tagged("flxp.node.b"))
            .build();
        let (moves, _) = fixes(&c, 10);
        let got: Vec<(u32, &str, Purpose)> =
            moves.iter().map(|(v, n, p)| (*v, n.as_str(), *p)).collect();
        assert_eq!(
            got,
            vec![
                (105, "b", Purpose::Fix),
                // 104 is the larger member: it stays, 103 leaves.
                (103, "c", Purpose::Fix),
                (102, "c", Purpose::Evacuate),
                (101, "b", Purpose::Evacuate),
            ]
        );
    }

    #[test]
    fn the_member_that_may_not_move_keeps_its_place_in_a_crowd() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b"])
            .guest(
                vm(101, "a")
                    .mem(8 * GIB, 8 * GIB)
                    .tagged("flxp.anti-affinity.x"),
            )
            .guest(
                vm(102, "a")
                    .mem(GIB, GIB)
                    .tagged("flxp.anti-affinity.x")
                    .locked("backup"),
            )
            .build();
        let (moves, notes) = fixes(&c, 10);
        assert_eq!(moves, vec![(101, "b".to_owned(), Purpose::Fix)]);
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn the_budget_stops_fixing_and_says_how_much_is_left() {
        let c = ClusterBuilder::new()
            .node(node("a").notes("flxp.maintenance"))
            .node(node("b"))
            .guest(vm(101, "a"))
            .guest(vm(102, "a"))
            .guest(vm(103, "a"))
            .build();
        let rules = Rules::compile(&c);
        let placer = Placer::new(PlacementOptions::default(), Vec::new()).unwrap();
        let state = State::new(&c);
        let mut sim = Draft::new(
            &c,
            &rules,
            &placer,
            &state,
            LoadKind::Memory,
            Measure::Spread,
            0,
            1,
        );
        fix_all(&mut sim, &Scope::default()).unwrap();
        assert_eq!(sim.migrations.len(), 1);
        assert_eq!(
            sim.warnings[0].to_string(),
            "migration budget of 1 spent: 2 broken rule(s) left for the next plan"
        );
    }
}
