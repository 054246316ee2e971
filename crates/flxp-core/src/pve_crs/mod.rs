//! Proxmox's cluster resource scheduler math (pve-crs.md), reimplemented.

mod criteria;
mod error;
mod start;
mod stats;
pub mod topsis;

#[cfg(test)]
mod testutil;

pub use criteria::{LoadCriteria, PVE_CRITERIA, pve_criteria};
pub use error::{CrsError, CrsResult};
pub use start::{
    FAST_START_MIN_NODES, NodeScore, rank_nodes_to_start, score_nodes_to_start,
    score_nodes_to_start_fast, score_nodes_to_start_reference, sort_best_first,
};
pub use stats::{NodeStats, NodeUsage, ResourceStats};
