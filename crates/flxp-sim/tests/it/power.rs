//! Node power: shutdown through `POST /nodes/{node}/status` (guests stopped, HA services
//! recovered, the node offline after the shutdown time) and Wake-on-LAN (online after the boot
//! time), as pve-manager's `PVE/API2/Nodes.pm` has them.

use std::time::Duration;

use serde_json::json;

use crate::support::{RO_TOKEN, TestSim, cluster};

async fn sleep(secs: f64) {
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
}

fn sim() -> TestSim {
    let mut doc = cluster();
    doc["sim"]["node_shutdown_secs"] = json!(20);
    doc["sim"]["node_boot_secs"] = json!(90);
    doc["sim"]["ha_fence_delay_secs"] = json!(60);
    TestSim::new(doc)
}

#[tokio::test(start_paused = true)]
async fn a_shut_down_node_stops_its_guests_goes_offline_and_wakes_after_the_boot_time() {
    let s = sim();
    let r = s
        .post("/nodes/pve1/status", &[("command", "shutdown")])
        .await;
    assert_eq!(r.data(), &serde_json::Value::Null);
    // Not refused with guests on it, and still up during the shutdown time.
    sleep(10.0).await;
    assert_eq!(s.resource("node/pve1").await["status"], "online");
    assert_eq!(s.resource("qemu/100").await["status"], "running");
    sleep(11.0).await;
    assert_eq!(s.resource("node/pve1").await["status"], "offline");
    assert_eq!(s.get("/nodes/pve1/qemu").await.status, 595);
    // After the fence delay HA recovers its started service; the others stay, stopped.
    sleep(61.0).await;
    let ha = s.resource("qemu/110").await;
    assert_ne!(ha["node"], "pve1");
    assert_eq!(ha["status"], "running");
    assert_eq!(s.resource("qemu/100").await["node"], "pve1");

    // Wake-on-LAN goes through another node's API, answers the MAC, and boots the node.
    let mac = s.post("/nodes/pve1/wakeonlan", &[]).await;
    assert_eq!(mac.data(), "bc:24:11:00:00:01");
    sleep(60.0).await;
    assert_eq!(s.resource("node/pve1").await["status"], "offline");
    sleep(31.0).await;
    assert_eq!(s.resource("node/pve1").await["status"], "online");
    assert_eq!(
        s.resource("qemu/100").await["status"],
        "stopped",
        "guests stay stopped unless onboot"
    );
    // A packet to a node that is up changes nothing.
    assert_eq!(s.post("/nodes/pve1/wakeonlan", &[]).await.status, 200);
    assert_eq!(s.resource("node/pve1").await["status"], "online");
}

#[tokio::test(start_paused = true)]
async fn a_reboot_comes_back_by_itself() {
    let s = sim();
    s.post("/nodes/pve2/status", &[("command", "reboot")])
        .await
        .data();
    sleep(21.0).await;
    assert_eq!(s.resource("node/pve2").await["status"], "offline");
    sleep(90.0).await;
    assert_eq!(s.resource("node/pve2").await["status"], "online");
}

#[tokio::test(start_paused = true)]
async fn power_calls_are_checked_as_proxmox_checks_them() {
    let s = sim();
    let r = s.post("/nodes/pve1/status", &[("command", "halt")]).await;
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.body.contains("command"), "{}", r.body);
    let r = s.post("/nodes/nope/wakeonlan", &[]).await;
    assert_ne!(r.status, 200);
    let ro = s.with_auth(Some(format!("PVEAPIToken={RO_TOKEN}")));
    let r = ro
        .post("/nodes/pve1/status", &[("command", "shutdown")])
        .await;
    assert_eq!(r.status, 403, "{r:?}");
    assert!(r.body.contains("Sys.PowerMgmt"), "{}", r.body);
    let r = ro.post("/nodes/pve1/wakeonlan", &[]).await;
    assert_eq!(r.status, 403, "{r:?}");
    assert!(r.body.contains("Sys.PowerMgmt"), "{}", r.body);
    // An offline node cannot be told to shut down (the call is proxied to it).
    s.post("/nodes/pve3/status", &[("command", "shutdown")])
        .await
        .data();
    sleep(21.0).await;
    let r = s
        .post("/nodes/pve3/status", &[("command", "shutdown")])
        .await;
    assert_eq!(r.status, 595, "{r:?}");
}

#[tokio::test(start_paused = true)]
async fn a_reboot_changes_the_boot_time_and_quorum_follows_the_offline_nodes() {
    let s = sim();
    let uptime = |s: &TestSim| {
        let s = s.clone();
        async move {
            s.get_data("/nodes/pve2/status").await["uptime"]
                .as_u64()
                .unwrap()
        }
    };
    let before = uptime(&s).await;
    assert!(before >= 1000, "{before}");
    s.post("/nodes/pve2/status", &[("command", "reboot")])
        .await
        .data();
    sleep(21.0).await;
    // Three nodes, one down: two of three votes keep quorum.
    let status = s.get_data("/cluster/status").await;
    assert_eq!(status[0]["quorate"], 1, "{status}");
    sleep(90.0).await;
    let after = uptime(&s).await;
    assert!(after < 100, "booted anew: uptime {after}");

    // With two of three nodes down, the cluster is no longer quorate, and HA says so.
    s.post("/nodes/pve1/status", &[("command", "shutdown")])
        .await
        .data();
    s.post("/nodes/pve2/status", &[("command", "shutdown")])
        .await
        .data();
    sleep(21.0).await;
    let status = s.get_data("/cluster/status").await;
    assert_eq!(status[0]["quorate"], 0, "{status}");
    let ha = s.get_data("/cluster/ha/status/current").await;
    assert_eq!(ha[0]["quorate"], 0, "{ha}");
}

#[tokio::test(start_paused = true)]
async fn a_node_set_to_fail_its_boot_stays_offline() {
    let s = sim();
    s.control("PUT", "/_sim/faults", json!({"fail_boots": ["pve3"]}))
        .await
        .assert_ok();
    s.post("/nodes/pve3/status", &[("command", "reboot")])
        .await
        .data();
    sleep(21.0 + 90.0 + 60.0).await;
    assert_eq!(s.resource("node/pve3").await["status"], "offline");
    // The fault lifted, a wake brings it back.
    s.control("DELETE", "/_sim/faults", json!({}))
        .await
        .assert_ok();
    s.post("/nodes/pve3/wakeonlan", &[]).await.data();
    sleep(91.0).await;
    assert_eq!(s.resource("node/pve3").await["status"], "online");
}
