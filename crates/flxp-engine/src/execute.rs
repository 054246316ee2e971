//! Carrying out a plan in one zone, safely, against a world that changes meanwhile.
//!
//! Before each migration the cluster is read again and the step re-checked by the core
//! (`check_step`) on that fresh state: the guest must still be where the plan has it, movable (not
//! locked, no migration of it running) and the target must still pass every placement filter. If
//! it does not hold, or a migration fails, the executor starts nothing new, lets what runs end,
//! and plans the rest of the round anew on the fresh cluster, with the guests that failed or moved
//! already in this round left alone and what is left of the migration budget. Migrations start in
//! the order `queue.rs` allows, within the [`Limits`]. A stop request ends the round the same way:
//! nothing new starts, running migrations are followed until they end or the drain timeout passes.
//!
//! The executor keeps nothing beyond the round: a restarted flxp sees migrations in flight in
//! Proxmox's locks and task list, which the core never moves.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use flxp_core::balance::{Migration, Plan, check_step};
use flxp_core::placement::Placer;
use flxp_core::{Overrides, Snapshot};
use flxp_pve::PveApi;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument;
use tracing::instrument::WithSubscriber;

use crate::collect::collect_snapshot;
use crate::error::Result;
use crate::limits::{Limits, Slots};
use crate::migrate::{Failure, Landed, MigrateSettings, migrate};
use crate::planning::{self, Goal, Hold, Model};
use crate::progress::{Event, NoProgress, Progress};
use crate::queue::{Queue, Status};
use crate::report::{Done, Dropped, ExecutionReport, Failed, Replan, Unfinished};
use crate::stop::Stop;

/// "Now" in epoch seconds, for snapshots (cooldowns are measured against it).
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
            .unwrap_or_default()
    })
}

/// How plans are carried out (the `[migration]` config table).
#[derive(Debug, Clone, PartialEq)]
pub struct ExecuteOptions {
    /// Migrations at once in the zone, into and out of one node.
    pub limits: Limits,
    /// Pause between task polls.
    pub poll: Duration,
    /// Give up following one migration after this long.
    pub timeout: Duration,
    /// Whether `with-local-disks=1` may be sent when a running VM has local disks.
    pub with_local_disks: bool,
    /// Most replans in one round (a world that keeps changing ends the round instead).
    pub max_replans: u32,
    /// After a stop request, how long running migrations are still followed.
    pub drain_timeout: Duration,
    /// Bytes per second assumed when progress is guessed from elapsed time.
    pub expected_bandwidth: f64,
}

impl Default for ExecuteOptions {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            poll: Duration::from_secs(2),
            timeout: Duration::from_secs(3600),
            with_local_disks: true,
            max_replans: 10,
            drain_timeout: Duration::from_secs(600),
            expected_bandwidth: (1u64 << 30) as f64,
        }
    }
}

/// Carries out plans in one zone; cheap to clone.
#[derive(Clone)]
pub struct Executor {
    zone: String,
    api: Arc<dyn PveApi>,
    placer: Arc<Placer>,
    overrides: Overrides,
    options: ExecuteOptions,
    progress: Arc<dyn Progress>,
    clock: Clock,
    stop: Stop,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("zone", &self.zone)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// Why a migration could not start.
enum NoStart {
    /// The cluster could not be read or used: the round stops.
    Unreadable(String),
    /// The step no longer holds: replan.
    Stale(Vec<String>),
    /// Proxmox HA is about to move or is moving the guest: leave it alone, replan.
    HaPending(String),
}

/// A migration in flight: its position in the queue and the migration.
type InFlight = (usize, Migration);

impl Executor {
    /// An executor for a zone with default options, no overrides, no progress events, the system
    /// clock and no stop signal.
    pub fn new(zone: impl Into<String>, api: Arc<dyn PveApi>, placer: Arc<Placer>) -> Self {
        Self {
            zone: zone.into(),
            api,
            placer,
            overrides: Overrides::default(),
            options: ExecuteOptions::default(),
            progress: Arc::new(NoProgress),
            clock: system_clock(),
            stop: Stop::never(),
        }
    }

    /// The zone's node overrides (notes, maintenance) from the config.
    pub fn with_overrides(mut self, overrides: Overrides) -> Self {
        self.overrides = overrides;
        self
    }

    /// Limits, polling and timeouts.
    pub fn with_options(mut self, options: ExecuteOptions) -> Self {
        self.options = options;
        self
    }

    /// Where progress events go.
    pub fn with_progress(mut self, progress: Arc<dyn Progress>) -> Self {
        self.progress = progress;
        self
    }

    /// The clock snapshots are stamped with.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// A stop signal: once stopped, nothing new starts.
    pub fn with_stop(mut self, stop: Stop) -> Self {
        self.stop = stop;
        self
    }

    /// The zone's name.
    pub fn zone(&self) -> &str {
        &self.zone
    }

    /// Reads the zone's cluster now.
    pub async fn snapshot(&self) -> Result<Snapshot> {
        Ok(collect_snapshot(self.api.as_ref(), (self.clock)()).await?)
    }

    /// Reads the zone's cluster and plans a goal on it.
    pub async fn plan(&self, goal: &Goal) -> Result<Plan> {
        let (_, model) = self.model(&BTreeMap::new()).await?;
        planning::plan(&model, &self.placer, goal, None)
    }

    /// Reads the zone's cluster as plans see it: guests with a pending HA move are locked.
    pub async fn read(&self) -> Result<Model> {
        Ok(self.model(&BTreeMap::new()).await?.1)
    }

    /// The fresh cluster as plans see it, with the round's held guests locked too, and the
    /// snapshot as read.
    async fn model(&self, held: &BTreeMap<u32, Hold>) -> Result<(Snapshot, Model)> {
        let snapshot = self.snapshot().await?;
        let mut locked = snapshot.clone();
        planning::hold_pending_ha(&mut locked, (self.clock)());
        planning::hold_guests(&mut locked, held);
        let model = Model::build(&locked, &self.overrides)?;
        Ok((snapshot, model))
    }

    /// Re-reads the cluster and re-checks a step on it.
    async fn recheck(&self, m: &Migration, held: &BTreeMap<u32, Hold>) -> Result<(), NoStart> {
        let (snapshot, model) = self
            .model(held)
            .await
            .map_err(|e| NoStart::Unreadable(error_chain(&e)))?;
        if let Some(why) = planning::ha_move_pending(&snapshot, m.vmid, (self.clock)()) {
            return Err(NoStart::HaPending(why));
        }
        check_step(&model.cluster, &model.rules, &model.state, &self.placer, m)
            .map_err(NoStart::Stale)
    }

    fn settings(&self, goal: &Goal) -> MigrateSettings {
        MigrateSettings {
            poll: self.options.poll,
            timeout: self.options.timeout,
            with_local_disks: self.options.with_local_disks,
            allow_restart: goal.allows_restart(),
            expected_bandwidth: self.options.expected_bandwidth,
        }
    }

    /// Carries out a plan made for `goal`; see the module docs. Never fails as a whole: what went
    /// wrong is in the report (failed migrations, dropped steps, why it stopped early).
    #[tracing::instrument(skip_all, fields(zone = %self.zone, goal = goal.as_str()))]
    pub async fn execute(&self, plan: Plan, goal: &Goal) -> ExecutionReport {
        let t0 = Instant::now();
        let mut report = ExecutionReport::default();
        let mut queue = Queue::new(plan.migrations);
        let mut slots = Slots::default();
        let mut held: BTreeMap<u32, Hold> = BTreeMap::new();
        let mut started: BTreeSet<u32> = BTreeSet::new();
        let mut bundles: Vec<Vec<u32>> = Vec::new();
        let mut in_flight: HashMap<tokio::task::Id, InFlight> = HashMap::new();
        let mut tasks: JoinSet<std::result::Result<Landed, Failure>> = JoinSet::new();
        let mut replan: Option<String> = None;
        let mut stop = self.stop.clone();
        let mut drain_until: Option<Instant> = None;
        let settings = Arc::new(self.settings(goal));
        let limits = self.options.limits;

        loop {
            if drain_until.is_none() && stop.is_stopped() {
                report.stopped = Some("a stop was requested".into());
                drain_until = Some(Instant::now() + self.options.drain_timeout);
            }
            if drain_until.is_none() && replan.is_none() {
                while let Some(i) = queue.next_ready(&slots, &limits) {
                    let m = queue.get(i).clone();
                    if started.contains(&m.vmid) {
                        // The core never plans a guest twice and held guests are locked, so this
                        // only guards against a bug: never start a second migration of a guest.
                        queue.set(i, Status::Ended);
                        self.drop_step(
                            &mut report,
                            &m,
                            vec!["already migrated in this round".into()],
                        );
                        continue;
                    }
                    match self.recheck(&m, &held).await {
                        Ok(()) => {}
                        Err(NoStart::HaPending(why)) => {
                            queue.set(i, Status::Ended);
                            held.insert(m.vmid, Hold::HaPending);
                            replan = Some(format!("{why}: not moved again"));
                            self.drop_step(&mut report, &m, vec![why]);
                            break;
                        }
                        Err(NoStart::Stale(reasons)) => {
                            queue.set(i, Status::Ended);
                            replan = Some(format!(
                                "step of {} {} → {} no longer holds: {}",
                                m.vmid,
                                m.from,
                                m.to,
                                reasons.join("; ")
                            ));
                            self.drop_step(&mut report, &m, reasons);
                            break;
                        }
                        Err(NoStart::Unreadable(e)) => {
                            tracing::error!(error = %e, "cannot read the cluster: stopping the round");
                            report.stopped = Some(format!("the cluster cannot be read: {e}"));
                            drain_until = Some(Instant::now() + self.options.drain_timeout);
                            break;
                        }
                    }
                    queue.set(i, Status::Running);
                    slots.take(&m.from, &m.to);
                    started.insert(m.vmid);
                    if !m.bundle.is_empty() && !bundles.contains(&m.bundle) {
                        bundles.push(m.bundle.clone());
                    }
                    let api = Arc::clone(&self.api);
                    let progress = Arc::clone(&self.progress);
                    let settings = Arc::clone(&settings);
                    let zone = self.zone.clone();
                    let moving = m.clone();
                    // The follower logs in this round's span, to this round's subscriber.
                    let follow = async move {
                        migrate(api.as_ref(), &moving, &zone, &settings, progress.as_ref()).await
                    };
                    let handle = tasks.spawn(follow.in_current_span().with_current_subscriber());
                    in_flight.insert(handle.id(), (i, m));
                }
            }

            if tasks.is_empty() {
                if drain_until.is_some() {
                    break;
                }
                let Some(reason) = replan.take() else {
                    // Nothing runs and nothing was started: the earliest pending migration could
                    // always start, so the queue is done.
                    break;
                };
                let holds = replan_holds(&held, &bundles);
                match self
                    .replan(goal, &holds, started.len(), reason, &mut report)
                    .await
                {
                    Some(next) => queue = next,
                    None => break,
                }
                continue;
            }

            let next = match drain_until {
                Some(deadline) => {
                    match tokio::time::timeout_at(deadline, tasks.join_next_with_id()).await {
                        Ok(next) => next,
                        Err(_) => {
                            for (_, (_, m)) in std::mem::take(&mut in_flight) {
                                tracing::warn!(vmid = m.vmid, from = %m.from, to = %m.to, "still running at the end of the drain; Proxmox carries it on");
                                report.unfinished.push(Unfinished {
                                    vmid: m.vmid,
                                    from: m.from,
                                    to: m.to,
                                });
                            }
                            // Dropping the set aborts the followers, not the migrations.
                            break;
                        }
                    }
                }
                None => tokio::select! {
                    next = tasks.join_next_with_id() => next,
                    () = stop.stopped() => continue,
                },
            };
            let Some(joined) = next else { continue };
            let (id, result) = match joined {
                Ok((id, result)) => (id, result),
                Err(e) => (
                    e.id(),
                    Err(format!("following the migration broke off: {e}")),
                ),
            };
            let Some((i, m)) = in_flight.remove(&id) else {
                continue;
            };
            queue.set(i, Status::Ended);
            slots.give(&m.from, &m.to);
            match result {
                Ok(landed) => {
                    tracing::info!(vmid = m.vmid, from = %m.from, to = %m.to, secs = landed.secs, ha = landed.ha, "migration done");
                    self.progress.event(&Event::Done {
                        zone: self.zone.clone(),
                        vmid: m.vmid,
                        from: m.from.clone(),
                        to: m.to.clone(),
                        secs: landed.secs,
                    });
                    held.insert(m.vmid, Hold::Moved);
                    report.done.push(Done {
                        vmid: m.vmid,
                        name: m.name,
                        from: m.from,
                        to: m.to,
                        step: m.step,
                        secs: landed.secs,
                        ha: landed.ha,
                    });
                }
                Err(error) => {
                    tracing::error!(vmid = m.vmid, from = %m.from, to = %m.to, step = m.step, %error, "migration failed");
                    self.progress.event(&Event::Failed {
                        zone: self.zone.clone(),
                        vmid: m.vmid,
                        from: m.from.clone(),
                        to: m.to.clone(),
                        error: error.clone(),
                    });
                    held.insert(m.vmid, Hold::Failed);
                    if replan.is_none() {
                        replan = Some(format!("migration of {} to {} failed", m.vmid, m.to));
                    }
                    report.failed.push(Failed {
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
        report.secs = t0.elapsed().as_secs_f64();
        tracing::info!(summary = %report.summary(), "round ended");
        report
    }

    fn drop_step(&self, report: &mut ExecutionReport, m: &Migration, reasons: Vec<String>) {
        tracing::warn!(vmid = m.vmid, from = %m.from, to = %m.to, reasons = %reasons.join("; "), "planned migration no longer holds: skipped");
        self.progress.event(&Event::Skipped {
            zone: self.zone.clone(),
            vmid: m.vmid,
            reason: reasons.join("; "),
        });
        report.skipped.push(Dropped {
            vmid: m.vmid,
            name: m.name.clone(),
            from: m.from.clone(),
            to: m.to.clone(),
            step: m.step,
            reasons,
        });
    }

    /// Plans the rest of the round on the fresh cluster; `None` ends the round.
    async fn replan(
        &self,
        goal: &Goal,
        held: &BTreeMap<u32, Hold>,
        started: usize,
        reason: String,
        report: &mut ExecutionReport,
    ) -> Option<Queue> {
        if report.replans.len() >= self.options.max_replans as usize {
            tracing::warn!(
                max = self.options.max_replans,
                "too many replans: ending the round"
            );
            report.stopped = Some(format!(
                "{} replans in this round (max-replans): the cluster keeps changing",
                report.replans.len()
            ));
            return None;
        }
        let budget = match goal {
            Goal::Balance(o) => Some(o.max_migrations.saturating_sub(started)),
            Goal::Evacuate { .. } => None,
        };
        if budget == Some(0) {
            tracing::info!(%reason, "migration budget spent: no replan");
            return None;
        }
        let planned = match self.model(held).await {
            Ok((_, model)) => planning::plan(&model, &self.placer, goal, budget),
            Err(e) => Err(e),
        };
        let plan = match planned {
            Ok(plan) => plan,
            Err(e) => {
                let e = error_chain(&e);
                tracing::error!(error = %e, "replanning failed: stopping the round");
                report.stopped = Some(format!("replanning failed: {e}"));
                return None;
            }
        };
        tracing::info!(%reason, migrations = plan.migrations.len(), summary = %plan.summary, "replanned");
        self.progress.event(&Event::Replanned {
            zone: self.zone.clone(),
            reason: reason.clone(),
            migrations: plan.migrations.len(),
        });
        report.replans.push(Replan {
            reason,
            migrations: plan.migrations.len(),
            summary: plan.summary.clone(),
        });
        (!plan.migrations.is_empty()).then(|| Queue::new(plan.migrations))
    }
}

/// The guests a replan leaves alone: those the round holds, except the moved members of a bundle
/// that did not all move, so that the planner may bring the split group back together.
fn replan_holds(held: &BTreeMap<u32, Hold>, bundles: &[Vec<u32>]) -> BTreeMap<u32, Hold> {
    let mut holds = held.clone();
    for bundle in bundles {
        let whole = bundle.iter().all(|v| held.get(v) == Some(&Hold::Moved));
        if !whole {
            for v in bundle {
                if holds.get(v) == Some(&Hold::Moved) {
                    holds.remove(v);
                }
            }
        }
    }
    holds
}

/// An error with its causes, on one line.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

#[cfg(test)]
mod tests;
