//! Builders for snapshots and clusters in Proxmox units, for tests, benchmarks and demo scenarios.
//!
//! They read as sentences: `ClusterBuilder::new().node(node("pve1").memory(64 * GIB))
//! .guest(vm(101, "pve1").tagged("flxp.anti-affinity.web")).build()`. Everything produced is an
//! ordinary Contract 1 snapshot, so what a builder makes is what a user could feed in.

use crate::cluster::{Cluster, Overrides};
use crate::snapshot::{
    HaResource, HaRule, HaStatusEntry, NodeExtra, Resource, RrdRow, Snapshot, Task, Volume,
};

pub use crate::units::{GIB, MIB};

/// A node to add: online, 16 CPUs, 64 GiB, by default idle (usage = its guests).
#[derive(Debug, Clone)]
pub struct NodeSpec {
    name: String,
    status: String,
    maxcpu: f64,
    cpu: Option<f64>,
    maxmem: u64,
    mem: Option<u64>,
    notes: Option<String>,
    hastate: Option<String>,
    rrd: Vec<(String, f64)>,
}

/// Starts a node spec.
pub fn node(name: &str) -> NodeSpec {
    NodeSpec {
        name: name.to_owned(),
        status: "online".into(),
        maxcpu: 16.0,
        cpu: None,
        maxmem: 64 * GIB,
        mem: None,
        notes: None,
        hastate: None,
        rrd: Vec::new(),
    }
}

impl NodeSpec {
    /// Sets the logical CPU count.
    pub fn cpus(mut self, n: f64) -> Self {
        self.maxcpu = n;
        self
    }
    /// Sets total memory in bytes.
    pub fn memory(mut self, bytes: u64) -> Self {
        self.maxmem = bytes;
        self
    }
    /// Sets reported used memory in bytes (otherwise the sum of its running guests).
    pub fn used(mut self, bytes: u64) -> Self {
        self.mem = Some(bytes);
        self
    }
    /// Sets the reported CPU fraction (otherwise derived from its guests).
    pub fn load(mut self, fraction: f64) -> Self {
        self.cpu = Some(fraction);
        self
    }
    /// Sets the node's notes.
    pub fn notes(mut self, text: &str) -> Self {
        self.notes = Some(text.to_owned());
        self
    }
    /// Marks it offline.
    pub fn offline(mut self) -> Self {
        self.status = "offline".into();
        self
    }
    /// Sets the HA node state (`maintenance`, ...).
    pub fn hastate(mut self, s: &str) -> Self {
        self.hastate = Some(s.to_owned());
        self
    }
    /// Adds an RRD data source value (`pressurememoryfull`, ...).
    pub fn rrd(mut self, source: &str, value: f64) -> Self {
        self.rrd.push((source.to_owned(), value));
        self
    }
}

/// A guest to add: running, 2 vCPUs at 10 %, 4 GiB configured, 2 GiB used, by default.
#[derive(Debug, Clone)]
pub struct GuestSpec {
    r: Resource,
    /// Volumes on local storages of its node: (storage id, bytes).
    disks: Vec<(String, u64)>,
}

fn guest(kind: &str, vmid: u32, node: &str) -> GuestSpec {
    GuestSpec {
        r: Resource {
            id: Some(format!("{kind}/{vmid}")),
            kind: Some(kind.to_owned()),
            node: Some(node.to_owned()),
            vmid: Some(vmid),
            name: Some(format!("{kind}{vmid}")),
            status: Some("running".into()),
            maxcpu: Some(2.0),
            cpu: Some(0.1),
            maxmem: Some(4 * GIB),
            mem: Some(2 * GIB),
            maxdisk: Some(32 * GIB),
            template: Some(false),
            ..Resource::default()
        },
        disks: Vec::new(),
    }
}

/// A running migration task of `vmid` from `source` (started at 9,900), naming `target` when
/// given, as `flxp snapshot` records it.
pub fn migration_task(vmid: u32, source: &str, target: Option<&str>) -> Task {
    Task {
        upid: Some(format!(
            "UPID:{source}:00001234:00005678:00002700:qmigrate:{vmid}:root@pam:"
        )),
        node: Some(source.into()),
        kind: Some("qmigrate".into()),
        id: Some(vmid.to_string()),
        starttime: Some(9_900),
        target: target.map(str::to_owned),
        ..Task::default()
    }
}

/// A finished, successful migration of `vmid` off `source` that ended at `end` (it ran a minute),
/// as `/cluster/tasks` lists it: the task ran on the node the guest left.
pub fn finished_migration_task(vmid: u32, source: &str, end: i64) -> Task {
    Task {
        upid: Some(format!(
            "UPID:{source}:00001234:00005678:{:08X}:qmigrate:{vmid}:root@pam:",
            end - 60
        )),
        node: Some(source.into()),
        kind: Some("qmigrate".into()),
        id: Some(vmid.to_string()),
        starttime: Some(end - 60),
        endtime: Some(end),
        status: Some("OK".into()),
        ..Task::default()
    }
}

/// Starts a qemu guest spec.
pub fn vm(vmid: u32, node: &str) -> GuestSpec {
    guest("qemu", vmid, node)
}

/// Starts an lxc guest spec.
pub fn ct(vmid: u32, node: &str) -> GuestSpec {
    guest("lxc", vmid, node)
}

impl GuestSpec {
    /// Sets its tags (`;`-separated, as Proxmox lists them).
    pub fn tagged(mut self, tags: &str) -> Self {
        self.r.tags = Some(tags.to_owned());
        self
    }
    /// Sets used and configured memory in bytes.
    pub fn mem(mut self, used: u64, max: u64) -> Self {
        self.r.mem = Some(used);
        self.r.maxmem = Some(max);
        self
    }
    /// Sets vCPUs and the CPU fraction in use.
    pub fn cores(mut self, n: f64, fraction: f64) -> Self {
        self.r.maxcpu = Some(n);
        self.r.cpu = Some(fraction);
        self
    }
    /// Sets its name.
    pub fn named(mut self, name: &str) -> Self {
        self.r.name = Some(name.to_owned());
        self
    }
    /// Marks it stopped.
    pub fn stopped(mut self) -> Self {
        self.r.status = Some("stopped".into());
        self.r.cpu = Some(0.0);
        self.r.mem = Some(0);
        self
    }
    /// Marks it a (stopped) template.
    pub fn template(mut self) -> Self {
        self = self.stopped();
        self.r.template = Some(true);
        self
    }
    /// Sets a config lock.
    pub fn locked(mut self, lock: &str) -> Self {
        self.r.lock = Some(lock.to_owned());
        self
    }
    /// Sets its HA state (makes it HA-managed).
    pub fn hastate(mut self, s: &str) -> Self {
        self.r.hastate = Some(s.to_owned());
        self
    }
    /// Sets its boot disk size in bytes.
    pub fn disk(mut self, bytes: u64) -> Self {
        self.r.maxdisk = Some(bytes);
        self
    }
    /// Adds a volume of `bytes` on storage `storage` of its node (local when the node's storage
    /// entry says so: see [`ClusterBuilder::storage`]).
    pub fn local_disk(mut self, storage: &str, bytes: u64) -> Self {
        self.disks.push((storage.to_owned(), bytes));
        self
    }
}

/// Builds a snapshot (and a cluster) from node and guest specs.
#[derive(Debug, Clone, Default)]
pub struct ClusterBuilder {
    nodes: Vec<NodeSpec>,
    guests: Vec<GuestSpec>,
    ha_rules: Vec<HaRule>,
    ha_resources: Vec<HaResource>,
    ha_status: Vec<HaStatusEntry>,
    tasks: Vec<Task>,
    options: serde_json::Map<String, serde_json::Value>,
    time: Option<i64>,
    storages: Vec<Resource>,
}

impl ClusterBuilder {
    /// An empty cluster.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds default nodes by name.
    pub fn nodes(mut self, names: &[&str]) -> Self {
        self.nodes.extend(names.iter().map(|n| node(n)));
        self
    }
    /// Adds a node.
    pub fn node(mut self, spec: NodeSpec) -> Self {
        self.nodes.push(spec);
        self
    }
    /// Adds a guest.
    pub fn guest(mut self, spec: GuestSpec) -> Self {
        self.guests.push(spec);
        self
    }
    /// Adds an HA node-affinity rule (`nodes` as Proxmox writes them: `pve1:2,pve2`).
    pub fn ha_node_affinity(
        mut self,
        id: &str,
        resources: &str,
        nodes: &str,
        strict: bool,
    ) -> Self {
        self.ha_rules.push(HaRule {
            rule: Some(id.into()),
            kind: Some("node-affinity".into()),
            resources: Some(resources.into()),
            nodes: Some(nodes.into()),
            strict: Some(strict),
            ..HaRule::default()
        });
        self.ha_managed(resources)
    }
    /// Adds an HA resource-affinity rule (`positive` or `negative`).
    pub fn ha_resource_affinity(mut self, id: &str, resources: &str, affinity: &str) -> Self {
        self.ha_rules.push(HaRule {
            rule: Some(id.into()),
            kind: Some("resource-affinity".into()),
            resources: Some(resources.into()),
            affinity: Some(affinity.into()),
            ..HaRule::default()
        });
        self.ha_managed(resources)
    }
    /// Turns HA failback off for a resource (`vm:100`); it is on by default, as in Proxmox.
    pub fn ha_no_failback(mut self, sid: &str) -> Self {
        for r in &mut self.ha_resources {
            if r.sid.as_deref() == Some(sid) {
                r.failback = Some(false);
            }
        }
        self
    }
    fn ha_managed(mut self, resources: &str) -> Self {
        for sid in resources.split(',') {
            if !self
                .ha_resources
                .iter()
                .any(|r| r.sid.as_deref() == Some(sid))
            {
                self.ha_resources.push(HaResource {
                    sid: Some(sid.to_owned()),
                    state: Some("started".into()),
                    ..HaResource::default()
                });
            }
        }
        self
    }
    /// Makes a resource (`vm:100`) HA-managed with a service entry in HA's status: `state` as the
    /// status shows it (`starting`, `started`, ...) and `crm_state` as the manager holds it.
    pub fn ha_service(mut self, sid: &str, node: &str, state: &str, crm_state: &str) -> Self {
        self.ha_status.push(HaStatusEntry {
            id: Some(format!("service:{sid}")),
            kind: Some("service".into()),
            node: Some(node.into()),
            sid: Some(sid.into()),
            state: Some(state.into()),
            crm_state: Some(crm_state.into()),
            ..HaStatusEntry::default()
        });
        self.ha_managed(sid)
    }
    /// Adds a task.
    pub fn task(mut self, task: Task) -> Self {
        self.tasks.push(task);
        self
    }
    /// Adds a running migration task of `vmid` from `source` to `target` ([`migration_task`]).
    pub fn migrating(self, vmid: u32, source: &str, target: &str) -> Self {
        self.task(migration_task(vmid, source, Some(target)))
    }
    /// Sets a cluster option (`crs`, ...).
    pub fn option(mut self, key: &str, value: serde_json::Value) -> Self {
        self.options.insert(key.to_owned(), value);
        self
    }
    /// Adds a storage entry on a node: `total` bytes of which `used` are taken; `shared` for a
    /// storage every node sees.
    pub fn storage(mut self, node: &str, id: &str, shared: bool, total: u64, used: u64) -> Self {
        self.storages.push(Resource {
            id: Some(format!("storage/{node}/{id}")),
            kind: Some("storage".into()),
            node: Some(node.to_owned()),
            storage: Some(id.to_owned()),
            status: Some("available".into()),
            shared: Some(shared),
            maxdisk: Some(total),
            disk: Some(used),
            content: Some("images,rootdir".into()),
            plugintype: Some(if shared { "rbd" } else { "lvmthin" }.into()),
            ..Resource::default()
        });
        self
    }
    /// Sets the snapshot time.
    pub fn time(mut self, t: i64) -> Self {
        self.time = Some(t);
        self
    }

    /// The Contract 1 snapshot.
    pub fn snapshot(&self) -> Snapshot {
        let mut snap = Snapshot {
            time: self.time,
            tasks: self.tasks.clone(),
            options: self.options.clone(),
            ..Snapshot::default()
        };
        snap.ha.rules = self.ha_rules.clone();
        snap.ha.resources = self.ha_resources.clone();
        snap.ha.status = self.ha_status.clone();
        for n in &self.nodes {
            let online = n.status == "online";
            snap.resources.push(Resource {
                id: Some(format!("node/{}", n.name)),
                kind: Some("node".into()),
                node: Some(n.name.clone()),
                status: Some(n.status.clone()),
                maxcpu: online.then_some(n.maxcpu),
                cpu: if online { n.cpu } else { None },
                maxmem: online.then_some(n.maxmem),
                mem: if online { n.mem } else { None },
                hastate: n.hastate.clone(),
                ..Resource::default()
            });
            if n.notes.is_some() || !n.rrd.is_empty() {
                snap.nodes.insert(
                    n.name.clone(),
                    NodeExtra {
                        notes: n.notes.clone(),
                        rrddata: (!n.rrd.is_empty())
                            .then(|| RrdRow(n.rrd.iter().cloned().collect())),
                        ..NodeExtra::default()
                    },
                );
            }
        }
        snap.resources
            .extend(self.guests.iter().map(|g| g.r.clone()));
        snap.resources.extend(self.storages.iter().cloned());
        for g in self.guests.iter().filter(|g| !g.disks.is_empty()) {
            let (Some(node), Some(vmid)) = (g.r.node.clone(), g.r.vmid) else {
                continue;
            };
            let content = if g.r.kind.as_deref() == Some("lxc") {
                "rootdir"
            } else {
                "images"
            };
            let extra = snap.nodes.entry(node).or_default();
            for (i, (storage, bytes)) in g.disks.iter().enumerate() {
                extra.volumes.push(Volume {
                    volid: Some(format!("{storage}:vm-{vmid}-disk-{i}")),
                    vmid: Some(vmid),
                    size: Some(*bytes),
                    content: Some(content.into()),
                    format: Some("raw".into()),
                });
            }
        }
        snap
    }

    /// The typed cluster.
    ///
    /// # Panics
    /// If the specs make an invalid snapshot (a duplicate vmid): a bug in the test, not input.
    pub fn build(&self) -> Cluster {
        Cluster::from_snapshot(&self.snapshot(), &Overrides::default())
            .unwrap_or_else(|e| panic!("builder made an invalid cluster: {e}"))
    }
}

/// A small linear congruential generator: the same seed gives the same cluster on every machine,
/// with no random-number crate in the library.
#[derive(Debug, Clone)]
pub struct Lcg(pub u64);

impl Lcg {
    /// The next number below `m` (0 when `m` is 0).
    pub fn next(&mut self, m: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % m.max(1)
    }
}

/// Nodes of `(name, GiB, guests)`, each guest running with its memory (GiB) as used and
/// configured; vmids count up from 101 in the order given.
pub fn sized(nodes: &[(&str, u64, &[u64])]) -> Cluster {
    let mut b = ClusterBuilder::new();
    let mut vmid = 100;
    for (name, gib, guests) in nodes {
        b = b.node(node(name).memory(gib * GIB));
        for &g in *guests {
            vmid += 1;
            b = b.guest(vm(vmid, name).mem(g * GIB, g * GIB));
        }
    }
    b.build()
}
