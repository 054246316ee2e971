//! Proxmox's units: the binary byte multiples, and rendering bytes and CPU for people.

/// Bytes in a KiB.
pub const KIB: u64 = 1 << 10;
/// Bytes in a MiB.
pub const MIB: u64 = 1 << 20;
/// Bytes in a GiB (Proxmox's memory and disk sizes are multiples of these).
pub const GIB: u64 = 1 << 30;
/// Bytes in a TiB.
pub const TIB: u64 = 1 << 40;

/// Bytes in binary units with one decimal (`4.0 GiB`, `512.0 MiB`, `0 B`).
pub fn fmt_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// Signed bytes in binary units (`-2.0 GiB`).
pub fn fmt_signed_bytes(bytes: i128) -> String {
    let abs = u64::try_from(bytes.unsigned_abs()).unwrap_or(u64::MAX);
    if bytes < 0 {
        format!("-{}", fmt_bytes(abs))
    } else {
        fmt_bytes(abs)
    }
}

/// CPU cores with up to two decimals (`3.25`, `16`).
pub fn fmt_cores(cores: f64) -> String {
    let s = format!("{cores:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_render_in_binary_units() {
        assert_eq!(fmt_bytes(0), "0 B");
        assert_eq!(fmt_bytes(1023), "1023 B");
        assert_eq!(fmt_bytes(4 << 30), "4.0 GiB");
        assert_eq!(fmt_bytes(1536 << 20), "1.5 GiB");
        assert_eq!(fmt_signed_bytes(-(2i128 << 30)), "-2.0 GiB");
        assert_eq!(fmt_cores(16.0), "16");
        assert_eq!(fmt_cores(3.25), "3.25");
        assert_eq!(fmt_cores(0.0), "0");
    }
}
