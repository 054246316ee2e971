//! Contract tests of the migrate endpoints' early checks: what Proxmox refuses in the API call
//! itself (status and message, before any task exists) and what it leaves to the worker (a task
//! that fails with the worker's text). Sources: qemu-server `PVE/API2/Qemu.pm` and
//! pve-container `src/PVE/API2/LXC.pm` (`migrate_vm`), and the workers' `prepare` in
//! qemu-server `PVE/QemuMigrate.pm` and pve-container `src/PVE/LXC/Migrate.pm`.

use serde_json::json;

use crate::support::{Resp, TestSim, cluster_with, live_to, resource_entry, restart_to};

/// Asserts a 500 whose reason phrase and `message` are Proxmox's `die` text, and that no task
/// was started for the guest (`qemu/100`).
async fn assert_died(s: &TestSim, r: &Resp, text: &str, guest: &str) {
    let vmid = guest.split('/').nth(1).unwrap();
    assert_eq!(r.status, 500, "{r:?}");
    r.assert_reason(text);
    assert_eq!(r.json["message"], format!("{text}\n"));
    let tasks = s.tasks().await;
    assert!(
        !tasks
            .iter()
            .any(|t| t["id"] == vmid && t["type"].as_str().unwrap().ends_with("migrate")),
        "no migration task may start: {tasks:?}"
    );
}

/// Asserts that a migrate request for `guest` on `node` dies with `text` before any task.
async fn assert_migrate_died(
    s: &TestSim,
    node: &str,
    guest: &str,
    params: &[(&str, &str)],
    text: &str,
) {
    let r = s.post_migrate(node, guest, params).await;
    assert_died(s, &r, text, guest).await;
}

/// Asserts a 400 with Proxmox's per-parameter message.
fn assert_param(r: &Resp, param: &str, text: &str) {
    r.assert_param_error(param, text);
    r.assert_reason("Parameter verification failed.");
}

/// The standard cluster with guest `id` locked for `lock`.
fn locked(id: &str, lock: &str) -> TestSim {
    cluster_with(|doc| resource_entry(doc, id)["lock"] = json!(lock))
}

// Both handlers: `raise_param_exc` when the target is the node that handles the request.
#[tokio::test(start_paused = true)]
async fn the_target_must_not_be_the_local_node() {
    let s = TestSim::cluster();
    for (node, guest, params) in [
        ("pve1", "qemu/100", live_to("pve1")),
        ("pve2", "lxc/103", restart_to("pve2")),
    ] {
        let r = s.post_migrate(node, guest, &params).await;
        assert_param(&r, "target", "target is local node.");
    }
}

// Both handlers: `check_node_exists` dies for a node the cluster does not know, before the
// guest's config is even loaded (so a wrong guest does not change the answer).
#[tokio::test(start_paused = true)]
async fn the_target_node_must_exist() {
    let s = TestSim::cluster();
    let text = "no such cluster node 'pve9'";
    for (node, guest, params) in [
        ("pve1", "qemu/100", &live_to("pve9")[..]),
        ("pve1", "qemu/777", &[("target", "pve9")]),
        ("pve2", "lxc/103", &restart_to("pve9")),
    ] {
        assert_migrate_died(&s, node, guest, params, text).await;
    }
}

// Both handlers: `load_config` dies when the guest is not on the node of the path.
#[tokio::test(start_paused = true)]
async fn the_guest_must_be_on_the_node_of_the_path() {
    let s = TestSim::cluster();
    for (node, guest, params, conf) in [
        (
            "pve2",
            "qemu/100",
            live_to("pve3"),
            "nodes/pve2/qemu-server/100.conf",
        ),
        (
            "pve1",
            "lxc/103",
            restart_to("pve3"),
            "nodes/pve1/lxc/103.conf",
        ),
    ] {
        let text = format!("Configuration file '{conf}' does not exist");
        assert_migrate_died(&s, node, guest, &params, &text).await;
    }
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
        .post_migrate("pve2", "qemu/102", &[("target", "pve3"), ("force", "0")])
        .await;
    assert_eq!(r.status, 200, "{r:?}");
}

// qemu: `check_lock` in the handler; a locked VM is refused before a task exists.
#[tokio::test(start_paused = true)]
async fn a_locked_vm_is_refused_at_once() {
    let s = locked("qemu/100", "backup");
    let text = "VM is locked (backup)";
    assert_migrate_died(&s, "pve1", "qemu/100", &live_to("pve2"), text).await;
}

// lxc: the handler does not check the lock; the worker's `prepare` does, so the task is
// aborted with "CT is locked (...)" in its log and the container stays.
#[tokio::test(start_paused = true)]
async fn a_locked_container_fails_in_the_task() {
    let s = locked("lxc/104", "backup");
    let upid = s.migrate("pve2", "lxc/104", &[("target", "pve1")]).await;
    assert!(upid.contains(":vzmigrate:104:"), "{upid}");
    // As Proxmox's worker logs it: the cause in the abort line, `migration aborted` as status.
    s.assert_aborted(&upid, "CT is locked (backup)").await;
    assert_eq!(s.node_of("lxc/104").await, "pve2");
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
    let text = "storage 'ceph' is not available on node 'pve3'";
    assert_migrate_died(&s, "pve2", "qemu/102", &[("target", "pve3")], text).await;
}

// lxc: the handler does not check storages; `prepare` does (`storage_check_enabled` on the
// target), so the task is aborted.
#[tokio::test(start_paused = true)]
async fn a_container_whose_storage_the_target_lacks_fails_in_the_task() {
    let s = ceph_not_on_pve3();
    let why = "storage 'ceph' is not available on node 'pve3'";
    let upid = s.migrate("pve2", "lxc/104", &[("target", "pve3")]).await;
    s.assert_aborted(&upid, why).await;
    assert_eq!(s.node_of("lxc/104").await, "pve2");
}

// lxc: a running container needs `online` or `restart`; refused in the handler.
#[tokio::test(start_paused = true)]
async fn a_running_container_needs_restart_at_once() {
    let s = TestSim::cluster();
    let text = "can't migrate running container without --online or --restart";
    assert_migrate_died(&s, "pve2", "lxc/103", &[("target", "pve1")], text).await;
}

// qemu: a running VM without `online` is refused in the handler, right after the lock check
// ("can't migrate running VM without --online", 500), before any task exists.
#[tokio::test(start_paused = true)]
async fn a_running_vm_without_online_is_refused_at_once() {
    let s = TestSim::cluster();
    let text = "can't migrate running VM without --online";
    assert_migrate_died(&s, "pve1", "qemu/100", &[("target", "pve2")], text).await;
}

// Both handlers: an HA-managed guest is not migrated by the call; it gets an `hamigrate` task
// that queues the request for the HA manager (`ha-manager migrate vm:110 pve2`).
#[tokio::test(start_paused = true)]
async fn an_ha_managed_guest_gets_an_hamigrate_task() {
    TestSim::cluster().ha_migrate_110_to_pve2().await;
}

// Every `check_lock` names the guest type: a locked container answers "CT is locked (...)" to
// the migrate precondition, config writes and deletion (pve-container `PVE::LXC::Config`, whose
// `guest_type` is "CT"); a VM says "VM".
#[tokio::test(start_paused = true)]
async fn a_locked_container_says_ct_is_locked() {
    let s = locked("lxc/104", "backup");
    let text = "CT is locked (backup)";
    let r = s.get("/nodes/pve2/lxc/104/migrate").await;
    assert_died(&s, &r, text, "lxc/104").await;
    let r = s.put("/nodes/pve2/lxc/104/config", &[("tags", "x")]).await;
    assert_died(&s, &r, text, "lxc/104").await;
    let r = s.delete("/nodes/pve2/lxc/104").await;
    assert_died(&s, &r, text, "lxc/104").await;
    let s = locked("qemu/102", "backup");
    let r = s.get("/nodes/pve2/qemu/102/migrate").await;
    assert_died(&s, &r, "VM is locked (backup)", "qemu/102").await;
}

// lxc: `online` passes the handler's check, but the worker's `prepare` refuses it for a running
// container, even together with `restart`.
#[tokio::test(start_paused = true)]
async fn a_running_container_with_online_fails_in_the_task_even_with_restart() {
    let s = TestSim::cluster();
    let params = [("target", "pve1"), ("online", "1"), ("restart", "1")];
    let why = "lxc live migration is currently not implemented";
    let upid = s.migrate("pve2", "lxc/103", &params).await;
    s.assert_aborted(&upid, why).await;
    assert_eq!(s.node_of("lxc/103").await, "pve2");
}

// Power requests: neither qemu-server's nor pve-container's start/stop handlers check the lock
// or the template flag; the worker does (`vm_start`, `_do_vm_stop`, the `vzstart`/`vzstop`
// workers), so the request answers with a UPID and the task fails with the worker's `die`.
#[tokio::test(start_paused = true)]
async fn starting_a_locked_guest_or_a_template_fails_in_the_task() {
    let s = cluster_with(|doc| {
        resource_entry(doc, "qemu/100")["lock"] = json!("backup");
        resource_entry(doc, "lxc/104")["lock"] = json!("snapshot");
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
