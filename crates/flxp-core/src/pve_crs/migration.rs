//! Proxmox's single-move balancing: rank candidate migrations by what they do to the cluster
//! (docs/proxmox-behaviour.md §2.4-2.5).
//!
//! A candidate moves a resource bundle's measured `cpu` and `mem` from its source node (clamped at
//! 0) to its target node. Two methods rank them:
//! - [`rank_bruteforce`]: by the imbalance after the move ([`Imbalance`]), compared at 15 decimals
//!   so float noise cannot decide, then by (sid, source, target). The first is the exact best
//!   single move for the imbalance metric.
//! - [`rank_topsis`]: by TOPSIS over the four [`LoadCriteria`] of the state after each move;
//!   equal scores keep candidate order. It favours even memory and low peaks, so its first choice
//!   need not lower the imbalance most.
//!
//! Neither plans sequences: Proxmox makes one move per balancing round. Choosing whether to move at
//! all (threshold, hold duration, margin) is the caller's business.

use super::criteria::{LoadAccumulator, LoadCriteria, pve_criteria};
use super::error::{CrsError, CrsResult};
use super::imbalance::{Imbalance, of_checked_loads};
use super::scored_migration::{MigrationCandidate, ScoredMigration, TopsisMigration};
use super::stats::{NodeStats, NodeUsage, index_nodes};
use super::topsis;

/// Ranks `candidates` by the imbalance each leaves, lowest first (ties: sid, source, target).
///
/// Fails on unscorable nodes, or candidates with unknown or equal nodes or bad stats.
pub fn rank_bruteforce(
    nodes: &[NodeUsage],
    candidates: &[MigrationCandidate],
) -> CrsResult<Vec<ScoredMigration>> {
    let (base, moves) = resolve(nodes, candidates)?;
    let mut ranked: Vec<ScoredMigration> = moves
        .iter()
        .map(|m| {
            ScoredMigration::new(
                m.candidate.migration.clone(),
                base.imbalance_after(m).normalized,
            )
        })
        .collect();
    ranked.sort();
    Ok(ranked)
}

/// Ranks `candidates` by TOPSIS over the state after each move, best first (ties: input order).
///
/// Fails like [`rank_bruteforce`], or when TOPSIS meets non-finite numbers.
pub fn rank_topsis(
    nodes: &[NodeUsage],
    candidates: &[MigrationCandidate],
) -> CrsResult<Vec<TopsisMigration>> {
    let (base, moves) = resolve(nodes, candidates)?;
    let alternatives: Vec<LoadCriteria> = moves.iter().map(|m| base.criteria_after(m)).collect();
    let matrix: Vec<[f64; 4]> = alternatives.iter().map(|c| c.to_row()).collect();
    let scores = topsis::score(&matrix, &pve_criteria()?)?;
    Ok(topsis::rank_scores(&scores)
        .into_iter()
        .map(|i| {
            let m = &moves[i];
            TopsisMigration {
                scored: ScoredMigration::new(
                    m.candidate.migration.clone(),
                    base.imbalance_after(m).normalized,
                ),
                score: scores[i],
                criteria: alternatives[i],
            }
        })
        .collect())
}

/// The imbalance after one move, untruncated.
///
/// Fails like [`rank_bruteforce`].
pub fn imbalance_after(
    nodes: &[NodeUsage],
    candidate: &MigrationCandidate,
) -> CrsResult<Imbalance> {
    let (base, moves) = resolve(nodes, std::slice::from_ref(candidate))?;
    Ok(moves.first().map_or(
        Imbalance {
            normalized: 0.0,
            raw: 0.0,
        },
        |m| base.imbalance_after(m),
    ))
}

/// A candidate with its two nodes found and their stats after the move.
struct Move<'a> {
    candidate: &'a MigrationCandidate,
    source: usize,
    target: usize,
    source_after: NodeStats,
    target_after: NodeStats,
}

/// Per-node loads before any move, computed once: a move changes only two nodes.
struct Baseline {
    cpu: Vec<f64>,
    mem: Vec<f64>,
    load: Vec<f64>,
}

impl Baseline {
    fn new(nodes: &[NodeUsage]) -> Self {
        Self {
            cpu: nodes.iter().map(|n| n.stats.cpu_load()).collect(),
            mem: nodes.iter().map(|n| n.stats.mem_load()).collect(),
            load: nodes.iter().map(|n| n.stats.load()).collect(),
        }
    }

    /// `f` of each node's stats after the move, else `base[i]`, in node order. The unchanged
    /// nodes' figures are the same numbers recomputing them would give, so sums stay bit-exact.
    fn after<'a>(
        m: &'a Move,
        base: &'a [f64],
        f: fn(&NodeStats) -> f64,
    ) -> impl ExactSizeIterator<Item = f64> + Clone + 'a {
        base.iter().enumerate().map(move |(i, &value)| {
            if i == m.source {
                f(&m.source_after)
            } else if i == m.target {
                f(&m.target_after)
            } else {
                value
            }
        })
    }

    fn imbalance_after(&self, m: &Move) -> Imbalance {
        of_checked_loads(Self::after(m, &self.load, NodeStats::load))
    }

    fn criteria_after(&self, m: &Move) -> LoadCriteria {
        let mut acc = LoadAccumulator::default();
        let cpu = Self::after(m, &self.cpu, NodeStats::cpu_load);
        let mem = Self::after(m, &self.mem, NodeStats::mem_load);
        for (cpu, mem) in cpu.zip(mem) {
            acc.push(cpu, mem);
        }
        acc.finish()
    }
}

/// Checks nodes and candidates, finds each candidate's nodes and prepares the baseline.
fn resolve<'a>(
    nodes: &[NodeUsage],
    candidates: &'a [MigrationCandidate],
) -> CrsResult<(Baseline, Vec<Move<'a>>)> {
    let index = index_nodes(nodes)?;
    let moves = candidates
        .iter()
        .map(|candidate| {
            let m = &candidate.migration;
            let fail = |message: String| CrsError::Candidate {
                sid: m.sid.clone(),
                source_node: m.source.clone(),
                target: m.target.clone(),
                message,
            };
            let find = |node: &str| {
                index
                    .get(node)
                    .copied()
                    .ok_or_else(|| fail(format!("node {node} is not among the nodes given")))
            };
            let (source, target) = (find(&m.source)?, find(&m.target)?);
            if source == target {
                return Err(fail("source and target are the same node".to_owned()));
            }
            candidate.stats.check(&m.sid)?;
            let mut source_after = nodes[source].stats;
            source_after.remove_running(&candidate.stats);
            let mut target_after = nodes[target].stats;
            target_after.add_running(&candidate.stats);
            Ok(Move {
                candidate,
                source,
                target,
                source_after,
                target_after,
            })
        })
        .collect::<CrsResult<_>>()?;
    Ok((Baseline::new(nodes), moves))
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::super::scored_migration::CrsMigration;
    use super::super::testutil::*;
    use super::*;

    /// vm:101 (0.7 of 4 cores, 8 of 16 GiB) from node1 to node2 or node3: upstream's candidates.
    fn vm101_candidates() -> Vec<MigrationCandidate> {
        let stats = resource(0.7, 4.0, 8 * GIB, 16 * GIB);
        ["node2", "node3"]
            .map(|target| MigrationCandidate {
                migration: CrsMigration::new("vm:101", "node1", target),
                stats,
            })
            .into()
    }

    fn targets(migrations: impl IntoIterator<Item = CrsMigration>) -> Vec<String> {
        migrations.into_iter().map(|m| m.target).collect()
    }

    /// `test_score_best_balancing_migration_candidates*` of `proxmox-resource-scheduling`
    /// (docs/proxmox-behaviour.md §4): bruteforce prefers node3, TOPSIS node2, on both clusters.
    #[test]
    fn migration_orderings_match_proxmox() {
        for (cluster, nodes, before) in [
            ("homogeneous", three_nodes_homogeneous(), 0.3460548572604576),
            (
                "heterogeneous",
                three_nodes_heterogeneous(),
                0.23352917788066363,
            ),
        ] {
            assert_eq!(
                Imbalance::of_nodes(&nodes).unwrap().normalized,
                before,
                "{cluster}"
            );
            let brute = rank_bruteforce(&nodes, &vm101_candidates()).unwrap();
            assert_eq!(
                targets(brute.iter().map(|s| s.migration.clone())),
                ["node3", "node2"],
                "{cluster} bruteforce"
            );
            let topsis = rank_topsis(&nodes, &vm101_candidates()).unwrap();
            assert_eq!(
                targets(topsis.iter().map(|t| t.scored.migration.clone())),
                ["node2", "node3"],
                "{cluster} topsis"
            );
            // Both report the same imbalance for the same move.
            for t in &topsis {
                let b = brute
                    .iter()
                    .find(|b| b.migration == t.scored.migration)
                    .unwrap();
                assert_eq!(b.imbalance, t.scored.imbalance, "{cluster}");
            }
        }
    }

    #[test]
    fn homogeneous_imbalances_after_each_move() {
        // docs/proxmox-behaviour.md §4: 0.422 (to node3) and 0.512 (to node2), normalised; raw CV
        // is √2 times.
        let nodes = three_nodes_homogeneous();
        let brute = rank_bruteforce(&nodes, &vm101_candidates()).unwrap();
        let shown = |f: fn(f64) -> f64| -> Vec<String> {
            brute
                .iter()
                .map(|s| format!("{:.3}", f(s.imbalance)))
                .collect()
        };
        assert_eq!(shown(|x| x), ["0.422", "0.512"]);
        assert_eq!(
            shown(|x| Imbalance::raw_from_normalized(x, 3)),
            ["0.597", "0.724"]
        );
        let exact = imbalance_after(&nodes, &vm101_candidates()[1]).unwrap();
        assert_eq!(
            ScoredMigration::new(CrsMigration::new("", "", ""), exact.normalized).imbalance,
            brute[0].imbalance
        );
    }

    #[test]
    fn no_candidates_rank_to_nothing() {
        let nodes = three_nodes_homogeneous();
        assert!(rank_bruteforce(&nodes, &[]).unwrap().is_empty());
        assert!(rank_topsis(&nodes, &[]).unwrap().is_empty());
    }

    #[test]
    fn source_is_clamped_and_ties_keep_candidate_order() {
        // The source reports less than the bundle uses: its figures stop at 0.
        let nodes = vec![
            node("a", 1.0, 8.0, GIB, 32 * GIB),
            node("b", 0.0, 8.0, 0, 32 * GIB),
            node("c", 0.0, 8.0, 0, 32 * GIB),
        ];
        let stats = resource(4.0, 4.0, 8 * GIB, 8 * GIB);
        let candidates: Vec<MigrationCandidate> = ["c", "b"]
            .map(|t| MigrationCandidate {
                migration: CrsMigration::new("vm:100", "a", t),
                stats,
            })
            .into();
        let topsis = rank_topsis(&nodes, &candidates).unwrap();
        // b and c are alike: TOPSIS keeps candidate order, bruteforce sorts by name.
        assert_eq!(
            targets(topsis.iter().map(|t| t.scored.migration.clone())),
            ["c", "b"]
        );
        assert_eq!(topsis[0].score, topsis[1].score);
        let brute = rank_bruteforce(&nodes, &candidates).unwrap();
        assert_eq!(
            targets(brute.iter().map(|s| s.migration.clone())),
            ["b", "c"]
        );
        // After the move: a (0 of 8, 0 of 32 GiB), b (4 of 8, 8 of 32 GiB), c idle. Loads 0, 0.375, 0.
        let want = Imbalance::of_loads(&[0.0, 0.375, 0.0]).unwrap().normalized;
        assert_eq!(
            brute[0].imbalance,
            ScoredMigration::new(brute[0].migration.clone(), want).imbalance
        );
        assert_eq!(topsis[0].criteria.highest_cpu, 1.5);
    }

    #[test]
    fn bad_candidates_are_named_errors() {
        let nodes = three_nodes_homogeneous();
        let mut c = vm101_candidates();
        c[1].migration.target = "node9".to_owned();
        assert_eq!(
            rank_bruteforce(&nodes, &c).unwrap_err().to_string(),
            "migration candidate vm:101 from node1 to node9: node node9 is not among the nodes given"
        );
        c[1].migration.target = "node1".to_owned();
        assert_eq!(
            rank_topsis(&nodes, &c).unwrap_err().to_string(),
            "migration candidate vm:101 from node1 to node1: source and target are the same node"
        );
        let mut c = vm101_candidates();
        c[0].stats.cpu = f64::INFINITY;
        assert_eq!(
            rank_bruteforce(&nodes, &c).unwrap_err().to_string(),
            "resource vm:101: cpu is inf, expected cores (>= 0)"
        );
    }

    /// The cluster after a move, built the slow way: every node's stats copied and two changed.
    fn moved(nodes: &[NodeUsage], c: &MigrationCandidate) -> Vec<NodeUsage> {
        let mut after = nodes.to_vec();
        for n in &mut after {
            if n.name == c.migration.source {
                n.stats.remove_running(&c.stats);
            } else if n.name == c.migration.target {
                n.stats.add_running(&c.stats);
            }
        }
        after
    }

    fn cluster_and_candidates() -> impl Strategy<Value = (Vec<NodeUsage>, Vec<MigrationCandidate>)>
    {
        let nodes =
            prop::collection::vec((1u32..=64, 0.0f64..1.5, 1u64..=512, 0.0f64..1.0), 2..=12);
        let moves = prop::collection::vec((0usize..64, 1usize..64, 0.0f64..8.0, 0u64..=64), 0..=24);
        (nodes, moves).prop_map(|(nodes, moves)| {
            let nodes = nodes_from_shares(nodes);
            let n = nodes.len();
            let candidates = moves
                .into_iter()
                .enumerate()
                .map(|(i, (source, step, cpu, gib))| {
                    let (source, target) = (source % n, (source + 1 + step % (n - 1)) % n);
                    MigrationCandidate {
                        migration: CrsMigration::new(
                            format!("vm:{}", 100 + i % 5),
                            nodes[source].name.clone(),
                            nodes[target].name.clone(),
                        ),
                        stats: resource(cpu, cpu.ceil(), gib * GIB, gib * GIB),
                    }
                })
                .collect();
            (nodes, candidates)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Each reported imbalance and criteria are exactly what the moved cluster gives, and the
        /// bruteforce order is sorted with the lowest imbalance first.
        #[test]
        fn rankings_replay_exactly((nodes, candidates) in cluster_and_candidates()) {
            let brute = rank_bruteforce(&nodes, &candidates).unwrap();
            let topsis = rank_topsis(&nodes, &candidates).unwrap();
            prop_assert_eq!(brute.len(), candidates.len());
            prop_assert_eq!(topsis.len(), candidates.len());
            prop_assert!(brute.windows(2).all(|w| w[0] <= w[1]));
            for c in &candidates {
                let after = moved(&nodes, c);
                let exact = Imbalance::of_nodes(&after).unwrap();
                prop_assert_eq!(imbalance_after(&nodes, c).unwrap(), exact);
                let want = ScoredMigration::new(c.migration.clone(), exact.normalized).imbalance;
                prop_assert!(brute.iter().any(|b| b.migration == c.migration && b.imbalance == want));
                let criteria = LoadCriteria::of_nodes(after.iter().map(|n| n.stats));
                prop_assert!(topsis.iter().any(|t| t.scored.migration == c.migration
                    && t.criteria == criteria && t.scored.imbalance == want));
            }
            prop_assert!(topsis.windows(2).all(|w| w[0].score >= w[1].score));
        }
    }
}
