//! Reading files and standard input with a size limit: a snapshot named `/dev/zero` or a runaway
//! pipe must end in a clear error, not in a process that reads until memory runs out.

use std::io::Read;

use anyhow::{Context, Result, bail};

/// Most bytes read from a snapshot: a 240,000-guest `/cluster/resources` dump is about 120 MiB.
pub const MAX_SNAPSHOT_BYTES: u64 = 1 << 30;

/// Reads all of `reader` as UTF-8 text, or fails naming `what` when it holds more than `limit`
/// bytes.
pub fn read_limited(reader: impl Read, limit: u64, what: &str) -> Result<String> {
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {what}"))?;
    if bytes.len() as u64 > limit {
        bail!(
            "{what} is larger than {} MiB, the most flxp reads",
            limit >> 20
        );
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{what} is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_past_the_limit_is_refused_with_its_name() {
        let err = read_limited(std::io::repeat(0).take(3 << 20), 2 << 20, "snapshot file z")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "snapshot file z is larger than 2 MiB, the most flxp reads"
        );
    }

    #[test]
    fn input_within_the_limit_is_read_whole() {
        assert_eq!(read_limited(&b"[]"[..], 2, "x").unwrap(), "[]");
        let err = read_limited(&b"\xff["[..], 10, "stdin")
            .unwrap_err()
            .to_string();
        assert_eq!(err, "stdin is not UTF-8 text (invalid byte at offset 0)");
    }
}
