//! The moves single-move balancing ranks, and the order Proxmox sorts scored moves in (§2.3-2.5).
//!
//! A move names its bundle's leading resource and the two nodes; a scored move carries the
//! imbalance it leads to, cut to 15 decimals, and sorts by it, then by (sid, source, target).

use std::cmp::Ordering;

use serde::Serialize;

use super::criteria::LoadCriteria;
use super::stats::ResourceStats;

/// A possible move of a resource bundle, named by its leader.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct CrsMigration {
    /// The leading resource's id (`vm:101`).
    pub sid: String,
    /// The node it is on.
    pub source: String,
    /// The node it would go to.
    pub target: String,
}

impl CrsMigration {
    /// A move of `sid` from `source` to `target`.
    pub fn new(
        sid: impl Into<String>,
        source: impl Into<String>,
        target: impl Into<String>,
    ) -> Self {
        Self {
            sid: sid.into(),
            source: source.into(),
            target: target.into(),
        }
    }
}

/// A possible move with the measured usage that moves along (the bundle's summed stats).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MigrationCandidate {
    /// The move.
    pub migration: CrsMigration,
    /// What leaves the source and arrives at the target: `cpu` (cores) and `mem` (bytes).
    pub stats: ResourceStats,
}

/// A move with the imbalance it leads to; ordered by that imbalance, then by the move.
#[derive(Debug, Clone, Serialize)]
pub struct ScoredMigration {
    /// The move.
    pub migration: CrsMigration,
    /// Normalised imbalance after the move, truncated to 15 decimals.
    pub imbalance: f64,
}

impl ScoredMigration {
    /// Scores `migration` with `imbalance`, truncated to 15 decimals.
    pub fn new(migration: CrsMigration, imbalance: f64) -> Self {
        // Two moves that balance equally can differ in the last bits of their sums; cutting at
        // f64's 15 significant decimals lets the move's name, not that noise, decide.
        let factor = 10f64.powi(f64::DIGITS as i32);
        Self {
            migration,
            imbalance: (imbalance * factor).trunc() / factor,
        }
    }
}

impl Ord for ScoredMigration {
    fn cmp(&self, other: &Self) -> Ordering {
        self.imbalance
            .total_cmp(&other.imbalance)
            .then_with(|| self.migration.cmp(&other.migration))
    }
}

impl PartialOrd for ScoredMigration {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for ScoredMigration {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for ScoredMigration {}

/// A move ranked by TOPSIS: its imbalance, its score and the state it was judged on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopsisMigration {
    /// The move and the imbalance after it.
    pub scored: ScoredMigration,
    /// TOPSIS score, 0..=1, higher is better.
    pub score: f64,
    /// The four criteria of the cluster after the move.
    pub criteria: LoadCriteria,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `scheduler.rs::test_scored_migration_order` of `proxmox-resource-scheduling`
    /// (`docs/proxmox-behaviour.md` §4): imbalances equal to 15 decimals compare equal, and the
    /// move's names decide.
    #[test]
    fn scored_migration_order() {
        let m1 = ScoredMigration::new(
            CrsMigration::new("vm:102", "node1", "node2"),
            0.7231749488916931,
        );
        let m2 = ScoredMigration::new(
            CrsMigration::new("vm:102", "node1", "node3"),
            0.723174948891693,
        );
        let m3 = ScoredMigration::new(
            CrsMigration::new("vm:101", "node1", "node2"),
            0.723174948891693 + 1e-15,
        );
        assert_eq!(m1.imbalance, m2.imbalance);
        let mut sorted = vec![m2.clone(), m3.clone(), m1.clone()];
        sorted.sort();
        assert_eq!(sorted, [m1.clone(), m2.clone(), m3.clone()]);

        let mut heap = std::collections::BinaryHeap::from(vec![
            std::cmp::Reverse(m2.clone()),
            std::cmp::Reverse(m3.clone()),
            std::cmp::Reverse(m1.clone()),
        ]);
        for want in [m1, m2, m3] {
            assert_eq!(heap.pop().map(|r| r.0.migration), Some(want.migration));
        }
    }
}
