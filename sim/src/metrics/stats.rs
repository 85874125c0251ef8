//! Summary statistics with the definitions load generators use.

use serde::Serialize;

/// Mean and percentiles of a metric, in the metric's unit. Percentiles interpolate linearly
/// between order statistics, as numpy's default (and so vLLM's benchmark_serving) does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Dist {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

/// Percentile `p` (0–100) of sorted values, linearly interpolated.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let frac = rank - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

impl Dist {
    /// Statistics of `values` (sorted in place). Empty input gives all zeros.
    pub fn of(values: &mut [f64]) -> Dist {
        if values.is_empty() {
            return Dist::default();
        }
        values.sort_unstable_by(|a, b| a.total_cmp(b));
        let n = values.len();
        Dist {
            count: n as u64,
            mean: values.iter().sum::<f64>() / n as f64,
            p50: percentile_sorted(values, 50.0),
            p90: percentile_sorted(values, 90.0),
            p95: percentile_sorted(values, 95.0),
            p99: percentile_sorted(values, 99.0),
            max: values[n - 1],
        }
    }

    /// Statistics of a multiset given as (value, multiplicity) pairs, identical to expanding
    /// every pair and calling [`Dist::of`]. Used for inter-token latencies, where one
    /// iteration's gap is shared by every request in the batch.
    pub fn of_weighted(pairs: &mut [(f64, u64)]) -> Dist {
        let n: u64 = pairs.iter().map(|p| p.1).sum();
        if n == 0 {
            return Dist::default();
        }
        pairs.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        // The value at 0-based position k of the expanded sorted list.
        let at = |k: u64| -> f64 {
            let mut seen = 0u64;
            for &(v, w) in pairs.iter() {
                seen += w;
                if k < seen {
                    return v;
                }
            }
            pairs[pairs.len() - 1].0
        };
        let pct = |p: f64| {
            let rank = p / 100.0 * (n - 1) as f64;
            let lo = rank.floor() as u64;
            let hi = rank.ceil() as u64;
            let (a, b) = (at(lo), at(hi));
            a + (b - a) * (rank - lo as f64)
        };
        let sum: f64 = pairs.iter().map(|&(v, w)| v * w as f64).sum();
        Dist {
            count: n,
            mean: sum / n as f64,
            p50: pct(50.0),
            p90: pct(90.0),
            p95: pct(95.0),
            p99: pct(99.0),
            max: pairs[pairs.len() - 1].0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_match_numpy_linear() {
        // numpy.percentile([1, 2, 3, 4, 10], [50, 90, 99]) = [3.0, 7.6, 9.76]
        let mut v = vec![10.0, 2.0, 4.0, 1.0, 3.0];
        let d = Dist::of(&mut v);
        assert_eq!(d.p50, 3.0);
        assert!((d.p90 - 7.6).abs() < 1e-12);
        assert!((d.p99 - 9.76).abs() < 1e-12);
        assert_eq!(d.mean, 4.0);
        assert_eq!(d.max, 10.0);
    }

    #[test]
    fn weighted_equals_expanded() {
        let mut pairs = vec![(5.0, 3u64), (1.0, 2), (9.0, 1), (2.0, 4)];
        let mut expanded: Vec<f64> = pairs.iter().flat_map(|&(v, w)| std::iter::repeat_n(v, w as usize)).collect();
        let a = Dist::of_weighted(&mut pairs);
        let b = Dist::of(&mut expanded);
        assert_eq!(a, b);
    }

    #[test]
    fn empty_is_zero() {
        assert_eq!(Dist::of(&mut []), Dist::default());
        assert_eq!(Dist::of_weighted(&mut []), Dist::default());
    }
}
