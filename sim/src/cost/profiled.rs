//! The profiled cost model: iteration times from measured per-op tables.
//!
//! ```text
//!   per layer:  input_layernorm, attn_pre_proj, attn_rope, attn_kv_cache_save,
//!               attn_prefill(chunk, cached | batch, sequence) · attn_decode(batch, context),
//!               attn_post_proj, post_attention_layernorm, mlp_up_proj, mlp_act, mlp_down_proj,
//!               add, 2 × all_reduce(tokens × hidden × 2 bytes) when TP > 1
//!   windowed:   a model with windowed layers (gpt-oss) reads attn_prefill and attn_decode in
//!               its full-attention layers and attn_prefill_window · attn_decode_window (the
//!               same axes, measured with the window) in its windowed ones
//!   per step:   emb(tokens), lm_head(sampled), sample(sampled),
//!               CPU: schedule + sampler_e2e + prepare_inputs_e2e + process_model_outputs (batch)
//! ```
//! Op names are Vidur's, so its profiles import unchanged. An op group the profile lacks
//! (all-reduce in a one-GPU calibration, CPU overheads in a kernel calibration, elementwise
//! ops in a kernel database, attention measured for another geometry) falls back to the
//! roofline model's estimate, kernel launches included (a profile with no tables at the TP
//! degree at all is refused);
//! [`Profiled::fallbacks`] lists them, and a run's [`CostAccount`] says what share of its time
//! they priced and which measured ops were read beyond their measured range. Measured ops add
//! no launch cost: their times were taken around the launches.
//!
//! Every lookup is a binary search in a table, so an iteration costs O(log points) whatever the
//! batch holds, and nothing is allocated per iteration. A batch of several prefills is read as
//! `k` prefills of the mean chunk over the mean cached length, scaled by the ratio of the
//! batch's causal query-key pairs to those `k` mean prefills' (exact for one prefill, or for
//! equal ones). A `[batch, sequence]` prefill table (kernel databases: `k` whole prompts of
//! `s` tokens in one kernel) is read at `k` and the mean sequence `s = chunk + cached`, times
//! the share of the sequence's causal pairs the chunk computes, `(s² − cached²) / s²` — the
//! rule AIConfigurator applies to its own table (`aic-core/.../operators/attention.rs`,
//! `prefix_correction`).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::profile::{anchors, Axis, Bound, Curve, ModelDims, OpTable, Profile, ProfileError, PROFILE_FORMAT_VERSION};
use super::roofline::RoofOp;
use super::{cpu_ns, to_ns, BatchShape, CostAccount, CostModel, Roofline, RooflineParams};

/// The roofline op of a name this file uses.
fn roof(name: &str) -> RoofOp {
    RoofOp::find(name).expect("a roofline op")
}
use crate::spec::{GpuSpec, ModelSpec};
use crate::time::SimTime;

/// Every op name the profiled model reads, with the axes its table must have (the form
/// `servesim calibrate` writes; [`OTHER_AXES`] lists the other accepted forms).
pub const KNOWN_OPS: &[(&str, &[Axis])] = &[
    ("input_layernorm", &[Axis::Tokens]),
    ("attn_pre_proj", &[Axis::Tokens]),
    ("attn_rope", &[Axis::Tokens]),
    ("attn_kv_cache_save", &[Axis::Tokens]),
    ("attn_post_proj", &[Axis::Tokens]),
    ("post_attention_layernorm", &[Axis::Tokens]),
    ("mlp_up_proj", &[Axis::Tokens]),
    ("mlp_act", &[Axis::Tokens]),
    ("mlp_down_proj", &[Axis::Tokens]),
    ("moe_experts", &[Axis::Tokens]),
    ("add", &[Axis::Tokens]),
    ("emb", &[Axis::Tokens]),
    ("attn_prefill", &[Axis::Chunk, Axis::Cached]),
    ("attn_decode", &[Axis::Batch, Axis::Context]),
    ("attn_prefill_window", &[Axis::Chunk, Axis::Cached]),
    ("attn_decode_window", &[Axis::Batch, Axis::Context]),
    ("all_reduce", &[Axis::Bytes]),
    ("lm_head", &[Axis::Tokens]),
    ("sample", &[Axis::Batch]),
    ("schedule", &[Axis::Batch]),
    ("sampler_e2e", &[Axis::Batch]),
    ("prepare_inputs_e2e", &[Axis::Batch]),
    ("process_model_outputs", &[Axis::Batch]),
];

/// Other axes an op's table may have: prefill attention as kernel databases time it, `batch`
/// whole prompts of `sequence` tokens.
pub const OTHER_AXES: &[(&str, &[Axis])] =
    &[("attn_prefill", &[Axis::Batch, Axis::Sequence]), ("attn_prefill_window", &[Axis::Batch, Axis::Sequence])];

/// Checks that `name` is an op the profiled model reads and that its table has one of the
/// accepted axis lists; the error names the op and what it needs.
pub fn check_op_axes(name: &str, axes: &[Axis]) -> Result<(), ProfileError> {
    let forms: Vec<&[Axis]> = KNOWN_OPS.iter().chain(OTHER_AXES).filter(|(n, _)| *n == name).map(|(_, a)| *a).collect();
    if forms.is_empty() {
        let known: Vec<&str> = KNOWN_OPS.iter().map(|(n, _)| *n).collect();
        return Err(format!("op {name} is not an op servesim reads (it reads {})", known.join(", ")).into());
    }
    if forms.contains(&axes) {
        return Ok(());
    }
    let names = |a: &[Axis]| format!("{:?}", a.iter().map(|x| x.name()).collect::<Vec<_>>());
    let want: Vec<String> = forms.iter().map(|f| names(f)).collect();
    Err(format!("op {name} must have axes {}, got {}", want.join(" or "), names(axes)).into())
}

/// One op's contribution to an iteration, for breakdowns.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfiledOp {
    pub name: &'static str,
    pub seconds: f64,
    /// False when the roofline model stood in for an op the profile lacks.
    pub measured: bool,
}

/// An op (or group of ops) the roofline prices because the profile cannot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Fallback {
    pub op: String,
    pub reason: String,
}

/// A fallback or an out-of-range reading over a run: what share of the iteration time it priced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FallbackShare {
    /// The instance group (empty from the cost model itself; the run fills it in).
    pub group: String,
    pub op: String,
    pub reason: String,
    /// Iterations it priced.
    pub iterations: u64,
    /// Its seconds over all iterations' seconds.
    pub share: f64,
    /// A measured table read beyond its measured range (else an op the roofline priced).
    #[serde(default)]
    pub extrapolated: bool,
}

/// How a slot's time is computed from the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Per layer, over the iteration's tokens (GEMMs, elementwise ops).
    LayerTokens,
    /// Once per step over the iteration's tokens (embedding).
    StepTokens,
    /// Prefill attention per layer, `[chunk, cached]`.
    PrefillChunk,
    /// Prefill attention per layer, `[batch, sequence]` with the prefix share.
    PrefillSequence,
    /// Decode attention per layer, `[batch, context]`.
    Decode,
    /// Two all-reduces per layer of the hidden state.
    AllReduce,
    /// Once per step over the sampled sequences (LM head, sampling).
    Sampled,
    /// CPU work per step over the batch's sequences.
    Cpu,
    /// The roofline's op, with its kernel launches per layer and per step.
    Roof(RoofOp, u32, u32),
    /// The roofline's CPU overhead line (`cost.cpu_overhead_*`).
    RoofCpu,
}

/// One op of the model as priced by this profile.
#[derive(Clone, Debug)]
struct Slot {
    name: &'static str,
    kind: Kind,
    curve: Option<Curve>,
    /// Why the roofline prices it (None: measured).
    fallback: Option<String>,
    /// The layers a per-layer op runs in: all of them, or one kind's (a windowed model's full
    /// and windowed attention layers).
    layers: f64,
    /// The attention window of a windowed layer's prefill table (tokens); None: full attention.
    window: Option<f64>,
    /// The roofline's op whose bound carries the table beyond its measured range ([`Bound`]);
    /// None: times in proportion.
    bound: Option<RoofOp>,
    /// The table's measured points with their utilization of that bound (a two-axis table's).
    anchors: Box<[([f64; 2], f64)]>,
    /// A prefill slot's measured decode slot of the same layers, whose time is its floor
    /// ([`Profiled::decode_floor`]).
    floor: Option<usize>,
}

impl Slot {
    fn measured(name: &'static str, kind: Kind, curve: Curve, layers: u64) -> Slot {
        let bound = bound_of(name);
        let (layers, anchors) = (layers as f64, Box::default());
        Slot { name, kind, curve: Some(curve), fallback: None, layers, window: None, bound, anchors, floor: None }
    }

    fn roof(name: &'static str, kind: Kind, reason: String, layers: u64) -> Slot {
        let (layers, anchors) = (layers as f64, Box::default());
        Slot {
            name,
            kind,
            curve: None,
            fallback: Some(reason),
            layers,
            window: None,
            bound: None,
            anchors,
            floor: None,
        }
    }
}

/// Each prefill slot's measured decode slot of the same layers ([`Slot::floor`]).
fn with_floors(mut slots: Vec<Slot>) -> Vec<Slot> {
    for i in 0..slots.len() {
        if matches!(slots[i].kind, Kind::PrefillChunk | Kind::PrefillSequence) {
            let w = slots[i].window;
            slots[i].floor = slots.iter().position(|d| d.kind == Kind::Decode && d.window == w && d.curve.is_some());
        }
    }
    slots
}

/// The roofline op that bounds a measured op (None: its time grows in proportion beyond its
/// table: sampling, the engine's CPU work).
fn bound_of(name: &str) -> Option<RoofOp> {
    let ours = match name {
        "moe_experts" => "moe_experts",
        "attn_prefill" | "attn_prefill_window" => "attn_prefill",
        "attn_decode" | "attn_decode_window" => "attn_decode",
        "all_reduce" => "allreduce",
        "lm_head" => "lm_head",
        "emb" => "elementwise",
        n if LAYER_ELEMENTWISE.contains(&n) => "elementwise",
        n => LAYER_GEMMS.iter().find(|(vidur, _)| *vidur == n)?.1,
    };
    RoofOp::find(ours)
}

/// The work of a causal prefill of `s` tokens from the start, in query-key pairs, when each
/// query sees at most `w` keys: `Σ_{i=1..s} min(i, w)`.
fn windowed_pairs(s: f64, w: f64) -> f64 {
    if s <= w {
        s * (s + 1.0) / 2.0
    } else {
        w * (w + 1.0) / 2.0 + (s - w) * w
    }
}

/// Profiled cost model for one instance: a model on `tp` GPUs.
#[derive(Clone, Debug)]
pub struct Profiled {
    model: ModelSpec,
    roofline: Roofline,
    slots: Vec<Slot>,
    fallbacks: Vec<Fallback>,
    /// One memo per slot (same index) whose time depends on one whole count only, outside the
    /// prefix, with the count it is keyed by.
    memos: Vec<Option<(Key, Memo)>>,
    /// The leading slots measured by the token count (the layers' GEMMs and elementwise ops):
    /// how many, and their sum in slot order by token count, so that one read stands for them
    /// all (the same additions as slot by slot, from zero: bit-identical).
    prefix: Option<(usize, Memo)>,
    /// Whether slot `i` is the engine's CPU work (for `cpu_time`).
    is_cpu: Vec<bool>,
    /// The trailing memoised slots, read as one row in decode-only batches.
    tail: Option<Tail>,
}

/// The slots from `start` to the end when every one of them has a memo and no CPU slot lies
/// before `start`. In a batch of decodes only (no prefill, one sampled row per sequence) their
/// counts — tokens, sampled rows, sequences — are one number n, so their times are a row per
/// n: added in slot order they give the same sum, bit for bit, as slot by slot; their CPU part
/// summed from zero is the iteration's CPU time; and what an account adds is known per row.
struct Tail {
    start: usize,
    rows: Box<[std::sync::OnceLock<Row>]>,
}

/// One n's times of the tail's slots (see [`Tail`]).
struct Row {
    seconds: Box<[f64]>,
    cpu: f64,
    /// (slot, seconds) an account adds: fallbacks, and tables read outside their range.
    accounted: Box<[(usize, f64)]>,
}

impl Tail {
    fn new(start: usize) -> Tail {
        Tail { start, rows: (0..SEQ_MEMO).map(|_| std::sync::OnceLock::new()).collect() }
    }
}

impl Clone for Tail {
    /// A fresh, empty tail (the rows are recomputed on demand), as `Memo` clones.
    fn clone(&self) -> Tail {
        Tail::new(self.start)
    }
}

impl std::fmt::Debug for Tail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tail(from slot {}, {} rows)", self.start, self.rows.len())
    }
}

/// The one count a memoised slot's time depends on (see `slot_seconds`).
#[derive(Clone, Copy, Debug)]
enum Key {
    Tokens,
    Sampled,
    Seqs,
}

impl Key {
    fn of(kind: Kind) -> Option<Key> {
        match kind {
            Kind::LayerTokens | Kind::StepTokens | Kind::AllReduce => Some(Key::Tokens),
            // The roofline's LM head reads the sampled rows only.
            Kind::Sampled | Kind::Roof(RoofOp::LmHead, ..) => Some(Key::Sampled),
            Kind::Cpu | Kind::RoofCpu => Some(Key::Seqs),
            _ => None,
        }
    }

    #[inline(always)]
    fn count(self, b: &BatchShape) -> u64 {
        match self {
            Key::Tokens => b.tokens(),
            Key::Sampled => b.sampled_seqs,
            Key::Seqs => b.seqs(),
        }
    }

    fn memo(self) -> Memo {
        Memo::new(match self {
            Key::Tokens => TOKEN_MEMO,
            Key::Sampled | Key::Seqs => SEQ_MEMO,
        })
    }
}

/// A slot's seconds by its count (tokens, sequences or sampled sequences), filled as read:
/// batch shapes repeat, and a table read is a search and, for log-log tables, a logarithm and
/// an exponential. Each entry holds the bits of the seconds, negated when the table was read
/// outside its measured range; 0 is "not yet read". The values are those `slot_seconds`
/// computes, so memoised runs are bit-identical. Atomic (relaxed) so that the model stays
/// `Sync`; instances of one run share it on one thread.
struct Memo(Box<[AtomicU64]>);

impl Memo {
    fn new(len: usize) -> Memo {
        Memo(std::iter::repeat_with(|| AtomicU64::new(0)).take(len).collect())
    }

    #[inline(always)]
    fn get(&self, key: u64, compute: impl FnOnce() -> (f64, bool)) -> (f64, bool) {
        let Some(cell) = usize::try_from(key).ok().and_then(|k| self.0.get(k)) else { return compute() };
        let bits = cell.load(Ordering::Relaxed);
        if bits != 0 {
            let v = f64::from_bits(bits);
            return (v.abs(), v.is_sign_negative());
        }
        let (secs, outside) = compute();
        // Only finite, non-negative values are kept (a zero is recomputed: its bits are the sentinel).
        if secs.is_finite() && secs >= 0.0 {
            cell.store(if outside { (-secs).to_bits() } else { secs.to_bits() }, Ordering::Relaxed);
        }
        (secs, outside)
    }
}

impl Clone for Memo {
    /// A fresh, empty memo of the same size (the values are recomputed on demand).
    fn clone(&self) -> Memo {
        Memo::new(self.0.len())
    }
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Memo({} entries)", self.0.len())
    }
}

/// Memo sizes: counts of tokens up to 8,191 (the usual token budgets), of sequences up to 1,023.
const TOKEN_MEMO: usize = 8192;
const SEQ_MEMO: usize = 1024;

/// Per-layer GEMMs: Vidur's name and the roofline's.
const LAYER_GEMMS: [(&str, &str); 4] = [
    ("attn_pre_proj", "qkv_proj"),
    ("attn_post_proj", "o_proj"),
    ("mlp_up_proj", "gate_up_proj"),
    ("mlp_down_proj", "down_proj"),
];
const LAYER_ELEMENTWISE: [&str; 6] =
    ["input_layernorm", "attn_rope", "attn_kv_cache_save", "post_attention_layernorm", "mlp_act", "add"];
const CPU_OPS: [&str; 4] = ["schedule", "sampler_e2e", "prepare_inputs_e2e", "process_model_outputs"];

/// Refuses a profile of another format version, or measured on another GPU than `gpu`: its
/// kernels would price this GPU's iterations as the other GPU runs them. A device no preset names
/// (a CPU, a GPU without a preset) is not checked.
/// How the error for a profile without tables at the scenario's TP degree begins.
pub const NO_TABLES_AT_TP: &str = "the profile has no tables at TP";

/// Tables for other TP degrees only would leave every TP-specific op to the roofline under the
/// profile's name: refused, naming both (a plan makes such a candidate infeasible).
fn check_tp(profile: &Profile, tp: u32) -> Result<(), ProfileError> {
    if profile.ops.iter().any(|t| t.tp.is_some()) && !profile.ops.iter().any(|t| t.tp == Some(tp)) {
        return Err(ProfileError::OtherTp(format!(
            "{NO_TABLES_AT_TP} {tp} (it has TP {:?}): measure this degree (`servesim calibrate run --tp {tp}`), \
             or use the GPU's kernel database slice",
            profile.meta.tp
        )));
    }
    Ok(())
}

fn check_meta(gpu: &GpuSpec, profile: &Profile) -> Result<(), ProfileError> {
    if profile.format_version != PROFILE_FORMAT_VERSION {
        return Err(ProfileError::Version { found: profile.format_version });
    }
    if let (Some(ours), Some(theirs)) =
        (crate::spec::GpuPreset::find(&gpu.name), crate::spec::GpuPreset::of_device(&profile.meta.gpu))
    {
        if ours.name != theirs.name {
            return Err(ProfileError::OtherGpu(format!(
                "the profile was measured on {} (the {} preset); the scenario's GPU is {}: measure this GPU \
                 (`servesim calibrate run`), or use its kernel database slice",
                profile.meta.gpu, theirs.name, ours.name
            )));
        }
    }
    Ok(())
}

/// A slot's speed-of-light time at a point of its table's axes ([`Bound`]): the roofline's
/// time for its op at that shape (attention: one layer of the slot's kind), else the product of
/// the coordinates (times in proportion).
fn sol(roofline: &Roofline, model: &ModelSpec, s: &Slot, x: &[f64]) -> f64 {
    let whole = |v: f64| v.round().max(1.0) as u64;
    let mut b = BatchShape::default();
    let windowed = s.window.is_some();
    let t = match (s.bound, s.kind) {
        (Some(op), Kind::LayerTokens | Kind::StepTokens) => {
            b.add_prefill(whole(x[0]), 0, false);
            roofline.op_time(op, &b)
        }
        (Some(op), Kind::AllReduce) => {
            b.add_prefill(whole(x[0] / (model.hidden as f64 * 2.0)), 0, false);
            roofline.op_time(op, &b)
        }
        (Some(op), Kind::Sampled) => {
            b.sampled_seqs = whole(x[0]);
            roofline.op_time(op, &b)
        }
        (Some(op), Kind::PrefillChunk) => {
            b.add_prefill(whole(x[0]), x[1].round().max(0.0) as u64, false);
            roofline.attention_layer_time(op, &b, windowed)
        }
        (Some(op), Kind::PrefillSequence) => {
            let (k, seq) = (whole(x[0]), x[1].round().max(1.0));
            b.prefill_seqs = k;
            b.prefill_tokens = k * seq as u64;
            b.prefill_attn_pairs = k as f64 * seq * (seq + 1.0) / 2.0;
            roofline.attention_layer_time(op, &b, windowed)
        }
        (Some(op), Kind::Decode) => {
            b.decode_seqs = whole(x[0]);
            b.decode_context_tokens = whole(x[0] * x[1]);
            b.sampled_seqs = b.decode_seqs;
            roofline.attention_layer_time(op, &b, windowed)
        }
        _ => 0.0,
    };
    if t > 0.0 && t.is_finite() {
        t
    } else {
        x.iter().product()
    }
}

/// The slots with their two-axis tables' anchors ([`Bound`]).
fn with_anchors(mut slots: Vec<Slot>, model: &ModelSpec, roofline: &Roofline) -> Vec<Slot> {
    let all: Vec<_> = slots
        .iter()
        .map(|s| s.curve.as_ref().map(|c| anchors(c, &|x| sol(roofline, model, s, x))).unwrap_or_default())
        .collect();
    for (s, a) in slots.iter_mut().zip(all) {
        s.anchors = a;
    }
    slots
}

impl Profiled {
    /// Checks `profile` against the model and TP degree and builds the lookup tables. The error
    /// is one line saying what does not match.
    pub fn new(
        model: ModelSpec,
        gpu: GpuSpec,
        tp: u64,
        params: RooflineParams,
        profile: &Profile,
    ) -> Result<Profiled, ProfileError> {
        let dims = &profile.meta.model;
        if !dims.same_shapes(&model) {
            return Err(ProfileError::OtherModel(format!(
                "the profile was measured for {} (hidden {}, heads {}, kv_heads {}, head_dim {}, intermediate {}, \
                 vocab {}); the scenario's model {} has hidden {}, heads {}, kv_heads {}, head_dim {}, intermediate {}, vocab {}",
                dims.name,
                dims.hidden,
                dims.heads,
                dims.kv_heads,
                dims.head_dim,
                dims.intermediate,
                dims.vocab,
                model.name,
                model.hidden,
                model.heads,
                model.kv_heads,
                model.head_dim,
                model.intermediate,
                model.vocab
            )));
        }
        check_meta(&gpu, profile)?;
        let mut seen = std::collections::BTreeSet::new();
        for t in &profile.ops {
            t.check()?;
            if !seen.insert((t.name.clone(), t.tp)) {
                return Err(format!("op {} appears twice for tp {:?}", t.name, t.tp).into());
            }
            check_op_axes(&t.name, &t.axes)?;
            if t.name.ends_with("_window") && model.arch.window.is_none() {
                return Err(format!("op {}: {} has no windowed attention layers", t.name, model.name).into());
            }
        }
        let tp32 = tp as u32;
        check_tp(profile, tp32)?;
        let missing = |what: &str| format!("not in the profile ({what})");
        let find = |name: &str| -> Option<&OpTable> {
            profile
                .ops
                .iter()
                .find(|t| t.name == name && t.tp == Some(tp32))
                .or_else(|| profile.ops.iter().find(|t| t.name == name && t.tp.is_none()))
        };
        let curve = |name: &str| find(name).map(Curve::from_table);
        let mut slots = Vec::new();
        let all = model.layers;

        // A slot measured by its table, or priced by the roofline's `op` with the reason.
        let slot = |name: &'static str, kind: Kind, op: Kind, why: &str, layers: u64| match curve(name) {
            Some(c) => Slot::measured(name, kind, c, layers),
            None => Slot::roof(name, op, missing(why), layers),
        };
        let gemm = |(vidur, ours): (&'static str, &str), layers: u64| {
            slot(vidur, Kind::LayerTokens, Kind::Roof(roof(ours), 1, 0), "GEMM", layers)
        };
        let [qkv, o, up, down] = LAYER_GEMMS;
        slots.push(gemm(qkv, all));
        slots.push(gemm(o, all));
        // A MoE model's FFN GEMMs run in its dense layers only (DeepSeek-V3: the first 3), its
        // experts (routed, and shared ones folded into the same table) in the others.
        let dense = if model.experts > 1 { model.arch.dense_layers } else { all };
        if dense > 0 {
            slots.push(gemm(up, dense));
        }
        if model.experts > 1 {
            let why = "mixture of experts: the routed experts";
            let moe = Kind::Roof(roof("moe_experts"), 1, 0);
            slots.push(slot("moe_experts", Kind::LayerTokens, moe, why, model.moe_layers()));
        }
        if dense > 0 {
            slots.push(gemm(down, dense));
        }
        let elementwise: Vec<Slot> = LAYER_ELEMENTWISE
            .iter()
            .filter_map(|n| curve(n).map(|c| Slot::measured(n, Kind::LayerTokens, c, all)))
            .collect();
        if elementwise.is_empty() {
            slots.push(Slot::roof(
                "elementwise",
                Kind::Roof(roof("elementwise"), 5, 0),
                missing("norms, RoPE, KV write, activation, residual adds"),
                all,
            ));
        }
        slots.extend(elementwise);

        // Attention depends only on the per-GPU heads: a table measured on another model or TP
        // degree serves when those match (Vidur's attention was measured for one geometry). A
        // windowed model's full and windowed layers each read their own table; without the
        // windowed one the roofline prices its attention, both kinds.
        let ours = ModelDims::from_spec(&model).attention_per_gpu(tp);
        let attention = |name: &str| -> Result<&OpTable, String> {
            let geometry = |t: &OpTable| t.dims.as_ref().unwrap_or(dims).attention_per_gpu(t.tp.map_or(tp, u64::from));
            let tables: Vec<&OpTable> = profile.ops.iter().filter(|t| t.name == name).collect();
            let exact = tables.iter().find(|t| t.tp == Some(tp32) && geometry(t) == ours);
            match exact.or_else(|| tables.iter().find(|t| geometry(t) == ours)) {
                Some(t) => Ok(*t),
                None => Err(match tables.first() {
                    Some(t) => {
                        let theirs = geometry(t);
                        format!(
                            "measured for {} query / {} KV heads of {} per GPU; this model has {} / {} / {} at TP {tp}",
                            theirs.0, theirs.1, theirs.2, ours.0, ours.1, ours.2
                        )
                    }
                    None => missing("attention"),
                }),
            }
        };
        let kind_of = |name: &str, t: &OpTable| match (name, t.axes.first()) {
            ("attn_decode" | "attn_decode_window", _) => Kind::Decode,
            (_, Some(Axis::Batch)) => Kind::PrefillSequence,
            _ => Kind::PrefillChunk,
        };
        for (name, windowed) in [("attn_prefill", "attn_prefill_window"), ("attn_decode", "attn_decode_window")] {
            let full = attention(name);
            match model.arch.window {
                None => match full {
                    Ok(t) => slots.push(Slot::measured(name, kind_of(name, t), Curve::from_table(t), all)),
                    Err(reason) => slots.push(Slot::roof(name, Kind::Roof(roof(name), 1, 0), reason, all)),
                },
                Some(w) => match (full, attention(windowed)) {
                    (Ok(f), Ok(wt)) => {
                        slots.push(Slot::measured(name, kind_of(name, f), Curve::from_table(f), all - w.layers));
                        let mut s = Slot::measured(windowed, kind_of(windowed, wt), Curve::from_table(wt), w.layers);
                        s.window = Some(w.tokens as f64);
                        slots.push(s);
                    }
                    (full, win) => {
                        let reason = match (full, win) {
                            (Err(r), _) => r,
                            (_, Err(r)) => format!(
                                "{} of {all} layers attend to a window of {} tokens and {windowed} is {}",
                                w.layers,
                                w.tokens,
                                if r.starts_with("measured for") { r } else { "not in the profile".to_string() }
                            ),
                            _ => unreachable!("both found is the arm above"),
                        };
                        slots.push(Slot::roof(name, Kind::Roof(roof(name), 1, 0), reason, all));
                    }
                },
            }
        }
        if tp > 1 {
            // Vidur measures all-reduce by GPU count, not by model: any TP-tagged table of this
            // degree will do.
            slots.push(slot("all_reduce", Kind::AllReduce, Kind::Roof(roof("allreduce"), 2, 0), "collectives", all));
        }
        if let Some(c) = curve("emb") {
            slots.push(Slot::measured("emb", Kind::StepTokens, c, all));
        }
        slots.push(slot("lm_head", Kind::Sampled, Kind::Roof(roof("lm_head"), 0, 1), "LM head GEMM", all));
        if let Some(c) = curve("sample") {
            slots.push(Slot::measured("sample", Kind::Sampled, c, all));
        }
        let cpu: Vec<Slot> =
            CPU_OPS.iter().filter_map(|n| curve(n).map(|c| Slot::measured(n, Kind::Cpu, c, all))).collect();
        if cpu.is_empty() {
            // Not a stand-in for a measured op: the engine's CPU work is a setting of the run.
            let mut s = Slot::roof("cpu_overhead", Kind::RoofCpu, String::new(), all);
            s.fallback = None;
            slots.push(s);
        }
        slots.extend(cpu);
        let fallbacks = slots
            .iter()
            .filter_map(|s| s.fallback.as_ref().map(|r| Fallback { op: s.name.to_string(), reason: r.clone() }))
            .collect();
        let roofline = Roofline::new(model.clone(), gpu, tp, params);
        let slots = with_floors(with_anchors(slots, &model, &roofline));
        let lead = slots.iter().take_while(|s| s.curve.is_some() && matches!(s.kind, Kind::LayerTokens)).count();
        let prefix = (lead > 1).then(|| (lead, Memo::new(TOKEN_MEMO)));
        // The slots of the prefix are read through its memo only.
        let first = if prefix.is_some() { lead } else { 0 };
        let memos: Vec<Option<(Key, Memo)>> = slots
            .iter()
            .enumerate()
            .map(|(i, s)| if i < first { None } else { Key::of(s.kind).map(|k| (k, k.memo())) })
            .collect();
        let is_cpu: Vec<bool> = slots.iter().map(|s| matches!(s.kind, Kind::Cpu | Kind::RoofCpu)).collect();
        let start = (first..slots.len()).rev().take_while(|&i| memos[i].is_some()).last();
        let tail = start.filter(|&t| !is_cpu[..t].contains(&true)).map(Tail::new);
        Ok(Profiled { model, roofline, slots, fallbacks, memos, prefix, is_cpu, tail })
    }

    /// Ops the roofline model stands in for, with the reason.
    pub fn fallbacks(&self) -> &[Fallback] {
        &self.fallbacks
    }

    /// One slot's seconds over the iteration, and whether its table was read outside the
    /// measured range.
    #[inline(never)]
    fn slot_seconds(&self, s: &Slot, b: &BatchShape) -> (f64, bool) {
        let layers = s.layers;
        let n = b.tokens() as f64;
        let ms = 1e-3;
        let read = |x: &[f64]| self.read_slot(s, x);
        match s.kind {
            Kind::LayerTokens => {
                let (t, out) = read(&[n]);
                (layers * t * ms, out)
            }
            Kind::StepTokens => {
                let (t, out) = read(&[n]);
                (t * ms, out)
            }
            Kind::PrefillChunk | Kind::PrefillSequence if b.prefill_tokens > 0 => self.prefill_seconds(s, b),
            Kind::Decode if b.decode_seqs > 0 => {
                let batch = b.decode_seqs as f64;
                let (t, out) = read(&[batch, b.decode_context_tokens as f64 / batch]);
                (layers * t * ms, out)
            }
            Kind::AllReduce => {
                let (t, out) = read(&[n * self.model.hidden as f64 * 2.0]);
                (2.0 * layers * t * ms, out)
            }
            Kind::Sampled if b.sampled_seqs > 0 => {
                let (t, out) = read(&[b.sampled_seqs as f64]);
                (t * ms, out)
            }
            Kind::Cpu => {
                let (t, out) = read(&[b.seqs() as f64]);
                (t * ms, out)
            }
            Kind::Roof(op, per_layer, per_step) => {
                let secs = self.roofline.op_time(op, b);
                if secs == 0.0 {
                    return (0.0, false);
                }
                let launch = self.roofline.params().kernel_launch_us * 1e-6;
                let launches = per_layer as f64 * layers + per_step as f64;
                (secs + launches * launch, false)
            }
            Kind::RoofCpu => (self.roofline.cpu_overhead_s(b), false),
            _ => (0.0, false),
        }
    }

    /// Prefill attention's seconds over the iteration (a `PrefillChunk` or `PrefillSequence`
    /// slot), at least the decode floor where the chunks attend to cached tokens.
    fn prefill_seconds(&self, s: &Slot, b: &BatchShape) -> (f64, bool) {
        let (layers, ms) = (s.layers, 1e-3);
        let k = b.prefill_seqs.max(1) as f64;
        let chunk = b.prefill_tokens as f64 / k;
        let cached = b.prefill_cached_tokens as f64 / k;
        let pairs = chunk * cached + chunk * (chunk + 1.0) / 2.0;
        let scale = if pairs > 0.0 { b.prefill_attn_pairs / (k * pairs) } else { 1.0 };
        let (t, out) = if s.kind == Kind::PrefillChunk {
            let (t, out) = self.read_slot(s, &[chunk, cached]);
            (layers * k * t * scale * ms, out)
        } else {
            let seq = chunk + cached;
            let share = match s.window {
                _ if seq <= 0.0 => 1.0,
                None => (seq * seq - cached * cached) / (seq * seq),
                // Each query sees at most w keys: the chunk's share of the whole prompt's pairs.
                Some(w) => (windowed_pairs(seq, w) - windowed_pairs(cached, w)) / windowed_pairs(seq, w),
            };
            let (t, out) = self.read_slot(s, &[k, seq]);
            (layers * t * share * scale * ms, out)
        };
        if cached <= 0.0 {
            return (t, out);
        }
        match self.decode_floor(s, k, chunk + cached) {
            Some((floor, floor_out)) if layers * floor * ms > t => (layers * floor * ms, floor_out),
            _ => (t, out),
        }
    }

    /// Slot `s`'s table at `x` (ms), and whether `x` is outside its measured range.
    fn read_slot(&self, s: &Slot, x: &[f64]) -> (f64, bool) {
        let sol = |x: &[f64]| sol(&self.roofline, &self.model, s, x);
        let bound = Bound { sol: &sol, anchors: &s.anchors };
        let (t, inside) = s.curve.as_ref().expect("measured slots have a table").read_bound(x, &bound);
        (t, !inside)
    }

    /// What one layer's decode attention of `k` sequences over `context` tokens takes (ms), read
    /// from the measured decode table of the prefill slot `s`'s layers: the least a prefill chunk
    /// over cached tokens can take, as it does a decode's work and more (every new token attends
    /// to the whole cached context). It matters for chunks of a few tokens over a long context
    /// (the tail of a prompt whose prefix was cached), whose share of a whole prompt's prefill
    /// attention leaves out the kernel's own time.
    fn decode_floor(&self, s: &Slot, k: f64, context: f64) -> Option<(f64, bool)> {
        let d = &self.slots[s.floor?];
        Some(self.read_slot(d, &[k, s.window.map_or(context, |w| context.min(w))]))
    }

    /// `slot_seconds` of slot `i`, from its memo when it has one.
    #[inline(always)]
    fn slot_seconds_memo(&self, i: usize, b: &BatchShape) -> (f64, bool) {
        let s = &self.slots[i];
        match &self.memos[i] {
            Some((key, m)) => m.get(key.count(b), || self.slot_seconds(s, b)),
            // What `slot_seconds` gives for attention without work of its kind, without the call.
            None => match s.kind {
                Kind::PrefillChunk | Kind::PrefillSequence if b.prefill_tokens == 0 => (0.0, false),
                Kind::Decode if b.decode_seqs == 0 => (0.0, false),
                _ => self.slot_seconds(s, b),
            },
        }
    }

    /// The first measured op that runs faster than the GPU physically could — by more than 10%
    /// below its floor (its weights and KV read at the GPU's full bandwidth, its FLOPs at its
    /// peak: [`Roofline::physical`]) — at a decode step of 1 and of 64 sequences over 1,024
    /// tokens of context and a 2,048-token prefill, as one line naming the op, the batch, the
    /// GPU and both times. The ops checked are those whose floor is certain: the dense GEMMs
    /// (their weights must be read) and decode attention (its KV must be read). A table in the wrong
    /// unit (seconds for milliseconds) or measured on a faster GPU shows here. `weights`: the
    /// dtype the tables' GEMMs were measured in, when known (a kernel database's slice).
    pub fn impossible_op(&self, weights: Option<crate::spec::Dtype>) -> Option<String> {
        let floor = self.roofline.physical(weights);
        for (b, what) in Roofline::floor_probes() {
            for s in self.slots.iter().filter(|s| s.curve.is_some()) {
                let op = match LAYER_GEMMS.iter().find(|(vidur, _)| *vidur == s.name) {
                    Some((_, ours)) => *ours,
                    // Not the experts: which of them a step reads depends on the routing.
                    None if s.name == "attn_decode" => s.name,
                    None => continue,
                };
                let (t, _) = self.slot_seconds(s, &b);
                let min = floor.op_seconds(op, &b);
                if t > 0.0 && min > 0.0 && t < 0.9 * min {
                    return Some(format!(
                        "{} takes {:.2} µs in {what}, below the {}: measured on a faster GPU, or in the wrong unit?",
                        s.name,
                        t * 1e6,
                        floor.floor_words(min)
                    ));
                }
            }
        }
        None
    }

    /// The seconds over `b` of the slots whose op name `pick` accepts, and their CPU part;
    /// with `acc`, what the roofline priced there or was read beyond its table is added to the
    /// account at the slot's index plus the offset given with it.
    pub(crate) fn part_seconds(
        &self,
        b: &BatchShape,
        pick: &dyn Fn(&str) -> bool,
        mut acc: Option<(&mut CostAccount, usize)>,
    ) -> (f64, f64) {
        let (mut total, mut cpu) = (0.0, 0.0);
        if b.is_empty() {
            return (total, cpu);
        }
        for (i, s) in self.slots.iter().enumerate().filter(|(_, s)| pick(s.name)) {
            let (secs, outside) = self.slot_seconds_memo(i, b);
            total += secs;
            if self.is_cpu[i] {
                cpu += secs;
            }
            if let Some((a, offset)) = acc.as_mut() {
                if secs > 0.0 && (outside || s.fallback.is_some()) {
                    a.add(*offset + i, secs);
                }
            }
        }
        (total, cpu)
    }

    /// Its op slots.
    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Every op's time over the whole iteration.
    pub fn breakdown(&self, b: &BatchShape) -> Vec<ProfiledOp> {
        if b.is_empty() {
            return Vec::new();
        }
        self.slots
            .iter()
            .filter_map(|s| {
                let (secs, _) = self.slot_seconds(s, b);
                (secs > 0.0).then_some(ProfiledOp { name: s.name, seconds: secs, measured: s.curve.is_some() })
            })
            .collect()
    }

    /// Iteration time in seconds, before rounding to integer nanoseconds, and its CPU part;
    /// with `acc`, what the roofline priced and what was read outside the measured range is
    /// added to it. The CPU part is summed in slot order from zero, as `cpu_time` sums it.
    fn seconds(&self, b: &BatchShape, mut acc: Option<&mut CostAccount>) -> (f64, f64) {
        if b.is_empty() {
            return (0.0, 0.0);
        }
        let mut total = 0.0;
        let mut cpu = 0.0;
        let mut first = 0;
        if let Some((lead, memo)) = &self.prefix {
            let (sum, outside) = memo.get(b.tokens(), || {
                let mut t = 0.0;
                let mut out = false;
                for i in 0..*lead {
                    let (secs, o) = self.slot_seconds_memo(i, b);
                    t += secs;
                    out |= o;
                }
                (t, out)
            });
            if outside {
                // Rare (a token count beyond a table): the slots one by one, for the account.
                if let Some(a) = acc.as_deref_mut() {
                    for i in 0..*lead {
                        let (secs, o) = self.slot_seconds_memo(i, b);
                        if secs > 0.0 && o {
                            a.add(i, secs);
                        }
                    }
                }
            }
            total = sum;
            first = *lead;
        }
        // Decodes only: the tail's slots as one row (see `Tail`).
        let n = b.decode_seqs;
        let row = match &self.tail {
            Some(t) if b.prefill_seqs == 0 && b.prefill_tokens == 0 && b.sampled_seqs == n => {
                t.rows.get(n as usize).map(|cell| (t.start, cell.get_or_init(|| self.tail_row(t.start, b))))
            }
            _ => None,
        };
        let end = row.map_or(self.slots.len(), |(start, _)| start);
        for i in first..end {
            let (secs, outside) = self.slot_seconds_memo(i, b);
            total += secs;
            if self.is_cpu[i] {
                cpu += secs;
            }
            if let Some(a) = acc.as_deref_mut() {
                if secs > 0.0 && (outside || self.slots[i].fallback.is_some()) {
                    a.add(i, secs);
                }
            }
        }
        if let Some((_, r)) = row {
            for &secs in r.seconds.iter() {
                total += secs;
            }
            // No CPU slot lies before the tail: its sum from zero is the whole.
            cpu = r.cpu;
            if let Some(a) = acc.as_deref_mut() {
                for &(i, secs) in r.accounted.iter() {
                    a.add(i, secs);
                }
            }
        }
        if let Some(a) = acc {
            a.total_s += total;
            a.iterations += 1;
        }
        (total, cpu)
    }

    /// The tail's row for the count of `b` (a batch of decodes only), slot by slot.
    #[cold]
    fn tail_row(&self, start: usize, b: &BatchShape) -> Row {
        let (mut seconds, mut cpu, mut accounted) = (Vec::new(), 0.0, Vec::new());
        for i in start..self.slots.len() {
            let (secs, outside) = self.slot_seconds_memo(i, b);
            seconds.push(secs);
            if self.is_cpu[i] {
                cpu += secs;
            }
            if secs > 0.0 && (outside || self.slots[i].fallback.is_some()) {
                accounted.push((i, secs));
            }
        }
        Row { seconds: seconds.into(), cpu, accounted: accounted.into() }
    }

    /// Iteration time in seconds, before rounding to integer nanoseconds.
    pub fn iteration_seconds(&self, b: &BatchShape) -> f64 {
        self.seconds(b, None).0
    }

    /// The fallbacks and out-of-range readings of a run, with their share of its time.
    pub fn shares(&self, acc: &CostAccount) -> Vec<FallbackShare> {
        let mut out = Vec::new();
        for (i, s) in self.slots.iter().enumerate() {
            let Some(&(secs, iterations)) = acc.by_slot.get(i) else { continue };
            if iterations == 0 {
                continue;
            }
            let (reason, extrapolated) = match (&s.fallback, &s.curve) {
                (Some(r), _) => (format!("priced by the roofline: {r}"), false),
                (None, Some(c)) => {
                    let how = if s.bound.is_some() { "carried along its roofline bound" } else { "in proportion" };
                    (format!("read beyond its measured range ({}), {how}", c.range_text(s.name)), true)
                }
                (None, None) => continue,
            };
            let share = if acc.total_s > 0.0 { secs / acc.total_s } else { 0.0 };
            let op = s.name.to_string();
            out.push(FallbackShare { group: String::new(), op, reason, iterations, share, extrapolated });
        }
        out
    }
}

/// The ops outside the transformer layers (the pipeline's first and last stages).
const HEAD_OPS: [&str; 3] = ["emb", "lm_head", "sample"];

impl CostModel for Profiled {
    fn iteration_time(&self, b: &BatchShape) -> SimTime {
        to_ns(self.seconds(b, None).0)
    }

    fn accounts(&self) -> bool {
        true
    }

    fn iteration_time_accounted(&self, b: &BatchShape, acc: &mut CostAccount) -> SimTime {
        to_ns(self.seconds(b, Some(acc)).0)
    }

    fn iteration_times(&self, b: &BatchShape, acc: Option<&mut CostAccount>) -> (SimTime, SimTime) {
        let (total, cpu) = self.seconds(b, acc);
        (to_ns(total), cpu_ns(cpu))
    }

    fn cpu_time(&self, b: &BatchShape) -> SimTime {
        if b.is_empty() {
            return SimTime::ZERO;
        }
        let secs: f64 = (0..self.slots.len()).filter(|&i| self.is_cpu[i]).map(|i| self.slot_seconds_memo(i, b).0).sum();
        cpu_ns(secs)
    }

    fn shares(&self, acc: &CostAccount) -> Vec<FallbackShare> {
        Profiled::shares(self, acc)
    }

    fn head_time(&self, b: &BatchShape) -> SimTime {
        if b.is_empty() {
            return SimTime::ZERO;
        }
        let secs: f64 = (0..self.slots.len())
            .filter(|&i| HEAD_OPS.contains(&self.slots[i].name))
            .map(|i| self.slot_seconds_memo(i, b).0)
            .sum();
        SimTime((secs * 1e9).round() as u64)
    }

    fn fallbacks(&self) -> Vec<Fallback> {
        self.fallbacks.clone()
    }

    fn collective_time(&self, b: &BatchShape) -> SimTime {
        if b.is_empty() {
            return SimTime::ZERO;
        }
        let secs: f64 = (0..self.slots.len())
            .filter(|&i| {
                let s = &self.slots[i];
                s.kind == Kind::AllReduce
                    || matches!(s.kind, Kind::Roof(op, ..) if op == roof("allreduce") || op == roof("all_to_all"))
            })
            .map(|i| self.slot_seconds_memo(i, b).0)
            .sum();
        SimTime((secs * 1e9).round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::profile::ProfileMeta;
    use crate::spec::{Dtype, GpuPreset, ModelPreset};

    fn llama8b() -> ModelSpec {
        ModelSpec::from_preset(ModelPreset::find("llama-3-8b").unwrap(), Dtype::Bf16, Dtype::Bf16)
    }

    fn table(name: &str, tp: Option<u32>, axes: Vec<Axis>, points: Vec<Vec<f64>>) -> OpTable {
        OpTable::linear(name, tp, axes, points)
    }

    /// A profile where every token op costs `tokens / 1000` ms, attention and CPU ops simple lines.
    fn profile(tp: u32) -> Profile {
        let line = |name: &str| table(name, Some(tp), vec![Axis::Tokens], vec![vec![1.0, 0.001], vec![10000.0, 10.0]]);
        let mut ops: Vec<OpTable> = [
            "input_layernorm",
            "attn_pre_proj",
            "attn_rope",
            "attn_post_proj",
            "post_attention_layernorm",
            "mlp_up_proj",
            "mlp_act",
            "mlp_down_proj",
            "add",
            "lm_head",
        ]
        .iter()
        .map(|n| line(n))
        .collect();
        // Decode: 0.01 ms per sequence × (context / 1000).
        ops.push(table(
            "attn_decode",
            Some(tp),
            vec![Axis::Batch, Axis::Context],
            vec![vec![1.0, 1000.0, 0.01], vec![1.0, 2000.0, 0.02], vec![8.0, 1000.0, 0.08], vec![8.0, 2000.0, 0.16]],
        ));
        // Prefill: 1 ms per million causal pairs, at cached 0 (chunk 1000 → 500,500 pairs).
        ops.push(table(
            "attn_prefill",
            Some(tp),
            vec![Axis::Chunk, Axis::Cached],
            vec![vec![1000.0, 0.0, 0.5005], vec![1000.0, 1000.0, 1.5005], vec![2000.0, 0.0, 2.001]],
        ));
        ops.push(table("schedule", None, vec![Axis::Batch], vec![vec![1.0, 0.5], vec![101.0, 1.5]]));
        Profile {
            format_version: PROFILE_FORMAT_VERSION,
            meta: ProfileMeta { model: ModelDims::from_spec(&llama8b()), tp: vec![tp], ..Default::default() },
            ops,
        }
    }

    fn build(p: &Profile, tp: u64) -> Result<Profiled, ProfileError> {
        let g = GpuPreset::find("h100-sxm").unwrap().spec();
        Profiled::new(llama8b(), g, tp, RooflineParams::default(), p)
    }

    #[test]
    fn iteration_time_is_the_sum_of_the_tables_by_hand() {
        let m = build(&profile(1), 1).unwrap();
        let mut b = BatchShape::default();
        for _ in 0..8 {
            b.add_decode(1500);
        }
        // 8 tokens: 9 per-layer token ops at 0.001 + 7 × 9.999/9999 ms ≈ 0.008 ms each.
        let tok = 0.001 + 7.0 * (10.0 - 0.001) / 9999.0;
        let layer = 9.0 * tok + 0.12; // decode: batch 8, context 1500 → 0.12 ms.
        let lm = tok; // 8 sampled sequences.
        let cpu = 0.5 + 7.0 / 100.0; // batch 8 on the schedule line.
        let expected = (32.0 * layer + lm + cpu) * 1e-3;
        let got = m.iteration_seconds(&b);
        assert!((got - expected).abs() < 1e-12, "{got} vs {expected}");
        assert!(m.fallbacks().is_empty(), "{:?}", m.fallbacks());
        assert_eq!(m.iteration_time(&b), SimTime((expected * 1e9).ceil() as u64));
    }

    #[test]
    fn memoised_times_equal_the_tables_read_slot_by_slot_and_out_of_range_reads_are_still_counted() {
        let m = build(&profile(1), 1).unwrap();
        assert!(m.prefix.as_ref().is_some_and(|(lead, _)| *lead > 1), "the leading token ops share one memo");
        // Decode-only batches read the trailing slots (from the LM head on) as one row.
        let tail = m.tail.as_ref().expect("the trailing slots are memoised").start;
        assert_eq!(m.slots[tail..].iter().map(|s| s.name).collect::<Vec<_>>(), ["lm_head", "schedule"]);
        let shapes: Vec<BatchShape> = (0..40u64)
            .map(|k| {
                let mut b = BatchShape::default();
                for j in 0..k % 9 {
                    b.add_decode(900 + 37 * j + k);
                }
                if k % 3 == 0 {
                    b.add_prefill(50 + 13 * k, 0, true);
                }
                // 12,000 tokens: past the tables' 10,000 and past the memo's size.
                if k == 39 {
                    b.add_prefill(12_000, 0, true);
                }
                b
            })
            .filter(|b| !b.is_empty())
            .collect();
        let by_hand = |b: &BatchShape| m.slots.iter().map(|s| m.slot_seconds(s, b).0).fold(0.0, |t, x| t + x);
        for round in 0..2 {
            for b in &shapes {
                // Bit-identical to the unmemoised sum in slot order, on a cold and a warm memo.
                assert_eq!(m.iteration_seconds(b).to_bits(), by_hand(b).to_bits(), "round {round}: {b:?}");
                // The one pass gives what the two calls give.
                let (total, cpu) = m.iteration_times(b, None);
                assert_eq!((total, cpu), (m.iteration_time(b), m.cpu_time(b)), "round {round}: {b:?}");
                assert!(cpu > SimTime::ZERO && cpu < total);
                // The account holds each fallback and out-of-range reading, as slot by slot.
                let mut acc = CostAccount::default();
                m.iteration_time_accounted(b, &mut acc);
                let mut want = CostAccount::default();
                for (i, s) in m.slots.iter().enumerate() {
                    let (secs, outside) = m.slot_seconds(s, b);
                    if secs > 0.0 && (outside || s.fallback.is_some()) {
                        want.add(i, secs);
                    }
                }
                assert_eq!(acc.by_slot, want.by_slot, "round {round}: {b:?}");
            }
        }
        // 10,001 tokens: beyond the token tables (10,000), inside the memo: the per-layer ops
        // read out of range are counted on the memo's first read and on later ones alike.
        let mut big = BatchShape::default();
        big.add_prefill(10_001, 0, true);
        let (mut cold, mut warm) = (CostAccount::default(), CostAccount::default());
        let fresh = build(&profile(1), 1).unwrap();
        fresh.iteration_time_accounted(&big, &mut cold);
        m.iteration_time_accounted(&big, &mut CostAccount::default());
        m.iteration_time_accounted(&big, &mut warm);
        assert_eq!(cold.by_slot, warm.by_slot);
        let counted = cold.by_slot.iter().filter(|(s, n)| *s > 0.0 && *n == 1).count();
        assert!(counted >= 9, "every token op out of range is counted: {:?}", cold.by_slot);
    }

    #[test]
    fn tables_read_beyond_their_grid_follow_the_roofline_bound_of_their_op() {
        // Tables measured as the roofline prices the op (a fixed fraction of its speed of light):
        // beyond the measured points each slot's time is the roofline's, as the hold and the
        // SOL-ratio carry promise, where times in proportion miss it (a decode's query and
        // output, a GEMM's weights, do not grow with the context or the tokens).
        let g = GpuPreset::find("h100-sxm").unwrap().spec();
        let roof = Roofline::new(llama8b(), g, 1, RooflineParams::default());
        let layers = llama8b().layers as f64;
        let decode = |b: u64, c: u64| {
            let mut s = BatchShape::default();
            (0..b).for_each(|_| s.add_decode(c));
            s
        };
        let prefill = |n: u64| {
            let mut s = BatchShape::default();
            s.add_prefill(n, 0, false);
            s
        };
        // ms per layer, at 80% of the speed of light.
        let ms = |op: &str, s: &BatchShape| roof.op_seconds(op, s) / layers * 1e3 / 0.8;
        let mut p = profile(1);
        p.ops.retain(|t| t.name != "attn_decode" && t.name != "attn_pre_proj");
        // A staircase: the more sequences, the shorter the contexts measured.
        let stairs: [(u64, &[u64]); 3] = [(1, &[128, 1024, 4096]), (8, &[128, 1024]), (64, &[128])];
        let mut pts = Vec::new();
        for (b, cs) in stairs {
            pts.extend(cs.iter().map(|&c| vec![b as f64, c as f64, ms("attn_decode", &decode(b, c))]));
        }
        p.ops.push(table("attn_decode", Some(1), vec![Axis::Batch, Axis::Context], pts));
        let tokens = [8u64, 32, 128];
        let gemm = tokens.iter().map(|&n| vec![n as f64, ms("qkv_proj", &prefill(n))]).collect();
        p.ops.push(table("attn_pre_proj", Some(1), vec![Axis::Tokens], gemm));
        let m = build(&p, 1).unwrap();
        let slot = |name: &str| m.slots.iter().find(|s| s.name == name).unwrap();
        for (shape, name, op) in [
            (decode(64, 3000), "attn_decode", "attn_decode"),
            (decode(32, 1000), "attn_decode", "attn_decode"),
            (decode(200, 128), "attn_decode", "attn_decode"),
            (prefill(8192), "attn_pre_proj", "qkv_proj"),
        ] {
            let (secs, outside) = m.slot_seconds(slot(name), &shape);
            let want = roof.op_seconds(op, &shape) / 0.8;
            assert!(outside, "{name} at {shape:?} lies beyond the grid");
            assert!((secs / want - 1.0).abs() < 1e-9, "{name} at {shape:?}: {secs} s against {want} s");
        }
        // The run's account says what was read so, and how.
        let mut acc = CostAccount::default();
        let mut b = decode(64, 3000);
        (0..136).for_each(|_| b.add_decode(1000));
        m.iteration_time_accounted(&b, &mut acc);
        let shares = m.shares(&acc);
        let share = |op: &str| shares.iter().find(|f| f.op == op).unwrap_or_else(|| panic!("{op}: {shares:?}"));
        let (attn, cpu) = (share("attn_decode"), share("schedule"));
        assert!(attn.extrapolated && attn.reason.ends_with("carried along its roofline bound"), "{attn:?}");
        // 200 sequences, beyond the CPU table's 101: no bound, in proportion.
        assert!(cpu.extrapolated && cpu.reason.ends_with("in proportion"), "{cpu:?}");
        // Times in proportion from the measured edge would miss: the decode of 64 × 3000 from
        // (64, 128) by over 1%, the GEMM of 8192 tokens (compute-bound) from 128 (bound by its
        // weights, read once) by more.
        let edge = ms("attn_decode", &decode(64, 128)) * layers * 1e-3;
        let want = roof.op_seconds("attn_decode", &decode(64, 3000)) / 0.8;
        assert!((edge * 3000.0 / 128.0 / want - 1.0).abs() > 0.01);
        let edge = ms("qkv_proj", &prefill(128)) * layers * 1e-3;
        assert!((edge * 64.0 / (roof.op_seconds("qkv_proj", &prefill(8192)) / 0.8) - 1.0).abs() > 0.05);
    }

    #[test]
    fn mixed_prefills_scale_by_causal_pairs() {
        let m = build(&profile(1), 1).unwrap();
        let attn = |b: &BatchShape| m.breakdown(b).into_iter().find(|o| o.name == "attn_prefill").unwrap().seconds;
        let mut one = BatchShape::default();
        one.add_prefill(2000, 0, true);
        assert!((attn(&one) - 32.0 * 2.001e-3).abs() < 1e-12);
        // Two prefills of 1000 and 3000 tokens: mean chunk 2000 (2,001,000 pairs each), the
        // batch has 500,500 + 4,501,500 pairs: 2 × 2.001 ms × 5,002,000 / 4,002,000.
        let mut two = BatchShape::default();
        two.add_prefill(1000, 0, true);
        two.add_prefill(3000, 0, true);
        let expected = 32.0 * 2.0 * 2.001e-3 * 5_002_000.0 / 4_002_000.0;
        assert!((attn(&two) - expected).abs() < 1e-12, "{} vs {expected}", attn(&two));
    }

    /// A few tokens over a long cached context (a speculative verification of 4 tokens over
    /// 1,000): their share of a 1,004-token prompt's prefill attention is under 1%, less than
    /// the decode kernel takes for one token over the same context, which is the least the chunk
    /// does. So the chunk costs the decode table's time for its sequences at their context.
    #[test]
    fn a_few_tokens_over_a_long_context_cost_at_least_a_decode() {
        // A kernel database's prefill table, [batch, sequence]: 0.5 ms per prompt of 1,000, 2 ms
        // per prompt of 2,000.
        let mut p = profile(1);
        p.ops.retain(|o| o.name != "attn_prefill");
        p.ops.push(table(
            "attn_prefill",
            Some(1),
            vec![Axis::Batch, Axis::Sequence],
            vec![vec![1.0, 1000.0, 0.5], vec![1.0, 2000.0, 2.0], vec![2.0, 1000.0, 1.0], vec![2.0, 2000.0, 4.0]],
        ));
        let m = build(&p, 1).unwrap();
        let op = |b: &BatchShape, name: &str| m.breakdown(b).into_iter().find(|o| o.name == name).unwrap().seconds;
        for n in [1u64, 2] {
            let (mut verify, mut decode) = (BatchShape::default(), BatchShape::default());
            for _ in 0..n {
                verify.add_prefill(4, 1000, true);
                decode.add_decode(1004);
            }
            let floor = op(&decode, "attn_decode");
            // By hand: 32 layers × 0.01 ms × n × 1.004 (the decode table is linear in both axes).
            assert!((floor - 32.0 * 0.01e-3 * n as f64 * 1.004).abs() < 1e-9, "{floor}");
            assert_eq!(op(&verify, "attn_prefill"), floor);
        }
        // Without the floor: 32 × 0.506 ms × the chunk's share of the pairs, (1004² − 1000²) /
        // 1004² = 0.79%: 0.13 ms, under the decode's 0.32 ms. A whole 1,000-token chunk over
        // 1,000 cached is far above the floor: 32 × 2 ms × (2000² − 1000²) / 2000².
        let mut long = BatchShape::default();
        long.add_prefill(1000, 1000, true);
        assert!((op(&long, "attn_prefill") - 32.0 * 2e-3 * 0.75).abs() < 1e-12, "{}", op(&long, "attn_prefill"));
    }

    #[test]
    fn missing_groups_fall_back_to_the_roofline() {
        let m = build(&profile(2), 2).unwrap();
        assert!(m.fallbacks().iter().any(|f| f.op == "all_reduce" && f.reason.starts_with("not in the profile")));
        let mut b = BatchShape::default();
        b.add_decode(100);
        let ops = m.breakdown(&b);
        let ar = ops.iter().find(|o| o.name == "all_reduce").unwrap();
        assert!(!ar.measured);
        let g = GpuPreset::find("h100-sxm").unwrap().spec();
        let r = Roofline::new(llama8b(), g, 2, RooflineParams::default());
        let roof = r.breakdown(&b).into_iter().find(|o| o.name == "allreduce").unwrap().seconds;
        assert!((ar.seconds - (roof + 64.0 * 3e-6)).abs() < 1e-15);
    }

    #[test]
    fn a_profile_measured_on_another_gpu_is_refused_naming_both() {
        let mut p = profile(1);
        p.meta.gpu = "NVIDIA H200".into();
        let e = build(&p, 1).unwrap_err();
        assert!(matches!(e, ProfileError::OtherGpu(_)), "{e:?}");
        assert!(
            e.to_string().starts_with(
                "the profile was measured on NVIDIA H200 (the h200 preset); the scenario's GPU is h100-sxm"
            ),
            "{e}"
        );
        // The same GPU by CUDA's name or the database's system, or a device no preset names: read.
        for ok in ["NVIDIA H100 80GB HBM3", "h100_sxm", "AMD EPYC 9654 96-Core Processor", ""] {
            p.meta.gpu = ok.into();
            assert!(build(&p, 1).is_ok(), "{ok}");
        }
    }

    #[test]
    fn mismatches_are_one_line_errors() {
        // No tables at the scenario's TP degree: refused, naming both degrees.
        let e = build(&profile(1), 2).unwrap_err();
        assert!(matches!(e, ProfileError::OtherTp(_)), "{e:?}");
        assert!(e.to_string().starts_with("the profile has no tables at TP 2 (it has TP [1]): measure"), "{e}");
        let mut p = profile(1);
        p.meta.model.hidden = 8192;
        let e = build(&p, 1).unwrap_err();
        assert!(matches!(e, ProfileError::OtherModel(_)), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("hidden 8192") && e.contains("hidden 4096"), "{e}");
        let mut p = profile(1);
        p.ops[0].points[0] = vec![1.0];
        assert!(build(&p, 1)
            .unwrap_err()
            .to_string()
            .contains("op input_layernorm (tp 1): every point needs 2 numbers"));
        let mut p = profile(1);
        p.ops[11].axes = vec![Axis::Tokens];
        p.ops[11].points = vec![vec![1.0, 1.0]];
        assert!(build(&p, 1).unwrap_err().to_string().contains("op attn_prefill must have axes"));
        let mut p = profile(1);
        p.format_version = 9;
        assert!(build(&p, 1).unwrap_err().to_string().contains("version 9"));
    }

    #[test]
    fn attention_from_another_geometry_is_used_only_if_per_gpu_heads_match() {
        let mut p = profile(1);
        // Llama-2-70B at TP 2: 32 query and 4 KV heads per GPU, not llama-3-8b's 32 and 8.
        let other = ModelDims {
            name: "70b".into(),
            hidden: 8192,
            heads: 64,
            kv_heads: 8,
            head_dim: 128,
            intermediate: 1,
            vocab: 1,
        };
        for t in p.ops.iter_mut().filter(|t| t.name.starts_with("attn_decode")) {
            t.dims = Some(other.clone());
            t.tp = Some(2);
        }
        let m = build(&p, 1).unwrap();
        assert!(
            m.fallbacks().iter().any(|f| f.op == "attn_decode" && f.reason.starts_with("measured for 32 query / 4 KV")),
            "{:?}",
            m.fallbacks()
        );
    }
}
