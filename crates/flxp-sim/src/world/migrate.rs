//! Migration: the precondition check (`GET .../migrate`), starting a migration (`POST`), and its
//! end. A live migration takes (memory + local disks moved) / bandwidth simulated seconds; the
//! guest holds `lock: migrate` meanwhile, the target reserves the guest's memory, and the guest's
//! `node` changes only when it ends successfully. HA-managed guests get an `hamigrate` task that
//! only queues the move for the HA manager.

use std::collections::{BTreeMap, BTreeSet};

use flxp_core::units::GIB;
use flxp_pve::types::migrate::{BlockingHaResource, LocalDisk, NotAllowedNode};
use flxp_pve::types::{LxcMigratePrecondition, QemuMigratePrecondition};
use serde_json::{Value, json};

use super::{Action, GuestKind, HaRequest, World};
use crate::ApiError;
use crate::clock::hms;

/// The exit status of a migration task that failed before or in phase 1 (pve-guest-common
/// `AbstractMigrate::migrate`: `die "migration aborted\n"`).
const MIGRATION_ABORTED: &str = "migration aborted";

/// A migration request as the API receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct MigrateRequest {
    /// qemu or lxc (the path it came through).
    pub kind: GuestKind,
    /// The node in the path (must own the guest).
    pub node: String,
    /// The guest.
    pub vmid: u32,
    /// Target node.
    pub target: String,
    /// `online` (live migration).
    pub online: bool,
    /// `with-local-disks`.
    pub with_local_disks: bool,
    /// `restart` (lxc: stop, move, start).
    pub restart: bool,
    /// `bwlimit` in KiB/s.
    pub bwlimit_kib: Option<f64>,
    /// Who asks (`user@realm` or `user@realm!token`).
    pub user: String,
}

impl World {
    /// `GET /nodes/{node}/{qemu|lxc}/{vmid}/migrate`: running, allowed and blocked nodes, local
    /// disks (qemu keys with underscores, lxc with hyphens).
    pub fn migrate_precondition(
        &self,
        kind: GuestKind,
        node: &str,
        vmid: u32,
    ) -> Result<Value, ApiError> {
        let g = self.guest_at(kind, node, vmid)?;
        if let Some(lock) = g.lock() {
            return Err(g.locked_error(lock));
        }
        let sid = g.sid();
        let mut allowed = Vec::new();
        let mut not_allowed = BTreeMap::new();
        for name in self.nodes.keys().filter(|n| *n != node) {
            let unavailable: BTreeSet<String> = g
                .disks()
                .iter()
                .filter_map(|d| d.storage.clone())
                .filter(|s| !self.storages.get(s).is_some_and(|st| st.available_on(name)))
                .collect();
            let blocking: Vec<BlockingHaResource> = self
                .ha_blockers(&sid, name)
                .into_iter()
                .map(|(sid, cause)| BlockingHaResource {
                    sid: Some(sid),
                    cause: Some(cause.to_string()),
                })
                .collect();
            if unavailable.is_empty() && blocking.is_empty() {
                allowed.push(name.clone());
            } else {
                not_allowed.insert(
                    name.clone(),
                    NotAllowedNode {
                        unavailable_storages: unavailable.into_iter().collect(),
                        unavailable_resources: Vec::new(),
                        blocking_ha_resources: blocking,
                    },
                );
            }
        }
        let dependent = self.ha_positive_partners(&sid);
        let value = match kind {
            GuestKind::Qemu => {
                let local_disks = g
                    .disks()
                    .iter()
                    .filter(|d| d.storage.as_deref().is_some_and(|s| !self.is_shared(s)))
                    .map(|d| LocalDisk {
                        volid: Some(d.volid.clone()),
                        size: Some(d.size),
                        drivename: Some(d.key.clone()),
                        cdrom: Some(d.cdrom),
                        is_unused: Some(false),
                        is_attached: Some(true),
                        is_cloudinit: Some(d.cloudinit),
                        is_vmstate: Some(false),
                        is_tpmstate: Some(d.key == "tpmstate0"),
                        replicate: Some(true),
                        shared: Some(false),
                        referenced_in_snapshot: None,
                    })
                    .collect();
                let mut v = serde_json::to_value(QemuMigratePrecondition {
                    running: Some(g.running),
                    allowed_nodes: allowed,
                    not_allowed_nodes: not_allowed,
                    local_disks,
                    local_resources: Vec::new(),
                    mapped_resources: Vec::new(),
                    mapped_resource_info: BTreeMap::new(),
                    has_dbus_vmstate: Some(true),
                    dependent_ha_resources: dependent,
                })
                .unwrap_or(Value::Null);
                // Proxmox always sends these, empty or not (the schema requires them).
                if let Some(o) = v.as_object_mut() {
                    o.entry("mapped-resource-info").or_insert_with(|| json!({}));
                    o.entry("mapped-resources").or_insert_with(|| json!([]));
                    o.entry("local_resources").or_insert_with(|| json!([]));
                    o.entry("local_disks").or_insert_with(|| json!([]));
                }
                v
            }
            GuestKind::Lxc => serde_json::to_value(LxcMigratePrecondition {
                running: Some(g.running),
                allowed_nodes: allowed,
                not_allowed_nodes: not_allowed,
                dependent_ha_resources: dependent,
            })
            .unwrap_or(Value::Null),
        };
        Ok(value)
    }

    /// The target checks both `migrate_vm` handlers make first (qemu-server
    /// `PVE/API2/Qemu.pm` and pve-container `src/PVE/API2/LXC.pm`, `migrate_vm`): a parameter
    /// error when the target is the node handling the request, then `check_node_exists`.
    pub fn check_migrate_target(&self, node: &str, target: &str) -> Result<(), ApiError> {
        if target == node {
            return Err(ApiError::param("target", "target is local node."));
        }
        self.node(target).map(|_| ())
    }

    /// `POST /nodes/{node}/{qemu|lxc}/{vmid}/migrate`: checks what Proxmox checks before forking
    /// the worker, in its order, then starts the task; returns its UPID. The qemu handler checks
    /// the lock and the storages early; the lxc handler leaves both to the worker's `prepare`
    /// (pve-container `src/PVE/LXC/Migrate.pm`), so they fail in the task log there.
    pub fn migrate(&mut self, req: MigrateRequest) -> Result<String, ApiError> {
        self.check_migrate_target(&req.node, &req.target)?;
        let g = self.guest_at(req.kind, &req.node, req.vmid)?.clone();
        match req.kind {
            GuestKind::Qemu => {
                if let Some(lock) = g.lock() {
                    return Err(g.locked_error(lock));
                }
                // qemu-server `migrate_vm`: `check_running` right after `check_lock`.
                if g.running && !req.online {
                    return Err(ApiError::die("can't migrate running VM without --online"));
                }
                // `check_storage_availability`: every volume's storage on the target.
                if let Some(s) = self.unavailable_storage(&g, &req.target) {
                    return Err(ApiError::die(format!(
                        "storage '{s}' is not available on node '{}'",
                        req.target
                    )));
                }
            }
            GuestKind::Lxc => {
                if g.running && !req.online && !req.restart {
                    return Err(ApiError::die(
                        "can't migrate running container without --online or --restart",
                    ));
                }
            }
        }
        let sid = g.sid();
        if self.is_ha_managed(&sid) {
            let what = match req.kind {
                GuestKind::Qemu => "VM",
                GuestKind::Lxc => "CT",
            };
            let task = self.start_task(&req.node, "hamigrate", &req.vmid.to_string(), &req.user);
            self.records.ha_requested(req.vmid, &req.user);
            let now = self.now;
            self.tasks.log(
                task,
                now,
                format!(
                    "Requesting HA migration for {what} {} to node {}",
                    req.vmid, req.target
                ),
            );
            self.schedule(
                now + 1.0,
                Action::EndTask {
                    task,
                    result: Ok(()),
                },
            );
            let request = match req.kind {
                GuestKind::Qemu => HaRequest::Migrate(req.target.clone()),
                GuestKind::Lxc => HaRequest::Relocate(req.target.clone()),
            };
            self.ha_request(&sid, request);
            return Ok(self.upid(task));
        }
        let task = self.begin_migration(req);
        Ok(self.upid(task))
    }

    /// The UPID of a task handle.
    pub(crate) fn upid(&self, task: usize) -> String {
        self.tasks
            .get(task)
            .map(|t| t.upid.clone())
            .unwrap_or_default()
    }

    /// The first storage of `g`'s volumes that `target` cannot reach.
    fn unavailable_storage(&self, g: &super::Guest, target: &str) -> Option<String> {
        g.disks().into_iter().filter_map(|d| d.storage).find(|s| {
            !self
                .storages
                .get(s)
                .is_some_and(|st| st.available_on(target))
        })
    }

    /// Starts a task on `node` now.
    pub(crate) fn start_task(&mut self, node: &str, kind: &str, id: &str, user: &str) -> usize {
        let booted = self.nodes.get(node).map(|n| n.booted_at).unwrap_or(0.0);
        self.tasks.start(node, booted, kind, id, user, self.now)
    }

    /// Starts the migration worker (`qmigrate`/`vzmigrate`) on the guest's node. Failures the
    /// worker finds in its prepare phase end the task quickly with Proxmox's text. The guest's
    /// own kind and node count, not `plan.kind`/`plan.node` (the API checked those; HA fills them).
    pub(crate) fn begin_migration(&mut self, plan: MigrateRequest) -> usize {
        let now = self.now;
        let Some(g) = self.guests.get(&plan.vmid).cloned() else {
            return usize::MAX;
        };
        let kind_name = match g.kind {
            GuestKind::Qemu => "qmigrate",
            GuestKind::Lxc => "vzmigrate",
        };
        let task = self.start_task(&g.node, kind_name, &plan.vmid.to_string(), &plan.user);
        let what = match g.kind {
            GuestKind::Qemu => "VM",
            GuestKind::Lxc => "CT",
        };
        let target_ip = self
            .nodes
            .get(&plan.target)
            .map(|n| n.ip.clone())
            .unwrap_or_default();
        self.tasks.log_stamped(
            task,
            now,
            &format!(
                "starting migration of {what} {} to node '{}' ({target_ip})",
                plan.vmid, plan.target
            ),
        );
        // pve-guest-common `AbstractMigrate::migrate`: any error up to phase 1 is logged as
        // "migration aborted (duration ...): <error>" and the worker dies with "migration aborted".
        let fail_after = |w: &mut World, secs: f64, msg: String| {
            w.tasks.log_stamped(
                task,
                now + secs,
                &format!("ERROR: migration aborted (duration {}): {msg}", hms(secs)),
            );
            w.schedule(
                now + secs.max(1.0),
                Action::EndTask {
                    task,
                    result: Err(MIGRATION_ABORTED.into()),
                },
            );
            w.ha_migration_settled(plan.vmid, None);
            task
        };
        let fail_fast = |w: &mut World, msg: String| fail_after(w, 0.5, msg);
        let shared = |s: &Option<String>| s.as_deref().is_some_and(|s| self.is_shared(s));
        let local: Vec<_> = g
            .disks()
            .into_iter()
            .filter(|d| d.storage.is_some() && !shared(&d.storage) && d.is_volume())
            .collect();
        // Restart mode (containers; HA relocation of VMs): stop, move, start on the target.
        let restart_mode = g.running && plan.restart;
        let live = g.running && g.kind == GuestKind::Qemu && !restart_mode;
        // `prepare` checks the lock first (the lxc API handler does not check it at all).
        if let Some(lock) = g.lock() {
            return fail_fast(self, format!("{what} is locked ({lock})"));
        }
        if live && !plan.online {
            return fail_fast(self, "can't migrate running VM without --online".into());
        }
        // `prepare` refuses `online` for a running container even with `restart`.
        if g.kind == GuestKind::Lxc && g.running && plan.online {
            return fail_fast(
                self,
                "lxc live migration is currently not implemented".into(),
            );
        }
        if g.kind == GuestKind::Lxc && g.running && !plan.restart {
            return fail_fast(
                self,
                "running container can only be migrated in restart mode".into(),
            );
        }
        // `prepare` checks every volume's storage on the target (`storage_check_enabled`).
        if let Some(s) = self.unavailable_storage(&g, &plan.target) {
            return fail_fast(
                self,
                format!("storage '{s}' is not available on node '{}'", plan.target),
            );
        }
        if let Some(d) = local.iter().find(|d| d.base.is_some()) {
            let base = d.base.clone().unwrap_or_default();
            return fail_fast(
                self,
                format!("can't migrate '{}' as it's a clone of '{base}'", d.volid),
            );
        }
        // A base volume on local storage must stay with the linked clones that read from it
        // (Proxmox fails the same move when it frees the source: "still in use").
        for d in &local {
            let users = self.linked_clones_of(plan.vmid, d);
            if !users.is_empty() {
                let ids: Vec<String> = users.iter().map(u32::to_string).collect();
                return fail_fast(
                    self,
                    format!(
                        "can't migrate '{}' - base volume is still in use by linked clones (VM {})",
                        d.volid,
                        ids.join(", ")
                    ),
                );
            }
        }
        if live && !local.iter().all(|d| d.cloudinit) && !local.is_empty() && !plan.with_local_disks
        {
            return fail_fast(
                self,
                "can't live migrate attached local disks without with-local-disks option".into(),
            );
        }
        if !self.nodes.get(&plan.target).is_some_and(|n| n.online) {
            return fail_after(
                self,
                3.0,
                format!(
                    "Can't connect to destination address ({target_ip}) using public key authentication"
                ),
            );
        }
        // The target allocates the local volumes on its own storage of the same id: each node's
        // local-lvm is a pool of its own. (Proxmox's words depend on the storage type; this
        // says what failed.)
        let mut need: Vec<(&str, u64)> = Vec::new();
        for d in &local {
            let Some(sid) = d.storage.as_deref() else {
                continue;
            };
            match need.iter_mut().find(|(s, _)| *s == sid) {
                Some((_, b)) => *b = b.saturating_add(d.size),
                None => need.push((sid, d.size)),
            }
        }
        for (sid, bytes) in need {
            let (total, used) = self.storage_usage(sid, &plan.target);
            let free = total.saturating_sub(used);
            if bytes > free {
                let msg = format!(
                    "unable to allocate {} MiB on storage '{sid}' of node '{}': {} MiB free \
                     (No space left on device)",
                    bytes >> 20,
                    plan.target,
                    free >> 20
                );
                return fail_after(self, 1.0, msg);
            }
        }
        let needs_memory = g.running;
        let d = self.demand(&g);
        let cost = d.host_mem.max(if g.running { d.mem } else { 0 });
        if needs_memory && self.free_mem(&plan.target) < cost {
            let msg = "start failed: QEMU exited with code 1".to_owned();
            self.tasks.log_stamped(
                task,
                now + 0.5,
                &format!(
                    "kvm: cannot set up guest memory 'pc.ram': Cannot allocate memory (target node '{}' has {} MiB free, needs {} MiB)",
                    plan.target,
                    self.free_mem(&plan.target) >> 20,
                    cost >> 20
                ),
            );
            return fail_after(self, 1.0, msg);
        }

        let bandwidth = match plan.bwlimit_kib {
            Some(kib) if kib > 0.0 => self.settings.migration_bandwidth.min(kib * 1024.0),
            _ => self.settings.migration_bandwidth,
        };
        // Saturating: sizes come from configs, and `size=` has no upper bound.
        let disk_bytes = local
            .iter()
            .filter(|d| !d.cloudinit)
            .map(|d| d.size)
            .fold(0u64, u64::saturating_add);
        let mem_bytes = if live { g.maxmem() } else { 0 };
        let bytes = mem_bytes.saturating_add(disk_bytes);
        // Restart mode first shuts the guest down (a few seconds).
        let shutdown = if restart_mode { 5.0 } else { 0.0 };
        let duration = (bytes as f64 / bandwidth).max(1.0) + shutdown;

        if let Ok(guest) = self.guest_mut(plan.vmid) {
            guest.config.values.insert("lock".into(), "migrate".into());
            if shutdown > 0.0 {
                guest.running = false;
            }
        }
        if needs_memory {
            self.reservations
                .insert(plan.vmid, (plan.target.clone(), cost));
            // A live migration's pages fill the target's QEMU process as they arrive; a
            // container restarted on the target takes its memory there only when it starts.
            let arrival = if shutdown > 0.0 {
                (now + duration, now + duration)
            } else {
                (now, now + duration)
            };
            self.arrivals.insert(plan.vmid, arrival);
        }
        self.log_progress(
            task,
            now,
            duration,
            mem_bytes,
            disk_bytes,
            bandwidth,
            live,
            &plan.target,
        );
        let upid = self.upid(task);
        // The HA manager migrates as root@pam; whoever asked it is the requester.
        let requested_by = self.records.ha_requests.remove(&plan.vmid);
        self.records.migration_started(super::MigrationRecord {
            requested_by,
            vmid: plan.vmid,
            from: g.node.clone(),
            to: plan.target.clone(),
            start: now,
            end: None,
            bytes,
            user: plan.user.clone(),
            upid,
            ok: None,
        });
        let fail = self.faults.migration_failure(plan.vmid);
        let end = if fail.is_some() {
            now + duration / 2.0
        } else {
            now + duration
        };
        self.schedule(
            end,
            Action::MigrationEnd {
                task,
                vmid: plan.vmid,
                target: plan.target.clone(),
                fail,
                restart: shutdown > 0.0,
            },
        );
        task
    }

    #[allow(clippy::too_many_arguments)] // the log is a function of exactly these facts
    fn log_progress(
        &mut self,
        task: usize,
        now: f64,
        duration: f64,
        mem: u64,
        disk: u64,
        bandwidth: f64,
        live: bool,
        target: &str,
    ) {
        let gib = |b: f64| format!("{:.1} GiB", b / GIB as f64);
        if disk > 0 {
            self.tasks.log_stamped(
                task,
                now + 0.1,
                &format!(
                    "found local disk(s), copying {} to node '{target}'",
                    gib(disk as f64)
                ),
            );
        }
        if live {
            self.tasks.log_stamped(
                task,
                now + 0.2,
                &format!("starting VM on remote node '{target}'"),
            );
            self.tasks
                .log_stamped(task, now + 0.3, "start remote tunnel");
            self.tasks
                .log_stamped(task, now + 0.4, "starting online/live migration");
            // qemu-server polls QEMU about once a second and logs each new figure: a line a
            // second, at most 500 of them (at least 4).
            let steps = duration.round().clamp(5.0, 501.0) as u32;
            for step in 1..steps {
                let f = f64::from(step) / f64::from(steps);
                let at = now + duration * f;
                self.tasks.log_stamped(
                    task,
                    at,
                    &format!(
                        "migration active, transferred {} of {} VM-state, {}/s",
                        gib(mem as f64 * f),
                        gib(mem as f64),
                        gib(bandwidth)
                    ),
                );
            }
            self.tasks
                .log_stamped(task, now + duration - 0.01, "migration status: completed");
        }
        self.tasks.log_stamped(
            task,
            now + duration,
            &format!(
                "migration finished successfully (duration {})",
                hms(duration)
            ),
        );
    }

    /// The end of a migration: the guest moves to `target` unless it fails now.
    pub(crate) fn on_migration_end(
        &mut self,
        task: usize,
        vmid: u32,
        target: &str,
        fail: Option<String>,
        restart: bool,
    ) {
        let now = self.now;
        self.release_reservation(vmid);
        let Some(g) = self.guests.get(&vmid).cloned() else {
            self.tasks
                .finish(task, now, Err(format!("VM {vmid} vanished")));
            return;
        };
        let started = self
            .tasks
            .get(task)
            .map(|t| t.starttime as f64)
            .unwrap_or(now);
        // A node lost mid-way aborts the migration (logged with its cause, task status
        // "migration aborted"); an injected fault fails phase 2 with the fault's exit status.
        let offline = |node: &str, which: &str| {
            (!self.nodes.get(node).is_some_and(|n| n.online))
                .then(|| format!("{which} node '{node}' went offline"))
        };
        let aborted = offline(target, "target").or_else(|| offline(&g.node, "source"));
        let failure = fail
            .map(|msg| {
                self.tasks.log_stamped(
                    task,
                    now,
                    &format!("ERROR: online migrate failure - {msg}"),
                );
                self.tasks
                    .log_stamped(task, now, "aborting phase 2 - cleanup resources");
                msg
            })
            .or_else(|| {
                aborted.map(|why| {
                    self.tasks.log_stamped(
                        task,
                        now,
                        &format!(
                            "ERROR: migration aborted (duration {}): {why}",
                            hms(now - started)
                        ),
                    );
                    MIGRATION_ABORTED.to_owned()
                })
            });
        if let Ok(guest) = self.guest_mut(vmid) {
            if guest.lock() == Some("migrate") {
                guest.config.values.remove("lock");
            }
            if failure.is_none() {
                guest.node = target.to_string();
            }
            if restart {
                guest.running = true;
                guest.started_at = now;
            }
        }
        let upid = self.upid(task);
        self.records.migration_ended(&upid, now, failure.is_none());
        match failure {
            Some(msg) => {
                tracing::info!(vmid, to = %target, reason = %msg, "migration failed");
                self.tasks.finish(task, now, Err(msg));
                self.ha_migration_settled(vmid, None);
            }
            None => {
                tracing::info!(vmid, from = %g.node, to = %target, "migration landed");
                self.tasks.finish(task, now, Ok(()));
                self.ha_migration_settled(vmid, Some(target));
            }
        }
    }
}
