//! Finding what breaks a hard rule on the plan's current state, in the order it is fixed:
//! guests on nodes their node rules or selectors refuse (the most constrained, so they get room
//! first), affinity groups split over nodes, anti-affinity groups crowded on a node, then guests
//! on nodes in maintenance, largest first. Guests that may not move are noted with why, once.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::cluster::{GuestIdx, NodeIdx};
use crate::constraints::{Breach, GroupId, breaches_among, crowded_reason, split_reason};

use super::draft::Draft;
use super::fix::Scope;
use super::movable::{Intent, Stay};
use super::plan::Purpose;
use super::units::UnitId;

/// One thing to fix.
#[derive(Debug, Clone)]
pub(super) struct Problem {
    pub unit: UnitId,
    /// Guests to move (a split group: all its running members).
    pub members: Vec<GuestIdx>,
    pub rule: String,
    /// What is wrong, in words.
    pub why: String,
    pub purpose: Purpose,
    pub split: bool,
    /// Sort key: category, then larger first, then vmid.
    pub order: (u8, std::cmp::Reverse<u64>, u32),
}

/// Every broken rule on the current state, in the order they are fixed: the checker's breaches
/// of the units' guests, grouped by unit, within the scope, minus units that moved or stay.
pub(super) fn detect(draft: &mut Draft, scope: &Scope, scoped: Option<&[UnitId]>) -> Vec<Problem> {
    let (cluster, rules) = (draft.cluster, draft.rules);
    let mut out: Vec<Problem> = Vec::new();
    let in_scope = |n: NodeIdx| scope.only_nodes.as_ref().is_none_or(|v| v.contains(&n));
    let mut seen: Vec<bool> = vec![false; draft.units.all.len()];
    let mut stay_notes: Vec<(GuestIdx, String)> = Vec::new();
    let units: Vec<UnitId> = match scoped {
        Some(v) => v.to_vec(),
        None => (0..draft.units.all.len()).collect(),
    };
    #[cfg(test)]
    super::fix::work::add(&super::fix::work::DETECTED, units.len());
    let found = breaches_among(
        cluster,
        rules,
        &draft.state,
        units
            .iter()
            .flat_map(|&u| draft.units.get(u).members.iter().copied()),
    );
    let mut of_guest: HashMap<GuestIdx, Vec<&Breach>> = HashMap::new();
    let mut split: HashSet<GroupId> = HashSet::new();
    let mut crowded: Vec<(&str, NodeIdx, &[GuestIdx])> = Vec::new();
    for b in &found {
        match b {
            Breach::Split { group, .. } => {
                split.insert(*group);
            }
            Breach::Crowded {
                group,
                node,
                guests,
            } => crowded.push((rules.group(*group).name.as_str(), *node, guests)),
            _ => {
                if let Some(g) = b.guest() {
                    of_guest.entry(g).or_default().push(b);
                }
            }
        }
    }
    let breaches_of = |g: GuestIdx| of_guest.get(&g).map_or(&[][..], Vec::as_slice);

    for &id in &units {
        let unit = draft.units.get(id);
        if draft.unit_moved(id) {
            continue;
        }
        // A bundle's members are the running members of connected hard affinity groups: it is
        // split exactly when one of its groups is.
        let is_split = unit.is_bundle()
            && unit
                .members
                .iter()
                .any(|&m| rules.guest(m).groups.iter().any(|g| split.contains(g)));
        if is_split {
            let mut at: BTreeMap<NodeIdx, Vec<u32>> = BTreeMap::new();
            for &m in &unit.members {
                at.entry(draft.state.location(m))
                    .or_default()
                    .push(cluster.guest(m).vmid);
            }
            if !at.keys().any(|&n| in_scope(n)) {
                continue;
            }
            let why = split_reason(cluster, &at);
            if let Some((g, stay)) = draft.unit_stays(id, Intent::Fix) {
                stay_notes.extend(stay_note(draft, id, g, &stay, Some(&why)));
                continue;
            }
            let group = unit.group.clone().unwrap_or_default();
            out.push(Problem {
                unit: id,
                members: unit.members.clone(),
                why,
                rule: group,
                purpose: Purpose::Fix,
                split: true,
                order: (1, std::cmp::Reverse(0), cluster.guest(unit.members[0]).vmid),
            });
            seen[id] = true;
            continue;
        }
        let Some(&first) = unit.members.first() else {
            continue;
        };
        if !in_scope(draft.state.location(first)) {
            continue;
        }
        // The first member's first refusing node rule or missing label; else, when a member
        // should leave a node in maintenance, that (all members share the node).
        let mut found: Option<(u8, &Breach, Purpose)> = unit.members.iter().find_map(|&m| {
            breaches_of(m)
                .iter()
                .find(|b| matches!(b, Breach::NodeRule { .. } | Breach::Selector { .. }))
                .map(|&b| (0, b, Purpose::Fix))
        });
        let wants_off_maintenance = unit
            .members
            .iter()
            .any(|&m| cluster.guest(m).running || scope.stopped_off_maintenance);
        if found.is_none() && wants_off_maintenance {
            found = unit.members.iter().find_map(|&m| {
                breaches_of(m)
                    .iter()
                    .find(|b| matches!(b, Breach::Maintenance { .. }))
                    .map(|&b| (3, b, Purpose::Evacuate))
            });
        }
        if let Some((cat, breach, purpose)) = found {
            let why = breach.reason(cluster);
            if let Some((g, stay)) = draft.unit_stays(id, Intent::Fix) {
                // Ignored guests on a node in maintenance are not a violation: they stay by design.
                // On a node a consolidation would free, what holds them is the whole story: the
                // node is kept, and its reason names the guest.
                let freed = matches!(breach, Breach::Maintenance { node, .. }
                    if cluster.node(*node).is_being_freed());
                stay_notes.extend(stay_note(draft, id, g, &stay, (!freed).then_some(&why)));
                continue;
            }
            let bytes = draft.bytes(&unit.members);
            out.push(Problem {
                unit: id,
                members: unit.members.clone(),
                rule: breach.rule(rules),
                why,
                purpose,
                split: false,
                order: (cat, std::cmp::Reverse(bytes), cluster.guest(first).vmid),
            });
            seen[id] = true;
        }
    }

    // By group name, then node, so that which member stays does not depend on compile order.
    crowded.sort_by(|a, b| a.0.cmp(b.0));
    for (group, node, guests) in crowded {
        if !in_scope(node) {
            continue;
        }
        // Keep the member that cannot move, else the largest (fewest bytes to copy), else
        // the lowest vmid; move the others.
        let mut members = guests.to_vec();
        members.sort_by_key(|&m| {
            let unit = draft.units.of(m);
            let fixed = draft.unit_moved(unit) || draft.unit_stays(unit, Intent::Fix).is_some();
            (
                !fixed,
                std::cmp::Reverse(cluster.guest(m).mem_footprint()),
                cluster.guest(m).vmid,
            )
        });
        for &m in &members[1..] {
            let unit = draft.units.of(m);
            let why = crowded_reason(cluster, m, node, members[0]);
            if seen[unit] || draft.unit_moved(unit) {
                continue;
            }
            if let Some((g, stay)) = draft.unit_stays(unit, Intent::Fix) {
                stay_notes.extend(stay_note(draft, unit, g, &stay, Some(&why)));
                continue;
            }
            seen[unit] = true;
            let members = draft.units.get(unit).members.clone();
            let bytes = draft.bytes(&members);
            out.push(Problem {
                unit,
                members,
                rule: group.to_owned(),
                why,
                purpose: Purpose::Fix,
                split: false,
                order: (2, std::cmp::Reverse(bytes), cluster.guest(m).vmid),
            });
        }
    }
    for (g, note) in stay_notes {
        draft.skip(g, note);
    }
    out.sort_by_key(|p| p.order);
    out
}

/// Why each member of a unit stays: the member that may not move, and the others with it,
/// each followed by the rule it breaks so, when there is one to name (`why`).
fn stay_note(
    draft: &Draft,
    unit: UnitId,
    blocker: GuestIdx,
    stay: &Stay,
    why: Option<&String>,
) -> Vec<(GuestIdx, String)> {
    let u = draft.units.get(unit);
    let vmid = draft.cluster.guest(blocker).vmid;
    let breaking = why.map_or(String::new(), |w| format!("; {w}"));
    u.members
        .iter()
        .map(|&m| {
            if m == blocker {
                (m, format!("{stay}{breaking}"))
            } else {
                let group = u.group.as_deref().unwrap_or("its group");
                (
                    m,
                    format!("moves only with {group}, and {vmid} stays ({stay}){breaking}"),
                )
            }
        })
        .collect()
}
