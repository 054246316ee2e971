//! Memory and disk sizes as users type them: `4096M`, `4G`, `4GiB`, `4 GiB`, `1.5T`, plain bytes.
//!
//! Units are binary, as Proxmox's are: `G`, `GB` and `GiB` all mean 2^30 bytes.

use std::sync::LazyLock;

use parse_size::Config;

static PARSER: LazyLock<Config> = LazyLock::new(|| Config::new().with_binary());

/// A size that cannot be read; the message names the text and the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Not a size at all.
    #[error("invalid size {text:?} ({reason}); use e.g. 4GiB, 4G, 4096M or a byte count")]
    Invalid {
        /// The text given.
        text: String,
        /// What the size parser said.
        reason: String,
    },
    /// Zero bytes, which sizes nothing.
    #[error("invalid size {text:?}: must be more than 0 bytes")]
    Zero {
        /// The text given.
        text: String,
    },
}

/// Parses a size into bytes; the error names the text and the accepted forms.
pub fn parse(text: &str) -> Result<u64, SizeError> {
    if text.trim_start().starts_with('-') {
        return Err(SizeError::Invalid {
            text: text.to_owned(),
            reason: "a size cannot be negative".into(),
        });
    }
    let bytes = PARSER
        .parse_size(text.trim())
        .map_err(|e| SizeError::Invalid {
            text: text.to_owned(),
            reason: e.to_string(),
        })?;
    if bytes == 0 {
        return Err(SizeError::Zero {
            text: text.to_owned(),
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn accepts_every_documented_form() {
        let gib = flxp_core::units::GIB;
        for (text, want) in [
            ("4GiB", 4 * gib),
            ("4G", 4 * gib),
            ("4GB", 4 * gib),
            ("4 GiB", 4 * gib),
            ("4096M", 4 * gib),
            ("4096MiB", 4 * gib),
            ("4294967296", 4 * gib),
            ("1.5G", 3 * gib / 2),
            ("2T", 2048 * gib),
        ] {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn rejects_garbage_and_zero() {
        for text in ["", "four", "4X", "-4G", "0", "0G"] {
            assert!(parse(text).is_err(), "{text}");
        }
        assert!(parse("4X").unwrap_err().to_string().contains("4GiB"));
        assert_eq!(
            parse("-5G").unwrap_err().to_string(),
            "invalid size \"-5G\" (a size cannot be negative); use e.g. 4GiB, 4G, 4096M or a byte count"
        );
    }
}
