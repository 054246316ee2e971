//! The qemu and lxc endpoints of a node: lists, config read and write, status and power, rrddata,
//! migration, clone, create, disk resize and delete. One handler set serves both kinds where Proxmox's
//! behaviour is shared.

use std::collections::BTreeMap;

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post, put};
use flxp_pve::types::{
    CloneParams, CreateParams, DeleteParams, GuestConfig, GuestStatusCurrent, LxcMigrateParams,
    QemuMigrateParams, ResizeParams,
};
use serde_json::{Value, json};

use super::p;
use crate::http::{Call, Data, Reply};
use crate::schema::{ApiSchema, scalar_text};
use crate::tags::split_list;
use crate::world::{
    CloneRequest, Config, ConfigChange, GUEST_FIELDS, GuestKind, MigrateRequest, PowerOp,
    ResizeRequest, Timeframe,
};
use crate::{ApiError, Sim};

/// Binds a kind-taking handler to one guest kind.
macro_rules! kind {
    ($f:ident, $k:expr) => {
        move |State(sim): State<Sim>, call: Call| async move { $f($k, &sim, call) }
    };
}

macro_rules! op {
    ($k:expr, $op:expr) => {
        move |State(sim): State<Sim>, call: Call| async move { power($k, $op, &sim, call) }
    };
}

pub(super) fn routes(r: Router<Sim>) -> Router<Sim> {
    use GuestKind::{Lxc, Qemu};
    let r = r
        .route(
            &p("/nodes/{node}/qemu"),
            get(kind!(list, Qemu)).post(create),
        )
        .route(&p("/nodes/{node}/lxc"), get(kind!(list, Lxc)))
        .route(
            &p("/nodes/{node}/qemu/{vmid}/config"),
            get(kind!(config, Qemu))
                .put(kind!(set_config, Qemu))
                .post(kind!(set_config_async, Qemu)),
        )
        .route(
            &p("/nodes/{node}/lxc/{vmid}/config"),
            get(kind!(config, Lxc)).put(kind!(set_config, Lxc)),
        )
        .route(&p("/nodes/{node}/qemu/{vmid}/clone"), post(clone))
        .route(&p("/nodes/{node}/qemu/{vmid}/resize"), put(resize));
    [Qemu, Lxc].into_iter().fold(r, guest_routes)
}

/// The routes below `/nodes/{node}/{qemu|lxc}/{vmid}` that both kinds serve alike.
fn guest_routes(r: Router<Sim>, kind: GuestKind) -> Router<Sim> {
    let at = |tail: &str| p(&format!("/nodes/{{node}}/{}/{{vmid}}{tail}", kind.as_str()));
    let r = r
        .route(
            &at(""),
            get(kind!(index, kind)).delete(kind!(destroy, kind)),
        )
        .route(&at("/status/current"), get(kind!(current, kind)))
        .route(&at("/rrddata"), get(kind!(rrddata, kind)))
        .route(
            &at("/migrate"),
            get(kind!(precondition, kind)).post(kind!(migrate, kind)),
        )
        .route(&at("/status"), get(kind!(status_index, kind)));
    [
        ("start", PowerOp::Start),
        ("stop", PowerOp::Stop),
        ("shutdown", PowerOp::Shutdown),
    ]
    .into_iter()
    .fold(r, |r, (name, op)| {
        r.route(&at(&format!("/status/{name}")), post(op!(kind, op)))
    })
}

/// `GET /nodes/{node}/{qemu|lxc}`.
fn list(kind: GuestKind, sim: &Sim, call: Call) -> Reply {
    let w = sim.world();
    let node = call.params.node()?;
    w.node(&node)?;
    let node_load = w.node_stats(&node).load();
    let out: Vec<_> = w
        .guests
        .values()
        .filter(|g| g.kind == kind && g.node == node)
        .map(|g| w.guest_list_entry_in(g, node_load))
        .collect();
    Data::of(&out)
}

/// `GET /nodes/{node}/{qemu|lxc}/{vmid}`: the directory index.
fn index(kind: GuestKind, sim: &Sim, call: Call) -> Reply {
    sim.world()
        .guest_at(kind, &call.params.node()?, call.params.vmid()?)?;
    let names = ["config", "migrate", "rrddata", "status"];
    Ok(Data::value(Value::Array(
        names.iter().map(|n| json!({"subdir": n})).collect(),
    )))
}

/// `GET .../status`: the directory index.
fn status_index(kind: GuestKind, sim: &Sim, call: Call) -> Reply {
    sim.world()
        .guest_at(kind, &call.params.node()?, call.params.vmid()?)?;
    let names = ["current", "shutdown", "start", "stop"];
    Ok(Data::value(Value::Array(
        names.iter().map(|n| json!({"subdir": n})).collect(),
    )))
}

fn config_endpoint(kind: GuestKind) -> &'static str {
    match kind {
        GuestKind::Qemu => "GET /nodes/{node}/qemu/{vmid}/config",
        GuestKind::Lxc => "GET /nodes/{node}/lxc/{vmid}/config",
    }
}

/// A config value in the JSON type the schema declares (integers and booleans as numbers).
fn typed_value(kind: GuestKind, key: &str, text: &str) -> Value {
    match ApiSchema::embedded().config_key_type(config_endpoint(kind), key) {
        Some("integer") => text
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| json!(text)),
        Some("number") => text
            .parse::<f64>()
            .map(Value::from)
            .unwrap_or_else(|_| json!(text)),
        Some("boolean") => match crate::schema::parse_boolean(text) {
            Some(b) => json!(u8::from(b)),
            None => json!(text),
        },
        _ => json!(text),
    }
}

/// `GET .../config`: the config (pending values applied unless `current=1`) and its digest.
fn config(kind: GuestKind, sim: &Sim, call: Call) -> Reply {
    let w = sim.world();
    let g = w.guest_at(kind, &call.params.node()?, call.params.vmid()?)?;
    if let Some(snap) = call.params.text("snapshot") {
        return Err(ApiError::die(format!("snapshot '{snap}' does not exist")));
    }
    let values = Config::shown(if call.params.is_set("current") {
        g.config.values.clone()
    } else {
        g.config.effective_map()
    });
    Data::of(&GuestConfig {
        digest: Some(g.config.digest()),
        values: values
            .iter()
            .map(|(k, v)| (k.clone(), typed_value(kind, k, v)))
            .collect(),
    })
}

/// The change a config write asks for.
fn config_change(call: &Call) -> ConfigChange {
    let mut change = ConfigChange {
        digest: call.params.text("digest"),
        skiplock: call.params.is_set("skiplock"),
        ..ConfigChange::default()
    };
    for (k, v) in &call.params.0 {
        match k.as_str() {
            "node" | "vmid" | "digest" | "skiplock" | "force" | "background_delay" => {}
            "delete" => {
                change.delete = split_list(&scalar_text(v))
                    .into_iter()
                    .map(str::to_string)
                    .collect()
            }
            "revert" => {
                change.revert = split_list(&scalar_text(v))
                    .into_iter()
                    .map(str::to_string)
                    .collect()
            }
            _ => {
                change.set.insert(k.clone(), scalar_text(v));
            }
        }
    }
    change
}

/// `PUT .../config` (synchronous; returns null).
fn set_config(kind: GuestKind, sim: &Sim, call: Call) -> Reply {
    let mut w = sim.world();
    w.update_config(
        kind,
        &call.params.node()?,
        call.params.vmid()?,
        config_change(&call),
    )?;
    w.record();
    Ok(Data::null())
}

/// `POST .../config` (asynchronous; returns a `qmconfig` UPID).
fn set_config_async(kind: GuestKind, sim: &Sim, call: Call) -> Reply {
    let mut w = sim.world();
    let node = call.params.node()?;
    let vmid = call.params.vmid()?;
    w.update_config(kind, &node, vmid, config_change(&call))?;
    w.record();
    let upid = w.instant_task(&node, "qmconfig", &vmid.to_string(), &call.user());
    Data::of(&upid)
}

/// `GET .../status/current`.
fn current(kind: GuestKind, sim: &Sim, call: Call) -> Reply {
    let w = sim.world();
    let g = w.guest_at(kind, &call.params.node()?, call.params.vmid()?)?;
    let sid = g.sid();
    let ha = match (w.ha.resources.get(&sid), w.ha.services.get(&sid)) {
        (Some(conf), Some(s)) if conf.state != "ignored" => json!({
            "managed": 1, "state": s.state, "request_state": conf.state,
        }),
        _ => json!({"managed": 0}),
    };
    let agent = g
        .config
        .get("agent")
        .map(|a| a.starts_with('1') || a.contains("enabled=1"));
    let mut v = serde_json::to_value(GuestStatusCurrent {
        entry: w.guest_list_entry(g),
        ha: Some(ha),
        agent: agent.filter(|_| kind == GuestKind::Qemu),
    })
    .map_err(|e| ApiError::die(e.to_string()))?;
    if kind == GuestKind::Qemu && g.running {
        v["running-machine"] = json!("pc-i440fx-9.2+pve1");
        v["running-qemu"] = json!("9.2.0");
    }
    Ok(Data::value(v))
}

/// `POST .../status/{start,stop,shutdown}`.
fn power(kind: GuestKind, op: PowerOp, sim: &Sim, call: Call) -> Reply {
    let mut w = sim.world();
    let upid = w.power_request(
        kind,
        &call.params.node()?,
        call.params.vmid()?,
        op,
        &call.user(),
        call.params.is_set("skiplock"),
    )?;
    Data::of(&upid)
}

/// `GET .../rrddata`.
fn rrddata(kind: GuestKind, sim: &Sim, call: Call) -> Reply {
    let w = sim.world();
    let g = w.guest_at(kind, &call.params.node()?, call.params.vmid()?)?;
    let frame = Timeframe::parse(&call.params.req("timeframe")?)
        .ok_or_else(|| ApiError::param("timeframe", "unknown time frame"))?;
    let max = call.params.text("cf").as_deref() == Some("MAX");
    let rows = w
        .history
        .guest(g.vmid)
        .map(|s| s.rows(&GUEST_FIELDS, w.now, frame, max))
        .unwrap_or_default();
    Data::of(&rows)
}

/// `GET .../migrate`: the precondition check.
fn precondition(kind: GuestKind, sim: &Sim, call: Call) -> Reply {
    let w = sim.world();
    Ok(Data::value(w.migrate_precondition(
        kind,
        &call.params.node()?,
        call.params.vmid()?,
    )?))
}

/// `POST .../migrate`.
fn migrate(kind: GuestKind, sim: &Sim, call: Call) -> Reply {
    let (target, with_local_disks, restart, bwlimit) = match kind {
        GuestKind::Qemu => {
            let p: QemuMigrateParams = call.typed()?;
            (
                p.target,
                p.with_local_disks.unwrap_or(false),
                false,
                p.bwlimit,
            )
        }
        GuestKind::Lxc => {
            let p: LxcMigrateParams = call.typed()?;
            (p.target, false, p.restart.unwrap_or(false), p.bwlimit)
        }
    };
    let node = call.params.node()?;
    let mut w = sim.world();
    w.check_migrate_target(&node, &target)?;
    if kind == GuestKind::Qemu {
        root_only(&call, &["force", "migration_type", "migration_network"])?;
    }
    let req = MigrateRequest {
        kind,
        node,
        vmid: call.params.vmid()?,
        target,
        online: call.params.is_set("online"),
        with_local_disks,
        restart,
        bwlimit_kib: bwlimit.map(|b| b as f64),
        user: call.user(),
    };
    let upid = w.migrate(req)?;
    w.record();
    Data::of(&upid)
}

/// Parameters only `root@pam` itself may pass (not even its API tokens): a parameter error on the
/// first one given, as qemu-server's `migrate_vm` raises it.
fn root_only(call: &Call, names: &[&str]) -> Result<(), ApiError> {
    if call.user() == "root@pam" {
        return Ok(());
    }
    // `force` counts when true, the others when given at all (Perl truthiness of the value).
    let given = |n: &&&str| match **n {
        "force" => call.params.is_set(n),
        _ => call
            .params
            .text(n)
            .is_some_and(|v| !v.is_empty() && v != "0"),
    };
    match names.iter().find(given) {
        Some(n) => Err(ApiError::param(n, "Only root may use this option.")),
        None => Ok(()),
    }
}

/// `POST /nodes/{node}/qemu/{vmid}/clone`.
async fn clone(State(sim): State<Sim>, call: Call) -> Reply {
    let p: CloneParams = call.typed()?;
    let req = CloneRequest {
        node: call.params.node()?,
        vmid: call.params.vmid()?,
        newid: p.newid,
        name: p.name,
        description: p.description,
        target: p.target,
        full: p.full,
        storage: p.storage,
        pool: p.pool,
        user: call.user(),
    };
    let upid = sim.world().clone_guest(req)?;
    Data::of(&upid)
}

/// `PUT /nodes/{node}/qemu/{vmid}/resize`: a `resize` UPID, or null on releases before PVE 8.
async fn resize(State(sim): State<Sim>, call: Call) -> Reply {
    let p: ResizeParams = call.typed()?;
    let req = ResizeRequest {
        node: call.params.node()?,
        vmid: call.params.vmid()?,
        disk: p.disk,
        size: p.size,
        digest: p.digest,
        skiplock: p.skiplock.unwrap_or(false),
        user: call.user(),
    };
    let mut w = sim.world();
    let upid = w.resize_disk(req)?;
    if upid.is_none() {
        // Resized in the call (before PVE 8): the statistics see the new size now. A task's
        // change lands with its end event, which records by itself.
        w.record();
    }
    Data::of(&upid)
}

/// `POST /nodes/{node}/qemu`: create a VM.
async fn create(State(sim): State<Sim>, call: Call) -> Reply {
    let p: CreateParams = call.typed()?;
    let mut config: BTreeMap<String, String> = p.config;
    for k in [
        "node",
        "archive",
        "force",
        "unique",
        "live-restore",
        "bwlimit",
    ] {
        config.remove(k);
    }
    let upid = sim.world().create_guest(
        &call.params.node()?,
        p.vmid,
        config,
        p.start.unwrap_or(false),
        p.pool,
        p.ha_managed.unwrap_or(false),
        &call.user(),
    )?;
    Data::of(&upid)
}

/// `DELETE /nodes/{node}/{qemu|lxc}/{vmid}`.
fn destroy(kind: GuestKind, sim: &Sim, call: Call) -> Reply {
    let p: DeleteParams = call.typed()?;
    let upid = sim.world().destroy(
        kind,
        &call.params.node()?,
        call.params.vmid()?,
        p.purge.unwrap_or(false),
        &call.user(),
    )?;
    Data::of(&upid)
}
