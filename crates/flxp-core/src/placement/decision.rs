//! The placement decision as `flxp place --json` prints it (Contract 3).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::Warning;

/// Where a new VM goes, and why: `{"node", "candidates", "warnings"}` plus the policy used.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
pub struct Placement {
    /// The chosen node; null when none fits.
    // `flxp place` then exits 3.
    pub node: Option<String>,
    /// The policy that scored the nodes (`host` for a named host).
    pub policy: String,
    /// Every node's verdict: feasible ones best first, then the others by name (the API lists
    /// them with `explain`, or when no node fits).
    pub candidates: Vec<Candidate>,
    /// Problems in the input, rules a named host breaks.
    // Malformed tags, unknown nodes, conflicts; then the cluster's own warnings.
    pub warnings: Vec<Warning>,
    /// How many of the first `warnings` are about this request (its tags, its host); the rest
    /// are about the cluster.
    #[serde(skip)]
    #[cfg_attr(feature = "graphql", graphql(skip))]
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
#[cfg_attr(
    feature = "graphql",
    derive(async_graphql::SimpleObject),
    graphql(complex)
)]
pub struct Candidate {
    /// The node.
    pub node: String,
    /// Whether it passed every filter.
    pub feasible: bool,
    /// Every failed filter, `filter: why`, with the numbers.
    pub reasons: Vec<String>,
    /// Weighted score 0..=100; null when infeasible or not scored.
    // Σ weight × score / Σ weight over the scorers that apply.
    pub score: Option<f64>,
    /// Each applicable scorer's normalised score 0..=100.
    #[cfg_attr(feature = "graphql", graphql(skip))]
    pub scores: BTreeMap<String, f64>,
    /// Each scorer of `scores` with its weight in the policy (a plugin's too); not in the JSON
    /// decision, which gives the policy by name.
    #[serde(skip)]
    #[cfg_attr(feature = "graphql", graphql(skip))]
    pub weights: BTreeMap<String, f64>,
}

impl Candidate {
    /// Each scorer's share: its score with its weight, in scorer order.
    pub fn shares(&self) -> Vec<Score> {
        self.scores
            .iter()
            .map(|(scorer, &score)| Score {
                scorer: scorer.clone(),
                score,
                // A scorer has a weight in the policy that ran it; 1 if it were ever missing.
                weight: self.weights.get(scorer).copied().unwrap_or(1.0),
            })
            .collect()
    }
}

/// One scorer's normalised score.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
pub struct Score {
    /// The scorer (`free-memory`, `spread`, ...).
    pub scorer: String,
    /// 0..=100.
    pub score: f64,
    /// Its weight in the policy: what the score counts in the node's total.
    pub weight: f64,
}
