//! Reading the cluster again without reading all of it: a *refresh* reads only what a step's
//! safety check needs fresh (`/cluster/resources`, `/cluster/tasks`, HA's current status) and
//! reuses what the last *full* read ([`crate::collect`]) found of the rest (node notes, RRD rows,
//! guest volumes on local storages, HA rules and resources, datacenter options).
//!
//! A refresh turns into a full read when:
//! - there was none yet, or the last one is [`ExecuteOptions::full_read_every`] old (node notes
//!   an admin edits by hand are seen within that time: no cluster-wide endpoint returns them);
//! - something changed that this process did not do: a node's status, a guest that appeared,
//!   vanished or is on another node than the last read saw (other than a migration this process
//!   started, on its source or its target), a running task the last read did not see and this
//!   process did not start, HA's status of a node or service;
//! - this process wrote HA rules or cluster options;
//! - another flxp held the zone's lease since this process last did ([`ReadCache::another_acted`]):
//!   it may have written node notes (a maintenance mark) that no refresh would see.
//!
//! Node notes this process writes (maintenance and power marks, through [`ReadCache::watch`]'s
//! transport) are read again at once, that node's config alone. The cache lives in memory only:
//! lost on restart with no harm, the first read after it is a full one.
//!
//! [`ExecuteOptions::full_read_every`]: crate::ExecuteOptions::full_read_every

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use flxp_core::Snapshot;
use flxp_core::snapshot::{HaStatusEntry, Resource, Task};
use flxp_pve::types::{TaskStatus, Upid};
use flxp_pve::{Data, Pve, Request, Transport};
use tokio::time::Instant;

use crate::collect::{
    CollectError, Moving, Parts, Settled, assemble, collect_parts, optional, read_moving,
    read_notes, read_resources, read_settled, read_volumes, storage_avail_by_node,
};

/// Task types of a migration, whose `id` is the guest's vmid.
const MIGRATIONS: [&str; 3] = ["qmigrate", "vzmigrate", "hamigrate"];

/// What the last read saw of what can change without flxp: compared with the next refresh.
#[derive(Debug, Default)]
struct Baseline {
    /// Node → status.
    nodes: BTreeMap<String, String>,
    /// Guest → node.
    guests: BTreeMap<u32, String>,
    /// Guest → disk size (`maxdisk`): a disk added or resized changes the volumes kept.
    disks: BTreeMap<u32, u64>,
    /// Tasks listed.
    tasks: BTreeSet<String>,
    /// HA's status, without its clocks.
    ha: Vec<String>,
}

#[derive(Debug, Default)]
struct State {
    /// What the last full read found of the slowly changing parts.
    settled: Option<Settled>,
    /// When it was read, epoch seconds of the cluster.
    full_at: i64,
    /// When guest volumes were last listed, epoch seconds of the cluster.
    volumes_at: i64,
    /// What the last read saw; `None` before the first.
    baseline: Option<Baseline>,
    /// Migrations this process started: vmid → (source, or `None` for an HA move, target).
    expected: BTreeMap<u32, (Option<String>, String)>,
    /// Nodes whose notes this process wrote since the last read.
    noted: BTreeSet<String>,
    /// This process wrote HA rules or cluster options: the next read is a full one.
    rewritten: bool,
    /// Another flxp held the zone's lease since the last read: the next read is a full one.
    another: bool,
    /// The newest task list read, and when: what followers of migrations poll.
    last_tasks: Option<(Instant, Arc<Vec<Task>>)>,
}

/// What one zone's reads know between them; see the module docs. Shared by the executors of a
/// zone (the daemon keeps one per zone across rounds).
#[derive(Debug, Default)]
pub struct ReadCache {
    state: Mutex<State>,
    /// Held while the task list is read for followers: one read serves all who wait.
    polling: tokio::sync::Mutex<()>,
    /// The guests' entries of `/cluster/resources` last read for followers of HA moves.
    vms: Polled<Vec<Resource>>,
    /// HA's current status last read for followers of HA moves.
    ha: Polled<Vec<HaStatusEntry>>,
}

/// One read shared by every follower of a migration in flight: read again only when the newest
/// is a poll interval old or older than the follower's start, so that following several HA
/// moves costs one call per poll interval, not one per move.
#[derive(Debug)]
struct Polled<T> {
    last: tokio::sync::Mutex<Option<(Instant, Arc<T>)>>,
}

impl<T> Default for Polled<T> {
    fn default() -> Self {
        Self {
            last: tokio::sync::Mutex::new(None),
        }
    }
}

impl<T> Polled<T> {
    /// The newest read if read after `since` and less than `fresh_for` ago, else `read`'s.
    async fn get<F>(&self, fresh_for: Duration, since: Instant, read: F) -> flxp_pve::Result<Arc<T>>
    where
        F: std::future::Future<Output = flxp_pve::Result<T>>,
    {
        let mut last = self.last.lock().await;
        if let Some((at, value)) = last.as_ref() {
            if *at >= since && at.elapsed() < fresh_for {
                return Ok(Arc::clone(value));
            }
        }
        let value = Arc::new(read.await?);
        *last = Some((Instant::now(), Arc::clone(&value)));
        Ok(value)
    }
}

/// A read the last read of a zone did not expect, in words (why a full read was made).
type Why = String;

/// Something this process did not do, found by a refresh.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Change {
    /// In words.
    why: Why,
    /// `Some`: only guests appeared, vanished or changed disk size, on these nodes (no node,
    /// guest move, task or HA state changed); `None`: anything else.
    guests_on: Option<BTreeSet<String>>,
}

impl Change {
    /// A change that calls for a full read.
    fn all(why: Why) -> Self {
        Self {
            why,
            guests_on: None,
        }
    }
}

/// Every this many timed full reads at most, guest volumes are listed again too.
const VOLUMES_EVERY: i64 = 4;

/// What a due full read must read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    /// The first read: everything, node RRD too.
    First,
    /// Everything the reader wants.
    All,
    /// The timed read: what no cluster-wide call shows (notes, HA's config, options, RRD when
    /// wanted); guest volumes only if the cluster changed unexpectedly since the last read.
    Timed,
}

impl ReadCache {
    /// An empty cache: the first read is a full one.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `api` with a layer that tells this cache what it writes (notes, migrations, HA rules).
    pub fn watch(self: &Arc<Self>, api: &Pve) -> Pve {
        Pve::from_transport(Watched {
            inner: Arc::clone(api.transport()),
            cache: Arc::clone(self),
        })
    }

    /// Books a write made through [`Self::watch`]'s transport: a migration once Proxmox took
    /// it, notes and HA or option changes even when the answer was an error (a timeout may
    /// still have written them).
    fn wrote(&self, request: &Request) {
        let parts: Vec<&str> = request.path.split('/').collect();
        let segment = |i: usize| parts.get(i).map(|s| (*s).to_owned());
        let mut s = self.lock();
        match request.endpoint {
            "PUT /nodes/{node}/config" => {
                if let Some(node) = segment(2) {
                    drop(s);
                    self.notes_written(&node);
                }
            }
            "POST /nodes/{node}/qemu/{vmid}/migrate" | "POST /nodes/{node}/lxc/{vmid}/migrate" => {
                let vmid = segment(4).and_then(|v| v.parse::<u32>().ok());
                if let (Some(from), Some(vmid), Some(to)) = (segment(2), vmid, target(request)) {
                    s.expected.insert(vmid, (Some(from), to));
                }
            }
            "POST /cluster/ha/resources/{sid}/migrate" => {
                // `vm:101`, percent-encoded or not: the vmid is the trailing digits.
                let vmid = segment(4)
                    .and_then(|sid| {
                        sid.rsplit(|c: char| !c.is_ascii_digit())
                            .next()
                            .map(str::to_owned)
                    })
                    .and_then(|v| v.parse::<u32>().ok());
                if let (Some(vmid), Some(to)) = (vmid, target(request)) {
                    s.expected.insert(vmid, (None, to));
                }
            }
            e if e.contains(" /cluster/ha/") || e.contains(" /cluster/options") => {
                s.rewritten = true;
            }
            _ => {}
        }
    }

    /// Books a write of a node's notes made around this cache (not through [`Self::watch`]):
    /// the next read reads them back.
    pub fn notes_written(&self, node: &str) {
        self.lock().noted.insert(node.to_owned());
    }

    /// Books that another flxp held the zone's lease since this process last did (see
    /// [`crate::LeaseKeeper::another_acted`]): the next read is a full one, node notes included.
    pub fn another_acted(&self) {
        self.lock().another = true;
    }

    /// Books a migration this process is about to start, before its request is sent: a read
    /// made meanwhile must not take its task or its guest's move for someone else's.
    pub(crate) fn expect_move(&self, vmid: u32, from: &str, to: &str) {
        self.lock()
            .expected
            .insert(vmid, (Some(from.to_owned()), to.to_owned()));
    }

    /// The target of a running migration this process started. Anyone else's migration has its
    /// log read again at every read: it tells how much of the guest its target already holds.
    fn known_target(&self, task: &Task) -> Option<String> {
        let s = self.lock();
        let vmid = task.id.as_deref()?.parse::<u32>().ok()?;
        let (from, to) = s.expected.get(&vmid)?;
        let ours = from.is_none() || from.as_deref() == task.node.as_deref();
        ours.then(|| to.clone())
    }

    /// Why the next read must be a full one before anything else is read, if it must, and
    /// whether it is only the timed one (what can change unseen, node notes and HA's config, is
    /// read again; the guest volumes kept are still true unless the cluster changed unexpectedly).
    fn due(&self, now: i64, full_every: Duration) -> Option<(Why, Due)> {
        let s = self.lock();
        if s.settled.is_none() {
            return Some(("no full read yet".into(), Due::First));
        }
        if s.rewritten {
            return Some(("flxp changed HA rules or cluster options".into(), Due::All));
        }
        if s.another {
            // What can change unseen is read again, as on the timed read; volumes too when a
            // refresh would find that the cluster changed.
            let why = "another flxp held the zone's lease since the last read";
            return Some((why.into(), Due::Timed));
        }
        if now < s.full_at {
            // The cluster's clock went back: the age of what is kept is unknown.
            return Some(("the cluster's clock went back".into(), Due::All));
        }
        let every = i64::try_from(full_every.as_secs()).unwrap_or(i64::MAX);
        (now.saturating_sub(s.full_at) >= every).then(|| {
            let why = format!(
                "the last full read is {} s old (full-read-secs = {every})",
                now - s.full_at
            );
            // A disk added by hand shows in no cluster-wide figure: list volumes again now and
            // then even when nothing else changed.
            let stale = now.saturating_sub(s.volumes_at) >= every.saturating_mul(VOLUMES_EVERY);
            (why, if stale { Due::All } else { Due::Timed })
        })
    }

    /// What changed since the last read that this process did not do, if anything.
    fn unexpected(&self, resources: &[Resource], moving: &Moving) -> Option<Why> {
        self.change(resources, moving).map(|c| c.why)
    }

    /// [`Self::unexpected`], saying whether only guests came, went or changed disk size (and
    /// on which nodes): no one moved anything, so only those nodes' volumes need listing again.
    fn change(&self, resources: &[Resource], moving: &Moving) -> Option<Change> {
        let s = self.lock();
        let Some(base) = &s.baseline else {
            return Some(Change::all("no read yet".into()));
        };
        let nodes = node_statuses(resources);
        if nodes != base.nodes {
            return Some(Change::all("a node's status changed".into()));
        }
        let guests = guest_nodes(resources);
        // Guests that appeared, vanished or changed disk size: the first said, all their nodes.
        let mut why: Option<Why> = None;
        let mut touched = BTreeSet::new();
        for (vmid, node) in &guests {
            match base.guests.get(vmid) {
                None => {
                    why.get_or_insert_with(|| format!("guest {vmid} appeared on {node}"));
                    touched.insert(node.clone());
                }
                Some(was) if was != node => {
                    let ours = s.expected.get(vmid).is_some_and(|(from, to)| {
                        to == node && from.as_ref().is_none_or(|f| f == was)
                    });
                    if !ours {
                        return Some(Change::all(format!(
                            "guest {vmid} moved from {was} to {node}"
                        )));
                    }
                }
                Some(_) => {}
            }
        }
        for (gone, was) in base.guests.iter().filter(|(v, _)| !guests.contains_key(v)) {
            why.get_or_insert_with(|| format!("guest {gone} is gone"));
            touched.insert(was.clone());
        }
        let disks = guest_disks(resources);
        for (vmid, _) in disks.iter().filter(|(v, d)| base.disks.get(v) != Some(d)) {
            why.get_or_insert_with(|| format!("guest {vmid}'s disk size changed"));
            touched.extend(guests.get(vmid).cloned());
        }
        if let Ok(tasks) = &moving.tasks {
            let foreign = tasks.iter().find(|t| {
                let upid = t.upid.as_deref().unwrap_or_default();
                t.is_running() && !base.tasks.contains(upid) && !is_ours(&s, t)
            });
            if let Some(t) = foreign {
                return Some(Change::all(format!(
                    "task {} started",
                    t.upid.as_deref().unwrap_or("without a UPID")
                )));
            }
        }
        if let Ok(status) = &moving.ha_status {
            if ha_digest(status) != base.ha {
                return Some(Change::all("HA's status changed".into()));
            }
        }
        why.map(|why| Change {
            why,
            guests_on: Some(touched),
        })
    }

    /// The task list, read again only when the newest one is `fresh_for` old or older than
    /// `since`: every migration in flight polls through here, so following them all costs one
    /// call per poll interval.
    pub(crate) async fn tasks(
        &self,
        api: &Pve,
        fresh_for: Duration,
        since: Instant,
    ) -> flxp_pve::Result<Arc<Vec<Task>>> {
        let _one = self.polling.lock().await;
        let newest = self.lock().last_tasks.clone();
        let usable = |at: &Instant| *at >= since && at.elapsed() < fresh_for;
        if let Some((at, tasks)) = newest.filter(|(at, _)| usable(at)) {
            tracing::trace!(age = ?at.elapsed(), "task list reused");
            return Ok(tasks);
        }
        let tasks = Arc::new(api.cluster_tasks().await?);
        self.lock().last_tasks = Some((Instant::now(), Arc::clone(&tasks)));
        Ok(tasks)
    }

    /// The guests' entries of `/cluster/resources`, shared by followers as [`Self::tasks`] is.
    pub(crate) async fn vm_resources(
        &self,
        api: &Pve,
        fresh_for: Duration,
        since: Instant,
    ) -> flxp_pve::Result<Arc<Vec<Resource>>> {
        let read = api.cluster_resources(Some(flxp_pve::types::ResourceType::Vm));
        self.vms.get(fresh_for, since, read).await
    }

    /// HA's current status, shared by followers as [`Self::tasks`] is.
    pub(crate) async fn ha_status(
        &self,
        api: &Pve,
        fresh_for: Duration,
        since: Instant,
    ) -> flxp_pve::Result<Arc<Vec<HaStatusEntry>>> {
        self.ha.get(fresh_for, since, api.ha_status_current()).await
    }

    /// A task started at `since` from the shared task list ([`Self::tasks`]); asked of the task's
    /// node when the list does not hold it (Proxmox lists a new task once its node broadcast
    /// it) or cannot be read.
    pub(crate) async fn task_status(
        &self,
        api: &Pve,
        upid: &Upid,
        fresh_for: Duration,
        since: Instant,
    ) -> flxp_pve::Result<TaskStatus> {
        let wanted = upid.to_string();
        if let Ok(tasks) = self.tasks(api, fresh_for, since).await {
            if let Some(t) = tasks.iter().find(|t| t.upid.as_deref() == Some(&wanted)) {
                let running = t.is_running();
                return Ok(TaskStatus {
                    upid: wanted,
                    node: t.node.clone(),
                    starttime: t.starttime,
                    kind: t.kind.clone(),
                    id: t.id.clone(),
                    user: t.user.clone(),
                    status: if running { "running" } else { "stopped" }.into(),
                    exitstatus: if running { None } else { t.status.clone() },
                    ..TaskStatus::default()
                });
            }
        }
        api.task_status(upid).await
    }

    /// Remembers what a read saw: the baseline of the next comparison, and the end of the
    /// expectation of moves seen done.
    fn observe(&self, resources: &[Resource], moving: &Moving) {
        let mut s = self.lock();
        let guests = guest_nodes(resources);
        s.expected
            .retain(|vmid, (_, to)| guests.get(vmid).is_none_or(|n| n != to));
        let mut base = Baseline {
            nodes: node_statuses(resources),
            guests,
            disks: guest_disks(resources),
            ..Baseline::default()
        };
        if let Ok(tasks) = &moving.tasks {
            s.last_tasks = Some((Instant::now(), Arc::new(tasks.clone())));
            base.tasks = tasks.iter().filter_map(|t| t.upid.clone()).collect();
        }
        if let Ok(status) = &moving.ha_status {
            base.ha = ha_digest(status);
        }
        s.baseline = Some(base);
    }

    /// Keeps a node's notes read again on their own: no longer to be read.
    fn keep_notes(&self, node: &str, notes: Option<String>) {
        let mut s = self.lock();
        s.noted.remove(node);
        if let Some(extra) = s.settled.as_mut().and_then(|s| s.nodes.get_mut(node)) {
            extra.notes = notes;
        }
    }

    /// Gives a timed read made without guest volumes the kept ones, each on the node
    /// `resources` shows its guest on now.
    fn keep_volumes(&self, settled: &mut Settled, resources: &[Resource]) {
        let (kept, _) = self.settled_for(resources);
        for (node, extra) in &mut settled.nodes {
            extra.volumes = kept
                .nodes
                .get(node)
                .map(|e| e.volumes.clone())
                .unwrap_or_default();
        }
    }

    /// Gives a timed read made without RRD rows the kept ones (not stored: the caller stores).
    fn keep_rrd_rows(&self, settled: &mut Settled) {
        let s = self.lock();
        if let Some(kept) = &s.settled {
            for (node, extra) in &mut settled.nodes {
                extra.rrddata = kept.nodes.get(node).and_then(|e| e.rrddata.clone());
            }
        }
    }

    /// Gives a read made without RRD rows the kept ones, and keeps it as the last full read
    /// (its time stays that of the read that had the rows: the next timed one is not put off).
    fn keep_rrd(&self, settled: &mut Settled) {
        self.keep_rrd_rows(settled);
        let mut s = self.lock();
        s.settled = Some(settled.clone());
        s.noted.clear();
    }

    /// Keeps what a full read found; `volumes`: it listed guest volumes.
    fn store(&self, settled: &Settled, now: i64, volumes: bool) {
        let mut s = self.lock();
        if volumes {
            s.volumes_at = now;
        }
        s.settled = Some(settled.clone());
        s.full_at = now;
        s.noted.clear();
        s.rewritten = false;
        s.another = false;
    }

    /// The kept slow parts brought up to date with a fresh `/cluster/resources`: free storage
    /// from it, each guest's volumes on the node it is on now. Also the nodes whose notes this
    /// process wrote since (the caller reads them, then [`Self::keep_notes`]).
    fn settled_for(&self, resources: &[Resource]) -> (Settled, BTreeSet<String>) {
        let s = self.lock();
        let noted = s.noted.clone();
        let mut settled = s.settled.clone().unwrap_or_default();
        drop(s);
        let mut avail = storage_avail_by_node(resources);
        let guests = guest_nodes(resources);
        let mut moved = Vec::new();
        for (node, extra) in &mut settled.nodes {
            extra.storage_avail = avail.remove(node).unwrap_or_default();
            extra.volumes.retain(|v| {
                let there = v.vmid.and_then(|id| guests.get(&id));
                match there {
                    Some(n) if n != node => {
                        moved.push((n.clone(), v.clone()));
                        false
                    }
                    _ => true,
                }
            });
        }
        for (node, volume) in moved {
            if let Some(extra) = settled.nodes.get_mut(&node) {
                extra.volumes.push(volume);
            }
        }
        (settled, noted)
    }
}

/// Whether a task is a migration this process started.
fn is_ours(s: &State, t: &Task) -> bool {
    t.kind.as_deref().is_some_and(|k| MIGRATIONS.contains(&k))
        && t.id
            .as_deref()
            .and_then(|v| v.parse::<u32>().ok())
            .is_some_and(|v| s.expected.contains_key(&v))
}

/// The `target` parameter of a migration request.
fn target(request: &Request) -> Option<String> {
    let params: BTreeMap<String, String> = request.decode_params().ok()?;
    params.get("target").cloned()
}

fn node_statuses(resources: &[Resource]) -> BTreeMap<String, String> {
    resources
        .iter()
        .filter(|r| r.kind.as_deref() == Some("node"))
        .filter_map(|r| Some((r.node.clone()?, r.status.clone().unwrap_or_default())))
        .collect()
}

fn guest_disks(resources: &[Resource]) -> BTreeMap<u32, u64> {
    resources
        .iter()
        .filter(|r| matches!(r.kind.as_deref(), Some("qemu" | "lxc")))
        .filter_map(|r| Some((r.vmid?, r.maxdisk.unwrap_or(0))))
        .collect()
}

fn guest_nodes(resources: &[Resource]) -> BTreeMap<u32, String> {
    resources
        .iter()
        .filter(|r| matches!(r.kind.as_deref(), Some("qemu" | "lxc")))
        .filter_map(|r| Some((r.vmid?, r.node.clone()?)))
        .collect()
}

/// HA's status without what changes on its own: timestamps (in `timestamp` and at the end of
/// the parenthesis of an LRM's or master's `status`, pve-ha-manager `PVE/API2/HA/Status.pm`),
/// and a service's node, target and the states it passes through while it moves (`started`,
/// `migrate`, `relocate`): a move shows in `/cluster/resources` and the task list, which the
/// refresh compares on their own, so a move this process asked HA for is not taken for someone
/// else's change.
fn ha_digest(status: &[HaStatusEntry]) -> Vec<String> {
    let moving = |s: &Option<String>| {
        s.as_deref()
            .is_some_and(|s| matches!(s, "started" | "migrate" | "relocate"))
    };
    let mut out: Vec<String> = status
        .iter()
        .map(|e| {
            if e.kind.as_deref() == Some("service") {
                let state = (!moving(&e.state)).then_some(&e.state);
                let crm = (!moving(&e.crm_state)).then_some(&e.crm_state);
                return format!(
                    "{:?} {:?} {:?} {:?} {:?}",
                    e.id, state, crm, e.request_state, e.mode
                );
            }
            let status = e.status.as_deref().map(without_time);
            format!(
                "{:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
                e.id,
                e.node,
                status,
                e.state,
                e.crm_state,
                e.request_state,
                e.mode,
                e.target,
                e.quorate,
                e.armed_state
            )
        })
        .collect();
    out.sort();
    out
}

/// An LRM's or master's status without the time it ends with: `pve1 (active, Sat Nov 29
/// 07:15:34 2025)` is `pve1 (active)`.
fn without_time(status: &str) -> String {
    match (status.strip_suffix(')'), status.rfind(", ")) {
        (Some(_), Some(at)) if status[..at].contains(" (") => format!("{})", &status[..at]),
        _ => status.to_owned(),
    }
}

/// A full read: every part of Contract 1, kept in `cache` for the refreshes after it.
pub(crate) async fn full(api: &Pve, now: i64, cache: &ReadCache) -> Result<Snapshot, CollectError> {
    let known = |t: &Task| cache.known_target(t);
    let (resources, moving, settled, now) = collect_parts(api, now, &known).await?;
    cache.store(&settled, now, true);
    cache.observe(&resources, &moving);
    assemble(resources, moving, settled, now)
}

/// A refresh, or a full read when the module docs say so; either gives the whole Contract 1.
pub(crate) async fn read(
    api: &Pve,
    now: i64,
    cache: &ReadCache,
    full_every: Duration,
    rrd: bool,
) -> Result<Snapshot, CollectError> {
    let (resources, now) = read_resources(api, now).await?;
    let known = |t: &Task| cache.known_target(t);
    if let Some((why, due)) = cache.due(now, full_every) {
        tracing::debug!(%why, "full read");
        let parts = match due {
            Due::First => Parts::ALL,
            Due::All => Parts { rrd, volumes: true },
            Due::Timed => Parts {
                rrd,
                volumes: false,
            },
        };
        let (settled, moving) = futures_util::join!(
            read_settled(api, &resources, parts),
            read_moving(api, &known, true, now)
        );
        let mut settled = settled?;
        let mut listed = due != Due::Timed;
        if due == Due::Timed {
            match cache.unexpected(&resources, &moving) {
                Some(why) => {
                    listed = true;
                    tracing::info!(%why, "the cluster changed unexpectedly: reading all of it");
                    let volumes = Parts {
                        rrd: false,
                        volumes: true,
                    };
                    let rows = std::mem::take(&mut settled.nodes);
                    settled = read_settled(api, &resources, volumes).await?;
                    for (node, extra) in &mut settled.nodes {
                        extra.rrddata = rows.get(node).and_then(|e| e.rrddata.clone());
                    }
                }
                None => cache.keep_volumes(&mut settled, &resources),
            }
        }
        if !parts.rrd {
            // Not wanted by this reader: the rows kept (if any) stay as they were.
            cache.keep_rrd_rows(&mut settled);
        }
        cache.store(&settled, now, listed);
        cache.observe(&resources, &moving);
        return assemble(resources, moving, settled, now);
    }
    let moving = read_moving(api, &known, false, now).await;
    let settled = match cache.change(&resources, &moving) {
        Some(Change {
            why,
            guests_on: Some(nodes),
        }) => {
            // Guests were created or deleted (or a disk resized): nothing moved, no node's notes
            // changed with it. Their nodes' volumes are listed again, HA's config read again (a
            // new guest may come with its rules); the notes are kept.
            tracing::info!(%why, nodes = ?nodes, "guests came or went: reading their nodes' volumes and HA's config");
            let (mut settled, noted) = cache.settled_for(&resources);
            read_noted(api, cache, &mut settled, noted).await?;
            let (volumes, rules, ha_resources, options) = futures_util::join!(
                read_volumes(api, &resources, &nodes),
                api.ha_rules(),
                api.ha_resources(),
                api.cluster_options(),
            );
            for (node, listed) in volumes? {
                if let Some(extra) = settled.nodes.get_mut(&node) {
                    extra.volumes = listed;
                }
            }
            settled.ha_rules = optional("GET /cluster/ha/rules", rules)?;
            settled.ha_resources = optional("GET /cluster/ha/resources", ha_resources)?;
            settled.options = optional("GET /cluster/options", options)?;
            cache.keep_rrd(&mut settled);
            settled
        }
        Some(Change { why, .. }) => {
            tracing::info!(%why, "the cluster changed unexpectedly: reading all of it");
            // All but the RRD rows (pressure, a trigger's input, no step's safety): those are
            // read on the timed full reads only, so at most once per `full-read-secs`.
            let no_rrd = Parts {
                rrd: false,
                volumes: true,
            };
            let mut settled = read_settled(api, &resources, no_rrd).await?;
            cache.keep_rrd(&mut settled);
            settled
        }
        None => {
            let (mut settled, noted) = cache.settled_for(&resources);
            read_noted(api, cache, &mut settled, noted).await?;
            settled
        }
    };
    cache.observe(&resources, &moving);
    assemble(resources, moving, settled, now)
}

/// Reads again the notes of the `noted` nodes (this process wrote them) into `settled`.
async fn read_noted(
    api: &Pve,
    cache: &ReadCache,
    settled: &mut Settled,
    noted: BTreeSet<String>,
) -> Result<(), CollectError> {
    // A node read before it could be is kept in the list: a failed read leaves it there.
    for node in noted {
        let notes = match settled.nodes.get_mut(&node) {
            Some(extra) => {
                extra.notes = read_notes(api, &node).await?;
                extra.notes.clone()
            }
            // Not online at the last full read: nothing kept to update.
            None => None,
        };
        cache.keep_notes(&node, notes);
    }
    Ok(())
}

/// A transport that tells its [`ReadCache`] about the writes that succeed through it.
struct Watched {
    inner: Arc<dyn Transport>,
    cache: Arc<ReadCache>,
}

#[async_trait]
impl Transport for Watched {
    async fn send(&self, request: Request) -> flxp_pve::Result<Data> {
        if request.is_read() {
            return self.inner.send(request).await;
        }
        let answer = self.inner.send(request.clone()).await;
        // A failed notes or HA write may still have been made (a timeout): read them again.
        if answer.is_ok() || !request.endpoint.contains("/migrate") {
            self.cache.wrote(&request);
        }
        answer
    }

    fn server_time(&self) -> Option<i64> {
        self.inner.server_time()
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use flxp_core::snapshot::{NodeExtra, Volume};

    use super::*;

    fn node(name: &str, status: &str) -> Resource {
        Resource {
            kind: Some("node".into()),
            node: Some(name.into()),
            status: Some(status.into()),
            ..Resource::default()
        }
    }

    fn guest(vmid: u32, node: &str) -> Resource {
        Resource {
            kind: Some("qemu".into()),
            vmid: Some(vmid),
            node: Some(node.into()),
            ..Resource::default()
        }
    }

    fn moving(tasks: Vec<Task>, ha: Vec<HaStatusEntry>) -> Moving {
        Moving {
            tasks: Ok(tasks),
            ha_status: Ok(ha),
        }
    }

    fn migration(upid: &str, node: &str, vmid: u32) -> Task {
        Task {
            upid: Some(upid.into()),
            node: Some(node.into()),
            kind: Some("qmigrate".into()),
            id: Some(vmid.to_string()),
            ..Task::default()
        }
    }

    fn lrm(node: &str, status: &str) -> HaStatusEntry {
        HaStatusEntry {
            id: Some(format!("lrm:{node}")),
            kind: Some("lrm".into()),
            node: Some(node.into()),
            status: Some(status.into()),
            ..HaStatusEntry::default()
        }
    }

    #[test]
    fn the_time_in_an_lrm_status_is_not_a_change_and_its_mode_is() {
        assert_eq!(
            without_time("pve1 (active, Sat Nov 29 07:15:34 2025)"),
            "pve1 (active)"
        );
        assert_eq!(
            without_time("pve2 (maintenance mode, x)"),
            "pve2 (maintenance mode)"
        );
        assert_eq!(without_time("OK"), "OK");
        let cache = ReadCache::new();
        let resources = vec![node("a", "online"), guest(100, "a")];
        let at = |t: &str| moving(Vec::new(), vec![lrm("a", &format!("a (active, {t})"))]);
        cache.observe(&resources, &at("07:15:34"));
        assert_eq!(cache.unexpected(&resources, &at("07:20:00")), None);
        let maintenance = moving(Vec::new(), vec![lrm("a", "a (maintenance mode, 07:20:00)")]);
        assert_eq!(
            cache.unexpected(&resources, &maintenance).as_deref(),
            Some("HA's status changed")
        );
    }

    #[test]
    fn a_service_moving_is_not_a_change_of_ha_status_and_a_new_request_state_is() {
        let service = |node: &str, state: &str, request: &str| HaStatusEntry {
            id: Some("service:vm:100".into()),
            kind: Some("service".into()),
            node: Some(node.into()),
            state: Some(state.into()),
            crm_state: Some(state.into()),
            request_state: Some(request.into()),
            ..HaStatusEntry::default()
        };
        let cache = ReadCache::new();
        let resources = vec![node("a", "online"), node("b", "online"), guest(100, "a")];
        let ha = |e: HaStatusEntry| moving(Vec::new(), vec![e]);
        cache.observe(&resources, &ha(service("a", "started", "started")));
        // HA moving the guest this process asked it to move: states and node change.
        let migrating = ha(service("a", "migrate", "started"));
        assert_eq!(cache.unexpected(&resources, &migrating), None);
        assert_eq!(
            cache.unexpected(&resources, &ha(service("b", "started", "started"))),
            None
        );
        // An admin stopping it through HA, or HA fencing it, is a change.
        let stopped = ha(service("a", "started", "stopped"));
        assert_eq!(
            cache.unexpected(&resources, &stopped).as_deref(),
            Some("HA's status changed")
        );
        let fenced = ha(service("a", "fence", "started"));
        assert_eq!(
            cache.unexpected(&resources, &fenced).as_deref(),
            Some("HA's status changed")
        );
    }

    #[test]
    fn only_what_this_process_did_not_do_is_unexpected() {
        let cache = ReadCache::new();
        let before = vec![node("a", "online"), node("b", "online"), guest(100, "a")];
        let quiet = moving(Vec::new(), Vec::new());
        assert_eq!(
            cache.unexpected(&before, &quiet).as_deref(),
            Some("no read yet")
        );
        cache.observe(&before, &quiet);
        // This process's migration of 100 to b: its task and the guest on b are expected.
        cache.expect_move(100, "a", "b");
        let ours = moving(vec![migration("UPID:a:1", "a", 100)], Vec::new());
        assert_eq!(cache.unexpected(&before, &ours), None);
        let landed = vec![node("a", "online"), node("b", "online"), guest(100, "b")];
        assert_eq!(cache.unexpected(&landed, &quiet), None);
        cache.observe(&landed, &quiet);
        // Someone else's: a task, a move, a new guest, a node going down.
        let foreign = moving(vec![migration("UPID:b:2", "b", 100)], Vec::new());
        assert_eq!(
            cache.unexpected(&landed, &foreign).as_deref(),
            Some("task UPID:b:2 started")
        );
        let back = vec![node("a", "online"), node("b", "online"), guest(100, "a")];
        assert_eq!(
            cache.unexpected(&back, &quiet).as_deref(),
            Some("guest 100 moved from b to a")
        );
        let mut more = landed.clone();
        more.push(guest(101, "a"));
        assert_eq!(
            cache.unexpected(&more, &quiet).as_deref(),
            Some("guest 101 appeared on a")
        );
        let down = vec![node("a", "online"), node("b", "offline"), guest(100, "b")];
        assert_eq!(
            cache.unexpected(&down, &quiet).as_deref(),
            Some("a node's status changed")
        );
    }

    #[test]
    fn kept_volumes_follow_their_guest_and_free_room_comes_from_the_resources() {
        let cache = ReadCache::new();
        let volume = Volume {
            volid: Some("local-lvm:vm-100-disk-0".into()),
            vmid: Some(100),
            size: Some(64),
            content: Some("images".into()),
            format: Some("raw".into()),
        };
        let extra = |volumes: Vec<Volume>| NodeExtra {
            notes: Some("flxp.label.ssd".into()),
            volumes,
            ..NodeExtra::default()
        };
        let mut settled = Settled::default();
        settled
            .nodes
            .insert("a".into(), extra(vec![volume.clone()]));
        settled.nodes.insert("b".into(), extra(Vec::new()));
        cache.store(&settled, 0, true);
        let storage = Resource {
            kind: Some("storage".into()),
            node: Some("b".into()),
            storage: Some("local-lvm".into()),
            status: Some("available".into()),
            maxdisk: Some(100),
            disk: Some(40),
            ..Resource::default()
        };
        let resources = vec![
            node("a", "online"),
            node("b", "online"),
            guest(100, "b"),
            storage,
        ];
        cache.notes_written("a");
        let (got, noted) = cache.settled_for(&resources);
        assert_eq!(noted, BTreeSet::from(["a".to_owned()]));
        // Until read and kept, it stays to be read.
        assert_eq!(cache.settled_for(&resources).1, noted);
        cache.keep_notes("a", Some("flxp.maintenance".into()));
        let (kept, noted) = cache.settled_for(&resources);
        assert!(noted.is_empty());
        assert_eq!(kept.nodes["a"].notes.as_deref(), Some("flxp.maintenance"));
        assert!(got.nodes["a"].volumes.is_empty());
        assert_eq!(got.nodes["b"].volumes, [volume]);
        assert_eq!(got.nodes["b"].storage_avail["local-lvm"], 60);
        assert_eq!(got.nodes["b"].notes.as_deref(), Some("flxp.label.ssd"));
    }

    #[tokio::test(start_paused = true)]
    async fn followers_share_one_read_per_poll_interval_made_after_they_started() {
        let polled: Polled<u32> = Polled::default();
        let reads = std::sync::atomic::AtomicU32::new(0);
        let read = || async { Ok(reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1) };
        let poll = Duration::from_secs(2);
        let first = Instant::now();
        // Two moves followed at once: one read for both.
        assert_eq!(*polled.get(poll, first, read()).await.unwrap(), 1);
        assert_eq!(*polled.get(poll, first, read()).await.unwrap(), 1);
        // A move started after that read needs one of its own.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let second = Instant::now();
        assert_eq!(*polled.get(poll, second, read()).await.unwrap(), 2);
        assert_eq!(*polled.get(poll, first, read()).await.unwrap(), 2);
        // A poll interval later, read again.
        tokio::time::sleep(poll).await;
        assert_eq!(*polled.get(poll, first, read()).await.unwrap(), 3);
    }

    #[test]
    fn a_full_read_is_due_at_once_then_after_its_interval() {
        let cache = ReadCache::new();
        let every = Duration::from_secs(600);
        let due = |now: i64| cache.due(now, every);
        assert_eq!(due(0), Some(("no full read yet".into(), Due::First)));
        cache.store(&Settled::default(), 1000, true);
        assert_eq!(due(1599), None);
        assert_eq!(
            due(999),
            Some(("the cluster's clock went back".into(), Due::All))
        );
        let timed = "the last full read is 600 s old (full-read-secs = 600)".to_string();
        assert_eq!(due(1600), Some((timed, Due::Timed)));
        // Volumes listed at 1000 are listed again by the timed read at least 4 intervals on.
        cache.store(&Settled::default(), 3400, false);
        let old = "the last full read is 600 s old (full-read-secs = 600)".to_string();
        assert_eq!(due(4000), Some((old, Due::All)));
    }
}
