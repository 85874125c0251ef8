//! Kernel-backed profiles built into servesim (`calibrate/profiles/aic/`), built by
//! `servesim calibrate import-aic` from AIConfigurator's database (Apache-2.0; NOTICE beside
//! them), so the shipped scenarios price every candidate by measured kernels with no download.

use std::sync::{Arc, OnceLock};

use super::profile::Profile;
use crate::cost::DatabaseRequest;

/// (file name, JSON) of every shipped profile.
/// Rebuilt by calibrate/profiles/aic/make.sh.
const FILES: &[(&str, &str)] = &[
    (
        "h100_sxm-vllm-llama-3-8b-bf16.json",
        include_str!("../../../calibrate/profiles/aic/h100_sxm-vllm-llama-3-8b-bf16.json"),
    ),
    (
        "h100_sxm-vllm-llama-3-8b-fp8.json",
        include_str!("../../../calibrate/profiles/aic/h100_sxm-vllm-llama-3-8b-fp8.json"),
    ),
    (
        "h200_sxm-vllm-llama-3-8b-bf16.json",
        include_str!("../../../calibrate/profiles/aic/h200_sxm-vllm-llama-3-8b-bf16.json"),
    ),
    (
        "b200_sxm-vllm-llama-3-8b-bf16.json",
        include_str!("../../../calibrate/profiles/aic/b200_sxm-vllm-llama-3-8b-bf16.json"),
    ),
    (
        "a100_sxm-vllm-llama-3-8b-bf16.json",
        include_str!("../../../calibrate/profiles/aic/a100_sxm-vllm-llama-3-8b-bf16.json"),
    ),
    ("l40s-vllm-llama-3-8b-bf16.json", include_str!("../../../calibrate/profiles/aic/l40s-vllm-llama-3-8b-bf16.json")),
    (
        "h100_sxm-sglang-llama-3-8b-bf16.json",
        include_str!("../../../calibrate/profiles/aic/h100_sxm-sglang-llama-3-8b-bf16.json"),
    ),
    (
        "h100_sxm-vllm-gpt-oss-120b-mxfp4.json",
        include_str!("../../../calibrate/profiles/aic/h100_sxm-vllm-gpt-oss-120b-mxfp4.json"),
    ),
    (
        "h200_sxm-vllm-gpt-oss-120b-mxfp4.json",
        include_str!("../../../calibrate/profiles/aic/h200_sxm-vllm-gpt-oss-120b-mxfp4.json"),
    ),
    (
        "b200_sxm-vllm-gpt-oss-120b-mxfp4.json",
        include_str!("../../../calibrate/profiles/aic/b200_sxm-vllm-gpt-oss-120b-mxfp4.json"),
    ),
];

/// The shipped profiles, parsed once.
pub fn all() -> &'static [(&'static str, Arc<Profile>)] {
    static ALL: OnceLock<Vec<(&'static str, Arc<Profile>)>> = OnceLock::new();
    ALL.get_or_init(|| {
        FILES
            .iter()
            .map(|(name, text)| {
                (*name, Arc::new(Profile::from_json(text).unwrap_or_else(|e| panic!("shipped {name}: {e}"))))
            })
            .collect()
    })
}

/// A shipped profile that answers `req`: the same system, framework, weights and KV dtype,
/// version (any, when the request names none), model shapes, and the request's TP degree.
pub fn find(req: &DatabaseRequest) -> Option<(&'static str, Arc<Profile>)> {
    all()
        .iter()
        .find(|(_, p)| {
            let Some(d) = &p.meta.database else { return false };
            d.system == req.system
                && d.framework == req.framework
                && req.version.as_ref().is_none_or(|v| *v == d.version)
                && d.weights == req.weights
                && d.kv == req.model.kv_dtype.name()
                && d.moe_distribution.as_ref().is_none_or(|m| *m == req.moe_distribution)
                && req.gemm_kernel.is_none()
                && req.path.is_none()
                && p.meta.model.same_shapes(&req.model)
                && p.meta.tp.contains(&req.tp)
                // Shipped slices read the experts split by TP, not at expert-parallel rows.
                && !(req.expert_parallel && req.model.experts > 1 && req.tp > 1)
        })
        .map(|(n, p)| (*n, p.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::{Profiled, RooflineParams};
    use crate::spec::{Dtype, GpuPreset, ModelPreset, ModelSpec};

    #[test]
    fn every_shipped_profile_prices_its_model_on_its_gpu_with_only_elementwise_ops_left() {
        assert_eq!(all().len(), FILES.len());
        for (name, p) in all() {
            let d = p.meta.database.as_ref().unwrap_or_else(|| panic!("{name}: no database"));
            let preset = GpuPreset::find(&d.system).unwrap_or_else(|| panic!("{name}: {}", d.system));
            let dtype = |s: &str| match s {
                "fp8" => Dtype::Fp8,
                "mxfp4" => Dtype::Mxfp4,
                _ => Dtype::Bf16,
            };
            let model =
                ModelSpec::from_preset(ModelPreset::find(&p.meta.model.name).unwrap(), dtype(&d.weights), dtype(&d.kv));
            for &tp in &p.meta.tp {
                let req = DatabaseRequest {
                    system: d.system.clone(),
                    framework: d.framework.clone(),
                    version: None,
                    weights: d.weights.clone(),
                    gemm_kernel: None,
                    moe_distribution: crate::cost::DEFAULT_MOE_DISTRIBUTION.into(),
                    path: None,
                    model: model.clone(),
                    tp,
                    gpu: preset.spec(),
                    experts: true,
                    expert_parallel: false,
                };
                assert_eq!(find(&req).map(|(n, _)| n), Some(*name));
                let m = Profiled::new(model.clone(), preset.spec(), tp as u64, RooflineParams::default(), p).unwrap();
                let ops: Vec<&str> = m.fallbacks().iter().map(|f| f.op.as_str()).collect();
                assert_eq!(ops, ["elementwise"], "{name} tp {tp}");
            }
        }
    }
}
