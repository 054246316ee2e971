//! Form encoding of request parameters, as Proxmox's HTTP server decodes them.
//!
//! Proxmox splits form pairs on both `&` and `;` and keys from values on `=`, so every value must be
//! percent-encoded (`serde_urlencoded` does). Booleans go as `1`/`0` (the param types write
//! them with `flxp_core::lenient::opt`); `true` as text is rejected by Proxmox with a 400. Cloud-init
//! `sshkeys` need a second, stricter encoding first: [`encode_sshkeys`].

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A parameter set that could not be form-encoded or decoded.
#[derive(Debug, thiserror::Error)]
#[error("form encoding: {0}")]
pub struct FormError(String);

/// Encodes parameters as an `application/x-www-form-urlencoded` body or query string.
pub fn to_form<T: Serialize + ?Sized>(params: &T) -> Result<String, FormError> {
    serde_urlencoded::to_string(params).map_err(|e| FormError(e.to_string()))
}

/// Decodes a form body or query string into parameters (values are strings: the param types read
/// numbers and booleans leniently).
pub fn from_form<T: DeserializeOwned>(body: &str) -> Result<T, FormError> {
    serde_urlencoded::from_str(body).map_err(|e| FormError(e.to_string()))
}

/// Percent-encodes OpenSSH public keys (one per line) for the `sshkeys` config key.
///
/// Proxmox checks the value against `^[-%a-zA-Z0-9_.!~*'()]*$`, so everything else is encoded,
/// space as `%20` (never `+`). The transport's form encoding then encodes the `%` signs once more.
pub fn encode_sshkeys(keys: &str) -> String {
    utf8_percent_encode(keys, SSHKEYS_ENCODED).to_string()
}

/// What `encode_sshkeys` encodes: all but ASCII letters, digits and `-_.!~*'()`.
const SSHKEYS_ENCODED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

/// Decodes an `sshkeys` value back to the keys; `None` if it is not valid percent-encoding of UTF-8.
pub fn decode_sshkeys(value: &str) -> Option<String> {
    // `percent_decode_str` passes a broken escape through as text; Proxmox would not decode it.
    let escapes_whole = value.split('%').skip(1).all(|rest| {
        rest.get(..2)
            .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
    });
    if !escapes_whole {
        return None;
    }
    percent_decode_str(value)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn sshkeys_are_encoded_with_percent_twenty_and_never_plus() {
        let keys = "ssh-ed25519 AAAAC3Nz+a/b= admin@host\nssh-rsa AAAAB3 x@y";
        let once = encode_sshkeys(keys);
        assert_eq!(
            once,
            "ssh-ed25519%20AAAAC3Nz%2Ba%2Fb%3D%20admin%40host%0Assh-rsa%20AAAAB3%20x%40y"
        );
        assert_eq!(decode_sshkeys(&once).as_deref(), Some(keys));
        // The transport encodes the value a second time: `%` becomes `%25`.
        let body = to_form(&[("sshkeys", once.as_str())]).unwrap();
        assert_eq!(
            body,
            "sshkeys=ssh-ed25519%2520AAAAC3Nz%252Ba%252Fb%253D%2520admin%2540host%250Assh-rsa%2520AAAAB3%2520x%2540y"
        );
    }

    #[test]
    fn broken_percent_encoding_is_refused() {
        assert_eq!(decode_sshkeys("abc%2"), None);
        assert_eq!(decode_sshkeys("abc%zz"), None);
    }

    #[test]
    fn semicolons_and_equals_in_values_are_percent_encoded() {
        let body = to_form(&[("tags", "a;b"), ("net0", "virtio,bridge=vmbr0")]).unwrap();
        assert_eq!(body, "tags=a%3Bb&net0=virtio%2Cbridge%3Dvmbr0");
    }
}
