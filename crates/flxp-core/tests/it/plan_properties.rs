//! The promises about plans (README, "Safety before balance"), on random clusters with rules: every step of every plan is
//! safe (replayed here with `State::move_guest` and checked independently of the planner), the
//! imbalance never rises while balancing, the budget holds, the same input gives the same plan
//! however the snapshot lists things, and evacuation leaves no guest that could have gone
//! somewhere.

use std::collections::{BTreeMap, BTreeSet};

use flxp_core::balance::{
    BalanceOptions, EvacuateOptions, Measure, Plan, Purpose, Trigger, plan, replay,
};
use flxp_core::builder::*;
use flxp_core::constraints::{breaches, violations};
use flxp_core::evacuate::evacuate;
use flxp_core::placement::{Ctx, PlacementOptions, Subject};
use flxp_core::snapshot::Snapshot;
use flxp_core::{Cluster, Overrides, Rules, State};
use proptest::prelude::*;

use crate::support::{keys, placer, was_broken};

const TAGS: [&str; 9] = [
    "flxp.anti-affinity.web",
    "flxp.affinity.app",
    "flxp.node.n0",
    "flxp.node.n1",
    "flxp.select.ssd",
    "flxp.ignore",
    "flxp.tolerate.gpu",
    "flxp.prefer-node.n2",
    "flxp.anti-affinity.db",
];

#[derive(Debug, Clone)]
struct NodeGen {
    gib: u64,
    notes: &'static str,
    offline: bool,
}

#[derive(Debug, Clone)]
struct GuestGen {
    node: usize,
    used_gib: u64,
    extra_gib: u64,
    cores: u32,
    load: f64,
    tags: Vec<usize>,
    stopped: bool,
    locked: bool,
    container: bool,
    /// Seconds between its last migration and the snapshot.
    migrated_ago: Option<i64>,
}

/// An HA resource-affinity rule between two guests (by index): negative or positive.
type HaPair = (usize, usize, bool);

fn node_gen() -> impl Strategy<Value = NodeGen> {
    (
        prop_oneof![Just(32u64), Just(64), Just(128)],
        prop_oneof![
            6 => Just(""),
            1 => Just("flxp.label.ssd"),
            1 => Just("flxp.taint.gpu"),
            1 => Just("flxp.maintenance"),
            1 => Just("flxp.prefer-no.batch flxp.label.ssd"),
        ],
        prop::bool::weighted(0.05),
    )
        .prop_map(|(gib, notes, offline)| NodeGen {
            gib,
            notes,
            offline,
        })
}

fn guest_gen(nodes: usize) -> impl Strategy<Value = GuestGen> {
    (
        0..nodes,
        1u64..=12,
        0u64..=4,
        1u32..=8,
        0.0f64..1.0,
        prop::collection::vec(
            prop_oneof![8 => Just(None), 1 => (0..TAGS.len()).prop_map(Some)],
            2,
        ),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.05),
        prop::bool::weighted(0.1),
        prop_oneof![6 => Just(None), 1 => (0i64..4000).prop_map(Some)],
    )
        .prop_map(
            |(
                node,
                used_gib,
                extra_gib,
                cores,
                load,
                tags,
                stopped,
                locked,
                container,
                migrated_ago,
            )| {
                GuestGen {
                    node,
                    used_gib,
                    extra_gib,
                    cores,
                    load,
                    tags: tags.into_iter().flatten().collect(),
                    stopped,
                    locked,
                    container,
                    migrated_ago,
                }
            },
        )
}

type Gen = (Vec<NodeGen>, Vec<GuestGen>, Vec<HaPair>, bool);

fn cluster_gen() -> impl Strategy<Value = Gen> {
    prop::collection::vec(node_gen(), 2..=6).prop_flat_map(|nodes| {
        let n = nodes.len();
        (
            Just(nodes),
            prop::collection::vec(guest_gen(n), 0..=28),
            prop::collection::vec((0usize..28, 0usize..28, any::<bool>()), 0..=2),
            prop::bool::weighted(0.2),
        )
    })
}

fn build((nodes, guests, ha, auto): &Gen) -> ClusterBuilder {
    let mut b = ClusterBuilder::new().time(100_000);
    for (i, n) in nodes.iter().enumerate() {
        let mut spec = node(&format!("n{i}"))
            .memory(n.gib * GIB)
            .cpus(16.0)
            .notes(n.notes);
        if n.offline {
            spec = spec.offline();
        }
        b = b.node(spec);
    }
    let sid = |i: usize| {
        let kind = if guests[i].container { "ct" } else { "vm" };
        format!("{kind}:{}", 100 + i)
    };
    for (k, &(x, y, negative)) in ha.iter().enumerate() {
        if x < guests.len() && y < guests.len() && x != y {
            let affinity = if negative { "negative" } else { "positive" };
            b = b.ha_resource_affinity(
                &format!("r{k}"),
                &format!("{},{}", sid(x), sid(y)),
                affinity,
            );
        }
    }
    if *auto {
        b = b.option("crs", serde_json::json!("ha=static,ha-auto-rebalance=1"));
    }
    for (i, g) in guests.iter().enumerate() {
        let tags: Vec<&str> = g.tags.iter().map(|&t| TAGS[t]).collect();
        let make = if g.container { ct } else { vm };
        if let Some(ago) = g.migrated_ago {
            b = b.task(flxp_core::snapshot::Task {
                kind: Some(if g.container { "vzmigrate" } else { "qmigrate" }.into()),
                id: Some((100 + i).to_string()),
                starttime: Some(100_000 - ago - 60),
                endtime: Some(100_000 - ago),
                status: Some("OK".into()),
                ..flxp_core::snapshot::Task::default()
            });
        }
        let mut spec = make(100 + i as u32, &format!("n{}", g.node))
            .mem(g.used_gib * GIB, (g.used_gib + g.extra_gib) * GIB)
            .cores(f64::from(g.cores), g.load)
            .tagged(&tags.join(";"));
        if g.stopped {
            spec = spec.stopped();
        }
        if g.locked {
            spec = spec.locked("backup");
        }
        b = b.guest(spec);
    }
    b
}

/// Replays a plan with `State::move_guest` only and checks, after every step: the target is not
/// over its memory, and no hard rule is broken that was not broken before (a bundle's own group
/// may be split while the bundle is on its way, and must be whole once it has arrived).
fn assert_every_step_safe(c: &Cluster, rules: &Rules, start: &State, p: &Plan) -> State {
    let mut s = start.clone();
    let mut before = keys(c, rules, &s);
    for (i, m) in p.migrations.iter().enumerate() {
        let g = c.guest_idx(m.vmid).unwrap();
        let to = c.node_idx(&m.to).unwrap();
        assert_eq!(
            c.node(s.location(g)).name,
            m.from,
            "step {i}: guest not at its source"
        );
        s.move_guest(c, g, to);
        let node = c.node(to);
        // A stopped guest adds no memory; a running one must fit.
        assert!(
            !c.guest(g).running || s.usage(to).mem <= node.maxmem,
            "step {i}: {} over memory: {} > {}",
            m.to,
            s.usage(to).mem,
            node.maxmem
        );
        assert!(
            node.is_schedulable(),
            "step {i}: target {} not schedulable",
            m.to
        );
        let now = keys(c, rules, &s);
        let step_done = p
            .migrations
            .get(i + 1)
            .is_none_or(|next| next.step != m.step);
        for k in now.iter().filter(|k| !was_broken(k, &before)) {
            let in_flight = !step_done
                && m.group
                    .as_deref()
                    .is_some_and(|g| g.split('+').any(|x| x == k.0));
            assert!(
                in_flight,
                "step {i} ({} {} → {}) breaks {k:?}",
                m.vmid, m.from, m.to
            );
        }
        if step_done {
            before = now;
        }
    }
    s
}

fn options(budget: usize, threshold: f64) -> BalanceOptions {
    BalanceOptions {
        max_migrations: budget,
        trigger: Trigger {
            threshold: Some(threshold),
            ..Trigger::default()
        },
        ..BalanceOptions::default()
    }
}

fn measure_gen() -> impl Strategy<Value = (Measure, bool)> {
    (
        prop_oneof![3 => Just(Measure::Spread), 1 => Just(Measure::Cv)],
        any::<bool>(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_step_is_safe_the_budget_holds_and_balancing_never_raises_the_imbalance(
        g in cluster_gen(),
        budget in 0usize..12,
        threshold in prop_oneof![Just(0.0), Just(5.0), Just(10.0)],
        (measure, restart) in measure_gen(),
        vcpu_tolerance in prop_oneof![Just(0.0), Just(0.5)],
    ) {
        let c = build(&g).build();
        let rules = Rules::compile(&c);
        let start = State::new(&c);
        let mut o = options(budget, if measure == Measure::Spread { threshold } else { threshold / 100.0 });
        o.measure = measure;
        o.restart_containers = restart;
        o.vcpu_tolerance = vcpu_tolerance;
        let p = plan(&c, &rules, &start, &placer(), &o).unwrap();
        prop_assert!(p.migrations.len() <= budget, "{} > {budget}", p.migrations.len());
        let end = assert_every_step_safe(&c, &rules, &start, &p);
        // The planner's own check agrees, and the claimed result is what replaying gives.
        let replayed = replay(&c, &rules, &start, &placer(), &p.migrations).unwrap();
        prop_assert_eq!(&replayed, &end);
        // In the metric the plan weighed (`dominant` plans on memory while no node is busy on CPU).
        let weighed = p.metric.metric().unwrap_or(o.metric);
        let claimed = flxp_core::balance::imbalance_in(&c, &end, o.measure, o.measure.load_kind(weighed));
        prop_assert_eq!(claimed, p.imbalance_after);
        // Balancing decisions never raise the imbalance (judged once all of a decision ran).
        let mut before = p.imbalance_before;
        for (i, m) in p.migrations.iter().enumerate() {
            let done = p.migrations.get(i + 1).is_none_or(|n| n.step != m.step);
            if !done {
                continue;
            }
            if matches!(m.purpose, Purpose::Balance | Purpose::Swap) {
                prop_assert!(m.imbalance_after <= before + 1e-9, "step {i}: {before} → {}", m.imbalance_after);
            }
            before = m.imbalance_after;
        }
        // Balancing ends on a decision that lowered the measure: a flat tail is trimmed.
        if let Some(last) = p.migrations.last().filter(|m| matches!(m.purpose, Purpose::Balance | Purpose::Swap)) {
            let before_last = p
                .migrations
                .iter()
                .rev()
                .find(|m| m.step < last.step)
                .map_or(p.imbalance_before, |m| m.imbalance_after);
            prop_assert!(last.imbalance_after < before_last - 1e-12, "{before_last} → {}", last.imbalance_after);
        }
        let clean = p.violations_before.is_empty() && p.migrations.iter().all(|m| m.purpose != Purpose::Evacuate);
        if clean {
            prop_assert!(p.imbalance_after <= p.imbalance_before + 1e-9);
        }
        // The lower bounds hold for this plan too.
        if let Some(floor) = p.bounds.spread_floor {
            prop_assert!(p.imbalance_after >= floor - 1e-9, "{} < {floor}", p.imbalance_after);
        }
        prop_assert!(p.imbalance_after >= p.bounds.imbalance_floor - 1e-9);
        for k in [p.bounds.peak_migrations, p.bounds.trough_migrations].into_iter().flatten() {
            prop_assert!(p.migrations.len() >= k, "{} migrations < floor {k}", p.migrations.len());
        }
        // The plan reaches its own imbalance: no bound on reaching it may exceed what it used.
        if let Some(k) = p.bounds.migrations {
            prop_assert!(p.migrations.len() >= k, "{} migrations < bound {k}", p.migrations.len());
        }
        if let Some(b) = p.bounds.bytes {
            prop_assert!(p.bytes >= b, "{} bytes < bound {b}", p.bytes);
        }
        // Each guest moves at most once in a plan.
        let mut seen = BTreeSet::new();
        for m in &p.migrations {
            prop_assert!(seen.insert(m.vmid), "{} moves twice", m.vmid);
        }
    }

    #[test]
    fn a_plan_reports_what_the_checker_says_and_fixes_only_what_it_found(
        g in cluster_gen(),
        budget in 0usize..12,
    ) {
        let c = build(&g).build();
        let rules = Rules::compile(&c);
        let start = State::new(&c);
        let p = plan(&c, &rules, &start, &placer(), &options(budget, 5.0)).unwrap();
        let end = replay(&c, &rules, &start, &placer(), &p.migrations).unwrap();
        prop_assert_eq!(&p.violations_before, &violations(&c, &rules, &start));
        prop_assert_eq!(&p.violations_after, &violations(&c, &rules, &end));
        // Every step that fixes or evacuates moves a guest the checker found in breach.
        let found: BTreeSet<u32> = breaches(&c, &rules, &start)
            .iter()
            .flat_map(|b| b.guests())
            .map(|gi| c.guest(gi).vmid)
            .collect();
        for m in p.migrations.iter().filter(|m| matches!(m.purpose, Purpose::Fix | Purpose::Evacuate)) {
            let step: Vec<u32> = p.migrations.iter().filter(|o| o.step == m.step).map(|o| o.vmid).collect();
            prop_assert!(step.iter().any(|v| found.contains(v)), "{} moved for no breach: {}", m.vmid, m.reason);
        }
    }

    #[test]
    fn the_same_snapshot_gives_the_same_plan_however_it_is_listed(
        g in cluster_gen(),
        seed in any::<u64>(),
    ) {
        let snapshot = build(&g).snapshot();
        let mut shuffled: Snapshot = snapshot.clone();
        // A small LCG permutes the resources: nodes and guests in any order.
        let mut lcg = Lcg(seed | 1);
        for i in (1..shuffled.resources.len()).rev() {
            shuffled.resources.swap(i, lcg.next(i as u64 + 1) as usize);
        }
        let json = serde_json::to_string(&shuffled).unwrap();
        let plans: Vec<String> = [Cluster::from_snapshot(&snapshot, &Overrides::default()).unwrap(),
                                  Cluster::from_json(&json, &Overrides::default()).unwrap()]
            .iter()
            .map(|c| {
                let rules = Rules::compile(c);
                let p = plan(c, &rules, &State::new(c), &placer(), &options(8, 5.0)).unwrap();
                serde_json::to_string(&p).unwrap()
            })
            .collect();
        prop_assert_eq!(&plans[0], &plans[1]);
        let c = Cluster::from_snapshot(&snapshot, &Overrides::default()).unwrap();
        let rules = Rules::compile(&c);
        let again = serde_json::to_string(&plan(&c, &rules, &State::new(&c), &placer(), &options(8, 5.0)).unwrap()).unwrap();
        prop_assert_eq!(&plans[0], &again);
    }

    #[test]
    fn evacuation_is_safe_and_leaves_only_guests_that_fit_nowhere(
        g in cluster_gen(),
        which in 0usize..6,
        inflow in 0u32..3,
    ) {
        let c = build(&g).build();
        let rules = Rules::compile(&c);
        let start = State::new(&c);
        let target = flxp_core::cluster::NodeIdx((which % c.nodes().len()) as u32);
        let o = EvacuateOptions { max_inflow_per_node: inflow, ..EvacuateOptions::default() };
        let p = evacuate(&c, &rules, &start, &placer(), &[target], &o).unwrap();
        // Replay on the cluster with the node in maintenance, as the plan was made.
        let mut overrides = Overrides::default();
        overrides.maintenance.insert(c.node(target).name.clone());
        let cm = Cluster::from_snapshot(&build(&g).snapshot(), &overrides).unwrap();
        let end = assert_every_step_safe(&cm, &rules, &start, &p);
        replay(&cm, &rules, &start, &placer(), &p.migrations).unwrap();
        // Each migration's imbalance_after is the imbalance once the list up to it (its whole
        // bundle) has run, in the order listed.
        for (i, m) in p.migrations.iter().enumerate() {
            let last_of_step = p.migrations.get(i + 1).is_none_or(|n| n.step != m.step);
            if last_of_step {
                let s = replay(&cm, &rules, &start, &placer(), &p.migrations[..=i]).unwrap();
                let want = flxp_core::balance::imbalance(&cm, &s, o.measure, o.metric);
                prop_assert!((m.imbalance_after - want).abs() < 1e-9, "{}: {} != {want}", m.vmid, m.imbalance_after);
                let figure = format!("→ {}", o.measure.fmt(want));
                prop_assert!(m.reason.ends_with(&figure), "{}: {}", m.vmid, m.reason);
            }
        }
        // A wave may run in any order: replay each wave backwards too.
        let mut backwards = p.clone();
        let mut order: Vec<usize> = (0..p.migrations.len()).collect();
        order.sort_by_key(|&i| (p.migrations[i].wave, std::cmp::Reverse(i)));
        backwards.migrations = order.iter().map(|&i| p.migrations[i].clone()).collect();
        assert_every_step_safe(&cm, &rules, &start, &backwards);
        // Waves respect the inflow limit; a bundle larger than the limit takes a wave alone.
        if inflow > 0 {
            let mut per: std::collections::BTreeMap<(u32, &str), (u32, BTreeSet<u32>)> = Default::default();
            for m in &p.migrations {
                let e = per.entry((m.wave, m.to.as_str())).or_default();
                e.0 += 1;
                e.1.insert(m.step);
            }
            prop_assert!(per.values().all(|(n, steps)| *n <= inflow || steps.len() == 1), "{per:?}");
            prop_assert!(p.migrations.windows(2).all(|w| w[0].wave <= w[1].wave));
        }
        // Every guest left on the node either may not move, or fits nowhere even now.
        let opts = PlacementOptions::default();
        for gi in c.guest_indexes() {
            if end.location(gi) != target || c.guest(gi).template {
                continue;
            }
            let vmid = c.guest(gi).vmid;
            let unplaced = p.unplaced.iter().any(|u| u.vmid == vmid);
            let skipped = p.skipped.iter().any(|s| s.vmid == vmid);
            prop_assert!(unplaced || skipped || c.guest(gi).lock.is_some() || rules.guest(gi).ignore,
                "{vmid} left on {} without a word", c.node(target).name);
            if unplaced {
                let subject = Subject::guest(&cm, &rules, gi, target);
                let ctx = Ctx::new(&cm, &rules, &end, &opts, &subject);
                let fits: Vec<_> = cm.node_indexes().filter(|&n| n != target && placer().feasible(&ctx, n)).collect();
                // A bundle member may fit alone but not with its group.
                let in_bundle = p.unplaced.iter().filter(|u| u.rule == p.unplaced.iter().find(|x| x.vmid == vmid).unwrap().rule).count() > 1;
                prop_assert!(fits.is_empty() || in_bundle, "{vmid} could go to {fits:?}");
            }
        }
    }

    #[test]
    fn no_balancing_move_returns_a_guest_within_the_hold(
        g in cluster_gen(),
        departures in prop::collection::vec((0usize..28, 0usize..6, 0i64..40_000), 0..=24),
        hold in prop_oneof![Just(21_600i64), Just(3_600)],
        budget in 1usize..12,
        topsis in prop::bool::weighted(0.25),
    ) {
        let mut b = build(&g);
        let nodes = g.0.len();
        // When each guest last left each node, kept here apart from flxp's own task index.
        let mut left: BTreeMap<(u32, String), i64> = BTreeMap::new();
        for &(guest, node, ago) in &departures {
            if guest >= g.1.len() {
                continue;
            }
            let (vmid, node) = (100 + guest as u32, format!("n{}", node % nodes));
            let end = 100_000 - ago;
            b = b.task(finished_migration_task(vmid, &node, end));
            let e = left.entry((vmid, node)).or_insert(end);
            *e = (*e).max(end);
        }
        let c = b.build();
        let rules = Rules::compile(&c);
        let start = State::new(&c);
        let mut o = options(budget, 0.0);
        o.return_hold_secs = hold;
        if topsis {
            o.method = flxp_core::balance::methods::pve_topsis::NAME;
        }
        let p = plan(&c, &rules, &start, &placer(), &o).unwrap();
        for m in p.migrations.iter().filter(|m| matches!(m.purpose, Purpose::Balance | Purpose::Swap)) {
            if let Some(&end) = left.get(&(m.vmid, m.to.clone())) {
                prop_assert!(
                    100_000 - end >= hold,
                    "{} returns to {}, left {} s ago (hold {hold}): {}",
                    m.vmid, m.to, 100_000 - end, m.reason
                );
            }
        }
    }
}
