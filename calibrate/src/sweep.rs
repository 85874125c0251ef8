//! Running a sweep: each planned point measured once (equal shapes share a measurement, unless
//! the backend times ops in context), level 0
//! first, until the plan or the deadline ends. Every measurement goes to the caller as it is
//! taken, so the caller can stream it to disk: an interrupted run keeps what it measured.

use crate::Error;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::backend::{Backend, Timing};
use crate::plan::{Point, Shape};

/// One measured point.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    pub op: String,
    pub tp: u32,
    pub x: Vec<f64>,
    pub ms: f64,
    pub samples: u32,
}

/// What a sweep did.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub measurements: Vec<Measurement>,
    /// Points in the plan.
    pub planned: usize,
    /// Distinct shapes timed (points sharing a shape are timed once).
    pub timed: usize,
    /// Points that could not be measured, with the reason.
    pub failed: Vec<String>,
    /// Whether the deadline stopped the sweep before the plan ended.
    pub hit_deadline: bool,
    /// Wall-clock seconds spent measuring.
    pub seconds: f64,
}

impl Outcome {
    /// Distinct shapes timed per wall-clock second.
    pub fn points_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.timed as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// Measures `plan` with `backend`. `on_point(measurement, done, total)` runs after each point.
pub fn run(
    backend: &mut dyn Backend,
    plan: &[Point],
    deadline: Option<Duration>,
    on_point: &mut dyn FnMut(&Measurement, usize, usize),
) -> Outcome {
    let start = Instant::now();
    let mut cache: HashMap<(&str, Shape), Result<Timing, Error>> = HashMap::new();
    let mut out = Outcome { planned: plan.len(), ..Outcome::default() };
    let by_op = backend.times_in_context();
    for (i, p) in plan.iter().enumerate() {
        // The deadline, or the command asked to stop (`--time-limit`, SIGINT/SIGTERM).
        if deadline.is_some_and(|d| start.elapsed() >= d) || servesim_sim::engine::cancelled() {
            out.hit_deadline = true;
            break;
        }
        let key = (if by_op { p.op } else { "" }, p.shape.clone());
        let r = match cache.get(&key) {
            Some(r) => r.clone(),
            None => {
                let r = backend.measure_point(p);
                out.timed += 1;
                cache.insert(key, r.clone());
                r
            }
        };
        match r {
            Ok(t) => {
                let m = Measurement { op: p.op.to_string(), tp: p.tp, x: p.x.clone(), ms: t.ms, samples: t.samples };
                on_point(&m, i + 1, plan.len());
                out.measurements.push(m);
            }
            Err(e) => out.failed.push(format!("{} (tp {}): {e}", p.op, p.tp)),
        }
    }
    out.seconds = start.elapsed().as_secs_f64();
    out
}
