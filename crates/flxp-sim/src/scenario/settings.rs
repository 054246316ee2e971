//! The `sim` section of a scenario: what the simulator adds to a Contract 1 snapshot (credentials,
//! timing, per-node and per-guest details, extra storages, pools, faults). Every struct refuses
//! unknown fields, so a typo is an error naming the field rather than a silent default.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::world::Pressure;

/// The `sim` section.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimSection {
    /// Cluster name (`/cluster/status`); default `flxp-sim`.
    pub cluster_name: Option<String>,
    /// pve-manager version reported by `/version`; default `9.2.11`.
    pub version: Option<String>,
    /// Simulated epoch seconds at start; default the snapshot's `time`, else now.
    pub start_time: Option<i64>,
    /// Simulated seconds per real second (1000 makes a 60 s migration take 60 ms); default 1.
    pub time_scale: Option<f64>,
    /// Accepted API tokens: `"USER@REALM!ID=SECRET"`, `{"token": "...", "readonly": true}` or
    /// `{"token": "...", "privs": ["Sys.Audit", ...]}` (a role's privileges, granted on `/`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tokens: Vec<Value>,
    /// Users that may log in with a password (`POST /access/ticket`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<UserSpec>,
    /// Migration bandwidth in bytes per second; a live migration lasts memory / bandwidth
    /// seconds. Default 1 GiB/s.
    pub migration_bandwidth: Option<u64>,
    /// Disk copy bandwidth of full clones in bytes per second; default the migration bandwidth.
    pub clone_bandwidth: Option<u64>,
    /// Latency added to every API request, real milliseconds; default 0.
    pub latency_ms: Option<u64>,
    /// Delay before a failed authentication is answered, real milliseconds (Proxmox: ~3000);
    /// default 100.
    pub auth_failure_delay_ms: Option<u64>,
    /// Simulated seconds the HA manager takes to act on a request; default 5.
    pub ha_delay_secs: Option<f64>,
    /// Simulated seconds before HA fences a dead node and recovers its guests; default 60.
    pub ha_fence_delay_secs: Option<f64>,
    /// Seconds between statistics updates, as pvestatd broadcasts every ~10 s: CPU and memory
    /// figures of nodes and guests then lag up to this long, while `node`, `lock` and `tags` stay
    /// current. Default 0 (always current).
    pub stats_interval_secs: Option<f64>,
    /// Simulated seconds from a node shutdown request until it is off; default 30.
    pub node_shutdown_secs: Option<f64>,
    /// Simulated seconds from Wake-on-LAN (or a reboot) until the node is online; default 120.
    pub node_boot_secs: Option<f64>,
    /// Seed of the deterministic generator (MAC addresses, error rates); default 0.
    pub seed: Option<u64>,
    /// Per-node details, by node name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub nodes: BTreeMap<String, NodeSpec>,
    /// Per-guest details, by VMID.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub guests: BTreeMap<String, GuestSpec>,
    /// Storages beyond (or instead of) the snapshot's storage entries.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub storages: Vec<StorageSpec>,
    /// Pool comments, by pool id (members come from the guests' `pool`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pools: BTreeMap<String, PoolSpec>,
    /// Faults active from the start.
    #[serde(skip_serializing_if = "FaultSpec::is_empty")]
    pub faults: FaultSpec,
    /// Usage models and workload events (`trace.schema.json`); times count from the start.
    pub trace: Option<crate::load::Trace>,
}

/// A user that may log in.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserSpec {
    /// `user@realm`.
    pub userid: String,
    /// The password.
    pub password: String,
    /// Whether it may only read (writes answer 403).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub readonly: bool,
}

// Redacting: a scenario may be printed with `{:?}`, its passwords must not be.
impl std::fmt::Debug for UserSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserSpec")
            .field("userid", &self.userid)
            .field("password", &"<redacted>")
            .field("readonly", &self.readonly)
            .finish()
    }
}

/// Per-node details.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeSpec {
    /// CPU cores busy without any guest; default: the snapshot's node load minus its guests.
    pub base_cpu: Option<f64>,
    /// Memory used without any guest, bytes; default: the snapshot's node memory minus its guests.
    pub base_mem: Option<u64>,
    /// Logical CPUs, when the snapshot lacks them.
    pub maxcpu: Option<u32>,
    /// Memory in bytes, when the snapshot lacks it.
    pub maxmem: Option<u64>,
    /// CPU model name.
    pub cpu_model: Option<String>,
    /// CPU sockets.
    pub sockets: Option<u32>,
    /// Cluster address.
    pub ip: Option<String>,
    /// Notes (overrides the snapshot's `nodes.<node>.notes`).
    pub notes: Option<String>,
    /// HA maintenance mode at start.
    pub maintenance: Option<bool>,
    /// Base pressure (PSI avg10, percent).
    pub pressure: Option<Pressure>,
}

/// Per-guest details.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GuestSpec {
    /// Config keys to set (over the generated defaults): `{"scsi0": "ceph:vm-100-disk-0,size=32G"}`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub config: BTreeMap<String, Value>,
    /// CPU load, fraction of the guest's vCPUs.
    pub cpu: Option<f64>,
    /// Guest-reported memory use, bytes.
    pub mem: Option<u64>,
    /// Host memory of the guest, bytes.
    pub memhost: Option<u64>,
    /// Network receive rate, bytes per second.
    pub netin_rate: Option<f64>,
    /// Network send rate, bytes per second.
    pub netout_rate: Option<f64>,
    /// Disk read rate, bytes per second.
    pub diskread_rate: Option<f64>,
    /// Disk write rate, bytes per second.
    pub diskwrite_rate: Option<f64>,
    /// Base pressure (PSI avg10, percent).
    pub pressure: Option<Pressure>,
}

/// A storage definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageSpec {
    /// Storage id.
    pub storage: String,
    /// Plugin type (`rbd`, `lvmthin`, `zfspool`, `dir`, `nfs`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// Whether it is shared between nodes.
    #[serde(default)]
    pub shared: bool,
    /// Content types; default `images,rootdir`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Nodes that can use it; default all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
    /// Size in bytes; default 4 TiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Used by other data, bytes; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used: Option<u64>,
}

/// A pool.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PoolSpec {
    /// Its comment.
    pub comment: Option<String>,
}

/// Injected faults (also what `POST /_sim/faults` takes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultSpec {
    /// Extra latency on matching requests.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub latency: Vec<LatencyFault>,
    /// Errors answered instead of matching requests, at a rate.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ErrorFault>,
    /// Guests whose migrations fail.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fail_migrations: Vec<FailMigration>,
    /// Nodes that do not come back from a reboot or a wake: they stay offline (a failed boot).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fail_boots: Vec<String>,
}

impl FaultSpec {
    /// Whether no fault is configured.
    pub fn is_empty(&self) -> bool {
        self.latency.is_empty()
            && self.errors.is_empty()
            && self.fail_migrations.is_empty()
            && self.fail_boots.is_empty()
    }
}

/// Extra latency on requests whose API path matches `path` (`*` matches anything).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyFault {
    /// Path pattern after `/api2/json`, e.g. `/cluster/resources` or `/nodes/*/rrddata`.
    pub path: String,
    /// Only this HTTP method, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Added latency, real milliseconds.
    pub ms: u64,
}

/// An error answered instead of a matching request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorFault {
    /// Path pattern after `/api2/json` (`*` matches anything).
    pub path: String,
    /// Only this HTTP method, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Share of matching requests that fail, 0..=1; default 1.
    #[serde(default = "one")]
    pub rate: f64,
    /// HTTP status; default 500.
    #[serde(default = "five_hundred")]
    pub status: u16,
    /// Message (first line = reason phrase); default `simulated failure`.
    #[serde(default = "simulated")]
    pub message: String,
}

impl ErrorFault {
    /// Every `GET path` answered with this error, as Proxmox would answer it.
    pub fn get(path: &str, status: u16, message: &str) -> Self {
        Self {
            path: path.into(),
            method: Some("GET".into()),
            rate: 1.0,
            status,
            message: message.into(),
        }
    }
}

fn one() -> f64 {
    1.0
}

fn five_hundred() -> u16 {
    500
}

fn simulated() -> String {
    "simulated failure".into()
}

/// A guest whose migrations fail half-way: `105` or `{"vmid": 105, "message": "..."}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailMigration {
    /// Its VMID.
    pub vmid: u32,
    /// The task's exit status; default `migration problems`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl<'de> Deserialize<'de> for FailMigration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Full {
            vmid: u32,
            #[serde(default)]
            message: Option<String>,
        }
        match Value::deserialize(d)? {
            Value::Number(n) => n
                .as_u64()
                .and_then(|v| u32::try_from(v).ok())
                .map(|vmid| FailMigration {
                    vmid,
                    message: None,
                })
                .ok_or_else(|| serde::de::Error::custom(format!("expected a VMID, got {n}"))),
            v @ Value::Object(_) => {
                let full: Full = serde_json::from_value(v).map_err(serde::de::Error::custom)?;
                Ok(FailMigration {
                    vmid: full.vmid,
                    message: full.message,
                })
            }
            other => Err(serde::de::Error::custom(format!(
                "expected a VMID or {{\"vmid\": ..., \"message\": ...}}, got {other}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::UserSpec;

    #[test]
    fn debug_of_a_user_hides_the_password() {
        let u = UserSpec {
            userid: "root@pam".into(),
            password: "s3cret-pw".into(),
            readonly: false,
        };
        let shown = format!("{u:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("root@pam"), "{shown}");
    }
}
