//! Proxmox's cluster resource scheduler math (pve-crs.md), reimplemented.

mod criteria;
mod error;
mod imbalance;
mod migration;
mod start;
mod stats;
pub mod topsis;

#[cfg(test)]
mod testutil;

pub use criteria::{LoadCriteria, PVE_CRITERIA, pve_criteria};
pub use error::{CrsError, CrsResult};
pub use imbalance::Imbalance;
pub use migration::{
    Migration, MigrationCandidate, ScoredMigration, TopsisMigration, imbalance_after,
    rank_bruteforce, rank_topsis,
};
pub use start::{
    FAST_START_MIN_NODES, NodeScore, rank_nodes_to_start, score_nodes_to_start,
    score_nodes_to_start_fast, score_nodes_to_start_reference, sort_best_first,
};
pub use stats::{NodeStats, NodeUsage, ResourceStats};
