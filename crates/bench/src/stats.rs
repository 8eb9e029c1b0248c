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

/// The lower and upper quartiles of `values` (Tukey's hinges: the medians
/// of the lower and upper halves, each with the median for an odd count);
/// `(0, 0)` for none. NaNs sort last.
pub(crate) fn quartiles(values: &[f64]) -> (f64, f64) {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let half = n.div_ceil(2);
    (
        median(v[..half].iter().copied()),
        median(v[n - half..].iter().copied()),
    )
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
    fn quartiles() {
        assert_eq!(super::quartiles(&[3.0, 1.0, 2.0]), (1.5, 2.5));
        assert_eq!(
            super::quartiles(&[7.0, 1.0, 2.0, 6.0, 3.0, 5.0, 4.0]),
            (2.5, 5.5)
        );
        assert_eq!(super::quartiles(&[4.0, 1.0, 2.0, 3.0]), (1.5, 3.5));
        assert_eq!(super::quartiles(&[2.0]), (2.0, 2.0));
        assert_eq!(super::quartiles(&[]), (0.0, 0.0));
    }
}
