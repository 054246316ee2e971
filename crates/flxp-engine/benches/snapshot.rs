//! `collect_snapshot` of a 32-node, 2,000-guest cluster with 5 ms latency per API call.
//!
//! Two figures: against the simulator (`flxp_sim`, HTTPS with a pinned certificate, token auth,
//! 5 ms added to every request: the real client end to end), and against the in-memory
//! `FakeApi` (5 ms `tokio::time::sleep` per call: the collection's own cost, no HTTP).
//! Run: `cargo bench -p flxp-engine --bench snapshot`.
// A benchmark may panic on a broken setup: that is its failure report.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use flxp_core::Snapshot;
use flxp_core::snapshot::Resource;
use flxp_pve::fake::FakeApi;
use flxp_pve::{Client, ClientBuilder, Credentials, Fingerprint, Host, Secret, TlsTrust};
use flxp_sim::{Scenario, Sim, SimHandle, TlsIdentity};
use serde_json::{Value, json};

const NODES: usize = 32;
const GUESTS: usize = 2000;
const LATENCY_MS: u64 = 5;
const RUNS: usize = 10;
/// The API calls of one snapshot of this cluster (checked against the fake API in `main`).
const CALLS: usize = 1 + 2 * NODES + 6;
const TOKEN: &str = "root@pam!bench=2f1c0e8b-8a6c-4d1e-9f9a-0b1c2d3e4f5a";

/// The cluster as a scenario document: nodes with notes, guests spread evenly, 5 ms latency.
fn scenario_json() -> Value {
    let mut resources = Vec::new();
    let mut nodes = serde_json::Map::new();
    for i in 1..=NODES {
        let name = format!("pve{i}");
        resources.push(json!({
            "id": format!("node/{name}"), "type": "node", "node": name, "status": "online",
            "maxcpu": 64, "cpu": 0.2, "maxmem": 1_099_511_627_776_u64, "mem": 137_438_953_472_u64,
        }));
        resources.push(json!({
            "id": format!("storage/{name}/ceph"), "type": "storage", "node": name,
            // `rootdir` too: a node without a storage for container volumes gets a local thin
            // pool from the simulator, whose listings the fake API's cluster would not have.
            "storage": "ceph", "plugintype": "rbd", "shared": 1, "content": "images,rootdir",
            "status": "available", "maxdisk": 1_u64 << 44, "disk": 1_u64 << 40,
        }));
        nodes.insert(name, json!({"notes": "flxp.label.ssd"}));
    }
    for g in 0..GUESTS {
        let vmid = 100 + g;
        resources.push(json!({
            "id": format!("qemu/{vmid}"), "type": "qemu", "vmid": vmid, "name": format!("vm{vmid}"),
            "node": format!("pve{}", g % NODES + 1), "status": "running",
            "maxcpu": 4, "cpu": 0.3, "maxmem": 8_589_934_592_u64, "mem": 4_294_967_296_u64,
        }));
    }
    json!({
        "resources": resources,
        "nodes": nodes,
        "time": 1_764_400_000,
        "sim": {"tokens": [TOKEN], "latency_ms": LATENCY_MS},
    })
}

fn median(mut times: Vec<Duration>) -> (f64, f64, f64) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (
        ms(times[times.len() / 2]),
        ms(times[0]),
        ms(times[times.len() - 1]),
    )
}

fn bench_sim(runtime: &tokio::runtime::Runtime, scenario: Scenario) {
    let (sim, client) = runtime.block_on(async {
        let identity = TlsIdentity::generate(&[]).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let sim = SimHandle::spawn(listener, Sim::new(scenario).unwrap(), Some(&identity)).unwrap();
        let pin: Fingerprint = sim.fingerprint().unwrap().parse().unwrap();
        let (id, secret) = TOKEN.rsplit_once('=').unwrap();
        let client: Client = ClientBuilder::new(
            vec![sim.addr().to_string().parse::<Host>().unwrap()],
            Credentials::Token {
                id: id.into(),
                secret: Secret::new(secret),
            },
        )
        .trust(TlsTrust::Pinned(vec![pin]))
        .build()
        .unwrap();
        (sim, client)
    });
    // One warm-up run opens the connections, as a long-running daemon has them open.
    runtime
        .block_on(flxp_engine::collect_snapshot(&client, 0))
        .unwrap();
    let mut times = Vec::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        let snap = runtime
            .block_on(flxp_engine::collect_snapshot(&client, 0))
            .unwrap();
        times.push(start.elapsed());
        assert_eq!(snap.nodes.len(), NODES);
        // The same storages as the fake API's cluster, so the same calls (`CALLS`).
        let storages = snap
            .resources
            .iter()
            .filter(|r| r.kind.as_deref() == Some("storage"));
        assert_eq!(storages.count(), NODES);
        assert_eq!(
            snap.resources
                .iter()
                .filter(|r| r.kind.as_deref() == Some("qemu"))
                .count(),
            GUESTS
        );
    }
    let calls = CALLS;
    let (med, min, max) = median(times);
    // Where the time goes: the one big call, and one small per-node call.
    let timed = |f: &dyn Fn()| {
        let start = Instant::now();
        f();
        start.elapsed().as_secs_f64() * 1e3
    };
    let resources_ms = timed(&|| {
        runtime.block_on(client.cluster_resources(None)).unwrap();
    });
    let config_ms = timed(&|| {
        runtime.block_on(client.node_config("pve1")).unwrap();
    });
    let snap = runtime
        .block_on(flxp_engine::collect_snapshot(&client, 0))
        .unwrap();
    // The answer's `data` as the simulator sends it, decoded as the client does: in one pass.
    let body = serde_json::to_string(&snap.resources).unwrap();
    let (decode_ms, _, _) = median_of(RUNS, || {
        let decoded: Vec<Resource> = serde_json::from_str(&body).unwrap();
        assert_eq!(decoded.len(), 2 * NODES + GUESTS);
    });
    println!(
        "  one GET /cluster/resources ({} entries, {} KiB): {resources_ms:.1} ms, of which decoding in the client about {decode_ms:.1} ms; one GET /nodes/pve1/config: {config_ms:.1} ms",
        2 * NODES + GUESTS,
        body.len() / 1024
    );
    println!(
        "collect_snapshot via flxp_sim (HTTPS, pinned, token): {NODES} nodes, {GUESTS} guests, {LATENCY_MS} ms per call: {calls} API calls, median {med:.1} ms (min {min:.1}, max {max:.1}) over {RUNS} runs"
    );
    runtime.block_on(sim.shutdown()).unwrap();
}

/// Medians of `runs` timings of `f`, in milliseconds.
fn median_of(runs: usize, mut f: impl FnMut()) -> (f64, f64, f64) {
    let times = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    median(times)
}

fn bench_fake(runtime: &tokio::runtime::Runtime, snapshot: Snapshot) {
    let mut calls = 0;
    let collect = |latency_ms: u64, calls: &mut usize| {
        let fake = FakeApi::new(snapshot.clone()).with_latency(Duration::from_millis(latency_ms));
        let start = Instant::now();
        let snap = runtime
            .block_on(flxp_engine::collect_snapshot(&fake, 0))
            .unwrap();
        let elapsed = start.elapsed();
        *calls = fake.call_count();
        assert_eq!(snap.resources.len(), 2 * NODES + GUESTS);
        elapsed
    };
    let times = (0..RUNS).map(|_| collect(LATENCY_MS, &mut calls)).collect();
    let (med, min, max) = median(times);
    println!(
        "collect_snapshot via FakeApi (in memory): {NODES} nodes, {GUESTS} guests, {LATENCY_MS} ms per call: {calls} API calls, median {med:.1} ms (min {min:.1}, max {max:.1}) over {RUNS} runs"
    );
    // The same with no latency: the CPU time of one snapshot, flxp's and the fake's together.
    let cpu = (0..5 * RUNS).map(|_| collect(0, &mut calls)).collect();
    let (cpu_med, _, _) = median(cpu);
    // Its largest parts: the fake writing `/cluster/resources` as JSON text (a real server's
    // work), and flxp decoding that text into typed entries (what every transport does).
    let text = serde_json::to_string(&snapshot.resources).unwrap();
    let (write_ms, _, _) = median_of(5 * RUNS, || {
        assert_eq!(
            serde_json::to_string(&snapshot.resources).unwrap().len(),
            text.len()
        );
    });
    let (decode_ms, _, _) = median_of(5 * RUNS, || {
        let decoded: Vec<Resource> = serde_json::from_str(&text).unwrap();
        assert_eq!(decoded.len(), 2 * NODES + GUESTS);
    });
    println!(
        "  with no latency: median {cpu_med:.2} ms over {} runs; of it, the fake writing /cluster/resources ({} KiB) about {write_ms:.2} ms and flxp decoding it about {decode_ms:.2} ms",
        5 * RUNS,
        text.len() / 1024
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let scenario = Scenario::from_value(scenario_json()).unwrap();
    let snapshot = scenario.snapshot.clone();
    // Check the figure's premise once: the client asks exactly that many calls. Per online node:
    // notes and RRD (free bytes come from `/cluster/resources`, and no local storage holds guest
    // disks here, so nothing is listed); then the HA rules, resources, status and manager status,
    // the datacenter options and the task list.
    let fake = FakeApi::new(snapshot.clone());
    runtime
        .block_on(flxp_engine::collect_snapshot(&fake, 0))
        .unwrap();
    assert_eq!(fake.call_count(), CALLS);
    assert!(runtime.block_on(fake.version()).is_ok());
    bench_sim(&runtime, scenario);
    bench_fake(&runtime, snapshot);
}
