//! QEMU disks: `PUT /nodes/{node}/qemu/{vmid}/resize` with the size syntax it takes, and which
//! drive a VM boots from (the disk `maxdisk` reports, and the one a storage profile sizes).
//!
//! Proxmox's `size` is `\+?\d+(\.\d+)?[KMGT]?`: binary units (K = 1024), no unit meaning bytes, a
//! leading `+` meaning "grow by" rather than "grow to", fractions cut to whole bytes. Disks only
//! grow: a smaller absolute size fails with "shrinking disks is not supported". The same size
//! text appears in a disk's `size=` option, written by [`format_size`].

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

use flxp_core::lenient;
use flxp_core::units::{GIB, KIB, MIB, TIB};

use super::quirks::string_required;

/// The units Proxmox's size syntax knows, largest first, with their byte factors.
const UNITS: [(char, u64); 4] = [('T', TIB), ('G', GIB), ('M', MIB), ('K', KIB)];

/// The new size of a disk, as `size` of a resize call says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SizeSpec {
    /// Grow the disk to this many bytes (`64G`).
    Absolute(u64),
    /// Grow the disk by this many bytes (`+32G`).
    Grow(u64),
}

impl SizeSpec {
    /// The size in bytes the disk gets when it has `current` bytes now; `None` on overflow.
    pub fn target(self, current: u64) -> Option<u64> {
        match self {
            Self::Absolute(bytes) => Some(bytes),
            Self::Grow(bytes) => current.checked_add(bytes),
        }
    }
}

impl fmt::Display for SizeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Absolute(bytes) => f.write_str(&format_size(*bytes)),
            Self::Grow(bytes) => write!(f, "+{}", format_size(*bytes)),
        }
    }
}

/// A fixed size (`32G`, `1.5T`, `1024`) in bytes, as a drive's `size=` holds it, in
/// [`SizeSpec`]'s grammar; `None` for a relative size (`+32G`) or a text that is not a size.
pub fn parse_size(text: &str) -> Option<u64> {
    match text.parse::<SizeSpec>().ok()? {
        SizeSpec::Absolute(bytes) => Some(bytes),
        SizeSpec::Grow(_) => None,
    }
}

/// A size text that is not in Proxmox's `\+?\d+(\.\d+)?[KMGT]?` syntax.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("size {text:?}: {reason}")]
pub struct SizeError {
    /// The offending text.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

impl FromStr for SizeSpec {
    type Err = SizeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let fail = |reason: &str| SizeError {
            text: text.to_owned(),
            reason: reason.to_owned(),
        };
        let (grow, rest) = match text.strip_prefix('+') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (number, factor) = match rest.chars().last() {
            Some(unit) if unit.is_ascii_alphabetic() => {
                let factor = UNITS
                    .iter()
                    .find(|(u, _)| *u == unit)
                    .map(|(_, f)| *f)
                    .ok_or_else(|| fail("the unit must be one of K, M, G, T (binary)"))?;
                (&rest[..rest.len() - 1], factor)
            }
            _ => (rest, 1),
        };
        let (whole, fraction) = match number.split_once('.') {
            Some((w, f)) => (w, Some(f)),
            None => (number, None),
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(whole) || fraction.is_some_and(|f| !digits(f)) {
            return Err(fail(
                "expected digits, an optional fraction and unit, like 64G, 1.5T or +32G",
            ));
        }
        let too_large = || fail("larger than 2^64 bytes");
        let whole: u128 = whole.parse().map_err(|_| too_large())?;
        let mut bytes = whole
            .checked_mul(u128::from(factor))
            .ok_or_else(too_large)?;
        if let Some(fraction) = fraction {
            // Proxmox multiplies and then cuts to whole bytes; 12 digits are finer than any unit.
            let fraction = &fraction[..fraction.len().min(12)];
            let scale = 10u128.pow(fraction.len() as u32);
            let numerator: u128 = fraction.parse().map_err(|_| too_large())?;
            bytes += numerator * u128::from(factor) / scale;
        }
        let bytes = u64::try_from(bytes).map_err(|_| too_large())?;
        Ok(if grow {
            Self::Grow(bytes)
        } else {
            Self::Absolute(bytes)
        })
    }
}

impl Serialize for SizeSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SizeSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        string_required(d)?.parse().map_err(de::Error::custom)
    }
}

/// A byte count in Proxmox's size syntax: the largest unit that divides it exactly (`64G`,
/// `1536M`, `1T`), plain bytes when none does, as Proxmox writes a disk's `size=`.
pub fn format_size(bytes: u64) -> String {
    if bytes == 0 {
        return "0".into();
    }
    UNITS
        .iter()
        .find(|(_, factor)| bytes % factor == 0)
        .map(|(unit, factor)| format!("{}{unit}", bytes / factor))
        .unwrap_or_else(|| bytes.to_string())
}

/// The drive buses with their number of slots, in the order Proxmox picks a first disk from
/// (qemu-server `valid_drive_names`: "order is important").
const BUSES: [(&str, u32); 4] = [("ide", 4), ("scsi", 31), ("virtio", 16), ("sata", 6)];

/// Every bus drive key in Proxmox's order (`ide0` .. `sata5`), built once.
fn bus_drive_keys() -> &'static [String] {
    static KEYS: OnceLock<Vec<String>> = OnceLock::new();
    KEYS.get_or_init(|| {
        BUSES
            .iter()
            .flat_map(|(bus, slots)| (0..*slots).map(move |i| format!("{bus}{i}")))
            .collect()
    })
}

/// Whether `key` names a QEMU drive: `ide0`-`ide3`, `scsi0`-`scsi30`, `virtio0`-`virtio15`,
/// `sata0`-`sata5`, `efidisk0` or `tpmstate0` (the keys a resize's `disk` may name).
pub fn is_drive_key(key: &str) -> bool {
    if matches!(key, "efidisk0" | "tpmstate0") {
        return true;
    }
    let digits = key.trim_start_matches(|c: char| c.is_ascii_lowercase());
    let bus = &key[..key.len() - digits.len()];
    // `scsi01` is no drive key: Proxmox's names have no leading zeros.
    let index = (!digits.starts_with('0') || digits == "0")
        .then(|| digits.parse::<u32>().ok())
        .flatten();
    match (BUSES.iter().find(|(b, _)| *b == bus), index) {
        (Some((_, slots)), Some(i)) => i < *slots,
        _ => false,
    }
}

/// Whether a drive value is a CD-ROM drive (`media=cdrom`, the cloud-init drive included, or
/// the bare `cdrom` volume): no disk to boot from or to resize.
pub fn is_cdrom_drive(value: &str) -> bool {
    let mut parts = value.split(',');
    let volume = parts.next().unwrap_or_default();
    volume == "cdrom" || volume == "file=cdrom" || parts.any(|p| p == "media=cdrom")
}

/// The config key of the disk a VM boots from, as Proxmox picks it for `maxdisk`: the first
/// configured non-CD-ROM drive of `boot: order=...`; with a legacy `boot` (`cdn`) the `bootdisk`
/// key. With neither `boot` nor `bootdisk` (configs older than PVE 6.3, VMs created without
/// them), the first non-CD-ROM drive in bus order, which is what Proxmox puts first in the boot
/// order it writes at creation. `get` reads a config value.
pub fn boot_disk_key<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Option<&'a str> {
    let is_disk = |key: &str| is_drive_key(key) && get(key).is_some_and(|v| !is_cdrom_drive(v));
    match (get("boot"), get("bootdisk")) {
        (None, None) => bus_drive_keys()
            .iter()
            .map(String::as_str)
            .find(|k| is_disk(k)),
        (Some(boot), bootdisk) => {
            let mut order = None;
            let mut legacy = false;
            for part in boot.split(',') {
                match part.split_once('=') {
                    Some(("order", list)) => order = Some(list),
                    Some(("legacy", _)) | None if !part.is_empty() => legacy = true,
                    _ => {}
                }
            }
            match order.filter(|_| !legacy) {
                Some(list) => list.split(';').map(str::trim).find(|k| is_disk(k)),
                None => bootdisk.filter(|k| is_disk(k)),
            }
        }
        (None, Some(bootdisk)) => Some(bootdisk).filter(|k| is_disk(k)),
    }
}

/// Body of `PUT /nodes/{node}/qemu/{vmid}/resize`.
#[serde_with::apply(Option => #[serde(default, with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResizeParams {
    /// The disk's config key (`scsi0`, `virtio0`, `sata1`, `ide0`, `efidisk0`, `tpmstate0`).
    #[serde(deserialize_with = "string_required")]
    pub disk: String,
    /// The new size (absolute, or `+` relative); it may not be smaller than the disk.
    pub size: SizeSpec,
    /// Refuse unless the config still has this digest ("checksum mismatch").
    pub digest: Option<String>,
    /// Ignore the config lock (root@pam only).
    pub skiplock: Option<bool>,
}

impl ResizeParams {
    /// Grows `disk` to `bytes` (an absolute size, so repeating the call changes nothing).
    pub fn to_size(disk: impl Into<String>, bytes: u64) -> Self {
        Self {
            disk: disk.into(),
            size: SizeSpec::Absolute(bytes),
            digest: None,
            skiplock: None,
        }
    }

    /// Makes the resize conditional on the config still having this digest.
    pub fn with_digest(mut self, digest: impl Into<String>) -> Self {
        self.digest = Some(digest.into());
        self
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::types::form::{from_form, to_form};

    #[test]
    fn sizes_parse_as_proxmox_reads_them() {
        let cases: [(&str, SizeSpec); 9] = [
            ("64G", SizeSpec::Absolute(64 * GIB)),
            ("+32G", SizeSpec::Grow(32 * GIB)),
            ("1.5T", SizeSpec::Absolute(1536 * GIB)),
            ("512M", SizeSpec::Absolute(512 << 20)),
            ("4096K", SizeSpec::Absolute(4 << 20)),
            ("1000", SizeSpec::Absolute(1000)),
            ("+0", SizeSpec::Grow(0)),
            // 0.3 * 1024 = 307.2 bytes: cut to whole bytes, as Perl's int() does.
            ("0.3K", SizeSpec::Absolute(307)),
            ("0.5", SizeSpec::Absolute(0)),
        ];
        for (text, want) in cases {
            assert_eq!(text.parse::<SizeSpec>(), Ok(want), "{text}");
        }
    }

    #[test]
    fn sizes_outside_the_syntax_are_refused_with_the_reason() {
        for (text, reason) in [
            ("64g", "unit must be one of K, M, G, T"),
            ("64GB", "unit must be one of K, M, G, T"),
            ("64P", "unit must be one of K, M, G, T"),
            ("-1G", "expected digits"),
            ("", "expected digits"),
            ("+", "expected digits"),
            ("1.G", "expected digits"),
            (".5G", "expected digits"),
            ("1e3", "expected digits"),
            ("99999999999T", "larger than 2^64 bytes"),
        ] {
            let e = text.parse::<SizeSpec>().unwrap_err();
            assert!(e.reason.contains(reason), "{text}: {e}");
            assert_eq!(e.text, text);
        }
    }

    #[test]
    fn sizes_print_in_the_largest_exact_unit() {
        assert_eq!(format_size(64 * GIB), "64G");
        assert_eq!(format_size(1 << 40), "1T");
        assert_eq!(format_size(1536 * GIB), "1536G");
        assert_eq!(format_size(GIB + (512 << 20)), "1536M");
        assert_eq!(format_size(1 << 10), "1K");
        assert_eq!(format_size(1000), "1000");
        assert_eq!(format_size(0), "0");
        assert_eq!(SizeSpec::Grow(32 * GIB).to_string(), "+32G");
        for bytes in [1, 1023, 1024, 3 << 29, 5 << 40, u64::MAX] {
            let s = SizeSpec::Absolute(bytes);
            assert_eq!(s.to_string().parse::<SizeSpec>(), Ok(s), "{bytes}");
        }
    }

    #[test]
    fn targets_add_up_without_overflow() {
        assert_eq!(
            SizeSpec::Absolute(64 * GIB).target(32 * GIB),
            Some(64 * GIB)
        );
        assert_eq!(SizeSpec::Grow(32 * GIB).target(32 * GIB), Some(64 * GIB));
        assert_eq!(SizeSpec::Grow(u64::MAX).target(1), None);
    }

    fn boot(pairs: &[(&'static str, &'static str)]) -> Option<&'static str> {
        let map: std::collections::BTreeMap<&str, &str> = pairs.iter().copied().collect();
        boot_disk_key(|k| map.get(k).copied())
    }

    #[test]
    fn drive_keys_are_proxmox_drive_names() {
        for key in [
            "ide0",
            "ide3",
            "scsi0",
            "scsi30",
            "virtio15",
            "sata5",
            "efidisk0",
            "tpmstate0",
        ] {
            assert!(is_drive_key(key), "{key}");
        }
        for key in [
            "ide4", "scsi31", "virtio16", "sata6", "unused0", "net0", "scsi", "scsi01", "efidisk1",
            "rootfs",
        ] {
            assert!(!is_drive_key(key), "{key}");
        }
        assert!(is_cdrom_drive("ceph:vm-9000-cloudinit,media=cdrom"));
        assert!(is_cdrom_drive("none,media=cdrom"));
        assert!(is_cdrom_drive("cdrom"));
        assert!(!is_cdrom_drive("ceph:vm-1-disk-0,size=32G"));
    }

    #[test]
    fn the_boot_disk_is_the_first_disk_of_the_boot_order() {
        let disks = [
            ("ide2", "ceph:vm-1-cloudinit,media=cdrom"),
            ("scsi0", "ceph:vm-1-disk-0,size=32G"),
            ("virtio0", "ceph:vm-1-disk-1,size=8G"),
        ];
        let with = |order: &'static str| {
            let mut pairs = disks.to_vec();
            pairs.push(("boot", order));
            boot(&pairs)
        };
        assert_eq!(with("order=scsi0;ide2;net0"), Some("scsi0"));
        // CD-ROMs and unconfigured drives in the order are skipped.
        assert_eq!(with("order=ide2;scsi1;virtio0;scsi0"), Some("virtio0"));
        assert_eq!(with("order=net0"), None);
        assert_eq!(with("order="), None);
        // Legacy boot strings defer to `bootdisk`.
        assert_eq!(with("cdn"), None);
        let mut legacy = disks.to_vec();
        legacy.extend([("boot", "cdn"), ("bootdisk", "virtio0")]);
        assert_eq!(boot(&legacy), Some("virtio0"));
        let mut old = disks.to_vec();
        old.push(("bootdisk", "scsi0"));
        assert_eq!(boot(&old), Some("scsi0"));
        // Neither key: the first disk in Proxmox's bus order (ide, scsi, virtio, sata).
        assert_eq!(boot(&disks), Some("scsi0"));
        assert_eq!(
            boot(&[
                ("sata0", "local:vm-1-disk-2,size=1G"),
                ("virtio3", "local:vm-1-disk-3,size=2G")
            ]),
            Some("virtio3")
        );
        assert_eq!(boot(&[("ide2", "none,media=cdrom")]), None);
    }

    #[test]
    fn resize_params_are_form_encoded_with_the_plus_escaped() {
        let p = ResizeParams::to_size("scsi0", 64 * GIB);
        assert_eq!(to_form(&p).unwrap(), "disk=scsi0&size=64G");
        let p = ResizeParams {
            disk: "virtio0".into(),
            size: SizeSpec::Grow(32 * GIB),
            digest: None,
            skiplock: Some(true),
        }
        .with_digest("0123456789abcdef0123456789abcdef01234567");
        let body = to_form(&p).unwrap();
        // A raw `+` would arrive as a space: it must travel as %2B.
        assert_eq!(
            body,
            "disk=virtio0&size=%2B32G&digest=0123456789abcdef0123456789abcdef01234567&skiplock=1"
        );
        let back: ResizeParams = from_form(&body).unwrap();
        assert_eq!(back, p);
        let e = from_form::<ResizeParams>("disk=scsi0&size=lots").unwrap_err();
        assert!(e.to_string().contains("size \"lots\""), "{e}");
    }
}
