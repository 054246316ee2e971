//! Contract tests of the migrate endpoints' early checks: what Proxmox refuses in the API call
//! itself (status and message, before any task exists) and what it leaves to the worker (a task
//! that fails with the worker's text). Sources: qemu-server `PVE/API2/Qemu.pm` and
//! pve-container `src/PVE/API2/LXC.pm` (`migrate_vm`), and the workers' `prepare` in
//! qemu-server `PVE/QemuMigrate.pm` and pve-container `src/PVE/LXC/Migrate.pm`.

use serde_json::{Value, json};

use crate::support::{TestSim, cluster};

/// The standard cluster with `edit` applied to its scenario document first.
fn cluster_with(edit: impl FnOnce(&mut Value)) -> TestSim {
    let mut doc = cluster();
    edit(&mut doc);
    TestSim::new(doc)
}

/// The resource entry of `id` in a scenario document.
fn entry<'a>(doc: &'a mut Value, id: &str) -> &'a mut Value {
    doc["resources"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["id"] == id)
        .unwrap()
}

/// Asserts a 500 whose reason phrase and `message` are Proxmox's `die` text, and that no task
/// was started for the guest.
async fn assert_died(s: &TestSim, r: &crate::support::Resp, text: &str, vmid: &str) {
    assert_eq!(r.status, 500, "{r:?}");
    assert_eq!(r.reason.as_deref(), Some(text));
    assert_eq!(r.json["message"], format!("{text}\n"));
    let tasks = s.get("/cluster/tasks").await;
    assert!(
        !tasks
            .data()
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["id"] == vmid && t["type"].as_str().unwrap().ends_with("migrate")),
        "no migration task may start: {tasks:?}"
    );
}

/// Asserts a 400 with Proxmox's per-parameter message.
fn assert_param(r: &crate::support::Resp, param: &str, text: &str) {
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(r.reason.as_deref(), Some("Parameter verification failed."));
    assert_eq!(r.json["errors"][param], text);
}

// Both handlers: `raise_param_exc` when the target is the node that handles the request.
#[tokio::test(start_paused = true)]
async fn the_target_must_not_be_the_local_node() {
    let s = TestSim::cluster();
    let r = s
        .post(
            "/nodes/pve1/qemu/100/migrate",
            &[("target", "pve1"), ("online", "1")],
        )
        .await;
    assert_param(&r, "target", "target is local node.");
    let r = s
        .post(
            "/nodes/pve2/lxc/103/migrate",
            &[("target", "pve2"), ("restart", "1")],
        )
        .await;
    assert_param(&r, "target", "target is local node.");
}

// Both handlers: `check_node_exists` dies for a node the cluster does not know, before the
// guest's config is even loaded (so a wrong guest does not change the answer).
#[tokio::test(start_paused = true)]
async fn the_target_node_must_exist() {
    let s = TestSim::cluster();
    let r = s
        .post(
            "/nodes/pve1/qemu/100/migrate",
            &[("target", "pve9"), ("online", "1")],
        )
        .await;
    assert_died(&s, &r, "no such cluster node 'pve9'", "100").await;
    let r = s
        .post("/nodes/pve1/qemu/777/migrate", &[("target", "pve9")])
        .await;
    assert_died(&s, &r, "no such cluster node 'pve9'", "777").await;
    let r = s
        .post(
            "/nodes/pve2/lxc/103/migrate",
            &[("target", "pve9"), ("restart", "1")],
        )
        .await;
    assert_died(&s, &r, "no such cluster node 'pve9'", "103").await;
}

// Both handlers: `load_config` dies when the guest is not on the node of the path.
#[tokio::test(start_paused = true)]
async fn the_guest_must_be_on_the_node_of_the_path() {
    let s = TestSim::cluster();
    let r = s
        .post(
            "/nodes/pve2/qemu/100/migrate",
            &[("target", "pve3"), ("online", "1")],
        )
        .await;
    assert_died(
        &s,
        &r,
        "Configuration file 'nodes/pve2/qemu-server/100.conf' does not exist",
        "100",
    )
    .await;
    let r = s
        .post(
            "/nodes/pve1/lxc/103/migrate",
            &[("target", "pve3"), ("restart", "1")],
        )
        .await;
    assert_died(
        &s,
        &r,
        "Configuration file 'nodes/pve1/lxc/103.conf' does not exist",
        "103",
    )
    .await;
}

// qemu: `force`, `migration_type` and `migration_network` are for `root@pam` itself; an API
// token of root is another user (`root@pam!test`) and gets a parameter error.
#[tokio::test(start_paused = true)]
async fn root_only_options_are_refused_for_others() {
    let s = TestSim::cluster();
    for (param, value) in [
        ("force", "1"),
        ("migration_type", "insecure"),
        ("migration_network", "10.0.0.0/24"),
    ] {
        let r = s
            .post(
                "/nodes/pve1/qemu/102/migrate",
                &[("target", "pve3"), (param, value)],
            )
            .await;
        assert_param(&r, param, "Only root may use this option.");
    }
    // `force=0` is no request to force.
    let r = s
        .post(
            "/nodes/pve2/qemu/102/migrate",
            &[("target", "pve3"), ("force", "0")],
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
}

// qemu: `check_lock` in the handler; a locked VM is refused before a task exists.
#[tokio::test(start_paused = true)]
async fn a_locked_vm_is_refused_at_once() {
    let s = cluster_with(|doc| entry(doc, "qemu/100")["lock"] = json!("backup"));
    let r = s
        .post(
            "/nodes/pve1/qemu/100/migrate",
            &[("target", "pve2"), ("online", "1")],
        )
        .await;
    assert_died(&s, &r, "VM is locked (backup)", "100").await;
}

// lxc: the handler does not check the lock; the worker's `prepare` does, so the task is
// aborted with "CT is locked (...)" in its log and the container stays.
#[tokio::test(start_paused = true)]
async fn a_locked_container_fails_in_the_task() {
    let s = cluster_with(|doc| entry(doc, "lxc/104")["lock"] = json!("backup"));
    let upid = s
        .post_task("/nodes/pve2/lxc/104/migrate", &[("target", "pve1")])
        .await;
    assert!(upid.contains(":vzmigrate:104:"), "{upid}");
    // As Proxmox's worker logs it: the cause in the abort line, `migration aborted` as status.
    s.assert_aborted(&upid, "CT is locked (backup)").await;
    assert_eq!(s.resource("lxc/104").await["node"], "pve2");
}

/// The standard cluster with `ceph` on pve1 and pve2 only.
fn ceph_not_on_pve3() -> TestSim {
    cluster_with(|doc| {
        doc["resources"]
            .as_array_mut()
            .unwrap()
            .retain(|r| r["id"] != "storage/pve3/ceph");
    })
}

// qemu: `check_storage_availability` in the handler dies for a volume whose storage the target
// cannot reach.
#[tokio::test(start_paused = true)]
async fn a_vm_whose_storage_the_target_lacks_is_refused_at_once() {
    let s = ceph_not_on_pve3();
    let r = s
        .post("/nodes/pve2/qemu/102/migrate", &[("target", "pve3")])
        .await;
    assert_died(
        &s,
        &r,
        "storage 'ceph' is not available on node 'pve3'",
        "102",
    )
    .await;
}

// lxc: the handler does not check storages; `prepare` does (`storage_check_enabled` on the
// target), so the task is aborted.
#[tokio::test(start_paused = true)]
async fn a_container_whose_storage_the_target_lacks_fails_in_the_task() {
    let s = ceph_not_on_pve3();
    let upid = s
        .post_task("/nodes/pve2/lxc/104/migrate", &[("target", "pve3")])
        .await;
    s.assert_aborted(&upid, "storage 'ceph' is not available on node 'pve3'")
        .await;
    assert_eq!(s.resource("lxc/104").await["node"], "pve2");
}

// lxc: a running container needs `online` or `restart`; refused in the handler.
#[tokio::test(start_paused = true)]
async fn a_running_container_needs_restart_at_once() {
    let s = TestSim::cluster();
    let r = s
        .post("/nodes/pve2/lxc/103/migrate", &[("target", "pve1")])
        .await;
    assert_died(
        &s,
        &r,
        "can't migrate running container without --online or --restart",
        "103",
    )
    .await;
}

// qemu: a running VM without `online` is refused in the handler, right after the lock check
// ("can't migrate running VM without --online", 500), before any task exists (issue 11, item 7).
#[tokio::test(start_paused = true)]
async fn a_running_vm_without_online_is_refused_at_once() {
    let s = TestSim::cluster();
    let r = s
        .post("/nodes/pve1/qemu/100/migrate", &[("target", "pve2")])
        .await;
    assert_died(&s, &r, "can't migrate running VM without --online", "100").await;
}

// Both handlers: an HA-managed guest is not migrated by the call; it gets an `hamigrate` task
// that queues the request for the HA manager (`ha-manager migrate vm:110 pve2`).
#[tokio::test(start_paused = true)]
async fn an_ha_managed_guest_gets_an_hamigrate_task() {
    let s = TestSim::cluster();
    let upid = s.live_migrate("pve1", "qemu/110", "pve2").await;
    assert!(upid.contains(":hamigrate:110:"), "{upid}");
    assert_eq!(s.wait(&upid).await["exitstatus"], "OK");
}

// Every `check_lock` names the guest type: a locked container answers "CT is locked (...)" to
// the migrate precondition, config writes and deletion (pve-container `PVE::LXC::Config`, whose
// `guest_type` is "CT"); a VM says "VM".
#[tokio::test(start_paused = true)]
async fn a_locked_container_says_ct_is_locked() {
    let s = cluster_with(|doc| entry(doc, "lxc/104")["lock"] = json!("backup"));
    let text = "CT is locked (backup)";
    let r = s.get("/nodes/pve2/lxc/104/migrate").await;
    assert_died(&s, &r, text, "104").await;
    let r = s.put("/nodes/pve2/lxc/104/config", &[("tags", "x")]).await;
    assert_died(&s, &r, text, "104").await;
    let r = s.delete("/nodes/pve2/lxc/104").await;
    assert_died(&s, &r, text, "104").await;
    let s = cluster_with(|doc| entry(doc, "qemu/102")["lock"] = json!("backup"));
    let r = s.get("/nodes/pve2/qemu/102/migrate").await;
    assert_died(&s, &r, "VM is locked (backup)", "102").await;
}

// lxc: `online` passes the handler's check, but the worker's `prepare` refuses it for a running
// container, even together with `restart`.
#[tokio::test(start_paused = true)]
async fn a_running_container_with_online_fails_in_the_task_even_with_restart() {
    let s = TestSim::cluster();
    let upid = s
        .post_task(
            "/nodes/pve2/lxc/103/migrate",
            &[("target", "pve1"), ("online", "1"), ("restart", "1")],
        )
        .await;
    s.assert_aborted(&upid, "lxc live migration is currently not implemented")
        .await;
    assert_eq!(s.resource("lxc/103").await["node"], "pve2");
}

// Power requests: neither qemu-server's nor pve-container's start/stop handlers check the lock
// or the template flag; the worker does (`vm_start`, `_do_vm_stop`, the `vzstart`/`vzstop`
// workers), so the request answers with a UPID and the task fails with the worker's `die`.
#[tokio::test(start_paused = true)]
async fn starting_a_locked_guest_or_a_template_fails_in_the_task() {
    let s = cluster_with(|doc| {
        entry(doc, "qemu/100")["lock"] = json!("backup");
        entry(doc, "lxc/104")["lock"] = json!("snapshot");
    });
    for (path, exit) in [
        ("/nodes/pve1/qemu/100/status/stop", "VM is locked (backup)"),
        (
            "/nodes/pve2/lxc/104/status/start",
            "CT is locked (snapshot)",
        ),
        (
            "/nodes/pve1/qemu/9000/status/start",
            "you can't start a vm if it's a template",
        ),
    ] {
        let r = s.post(path, &[]).await;
        assert_eq!(r.status, 200, "{path}: {:?}", r.reason);
        let upid = r.upid();
        assert_eq!(s.wait(&upid).await["exitstatus"], exit, "{path}");
        assert_eq!(
            s.log(&upid).await.last().unwrap(),
            &format!("TASK ERROR: {exit}")
        );
    }
    assert_eq!(s.resource("qemu/100").await["status"], "running");
}
