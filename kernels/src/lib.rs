//! servesim-kernels: the operations of one decoder layer, on the GPU and on the CPU.
//!
//! ```text
//!   kernels/cuda/*.cu ──NVRTC (run time)──► CUBIN for the device ──cudarc──► launch
//!   paged decode attention · prefill attention (causal, cached prefix) · RMSNorm · RoPE
//!   SiLU·mul · KV-cache write · sampling;  GEMMs through cuBLAS(Lt), bf16 in, fp32 accumulate
//!   CPU reference of every op (Rust) ── the correctness oracle and the `cpu` timing backend
//! ```
//! Until the calibration issue lands, this crate holds only this plan.
