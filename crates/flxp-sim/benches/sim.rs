//! Simulator figures: world construction, in-process request cost of the endpoints a scheduler
//! polls, migration and disk resize churn, and a `flxp snapshot`-shaped collection over a socket with 5 ms
//! latency per call, on a synthetic 32-node, 2,000-guest cluster.
//!
//! Run: `cargo bench -p flxp-sim --bench sim` (prints a table; no assertions).

// A benchmark may panic on set-up failure: that is its report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use flxp_sim::{Scenario, Sim, SimHandle};
use tower::ServiceExt;

const TOKEN: &str = "root@pam!bench=5e0c7d62-8d2a-4c1e-b7a9-0f6e5d4c3b2a";

fn scenario(latency_ms: u64) -> Scenario {
    let mut s = Scenario::synthetic(32, 2000, 1);
    s.add_token(TOKEN).unwrap();
    s.sim.latency_ms = Some(latency_ms);
    s
}

async fn call(router: &axum::Router, path: &str) -> usize {
    let req = Request::builder()
        .uri(format!("/api2/json{path}"))
        .header("authorization", format!("PVEAPIToken={TOKEN}"))
        .body(Body::empty())
        .unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200, "{path}");
    axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap()
        .len()
}

async fn per_call(router: &axum::Router, path: &str, n: u32) -> (Duration, usize) {
    let mut bytes = 0;
    let start = Instant::now();
    for _ in 0..n {
        bytes = call(router, path).await;
    }
    (start.elapsed() / n, bytes)
}

/// Sends the form-encoded `requests` (method, path, body) one by one, then advances the clock by
/// `advance` (seconds, and how the table names it) and lets the world catch up once; prints the
/// mean cost of a call that started a task and of the catch-up.
async fn churn(
    sim: &Sim,
    router: &axum::Router,
    what: &str,
    requests: impl Iterator<Item = (&'static str, String, String)>,
    advance: (f64, &str),
) {
    let start = Instant::now();
    let mut started = 0;
    for (method, path, body) in requests {
        let req = Request::builder()
            .method(method)
            .uri(format!("/api2/json{path}"))
            .header("authorization", format!("PVEAPIToken={TOKEN}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Body::from(body))
            .unwrap();
        if router.clone().oneshot(req).await.unwrap().status() == 200 {
            started += 1;
        }
    }
    let t_start = start.elapsed();
    sim.clock().advance(advance.0);
    let start = Instant::now();
    drop(sim.world());
    let t_land = start.elapsed();
    println!(
        "{:<52} {:>12}",
        format!("start {started} {what} (per call)"),
        format!(
            "{:.3} ms",
            t_start.as_secs_f64() * 1e3 / started.max(1) as f64
        )
    );
    println!(
        "{:<52} {:>12}",
        format!("land them all (advance {}, one catch-up)", advance.1),
        format!("{:.1} ms", t_land.as_secs_f64() * 1e3)
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let start = Instant::now();
        let sim = Sim::new(scenario(0)).unwrap();
        let build = start.elapsed();
        println!("synthetic cluster: 32 nodes, 2000 guests");
        println!(
            "{:<52} {:>12}",
            "world construction (scenario check + build)",
            format!("{:.1} ms", build.as_secs_f64() * 1e3)
        );
        let router = sim.router();
        println!(
            "{:<52} {:>12} {:>10}",
            "in-process request (mean of 20)", "time", "bytes"
        );
        for path in [
            "/cluster/resources",
            "/cluster/resources?type=node",
            "/nodes",
            "/nodes/pve1/qemu",
            "/nodes/pve1/rrddata?timeframe=hour",
            "/nodes/pve1/rrddata?timeframe=day",
            "/nodes/pve1/qemu/100/config",
            "/cluster/ha/status/current",
            "/cluster/tasks",
        ] {
            let (t, bytes) = per_call(&router, path, 20).await;
            println!(
                "  {:<50} {:>12} {:>10}",
                path,
                format!("{:.3} ms", t.as_secs_f64() * 1e3),
                bytes
            );
        }

        // The storage list sums every guest's volumes once per world change, then reuses them.
        let path = "/nodes/pve1/storage";
        let mut bytes = 0;
        let start = Instant::now();
        for _ in 0..20 {
            // Any mutable access to the world counts as a change (and the lock is let go).
            let mut w = sim.world();
            let _: &mut flxp_sim::world::World = &mut w;
            drop(w);
            bytes = call(&router, path).await;
        }
        let cold = start.elapsed() / 20;
        let (warm, _) = per_call(&router, path, 20).await;
        for (what, t) in [("after a world change", cold), ("sums kept", warm)] {
            println!(
                "  {:<50} {:>12} {:>10}",
                format!("{path} ({what})"),
                format!("{:.3} ms", t.as_secs_f64() * 1e3),
                bytes
            );
        }

        // Migration churn: start 200 live migrations, then let them land.
        let targets: Vec<(u32, String, String)> = {
            let w = sim.world();
            w.guests
                .values()
                .filter(|g| g.running && g.kind == flxp_sim::world::GuestKind::Qemu)
                .take(200)
                .map(|g| {
                    let n: usize = g.node[3..].parse().unwrap();
                    (g.vmid, g.node.clone(), format!("pve{}", n % 32 + 1))
                })
                .collect()
        };
        let migrations = targets.iter().map(|(vmid, node, target)| {
            let path = format!("/nodes/{node}/qemu/{vmid}/migrate");
            ("POST", path, format!("target={target}&online=1"))
        });
        churn(
            &sim,
            &router,
            "live migrations",
            migrations,
            (3600.0, "1 h"),
        )
        .await;

        // Resize churn: grow 200 boot disks by 1 GiB (each a `resize` task), then let them land.
        let resizes: Vec<(u32, String)> = {
            let w = sim.world();
            w.guests
                .values()
                .filter(|g| g.kind == flxp_sim::world::GuestKind::Qemu && g.lock().is_none())
                .take(200)
                .map(|g| (g.vmid, g.node.clone()))
                .collect()
        };
        let grow = resizes.iter().map(|(vmid, node)| {
            let path = format!("/nodes/{node}/qemu/{vmid}/resize");
            ("PUT", path, "disk=scsi0&size=%2B1G".to_string())
        });
        churn(&sim, &router, "disk resizes", grow, (60.0, "1 min")).await;

        // A snapshot-shaped collection over a socket: resources, then per node config and
        // rrddata concurrently, then HA status, rules, resources, options and tasks.
        for latency in [0u64, 5] {
            let sim = Sim::new(scenario(latency)).unwrap();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let handle = SimHandle::spawn(listener, sim, None).unwrap();
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
            let start = Instant::now();
            let mut calls = 0;
            let mut bytes = get("/cluster/resources".into()).await;
            calls += 1;
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
                per_node.push(tokio::spawn(get(p.to_string())));
            }
            for h in per_node {
                bytes += h.await.unwrap();
                calls += 1;
            }
            let took = start.elapsed();
            println!(
                "{:<52} {:>12} {:>10}",
                format!("snapshot-shaped collection, {latency} ms latency: {calls} calls"),
                format!("{:.1} ms", took.as_secs_f64() * 1e3),
                bytes
            );
            handle.shutdown().await.unwrap();
        }
    });
}
