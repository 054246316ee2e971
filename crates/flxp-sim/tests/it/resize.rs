//! Disk resize (`PUT /nodes/{node}/qemu/{vmid}/resize`): absolute and `+` sizes, a short
//! `resize` task that writes `size=` (digest and `maxdisk` follow), qemu-server's refusals as
//! task failures (PVE 8+) or 500s (PVE 7), and parameter checks as 400s.

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use serde_json::{Value, json};

use crate::support::{GIB, RO_TOKEN, Resp, TestSim, cluster, urlencode};

/// `scsi0` of a VM's config.
async fn scsi0(s: &TestSim, node: &str, vmid: u32) -> String {
    config(s, node, vmid).await["scsi0"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn config(s: &TestSim, node: &str, vmid: u32) -> Value {
    s.get(&format!("/nodes/{node}/qemu/{vmid}/config"))
        .await
        .data()
        .clone()
}

/// The `ceph` storage entry's used bytes as pve1 reports it.
async fn ceph_used(s: &TestSim) -> u64 {
    s.resource("storage/pve1/ceph").await["disk"]
        .as_u64()
        .unwrap()
}

/// `PUT /nodes/{node}/qemu/{vmid}/resize` of one disk to `size` (`64G`, `+1.5G`).
async fn resize(s: &TestSim, node: &str, vmid: u32, disk: &str, size: &str) -> Resp {
    let path = format!("/nodes/{node}/qemu/{vmid}/resize");
    s.put(&path, &[("disk", disk), ("size", size)]).await
}

#[tokio::test(start_paused = true)]
async fn an_absolute_size_grows_the_disk_when_the_resize_task_ends() {
    let s = TestSim::cluster();
    let before = config(&s, "pve2", 102).await;
    let used = ceph_used(&s).await;
    assert_eq!(s.resource("qemu/102").await["maxdisk"], 32 * GIB);
    let upid = resize(&s, "pve2", 102, "scsi0", "64G").await.upid();
    // qemu-server forks a `resize` worker on the VM's node; its id is the VMID.
    assert!(upid.starts_with("UPID:pve2:"), "{upid}");
    assert!(upid.contains(":resize:102:root@pam!test:"), "{upid}");
    assert_eq!(s.task(&upid).await["status"], "running");
    assert_eq!(s.resource("qemu/102").await["maxdisk"], 32 * GIB);
    assert_eq!(s.wait(&upid).await["exitstatus"], "OK");
    let after = config(&s, "pve2", 102).await;
    let old = before["scsi0"].as_str().unwrap();
    assert_eq!(
        after["scsi0"].as_str().unwrap(),
        old.replace("size=32G", "size=64G")
    );
    assert_ne!(after["digest"], before["digest"], "the config file changed");
    assert_eq!(s.resource("qemu/102").await["maxdisk"], 64 * GIB);
    assert_eq!(
        ceph_used(&s).await,
        used + 32 * GIB,
        "the volume takes room"
    );
    let list = s.get("/nodes/pve2/qemu").await;
    let entry = list
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["vmid"] == 102)
        .cloned();
    assert_eq!(entry.unwrap()["maxdisk"], 64 * GIB);
    assert_eq!(s.log(&upid).await, ["TASK OK"]);
}

#[tokio::test(start_paused = true)]
async fn a_plus_size_grows_a_running_vm_by_that_much() {
    let s = TestSim::cluster();
    let upid = resize(&s, "pve1", 100, "scsi0", "+1.5G").await.upid();
    assert_eq!(s.wait(&upid).await["exitstatus"], "OK");
    assert!(scsi0(&s, "pve1", 100).await.ends_with("size=34304M"));
    assert_eq!(
        s.resource("qemu/100").await["maxdisk"],
        32 * GIB + 1536 * (1 << 20)
    );
    assert_eq!(s.resource("qemu/100").await["status"], "running");
}

#[tokio::test(start_paused = true)]
async fn shrinking_fails_in_the_task_and_changes_nothing() {
    let s = TestSim::cluster();
    let before = config(&s, "pve2", 102).await;
    let upid = resize(&s, "pve2", 102, "scsi0", "16G").await.upid();
    let t = s.task(&upid).await;
    assert_eq!(t["status"], "stopped", "the worker fails at once");
    assert_eq!(t["exitstatus"], "shrinking disks is not supported");
    assert_eq!(
        s.log(&upid).await,
        ["TASK ERROR: shrinking disks is not supported"]
    );
    assert_eq!(config(&s, "pve2", 102).await, before);
}

#[tokio::test(start_paused = true)]
async fn the_same_size_is_a_task_that_changes_nothing() {
    let s = TestSim::cluster();
    let before = config(&s, "pve2", 102).await;
    for size in ["32G", "+0", "32768M"] {
        let upid = s
            .put(
                "/nodes/pve2/qemu/102/resize",
                &[("disk", "scsi0"), ("size", size)],
            )
            .await
            .upid();
        assert_eq!(s.task(&upid).await["exitstatus"], "OK", "{size}");
    }
    assert_eq!(config(&s, "pve2", 102).await, before);
}

#[tokio::test(start_paused = true)]
async fn refusals_come_back_as_the_task_exit_status() {
    let s = TestSim::cluster();
    let fails = |node: &'static str, vmid: u32, params: Vec<(&'static str, String)>| {
        let s = s.clone();
        async move {
            let p: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let upid = s
                .put(&format!("/nodes/{node}/qemu/{vmid}/resize"), &p)
                .await
                .upid();
            let t = s.task(&upid).await;
            assert_eq!(t["status"], "stopped");
            t["exitstatus"].as_str().unwrap().to_string()
        }
    };
    let grow = |disk: &str| vec![("disk", disk.to_string()), ("size", "+1G".to_string())];
    assert_eq!(
        fails("pve2", 102, grow("scsi5")).await,
        "disk 'scsi5' does not exist"
    );
    assert_eq!(
        fails("pve1", 9000, grow("ide2")).await,
        "you can't resize a cdrom",
        "the cloud-init drive is a CD-ROM"
    );
    assert_eq!(
        fails("pve1", 102, grow("scsi0")).await,
        "Configuration file 'nodes/pve1/qemu-server/102.conf' does not exist"
    );
    let mut stale = grow("scsi0");
    stale.push(("digest", "0".repeat(40)));
    assert_eq!(
        fails("pve2", 102, stale).await,
        "checksum mismatch (file change by other user?)"
    );
    // A fresh clone is locked until its task ends.
    let clone = s
        .post_task(
            "/nodes/pve1/qemu/9000/clone",
            &[("newid", "300"), ("name", "c")],
        )
        .await;
    assert_eq!(
        fails("pve1", 300, grow("scsi0")).await,
        "VM is locked (clone)"
    );
    s.wait(&clone).await;
    // With the digest just read, the resize goes through.
    let digest = config(&s, "pve1", 300).await["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let upid = s
        .put(
            "/nodes/pve1/qemu/300/resize",
            &[("disk", "scsi0"), ("size", "40G"), ("digest", &digest)],
        )
        .await
        .upid();
    assert_eq!(s.wait(&upid).await["exitstatus"], "OK");
    assert_eq!(
        scsi0(&s, "pve1", 300).await,
        "ceph:base-9000-disk-0/vm-300-disk-0,size=40G"
    );
}

#[tokio::test(start_paused = true)]
async fn bad_parameters_are_400s_naming_the_parameter() {
    let s = TestSim::cluster();
    let path = "/nodes/pve2/qemu/102/resize";
    for (params, key, message) in [
        (
            vec![("disk", "scsi0"), ("size", "64g")],
            "size",
            "value does not match the regex pattern",
        ),
        (
            vec![("disk", "scsi0"), ("size", "-8G")],
            "size",
            "value does not match the regex pattern",
        ),
        (
            vec![("disk", "unused0"), ("size", "64G")],
            "disk",
            "value 'unused0' does not have a value in the enumeration",
        ),
        (
            vec![("disk", "scsi0")],
            "size",
            "property is missing and it is not optional",
        ),
        (
            vec![("disk", "scsi0"), ("size", "64G"), ("skiplock", "1")],
            "skiplock",
            "Only root may use this option.",
        ),
    ] {
        let r = s.put(path, &params).await;
        assert_eq!(r.status, 400, "{params:?}: {r:?}");
        let got = r.json["errors"][key].as_str().unwrap_or_default();
        assert!(got.starts_with(message), "{params:?}: {got:?}");
    }
    let ro = s.with_auth(Some(format!("PVEAPIToken={RO_TOKEN}")));
    let r = ro.put(path, &[("disk", "scsi0"), ("size", "64G")]).await;
    r.assert_refused(403, "Permission check failed (/vms/102, VM.Config.Disk)");
    assert!(scsi0(&s, "pve2", 102).await.ends_with("size=32G"));
}

#[tokio::test(start_paused = true)]
async fn root_may_skip_the_lock() {
    let s = TestSim::cluster();
    let anon = s.with_auth(None);
    let login = anon
        .post(
            "/access/ticket",
            &[("username", "root@pam"), ("password", "secret")],
        )
        .await;
    let ticket = login.data()["ticket"].as_str().unwrap().to_string();
    let csrf = login.data()["CSRFPreventionToken"]
        .as_str()
        .unwrap()
        .to_string();
    s.post_task(
        "/nodes/pve1/qemu/9000/clone",
        &[("newid", "300"), ("name", "c")],
    )
    .await;
    let req = Request::builder()
        .method("PUT")
        .uri("/api2/json/nodes/pve1/qemu/300/resize")
        .header("cookie", format!("PVEAuthCookie={ticket}"))
        .header("CSRFPreventionToken", csrf)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from("disk=scsi0&size=48G&skiplock=1"))
        .unwrap();
    let upid = s.send(req).await.upid();
    assert!(upid.contains(":resize:300:root@pam:"), "{upid}");
    assert_eq!(s.wait(&upid).await["exitstatus"], "OK");
    assert!(scsi0(&s, "pve1", 300).await.ends_with("size=48G"));
}

#[tokio::test(start_paused = true)]
async fn maxdisk_follows_the_boot_disk_only() {
    let s = TestSim::cluster();
    s.put(
        "/nodes/pve2/qemu/102/config",
        &[("scsi1", "ceph:vm-102-disk-1,size=4G")],
    )
    .await
    .data();
    let upid = resize(&s, "pve2", 102, "scsi1", "+4G").await.upid();
    s.wait(&upid).await;
    assert_eq!(
        config(&s, "pve2", 102).await["scsi1"],
        "ceph:vm-102-disk-1,size=8G"
    );
    assert_eq!(
        s.resource("qemu/102").await["maxdisk"],
        32 * GIB,
        "scsi0 boots"
    );
    s.put(
        "/nodes/pve2/qemu/102/config",
        &[("boot", "order=ide2;scsi1;scsi0")],
    )
    .await
    .data();
    assert_eq!(s.resource("qemu/102").await["maxdisk"], 8 * GIB);
}

#[tokio::test(start_paused = true)]
async fn stopping_the_task_leaves_the_disk_as_it_was() {
    let s = TestSim::cluster();
    let upid = resize(&s, "pve2", 102, "scsi0", "64G").await.upid();
    s.delete(&format!("/nodes/pve2/tasks/{}", urlencode(&upid)))
        .await
        .data();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(s.task(&upid).await["exitstatus"], "interrupted by signal");
    assert!(scsi0(&s, "pve2", 102).await.ends_with("size=32G"));
}

#[tokio::test(start_paused = true)]
async fn before_pve_8_the_resize_is_done_when_the_call_answers() {
    let mut doc = cluster();
    doc["sim"]["version"] = json!("7.4.17");
    let s = TestSim::new(doc);
    let r = resize(&s, "pve2", 102, "scsi0", "+32G").await;
    assert_eq!(r.data(), &Value::Null);
    assert!(scsi0(&s, "pve2", 102).await.ends_with("size=64G"));
    assert_eq!(s.resource("qemu/102").await["maxdisk"], 64 * GIB);
    let r = resize(&s, "pve2", 102, "scsi0", "32G").await;
    r.assert_refused(500, "shrinking disks is not supported");
    assert_eq!(r.json["message"], "shrinking disks is not supported\n");
}
