//! The control endpoint under `/_sim` (outside `/api2`, same authentication): change the world
//! while it runs (guest usage, node offline/online, HA maintenance, faults, simulated time) and
//! read all of it. Bodies and answers are JSON; answers use the `{"data": ...}` envelope.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::http::{Data, Reply};
use crate::scenario::FaultSpec;
use crate::world::{Config, Pressure, World};
use crate::{ApiError, Sim};

/// Adds the `/_sim` routes.
pub fn routes(r: Router<Sim>) -> Router<Sim> {
    r.route("/_sim/state", get(state))
        .route("/_sim/snapshot", get(snapshot))
        .route("/_sim/guests/{vmid}/usage", post(usage))
        .route("/_sim/nodes/{node}/status", post(node_status))
        .route("/_sim/nodes/{node}/maintenance", post(maintenance))
        .route(
            "/_sim/faults",
            get(faults).put(set_faults).delete(clear_faults),
        )
        .route("/_sim/advance", post(advance))
        .route("/_sim/clock", get(clock).post(set_clock))
        .route("/_sim/records", get(records))
        .route("/_sim/guests/{vmid}/model", post(set_model))
}

fn body<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, ApiError> {
    let text = if bytes.is_empty() { &b"{}"[..] } else { bytes };
    let de = &mut serde_json::Deserializer::from_slice(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        ApiError::new(
            400,
            format!("invalid control request body at {path}: {}", e.into_inner()),
        )
    })
}

/// `GET /_sim/state`: everything, for tests and curious users.
async fn state(State(sim): State<Sim>) -> Reply {
    Ok(Data::value(state_json(&sim.world())))
}

/// The whole world as JSON.
pub fn state_json(w: &World) -> Value {
    let table = w.node_stats_all();
    let cpu_of = |node: &str| table.get(node).map_or(Default::default(), |s| s.load());
    let nodes: Vec<Value> = w
        .nodes
        .values()
        .filter_map(|n| table.get(&n.name).map(|s| (n, s)))
        .map(|(n, s)| {
            json!({
                "node": n.name, "online": n.online, "maintenance": n.ha_maintenance,
                "maxcpu": n.maxcpu, "maxmem": n.maxmem, "cpu": s.cpu, "mem": s.mem,
                "base_cpu": n.base_cpu, "base_mem": n.base_mem, "notes": n.notes,
                "hastate": w.ha_node_state(&n.name),
                "guests": w.guests.values().filter(|g| g.node == n.name).map(|g| g.vmid).collect::<Vec<_>>(),
            })
        })
        .collect();
    let guests: Vec<Value> = w
        .guests
        .values()
        .map(|g| {
            let s = w.guest_stats_in(g, cpu_of(&g.node));
            json!({
                "vmid": g.vmid, "type": g.kind.as_str(), "node": g.node, "name": g.name(),
                "running": g.running, "lock": g.lock(), "tags": g.tags(), "template": g.is_template(),
                "cpu": w.demand(g).cpu, "mem": w.demand(g).mem, "memhost": s.memhost, "maxmem": s.maxmem,
                "maxcpu": s.maxcpu, "pool": g.pool, "config": Config::shown(g.config.values.clone()),
                "pending": Config::shown(g.config.pending.clone()), "digest": g.config.digest(),
            })
        })
        .collect();
    let migrations: Vec<Value> = w
        .reservations
        .iter()
        .map(|(vmid, (target, bytes))| {
            json!({"vmid": vmid, "target": target, "reserved": bytes, "arrived": w.arrived(*vmid, *bytes)})
        })
        .collect();
    let running: Vec<Value> = w
        .tasks
        .all()
        .iter()
        .filter(|t| t.is_running())
        .map(|t| json!({"upid": t.upid, "type": t.kind, "id": t.id, "node": t.node}))
        .collect();
    json!({
        "time": w.now, "cluster_name": w.settings.cluster_name, "nodes": nodes, "guests": guests,
        "migrations": migrations, "running_tasks": running, "faults": w.faults.spec(),
        "ha": {"status": w.ha_status_current(), "rules": w.ha_rules_view(None, None)},
        "next_event": w.next_event_at(),
    })
}

/// `GET /_sim/snapshot`: the world as a Contract 1 snapshot.
async fn snapshot(State(sim): State<Sim>) -> Reply {
    Data::of(&sim.world().snapshot())
}

/// Body of `POST /_sim/guests/{vmid}/usage`; absent fields stay as they are.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UsageBody {
    cpu: Option<f64>,
    mem: Option<u64>,
    memhost: Option<u64>,
    netin_rate: Option<f64>,
    netout_rate: Option<f64>,
    diskread_rate: Option<f64>,
    diskwrite_rate: Option<f64>,
    pressure: Option<Pressure>,
}

/// `POST /_sim/guests/{vmid}/usage`.
async fn usage(State(sim): State<Sim>, Path(vmid): Path<u32>, bytes: Bytes) -> Reply {
    let b: UsageBody = body(&bytes)?;
    if let Some(cpu) = b.cpu {
        if !(0.0..=1.0).contains(&cpu) {
            return Err(ApiError::param(
                "cpu",
                format!("must be a fraction 0..1 of the guest's vCPUs, got {cpu}"),
            ));
        }
    }
    let mut w = sim.world();
    let g = w
        .guests
        .get_mut(&vmid)
        .ok_or_else(|| ApiError::die(format!("no such guest {vmid}")))?;
    if let Some(v) = b.cpu {
        g.usage.cpu = v;
    }
    if let Some(v) = b.mem {
        g.usage.mem = v;
    }
    if let Some(v) = b.memhost {
        g.usage.memhost = Some(v);
    }
    if let Some(v) = b.netin_rate {
        g.usage.netin_rate = v;
    }
    if let Some(v) = b.netout_rate {
        g.usage.netout_rate = v;
    }
    if let Some(v) = b.diskread_rate {
        g.usage.diskread_rate = v;
    }
    if let Some(v) = b.diskwrite_rate {
        g.usage.diskwrite_rate = v;
    }
    if let Some(v) = b.pressure {
        g.usage.pressure = v;
    }
    w.record();
    Ok(Data::null())
}

/// Body of `POST /_sim/nodes/{node}/status`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeStatusBody {
    /// `online` or `offline`.
    status: String,
}

/// `POST /_sim/nodes/{node}/status`: `{"status": "offline"}` or `{"status": "online"}`.
async fn node_status(State(sim): State<Sim>, Path(node): Path<String>, bytes: Bytes) -> Reply {
    let b: NodeStatusBody = body(&bytes)?;
    let online = match b.status.as_str() {
        "online" => true,
        "offline" => false,
        other => {
            return Err(ApiError::param(
                "status",
                format!("must be online or offline, got '{other}'"),
            ));
        }
    };
    change_node(&sim, &node, |w| w.set_online(&node, online))
}

/// Applies `change` to the world when `node` exists, and records the new state.
fn change_node(sim: &Sim, node: &str, change: impl FnOnce(&mut World)) -> Reply {
    let mut w = sim.world();
    w.node(node)?;
    change(&mut w);
    w.record();
    Ok(Data::null())
}

/// Body of `POST /_sim/nodes/{node}/maintenance`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MaintenanceBody {
    enable: bool,
}

/// `POST /_sim/nodes/{node}/maintenance`: `{"enable": true}` as `ha-manager crm-command
/// node-maintenance enable <node>` would.
async fn maintenance(State(sim): State<Sim>, Path(node): Path<String>, bytes: Bytes) -> Reply {
    let b: MaintenanceBody = body(&bytes)?;
    change_node(&sim, &node, |w| w.set_maintenance(&node, b.enable))
}

/// `GET /_sim/faults`.
async fn faults(State(sim): State<Sim>) -> Reply {
    Data::of(sim.world().faults.spec())
}

/// `PUT /_sim/faults`: replaces the faults in force.
async fn set_faults(State(sim): State<Sim>, bytes: Bytes) -> Reply {
    let spec: FaultSpec = body(&bytes)?;
    crate::faults::check(&spec, "faults").map_err(|e| ApiError::new(400, e.to_string()))?;
    sim.world().faults.set(spec);
    Ok(Data::null())
}

/// `DELETE /_sim/faults`: no more faults.
async fn clear_faults(State(sim): State<Sim>) -> Reply {
    sim.world().faults.set(FaultSpec::default());
    Ok(Data::null())
}

/// Body of `POST /_sim/advance`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AdvanceBody {
    seconds: f64,
}

/// Longest jump of one `POST /_sim/advance`, seconds.
const MAX_ADVANCE_SECS: f64 = 7.0 * 86_400.0;

/// `POST /_sim/advance`: moves simulated time forward (migrations land, HA acts).
async fn advance(State(sim): State<Sim>, bytes: Bytes) -> Reply {
    let b: AdvanceBody = body(&bytes)?;
    if !(b.seconds.is_finite() && b.seconds >= 0.0) {
        return Err(ApiError::param("seconds", "must be a non-negative number"));
    }
    // Every simulated minute is sampled on the way (records, RRD, the trace's events): a jump
    // of a billion seconds would hold the world for hours. A week per call; call again for more.
    if b.seconds > MAX_ADVANCE_SECS {
        return Err(ApiError::param(
            "seconds",
            format!(
                "at most {MAX_ADVANCE_SECS} (a week) per call, got {}",
                b.seconds
            ),
        ));
    }
    sim.clock().advance(b.seconds);
    let w = sim.world();
    Ok(Data::value(json!({"time": w.now})))
}

/// Body of `POST /_sim/clock`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClockBody {
    time_scale: f64,
}

/// Fastest scale `POST /_sim/clock` accepts: a simulated year per real minute.
const MAX_TIME_SCALE: f64 = 525_600.0;

/// `GET /_sim/clock`: simulated time and how fast it runs.
async fn clock(State(sim): State<Sim>) -> Reply {
    let clock = sim.clock();
    Ok(Data::value(
        json!({"time": clock.now(), "time_scale": clock.scale()}),
    ))
}

/// `POST /_sim/clock`: runs simulated time at a new scale from now on (it goes on from where it
/// is); a benchmark slows it while a one-shot contender computes its round.
async fn set_clock(State(sim): State<Sim>, bytes: Bytes) -> Reply {
    let b: ClockBody = body(&bytes)?;
    if !(b.time_scale.is_finite() && b.time_scale > 0.0 && b.time_scale <= MAX_TIME_SCALE) {
        return Err(ApiError::param(
            "time_scale",
            format!(
                "must be a number above 0 and at most {MAX_TIME_SCALE}, got {}",
                b.time_scale
            ),
        ));
    }
    let clock = sim.clock();
    clock.set_scale(b.time_scale);
    Ok(Data::value(
        json!({"time": clock.now(), "time_scale": clock.scale()}),
    ))
}

/// Query of `GET /_sim/records`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordsQuery {
    /// Simulated epoch seconds; default everything.
    since: Option<f64>,
}

/// `GET /_sim/records?since=T`: what happened from simulated time `T` on (migrations, node
/// samples per minute, creations and deletions, API requests).
async fn records(
    State(sim): State<Sim>,
    axum::extract::Query(q): axum::extract::Query<RecordsQuery>,
) -> Reply {
    let since = q.since.unwrap_or(f64::NEG_INFINITY);
    let w = sim.world();
    let mut v = w.records.since(since);
    v["time"] = json!(w.now);
    Ok(Data::value(v))
}

/// `POST /_sim/guests/{vmid}/model`: replaces a guest's usage model (`{"cpu": {...}, "mem":
/// {...}}`, as in a trace; `{}` removes it).
async fn set_model(State(sim): State<Sim>, Path(vmid): Path<u32>, bytes: Bytes) -> Reply {
    let model: crate::load::GuestModel = body(&bytes)?;
    crate::load::model::check_model(&model).map_err(|(path, msg)| ApiError::param(&path, msg))?;
    let mut w = sim.world();
    if !w.guests.contains_key(&vmid) {
        return Err(ApiError::die(format!("no such guest {vmid}")));
    }
    if model.cpu.is_none() && model.mem.is_none() {
        w.load.models.remove(&vmid);
    } else {
        w.load.models.insert(vmid, model);
    }
    w.record();
    Ok(Data::null())
}
