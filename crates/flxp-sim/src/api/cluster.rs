//! `/version` and the `/cluster/*` endpoints outside HA: resources, status, options, nextid, tasks.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use flxp_pve::types::{ClusterStatusEntry, NextId, Version};

use super::p;
use crate::http::{Call, Data, Reply};
use crate::world::BulkRequest;
use crate::{ApiError, Sim};

pub(super) fn routes(r: Router<Sim>) -> Router<Sim> {
    r.route(&p("/version"), get(version))
        .route(&p("/cluster/resources"), get(resources))
        .route(&p("/cluster/status"), get(status))
        .route(&p("/cluster/options"), get(options))
        .route(&p("/cluster/nextid"), get(nextid))
        .route(&p("/cluster/tasks"), get(tasks))
        .route(
            &p("/cluster/bulk-action/guest/migrate"),
            axum::routing::post(bulk_migrate),
        )
}

/// The version answer of `/version` and `/nodes/{node}/version`.
pub(super) fn version_of(sim: &Sim) -> Version {
    let w = sim.world();
    Version {
        version: Some(w.settings.version.clone()),
        release: Some(w.settings.release()),
        repoid: Some("f1a9c0de".into()),
        console: None,
    }
}

async fn version(State(sim): State<Sim>) -> Reply {
    Data::of(&version_of(&sim))
}

/// `GET /cluster/resources`, generated from the world.
async fn resources(State(sim): State<Sim>, call: Call) -> Reply {
    let filter = call.params.text("type");
    let mut list = sim.world().resources(filter.as_deref());
    // A token limited to some privileges sees what they cover, as Proxmox filters this list
    // (guests need VM.Audit, storages Datastore.Audit or .AllocateSpace, pools Pool.Audit).
    if let Some(privs) = &call.principal.privs {
        let has = |p: &str| privs.contains(p);
        list.retain(|r| match r.kind.as_deref() {
            Some("qemu" | "lxc") => has("VM.Audit"),
            Some("storage") => has("Datastore.Audit") || has("Datastore.AllocateSpace"),
            Some("pool") => has("Pool.Audit"),
            _ => true,
        });
    }
    Data::of(&list)
}

/// `GET /cluster/status`: the cluster entry and one entry per node.
async fn status(State(sim): State<Sim>) -> Reply {
    let w = sim.world();
    let local = w.ha_master();
    let mut out = vec![ClusterStatusEntry {
        id: Some("cluster".into()),
        name: Some(w.settings.cluster_name.clone()),
        kind: Some("cluster".into()),
        nodes: Some(w.nodes.len() as u64),
        quorate: Some(w.quorate()),
        version: Some(w.nodes.len() as u64 + 1),
        ..ClusterStatusEntry::default()
    }];
    for n in w.nodes.values() {
        out.push(ClusterStatusEntry {
            id: Some(format!("node/{}", n.name)),
            name: Some(n.name.clone()),
            kind: Some("node".into()),
            ip: Some(n.ip.clone()),
            level: Some(n.level.clone()),
            local: Some(local.as_deref() == Some(n.name.as_str())),
            nodeid: Some(u64::from(n.nodeid)),
            online: Some(n.online),
            ..ClusterStatusEntry::default()
        });
    }
    Data::of(&out)
}

/// `GET /cluster/options`: the datacenter options of the scenario.
async fn options(State(sim): State<Sim>) -> Reply {
    Data::of(&sim.world().options)
}

/// `GET /cluster/nextid`: the lowest free VMID (as a string, as Proxmox sends it), or a check
/// that `vmid` is free. Not a reservation.
async fn nextid(State(sim): State<Sim>, call: Call) -> Reply {
    let w = sim.world();
    if let Some(vmid) = call.params.uint("vmid") {
        let vmid = u32::try_from(vmid).map_err(|_| ApiError::param("vmid", "value too large"))?;
        if w.guests.contains_key(&vmid) {
            return Err(ApiError::param("vmid", format!("VM {vmid} already exists")));
        }
        return Data::of(&NextId(vmid));
    }
    match w.next_free_vmid() {
        Some(id) => Data::of(&NextId(id)),
        None => Err(ApiError::die(format!(
            "unable to get any free VMID in range [{}, {}]",
            w.settings.nextid_lower,
            w.settings.nextid_upper - 1
        ))),
    }
}

/// `GET /cluster/tasks`: running tasks and recent history.
async fn tasks(State(sim): State<Sim>) -> Reply {
    Data::of(&sim.world().cluster_tasks())
}

/// `POST /cluster/bulk-action/guest/migrate`: migrate the listed guests (all guests without
/// `vms`) to `target`, `max-workers` at a time, under one `bulk-migrate` task.
async fn bulk_migrate(State(sim): State<Sim>, call: Call) -> Reply {
    let mut w = sim.world();
    let target = call.params.req("target")?;
    let listed: Vec<u32> = call
        .params
        .list("vms")
        .iter()
        .filter_map(|v| v.parse().ok())
        .collect();
    let vmids = if listed.is_empty() {
        w.guests.keys().copied().collect()
    } else {
        listed
    };
    let workers = call
        .params
        .uint("max-workers")
        .or(call.params.uint("maxworkers"))
        .unwrap_or(1);
    let node = w.ha_master().unwrap_or_else(|| target.clone());
    let upid = w.bulk_migrate(BulkRequest {
        node,
        kind: "bulk-migrate",
        vmids,
        target,
        online: call.params.is_set("online"),
        with_local_disks: call.params.is_set("with-local-disks"),
        workers: workers as usize,
        user: call.user(),
    })?;
    Data::of(&upid)
}
