//! The serving policies of one instance group, resolved from its `[scheduler]` section and the
//! hardware (block size in bytes, host link bandwidth).

use super::admission::AdmissionSection;
use super::batching::BatchingSpec;
use super::cpu::CpuSection;
use super::group::{InstanceGroup, Role};
use super::kv_policy::KvCacheSection;
use super::preemption::PreemptionSpec;
use super::prefix::PrefixCacheSection;
use super::queue::QueueSpec;
use super::speculative::{Acceptance, DraftCost, DraftModel, SpeculativeSection};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct PolicyConfig {
    pub(crate) batching: BatchingSpec,
    pub(crate) queue: QueueSpec,
    pub(crate) admission: AdmissionSection,
    pub(crate) preemption: PreemptionSpec,
    pub(crate) kv: KvCacheSection,
    pub(crate) prefix: PrefixCacheSection,
    pub(crate) speculative: Option<SpeculativeSection>,
    /// The speculative acceptance as drawn (`Acceptance::NONE` without speculation), resolved
    /// once.
    pub(crate) acceptance: Acceptance,
    pub(crate) draft: Option<DraftCost>,
    pub(crate) cpu: CpuSection,
    /// Whether CPU work overlaps the GPU (`scheduler.cpu.overlap`, else the engine overhead's).
    pub(crate) cpu_overlap: bool,
    /// Bytes of one KV block on one GPU (what crosses one GPU's host link per block).
    pub(crate) block_bytes: u64,
    /// Host link bandwidth of one GPU, bytes/s.
    pub(crate) pcie_bytes_per_s: f64,
    /// Blocks the CPU swap space holds.
    pub(crate) swap_blocks: u64,
    /// Blocks the CPU tier of the prefix cache holds.
    pub(crate) cpu_tier_blocks: u64,
    /// Seed of the policies' randomness (predictor noise, speculative acceptance).
    pub(crate) seed: u64,
    /// Which pool of a disaggregated cluster the instance is in (mixed: not disaggregated).
    pub(crate) role: Role,
    /// TensorRT-LLM's attention-DP balancing (`cluster.attention_dp_config`), with DP ranks.
    pub(crate) attention_dp: super::adp::AttentionDpConfig,
    /// TensorRT-LLM's batch waiting (`scheduler.batch_wait`).
    pub(crate) batch_wait: super::batch_wait::BatchWaitSection,
    /// SGLang's receive interval (`scheduler.recv_interval`).
    pub(crate) recv_interval: u32,
    /// The windowed layers' blocks, taken from the pool as requests run (vLLM's hybrid KV cache
    /// manager; `None`: set apart in the memory plan, or no windowed layers).
    pub(crate) window: Option<crate::memory::SharedWindow>,
}

impl PolicyConfig {
    /// The policies of group `g`; `seed` is the scenario's.
    pub fn from_group(g: &InstanceGroup, seed: u64) -> PolicyConfig {
        let sch = &g.scheduler;
        let block_bytes = g.memory.block_bytes.max(1);
        let draft = sch.speculative.as_ref().map(|sp| match (&sp.draft, sp.draft_cost_fraction) {
            (Some(d), _) => DraftCost::Model(Box::new(DraftModel {
                model: sch.kv_cache.model(&d.resolve("scheduler.speculative.draft").expect("validated")),
                gpu: g.gpu.clone(),
                tp: g.tp,
                params: crate::cost::RooflineParams {
                    cpu_overhead_base_us: 0.0,
                    cpu_overhead_per_seq_us: 0.0,
                    ..match &g.cost {
                        crate::cost::CostSpec::Roofline(c) => c.params(),
                        crate::cost::CostSpec::Linear(_) => crate::cost::RooflineParams::default(),
                    }
                },
            })),
            (None, f) => DraftCost::Fraction(f.expect("validated")),
        });
        PolicyConfig {
            batching: sch.batching.clone(),
            queue: sch.queue.clone(),
            admission: sch.admission.clone(),
            preemption: sch.preemption.clone(),
            kv: sch.kv_cache.clone(),
            prefix: sch.prefix_cache.clone(),
            speculative: sch.speculative.clone(),
            acceptance: sch.speculative.as_ref().map_or(Acceptance::NONE, SpeculativeSection::acceptance),
            draft,
            cpu: sch.cpu.clone(),
            cpu_overlap: sch.cpu.overlap.unwrap_or(match &g.cost {
                crate::cost::CostSpec::Roofline(c) => c.engine_overhead().overlap,
                crate::cost::CostSpec::Linear(_) => false,
            }),
            block_bytes,
            pcie_bytes_per_s: g.gpu.pcie_bytes_per_s,
            swap_blocks: sch.preemption.swap_bytes() / block_bytes,
            cpu_tier_blocks: (sch.prefix_cache.cpu_gib * crate::memory::GIB) as u64 / block_bytes,
            seed,
            role: g.role,
            attention_dp: Default::default(),
            batch_wait: sch.batch_wait,
            recv_interval: sch.recv_interval,
            window: g.memory.window,
        }
    }
}
