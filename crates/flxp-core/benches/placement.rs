//! Placement decisions per second on synthetic clusters of 32, 1,000 and 10,000 nodes with 30
//! guests per node, affinity groups and labels: on a prepared snapshot (model, rules and state
//! built once) and from raw JSON (parse, index, compile rules, decide).
//!
//! Run: `cargo bench -p flxp-core --bench placement` (add `-- quick` for shorter rounds, node
//! counts such as `-- quick 1000` to measure only those sizes, and column names such as
//! `-- 1000 fast pve-static` to measure only those paths, e.g. under `perf record`).

use std::hint::black_box;
use std::time::{Duration, Instant};

use flxp_core::builder::*;
use flxp_core::placement::{Ctx, PlacementOptions, PlacementRequest, Placer, Subject};
use flxp_core::{Cluster, Overrides, Rules, Snapshot, State};

/// A cluster of `n` nodes, 30 guests each: every third guest in a 3-member anti-affinity group,
/// every tenth pair in an affinity group, half the nodes labelled `ssd`, one in twenty tainted.
fn synthetic(n: usize) -> Snapshot {
    let mut b = ClusterBuilder::new();
    let mut lcg = Lcg(42);
    let mut next = |m: u64| lcg.next(m);
    for i in 0..n {
        let mut notes = String::new();
        if i % 2 == 0 {
            notes.push_str("flxp.label.ssd ");
        }
        if i % 20 == 7 {
            notes.push_str("flxp.taint.gpu");
        }
        b = b.node(
            node(&format!("node{i:05}"))
                .memory((128 + 128 * (i as u64 % 3)) * GIB)
                .cpus(32.0)
                .notes(&notes),
        );
    }
    let mut vmid = 100;
    for i in 0..n {
        for j in 0..30 {
            let mut tags = Vec::new();
            if j % 3 == 0 {
                tags.push(format!(
                    "flxp.anti-affinity.g{}",
                    (vmid / 3) % (n as u32 * 3)
                ));
            }
            if j % 10 == 1 {
                tags.push(format!("flxp.affinity.pair{}", vmid / 10));
            }
            let mem = (1 + next(8)) * GIB;
            b = b.guest(
                vm(vmid, &format!("node{i:05}"))
                    .mem(mem / 2, mem)
                    .cores(2.0, 0.2)
                    .tagged(&tags.join(";")),
            );
            vmid += 1;
        }
    }
    b.snapshot()
}

fn request() -> PlacementRequest {
    PlacementRequest {
        memory: 4 * GIB,
        cores: 2.0,
        tags: vec!["flxp.anti-affinity.g7".into(), "flxp.select.ssd".into()],
        ..PlacementRequest::default()
    }
}

/// Calls per second of `f` formatted with `decimals`, or `-` when the column is not measured.
fn measure(on: bool, decimals: usize, budget: Duration, f: impl FnMut()) -> String {
    if on {
        format!("{:.decimals$}", rate(budget, f).0)
    } else {
        "-".into()
    }
}

/// Runs `f` repeatedly for about `budget` and returns calls per second.
fn rate(budget: Duration, mut f: impl FnMut()) -> (f64, u32) {
    let start = Instant::now();
    let mut calls = 0u32;
    while start.elapsed() < budget || calls < 3 {
        f();
        calls += 1;
    }
    (f64::from(calls) / start.elapsed().as_secs_f64(), calls)
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let budget = Duration::from_millis(if quick { 300 } else { 2000 });
    // Columns may be named (`-- quick 1000 fast pve-static`) to measure only those (for
    // profiling one path); the others print as `-`.
    let columns = ["explained", "fast", "pve-static", "raw"];
    let named: Vec<String> = std::env::args()
        .filter(|a| columns.contains(&a.as_str()))
        .collect();
    let wanted = |c: &str| named.is_empty() || named.iter().any(|n| n == c);
    println!(
        "placement decisions per second, one core (4 GiB, 2 vCPUs, anti-affinity + selector request)"
    );
    println!(
        "{:>7} {:>8} {:>12} {:>14} {:>14} {:>14} {:>12}",
        "nodes", "guests", "json MiB", "explained/s", "fast/s", "pve-static/s", "raw json/s"
    );
    // Node counts may be given as arguments (`-- quick 1000`); the default is the published set.
    let sizes: Vec<usize> = std::env::args().filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() {
        vec![32, 1_000, 10_000]
    } else {
        sizes
    };
    for n in sizes {
        let snap = synthetic(n);
        let json = serde_json::to_string(&snap).unwrap_or_default();
        let cluster =
            Cluster::from_snapshot(&snap, &Overrides::default()).expect("valid synthetic cluster");
        let rules = Rules::compile(&cluster);
        let state = State::new(&cluster);
        let placer = Placer::new(PlacementOptions::default(), Vec::new()).expect("default placer");
        let req = request();
        let explained = measure(wanted("explained"), 0, budget, || {
            black_box(
                placer
                    .place(&cluster, &rules, &state, &req)
                    .expect("decision"),
            );
        });
        let (subject, _) = Subject::new_vm(&cluster, &rules, &req).expect("subject");
        let fast = measure(wanted("fast"), 0, budget, || {
            let ctx = Ctx::new(&cluster, &rules, &state, placer.options(), &subject);
            black_box(placer.best(&ctx, None).expect("decision"));
        });
        let pve_static = if placer.policy_names().contains(&"pve-static") {
            let mut r = req.clone();
            r.policy = Some("pve-static".into());
            measure(wanted("pve-static"), 0, budget, || {
                black_box(
                    placer
                        .place(&cluster, &rules, &state, &r)
                        .expect("decision"),
                );
            })
        } else {
            "-".into()
        };
        let raw = measure(wanted("raw"), 2, budget, || {
            let c = Cluster::from_json(&json, &Overrides::default()).expect("valid json");
            let r = Rules::compile(&c);
            let s = State::new(&c);
            black_box(placer.place(&c, &r, &s, &req).expect("decision"));
        });
        println!(
            "{:>7} {:>8} {:>12.1} {:>14} {:>14} {:>14} {:>12}",
            n,
            cluster.guests().len(),
            json.len() as f64 / (1 << 20) as f64,
            explained,
            fast,
            pve_static,
            raw
        );
    }
}
