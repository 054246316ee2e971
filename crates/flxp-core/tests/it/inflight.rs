//! A migration in flight counts on its source and its target until it lands: in the planner,
//! the pre-step check, placement and the node's memory.

use flxp_core::balance::{BalanceOptions, Trigger, check_step, plan};
use flxp_core::builder::*;
use flxp_core::placement::PlacementRequest;
use flxp_core::{Cluster, Rules, State};

use crate::support::{migrating, placer};

const DB: &str = "flxp.anti-affinity.db";

/// Four nodes of 64 GiB: `db101` (a member of `db` on a) and 102 of `db` on c, c crowded so that
/// balancing wants to move 102 away; d is busy too.
fn crowded_c(db101: GuestSpec) -> ClusterBuilder {
    ClusterBuilder::new()
        .node(node("a").memory(64 * GIB))
        .node(node("b").memory(64 * GIB))
        .node(node("c").memory(64 * GIB))
        .node(node("d").memory(64 * GIB))
        .guest(db101)
        .guest(vm(102, "c").mem(8 * GIB, 8 * GIB).tagged(DB))
        .guest(vm(103, "a").mem(30 * GIB, 30 * GIB))
        .guest(vm(104, "c").mem(40 * GIB, 40 * GIB))
        .guest(vm(105, "d").mem(30 * GIB, 30 * GIB))
}

/// 101 on a migrating to b (the emptiest node), 102 on c, c crowded so that balancing wants to
/// move 102 away; d is busy too.
fn cluster(target: Option<&str>) -> Cluster {
    crowded_c(vm(101, "a").mem(8 * GIB, 8 * GIB).tagged(DB))
        .task(migrating(101, "a", target))
        .time(10_000)
        .build()
}

fn eager() -> BalanceOptions {
    BalanceOptions {
        trigger: Trigger {
            threshold: Some(0.0),
            target: Some(0.0),
            ..Trigger::default()
        },
        max_migrations: 100,
        ..BalanceOptions::default()
    }
}

fn balance_moves(c: &Cluster) -> Vec<(u32, String)> {
    let rules = Rules::compile(c);
    let p = plan(c, &rules, &State::new(c), &placer(), &eager()).unwrap();
    p.migrations
        .iter()
        .map(|m| (m.vmid, m.to.clone()))
        .collect()
}

fn place_db(c: &Cluster, memory: u64) -> flxp_core::placement::Placement {
    let rules = Rules::compile(c);
    let req = PlacementRequest {
        memory,
        cores: 1.0,
        tags: vec![DB.to_owned()],
        ..PlacementRequest::default()
    };
    placer().place(c, &rules, &State::new(c), &req).unwrap()
}

#[test]
fn the_plan_never_moves_another_member_to_the_target_of_one_in_flight() {
    // Without the migration, 102 goes to b: b is the emptiest node.
    let idle = crowded_c(vm(101, "a").mem(8 * GIB, 8 * GIB).tagged(DB)).build();
    assert!(
        balance_moves(&idle).contains(&(102, "b".into())),
        "fixture: 102 would go to b"
    );
    let c = cluster(Some("b"));
    let moves = balance_moves(&c);
    assert!(!moves.iter().any(|(v, _)| *v == 101), "{moves:?}");
    assert!(!moves.contains(&(102, "b".into())), "{moves:?}");
}

#[test]
fn the_pre_step_check_refuses_the_target_of_a_member_in_flight() {
    let c = cluster(Some("b"));
    let rules = Rules::compile(&c);
    let m = flxp_core::balance::Migration {
        vmid: 102,
        kind: flxp_core::cluster::GuestKind::Qemu,
        name: String::new(),
        from: "c".into(),
        to: "b".into(),
        reason: String::new(),
        purpose: flxp_core::balance::Purpose::Balance,
        online: true,
        bytes: 0,
        bundle: Vec::new(),
        group: None,
        step: 0,
        wave: 0,
        imbalance_after: 0.0,
    };
    let err = check_step(&c, &rules, &State::new(&c), &placer(), &m).unwrap_err();
    assert!(
        err[0].to_string().contains("anti-affinity") && err[0].to_string().contains("101"),
        "{err:?}"
    );
}

#[test]
fn placement_of_a_new_member_refuses_the_source_and_the_target() {
    let c = cluster(Some("b"));
    let p = place_db(&c, GIB);
    let refused: Vec<&str> = p
        .candidates
        .iter()
        .filter(|x| !x.feasible)
        .map(|x| x.node.as_str())
        .collect();
    assert!(
        refused.contains(&"a") && refused.contains(&"b"),
        "{refused:?}"
    );
    assert!(refused.contains(&"c"), "102 is on c: {refused:?}");
    assert_eq!(p.node.as_deref(), Some("d"));
}

#[test]
fn the_target_counts_the_memory_of_the_guest_in_flight() {
    let c = cluster(Some("b"));
    let b = c.node_idx("b").unwrap();
    let s = State::new(&c);
    assert_eq!(s.usage(b).mem, 8 * GIB);
    assert_eq!(s.usage(b).committed_mem, 8 * GIB);
    // Without a db tag, 60 GiB would fit on an empty b but not next to 101's 8 GiB.
    let rules = Rules::compile(&c);
    let req = PlacementRequest {
        memory: 60 * GIB,
        cores: 1.0,
        ..PlacementRequest::default()
    };
    let p = placer().place(&c, &rules, &s, &req).unwrap();
    let on_b = p.candidates.iter().find(|x| x.node == "b").unwrap();
    assert!(!on_b.feasible, "{on_b:?}");
    assert!(
        on_b.reasons.iter().any(|r| r.starts_with("memory")),
        "{on_b:?}"
    );
}

#[test]
fn a_guest_in_flight_counts_once_where_it_lands_and_keeps_its_room_on_its_source() {
    // a reports 40 GiB used, 16 of them 101's, which is on its way to b; b reports 10 GiB, 4 of
    // them the quarter of 101 its log says is copied.
    let c = ClusterBuilder::new()
        .node(node("a").memory(64 * GIB).used(40 * GIB))
        .node(node("b").memory(64 * GIB).used(10 * GIB))
        .guest(vm(101, "a").mem(16 * GIB, 16 * GIB))
        .task(flxp_core::snapshot::Task {
            arrived: Some(0.25),
            ..migrating(101, "a", Some("b"))
        })
        .time(10_000)
        .build();
    let (a, b) = (c.node_idx("a").unwrap(), c.node_idx("b").unwrap());
    let s = State::new(&c);
    // b: what it reports, plus the 12 GiB of 101 still to come; not the 4 GiB twice.
    assert_eq!(s.usage(b).mem, 22 * GIB);
    // a: its load is what it keeps once 101 has landed; the room 101 holds until then is kept.
    assert_eq!(
        (s.usage(a).mem, s.usage(a).mem_held()),
        (24 * GIB, 40 * GIB)
    );
    let rules = Rules::compile(&c);
    let on = |node: &str, memory: u64| {
        let req = PlacementRequest {
            memory,
            cores: 1.0,
            tags: vec![format!("flxp.node.{node}")],
            ..PlacementRequest::default()
        };
        placer().place(&c, &rules, &s, &req).unwrap().node
    };
    assert_eq!(on("a", 24 * GIB), Some("a".into()));
    assert_eq!(on("a", 25 * GIB), None, "101 still holds its 16 GiB on a");
    assert_eq!(on("b", 42 * GIB), Some("b".into()));
    assert_eq!(
        on("b", 43 * GIB),
        None,
        "101's last 12 GiB are on their way to b"
    );
}

#[test]
fn an_unknown_target_keeps_every_other_member_where_it_is_with_a_warning() {
    let c = cluster(None);
    let w: Vec<String> = c.warnings.iter().map(ToString::to_string).collect();
    assert!(
        w.iter()
            .any(|w| w.contains("qemu/101") && w.contains("unknown node")),
        "{w:?}"
    );
    let moves = balance_moves(&c);
    assert!(
        !moves.iter().any(|(v, _)| *v == 101 || *v == 102),
        "{moves:?}"
    );
    assert_eq!(place_db(&c, GIB).node, None);
    // A target that is not in the cluster is as unknown.
    let c = cluster(Some("zz"));
    assert!(c.warnings.iter().any(|w| w.to_string().contains("zz")));
    assert_eq!(place_db(&c, GIB).node, None);
}

/// 101 of `db` on a migrating to b, where 102 of `db` already runs: the group is crowded on b as
/// soon as 101 lands.
fn landing_on_a_member(target: &str) -> Cluster {
    ClusterBuilder::new()
        .node(node("a").memory(64 * GIB))
        .node(node("b").memory(64 * GIB))
        .node(node("c").memory(64 * GIB))
        .guest(vm(101, "a").mem(8 * GIB, 8 * GIB).tagged(DB))
        .guest(vm(102, "b").mem(8 * GIB, 8 * GIB).tagged(DB))
        .task(migrating(101, "a", Some(target)))
        .time(10_000)
        .build()
}

#[test]
fn the_rule_checker_counts_a_member_in_flight_on_its_target() {
    let c = landing_on_a_member("b");
    let rules = Rules::compile(&c);
    let found = flxp_core::constraints::breaches(&c, &rules, &State::new(&c));
    let b = c.node_idx("b").unwrap();
    let vmids = |gs: &[flxp_core::cluster::GuestIdx]| -> Vec<u32> {
        gs.iter().map(|&g| c.guest(g).vmid).collect()
    };
    assert!(
        found.iter().any(|x| matches!(x,
            flxp_core::constraints::Breach::Crowded { node, guests, .. }
                if *node == b && vmids(guests) == [101, 102])),
        "{found:?}"
    );
    // The plan fixes it with the member that can move: 102 leaves b, 101 goes on landing.
    let moves = balance_moves(&c);
    assert!(
        moves.iter().any(|(v, to)| *v == 102 && to == "c"),
        "{moves:?}"
    );
    assert!(!moves.iter().any(|(v, _)| *v == 101), "{moves:?}");
    // Towards a node with no member, nothing is broken.
    let c = landing_on_a_member("c");
    let rules = Rules::compile(&c);
    assert_eq!(
        flxp_core::constraints::breaches(&c, &rules, &State::new(&c)),
        Vec::new()
    );
}

#[test]
fn a_new_member_of_an_affinity_group_follows_a_member_in_flight_to_its_target() {
    const WEB: &str = "flxp.affinity.web";
    let c = ClusterBuilder::new()
        .node(node("a").memory(64 * GIB))
        .node(node("b").memory(64 * GIB))
        .node(node("c").memory(64 * GIB))
        .guest(vm(201, "a").mem(8 * GIB, 8 * GIB).tagged(WEB))
        .task(migrating(201, "a", Some("b")))
        .time(10_000)
        .build();
    let rules = Rules::compile(&c);
    let req = PlacementRequest {
        memory: GIB,
        cores: 1.0,
        tags: vec![WEB.to_owned()],
        ..PlacementRequest::default()
    };
    let p = placer().place(&c, &rules, &State::new(&c), &req).unwrap();
    // On a, the group would be split the moment 201 lands on b.
    assert_eq!(p.node.as_deref(), Some("b"), "{:?}", p.candidates);
}

/// 101 of `db` on a, HA-managed, with a move to `target` that HA was asked for and has not
/// started yet (no migration task runs): `crm_state` `state`, its target from `manager_status`.
fn ha_moving(state: &str, target: &str) -> Cluster {
    let mut snapshot = crowded_c(vm(101, "a").mem(8 * GIB, 8 * GIB).tagged(DB).hastate(state))
        .time(10_000)
        .snapshot();
    snapshot.ha.status.push(flxp_core::snapshot::HaStatusEntry {
        id: Some("service:vm:101".into()),
        kind: Some("service".into()),
        node: Some("a".into()),
        sid: Some("vm:101".into()),
        crm_state: Some(state.into()),
        state: Some(state.into()),
        target: Some(target.into()),
        ..Default::default()
    });
    Cluster::from_snapshot(&snapshot, &flxp_core::Overrides::default()).unwrap()
}

#[test]
fn a_move_ha_was_asked_for_counts_on_its_target_before_its_task_starts() {
    for state in ["migrate", "relocate"] {
        let c = ha_moving(state, "b");
        let b = c.node_idx("b").unwrap();
        assert_eq!(State::new(&c).usage(b).mem, 8 * GIB, "{state}");
        let moves = balance_moves(&c);
        assert!(!moves.iter().any(|(v, _)| *v == 101), "{state}: {moves:?}");
        assert!(!moves.contains(&(102, "b".into())), "{state}: {moves:?}");
        let p = place_db(&c, GIB);
        assert_eq!(p.node.as_deref(), Some("d"), "{state}: {:?}", p.candidates);
    }
    // Once HA has it started where it is, nothing is in flight.
    let c = ha_moving("started", "b");
    let b = c.node_idx("b").unwrap();
    assert_eq!(State::new(&c).usage(b).mem, 0);
}

#[test]
fn a_guest_in_flight_takes_its_cpu_load_to_where_it_lands() {
    // a runs at 6 of its 16 cores, 4 of them 101's, which is on its way to b (at 2 of 16): once
    // 101 has landed a shows 2 and b 6, and that is what a plan measures from now.
    let c = ClusterBuilder::new()
        .node(
            node("a")
                .cpus(16.0)
                .load(6.0 / 16.0)
                .memory(64 * GIB)
                .used(20 * GIB),
        )
        .node(
            node("b")
                .cpus(16.0)
                .load(2.0 / 16.0)
                .memory(64 * GIB)
                .used(10 * GIB),
        )
        .guest(vm(101, "a").mem(8 * GIB, 8 * GIB).cores(4.0, 1.0))
        .task(migrating(101, "a", Some("b")))
        .time(10_000)
        .build();
    let (a, b) = (c.node_idx("a").unwrap(), c.node_idx("b").unwrap());
    let s = State::new(&c);
    assert!((s.usage(a).cpu - 2.0).abs() < 1e-9, "{:?}", s.usage(a));
    assert!((s.usage(b).cpu - 6.0).abs() < 1e-9, "{:?}", s.usage(b));
    // What it has committed stays on a until it lands, as its memory's room does.
    assert_eq!(s.usage(a).committed_cpus, 4.0);
    assert_eq!(s.usage(b).committed_cpus, 4.0);
}
