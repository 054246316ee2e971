//! The daemon: every managed zone, at an interval, is read, judged by the core and acted on.
//!
//! A round in one zone: read the cluster (a refresh between full reads: the zone's
//! [`crate::ReadCache`] lives across rounds, in memory only); if a node is in maintenance (node notes, Proxmox HA
//! maintenance, config overrides) plan its evacuation and carry it out; otherwise ask the core's
//! trigger whether to rebalance (the hold count lives here, per zone, in memory: lost on restart
//! by design, as Proxmox's own is) and carry out the plan when it says so, or when hard rules are
//! broken (then only the fixes are planned). Each round first deals with stale `flxp.creating`
//! markers ([`crate::stale`]). The round returns its report, which says when to run
//! again: the logic never sleeps.
//!
//! [`Daemon`] is cheap to clone and meant to be embedded: `flxp daemon` calls [`Daemon::run`],
//! `flxp serve` runs the same loop and may call [`Daemon::run_round`] on demand. Rounds of one
//! zone never overlap (a per-zone lock); zones run side by side. On a stop ([`Daemon::run`]'s
//! shutdown future, or [`Daemon::stop`]) nothing new starts, running migrations are followed until
//! they end or the drain timeout passes, and `run` returns.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use flxp_core::balance::{self, BalanceOptions, Decision, EvacuateOptions, Figures, Plan};
use flxp_core::constraints::violations;
use flxp_core::left_running::{MaintenanceState, maintenance_state, maintenance_state_planned};
use flxp_core::placement::Placer;
use flxp_core::{Overrides, Scheduler};
use flxp_pve::Pve;
use serde::Serialize;

use crate::blocking;
use crate::error::{Error, Result};
use crate::execute::{Clock, ExecuteOptions, Executor, error_chain, system_clock};
use crate::lease::{LeaseGuard, LeaseHold, LeaseKeeper, LeaseOptions, LeaseRefused};
use crate::planning::Goal;
use crate::progress::{NoProgress, Progress};
use crate::report::ExecutionReport;
use crate::stale::{StaleMarker, StaleOptions};
use crate::stop::{Stop, StopHandle, stop_signal};

/// One zone the daemon manages: a Proxmox cluster and the config's overrides for its nodes.
#[derive(Clone)]
pub struct Zone {
    /// Zone name (the config's `[zones.<name>]`).
    pub name: String,
    /// The zone's API.
    pub api: Pve,
    /// Node notes and maintenance set in the config.
    pub overrides: Overrides,
    /// VM creations in flight in this process (`flxp serve`), counted before every decision.
    pub reservations: Option<Arc<crate::Reservations>>,
}

impl std::fmt::Debug for Zone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zone")
            .field("name", &self.name)
            .field("overrides", &self.overrides)
            .finish_non_exhaustive()
    }
}

/// What the daemon does each round (the `[daemon]`, `[balance]`, `[evacuate]` and `[migration]`
/// config tables).
#[derive(Debug, Clone, PartialEq)]
pub struct DaemonOptions {
    /// Time between the rounds of a zone.
    pub interval: Duration,
    /// Time before the next round after a round that could not read or plan its zone.
    pub retry_after: Duration,
    /// Rebalance when the trigger says so (and fix broken hard rules).
    pub rebalance: bool,
    /// Evacuate nodes in maintenance.
    pub evacuate: bool,
    /// The balancing planner and its trigger.
    pub balance: BalanceOptions,
    /// The evacuation planner.
    pub evacuation: EvacuateOptions,
    /// Limits, polling, timeouts of carrying out plans.
    pub execute: ExecuteOptions,
    /// When a `flxp.creating` marker is stale and what to do about it ([`crate::stale`]).
    pub stale: StaleOptions,
    /// Power saving: consolidate at low load, wake nodes at high load; `None`: off.
    pub power: Option<AutoConsolidate>,
    /// Time constant of the CPU averages the rounds plan on ([`crate::smoothing`]); zero: the
    /// instant figures.
    pub smoothing: Duration,
}

impl Default for DaemonOptions {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(300),
            retry_after: Duration::from_secs(60),
            rebalance: true,
            evacuate: true,
            balance: BalanceOptions::default(),
            evacuation: EvacuateOptions::default(),
            execute: ExecuteOptions::default(),
            stale: StaleOptions::default(),
            power: None,
            smoothing: Duration::from_secs(1800),
        }
    }
}

/// A plan the round made and what carrying it out did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Executed {
    /// The plan (Contract 3 shape).
    pub plan: Plan,
    /// What carrying it out did; `None` when the plan moved nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<ExecutionReport>,
}

/// What one round in one zone did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundReport {
    /// Zone name.
    pub zone: String,
    /// When the round read the cluster, epoch seconds.
    pub time: i64,
    /// The evacuation of nodes in maintenance, when there was one to plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evacuation: Option<Executed>,
    /// The rebalancing trigger's decision, when it was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Decision>,
    /// The rebalancing (or rule-fixing) plan, when one was made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub balance: Option<Executed>,
    /// What power saving measured and did, when it is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power: Option<PowerReport>,
    /// Stale `flxp.creating` markers found and what was done about each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stale: Vec<StaleMarker>,
    /// Each node in maintenance and whether it is safe to reboot, as the round read it, less
    /// the guests the round's evacuation plans to move away.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub maintenance: Vec<NodeMaintenance>,
    /// Why the round could not do its work (the zone unreadable, planning refused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why the round did nothing: another flxp holds the zone's lease.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standby: Option<String>,
    /// When to run the next round, seconds from the end of this one.
    pub next_in_secs: f64,
}

/// A node in maintenance and what it still holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeMaintenance {
    /// Node name.
    pub node: String,
    /// Whether it is safe to reboot, and the running guests still there with why.
    #[serde(flatten)]
    pub state: MaintenanceState,
}

/// Each node in maintenance (reported so, not only being freed by a consolidation) and its
/// state; with the round's evacuation `plan`, the guests it moves count as gone.
fn maintenance_states(model: &flxp_core::Model, plan: Option<&Plan>) -> Vec<NodeMaintenance> {
    let c = &model.cluster;
    c.node_indexes()
        .filter(|&i| c.node(i).in_maintenance_reported())
        .map(|i| NodeMaintenance {
            node: c.node(i).name.clone(),
            state: match plan {
                Some(p) => maintenance_state_planned(c, &model.rules, i, p),
                None => maintenance_state(c, &model.rules, i),
            },
        })
        .collect()
}

/// One warning per node in maintenance that still runs a guest: rebooting it would stop them.
fn warn_running_in_maintenance(report: &RoundReport) {
    for m in &report.maintenance {
        let running = m.state.running();
        if running.is_empty() {
            continue;
        }
        let guests = running
            .iter()
            .map(|l| format!("{} {} ({})", l.vmid, l.name, l.reason))
            .collect::<Vec<_>>()
            .join("; ");
        let vmids: Vec<u32> = running.iter().map(|l| l.vmid).collect();
        tracing::warn!(
            node = %m.node,
            running = running.len(),
            vmids = ?vmids,
            %guests,
            "node in maintenance still runs guests: not safe to reboot"
        );
    }
}

impl RoundReport {
    /// A round's report before it did anything: the next round after the interval.
    pub fn begin(zone: &str, time: i64, interval: Duration) -> Self {
        Self {
            zone: zone.to_owned(),
            time,
            evacuation: None,
            trigger: None,
            balance: None,
            power: None,
            stale: Vec::new(),
            maintenance: Vec::new(),
            error: None,
            standby: None,
            next_in_secs: interval.as_secs_f64(),
        }
    }

    /// Migrations done in the round.
    pub fn migrations_done(&self) -> usize {
        self.executions().map(|x| x.done.len()).sum()
    }

    /// Migrations that failed in the round.
    pub fn migrations_failed(&self) -> usize {
        self.executions().map(|x| x.failed.len()).sum()
    }

    /// What the evacuation and the rebalancing carried out, where they ran.
    fn executions(&self) -> impl Iterator<Item = &ExecutionReport> {
        [&self.evacuation, &self.balance]
            .into_iter()
            .flatten()
            .filter_map(|e| e.execution.as_ref())
            .chain(self.power.iter().filter_map(|p| p.execution.as_ref()))
    }

    /// When to run again.
    pub fn next_in(&self) -> Duration {
        Duration::from_secs_f64(self.next_in_secs.max(0.0))
    }
}

/// Whether a round may write or only judges its read (see [`Daemon::act`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Read and plan, stopping before the first write: the lease is not held yet.
    Plan,
    /// Read, plan and carry out: the lease is held (or there is none).
    Act,
}

/// How a round's work ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    /// Done: nothing (more) to write.
    Done,
    /// In [`Mode::Plan`]: the round would write next, for this (a log's words).
    Writes(&'static str),
}

/// One managed zone with what the daemon remembers of it: the trigger's hold count and the last
/// round's report.
struct ZoneState {
    zone: Zone,
    /// Rounds run here; `false` for a zone only leased (see [`Daemon::with_idle_zones`]).
    rounds: bool,
    /// The placement pipeline for this zone: plugins are told its name.
    placer: Arc<Placer>,
    held: AtomicU32,
    last: std::sync::Mutex<Option<RoundReport>>,
    round: Arc<tokio::sync::Mutex<()>>,
    lease: Option<Arc<LeaseKeeper>>,
    /// Wakes the zone's loop when the lease is taken, so a standby acts at once.
    taken: Arc<tokio::sync::Notify>,
    /// Since when the load has been below `consolidate-below` (power saving).
    low_since: std::sync::Mutex<Option<i64>>,
    /// When this process last changed a node's power state.
    last_power: std::sync::Mutex<Option<i64>>,
    /// Evacuations and VM creations that found no room: the power step wakes a node.
    room: power::RoomWants,
    /// Nodes this process asked to shut down, and when (power saving): not asked twice.
    shutting: std::sync::Mutex<BTreeMap<String, i64>>,
    /// What the rounds' reads know between them: an idle round refreshes, not reads all again.
    cache: Arc<crate::ReadCache>,
    /// The CPU averages the rounds plan on.
    smoother: Arc<crate::smoothing::Smoother>,
}

impl ZoneState {
    /// VM creations in flight in this process: their guests are never taken for stale.
    fn in_flight_vmids(&self) -> Vec<u32> {
        self.zone
            .reservations
            .as_ref()
            .map(|r| r.in_flight_vmids())
            .unwrap_or_default()
    }
}

/// When another flxp held `z`'s lease since this process last did, the round's read under the
/// lease is a full one: that flxp may have marked a node for maintenance, and a refresh reads no
/// node notes, so a round would otherwise move guests onto the node it marked.
fn read_all_if_another_acted(z: &ZoneState, k: &LeaseKeeper) {
    if k.another_acted() {
        tracing::info!("another flxp held the lease since this one did: reading the whole zone");
        z.cache.another_acted();
    }
}

/// Called with every round's report.
pub type RoundListener = Arc<dyn Fn(&RoundReport) + Send + Sync>;

/// What a daemon is built from; kept so that the `with_*` builders can rebuild it.
#[derive(Clone)]
struct Parts {
    zones: Vec<Zone>,
    scheduler: Scheduler,
    options: DaemonOptions,
    progress: Arc<dyn Progress>,
    clock: Clock,
    listener: Option<RoundListener>,
    lease: Option<LeaseSettings>,
    /// Zones without rounds, only leased.
    idle: BTreeSet<String>,
}

/// The lease every zone's rounds need (see [`crate::lease`]).
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    /// TTL, margin and this process's holder name.
    pub options: LeaseOptions,
    /// The node holding each zone's lease, when configured (else the first cluster member).
    pub nodes: BTreeMap<String, String>,
}

struct Inner {
    parts: Parts,
    zones: BTreeMap<String, ZoneState>,
    stop: Stop,
    stop_handle: StopHandle,
}

/// The periodic loop over zones; see the module docs. Clones share zones, hold counts and stop.
#[derive(Clone)]
pub struct Daemon {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("zones", &self.zones())
            .field("options", &self.inner.parts.options)
            .finish_non_exhaustive()
    }
}

impl Daemon {
    /// A daemon over these zones (names must be unique; a later one replaces an earlier one), with
    /// no progress events and the system clock; each zone decides with `scheduler`'s pipeline for
    /// it.
    pub fn new(zones: Vec<Zone>, scheduler: &Scheduler, options: DaemonOptions) -> Self {
        Self::build(Parts {
            zones,
            scheduler: scheduler.clone(),
            options,
            progress: Arc::new(NoProgress),
            clock: system_clock(),
            listener: None,
            lease: None,
            idle: BTreeSet::new(),
        })
    }

    fn build(parts: Parts) -> Self {
        let (stop_handle, stop) = stop_signal();
        let zones = parts
            .zones
            .iter()
            .map(|z| {
                (
                    z.name.clone(),
                    ZoneState {
                        zone: z.clone(),
                        rounds: !parts.idle.contains(&z.name),
                        placer: parts.scheduler.placer(Some(&z.name)),
                        held: AtomicU32::new(0),
                        last: std::sync::Mutex::new(None),
                        round: Arc::new(tokio::sync::Mutex::new(())),
                        lease: parts.lease.as_ref().map(|l| {
                            Arc::new(LeaseKeeper::new(
                                z.api.clone(),
                                z.name.clone(),
                                l.nodes.get(&z.name).cloned(),
                                l.options.clone(),
                            ))
                        }),
                        taken: Arc::new(tokio::sync::Notify::new()),
                        low_since: std::sync::Mutex::new(None),
                        last_power: std::sync::Mutex::new(None),
                        room: power::RoomWants::default(),
                        shutting: std::sync::Mutex::new(BTreeMap::new()),
                        cache: Arc::new(crate::ReadCache::new()),
                        smoother: Arc::new(crate::smoothing::Smoother::new(
                            parts.options.smoothing,
                        )),
                    },
                )
            })
            .collect();
        Self {
            inner: Arc::new(Inner {
                parts,
                zones,
                stop,
                stop_handle,
            }),
        }
    }

    fn rebuild(self, change: impl FnOnce(&mut Parts)) -> Self {
        let mut parts = self.inner.parts.clone();
        change(&mut parts);
        Self::build(parts)
    }

    /// The same daemon sending progress events here (a fresh daemon: call before sharing it).
    pub fn with_progress(self, progress: Arc<dyn Progress>) -> Self {
        self.rebuild(|p| p.progress = progress)
    }

    /// The same daemon stamping snapshots with this clock (a fresh daemon: call before sharing).
    pub fn with_clock(self, clock: Clock) -> Self {
        self.rebuild(|p| p.clock = clock)
    }

    /// The same daemon calling `listener` with every round's report, from [`Daemon::run`] and
    /// [`Daemon::run_round`] alike (a fresh daemon: call before sharing it).
    pub fn on_round(self, listener: RoundListener) -> Self {
        self.rebuild(|p| p.listener = Some(listener))
    }

    /// The same daemon acting in a zone only while it holds the zone's lease (a fresh daemon:
    /// call before sharing it).
    pub fn with_lease(self, lease: LeaseSettings) -> Self {
        self.rebuild(|p| p.lease = Some(lease))
    }

    /// The same daemon also keeping the lease of `zones`, where it runs no rounds (`flxp serve`'s
    /// zones outside `[daemon] zones`): what the API carries out there is as exclusive as in the
    /// others (a fresh daemon: call before sharing it).
    pub fn with_idle_zones(self, zones: Vec<Zone>) -> Self {
        self.rebuild(|p| {
            p.idle.extend(zones.iter().map(|z| z.name.clone()));
            p.zones.extend(zones);
        })
    }

    /// The zone's lease for the time the guard lives, which the caller keeps while it acts:
    /// `Err` names the lease holder when another flxp holds it (a zone without a lease, or an
    /// unknown zone, is `Ok(None)`). With `hold = acting` the lease is taken here and released
    /// after the last guard drops.
    pub async fn may_act(
        &self,
        zone: &str,
    ) -> std::result::Result<Option<LeaseGuard>, LeaseRefused> {
        match self.inner.zones.get(zone).and_then(|z| z.lease.as_ref()) {
            None => Ok(None),
            Some(k) => k.demand().await.map(Some),
        }
    }

    /// Gives up every lease held (after a clean stop), so another replica takes over at once.
    pub async fn release_leases(&self) {
        for z in self.inner.zones.values() {
            if let Some(k) = &z.lease {
                k.release().await;
            }
        }
    }

    /// The managed zones, by name.
    pub fn zones(&self) -> Vec<&str> {
        self.inner
            .zones
            .iter()
            .filter(|(_, z)| z.rounds)
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// The options in force.
    pub fn options(&self) -> &DaemonOptions {
        &self.inner.parts.options
    }

    /// The trigger's hold count of a zone (consecutive checks above the threshold).
    pub fn held(&self, zone: &str) -> Option<u32> {
        self.inner
            .zones
            .get(zone)
            .map(|z| z.held.load(Ordering::Relaxed))
    }

    /// The CPU averages a zone's rounds plan on ([`crate::smoothing`]), for other readers of the
    /// zone (placement) to decide on the same figures; `None` for a zone it does not run.
    pub fn smoother(&self, zone: &str) -> Option<Arc<crate::smoothing::Smoother>> {
        self.inner.zones.get(zone).map(|z| Arc::clone(&z.smoother))
    }

    /// Says that a zone needs room (a VM creation found none): with power saving on, the next
    /// round wakes a node flxp switched off. Unknown zones are ignored.
    pub fn want_room(&self, zone: &str) {
        if let Some(z) = self.inner.zones.get(zone) {
            z.room.ask();
        }
    }

    /// Says that this process wrote a node's notes (a maintenance mark) outside the daemon's
    /// rounds: the next round reads them back at once instead of at its next full read. Unknown
    /// zones are ignored.
    pub fn notes_written(&self, zone: &str, node: &str) {
        if let Some(z) = self.inner.zones.get(zone) {
            z.cache.notes_written(node);
        }
    }

    /// Asks every round to stop: nothing new starts, running migrations are followed to their end
    /// (within the drain timeout), and [`Daemon::run`] returns.
    pub fn stop(&self) {
        self.inner.stop_handle.stop();
    }

    /// Whether a stop was asked for.
    pub fn is_stopped(&self) -> bool {
        self.inner.stop.is_stopped()
    }

    /// A zone managed here, or the error naming the ones that are.
    fn zone_state(&self, zone: &str) -> Result<&ZoneState> {
        self.inner
            .zones
            .get(zone)
            .ok_or_else(|| Error::UnknownZone {
                zone: zone.to_owned(),
                known: self.zones().join(", "),
            })
    }

    /// Runs one round in a zone now (waiting for a round of that zone already running). `Err`
    /// only for a zone not managed here; a zone that cannot be read is a report with `error`.
    pub async fn run_round(&self, zone: &str) -> Result<RoundReport> {
        let z = self
            .zone_state(zone)
            .ok()
            .filter(|z| z.rounds)
            .ok_or_else(|| Error::UnknownZone {
                zone: zone.to_owned(),
                known: self.zones().join(", "),
            })?;
        Ok(self.locked_round(z).await)
    }

    /// Waits until no round runs in a zone and keeps others out while the guard lives: hold it
    /// while carrying out anything else there (an on-demand balance or evacuation), so that two
    /// executors never book the same room. `Err` for a zone not managed here.
    pub async fn lock_zone(&self, zone: &str) -> Result<tokio::sync::OwnedMutexGuard<()>> {
        let z = self.zone_state(zone)?;
        Ok(Arc::clone(&z.round).lock_owned().await)
    }

    /// The last round's report of a zone.
    pub fn last_report(&self, zone: &str) -> Option<RoundReport> {
        let z = self.inner.zones.get(zone)?;
        z.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// One round under the zone's lock; the report is kept and handed to the listener.
    async fn locked_round(&self, z: &ZoneState) -> RoundReport {
        let report = {
            let _round = z.round.lock().await;
            self.round(z).await
        };
        *z.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(report.clone());
        if let Some(listener) = &self.inner.parts.listener {
            listener(&report);
        }
        report
    }

    #[tracing::instrument(skip_all, fields(zone = %z.zone.name))]
    async fn round(&self, z: &ZoneState) -> RoundReport {
        let o = &self.inner.parts.options;
        let time = (self.inner.parts.clock)();
        let mut report = RoundReport::begin(&z.zone.name, time, o.interval);
        if self.is_stopped() {
            report.error = Some("the daemon is stopping".into());
            return report;
        }
        let mut kept = BTreeMap::new();
        if let Some(k) = &z.lease {
            // The node whose notes hold the lease is never consolidated away (its name is read
            // once, held or not).
            if let Ok(held) = k.node_to_keep().await {
                kept.insert(held.node.clone(), held.to_string());
            }
        }
        let executor = self.executor(z, kept);
        // With `hold = acting` the round plans without the lease and takes it only when it is
        // about to write: an idle round makes no lease call. Power saving keeps state across
        // its decisions (low-load time, requests for room), so its rounds take the lease first.
        let on_demand = z
            .lease
            .as_ref()
            .filter(|k| k.options().hold == LeaseHold::Acting && o.power.is_none());
        // Held until the round ends: with `hold = acting`, released then.
        let mut _lease = None;
        let mode = match (&z.lease, on_demand) {
            (_, Some(_)) => Mode::Plan,
            (Some(k), None) => match k.demand().await {
                Ok(g) => {
                    _lease = Some(g);
                    read_all_if_another_acted(z, k);
                    Mode::Act
                }
                Err(why) => return self.stand_by(k, why, report),
            },
            (None, None) => Mode::Act,
        };
        let held = z.held.load(Ordering::Relaxed);
        let mut outcome = self.act(z, &executor, &mut report, mode).await;
        if let (Ok(Flow::Writes(what)), Some(k)) = (&outcome, on_demand) {
            // About to write: take the lease, then read, judge and plan again under it (another
            // flxp may have acted since this round's read), as if this round had just begun.
            tracing::info!(what, "the round is about to act: taking the lease");
            let fresh = RoundReport::begin(&z.zone.name, time, o.interval);
            match k.demand().await {
                Ok(g) => _lease = Some(g),
                Err(why) => return self.stand_by(k, why, fresh),
            }
            read_all_if_another_acted(z, k);
            report = fresh;
            // The trigger's hold count is the one this round found, not counted twice.
            z.held.store(held, Ordering::Relaxed);
            outcome = self.act(z, &executor, &mut report, Mode::Act).await;
        }
        if let Err(e) = outcome {
            let e = error_chain(&e);
            tracing::error!(error = %e, "round failed");
            report.error = Some(e);
            report.next_in_secs = o.retry_after.min(o.interval).as_secs_f64();
        }
        warn_running_in_maintenance(&report);
        tracing::info!(
            done = report.migrations_done(),
            failed = report.migrations_failed(),
            next_in_secs = report.next_in_secs,
            "round ended"
        );
        report
    }

    /// The executor of a round in `z`, never freeing the `kept` nodes.
    fn executor(&self, z: &ZoneState, kept: BTreeMap<String, String>) -> Executor {
        let o = &self.inner.parts.options;
        Executor::on_pipeline(
            z.zone.name.clone(),
            z.zone.api.clone(),
            Arc::clone(&z.placer),
        )
        .with_overrides(z.zone.overrides.clone())
        .with_reservations(z.zone.reservations.clone())
        .with_options(crate::ExecuteOptions {
            settle: false,
            ..o.execute.clone()
        })
        .with_read_cache(Arc::clone(&z.cache))
        .with_smoothing(Arc::clone(&z.smoother))
        .with_progress(Arc::clone(&self.inner.parts.progress))
        .with_clock(Arc::clone(&self.inner.parts.clock))
        .with_stop(self.inner.stop.clone())
        .with_kept_nodes(kept)
    }

    /// The report of a round that may not act: another flxp holds the lease (named in `why`).
    /// It looks again soon, so that a takeover is not an interval late.
    fn stand_by(&self, k: &LeaseKeeper, why: LeaseRefused, mut report: RoundReport) -> RoundReport {
        let o = &self.inner.parts.options;
        report.standby = Some(why.to_string());
        report.next_in_secs = o.interval.min(k.options().renew_every()).as_secs_f64();
        report
    }

    /// The round's work on its read: in [`Mode::Plan`] it stops where it would first write
    /// ([`Flow::Writes`]); in [`Mode::Act`] it carries it out.
    async fn act(
        &self,
        z: &ZoneState,
        executor: &Executor,
        report: &mut RoundReport,
        mode: Mode,
    ) -> Result<Flow> {
        let o = &self.inner.parts.options;
        if mode == Mode::Plan && o.power.is_some() {
            // Not planned without the lease (see `round`); never reached, kept for safety.
            return Ok(Flow::Writes("power saving"));
        }
        let placer = &z.placer;
        // Read before the cluster: requests for room made later wait for a round that sees them.
        let mut room_seen = z.room.seen();
        let (model, last_read, notes) = executor.read_judged(o.rebalance).await?;
        let model = Arc::new(model);
        let marks = crate::power_mark::read(&notes);
        let judged = Arc::clone(&model);
        report.maintenance = blocking::run("reading the nodes in maintenance", move || {
            maintenance_states(&judged, None)
        })
        .await?;
        if mode == Mode::Plan && self.stale_writes(z, &model.cluster, report.time) {
            return Ok(Flow::Writes("stale creation markers"));
        }
        report.stale = self.clean_stale(z, &model.cluster, report.time).await;
        if report.stale.iter().any(|m| m.outcome == "deleted") {
            // The cluster changed: the next round plans on a fresh read.
            report.next_in_secs = o.retry_after.min(o.interval).as_secs_f64();
            return Ok(Flow::Done);
        }

        // A consolidation left unfinished (a node marked `off`, in maintenance, not empty) is
        // judged by the power step first: it gives the node back when the load rose, where a
        // plain evacuation would go on emptying it.
        let c = &model.cluster;
        let unfinished = o.power.is_some()
            && marks.iter().any(|m| {
                m.state == crate::power_mark::PowerState::Off
                    && c.node_idx(&m.node).is_some_and(|i| {
                        c.node(i).is_online()
                            && c.node(i).in_maintenance()
                            && c.guest_indexes().any(|g| model.state.location(g) == i)
                    })
            });
        if unfinished
            && !self.is_stopped()
            && self
                .power(z, executor, &model, &marks, room_seen, report)
                .await?
        {
            return Ok(Flow::Done);
        }

        if o.evacuate && model.cluster.nodes().iter().any(|n| n.in_maintenance()) {
            let goal = Goal::Evacuate {
                nodes: Vec::new(),
                options: o.evacuation.clone(),
            };
            let plan =
                blocking::plan(Arc::clone(&model), Arc::clone(placer), goal.clone(), None).await?;
            tracing::info!(summary = %plan.summary, "evacuation planned");
            let (judged, planned) = (Arc::clone(&model), plan.clone());
            report.maintenance = blocking::run("reading the nodes in maintenance", move || {
                maintenance_states(&judged, Some(&planned))
            })
            .await?;
            let moves = !plan.migrations.is_empty();
            // Guests that fit nowhere, off a node power saving did not choose: wake a node.
            let switched = |n: &str| marks.iter().any(|m| m.node == n);
            if o.power.is_some() && plan.unplaced.iter().any(|u| !switched(&u.node)) {
                // Found on this round's read: its own power step may answer it.
                room_seen = z.room.ask();
            }
            if moves && mode == Mode::Plan {
                return Ok(Flow::Writes("evacuation"));
            }
            report.evacuation = Some(self.carry_out_plan(z, executor, plan, &goal).await?);
            if moves {
                // The cluster changed: the next round measures it anew before any balancing.
                return Ok(Flow::Done);
            }
        }

        if !unfinished
            && !self.is_stopped()
            && self
                .power(z, executor, &model, &marks, room_seen, report)
                .await?
        {
            // The cluster changed: the next round measures it anew.
            return Ok(Flow::Done);
        }

        if !o.rebalance || self.is_stopped() {
            return Ok(Flow::Done);
        }
        let held = z.held.load(Ordering::Relaxed);
        let judged = Arc::clone(&model);
        let last_read = last_read.map(Arc::new);
        let seen = last_read.clone();
        let options = o.balance.clone();
        let (mut decision, figures, broken) = blocking::run("checking the trigger", move || {
            let (measure, metric) = (options.measure, options.metric);
            let averaged = (&judged.cluster, &judged.state);
            let (decision, figures) = match &seen {
                Some(l) => options.trigger.check_with_last_read(
                    averaged,
                    (&l.cluster, &l.state),
                    measure,
                    metric,
                    held,
                ),
                None => {
                    let imbalance = balance::imbalance(averaged.0, averaged.1, measure, metric);
                    let d = options
                        .trigger
                        .check(averaged.0, averaged.1, measure, imbalance, held);
                    (d, Figures::Averages)
                }
            };
            let broken = !violations(&judged.cluster, &judged.rules, &judged.state).is_empty();
            (decision, figures, broken)
        })
        .await?;
        z.held.store(decision.held, Ordering::Relaxed);
        if let Some(p) = report.power.as_ref().filter(|p| !p.to_free.is_empty()) {
            // Balancing now would fill nodes the consolidation is about to empty again.
            decision.act = false;
            decision.reason = format!(
                "{}; balancing waits: the consolidation would free {}",
                decision.reason,
                p.to_free.join(", ")
            );
        }
        tracing::info!(act = decision.act, held = decision.held, reason = %decision.reason, "trigger checked");
        let act = decision.act;
        report.trigger = Some(decision);
        if !act && !broken {
            return Ok(Flow::Done);
        }
        let mut options = o.balance.clone();
        if !act {
            // Only fix the broken rules: the trigger has not asked for balancing yet.
            options.trigger.threshold = Some(f64::MAX);
            options.trigger.target = None;
        }
        let goal = Goal::Balance(options);
        // A node past an overload line on the last read is planned on that read's figures.
        let model = match last_read {
            Some(l) if act && figures == Figures::LastRead => l,
            _ => model,
        };
        let plan = blocking::plan(model, Arc::clone(placer), goal.clone(), None).await?;
        tracing::info!(summary = %plan.summary, "plan made");
        if !plan.migrations.is_empty() && mode == Mode::Plan {
            return Ok(Flow::Writes("balance"));
        }
        report.balance = Some(self.carry_out_plan(z, executor, plan, &goal).await?);
        Ok(Flow::Done)
    }

    /// Finds the zone's stale `flxp.creating` markers and acts on them ([`crate::stale`]);
    /// creations in flight in this process are never touched, whatever their age.
    async fn clean_stale(
        &self,
        z: &ZoneState,
        cluster: &flxp_core::cluster::Cluster,
        now: i64,
    ) -> Vec<StaleMarker> {
        let o = &self.inner.parts.options;
        let in_flight = z.in_flight_vmids();
        let wait = flxp_pve::TaskWait {
            interval: o.execute.poll,
            timeout: Some(o.execute.timeout),
            ..flxp_pve::TaskWait::default()
        };
        crate::stale::clean(&z.zone.api, cluster, &in_flight, now, &o.stale, &wait).await
    }

    /// Whether dealing with the zone's stale `flxp.creating` markers would write anything
    /// (delete a half-made VM, take a marker off): what [`Self::clean_stale`] does with them.
    fn stale_writes(&self, z: &ZoneState, cluster: &flxp_core::cluster::Cluster, now: i64) -> bool {
        let in_flight = z.in_flight_vmids();
        crate::stale::writes(cluster, &in_flight, now, &self.inner.parts.options.stale)
    }

    /// Carries out `plan` for `goal` unless it moves nothing; the lease is checked first, as
    /// planning may have outlasted it.
    async fn carry_out_plan(
        &self,
        z: &ZoneState,
        executor: &Executor,
        plan: Plan,
        goal: &Goal,
    ) -> Result<Executed> {
        let execution = if plan.migrations.is_empty() {
            None
        } else {
            self.still_holding(z)?;
            Some(executor.execute(plan.clone(), goal).await)
        };
        Ok(Executed { plan, execution })
    }

    /// Planning may take long: the lease is checked again before anything is carried out.
    fn still_holding(&self, z: &ZoneState) -> Result<()> {
        match &z.lease {
            Some(k) if !k.holding() => Err(Error::LeaseLost {
                zone: z.zone.name.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Runs rounds in every zone until `shutdown` completes (or [`Daemon::stop`] is called), each
    /// zone again after the time its last round asked for; then lets running migrations end and
    /// returns.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) {
        let loops =
            futures_util::future::join_all(self.inner.zones.values().map(|z| self.zone_loop(z)));
        let mut stop = self.inner.stop.clone();
        tokio::pin!(loops);
        tokio::select! {
            _ = &mut loops => return,
            () = shutdown => {
                tracing::info!("shutdown: starting nothing new, waiting for running migrations");
                self.stop();
            }
            () = stop.stopped() => {}
        }
        loops.await;
    }

    async fn zone_loop(&self, z: &ZoneState) {
        let rounds = async {
            if !z.rounds {
                // Only leased: renewed below until the daemon stops.
                self.inner.stop.clone().stopped().await;
                return;
            }
            let mut stop = self.inner.stop.clone();
            loop {
                let report = self.locked_round(z).await;
                if self.is_stopped() {
                    return;
                }
                tokio::select! {
                    () = tokio::time::sleep(report.next_in()) => {}
                    () = z.taken.notified(), if report.standby.is_some() => {}
                    () = stop.stopped() => return,
                }
            }
        };
        match &z.lease {
            // With `hold = always` the lease is renewed beside the rounds, all the time; with
            // `acting`, each round (and each API action) demands it for the time it acts.
            Some(k) if k.options().hold == LeaseHold::Always => {
                // Renewal goes on while a stop drains running migrations, and ends with the rounds.
                let renew = k.keep(|| z.taken.notify_one());
                tokio::select! {
                    () = rounds => {}
                    () = renew => {}
                }
            }
            _ => rounds.await,
        }
    }
}

mod power;
pub use power::{AutoConsolidate, PowerReport};

#[cfg(test)]
mod tests;
