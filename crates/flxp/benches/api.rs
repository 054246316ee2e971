//! `placement` queries per second through the API (HTTP + GraphQL) against the simulator.
//!
//! The simulator runs in this process (HTTPS on a loopback port, no added latency); `flxp serve`
//! runs as a child process pointing at it; N clients send `placement` queries back to back for a
//! fixed time. Every query reads the cluster afresh (snapshots are shared by queries that arrive
//! together, never reused across them), so the figure is the whole path: HTTP, GraphQL, snapshot
//! collection from the API, the placement decision, the answer.
//!
//! `cargo bench -p flxp --bench api` (optional args: seconds per run, cluster sizes as
//! `nodes:guests`, e.g. `-- 3 4:20 16:400`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark panics on setup errors

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use flxp_sim::{Scenario, Sim, SimHandle, TlsIdentity};
use serde_json::json;

#[path = "../tests/it/serve_command.rs"]
mod serve_command;
use serve_command::serve_command;

const API_TOKEN: &str = "bench-api-token-4c2e9a";
const PVE_TOKEN: &str = "root@pam!flxp=5f0c3a8e-1d2b-4c6f-9a7e-3b2d1c0f9e8d";
const QUERY: &str = r#"query { placement(zone: "lab", request: { memory: "4GiB", cores: 2 }, explain: true) { node candidates { node score } } }"#;

struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn serve(scenario: Scenario) -> (SimHandle, Child, String, tempfile::TempDir) {
    let mut scenario = scenario;
    scenario.add_token(PVE_TOKEN).unwrap();
    let tls = TlsIdentity::generate(&["127.0.0.1".to_owned()]).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sim = SimHandle::spawn(listener, Sim::new(scenario).unwrap(), Some(&tls)).unwrap();
    let (id, secret) = PVE_TOKEN.rsplit_once('=').unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("flxp.toml");
    std::fs::write(
        &config,
        format!(
            "[zones.lab]\nhosts = [\"{}\"]\ntoken = \"{id}\"\ntoken-secret = \"{secret}\"\nfingerprint = \"{}\"\n[daemon]\ninterval-secs = 86400\n",
            sim.addr(),
            sim.fingerprint().unwrap()
        ),
    )
    .unwrap();
    let mut child = serve_command(&config)
        .env("FLXP_API_TOKEN", API_TOKEN)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pipe = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("flxp serve: listening on ") {
                let _ = tx.send(url.to_owned());
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("flxp serve did not start");
    (sim, Child(child), url, dir)
}

/// Runs `clients` loops for `secs`; returns (queries, sorted latencies).
async fn run(url: &str, clients: usize, secs: f64) -> (usize, Vec<Duration>) {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let http = http.clone();
        let stop = Arc::clone(&stop);
        let url = format!("{url}/graphql");
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let v: serde_json::Value = http
                    .post(&url)
                    .bearer_auth(API_TOKEN)
                    .json(&json!({ "query": QUERY }))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                assert!(v["data"]["placement"]["node"].is_string(), "{v}");
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort();
    (all.len(), all)
}

fn pct(lat: &[Duration], p: f64) -> f64 {
    if lat.is_empty() {
        return 0.0;
    }
    let i = ((lat.len() - 1) as f64 * p).round() as usize;
    lat[i].as_secs_f64() * 1000.0
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let secs: f64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(3.0);
    let mut sizes: Vec<(usize, usize)> = args
        .iter()
        .skip(1)
        .filter_map(|a| {
            let (n, g) = a.split_once(':')?;
            Some((n.parse().ok()?, g.parse().ok()?))
        })
        .collect();
    if sizes.is_empty() {
        sizes = vec![(4, 20), (16, 400)];
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        println!("placement queries through flxp serve (HTTP + GraphQL) against flxp-sim over HTTPS, {secs} s per run");
        println!("{:>14} {:>8} {:>10} {:>10} {:>10}", "cluster", "clients", "queries/s", "p50 ms", "p99 ms");
        for (nodes, guests) in sizes {
            let scenario = if (nodes, guests) == (4, 20) {
                Scenario::demo()
            } else {
                Scenario::synthetic(nodes, guests, 7)
            };
            let (_sim, _child, url, _dir) = serve(scenario).await;
            // Warm up connections and the first snapshot.
            run(&url, 4, 0.5).await;
            for clients in [1, 4, 16, 64] {
                let (n, lat) = run(&url, clients, secs).await;
                println!(
                    "{:>14} {:>8} {:>10.0} {:>10.1} {:>10.1}",
                    format!("{nodes}n/{guests}g"),
                    clients,
                    n as f64 / secs,
                    pct(&lat, 0.5),
                    pct(&lat, 0.99)
                );
            }
        }
    });
}
