//! servesim-kernels: the operations of one decoder layer, on the GPU and on the CPU.
//!
//! ```text
//!   kernels/cuda/*.cu ──NVRTC (run time)──► CUBIN for the device ──cudarc──► launch   (cuda)
//!   paged decode attention (GQA, split-K) · prefill attention (causal, cached prefix, tiled)
//!   RMSNorm (fused with the residual add) · RoPE · SiLU·mul · KV-cache write · sampling
//!   GEMMs through cuBLAS (bf16 in, fp32 accumulate)
//!   CPU reference of every op (cpu) ── the correctness oracle and the `cpu` timing backend
//! ```
//! Everything CUDA is loaded at run time (cudarc's dynamic loading): this crate builds and its
//! CPU half runs on machines without CUDA; [`cuda::Gpu::open`] says what is missing instead of
//! panicking.

#![warn(unreachable_pub)]

pub(crate) mod bf16;
pub mod cpu;
pub mod cuda;
pub mod nvrtc;

/// cudarc, re-exported so users of the launchers name the same buffer types.
pub use cudarc;

/// The CUDA sources, by file name, embedded in the binary.
pub const SOURCES: &[(&str, &str)] = &[
    ("rms_norm.cu", include_str!("../cuda/rms_norm.cu")),
    ("rope.cu", include_str!("../cuda/rope.cu")),
    ("silu_mul.cu", include_str!("../cuda/silu_mul.cu")),
    ("kv_write.cu", include_str!("../cuda/kv_write.cu")),
    ("decode_attention.cu", include_str!("../cuda/decode_attention.cu")),
    ("prefill_attention.cu", include_str!("../cuda/prefill_attention.cu")),
    ("sample.cu", include_str!("../cuda/sample.cu")),
];

/// The kernel entry points each source defines.
pub const ENTRY_POINTS: &[(&str, &[&str])] = &[
    ("rms_norm.cu", &["rms_norm"]),
    ("rope.cu", &["rope"]),
    ("silu_mul.cu", &["silu_mul"]),
    ("kv_write.cu", &["kv_write"]),
    ("decode_attention.cu", &["decode_attention_partial", "decode_attention_reduce"]),
    ("prefill_attention.cu", &["prefill_attention"]),
    ("sample.cu", &["sample"]),
];
