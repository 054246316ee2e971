//! [`MeteredApi`]: a [`PveApi`] that times every call, counts failures by endpoint, and records
//! when the zone last answered (what `/readyz` reads). It decides nothing and changes no call.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use flxp_pve::types::{
    CloneParams, ClusterOptions, ClusterStatusEntry, ConfigUpdate, CreateParams, DeleteParams,
    GuestConfig, GuestKind, GuestListEntry, GuestStatusCurrent, HaMigrateParams, HaMigrateResponse,
    HaResource, HaRule, HaStatusEntry, LxcMigrateParams, LxcMigratePrecondition,
    ManagerStatusResponse, NodeConfig, NodeConfigUpdate, NodeListEntry, NodeStatus, Permissions,
    PermissionsQuery, Pool, PoolListEntry, QemuMigrateParams, QemuMigratePrecondition,
    ResizeParams, Resource, ResourceType, RrdQuery, RrdRow, ShutdownParams, StartParams,
    StopParams, StorageEntry, StorageQuery, Task, TaskLogLine, TaskLogQuery, TaskStatus, Upid,
    Version,
};
use flxp_pve::{ApiErrorKind, Error, PveApi, Result};
use tokio::time::Instant;

use super::metrics::{Endpoint, EndpointError, Metrics};

/// A zone's API with metrics and a "last answered" clock.
pub struct MeteredApi {
    inner: Arc<dyn PveApi>,
    zone: String,
    metrics: Arc<Metrics>,
    last_answer: Arc<Mutex<Option<Instant>>>,
}

impl MeteredApi {
    /// Wraps `inner` for `zone`; `last_answer` is set whenever Proxmox answers (even with an
    /// error answer: the zone is reachable).
    pub fn new(
        inner: Arc<dyn PveApi>,
        zone: &str,
        metrics: Arc<Metrics>,
        last_answer: Arc<Mutex<Option<Instant>>>,
    ) -> Self {
        Self {
            inner,
            zone: zone.to_owned(),
            metrics,
            last_answer,
        }
    }

    fn observe(&self, endpoint: &str, start: Instant, error: Option<&Error>) {
        let seconds = start.elapsed().as_secs_f64();
        self.metrics
            .api_seconds
            .get_or_create(&Endpoint {
                zone: self.zone.clone(),
                endpoint: endpoint.to_owned(),
            })
            .observe(seconds);
        let answered = match error {
            None => true,
            Some(e) => {
                self.metrics
                    .api_errors
                    .get_or_create(&EndpointError {
                        zone: self.zone.clone(),
                        endpoint: endpoint.to_owned(),
                        kind: error_kind(e).to_owned(),
                    })
                    .inc();
                matches!(e, Error::Api { .. } | Error::TaskFailed { .. })
            }
        };
        if answered {
            *self.last_answer.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        }
    }
}

/// A bounded label for an error.
fn error_kind(e: &Error) -> &'static str {
    match e {
        Error::Api { kind, .. } => match kind {
            ApiErrorKind::Locked { .. } => "locked",
            ApiErrorKind::ChecksumMismatch => "checksum_mismatch",
            ApiErrorKind::AlreadyExists => "already_exists",
            ApiErrorKind::AuthFailed => "auth_failed",
            ApiErrorKind::PermissionDenied => "permission_denied",
            ApiErrorKind::NotFound => "not_found",
            ApiErrorKind::InvalidParameters => "invalid_parameters",
            ApiErrorKind::NotImplemented => "not_implemented",
            ApiErrorKind::ProxyUnreachable => "proxy_unreachable",
            ApiErrorKind::Server => "server",
            _ => "other",
        },
        Error::Connect { .. } => "connect",
        Error::Tls { .. } => "tls",
        Error::Timeout { .. } => "timeout",
        Error::Transport { .. } => "transport",
        Error::BadResponse { .. } => "bad_response",
        Error::TaskFailed { .. } => "task_failed",
        Error::TaskTimeout { .. } => "task_timeout",
        _ => "other",
    }
}

#[async_trait]
impl PveApi for MeteredApi {
    fn server_time(&self) -> Option<i64> {
        self.inner.server_time()
    }
    async fn version(&self) -> Result<Version> {
        let start = Instant::now();
        let r = self.inner.version().await;
        self.observe("GET /version", start, r.as_ref().err());
        r
    }
    async fn cluster_resources(&self, kind: Option<ResourceType>) -> Result<Vec<Resource>> {
        let start = Instant::now();
        let r = self.inner.cluster_resources(kind).await;
        self.observe("GET /cluster/resources", start, r.as_ref().err());
        r
    }
    async fn resize_disk(
        &self,
        node: &str,
        vmid: u32,
        params: &ResizeParams,
    ) -> Result<Option<Upid>> {
        let start = Instant::now();
        let r = self.inner.resize_disk(node, vmid, params).await;
        self.observe(
            "PUT /nodes/{node}/qemu/{vmid}/resize",
            start,
            r.as_ref().err(),
        );
        r
    }
    async fn cluster_status(&self) -> Result<Vec<ClusterStatusEntry>> {
        let start = Instant::now();
        let r = self.inner.cluster_status().await;
        self.observe("GET /cluster/status", start, r.as_ref().err());
        r
    }
    async fn cluster_options(&self) -> Result<ClusterOptions> {
        let start = Instant::now();
        let r = self.inner.cluster_options().await;
        self.observe("GET /cluster/options", start, r.as_ref().err());
        r
    }
    async fn cluster_tasks(&self) -> Result<Vec<Task>> {
        let start = Instant::now();
        let r = self.inner.cluster_tasks().await;
        self.observe("GET /cluster/tasks", start, r.as_ref().err());
        r
    }
    async fn next_id(&self, vmid: Option<u32>) -> Result<u32> {
        let start = Instant::now();
        let r = self.inner.next_id(vmid).await;
        self.observe("GET /cluster/nextid", start, r.as_ref().err());
        r
    }
    async fn nodes(&self) -> Result<Vec<NodeListEntry>> {
        let start = Instant::now();
        let r = self.inner.nodes().await;
        self.observe("GET /nodes", start, r.as_ref().err());
        r
    }
    async fn node_status(&self, node: &str) -> Result<NodeStatus> {
        let start = Instant::now();
        let r = self.inner.node_status(node).await;
        self.observe("GET /nodes/{node}/status", start, r.as_ref().err());
        r
    }
    async fn node_config(&self, node: &str) -> Result<NodeConfig> {
        let start = Instant::now();
        let r = self.inner.node_config(node).await;
        self.observe("GET /nodes/{node}/config", start, r.as_ref().err());
        r
    }
    async fn update_node_config(&self, node: &str, update: &NodeConfigUpdate) -> Result<()> {
        let start = Instant::now();
        let r = self.inner.update_node_config(node, update).await;
        self.observe("PUT /nodes/{node}/config", start, r.as_ref().err());
        r
    }
    async fn node_rrddata(&self, node: &str, query: &RrdQuery) -> Result<Vec<RrdRow>> {
        let start = Instant::now();
        let r = self.inner.node_rrddata(node, query).await;
        self.observe("GET /nodes/{node}/rrddata", start, r.as_ref().err());
        r
    }
    async fn node_storage(&self, node: &str, query: &StorageQuery) -> Result<Vec<StorageEntry>> {
        let start = Instant::now();
        let r = self.inner.node_storage(node, query).await;
        self.observe("GET /nodes/{node}/storage", start, r.as_ref().err());
        r
    }
    async fn guests(&self, node: &str, kind: GuestKind) -> Result<Vec<GuestListEntry>> {
        let start = Instant::now();
        let r = self.inner.guests(node, kind).await;
        self.observe("GET /nodes/{node}/{kind}", start, r.as_ref().err());
        r
    }
    async fn guest_status(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
    ) -> Result<GuestStatusCurrent> {
        let start = Instant::now();
        let r = self.inner.guest_status(node, kind, vmid).await;
        self.observe(
            "GET /nodes/{node}/{kind}/{vmid}/status/current",
            start,
            r.as_ref().err(),
        );
        r
    }
    async fn guest_config(&self, node: &str, kind: GuestKind, vmid: u32) -> Result<GuestConfig> {
        let start = Instant::now();
        let r = self.inner.guest_config(node, kind, vmid).await;
        self.observe(
            "GET /nodes/{node}/{kind}/{vmid}/config",
            start,
            r.as_ref().err(),
        );
        r
    }
    async fn update_guest_config(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        update: &ConfigUpdate,
    ) -> Result<()> {
        let start = Instant::now();
        let r = self
            .inner
            .update_guest_config(node, kind, vmid, update)
            .await;
        self.observe(
            "PUT /nodes/{node}/{kind}/{vmid}/config",
            start,
            r.as_ref().err(),
        );
        r
    }
    async fn qemu_migrate_precondition(
        &self,
        node: &str,
        vmid: u32,
        target: Option<&str>,
    ) -> Result<QemuMigratePrecondition> {
        let start = Instant::now();
        let r = self
            .inner
            .qemu_migrate_precondition(node, vmid, target)
            .await;
        self.observe(
            "GET /nodes/{node}/qemu/{vmid}/migrate",
            start,
            r.as_ref().err(),
        );
        r
    }
    async fn lxc_migrate_precondition(
        &self,
        node: &str,
        vmid: u32,
        target: Option<&str>,
    ) -> Result<LxcMigratePrecondition> {
        let start = Instant::now();
        let r = self
            .inner
            .lxc_migrate_precondition(node, vmid, target)
            .await;
        self.observe(
            "GET /nodes/{node}/lxc/{vmid}/migrate",
            start,
            r.as_ref().err(),
        );
        r
    }
    async fn migrate_qemu(
        &self,
        node: &str,
        vmid: u32,
        params: &QemuMigrateParams,
    ) -> Result<Upid> {
        let start = Instant::now();
        let r = self.inner.migrate_qemu(node, vmid, params).await;
        self.observe(
            "POST /nodes/{node}/qemu/{vmid}/migrate",
            start,
            r.as_ref().err(),
        );
        r
    }
    async fn migrate_lxc(&self, node: &str, vmid: u32, params: &LxcMigrateParams) -> Result<Upid> {
        let start = Instant::now();
        let r = self.inner.migrate_lxc(node, vmid, params).await;
        self.observe(
            "POST /nodes/{node}/lxc/{vmid}/migrate",
            start,
            r.as_ref().err(),
        );
        r
    }
    async fn task_status(&self, upid: &Upid) -> Result<TaskStatus> {
        let start = Instant::now();
        let r = self.inner.task_status(upid).await;
        self.observe(
            "GET /nodes/{node}/tasks/{upid}/status",
            start,
            r.as_ref().err(),
        );
        r
    }
    async fn task_log(&self, upid: &Upid, query: &TaskLogQuery) -> Result<Vec<TaskLogLine>> {
        let start = Instant::now();
        let r = self.inner.task_log(upid, query).await;
        self.observe(
            "GET /nodes/{node}/tasks/{upid}/log",
            start,
            r.as_ref().err(),
        );
        r
    }
    async fn clone_qemu(&self, node: &str, vmid: u32, params: &CloneParams) -> Result<Upid> {
        let start = Instant::now();
        let r = self.inner.clone_qemu(node, vmid, params).await;
        self.observe(
            "POST /nodes/{node}/qemu/{vmid}/clone",
            start,
            r.as_ref().err(),
        );
        r
    }
    async fn create_qemu(&self, node: &str, params: &CreateParams) -> Result<Upid> {
        let start = Instant::now();
        let r = self.inner.create_qemu(node, params).await;
        self.observe("POST /nodes/{node}/qemu", start, r.as_ref().err());
        r
    }
    async fn start_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        params: &StartParams,
    ) -> Result<Upid> {
        let start = Instant::now();
        let r = self.inner.start_guest(node, kind, vmid, params).await;
        self.observe(
            "POST /nodes/{node}/{kind}/{vmid}/status/start",
            start,
            r.as_ref().err(),
        );
        r
    }
    async fn shutdown_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        params: &ShutdownParams,
    ) -> Result<Upid> {
        let start = Instant::now();
        let r = self.inner.shutdown_guest(node, kind, vmid, params).await;
        self.observe(
            "POST /nodes/{node}/{kind}/{vmid}/status/shutdown",
            start,
            r.as_ref().err(),
        );
        r
    }
    async fn stop_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        params: &StopParams,
    ) -> Result<Upid> {
        let start = Instant::now();
        let r = self.inner.stop_guest(node, kind, vmid, params).await;
        self.observe(
            "POST /nodes/{node}/{kind}/{vmid}/status/stop",
            start,
            r.as_ref().err(),
        );
        r
    }
    async fn delete_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        params: &DeleteParams,
    ) -> Result<Upid> {
        let start = Instant::now();
        let r = self.inner.delete_guest(node, kind, vmid, params).await;
        self.observe(
            "DELETE /nodes/{node}/{kind}/{vmid}",
            start,
            r.as_ref().err(),
        );
        r
    }
    async fn ha_resources(&self) -> Result<Vec<HaResource>> {
        let start = Instant::now();
        let r = self.inner.ha_resources().await;
        self.observe("GET /cluster/ha/resources", start, r.as_ref().err());
        r
    }
    async fn ha_rules(&self) -> Result<Vec<HaRule>> {
        let start = Instant::now();
        let r = self.inner.ha_rules().await;
        self.observe("GET /cluster/ha/rules", start, r.as_ref().err());
        r
    }
    async fn ha_status_current(&self) -> Result<Vec<HaStatusEntry>> {
        let start = Instant::now();
        let r = self.inner.ha_status_current().await;
        self.observe("GET /cluster/ha/status/current", start, r.as_ref().err());
        r
    }
    async fn ha_manager_status(&self) -> Result<ManagerStatusResponse> {
        let start = Instant::now();
        let r = self.inner.ha_manager_status().await;
        self.observe(
            "GET /cluster/ha/status/manager_status",
            start,
            r.as_ref().err(),
        );
        r
    }
    async fn ha_migrate(&self, sid: &str, params: &HaMigrateParams) -> Result<HaMigrateResponse> {
        let start = Instant::now();
        let r = self.inner.ha_migrate(sid, params).await;
        self.observe(
            "POST /cluster/ha/resources/{sid}/migrate",
            start,
            r.as_ref().err(),
        );
        r
    }
    async fn permissions(&self, query: &PermissionsQuery) -> Result<Permissions> {
        let start = Instant::now();
        let r = self.inner.permissions(query).await;
        self.observe("GET /access/permissions", start, r.as_ref().err());
        r
    }
    async fn pools(&self) -> Result<Vec<PoolListEntry>> {
        let start = Instant::now();
        let r = self.inner.pools().await;
        self.observe("GET /pools", start, r.as_ref().err());
        r
    }
    async fn pool(&self, poolid: &str) -> Result<Pool> {
        let start = Instant::now();
        let r = self.inner.pool(poolid).await;
        self.observe("GET /pools/{poolid}", start, r.as_ref().err());
        r
    }
}
