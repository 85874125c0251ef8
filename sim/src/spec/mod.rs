//! Hardware and model specifications, with presets taken from published configs and datasheets.

mod gpu;
mod model;
mod section;

pub use gpu::{GpuPreset, GpuSpec, GPU_PRESETS};
pub use model::{ModelPreset, ModelSpec, MAX_DIMENSION, MODEL_PRESETS};
pub use section::{GpuSection, ModelSection, MAX_KV_BYTES_PER_TOKEN, MAX_PARAMS};

/// One gibibyte, in bytes.
pub const GIB: f64 = (1u64 << 30) as f64;

use serde::{Deserialize, Serialize};

/// Element type of stored weights or KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    Bf16,
    Fp8,
}

impl Dtype {
    pub fn bytes(self) -> u64 {
        match self {
            Dtype::Bf16 => 2,
            Dtype::Fp8 => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bf16 => "bf16",
            Dtype::Fp8 => "fp8",
        }
    }
}
