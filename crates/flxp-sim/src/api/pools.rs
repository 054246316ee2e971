//! `/pools` and `/pools/{poolid}`: pools and their members.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use flxp_core::snapshot::raw::Resource;
use flxp_pve::types::{Pool, PoolListEntry};

use super::p;
use crate::http::{Call, Data, Reply};
use crate::world::World;
use crate::{ApiError, Sim};

pub(super) fn routes(r: Router<Sim>) -> Router<Sim> {
    r.route(&p("/pools"), get(list))
        .route(&p("/pools/{poolid}"), get(one))
}

fn members(w: &World, pool: &str, kind: Option<&str>) -> Vec<Resource> {
    let table = w.node_stats_all();
    w.guests
        .values()
        .filter(|g| g.pool.as_deref() == Some(pool))
        .filter(|g| kind.is_none_or(|k| k == g.kind.as_str()))
        .map(|g| {
            w.guest_resource_in(
                g,
                table.get(&g.node).map_or(Default::default(), |s| s.load()),
            )
        })
        .collect()
}

fn no_pool(pool: &str) -> ApiError {
    ApiError::die(format!("pool '{pool}' does not exist"))
}

/// `GET /pools` (all pools, or one with its members when `poolid` is given).
async fn list(State(sim): State<Sim>, call: Call) -> Reply {
    let w = sim.world();
    let kind = call.params.text("type");
    if let Some(id) = call.params.text("poolid") {
        let pool = w.pools.get(&id).ok_or_else(|| no_pool(&id))?;
        return Data::of(&vec![PoolListEntry {
            poolid: id.clone(),
            comment: pool.comment.clone(),
            members: members(&w, &id, kind.as_deref()),
        }]);
    }
    let out: Vec<PoolListEntry> = w
        .pools
        .iter()
        .map(|(id, pool)| PoolListEntry {
            poolid: id.clone(),
            comment: pool.comment.clone(),
            members: Vec::new(),
        })
        .collect();
    Data::of(&out)
}

/// `GET /pools/{poolid}` (deprecated in PVE 8, still served).
async fn one(State(sim): State<Sim>, call: Call) -> Reply {
    let w = sim.world();
    let id = call.params.req("poolid")?;
    let pool = w.pools.get(&id).ok_or_else(|| no_pool(&id))?;
    let kind = call.params.text("type");
    let mut v = serde_json::to_value(Pool {
        comment: pool.comment.clone(),
        members: members(&w, &id, kind.as_deref()),
    })
    .map_err(|e| ApiError::die(e.to_string()))?;
    // Proxmox always sends `members`, empty or not.
    if let Some(o) = v.as_object_mut() {
        o.entry("members").or_insert_with(|| serde_json::json!([]));
    }
    Ok(Data::value(v))
}
