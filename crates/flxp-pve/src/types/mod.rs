//! Serde wire types of the Proxmox VE API endpoints flxp uses, shared by client and simulator.
//!
//! Reading is lenient (numbers as strings, `0`/`1` booleans, missing optional fields; see
//! `flxp_core::lenient`); writing is exact (what Proxmox sends and expects: `0`/`1` booleans,
//! absent rather than `null`, form-encoded request bodies via [`form`]). One module per endpoint
//! group. Contract 1's entry types come from `flxp_core::snapshot::raw` and are re-exported here.

pub mod access;
pub mod cluster;
pub mod disks;
pub mod form;
pub mod guests;
pub mod ha;
pub mod lifecycle;
pub mod migrate;
pub mod nodes;
pub mod pools;
pub mod quirks;
pub mod tasks;
pub mod version;

pub use flxp_core::snapshot::raw::{
    Ha, HaResource, HaRule, HaStatusEntry, NodeExtra, Resource, RrdRow, Task, Volume,
};

pub use access::{Permissions, PermissionsQuery, TicketRequest, TicketResponse};
pub use cluster::{
    ClusterOptions, ClusterStatusEntry, NextId, NextIdQuery, ResourceType, ResourcesQuery,
};
pub use disks::{
    ResizeParams, SizeError, SizeSpec, boot_disk_key, format_size, is_cdrom_drive, is_drive_key,
    parse_size,
};
pub use guests::{
    ConfigUpdate, GuestConfig, GuestKind, GuestListEntry, GuestStatusCurrent, LxcListEntry,
    QemuListEntry,
};
pub use ha::{HaMigrateParams, HaMigrateResponse, ManagerStatus, ManagerStatusResponse};
pub use lifecycle::{
    CloneParams, CreateParams, DeleteParams, ShutdownParams, StartParams, StopParams,
};
pub use migrate::{
    LxcMigrateParams, LxcMigratePrecondition, MigratePreconditionQuery, QemuMigrateParams,
    QemuMigratePrecondition,
};
pub use nodes::{
    ContentQuery, NodeCommand, NodeCommandParams, NodeConfig, NodeConfigUpdate, NodeListEntry,
    NodeStatus, RrdCf, RrdQuery, RrdTimeframe, StorageEntry, StorageQuery,
};
pub use pools::{Pool, PoolListEntry};
pub use tasks::{TaskLogLine, TaskLogQuery, TaskStatus, Upid, UpidError};
pub use version::Version;
