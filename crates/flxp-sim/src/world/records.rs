//! Records for measuring a run from the simulator's side, in simulated time: every migration
//! (who, what, from, to, when, bytes), per node per simulated minute its demand against its
//! capacity and its pressure, guest creations and deletions, and API requests by method, path
//! template and user. Served by `GET /_sim/records`.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

/// Node samples kept at most (oldest dropped first): 32 nodes × 31 days of minutes.
const MAX_NODE_SAMPLES: usize = 32 * 31 * 1440;

/// Creations and deletions kept at most (oldest dropped first).
const MAX_LIFECYCLE: usize = 200_000;

/// Migrations kept at most (oldest dropped first).
const MAX_MIGRATIONS: usize = 200_000;

/// One migration, from its task's start to its end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MigrationRecord {
    /// The guest.
    pub vmid: u32,
    /// Source node.
    pub from: String,
    /// Target node.
    pub to: String,
    /// Simulated epoch seconds it started.
    pub start: f64,
    /// When it ended (absent while it runs).
    pub end: Option<f64>,
    /// Bytes copied: memory of a live migration plus local disks.
    pub bytes: u64,
    /// Who started it (`root@pam`, `flxp@pve!daemon`; the HA manager's are `root@pam`).
    pub user: String,
    /// For a migration by the HA manager: who asked for it (an `hamigrate` task or the HA
    /// resource's `migrate`/`relocate` call); absent for its own moves (failback, recovery).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<String>,
    /// The task's UPID.
    pub upid: String,
    /// Whether the guest landed (absent while it runs).
    pub ok: Option<bool>,
}

/// A node at one simulated minute.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeSample {
    /// Simulated epoch seconds (a whole minute).
    pub time: i64,
    /// The node.
    pub node: String,
    /// Whether it was online.
    pub online: bool,
    /// Cores asked for (base load plus running guests; may exceed `maxcpu`).
    pub cpu_demand: f64,
    /// Its CPUs.
    pub maxcpu: u32,
    /// Memory in use, bytes (capped at `maxmem`).
    pub mem: u64,
    /// Memory asked for, bytes (may exceed `maxmem`).
    pub mem_demand: u64,
    /// Its memory, bytes.
    pub maxmem: u64,
    /// Running guests on it.
    pub guests: u32,
    /// PSI `some` of CPU, memory and I/O, percent.
    pub psi_cpu_some: f64,
    /// See `psi_cpu_some`.
    pub psi_memory_some: f64,
    /// PSI `full` of memory, percent.
    pub psi_memory_full: f64,
    /// See `psi_cpu_some`.
    pub psi_io_some: f64,
}

/// A guest created or deleted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LifecycleRecord {
    /// Simulated epoch seconds.
    pub time: f64,
    /// `created` or `deleted`.
    pub event: &'static str,
    /// The guest.
    pub vmid: u32,
    /// Its node.
    pub node: String,
    /// Who did it.
    pub user: String,
}

/// API requests counted by (method, path template, user).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct RequestKey {
    /// HTTP method.
    pub method: String,
    /// The route's template after `/api2/json` (`/nodes/{node}/qemu/{vmid}/migrate`).
    pub path: String,
    /// The caller (`user@realm` or `user@realm!token`).
    pub user: String,
}

/// Everything recorded.
#[derive(Debug, Clone, Default)]
pub struct Records {
    /// Migrations, by start.
    pub migrations: VecDeque<MigrationRecord>,
    /// Node samples, by time.
    pub node_samples: VecDeque<NodeSample>,
    /// Creations and deletions, by time.
    pub lifecycle: VecDeque<LifecycleRecord>,
    /// Requests since the start.
    pub requests: BTreeMap<RequestKey, u64>,
    /// Requests per simulated hour (epoch seconds of its start) and user.
    pub requests_per_hour: BTreeMap<(i64, String), u64>,
    /// Who last asked the HA manager to move a guest, until it does.
    pub ha_requests: BTreeMap<u32, String>,
}

impl Records {
    /// Notes a migration that started (its task is `task`).
    pub fn migration_started(&mut self, r: MigrationRecord) {
        self.migrations.push_back(r);
        if self.migrations.len() > MAX_MIGRATIONS {
            self.migrations.pop_front();
        }
    }

    /// Notes that `user` asked the HA manager to move guest `vmid`.
    pub fn ha_requested(&mut self, vmid: u32, user: &str) {
        self.ha_requests.insert(vmid, user.to_string());
    }

    /// Notes the end of the migration with task `upid`.
    pub fn migration_ended(&mut self, upid: &str, end: f64, ok: bool) {
        if let Some(r) = self.migrations.iter_mut().rev().find(|r| r.upid == upid) {
            if r.end.is_none() {
                r.end = Some(end);
                r.ok = Some(ok);
            }
        }
    }

    /// Adds a node sample.
    pub fn sample(&mut self, s: NodeSample) {
        self.node_samples.push_back(s);
        if self.node_samples.len() > MAX_NODE_SAMPLES {
            self.node_samples.pop_front();
        }
    }

    /// Notes a creation or deletion.
    pub fn lifecycle(&mut self, r: LifecycleRecord) {
        self.lifecycle.push_back(r);
        if self.lifecycle.len() > MAX_LIFECYCLE {
            self.lifecycle.pop_front();
        }
    }

    /// Counts one API request at simulated time `now`.
    pub fn request(&mut self, method: &str, path: &str, user: &str, now: f64) {
        let key = RequestKey {
            method: method.to_string(),
            path: path.to_string(),
            user: user.to_string(),
        };
        *self.requests.entry(key).or_insert(0) += 1;
        let hour = (now / 3600.0).floor() as i64 * 3600;
        *self
            .requests_per_hour
            .entry((hour, user.to_string()))
            .or_insert(0) += 1;
    }

    /// Everything from simulated time `since` on, as JSON: migrations that started or ended
    /// since, node samples, creations and deletions since, request counts per hour since and
    /// totals since the start.
    pub fn since(&self, since: f64) -> serde_json::Value {
        let migrations: Vec<&MigrationRecord> = self
            .migrations
            .iter()
            .filter(|m| m.start >= since || m.end.is_none_or(|e| e >= since))
            .collect();
        let from = self
            .node_samples
            .partition_point(|s| (s.time as f64) < since);
        let samples: Vec<&NodeSample> = self.node_samples.range(from..).collect();
        let lifecycle: Vec<&LifecycleRecord> =
            self.lifecycle.iter().filter(|r| r.time >= since).collect();
        let requests: Vec<serde_json::Value> = self
            .requests
            .iter()
            .map(|(k, n)| {
                serde_json::json!({"method": k.method, "path": k.path, "user": k.user, "count": n})
            })
            .collect();
        let per_hour: Vec<serde_json::Value> = self
            .requests_per_hour
            .iter()
            .filter(|((h, _), _)| (*h as f64) + 3600.0 > since)
            .map(|((h, u), n)| serde_json::json!({"hour": h, "user": u, "count": n}))
            .collect();
        serde_json::json!({
            "since": since,
            "migrations": migrations,
            "node_samples": samples,
            "guests": lifecycle,
            "requests": requests,
            "requests_per_hour": per_hour,
        })
    }
}
