//! Tests of the consolidation planner: floors, limits, reasons, resumed runs, arriving guests
//! and the work budget.
// Tests may panic: unwrapping is how they fail.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::placement::PlacementOptions;
use crate::testutil::*;

fn placer() -> Placer {
    Placer::new(PlacementOptions::default(), Vec::new()).unwrap()
}

fn run(c: &Cluster, o: &ConsolidateOptions) -> Consolidation {
    let rules = Rules::compile(c);
    let p = placer();
    consolidate(
        c,
        &rules,
        &State::new(c),
        &p,
        o,
        &EvacuateOptions::default(),
        &|_| {},
    )
    .unwrap()
}

/// Packing onto as few as one node, with no headroom for a node's failure.
fn packing() -> ConsolidateOptions {
    ConsolidateOptions {
        min_nodes: 1,
        headroom: false,
        ..ConsolidateOptions::default()
    }
}

fn kept(c: &Consolidation, node: &str) -> KeptBecause {
    c.kept.iter().find(|k| k.node == node).unwrap().because
}

/// Five 64 GiB nodes, each with one 8 GiB guest: room to pack them onto three.
fn light() -> ClusterBuilder {
    let mut b = ClusterBuilder::new();
    for (i, n) in ["a", "b", "c", "d", "e"].iter().enumerate() {
        b = b
            .node(node(n))
            .guest(vm(101 + i as u32, n).mem(8 * GIB, 8 * GIB));
    }
    b
}

#[test]
fn a_light_cluster_frees_nodes_down_to_the_quorum_floor() {
    let c = run(&light().build(), &ConsolidateOptions::default());
    assert_eq!(c.freed_names(), vec!["a", "b"]);
    assert_eq!(c.plan.migrations.len(), 2);
    assert_eq!(c.min_online, 3);
    assert_eq!(kept(&c, "c"), KeptBecause::Floor);
    assert!(
        c.kept[0].reason.contains("quorum needs more than half"),
        "{}",
        c.kept[0].reason
    );
    assert!(c.plan.migrations.iter().all(|m| m.to != "a" && m.to != "b"));
    // Only hypothetically in maintenance: not said to be, and no rule broken before.
    assert!(
        c.plan.violations_before.is_empty(),
        "{:?}",
        c.plan.violations_before
    );
    assert!(c.plan.nodes_before.iter().all(|n| !n.maintenance));
    for m in &c.plan.migrations {
        assert!(
            m.reason.contains("is being freed by the consolidation"),
            "{}",
            m.reason
        );
    }
}

#[test]
fn each_candidate_is_told_in_the_order_tried_with_its_outcome() {
    let c = light().build();
    let rules = Rules::compile(&c);
    let told = std::sync::Mutex::new(Vec::new());
    let tell = |j: Judged<'_>| {
        told.lock().unwrap().push((
            j.index,
            j.total,
            j.node.to_owned(),
            j.kept
                .map(|k| k.split(':').next().unwrap_or_default().to_owned()),
        ));
    };
    let out = consolidate(
        &c,
        &rules,
        &State::new(&c),
        &placer(),
        &ConsolidateOptions::default(),
        &EvacuateOptions::default(),
        &tell,
    )
    .unwrap();
    let told = told.into_inner().unwrap();
    assert_eq!(
        told.iter()
            .map(|(i, n, node, _)| (*i, *n, node.as_str()))
            .collect::<Vec<_>>(),
        vec![
            (1, 5, "a"),
            (2, 5, "b"),
            (3, 5, "c"),
            (4, 5, "d"),
            (5, 5, "e")
        ]
    );
    // a and b are freed; the rest stay at the quorum floor, each told with that reason.
    assert_eq!(out.freed_names(), vec!["a", "b"]);
    assert_eq!(told[0].3, None);
    assert_eq!(told[1].3, None);
    for t in &told[2..] {
        let why = t.3.as_deref().unwrap();
        let kept = out.kept.iter().find(|k| k.node == t.2).unwrap();
        assert!(kept.reason.starts_with(why), "{why} / {}", kept.reason);
        assert_eq!(kept.because, KeptBecause::Floor);
    }
}

#[test]
fn a_node_to_keep_is_never_freed_nor_finished() {
    let why = "a holds flxp's lease of zone lab".to_owned();
    let o = ConsolidateOptions {
        keep: [("a".to_owned(), why.clone())].into(),
        ..ConsolidateOptions::default()
    };
    let c = run(&light().build(), &o);
    assert_eq!(c.freed_names(), vec!["b", "c"]);
    let a = c.kept.iter().find(|k| k.node == "a").unwrap();
    assert_eq!(
        (a.because, a.reason.as_str()),
        (KeptBecause::Required, why.as_str())
    );
    // An earlier run marked it: it is given back, not finished.
    let cluster = five_nodes_one_marked("a");
    let o = ConsolidateOptions {
        resume: vec!["a".into()],
        ..o
    };
    let c = run(&cluster, &o);
    assert!(!c.freed_names().contains(&"a".to_owned()), "{c:?}");
    let a = c.kept.iter().find(|k| k.node == "a").unwrap();
    assert!(a.resumed && a.because == KeptBecause::Required, "{a:?}");
}

#[test]
fn the_ha_minimum_can_be_the_binding_floor() {
    let o = ConsolidateOptions {
        min_nodes: 4,
        ..ConsolidateOptions::default()
    };
    let c = run(&light().build(), &o);
    assert_eq!(c.freed_names(), vec!["a"]);
    assert!(c.kept.iter().any(|k| k.reason.contains("min-nodes = 4")));
}

#[test]
fn a_pinned_or_ignored_guest_keeps_its_node_with_the_reason() {
    let mut b = ClusterBuilder::new()
        .node(node("a"))
        .node(node("b"))
        .guest(vm(200, "a").mem(GIB, GIB).tagged("flxp.node.a"))
        .guest(vm(201, "b").mem(GIB, GIB).tagged("flxp.ignore"));
    for (i, n) in ["c", "d", "e"].iter().enumerate() {
        b = b
            .node(node(n))
            .guest(vm(101 + i as u32, n).mem(8 * GIB, 8 * GIB));
    }
    let c = run(&b.build(), &ConsolidateOptions::default());
    assert_eq!(kept(&c, "a"), KeptBecause::NoRoom, "{:#?}", c.kept);
    assert_eq!(kept(&c, "b"), KeptBecause::Unmovable, "{:#?}", c.kept);
    assert_eq!(c.freed_names(), vec!["c", "d"]);
    // b was only tried as freed: it is not said to be in maintenance.
    for k in &c.kept {
        assert!(!k.reason.contains("in maintenance"), "{}", k.reason);
    }
}

#[test]
fn headroom_keeps_a_node_a_failure_would_need() {
    // Six 64 GiB nodes with 33 GiB each (11 guests of 3 GiB): four nodes hold the 198 GiB
    // within the 80% ceiling, but if one of four failed, three could not.
    let mut b = ClusterBuilder::new();
    for (i, n) in ["a", "b", "c", "d", "e", "f"].iter().enumerate() {
        b = b.node(node(n));
        for j in 0..11 {
            b = b.guest(vm(100 + 20 * i as u32 + j, n).mem(3 * GIB, 3 * GIB));
        }
    }
    let c = run(&b.build(), &ConsolidateOptions::default());
    assert_eq!(c.freed.len(), 1, "{:#?}", c.kept);
    assert!(
        c.kept.iter().any(|k| k.because == KeptBecause::Headroom),
        "{:#?}",
        c.kept
    );
    let without = ConsolidateOptions {
        headroom: false,
        ..ConsolidateOptions::default()
    };
    assert_eq!(run(&b.build(), &without).freed.len(), 2);
}

#[test]
fn the_memory_ceiling_is_kept_on_every_remaining_node() {
    let c = run(
        &light().build(),
        &ConsolidateOptions {
            max_memory: 0.2,
            ..ConsolidateOptions::default()
        },
    );
    // 8 GiB + 8 GiB is 25% of 64 GiB: nothing can take a second guest.
    assert!(c.freed.is_empty());
    assert_eq!(kept(&c, "a"), KeptBecause::NoRoom);
}

#[test]
fn the_cpu_ceiling_is_checked_on_the_result() {
    let mut b = ClusterBuilder::new();
    for (i, n) in ["a", "b", "c", "d", "e"].iter().enumerate() {
        b = b
            .node(node(n))
            .guest(vm(101 + i as u32, n).mem(GIB, GIB).cores(8.0, 1.0));
    }
    let c = run(&b.build(), &ConsolidateOptions::default());
    assert!(c.freed.is_empty());
    assert_eq!(kept(&c, "a"), KeptBecause::Cpu);
}

/// n1 runs near the CPU ceiling and is the least loaded by memory among
/// the targets. The cheapest node, n3, is freed onto a node that stays under the ceiling,
/// not kept because n1 would go over it.
#[test]
fn targets_are_chosen_within_the_cpu_ceiling() {
    let mib = GIB / 1024;
    let c = ClusterBuilder::new()
        .nodes(&["n1", "n2", "n3", "n4"])
        .guest(vm(101, "n1").mem(2 * GIB, 4 * GIB).cores(16.0, 0.75))
        .guest(vm(102, "n2").mem(1536 * mib, 2 * GIB))
        .guest(vm(103, "n2").mem(1536 * mib, 2 * GIB))
        .guest(vm(104, "n3").mem(1229 * mib, 2 * GIB).cores(4.0, 0.25))
        .guest(vm(105, "n4").mem(3 * GIB, 4 * GIB))
        .build();
    let c = run(&c, &packing());
    assert_eq!(c.freed_names(), vec!["n3"]);
    assert_eq!(c.plan.migrations.len(), 1);
    assert_eq!(c.plan.migrations[0].vmid, 104);
    assert_ne!(c.plan.migrations[0].to, "n1");
    assert_eq!(kept(&c, "n1"), KeptBecause::Floor);
}

/// A node already above the ceiling receives nothing, and does not keep
/// every other node.
#[test]
fn a_node_above_the_cpu_ceiling_takes_nothing_but_keeps_nothing() {
    let c = ClusterBuilder::new()
        .nodes(&["n1", "n2", "n3", "n4"])
        .guest(vm(101, "n1").mem(GIB, 2 * GIB).cores(16.0, 0.9))
        .guest(vm(102, "n2").mem(GIB, 2 * GIB))
        .guest(vm(103, "n2").mem(GIB, 2 * GIB))
        .guest(vm(104, "n3").mem(GIB, 2 * GIB).cores(4.0, 0.25))
        .guest(vm(105, "n4").mem(3 * GIB, 4 * GIB))
        .build();
    let c = run(&c, &packing());
    assert_eq!(c.freed_names(), vec!["n3"]);
    assert_ne!(c.plan.migrations[0].to, "n1");
}

/// Four anti-affine guests on n1..n4 and one large guest on n5. Once n1
/// is freed (its guest onto n5), n5 is kept for that guest: the reason says so, and calls
/// the nodes the plan frees "being freed", not "in maintenance".
#[test]
fn a_kept_nodes_reason_names_the_plan_not_maintenance() {
    let mut b = ClusterBuilder::new();
    for (i, n) in ["n1", "n2", "n3", "n4"].iter().enumerate() {
        b = b.node(node(n)).guest(
            vm(101 + i as u32, n)
                .mem(GIB, 2 * GIB)
                .tagged("flxp.anti-affinity.db"),
        );
    }
    let c = b
        .node(node("n5"))
        .guest(vm(110, "n5").mem(6 * GIB, 8 * GIB))
        .build();
    let c = run(&c, &packing());
    assert_eq!(c.freed_names(), vec!["n1"]);
    for k in &c.kept {
        assert!(!k.reason.contains("maintenance"), "{k:?}");
    }
    let k5 = c.kept.iter().find(|k| k.node == "n5").unwrap();
    assert_eq!(k5.because, KeptBecause::NoRoom);
    assert!(
        k5.reason.starts_with(
            "freeing n5 too would leave guest 101 of n1, which is freed, no node within \
             the limits: n5: being freed by this plan; n2, n3, n4: anti-affinity"
        ),
        "{k5:?}"
    );
    let k2 = c.kept.iter().find(|k| k.node == "n2").unwrap();
    assert!(
        k2.reason.starts_with(
            "guest 102 on n2 fits on no other node within the limits: n1: being freed by \
             this plan; n3, n4, n5: anti-affinity"
        ),
        "{k2:?}"
    );
}

#[test]
fn bad_options_are_refused_by_name() {
    let c = light().build();
    let rules = Rules::compile(&c);
    let p = Placer::new(PlacementOptions::default(), Vec::new()).unwrap();
    let o = ConsolidateOptions {
        max_cpu: 1.5,
        ..ConsolidateOptions::default()
    };
    let e = consolidate(
        &c,
        &rules,
        &State::new(&c),
        &p,
        &o,
        &EvacuateOptions::default(),
        &|_| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("max-cpu"), "{e}");
}

#[test]
fn min_nodes_above_the_node_count_frees_nothing_and_says_why() {
    let o = ConsolidateOptions {
        min_nodes: 9,
        ..ConsolidateOptions::default()
    };
    let c = run(&light().build(), &o);
    assert!(c.freed.is_empty());
    assert_eq!(c.kept.len(), 5);
    assert!(
        c.kept[0]
            .reason
            .contains("min-nodes = 9 is more than the cluster's 5 node(s)"),
        "{}",
        c.kept[0].reason
    );
    // Two nodes with the default min-nodes = 3: both floors bind, both named.
    let two = ClusterBuilder::new()
        .node(node("a"))
        .node(node("b"))
        .guest(vm(101, "a").mem(GIB, GIB))
        .build();
    let c = run(&two, &ConsolidateOptions::default());
    assert!(c.freed.is_empty());
    for k in &c.kept {
        assert_eq!(k.because, KeptBecause::Floor);
        assert!(k.reason.contains("min-nodes = 3"), "{}", k.reason);
        assert!(k.reason.contains("quorum"), "{}", k.reason);
    }
}

#[test]
fn a_guest_moved_within_the_cooldown_keeps_its_node() {
    let task = crate::snapshot::Task {
        kind: Some("qmigrate".into()),
        id: Some("101".into()),
        starttime: Some(900),
        endtime: Some(1000),
        status: Some("OK".into()),
        ..crate::snapshot::Task::default()
    };
    let cluster = light().task(task).time(1010).build();
    assert_eq!(
        run(&cluster, &ConsolidateOptions::default()).freed_names(),
        vec!["a", "b"]
    );
    let o = ConsolidateOptions {
        cooldown_secs: 60,
        ..ConsolidateOptions::default()
    };
    let c = run(&cluster, &o);
    assert_eq!(c.freed_names(), vec!["b", "c"], "{:#?}", c.kept);
    let a = c.kept.iter().find(|k| k.node == "a").unwrap();
    assert_eq!(a.because, KeptBecause::Unmovable);
    assert!(
        a.reason
            .contains("migrated 10 s ago, within the 60 s cooldown"),
        "{}",
        a.reason
    );
}

/// One node per name with one 8 GiB guest each (vmids from 101), as `guest` finishes it; the
/// nodes in `marked` carry an earlier run's maintenance mark.
fn one_guest_each(
    names: &[&str],
    marked: &[&str],
    guest: impl Fn(&str, GuestSpec) -> GuestSpec,
) -> ClusterBuilder {
    let mut b = ClusterBuilder::new();
    for (i, n) in names.iter().enumerate() {
        let spec = if marked.contains(n) {
            node(n).notes("flxp.maintenance")
        } else {
            node(n)
        };
        let g = guest(n, vm(101 + i as u32, n).mem(8 * GIB, 8 * GIB));
        b = b.node(spec).guest(g);
    }
    b
}

/// Nodes a..e with one 8 GiB guest each; `marked` carries an earlier run's maintenance mark.
fn five_nodes_one_marked(marked: &str) -> Cluster {
    one_guest_each(&["a", "b", "c", "d", "e"], &[marked], |_, g| g).build()
}

#[test]
fn an_interrupted_consolidation_is_finished_not_skipped() {
    // b was marked and part emptied by an earlier run: it is freed first, its guest moves.
    let cluster = five_nodes_one_marked("b");
    let plain = run(&cluster, &ConsolidateOptions::default());
    assert_eq!(kept(&plain, "b"), KeptBecause::NotCandidate);
    let o = ConsolidateOptions {
        resume: vec!["b".into()],
        ..ConsolidateOptions::default()
    };
    let c = run(&cluster, &o);
    assert_eq!(c.freed_names(), vec!["b", "a"], "{:#?}", c.kept);
    assert!(c.freed[0].resumed && !c.freed[1].resumed);
    assert!(c.plan.migrations.iter().any(|m| m.vmid == 102));
    assert!(c.plan.migrations.iter().all(|m| m.to != "a" && m.to != "b"));
    // Quorum still counts b as going: 3 of 5 stay online.
    assert_eq!(kept(&c, "c"), KeptBecause::Floor);
}

/// [`five_nodes_one_marked`] with 102 (on b) migrating to `to`, as a killed run left it.
fn b_migrating_to(to: &str) -> Cluster {
    let task = crate::snapshot::Task {
        kind: Some("qmigrate".into()),
        id: Some("102".into()),
        starttime: Some(1000),
        target: Some(to.into()),
        ..crate::snapshot::Task::default()
    };
    let locked = |n: &str, g: GuestSpec| if n == "b" { g.locked("migrate") } else { g };
    one_guest_each(&["a", "b", "c", "d", "e"], &["b"], locked)
        .task(task)
        .time(1010)
        .build()
}

#[test]
fn a_guest_migrating_off_a_resumed_node_counts_as_leaving() {
    let o = ConsolidateOptions {
        resume: vec!["b".into()],
        ..ConsolidateOptions::default()
    };
    let c = run(&b_migrating_to("d"), &o);
    assert_eq!(c.freed_names(), vec!["b", "a"], "{:#?}", c.kept);
    assert!(c.freed[0].resumed);
    assert!(c.plan.migrations.iter().all(|m| m.vmid != 102), "{c:#?}");
    // Landing on another node being freed, it would still be stuck there.
    let c = run(&b_migrating_to("a"), &o);
    assert!(c.freed_names().iter().all(|n| n != "a"), "{:#?}", c.freed);
}

#[test]
fn a_node_a_guest_is_migrating_onto_is_not_freed_and_says_which_guest() {
    // 105 runs on e and is migrating onto a (started by hand): a, the cheapest node, holds
    // nothing yet, but is not empty.
    let task = crate::snapshot::Task {
        kind: Some("qmigrate".into()),
        id: Some("105".into()),
        node: Some("e".into()),
        starttime: Some(1000),
        target: Some("a".into()),
        ..crate::snapshot::Task::default()
    };
    let mut b = ClusterBuilder::new();
    for (i, n) in ["a", "b", "c", "d", "e"].iter().enumerate() {
        let g = vm(101 + i as u32, n).mem(8 * GIB, 8 * GIB);
        let g = if *n == "e" { g.locked("migrate") } else { g };
        b = b.node(node(n)).guest(g);
    }
    let cluster = b.task(task).time(1010).build();
    let c = run(&cluster, &ConsolidateOptions::default());
    assert_eq!(c.freed_names(), vec!["b", "c"], "{:#?}", c.kept);
    let a = c.kept.iter().find(|k| k.node == "a").unwrap();
    assert_eq!(a.because, KeptBecause::Arriving, "{a:?}");
    assert_eq!(
        a.reason,
        "guest 105 (qemu105) is migrating onto a (from e): it holds the node once it lands"
    );
    // The judge says so too, whatever tried the node: a set holding it is refused.
    let hosts: Vec<NodeIdx> = cluster.node_indexes().collect();
    let (a, b) = (
        cluster.node_idx("a").unwrap(),
        cluster.node_idx("b").unwrap(),
    );
    let rules = Rules::compile(&cluster);
    let state = State::new(&cluster);
    let (p, o, evac) = (
        placer(),
        ConsolidateOptions::default(),
        EvacuateOptions::default(),
    );
    let ctx = Ctx {
        cluster: &cluster,
        rules: &rules,
        state: &state,
        placer: &p,
        ceiling: &p,
        options: &o,
        evac: &evac,
        hosts: &hosts,
        landing: &[cluster.guest_idx(105).unwrap()],
    };
    let mut in_trial = vec![false; hosts.len()];
    in_trial[a.get()] = true;
    in_trial[b.get()] = true;
    let remaining: Vec<NodeIdx> = hosts
        .iter()
        .copied()
        .filter(|&n| n != a && n != b)
        .collect();
    let nothing = Trial {
        unplaced: Vec::new(),
        skipped: Vec::new(),
        after: state.clone(),
        payload: (),
        moved: None,
        closed: Vec::new(),
    };
    let why = judge(
        &ctx,
        &[b, a],
        &in_trial,
        &remaining,
        &nothing,
        (None, &mut 0),
    )
    .unwrap_err();
    assert_eq!(why.0, KeptBecause::Arriving);
    assert!(
        why.1.starts_with("guest 105 (qemu105) is migrating onto a"),
        "{}",
        why.1
    );
}

/// 40 nodes of 64 GiB with 15 guests of 1 GiB each: 24,000 guest-nodes, above
/// [`EXACT_SIZE`], so candidates are tried incrementally.
fn forty_light_nodes() -> Cluster {
    let mut b = ClusterBuilder::new();
    for i in 0..40u32 {
        let n = format!("n{i:02}");
        b = b.node(node(&n));
        for j in 0..15 {
            b = b.guest(vm(1000 + 15 * i + j, &n).mem(GIB, GIB));
        }
    }
    b.build()
}

#[test]
fn a_large_cluster_is_packed_incrementally_down_to_the_floor_and_safely() {
    let c = forty_light_nodes();
    assert!(c.guests().len() * c.nodes().len() > EXACT_SIZE);
    let o = ConsolidateOptions::default();
    let out = run(&c, &o);
    // Quorum: 21 of 40 stay online, so 19 are freed.
    assert_eq!(out.freed.len(), 19, "{:#?}", out.kept);
    assert_eq!(out.plan.migrations.len(), 19 * 15);
    assert!(out.work < o.budget(), "{}", out.work);
    assert!(
        out.plan
            .warnings
            .iter()
            .all(|w| w.kind != WarningKind::BudgetSpent)
    );
    // Each step passes the placement filters on the state the steps before it leave, and no
    // guest stays on a freed node.
    let rules = Rules::compile(&c);
    let state = State::new(&c);
    let end = crate::balance::replay(&c, &rules, &state, &placer(), &out.plan.migrations).unwrap();
    for f in &out.freed {
        let n = c.node_idx(&f.node).unwrap();
        assert_eq!(end.usage(n).guests, 0, "{}", f.node);
        assert_eq!(f.migrations, 15);
    }
    for m in &out.plan.migrations {
        let from = format!("consolidate: {} is being freed", m.from);
        assert!(m.reason.contains(&from), "{m:?}");
    }
    let steps: Vec<u32> = out.plan.migrations.iter().map(|m| m.step).collect();
    assert!(steps.windows(2).all(|w| w[0] <= w[1]), "{steps:?}");
}

/// A target policy the shortlist does not follow ranks every node for every guest, and is
/// counted so; the plan still reaches the floor.
#[test]
fn a_policy_that_ranks_every_node_is_judged_over_every_node() {
    let c = forty_light_nodes();
    let rules = Rules::compile(&c);
    let o = ConsolidateOptions::default();
    let evac = EvacuateOptions {
        policy: "free-memory".into(),
        ..EvacuateOptions::default()
    };
    let out = consolidate(&c, &rules, &State::new(&c), &placer(), &o, &evac, &|_| {}).unwrap();
    assert_eq!(out.freed.len(), 19, "{:#?}", out.kept);
    assert_eq!(out.plan.migrations.len(), 19 * 15);
    // Each of the 285 guests judged over the 40 hosts, at least.
    assert!(out.work >= 285 * 40, "{}", out.work);
    // Each try also looks at its own guests and the rooms, alike under both policies.
    let shortlisted = run(&c, &o);
    assert!(
        shortlisted.work < out.work / 3,
        "{} {}",
        shortlisted.work,
        out.work
    );
}

/// `nodes` nodes of 64 GiB with `per` guests of 1 GiB each, named n0000... in order.
fn light_nodes(nodes: u32, per: u32) -> Cluster {
    let mut b = ClusterBuilder::new();
    for i in 0..nodes {
        let n = format!("n{i:04}");
        b = b.node(node(&n));
        for j in 0..per {
            b = b.guest(vm(1000 + per * i + j, &n).mem(GIB, GIB));
        }
    }
    b.build()
}

/// At 1,000 nodes and 20,000 guests the default budget reaches the quorum floor: a try places
/// only its own node's guests and judges only what it changed, so the work grows with the
/// guests moved times the nodes, not with the nodes freed times every guest.
#[test]
fn a_thousand_nodes_reach_the_quorum_floor_within_the_default_budget() {
    let c = light_nodes(1000, 20);
    let o = ConsolidateOptions::default();
    let out = run(&c, &o);
    // Quorum: 501 of 1,000 stay online, so 499 are freed, each guest moved once.
    assert_eq!(out.freed.len(), 499);
    assert_eq!(out.plan.migrations.len(), 499 * 20);
    assert!(out.kept.iter().all(|k| k.because == KeptBecause::Floor));
    // Each of the 9,980 guests is judged on the open nodes least loaded first until four take
    // it, and those four are ranked, instead of on all 1,000 hosts; a try looks at the node
    // being freed and its guests, and the N+1 check at the nodes the try changed, instead of
    // every remaining node; the hosts are looked at once for the CPU ceiling.
    assert_eq!(out.work, 113_474);
    assert!(out.work < o.budget());
    assert!(
        out.plan
            .warnings
            .iter()
            .all(|w| w.kind != WarningKind::BudgetSpent)
    );
}

/// From 300 to 1,000 nodes (6,000 to 20,000 guests, 3.3 times as many) the work grows with the
/// guests moved, not with them times the nodes: counted, not timed.
#[test]
fn the_work_grows_like_the_guests_moved_not_times_the_nodes() {
    let o = ConsolidateOptions::default();
    let small = run(&light_nodes(300, 20), &o);
    let large = run(&light_nodes(1000, 20), &o);
    assert_eq!((small.freed.len(), large.freed.len()), (149, 499));
    let per_guest = |c: &Consolidation| c.work as f64 / c.plan.migrations.len() as f64;
    assert!(
        large.work <= 4 * small.work,
        "{} units at 300 nodes, {} at 1,000",
        small.work,
        large.work
    );
    // The work per guest moved stays about the same.
    assert!(
        per_guest(&large) <= 1.25 * per_guest(&small),
        "{:.1} units per guest moved at 300 nodes, {:.1} at 1,000",
        per_guest(&small),
        per_guest(&large)
    );
}

/// `nodes` nodes of 512 GiB and 64 CPUs (5 % in use) with uneven load: node i holds 40 % to 160 % of `per`
/// guests by i mod 10, of 2, 4, 4, 8 or 16 GiB (70 % of it in use), about half the cluster's
/// memory in all, so the 80 % memory ceiling binds before the quorum floor.
fn uneven_nodes(nodes: u32, per: u32) -> Cluster {
    let sizes = [2, 4, 4, 8, 16];
    let mut b = ClusterBuilder::new();
    let mut vmid = 1000;
    for i in 0..nodes {
        let n = format!("n{i:04}");
        b = b.node(node(&n).memory(512 * GIB).cpus(64.0).load(0.05));
        let count = per * (6 + 2 * (i % 10)) / 15;
        for j in 0..count {
            let size = sizes[((i * 7 + j * 3) % 5) as usize] * GIB;
            let cpu = f64::from((i * 13 + j * 7) % 50) / 100.0;
            b = b.guest(vm(vmid, &n).mem(size / 10 * 7, size).cores(4.0, cpu));
            vmid += 1;
        }
    }
    b.build()
}

/// On uneven load the memory ceiling, not the quorum floor, ends the freeing: once the
/// remaining nodes are full, every further candidate fails. Such a candidate is refused from
/// its guests' memory against the remaining room before any guest is placed, so the
/// planner does not spend its budget placing guests that fit nowhere, and every candidate is
/// tried.
#[test]
fn a_full_cluster_refuses_the_rest_from_their_memory_within_the_budget() {
    let c = uneven_nodes(200, 50);
    let o = ConsolidateOptions {
        work_budget: Some(1_000_000),
        ..ConsolidateOptions::default()
    };
    let out = run(&c, &o);
    assert_eq!(out.freed.len(), 82, "{:#?}", out.kept);
    assert_eq!(out.plan.migrations.len(), 2_472);
    // Each candidate tried: about 400 units per node freed, about 85 per node refused.
    assert_eq!(out.work, 40_643);
    let count = |b: KeptBecause| out.kept.iter().filter(|k| k.because == b).count();
    assert_eq!(count(KeptBecause::Budget), 0);
    assert_eq!(count(KeptBecause::NoRoom), 118);
    let reason = |n: &str| {
        out.kept
            .iter()
            .find(|k| k.node == n)
            .unwrap()
            .reason
            .clone()
    };
    assert_eq!(
        reason("n0199"),
        "17 running guest(s) on n0199 use more than 10.6 GiB of memory each, and no remaining \
         node has more free within the 80% memory ceiling"
    );
    // Each step passes the placement filters on the state the steps before it leave, and no
    // guest stays on a freed node.
    let rules = Rules::compile(&c);
    let state = State::new(&c);
    let end = crate::balance::replay(&c, &rules, &state, &placer(), &out.plan.migrations).unwrap();
    for f in &out.freed {
        assert_eq!(
            end.usage(c.node_idx(&f.node).unwrap()).guests,
            0,
            "{}",
            f.node
        );
    }
}

#[test]
fn the_work_budget_bounds_the_planner_and_says_so() {
    let c = forty_light_nodes();
    // One try costs about 170 units: its 15 guests and the roomiest nodes looked at to see
    // whether they can fit at all; each guest judged on the open nodes least loaded first
    // until four take it, and those four ranked; the node being freed and its 15 guests; the
    // nodes the try changed, which the N+1 check looks at. Finding the hosts at the CPU
    // ceiling looks at the 40 once. A budget of 1,000 lets six tries start (the sixth ends
    // past it), then no node is tried.
    let o = ConsolidateOptions {
        work_budget: Some(1_000),
        ..ConsolidateOptions::default()
    };
    let out = run(&c, &o);
    assert_eq!(out.work, 1_060);
    assert_eq!(out.freed.len(), 6, "{:#?}", out.kept);
    let budget: Vec<&Kept> = out
        .kept
        .iter()
        .filter(|k| k.because == KeptBecause::Budget)
        .collect();
    assert_eq!(budget.len(), 34);
    assert_eq!(
        budget[0].reason,
        "not tried: the planner's work budget of 1000 units was spent (raise --effort)"
    );
    let w = out
        .plan
        .warnings
        .iter()
        .find(|w| w.kind == WarningKind::BudgetSpent)
        .unwrap();
    assert!(
        w.message
            .starts_with("work budget of 1000 units spent after 1060"),
        "{w:?}"
    );
    // Still a whole plan: the six nodes are emptied.
    assert_eq!(out.plan.migrations.len(), 6 * 15);
    // `effort-secs` only raises the default budget.
    let thorough = ConsolidateOptions {
        effort_secs: 60.0,
        ..ConsolidateOptions::default()
    };
    assert_eq!(thorough.budget(), 180_000_000);
    assert_eq!(ConsolidateOptions::default().budget(), WORK);
}

/// n5's guest uses 7.2 of 8 CPUs. The reason n5 stays names that guest,
/// not one node it would overload, which the same plan may free.
#[test]
fn a_cpu_reason_names_the_guest_not_a_node_being_freed() {
    let mut b = ClusterBuilder::new();
    let mem = [6, 6, 6, 2, 1, 1];
    for (i, n) in ["n1", "n2", "n3", "n4", "n5", "n6", "n7"]
        .iter()
        .enumerate()
    {
        let used = mem.get(i).map_or(GIB / 2, |&g| g * GIB);
        let guest = vm(101 + i as u32, n).mem(used, used);
        let guest = if *n == "n5" {
            guest.cores(8.0, 0.9)
        } else {
            guest.cores(1.0, 0.01)
        };
        b = b.node(node(n).memory(16 * GIB).cpus(8.0)).guest(guest);
    }
    let c = run(&b.build(), &ConsolidateOptions::default());
    let n5 = c.kept.iter().find(|k| k.node == "n5").unwrap();
    assert_eq!(n5.because, KeptBecause::Cpu, "{n5:?}");
    assert!(n5.reason.contains("guest 105"), "{}", n5.reason);
    assert!(n5.reason.contains("7.2 CPUs"), "{}", n5.reason);
    for f in c.freed_names() {
        assert!(!n5.reason.contains(&f), "{f} is freed: {}", n5.reason);
    }
}

#[test]
fn finishing_only_frees_no_new_node() {
    let o = ConsolidateOptions {
        resume: vec!["b".into()],
        finish_only: true,
        ..ConsolidateOptions::default()
    };
    let c = run(&five_nodes_one_marked("b"), &o);
    assert_eq!(c.freed_names(), vec!["b"], "{:#?}", c.kept);
    assert_eq!(kept(&c, "a"), KeptBecause::Finishing, "{:#?}", c.kept);
    assert_eq!(c.kept.len(), 4, "{:#?}", c.kept);
}

#[test]
fn each_unfinished_node_is_given_up_for_its_own_guest() {
    // a and b were both marked by an interrupted run; a's guest may not move (ignored), b's
    // may: a is given back naming its own guest, b is still freed.
    let ignored = |n: &str, g: GuestSpec| if n == "a" { g.tagged("flxp.ignore") } else { g };
    let cluster = one_guest_each(&["a", "b", "c", "d", "e", "f", "g"], &["a", "b"], ignored);
    let o = ConsolidateOptions {
        resume: vec!["a".into(), "b".into()],
        ..ConsolidateOptions::default()
    };
    let c = run(&cluster.build(), &o);
    let a = c.kept.iter().find(|k| k.node == "a").unwrap();
    assert!(a.resumed, "{a:?}");
    assert!(a.reason.contains("101"), "{}", a.reason);
    assert_eq!(
        c.freed_names().first().map(String::as_str),
        Some("b"),
        "{:#?}",
        c.kept
    );
    assert!(c.freed[0].resumed);
    assert!(c.kept.iter().all(|k| k.node != "b"), "{:#?}", c.kept);
}

#[test]
fn the_auto_modes_load_limit_stops_freeing_before_the_wake_level() {
    // Four 64 GiB nodes with 24 GiB of guests each (no host memory): 37.5% of the zone.
    // Freeing one puts three at 50%: allowed under 0.55, refused under 0.45.
    let mut b = ClusterBuilder::new();
    for (i, n) in ["a", "b", "c", "d"].iter().enumerate() {
        b = b
            .node(node(n))
            .guest(vm(101 + i as u32, n).mem(24 * GIB, 24 * GIB));
    }
    let c = b.build();
    let base = ConsolidateOptions {
        min_nodes: 1,
        headroom: false,
        max_memory: 1.0,
        ..ConsolidateOptions::default()
    };
    let o = |l| ConsolidateOptions {
        max_load: Some(l),
        ..base.clone()
    };
    assert_eq!(run(&c, &o(0.55)).freed.len(), 1);
    let refused = run(&c, &o(0.45));
    assert!(refused.freed.is_empty());
    assert_eq!(
        kept(&refused, "a"),
        KeptBecause::Load,
        "{:#?}",
        refused.kept
    );
}
