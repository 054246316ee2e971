//! Proxmox's node imbalance: the coefficient of variation of node loads (docs/proxmox-behaviour.md
//! §2.3).
//!
//! A node's load is `(cpu/maxcpu + mem/maxmem) / 2`, CPU and memory weighed equally (unlike the
//! TOPSIS criteria). Over n nodes, the raw imbalance is the population standard deviation of the
//! loads divided by their mean; it is 0 with fewer than 2 nodes or no load at all. Crate 2.1.0 divides
//! it by √(n−1), its maximum (all load on one node), so the normalised figure lies in 0..=1. Both
//! are given: ha-manager 5.2.0's logs and thresholds use the raw one. The factor is constant for a
//! given n, so choices between moves do not depend on which is used. Sums run in input order.

use serde::Serialize;

use super::error::{CrsError, CrsResult};
use super::stats::{NodeUsage, check_nodes};

/// A cluster's imbalance, normalised and raw.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Imbalance {
    /// Coefficient of variation divided by √(n−1): 0 is perfect balance, 1 all load on one node.
    pub normalized: f64,
    /// The coefficient of variation itself (0..=√(n−1)).
    pub raw: f64,
}

impl Imbalance {
    /// The imbalance of these nodes' loads ([`super::NodeStats::load`]).
    ///
    /// Fails on nodes that cannot be scored (zero capacity, duplicates), naming them.
    pub fn of_nodes(nodes: &[NodeUsage]) -> CrsResult<Self> {
        check_nodes(nodes)?;
        Ok(of_checked_loads(nodes.iter().map(|n| n.stats.load())))
    }

    /// The imbalance of per-node loads given directly.
    ///
    /// Fails on a negative or non-finite load, naming its position.
    pub fn of_loads(loads: &[f64]) -> CrsResult<Self> {
        if let Some((index, &load)) = loads
            .iter()
            .enumerate()
            .find(|(_, l)| !(l.is_finite() && **l >= 0.0))
        {
            return Err(CrsError::Load { index, load });
        }
        Ok(of_checked_loads(loads.iter().copied()))
    }

    /// The raw coefficient of variation that a normalised imbalance over `nodes` nodes stands for.
    pub fn raw_from_normalized(normalized: f64, nodes: usize) -> f64 {
        normalized * max_cv(nodes)
    }
}

/// The upper bound of the coefficient of variation over `nodes` nodes: √(n−1).
fn max_cv(nodes: usize) -> f64 {
    (nodes.saturating_sub(1) as f64).sqrt()
}

/// The imbalance of loads already known to be finite and not negative.
pub(crate) fn of_checked_loads(loads: impl ExactSizeIterator<Item = f64> + Clone) -> Imbalance {
    const BALANCED: Imbalance = Imbalance {
        normalized: 0.0,
        raw: 0.0,
    };
    let n = loads.len();
    if n < 2 {
        return BALANCED;
    }
    let sum: f64 = loads.clone().sum();
    // No load anywhere: perfectly balanced, and the mean would divide by zero.
    if sum == 0.0 {
        return BALANCED;
    }
    let mean = sum / n as f64;
    let squared_deviations = loads.fold(0.0, |acc, load| {
        let d = load - mean;
        acc + d * d
    });
    let cv = (squared_deviations / n as f64).sqrt() / mean;
    Imbalance {
        normalized: cv / max_cv(n),
        raw: cv,
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::super::testutil::*;
    use super::*;

    #[test]
    fn empty_and_single_and_equal_clusters_are_balanced() {
        assert_eq!(Imbalance::of_nodes(&[]).unwrap().normalized, 0.0);
        // The "perfectly balanced" node of upstream's test, alone and three times.
        let one = node("node1", 1.7, 16.0, 224395264, 68719476736);
        let zero = Imbalance {
            normalized: 0.0,
            raw: 0.0,
        };
        assert_eq!(
            Imbalance::of_nodes(std::slice::from_ref(&one)).unwrap(),
            zero
        );
        let three = ["node1", "node2", "node3"].map(|name| NodeUsage::new(name, one.stats));
        assert_eq!(Imbalance::of_nodes(&three).unwrap(), zero);
        assert_eq!(Imbalance::of_loads(&[0.0, 0.0, 0.0]).unwrap(), zero);
    }

    /// The imbalances of `tests/scheduler.rs` in `proxmox-resource-scheduling`
    /// (docs/proxmox-behaviour.md §4): normalised from crate 2.1.0, raw before it. Exact: both sum
    /// the loads in node order.
    #[test]
    fn fixture_imbalances_match_proxmox_exactly() {
        let homogeneous = Imbalance::of_nodes(&three_nodes_homogeneous()).unwrap();
        assert_eq!(homogeneous.normalized, 0.3460548572604576);
        assert_eq!(homogeneous.raw, 0.4893954724628247);
        let heterogeneous = Imbalance::of_nodes(&three_nodes_heterogeneous()).unwrap();
        assert_eq!(heterogeneous.normalized, 0.23352917788066363);
        assert_eq!(heterogeneous.raw, 0.33026013056867354);
    }

    #[test]
    fn all_load_on_one_node_is_the_maximum() {
        // ha-manager's logs show √2 (1.41) for all load on one of three nodes.
        let imbalance = Imbalance::of_loads(&[0.6, 0.0, 0.0]).unwrap();
        assert!((imbalance.normalized - 1.0).abs() < 1e-15);
        assert!((imbalance.raw - 2f64.sqrt()).abs() < 1e-15);
        assert_eq!(
            Imbalance::raw_from_normalized(imbalance.normalized, 3),
            imbalance.normalized * 2f64.sqrt()
        );
        // Raw 0.3 (ha-manager 5.2.0's default threshold) is 0.212 normalised on three nodes.
        assert_eq!(format!("{:.3}", 0.3 / 2f64.sqrt()), "0.212");
    }

    #[test]
    fn bad_loads_and_nodes_are_named_errors() {
        let err = Imbalance::of_loads(&[0.1, f64::NAN]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "load #1 is NaN, expected a finite number >= 0"
        );
        assert!(Imbalance::of_loads(&[-0.5, 0.5]).is_err());
        let mut nodes = three_nodes_homogeneous();
        nodes[2].stats.maxcpu = 0.0;
        assert_eq!(
            Imbalance::of_nodes(&nodes).unwrap_err().to_string(),
            "node node3: maxcpu is 0, expected a number of cores above 0"
        );
    }
}
