//! A cluster node as the core sees it: capacity, reported usage, labels, taints, maintenance.

use std::collections::BTreeSet;

use serde::Serialize;

/// Index of a node in `Cluster::nodes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct NodeIdx(pub u32);

impl NodeIdx {
    /// The index as a `usize`, for slices.
    pub fn get(self) -> usize {
        self.0 as usize
    }
}

/// A node's cluster status as `/cluster/resources` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum NodeReachability {
    /// Reachable and in quorum.
    Online,
    /// Known to be down.
    Offline,
    /// No recent report (also nodes only named by a guest in a partial dump).
    Unknown,
}

impl NodeReachability {
    /// Reads Proxmox's status word; anything unfamiliar is `Unknown`.
    pub fn from_word(s: Option<&str>) -> Self {
        match s {
            Some("online") => Self::Online,
            Some("offline") => Self::Offline,
            _ => Self::Unknown,
        }
    }

    /// The word Proxmox uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Online => "online",
            Self::Offline => "offline",
            Self::Unknown => "unknown",
        }
    }
}

/// Why a node is in maintenance; several sources may agree.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum MaintenanceSource {
    /// The `flxp.maintenance` token in the node's notes (or its config override).
    Notes,
    /// Proxmox HA reports the node in maintenance mode.
    Ha,
    /// Named by the caller (config file or command line).
    Requested,
    /// Tried or chosen by a consolidation, to be emptied and switched off: not in maintenance
    /// yet, so no rule is broken by its guests and it is not said to be in maintenance.
    Consolidation,
}

impl MaintenanceSource {
    /// A short phrase for explanations.
    pub fn describe(&self) -> &'static str {
        match self {
            Self::Notes => "flxp.maintenance in node notes",
            Self::Ha => "Proxmox HA maintenance mode",
            Self::Requested => "maintenance requested",
            Self::Consolidation => "being freed by the consolidation",
        }
    }
}

/// Pressure stall information of a node, PSI `avg10` in percent (0..100), from its latest RRD row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Pressure {
    /// `pressurecpusome`.
    pub cpu_some: Option<f64>,
    /// `pressurememorysome`.
    pub memory_some: Option<f64>,
    /// `pressurememoryfull`.
    pub memory_full: Option<f64>,
    /// `pressureiosome`.
    pub io_some: Option<f64>,
    /// `pressureiofull`.
    pub io_full: Option<f64>,
}

/// One node of the cluster.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    /// Node name as Proxmox spells it.
    pub name: String,
    /// Cluster status.
    pub status: NodeReachability,
    /// Logical CPUs.
    pub maxcpu: f64,
    /// CPU load as a fraction of `maxcpu` (0..1).
    pub cpu: f64,
    /// Total memory in bytes.
    pub maxmem: u64,
    /// Used memory in bytes, as reported (total − available); see `Cluster::usage` for the
    /// figure the core decides on.
    pub mem: Option<u64>,
    /// Memory the node reported using beyond its total, in bytes: Proxmox's `mem` is total −
    /// available and never exceeds `maxmem`, so a report that does is counted as full (`mem` is
    /// cut to `maxmem`) and this much more must leave the node before its load drops below
    /// full. 0 for every report within the total.
    pub mem_over: u64,
    /// Root filesystem size in bytes.
    pub maxdisk: u64,
    /// Root filesystem used in bytes.
    pub disk: u64,
    /// HA node state (`online`, `maintenance`, `fence`, ...), when HA reports one.
    pub ha_state: Option<String>,
    /// Labels from `flxp.label.<label>` tokens.
    pub labels: BTreeSet<String>,
    /// Taints from `flxp.taint.<taint>`: no new guest and no migration target unless tolerated.
    pub taints: BTreeSet<String>,
    /// Soft taints from `flxp.prefer-no.<taint>`: avoided unless tolerated.
    pub prefer_no: BTreeSet<String>,
    /// Why the node is in maintenance; empty when it is not.
    pub maintenance: Vec<MaintenanceSource>,
    /// Latest pressure readings, when the snapshot has an RRD row.
    pub pressure: Pressure,
    /// ZFS ARC size in bytes from the RRD row (counted as used by Proxmox, but shrinkable).
    pub arcsize: Option<u64>,
}

impl Node {
    /// Whether the node reports `online`.
    pub fn is_online(&self) -> bool {
        self.status == NodeReachability::Online
    }

    /// Whether the node is being emptied.
    pub fn in_maintenance(&self) -> bool {
        !self.maintenance.is_empty()
    }

    /// Whether the node is only being freed by a consolidation: emptied like a node in
    /// maintenance, but not in maintenance (yet).
    pub fn is_being_freed(&self) -> bool {
        self.in_maintenance()
            && self
                .maintenance
                .iter()
                .all(|s| *s == MaintenanceSource::Consolidation)
    }

    /// Whether the node is in maintenance as a reader would say it: a node a consolidation only
    /// plans to free is not.
    pub fn in_maintenance_reported(&self) -> bool {
        self.in_maintenance() && !self.is_being_freed()
    }

    /// The node's HA state when HA has lost or is fencing it (`fence`, `unknown`, `gone`): it
    /// may be gone at any moment, whatever its status says.
    pub fn ha_lost(&self) -> Option<&str> {
        self.ha_state
            .as_deref()
            .filter(|s| !s.is_empty() && !matches!(*s, "online" | "maintenance"))
    }

    /// The status word for people: `online`, or `online (HA fence)` when HA has lost it.
    pub fn status_text(&self) -> String {
        match (self.is_online(), self.ha_lost()) {
            (true, Some(ha)) => format!("{} (HA {ha})", self.status.as_str()),
            _ => self.status.as_str().to_owned(),
        }
    }

    /// Whether the node can take guests at all: online (HA too) and not in maintenance.
    pub fn is_schedulable(&self) -> bool {
        self.is_online() && self.ha_lost().is_none() && !self.in_maintenance()
    }
}
