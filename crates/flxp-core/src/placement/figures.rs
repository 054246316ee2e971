//! The figures a request carries, from the model and the state being judged.

use crate::cluster::{Cluster, GuestIdx, NodeIdx};
use crate::placement::{PlacementOptions, PlacementRequest};
use crate::state::State;

use crate::plugin::protocol::{GuestFigures, PluginNodeFigures};

/// A node's figures in a state.
pub fn node_figures(
    cluster: &Cluster,
    state: &State,
    options: &PlacementOptions,
    idx: NodeIdx,
) -> PluginNodeFigures {
    let n = cluster.node(idx);
    let u = state.usage(idx);
    PluginNodeFigures {
        name: n.name.clone(),
        status: n.status.as_str().to_owned(),
        maintenance: n.in_maintenance(),
        memory_total: n.maxmem,
        memory_used: u.mem_held(),
        memory_available: n
            .maxmem
            .saturating_sub(u.mem_held())
            .saturating_sub(options.reserve_for(n)),
        memory_committed: u.committed_mem,
        cpus: n.maxcpu,
        cpu_used: u.cpu,
        vcpus_committed: u.committed_cpus,
        guests: u.guests,
        labels: n.labels.iter().cloned().collect(),
    }
}

/// An existing guest's figures, where the state has it.
pub fn guest_figures(cluster: &Cluster, state: &State, idx: GuestIdx) -> GuestFigures {
    let g = cluster.guest(idx);
    GuestFigures {
        vmid: Some(g.vmid),
        name: Some(g.name.clone()),
        kind: g.kind.as_str().to_owned(),
        node: Some(cluster.node(state.location(idx)).name.clone()),
        running: g.running,
        memory: g.mem_footprint(),
        cores: g.maxcpu,
        cpu: g.cpu_cores(),
        tags: g.tags.clone(),
    }
}

/// A VM to be created, from its request.
pub fn new_vm_figures(request: &PlacementRequest) -> GuestFigures {
    GuestFigures {
        vmid: None,
        name: None,
        kind: "qemu".into(),
        node: None,
        running: true,
        memory: request.memory,
        cores: request.cores,
        cpu: 0.0,
        tags: request
            .tags
            .iter()
            .flat_map(|t| crate::cluster::split_tags(t))
            .collect(),
    }
}
