//! A string that must never reach a log or an error message: token secrets, passwords, tickets,
//! CSRF tokens.
//!
//! `Debug` and `Display` print `[redacted]`; only [`Secret::expose`] gives the value, at the one
//! place that puts it on the wire. Serde is transparent because the wire needs the value (a ticket
//! request's password, a ticket response); never serialize a type holding one into a log.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A secret string with a redacting `Debug` and `Display`.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret value itself, for the wire only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the secret is the empty string.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::Secret;

    #[test]
    fn debug_and_display_never_show_the_value() {
        let s = Secret::new("5f2c6a3e-aaaa-bbbb-cccc-0123456789ab");
        assert_eq!(format!("{s:?}"), "[redacted]");
        assert_eq!(format!("{s}"), "[redacted]");
        assert_eq!(s.expose(), "5f2c6a3e-aaaa-bbbb-cccc-0123456789ab");
    }

    #[test]
    fn serde_is_transparent_for_the_wire() {
        let s: Secret = serde_json::from_str(r#""pw""#).unwrap_or_default();
        assert_eq!(s.expose(), "pw");
        assert_eq!(serde_json::to_string(&s).ok().as_deref(), Some(r#""pw""#));
    }
}
