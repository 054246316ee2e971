//! Contract 1: the cluster snapshot document, read in every accepted form and written back.
//!
//! A snapshot is what Proxmox reports at one moment; flxp decides from nothing else. This module
//! only reads and writes the document; `crate::cluster` gives it meaning.

mod parse;
pub mod raw;
mod words;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use raw::{Ha, HaResource, HaRule, HaStatusEntry, NodeExtra, Resource, RrdRow, Task, Volume};

/// The cluster snapshot document (Contract 1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Entries exactly as `GET /cluster/resources` returns them.
    pub resources: Vec<Resource>,
    /// Per-node notes and latest RRD row, by node name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nodes: BTreeMap<String, NodeExtra>,
    /// HA rules, resources and status.
    #[serde(default, skip_serializing_if = "Ha::is_empty")]
    pub ha: Ha,
    /// `GET /cluster/options` (e.g. `crs`).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub options: serde_json::Map<String, serde_json::Value>,
    /// `GET /cluster/tasks`: recent and running tasks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<Task>,
    /// When the snapshot was taken (epoch seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<i64>,
}

impl Snapshot {
    /// Parses any accepted form: the full document, a bare resources array, or either of them in
    /// a `{"data": ...}` envelope.
    ///
    /// Errors name the JSON path of the offending value (`resources[3].maxmem: ...`).
    pub fn from_json(text: &str) -> crate::Result<Self> {
        parse::from_json(text)
    }

    /// Parses a document already read into a JSON value (e.g. the scenario part of a simulator file).
    pub fn from_value(value: serde_json::Value) -> crate::Result<Self> {
        parse::from_value(value)
    }

    /// Writes the full document form as pretty JSON.
    pub fn to_json_pretty(&self) -> String {
        // Serializing plain data into a String cannot fail: every map key is a string.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}
