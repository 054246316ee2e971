//! Simulator figures on divan, on a synthetic 32-node, 2,000-guest cluster: world construction,
//! the in-process cost of the endpoints a scheduler polls, the storage list after a world change
//! and while the world stays, migration and disk-resize churn (200 tasks started, then landed by
//! one catch-up), and a `flxp snapshot`-shaped collection over a socket with 0 and 5 ms latency.
//!
//! Run: `cargo bench -p flxp-sim --bench sim` (a name filter such as `-- request` measures some
//! rows).

// A benchmark may panic on set-up failure: that is its report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::body::Body;
use axum::http::Request;
use divan::Bencher;
use flxp_sim::{Scenario, Sim, SimHandle};
use tower::ServiceExt;

const TOKEN: &str = "root@pam!bench=5e0c7d62-8d2a-4c1e-b7a9-0f6e5d4c3b2a";

fn main() {
    divan::main();
}

fn scenario(latency_ms: u64) -> Scenario {
    let mut s = Scenario::synthetic(32, 2000, 1);
    s.add_token(TOKEN).unwrap();
    s.sim.latency_ms = Some(latency_ms);
    s
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Sends one request in process; its answer's length in bytes, or `None` when it was refused.
async fn send(router: &axum::Router, method: &str, path: &str, body: String) -> Option<usize> {
    let req = Request::builder()
        .method(method)
        .uri(format!("/api2/json{path}"))
        .header("authorization", format!("PVEAPIToken={TOKEN}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from(body))
        .unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    let ok = resp.status() == 200;
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap()
        .len();
    ok.then_some(bytes)
}

/// Building the world: the scenario's checks and the world itself.
#[divan::bench(sample_count = 10)]
fn world_construction(bencher: Bencher) {
    bencher
        .with_inputs(|| scenario(0))
        .bench_values(|s| Sim::new(s).unwrap());
}

/// One in-process GET of an endpoint a scheduler polls.
#[divan::bench(
    sample_count = 20,
    args = [
        "/cluster/resources",
        "/cluster/resources?type=node",
        "/nodes",
        "/nodes/pve1/qemu",
        "/nodes/pve1/rrddata?timeframe=hour",
        "/nodes/pve1/rrddata?timeframe=day",
        "/nodes/pve1/qemu/100/config",
        "/cluster/ha/status/current",
        "/cluster/tasks",
    ]
)]
fn request(bencher: Bencher, path: &str) {
    let (rt, sim) = (runtime(), Sim::new(scenario(0)).unwrap());
    let router = sim.router();
    bencher.bench_local(|| {
        rt.block_on(send(&router, "GET", path, String::new()))
            .expect(path)
    });
}

/// The storage list sums every guest's volumes once per world change, then reuses the sums.
#[divan::bench(sample_count = 20, args = ["after a world change", "sums kept"])]
fn storage_list(bencher: Bencher, when: &str) {
    let (rt, sim) = (runtime(), Sim::new(scenario(0)).unwrap());
    let router = sim.router();
    let changed = when == "after a world change";
    bencher.bench_local(|| {
        if changed {
            // Any mutable access to the world counts as a change (and the lock is let go).
            let mut w = sim.world();
            let _: &mut flxp_sim::world::World = &mut w;
        }
        rt.block_on(send(&router, "GET", "/nodes/pve1/storage", String::new()))
            .expect("storage")
    });
}

/// The requests of 200 tasks of `kind` on a fresh world: (method, path, form body).
fn tasks(sim: &Sim, kind: &str) -> Vec<(&'static str, String, String)> {
    let w = sim.world();
    w.guests
        .values()
        .filter(|g| g.kind == flxp_sim::world::GuestKind::Qemu)
        .filter(|g| {
            if kind == "migrate" {
                g.running
            } else {
                g.lock().is_none()
            }
        })
        .take(200)
        .map(|g| {
            let node = &g.node;
            if kind == "migrate" {
                let n: usize = node[3..].parse().unwrap();
                let path = format!("/nodes/{node}/qemu/{}/migrate", g.vmid);
                ("POST", path, format!("target=pve{}&online=1", n % 32 + 1))
            } else {
                let path = format!("/nodes/{node}/qemu/{}/resize", g.vmid);
                ("PUT", path, "disk=scsi0&size=%2B1G".to_owned())
            }
        })
        .collect()
}

/// Starting 200 tasks (live migrations or 1 GiB disk resizes), one call each.
#[divan::bench(sample_count = 5, args = ["migrate", "resize"])]
fn start_200_tasks(bencher: Bencher, kind: &str) {
    let rt = runtime();
    bencher
        .with_inputs(|| {
            let sim = Sim::new(scenario(0)).unwrap();
            let requests = tasks(&sim, kind);
            (sim, requests)
        })
        .bench_local_values(|(sim, requests)| {
            let router = sim.router();
            let started = rt.block_on(async {
                let mut started = 0;
                for (method, path, body) in requests {
                    started += usize::from(send(&router, method, &path, body).await.is_some());
                }
                started
            });
            assert_eq!(started, 200, "{kind}");
            sim
        });
}

/// Landing 200 started tasks: the clock advanced by an hour, then one catch-up of the world.
#[divan::bench(sample_count = 5, args = ["migrate", "resize"])]
fn land_200_tasks(bencher: Bencher, kind: &str) {
    let rt = runtime();
    bencher
        .with_inputs(|| {
            let sim = Sim::new(scenario(0)).unwrap();
            let router = sim.router();
            rt.block_on(async {
                for (method, path, body) in tasks(&sim, kind) {
                    send(&router, method, &path, body).await.expect("started");
                }
            });
            sim.clock().advance(3600.0);
            sim
        })
        .bench_local_values(|sim| {
            drop(sim.world());
            sim
        });
}

/// A snapshot-shaped collection over a socket: resources, then per node config and rrddata
/// concurrently, then HA status, rules, resources, options and tasks; with `latency_ms` added to
/// every request.
#[divan::bench(sample_count = 10, args = [0, 5])]
fn snapshot_shaped_collection(bencher: Bencher, latency_ms: u64) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let handle = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        SimHandle::spawn(listener, Sim::new(scenario(latency_ms)).unwrap(), None).unwrap()
    });
    let base = handle.base_url();
    let client = reqwest::Client::new();
    let get = |path: String| {
        let client = client.clone();
        let url = format!("{base}{path}");
        async move {
            let r = client
                .get(url)
                .header("Authorization", format!("PVEAPIToken={TOKEN}"))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success());
            r.bytes().await.unwrap().len()
        }
    };
    bencher.bench_local(|| {
        rt.block_on(async {
            let mut bytes = get("/cluster/resources".into()).await;
            let mut per_node = Vec::new();
            for n in 1..=32 {
                per_node.push(tokio::spawn(get(format!("/nodes/pve{n}/config"))));
                per_node.push(tokio::spawn(get(format!(
                    "/nodes/pve{n}/rrddata?timeframe=hour"
                ))));
            }
            for p in [
                "/cluster/ha/status/current",
                "/cluster/ha/rules",
                "/cluster/ha/resources",
                "/cluster/options",
                "/cluster/tasks",
            ] {
                per_node.push(tokio::spawn(get(p.to_owned())));
            }
            for h in per_node {
                bytes += h.await.unwrap();
            }
            bytes
        })
    });
}
