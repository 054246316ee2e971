//! The pure half of a VM creation: reading a template's disks, choosing how to clone it to a
//! node, and the config update that turns the clone into the requested VM (cores, memory,
//! cloud-init, interfaces, tags, backup flag). No I/O: these are tested without any API.

use std::collections::{BTreeMap, BTreeSet};

use flxp_core::units::MIB;
use flxp_pve::types::form::encode_sshkeys;
use flxp_pve::types::{ConfigUpdate, GuestConfig, boot_disk_key};

use super::input::VmRequest;

/// One disk of a guest config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskInfo {
    /// Config key (`scsi0`).
    pub key: String,
    /// Storage id, when the volume is on a storage (`ceph` of `ceph:base-9000-disk-0`).
    pub storage: Option<String>,
    /// Size in bytes from `size=`, when given.
    pub size: Option<u64>,
    /// A CD-ROM drive (`media=cdrom`), the cloud-init drive included.
    pub cdrom: bool,
    /// The cloud-init drive.
    pub cloudinit: bool,
}

/// Whether a config key names a disk (`scsi0`, `virtio1`, `sata2`, `ide3`, `efidisk0`, `tpmstate0`).
pub fn is_disk_key(key: &str) -> bool {
    let digits = key.trim_start_matches(|c: char| c.is_ascii_lowercase());
    let prefix = &key[..key.len() - digits.len()];
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && matches!(
            prefix,
            "ide" | "sata" | "scsi" | "virtio" | "efidisk" | "tpmstate"
        )
}

/// Parses a disk value (`ceph:vm-100-disk-0,iothread=1,size=32G`).
pub fn parse_disk(key: &str, value: &str) -> DiskInfo {
    let mut parts = value.split(',');
    let volume = parts.next().unwrap_or_default();
    let volume = volume.strip_prefix("file=").unwrap_or(volume);
    let mut size = None;
    let mut cdrom = false;
    for opt in parts {
        match opt.split_once('=') {
            Some(("size", v)) => size = parse_size(v),
            Some(("media", "cdrom")) => cdrom = true,
            _ => {}
        }
    }
    let storage = volume
        .split_once(':')
        .map(|(s, _)| s.to_owned())
        .filter(|s| !s.is_empty());
    DiskInfo {
        key: key.to_owned(),
        storage,
        size,
        cdrom,
        cloudinit: volume.contains("cloudinit"),
    }
}

/// Parses a Proxmox size (`32G`, `512M`, `1T`, `4096K`, plain bytes) as a disk's `size=` holds
/// it, with [`flxp_pve::types::parse_size`]'s grammar; any case, and a `B` unit for bytes, are
/// read too.
pub fn parse_size(text: &str) -> Option<u64> {
    let upper = text.to_ascii_uppercase();
    // `SizeSpec` writes bytes without a unit; an explicit `B` after the digits means the same.
    let text = match upper.strip_suffix('B') {
        Some(number) if number.ends_with(|c: char| c.is_ascii_digit()) => number,
        _ => &upper,
    };
    // A disk's size is never relative.
    flxp_pve::types::parse_size(text)
}

/// Every disk of a config, in key order.
pub fn disks(config: &GuestConfig) -> Vec<DiskInfo> {
    config
        .values
        .keys()
        .filter(|k| is_disk_key(k))
        .filter_map(|k| config.get(k).map(|v| parse_disk(k, &v)))
        .collect()
}

/// The boot disk, as Proxmox picks it for `maxdisk`: the first configured non-CD-ROM drive of
/// `boot: order=...`, the legacy `bootdisk`, or with neither the first disk in bus order
/// ([`flxp_pve::types::boot_disk_key`]). It is the disk a storage profile sizes.
pub fn boot_disk(config: &GuestConfig) -> Option<DiskInfo> {
    let values: BTreeMap<String, String> = config
        .values
        .keys()
        .filter_map(|k| config.get(k).map(|v| (k.clone(), v)))
        .collect();
    let key = boot_disk_key(|k| values.get(k).map(String::as_str))?;
    values.get(key).map(|v| parse_disk(key, v))
}

/// How to clone a template to the chosen node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClonePlan {
    /// The template's VMID.
    pub template: u32,
    /// The node the template is on (the clone call goes there).
    pub source_node: String,
    /// Target node, when it differs from the source (shared storage only).
    pub target: Option<String>,
    /// Full clone (a copy) rather than linked (a thin copy on the template's storage).
    pub full: bool,
    /// Target storage of a full clone.
    pub storage: Option<String>,
}

/// Why a template cannot be cloned to a node; the message is shown to users.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CloneError {
    /// The template's disks are on local storage of another node.
    #[error(
        "template {template} is on node {source_node} with disks on local storage, so it cannot be cloned to {node}: configure a per-node template for {node}"
    )]
    LocalTemplate {
        /// The template's VMID.
        template: u32,
        /// The node the template is on.
        source_node: String,
        /// The node asked for.
        node: String,
    },
    /// A cross-node clone needs the target storage shared.
    #[error(
        "storage {storage:?} is not shared, so a clone of template {template} from {source_node} cannot land on it on {node}: configure a per-node template for {node}"
    )]
    StorageNotShared {
        /// The storage profile's storage.
        storage: String,
        /// The template's VMID.
        template: u32,
        /// The node the template is on.
        source_node: String,
        /// The node asked for.
        node: String,
    },
}

/// Chooses how to clone: `target` only when every template disk is on shared storage; a linked
/// clone only when the template's disks already are on the profile's storage and that storage is
/// shared (a linked clone on local storage could never migrate); a full clone otherwise.
pub fn plan_clone(
    template: u32,
    source_node: &str,
    template_disks: &[DiskInfo],
    node: &str,
    storage: &str,
    force_full: bool,
    is_shared: impl Fn(&str) -> bool,
) -> Result<ClonePlan, CloneError> {
    let data: Vec<&DiskInfo> = template_disks
        .iter()
        .filter(|d| !d.cdrom || d.cloudinit)
        .collect();
    let all_shared = data
        .iter()
        .all(|d| d.storage.as_deref().is_some_and(&is_shared));
    let target = (node != source_node).then(|| node.to_owned());
    if target.is_some() && !all_shared {
        return Err(CloneError::LocalTemplate {
            template,
            source_node: source_node.to_owned(),
            node: node.to_owned(),
        });
    }
    if target.is_some() && !is_shared(storage) {
        return Err(CloneError::StorageNotShared {
            storage: storage.to_owned(),
            template,
            source_node: source_node.to_owned(),
            node: node.to_owned(),
        });
    }
    let on_profile_storage = data
        .iter()
        .filter(|d| !d.cloudinit)
        .all(|d| d.storage.as_deref() == Some(storage));
    let linked = !force_full && all_shared && on_profile_storage && is_shared(storage);
    Ok(ClonePlan {
        template,
        source_node: source_node.to_owned(),
        target,
        full: !linked,
        storage: (!linked).then(|| storage.to_owned()),
    })
}

/// What to do about the boot disk's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskSize {
    /// It already has the profile's size.
    Keep,
    /// It must grow by this many bytes.
    Grow(u64),
}

/// A boot disk larger than the storage profile asks for: disks cannot shrink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the template's boot disk is {} but the storage profile asks for {}: disks cannot shrink; use a larger storage profile",
    fmt_gib(*current),
    fmt_gib(*wanted)
)]
pub struct ShrinkError {
    /// The cloned disk's size in bytes.
    pub current: u64,
    /// The profile's size in bytes.
    pub wanted: u64,
}

/// Compares the cloned boot disk with the profile; a disk larger than the profile cannot shrink.
pub fn disk_size(current: u64, wanted: u64) -> Result<DiskSize, ShrinkError> {
    match current.cmp(&wanted) {
        std::cmp::Ordering::Equal => Ok(DiskSize::Keep),
        std::cmp::Ordering::Less => Ok(DiskSize::Grow(wanted - current)),
        std::cmp::Ordering::Greater => Err(ShrinkError { current, wanted }),
    }
}

fn fmt_gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// The config update that turns a fresh clone into the requested VM.
pub fn customize(cloned: &GuestConfig, req: &VmRequest) -> ConfigUpdate {
    let mut u = ConfigUpdate::new()
        .with("cores", req.cores.to_string())
        .with("sockets", req.sockets.to_string())
        .with("memory", req.memory.div_ceil(MIB).to_string());
    if let Some(user) = &req.user {
        u = u.with("ciuser", user.clone());
    }
    if let Some(pw) = &req.password {
        u = u.with("cipassword", pw.expose().to_owned());
    }
    if let Some(key) = &req.ssh_public_key {
        u = u.with("sshkeys", encode_sshkeys(key.trim()));
    }
    let wants_cloud_init =
        req.user.is_some() || req.password.is_some() || req.ssh_public_key.is_some();
    if wants_cloud_init && !disks(cloned).iter().any(|d| d.cloudinit) {
        // Without a cloud-init drive the ci* keys reach nothing and nobody can log in: add one,
        // as `qm set VMID --ide2 STORAGE:cloudinit` does.
        if let Some(slot) = ["ide2", "ide0", "ide1", "ide3"]
            .into_iter()
            .find(|k| cloned.get(k).is_none())
        {
            u = u.with(slot, format!("{}:cloudinit", req.storage));
        }
    }
    for (i, nic) in req.interfaces.iter().enumerate() {
        let key = format!("net{i}");
        u = u.with(key.clone(), net_value(cloned.get(&key).as_deref(), nic));
    }
    if !req.interfaces.is_empty() {
        // Interfaces of the template beyond the requested ones would join networks nobody asked for.
        for k in cloned.values.keys() {
            if let Some(n) = k.strip_prefix("net").and_then(|n| n.parse::<usize>().ok()) {
                if n >= req.interfaces.len() {
                    u = u.with_delete(k);
                }
            }
        }
    }
    let mut tags: BTreeSet<String> = cloned
        .get("tags")
        .map(|t| flxp_core::cluster::split_tags(&t).into_iter().collect())
        .unwrap_or_default();
    // The marker of a creation in progress (on `cloned`) stays: the last step takes it off.
    tags.extend(req.tags.iter().map(|t| t.to_ascii_lowercase()));
    if !tags.is_empty() {
        u = u.with("tags", tags.into_iter().collect::<Vec<_>>().join(";"));
    }
    for d in disks(cloned).iter().filter(|d| !d.cdrom) {
        if let Some(v) = cloned.get(&d.key) {
            let nv = with_backup(&v, req.backup);
            if nv != v {
                u = u.with(d.key.clone(), nv);
            }
        }
    }
    u
}

/// A `net` value for a NIC, keeping the MAC address the clone got (`virtio=BC:24:11:..`).
fn net_value(current: Option<&str>, nic: &Nic) -> String {
    let model = nic.model.clone().unwrap_or_else(|| "virtio".into());
    let mac = current.and_then(|v| {
        v.split(',').find_map(|p| {
            let (k, val) = p.split_once('=')?;
            (is_mac(val) && k != "bridge").then(|| val.to_owned())
        })
    });
    let mut out = match mac {
        Some(mac) => format!("{model}={mac}"),
        None => model,
    };
    out.push_str(&format!(",bridge={}", nic.bridge));
    if let Some(v) = nic.vlan {
        out.push_str(&format!(",tag={v}"));
    }
    if nic.firewall {
        out.push_str(",firewall=1");
    }
    out
}

use super::input::Nic;

fn is_mac(v: &str) -> bool {
    v.len() == 17
        && v.split(':')
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// A disk value with `backup=0` when excluded from backups, without it when included.
fn with_backup(value: &str, backup: bool) -> String {
    let mut parts: Vec<&str> = value
        .split(',')
        .filter(|p| !p.starts_with("backup="))
        .collect();
    if !backup {
        parts.push("backup=0");
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeMap;

    use super::*;
    use crate::create_vm::fixtures;
    use crate::create_vm::input::ImageSource;
    use flxp_pve::Secret;
    use flxp_pve::types::form::decode_sshkeys;

    fn config(pairs: &[(&str, &str)]) -> GuestConfig {
        GuestConfig {
            digest: Some("abc".into()),
            values: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
                .collect(),
        }
    }

    fn template() -> GuestConfig {
        config(&[
            ("scsi0", "ceph:base-9000-disk-0,iothread=1,size=32G"),
            ("ide2", "ceph:vm-9000-cloudinit,media=cdrom"),
            ("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr1"),
            ("net1", "virtio=BC:24:11:00:00:02,bridge=vmbr2"),
            ("boot", "order=scsi0;ide2"),
            ("tags", "ubuntu"),
            ("ciuser", "ubuntu"),
        ])
    }

    fn shared(s: &str) -> bool {
        s == "ceph"
    }

    #[test]
    fn disk_keys_values_and_sizes() {
        assert!(is_disk_key("scsi0") && is_disk_key("virtio15") && is_disk_key("efidisk0"));
        assert!(!is_disk_key("net0") && !is_disk_key("unused0") && !is_disk_key("scsi"));
        assert_eq!(parse_size("32G"), Some(32 << 30));
        assert_eq!(parse_size("1.5T"), Some(3 << 39));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("4X"), None);
        let d = parse_disk("ide2", "ceph:vm-9000-cloudinit,media=cdrom");
        assert!(d.cdrom && d.cloudinit);
        assert_eq!(d.storage.as_deref(), Some("ceph"));
        let b = boot_disk(&template()).unwrap();
        assert_eq!((b.key.as_str(), b.size), ("scsi0", Some(32 << 30)));
        let legacy = config(&[
            ("ide0", "local:iso/x.iso,media=cdrom"),
            ("virtio1", "local-lvm:vm-1-disk-1,size=8G"),
            ("virtio0", "local-lvm:vm-1-disk-0,size=16G"),
        ]);
        assert_eq!(boot_disk(&legacy).unwrap().key, "virtio0");
        // The boot order decides, CD-ROMs and missing drives skipped; with an order that names
        // no disk there is none (Proxmox reports maxdisk 0 then).
        let ordered = config(&[
            ("scsi0", "ceph:vm-1-disk-0,size=32G"),
            ("virtio0", "ceph:vm-1-disk-1,size=8G"),
            ("ide2", "ceph:vm-1-cloudinit,media=cdrom"),
            ("boot", "order=ide2;sata0;virtio0;scsi0"),
        ]);
        assert_eq!(boot_disk(&ordered).unwrap().key, "virtio0");
        let pxe = config(&[
            ("scsi0", "ceph:vm-1-disk-0,size=32G"),
            ("boot", "order=net0"),
        ]);
        assert_eq!(boot_disk(&pxe), None);
    }

    #[test]
    fn a_shared_template_clones_linked_with_target_onto_its_own_storage() {
        let ds = disks(&template());
        let p = plan_clone(9000, "pve1", &ds, "pve3", "ceph", false, shared).unwrap();
        assert_eq!(
            p,
            ClonePlan {
                template: 9000,
                source_node: "pve1".into(),
                target: Some("pve3".into()),
                full: false,
                storage: None,
            }
        );
        let same = plan_clone(9000, "pve1", &ds, "pve1", "ceph", false, shared).unwrap();
        assert_eq!(same.target, None);
        let forced = plan_clone(9000, "pve1", &ds, "pve2", "ceph", true, shared).unwrap();
        assert!(forced.full && forced.storage.as_deref() == Some("ceph"));
        // Another shared storage: a full copy onto it.
        let other = plan_clone(9000, "pve1", &ds, "pve2", "nfs", false, |s| {
            s != "local-lvm"
        })
        .unwrap();
        assert!(other.full);
        assert_eq!(other.storage.as_deref(), Some("nfs"));
    }

    #[test]
    fn a_local_template_clones_full_and_only_on_its_node() {
        let local = disks(&config(&[("scsi0", "local-lvm:base-9001-disk-0,size=32G")]));
        let p = plan_clone(9001, "pve2", &local, "pve2", "local-lvm", false, shared).unwrap();
        assert!(p.full && p.target.is_none());
        assert_eq!(p.storage.as_deref(), Some("local-lvm"));
        let e = plan_clone(9001, "pve2", &local, "pve3", "local-lvm", false, shared).unwrap_err();
        assert!(e.to_string().contains("per-node template for pve3"), "{e}");
        let e = plan_clone(
            9000,
            "pve1",
            &disks(&template()),
            "pve3",
            "local-lvm",
            false,
            shared,
        )
        .unwrap_err();
        assert!(e.to_string().contains("not shared"), "{e}");
    }

    #[test]
    fn disks_grow_but_never_shrink() {
        assert_eq!(disk_size(32 << 30, 32 << 30), Ok(DiskSize::Keep));
        assert_eq!(disk_size(32 << 30, 64 << 30), Ok(DiskSize::Grow(32 << 30)));
        let e = disk_size(64 << 30, 32 << 30).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the template's boot disk is 64.0 GiB but the storage profile asks for 32.0 GiB: disks cannot shrink; use a larger storage profile"
        );
    }

    #[test]
    fn the_update_sets_size_cloud_init_interfaces_tags_and_backup() {
        let req = VmRequest {
            name: "web".into(),
            memory: 4 << 30,
            cores: 2,
            sockets: 1,
            image: ImageSource::default(),
            storage: "ceph".into(),
            disk_bytes: 32 << 30,
            ssh_public_key: Some("ssh-ed25519 AAAA+/= me@host\n".into()),
            user: Some("admin".into()),
            password: Some(Secret::new("pw;=x")),
            interfaces: vec![fixtures::nic(true)],
            backup: false,
            tags: vec!["flxp.anti-affinity.web".into(), "Web".into()],
            policy: None,
            host: None,
        };
        let u = customize(&template(), &req);
        let want: BTreeMap<String, String> = [
            ("cores", "2"),
            ("sockets", "1"),
            ("memory", "4096"),
            ("ciuser", "admin"),
            ("cipassword", "pw;=x"),
            ("sshkeys", "ssh-ed25519%20AAAA%2B%2F%3D%20me%40host"),
            (
                "net0",
                "virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=100,firewall=1",
            ),
            ("tags", "flxp.anti-affinity.web;ubuntu;web"),
            (
                "scsi0",
                "ceph:base-9000-disk-0,iothread=1,size=32G,backup=0",
            ),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(u.set, want);
        assert_eq!(u.delete.as_deref(), Some("net1"));
        assert_eq!(
            decode_sshkeys(&u.set["sshkeys"]).as_deref(),
            Some("ssh-ed25519 AAAA+/= me@host")
        );
        // Backups on: an inherited backup=0 is removed.
        let excluded = config(&[("scsi0", "ceph:vm-1-disk-0,backup=0,size=32G")]);
        let u = customize(
            &excluded,
            &VmRequest {
                backup: true,
                interfaces: vec![],
                ..req.clone()
            },
        );
        assert_eq!(u.set["scsi0"], "ceph:vm-1-disk-0,size=32G");
        assert_eq!(u.delete, None);
        // That template has no cloud-init drive: one is added for the user, password and key.
        assert_eq!(u.set["ide2"], "ceph:cloudinit");
        assert!(!customize(&template(), &req).set.contains_key("ide2"));
        let bare = VmRequest {
            user: None,
            password: None,
            ssh_public_key: None,
            ..req.clone()
        };
        assert!(!customize(&excluded, &bare).set.contains_key("ide2"));
    }
}
