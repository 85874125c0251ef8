//! Kernel-backed profiles shipped in the binary (`calibrate/profiles/aic/`), built by
//! `servesim calibrate import-aic` from AIConfigurator's database (Apache-2.0; NOTICE beside
//! them), so the shipped scenarios price every candidate by measured kernels with no download.

use std::sync::{Arc, OnceLock};

use servesim_sim::cost::profile::Profile;
use servesim_sim::scenario::DatabaseRequest;

/// (file name, JSON) of every shipped profile.
/// Rebuilt by calibrate/profiles/aic/make.sh.
const FILES: &[(&str, &str)] = &[
    (
        "h100_sxm-vllm-llama-3-8b-bf16.json",
        include_str!("../calibrate/profiles/aic/h100_sxm-vllm-llama-3-8b-bf16.json"),
    ),
    ("h100_sxm-vllm-llama-3-8b-fp8.json", include_str!("../calibrate/profiles/aic/h100_sxm-vllm-llama-3-8b-fp8.json")),
    (
        "h200_sxm-vllm-llama-3-8b-bf16.json",
        include_str!("../calibrate/profiles/aic/h200_sxm-vllm-llama-3-8b-bf16.json"),
    ),
    (
        "b200_sxm-vllm-llama-3-8b-bf16.json",
        include_str!("../calibrate/profiles/aic/b200_sxm-vllm-llama-3-8b-bf16.json"),
    ),
    (
        "a100_sxm-vllm-llama-3-8b-bf16.json",
        include_str!("../calibrate/profiles/aic/a100_sxm-vllm-llama-3-8b-bf16.json"),
    ),
    ("l40s-vllm-llama-3-8b-bf16.json", include_str!("../calibrate/profiles/aic/l40s-vllm-llama-3-8b-bf16.json")),
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
                && req.gemm_kernel.is_none()
                && req.path.is_none()
                && p.meta.model.same_shapes(&req.model)
                && p.meta.tp.contains(&req.tp)
        })
        .map(|(n, p)| (*n, p.clone()))
}
