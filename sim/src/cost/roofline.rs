//! The analytic roofline cost model.
//!
//! Each operator of a decoder layer costs max(FLOPs / (peak × compute efficiency),
//! bytes / (bandwidth × memory efficiency)) plus a fixed per-kernel cost; tensor parallelism
//! adds two ring all-reduces per layer; every iteration pays a CPU overhead that grows with the
//! batch (scheduling, input preparation, sampling, output processing).
//!
//! ```text
//!   per layer:  norm → QKV GEMM → RoPE → KV write → attention (prefill, decode) → O GEMM → [all-reduce]
//!               → norm → gate/up GEMM (or the routed experts) → SiLU·mul → down GEMM → [all-reduce]
//!   per step:   embedding, final norm, LM head over the sampled tokens, sampling, CPU overhead
//! ```
//!
//! Defaults, and where they come from (Vidur's H100 profiles in `data/vidur-profiles/`):
//! GEMMs at 4,096 tokens reach 71–76% of dense bf16 peak (compute efficiency 0.7); at one token
//! they stream weights at 79–84% of HBM bandwidth (memory efficiency 0.8); tiny kernels take
//! 1–7 µs (3 µs per kernel); small all-reduces on H100 NVLink take 7–44 µs (15 µs latency).
//! The CPU overhead is a least-squares line through Vidur's per-iteration CPU costs (schedule +
//! sampler + prepare inputs + process outputs, medians) against batch size: 806.3 µs + 37.48 µs
//! per sequence. That was measured on a 2023 vLLM; engines that overlap scheduling with the GPU
//! pay less, so lower it for them.

use super::{cpu_ns, to_ns, BatchShape, CostAccount, CostModel};
use crate::spec::{Dtype, GpuSpec, ModelSpec};
use crate::time::SimTime;

/// The tunable constants of the roofline model (scenario section `[cost]`).
#[derive(Clone, Debug, PartialEq)]
pub struct RooflineParams {
    pub(crate) compute_efficiency: f64,
    pub(crate) memory_efficiency: f64,
    pub(crate) interconnect_efficiency: f64,
    pub kernel_launch_us: f64,
    pub(crate) allreduce_latency_us: f64,
    pub cpu_overhead_base_us: f64,
    pub cpu_overhead_per_seq_us: f64,
    /// The busiest expert's load over the mean (≥ 1): MoE layers take this much longer than
    /// with perfectly balanced routing. Default 1.
    pub(crate) moe_imbalance: f64,
}

/// How an instance's `tp` GPUs share the model beyond tensor parallelism (SGLang
/// `--enable-dp-attention --dp D`, `--ep`; vLLM `--data-parallel-size`, `--enable-expert-parallel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Attention data-parallel ranks: each of `dp_attention` groups of `tp / dp_attention`
    /// GPUs runs attention for its own sequences, with its own KV cache; the FFNs span all `tp`
    /// GPUs, tokens exchanged all-to-all. 1: attention is tensor parallel over all `tp`.
    pub dp_attention: u64,
    /// Experts placed whole on GPUs (expert parallelism) instead of sliced by tensor
    /// parallelism. Same bytes and FLOPs per GPU under uniform routing; `moe_imbalance` prices
    /// the skew.
    pub ep: bool,
    /// Pipeline stages, each of `tp` GPUs holding its share of the layers (vLLM and SGLang
    /// `--pipeline-parallel-size`): the instance has `tp × pp` GPUs ([`super::Pipeline`]).
    pub pp: u64,
}

impl Layout {
    /// `-dp8-ep` or `-pp2` style suffix for names and reports ("" for plain tensor parallelism).
    pub fn suffix(&self) -> String {
        let dp = if self.dp_attention > 1 { format!("-dp{}", self.dp_attention) } else { String::new() };
        let pp = if self.pp > 1 { format!("-pp{}", self.pp) } else { String::new() };
        dp + if self.ep { "-ep" } else { "" } + &pp
    }

    /// `, dp-attention 8, ep` or `, pp 2` style words for reports ("" for plain tensor
    /// parallelism).
    pub fn words(&self) -> String {
        let dp = if self.dp_attention > 1 { format!(", dp-attention {}", self.dp_attention) } else { String::new() };
        let pp = if self.pp > 1 { format!(", pp {}", self.pp) } else { String::new() };
        dp + if self.ep { ", ep" } else { "" } + &pp
    }
}

impl Default for Layout {
    fn default() -> Self {
        Layout { dp_attention: 1, ep: false, pp: 1 }
    }
}

impl RooflineParams {
    /// The GPU at its datasheet peaks: every FLOP at peak, every byte at full bandwidth, no
    /// launch, latency or CPU cost — the physical floor of an op's time.
    pub(crate) fn physical() -> RooflineParams {
        RooflineParams {
            compute_efficiency: 1.0,
            memory_efficiency: 1.0,
            interconnect_efficiency: 1.0,
            kernel_launch_us: 0.0,
            allreduce_latency_us: 0.0,
            cpu_overhead_base_us: 0.0,
            cpu_overhead_per_seq_us: 0.0,
            moe_imbalance: 1.0,
        }
    }
}

impl Default for RooflineParams {
    fn default() -> Self {
        RooflineParams {
            compute_efficiency: 0.7,
            memory_efficiency: 0.8,
            interconnect_efficiency: 0.8,
            kernel_launch_us: 3.0,
            allreduce_latency_us: 15.0,
            cpu_overhead_base_us: 806.3,
            cpu_overhead_per_seq_us: 37.48,
            moe_imbalance: 1.0,
        }
    }
}

/// The operators of the roofline, in the order [`Roofline::breakdown`] lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RoofOp {
    Qkv,
    O,
    Moe,
    GateUp,
    Down,
    Prefill,
    Decode,
    Elementwise,
    AllReduce,
    AllToAll,
    LmHead,
}

impl RoofOp {
    pub(crate) fn find(name: &str) -> Option<RoofOp> {
        RoofOp::ALL.iter().copied().find(|o| o.name() == name)
    }

    const ALL: [RoofOp; 11] = [
        RoofOp::Qkv,
        RoofOp::O,
        RoofOp::Moe,
        RoofOp::GateUp,
        RoofOp::Down,
        RoofOp::Prefill,
        RoofOp::Decode,
        RoofOp::Elementwise,
        RoofOp::AllReduce,
        RoofOp::AllToAll,
        RoofOp::LmHead,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            RoofOp::Qkv => "qkv_proj",
            RoofOp::O => "o_proj",
            RoofOp::Moe => "moe_experts",
            RoofOp::GateUp => "gate_up_proj",
            RoofOp::Down => "down_proj",
            RoofOp::Prefill => "attn_prefill",
            RoofOp::Decode => "attn_decode",
            RoofOp::Elementwise => "elementwise",
            RoofOp::AllReduce => "allreduce",
            RoofOp::AllToAll => "all_to_all",
            RoofOp::LmHead => "lm_head",
        }
    }
}

/// The time of one operator class over the whole iteration (all layers), in seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct OpTime {
    pub name: &'static str,
    pub(crate) flops: f64,
    pub(crate) bytes: f64,
    pub seconds: f64,
}

/// Roofline cost model for one instance: a model on `tp` GPUs of one kind.
#[derive(Clone, Debug)]
pub struct Roofline {
    model: ModelSpec,
    gpu: GpuSpec,
    tp: u64,
    params: RooflineParams,
    layout: Layout,
    /// The model's per-GPU dimensions under this layout, worked out once.
    dims: Dims,
    /// The same for one DP attention rank's own batch (no share taken of it): what
    /// [`CostModel::dp_iteration_times`] prices each rank's attention with.
    rank_dims: Dims,
    /// A physical floor ([`Roofline::physical`]): every GEMM's weights in the model's dtype.
    floor: bool,
}

/// What every operator reads of the model and layout, per GPU, as floats.
#[derive(Clone, Debug)]
struct Dims {
    tp: f64,
    layers: f64,
    h: f64,
    hd: f64,
    dp: f64,
    tp_a: u64,
    q_heads: f64,
    kv_heads: f64,
    kvb: f64,
    inter: f64,
    moe_layers: f64,
    dense_layers: f64,
    dense_inter: f64,
    shared: f64,
    full: f64,
    window: f64,
}

impl Dims {
    fn new(m: &ModelSpec, tp: u64, layout: Layout) -> Dims {
        let tp_a = tp / layout.dp_attention;
        let layers = m.layers as f64;
        let moe_layers = m.moe_layers() as f64;
        Dims {
            tp: tp as f64,
            layers,
            h: m.hidden as f64,
            hd: m.head_dim as f64,
            dp: layout.dp_attention as f64,
            tp_a,
            q_heads: m.heads as f64 / tp_a as f64,
            kv_heads: m.kv_heads_per_gpu(tp_a) as f64,
            kvb: m.kv_dtype.element_bytes(),
            inter: m.intermediate as f64 / tp as f64,
            moe_layers,
            dense_layers: layers - moe_layers,
            dense_inter: m.dense_ffn_width() as f64 / tp as f64,
            shared: m.arch.shared_experts as f64,
            full: m.full_attention_layers() as f64,
            window: m.arch.window.map_or(f64::INFINITY, |w| w.tokens as f64),
        }
    }
}

impl Roofline {
    /// Attention and FFNs split `layout`'s way instead of plain tensor parallelism.
    pub fn with_layout(mut self, layout: Layout) -> Roofline {
        self.layout = layout;
        self.dims = Dims::new(&self.model, self.tp, layout);
        self.rank_dims = Dims { dp: 1.0, ..self.dims.clone() };
        self
    }

    pub fn new(model: ModelSpec, gpu: GpuSpec, tp: u64, params: RooflineParams) -> Roofline {
        let dims = Dims::new(&model, tp, Layout::default());
        Roofline { model, gpu, tp, params, layout: Layout::default(), rank_dims: dims.clone(), dims, floor: false }
    }

    /// The same model and TP at the GPU's physical floor ([`RooflineParams::physical`]): every
    /// FLOP at the fastest tensor cores the GPU has (a kernel may use any of them), its weights
    /// read at `weights` (the dtype the measured kernels used, when it is smaller than the
    /// model's).
    pub(crate) fn physical(&self, weights: Option<Dtype>) -> Roofline {
        let mut gpu = self.gpu.clone();
        let peak = [Some(gpu.bf16_flops), gpu.fp8_flops, gpu.fp4_flops].into_iter().flatten().fold(0.0, f64::max);
        (gpu.bf16_flops, gpu.fp8_flops, gpu.fp4_flops) = (peak, Some(peak), Some(peak));
        let mut model = self.model.clone();
        if let Some(w) = weights.filter(|w| w.element_bytes() < model.weight_dtype.element_bytes()) {
            model.weight_dtype = w;
        }
        Roofline { floor: true, ..Roofline::new(model, gpu, self.tp, RooflineParams::physical()) }
    }

    /// The batches a cost is held to the physical floor at, with their words: a decode step of
    /// 1 and of 64 sequences over 1,024 tokens of context each, and a 2,048-token prefill.
    pub(crate) fn floor_probes() -> [(BatchShape, &'static str); 3] {
        let decodes = |n: u64| BatchShape {
            decode_seqs: n,
            decode_context_tokens: n * 1024,
            sampled_seqs: n,
            ..BatchShape::default()
        };
        let mut prefill = BatchShape::default();
        prefill.add_prefill(2048, 0, true);
        [
            (decodes(1), "a decode step of 1 sequence"),
            (decodes(64), "a decode step of 64 sequences"),
            (prefill, "a 2,048-token prefill"),
        ]
    }

    /// On a floor ([`Roofline::physical`]): the time of the ops whose floor is certain over `b`
    /// — the dense GEMMs (their weights must be read) and decode attention (its KV must be
    /// read); not the experts, which of them a step reads depends on the routing.
    pub(crate) fn certain_floor(&self, b: &BatchShape) -> f64 {
        ["qkv_proj", "o_proj", "gate_up_proj", "down_proj", "attn_decode"].iter().map(|op| self.op_seconds(op, b)).sum()
    }

    /// `S µs the GPU needs at its peaks (B GB/s, F TFLOP/s)`: a floor of `seconds`, in the
    /// words of the errors that refuse a time below it.
    pub(crate) fn floor_words(&self, seconds: f64) -> String {
        let g = &self.gpu;
        format!(
            "{:.2} µs the {} needs at its peaks ({:.0} GB/s, {:.0} TFLOP/s)",
            seconds * 1e6,
            g.name,
            g.hbm_bytes_per_s / 1e9,
            g.bf16_flops / 1e12
        )
    }

    pub fn params(&self) -> &RooflineParams {
        &self.params
    }

    /// Peak FLOP/s of GEMMs over weights of `dtype`: fp8 weights use fp8 tensor cores where
    /// the GPU has them (W8A8), 4-bit weights fp4 tensor cores (Blackwell); otherwise they are
    /// dequantised and multiplied in bf16 (weight-only, as Hopper runs MXFP4 experts).
    fn gemm_peak(&self, dtype: Dtype) -> f64 {
        match (dtype, self.gpu.fp8_flops, self.gpu.fp4_flops) {
            (Dtype::Fp8, Some(f), _) => f,
            (Dtype::Nvfp4 | Dtype::Mxfp4, _, Some(f)) => f,
            _ => self.gpu.bf16_flops,
        }
    }

    fn roof(&self, flops: f64, bytes: f64, peak: f64) -> f64 {
        let compute = flops / (peak * self.params.compute_efficiency);
        let memory = bytes / (self.gpu.hbm_bytes_per_s * self.params.memory_efficiency);
        compute.max(memory)
    }

    /// A GEMM of `n` tokens by a `k × m` FFN weight matrix (one layer), bf16 activations.
    fn gemm(&self, n: f64, k: f64, m: f64) -> (f64, f64, f64) {
        self.gemm_of(self.model.weight_dtype, n, k, m)
    }

    /// A GEMM over an attention projection: in the projections' own dtype
    /// ([`ModelSpec::attention_weight_dtype`]: bf16 for a 4-bit model unless its checkpoint
    /// says otherwise); the floor takes the weight dtype, the fastest.
    fn gemm_attn(&self, n: f64, k: f64, m: f64) -> (f64, f64, f64) {
        let d = if self.floor { self.model.weight_dtype } else { self.model.attention_weight_dtype() };
        self.gemm_of(d, n, k, m)
    }

    fn gemm_of(&self, dtype: Dtype, n: f64, k: f64, m: f64) -> (f64, f64, f64) {
        let wb = dtype.element_bytes();
        let flops = 2.0 * n * k * m;
        let bytes = k * m * wb + 2.0 * n * (k + m);
        (flops, bytes, self.roof(flops, bytes, self.gemm_peak(dtype)))
    }

    /// Every operator's time over the whole iteration, without launch and CPU overheads.
    pub fn breakdown(&self, b: &BatchShape) -> Vec<OpTime> {
        RoofOp::ALL.iter().filter_map(|&op| self.op(op, b)).collect()
    }

    /// One operator's time over the whole iteration (0 when the batch does not run it), by its
    /// name in [`Roofline::breakdown`].
    pub fn op_seconds(&self, name: &str, b: &BatchShape) -> f64 {
        RoofOp::find(name).map_or(0.0, |o| self.op_time(o, b))
    }

    /// [`Roofline::op_seconds`] of an op already looked up.
    pub(crate) fn op_time(&self, op: RoofOp, b: &BatchShape) -> f64 {
        self.op(op, b).map_or(0.0, |t| t.seconds)
    }

    /// Attention ([`RoofOp::Prefill`], [`RoofOp::Decode`]) in one layer of one kind: a full
    /// attention layer, or (`windowed`) one of a windowed model's windowed layers.
    pub(crate) fn attention_layer_time(&self, op: RoofOp, b: &BatchShape, windowed: bool) -> f64 {
        self.op_in(op, b, Some(windowed)).map_or(0.0, |t| t.seconds)
    }

    /// One operator over the whole iteration, or None when this model or batch does not run it.
    /// Layers of different kinds (MoE and dense FFNs; full and windowed attention) are priced
    /// per kind and summed.
    fn op(&self, op: RoofOp, b: &BatchShape) -> Option<OpTime> {
        self.op_in(op, b, None)
    }

    /// [`Roofline::op`]; attention in one layer of the kind `only` names (windowed or not)
    /// instead of all layers.
    fn op_in(&self, op: RoofOp, b: &BatchShape, only: Option<bool>) -> Option<OpTime> {
        self.op_with(&self.dims, op, b, only)
    }

    /// [`Roofline::op_in`] over the dimensions `dims` (the layout's, or one rank's).
    fn op_with(&self, dims: &Dims, op: RoofOp, b: &BatchShape, only: Option<bool>) -> Option<OpTime> {
        let m = &self.model;
        let Dims {
            tp,
            layers,
            h,
            hd,
            dp,
            tp_a,
            q_heads,
            kv_heads,
            kvb,
            inter,
            moe_layers,
            dense_layers,
            dense_inter,
            shared,
            window,
            ..
        } = *dims;
        let n = b.tokens() as f64;
        let (full_k, window_k) = attention_layers(only, dims.full, layers);
        // Attention: `dp` ranks of `tp / dp` GPUs, a balanced share of the batch each; FFNs: all.
        let na = n / dp;
        let times = |name, (flops, bytes, seconds): (f64, f64, f64), k: f64| {
            (k > 0.0).then_some(OpTime { name, flops: flops * k, bytes: bytes * k, seconds: seconds * k })
        };
        let add = |a: (f64, f64, f64), b: (f64, f64, f64)| (a.0 + b.0, a.1 + b.1, a.2 + b.2);
        match op {
            RoofOp::Qkv => match m.arch.mla {
                // MLA: Q through its low-rank pair (q_a replicated on every GPU, q_b split by
                // head), the joint KV down-projection (replicated).
                Some(a) => {
                    let qk = (a.qk_nope_head_dim + a.qk_rope_head_dim) as f64;
                    let q = match a.q_lora_rank as f64 {
                        r if r > 0.0 => add(self.gemm_attn(na, h, r), self.gemm_attn(na, r, q_heads * qk)),
                        _ => self.gemm_attn(na, h, q_heads * qk),
                    };
                    let kv = self.gemm_attn(na, h, (a.kv_lora_rank + a.qk_rope_head_dim) as f64);
                    times(op.name(), add(q, kv), layers)
                }
                None => times(op.name(), self.gemm_attn(na, h, (q_heads + 2.0 * kv_heads) * hd), layers),
            },
            RoofOp::O => {
                let v = m.arch.mla.map_or(hd, |a| a.v_head_dim as f64);
                times(op.name(), self.gemm_attn(na, q_heads * v, h), layers)
            }
            RoofOp::Moe if moe_layers > 0.0 => {
                // Tokens are routed to top_k of E experts; with uniform routing the expected
                // number of distinct experts whose weights a step reads is E·(1 − (1 − k/E)^n).
                let e = m.experts as f64;
                let k = m.top_k as f64;
                let active = e * (1.0 - (1.0 - k / e).powf(n));
                let wb = m.weight_dtype.element_bytes();
                let flops = 2.0 * n * k * 3.0 * h * inter;
                let bytes = active * 3.0 * h * inter * wb + 2.0 * n * k * (2.0 * h + 3.0 * inter);
                let peak = self.gemm_peak(m.weight_dtype);
                let mut t = (flops, bytes, self.roof(flops, bytes, peak));
                if shared > 0.0 {
                    // Shared experts: a dense gated MLP every token goes through.
                    t = add(t, add(self.gemm(n, h, 2.0 * shared * inter), self.gemm(n, shared * inter, h)));
                }
                let skew = self.params.moe_imbalance;
                times(op.name(), (t.0, t.1, t.2 * skew), moe_layers)
            }
            RoofOp::GateUp if dense_inter > 0.0 => times(op.name(), self.gemm(n, h, 2.0 * dense_inter), dense_layers),
            RoofOp::Down if dense_inter > 0.0 => times(op.name(), self.gemm(n, dense_inter, h), dense_layers),
            RoofOp::Prefill if b.prefill_tokens > 0 => {
                let new = b.prefill_tokens as f64;
                let cached = b.prefill_cached_tokens as f64;
                // A windowed layer's query sees at most `window` keys.
                let pairs = |windowed: bool| {
                    if windowed {
                        b.prefill_attn_pairs.min(new * window)
                    } else {
                        b.prefill_attn_pairs
                    }
                };
                let kind = |l: bool| match m.arch.mla {
                    // MLA prefill (not absorbed): the latent of every token in context is
                    // up-projected to per-head K and V (kv_b), then attention over 192-wide
                    // keys and 128-wide values.
                    Some(a) => {
                        let (nope, rope, v) =
                            (a.qk_nope_head_dim as f64, a.qk_rope_head_dim as f64, a.v_head_dim as f64);
                        let up = self.gemm_attn(new + cached, a.kv_lora_rank as f64, q_heads * (nope + v));
                        let flops = 2.0 * q_heads * (nope + rope + v) * pairs(l);
                        let bytes = new * q_heads * (nope + rope) * 2.0
                            + (new + cached) * (a.kv_lora_rank as f64 + rope) * kvb
                            + (new + cached) * q_heads * (nope + rope + v) * 2.0;
                        add(up, (flops, bytes, self.roof(flops, bytes, self.gpu.bf16_flops)))
                    }
                    // QKᵀ and PV: 2 FLOPs per multiply-add each, per query head and causal pair.
                    None => {
                        let flops = 4.0 * q_heads * hd * pairs(l);
                        let bytes =
                            new * (2.0 * q_heads + 2.0 * kv_heads) * hd * 2.0 + cached * 2.0 * kv_heads * hd * kvb;
                        (flops, bytes, self.roof(flops, bytes, self.gpu.bf16_flops))
                    }
                };
                sum(op.name(), [times(op.name(), kind(false), full_k), times(op.name(), kind(true), window_k)])
            }
            RoofOp::Decode if b.decode_seqs > 0 => {
                let seqs = b.decode_seqs as f64 / dp;
                // Each decode reads its whole context's K and V once (a windowed layer's last
                // `window` tokens: a bound, exact when every context is longer).
                let ctx = |windowed: bool| {
                    let c = b.decode_context_tokens as f64 / dp;
                    if windowed {
                        c.min(seqs * window)
                    } else {
                        c
                    }
                };
                let kind = |l: bool| match m.arch.mla {
                    // MLA decode, absorbed: each query head attends over the 576-wide latent
                    // keys and 512-wide latent values; W_UK and W_UV are applied per sequence.
                    Some(a) => {
                        let (lat, rope, nope, v) = (
                            a.kv_lora_rank as f64,
                            a.qk_rope_head_dim as f64,
                            a.qk_nope_head_dim as f64,
                            a.v_head_dim as f64,
                        );
                        let absorb =
                            add(self.gemm_attn(seqs, q_heads * nope, lat), self.gemm_attn(seqs, lat, q_heads * v));
                        let flops = 2.0 * q_heads * (lat + rope + lat) * ctx(l);
                        let bytes = ctx(l) * (lat + rope) * kvb + seqs * q_heads * (lat + rope + lat) * 2.0;
                        add(absorb, (flops, bytes, self.roof(flops, bytes, self.gpu.bf16_flops)))
                    }
                    None => {
                        let flops = 4.0 * q_heads * hd * ctx(l);
                        let bytes = ctx(l) * 2.0 * kv_heads * hd * kvb + seqs * 2.0 * q_heads * hd * 2.0;
                        (flops, bytes, self.roof(flops, bytes, self.gpu.bf16_flops))
                    }
                };
                sum(op.name(), [times(op.name(), kind(false), full_k), times(op.name(), kind(true), window_k)])
            }
            RoofOp::Elementwise => {
                // Memory-bound elementwise work per layer: two RMSNorms (read+write hidden),
                // RoPE on Q and K, the KV write, two residual adds and SiLU·mul over the FFN
                // width.
                let kv_write = match m.arch.mla {
                    Some(a) => na * (a.kv_lora_rank + a.qk_rope_head_dim) as f64 * kvb,
                    None => na * 2.0 * kv_heads * hd * kvb,
                };
                let per_layer = |ffn: f64| {
                    let bytes = na * 2.0 * (4.0 * h + 2.0 * (q_heads + kv_heads) * hd + 4.0 * h + 3.0 * ffn) + kv_write;
                    (0.0, bytes, self.roof(0.0, bytes, self.gpu.bf16_flops))
                };
                let moe_ffn = inter * (m.top_k as f64 + shared);
                sum(
                    op.name(),
                    [
                        times(op.name(), per_layer(moe_ffn), moe_layers),
                        times(op.name(), per_layer(dense_inter), dense_layers),
                    ],
                )
            }
            RoofOp::AllReduce if tp_a > 1 => {
                // Two ring all-reduces of the hidden state per layer (within an attention rank
                // under DP attention, which then has no FFN all-reduce).
                let bytes = na * h * 2.0;
                let bw = self.link_bytes_per_s(tp_a) * self.params.interconnect_efficiency;
                let tp_a = tp_a as f64;
                let secs = self.params.allreduce_latency_us * 1e-6 + 2.0 * (tp_a - 1.0) / tp_a * bytes / bw;
                let per_layer = if self.layout.dp_attention > 1 { 1.0 } else { 2.0 };
                times(op.name(), (0.0, bytes, secs), per_layer * layers)
            }
            RoofOp::AllToAll if self.layout.dp_attention > 1 => {
                // DP attention: each rank sends its tokens' hidden states to the GPUs of their
                // experts and takes the results back (dispatch and combine, as DeepEP does):
                // per MoE layer each token goes to at most top_k GPUs, (tp − 1)/tp of them
                // elsewhere; a dense FFN layer gathers and scatters every token.
                let bw = self.link_bytes_per_s(self.tp) * self.params.interconnect_efficiency;
                let lat = self.params.allreduce_latency_us * 1e-6;
                let away = (tp - 1.0) / tp;
                let moe = na * (m.top_k as f64).min(tp) * h * 2.0 * away;
                let dense = n * h * 2.0 * away;
                sum(
                    op.name(),
                    [
                        times(op.name(), (0.0, moe, lat + moe / bw), 2.0 * moe_layers),
                        times(op.name(), (0.0, dense, lat + dense / bw), 2.0 * dense_layers),
                    ],
                )
            }
            RoofOp::LmHead if b.sampled_seqs > 0 => {
                times(op.name(), self.gemm_attn(b.sampled_seqs as f64, h, m.vocab as f64 / tp), 1.0)
            }
            _ => None,
        }
    }

    /// The bandwidth a collective over `gpus` GPUs runs at: the GPUs' interconnect within a
    /// node; a ring over more than a node's GPUs waits on the network between nodes, each
    /// GPU's share of it (AIConfigurator's collectives scale so too:
    /// aic-core/.../operators/communication.rs, by intra_node_bw / inter_node_bw beyond a node).
    fn link_bytes_per_s(&self, gpus: u64) -> f64 {
        if gpus > self.gpu.gpus_per_node() {
            self.gpu.network_bytes_per_s().min(self.gpu.interconnect_bytes_per_s)
        } else {
            self.gpu.interconnect_bytes_per_s
        }
    }

    /// Kernels launched in one iteration.
    pub fn kernels(&self, b: &BatchShape) -> u64 {
        let attn = (b.prefill_tokens > 0) as u64 + (b.decode_seqs > 0) as u64;
        let tp = if self.tp > 1 { 2 } else { 0 };
        // norm, qkv, rope, kv write, o, norm, gate_up, act, down (+ attention, all-reduces).
        let per_layer = 9 + attn + tp;
        // embedding, final norm, lm_head, sampling.
        self.model.layers * per_layer + 4
    }

    /// CPU time of one iteration: scheduling, input preparation, sampling, output processing.
    pub fn cpu_overhead_s(&self, b: &BatchShape) -> f64 {
        (self.params.cpu_overhead_base_us + self.params.cpu_overhead_per_seq_us * b.seqs() as f64) * 1e-6
    }

    /// The ops a DP attention rank runs on its own batch, over its `tp / dp_attention` GPUs;
    /// the others (the experts, dense FFN layers, the all-to-all, the LM head) run on every
    /// rank's tokens together.
    const RANK_OPS: [RoofOp; 6] =
        [RoofOp::Qkv, RoofOp::O, RoofOp::Prefill, RoofOp::Decode, RoofOp::Elementwise, RoofOp::AllReduce];

    /// One lock-step iteration of DP attention ranks, each with its own batch (an idle rank's
    /// empty), in seconds, and its CPU part: the slowest rank's own ops, kernel launches and CPU
    /// work (each rank its own engine process), plus the ops over every rank's tokens — the
    /// all-to-all at the ranks' mean share, as [`Roofline::breakdown`] prices it.
    pub fn dp_iteration_seconds(&self, ranks: &[BatchShape]) -> (f64, f64) {
        let union = BatchShape::union(ranks);
        if union.is_empty() {
            return (0.0, 0.0);
        }
        let (mut slowest, mut slowest_cpu) = (0.0, 0.0);
        for b in ranks.iter().filter(|b| !b.is_empty()) {
            let own: f64 = Roofline::RANK_OPS
                .iter()
                .filter_map(|&op| self.op_with(&self.rank_dims, op, b, None))
                .map(|o| o.seconds)
                .sum();
            let cpu = self.cpu_overhead_s(b);
            let t = own + self.kernels(b) as f64 * self.params.kernel_launch_us * 1e-6 + cpu;
            if t > slowest {
                (slowest, slowest_cpu) = (t, cpu);
            }
        }
        let shared: f64 = RoofOp::ALL
            .iter()
            .filter(|op| !Roofline::RANK_OPS.contains(op))
            .filter_map(|&op| self.op(op, &union))
            .map(|o| o.seconds)
            .sum();
        (slowest + shared, slowest_cpu)
    }

    /// Iteration time in seconds, before rounding to integer nanoseconds.
    pub fn iteration_seconds(&self, b: &BatchShape) -> f64 {
        if b.is_empty() {
            return 0.0;
        }
        let gpu: f64 = RoofOp::ALL.iter().filter_map(|&op| self.op(op, b)).map(|o| o.seconds).sum();
        gpu + self.kernels(b) as f64 * self.params.kernel_launch_us * 1e-6 + self.cpu_overhead_s(b)
    }
}

/// Attention's layers of each kind (full, windowed) an op sums: all of them, or one of the
/// kind `only` names.
fn attention_layers(only: Option<bool>, full: f64, layers: f64) -> (f64, f64) {
    match only {
        None => (full, layers - full),
        Some(false) => (1.0, 0.0),
        Some(true) => (0.0, 1.0),
    }
}

/// The parts of one operator over layers of different kinds, summed (one part is returned as
/// it is).
fn sum<const N: usize>(name: &'static str, parts: [Option<OpTime>; N]) -> Option<OpTime> {
    let mut present = parts.into_iter().flatten();
    let first = present.next()?;
    Some(present.fold(first, |a, b| OpTime {
        name,
        flops: a.flops + b.flops,
        bytes: a.bytes + b.bytes,
        seconds: a.seconds + b.seconds,
    }))
}

impl CostModel for Roofline {
    fn iteration_time(&self, b: &BatchShape) -> SimTime {
        to_ns(self.iteration_seconds(b))
    }

    fn dp_iteration_times(&self, ranks: &[BatchShape], _acc: Option<&mut CostAccount>) -> (SimTime, SimTime) {
        if self.layout.dp_attention <= 1 {
            return self.iteration_times(&BatchShape::union(ranks), None);
        }
        let (total, cpu) = self.dp_iteration_seconds(ranks);
        (to_ns(total), cpu_ns(cpu))
    }

    fn cpu_time(&self, b: &BatchShape) -> SimTime {
        if b.is_empty() {
            return SimTime::ZERO;
        }
        SimTime((self.cpu_overhead_s(b) * 1e9).round() as u64)
    }

    fn head_time(&self, b: &BatchShape) -> SimTime {
        let s = self.op(RoofOp::LmHead, b).map_or(0.0, |o| o.seconds);
        SimTime((s * 1e9).round() as u64)
    }

    fn collective_time(&self, b: &BatchShape) -> SimTime {
        if b.is_empty() {
            return SimTime::ZERO;
        }
        let s: f64 =
            [RoofOp::AllReduce, RoofOp::AllToAll].iter().filter_map(|&op| self.op(op, b)).map(|o| o.seconds).sum();
        SimTime((s * 1e9).round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{GpuPreset, ModelPreset};

    fn llama8b_h100(tp: u64, params: RooflineParams) -> Roofline {
        let m = ModelSpec::from_preset(ModelPreset::find("llama-3-8b").unwrap(), Dtype::Bf16, Dtype::Bf16);
        let g = GpuPreset::find("h100-sxm").unwrap().spec();
        Roofline::new(m, g, tp, params)
    }

    fn no_overheads() -> RooflineParams {
        RooflineParams {
            kernel_launch_us: 0.0,
            cpu_overhead_base_us: 0.0,
            cpu_overhead_per_seq_us: 0.0,
            allreduce_latency_us: 0.0,
            ..RooflineParams::default()
        }
    }

    /// A speculative verification of 4 tokens over 2,000 (`BatchShape::add_verify`) reads the
    /// sequence's KV once, as a decode over 2,000 does: 2,000 × 131,072 B at 80% of 3.35 TB/s;
    /// its GEMMs see 4 tokens (here memory-bound: the same weights read), its LM head 4 rows.
    #[test]
    fn a_verification_reads_the_kv_once_and_computes_every_token() {
        let r = llama8b_h100(1, no_overheads());
        let (mut verify, mut decode) = (BatchShape::default(), BatchShape::default());
        verify.add_verify(4, 2000);
        decode.add_decode(2000);
        let op = |b: &BatchShape, name: &str| r.op_seconds(name, b);
        let kv = op(&decode, "attn_decode");
        assert!((kv / (2000.0 * 131_072.0 / (0.8 * 3.35e12)) - 1.0).abs() < 0.05, "{kv}");
        assert!((op(&verify, "attn_decode") / kv - 1.0).abs() < 0.01, "{} vs {kv}", op(&verify, "attn_decode"));
        assert_eq!((verify.tokens(), verify.sampled_seqs), (4, 4));
        assert!(op(&verify, "lm_head") >= op(&decode, "lm_head"));
    }

    #[test]
    fn an_all_reduce_beyond_a_node_waits_on_the_network() {
        // One decode of llama-3-8b (32 layers, hidden 4096): two all-reduces of 8,192 bytes
        // per layer, each ring moving 2 × (tp − 1)/tp of them. TP 16 spans two nodes of 8
        // H100s: 50 GB/s per GPU (× 0.8 efficiency) instead of NVLink's 450.
        let mut b = BatchShape::default();
        b.add_decode(1);
        let secs = |tp: u64| {
            let r = llama8b_h100(tp, no_overheads());
            r.breakdown(&b).iter().find(|o| o.name == "allreduce").unwrap().seconds
        };
        let per_ring = |tp: f64, bw: f64| 2.0 * (tp - 1.0) / tp * 8192.0 / (bw * 0.8);
        assert!((secs(16) - 64.0 * per_ring(16.0, 50e9)).abs() < 1e-12, "{}", secs(16));
        assert!((secs(8) - 64.0 * per_ring(8.0, 450e9)).abs() < 1e-12, "{}", secs(8));
    }

    #[test]
    fn single_decode_is_bound_by_reading_the_weights() {
        let r = llama8b_h100(1, no_overheads());
        let mut b = BatchShape::default();
        b.add_decode(1);
        let ops = r.breakdown(&b);
        let qkv = ops.iter().find(|o| o.name == "qkv_proj").unwrap();
        // One layer's QKV weight: 4096 × (32 + 2·8)·128 bf16 = 50,331,648 B, plus 2 × (4096 + 6144)
        // bytes of activations; memory-bound at 3.35 TB/s × 0.8.
        let bytes = 4096.0 * 6144.0 * 2.0 + 2.0 * (4096.0 + 6144.0);
        let expected = 32.0 * bytes / (3.35e12 * 0.8);
        assert!((qkv.seconds - expected).abs() / expected < 1e-12, "{} vs {expected}", qkv.seconds);
        // The whole step is within 3% of streaming all weights once (attention and
        // activations are tiny at context 1).
        // Every weight but the embedding table (looked up, not streamed) is read once.
        let weights = (8_030_261_248.0 - 128_256.0 * 4096.0) * 2.0;
        let floor = weights / (3.35e12 * 0.8);
        let t = r.iteration_seconds(&b);
        assert!(t > floor * 0.97 && t < floor * 1.03, "{t} vs {floor}");
    }

    #[test]
    fn large_prefill_is_compute_bound() {
        let r = llama8b_h100(1, no_overheads());
        let mut b = BatchShape::default();
        b.add_prefill(8192, 0, true);
        let ops = r.breakdown(&b);
        let gu = ops.iter().find(|o| o.name == "gate_up_proj").unwrap();
        let expected = 32.0 * 2.0 * 8192.0 * 4096.0 * 2.0 * 14336.0 / (989.4e12 * 0.7);
        assert!((gu.seconds - expected).abs() / expected < 1e-12);
        let attn = ops.iter().find(|o| o.name == "attn_prefill").unwrap();
        let pairs = 8192.0 * 8193.0 / 2.0;
        assert_eq!(attn.flops, 32.0 * 4.0 * 32.0 * 128.0 * pairs);
    }

    #[test]
    fn overheads_add_per_kernel_and_per_sequence() {
        let base = llama8b_h100(1, no_overheads());
        let with = llama8b_h100(1, RooflineParams::default());
        let mut b = BatchShape::default();
        for _ in 0..10 {
            b.add_decode(500);
        }
        let p = RooflineParams::default();
        let kernels = 32 * (9 + 1) + 4;
        let extra = kernels as f64 * p.kernel_launch_us * 1e-6
            + (p.cpu_overhead_base_us + 10.0 * p.cpu_overhead_per_seq_us) * 1e-6;
        let diff = with.iteration_seconds(&b) - base.iteration_seconds(&b);
        assert!((diff - extra).abs() < 1e-12, "{diff} vs {extra}");
    }

    #[test]
    fn tensor_parallel_splits_work_and_adds_allreduce() {
        let mut b = BatchShape::default();
        b.add_decode(1000);
        let t1 = llama8b_h100(1, no_overheads()).iteration_seconds(&b);
        let t2 = llama8b_h100(2, no_overheads()).iteration_seconds(&b);
        assert!(t2 < t1 * 0.6 && t2 > t1 * 0.45, "t1 {t1} t2 {t2}");
        let ops = llama8b_h100(2, no_overheads()).breakdown(&b);
        let ar = ops.iter().find(|o| o.name == "allreduce").unwrap();
        // 64 all-reduces of 1 token × 4096 × 2 B over a 450 GB/s × 0.8 ring of 2.
        let expected = 64.0 * (2.0 * 0.5 * 8192.0 / (450e9 * 0.8));
        assert!((ar.seconds - expected).abs() < 1e-15);
    }

    #[test]
    fn iteration_time_is_positive_and_monotone_in_work() {
        let r = llama8b_h100(1, RooflineParams::default());
        let mut prev = SimTime::ZERO;
        for n in [1u64, 16, 256, 4096, 16384] {
            let mut b = BatchShape::default();
            b.add_prefill(n, 0, true);
            let t = r.iteration_time(&b);
            assert!(t > prev, "prefill {n}: {t} ≤ {prev}");
            prev = t;
        }
        let mut huge = BatchShape::default();
        huge.add_prefill(1_000_000_000, 0, true);
        assert!(r.iteration_time(&huge) > SimTime::ZERO);
    }

    #[test]
    fn moe_reads_only_the_routed_experts_at_batch_one() {
        let m = ModelSpec::from_preset(ModelPreset::find("mixtral-8x7b").unwrap(), Dtype::Bf16, Dtype::Bf16);
        let g = GpuPreset::find("h100-sxm").unwrap().spec();
        let r = Roofline::new(m.clone(), g, 2, no_overheads());
        let mut one = BatchShape::default();
        one.add_decode(10);
        let moe = |b: &BatchShape| r.breakdown(b).into_iter().find(|o| o.name == "moe_experts").unwrap().bytes;
        let expert_bytes = 3.0 * 4096.0 * 14336.0 / 2.0 * 2.0 * 32.0;
        // One token reads exactly top_k = 2 experts per layer.
        assert!((moe(&one) / expert_bytes - 2.0).abs() < 0.01);
        let mut many = BatchShape::default();
        for _ in 0..64 {
            many.add_decode(10);
        }
        // 64 tokens touch essentially all 8.
        assert!((moe(&many) / expert_bytes - 8.0).abs() < 0.05);
    }

    fn op(r: &Roofline, b: &BatchShape, name: &str) -> Option<OpTime> {
        r.breakdown(b).into_iter().find(|o| o.name == name)
    }

    fn decodes(n: u64, ctx: u64) -> BatchShape {
        let mut b = BatchShape::default();
        for _ in 0..n {
            b.add_decode(ctx);
        }
        b
    }

    #[test]
    fn dp_attention_runs_each_ranks_share_of_the_batch() {
        let m = ModelSpec::from_preset(ModelPreset::find("deepseek-r1").unwrap(), Dtype::Fp8, Dtype::Bf16);
        let g = GpuPreset::find("h200").unwrap().spec();
        let dp = Roofline::new(m.clone(), g.clone(), 8, no_overheads()).with_layout(Layout {
            dp_attention: 8,
            ep: true,
            pp: 1,
        });
        let one = Roofline::new(m.clone(), g.clone(), 1, no_overheads());
        // 64 decodes over 8 ranks: each rank's attention is one GPU's over 8 of them.
        let (b64, b8) = (decodes(64, 1000), decodes(8, 1000));
        for name in ["attn_decode", "qkv_proj", "o_proj"] {
            assert_eq!(op(&dp, &b64, name).unwrap().seconds, op(&one, &b8, name).unwrap().seconds, "{name}");
        }
        // No all-reduce (attention TP 1 per rank); dispatch and combine instead: per MoE layer
        // 8 tokens × 8 GPUs × 7168 × 2 bytes × 7/8 each way, per dense layer all 64 tokens.
        assert!(op(&dp, &b64, "allreduce").is_none());
        let a2a = op(&dp, &b64, "all_to_all").unwrap();
        let moe = 8.0 * 8.0 * 7168.0 * 2.0 * 7.0 / 8.0;
        let dense = 64.0 * 7168.0 * 2.0 * 7.0 / 8.0;
        assert!((a2a.bytes - (2.0 * 58.0 * moe + 2.0 * 3.0 * dense)).abs() < 1e-6, "{}", a2a.bytes);
        // Plain TP8 all-reduces twice per layer and has no all-to-all.
        let tp = Roofline::new(m, g, 8, no_overheads());
        assert!(op(&tp, &b64, "all_to_all").is_none());
        assert!((op(&tp, &b64, "allreduce").unwrap().bytes - 2.0 * 61.0 * 64.0 * 7168.0 * 2.0).abs() < 1e-6);
    }

    #[test]
    fn dp_ranks_step_together_at_the_slowest_ranks_pace() {
        let m = ModelSpec::from_preset(ModelPreset::find("deepseek-r1").unwrap(), Dtype::Fp8, Dtype::Bf16);
        let g = GpuPreset::find("h200").unwrap().spec();
        let layout = Layout { dp_attention: 8, ep: true, pp: 1 };
        let dp = Roofline::new(m.clone(), g.clone(), 8, no_overheads()).with_layout(layout);
        let secs = |ranks: &[BatchShape]| dp.dp_iteration_seconds(ranks).0;
        // Eight ranks of 8 decodes each: what the layout prices 64 decodes at (an even share
        // per rank, the experts over all 64).
        let even = [decodes(8, 1000); 8];
        assert!((secs(&even) - dp.iteration_seconds(&decodes(64, 1000))).abs() < 1e-12);
        // All 64 on one rank, seven idle: that rank's attention and projections are those of 64
        // decodes on one GPU (the layout's over 8 × 64), the experts' still those of 64 tokens.
        let mut lopsided = [BatchShape::default(); 8];
        lopsided[3] = decodes(64, 1000);
        let own = |b: &BatchShape| -> f64 {
            ["qkv_proj", "o_proj", "attn_decode", "elementwise", "allreduce"]
                .iter()
                .map(|n| op(&dp, b, n).map_or(0.0, |o| o.seconds))
                .sum()
        };
        let shared: f64 = ["moe_experts", "gate_up_proj", "down_proj", "all_to_all", "lm_head"]
            .iter()
            .map(|n| op(&dp, &decodes(64, 1000), n).map_or(0.0, |o| o.seconds))
            .sum();
        let lopsided_s = own(&decodes(512, 1000)) + shared;
        assert!((secs(&lopsided) - lopsided_s).abs() < 1e-12, "{} vs {lopsided_s}", secs(&lopsided));
        // Slower than the even split by exactly the busy rank's extra attention and projections.
        let extra = own(&decodes(512, 1000)) - own(&decodes(64, 1000));
        assert!(extra > 0.0 && (secs(&lopsided) - secs(&even) - extra).abs() < 1e-12);
        // The CPU part is the slowest rank's (each rank its own engine process).
        let cpu = Roofline::new(m, g, 8, RooflineParams::default()).with_layout(layout);
        let (_, c) = cpu.dp_iteration_seconds(&lopsided);
        assert!((c - cpu.cpu_overhead_s(&decodes(64, 1000))).abs() < 1e-15);
        assert_eq!(cpu.dp_iteration_seconds(&[BatchShape::default(); 8]), (0.0, 0.0));
    }

    #[test]
    fn mla_decode_reads_the_latent_once_per_token() {
        let m = ModelSpec::from_preset(ModelPreset::find("deepseek-v3").unwrap(), Dtype::Fp8, Dtype::Bf16);
        let g = GpuPreset::find("h200").unwrap().spec();
        let r = Roofline::new(m, g, 8, no_overheads());
        let a = op(&r, &decodes(4, 1000), "attn_decode").unwrap();
        let b = op(&r, &decodes(4, 2000), "attn_decode").unwrap();
        // Doubling the context adds 4 × 1000 tokens × 576 latent values × 2 bytes per layer.
        assert!((b.bytes - a.bytes - 61.0 * 4000.0 * 576.0 * 2.0).abs() < 1e-3, "{}", b.bytes - a.bytes);
        // And per head 2 × (576 + 512) FLOPs per token: 16 heads per GPU at TP 8.
        assert!((b.flops - a.flops - 61.0 * 4000.0 * 16.0 * 2.0 * 1088.0).abs() < 1.0);
    }

    #[test]
    fn windowed_layers_read_at_most_their_window() {
        let m = ModelSpec::from_preset(ModelPreset::find("gpt-oss-120b").unwrap(), Dtype::Mxfp4, Dtype::Bf16);
        let g = GpuPreset::find("h100-sxm").unwrap().spec();
        let r = Roofline::new(m, g, 1, no_overheads());
        let kv = |ctx| op(&r, &decodes(1, ctx), "attn_decode").unwrap().bytes;
        // Per layer and token: 2 × 8 KV heads × 64 × 2 bytes = 2048. Past the 128-token window
        // only the 18 full layers read more.
        assert!((kv(1128) - kv(128) - 1000.0 * 18.0 * 2048.0).abs() < 1e-6);
        assert!((kv(128) - kv(64) - 64.0 * 36.0 * 2048.0).abs() < 1e-6);
    }

    #[test]
    fn moe_imbalance_stretches_the_expert_layers_only() {
        let m = ModelSpec::from_preset(ModelPreset::find("qwen3-30b-a3b").unwrap(), Dtype::Bf16, Dtype::Bf16);
        let g = GpuPreset::find("h100-sxm").unwrap().spec();
        let even = Roofline::new(m.clone(), g.clone(), 1, no_overheads());
        let skewed = Roofline::new(m, g, 1, RooflineParams { moe_imbalance: 1.5, ..no_overheads() });
        let b = decodes(32, 500);
        let (e, s) = (op(&even, &b, "moe_experts").unwrap(), op(&skewed, &b, "moe_experts").unwrap());
        assert_eq!(s.seconds, e.seconds * 1.5);
        assert_eq!(op(&even, &b, "attn_decode"), op(&skewed, &b, "attn_decode"));
    }

    #[test]
    fn four_bit_experts_use_fp4_tensor_cores_only_where_there_are_some() {
        let m = ModelSpec::from_preset(ModelPreset::find("gpt-oss-120b").unwrap(), Dtype::Mxfp4, Dtype::Bf16);
        let mut prefill = BatchShape::default();
        prefill.add_prefill(65536, 0, true);
        let moe = |gpu: &str| {
            let r = Roofline::new(m.clone(), GpuPreset::find(gpu).unwrap().spec(), 1, no_overheads());
            op(&r, &prefill, "moe_experts").unwrap()
        };
        let (h, b) = (moe("h100-sxm"), moe("b200"));
        let gh = GpuPreset::find("h100-sxm").unwrap().spec();
        let gb = GpuPreset::find("b200").unwrap().spec();
        // Compute-bound at 65536 tokens: Hopper at its bf16 rate, Blackwell at its fp4 rate.
        assert!((h.seconds - h.flops / (gh.bf16_flops * 0.7)).abs() < 1e-12 * h.seconds.max(1.0));
        assert!((b.seconds - b.flops / (gb.fp4_flops.unwrap() * 0.7)).abs() < 1e-12 * b.seconds.max(1.0));
    }
}
