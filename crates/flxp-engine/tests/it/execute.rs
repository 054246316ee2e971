//! Carrying out plans against the simulator: balance and evacuation end as planned with every
//! step safe, a failed migration is reported while the rest goes on, an executor aborted
//! mid-round and run again migrates no guest twice, a world that changes under the plan is
//! replanned, HA guests are followed through HA.

use std::sync::Arc;
use std::time::Duration;

use flxp_core::balance::{BalanceOptions, EvacuateOptions, Plan};
use flxp_engine::{Event, ExecutionReport, Executor, Goal, Limits, Progress};
use flxp_sim::scenario::{ErrorFault, FailMigration, FaultSpec};
use tokio::sync::Notify;

use crate::support::{DEMO, FirstStart, GIB, UNBALANCED, Watch, Zone, spread_in, zone};

fn balance() -> Goal {
    Goal::Balance(BalanceOptions::default())
}

/// The unbalanced zone at a time scale, an executor of it with the default limits, its balance
/// plan.
async fn unbalanced(time_scale: f64) -> (Zone, Executor, Plan) {
    let z = zone(UNBALANCED, time_scale, |_| {}).await;
    let exec = z.executor(Limits::default());
    let plan = exec.plan(&balance()).await.unwrap();
    (z, exec, plan)
}

/// Carries out a plan with a [`Watch`] on the world at every step: the report and the watch.
async fn watched(
    z: &Zone,
    exec: Executor,
    plan: Plan,
    goal: &Goal,
) -> (ExecutionReport, Arc<Watch>) {
    let watch = Watch::new(z);
    let report = exec
        .with_progress(Arc::clone(&watch) as Arc<dyn Progress>)
        .execute(plan, goal)
        .await;
    (report, watch)
}

/// Every planned guest is where the plan sent it, moved by one migration.
fn assert_landed_once(z: &Zone, plan: &Plan) {
    for m in &plan.migrations {
        assert_eq!(z.node_of(m.vmid), m.to, "{}", m.vmid);
        assert_eq!(z.migrations_of(m.vmid), 1);
    }
}

/// Every `GET` of `path` fails as if it timed out.
fn timeout_fault(path: &str) -> ErrorFault {
    ErrorFault {
        path: path.into(),
        method: Some("GET".into()),
        rate: 1.0,
        status: 500,
        message: "simulated timeout".into(),
    }
}

/// The first step the round skipped is `vmid`'s, for a reason `why` accepts.
fn assert_first_skipped(report: &ExecutionReport, vmid: u32, why: impl Fn(&str) -> bool) {
    assert_eq!(report.skipped[0].vmid, vmid, "{report:#?}");
    assert!(
        report.skipped[0].reasons.iter().any(|r| why(r)),
        "{:?}",
        report.skipped[0].reasons
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_balance_ends_as_planned_with_every_step_safe() {
    let (z, exec, plan) = unbalanced(500.0).await;
    assert!(plan.migrations.len() >= 3, "{}", plan.summary);
    let (report, watch) = watched(&z, exec, plan.clone(), &balance()).await;
    assert!(report.is_clean(), "{report:#?}");
    assert!(report.replans.is_empty(), "{report:#?}");
    assert_eq!(report.done.len(), plan.migrations.len());
    assert_landed_once(&z, &plan);
    let after = spread_in(&z.model(), plan.metric);
    assert!(
        (after - plan.imbalance_after).abs() < 0.5,
        "the cluster ends as planned: {after} vs {}",
        plan.imbalance_after
    );
    assert!(after < plan.imbalance_before);
    assert_eq!(watch.problems(), Vec::<String>::new());
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evacuation_empties_the_node_and_ha_guests_go_through_ha() {
    let z = zone(DEMO, 500.0, |_| {}).await;
    let goal = Goal::Evacuate {
        nodes: vec!["pve1".into()],
        options: EvacuateOptions::default(),
    };
    let exec = z.executor(Limits {
        parallel: 3,
        per_node_in: 1,
        per_node_out: 3,
    });
    let plan = exec.plan(&goal).await.unwrap();
    assert!(plan.unplaced.is_empty(), "{:?}", plan.unplaced);
    assert!(
        plan.migrations.iter().any(|m| m.vmid == 111),
        "HA guest 111 moves"
    );
    let (report, watch) = watched(&z, exec, plan.clone(), &goal).await;
    assert!(report.is_clean(), "{report:#?}");
    let ha = report.done.iter().find(|d| d.vmid == 111).unwrap();
    assert!(ha.ha, "111 is HA-managed: moved by hamigrate");
    let left = z.guests_on("pve1");
    let stays: Vec<u32> = plan.skipped.iter().map(|s| s.vmid).collect();
    for vmid in &left {
        assert!(
            *vmid == 9000 || stays.contains(vmid),
            "{vmid} is still on pve1 without a reason to stay"
        );
    }
    assert_eq!(watch.problems(), Vec::<String>::new());
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_migration_is_reported_and_the_rest_goes_on() {
    let (z, exec, plan) = unbalanced(500.0).await;
    let failing = plan.migrations[0].vmid;
    z.sim.world().faults.set(FaultSpec {
        fail_migrations: vec![FailMigration {
            vmid: failing,
            message: Some("migration aborted: simulated network failure".into()),
        }],
        ..FaultSpec::default()
    });
    let (report, watch) = watched(&z, exec, plan.clone(), &balance()).await;
    assert_eq!(report.failed.len(), 1, "{report:#?}");
    assert_eq!(report.failed[0].vmid, failing);
    assert_eq!(
        report.failed[0].error,
        "migration aborted: simulated network failure"
    );
    assert_eq!(z.node_of(failing), "pve1");
    assert_eq!(z.migrations_of(failing), 1, "never retried in the round");
    assert!(!report.replans.is_empty());
    assert!(
        report.done.len() >= plan.migrations.len() - 1,
        "the rest is done: {report:#?}"
    );
    let after = spread_in(&z.model(), plan.metric);
    assert!(after < plan.imbalance_before - 20.0, "{after}");
    assert_eq!(watch.problems(), Vec::<String>::new());
    let failed = watch
        .events()
        .into_iter()
        .filter(|e| matches!(e, Event::Failed { .. }))
        .count();
    assert_eq!(failed, 1);
    z.shutdown().await;
}

/// With every task-status call failing, migrations that land were reported
/// as failed ("lost track of task"). The cluster is looked at before a migration is called failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn landed_migrations_are_done_even_when_their_task_status_cannot_be_read() {
    let (z, exec, plan) = unbalanced(500.0).await;
    assert!(!plan.migrations.is_empty(), "{}", plan.summary);
    z.sim.world().faults.set(FaultSpec {
        errors: vec![timeout_fault("/nodes/*/tasks/*/status")],
        ..FaultSpec::default()
    });
    let report = exec.execute(plan.clone(), &balance()).await;
    assert!(report.failed.is_empty(), "{report:#?}");
    assert!(report.unknown.is_empty(), "{report:#?}");
    assert_eq!(report.done.len(), plan.migrations.len(), "{report:#?}");
    assert_landed_once(&z, &plan);
    z.shutdown().await;
}

/// With the task status (from the task list and from the task's node) and the cluster all
/// unreadable, the outcome is unknown, not failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_whose_end_cannot_be_read_at_all_is_reported_unknown() {
    let z = zone(UNBALANCED, 500.0, |_| {}).await;
    let exec = z
        .executor(Limits::default())
        .with_options(flxp_engine::ExecuteOptions {
            poll: Duration::from_millis(10),
            timeout: Duration::from_secs(2),
            drain_timeout: Duration::from_secs(30),
            ..flxp_engine::ExecuteOptions::default()
        });
    let plan = exec.plan(&balance()).await.unwrap();
    let first = plan.migrations[0].clone();
    let mut one = plan.clone();
    one.migrations.truncate(1);
    let faults = FaultSpec {
        errors: vec![
            timeout_fault("/nodes/*/tasks/*/status"),
            timeout_fault("/cluster/tasks"),
            timeout_fault("/cluster/resources"),
        ],
        ..FaultSpec::default()
    };
    // The faults start once the migration is under way: before, the re-check must read the cluster.
    let hook = Arc::new(FaultsOnStart(z.sim.clone(), faults));
    let report = exec
        .with_progress(hook as Arc<dyn Progress>)
        .execute(one, &balance())
        .await;
    assert!(report.failed.is_empty(), "{report:#?}");
    assert_eq!(report.unknown.len(), 1, "{report:#?}");
    assert_eq!(report.unknown[0].vmid, first.vmid);
    assert!(!report.is_clean());
    z.sim.world().faults.set(FaultSpec::default());
    z.shutdown().await;
}

/// Sets faults in the simulator when the first migration starts.
struct FaultsOnStart(flxp_sim::Sim, FaultSpec);

impl Progress for FaultsOnStart {
    fn event(&self, event: &Event) {
        if matches!(event, Event::Started { .. }) {
            self.0.world().faults.set(self.1.clone());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_aborted_mid_round_and_run_again_migrates_no_guest_twice() {
    // 50x: an 8 GiB live migration takes 0.16 s, long enough to be caught in flight.
    let (z, exec, plan) = unbalanced(50.0).await;
    let started = Arc::new(Notify::new());
    let first = exec
        .clone()
        .with_progress(Arc::new(FirstStart(Arc::clone(&started))));
    let goal = balance();
    tokio::select! {
        _ = first.execute(plan.clone(), &goal) => panic!("the round ended before a migration started"),
        () = started.notified() => {}
    }
    // The executor is gone (as if flxp was killed); the migration runs on in "Proxmox".
    let in_flight: Vec<u32> = z
        .sim
        .world()
        .guests
        .values()
        .filter(|g| g.lock() == Some("migrate"))
        .map(|g| g.vmid)
        .collect();
    assert!(!in_flight.is_empty());

    let again = z.executor(Limits::default());
    let plan2 = again.plan(&balance()).await.unwrap();
    for vmid in &in_flight {
        assert!(
            plan2.migrations.iter().all(|m| m.vmid != *vmid),
            "{vmid} is in flight: not planned again"
        );
        assert!(
            plan2.skipped.iter().any(|s| s.vmid == *vmid),
            "{:?}",
            plan2.skipped
        );
    }
    let (report, watch) = watched(&z, again, plan2, &balance()).await;
    assert!(report.failed.is_empty(), "{report:#?}");
    // Let the migration the first run started land.
    for _ in 0..200 {
        if in_flight
            .iter()
            .all(|v| z.migrations_of(*v) == 1 && z.node_of(*v) != "pve1")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let guests: Vec<u32> = z.sim.world().guests.keys().copied().collect();
    for vmid in guests {
        assert!(z.migrations_of(vmid) <= 1, "{vmid} migrated twice");
    }
    assert_eq!(watch.problems(), Vec::<String>::new());
    let after = spread_in(&z.model(), plan.metric);
    assert!(after < plan.imbalance_before - 20.0, "{after}");
    z.shutdown().await;
}

/// Fills the target of the second planned migration as soon as the first one is done.
struct FillTarget {
    sim: flxp_sim::Sim,
    target: String,
    first: u32,
}

impl Progress for FillTarget {
    fn event(&self, event: &Event) {
        let Event::Done { vmid, .. } = event else {
            return;
        };
        if *vmid != self.first {
            return;
        }
        let mut w = self.sim.world();
        let max = w.nodes[&self.target].maxmem;
        let used = crate::support::carried(&w, &self.target);
        let extra = (max - 2 * GIB).saturating_sub(used);
        // Something outside the guests (a ZFS ARC, a host process) takes the room.
        if let Some(n) = w.nodes.get_mut(&self.target) {
            n.base_mem += extra;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_that_changes_under_the_plan_is_replanned() {
    let (z, exec, plan) = unbalanced(500.0).await;
    let second = plan.migrations[1].clone();
    let fill = FillTarget {
        sim: z.sim.clone(),
        target: second.to.clone(),
        first: plan.migrations[0].vmid,
    };
    let report = exec
        .with_progress(Arc::new(fill))
        .execute(plan.clone(), &balance())
        .await;
    assert_eq!(report.skipped.len(), 1, "{report:#?}");
    assert_first_skipped(&report, second.vmid, |r| {
        r.starts_with(&format!("{}: memory", second.to))
    });
    assert!(!report.replans.is_empty());
    assert_ne!(z.node_of(second.vmid), second.to);
    assert!(report.failed.is_empty(), "{report:#?}");
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_gone_offline_through_the_control_endpoint_is_planned_around() {
    let (z, exec, plan) = unbalanced(500.0).await;
    let first = plan.migrations[0].clone();
    let answer = z
        .control(
            "POST",
            &format!("/_sim/nodes/{}/status", first.to),
            r#"{"status":"offline"}"#,
        )
        .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let report = exec.execute(plan.clone(), &balance()).await;
    assert_first_skipped(&report, first.vmid, |r| {
        r.starts_with(&format!("{}: ", first.to)) && r.contains("offline")
    });
    assert_eq!(report.replans.len(), 1, "{report:#?}");
    assert!(report.failed.is_empty(), "{report:#?}");
    assert!(report.done.iter().all(|d| d.to != first.to));
    assert!(!report.done.is_empty());
    assert!(spread_in(&z.model(), plan.metric) < plan.imbalance_before - 20.0);
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_never_targets_room_that_a_vm_creation_has_reserved() {
    let (z, _, free) = unbalanced(500.0).await;
    let target = free
        .migrations
        .first()
        .expect("the unbalanced scenario needs moves")
        .to
        .clone();
    // A creation in flight holds every byte of that node: no plan may move a guest there now.
    let model = z.model();
    let node = model.cluster.node(model.cluster.node_idx(&target).unwrap());
    let book = flxp_engine::Reservations::new(Duration::from_secs(60));
    let hold = flxp_engine::NodeHold {
        node: target.clone(),
        memory: node.maxmem,
        cores: 1.0,
        disk: None,
        groups: Vec::new(),
    };
    let ((), ticket) = book
        .decide(
            &model.cluster,
            tokio::time::Instant::now(),
            &model.state,
            |_, _| Ok::<_, ()>(((), Some(hold))),
        )
        .unwrap();
    let held = z
        .executor(Limits::default())
        .with_reservations(Some(Arc::clone(&book)))
        .plan(&balance())
        .await
        .unwrap();
    assert!(
        held.migrations.iter().all(|m| m.to != target),
        "{:#?}",
        held.migrations
    );
    drop(ticket);
    z.shutdown().await;
}
