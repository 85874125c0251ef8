//! servesim-calibrate: turns measured kernel timings into a cost profile the simulator reads.
//!
//! ```text
//!   model spec + TP ─► sweep plan (GEMM token counts, prefill (chunk, cached), decode (batch, ctx))
//!                       │
//!                       ▼ backend: cuda (cudarc, real kernels) │ cpu (reference ops)
//!                   timings CSV (streamed, survives interruption)
//!                       │
//!                       ▼ fit: per-op interpolation, held-out error
//!                   profile file ─► sim's Profiled cost model (`[cost] profile = "PATH"`)
//! ```
//! It will also import others' measurements (Vidur's per-op CSVs) into the same profile format.
//! Until the calibration issue lands, this crate holds only this plan; the simulator uses the
//! analytic roofline model (`servesim_sim::cost::Roofline`).

/// The version of the profile format this crate will write.
pub const PROFILE_FORMAT_VERSION: u32 = 1;
