//! Shared score rescaling to 0..=100.

/// Proportional to the best: the best gets 100, a node with half its raw score 50. Negative raw
/// scores fall back to `min_max`; all-zero scores stay 0.
pub fn by_max(scores: &mut [f64]) {
    let min = scores.iter().copied().fold(f64::INFINITY, f64::min);
    if min < 0.0 {
        return min_max(scores);
    }
    let max = scores.iter().copied().fold(0.0, f64::max);
    if max > 0.0 {
        for s in scores.iter_mut() {
            *s = 100.0 * *s / max;
        }
    }
}

/// The best gets 100, the worst 0, the rest in between; if all are equal, all get 100.
pub fn min_max(scores: &mut [f64]) {
    let min = scores.iter().copied().fold(f64::INFINITY, f64::min);
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = max - min;
    for s in scores.iter_mut() {
        *s = if span > 0.0 {
            100.0 * (*s - min) / span
        } else {
            100.0
        };
    }
}

/// Left as they are: for scorers whose raw scores are already 0..=100.
pub fn as_is(_scores: &mut [f64]) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_max_is_proportional_and_min_max_spans() {
        let mut a = [10.0, 5.0, 0.0];
        by_max(&mut a);
        assert_eq!(a, [100.0, 50.0, 0.0]);
        let mut b = [-2.0, 0.0, 2.0];
        by_max(&mut b);
        assert_eq!(b, [0.0, 50.0, 100.0]);
        let mut c = [3.0, 3.0];
        min_max(&mut c);
        assert_eq!(c, [100.0, 100.0]);
        let mut d = [0.0, 0.0];
        by_max(&mut d);
        assert_eq!(d, [0.0, 0.0]);
    }
}
