//! A scripted, in-memory Proxmox API for tests and benchmarks (cargo feature `fake`).
//!
//! [`FakeApi`] is the typed endpoints over [`FakeTransport`], which answers the read endpoints
//! from a Contract 1 snapshot through a [`Router`], counts every call by endpoint, can wait a
//! fixed latency per call (with `tokio::time`, so paused-time tests stay instant), fail chosen
//! endpoints with a Proxmox error, and play scripted task statuses. Writes answer 501 ("not
//! routed"). It is not a simulator: nothing changes over time.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Mutex, MutexGuard, OnceLock};

use async_trait::async_trait;
use tokio::time::Duration;

use flxp_core::Snapshot;

use crate::endpoint;
use crate::error::{Result, api_error};
use crate::pve::Pve;
use crate::request::Request;
use crate::router::{Captures, RoundReads, Router, reply};
use crate::transport::{Data, Transport};
use crate::types::{
    ClusterStatusEntry, GuestConfig, GuestKind, GuestListEntry, GuestStatusCurrent,
    ManagerStatusResponse, NodeConfig, NodeListEntry, NodeStatus, Permissions, Pool, PoolListEntry,
    Resource, ResourceType, ResourcesQuery, RrdRow, StorageEntry, TaskLogLine, TaskLogQuery,
    TaskStatus, Upid, Version,
};

/// The typed endpoints over an in-memory [`FakeTransport`]; see the module docs.
pub type FakeApi = Pve<FakeTransport>;

/// An in-memory [`Transport`] answering from a snapshot; see the module docs.
#[derive(Debug, Default)]
pub struct FakeTransport {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    snapshot: Snapshot,
    latency: Duration,
    rrd_rows: BTreeMap<String, Vec<RrdRow>>,
    calls: Vec<String>,
    failures: BTreeMap<String, (u16, String)>,
    tasks: BTreeMap<String, VecDeque<TaskStatus>>,
    task_logs: BTreeMap<String, Vec<TaskLogLine>>,
}

impl FakeApi {
    /// A fake answering from this snapshot, with no latency.
    pub fn new(snapshot: Snapshot) -> Self {
        let fake = FakeTransport::default();
        fake.state().snapshot = snapshot;
        Pve::typed(fake)
    }

    /// Waits this long in every call (a network round trip).
    pub fn with_latency(self, latency: Duration) -> Self {
        self.transport().state().latency = latency;
        self
    }

    /// Answers `rrddata` of `node` with these rows instead of the snapshot's one row.
    pub fn with_rrd_rows(self, node: &str, rows: Vec<RrdRow>) -> Self {
        self.transport()
            .state()
            .rrd_rows
            .insert(node.to_owned(), rows);
        self
    }

    /// Makes calls to `endpoint` (`GET /cluster/ha/rules`) fail with this Proxmox error.
    pub fn fail(self, endpoint: &str, status: u16, message: &str) -> Self {
        self.transport()
            .state()
            .failures
            .insert(endpoint.to_owned(), (status, message.to_owned()));
        self
    }

    /// Plays these statuses, one per `task_status` call (the last one repeats), and this log.
    pub fn with_task(self, upid: &Upid, statuses: Vec<TaskStatus>, log: Vec<&str>) -> Self {
        let lines = log
            .into_iter()
            .enumerate()
            .map(|(i, t)| TaskLogLine {
                n: Some(i as u64 + 1),
                t: Some(t.to_owned()),
            })
            .collect();
        let mut state = self.transport().state();
        state.task_logs.insert(upid.to_string(), lines);
        state
            .tasks
            .insert(upid.to_string(), statuses.into_iter().collect());
        drop(state);
        self
    }

    /// Every call so far, as `METHOD /path`, in order.
    pub fn calls(&self) -> Vec<String> {
        self.transport().state().calls.clone()
    }

    /// How many calls were made.
    pub fn call_count(&self) -> usize {
        self.transport().state().calls.len()
    }
}

#[async_trait]
impl Transport for FakeTransport {
    async fn send(&self, request: Request) -> Result<Data> {
        let key = request.to_string();
        let latency = {
            let mut state = self.state();
            state.calls.push(key.clone());
            state.latency
        };
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        let failure = self.state().failures.get(&key).cloned();
        if let Some((status, message)) = failure {
            let body = serde_json::json!({ "data": null, "message": format!("{message}\n") });
            return Err(api_error(
                request.method.as_str(),
                &request.path,
                status,
                &message,
                body.to_string().as_bytes(),
            ));
        }
        routes().handle(self, &request)
    }
}

/// The endpoints the fake answers.
fn routes() -> &'static Router<FakeTransport> {
    static ROUTES: OnceLock<Router<FakeTransport>> = OnceLock::new();
    ROUTES.get_or_init(|| {
        Router::new()
            .round_reads()
            .route(endpoint!(GET "/version"), FakeTransport::version)
            .route(
                endpoint!(GET "/cluster/status"),
                FakeTransport::cluster_status,
            )
            .route(endpoint!(GET "/cluster/nextid"), FakeTransport::next_id)
            .route(
                endpoint!(GET "/cluster/ha/status/manager_status"),
                FakeTransport::ha_manager_status,
            )
            .route(
                endpoint!(GET "/access/permissions"),
                FakeTransport::permissions,
            )
            .route(endpoint!(GET "/pools"), FakeTransport::pools)
            .route(endpoint!(GET "/pools/{poolid}"), FakeTransport::pool)
            .route(endpoint!(GET "/nodes"), FakeTransport::nodes)
            .route(
                endpoint!(GET "/nodes/{node}/status"),
                FakeTransport::node_status,
            )
            .route(
                endpoint!(GET "/nodes/{node}/storage/{storage}/content"),
                FakeTransport::storage_content,
            )
            .route(endpoint!(GET "/nodes/{node}/{kind}"), FakeTransport::guests)
            .route(
                endpoint!(GET "/nodes/{node}/{kind}/{vmid}/status/current"),
                FakeTransport::guest_status,
            )
            .route(
                endpoint!(GET "/nodes/{node}/{kind}/{vmid}/config"),
                FakeTransport::guest_config,
            )
    })
}

fn not_found(request: &Request, message: &str) -> crate::Error {
    api_error(request.method.as_str(), &request.path, 500, message, b"")
}

fn kind_of(request: &Request, c: &Captures) -> Result<GuestKind> {
    match c.get("kind") {
        "qemu" => Ok(GuestKind::Qemu),
        "lxc" => Ok(GuestKind::Lxc),
        _ => Err(crate::router::not_routed(request)),
    }
}

impl FakeTransport {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn version(&self, _: &Request, _: &Captures) -> Result<Data> {
        reply(Version {
            version: Some("9.2.11".into()),
            release: Some("9.2".into()),
            repoid: Some("3a6b1f0c".into()),
            console: None,
        })
    }

    fn cluster_status(&self, _: &Request, _: &Captures) -> Result<Data> {
        let state = self.state();
        let entries: Vec<ClusterStatusEntry> = nodes_of(&state.snapshot)
            .map(|r| ClusterStatusEntry {
                id: r.id.clone(),
                name: r.node.clone(),
                kind: Some("node".into()),
                online: Some(r.status.as_deref() == Some("online")),
                ..ClusterStatusEntry::default()
            })
            .collect();
        reply(entries)
    }

    fn next_id(&self, request: &Request, _: &Captures) -> Result<Data> {
        let query: crate::types::NextIdQuery = request.decode_params()?;
        let state = self.state();
        let used: BTreeSet<u32> = state
            .snapshot
            .resources
            .iter()
            .filter_map(|r| r.vmid)
            .collect();
        match query.vmid {
            Some(id) if used.contains(&id) => Err(api_error(
                "GET",
                "/cluster/nextid",
                400,
                "Parameter verification failed.",
                format!(r#"{{"data":null,"errors":{{"vmid":"VM {id} already exists"}}}}"#)
                    .as_bytes(),
            )),
            Some(id) => reply(id.to_string()),
            None => reply(
                (100..)
                    .find(|id| !used.contains(id))
                    .unwrap_or(100)
                    .to_string(),
            ),
        }
    }

    fn nodes(&self, _: &Request, _: &Captures) -> Result<Data> {
        let state = self.state();
        let nodes: Vec<NodeListEntry> = nodes_of(&state.snapshot)
            .map(|r| NodeListEntry {
                node: r.node.clone().unwrap_or_default(),
                status: r.status.clone(),
                cpu: r.cpu,
                maxcpu: r.maxcpu,
                mem: r.mem,
                maxmem: r.maxmem,
                uptime: r.uptime,
                ..NodeListEntry::default()
            })
            .collect();
        reply(nodes)
    }

    fn node_status(&self, request: &Request, c: &Captures) -> Result<Data> {
        let state = self.state();
        let r = node_resource(&state.snapshot, c.get("node"))
            .ok_or_else(|| not_found(request, "no such node"))?;
        reply(NodeStatus {
            cpu: r.cpu,
            uptime: r.uptime,
            ..NodeStatus::default()
        })
    }

    /// The snapshot's volumes of the node on that storage.
    fn storage_content(&self, _: &Request, c: &Captures) -> Result<Data> {
        let (node, storage) = (c.get("node"), c.get("storage"));
        let state = self.state();
        let volumes: Vec<&crate::types::Volume> = state
            .snapshot
            .nodes
            .get(node)
            .map(|n| {
                n.volumes
                    .iter()
                    .filter(|v| v.storage() == Some(storage))
                    .collect()
            })
            .unwrap_or_default();
        reply(volumes)
    }

    fn guests(&self, request: &Request, c: &Captures) -> Result<Data> {
        let kind = kind_of(request, c)?;
        let node = c.get("node");
        let state = self.state();
        let entries: Vec<GuestListEntry> = state
            .snapshot
            .resources
            .iter()
            .filter(|r| r.kind.as_deref() == Some(kind.as_str()) && r.node.as_deref() == Some(node))
            .map(list_entry)
            .collect();
        reply(entries)
    }

    fn guest_status(&self, request: &Request, c: &Captures) -> Result<Data> {
        let state = self.state();
        let (_, r) = requested_guest(&state.snapshot, request, c)?;
        reply(GuestStatusCurrent {
            entry: list_entry(r),
            ..GuestStatusCurrent::default()
        })
    }

    fn guest_config(&self, request: &Request, c: &Captures) -> Result<Data> {
        let state = self.state();
        let (vmid, r) = requested_guest(&state.snapshot, request, c)?;
        let mut values = BTreeMap::new();
        if let Some(name) = &r.name {
            values.insert("name".into(), name.clone().into());
        }
        if let Some(maxmem) = r.maxmem {
            values.insert("memory".into(), (maxmem >> 20).to_string().into());
        }
        if let Some(tags) = &r.tags {
            values.insert("tags".into(), tags.clone().into());
        }
        reply(GuestConfig {
            digest: Some(format!("{vmid:040x}")),
            values,
        })
    }

    fn ha_manager_status(&self, _: &Request, _: &Captures) -> Result<Data> {
        reply(ManagerStatusResponse::default())
    }

    fn permissions(&self, _: &Request, _: &Captures) -> Result<Data> {
        let all = [
            "Sys.Audit",
            "VM.Audit",
            "VM.Migrate",
            "VM.Clone",
            "VM.Allocate",
        ]
        .into_iter()
        .map(|p| (p.to_owned(), 1))
        .collect();
        reply(Permissions(BTreeMap::from([("/".to_owned(), all)])))
    }

    fn pools(&self, _: &Request, _: &Captures) -> Result<Data> {
        let state = self.state();
        let ids: BTreeSet<&String> = state
            .snapshot
            .resources
            .iter()
            .filter_map(|r| r.pool.as_ref())
            .collect();
        let pools: Vec<PoolListEntry> = ids
            .into_iter()
            .map(|id| PoolListEntry {
                poolid: id.clone(),
                ..PoolListEntry::default()
            })
            .collect();
        reply(pools)
    }

    fn pool(&self, _: &Request, c: &Captures) -> Result<Data> {
        let poolid = c.get("poolid");
        let state = self.state();
        reply(Pool {
            comment: None,
            members: state
                .snapshot
                .resources
                .iter()
                .filter(|r| r.pool.as_deref() == Some(poolid) && r.kind.as_deref() != Some("pool"))
                .cloned()
                .collect(),
        })
    }
}

/// The round's reads, routed by [`Router::round_reads`], answered from its state.
impl RoundReads for FakeTransport {
    fn cluster_resources(&self, request: &Request, _: &Captures) -> Result<Data> {
        let ResourcesQuery { kind } = request.decode_params()?;
        let keep = |r: &&Resource| match kind {
            None => true,
            Some(ResourceType::Vm) => matches!(r.kind.as_deref(), Some("qemu" | "lxc")),
            Some(ResourceType::Node) => r.kind.as_deref() == Some("node"),
            Some(ResourceType::Storage) => r.kind.as_deref() == Some("storage"),
            Some(ResourceType::Sdn) => r.kind.as_deref() == Some("sdn"),
        };
        reply(
            self.state()
                .snapshot
                .resources
                .iter()
                .filter(keep)
                .collect::<Vec<_>>(),
        )
    }

    fn cluster_options(&self, _: &Request, _: &Captures) -> Result<Data> {
        reply(&self.state().snapshot.options)
    }

    fn cluster_tasks(&self, _: &Request, _: &Captures) -> Result<Data> {
        reply(&self.state().snapshot.tasks)
    }

    fn ha_resources(&self, _: &Request, _: &Captures) -> Result<Data> {
        reply(&self.state().snapshot.ha.resources)
    }

    fn ha_rules(&self, _: &Request, _: &Captures) -> Result<Data> {
        reply(&self.state().snapshot.ha.rules)
    }

    fn ha_status(&self, _: &Request, _: &Captures) -> Result<Data> {
        reply(&self.state().snapshot.ha.status)
    }

    fn node_config(&self, request: &Request, c: &Captures) -> Result<Data> {
        let node = c.get("node");
        let state = self.state();
        node_resource(&state.snapshot, node).ok_or_else(|| not_found(request, "no such node"))?;
        reply(NodeConfig {
            description: state.snapshot.nodes.get(node).and_then(|n| n.notes.clone()),
            ..NodeConfig::default()
        })
    }

    fn node_rrddata(&self, request: &Request, c: &Captures) -> Result<Data> {
        let node = c.get("node");
        let state = self.state();
        node_resource(&state.snapshot, node).ok_or_else(|| not_found(request, "no such node"))?;
        if let Some(rows) = state.rrd_rows.get(node) {
            return reply(rows);
        }
        let rows: Vec<&RrdRow> = state
            .snapshot
            .nodes
            .get(node)
            .and_then(|n| n.rrddata.as_ref())
            .into_iter()
            .collect();
        reply(rows)
    }

    fn node_storage(&self, _: &Request, c: &Captures) -> Result<Data> {
        let node = c.get("node");
        let state = self.state();
        let avail = state.snapshot.nodes.get(node).map(|n| &n.storage_avail);
        let entries: Vec<StorageEntry> = state
            .snapshot
            .resources
            .iter()
            .filter(|r| r.kind.as_deref() == Some("storage") && r.node.as_deref() == Some(node))
            .map(|r| {
                let storage = r.storage.clone().unwrap_or_default();
                let known = avail.and_then(|a| a.get(&storage).copied());
                StorageEntry {
                    kind: r.plugintype.clone(),
                    content: r.content.clone(),
                    shared: r.shared,
                    active: Some(true),
                    total: r.maxdisk,
                    used: r.disk,
                    avail: known.or(r.maxdisk.zip(r.disk).map(|(t, u)| t.saturating_sub(u))),
                    storage,
                    ..StorageEntry::default()
                }
            })
            .collect();
        reply(entries)
    }

    fn task_status(&self, request: &Request, c: &Captures) -> Result<Data> {
        let mut state = self.state();
        let queue = state.tasks.get_mut(c.get("upid")).ok_or_else(|| {
            api_error(
                "GET",
                &request.path,
                400,
                "Parameter verification failed.",
                br#"{"data":null,"errors":{"upid":"no such task"}}"#,
            )
        })?;
        let status = if queue.len() > 1 {
            queue.pop_front()
        } else {
            queue.front().cloned()
        };
        reply(status.ok_or_else(|| not_found(request, "no such task"))?)
    }

    fn task_log(&self, request: &Request, c: &Captures) -> Result<Data> {
        let query: TaskLogQuery = request.decode_params()?;
        let lines = self
            .state()
            .task_logs
            .get(c.get("upid"))
            .cloned()
            .unwrap_or_default();
        let start = usize::try_from(query.start.unwrap_or(0)).unwrap_or(usize::MAX);
        let limit = usize::try_from(query.limit.unwrap_or(50)).unwrap_or(usize::MAX);
        reply(
            lines
                .into_iter()
                .skip(start)
                .take(limit)
                .collect::<Vec<_>>(),
        )
    }
}

fn nodes_of(snapshot: &Snapshot) -> impl Iterator<Item = &Resource> {
    snapshot
        .resources
        .iter()
        .filter(|r| r.kind.as_deref() == Some("node"))
}

fn node_resource<'a>(snapshot: &'a Snapshot, node: &str) -> Option<&'a Resource> {
    nodes_of(snapshot).find(|r| r.node.as_deref() == Some(node))
}

fn guest<'a>(
    snapshot: &'a Snapshot,
    node: &str,
    kind: GuestKind,
    vmid: u32,
) -> Option<&'a Resource> {
    snapshot.resources.iter().find(|r| {
        r.kind.as_deref() == Some(kind.as_str())
            && r.vmid == Some(vmid)
            && r.node.as_deref() == Some(node)
    })
}

/// The guest a `/nodes/{node}/{kind}/{vmid}/...` request names, with its vmid,
/// or the error Proxmox answers when its config does not exist.
fn requested_guest<'a>(
    snapshot: &'a Snapshot,
    request: &Request,
    c: &Captures,
) -> Result<(u32, &'a Resource)> {
    let (kind, vmid) = (kind_of(request, c)?, c.u32("vmid", request)?);
    let r = guest(snapshot, c.get("node"), kind, vmid).ok_or_else(|| {
        not_found(
            request,
            &format!("Configuration file for {vmid} does not exist"),
        )
    })?;
    Ok((vmid, r))
}

fn list_entry(r: &Resource) -> GuestListEntry {
    GuestListEntry {
        vmid: r.vmid.unwrap_or_default(),
        status: r.status.clone(),
        name: r.name.clone(),
        cpu: r.cpu,
        cpus: r.maxcpu,
        mem: r.mem,
        maxmem: r.maxmem,
        maxdisk: r.maxdisk,
        uptime: r.uptime,
        lock: r.lock.clone(),
        tags: r.tags.clone(),
        template: r.template,
        ..GuestListEntry::default()
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::Error;
    use crate::wait::TaskWait;

    const UPID: &str = "UPID:pve2:000A1B2C:0123ABCD:6929A5C0:qmigrate:105:root@pam:";

    fn status(state: &str, exit: Option<&str>) -> TaskStatus {
        TaskStatus {
            upid: UPID.into(),
            status: state.into(),
            exitstatus: exit.map(str::to_owned),
            ..TaskStatus::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn wait_task_polls_at_its_interval_until_the_task_stops() {
        let upid: Upid = UPID.parse().unwrap();
        let running = status("running", None);
        let fake = FakeApi::new(Snapshot::default()).with_task(
            &upid,
            vec![
                running.clone(),
                running.clone(),
                running,
                status("stopped", Some("WARNINGS: 1")),
            ],
            vec![],
        );
        let start = tokio::time::Instant::now();
        let wait = TaskWait {
            interval: Duration::from_secs(2),
            ..TaskWait::default()
        };
        let done = fake.wait_task(&upid, &wait).await.unwrap();
        assert!(done.is_success());
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(6),
            "three sleeps of 2 s"
        );
        assert_eq!(
            fake.calls(),
            vec![format!("GET /nodes/pve2/tasks/{UPID}/status"); 4]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_task_carries_its_exit_status_and_last_log_lines() {
        let upid: Upid = UPID.parse().unwrap();
        let fake = FakeApi::new(Snapshot::default()).with_task(
            &upid,
            vec![status(
                "stopped",
                Some("can't migrate running VM without --online"),
            )],
            vec![
                "a",
                "b",
                "c",
                "TASK ERROR: can't migrate running VM without --online",
            ],
        );
        let wait = TaskWait {
            log_lines: 2,
            ..TaskWait::default()
        };
        let e = fake.wait_task(&upid, &wait).await.unwrap_err();
        let Error::TaskFailed {
            exitstatus, log, ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert_eq!(exitstatus, "can't migrate running VM without --online");
        assert_eq!(
            log,
            &["c", "TASK ERROR: can't migrate running VM without --online"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_running_past_the_deadline_is_a_timeout() {
        let upid: Upid = UPID.parse().unwrap();
        let fake = FakeApi::new(Snapshot::default()).with_task(
            &upid,
            vec![status("running", None)],
            vec![],
        );
        let wait = TaskWait {
            interval: Duration::from_secs(1),
            timeout: Some(Duration::from_secs(10)),
            log_lines: 5,
        };
        let e = fake.wait_task(&upid, &wait).await.unwrap_err();
        assert!(
            matches!(
                e,
                Error::TaskTimeout {
                    waited_secs: 10,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(fake.call_count(), 11);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unknown_upid_is_not_found() {
        let upid: Upid = UPID.parse().unwrap();
        let e = FakeApi::new(Snapshot::default())
            .wait_task(&upid, &TaskWait::default())
            .await
            .unwrap_err();
        assert!(e.is_not_found(), "{e:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn latency_and_failures_are_injected_per_call() {
        let fake = FakeApi::new(Snapshot::default())
            .with_latency(Duration::from_millis(5))
            .fail(
                "GET /cluster/ha/rules",
                403,
                "Permission check failed (/, Sys.Audit)",
            );
        let start = tokio::time::Instant::now();
        assert!(fake.cluster_tasks().await.unwrap().is_empty());
        let e = fake.ha_rules().await.unwrap_err();
        assert_eq!(e.status(), Some(403));
        assert_eq!(start.elapsed(), Duration::from_millis(10));
        assert_eq!(
            fake.calls(),
            ["GET /cluster/tasks", "GET /cluster/ha/rules"]
        );
    }
}
