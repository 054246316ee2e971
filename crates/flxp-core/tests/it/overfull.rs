//! A node reporting more memory used than it has is counted as full (100 %), and what leaves it
//! comes off what it reported first: a plan promises the imbalance the cluster will report once
//! it has run, and names the node it leaves over its memory.

use std::collections::BTreeMap;

use flxp_core::balance::{Overfull, plan};
use flxp_core::builder::*;
use flxp_core::{Cluster, Rules, State};

use crate::support::placer;

/// Three nodes of 64 GiB reporting `used`; 8 GiB guests placed as `at` says.
fn cluster(at: &BTreeMap<u32, String>, used: &BTreeMap<String, u64>) -> Cluster {
    let mut b = ClusterBuilder::new();
    for (n, &mem) in used {
        b = b.node(node(n).memory(64 * GIB).used(mem));
    }
    for (&vmid, n) in at {
        b = b.guest(vm(vmid, n).mem(8 * GIB, 8 * GIB));
    }
    b.build()
}

#[test]
fn moves_off_an_overfull_node_come_off_what_it_reported_and_the_promise_is_what_is_achieved() {
    // a reports 320 GiB used of 64 GiB with four 8 GiB guests; b uses 16 GiB, c 8 GiB.
    let mut at: BTreeMap<u32, String> = (101..=104).map(|v| (v, "a".to_owned())).collect();
    at.insert(105, "b".into());
    let mut used: BTreeMap<String, u64> = [("a", 320), ("b", 16), ("c", 8)]
        .into_iter()
        .map(|(n, g)| (n.to_owned(), g * GIB))
        .collect();
    let before = cluster(&at, &used);
    let rules = Rules::compile(&before);
    let p = plan(
        &before,
        &rules,
        &State::new(&before),
        &placer(),
        &Default::default(),
    )
    .unwrap();
    assert!(!p.migrations.is_empty(), "{}", p.summary);

    // The cluster as Proxmox reports it once the plan has run: each guest's 8 GiB leave its
    // node's figure and join its target's.
    for m in &p.migrations {
        *used.get_mut(&m.from).unwrap() -= 8 * GIB;
        *used.get_mut(&m.to).unwrap() += 8 * GIB;
        at.insert(m.vmid, m.to.clone());
    }
    let after = cluster(&at, &used);
    let achieved = p.imbalance_on(&after, &State::new(&after)).unwrap();
    assert!(
        (p.imbalance_after - achieved).abs() < 1e-9,
        "promised {} pp, achieved {achieved} pp: {}",
        p.imbalance_after,
        p.summary
    );
    // a is still over its memory: shown full, and named.
    assert!(used["a"] > 64 * GIB);
    let a = p.nodes_after.iter().find(|n| n.node == "a").unwrap();
    assert_eq!((a.figures.mem, a.figures.mem_percent), (64 * GIB, 100.0));
    assert_eq!(
        p.overfull,
        [Overfull {
            node: "a".into(),
            mem: used["a"],
            maxmem: 64 * GIB,
        }]
    );
    // The bounds add memory up, which an overfull node does not: unknown rather than wrong.
    assert_eq!(p.bounds.migrations, None);
}

#[test]
fn a_plan_that_sheds_the_whole_excess_leaves_no_node_over() {
    // a reports 72 GiB of 64 GiB: 8 GiB over, and its two 8 GiB guests can go to b.
    let at: BTreeMap<u32, String> = [(101, "a"), (102, "a")]
        .into_iter()
        .map(|(v, n)| (v, n.to_owned()))
        .collect();
    let used: BTreeMap<String, u64> = [("a", 72), ("b", 0), ("c", 0)]
        .into_iter()
        .map(|(n, g)| (n.to_owned(), g * GIB))
        .collect();
    let c = cluster(&at, &used);
    let s = State::new(&c);
    let a = c.node_idx("a").unwrap();
    assert_eq!((s.usage(a).mem, s.usage(a).mem_over), (64 * GIB, 8 * GIB));
    let p = plan(&c, &Rules::compile(&c), &s, &placer(), &Default::default()).unwrap();
    let off_a = p.migrations.iter().filter(|m| m.from == "a").count() as u64;
    assert_eq!(off_a, 2, "{}", p.summary);
    // 16 GiB left: 8 GiB of excess, then 8 GiB of the 64 counted: 56 GiB, under its total.
    let a_after = p.nodes_after.iter().find(|n| n.node == "a").unwrap();
    assert_eq!(a_after.figures.mem, 56 * GIB);
    assert!(p.overfull.is_empty(), "{:?}", p.overfull);
}
