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

#[cfg(test)]
mod tests {
    #[test]
    fn median() {
        assert_eq!(super::median([3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median([4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(super::median(std::iter::empty()), 0.0);
    }
}
