//! The workload driver: a trace's usage models and its timed events (create, delete,
//! maintenance, model change), applied at their simulated times as an ordinary user of the API
//! would (tasks by [`WORKLOAD_USER`]), and the per-minute sampling that feeds the RRD archives
//! and the records.

use std::collections::BTreeMap;

use super::records::{LifecycleRecord, NodeSample};
use super::{Action, PowerOp, World};
use crate::load::{Event, GuestModel, MaintenanceVia, Trace};

/// The user the workload driver acts as (its tasks show it, as a user's would).
pub const WORKLOAD_USER: &str = "workload@pve";

/// Times a deletion waits for its guest to stop or unlock before it gives up.
const DELETE_TRIES: u32 = 60;

/// The usage models in force.
#[derive(Debug, Clone, Default)]
pub struct LoadState {
    /// Simulated epoch seconds the trace's times count from (the simulation's start).
    pub start: f64,
    /// Seed of the models' noise.
    pub seed: u64,
    /// Models by VMID (a guest's model follows it wherever it runs).
    pub models: BTreeMap<u32, GuestModel>,
    /// The trace's events, by index (each scheduled at its time).
    pub events: Vec<Event>,
    /// The next whole minute to sample, epoch seconds.
    pub next_sample: f64,
}

impl World {
    /// Loads a trace's models and schedules its events (times from `start`); models for guests
    /// the world does not have are refused, naming the entry.
    pub(crate) fn load_trace(&mut self, trace: &Trace, start: f64) -> Result<(), (String, String)> {
        let models = trace.models_by_vmid();
        if let Some(vmid) = models.keys().find(|v| !self.guests.contains_key(v)) {
            return Err((
                format!("models.{vmid}"),
                format!("guest {vmid} is not in the scenario"),
            ));
        }
        self.load = LoadState {
            start,
            seed: trace.seed,
            models,
            events: trace.events.clone(),
            next_sample: self.load.next_sample,
        };
        for (index, e) in trace.events.iter().enumerate() {
            self.schedule(start + e.at, Action::Trace { index });
        }
        Ok(())
    }

    /// Applies trace event `index`.
    pub(crate) fn on_trace_event(&mut self, index: usize) {
        let Some(e) = self.load.events.get(index).cloned() else {
            return;
        };
        if let Some(c) = e.create {
            self.workload_create(c);
        } else if let Some(d) = e.delete {
            self.workload_delete(d.vmid, 0);
        } else if let Some(m) = e.maintenance {
            if self.nodes.contains_key(&m.node) {
                match m.via {
                    MaintenanceVia::Ha => self.set_maintenance(&m.node, m.enable),
                    MaintenanceVia::Note => self.set_maintenance_note(&m.node, m.enable),
                }
            } else {
                tracing::warn!(node = %m.node, "trace: maintenance of an unknown node ignored");
            }
        } else if let Some(m) = e.model {
            self.load.models.insert(m.vmid, m.model);
        }
    }

    /// Adds or removes the `flxp.maintenance` token of a node's notes.
    fn set_maintenance_note(&mut self, node: &str, on: bool) {
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        let kept: Vec<&str> = n
            .notes
            .lines()
            .filter(|l| l.trim() != "flxp.maintenance")
            .collect();
        let mut notes = kept.join("\n");
        if on {
            if !notes.is_empty() {
                notes.push('\n');
            }
            notes.push_str("flxp.maintenance");
        }
        n.notes = notes;
    }

    /// Creates and starts a VM as the workload user (`POST /nodes/{node}/qemu`, `start=1`).
    fn workload_create(&mut self, c: crate::load::CreateEvent) {
        let Some(vmid) = c.vmid.or_else(|| self.next_free_vmid()) else {
            tracing::warn!("trace: no free VMID for a new guest");
            return;
        };
        let node = c.node.clone().or_else(|| self.roomiest_node());
        let Some(node) = node else {
            tracing::warn!(vmid, "trace: no online node for a new guest");
            return;
        };
        let mut config = BTreeMap::new();
        config.insert(
            "name".to_string(),
            c.name.clone().unwrap_or(format!("vm-{vmid}")),
        );
        config.insert("cores".to_string(), c.cores.to_string());
        config.insert("memory".to_string(), c.memory.to_string());
        config.insert("net0".to_string(), "virtio,bridge=vmbr0".to_string());
        if let Some(t) = &c.tags {
            config.insert("tags".to_string(), t.clone());
        }
        if c.disk_gib > 0 {
            if let Some(st) = self.image_storage_on(&node) {
                config.insert("scsi0".to_string(), format!("{st}:{}", c.disk_gib));
            }
        }
        match self.create_guest(&node, vmid, config, true, None, false, WORKLOAD_USER) {
            Ok(_) => {
                if let Some(m) = c.model {
                    self.load.models.insert(vmid, m);
                }
            }
            Err(e) => tracing::warn!(vmid, %node, error = %e.message, "trace: create failed"),
        }
    }

    /// The online node with the most free memory (ties: by name).
    fn roomiest_node(&self) -> Option<String> {
        let table = self.node_stats_all();
        self.nodes
            .values()
            .filter(|n| n.online)
            .max_by_key(|n| {
                let used = table.get(&n.name).map_or(0, |s| s.mem);
                (
                    n.maxmem.saturating_sub(used),
                    std::cmp::Reverse(n.name.clone()),
                )
            })
            .map(|n| n.name.clone())
    }

    /// A storage for a new disk on `node`: shared with `images` first, else a local one.
    fn image_storage_on(&self, node: &str) -> Option<String> {
        let ok = |s: &&super::Storage| s.available_on(node) && s.has_content("images");
        self.storages
            .values()
            .filter(ok)
            .find(|s| s.shared)
            .or_else(|| self.storages.values().find(ok))
            .map(|s| s.id.clone())
    }

    /// Stops (if running) then deletes a guest as the workload user, retrying while it is
    /// locked or still stopping.
    pub(crate) fn workload_delete(&mut self, vmid: u32, tries: u32) {
        let Some(g) = self.guests.get(&vmid).cloned() else {
            return;
        };
        let retry = |w: &mut World| {
            if tries < DELETE_TRIES {
                let at = w.now + 5.0;
                w.schedule(
                    at,
                    Action::WorkloadDelete {
                        vmid,
                        tries: tries + 1,
                    },
                );
            } else {
                tracing::warn!(vmid, "trace: gave up deleting a guest");
            }
        };
        if g.lock().is_some() {
            return retry(self);
        }
        if g.running {
            if tries == 0 {
                if let Err(e) = self.power_request(
                    g.kind,
                    &g.node.clone(),
                    vmid,
                    PowerOp::Stop,
                    WORKLOAD_USER,
                    false,
                ) {
                    tracing::warn!(vmid, error = %e.message, "trace: stop failed");
                }
            }
            return retry(self);
        }
        if let Err(e) = self.destroy(g.kind, &g.node.clone(), vmid, true, WORKLOAD_USER) {
            tracing::warn!(vmid, error = %e.message, "trace: delete failed");
        }
    }

    /// Notes a guest that now exists (a create or clone task ended well).
    pub(crate) fn note_created(&mut self, task: usize, vmid: u32) {
        let user = self
            .tasks
            .get(task)
            .map(|t| t.user.clone())
            .unwrap_or_default();
        let node = self
            .guests
            .get(&vmid)
            .map(|g| g.node.clone())
            .unwrap_or_default();
        let time = self.now;
        self.records.lifecycle(LifecycleRecord {
            time,
            event: "created",
            vmid,
            node,
            user,
        });
    }

    /// Notes a guest deleted by `task` from `node`, and drops its model.
    pub(crate) fn note_deleted(&mut self, task: usize, vmid: u32, node: String) {
        let user = self
            .tasks
            .get(task)
            .map(|t| t.user.clone())
            .unwrap_or_default();
        let time = self.now;
        self.load.models.remove(&vmid);
        self.records.lifecycle(LifecycleRecord {
            time,
            event: "deleted",
            vmid,
            node,
            user,
        });
    }

    /// The sample of a simulated minute: statistics into the RRD archives, nodes into the
    /// records.
    pub(crate) fn sample_minute(&mut self) {
        let table = self.record_stats();
        let time = self.now.round() as i64;
        let mut running: BTreeMap<&str, u32> = BTreeMap::new();
        for g in self.guests.values().filter(|g| g.running) {
            *running.entry(g.node.as_str()).or_default() += 1;
        }
        let samples: Vec<NodeSample> = self
            .nodes
            .values()
            .filter_map(|n| {
                let s = table.get(&n.name)?;
                Some(NodeSample {
                    time,
                    node: n.name.clone(),
                    online: n.online,
                    cpu_demand: s.cpu_demand,
                    maxcpu: n.maxcpu,
                    mem: s.mem,
                    mem_demand: s.mem_demand,
                    maxmem: n.maxmem,
                    guests: running.get(n.name.as_str()).copied().unwrap_or(0),
                    psi_cpu_some: s.pressure.cpu_some,
                    psi_memory_some: s.pressure.memory_some,
                    psi_memory_full: s.pressure.memory_full,
                    psi_io_some: s.pressure.io_some,
                })
            })
            .collect();
        for s in samples {
            self.records.sample(s);
        }
    }
}
