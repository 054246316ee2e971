//! The daemon's power saving (`[consolidate] enabled = true`): consolidate when the zone's load
//! stays low, wake a node flxp switched off when it rises or when room is needed.
//!
//! Each round, after any evacuation, the zone's load ([`flxp_core::consolidate::load`]: the larger
//! of the memory and CPU shares in use on the nodes in service) is compared with two levels:
//!
//! - below `consolidate-below` for `min-interval` (held in memory, so a restart starts over), and
//!   no power change for `min-interval`: plan a consolidation that stops halfway between the two
//!   levels, mark the freed nodes ([`crate::power_mark`] `off`, then `flxp.maintenance`), empty
//!   them with the executor (re-checks as always) and, with `shutdown`, switch them off;
//! - above `wake-above` and no power change for `min-interval`, or room needed now (an evacuation
//!   or a VM creation found none): wake one node marked `off` (Wake-on-LAN, mark `waking`).
//!
//! Transitions are finished from the marks, whoever began them: a node marked `off`, online and in
//! maintenance is emptied (stopped guests too) and switched off; a node marked `waking` that is
//! online gets its maintenance mark cleared, its power mark removed, and a rebalance moves guests
//! onto it, without the per-guest cooldown ([`crate::consolidate::after_wake`]). One change per
//! round; the next round measures anew.
//!
//! The decisions are pure functions of the read ([`flxp_core::consolidate::power`]); this module
//! carries them out: API calls, Wake-on-LAN, planning and running the consolidation.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use flxp_core::cluster::NodeIdx;
use flxp_core::consolidate::power::{
    self as decide, Change, Finishing, Levels, Mark, MarkState, Timing,
};
use flxp_core::consolidate::{ConsolidateOptions, Consolidation, load};
use serde::Serialize;

use super::{Daemon, RoundReport, ZoneState};
use crate::blocking;
use crate::consolidate::plan_on_blocking_thread;
use crate::error::Result;
use crate::execute::{Executor, error_chain};
use crate::planning::Model;
use crate::power_mark::{self, PowerMark, PowerState};
use crate::report::ExecutionReport;

/// The daemon's power saving (the `[consolidate]` table with `enabled = true`).
#[derive(Debug, Clone, PartialEq)]
pub struct AutoConsolidate {
    /// The consolidation's limits.
    pub options: ConsolidateOptions,
    /// Switch emptied nodes off (else they stay online, empty and in maintenance).
    pub shutdown: bool,
    /// Consolidate when the zone's load stays below this share.
    pub consolidate_below: f64,
    /// Wake a node when the zone's load is above this share.
    pub wake_above: f64,
    /// Least time between two power changes, and how long the load must stay low first.
    pub min_interval: Duration,
    /// How long a woken node may take to come online before Wake-on-LAN is sent again.
    pub wake_timeout: Duration,
}

impl Default for AutoConsolidate {
    fn default() -> Self {
        Self {
            options: ConsolidateOptions::default(),
            shutdown: false,
            consolidate_below: 0.4,
            wake_above: 0.7,
            min_interval: Duration::from_secs(1800),
            wake_timeout: Duration::from_secs(900),
        }
    }
}

impl AutoConsolidate {
    /// The highest load a consolidation may leave: halfway between the two levels, so that the
    /// packed zone is not at once above `wake-above`.
    pub fn max_load(&self) -> f64 {
        (self.consolidate_below + self.wake_above) / 2.0
    }

    /// The levels the pure power decisions read.
    fn levels(&self) -> Levels {
        Levels {
            shutdown: self.shutdown,
            consolidate_below: self.consolidate_below,
            wake_above: self.wake_above,
            min_interval_secs: self.min_interval.as_secs() as i64,
            wake_timeout_secs: self.wake_timeout.as_secs() as i64,
        }
    }
}

/// The marks as the pure power decisions read them.
fn core_marks(marks: &[PowerMark]) -> Vec<Mark> {
    marks
        .iter()
        .map(|m| Mark {
            node: m.node.clone(),
            state: match m.state {
                PowerState::Off => MarkState::Off,
                PowerState::Waking => MarkState::Waking,
            },
            since: m.since,
        })
        .collect()
}

/// What the power saving did in a round.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PowerReport {
    /// The zone's load on the nodes in service (0..=1).
    pub load: f64,
    /// What was decided, in a sentence.
    pub decision: String,
    /// The consolidation planned, with why each kept node stays.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consolidation: Option<Consolidation>,
    /// What emptying nodes did (a consolidation, or finishing one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<ExecutionReport>,
    /// Nodes switched off.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub switched_off: Vec<String>,
    /// Nodes sent Wake-on-LAN.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub woken: Vec<String>,
    /// Nodes back in service (mark cleared).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub back: Vec<String>,
    /// Nodes a consolidation would free once it may run: balancing waits rather than fill them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub to_free: Vec<String>,
    /// Nodes being freed that stay on for now, each as `node: why` (a guest left on it, a
    /// migration that waits for the cooldown after failing).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub still_on: Vec<String>,
    /// What failed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// Gives a node a consolidation marked back to service: maintenance mark, then power mark.
async fn give_back(
    executor: &Executor,
    node: &str,
) -> std::result::Result<(), crate::consolidate::PowerError> {
    crate::maintenance::set(executor.api(), node, false).await?;
    executor.clear_power_mark(node).await?;
    Ok(())
}

/// Nodes in service: online, not in maintenance, not lost by HA.
fn in_service(model: &Model) -> Vec<NodeIdx> {
    decide::in_service(&model.cluster)
}

/// Whether this process asked `node` to shut down less than `wake-timeout` ago (it may still be
/// going down: not asked again, which would re-date its mark).
fn going_down(z: &ZoneState, auto: &AutoConsolidate, node: &str, now: i64) -> bool {
    z.shutting
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(node)
        .is_some_and(|&t| now - t < auto.wake_timeout.as_secs() as i64)
}

/// Takes out of a consolidation being finished the migrations of guests that migrated (or
/// tried to: a failed task counts) less than `cooldown_secs` ago, so that a guest whose
/// migration keeps failing is retried once per cooldown, not every round; returns, for each node
/// left holding such a guest, `node: why`. Proxmox's task history is the memory, as for the
/// balance cooldown.
fn hold_back(
    planned: &mut Consolidation,
    cluster: &flxp_core::cluster::Cluster,
    now: i64,
    cooldown_secs: i64,
) -> Vec<String> {
    let recent = |vmid: u32| {
        cluster
            .tasks
            .last_migration(vmid)
            .map(|t| now - t)
            .filter(|&ago| ago < cooldown_secs)
    };
    let held: Vec<(u32, i64)> = planned
        .plan
        .migrations
        .iter()
        .filter_map(|m| recent(m.vmid).map(|ago| (m.vmid, ago)))
        .collect();
    if held.is_empty() {
        return Vec::new();
    }
    let waits = |m: &flxp_core::balance::Migration| {
        held.iter()
            .any(|&(v, _)| m.vmid == v || m.bundle.contains(&v))
    };
    let mut still_on: Vec<String> = Vec::new();
    for m in planned.plan.migrations.iter().filter(|m| waits(m)) {
        let ago = held
            .iter()
            .find(|&&(v, _)| v == m.vmid)
            .map(|&(_, ago)| format!("its last migration was {} s ago", ago.max(0)))
            .unwrap_or_else(|| "a guest moving with it migrated lately".to_owned());
        still_on.push(format!(
            "{}: guest {} waits: {ago}, retried after cooldown-secs = {cooldown_secs}",
            m.from, m.vmid
        ));
    }
    planned.plan.migrations.retain(|m| !waits(m));
    planned.plan.bytes = planned.plan.migrations.iter().map(|m| m.bytes).sum();
    still_on
}

/// Requests for room (an evacuation or a VM creation found none), counted, so that a round
/// answers only those made before it read the cluster: one asked while a round is already past
/// its read (and its power marks) is left for the next round, not dropped unanswered.
#[derive(Debug, Default)]
pub(super) struct RoomWants {
    asked: AtomicU64,
    answered: AtomicU64,
}

impl RoomWants {
    /// Asks for room.
    pub(super) fn ask(&self) -> u64 {
        self.asked.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// How many requests there are so far; a round reads it before it reads the cluster.
    pub(super) fn seen(&self) -> u64 {
        self.asked.load(Ordering::Relaxed)
    }

    /// Whether requests up to `seen` are not answered yet; they count as answered from now.
    fn take(&self, seen: u64) -> bool {
        self.answered.fetch_max(seen, Ordering::Relaxed) < seen
    }
}

impl Daemon {
    /// The power step of a round; `Ok(true)` when it changed the zone (the round ends there).
    pub(super) async fn power(
        &self,
        z: &ZoneState,
        executor: &Executor,
        model: &Arc<Model>,
        marks: &[PowerMark],
        room_seen: u64,
        report: &mut RoundReport,
    ) -> Result<bool> {
        let Some(auto) = self.inner.parts.options.power.clone() else {
            return Ok(false);
        };
        let now = report.time;
        let c = &model.cluster;
        let mut pr = PowerReport {
            load: load(c, &model.state, &in_service(model)),
            ..PowerReport::default()
        };
        let api = executor.api();

        // Finish what earlier rounds (or an interrupted flxp) began.
        let levels = auto.levels();
        let core = core_marks(marks);
        let going: std::collections::BTreeSet<String> = marks
            .iter()
            .filter(|m| going_down(z, &auto, &m.node, now))
            .map(|m| m.node.clone())
            .collect();
        let found = decide::finish(c, &model.state, &core, now, &levels, &going);
        for f in &found.finishing {
            match f {
                Finishing::BackInService(node) => {
                    let back = async {
                        crate::maintenance::set(api, node, false).await?;
                        executor.clear_power_mark(node).await?;
                        Ok::<_, crate::consolidate::PowerError>(())
                    };
                    match back.await {
                        Ok(()) => pr.back.push(node.clone()),
                        Err(e) => pr.errors.push(error_chain(&e)),
                    }
                }
                Finishing::WakeAgain { node, late_secs } => {
                    pr.errors.push(format!(
                        "{node} is not online {late_secs} s after Wake-on-LAN: sending it again"
                    ));
                    let holder = marks
                        .iter()
                        .find(|m| &m.node == node)
                        .map(|m| m.holder.clone())
                        .unwrap_or_default();
                    // Re-dated first, so that the next try (and warning) comes one
                    // wake-timeout later, not every round.
                    let redate =
                        power_mark::set(api, &holder, node, Some((PowerState::Waking, now))).await;
                    if let Err(e) = redate {
                        pr.errors.push(error_chain(&e));
                    }
                    match executor.wake(node).await {
                        Ok(_) => pr.woken.push(node.clone()),
                        Err(e) => pr.errors.push(error_chain(&e)),
                    }
                }
                Finishing::ClearStaleMark(node) => {
                    // An admin put it back in service: the mark is stale.
                    if let Err(e) = executor.clear_power_mark(node).await {
                        pr.errors.push(error_chain(&e));
                    }
                }
                Finishing::WentDown(node) => {
                    z.shutting
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(node);
                }
            }
        }
        let pending = &found.pending;
        if !pr.back.is_empty() {
            pr.decision = format!("{} back in service: rebalancing", pr.back.join(", "));
            *z.last_power.lock().unwrap_or_else(|p| p.into_inner()) = Some(now);
            if !self.inner.parts.options.rebalance {
                report.power = Some(pr);
                return Ok(true);
            }
            let goal = crate::consolidate::after_wake(&self.inner.parts.options.balance);
            let fresh = Arc::new(executor.read().await?);
            let plan = blocking::plan(fresh, Arc::clone(&z.placer), goal.clone(), None).await?;
            report.balance = Some(self.carry_out_plan(z, executor, plan, &goal).await?);
            report.power = Some(pr);
            return Ok(true);
        }
        if !pending.is_empty() {
            self.finish_consolidation(z, executor, model, pending, &auto, now, &mut pr)
                .await?;
            report.power = Some(pr);
            return Ok(true);
        }

        // Decide.
        let timing = Timing {
            last_power: *z.last_power.lock().unwrap_or_else(|p| p.into_inner()),
            low_since: *z.low_since.lock().unwrap_or_else(|p| p.into_inner()),
            room: z.room.take(room_seen),
        };
        let decision = decide::decide(c, &model.state, &core, &found, now, &levels, timing);
        *z.low_since.lock().unwrap_or_else(|p| p.into_inner()) = decision.low_since;
        match decision.change {
            Change::Wake { node, why } => {
                self.wake_node(z, executor, &node, marks, now, &mut pr)
                    .await;
                pr.decision = format!("wake {node}: {why}");
                report.power = Some(pr);
                // Look again soon: the node is back in service once it is online.
                report.next_in_secs = self
                    .inner
                    .parts
                    .options
                    .retry_after
                    .min(self.inner.parts.options.interval)
                    .as_secs_f64();
                Ok(true)
            }
            Change::Consolidate => self.consolidate(z, executor, &auto, now, pr, report).await,
            Change::Nothing => {
                pr.decision = decision.sentence;
                if decision.preview {
                    pr.to_free = self.would_free(z, executor, model, marks, &auto).await;
                }
                report.power = Some(pr);
                Ok(false)
            }
        }
    }

    /// The consolidation's limits in auto mode: the load cap, and the balance cooldown (guests
    /// moved lately are not moved again at once).
    fn consolidate_options(&self, auto: &AutoConsolidate) -> ConsolidateOptions {
        ConsolidateOptions {
            max_load: Some(auto.max_load()),
            cooldown_secs: self.inner.parts.options.balance.cooldown_secs,
            ..auto.options.clone()
        }
    }

    /// The nodes (not yet marked) a consolidation planned on this read would free; none when it
    /// cannot be planned (balancing then goes on as usual). Planned as the consolidation itself
    /// will be: the executor's kept nodes (the lease's) are never freed.
    async fn would_free(
        &self,
        z: &ZoneState,
        executor: &Executor,
        model: &Arc<Model>,
        marks: &[PowerMark],
        auto: &AutoConsolidate,
    ) -> Vec<String> {
        let options = executor.consolidation_options(&self.consolidate_options(auto), marks);
        let planned = plan_on_blocking_thread(
            Arc::clone(model),
            Arc::clone(&z.placer),
            options,
            self.inner.parts.options.evacuation.clone(),
            None,
        )
        .await;
        match planned {
            Ok(Ok(c)) => c
                .freed
                .into_iter()
                .filter(|f| !f.resumed)
                .map(|f| f.node)
                .collect(),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot plan a consolidation");
                Vec::new()
            }
            Err(e) => {
                tracing::warn!(error = %error_chain(&e), "cannot plan a consolidation");
                Vec::new()
            }
        }
    }

    /// Sends Wake-on-LAN to a node marked `off` (or, when it is online already, puts it back in
    /// service at once) after marking it `waking`.
    async fn wake_node(
        &self,
        z: &ZoneState,
        executor: &Executor,
        node: &str,
        marks: &[PowerMark],
        now: i64,
        pr: &mut PowerReport,
    ) {
        let holder = marks
            .iter()
            .find(|m| m.node == node)
            .map(|m| m.holder.clone())
            .unwrap_or_default();
        *z.last_power.lock().unwrap_or_else(|p| p.into_inner()) = Some(now);
        let mark = power_mark::set(
            executor.api(),
            &holder,
            node,
            Some((PowerState::Waking, now)),
        )
        .await;
        if let Err(e) = mark {
            pr.errors.push(error_chain(&e));
            return;
        }
        match executor.wake(node).await {
            Ok(_) => pr.woken.push(node.to_owned()),
            Err(e) => pr.errors.push(error_chain(&e)),
        }
    }

    /// Finishes a consolidation that was begun: plans it again with the marked nodes first (a
    /// node whose finishing would now break a limit goes back in service), empties them, then
    /// switches the empty ones off.
    #[allow(clippy::too_many_arguments)]
    async fn finish_consolidation(
        &self,
        z: &ZoneState,
        executor: &Executor,
        model: &Model,
        pending: &[NodeIdx],
        auto: &AutoConsolidate,
        now: i64,
        pr: &mut PowerReport,
    ) -> Result<()> {
        let c = &model.cluster;
        let names: Vec<String> = pending.iter().map(|&n| c.node(n).name.clone()).collect();
        // The load as it would be with them back in service: above consolidate-below, no node
        // goes off (a consolidation would not start now), and they are needed back.
        let with_them: Vec<NodeIdx> = in_service(model)
            .into_iter()
            .chain(pending.iter().copied())
            .collect();
        let whole = load(c, &model.state, &with_them);
        if whole > auto.consolidate_below {
            for node in &names {
                match give_back(executor, node).await {
                    Ok(()) => pr.back.push(node.clone()),
                    Err(e) => pr.errors.push(error_chain(&e)),
                }
            }
            *z.last_power.lock().unwrap_or_else(|p| p.into_inner()) = Some(now);
            pr.decision = format!(
                "load {:.0}% (with {}) is above consolidate-below {:.0}%: give up freeing them, \
                 back in service",
                100.0 * whole,
                names.join(", "),
                100.0 * auto.consolidate_below
            );
            return Ok(());
        }
        // Planned again even when they are empty: finishing must still keep every limit. Only
        // the marked nodes: a new consolidation waits for its own turn (and min-interval).
        let options = ConsolidateOptions {
            finish_only: true,
            ..self.consolidate_options(auto)
        };
        let evacuation = &self.inner.parts.options.evacuation;
        let mut planned = executor.plan_consolidation(&options, evacuation).await?;
        let cooldown = self.inner.parts.options.balance.cooldown_secs;
        pr.still_on = hold_back(&mut planned, c, now, cooldown);
        let freed = planned.freed_names();
        for node in names.iter().filter(|n| !freed.contains(n)) {
            match give_back(executor, node).await {
                Ok(()) => pr.back.push(node.clone()),
                Err(e) => pr.errors.push(error_chain(&e)),
            }
        }
        pr.decision = if pr.back.is_empty() {
            format!("finish the consolidation: {}", planned.summary)
        } else {
            format!(
                "give up freeing {} (a limit would break), back in service; {}",
                pr.back.join(", "),
                planned.summary
            )
        };
        if freed.is_empty() {
            pr.consolidation = Some(planned);
            return Ok(());
        }
        self.still_holding(z)?;
        self.carry_out(z, executor, planned, auto, now, pr).await;
        Ok(())
    }

    /// Marks the nodes `planned` frees, empties them and, when configured, switches them off;
    /// the plan goes into the report whatever happened.
    async fn carry_out(
        &self,
        z: &ZoneState,
        executor: &Executor,
        planned: Consolidation,
        auto: &AutoConsolidate,
        now: i64,
        pr: &mut PowerReport,
    ) {
        if let Err(e) = executor.mark_freed(&planned, now).await {
            pr.errors.push(error_chain(&e));
            pr.consolidation = Some(planned);
            return;
        }
        let goal = crate::consolidate::goal(&planned, &self.inner.parts.options.evacuation);
        let clean = if planned.plan.migrations.is_empty() {
            true
        } else {
            let r = executor.execute(planned.plan.clone(), &goal).await;
            let clean = r.is_clean();
            pr.execution = Some(r);
            clean
        };
        // Each freed node on its own: one that is empty goes off even when another's guest
        // failed to move (the shutdown re-checks on a fresh read that it is empty).
        if auto.shutdown {
            self.switch_off(z, executor, &planned.freed_names(), now, pr)
                .await;
        }
        if !clean || !pr.still_on.is_empty() {
            tracing::info!(still_on = ?pr.still_on, "freed nodes left on");
        }
        if !pr.still_on.is_empty() {
            pr.decision = format!("{}; still on: {}", pr.decision, pr.still_on.join("; "));
        }
        pr.consolidation = Some(planned);
    }

    /// Switches emptied nodes off, each after its own fresh check; the power mark then says
    /// `since` now, so `min-interval` runs from the shutdown (a resumed one too).
    async fn switch_off(
        &self,
        z: &ZoneState,
        executor: &Executor,
        nodes: &[String],
        now: i64,
        pr: &mut PowerReport,
    ) {
        for node in nodes {
            let prefix = format!("{node}: ");
            if pr.still_on.iter().any(|s| s.starts_with(&prefix)) {
                // A guest of it waits: it cannot be empty, and it says so already.
                continue;
            }
            if let Some(auto) = &self.inner.parts.options.power {
                if going_down(z, auto, node, now) {
                    continue;
                }
            }
            let outcome = executor.shut_down_if_empty(node).await;
            if let Err(e @ crate::consolidate::PowerError::Raced { .. }) = &outcome {
                // Off, but a guest was landing: counted as switched off, and said.
                pr.errors.push(error_chain(e));
            }
            match outcome {
                Ok(()) | Err(crate::consolidate::PowerError::Raced { .. }) => {
                    // The round began before the migrations: the shutdown is dated now.
                    let at = executor.now().max(now);
                    pr.switched_off.push(node.clone());
                    *z.last_power.lock().unwrap_or_else(|p| p.into_inner()) = Some(at);
                    z.shutting
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(node.clone(), at);
                    if let Err(e) = executor.stamp_power_mark(node, at).await {
                        pr.errors.push(error_chain(&e));
                    }
                }
                Err(crate::consolidate::PowerError::Refused { reason, .. }) => {
                    pr.still_on
                        .push(format!("{prefix}not switched off: {reason}"));
                }
                Err(e) => pr.errors.push(error_chain(&e)),
            }
        }
    }

    /// Plans a consolidation and carries it out: marks, empties, switches off.
    async fn consolidate(
        &self,
        z: &ZoneState,
        executor: &Executor,
        auto: &AutoConsolidate,
        now: i64,
        mut pr: PowerReport,
        report: &mut RoundReport,
    ) -> Result<bool> {
        let options = self.consolidate_options(auto);
        let evacuation = &self.inner.parts.options.evacuation;
        let planned = executor.plan_consolidation(&options, evacuation).await?;
        let freed = planned.freed_names();
        if freed.is_empty() {
            pr.decision = format!(
                "load {:.0}% is below consolidate-below {:.0}%, but no node can be freed",
                100.0 * pr.load,
                100.0 * auto.consolidate_below
            );
            pr.consolidation = Some(planned);
            report.power = Some(pr);
            return Ok(false);
        }
        pr.decision = format!(
            "load {:.0}% is below consolidate-below {:.0}%: {}",
            100.0 * pr.load,
            100.0 * auto.consolidate_below,
            planned.summary
        );
        self.still_holding(z)?;
        *z.last_power.lock().unwrap_or_else(|p| p.into_inner()) = Some(now);
        *z.low_since.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.carry_out(z, executor, planned, auto, now, &mut pr)
            .await;
        report.power = Some(pr);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::RoomWants;

    /// A creation that finds no room while a round is past its read is answered by the next
    /// round, which reads the node switched off meanwhile: the first does not drop it.
    #[test]
    fn a_request_for_room_after_a_rounds_read_waits_for_the_next_round() {
        let room = RoomWants::default();
        assert!(!room.take(room.seen()), "nothing asked");
        let round1 = room.seen();
        room.ask();
        assert!(!room.take(round1), "asked after round 1 read the cluster");
        let round2 = room.seen();
        assert!(room.take(round2), "round 2 answers it");
        assert!(!room.take(room.seen()), "answered once");
        // Asked during a round, from that round's own read (an evacuation): answered at once.
        let seen = room.ask();
        assert!(room.take(seen));
    }
}
