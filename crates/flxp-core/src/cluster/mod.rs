//! The typed cluster model built once from a snapshot, with its indexes.
//!
//! `Cluster::from_snapshot` checks every entry, turns Proxmox's words into types, reads node notes
//! and HA maintenance, and builds the indexes the decisions use (guests by node, by tag, by vmid,
//! nodes by name, migrations in flight). It never fails on a strange but possible cluster (an
//! offline node without stats, a guest on a node the dump does not list); those become warnings.

mod crs;
mod guest;
mod limits;
mod node;
pub mod notes;
mod storage;
pub mod tags;
mod tasks;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

pub use crs::{Crs, CrsMode};
pub use guest::{Guest, GuestIdx, GuestKind, Landing, LocalDisk};
pub use limits::{MAX_BYTES, MAX_CPUS, MAX_TOTAL_BYTES};
pub use node::{MaintenanceSource, Node, NodeIdx, NodeReachability, Pressure};
pub use storage::Storage;
pub use tasks::TaskIndex;

use crate::snapshot::{Ha, HaStatusEntry, Resource, Snapshot};
use crate::warning::{CappedWarnings, Warning};
use crate::{Error, Result};
use notes::NodeTokens;
use tags::{GuestTags, MAX_GUEST_TAGS, read_guest_tags};

/// Caller-side overrides applied while building the model (from the config file or command line).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Node notes that replace what the snapshot says, by node name.
    pub notes: BTreeMap<String, String>,
    /// Nodes to treat as in maintenance.
    pub maintenance: BTreeSet<String>,
}

/// The typed cluster: nodes, guests, storages, HA, options, tasks and indexes.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// Nodes, sorted by name so that every iteration is deterministic. Private, like the
    /// indexes built from it: a renamed, added or reordered node would break them.
    nodes: Vec<Node>,
    /// Guests, sorted by vmid; private for the same reason.
    guests: Vec<Guest>,
    /// Storages, per node; private because `storages_by_node` holds positions into it.
    storages: Vec<Storage>,
    /// HA rules, resources and status, as read.
    pub ha: Ha,
    /// Proxmox's own cluster resource scheduler settings (`crs` option).
    pub crs: Crs,
    /// Tasks in flight and recent migrations.
    pub tasks: TaskIndex,
    /// "Now" for the decisions: the snapshot's time, else the newest task time seen.
    pub time: Option<i64>,
    /// Problems found while reading that do not stop a decision.
    pub warnings: Vec<Warning>,
    node_by_name: HashMap<String, NodeIdx>,
    /// Lowercased names, for [`Cluster::node_idx_loose`]; the first node by name wins a clash.
    node_by_lower: HashMap<String, NodeIdx>,
    guest_by_vmid: HashMap<u32, GuestIdx>,
    guests_by_node: Vec<Vec<GuestIdx>>,
    guests_by_tag: BTreeMap<String, Vec<GuestIdx>>,
    /// Indexes of `storages` per node.
    storages_by_node: Vec<Vec<usize>>,
    /// Whether any guest has local disks (else storage room is never checked).
    local_disks: bool,
    /// See [`Cluster::static_usage_differs`].
    static_differs: Vec<GuestIdx>,
}

impl Cluster {
    /// Builds the model from a snapshot; `Err` only for entries that cannot be meant (a guest
    /// without a vmid, two guests with one vmid, a negative size).
    pub fn from_snapshot(snapshot: &Snapshot, overrides: &Overrides) -> Result<Self> {
        let mut warnings = Vec::new();
        warn_dropped_entries(&snapshot.resources, &mut warnings);
        let (mut nodes, no_maxmem) = collect_nodes(&snapshot.resources, &mut warnings)?;
        let raw_guests = collect_guests(&snapshot.resources, &mut warnings)?;

        // Guests may name nodes the dump does not list (a `--type vm` dump): add them as unknown
        // nodes so nothing is lost, and say so.
        let mut known: BTreeSet<String> = nodes.iter().map(|n| n.name.clone()).collect();
        for (node_name, g) in &raw_guests {
            if known.insert(node_name.clone()) {
                check_node_name(node_name, || g.id())?;
                warnings.push(Warning::node(
                    node_name,
                    "has guests but no node entry in the snapshot; treated as unknown (no stats)",
                ));
                nodes.push(empty_node(node_name.clone()));
            }
        }
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let node_by_name: HashMap<String, NodeIdx> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), NodeIdx(i as u32)))
            .collect();

        apply_node_extras(&mut nodes, snapshot, overrides, &mut warnings);
        limits::check(&nodes, &raw_guests)?;
        for n in nodes.iter().filter(|n| n.is_online()) {
            // A dump with a zeroed field, not a real node: say so, or "no node fits" is a riddle.
            for (field, zero) in [("maxmem", n.maxmem == 0), ("maxcpu", n.maxcpu == 0.0)] {
                if zero {
                    let what = if field == "maxmem" && no_maxmem.contains(&n.name) {
                        "no maxmem".to_owned()
                    } else {
                        format!("{field} 0")
                    };
                    warnings.push(Warning::node(
                        &n.name,
                        format!("online but reports {what}: no guest can be placed on it"),
                    ));
                }
            }
        }
        for n in &mut nodes {
            // Proxmox's `mem` is total minus available, so it never exceeds `maxmem`. A report
            // that does is measured as what the warning says, full: everywhere (status, the
            // imbalance measure, balance's trigger and plan), so that one wrong figure does not
            // make a spread of hundreds of points. The excess is kept apart (`mem_over`): what
            // leaves the node comes off it first, so a plan promises no relief the node's own
            // report will not show.
            if let Some(mem) = n.mem.filter(|&m| n.maxmem > 0 && m > n.maxmem) {
                n.mem = Some(n.maxmem);
                n.mem_over = mem - n.maxmem;
                let (used, total) = crate::units::fmt_bytes_apart(mem, n.maxmem);
                warnings.push(Warning::node(
                    &n.name,
                    format!(
                        "reports {used} of memory used of {total}: counted as full, no guest can be placed on it"
                    ),
                ));
            }
            // Proxmox's node `cpu` is a fraction of its CPUs (0..1); more is a wrong figure,
            // measured as fully busy for the same reason.
            if n.cpu > 1.0 {
                warnings.push(Warning::node(
                    &n.name,
                    format!(
                        "reports CPU use of {:.0} % of its CPUs: counted as fully busy (100 %)",
                        n.cpu * 100.0
                    ),
                ));
                n.cpu = 1.0;
            }
        }
        if nodes.is_empty() {
            warnings.push(Warning::general(
                "the snapshot holds no node (no resource of type node): nothing can be placed",
            ));
        }
        for name in &overrides.maintenance {
            match node_by_name.get(name) {
                Some(&idx) => nodes[idx.get()]
                    .maintenance
                    .push(MaintenanceSource::Requested),
                None => warnings.push(Warning::node(
                    name,
                    "named for maintenance but not in the cluster",
                )),
            }
        }
        for node in &mut nodes {
            node.maintenance.sort();
            node.maintenance.dedup();
        }

        let ha_sids: BTreeSet<&str> = snapshot
            .ha
            .resources
            .iter()
            .filter_map(|r| r.sid.as_deref())
            .collect();
        let starting = ha_starting_sids(&snapshot.ha);
        let mut guests: Vec<Guest> = raw_guests
            .into_iter()
            .map(|(node_name, mut g)| {
                g.node = node_by_name[&node_name];
                g.ha_managed = g.hastate.is_some() || ha_sids.contains(g.sid().as_str());
                g.ha_starting = !g.template
                    && (g.hastate.as_deref() == Some("starting")
                        || starting.contains(g.sid().as_str()));
                g
            })
            .collect();
        guests.sort_by_key(|g| g.vmid);

        let mut guest_by_vmid = HashMap::with_capacity(guests.len());
        let mut guests_by_node = vec![Vec::new(); nodes.len()];
        let mut guests_by_tag: BTreeMap<String, Vec<GuestIdx>> = BTreeMap::new();
        for (i, g) in guests.iter().enumerate() {
            let idx = GuestIdx(i as u32);
            if guest_by_vmid.insert(g.vmid, idx).is_some() {
                return Err(Error::Resource {
                    entry: g.id(),
                    message: format!("vmid {} appears more than once", g.vmid),
                });
            }
            guests_by_node[g.node.get()].push(idx);
            for t in &g.tags {
                guests_by_tag.entry(t.clone()).or_default().push(idx);
            }
        }

        let storages = storage::collect(snapshot, &node_by_name);
        let storages_by_node = storage::by_node(&storages, nodes.len());
        storage::assign_local_disks(
            snapshot,
            &storages,
            &storages_by_node,
            &node_by_name,
            &mut guests,
            &guest_by_vmid,
        );
        let local_disks = guests.iter().any(|g| !g.local_disks.is_empty());
        let crs = Crs::from_options(&snapshot.options, &mut warnings);
        let tasks = TaskIndex::new(&snapshot.tasks);
        resolve_migrations(
            &mut guests,
            &guest_by_vmid,
            &tasks,
            &node_by_name,
            &mut warnings,
        );
        resolve_ha_moves(&mut guests, &snapshot.ha.status, &node_by_name);
        let time = snapshot.time.or(tasks.newest_time());
        let static_differs = (0..guests.len() as u32)
            .map(GuestIdx)
            .filter(|g| {
                let g = &guests[g.get()];
                // As `Guest::static_cpus` reads it: NaN is no limit either.
                (g.running && (g.maxcpu <= 0.0 || g.maxcpu.is_nan()))
                    || (!g.running && g.ha_starting)
            })
            .collect();

        let node_by_lower = lowercase_index(&nodes);
        Ok(Self {
            nodes,
            guests,
            storages,
            ha: snapshot.ha.clone(),
            crs,
            tasks,
            time,
            warnings,
            node_by_lower,
            node_by_name,
            guest_by_vmid,
            guests_by_node,
            guests_by_tag,
            storages_by_node,
            local_disks,
            static_differs,
        })
    }

    /// Parses a snapshot document and builds the model in one step.
    pub fn from_json(text: &str, overrides: &Overrides) -> Result<Self> {
        Self::from_snapshot(&Snapshot::from_json(text)?, overrides)
    }

    /// The storages a node sees, as indexes into `storages`.
    pub fn storages_of(&self, node: NodeIdx) -> &[usize] {
        &self.storages_by_node[node.get()]
    }

    /// The index into `storages` of storage `id` as `node` sees it.
    pub fn storage_on(&self, node: NodeIdx, id: &str) -> Option<usize> {
        self.storages_by_node[node.get()]
            .iter()
            .copied()
            .find(|&i| self.storages[i].storage == id)
    }

    /// Whether any guest has disks on a local storage (only then is storage room checked).
    pub fn has_local_disks(&self) -> bool {
        self.local_disks
    }

    /// Guests whose load in Proxmox's static CRS mode is not their configured size as the
    /// committed sums hold it: running ones without a CPU limit (`maxcpu` not above 0) and
    /// stopped ones HA is starting; in vmid order. Most clusters have few, and the pve-static
    /// scorer visits only these rather than every guest per decision.
    pub fn static_usage_differs(&self) -> &[GuestIdx] {
        &self.static_differs
    }

    /// The node with this exact name.
    pub fn node_idx(&self, name: &str) -> Option<NodeIdx> {
        self.node_by_name.get(name).copied()
    }

    /// The node with this name compared case-insensitively (tags are lowercased by Proxmox).
    pub fn node_idx_loose(&self, name: &str) -> Option<NodeIdx> {
        // An index, not a scan: names come from tags and HA rules, any number of them.
        self.node_idx(name)
            .or_else(|| self.node_by_lower.get(&name.to_ascii_lowercase()).copied())
    }

    /// The node at an index.
    pub fn node(&self, idx: NodeIdx) -> &Node {
        &self.nodes[idx.get()]
    }

    /// The guest at an index.
    pub fn guest(&self, idx: GuestIdx) -> &Guest {
        &self.guests[idx.get()]
    }

    /// The guest with this vmid.
    pub fn guest_idx(&self, vmid: u32) -> Option<GuestIdx> {
        self.guest_by_vmid.get(&vmid).copied()
    }

    /// Guests on a node, running or not, by vmid.
    pub fn guests_on(&self, node: NodeIdx) -> &[GuestIdx] {
        &self.guests_by_node[node.get()]
    }

    /// Guests carrying a tag (lowercase), by vmid.
    pub fn guests_tagged(&self, tag: &str) -> &[GuestIdx] {
        self.guests_by_tag.get(tag).map_or(&[], Vec::as_slice)
    }

    /// Every tag in the cluster with its guests, in tag order.
    pub fn tags(&self) -> impl Iterator<Item = (&str, &[GuestIdx])> {
        self.guests_by_tag
            .iter()
            .map(|(t, g)| (t.as_str(), g.as_slice()))
    }

    /// All nodes, in name order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// All guests, in vmid order.
    pub fn guests(&self) -> &[Guest] {
        &self.guests
    }

    /// All storages, per node; [`Cluster::storages_of`] and [`Cluster::storage_on`] index into it.
    pub fn storages(&self) -> &[Storage] {
        &self.storages
    }

    /// Puts a node into maintenance as requested by the caller (evacuation), if it is not already.
    pub fn request_maintenance(&mut self, node: NodeIdx) {
        self.empty_for(node, MaintenanceSource::Requested);
    }

    /// Marks a node to be emptied for `why` (a request, a consolidation), if it is not already
    /// in maintenance for any reason.
    pub fn empty_for(&mut self, node: NodeIdx, why: MaintenanceSource) {
        if let Some(n) = self.nodes.get_mut(node.get()) {
            if !n.in_maintenance() {
                n.maintenance.push(why);
            }
        }
    }

    /// Takes back a mark [`Self::empty_for`] set for `why` (a consolidation's trial that failed);
    /// a node in maintenance for any other reason keeps it.
    pub fn unmark_emptied(&mut self, node: NodeIdx, why: &MaintenanceSource) {
        if let Some(n) = self.nodes.get_mut(node.get()) {
            if n.maintenance.len() == 1 && n.maintenance[0] == *why {
                n.maintenance.clear();
            }
        }
    }

    /// A node to change in a test fixture (never its name: the indexes hold it).
    #[cfg(test)]
    pub(crate) fn node_mut(&mut self, idx: NodeIdx) -> &mut Node {
        &mut self.nodes[idx.get()]
    }

    /// Indexes of all nodes, in name order.
    pub fn node_indexes(&self) -> impl Iterator<Item = NodeIdx> + '_ {
        (0..self.nodes.len() as u32).map(NodeIdx)
    }

    /// Indexes of all guests, in vmid order.
    pub fn guest_indexes(&self) -> impl Iterator<Item = GuestIdx> + '_ {
        (0..self.guests.len() as u32).map(GuestIdx)
    }
}

/// Marks the guests whose migration is in flight with where they go, so that they count on
/// both nodes until they land; a target nobody could read is a warning, as it makes flxp keep
/// every other member of the guest's anti-affinity groups where it is.
fn resolve_migrations(
    guests: &mut [Guest],
    guest_by_vmid: &HashMap<u32, GuestIdx>,
    tasks: &TaskIndex,
    node_by_name: &HashMap<String, NodeIdx>,
    warnings: &mut Vec<Warning>,
) {
    for (vmid, target) in tasks.migrations() {
        let Some(&idx) = guest_by_vmid.get(&vmid) else {
            continue;
        };
        let g = &mut guests[idx.get()];
        let landing = match target.map(|t| (t, node_by_name.get(t))) {
            Some((_, Some(&n))) => Landing::Node(n),
            Some((t, None)) => {
                warnings.push(Warning::about(
                    g.id(),
                    format!(
                        "migrating to node {t}, which is not in the cluster; it may land on any \
                         node, so no other member of its anti-affinity groups moves or is placed"
                    ),
                ));
                Landing::Unknown
            }
            None => {
                warnings.push(Warning::about(
                    g.id(),
                    "migrating to an unknown node (the task entry has no target); it may land \
                     on any node, so no other member of its anti-affinity groups moves or is \
                     placed",
                ));
                Landing::Unknown
            }
        };
        if let Landing::Node(_) = landing {
            g.arrived = tasks.arrived(vmid);
        }
        g.migrating = Some(landing);
    }
}

/// Marks the guests HA has been asked to move (`crm_state` `migrate` or `relocate`, with the
/// target `manager_status` names) as in flight to that target, as a running migration task
/// would: the CRM hands the move to the source's LRM only on its next rounds, and until that
/// task starts nothing else shows where the guest goes.
fn resolve_ha_moves(
    guests: &mut [Guest],
    status: &[HaStatusEntry],
    node_by_name: &HashMap<String, NodeIdx>,
) {
    let moving: HashMap<&str, NodeIdx> = status
        .iter()
        .filter(|e| matches!(e.crm_state.as_deref(), Some("migrate" | "relocate")))
        .filter_map(|e| {
            let to = node_by_name.get(e.target.as_deref()?)?;
            Some((e.sid.as_deref()?, *to))
        })
        .collect();
    if moving.is_empty() {
        return;
    }
    for g in guests.iter_mut().filter(|g| g.migrating.is_none()) {
        if let Some(&to) = moving.get(g.sid().as_str()) {
            if to != g.node {
                g.migrating = Some(Landing::Node(to));
            }
        }
    }
}

fn empty_node(name: String) -> Node {
    Node {
        name,
        status: NodeReachability::Unknown,
        maxcpu: 0.0,
        cpu: 0.0,
        maxmem: 0,
        mem: None,
        mem_over: 0,
        maxdisk: 0,
        disk: 0,
        ha_state: None,
        labels: BTreeSet::new(),
        taints: BTreeSet::new(),
        prefer_no: BTreeSet::new(),
        maintenance: Vec::new(),
        pressure: Pressure::default(),
        arcsize: None,
    }
}

fn entry_name(r: &Resource, i: usize) -> String {
    r.id.clone().unwrap_or_else(|| format!("resources[{i}]"))
}

/// An entry named by its place and what it says it is: `resources[3] (qemu/101)`.
fn entry_subject(r: &Resource, i: usize) -> String {
    match (&r.id, r.vmid) {
        (Some(id), _) => format!("resources[{i}] ({id})"),
        (None, Some(vmid)) => format!("resources[{i}] (vmid {vmid})"),
        (None, None) => format!("resources[{i}]"),
    }
}

/// Entry types of `GET /cluster/resources` that flxp reads (`node`, `qemu`, `lxc`, `storage`) or
/// knowingly skips.
const KNOWN_TYPES: [&str; 8] = [
    "node", "qemu", "lxc", "storage", "pool", "sdn", "network", "openvz",
];

/// Warns about entries dropped for a missing or unknown `type`: one that carried a vmid was a
/// guest whose rules (an anti-affinity group) now miss a member.
fn warn_dropped_entries(resources: &[Resource], warnings: &mut Vec<Warning>) {
    for (i, r) in resources.iter().enumerate() {
        let why = match r.kind.as_deref() {
            Some(k) if KNOWN_TYPES.contains(&k) => continue,
            Some(k) => format!("unknown type `{k}`"),
            None => "no `type`".to_owned(),
        };
        let guest = r.vmid.is_some()
            || r.id.as_deref().is_some_and(|id| {
                id.rsplit_once('/')
                    .is_some_and(|(_, v)| v.parse::<u32>().is_ok())
            });
        let dropped = if guest {
            "dropped: it looks like a guest, which flxp will neither see nor count in any rule"
        } else {
            "dropped"
        };
        warnings.push(Warning::about(
            entry_subject(r, i),
            format!(
                "{why} (expected one of {}); {dropped}",
                KNOWN_TYPES.join(", ")
            ),
        ));
    }
}

/// Node names are identities that Proxmox keeps to one DNS label; another is a forged or broken
/// snapshot, and one with control characters would garble every table it appears in.
fn check_node_name(name: &str, entry: impl FnOnce() -> String) -> Result<()> {
    if crate::names::is_dns_label(name) {
        return Ok(());
    }
    Err(Error::Resource {
        entry: entry(),
        message: format!(
            "node name {name:?} is not one Proxmox accepts (a DNS label: letters, digits and inner hyphens, at most 63)"
        ),
    })
}

/// The nodes, and the names of those whose entry has no `maxmem` at all; a status Proxmox never
/// reports for a node is a warning naming the node and the value.
fn collect_nodes(
    resources: &[Resource],
    warnings: &mut Vec<Warning>,
) -> Result<(Vec<Node>, BTreeSet<String>)> {
    let mut nodes: Vec<Node> = Vec::new();
    let mut no_maxmem = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for (i, r) in resources.iter().enumerate() {
        if r.kind.as_deref() != Some("node") {
            continue;
        }
        let name = r
            .node
            .clone()
            .or_else(|| {
                r.id.as_deref()
                    .and_then(|id| id.strip_prefix("node/"))
                    .map(str::to_owned)
            })
            .filter(|n| !n.is_empty())
            .ok_or_else(|| Error::Resource {
                entry: entry_name(r, i),
                message: "node entry without a node name".into(),
            })?;
        check_node_name(&name, || entry_name(r, i))?;
        if !seen.insert(name.clone()) {
            return Err(Error::Resource {
                entry: entry_name(r, i),
                message: format!("node {name} appears more than once"),
            });
        }
        let (cpu, maxcpu) = cpu_figures(r).map_err(|message| Error::Resource {
            entry: entry_name(r, i),
            message,
        })?;
        let mut node = empty_node(name);
        node.status = NodeReachability::from_word(r.status.as_deref());
        if let Some(status) = r.status.as_deref().filter(|s| !is_node_status(s)) {
            // A number or a typo would otherwise make a node silently unusable.
            warnings.push(Warning::node(
                &node.name,
                format!(
                    "status {status:?} is not one Proxmox reports for a node (online, offline, \
                     unknown): read as unknown, so no guest is placed on it or moved to it"
                ),
            ));
        }
        node.maxcpu = maxcpu;
        node.cpu = cpu;
        node.maxmem = r.maxmem.unwrap_or(0);
        if r.maxmem.is_none() {
            no_maxmem.insert(node.name.clone());
        }
        node.mem = r.mem;
        node.maxdisk = r.maxdisk.unwrap_or(0);
        node.disk = r.disk.unwrap_or(0);
        node.ha_state = r.hastate.clone();
        if r.hastate.as_deref() == Some("maintenance") {
            node.maintenance.push(MaintenanceSource::Ha);
        }
        nodes.push(node);
    }
    Ok((nodes, no_maxmem))
}

/// `cpu` and `maxcpu` of an entry (0 when absent); negative figures are errors, like negative
/// sizes, rather than quietly read as 0.
fn cpu_figures(r: &Resource) -> std::result::Result<(f64, f64), String> {
    let cpu = r.cpu.unwrap_or(0.0);
    let maxcpu = r.maxcpu.unwrap_or(0.0);
    if cpu < 0.0 {
        return Err(format!("negative cpu {cpu}"));
    }
    if maxcpu < 0.0 {
        return Err(format!("negative maxcpu {maxcpu}"));
    }
    Ok((cpu, maxcpu))
}

fn collect_guests(
    resources: &[Resource],
    warnings: &mut Vec<Warning>,
) -> Result<Vec<(String, Guest)>> {
    let mut out = Vec::new();
    for (i, r) in resources.iter().enumerate() {
        let kind = match r.kind.as_deref() {
            Some("qemu") => GuestKind::Qemu,
            Some("lxc") => GuestKind::Lxc,
            _ => continue,
        };
        let entry = || entry_name(r, i);
        let vmid = r
            .vmid
            .or_else(|| {
                r.id.as_deref()
                    .and_then(|id| id.rsplit('/').next()?.parse().ok())
            })
            .ok_or_else(|| Error::Resource {
                entry: entry(),
                message: "guest entry without a vmid".into(),
            })?;
        let node = r
            .node
            .clone()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| Error::Resource {
                entry: entry(),
                message: "guest entry without a node".into(),
            })?;
        let (cpu, maxcpu) = cpu_figures(r).map_err(|message| Error::Resource {
            entry: entry(),
            message,
        })?;
        let status = r.status.clone().unwrap_or_else(|| "unknown".into());
        let template = r.template.unwrap_or(false);
        // Paused, suspended or migrating guests still hold their memory; only stopped ones and
        // those without any report (offline node) do not load the node.
        let running = !template && !matches!(status.as_str(), "stopped" | "unknown" | "");
        let mut warn =
            |message: String| warnings.push(Warning::about(entry_subject(r, i), message));
        if r.maxmem.is_none() && !template {
            warn("has no maxmem: counted as 0 bytes, so memory checks cannot see it".to_owned());
        }
        if running && !is_known_status(&status) {
            warn(format!(
                "status {status:?} is not one Proxmox reports: counted as running, so it keeps its memory on the node"
            ));
        }
        let name = r.name.clone().unwrap_or_default();
        if !name.is_empty() && !crate::names::is_dns_name(&name) {
            // A name is cosmetic: flxp keeps it (escaped wherever it is shown) and carries on.
            warn(format!(
                "name {} is not a DNS name, which Proxmox requires of guest names",
                crate::names::quoted_excerpt(&name, 253)
            ));
        }
        let mut bad = CappedWarnings::new(entry_subject(r, i));
        let GuestTags { tags, over } = read_guest_tags(r.tags.as_deref().unwrap_or(""), &mut |t| {
            bad.push(format!(
                "tag {:?} has characters Proxmox does not allow in tags; ignored",
                t.to_ascii_lowercase()
            ));
        });
        bad.finish(
            "tags with characters Proxmox does not allow, ignored",
            warnings,
        );
        if over > 0 {
            warnings.push(Warning::about(
                entry_subject(r, i),
                format!(
                    "has more than {MAX_GUEST_TAGS} distinct tags; flxp reads {MAX_GUEST_TAGS} of them (flxp and ProxLB tags first) and ignores the other {over} entries"
                ),
            ));
        }
        out.push((
            node.clone(),
            Guest {
                vmid,
                kind,
                name,
                node: NodeIdx(0),
                status,
                running,
                template,
                maxcpu,
                cpu,
                maxmem: r.maxmem.unwrap_or(0),
                mem: r.mem.unwrap_or(0),
                memhost: r.memhost,
                maxdisk: r.maxdisk.unwrap_or(0),
                tags,
                lock: r.lock.clone().filter(|l| !l.is_empty()),
                hastate: r.hastate.clone().filter(|s| !s.is_empty()),
                migrating: None,
                arrived: 0.0,
                ha_managed: false,
                ha_starting: false,
                pool: r.pool.clone(),
                local_disks: Vec::new(),
            },
        ));
    }
    Ok(out)
}

/// Node indexes by lowercased name; nodes are sorted by name, so the first of a clash wins.
fn lowercase_index(nodes: &[Node]) -> HashMap<String, NodeIdx> {
    let mut out = HashMap::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        out.entry(n.name.to_ascii_lowercase())
            .or_insert(NodeIdx(i as u32));
    }
    out
}

/// Splits a Proxmox tag list (`;`, `,` or white space) into lowercase tags, dropping empties and
/// repeats.
pub fn split_tags(tags: &str) -> Vec<String> {
    // A set beside the list keeps this linear: a guest may carry any number of tags.
    let mut seen: HashSet<String> = HashSet::new();
    let mut out: Vec<String> = Vec::new();
    for t in tags.split(|c: char| c == ';' || c == ',' || c.is_whitespace()) {
        if t.is_empty() {
            continue;
        }
        let t = t.to_ascii_lowercase();
        if seen.insert(t.clone()) {
            out.push(t);
        }
    }
    out
}

fn apply_node_extras(
    nodes: &mut [Node],
    snapshot: &Snapshot,
    overrides: &Overrides,
    warnings: &mut Vec<Warning>,
) {
    for name in snapshot.nodes.keys().chain(overrides.notes.keys()) {
        if !nodes.iter().any(|n| &n.name == name) {
            warnings.push(Warning::node(
                name,
                "has notes or RRD data but is not in the cluster",
            ));
        }
    }
    let ha_maintenance = ha_maintenance_nodes(&snapshot.ha);
    for node in nodes.iter_mut() {
        let extra = snapshot.nodes.get(&node.name);
        let text = overrides
            .notes
            .get(&node.name)
            .map(String::as_str)
            .or_else(|| extra.and_then(|e| e.notes.as_deref()))
            .unwrap_or("");
        let NodeTokens {
            labels,
            taints,
            prefer_no,
            maintenance,
            warnings: w,
        } = notes::parse(&node.name, text);
        node.labels = labels;
        node.taints = taints;
        node.prefer_no = prefer_no;
        if maintenance {
            node.maintenance.push(MaintenanceSource::Notes);
        }
        warnings.extend(w);
        if ha_maintenance.contains(node.name.as_str()) {
            node.maintenance.push(MaintenanceSource::Ha);
        }
        if let Some(row) = extra.and_then(|e| e.rrddata.as_ref()) {
            node.pressure = Pressure {
                cpu_some: row.get("pressurecpusome"),
                memory_some: row.get("pressurememorysome"),
                memory_full: row.get("pressurememoryfull"),
                io_some: row.get("pressureiosome"),
                io_full: row.get("pressureiofull"),
            };
            node.arcsize = row.get("arcsize").filter(|v| *v >= 0.0).map(|v| v as u64);
            // A partial dump may lack node stats that the RRD row has.
            if node.maxmem == 0 {
                node.maxmem = row.get("memtotal").unwrap_or(0.0).max(0.0) as u64;
            }
            if node.mem.is_none() {
                node.mem = row.get("memused").filter(|v| *v >= 0.0).map(|v| v as u64);
            }
            if node.maxcpu == 0.0 {
                node.maxcpu = row.get("maxcpu").unwrap_or(0.0).max(0.0);
            }
        }
    }
}

/// HA resources that HA's status reports `starting` while its manager holds them `started`: started
/// but not yet reported running, which is when Proxmox counts them as starting. (`starting` with
/// any other manager state is a stopped resource about to be asked to start; it holds no node yet.)
fn ha_starting_sids(ha: &Ha) -> BTreeSet<&str> {
    ha.status
        .iter()
        .filter(|e| e.kind.as_deref() == Some("service") && e.state.as_deref() == Some("starting"))
        .filter(|e| e.crm_state.as_deref().is_none_or(|s| s == "started"))
        .filter_map(|e| {
            e.sid
                .as_deref()
                .or_else(|| e.id.as_deref()?.strip_prefix("service:"))
        })
        .collect()
}

/// Nodes that HA's status reports in maintenance (an `lrm` entry in maintenance mode).
fn ha_maintenance_nodes(ha: &Ha) -> BTreeSet<&str> {
    ha.status
        .iter()
        .filter(|e| e.kind.as_deref() == Some("lrm"))
        .filter(|e| {
            e.mode.as_deref() == Some("maintenance")
                || e.status
                    .as_deref()
                    .is_some_and(|s| s.contains("maintenance"))
        })
        .filter_map(|e| e.node.as_deref())
        .collect()
}

/// A guest status Proxmox reports: `stopped`, `unknown` (no report yet), or a QEMU run state as QMP
/// names them (`qapi/run-state.json` in QEMU); containers only use `running` and `stopped`.
/// Whether Proxmox reports this status for a node entry of `/cluster/resources`.
fn is_node_status(status: &str) -> bool {
    matches!(status, "online" | "offline" | "unknown")
}

fn is_known_status(status: &str) -> bool {
    matches!(
        status,
        "running"
            | "stopped"
            | "unknown"
            | ""
            | "paused"
            | "prelaunch"
            | "suspended"
            | "inmigrate"
            | "postmigrate"
            | "finish-migrate"
            | "debug"
            | "internal-error"
            | "io-error"
            | "restore-vm"
            | "save-vm"
            | "shutdown"
            | "watchdog"
            | "guest-panicked"
            | "colo"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(json: &str) -> Cluster {
        Cluster::from_json(json, &Overrides::default()).unwrap()
    }

    #[test]
    fn a_container_cpu_limit_may_be_a_fraction_and_a_missing_one_is_the_whole_node() {
        // Proxmox's `cpulimit` is a number such as 0.5; without one a container may use every CPU.
        let c = cluster(
            r#"[{"id":"node/a","type":"node","node":"a","status":"online","maxmem":100,"maxcpu":8},
                {"id":"lxc/100","type":"lxc","vmid":100,"node":"a","status":"running","maxcpu":0.5},
                {"id":"lxc/101","type":"lxc","vmid":101,"node":"a","status":"running","maxcpu":0},
                {"id":"qemu/102","type":"qemu","vmid":102,"node":"a","status":"running","maxcpu":2},
                {"id":"qemu/103","type":"qemu","vmid":103,"node":"a","status":"running"}]"#,
        );
        let cpus: Vec<f64> = c.guests().iter().map(|g| g.static_cpus(8.0)).collect();
        // A VM without a CPU count has qemu-server's default: one socket of one core.
        assert_eq!(cpus, [0.5, 8.0, 2.0, 1.0]);
    }

    #[test]
    fn guests_are_indexed_by_node_tag_and_vmid() {
        let c = cluster(
            r#"[{"id":"node/b","type":"node","node":"b","status":"online","maxmem":100,"mem":10,"maxcpu":4,"cpu":0.5},
                {"id":"node/a","type":"node","node":"a","status":"online","maxmem":100,"mem":10,"maxcpu":4,"cpu":0.5},
                {"id":"qemu/101","type":"qemu","vmid":101,"node":"b","status":"running","tags":"Web;flxp.ignore"},
                {"id":"lxc/100","type":"lxc","vmid":"100","node":"a","status":"stopped","tags":"web"},
                {"id":"qemu/900","type":"qemu","vmid":900,"node":"a","status":"stopped","template":1}]"#,
        );
        assert_eq!(c.nodes[0].name, "a", "nodes are sorted by name");
        let a = c.node_idx("a").unwrap();
        assert_eq!(c.guests_on(a).len(), 2);
        assert_eq!(c.guests_tagged("web").len(), 2, "tags are lowercased");
        let g = c.guest(c.guest_idx(101).unwrap());
        assert!(g.running);
        assert!(!c.guest(c.guest_idx(100).unwrap()).running);
        assert!(c.guest(c.guest_idx(900).unwrap()).template);
    }

    #[test]
    fn guests_on_unlisted_nodes_add_an_unknown_node_and_a_warning() {
        let c = cluster(
            r#"[{"id":"qemu/101","type":"qemu","vmid":101,"node":"x","status":"running","maxmem":1}]"#,
        );
        assert_eq!(c.nodes[0].status, NodeReachability::Unknown);
        assert!(c.warnings[0].to_string().contains("no node entry"));
    }

    #[test]
    fn duplicate_vmids_and_missing_fields_are_errors_naming_the_entry() {
        let dup = r#"[{"id":"qemu/101","type":"qemu","vmid":101,"node":"x"},{"id":"lxc/101","type":"lxc","vmid":101,"node":"x"}]"#;
        let e = crate::testutil::refusal(dup);
        assert!(e.contains("vmid 101 appears more than once"), "{e}");
        let no_node = r#"[{"id":"qemu/101","type":"qemu","vmid":101}]"#;
        let e = crate::testutil::refusal(no_node);
        assert!(
            e.contains("qemu/101") && e.contains("without a node"),
            "{e}"
        );
    }

    #[test]
    fn an_online_node_without_memory_or_cpus_is_a_warning() {
        let c = cluster(
            r#"[{"type":"node","node":"a","status":"online","maxmem":0,"maxcpu":8},
                {"type":"node","node":"b","status":"online","maxmem":1024},
                {"type":"node","node":"c","status":"offline"}]"#,
        );
        let w: Vec<String> = c.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            w,
            [
                "node a: online but reports maxmem 0: no guest can be placed on it",
                "node b: online but reports maxcpu 0: no guest can be placed on it"
            ]
        );
    }

    #[test]
    fn a_snapshot_without_nodes_says_so() {
        let c = Cluster::from_json(
            r#"[{"id":"storage/a/local","type":"storage","node":"a","storage":"local"}]"#,
            &Overrides::default(),
        )
        .unwrap();
        assert!(c.nodes.is_empty());
        let w: Vec<String> = c.warnings.iter().map(ToString::to_string).collect();
        assert!(w.iter().any(|w| w.contains("holds no node")), "{w:?}");
    }

    #[test]
    fn maintenance_comes_from_notes_ha_and_the_caller() {
        let json = r#"{"resources":[
            {"id":"node/a","type":"node","node":"a","status":"online"},
            {"id":"node/b","type":"node","node":"b","status":"online","hastate":"maintenance"},
            {"id":"node/c","type":"node","node":"c","status":"online"},
            {"id":"node/d","type":"node","node":"d","status":"online"}],
            "nodes":{"a":{"notes":"rack 4, flxp.maintenance"}},
            "ha":{"status":[{"type":"lrm","node":"c","status":"c (maintenance mode)"}]}}"#;
        let mut o = Overrides::default();
        o.maintenance.insert("d".into());
        let c = Cluster::from_json(json, &o).unwrap();
        let m: Vec<_> = c.nodes.iter().map(|n| n.maintenance.clone()).collect();
        assert_eq!(
            m,
            vec![
                vec![MaintenanceSource::Notes],
                vec![MaintenanceSource::Ha],
                vec![MaintenanceSource::Ha],
                vec![MaintenanceSource::Requested]
            ]
        );
    }
}

#[cfg(test)]
mod input_checks {
    use super::*;

    fn outcome(json: &str) -> std::result::Result<Vec<String>, String> {
        Cluster::from_json(json, &Overrides::default())
            .map(|c| c.warnings.iter().map(ToString::to_string).collect())
            .map_err(|e| e.to_string())
    }

    const NODE: &str = r#"{"id":"node/a","type":"node","node":"a","status":"online","maxmem":100,"mem":10,"maxcpu":4}"#;

    const DROPPED: &str =
        "(expected one of node, qemu, lxc, storage, pool, sdn, network, openvz); dropped";
    const A_GUEST: &str =
        ": it looks like a guest, which flxp will neither see nor count in any rule";

    /// Each kind of nonsense a snapshot can carry, with the exact warnings it gets.
    #[test]
    fn nonsense_in_a_snapshot_is_a_warning_naming_the_entry() {
        let cases: Vec<(&str, Vec<String>)> = vec![
            (
                r#"{"id":"foo/1","type":"vm","vmid":101,"node":"a"}"#,
                vec![format!(
                    "resources[1] (foo/1): unknown type `vm` {DROPPED}{A_GUEST}"
                )],
            ),
            (
                r#"{"vmid":102,"node":"a","maxmem":1}"#,
                vec![format!("resources[1] (vmid 102): no `type` {DROPPED}{A_GUEST}")],
            ),
            (
                r#"{"id":"qemu/103","node":"a"}"#,
                vec![format!("resources[1] (qemu/103): no `type` {DROPPED}{A_GUEST}")],
            ),
            (
                r#"{"id":"thing","type":"","status":"ok"}"#,
                vec![format!("resources[1] (thing): unknown type `` {DROPPED}")],
            ),
            (
                r#"{"type":"node","node":"b","status":"online","maxcpu":4}"#,
                vec!["node b: online but reports no maxmem: no guest can be placed on it".into()],
            ),
            (
                r#"{"type":"node","node":"b","status":"online","maxcpu":4,"maxmem":null}"#,
                vec!["node b: online but reports no maxmem: no guest can be placed on it".into()],
            ),
            (
                r#"{"type":"node","node":"b","status":"online","maxcpu":4,"maxmem":100,"mem":101}"#,
                vec!["node b: reports 101 B of memory used of 100 B: counted as full, no guest can be placed on it".into()],
            ),
            (
                r#"{"type":"node","node":"b","status":"online","maxcpu":4,"maxmem":68719476736,"mem":75161927680}"#,
                vec!["node b: reports 70.0 GiB of memory used of 64.0 GiB: counted as full, no guest can be placed on it".into()],
            ),
            (
                r#"{"type":"node","node":"b","status":"online","maxcpu":4,"maxmem":100,"cpu":5}"#,
                vec!["node b: reports CPU use of 500 % of its CPUs: counted as fully busy (100 %)".into()],
            ),
            (
                r#"{"type":"node","node":"b","status":1,"maxcpu":4,"maxmem":100}"#,
                vec![r#"node b: status "1" is not one Proxmox reports for a node (online, offline, unknown): read as unknown, so no guest is placed on it or moved to it"#.into()],
            ),
            (
                r#"{"type":"node","node":"b","status":"Online","maxcpu":4,"maxmem":100}"#,
                vec![r#"node b: status "Online" is not one Proxmox reports for a node (online, offline, unknown): read as unknown, so no guest is placed on it or moved to it"#.into()],
            ),
            (
                r#"{"type":"node","node":"b","status":"offline","maxcpu":4,"maxmem":100}"#,
                vec![],
            ),
            (
                r#"{"id":"qemu/101","type":"qemu","vmid":101,"node":"a","status":"running"}"#,
                vec!["resources[1] (qemu/101): has no maxmem: counted as 0 bytes, so memory checks cannot see it".into()],
            ),
            (
                r#"{"id":"qemu/104","type":"qemu","vmid":104,"node":"a","maxmem":1,"status":"banana"}"#,
                vec![r#"resources[1] (qemu/104): status "banana" is not one Proxmox reports: counted as running, so it keeps its memory on the node"#.into()],
            ),
            (
                r#"{"id":"qemu/104","type":"qemu","vmid":104,"node":"a","maxmem":1,"status":"paused"}"#,
                vec![],
            ),
            (
                r#"{"id":"lxc/101","type":"lxc","vmid":101,"node":"a","maxmem":null,"status":"stopped"}"#,
                vec!["resources[1] (lxc/101): has no maxmem: counted as 0 bytes, so memory checks cannot see it".into()],
            ),
            (
                r#"{"id":"qemu/101","type":"qemu","vmid":101,"node":"a","maxmem":1,"name":"web_1\u001b[31m"}"#,
                vec![r#"resources[1] (qemu/101): name "web_1\u{1b}[31m" is not a DNS name, which Proxmox requires of guest names"#.into()],
            ),
            (
                r#"{"id":"qemu/101","type":"qemu","vmid":101,"node":"a","maxmem":1,"tags":"web;b\u001b[0m,flxp.node.\u00fc"}"#,
                vec![
                    r#"resources[1] (qemu/101): tag "b\u{1b}[0m" has characters Proxmox does not allow in tags; ignored"#.into(),
                    r#"resources[1] (qemu/101): tag "flxp.node.ü" has characters Proxmox does not allow in tags; ignored"#.into(),
                ],
            ),
            // Fine as they are: a template without maxmem, a DNS name with dots, known types.
            (
                r#"{"id":"qemu/900","type":"qemu","vmid":900,"node":"a","template":1,"name":"tpl.example.com"}"#,
                vec![],
            ),
            (r#"{"id":"pool/x","type":"pool","pool":"x"}"#, vec![]),
        ];
        for (entry, want) in cases {
            let json = format!("[{NODE},{entry}]");
            assert_eq!(outcome(&json), Ok(want), "{entry}");
        }
    }

    /// Entries that cannot be meant are errors naming the entry and the field.
    #[test]
    fn impossible_entries_are_errors_naming_the_entry() {
        let cases = [
            (
                r#"[{"id":"node/x","type":"node","node":"p\u001b[31mve","status":"online"}]"#,
                r#"invalid resource node/x: node name "p\u{1b}[31mve" is not one Proxmox accepts (a DNS label: letters, digits and inner hyphens, at most 63)"#,
            ),
            (
                r#"[{"type":"node","node":"a\nb"}]"#,
                r#"invalid resource resources[0]: node name "a\nb" is not one Proxmox accepts (a DNS label: letters, digits and inner hyphens, at most 63)"#,
            ),
            (
                r#"[{"id":"qemu/101","type":"qemu","vmid":101,"node":"pve_1","maxmem":1}]"#,
                r#"invalid resource qemu/101: node name "pve_1" is not one Proxmox accepts (a DNS label: letters, digits and inner hyphens, at most 63)"#,
            ),
            (
                r#"[{"type":"node","node":"a","maxmem":true}]"#,
                "invalid snapshot at resources[0].maxmem: expected a number, got true",
            ),
            (
                r#"[{"id":"qemu/1","type":"qemu","vmid":1,"node":"a","maxmem":false}]"#,
                "invalid snapshot at resources[0].maxmem: expected a number, got false",
            ),
            (
                r#"[{"type":"node","node":"a","maxmem":18446744073709551616}]"#,
                "invalid snapshot at resources[0].maxmem: expected a non-negative integer below 2^64, got a number too large to read exactly",
            ),
            (
                r#"{"resources":[{"type":"node","node":"a"}],"nodes":{"a":{"notes":true}}}"#,
                "invalid snapshot at nodes.a.notes: expected a string, got true",
            ),
            (
                r#"{"resources":[{"type":"node","node":"a"}],"nodes":{"a":{"notes":["flxp.maintenance"]}}}"#,
                "invalid snapshot at nodes.a.notes: expected a string, got an array",
            ),
        ];
        for (json, want) in cases {
            let e = outcome(json).unwrap_err();
            assert!(e.starts_with(want), "{json}\n got: {e}\nwant: {want}");
        }
    }
}
