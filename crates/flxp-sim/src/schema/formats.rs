//! Named string formats of the Proxmox schema dialect (`format: "pve-vmid"`), with the error
//! texts Proxmox's format verifiers die with. Formats not listed here are accepted unchecked.

pub use flxp_core::names::is_dns_label;
use flxp_core::names::is_dns_name;
pub use flxp_pve::types::parse_size;

use crate::tags;

/// A value that breaks a named format: the text Proxmox's verifier dies with (newline included).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FormatError(pub String);

impl From<FormatError> for String {
    fn from(e: FormatError) -> Self {
        e.0
    }
}

/// Checks `value` against the named format; `Ok(None)` when the format is unknown to us.
pub fn check_named(format: &str, value: &str) -> Result<Option<()>, FormatError> {
    let ok = |b: bool, msg: String| {
        if b {
            Ok(Some(()))
        } else {
            Err(FormatError(msg))
        }
    };
    match format {
        "string" => Ok(Some(())),
        "pve-vmid" => ok(
            is_vmid(value),
            "value does not look like a valid VM ID\n".into(),
        ),
        "pve-node" => ok(
            is_dns_label(value),
            "value does not look like a valid node name\n".into(),
        ),
        "pve-tag" => ok(
            tags::is_valid_tag(value),
            "invalid characters in tag\n".into(),
        ),
        "pve-configid" => ok(
            is_configid(value),
            format!("invalid configuration ID '{value}'\n"),
        ),
        "pve-storage-id" => ok(
            is_storage_id(value),
            format!("storage ID '{value}' contains illegal characters\n"),
        ),
        "pve-poolid" => ok(
            !value.is_empty()
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
            format!("invalid pool ID '{value}'\n"),
        ),
        "dns-name" => ok(
            is_dns_name(value),
            "value does not look like a valid DNS name\n".into(),
        ),
        "urlencoded" => ok(
            value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-%_.!~*'()".contains(c)),
            format!("invalid urlencoded string: {value}\n"),
        ),
        "mac-addr" => ok(
            is_unicast_mac(value),
            "value does not look like a valid unicast MAC address\n".into(),
        ),
        "pve-bridge-id" => ok(
            !value.is_empty()
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
            format!("invalid bridge ID '{value}'\n"),
        ),
        "disk-size" => ok(
            parse_size(value).is_some(),
            format!("value does not look like a valid disk size: {value}\n"),
        ),
        "pve-ha-resource-or-vm-id" | "pve-ha-resource-id" => ok(
            is_ha_sid(value),
            format!("unable to parse service id '{value}'\n"),
        ),
        _ => Ok(None),
    }
}

/// `^[1-9][0-9]{2,8}$`.
pub fn is_vmid(v: &str) -> bool {
    let b = v.as_bytes();
    (3..=9).contains(&b.len()) && b[0] != b'0' && b.iter().all(u8::is_ascii_digit)
}

/// `^[a-z][a-z0-9_-]+$` (case-insensitive).
fn is_configid(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() >= 2
        && b[0].is_ascii_alphabetic()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-')
}

/// `^[a-z][a-z0-9\-_.]*[a-z0-9]$` (case-insensitive).
pub fn is_storage_id(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() >= 2
        && b[0].is_ascii_alphabetic()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `^[a-f0-9][02468ace](?::[a-f0-9]{2}){5}$` (case-insensitive): no I/G bit.
fn is_unicast_mac(v: &str) -> bool {
    let parts: Vec<&str> = v.split(':').collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
        && u8::from_str_radix(parts[0], 16).is_ok_and(|b| b & 1 == 0)
}

/// `vm:100`, `ct:101`, or a bare VMID.
fn is_ha_sid(v: &str) -> bool {
    match v.split_once(':') {
        Some(("vm" | "ct", id)) => is_vmid(id),
        Some(_) => false,
        None => is_vmid(v),
    }
}

#[cfg(test)]
mod tests {
    use flxp_core::units::GIB;

    use super::*;

    #[test]
    fn whole_sizes_above_2_pow_53_are_exact() {
        let n = (1u64 << 53) + 1;
        assert_eq!(parse_size(&n.to_string()), Some(n));
        assert_eq!(parse_size("8388609G"), Some(8_388_609 * GIB));
        assert_eq!(parse_size("0.5K"), Some(512));
    }

    #[test]
    fn named_formats_give_proxmox_texts() {
        assert_eq!(check_named("pve-vmid", "100"), Ok(Some(())));
        assert_eq!(
            check_named("pve-vmid", "99"),
            Err(FormatError(
                "value does not look like a valid VM ID\n".into()
            ))
        );
        assert!(check_named("pve-node", "pve-1").is_ok());
        assert!(check_named("pve-node", "-pve").is_err());
        assert_eq!(
            check_named("pve-tag", "a/b"),
            Err(FormatError("invalid characters in tag\n".into()))
        );
        assert!(check_named("mac-addr", "BC:24:11:00:00:01").is_ok());
        assert!(check_named("mac-addr", "01:24:11:00:00:01").is_err());
        assert_eq!(check_named("something-else", "x"), Ok(None));
        assert_eq!(parse_size("32G"), Some(32 << 30));
        assert_eq!(parse_size("1.5K"), Some(1536));
        assert_eq!(parse_size("G"), None);
        assert!(is_ha_sid("vm:100") && is_ha_sid("100") && !is_ha_sid("qm:100"));
    }
}
