//! The Proxmox VE endpoints flxp uses, written once: each builds a [`Request`] (path, method,
//! form-encoded parameters), sends it through the [`Pve`] handle's transport and decodes the
//! answer into the wire types.

use crate::endpoint;
use crate::error::Result;
use crate::pve::Pve;
use crate::request::{Request, seg};
use crate::transport::Transport;
use crate::types::{
    CloneParams, ClusterOptions, ClusterStatusEntry, ConfigUpdate, ContentQuery, CreateParams,
    DeleteParams, GuestConfig, GuestKind, GuestListEntry, GuestStatusCurrent, HaMigrateParams,
    HaMigrateResponse, HaResource, HaRule, HaStatusEntry, LxcMigrateParams, LxcMigratePrecondition,
    ManagerStatusResponse, MigratePreconditionQuery, NextId, NextIdQuery, NodeCommand,
    NodeCommandParams, NodeConfig, NodeConfigUpdate, NodeListEntry, NodeStatus, Permissions,
    PermissionsQuery, Pool, PoolListEntry, QemuMigrateParams, QemuMigratePrecondition,
    ResizeParams, Resource, ResourceType, ResourcesQuery, RrdQuery, RrdRow, ShutdownParams,
    StartParams, StopParams, StorageEntry, StorageQuery, Task, TaskLogLine, TaskLogQuery,
    TaskStatus, Upid, Version, Volume,
};
use crate::wait::{TaskWait, wait_task};

fn node_path(node: &str, rest: &str) -> String {
    format!("/nodes/{}{rest}", seg(node))
}

fn guest_path(node: &str, kind: GuestKind, vmid: u32) -> String {
    format!("/nodes/{}/{}/{vmid}", seg(node), kind.as_str())
}

fn task_path(upid: &Upid) -> String {
    format!("/nodes/{}/tasks/{}", seg(upid.node()), seg(upid.as_str()))
}

impl<T: Transport + ?Sized> Pve<T> {
    /// `GET /version`.
    pub async fn version(&self) -> Result<Version> {
        self.call(Request::new(endpoint!(GET "/version"), "/version".into()))
            .await
    }

    /// `GET /cluster/resources[?type=...]`: the one call the scheduler lives on.
    pub async fn cluster_resources(&self, kind: Option<ResourceType>) -> Result<Vec<Resource>> {
        let r = Request::new(
            endpoint!(GET "/cluster/resources"),
            "/cluster/resources".into(),
        )
        .params(&ResourcesQuery { kind })?;
        self.call(r).await
    }

    /// `GET /cluster/status`.
    pub async fn cluster_status(&self) -> Result<Vec<ClusterStatusEntry>> {
        self.call(Request::new(
            endpoint!(GET "/cluster/status"),
            "/cluster/status".into(),
        ))
        .await
    }

    /// `GET /cluster/options`.
    pub async fn cluster_options(&self) -> Result<ClusterOptions> {
        self.call(Request::new(
            endpoint!(GET "/cluster/options"),
            "/cluster/options".into(),
        ))
        .await
    }

    /// `GET /cluster/tasks`: running and recent tasks of all nodes.
    pub async fn cluster_tasks(&self) -> Result<Vec<Task>> {
        self.call(Request::new(
            endpoint!(GET "/cluster/tasks"),
            "/cluster/tasks".into(),
        ))
        .await
    }

    /// `GET /cluster/nextid[?vmid=...]`: the lowest free VMID (not reserved), or a check of one.
    pub async fn next_id(&self, vmid: Option<u32>) -> Result<u32> {
        let r = Request::new(endpoint!(GET "/cluster/nextid"), "/cluster/nextid".into())
            .params(&NextIdQuery { vmid })?;
        let id: NextId = self.call(r).await?;
        Ok(id.0)
    }

    /// `GET /nodes`.
    pub async fn nodes(&self) -> Result<Vec<NodeListEntry>> {
        self.call(Request::new(endpoint!(GET "/nodes"), "/nodes".into()))
            .await
    }

    /// `GET /nodes/{node}/status`.
    pub async fn node_status(&self, node: &str) -> Result<NodeStatus> {
        let path = node_path(node, "/status");
        self.call(Request::new(endpoint!(GET "/nodes/{node}/status"), path))
            .await
    }

    /// `GET /nodes/{node}/config`: the notes are its `description`.
    pub async fn node_config(&self, node: &str) -> Result<NodeConfig> {
        let path = node_path(node, "/config");
        self.call(Request::new(endpoint!(GET "/nodes/{node}/config"), path))
            .await
    }

    /// `PUT /nodes/{node}/config`.
    pub async fn update_node_config(&self, node: &str, update: &NodeConfigUpdate) -> Result<()> {
        let path = node_path(node, "/config");
        self.call(Request::new(endpoint!(PUT "/nodes/{node}/config"), path).params(update)?)
            .await
    }

    /// `POST /nodes/{node}/status`: shut the node down or reboot it (`Sys.PowerMgmt`); Proxmox
    /// answers at once and acts two seconds later, stopping the node's guests on the way down.
    pub async fn node_command(&self, node: &str, command: NodeCommand) -> Result<()> {
        let path = node_path(node, "/status");
        let params = NodeCommandParams { command };
        self.call(Request::new(endpoint!(POST "/nodes/{node}/status"), path).params(&params)?)
            .await
    }

    /// `POST /nodes/{node}/wakeonlan`: sends a Wake-on-LAN packet for `node` from the node the
    /// request reaches (`Sys.PowerMgmt`); the MAC address it was built from.
    pub async fn wake_on_lan(&self, node: &str) -> Result<String> {
        let path = node_path(node, "/wakeonlan");
        self.call(Request::new(
            endpoint!(POST "/nodes/{node}/wakeonlan"),
            path,
        ))
        .await
    }

    /// `GET /nodes/{node}/rrddata`: one row per step, oldest first.
    pub async fn node_rrddata(&self, node: &str, query: &RrdQuery) -> Result<Vec<RrdRow>> {
        let path = node_path(node, "/rrddata");
        self.call(Request::new(endpoint!(GET "/nodes/{node}/rrddata"), path).params(query)?)
            .await
    }

    /// `GET /nodes/{node}/storage`.
    pub async fn node_storage(
        &self,
        node: &str,
        query: &StorageQuery,
    ) -> Result<Vec<StorageEntry>> {
        let path = node_path(node, "/storage");
        self.call(Request::new(endpoint!(GET "/nodes/{node}/storage"), path).params(query)?)
            .await
    }

    /// `GET /nodes/{node}/storage/{storage}/content`: the volumes on one storage.
    pub async fn storage_content(
        &self,
        node: &str,
        storage: &str,
        query: &ContentQuery,
    ) -> Result<Vec<Volume>> {
        let path = node_path(node, &format!("/storage/{}/content", seg(storage)));
        self.call(
            Request::new(
                endpoint!(GET "/nodes/{node}/storage/{storage}/content"),
                path,
            )
            .params(query)?,
        )
        .await
    }

    /// `GET /nodes/{node}/qemu` or `/lxc`.
    pub async fn guests(&self, node: &str, kind: GuestKind) -> Result<Vec<GuestListEntry>> {
        let path = node_path(node, &format!("/{}", kind.as_str()));
        self.call(Request::new(endpoint!(GET "/nodes/{node}/{kind}"), path))
            .await
    }

    /// `GET /nodes/{node}/{kind}/{vmid}/status/current`.
    pub async fn guest_status(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
    ) -> Result<GuestStatusCurrent> {
        let path = format!("{}/status/current", guest_path(node, kind, vmid));
        let endpoint = endpoint!(GET "/nodes/{node}/{kind}/{vmid}/status/current");
        self.call(Request::new(endpoint, path)).await
    }

    /// `GET /nodes/{node}/{kind}/{vmid}/config` (node must be where the guest is now).
    pub async fn guest_config(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
    ) -> Result<GuestConfig> {
        let path = format!("{}/config", guest_path(node, kind, vmid));
        self.call(Request::new(
            endpoint!(GET "/nodes/{node}/{kind}/{vmid}/config"),
            path,
        ))
        .await
    }

    /// `PUT /nodes/{node}/{kind}/{vmid}/config` (synchronous; send the digest read before).
    pub async fn update_guest_config(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        update: &ConfigUpdate,
    ) -> Result<()> {
        let path = format!("{}/config", guest_path(node, kind, vmid));
        let endpoint = endpoint!(PUT "/nodes/{node}/{kind}/{vmid}/config");
        self.call(Request::new(endpoint, path).params(update)?)
            .await
    }

    /// `GET /nodes/{node}/qemu/{vmid}/migrate`: where the VM may go.
    pub async fn qemu_migrate_precondition(
        &self,
        node: &str,
        vmid: u32,
        target: Option<&str>,
    ) -> Result<QemuMigratePrecondition> {
        let query = MigratePreconditionQuery {
            target: target.map(str::to_owned),
        };
        let path = format!("{}/migrate", guest_path(node, GuestKind::Qemu, vmid));
        let endpoint = endpoint!(GET "/nodes/{node}/qemu/{vmid}/migrate");
        self.call(Request::new(endpoint, path).params(&query)?)
            .await
    }

    /// `GET /nodes/{node}/lxc/{vmid}/migrate`.
    pub async fn lxc_migrate_precondition(
        &self,
        node: &str,
        vmid: u32,
        target: Option<&str>,
    ) -> Result<LxcMigratePrecondition> {
        let query = MigratePreconditionQuery {
            target: target.map(str::to_owned),
        };
        let path = format!("{}/migrate", guest_path(node, GuestKind::Lxc, vmid));
        let endpoint = endpoint!(GET "/nodes/{node}/lxc/{vmid}/migrate");
        self.call(Request::new(endpoint, path).params(&query)?)
            .await
    }

    /// `POST /nodes/{node}/qemu/{vmid}/migrate` → `qmigrate` (or `hamigrate` for HA guests).
    pub async fn migrate_qemu(
        &self,
        node: &str,
        vmid: u32,
        params: &QemuMigrateParams,
    ) -> Result<Upid> {
        let path = format!("{}/migrate", guest_path(node, GuestKind::Qemu, vmid));
        let endpoint = endpoint!(POST "/nodes/{node}/qemu/{vmid}/migrate");
        self.call(Request::new(endpoint, path).params(params)?)
            .await
    }

    /// `POST /nodes/{node}/lxc/{vmid}/migrate` → `vzmigrate`.
    pub async fn migrate_lxc(
        &self,
        node: &str,
        vmid: u32,
        params: &LxcMigrateParams,
    ) -> Result<Upid> {
        let path = format!("{}/migrate", guest_path(node, GuestKind::Lxc, vmid));
        let endpoint = endpoint!(POST "/nodes/{node}/lxc/{vmid}/migrate");
        self.call(Request::new(endpoint, path).params(params)?)
            .await
    }

    /// `GET /nodes/{node-of-upid}/tasks/{upid}/status`.
    pub async fn task_status(&self, upid: &Upid) -> Result<TaskStatus> {
        let path = format!("{}/status", task_path(upid));
        self.call(Request::new(
            endpoint!(GET "/nodes/{node}/tasks/{upid}/status"),
            path,
        ))
        .await
    }

    /// `GET /nodes/{node-of-upid}/tasks/{upid}/log`.
    pub async fn task_log(&self, upid: &Upid, query: &TaskLogQuery) -> Result<Vec<TaskLogLine>> {
        let path = format!("{}/log", task_path(upid));
        let endpoint = endpoint!(GET "/nodes/{node}/tasks/{upid}/log");
        self.call(Request::new(endpoint, path).params(query)?).await
    }

    /// `POST /nodes/{node}/qemu/{vmid}/clone` → `qmclone` (task id = the source VMID).
    pub async fn clone_qemu(&self, node: &str, vmid: u32, params: &CloneParams) -> Result<Upid> {
        let path = format!("{}/clone", guest_path(node, GuestKind::Qemu, vmid));
        let endpoint = endpoint!(POST "/nodes/{node}/qemu/{vmid}/clone");
        self.call(Request::new(endpoint, path).params(params)?)
            .await
    }

    /// `POST /nodes/{node}/qemu` → `qmcreate`.
    pub async fn create_qemu(&self, node: &str, params: &CreateParams) -> Result<Upid> {
        let path = node_path(node, "/qemu");
        self.call(Request::new(endpoint!(POST "/nodes/{node}/qemu"), path).params(params)?)
            .await
    }

    /// `PUT /nodes/{node}/qemu/{vmid}/resize`: grows a disk (never shrinks it). PVE 8 and later
    /// answer a `resize` task that does the checks and the work (follow it); older releases
    /// resize before answering and give `None`.
    pub async fn resize_disk(
        &self,
        node: &str,
        vmid: u32,
        params: &ResizeParams,
    ) -> Result<Option<Upid>> {
        // A PUT: `execute` never repeats it once it may have reached Proxmox.
        let path = format!("{}/resize", guest_path(node, GuestKind::Qemu, vmid));
        let endpoint = endpoint!(PUT "/nodes/{node}/qemu/{vmid}/resize");
        self.call(Request::new(endpoint, path).params(params)?)
            .await
    }

    /// `POST /nodes/{node}/{kind}/{vmid}/status/start`.
    pub async fn start_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        params: &StartParams,
    ) -> Result<Upid> {
        let path = format!("{}/status/start", guest_path(node, kind, vmid));
        let endpoint = endpoint!(POST "/nodes/{node}/{kind}/{vmid}/status/start");
        self.call(Request::new(endpoint, path).params(params)?)
            .await
    }

    /// `POST /nodes/{node}/{kind}/{vmid}/status/shutdown`.
    pub async fn shutdown_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        params: &ShutdownParams,
    ) -> Result<Upid> {
        let path = format!("{}/status/shutdown", guest_path(node, kind, vmid));
        let endpoint = endpoint!(POST "/nodes/{node}/{kind}/{vmid}/status/shutdown");
        self.call(Request::new(endpoint, path).params(params)?)
            .await
    }

    /// `POST /nodes/{node}/{kind}/{vmid}/status/stop`.
    pub async fn stop_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        params: &StopParams,
    ) -> Result<Upid> {
        let path = format!("{}/status/stop", guest_path(node, kind, vmid));
        let endpoint = endpoint!(POST "/nodes/{node}/{kind}/{vmid}/status/stop");
        self.call(Request::new(endpoint, path).params(params)?)
            .await
    }

    /// `DELETE /nodes/{node}/{kind}/{vmid}`.
    pub async fn delete_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        params: &DeleteParams,
    ) -> Result<Upid> {
        let path = guest_path(node, kind, vmid);
        let endpoint = endpoint!(DELETE "/nodes/{node}/{kind}/{vmid}");
        self.call(Request::new(endpoint, path).params(params)?)
            .await
    }

    /// `GET /cluster/ha/resources`.
    pub async fn ha_resources(&self) -> Result<Vec<HaResource>> {
        let path = "/cluster/ha/resources".to_owned();
        self.call(Request::new(endpoint!(GET "/cluster/ha/resources"), path))
            .await
    }

    /// `GET /cluster/ha/rules`.
    pub async fn ha_rules(&self) -> Result<Vec<HaRule>> {
        self.call(Request::new(
            endpoint!(GET "/cluster/ha/rules"),
            "/cluster/ha/rules".into(),
        ))
        .await
    }

    /// `GET /cluster/ha/status/current`.
    pub async fn ha_status_current(&self) -> Result<Vec<HaStatusEntry>> {
        let path = "/cluster/ha/status/current".to_owned();
        self.call(Request::new(
            endpoint!(GET "/cluster/ha/status/current"),
            path,
        ))
        .await
    }

    /// `GET /cluster/ha/status/manager_status`.
    pub async fn ha_manager_status(&self) -> Result<ManagerStatusResponse> {
        let path = "/cluster/ha/status/manager_status".to_owned();
        self.call(Request::new(
            endpoint!(GET "/cluster/ha/status/manager_status"),
            path,
        ))
        .await
    }

    /// `POST /cluster/ha/resources/{sid}/migrate`: queues the move, answers no UPID.
    pub async fn ha_migrate(
        &self,
        sid: &str,
        params: &HaMigrateParams,
    ) -> Result<HaMigrateResponse> {
        let path = format!("/cluster/ha/resources/{}/migrate", seg(sid));
        let endpoint = endpoint!(POST "/cluster/ha/resources/{sid}/migrate");
        self.call(Request::new(endpoint, path).params(params)?)
            .await
    }

    /// `GET /access/permissions`.
    pub async fn permissions(&self, query: &PermissionsQuery) -> Result<Permissions> {
        let r = Request::new(
            endpoint!(GET "/access/permissions"),
            "/access/permissions".into(),
        )
        .params(query)?;
        self.call(r).await
    }

    /// `GET /pools`.
    pub async fn pools(&self) -> Result<Vec<PoolListEntry>> {
        self.call(Request::new(endpoint!(GET "/pools"), "/pools".into()))
            .await
    }

    /// `GET /pools/{poolid}`.
    pub async fn pool(&self, poolid: &str) -> Result<Pool> {
        let path = format!("/pools/{}", seg(poolid));
        self.call(Request::new(endpoint!(GET "/pools/{poolid}"), path))
            .await
    }

    /// Polls a task until it stops; `Ok` for `OK`/`WARNINGS: n`, else [`crate::Error::TaskFailed`]
    /// with the exit status and the last log lines.
    pub async fn wait_task(&self, upid: &Upid, wait: &TaskWait) -> Result<TaskStatus> {
        wait_task(self, upid, wait).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_paths_name_node_kind_and_vmid() {
        assert_eq!(
            guest_path("pve1", GuestKind::Lxc, 106),
            "/nodes/pve1/lxc/106"
        );
    }
}
