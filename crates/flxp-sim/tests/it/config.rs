//! Config reads and writes: digests, locks, pending changes, node notes.

use crate::support::{GIB, TestSim};

#[tokio::test(start_paused = true)]
async fn config_has_a_digest_and_typed_values() {
    let s = TestSim::cluster();
    let c = s.config("pve1", "qemu/100").await;
    let digest = c["digest"].as_str().unwrap();
    assert_eq!(digest.len(), 40);
    assert!(digest.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(c["cores"], 2, "integers are numbers");
    assert_eq!(c["memory"], "4096", "memory is a property string in PVE 9");
    assert_eq!(c["name"], "web-1");
    assert!(c["net0"].as_str().unwrap().contains("bridge=vmbr0"));
}

#[tokio::test(start_paused = true)]
async fn a_stale_digest_is_a_checksum_mismatch() {
    let s = TestSim::cluster();
    let d1 = s.config("pve2", "qemu/102").await["digest"].clone();
    let d1 = d1.as_str().unwrap();
    let r = s
        .set_config("pve2", "qemu/102", &[("description", "x"), ("digest", d1)])
        .await;
    r.assert_ok();
    let d2 = s.config("pve2", "qemu/102").await["digest"].clone();
    assert_ne!(d1, d2.as_str().unwrap());
    let r = s
        .set_config("pve2", "qemu/102", &[("description", "y"), ("digest", d1)])
        .await;
    r.assert_refused(500, "checksum mismatch (file change by other user?)");
    let r = s.set_config("pve2", "qemu/102", &[]).await;
    r.assert_refused(500, "no options specified");
}

#[tokio::test(start_paused = true)]
async fn a_locked_vm_refuses_config_writes() {
    let s = TestSim::cluster();
    s.live_migrate("pve1", "qemu/100", "pve2").await;
    let r = s.set_config("pve1", "qemu/100", &[("tags", "x")]).await;
    r.assert_refused(500, "VM is locked (migrate)");
    assert_eq!(s.config("pve1", "qemu/100").await["lock"], "migrate");
}

#[tokio::test(start_paused = true)]
async fn memory_of_a_running_vm_stays_pending_until_restart() {
    let s = TestSim::cluster();
    let memory = [("memory", "8192")];
    let r = s.set_config("pve1", "qemu/100", &memory).await;
    r.assert_ok();
    assert_eq!(s.config("pve1", "qemu/100").await["memory"], "8192");
    assert_eq!(
        s.get("/nodes/pve1/qemu/100/config?current=1").await.data()["memory"],
        "4096"
    );
    assert_eq!(s.resource("qemu/100").await["maxmem"], 4 * GIB);
    let stop = s.post_task("/nodes/pve1/qemu/100/status/stop", &[]).await;
    s.wait_ok(&stop).await;
    assert_eq!(s.resource("qemu/100").await["maxmem"], 8 * GIB);
    assert_eq!(s.resource("qemu/100").await["status"], "stopped");
    let start = s.post_task("/nodes/pve1/qemu/100/status/start", &[]).await;
    s.wait_ok(&start).await;
    assert_eq!(s.resource("qemu/100").await["status"], "running");
}

#[tokio::test(start_paused = true)]
async fn node_notes_are_the_config_description() {
    let s = TestSim::cluster();
    let path = "/nodes/pve2/config";
    let c = s.get_data(path).await;
    assert!(c.get("description").is_none());
    let digest = c["digest"].as_str().unwrap();
    let notes = "flxp.label.ssd flxp.taint.gpu";
    s.put(path, &[("description", notes), ("digest", digest)])
        .await
        .assert_ok();
    assert_eq!(s.get_data(path).await["description"], notes);
    let r = s
        .put(path, &[("description", "x"), ("digest", digest)])
        .await;
    assert_eq!(r.status, 500);
    s.put(path, &[("delete", "description")]).await.assert_ok();
    let c = s.get_data(path).await;
    assert!(c.get("description").is_none());
}

#[tokio::test(start_paused = true)]
async fn start_stop_and_shutdown_are_tasks() {
    let s = TestSim::cluster();
    let r = s.post("/nodes/pve2/qemu/102/status/shutdown", &[]).await;
    r.assert_refused(500, "VM 102 not running");
    let start = s.post_task("/nodes/pve2/qemu/102/status/start", &[]).await;
    assert!(start.contains(":qmstart:102:root@pam!test:"), "{start}");
    assert_eq!(s.task(&start).await["status"], "running");
    s.wait(&start).await;
    assert_eq!(s.resource("qemu/102").await["status"], "running");
    let again = s.post_task("/nodes/pve2/qemu/102/status/start", &[]).await;
    assert_eq!(s.wait(&again).await["exitstatus"], "VM 102 already running");
    let down = s
        .post_task("/nodes/pve2/qemu/102/status/shutdown", &[])
        .await;
    assert!(down.contains(":qmshutdown:"));
    s.wait(&down).await;
    assert_eq!(s.resource("qemu/102").await["status"], "stopped");
    // qemu-server's `vm_start` refuses a template in the worker, not in the handler.
    let upid = s
        .post("/nodes/pve1/qemu/9000/status/start", &[])
        .await
        .upid();
    assert_eq!(
        s.wait(&upid).await["exitstatus"],
        "you can't start a vm if it's a template"
    );
    let ct = s.post_task("/nodes/pve2/lxc/104/status/start", &[]).await;
    assert!(ct.contains(":vzstart:104:"));
    s.wait(&ct).await;
    assert_eq!(s.resource("lxc/104").await["status"], "running");
}

#[tokio::test(start_paused = true)]
async fn create_and_delete_a_vm() {
    let s = TestSim::cluster();
    let r = s
        .post(
            "/nodes/pve2/qemu",
            &[
                ("vmid", "300"),
                ("name", "fresh"),
                ("memory", "2048"),
                ("cores", "2"),
                ("scsi0", "ceph:16"),
                ("net0", "virtio,bridge=vmbr0"),
                ("tags", "B;a"),
                ("start", "1"),
            ],
        )
        .await;
    let upid = r.upid();
    assert!(upid.contains(":qmcreate:300:"));
    assert_eq!(s.resource("qemu/300").await["lock"], "create");
    s.wait(&upid).await;
    let c = s.config("pve2", "qemu/300").await;
    assert_eq!(c["scsi0"], "ceph:vm-300-disk-0,size=16G");
    assert!(
        c["net0"].as_str().unwrap().starts_with("virtio=BC:24:11:"),
        "{}",
        c["net0"]
    );
    assert_eq!(c["tags"], "a;b");
    assert_eq!(s.resource("qemu/300").await["status"], "running");
    let r = s.post("/nodes/pve2/qemu", &[("vmid", "300")]).await;
    r.assert_reason("unable to create VM 300: config file already exists");
    let r = s.delete("/nodes/pve2/qemu/300").await;
    r.assert_reason("VM 300 is running - destroy failed");
    s.wait(&s.post_task("/nodes/pve2/qemu/300/status/stop", &[]).await)
        .await;
    let del = s.delete("/nodes/pve2/qemu/300").await.upid();
    assert!(del.contains(":qmdestroy:300:"));
    s.wait(&del).await;
    assert!(s.resource("qemu/300").await.is_null());
    let r = s.delete("/nodes/pve1/qemu/110").await;
    assert_eq!(r.status, 500, "{r:?}");
}

#[tokio::test(start_paused = true)]
async fn a_cloud_init_password_is_never_answered_back() {
    let s = TestSim::cluster();
    let secret = "s3cret-initial-pw";
    s.set_config(
        "pve1",
        "qemu/100",
        &[("cipassword", secret), ("ciuser", "admin")],
    )
    .await
    .assert_ok();
    // As qemu-server's `vm_config`: the password is set, but shown only as stars.
    let c = s.config("pve1", "qemu/100").await;
    assert_eq!(c["cipassword"], "**********", "{c}");
    assert_eq!(c["ciuser"], "admin", "{c}");
    let current = s.get("/nodes/pve1/qemu/100/config?current=1").await;
    assert_eq!(current.data()["cipassword"], "**********");
    let text = s.get_data("/_sim/state").await.to_string();
    assert!(text.contains("\"cipassword\":\"**********\""), "{text}");
    assert!(!text.contains(secret), "{text}");
}
