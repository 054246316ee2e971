//! `collect_snapshot` of a 32-node, 2,000-guest cluster against the simulator (`flxp_sim`, HTTPS
//! with a pinned certificate, token auth), on divan: with 5 ms added to every request (the real
//! client end to end) and with none (the CPU cost of one snapshot, the simulator's answers
//! included); then where its time goes: the one big call, one small per-node call, and decoding
//! `/cluster/resources` alone.
//!
//! Run: `cargo bench -p flxp-engine --bench snapshot` (a name filter such as `-- collect`
//! measures one row).
// A benchmark may panic on a broken setup: that is its failure report.
#![allow(clippy::unwrap_used)]

use divan::Bencher;
use flxp_core::snapshot::Resource;
use flxp_pve::{Client, ClientBuilder, Credentials, Fingerprint, Host, Secret, TlsTrust};
use flxp_sim::{Scenario, Sim, SimHandle, TlsIdentity};
use serde_json::{Value, json};

const NODES: usize = 32;
const GUESTS: usize = 2000;
/// The API calls of one snapshot of this cluster: per online node its notes and RRD (free bytes
/// come from `/cluster/resources`, and no local storage holds guest disks here, so nothing is
/// listed); then the HA rules, resources, status and manager status, the datacenter options and
/// the task list. Checked against the simulator's request count when a row is set up.
const CALLS: u64 = 1 + 2 * NODES as u64 + 6;
const TOKEN: &str = "root@pam!bench=2f1c0e8b-8a6c-4d1e-9f9a-0b1c2d3e4f5a";

fn main() {
    divan::main();
}

/// The cluster as a scenario document: nodes with notes, guests spread evenly, `latency_ms`
/// added to every request.
fn scenario_json(latency_ms: u64) -> Value {
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
            // pool from the simulator, which `CALLS` would then have to list.
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
        "sim": {"tokens": [TOKEN], "latency_ms": latency_ms},
    })
}

/// A simulator serving the cluster over HTTPS and a client pinned to it, after one snapshot that
/// opened the connections (as a long-running daemon has them open) and checked the premise.
/// Dropping it drops the runtime, and with it the simulator's server.
struct Fixture {
    runtime: tokio::runtime::Runtime,
    sim: SimHandle,
    client: Client,
}

impl Fixture {
    fn new(latency_ms: u64) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let scenario = Scenario::from_value(scenario_json(latency_ms)).unwrap();
        let (sim, client) = runtime.block_on(async {
            let identity = TlsIdentity::generate(&[]).unwrap();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let sim =
                SimHandle::spawn(listener, Sim::new(scenario).unwrap(), Some(&identity)).unwrap();
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
        let fixture = Self {
            runtime,
            sim,
            client,
        };
        let snap = fixture.collect();
        assert_eq!(fixture.requests(), CALLS, "the calls of one snapshot");
        assert_eq!(snap.nodes.len(), NODES);
        assert_eq!(
            snap.resources
                .iter()
                .filter(|r| r.kind.as_deref() == Some("qemu"))
                .count(),
            GUESTS
        );
        fixture
    }

    fn collect(&self) -> flxp_core::Snapshot {
        self.runtime
            .block_on(flxp_engine::collect_snapshot(&self.client, 0))
            .unwrap()
    }

    /// Requests the simulator has answered so far.
    fn requests(&self) -> u64 {
        self.sim.sim().world().records.requests.values().sum()
    }
}

/// One whole snapshot, with `latency_ms` added to every request.
#[divan::bench(args = [5, 0], sample_count = 10, sample_size = 1)]
fn collect_snapshot(bencher: Bencher, latency_ms: u64) {
    let f = Fixture::new(latency_ms);
    bencher.bench_local(|| f.collect());
}

/// One `GET /cluster/resources` (2,064 entries) with 5 ms latency: the snapshot's one big call.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn cluster_resources(bencher: Bencher) {
    let f = Fixture::new(5);
    bencher.bench_local(|| {
        f.runtime
            .block_on(f.client.cluster_resources(None))
            .unwrap()
    });
}

/// One `GET /nodes/pve1/config` with 5 ms latency: a small per-node call.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn node_config(bencher: Bencher) {
    let f = Fixture::new(5);
    bencher.bench_local(|| f.runtime.block_on(f.client.node_config("pve1")).unwrap());
}

/// Decoding the `data` of `/cluster/resources` as the simulator sends it, as the client does: in
/// one pass into typed entries.
#[divan::bench(sample_count = 20)]
fn decode_cluster_resources(bencher: Bencher) {
    let f = Fixture::new(0);
    let body = serde_json::to_string(&f.collect().resources).unwrap();
    bencher.bench_local(|| {
        let decoded: Vec<Resource> = serde_json::from_str(&body).unwrap();
        assert_eq!(decoded.len(), 2 * NODES + GUESTS);
    });
}
