//! Evacuation plans on concrete clusters: which guest goes where, in which order and wave, and
//! what cannot leave and why.

use flxp_core::balance::{EvacuateOptions, Plan, Purpose, replay};
use flxp_core::builder::*;
use flxp_core::cluster::NodeIdx;
use flxp_core::evacuate::evacuate;
use flxp_core::{Cluster, Overrides, Rules, State};

use crate::support::{placer, skipped, targets};

fn evac(c: &Cluster, nodes: &[&str], o: &EvacuateOptions) -> Plan {
    let rules = Rules::compile(c);
    let state = State::new(c);
    let idx: Vec<NodeIdx> = nodes.iter().map(|n| c.node_idx(n).unwrap()).collect();
    let p = evacuate(c, &rules, &state, &placer(), &idx, o).unwrap();
    // Replays on the cluster with those nodes in maintenance, as planned.
    let mut overrides = Overrides::default();
    overrides
        .maintenance
        .extend(nodes.iter().map(|n| (*n).to_owned()));
    let snapshot_cluster = rebuild(c, &overrides);
    replay(&snapshot_cluster, &rules, &state, &placer(), &p.migrations).unwrap();
    p
}

/// The same cluster built again with overrides (the builder's snapshot is not kept, so the test
/// clusters are rebuilt from their JSON form).
fn rebuild(c: &Cluster, overrides: &Overrides) -> Cluster {
    let mut c2 = c.clone();
    for name in &overrides.maintenance {
        if let Some(i) = c2.node_idx(name) {
            c2.request_maintenance(i);
        }
    }
    c2
}

fn moves(p: &Plan) -> Vec<(u32, &str, u32)> {
    p.migrations
        .iter()
        .map(|m| (m.vmid, m.to.as_str(), m.wave))
        .collect()
}

fn four_nodes() -> ClusterBuilder {
    ClusterBuilder::new()
        .node(node("pve1").memory(64 * GIB))
        .node(node("pve2").memory(64 * GIB))
        .node(node("pve3").memory(64 * GIB))
        .node(node("pve4").memory(32 * GIB))
}

/// Five guests (42 GiB) on pve1 to evacuate, and some load on pve2 and pve3.
fn five_of_42_gib_on_pve1() -> Cluster {
    four_nodes()
        .guest(vm(101, "pve1").mem(4 * GIB, 4 * GIB))
        .guest(vm(102, "pve1").mem(16 * GIB, 16 * GIB))
        .guest(vm(103, "pve1").mem(8 * GIB, 8 * GIB))
        .guest(vm(104, "pve1").mem(12 * GIB, 12 * GIB))
        .guest(vm(105, "pve1").mem(2 * GIB, 2 * GIB))
        .guest(vm(201, "pve2").mem(10 * GIB, 10 * GIB))
        .guest(vm(301, "pve3").mem(4 * GIB, 4 * GIB))
        .build()
}

/// Evacuates pve1 of [`five_of_42_gib_on_pve1`] with at most one arrival per node and wave.
fn evac_five_one_arrival_per_wave(o: EvacuateOptions) -> Plan {
    evac(
        &five_of_42_gib_on_pve1(),
        &["pve1"],
        &EvacuateOptions {
            max_inflow_per_node: 1,
            ..o
        },
    )
}

#[test]
fn largest_first_spread_by_load_share_in_waves() {
    let p = evac_five_one_arrival_per_wave(EvacuateOptions::default());
    // Load shares after each arrival (used / size): 102 (16) → pve3 20/64 (pve2 26/64, pve4
    // 16/32); 104 (12) → pve2 22/64 (pve3 32/64, pve4 12/32); 103 (8) → pve4 8/32; 101 (4) → pve3
    // 24/64 = pve4 12/32, tie → name; 105 (2) → pve4 10/32. Every node takes guests, so the waves
    // are two instead of three.
    assert_eq!(
        moves(&p),
        vec![
            (102, "pve3", 0),
            (104, "pve2", 0),
            (103, "pve4", 0),
            (101, "pve3", 1),
            (105, "pve4", 1),
        ]
    );
}

#[test]
fn with_the_free_memory_policy_the_most_free_bytes_take_guests_in_waves() {
    let p = evac_five_one_arrival_per_wave(EvacuateOptions {
        policy: "free-memory".into(),
        ..EvacuateOptions::default()
    });
    // Free before: pve2 54, pve3 60, pve4 32 GiB. 102 (16) → pve3 (44 left), 104 (12) → pve2 (42),
    // 103 (8) → pve3 (36), 101 (4) → pve2 (38), 105 (2) → pve2 (36 ≥ pve3 36, tie → name).
    // With at most one arrival per node and wave, pve2's third arrival waits for wave 2.
    assert_eq!(
        moves(&p),
        vec![
            (102, "pve3", 0),
            (104, "pve2", 0),
            (103, "pve3", 1),
            (101, "pve2", 1),
            (105, "pve2", 2),
        ]
    );
    assert!(
        p.migrations
            .iter()
            .all(|m| m.purpose == Purpose::Evacuate && m.online)
    );
    assert_eq!(
        p.migrations[0].reason,
        "evacuate: pve1 is in maintenance (maintenance requested); pve3 ranks first of 3 feasible nodes under policy free-memory (score 100.0, next 86.4); spread 15.6 pp → 31.3 pp"
    );
    assert!(p.unplaced.is_empty());
    assert!(p.violations_after.is_empty());
    assert_eq!(
        p.violations_before.len(),
        5,
        "the requested node counts as in maintenance"
    );
    assert_eq!(p.nodes_after[0].guests, 0);
    assert_eq!(
        p.summary,
        "evacuate pve1: 5 migration(s) in 3 wave(s), 42.0 GiB to copy"
    );
}

#[test]
fn no_limit_puts_everything_in_one_wave_and_nothing_lands_on_the_evacuated_node() {
    let c = four_nodes()
        .guest(vm(101, "pve1"))
        .guest(vm(102, "pve1"))
        .guest(vm(103, "pve1"))
        .build();
    let p = evac(
        &c,
        &["pve1"],
        &EvacuateOptions {
            max_inflow_per_node: 0,
            ..EvacuateOptions::default()
        },
    );
    assert_eq!(p.migrations.len(), 3);
    assert!(p.migrations.iter().all(|m| m.wave == 0 && m.to != "pve1"));
}

#[test]
fn affinity_groups_leave_as_bundles_and_anti_affinity_is_honoured() {
    let c = four_nodes()
        .guest(
            vm(101, "pve1")
                .mem(6 * GIB, 8 * GIB)
                .tagged("flxp.affinity.app"),
        )
        .guest(
            vm(102, "pve1")
                .mem(6 * GIB, 8 * GIB)
                .tagged("flxp.affinity.app"),
        )
        .guest(
            vm(103, "pve1")
                .mem(2 * GIB, 4 * GIB)
                .tagged("flxp.anti-affinity.web"),
        )
        .guest(
            vm(201, "pve2")
                .mem(2 * GIB, 4 * GIB)
                .tagged("flxp.anti-affinity.web"),
        )
        .guest(
            vm(301, "pve3")
                .mem(2 * GIB, 4 * GIB)
                .tagged("flxp.anti-affinity.web"),
        )
        .build();
    let p = evac(&c, &["pve1"], &EvacuateOptions::default());
    // The bundle (12 GiB) first, to the node with most free memory; 103 may only go to pve4.
    assert_eq!(
        targets(&p),
        vec![(101, "pve2"), (102, "pve2"), (103, "pve4")]
    );
    assert_eq!(p.migrations[0].bundle, vec![101, 102]);
    assert!(
        p.migrations[0]
            .reason
            .contains("group flxp.affinity.app moves together"),
        "{}",
        p.migrations[0].reason
    );
    assert!(p.violations_after.is_empty(), "{:?}", p.violations_after);
}

#[test]
fn guests_that_fit_nowhere_are_reported_and_nothing_else_moves_for_them() {
    let c = ClusterBuilder::new()
        .node(node("pve1").memory(64 * GIB))
        .node(node("pve2").memory(32 * GIB))
        .node(node("pve3").memory(32 * GIB).notes("flxp.taint.gpu"))
        .guest(vm(101, "pve1").mem(40 * GIB, 40 * GIB))
        .guest(vm(102, "pve1").mem(4 * GIB, 4 * GIB))
        .guest(vm(201, "pve2").mem(8 * GIB, 8 * GIB))
        .build();
    let p = evac(&c, &["pve1"], &EvacuateOptions::default());
    assert_eq!(p.migrations.len(), 1);
    assert_eq!(
        (p.migrations[0].vmid, p.migrations[0].to.as_str()),
        (102, "pve2")
    );
    assert_eq!(p.unplaced.len(), 1);
    let u = &p.unplaced[0];
    assert_eq!(
        (u.vmid, u.node.as_str(), u.rule.as_str()),
        (101, "pve1", "maintenance")
    );
    assert_eq!(
        u.reason,
        "pve2: memory (needs 40.0 GiB but 20.0 GiB is available (32.0 GiB total − 12.0 GiB used − 0 B reserve)); pve3: memory (needs 40.0 GiB but 32.0 GiB is available (32.0 GiB total − 0 B used − 0 B reserve)), taints (node is tainted gpu (not tolerated))"
    );
    assert!(
        p.summary.ends_with("1 guest(s) fit nowhere"),
        "{}",
        p.summary
    );
    assert!(p.has_unplaced());
}

#[test]
fn guests_that_may_not_move_stay_with_the_reason() {
    let c = four_nodes()
        .guest(vm(101, "pve1").tagged("flxp.ignore;flxp.affinity.app"))
        .guest(vm(102, "pve1").tagged("flxp.affinity.app"))
        .guest(vm(103, "pve1").locked("backup"))
        .guest(vm(104, "pve1").stopped())
        .guest(vm(105, "pve1").template())
        .build();
    let p = evac(&c, &["pve1"], &EvacuateOptions::default());
    assert_eq!(
        moves(&p),
        vec![(104, "pve2", 0)],
        "only the stopped guest can leave"
    );
    assert!(
        p.migrations[0]
            .reason
            .starts_with("offline migration (guest is stopped): evacuate")
    );
    assert_eq!(
        skipped(&p),
        vec![
            (
                101,
                "tagged flxp.ignore / plb_ignore: never moved; pve1 is in maintenance (maintenance requested)"
            ),
            (
                102,
                "moves only with flxp.affinity.app, and 101 stays (tagged flxp.ignore / plb_ignore: never moved); pve1 is in maintenance (maintenance requested)"
            ),
            (
                103,
                "locked (backup); pve1 is in maintenance (maintenance requested)"
            ),
            (
                105,
                "a template: never moved; pve1 is in maintenance (maintenance requested)"
            ),
        ]
    );
    let running_only = evac(
        &c,
        &["pve1"],
        &EvacuateOptions {
            include_stopped: false,
            ..EvacuateOptions::default()
        },
    );
    assert!(running_only.migrations.is_empty());
}

#[test]
fn nodes_in_maintenance_are_found_when_none_are_named_and_ha_guests_are_left_to_ha() {
    let c = ClusterBuilder::new()
        .node(node("pve1").hastate("maintenance"))
        .node(node("pve2").notes("flxp.maintenance"))
        .node(node("pve3"))
        .guest(vm(101, "pve1").hastate("started"))
        .guest(vm(102, "pve1"))
        .guest(vm(201, "pve2"))
        .build();
    let rules = Rules::compile(&c);
    let p = evacuate(
        &c,
        &rules,
        &State::new(&c),
        &placer(),
        &[],
        &EvacuateOptions::default(),
    )
    .unwrap();
    assert_eq!(targets(&p), vec![(102, "pve3"), (201, "pve3")]);
    assert_eq!(p.skipped.len(), 1);
    assert!(
        p.skipped[0]
            .reason
            .starts_with("HA-managed on a node in HA maintenance: Proxmox HA moves it"),
        "{:?}",
        p.skipped
    );
    assert!(
        p.summary.starts_with("evacuate pve1, pve2: 2 migration(s)"),
        "{}",
        p.summary
    );
}
