//! Summary statistics with the definitions load generators use.

use serde::{Deserialize, Serialize};

/// Mean and percentiles of a metric, in the metric's unit. Percentiles interpolate linearly
/// between order statistics, as numpy's default (and so vLLM's benchmark_serving) does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
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

/// A histogram of positive durations (ns) with log-spaced buckets 0.1% wide: constant memory
/// however many samples, exact count, mean and max, percentiles within 0.1% of the exact
/// (numpy-linear) value. Inter-token gaps go here: there is one per token, too many to keep.
/// The buckets are one dense run of counts from the lowest seen (a run's gaps span a few
/// thousand buckets at most: 27,631 cover 1 ns to 10³ s), so adding a sample is an index.
#[derive(Clone, Debug, Default)]
pub struct LogHistogram {
    /// Samples per bucket, from bucket `first`.
    counts: Vec<u64>,
    first: u32,
    count: u64,
    sum_ns: u128,
    max_ns: u64,
}

const LOG_BASE: f64 = 1.001;

impl LogHistogram {
    fn bucket(ns: u64) -> u32 {
        // Non-negative: the cast truncates as `floor` would.
        ((ns.max(1) as f64).ln() / LOG_BASE.ln()) as u32
    }

    /// The representative value of a bucket: its geometric midpoint.
    fn value(bucket: u32) -> f64 {
        LOG_BASE.powf(bucket as f64 + 0.5)
    }

    /// Adds `count` samples of `ns` nanoseconds.
    pub fn add(&mut self, ns: u64, count: u64) {
        if count == 0 {
            return;
        }
        let b = Self::bucket(ns);
        if self.counts.is_empty() {
            self.first = b;
        } else if b < self.first {
            // Extend downwards, by at least as many buckets as are held (amortised growth).
            let more = (self.first - b).max(self.counts.len() as u32).min(self.first);
            self.counts.splice(0..0, std::iter::repeat_n(0, more as usize));
            self.first -= more;
        }
        let i = (b - self.first) as usize;
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += count;
        self.count += count;
        self.sum_ns += ns as u128 * count as u128;
        self.max_ns = self.max_ns.max(ns);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Statistics in milliseconds.
    pub fn dist_ms(&self) -> Dist {
        if self.count == 0 {
            return Dist::default();
        }
        let mut pairs: Vec<(f64, u64)> = (self.first..)
            .zip(&self.counts)
            .filter(|&(_, &n)| n > 0)
            .map(|(b, &n)| (Self::value(b) / 1e6, n))
            .collect();
        let mut d = Dist::of_weighted(&mut pairs);
        d.mean = self.sum_ns as f64 / self.count as f64 / 1e6;
        d.max = self.max_ns as f64 / 1e6;
        // Keep percentiles inside [min bucket, max] so p99 never exceeds the true maximum.
        d.p50 = d.p50.min(d.max);
        d.p90 = d.p90.min(d.max);
        d.p95 = d.p95.min(d.max);
        d.p99 = d.p99.min(d.max);
        d
    }
}

#[cfg(test)]
mod histogram_tests {
    use super::*;

    #[test]
    fn histogram_percentiles_are_within_a_tenth_of_a_percent() {
        let mut h = LogHistogram::default();
        let mut exact = vec![];
        // A spread of gaps from 1 µs to 1 s, some repeated.
        let mut x: u64 = 12345;
        for i in 0..20_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let ns = 1_000 + (x >> 33) % 1_000_000_000;
            let n = 1 + i % 3;
            h.add(ns, n);
            for _ in 0..n {
                exact.push(ns as f64 / 1e6);
            }
        }
        let a = h.dist_ms();
        let b = Dist::of(&mut exact);
        // The dense buckets grew downwards and upwards as the samples came.
        assert!(h.counts.len() > 1000 && h.counts.iter().sum::<u64>() == h.count);
        assert_eq!(a.count, b.count);
        assert!((a.mean / b.mean - 1.0).abs() < 1e-12);
        assert_eq!(a.max, b.max);
        for (x, y) in [(a.p50, b.p50), (a.p90, b.p90), (a.p95, b.p95), (a.p99, b.p99)] {
            assert!((x / y - 1.0).abs() < 1e-3, "{x} vs {y}");
        }
    }
}
