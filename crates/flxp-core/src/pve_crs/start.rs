//! Scoring nodes to start (or recover, or place) a resource on, as Proxmox's CRS does (§1.5).
//!
//! One TOPSIS alternative per node: every node's stats, with the resource added to that node as
//! started (its `maxcpu`, or the node's cores when 0, and its `maxmem`), summarised by the four
//! [`LoadCriteria`] over **all** nodes given. Scores come back per node in input order, 0..=1,
//! higher is better; ranking breaks ties by node name, as `select_service_node` does.
//!
//! Two evaluations give the same scores (docs/proxmox-behaviour.md §5):
//! - [`score_nodes_to_start_reference`] rebuilds each alternative from every node: O(N²), summing
//!   in node order like Proxmox, so its numbers are Proxmox's.
//! - [`score_nodes_to_start_fast`] changes one node per alternative against prefix and suffix sums
//!   of squared loads and the two highest loads: O(N). Its sums associate differently, so scores
//!   can differ in the last bits (tests hold them within 1e-12).
//!
//! [`score_nodes_to_start`] uses the reference below [`FAST_START_MIN_NODES`] nodes, where
//! bit-parity with Proxmox's test clusters matters more than speed, and the fast one above.

use serde::Serialize;

use super::criteria::{LoadCriteria, from_sums, pve_criteria};
use super::error::CrsResult;
use super::stats::{NodeStats, NodeUsage, ResourceStats, check_nodes};
use super::topsis;

/// From this many nodes on, [`score_nodes_to_start`] uses the O(N) evaluation.
///
/// Measured per decision (release build, shared 2-core machine): 0.5-2 µs for either below 16
/// nodes; at 32 nodes 6.5 µs (reference) vs 3.5 µs (fast); at 1024 nodes 3.7 ms vs 0.12 ms.
/// Below 32 the saving is under 2x and a few microseconds, while the reference keeps Proxmox's
/// exact numbers for the cluster sizes Proxmox is run at (its test clusters have 3 to 5 nodes).
pub const FAST_START_MIN_NODES: usize = 32;

/// One node's TOPSIS score for starting a resource there, and the state it was judged on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CrsNodeScore {
    /// The node.
    pub node: String,
    /// TOPSIS score, 0..=1, higher is better.
    pub score: f64,
    /// The cluster state with the resource started on this node.
    pub criteria: LoadCriteria,
}

/// Scores every node for starting `resource` there; per node, in input order.
///
/// Picks the evaluation by cluster size ([`FAST_START_MIN_NODES`]). Fails on unscorable nodes
/// (zero capacity, duplicates) or resource stats, naming them.
pub fn score_nodes_to_start(
    nodes: &[NodeUsage],
    resource: &ResourceStats,
) -> CrsResult<Vec<CrsNodeScore>> {
    if nodes.len() >= FAST_START_MIN_NODES {
        score_nodes_to_start_fast(nodes, resource)
    } else {
        score_nodes_to_start_reference(nodes, resource)
    }
}

/// [`score_nodes_to_start`]'s scores alone, from nodes known only by their stats, in input
/// order: the same evaluation and the same numbers, without copying names into the result.
/// The nodes must be distinct (not checked); `name(i)` names node `i` in an error.
pub fn score_stats_to_start<'a>(
    nodes: &[NodeStats],
    name: impl Fn(usize) -> &'a str,
    resource: &ResourceStats,
) -> CrsResult<Vec<f64>> {
    for (i, stats) in nodes.iter().enumerate() {
        stats.check(name(i))?;
    }
    resource.check("to start")?;
    let alternatives = if nodes.len() >= FAST_START_MIN_NODES {
        fast_alternatives(nodes.iter(), resource)
    } else {
        reference_alternatives(nodes.iter(), resource)
    };
    let matrix: Vec<[f64; 4]> = alternatives.iter().map(|c| c.to_row()).collect();
    topsis::score(&matrix, &pve_criteria()?)
}

/// Like [`score_nodes_to_start`], best first; equal scores go to the alphabetically first node.
pub fn rank_nodes_to_start(
    nodes: &[NodeUsage],
    resource: &ResourceStats,
) -> CrsResult<Vec<CrsNodeScore>> {
    let mut scores = score_nodes_to_start(nodes, resource)?;
    sort_best_first(&mut scores);
    Ok(scores)
}

/// Sorts by score, best first, then by node name.
pub fn sort_best_first(scores: &mut [CrsNodeScore]) {
    scores.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.node.cmp(&b.node))
    });
}

/// The O(N²) evaluation: each alternative rebuilt from every node, as Proxmox computes it.
pub fn score_nodes_to_start_reference(
    nodes: &[NodeUsage],
    resource: &ResourceStats,
) -> CrsResult<Vec<CrsNodeScore>> {
    check(nodes, resource)?;
    let alternatives = reference_alternatives(nodes.iter().map(|n| &n.stats), resource);
    score_alternatives(nodes, alternatives)
}

/// Each node's alternative, rebuilt from every node: O(N²).
fn reference_alternatives<'a>(
    nodes: impl ExactSizeIterator<Item = &'a NodeStats> + Clone,
    resource: &ResourceStats,
) -> Vec<LoadCriteria> {
    (0..nodes.len())
        .map(|target| {
            LoadCriteria::of_nodes(nodes.clone().enumerate().map(|(i, node)| {
                let mut stats = *node;
                if i == target {
                    stats.add_started(resource);
                }
                stats
            }))
        })
        .collect()
}

/// The O(N) evaluation: one node changed per alternative, against precomputed sums and maxima.
pub fn score_nodes_to_start_fast(
    nodes: &[NodeUsage],
    resource: &ResourceStats,
) -> CrsResult<Vec<CrsNodeScore>> {
    check(nodes, resource)?;
    let alternatives = fast_alternatives(nodes.iter().map(|n| &n.stats), resource);
    score_alternatives(nodes, alternatives)
}

/// Each node's alternative, from prefix and suffix sums and the two highest loads: O(N).
fn fast_alternatives<'a>(
    nodes: impl ExactSizeIterator<Item = &'a NodeStats> + Clone,
    resource: &ResourceStats,
) -> Vec<LoadCriteria> {
    let n = nodes.len();
    let loads = |f: fn(&NodeStats) -> f64| -> Vec<f64> { nodes.clone().map(f).collect() };
    let cpu = Column::new(&loads(NodeStats::cpu_load));
    let mem = Column::new(&loads(NodeStats::mem_load));
    nodes
        .enumerate()
        .map(|(i, node)| {
            let mut started = *node;
            started.add_started(resource);
            from_sums(
                n,
                cpu.with(i, started.cpu_load()),
                mem.with(i, started.mem_load()),
            )
        })
        .collect()
}

fn check(nodes: &[NodeUsage], resource: &ResourceStats) -> CrsResult<()> {
    check_nodes(nodes)?;
    resource.check("to start")
}

fn score_alternatives(
    nodes: &[NodeUsage],
    alternatives: Vec<LoadCriteria>,
) -> CrsResult<Vec<CrsNodeScore>> {
    let matrix: Vec<[f64; 4]> = alternatives.iter().map(|c| c.to_row()).collect();
    let scores = topsis::score(&matrix, &pve_criteria()?)?;
    Ok(nodes
        .iter()
        .zip(scores)
        .zip(alternatives)
        .map(|((node, score), criteria)| CrsNodeScore {
            node: node.name.clone(),
            score,
            criteria,
        })
        .collect())
}

/// One resource's per-node loads, prepared to answer "what if node i had load x" in O(1).
struct Column {
    /// `prefix[i]`: sum of squared loads of nodes `0..i`, accumulated in node order.
    prefix: Vec<f64>,
    /// `suffix[i]`: sum of squared loads of nodes `i..`, accumulated from the back.
    suffix: Vec<f64>,
    /// Highest load and its node; the second highest (equal to it on a tie).
    top: (f64, usize),
    second: f64,
}

impl Column {
    fn new(loads: &[f64]) -> Self {
        let squares: Vec<f64> = loads.iter().map(|l| l * l).collect();
        let n = squares.len();
        let (mut prefix, mut suffix) = (vec![0.0; n + 1], vec![0.0; n + 1]);
        for i in 0..n {
            prefix[i + 1] = prefix[i] + squares[i];
        }
        for i in (0..n).rev() {
            suffix[i] = squares[i] + suffix[i + 1];
        }
        // Start at 0 like the reference's running maximum: loads are never negative.
        let (mut top, mut second) = ((0.0, usize::MAX), 0.0);
        for (i, &load) in loads.iter().enumerate() {
            if load > top.0 {
                second = top.0;
                top = (load, i);
            } else if load > second {
                second = load;
            }
        }
        Self {
            prefix,
            suffix,
            top,
            second,
        }
    }

    /// `[sum of squares, highest]` of the loads with node `i`'s load replaced by `load`.
    fn with(&self, i: usize, load: f64) -> [f64; 2] {
        // Same association as the reference up to node i, so the last node's sums match exactly.
        let squares = (self.prefix[i] + load * load) + self.suffix[i + 1];
        let others = if i == self.top.1 {
            self.second
        } else {
            self.top.0
        };
        [squares, f64::max(others, load)]
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::super::testutil::*;
    use super::*;

    type Scorer = fn(&[NodeUsage], &ResourceStats) -> CrsResult<Vec<CrsNodeScore>>;
    const EVALUATIONS: [(&str, Scorer); 3] = [
        ("reference", score_nodes_to_start_reference),
        ("fast", score_nodes_to_start_fast),
        ("auto", score_nodes_to_start),
    ];

    fn ranking(nodes: &[NodeUsage], resource: ResourceStats, scorer: Scorer) -> Vec<String> {
        let mut scores = scorer(nodes, &resource).unwrap();
        sort_best_first(&mut scores);
        names(&scores, |s| &s.node)
    }

    /// The four resources of upstream's start tests: (name, stats).
    fn start_cases() -> [(&'static str, ResourceStats); 4] {
        [
            ("heavy memory", resource(0.0, 1.0, 0, 12 * GIB)),
            ("heavy cpu", resource(0.0, 12.0, 0, 0)),
            ("unlimited cpu", resource(0.0, 0.0, 0, 0)),
            ("combined", resource(0.0, 12.0, 0, 12 * GIB)),
        ]
    }

    /// `test_score_{homogeneous,heterogeneous}_nodes_to_start_resource` of
    /// `proxmox-resource-scheduling` (docs/proxmox-behaviour.md §4), under every evaluation.
    #[test]
    fn start_rankings_match_proxmox() {
        let expected = [
            (
                "homogeneous",
                three_nodes_homogeneous(),
                [
                    ["node2", "node3", "node1"],
                    ["node1", "node3", "node2"],
                    ["node1", "node3", "node2"],
                    ["node2", "node3", "node1"],
                ],
            ),
            (
                "heterogeneous",
                three_nodes_heterogeneous(),
                [
                    ["node2", "node1", "node3"],
                    ["node3", "node2", "node1"],
                    ["node1", "node3", "node2"],
                    ["node2", "node1", "node3"],
                ],
            ),
        ];
        for (cluster, nodes, rankings) in expected {
            for ((case, stats), want) in start_cases().into_iter().zip(rankings) {
                for (evaluation, scorer) in EVALUATIONS {
                    assert_eq!(
                        ranking(&nodes, stats, scorer),
                        want,
                        "{cluster} cluster, {case} resource, {evaluation} evaluation"
                    );
                }
            }
        }
    }

    #[test]
    fn scores_come_in_input_order_within_unit_interval() {
        let nodes = three_nodes_heterogeneous();
        let scores = score_nodes_to_start(&nodes, &resource(0.0, 4.0, 0, 8 * GIB)).unwrap();
        assert_eq!(names(&scores, |s| &s.node), ["node1", "node2", "node3"]);
        assert!(scores.iter().all(|s| (0.0..=1.0).contains(&s.score)));
        // The alternative's criteria are 1 + loads: node1 gets 4 of its 16 cores.
        let node1 = scores[0].criteria;
        assert_eq!(
            node1.highest_memory,
            1.0 + (12334 * MIB + 8 * GIB) as f64 / (128 * GIB) as f64
        );
    }

    #[test]
    fn empty_cluster_ties_go_to_first_name_then_spread() {
        // docs/proxmox-behaviour.md §1.5: equal alternatives score 0, so the first pick is node1;
        // after it, two distinct alternatives score exactly 1 and 0.
        let mut nodes = vec![
            node("node3", 0.0, 24.0, 0, 128 * GIB),
            node("node1", 0.0, 24.0, 0, 128 * GIB),
            node("node2", 0.0, 24.0, 0, 128 * GIB),
        ];
        let guest = resource(0.0, 4.0, 0, 4 * GIB);
        let mut picks = Vec::new();
        for _ in 0..6 {
            let ranked = rank_nodes_to_start(&nodes, &guest).unwrap();
            let best = ranked[0].node.clone();
            let node = nodes.iter_mut().find(|n| n.name == best).unwrap();
            node.stats.add_started(&guest);
            picks.push(best);
        }
        assert_eq!(
            picks,
            ["node1", "node2", "node3", "node1", "node2", "node3"]
        );
        let ranked = rank_nodes_to_start(&nodes[..2], &guest).unwrap();
        assert_eq!(
            ranked.iter().map(|s| s.score).collect::<Vec<_>>(),
            [0.0, 0.0]
        );
    }

    #[test]
    fn bad_input_is_a_named_error() {
        let mut nodes = three_nodes_homogeneous();
        nodes[1].stats.maxmem = 0;
        for (evaluation, scorer) in EVALUATIONS {
            let err = scorer(&nodes, &resource(0.0, 1.0, 0, GIB)).unwrap_err();
            assert_eq!(
                err.to_string(),
                "node node2: maxmem is 0, expected the node's memory in bytes",
                "{evaluation}"
            );
        }
        let err = score_nodes_to_start(&three_nodes_homogeneous(), &resource(f64::NAN, 1.0, 0, 0))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "resource to start: cpu is NaN, expected cores (>= 0)"
        );
        assert!(
            score_nodes_to_start(&[], &resource(0.0, 1.0, 0, GIB))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn threshold_switches_to_fast_path_with_equal_results() {
        let nodes: Vec<NodeUsage> = (0..FAST_START_MIN_NODES)
            .map(|i| {
                let f = i as f64;
                node(
                    &format!("n{i:02}"),
                    f * 0.37 % 7.0,
                    8.0 + f,
                    (i as u64 * 3 + 1) * GIB,
                    96 * GIB,
                )
            })
            .collect();
        let guest = resource(0.0, 2.0, 0, 6 * GIB);
        let auto = score_nodes_to_start(&nodes, &guest).unwrap();
        assert_eq!(auto, score_nodes_to_start_fast(&nodes, &guest).unwrap());
        let reference = score_nodes_to_start_reference(&nodes, &guest).unwrap();
        assert_same_scores(&reference, &auto);
        assert_eq!(
            ranking(&nodes, guest, score_nodes_to_start_reference),
            ranking(&nodes, guest, score_nodes_to_start_fast)
        );
    }

    /// Scores within 1e-12, and rankings equal up to reordering nodes whose reference scores are
    /// themselves within 1e-12 (a near-tie can flip on the last bit of either sum).
    fn assert_same_scores(reference: &[CrsNodeScore], fast: &[CrsNodeScore]) {
        assert_eq!(reference.len(), fast.len());
        for (r, f) in reference.iter().zip(fast) {
            assert_eq!(r.node, f.node);
            assert!(
                (r.score - f.score).abs() <= 1e-12,
                "{}: reference {} fast {}",
                r.node,
                r.score,
                f.score
            );
        }
        let (mut r, mut f) = (reference.to_vec(), fast.to_vec());
        sort_best_first(&mut r);
        sort_best_first(&mut f);
        let score_of = |node: &str| reference.iter().find(|s| s.node == node).map(|s| s.score);
        for (a, b) in r.iter().zip(&f) {
            let (sa, sb) = (score_of(&a.node).unwrap(), score_of(&b.node).unwrap());
            assert!(
                (sa - sb).abs() <= 1e-12,
                "ranking differs: {} vs {}",
                a.node,
                b.node
            );
        }
    }

    fn cluster() -> impl Strategy<Value = Vec<NodeUsage>> {
        prop::collection::vec((1u32..=128, 0.0f64..1.5, 1u64..=1024, 0.0f64..1.2), 1..=64)
            .prop_map(nodes_from_shares)
    }

    fn guest() -> impl Strategy<Value = ResourceStats> {
        (0u32..=32, 0u64..=256 * 1024)
            .prop_map(|(cores, mib)| resource(0.0, f64::from(cores), 0, mib * MIB))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn fast_evaluation_matches_reference(nodes in cluster(), guest in guest()) {
            let reference = score_nodes_to_start_reference(&nodes, &guest).unwrap();
            let fast = score_nodes_to_start_fast(&nodes, &guest).unwrap();
            assert_same_scores(&reference, &fast);
            // The last node's alternative sums in the same order both ways.
            prop_assert_eq!(reference.last().map(|s| s.criteria), fast.last().map(|s| s.criteria));
        }

        #[test]
        fn scores_from_stats_alone_are_the_same_numbers(nodes in cluster(), guest in guest()) {
            // Clusters of 1 to 64 nodes: both evaluations, either side of the threshold.
            let named: Vec<f64> = score_nodes_to_start(&nodes, &guest)
                .unwrap()
                .into_iter()
                .map(|s| s.score)
                .collect();
            let stats: Vec<NodeStats> = nodes.iter().map(|n| n.stats).collect();
            let bare = score_stats_to_start(&stats, |i| nodes[i].name.as_str(), &guest).unwrap();
            prop_assert_eq!(
                named.iter().map(|s| s.to_bits()).collect::<Vec<_>>(),
                bare.iter().map(|s| s.to_bits()).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn scores_from_stats_name_a_bad_node_by_the_given_name() {
        use crate::pve_crs::CrsError;
        let stats = [
            three_nodes_homogeneous()[0].stats,
            NodeStats {
                maxmem: 0,
                ..three_nodes_homogeneous()[1].stats
            },
        ];
        let e = score_stats_to_start(&stats, |i| ["a", "b"][i], &resource(0.0, 1.0, 0, GIB))
            .unwrap_err();
        assert!(
            matches!(&e, CrsError::Node { node, .. } if node == "b"),
            "{e:?}"
        );
    }
}
