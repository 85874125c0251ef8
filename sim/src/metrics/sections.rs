//! `[slo]` and `[metrics]`: what a request must meet, and which requests count. The metrics
//! own these sections: the recorder, the summary and the comparisons read them.

use serde::{Deserialize, Serialize};

use crate::config::{check, ConfigError};

/// `[slo]`: per-request latency thresholds. A request meets the SLO when it finished and met
/// every threshold given; rejected requests miss.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SloSection {
    /// Time to first token, ms.
    pub ttft_ms: Option<f64>,
    /// Time per output token after the first, ms.
    pub tpot_ms: Option<f64>,
    /// End-to-end latency, ms.
    pub e2e_ms: Option<f64>,
    /// Required fraction of requests meeting the SLO (for `plan`). Default 0.99.
    pub attainment: f64,
}

impl Default for SloSection {
    fn default() -> Self {
        SloSection { ttft_ms: None, tpot_ms: None, e2e_ms: None, attainment: 0.99 }
    }
}

impl SloSection {
    /// The SLO, the one definition (summaries, plans, comparisons): a finished request meets it
    /// when each latency it has is within its threshold (a one-token output has no TPOT, so
    /// only its TTFT and E2E count).
    pub fn met_by(&self, ttft_ms: Option<f64>, tpot_ms: Option<f64>, e2e_ms: Option<f64>) -> bool {
        let ok = |limit: Option<f64>, v: Option<f64>| match (limit, v) {
            (Some(l), Some(v)) => v <= l,
            _ => true,
        };
        ok(self.ttft_ms, ttft_ms) && ok(self.tpot_ms, tpot_ms) && ok(self.e2e_ms, e2e_ms)
    }

    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        for (key, v) in [("ttft_ms", self.ttft_ms), ("tpot_ms", self.tpot_ms), ("e2e_ms", self.e2e_ms)] {
            if let Some(v) = v {
                check(v.is_finite() && v > 0.0, path, key, "must be > 0", v)?;
            }
        }
        check(self.attainment > 0.0 && self.attainment <= 1.0, path, "attainment", "must be in (0, 1]", self.attainment)
    }
}

/// `[metrics]`: which requests count and how the time series is cut.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsSection {
    /// Requests arriving in the first `warmup_s` seconds are left out of the statistics.
    pub(crate) warmup_s: f64,
    /// Requests arriving in the last `cooldown_s` seconds of the workload are left out.
    pub(crate) cooldown_s: f64,
    /// Width of a time-series window, seconds. Default 1.
    pub window_s: f64,
}

impl Default for MetricsSection {
    fn default() -> Self {
        MetricsSection { warmup_s: 0.0, cooldown_s: 0.0, window_s: 1.0 }
    }
}

impl MetricsSection {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        check(self.warmup_s.is_finite() && self.warmup_s >= 0.0, path, "warmup_s", "must be ≥ 0", self.warmup_s)?;
        check(
            self.cooldown_s.is_finite() && self.cooldown_s >= 0.0,
            path,
            "cooldown_s",
            "must be ≥ 0",
            self.cooldown_s,
        )?;
        check(self.window_s.is_finite() && self.window_s >= 0.001, path, "window_s", "must be ≥ 0.001", self.window_s)
    }
}
