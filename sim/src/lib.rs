//! servesim-sim: a discrete-event simulator of an LLM serving stack.
//!
//! ```text
//!   Scenario ──► Workload ─(arrivals)─► Router ─► Instance[i]
//!                                                 │ scheduler: queue order, admission, batching
//!                                                 │ KV cache:  paged blocks, prefix cache, preemption
//!                                                 │ cost:      roofline time of each iteration
//!                                                 ▼
//!                                  Recorder (per request, per window) ──► Summary
//! ```
//! The library is pure and deterministic: no wall clock, no stdout, no global randomness. A
//! scenario and a seed define a run; the same build gives byte-identical results.
//!
//! ```
//! let src = include_str!("../../scenarios/chat.toml");
//! let scenario = servesim_sim::Scenario::from_toml(src, "chat").unwrap();
//! let out = servesim_sim::engine::run(&scenario);
//! let s = &out.summary.requests;
//! assert_eq!(s.arrived, s.finished + s.rejected + s.timed_out + s.in_flight);
//! ```

#![warn(unreachable_pub)]
pub mod calibration;
pub(crate) mod config;
pub mod cost;
pub mod disagg;
pub mod engine;
pub(crate) mod fleet;
pub mod frontend;
#[doc(hidden)]
pub mod fuzz;
pub mod instance;
pub mod memory;
pub mod metrics;
pub mod plan;
pub(crate) mod rng;
pub mod router;
pub mod scenario;
pub mod spec;
pub mod time;
pub mod workload;

pub use config::ConfigError;
pub use scenario::Scenario;
pub use time::SimTime;
