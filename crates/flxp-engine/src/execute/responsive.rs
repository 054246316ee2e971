//! The executor's runtime stays free while a large plan is computed: on a current-thread runtime
//! (one worker, the starkest case), a task ticking every millisecond keeps ticking while the
//! executor reads and plans a generated cluster of hundreds of nodes and thousands of guests.
//!
//! Bounds are ratios of the plan's own time, never absolute wall-clock figures, so a slow or busy
//! machine does not fail them. The control case plans inline, as the executor once did, and shows
//! that the ticker's gap then spans the plan: the measure sees a blocked runtime.
// Tests may panic on malformed fixtures: that is the failure report.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flxp_core::balance::BalanceOptions;
use flxp_core::builder::{ClusterBuilder, node, vm};
use flxp_core::placement::{PlacementOptions, Placer};
use flxp_core::{Overrides, Snapshot};

use super::*;
use crate::testapi::ScriptedApi;
use flxp_pve::Pve;

const GIB: u64 = 1 << 30;

/// An unbalanced cluster: `nodes` nodes of 256 GiB, filled from 10 % to 85 % with 4 GiB guests,
/// some in anti-affinity groups spanning neighbouring nodes.
fn large(nodes: u32) -> Snapshot {
    let mut b = ClusterBuilder::new().time(1_764_400_000);
    let mut vmid = 100;
    for i in 0..nodes {
        let name = format!("n{i:04}");
        b = b.node(node(&name).memory(256 * GIB).cpus(64.0));
        let guests = 6 + (i * 37) % 48;
        for slot in 0..guests {
            let tags = if slot % 7 == 0 {
                format!("flxp.anti-affinity.a{slot}-{}", i / 3)
            } else {
                String::new()
            };
            b = b.guest(
                vm(vmid, &name)
                    .mem(4 * GIB, 4 * GIB)
                    .cores(2.0, 0.2)
                    .tagged(&tags),
            );
            vmid += 1;
        }
    }
    b.snapshot()
}

/// Ticks every millisecond until stopped; the largest gap between ticks.
fn ticker(stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Duration> {
    tokio::spawn(async move {
        let mut last = Instant::now();
        let mut widest = Duration::ZERO;
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let now = Instant::now();
            widest = widest.max(now - last);
            last = now;
        }
        widest
    })
}

/// Runs `work` while the ticker ticks: (its output, its time, the ticker's widest gap).
async fn timed<T>(work: impl std::future::Future<Output = T>) -> (T, Duration, Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let ticks = ticker(Arc::clone(&stop));
    // Let the ticker take its first tick before the work starts.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let t0 = Instant::now();
    let out = work.await;
    let took = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    let widest = ticks.await.unwrap();
    (out, took, widest)
}

fn executor(api: ScriptedApi) -> Executor {
    let placer = Arc::new(Placer::new(PlacementOptions::default(), Vec::new()).unwrap());
    Executor::new("big", Pve::from_transport(Arc::new(api)), placer)
}

#[tokio::test(flavor = "current_thread")]
async fn a_large_plan_leaves_the_runtime_responsive() {
    let exec = executor(ScriptedApi::new(large(300)));
    let goal = Goal::Balance(BalanceOptions::default());
    let (plan, took, widest) = timed(exec.plan(&goal)).await;
    let plan = plan.unwrap();
    tracing::info!(?took, ?widest, summary = %plan.summary, "planned");
    assert!(
        widest < took / 4,
        "the ticker stalled for {widest:?} while the plan took {took:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn planning_inline_would_stall_the_runtime() {
    let snapshot = large(300);
    let placer = Placer::new(PlacementOptions::default(), Vec::new()).unwrap();
    let goal = Goal::Balance(BalanceOptions::default());
    let done = Mutex::new(None);
    let inline = async {
        let model = planning::model(&snapshot, &Overrides::default()).unwrap();
        *done.lock().unwrap() = Some(planning::plan(&model, &placer, &goal, None).unwrap());
    };
    let ((), took, widest) = timed(inline).await;
    assert!(done.lock().unwrap().is_some());
    tracing::info!(?took, ?widest, "planned inline");
    assert!(
        widest >= took / 4,
        "the ticker ran on during inline planning ({widest:?} of {took:?}): the measure is blind"
    );
}
