//! Properties of the power decisions, on random zones: marks, loads, timings and the plans a
//! consolidation would carry out.
// Tests may panic: unwrapping is how they fail.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::balance::EvacuateOptions;
use crate::consolidate::{ConsolidateOptions, consolidate, headroom_breach};
use crate::constraints::Rules;
use crate::placement::{PlacementOptions, Placer};
use crate::testutil::*;

/// One node of a random zone.
#[derive(Debug, Clone)]
struct NodeCase {
    online: bool,
    maintenance: bool,
    /// Its power mark: none, `off` or `waking`, dated this many seconds ago.
    mark: Option<(MarkState, i64)>,
    /// Guests on it, GiB each (of its 64).
    guests: Vec<u64>,
    /// Its first guest is migrating to the node with this index (modulo the node count).
    migrating_to: Option<usize>,
}

fn node_case() -> impl Strategy<Value = NodeCase> {
    let mark = prop_oneof![
        Just(None),
        (0i64..4000).prop_map(|a| Some((MarkState::Off, a))),
        (0i64..4000).prop_map(|a| Some((MarkState::Waking, a))),
    ];
    (
        prop::bool::weighted(0.85),
        prop::bool::weighted(0.2),
        mark,
        prop::collection::vec(1u64..12, 0..4),
        prop::option::weighted(0.15, 0usize..8),
    )
        .prop_map(
            |(online, maintenance, mark, guests, migrating_to)| NodeCase {
                online,
                maintenance,
                mark,
                guests,
                migrating_to,
            },
        )
}

/// The zone, the marks as the daemon reads them, and `now`.
fn zone(cases: &[NodeCase]) -> (Cluster, Vec<Mark>, i64) {
    let now = 1_000_000;
    let mut b = ClusterBuilder::new().time(now);
    let mut vmid = 100;
    let names: Vec<String> = (0..cases.len()).map(|i| format!("n{i}")).collect();
    for (i, c) in cases.iter().enumerate() {
        let mut spec = node(&names[i]);
        if !c.online {
            spec = spec.offline();
        }
        if c.maintenance {
            spec = spec.notes("flxp.maintenance");
        }
        b = b.node(spec);
        // An offline node reports no guests.
        let guests = if c.online { c.guests.as_slice() } else { &[] };
        for (j, &gib) in guests.iter().enumerate() {
            b = b.guest(vm(vmid, &names[i]).mem(gib * GIB, gib * GIB));
            if j == 0 {
                if let Some(to) = c.migrating_to {
                    let to = to % cases.len();
                    if to != i && cases[to].online {
                        b = b.migrating(vmid, &names[i], &names[to]);
                    }
                }
            }
            vmid += 1;
        }
    }
    let marks = cases
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            c.mark.map(|(state, ago)| Mark {
                node: names[i].clone(),
                state,
                since: now - ago,
            })
        })
        .collect();
    (b.build(), marks, now)
}

fn levels() -> impl Strategy<Value = Levels> {
    (
        any::<bool>(),
        0.05f64..0.6,
        0.0f64..0.4,
        0i64..3000,
        0i64..3000,
    )
        .prop_map(|(shutdown, below, gap, interval, timeout)| Levels {
            shutdown,
            consolidate_below: below,
            wake_above: below + gap,
            min_interval_secs: interval,
            wake_timeout_secs: timeout,
        })
}

fn timing() -> impl Strategy<Value = Timing> {
    (
        prop::option::of(0i64..4000),
        prop::option::of(0i64..4000),
        any::<bool>(),
    )
        .prop_map(|(last, low, room)| Timing {
            last_power: last.map(|a| 1_000_000 - a),
            low_since: low.map(|a| 1_000_000 - a),
            room,
        })
}

/// Every node a decision would switch off or finish (empty, then switch off), and the node it
/// would wake.
fn touched(
    found: &Marks,
    decision: &Decision,
    cluster: &Cluster,
) -> (BTreeSet<String>, Option<String>) {
    let off: BTreeSet<String> = found
        .pending
        .iter()
        .map(|&n| cluster.node(n).name.clone())
        .collect();
    let wake = match &decision.change {
        Change::Wake { node, .. } => Some(node.clone()),
        _ => None,
    };
    (off, wake)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// One round never wakes a node and empties or switches it off; it wakes only a node flxp
    /// switched off that is offline (or online and empty, left on), never while one is still
    /// waking, and brings back only nodes marked waking.
    #[test]
    fn a_round_never_wakes_and_switches_off_the_same_node(
        cases in prop::collection::vec(node_case(), 1..8),
        levels in levels(),
        timing in timing(),
        going in prop::collection::btree_set(0usize..8, 0..3),
    ) {
        let (cluster, marks, now) = zone(&cases);
        let state = State::new(&cluster);
        let going_down: BTreeSet<String> = going.iter().map(|i| format!("n{i}")).collect();
        let found = finish(&cluster, &state, &marks, now, &levels, &going_down);
        let decision = decide(&cluster, &state, &marks, &found, now, &levels, timing);
        let (off, wake) = touched(&found, &decision, &cluster);
        if let Some(w) = &wake {
            prop_assert!(!off.contains(w), "{w} woken and switched off");
            prop_assert!(!found.waking);
            let mark = marks.iter().find(|m| &m.node == w).unwrap();
            prop_assert_eq!(mark.state, MarkState::Off);
            let n = cluster.node(cluster.node_idx(w).unwrap());
            prop_assert!(!n.is_online() || occupied(&cluster, &state, cluster.node_idx(w).unwrap()).is_none());
        }
        for f in &found.finishing {
            if let Finishing::BackInService(n) = f {
                prop_assert!(!off.contains(n));
                prop_assert_eq!(marks.iter().find(|m| &m.node == n).unwrap().state, MarkState::Waking);
            }
        }
        // Nothing is finished and decided at once: a decision is only asked with nothing pending.
        if decision.change == Change::Consolidate {
            prop_assert!(!found.waking);
        }
    }

    /// A node is only ever finished (emptied, then switched off) when it is marked off, online
    /// and in maintenance; with `shutdown` off, only when a guest is still on it or arriving
    /// (an empty one is left on); and the switch-off check refuses any node a guest runs on or
    /// is migrating onto, and the one that would leave half the nodes or fewer online.
    #[test]
    fn a_node_holding_or_receiving_a_guest_is_never_switched_off(
        cases in prop::collection::vec(node_case(), 1..8),
        levels in levels(),
    ) {
        let (cluster, marks, now) = zone(&cases);
        let state = State::new(&cluster);
        let found = finish(&cluster, &state, &marks, now, &levels, &BTreeSet::new());
        for &n in &found.pending {
            let node = cluster.node(n);
            prop_assert!(node.is_online() && node.in_maintenance());
            if !levels.shutdown {
                prop_assert!(occupied(&cluster, &state, n).is_some());
            }
        }
        let total = cluster.nodes().len();
        let online = cluster.nodes().iter().filter(|n| n.is_online()).count();
        for n in cluster.node_indexes() {
            let name = &cluster.node(n).name;
            if may_switch_off(&cluster, &state, name).is_ok() {
                prop_assert!(cluster.guest_indexes().all(|g| state.location(g) != n));
                prop_assert!(arriving(&cluster, &[n]).is_none());
                prop_assert!(2 * (online - 1) > total);
            }
        }
    }

    /// What a consolidation frees (the nodes the daemon then switches off) keeps more than
    /// half of all nodes online, `min-nodes` in service, and N+1 headroom on the rest; it frees
    /// no node a guest is migrating onto, and leaves on a freed node only a guest already
    /// migrating off it.
    #[test]
    fn a_consolidation_never_goes_below_the_quorum_floor_or_the_headroom(
        cases in prop::collection::vec(node_case(), 1..8),
        min_nodes in 1usize..4,
    ) {
        let (cluster, _, _) = zone(&cases);
        let state = State::new(&cluster);
        let rules = Rules::compile(&cluster);
        let placer = Placer::new(PlacementOptions::default(), Vec::new()).unwrap();
        let options = ConsolidateOptions { min_nodes, ..ConsolidateOptions::default() };
        let out = consolidate(&cluster, &rules, &state, &placer, &options, &EvacuateOptions::default(), &|_| {}).unwrap();
        let total = cluster.nodes().len();
        let online = cluster.nodes().iter().filter(|n| n.is_online()).count();
        let freed: Vec<NodeIdx> = out.freed.iter().map(|f| cluster.node_idx(&f.node).unwrap()).collect();
        if !freed.is_empty() {
            prop_assert!(2 * (online - freed.len()) > total);
            let service = in_service(&cluster).len();
            prop_assert!(service - freed.len() >= min_nodes);
        }
        let mut after = state.clone();
        for m in &out.plan.migrations {
            after.move_guest(&cluster, cluster.guest_idx(m.vmid).unwrap(), cluster.node_idx(&m.to).unwrap());
        }
        for &f in &freed {
            prop_assert!(arriving(&cluster, &[f]).is_none());
            // A guest left on it is leaving by a migration of its own, to a node that stays.
            let leaving = |g: crate::cluster::GuestIdx| {
                cluster.guest(g).migrating_to().is_some_and(|to| !freed.contains(&to))
            };
            prop_assert!(cluster.guest_indexes().all(|g| after.location(g) != f || leaving(g)));
        }
        if !freed.is_empty() {
            let remaining: Vec<NodeIdx> = in_service(&cluster).into_iter().filter(|n| !freed.contains(n)).collect();
            prop_assert_eq!(headroom_breach(&cluster, &after, &remaining, placer.options()), None);
        }
    }
}
