//! A string that must never reach a log or an error message: token secrets, passwords, tickets,
//! CSRF tokens.
//!
//! `Debug` and `Display` print `[redacted]`; only [`Secret::expose`] gives the value, at the one
//! place that puts it on the wire. Serde is transparent because the wire needs the value (a ticket
//! request's password, a ticket response); never serialize a type holding one into a log.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A secret string with a redacting `Debug` and `Display`.
#[derive(Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Secret(String);

// By hand: serde's own error for a non-string (`invalid type: integer `12345678`, expected a
// string`) would print a numeric password given unquoted in a config file.
impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // `any`: `deserialize_string` lets a format (serde_json) name the value itself.
        d.deserialize_any(SecretVisitor)
    }
}

struct SecretVisitor;

impl SecretVisitor {
    fn not_text<E: serde::de::Error>(what: &str) -> E {
        E::custom(format!(
            "expected a string, got {what} (the value is a secret and not shown; quote it)"
        ))
    }
}

impl serde::de::Visitor<'_> for SecretVisitor {
    type Value = Secret;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Secret, E> {
        Ok(Secret(v.to_owned()))
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Secret, E> {
        Ok(Secret(v))
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Secret, E> {
        Err(Self::not_text("a boolean"))
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Secret, E> {
        Err(Self::not_text("an integer"))
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Secret, E> {
        Err(Self::not_text("an integer"))
    }
    fn visit_i128<E: serde::de::Error>(self, _: i128) -> Result<Secret, E> {
        Err(Self::not_text("an integer"))
    }
    fn visit_u128<E: serde::de::Error>(self, _: u128) -> Result<Secret, E> {
        Err(Self::not_text("an integer"))
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Secret, E> {
        Err(Self::not_text("a number"))
    }
    fn visit_char<E: serde::de::Error>(self, v: char) -> Result<Secret, E> {
        Ok(Secret(v.to_string()))
    }
    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Secret, E> {
        String::from_utf8(v.to_vec())
            .map(Secret)
            .map_err(|_| Self::not_text("bytes that are not UTF-8"))
    }
}

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
    fn a_non_string_secret_is_an_error_that_does_not_show_it() {
        #[derive(serde::Deserialize, Debug)]
        struct C {
            #[allow(dead_code)] // read only to trigger the error
            password: Secret,
        }
        let e = serde_json::from_str::<C>(r#"{"password": 12345678}"#)
            .map(|_| ())
            .map_err(|e| e.to_string());
        let e = e.err().unwrap_or_default();
        assert!(!e.contains("12345678"), "{e}");
        assert!(e.contains("expected a string, got an integer"), "{e}");
        let e = serde_json::from_str::<C>(r#"{"password": 1.5}"#)
            .map(|_| ())
            .map_err(|e| e.to_string())
            .err()
            .unwrap_or_default();
        assert!(!e.contains("1.5"), "{e}");
    }

    #[test]
    fn serde_is_transparent_for_the_wire() {
        let s: Secret = serde_json::from_str(r#""pw""#).unwrap_or_default();
        assert_eq!(s.expose(), "pw");
        assert_eq!(serde_json::to_string(&s).ok().as_deref(), Some(r#""pw""#));
    }
}
