//! TOPSIS: ranking alternatives by their closeness to an ideal, over weighted criteria.
//!
//! The generic engine behind Proxmox's start scoring and its `topsis` balancing method
//! (docs/proxmox-behaviour.md §1.5). Each column (criterion) is divided by its L2 norm over the
//! alternatives (an all-zero column stays as is); weights are divided by the sum of their absolute
//! values, and a negative weight means "smaller is better". The ideal best and worst take, per
//! criterion, the best and worst value found; an alternative's distances to them weigh each
//! difference by the criterion's weight. Its score is `d_worst / (d_best + d_worst)` in 0..=1,
//! higher is better, and 0 when both distances are 0 (all alternatives equal). Nothing here knows
//! about nodes.

use super::error::{CrsError, CrsResult};

/// One criterion: a name for errors and explanations, and a signed weight.
#[derive(Debug, Clone, PartialEq)]
pub struct Criterion {
    name: String,
    weight: f64,
}

impl Criterion {
    /// A criterion; a negative `weight` means the criterion is minimised.
    pub fn new(name: impl Into<String>, weight: f64) -> Self {
        Self {
            name: name.into(),
            weight,
        }
    }
}

/// `N` criteria with their weights normalised; built once, used for any number of matrices.
#[derive(Debug, Clone, PartialEq)]
pub struct Criteria<const N: usize> {
    names: [String; N],
    /// Normalised absolute weights, summing to 1.
    weights: [f64; N],
    maximize: [bool; N],
}

impl<const N: usize> Criteria<N> {
    /// Normalises the weights by the sum of their absolute values.
    ///
    /// Fails on a non-finite weight, or when every weight is zero.
    pub fn new(criteria: [Criterion; N]) -> CrsResult<Self> {
        let mut divisor = 0.0;
        for c in &criteria {
            if !c.weight.is_finite() {
                return Err(CrsError::Weight {
                    criterion: c.name.clone(),
                    weight: c.weight,
                });
            }
            divisor += c.weight.abs();
        }
        if divisor == 0.0 {
            return Err(CrsError::ZeroWeights);
        }
        let mut weights = [0.0; N];
        let mut maximize = [true; N];
        for (i, c) in criteria.iter().enumerate() {
            let weight = c.weight.abs() / divisor;
            // Weights near f64::MAX overflow the sum; refuse rather than rank on garbage.
            if !(0.0..=1.0).contains(&weight) {
                return Err(CrsError::Weight {
                    criterion: c.name.clone(),
                    weight: c.weight,
                });
            }
            weights[i] = weight;
            maximize[i] = c.weight >= 0.0;
        }
        Ok(Self {
            names: criteria.map(|c| c.name),
            weights,
            maximize,
        })
    }

    /// The criteria's names, in column order.
    pub fn names(&self) -> &[String; N] {
        &self.names
    }

    /// The normalised weights (absolute values summing to 1), in column order.
    pub fn weights(&self) -> &[f64; N] {
        &self.weights
    }
}

/// Euclidean length, summed in order so that results are reproducible bit for bit.
fn l2_norm(values: impl IntoIterator<Item = f64>) -> f64 {
    values.into_iter().fold(0.0, |sum, v| sum + v * v).sqrt()
}

/// Scores each alternative (row of `matrix`) against `criteria`; 0..=1, higher is better.
///
/// Fails if an entry is not finite, a column cannot be normalised, or a score is not finite.
/// An empty matrix gives no scores.
pub fn score<const N: usize>(matrix: &[[f64; N]], criteria: &Criteria<N>) -> CrsResult<Vec<f64>> {
    if matrix.is_empty() {
        return Ok(Vec::new());
    }
    let mut normalized = matrix.to_vec();
    for col in 0..N {
        let bad = |alternative: usize, value: f64| CrsError::Value {
            alternative,
            criterion: criteria.names[col].clone(),
            value,
        };
        if let Some((row, v)) = matrix.iter().enumerate().find(|(_, r)| !r[col].is_finite()) {
            return Err(bad(row, v[col]));
        }
        let divisor = l2_norm(matrix.iter().map(|r| r[col]));
        if !divisor.is_finite() {
            // Finite entries whose squares overflow: normalising would silently zero them.
            let (row, max) = matrix
                .iter()
                .enumerate()
                .map(|(i, r)| (i, r[col]))
                .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
                .unwrap_or((0, divisor));
            return Err(bad(row, max));
        }
        // An all-zero column says nothing; leave it so it adds no distance.
        if divisor != 0.0 {
            for row in normalized.iter_mut() {
                row[col] /= divisor;
            }
        }
    }

    let mut best = [0.0; N];
    let mut worst = [0.0; N];
    for col in 0..N {
        let (mut min, mut max) = (normalized[0][col], normalized[0][col]);
        for row in &normalized[1..] {
            min = f64::min(min, row[col]);
            max = f64::max(max, row[col]);
        }
        (best[col], worst[col]) = if criteria.maximize[col] {
            (max, min)
        } else {
            (min, max)
        };
    }

    let weighted_distance = |row: &[f64; N], ideal: &[f64; N]| {
        l2_norm((0..N).map(|col| (row[col] - ideal[col]) * criteria.weights[col]))
    };
    let mut scores = Vec::with_capacity(normalized.len());
    for (alternative, row) in normalized.iter().enumerate() {
        let to_best = weighted_distance(row, &best);
        let to_worst = weighted_distance(row, &worst);
        let total = to_best + to_worst;
        // Zero only when the alternative is both ideals at once: every alternative is the same.
        let score = if total == 0.0 { 0.0 } else { to_worst / total };
        if !score.is_finite() {
            return Err(CrsError::Score { alternative, score });
        }
        scores.push(score);
    }
    Ok(scores)
}

/// Indices of `scores` from best to worst; equal scores keep their input order.
pub fn rank_scores(scores: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    // sort_by is stable: ties keep input order, as Proxmox's ranking does.
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    order
}

/// Indices of the alternatives of `matrix` from best to worst; ties keep input order.
pub fn rank<const N: usize>(matrix: &[[f64; N]], criteria: &Criteria<N>) -> CrsResult<Vec<usize>> {
    Ok(rank_scores(&score(matrix, criteria)?))
}

#[cfg(test)]
mod tests {
    //! The cases of `proxmox-resource-scheduling`'s `tests/topsis.rs` (docs/proxmox-behaviour.md
    //! §4): the same matrices, weights and expected index rankings, so that both engines agree.

    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn criteria<const N: usize>(weights: [f64; N]) -> Criteria<N> {
        let mut i = 0;
        Criteria::new(weights.map(|w| {
            i += 1;
            Criterion::new(format!("c{i}"), w)
        }))
        .unwrap()
    }

    fn ranked<const N: usize>(matrix: &[[f64; N]], weights: [f64; N]) -> Vec<usize> {
        rank(matrix, &criteria(weights)).unwrap()
    }

    #[test]
    fn single_criterion() {
        // (matrix, ranking when maximised, ranking when minimised)
        type Case<'a> = (&'a [[f64; 1]], [usize; 5], [usize; 5]);
        let cases: [Case; 2] = [
            (
                &[[1.0], [2.0], [5.0], [3.0], [4.0]],
                [2, 4, 3, 1, 0],
                [0, 1, 3, 4, 2],
            ),
            (
                &[[-2.0], [-5.0], [-4.0], [1.0], [-3.0]],
                [3, 0, 4, 2, 1],
                [1, 2, 4, 0, 3],
            ),
        ];
        for (matrix, max, min) in cases {
            assert_eq!(ranked(matrix, [1.0]), max, "maximise {matrix:?}");
            assert_eq!(ranked(matrix, [-1.0]), min, "minimise {matrix:?}");
        }
        for w in [1.0, -1.0] {
            assert_eq!(ranked(&[[0.0]], [w]), [0]);
            assert_eq!(
                ranked(&[[0.0], [2.0]], [w]),
                if w > 0.0 { [1, 0] } else { [0, 1] }
            );
            assert_eq!(
                ranked(&[[1.0], [2.0]], [w]),
                if w > 0.0 { [1, 0] } else { [0, 1] }
            );
        }
    }

    #[test]
    fn two_criteria() {
        const MAX_MIN: [f64; 2] = [1.0, -1.0];
        const MIN_MAX: [f64; 2] = [-1.0, 1.0];
        const MIN_MIN: [f64; 2] = [-1.0, -1.0];
        const MAX_MAX: [f64; 2] = [1.0, 1.0];
        for w in [MAX_MIN, MIN_MAX, MIN_MIN, MAX_MAX] {
            assert_eq!(ranked(&[[0.0, 0.0]], w), [0]);
        }

        let square = [[0.0, 1.0], [1.0, 0.0], [1.0, -1.0], [1.0, 1.0], [0.0, 0.0]];
        assert_eq!(ranked(&square, MAX_MIN), [2, 1, 4, 3, 0]);
        assert_eq!(ranked(&square, MIN_MAX), [0, 3, 4, 1, 2]);
        assert_eq!(ranked(&square, MIN_MIN), [2, 4, 1, 0, 3]);
        assert_eq!(ranked(&square, MAX_MAX), [3, 0, 1, 4, 2]);

        // Upstream cross-checked this one against decision-radar.com.
        let spread = [
            [7.0, 4.0],
            [1.0, 0.5],
            [-1.0, -1.0],
            [-8.5, 11.5],
            [4.0, 7.0],
        ];
        assert_eq!(ranked(&spread, MAX_MIN), [0, 1, 4, 2, 3]);
        assert_eq!(ranked(&spread, MIN_MAX), [3, 2, 4, 1, 0]);
        assert_eq!(ranked(&spread, MIN_MIN), [2, 3, 1, 0, 4]);
        assert_eq!(ranked(&spread, MAX_MAX), [4, 0, 1, 3, 2]);
    }

    #[test]
    fn three_criteria() {
        const FIRST: [f64; 3] = [10.0, 0.2, 0.1];
        const SECOND: [f64; 3] = [0.2, 10.0, 0.1];
        const THIRD: [f64; 3] = [0.2, 0.1, 10.0];
        const MIN: [f64; 3] = [-10.0, -5.0, 0.1];

        let identity = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
        // Column normalisation makes a scaled column rank the same as the unscaled one.
        let scaled = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1000.0]];
        for matrix in [identity, scaled] {
            assert_eq!(ranked(&matrix, FIRST), [0, 1, 2], "{matrix:?}");
            assert_eq!(ranked(&matrix, SECOND), [1, 0, 2], "{matrix:?}");
            assert_eq!(ranked(&matrix, THIRD), [2, 0, 1], "{matrix:?}");
            assert_eq!(ranked(&matrix, MIN), [2, 1, 0], "{matrix:?}");
        }

        let negative = [[-1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, 1.0]];
        assert_eq!(ranked(&negative, FIRST), [2, 1, 0]);
        assert_eq!(ranked(&negative, SECOND), [2, 0, 1]);
        assert_eq!(ranked(&negative, THIRD), [2, 1, 0]);
        assert_eq!(ranked(&negative, MIN), [0, 1, 2]);
    }

    #[test]
    fn nan_in_matrix_is_an_error_naming_the_cell() {
        let c = criteria([1.0, 1.0, 1.0]);
        let matrix = [[-1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, f64::NAN, 1.0]];
        let err = score(&matrix, &c).unwrap_err();
        assert!(
            matches!(&err, CrsError::Value { alternative: 2, criterion, value }
                if criterion == "c2" && value.is_nan()),
            "got {err:?}"
        );
        assert!(score(&[[f64::INFINITY]], &criteria([1.0])).is_err());
        // Finite values whose squares overflow cannot be normalised either.
        assert!(score(&[[f64::MAX], [1.0]], &criteria([1.0])).is_err());
    }

    #[test]
    fn zero_weights_are_an_error() {
        let zero = Criteria::new([
            Criterion::new("z", 0.0),
            Criterion::new("e", 0.0),
            Criterion::new("ro", 0.0),
        ]);
        assert_eq!(zero.unwrap_err(), CrsError::ZeroWeights);
        let nan = Criteria::new([Criterion::new("n", f64::NAN)]).unwrap_err();
        assert_eq!(
            nan.to_string(),
            "TOPSIS criterion 'n' has invalid weight NaN"
        );

        // A zero column among weighted ones is fine: it adds no distance.
        let matrix = [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
        assert_eq!(ranked(&matrix, [10.0, 0.2, 0.1]), [1, 2, 0]);
    }

    #[test]
    fn weights_normalise_by_absolute_sum() {
        let c = criteria([-1.0, -2.0, -5.0, -10.0]);
        assert_eq!(
            c.weights(),
            &[1.0 / 18.0, 2.0 / 18.0, 5.0 / 18.0, 10.0 / 18.0]
        );
    }

    #[test]
    fn scores_are_zero_and_one_for_two_distinct_and_zero_for_equal() {
        let c = criteria([-1.0, -2.0]);
        assert_eq!(score(&[[1.0, 2.0], [2.0, 3.0]], &c).unwrap(), [1.0, 0.0]);
        assert_eq!(score(&[[1.0, 2.0], [1.0, 2.0]], &c).unwrap(), [0.0, 0.0]);
        assert_eq!(score::<2>(&[], &c).unwrap(), Vec::<f64>::new());
    }

    #[test]
    fn ranking_is_stable_for_ties() {
        assert_eq!(rank_scores(&[0.5, 1.0, 0.5, 1.0, 0.0]), [1, 3, 0, 2, 4]);
    }
}
