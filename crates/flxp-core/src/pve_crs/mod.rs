//! Proxmox's cluster resource scheduler (CRS) math, reimplemented from its described behaviour
//! (crate `proxmox-resource-scheduling` 2.1.0 in proxmox-rs, and pve-ha-manager 5.2.0). Section
//! numbers (§) refer to `docs/proxmox-behaviour.md`, which states what this code relies on.
//!
//! Pure functions over explicit numbers in Proxmox's units (CPU in cores, memory in bytes); nothing
//! here knows about snapshots, rules or flxp's cluster model, and nothing logs.
//!
//! - [`static_node_stats`] / [`dynamic_node_stats`]: the node stats each CRS mode scores (§1.3-1.4).
//! - [`score_nodes_to_start`] / [`rank_nodes_to_start`]: TOPSIS over four load criteria to pick
//!   the node to start a resource on (§1.5), O(N²) reference or O(N) evaluation.
//! - [`Imbalance`]: the coefficient of variation of node loads, raw and normalised (§2.3).
//! - [`rank_bruteforce`] / [`rank_topsis`]: Proxmox's two single-move balancing methods (§2.5).
//! - [`topsis`]: the generic TOPSIS engine under both.
//!
//! Bad numbers (zero capacity, NaN, unknown nodes) are a [`CrsError`] naming the culprit.
//!
//! ```
//! use flxp_core::pve_crs::{Imbalance, NodeStats, NodeUsage, ResourceStats, rank_nodes_to_start};
//! let gib = flxp_core::units::GIB;
//! let nodes = [
//!     NodeUsage::new("pve1", NodeStats { cpu: 2.0, maxcpu: 16.0, mem: 40 * gib, maxmem: 64 * gib }),
//!     NodeUsage::new("pve2", NodeStats { cpu: 6.0, maxcpu: 16.0, mem: 8 * gib, maxmem: 64 * gib }),
//! ];
//! let vm = ResourceStats { cpu: 0.0, maxcpu: 2.0, mem: 0, maxmem: 8 * gib };
//! let ranked = rank_nodes_to_start(&nodes, &vm).unwrap();
//! assert_eq!(ranked[0].node, "pve2"); // memory weighs five times CPU
//! assert!(Imbalance::of_nodes(&nodes).unwrap().normalized > 0.0);
//! ```

mod aggregate;
mod criteria;
mod error;
mod imbalance;
mod migration;
mod scored_migration;
mod start;
mod stats;
pub mod topsis;

#[cfg(test)]
mod testutil;

pub use aggregate::{GuestUsage, dynamic_node_stats, static_node_stats};
pub use criteria::{LoadCriteria, PVE_CRITERIA, pve_criteria};
pub use error::{CrsError, CrsResult};
pub use imbalance::Imbalance;
pub use migration::{imbalance_after, rank_bruteforce, rank_topsis};
pub use scored_migration::{CrsMigration, MigrationCandidate, ScoredMigration, TopsisMigration};
pub use start::{
    CrsNodeScore, FAST_START_MIN_NODES, rank_nodes_to_start, score_nodes_to_start,
    score_nodes_to_start_fast, score_nodes_to_start_reference, score_stats_to_start,
    sort_best_first,
};
pub use stats::{NodeStats, NodeUsage, ResourceStats};
