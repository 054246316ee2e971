//! The control endpoint: guest usage, node status, state and snapshot reads, time.

use std::time::Duration;

use serde_json::json;

use crate::support::{GIB, TestSim};

#[tokio::test(start_paused = true)]
async fn guest_usage_changes_the_guest_and_its_node() {
    let s = TestSim::cluster();
    let before = s.resource("node/pve1").await;
    let r = s
        .control(
            "POST",
            "/_sim/guests/100/usage",
            json!({"cpu": 1.0, "memhost": 4 * GIB, "mem": 3 * GIB}),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let g = s.resource("qemu/100").await;
    assert_eq!(g["cpu"], 1.0);
    assert_eq!(g["mem"], 3 * GIB);
    assert_eq!(g["memhost"], 4 * GIB);
    let after = s.resource("node/pve1").await;
    assert_eq!(
        after["mem"].as_u64().unwrap() - before["mem"].as_u64().unwrap(),
        2 * GIB
    );
    // 2 vCPUs went from 25 % to 100 %: 1.5 more cores busy of 16.
    let delta = after["cpu"].as_f64().unwrap() - before["cpu"].as_f64().unwrap();
    assert!((delta - 1.5 / 16.0).abs() < 1e-9, "{delta}");
    let bad = s
        .control("POST", "/_sim/guests/100/usage", json!({"cpu": 2.0}))
        .await;
    assert_eq!(bad.status, 400);
    let bad = s
        .control("POST", "/_sim/guests/100/usage", json!({"cpus": 0.5}))
        .await;
    bad.assert_bad_request("unknown field `cpus`");
    let missing = s
        .control("POST", "/_sim/guests/999/usage", json!({"cpu": 0.5}))
        .await;
    assert_eq!(missing.status, 500);
}

#[tokio::test(start_paused = true)]
async fn state_and_snapshot_show_the_whole_world() {
    let s = TestSim::cluster();
    let st = s.get("/_sim/state").await.data().clone();
    assert_eq!(st["nodes"].as_array().unwrap().len(), 3);
    assert_eq!(st["guests"].as_array().unwrap().len(), 9);
    assert_eq!(st["time"], 1_764_400_000.0);
    let snap = s.get("/_sim/snapshot").await.data().clone();
    assert_eq!(snap["time"], 1_764_400_000);
    let again =
        flxp_sim::Scenario::from_value(snap.clone()).expect("a snapshot of the sim is a scenario");
    assert_eq!(
        again.snapshot.resources.len(),
        snap["resources"].as_array().unwrap().len()
    );
}

#[tokio::test(start_paused = true)]
async fn advancing_time_lands_migrations() {
    let s = TestSim::cluster();
    let upid = s.live_migrate("pve1", "qemu/100", "pve2").await;
    let r = s
        .control("POST", "/_sim/advance", json!({"seconds": 60}))
        .await;
    assert_eq!(r.data()["time"], 1_764_400_060.0);
    assert_eq!(s.task(&upid).await["exitstatus"], "OK");
    assert_eq!(s.resource("qemu/100").await["node"], "pve2");
}

#[tokio::test(start_paused = true)]
async fn a_jump_past_a_week_is_refused_and_the_simulator_still_answers() {
    // Every minute of a jump is sampled: 10^12 s used to hold the world for hours.
    let s = TestSim::cluster();
    let r = s
        .control("POST", "/_sim/advance", json!({"seconds": 1e12}))
        .await;
    assert_eq!(r.status, 400);
    assert!(
        r.body.contains("at most 604800 (a week) per call"),
        "{}",
        r.body
    );
    let r = s
        .control("POST", "/_sim/advance", json!({"seconds": 60}))
        .await;
    assert_eq!(r.data()["time"], 1_764_400_060.0);
}

#[tokio::test(start_paused = true)]
async fn the_control_endpoint_needs_credentials() {
    let s = TestSim::cluster();
    let r = s.with_auth(None).get("/_sim/state").await;
    assert_eq!(r.status, 401);
    let r = s
        .with_auth(None)
        .control("POST", "/_sim/advance", json!({"seconds": 1}))
        .await;
    assert_eq!(r.status, 401);
    tokio::time::sleep(Duration::from_millis(1)).await;
}

#[tokio::test(start_paused = true)]
async fn statistics_can_lag_like_pvestatd_broadcasts() {
    let mut doc = crate::support::cluster();
    doc["sim"]["stats_interval_secs"] = json!(10);
    let s = TestSim::new(doc);
    // Start at a broadcast boundary plus 1 s.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = s.resource("node/pve2").await["mem"].as_u64().unwrap();
    let upid = s.live_migrate("pve1", "qemu/100", "pve2").await;
    s.wait(&upid).await; // lands after 4 s: t = 5 s
    let r = s.resource("qemu/100").await;
    assert_eq!(r["node"], "pve2", "the node field is current");
    assert_eq!(
        s.resource("node/pve2").await["mem"].as_u64().unwrap(),
        before,
        "usage not yet broadcast"
    );
    tokio::time::sleep(Duration::from_secs(6)).await; // t = 11 s: the broadcast at 10 s shows it
    assert_eq!(
        s.resource("node/pve2").await["mem"].as_u64().unwrap() - before,
        2 * GIB
    );
}

#[tokio::test(start_paused = true)]
async fn read_only_principals_may_look_but_not_change_the_world() {
    let s = TestSim::cluster();
    let ro = s.with_auth(Some(format!("PVEAPIToken={}", crate::support::RO_TOKEN)));
    assert_eq!(ro.get("/_sim/state").await.status, 200);
    let r = ro
        .control(
            "POST",
            "/_sim/nodes/pve1/status",
            json!({"status": "offline"}),
        )
        .await;
    assert_eq!(r.status, 403, "{r:?}");
    assert_eq!(ro.delete("/_sim/faults").await.status, 403);
    let r = ro
        .control("POST", "/_sim/clock", json!({"time_scale": 100}))
        .await;
    assert_eq!(r.status, 403, "{r:?}");
    assert_eq!(s.resource("node/pve1").await["status"], "online");
}

#[tokio::test(start_paused = true)]
async fn answers_are_dated_by_the_simulated_clock() {
    let s = TestSim::cluster();
    tokio::time::advance(Duration::from_secs(5)).await;
    let r = s.get("/version").await;
    let date = r.headers["date"].to_str().unwrap();
    let t = httpdate::parse_http_date(date)
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert_eq!(t, 1_764_400_005, "{date}");
}

#[tokio::test(start_paused = true)]
async fn the_clock_can_run_faster_or_slower_from_now_on() {
    let s = TestSim::cluster();
    tokio::time::advance(Duration::from_secs(10)).await;
    let r = s
        .control("POST", "/_sim/clock", json!({"time_scale": 60}))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.data()["time"], 1_764_400_010.0);
    tokio::time::advance(Duration::from_secs(2)).await;
    let r = s.get("/_sim/clock").await;
    assert_eq!(r.data()["time"], 1_764_400_130.0);
    assert_eq!(r.data()["time_scale"], 60.0);
    // A migration started now lands by the simulated clock, whatever its pace.
    let upid = s.live_migrate("pve1", "qemu/100", "pve2").await;
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(s.task(&upid).await["exitstatus"], "OK");
    for bad in [
        json!({"time_scale": 0}),
        json!({"time_scale": -1}),
        json!({"time_scale": 1e9}),
    ] {
        let r = s.control("POST", "/_sim/clock", bad).await;
        assert_eq!(r.status, 400, "{r:?}");
        assert!(r.body.contains("time_scale"), "{}", r.body);
    }
    let r = s.control("POST", "/_sim/clock", json!({"scale": 2})).await;
    r.assert_bad_request("unknown field `scale`");
    assert_eq!(s.get("/_sim/clock").await.data()["time_scale"], 60.0);
}
