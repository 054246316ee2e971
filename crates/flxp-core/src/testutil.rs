//! What the crate's unit tests share: the builders, and the clusters several modules test on.

// Tests may panic: unwrapping is how they fail.
#![allow(clippy::unwrap_used)]

use crate::balance::Plan;
use crate::balance::draft::Draft;
use crate::balance::measure::{LoadKind, Measure};
pub use crate::builder::*;
use crate::cluster::Cluster;
use crate::constraints::Rules;
use crate::placement::{PlacementOptions, Placer};
use crate::state::State;

/// Three unequal nodes, n1 32 GiB, n2 24 GiB, n3 16 GiB; 103 is pinned to n2. On it the imbalance
/// floor once read above a spread some placement reaches.
pub fn floor1() -> Cluster {
    ClusterBuilder::new()
        .node(node("n1").memory(32 * GIB).cpus(4.0))
        .node(node("n2").memory(24 * GIB).cpus(4.0))
        .node(node("n3").memory(16 * GIB).cpus(4.0))
        .guest(
            vm(101, "n2")
                .mem(GIB / 2, GIB / 2)
                .tagged("flxp.anti-affinity.a"),
        )
        .guest(vm(102, "n1").mem(GIB / 2, GIB / 2))
        .guest(vm(103, "n2").mem(GIB / 2, GIB / 2).tagged("flxp.node.n2"))
        .guest(vm(104, "n1").mem(4 * GIB, 4 * GIB))
        .guest(vm(105, "n1").mem(4 * GIB, 4 * GIB))
        .guest(vm(106, "n2").mem(3 * GIB / 2, 3 * GIB / 2))
        .build()
}

/// Three 16 GiB nodes, n1 in maintenance; the imbalance floor once read above reachable spreads here too.
pub fn floor2() -> Cluster {
    ClusterBuilder::new()
        .node(
            node("n1")
                .memory(16 * GIB)
                .cpus(4.0)
                .notes("flxp.maintenance"),
        )
        .node(node("n2").memory(16 * GIB).cpus(4.0))
        .node(node("n3").memory(16 * GIB).cpus(4.0))
        .guest(vm(101, "n1").mem(3 * GIB / 2, 3 * GIB / 2))
        .guest(vm(102, "n2").mem(6 * GIB, 6 * GIB))
        .guest(vm(103, "n1").mem(3 * GIB / 2, 3 * GIB / 2))
        .guest(vm(104, "n1").mem(3 * GIB / 2, 3 * GIB / 2))
        .guest(vm(105, "n2").mem(4 * GIB, 4 * GIB))
        .guest(
            vm(106, "n1")
                .mem(GIB / 2, GIB / 2)
                .tagged("flxp.anti-affinity.a"),
        )
        .build()
}

/// The text of the error a resources JSON is refused with (default overrides).
pub fn refusal(json: &str) -> String {
    Cluster::from_json(json, &crate::Overrides::default())
        .unwrap_err()
        .to_string()
}

/// A placer with the default options, no custom policies and no plugins.
pub fn placer() -> Placer {
    Placer::new(PlacementOptions::default(), Vec::new()).unwrap()
}

/// Runs `f` on a fresh draft of `c` (memory load, spread measure, no cooldown, `budget`
/// migrations, the default placer), with the state it started from.
pub(crate) fn with_draft<R>(
    c: &Cluster,
    budget: usize,
    f: impl FnOnce(&mut Draft<'_>, &State) -> R,
) -> R {
    let rules = Rules::compile(c);
    let placer = placer();
    let state = State::new(c);
    let mut draft = Draft::new(
        c,
        &rules,
        &placer,
        &state,
        LoadKind::Memory,
        Measure::Spread,
        0,
        budget,
    );
    f(&mut draft, &state)
}

/// Each migration of the plan as (vmid, target), in plan order.
pub fn targets(p: &Plan) -> Vec<(u32, &str)> {
    p.migrations
        .iter()
        .map(|m| (m.vmid, m.to.as_str()))
        .collect()
}
