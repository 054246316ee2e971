//! What nodes and guests use right now, derived from the world: a node's usage is its base usage
//! plus the running guests on it (plus what incoming migrations have copied so far, while their
//! full size stays reserved); pressure rises
//! with load above a threshold on top of each entity's base pressure, and with demand beyond
//! capacity (an overcommitted node's guests get less CPU than they ask for, the shortfall shows
//! as CPU pressure; memory beyond the node's as memory and I/O pressure).

use std::collections::BTreeMap;

use super::{Guest, GuestKind, Pressure, World};

/// What the running guests of one node add up to.
#[derive(Debug, Default, Clone, Copy)]
struct Acc {
    cores: f64,
    mem: u64,
    netin: f64,
    netout: f64,
}

impl Acc {
    fn add(&mut self, w: &World, g: &Guest, host_cpus: u32) {
        let d = w.demand(g);
        self.cores += d.cpu * g.maxcpu(host_cpus);
        self.mem = self.mem.saturating_add(d.host_mem);
        self.netin += g.usage.netin_rate;
        self.netout += g.usage.netout_rate;
    }
}

/// A node's current statistics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeStats {
    /// CPU load, fraction of all its CPUs (0..1).
    pub cpu: f64,
    /// Busy cores (load average proxy).
    pub used_cores: f64,
    /// Used memory, bytes (total − available).
    pub mem: u64,
    /// Network receive and send rates of its guests, bytes per second.
    pub netin: f64,
    /// See `netin`.
    pub netout: f64,
    /// Current pressure.
    pub pressure: Pressure,
    /// Cores asked for by the base load and the running guests (may exceed `maxcpu`).
    pub cpu_demand: f64,
    /// Memory asked for, bytes (may exceed `maxmem`; `mem` is capped there).
    pub mem_demand: u64,
    /// Memory asked for with every incoming migration at its full size, bytes: what a further
    /// migration or start must fit beside.
    pub mem_committed: u64,
}

impl NodeStats {
    /// What a guest on this node sees of its load.
    pub fn load(&self) -> NodeLoad {
        let over = if self.cpu_demand > self.used_cores && self.cpu_demand > 0.0 {
            (self.cpu_demand - self.used_cores) / self.cpu_demand
        } else {
            0.0
        };
        NodeLoad {
            cpu: self.cpu,
            unserved: over,
        }
    }
}

/// A node's load as its guests feel it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NodeLoad {
    /// CPU load, fraction of the node's CPUs.
    pub cpu: f64,
    /// Share of the CPU demand the node cannot serve (0 unless overcommitted): every guest gets
    /// `1 - unserved` of what it asks for.
    pub unserved: f64,
}

/// What a guest asks for right now (its model's figures, or the fixed ones).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Demand {
    /// CPU, fraction of its vCPUs.
    pub cpu: f64,
    /// Guest-reported memory, bytes.
    pub mem: u64,
    /// Host memory, bytes.
    pub host_mem: u64,
}

/// A guest's current statistics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GuestStats {
    /// CPU load, fraction of its vCPUs.
    pub cpu: f64,
    /// vCPUs.
    pub maxcpu: f64,
    /// Guest-reported memory use, bytes.
    pub mem: u64,
    /// Host memory, bytes.
    pub memhost: u64,
    /// Configured memory, bytes.
    pub maxmem: u64,
    /// Used root fs (lxc), bytes.
    pub disk: u64,
    /// Boot disk size, bytes.
    pub maxdisk: u64,
    /// Counters since start, bytes.
    pub netin: u64,
    /// See `netin`.
    pub netout: u64,
    /// See `netin`.
    pub diskread: u64,
    /// See `netin`.
    pub diskwrite: u64,
    /// Seconds since start.
    pub uptime: u64,
    /// Current pressure.
    pub pressure: Pressure,
}

/// Share of `demand` beyond `capacity` (0 when it fits).
fn excess(demand: f64, capacity: f64) -> f64 {
    if demand > capacity && demand > 0.0 {
        (demand - capacity) / demand
    } else {
        0.0
    }
}

/// Pressure added by load above `threshold` (0 below it, 50 % at full load).
fn load_term(load: f64, threshold: f64) -> f64 {
    if load > threshold {
        ((load - threshold) / (1.0 - threshold)).min(1.0) * 50.0
    } else {
        0.0
    }
}

impl World {
    /// The statistics of node `name` (zeros for an unknown node). Costs one pass over the
    /// guests; views of many entities use [`World::node_stats_all`] instead.
    pub fn node_stats(&self, name: &str) -> NodeStats {
        let mut acc = Acc::default();
        for g in self.guests.values().filter(|g| g.node == name && g.running) {
            acc.add(self, g, self.nodes.get(name).map(|n| n.maxcpu).unwrap_or(1));
        }
        self.finish_node_stats(name, acc)
    }

    /// The statistics of every node, in one pass over the guests.
    pub fn node_stats_all(&self) -> BTreeMap<String, NodeStats> {
        let mut accs: BTreeMap<&str, Acc> = BTreeMap::new();
        for g in self.guests.values().filter(|g| g.running) {
            let host_cpus = self.nodes.get(&g.node).map(|n| n.maxcpu).unwrap_or(1);
            accs.entry(g.node.as_str())
                .or_default()
                .add(self, g, host_cpus);
        }
        self.nodes
            .keys()
            .map(|n| {
                (
                    n.clone(),
                    self.finish_node_stats(n, accs.remove(n.as_str()).unwrap_or_default()),
                )
            })
            .collect()
    }

    fn finish_node_stats(&self, name: &str, acc: Acc) -> NodeStats {
        let Some(node) = self.nodes.get(name) else {
            return NodeStats {
                cpu: 0.0,
                used_cores: 0.0,
                mem: 0,
                netin: 0.0,
                netout: 0.0,
                pressure: Pressure::default(),
                cpu_demand: 0.0,
                mem_demand: 0,
                mem_committed: 0,
            };
        };
        let cores = node.base_cpu + acc.cores;
        // Incoming migrations: the memory arrived so far is in use; all of it is committed.
        let mut mem = node.base_mem.saturating_add(acc.mem);
        let mut mem_committed = mem;
        for (vmid, (target, bytes)) in &self.reservations {
            if target == name {
                mem = mem.saturating_add(self.arrived(*vmid, *bytes));
                mem_committed = mem_committed.saturating_add(*bytes);
            }
        }
        let maxcpu = f64::from(node.maxcpu.max(1));
        let cpu = (cores / maxcpu).clamp(0.0, 1.0);
        let mem_demand = mem;
        let mem = mem.min(node.maxmem);
        let mem_frac = if node.maxmem > 0 {
            mem as f64 / node.maxmem as f64
        } else {
            0.0
        };
        // Shares of demand the node cannot serve: they stall tasks, as PSI measures.
        let cpu_over = excess(cores, maxcpu);
        let mem_over = excess(mem_demand as f64, node.maxmem as f64);
        let base = node.pressure;
        let pressure = Pressure {
            cpu_some: (base.cpu_some + load_term(cpu, 0.8) * 0.4 + 100.0 * cpu_over).min(100.0),
            cpu_full: 0.0,
            io_some: (base.io_some + 50.0 * mem_over).min(100.0),
            io_full: (base.io_full + 25.0 * mem_over).min(100.0),
            memory_some: (base.memory_some + load_term(mem_frac, 0.9) + 100.0 * mem_over)
                .min(100.0),
            memory_full: (base.memory_full + load_term(mem_frac, 0.95) / 2.0 + 50.0 * mem_over)
                .min(100.0),
        };
        NodeStats {
            cpu,
            used_cores: cores.min(maxcpu),
            mem,
            netin: acc.netin,
            netout: acc.netout,
            pressure,
            cpu_demand: cores,
            mem_demand,
            mem_committed,
        }
    }

    /// Free memory of node `name`, bytes (0 for an unknown node): what is left beside its use and
    /// every incoming migration at its full size.
    pub fn free_mem(&self, name: &str) -> u64 {
        let Some(node) = self.nodes.get(name) else {
            return 0;
        };
        node.maxmem
            .saturating_sub(self.node_stats(name).mem_committed)
    }

    /// The statistics of a guest (one pass over the guests for its node's load).
    pub fn guest_stats(&self, g: &Guest) -> GuestStats {
        let node = if g.running {
            self.node_stats(&g.node).load()
        } else {
            NodeLoad::default()
        };
        self.guest_stats_in(g, node)
    }

    /// What a guest asks for now: its usage model at the world's time, else its fixed figures.
    pub fn demand(&self, g: &Guest) -> Demand {
        let model = self.load.models.get(&g.vmid);
        let at = |s: &crate::load::Signal, r| {
            s.value(self.load.seed, g.vmid, r, self.load.start, self.now)
        };
        let cpu = model
            .and_then(|m| m.cpu.as_ref())
            .map_or(g.usage.cpu, |s| at(s, crate::load::model::Resource::Cpu));
        match model.and_then(|m| m.mem.as_ref()) {
            Some(s) => {
                let mem = (at(s, crate::load::model::Resource::Mem) * g.maxmem() as f64) as u64;
                Demand {
                    cpu,
                    mem,
                    host_mem: mem,
                }
            }
            None => Demand {
                cpu,
                mem: g.usage.mem,
                host_mem: g.host_mem(),
            },
        }
    }

    /// The statistics of a guest whose node is loaded as `node` says.
    pub fn guest_stats_in(&self, g: &Guest, node: NodeLoad) -> GuestStats {
        let host_cpus = self.nodes.get(&g.node).map(|n| n.maxcpu).unwrap_or(1);
        let uptime = g.uptime(self.now);
        let counter = |rate: f64| (rate * uptime as f64) as u64;
        let d = self.demand(g);
        let node_cpu_term = if g.running {
            load_term(node.cpu, 0.8)
        } else {
            0.0
        };
        let base = g.usage.pressure;
        let pressure = if g.running {
            Pressure {
                cpu_some: (base.cpu_some
                    + node_cpu_term
                    + load_term(d.cpu, 0.9) / 2.0
                    + 100.0 * node.unserved)
                    .min(100.0),
                cpu_full: (base.cpu_full + node_cpu_term / 2.0 + 50.0 * node.unserved).min(100.0),
                ..base
            }
        } else {
            Pressure::default()
        };
        GuestStats {
            cpu: if g.running {
                d.cpu * (1.0 - node.unserved)
            } else {
                0.0
            },
            maxcpu: g.maxcpu(host_cpus),
            mem: if g.running { d.mem } else { 0 },
            memhost: d.host_mem,
            maxmem: g.maxmem(),
            disk: match g.kind {
                GuestKind::Lxc => g.usage.disk,
                GuestKind::Qemu => 0,
            },
            maxdisk: g.maxdisk(),
            netin: counter(g.usage.netin_rate),
            netout: counter(g.usage.netout_rate),
            diskread: counter(g.usage.diskread_rate),
            diskwrite: counter(g.usage.diskwrite_rate),
            uptime,
            pressure,
        }
    }

    /// Node RRD values in [`super::rrd::NODE_FIELDS`] order (NaN while offline).
    pub(crate) fn node_rrd_values(&self, name: &str, s: &NodeStats) -> Vec<f64> {
        let Some(node) = self.nodes.get(name).filter(|n| n.online) else {
            return vec![f64::NAN; super::rrd::NODE_FIELDS.len()];
        };
        vec![
            // The load average counts tasks waiting for a CPU too: demand, not what is served.
            s.cpu_demand,
            f64::from(node.maxcpu),
            s.cpu,
            0.002,
            node.maxmem as f64,
            s.mem as f64,
            node.swap_total as f64,
            node.swap_used as f64,
            node.maxdisk as f64,
            node.disk as f64,
            s.netin,
            s.netout,
            node.maxmem.saturating_sub(s.mem) as f64,
            0.0,
            s.pressure.cpu_some,
            s.pressure.io_some,
            s.pressure.io_full,
            s.pressure.memory_some,
            s.pressure.memory_full,
        ]
    }

    /// Guest RRD values in [`super::rrd::GUEST_FIELDS`] order (NaN while its node is offline).
    pub(crate) fn guest_rrd_values(&self, g: &Guest, node: NodeLoad) -> Vec<f64> {
        if !self.nodes.get(&g.node).is_some_and(|n| n.online) {
            return vec![f64::NAN; super::rrd::GUEST_FIELDS.len()];
        }
        let s = self.guest_stats_in(g, node);
        let rate = |r: f64| if g.running { r } else { 0.0 };
        vec![
            s.maxcpu,
            s.cpu,
            s.maxmem as f64,
            s.mem as f64,
            s.maxdisk as f64,
            s.disk as f64,
            rate(g.usage.netin_rate),
            rate(g.usage.netout_rate),
            rate(g.usage.diskread_rate),
            rate(g.usage.diskwrite_rate),
            match g.kind {
                GuestKind::Qemu => s.memhost as f64,
                GuestKind::Lxc => f64::NAN,
            },
            s.pressure.cpu_some,
            match g.kind {
                GuestKind::Qemu => s.pressure.cpu_full,
                GuestKind::Lxc => f64::NAN,
            },
            s.pressure.io_some,
            s.pressure.io_full,
            s.pressure.memory_some,
            s.pressure.memory_full,
        ]
    }
}
