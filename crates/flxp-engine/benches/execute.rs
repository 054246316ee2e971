//! Carrying out plans against the simulator: wall time, simulated time and outcome of a round.
//!
//! Each case starts `flxp_sim` in-process (plain HTTP, token auth), plans with the core, and runs
//! the executor as `flxp balance --zone` / `flxp evacuate --zone` would, with the default limits
//! (2 at once, 1 in and 1 out per node) unless the case says otherwise. The simulator moves
//! memory at 1 GiB/s of simulated time, and its clock runs `SCALE` times faster than the wall.
//! Run: `cargo bench -p flxp-engine --bench execute`.
// A benchmark may panic on a broken setup: that is its failure report.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use flxp_core::balance::Registry;
use flxp_core::balance::{BalanceOptions, EvacuateOptions, Measure, Metric};
use flxp_core::placement::{PlacementOptions, Placer};
use flxp_core::{Overrides, Scheduler, balance};
use flxp_engine::{ExecuteOptions, Executor, Goal, Limits, Model};
use flxp_pve::{ClientBuilder, Credentials, Host, Secret};
use flxp_sim::{Scenario, Sim, SimHandle};

const TOKEN: &str = "root@pam!bench=5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a";
/// Simulated seconds per wall second.
const SCALE: f64 = 10.0;
/// Task poll interval (the config's default is 2 s; at 10x that would be 20 simulated seconds).
const POLL: Duration = Duration::from_millis(200);

struct Case {
    name: &'static str,
    scenario: Scenario,
    goal: Goal,
    limits: Limits,
}

fn scenario(json: &str) -> Scenario {
    let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
    v["sim"]["time_scale"] = SCALE.into();
    Scenario::from_value(v).unwrap()
}

fn run(runtime: &tokio::runtime::Runtime, case: Case) {
    let Case {
        name,
        mut scenario,
        goal,
        limits,
    } = case;
    scenario.add_token(TOKEN).unwrap();
    let sim = Sim::new(scenario).unwrap();
    let handle = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        SimHandle::spawn(listener, sim.clone(), None).unwrap()
    });
    let (id, secret) = TOKEN.rsplit_once('=').unwrap();
    let client = ClientBuilder::new(
        vec![format!("http://{}", handle.addr()).parse::<Host>().unwrap()],
        Credentials::Token {
            id: id.into(),
            secret: Secret::new(secret),
        },
    )
    .build()
    .unwrap();
    let scheduler = Scheduler::new(
        Placer::new(PlacementOptions::default(), Vec::new()).unwrap(),
        Registry::builtin(),
    )
    .unwrap();
    let clock_sim = sim.clone();
    let executor = Executor::new(name, client.into(), &scheduler)
        .with_options(ExecuteOptions {
            limits,
            poll: POLL,
            ..ExecuteOptions::default()
        })
        .with_clock(Arc::new(move || clock_sim.now() as i64));
    // An evacuated node stays out of the measure, as in the plan.
    let overrides = match &goal {
        Goal::Evacuate { nodes, .. } => Overrides {
            maintenance: nodes.iter().cloned().collect(),
            ..Overrides::default()
        },
        Goal::Balance(_) => Overrides::default(),
        other => panic!("the bench does not know goal {other:?}"),
    };
    let spread = |sim: &Sim| {
        let m = Model::from_snapshot(&sim.world().snapshot(), &overrides).unwrap();
        balance::imbalance(&m.cluster, &m.state, Measure::Spread, Metric::Memory)
    };
    let before = spread(&sim);
    let t0 = Instant::now();
    let plan = runtime.block_on(executor.plan(&goal)).unwrap();
    let plan_ms = t0.elapsed().as_secs_f64() * 1e3;
    let sim_start = sim.now();
    let t1 = Instant::now();
    let report = runtime.block_on(executor.execute(plan.clone(), &goal));
    let wall = t1.elapsed().as_secs_f64();
    let sim_secs = sim.now() - sim_start;
    let after = spread(&sim);
    let gib = plan.bytes as f64 / (1u64 << 30) as f64;
    println!(
        "{name}: {} migration(s) planned ({gib:.1} GiB) in {plan_ms:.1} ms (read + plan); \
         done {}, failed {}, replans {}; wall {wall:.2} s = {sim_secs:.0} simulated s at {SCALE}x \
         (limits {}/{}/{} parallel/in/out, poll {} ms); memory spread {before:.1} → {after:.1} pp \
         (plan said {:.1})",
        plan.migrations.len(),
        report.done.len(),
        report.failed.len(),
        report.replans.len(),
        limits.parallel,
        limits.per_node_in,
        limits.per_node_out,
        POLL.as_millis(),
        plan.imbalance_after,
    );
    runtime.block_on(handle.shutdown()).unwrap();
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let balance = Goal::Balance(BalanceOptions::default());
    let cases = vec![
        Case {
            name: "demo balance",
            scenario: scenario(include_str!("../../flxp-sim/scenarios/demo.json")),
            goal: balance.clone(),
            limits: Limits::default(),
        },
        Case {
            name: "unbalanced balance",
            scenario: scenario(include_str!("../../flxp-sim/scenarios/unbalanced.json")),
            goal: balance.clone(),
            limits: Limits::default(),
        },
        Case {
            name: "demo evacuate pve1",
            scenario: scenario(include_str!("../../flxp-sim/scenarios/demo.json")),
            goal: Goal::Evacuate {
                nodes: vec!["pve1".into()],
                options: EvacuateOptions::default(),
            },
            limits: Limits::default(),
        },
        Case {
            name: "demo evacuate pve1, 4 out and 2 in at once",
            scenario: scenario(include_str!("../../flxp-sim/scenarios/demo.json")),
            goal: Goal::Evacuate {
                nodes: vec!["pve1".into()],
                options: EvacuateOptions::default(),
            },
            limits: Limits {
                parallel: 4,
                per_node_in: 2,
                per_node_out: 4,
            },
        },
    ];
    for case in cases {
        run(&runtime, case);
    }
}
