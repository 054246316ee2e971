//! A simulated guest (qemu VM or LXC container): where it is, whether it runs, what it uses, and
//! its configuration file with pending changes, lock and digest.

use std::collections::{BTreeMap, BTreeSet};

use flxp_core::units::MIB;
use ring::digest::{SHA1_FOR_LEGACY_USE_ONLY, digest};

use crate::ApiError;
use crate::schema::parse_size;

pub use flxp_core::cluster::GuestKind;

/// Pressure stall information (PSI avg10, percent 0..100).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pressure {
    /// `pressurecpusome`.
    #[serde(default)]
    pub cpu_some: f64,
    /// `pressurecpufull` (guests only).
    #[serde(default)]
    pub cpu_full: f64,
    /// `pressureiosome`.
    #[serde(default)]
    pub io_some: f64,
    /// `pressureiofull`.
    #[serde(default)]
    pub io_full: f64,
    /// `pressurememorysome`.
    #[serde(default)]
    pub memory_some: f64,
    /// `pressurememoryfull`.
    #[serde(default)]
    pub memory_full: f64,
}

/// What a guest uses while it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GuestUsage {
    /// CPU load as a fraction of the guest's own vCPUs (0..1).
    pub cpu: f64,
    /// Guest-reported used memory, bytes.
    pub mem: u64,
    /// What the host pays (qemu process memory), bytes; `None` means `mem`.
    pub memhost: Option<u64>,
    /// Used disk of a container's root fs, bytes (qemu reports 0).
    pub disk: u64,
    /// Network and disk throughput, bytes per second (counters grow by these).
    pub netin_rate: f64,
    /// See `netin_rate`.
    pub netout_rate: f64,
    /// See `netin_rate`.
    pub diskread_rate: f64,
    /// See `netin_rate`.
    pub diskwrite_rate: f64,
    /// Base pressure values.
    pub pressure: Pressure,
}

/// One disk or mount point of a guest config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    /// The config key (`scsi0`, `ide2`, `rootfs`, `mp0`).
    pub key: String,
    /// The volume id (`ceph:vm-100-disk-0`), or `none`/`cdrom` for an empty drive.
    pub volid: String,
    /// Storage id, when the volume lives on a storage.
    pub storage: Option<String>,
    /// Size in bytes (`size=` option), 0 when unknown.
    pub size: u64,
    /// A CD-ROM drive (`media=cdrom`).
    pub cdrom: bool,
    /// A cloud-init drive.
    pub cloudinit: bool,
    /// For a linked clone, the base volume it depends on (`base-9000-disk-0`).
    pub base: Option<String>,
}

impl Disk {
    /// Whether it occupies storage: anything but a plain CD-ROM (a cloud-init drive does).
    pub fn is_volume(&self) -> bool {
        !self.cdrom || self.cloudinit
    }
}

/// Config keys that name drives or mount points.
pub fn is_disk_key(kind: GuestKind, key: &str) -> bool {
    let (prefix, digits) = split_indexed(key);
    match kind {
        GuestKind::Qemu => {
            matches!(key, "efidisk0" | "tpmstate0")
                || (!digits.is_empty()
                    && matches!(prefix, "ide" | "sata" | "scsi" | "virtio" | "unused"))
        }
        GuestKind::Lxc => {
            key == "rootfs" || (!digits.is_empty() && matches!(prefix, "mp" | "unused"))
        }
    }
}

/// Splits `scsi12` into (`scsi`, `12`).
pub fn split_indexed(key: &str) -> (&str, &str) {
    let idx = key.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    key.split_at(idx)
}

/// The `size=` of a drive value in bytes (0 when absent).
pub fn disk_size(value: &str) -> u64 {
    value
        .split(',')
        .find_map(|o| o.strip_prefix("size="))
        .and_then(parse_size)
        .unwrap_or(0)
}

/// Parses one drive value (`ceph:vm-100-disk-0,iothread=1,size=32G`).
pub fn parse_disk(kind: GuestKind, key: &str, value: &str) -> Disk {
    let d = DiskRef::parse(kind, value);
    Disk {
        key: key.to_string(),
        volid: d.volid.to_string(),
        storage: d.storage.map(str::to_string),
        size: d.size,
        cdrom: d.cdrom,
        cloudinit: d.cloudinit,
        base: d.base.map(str::to_string),
    }
}

/// A drive value parsed without allocating: [`parse_disk`] for views that run per request over
/// every guest (the storage list of a shared storage).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DiskRef<'a> {
    pub volid: &'a str,
    pub storage: Option<&'a str>,
    pub size: u64,
    pub cdrom: bool,
    pub cloudinit: bool,
    pub base: Option<&'a str>,
}

impl<'a> DiskRef<'a> {
    /// Parses one drive value, as [`parse_disk`] does.
    pub(crate) fn parse(kind: GuestKind, value: &'a str) -> Self {
        let mut parts = value.split(',');
        let first = parts.next().unwrap_or_default();
        let mut volid = first;
        let mut size = 0;
        let mut cdrom = false;
        for opt in parts.clone() {
            match opt.split_once('=') {
                Some(("size", s)) => size = parse_size(s).unwrap_or(0),
                Some(("media", "cdrom")) => cdrom = true,
                Some(("file" | "volume", v)) => volid = v,
                _ => {}
            }
        }
        if let Some(v) = first
            .strip_prefix("file=")
            .or_else(|| first.strip_prefix("volume="))
        {
            volid = v;
        }
        let (storage, volname) = match volid.split_once(':') {
            Some((s, v)) if !s.starts_with('/') => (Some(s), v),
            _ => (None, volid),
        };
        let cloudinit = volname.contains("cloudinit");
        let base = volname
            .split_once('/')
            .map(|(b, _)| b)
            .filter(|b| b.starts_with("base-"));
        if kind == GuestKind::Qemu && (volid == "none" || volid == "cdrom") {
            cdrom = true;
        }
        Self {
            volid,
            storage,
            size,
            cdrom,
            cloudinit,
            base,
        }
    }

    /// Whether it occupies storage, as [`Disk::is_volume`].
    pub(crate) fn is_volume(&self) -> bool {
        !self.cdrom || self.cloudinit
    }
}

/// A guest's configuration file: current values, pending changes and pending deletions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    /// Current values (`name`, `memory`, `net0`, `lock`, `description`, ...), as text.
    pub values: BTreeMap<String, String>,
    /// Changes that apply at the next start (`[PENDING]` section).
    pub pending: BTreeMap<String, String>,
    /// Keys to be deleted at the next start.
    pub pending_delete: BTreeSet<String>,
}

/// What Proxmox answers in place of a secret config value (`SECRET_CONFIG_KEYS`: qemu-server's
/// `vm_config` replaces a set cloud-init password with it before answering).
const HIDDEN: &str = "**********";

impl Config {
    /// `map` as Proxmox shows a config to a caller: every set secret replaced by `**********`.
    pub fn shown(mut map: BTreeMap<String, String>) -> BTreeMap<String, String> {
        for key in flxp_pve::types::guests::SECRET_CONFIG_KEYS {
            if let Some(v) = map.get_mut(*key).filter(|v| !v.is_empty()) {
                *v = HIDDEN.to_owned();
            }
        }
        map
    }

    /// A value with pending changes applied (what `GET config` shows by default).
    pub fn effective(&self, key: &str) -> Option<&str> {
        if self.pending_delete.contains(key) {
            return None;
        }
        self.pending
            .get(key)
            .or_else(|| self.values.get(key))
            .map(String::as_str)
    }

    /// The current value (what the running guest uses).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// All keys with pending changes applied.
    pub fn effective_map(&self) -> BTreeMap<String, String> {
        let mut map = self.values.clone();
        for k in &self.pending_delete {
            map.remove(k);
        }
        map.extend(self.pending.clone());
        map
    }

    /// Moves pending changes into the current values (at start or when stopped).
    pub fn apply_pending(&mut self) {
        for k in std::mem::take(&mut self.pending_delete) {
            self.values.remove(&k);
        }
        self.values.extend(std::mem::take(&mut self.pending));
    }

    /// The config file text the digest is taken over: description as `#` lines, sorted
    /// `key: value` lines, then the `[PENDING]` section.
    pub fn file_text(&self) -> String {
        let mut out = String::new();
        if let Some(descr) = self.values.get("description") {
            for line in descr.lines() {
                out.push('#');
                out.push_str(line);
                out.push('\n');
            }
        }
        for (k, v) in &self.values {
            if k != "description" {
                out.push_str(&format!("{k}: {v}\n"));
            }
        }
        if !self.pending.is_empty() || !self.pending_delete.is_empty() {
            out.push_str("\n[PENDING]\n");
            for (k, v) in &self.pending {
                out.push_str(&format!("{k}: {v}\n"));
            }
            if !self.pending_delete.is_empty() {
                let keys: Vec<&str> = self.pending_delete.iter().map(String::as_str).collect();
                out.push_str(&format!("delete: {}\n", keys.join(",")));
            }
        }
        out
    }

    /// SHA-1 hex of the config file, as `digest` carries it.
    pub fn digest(&self) -> String {
        hex(digest(&SHA1_FOR_LEGACY_USE_ONLY, self.file_text().as_bytes()).as_ref())
    }
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A simulated guest.
#[derive(Debug, Clone, PartialEq)]
pub struct Guest {
    /// Its VMID.
    pub vmid: u32,
    /// qemu or lxc.
    pub kind: GuestKind,
    /// The node it is on now (exactly one, always).
    pub node: String,
    /// Whether it runs.
    pub running: bool,
    /// Its configuration.
    pub config: Config,
    /// Its usage while running.
    pub usage: GuestUsage,
    /// Simulated time it was started (for uptime and counters).
    pub started_at: f64,
    /// Simulated time it came into existence (earlier RRD rows are empty).
    pub created_at: f64,
    /// The pool it belongs to.
    pub pool: Option<String>,
}

impl Guest {
    /// `qemu/100` or `lxc/101`.
    pub fn resource_id(&self) -> String {
        format!("{}/{}", self.kind.as_str(), self.vmid)
    }

    /// `vm:100` or `ct:101`.
    pub fn sid(&self) -> String {
        format!("{}:{}", self.kind.ha_prefix(), self.vmid)
    }

    /// "VM is locked (migrate)" or "CT is locked (backup)": `check_lock` names the guest type
    /// (`guest_type` of `PVE::QemuConfig` and `PVE::LXC::Config`).
    pub fn locked_error(&self, lock: &str) -> ApiError {
        let what = match self.kind {
            GuestKind::Qemu => "VM",
            GuestKind::Lxc => "CT",
        };
        ApiError::die(format!("{what} is locked ({lock})"))
    }

    /// The config file path Proxmox names in errors.
    pub fn config_path(node: &str, kind: GuestKind, vmid: u32) -> String {
        // The directory of its config file under `nodes/<node>/`.
        let dir = match kind {
            GuestKind::Qemu => "qemu-server",
            GuestKind::Lxc => "lxc",
        };
        format!("nodes/{node}/{dir}/{vmid}.conf")
    }

    /// Its name (`name` for qemu, `hostname` for lxc).
    pub fn name(&self) -> Option<&str> {
        match self.kind {
            GuestKind::Qemu => self.config.get("name"),
            GuestKind::Lxc => self.config.get("hostname"),
        }
    }

    /// The config lock, if any.
    pub fn lock(&self) -> Option<&str> {
        self.config.get("lock")
    }

    /// Whether it is a template.
    pub fn is_template(&self) -> bool {
        self.config.get("template").is_some_and(|v| v == "1")
    }

    /// Configured memory in bytes (`memory` in MiB; qemu may write `current=<MiB>`).
    pub fn maxmem(&self) -> u64 {
        let default = match self.kind {
            GuestKind::Qemu => 512,
            GuestKind::Lxc => 512,
        };
        let mib = self
            .config
            .get("memory")
            .and_then(|m| {
                m.split(',')
                    .find_map(|p| {
                        p.strip_prefix("current=")
                            .or((!p.contains('=')).then_some(p))
                    })
                    .and_then(|v| v.parse::<u64>().ok())
            })
            .unwrap_or(default);
        // Saturating: `memory` has no maximum in the schema, and `<<` would drop the high bits.
        mib.saturating_mul(MIB)
    }

    /// Configured vCPUs (qemu: `vcpus` or sockets × cores; lxc: `cores`), capped at `host_cpus`.
    pub fn maxcpu(&self, host_cpus: u32) -> f64 {
        let num = |k: &str| self.config.get(k).and_then(|v| v.parse::<u32>().ok());
        let cpus = match self.kind {
            GuestKind::Qemu => num("vcpus")
                .unwrap_or_else(|| num("sockets").unwrap_or(1) * num("cores").unwrap_or(1)),
            GuestKind::Lxc => num("cores").unwrap_or(host_cpus),
        };
        f64::from(cpus.min(host_cpus.max(1)).max(1))
    }

    /// Host memory it costs its node while running, bytes.
    pub fn host_mem(&self) -> u64 {
        if self.running {
            self.usage.memhost.unwrap_or(self.usage.mem)
        } else {
            0
        }
    }

    /// Its disks and mount points (CD-ROMs included, unused volumes excluded).
    pub fn disks(&self) -> Vec<Disk> {
        self.config
            .values
            .iter()
            .filter(|(k, _)| is_disk_key(self.kind, k) && !k.starts_with("unused"))
            .map(|(k, v)| parse_disk(self.kind, k, v))
            .collect()
    }

    /// The boot disk size, bytes: `rootfs` of a container; for a VM the disk Proxmox boots from
    /// (first disk of `boot: order=`, legacy `bootdisk`, see [`flxp_pve::types::boot_disk_key`]).
    /// 0 when there is none. Scans the config without allocating: views call it per guest.
    pub fn maxdisk(&self) -> u64 {
        let get = |k: &str| self.config.values.get(k).map(String::as_str);
        let boot = match self.kind {
            GuestKind::Lxc => get("rootfs"),
            GuestKind::Qemu => flxp_pve::types::boot_disk_key(get).and_then(get),
        };
        boot.map(disk_size).unwrap_or(0)
    }

    /// Bytes its own (not linked-clone) volumes take on `storage`, as [`Guest::disks`] reads them,
    /// without allocating.
    pub fn bytes_on(&self, storage: &str) -> u64 {
        self.config
            .values
            .iter()
            // The volume id holds `storage:`, so other values are skipped before any parsing.
            .filter(|(k, v)| {
                v.contains(storage) && is_disk_key(self.kind, k) && !k.starts_with("unused")
            })
            .map(|(_, v)| DiskRef::parse(self.kind, v))
            .filter(|d| d.storage == Some(storage) && d.is_volume())
            .map(|d| if d.base.is_some() { 0 } else { d.size })
            .fold(0u64, u64::saturating_add)
    }

    /// Its own volumes' bytes by storage id, one item per volume, as [`Guest::bytes_on`] counts
    /// them (linked-clone volumes as 0): summed per storage they are `bytes_on` of every storage,
    /// read in one pass over the config.
    pub fn bytes_by_storage(&self) -> impl Iterator<Item = (&str, u64)> {
        self.config
            .values
            .iter()
            .filter(|(k, _)| is_disk_key(self.kind, k) && !k.starts_with("unused"))
            .map(|(_, v)| DiskRef::parse(self.kind, v))
            .filter(DiskRef::is_volume)
            .filter_map(|d| Some((d.storage?, if d.base.is_some() { 0 } else { d.size })))
    }

    /// Volumes that occupy storage, without allocating: (storage, size, is a linked clone).
    /// CD-ROMs (but not cloud-init drives) and unused volumes are left out.
    pub fn volumes(&self) -> impl Iterator<Item = (&str, u64, bool)> {
        self.config
            .values
            .iter()
            .filter(|(k, _)| is_disk_key(self.kind, k) && !k.starts_with("unused"))
            .filter(|(_, v)| !v.contains("media=cdrom") || v.contains("cloudinit"))
            .filter_map(|(_, v)| {
                let first = v.split(',').next()?;
                let (storage, volname) = first.split_once(':')?;
                Some((
                    storage,
                    disk_size(v),
                    volname.starts_with("base-") && volname.contains('/'),
                ))
            })
    }

    /// The normalised tags as stored (`a;b`), if any.
    pub fn tags(&self) -> Option<&str> {
        self.config.get("tags").filter(|t| !t.is_empty())
    }

    /// Uptime in whole seconds at `now` (0 when stopped).
    pub fn uptime(&self, now: f64) -> u64 {
        if self.running {
            (now - self.started_at).max(0.0) as u64
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest(values: &[(&str, &str)]) -> Guest {
        Guest {
            vmid: 100,
            kind: GuestKind::Qemu,
            node: "pve1".into(),
            running: true,
            config: Config {
                values: values
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..Config::default()
            },
            usage: GuestUsage::default(),
            started_at: 0.0,
            created_at: 0.0,
            pool: None,
        }
    }

    #[test]
    fn memory_cpus_and_disks_come_from_the_config() {
        let g = guest(&[
            ("memory", "current=4096"),
            ("sockets", "2"),
            ("cores", "4"),
            ("scsi0", "ceph:vm-100-disk-0,iothread=1,size=32G"),
            ("ide2", "ceph:vm-100-cloudinit,media=cdrom"),
            ("scsi1", "local-lvm:base-9000-disk-0/vm-100-disk-1,size=8G"),
        ]);
        assert_eq!(g.maxmem(), 4096 << 20);
        assert_eq!(g.maxcpu(64), 8.0);
        assert_eq!(g.maxcpu(4), 4.0);
        assert_eq!(g.maxdisk(), 32 << 30);
        let disks = g.disks();
        assert_eq!(disks.len(), 3);
        let ci = disks.iter().find(|d| d.key == "ide2").unwrap_or(&disks[0]);
        assert!(ci.cdrom && ci.cloudinit);
        let linked = disks.iter().find(|d| d.key == "scsi1").unwrap_or(&disks[0]);
        assert_eq!(linked.base.as_deref(), Some("base-9000-disk-0"));
        assert_eq!(linked.storage.as_deref(), Some("local-lvm"));
    }

    #[test]
    fn a_memory_setting_beyond_u64_bytes_saturates_instead_of_wrapping() {
        // `<< 20` dropped the high bits: 2^44 MiB read as 0 bytes.
        let g = guest(&[("name", "a"), ("memory", "17592186044416")]);
        assert_eq!(g.maxmem(), u64::MAX);
    }

    #[test]
    fn digest_changes_with_any_change_and_pending() {
        let mut g = guest(&[("name", "a"), ("memory", "1024")]);
        let d1 = g.config.digest();
        assert_eq!(d1.len(), 40);
        g.config.pending.insert("memory".into(), "2048".into());
        let d2 = g.config.digest();
        assert_ne!(d1, d2);
        assert_eq!(g.config.effective("memory"), Some("2048"));
        assert_eq!(g.config.get("memory"), Some("1024"));
        g.config.apply_pending();
        assert_eq!(g.config.get("memory"), Some("2048"));
        assert_ne!(g.config.digest(), d2);
    }
}
