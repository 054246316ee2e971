//! A cluster state the decisions work on: where each guest is and what each node carries.
//!
//! It starts as the snapshot says and changes only through `move_guest` and `add_guest`, so the
//! planner can try moves on a copy and every filter sees the state the move would create.

use serde::Serialize;

use crate::cluster::{Cluster, GuestIdx, NodeIdx};

/// What one node carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Usage {
    /// Used memory in bytes (reported node usage, adjusted by moves); never more than the node
    /// has when the node's report was over its total (see `mem_over`).
    pub mem: u64,
    /// Memory a node reported using beyond its total, adjusted by moves: not in `mem`, which
    /// stops at the total (the node counts as full). What leaves the node comes off this first
    /// and what arrives adds to it, so its load stays full until the excess has gone.
    pub mem_over: u64,
    /// Memory of running guests migrating away in flight: they are here until they land, so
    /// they take room here (see [`Usage::mem_held`]), but not in `mem`, the node's load, which
    /// is what the node carries once they have landed (their memory counts on their target).
    pub mem_leaving: u64,
    /// CPU cores in use.
    pub cpu: f64,
    /// Sum of `maxmem` of running guests (committed memory).
    pub committed_mem: u64,
    /// Sum of vCPUs of running guests.
    pub committed_cpus: f64,
    /// Running guests.
    pub guests: u32,
}

impl Usage {
    /// The memory the node carries, its reported excess included.
    pub fn mem_carried(&self) -> u64 {
        self.mem.saturating_add(self.mem_over)
    }

    /// The memory the node holds now, guests migrating away included: what anything more has
    /// to fit beside.
    pub fn mem_held(&self) -> u64 {
        self.mem.saturating_add(self.mem_leaving)
    }

    /// Takes `bytes` of used memory off the node: off its reported excess first.
    pub(crate) fn release_mem(&mut self, bytes: u64) {
        let over = bytes.min(self.mem_over);
        self.mem_over -= over;
        self.mem = self.mem.saturating_sub(bytes - over);
    }

    /// Adds `bytes` of used memory: to the excess of a node counted as full.
    pub(crate) fn take_mem(&mut self, bytes: u64) {
        if self.mem_over > 0 {
            self.mem_over = self.mem_over.saturating_add(bytes);
        } else {
            self.mem = self.mem.saturating_add(bytes);
        }
    }
}

/// Node usage and guest locations.
#[derive(Debug, Clone, PartialEq)]
pub struct State {
    usage: Vec<Usage>,
    location: Vec<NodeIdx>,
    /// Free bytes per storage, indexed like `Cluster::storages`, after the moves so far; empty
    /// when no guest has local disks (nothing to track, and a cheap clone). Signed and wide, so
    /// that trying a move that overfills a storage and taking it back restores the figure exactly.
    room: Vec<i128>,
}

impl State {
    /// The state as the snapshot reports it.
    ///
    /// A node's memory is its reported `mem` (which includes the host's own use); a node without
    /// a report counts the footprint of its running guests.
    pub fn new(cluster: &Cluster) -> Self {
        let mut usage: Vec<Usage> = cluster
            .nodes()
            .iter()
            .map(|n| Usage {
                cpu: n.cpu * n.maxcpu,
                ..Usage::default()
            })
            .collect();
        let mut guest_mem = vec![0u64; cluster.nodes().len()];
        let mut guest_cpu = vec![0f64; cluster.nodes().len()];
        for g in cluster.guests() {
            if !g.running {
                continue;
            }
            let u = &mut usage[g.node.get()];
            // Sums cannot overflow: `Cluster::from_snapshot` bounds the cluster's total.
            u.committed_mem += g.maxmem;
            u.committed_cpus += g.maxcpu;
            u.guests += 1;
            guest_mem[g.node.get()] += g.mem_footprint();
            guest_cpu[g.node.get()] += g.cpu_cores();
        }
        for (i, n) in cluster.nodes().iter().enumerate() {
            usage[i].mem = n.mem.unwrap_or(guest_mem[i]);
            usage[i].mem_over = n.mem_over;
            if n.cpu == 0.0 && n.mem.is_none() {
                usage[i].cpu = guest_cpu[i];
            }
        }
        // A migration in flight holds the guest on its source and fills its target until it
        // lands. Its memory and CPU load count where it lands: the target's report shows the part already
        // copied (`arrived`, read from the migration's log, 0 when unknown), so the rest counts
        // there too, never below what the target will carry once the guest has landed and never
        // that part twice; on its source it only takes room until then (`mem_leaving`), so what
        // a plan promises is what the nodes show once it has landed, and nothing is placed in
        // room it still holds.
        for g in cluster.guests().iter().filter(|g| g.running) {
            if let Some(to) = g.migrating_to() {
                let src = &mut usage[g.node.get()];
                src.release_mem(g.mem_footprint());
                src.mem_leaving = src.mem_leaving.saturating_add(g.mem_footprint());
                // Its CPU load goes with it too (CPU holds no room: nothing is refused for it).
                src.cpu = (src.cpu - g.cpu_cores()).max(0.0);
                let u = &mut usage[to.get()];
                u.take_mem(g.mem_incoming());
                u.cpu += g.cpu_cores();
                u.committed_mem = u.committed_mem.saturating_add(g.maxmem);
                u.committed_cpus += g.maxcpu;
                u.guests += 1;
            }
        }
        let mut room = Vec::new();
        if cluster.has_local_disks() {
            room = cluster
                .storages()
                .iter()
                .map(|s| i128::from(s.free()))
                .collect();
            // A copy in flight takes room on its target until it lands; the target's report may
            // show only part of it, so count all of it there (as its memory above).
            for g in cluster.guests() {
                if let Some(to) = g.migrating_to() {
                    take_room(cluster, &mut room, g, to);
                }
            }
        }
        Self {
            usage,
            location: cluster.guests().iter().map(|g| g.node).collect(),
            room,
        }
    }

    /// Free bytes of a storage (an index into `Cluster::storages`) after the moves so far.
    pub fn storage_free(&self, cluster: &Cluster, storage: usize) -> u64 {
        match self.room.get(storage) {
            Some(&r) => u64::try_from(r.max(0)).unwrap_or(u64::MAX),
            None => cluster.storages()[storage].free(),
        }
    }

    /// What a node carries.
    pub fn usage(&self, node: NodeIdx) -> &Usage {
        &self.usage[node.get()]
    }

    /// All nodes' usage, indexed like `Cluster::nodes`.
    pub fn usages(&self) -> &[Usage] {
        &self.usage
    }

    /// Where a guest is.
    pub fn location(&self, guest: GuestIdx) -> NodeIdx {
        self.location[guest.get()]
    }

    /// Moves a guest; a running guest takes its memory, CPU and commitments along.
    pub fn move_guest(&mut self, cluster: &Cluster, guest: GuestIdx, to: NodeIdx) {
        let from = self.location[guest.get()];
        if from == to {
            return;
        }
        self.location[guest.get()] = to;
        let g = cluster.guest(guest);
        if !g.local_disks.is_empty() && !self.room.is_empty() {
            give_room(cluster, &mut self.room, g, from);
            take_room(cluster, &mut self.room, g, to);
        }
        if !g.running {
            return;
        }
        let (mem, cpu) = (g.mem_footprint(), g.cpu_cores());
        let src = &mut self.usage[from.get()];
        src.release_mem(mem);
        src.cpu = (src.cpu - cpu).max(0.0);
        src.committed_mem = src.committed_mem.saturating_sub(g.maxmem);
        src.committed_cpus = (src.committed_cpus - g.maxcpu).max(0.0);
        src.guests = src.guests.saturating_sub(1);
        let dst = &mut self.usage[to.get()];
        dst.take_mem(mem);
        dst.cpu += cpu;
        dst.committed_mem += g.maxmem;
        dst.committed_cpus += g.maxcpu;
        dst.guests += 1;
    }

    /// Adds a new running guest's full size to a node (a placement decided but not yet visible).
    pub fn add_guest(&mut self, node: NodeIdx, mem: u64, cores: f64) {
        let u = &mut self.usage[node.get()];
        // Saturating: the caller's size is not bounded like the snapshot's figures are.
        u.take_mem(mem);
        u.cpu += cores;
        u.committed_mem = u.committed_mem.saturating_add(mem);
        u.committed_cpus += cores;
        u.guests += 1;
    }
}

/// Takes a guest's local disks from the same storages of `node`.
fn take_room(cluster: &Cluster, room: &mut [i128], g: &crate::cluster::Guest, node: NodeIdx) {
    for d in &g.local_disks {
        if let Some(i) = cluster.storage_on(node, &d.storage) {
            room[i] -= i128::from(d.bytes);
        }
    }
}

/// Gives a guest's local disks back to the same storages of `node` (it left).
fn give_room(cluster: &Cluster, room: &mut [i128], g: &crate::cluster::Guest, node: NodeIdx) {
    for d in &g.local_disks {
        if let Some(i) = cluster.storage_on(node, &d.storage) {
            room[i] += i128::from(d.bytes);
        }
    }
}
