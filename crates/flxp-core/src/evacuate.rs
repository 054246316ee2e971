//! Evacuation: empty nodes in maintenance, rule-abiding, spread over the rest of the cluster.
//!
//! Every movable guest of the nodes (running ones live, stopped ones offline) goes to the node the
//! placement pipeline ranks best on the state all earlier choices leave, so guests spread out
//! instead of piling onto the emptiest node. Affinity groups move as bundles; guests whose node
//! rules or anti-affinity the node already breaks are fixed on the way, the most constrained first,
//! then the rest largest first. Guests that fit nowhere are reported with every node's reason, and
//! nothing else moves because of them. Migrations are grouped into waves with at most
//! `max_inflow_per_node` arriving at any node per wave, so the engine can run a wave in parallel.

use std::collections::BTreeMap;

use crate::Result;
use crate::balance::draft::Draft;
use crate::balance::fix::{self, Scope};
use crate::balance::planner::finish;
use crate::balance::{EvacuateOptions, Measure, Metric, Migration, Plan, imbalance};
use crate::cluster::{Cluster, NodeIdx};
use crate::constraints::Rules;
use crate::placement::Placer;
use crate::state::State;
use crate::units::fmt_bytes;

/// Plans the evacuation of `nodes`, or of every node in maintenance when `nodes` is empty.
///
/// Nodes named here count as in maintenance for this plan even if the snapshot does not say so
/// (or as freed by a consolidation: [`EvacuateOptions::emptied_as`]): nothing is moved onto them. `Err` only for a scorer bug; guests that cannot go anywhere are in
/// `unplaced` with the reason.
pub fn evacuate(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    placer: &Placer,
    nodes: &[NodeIdx],
    options: &EvacuateOptions,
) -> Result<Plan> {
    let mut c = cluster.clone();
    let mut targets: Vec<NodeIdx> = if nodes.is_empty() {
        c.node_indexes()
            .filter(|&n| c.node(n).in_maintenance())
            .collect()
    } else {
        nodes.to_vec()
    };
    targets.sort();
    targets.dedup();
    for &n in &targets {
        c.empty_for(n, options.emptied_as.clone());
    }
    let measure = options.measure;
    let kind = measure.kind_for(options.metric, &c, state);
    let mut draft = Draft::new(&c, rules, placer, state, kind, measure, 0, usize::MAX);
    placer.policy_def(&options.policy)?;
    draft.target_policy = Some(options.policy.clone());
    draft.bounds = !options.skip_bounds;
    let scope = Scope {
        only_nodes: Some(targets.clone()),
        stopped_off_maintenance: options.include_stopped,
        make_room: 0,
    };
    fix::fix_all(&mut draft, &scope)?;
    Ok(finish_evacuation(draft, state, &targets, options))
}

/// The evacuation plan of `targets` (sorted) from a draft that emptied them, starting at
/// `state`: figures, waves, the order they run in and the summary.
pub(crate) fn finish_evacuation(
    draft: Draft,
    state: &State,
    targets: &[NodeIdx],
    options: &EvacuateOptions,
) -> Plan {
    let c = draft.cluster;
    let measure = options.measure;
    let threshold = measure.default_threshold();
    let mut plan = finish(
        draft,
        state,
        crate::balance::PlanSource::Evacuate,
        threshold,
        threshold / 2.0,
    );

    assign_waves(&mut plan.migrations, options.max_inflow_per_node);
    plan.migrations.sort_by_key(|m| m.wave);
    imbalance_in_order(c, state, measure, options.metric, &mut plan.migrations);
    let names: Vec<&str> = targets.iter().map(|&n| c.node(n).name.as_str()).collect();
    let waves = plan
        .migrations
        .iter()
        .map(|m| m.wave + 1)
        .max()
        .unwrap_or(0);
    plan.summary = format!(
        "evacuate {}: {} migration(s) in {waves} wave(s), {} to copy{}",
        if names.is_empty() {
            "no node (none is in maintenance)".to_owned()
        } else {
            names.join(", ")
        },
        plan.migrations.len(),
        fmt_bytes(plan.bytes),
        match plan.unplaced.len() {
            0 => String::new(),
            n => format!("; {n} guest(s) fit nowhere"),
        }
    );
    plan
}

/// Sets each migration's `imbalance_after` to the imbalance once it and every migration listed
/// before it have run: waves reorder the planning steps, and the list is the order they run in.
/// A bundle's members share the value after the whole bundle.
fn imbalance_in_order(
    cluster: &Cluster,
    start: &State,
    measure: Measure,
    metric: Metric,
    migrations: &mut [Migration],
) {
    let mut state = start.clone();
    let mut before = imbalance(cluster, &state, measure, metric);
    let mut i = 0;
    while i < migrations.len() {
        let step = migrations[i].step;
        let end = i + migrations[i..]
            .iter()
            .take_while(|m| m.step == step)
            .count();
        for m in &migrations[i..end] {
            if let (Some(g), Some(to)) = (cluster.guest_idx(m.vmid), cluster.node_idx(&m.to)) {
                state.move_guest(cluster, g, to);
            }
        }
        let after = imbalance(cluster, &state, measure, metric);
        // The reason's closing figures were written in planning order: restate them in list order.
        let figures = format!(
            "; {} {} → {}",
            measure.as_str(),
            measure.fmt(before),
            measure.fmt(after)
        );
        let tail = format!("; {} ", measure.as_str());
        for m in &mut migrations[i..end] {
            m.imbalance_after = after;
            if let Some(at) = m.reason.rfind(&tail) {
                m.reason.truncate(at);
                m.reason.push_str(&figures);
            }
        }
        before = after;
        i = end;
    }
}

/// Groups migrations into waves the engine may run in parallel, safely in any order within a
/// wave.
///
/// Per target node, decisions fill a wave until the next would exceed `limit` arrivals (0: no
/// limit), then the next wave starts; a decision (a bundle) stays in one wave, its members side by
/// side. Two orders must survive the regrouping, because each step was checked on the state the
/// earlier ones leave: arrivals at a node keep their order (each finds the room it was planned
/// with), and an arrival comes in a later wave than every earlier departure from that node (a
/// fix that moved a guest off it may have made the room, or cleared an anti-affinity partner).
fn assign_waves(migrations: &mut [Migration], limit: u32) {
    let mut arrivals: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    let mut departed: BTreeMap<String, u32> = BTreeMap::new();
    let mut i = 0;
    while i < migrations.len() {
        let step = migrations[i].step;
        let end = migrations[i..]
            .iter()
            .position(|m| m.step != step)
            .map_or(migrations.len(), |n| i + n);
        let size = (end - i) as u32;
        let target = migrations[i].to.clone();
        let after_departures = departed.get(&target).map_or(0, |w| w + 1);
        let (wave, count) = arrivals.entry(target).or_insert((0, 0));
        if *wave < after_departures {
            *wave = after_departures;
            *count = 0;
        }
        if limit > 0 && *count > 0 && *count + size > limit {
            *wave += 1;
            *count = 0;
        }
        *count += size;
        let w = *wave;
        for m in &mut migrations[i..end] {
            m.wave = w;
            let d = departed.entry(m.from.clone()).or_insert(w);
            *d = (*d).max(w);
        }
        i = end;
    }
}

/// The unit tests' evacuation of the node named `node` with the default options and placer.
#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests may panic: unwrapping is how they fail.
pub(crate) fn evacuate_node(cluster: &Cluster, node: &str) -> Plan {
    let (rules, state) = (Rules::compile(cluster), State::new(cluster));
    let n = cluster.node_idx(node).unwrap();
    let placer = crate::testutil::placer();
    evacuate(
        cluster,
        &rules,
        &state,
        &placer,
        &[n],
        &EvacuateOptions::default(),
    )
    .unwrap()
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::placement::PlacementOptions;
    use crate::testutil::*;

    fn step(vmid: u32, from: &str, to: &str, step: u32) -> Migration {
        Migration {
            vmid,
            kind: crate::cluster::GuestKind::Qemu,
            name: String::new(),
            from: from.into(),
            to: to.into(),
            reason: String::new(),
            purpose: crate::balance::Purpose::Evacuate,
            online: true,
            bytes: 0,
            bundle: Vec::new(),
            group: None,
            step,
            wave: 0,
            imbalance_after: 0.0,
        }
    }

    #[test]
    fn an_arrival_waits_for_earlier_departures_from_its_node() {
        // 2 leaves b, making room; 3 then arrives at b: never in the same or an earlier wave,
        // even without an inflow limit. 1 and 4 are independent.
        let mut m = vec![
            step(1, "m", "a", 0),
            step(2, "b", "c", 1),
            step(3, "m", "b", 2),
            step(4, "m", "c", 3),
        ];
        assign_waves(&mut m, 0);
        let waves: Vec<(u32, u32)> = m.iter().map(|m| (m.vmid, m.wave)).collect();
        assert_eq!(waves, vec![(1, 0), (2, 0), (3, 1), (4, 0)]);
        assign_waves(&mut m, 1);
        let waves: Vec<(u32, u32)> = m.iter().map(|m| (m.vmid, m.wave)).collect();
        assert_eq!(waves, vec![(1, 0), (2, 0), (3, 1), (4, 1)]);
    }

    #[test]
    fn a_bundle_stays_in_one_wave_and_later_arrivals_wait() {
        let c = ClusterBuilder::new()
            .node(node("a"))
            .node(node("b"))
            .guest(
                vm(101, "a")
                    .mem(8 * GIB, 8 * GIB)
                    .tagged("flxp.affinity.app"),
            )
            .guest(
                vm(102, "a")
                    .mem(8 * GIB, 8 * GIB)
                    .tagged("flxp.affinity.app"),
            )
            .guest(vm(103, "a").mem(4 * GIB, 4 * GIB))
            .guest(vm(104, "a").mem(2 * GIB, 2 * GIB))
            .build();
        let rules = Rules::compile(&c);
        let p = Placer::new(PlacementOptions::default(), Vec::new()).unwrap();
        let a = c.node_idx("a").unwrap();
        let o = EvacuateOptions {
            max_inflow_per_node: 1,
            ..EvacuateOptions::default()
        };
        let plan = evacuate(&c, &rules, &State::new(&c), &p, &[a], &o).unwrap();
        let got: Vec<(u32, u32)> = plan.migrations.iter().map(|m| (m.vmid, m.wave)).collect();
        assert_eq!(got, vec![(101, 0), (102, 0), (103, 1), (104, 2)]);
    }
    #[test]
    fn an_unbounded_evacuation_is_the_same_plan_with_its_bounds_unknown() {
        let c = floor1();
        let (rules, state, p) = (Rules::compile(&c), State::new(&c), placer());
        let n1 = c.node_idx("n1").unwrap();
        let o = EvacuateOptions::default();
        let full = evacuate(&c, &rules, &state, &p, &[n1], &o).unwrap();
        let skip = EvacuateOptions {
            skip_bounds: true,
            ..o.clone()
        };
        let mut bare = evacuate(&c, &rules, &state, &p, &[n1], &skip).unwrap();
        assert!(full.bounds.migrations.is_some(), "{:?}", full.bounds);
        assert!(full.bounds.spread_floor.is_some(), "{:?}", full.bounds);
        assert_eq!(
            bare.bounds,
            crate::balance::Bounds {
                imbalance_floor: 0.0,
                spread_floor: None,
                peak_migrations: None,
                trough_migrations: None,
                migrations: None,
                bytes: None,
                migrations_gap: None,
                bytes_gap: None,
            }
        );
        bare.bounds = full.bounds;
        assert_eq!(bare, full);
    }
}
