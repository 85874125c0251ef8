//! servesim-calibrate: turns measured kernel timings into a cost profile the simulator reads.
//!
//! ```text
//!   model spec + TP ─► plan (GEMM token counts, prefill (chunk, cached), decode (batch, ctx))
//!                       │
//!                       ▼ backend: cuda (cudarc, real kernels) │ cpu (reference ops)
//!                   sweep: measurements streamed to the caller (→ CSV), deadline
//!                       │
//!                       ▼ fit: per-op tables, interpolation chosen by held-out error
//!                   profile ─► sim's Profiled cost model (`[cost] profile = "PATH"`)
//!   vidur: Vidur's profiling CSVs ─► the same profile format, Vidur's op names
//!   emulate: the simulator's iterations executed for real (a CostModel returning measured
//!            times), for `servesim validate`; iterations: the batch space it samples
//! ```
//! The library measures and fits; the `servesim` binary reads and writes the files.

#![warn(unreachable_pub)]

pub mod backend;
mod error;
pub use error::Error;
pub mod clock;
pub mod emulate;
pub mod fit;
pub mod iterations;
pub mod plan;
pub mod sweep;
pub mod vidur;

pub use servesim_sim::cost::profile::PROFILE_FORMAT_VERSION;
