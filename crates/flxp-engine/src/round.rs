//! One round of carrying out a plan: the loop that starts migrations as the queue and the limits
//! allow, follows them, drops steps that no longer hold, replans, and stops.
//!
//! Once the queue is done, the round looks again before it ends (`settle.rs`): it waits for
//! migrations in flight that it did not start and that its goal depends on, and plans again for
//! them and for guests that came onto the nodes it empties, each guest once, within the replans
//! allowed.
//!
//! Each migration is followed in its own task (so that reading the cluster for the next start
//! never stalls the polling of running ones); the round itself runs on the caller's task and owns
//! all bookkeeping. Dropping the round's future drops the followers, not the migrations: Proxmox
//! carries them on, and their locks keep any flxp from starting them again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use flxp_core::balance::{Migration, Plan};
use tokio::task::{Id, JoinSet};
use tokio::time::Instant;
use tracing::Instrument;
use tracing::instrument::WithSubscriber;

use crate::execute::{Executor, NoStart, error_chain};
use crate::limits::Slots;
use crate::migrate::{Failure, Landed, MigrateSettings, migrate_polling};
use crate::planning::{Goal, HoldReason};
use crate::progress::Event;
use crate::queue::{Queue, Status};
use crate::report::{Done, Dropped, ExecutionReport, Failed, NotStarted, Replan, Unfinished};
use crate::settle::{self, InFlight};

/// The state of one round.
pub(crate) struct Round<'e> {
    exec: &'e Executor,
    goal: &'e Goal,
    settings: Arc<MigrateSettings>,
    report: ExecutionReport,
    queue: Queue,
    slots: Slots,
    /// Guests the rest of the round leaves alone, and why.
    held: BTreeMap<u32, HoldReason>,
    /// Every guest a migration was started for: never one twice.
    started: BTreeSet<u32>,
    /// Bundles some member of which was started.
    bundles: Vec<Vec<u32>>,
    followers: JoinSet<Result<Landed, Failure>>,
    /// What each follower follows: the queue position and the migration.
    in_flight: HashMap<Id, (usize, Migration)>,
    /// Why the rest must be planned anew, once what runs has ended.
    replan: Option<String>,
    /// Set once the round stops starting migrations: until when running ones are followed.
    drain_until: Option<Instant>,
    /// Every guest a plan of the round named (moved, left in place, fitting nowhere).
    known: BTreeSet<u32>,
    /// Guests the round waited for or planned again for once the queue was done: never twice.
    settled: BTreeSet<u32>,
    /// Migrations in flight that the round did not start and its goal depends on, as its start
    /// found them: once they end, what the plan left behind for them is planned again.
    watched: Vec<InFlight>,
}

impl<'e> Round<'e> {
    pub fn new(exec: &'e Executor, plan: Plan, goal: &'e Goal) -> Self {
        let known = named(&plan);
        Self {
            exec,
            goal,
            settings: Arc::new(exec.settings(goal)),
            report: ExecutionReport::default(),
            queue: Queue::new(plan.migrations),
            slots: Slots::default(),
            held: BTreeMap::new(),
            started: BTreeSet::new(),
            bundles: Vec::new(),
            followers: JoinSet::new(),
            in_flight: HashMap::new(),
            replan: None,
            drain_until: None,
            known,
            settled: BTreeSet::new(),
            watched: Vec::new(),
        }
    }

    /// Runs the round to its end.
    pub async fn run(mut self) -> ExecutionReport {
        let t0 = Instant::now();
        let mut stop = self.exec.stop.clone();
        if self.exec.options.settle {
            self.watched = match self.exec.read().await {
                Ok(model) => {
                    settle::unsettled(&model, self.goal, &BTreeSet::new(), &self.known).in_flight
                }
                // The round's own reads say what is wrong; the end of the queue looks again.
                Err(_) => Vec::new(),
            };
        }
        loop {
            if self.drain_until.is_none() && stop.is_stopped() {
                let why = stop
                    .reason()
                    .unwrap_or_else(|| crate::stop::REQUESTED.into());
                self.stop_starting(why);
            }
            if self.replan.is_none() {
                // Stopping starts nothing new, but a bundle already begun is carried out whole:
                // half an affinity group moved would leave the group split.
                let rest_of_bundles = self.drain_until.is_some();
                self.start_ready(rest_of_bundles).await;
            }
            if self.followers.is_empty() {
                if self.drain_until.is_some() {
                    break;
                }
                // Nothing runs: either the queue is done (its earliest pending migration could
                // always start) or it must be planned anew. A queue done may still leave the
                // goal unmet by what it did not see: migrations in flight, guests arriving.
                let reason = match self.replan.take() {
                    Some(reason) => reason,
                    None => match self.unsettled().await {
                        Some(reason) => reason,
                        None => break,
                    },
                };
                match self.replanned(reason).await {
                    Some(next) => self.queue = next,
                    None => break,
                }
                continue;
            }
            let joined = match self.drain_until {
                Some(deadline) => {
                    match tokio::time::timeout_at(deadline, self.followers.join_next_with_id())
                        .await
                    {
                        Ok(joined) => joined,
                        Err(_) => {
                            self.give_up_following();
                            break;
                        }
                    }
                }
                None => tokio::select! {
                    joined = self.followers.join_next_with_id() => joined,
                    () = stop.stopped() => continue,
                },
            };
            match joined {
                Some(Ok((id, result))) => self.ended(id, result),
                Some(Err(e)) => {
                    self.ended(
                        e.id(),
                        Err(Failure::Unknown(format!(
                            "following the migration broke off: {e}"
                        ))),
                    );
                }
                None => {}
            }
        }
        // What the latest plan still meant to start: the run ended first.
        let why = match &self.report.stopped {
            Some(stopped) => format!("the run stopped early: {stopped}"),
            None => "the run ended before it (its migration budget spent)".to_owned(),
        };
        for m in self.queue.pending() {
            // A queue kept after an empty replan already says so.
            self.report
                .not_started
                .entry(m.vmid)
                .or_insert_with(|| NotStarted {
                    to: m.to.clone(),
                    why: why.clone(),
                });
        }
        self.report.secs = t0.elapsed().as_secs_f64();
        tracing::info!(summary = %self.report.summary(), "round ended");
        self.report
    }

    /// Starts nothing new from now on; running migrations are followed until the drain timeout.
    fn stop_starting(&mut self, why: String) {
        self.report.stopped = Some(why);
        self.drain_until = Some(deadline_after(self.exec.options.drain_timeout));
    }

    /// Starts every migration the queue and limits allow (with `rest_of_bundles`, only members of
    /// bundles already begun), each after a fresh re-check; stops at the first that no longer
    /// holds.
    async fn start_ready(&mut self, rest_of_bundles: bool) {
        let limits = self.exec.options.limits;
        let begun = self.bundles.clone();
        let keep = |m: &Migration| !rest_of_bundles || begun.contains(&m.bundle);
        while let Some(i) = self.queue.next_ready_where(&self.slots, &limits, keep) {
            let m = self.queue.get(i).clone();
            if self.started.contains(&m.vmid) {
                // The core never plans a guest twice and held guests are locked, so this only
                // guards against a bug: never start a second migration of a guest.
                self.queue.set(i, Status::Ended);
                self.drop_step(&m, vec!["already migrated in this round".into()]);
                continue;
            }
            match self.exec.recheck(&m, &self.held, self.goal).await {
                Ok(()) => self.spawn(i, m),
                Err(NoStart::HaPending(why)) => {
                    self.queue.set(i, Status::Ended);
                    self.held.insert(m.vmid, HoldReason::HaPending);
                    self.replan = Some(format!("{why}: not moved again"));
                    self.drop_step(&m, vec![why]);
                    return;
                }
                Err(NoStart::Stale(reasons)) => {
                    let reasons: Vec<String> = reasons.iter().map(ToString::to_string).collect();
                    self.queue.set(i, Status::Ended);
                    self.replan = Some(format!(
                        "step of {} {} → {} no longer holds: {}",
                        m.vmid,
                        m.from,
                        m.to,
                        reasons.join("; ")
                    ));
                    self.drop_step(&m, reasons);
                    return;
                }
                Err(NoStart::Unreadable(e)) => {
                    tracing::error!(error = %e, "cannot read the cluster: stopping the round");
                    self.stop_starting(format!("the cluster cannot be read: {e}"));
                    return;
                }
            }
        }
    }

    /// Starts following a migration in its own task.
    fn spawn(&mut self, i: usize, m: Migration) {
        self.queue.set(i, Status::Running);
        self.slots.take(&m.from, &m.to);
        self.started.insert(m.vmid);
        if !m.bundle.is_empty() && !self.bundles.contains(&m.bundle) {
            self.bundles.push(m.bundle.clone());
        }
        // Booked before the request: the next step's read may see its task first.
        self.exec.cache.expect_move(m.vmid, &m.from, &m.to);
        let api = self.exec.api.clone();
        let board = Arc::clone(&self.exec.cache);
        let progress = Arc::clone(&self.exec.progress);
        let settings = Arc::clone(&self.settings);
        let zone = self.exec.zone.clone();
        let moving = m.clone();
        let follow = async move {
            migrate_polling(&api, &moving, &zone, &settings, progress.as_ref(), &board).await
        };
        // The follower logs in this round's span, to this round's subscriber.
        let handle = self
            .followers
            .spawn(follow.in_current_span().with_current_subscriber());
        self.in_flight.insert(handle.id(), (i, m));
    }

    /// Books a migration that ended.
    fn ended(&mut self, id: Id, result: Result<Landed, Failure>) {
        let Some((i, m)) = self.in_flight.remove(&id) else {
            return;
        };
        self.queue.set(i, Status::Ended);
        self.slots.give(&m.from, &m.to);
        let zone = self.exec.zone.clone();
        match result {
            Ok(landed) => {
                tracing::info!(vmid = m.vmid, from = %m.from, to = %m.to, secs = landed.secs, ha = landed.ha, "migration done");
                self.exec.progress.event(&Event::Done {
                    zone,
                    vmid: m.vmid,
                    from: m.from.clone(),
                    to: m.to.clone(),
                    secs: landed.secs,
                });
                self.held.insert(m.vmid, HoldReason::Moved);
                self.report.done.push(Done {
                    vmid: m.vmid,
                    name: m.name,
                    from: m.from,
                    to: m.to,
                    step: m.step,
                    secs: landed.secs,
                    ha: landed.ha,
                });
            }
            Err(failure) => {
                let error = failure.to_string();
                match &failure {
                    Failure::Failed(_) => {
                        tracing::error!(vmid = m.vmid, from = %m.from, to = %m.to, step = m.step, %error, "migration failed");
                    }
                    Failure::Unknown(_) => {
                        tracing::warn!(vmid = m.vmid, from = %m.from, to = %m.to, step = m.step, %error, "migration outcome unknown");
                    }
                }
                self.exec.progress.event(&Event::Failed {
                    zone,
                    vmid: m.vmid,
                    from: m.from.clone(),
                    to: m.to.clone(),
                    error: error.clone(),
                });
                // Either way the guest is left alone for the rest of the round.
                self.held.insert(m.vmid, HoldReason::Failed);
                if self.replan.is_none() {
                    self.replan = Some(format!("migration of {} to {} failed", m.vmid, m.to));
                }
                let (list, error) = match failure {
                    Failure::Failed(error) => (&mut self.report.failed, error),
                    Failure::Unknown(error) => (&mut self.report.unknown, error),
                };
                list.push(Failed {
                    vmid: m.vmid,
                    name: m.name,
                    from: m.from,
                    to: m.to,
                    step: m.step,
                    error,
                });
            }
        }
    }

    /// The drain timed out: what still runs is reported and no longer followed.
    fn give_up_following(&mut self) {
        for (_, (_, m)) in std::mem::take(&mut self.in_flight) {
            tracing::warn!(vmid = m.vmid, from = %m.from, to = %m.to, "still running at the end of the drain; Proxmox carries it on");
            self.report.unfinished.push(Unfinished {
                vmid: m.vmid,
                from: m.from,
                to: m.to,
            });
        }
        // Dropping the followers (with the round) ends the following, not the migrations.
        self.followers.abort_all();
    }

    fn drop_step(&mut self, m: &Migration, reasons: Vec<String>) {
        let reason = reasons.join("; ");
        tracing::warn!(vmid = m.vmid, from = %m.from, to = %m.to, reasons = %reason, "planned migration no longer holds: skipped");
        self.exec.progress.event(&Event::Skipped {
            zone: self.exec.zone.clone(),
            vmid: m.vmid,
            reason,
        });
        self.report.skipped.push(Dropped {
            vmid: m.vmid,
            name: m.name.clone(),
            from: m.from.clone(),
            to: m.to.clone(),
            step: m.step,
            reasons,
        });
    }

    /// What is left of a balancing round's migration budget (`None`: no budget).
    fn budget(&self) -> Option<usize> {
        match self.goal {
            Goal::Balance(o) => Some(o.max_migrations.saturating_sub(self.started.len())),
            Goal::Evacuate { .. } | Goal::ReturnHome { .. } => None,
        }
    }

    /// Once the queue is done: waits for the migrations in flight that the round did not start
    /// and that its goal depends on, and finds running guests that came onto the nodes it
    /// empties after its plans ([`settle`]); why the rest must be planned again, or `None` when
    /// the round may end. Each guest is waited or planned for once.
    async fn unsettled(&mut self) -> Option<String> {
        if !self.exec.options.settle || self.exec.stop.is_stopped() || self.budget() == Some(0) {
            return None;
        }
        let mut skip = self.started.clone();
        skip.extend(&self.settled);
        let found = match self.exec.read().await {
            Ok(model) => settle::unsettled(&model, self.goal, &skip, &self.known),
            Err(e) => {
                let e = error_chain(&e);
                tracing::warn!(error = %e, "cannot read the cluster for migrations in flight: the round ends");
                return None;
            }
        };
        // Migrations the start found in flight that ended meanwhile: the plan left their
        // partners (or the guest itself) behind for them.
        let landed: Vec<InFlight> = self
            .watched
            .iter()
            .filter(|w| !skip.contains(&w.vmid))
            .filter(|w| !found.in_flight.iter().any(|f| f.vmid == w.vmid))
            .cloned()
            .collect();
        self.settled.extend(found.in_flight.iter().map(|f| f.vmid));
        self.settled.extend(found.arrived.iter().map(|a| a.vmid));
        self.settled.extend(landed.iter().map(|l| l.vmid));
        let max = self.exec.options.max_replans as usize;
        if self.report.replans.len() >= max {
            // No replan is left to act on what is found: each guest says so.
            for f in &found.in_flight {
                let why = format!(
                    "{}, not started by this run, was in flight when the run had no replan \
                     left (max-replans {max}) to move the guests that depend on it",
                    migration_of(f)
                );
                self.report.left_alone.insert(f.vmid, why);
            }
            for a in &found.arrived {
                let when = if self.watched.iter().any(|w| w.vmid == a.vmid) {
                    "its migration there, in flight when the run began, landed"
                } else {
                    "it came there"
                };
                let why = format!(
                    "{when} after the run's last plan, with no replan left (max-replans {max})"
                );
                self.report.left_alone.insert(a.vmid, why);
            }
            return None;
        }
        if !found.in_flight.is_empty() {
            let waiting = settle::list(&found.in_flight);
            tracing::info!(migrations = %waiting, "waiting for migrations in flight that this run did not start, to plan on the settled cluster");
            let still = self.wait_for(&found.in_flight).await;
            let secs = self.exec.options.timeout.as_secs();
            for f in &still {
                let why = match self.exec.stop.reason() {
                    Some(stopped) => format!(
                        "{}, not started by this run, was still in flight when the run \
                         stopped ({stopped})",
                        migration_of(f)
                    ),
                    None => format!(
                        "{}, not started by this run, was still in flight when the run gave up \
                         waiting for it after {secs} s (timeout-secs)",
                        migration_of(f)
                    ),
                };
                tracing::warn!(vmid = f.vmid, %why, "migration in flight not waited for any longer");
                self.report.left_alone.insert(f.vmid, why);
            }
            let ended: Vec<&InFlight> = found
                .in_flight
                .iter()
                .filter(|f| !still.contains(f))
                .chain(&landed)
                .collect();
            if ended.is_empty() {
                // The cluster is as the last plan saw it: planning again changes nothing.
                return None;
            }
            return Some(format!(
                "the migration of {}, in flight and not started by this run, ended",
                settle::list(&ended)
            ));
        }
        if !landed.is_empty() {
            return Some(format!(
                "the migration of {}, in flight and not started by this run, ended",
                settle::list(&landed)
            ));
        }
        if !found.arrived.is_empty() {
            let nodes: BTreeSet<&str> = found.arrived.iter().map(|a| a.node.as_str()).collect();
            let vmids: Vec<u32> = found.arrived.iter().map(|a| a.vmid).collect();
            return Some(format!(
                "{} came onto {} after the plan was made",
                settle::list(&vmids),
                nodes.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        None
    }

    /// Waits until none of `moves` is in flight any more, reading the cluster every poll, up to
    /// the migration timeout (`timeout-secs`, as one of the round's own is followed) or a stop
    /// request; those still in flight then.
    async fn wait_for(&self, moves: &[InFlight]) -> Vec<InFlight> {
        let deadline = deadline_after(self.exec.options.timeout);
        let mut stop = self.exec.stop.clone();
        let mut left = moves.to_vec();
        while !left.is_empty() && !stop.is_stopped() && Instant::now() < deadline {
            tokio::select! {
                () = tokio::time::sleep(self.exec.options.poll) => {}
                () = stop.stopped() => break,
            }
            match self.exec.read().await {
                Ok(model) => left.retain(|f| {
                    model
                        .cluster
                        .guest_idx(f.vmid)
                        .is_some_and(|g| settle::in_flight(&model, model.cluster.guest(g)))
                }),
                Err(e) => {
                    tracing::warn!(error = %error_chain(&e), "cannot read the cluster while waiting for migrations in flight");
                }
            }
        }
        left
    }

    /// Plans the rest of the round on the fresh cluster; `None` ends the round.
    async fn replanned(&mut self, reason: String) -> Option<Queue> {
        let max = self.exec.options.max_replans;
        if self.report.replans.len() >= max as usize {
            tracing::warn!(max, "too many replans: ending the round");
            self.report.stopped = Some(format!(
                "{} replans in this round (max-replans): the cluster keeps changing",
                self.report.replans.len()
            ));
            return None;
        }
        let budget = self.budget();
        if budget == Some(0) {
            tracing::info!(%reason, "migration budget spent: no replan");
            return None;
        }
        let holds = replan_holds(&self.held, &self.bundles);
        let plan = match self.exec.replan(&holds, self.goal, budget).await {
            Ok(plan) => plan,
            Err(e) => {
                let e = error_chain(&e);
                tracing::error!(error = %e, "replanning failed: stopping the round");
                self.report.stopped = Some(format!("replanning failed: {e}"));
                return None;
            }
        };
        tracing::info!(%reason, migrations = plan.migrations.len(), summary = %plan.summary, "replanned");
        self.exec.progress.event(&Event::Replanned {
            zone: self.exec.zone.clone(),
            reason: reason.clone(),
            migrations: plan.migrations.len(),
        });
        // What the plan replaced still meant to start, and the new one does not move.
        for m in self.queue.pending() {
            if !plan.migrations.iter().any(|n| n.vmid == m.vmid) {
                let why = format!(
                    "the rest of the run was planned again ({reason}) and the new plan does not \
                     move it"
                );
                let to = m.to.clone();
                self.report
                    .not_started
                    .insert(m.vmid, NotStarted { to, why });
            }
        }
        for m in &plan.migrations {
            // Planned again: what happens to it now is the new plan's.
            self.report.not_started.remove(&m.vmid);
            self.report.left_alone.remove(&m.vmid);
        }
        // The newest word on each guest the new plan leaves where it is.
        for s in &plan.skipped {
            self.report.left_alone.insert(s.vmid, s.reason.clone());
        }
        for u in &plan.unplaced {
            let why = format!("fits on no node: {}", u.reason);
            self.report.left_alone.insert(u.vmid, why);
        }
        self.known.extend(named(&plan));
        self.report.replans.push(Replan {
            reason,
            migrations: plan.migrations.len(),
            summary: plan.summary.clone(),
        });
        (!plan.migrations.is_empty()).then(|| Queue::new(plan.migrations))
    }
}

/// Every guest a plan names: moved, left in place, or fitting nowhere.
pub(crate) fn named(plan: &Plan) -> BTreeSet<u32> {
    let moved = plan.migrations.iter().map(|m| m.vmid);
    let skipped = plan.skipped.iter().map(|s| s.vmid);
    moved
        .chain(skipped)
        .chain(plan.unplaced.iter().map(|u| u.vmid))
        .collect()
}

/// The guests a replan leaves alone: those the round holds, except the moved members of a bundle
/// that did not all move, so that the planner may bring the split group back together.
pub(crate) fn replan_holds(
    held: &BTreeMap<u32, HoldReason>,
    bundles: &[Vec<u32>],
) -> BTreeMap<u32, HoldReason> {
    let mut holds = held.clone();
    for bundle in bundles {
        let whole = bundle
            .iter()
            .all(|v| held.get(v) == Some(&HoldReason::Moved));
        if !whole {
            for v in bundle {
                if holds.get(v) == Some(&HoldReason::Moved) {
                    holds.remove(v);
                }
            }
        }
    }
    holds
}

/// `its migration to pve1` (or `its migration` when its target is not known).
fn migration_of(f: &InFlight) -> String {
    match &f.to {
        Some(to) => format!("its migration to {to}"),
        None => "its migration".to_owned(),
    }
}

/// The instant `after` from now; a timeout too large for the clock (a config's "forever") is
/// capped at a century instead of overflowing `Instant`, which panics.
fn deadline_after(after: std::time::Duration) -> Instant {
    const CENTURY: std::time::Duration = std::time::Duration::from_secs(100 * 365 * 86_400);
    let now = Instant::now();
    now.checked_add(after.min(CENTURY)).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drain_timeout_of_u64_max_seconds_is_a_century_not_a_panic() {
        let now = Instant::now();
        let d = deadline_after(std::time::Duration::from_secs(u64::MAX));
        assert!(d.duration_since(now) >= std::time::Duration::from_secs(99 * 365 * 86_400));
        let d = deadline_after(std::time::Duration::from_secs(600));
        assert!(d.duration_since(now) >= std::time::Duration::from_secs(600));
    }
}
