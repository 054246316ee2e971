//! The schedule of a rolling maintenance, as a dry run shows it before anything moves: per node
//! the evacuation's migrations, the bytes to copy and an estimate of the time they take at the
//! executor's expected bandwidth, the guests that fit nowhere else, and the steps after. Plans
//! only: nothing is changed.

use flxp_core::balance::Plan;

use super::{RollingOptions, Step};
use crate::execute::Executor;
use crate::planning::Goal;

/// One node of a schedule.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ScheduledNode {
    /// The node.
    pub node: String,
    /// An earlier run took it through already: skipped.
    pub done_before: bool,
    /// The plan that empties it, on the cluster as it is now (`None` when skipped).
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
}

impl Executor {
    /// The schedule of a rolling maintenance of `nodes` (none: every node, by name).
    pub async fn rolling_schedule(
        &self,
        nodes: &[String],
        options: &RollingOptions,
    ) -> crate::Result<Schedule> {
        let model = self.read().await?;
        let progress = self.rolling_progress().await?;
        let names: Vec<String> = if nodes.is_empty() {
            super::names(&model.cluster)
        } else {
            nodes.to_vec()
        };
        let bandwidth = self.options.expected_bandwidth.max(1.0);
        let secs = |bytes: u64| (bytes as f64 / bandwidth).ceil() as i64;
        let mut out = Schedule::default();
        for node in names {
            if progress.get(&node).is_some_and(|p| p.step == Step::Done) {
                out.nodes.push(ScheduledNode {
                    node,
                    done_before: true,
                    plan: None,
                    secs: 0,
                    steps: Vec::new(),
                    wave: 0,
                    held_back: None,
                });
                continue;
            }
            let goal = Goal::Evacuate {
                nodes: vec![node.clone()],
                options: options.evacuate.clone(),
            };
            let plan = self.plan(&goal).await?;
            let mut steps = Vec::new();
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
                // Counted again below once the waves are known.
                steps.push(String::new());
            }
            out.nodes.push(ScheduledNode {
                secs: secs(plan.bytes),
                node,
                done_before: false,
                plan: Some(plan),
                steps,
                wave: 0,
                held_back: None,
            });
        }
        // Waves, on the cluster as it is now.
        let mut rest: Vec<String> = out
            .nodes
            .iter()
            .filter(|n| !n.done_before)
            .map(|n| n.node.clone())
            .collect();
        let mut number = 0;
        while !rest.is_empty() {
            number += 1;
            let (wave, waits) = self.next_wave(&rest, options).await;
            for n in out.nodes.iter_mut() {
                if wave.contains(&n.node) {
                    n.wave = number;
                }
                if let Some((held, why)) = &waits {
                    if &n.node == held {
                        n.held_back = Some(why.clone());
                    }
                }
            }
            rest.retain(|n| !wave.contains(n));
            if wave.len() > 1 {
                // Out together, the wave's nodes take none of each other's guests: their
                // migrations are those of one plan emptying them all.
                let goal = Goal::Evacuate {
                    nodes: wave.clone(),
                    options: options.evacuate.clone(),
                };
                let together = self.plan(&goal).await?;
                for n in out.nodes.iter_mut().filter(|n| wave.contains(&n.node)) {
                    let mut plan = together.clone();
                    plan.migrations.retain(|m| m.from == n.node);
                    plan.unplaced.retain(|u| u.node == n.node);
                    plan.skipped.retain(|k| k.node == n.node);
                    plan.bytes = plan.migrations.iter().map(|m| m.bytes).sum();
                    n.secs = secs(plan.bytes);
                    n.plan = Some(plan);
                }
            }
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
