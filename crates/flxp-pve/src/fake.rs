//! A scripted, in-memory [`PveApi`] for tests and benchmarks (cargo feature `fake`).
//!
//! It answers the read endpoints from a Contract 1 snapshot, counts every call by endpoint,
//! can wait a fixed latency per call (with `tokio::time`, so paused-time tests stay instant),
//! fail chosen endpoints with a Proxmox error, and play scripted task statuses. Writes answer
//! 501, except a disk resize given an answer with [`FakeApi::with_resize`] (its requests are kept
//! for inspection). It is not a simulator: nothing changes over time.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;
use tokio::time::Duration;

use flxp_core::Snapshot;

use crate::api::PveApi;
use crate::error::{Error, Result, api_error};
use crate::types::{
    CloneParams, ClusterOptions, ClusterStatusEntry, ConfigUpdate, CreateParams, DeleteParams,
    GuestConfig, GuestKind, GuestListEntry, GuestStatusCurrent, HaMigrateParams, HaMigrateResponse,
    HaResource, HaRule, HaStatusEntry, LxcMigrateParams, LxcMigratePrecondition,
    ManagerStatusResponse, NodeConfig, NodeConfigUpdate, NodeListEntry, NodeStatus, Permissions,
    PermissionsQuery, Pool, PoolListEntry, QemuMigrateParams, QemuMigratePrecondition,
    ResizeParams, Resource, ResourceType, RrdQuery, RrdRow, ShutdownParams, StartParams,
    StopParams, StorageEntry, StorageQuery, Task, TaskLogLine, TaskLogQuery, TaskStatus, Upid,
    Version,
};

/// An in-memory [`PveApi`] answering from a snapshot; see the module docs.
#[derive(Debug, Default)]
pub struct FakeApi {
    snapshot: Snapshot,
    latency: Duration,
    rrd_rows: BTreeMap<String, Vec<RrdRow>>,
    calls: Mutex<Vec<String>>,
    failures: Mutex<BTreeMap<String, (u16, String)>>,
    tasks: Mutex<BTreeMap<String, VecDeque<TaskStatus>>>,
    task_logs: BTreeMap<String, Vec<TaskLogLine>>,
    /// The answer to resizes: `None` answers 501; `Some(None)` a synchronous (PVE 7) resize.
    resize_answer: Option<Option<Upid>>,
    resizes: Mutex<Vec<(String, u32, ResizeParams)>>,
}

impl FakeApi {
    /// A fake answering from this snapshot, with no latency.
    pub fn new(snapshot: Snapshot) -> Self {
        Self {
            snapshot,
            ..Self::default()
        }
    }

    /// Waits this long in every call (a network round trip).
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Answers `rrddata` of `node` with these rows instead of the snapshot's one row.
    pub fn with_rrd_rows(mut self, node: &str, rows: Vec<RrdRow>) -> Self {
        self.rrd_rows.insert(node.to_owned(), rows);
        self
    }

    /// Makes calls to `endpoint` (`GET /cluster/ha/rules`) fail with this Proxmox error.
    pub fn fail(self, endpoint: &str, status: u16, message: &str) -> Self {
        self.lock_failures()
            .insert(endpoint.to_owned(), (status, message.to_owned()));
        self
    }

    /// Plays these statuses, one per `task_status` call (the last one repeats), and this log.
    pub fn with_task(mut self, upid: &Upid, statuses: Vec<TaskStatus>, log: Vec<&str>) -> Self {
        let lines = log
            .into_iter()
            .enumerate()
            .map(|(i, t)| TaskLogLine {
                n: Some(i as u64 + 1),
                t: Some(t.to_owned()),
            })
            .collect();
        self.task_logs.insert(upid.to_string(), lines);
        self.lock_tasks()
            .insert(upid.to_string(), statuses.into_iter().collect());
        self
    }

    /// Answers disk resizes with this task (`None`: as PVE 7 does, with no task), which
    /// [`FakeApi::with_task`] can script.
    pub fn with_resize(mut self, answer: Option<Upid>) -> Self {
        self.resize_answer = Some(answer);
        self
    }

    /// Every resize asked for so far: node, VMID and parameters, in order.
    pub fn resizes(&self) -> Vec<(String, u32, ResizeParams)> {
        self.resizes
            .lock()
            .map(|r| r.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Every call so far, as `METHOD /path`, in order.
    pub fn calls(&self) -> Vec<String> {
        self.calls
            .lock()
            .map(|c| c.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// How many calls were made.
    pub fn call_count(&self) -> usize {
        self.calls().len()
    }

    fn lock_failures(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (u16, String)>> {
        self.failures.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_tasks(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, VecDeque<TaskStatus>>> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a call, waits the latency, and fails it if scripted to.
    async fn enter(&self, method: &str, path: &str) -> Result<()> {
        let endpoint = format!("{method} {path}");
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(endpoint.clone());
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
        match self.lock_failures().get(&endpoint) {
            Some((status, message)) => Err(api_error(
                method,
                path,
                *status,
                message,
                serde_json::json!({ "data": null, "message": format!("{message}\n") })
                    .to_string()
                    .as_bytes(),
            )),
            None => Ok(()),
        }
    }

    fn not_found(method: &str, path: &str, message: &str) -> Error {
        api_error(method, path, 500, message, b"")
    }

    fn unsupported(method: &str, path: &str) -> Error {
        api_error(
            method,
            path,
            501,
            &format!("Method '{method} {path}' not implemented by the fake"),
            b"",
        )
    }

    fn node_resource(&self, node: &str) -> Option<&Resource> {
        self.snapshot
            .resources
            .iter()
            .find(|r| r.kind.as_deref() == Some("node") && r.node.as_deref() == Some(node))
    }

    fn guest(&self, node: &str, kind: GuestKind, vmid: u32) -> Option<&Resource> {
        self.snapshot.resources.iter().find(|r| {
            r.kind.as_deref() == Some(kind.as_str())
                && r.vmid == Some(vmid)
                && r.node.as_deref() == Some(node)
        })
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
}

#[async_trait]
impl PveApi for FakeApi {
    async fn version(&self) -> Result<Version> {
        self.enter("GET", "/version").await?;
        Ok(Version {
            version: Some("9.2.11".into()),
            release: Some("9.2".into()),
            repoid: Some("3a6b1f0c".into()),
            console: None,
        })
    }

    async fn cluster_resources(&self, kind: Option<ResourceType>) -> Result<Vec<Resource>> {
        self.enter("GET", "/cluster/resources").await?;
        let keep = |r: &&Resource| match kind {
            None => true,
            Some(ResourceType::Vm) => matches!(r.kind.as_deref(), Some("qemu" | "lxc")),
            Some(ResourceType::Node) => r.kind.as_deref() == Some("node"),
            Some(ResourceType::Storage) => r.kind.as_deref() == Some("storage"),
            Some(ResourceType::Sdn) => r.kind.as_deref() == Some("sdn"),
        };
        Ok(self
            .snapshot
            .resources
            .iter()
            .filter(keep)
            .cloned()
            .collect())
    }

    async fn cluster_status(&self) -> Result<Vec<ClusterStatusEntry>> {
        self.enter("GET", "/cluster/status").await?;
        Ok(self
            .snapshot
            .resources
            .iter()
            .filter(|r| r.kind.as_deref() == Some("node"))
            .map(|r| ClusterStatusEntry {
                id: r.id.clone(),
                name: r.node.clone(),
                kind: Some("node".into()),
                online: Some(r.status.as_deref() == Some("online")),
                ..ClusterStatusEntry::default()
            })
            .collect())
    }

    async fn cluster_options(&self) -> Result<ClusterOptions> {
        self.enter("GET", "/cluster/options").await?;
        Ok(self.snapshot.options.clone())
    }

    async fn cluster_tasks(&self) -> Result<Vec<Task>> {
        self.enter("GET", "/cluster/tasks").await?;
        Ok(self.snapshot.tasks.clone())
    }

    async fn next_id(&self, vmid: Option<u32>) -> Result<u32> {
        self.enter("GET", "/cluster/nextid").await?;
        let used: std::collections::BTreeSet<u32> = self
            .snapshot
            .resources
            .iter()
            .filter_map(|r| r.vmid)
            .collect();
        match vmid {
            Some(id) if used.contains(&id) => Err(api_error(
                "GET",
                "/cluster/nextid",
                400,
                "Parameter verification failed.",
                format!(r#"{{"data":null,"errors":{{"vmid":"VM {id} already exists"}}}}"#)
                    .as_bytes(),
            )),
            Some(id) => Ok(id),
            None => Ok((100..).find(|id| !used.contains(id)).unwrap_or(100)),
        }
    }

    async fn nodes(&self) -> Result<Vec<NodeListEntry>> {
        self.enter("GET", "/nodes").await?;
        Ok(self
            .snapshot
            .resources
            .iter()
            .filter(|r| r.kind.as_deref() == Some("node"))
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
            .collect())
    }

    async fn node_status(&self, node: &str) -> Result<NodeStatus> {
        let path = format!("/nodes/{node}/status");
        self.enter("GET", &path).await?;
        let r = self
            .node_resource(node)
            .ok_or_else(|| Self::not_found("GET", &path, "no such node"))?;
        Ok(NodeStatus {
            cpu: r.cpu,
            uptime: r.uptime,
            ..NodeStatus::default()
        })
    }

    async fn node_config(&self, node: &str) -> Result<NodeConfig> {
        let path = format!("/nodes/{node}/config");
        self.enter("GET", &path).await?;
        self.node_resource(node)
            .ok_or_else(|| Self::not_found("GET", &path, "no such node"))?;
        Ok(NodeConfig {
            description: self.snapshot.nodes.get(node).and_then(|n| n.notes.clone()),
            ..NodeConfig::default()
        })
    }

    async fn update_node_config(&self, node: &str, _update: &NodeConfigUpdate) -> Result<()> {
        let path = format!("/nodes/{node}/config");
        self.enter("PUT", &path).await?;
        Err(Self::unsupported("PUT", &path))
    }

    async fn node_rrddata(&self, node: &str, _query: &RrdQuery) -> Result<Vec<RrdRow>> {
        let path = format!("/nodes/{node}/rrddata");
        self.enter("GET", &path).await?;
        self.node_resource(node)
            .ok_or_else(|| Self::not_found("GET", &path, "no such node"))?;
        if let Some(rows) = self.rrd_rows.get(node) {
            return Ok(rows.clone());
        }
        Ok(self
            .snapshot
            .nodes
            .get(node)
            .and_then(|n| n.rrddata.clone())
            .into_iter()
            .collect())
    }

    async fn node_storage(&self, node: &str, _query: &StorageQuery) -> Result<Vec<StorageEntry>> {
        self.enter("GET", &format!("/nodes/{node}/storage")).await?;
        Ok(self
            .snapshot
            .resources
            .iter()
            .filter(|r| r.kind.as_deref() == Some("storage") && r.node.as_deref() == Some(node))
            .map(|r| StorageEntry {
                storage: r.storage.clone().unwrap_or_default(),
                kind: r.plugintype.clone(),
                content: r.content.clone(),
                shared: r.shared,
                total: r.maxdisk,
                used: r.disk,
                avail: r.maxdisk.zip(r.disk).map(|(t, u)| t.saturating_sub(u)),
                ..StorageEntry::default()
            })
            .collect())
    }

    async fn guests(&self, node: &str, kind: GuestKind) -> Result<Vec<GuestListEntry>> {
        self.enter("GET", &format!("/nodes/{node}/{kind}")).await?;
        Ok(self
            .snapshot
            .resources
            .iter()
            .filter(|r| r.kind.as_deref() == Some(kind.as_str()) && r.node.as_deref() == Some(node))
            .map(Self::list_entry)
            .collect())
    }

    async fn guest_status(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
    ) -> Result<GuestStatusCurrent> {
        let path = format!("/nodes/{node}/{kind}/{vmid}/status/current");
        self.enter("GET", &path).await?;
        let r = self.guest(node, kind, vmid).ok_or_else(|| {
            Self::not_found(
                "GET",
                &path,
                &format!("Configuration file for {vmid} does not exist"),
            )
        })?;
        Ok(GuestStatusCurrent {
            entry: Self::list_entry(r),
            ..GuestStatusCurrent::default()
        })
    }

    async fn guest_config(&self, node: &str, kind: GuestKind, vmid: u32) -> Result<GuestConfig> {
        let path = format!("/nodes/{node}/{kind}/{vmid}/config");
        self.enter("GET", &path).await?;
        let r = self.guest(node, kind, vmid).ok_or_else(|| {
            Self::not_found(
                "GET",
                &path,
                &format!("Configuration file for {vmid} does not exist"),
            )
        })?;
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
        Ok(GuestConfig {
            digest: Some(format!("{vmid:040x}")),
            values,
        })
    }

    async fn update_guest_config(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        _update: &ConfigUpdate,
    ) -> Result<()> {
        let path = format!("/nodes/{node}/{kind}/{vmid}/config");
        self.enter("PUT", &path).await?;
        Err(Self::unsupported("PUT", &path))
    }

    async fn qemu_migrate_precondition(
        &self,
        node: &str,
        vmid: u32,
        _target: Option<&str>,
    ) -> Result<QemuMigratePrecondition> {
        let path = format!("/nodes/{node}/qemu/{vmid}/migrate");
        self.enter("GET", &path).await?;
        Err(Self::unsupported("GET", &path))
    }

    async fn lxc_migrate_precondition(
        &self,
        node: &str,
        vmid: u32,
        _target: Option<&str>,
    ) -> Result<LxcMigratePrecondition> {
        let path = format!("/nodes/{node}/lxc/{vmid}/migrate");
        self.enter("GET", &path).await?;
        Err(Self::unsupported("GET", &path))
    }

    async fn migrate_qemu(
        &self,
        node: &str,
        vmid: u32,
        _params: &QemuMigrateParams,
    ) -> Result<Upid> {
        let path = format!("/nodes/{node}/qemu/{vmid}/migrate");
        self.enter("POST", &path).await?;
        Err(Self::unsupported("POST", &path))
    }

    async fn migrate_lxc(&self, node: &str, vmid: u32, _params: &LxcMigrateParams) -> Result<Upid> {
        let path = format!("/nodes/{node}/lxc/{vmid}/migrate");
        self.enter("POST", &path).await?;
        Err(Self::unsupported("POST", &path))
    }

    async fn task_status(&self, upid: &Upid) -> Result<TaskStatus> {
        let path = format!("/nodes/{}/tasks/{upid}/status", upid.node());
        self.enter("GET", &path).await?;
        let mut tasks = self.lock_tasks();
        let queue = tasks.get_mut(upid.as_str()).ok_or_else(|| {
            api_error(
                "GET",
                &path,
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
        status.ok_or_else(|| Self::not_found("GET", &path, "no such task"))
    }

    async fn task_log(&self, upid: &Upid, query: &TaskLogQuery) -> Result<Vec<TaskLogLine>> {
        let path = format!("/nodes/{}/tasks/{upid}/log", upid.node());
        self.enter("GET", &path).await?;
        let lines = self
            .task_logs
            .get(upid.as_str())
            .cloned()
            .unwrap_or_default();
        let start = usize::try_from(query.start.unwrap_or(0)).unwrap_or(usize::MAX);
        let limit = usize::try_from(query.limit.unwrap_or(50)).unwrap_or(usize::MAX);
        Ok(lines.into_iter().skip(start).take(limit).collect())
    }

    async fn clone_qemu(&self, node: &str, vmid: u32, _params: &CloneParams) -> Result<Upid> {
        let path = format!("/nodes/{node}/qemu/{vmid}/clone");
        self.enter("POST", &path).await?;
        Err(Self::unsupported("POST", &path))
    }

    async fn create_qemu(&self, node: &str, _params: &CreateParams) -> Result<Upid> {
        let path = format!("/nodes/{node}/qemu");
        self.enter("POST", &path).await?;
        Err(Self::unsupported("POST", &path))
    }

    async fn resize_disk(
        &self,
        node: &str,
        vmid: u32,
        params: &ResizeParams,
    ) -> Result<Option<Upid>> {
        let path = format!("/nodes/{node}/qemu/{vmid}/resize");
        self.enter("PUT", &path).await?;
        let answer = self
            .resize_answer
            .clone()
            .ok_or_else(|| Self::unsupported("PUT", &path))?;
        self.resizes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((node.to_owned(), vmid, params.clone()));
        Ok(answer)
    }

    async fn start_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        _params: &StartParams,
    ) -> Result<Upid> {
        let path = format!("/nodes/{node}/{kind}/{vmid}/status/start");
        self.enter("POST", &path).await?;
        Err(Self::unsupported("POST", &path))
    }

    async fn shutdown_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        _params: &ShutdownParams,
    ) -> Result<Upid> {
        let path = format!("/nodes/{node}/{kind}/{vmid}/status/shutdown");
        self.enter("POST", &path).await?;
        Err(Self::unsupported("POST", &path))
    }

    async fn stop_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        _params: &StopParams,
    ) -> Result<Upid> {
        let path = format!("/nodes/{node}/{kind}/{vmid}/status/stop");
        self.enter("POST", &path).await?;
        Err(Self::unsupported("POST", &path))
    }

    async fn delete_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        _params: &DeleteParams,
    ) -> Result<Upid> {
        let path = format!("/nodes/{node}/{kind}/{vmid}");
        self.enter("DELETE", &path).await?;
        Err(Self::unsupported("DELETE", &path))
    }

    async fn ha_resources(&self) -> Result<Vec<HaResource>> {
        self.enter("GET", "/cluster/ha/resources").await?;
        Ok(self.snapshot.ha.resources.clone())
    }

    async fn ha_rules(&self) -> Result<Vec<HaRule>> {
        self.enter("GET", "/cluster/ha/rules").await?;
        Ok(self.snapshot.ha.rules.clone())
    }

    async fn ha_status_current(&self) -> Result<Vec<HaStatusEntry>> {
        self.enter("GET", "/cluster/ha/status/current").await?;
        Ok(self.snapshot.ha.status.clone())
    }

    async fn ha_manager_status(&self) -> Result<ManagerStatusResponse> {
        self.enter("GET", "/cluster/ha/status/manager_status")
            .await?;
        Ok(ManagerStatusResponse::default())
    }

    async fn ha_migrate(&self, sid: &str, _params: &HaMigrateParams) -> Result<HaMigrateResponse> {
        let path = format!("/cluster/ha/resources/{sid}/migrate");
        self.enter("POST", &path).await?;
        Err(Self::unsupported("POST", &path))
    }

    async fn permissions(&self, _query: &PermissionsQuery) -> Result<Permissions> {
        self.enter("GET", "/access/permissions").await?;
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
        Ok(Permissions(BTreeMap::from([("/".to_owned(), all)])))
    }

    async fn pools(&self) -> Result<Vec<PoolListEntry>> {
        self.enter("GET", "/pools").await?;
        let ids: std::collections::BTreeSet<&String> = self
            .snapshot
            .resources
            .iter()
            .filter_map(|r| r.pool.as_ref())
            .collect();
        Ok(ids
            .into_iter()
            .map(|id| PoolListEntry {
                poolid: id.clone(),
                ..PoolListEntry::default()
            })
            .collect())
    }

    async fn pool(&self, poolid: &str) -> Result<Pool> {
        self.enter("GET", &format!("/pools/{poolid}")).await?;
        Ok(Pool {
            comment: None,
            members: self
                .snapshot
                .resources
                .iter()
                .filter(|r| r.pool.as_deref() == Some(poolid) && r.kind.as_deref() != Some("pool"))
                .cloned()
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;
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
    async fn resizes_are_recorded_and_answered_as_scripted() {
        use crate::types::ResizeParams;

        let upid: Upid = "UPID:pve1:000A1B2C:0123ABCD:6929A5C0:resize:120:root@pam:"
            .parse()
            .unwrap();
        let params = ResizeParams::to_size("scsi0", 64 << 30);
        let e = FakeApi::new(Snapshot::default())
            .resize_disk("pve1", 120, &params)
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(501));
        let fake = FakeApi::new(Snapshot::default()).with_resize(Some(upid.clone()));
        assert_eq!(
            fake.resize_disk("pve1", 120, &params).await.unwrap(),
            Some(upid)
        );
        assert_eq!(
            fake.resizes(),
            vec![("pve1".to_owned(), 120, params.clone())]
        );
        assert_eq!(fake.calls(), ["PUT /nodes/pve1/qemu/120/resize"]);
        let sync = FakeApi::new(Snapshot::default()).with_resize(None);
        assert_eq!(sync.resize_disk("pve1", 120, &params).await.unwrap(), None);
        let failing = FakeApi::new(Snapshot::default()).with_resize(None).fail(
            "PUT /nodes/pve1/qemu/120/resize",
            500,
            "VM is locked (clone)",
        );
        let e = failing.resize_disk("pve1", 120, &params).await.unwrap_err();
        assert!(e.is_locked(), "{e:?}");
        assert!(
            failing.resizes().is_empty(),
            "a failed call resized nothing"
        );
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
