//! The placement decision as `flxp place --json` prints it (Contract 3).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::Warning;

/// Where a new VM goes, and why: `{"node", "candidates", "warnings"}` plus the policy used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Placement {
    /// The chosen node, `null` when no node fits (exit code 3).
    pub node: Option<String>,
    /// The policy that scored the nodes (`host` when the user named the node).
    pub policy: String,
    /// Every node considered: feasible ones best first, then the others by name.
    pub candidates: Vec<Candidate>,
    /// Malformed tags, unknown nodes, conflicts, rules an explicit host breaks.
    pub warnings: Vec<Warning>,
    /// How many of the first `warnings` are about this request (its tags, its host); the rest
    /// are about the cluster.
    #[serde(skip)]
    pub request_warnings: usize,
}

impl Placement {
    /// The warnings about this request only (its tags, its named host), not the cluster's.
    pub fn request_warnings(&self) -> &[Warning] {
        &self.warnings[..self.request_warnings.min(self.warnings.len())]
    }
}

/// One node's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// Node name.
    pub node: String,
    /// Whether it passed every filter.
    pub feasible: bool,
    /// Every failed filter, as `filter: why` with the numbers.
    pub reasons: Vec<String>,
    /// Weighted score 0..=100 (Σ weight × score / Σ weight), `null` when infeasible or not scored.
    pub score: Option<f64>,
    /// Each applicable scorer's normalised score 0..=100.
    pub scores: BTreeMap<String, f64>,
}
