//! Consolidation's promises on random clusters with rules: every step of the plan is safe (the
//! placement filters pass, no hard rule is newly broken, no node goes above the memory ceiling,
//! nothing lands on a node being freed), the headroom holds after every step, the freed nodes end
//! empty, and the quorum and HA floors hold.

use std::collections::BTreeSet;

use flxp_core::balance::{EvacuateOptions, replay};
use flxp_core::builder::*;
use flxp_core::consolidate::{ConsolidateOptions, consolidate, headroom_breach, load};
use flxp_core::{Cluster, Rules, State};
use proptest::prelude::*;

use crate::support::{self, Key, was_broken};

const TAGS: [&str; 6] = [
    "flxp.anti-affinity.web",
    "flxp.affinity.app",
    "flxp.node.n0",
    "flxp.select.ssd",
    "flxp.ignore",
    "flxp.anti-affinity.db",
];

/// Nodes: (GiB, notes index, offline); guests: (node, GiB, cores, load, tags, stopped).
type Gen = (
    Vec<(u64, usize, bool)>,
    Vec<(usize, u64, u32, f64, Vec<usize>, bool)>,
);

const NOTES: [&str; 4] = ["", "flxp.label.ssd", "flxp.maintenance", ""];

fn cluster_gen() -> impl Strategy<Value = Gen> {
    prop::collection::vec(
        (
            prop_oneof![Just(32u64), Just(64), Just(128)],
            prop_oneof![8 => Just(0usize), 2 => Just(1), 1 => Just(2)],
            prop::bool::weighted(0.05),
        ),
        3..=7,
    )
    .prop_flat_map(|nodes| {
        let n = nodes.len();
        let guest = (
            0..n,
            1u64..=12,
            1u32..=8,
            0.0f64..0.6,
            prop::collection::vec(
                prop_oneof![8 => Just(None), 1 => (0..TAGS.len()).prop_map(Some)],
                2,
            )
            .prop_map(|v| v.into_iter().flatten().collect::<Vec<_>>()),
            prop::bool::weighted(0.1),
        );
        (Just(nodes), prop::collection::vec(guest, 0..=24))
    })
}

fn build((nodes, guests): &Gen) -> Cluster {
    let mut b = ClusterBuilder::new().time(100_000);
    for (i, &(gib, notes, offline)) in nodes.iter().enumerate() {
        let mut spec = node(&format!("n{i}"))
            .memory(gib * GIB)
            .cpus(16.0)
            .notes(NOTES[notes]);
        if offline {
            spec = spec.offline();
        }
        b = b.node(spec);
    }
    for (i, (n, gib, cores, load, tags, stopped)) in guests.iter().enumerate() {
        let tags: Vec<&str> = tags.iter().map(|&t| TAGS[t]).collect();
        let mut spec = vm(100 + i as u32, &format!("n{n}"))
            .mem(gib * GIB, gib * GIB)
            .cores(f64::from(*cores), *load)
            .tagged(&tags.join(";"));
        if *stopped {
            spec = spec.stopped();
        }
        b = b.guest(spec);
    }
    b.build()
}

/// The rules `s` breaks, but for maintenance: the nodes being freed are in maintenance by design.
fn keys(c: &Cluster, rules: &Rules, s: &State) -> BTreeSet<Key> {
    support::keys(c, rules, s)
        .into_iter()
        .filter(|k| k.0 != "maintenance")
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn no_step_breaks_a_rule_the_ceiling_or_the_headroom_and_the_floors_hold(
        g in cluster_gen(),
        max_memory in prop_oneof![Just(0.6), Just(0.8), Just(1.0)],
        min_nodes in 1usize..=4,
        headroom in prop::bool::weighted(0.8),
        resume in prop::bool::weighted(0.3),
        max_load in prop_oneof![Just(None), Just(Some(0.3)), Just(Some(0.6))],
    ) {
        let c = build(&g);
        let rules = Rules::compile(&c);
        let start = State::new(&c);
        let placer = support::placer();
        // An interrupted run: every node in maintenance is one a consolidation began to free.
        let resumed: Vec<String> = if resume {
            c.nodes().iter().filter(|n| n.in_maintenance()).map(|n| n.name.clone()).collect()
        } else {
            Vec::new()
        };
        let o = ConsolidateOptions {
            max_memory,
            min_nodes: min_nodes.min(c.nodes().len()),
            headroom,
            max_load,
            resume: resumed,
            ..ConsolidateOptions::default()
        };
        let r = consolidate(&c, &rules, &start, &placer, &o, &EvacuateOptions::default(), &|_| {}).unwrap();
        let new: Vec<_> = r
            .freed
            .iter()
            .filter(|f| !f.resumed)
            .map(|f| c.node_idx(&f.node).unwrap())
            .collect();
        // Steps are numbered in the order they run.
        for w in r.plan.migrations.windows(2) {
            prop_assert!(w[0].step <= w[1].step, "{} then {}", w[0].step, w[1].step);
        }
        // Nodes only freed by the plan are not said to be in maintenance.
        for m in &r.plan.migrations {
            let from = c.node_idx(&m.from).unwrap();
            if new.contains(&from) {
                prop_assert!(!m.reason.contains("in maintenance"), "{}", m.reason);
            }
        }
        let freed: Vec<_> = r.freed.iter().map(|f| c.node_idx(&f.node).unwrap()).collect();
        let hosts: Vec<_> = c.node_indexes().filter(|&n| c.node(n).is_schedulable()).collect();
        let remaining: Vec<_> = hosts.iter().copied().filter(|n| !freed.contains(n)).collect();

        // Floors: more than half of all nodes stay online; min-nodes stay in service. A cluster
        // already at or below half online frees nothing.
        let online = c.nodes().iter().filter(|n| n.is_online()).count();
        prop_assert!(new.is_empty() || 2 * (online - freed.len()) > c.nodes().len());
        prop_assert!(new.is_empty() || remaining.len() >= min_nodes);
        // Every node is either freed or says why it stays.
        prop_assert_eq!(r.freed.len() + r.kept.len(), c.nodes().len());

        // The filters pass at every step, on the cluster with the freed nodes in maintenance.
        let mut cm = c.clone();
        for &n in &freed {
            cm.request_maintenance(n);
        }
        prop_assert!(replay(&cm, &rules, &start, &placer, &r.plan.migrations).is_ok());

        let mut s = start.clone();
        let before = keys(&c, &rules, &s);
        let initial_headroom = headroom_breach(&c, &s, &hosts, placer.options()).is_none();
        for (i, m) in r.plan.migrations.iter().enumerate() {
            let gi = c.guest_idx(m.vmid).unwrap();
            let to = c.node_idx(&m.to).unwrap();
            prop_assert!(remaining.contains(&to), "step {} lands on {}", i, m.to);
            s.move_guest(&c, gi, to);
            if c.guest(gi).running {
                let cap = (c.node(to).maxmem as f64 * max_memory) as u64;
                prop_assert!(s.usage(to).mem <= cap, "step {}: {} above the ceiling", i, m.to);
            }
            let step_done = r.plan.migrations.get(i + 1).is_none_or(|n| n.step != m.step);
            if step_done {
                for k in keys(&c, &rules, &s) {
                    prop_assert!(was_broken(&k, &before), "step {} breaks {:?}", i, k);
                }
                if headroom && initial_headroom {
                    let why = headroom_breach(&c, &s, &hosts, placer.options());
                    prop_assert!(why.is_none(), "step {}: {:?}", i, why);
                }
            }
        }
        // The newly freed nodes end empty and the remaining ones keep the headroom and the load.
        for gi in c.guest_indexes() {
            prop_assert!(!new.contains(&s.location(gi)));
        }
        if headroom && !new.is_empty() {
            prop_assert!(headroom_breach(&c, &s, &remaining, placer.options()).is_none());
        }
        if let (Some(l), false) = (max_load, new.is_empty()) {
            prop_assert!(load(&c, &s, &remaining) <= l + 1e-9);
        }
    }
}
