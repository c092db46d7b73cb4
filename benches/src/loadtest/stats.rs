//! Medians and ratios over rounds.

/// The median of `values` (mean of the middle two for an even count);
/// `None` when empty. NaNs are ignored.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

/// `a / b`, or `None` when either is not a positive finite number.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (a.is_finite() && b.is_finite() && a >= 0.0 && b > 0.0).then(|| a / b)
}

/// Median, minimum and maximum of the per-round ratios `a[i] / b[i]`.
///
/// Each round runs A and B back to back, so a per-round ratio cancels the
/// slow drift of a shared machine; its median is what the report calls the
/// ratio, and the min..max spread says how much to trust it.
pub fn paired_ratio(a: &[f64], b: &[f64]) -> Option<RatioSpread> {
    let ratios: Vec<f64> = a.iter().zip(b).filter_map(|(x, y)| ratio(*x, *y)).collect();
    Some(RatioSpread {
        median: median(&ratios)?,
        min: ratios.iter().copied().fold(f64::INFINITY, f64::min),
        max: ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    })
}

/// A ratio with its spread over rounds.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RatioSpread {
    /// Median of the per-round ratios.
    pub median: f64,
    /// Smallest per-round ratio.
    pub min: f64,
    /// Largest per-round ratio.
    pub max: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN, 7.0]), Some(7.0));
    }

    #[test]
    fn ratio_refuses_zero_and_non_finite_denominators() {
        assert_eq!(ratio(3.0, 2.0), Some(1.5));
        assert_eq!(ratio(3.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 2.0), None);
    }

    #[test]
    fn paired_ratio_is_the_median_of_round_ratios() {
        // Round 2 is slow for both servers; the paired ratio ignores that.
        let a = [110.0, 55.0, 120.0];
        let b = [100.0, 50.0, 100.0];
        let r = paired_ratio(&a, &b).unwrap();
        assert!((r.median - 1.1).abs() < 1e-9);
        assert!((r.min - 1.1).abs() < 1e-9);
        assert!((r.max - 1.2).abs() < 1e-9);
        assert_eq!(paired_ratio(&[1.0], &[0.0]), None);
    }
}
