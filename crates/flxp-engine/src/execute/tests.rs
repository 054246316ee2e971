//! The executor against the scripted API, under paused time: exact calls, parameters, following
//! tasks and HA, failures, replans, limits and stops.
// Tests may panic on malformed fixtures: that is the failure report.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use flxp_core::balance::Registry;
use flxp_core::balance::{BalanceOptions, EvacuateOptions, Migration, Plan, Purpose};
use flxp_core::cluster::GuestKind;
use flxp_core::placement::{PlacementOptions, Placer};
use flxp_core::snapshot::Task;
use flxp_core::{Overrides, Scheduler, Snapshot};
use flxp_pve::types::migrate::NotAllowedNode;
use flxp_pve::types::{QemuMigratePrecondition, Upid};

use super::*;
use crate::progress::Event;
use crate::round::replan_holds;
use crate::stop::stop_signal;
use crate::testapi::{Change, Script, ScriptedApi, local_disk};

use flxp_core::units::GIB;
const TIME: i64 = 1_764_400_000;

/// An online 64 GiB node's resource with `mem` GiB used, as JSON.
fn node(n: &str, mem: u64) -> String {
    format!(
        r#"{{"id":"node/{n}","type":"node","node":"{n}","status":"online","maxmem":{},"mem":{},"maxcpu":16,"cpu":0.1}}"#,
        64 * GIB,
        mem * GIB
    )
}

/// Four 64 GiB nodes; a carries five guests (a stopped one, a container, an HA VM).
fn world() -> String {
    let guest = |kind: &str, vmid: u32, n: &str, running: bool, used: u64, extra: &str| {
        format!(
            r#"{{"id":"{kind}/{vmid}","type":"{kind}","vmid":{vmid},"name":"g{vmid}","node":"{n}","status":"{}","maxmem":{},"mem":{},"maxcpu":2,"cpu":0.1{extra}}}"#,
            if running { "running" } else { "stopped" },
            8 * GIB,
            if running { used * GIB } else { 0 }
        )
    };
    let items = [
        node("a", 40),
        node("b", 8),
        node("c", 20),
        node("d", 8),
        guest("qemu", 101, "a", true, 6, ""),
        guest("qemu", 102, "a", true, 6, ""),
        guest("qemu", 103, "a", false, 0, ""),
        guest("lxc", 104, "a", true, 2, ""),
        guest("qemu", 105, "a", true, 6, r#","hastate":"started""#),
        guest("qemu", 106, "c", true, 6, ""),
        guest("qemu", 107, "b", true, 1, ""),
    ];
    format!("[{}]", items.join(","))
}

fn api() -> ScriptedApi {
    ScriptedApi::from_json(&world())
}

/// The world with one guest's migration scripted.
fn scripted(vmid: u32, script: Script) -> Arc<ScriptedApi> {
    Arc::new(api().script(vmid, script))
}

/// A script whose precondition answers one local disk of 32 GiB on a running VM allowed to b,
/// c and d.
fn with_local_disk(volid: &str) -> Script {
    Script {
        precondition: Some(QemuMigratePrecondition {
            running: Some(true),
            allowed_nodes: vec!["b".into(), "c".into(), "d".into()],
            local_disks: vec![local_disk(volid, 32 * GIB)],
            ..QemuMigratePrecondition::default()
        }),
        ..Script::default()
    }
}

/// A script whose migration task stops with this exit status.
fn failing(exitstatus: &str) -> Script {
    Script {
        fail: Some(exitstatus.into()),
        ..Script::default()
    }
}

/// A script whose migration task never ends.
fn endless() -> Script {
    Script {
        running_polls: 10_000,
        ..Script::default()
    }
}

fn scheduler() -> Scheduler {
    Scheduler::new(
        Placer::new(PlacementOptions::default(), Vec::new()).unwrap(),
        Registry::builtin(),
    )
    .unwrap()
}

fn options() -> ExecuteOptions {
    ExecuteOptions {
        poll: Duration::from_secs(1),
        timeout: Duration::from_secs(60),
        ..ExecuteOptions::default()
    }
}

fn executor(api: &Arc<ScriptedApi>, options: ExecuteOptions) -> Executor {
    Executor::new("lab", Pve::from_transport(Arc::clone(api)), &scheduler())
        .with_options(options)
        .with_clock(Arc::new(|| TIME))
}

/// The one migration of VM `vmid` from a to b.
fn a_to_b(vmid: u32) -> Vec<Migration> {
    vec![mig(vmid, GuestKind::Qemu, "a", "b", 0)]
}

/// 101 and then 102 leave a, for these targets.
fn leave_a(to_101: &str, to_102: &str) -> Vec<Migration> {
    vec![
        mig(101, GuestKind::Qemu, "a", to_101, 0),
        mig(102, GuestKind::Qemu, "a", to_102, 1),
    ]
}

fn mig(vmid: u32, kind: GuestKind, from: &str, to: &str, step: u32) -> Migration {
    Migration {
        vmid,
        kind,
        name: format!("g{vmid}"),
        from: from.into(),
        to: to.into(),
        reason: "test".into(),
        purpose: Purpose::Balance,
        online: true,
        bytes: 6 * GIB,
        bundle: Vec::new(),
        group: None,
        step,
        wave: step,
        imbalance_after: 0.0,
    }
}

/// A plan of the world with these migrations (the rest of the plan is the core's).
fn plan_of(api: &ScriptedApi, migrations: Vec<Migration>) -> Plan {
    let model = Model::from_snapshot(&api.snapshot(), &Overrides::default()).unwrap();
    let goal = Goal::Balance(BalanceOptions::default());
    let mut plan = planning::plan(&model, &scheduler().placer(None), &goal, None).unwrap();
    plan.migrations = migrations;
    plan
}

fn balance() -> Goal {
    Goal::Balance(BalanceOptions::default())
}

/// Balances with these migrations as the plan, with the default [`options`].
async fn run(api: &Arc<ScriptedApi>, migrations: Vec<Migration>) -> ExecutionReport {
    executor(api, options())
        .execute(plan_of(api, migrations), &balance())
        .await
}

/// An executor whose round is asked to stop as its first migration starts.
fn stopped_at_start(api: &Arc<ScriptedApi>, options: ExecuteOptions) -> Executor {
    let (handle, stop) = stop_signal();
    executor(api, options)
        .with_stop(stop)
        .with_progress(Arc::new(StopAtStart(handle)))
}

fn evacuate(nodes: &[&str]) -> Goal {
    Goal::Evacuate {
        nodes: nodes.iter().map(|n| (*n).to_owned()).collect(),
        options: EvacuateOptions::default(),
    }
}

fn upid(node: &str, pid: u32, kind: &str, vmid: u32) -> String {
    Upid::new(
        node,
        pid,
        0xABCD,
        TIME,
        kind,
        &vmid.to_string(),
        "root@pam!flxp",
    )
    .unwrap()
    .to_string()
}

/// A `qmigrate`/`hamigrate` task of a on `/cluster/tasks`, started at `starttime`.
fn task(pid: u32, kind: &str, vmid: u32, starttime: i64) -> Task {
    Task {
        upid: Some(upid("a", pid, kind, vmid)),
        kind: Some(kind.into()),
        id: Some(vmid.to_string()),
        starttime: Some(starttime),
        ..Task::default()
    }
}

fn status(node: &str, upid: &str) -> String {
    format!("GET /nodes/{node}/tasks/{upid}/status")
}

fn posts(api: &ScriptedApi, vmid: u32) -> usize {
    api.calls()
        .iter()
        .filter(|c| c.starts_with("POST ") && c.contains(&format!("/{vmid}/migrate")))
        .count()
}

/// The migration of `vmid` was never asked for: the round's first failure says `error`.
fn assert_not_sent(api: &ScriptedApi, report: &ExecutionReport, vmid: u32, error: &str) {
    assert_eq!(posts(api, vmid), 0);
    assert_eq!(report.failed[0].error, error);
}

#[tokio::test(start_paused = true)]
async fn a_running_vm_goes_online_after_a_fresh_read_and_its_task_is_polled_on_the_upid_node() {
    let api = Arc::new(api());
    let start = tokio::time::Instant::now();
    let report = run(&api, a_to_b(101)).await;
    assert!(report.is_clean(), "{report:?}");
    let t = upid("a", 0x1001, "qmigrate", 101);
    assert_eq!(
        api.actions(),
        [
            "GET /nodes/a/qemu/101/migrate".to_owned(),
            "POST /nodes/a/qemu/101/migrate target=b&online=1".to_owned(),
            // Then polled in the task list every migration in flight shares, and on the UPID's
            // node while the list does not hold it yet.
            status("a", &t),
        ]
    );
    // The cluster was read again right before the precondition check.
    let calls = api.calls();
    let pre = calls
        .iter()
        .position(|c| c == "GET /nodes/a/qemu/101/migrate")
        .unwrap();
    assert_eq!(calls[0], "GET /cluster/resources");
    assert!(
        calls[..pre]
            .iter()
            .all(|c| crate::testapi::is_collect_call(c))
    );
    assert_eq!(api.node_of(101), "b");
    assert_eq!(report.done.len(), 1);
    assert_eq!((report.done[0].vmid, report.done[0].ha), (101, false));
    // Two running polls at 1 s: the round takes 2 s of (paused) time.
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    assert_eq!(report.secs, 2.0);
}

#[tokio::test(start_paused = true)]
async fn local_disks_add_with_local_disks_unless_the_config_forbids_it() {
    let script = with_local_disk("local-lvm:vm-101-disk-0");
    let api = scripted(101, script.clone());
    let report = run(&api, a_to_b(101)).await;
    assert!(report.is_clean(), "{report:?}");
    assert!(
        api.actions().contains(
            &"POST /nodes/a/qemu/101/migrate target=b&online=1&with-local-disks=1".into()
        ),
        "{:?}",
        api.actions()
    );

    let api = scripted(101, script);
    let plan = plan_of(&api, a_to_b(101));
    let no_local = ExecuteOptions {
        with_local_disks: false,
        ..options()
    };
    let report = executor(&api, no_local).execute(plan, &balance()).await;
    assert_eq!(report.failed.len(), 1);
    assert_not_sent(
        &api,
        &report,
        101,
        "local disks local-lvm:vm-101-disk-0 need with-local-disks for a live migration, which \
         [migration] with-local-disks = false forbids",
    );
    assert_eq!(api.node_of(101), "a");
}

#[tokio::test(start_paused = true)]
async fn linked_clones_and_disks_the_target_has_no_room_for_are_not_sent() {
    // (the disk, room for it on b, why it is not sent)
    let cases = [
        (
            "local-lvm:base-9001-disk-0/vm-101-disk-0",
            500 * GIB,
            "local-lvm:base-9001-disk-0/vm-101-disk-0 is a linked clone of a template on local \
             storage: Proxmox cannot migrate it",
        ),
        (
            "local-lvm:vm-101-disk-0",
            20 * GIB,
            "storage local-lvm on b has 20.0 GiB free, its local disks need 32.0 GiB",
        ),
    ];
    for (volid, avail, error) in cases {
        let api = Arc::new(self::api().script(101, with_local_disk(volid)).storage(
            "b",
            "local-lvm",
            avail,
        ));
        let report = run(&api, a_to_b(101)).await;
        assert_not_sent(&api, &report, 101, error);
        assert_eq!(api.node_of(101), "a");
    }
}

#[tokio::test(start_paused = true)]
async fn a_stopped_vm_moves_offline() {
    let api = Arc::new(api());
    let mut m = mig(103, GuestKind::Qemu, "a", "d", 0);
    m.online = false;
    let report = run(&api, vec![m]).await;
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(api.actions()[1], "POST /nodes/a/qemu/103/migrate target=d");
    assert_eq!(api.node_of(103), "d");
}

#[tokio::test(start_paused = true)]
async fn a_target_proxmox_refuses_fails_the_step_with_its_blockers() {
    let mut pre = QemuMigratePrecondition {
        running: Some(true),
        allowed_nodes: vec!["c".into(), "d".into()],
        ..QemuMigratePrecondition::default()
    };
    pre.not_allowed_nodes.insert(
        "b".into(),
        NotAllowedNode {
            unavailable_storages: vec!["local-zfs".into()],
            ..NotAllowedNode::default()
        },
    );
    let api = scripted(
        101,
        Script {
            precondition: Some(pre),
            ..Script::default()
        },
    );
    let report = run(&api, a_to_b(101)).await;
    assert_not_sent(
        &api,
        &report,
        101,
        "Proxmox does not allow b as target: storage local-zfs not available there",
    );
}

#[tokio::test(start_paused = true)]
async fn running_containers_restart_only_when_the_round_allows_it() {
    let api = Arc::new(api());
    let m = mig(104, GuestKind::Lxc, "a", "b", 0);
    let report = run(&api, vec![m.clone()]).await;
    assert_eq!(posts(&api, 104), 0);
    assert!(
        report.failed[0]
            .error
            .contains("restart-containers = false"),
        "{}",
        report.failed[0].error
    );

    let api = Arc::new(self::api());
    let report = executor(&api, options())
        .execute(plan_of(&api, vec![m]), &evacuate(&["a"]))
        .await;
    assert!(report.done.iter().any(|d| d.vmid == 104), "{report:?}");
    let actions = api.actions();
    assert_eq!(actions[0], "GET /nodes/a/lxc/104/migrate");
    assert_eq!(
        actions[1],
        "POST /nodes/a/lxc/104/migrate target=b&restart=1"
    );
    assert_eq!(api.node_of(104), "b");
}

#[tokio::test(start_paused = true)]
async fn an_ha_guest_is_followed_until_ha_has_moved_it() {
    let api = Arc::new(api());
    let report = run(&api, a_to_b(105)).await;
    assert!(report.is_clean(), "{report:?}");
    assert!(report.done[0].ha);
    assert_eq!(api.node_of(105), "b");
    let ha = upid("a", 0x1001, "hamigrate", 105);
    let calls = api.calls();
    let pre = calls
        .iter()
        .position(|c| c == "GET /nodes/a/qemu/105/migrate")
        .unwrap();
    let follow = [
        "GET /cluster/resources?type=vm",
        "GET /cluster/tasks",
        "GET /cluster/ha/status/current",
    ];
    let mut want = vec![
        "GET /nodes/a/qemu/105/migrate".to_owned(),
        "POST /nodes/a/qemu/105/migrate target=b&online=1".to_owned(),
        status("a", &ha),
    ];
    // HA moves it on the third look: two full polls (the first reuses the task list read a
    // moment before), then the look that finds it on b.
    want.extend([follow[0], follow[2]].iter().map(|s| (*s).to_owned()));
    want.extend(follow.iter().map(|s| (*s).to_owned()));
    want.push(follow[0].to_owned());
    // Then the cluster is read once more, to measure what the round achieved.
    assert_eq!(calls[pre..pre + want.len()], want);
}

#[tokio::test(start_paused = true)]
async fn after_a_failed_migration_the_report_gives_the_planned_and_the_achieved_imbalance() {
    let api = scripted(101, failing("migration aborted"));
    let plan = plan_of(&api, leave_a("b", "c"));
    let planned = plan.imbalance_after;
    let report = executor(&api, options()).execute(plan, &balance()).await;
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert_eq!(report.replans.len(), 1, "{report:?}");
    let done: Vec<(u32, &str)> = report
        .done
        .iter()
        .map(|d| (d.vmid, d.to.as_str()))
        .collect();
    assert_eq!(done, [(102, "b"), (105, "d")]);
    assert_eq!(report.measure, flxp_core::balance::Measure::Spread);
    assert_eq!(report.imbalance_planned, planned);
    assert_eq!(planned, 10.9375);
    // 102 and 105 (6 GiB each) left a for b and d: a 28 GiB, b 14, c 20, d 14 of 64 each, so
    // the memory spread is 43.75 % − 21.875 % = 21.875 points, twice what the plan promised.
    assert_eq!(report.imbalance_achieved, Some(21.875));
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["imbalance_planned"], 10.9375);
    assert_eq!(json["imbalance_achieved"], 21.875);
    assert_eq!(json["measure"], "spread");
}

#[tokio::test(start_paused = true)]
async fn a_failed_ha_migration_is_reported_with_proxmox_text() {
    let api = scripted(
        105,
        Script {
            ha_fail: Some(
                "migration aborted (duration 00:00:03): target node 'b' went offline".into(),
            ),
            ..Script::default()
        },
    );
    let report = run(&api, a_to_b(105)).await;
    assert_eq!(
        report.failed[0].error,
        "HA's migration failed: migration aborted (duration 00:00:03): target node 'b' went offline"
    );
    assert_eq!(api.node_of(105), "a");
}

#[tokio::test(start_paused = true)]
async fn a_failed_migration_is_reported_and_the_evacuation_goes_on_without_it() {
    let api = scripted(101, failing("migration problems"));
    let model = Model::from_snapshot(&api.snapshot(), &Overrides::default()).unwrap();
    let goal = evacuate(&["a"]);
    let plan = planning::plan(&model, &scheduler().placer(None), &goal, None).unwrap();
    assert!(plan.migrations.iter().any(|m| m.vmid == 101));
    let report = executor(&api, options()).execute(plan, &goal).await;
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert_eq!(report.failed[0].vmid, 101);
    assert_eq!(report.failed[0].error, "migration problems");
    assert_eq!(report.replans.len(), 1, "{report:?}");
    assert_eq!(posts(&api, 101), 1, "never tried twice in the round");
    assert_eq!(api.node_of(101), "a");
    // Everything else left a: the stopped VM, the container (restarted) and the HA VM (by HA).
    for vmid in [102, 103, 104, 105] {
        assert_ne!(api.node_of(vmid), "a", "{vmid}: {report:?}");
    }
    assert!(!report.is_clean());
}

#[tokio::test(start_paused = true)]
async fn a_guest_seen_in_flight_is_never_migrated_again() {
    // Another flxp (or a person) started moving 101; our plan from before still has it.
    let api = Arc::new(
        api()
            .on_read(1, vec![Change::Lock(101, "migrate".into())])
            .task(task(0x99, "qmigrate", 102, TIME - 5)),
    );
    let report = run(&api, leave_a("b", "d")).await;
    assert_eq!(posts(&api, 101), 0);
    assert_eq!(posts(&api, 102), 0);
    assert_eq!(report.skipped[0].vmid, 101);
    assert!(
        report.skipped[0]
            .reasons
            .contains(&"guest 101: locked (migrate)".to_owned()),
        "{:?}",
        report.skipped
    );
    // The replan on the fresh cluster leaves both alone too.
    assert!(report.replans.len() <= 1, "{report:?}");
    assert!(report.done.iter().all(|d| d.vmid != 101 && d.vmid != 102));
}

#[tokio::test(start_paused = true)]
async fn a_step_that_no_longer_fits_is_dropped_and_the_rest_replanned() {
    // After the first migration, 107 on b grows to fill b: 102 no longer fits there. Reads: the
    // round's start (migrations in flight), the first step's check, the second's.
    let api = Arc::new(api().on_read(3, vec![Change::GuestMem(107, 54 * GIB)]));
    let report = run(&api, leave_a("b", "b")).await;
    assert_eq!(report.done[0].vmid, 101);
    assert_eq!(report.skipped.len(), 1, "{report:?}");
    assert_eq!(report.skipped[0].vmid, 102);
    assert!(
        report.skipped[0]
            .reasons
            .iter()
            .any(|r| r.starts_with("b: ")),
        "the target's failed filter is named: {:?}",
        report.skipped[0].reasons
    );
    assert_eq!(report.replans.len(), 1);
    assert!(
        report.replans[0]
            .reason
            .contains("102 a → b no longer holds")
    );
    // The new plan sends 102 elsewhere, or first makes room on b (107 leaves) and only then
    // sends 102 there: never onto the full node.
    let at = |vmid: u32| report.done.iter().position(|d| d.vmid == vmid);
    if let Some(i) = at(102) {
        if report.done[i].to == "b" {
            let left = at(107).filter(|&j| report.done[j].from == "b");
            assert!(left.is_some_and(|j| j < i), "{report:?}");
        }
    }
    if api.node_of(102) == "b" {
        assert_ne!(
            api.node_of(107),
            "b",
            "b is full of 107 unless 107 left: {report:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_parallel_limit_decides_whether_independent_steps_overlap() {
    let plan = || {
        vec![
            mig(101, GuestKind::Qemu, "a", "b", 0),
            mig(106, GuestKind::Qemu, "c", "d", 1),
        ]
    };
    // 101 ends when its task is seen stopped, in the shared task list: the last list read
    // before the call that lands it.
    let first_end = |api: &ScriptedApi| {
        let calls = api.calls();
        let landed = api.landed_at(101).unwrap();
        let second_post = calls
            .iter()
            .position(|c| c.starts_with("POST /nodes/c/qemu/106/migrate"))
            .unwrap();
        second_post < landed
    };
    let api = Arc::new(api());
    let start = tokio::time::Instant::now();
    let report = run(&api, plan()).await;
    assert_eq!(report.done.len(), 2);
    assert!(first_end(&api), "parallel 2: 106 starts while 101 runs");
    assert_eq!(start.elapsed(), Duration::from_secs(2));

    let api = Arc::new(self::api());
    let one = ExecuteOptions {
        limits: Limits {
            parallel: 1,
            ..Limits::default()
        },
        ..options()
    };
    let start = tokio::time::Instant::now();
    let report = executor(&api, one)
        .execute(plan_of(&api, plan()), &balance())
        .await;
    assert_eq!(report.done.len(), 2);
    assert!(!first_end(&api), "parallel 1: 106 waits for 101");
    assert_eq!(start.elapsed(), Duration::from_secs(4));
}

/// Stops the round at the first started migration.
struct StopAtStart(crate::stop::StopHandle);

impl Progress for StopAtStart {
    fn event(&self, event: &Event) {
        if matches!(event, Event::Started { .. }) {
            self.0.stop();
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_stop_starts_nothing_new_and_lets_the_running_migration_end() {
    let api = Arc::new(api());
    let plan = plan_of(&api, leave_a("b", "b"));
    let report = stopped_at_start(&api, options())
        .execute(plan, &balance())
        .await;
    assert_eq!(report.done.len(), 1);
    assert_eq!(posts(&api, 102), 0);
    assert_eq!(report.stopped.as_deref(), Some("a stop was requested"));
    assert_eq!(api.node_of(101), "b");
}

#[tokio::test(start_paused = true)]
async fn a_stop_lets_a_bundle_begun_finish_and_starts_nothing_else() {
    let api = Arc::new(api());
    // 101 and 102 are one affinity bundle leaving a (one at a time: one out per node), 103 a
    // step of its own after them.
    let mut moves = leave_a("b", "b");
    for m in &mut moves {
        m.step = 0;
        m.wave = 0;
        m.bundle = vec![101, 102];
    }
    moves.push(mig(103, GuestKind::Qemu, "a", "c", 1));
    let plan = plan_of(&api, moves);
    let report = stopped_at_start(&api, options())
        .execute(plan, &balance())
        .await;
    assert_eq!(report.stopped.as_deref(), Some("a stop was requested"));
    let done: Vec<u32> = report.done.iter().map(|d| d.vmid).collect();
    assert_eq!(done, vec![101, 102], "the bundle is carried out whole");
    assert_eq!(posts(&api, 103), 0, "nothing else starts");
    assert_eq!(
        (api.node_of(101), api.node_of(102)),
        ("b".into(), "b".into())
    );
}

/// Stops the round for a reason of its own as the first migration starts.
struct LapseAtStart(crate::StopHandle);

impl Progress for LapseAtStart {
    fn event(&self, event: &Event) {
        if matches!(event, Event::Started { .. }) {
            self.0.stop_because("the zone's lease lapsed");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_stop_for_a_reason_says_it_and_what_it_left_not_started() {
    let api = Arc::new(api());
    let plan = plan_of(&api, leave_a("b", "c"));
    let (handle, stop) = stop_signal();
    let report = executor(&api, options())
        .with_stop(stop)
        .with_progress(Arc::new(LapseAtStart(handle)))
        .execute(plan.clone(), &evacuate(&["a"]))
        .await;
    assert_eq!(report.stopped.as_deref(), Some("the zone's lease lapsed"));
    assert_eq!(report.done.len(), 1);
    let outcomes = report.outcomes(&plan);
    assert_eq!(
        outcomes[&102],
        "its migration to c was not started: the run stopped early: the zone's lease lapsed"
    );
    // 101 landed: said only if it is found back on a later.
    assert_eq!(
        outcomes[&101],
        "its migration to b was done; it came back since"
    );
}

#[test]
fn each_kind_of_outcome_names_the_target_the_migration_was_sent_to() {
    let api = api();
    // Planned: 101 to b, 102 to b; a replan sent 101 to c, where it failed; 102 was dropped.
    let plan = plan_of(&api, leave_a("b", "b"));
    let failed = crate::report::Failed {
        vmid: 101,
        name: "g101".into(),
        from: "a".into(),
        to: "c".into(),
        step: 0,
        error: "migration aborted".into(),
    };
    let report = ExecutionReport {
        failed: vec![failed.clone()],
        unknown: vec![crate::report::Failed {
            vmid: 103,
            error: "the task could not be read".into(),
            ..failed.clone()
        }],
        skipped: vec![crate::report::Dropped {
            vmid: 102,
            name: "g102".into(),
            from: "a".into(),
            to: "b".into(),
            step: 1,
            reasons: vec!["b is full".into()],
        }],
        unfinished: vec![crate::report::Unfinished {
            vmid: 104,
            from: "a".into(),
            to: "d".into(),
        }],
        ..ExecutionReport::default()
    };
    let outcomes = report.outcomes(&plan);
    let want = [
        (101, "its migration to c failed: migration aborted"),
        (
            102,
            "its migration to b was not started: it no longer held (b is full)",
        ),
        (
            103,
            "its migration to c has an unknown outcome: the task could not be read",
        ),
        (
            104,
            "its migration to d was still running when the run stopped following it (Proxmox \
             carries it on)",
        ),
    ];
    let want: std::collections::BTreeMap<u32, String> =
        want.into_iter().map(|(v, w)| (v, w.to_owned())).collect();
    assert_eq!(outcomes, want);
}

#[tokio::test(start_paused = true)]
async fn a_migration_running_past_the_timeout_fails_and_a_drain_gives_up_in_time() {
    let api = scripted(101, endless());
    let short = ExecuteOptions {
        timeout: Duration::from_secs(10),
        ..options()
    };
    let report = executor(&api, short)
        .execute(plan_of(&api, a_to_b(101)), &balance())
        .await;
    let t = upid("a", 0x1001, "qmigrate", 101);
    assert_eq!(
        report.failed[0].error,
        format!("still running after 10 s (timeout-secs); Proxmox carries on with task {t}")
    );

    let api = scripted(101, endless());
    let drain = ExecuteOptions {
        drain_timeout: Duration::from_secs(5),
        ..options()
    };
    let start = tokio::time::Instant::now();
    let report = stopped_at_start(&api, drain)
        .execute(plan_of(&api, a_to_b(101)), &balance())
        .await;
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    assert_eq!(report.unfinished.len(), 1);
    assert_eq!(report.unfinished[0].vmid, 101);
}

/// Keeps every event.
#[derive(Default)]
struct Events(Mutex<Vec<Event>>);

impl Progress for Events {
    fn event(&self, event: &Event) {
        self.0.lock().unwrap().push(event.clone());
    }
}

#[tokio::test(start_paused = true)]
async fn progress_comes_from_the_task_log() {
    let api = scripted(
        101,
        Script {
            running_polls: 4,
            ..Script::default()
        },
    );
    let events = Arc::new(Events::default());
    // Polled as often as the log is read for progress: every poll gives a figure.
    let every_log = ExecuteOptions {
        poll: Duration::from_secs(5),
        ..options()
    };
    executor(&api, every_log)
        .with_progress(Arc::clone(&events) as Arc<dyn Progress>)
        .execute(plan_of(&api, a_to_b(101)), &balance())
        .await;
    let events = events.0.lock().unwrap().clone();
    let fractions: Vec<f64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Progress { fraction, .. } => Some((fraction * 10.0).round() / 10.0),
            _ => None,
        })
        .collect();
    assert_eq!(fractions, [0.2, 0.4, 0.6, 0.8, 1.0], "{events:?}");
    assert!(matches!(events[0], Event::Started { vmid: 101, .. }));
    assert!(matches!(events.last(), Some(Event::Done { vmid: 101, .. })));
    assert!(
        api.actions().iter().any(|c| c.ends_with("/log")),
        "the log is read when fractions are wanted"
    );
}

#[tokio::test(start_paused = true)]
async fn progress_reads_the_log_at_most_every_five_seconds_whatever_the_poll() {
    let api = scripted(
        101,
        Script {
            running_polls: 12,
            ..Script::default()
        },
    );
    let events = Arc::new(Events::default());
    executor(&api, options())
        .with_progress(Arc::clone(&events) as Arc<dyn Progress>)
        .execute(plan_of(&api, a_to_b(101)), &balance())
        .await;
    let logs: Vec<String> = api
        .actions()
        .into_iter()
        .filter(|c| c.contains("/log"))
        .collect();
    // Polled every second while it runs (about 12 s): the log at 0, 5 and 10 s.
    assert_eq!(logs.len(), 3, "{logs:#?}");
}

#[tokio::test(start_paused = true)]
async fn the_balance_budget_caps_replans() {
    let api = scripted(101, failing("migration problems"));
    let goal = Goal::Balance(BalanceOptions {
        max_migrations: 1,
        ..BalanceOptions::default()
    });
    let report = executor(&api, options())
        .execute(plan_of(&api, a_to_b(101)), &goal)
        .await;
    assert_eq!(report.failed.len(), 1);
    assert!(
        report.replans.is_empty(),
        "the one migration allowed was spent"
    );
    assert!(report.done.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_cluster_that_cannot_be_read_stops_the_round_after_what_runs() {
    // The round's start and the first step read fine; before the second the API goes away.
    let api = Arc::new(api().on_read(3, vec![Change::Unreadable]));
    let report = run(&api, leave_a("b", "d")).await;
    assert_eq!(report.done.len(), 1);
    assert_eq!(posts(&api, 102), 0);
    let why = report.stopped.as_deref().unwrap();
    assert!(
        why.starts_with(
            "the cluster cannot be read: collecting the snapshot: GET /cluster/resources failed"
        ),
        "{why}"
    );
    assert!(why.contains("Connection refused"), "{why}");
    assert!(!report.is_clean());
}

#[tokio::test(start_paused = true)]
async fn a_guest_whose_ha_move_is_queued_is_left_to_ha() {
    // A previous flxp asked HA to move 105 20 s ago; HA has not started the migration yet.
    let api = Arc::new(api().task(Task {
        endtime: Some(TIME - 20),
        status: Some("OK".into()),
        ..task(0x98, "hamigrate", 105, TIME - 21)
    }));
    let plan = plan_of(&api, a_to_b(105));
    let report = executor(&api, options())
        .execute(plan, &evacuate(&["a"]))
        .await;
    assert_eq!(posts(&api, 105), 0, "{report:#?}");
    assert_eq!(
        report.skipped[0].reasons,
        ["guest 105: an HA move was requested 20 s ago (hamigrate) and may not have started yet"]
    );
    // The replan empties a of everything else and leaves 105 to HA.
    assert!(report.done.iter().all(|d| d.vmid != 105));
    assert!(report.done.len() >= 3, "{report:#?}");
}

#[test]
fn moved_members_of_a_split_bundle_may_be_replanned() {
    let held = BTreeMap::from([
        (1, HoldReason::Moved),
        (2, HoldReason::Failed),
        (3, HoldReason::Moved),
        (4, HoldReason::Moved),
        (5, HoldReason::Moved),
    ]);
    let holds = replan_holds(&held, &[vec![1, 2], vec![4, 5]]);
    assert_eq!(
        holds,
        BTreeMap::from([
            (2, HoldReason::Failed),
            (3, HoldReason::Moved),
            (4, HoldReason::Moved),
            (5, HoldReason::Moved)
        ]),
        "1 moved without 2: free to join it again; 4 and 5 moved together: held"
    );
}

#[test]
fn the_world_fixture_reads() {
    let snap = Snapshot::from_json(&world()).unwrap();
    assert_eq!(snap.resources.len(), 11);
}

/// Twelve guests of one node, leaving it for three others in turn.
fn twelve_leave_a() -> (Arc<ScriptedApi>, Vec<Migration>) {
    let mut items: Vec<String> = [("a", 30), ("b", 4), ("c", 4), ("d", 4)]
        .iter()
        .map(|(n, m)| node(n, *m))
        .collect();
    for vmid in 201..=212 {
        items.push(format!(
            r#"{{"id":"qemu/{vmid}","type":"qemu","vmid":{vmid},"name":"g{vmid}","node":"a","status":"running","maxmem":{},"mem":{},"maxcpu":1,"cpu":0.1}}"#,
            2 * GIB,
            2 * GIB
        ));
    }
    let api = Arc::new(ScriptedApi::from_json(&format!("[{}]", items.join(","))));
    let migrations = (0..12u32)
        .map(|i| {
            let to = ["b", "c", "d"][i as usize % 3];
            Migration {
                bytes: 2 * GIB,
                ..mig(201 + i, GuestKind::Qemu, "a", to, i)
            }
        })
        .collect();
    (api, migrations)
}

#[tokio::test(start_paused = true)]
async fn migrations_leaving_one_node_run_as_many_at_once_as_the_limits_allow() {
    // Each migration takes two polls (2 s); departures from one node do not wait for each other.
    for (per_node_out, secs) in [(2, 12), (1, 24), (4, 12)] {
        let (api, migrations) = twelve_leave_a();
        let o = ExecuteOptions {
            limits: Limits {
                parallel: 2,
                per_node_in: 1,
                per_node_out,
            },
            ..options()
        };
        let start = tokio::time::Instant::now();
        let report = executor(&api, o)
            .execute(plan_of(&api, migrations), &balance())
            .await;
        assert_eq!(report.done.len(), 12, "{report:?}");
        assert!(report.replans.is_empty(), "{report:?}");
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(secs),
            "per-node-out {per_node_out}"
        );
    }
}
