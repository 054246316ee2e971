//! A simulated node: capacity, what it uses besides its guests, notes, status and HA maintenance;
//! and the storages it can reach.

use std::collections::BTreeSet;

use super::guest::Pressure;

/// A simulated cluster node.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Its name.
    pub name: String,
    /// Whether it is online (reachable, running its guests).
    pub online: bool,
    /// Logical CPUs.
    pub maxcpu: u32,
    /// Memory, bytes.
    pub maxmem: u64,
    /// Root file system size, bytes.
    pub maxdisk: u64,
    /// Root file system used, bytes.
    pub disk: u64,
    /// CPU cores busy with anything but guests.
    pub base_cpu: f64,
    /// Memory used by anything but guests, bytes.
    pub base_mem: u64,
    /// Its notes (`description` of the node config), holding `flxp.` tokens.
    pub notes: String,
    /// Subscription level (`''`, `c`, `b`, `s`, `p`).
    pub level: String,
    /// CPU model name.
    pub cpu_model: String,
    /// CPU sockets.
    pub sockets: u32,
    /// Its cluster address.
    pub ip: String,
    /// corosync node id.
    pub nodeid: u32,
    /// Simulated time it booted.
    pub booted_at: f64,
    /// Whether its HA LRM is in maintenance mode.
    pub ha_maintenance: bool,
    /// Base pressure values (the load-dependent part is added on top).
    pub pressure: Pressure,
    /// Swap size and use, bytes.
    pub swap_total: u64,
    /// See `swap_total`.
    pub swap_used: u64,
    /// When it went offline (for HA fencing).
    pub offline_since: Option<f64>,
    /// A shutdown or reboot was asked for and has not taken effect yet.
    pub shutting_down: bool,
    /// Woken (or rebooting) and not online yet.
    pub booting: bool,
}

impl Node {
    /// Its Wake-on-LAN MAC address (`wakeonlan` of the node config), from its node id under
    /// Proxmox's OUI.
    pub fn mac(&self) -> String {
        let [_, a, b, c] = self.nodeid.to_be_bytes();
        format!("bc:24:11:{a:02x}:{b:02x}:{c:02x}")
    }
}

/// A storage definition, as `storage.cfg` holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Storage {
    /// Storage id.
    pub id: String,
    /// Plugin type (`rbd`, `lvmthin`, `zfspool`, `dir`, `nfs`, ...).
    pub kind: String,
    /// Whether all its nodes see the same volumes.
    pub shared: bool,
    /// Content types (`images,rootdir`).
    pub content: String,
    /// Nodes that can use it; empty means all.
    pub nodes: BTreeSet<String>,
    /// Size in bytes (per node for local storage).
    pub total: u64,
    /// Used by anything but the simulated guests' disks, bytes (per node for local storage).
    pub base_used: u64,
    /// Size and base use of a local storage on nodes whose entries gave their own.
    pub per_node: std::collections::BTreeMap<String, (u64, u64)>,
}

impl Storage {
    /// Size and base use on `node`, bytes.
    pub fn size_on(&self, node: &str) -> (u64, u64) {
        self.per_node
            .get(node)
            .copied()
            .unwrap_or((self.total, self.base_used))
    }

    /// Whether `node` can use it.
    pub fn available_on(&self, node: &str) -> bool {
        self.nodes.is_empty() || self.nodes.contains(node)
    }

    /// Whether it holds content of `kind` (`images`, `rootdir`, ...).
    pub fn has_content(&self, kind: &str) -> bool {
        self.content.split(',').any(|c| c == kind)
    }
}

/// A resource pool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pool {
    /// Its comment.
    pub comment: Option<String>,
}
