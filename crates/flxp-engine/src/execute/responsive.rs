//! The executor plans on tokio's blocking pool, never on a runtime worker.
//!
//! The check is by construction, not by a clock: the runtime gets exactly one blocking thread, a
//! guard occupies it, and the executor's plan must then wait, still pending after any number of
//! polls, until the guard lets the thread go. A plan computed inline on the runtime's worker
//! would finish on its first poll (the test double answers at once), so the test tells the two
//! apart on any machine, however busy.
// Tests may panic on malformed fixtures: that is the failure report.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use flxp_core::Scheduler;
use flxp_core::Snapshot;
use flxp_core::balance::BalanceOptions;
use flxp_core::balance::Registry;
use flxp_core::builder::{ClusterBuilder, node, vm};
use flxp_core::placement::{PlacementOptions, Placer};
use flxp_core::units::GIB;
use futures_util::FutureExt;

use super::*;
use crate::testapi::ScriptedApi;
use flxp_pve::Pve;

/// Two nodes, one full and one empty: a plan with moves to compute.
fn unbalanced() -> Snapshot {
    let mut b = ClusterBuilder::new()
        .time(1_764_400_000)
        .node(node("n1").memory(64 * GIB).cpus(16.0))
        .node(node("n2").memory(64 * GIB).cpus(16.0));
    for vmid in 100..112 {
        b = b.guest(vm(vmid, "n1").mem(4 * GIB, 4 * GIB).cores(2.0, 1.0));
    }
    b.snapshot()
}

fn executor(api: ScriptedApi) -> Executor {
    let scheduler = Scheduler::new(
        Placer::new(PlacementOptions::default(), Vec::new()).unwrap(),
        Registry::builtin(),
    )
    .unwrap();
    Executor::new("small", Pve::from_transport(Arc::new(api)), &scheduler)
}

#[test]
fn a_plan_waits_for_the_blocking_pool_and_never_runs_on_the_worker() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(1)
        .build()
        .unwrap();
    runtime.block_on(async {
        let (started, is_started) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        // The guard holds the only blocking thread until released (or, should the test fail
        // before releasing it, for a minute at most so the test binary still ends).
        let guard = tokio::task::spawn_blocking(move || {
            started.send(()).unwrap();
            let _ = released.recv_timeout(Duration::from_secs(60));
        });
        is_started.recv().unwrap();

        let exec = executor(ScriptedApi::new(unbalanced()));
        let goal = Goal::Balance(BalanceOptions::default());
        let mut plan = Box::pin(exec.plan(&goal));
        for _ in 0..1_000 {
            assert!(
                (&mut plan).now_or_never().is_none(),
                "the plan finished while the only blocking thread was held: it ran on the worker"
            );
            tokio::task::yield_now().await;
        }

        release.send(()).unwrap();
        guard.await.unwrap();
        let plan = plan.await.unwrap();
        assert!(
            !plan.migrations.is_empty(),
            "the unbalanced pair needs moves: {}",
            plan.summary
        );
    });
}
