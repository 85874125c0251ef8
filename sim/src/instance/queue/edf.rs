//! Earliest deadline first, the deadline being the TTFT SLO: a request's deadline is its arrival
//! plus the TTFT target of its priority class, and the waiting request whose deadline comes
//! first is admitted first (ties in arrival order). With one target for every class this is
//! FCFS; with a tight target for interactive classes and a loose one for batch classes, a batch
//! request that has waited close to its own target goes ahead of a fresh interactive one — where
//! strict priority (`kind = "priority"`) would let it starve.
//!
//! The deadline is fixed at arrival, so the order is kept as a key (O(log n) per operation).
//! This is the SLO-aware order of the scheduling literature (EDF, Liu & Layland 1973); no engine
//! ships it as a queue policy today.

use serde::{Deserialize, Serialize};

use super::{float_key, QueueOrder, QueuePolicy, Seq};
use crate::config::{check, ConfigError};
use crate::metrics::SloSection;

/// `kind = "edf"`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Edf {
    /// TTFT target of each priority class, ms: class c's deadline is arrival + `ttft_ms[c]`;
    /// classes past the list take its last entry. Default: `[slo] ttft_ms` for every class.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) ttft_ms: Vec<f64>,
}

/// Classes are 0–255; a longer list would name classes no request has.
const MAX_CLASSES: usize = 256;

impl QueuePolicy for Edf {
    fn validate(&self, path: &str) -> Result<(), ConfigError> {
        check(self.ttft_ms.len() <= MAX_CLASSES, path, "ttft_ms", "must have at most 256 entries", self.ttft_ms.len())?;
        for (i, &t) in self.ttft_ms.iter().enumerate() {
            check(t.is_finite() && t > 0.0 && t <= 1e12, path, &format!("ttft_ms[{i}]"), "must be in (0, 1e12] ms", t)?;
        }
        Ok(())
    }

    fn resolve(&mut self, slo: &SloSection, path: &str) -> Result<(), ConfigError> {
        if self.ttft_ms.is_empty() {
            let Some(t) = slo.ttft_ms else {
                return Err(ConfigError::at(
                    &format!("{path}.ttft_ms"),
                    "required: the deadlines come from [slo] ttft_ms, and the scenario has none; give ttft_ms = [ms per class] or [slo] ttft_ms".into(),
                ));
            };
            self.ttft_ms = vec![t];
        }
        Ok(())
    }

    fn build(&self, _seed: u64, _instance: u32) -> Box<dyn QueueOrder> {
        Box::new(self.clone())
    }
}

impl Edf {
    /// The deadline of a class-`class` request arriving at `arrival_s`, in seconds.
    pub fn deadline_s(&self, class: u8, arrival_s: f64) -> f64 {
        let t = self.ttft_ms.get(class as usize).or(self.ttft_ms.last()).copied().unwrap_or(0.0);
        arrival_s + t / 1e3
    }
}

impl QueueOrder for Edf {
    fn place(&mut self, s: &Seq) -> (usize, u64) {
        (0, float_key(self.deadline_s(s.class, s.cold.arrival.as_secs_f64())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_class_takes_its_own_target_and_classes_past_the_list_the_last() {
        let e = Edf { ttft_ms: vec![200.0, 5000.0] };
        assert_eq!(e.deadline_s(0, 1.0), 1.2);
        assert_eq!(e.deadline_s(1, 1.0), 6.0);
        assert_eq!(e.deadline_s(7, 1.0), 6.0);
        // A class-1 request that waited 4.9 s is due before a class-0 one arriving now.
        assert!(e.deadline_s(1, 0.0) < e.deadline_s(0, 4.9));
        assert!(float_key(e.deadline_s(1, 0.0)) < float_key(e.deadline_s(0, 4.9)));
    }

    #[test]
    fn the_default_deadline_is_the_slo_and_without_one_it_is_an_error() {
        let slo = SloSection { ttft_ms: Some(300.0), ..SloSection::default() };
        let mut e = Edf::default();
        e.resolve(&slo, "scheduler.queue").unwrap();
        assert_eq!(e.ttft_ms, vec![300.0]);
        let mut e = Edf::default();
        let err = e.resolve(&SloSection::default(), "scheduler.queue").unwrap_err();
        assert_eq!(err.path, "scheduler.queue.ttft_ms");
        assert!(err.message.contains("[slo] ttft_ms"), "{err}");
        let bad = Edf { ttft_ms: vec![100.0, -1.0] };
        assert_eq!(bad.validate("q").unwrap_err().to_string(), "q.ttft_ms[1]: must be in (0, 1e12] ms, got -1");
    }
}
