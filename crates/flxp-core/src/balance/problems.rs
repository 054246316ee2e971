//! Finding what breaks a hard rule on the plan's current state, in the order it is fixed:
//! guests on nodes their node rules or selectors refuse (the most constrained, so they get room
//! first), affinity groups split over nodes, anti-affinity groups crowded on a node, then guests
//! on nodes in maintenance, largest first. Guests that may not move are noted with why, once.

use std::collections::BTreeMap;

use crate::cluster::{GuestIdx, NodeIdx};
use crate::constraints::GroupKind;

use super::explain::placement_list;
use super::fix::Scope;
use super::movable::{Intent, Stay};
use super::plan::Purpose;
use super::sim::Sim;
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

/// Every broken rule on the current state, in the order they are fixed.
pub(super) fn detect(sim: &mut Sim, scope: &Scope, scoped: Option<&[UnitId]>) -> Vec<Problem> {
    let (cluster, rules) = (sim.cluster, sim.rules);
    let mut out: Vec<Problem> = Vec::new();
    let in_scope = |n: NodeIdx| scope.only_nodes.as_ref().is_none_or(|v| v.contains(&n));
    let mut seen: Vec<bool> = vec![false; sim.units.all.len()];
    let mut stay_notes: Vec<(GuestIdx, String)> = Vec::new();
    let units: Vec<UnitId> = match scoped {
        Some(v) => v.to_vec(),
        None => (0..sim.units.all.len()).collect(),
    };

    for &id in &units {
        let unit = sim.units.get(id);
        if sim.unit_moved(id) {
            continue;
        }
        let running: Vec<GuestIdx> = unit
            .members
            .iter()
            .copied()
            .filter(|&m| cluster.guest(m).running)
            .collect();
        if unit.is_bundle() && unit.node(&sim.state).is_none() {
            let mut at: BTreeMap<NodeIdx, Vec<u32>> = BTreeMap::new();
            for &m in &running {
                at.entry(sim.state.location(m))
                    .or_default()
                    .push(cluster.guest(m).vmid);
            }
            if !at.keys().any(|&n| in_scope(n)) {
                continue;
            }
            let why = format!("members are split over {}", placement_list(cluster, &at));
            if let Some((g, stay)) = sim.unit_stays(id, Intent::Fix) {
                stay_notes.extend(stay_note(sim, id, g, &stay, &why));
                continue;
            }
            let group = unit.group.clone().unwrap_or_default();
            out.push(Problem {
                unit: id,
                members: running.clone(),
                why,
                rule: group,
                purpose: Purpose::Fix,
                split: true,
                order: (1, std::cmp::Reverse(0), cluster.guest(running[0]).vmid),
            });
            seen[id] = true;
            continue;
        }
        let Some(&first) = unit.members.first() else {
            continue;
        };
        let at = sim.state.location(first);
        if !in_scope(at) {
            continue;
        }
        let node = cluster.node(at);
        let mut found: Option<(u8, String, String, Purpose)> = None;
        for &m in &unit.members {
            let g = cluster.guest(m);
            let r = rules.guest(m);
            if let Some(nr) = r.rules_refusing(at).next() {
                let allowed: Vec<&str> = nr
                    .nodes
                    .iter()
                    .map(|&n| cluster.node(n).name.as_str())
                    .collect();
                found = Some((
                    0,
                    nr.rule.clone(),
                    format!(
                        "{} is on {}, {}",
                        g.label(),
                        node.name,
                        crate::placement::allows_only(&nr.rule, &allowed)
                    ),
                    Purpose::Fix,
                ));
                break;
            }
            if let Some(l) = r.selectors.iter().find(|l| !node.labels.contains(*l)) {
                found = Some((
                    0,
                    format!("flxp.select.{l}"),
                    format!("{} is on {}, which lacks label {l}", g.label(), node.name),
                    Purpose::Fix,
                ));
                break;
            }
        }
        let wants_off_maintenance = unit
            .members
            .iter()
            .any(|&m| cluster.guest(m).running || scope.stopped_off_maintenance);
        if found.is_none() && node.in_maintenance() && wants_off_maintenance {
            let sources: Vec<&str> = node.maintenance.iter().map(|m| m.describe()).collect();
            found = Some((
                3,
                "maintenance".into(),
                format!("{} is in maintenance ({})", node.name, sources.join(", ")),
                Purpose::Evacuate,
            ));
        }
        if let Some((cat, rule, why, purpose)) = found {
            if let Some((g, stay)) = sim.unit_stays(id, Intent::Fix) {
                // Ignored guests on a node in maintenance are not a violation: they stay by design.
                stay_notes.extend(stay_note(sim, id, g, &stay, &why));
                continue;
            }
            let bytes = sim.bytes(&unit.members);
            out.push(Problem {
                unit: id,
                members: unit.members.clone(),
                rule,
                why,
                purpose,
                split: false,
                order: (cat, std::cmp::Reverse(bytes), cluster.guest(first).vmid),
            });
            seen[id] = true;
        }
    }

    let mut anti: Vec<&crate::constraints::Group> = match scoped {
        Some(_) => {
            let mut ids: Vec<crate::constraints::GroupId> = units
                .iter()
                .flat_map(|&u| sim.units.get(u).members.iter())
                .flat_map(|&g| rules.guest(g).groups.iter().copied())
                .collect();
            ids.sort_unstable();
            ids.dedup();
            ids.into_iter().map(|id| rules.group(id)).collect()
        }
        None => rules.groups.iter().collect(),
    };
    anti.retain(|g| g.hard && g.kind == GroupKind::AntiAffinity);
    anti.sort_by(|a, b| a.name.cmp(&b.name));
    for group in anti {
        let mut at: BTreeMap<NodeIdx, Vec<GuestIdx>> = BTreeMap::new();
        for &m in &group.members {
            if cluster.guest(m).running {
                at.entry(sim.state.location(m)).or_default().push(m);
            }
        }
        for (node, mut members) in at.into_iter().filter(|(_, v)| v.len() > 1) {
            if !in_scope(node) {
                continue;
            }
            // Keep the member that cannot move, else the largest (fewest bytes to copy), else
            // the lowest vmid; move the others.
            members.sort_by_key(|&m| {
                let unit = sim.units.of(m);
                let fixed = sim.unit_moved(unit) || sim.unit_stays(unit, Intent::Fix).is_some();
                (
                    !fixed,
                    std::cmp::Reverse(cluster.guest(m).mem_footprint()),
                    cluster.guest(m).vmid,
                )
            });
            let keeper = cluster.guest(members[0]).label();
            for &m in &members[1..] {
                let unit = sim.units.of(m);
                let why = format!(
                    "{} shares {} with {keeper}",
                    cluster.guest(m).label(),
                    cluster.node(node).name
                );
                if seen[unit] || sim.unit_moved(unit) {
                    continue;
                }
                if let Some((g, stay)) = sim.unit_stays(unit, Intent::Fix) {
                    stay_notes.extend(stay_note(sim, unit, g, &stay, &why));
                    continue;
                }
                seen[unit] = true;
                let members = sim.units.get(unit).members.clone();
                let bytes = sim.bytes(&members);
                out.push(Problem {
                    unit,
                    members,
                    rule: group.name.clone(),
                    why,
                    purpose: Purpose::Fix,
                    split: false,
                    order: (2, std::cmp::Reverse(bytes), cluster.guest(m).vmid),
                });
            }
        }
    }
    for (g, note) in stay_notes {
        sim.skip(g, note);
    }
    out.sort_by_key(|p| p.order);
    out
}

/// Why each member of a unit stays: the member that may not move, and the others with it.
fn stay_note(
    sim: &Sim,
    unit: UnitId,
    blocker: GuestIdx,
    stay: &Stay,
    why: &str,
) -> Vec<(GuestIdx, String)> {
    let u = sim.units.get(unit);
    let vmid = sim.cluster.guest(blocker).vmid;
    u.members
        .iter()
        .map(|&m| {
            if m == blocker {
                (m, format!("{stay}; {why}"))
            } else {
                let group = u.group.as_deref().unwrap_or("its group");
                (
                    m,
                    format!("moves only with {group}, and {vmid} stays ({stay}); {why}"),
                )
            }
        })
        .collect()
}
