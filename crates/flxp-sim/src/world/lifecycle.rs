//! Guest lifecycle: config changes (digest, locks, pending values, tags), create,
//! start/shutdown/stop (with HA requests for managed guests) and destroy, each as the task
//! Proxmox runs for it. Clone is in `clone.rs`.

use std::collections::BTreeMap;

use super::{Action, Config, Guest, GuestKind, GuestUsage, HaRequest, World, guest::is_disk_key};
use crate::ApiError;
use crate::tags;

/// Keys applied at once even while a qemu guest runs ("fast-plug").
fn is_fast_plug(key: &str) -> bool {
    matches!(
        key,
        "name"
            | "tags"
            | "description"
            | "onboot"
            | "protection"
            | "startup"
            | "lock"
            | "ciuser"
            | "cipassword"
            | "citype"
            | "ciupgrade"
            | "cicustom"
            | "sshkeys"
            | "nameserver"
            | "searchdomain"
            | "hookscript"
    ) || key.starts_with("ipconfig")
}

/// What `PUT/POST .../config` asks for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigChange {
    /// Keys to set, as text.
    pub set: BTreeMap<String, String>,
    /// Keys to delete.
    pub delete: Vec<String>,
    /// Pending changes to revert.
    pub revert: Vec<String>,
    /// The digest the caller read, if any.
    pub digest: Option<String>,
    /// Ignore the lock (root only).
    pub skiplock: bool,
}

/// A power operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerOp {
    /// Start.
    Start,
    /// Stop hard.
    Stop,
    /// Shut down cleanly.
    Shutdown,
}

impl PowerOp {
    fn task_type(self, kind: GuestKind) -> &'static str {
        match (kind, self) {
            (GuestKind::Qemu, PowerOp::Start) => "qmstart",
            (GuestKind::Qemu, PowerOp::Stop) => "qmstop",
            (GuestKind::Qemu, PowerOp::Shutdown) => "qmshutdown",
            (GuestKind::Lxc, PowerOp::Start) => "vzstart",
            (GuestKind::Lxc, PowerOp::Stop) => "vzstop",
            (GuestKind::Lxc, PowerOp::Shutdown) => "vzshutdown",
        }
    }

    /// Simulated seconds it takes.
    fn duration(self) -> f64 {
        match self {
            PowerOp::Start => 2.0,
            PowerOp::Stop => 1.0,
            PowerOp::Shutdown => 5.0,
        }
    }
}

/// Usage a guest gets when it starts without having reported any (a fresh clone).
fn fresh_usage(g: &Guest) -> GuestUsage {
    let half = g.maxmem() / 2;
    GuestUsage {
        cpu: if g.usage.cpu > 0.0 { g.usage.cpu } else { 0.05 },
        mem: if g.usage.mem > 0 { g.usage.mem } else { half },
        ..g.usage
    }
}

impl World {
    /// `PUT`/`POST .../config`: digest, lock, pending and tag rules, as Proxmox applies them.
    pub fn update_config(
        &mut self,
        kind: GuestKind,
        node: &str,
        vmid: u32,
        change: ConfigChange,
    ) -> Result<(), ApiError> {
        let g = self.guest_at(kind, node, vmid)?;
        if change.set.is_empty() && change.delete.is_empty() && change.revert.is_empty() {
            return Err(ApiError::die("no options specified"));
        }
        if let Some(d) = &change.digest {
            if *d != g.config.digest() {
                return Err(ApiError::die(
                    "checksum mismatch (file change by other user?)",
                ));
            }
        }
        if let Some(lock) = g.lock() {
            if !change.skiplock
                && !change.set.contains_key("lock")
                && !change.delete.iter().any(|k| k == "lock")
            {
                return Err(g.locked_error(lock));
            }
        }
        for k in change.set.keys().chain(change.delete.iter()) {
            if change.set.contains_key(k) && change.delete.contains(k) {
                return Err(ApiError::param(
                    k,
                    format!("cannot set and delete '{k}' at the same time"),
                ));
            }
        }
        let style = self.settings.tag_style;
        let live = g.running && kind == GuestKind::Qemu;
        let guest = self.guest_mut(vmid)?;
        for k in &change.revert {
            guest.config.pending.remove(k);
            guest.config.pending_delete.remove(k);
        }
        for (k, v) in change.set {
            let v = if k == "tags" {
                tags::normalize(&v, style)
            } else {
                v
            };
            if live && !is_fast_plug(&k) {
                guest.config.pending_delete.remove(&k);
                guest.config.pending.insert(k, v);
            } else {
                guest.config.pending.remove(&k);
                guest.config.values.insert(k, v);
            }
        }
        for k in change.delete {
            if live && !is_fast_plug(&k) {
                guest.config.pending.remove(&k);
                guest.config.pending_delete.insert(k);
            } else {
                guest.config.values.remove(&k);
                guest.config.pending.remove(&k);
            }
        }
        if !guest.running {
            guest.config.apply_pending();
        }
        Ok(())
    }

    /// `POST /nodes/{node}/qemu`: a new VM from config keys; `scsi0=<storage>:<GiB>` allocates.
    #[allow(clippy::too_many_arguments)] // mirrors the API call's parameters
    pub fn create_guest(
        &mut self,
        node: &str,
        vmid: u32,
        mut config: BTreeMap<String, String>,
        start: bool,
        pool: Option<String>,
        ha_managed: bool,
        user: &str,
    ) -> Result<String, ApiError> {
        self.node(node)?;
        if self.guests.contains_key(&vmid) {
            return Err(ApiError::die(format!(
                "unable to create VM {vmid}: config file already exists"
            )));
        }
        if let Some(p) = &pool {
            if !self.pools.contains_key(p) {
                return Err(ApiError::die(format!("pool '{p}' does not exist")));
            }
        }
        let keys: Vec<String> = config.keys().cloned().collect();
        let mut disk_index = 0;
        for k in keys {
            let Some(v) = config.get(&k).cloned() else {
                continue;
            };
            let (prefix, _) = super::guest::split_indexed(&k);
            if prefix == "net" && !v.contains(':') {
                let mac = self.new_mac();
                let model_end = v.find(',').unwrap_or(v.len());
                let model = &v[..model_end];
                let model = model.strip_prefix("model=").unwrap_or(model);
                config.insert(k.clone(), format!("{model}={mac}{}", &v[model_end..]));
                continue;
            }
            if !is_disk_key(GuestKind::Qemu, &k) {
                continue;
            }
            let first = v.split(',').next().unwrap_or_default();
            let rest: Vec<&str> = v.split(',').skip(1).collect();
            let Some((storage, size)) = first.split_once(':') else {
                continue;
            };
            let new_alloc = size.parse::<f64>().is_ok();
            if !new_alloc || rest.contains(&"media=cdrom") {
                continue;
            }
            match self.storages.get(storage) {
                None => return Err(ApiError::die(format!("storage '{storage}' does not exist"))),
                Some(s) if !s.available_on(node) => {
                    return Err(ApiError::die(format!(
                        "storage '{storage}' is not available on node '{node}'"
                    )));
                }
                _ => {}
            }
            let gib = size.parse::<f64>().unwrap_or(0.0);
            let size = if gib > 0.0 {
                format!("{gib}G")
            } else {
                "32G".into()
            };
            let opts: Vec<&str> = rest
                .into_iter()
                .filter(|o| !o.starts_with("import-from="))
                .collect();
            let opts = if opts.is_empty() {
                String::new()
            } else {
                format!(",{}", opts.join(","))
            };
            config.insert(
                k,
                format!("{storage}:vm-{vmid}-disk-{disk_index}{opts},size={size}"),
            );
            disk_index += 1;
        }
        if let Some(t) = config.get("tags").cloned() {
            config.insert("tags".into(), tags::normalize(&t, self.settings.tag_style));
        }
        let smbios = format!("uuid={}", self.new_uuid());
        config.entry("smbios1".into()).or_insert(smbios);
        let genid = self.new_uuid();
        config.entry("vmgenid".into()).or_insert(genid);
        config.insert("lock".into(), "create".into());
        let now = self.now;
        self.guests.insert(
            vmid,
            Guest {
                vmid,
                kind: GuestKind::Qemu,
                node: node.to_string(),
                running: false,
                config: Config {
                    values: config,
                    ..Config::default()
                },
                usage: GuestUsage::default(),
                started_at: now,
                created_at: now,
                pool: pool.clone(),
            },
        );
        if let Some(p) = pool {
            self.pools.entry(p).or_default();
        }
        if ha_managed {
            let sid = format!("vm:{vmid}");
            let conf = super::HaResourceConf {
                state: "started".into(),
                max_restart: 1,
                max_relocate: 1,
                failback: true,
                group: None,
                comment: None,
            };
            if let Some(g) = self.guests.get(&vmid) {
                self.ha
                    .services
                    .insert(sid.clone(), super::ServiceStatus::settled(g, &conf));
            }
            self.ha.resources.insert(sid, conf);
        }
        let task = self.start_task(node, "qmcreate", &vmid.to_string(), user);
        self.schedule(now + 1.0, Action::CreateEnd { task, vmid, start });
        self.record();
        Ok(self.upid(task))
    }

    pub(crate) fn on_create_end(&mut self, task: usize, vmid: u32, start: bool) {
        let now = self.now;
        let Some(g) = self.guests.get_mut(&vmid) else {
            self.tasks
                .finish(task, now, Err(format!("unable to create VM {vmid}")));
            return;
        };
        g.config.values.remove("lock");
        if start {
            g.usage = fresh_usage(g);
            g.running = true;
            g.started_at = now;
        }
        self.note_created(task, vmid);
        self.finish_and_settle_ha(task, vmid);
    }

    /// Ends `task` well, then sets the guest's HA service state to what the guest now is.
    fn finish_and_settle_ha(&mut self, task: usize, vmid: u32) {
        self.tasks.finish(task, self.now, Ok(()));
        if let Some(g) = self.guests.get(&vmid) {
            let sid = g.sid();
            let running = g.running;
            if let Some(s) = self.ha.services.get_mut(&sid) {
                s.state = if running { "started" } else { "stopped" }.into();
            }
        }
    }

    /// `POST .../status/{start,stop,shutdown}`: HA-managed guests get a request for the HA
    /// manager instead (`hastart`/`hastop`).
    pub fn power_request(
        &mut self,
        kind: GuestKind,
        node: &str,
        vmid: u32,
        op: PowerOp,
        user: &str,
        skiplock: bool,
    ) -> Result<String, ApiError> {
        let g = self.guest_at(kind, node, vmid)?.clone();
        // The handlers check neither templates nor locks: the worker does (qemu-server
        // `vm_start` / `_do_vm_stop`, pve-container's `vzstart`/`vzstop` workers), and HA
        // requests pass unchecked.
        if op == PowerOp::Shutdown && !g.running {
            return Err(ApiError::die(format!("VM {vmid} not running")));
        }
        let sid = g.sid();
        if self.is_ha_managed(&sid) {
            let (task_type, request, verb) = match op {
                PowerOp::Start => ("hastart", HaRequest::Start, "start"),
                PowerOp::Stop | PowerOp::Shutdown => ("hastop", HaRequest::Stop, "stop"),
            };
            let task = self.start_task(node, task_type, &vmid.to_string(), user);
            let now = self.now;
            let what = if kind == GuestKind::Qemu { "VM" } else { "CT" };
            self.tasks
                .log(task, now, format!("Requesting HA {verb} for {what} {vmid}"));
            self.schedule(
                now + 1.0,
                Action::EndTask {
                    task,
                    result: Ok(()),
                },
            );
            if let Some(conf) = self.ha.resources.get_mut(&sid) {
                conf.state = if op == PowerOp::Start {
                    "started"
                } else {
                    "stopped"
                }
                .into();
            }
            self.ha_request(&sid, request);
            return Ok(self.upid(task));
        }
        let task = self.power(vmid, op, user, skiplock)?;
        Ok(self.upid(task))
    }

    /// Runs a power task for `vmid` on its node.
    pub(crate) fn power(
        &mut self,
        vmid: u32,
        op: PowerOp,
        user: &str,
        skiplock: bool,
    ) -> Result<usize, ApiError> {
        let g = self
            .guests
            .get(&vmid)
            .cloned()
            .ok_or_else(|| ApiError::die(format!("VM {vmid} does not exist")))?;
        let task = self.start_task(&g.node, op.task_type(g.kind), &vmid.to_string(), user);
        let now = self.now;
        let what = if g.kind == GuestKind::Qemu {
            "VM"
        } else {
            "CT"
        };
        // A worker's `die` is its exit status and the log's last line (`TASK ERROR: ...`).
        let fail = |w: &mut World, msg: String| {
            w.schedule(
                now + 0.5,
                Action::EndTask {
                    task,
                    result: Err(msg),
                },
            );
            Ok(task)
        };
        if op == PowerOp::Start && g.is_template() {
            let kind = if g.kind == GuestKind::Qemu {
                "vm"
            } else {
                "CT"
            };
            return fail(self, format!("you can't start a {kind} if it's a template"));
        }
        // pve-container lets a `mounted` lock through; qemu-server checks every lock.
        let passes = |lock: &str| skiplock || (g.kind == GuestKind::Lxc && lock == "mounted");
        if let Some(lock) = g.lock().filter(|l| !passes(l)) {
            return fail(self, format!("{what} is locked ({lock})"));
        }
        if op == PowerOp::Start {
            if g.running {
                self.schedule(
                    now + 0.5,
                    Action::EndTask {
                        task,
                        result: Err(format!("{what} {vmid} already running")),
                    },
                );
                return Ok(task);
            }
            let probe = Guest {
                usage: fresh_usage(&g),
                running: true,
                ..g.clone()
            };
            let need = probe.host_mem();
            if self.free_mem(&g.node) < need {
                self.tasks.log(
                    task,
                    now + 0.5,
                    "kvm: cannot set up guest memory 'pc.ram': Cannot allocate memory",
                );
                self.schedule(
                    now + 1.0,
                    Action::EndTask {
                        task,
                        result: Err("start failed: QEMU exited with code 1".into()),
                    },
                );
                return Ok(task);
            }
        }
        self.schedule(now + op.duration(), Action::PowerEnd { task, vmid, op });
        Ok(task)
    }

    pub(crate) fn on_power_end(&mut self, task: usize, vmid: u32, op: PowerOp) {
        let now = self.now;
        let Some(g) = self.guests.get_mut(&vmid) else {
            self.tasks
                .finish(task, now, Err(format!("VM {vmid} does not exist")));
            return;
        };
        match op {
            PowerOp::Start => {
                g.config.apply_pending();
                g.usage = fresh_usage(g);
                g.running = true;
                g.started_at = now;
            }
            PowerOp::Stop | PowerOp::Shutdown => {
                g.running = false;
                g.config.apply_pending();
            }
        }
        self.finish_and_settle_ha(task, vmid);
    }

    /// `DELETE /nodes/{node}/{qemu|lxc}/{vmid}`.
    pub fn destroy(
        &mut self,
        kind: GuestKind,
        node: &str,
        vmid: u32,
        purge: bool,
        user: &str,
    ) -> Result<String, ApiError> {
        let g = self.guest_at(kind, node, vmid)?.clone();
        if let Some(lock) = g.lock() {
            return Err(g.locked_error(lock));
        }
        if g.running {
            return Err(ApiError::die(format!(
                "VM {vmid} is running - destroy failed"
            )));
        }
        let sid = g.sid();
        if self.ha.resources.contains_key(&sid) && !purge {
            return Err(ApiError::die(format!(
                "unable to remove VM {vmid} - used in HA resources and purge parameter not set."
            )));
        }
        if g.is_template() {
            for d in g.disks() {
                if !self.linked_clones_of(vmid, &d).is_empty() {
                    return Err(ApiError::die(format!(
                        "base volume '{}' is still in use by linked cloned",
                        d.volid
                    )));
                }
            }
        }
        let task_type = if kind == GuestKind::Qemu {
            "qmdestroy"
        } else {
            "vzdestroy"
        };
        let task = self.start_task(node, task_type, &vmid.to_string(), user);
        if let Ok(guest) = self.guest_mut(vmid) {
            guest
                .config
                .values
                .insert("lock".into(), "destroyed".into());
        }
        if purge {
            self.ha.resources.remove(&sid);
            self.ha.services.remove(&sid);
        }
        let now = self.now;
        self.schedule(now + 1.0, Action::DestroyEnd { task, vmid });
        Ok(self.upid(task))
    }

    pub(crate) fn on_destroy_end(&mut self, task: usize, vmid: u32) {
        let now = self.now;
        if let Some(g) = self.guests.remove(&vmid) {
            self.note_deleted(task, vmid, g.node);
        }
        self.release_reservation(vmid);
        self.history.forget_guest(vmid);
        self.tasks.finish(task, now, Ok(()));
    }
}

impl World {
    /// Runs a task that finishes at once with `OK` (e.g. `qmconfig`); returns its UPID.
    pub fn instant_task(&mut self, node: &str, kind: &str, id: &str, user: &str) -> String {
        let task = self.start_task(node, kind, id, user);
        let now = self.now;
        self.tasks.finish(task, now, Ok(()));
        self.upid(task)
    }
}
