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
use crate::cluster::{GuestIdx, NodeIdx};
use crate::placement::Reason;
use crate::units::fmt_bytes;
use crate::warning::{Warning, WarningKind};

use super::draft::{Draft, Step};
use super::explain::{shortlist_phrase, target_phrase};
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

/// Most tries of a unit whose fix fails (each after later moves changed the state).
const MAX_TRIES: u32 = 3;

/// A unit whose fix failed: when, how often, and why.
struct Failed {
    /// Migrations planned when it last failed; it is retried only after more.
    at: usize,
    /// Tries so far ([`MAX_TRIES`] once no move can help).
    tries: u32,
    /// Why it fits nowhere.
    reason: String,
}

/// Fixes what can be fixed, in order, within the budget; records what cannot.
///
/// Linear in the problems for a given budget: they are detected again only after a fix moved
/// something (a failed try changes nothing, so the rest of the list still holds), and then
/// without the units out of tries; a unit that fits nowhere is retried at most [`MAX_TRIES`]
/// times, only after moves, and never when rules no move changes (node rules, labels, taints,
/// offline or maintenance nodes) refuse every node.
pub(crate) fn fix_all(draft: &mut Draft, scope: &Scope) -> Result<()> {
    // With a scope, only units with a member on its nodes can have a problem there; nothing moves
    // onto those nodes (they are in maintenance), so finding them once is enough.
    let mut scoped: Option<Vec<UnitId>> = scope.only_nodes.as_ref().map(|nodes| {
        let mut v: Vec<UnitId> = draft
            .cluster
            .guest_indexes()
            .filter(|&g| nodes.contains(&draft.state.location(g)))
            .map(|g| draft.units.of(g))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    });
    let mut failed: BTreeMap<UnitId, Failed> = BTreeMap::new();
    'detect: loop {
        let problems = detect(draft, scope, scoped.as_deref());
        // Fixes never break a rule (every target passes the filters), so only units with a
        // problem now can have one later: only they are looked at again, except those out of
        // tries (they are not tried again; the last detection below looks at them).
        scoped =
            Some(units(problems.iter().map(|p| p.unit).filter(|u| {
                failed.get(u).is_none_or(|f| f.tries < MAX_TRIES)
            })));
        let planned = draft.migrations.len();
        for problem in problems {
            let eligible = failed
                .get(&problem.unit)
                .is_none_or(|f| f.tries < MAX_TRIES && planned > f.at);
            if !eligible {
                continue;
            }
            if draft.budget_left() < problem.members.len() {
                let all = with_failed(scoped.as_deref(), &failed);
                let left = detect(draft, scope, Some(&all)).len();
                draft.fixes_cut = true;
                draft.warnings.push(Warning::general(format!(
                    "migration budget of {} spent: {left} broken rule(s) left for the next plan",
                    draft.budget
                ))
                .with_kind(WarningKind::BudgetSpent));
                return Ok(());
            }
            match try_fix(draft, &problem, scope)? {
                Attempt::Fixed => {
                    failed.remove(&problem.unit);
                }
                Attempt::Failed { reason, hopeless } => {
                    let tries = failed.get(&problem.unit).map_or(0, |f| f.tries) + 1;
                    let failure = Failed {
                        at: draft.migrations.len(),
                        tries: if hopeless { MAX_TRIES } else { tries },
                        reason,
                    };
                    failed.insert(problem.unit, failure);
                }
            }
            // A move changes what is broken and what fits: find the problems again. A failed
            // try moved nothing, so the rest of this list is what a new detection would give.
            if draft.migrations.len() != planned {
                continue 'detect;
            }
        }
        break;
    }
    let all = with_failed(scoped.as_deref(), &failed);
    let still: Vec<Problem> = detect(draft, scope, Some(&all));
    for p in still {
        if let Some(f) = failed.get(&p.unit) {
            let reason = f.reason.clone();
            draft.unplaced(&p.members, &p.rule, &reason);
        }
    }
    Ok(())
}

/// Units sorted, once each.
fn units(it: impl Iterator<Item = UnitId>) -> Vec<UnitId> {
    let mut v: Vec<UnitId> = it.collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The units still looked at plus every unit whose fix failed: all that can have a problem.
fn with_failed(scoped: Option<&[UnitId]>, failed: &BTreeMap<UnitId, Failed>) -> Vec<UnitId> {
    units(
        scoped
            .unwrap_or_default()
            .iter()
            .copied()
            .chain(failed.keys().copied()),
    )
}

/// How one fix went.
enum Attempt {
    /// Moved.
    Fixed,
    /// Fits nowhere, with why; `hopeless` when no move of this plan can change that.
    Failed { reason: String, hopeless: bool },
}

/// Whether a reason a node refuses a subject stays true whatever the plan moves: the node's
/// status, maintenance, CPU count, labels and taints, and the subject's node rules.
fn refusal_is_fixed(reason: &Reason) -> bool {
    matches!(
        reason,
        Reason::NotOnline { .. }
            | Reason::HaNotOnline { .. }
            | Reason::Maintenance { .. }
            | Reason::BeingFreed
            | Reason::CurrentNode
            | Reason::TooManyCores { .. }
            | Reason::NodeRules { .. }
            | Reason::MissingLabels { .. }
            | Reason::Tainted { .. }
    )
}

/// Fixes one problem, or says why nothing fits.
fn try_fix(draft: &mut Draft, p: &Problem, scope: &Scope) -> Result<Attempt> {
    #[cfg(test)]
    work::add(&work::TRIED, 1);
    if p.split {
        return Ok(match join(draft, p)? {
            None => Attempt::Fixed,
            Some(reason) => Attempt::Failed {
                reason,
                hopeless: false,
            },
        });
    }
    let label = draft.units.get(p.unit).group.clone();
    let subject = draft.subject(&p.members, label.as_deref());
    let from = draft.state.location(p.members[0]);
    let (ranked, cut) = draft.pick_targets(&subject, &[from])?;
    let stopped = p.members.len() == 1 && !draft.cluster.guest(p.members[0]).running;
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
        // A node a consolidation frees is not in maintenance: the step says which it is.
        Purpose::Evacuate if draft.cluster.node(from).is_being_freed() => {
            format!("consolidate: {}", p.why)
        }
        Purpose::Evacuate => format!("evacuate: {}", p.why),
        _ => format!("fix {}: {}", p.rule, p.why),
    };
    if let Some(best) = ranked.first() {
        let to = best.node;
        // The return hold binds balancing only: a fix may take a guest back, and says so.
        let back = draft.return_words(&p.members, to);
        let policy = draft.target_policy_name();
        let target = if cut {
            shortlist_phrase(draft.cluster, policy, &ranked)
        } else {
            target_phrase(draft.cluster, policy, &ranked)
        };
        let reason = format!("{prefix}{back}{verb}; {what}{target}");
        draft.apply(
            &p.members,
            to,
            p.purpose,
            &reason,
            label.as_deref(),
            Step::New,
        );
        return Ok(Attempt::Fixed);
    }
    // No move in this plan can open a node that such a rule refuses, nor make room there.
    let hopeless = draft.refused_by_fixed_rules(&subject, &[from], refusal_is_fixed);
    if !hopeless
        && scope.make_room > 0
        && room::make_room(
            draft,
            p.unit,
            &p.members,
            p.purpose,
            scope.make_room,
            &format!("{prefix}{verb}"),
        )?
    {
        return Ok(Attempt::Fixed);
    }
    Ok(Attempt::Failed {
        reason: draft.why_nowhere(&subject, &[from]),
        hopeless,
    })
}

/// Brings a split affinity group together on the node that needs the fewest bytes moved.
fn join(draft: &mut Draft, p: &Problem) -> Result<Option<String>> {
    let label = draft.units.get(p.unit).group.clone();
    let mut best: Option<(u64, usize, NodeIdx, Vec<GuestIdx>)> = None;
    for t in draft.cluster.node_indexes() {
        let mut moving: Vec<GuestIdx> = p
            .members
            .iter()
            .copied()
            .filter(|&m| draft.state.location(m) != t)
            .collect();
        if moving.is_empty()
            || moving
                .iter()
                .any(|&m| draft.unit_stays(draft.units.of(m), Intent::Fix).is_some())
        {
            continue;
        }
        moving.sort_by_key(|&m| {
            (
                std::cmp::Reverse(draft.cluster.guest(m).mem_footprint()),
                draft.cluster.guest(m).vmid,
            )
        });
        let subject = draft.subject(&moving, label.as_deref());
        if !draft.feasible(&subject, t) {
            continue;
        }
        let key = (draft.bytes(&moving), moving.len(), t);
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
                "{}fix {}: {}; {} needs the fewest bytes moved ({})",
                draft.return_words(&moving, t),
                p.rule,
                p.why,
                draft.cluster.node(t).name,
                fmt_bytes(bytes)
            );
            draft.apply(
                &moving,
                t,
                Purpose::Fix,
                &reason,
                label.as_deref(),
                Step::New,
            );
            Ok(None)
        }
        None => {
            let subject = draft.subject(&p.members, label.as_deref());
            Ok(Some(format!(
                "no node can take the whole group: {}",
                draft.why_nowhere(&subject, &[])
            )))
        }
    }
}

/// Work done on this thread, counted so tests can check how it grows instead of timing it.
#[cfg(test)]
pub(super) mod work {
    use std::cell::Cell;
    use std::thread::LocalKey;

    thread_local! {
        /// Units looked at by problem detection, summed over detections.
        pub static DETECTED: Cell<usize> = const { Cell::new(0) };
        /// Fixes tried.
        pub static TRIED: Cell<usize> = const { Cell::new(0) };
    }

    /// Adds to a counter.
    pub fn add(counter: &'static LocalKey<Cell<usize>>, n: usize) {
        counter.with(|c| c.set(c.get() + n));
    }

    /// Reads a counter and sets it to zero.
    pub fn take(counter: &'static LocalKey<Cell<usize>>) -> usize {
        counter.with(|c| c.replace(0))
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::Cluster;
    use crate::testutil::*;

    fn fixes(c: &Cluster, budget: usize) -> (Vec<(u32, String, Purpose)>, Vec<String>) {
        with_draft(c, budget, |draft, _| {
            fix_all(
                draft,
                &Scope {
                    stopped_off_maintenance: true,
                    make_room: 0,
                    ..Scope::default()
                },
            )
            .unwrap();
            let moves = draft
                .migrations
                .iter()
                .map(|m| (m.vmid, m.to.clone(), m.purpose))
                .collect();
            let notes = draft
                .skipped
                .iter()
                .map(|s| format!("{}: {}", s.vmid, s.reason))
                .collect();
            (moves, notes)
        })
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
        with_draft(&c, 1, |draft, _| {
            fix_all(draft, &Scope::default()).unwrap();
            assert_eq!(draft.migrations.len(), 1);
            assert_eq!(
                draft.warnings[0].to_string(),
                "migration budget of 1 spent: 2 broken rule(s) left for the next plan"
            );
        });
    }

    /// `n` guests pinned by `flxp.node.gone` to a node that does not exist, on 16 nodes, and
    /// `fixable` guests on n01 pinned to n00.
    fn unsatisfiable(n: u32, fixable: u32) -> Cluster {
        let mut b = ClusterBuilder::new();
        for i in 0..16 {
            b = b.node(node(&format!("n{i:02}")).memory(1024 * GIB));
        }
        for k in 0..n {
            b = b.guest(
                vm(1000 + k, &format!("n{:02}", k % 16))
                    .mem(GIB / 8, GIB / 4)
                    .tagged("flxp.node.gone"),
            );
        }
        for k in 0..fixable {
            b = b.guest(vm(100_000 + k, "n01").mem(GIB, GIB).tagged("flxp.node.n00"));
        }
        b.build()
    }

    /// Fixes with a budget of 20: (units detection looked at, fixes tried, moves, unplaced).
    fn work(c: &Cluster) -> (usize, usize, usize, usize) {
        work::take(&work::DETECTED);
        work::take(&work::TRIED);
        with_draft(c, 20, |draft, _| {
            fix_all(draft, &Scope::default()).unwrap();
            (
                work::take(&work::DETECTED),
                work::take(&work::TRIED),
                draft.migrations.len(),
                draft.unplaced.len(),
            )
        })
    }

    #[test]
    fn an_unsatisfiable_rule_costs_one_try_per_guest_and_linear_work() {
        let (d1, t1, m1, u1) = work(&unsatisfiable(400, 5));
        let (d2, t2, m2, u2) = work(&unsatisfiable(800, 5));
        assert_eq!((m1, u1, m2, u2), (5, 400, 5, 800));
        // Every unfixable guest is tried once, every fixable one once.
        assert_eq!((t1, t2), (405, 805));
        // Twice the guests, twice the detection work (not four times).
        assert!(
            d2 <= 2 * d1 + 100,
            "detection work {d1} at 400 guests, {d2} at 800"
        );
    }

    #[test]
    fn a_guest_short_of_memory_is_tried_again_after_a_move_makes_room() {
        // 102 must leave a (maintenance) but b is full until 101 leaves b for its pin to c.
        let c = ClusterBuilder::new()
            .node(node("a").notes("flxp.maintenance").memory(64 * GIB))
            .node(node("b").memory(32 * GIB))
            .node(node("c").memory(32 * GIB))
            .guest(vm(101, "b").mem(20 * GIB, 20 * GIB).tagged("flxp.node.c"))
            .guest(vm(102, "a").mem(14 * GIB, 14 * GIB).tagged("flxp.node.b"))
            .build();
        let (moves, notes) = fixes(&c, 10);
        let got: Vec<(u32, &str)> = moves.iter().map(|(v, n, _)| (*v, n.as_str())).collect();
        assert_eq!(got, vec![(101, "c"), (102, "b")], "{notes:?}");
    }
}
