//! Migration: the precondition check (`GET .../migrate`) and the move itself (`POST .../migrate`).
//!
//! qemu answers with underscore keys (`allowed_nodes`), lxc with hyphenated ones
//! (`allowed-nodes`); `not_allowed_nodes` is keyed by node name although the schema flattens it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use flxp_core::lenient;

use super::quirks::{map_or_empty, string_list, vec_or_null};

/// An HA resource that keeps a guest from a node (or from being moved at all).
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockingHaResource {
    /// HA resource id (`vm:101`).
    pub sid: Option<String>,
    /// `node-affinity` or `resource-affinity`.
    pub cause: Option<String>,
}

/// Why one node is not allowed as a target.
#[serde_with::apply(Vec => #[serde(skip_serializing_if = "Vec::is_empty")])]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NotAllowedNode {
    /// Storages the guest uses that the node cannot reach.
    #[serde(deserialize_with = "string_list")]
    pub unavailable_storages: Vec<String>,
    /// Mapped resources (config keys) the node lacks.
    #[serde(rename = "unavailable-resources", deserialize_with = "string_list")]
    pub unavailable_resources: Vec<String>,
    /// HA rules that forbid the node.
    #[serde(rename = "blocking-ha-resources", deserialize_with = "vec_or_null")]
    pub blocking_ha_resources: Vec<BlockingHaResource>,
}

/// A disk on non-shared storage: it needs `with-local-disks=1` for a live migration.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LocalDisk {
    /// Volume id (`local-lvm:vm-105-disk-0`).
    #[serialize_always]
    pub volid: Option<String>,
    /// Size in bytes.
    pub size: Option<u64>,
    /// Config key it is attached as (`scsi0`).
    pub drivename: Option<String>,
    /// A CD-ROM image.
    pub cdrom: Option<bool>,
    /// An unused disk.
    pub is_unused: Option<bool>,
    /// Attached to the running guest.
    pub is_attached: Option<bool>,
    /// A cloud-init drive.
    pub is_cloudinit: Option<bool>,
    /// A saved VM state.
    pub is_vmstate: Option<bool>,
    /// A TPM state volume.
    pub is_tpmstate: Option<bool>,
    /// Replicated by storage replication.
    pub replicate: Option<bool>,
    /// On shared storage.
    pub shared: Option<bool>,
    /// Referenced by a snapshot only.
    pub referenced_in_snapshot: Option<bool>,
}

/// `GET /nodes/{node}/qemu/{vmid}/migrate`: where the VM may go and what it drags along.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QemuMigratePrecondition {
    /// Whether the VM runs (then `online=1` is required).
    pub running: Option<bool>,
    /// Other nodes with no blocker (the local node is never listed).
    #[serde(deserialize_with = "string_list")]
    pub allowed_nodes: Vec<String>,
    /// Blocked nodes, each with its reasons.
    #[serde(deserialize_with = "map_or_empty")]
    pub not_allowed_nodes: BTreeMap<String, NotAllowedNode>,
    /// Disks on non-shared storage.
    #[serde(deserialize_with = "vec_or_null")]
    pub local_disks: Vec<LocalDisk>,
    /// Local devices (usbN, hostpciN, ...) that block migration unless forced (root only).
    #[serde(deserialize_with = "string_list")]
    pub local_resources: Vec<String>,
    /// Mapped devices (deprecated list).
    #[serde(rename = "mapped-resources", deserialize_with = "string_list")]
    pub mapped_resources: Vec<String>,
    /// Mapped devices by config key: `{name, live-migration?}`.
    #[serde(
        rename = "mapped-resource-info",
        deserialize_with = "map_or_empty",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub mapped_resource_info: BTreeMap<String, serde_json::Value>,
    /// Whether the VM has a D-Bus VM state to carry.
    #[serde(rename = "has-dbus-vmstate", skip_serializing_if = "Option::is_none")]
    pub has_dbus_vmstate: Option<bool>,
    /// HA resources co-migrated by a positive resource-affinity rule.
    #[serde(
        rename = "dependent-ha-resources",
        deserialize_with = "string_list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub dependent_ha_resources: Vec<String>,
}

/// `GET /nodes/{node}/lxc/{vmid}/migrate`: the container shape, with hyphenated keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LxcMigratePrecondition {
    /// Whether the container runs (then `restart=1` is required: no live migration).
    #[serde(with = "lenient::opt")]
    pub running: Option<bool>,
    /// Other nodes with no blocker.
    #[serde(rename = "allowed-nodes", deserialize_with = "string_list")]
    pub allowed_nodes: Vec<String>,
    /// Blocked nodes, each with its reasons.
    #[serde(rename = "not-allowed-nodes", deserialize_with = "map_or_empty")]
    pub not_allowed_nodes: BTreeMap<String, NotAllowedNode>,
    /// HA resources co-migrated by a positive resource-affinity rule.
    #[serde(
        rename = "dependent-ha-resources",
        deserialize_with = "string_list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub dependent_ha_resources: Vec<String>,
}

/// Query of the precondition check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MigratePreconditionQuery {
    /// Target node (currently unused by Proxmox).
    #[serde(with = "lenient::opt", skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// Body of `POST /nodes/{node}/qemu/{vmid}/migrate`.
#[serde_with::apply(Option => #[serde(default, with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QemuMigrateParams {
    /// Target node (the local node is a 400 "target is local node.").
    #[serde(deserialize_with = "super::quirks::string_required")]
    pub target: String,
    /// Live migration: required for a running VM.
    pub online: Option<bool>,
    /// Live-migrate local disks too.
    #[serde(rename = "with-local-disks")]
    pub with_local_disks: Option<bool>,
    /// Storage mapping `src:dst,...`, one id for all, or `1` for identity.
    pub targetstorage: Option<String>,
    /// Bandwidth limit in KiB/s.
    pub bwlimit: Option<u64>,
}

/// Body of `POST /nodes/{node}/lxc/{vmid}/migrate`.
#[serde_with::apply(Option => #[serde(default, with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LxcMigrateParams {
    /// Target node.
    #[serde(deserialize_with = "super::quirks::string_required")]
    pub target: String,
    /// Stop, migrate and start again: how a running container moves.
    pub restart: Option<bool>,
    /// Shutdown timeout in seconds for `restart` (default 180).
    pub timeout: Option<u64>,
    /// Storage mapping (note the hyphen, unlike qemu's `targetstorage`).
    #[serde(rename = "target-storage")]
    pub target_storage: Option<String>,
    /// Bandwidth limit in KiB/s.
    pub bwlimit: Option<u64>,
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::types::form::{from_form, to_form};

    #[test]
    fn qemu_precondition_reads_the_keyed_not_allowed_map() {
        let p: QemuMigratePrecondition = serde_json::from_str(
            r#"{"running":1,"allowed_nodes":["pve2"],
                "not_allowed_nodes":{"pve3":{"unavailable_storages":["local-zfs"],
                    "blocking-ha-resources":[{"sid":"vm:101","cause":"resource-affinity"}]}},
                "local_disks":[{"volid":"local-lvm:vm-105-disk-0","size":"34359738368","cdrom":0,
                    "is_unused":0,"is_attached":1,"is_cloudinit":0,"is_vmstate":0,"is_tpmstate":0,
                    "replicate":1,"shared":0,"drivename":"scsi0"}],
                "local_resources":[],"mapped-resources":[],"mapped-resource-info":{},
                "has-dbus-vmstate":1,"dependent-ha-resources":["vm:102"]}"#,
        )
        .unwrap();
        assert_eq!(p.running, Some(true));
        assert_eq!(p.allowed_nodes, ["pve2"]);
        let pve3 = &p.not_allowed_nodes["pve3"];
        assert_eq!(pve3.unavailable_storages, ["local-zfs"]);
        assert_eq!(
            pve3.blocking_ha_resources[0].cause.as_deref(),
            Some("resource-affinity")
        );
        assert_eq!(p.local_disks[0].size, Some(32 << 30));
        assert_eq!(p.local_disks[0].is_attached, Some(true));
        assert_eq!(p.dependent_ha_resources, ["vm:102"]);
    }

    #[test]
    fn qemu_precondition_accepts_perl_empty_shapes() {
        let p: QemuMigratePrecondition = serde_json::from_str(
            r#"{"running":0,"allowed_nodes":["pve2","pve3"],"not_allowed_nodes":[],
                "local_disks":null,"local_resources":[]}"#,
        )
        .unwrap();
        assert_eq!(p.running, Some(false));
        assert!(p.not_allowed_nodes.is_empty() && p.local_disks.is_empty());
    }

    #[test]
    fn lxc_precondition_uses_hyphenated_keys() {
        let p: LxcMigratePrecondition = serde_json::from_str(
            r#"{"running":"1","allowed-nodes":["pve1"],
                "not-allowed-nodes":{"pve2":{"unavailable_storages":["local"]}}}"#,
        )
        .unwrap();
        assert_eq!(p.allowed_nodes, ["pve1"]);
        assert_eq!(p.not_allowed_nodes["pve2"].unavailable_storages, ["local"]);
        let back = serde_json::to_string(&p).unwrap();
        assert_eq!(
            back,
            r#"{"running":1,"allowed-nodes":["pve1"],"not-allowed-nodes":{"pve2":{"unavailable_storages":["local"]}}}"#
        );
    }

    #[test]
    fn qemu_migrate_is_form_encoded_with_online_one() {
        let p = QemuMigrateParams {
            target: "pve2".into(),
            online: Some(true),
            with_local_disks: Some(true),
            targetstorage: Some("local-lvm:local-zfs".into()),
            bwlimit: Some(102_400),
        };
        let body = to_form(&p).unwrap();
        assert_eq!(
            body,
            "target=pve2&online=1&with-local-disks=1&targetstorage=local-lvm%3Alocal-zfs&bwlimit=102400"
        );
        assert_eq!(from_form::<QemuMigrateParams>(&body).unwrap(), p);
        let minimal = QemuMigrateParams {
            target: "pve3".into(),
            ..Default::default()
        };
        assert_eq!(to_form(&minimal).unwrap(), "target=pve3");
    }

    #[test]
    fn lxc_migrate_uses_restart_and_hyphenated_target_storage() {
        let p = LxcMigrateParams {
            target: "pve1".into(),
            restart: Some(true),
            timeout: Some(180),
            target_storage: Some("local".into()),
            bwlimit: None,
        };
        assert_eq!(
            to_form(&p).unwrap(),
            "target=pve1&restart=1&timeout=180&target-storage=local"
        );
        assert!(from_form::<LxcMigrateParams>("restart=1").is_err());
    }
}
