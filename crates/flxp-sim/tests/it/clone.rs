//! Clone rules: linked clones of templates, full clones, `target` only from shared storage, the
//! `clone` lock during the task, task id = source VMID, tags and cloud-init copied.

use crate::support::{TestSim, sleep};

#[tokio::test(start_paused = true)]
async fn linked_clone_of_a_shared_template_lands_on_the_target_node() {
    let s = TestSim::cluster();
    let params = [("newid", "200"), ("name", "web-9"), ("target", "pve2")];
    let upid = s.clone_guest("pve1", "9000", &params).await;
    // The task runs on the template's node, its id is the SOURCE vmid.
    assert!(upid.starts_with("UPID:pve1:"), "{upid}");
    assert!(upid.contains(":qmclone:9000:root@pam!test:"), "{upid}");
    s.assert_resource("qemu/200", &[("node", "pve2"), ("lock", "clone")])
        .await;
    // Tags cannot be written before the clone ends.
    let locked = s.set_config("pve2", "qemu/200", &[("tags", "x")]).await;
    locked.assert_reason("VM is locked (clone)");
    s.wait_ok(&upid).await;
    let r = s.resource("qemu/200").await;
    assert!(r.get("lock").is_none());
    assert_eq!(r["tags"], "template", "tags are copied");
    assert_eq!(r["template"], 0);
    let c = s.config("pve2", "qemu/200").await;
    let src = s.config("pve1", "qemu/9000").await;
    assert_eq!(c["name"], "web-9");
    assert_eq!(c["scsi0"], "ceph:base-9000-disk-0/vm-200-disk-0,size=32G");
    assert_eq!(c["ide2"], "ceph:vm-200-cloudinit,media=cdrom");
    assert_eq!(c["ciuser"], "ubuntu");
    assert_ne!(c["net0"], src["net0"], "a clone gets a new MAC");
    assert_ne!(c["smbios1"], src["smbios1"]);
    assert!(c.get("template").is_none());
}

#[tokio::test(start_paused = true)]
async fn local_storage_cannot_be_cloned_to_another_node() {
    let s = TestSim::cluster();
    let params = [("newid", "201"), ("target", "pve2"), ("full", "1")];
    let r = s.post("/nodes/pve1/qemu/9001/clone", &params).await;
    r.assert_refused(500, "can't clone VM to node 'pve2' (VM uses local storage)");
    assert!(s.resource("qemu/201").await.is_null());
}

#[tokio::test(start_paused = true)]
async fn full_clone_copies_the_disks_at_the_clone_bandwidth() {
    let s = TestSim::cluster();
    let upid = s
        .clone_guest("pve1", "9001", &[("newid", "201"), ("full", "1")])
        .await;
    // 16 GiB at 1 GiB/s: still copying after 15 s, done after 16 s.
    sleep(15.0).await;
    assert_eq!(s.task(&upid).await["status"], "running");
    assert_eq!(s.resource("qemu/201").await["lock"], "clone");
    sleep(1.1).await;
    assert_eq!(s.task(&upid).await["exitstatus"], "OK");
    let c = s.config("pve1", "qemu/201").await;
    assert_eq!(c["scsi0"], "local-lvm:vm-201-disk-0,size=16G");
    assert_eq!(c["name"], "Copy-of-VM-local-tpl");
}

#[tokio::test(start_paused = true)]
async fn clone_refusals_have_proxmox_texts() {
    let s = TestSim::cluster();
    for (node, vmid, params, reason) in [
        (
            "pve1",
            "9000",
            &[("newid", "100")][..],
            "unable to create VM 100: config file already exists",
        ),
        (
            "pve1",
            "100",
            &[("newid", "202"), ("full", "0")],
            "Linked clone feature is not supported for drive 'scsi0'",
        ),
        (
            "pve1",
            "9000",
            &[("newid", "202"), ("storage", "ceph")],
            "parameter 'storage' not allowed for linked clones",
        ),
        (
            "pve2",
            "9000",
            &[("newid", "202")],
            "Configuration file 'nodes/pve2/qemu-server/9000.conf' does not exist",
        ),
    ] {
        let r = s
            .post(&format!("/nodes/{node}/qemu/{vmid}/clone"), params)
            .await;
        r.assert_reason(reason);
    }
    let r = s
        .post(
            "/nodes/pve1/qemu/9000/clone",
            &[("newid", "202"), ("name", "not_a_dns_name")],
        )
        .await;
    r.assert_param_error(
        "name",
        "invalid format - value does not look like a valid DNS name\n",
    );
}

#[tokio::test(start_paused = true)]
async fn a_full_clone_of_a_vm_is_the_default_and_can_be_started() {
    let s = TestSim::cluster();
    s.clone_and_wait("pve2", "102", "203").await;
    let c = s.config("pve2", "qemu/203").await;
    assert!(
        c["scsi0"]
            .as_str()
            .unwrap()
            .starts_with("ceph:vm-203-disk-0"),
        "{}",
        c["scsi0"]
    );
    s.wait(&s.post_task("/nodes/pve2/qemu/203/status/start", &[]).await)
        .await;
    let r = s.resource("qemu/203").await;
    assert_eq!(r["status"], "running");
    assert!(r["mem"].as_u64().unwrap() > 0);
}
