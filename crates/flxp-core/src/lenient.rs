//! Lenient serde readers for Proxmox's Perl-JSON quirks.
//!
//! Proxmox sends integers as strings now and then (`nextid`, `vmid` across releases), booleans as
//! `0`/`1`, `"0"`/`"1"` or `""`, and omits optional fields rather than sending `null`. Every reader
//! here accepts all of those and rejects anything else with a message naming the expected type, so a
//! broken document fails with a path instead of a guess. Use them with
//! `#[serde(default, deserialize_with = "lenient::u64")]` on `Option` fields.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};

/// Reads an optional unsigned integer from a number, a numeric string or `null`.
///
/// Fractional numbers are truncated (RRD values are doubles even for byte counts); negative and
/// non-finite ones are errors.
pub fn u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    d.deserialize_any(NumVisitor).and_then(|n| match n {
        None => Ok(None),
        Some(v) if (0.0..1.9e19).contains(&v) => Ok(Some(v as u64)),
        Some(v) => Err(de::Error::custom(format!(
            "expected a non-negative integer, got {}",
            show(v)
        ))),
    })
}

/// Reads an optional unsigned 32-bit integer (a VMID, a CPU count) leniently.
pub fn u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    u64(d).and_then(|n| match n {
        None => Ok(None),
        Some(v) => u32::try_from(v)
            .map(Some)
            .map_err(|_| de::Error::custom(format!("number {v} is too large"))),
    })
}

/// Reads an optional signed integer (a timestamp) leniently.
pub fn i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    d.deserialize_any(NumVisitor).and_then(|n| match n {
        None => Ok(None),
        Some(v) if v.is_finite() && v.abs() < 9.2e18 => Ok(Some(v as i64)),
        Some(v) => Err(de::Error::custom(format!(
            "expected an integer, got {}",
            show(v)
        ))),
    })
}

/// Reads an optional float from a number, a numeric string or `null`; non-finite values are errors.
pub fn f64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    d.deserialize_any(NumVisitor).and_then(|n| match n {
        Some(v) if !v.is_finite() => Err(de::Error::custom("expected a finite number")),
        other => Ok(other),
    })
}

/// Reads an optional boolean from `true`/`false`, `0`/`1`, `"0"`/`"1"`, `""` (false) or `null`.
pub fn bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    d.deserialize_any(BoolVisitor)
}

/// Reads an optional string; numbers are accepted and rendered as text (Perl is loose about both).
pub fn string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    d.deserialize_any(StringVisitor)
}

/// A number for an error message: huge ones in exponent form rather than hundreds of digits.
fn show(v: f64) -> String {
    if v.is_finite() && v.abs() >= 1e21 {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

struct NumVisitor;

impl<'de> Visitor<'de> for NumVisitor {
    type Value = Option<f64>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number or a numeric string")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v as f64))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v as f64))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(if v { 1.0 } else { 0.0 }))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        let t = v.trim();
        if t.is_empty() {
            return Ok(None);
        }
        t.parse::<f64>()
            .map(Some)
            .map_err(|_| E::custom(format!("expected a number, got the string {v:?}")))
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

struct BoolVisitor;

impl<'de> Visitor<'de> for BoolVisitor {
    type Value = Option<bool>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a boolean, 0 or 1")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        match v {
            0 => Ok(Some(false)),
            1 => Ok(Some(true)),
            _ => Err(E::custom(format!("expected 0 or 1, got {v}"))),
        }
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        match v {
            0 => Ok(Some(false)),
            1 => Ok(Some(true)),
            _ => Err(E::custom(format!("expected 0 or 1, got {v}"))),
        }
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        if v == 0.0 {
            Ok(Some(false))
        } else if v == 1.0 {
            Ok(Some(true))
        } else {
            Err(E::custom(format!("expected 0 or 1, got {v}")))
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match v.trim() {
            "" | "0" | "false" => Ok(Some(false)),
            "1" | "true" => Ok(Some(true)),
            _ => Err(E::custom(format!(
                "expected a boolean, got the string {v:?}"
            ))),
        }
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

struct StringVisitor;

impl<'de> Visitor<'de> for StringVisitor {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize, Debug, PartialEq)]
    struct T {
        #[serde(default, deserialize_with = "super::u64")]
        n: Option<u64>,
        #[serde(default, deserialize_with = "super::bool")]
        b: Option<bool>,
        #[serde(default, deserialize_with = "super::f64")]
        f: Option<f64>,
        #[serde(default, deserialize_with = "super::string")]
        s: Option<String>,
    }

    fn parse(s: &str) -> Result<T, serde_json::Error> {
        serde_json::from_str(s)
    }

    #[test]
    fn numbers_arrive_as_numbers_strings_or_not_at_all() {
        assert_eq!(parse(r#"{"n": 105}"#).unwrap().n, Some(105));
        assert_eq!(parse(r#"{"n": "105"}"#).unwrap().n, Some(105));
        assert_eq!(parse(r#"{"n": 1.0e9}"#).unwrap().n, Some(1_000_000_000));
        assert_eq!(parse(r#"{"n": null}"#).unwrap().n, None);
        assert_eq!(parse(r#"{}"#).unwrap().n, None);
        assert_eq!(parse(r#"{"f": "0.25"}"#).unwrap().f, Some(0.25));
    }

    #[test]
    fn booleans_arrive_as_zero_one_strings_or_bools() {
        for (json, want) in [
            (r#"{"b": 1}"#, Some(true)),
            (r#"{"b": 0}"#, Some(false)),
            (r#"{"b": "1"}"#, Some(true)),
            (r#"{"b": ""}"#, Some(false)),
            (r#"{"b": true}"#, Some(true)),
            (r#"{}"#, None),
        ] {
            assert_eq!(parse(json).unwrap().b, want, "{json}");
        }
    }

    #[test]
    fn garbage_is_an_error_that_says_what_was_expected() {
        let e = parse(r#"{"n": "lots"}"#).unwrap_err().to_string();
        assert!(e.contains("expected a number"), "{e}");
        let e = parse(r#"{"n": -4}"#).unwrap_err().to_string();
        assert!(e.contains("non-negative"), "{e}");
        let e = parse(r#"{"b": 2}"#).unwrap_err().to_string();
        assert!(e.contains("0 or 1"), "{e}");
        assert!(parse(r#"{"n": [1]}"#).is_err());
    }

    #[test]
    fn huge_numbers_are_named_in_exponent_form() {
        let e = parse(r#"{"n": 1e300}"#).unwrap_err().to_string();
        assert!(e.contains("got 1e300 "), "{e}");
        let e = parse(r#"{"n": "-1e30"}"#).unwrap_err().to_string();
        assert!(e.contains("got -1e30 "), "{e}");
        let e = parse(r#"{"n": "NaN"}"#).unwrap_err().to_string();
        assert!(e.contains("got NaN "), "{e}");
    }

    #[test]
    fn strings_accept_numbers() {
        assert_eq!(parse(r#"{"s": 12}"#).unwrap().s.as_deref(), Some("12"));
    }
}
