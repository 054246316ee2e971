//! Properties of placement on random clusters with rules: the chosen node passes every filter, a
//! node is chosen whenever one fits, and the decision does not depend on input order.

use flxp_core::builder::*;
use flxp_core::placement::{Ctx, PlacementRequest, Subject};
use flxp_core::{Cluster, Overrides, Rules, Snapshot, State};
use proptest::prelude::*;

use crate::support::placer;

const GROUP_TAGS: [&str; 8] = [
    "flxp.affinity.a",
    "flxp.anti-affinity.b",
    "flxp.prefer-affinity.c",
    "flxp.prefer-anti-affinity.d",
    "flxp.select.ssd",
    "flxp.tolerate.gpu",
    "plb_anti_affinity_e",
    "flxp.ignore",
];
const NOTES: [&str; 6] = [
    "",
    "flxp.label.ssd",
    "flxp.taint.gpu",
    "flxp.prefer-no.gpu",
    "flxp.maintenance",
    "flxp.label.ssd flxp.taint.gpu",
];

/// A generated node: memory GiB, used percent, CPUs, index into `NOTES`, offline.
type NodeGen = (u64, u64, u32, usize, bool);

/// A generated guest: node index, memory GiB, cores, indexes into `GROUP_TAGS`, the node index
/// it is pinned to, running.
type GuestGen = (usize, u64, u32, Vec<usize>, Option<usize>, bool);

fn node_gen() -> impl Strategy<Value = NodeGen> {
    (
        1u64..=64,
        0u64..=95,
        1u32..=32,
        0..NOTES.len(),
        prop::bool::weighted(0.1),
    )
}

fn guest_gen(nodes: usize) -> impl Strategy<Value = GuestGen> {
    (
        0..nodes,
        1u64..=8,
        1u32..=8,
        prop::collection::vec(0..GROUP_TAGS.len(), 0..3),
        prop::option::weighted(0.15, 0..nodes),
        prop::bool::weighted(0.85),
    )
}

fn cluster_gen() -> impl Strategy<Value = (Vec<NodeGen>, Vec<GuestGen>)> {
    (2usize..10).prop_flat_map(|n| {
        (
            prop::collection::vec(node_gen(), n),
            prop::collection::vec(guest_gen(n), 0..30),
        )
    })
}

fn request_gen() -> impl Strategy<Value = (u64, u32, Vec<usize>, usize)> {
    (
        1u64..=24,
        1u32..=16,
        prop::collection::vec(0..GROUP_TAGS.len(), 0..3),
        0usize..4,
    )
}

fn snapshot(nodes: &[NodeGen], guests: &[GuestGen]) -> Snapshot {
    let mut b = ClusterBuilder::new();
    for (i, &(mem_gib, used_pct, cpus, notes, offline)) in nodes.iter().enumerate() {
        let mut spec = node(&format!("n{i:02}"))
            .memory(mem_gib * GIB)
            .used(mem_gib * GIB * used_pct / 100)
            .cpus(f64::from(cpus))
            .load(used_pct as f64 / 200.0)
            .notes(NOTES[notes]);
        if offline {
            spec = spec.offline();
        }
        b = b.node(spec);
    }
    for (i, (on, mem_gib, cores, tags, pin, running)) in guests.iter().enumerate() {
        let mut tags: Vec<String> = tags.iter().map(|&t| GROUP_TAGS[t].to_owned()).collect();
        if let Some(p) = pin {
            tags.push(format!("flxp.node.n{p:02}"));
        }
        let mut spec = vm(100 + i as u32, &format!("n{on:02}"))
            .mem(mem_gib * GIB / 2, mem_gib * GIB)
            .cores(f64::from(*cores), 0.3)
            .tagged(&tags.join(";"));
        if !running {
            spec = spec.stopped();
        }
        b = b.guest(spec);
    }
    b.snapshot()
}

fn decide(snap: &Snapshot, req: &PlacementRequest) -> (Cluster, flxp_core::placement::Placement) {
    let c = Cluster::from_snapshot(snap, &Overrides::default()).unwrap();
    let rules = Rules::compile(&c);
    let state = State::new(&c);
    let p = placer().place(&c, &rules, &state, req).unwrap();
    (c, p)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn chosen_node_passes_every_filter_and_a_fit_is_never_missed(
        (nodes, guests) in cluster_gen(),
        (mem, cores, tags, policy) in request_gen(),
    ) {
        let snap = snapshot(&nodes, &guests);
        let req = PlacementRequest {
            memory: mem * GIB,
            cores: cores.into(),
            tags: tags.iter().map(|&t| GROUP_TAGS[t].to_owned()).collect(),
            host: None,
            policy: Some(["free-memory", "free-cpu", "spread", "pack", "pve-static", "pve-dynamic"][policy].to_owned()),
        };
        let (c, p) = decide(&snap, &req);
        // Re-check independently: which nodes pass every filter?
        let rules = Rules::compile(&c);
        let state = State::new(&c);
        let placer = placer();
        let (subject, _) = Subject::new_vm(&c, &rules, &req).unwrap();
        let ctx = Ctx::new(&c, &rules, &state, placer.options(), &subject);
        // The fast path must agree with the explained one, filter by filter.
        for entry in flxp_core::placement::registry::FILTERS {
            let f: &dyn flxp_core::placement::Filter = *entry;
            for n in c.node_indexes() {
                let view = ctx.view(n);
                prop_assert_eq!(f.passes(&ctx, &view), f.check(&ctx, &view).is_ok(), "{} on {}", entry.name(), c.node(n).name);
            }
        }
        prop_assert_eq!(
            placer.best(&ctx, req.policy.as_deref()).unwrap().map(|n| c.node(n).name.clone()),
            p.node.clone()
        );
        let fitting: Vec<String> = c
            .node_indexes()
            .filter(|&n| placer.failures(&ctx, n).is_empty())
            .map(|n| c.node(n).name.clone())
            .collect();
        match &p.node {
            Some(chosen) => {
                prop_assert!(fitting.contains(chosen), "{chosen} chosen but fitting nodes are {fitting:?}");
                let best = p.candidates.iter().filter(|c| c.feasible).map(|c| c.score.unwrap()).fold(f64::MIN, f64::max);
                prop_assert_eq!(p.candidates[0].score.unwrap(), best);
            }
            None => prop_assert!(fitting.is_empty(), "no node chosen although {fitting:?} fit"),
        }
        for cand in &p.candidates {
            prop_assert_eq!(cand.feasible, fitting.contains(&cand.node));
            prop_assert_eq!(cand.feasible, cand.reasons.is_empty());
        }
    }

    #[test]
    fn decision_does_not_depend_on_input_order(
        (nodes, guests) in cluster_gen(),
        (mem, cores, tags, _) in request_gen(),
        seed in any::<u64>(),
    ) {
        let snap = snapshot(&nodes, &guests);
        let mut shuffled = snap.clone();
        // Fisher-Yates with a small LCG: the permutation is part of the generated input.
        let mut lcg = Lcg(seed | 1);
        for i in (1..shuffled.resources.len()).rev() {
            shuffled.resources.swap(i, lcg.next(i as u64 + 1) as usize);
        }
        let req = PlacementRequest {
            memory: mem * GIB,
            cores: cores.into(),
            tags: tags.iter().map(|&t| GROUP_TAGS[t].to_owned()).collect(),
            ..PlacementRequest::default()
        };
        let (_, a) = decide(&snap, &req);
        let (_, b) = decide(&shuffled, &req);
        prop_assert_eq!(a.node, b.node);
        prop_assert_eq!(a.candidates, b.candidates);
    }
}
