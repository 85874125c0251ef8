//! `[fleet.failures]`: when instances fail, how, and for how long.
//!
//! Random failures follow the classic reliability model: each serving instance fails after an
//! exponential time with mean `mtbf_s` (memoryless, so the clock restarts whenever it becomes
//! ready again), a failure is a hang with probability `hang_fraction` and a crash otherwise, and
//! its repair (from detection until it starts loading again) takes `mttr_s`, exponential or
//! fixed. Scheduled failures name an instance and a time. `down` instances are out for the whole
//! run, and the router knows it: the fleet an N+k plan must survive.

use crate::rng::SimRng;
use rand::RngExt;
use serde::{Deserialize, Serialize};

use super::check_s;
use crate::config::{check, ConfigError};
use crate::time::SimTime;

/// How an instance fails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// The process or node dies silently: requests on it and sent to it time out.
    #[default]
    Crash,
    /// It keeps accepting requests but makes no progress until a liveness check restarts it.
    Hang,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Crash => "crash",
            FailureKind::Hang => "hang",
        }
    }
}

/// Distribution of repair times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum RepairDist {
    /// Exponential with mean `mttr_s`.
    #[default]
    Exponential,
    /// Always `mttr_s`.
    Fixed,
}

/// `[[fleet.failures.events]]`: one failure at a given time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FailureEvent {
    /// When, in seconds from the start of the run.
    pub(crate) at_s: f64,
    /// Which instance (0-based, in group order). An instance that is not serving then (off,
    /// starting, already failed) is left alone.
    pub(crate) instance: u32,
    /// "crash" (default) or "hang".
    #[serde(default)]
    pub(crate) kind: FailureKind,
    /// Repair time after detection, s. Default: drawn like a random failure's (`mttr_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) repair_s: Option<f64>,
}

/// `[fleet.failures]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FailuresSection {
    /// Mean time between failures of one serving instance, s (exponential). Default: no random
    /// failures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mtbf_s: Option<f64>,
    /// Mean repair time, from detection until the instance starts loading again, s. Default 0
    /// (restarted in place: only the start-up delay).
    pub(crate) mttr_s: f64,
    /// "exponential" (default) or "fixed".
    pub(crate) repair: RepairDist,
    /// Fraction of random failures that are hangs rather than crashes. Default 0.
    pub(crate) hang_fraction: f64,
    /// Instances down for the whole run, known to the router (the highest-capacity ones, the
    /// last on a tie). `plan` sets it from `[plan] spare`. Default 0.
    pub(crate) down: u32,
    /// Failures at given times.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) events: Vec<FailureEvent>,
}

impl FailuresSection {
    /// `instances`: how many the run creates (event instance numbers must be below it).
    pub fn validate(&self, path: &str, instances: u32) -> Result<(), ConfigError> {
        if let Some(m) = self.mtbf_s {
            check_s(path, "mtbf_s", m, false)?;
        }
        check_s(path, "mttr_s", self.mttr_s, true)?;
        let h = self.hang_fraction;
        check(h.is_finite() && (0.0..=1.0).contains(&h), path, "hang_fraction", "must be in [0, 1]", h)?;
        check(
            self.down < instances,
            path,
            "down",
            &format!("must leave at least one of the {instances} instances up"),
            self.down,
        )?;
        for (i, e) in self.events.iter().enumerate() {
            let p = format!("{path}.events[{i}]");
            check_s(&p, "at_s", e.at_s, true)?;
            check(
                e.instance < instances,
                &p,
                "instance",
                &format!("must name one of the {instances} instances (0 to {})", instances - 1),
                e.instance,
            )?;
            if let Some(r) = e.repair_s {
                check_s(&p, "repair_s", r, true)?;
            }
        }
        Ok(())
    }

    /// Time from becoming ready to the next random failure, if random failures are on.
    pub fn time_to_failure(&self, rng: &mut SimRng) -> Option<SimTime> {
        let m = self.mtbf_s?;
        Some(SimTime::from_secs_f64(crate::rng::exponential(rng, 1.0 / m)))
    }

    /// Whether a random failure is a hang.
    pub fn draw_kind(&self, rng: &mut SimRng) -> FailureKind {
        if self.hang_fraction > 0.0 && rng.random::<f64>() < self.hang_fraction {
            FailureKind::Hang
        } else {
            FailureKind::Crash
        }
    }

    /// A repair time.
    pub fn draw_repair(&self, rng: &mut SimRng) -> SimTime {
        let m = self.mttr_s;
        let s = match self.repair {
            _ if m == 0.0 => 0.0,
            RepairDist::Fixed => m,
            RepairDist::Exponential => crate::rng::exponential(rng, 1.0 / m),
        };
        SimTime::from_secs_f64(s)
    }
}
