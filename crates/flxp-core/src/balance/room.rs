//! Making room: when a guest must move (a rule or maintenance) but fits nowhere, move a few other
//! guests off a node that lacks only memory for it, then move it there. This is how a plan orders
//! a move that makes room before the move that needs it.
//!
//! Evictions are ordinary safe moves (filters on the current state, balance cooldown respected,
//! never a guest of a bundle or one that moved already), tried on a copy of the state first:
//! nothing is applied unless the guest then fits. The smallest guest that frees enough is taken,
//! else the largest ones up to the limit, so as few bytes as possible are copied.

use crate::Result;
use crate::cluster::{GuestIdx, NodeIdx};
use crate::placement::Reason;
use crate::units::fmt_bytes;

use super::draft::{Draft, Step};
use super::explain::target_phrase;
use super::movable::Intent;
use super::plan::Purpose;
use super::units::UnitId;

/// Moves up to `limit` guests off a node that lacks only memory for the problem, then the
/// problem there. Tried on a copy of the state first; nothing is applied unless the fix fits.
pub(super) fn make_room(
    draft: &mut Draft,
    unit: UnitId,
    members: &[GuestIdx],
    purpose: Purpose,
    limit: usize,
    verb: &str,
) -> Result<bool> {
    let label = draft.units.get(unit).group.clone();
    let subject = draft.subject(members, label.as_deref());
    let from = draft.state.location(members[0]);
    let ctx = draft.ctx(&subject);
    let mut short: Vec<(u64, NodeIdx)> = Vec::new();
    for t in draft.cluster.node_indexes().filter(|&t| t != from) {
        let fails = draft.placer.failures(&ctx, t);
        if let [
            (
                _,
                _,
                Reason::InsufficientMemory {
                    need, available, ..
                },
            ),
        ] = fails.as_slice()
        {
            short.push((need - available, t));
        }
    }
    short.sort();
    for (deficit, t) in short.into_iter().take(4) {
        let mut evictable: Vec<GuestIdx> = draft
            .cluster
            .guests_on(t)
            .iter()
            .copied()
            .filter(|&g| draft.state.location(g) == t && draft.cluster.guest(g).running)
            .filter(|&g| {
                let u = draft.units.of(g);
                !draft.units.get(u).is_bundle()
                    && !members.contains(&g)
                    && !draft.unit_moved(u)
                    && draft.unit_stays(u, Intent::Balance).is_none()
            })
            .collect();
        evictable.sort_by_key(|&g| {
            (
                draft.cluster.guest(g).mem_footprint(),
                draft.cluster.guest(g).vmid,
            )
        });
        evictable.dedup();
        let size = |g: GuestIdx| draft.cluster.guest(g).mem_footprint();
        let chosen: Vec<GuestIdx> = match evictable.iter().find(|&&g| size(g) >= deficit) {
            Some(&g) => vec![g],
            None => {
                let mut acc = 0u64;
                let mut v = Vec::new();
                for &g in evictable.iter().rev().take(limit) {
                    v.push(g);
                    acc += size(g);
                    if acc >= deficit {
                        break;
                    }
                }
                if acc < deficit {
                    continue;
                }
                v
            }
        };
        if chosen.len() > limit || chosen.len() + members.len() > draft.budget_left() {
            continue;
        }
        // Try it on a copy.
        let saved = draft.state.clone();
        let mut moves: Vec<(GuestIdx, NodeIdx, String)> = Vec::new();
        let mut ok = true;
        for &g in &chosen {
            let s = draft.subject(&[g], None);
            let ranked = draft.ranked_targets(&s, &[t])?;
            match ranked.first() {
                Some(best) => {
                    let phrase = target_phrase(draft.cluster, draft.target_policy_name(), &ranked);
                    moves.push((g, best.node, phrase));
                    draft.state.move_guest(draft.cluster, g, best.node);
                }
                None => {
                    ok = false;
                    break;
                }
            }
        }
        let fits = ok && draft.feasible(&subject, t);
        draft.state = saved;
        if !fits {
            continue;
        }
        let target = draft.cluster.node(t).name.clone();
        for (g, to, phrase) in moves {
            let reason = format!(
                "{}make room on {target} for {}: it lacks {}; {phrase}",
                draft.return_words(&[g], to),
                subject.label,
                fmt_bytes(deficit)
            );
            draft.apply(&[g], to, Purpose::MakeRoom, &reason, None, Step::New);
        }
        let reason = format!(
            "{}{verb}; {target} has room once {} guest(s) moved off",
            draft.return_words(members, t),
            chosen.len()
        );
        draft.apply(members, t, purpose, &reason, label.as_deref(), Step::New);
        return Ok(true);
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::testutil::*;

    #[test]
    fn the_largest_guests_make_room_up_to_the_limit() {
        // 105 (10 GiB) must go to a, which has 2 GiB free: no single guest there frees 8 GiB, the
        // two largest (5 + 4) do.
        let c = ClusterBuilder::new()
            .node(node("a").memory(32 * GIB))
            .node(node("b").memory(64 * GIB))
            .guest(vm(101, "a").mem(5 * GIB, 5 * GIB))
            .guest(vm(102, "a").mem(4 * GIB, 4 * GIB))
            .guest(vm(103, "a").mem(3 * GIB, 3 * GIB))
            .guest(vm(104, "a").mem(18 * GIB, 18 * GIB).tagged("flxp.ignore"))
            .guest(vm(105, "b").mem(10 * GIB, 10 * GIB).tagged("flxp.node.a"))
            .build();
        let g = c.guest_idx(105).unwrap();
        for (limit, want) in [(1, vec![]), (2, vec![101, 102, 105])] {
            with_draft(&c, 10, |draft, state| {
                let unit = draft.units.of(g);
                let done =
                    make_room(draft, unit, &[g], Purpose::Fix, limit, "fix flxp.node").unwrap();
                let moved: Vec<u32> = draft.migrations.iter().map(|m| m.vmid).collect();
                assert_eq!((done, moved), (!want.is_empty(), want), "limit {limit}");
                if !done {
                    assert_eq!(&draft.state, state, "nothing is applied when it fails");
                }
            });
        }
    }
}
