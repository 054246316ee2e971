//! Lenient serde readers and exact writers for Proxmox's Perl-JSON quirks.
//!
//! Proxmox sends integers as strings now and then (`nextid`, `vmid` across releases), booleans as
//! `0`/`1`, `"0"`/`"1"` or `""`, and omits optional fields rather than sending `null`. Every reader
//! here accepts all of those and rejects anything else with a message naming the expected type, so a
//! broken document fails with a path instead of a guess. Integers are read exactly over the whole
//! `u64`/`i64` range: they pass through a float only when the sender wrote a fraction.
//!
//! Wire types say it once per struct: `#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]`
//! above `#[serde_with::skip_serializing_none]` and `#[serde(default)]`. Every `Option` field is then
//! read leniently as a [`WireValue`] and written as Proxmox does (booleans as `0`/`1`). A `None` is
//! omitted, except in fields marked `#[serialize_always]` (an entry's identity, written as `null`);
//! a struct with a required field puts `default` into the applied attribute instead. A field that
//! is not a scalar opts out with `#[serde_with(skip_apply)]`.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// A scalar Proxmox sends loosely: [`opt`] reads and writes `Option`s of it.
pub trait WireValue: Sized {
    /// Reads the value leniently; `null`, a missing value and (for numbers) `""` are `None`.
    fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Self>, D::Error>;

    /// Writes a present value as Proxmox does.
    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error>;
}

/// `#[serde(with = "lenient::opt")]`: an `Option<T>` read leniently and written as Proxmox does.
pub mod opt {
    use serde::{Deserializer, Serializer};

    use super::WireValue;

    /// Writes `Some` as Proxmox does and `None` as `null` (skip it with `skip_serializing_if`).
    pub fn serialize<T: WireValue, S: Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => v.write(s),
            None => s.serialize_none(),
        }
    }

    /// Reads the value leniently (see [`WireValue::read`]).
    pub fn deserialize<'de, T: WireValue, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<T>, D::Error> {
        T::read(d)
    }
}

impl WireValue for u64 {
    fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Self>, D::Error> {
        integer(d, "a non-negative integer below 2^64")
    }
    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_some(self)
    }
}

impl WireValue for u32 {
    fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Self>, D::Error> {
        integer(d, "a non-negative integer below 2^32")
    }
    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_some(self)
    }
}

impl WireValue for i64 {
    fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Self>, D::Error> {
        integer(d, "an integer within ±2^63")
    }
    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_some(self)
    }
}

impl WireValue for f64 {
    fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Self>, D::Error> {
        match d.deserialize_any(NumVisitor)? {
            None => Ok(None),
            Some(Num::Int(v)) => Ok(Some(v as f64)),
            Some(Num::Float(v, _)) if v.is_finite() => Ok(Some(v)),
            Some(Num::Float(..)) => Err(de::Error::custom("expected a finite number")),
        }
    }
    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_some(self)
    }
}

impl WireValue for bool {
    fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Self>, D::Error> {
        d.deserialize_any(BoolVisitor)
    }
    /// Proxmox writes and expects `1` or `0` (in JSON and in form bodies; `true` as text is a 400).
    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(u8::from(*self))
    }
}

impl WireValue for String {
    fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Self>, D::Error> {
        d.deserialize_any(StringVisitor)
    }
    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_some(self)
    }
}

/// Reads an optional unsigned integer from a number, a numeric string or `null`, exactly.
///
/// Fractional numbers are truncated (RRD values are doubles even for byte counts); negative,
/// non-finite and too large ones are errors.
pub fn u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    <u64 as WireValue>::read(d)
}

/// Reads an optional unsigned 32-bit integer (a VMID, a CPU count) leniently.
pub fn u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    <u32 as WireValue>::read(d)
}

/// Reads an optional signed integer (a timestamp) leniently and exactly.
pub fn i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    <i64 as WireValue>::read(d)
}

/// Reads an optional float from a number, a numeric string or `null`; non-finite values are errors.
pub fn f64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    <f64 as WireValue>::read(d)
}

/// Reads an optional boolean from `true`/`false`, `0`/`1`, `"0"`/`"1"`, `""` (false) or `null`.
pub fn bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    <bool as WireValue>::read(d)
}

/// Reads an optional string; numbers are accepted and rendered as text (Perl is loose about both).
pub fn string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    <String as WireValue>::read(d)
}

/// Reads a list that may be `null` (read as empty), as Perl sends an empty one now and then.
pub fn vec_or_null<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: de::DeserializeOwned,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// Reads a map of byte counts by name leniently: `null` is empty, figures may be numeric strings,
/// and a `null` figure (unknown) is left out.
pub fn u64_map<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, u64>, D::Error> {
    #[derive(Deserialize)]
    struct Figure(#[serde(deserialize_with = "u64")] Option<u64>);
    let map: Option<BTreeMap<String, Figure>> = Option::deserialize(d)?;
    Ok(map
        .into_iter()
        .flatten()
        .filter_map(|(k, Figure(v))| Some((k, v?)))
        .collect())
}

/// `#[serde(with = "lenient::whole")]`: an `Option<f64>` read leniently and written as an integer
/// when it is whole (`16`, not `16.0`), as Perl does for counts such as `maxcpu`.
pub mod whole {
    use serde::{Deserializer, Serialize, Serializer};

    /// Writes a whole value as an integer, any other as a float, `None` as `null`.
    pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(x) => super::Whole(*x).serialize(s),
            None => s.serialize_none(),
        }
    }

    /// Reads the value as [`super::f64`] does.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        super::f64(d)
    }
}

/// A float written as an integer when it is whole and exactly representable (below 2^53).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Whole(pub f64);

impl Serialize for Whole {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Below 2^53 every whole float is an integer `i64` holds as it is.
        if self.0.fract() == 0.0 && self.0.abs() < TWO_TO_53 {
            s.serialize_i64(self.0 as i64)
        } else {
            s.serialize_f64(self.0)
        }
    }
}

/// Reads an integer that must fit `T`; a fraction is truncated toward zero.
fn integer<'de, T: TryFrom<i128>, D: Deserializer<'de>>(
    d: D,
    expected: &str,
) -> Result<Option<T>, D::Error> {
    let unsigned = T::try_from(-1).is_err();
    let shown = match d.deserialize_any(NumVisitor)? {
        None => return Ok(None),
        Some(Num::Int(v)) => match T::try_from(v) {
            Ok(n) => return Ok(Some(n)),
            Err(_) => v.to_string(),
        },
        Some(Num::Float(v, text)) => {
            let whole = v.trunc();
            // From 2^53 on a float no longer holds every integer: a string in plain decimal form
            // gives its integer part from its digits. A JSON number with a fraction or an
            // exponent (`1e18`) is a float by then already, and is read as that float's value.
            let exact = if whole.abs() < TWO_TO_53 {
                // `as` is exact here; NaN fails `is_finite`.
                whole.is_finite().then_some(whole as i128)
            } else {
                text.as_deref()
                    .and_then(integer_part)
                    // `as` saturates far outside i128, which `try_from` then refuses.
                    .or_else(|| whole.is_finite().then_some(whole as i128))
            };
            if let Some(n) = exact.filter(|_| !(unsigned && v < 0.0)) {
                if let Ok(n) = T::try_from(n) {
                    return Ok(Some(n));
                }
            }
            text.unwrap_or_else(|| show(v))
        }
    };
    Err(de::Error::custom(format!(
        "expected {expected}, got {shown}"
    )))
}

/// 2^53: below it every integer is a float, at and above it not every one is.
const TWO_TO_53: f64 = 9_007_199_254_740_992.0;

/// The integer part of a plain decimal (`-12.75` is -12), exactly; `None` for other forms
/// (exponents), whose digits are not all written out.
fn integer_part(text: &str) -> Option<i128> {
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    match int {
        "" | "-" | "+" => Some(0),
        _ => int.parse().ok(),
    }
}

/// A JSON float for an error message, never as a different number than the one sent: huge ones in
/// exponent form, and integers past 2^53 (which a float may have rounded) without digits.
fn show(v: f64) -> String {
    if !v.is_finite() || v.abs() >= 1e21 {
        format!("{v:e}")
    } else if v.fract() == 0.0 && v.abs() >= TWO_TO_53 {
        "a number too large to read exactly".to_owned()
    } else {
        format!("{v}")
    }
}

/// A number as it arrived: an integer (exact), or a float with the text it was parsed from.
enum Num {
    Int(i128),
    Float(f64, Option<String>),
}

/// The visits every reader here shares: `null` and `()` are `None`, `Some(x)` is `x` read again.
macro_rules! absent_is_none {
    ($de:lifetime) => {
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<$de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
    };
}

struct NumVisitor;

impl<'de> Visitor<'de> for NumVisitor {
    type Value = Option<Num>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number or a numeric string")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(Num::Int(i128::from(v))))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(Num::Int(i128::from(v))))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(Num::Float(v, None)))
    }
    /// Proxmox never sends a boolean for a number: `"maxmem": true` is a broken document, not 1.
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Err(E::custom(format!("expected a number, got {v}")))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        let t = v.trim();
        if t.is_empty() {
            return Ok(None);
        }
        // An integer first, so one past 2^53 keeps every digit; a float only for other shapes.
        if let Ok(n) = t.parse::<i128>() {
            return Ok(Some(Num::Int(n)));
        }
        t.parse::<f64>()
            .map(|f| Some(Num::Float(f, Some(t.to_owned()))))
            .map_err(|_| E::custom(format!("expected a number, got the string {v:?}")))
    }
    absent_is_none!('de);
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
        zero_one(i128::from(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        zero_one(i128::from(v))
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
    absent_is_none!('de);
}

/// An integer boolean: `0` or `1`.
fn zero_one<E: de::Error>(v: i128) -> Result<Option<bool>, E> {
    match v {
        0 => Ok(Some(false)),
        1 => Ok(Some(true)),
        _ => Err(E::custom(format!("expected 0 or 1, got {v}"))),
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
    absent_is_none!('de);
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

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
        let e = parse(r#"{"n": true}"#).unwrap_err().to_string();
        assert!(e.contains("expected a number, got true"), "{e}");
        let e = parse(r#"{"f": false}"#).unwrap_err().to_string();
        assert!(e.contains("expected a number, got false"), "{e}");
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
    fn integers_past_two_to_the_fifty_three_stay_exact() {
        for (json, want) in [
            (r#"{"n": 9007199254740993}"#, 9_007_199_254_740_993),
            (r#"{"n": "9007199254740993"}"#, 9_007_199_254_740_993),
            (r#"{"n": 18446744073709551615}"#, u64::MAX),
            (r#"{"n": " 18446744073709551615 "}"#, u64::MAX),
            (r#"{"n": 2.5}"#, 2),
            // A fraction past 2^53 in text: the integer part is read from the digits.
            (r#"{"n": "9007199254740993.5"}"#, 9_007_199_254_740_993),
            (r#"{"n": "18446744073709551615.0"}"#, u64::MAX),
        ] {
            assert_eq!(parse(json).unwrap().n, Some(want), "{json}");
        }
    }

    #[test]
    fn integers_out_of_range_are_errors_that_never_show_another_number() {
        // serde_json reads an integer literal past u64 as a float: no digits it did not get.
        let e = parse(r#"{"n": 18446744073709551616}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("below 2^64"), "{e}");
        assert!(!e.contains("18446744073709552000"), "{e}");
        let e = parse(r#"{"n": "18446744073709551616"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("got 18446744073709551616 "), "{e}");
        let e = parse(r#"{"n": -0.5}"#).unwrap_err().to_string();
        assert!(e.contains("non-negative"), "{e}");
    }

    #[test]
    fn narrower_and_signed_integers_check_their_own_range() {
        #[derive(Deserialize, Debug)]
        struct N {
            #[serde(default, deserialize_with = "super::u32")]
            small: Option<u32>,
            #[serde(default, deserialize_with = "super::i64")]
            signed: Option<i64>,
        }
        let n: N =
            serde_json::from_str(r#"{"small": "4294967295", "signed": -9223372036854775808}"#)
                .unwrap();
        assert_eq!((n.small, n.signed), (Some(u32::MAX), Some(i64::MIN)));
        let e = serde_json::from_str::<N>(r#"{"small": 4294967296}"#).unwrap_err();
        assert!(e.to_string().contains("got 4294967296 "), "{e}");
        let e = serde_json::from_str::<N>(r#"{"signed": "9223372036854775808"}"#).unwrap_err();
        assert!(e.to_string().contains("got 9223372036854775808 "), "{e}");
    }

    #[test]
    fn opt_writes_what_proxmox_writes() {
        #[derive(Serialize, Deserialize, Debug, PartialEq, Default)]
        #[serde(default)]
        struct W {
            #[serde(with = "super::opt", skip_serializing_if = "Option::is_none")]
            n: Option<u64>,
            #[serde(with = "super::opt", skip_serializing_if = "Option::is_none")]
            b: Option<bool>,
            #[serde(with = "super::opt")]
            s: Option<String>,
            #[serde(with = "super::opt", skip_serializing_if = "Option::is_none")]
            f: Option<f64>,
        }
        let w: W =
            serde_json::from_str(r#"{"n": "18446744073709551615", "b": "1", "f": 1}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&w).unwrap(),
            r#"{"n":18446744073709551615,"b":1,"s":null,"f":1.0}"#
        );
        assert_eq!(
            serde_json::to_string(&W::default()).unwrap(),
            r#"{"s":null}"#
        );
    }

    #[test]
    fn strings_accept_numbers() {
        assert_eq!(parse(r#"{"s": 12}"#).unwrap().s.as_deref(), Some("12"));
    }
}
