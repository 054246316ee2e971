//! The cluster a decision is made on, built in one place: the typed cluster from a snapshot, its
//! compiled rules and its state as reported.
//!
//! The CLI, the engine's rounds and the API's reservations all start from this, so they read a
//! snapshot the same way.

use crate::Result;
use crate::cluster::{Cluster, NodeIdx, Overrides};
use crate::constraints::Rules;
use crate::snapshot::Snapshot;
use crate::state::State;
use crate::warning::Warning;

/// A cluster ready for decisions: the model, its rules and its state.
#[derive(Debug, Clone)]
pub struct Model {
    /// The typed cluster.
    pub cluster: Cluster,
    /// Its compiled rules.
    pub rules: Rules,
    /// Its state as reported.
    pub state: State,
}

impl Model {
    /// Builds cluster, rules and state from a snapshot with the caller's overrides; fails as
    /// [`Cluster::from_snapshot`] does.
    pub fn from_snapshot(snapshot: &Snapshot, overrides: &Overrides) -> Result<Self> {
        Ok(Self::from_cluster(Cluster::from_snapshot(
            snapshot, overrides,
        )?))
    }

    /// Compiles the rules and reads the state of a cluster already built.
    pub fn from_cluster(cluster: Cluster) -> Self {
        let rules = Rules::compile(&cluster);
        let state = State::new(&cluster);
        Self {
            cluster,
            rules,
            state,
        }
    }

    /// The node a user names: the exact name, else the same name in another case.
    pub fn node_named(&self, name: &str) -> Option<NodeIdx> {
        self.cluster.node_idx_loose(name)
    }

    /// The cluster's node names, comma-separated (for an error that names an unknown node).
    pub fn node_names(&self) -> String {
        self.cluster
            .nodes()
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// What reading the snapshot and compiling the rules found worth saying, in that order.
    pub fn warnings(&self) -> impl Iterator<Item = &Warning> {
        self.cluster.warnings.iter().chain(&self.rules.warnings)
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::testutil::*;

    #[test]
    fn a_model_finds_nodes_in_any_case_and_lists_them() {
        let snap = ClusterBuilder::new().nodes(&["pve1", "PVE2"]).snapshot();
        let m = Model::from_snapshot(&snap, &Overrides::default()).unwrap();
        assert_eq!(m.node_named("pve2"), m.cluster.node_idx("PVE2"));
        assert_eq!(m.node_named("pve3"), None);
        assert_eq!(m.node_names(), "PVE2, pve1");
    }
}
