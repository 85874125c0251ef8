//! Hardware and model specifications, with presets taken from published configs and datasheets.

mod gpu;
mod hf_config;
mod model;
mod section;

pub use gpu::{GpuPreset, GpuSpec, GPU_PRESETS};
pub use hf_config::{preset_from_hf_config, without_sliding_window};
pub use model::{stage_layers, Arch, Mla, ModelPreset, ModelSpec, Window, MAX_DIMENSION, MODEL_PRESETS};
pub use section::{gpu_from_toml, model_from_toml, GpuSection, ModelSection, MAX_KV_BYTES_PER_TOKEN, MAX_PARAMS};

/// One gibibyte, in bytes.
pub const GIB: f64 = (1u64 << 30) as f64;

use serde::{Deserialize, Serialize};

/// Element type of stored weights or KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    Bf16,
    Fp8,
    /// NVIDIA's 4-bit float: e2m1 values with one fp8 scale per 16 (4.5 bits per element).
    Nvfp4,
    /// The OCP microscaling 4-bit float: e2m1 values with one 8-bit scale per 32 (4.25 bits).
    Mxfp4,
}

impl Dtype {
    /// Bytes of 32 elements, scales included.
    fn bytes_per_32(self) -> u64 {
        match self {
            Dtype::Bf16 => 64,
            Dtype::Fp8 => 32,
            Dtype::Nvfp4 => 18,
            Dtype::Mxfp4 => 17,
        }
    }

    /// Bytes of `n` elements, scales included, rounded up.
    pub fn bytes_for(self, n: u64) -> u64 {
        (n as u128 * self.bytes_per_32() as u128).div_ceil(32).min(u64::MAX as u128) as u64
    }

    /// Bytes per element, scales included (0.5625 for NVFP4).
    pub fn element_bytes(self) -> f64 {
        self.bytes_per_32() as f64 / 32.0
    }

    pub fn is_4bit(self) -> bool {
        matches!(self, Dtype::Nvfp4 | Dtype::Mxfp4)
    }

    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bf16 => "bf16",
            Dtype::Fp8 => "fp8",
            Dtype::Nvfp4 => "nvfp4",
            Dtype::Mxfp4 => "mxfp4",
        }
    }
}
