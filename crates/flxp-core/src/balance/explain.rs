//! Words for plans: why a target was chosen, why no node fits (every node's failed filters,
//! condensed), and what a step changes.

use std::collections::BTreeMap;

use crate::cluster::{Cluster, GuestKind, NodeIdx};
use crate::placement::{Ctx, Placer, Ranked};

use super::draft::Draft;
use super::movable::{Intent, Stay, StayKind, stays_for};
use super::plan::LeftInPlace;

/// Why the first ranked node won, e.g. `pve3 ranks first of 4 feasible nodes under policy
/// free-memory (score 100.0, next 81.2)`: the policy and the scores, since soft rules may have
/// decided as much as the resource scorer.
pub(crate) fn target_phrase(cluster: &Cluster, policy: &str, ranked: &[Ranked]) -> String {
    let Some(best) = ranked.first() else {
        return String::new();
    };
    let name = &cluster.node(best.node).name;
    match ranked.get(1) {
        None => format!("{name} is the only feasible node"),
        Some(next) => format!(
            "{name} ranks first of {} feasible nodes under policy {policy} (score {:.1}, next {:.1})",
            ranked.len(),
            best.score,
            next.score
        ),
    }
}

/// [`target_phrase`] for a pick among the first few least loaded nodes that take the subject
/// (the others were not ranked).
pub(crate) fn shortlist_phrase(cluster: &Cluster, policy: &str, ranked: &[Ranked]) -> String {
    let (Some(best), Some(next)) = (ranked.first(), ranked.get(1)) else {
        return target_phrase(cluster, policy, ranked);
    };
    format!(
        "{} ranks first under policy {policy} of the {} least loaded nodes that can take it \
         (score {:.1}, next {:.1})",
        cluster.node(best.node).name,
        ranked.len(),
        best.score,
        next.score
    )
}

/// Every node's failed filters for a subject, condensed: nodes failing the same filters are listed
/// together, with the first node's reasons as an example.
///
/// `pve2, pve3: memory (e.g. pve2: needs 8.0 GiB but 3.1 GiB is available ...); pve4: memory
/// (...), anti-affinity (...)`.
pub(crate) fn condensed_failures(
    ctx: &Ctx,
    placer: &Placer,
    nodes: impl Iterator<Item = NodeIdx>,
) -> String {
    // Keyed by the failing filters in pipeline order, so groups come out most basic first.
    let order: Vec<&'static str> = placer.filters().map(|f| f.name()).collect();
    // Each failed filter's name, words, and whether the words read alone.
    type Fails = Vec<(&'static str, String, bool)>;
    // A filter's place in the pipeline, and whether its words read alone.
    type Key = Vec<(usize, bool)>;
    let mut groups: BTreeMap<Key, Vec<(NodeIdx, Fails)>> = BTreeMap::new();
    for n in nodes {
        let fails: Fails = placer
            .failures(ctx, n)
            .into_iter()
            .map(|(name, _, reason)| (name, reason.to_string(), reason.reads_alone()))
            .collect();
        if fails.is_empty() {
            continue;
        }
        let key: Key = fails
            .iter()
            .map(|(name, _, alone)| {
                let at = order.iter().position(|o| o == name).unwrap_or(usize::MAX);
                (at, *alone)
            })
            .collect();
        groups.entry(key).or_default().push((n, fails));
    }
    if groups.is_empty() {
        return "no other node in the cluster".to_owned();
    }
    let parts: Vec<String> = groups
        .into_values()
        .map(|nodes| {
            let names: Vec<&str> = nodes
                .iter()
                .map(|(n, _)| ctx.cluster.node(*n).name.as_str())
                .collect();
            let shown = if names.len() > 6 {
                format!("{} and {} more", names[..5].join(", "), names.len() - 5)
            } else {
                names.join(", ")
            };
            let fails = &nodes[0].1;
            let example = if nodes.len() == 1 { "" } else { "e.g. " };
            let reasons: Vec<String> = fails
                .iter()
                .enumerate()
                .map(|(i, (filter, reason, alone))| {
                    if *alone {
                        reason.clone()
                    } else if i == 0 && nodes.len() > 1 {
                        format!("{filter} ({example}{}: {reason})", names[0])
                    } else {
                        format!("{filter} ({reason})")
                    }
                })
                .collect();
            format!("{shown}: {}", reasons.join(", "))
        })
        .collect();
    parts.join("; ")
}

/// The guests of one reason: vmids, details met (locks, rules, node states), the cooldown or the
/// return hold.
type Counted = (Vec<u32>, Vec<String>, i64);

/// Every guest the draft has not moved and that balancing may not touch, counted by reason, in
/// the order a reader needs them (HA and motion first, then locks, ..., stopped guests last).
pub(crate) fn left_in_place(draft: &Draft) -> Vec<LeftInPlace> {
    let cluster = draft.cluster;
    let mut by_kind: BTreeMap<(usize, StayKind), Counted> = BTreeMap::new();
    for g in cluster.guest_indexes() {
        if draft.has_moved(g) {
            continue;
        }
        let guest = cluster.guest(g);
        let unit = draft.units.get(draft.units.of(g));
        let stay = stays_for(
            cluster,
            draft.rules,
            g,
            Intent::Balance,
            draft.cooldown_secs,
            draft.mover,
        )
        .or_else(|| {
            unit.conflict
                .as_ref()
                .map(|rule| Stay::Conflict { rule: rule.clone() })
        })
        .or_else(|| {
            (!draft.restart_containers && guest.running && guest.kind == GuestKind::Lxc)
                .then_some(Stay::RunningContainer)
        })
        .or_else(|| draft.held.get(&g).cloned());
        let Some(stay) = stay else {
            continue;
        };
        let kind = stay.kind();
        let entry = by_kind.entry((stay_rank(kind), kind)).or_default();
        entry.0.push(guest.vmid);
        match &stay {
            Stay::Locked { lock } if !entry.1.contains(lock) => entry.1.push(lock.clone()),
            Stay::Conflict { rule } if !entry.1.contains(rule) => entry.1.push(rule.clone()),
            Stay::NodeDown { status } if !entry.1.contains(status) => entry.1.push(status.clone()),
            Stay::Cooldown { cooldown_secs, .. } => entry.2 = *cooldown_secs,
            // Each guest's node and time are in `skipped`: the count stays one line.
            Stay::ReturnHold { hold_secs, .. } => entry.2 = *hold_secs,
            _ => {}
        }
    }
    by_kind
        .into_iter()
        .map(|((_, kind), (mut vmids, details, cooldown))| {
            vmids.sort_unstable();
            let n = vmids.len();
            LeftInPlace {
                kind,
                count: n,
                reason: stay_words(kind.as_str(), n, &details.join(", "), cooldown),
                vmids,
            }
        })
        .collect()
}

/// The counts of another plan of the same cluster, without the guests this plan moves: only a
/// guest held by the return hold (`hold_secs`) may move in one plan and not in another (its best
/// target was refused there, another taken here); the other reasons hold for every plan.
pub(crate) fn without_moved(
    left: Vec<LeftInPlace>,
    moved: &[u32],
    hold_secs: i64,
) -> Vec<LeftInPlace> {
    left.into_iter()
        .filter_map(|mut l| {
            if l.kind == StayKind::ReturnHold && l.vmids.iter().any(|v| moved.contains(v)) {
                l.vmids.retain(|v| !moved.contains(v));
                l.count = l.vmids.len();
                l.reason = stay_words(l.kind.as_str(), l.count, "", hold_secs);
            }
            (l.count > 0).then_some(l)
        })
        .collect()
}

/// A reason's order in the list.
fn stay_rank(kind: StayKind) -> usize {
    match kind {
        StayKind::HaAutoRebalance | StayKind::NotHa => 0,
        StayKind::HaEvacuates => 1,
        StayKind::Migrating => 2,
        StayKind::Cooldown => 3,
        StayKind::ReturnHold => 3,
        StayKind::Locked => 4,
        StayKind::NodeDown => 5,
        StayKind::Conflict => 6,
        StayKind::RunningContainer => 7,
        StayKind::Ignored => 8,
        StayKind::Template => 9,
        StayKind::Stopped => 10,
    }
}

/// `2 guests are locked (backup)`: one reason with its count (`cooldown`: the cooldown or the
/// return hold, seconds).
fn stay_words(kind: &str, n: usize, details: &str, cooldown: i64) -> String {
    let (guests, are) = if n == 1 {
        ("guest", "is")
    } else {
        ("guests", "are")
    };
    match kind {
        "ha-auto-rebalance" => format!(
            "{n} {guests} {are} HA-managed while Proxmox's auto-rebalance is on: left to Proxmox"
        ),
        "not-ha" => format!(
            "{n} {guests} {are} not HA-managed: Proxmox's auto-rebalance moves only HA resources"
        ),
        "ha-evacuates" => format!(
            "{n} {guests} {are} HA-managed on a node in HA maintenance: Proxmox HA moves them"
        ),
        "migrating" => format!("{n} {guests} {are} migrating"),
        "cooldown" => format!("{n} {guests} migrated within the {cooldown} s cooldown"),
        "return-hold" => format!(
            "{n} {guests} would return to a node {} left within the {} return hold",
            if n == 1 { "it" } else { "they" },
            crate::units::fmt_secs(cooldown)
        ),
        "locked" => format!("{n} {guests} {are} locked ({details})"),
        "node-down" => format!("{n} {guests} {are} on a node that is not online ({details})"),
        "conflict" => format!(
            "{n} {guests} {are} in an affinity group that must also be apart ({details}): the rules conflict"
        ),
        "running-container" => format!(
            "{n} running container{}: they move only by a restart, which restart-containers does not allow",
            if n == 1 { "" } else { "s" }
        ),
        "ignored" => format!("{n} {guests} {are} tagged flxp.ignore / plb_ignore"),
        "template" => format!("{n} template{}: never moved", if n == 1 { "" } else { "s" }),
        _ => format!("{n} {guests} {are} stopped: moving them changes no load"),
    }
}

/// The counted reasons in one phrase: `4 guests are HA-managed ...; 2 guests are locked (backup)`.
pub(crate) fn left_phrase(left: &[LeftInPlace]) -> String {
    left.iter()
        .map(|l| l.reason.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::constraints::placement_list;
    use crate::placement::{PlacementOptions, Subject};
    use crate::testutil::*;
    use crate::{Rules, State};

    #[test]
    fn many_nodes_failing_alike_are_one_group_with_an_example() {
        let mut b = ClusterBuilder::new().node(node("big").memory(256 * GIB));
        for i in 0..8 {
            b = b.node(node(&format!("small{i}")).memory(8 * GIB));
        }
        let c = b
            .node(node("tainted").memory(256 * GIB).notes("flxp.taint.gpu"))
            .guest(vm(101, "big").mem(100 * GIB, 100 * GIB))
            .build();
        let rules = Rules::compile(&c);
        let s = State::new(&c);
        let o = PlacementOptions::default();
        let p = Placer::new(o.clone(), Vec::new()).unwrap();
        let subject = Subject::guest(&c, &rules, c.guest_idx(101).unwrap(), NodeIdx(0));
        let ctx = Ctx::new(&c, &rules, &s, &o, &subject);
        let text = condensed_failures(&ctx, &p, c.node_indexes().skip(1));
        assert_eq!(
            text,
            "small0, small1, small2, small3, small4 and 3 more: memory (e.g. small0: needs 100.0 GiB but 8.0 GiB is available (8.0 GiB total − 0 B used − 0 B reserve)); tainted: taints (node is tainted gpu (not tolerated))"
        );
        let mut at = BTreeMap::new();
        at.insert(NodeIdx(0), vec![101, 102]);
        assert_eq!(placement_list(&c, &at), "big (101, 102)");
    }
}
