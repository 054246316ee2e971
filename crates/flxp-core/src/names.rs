//! Name formats Proxmox enforces, shared by the snapshot reader and the simulator.
//!
//! Proxmox's JSON schema (`PVE::JSONSchema`, formats `pve-node` and `dns-name`) refuses node names
//! and guest names outside these shapes, so a snapshot carrying one was not written by Proxmox.

/// Longest DNS label (RFC 1035): a node name is a host name.
const MAX_LABEL: usize = 63;

/// `[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?`: one DNS label, the shape of a node name.
pub fn is_dns_label(v: &str) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_LABEL
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
}

/// DNS labels joined by dots (Proxmox's `dns-name` format): the shape of a guest name.
pub fn is_dns_name(v: &str) -> bool {
    !v.is_empty() && v.split('.').all(is_dns_label)
}

/// `v` quoted for a message, cut after `max` characters with its length said: a warning about a
/// megabyte-long name need not repeat it.
pub fn quoted_excerpt(v: &str, max: usize) -> String {
    match v.char_indices().nth(max) {
        None => format!("{v:?}"),
        Some((end, _)) => format!("{:?}… ({} bytes)", &v[..end], v.len()),
    }
}

/// The first `max` bytes of `v`, cut back to a character boundary; `None` when `v` is not
/// longer: for messages and records that must not repeat a megabyte of input.
pub fn cut_at(v: &str, max: usize) -> Option<&str> {
    if v.len() <= max {
        return None;
    }
    let mut end = max;
    while !v.is_char_boundary(end) {
        end -= 1;
    }
    Some(&v[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_falls_on_a_character_boundary() {
        assert_eq!(cut_at("web-1", 5), None);
        assert_eq!(cut_at("web-1", 3), Some("web"));
        // "é" is two bytes: a cut in its middle goes back before it.
        assert_eq!(cut_at("aé", 2), Some("a"));
    }

    #[test]
    fn an_excerpt_is_cut_at_a_character_and_says_the_length() {
        assert_eq!(quoted_excerpt("web-1", 8), r#""web-1""#);
        assert_eq!(quoted_excerpt("ééééé", 2), r#""éé"… (10 bytes)"#);
    }

    #[test]
    fn labels_and_names_follow_proxmox() {
        let long = "a".repeat(63);
        for ok in ["pve1", "a", "PVE-1", "1", long.as_str()] {
            assert!(is_dns_label(ok), "{ok}");
        }
        let too_long = "a".repeat(64);
        for bad in [
            "",
            "-a",
            "a-",
            "a.b",
            "a_b",
            "p\u{1b}[31m",
            "a\nb",
            "\u{fc}",
            too_long.as_str(),
        ] {
            assert!(!is_dns_label(bad), "{bad:?}");
        }
        assert!(is_dns_name("web1.example.com"));
        for bad in ["", "web.", ".web", "web..1", "web 1", "web_1"] {
            assert!(!is_dns_name(bad), "{bad:?}");
        }
    }
}
