//! Collecting Contract 1 from a live Proxmox API.
//!
//! One `GET /cluster/resources` gives every node, guest and storage, each storage once per node
//! that can use it, with its size, use and status as that node reports them: the free bytes per
//! storage and the local storages holding guest disks come from there. Each online node then gets
//! two calls (its config for the notes, its `rrddata` for the latest pressure row), run
//! concurrently, plus, on a node with guests, one listing of each local storage that holds guest
//! disks (the disks a migration copies); HA rules, resources and status, the datacenter options
//! and the task list are one call each, alongside. So the cost is O(nodes) calls, never
//! O(guests). This module decides nothing: it only reads. The one exception to "never
//! O(guests)": the log of each *running* migration is read for its target, which
//! `/cluster/tasks` does not name, and for how far its copy got (few, and a guest in flight must
//! count on the node it is going to, once).

use std::collections::BTreeMap;

use futures_util::StreamExt;
use futures_util::stream;

use flxp_core::Snapshot;
use flxp_core::snapshot::{Ha, HaStatusEntry, NodeExtra, Resource, RrdRow, Task, Volume};
use flxp_pve::types::{ContentQuery, ManagerStatus, RrdQuery, RrdTimeframe, TaskLogQuery, Upid};
use flxp_pve::{ApiErrorKind, Pve, Transport};

/// Per-node calls in flight at once: enough to hide latency, few enough not to flood pveproxy.
const NODE_CONCURRENCY: usize = 16;

/// Why a snapshot could not be collected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CollectError {
    /// An API call failed; `endpoint` names it (`GET /nodes/pve1/rrddata`).
    #[error("collecting the snapshot: {endpoint} failed")]
    Api {
        /// The call that failed.
        endpoint: String,
        /// What the API client reported (boxed: the client's error is large).
        #[source]
        source: Box<flxp_pve::Error>,
    },
}

fn api_err(endpoint: impl Into<String>) -> impl FnOnce(flxp_pve::Error) -> CollectError {
    let endpoint = endpoint.into();
    move |source| CollectError::Api {
        endpoint,
        source: Box::new(source),
    }
}

/// What a failed read of one part of the snapshot means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// The part is not available to us: no permission (403) or an endpoint this Proxmox does
    /// not have (501, e.g. HA rules before 9). It is left out.
    Unavailable,
    /// Proxmox's proxy cannot reach the node the call is about (595-599): it is shutting down
    /// or just lost its link, as good as offline for this read.
    NodeUnreachable,
    /// Anything else: the snapshot cannot be trusted, so reading it fails.
    Fault,
}

impl Failure {
    fn of(e: &flxp_pve::Error) -> Self {
        match e.kind() {
            Some(ApiErrorKind::PermissionDenied | ApiErrorKind::NotImplemented) => {
                Self::Unavailable
            }
            Some(ApiErrorKind::ProxyUnreachable) => Self::NodeUnreachable,
            _ => Self::Fault,
        }
    }

    /// How a call's result failed, if it did.
    fn of_result<T>(result: &flxp_pve::Result<T>) -> Option<Self> {
        result.as_ref().err().map(Self::of)
    }
}

/// Reads an optional part: unavailable is empty (with a warning), any other failure an error.
pub(crate) fn optional<T: Default>(
    endpoint: &str,
    result: flxp_pve::Result<T>,
) -> Result<T, CollectError> {
    match result {
        Ok(v) => Ok(v),
        Err(e) if Failure::of(&e) == Failure::Unavailable => {
            tracing::warn!(endpoint, error = %e, "left out of the snapshot");
            Ok(T::default())
        }
        Err(e) => Err(api_err(endpoint)(e)),
    }
}

/// Gives each `service` entry HA is moving (`migrate`, `relocate`) the target the CRM's own
/// state names: `status/current` leaves it out, and the move's task starts only on a later round
/// of the source's LRM.
fn add_ha_targets(status: &mut [HaStatusEntry], manager: &ManagerStatus) {
    for e in status.iter_mut().filter(|e| e.target.is_none()) {
        let Some(s) = e
            .sid
            .as_deref()
            .and_then(|sid| manager.service_status.get(sid))
        else {
            continue;
        };
        if matches!(s.state.as_deref(), Some("migrate" | "relocate")) {
            e.target = s.target.clone().filter(|t| !t.is_empty());
            e.crm_state
                .get_or_insert_with(|| s.state.clone().unwrap_or_default());
        }
    }
}

/// Task types whose log names the target node on an early line.
const MIGRATION_TASKS: [&str; 2] = ["qmigrate", "vzmigrate"];
/// Log lines read per running migration: the target is on the first, after any HA preamble; the
/// copy's progress follows, about a line a second (qemu-server's `phase2` polls QEMU every
/// second), so this covers more than an hour of it.
const MIGRATION_LOG_LINES: u64 = 5000;
/// How long before the snapshot's time a migration's progress must have been logged for the
/// target's `mem` in the same snapshot to show it: pvestatd sends node figures every 10 s, and
/// twice that leaves room for a late round and for node clocks a little apart.
const ARRIVAL_LAG_SECS: i64 = 20;

/// The task list, each running `qmigrate`/`vzmigrate` with its `target`: from `known` when it
/// knows it, else read from its log, which then also gives the share of the guest's memory the
/// target's figure holds by the snapshot's time `now` (`arrived`).
async fn tasks_with_targets<T: Transport + ?Sized>(
    api: &Pve<T>,
    known: &(dyn Fn(&Task) -> Option<String> + Sync),
    now: i64,
) -> flxp_pve::Result<Vec<Task>> {
    let mut tasks = api.cluster_tasks().await?;
    for t in tasks
        .iter_mut()
        .filter(|t| t.is_running() && t.target.is_none())
    {
        t.target = known(t);
    }
    let running: Vec<usize> = tasks
        .iter()
        .enumerate()
        .filter(|(_, t)| {
            t.is_running()
                && t.target.is_none()
                && t.kind
                    .as_deref()
                    .is_some_and(|k| MIGRATION_TASKS.contains(&k))
        })
        .map(|(i, _)| i)
        .collect();
    let found = stream::iter(running)
        .map(|i| {
            let (upid, start) = (tasks[i].upid.clone(), tasks[i].starttime);
            async move { (i, migration_log(api, upid.as_deref(), start, now).await) }
        })
        .buffer_unordered(NODE_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    for (i, (target, arrived)) in found {
        tasks[i].target = target;
        tasks[i].arrived = arrived;
    }
    Ok(tasks)
}

/// The target of a running migration from its log, and the share of the guest's memory the
/// target's figure holds at `now` ([`arrived_by`]); no target (the model then treats it as
/// unknown and says so) when the log cannot be read or names none.
async fn migration_log<T: Transport + ?Sized>(
    api: &Pve<T>,
    upid: Option<&str>,
    starttime: Option<i64>,
    now: i64,
) -> (Option<String>, Option<f64>) {
    let upid: Upid = match upid.map(str::parse) {
        Some(Ok(u)) => u,
        Some(Err(e)) => {
            tracing::warn!(error = %e, "migration task with an unreadable UPID: target unknown");
            return (None, None);
        }
        None => return (None, None),
    };
    let query = TaskLogQuery {
        start: Some(0),
        limit: Some(MIGRATION_LOG_LINES),
    };
    match api.task_log(&upid, &query).await {
        Ok(lines) => {
            let lines: Vec<&str> = lines.iter().filter_map(|l| l.t.as_deref()).collect();
            let target = lines.iter().find_map(|l| target_in_log_line(l));
            if target.is_none() {
                tracing::warn!(%upid, "migration log names no target node: target unknown");
            }
            let arrived = target
                .and(starttime)
                .and_then(|s| arrived_by(&lines, s, now));
            (target.map(str::to_owned), arrived)
        }
        Err(e) => {
            tracing::warn!(%upid, error = %e, "migration log unreadable: target unknown");
            (None, None)
        }
    }
}

/// The share of a live migration's memory its target held by `now`, from its log: the last
/// `transferred X of Y VM-state` line logged at least [`ARRIVAL_LAG_SECS`] before `now`, so that
/// the node figures read at `now` already show it. The pages a VM's target receives are what
/// QEMU has sent (zero pages cost almost nothing and take no memory), so the share, taken of the
/// guest's footprint, is at most what its target's `mem` holds. `None` when no such line is
/// there, or the log's stamps cannot be placed in time. Lines are stamped in the source node's
/// local time: its offset from the task's `starttime` (epoch seconds) places them, a zone
/// offset being a multiple of 15 minutes.
fn arrived_by(lines: &[&str], starttime: i64, now: i64) -> Option<f64> {
    let first = lines.iter().find_map(|l| local_stamp(l))?;
    let zone = ((starttime - first) as f64 / 900.0).round() as i64 * 900;
    lines
        .iter()
        .filter(|l| local_stamp(l).is_some_and(|t| t + zone + ARRIVAL_LAG_SECS <= now))
        .filter(|l| l.contains(" VM-state"))
        .filter_map(|l| crate::progress::fraction_from_log(l))
        .next_back()
}

/// The stamp a task log line starts with (`2025-11-29 12:00:03 ...`) as seconds since the epoch
/// of the same calendar, read as if it were UTC.
fn local_stamp(line: &str) -> Option<i64> {
    let stamp = line.get(..19)?.as_bytes();
    let sep = [(4, b'-'), (7, b'-'), (10, b' '), (13, b':'), (16, b':')];
    if sep.iter().any(|&(i, c)| stamp[i] != c) {
        return None;
    }
    let num = |at: usize, len: usize| -> Option<i64> {
        let digits = &stamp[at..at + len];
        digits
            .iter()
            .all(u8::is_ascii_digit)
            .then(|| digits.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (h, mi, s) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3_600 + mi * 60 + s)
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (H. Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The node in `starting migration of VM 101 to node 'pve2' (10.0.0.2)`, as qemu-server's
/// `PVE::QemuMigrate` and pve-container's `PVE::LXC::Migrate` log it (`CT` for containers).
fn target_in_log_line(line: &str) -> Option<&str> {
    let rest = line.split_once("starting migration of ")?.1;
    let rest = rest.split_once(" to node '")?.1;
    let (node, _) = rest.split_once('\'')?;
    (!node.is_empty()).then_some(node)
}

/// The newest row that holds any data source besides `time` (Proxmox may end with empty buckets).
fn latest_row_with_data(rows: Vec<RrdRow>) -> Option<RrdRow> {
    rows.into_iter()
        .filter(|r| r.0.keys().any(|k| k != "time"))
        .max_by(|a, b| {
            let t = |r: &RrdRow| r.get("time").unwrap_or(f64::NEG_INFINITY);
            t(a).total_cmp(&t(b))
        })
}

/// What `/cluster/resources` says of one node's storages: free bytes per storage and the local
/// storages that hold guest disks.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct NodeStorages {
    /// `maxdisk − disk` of each storage whose status is `available`, by storage id.
    avail: BTreeMap<String, u64>,
    /// Storages a migration copies from: available, not shared, `images` or `rootdir` content.
    local_disks: Vec<String>,
}

/// Whether a storage entry of `/cluster/resources` holds guest disks that a migration copies:
/// not shared, with `images` (VM disks) or `rootdir` (container volumes) content (its status is
/// checked by the caller).
fn holds_local_disks(r: &Resource) -> bool {
    r.shared != Some(true)
        && r.content.as_deref().is_some_and(|c| {
            c.split(',')
                .any(|c| matches!(c.trim(), "images" | "rootdir"))
        })
}

/// The storages of each node from the `storage` entries of `/cluster/resources` (one per node
/// that can use the storage). Only entries with status `available` count: `unknown` means the
/// node's pvestatd reported no figures for it (inactive, unreachable, or the node is down).
/// Free bytes are `maxdisk − disk` (the storage's total and used as pvestatd broadcasts them).
fn storages_by_node(resources: &[Resource]) -> BTreeMap<&str, NodeStorages> {
    let mut out: BTreeMap<&str, NodeStorages> = BTreeMap::new();
    for r in resources.iter().filter(|r| {
        r.kind.as_deref() == Some("storage") && r.status.as_deref() == Some("available")
    }) {
        let (Some(node), Some(storage)) = (r.node.as_deref(), r.storage.as_deref()) else {
            continue;
        };
        let entry = out.entry(node).or_default();
        if let (Some(total), Some(used)) = (r.maxdisk, r.disk) {
            entry
                .avail
                .insert(storage.to_owned(), total.saturating_sub(used));
        }
        if holds_local_disks(r) && !entry.local_disks.iter().any(|s| s == storage) {
            entry.local_disks.push(storage.to_owned());
        }
    }
    out
}

/// The guest volumes on a node's local guest-disk storages, one listing each; an unreadable
/// listing (403, 501) leaves its volumes out.
async fn local_volumes<T: Transport + ?Sized>(
    api: &Pve<T>,
    node: &str,
    local: &[String],
) -> Result<Vec<Volume>, CollectError> {
    // A node has few local storages: all listed at once (a stream's closure here would make the
    // daemon's round future lose `Send`).
    let query = ContentQuery::default();
    let calls = local
        .iter()
        .map(|storage| api.storage_content(node, storage, &query));
    let listed = futures_util::future::join_all(calls).await;
    let mut volumes = Vec::new();
    for (storage, got) in local.iter().zip(listed) {
        let endpoint = format!("GET /nodes/{node}/storage/{storage}/content");
        volumes.extend(
            optional(&endpoint, got)?
                .into_iter()
                .filter(Volume::is_guest_disk),
        );
    }
    Ok(volumes)
}

/// Which of the per-node parts a read of [`Settled`] reads; notes always.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Parts {
    /// The latest RRD row (node pressure).
    pub rrd: bool,
    /// Guest volumes on local storages (one call per such storage of a node with guests).
    pub volumes: bool,
}

impl Parts {
    /// Every part: a one-off read.
    pub const ALL: Self = Self {
        rrd: true,
        volumes: true,
    };
}

/// Notes, the latest RRD row and the storage figures of one online node, as `parts` asks;
/// `storages` comes from `/cluster/resources`, and its local guest-disk storages are listed when
/// the node has guests.
async fn node_extra<T: Transport + ?Sized>(
    api: &Pve<T>,
    node: String,
    storages: NodeStorages,
    has_guests: bool,
    parts: Parts,
) -> Result<(String, Option<NodeExtra>), CollectError> {
    let rrd = parts.rrd;
    let query = RrdQuery {
        timeframe: RrdTimeframe::Hour,
        cf: None,
    };
    let local: &[String] = if has_guests && parts.volumes {
        &storages.local_disks
    } else {
        &[]
    };
    let rrd_rows = async {
        match rrd {
            true => api.node_rrddata(&node, &query).await,
            false => Ok(Vec::new()),
        }
    };
    let (config, rrd, volumes) = futures_util::join!(
        api.node_config(&node),
        rrd_rows,
        local_volumes(api, &node, local)
    );
    // A node listed online that Proxmox's proxy cannot reach now (595: it is shutting down or
    // just lost its link) is as good as offline for this round: no migration reaches it.
    let unreachable = Some(Failure::NodeUnreachable);
    if Failure::of_result(&config) == unreachable || Failure::of_result(&rrd) == unreachable {
        tracing::warn!(
            node,
            "unreachable through Proxmox's proxy while the snapshot was read: counted offline"
        );
        return Ok((node, None));
    }
    let config = optional(&format!("GET /nodes/{node}/config"), config)?;
    let rows = optional(&format!("GET /nodes/{node}/rrddata"), rrd)?;
    let extra = NodeExtra {
        notes: config.description.filter(|d| !d.trim().is_empty()),
        rrddata: latest_row_with_data(rows),
        storage_avail: storages.avail,
        volumes: volumes?,
    };
    Ok((node, Some(extra)))
}

/// What changes as guests move, read on every read of the cluster: the task list (running
/// migrations with their targets) and HA's status (HA moves with theirs).
pub(crate) struct Moving {
    /// `GET /cluster/tasks`, running migrations with their `target`.
    pub tasks: flxp_pve::Result<Vec<Task>>,
    /// `GET /cluster/ha/status/current`, HA moves with their `target`.
    pub ha_status: Result<Vec<HaStatusEntry>, CollectError>,
}

/// Whether HA's status has a service whose move target only the manager status names: one in
/// `migrate`/`relocate` without a target, or one without a CRM state.
fn needs_manager_status(status: &[HaStatusEntry]) -> bool {
    status.iter().any(|e| {
        e.kind.as_deref() == Some("service")
            && e.target.is_none()
            && e.crm_state
                .as_deref()
                .is_none_or(|s| matches!(s, "migrate" | "relocate"))
    })
}

/// Reads [`Moving`]; `known` gives the target of a running migration when it is already known
/// (its log is then not read); `always_manager` reads HA's manager status even when no service
/// needs it (the full read does, so that its call count does not depend on HA's state).
pub(crate) async fn read_moving<T: Transport + ?Sized>(
    api: &Pve<T>,
    known: &(dyn Fn(&Task) -> Option<String> + Sync),
    always_manager: bool,
    now: i64,
) -> Moving {
    let (tasks, ha_status) = futures_util::join!(
        tasks_with_targets(api, known, now),
        ha_status_with_targets(api, always_manager)
    );
    Moving { tasks, ha_status }
}

/// HA's current status, each move HA has queued with the target its manager status names.
async fn ha_status_with_targets<T: Transport + ?Sized>(
    api: &Pve<T>,
    always_manager: bool,
) -> Result<Vec<HaStatusEntry>, CollectError> {
    let (status, manager) = if always_manager {
        let (s, m) = futures_util::join!(api.ha_status_current(), api.ha_manager_status());
        (s, Some(m))
    } else {
        (api.ha_status_current().await, None)
    };
    let mut status = optional("GET /cluster/ha/status/current", status)?;
    let manager = match manager {
        Some(m) => Some(m),
        None if needs_manager_status(&status) => Some(api.ha_manager_status().await),
        None => None,
    };
    if let Some(manager) = manager {
        // Without the targets of HA moves, a move HA has queued counts on its source only.
        let manager = optional("GET /cluster/ha/status/manager_status", manager)?;
        add_ha_targets(&mut status, &manager.manager_status);
    }
    Ok(status)
}

/// What changes only when someone edits it: node notes, RRD rows, guest volumes on local
/// storages, HA rules and resources, the datacenter options. Read on a full read only.
#[derive(Debug, Clone, Default)]
pub(crate) struct Settled {
    /// Notes, latest RRD row, storage figures and local volumes of each online node read.
    pub nodes: BTreeMap<String, NodeExtra>,
    /// Nodes listed online that Proxmox's proxy could not reach: counted offline.
    pub unreachable: std::collections::BTreeSet<String>,
    /// `GET /cluster/ha/rules`.
    pub ha_rules: Vec<flxp_core::snapshot::HaRule>,
    /// `GET /cluster/ha/resources`.
    pub ha_resources: Vec<flxp_core::snapshot::HaResource>,
    /// `GET /cluster/options`.
    pub options: serde_json::Map<String, serde_json::Value>,
}

/// Reads [`Settled`] for the online nodes of `resources`: per online node its notes, with
/// `parts.rrd` its RRD, with `parts.volumes` one call per local guest-disk storage of a node with
/// guests; then HA rules, HA resources and options.
pub(crate) async fn read_settled<T: Transport + ?Sized>(
    api: &Pve<T>,
    resources: &[Resource],
    parts: Parts,
) -> Result<Settled, CollectError> {
    let online: Vec<String> = resources
        .iter()
        .filter(|r| r.kind.as_deref() == Some("node") && r.status.as_deref() == Some("online"))
        .filter_map(|r| r.node.clone())
        .collect();
    tracing::debug!(
        resources = resources.len(),
        online_nodes = online.len(),
        "collecting per-node data"
    );
    let with_guests: std::collections::BTreeSet<&str> = resources
        .iter()
        .filter(|r| matches!(r.kind.as_deref(), Some("qemu" | "lxc")))
        .filter_map(|r| r.node.as_deref())
        .collect();
    let mut storages = storages_by_node(resources);
    let per_node = stream::iter(online)
        .map(|node| {
            let has_guests = with_guests.contains(node.as_str());
            let node_storages = storages.remove(node.as_str()).unwrap_or_default();
            node_extra(api, node, node_storages, has_guests, parts)
        })
        .buffer_unordered(NODE_CONCURRENCY)
        .collect::<Vec<_>>();
    let (per_node, rules, ha_resources, options) = futures_util::join!(
        per_node,
        api.ha_rules(),
        api.ha_resources(),
        api.cluster_options(),
    );
    let mut settled = Settled::default();
    for item in per_node {
        match item? {
            (node, Some(extra)) => {
                settled.nodes.insert(node, extra);
            }
            (node, None) => {
                settled.unreachable.insert(node);
            }
        }
    }
    settled.ha_rules = optional("GET /cluster/ha/rules", rules)?;
    settled.ha_resources = optional("GET /cluster/ha/resources", ha_resources)?;
    settled.options = optional("GET /cluster/options", options)?;
    Ok(settled)
}

/// The guest volumes on the local guest-disk storages of each of `nodes` (none on a node without
/// guests), one listing per storage: what guests coming or going change, without the rest of a
/// full read.
pub(crate) async fn read_volumes<T: Transport + ?Sized>(
    api: &Pve<T>,
    resources: &[Resource],
    nodes: &std::collections::BTreeSet<String>,
) -> Result<BTreeMap<String, Vec<Volume>>, CollectError> {
    let with_guests: std::collections::BTreeSet<&str> = resources
        .iter()
        .filter(|r| matches!(r.kind.as_deref(), Some("qemu" | "lxc")))
        .filter_map(|r| r.node.as_deref())
        .collect();
    let storages = storages_by_node(resources);
    let mut out = BTreeMap::new();
    for node in nodes {
        let local: &[String] = match storages.get(node.as_str()) {
            Some(s) if with_guests.contains(node.as_str()) => &s.local_disks,
            _ => &[],
        };
        out.insert(node.clone(), local_volumes(api, node, local).await?);
    }
    Ok(out)
}

/// The notes of one node (`description` of its config), for a re-read of only what flxp itself
/// wrote; `Ok(None)` when the token may not read them.
pub(crate) async fn read_notes<T: Transport + ?Sized>(
    api: &Pve<T>,
    node: &str,
) -> Result<Option<String>, CollectError> {
    let config = optional(
        &format!("GET /nodes/{node}/config"),
        api.node_config(node).await,
    )?;
    Ok(config.description.filter(|d| !d.trim().is_empty()))
}

/// The free bytes per storage of each node, from the `storage` entries of `/cluster/resources`.
pub(crate) fn storage_avail_by_node(
    resources: &[Resource],
) -> BTreeMap<String, BTreeMap<String, u64>> {
    storages_by_node(resources)
        .into_iter()
        .map(|(n, s)| (n.to_owned(), s.avail))
        .collect()
}

/// Contract 1 from its parts: unreachable nodes are counted offline, empty node extras left out.
pub(crate) fn assemble(
    mut resources: Vec<Resource>,
    moving: Moving,
    settled: Settled,
    now: i64,
) -> Result<Snapshot, CollectError> {
    for r in resources.iter_mut().filter(|r| {
        r.kind.as_deref() == Some("node")
            && r.node
                .as_deref()
                .is_some_and(|n| settled.unreachable.contains(n))
    }) {
        r.status = Some("offline".into());
    }
    let nodes = settled
        .nodes
        .into_iter()
        .filter(|(_, e)| !e.is_empty())
        .collect();
    Ok(Snapshot {
        resources,
        nodes,
        ha: Ha {
            rules: settled.ha_rules,
            resources: settled.ha_resources,
            status: moving.ha_status?,
        },
        options: settled.options,
        tasks: optional("GET /cluster/tasks", moving.tasks)?,
        time: Some(now),
    })
}

/// Reads `/cluster/resources` and the cluster's time (its answers' `Date`, else `now`).
pub(crate) async fn read_resources<T: Transport + ?Sized>(
    api: &Pve<T>,
    now: i64,
) -> Result<(Vec<Resource>, i64), CollectError> {
    let resources = api
        .cluster_resources(None)
        .await
        .map_err(api_err("GET /cluster/resources"))?;
    Ok((resources, api.server_time().unwrap_or(now)))
}

/// A full read split into its parts (see [`collect_snapshot`]).
pub(crate) async fn collect_parts<T: Transport + ?Sized>(
    api: &Pve<T>,
    now: i64,
    known: &(dyn Fn(&Task) -> Option<String> + Sync),
) -> Result<(Vec<Resource>, Moving, Settled, i64), CollectError> {
    let (resources, now) = read_resources(api, now).await?;
    let (settled, moving) = futures_util::join!(
        read_settled(api, &resources, Parts::ALL),
        read_moving(api, known, true, now)
    );
    Ok((resources, moving, settled?, now))
}

/// Collects Contract 1 from a live API; `time` is the cluster's clock when its answers say it
/// ([`Pve::server_time`]), else `now` (epoch seconds of this machine).
///
/// Calls: one `/cluster/resources`, then concurrently two per online node (notes and RRD, and one
/// per local guest-disk storage of a node with guests) plus HA rules, resources, status, options
/// and tasks. HA, notes, RRD rows and volume listings that the token may not read (403) or this
/// Proxmox lacks (501) are left out; any other failure is an error naming the call.
pub async fn collect_snapshot<T: Transport + ?Sized>(
    api: &Pve<T>,
    now: i64,
) -> Result<Snapshot, CollectError> {
    let (resources, moving, settled, now) = collect_parts(api, now, &|_| None).await?;
    assemble(resources, moving, settled, now)
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeMap;
    use std::time::Duration;

    use flxp_core::snapshot::{HaResource, HaRule, HaStatusEntry, Resource, Task};
    use flxp_pve::fake::FakeApi;
    use flxp_sim::SimHandle;
    use flxp_sim::scenario::{ErrorFault, FaultSpec};

    use super::*;
    use crate::sim_client::serve_snapshot;

    /// The cluster of `source`, simulated, answering `GET path` with this Proxmox error.
    async fn simulated(
        source: &Snapshot,
        (path, status, message): (&str, u16, &str),
    ) -> (SimHandle, Pve) {
        let (sim, client) = serve_snapshot(source).await;
        sim.sim().world().faults.set(FaultSpec {
            errors: vec![ErrorFault::get(path, status, message)],
            ..FaultSpec::default()
        });
        (sim, client.into())
    }

    fn node(name: &str, status: &str) -> Resource {
        Resource {
            id: Some(format!("node/{name}")),
            kind: Some("node".into()),
            node: Some(name.into()),
            status: Some(status.into()),
            maxmem: Some(64 << 30),
            mem: Some(16 << 30),
            maxcpu: Some(32.0),
            cpu: Some(0.1),
            ..Resource::default()
        }
    }

    fn guest(vmid: u32, node: &str) -> Resource {
        Resource {
            id: Some(format!("qemu/{vmid}")),
            kind: Some("qemu".into()),
            node: Some(node.into()),
            vmid: Some(vmid),
            name: Some(format!("vm{vmid}")),
            status: Some("running".into()),
            maxmem: Some(4 << 30),
            mem: Some(2 << 30),
            maxcpu: Some(2.0),
            cpu: Some(0.25),
            tags: Some("flxp.affinity.web".into()),
            ..Resource::default()
        }
    }

    fn row(pairs: &[(&str, f64)]) -> RrdRow {
        RrdRow(pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect())
    }

    /// A cluster of `nodes` nodes (the last one offline) and `guests` guests spread over them.
    fn cluster(nodes: usize, guests: u32) -> Snapshot {
        let names: Vec<String> = (1..=nodes).map(|i| format!("pve{i}")).collect();
        let mut resources: Vec<Resource> = names
            .iter()
            .enumerate()
            .map(|(i, n)| node(n, if i + 1 == nodes { "offline" } else { "online" }))
            .collect();
        resources.extend((0..guests).map(|i| guest(100 + i, &names[i as usize % nodes])));
        let extras = names
            .iter()
            .map(|n| {
                (
                    n.clone(),
                    NodeExtra {
                        notes: Some(format!("flxp.label.ssd {n}")),
                        rrddata: Some(row(&[
                            ("time", 1_764_399_960.0),
                            ("pressurememorysome", 1.5),
                        ])),
                        ..NodeExtra::default()
                    },
                )
            })
            .collect();
        let mut options = serde_json::Map::new();
        options.insert("crs".into(), serde_json::json!("ha=static"));
        Snapshot {
            resources,
            nodes: extras,
            ha: Ha {
                rules: vec![HaRule {
                    rule: Some("keep-apart".into()),
                    kind: Some("resource-affinity".into()),
                    resources: Some("vm:100,vm:101".into()),
                    affinity: Some("negative".into()),
                    ..HaRule::default()
                }],
                resources: vec![HaResource {
                    sid: Some("vm:100".into()),
                    state: Some("started".into()),
                    ..HaResource::default()
                }],
                status: vec![HaStatusEntry {
                    id: Some("quorum".into()),
                    kind: Some("quorum".into()),
                    quorate: Some(true),
                    ..HaStatusEntry::default()
                }],
            },
            options,
            tasks: vec![Task {
                upid: Some("UPID:pve1:000A1B2C:0123ABCD:6929A5C0:qmigrate:105:root@pam:".into()),
                kind: Some("qmigrate".into()),
                ..Task::default()
            }],
            time: None,
        }
    }

    #[tokio::test]
    async fn the_snapshot_has_every_contract_one_part() {
        let source = cluster(3, 10);
        let fake = FakeApi::new(source.clone());
        let snap = collect_snapshot(&fake, 1_764_400_000).await.unwrap();
        assert_eq!(snap.resources, source.resources);
        assert_eq!(snap.time, Some(1_764_400_000));
        assert_eq!(snap.ha, source.ha);
        assert_eq!(snap.options, source.options);
        assert_eq!(snap.tasks, source.tasks);
        // pve3 is offline: no per-node calls, so no extras.
        let want: BTreeMap<_, _> = source
            .nodes
            .into_iter()
            .filter(|(n, _)| n != "pve3")
            .collect();
        assert_eq!(snap.nodes, want);
        // The document reads back as the same snapshot.
        assert_eq!(Snapshot::from_json(&snap.to_json_pretty()).unwrap(), snap);
    }

    /// A `storage` entry of `/cluster/resources` as `node` sees it.
    fn storage(
        node: &str,
        id: &str,
        shared: bool,
        content: &str,
        status: &str,
        (maxdisk, disk): (u64, u64),
    ) -> Resource {
        Resource {
            id: Some(format!("storage/{node}/{id}")),
            kind: Some("storage".into()),
            node: Some(node.into()),
            storage: Some(id.into()),
            status: Some(status.into()),
            shared: Some(shared),
            content: Some(content.into()),
            maxdisk: Some(maxdisk),
            disk: Some(disk),
            ..Resource::default()
        }
    }

    #[tokio::test]
    async fn calls_grow_with_nodes_not_with_guests() {
        for guests in [0, 50, 2000] {
            let fake = FakeApi::new(cluster(8, guests));
            collect_snapshot(&fake, 0).await.unwrap();
            // 1 resources + 2 per online node (7: notes, RRD) + 4 HA (rules, resources, status,
            // manager status) + options + tasks + the log of the one running migration.
            assert_eq!(fake.call_count(), 1 + 2 * 7 + 6 + 1, "{guests} guests");
        }
        let fake = FakeApi::new(cluster(32, 2000));
        collect_snapshot(&fake, 0).await.unwrap();
        assert_eq!(fake.call_count(), 1 + 2 * 31 + 6 + 1);
        let calls = fake.calls();
        assert_eq!(calls[0], "GET /cluster/resources");
        assert!(
            !calls
                .iter()
                .any(|c| c.contains("/qemu") || c.contains("/lxc") || c.contains("/storage"))
        );

        // A local guest-disk storage and a shared one on every node: one listing of the local
        // one per online node with guests, none of the shared one, no per-node storage list.
        for guests in [0, 50, 2000] {
            let mut source = cluster(8, guests);
            for i in 1..=8 {
                let n = format!("pve{i}");
                let status = if i == 8 { "unknown" } else { "available" };
                let local = storage(&n, "local-lvm", false, "images,rootdir", status, (100, 40));
                let ceph = storage(&n, "ceph", true, "images", status, (1000, 400));
                source.resources.extend([local, ceph]);
            }
            let fake = FakeApi::new(source);
            collect_snapshot(&fake, 0).await.unwrap();
            let listings = if guests > 0 { 7 } else { 0 };
            assert_eq!(
                fake.call_count(),
                1 + 2 * 7 + listings + 6 + 1,
                "{guests} guests"
            );
            let calls = fake.calls();
            assert!(!calls.iter().any(|c| c.ends_with("/storage")), "{calls:?}");
            assert!(!calls.iter().any(|c| c.contains("/ceph/")), "{calls:?}");
        }
    }

    #[tokio::test]
    async fn free_room_and_local_volumes_are_collected_per_node() {
        let mut source = cluster(3, 10);
        for n in ["pve1", "pve2"] {
            let local = storage(
                n,
                "local-lvm",
                false,
                "images,rootdir",
                "available",
                (1000, 400),
            );
            let ceph = storage(n, "ceph", true, "images,rootdir", "available", (1000, 400));
            source.resources.extend([local, ceph]);
        }
        let vol = |volid: &str, vmid: u32, content: &str| Volume {
            volid: Some(volid.into()),
            vmid: Some(vmid),
            size: Some(64),
            content: Some(content.into()),
            format: Some("raw".into()),
        };
        let local = vec![
            vol("local-lvm:vm-100-disk-0", 100, "images"),
            vol("local-lvm:vm-103-disk-0", 103, "images"),
        ];
        let pve1 = source.nodes.get_mut("pve1").unwrap();
        pve1.volumes = local.clone();
        pve1.volumes.push(vol("ceph:vm-100-disk-1", 100, "images"));
        // What the node's own storage list would say: not read any more.
        pve1.storage_avail.insert("local-lvm".into(), 550);
        let fake = FakeApi::new(source);
        let snap = collect_snapshot(&fake, 0).await.unwrap();
        let got = &snap.nodes["pve1"];
        // Only the local storage is listed; avail is maxdisk − disk of its resources entry.
        assert_eq!(got.volumes, local);
        assert_eq!(got.storage_avail["local-lvm"], 600);
        assert_eq!(got.storage_avail["ceph"], 600);
        assert!(snap.nodes["pve2"].volumes.is_empty());
        // 2 per online node (2) + a listing of local-lvm on each: still O(nodes).
        assert_eq!(fake.call_count(), 1 + 2 * 2 + 2 + 6 + 1);
        let c = flxp_core::Cluster::from_snapshot(&snap, &Default::default()).unwrap();
        let g = c.guest(c.guest_idx(100).unwrap());
        assert_eq!(g.local_disk_bytes(), 64);
    }

    #[test]
    fn free_bytes_and_local_storages_come_from_the_resources_entries() {
        let mut resources = cluster(2, 0).resources;
        resources.extend([
            storage(
                "pve1",
                "local-lvm",
                false,
                "rootdir,images",
                "available",
                (1000, 400),
            ),
            storage(
                "pve1",
                "ceph",
                true,
                "images,rootdir",
                "available",
                (5000, 1000),
            ),
            storage(
                "pve1",
                "local",
                false,
                "iso,vztmpl,backup",
                "available",
                (100, 30),
            ),
            // An lxc-only storage: container volumes are copied too.
            storage("pve1", "ct", false, "rootdir", "available", (800, 100)),
            // No figures from pvestatd (inactive, not mounted): neither room nor a listing.
            storage("pve1", "nfs-gone", false, "images", "unknown", (900, 0)),
            // Used beyond size (thin over-provisioning reported oddly): no room, not a wrap.
            storage(
                "pve2",
                "local-lvm",
                false,
                "images",
                "available",
                (1000, 1200),
            ),
            Resource {
                maxdisk: None,
                ..storage("pve2", "nosize", false, "images", "available", (0, 0))
            },
        ]);
        let got = storages_by_node(&resources);
        let avail = |pairs: &[(&str, u64)]| -> BTreeMap<String, u64> {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
        };
        assert_eq!(
            got["pve1"],
            NodeStorages {
                avail: avail(&[
                    ("ceph", 4000),
                    ("ct", 700),
                    ("local", 70),
                    ("local-lvm", 600)
                ]),
                local_disks: vec!["local-lvm".into(), "ct".into()],
            }
        );
        assert_eq!(
            got["pve2"],
            NodeStorages {
                avail: avail(&[("local-lvm", 0)]),
                local_disks: vec!["local-lvm".into(), "nosize".into()],
            }
        );
        assert_eq!(got.len(), 2);
    }

    #[tokio::test]
    async fn a_container_storage_is_listed_and_an_unknown_one_is_not() {
        let mut source = cluster(2, 4);
        source.resources.extend([
            storage("pve1", "ct", false, "rootdir", "available", (800, 100)),
            storage("pve1", "nfs-gone", false, "images", "unknown", (900, 0)),
        ]);
        let ct = Volume {
            volid: Some("ct:subvol-102-disk-0".into()),
            vmid: Some(102),
            size: Some(8 << 30),
            content: Some("rootdir".into()),
            format: Some("subvol".into()),
        };
        source.nodes.get_mut("pve1").unwrap().volumes = vec![ct.clone()];
        let fake = FakeApi::new(source);
        let snap = collect_snapshot(&fake, 0).await.unwrap();
        assert_eq!(snap.nodes["pve1"].volumes, vec![ct]);
        assert_eq!(
            snap.nodes["pve1"].storage_avail,
            BTreeMap::from([("ct".to_owned(), 700)])
        );
        let listings: Vec<String> = fake
            .calls()
            .into_iter()
            .filter(|c| c.contains("/storage"))
            .collect();
        assert_eq!(listings, ["GET /nodes/pve1/storage/ct/content"]);
    }

    #[tokio::test]
    async fn a_running_migration_gets_its_target_from_its_log() {
        let upid: Upid = "UPID:pve1:000A1B2C:0123ABCD:6929A5C0:qmigrate:105:root@pam:"
            .parse()
            .unwrap();
        let log = vec![
            "2026-12-01 18:00:00 use dedicated network address for sending migration traffic",
            "2026-12-01 18:00:00 starting migration of VM 105 to node 'pve2' (10.0.0.2)",
        ];
        let fake = FakeApi::new(cluster(3, 10)).with_task(&upid, Vec::new(), log);
        let snap = collect_snapshot(&fake, 0).await.unwrap();
        assert_eq!(snap.tasks[0].target.as_deref(), Some("pve2"));
        // No log: the target stays unknown and the snapshot is still collected.
        let snap = collect_snapshot(&FakeApi::new(cluster(3, 10)), 0)
            .await
            .unwrap();
        assert_eq!(snap.tasks[0].target, None);
    }

    #[test]
    fn the_share_arrived_is_the_copy_logged_long_enough_before_the_node_figures() {
        // Stamped in the source's local time, an hour ahead of UTC; the task started at
        // 2025-11-29 12:00:00 UTC.
        let start = 1_764_417_600;
        let log = [
            "2025-11-29 13:00:00 starting migration of VM 101 to node 'pve2' (10.0.0.2)",
            "2025-11-29 13:00:01 starting VM 101 on remote node 'pve2'",
            "2025-11-29 13:00:10 migration active, transferred 1.0 GiB of 8.0 GiB VM-state, 1.0 GiB/s",
            "2025-11-29 13:00:30 migration active, transferred 3.0 GiB of 8.0 GiB VM-state, 1.0 GiB/s",
            "2025-11-29 13:00:31 drive-scsi0: transferred 4.0 GiB of 32.0 GiB (12.50%) in 31s",
        ];
        // A line counts once node figures newer than it by ARRIVAL_LAG_SECS are read.
        assert_eq!(arrived_by(&log, start, start + 29), None);
        assert_eq!(arrived_by(&log, start, start + 30), Some(0.125));
        assert_eq!(arrived_by(&log, start, start + 49), Some(0.125));
        assert_eq!(arrived_by(&log, start, start + 3_600), Some(0.375));
        // Lines without a stamp cannot be placed in time.
        let bare = ["migration active, transferred 1.0 GiB of 8.0 GiB VM-state, 1.0 GiB/s"];
        assert_eq!(arrived_by(&bare, start, start + 3_600), None);
    }

    #[test]
    fn log_stamps_are_read_as_seconds_of_the_calendar() {
        assert_eq!(local_stamp("1970-01-01 00:00:00 starting"), Some(0));
        assert_eq!(local_stamp("2025-11-29 12:00:00 x"), Some(1_764_417_600));
        assert_eq!(local_stamp("2024-02-29 23:59:59"), Some(1_709_251_199));
        for bad in [
            "2025-13-01 00:00:00",
            "2025-11-29T12:00:00",
            "starting migration",
            "2025-1",
        ] {
            assert_eq!(local_stamp(bad), None, "{bad}");
        }
    }

    #[tokio::test]
    async fn a_running_migration_gets_how_far_its_copy_got_from_its_log() {
        // Started at 2026-12-01 18:00:00 UTC: the entry's `starttime` places the log's stamps.
        let upid: Upid = "UPID:pve1:000A1B2C:0123ABCD:6929A5C0:qmigrate:105:root@pam:"
            .parse()
            .unwrap();
        let log = vec![
            "2026-12-01 18:00:00 starting migration of VM 105 to node 'pve2' (10.0.0.2)",
            "2026-12-01 18:00:05 migration active, transferred 2.0 GiB of 8.0 GiB VM-state, 1.0 GiB/s",
        ];
        let mut snapshot = cluster(3, 10);
        let start = 1_796_148_000;
        snapshot.tasks[0].starttime = Some(start);
        let fake = FakeApi::new(snapshot).with_task(&upid, Vec::new(), log);
        let snap = collect_snapshot(&fake, start + 60).await.unwrap();
        assert_eq!(snap.tasks[0].target.as_deref(), Some("pve2"));
        assert_eq!(snap.tasks[0].arrived, Some(0.25));
        // Read at once, the node figures may not show the copy yet: none counted.
        let snap = collect_snapshot(&fake, start + 10).await.unwrap();
        assert_eq!(snap.tasks[0].arrived, None);
    }

    #[test]
    fn the_target_is_read_from_qemu_and_container_log_lines() {
        let read = target_in_log_line;
        assert_eq!(
            read("starting migration of VM 101 to node 'pve-2' (192.0.2.7)"),
            Some("pve-2")
        );
        assert_eq!(
            read("2026-12-01 18:00:00 starting migration of CT 200 to node 'b' (::1)"),
            Some("b")
        );
        assert_eq!(read("migration started"), None);
        assert_eq!(read("starting migration of VM 1 to node '' (x)"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn per_node_calls_run_concurrently() {
        let fake = FakeApi::new(cluster(9, 20)).with_latency(Duration::from_millis(5));
        let start = tokio::time::Instant::now();
        collect_snapshot(&fake, 0).await.unwrap();
        // resources first, then everything else side by side, then the log of the one running
        // migration (it needs the task list): three round trips, not 23.
        assert_eq!(start.elapsed(), Duration::from_millis(15));
    }

    #[tokio::test]
    async fn the_latest_rrd_row_with_data_is_kept() {
        let rows = vec![
            row(&[("time", 60.0), ("cpu", 0.1)]),
            row(&[("time", 120.0), ("cpu", 0.2), ("pressurecpusome", 3.0)]),
            row(&[("time", 180.0)]),
        ];
        let fake = FakeApi::new(cluster(2, 0)).with_rrd_rows("pve1", rows);
        let snap = collect_snapshot(&fake, 0).await.unwrap();
        let kept = snap.nodes["pve1"].rrddata.as_ref().unwrap();
        assert_eq!(kept.get("time"), Some(120.0));
        assert_eq!(kept.get("pressurecpusome"), Some(3.0));
    }

    #[tokio::test]
    async fn missing_ha_is_left_empty() {
        let fake = FakeApi::new(cluster(2, 4))
            .fail(
                "GET /cluster/ha/rules",
                501,
                "Method 'GET /cluster/ha/rules' not implemented",
            )
            .fail(
                "GET /cluster/ha/resources",
                403,
                "Permission check failed (/, Sys.Audit)",
            )
            .fail(
                "GET /cluster/ha/status/current",
                403,
                "Permission check failed (/, Sys.Audit)",
            );
        let snap = collect_snapshot(&fake, 0).await.unwrap();
        assert!(snap.ha.is_empty());
        assert_eq!(snap.resources.len(), 6);
    }

    #[tokio::test]
    async fn a_node_the_proxy_cannot_reach_is_counted_offline_not_a_failed_snapshot() {
        let (_sim, api) = simulated(
            &cluster(3, 4),
            ("/nodes/pve2/config", 595, "Connection refused"),
        )
        .await;
        let snap = collect_snapshot(&api, 0).await.unwrap();
        let status = |n: &str| {
            snap.resources
                .iter()
                .find(|r| r.kind.as_deref() == Some("node") && r.node.as_deref() == Some(n))
                .and_then(|r| r.status.clone())
        };
        assert_eq!(status("pve2").as_deref(), Some("offline"));
        assert_eq!(status("pve1").as_deref(), Some("online"));
        assert!(!snap.nodes.contains_key("pve2"));
    }

    #[tokio::test]
    async fn an_api_error_names_the_endpoint() {
        let fake = FakeApi::new(cluster(3, 4)).fail("GET /nodes/pve2/rrddata", 500, "rrd error");
        let e = collect_snapshot(&fake, 0).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "collecting the snapshot: GET /nodes/pve2/rrddata failed"
        );
        let CollectError::Api { source, .. } = &e;
        assert!(source.to_string().ends_with("rrd error"), "{source}");

        let fake = FakeApi::new(cluster(3, 4)).fail(
            "GET /cluster/resources",
            403,
            "Permission check failed",
        );
        let e = collect_snapshot(&fake, 0).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "collecting the snapshot: GET /cluster/resources failed"
        );
        assert_eq!(
            fake.call_count(),
            1,
            "nothing else is asked once resources fail"
        );

        let fake =
            FakeApi::new(cluster(3, 4)).fail("GET /cluster/ha/rules", 500, "cfs lock timeout");
        let e = collect_snapshot(&fake, 0).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "collecting the snapshot: GET /cluster/ha/rules failed"
        );
    }

    #[test]
    fn a_move_ha_queued_gets_its_target_from_the_manager_status() {
        let manager: flxp_pve::types::ManagerStatusResponse = serde_json::from_str(
            r#"{"manager_status":{"service_status":{
                "vm:101":{"node":"a","state":"migrate","target":"b"},
                "vm:102":{"node":"a","state":"relocate","target":"c"},
                "vm:103":{"node":"b","state":"started"}}}}"#,
        )
        .unwrap();
        let entry = |sid: &str, crm: Option<&str>| HaStatusEntry {
            id: Some(format!("service:{sid}")),
            kind: Some("service".into()),
            sid: Some(sid.into()),
            crm_state: crm.map(str::to_owned),
            ..HaStatusEntry::default()
        };
        let mut status = vec![
            entry("vm:101", Some("migrate")),
            entry("vm:102", None),
            entry("vm:103", Some("started")),
            entry("vm:104", Some("migrate")),
        ];
        add_ha_targets(&mut status, &manager.manager_status);
        let got: Vec<(Option<&str>, Option<&str>)> = status
            .iter()
            .map(|e| (e.target.as_deref(), e.crm_state.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (Some("b"), Some("migrate")),
                (Some("c"), Some("relocate")),
                (None, Some("started")),
                (None, Some("migrate")),
            ]
        );
    }
}
