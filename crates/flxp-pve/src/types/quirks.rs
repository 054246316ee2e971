//! Serde readers for Proxmox's wire quirks that `flxp_core::lenient` does not cover.
//!
//! They accept what Perl's JSON may send for required values and collections (`null` or a missing
//! key for an empty list, `[]` for an empty map, numbers where strings are documented). Optional
//! scalars use `flxp_core::lenient::opt`, which also writes them as Proxmox does. Use them with
//! `#[serde(...)]` attributes only.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer};

use flxp_core::lenient;

/// Reads a required unsigned 32-bit integer (a VMID) from a number or a numeric string.
pub fn u32_required<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    lenient::u32(d)?.ok_or_else(|| de::Error::custom("expected an integer, got nothing"))
}

/// Reads a required string, accepting numbers rendered as text.
pub fn string_required<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    lenient::string(d)?.ok_or_else(|| de::Error::custom("expected a string, got null"))
}

pub use flxp_core::lenient::vec_or_null;

/// Reads a list of strings whose items may arrive as numbers (`loadavg`, node lists).
pub fn string_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    struct Item(#[serde(deserialize_with = "lenient::string")] Option<String>);
    let items: Option<Vec<Item>> = Option::deserialize(d)?;
    Ok(items
        .unwrap_or_default()
        .into_iter()
        .filter_map(|Item(s)| s)
        .collect())
}

/// Reads a map keyed by name that Perl may send as `{}`, `[]` (an empty hash turned list) or `null`.
pub fn map_or_empty<'de, D, T>(d: D) -> Result<BTreeMap<String, T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum MapOrList<T> {
        Map(BTreeMap<String, T>),
        List(Vec<serde_json::Value>),
    }
    match Option::<MapOrList<T>>::deserialize(d)? {
        None => Ok(BTreeMap::new()),
        Some(MapOrList::Map(m)) => Ok(m),
        Some(MapOrList::List(l)) if l.is_empty() => Ok(BTreeMap::new()),
        Some(MapOrList::List(_)) => Err(de::Error::custom(
            "expected an object keyed by name, got a non-empty list",
        )),
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeMap;

    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct T {
        #[serde(
            default,
            with = "flxp_core::lenient::opt",
            skip_serializing_if = "Option::is_none"
        )]
        b: Option<bool>,
        #[serde(default, deserialize_with = "super::string_list")]
        l: Vec<String>,
        #[serde(default, deserialize_with = "super::map_or_empty")]
        m: BTreeMap<String, u32>,
        #[serde(default, deserialize_with = "super::vec_or_null")]
        v: Vec<u32>,
    }

    #[test]
    fn booleans_are_written_as_zero_or_one() {
        let t = T {
            b: Some(true),
            l: vec![],
            m: BTreeMap::new(),
            v: vec![],
        };
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"{"b":1,"l":[],"m":{},"v":[]}"#
        );
    }

    #[test]
    fn perl_shapes_of_empty_collections_are_read_as_empty() {
        let t: T = serde_json::from_str(r#"{"l":null,"m":[],"v":null}"#).unwrap();
        assert!(t.l.is_empty() && t.m.is_empty() && t.v.is_empty());
        let t: T = serde_json::from_str(r#"{"l":["0.52",0.58],"m":{"a":1}}"#).unwrap();
        assert_eq!(t.l, ["0.52", "0.58"]);
        assert_eq!(t.m["a"], 1);
        assert!(serde_json::from_str::<T>(r#"{"m":[1]}"#).is_err());
    }
}
