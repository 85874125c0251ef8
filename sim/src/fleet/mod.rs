//! Fleet dynamics: instances that fail and restart, and a fleet that grows and shrinks.
//!
//! ```text
//!            scale up                      ready (start-up: weights ÷ load bandwidth + init)
//!   Off ───────────────► Starting ─────────────────────────────────────────────► Ready ◄──┐
//!    ▲                      │ scale down (cancelled)                               │  │    │
//!    └──────────────────────┘                                           scale down │  │    │
//!    ▲                                                                             ▼  │    │
//!    └───────────── Draining (no new requests; finishes its own, then Off) ◄────────┘  │    │
//!                                                                     crash / hang     │    │
//!   Failed: crash — requests on it, or sent to it, fail `detection_s` after;   ◄───────┘    │
//!           hang  — it accepts requests and makes no progress                               │
//!      │ detected (crash: detection_s; hang: hang_detection_s) — the router stops sending    │
//!      ▼                                                                                    │
//!   Restarting (KV lost; repair time, then the start-up delay) ────────────────────────────┘
//! ```
//! A failed instance's requests are retried elsewhere with their original arrival time (so
//! their latency carries the failure), or lost, per `on_failure`; lost requests are counted.
//! Routers send only to instances they believe healthy ([`crate::instance::Instance::routable`]):
//! ready ones, and failed ones whose failure has not been detected yet.
//!
//! This module holds the `[fleet]` section (start-up, detection, retries), its `failures`
//! ([`failures`]) and `autoscale` ([`autoscale`]) tables, the run-time state of every instance
//! ([`state::Fleet`]) and the fleet's summary; the event handling that moves requests between
//! instances lives with the engine (`engine/fleet.rs`).

pub(crate) mod autoscale;
pub(crate) mod failures;
pub(crate) mod state;
mod summary;

use serde::{Deserialize, Serialize};

pub(crate) use autoscale::AutoscaleSection;
pub(crate) use failures::{FailureKind, FailuresSection};
pub(crate) use state::{Fleet, FleetEvent, FleetEventKind};
pub(crate) use summary::{fill_series, FleetSummary};

use crate::config::{check, ConfigError};
use crate::instance::InstanceGroup;
use crate::time::SimTime;

/// What happens to the requests of a failed instance.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum OnFailure {
    /// Re-routed to another instance, keeping their arrival time (up to `max_retries` times).
    #[default]
    Retry,
    /// Lost: counted in `requests.lost`, never silently dropped.
    Lose,
}

/// `[fleet]`: start-up of instances, failure detection, and what failed requests do; with
/// `[fleet.failures]` and `[fleet.autoscale]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FleetSection {
    /// Bandwidth at which a starting instance reads its weights (every GPU's shard, from one
    /// storage volume), GB/s. Default 1.1: NVIDIA's Run:ai Model Streamer benchmark loaded
    /// Llama-3-8B (16 GB) from an AWS gp3 SSD in 14.3 s (the default safetensors loader took
    /// 48 s, 0.33 GB/s).
    pub load_gb_per_s: f64,
    /// Start-up time besides reading weights (process start, torch.compile, CUDA graph
    /// capture, KV profiling), s. Default 60.
    pub init_s: f64,
    /// Crash detection delay, s: a request running on, or sent to, a crashed instance fails
    /// this long after the crash (or after it was sent), and the router stops sending to the
    /// instance this long after the crash. Default 10 (one Kubernetes probe period).
    pub(crate) detection_s: f64,
    /// How long a hung instance (accepting requests, making no progress) goes unnoticed, s.
    /// Default 30 (Kubernetes liveness probe: period 10 s × failure threshold 3).
    pub(crate) hang_detection_s: f64,
    /// Requests of a failed instance: "retry" (default) or "lose".
    pub(crate) on_failure: OnFailure,
    /// Times one request is retried before it is lost. Default 2.
    pub(crate) max_retries: u32,
    /// `[fleet.failures]`: random (MTBF/MTTR) and scheduled failures, instances down for the
    /// whole run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failures: Option<FailuresSection>,
    /// `[fleet.autoscale]`: adds and removes instances of one group on load signals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autoscale: Option<AutoscaleSection>,
}

impl Default for FleetSection {
    fn default() -> Self {
        FleetSection {
            load_gb_per_s: 1.1,
            init_s: 60.0,
            detection_s: 10.0,
            hang_detection_s: 30.0,
            on_failure: OnFailure::Retry,
            max_retries: 2,
            failures: None,
            autoscale: None,
        }
    }
}

/// Most seconds any fleet duration may be (about 30 years): keeps times within `SimTime`.
const MAX_S: f64 = 1e9;

pub(crate) fn check_s(path: &str, key: &str, v: f64, allow_zero: bool) -> Result<(), ConfigError> {
    if allow_zero {
        check(v.is_finite() && (0.0..=MAX_S).contains(&v), path, key, "must be in [0, 1e9]", v)
    } else {
        check(v.is_finite() && v > 0.0 && v <= MAX_S, path, key, "must be in (0, 1e9]", v)
    }
}

impl FleetSection {
    /// Checks the section against the resolved instance groups.
    pub fn validate(&self, path: &str, groups: &[InstanceGroup]) -> Result<(), ConfigError> {
        let bw = self.load_gb_per_s;
        check(bw.is_finite() && bw > 0.0 && bw <= 1e6, path, "load_gb_per_s", "must be in (0, 1e6]", bw)?;
        check_s(path, "init_s", self.init_s, true)?;
        check_s(path, "detection_s", self.detection_s, true)?;
        check_s(path, "hang_detection_s", self.hang_detection_s, true)?;
        check(self.max_retries <= 1000, path, "max_retries", "must be ≤ 1000", self.max_retries)?;
        if let Some(a) = &self.autoscale {
            a.validate(&format!("{path}.autoscale"), groups)?;
        }
        let built: u64 = (0..groups.len()).map(|g| u64::from(self.instances_built(groups, g))).sum();
        if built > crate::instance::MAX_INSTANCES {
            return Err(ConfigError::at(
                path,
                format!(
                    "the cluster would build {built} instances (autoscaling's maximum included); at most {} are \
                     simulated in one cluster",
                    crate::instance::MAX_INSTANCES
                ),
            ));
        }
        let built = built as u32;
        if let Some(f) = &self.failures {
            f.validate(&format!("{path}.failures"), built)?;
        }
        Ok(())
    }

    /// Index of the autoscaled group, if any.
    pub fn autoscaled_group(&self, groups: &[InstanceGroup]) -> Option<usize> {
        let a = self.autoscale.as_ref()?;
        match &a.group {
            Some(name) => groups.iter().position(|g| &g.name == name),
            None => Some(0),
        }
    }

    /// Instances the simulation creates for group `g`: its count, or the autoscaler's maximum.
    pub fn instances_built(&self, groups: &[InstanceGroup], g: usize) -> u32 {
        match (self.autoscaled_group(groups), &self.autoscale) {
            (Some(a), Some(s)) if a == g => groups[g].count.max(s.max),
            _ => groups[g].count,
        }
    }

    /// Whether requests can fail (so the engine keeps copies of requests in flight to retry).
    pub fn can_fail(&self) -> bool {
        self.failures.as_ref().is_some_and(|f| f.mtbf_s.is_some() || !f.events.is_empty())
    }

    /// The start-up delay of an instance of `g`: its weights (every GPU's shard) ÷ the load
    /// bandwidth, plus the fixed init time.
    pub fn startup(&self, g: &InstanceGroup) -> SimTime {
        let bytes = g.memory.weight_bytes as f64 * g.gpus() as f64;
        SimTime::from_secs_f64(bytes / (self.load_gb_per_s * 1e9) + self.init_s)
    }
}

/// Instances the simulation creates for group `g` (more than the group's count when the group
/// is autoscaled: the instances it may add). `fleet` is the scenario's `[fleet]`, if any.
pub(crate) fn instances_built(fleet: Option<&FleetSection>, groups: &[InstanceGroup], g: usize) -> u32 {
    match fleet {
        Some(f) => f.instances_built(groups, g),
        None => groups[g].count,
    }
}

#[cfg(test)]
mod tests;
