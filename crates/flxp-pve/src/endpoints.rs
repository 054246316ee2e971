//! [`PveApi`] over HTTP: each method is a path, a method and form-encoded parameters.

use async_trait::async_trait;
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::PveApi;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::types::{
    CloneParams, ClusterOptions, ClusterStatusEntry, ConfigUpdate, CreateParams, DeleteParams,
    GuestConfig, GuestKind, GuestListEntry, GuestStatusCurrent, HaMigrateParams, HaMigrateResponse,
    HaResource, HaRule, HaStatusEntry, LxcMigrateParams, LxcMigratePrecondition,
    ManagerStatusResponse, MigratePreconditionQuery, NextId, NextIdQuery, NodeConfig,
    NodeConfigUpdate, NodeListEntry, NodeStatus, Permissions, PermissionsQuery, Pool,
    PoolListEntry, QemuMigrateParams, QemuMigratePrecondition, ResizeParams, Resource,
    ResourceType, ResourcesQuery, RrdQuery, RrdRow, ShutdownParams, StartParams, StopParams,
    StorageEntry, StorageQuery, Task, TaskLogLine, TaskLogQuery, TaskStatus, Upid, Version, form,
};

/// Percent-encodes one path segment (a node name, a sid, a UPID) so it cannot change the path.
fn seg(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        // RFC 3986 pchar without '%': unreserved, sub-delims, ':' and '@'.
        if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn guest_path(node: &str, kind: GuestKind, vmid: u32) -> String {
    format!("/nodes/{}/{}/{vmid}", seg(node), kind.as_str())
}

fn task_path(upid: &Upid) -> String {
    format!("/nodes/{}/tasks/{}", seg(upid.node()), seg(upid.as_str()))
}

impl Client {
    fn encode<P: Serialize + ?Sized>(path: &str, params: &P) -> Result<Option<String>> {
        let encoded = form::to_form(params).map_err(|e| Error::Request {
            endpoint: path.to_owned(),
            message: e.to_string(),
        })?;
        Ok(Some(encoded).filter(|s| !s.is_empty()))
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.call(Method::GET, path, None).await
    }

    async fn get_with<T: DeserializeOwned, P: Serialize + Sync + ?Sized>(
        &self,
        path: &str,
        query: &P,
    ) -> Result<T> {
        self.call(Method::GET, path, Self::encode(path, query)?)
            .await
    }

    async fn send<T: DeserializeOwned, P: Serialize + Sync + ?Sized>(
        &self,
        method: Method,
        path: &str,
        params: &P,
    ) -> Result<T> {
        self.call(method, path, Self::encode(path, params)?).await
    }
}

#[async_trait]
impl PveApi for Client {
    fn server_time(&self) -> Option<i64> {
        self.last_server_time()
    }

    async fn version(&self) -> Result<Version> {
        self.get("/version").await
    }

    async fn cluster_resources(&self, kind: Option<ResourceType>) -> Result<Vec<Resource>> {
        self.get_with("/cluster/resources", &ResourcesQuery { kind })
            .await
    }

    async fn cluster_status(&self) -> Result<Vec<ClusterStatusEntry>> {
        self.get("/cluster/status").await
    }

    async fn cluster_options(&self) -> Result<ClusterOptions> {
        self.get("/cluster/options").await
    }

    async fn cluster_tasks(&self) -> Result<Vec<Task>> {
        self.get("/cluster/tasks").await
    }

    async fn next_id(&self, vmid: Option<u32>) -> Result<u32> {
        let id: NextId = self
            .get_with("/cluster/nextid", &NextIdQuery { vmid })
            .await?;
        Ok(id.0)
    }

    async fn nodes(&self) -> Result<Vec<NodeListEntry>> {
        self.get("/nodes").await
    }

    async fn node_status(&self, node: &str) -> Result<NodeStatus> {
        self.get(&format!("/nodes/{}/status", seg(node))).await
    }

    async fn node_config(&self, node: &str) -> Result<NodeConfig> {
        self.get(&format!("/nodes/{}/config", seg(node))).await
    }

    async fn update_node_config(&self, node: &str, update: &NodeConfigUpdate) -> Result<()> {
        self.send(Method::PUT, &format!("/nodes/{}/config", seg(node)), update)
            .await
    }

    async fn node_rrddata(&self, node: &str, query: &RrdQuery) -> Result<Vec<RrdRow>> {
        self.get_with(&format!("/nodes/{}/rrddata", seg(node)), query)
            .await
    }

    async fn node_storage(&self, node: &str, query: &StorageQuery) -> Result<Vec<StorageEntry>> {
        self.get_with(&format!("/nodes/{}/storage", seg(node)), query)
            .await
    }

    async fn guests(&self, node: &str, kind: GuestKind) -> Result<Vec<GuestListEntry>> {
        self.get(&format!("/nodes/{}/{}", seg(node), kind.as_str()))
            .await
    }

    async fn guest_status(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
    ) -> Result<GuestStatusCurrent> {
        self.get(&format!("{}/status/current", guest_path(node, kind, vmid)))
            .await
    }

    async fn guest_config(&self, node: &str, kind: GuestKind, vmid: u32) -> Result<GuestConfig> {
        self.get(&format!("{}/config", guest_path(node, kind, vmid)))
            .await
    }

    async fn update_guest_config(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        update: &ConfigUpdate,
    ) -> Result<()> {
        let path = format!("{}/config", guest_path(node, kind, vmid));
        self.send(Method::PUT, &path, update).await
    }

    async fn qemu_migrate_precondition(
        &self,
        node: &str,
        vmid: u32,
        target: Option<&str>,
    ) -> Result<QemuMigratePrecondition> {
        let query = MigratePreconditionQuery {
            target: target.map(str::to_owned),
        };
        let path = format!("{}/migrate", guest_path(node, GuestKind::Qemu, vmid));
        self.get_with(&path, &query).await
    }

    async fn lxc_migrate_precondition(
        &self,
        node: &str,
        vmid: u32,
        target: Option<&str>,
    ) -> Result<LxcMigratePrecondition> {
        let query = MigratePreconditionQuery {
            target: target.map(str::to_owned),
        };
        let path = format!("{}/migrate", guest_path(node, GuestKind::Lxc, vmid));
        self.get_with(&path, &query).await
    }

    async fn migrate_qemu(
        &self,
        node: &str,
        vmid: u32,
        params: &QemuMigrateParams,
    ) -> Result<Upid> {
        let path = format!("{}/migrate", guest_path(node, GuestKind::Qemu, vmid));
        self.send(Method::POST, &path, params).await
    }

    async fn migrate_lxc(&self, node: &str, vmid: u32, params: &LxcMigrateParams) -> Result<Upid> {
        let path = format!("{}/migrate", guest_path(node, GuestKind::Lxc, vmid));
        self.send(Method::POST, &path, params).await
    }

    async fn task_status(&self, upid: &Upid) -> Result<TaskStatus> {
        self.get(&format!("{}/status", task_path(upid))).await
    }

    async fn task_log(&self, upid: &Upid, query: &TaskLogQuery) -> Result<Vec<TaskLogLine>> {
        self.get_with(&format!("{}/log", task_path(upid)), query)
            .await
    }

    async fn clone_qemu(&self, node: &str, vmid: u32, params: &CloneParams) -> Result<Upid> {
        let path = format!("{}/clone", guest_path(node, GuestKind::Qemu, vmid));
        self.send(Method::POST, &path, params).await
    }

    async fn create_qemu(&self, node: &str, params: &CreateParams) -> Result<Upid> {
        self.send(Method::POST, &format!("/nodes/{}/qemu", seg(node)), params)
            .await
    }

    async fn resize_disk(
        &self,
        node: &str,
        vmid: u32,
        params: &ResizeParams,
    ) -> Result<Option<Upid>> {
        // A PUT: `execute` never repeats it once it may have reached Proxmox.
        let path = format!("{}/resize", guest_path(node, GuestKind::Qemu, vmid));
        self.send(Method::PUT, &path, params).await
    }

    async fn start_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        params: &StartParams,
    ) -> Result<Upid> {
        let path = format!("{}/status/start", guest_path(node, kind, vmid));
        self.send(Method::POST, &path, params).await
    }

    async fn shutdown_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        params: &ShutdownParams,
    ) -> Result<Upid> {
        let path = format!("{}/status/shutdown", guest_path(node, kind, vmid));
        self.send(Method::POST, &path, params).await
    }

    async fn stop_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        params: &StopParams,
    ) -> Result<Upid> {
        let path = format!("{}/status/stop", guest_path(node, kind, vmid));
        self.send(Method::POST, &path, params).await
    }

    async fn delete_guest(
        &self,
        node: &str,
        kind: GuestKind,
        vmid: u32,
        params: &DeleteParams,
    ) -> Result<Upid> {
        self.send(Method::DELETE, &guest_path(node, kind, vmid), params)
            .await
    }

    async fn ha_resources(&self) -> Result<Vec<HaResource>> {
        self.get("/cluster/ha/resources").await
    }

    async fn ha_rules(&self) -> Result<Vec<HaRule>> {
        self.get("/cluster/ha/rules").await
    }

    async fn ha_status_current(&self) -> Result<Vec<HaStatusEntry>> {
        self.get("/cluster/ha/status/current").await
    }

    async fn ha_manager_status(&self) -> Result<ManagerStatusResponse> {
        self.get("/cluster/ha/status/manager_status").await
    }

    async fn ha_migrate(&self, sid: &str, params: &HaMigrateParams) -> Result<HaMigrateResponse> {
        let path = format!("/cluster/ha/resources/{}/migrate", seg(sid));
        self.send(Method::POST, &path, params).await
    }

    async fn permissions(&self, query: &PermissionsQuery) -> Result<Permissions> {
        self.get_with("/access/permissions", query).await
    }

    async fn pools(&self) -> Result<Vec<PoolListEntry>> {
        self.get("/pools").await
    }

    async fn pool(&self, poolid: &str) -> Result<Pool> {
        self.get(&format!("/pools/{}", seg(poolid))).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_keep_upids_and_sids_readable_but_cannot_escape() {
        assert_eq!(
            seg("UPID:pve1:000A1B2C:0123ABCD:6929A5C0:qmigrate:105:root@pam!flxp:"),
            "UPID:pve1:000A1B2C:0123ABCD:6929A5C0:qmigrate:105:root@pam!flxp:"
        );
        assert_eq!(seg("vm:100"), "vm:100");
        assert_eq!(seg("../x y?#"), "..%2Fx%20y%3F%23");
        assert_eq!(
            guest_path("pve1", GuestKind::Lxc, 106),
            "/nodes/pve1/lxc/106"
        );
    }
}
