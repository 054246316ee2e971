//! Carrying out a plan in one zone, safely, against a world that changes meanwhile: the
//! [`Executor`] (what it talks to and how), its re-check of a step; the loop of a round is in
//! `round.rs`.
//!
//! Before each migration the cluster is read again (a refresh, see `refresh.rs`: what can change
//! the check fresh, the rest as the last full read found it unless something unexpected changed)
//! and the step re-checked by the core
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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use flxp_core::balance::{Migration, Overfull, Plan, Purpose, StepReason, check_step};
use flxp_core::placement::Placer;
use flxp_core::{Overrides, Scheduler, Snapshot};
use flxp_pve::Pve;

use crate::blocking;
use crate::error::Result;
use crate::limits::Limits;
use crate::migrate::MigrateSettings;
use crate::planning::{self, Goal, HoldReason, Model};
use crate::progress::{NoProgress, Progress};
use crate::refresh::{self, ReadCache};
use crate::report::ExecutionReport;
use crate::round::Round;
use crate::stop::Stop;

/// "Now" in epoch seconds, for snapshots (cooldowns are measured against it).
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// Now, in Unix seconds, from this machine's clock (0 before 1970).
pub fn epoch_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(epoch_now)
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
    /// Longest time between full reads of the cluster (node notes, RRD); reads in between
    /// refresh only what a step's check needs, unless something unexpected changed.
    pub full_read_every: Duration,
    /// Whether the timed full reads read each node's RRD (its pressure): only a pressure gate on
    /// the trigger needs it, and it costs one call per node.
    pub read_pressure: bool,
    /// Whether a round, its queue done, waits for migrations in flight that it did not start and
    /// its goal depends on, and plans again for them and for guests that came onto the nodes it
    /// empties (`settle.rs`). Off for the daemon: its next round sees them anyway, and a round
    /// waiting for someone else's migration would hold the zone meanwhile.
    pub settle: bool,
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
            full_read_every: Duration::from_secs(3600),
            read_pressure: true,
            settle: true,
        }
    }
}

/// Carries out plans in one zone; cheap to clone.
#[derive(Clone)]
pub struct Executor {
    pub(crate) zone: String,
    /// The zone's API through the read cache's watch (it learns what flxp writes).
    pub(crate) api: Pve,
    /// The zone's API as given.
    base_api: Pve,
    /// What the reads of this zone know between them.
    pub(crate) cache: Arc<ReadCache>,
    pub(crate) placer: Arc<Placer>,
    overrides: Arc<Overrides>,
    pub(crate) options: ExecuteOptions,
    pub(crate) progress: Arc<dyn Progress>,
    clock: Clock,
    pub(crate) stop: Stop,
    /// VM creations in flight in this process, counted on their nodes before every decision.
    reservations: Option<Arc<crate::Reservations>>,
    /// Nodes a consolidation never frees, each with why (the zone lease's node).
    pub(crate) kept: std::collections::BTreeMap<String, String>,
    /// CPU averages across reads ([`crate::smoothing`]); `None`: instant figures.
    smoothing: Option<Arc<crate::smoothing::Smoother>>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("zone", &self.zone)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// Why a planned step no longer holds; its `Display` is the line shown to users.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Stale {
    /// The core's re-check refuses the step.
    #[error(transparent)]
    Step(#[from] StepReason),
    /// An evacuation step's source node left maintenance meanwhile.
    #[error("node {node} is no longer in maintenance")]
    LeftMaintenance {
        /// The source node.
        node: String,
    },
}

/// Why a migration could not start.
pub(crate) enum NoStart {
    /// The cluster could not be read or used: the round stops.
    Unreadable(String),
    /// The step no longer holds: replan.
    Stale(Vec<Stale>),
    /// Proxmox HA is about to move or is moving the guest: leave it alone, replan.
    HaPending(String),
}

impl Executor {
    /// An executor for a zone with default options, no overrides, no progress events, the system
    /// clock and no stop signal; it decides with `scheduler`'s pipeline for the zone.
    pub fn new(zone: impl Into<String>, api: Pve, scheduler: &Scheduler) -> Self {
        let zone = zone.into();
        let placer = scheduler.placer(Some(&zone));
        Self::on_pipeline(zone, api, placer)
    }

    /// [`Executor::new`] with the zone's pipeline built already (the daemon's, once per zone).
    pub(crate) fn on_pipeline(zone: String, api: Pve, placer: Arc<Placer>) -> Self {
        let cache = Arc::new(ReadCache::new());
        Self {
            zone,
            api: cache.watch(&api),
            base_api: api,
            cache,
            placer,
            overrides: Arc::default(),
            options: ExecuteOptions::default(),
            progress: Arc::new(NoProgress),
            clock: system_clock(),
            stop: Stop::never(),
            reservations: None,
            kept: std::collections::BTreeMap::new(),
            smoothing: None,
        }
    }

    /// Nodes a consolidation planned here never frees, each with why in a sentence (the node
    /// holding flxp's zone lease).
    pub fn with_kept_nodes(mut self, kept: std::collections::BTreeMap<String, String>) -> Self {
        self.kept = kept;
        self
    }

    /// VM creations in flight in this process: every plan and step check counts them on their
    /// nodes, so a migration never takes the room a creation has just reserved.
    pub fn with_reservations(mut self, reservations: Option<Arc<crate::Reservations>>) -> Self {
        self.reservations = reservations;
        self
    }

    /// The same executor planning on CPU figures averaged across its reads.
    pub fn with_smoothing(mut self, smoother: Arc<crate::smoothing::Smoother>) -> Self {
        self.smoothing = Some(smoother);
        self
    }

    /// Shares what reads know between executors of one zone (the daemon's rounds): reads refresh
    /// instead of reading all again ([`crate::refresh`]).
    pub fn with_read_cache(mut self, cache: Arc<ReadCache>) -> Self {
        self.api = cache.watch(&self.base_api);
        self.cache = cache;
        self
    }

    /// The zone's node overrides (notes, maintenance) from the config.
    pub fn with_overrides(mut self, overrides: Overrides) -> Self {
        self.overrides = Arc::new(overrides);
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

    /// The zone's API.
    pub fn api(&self) -> &Pve {
        &self.api
    }

    /// "Now" in Proxmox's clock (the `Date` of its last answer), else the executor's clock,
    /// epoch seconds: what marks are dated with. Their ages are judged against snapshot times,
    /// which are Proxmox's clock too, so a skewed local clock must not date them.
    pub fn now(&self) -> i64 {
        self.api.server_time().unwrap_or_else(|| (self.clock)())
    }

    /// The zone's name.
    pub fn zone(&self) -> &str {
        &self.zone
    }

    /// Reads all of the zone's cluster now (a full read, kept for the refreshes after it).
    pub async fn snapshot(&self) -> Result<Snapshot> {
        Ok(refresh::full(&self.api, (self.clock)(), &self.cache).await?)
    }

    /// Reads the zone's cluster for a decision: a refresh, or a full read when one is due or
    /// something unexpected changed ([`crate::refresh`]).
    async fn current(&self) -> Result<Snapshot> {
        let full_every = self.options.full_read_every;
        let rrd = self.options.read_pressure;
        Ok(refresh::read(&self.api, (self.clock)(), &self.cache, full_every, rrd).await?)
    }

    /// Reads the zone's cluster and plans a goal on it.
    pub async fn plan(&self, goal: &Goal) -> Result<Plan> {
        self.replan(&BTreeMap::new(), goal, None).await
    }

    /// Reads the zone's cluster as plans see it: guests with a pending HA move are locked.
    pub async fn read(&self) -> Result<Model> {
        self.with_model(
            &BTreeMap::new(),
            "building the cluster model",
            |_, _, model| Ok(model),
        )
        .await
    }

    /// [`Self::read`], with the notes of the online nodes (node name → notes), where flxp keeps
    /// its power marks ([`crate::power_mark`]).
    pub async fn read_with_notes(&self) -> Result<(Model, BTreeMap<String, String>)> {
        let (model, _, notes) = self.read_judged(false).await?;
        Ok((model, notes))
    }

    /// [`Self::read_with_notes`], with the model of the read's own CPU figures beside the
    /// smoothed one when `last_read` is set and smoothing is on: the trigger judges both
    /// ([`flxp_core::balance::Trigger::check_with_last_read`]).
    pub async fn read_judged(
        &self,
        last_read: bool,
    ) -> Result<(Model, Option<Model>, BTreeMap<String, String>)> {
        self.with_models(
            &BTreeMap::new(),
            "building the cluster model",
            last_read,
            |snapshot, _, model, instant| {
                let notes = snapshot
                    .nodes
                    .iter()
                    .filter_map(|(n, e)| e.notes.clone().map(|t| (n.clone(), t)))
                    .collect();
                Ok((model, instant, notes))
            },
        )
        .await
    }

    /// Reads the zone's cluster and plans `goal` on it with the round's held guests locked;
    /// `budget` caps balancing migrations.
    pub(crate) async fn replan(
        &self,
        held: &BTreeMap<u32, HoldReason>,
        goal: &Goal,
        budget: Option<usize>,
    ) -> Result<Plan> {
        let placer = Arc::clone(&self.placer);
        let goal = goal.clone();
        self.with_model(held, "planning", move |_, _, model| {
            planning::plan(&model, &placer, &goal, budget)
        })
        .await
    }

    /// Reads the cluster, then, on the blocking pool ([`crate::blocking`]), builds the model
    /// plans see (guests with a pending HA move and the round's held guests locked, creations in
    /// flight counted) and hands it to `then` with the snapshot and its time.
    ///
    /// Locking changes only guests' `lock` in the snapshot: its tasks, HA state and time, which
    /// is what `then` may read, are as read, so no copy of the snapshot is kept.
    async fn with_model<T, F>(
        &self,
        held: &BTreeMap<u32, HoldReason>,
        what: &'static str,
        then: F,
    ) -> Result<T>
    where
        F: FnOnce(&Snapshot, i64, Model) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.with_models(held, what, false, move |snapshot, now, model, _| {
            then(snapshot, now, model)
        })
        .await
    }

    /// [`Self::with_model`], also building the model of the read's own CPU figures when
    /// `last_read` is set and the figures are smoothed (`None` otherwise).
    async fn with_models<T, F>(
        &self,
        held: &BTreeMap<u32, HoldReason>,
        what: &'static str,
        last_read: bool,
        then: F,
    ) -> Result<T>
    where
        F: FnOnce(&Snapshot, i64, Model, Option<Model>) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let taken = tokio::time::Instant::now();
        let mut snapshot = self.current().await?;
        // The cluster's own time when it gave one: HA task times come from its clock.
        let now = snapshot.time.unwrap_or_else(|| (self.clock)());
        let held = held.clone();
        let overrides = Arc::clone(&self.overrides);
        let reservations = self.reservations.clone();
        let smoothing = self.smoothing.clone();
        blocking::run(what, move || {
            let build = |snapshot: &mut Snapshot| -> Result<Model> {
                planning::hold_pending_ha(snapshot, now);
                planning::hold_guests(snapshot, &held);
                let mut model = planning::model(snapshot, &overrides)?;
                if let Some(r) = &reservations {
                    r.apply(&model.cluster, taken, &mut model.state);
                }
                Ok(model)
            };
            let mut instant = None;
            if let Some(s) = &smoothing {
                if last_read {
                    instant = Some(build(&mut snapshot.clone())?);
                }
                s.apply(&mut snapshot, now);
            }
            let model = build(&mut snapshot)?;
            then(&snapshot, now, model, instant)
        })
        .await?
    }

    /// Re-reads the cluster and re-checks a step of a plan made for `goal` on it.
    pub(crate) async fn recheck(
        &self,
        m: &Migration,
        held: &BTreeMap<u32, HoldReason>,
        goal: &Goal,
    ) -> Result<(), NoStart> {
        let placer = Arc::clone(&self.placer);
        let step = m.clone();
        let maintenance_only = evacuates_maintenance(goal);
        if maintenance_only && step.purpose == Purpose::Evacuate {
            // Whether the source is still in maintenance is in its notes, which an admin may
            // have edited since: read them fresh (one call) for the check below.
            self.cache.notes_written(&step.from);
        }
        self.with_model(held, "re-checking a step", move |snapshot, now, model| {
            if let Some(why) = planning::ha_move_pending(snapshot, step.vmid, now) {
                return Ok(Err(NoStart::HaPending(why)));
            }
            if maintenance_only && step.purpose == Purpose::Evacuate {
                // The plan empties nodes because they are in maintenance: a node taken out of
                // it meanwhile keeps what is still on it (the replan no longer evacuates it).
                let left = model
                    .cluster
                    .node_idx(&step.from)
                    .is_some_and(|i| !model.cluster.node(i).in_maintenance());
                if left {
                    return Ok(Err(NoStart::Stale(vec![Stale::LeftMaintenance {
                        node: step.from.clone(),
                    }])));
                }
            }
            Ok(
                check_step(&model.cluster, &model.rules, &model.state, &placer, &step).map_err(
                    |reasons| NoStart::Stale(reasons.into_iter().map(Stale::from).collect()),
                ),
            )
        })
        .await
        .unwrap_or_else(|e| Err(NoStart::Unreadable(error_chain(&e))))
    }

    pub(crate) fn settings(&self, goal: &Goal) -> MigrateSettings {
        MigrateSettings {
            poll: self.options.poll,
            timeout: self.options.timeout,
            with_local_disks: self.options.with_local_disks,
            allow_restart: goal.allows_restart(),
            expected_bandwidth: self.options.expected_bandwidth,
        }
    }

    /// Whether a round carrying out `plan` (made for `goal`) would have more to do once its queue
    /// is done, on the cluster as it is now: a migration in flight it did not start and that the
    /// goal depends on to wait for, or a guest on a node it empties that the plan does not name
    /// (`settle.rs`). A plan without migrations is worth carrying out then.
    pub async fn unsettled(&self, plan: &Plan, goal: &Goal) -> Result<bool> {
        let model = self.read().await?;
        let known = crate::round::named(plan);
        let found = crate::settle::unsettled(&model, goal, &Default::default(), &known);
        Ok(!found.in_flight.is_empty() || !found.arrived.is_empty())
    }

    /// Carries out a plan made for `goal`; see the module docs. Never fails as a whole: what went
    /// wrong is in the report (failed migrations, dropped steps, why it stopped early).
    #[tracing::instrument(skip_all, fields(zone = %self.zone, goal = goal.as_str()))]
    pub async fn execute(&self, plan: Plan, goal: &Goal) -> ExecutionReport {
        let planned = plan.clone();
        let mut report = Round::new(self, plan, goal).run().await;
        report.measure = planned.measure;
        report.imbalance_planned = planned.imbalance_after;
        // What the round achieved, measured as the plan measured: failed or dropped migrations
        // leave it short of the plan's promise, and people should see both.
        report.imbalance_achieved = match self.read().await {
            Ok(model) => {
                report.overfull = Some(Overfull::of(&model.cluster, &model.state));
                planned.imbalance_on(&model.cluster, &model.state)
            }
            Err(e) => {
                tracing::warn!(
                    error = %error_chain(&e),
                    "cannot read the cluster after the round: the imbalance achieved is unknown"
                );
                None
            }
        };
        report
    }
}

/// Whether a goal empties the nodes in maintenance (none named), as the daemon's evacuation does,
/// rather than nodes named by the user or a consolidation.
fn evacuates_maintenance(goal: &Goal) -> bool {
    matches!(goal, Goal::Evacuate { nodes, .. } if nodes.is_empty())
}

/// An error with its causes, on one line (`what failed: why: deeper cause`).
pub fn error_chain(e: &dyn std::error::Error) -> String {
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
mod responsive;
#[cfg(test)]
mod tests;
