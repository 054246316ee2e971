//! Test support: a simulator behind its router, request helpers that speak Proxmox's wire
//! (token header, form bodies), and the standard test cluster.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response};
use flxp_sim::{Scenario, Sim};
use serde_json::{Value, json};
use tower::ServiceExt;

pub const TOKEN: &str = "root@pam!test=0b6a3c2e-58f4-4b8e-9d1a-2f6e8c4a7b10";
pub const RO_TOKEN: &str = "audit@pve!view=7f0d3a51-0c2b-4f7e-8b9a-1d2e3f4a5b6c";
pub use flxp_core::units::GIB;

/// An HTTP answer: status, reason phrase, body text and parsed JSON (null if not JSON).
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub reason: Option<String>,
    pub body: String,
    pub json: Value,
    pub headers: axum::http::HeaderMap,
}

impl Resp {
    /// The `data` of a 200 answer; panics with the answer otherwise.
    pub fn data(&self) -> &Value {
        assert_eq!(self.status, 200, "expected 200, got {self:?}");
        &self.json["data"]
    }

    /// Asserts a refusal: the status and the reason phrase Proxmox gives.
    pub fn assert_refused(&self, status: u16, reason: &str) {
        assert_eq!(
            (self.status, self.reason.as_deref()),
            (status, Some(reason)),
            "{self:?}"
        );
    }

    /// Asserts the reason phrase alone (whatever the status).
    pub fn assert_reason(&self, reason: &str) {
        assert_eq!(self.reason.as_deref(), Some(reason));
    }

    /// Asserts a 400 whose `errors` map names `param` with `text`.
    pub fn assert_param_error(&self, param: &str, text: &str) {
        assert_eq!(self.status, 400);
        assert_eq!(self.json["errors"][param], text);
    }

    /// Asserts a 200 answer.
    pub fn assert_ok(&self) {
        assert_eq!(self.status, 200, "{self:?}");
    }

    /// Asserts a 400 whose `message` contains `text` (the control endpoint's refusals).
    pub fn assert_bad_request(&self, text: &str) {
        assert_eq!(self.status, 400);
        assert!(
            self.json["message"].as_str().unwrap().contains(text),
            "{self:?}"
        );
    }

    /// The `data` as a string (UPIDs).
    pub fn upid(&self) -> String {
        self.data()
            .as_str()
            .unwrap_or_else(|| panic!("no UPID in {self:?}"))
            .to_string()
    }
}

/// A simulator under test.
#[derive(Clone)]
pub struct TestSim {
    router: Router,
    pub auth: Option<String>,
    /// The simulator behind the router, to look at its world directly.
    pub sim: Sim,
}

impl TestSim {
    /// From a scenario document; the test token is added.
    pub fn new(doc: Value) -> Self {
        let mut scenario = Scenario::from_value(doc).expect("scenario");
        scenario.add_token(TOKEN).unwrap();
        let sim = Sim::new(scenario).expect("sim");
        let router = sim.router();
        TestSim {
            router,
            auth: Some(format!("PVEAPIToken={TOKEN}")),
            sim,
        }
    }

    /// The standard test cluster.
    pub fn cluster() -> Self {
        Self::new(cluster())
    }

    /// Same world, other credentials (`None`: none at all).
    pub fn with_auth(&self, auth: Option<String>) -> Self {
        TestSim {
            auth,
            ..self.clone()
        }
    }

    pub async fn send(&self, req: Request<Body>) -> Resp {
        let resp: Response<Body> = self.router.clone().oneshot(req).await.unwrap();
        let status = resp.status().as_u16();
        let reason = resp
            .extensions()
            .get::<hyper::ext::ReasonPhrase>()
            .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned());
        let headers = resp.headers().clone();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        let body = String::from_utf8_lossy(&bytes).into_owned();
        let json = serde_json::from_str(&body).unwrap_or(Value::Null);
        Resp {
            status,
            reason,
            body,
            json,
            headers,
        }
    }

    fn builder(&self, method: &str, path: &str) -> axum::http::request::Builder {
        let uri = if path.starts_with("/_sim") {
            path.to_string()
        } else {
            format!("/api2/json{path}")
        };
        let mut b = Request::builder().method(method).uri(uri);
        if let Some(a) = &self.auth {
            b = b.header("authorization", a);
        }
        b
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send(self.builder("GET", path).body(Body::empty()).unwrap())
            .await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.send(self.builder("DELETE", path).body(Body::empty()).unwrap())
            .await
    }

    /// A form-encoded write (`application/x-www-form-urlencoded`, values percent-encoded).
    pub async fn form(&self, method: &str, path: &str, params: &[(&str, &str)]) -> Resp {
        let body = serde_urlencoded::to_string(params).unwrap();
        self.raw(method, path, "application/x-www-form-urlencoded", &body)
            .await
    }

    pub async fn post(&self, path: &str, params: &[(&str, &str)]) -> Resp {
        self.form("POST", path, params).await
    }

    /// A POST that starts a task (migrate, clone, start, ...): its UPID; panics on any other answer.
    pub async fn post_task(&self, path: &str, params: &[(&str, &str)]) -> String {
        self.post(path, params).await.upid()
    }

    /// A migrate request for `guest` (`qemu/100`) on node `from`: the answer as it is.
    pub async fn post_migrate(&self, from: &str, guest: &str, params: &[(&str, &str)]) -> Resp {
        self.post(&format!("/nodes/{from}/{guest}/migrate"), params)
            .await
    }

    /// A POST whose form body is given already encoded (repeated keys, as bulk actions take
    /// them) that starts a task: its UPID.
    pub async fn post_form_task(&self, path: &str, body: &str) -> String {
        let form = "application/x-www-form-urlencoded";
        self.raw("POST", path, form, body).await.upid()
    }

    /// Starts a migration of `guest` (`qemu/100`) on node `from`: its UPID.
    pub async fn migrate(&self, from: &str, guest: &str, params: &[(&str, &str)]) -> String {
        self.post_migrate(from, guest, params).await.upid()
    }

    /// Starts a live migration of `guest` (`qemu/100`) from node `from` to `target`: its UPID.
    pub async fn live_migrate(&self, from: &str, guest: &str, target: &str) -> String {
        self.migrate(from, guest, &live_to(target)).await
    }

    /// Starts a live migration that also moves the guest's local disks: its UPID.
    pub async fn live_migrate_with_local_disks(
        &self,
        from: &str,
        guest: &str,
        target: &str,
    ) -> String {
        self.migrate(from, guest, &live_with_local_disks(target))
            .await
    }

    /// Starts a clone of guest `vmid` on `node` (a POST to its `clone`): its UPID.
    pub async fn clone_guest(&self, node: &str, vmid: &str, params: &[(&str, &str)]) -> String {
        self.post_task(&format!("/nodes/{node}/qemu/{vmid}/clone"), params)
            .await
    }

    pub async fn put(&self, path: &str, params: &[(&str, &str)]) -> Resp {
        self.form("PUT", path, params).await
    }

    pub async fn raw(&self, method: &str, path: &str, content_type: &str, body: &str) -> Resp {
        let req = self
            .builder(method, path)
            .header("content-type", content_type)
            .body(Body::from(body.to_string()))
            .unwrap();
        self.send(req).await
    }

    /// A JSON write to the control endpoint.
    pub async fn control(&self, method: &str, path: &str, body: Value) -> Resp {
        self.raw(method, path, "application/json", &body.to_string())
            .await
    }

    /// The `data` of a GET that must answer 200.
    pub async fn get_data(&self, path: &str) -> Value {
        self.get(path).await.data().clone()
    }

    /// The `data` list of a GET that must answer 200.
    pub async fn list(&self, path: &str) -> Vec<Value> {
        self.get_data(path).await.as_array().unwrap().clone()
    }

    /// The config of `guest` (`qemu/100`) on `node` (pending values applied).
    pub async fn config(&self, node: &str, guest: &str) -> Value {
        self.get_data(&format!("/nodes/{node}/{guest}/config"))
            .await
    }

    /// Clones qemu guest `vmid` on `node` to `newid` and waits for the task: its final status.
    pub async fn clone_and_wait(&self, node: &str, vmid: &str, newid: &str) -> Value {
        let upid = self.clone_guest(node, vmid, &[("newid", newid)]).await;
        self.wait(&upid).await
    }

    /// Asks for a live migration of the HA-managed guest 110 to pve2: asserts that the answer is
    /// an `hamigrate` task that ends OK, and returns its UPID.
    pub async fn ha_migrate_110_to_pve2(&self) -> String {
        let upid = self.live_migrate("pve1", "qemu/110", "pve2").await;
        assert!(upid.contains(":hamigrate:110:"), "{upid}");
        self.wait_ok(&upid).await;
        upid
    }

    /// A config write (`PUT`) of `guest` (`qemu/100`) on `node`: the answer as it is.
    pub async fn set_config(&self, node: &str, guest: &str, params: &[(&str, &str)]) -> Resp {
        self.put(&format!("/nodes/{node}/{guest}/config"), params)
            .await
    }

    /// Asserts that resource `id` is on `node` and holds no lock (a move done, refused or failed).
    pub async fn assert_settled_on(&self, id: &str, node: &str) {
        let r = self.resource(id).await;
        assert_eq!(r["node"], node);
        assert!(r.get("lock").is_none());
    }

    /// Asserts the string `fields` of the `/cluster/resources` entry with `id`.
    pub async fn assert_resource(&self, id: &str, fields: &[(&str, &str)]) {
        let r = self.resource(id).await;
        for (key, value) in fields {
            assert_eq!(r[key], *value, "{id}.{key}");
        }
    }

    /// Waits `secs` of simulated time, then asserts that resource `id` is on `node`.
    pub async fn assert_node_after(&self, secs: f64, id: &str, node: &str) {
        sleep(secs).await;
        assert_eq!(self.node_of(id).await, node);
    }

    /// The cluster's task list (`/cluster/tasks`).
    pub async fn tasks(&self) -> Vec<Value> {
        self.list("/cluster/tasks").await
    }

    /// The `qmigrate` tasks of guest `vmid`, in the order `/cluster/tasks` lists them.
    pub async fn migrate_tasks(&self, vmid: &str) -> Vec<Value> {
        let tasks = self.tasks().await;
        tasks
            .into_iter()
            .filter(|t| t["type"] == "qmigrate" && t["id"] == vmid)
            .collect()
    }

    /// The `node` field of the `/cluster/resources` entry with `id` (where a guest is).
    pub async fn node_of(&self, id: &str) -> Value {
        self.resource(id).await["node"].clone()
    }

    /// The entry of storage `id` in `/nodes/{node}/storage`; panics when there is none.
    pub async fn storage(&self, node: &str, id: &str) -> Value {
        let list = self.list(&format!("/nodes/{node}/storage")).await;
        list.iter()
            .find(|st| st["storage"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no {id} in {list:?}"))
    }

    /// Sets a node's status through the control endpoint (`online`, `offline`).
    pub async fn set_node_status(&self, node: &str, status: &str) -> Resp {
        let path = format!("/_sim/nodes/{node}/status");
        self.control("POST", &path, json!({ "status": status }))
            .await
    }

    /// Switches a node's HA maintenance mode through the control endpoint.
    pub async fn set_maintenance(&self, node: &str, enable: bool) -> Resp {
        let path = format!("/_sim/nodes/{node}/maintenance");
        self.control("POST", &path, json!({ "enable": enable }))
            .await
    }

    /// The `/cluster/resources` entry with `id`.
    pub async fn resource(&self, id: &str) -> Value {
        self.entry("/cluster/resources", id).await
    }

    /// The `/cluster/ha/status/current` entry with `id` (`lrm:pve1`, `service:vm:110`).
    pub async fn ha_entry(&self, id: &str) -> Value {
        self.entry("/cluster/ha/status/current", id).await
    }

    /// The entry with `id` of the list at `path`; `null` when there is none.
    async fn entry(&self, path: &str, id: &str) -> Value {
        let list = self.list(path).await;
        list.into_iter()
            .find(|e| e["id"] == id)
            .unwrap_or(Value::Null)
    }

    /// Task status of a UPID (on the node the UPID names).
    pub async fn task(&self, upid: &str) -> Value {
        self.get_data(&format!("{}/status", task_path(upid))).await
    }

    /// Waits (in simulated time) until the task stopped; returns its status.
    pub async fn wait(&self, upid: &str) -> Value {
        for _ in 0..10_000 {
            let t = self.task(upid).await;
            if t["status"] == "stopped" {
                return t;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!("task {upid} never ended");
    }

    /// Waits until the task stopped and asserts it ended `OK`.
    pub async fn wait_ok(&self, upid: &str) {
        assert_eq!(self.wait(upid).await["exitstatus"], "OK");
    }

    /// Waits for a migration task that Proxmox aborts before or in phase 1: it must end with
    /// exit status `migration aborted` and log `ERROR: migration aborted (duration ..): <why>`
    /// (pve-guest-common `AbstractMigrate::migrate`).
    pub async fn assert_aborted(&self, upid: &str, why: &str) {
        assert_eq!(self.wait(upid).await["exitstatus"], "migration aborted");
        let log = self.log(upid).await;
        let line = log
            .iter()
            .find(|l| l.contains("ERROR: migration aborted (duration "))
            .unwrap_or_else(|| panic!("no abort line in {log:?}"));
        assert!(line.ends_with(&format!("): {why}")), "{line}");
        assert_eq!(log.last().unwrap(), "TASK ERROR: migration aborted");
    }

    /// Task log lines.
    pub async fn log(&self, upid: &str) -> Vec<String> {
        let path = format!("{}/log?limit=1000", task_path(upid));
        self.list(&path)
            .await
            .iter()
            .map(|l| l["t"].as_str().unwrap().to_string())
            .collect()
    }
}

/// Waits `secs` of (paused, simulated) time.
pub async fn sleep(secs: f64) {
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
}

/// Parameters of a live migration to `target` that also moves local disks.
pub fn live_with_local_disks(target: &str) -> [(&str, &str); 3] {
    [
        ("target", target),
        ("online", "1"),
        ("with-local-disks", "1"),
    ]
}

/// Parameters of a live migration to `target`.
pub fn live_to(target: &str) -> [(&str, &str); 2] {
    [("target", target), ("online", "1")]
}

/// Parameters of a restart-mode (container) migration to `target`.
pub fn restart_to(target: &str) -> [(&str, &str); 2] {
    [("target", target), ("restart", "1")]
}

/// The API path of the task a UPID names, on the node the UPID names.
pub fn task_path(upid: &str) -> String {
    let node = upid.split(':').nth(1).unwrap();
    format!("/nodes/{node}/tasks/{}", urlencode(upid))
}

/// The standard cluster with `edit` applied to its scenario document first.
pub fn cluster_with(edit: impl FnOnce(&mut Value)) -> TestSim {
    let mut doc = cluster();
    edit(&mut doc);
    TestSim::new(doc)
}

/// The resource entry of `id` in a scenario document.
pub fn resource_entry<'a>(doc: &'a mut Value, id: &str) -> &'a mut Value {
    doc["resources"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["id"] == id)
        .unwrap()
}

pub fn urlencode(s: &str) -> String {
    serde_urlencoded::to_string([("x", s)]).unwrap()[2..].to_string()
}

fn node(name: &str, cpus: u32, mem_gib: u64, mem_used_gib: u64) -> Value {
    json!({"id": format!("node/{name}"), "type": "node", "node": name, "status": "online",
           "maxcpu": cpus, "cpu": 0.1, "maxmem": mem_gib * GIB, "mem": mem_used_gib * GIB,
           "maxdisk": 100 * GIB, "disk": 10 * GIB, "uptime": 1000, "level": ""})
}

fn storage(node: &str, id: &str, kind: &str, shared: bool) -> Value {
    json!({"id": format!("storage/{node}/{id}"), "type": "storage", "node": node, "storage": id,
           "plugintype": kind, "shared": u8::from(shared), "content": "images,rootdir",
           "maxdisk": 4u64 << 40, "disk": 0})
}

fn guest(kind: &str, vmid: u32, name: &str, node: &str, mem_gib: u64, running: bool) -> Value {
    let mut g = json!({"id": format!("{kind}/{vmid}"), "type": kind, "vmid": vmid, "name": name,
        "node": node, "status": if running { "running" } else { "stopped" },
        "maxmem": mem_gib * GIB, "maxcpu": 2, "maxdisk": 32 * GIB,
        "cpu": if running { 0.25 } else { 0.0 }, "mem": if running { mem_gib * GIB / 2 } else { 0 },
        "uptime": if running { 600 } else { 0 }});
    if running && kind == "qemu" {
        g["memhost"] = json!(mem_gib * GIB / 2);
    }
    g
}

/// Three nodes (pve3 is small), shared `ceph` and per-node `local-lvm`, and guests for every
/// rule the tests exercise:
/// - 100 qemu running 4 GiB on ceph (pve1); 101 qemu running on local-lvm (pve1);
/// - 102 qemu stopped on ceph (pve2); 103 lxc running on local-lvm (pve2);
/// - 104 lxc stopped on ceph (pve2); 110 qemu running, HA-managed (pve1);
/// - 120 qemu running with 12 GiB host memory (pve1); 9000 template on ceph with cloud-init;
/// - 9001 template on local-lvm (pve1).
pub fn cluster() -> Value {
    let mut res = vec![
        node("pve1", 16, 64, 24),
        node("pve2", 16, 64, 8),
        node("pve3", 8, 16, 6),
    ];
    for n in ["pve1", "pve2", "pve3"] {
        res.push(storage(n, "ceph", "rbd", true));
        res.push(storage(n, "local-lvm", "lvmthin", false));
    }
    res.push(guest("qemu", 100, "web-1", "pve1", 4, true));
    res.push(guest("qemu", 101, "local-1", "pve1", 4, true));
    res.push(guest("qemu", 102, "cold-1", "pve2", 4, false));
    res.push(guest("lxc", 103, "ct-1", "pve2", 2, true));
    res.push(guest("lxc", 104, "ct-2", "pve2", 2, false));
    res.push(guest("qemu", 110, "ha-1", "pve1", 4, true));
    let mut big = guest("qemu", 120, "big-1", "pve1", 24, true);
    big["memhost"] = json!(12 * GIB);
    big["mem"] = json!(12 * GIB);
    res.push(big);
    let mut t = guest("qemu", 9000, "ubuntu-2404", "pve1", 2, false);
    t["template"] = json!(1);
    t["tags"] = json!("template");
    res.push(t);
    let mut t2 = guest("qemu", 9001, "local-tpl", "pve1", 2, false);
    t2["template"] = json!(1);
    res.push(t2);
    json!({
        "resources": res,
        "time": 1_764_400_000,
        "ha": {"resources": [{"sid": "vm:110", "state": "started"}]},
        "sim": {
            "tokens": [{"token": RO_TOKEN, "readonly": true}],
            "users": [{"userid": "root@pam", "password": "secret"}],
            "migration_bandwidth": GIB,
            "auth_failure_delay_ms": 0,
            "ha_delay_secs": 2,
            "guests": {
                "101": {"config": {"scsi0": "local-lvm:vm-101-disk-0,size=8G"}},
                "103": {"config": {"rootfs": "local-lvm:vm-103-disk-0,size=8G"}},
                "9000": {"config": {"scsi0": "ceph:base-9000-disk-0,size=32G",
                                     "ide2": "ceph:vm-9000-cloudinit,media=cdrom", "ciuser": "ubuntu"}},
                "9001": {"config": {"scsi0": "local-lvm:base-9001-disk-0,size=16G"}}
            }
        }
    })
}
