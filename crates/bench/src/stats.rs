//! Small statistics helpers.

/// The median of `values` (mean of the middle two for an even count); 0 for
/// none. NaNs sort last.
pub(crate) fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.into_iter().collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Rounds below which [`median_interval`] gives no interval: with `n`
/// rounds, the smallest and largest cover the median with probability
/// `1 - 2 / 2^n`, under 95% for 5 or fewer.
pub(crate) const MIN_INTERVAL_ROUNDS: usize = 6;

/// A distribution-free 95% confidence interval of the median of `values`
/// (independent rounds, no assumption on their distribution): the order
/// statistics of ranks `floor((n - 1.96 sqrt n) / 2)` and
/// `ceil(1 + (n + 1.96 sqrt n) / 2)`, clamped to the smallest and largest
/// (ranks 40 and 61 of 100; the smallest and largest of 6 to 8). `None`
/// for fewer than [`MIN_INTERVAL_ROUNDS`]. NaNs sort last.
pub(crate) fn median_interval(values: &[f64]) -> Option<(f64, f64)> {
    let n = values.len();
    if n < MIN_INTERVAL_ROUNDS {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let half_width = 1.96 * (n as f64).sqrt();
    let low = (((n as f64 - half_width) / 2.0).floor() as usize).max(1);
    let high = ((1.0 + (n as f64 + half_width) / 2.0).ceil() as usize).min(n);
    Some((v[low - 1], v[high - 1]))
}

#[cfg(test)]
mod tests {
    #[test]
    fn median() {
        assert_eq!(super::median([3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median([4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(super::median(std::iter::empty()), 0.0);
    }

    #[test]
    fn median_interval() {
        // Too few rounds for 95%: no interval.
        assert_eq!(super::median_interval(&[1.0, 2.0, 3.0, 4.0, 5.0]), None);
        assert_eq!(super::median_interval(&[]), None);
        // 6 to 8 rounds: the smallest and the largest.
        let six = [6.0, 1.0, 5.0, 2.0, 4.0, 3.0];
        assert_eq!(super::median_interval(&six), Some((1.0, 6.0)));
        // 100 rounds: ranks 40 and 61.
        let hundred: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(super::median_interval(&hundred), Some((40.0, 61.0)));
        // 25 rounds: ranks 7 and 19 (the normal approximation is a little
        // wider than the exact 8 and 18: it errs towards "unsettled").
        let v: Vec<f64> = (1..=25).map(f64::from).collect();
        assert_eq!(super::median_interval(&v), Some((7.0, 19.0)));
    }
}
