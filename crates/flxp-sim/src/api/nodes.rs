//! `/nodes` and the per-node endpoints: status, version, rrddata, config (notes), storage, and the
//! task endpoints (list, status, log, stop).

use std::collections::BTreeMap;

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use flxp_pve::types::nodes::{ByteUsage, CpuInfo};
use flxp_pve::types::{
    NodeConfig, NodeListEntry, NodeStatus, StorageEntry, TaskLogLine, TaskStatus,
};
use serde_json::json;

use super::p;
use crate::http::{Call, Data, Reply};
use crate::world::{NODE_FIELDS, Timeframe, hex};
use crate::{ApiError, Sim};

pub(super) fn routes(r: Router<Sim>) -> Router<Sim> {
    r.route(&p("/nodes"), get(list))
        .route(&p("/nodes/{node}"), get(index))
        .route(&p("/nodes/{node}/status"), get(status).post(power))
        .route(
            &p("/nodes/{node}/wakeonlan"),
            axum::routing::post(wake_on_lan),
        )
        .route(&p("/nodes/{node}/version"), get(version))
        .route(&p("/nodes/{node}/rrddata"), get(rrddata))
        .route(&p("/nodes/{node}/config"), get(config).put(set_config))
        .route(&p("/nodes/{node}/storage"), get(storage))
        .route(
            &p("/nodes/{node}/storage/{storage}/content"),
            get(storage_content),
        )
        .route(&p("/nodes/{node}/tasks"), get(tasks))
        .route(
            &p("/nodes/{node}/migrateall"),
            axum::routing::post(migrate_all),
        )
        .route(
            &p("/nodes/{node}/tasks/{upid}"),
            get(task_index).delete(stop_task),
        )
        .route(&p("/nodes/{node}/tasks/{upid}/status"), get(task_status))
        .route(&p("/nodes/{node}/tasks/{upid}/log"), get(task_log))
}

/// `POST /nodes/{node}/status`: `command=shutdown` or `reboot` (see `world::power`).
async fn power(State(sim): State<Sim>, call: Call) -> Reply {
    let node = call.params.node()?;
    let command = call.params.req("command")?;
    sim.world().node_power(&node, &command)?;
    Ok(Data::null())
}

/// `POST /nodes/{node}/wakeonlan`: the MAC address, the node online after the boot time.
async fn wake_on_lan(State(sim): State<Sim>, call: Call) -> Reply {
    let node = call.params.node()?;
    let mac = sim.world().wake_on_lan(&node)?;
    Data::of(&mac)
}

/// `GET /nodes`.
async fn list(State(sim): State<Sim>) -> Reply {
    let fp = sim.fingerprint();
    let w = sim.world();
    let table = w.node_stats_all();
    let out: Vec<NodeListEntry> = w
        .nodes
        .values()
        .filter_map(|n| table.get(&n.name).map(|s| (n, s)))
        .map(|(n, s)| {
            let r = w.node_resource_with(n, s);
            NodeListEntry {
                node: n.name.clone(),
                status: r.status,
                id: r.id,
                kind: r.kind,
                cpu: r.cpu,
                maxcpu: r.maxcpu,
                mem: r.mem,
                maxmem: r.maxmem,
                disk: r.disk,
                maxdisk: r.maxdisk,
                uptime: r.uptime,
                level: r.level,
                ssl_fingerprint: Some(fp.clone().unwrap_or_else(|| fake_fingerprint(&n.name))),
            }
        })
        .collect();
    Data::of(&out)
}

/// A stable per-node fingerprint when the simulator serves plain HTTP.
fn fake_fingerprint(node: &str) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, node.as_bytes());
    d.as_ref()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// `GET /nodes/{node}`: the directory index.
async fn index(State(sim): State<Sim>, call: Call) -> Reply {
    sim.world().node(&call.params.node()?)?;
    let names = [
        "config", "lxc", "qemu", "rrddata", "status", "storage", "tasks", "version",
    ];
    Data::of(&names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>())
}

/// `GET /nodes/{node}/status`.
async fn status(State(sim): State<Sim>, call: Call) -> Reply {
    let w = sim.world();
    let name = call.params.node()?;
    let n = w.node(&name)?;
    let s = w.node_stats(&name);
    let load = |f: f64| format!("{:.2}", s.used_cores * f);
    let mut other = BTreeMap::new();
    other.insert("idle".into(), json!(0));
    other.insert("ksm".into(), json!({"shared": 0}));
    other.insert(
        "current-kernel".into(),
        json!({"sysname": "Linux", "release": "6.14.8-2-pve", "version": "#1 SMP PREEMPT_DYNAMIC PMX 6.14.8-2", "machine": "x86_64"}),
    );
    other.insert("boot-info".into(), json!({"mode": "efi", "secureboot": 0}));
    let available = n.maxmem.saturating_sub(s.mem);
    let status = NodeStatus {
        cpu: Some(s.cpu),
        wait: Some(0.002),
        cpuinfo: Some(CpuInfo {
            model: Some(n.cpu_model.clone()),
            sockets: Some(u64::from(n.sockets)),
            cores: Some(u64::from((n.maxcpu / n.sockets.max(1) / 2).max(1))),
            cpus: Some(u64::from(n.maxcpu)),
            mhz: Some("2794.748".into()),
            user_hz: Some(100),
            vendor: Some("AuthenticAMD".into()),
            flags: Some("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov svm".into()),
            hvm: Some(true),
        }),
        loadavg: vec![load(1.0), load(0.95), load(0.9)],
        memory: Some(ByteUsage {
            total: Some(n.maxmem),
            used: Some(s.mem),
            free: Some(available),
            available: Some(available),
            avail: None,
        }),
        swap: Some(ByteUsage {
            total: Some(n.swap_total),
            used: Some(n.swap_used),
            free: Some(n.swap_total.saturating_sub(n.swap_used)),
            available: None,
            avail: None,
        }),
        rootfs: Some(ByteUsage {
            total: Some(n.maxdisk),
            used: Some(n.disk),
            free: Some(n.maxdisk.saturating_sub(n.disk)),
            available: None,
            avail: Some(n.maxdisk.saturating_sub(n.disk)),
        }),
        uptime: Some((w.now - n.booted_at).max(0.0) as u64),
        pveversion: Some(format!("pve-manager/{}/f1a9c0de", w.settings.version)),
        kversion: Some("Linux 6.14.8-2-pve #1 SMP PREEMPT_DYNAMIC PMX 6.14.8-2".into()),
        other,
    };
    Data::of(&status)
}

/// `GET /nodes/{node}/version`.
async fn version(State(sim): State<Sim>, call: Call) -> Reply {
    sim.world().node(&call.params.node()?)?;
    Data::of(&super::cluster::version_of(&sim))
}

/// `GET /nodes/{node}/rrddata`: rows of the node's history, pressure fields included.
async fn rrddata(State(sim): State<Sim>, call: Call) -> Reply {
    let w = sim.world();
    let node = call.params.node()?;
    w.node(&node)?;
    let frame = Timeframe::parse(&call.params.req("timeframe")?)
        .ok_or_else(|| ApiError::param("timeframe", "unknown time frame"))?;
    let max = call.params.text("cf").as_deref() == Some("MAX");
    let rows = w
        .history
        .node(&node)
        .map(|s| s.rows(&NODE_FIELDS, w.now, frame, max))
        .unwrap_or_default();
    Data::of(&rows)
}

fn node_config_digest(notes: &str) -> String {
    let text: String = notes.lines().map(|l| format!("#{l}\n")).collect();
    hex(ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, text.as_bytes()).as_ref())
}

/// `GET /nodes/{node}/config`: the node's notes as `description`.
async fn config(State(sim): State<Sim>, call: Call) -> Reply {
    let w = sim.world();
    let n = w.node(&call.params.node()?)?;
    let property = call.params.text("property");
    let cfg = NodeConfig {
        description: (!n.notes.is_empty()).then(|| n.notes.clone()),
        digest: Some(node_config_digest(&n.notes)),
        other: BTreeMap::new(),
    };
    let mut v = serde_json::to_value(cfg).map_err(|e| ApiError::die(e.to_string()))?;
    if let (Some(prop), Some(o)) = (property.filter(|p| p != "all"), v.as_object_mut()) {
        o.retain(|k, _| *k == prop);
    }
    Ok(Data::value(v))
}

/// `PUT /nodes/{node}/config`: set or delete the notes, with digest check.
async fn set_config(State(sim): State<Sim>, call: Call) -> Reply {
    let mut w = sim.world();
    let name = call.params.node()?;
    let current = w.node(&name)?.notes.clone();
    if let Some(d) = call.params.text("digest") {
        if d != node_config_digest(&current) {
            return Err(ApiError::die(
                "detected modified configuration - file changed by other user? Try again.",
            ));
        }
    }
    let delete = call.params.text("delete").unwrap_or_default();
    let new = if crate::tags::split_list(&delete).contains(&"description") {
        String::new()
    } else if let Some(d) = call.params.text("description") {
        d
    } else {
        current
    };
    if let Some(n) = w.nodes.get_mut(&name) {
        n.notes = new;
    }
    Ok(Data::null())
}

/// `GET /nodes/{node}/storage`: use from the world's volume sums, summed once per world change.
async fn storage(State(sim): State<Sim>, call: Call) -> Reply {
    let mut guard = sim.world();
    let (w, usage) = guard.storage_use();
    let node = call.params.node()?;
    w.node(&node)?;
    let content = call.params.text("content");
    let only = call.params.text("storage");
    let target = call.params.text("target");
    let out: Vec<StorageEntry> = w
        .storages
        .values()
        .filter(|s| s.available_on(&node))
        .filter(|s| target.as_deref().is_none_or(|t| s.available_on(t)))
        .filter(|s| only.as_deref().is_none_or(|o| o == s.id))
        .filter(|s| {
            content
                .as_deref()
                .is_none_or(|c| crate::tags::split_list(c).iter().all(|c| s.has_content(c)))
        })
        .map(|s| {
            let (total, used) = usage.usage(w, &s.id, &node);
            StorageEntry {
                storage: s.id.clone(),
                kind: Some(s.kind.clone()),
                content: Some(s.content.clone()),
                shared: Some(s.shared),
                active: Some(true),
                enabled: Some(true),
                total: Some(total),
                used: Some(used),
                avail: Some(total.saturating_sub(used)),
                used_fraction: Some(if total > 0 {
                    used as f64 / total as f64
                } else {
                    0.0
                }),
            }
        })
        .collect();
    Data::of(&out)
}

/// `GET /nodes/{node}/storage/{storage}/content`: guest volumes only (the simulator keeps no ISO,
/// template or backup files), filtered by `content` and `vmid`.
async fn storage_content(State(sim): State<Sim>, call: Call) -> Reply {
    let w = sim.world();
    let node = call.params.node()?;
    w.node(&node)?;
    let storage = call.params.text("storage").unwrap_or_default();
    let content = call.params.text("content");
    let vmid = call.params.uint("vmid");
    let Some(list) = w.storage_content(&storage, &node) else {
        return Err(crate::ApiError::die(format!(
            "storage '{storage}' is not available on node '{node}'"
        )));
    };
    let out: Vec<_> = list
        .into_iter()
        .filter(|v| content.is_none() || v.content == content)
        .filter(|v| vmid.is_none_or(|id| v.vmid.map(u64::from) == Some(id)))
        .collect();
    Data::of(&out)
}

/// `GET /nodes/{node}/tasks`: the node's tasks, newest first (finished ones by default).
async fn tasks(State(sim): State<Sim>, call: Call) -> Reply {
    let w = sim.world();
    let node = call.params.node()?;
    w.node(&node)?;
    let source = call
        .params
        .text("source")
        .unwrap_or_else(|| "archive".into());
    let vmid = call.params.text("vmid");
    let typefilter = call.params.text("typefilter");
    let userfilter = call.params.text("userfilter");
    let errors_only = call.params.is_set("errors");
    let since = call.params.uint("since").map(|s| s as i64);
    let until = call.params.uint("until").map(|s| s as i64);
    let start = call.params.uint("start").unwrap_or(0) as usize;
    let limit = call.params.uint("limit").unwrap_or(50) as usize;
    let mut list: Vec<_> = w
        .tasks
        .all()
        .iter()
        .filter(|t| t.node == node)
        .filter(|t| match source.as_str() {
            "active" => t.is_running(),
            "all" => true,
            _ => !t.is_running(),
        })
        .filter(|t| vmid.as_deref().is_none_or(|v| t.id == v))
        .filter(|t| typefilter.as_deref().is_none_or(|f| t.kind == f))
        .filter(|t| userfilter.as_deref().is_none_or(|u| t.user.contains(u)))
        .filter(|t| !errors_only || t.exitstatus.as_deref().is_some_and(|e| e != "OK"))
        .filter(|t| since.is_none_or(|s| t.starttime >= s))
        .filter(|t| until.is_none_or(|u| t.starttime <= u))
        .collect();
    list.sort_by_key(|t| std::cmp::Reverse(t.starttime));
    let out: Vec<_> = list
        .into_iter()
        .skip(start)
        .take(limit)
        .map(|t| t.list_entry())
        .collect();
    Data::of(&out)
}

/// The task `upid` as run on `node`, or `400 {"upid": "no such task"}`.
fn find_task<'a>(
    w: &'a crate::world::World,
    call: &Call,
) -> Result<&'a crate::tasks::Task, ApiError> {
    let node = call.params.node()?;
    let upid = call.params.req("upid")?;
    w.tasks
        .by_upid(&upid)
        .filter(|t| t.node == node)
        .ok_or_else(|| ApiError::param("upid", "no such task"))
}

/// `GET /nodes/{node}/tasks/{upid}`: the directory index.
async fn task_index(State(sim): State<Sim>, call: Call) -> Reply {
    find_task(&sim.world(), &call)?;
    Ok(Data::value(json!([{"name": "log"}, {"name": "status"}])))
}

/// `GET /nodes/{node}/tasks/{upid}/status`.
async fn task_status(State(sim): State<Sim>, call: Call) -> Reply {
    let w = sim.world();
    let t = find_task(&w, &call)?;
    Data::of(&TaskStatus {
        upid: t.upid.clone(),
        node: Some(t.node.clone()),
        pid: Some(u64::from(t.pid)),
        pstart: Some(t.pstart),
        starttime: Some(t.starttime),
        kind: Some(t.kind.clone()),
        id: Some(t.id.clone()),
        user: Some(t.userid().to_string()),
        tokenid: t.tokenid().map(str::to_string),
        status: if t.is_running() { "running" } else { "stopped" }.into(),
        exitstatus: t.exitstatus.clone(),
    })
}

/// `GET /nodes/{node}/tasks/{upid}/log`: lines `{n, t}` from `start`, at most `limit`.
async fn task_log(State(sim): State<Sim>, call: Call) -> Reply {
    let w = sim.world();
    let t = find_task(&w, &call)?;
    let start = call.params.uint("start").unwrap_or(0) as usize;
    let limit = call.params.uint("limit").unwrap_or(50) as usize;
    let lines: Vec<TaskLogLine> = t
        .visible_log(w.now)
        .into_iter()
        .skip(start)
        .take(limit)
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect();
    let lines = if lines.is_empty() && t.is_running() {
        vec![TaskLogLine {
            n: Some(1),
            t: Some("no content".into()),
        }]
    } else {
        lines
    };
    Data::of(&lines)
}

/// `DELETE /nodes/{node}/tasks/{upid}`: stops a running task (a migration is aborted).
async fn stop_task(State(sim): State<Sim>, call: Call) -> Reply {
    let mut w = sim.world();
    let t = find_task(&w, &call)?;
    let upid = t.upid.clone();
    w.stop_task(&upid);
    Ok(Data::null())
}

/// `POST /nodes/{node}/migrateall`: migrate every guest of the node (or the listed ones) to
/// `target` under one `migrateall` task; running VMs live, running containers in restart mode.
async fn migrate_all(State(sim): State<Sim>, call: Call) -> Reply {
    let mut w = sim.world();
    let node = call.params.node()?;
    w.node(&node)?;
    let target = call.params.req("target")?;
    if target == node {
        return Err(ApiError::param("target", "target is local node."));
    }
    let listed: Vec<u32> = crate::tags::split_list(&call.params.text("vms").unwrap_or_default())
        .iter()
        .filter_map(|v| v.parse().ok())
        .collect();
    let vmids: Vec<u32> = w
        .guests
        .values()
        .filter(|g| g.node == node && !g.is_template())
        .filter(|g| listed.is_empty() || listed.contains(&g.vmid))
        .map(|g| g.vmid)
        .collect();
    let workers = call
        .params
        .uint("max-workers")
        .or(call.params.uint("maxworkers"))
        .unwrap_or(1);
    let upid = w.bulk_migrate(crate::world::BulkRequest {
        node,
        kind: "migrateall",
        vmids,
        target,
        online: true,
        with_local_disks: call.params.is_set("with-local-disks"),
        workers: workers as usize,
        user: call.user(),
    })?;
    Data::of(&upid)
}
