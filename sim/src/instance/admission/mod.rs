//! Admission and overload control: which arrivals are turned away, and how long a request may
//! wait before it is dropped.
//!
//! ```text
//!   arrival ─► prompt > max_prompt_tokens?   ─► rejected (prompt_too_long)
//!           ─► does it fit at all?            ─► rejected (context_too_long, ...)
//!           ─► waiting ≥ max_queue?           ─► rejected (queue_full)
//!           ─► circuit breaker open?          ─► rejected (circuit_open)
//!           ─► queue ── waited > queue_timeout_s before first admission ─► timed out
//! ```
//! Rejected and timed-out requests count as SLO misses.

pub(crate) mod circuit_breaker;

use serde::{Deserialize, Serialize};

use crate::config::{check, ConfigError};
pub(crate) use circuit_breaker::{Breaker, CircuitBreaker};

/// `[scheduler.admission]`: every limit is off unless given.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct AdmissionSection {
    /// Reject arrivals while this many requests wait.
    pub(crate) max_queue: Option<u32>,
    /// Reject prompts longer than this.
    pub(crate) max_prompt_tokens: Option<u32>,
    /// Drop requests that waited this long without being admitted, seconds.
    pub(crate) queue_timeout_s: Option<f64>,
    /// Reject arrivals while the estimated queueing delay is too long.
    pub(crate) circuit_breaker: Option<CircuitBreaker>,
}

impl AdmissionSection {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        if let Some(t) = self.queue_timeout_s {
            check(t.is_finite() && t > 0.0, path, "queue_timeout_s", "must be > 0", t)?;
        }
        if let Some(m) = self.max_prompt_tokens {
            check(m >= 1, path, "max_prompt_tokens", "must be ≥ 1", m)?;
        }
        if let Some(b) = &self.circuit_breaker {
            b.validate(&format!("{path}.circuit_breaker"))?;
        }
        Ok(())
    }
}
