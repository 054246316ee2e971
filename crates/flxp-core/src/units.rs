//! Proxmox's units: the binary byte multiples, and rendering bytes and CPU for people.

/// Bytes in a KiB.
pub const KIB: u64 = 1 << 10;
/// Bytes in a MiB.
pub const MIB: u64 = 1 << 20;
/// Bytes in a GiB (Proxmox's memory and disk sizes are multiples of these).
pub const GIB: u64 = 1 << 30;
/// Bytes in a TiB.
pub const TIB: u64 = 1 << 40;

/// A figure with one decimal, a tie rounded away from zero as the JSON figures are: `{:.1}` alone
/// would show 6.25 as 6.2 in a message and the JSON's rounded 6.3 elsewhere.
pub fn one_decimal(x: f64) -> String {
    format!("{:.1}", (x * 10.0).round() / 10.0)
}

/// Bytes in binary units with one decimal (`4.0 GiB`, `512.0 MiB`, `0 B`).
pub fn fmt_bytes(bytes: u64) -> String {
    bytes_with(bytes, 1)
}

fn bytes_with(bytes: u64, decimals: usize) -> String {
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
    format!("{v:.decimals$} {}", UNITS[unit])
}

/// Two byte counts a message compares (`needs … but … is available`): as [`fmt_bytes`], with as
/// many more decimals as it takes for different counts to read differently, else exact bytes.
pub fn fmt_bytes_apart(a: u64, b: u64) -> (String, String) {
    for decimals in 1..=3 {
        let pair = (bytes_with(a, decimals), bytes_with(b, decimals));
        if a == b || pair.0 != pair.1 {
            return pair;
        }
    }
    (format!("{a} B"), format!("{b} B"))
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

/// A duration for people: `45 s`, `12 min`, `2 h`, `1.5 h`.
pub fn fmt_secs(secs: i64) -> String {
    if secs < 120 {
        format!("{secs} s")
    } else if secs < 3_600 {
        format!("{} min", secs / 60)
    } else if secs % 3_600 == 0 {
        format!("{} h", secs / 3_600)
    } else {
        format!("{:.1} h", secs as f64 / 3_600.0)
    }
}

/// CPU cores with up to two decimals (`3.25`, `16`).
pub fn fmt_cores(cores: f64) -> String {
    cores_with(cores, 2)
}

fn cores_with(cores: f64, decimals: usize) -> String {
    let s = format!("{cores:.decimals$}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Two CPU figures a message compares: as [`fmt_cores`], with as many more decimals as it takes
/// for different figures to read differently.
pub fn fmt_cores_apart(a: f64, b: f64) -> (String, String) {
    for decimals in 2..=6 {
        let pair = (cores_with(a, decimals), cores_with(b, decimals));
        if a == b || pair.0 != pair.1 {
            return pair;
        }
    }
    (a.to_string(), b.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_the_unit_that_fits() {
        let cases = [
            (0, "0 s"),
            (119, "119 s"),
            (120, "2 min"),
            (3_599, "59 min"),
            (3_600, "1 h"),
            (5_400, "1.5 h"),
            (21_600, "6 h"),
        ];
        for (secs, shown) in cases {
            assert_eq!(fmt_secs(secs), shown, "{secs}");
        }
    }

    #[test]
    fn percentages_round_a_tie_away_from_zero_in_every_table_and_message() {
        let cases = [
            (6.25, "6.3"),
            (6.3, "6.3"),
            (6.24, "6.2"),
            (0.0, "0.0"),
            (100.0, "100.0"),
        ];
        for (x, shown) in cases {
            assert_eq!(one_decimal(x), shown, "{x}");
        }
    }

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

    #[test]
    fn compared_figures_that_differ_never_read_the_same() {
        let mib = |m: u64| m * MIB;
        assert_eq!(
            fmt_bytes_apart(4 * GIB, 2 * GIB),
            ("4.0 GiB".into(), "2.0 GiB".into())
        );
        assert_eq!(
            fmt_bytes_apart(mib(2458), mib(2457)),
            ("2.400 GiB".into(), "2.399 GiB".into())
        );
        assert_eq!(
            fmt_bytes_apart(6 * GIB + 1, 6 * GIB),
            ("6442450945 B".into(), "6442450944 B".into())
        );
        assert_eq!(
            fmt_bytes_apart(GIB, GIB),
            ("1.0 GiB".into(), "1.0 GiB".into())
        );
        assert_eq!(fmt_cores_apart(4.001, 4.0), ("4.001".into(), "4".into()));
        assert_eq!(fmt_cores_apart(8.0, 6.0), ("8".into(), "6".into()));
    }
}
