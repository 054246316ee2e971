//! Protocol v1: the JSON a plugin reads (one [`Request`]) and writes (one answer of its kind).
//!
//! `docs/plugin-protocol.md` describes it for plugin writers and `docs/plugin-protocol.schema.json`
//! is its JSON Schema; a test checks requests built here against that file.

use serde::{Deserialize, Serialize};

/// The protocol version flxp speaks; a request carries it, an answer must repeat it.
pub const PROTOCOL_VERSION: u32 = 1;

/// What a plugin does: judge nodes, score nodes, or propose migrations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum PluginKind {
    /// Allows or refuses each candidate node, with a reason for each refusal.
    Filter,
    /// Scores each candidate node, higher is better.
    Score,
    /// Proposes migrations for a zone.
    Balance,
}

impl PluginKind {
    /// The word used in config, requests and answers.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Filter => "filter",
            Self::Score => "score",
            Self::Balance => "balance",
        }
    }
}

/// One call to a plugin: the same shape for every kind (`guest` only for filter and score,
/// `guests` only for balance).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Always [`PROTOCOL_VERSION`].
    pub protocol: u32,
    /// What is asked.
    pub kind: PluginKind,
    /// The plugin's configured name (one program may serve several entries).
    pub plugin: String,
    /// The zone's name when flxp works on a configured zone, else `null` (a snapshot file).
    pub zone: Option<String>,
    /// The VM being placed (filter and score).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub guest: Option<GuestFigures>,
    /// Candidate nodes (filter, score) or every node of the zone (balance).
    pub nodes: Vec<PluginNodeFigures>,
    /// Every guest of the zone (balance).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub guests: Option<Vec<GuestFigures>>,
}

/// A guest as a plugin sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestFigures {
    /// Its id; `null` for a VM not created yet.
    pub vmid: Option<u32>,
    /// Its name; `null` for a VM not created yet.
    pub name: Option<String>,
    /// `qemu` or `lxc`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The node it is on; `null` for a VM not created yet.
    pub node: Option<String>,
    /// Whether it runs (a new VM: `true`).
    pub running: bool,
    /// Memory it needs on a node, in bytes.
    pub memory: u64,
    /// vCPUs.
    pub cores: f64,
    /// CPU cores it uses now (0 for a new VM).
    pub cpu: f64,
    /// Its Proxmox tags (a new VM: the requested ones).
    pub tags: Vec<String>,
}

/// A node with the figures flxp decides on (after the moves planned so far, if any).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginNodeFigures {
    /// Node name: answers must use exactly these.
    pub name: String,
    /// `online`, `offline` or `unknown`.
    pub status: String,
    /// Whether it is in maintenance.
    pub maintenance: bool,
    /// Total memory in bytes.
    pub memory_total: u64,
    /// Used memory in bytes.
    pub memory_used: u64,
    /// Memory flxp counts as available (total − used − reserve), in bytes.
    pub memory_available: u64,
    /// Sum of configured memory of running guests, in bytes.
    pub memory_committed: u64,
    /// Logical CPUs.
    pub cpus: f64,
    /// CPU cores in use.
    pub cpu_used: f64,
    /// Sum of vCPUs of running guests.
    pub vcpus_committed: f64,
    /// Running guests.
    pub guests: u32,
    /// `flxp.label.*` labels of the node.
    pub labels: Vec<String>,
}

/// A filter plugin's answer: one verdict per candidate node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilterAnswer {
    /// Must be [`PROTOCOL_VERSION`].
    pub protocol: u32,
    /// Must be `filter`.
    pub kind: PluginKind,
    /// Exactly one verdict per candidate node.
    pub nodes: Vec<NodeVerdict>,
}

/// Whether one node may take the VM.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeVerdict {
    /// A candidate node's name.
    pub node: String,
    /// Whether the VM may go there.
    pub allowed: bool,
    /// Why not (shown in explanations); ignored when allowed.
    #[serde(default)]
    pub reason: Option<String>,
}

/// A score plugin's answer: one raw score per candidate node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreAnswer {
    /// Must be [`PROTOCOL_VERSION`].
    pub protocol: u32,
    /// Must be `score`.
    pub kind: PluginKind,
    /// Exactly one score per candidate node.
    pub scores: Vec<PluginNodeScore>,
}

/// One node's raw score, higher is better; flxp rescales to 0..=100 like its own scorers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginNodeScore {
    /// A candidate node's name.
    pub node: String,
    /// Any finite number.
    pub score: f64,
}

/// A balance plugin's answer: migrations in the order to run them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BalanceAnswer {
    /// Must be [`PROTOCOL_VERSION`].
    pub protocol: u32,
    /// Must be `balance`.
    pub kind: PluginKind,
    /// Proposed migrations, each checked by flxp on the state the earlier ones leave.
    pub migrations: Vec<Proposal>,
}

/// One proposed migration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    /// The guest to move.
    pub vmid: u32,
    /// The node to move it to.
    pub target: String,
    /// Why, shown in the plan.
    #[serde(default)]
    pub reason: Option<String>,
}

/// Why a plugin call failed: a message that names what went wrong (the plugin's name is added
/// where it is reported).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CallError(pub String);
