//! Building the world from a scenario: nodes, storages, guests (configs in `guest_config.rs`),
//! pools, HA and task history, each checked with an error naming the scenario entry at fault.

use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use serde_json::Value;

use super::{
    GuestKind, HaResourceConf, HaState, History, Node, Pool, Pressure, ServiceStatus, Settings,
    Storage, World,
};
use crate::faults::Faults;
use crate::scenario::Scenario;
use crate::schema::is_dns_label;
use crate::tags::TagStyle;
use crate::tasks::TaskTable;
use crate::{Error, Result};

use flxp_core::units::GIB;

/// The shared storage a scenario without storage entries gets (see `build_storages`).
pub const DEFAULT_SHARED_STORAGE: &str = "shared";

impl World {
    /// Builds the world of a scenario at simulated time `start`.
    pub fn build(scenario: &Scenario, start: f64) -> Result<World> {
        let snap = &scenario.snapshot;
        let sim = &scenario.sim;
        let options = snap.options.clone();
        let settings = Settings {
            cluster_name: sim
                .cluster_name
                .clone()
                .unwrap_or_else(|| "flxp-sim".into()),
            version: sim.version.clone().unwrap_or_else(|| "9.2.11".into()),
            migration_bandwidth: sim.migration_bandwidth.unwrap_or(GIB) as f64,
            clone_bandwidth: sim
                .clone_bandwidth
                .or(sim.migration_bandwidth)
                .unwrap_or(GIB) as f64,
            ha_delay: sim.ha_delay_secs.unwrap_or(5.0),
            fence_delay: sim.ha_fence_delay_secs.unwrap_or(60.0),
            nextid_lower: next_id_bound(&options, "lower").unwrap_or(100),
            nextid_upper: next_id_bound(&options, "upper").unwrap_or(1_000_000),
            tag_style: tag_style(&options),
            stats_interval: sim.stats_interval_secs.unwrap_or(0.0),
            node_shutdown_secs: sim.node_shutdown_secs.unwrap_or(30.0),
            node_boot_secs: sim.node_boot_secs.unwrap_or(120.0),
        };
        let mut world = World {
            now: start,
            settings,
            nodes: BTreeMap::new(),
            guests: BTreeMap::new(),
            storages: BTreeMap::new(),
            pools: BTreeMap::new(),
            ha: HaState::default(),
            options,
            tasks: TaskTable::default(),
            faults: Faults::new(sim.faults.clone(), sim.seed.unwrap_or(0)),
            history: History::default(),
            reservations: BTreeMap::new(),
            arrivals: BTreeMap::new(),
            events: BinaryHeap::new(),
            seq: 0,
            rng: sim.seed.unwrap_or(0) ^ 0x5EED_F1A9,
            cancelled: Default::default(),
            bulk: Vec::new(),
            ha_round_pending: false,
            load: super::LoadState {
                next_sample: ((start / 60.0).floor() + 1.0) * 60.0,
                ..super::LoadState::default()
            },
            records: super::Records::default(),
        };
        world.build_nodes(scenario)?;
        world.build_storages(scenario)?;
        world.build_guests(scenario)?;
        world.derive_node_base(scenario);
        world.build_pools(scenario);
        world.build_ha(scenario)?;
        // Services recorded away from their preferred nodes fail back, as HA would do.
        world.ha_schedule_round();
        for t in &snap.tasks {
            if let Some(i) = world.tasks.import(t) {
                if world.tasks.get(i).is_some_and(|t| t.is_running()) {
                    // A task in flight in the recorded cluster: let it end quietly.
                    world.schedule(
                        start + 10.0,
                        super::Action::EndTask {
                            task: i,
                            result: Ok(()),
                        },
                    );
                }
            }
        }
        if let Some(trace) = &sim.trace {
            world
                .load_trace(trace, start)
                .map_err(|(path, msg)| Error::scenario(format!("sim.trace.{path}"), msg))?;
        }
        world.record();
        Ok(world)
    }

    fn build_nodes(&mut self, scenario: &Scenario) -> Result<()> {
        let snap = &scenario.snapshot;
        for (i, r) in snap.resources.iter().enumerate() {
            if r.kind.as_deref() != Some("node") {
                continue;
            }
            let at = format!("resources[{i}]");
            let name = own_or_id_name(&r.node, r.id.as_deref(), |id| id.strip_prefix("node/"))
                .ok_or_else(|| Error::scenario(&at, "node entry without `node` name"))?;
            if !is_dns_label(&name) {
                return Err(Error::scenario(
                    format!("{at}.node"),
                    format!("'{name}' is not a valid node name"),
                ));
            }
            if self.nodes.contains_key(&name) {
                return Err(Error::scenario(&at, format!("duplicate node '{name}'")));
            }
            let spec = scenario.sim.nodes.get(&name).cloned().unwrap_or_default();
            let extra = snap.nodes.get(&name);
            let online = r.status.as_deref().is_none_or(|s| s == "online");
            let maxcpu = r
                .maxcpu
                .map(|c| c.round() as u32)
                .or(spec.maxcpu)
                .unwrap_or(8)
                .max(1);
            super::guest_config::check_bytes(r.maxmem.or(spec.maxmem), &format!("{at}.maxmem"))?;
            super::guest_config::check_bytes(r.mem, &format!("{at}.mem"))?;
            super::guest_config::check_bytes(spec.base_mem, &format!("sim.nodes.{name}.base_mem"))?;
            let maxmem = r.maxmem.or(spec.maxmem).unwrap_or(32 * GIB);
            let rrd = extra.and_then(|e| e.rrddata.as_ref());
            let pressure = spec.pressure.unwrap_or_else(|| Pressure {
                cpu_some: rrd.and_then(|r| r.get("pressurecpusome")).unwrap_or(0.0),
                cpu_full: 0.0,
                io_some: rrd.and_then(|r| r.get("pressureiosome")).unwrap_or(0.0),
                io_full: rrd.and_then(|r| r.get("pressureiofull")).unwrap_or(0.0),
                memory_some: rrd.and_then(|r| r.get("pressurememorysome")).unwrap_or(0.0),
                memory_full: rrd.and_then(|r| r.get("pressurememoryfull")).unwrap_or(0.0),
            });
            let nodeid = self.nodes.len() as u32 + 1;
            let node = Node {
                name: name.clone(),
                online,
                maxcpu,
                maxmem,
                maxdisk: r.maxdisk.unwrap_or(100 * GIB),
                disk: r.disk.unwrap_or(8 * GIB),
                base_cpu: spec.base_cpu.unwrap_or(0.0),
                base_mem: spec.base_mem.unwrap_or(0),
                notes: spec
                    .notes
                    .clone()
                    .or_else(|| extra.and_then(|e| e.notes.clone()))
                    .unwrap_or_default(),
                level: r.level.clone().unwrap_or_default(),
                cpu_model: spec
                    .cpu_model
                    .clone()
                    .unwrap_or_else(|| "AMD EPYC 7543 32-Core Processor".into()),
                sockets: spec.sockets.unwrap_or(1).max(1),
                ip: spec
                    .ip
                    .clone()
                    .unwrap_or_else(|| format!("10.10.10.{nodeid}")),
                nodeid,
                booted_at: start_minus(self.now, r.uptime.unwrap_or(86_400)),
                ha_maintenance: spec
                    .maintenance
                    .unwrap_or(r.hastate.as_deref() == Some("maintenance")),
                pressure,
                swap_total: 8 * GIB,
                swap_used: 0,
                offline_since: (!online).then_some(self.now),
                shutting_down: false,
                booting: false,
            };
            self.nodes.insert(name, node);
        }
        if self.nodes.is_empty() {
            return Err(Error::scenario(
                "resources",
                "no node entries (type `node`)",
            ));
        }
        for name in scenario.sim.nodes.keys() {
            if !self.nodes.contains_key(name) {
                return Err(Error::scenario(
                    format!("sim.nodes.{name}"),
                    "no such node in `resources`",
                ));
            }
        }
        for name in scenario.snapshot.nodes.keys() {
            if !self.nodes.contains_key(name) {
                return Err(Error::scenario(
                    format!("nodes.{name}"),
                    "no such node in `resources`",
                ));
            }
        }
        Ok(())
    }

    fn build_storages(&mut self, scenario: &Scenario) -> Result<()> {
        let all_nodes: BTreeSet<String> = self.nodes.keys().cloned().collect();
        let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (i, r) in scenario.snapshot.resources.iter().enumerate() {
            if r.kind.as_deref() != Some("storage") {
                continue;
            }
            let at = format!("resources[{i}]");
            let id = own_or_id_name(&r.storage, r.id.as_deref(), |id| id.rsplit('/').next())
                .ok_or_else(|| Error::scenario(&at, "storage entry without `storage` id"))?;
            let node = r
                .node
                .clone()
                .ok_or_else(|| Error::scenario(&at, "storage entry without `node`"))?;
            if !self.nodes.contains_key(&node) {
                return Err(Error::scenario(
                    format!("{at}.node"),
                    format!("no such node '{node}'"),
                ));
            }
            seen.entry(id.clone()).or_default().insert(node.clone());
            let shared = r.shared.unwrap_or(false);
            let size = (r.maxdisk.unwrap_or(4 << 40), r.disk.unwrap_or(0));
            let st = self.storages.entry(id.clone()).or_insert_with(|| Storage {
                id,
                kind: r.plugintype.clone().unwrap_or_else(|| "dir".into()),
                shared: r.shared.unwrap_or(false),
                content: r.content.clone().unwrap_or_else(|| "images,rootdir".into()),
                nodes: BTreeSet::new(),
                total: r.maxdisk.unwrap_or(4 << 40),
                base_used: r.disk.unwrap_or(0),
                per_node: BTreeMap::new(),
            });
            // A local storage has a size of its own on each node (local-lvm on a small node).
            if !shared {
                st.per_node.insert(node, size);
            }
        }
        for (id, nodes) in seen {
            if let Some(s) = self.storages.get_mut(&id) {
                if nodes != all_nodes {
                    s.nodes = nodes;
                }
            }
        }
        // Ids the loop below defined: a local storage may be listed again for other nodes.
        let mut listed: BTreeSet<String> = BTreeSet::new();
        for (i, spec) in scenario.sim.storages.iter().enumerate() {
            let at = format!("sim.storages[{i}]");
            if !crate::schema::is_storage_id(&spec.storage) {
                return Err(Error::scenario(
                    format!("{at}.storage"),
                    format!("'{}' is not a valid storage id", spec.storage),
                ));
            }
            let mut nodes = BTreeSet::new();
            for n in spec.nodes.iter().flatten() {
                if !self.nodes.contains_key(n) {
                    return Err(Error::scenario(
                        format!("{at}.nodes"),
                        format!("no such node '{n}'"),
                    ));
                }
                nodes.insert(n.clone());
            }
            let size = (spec.total.unwrap_or(4 << 40), spec.used.unwrap_or(0));
            if !listed.insert(spec.storage.clone()) {
                // Listed again: the same id on other nodes (local-lvm on every node), each with
                // its own size; never an overwrite of the nodes listed before.
                let Some(st) = self.storages.get_mut(&spec.storage) else {
                    continue;
                };
                if st.shared || spec.shared {
                    return Err(Error::scenario(
                        format!("{at}.storage"),
                        format!(
                            "storage '{}' is listed twice; only a local storage may be listed \
                             again, for other nodes",
                            spec.storage
                        ),
                    ));
                }
                if nodes.is_empty() {
                    st.nodes.clear();
                    (st.total, st.base_used) = size;
                } else {
                    if !st.nodes.is_empty() {
                        st.nodes.extend(nodes.iter().cloned());
                    }
                    for n in nodes {
                        st.per_node.insert(n, size);
                    }
                }
                continue;
            }
            // A local storage listed for some nodes keeps their size per node, so that a later
            // entry for other nodes leaves it alone.
            let per_node: BTreeMap<String, (u64, u64)> = if spec.shared {
                BTreeMap::new()
            } else {
                nodes.iter().map(|n| (n.clone(), size)).collect()
            };
            self.storages.insert(
                spec.storage.clone(),
                Storage {
                    id: spec.storage.clone(),
                    kind: spec.kind.clone(),
                    shared: spec.shared,
                    content: spec
                        .content
                        .clone()
                        .unwrap_or_else(|| "images,rootdir".into()),
                    nodes,
                    total: size.0,
                    base_used: size.1,
                    per_node,
                },
            );
        }
        // A scenario that describes no storage gets what a cluster that live-migrates usually
        // has: node-local `local` (ISOs, templates, backups) and `local-lvm`, and a shared
        // `shared` (NFS) that holds the generated guest disks, so live migration needs no
        // `with-local-disks`. Local disks are asked for by naming `local-lvm` in a guest's config.
        if self.storages.is_empty() {
            self.storages.insert(
                DEFAULT_SHARED_STORAGE.into(),
                Storage {
                    id: DEFAULT_SHARED_STORAGE.into(),
                    kind: "nfs".into(),
                    shared: true,
                    content: "images,rootdir".into(),
                    nodes: BTreeSet::new(),
                    total: 8 << 40,
                    base_used: 0,
                    per_node: BTreeMap::new(),
                },
            );
            self.storages.insert(
                "local".into(),
                Storage {
                    id: "local".into(),
                    kind: "dir".into(),
                    shared: false,
                    content: "iso,vztmpl,backup".into(),
                    nodes: BTreeSet::new(),
                    total: 100 * GIB,
                    base_used: 10 * GIB,
                    per_node: BTreeMap::new(),
                },
            );
            self.storages.insert(
                "local-lvm".into(),
                Storage {
                    id: "local-lvm".into(),
                    kind: "lvmthin".into(),
                    shared: false,
                    content: "images,rootdir".into(),
                    nodes: BTreeSet::new(),
                    total: 2 << 40,
                    base_used: 0,
                    per_node: BTreeMap::new(),
                },
            );
        }
        // Every node needs somewhere for guest disks; a dump whose storages hold only ISOs and
        // backups gets a local thin pool on the nodes that lack one.
        let lacking: BTreeSet<String> = self
            .nodes
            .keys()
            .filter(|n| {
                ["images", "rootdir"].iter().any(|c| {
                    !self
                        .storages
                        .values()
                        .any(|s| s.available_on(n) && s.has_content(c))
                })
            })
            .cloned()
            .collect();
        if !lacking.is_empty() {
            let id = if self.storages.contains_key("local-lvm") {
                "sim-local"
            } else {
                "local-lvm"
            };
            let all = lacking.len() == self.nodes.len();
            self.storages.insert(
                id.into(),
                Storage {
                    id: id.into(),
                    kind: "lvmthin".into(),
                    shared: false,
                    content: "images,rootdir".into(),
                    nodes: if all { BTreeSet::new() } else { lacking },
                    total: 2 << 40,
                    base_used: 0,
                    per_node: BTreeMap::new(),
                },
            );
        }
        Ok(())
    }

    fn build_guests(&mut self, scenario: &Scenario) -> Result<()> {
        for (i, r) in scenario.snapshot.resources.iter().enumerate() {
            let Some(kind) = r.kind.as_deref().and_then(GuestKind::from_resource_type) else {
                continue;
            };
            let at = format!("resources[{i}]");
            let vmid = r
                .vmid
                .or_else(|| {
                    r.id.as_deref()
                        .and_then(|id| id.split('/').nth(1))
                        .and_then(|v| v.parse().ok())
                })
                .ok_or_else(|| Error::scenario(&at, "guest entry without `vmid`"))?;
            if !crate::schema::is_vmid(&vmid.to_string()) {
                return Err(Error::scenario(
                    format!("{at}.vmid"),
                    format!("{vmid} is not a valid VMID (100..999999999)"),
                ));
            }
            if self.guests.contains_key(&vmid) {
                return Err(Error::scenario(
                    &at,
                    format!("duplicate guest {vmid}: a guest is on one node only"),
                ));
            }
            let node = r
                .node
                .clone()
                .ok_or_else(|| Error::scenario(&at, format!("guest {vmid} has no `node`")))?;
            if !self.nodes.contains_key(&node) {
                return Err(Error::scenario(
                    format!("{at}.node"),
                    format!("guest {vmid} is on node '{node}', which has no node entry"),
                ));
            }
            let spec = scenario
                .sim
                .guests
                .get(&vmid.to_string())
                .cloned()
                .unwrap_or_default();
            let guest = self.guest_from_resource(kind, vmid, &node, r, &spec, &at)?;
            self.guests.insert(vmid, guest);
        }
        for key in scenario.sim.guests.keys() {
            let known = key
                .parse::<u32>()
                .ok()
                .is_some_and(|v| self.guests.contains_key(&v));
            if !known {
                return Err(Error::scenario(
                    format!("sim.guests.{key}"),
                    "no such guest in `resources`",
                ));
            }
        }
        Ok(())
    }

    /// Base usage of each node: the snapshot's figures minus its running guests, unless given.
    fn derive_node_base(&mut self, scenario: &Scenario) {
        for r in &scenario.snapshot.resources {
            if r.kind.as_deref() != Some("node") {
                continue;
            }
            let Some(name) = r.node.clone() else { continue };
            let spec = scenario.sim.nodes.get(&name).cloned().unwrap_or_default();
            let Some(node) = self.nodes.get(&name) else {
                continue;
            };
            let (mut cores, mut mem) = (0.0, 0u64);
            for g in self.guests.values().filter(|g| g.node == name && g.running) {
                cores += g.usage.cpu * g.maxcpu(node.maxcpu);
                mem = mem.saturating_add(g.host_mem());
            }
            let total_cores = r.cpu.unwrap_or(0.0) * f64::from(node.maxcpu);
            let base_cpu = spec.base_cpu.unwrap_or((total_cores - cores).max(0.0));
            let base_mem = spec.base_mem.unwrap_or_else(|| {
                r.mem
                    .map(|m| m.saturating_sub(mem))
                    .unwrap_or(node.maxmem / 32)
            });
            if let Some(node) = self.nodes.get_mut(&name) {
                node.base_cpu = base_cpu;
                node.base_mem = base_mem;
            }
        }
    }

    /// What a scenario holds that real clusters rarely show, as warnings rather than errors:
    /// real dumps can legitimately have them (KSM and ballooning let running guests' memory add
    /// up past the node's; a stopped guest may be configured larger than its node). Node
    /// memory is reported capped at the node's total.
    pub fn memory_warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for node in self.nodes.values() {
            let guests: Vec<_> = self
                .guests
                .values()
                .filter(|g| g.node == node.name)
                .collect();
            for g in &guests {
                if g.maxmem() > node.maxmem {
                    out.push(format!(
                        "guest {} has {} MiB of memory, more than node '{}' has ({} MiB)",
                        g.vmid,
                        g.maxmem() >> 20,
                        node.name,
                        node.maxmem >> 20
                    ));
                }
            }
            let used = guests
                .iter()
                .map(|g| g.host_mem())
                .fold(node.base_mem, u64::saturating_add);
            if used > node.maxmem {
                out.push(format!(
                    "node '{}' uses {} MiB with its running guests, more than its {} MiB; \
                     its memory is reported as full",
                    node.name,
                    used >> 20,
                    node.maxmem >> 20
                ));
            }
        }
        out
    }

    fn build_pools(&mut self, scenario: &Scenario) {
        for r in &scenario.snapshot.resources {
            if r.kind.as_deref() == Some("pool") {
                if let Some(p) = r.pool.clone().or_else(|| {
                    r.id.as_deref()
                        .and_then(|i| i.strip_prefix("/pool/"))
                        .map(str::to_string)
                }) {
                    self.pools.entry(p).or_default();
                }
            }
        }
        for g in self.guests.values() {
            if let Some(p) = &g.pool {
                self.pools.entry(p.clone()).or_default();
            }
        }
        for (id, spec) in &scenario.sim.pools {
            self.pools.insert(
                id.clone(),
                Pool {
                    comment: spec.comment.clone(),
                },
            );
        }
    }

    fn build_ha(&mut self, scenario: &Scenario) -> Result<()> {
        let ha = &scenario.snapshot.ha;
        for (i, r) in ha.resources.iter().enumerate() {
            let at = format!("ha.resources[{i}]");
            let sid = r
                .sid
                .clone()
                .ok_or_else(|| Error::scenario(&at, "HA resource without `sid`"))?;
            let (prefix, id) = match sid.split_once(':') {
                Some((p, id)) => (Some(p), id),
                None => (None, sid.as_str()),
            };
            let vmid: u32 = id.parse().map_err(|_| {
                Error::scenario(
                    format!("{at}.sid"),
                    format!("'{sid}' is not vm:<vmid> or ct:<vmid>"),
                )
            })?;
            let guest = self.guests.get(&vmid).ok_or_else(|| {
                Error::scenario(
                    format!("{at}.sid"),
                    format!("no guest {vmid} for HA resource '{sid}'"),
                )
            })?;
            if prefix.is_some_and(|p| p != guest.kind.ha_prefix()) {
                return Err(Error::scenario(
                    format!("{at}.sid"),
                    format!(
                        "'{sid}' names a {}, but guest {vmid} is {}",
                        prefix.unwrap_or(""),
                        guest.kind.as_str()
                    ),
                ));
            }
            let sid = guest.sid();
            let state = r.state.clone().unwrap_or_else(|| "started".into());
            if !matches!(
                state.as_str(),
                "started" | "stopped" | "enabled" | "disabled" | "ignored"
            ) {
                return Err(Error::scenario(
                    format!("{at}.state"),
                    format!("unknown HA state '{state}'"),
                ));
            }
            let conf = HaResourceConf {
                state,
                max_restart: r.max_restart.unwrap_or(1),
                max_relocate: r.max_relocate.unwrap_or(1),
                failback: r.failback.unwrap_or(true),
                group: r.group.clone(),
                comment: r.comment.clone(),
            };
            let status = ServiceStatus::settled(guest, &conf);
            self.ha.resources.insert(sid.clone(), conf);
            self.ha.services.insert(sid, status);
        }
        for (i, rule) in ha.rules.iter().enumerate() {
            let at = format!("ha.rules[{i}]");
            let id = rule
                .rule
                .clone()
                .ok_or_else(|| Error::scenario(&at, "HA rule without `rule` id"))?;
            match rule.kind.as_deref() {
                Some("node-affinity") => {
                    if rule.nodes.as_deref().is_none_or(str::is_empty) {
                        return Err(Error::scenario(
                            format!("{at}.nodes"),
                            "a node-affinity rule needs `nodes`",
                        ));
                    }
                }
                Some("resource-affinity") => {
                    if !matches!(rule.affinity.as_deref(), Some("positive" | "negative")) {
                        return Err(Error::scenario(
                            format!("{at}.affinity"),
                            "must be `positive` or `negative`",
                        ));
                    }
                }
                other => {
                    return Err(Error::scenario(
                        format!("{at}.type"),
                        format!(
                            "unknown HA rule type {other:?}, expected node-affinity or resource-affinity"
                        ),
                    ));
                }
            }
            if self
                .ha
                .rules
                .iter()
                .any(|r| r.rule.as_deref() == Some(id.as_str()))
            {
                return Err(Error::scenario(&at, format!("duplicate HA rule '{id}'")));
            }
            let mut rule = rule.clone();
            rule.order = Some(rule.order.unwrap_or(i as u64 + 1));
            rule.errors = None;
            rule.digest = None;
            self.ha.rules.push(rule);
        }
        for e in &ha.status {
            match e.kind.as_deref() {
                Some("lrm") => {
                    let maintenance = e.mode.as_deref() == Some("maintenance")
                        || e.status
                            .as_deref()
                            .is_some_and(|s| s.contains("maintenance mode"));
                    if let Some(node) = e.node.as_ref().and_then(|n| self.nodes.get_mut(n)) {
                        node.ha_maintenance |= maintenance;
                    }
                }
                Some("master") => {
                    if let Some(n) = e.node.clone().filter(|n| self.nodes.contains_key(n)) {
                        self.ha.master = Some(n);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn start_minus(now: f64, secs: u64) -> f64 {
    now - secs as f64
}

fn next_id_bound(options: &serde_json::Map<String, Value>, key: &str) -> Option<u32> {
    match options.get("next-id")? {
        Value::Object(o) => o.get(key).and_then(|v| match v {
            Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
            Value::String(s) => s.parse().ok(),
            _ => None,
        }),
        Value::String(s) => s
            .split(',')
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.parse().ok()),
        _ => None,
    }
}

fn tag_style(options: &serde_json::Map<String, Value>) -> TagStyle {
    match options.get("tag-style") {
        Some(Value::String(s)) => TagStyle::parse(s),
        Some(Value::Object(o)) => TagStyle {
            case_sensitive: o
                .get("case-sensitive")
                .is_some_and(|v| v == 1 || v == true || v == "1"),
            keep_order: o.get("ordering").is_some_and(|v| v == "config"),
        },
        _ => TagStyle::default(),
    }
}

/// A resource entry's name: its own field (`node`, `storage`) if given, else the part of its `id`
/// that `from_id` picks (`node/pve1`, `storage/pve1/local`).
fn own_or_id_name(
    own: &Option<String>,
    id: Option<&str>,
    from_id: fn(&str) -> Option<&str>,
) -> Option<String> {
    own.clone()
        .or_else(|| id.and_then(from_id).map(str::to_string))
}
