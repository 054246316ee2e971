//! `rrddata` rows of nodes and guests: resolution, pressure fields, history that follows changes.

use serde_json::json;

use crate::support::{GIB, TestSim, sleep};

#[tokio::test(start_paused = true)]
async fn node_rows_cover_the_hour_with_pressure_fields() {
    let s = TestSim::cluster();
    let rows = s.list("/nodes/pve1/rrddata?timeframe=hour").await;
    assert_eq!(rows.len(), 60);
    let last = rows.last().unwrap();
    assert_eq!(last["time"], 1_764_400_000 / 60 * 60);
    assert_eq!(rows[0]["time"], last["time"].as_i64().unwrap() - 59 * 60);
    for f in [
        "pressurecpusome",
        "pressureiosome",
        "pressureiofull",
        "pressurememorysome",
        "pressurememoryfull",
        "memtotal",
        "memused",
        "memavailable",
        "cpu",
        "maxcpu",
        "loadavg",
        "netin",
        "netout",
    ] {
        assert!(last.get(f).is_some(), "missing {f} in {last}");
    }
    assert!(
        last.get("pressurecpufull").is_none(),
        "nodes have no pressurecpufull"
    );
    assert_eq!(last["memtotal"], (64 * GIB) as f64);
    let week = s.list("/nodes/pve1/rrddata?timeframe=week&cf=MAX").await;
    assert_eq!(week.len(), 336);
}

#[tokio::test(start_paused = true)]
async fn guest_rows_differ_by_kind() {
    let s = TestSim::cluster();
    let vm = s.list("/nodes/pve1/qemu/100/rrddata?timeframe=hour").await;
    let last = vm.last().unwrap();
    assert_eq!(last["maxmem"], (4 * GIB) as f64);
    assert_eq!(last["cpu"], 0.25);
    assert!(last.get("memhost").is_some());
    assert!(last.get("pressurecpufull").is_some());
    let rows = s.list("/nodes/pve2/lxc/103/rrddata?timeframe=day").await;
    assert_eq!(rows.len(), 1440);
    assert!(rows.last().unwrap().get("memhost").is_none());
    assert!(rows.last().unwrap().get("pressurecpufull").is_none());
    let r = s.get("/nodes/pve1/qemu/100/rrddata?timeframe=decade").await;
    assert_eq!(r.status, 400, "guests have no decade");
}

#[tokio::test(start_paused = true)]
async fn history_follows_load_changes_step_by_step() {
    let s = TestSim::cluster();
    // Wait for a step boundary, then raise the load half-way through the next step.
    sleep((60 - 1_764_400_000 % 60 + 30) as f64).await;
    s.control("POST", "/_sim/guests/100/usage", json!({"cpu": 0.75}))
        .await;
    sleep(31.0).await;
    let rows = s.list("/nodes/pve1/qemu/100/rrddata?timeframe=hour").await;
    let last = &rows[rows.len() - 1];
    let before = &rows[rows.len() - 2];
    assert_eq!(before["cpu"], 0.25);
    assert_eq!(last["cpu"], 0.5, "half the step at 0.25, half at 0.75");
    let max = s
        .list("/nodes/pve1/qemu/100/rrddata?timeframe=hour&cf=MAX")
        .await;
    // A 60 s row holds one primary data point, the step's average: its maximum is the same, as
    // rrdtool's MAX archive of one point per row keeps it.
    assert_eq!(max.last().unwrap()["cpu"], 0.5);
    let n = s.list("/nodes/pve1/rrddata?timeframe=hour").await;
    let delta =
        n[n.len() - 1]["loadavg"].as_f64().unwrap() - n[n.len() - 2]["loadavg"].as_f64().unwrap();
    assert!(
        (delta - 0.5).abs() < 1e-9,
        "2 vCPUs × 0.25 more load, half the step: {delta}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_new_guest_has_no_rows_before_it_existed() {
    let s = TestSim::cluster();
    s.clone_and_wait("pve1", "9000", "500").await;
    sleep(120.0).await;
    let rows = s.list("/nodes/pve1/qemu/500/rrddata?timeframe=hour").await;
    assert!(rows[0].get("cpu").is_none());
    assert_eq!(rows[0].as_object().unwrap().len(), 1, "only `time`");
    assert!(rows.last().unwrap().get("maxmem").is_some());
}
