//! Bulk migrations: `POST /nodes/{node}/migrateall` and `POST /cluster/bulk-action/guest/migrate`.
//! One parent task runs up to `max-workers` migrations at a time, each an ordinary migration
//! (HA-managed guests get their `hamigrate`), and ends once all children ended: `OK`, or the
//! number of guests that failed.

use std::collections::VecDeque;

use super::{GuestKind, MigrateRequest, World};
use crate::ApiError;

/// A bulk migration in progress.
#[derive(Debug, Clone, PartialEq)]
pub struct BulkJob {
    task: usize,
    queue: VecDeque<u32>,
    running: Vec<(u32, usize)>,
    workers: usize,
    target: String,
    online: bool,
    with_local_disks: bool,
    user: String,
    failed: usize,
}

/// What a bulk migration asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct BulkRequest {
    /// Node the parent task runs on.
    pub node: String,
    /// Task type: `migrateall` or `bulk-migrate`.
    pub kind: &'static str,
    /// Guests to move, in order.
    pub vmids: Vec<u32>,
    /// Target node.
    pub target: String,
    /// Live-migrate running VMs and restart-migrate running containers.
    pub online: bool,
    /// `with-local-disks`.
    pub with_local_disks: bool,
    /// Parallel migrations.
    pub workers: usize,
    /// Who asks.
    pub user: String,
}

impl World {
    /// Starts a bulk migration; returns the parent task's UPID.
    pub fn bulk_migrate(&mut self, req: BulkRequest) -> Result<String, ApiError> {
        self.node(&req.target)?;
        let task = self.start_task(&req.node, req.kind, "", &req.user);
        let now = self.now;
        let vmids: VecDeque<u32> = req
            .vmids
            .into_iter()
            .filter(|v| self.guests.get(v).is_some_and(|g| g.node != req.target))
            .collect();
        self.tasks.log(
            task,
            now,
            format!(
                "migrating {} guest(s) to node '{}'",
                vmids.len(),
                req.target
            ),
        );
        self.bulk.push(BulkJob {
            task,
            queue: vmids,
            running: Vec::new(),
            workers: req.workers.max(1),
            target: req.target,
            online: req.online,
            with_local_disks: req.with_local_disks,
            user: req.user,
            failed: 0,
        });
        self.bulk_step();
        Ok(self.upid(task))
    }

    /// Collects ended children, starts queued ones, ends finished jobs.
    pub(crate) fn bulk_step(&mut self) {
        if self.bulk.is_empty() {
            return;
        }
        let now = self.now;
        let mut jobs = std::mem::take(&mut self.bulk);
        for job in &mut jobs {
            let mut still = Vec::new();
            for (vmid, child) in std::mem::take(&mut job.running) {
                match self.tasks.get(child).and_then(|t| t.exitstatus.clone()) {
                    None => still.push((vmid, child)),
                    Some(status) if status == "OK" => {
                        self.tasks
                            .log(job.task, now, format!("migration of {vmid} finished"));
                    }
                    Some(status) => {
                        job.failed += 1;
                        self.tasks.log(
                            job.task,
                            now,
                            format!("migration of {vmid} failed: {status}"),
                        );
                    }
                }
            }
            job.running = still;
            while job.running.len() < job.workers {
                let Some(vmid) = job.queue.pop_front() else {
                    break;
                };
                let Some(g) = self.guests.get(&vmid).cloned() else {
                    continue;
                };
                let req = MigrateRequest {
                    kind: g.kind,
                    node: g.node.clone(),
                    vmid,
                    target: job.target.clone(),
                    online: job.online && g.running && g.kind == GuestKind::Qemu,
                    with_local_disks: job.with_local_disks,
                    restart: job.online && g.running && g.kind == GuestKind::Lxc,
                    bwlimit_kib: None,
                    user: job.user.clone(),
                };
                match self.migrate(req) {
                    Ok(upid) => {
                        self.tasks.log(
                            job.task,
                            now,
                            format!("starting migration of {vmid}: {upid}"),
                        );
                        if let Some(child) = self.tasks.index_of(&upid) {
                            job.running.push((vmid, child));
                        }
                    }
                    Err(e) => {
                        job.failed += 1;
                        self.tasks.log(
                            job.task,
                            now,
                            format!("migration of {vmid} failed: {}", e.message),
                        );
                    }
                }
            }
        }
        let (done, open): (Vec<BulkJob>, Vec<BulkJob>) = jobs
            .into_iter()
            .partition(|j| j.queue.is_empty() && j.running.is_empty());
        for job in done {
            let result = if job.failed == 0 {
                Ok(())
            } else {
                Err(format!("{} guest(s) failed to migrate", job.failed))
            };
            self.tasks.finish(job.task, now, result);
        }
        self.bulk.extend(open);
    }
}
