//! Migration lifecycle: precondition, lock, duration from bandwidth, node flip, failure cases,
//! LXC rules and HA-managed guests.

use serde_json::json;

use crate::support::{
    GIB, TestSim, cluster_with, live_to, resource_entry, restart_to, sleep, task_path, urlencode,
};

#[tokio::test(start_paused = true)]
async fn precondition_lists_allowed_nodes_and_local_disks() {
    let s = TestSim::cluster();
    let p = s.get_data("/nodes/pve1/qemu/100/migrate").await;
    assert_eq!(p["running"], 1);
    assert_eq!(p["allowed_nodes"], json!(["pve2", "pve3"]));
    assert_eq!(p["local_disks"], json!([]));
    let p = s.get_data("/nodes/pve1/qemu/101/migrate").await;
    let disks = p["local_disks"].as_array().unwrap();
    assert_eq!(disks.len(), 1);
    assert_eq!(disks[0]["volid"], "local-lvm:vm-101-disk-0");
    assert_eq!(disks[0]["drivename"], "scsi0");
    assert_eq!(disks[0]["size"], 8 * GIB);
    let ct = s.get_data("/nodes/pve2/lxc/103/migrate").await;
    assert_eq!(ct["allowed-nodes"], json!(["pve1", "pve3"]));
    assert_eq!(ct["running"], 1);
}

#[tokio::test(start_paused = true)]
async fn live_migration_locks_lasts_memory_over_bandwidth_and_flips_the_node() {
    let s = TestSim::cluster();
    let before = s.resource("node/pve2").await["mem"].as_u64().unwrap();
    let upid = s.live_migrate("pve1", "qemu/100", "pve2").await;
    assert!(
        upid.starts_with("UPID:pve1:") && upid.contains(":qmigrate:100:root@pam!test:"),
        "{upid}"
    );
    let at_source = [("lock", "migrate"), ("node", "pve1"), ("status", "running")];
    s.assert_resource("qemu/100", &at_source).await;
    let tasks = s.tasks().await;
    let t = tasks.iter().find(|t| t["upid"] == upid.as_str()).unwrap();
    assert_eq!(t["type"], "qmigrate");
    assert_eq!(t["user"], "root@pam");
    assert_eq!(t["tokenid"], "test");
    assert!(t.get("endtime").is_none());
    // 4 GiB at 1 GiB/s = 4 s.
    sleep(3.9).await;
    assert_eq!(s.node_of("qemu/100").await, "pve1");
    assert_eq!(s.task(&upid).await["status"], "running");
    sleep(0.2).await;
    let st = s.task(&upid).await;
    assert_eq!(st["status"], "stopped");
    assert_eq!(st["exitstatus"], "OK");
    s.assert_settled_on("qemu/100", "pve2").await;
    assert_eq!(s.resource("qemu/100").await["status"], "running");
    let after = s.resource("node/pve2").await["mem"].as_u64().unwrap();
    assert_eq!(
        after - before,
        2 * GIB,
        "the target pays the guest's host memory"
    );
    let log = s.log(&upid).await;
    assert!(
        log[0].ends_with("starting migration of VM 100 to node 'pve2' (10.10.10.2)"),
        "{log:?}"
    );
    assert!(
        log.iter()
            .any(|l| l.contains("migration finished successfully (duration 00:00:04)")),
        "{log:?}"
    );
    assert_eq!(log.last().unwrap(), "TASK OK");
    // The config now lives on the new node.
    assert_eq!(s.get("/nodes/pve2/qemu/100/config").await.status, 200);
    assert_eq!(s.get("/nodes/pve1/qemu/100/config").await.status, 500);
}

#[tokio::test(start_paused = true)]
async fn bwlimit_slows_the_migration_down() {
    let s = TestSim::cluster();
    let params = [("target", "pve2"), ("online", "1"), ("bwlimit", "524288")];
    let upid = s.migrate("pve1", "qemu/100", &params).await;
    sleep(7.5).await;
    assert_eq!(
        s.task(&upid).await["status"],
        "running",
        "4 GiB at 512 MiB/s takes 8 s"
    );
    sleep(0.6).await;
    assert_eq!(s.task(&upid).await["exitstatus"], "OK");
}

#[tokio::test(start_paused = true)]
async fn a_running_vm_needs_online_and_local_disks_need_with_local_disks() {
    let s = TestSim::cluster();
    // Refused by the handler before any task exists, as qemu-server's `migrate_vm` does
    // (it used to be a task that failed).
    let offline = [("target", "pve2")];
    let r = s.post_migrate("pve1", "qemu/100", &offline).await;
    r.assert_refused(500, "can't migrate running VM without --online");
    s.assert_settled_on("qemu/100", "pve1").await;

    let why = "can't live migrate attached local disks without with-local-disks option";
    let upid = s.live_migrate("pve1", "qemu/101", "pve2").await;
    s.assert_aborted(&upid, why).await;
    let upid = s
        .live_migrate_with_local_disks("pve1", "qemu/101", "pve2")
        .await;
    // 4 GiB of memory + 8 GiB of disk at 1 GiB/s.
    sleep(11.9).await;
    assert_eq!(s.task(&upid).await["status"], "running");
    sleep(0.2).await;
    assert_eq!(s.task(&upid).await["exitstatus"], "OK");
    assert_eq!(s.node_of("qemu/101").await, "pve2");
}

#[tokio::test(start_paused = true)]
async fn bad_targets_are_refused() {
    let s = TestSim::cluster();
    let r = s.post_migrate("pve1", "qemu/100", &live_to("pve1")).await;
    r.assert_param_error("target", "target is local node.");
    let r = s.post_migrate("pve1", "qemu/100", &live_to("pve9")).await;
    r.assert_refused(500, "no such cluster node 'pve9'");
    s.set_node_status("pve3", "offline").await;
    let why = "Can't connect to destination address (10.10.10.3) using public key authentication";
    let upid = s.live_migrate("pve1", "qemu/100", "pve3").await;
    s.assert_aborted(&upid, why).await;
    assert_eq!(s.node_of("qemu/100").await, "pve1");
}

#[tokio::test(start_paused = true)]
async fn a_migration_that_would_overcommit_the_target_fails() {
    let s = TestSim::cluster();
    // pve3 has 16 GiB with 6 GiB used; guest 120 costs 12 GiB.
    let upid = s.live_migrate("pve1", "qemu/120", "pve3").await;
    s.assert_aborted(&upid, "start failed: QEMU exited with code 1")
        .await;
    let log = s.log(&upid).await;
    assert!(
        log.iter().any(|l| l.contains("Cannot allocate memory")),
        "{log:?}"
    );
    s.assert_settled_on("qemu/120", "pve1").await;
}

#[tokio::test(start_paused = true)]
async fn concurrent_migrations_reserve_memory_on_the_target() {
    let s = TestSim::cluster();
    // pve2: 64 GiB, 8 GiB used. 120 costs 12 GiB; its 24 GiB of VM state take 24 s at 1 GiB/s.
    let a = s.live_migrate("pve1", "qemu/120", "pve2").await;
    let state = s.get_data("/_sim/state").await;
    let m = &state["migrations"][0];
    assert_eq!((&m["vmid"], &m["target"]), (&json!(120), &json!("pve2")));
    assert_eq!(
        m["reserved"],
        12 * GIB,
        "the incoming 12 GiB are already reserved"
    );
    // What the target reports grows as the pages arrive, as the QEMU process on a Proxmox
    // target fills: none at first, about half halfway.
    let used = || async { s.resource("node/pve2").await["mem"].as_u64().unwrap() };
    assert_eq!(used().await, 8 * GIB);
    sleep(12.0).await;
    let half = used().await;
    assert!((13 * GIB..=15 * GIB).contains(&half), "{half}");
    s.wait(&a).await;
    assert_eq!(used().await, 20 * GIB);
}

#[tokio::test(start_paused = true)]
async fn a_migration_must_fit_beside_the_full_size_of_those_still_arriving() {
    // pve3: 16 GiB, 6 GiB used. 100 (2 GiB) arrives slowly; 120 (12 GiB) would fit beside the
    // little of 100 pve3 reports so far, not beside all of it.
    let s = cluster_with(|doc| {
        resource_entry(doc, "node/pve3")["mem"] = json!(4 * GIB);
    });
    let slow = [("target", "pve3"), ("online", "1"), ("bwlimit", "1024")];
    let a = s.migrate("pve1", "qemu/100", &slow).await;
    sleep(1.0).await;
    assert!(s.resource("node/pve3").await["mem"].as_u64().unwrap() < 5 * GIB);
    let b = s.live_migrate("pve1", "qemu/120", "pve3").await;
    s.assert_aborted(&b, "start failed: QEMU exited with code 1")
        .await;
    s.control("POST", "/_sim/advance", json!({"seconds": 5000}))
        .await;
    s.wait_ok(&a).await;
}

#[tokio::test(start_paused = true)]
async fn stopped_guests_migrate_offline() {
    let s = TestSim::cluster();
    let upid = s.migrate("pve2", "qemu/102", &[("target", "pve3")]).await;
    s.wait_ok(&upid).await;
    assert_eq!(s.node_of("qemu/102").await, "pve3");
    let upid = s.migrate("pve2", "lxc/104", &[("target", "pve1")]).await;
    assert!(upid.contains(":vzmigrate:104:"));
    s.wait_ok(&upid).await;
    assert_eq!(s.node_of("lxc/104").await, "pve1");
}

#[tokio::test(start_paused = true)]
async fn containers_migrate_in_restart_mode_only() {
    let s = TestSim::cluster();
    let offline = [("target", "pve1")];
    let r = s.post_migrate("pve2", "lxc/103", &offline).await;
    r.assert_refused(
        500,
        "can't migrate running container without --online or --restart",
    );
    let upid = s.live_migrate("pve2", "lxc/103", "pve1").await;
    s.assert_aborted(&upid, "lxc live migration is currently not implemented")
        .await;
    let upid = s.migrate("pve2", "lxc/103", &restart_to("pve1")).await;
    sleep(1.0).await;
    // Restart mode stops the container first.
    s.assert_resource("lxc/103", &[("status", "stopped"), ("lock", "migrate")])
        .await;
    s.wait_ok(&upid).await;
    s.assert_resource("lxc/103", &[("node", "pve1"), ("status", "running")])
        .await;
}

#[tokio::test(start_paused = true)]
async fn ha_managed_guests_get_hamigrate_and_move_later() {
    let s = TestSim::cluster();
    let upid = s.ha_migrate_110_to_pve2().await;
    assert_eq!(
        s.log(&upid).await[0],
        "Requesting HA migration for VM 110 to node pve2"
    );
    assert_eq!(
        s.node_of("qemu/110").await,
        "pve1",
        "the hamigrate task only queues"
    );
    // The HA manager acts after its delay (2 s here), then the 4 s migration runs.
    sleep(1.5).await;
    s.assert_resource("qemu/110", &[("hastate", "migrate"), ("lock", "migrate")])
        .await;
    let real = &s.migrate_tasks("110").await[0];
    assert_eq!(real["user"], "root@pam");
    assert!(real.get("tokenid").is_none());
    sleep(4.5).await;
    s.assert_resource("qemu/110", &[("node", "pve2"), ("hastate", "started")])
        .await;
    let svc = s.ha_entry("service:vm:110").await;
    assert_eq!(svc["node"], "pve2");
    assert_eq!(svc["status"], "vm:110 (pve2, started)");
}

#[tokio::test(start_paused = true)]
async fn stopping_the_task_aborts_the_migration() {
    let s = TestSim::cluster();
    let upid = s.live_migrate("pve1", "qemu/100", "pve2").await;
    sleep(1.0).await;
    assert_eq!(s.delete(&task_path(&upid)).await.status, 200);
    assert_eq!(s.task(&upid).await["exitstatus"], "interrupted by signal");
    sleep(10.0).await;
    s.assert_settled_on("qemu/100", "pve1").await;
}

#[tokio::test(start_paused = true)]
async fn task_endpoints_answer_for_the_node_in_the_upid_only() {
    let s = TestSim::cluster();
    let upid = s.live_migrate("pve1", "qemu/100", "pve2").await;
    let elsewhere = format!("/nodes/pve2/tasks/{}/status", urlencode(&upid));
    let r = s.get(&elsewhere).await;
    r.assert_param_error("upid", "no such task");
    let list = s.list("/nodes/pve1/tasks?source=active").await;
    assert!(list.iter().any(|t| t["upid"] == upid.as_str()));
    let st = s.task(&upid).await;
    assert_eq!(st["node"], "pve1");
    assert_eq!(st["type"], "qmigrate");
    assert_eq!(st["id"], "100");
    assert_eq!(st["user"], "root@pam");
    assert_eq!(st["tokenid"], "test");
    assert!(st.get("exitstatus").is_none());
}

#[tokio::test(start_paused = true)]
async fn migrateall_empties_a_node_with_limited_parallelism() {
    let s = TestSim::cluster();
    // pve1: 100 (ceph), 101 (local disk, needs with-local-disks), 110 (HA), 120 (12 GiB), 9000
    // and 9001 are templates and stay.
    let form = "target=pve2&max-workers=2&with-local-disks=1";
    let upid = s.post_form_task("/nodes/pve1/migrateall", form).await;
    assert!(
        upid.starts_with("UPID:pve1:") && upid.contains(":migrateall::"),
        "{upid}"
    );
    sleep(1.0).await;
    let guests = s.list("/cluster/resources?type=vm").await;
    let migrating = guests.iter().filter(|r| r["lock"] == "migrate").count();
    assert_eq!(migrating, 2, "two workers");
    let st = s.wait(&upid).await;
    assert_eq!(st["exitstatus"], "OK", "{:?}", s.log(&upid).await);
    sleep(10.0).await; // the HA guest moves when the HA manager acts
    for id in ["qemu/100", "qemu/101", "qemu/110", "qemu/120"] {
        assert_eq!(s.node_of(id).await, "pve2", "{id}");
    }
    assert_eq!(s.node_of("qemu/9000").await, "pve1");
}

#[tokio::test(start_paused = true)]
async fn bulk_migrate_reports_the_guests_that_failed() {
    let s = TestSim::cluster();
    // 101 has a local disk and no with-local-disks: it fails; 102 is stopped and moves offline.
    let form = "target=pve3&online=1&vms=101&vms=102&max-workers=4";
    let upid = s
        .post_form_task("/cluster/bulk-action/guest/migrate", form)
        .await;
    assert!(upid.contains(":bulk-migrate::"), "{upid}");
    let st = s.wait(&upid).await;
    assert_eq!(st["exitstatus"], "1 guest(s) failed to migrate");
    assert_eq!(s.node_of("qemu/102").await, "pve3");
    assert_eq!(s.node_of("qemu/101").await, "pve1");
    let log = s.log(&upid).await.join("\n");
    assert!(
        // The bulk task names each worker's exit status, as Proxmox's does.
        log.contains("migration of 101 failed: migration aborted"),
        "{log}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_local_template_with_linked_clones_stays_and_so_do_its_clones() {
    let s = TestSim::cluster();
    let cloned = s.clone_and_wait("pve1", "9001", "501").await;
    assert_eq!(cloned["exitstatus"], "OK");
    let c = s.config("pve1", "qemu/501").await;
    assert_eq!(
        c["scsi0"],
        "local-lvm:base-9001-disk-0/vm-501-disk-0,size=16G"
    );

    // The base volume is listed as a local disk, as Proxmox's precondition lists it.
    let p = s.get_data("/nodes/pve1/qemu/9001/migrate").await;
    assert_eq!(p["local_disks"][0]["volid"], "local-lvm:base-9001-disk-0");

    let upid = s.migrate("pve1", "qemu/9001", &[("target", "pve2")]).await;
    s.assert_aborted(&upid, "can't migrate 'local-lvm:base-9001-disk-0' - base volume is still in use by linked clones (VM 501)").await;
    s.assert_settled_on("qemu/9001", "pve1").await;

    // The clone cannot leave its base either.
    let upid = s.migrate("pve1", "qemu/501", &[("target", "pve2")]).await;
    s.assert_aborted(&upid, "can't migrate 'local-lvm:base-9001-disk-0/vm-501-disk-0' as it's a clone of 'base-9001-disk-0'").await;
    assert_eq!(s.node_of("qemu/501").await, "pve1");

    let r = s.delete("/nodes/pve1/qemu/9001").await;
    r.assert_reason("base volume 'local-lvm:base-9001-disk-0' is still in use by linked cloned");

    // Once the clone is gone the template moves.
    let upid = s.delete("/nodes/pve1/qemu/501").await.upid();
    s.wait_ok(&upid).await;
    let upid = s.migrate("pve1", "qemu/9001", &[("target", "pve2")]).await;
    s.wait_ok(&upid).await;
    assert_eq!(s.node_of("qemu/9001").await, "pve2");
}

#[tokio::test(start_paused = true)]
async fn a_shared_template_with_linked_clones_migrates() {
    let s = TestSim::cluster();
    let cloned = s.clone_and_wait("pve1", "9000", "502").await;
    assert_eq!(cloned["exitstatus"], "OK");
    // Its cloud-init drive is local-free (ceph): the base stays where the clones find it.
    let upid = s.migrate("pve1", "qemu/9000", &[("target", "pve2")]).await;
    s.wait_ok(&upid).await;
    assert_eq!(s.node_of("qemu/9000").await, "pve2");
}

/// A small online node of the two-node scenarios below.
fn small_node(n: &str) -> serde_json::Value {
    json!({"id": format!("node/{n}"), "type": "node", "node": n, "status": "online",
           "maxcpu": 8, "maxmem": 32 * GIB, "mem": 4 * GIB, "maxdisk": 100 * GIB, "uptime": 100})
}

/// A scenario without any storage entries: two nodes and one running VM.
fn no_storage() -> serde_json::Value {
    let node = small_node;
    json!({"resources": [node("pve1"), node("pve2"),
        {"id": "qemu/100", "type": "qemu", "vmid": 100, "name": "web", "node": "pve1",
         "status": "running", "maxmem": 4 * GIB, "mem": 2 * GIB, "maxcpu": 2, "maxdisk": 32 * GIB},
        {"id": "qemu/101", "type": "qemu", "vmid": 101, "name": "local", "node": "pve1",
         "status": "running", "maxmem": 2 * GIB, "mem": GIB, "maxcpu": 1, "maxdisk": 8 * GIB}],
        "sim": {"migration_bandwidth": GIB,
                "guests": {"101": {"config": {"scsi0": "local-lvm:vm-101-disk-0,size=8G"}}}}})
}

// A scenario that describes no storage stands for a cluster that live-migrates: generated disks
// are on the shared `shared` storage and need no `with-local-disks`; node-local `local-lvm` still
// exists for a disk a guest's config puts there, and that one does need it.
#[tokio::test(start_paused = true)]
async fn without_storage_entries_disks_are_shared_and_live_migrate() {
    let s = TestSim::new(no_storage());
    let config = s.config("pve1", "qemu/100").await;
    let scsi0 = config["scsi0"].as_str().unwrap().to_string();
    assert!(scsi0.starts_with("shared:vm-100-disk-0"), "{scsi0}");
    let pre = s.get_data("/nodes/pve1/qemu/100/migrate").await;
    assert_eq!(pre["local_disks"], json!([]));
    assert_eq!(pre["allowed_nodes"], json!(["pve2"]));
    let storages = s.list("/nodes/pve2/storage").await;
    let shared: Vec<_> = storages
        .iter()
        .map(|st| {
            (
                st["storage"].as_str().unwrap().to_string(),
                st["shared"].clone(),
            )
        })
        .collect();
    assert!(shared.contains(&("shared".into(), json!(1))), "{shared:?}");
    assert!(
        shared.contains(&("local-lvm".into(), json!(0))),
        "{shared:?}"
    );
    let upid = s.live_migrate("pve1", "qemu/100", "pve2").await;
    s.wait_ok(&upid).await;
    assert_eq!(s.node_of("qemu/100").await, "pve2");
    let why = "can't live migrate attached local disks without with-local-disks option";
    let upid = s.live_migrate("pve1", "qemu/101", "pve2").await;
    s.assert_aborted(&upid, why).await;
}

/// `local-lvm` listed per node with different sizes, as on real Proxmox where each node has its
/// own thin pool: 101 (30 GiB on local-lvm) on pve1, 102 (8 GiB) on pve2.
fn local_lvm_per_node() -> serde_json::Value {
    let node = small_node;
    json!({"resources": [node("pve1"), node("pve2"),
        {"id": "qemu/101", "type": "qemu", "vmid": 101, "name": "big", "node": "pve1",
         "status": "running", "maxmem": 2 * GIB, "mem": GIB, "maxcpu": 1, "maxdisk": 30 * GIB},
        {"id": "qemu/102", "type": "qemu", "vmid": 102, "name": "small", "node": "pve2",
         "status": "running", "maxmem": 2 * GIB, "mem": GIB, "maxcpu": 1, "maxdisk": 8 * GIB}],
        "sim": {"migration_bandwidth": GIB,
                "storages": [
                    {"storage": "local-lvm", "type": "lvmthin", "nodes": ["pve1"], "total": 100 * GIB},
                    {"storage": "local-lvm", "type": "lvmthin", "nodes": ["pve2"], "total": 20 * GIB}],
                "guests": {"101": {"config": {"scsi0": "local-lvm:vm-101-disk-0,size=30G"}},
                           "102": {"config": {"scsi0": "local-lvm:vm-102-disk-0,size=8G"}}}}})
}

/// One storage id on two nodes is two storages: each node's entry keeps its
/// own size, and a migration with local disks needs room on the target's own storage.
#[tokio::test(start_paused = true)]
async fn a_local_storage_id_on_two_nodes_has_each_nodes_own_room() {
    let s = TestSim::new(local_lvm_per_node());
    let total = |node: &'static str| {
        let s = &s;
        async move {
            let st = s.storage(node, "local-lvm").await;
            (st["total"].as_u64().unwrap(), st["avail"].as_u64().unwrap())
        }
    };
    assert_eq!(total("pve1").await, (100 * GIB, 70 * GIB));
    assert_eq!(total("pve2").await, (20 * GIB, 12 * GIB));

    // 30 GiB do not fit the 12 GiB left on pve2's local-lvm.
    let upid = s
        .live_migrate_with_local_disks("pve1", "qemu/101", "pve2")
        .await;
    assert_eq!(s.wait(&upid).await["exitstatus"], "migration aborted");
    let log = s.log(&upid).await.join("\n");
    assert!(
        log.contains("local-lvm") && log.contains("pve2"),
        "the log names the storage and the node: {log}"
    );
    assert_eq!(s.node_of("qemu/101").await, "pve1");

    // 8 GiB fit the 70 GiB left on pve1's.
    let upid = s
        .live_migrate_with_local_disks("pve2", "qemu/102", "pve1")
        .await;
    s.wait_ok(&upid).await;
    assert_eq!(total("pve1").await, (100 * GIB, 62 * GIB));
    assert_eq!(total("pve2").await, (20 * GIB, 20 * GIB));
}
