//! The simulated cluster: nodes, guests, storages, pools, HA, tasks, and the events that change
//! them over simulated time.
//!
//! The world is a plain value behind one lock. Every request first lets it catch up to the
//! current simulated time ([`World::advance`]): due events (a migration landing, the HA manager
//! acting) are applied in time order, each at its own due time. A guest is a single map entry with
//! one `node` field, so the cluster can never hold a guest twice or lose one; migrations only ever
//! change that field, at their end.

mod build;
mod bulk;
mod clone;
mod guest;
mod guest_config;
mod ha;
mod ha_failback;
mod ha_rules;
mod ha_views;
mod lifecycle;
mod migrate;
mod node;
mod power;
mod records;
mod resize;
mod rrd;
mod stats;
mod storage_use;
mod views;
mod workload;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use serde_json::{Map, Value};

pub use bulk::{BulkJob, BulkRequest};
pub use clone::CloneRequest;
pub use guest::{
    Config, Disk, Guest, GuestKind, GuestUsage, Pressure, hex, is_disk_key, parse_disk,
};
pub use ha::{HaRequest, HaResourceConf, HaState, ServiceStatus};
pub use lifecycle::{ConfigChange, PowerOp};
pub use migrate::MigrateRequest;
pub use node::{Node, Pool, Storage};
pub use records::{LifecycleRecord, MigrationRecord, NodeSample, Records, RequestKey};
pub use resize::ResizeRequest;
pub use rrd::{GUEST_FIELDS, History, NODE_FIELDS, Series, Timeframe};
pub use stats::{Demand, GuestStats, NodeLoad, NodeStats};
pub use storage_use::StorageUse;
pub use workload::{LoadState, WORKLOAD_USER};

use crate::ApiError;
use crate::faults::Faults;
use crate::tags::TagStyle;
use crate::tasks::TaskTable;

/// Settings of the simulated cluster that do not change while it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Cluster name.
    pub cluster_name: String,
    /// pve-manager version (`9.2.11`).
    pub version: String,
    /// Migration bandwidth, bytes per second.
    pub migration_bandwidth: f64,
    /// Full-clone disk copy bandwidth, bytes per second.
    pub clone_bandwidth: f64,
    /// Simulated seconds the HA manager takes to act.
    pub ha_delay: f64,
    /// Simulated seconds before HA recovers the guests of a dead node.
    pub fence_delay: f64,
    /// Lowest VMID `nextid` hands out (inclusive).
    pub nextid_lower: u32,
    /// Highest VMID `nextid` hands out (exclusive).
    pub nextid_upper: u32,
    /// How tags are stored.
    pub tag_style: TagStyle,
    /// Seconds between statistics broadcasts (pvestatd: 10); 0 reports current figures.
    pub stats_interval: f64,
    /// Simulated seconds from a node shutdown request until it is off (guests stopped).
    pub node_shutdown_secs: f64,
    /// Simulated seconds from a Wake-on-LAN packet (or a reboot) until the node is online.
    pub node_boot_secs: f64,
}

impl Settings {
    /// `9.2` of `9.2.11`.
    pub fn release(&self) -> String {
        let mut parts = self.version.split('.');
        match (parts.next(), parts.next()) {
            (Some(a), Some(b)) => format!("{a}.{b}"),
            _ => self.version.clone(),
        }
    }
}

/// Something due at a simulated time.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// Ends a task with no further effect.
    EndTask {
        task: usize,
        result: Result<(), String>,
    },
    /// A migration reaches its end (it may still fail if a node went away meanwhile).
    MigrationEnd {
        task: usize,
        vmid: u32,
        target: String,
        fail: Option<String>,
        restart: bool,
    },
    /// A clone's disks are copied.
    CloneEnd { task: usize, newid: u32 },
    /// A create task ends.
    CreateEnd { task: usize, vmid: u32, start: bool },
    /// A start, stop or shutdown takes effect.
    PowerEnd { task: usize, vmid: u32, op: PowerOp },
    /// A destroy task ends: the guest is gone.
    DestroyEnd { task: usize, vmid: u32 },
    /// A resize task ends: the drive's `size=` is written.
    ResizeEnd {
        task: usize,
        vmid: u32,
        disk: String,
        bytes: u64,
    },
    /// The HA manager acts on a service's request.
    HaAct { sid: String },
    /// The HA manager fences a dead node and recovers its services.
    HaFence { node: String },
    /// A CRM round: services fail back to their preferred nodes.
    HaRound,
    /// A node's shutdown time is over: its guests stop and it goes offline.
    NodePowerOff { node: String, reboot: bool },
    /// A woken or rebooting node is online again.
    NodeBooted { node: String },
    /// A trace event is due.
    Trace { index: usize },
    /// The workload driver tries (again) to delete a guest.
    WorkloadDelete { vmid: u32, tries: u32 },
}

impl Action {
    /// The task an action belongs to.
    fn task(&self) -> Option<usize> {
        match self {
            Action::EndTask { task, .. }
            | Action::MigrationEnd { task, .. }
            | Action::CloneEnd { task, .. }
            | Action::CreateEnd { task, .. }
            | Action::PowerEnd { task, .. }
            | Action::DestroyEnd { task, .. }
            | Action::ResizeEnd { task, .. } => Some(*task),
            Action::HaAct { .. }
            | Action::HaFence { .. }
            | Action::HaRound
            | Action::NodePowerOff { .. }
            | Action::NodeBooted { .. }
            | Action::Trace { .. }
            | Action::WorkloadDelete { .. } => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Scheduled {
    due_ms: i64,
    seq: u64,
    action: Action,
}

impl Eq for Scheduled {}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due_ms, self.seq).cmp(&(other.due_ms, other.seq))
    }
}

/// The simulated cluster.
#[derive(Debug)]
pub struct World {
    /// The simulated time the world has caught up to, epoch seconds.
    pub now: f64,
    /// Fixed settings.
    pub settings: Settings,
    /// Nodes by name.
    pub nodes: BTreeMap<String, Node>,
    /// Guests by VMID.
    pub guests: BTreeMap<u32, Guest>,
    /// Storages by id.
    pub storages: BTreeMap<String, Storage>,
    /// Pools by id.
    pub pools: BTreeMap<String, Pool>,
    /// HA configuration and state.
    pub ha: HaState,
    /// Datacenter options (`/cluster/options`).
    pub options: Map<String, Value>,
    /// All tasks.
    pub tasks: TaskTable,
    /// Injected faults.
    pub faults: Faults,
    /// RRD history of nodes and guests.
    pub history: History,
    /// Memory reserved on migration targets: VMID → (target, bytes), the incoming guest's full
    /// size, which every further migration or start on the target must fit beside.
    pub reservations: BTreeMap<u32, (String, u64)>,
    /// When the reserved memory arrives on its target: VMID → (from, until), simulated epoch
    /// seconds. The target's reported use grows from none of it at `from` to all of it at
    /// `until`, as the QEMU process on a Proxmox target fills while the guest's pages arrive.
    pub arrivals: BTreeMap<u32, (f64, f64)>,
    /// Usage models and trace events.
    pub load: LoadState,
    /// What happened, for measuring a run (`/_sim/records`).
    pub records: Records,
    events: BinaryHeap<Reverse<Scheduled>>,
    seq: u64,
    rng: u64,
    cancelled: std::collections::BTreeSet<usize>,
    bulk: Vec<BulkJob>,
    /// A CRM round is scheduled (rounds are not queued twice).
    ha_round_pending: bool,
}

impl World {
    /// Schedules `action` at simulated time `at`.
    pub(crate) fn schedule(&mut self, at: f64, action: Action) {
        self.seq += 1;
        self.events.push(Reverse(Scheduled {
            due_ms: (at * 1000.0).round() as i64,
            seq: self.seq,
            action,
        }));
    }

    /// Applies every event due up to `now`, in time order, then sets the world's time to `now`
    /// (time never runs backwards). Every simulated minute passed on the way is sampled (RRD
    /// archives, node records) at its own time, after the events due by then, so a jump of a
    /// day fills them as if the day had passed. Returns whether any event was applied (anything
    /// but the time and the figures of usage models changed).
    pub fn advance(&mut self, now: f64) -> bool {
        let now_ms = (now * 1000.0).floor() as i64;
        let mut applied = false;
        loop {
            // The next minute to sample (an event landing on a minute boundary does not skip it).
            let minute = self.load.next_sample;
            let minute_ms = (minute * 1000.0).round() as i64;
            let due = self
                .events
                .peek()
                .is_some_and(|e| e.0.due_ms <= now_ms && e.0.due_ms <= minute_ms);
            if due {
                let Some(Reverse(event)) = self.events.pop() else {
                    break;
                };
                let at = event.due_ms as f64 / 1000.0;
                if at > self.now {
                    self.now = at;
                }
                self.apply(event.action);
                self.bulk_step();
                self.record();
                applied = true;
            } else if minute <= now {
                let mut minute = minute;
                if self.load.models.is_empty() && self.load.events.is_empty() {
                    // No trace: figures change only with events, so the minutes between two
                    // carry nothing new. Catching up on each one cost a clock run 100,000 times
                    // faster than real time most of its CPU; sample the last minute before the
                    // next event (or `now`) only. RRD rows in between stay empty, as a node's
                    // do while its `pvestatd` is down.
                    let until = self
                        .events
                        .peek()
                        .map_or(now, |e| (e.0.due_ms as f64 / 1000.0).min(now));
                    let skip = ((until - minute) / 60.0).floor();
                    if skip >= 1.0 {
                        minute += 60.0 * skip;
                    }
                }
                self.now = minute;
                self.load.next_sample = minute + 60.0;
                self.sample_minute();
            } else {
                break;
            }
        }
        if now > self.now {
            self.now = now;
        }
        applied
    }

    /// Simulated time of the next due event, if any.
    pub fn next_event_at(&self) -> Option<f64> {
        self.events.peek().map(|e| e.0.due_ms as f64 / 1000.0)
    }

    fn apply(&mut self, action: Action) {
        let now = self.now;
        if let Some(task) = action.task() {
            if self.cancelled.remove(&task) {
                self.undo(action);
                return;
            }
        }
        match action {
            Action::EndTask { task, result } => self.tasks.finish(task, now, result),
            Action::MigrationEnd {
                task,
                vmid,
                target,
                fail,
                restart,
            } => self.on_migration_end(task, vmid, &target, fail, restart),
            Action::CloneEnd { task, newid } => self.on_clone_end(task, newid),
            Action::CreateEnd { task, vmid, start } => self.on_create_end(task, vmid, start),
            Action::PowerEnd { task, vmid, op } => self.on_power_end(task, vmid, op),
            Action::DestroyEnd { task, vmid } => self.on_destroy_end(task, vmid),
            Action::ResizeEnd {
                task,
                vmid,
                disk,
                bytes,
            } => self.on_resize_end(task, vmid, &disk, bytes),
            Action::HaAct { sid } => self.on_ha_act(&sid),
            Action::HaFence { node } => self.on_ha_fence(&node),
            Action::HaRound => self.on_ha_round(),
            Action::NodePowerOff { node, reboot } => self.on_node_power_off(&node, reboot),
            Action::NodeBooted { node } => self.on_node_booted(&node),
            Action::Trace { index } => self.on_trace_event(index),
            Action::WorkloadDelete { vmid, tries } => self.workload_delete(vmid, tries),
        }
    }

    /// Stops a running task (`DELETE /nodes/{node}/tasks/{upid}`): it ends with
    /// "interrupted by signal" and what it was doing is rolled back.
    pub fn stop_task(&mut self, upid: &str) {
        let Some(index) = self.tasks.all().iter().position(|t| t.upid == upid) else {
            return;
        };
        let Some(task) = self.tasks.get(index).cloned() else {
            return;
        };
        if !task.is_running() {
            return;
        }
        let now = self.now;
        self.tasks
            .finish(index, now, Err("interrupted by signal".into()));
        self.cancelled.insert(index);
        if matches!(task.kind.as_str(), "qmigrate" | "vzmigrate") {
            self.records.migration_ended(upid, now, false);
            if let Ok(vmid) = task.id.parse::<u32>() {
                self.release_reservation(vmid);
                if let Some(g) = self.guests.get_mut(&vmid) {
                    if g.lock() == Some("migrate") {
                        g.config.values.remove("lock");
                    }
                    if g.kind == GuestKind::Lxc && !g.running && task.kind == "vzmigrate" {
                        // A restart-mode migration had stopped the container: start it again.
                        g.running = true;
                        g.started_at = now;
                    }
                }
                self.ha_migration_settled(vmid, None);
            }
        }
    }

    /// Rolls back the effect of a cancelled task's due action.
    fn undo(&mut self, action: Action) {
        match action {
            Action::CloneEnd { newid, .. } | Action::CreateEnd { vmid: newid, .. } => {
                self.guests.remove(&newid);
                self.history.forget_guest(newid);
            }
            Action::DestroyEnd { vmid, .. } => {
                if let Some(g) = self.guests.get_mut(&vmid) {
                    g.config.values.remove("lock");
                }
            }
            _ => {}
        }
    }

    /// Ends the memory reservation of a migration (landed, failed or stopped).
    pub(crate) fn release_reservation(&mut self, vmid: u32) {
        self.reservations.remove(&vmid);
        self.arrivals.remove(&vmid);
    }

    /// Of the `bytes` reserved for `vmid`'s migration, those already on its target now.
    pub fn arrived(&self, vmid: u32, bytes: u64) -> u64 {
        let share = match self.arrivals.get(&vmid) {
            Some(&(from, until)) if until > from => {
                ((self.now - from) / (until - from)).clamp(0.0, 1.0)
            }
            Some(&(_, until)) if self.now < until => 0.0,
            _ => 1.0,
        };
        (bytes as f64 * share) as u64
    }

    /// Records the current statistics into the RRD history.
    pub fn record(&mut self) {
        self.record_stats();
    }

    /// [`World::record`], answering the node statistics it recorded.
    pub(crate) fn record_stats(&mut self) -> BTreeMap<String, NodeStats> {
        let now = self.now;
        let table = self.node_stats_all();
        let nodes: Vec<(String, Vec<f64>)> = table
            .iter()
            .map(|(n, s)| (n.clone(), self.node_rrd_values(n, s)))
            .collect();
        let guests: Vec<(u32, f64, Vec<f64>)> = self
            .guests
            .values()
            .map(|g| {
                let node = table.get(&g.node).map_or(NodeLoad::default(), |s| s.load());
                (g.vmid, g.created_at, self.guest_rrd_values(g, node))
            })
            .collect();
        for (n, v) in nodes {
            self.history.push_node(&n, now, v);
        }
        for (id, created, v) in guests {
            self.history.push_guest(id, created, now, v);
        }
        table
    }

    /// A deterministic 64-bit value from the world's generator.
    pub(crate) fn next_random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        crate::load::model::mix64(self.rng)
    }

    /// A new MAC address with Proxmox's default prefix `BC:24:11`.
    pub(crate) fn new_mac(&mut self) -> String {
        let r = self.next_random();
        format!(
            "BC:24:11:{:02X}:{:02X}:{:02X}",
            (r >> 16) as u8,
            (r >> 8) as u8,
            r as u8
        )
    }

    /// A new random UUID-shaped string (smbios uuid, vmgenid).
    pub(crate) fn new_uuid(&mut self) -> String {
        let a = self.next_random();
        let b = self.next_random();
        let h = format!("{a:016x}{b:016x}");
        format!(
            "{}-{}-4{}-a{}-{}",
            &h[0..8],
            &h[8..12],
            &h[13..16],
            &h[17..20],
            &h[20..32]
        )
    }

    /// The node named `name`, or Proxmox's error for an unknown node.
    pub fn node(&self, name: &str) -> Result<&Node, ApiError> {
        self.nodes
            .get(name)
            .ok_or_else(|| ApiError::die(format!("no such cluster node '{name}'")))
    }

    /// The guest `vmid` of `kind` on `node`, or Proxmox's "does not exist" error.
    pub fn guest_at(&self, kind: GuestKind, node: &str, vmid: u32) -> Result<&Guest, ApiError> {
        match self.guests.get(&vmid) {
            Some(g) if g.kind == kind && g.node == node => Ok(g),
            _ => Err(ApiError::die(format!(
                "Configuration file '{}' does not exist",
                Guest::config_path(node, kind, vmid)
            ))),
        }
    }

    /// Mutable access to a guest known to exist (checked by `guest_at`).
    pub(crate) fn guest_mut(&mut self, vmid: u32) -> Result<&mut Guest, ApiError> {
        self.guests
            .get_mut(&vmid)
            .ok_or_else(|| ApiError::die(format!("VM {vmid} does not exist")))
    }

    /// Whether storage `id` is shared.
    pub fn is_shared(&self, storage: &str) -> bool {
        self.storages.get(storage).is_some_and(|s| s.shared)
    }

    /// The lowest free VMID in the datacenter's range.
    pub fn next_free_vmid(&self) -> Option<u32> {
        (self.settings.nextid_lower..self.settings.nextid_upper)
            .find(|id| !self.guests.contains_key(id))
    }

    /// Checks the invariant the simulator promises: every guest on exactly one existing node.
    pub fn check_invariant(&self) -> Result<(), InvariantError> {
        for g in self.guests.values() {
            if !self.nodes.contains_key(&g.node) {
                return Err(InvariantError::UnknownNode {
                    vmid: g.vmid,
                    node: g.node.clone(),
                });
            }
        }
        for (vmid, (target, _)) in &self.reservations {
            if !self.guests.contains_key(vmid) || !self.nodes.contains_key(target) {
                return Err(InvariantError::StaleReservation {
                    vmid: *vmid,
                    target: target.clone(),
                });
            }
        }
        Ok(())
    }
}

/// A broken promise of the simulated world, found by [`World::check_invariant`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvariantError {
    /// A guest is on a node the world does not have.
    #[error("guest {vmid} is on unknown node '{node}'")]
    UnknownNode {
        /// The guest.
        vmid: u32,
        /// Its node.
        node: String,
    },
    /// A migration reservation outlived its guest or its target node.
    #[error("stale migration reservation for {vmid} on '{target}'")]
    StaleReservation {
        /// The guest.
        vmid: u32,
        /// The reserved target node.
        target: String,
    },
}

/// A stable short id for a string (HA service uids), FNV-1a.
pub(crate) fn uid_of(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) & 0xffff_ffff_ffff
}
