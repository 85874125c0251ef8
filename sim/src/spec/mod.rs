//! Hardware and model specifications, with presets taken from published configs and datasheets.

mod gpu;
mod model;

pub use gpu::{GpuPreset, GpuSpec, GPU_PRESETS};
pub use model::{ModelPreset, ModelSpec, MAX_DIMENSION, MODEL_PRESETS};

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
