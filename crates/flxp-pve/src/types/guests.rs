//! Guests: the qemu and lxc lists of a node, `status/current`, and config read and write.
//!
//! A config read is a free-form map of keys plus `digest`; a write sends changed keys, `delete`
//! and the `digest` read before, so a concurrent change fails with "checksum mismatch" instead of
//! being overwritten.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use flxp_core::lenient;

use super::quirks::u32_required;

pub use flxp_core::cluster::GuestKind;

/// One entry of `GET /nodes/{node}/qemu` or `/lxc` (lxc adds `maxswap`, lacks `pressurecpufull`).
#[serde_with::apply(Option => #[serde(default, with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GuestListEntry {
    /// Guest id (a string in some releases).
    #[serde(deserialize_with = "u32_required")]
    pub vmid: u32,
    /// `running` or `stopped`.
    #[serialize_always]
    pub status: Option<String>,
    /// Guest name.
    pub name: Option<String>,
    /// `lxc` for containers (absent for qemu).
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// CPU load as a fraction of `cpus`.
    pub cpu: Option<f64>,
    /// vCPUs.
    #[serde(default, with = "lenient::whole")]
    #[serde_with(skip_apply)]
    pub cpus: Option<f64>,
    /// Used memory in bytes.
    pub mem: Option<u64>,
    /// Configured memory in bytes.
    pub maxmem: Option<u64>,
    /// Host cgroup memory of the QEMU process in bytes (PVE 9).
    pub memhost: Option<u64>,
    /// Configured swap in bytes (lxc).
    pub maxswap: Option<u64>,
    /// Disk used in bytes.
    pub disk: Option<u64>,
    /// Boot or root disk size in bytes.
    pub maxdisk: Option<u64>,
    /// Bytes read since start.
    pub diskread: Option<u64>,
    /// Bytes written since start.
    pub diskwrite: Option<u64>,
    /// Bytes received since start.
    pub netin: Option<u64>,
    /// Bytes sent since start.
    pub netout: Option<u64>,
    /// Seconds since start.
    pub uptime: Option<u64>,
    /// Process id of the running guest.
    pub pid: Option<u64>,
    /// QMP status (`running`, `paused`, ...), qemu only.
    pub qmpstatus: Option<String>,
    /// Config lock.
    pub lock: Option<String>,
    /// `;`-separated tags.
    pub tags: Option<String>,
    /// Whether the guest is a template.
    pub template: Option<bool>,
    /// PSI, CPU some, avg10 in percent.
    pub pressurecpusome: Option<f64>,
    /// PSI, CPU full, avg10 in percent (qemu only).
    pub pressurecpufull: Option<f64>,
    /// PSI, IO some, avg10 in percent.
    pub pressureiosome: Option<f64>,
    /// PSI, IO full, avg10 in percent.
    pub pressureiofull: Option<f64>,
    /// PSI, memory some, avg10 in percent.
    pub pressurememorysome: Option<f64>,
    /// PSI, memory full, avg10 in percent.
    pub pressurememoryfull: Option<f64>,
}

/// An entry of the qemu list.
pub type QemuListEntry = GuestListEntry;
/// An entry of the lxc list.
pub type LxcListEntry = GuestListEntry;

/// `GET /nodes/{node}/{qemu|lxc}/{vmid}/status/current`: the list fields plus HA and agent state.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GuestStatusCurrent {
    /// The fields a list entry has.
    #[serde(flatten)]
    pub entry: GuestListEntry,
    /// HA state: `{managed: 0|1, state?, group?, ...}`.
    pub ha: Option<serde_json::Value>,
    /// Whether the QEMU guest agent is enabled.
    #[serde(with = "lenient::opt")]
    pub agent: Option<bool>,
}

/// Config keys whose values are secrets: cloud-init's password (in clear in an update, hashed in
/// a read config). `Debug` of the config types shows them as `[redacted]`.
pub const SECRET_CONFIG_KEYS: &[&str] = &["cipassword"];

/// A map of config keys for `Debug`, with the values of [`SECRET_CONFIG_KEYS`] redacted.
struct RedactedKeys<'a, V>(&'a BTreeMap<String, V>);

impl<V: fmt::Debug> fmt::Debug for RedactedKeys<'_, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (k, v) in self.0 {
            if SECRET_CONFIG_KEYS.contains(&k.as_str()) {
                m.entry(k, &format_args!("[redacted]"));
            } else {
                m.entry(k, v);
            }
        }
        m.finish()
    }
}

/// `GET /nodes/{node}/{qemu|lxc}/{vmid}/config`: every config key as sent, plus `digest`.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GuestConfig {
    /// SHA-1 of the config file: send it back with a write to detect concurrent changes.
    #[serde(with = "lenient::opt", skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Config keys (`name`, `memory`, `cores`, `tags`, `net0`, ...) with their values as sent.
    #[serde(flatten)]
    pub values: BTreeMap<String, serde_json::Value>,
}

impl GuestConfig {
    /// A key's value as text (numbers rendered as Proxmox would write them in the config file).
    pub fn get(&self, key: &str) -> Option<String> {
        match self.values.get(key)? {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            serde_json::Value::Bool(b) => Some(u8::from(*b).to_string()),
            _ => None,
        }
    }
}

impl fmt::Debug for GuestConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuestConfig")
            .field("digest", &self.digest)
            .field("values", &RedactedKeys(&self.values))
            .finish()
    }
}

/// Body of `PUT /nodes/{node}/{qemu|lxc}/{vmid}/config`: keys to set, keys to delete, the digest.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConfigUpdate {
    /// Comma-separated keys to delete (`tags`, `unused0`).
    pub delete: Option<String>,
    /// Refuse the write if the config's digest differs (500 "checksum mismatch").
    pub digest: Option<String>,
    /// Keys to set, with their values as Proxmox's config syntax writes them.
    #[serde(flatten)]
    pub set: BTreeMap<String, String>,
}

impl fmt::Debug for ConfigUpdate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigUpdate")
            .field("delete", &self.delete)
            .field("digest", &self.digest)
            .field("set", &RedactedKeys(&self.set))
            .finish()
    }
}

impl ConfigUpdate {
    /// An empty update.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets one key.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.set.insert(key.into(), value.into());
        self
    }

    /// Deletes one key (appended to the comma-separated `delete` list).
    pub fn with_delete(mut self, key: &str) -> Self {
        self.delete = Some(match self.delete.take() {
            Some(d) if !d.is_empty() => format!("{d},{key}"),
            _ => key.to_owned(),
        });
        self
    }

    /// Makes the write conditional on the config still having this digest.
    pub fn with_digest(mut self, digest: impl Into<String>) -> Self {
        self.digest = Some(digest.into());
        self
    }

    /// Whether the update changes nothing (Proxmox answers 500 "no options specified").
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.delete.as_deref().is_none_or(str::is_empty)
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::types::form::{from_form, to_form};

    #[test]
    fn debug_of_config_reads_and_updates_never_shows_the_cloud_init_password() {
        let u = ConfigUpdate::new()
            .with("cipassword", "hunter2-initial")
            .with("ciuser", "admin");
        let shown = format!("{u:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains(r#""cipassword": [redacted]"#), "{shown}");
        assert!(shown.contains(r#""ciuser": "admin""#), "{shown}");
        let c: GuestConfig =
            serde_json::from_str(r#"{"cipassword":"$5$abc$hashedvalue","cores":2}"#).unwrap();
        let shown = format!("{c:?}");
        assert!(!shown.contains("hashedvalue"), "{shown}");
        assert!(shown.contains("cores"), "{shown}");
        // The wire still carries it.
        assert_eq!(u.set["cipassword"], "hunter2-initial");
    }

    #[test]
    fn guest_list_reads_string_vmids_and_zero_one_templates() {
        let l: Vec<GuestListEntry> = serde_json::from_str(
            r#"[{"vmid":"105","status":"running","name":"web1","cpu":0.1,"cpus":4,
                 "mem":1073741824,"maxmem":"4294967296","template":"0","tags":"flxp.ignore;web",
                 "pressurecpusome":"1.5","qmpstatus":"running"},
                {"vmid":106,"status":"stopped","type":"lxc","maxswap":536870912,"template":1}]"#,
        )
        .unwrap();
        assert_eq!(l[0].vmid, 105);
        assert_eq!(l[0].maxmem, Some(4 << 30));
        assert_eq!(l[0].template, Some(false));
        assert_eq!(l[0].pressurecpusome, Some(1.5));
        assert_eq!(l[1].template, Some(true));
        let back = serde_json::to_value(&l[0]).unwrap();
        assert_eq!(back["vmid"], 105);
        assert_eq!(back["cpus"], 4);
        assert_eq!(back["template"], 0);
        assert!(serde_json::from_str::<GuestListEntry>(r#"{"status":"running"}"#).is_err());
    }

    #[test]
    fn status_current_keeps_ha_and_flattened_fields() {
        let s: GuestStatusCurrent = serde_json::from_str(
            r#"{"vmid":"105","status":"running","ha":{"managed":1,"state":"started"},"agent":1}"#,
        )
        .unwrap();
        assert_eq!(s.entry.vmid, 105);
        assert_eq!(s.ha.unwrap()["managed"], 1);
        assert_eq!(s.agent, Some(true));
    }

    #[test]
    fn config_read_keeps_every_key_and_the_digest() {
        let c: GuestConfig = serde_json::from_str(
            r#"{"name":"web1","memory":"4096","cores":2,"tags":"flxp.affinity.web",
                "net0":"virtio=BC:24:11:00:00:01,bridge=vmbr0","onboot":1,
                "digest":"2f1c0e8b8a6c2d1e7f9a0b1c2d3e4f5a6b7c8d9e"}"#,
        )
        .unwrap();
        assert_eq!(
            c.digest.as_deref(),
            Some("2f1c0e8b8a6c2d1e7f9a0b1c2d3e4f5a6b7c8d9e")
        );
        assert_eq!(c.get("memory").as_deref(), Some("4096"));
        assert_eq!(c.get("cores").as_deref(), Some("2"));
        assert_eq!(c.get("onboot").as_deref(), Some("1"));
        assert!(!c.values.contains_key("digest"));
    }

    #[test]
    fn config_write_form_encodes_keys_delete_and_digest() {
        let u = ConfigUpdate::new()
            .with("tags", "flxp.affinity.web;web")
            .with("net0", "virtio,bridge=vmbr0,firewall=1")
            .with_delete("unused0")
            .with_delete("balloon")
            .with_digest("2f1c");
        assert_eq!(
            to_form(&u).unwrap(),
            "delete=unused0%2Cballoon&digest=2f1c&net0=virtio%2Cbridge%3Dvmbr0%2Cfirewall%3D1&tags=flxp.affinity.web%3Bweb"
        );
        let back: ConfigUpdate = from_form(&to_form(&u).unwrap()).unwrap();
        assert_eq!(back, u);
        assert!(ConfigUpdate::new().is_empty());
        assert!(!u.is_empty());
    }

    #[test]
    fn guest_kind_paths_and_ha_ids() {
        assert_eq!(GuestKind::Qemu.as_str(), "qemu");
        assert_eq!(GuestKind::Lxc.ha_sid(106), "ct:106");
        assert_eq!(GuestKind::from_resource_type("lxc"), Some(GuestKind::Lxc));
        assert_eq!(GuestKind::from_resource_type("node"), None);
    }
}
