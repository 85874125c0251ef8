//! `[fleet.autoscale]`: a horizontal autoscaler over one instance group.
//!
//! ```text
//!   every interval_s:  for each signal  value / target = ratio
//!                        |ratio − 1| ≤ tolerance          → keep the current count
//!                        request-rate                     → ⌈cluster rate / target_rps⌉
//!                        otherwise                        → ⌈ready × ratio⌉
//!                      desired = max over signals, clamped to [min, max]
//!   desired > current, scale_up_cooldown_s since the last scale-up   → start instances
//!                      (a draining one is taken back first; new ones pay the start-up delay)
//!   desired < current, scale_down_cooldown_s since the last change   → drain instances
//!                      (starting ones are cancelled first, then the least loaded ready ones)
//! ```
//! This is the Kubernetes Horizontal Pod Autoscaler's rule (desired = ⌈replicas × metric /
//! target⌉, a 10% tolerance, a sync period of 15 s and a scale-down stabilisation of 300 s by
//! default), over the signals an LLM serving stack exports. "current" counts every instance of
//! the group that is paid for and not draining: ready, starting, failed, restarting. The group
//! starts with its own count (`count`, or `[cluster] instances`); a count outside [min, max]
//! is brought within at the first tick.

use serde::{Deserialize, Serialize};

use super::check_s;
use crate::config::{check, ConfigError};
use crate::instance::InstanceGroup;
use crate::tagged_enum;

/// A load signal and its target value per instance.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub(crate) enum SignalSpec {
    Queue(QueueSignal),
    KvUtilization(KvSignal),
    TtftP99(TtftSignal),
    RequestRate(RateSignal),
}

tagged_enum!(SignalSpec {
    "queue" => Queue(QueueSignal),
    "kv-utilization" => KvUtilization(KvSignal),
    "ttft-p99" => TtftP99(TtftSignal),
    "request-rate" => RequestRate(RateSignal),
});

/// `{ kind = "queue", target = 4 }`: waiting requests per ready instance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueueSignal {
    pub(crate) target: f64,
}

/// `{ kind = "kv-utilization", target = 0.7 }`: mean fraction of KV blocks in use on ready
/// instances.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KvSignal {
    pub(crate) target: f64,
}

/// `{ kind = "ttft-p99", target_ms = 500, window_s = 60 }`: p99 TTFT of the first tokens of
/// the last `window_s` seconds (no first token in the window: no opinion).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TtftSignal {
    pub(crate) target_ms: f64,
    #[serde(default = "default_window_s")]
    pub(crate) window_s: f64,
}

/// `{ kind = "request-rate", target_rps = 5, window_s = 60 }`: arrivals per second at the
/// cluster over the last `window_s` seconds, against a target per instance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RateSignal {
    pub(crate) target_rps: f64,
    #[serde(default = "default_window_s")]
    pub(crate) window_s: f64,
}

fn default_window_s() -> f64 {
    60.0
}

/// `[fleet.autoscale]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutoscaleSection {
    /// Name of the group it scales. Default: the first (with one group, the only) group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) group: Option<String>,
    /// Fewest instances. Default 1.
    #[serde(default = "one")]
    pub(crate) min: u32,
    /// Most instances (required).
    pub(crate) max: u32,
    /// How often the autoscaler looks at its signals, s. Default 15.
    #[serde(default = "default_interval_s")]
    pub(crate) interval_s: f64,
    /// Relative deviation from a target that causes no change. Default 0.1.
    #[serde(default = "default_tolerance")]
    pub(crate) tolerance: f64,
    /// Least time between two scale-ups, s. Default 0.
    #[serde(default)]
    pub(crate) scale_up_cooldown_s: f64,
    /// Least time since the last scale-up or scale-down before a scale-down, s. Default 300.
    #[serde(default = "default_down_cooldown_s")]
    pub(crate) scale_down_cooldown_s: f64,
    /// The signals; the largest desired count wins.
    pub(crate) signals: Vec<SignalSpec>,
}

fn one() -> u32 {
    1
}
fn default_interval_s() -> f64 {
    15.0
}
fn default_tolerance() -> f64 {
    0.1
}
fn default_down_cooldown_s() -> f64 {
    300.0
}

impl AutoscaleSection {
    pub fn validate(&self, path: &str, groups: &[InstanceGroup]) -> Result<(), ConfigError> {
        if let Some(name) = &self.group {
            groups.iter().find(|g| &g.name == name).ok_or_else(|| {
                let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
                ConfigError::at(
                    &format!("{path}.group"),
                    format!("no group named \"{name}\"; groups: {}", names.join(", ")),
                )
            })?;
        }
        check((1..=100_000).contains(&self.min), path, "min", "must be in [1, 100000]", self.min)?;
        check(
            self.max >= self.min && self.max <= 100_000,
            path,
            "max",
            &format!("must be in [min ({}), 100000]", self.min),
            self.max,
        )?;
        check_s(path, "interval_s", self.interval_s, false)?;
        let t = self.tolerance;
        check(t.is_finite() && (0.0..1.0).contains(&t), path, "tolerance", "must be in [0, 1)", t)?;
        check_s(path, "scale_up_cooldown_s", self.scale_up_cooldown_s, true)?;
        check_s(path, "scale_down_cooldown_s", self.scale_down_cooldown_s, true)?;
        if self.signals.is_empty() {
            return Err(ConfigError::at(&format!("{path}.signals"), "must list at least one signal".into()));
        }
        for (i, s) in self.signals.iter().enumerate() {
            let p = format!("{path}.signals[{i}]");
            let pos = |key: &str, v: f64| check(v.is_finite() && v > 0.0 && v < 1e12, &p, key, "must be > 0", v);
            match s {
                SignalSpec::Queue(q) => pos("target", q.target)?,
                SignalSpec::KvUtilization(k) => {
                    check(k.target > 0.0 && k.target <= 1.0, &p, "target", "must be in (0, 1]", k.target)?
                }
                SignalSpec::TtftP99(t) => {
                    pos("target_ms", t.target_ms)?;
                    check_s(&p, "window_s", t.window_s, false)?;
                }
                SignalSpec::RequestRate(r) => {
                    pos("target_rps", r.target_rps)?;
                    check_s(&p, "window_s", r.window_s, false)?;
                }
            }
        }
        Ok(())
    }

    /// The longest window any signal looks back over, s.
    pub fn window_s(&self) -> f64 {
        self.signals
            .iter()
            .map(|s| match s {
                SignalSpec::TtftP99(t) => t.window_s,
                SignalSpec::RequestRate(r) => r.window_s,
                _ => 0.0,
            })
            .fold(0.0, f64::max)
    }

    pub fn uses_ttft(&self) -> bool {
        self.signals.iter().any(|s| matches!(s, SignalSpec::TtftP99(_)))
    }

    /// The instance count the signals ask for, clamped to [min, max]. `ready` instances serve
    /// now, `current` are paid for and not draining.
    pub fn desired(&self, m: &Measurements, ready: u32, current: u32) -> u32 {
        let mut want: Option<u32> = None;
        for s in &self.signals {
            let d = match s {
                SignalSpec::Queue(q) => self.proportional(m.queue_per_instance, q.target, ready, current),
                SignalSpec::KvUtilization(k) => self.proportional(m.kv_utilization, k.target, ready, current),
                SignalSpec::TtftP99(t) => m
                    .ttft_p99_ms
                    .get(&t.window_s.to_bits())
                    .copied()
                    .flatten()
                    .and_then(|v| self.proportional(Some(v), t.target_ms, ready, current)),
                SignalSpec::RequestRate(r) => {
                    let rate = m.rate_rps.get(&r.window_s.to_bits()).copied().unwrap_or(0.0);
                    let ratio = rate / (r.target_rps * current.max(1) as f64);
                    if (ratio - 1.0).abs() <= self.tolerance {
                        Some(current)
                    } else {
                        Some(ceil_u32(rate / r.target_rps))
                    }
                }
            };
            if let Some(d) = d {
                want = Some(want.map_or(d, |w| w.max(d)));
            }
        }
        want.unwrap_or(current).clamp(self.min, self.max)
    }

    /// HPA's rule for a per-instance average: ⌈ready × value / target⌉, unless within the
    /// tolerance. With no ready instance there is no average to scale, only a floor.
    fn proportional(&self, value: Option<f64>, target: f64, ready: u32, current: u32) -> Option<u32> {
        let ratio = value? / target;
        if (ratio - 1.0).abs() <= self.tolerance || ready == 0 {
            return Some(current);
        }
        Some(ceil_u32(ready as f64 * ratio))
    }
}

fn ceil_u32(x: f64) -> u32 {
    // A tiny tolerance keeps 3.0000000001 (rounding in the rate) at 3.
    (x - 1e-9).ceil().clamp(0.0, u32::MAX as f64) as u32
}

/// What the autoscaler sees at a tick. Windowed values are keyed by the window's bits.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measurements {
    /// Waiting requests per ready instance (`None`: no ready instance).
    pub(crate) queue_per_instance: Option<f64>,
    /// Mean KV use of ready instances.
    pub(crate) kv_utilization: Option<f64>,
    /// p99 TTFT over each signal's window (`None`: no first token in it).
    pub(crate) ttft_p99_ms: std::collections::BTreeMap<u64, Option<f64>>,
    /// Arrivals per second over each signal's window.
    pub(crate) rate_rps: std::collections::BTreeMap<u64, f64>,
}
