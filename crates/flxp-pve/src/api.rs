//! [`PveApi`]: the Proxmox VE endpoints flxp uses, as one object-safe async trait.
//!
//! The engine and the service hold an `Arc<dyn PveApi>`: production uses [`crate::Client`], tests
//! the simulator over HTTP or a scripted fake. Every method is one API call.

use async_trait::async_trait;

use crate::error::Result;
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
use crate::wait::{TaskWait, wait_task};

/// The Proxmox VE API, one method per endpoint.
#[async_trait]
pub trait PveApi: Send + Sync {
    /// The cluster's clock (epoch seconds) as its last answer's `Date` header gave it, if known.
    ///
    /// Task start and end times come from that clock, so comparisons with them (cooldowns, HA
    /// moves in flight) use it rather than this machine's, which may be skewed.
    fn server_time(&self) -> Option<i64> {
        None
    }

    /// `GET /version`.
    async fn version(&self) -> Result<Version>;

    /// `GET /cluster/resources[?type=...]`: the one call the scheduler lives on.
    async fn cluster_resources(&self, kind: Option<ResourceType>) -> Result<Vec<Resource>>;
    /// `GET /cluster/status`.
    async fn cluster_status(&self) -> Result<Vec<ClusterStatusEntry>>;
    /// `GET /cluster/options`.
    async fn cluster_options(&self) -> Result<ClusterOptions>;
    /// `GET /cluster/tasks`: running and recent tasks of all nodes.
    async fn cluster_tasks(&self) -> Result<Vec<Task>>;
    /// `GET /cluster/nextid[?vmid=...]`: the lowest free VMID (not reserved), or a check of one.
    async fn next_id(&self, vmid: Option<u32>) -> Result<u32>;

    /// `GET /nodes`.
    async fn nodes(&self) -> Result<Vec<NodeListEntry>>;
    /// `GET /nodes/{node}/status`.
    async fn node_status(&self, node: &str) -> Result<NodeStatus>;
    /// `GET /nodes/{node}/config`: the notes are its `description`.
    async fn node_config(&self, node: &str) -> Result<NodeConfig>;
    /// `PUT /nodes/{node}/config`.
    async fn update_node_config(&self, node: &str, update: &NodeConfigUpdate) -> Result<()>;
    /// `GET /nodes/{node}/rrddata`: one row per step, oldest first.
    async fn node_rrddata(&self, node: &str, query: &RrdQuery) -> Result<Vec<RrdRow>>;
    /// `GET /nodes/{node}/storage`.
    async fn node_storage(&self, node: &str, query: &StorageQuery) -> Result<Vec<StorageEntry>>;

    /// `GET /nodes/{node}/qemu` or `/lxc`.
    async fn guests(&self, node: &str, kind: GuestKind) -> Result<Vec<GuestListEntry>>;
    /// `GET /nodes/{node}/{kind}/{vmid}/status/current`.
    async fn guest_status(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
    ) -> Result<GuestStatusCurrent>;
    /// `GET /nodes/{node}/{kind}/{vmid}/config` (node must be where the guest is now).
    async fn guest_config(&self, node: &str, kind: GuestKind, vmid: u32) -> Result<GuestConfig>;
    /// `PUT /nodes/{node}/{kind}/{vmid}/config` (synchronous; send the digest read before).
    async fn update_guest_config(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        update: &ConfigUpdate,
    ) -> Result<()>;

    /// `GET /nodes/{node}/qemu/{vmid}/migrate`: where the VM may go.
    async fn qemu_migrate_precondition(
        &self,
        node: &str,
        vmid: u32,
        target: Option<&str>,
    ) -> Result<QemuMigratePrecondition>;
    /// `GET /nodes/{node}/lxc/{vmid}/migrate`.
    async fn lxc_migrate_precondition(
        &self,
        node: &str,
        vmid: u32,
        target: Option<&str>,
    ) -> Result<LxcMigratePrecondition>;
    /// `POST /nodes/{node}/qemu/{vmid}/migrate` → `qmigrate` (or `hamigrate` for HA guests).
    async fn migrate_qemu(&self, node: &str, vmid: u32, params: &QemuMigrateParams)
    -> Result<Upid>;
    /// `POST /nodes/{node}/lxc/{vmid}/migrate` → `vzmigrate`.
    async fn migrate_lxc(&self, node: &str, vmid: u32, params: &LxcMigrateParams) -> Result<Upid>;

    /// `GET /nodes/{node-of-upid}/tasks/{upid}/status`.
    async fn task_status(&self, upid: &Upid) -> Result<TaskStatus>;
    /// `GET /nodes/{node-of-upid}/tasks/{upid}/log`.
    async fn task_log(&self, upid: &Upid, query: &TaskLogQuery) -> Result<Vec<TaskLogLine>>;

    /// `POST /nodes/{node}/qemu/{vmid}/clone` → `qmclone` (task id = the source VMID).
    async fn clone_qemu(&self, node: &str, vmid: u32, params: &CloneParams) -> Result<Upid>;
    /// `POST /nodes/{node}/qemu` → `qmcreate`.
    async fn create_qemu(&self, node: &str, params: &CreateParams) -> Result<Upid>;
    /// `PUT /nodes/{node}/qemu/{vmid}/resize`: grows a disk (never shrinks it). PVE 8 and later
    /// answer a `resize` task that does the checks and the work (follow it); older releases
    /// resize before answering and give `None`.
    async fn resize_disk(
        &self,
        node: &str,
        vmid: u32,
        params: &ResizeParams,
    ) -> Result<Option<Upid>>;
    /// `POST /nodes/{node}/{kind}/{vmid}/status/start`.
    async fn start_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        params: &StartParams,
    ) -> Result<Upid>;
    /// `POST /nodes/{node}/{kind}/{vmid}/status/shutdown`.
    async fn shutdown_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        params: &ShutdownParams,
    ) -> Result<Upid>;
    /// `POST /nodes/{node}/{kind}/{vmid}/status/stop`.
    async fn stop_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        params: &StopParams,
    ) -> Result<Upid>;
    /// `DELETE /nodes/{node}/{kind}/{vmid}`.
    async fn delete_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        params: &DeleteParams,
    ) -> Result<Upid>;

    /// `GET /cluster/ha/resources`.
    async fn ha_resources(&self) -> Result<Vec<HaResource>>;
    /// `GET /cluster/ha/rules`.
    async fn ha_rules(&self) -> Result<Vec<HaRule>>;
    /// `GET /cluster/ha/status/current`.
    async fn ha_status_current(&self) -> Result<Vec<HaStatusEntry>>;
    /// `GET /cluster/ha/status/manager_status`.
    async fn ha_manager_status(&self) -> Result<ManagerStatusResponse>;
    /// `POST /cluster/ha/resources/{sid}/migrate`: queues the move, answers no UPID.
    async fn ha_migrate(&self, sid: &str, params: &HaMigrateParams) -> Result<HaMigrateResponse>;

    /// `GET /access/permissions`.
    async fn permissions(&self, query: &PermissionsQuery) -> Result<Permissions>;
    /// `GET /pools`.
    async fn pools(&self) -> Result<Vec<PoolListEntry>>;
    /// `GET /pools/{poolid}`.
    async fn pool(&self, poolid: &str) -> Result<Pool>;

    /// Polls a task until it stops; `Ok` for `OK`/`WARNINGS: n`, else [`crate::Error::TaskFailed`]
    /// with the exit status and the last log lines.
    async fn wait_task(&self, upid: &Upid, wait: &TaskWait) -> Result<TaskStatus> {
        wait_task(self, upid, wait).await
    }
}
