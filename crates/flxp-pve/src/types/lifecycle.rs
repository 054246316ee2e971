//! Guest lifecycle requests: clone, create, start, shutdown, stop, delete. Each answers a UPID.
//!
//! All are form-encoded bodies (delete: a query string); booleans go as `1`/`0` and unset options
//! are omitted so Proxmox applies its own defaults.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use flxp_core::lenient;

use super::quirks::u32_required;

/// Body of `POST /nodes/{node}/qemu/{vmid}/clone` (`vmid` is the source, usually a template).
#[serde_with::apply(Option => #[serde(default, with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloneParams {
    /// The new guest's id (from `nextid`; not reserved, so retry on "already exists").
    #[serde(deserialize_with = "u32_required")]
    pub newid: u32,
    /// The new guest's name (a DNS name).
    pub name: Option<String>,
    /// Target node; only when every source disk is on shared storage.
    pub target: Option<String>,
    /// Full clone (a linked clone on local storage can never migrate).
    pub full: Option<bool>,
    /// Target storage of a full clone.
    pub storage: Option<String>,
    /// Pool to add the new guest to.
    pub pool: Option<String>,
    /// Description of the new guest.
    pub description: Option<String>,
    /// Disk format of a full clone (`raw`, `qcow2`, `vmdk`).
    pub format: Option<String>,
    /// Bandwidth limit in KiB/s.
    pub bwlimit: Option<u64>,
}

/// Body of `POST /nodes/{node}/qemu` (create): the id, any config keys, and create-only options.
#[serde_with::apply(Option => #[serde(default, with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateParams {
    /// The new guest's id.
    #[serde(deserialize_with = "u32_required")]
    pub vmid: u32,
    /// Default storage for new disks.
    pub storage: Option<String>,
    /// Pool to add the guest to.
    pub pool: Option<String>,
    /// Start the guest once created.
    pub start: Option<bool>,
    /// Add the guest as an HA resource (PVE 9).
    #[serde(rename = "ha-managed")]
    pub ha_managed: Option<bool>,
    /// Config keys (`name`, `memory`, `cores`, `net0`, `scsi0`, `sshkeys`, ...) in config syntax.
    /// `sshkeys` must be encoded with [`super::form::encode_sshkeys`] first.
    #[serde(flatten)]
    pub config: BTreeMap<String, String>,
}

/// Body of `POST .../status/start`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StartParams {
    /// Seconds to wait for the start (default max(30, memory GiB)).
    #[serde(with = "lenient::opt", skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
}

/// Body of `POST .../status/shutdown` (a clean ACPI shutdown).
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ShutdownParams {
    /// Seconds to wait.
    pub timeout: Option<u64>,
    /// Stop hard if the shutdown does not finish in time.
    #[serde(rename = "forceStop")]
    pub force_stop: Option<bool>,
}

/// Body of `POST .../status/stop` (a hard stop).
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StopParams {
    /// Seconds to wait.
    pub timeout: Option<u64>,
    /// Abort running shutdown tasks first.
    #[serde(rename = "overrule-shutdown")]
    pub overrule_shutdown: Option<bool>,
}

/// Query of `DELETE /nodes/{node}/{qemu|lxc}/{vmid}`.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DeleteParams {
    /// Also remove the id from backup jobs, replication and HA.
    pub purge: Option<bool>,
    /// Also destroy disks with this id that the config does not reference.
    #[serde(rename = "destroy-unreferenced-disks")]
    pub destroy_unreferenced_disks: Option<bool>,
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::types::form::{encode_sshkeys, from_form, to_form};

    #[test]
    fn clone_params_are_form_encoded_with_zero_one_booleans() {
        let p = CloneParams {
            newid: 2004,
            name: Some("web-server".into()),
            target: Some("pve2".into()),
            full: Some(true),
            storage: Some("ceph".into()),
            pool: Some("web".into()),
            description: Some("placed by flxp; score=42".into()),
            ..Default::default()
        };
        assert_eq!(
            to_form(&p).unwrap(),
            "newid=2004&name=web-server&target=pve2&full=1&storage=ceph&pool=web&description=placed+by+flxp%3B+score%3D42"
        );
        let back: CloneParams = from_form(&to_form(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn create_params_flatten_config_keys_and_double_encode_sshkeys() {
        let mut config = BTreeMap::new();
        config.insert("memory".to_owned(), "4096".to_owned());
        config.insert("net0".to_owned(), "virtio,bridge=vmbr0".to_owned());
        config.insert(
            "sshkeys".to_owned(),
            encode_sshkeys("ssh-ed25519 AAAA+x= a@b"),
        );
        let p = CreateParams {
            vmid: 120,
            storage: Some("local-lvm".into()),
            start: Some(false),
            ha_managed: Some(true),
            config,
            ..Default::default()
        };
        assert_eq!(
            to_form(&p).unwrap(),
            "vmid=120&storage=local-lvm&start=0&ha-managed=1&memory=4096&net0=virtio%2Cbridge%3Dvmbr0\
             &sshkeys=ssh-ed25519%2520AAAA%252Bx%253D%2520a%2540b"
        );
        let back: CreateParams = from_form(&to_form(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn power_and_delete_params() {
        let s = ShutdownParams {
            timeout: Some(60),
            force_stop: Some(true),
        };
        assert_eq!(to_form(&s).unwrap(), "timeout=60&forceStop=1");
        let s = StopParams {
            timeout: None,
            overrule_shutdown: Some(true),
        };
        assert_eq!(to_form(&s).unwrap(), "overrule-shutdown=1");
        assert_eq!(to_form(&StartParams::default()).unwrap(), "");
        let d = DeleteParams {
            purge: Some(true),
            destroy_unreferenced_disks: Some(false),
        };
        assert_eq!(to_form(&d).unwrap(), "purge=1&destroy-unreferenced-disks=0");
    }
}
