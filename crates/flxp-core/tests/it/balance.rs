//! Rebalancing plans on concrete clusters: exact moves, order and reasons; ProxLB's cases from
//! docs/rebalancing-reference.md §1.2 done in one plan; Proxmox's single-move methods on the
//! docs/proxmox-behaviour.md §4 fixture.

use flxp_core::balance::methods::{PlanInput, pve_bruteforce, pve_topsis};
use flxp_core::balance::{
    BalanceOptions, Measure, MethodName, Plan, Purpose, Trigger, check_step, imbalance, plan,
    rank_moves, replay, run_until_stable,
};
use flxp_core::builder::*;
use flxp_core::snapshot::Task;
use flxp_core::{Cluster, Rules, State};

use crate::support::{placer, skipped};

/// Plans and checks that the plan replays step by step on the snapshot's state.
pub fn plan_with(c: &Cluster, options: &BalanceOptions) -> Plan {
    let rules = Rules::compile(c);
    let state = State::new(c);
    let p = plan(c, &rules, &state, &placer(), options).unwrap();
    replay(c, &rules, &state, &placer(), &p.migrations).unwrap();
    p
}

fn moves(p: &Plan) -> Vec<(u32, &str, &str)> {
    p.migrations
        .iter()
        .map(|m| (m.vmid, m.from.as_str(), m.to.as_str()))
        .collect()
}

fn spread_options(threshold: f64, target: f64) -> BalanceOptions {
    BalanceOptions {
        trigger: Trigger {
            threshold: Some(threshold),
            target: Some(target),
            ..Trigger::default()
        },
        max_migrations: 100,
        ..BalanceOptions::default()
    }
}

// ---- ProxLB's greedy pass, as docs/rebalancing-reference.md §1.1 describes it (memory, used) ----

#[derive(Clone)]
struct LbNode {
    total: f64,
    used: f64,
}

#[derive(Clone)]
struct LbGuest {
    node: usize,
    mem: f64,
}

/// One ProxLB cycle: guests in (1 member, memory ascending) order, each moved only if it sits on
/// the currently hottest node (ties: first node), to the most free node (lowest used %), if its
/// memory is below the target's free memory; stops once the spread is within `balanciness`.
/// Returns the number of migrations the cycle executes and the bytes they copy.
fn proxlb_cycle(nodes: &mut [LbNode], guests: &mut [LbGuest], balanciness: f64) -> (usize, f64) {
    let pct = |n: &LbNode| 100.0 * n.used / n.total;
    let spread_ok = |nodes: &[LbNode]| {
        let v: Vec<f64> = nodes.iter().map(pct).collect();
        let hi = v.iter().copied().fold(f64::MIN, f64::max);
        let lo = v.iter().copied().fold(f64::MAX, f64::min);
        hi - lo <= balanciness
    };
    let argmin = |nodes: &[LbNode]| {
        (0..nodes.len()).fold(0, |b, i| {
            if pct(&nodes[i]) < pct(&nodes[b]) {
                i
            } else {
                b
            }
        })
    };
    let argmax = |nodes: &[LbNode]| {
        (0..nodes.len()).fold(0, |b, i| {
            if pct(&nodes[i]) > pct(&nodes[b]) {
                i
            } else {
                b
            }
        })
    };
    if spread_ok(nodes) {
        return (0, 0.0);
    }
    let mut order: Vec<usize> = (0..guests.len()).collect();
    order.sort_by(|&a, &b| guests[a].mem.total_cmp(&guests[b].mem));
    let mut target_of: Vec<Option<usize>> = vec![None; guests.len()];
    for g in order {
        if spread_ok(nodes) {
            break;
        }
        let target = argmin(nodes);
        let hot = argmax(nodes);
        if guests[g].node != hot {
            continue;
        }
        if guests[g].mem >= nodes[target].total - nodes[target].used {
            continue;
        }
        let src = target_of[g].unwrap_or(guests[g].node);
        nodes[src].used -= guests[g].mem;
        nodes[target].used += guests[g].mem;
        target_of[g] = Some(target);
    }
    let (mut executed, mut bytes) = (0, 0.0);
    for (g, t) in target_of.iter().enumerate() {
        if let Some(t) = *t {
            if t != guests[g].node {
                guests[g].node = t;
                executed += 1;
                bytes += guests[g].mem;
            }
        }
    }
    (executed, bytes)
}

/// ProxLB cycles until a cycle moves nothing: (cycles that moved, migrations, final spread).
fn proxlb_until_stable(c: &Cluster, balanciness: f64) -> (usize, usize, f64) {
    let (cycles, moves, spread, _) = proxlb_run(c, balanciness);
    (cycles, moves, spread)
}

/// Like [`proxlb_until_stable`], with the bytes copied.
fn proxlb_run(c: &Cluster, balanciness: f64) -> (usize, usize, f64, f64) {
    let mut nodes: Vec<LbNode> = c
        .nodes()
        .iter()
        .map(|n| LbNode {
            total: n.maxmem as f64,
            used: 0.0,
        })
        .collect();
    let mut guests: Vec<LbGuest> = c
        .guests()
        .iter()
        .map(|g| LbGuest {
            node: g.node.get(),
            mem: g.mem as f64,
        })
        .collect();
    for g in &guests {
        nodes[g.node].used += g.mem;
    }
    let (mut cycles, mut total, mut bytes) = (0, 0, 0.0);
    for _ in 0..20 {
        let (n, b) = proxlb_cycle(&mut nodes, &mut guests, balanciness);
        if n == 0 {
            break;
        }
        cycles += 1;
        total += n;
        bytes += b;
    }
    let v: Vec<f64> = nodes.iter().map(|n| 100.0 * n.used / n.total).collect();
    let spread =
        v.iter().copied().fold(f64::MIN, f64::max) - v.iter().copied().fold(f64::MAX, f64::min);
    (cycles, total, spread, bytes)
}

// ---- docs/rebalancing-reference.md §1.2, case by case ------------------------------------------

#[test]
fn proxlb_80_20_20_is_balanced_in_four_moves_as_proxlb_does() {
    let c = sized(&[
        ("a", 100, &[10; 8]),
        ("b", 100, &[10, 10]),
        ("c", 100, &[10, 10]),
    ]);
    let p = plan_with(&c, &spread_options(5.0, 5.0));
    assert_eq!(
        moves(&p),
        vec![
            (101, "a", "b"),
            (102, "a", "c"),
            (103, "a", "b"),
            (104, "a", "c")
        ]
    );
    assert_eq!(p.imbalance_after, 0.0);
    assert_eq!(
        proxlb_until_stable(&c, 5.0),
        (1, 4, 0.0),
        "the model reproduces §1.2"
    );
}

#[test]
fn proxlb_70_70_10_needs_three_cycles_there_and_one_plan_here() {
    let c = sized(&[
        ("a", 100, &[7; 10]),
        ("b", 100, &[7; 10]),
        ("c", 100, &[7, 3]),
    ]);
    let (cycles, lb_moves, lb_spread) = proxlb_until_stable(&c, 5.0);
    assert_eq!(
        (cycles, lb_moves),
        (3, 6),
        "§1.2: 2 moves per cycle, 3 cycles"
    );
    assert!((lb_spread - 3.0).abs() < 1e-9, "49/49/52: {lb_spread}");
    let p = plan_with(&c, &spread_options(5.0, 5.0));
    assert!(p.migrations.len() <= lb_moves, "{:?}", moves(&p));
    assert!(
        p.imbalance_after <= lb_spread + 1e-9,
        "{}",
        p.imbalance_after
    );
    // Both hot nodes give up guests in turn, in one plan.
    assert_eq!(
        moves(&p),
        vec![
            (101, "a", "c"),
            (111, "b", "c"),
            (102, "a", "c"),
            (112, "b", "c"),
            (103, "a", "c"),
            (113, "b", "c")
        ]
    );
}

/// 4 heterogeneous nodes (256/128/128/64 GiB), 38 guests of 2-16 GiB, at 78/95/0/0 %.
fn heterogeneous_40() -> Cluster {
    let cycle = [2u64, 4, 6, 8, 10, 12, 14, 16];
    // a: 200 GiB of 256 (78 %), b: 122 GiB of 128 (95 %).
    let a: Vec<u64> = [&cycle[..], &cycle[..], &[2, 4, 6, 8, 10, 12, 14]].concat();
    let b: Vec<u64> = [&cycle[..], &[2, 4, 6, 8, 10, 12, 8]].concat();
    assert_eq!((a.iter().sum::<u64>(), b.iter().sum::<u64>()), (200, 122));
    sized(&[
        ("a", 256, &a),
        ("b", 128, &b),
        ("c", 128, &[]),
        ("d", 64, &[]),
    ])
}

#[test]
fn proxlb_heterogeneous_guests_reach_its_spread_with_fewer_migrations() {
    let c = heterogeneous_40();
    let (cycles, lb_moves, lb_spread, lb_bytes) = proxlb_run(&c, 5.0);
    let p = plan_with(&c, &spread_options(5.0, lb_spread.max(5.0)));
    eprintln!(
        "ProxLB: {cycles} cycles, {lb_moves} migrations, {:.0} GiB, spread {lb_spread:.1}; flxp: {} migrations, {:.0} GiB, spread {:.1}",
        lb_bytes / GIB as f64,
        p.migrations.len(),
        p.bytes as f64 / GIB as f64,
        p.imbalance_after
    );
    // Bytes stay in the same range (ProxLB moves many small guests; flxp fewer, larger ones).
    assert!(
        (p.bytes as f64) < 1.25 * lb_bytes,
        "{} vs {lb_bytes}",
        p.bytes
    );

    assert!(
        p.migrations.len() < lb_moves,
        "flxp {} migrations vs ProxLB {lb_moves}",
        p.migrations.len()
    );
    assert!(
        p.imbalance_after <= lb_spread.max(5.0) + 1e-9,
        "flxp spread {} vs ProxLB {lb_spread}",
        p.imbalance_after
    );
    assert!(p.migrations.iter().all(|m| m.purpose == Purpose::Balance));
}

#[test]
fn proxlb_broken_anti_affinity_is_one_fix_and_nothing_else() {
    // w1 and w2 share the hottest node a. ProxLB needs 3 moves, one of them an unrelated guest
    // onto a (§1.2); one move of w2 to the node with the most free memory fixes it here.
    let c = ClusterBuilder::new()
        .node(node("a").memory(100 * GIB))
        .node(node("b").memory(100 * GIB))
        .node(node("c").memory(100 * GIB))
        .guest(
            vm(101, "a")
                .named("w1")
                .mem(8 * GIB, 8 * GIB)
                .tagged("plb_anti_affinity_web"),
        )
        .guest(
            vm(102, "a")
                .named("w2")
                .mem(8 * GIB, 8 * GIB)
                .tagged("plb_anti_affinity_web"),
        )
        .guest(vm(103, "a").mem(20 * GIB, 20 * GIB))
        .guest(vm(201, "b").mem(30 * GIB, 30 * GIB))
        .guest(vm(301, "c").mem(28 * GIB, 28 * GIB))
        .build();
    let p = plan_with(&c, &BalanceOptions::default());
    assert_eq!(moves(&p), vec![(102, "a", "c")]);
    let m = &p.migrations[0];
    assert_eq!(m.purpose, Purpose::Fix);
    assert_eq!(
        m.reason,
        "fix plb_anti_affinity_web: 102 (w2) shares a with 101 (w1); c ranks first of 2 feasible nodes under policy free-memory (score 100.0, next 96.9); spread 8.0 pp → 8.0 pp"
    );
    assert_eq!(p.violations_before.len(), 1);
    assert!(p.violations_after.is_empty());
}

// ---- bundles, swaps, fixes ------------------------------------------------------------------------

#[test]
fn an_affinity_group_moves_as_one_bundle() {
    let c = ClusterBuilder::new()
        .node(node("a").memory(100 * GIB))
        .node(node("b").memory(100 * GIB))
        .guest(
            vm(101, "a")
                .mem(30 * GIB, 30 * GIB)
                .tagged("flxp.affinity.app"),
        )
        .guest(
            vm(102, "a")
                .mem(10 * GIB, 10 * GIB)
                .tagged("flxp.affinity.app"),
        )
        .guest(vm(103, "a").mem(40 * GIB, 40 * GIB).tagged("flxp.ignore"))
        .build();
    let p = plan_with(&c, &BalanceOptions::default());
    assert_eq!(moves(&p), vec![(101, "a", "b"), (102, "a", "b")]);
    for m in &p.migrations {
        assert_eq!(m.bundle, vec![101, 102]);
        assert_eq!(m.group.as_deref(), Some("flxp.affinity.app"));
        assert!(
            m.reason.contains("group flxp.affinity.app moves together"),
            "{}",
            m.reason
        );
    }
    assert_eq!(p.imbalance_after, 0.0, "40/40");
    assert_eq!(p.skipped.len(), 1, "{:?}", p.skipped);
    assert!(
        p.skipped[0].reason.contains("flxp.ignore"),
        "{:?}",
        p.skipped
    );
}

#[test]
fn a_swap_balances_when_no_single_move_can() {
    let c = sized(&[("a", 100, &[30, 30]), ("b", 100, &[20, 20])]);
    let p = plan_with(&c, &spread_options(10.0, 5.0));
    assert_eq!(moves(&p), vec![(101, "a", "b"), (103, "b", "a")]);
    assert!(p.migrations.iter().all(|m| m.purpose == Purpose::Swap));
    assert_eq!(p.imbalance_after, 0.0);
    let no_swaps = BalanceOptions {
        swaps: false,
        ..spread_options(10.0, 5.0)
    };
    assert!(plan_with(&c, &no_swaps).migrations.is_empty());
}

#[test]
fn a_pinned_guest_gets_room_made_on_its_node_first() {
    // 105 must run on a, which has 4 GiB free; moving 103 (2 GiB) off a makes room.
    let c = ClusterBuilder::new()
        .node(node("a").memory(32 * GIB))
        .node(node("b").memory(64 * GIB))
        .node(node("c").memory(64 * GIB))
        .guest(vm(101, "a").mem(20 * GIB, 20 * GIB))
        .guest(vm(102, "a").mem(6 * GIB, 6 * GIB))
        .guest(vm(103, "a").mem(2 * GIB, 2 * GIB))
        .guest(vm(105, "b").mem(5 * GIB, 8 * GIB).tagged("flxp.node.a"))
        .build();
    let p = plan_with(&c, &spread_options(100.0, 100.0));
    assert_eq!(
        moves(&p),
        vec![(103, "a", "c"), (105, "b", "a")],
        "103 is the smallest guest that frees enough"
    );
    assert_eq!(p.migrations[0].purpose, Purpose::MakeRoom);
    assert!(
        p.migrations[0]
            .reason
            .starts_with("make room on a for guest 105 (qemu105): it lacks 1.0 GiB"),
        "{}",
        p.migrations[0].reason
    );
    assert_eq!(p.migrations[1].purpose, Purpose::Fix);
    assert!(p.violations_after.is_empty());
    let no_room = BalanceOptions {
        make_room: 0,
        ..spread_options(100.0, 100.0)
    };
    let p = plan_with(&c, &no_room);
    assert!(p.migrations.is_empty());
    assert_eq!(p.unplaced.len(), 1);
    assert_eq!(p.unplaced[0].rule, "flxp.node");
    assert!(
        p.unplaced[0].reason.contains("a: memory"),
        "{}",
        p.unplaced[0].reason
    );
}

#[test]
fn a_split_affinity_group_joins_where_the_fewest_bytes_move() {
    let c = ClusterBuilder::new()
        .nodes(&["a", "b", "c"])
        .guest(
            vm(101, "a")
                .mem(2 * GIB, 4 * GIB)
                .tagged("flxp.affinity.db"),
        )
        .guest(
            vm(102, "b")
                .mem(8 * GIB, 8 * GIB)
                .tagged("flxp.affinity.db"),
        )
        .guest(vm(103, "b").mem(GIB, 8 * GIB).tagged("flxp.affinity.db"))
        .build();
    let p = plan_with(&c, &spread_options(100.0, 100.0));
    assert_eq!(moves(&p), vec![(101, "a", "b")]);
    assert!(
        p.migrations[0]
            .reason
            .starts_with("fix flxp.affinity.db: members are split over a (101), b (102, 103); b needs the fewest bytes moved (2.0 GiB)"),
        "{}",
        p.migrations[0].reason
    );
}

#[test]
fn stopped_guests_move_only_off_maintenance_or_to_their_pins_and_say_so() {
    let c = ClusterBuilder::new()
        .node(node("a").notes("flxp.maintenance"))
        .node(node("b"))
        .node(node("c"))
        .guest(vm(101, "a").stopped())
        .guest(vm(102, "b").stopped().tagged("flxp.node.c"))
        .guest(vm(103, "b").stopped())
        .guest(vm(104, "a").template())
        .build();
    let p = plan_with(&c, &BalanceOptions::default());
    assert_eq!(moves(&p), vec![(102, "b", "c"), (101, "a", "b")]);
    for m in &p.migrations {
        assert!(!m.online);
        assert_eq!(m.bytes, 0);
        assert!(
            m.reason
                .starts_with("offline migration (guest is stopped): "),
            "{}",
            m.reason
        );
    }
    assert_eq!(p.migrations[1].purpose, Purpose::Evacuate);
}

#[test]
fn guests_that_may_not_move_stay_and_are_listed() {
    let migrated = Task {
        kind: Some("qmigrate".into()),
        id: Some("104".into()),
        starttime: Some(9_000),
        endtime: Some(9_400),
        status: Some("OK".into()),
        ..Task::default()
    };
    let c = ClusterBuilder::new()
        .node(node("a").memory(100 * GIB))
        .node(node("b").memory(100 * GIB))
        .guest(vm(101, "a").mem(20 * GIB, 20 * GIB).tagged("flxp.ignore"))
        .guest(vm(102, "a").mem(20 * GIB, 20 * GIB).locked("backup"))
        .guest(vm(103, "a").mem(20 * GIB, 20 * GIB).hastate("started"))
        .guest(vm(104, "a").mem(20 * GIB, 20 * GIB))
        .guest(vm(105, "a").mem(5 * GIB, 5 * GIB))
        .task(migrated)
        .option("crs", serde_json::json!("ha=static,ha-auto-rebalance=1"))
        .time(10_000)
        .build();
    let p = plan_with(&c, &BalanceOptions::default());
    assert_eq!(moves(&p), vec![(105, "a", "b")], "only 105 may move");
    assert_eq!(
        skipped(&p),
        vec![
            (
                101,
                "not moved to balance: tagged flxp.ignore / plb_ignore: never moved"
            ),
            (102, "not moved to balance: locked (backup)"),
            (
                103,
                "not moved to balance: HA-managed while Proxmox's HA auto-rebalance is on: left to Proxmox"
            ),
            (
                104,
                "not moved to balance: a migration of it started 600 s ago, within the 1800 s cooldown"
            ),
        ]
    );
    let short = BalanceOptions {
        cooldown_secs: 300,
        ..BalanceOptions::default()
    };
    assert_eq!(moves(&plan_with(&c, &short))[0], (104, "a", "b"));
}

#[test]
fn the_budget_caps_the_plan_and_says_so() {
    let c = sized(&[("a", 100, &[10; 8]), ("b", 100, &[]), ("c", 100, &[])]);
    let p = plan_with(
        &c,
        &BalanceOptions {
            max_migrations: 2,
            ..spread_options(5.0, 5.0)
        },
    );
    assert_eq!(p.migrations.len(), 2);
    assert!(
        p.warnings
            .iter()
            .any(|w| w.to_string().contains("budget of 2 spent")),
        "{:?}",
        p.warnings
    );
}

#[test]
fn the_margin_drops_balancing_that_gains_too_little() {
    // 1 GiB guests cannot narrow 60/48 much in two moves: 60/48 → 58/50 is 16 % of 12 pp; the
    // margin 0.5 drops it, 0.1 keeps it.
    let c = sized(&[("a", 100, &[1; 60]), ("b", 100, &[1; 48])]);
    let mut o = BalanceOptions {
        max_migrations: 1,
        ..spread_options(10.0, 0.0)
    };
    let p = plan_with(&c, &o);
    assert_eq!(p.migrations.len(), 1);
    o.trigger.margin = 0.5;
    let p = plan_with(&c, &o);
    assert!(p.migrations.is_empty());
    assert!(
        p.warnings.iter().any(|w| w.to_string().contains("margin")),
        "{:?}",
        p.warnings
    );
}

#[test]
fn within_the_threshold_nothing_moves() {
    let c = sized(&[("a", 100, &[10, 10, 10]), ("b", 100, &[10, 10])]);
    let p = plan_with(&c, &BalanceOptions::default());
    assert!(p.is_empty());
    assert!(
        p.summary.contains("within the threshold 10.0 pp"),
        "{}",
        p.summary
    );
}

// ---- checking steps against a fresh cluster -------------------------------------------------------

#[test]
fn check_step_refuses_a_step_the_world_has_overtaken() {
    let c = sized(&[("a", 100, &[30, 30]), ("b", 100, &[10])]);
    let rules = Rules::compile(&c);
    let p = plan_with(&c, &BalanceOptions::default());
    let m = p.migrations[0].clone();
    assert_eq!((m.vmid, m.to.as_str()), (101, "b"));
    let s = State::new(&c);
    assert_eq!(check_step(&c, &rules, &s, &placer(), &m), Ok(()));
    // Someone else filled b meanwhile.
    let full = sized(&[("a", 100, &[30, 30]), ("b", 100, &[10, 80])]);
    let rules_full = Rules::compile(&full);
    let err = check_step(&full, &rules_full, &State::new(&full), &placer(), &m).unwrap_err();
    assert_eq!(
        err,
        vec![
            "b: memory: needs 30.0 GiB but 10.0 GiB is available (100.0 GiB total − 90.0 GiB used − 0 B reserve)"
        ]
    );
    // The guest moved away already.
    let mut moved = s.clone();
    moved.move_guest(&c, c.guest_idx(101).unwrap(), c.node_idx("b").unwrap());
    let err = check_step(&c, &rules, &moved, &placer(), &m).unwrap_err();
    assert_eq!(err, vec!["guest 101 is on b, not on a"]);
}

// ---- Proxmox's single-move methods ----------------------------------------------------------------

/// The docs/proxmox-behaviour.md §4 fixture as a cluster: node stats (cpu cores, maxcpu, mem MiB,
/// maxmem GiB) and vm:101 {cpu 0.7 of 4, mem 8 GiB of 16 GiB} on node1.
fn pve_fixture(caps: [(f64, u64); 3]) -> Cluster {
    let usage = [(1.7, 12334u64), (15.184, 529), (5.2, 9381)];
    let mut b = ClusterBuilder::new();
    for (i, (&(cpu, mem), (maxcpu, maxmem))) in usage.iter().zip(caps).enumerate() {
        b = b.node(
            node(&format!("node{}", i + 1))
                .cpus(maxcpu)
                .load(cpu / maxcpu)
                .memory(maxmem * GIB)
                .used(mem * MIB),
        );
    }
    // An HA resource: Proxmox's auto-rebalance moves only those.
    b.guest(
        vm(101, "node1")
            .hastate("started")
            .cores(4.0, 0.7 / 4.0)
            .mem(8 * GIB, 16 * GIB),
    )
    .build()
}

fn pve_options(method: MethodName) -> BalanceOptions {
    BalanceOptions {
        method,
        measure: Measure::Cv,
        ..BalanceOptions::default()
    }
}

#[test]
fn pve_methods_rank_the_fixture_moves_as_proxmox_does() {
    for (caps, imbalance_now) in [
        ([(16.0, 64), (16.0, 64), (16.0, 64)], 0.3460548572604576),
        ([(16.0, 128), (32.0, 96), (24.0, 64)], 0.23352917788066363),
    ] {
        let c = pve_fixture(caps);
        let rules = Rules::compile(&c);
        let s = State::new(&c);
        let now = imbalance(&c, &s, Measure::Cv, Default::default());
        assert!((now - imbalance_now).abs() < 1e-15, "{now}");
        let brute = rank_moves(
            &PlanInput::new(&c, &rules, &s, &placer()),
            &pve_options(pve_bruteforce::NAME),
            pve_bruteforce::RANKING,
        )
        .unwrap();
        let targets: Vec<&str> = brute.iter().map(|m| m.to.as_str()).collect();
        assert_eq!(targets, ["node3", "node2"]);
        assert!(brute.iter().all(|m| m.sid == "vm:101" && m.from == "node1"));
        let topsis = rank_moves(
            &PlanInput::new(&c, &rules, &s, &placer()),
            &pve_options(pve_topsis::NAME),
            pve_topsis::RANKING,
        )
        .unwrap();
        let targets: Vec<&str> = topsis.iter().map(|m| m.to.as_str()).collect();
        assert_eq!(targets, ["node2", "node3"]);
        // Each move raises the imbalance here, so neither method moves (the margin).
        for method in [pve_bruteforce::NAME, pve_topsis::NAME] {
            let p = plan_with(
                &c,
                &BalanceOptions {
                    trigger: Trigger {
                        threshold: Some(0.1),
                        ..Trigger::default()
                    },
                    ..pve_options(method)
                },
            );
            assert!(p.migrations.is_empty(), "{}", p.summary);
            assert!(p.summary.contains("margin"), "{}", p.summary);
        }
    }
}

#[test]
fn pve_bruteforce_replays_dynamic_auto_rebalance2() {
    // test-crs-dynamic-auto-rebalance2: 4 VMs (2 cores, 2 GiB each) on node1 of three 24-core,
    // 128 GiB nodes; raw CV 1.41 → 0.94 → 0.35, then no move passes the 0.1 margin.
    let mut b = ClusterBuilder::new();
    for n in ["node1", "node2", "node3"] {
        b = b.node(node(n).cpus(24.0).memory(128 * GIB));
    }
    for vmid in 101..=104 {
        b = b.guest(
            vm(vmid, "node1")
                .hastate("started")
                .cores(2.0, 1.0)
                .mem(2 * GIB, 4 * GIB),
        );
    }
    let c = b.build();
    let rules = Rules::compile(&c);
    let options = BalanceOptions {
        method: pve_bruteforce::NAME,
        measure: Measure::CvRaw,
        ..BalanceOptions::default()
    };
    let s = State::new(&c);
    let (end, done) = run_until_stable(
        &PlanInput::new(&c, &rules, &s, &placer()),
        &options,
        pve_bruteforce::RANKING,
        10,
    )
    .unwrap();
    let got: Vec<(u32, &str, String)> = done
        .iter()
        .map(|m| (m.vmid, m.to.as_str(), format!("{:.2}", m.imbalance_after)))
        .collect();
    assert_eq!(
        got,
        vec![
            (101, "node2", "0.94".to_owned()),
            (102, "node3", "0.35".to_owned())
        ]
    );
    assert_eq!(
        format!(
            "{:.2}",
            imbalance(&c, &s, Measure::CvRaw, Default::default())
        ),
        "1.41"
    );
    assert_eq!(
        format!(
            "{:.2}",
            imbalance(&c, &end, Measure::CvRaw, Default::default())
        ),
        "0.35"
    );
    // flxp's own planner gets there in one plan, with the same two moves.
    let flxp = plan_with(
        &c,
        &BalanceOptions {
            measure: Measure::CvRaw,
            ..BalanceOptions::default()
        },
    );
    assert_eq!(
        moves(&flxp),
        vec![(101, "node1", "node2"), (102, "node1", "node3")]
    );
}

/// Plans for a spread of 5 pp once it is above 10 pp, with at most `max_migrations` migrations.
fn plan_within_budget(c: &Cluster, max_migrations: usize) -> Plan {
    plan_with(
        c,
        &BalanceOptions {
            max_migrations,
            ..spread_options(10.0, 5.0)
        },
    )
}

#[test]
fn a_budget_too_small_to_lower_the_spread_is_named_as_the_cause() {
    // Two full nodes and two empty ones: one move leaves another node at the top and another at
    // the bottom, so the spread only falls with two moves.
    let c = sized(&[
        ("a", 64, &[16, 16, 16]),
        ("b", 64, &[16, 16, 16]),
        ("c", 64, &[]),
        ("d", 64, &[]),
    ]);
    let one = plan_within_budget(&c, 1);
    assert!(one.migrations.is_empty(), "{:?}", moves(&one));
    assert!(
        one.summary
            .ends_with("the migration budget of 1 leaves too few migrations for balancing to lower it (raise --max-migrations)"),
        "{}",
        one.summary
    );
    let two = plan_within_budget(&c, 2);
    assert_eq!(two.migrations.len(), 2, "{}", two.summary);
    assert!(two.imbalance_after < two.imbalance_before);
}

#[test]
fn a_budget_that_only_allows_gains_below_the_margin_is_named_as_the_cause() {
    // One move lowers the spread from 60 to 55 pp (8 %, under the 10 % margin); two reach 40.
    let c = sized(&[
        ("a", 100, &[10; 6]),
        ("b", 100, &[5; 11]),
        ("c", 100, &[]),
        ("d", 100, &[]),
    ]);
    let one = plan_within_budget(&c, 1);
    assert!(one.migrations.is_empty(), "{:?}", moves(&one));
    assert!(
        one.summary.ends_with(
            "within the migration budget of 1, balancing would gain less than the margin (raise --max-migrations)"
        ),
        "{}",
        one.summary
    );
    let two = plan_within_budget(&c, 2);
    assert_eq!(two.migrations.len(), 2, "{}", two.summary);
}

#[test]
fn a_soft_taint_on_the_emptiest_node_is_traded_for_balance_by_its_weight() {
    // a holds 60 GiB in six guests, b is empty but tainted prefer-no: each move to b lowers the
    // spread by 20 pp and leaves one soft rule of its guest unmet.
    let mut b = ClusterBuilder::new()
        .node(node("a").memory(100 * GIB))
        .node(node("b").memory(100 * GIB).notes("flxp.prefer-no.batch"));
    for vmid in 101..=106 {
        b = b.guest(vm(vmid, "a").mem(10 * GIB, 10 * GIB));
    }
    let c = b.build();
    let weighted = |w: Option<f64>| BalanceOptions {
        soft_weight: w,
        ..BalanceOptions::default()
    };
    // Unset: never traded, the cluster stays above the threshold.
    let never = plan_with(&c, &weighted(None));
    assert!(never.is_empty(), "{}", never.summary);
    // 10 pp per soft rule: each 20 pp step is worth it.
    let p = plan_with(&c, &weighted(Some(10.0)));
    assert_eq!(p.migrations.len(), 3, "{}", p.summary);
    assert!(p.imbalance_after < 1e-9, "{}", p.summary);
    assert!(p.migrations.iter().all(|m| m.to == "b"));
    assert!(
        p.migrations[0]
            .reason
            .contains("trades 1 soft rule (soft-weight 10 per rule)"),
        "{}",
        p.migrations[0].reason
    );
    // 0: soft rules ignored; 25 pp per rule: no step gains that much.
    assert_eq!(plan_with(&c, &weighted(Some(0.0))).migrations.len(), 3);
    assert!(plan_with(&c, &weighted(Some(25.0))).is_empty());
}

/// Under a CV measure a plan that lowers the CV needs at least one
/// migration; the bound said 0.
#[test]
fn a_plan_lowering_the_cv_has_a_bound_of_at_least_one_migration() {
    let c = sized(&[
        ("a", 100, &[10, 10, 10, 10]),
        ("b", 100, &[]),
        ("c", 100, &[5]),
    ]);
    for measure in [Measure::Cv, Measure::CvRaw] {
        let p = plan_with(
            &c,
            &BalanceOptions {
                measure,
                max_migrations: 100,
                ..BalanceOptions::default()
            },
        );
        assert!(p.imbalance_after < p.imbalance_before, "{}", p.summary);
        assert!(!p.migrations.is_empty());
        let need = p.bounds.migrations.unwrap();
        assert!(need >= 1, "{measure:?}: {:?}", p.bounds);
        assert!(need <= p.migrations.len());
    }
}
