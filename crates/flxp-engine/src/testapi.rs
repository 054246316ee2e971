//! A scripted Proxmox API for the executor's unit tests: a small world that migrations change.
//!
//! `flxp_pve::fake::FakeApi` answers reads from a fixed snapshot and refuses writes; the executor
//! needs guests that move when their task ends, locks while they move, and HA that moves a guest
//! some reads after `hamigrate`. This fake keeps a snapshot behind a lock, records every call as
//! `METHOD /path` (writes with their form body), and plays per-guest scripts: how many polls a
//! migration task stays running, whether it fails and with what text, the task log lines. It is
//! a `Transport` routing on `METHOD /path`: calls it does not route answer 501, so a test fails
//! fast on an unexpected call.
// Tests may panic on malformed fixtures: that is the failure report.
#![allow(clippy::unwrap_used)]
// Route handlers answer with `flxp_pve::Error`, as the HTTP transport does; its size is its own.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

use async_trait::async_trait;
use flxp_core::Snapshot;
use flxp_core::snapshot::Task;
use flxp_core::units::GIB;
use flxp_pve::types::form::to_form;
use flxp_pve::types::migrate::LocalDisk;
use flxp_pve::types::*;
use flxp_pve::{
    Captures, Data, Request, Result, RoundReads, Router, Transport, api_error, not_routed, reply,
};

/// How one guest's migration goes.
#[derive(Debug, Clone)]
pub struct Script {
    /// Status polls that answer `running` before the task stops.
    pub running_polls: u32,
    /// `Some(text)`: the task stops with this exit status and the guest stays.
    pub fail: Option<String>,
    /// Precondition answer; `None`: every other online node allowed, no local disks.
    pub precondition: Option<QemuMigratePrecondition>,
    /// For HA guests: `/cluster/resources` reads before HA has moved the guest.
    pub ha_reads: u32,
    /// For HA guests: HA's own migration fails with this text.
    pub ha_fail: Option<String>,
}

impl Default for Script {
    fn default() -> Self {
        Self {
            running_polls: 2,
            fail: None,
            precondition: None,
            ha_reads: 2,
            ha_fail: None,
        }
    }
}

/// A migration task in flight.
#[derive(Debug, Clone)]
struct Running {
    vmid: u32,
    target: String,
    polls_left: u32,
    fail: Option<String>,
    log: Vec<String>,
    ha: bool,
}

#[derive(Debug, Default)]
struct World {
    snapshot: Snapshot,
    calls: Vec<String>,
    scripts: BTreeMap<u32, Script>,
    tasks: BTreeMap<String, Running>,
    /// HA moves queued: vmid → (target, reads left).
    ha_moves: BTreeMap<u32, (String, u32)>,
    next_pid: u32,
    /// Hooks run on the n-th `GET /cluster/resources` (1-based): a world that changes under a plan.
    on_read: BTreeMap<usize, Vec<Change>>,
    resource_reads: usize,
    unreadable: bool,
    /// `GET /nodes/{node}/storage` answers; nodes absent answer 501.
    storages: BTreeMap<String, Vec<StorageEntry>>,
    /// When each guest landed: the number of calls made by then.
    landed: BTreeMap<u32, usize>,
}

/// A change the world goes through on its own.
#[derive(Debug, Clone)]
pub enum Change {
    /// A guest's used memory changes (bytes); its node's memory follows.
    GuestMem(u32, u64),
    /// A guest gets a config lock.
    Lock(u32, String),
    /// From now on `GET /cluster/resources` fails (the API node went away).
    Unreadable,
}

/// The scripted API.
#[derive(Debug, Default)]
pub struct ScriptedApi {
    world: Mutex<World>,
}

const TIME: i64 = 1_764_400_000;

impl ScriptedApi {
    /// A world from a snapshot (`resources` only are needed).
    pub fn new(snapshot: Snapshot) -> Self {
        Self {
            world: Mutex::new(World {
                snapshot,
                next_pid: 0x1000,
                ..World::default()
            }),
        }
    }

    /// A world from a JSON resources array.
    pub fn from_json(json: &str) -> Self {
        Self::new(Snapshot::from_json(json).unwrap())
    }

    /// How many calls were made when a guest landed, if it did.
    pub fn landed_at(&self, vmid: u32) -> Option<usize> {
        self.lock().landed.get(&vmid).copied()
    }

    /// Scripts one guest's migration.
    pub fn script(self, vmid: u32, script: Script) -> Self {
        self.lock().scripts.insert(vmid, script);
        self
    }

    /// A storage on a node with `avail` bytes free, for `GET /nodes/{node}/storage`.
    pub fn storage(self, node: &str, storage: &str, avail: u64) -> Self {
        self.lock()
            .storages
            .entry(node.to_owned())
            .or_default()
            .push(StorageEntry {
                storage: storage.to_owned(),
                avail: Some(avail),
                ..StorageEntry::default()
            });
        self
    }

    /// Applies changes on the n-th read of `/cluster/resources`.
    pub fn on_read(self, n: usize, changes: Vec<Change>) -> Self {
        self.lock().on_read.insert(n, changes);
        self
    }

    /// Adds a task to `/cluster/tasks`.
    pub fn task(self, task: Task) -> Self {
        self.lock().snapshot.tasks.push(task);
        self
    }

    fn lock(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }

    /// The calls that are not part of reading the cluster (`collect_snapshot`).
    pub fn actions(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter(|c| !is_collect_call(c))
            .collect()
    }

    /// Where a guest is now.
    pub fn node_of(&self, vmid: u32) -> String {
        self.lock()
            .snapshot
            .resources
            .iter()
            .find(|r| r.vmid == Some(vmid))
            .and_then(|r| r.node.clone())
            .unwrap()
    }

    /// The world as a snapshot.
    pub fn snapshot(&self) -> Snapshot {
        self.lock().snapshot.clone()
    }

    fn record(&self, call: String) {
        self.lock().calls.push(call);
    }
}

/// Whether a call is one `collect_snapshot` makes.
pub fn is_collect_call(c: &str) -> bool {
    c == "GET /cluster/resources"
        || c.starts_with("GET /cluster/ha/")
        || c == "GET /cluster/options"
        || c == "GET /cluster/tasks"
        || (c.starts_with("GET /nodes/")
            && (c.ends_with("/config")
                || c.ends_with("/rrddata")
                || c.ends_with("/storage")
                || c.ends_with("/content")))
            && !c.contains("/qemu/")
            && !c.contains("/lxc/")
}

/// Whether a guest's status is `running`.
fn is_running(g: &Resource) -> bool {
    g.status.as_deref() == Some("running")
}

fn die(method: &str, path: &str, message: &str) -> flxp_pve::Error {
    let body = serde_json::json!({"data": null, "message": format!("{message}\n")}).to_string();
    api_error(method, path, 500, message, body.as_bytes())
}

impl World {
    /// The nodes other than `node`: where a guest may go when no script says otherwise.
    fn other_nodes(&self, node: &str) -> Vec<String> {
        self.snapshot
            .resources
            .iter()
            .filter(|r| r.kind.as_deref() == Some("node") && r.node.as_deref() != Some(node))
            .filter_map(|r| r.node.clone())
            .collect()
    }

    fn guest_mut(&mut self, vmid: u32) -> Option<&mut Resource> {
        self.snapshot
            .resources
            .iter_mut()
            .find(|r| r.vmid == Some(vmid) && matches!(r.kind.as_deref(), Some("qemu" | "lxc")))
    }

    fn guest(&self, vmid: u32) -> Option<&Resource> {
        self.snapshot
            .resources
            .iter()
            .find(|r| r.vmid == Some(vmid) && matches!(r.kind.as_deref(), Some("qemu" | "lxc")))
    }

    fn node_mem(&mut self, node: &str, delta: i128) {
        if let Some(n) = self
            .snapshot
            .resources
            .iter_mut()
            .find(|r| r.kind.as_deref() == Some("node") && r.node.as_deref() == Some(node))
        {
            let mem = i128::from(n.mem.unwrap_or(0)) + delta;
            n.mem = Some(u64::try_from(mem.max(0)).unwrap_or(0));
        }
    }

    /// Moves a guest and its memory to a node.
    fn land(&mut self, vmid: u32, target: &str) {
        let at = self.calls.len();
        self.landed.insert(vmid, at);
        let Some(g) = self.guest_mut(vmid) else {
            return;
        };
        let from = g.node.clone().unwrap_or_default();
        let running = is_running(g);
        let mem = g.mem.unwrap_or(0);
        g.node = Some(target.to_owned());
        g.lock = None;
        if running {
            self.node_mem(&from, -i128::from(mem));
            self.node_mem(target, i128::from(mem));
        }
    }

    fn apply(&mut self, change: Change) {
        match change {
            Change::GuestMem(vmid, mem) => {
                let Some(g) = self.guest_mut(vmid) else {
                    return;
                };
                let old = g.mem.unwrap_or(0);
                g.mem = Some(mem);
                let node = g.node.clone().unwrap_or_default();
                self.node_mem(&node, i128::from(mem) - i128::from(old));
            }
            Change::Lock(vmid, lock) => {
                if let Some(g) = self.guest_mut(vmid) {
                    g.lock = Some(lock);
                }
            }
            Change::Unreadable => self.unreadable = true,
        }
    }

    fn start_task(&mut self, node: &str, kind: &str, vmid: u32, running: Running) -> Upid {
        self.next_pid += 1;
        let upid = Upid::new(
            node,
            self.next_pid,
            0xABCD,
            TIME,
            kind,
            &vmid.to_string(),
            "root@pam!flxp",
        )
        .unwrap();
        self.snapshot.tasks.push(Task {
            upid: Some(upid.to_string()),
            node: Some(node.to_owned()),
            kind: Some(kind.to_owned()),
            id: Some(vmid.to_string()),
            starttime: Some(TIME),
            ..Task::default()
        });
        self.tasks.insert(upid.to_string(), running);
        upid
    }

    /// One poll of a played task: `None` while it runs, its exit status once it stopped (the
    /// guest lands or stays).
    fn advance(&mut self, upid: &str) -> Option<String> {
        let t = self.tasks.get_mut(upid)?;
        if t.polls_left > 0 {
            t.polls_left -= 1;
            return None;
        }
        let t = t.clone();
        let exit = t.fail.clone().unwrap_or_else(|| "OK".into());
        if t.fail.is_none() && !t.ha {
            self.land(t.vmid, &t.target);
        } else if let Some(g) = self.guest_mut(t.vmid) {
            if g.lock.as_deref() == Some("migrate") {
                g.lock = None;
            }
        }
        self.end_task(upid, &exit);
        Some(exit)
    }

    fn end_task(&mut self, upid: &str, status: &str) {
        if let Some(t) = self
            .snapshot
            .tasks
            .iter_mut()
            .find(|t| t.upid.as_deref() == Some(upid))
        {
            t.endtime = Some(TIME + 10);
            t.status = Some(status.to_owned());
        }
    }

    fn migrate(&mut self, node: &str, vmid: u32, target: &str, kind: &str) -> Upid {
        let script = self.scripts.get(&vmid).cloned().unwrap_or_default();
        let ha = self.guest(vmid).is_some_and(|g| g.hastate.is_some());
        let mem = self.guest(vmid).and_then(|g| g.maxmem).unwrap_or(0) as f64 / GIB as f64;
        if ha {
            self.ha_moves
                .insert(vmid, (target.to_owned(), script.ha_reads));
            return self.start_task(
                node,
                "hamigrate",
                vmid,
                Running {
                    vmid,
                    target: target.to_owned(),
                    polls_left: 0,
                    fail: None,
                    log: vec![format!(
                        "Requesting HA migration for VM {vmid} to node {target}"
                    )],
                    ha: true,
                },
            );
        }
        if let Some(g) = self.guest_mut(vmid) {
            g.lock = Some("migrate".into());
        }
        let mut log = vec![format!(
            "starting migration of VM {vmid} to node '{target}'"
        )];
        for step in 1..=4 {
            let f = f64::from(step) / 5.0;
            log.push(format!(
                "migration active, transferred {:.1} GiB of {mem:.1} GiB VM-state, 1.0 GiB/s",
                mem * f
            ));
        }
        self.start_task(
            node,
            kind,
            vmid,
            Running {
                vmid,
                target: target.to_owned(),
                polls_left: script.running_polls,
                fail: script.fail,
                log,
                ha: false,
            },
        )
    }

    fn read_resources(&mut self) {
        self.resource_reads += 1;
        if let Some(changes) = self.on_read.remove(&self.resource_reads) {
            for c in changes {
                self.apply(c);
            }
        }
    }

    /// HA acts on queued moves: one read closer each time resources are read.
    fn ha_tick(&mut self) {
        let due: Vec<(u32, String)> = self
            .ha_moves
            .iter_mut()
            .filter_map(|(vmid, (target, left))| {
                if *left == 0 {
                    Some((*vmid, target.clone()))
                } else {
                    *left -= 1;
                    None
                }
            })
            .collect();
        for (vmid, target) in due {
            self.ha_moves.remove(&vmid);
            let script = self.scripts.get(&vmid).cloned().unwrap_or_default();
            let node = self
                .guest(vmid)
                .and_then(|g| g.node.clone())
                .unwrap_or_default();
            let upid = self.start_task(
                &node,
                "qmigrate",
                vmid,
                Running {
                    vmid,
                    target: target.clone(),
                    polls_left: 0,
                    fail: None,
                    log: Vec::new(),
                    ha: true,
                },
            );
            match script.ha_fail {
                Some(msg) => self.end_task(upid.as_str(), &msg),
                None => {
                    self.end_task(upid.as_str(), "OK");
                    self.land(vmid, &target);
                }
            }
        }
    }
}

#[async_trait]
impl Transport for ScriptedApi {
    async fn send(&self, request: Request) -> Result<Data> {
        static ROUTES: OnceLock<Router<ScriptedApi>> = OnceLock::new();
        let routes = ROUTES.get_or_init(|| {
            Router::new()
                .round_reads()
                .route(
                    flxp_pve::endpoint!(GET "/nodes/{node}/qemu/{vmid}/migrate"),
                    ScriptedApi::qemu_precondition,
                )
                .route(
                    flxp_pve::endpoint!(GET "/nodes/{node}/lxc/{vmid}/migrate"),
                    ScriptedApi::lxc_precondition,
                )
                .route(
                    flxp_pve::endpoint!(POST "/nodes/{node}/qemu/{vmid}/migrate"),
                    ScriptedApi::migrate_qemu,
                )
                .route(
                    flxp_pve::endpoint!(POST "/nodes/{node}/lxc/{vmid}/migrate"),
                    ScriptedApi::migrate_lxc,
                )
        });
        routes.handle(self, &request)
    }
}

/// The routed endpoints: each records its call as `METHOD /path` (writes with their form body).
impl ScriptedApi {
    /// Records the read `call` and answers with a part of the snapshot.
    fn read<T: serde::Serialize>(
        &self,
        call: &str,
        part: impl FnOnce(&Snapshot) -> &T,
    ) -> Result<Data> {
        let mut w = self.lock();
        w.calls.push(call.to_owned());
        reply(part(&w.snapshot))
    }

    /// Reads a migrate endpoint's node and vmid and records the call as `METHOD path` and
    /// `extra`: the node, the vmid, the path and the world, still locked.
    fn migrate_call<'c>(
        &self,
        method: &str,
        kind: &str,
        request: &Request,
        c: &'c Captures,
        extra: &str,
    ) -> Result<(&'c str, u32, String, MutexGuard<'_, World>)> {
        let (node, vmid) = (c.get("node"), c.u32("vmid", request)?);
        let path = format!("/nodes/{node}/{kind}/{vmid}/migrate");
        let mut w = self.lock();
        w.calls.push(format!("{method} {path}{extra}"));
        Ok((node, vmid, path, w))
    }

    fn qemu_precondition(&self, request: &Request, c: &Captures) -> Result<Data> {
        let (node, vmid, path, w) = self.migrate_call("GET", "qemu", request, c, "")?;
        let Some(g) = w.guest(vmid).filter(|g| g.node.as_deref() == Some(node)) else {
            return Err(die(
                "GET",
                &path,
                &format!(
                    "Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist"
                ),
            ));
        };
        if let Some(lock) = &g.lock {
            return Err(die("GET", &path, &format!("VM is locked ({lock})")));
        }
        if let Some(p) = w.scripts.get(&vmid).and_then(|s| s.precondition.clone()) {
            return reply(p);
        }
        reply(QemuMigratePrecondition {
            running: Some(is_running(g)),
            allowed_nodes: w.other_nodes(node),
            ..QemuMigratePrecondition::default()
        })
    }

    fn lxc_precondition(&self, request: &Request, c: &Captures) -> Result<Data> {
        let (node, vmid, path, w) = self.migrate_call("GET", "lxc", request, c, "")?;
        let Some(g) = w.guest(vmid).filter(|g| g.node.as_deref() == Some(node)) else {
            return Err(die("GET", &path, "no such container"));
        };
        reply(LxcMigratePrecondition {
            running: Some(is_running(g)),
            allowed_nodes: w.other_nodes(node),
            ..LxcMigratePrecondition::default()
        })
    }

    fn migrate_qemu(&self, request: &Request, c: &Captures) -> Result<Data> {
        let params: QemuMigrateParams = request.decode_params()?;
        let form = format!(" {}", to_form(&params).unwrap());
        let (node, vmid, path, mut w) = self.migrate_call("POST", "qemu", request, c, &form)?;
        if let Some(lock) = w.guest(vmid).and_then(|g| g.lock.clone()) {
            return Err(die("POST", &path, &format!("VM is locked ({lock})")));
        }
        reply(w.migrate(node, vmid, &params.target, "qmigrate"))
    }

    fn migrate_lxc(&self, request: &Request, c: &Captures) -> Result<Data> {
        let params: LxcMigrateParams = request.decode_params()?;
        let form = format!(" {}", to_form(&params).unwrap());
        let (node, vmid, _, mut w) = self.migrate_call("POST", "lxc", request, c, &form)?;
        reply(w.migrate(node, vmid, &params.target, "vzmigrate"))
    }
}

/// The round's reads, routed by [`flxp_pve::Router::round_reads`]; each records its call too.
impl RoundReads for ScriptedApi {
    fn cluster_resources(&self, request: &Request, _: &Captures) -> Result<Data> {
        let ResourcesQuery { kind } = request.decode_params()?;
        let mut w = self.lock();
        match kind {
            None => {
                w.calls.push("GET /cluster/resources".into());
                w.read_resources();
                if w.unreadable {
                    return Err(api_error(
                        "GET",
                        "/cluster/resources",
                        595,
                        "Connection refused",
                        b"",
                    ));
                }
            }
            Some(ResourceType::Vm) => {
                w.calls.push("GET /cluster/resources?type=vm".into());
                w.ha_tick();
            }
            Some(_) => return Err(not_routed(request)),
        }
        let keep = |r: &&Resource| match kind {
            Some(ResourceType::Vm) => matches!(r.kind.as_deref(), Some("qemu" | "lxc")),
            _ => true,
        };
        reply(w.snapshot.resources.iter().filter(keep).collect::<Vec<_>>())
    }

    fn cluster_options(&self, _: &Request, _: &Captures) -> Result<Data> {
        self.read("GET /cluster/options", |s| &s.options)
    }

    fn cluster_tasks(&self, _: &Request, _: &Captures) -> Result<Data> {
        // A read of the list is a poll of every played task still running, as a status call is.
        {
            let mut w = self.lock();
            let running: Vec<String> = w
                .snapshot
                .tasks
                .iter()
                .filter(|t| t.is_running())
                .filter_map(|t| t.upid.clone())
                .filter(|u| w.tasks.contains_key(u))
                .collect();
            for upid in running {
                w.advance(&upid);
            }
        }
        self.read("GET /cluster/tasks", |s| &s.tasks)
    }

    fn ha_resources(&self, _: &Request, _: &Captures) -> Result<Data> {
        self.read("GET /cluster/ha/resources", |s| &s.ha.resources)
    }

    fn ha_rules(&self, _: &Request, _: &Captures) -> Result<Data> {
        self.read("GET /cluster/ha/rules", |s| &s.ha.rules)
    }

    fn ha_status(&self, _: &Request, _: &Captures) -> Result<Data> {
        self.read("GET /cluster/ha/status/current", |s| &s.ha.status)
    }

    fn node_config(&self, _: &Request, c: &Captures) -> Result<Data> {
        let node = c.get("node");
        let mut w = self.lock();
        w.calls.push(format!("GET /nodes/{node}/config"));
        reply(NodeConfig {
            description: w.snapshot.nodes.get(node).and_then(|n| n.notes.clone()),
            ..NodeConfig::default()
        })
    }

    fn node_rrddata(&self, _: &Request, c: &Captures) -> Result<Data> {
        self.record(format!("GET /nodes/{}/rrddata", c.get("node")));
        reply(Vec::<RrdRow>::new())
    }

    fn node_storage(&self, request: &Request, c: &Captures) -> Result<Data> {
        let node = c.get("node");
        self.record(format!("GET /nodes/{node}/storage"));
        let storages = self.lock().storages.get(node).cloned();
        reply(storages.ok_or_else(|| not_routed(request))?)
    }

    fn task_status(&self, _: &Request, c: &Captures) -> Result<Data> {
        let upid: Upid = c.get("upid").parse().unwrap();
        let path = format!("/nodes/{}/tasks/{upid}/status", upid.node());
        let mut w = self.lock();
        w.calls.push(format!("GET {path}"));
        let Some(t) = w.tasks.get_mut(upid.as_str()) else {
            return Err(api_error(
                "GET",
                &path,
                400,
                "Parameter verification failed.",
                br#"{"data":null,"errors":{"upid":"no such task"}}"#,
            ));
        };
        let base = TaskStatus {
            upid: upid.to_string(),
            node: Some(upid.node().to_owned()),
            kind: Some(upid.kind().to_owned()),
            id: Some(upid.id().to_owned()),
            status: "running".into(),
            ..TaskStatus::default()
        };
        let _ = t;
        match w.advance(upid.as_str()) {
            None => reply(base),
            Some(exit) => reply(TaskStatus {
                status: "stopped".into(),
                exitstatus: Some(exit),
                ..base
            }),
        }
    }

    fn task_log(&self, request: &Request, c: &Captures) -> Result<Data> {
        let upid: Upid = c.get("upid").parse().unwrap();
        let query: TaskLogQuery = request.decode_params()?;
        let mut w = self.lock();
        w.calls
            .push(format!("GET /nodes/{}/tasks/{upid}/log", upid.node()));
        let lines = w.tasks.get(upid.as_str()).map(|t| {
            // Lines appear as the task runs: one more per poll.
            let shown = t.log.len().saturating_sub(t.polls_left as usize);
            t.log[..shown].to_vec()
        });
        let start = usize::try_from(query.start.unwrap_or(0)).unwrap_or(0);
        let lines: Vec<TaskLogLine> = lines
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .skip(start)
            .map(|(i, t)| TaskLogLine {
                n: Some(i as u64 + 1),
                t: Some(t),
            })
            .collect();
        reply(lines)
    }
}

/// A local disk entry of a precondition answer.
pub fn local_disk(volid: &str, size: u64) -> LocalDisk {
    LocalDisk {
        volid: Some(volid.to_owned()),
        size: Some(size),
        drivename: Some("scsi0".into()),
        cdrom: Some(false),
        is_unused: Some(false),
        is_attached: Some(true),
        ..LocalDisk::default()
    }
}
