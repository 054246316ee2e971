//! The wire shapes of Contract 1: entries as Proxmox's API returns them.
//!
//! These types read leniently (numbers as strings, `0`/`1` booleans, missing fields) and write what
//! Proxmox writes (integers without a fraction, booleans as `0`/`1`, absent rather than `null`), so a
//! snapshot that flxp writes reads back into the same value. They carry no meaning of their own:
//! `crate::cluster` turns them into the typed model.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize, Serializer};

use crate::lenient;

/// One entry of `GET /cluster/resources`: a node, a guest (qemu or lxc), a storage, a pool or an SDN
/// object. Only `id` and `type` are always present; units are bytes, seconds and CPU fractions.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Resource {
    /// `qemu/105`, `lxc/106`, `node/pve1`, `storage/pve1/local-lvm`, `/pool/web`.
    #[serialize_always]
    pub id: Option<String>,
    /// `node`, `qemu`, `lxc`, `storage`, `pool`, `sdn`, `network`, `openvz`.
    #[serde(rename = "type")]
    #[serialize_always]
    pub kind: Option<String>,
    /// The node the entry belongs to (for guests: where it runs now).
    pub node: Option<String>,
    /// Guest id, for qemu and lxc.
    pub vmid: Option<u32>,
    /// Guest name.
    pub name: Option<String>,
    /// `online`/`offline`/`unknown` for nodes; `running`, `stopped`, `paused`, ... for guests.
    pub status: Option<String>,
    /// Logical CPUs of a node, or a guest's vCPUs.
    #[serde(with = "lenient::whole")]
    #[serde_with(skip_apply)]
    pub maxcpu: Option<f64>,
    /// CPU load as a fraction of `maxcpu` (0..1).
    pub cpu: Option<f64>,
    /// Total memory of a node, or a guest's configured memory, in bytes.
    pub maxmem: Option<u64>,
    /// Used memory in bytes (node: total − available; guest: guest-reported or cgroup usage).
    pub mem: Option<u64>,
    /// What the host pays for a qemu guest, in bytes (PVE 9).
    pub memhost: Option<u64>,
    /// Disk size in bytes (node root fs, storage size, guest boot disk).
    pub maxdisk: Option<u64>,
    /// Disk used in bytes.
    pub disk: Option<u64>,
    /// Bytes read by a guest since its start.
    pub diskread: Option<u64>,
    /// Bytes written by a guest since its start.
    pub diskwrite: Option<u64>,
    /// Bytes received by a guest since its start.
    pub netin: Option<u64>,
    /// Bytes sent by a guest since its start.
    pub netout: Option<u64>,
    /// Seconds since start.
    pub uptime: Option<u64>,
    /// Whether a guest is a template.
    pub template: Option<bool>,
    /// `;`-separated guest tags, as Proxmox stores them.
    pub tags: Option<String>,
    /// Config lock of a guest (`migrate`, `backup`, `clone`, ...).
    pub lock: Option<String>,
    /// HA state of a guest (`started`, `migrate`, ...) or of a node (`online`, `maintenance`, ...).
    pub hastate: Option<String>,
    /// Pool of a guest, or the pool id of a pool entry.
    pub pool: Option<String>,
    /// Subscription level of a node.
    pub level: Option<String>,
    /// cgroup version of a node.
    #[serde(rename = "cgroup-mode")]
    pub cgroup_mode: Option<u32>,
    /// CPU architecture of a node (PVE 9.2).
    #[serde(rename = "host-arch")]
    pub host_arch: Option<String>,
    /// Storage id of a storage entry.
    pub storage: Option<String>,
    /// Storage plugin type (`lvmthin`, `zfspool`, `rbd`, ...).
    pub plugintype: Option<String>,
    /// Whether a storage is shared between nodes.
    pub shared: Option<bool>,
    /// Content types of a storage (`images,rootdir`).
    pub content: Option<String>,
}

/// Extra per-node facts that `/cluster/resources` lacks: notes and the latest RRD row.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeExtra {
    /// The node's notes (`description` of `GET /nodes/{node}/config`), holding `flxp.` tokens.
    #[serde(alias = "description", with = "lenient::opt")]
    pub notes: Option<String>,
    /// The latest row of `GET /nodes/{node}/rrddata`: data source name to value.
    pub rrddata: Option<RrdRow>,
    /// flxp's own summary of `GET /nodes/{node}/storage`: each active storage's `avail` bytes, by
    /// storage id (what a migration's local disks need on the target). Absent: unknown.
    #[serde(
        deserialize_with = "lenient::u64_map",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub storage_avail: BTreeMap<String, u64>,
    /// Guest volumes on the node's local (not shared) storages, as
    /// `GET /nodes/{node}/storage/{storage}/content` lists them: the disks a migration copies.
    #[serde(
        deserialize_with = "lenient::vec_or_null",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub volumes: Vec<Volume>,
}

impl NodeExtra {
    /// Whether it holds nothing worth writing.
    pub fn is_empty(&self) -> bool {
        self.notes.is_none()
            && self.rrddata.is_none()
            && self.storage_avail.is_empty()
            && self.volumes.is_empty()
    }
}

/// One entry of `GET /nodes/{node}/storage/{storage}/content`: a volume and its owner.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Volume {
    /// `local-lvm:vm-104-disk-0`: the storage id before the colon.
    #[serialize_always]
    pub volid: Option<String>,
    /// The guest that owns it.
    pub vmid: Option<u32>,
    /// Size in bytes (what a copy allocates on the target).
    pub size: Option<u64>,
    /// Content type: `images` (VM disks) or `rootdir` (container volumes); others are not disks.
    pub content: Option<String>,
    /// Image format (`raw`, `qcow2`, `subvol`).
    pub format: Option<String>,
}

impl Volume {
    /// The storage id of its `volid`.
    pub fn storage(&self) -> Option<&str> {
        self.volid.as_deref()?.split_once(':').map(|(s, _)| s)
    }

    /// Whether it is a guest disk (`images` or `rootdir`), the kind a migration copies.
    pub fn is_guest_disk(&self) -> bool {
        matches!(self.content.as_deref(), Some("images" | "rootdir"))
    }
}

/// One `rrddata` row: `time` plus whatever data sources have values (pressure in percent, memory in bytes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RrdRow(
    #[serde(deserialize_with = "de_rrd_row", serialize_with = "ser_rrd_row")]
    pub  BTreeMap<String, f64>,
);

impl RrdRow {
    /// The value of one data source, if present.
    pub fn get(&self, source: &str) -> Option<f64> {
        self.0.get(source).copied()
    }
}

/// HA configuration and state, as the three HA endpoints return them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Ha {
    /// `GET /cluster/ha/rules`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<HaRule>,
    /// `GET /cluster/ha/resources`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<HaResource>,
    /// `GET /cluster/ha/status/current`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub status: Vec<HaStatusEntry>,
}

impl Ha {
    /// Whether the snapshot holds any HA data at all.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.resources.is_empty() && self.status.is_empty()
    }
}

/// One HA rule (`node-affinity` or `resource-affinity`).
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HaRule {
    /// Rule id.
    #[serialize_always]
    pub rule: Option<String>,
    /// `node-affinity` or `resource-affinity`.
    #[serde(rename = "type")]
    #[serialize_always]
    pub kind: Option<String>,
    /// Comma-separated HA resource ids (`vm:100,ct:101`).
    #[serialize_always]
    pub resources: Option<String>,
    /// Node-affinity nodes: `node[:priority]`, comma-separated.
    pub nodes: Option<String>,
    /// Node-affinity strictness (default off).
    pub strict: Option<bool>,
    /// Resource-affinity direction: `positive` or `negative`.
    pub affinity: Option<String>,
    /// Whether the rule is disabled.
    pub disable: Option<bool>,
    /// Free-text comment.
    pub comment: Option<String>,
    /// Position in the rules file.
    pub order: Option<u64>,
    /// Config digest.
    pub digest: Option<String>,
    /// Feasibility errors Proxmox found; HA ignores a rule that has them.
    #[serde_with(skip_apply)]
    pub errors: Option<serde_json::Value>,
}

/// One HA resource (a guest managed by the HA stack).
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HaResource {
    /// `vm:100` or `ct:101`.
    #[serialize_always]
    pub sid: Option<String>,
    /// `vm` or `ct`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Requested state: `started`, `stopped`, `enabled`, `disabled`, `ignored`.
    pub state: Option<String>,
    /// Whether HA moves it back to its preferred node.
    pub failback: Option<bool>,
    /// Maximal restarts on one node.
    pub max_restart: Option<u64>,
    /// Maximal relocations.
    pub max_relocate: Option<u64>,
    /// Legacy HA group.
    pub group: Option<String>,
    /// Free-text comment.
    pub comment: Option<String>,
    /// Config digest.
    pub digest: Option<String>,
}

/// One entry of `GET /cluster/ha/status/current` (`quorum`, `master`, `lrm`, `service`, `fencing`).
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HaStatusEntry {
    /// Entry id (`quorum`, `master`, `lrm:pve1`, `service:vm:100`).
    pub id: Option<String>,
    /// Entry type.
    #[serde(rename = "type")]
    #[serialize_always]
    pub kind: Option<String>,
    /// Node of an `lrm`, `master` or `service` entry.
    pub node: Option<String>,
    /// Status text (`pve1 (active, ...)`, `pve1 (maintenance mode)`, ...).
    pub status: Option<String>,
    /// HA resource id of a `service` entry.
    pub sid: Option<String>,
    /// Service state (`started`, `migrate`, ...).
    pub state: Option<String>,
    /// CRM state of a service.
    pub crm_state: Option<String>,
    /// Requested state of a service.
    pub request_state: Option<String>,
    /// LRM mode (`active`, `maintenance`, ...), when the source carries it.
    pub mode: Option<String>,
    /// Fencing state of the `fencing` entry (`armed`, `standby`, `disarming`, `disarmed`).
    #[serde(rename = "armed-state")]
    pub armed_state: Option<String>,
    /// Resource mode of a disarmed HA stack (`freeze`, `ignore`).
    pub resource_mode: Option<String>,
    /// flxp's own field: the node HA moves a `service` to while its `crm_state` is `migrate` or
    /// `relocate`, from `/cluster/ha/status/manager_status` (`status/current` does not name it).
    pub target: Option<String>,
    /// Maximal restarts of a `service` entry.
    pub max_restart: Option<u64>,
    /// Maximal relocations of a `service` entry.
    pub max_relocate: Option<u64>,
    /// Failback of a `service` entry.
    pub failback: Option<bool>,
    /// Comment of a `service` entry.
    pub comment: Option<String>,
    /// Quorum flag of the `quorum` entry.
    pub quorate: Option<bool>,
    /// Timestamp of `master`/`lrm` entries.
    pub timestamp: Option<i64>,
}

/// One entry of `GET /cluster/tasks`.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Task {
    /// The task's UPID.
    #[serialize_always]
    pub upid: Option<String>,
    /// Node the task runs on.
    pub node: Option<String>,
    /// Process id of the task's worker.
    pub pid: Option<u64>,
    /// Process start time (clock ticks since boot) of the worker.
    pub pstart: Option<u64>,
    /// Whether the task log is saved (`1`/`0`).
    pub saved: Option<String>,
    /// Task type (`qmigrate`, `hamigrate`, `qmstart`, `vzmigrate`, ...).
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Task object id (a VMID for guest tasks).
    pub id: Option<String>,
    /// User that started it.
    pub user: Option<String>,
    /// API token that started it, if any.
    pub tokenid: Option<String>,
    /// Start time (epoch seconds).
    pub starttime: Option<i64>,
    /// End time; absent while the task runs.
    pub endtime: Option<i64>,
    /// Exit status (`OK`, an error text); absent while the task runs.
    pub status: Option<String>,
    /// flxp's own field: the node a running migration goes to, read from the task's log
    /// (`/cluster/tasks` names only the source). Absent: unknown.
    pub target: Option<String>,
    /// flxp's own field: of a running live migration, the share (0 to 1) of the guest's memory
    /// that its target's `mem` in the same snapshot already holds, as the task's log reported
    /// the copy (`transferred X of Y VM-state`) long enough before the snapshot's `time` for the
    /// target's figure to show it. Absent: none (the guest then counts in full on its target).
    pub arrived: Option<f64>,
}

impl Task {
    /// Whether the task is still running (no end time and no status).
    pub fn is_running(&self) -> bool {
        self.endtime.is_none() && self.status.as_deref().is_none_or(|s| s == "running")
    }
}

/// Writes an RRD row as Proxmox does: whole values (`time`, byte counts) without a fraction.
fn ser_rrd_row<S: Serializer>(row: &BTreeMap<String, f64>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(row.iter().map(|(k, v)| (k, lenient::Whole(*v))))
}

/// Reads an RRD row leniently: values may be numbers or numeric strings; `null`s are dropped.
fn de_rrd_row<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
    #[derive(Deserialize)]
    struct Value(#[serde(deserialize_with = "lenient::f64")] Option<f64>);
    let raw: BTreeMap<String, Value> = BTreeMap::deserialize(d)?;
    Ok(raw
        .into_iter()
        .filter_map(|(k, Value(v))| v.map(|v| (k, v)))
        .collect())
}
