//! A scenario: a Contract 1 snapshot (the cluster as Proxmox reported it) plus an optional `sim`
//! section. Loading checks everything the simulator will rely on and names the offending entry.

mod demo;
mod settings;
mod synthetic;

use std::path::Path;

use flxp_core::Snapshot;
use serde_json::Value;

pub use settings::{
    ErrorFault, FailMigration, FaultSpec, GuestSpec, LatencyFault, NodeSpec, PoolSpec, SimSection,
    StorageSpec, UserSpec,
};

use crate::auth::TokenSpec;
use crate::{Error, Result};

/// A loaded and checked scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// The cluster as a Contract 1 snapshot.
    pub snapshot: Snapshot,
    /// The simulator's additions.
    pub sim: SimSection,
}

impl Scenario {
    /// Reads and checks a scenario file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::ReadScenario {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_json(&text)
    }

    /// Parses and checks a scenario document: the snapshot's fields plus `sim`, or any other form
    /// Contract 1 accepts (a bare resources array, `{"data": [...]}`).
    pub fn from_json(text: &str) -> Result<Self> {
        Self::from_value(parse(text)?)
    }

    /// Like [`Scenario::from_json`], from a parsed value.
    pub fn from_value(mut value: Value) -> Result<Self> {
        let sim = match value.as_object_mut().and_then(|o| o.remove("sim")) {
            None | Some(Value::Null) => SimSection::default(),
            Some(sim) => serde_path_to_error::deserialize(sim).map_err(|e| {
                let inner = e.path().to_string();
                let path = if inner == "." {
                    "sim".to_string()
                } else {
                    format!("sim.{inner}")
                };
                Error::scenario(path, e.into_inner().to_string())
            })?,
        };
        let snapshot = Snapshot::from_value(value).map_err(|e| match e {
            flxp_core::Error::Snapshot { path, message } => Error::scenario(path, message),
            other => Error::scenario("", other.to_string()),
        })?;
        let scenario = Scenario { snapshot, sim };
        scenario.validate()?;
        Ok(scenario)
    }

    /// A variant of a scenario document for end-to-end tests: run at `time_scale` simulated
    /// seconds per real second, changed by `edit` before loading, accepting API `token`.
    pub fn variant(
        doc: &str,
        time_scale: f64,
        token: &str,
        edit: impl FnOnce(&mut Value),
    ) -> Result<Self> {
        let mut value = parse(doc)?;
        value["sim"]["time_scale"] = time_scale.into();
        edit(&mut value);
        let mut scenario = Self::from_value(value)?;
        scenario.add_token(token)?;
        Ok(scenario)
    }

    /// The built-in demo world: four heterogeneous nodes, about twenty guests with a few flxp
    /// tags, one HA rule, shared `ceph` plus `local-lvm` per node, and the cloud-init template
    /// 9000 `ubuntu-2404` on shared storage (clonable to any node with `target`).
    pub fn demo() -> Self {
        demo::scenario()
    }

    /// A synthetic scenario of `nodes` nodes and `guests` guests (for benchmarks and load tests):
    /// heterogeneous nodes, none overcommitted, shared and local storage, a few flxp tags.
    /// Deterministic for a given `seed`.
    pub fn synthetic(nodes: usize, guests: usize, seed: u64) -> Self {
        synthetic::scenario(nodes, guests, seed)
    }

    /// Runs `trace` (usage models and workload events) in this scenario, replacing any.
    pub fn set_trace(&mut self, trace: crate::load::Trace) -> Result<()> {
        self.sim.trace = Some(trace);
        self.validate()
    }

    /// Adds an accepted API token (`USER@REALM!ID=SECRET`), e.g. from `--token`.
    pub fn add_token(&mut self, token: &str) -> Result<()> {
        TokenSpec::parse(token, false)?;
        self.sim.tokens.push(Value::String(token.to_string()));
        Ok(())
    }

    /// The accepted API tokens.
    pub fn tokens(&self) -> Result<Vec<TokenSpec>> {
        self.sim
            .tokens
            .iter()
            .enumerate()
            .map(|(i, v)| {
                TokenSpec::from_value(v)
                    .map_err(|e| Error::scenario(format!("sim.tokens[{i}]"), e.to_string()))
            })
            .collect()
    }

    /// Checks everything that the world construction relies on (by constructing it once).
    pub fn validate(&self) -> Result<()> {
        self.tokens()?;
        for (i, u) in self.sim.users.iter().enumerate() {
            crate::auth::check_userid(&u.userid)
                .map_err(|e| Error::scenario(format!("sim.users[{i}].userid"), e.to_string()))?;
        }
        if let Some(scale) = self.sim.time_scale {
            if !(scale.is_finite() && scale > 0.0) {
                return Err(Error::scenario(
                    "sim.time_scale",
                    format!("must be a positive number, got {scale}"),
                ));
            }
        }
        for (field, v) in [
            ("sim.migration_bandwidth", self.sim.migration_bandwidth),
            ("sim.clone_bandwidth", self.sim.clone_bandwidth),
        ] {
            if v == Some(0) {
                return Err(Error::scenario(
                    field,
                    "must be more than 0 bytes per second",
                ));
            }
        }
        for (field, v) in [
            ("sim.ha_delay_secs", self.sim.ha_delay_secs),
            ("sim.ha_fence_delay_secs", self.sim.ha_fence_delay_secs),
            ("sim.stats_interval_secs", self.sim.stats_interval_secs),
            ("sim.node_shutdown_secs", self.sim.node_shutdown_secs),
            ("sim.node_boot_secs", self.sim.node_boot_secs),
        ] {
            if v.is_some_and(|v| !(v.is_finite() && v >= 0.0)) {
                return Err(Error::scenario(
                    field,
                    "must be a non-negative number of seconds",
                ));
            }
        }
        crate::faults::check(&self.sim.faults, "sim.faults")?;
        if let Some(t) = &self.sim.trace {
            t.check().map_err(|e| match e {
                Error::Trace { path, message } => {
                    Error::scenario(format!("sim.trace.{path}"), message)
                }
                other => other,
            })?;
        }
        crate::world::World::build(self, 0.0).map(|_| ())
    }

    /// The simulated start time: `sim.start_time`, else the snapshot's `time`, else now.
    pub fn start_time(&self) -> f64 {
        self.sim
            .start_time
            .or(self.snapshot.time)
            .map(|t| t as f64)
            .unwrap_or_else(|| crate::clock::wall_epoch() as f64)
    }
}

/// A scenario document's JSON, a syntax error located by line and column.
fn parse(text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| {
        Error::scenario(
            format!("line {} column {}", e.line(), e.column()),
            e.to_string(),
        )
    })
}

/// Edits a scenario document (before [`Scenario::from_value`]): adds node `name` with copies of
/// `model`'s node and storage resources (ids renamed) and an empty `nodes` entry, so a test can
/// grow a cluster by nodes just like one it has.
pub fn add_node_like(doc: &mut Value, model: &str, name: &str) {
    if let Some(resources) = doc["resources"].as_array_mut() {
        let copies: Vec<Value> = resources
            .iter()
            .filter(|r| r["node"] == model && (r["type"] == "node" || r["type"] == "storage"))
            .map(|r| {
                let mut r = r.clone();
                r["node"] = name.into();
                if let Some(id) = r["id"].as_str().map(|id| id.replace(model, name)) {
                    r["id"] = id.into();
                }
                r
            })
            .collect();
        resources.extend(copies);
    }
    doc["nodes"][name] = serde_json::json!({"notes": ""});
}
