//! The schedule of a rolling maintenance, as a dry run shows it before anything moves: per node
//! the evacuation's migrations, the bytes to copy and an estimate of the time they take at the
//! executor's expected bandwidth, the guests that fit nowhere else, and the steps after. Plans
//! only: nothing is changed.
//!
//! Every plan is made on one read of the cluster (as it is now: each node's plan starts from the
//! cluster as it is, as the real run's does once the nodes before it are back with their
//! guests), so the work grows with the nodes and the guests they move, not with nodes × reads.
//! Each wave is planned once: alone, a node's own evacuation; together, the plan that judged the
//! wave, split by node. Whoever waits is told as each node is planned.

use std::sync::Arc;

use flxp_core::balance::Plan;
use flxp_core::placement::Placer;

use super::wave::{Wave, evacuation_plan, next_wave_on};
use super::{RollingOptions, Step};
use crate::blocking;
use crate::execute::Executor;
use crate::planning::{self, Model};

/// One node of a schedule.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ScheduledNode {
    /// The node.
    pub node: String,
    /// An earlier run took it through already: skipped.
    pub done_before: bool,
    /// The plan that empties it, on the cluster as it is now (`None` when skipped); its bounds
    /// are left unknown.
    pub plan: Option<Plan>,
    /// Seconds the evacuation's copies take at the expected bandwidth.
    pub secs: i64,
    /// The steps after the evacuation, in words.
    pub steps: Vec<String>,
    /// The wave it goes out with (1 the first; 0 when skipped): the nodes of a wave are out
    /// together, up to the run's `parallel`.
    pub wave: usize,
    /// Why it does not go out with the wave before it, when that wave had room for it.
    pub held_back: Option<String>,
}

/// The schedule of a rolling maintenance.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Schedule {
    /// The nodes, in the order they go.
    pub nodes: Vec<ScheduledNode>,
    /// Migrations out, over every node (as many go back home).
    pub migrations: usize,
    /// Bytes to copy out, over every node.
    pub bytes: u64,
    /// Seconds the copies out take at the expected bandwidth.
    pub secs: i64,
    /// Some guest fits on no other node: the run would stop at its node.
    pub unmet: bool,
    /// Reads of the cluster made to plan it.
    pub reads: usize,
    /// Plans made to build it (each node's or wave's, and each wave checked).
    pub plans: usize,
}

/// News of a node planned, while a schedule is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// The node.
    pub node: String,
    /// Nodes planned so far, this one included (nodes done before are not counted).
    pub count: usize,
    /// Nodes to plan in all.
    pub total: usize,
    /// Its evacuation's migrations.
    pub migrations: usize,
    /// Its guests that fit on no other node.
    pub unplaced: usize,
}

/// Where news of nodes planned goes.
pub type TellPlanned<'a> = &'a (dyn Fn(Planned) + Sync);

impl Executor {
    /// The schedule of a rolling maintenance of `nodes` (none: every node, by name); `planned`
    /// hears of each node as it is planned.
    pub async fn rolling_schedule(
        &self,
        nodes: &[String],
        options: &RollingOptions,
        planned: TellPlanned<'_>,
    ) -> crate::Result<Schedule> {
        let (model, notes) = self.read_with_notes().await?;
        let progress = super::read(&notes);
        let names: Vec<String> = if nodes.is_empty() {
            super::names(&model.cluster)
        } else {
            for n in nodes {
                if !progress.get(n).is_some_and(|p| p.step == Step::Done) {
                    planning::node(&model, n)?;
                }
            }
            // As the run spells them, each once (a node named twice is done once).
            let canonical = |n: &String| {
                model
                    .node_named(n)
                    .map_or_else(|| n.clone(), |i| model.cluster.node(i).name.clone())
            };
            super::once(nodes.iter().map(canonical).collect())
        };
        let model = Arc::new(model);
        let bandwidth = self.options.expected_bandwidth.max(1.0);
        let secs = |bytes: u64| (bytes as f64 / bandwidth).ceil() as i64;
        let mut out = Schedule {
            reads: 1,
            ..Schedule::default()
        };
        for node in names {
            let done_before = progress.get(&node).is_some_and(|p| p.step == Step::Done);
            let mut steps = Vec::new();
            if !done_before {
                if let Some(h) = &options.hook {
                    steps.push(format!("hook {} {node}", h.command.join(" ")));
                }
                if options.reboot {
                    steps.push(format!(
                        "reboot, wait up to {} for it",
                        flxp_core::units::fmt_secs(options.boot_timeout.as_secs() as i64)
                    ));
                }
                steps.push("clear maintenance".into());
                if options.return_home {
                    // Counted once its plan is known.
                    steps.push(String::new());
                }
            }
            out.nodes.push(ScheduledNode {
                node,
                done_before,
                plan: None,
                secs: 0,
                steps,
                wave: 0,
                held_back: None,
            });
        }
        // Waves, on the cluster as it is now; each planned once.
        let mut rest: Vec<String> = out
            .nodes
            .iter()
            .filter(|n| !n.done_before)
            .map(|n| n.node.clone())
            .collect();
        let total = rest.len();
        let mut count = 0;
        let mut number = 0;
        while !rest.is_empty() {
            number += 1;
            let (model, placer) = (Arc::clone(&model), Arc::clone(&self.placer));
            let (left, opts) = (rest.clone(), options.clone());
            let (wave, alone) = blocking::run("planning a rolling maintenance", move || {
                plan_wave(&model, &placer, &left, &opts)
            })
            .await?;
            let alone = alone?;
            out.plans += wave.plans + usize::from(alone.is_some());
            let together = alone.or(wave.together);
            for n in out.nodes.iter_mut().filter(|n| !n.done_before) {
                if let Some((held, why)) = &wave.waits {
                    if &n.node == held {
                        n.held_back = Some(why.clone());
                    }
                }
                if !wave.nodes.contains(&n.node) {
                    continue;
                }
                n.wave = number;
                if let Some(together) = &together {
                    let mut plan = together.clone();
                    if wave.nodes.len() > 1 {
                        // Out together, the wave's nodes take none of each other's guests: their
                        // migrations are those of one plan emptying them all.
                        plan.migrations.retain(|m| m.from == n.node);
                        plan.unplaced.retain(|u| u.node == n.node);
                        plan.skipped.retain(|k| k.node == n.node);
                        plan.bytes = plan.migrations.iter().map(|m| m.bytes).sum();
                    }
                    n.secs = secs(plan.bytes);
                    count += 1;
                    planned(Planned {
                        node: n.node.clone(),
                        count,
                        total,
                        migrations: plan.migrations.len(),
                        unplaced: plan.unplaced.len(),
                    });
                    n.plan = Some(plan);
                }
            }
            rest.retain(|n| !wave.nodes.contains(n));
        }
        // The totals of the plans as the waves run them.
        let plans = || out.nodes.iter().filter_map(|n| n.plan.as_ref());
        out.migrations = plans().map(|p| p.migrations.len()).sum();
        out.bytes = plans().map(|p| p.bytes).sum();
        out.unmet = plans().any(|p| !p.unplaced.is_empty());
        out.secs = secs(out.bytes);
        for n in &mut out.nodes {
            if let (Some(plan), Some(last)) = (&n.plan, n.steps.last_mut()) {
                if options.return_home {
                    *last = format!("{} guest(s) back home", plan.migrations.len());
                }
            }
        }
        Ok(out)
    }
}

/// The next wave from `rest` (not empty) on `model`, and, when it is one node alone, the plan
/// that empties it (a wave of more nodes has the plan that judged it).
fn plan_wave(
    model: &Model,
    placer: &Placer,
    rest: &[String],
    options: &RollingOptions,
) -> (Wave, crate::Result<Option<Plan>>) {
    let wave = next_wave_on(model, placer, rest, options);
    let alone = match wave.nodes.as_slice() {
        [_] => evacuation_plan(model, placer, &wave.nodes, options).map(Some),
        _ => Ok(None),
    };
    (wave, alone)
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use std::sync::Mutex;

    use flxp_core::Scheduler;
    use flxp_core::balance::Registry;
    use flxp_core::builder::{ClusterBuilder, node, vm};
    use flxp_core::placement::PlacementOptions;
    use flxp_core::units::GIB;
    use flxp_pve::Pve;
    use flxp_sim::SimHandle;

    use super::*;
    use crate::sim_client::{calls, serve_snapshot};

    /// Six nodes n1..n6 of four 4 GiB guests each, simulated.
    async fn six() -> (SimHandle, Pve) {
        let mut b = ClusterBuilder::new().time(1_764_400_000);
        for n in 1..=6 {
            b = b.node(node(&format!("n{n}")).memory(64 * GIB).cpus(16.0));
        }
        for vmid in 100..124 {
            let on = format!("n{}", (vmid - 100) / 4 + 1);
            b = b.guest(vm(vmid, &on).mem(4 * GIB, 4 * GIB).cores(2.0, 0.5));
        }
        let (sim, client) = serve_snapshot(&b.snapshot()).await;
        (sim, client.into())
    }

    /// The schedule of every node of [`six`], `parallel` at a time, with what it told on the
    /// way, after checking its work: one read of the cluster, `plans` plans, these waves.
    async fn schedule(
        parallel: usize,
        plans: usize,
        waves: [usize; 6],
    ) -> (Schedule, Vec<Planned>) {
        let (sim, api) = six().await;
        let (s, told) = schedule_on(&api, parallel).await;
        assert_eq!(resource_reads(&sim), 1);
        assert_eq!((s.reads, s.plans), (1, plans));
        let got: Vec<usize> = s.nodes.iter().map(|n| n.wave).collect();
        assert_eq!(got, waves);
        assert_eq!(s.migrations, 24);
        (s, told)
    }

    /// The schedule of every node, `parallel` at a time, with what it told on the way.
    async fn schedule_on(api: &Pve, parallel: usize) -> (Schedule, Vec<Planned>) {
        let scheduler = Scheduler::new(
            Placer::new(PlacementOptions::default(), Vec::new()).unwrap(),
            Registry::builtin(),
        )
        .unwrap();
        let executor = Executor::new("lab", api.clone(), &scheduler);
        let options = RollingOptions {
            parallel,
            ..RollingOptions::default()
        };
        let told = Mutex::new(Vec::new());
        let schedule = executor
            .rolling_schedule(&[], &options, &|p| told.lock().unwrap().push(p))
            .await
            .unwrap();
        (schedule, told.into_inner().unwrap())
    }

    /// How many times the cluster's resources were read.
    fn resource_reads(sim: &SimHandle) -> usize {
        calls(sim)
            .iter()
            .filter(|c| c.starts_with("GET /cluster/resources"))
            .count()
    }

    #[tokio::test]
    async fn a_schedule_reads_the_cluster_once_and_plans_each_wave_once() {
        let (_, told) = schedule(1, 6, [1, 2, 3, 4, 5, 6]).await;
        let said: Vec<(usize, usize, &str, usize)> = told
            .iter()
            .map(|p| (p.count, p.total, p.node.as_str(), p.migrations))
            .collect();
        assert_eq!(
            said,
            [
                (1, 6, "n1", 4),
                (2, 6, "n2", 4),
                (3, 6, "n3", 4),
                (4, 6, "n4", 4),
                (5, 6, "n5", 4),
                (6, 6, "n6", 4)
            ]
        );

        // Three out of six leave no majority: waves of two, each judged by one plan that is
        // also its schedule.
        let (s, told) = schedule(3, 3, [1, 1, 2, 2, 3, 3]).await;
        assert_eq!(
            s.nodes[2].held_back.as_deref(),
            Some("3 of 6 node(s) would stay online: quorum needs more than half")
        );
        let counts: Vec<usize> = told.iter().map(|p| p.count).collect();
        assert_eq!(counts, [1, 2, 3, 4, 5, 6]);
        for n in &s.nodes {
            let plan = n.plan.as_ref().unwrap();
            assert_eq!(plan.migrations.len(), 4, "{}", n.node);
            assert!(plan.migrations.iter().all(|m| m.from == n.node));
        }
    }
}
