//! A buyer's figures for a sized candidate: what it costs at the minimum and the recommended
//! counts, by the hour and the month, per million output tokens, and the output each GPU gives.

use serde::{Deserialize, Serialize};

use super::CandidateResult;

/// Hours in a month: 8,760 / 12.
pub const HOURS_PER_MONTH: f64 = 730.0;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Economics {
    /// $/h at the minimum count that meets the SLO (`None`: no price for the GPU).
    pub cost_per_hour_min: Option<f64>,
    /// $/h at the recommended count (with headroom and spares).
    pub cost_per_hour: Option<f64>,
    /// The recommended count's $/h over a month of [`HOURS_PER_MONTH`].
    pub cost_per_month: Option<f64>,
    /// Output tokens delivered per second at the recommended count: the lowest over the seeds
    /// (`None` for a disaggregated candidate, whose pools are sized as pairs).
    pub output_tokens_per_s: Option<f64>,
    /// That, per GPU of the recommended count.
    pub output_tokens_per_s_per_gpu: Option<f64>,
    /// $ per million output tokens: the recommended count's $/h over the tokens it delivers
    /// in an hour at that rate.
    pub usd_per_million_output_tokens: Option<f64>,
}

/// The figures of a feasible candidate (`None` otherwise).
pub(crate) fn economics(c: &CandidateResult) -> Option<Economics> {
    if !c.feasible {
        return None;
    }
    let (n_min, n, gpus) = (c.instances_min?, c.instances?, c.gpus?);
    let per_instance = c.cost_per_hour.map(|x| x / n as f64);
    // The recommended count's own runs; the minimum's when the two counts are one.
    let point = match &c.provisioned {
        Some(p) => Some(&p.point),
        None => c.points.iter().find(|p| p.instances == n),
    };
    let tokens = point
        .filter(|_| c.pools.is_none())
        .and_then(|p| p.seeds.iter().map(|s| s.output_tokens_per_s).reduce(f64::min));
    Some(Economics {
        cost_per_hour_min: per_instance.map(|x| x * n_min as f64),
        cost_per_hour: c.cost_per_hour,
        cost_per_month: c.cost_per_hour.map(|x| x * HOURS_PER_MONTH),
        output_tokens_per_s: tokens,
        output_tokens_per_s_per_gpu: tokens.map(|t| t / gpus as f64),
        usd_per_million_output_tokens: c
            .cost_per_hour
            .zip(tokens)
            .filter(|(_, t)| *t > 0.0)
            .map(|(x, t)| x / (t * 3600.0) * 1e6),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::search::AtCount;
    use crate::plan::{Point, SeedResult};

    #[test]
    fn hand_computed_figures() {
        // 5 instances of 2 GPUs at $3/GPU-h = $30/h (4 at the minimum: $24/h); $21,900 a
        // month; 5,000 output tokens/s (the lower seed) is 500 per GPU and 18 M tokens an
        // hour: $30 / 18 = $1.667 per million.
        let seed = |t: f64| SeedResult { output_tokens_per_s: t, ..Default::default() };
        let c = CandidateResult {
            feasible: true,
            instances_min: Some(4),
            instances: Some(5),
            gpus: Some(10),
            cost_per_hour: Some(30.0),
            provisioned: Some(AtCount::of(Point { instances: 5, seeds: vec![seed(5_000.0), seed(6_000.0)] })),
            ..CandidateResult::named("c")
        };
        let e = economics(&c).unwrap();
        assert_eq!(e.cost_per_hour_min, Some(24.0));
        assert_eq!(e.cost_per_month, Some(21_900.0));
        assert_eq!(e.output_tokens_per_s, Some(5_000.0));
        assert_eq!(e.output_tokens_per_s_per_gpu, Some(500.0));
        assert!((e.usd_per_million_output_tokens.unwrap() - 30.0 / 18.0).abs() < 1e-12);
        // Unpriced: the tokens only. Infeasible: nothing.
        let e = economics(&CandidateResult { cost_per_hour: None, ..c.clone() }).unwrap();
        assert_eq!((e.cost_per_hour_min, e.usd_per_million_output_tokens), (None, None));
        assert_eq!(e.output_tokens_per_s_per_gpu, Some(500.0));
        assert!(economics(&CandidateResult { feasible: false, ..c }).is_none());
    }
}
