//! Injected faults: errors at a rate on chosen paths, latency, failing migrations.

use std::time::Duration;

use serde_json::json;

use crate::support::{TestSim, cluster};

#[tokio::test(start_paused = true)]
async fn error_faults_answer_instead_of_the_handler() {
    let mut doc = cluster();
    doc["sim"]["faults"] = json!({"errors": [
        {"path": "/cluster/resources", "status": 503, "message": "service unavailable"}]});
    let s = TestSim::new(doc);
    let r = s.get("/cluster/resources").await;
    r.assert_refused(503, "service unavailable");
    assert_eq!(r.json["message"], "service unavailable\n");
    assert_eq!(s.get("/version").await.status, 200);
}

#[tokio::test(start_paused = true)]
async fn error_rates_are_deterministic_per_seed() {
    let run = |seed: u64| async move {
        let mut doc = cluster();
        doc["sim"]["seed"] = json!(seed);
        doc["sim"]["faults"] =
            json!({"errors": [{"path": "/nodes/*/qemu", "rate": 0.3, "status": 595}]});
        let s = TestSim::new(doc);
        let mut fails = Vec::new();
        for _ in 0..200 {
            fails.push(s.get("/nodes/pve1/qemu").await.status == 595);
        }
        fails
    };
    let a = run(11).await;
    assert_eq!(a, run(11).await);
    let n = a.iter().filter(|f| **f).count();
    assert!((35..=85).contains(&n), "{n} of 200 at rate 0.3");
}

#[tokio::test(start_paused = true)]
async fn latency_faults_delay_matching_requests() {
    let mut doc = cluster();
    doc["sim"]["latency_ms"] = json!(5);
    doc["sim"]["faults"] = json!({"latency": [{"path": "/nodes/*/rrddata", "ms": 200}]});
    let s = TestSim::new(doc);
    let t = tokio::time::Instant::now();
    s.get("/version").await;
    assert_eq!(t.elapsed(), Duration::from_millis(5));
    let t = tokio::time::Instant::now();
    s.get("/nodes/pve1/rrddata?timeframe=hour").await;
    assert_eq!(t.elapsed(), Duration::from_millis(205));
}

#[tokio::test(start_paused = true)]
async fn a_failing_migration_fails_half_way_and_leaves_the_guest() {
    let mut doc = cluster();
    doc["sim"]["faults"] =
        json!({"fail_migrations": [100, {"vmid": 101, "message": "storage migration failed"}]});
    let s = TestSim::new(doc);
    let upid = s.live_migrate("pve1", "qemu/100", "pve2").await;
    tokio::time::sleep(Duration::from_millis(1900)).await;
    assert_eq!(s.task(&upid).await["status"], "running");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let st = s.task(&upid).await;
    assert_eq!(st["exitstatus"], "migration problems");
    let r = s.resource("qemu/100").await;
    assert_eq!(r["node"], "pve1");
    assert!(r.get("lock").is_none());
    let log = s.log(&upid).await;
    assert!(
        log.iter()
            .any(|l| l.contains("ERROR: online migrate failure")),
        "{log:?}"
    );
    assert_eq!(log.last().unwrap(), "TASK ERROR: migration problems");
}

#[tokio::test(start_paused = true)]
async fn faults_change_at_run_time_through_the_control_endpoint() {
    let s = TestSim::cluster();
    let r = s
        .control("PUT", "/_sim/faults", json!({"errors": [{"path": "/version", "method": "GET", "status": 500, "message": "boom"}]}))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(s.get("/version").await.reason.as_deref(), Some("boom"));
    assert_eq!(
        s.get("/_sim/faults").await.data()["errors"][0]["message"],
        "boom"
    );
    let bad = s
        .control(
            "PUT",
            "/_sim/faults",
            json!({"errors": [{"path": "/version", "rate": 2}]}),
        )
        .await;
    bad.assert_bad_request("faults.errors[0].rate");
    assert_eq!(s.delete("/_sim/faults").await.status, 200);
    assert_eq!(s.get("/version").await.status, 200);
}
