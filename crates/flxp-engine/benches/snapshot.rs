//! `collect_snapshot` of a 32-node, 2,000-guest cluster with 5 ms latency per API call.
//!
//! Runs against `flxp_pve::fake::FakeApi` (in memory, a real 5 ms `tokio::time::sleep` per call),
//! so the figure is the collection's own cost: how many calls and how many round trips.
//! Run: `cargo bench -p flxp-engine --bench snapshot`.
// A benchmark may panic on a broken setup: that is its failure report.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use flxp_core::Snapshot;
use flxp_core::snapshot::{NodeExtra, Resource, RrdRow};
use flxp_pve::fake::FakeApi;

const NODES: usize = 32;
const GUESTS: u32 = 2000;
const LATENCY: Duration = Duration::from_millis(5);
const RUNS: u32 = 10;

fn cluster() -> Snapshot {
    let mut snap = Snapshot::default();
    for i in 1..=NODES {
        let name = format!("pve{i}");
        snap.resources.push(Resource {
            id: Some(format!("node/{name}")),
            kind: Some("node".into()),
            node: Some(name.clone()),
            status: Some("online".into()),
            maxmem: Some(512 << 30),
            mem: Some(128 << 30),
            maxcpu: Some(64.0),
            cpu: Some(0.2),
            ..Resource::default()
        });
        let row = RrdRow(
            [
                ("time", 1_764_399_960.0),
                ("pressurememorysome", 0.5),
                ("memused", 1e11),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        );
        snap.nodes.insert(
            name,
            NodeExtra {
                notes: Some("flxp.label.ssd".into()),
                rrddata: Some(row),
            },
        );
    }
    for g in 0..GUESTS {
        snap.resources.push(Resource {
            id: Some(format!("qemu/{}", 100 + g)),
            kind: Some("qemu".into()),
            node: Some(format!("pve{}", g as usize % NODES + 1)),
            vmid: Some(100 + g),
            status: Some("running".into()),
            maxmem: Some(8 << 30),
            mem: Some(4 << 30),
            maxcpu: Some(4.0),
            cpu: Some(0.3),
            ..Resource::default()
        });
    }
    snap
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .build()
        .unwrap();
    let source = cluster();
    let mut times = Vec::new();
    let mut calls = 0;
    for _ in 0..RUNS {
        let fake = FakeApi::new(source.clone()).with_latency(LATENCY);
        let start = Instant::now();
        let snap = runtime
            .block_on(flxp_engine::collect_snapshot(&fake, 1_764_400_000))
            .unwrap();
        times.push(start.elapsed());
        calls = fake.call_count();
        assert_eq!(snap.resources.len(), NODES + GUESTS as usize);
        assert_eq!(snap.nodes.len(), NODES);
    }
    times.sort();
    let median = times[times.len() / 2];
    println!(
        "collect_snapshot (FakeApi): {NODES} nodes, {GUESTS} guests, {} ms latency per call: {calls} API calls, median {:.1} ms (min {:.1}, max {:.1}) over {RUNS} runs",
        LATENCY.as_millis(),
        median.as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3,
    );
}
