//! A guest (qemu VM or lxc container) as the core sees it.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::NodeIdx;

/// Index of a guest in `Cluster::guests`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct GuestIdx(pub u32);

impl GuestIdx {
    /// The index as a `usize`, for slices.
    pub fn get(self) -> usize {
        self.0 as usize
    }
}

/// The kind of guest, as it appears in API paths (`/nodes/{node}/qemu/...`, `/lxc/...`) and as the
/// `type` of `/cluster/resources`; the one definition the model, the API client and the simulator share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GuestKind {
    /// A QEMU virtual machine.
    Qemu,
    /// An LXC container.
    Lxc,
}

impl GuestKind {
    /// The `type` word of `/cluster/resources`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Qemu => "qemu",
            Self::Lxc => "lxc",
        }
    }

    /// The HA resource prefix (`vm` or `ct`).
    pub fn ha_prefix(self) -> &'static str {
        match self {
            Self::Qemu => "vm",
            Self::Lxc => "ct",
        }
    }

    /// The kind of a `/cluster/resources` `type`, if it is a guest type.
    pub fn from_resource_type(kind: &str) -> Option<Self> {
        match kind {
            "qemu" => Some(Self::Qemu),
            "lxc" => Some(Self::Lxc),
            _ => None,
        }
    }

    /// The HA resource id of a guest of this kind: `vm:<vmid>` or `ct:<vmid>`.
    pub fn ha_sid(self, vmid: u32) -> String {
        format!("{}:{vmid}", self.ha_prefix())
    }
}

impl fmt::Display for GuestKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a guest with a migration in flight is going.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Landing {
    /// To this node: until it lands it counts on its source and here.
    Node(NodeIdx),
    /// To a node nobody could read: it may end up on any other node.
    Unknown,
}

/// One guest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Guest {
    /// Proxmox VMID.
    pub vmid: u32,
    /// qemu or lxc.
    pub kind: GuestKind,
    /// Guest name (empty when unknown).
    pub name: String,
    /// The node it is on.
    pub node: NodeIdx,
    /// Status word (`running`, `stopped`, `paused`, ...).
    pub status: String,
    /// Whether it runs and so loads its node (anything but stopped/unknown, never a template).
    pub running: bool,
    /// Whether it is a template.
    pub template: bool,
    /// vCPUs.
    pub maxcpu: f64,
    /// CPU load as a fraction of `maxcpu`.
    pub cpu: f64,
    /// Configured memory in bytes.
    pub maxmem: u64,
    /// Used memory in bytes, as reported.
    pub mem: u64,
    /// Host memory paid for it (PVE 9 qemu), in bytes.
    pub memhost: Option<u64>,
    /// Boot disk size in bytes.
    pub maxdisk: u64,
    /// Tags, lowercased, in the order Proxmox lists them.
    pub tags: Vec<String>,
    /// Config lock, if any.
    pub lock: Option<String>,
    /// HA state, if HA manages it.
    pub hastate: Option<String>,
    /// Whether Proxmox HA manages it.
    pub ha_managed: bool,
    /// Whether HA has started it and waits for it to run (HA reports it `starting`): it is not in
    /// the measurements yet, so Proxmox's dynamic mode counts it at its configured size.
    pub ha_starting: bool,
    /// Pool membership.
    pub pool: Option<String>,
    /// A running migration of it and where it goes; `None` when none runs.
    pub migrating: Option<Landing>,
    /// Of a guest migrating in flight, the share (0 to 1) of its memory its target's reported
    /// use already holds: it counts there for the rest only (0 when unknown: in full).
    pub arrived: f64,
    /// Its volumes on local storages of its node, per storage (empty: none, or not collected).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub local_disks: Vec<LocalDisk>,
}

impl Guest {
    /// `qemu/101`-style id.
    pub fn id(&self) -> String {
        format!("{}/{}", self.kind.as_str(), self.vmid)
    }

    /// HA resource id (`vm:101`).
    pub fn sid(&self) -> String {
        format!("{}:{}", self.kind.ha_prefix(), self.vmid)
    }

    /// Memory the guest occupies on its host, in bytes: the larger of the guest's view and what
    /// the host pays, since either may lag the other.
    pub fn mem_footprint(&self) -> u64 {
        self.mem.max(self.memhost.unwrap_or(0))
    }

    /// Bytes of its disks on local storages: what any migration of it copies.
    pub fn local_disk_bytes(&self) -> u64 {
        self.local_disks
            .iter()
            .fold(0, |sum, d| sum.saturating_add(d.bytes))
    }

    /// Bytes a migration of it copies: its memory when it runs, plus its local disks (copied
    /// by live and offline migrations alike). The one measure of a move's cost: plan figures,
    /// search, bounds and the exact baseline all use it.
    pub fn move_bytes(&self) -> u64 {
        let mem = if self.running {
            self.mem_footprint()
        } else {
            0
        };
        mem.saturating_add(self.local_disk_bytes())
    }

    /// CPUs Proxmox's static usage counts for it on a node with `node_cpus` CPUs: its `maxcpu`; for
    /// a container without a CPU limit (`maxcpu` 0) the node's CPUs, since it may use them all
    /// (Proxmox's `cpulimit || cores || 0`, where 0 means the whole node); for a VM without a
    /// count, 1 (qemu-server's default of one socket with one core).
    pub fn static_cpus(&self, node_cpus: f64) -> f64 {
        match self.kind {
            _ if self.maxcpu > 0.0 => self.maxcpu,
            GuestKind::Lxc => node_cpus,
            GuestKind::Qemu => 1.0,
        }
    }

    /// CPU cores it uses now (`cpu × maxcpu`).
    pub fn cpu_cores(&self) -> f64 {
        self.cpu * self.maxcpu
    }

    /// Memory it adds to the node a migration in flight takes it to, beyond what that node
    /// already reports of it: its footprint less the share already copied there (rounded so
    /// that the rest is never counted short).
    pub fn mem_incoming(&self) -> u64 {
        let copied = (self.mem_footprint() as f64 * self.arrived.clamp(0.0, 1.0)) as u64;
        self.mem_footprint() - copied.min(self.mem_footprint())
    }

    /// The node a running migration takes it to, when known and not the node it is on.
    pub fn migrating_to(&self) -> Option<NodeIdx> {
        match self.migrating {
            Some(Landing::Node(n)) if n != self.node => Some(n),
            _ => None,
        }
    }

    /// A label for messages: `101 (web1)` or `101`.
    pub fn label(&self) -> String {
        if self.name.is_empty() {
            self.vmid.to_string()
        } else {
            format!("{} ({})", self.vmid, self.name)
        }
    }
}

/// A guest's volumes on one local storage of its node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LocalDisk {
    /// Storage id.
    pub storage: String,
    /// Bytes of its volumes there.
    pub bytes: u64,
}
