//! Read views of the world in Proxmox's wire shapes: `/cluster/resources` entries, the per-node
//! guest lists, and the world as a Contract 1 snapshot.

use flxp_core::Snapshot;
use flxp_core::snapshot::raw::{Ha, HaStatusEntry, NodeExtra, Resource, Volume};
use flxp_core::units::MIB;
use flxp_pve::types::GuestListEntry;

use super::{Guest, GuestKind, Node, NodeLoad, NodeStats, World};

impl World {
    /// The `/cluster/resources` entry of a node (only id, node, status, level while offline).
    pub fn node_resource(&self, n: &Node) -> Resource {
        self.node_resource_with(n, &self.node_stats(&n.name))
    }

    /// When statistics lag (`stats_interval`), the time of the last broadcast.
    fn stats_time(&self) -> Option<f64> {
        let i = self.settings.stats_interval;
        (i > 0.0).then(|| (self.now / i).floor() * i)
    }

    /// [`World::node_resource`] with the node's statistics already computed.
    pub fn node_resource_with(&self, n: &Node, s: &NodeStats) -> Resource {
        let mut r = Resource {
            id: Some(format!("node/{}", n.name)),
            kind: Some("node".into()),
            node: Some(n.name.clone()),
            status: Some(if n.online { "online" } else { "offline" }.into()),
            level: Some(n.level.clone()),
            ..Resource::default()
        };
        if self.ha_in_use() {
            r.hastate = Some(self.ha_node_state(&n.name).into());
        }
        if n.online {
            r.cpu = Some(s.cpu);
            r.maxcpu = Some(f64::from(n.maxcpu));
            r.mem = Some(s.mem);
            r.maxmem = Some(n.maxmem);
            r.disk = Some(n.disk);
            r.maxdisk = Some(n.maxdisk);
            r.uptime = Some((self.now - n.booted_at).max(0.0) as u64);
            r.cgroup_mode = Some(2);
            // Lagging statistics: the figures of the last broadcast (RRD order: cpu, memused).
            if let Some(v) = self
                .stats_time()
                .and_then(|t| self.history.node(&n.name)?.value_at(t))
            {
                if let (Some(cpu), Some(mem)) = (v.get(2), v.get(5)) {
                    if cpu.is_finite() && mem.is_finite() {
                        r.cpu = Some(*cpu);
                        r.mem = Some(*mem as u64);
                    }
                }
            }
        }
        r
    }

    /// The `/cluster/resources` entry of a guest.
    pub fn guest_resource(&self, g: &Guest) -> Resource {
        self.guest_resource_in(g, self.node_stats(&g.node).load())
    }

    /// [`World::guest_resource`] for a guest whose node is loaded as `node` says.
    pub fn guest_resource_in(&self, g: &Guest, node: NodeLoad) -> Resource {
        let node_online = self.nodes.get(&g.node).is_some_and(|n| n.online);
        let s = self.guest_stats_in(g, node);
        let status = if !node_online {
            "unknown"
        } else if g.running {
            "running"
        } else {
            "stopped"
        };
        let mut r = Resource {
            id: Some(g.resource_id()),
            kind: Some(g.kind.as_str().into()),
            node: Some(g.node.clone()),
            vmid: Some(g.vmid),
            name: g.name().map(str::to_string),
            status: Some(status.into()),
            template: Some(g.is_template()),
            tags: g.tags().map(str::to_string),
            lock: g.lock().map(str::to_string),
            pool: g.pool.clone(),
            maxcpu: Some(s.maxcpu),
            maxmem: Some(s.maxmem),
            maxdisk: Some(s.maxdisk),
            ..Resource::default()
        };
        if node_online {
            r.cpu = Some(s.cpu);
            r.mem = Some(s.mem);
            r.disk = Some(s.disk);
            r.diskread = Some(s.diskread);
            r.diskwrite = Some(s.diskwrite);
            r.netin = Some(s.netin);
            r.netout = Some(s.netout);
            r.uptime = Some(s.uptime);
            if g.kind == GuestKind::Qemu {
                r.memhost = Some(s.memhost);
            }
            // Lagging statistics (RRD order: cpu 1, mem 3, memhost 10).
            if let Some(v) = self
                .stats_time()
                .and_then(|t| self.history.guest(g.vmid)?.value_at(t))
            {
                if let (Some(cpu), Some(mem)) = (v.get(1), v.get(3)) {
                    if cpu.is_finite() && mem.is_finite() {
                        r.cpu = Some(*cpu);
                        r.mem = Some(*mem as u64);
                    }
                }
                if let Some(mh) = v.get(10).filter(|m| m.is_finite()) {
                    if g.kind == GuestKind::Qemu {
                        r.memhost = Some(*mh as u64);
                    }
                }
            }
        }
        let sid = g.sid();
        if self.is_ha_managed(&sid) {
            r.hastate = self.ha.services.get(&sid).map(|s| s.state.clone());
        }
        r
    }

    /// `/cluster/resources`, optionally filtered by `type` (`vm`, `node`, `storage`, `sdn`).
    pub fn resources(&self, filter: Option<&str>) -> Vec<Resource> {
        let mut out = Vec::new();
        let want = |t: &str| filter.is_none() || filter == Some(t);
        let table = self.node_stats_all();
        let cpu_of = |node: &str| table.get(node).map_or(NodeLoad::default(), |s| s.load());
        if want("vm") {
            out.extend(
                self.guests
                    .values()
                    .map(|g| self.guest_resource_in(g, cpu_of(&g.node))),
            );
        }
        if want("node") {
            for n in self.nodes.values() {
                if let Some(s) = table.get(&n.name) {
                    out.push(self.node_resource_with(n, s));
                }
            }
        }
        if want("storage") {
            let usage = self.storage_usage_all();
            for n in self.nodes.values() {
                for st in self.storages.values().filter(|s| s.available_on(&n.name)) {
                    let used_by_guests = usage
                        .get(&(st.id.as_str(), if st.shared { "" } else { n.name.as_str() }))
                        .copied()
                        .unwrap_or(0);
                    let (total, base) = st.size_on(&n.name);
                    let used = base.saturating_add(used_by_guests).min(total);
                    out.push(Resource {
                        id: Some(format!("storage/{}/{}", n.name, st.id)),
                        kind: Some("storage".into()),
                        node: Some(n.name.clone()),
                        storage: Some(st.id.clone()),
                        status: Some(if n.online { "available" } else { "unknown" }.into()),
                        plugintype: Some(st.kind.clone()),
                        shared: Some(st.shared),
                        content: Some(st.content.clone()),
                        maxdisk: Some(total),
                        disk: Some(used),
                        ..Resource::default()
                    });
                }
            }
        }
        if filter.is_none() {
            for id in self.pools.keys() {
                out.push(Resource {
                    id: Some(format!("/pool/{id}")),
                    kind: Some("pool".into()),
                    pool: Some(id.clone()),
                    ..Resource::default()
                });
            }
        }
        out
    }

    /// Bytes of guest volumes per (storage, node), node `""` for shared storages, in one pass.
    fn storage_usage_all(&self) -> std::collections::HashMap<(&str, &str), u64> {
        let mut out = std::collections::HashMap::new();
        for g in self.guests.values() {
            for (sid, size, linked) in g.volumes() {
                let Some((id, st)) = self.storages.get_key_value(sid) else {
                    continue;
                };
                if linked {
                    continue;
                }
                let node = if st.shared { "" } else { g.node.as_str() };
                let used: &mut u64 = out.entry((id.as_str(), node)).or_insert(0);
                *used = used.saturating_add(size);
            }
        }
        out
    }

    /// Size and use of a storage as `node` sees it, bytes.
    pub fn storage_usage(&self, storage: &str, node: &str) -> (u64, u64) {
        let Some(st) = self.storages.get(storage) else {
            return (0, 0);
        };
        let used: u64 = self
            .guests
            .values()
            .filter(|g| st.shared || g.node == node)
            .map(|g| g.bytes_on(storage))
            .fold(0u64, u64::saturating_add);
        let (total, base) = st.size_on(node);
        (total, base.saturating_add(used).min(total))
    }

    /// `GET /nodes/{node}/storage/{storage}/content`: the guest volumes `node` sees on a storage
    /// (a local storage: those of its guests; a shared one: all), by volid; `None` when the storage
    /// is unknown or not available on the node.
    pub fn storage_content(&self, storage: &str, node: &str) -> Option<Vec<Volume>> {
        let st = self
            .storages
            .get(storage)
            .filter(|s| s.available_on(node))?;
        let mut out: Vec<Volume> = self
            .guests
            .values()
            .filter(|g| st.shared || g.node == node)
            .flat_map(|g| {
                let content = match g.kind {
                    GuestKind::Qemu => "images",
                    GuestKind::Lxc => "rootdir",
                };
                g.disks()
                    .into_iter()
                    .filter(|d| d.storage.as_deref() == Some(storage) && d.is_volume())
                    .map(move |d| Volume {
                        volid: Some(d.volid),
                        vmid: Some(g.vmid),
                        size: Some(d.size),
                        content: Some(content.into()),
                        format: Some("raw".into()),
                    })
            })
            .collect();
        out.sort_by(|a, b| a.volid.cmp(&b.volid));
        Some(out)
    }

    /// The `snapshot` extras of a node's local storages: `avail` per storage and the volumes on
    /// those holding guest disks (what `flxp snapshot` collects).
    fn node_storage_extras(
        &self,
        usage: &super::StorageUse,
        node: &str,
    ) -> (std::collections::BTreeMap<String, u64>, Vec<Volume>) {
        let mut avail = std::collections::BTreeMap::new();
        let mut volumes = Vec::new();
        for st in self.storages.values().filter(|s| s.available_on(node)) {
            let (total, used) = usage.usage(self, &st.id, node);
            avail.insert(st.id.clone(), total.saturating_sub(used));
            if !st.shared && (st.has_content("images") || st.has_content("rootdir")) {
                volumes.extend(self.storage_content(&st.id, node).unwrap_or_default());
            }
        }
        (avail, volumes)
    }

    /// An entry of `GET /nodes/{node}/qemu` or `/lxc`.
    pub fn guest_list_entry(&self, g: &Guest) -> GuestListEntry {
        self.guest_list_entry_in(g, self.node_stats(&g.node).load())
    }

    /// [`World::guest_list_entry`] for a guest whose node is loaded as `node` says.
    pub fn guest_list_entry_in(&self, g: &Guest, node: NodeLoad) -> GuestListEntry {
        let s = self.guest_stats_in(g, node);
        let p = s.pressure;
        let qemu = g.kind == GuestKind::Qemu;
        GuestListEntry {
            vmid: g.vmid,
            status: Some(if g.running { "running" } else { "stopped" }.into()),
            name: g.name().map(str::to_string),
            kind: (!qemu).then(|| "lxc".into()),
            cpu: Some(s.cpu),
            cpus: Some(s.maxcpu),
            mem: Some(s.mem),
            maxmem: Some(s.maxmem),
            memhost: qemu.then_some(s.memhost),
            maxswap: (!qemu).then(|| {
                g.config
                    .get("swap")
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(512)
                    .saturating_mul(MIB)
            }),
            disk: Some(s.disk),
            maxdisk: Some(s.maxdisk),
            diskread: Some(s.diskread),
            diskwrite: Some(s.diskwrite),
            netin: Some(s.netin),
            netout: Some(s.netout),
            uptime: Some(s.uptime),
            pid: g.running.then(|| 10_000 + u64::from(g.vmid)),
            qmpstatus: (qemu && g.running)
                .then(|| "running".into())
                .or_else(|| qemu.then(|| "stopped".into())),
            lock: g.lock().map(str::to_string),
            tags: g.tags().map(str::to_string),
            template: g.is_template().then_some(true),
            pressurecpusome: g.running.then_some(p.cpu_some),
            pressurecpufull: (g.running && qemu).then_some(p.cpu_full),
            pressureiosome: g.running.then_some(p.io_some),
            pressureiofull: g.running.then_some(p.io_full),
            pressurememorysome: g.running.then_some(p.memory_some),
            pressurememoryfull: g.running.then_some(p.memory_full),
        }
    }

    /// The world as a Contract 1 snapshot (what `flxp snapshot` would write of it).
    pub fn snapshot(&self) -> Snapshot {
        let mut resources = self.resources(None);
        resources.retain(|r| r.kind.as_deref() != Some("pool"));
        let usage = super::StorageUse::of(self);
        let nodes = self
            .nodes
            .values()
            .map(|n| {
                let rrddata = self.history.node(&n.name).and_then(|s| {
                    s.rows(
                        &super::rrd::NODE_FIELDS,
                        self.now,
                        super::Timeframe::Hour,
                        false,
                    )
                    .pop()
                });
                let (storage_avail, volumes) = self.node_storage_extras(&usage, &n.name);
                (
                    n.name.clone(),
                    NodeExtra {
                        notes: (!n.notes.is_empty()).then(|| n.notes.clone()),
                        rrddata,
                        storage_avail,
                        volumes,
                    },
                )
            })
            .collect();
        let ha = Ha {
            rules: self
                .ha_rules_view(None, None)
                .into_iter()
                .filter_map(|v| serde_json::from_value(v).ok())
                .collect(),
            resources: self
                .ha
                .resources
                .keys()
                .filter_map(|sid| self.ha_resource(sid))
                .collect(),
            status: self
                .ha_status_current()
                .into_iter()
                .filter_map(|v| serde_json::from_value::<HaStatusEntry>(v).ok())
                .collect(),
        };
        Snapshot {
            resources,
            nodes,
            ha,
            options: self.options.clone(),
            tasks: self.cluster_tasks(),
            time: Some(self.now.floor() as i64),
        }
    }

    /// `GET /cluster/tasks`: running tasks and the 100 most recent finished ones, newest first.
    pub fn cluster_tasks(&self) -> Vec<flxp_core::snapshot::raw::Task> {
        let mut running: Vec<_> = self.tasks.all().iter().filter(|t| t.is_running()).collect();
        let mut done: Vec<_> = self
            .tasks
            .all()
            .iter()
            .filter(|t| !t.is_running())
            .collect();
        running.sort_by_key(|t| std::cmp::Reverse(t.starttime));
        done.sort_by(|a, b| {
            b.ended
                .unwrap_or(0.0)
                .total_cmp(&a.ended.unwrap_or(0.0))
                .then(b.starttime.cmp(&a.starttime))
        });
        done.truncate(100);
        running
            .into_iter()
            .chain(done)
            .map(|t| t.list_entry())
            .collect()
    }
}
