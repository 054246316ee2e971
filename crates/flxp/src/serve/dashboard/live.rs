//! Live progress of the plans `flxp serve` carries out, for the dashboard: every executor event
//! (migration started, advanced, done, failed, skipped, replanned), the start and end of each
//! run (a rolling maintenance's too, with each node's step as it changes) go to a broadcast
//! channel, and `GET /events` streams them as server-sent events.
//!
//! So does what happens without a request: the daemon's migrations (the same events as a run's),
//! each daemon round (what it decided and why, also "nothing to do"), maintenance marks set or
//! cleared, VMs created, and, while at least one
//! reader follows the stream, what one shared poller reads of each zone every [`POLL`]: its
//! nodes' figures and guest counts (`/cluster/resources`, one call) and its recent tasks
//! (`/cluster/tasks`, one call, plus the log of each running migration for its progress). With
//! nobody following, the poller reads nothing.
//!
//! The stream needs the bearer token like the API: the page reads it with `fetch`, which can send
//! the `Authorization` header (an `EventSource` cannot, and a token in the URL would end up in
//! logs and history). Streams end when the service stops, after the last run's end was sent.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use flxp_engine::{Event, Progress};
use futures_util::Stream;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::serve::metrics::MigrationMeter;

/// Events kept for slow readers; one that falls further behind is told how many it missed.
const BACKLOG: usize = 1024;

/// How often the poller reads each zone while someone follows the stream.
pub const POLL: Duration = Duration::from_secs(2);

/// Tasks of a zone the stream lists, newest first.
const TASKS_SHOWN: usize = 30;

/// VMs created here that the history remembers, to name the new VM of a clone task.
const CREATED_KEPT: usize = 500;

/// Task log lines read for a migration's target: it is on the first, after any HA preamble.
const LOG_LINES: u64 = 10;

/// Task log lines read for a running migration's progress.
const PROGRESS_LINES: u64 = 2000;

/// A VM this service created: the clone task that made it names only the template.
#[derive(Debug, Clone)]
pub struct Created {
    /// The new VMID.
    pub vmid: u32,
    /// Its name.
    pub name: String,
    /// The node it was created on.
    pub node: String,
    /// The UPID of the clone task that made it.
    pub clone_task: String,
}

/// The broadcast of live events, as JSON documents, and what the history remembers.
#[derive(Debug)]
pub struct Live {
    tx: broadcast::Sender<Arc<Value>>,
    created: Mutex<VecDeque<Created>>,
    /// Migration targets by UPID, read from task logs (a finished task's never changes).
    targets: Mutex<HashMap<String, String>>,
    /// Set when the service stops: every stream ends (an open stream would hold the HTTP
    /// server's graceful shutdown forever).
    closed: tokio::sync::watch::Sender<bool>,
    /// The last rolling maintenance started through the API, by zone.
    rolling: Mutex<BTreeMap<String, RollingRecord>>,
}

/// The last rolling maintenance `rollingMaintenance` started in a zone: kept after it ends, so
/// that a client polling learns how it ended (its progress lines are gone once every node is
/// done).
#[derive(Debug, Clone)]
pub struct RollingRecord {
    /// Its nodes, in the order it takes them.
    pub nodes: Vec<String>,
    /// Its migrations, counted as they end.
    pub progress: Arc<LiveProgress>,
    /// How it ended; `None` while it runs (or waits for the zone).
    pub end: Option<RollingEnd>,
}

impl Default for Live {
    fn default() -> Self {
        Self {
            tx: broadcast::Sender::new(BACKLOG),
            created: Mutex::default(),
            targets: Mutex::default(),
            closed: tokio::sync::watch::Sender::new(false),
            rolling: Mutex::default(),
        }
    }
}

impl Live {
    /// Whether anybody follows the stream now.
    pub fn followed(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    /// A VM was created: remembered for the history, and sent.
    pub fn created(&self, zone: &str, vm: Created) {
        self.send(json!({ "event": "created", "zone": zone, "vmid": vm.vmid, "name": vm.name, "node": vm.node }));
        let mut c = self.created.lock().unwrap_or_else(|p| p.into_inner());
        if c.len() >= CREATED_KEPT {
            c.pop_front();
        }
        c.push_back(vm);
    }

    /// The VM the clone task `upid` made, if this service made it (since it started).
    pub fn clone_made(&self, upid: &str) -> Option<Created> {
        let c = self.created.lock().unwrap_or_else(|p| p.into_inner());
        c.iter().rev().find(|v| v.clone_task == upid).cloned()
    }

    /// The target node of a migration task, from its log (remembered once read).
    pub async fn migration_target(&self, api: &flxp_pve::Pve, upid: &str) -> Option<String> {
        if let Some(t) = self
            .targets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(upid)
        {
            return Some(t.clone());
        }
        let lines = task_log(api, upid, LOG_LINES).await?;
        let target = lines.iter().find_map(|l| target_in(l))?;
        let mut t = self.targets.lock().unwrap_or_else(|p| p.into_inner());
        if t.len() > 4 * CREATED_KEPT {
            t.clear();
        }
        t.insert(upid.to_owned(), target.clone());
        Some(target)
    }

    /// Maintenance was set or cleared on a node through the API.
    pub fn maintenance(&self, zone: &str, node: &str, on: bool, changed: bool) {
        self.send(json!({ "event": "maintenance", "zone": zone, "node": node, "on": on, "changed": changed }));
    }

    /// A node was switched off or woken through the API.
    pub fn power(&self, zone: &str, node: &str, what: &str) {
        self.send(json!({ "event": "power", "zone": zone, "node": node, "summary": what }));
    }

    /// A daemon round ended: what it decided and why, in a sentence or a few.
    pub fn round(&self, r: &flxp_engine::daemon::RoundReport) {
        self.send(json!({
            "event": "round",
            "zone": r.zone,
            "time": r.time,
            "summary": round_summary(r),
            "done": r.migrations_done(),
            "failed": r.migrations_failed(),
            "power": r.power.as_ref().map(|p| json!({
                "decision": p.decision, "switchedOff": p.switched_off, "woken": p.woken, "back": p.back,
            })),
            "maintenance": r.maintenance.iter().map(|m| json!({
                "node": m.node, "running": m.state.running().len(),
            })).collect::<Vec<_>>(),
            "nextInSecs": r.next_in_secs,
        }));
    }

    /// Sends one event to every reader (none listening is fine).
    pub fn send(&self, event: Value) {
        let _ = self.tx.send(Arc::new(event));
    }

    /// A run started: its zone, goal and planned migrations.
    pub fn run_started(&self, zone: &str, goal: &str, migrations: usize) {
        self.send(
            json!({ "event": "run-started", "zone": zone, "goal": goal, "migrations": migrations }),
        );
    }

    /// A run ended, with how many migrations were done and failed.
    pub fn run_ended(&self, zone: &str, goal: &str, done: usize, failed: usize) {
        self.send(json!({ "event": "run-ended", "zone": zone, "goal": goal, "done": done, "failed": failed }));
    }

    /// A rolling maintenance was asked for (it may wait for the zone): the zone's last run from
    /// now on, its migrations counted by `progress`.
    pub fn rolling_asked(&self, zone: &str, nodes: &[String], progress: Arc<LiveProgress>) {
        let record = RollingRecord {
            nodes: nodes.to_vec(),
            progress,
            end: None,
        };
        let mut runs = self.rolling.lock().unwrap_or_else(|p| p.into_inner());
        runs.insert(zone.to_owned(), record);
    }

    /// The last rolling maintenance asked for in `zone`, if any.
    pub fn rolling_run(&self, zone: &str) -> Option<RollingRecord> {
        let runs = self.rolling.lock().unwrap_or_else(|p| p.into_inner());
        runs.get(zone).cloned()
    }

    /// A rolling maintenance started: a run of goal `rolling` naming its nodes in the order it
    /// takes them (how many migrations it makes is known only as each node is emptied).
    pub fn rolling_started(&self, zone: &str, nodes: &[String]) {
        self.send(
            json!({ "event": "run-started", "zone": zone, "goal": "rolling", "nodes": nodes }),
        );
    }

    /// A node of a rolling maintenance reached a step (the word its progress line keeps).
    pub fn rolling_step(&self, zone: &str, news: &flxp_engine::rolling::News) {
        self.send(json!({
            "event": "rolling-step", "zone": zone, "node": news.node,
            "step": news.step.as_str(), "summary": news.line,
        }));
    }

    /// A rolling maintenance ended: its migrations done and failed (as every run's end says),
    /// its outcome and the exit code `flxp rolling` would have had, and why it stopped; kept as
    /// the zone's last run's end.
    pub fn rolling_ended(&self, zone: &str, end: &RollingEnd) {
        if let Some(r) = self
            .rolling
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(zone)
        {
            r.end = Some(end.clone());
        }
        self.send(json!({
            "event": "run-ended", "zone": zone, "goal": "rolling",
            "done": end.done, "failed": end.failed, "outcome": end.outcome,
            "exitCode": end.exit_code, "error": end.error,
        }));
    }

    /// Ends every stream once the events sent before are delivered; later readers get none.
    pub fn close(&self) {
        self.closed.send_replace(true);
    }

    /// The server-sent-events stream of everything sent from now on, until [`Self::close`].
    pub fn stream(&self) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>> + use<>> {
        let rx = self.tx.subscribe();
        let closed = self.closed.subscribe();
        let events =
            futures_util::stream::unfold((rx, closed), |(mut rx, mut closed)| async move {
                let event = tokio::select! {
                    // What was sent before the close still goes out.
                    biased;
                    r = rx.recv() => match r {
                        Ok(v) => SseEvent::default().data(v.to_string()),
                        Err(broadcast::error::RecvError::Lagged(n)) => SseEvent::default()
                            .data(json!({ "event": "lagged", "missed": n }).to_string()),
                        Err(broadcast::error::RecvError::Closed) => return None,
                    },
                    _ = closed.wait_for(|c| *c) => return None,
                };
                Some((Ok(event), (rx, closed)))
            });
        // Proxies close idle connections; a comment every 15 s keeps the stream open.
        Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
    }
}

/// What a round decided, as the page says it: each part that acted, or why nothing happened.
pub fn round_summary(r: &flxp_engine::daemon::RoundReport) -> String {
    if let Some(s) = &r.standby {
        return format!("standing by: {s}");
    }
    if let Some(e) = &r.error {
        return format!("could not run: {e}");
    }
    let mut parts = Vec::new();
    for (what, x) in [("evacuation", &r.evacuation), ("balance", &r.balance)] {
        if let Some(x) = x {
            let (done, failed) = x
                .execution
                .as_ref()
                .map_or((0, 0), |e| (e.done.len(), e.failed.len()));
            parts.push(format!(
                "{what}: {} ({done} done, {failed} failed)",
                x.plan.summary
            ));
        }
    }
    if r.balance.is_none() {
        if let Some(t) = &r.trigger {
            parts.push(format!("nothing to balance: {}", t.reason));
        }
    }
    if let Some(p) = &r.power {
        parts.push(format!("power: {}", p.decision));
    }
    if parts.is_empty() {
        "nothing to do: no node in maintenance and balancing is off".to_owned()
    } else {
        parts.join("; ")
    }
}

/// The node in `starting migration of VM 101 to node 'pve2' (10.0.0.2)`, as qemu-server's
/// `PVE::QemuMigrate` and pve-container's `PVE::LXC::Migrate` log it.
fn target_in(line: &str) -> Option<String> {
    let rest = line.split_once("starting migration of ")?.1;
    let rest = rest.split_once(" to node '")?.1;
    let (node, _) = rest.split_once('\'')?;
    (!node.is_empty()).then(|| node.to_owned())
}

/// Up to `limit` lines of a task's log from its start; `None` when unreadable.
async fn task_log(api: &flxp_pve::Pve, upid: &str, limit: u64) -> Option<Vec<String>> {
    let upid: flxp_pve::types::Upid = upid.parse().ok()?;
    let query = flxp_pve::types::TaskLogQuery {
        start: Some(0),
        limit: Some(limit),
    };
    let lines = api.task_log(&upid, &query).await.ok()?;
    Some(lines.into_iter().filter_map(|l| l.t).collect())
}

/// What the poller last sent of a zone, to send only changes.
#[derive(Default)]
struct Seen {
    figures: Option<Value>,
    tasks: Option<Value>,
}

/// The shared poller: while anybody follows the stream, reads each zone every [`POLL`] and sends
/// its figures and tasks when they changed. Runs until the service stops.
pub async fn poll(live: Arc<Live>, zones: Arc<BTreeMap<String, Arc<crate::serve::zone::Zone>>>) {
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    loop {
        tokio::time::sleep(POLL).await;
        if !live.followed() {
            // A reader that comes later gets everything anew.
            seen.clear();
            continue;
        }
        for z in zones.values() {
            let last = seen.entry(z.name.clone()).or_default();
            if let Some(figures) = zone_figures(&z.api).await {
                if last.figures.as_ref() != Some(&figures) {
                    live.send(json!({ "event": "zone", "zone": z.name, "figures": figures }));
                    last.figures = Some(figures);
                }
            }
            if let Some(tasks) = zone_tasks(&live, &z.api).await {
                if last.tasks.as_ref() != Some(&tasks) {
                    live.send(json!({ "event": "tasks", "zone": z.name, "tasks": tasks }));
                    last.tasks = Some(tasks);
                }
            }
        }
    }
}

/// Each node's figures and guest counts from one `/cluster/resources` read. Memory is rounded to
/// a percent and CPU to 5 percent, so that noise alone sends nothing (each change makes the pages
/// shown read the zone again).
async fn zone_figures(api: &flxp_pve::Pve) -> Option<Value> {
    let resources = match api.cluster_resources(None).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(error = %e, "live poll: resources unreadable");
            return None;
        }
    };
    let mut nodes: BTreeMap<String, Value> = BTreeMap::new();
    let mut guests: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for r in &resources {
        match r.kind.as_deref() {
            Some("node") => {
                let name = r.node.clone().unwrap_or_default();
                nodes.insert(
                    name.clone(),
                    json!({
                        "name": name,
                        "status": r.status,
                        "memPercent": match (r.mem, r.maxmem) {
                            (Some(m), Some(max)) if max > 0 => Some(100 * m / max),
                            _ => None,
                        },
                        "maxmem": r.maxmem,
                        "cpuPercent": r.cpu.map(|c| (c * 20.0).round() * 5.0),
                        "maxcpu": r.maxcpu,
                    }),
                );
            }
            Some("qemu" | "lxc") if r.template != Some(true) => {
                let g = guests
                    .entry(r.node.clone().unwrap_or_default())
                    .or_default();
                g.0 += 1;
                if r.status.as_deref() == Some("running") {
                    g.1 += 1;
                }
            }
            _ => {}
        }
    }
    let list: Vec<Value> = nodes
        .into_iter()
        .map(|(name, mut v)| {
            let (all, running) = guests.get(&name).copied().unwrap_or_default();
            v["guests"] = json!(all);
            v["running"] = json!(running);
            v
        })
        .collect();
    Some(json!(list))
}

/// The zone's recent tasks, newest first, each running migration with its target and progress.
async fn zone_tasks(live: &Live, api: &flxp_pve::Pve) -> Option<Value> {
    let mut tasks = match api.cluster_tasks().await {
        Ok(t) => t,
        Err(e) => {
            tracing::debug!(error = %e, "live poll: tasks unreadable");
            return None;
        }
    };
    tasks.sort_by_key(|t| std::cmp::Reverse(t.starttime));
    tasks.truncate(TASKS_SHOWN);
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        let upid = t.upid.clone().unwrap_or_default();
        let migration = matches!(t.kind.as_deref(), Some("qmigrate" | "vzmigrate"));
        let mut v = json!({
            "upid": upid, "node": t.node, "type": t.kind, "id": t.id, "user": t.user,
            "starttime": t.starttime, "endtime": t.endtime, "status": t.status,
        });
        if migration {
            v["target"] = json!(live.migration_target(api, &upid).await);
        }
        if migration && t.is_running() {
            v["fraction"] = json!(progress(api, &upid).await);
        }
        out.push(v);
    }
    Some(json!(out))
}

/// A running live migration's progress from its newest log lines, as Proxmox's task viewer
/// shows it (`transferred 1.6 GiB of 8.0 GiB VM-state`).
async fn progress(api: &flxp_pve::Pve, upid: &str) -> Option<f64> {
    // A migration's log is a few hundred lines at most; the newest figure wins.
    let lines = task_log(api, upid, PROGRESS_LINES).await?;
    lines
        .iter()
        .rev()
        .find_map(|l| flxp_engine::progress::fraction_from_log(l))
}

/// How a rolling maintenance started through the API ended, for its `run-ended` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollingEnd {
    /// Migrations done.
    pub done: usize,
    /// Migrations failed.
    pub failed: usize,
    /// `done`, `stopped` (the service stopping, or its lease lapsing), `unsafe` (a node could
    /// not go out safely, nothing changed on it) or `failed`.
    pub outcome: &'static str,
    /// What `flxp rolling` exits with on the same end: 0, 1 (failed, stopped), 2 (a node
    /// unknown) or 3 (unsafe).
    pub exit_code: u8,
    /// Why it did not finish.
    pub error: Option<String>,
}

impl RollingEnd {
    /// The end of a run with these migrations done and failed; `stopping` when the run was asked
    /// to stop.
    pub fn new(
        result: &Result<flxp_engine::rolling::RollingReport, flxp_engine::rolling::RollingError>,
        (done, failed): (usize, usize),
        stopping: bool,
    ) -> Self {
        use flxp_engine::rolling::RollingError;
        let (outcome, exit_code) = match result {
            Ok(_) => ("done", 0),
            Err(RollingError::Unsafe { .. }) => ("unsafe", 3),
            Err(RollingError::UnknownNode { .. }) => ("failed", 2),
            Err(RollingError::Stopped { .. }) => ("stopped", 1),
            Err(_) if stopping => ("stopped", 1),
            Err(_) => ("failed", 1),
        };
        Self {
            done,
            failed,
            outcome,
            exit_code,
            error: result.as_ref().err().map(ToString::to_string),
        }
    }
}

/// The progress of a run: counted in the metrics (unless the caller counts them itself) and sent
/// live.
pub struct LiveProgress {
    /// The metrics' counter of migrations; `None` where the caller counts them (the daemon, at
    /// each round's end).
    pub meter: Option<MigrationMeter>,
    /// Where events go.
    pub live: Arc<Live>,
    /// Migrations done and failed so far.
    counts: (AtomicUsize, AtomicUsize),
}

impl std::fmt::Debug for LiveProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveProgress")
            .field("counts", &self.counts())
            .finish_non_exhaustive()
    }
}

impl LiveProgress {
    /// Progress sent to `live`, counted by `meter`.
    pub fn new(meter: Option<MigrationMeter>, live: Arc<Live>) -> Self {
        Self {
            meter,
            live,
            counts: (AtomicUsize::new(0), AtomicUsize::new(0)),
        }
    }

    /// Migrations done and failed so far.
    pub fn counts(&self) -> (usize, usize) {
        (
            self.counts.0.load(Ordering::Relaxed),
            self.counts.1.load(Ordering::Relaxed),
        )
    }
}

impl Progress for LiveProgress {
    fn event(&self, event: &Event) {
        if let Some(m) = &self.meter {
            m.event(event);
        }
        match event {
            Event::Done { .. } => self.counts.0.fetch_add(1, Ordering::Relaxed),
            Event::Failed { .. } => self.counts.1.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
        if let Ok(v) = serde_json::to_value(event) {
            self.live.send(v);
        }
    }

    fn wants_fractions(&self) -> bool {
        // The page shows each migration's bar move; one task-log read per poll is the price,
        // paid only while someone follows the stream.
        self.live.followed()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use super::*;

    #[tokio::test]
    async fn events_reach_every_reader_as_json() {
        let live = Arc::new(Live::default());
        let mut rx = live.tx.subscribe();
        let p = LiveProgress::new(
            Some(MigrationMeter(Arc::new(
                crate::serve::metrics::Metrics::new(),
            ))),
            Arc::clone(&live),
        );
        p.event(&Event::Progress {
            zone: "eu".into(),
            vmid: 101,
            fraction: 0.5,
        });
        live.run_ended("eu", "balance", 1, 0);
        let first = rx.recv().await.unwrap();
        assert_eq!(first["event"], "progress");
        assert_eq!(first["vmid"], 101);
        let second = rx.recv().await.unwrap();
        assert_eq!(second["event"], "run-ended");
        assert_eq!(second["done"], 1);
    }

    fn report() -> flxp_engine::daemon::RoundReport {
        flxp_engine::daemon::RoundReport::begin(
            "eu",
            1_764_400_000,
            std::time::Duration::from_secs(60),
        )
    }

    #[tokio::test]
    async fn a_round_says_what_it_decided_or_why_it_did_nothing() {
        let live = Live::default();
        let mut rx = live.tx.subscribe();
        let mut quiet = report();
        quiet.trigger = Some(flxp_core::balance::trigger::Decision {
            act: false,
            held: 0,
            reason: "imbalance 3.10 is below the threshold 10.00".into(),
        });
        live.round(&quiet);
        let e = rx.recv().await.unwrap();
        assert_eq!(e["event"], "round");
        assert_eq!(
            e["summary"],
            "nothing to balance: imbalance 3.10 is below the threshold 10.00"
        );
        assert_eq!(e["nextInSecs"], 60.0);
        assert_eq!(
            round_summary(&report()),
            "nothing to do: no node in maintenance and balancing is off"
        );
        let mut failed = report();
        failed.error = Some("zone unreadable".into());
        assert_eq!(round_summary(&failed), "could not run: zone unreadable");
        let mut standby = report();
        standby.standby = Some("held by flxp-b".into());
        assert_eq!(round_summary(&standby), "standing by: held by flxp-b");
    }

    #[test]
    fn a_migration_target_is_read_from_the_first_log_line() {
        assert_eq!(
            target_in("2026-12-01 18:00:00 starting migration of VM 105 to node 'pve2' (10.0.0.2)"),
            Some("pve2".to_owned())
        );
        assert_eq!(
            target_in("starting migration of CT 200 to node 'b' (::1)"),
            Some("b".to_owned())
        );
        assert_eq!(target_in("migration active, transferred 1 GiB"), None);
    }
}
