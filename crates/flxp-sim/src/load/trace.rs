//! A trace: usage models per guest plus timed workload events (create, delete, maintenance,
//! model change), as a JSON document (`trace.schema.json` in this crate describes it). Times are
//! seconds after the simulation starts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::model::{GuestModel, check_model};
use crate::{Error, Result};

/// A trace document.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Trace {
    /// What generated it (`office-hours`, ...), for people reading it.
    pub family: Option<String>,
    /// Seed of the models' noise (the same seed gives the same figures).
    pub seed: u64,
    /// Usage models by VMID.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, GuestModel>,
    /// Timed events, in any order (applied in time order, ties in document order).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event>,
}

/// A timed event: `at` plus exactly one of `create`, `delete`, `maintenance`, `model`.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// Seconds after the simulation starts.
    pub at: f64,
    /// Create and start a guest.
    #[serde(default)]
    pub create: Option<CreateEvent>,
    /// Stop and delete a guest.
    #[serde(default)]
    pub delete: Option<DeleteEvent>,
    /// Enter or leave maintenance.
    #[serde(default)]
    pub maintenance: Option<MaintenanceEvent>,
    /// Replace a guest's usage model.
    #[serde(default)]
    pub model: Option<ModelEvent>,
}

/// Creates a VM (`POST /nodes/{node}/qemu` with `start=1`) as the workload user.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateEvent {
    /// Its VMID; default the lowest free one.
    #[serde(default)]
    pub vmid: Option<u32>,
    /// Its node; default the online node with the most free memory.
    #[serde(default)]
    pub node: Option<String>,
    /// Its name.
    #[serde(default)]
    pub name: Option<String>,
    /// vCPUs (default 2).
    #[serde(default = "two")]
    pub cores: u32,
    /// Memory, MiB (default 2048).
    #[serde(default = "two_gib")]
    pub memory: u64,
    /// Boot disk size in GiB on the first shared storage (default 16; 0: no disk).
    #[serde(default = "sixteen")]
    pub disk_gib: u32,
    /// Tags (`a;b`).
    #[serde(default)]
    pub tags: Option<String>,
    /// Its usage model.
    #[serde(default)]
    pub model: Option<GuestModel>,
}

fn two() -> u32 {
    2
}

fn two_gib() -> u64 {
    2048
}

fn sixteen() -> u32 {
    16
}

/// Stops (if running) and deletes a guest as the workload user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteEvent {
    /// The guest.
    pub vmid: u32,
}

/// How a node's maintenance is signalled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MaintenanceVia {
    /// HA node maintenance (`ha-manager crm-command node-maintenance`).
    #[default]
    Ha,
    /// flxp's `flxp.maintenance` token in the node's notes.
    Note,
}

/// Turns a node's maintenance on or off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaintenanceEvent {
    /// The node.
    pub node: String,
    /// On or off.
    pub enable: bool,
    /// HA maintenance (default) or the `flxp.maintenance` note.
    #[serde(default)]
    pub via: MaintenanceVia,
}

/// Replaces a guest's usage model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEvent {
    /// The guest.
    pub vmid: u32,
    /// Its new model.
    pub model: GuestModel,
}

impl Trace {
    /// Parses and checks a trace document; errors name the JSON path (`events[3].create.cores`).
    pub fn from_json(text: &str) -> Result<Self> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let trace: Trace = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if inner.is_syntax() || inner.is_eof() {
                trace_error(
                    format!("line {} column {}", inner.line(), inner.column()),
                    inner.to_string(),
                )
            } else {
                trace_error(path, inner.to_string())
            }
        })?;
        trace.check()?;
        Ok(trace)
    }

    /// Reads a trace file.
    pub fn load(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::ReadScenario {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_json(&text)
    }

    /// Checks what serde cannot: VMIDs, ranges, one action per event.
    pub fn check(&self) -> Result<()> {
        for (id, m) in &self.models {
            parse_vmid(id).map_err(|e| trace_error(format!("models.{id}"), e))?;
            check_model(m).map_err(|(p, e)| trace_error(format!("models.{id}.{p}"), e))?;
        }
        for (i, e) in self.events.iter().enumerate() {
            let at = format!("events[{i}]");
            if !(e.at.is_finite() && e.at >= 0.0) {
                return Err(trace_error(
                    format!("{at}.at"),
                    format!("must be seconds after the start, got {}", e.at),
                ));
            }
            let n = [
                e.create.is_some(),
                e.delete.is_some(),
                e.maintenance.is_some(),
                e.model.is_some(),
            ]
            .iter()
            .filter(|b| **b)
            .count();
            if n != 1 {
                return Err(trace_error(
                    at,
                    "needs exactly one of create, delete, maintenance, model",
                ));
            }
            let vmid = e
                .create
                .as_ref()
                .and_then(|c| c.vmid.map(|v| ("create", v)))
                .or(e.delete.as_ref().map(|d| ("delete", d.vmid)))
                .or(e.model.as_ref().map(|m| ("model", m.vmid)));
            if let Some((action, v)) = vmid {
                parse_vmid(&v.to_string())
                    .map_err(|msg| trace_error(format!("{at}.{action}.vmid"), msg))?;
            }
            if let Some(c) = &e.create {
                if c.cores == 0 {
                    return Err(trace_error(
                        format!("{at}.create.cores"),
                        "must be at least 1",
                    ));
                }
                if c.memory < 16 {
                    return Err(trace_error(
                        format!("{at}.create.memory"),
                        format!("must be at least 16 MiB, got {}", c.memory),
                    ));
                }
                if let Some(m) = &c.model {
                    check_model(m)
                        .map_err(|(p, e)| trace_error(format!("{at}.create.model.{p}"), e))?;
                }
            }
            if let Some(m) = &e.model {
                check_model(&m.model)
                    .map_err(|(p, e)| trace_error(format!("{at}.model.model.{p}"), e))?;
            }
        }
        Ok(())
    }

    /// The models by numeric VMID.
    pub fn models_by_vmid(&self) -> BTreeMap<u32, GuestModel> {
        self.models
            .iter()
            .filter_map(|(k, m)| parse_vmid(k).ok().map(|v| (v, m.clone())))
            .collect()
    }

    /// The trace as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

fn parse_vmid(s: &str) -> std::result::Result<u32, String> {
    s.parse::<u32>()
        .ok()
        .filter(|v| (100..1_000_000_000).contains(v))
        .ok_or_else(|| format!("'{s}' is not a VMID (100..999999999)"))
}

/// A trace error at a JSON path.
fn trace_error(path: impl Into<String>, message: impl Into<String>) -> Error {
    let path = path.into();
    Error::Trace {
        path: if path == "." { String::new() } else { path },
        message: message.into(),
    }
}
