//! The daemon plans on smoothed CPU: a spike shorter than the hold moves nothing, a rise that
//! lasts moves a guest. The test moves the clock 5 minutes a round; the simulator adds little.

use std::time::Duration;

use flxp_core::Overrides;
use flxp_core::balance::{BalanceOptions, Metric};
use flxp_engine::DaemonOptions;
use serde_json::{Value, json};

use crate::support::{GIB, daemon_execute, zone};

/// Three nodes of 16 CPUs and 64 GiB, four 8-vCPU guests on each using a fifth of their CPUs
/// (40 % of a node) and 2 GiB; guest 100 on pve1 rises by `height` of its vCPUs `at` seconds
/// after the start for `minutes`.
fn cluster(at: u64, minutes: u64, height: f64) -> String {
    rising(&[100], at, minutes, height)
}

/// [`cluster`], with each of `vmids` rising.
fn rising(vmids: &[u32], at: u64, minutes: u64, height: f64) -> String {
    let mut resources: Vec<Value> = Vec::new();
    let mut models = serde_json::Map::new();
    for (i, node) in ["pve1", "pve2", "pve3"].iter().enumerate() {
        resources.push(
            json!({"id": format!("node/{node}"), "type": "node", "node": node,
            "status": "online", "maxcpu": 16, "cpu": 0.0, "maxmem": 64 * GIB}),
        );
        for j in 0..4 {
            let vmid = 100 + 10 * i as u32 + j;
            resources.push(
                json!({"id": format!("qemu/{vmid}"), "type": "qemu", "vmid": vmid,
                "node": node, "name": format!("vm{vmid}"), "status": "running", "maxcpu": 8,
                "cpu": 0.2, "maxmem": 4 * GIB, "mem": 2 * GIB}),
            );
            let mut cpu = json!({"level": 0.2});
            if vmids.contains(&vmid) {
                cpu["spikes"] = json!([{"at": at, "minutes": minutes, "height": height}]);
            }
            models.insert(vmid.to_string(), json!({"cpu": cpu}));
        }
    }
    json!({"resources": resources, "sim": {"trace": {"seed": 1, "models": models}}}).to_string()
}

/// Runs a daemon round every 5 simulated minutes for `rounds` rounds; the migrations started.
async fn migrations(doc: &str, smoothing_secs: u64, rounds: usize) -> usize {
    per_round(doc, smoothing_secs, rounds, 300.0)
        .await
        .iter()
        .sum()
}

/// Runs a daemon round every `step` simulated seconds for `rounds` rounds; the migrations each
/// round started.
async fn per_round(doc: &str, smoothing_secs: u64, rounds: usize, step: f64) -> Vec<usize> {
    // Fast enough for a migration to land within a round, slow beside the 5-minute steps.
    let z = zone(doc, 100.0, |_| {}).await;
    let d = z.daemon(
        Overrides::default(),
        DaemonOptions {
            // CPU counts for balancing with `dominant` only (memory is the default).
            balance: BalanceOptions {
                metric: Metric::Dominant,
                ..BalanceOptions::default()
            },
            execute: daemon_execute(),
            smoothing: Duration::from_secs(smoothing_secs),
            ..DaemonOptions::default()
        },
    );
    let mut moved = Vec::new();
    for _ in 0..rounds {
        let report = d.run_round("lab").await.unwrap();
        assert_eq!(report.error, None, "{report:#?}");
        moved.push(report.migrations_done() + report.migrations_failed());
        z.sim.clock().advance(step);
    }
    z.shutdown().await;
    moved
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spike_shorter_than_the_hold_moves_nothing_a_sustained_rise_does() {
    // Half of guest 100's vCPUs more for 15 minutes: pve1 reads 65 % of its CPUs at three
    // checks in a row, 25 pp above the others.
    let spike = cluster(600, 15, 0.5);
    // On the instant figures the hold of three checks is met inside the spike: a guest moves.
    assert!(migrations(&spike, 0, 12).await > 0);
    // Smoothed over 30 minutes the spike lifts pve1 by under 6 pp: nothing moves.
    assert_eq!(migrations(&spike, 1800, 12).await, 0);
    // The same rise for three hours is followed: a guest moves off pve1.
    let rise = cluster(600, 180, 0.5);
    assert!(migrations(&rise, 1800, 30).await > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spike_over_by_the_third_check_moves_nothing() {
    // Rounds every 10 minutes. Guest 100 uses 6 more cores from minute 15 to 37: pve1 reads
    // 77.5 % of its CPUs at minutes 20 and 30, 40 % again at minute 40. Its 30-minute average
    // is 50.6 %, 58.2 % and 53.0 % there: 10.6 pp, 18.2 pp and 13.0 pp above the others, three
    // checks above the threshold. The third check's read shows the spike over: nothing moves.
    let spike = cluster(900, 22, 0.75);
    assert_eq!(per_round(&spike, 1800, 12, 600.0).await, [0; 12]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_past_the_overload_line_moves_at_the_first_check_that_reads_it() {
    // Guests 100 and 101 each use 4.8 more cores from minute 15 on: pve1 reads 100 % of its
    // CPUs at minute 20, where its average has risen to 57 % only. The first check after the
    // step moves guests off pve1, planned on what it read; the averages would have waited out
    // the hold until minute 40.
    let step = rising(&[100, 101], 900, 600, 0.6);
    let moved = per_round(&step, 1800, 8, 600.0).await;
    assert_eq!(
        moved.iter().position(|&n| n > 0),
        Some(2),
        "migrations per round: {moved:?}"
    );
    assert_eq!(moved[3..], [0; 5], "one round settles it: {moved:?}");
}
