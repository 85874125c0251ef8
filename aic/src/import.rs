//! Building a cost profile for one model from the database: every op at the model's own shapes
//! on each TP degree, with the interpolation chosen on held-out points and the provenance of
//! every table.
//!
//! ```text
//!   attn_pre_proj   GEMM  n = (heads/tp + 2·kv_heads/tp)·head_dim, k = hidden      [tokens]
//!   attn_post_proj  GEMM  n = hidden, k = heads/tp·head_dim                        [tokens]
//!   mlp_up_proj     GEMM  n = 2·intermediate/tp, k = hidden (gate and up fused)    [tokens]
//!   mlp_down_proj   GEMM  n = hidden, k = intermediate/tp                          [tokens]
//!   moe_experts     MoE   the routed experts of a mixture-of-experts layer         [tokens]
//!   lm_head         GEMM  n = vocab/tp, k = hidden, bf16                           [tokens]
//!   attn_prefill    context attention, heads/tp and kv_heads/tp per GPU          [batch, sequence]
//!   attn_decode     generation attention                                         [batch, context]
//!   all_reduce      the engine's all-reduce on tp GPUs (TP > 1)                  [bytes]
//! ```
//! The layer's shapes are AIConfigurator's own (`sdk/models/llama.py`: qkv, proj, gate_ffn1,
//! ffn2, logits GEMMs; the logits GEMM in bf16 whatever the weights). What the database does
//! not time — norms, RoPE, the KV write, activation, residual adds, embedding, sampling, the
//! engine's CPU work — is left to servesim's roofline and engine overheads, and the profile's
//! notes say so.

use servesim_sim::cost::profile::{
    fit_table, Axis, Curve1, DatabaseMeta, Interp, ModelDims, OpSource, OpTable, Profile, ProfileMeta,
    PROFILE_FORMAT_VERSION,
};
use servesim_sim::spec::{Dtype, GpuSpec, ModelSpec};

use crate::attention::{self, AttnShape, Phase};
use crate::comm;
use crate::db::{Db, Selection};
use crate::gemm::{GemmRead, GemmTable, Sol};
use crate::mla;

/// Weights of the GEMMs, as the database names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weights {
    Bf16,
    /// Per-tensor FP8 (W8A8).
    Fp8,
    /// Block-scaled FP8 (DeepSeek-style 128 × 128 blocks).
    Fp8Block,
    /// NVFP4 (Blackwell).
    Fp4,
    /// MXFP4 experts with bf16 attention and LM head, the gpt-oss checkpoint: its MoE runs
    /// weight-only 4-bit kernels (`w4a16_mxfp4`), its GEMMs bf16 (AIConfigurator 095f58a51
    /// `sdk/models/helpers.py`: quant_algo "mxfp4" → GEMM bfloat16, MoE w4a16_mxfp4).
    Mxfp4,
}

impl Weights {
    pub const NAMES: [&'static str; 5] = ["bf16", "fp8", "fp8-block", "fp4", "mxfp4"];

    pub fn parse(s: &str) -> Option<Weights> {
        match s {
            "bf16" => Some(Weights::Bf16),
            "fp8" => Some(Weights::Fp8),
            "fp8-block" | "fp8_block" => Some(Weights::Fp8Block),
            "fp4" | "nvfp4" => Some(Weights::Fp4),
            "mxfp4" => Some(Weights::Mxfp4),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        Weights::NAMES[self as usize]
    }

    /// The weights of the dense GEMMs (attention projections, dense FFNs).
    fn gemm_weights(self) -> Weights {
        match self {
            Weights::Mxfp4 => Weights::Bf16,
            w => w,
        }
    }

    /// The database's `gemm_dtype`.
    pub fn gemm_dtype(self) -> &'static str {
        match self.gemm_weights() {
            Weights::Bf16 => "bfloat16",
            Weights::Fp8 => "fp8",
            Weights::Fp8Block => "fp8_block",
            Weights::Fp4 => "nvfp4",
            Weights::Mxfp4 => unreachable!("MXFP4 GEMMs are bf16"),
        }
    }

    /// The database's `moe_dtype` as the engine runs these weights. MXFP4 experts run
    /// weight-only (`w4a16_mxfp4`), except under TensorRT-LLM on GPUs with FP4 tensor cores
    /// (compute capability ≥ 10.0), which quantizes the activations to MXFP8
    /// (`w4a8_mxfp4_mxfp8`: NVIDIA/TensorRT-LLM 008e0af8, tensorrt_llm/_torch/model_config.py,
    /// `ModelConfig.get_mxfp4_quant_algo`; its `resolve_moe_backend` picks the TRTLLM MoE
    /// backend for gpt-oss on Blackwell).
    pub fn moe_dtype(self, framework: &str, fp4_gpu: bool) -> &'static str {
        match self {
            Weights::Mxfp4 if framework == "trtllm" && fp4_gpu => "w4a8_mxfp4_mxfp8",
            Weights::Mxfp4 => "w4a16_mxfp4",
            w => w.gemm_dtype(),
        }
    }

    fn bytes(self) -> f64 {
        match self {
            Weights::Bf16 => 2.0,
            Weights::Fp8 | Weights::Fp8Block => 1.0,
            Weights::Fp4 | Weights::Mxfp4 => 0.5,
        }
    }
}

/// What to import.
#[derive(Clone, Debug)]
pub struct Request {
    pub system: String,
    pub framework: String,
    /// None: the newest version with GEMM and attention tables.
    pub version: Option<String>,
    pub model: ModelSpec,
    pub tp: Vec<u32>,
    pub weights: Weights,
    pub kv: Dtype,
    /// Among several GEMM kernels for the dtype (default: the one with the most rows).
    pub gemm_kernel: Option<String>,
    /// The GPU's datasheet numbers, for reading GEMMs between measured shapes.
    pub gpu: GpuSpec,
    /// `balanced`, `power_law_1.01` or `power_law_1.2`: how tokens spread over experts.
    pub moe_distribution: String,
    /// Whether the routed experts' table is read (false: a DP attention rank's slice, whose
    /// experts run over all of the instance's GPUs and are read from the instance's own slice).
    pub experts: bool,
    /// Whole experts per GPU (expert parallelism over the TP GPUs) rather than each expert
    /// split over them: the experts' table is read at its expert-parallel rows where it has
    /// them.
    pub expert_parallel: bool,
    /// The package the database came with (`aiconfigurator-core 0.12.0`), when known.
    pub package: Option<String>,
    /// The command line, for the profile's `source`.
    pub command: String,
    pub date: String,
    pub servesim_version: String,
}

/// Tokens up to which the engine runs inside CUDA graphs (collectives are timed in graph mode
/// there): vLLM's largest capture size by default (512, `CompilationConfig`
/// `max_cudagraph_capture_size`); SGLang captures decode batches only, up to
/// `cuda_graph_max_bs` (160 by default on these GPUs), and TensorRT-LLM's graphs cover its
/// generation batches too.
pub(crate) fn graph_tokens(framework: &str) -> u64 {
    match framework {
        "vllm" => 512,
        _ => 160,
    }
}

/// The request's GEMM tables: its weights' (the quantized GEMMs) and the bf16 one (the LM
/// head), and whether the former was timed eagerly and is bounded. vLLM's fp8_block GEMMs are
/// timed without CUDA graphs, every other dtype with them (collector/vllm/collect_gemm.py,
/// `use_cuda_graph=gemm_type != "fp8_block"`, ai-dynamo/aiconfigurator 095f58a51): up to about
/// a thousand tokens their times are the host's launch cost (b200_sxm vllm 0.24.0, n 2048, k 3072:
/// 0.17-0.26 ms from m 1 to 1,024, where the per-tensor fp8 GEMM takes 0.007-0.02 ms), which
/// vLLM's CUDA-graph steps do not pay. Each point is bounded by the per-tensor fp8 GEMM's, same
/// bytes and FLOPs ([`GemmTable::bounded_by`]).
fn gemm_tables(db: &Db, sel: &Selection, r: &Request) -> Result<(GemmTable, GemmTable, bool), crate::Error> {
    let gemm_file = format!("{}/gemm/{}/{}/gemm_perf.parquet", sel.system, sel.framework, sel.version);
    let sol = |w: Weights| {
        let flops = match w {
            Weights::Bf16 | Weights::Mxfp4 => r.gpu.bf16_flops,
            Weights::Fp8 | Weights::Fp8Block => r.gpu.fp8_flops.unwrap_or(r.gpu.bf16_flops),
            Weights::Fp4 => r.gpu.fp8_flops.map_or(r.gpu.bf16_flops, |f| 2.0 * f),
        };
        Sol { flops, bytes_per_s: r.gpu.hbm_bytes_per_s, weight_bytes: w.bytes() }
    };
    let gw = r.weights.gemm_weights();
    let mut gemms = GemmTable::load(db, &gemm_file, gw.gemm_dtype(), r.gemm_kernel.as_deref(), sol(gw))?;
    // A database without per-tensor fp8 GEMMs leaves the eager times as they are.
    let graph = (sel.framework == "vllm" && gw == Weights::Fp8Block)
        .then(|| GemmTable::load(db, &gemm_file, "fp8", None, sol(Weights::Fp8)).ok())
        .flatten();
    let eager = graph.is_some();
    if let Some(g) = graph {
        gemms = gemms.bounded_by(&g);
    }
    let logits = if gw == Weights::Bf16 {
        gemms.clone()
    } else {
        GemmTable::load(db, &gemm_file, "bfloat16", None, sol(Weights::Bf16))?
    };
    Ok((gemms, logits, eager))
}

/// Builds the profile; errors say which file or shape is missing.
pub fn import(db: &Db, r: &Request) -> Result<Profile, crate::Error> {
    let sel = db.select(&r.system, &r.framework, r.version.as_deref())?;
    if r.tp.is_empty() {
        return Err("give at least one TP degree".into());
    }
    let m = &r.model;
    for &tp in &r.tp {
        if tp == 0 || !m.heads.is_multiple_of(tp as u64) {
            return Err(format!("TP {tp} does not divide {}'s {} attention heads", m.name, m.heads).into());
        }
    }
    if m.arch.mla.is_some() {
        mla::check_tables(db, &sel)?;
    }
    let (gemms, logits, eager) = gemm_tables(db, &sel, r)?;
    let transfer = gemms.transfer_error();
    let gw = r.weights.gemm_weights();
    let logits_transfer = if gw == Weights::Bf16 { transfer.clone() } else { logits.transfer_error() };
    let kv_dtype = match r.kv {
        Dtype::Bf16 => "bfloat16",
        Dtype::Fp8 => "fp8",
        d => return Err(format!("a {} KV cache is not imported from the database (bf16 or fp8)", d.name()).into()),
    };

    let mut ops = Vec::new();
    let mut notes = vec![
        format!(
            "kernel times from NVIDIA AIConfigurator's database ({} {} {}), Apache-2.0; see NOTICE",
            sel.system, sel.framework, sel.version
        ),
        "not in the database, priced by servesim's roofline: norms, RoPE, KV write, activation, residual adds \
         (AIConfigurator prices these analytically too), embedding lookup, sampling; the engine's CPU work comes \
         from [cost] overhead"
            .to_string(),
    ];
    if m.experts > 1 {
        notes.push("the MoE router GEMM (hidden × experts) is not in the profile".into());
    }
    if eager {
        notes.push(
            "fp8_block GEMMs: the database timed vLLM's without CUDA graphs (its other GEMMs with them), so each \
             point is at most the per-tensor fp8 GEMM's at the same shape and tokens, as vLLM's CUDA-graph steps \
             run them"
                .into(),
        );
    }
    if m.arch.biases {
        notes.push(
            "the projections' and experts' bias adds are not timed: the database's GEMM and MoE tables have none \
             (as AIConfigurator's own model of the model)"
                .into(),
        );
    }
    if r.weights == Weights::Mxfp4 {
        notes.push(format!(
            "mxfp4: the experts run the database's {} MoE kernels (as {} runs them on this GPU), the other GEMMs bf16",
            r.weights.moe_dtype(&sel.framework, r.gpu.has_fp4()),
            sel.framework
        ));
    }
    if m.arch.mla.is_some() {
        notes.push(
            "latent attention: attn_pre_proj is the fused Q/KV down-projection plus the Q up-projection, attn_prefill \
             adds the KV up-projection over the prompt's tokens, attn_decode the two absorbed products \
             (AIConfigurator's granular MLA model)"
                .into(),
        );
    }
    if m.arch.shared_experts > 0 {
        notes.push("moe_experts includes the shared experts' GEMMs (every token), read at its token counts".into());
    }
    if m.experts > 1 && sel.framework == "trtllm" && r.gpu.has_fp4() && r.weights == Weights::Fp8Block {
        // NVIDIA/TensorRT-LLM 008e0af8 tensorrt_llm/_torch/model_config.py resolve_moe_backend:
        // FP8 block scales on SM100 pick the TRTLLM backend.
        notes.push(
            "TensorRT-LLM runs FP8-block experts on Blackwell with its TRTLLM-gen MoE backend; the database measured \
             other kernels (its moe_experts table says which), so the experts may be priced slow"
                .into(),
        );
    }
    for &tp in &r.tp {
        let t = tp as u64;
        let q = m.heads / t;
        let kvh = m.kv_heads_per_gpu(t);
        let hd = m.head_dim;
        let mut shapes = Vec::new();
        if m.arch.mla.is_none() {
            shapes.push(("attn_pre_proj", (q + 2 * kvh) * hd, m.hidden));
            shapes.push(("attn_post_proj", m.hidden, q * hd));
        }
        // The dense FFN: every layer of a dense model, the dense layers of a MoE one.
        let ffn = m.dense_ffn_width();
        if m.experts <= 1 || (m.arch.dense_layers > 0 && ffn > 0) {
            shapes.push(("mlp_up_proj", 2 * ffn / t, m.hidden));
            shapes.push(("mlp_down_proj", m.hidden, ffn / t));
        }
        for (name, n, k) in shapes {
            ops.push(gemm_op(name, tp, &gemms, n, k, &transfer)?);
        }
        ops.push(gemm_op("lm_head", tp, &logits, m.vocab / t, m.hidden, &logits_transfer)?);
        if m.experts > 1 && r.experts {
            ops.push(moe_op(db, &sel, r, tp, &gemms)?);
        }
        if let Some(a) = m.arch.mla {
            let gw = GemmWeights { quantized: &gemms, bf16: &logits, fp4: r.weights == Weights::Fp4 };
            ops.extend(mla_ops(db, &sel, r, tp, a, &gw, kv_dtype)?);
            push_all_reduce(db, &sel, m, tp, &mut ops, &mut notes)?;
            continue;
        }
        let full = AttnShape { heads: q, kv_heads: kvh, head_dim: hd, kv_dtype: kv_dtype.into(), window: 0 };
        // A windowed model's windowed layers read the rows measured with its window.
        let windowed = m.arch.window.map(|w| AttnShape { window: w.tokens, ..full.clone() });
        let mut kinds = vec![
            ("attn_prefill", Phase::Context, vec![Axis::Batch, Axis::Sequence], &full),
            ("attn_decode", Phase::Generation, vec![Axis::Batch, Axis::Context], &full),
        ];
        if let Some(w) = &windowed {
            kinds.push(("attn_prefill_window", Phase::Context, vec![Axis::Batch, Axis::Sequence], w));
            kinds.push(("attn_decode_window", Phase::Generation, vec![Axis::Batch, Axis::Context], w));
        }
        for (name, phase, axes, shape) in kinds {
            let file = format!("{}/attention/{}/{}/{}", sel.system, sel.framework, sel.version, phase.file());
            let a = attention::read(db, &file, phase, shape).map_err(|e| format!("{name} (tp {tp}): {e}"))?;
            let pts = a.points.iter().map(|&(b, s, ms)| vec![b as f64, s as f64, ms]).collect();
            let mut table = fit_table(name, Some(tp), axes, pts);
            table.source = Some(OpSource {
                file,
                selection: format!("{}; {q} query heads, {kvh} KV heads per GPU", a.selection),
                shape: a.shape,
                transfer_error: None,
            });
            ops.push(table);
        }
        push_all_reduce(db, &sel, m, tp, &mut ops, &mut notes)?;
    }
    let device = device_name(db, &gemms.file).unwrap_or_else(|| sel.system.clone());
    servesim_sim::cost::profile::add_interp_note(&mut notes);
    Ok(Profile {
        format_version: PROFILE_FORMAT_VERSION,
        meta: ProfileMeta {
            source: r.command.clone(),
            backend: "aiconfigurator".into(),
            gpu: device,
            driver: None,
            clocks: None,
            dtype: r.weights.name().into(),
            model: ModelDims::from_spec(m),
            tp: r.tp.clone(),
            date: r.date.clone(),
            servesim_version: r.servesim_version.clone(),
            notes,
            database: Some(DatabaseMeta {
                name: "aiconfigurator".into(),
                package: r.package.clone(),
                system: sel.system.clone(),
                framework: sel.framework.clone(),
                version: sel.version.clone(),
                weights: r.weights.name().into(),
                kv: r.kv.name().into(),
                moe_distribution: (m.experts > 1).then(|| r.moe_distribution.clone()),
                files: db.files_read(),
            }),
        },
        ops,
    })
}

/// The engine's all-reduce on `tp` GPUs (TP > 1), or a note that the roofline prices it.
fn push_all_reduce(
    db: &Db,
    sel: &Selection,
    m: &ModelSpec,
    tp: u32,
    ops: &mut Vec<OpTable>,
    notes: &mut Vec<String>,
) -> Result<(), crate::Error> {
    if tp <= 1 {
        return Ok(());
    }
    match comm::all_reduce(db, sel, tp as u64, m.hidden, graph_tokens(&sel.framework))? {
        Some(ar) => {
            let pts = ar.points.iter().map(|&(b, ms)| vec![b, ms]).collect();
            let mut table = fit_table("all_reduce", Some(tp), vec![Axis::Bytes], pts);
            table.source = Some(OpSource {
                file: ar.file,
                selection: ar.selection,
                shape: "message sizes measured".into(),
                transfer_error: None,
            });
            ops.push(table);
        }
        None => notes.push(format!(
            "no all-reduce table for {tp} GPUs on {} ({} or NCCL): servesim's roofline prices it",
            sel.system, sel.framework
        )),
    }
    Ok(())
}

/// The GEMM tables an MLA block reads: its quantized projections, and bf16 ones where the
/// checkpoint keeps them (NVFP4 DeepSeek and Kimi releases leave Q and KV in bf16).
struct GemmWeights<'a> {
    quantized: &'a GemmTable,
    bf16: &'a GemmTable,
    fp4: bool,
}

/// A GEMM read of one projection, with the table it came from.
fn read_gemm<'a>(
    t: &'a GemmTable,
    what: &str,
    tp: u32,
    n: u64,
    k: u64,
) -> Result<(GemmRead, &'a GemmTable), crate::Error> {
    Ok((t.at(n, k).map_err(|e| format!("{what} (tp {tp}): {e}"))?, t))
}

/// Latent attention at one TP degree (AIConfigurator 095f58a51 `sdk/models/deepseek.py`, its
/// granular path): the fused down-projection of Q and KV (q_lora + kv_lora + rope columns) and
/// the Q up-projection are `attn_pre_proj`; the output projection `attn_post_proj`; the prefill
/// kernel plus the KV up-projection over the prompt's tokens `attn_prefill`; the decode kernel
/// plus the absorbed products before and after it `attn_decode`. Under NVFP4 the Q and KV
/// projections are bf16 and the output projection NVFP4 (the releases' `exclude_modules`, as
/// AIConfigurator reads `nvidia/DeepSeek-V3.1-NVFP4`), and the absorbed products bf16.
fn mla_ops(
    db: &Db,
    sel: &Selection,
    r: &Request,
    tp: u32,
    a: servesim_sim::spec::Mla,
    gw: &GemmWeights,
    kv_dtype: &str,
) -> Result<Vec<OpTable>, crate::Error> {
    let m = &r.model;
    let t = tp as u64;
    let q = m.heads / t;
    let files = match mla::check_tables(db, sel)? {
        mla::Tables::Kernels(f) => f,
        mla::Tables::Modules(f) => return mla_module_ops(db, &f, tp, q, gw, kv_dtype),
    };
    let qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    let qkv_table = if gw.fp4 { gw.bf16 } else { gw.quantized };
    let (down, q_up) = if a.q_lora_rank == 0 {
        (
            read_gemm(qkv_table, "MLA KV down-projection", tp, a.kv_lora_rank + a.qk_rope_head_dim, m.hidden)?,
            read_gemm(qkv_table, "MLA Q projection", tp, q * qk, m.hidden)?,
        )
    } else {
        (
            read_gemm(
                qkv_table,
                "MLA Q/KV down-projection",
                tp,
                a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim,
                m.hidden,
            )?,
            read_gemm(qkv_table, "MLA Q up-projection", tp, q * qk, a.q_lora_rank)?,
        )
    };
    let kv_up =
        read_gemm(qkv_table, "MLA KV up-projection", tp, q * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank)?;
    let o = read_gemm(gw.quantized, "MLA output projection", tp, m.hidden, q * a.v_head_dim)?;
    let bmm_dtype = if gw.fp4 || r.weights == Weights::Bf16 { "bfloat16" } else { "fp8" };
    let k = mla::read(db, &files, q, kv_dtype, bmm_dtype).map_err(|e| format!("latent attention (tp {tp}): {e}"))?;
    let transfer = |reads: &[&(GemmRead, &GemmTable)]| {
        reads.iter().find(|(g, _)| !g.measured).and_then(|(_, t)| t.transfer_error())
    };
    let shapes = |reads: &[(&str, &(GemmRead, &GemmTable))]| {
        reads.iter().map(|(w, (g, t))| format!("{w}: {} {}", t.dtype, g.shape)).collect::<Vec<_>>().join("; ")
    };
    let mut out = Vec::new();
    // Q/KV down- and Q up-projections, by tokens.
    let q_up_at = loglog(&q_up.0.points);
    let pts = down.0.points.iter().map(|&(n, ms)| vec![n as f64, ms + q_up_at.eval(n as f64)]).collect();
    let mut pre = fit_table("attn_pre_proj", Some(tp), vec![Axis::Tokens], pts);
    pre.source = Some(OpSource {
        file: down.1.file.clone(),
        selection: format!("MLA down- and Q up-projection GEMMs of kernel {}", down.1.kernel),
        shape: shapes(&[("down", &down), ("q up", &q_up)]),
        transfer_error: transfer(&[&down, &q_up]),
    });
    out.push(pre);
    out.push(gemm_op("attn_post_proj", tp, o.1, m.hidden, q * a.v_head_dim, &o.1.transfer_error())?);
    // Prefill: the kernel over b prompts of s tokens, and the KV up-projection of their b·s tokens.
    let kv_up_at = loglog(&kv_up.0.points);
    let pts =
        k.context.iter().map(|&(b, s, ms)| vec![b as f64, s as f64, ms + kv_up_at.eval((b * s) as f64)]).collect();
    let mut prefill = fit_table("attn_prefill", Some(tp), vec![Axis::Batch, Axis::Sequence], pts);
    prefill.source = Some(OpSource {
        file: k.files[0].clone(),
        selection: format!("{}; plus the KV up-projection GEMM over the prompts' tokens", k.selection),
        shape: shapes(&[("kv up", &kv_up)]),
        transfer_error: transfer(&[&kv_up]),
    });
    out.push(prefill);
    // Decode: the kernel over b sequences' latent context, and the two absorbed products of b tokens.
    let (bmm_pre, bmm_post) = (loglog(&k.bmm_pre), loglog(&k.bmm_post));
    let pts = k
        .generation
        .iter()
        .map(|&(b, c, ms)| vec![b as f64, c as f64, ms + bmm_pre.eval(b as f64) + bmm_post.eval(b as f64)])
        .collect();
    let mut decode = fit_table("attn_decode", Some(tp), vec![Axis::Batch, Axis::Context], pts);
    decode.source = Some(OpSource {
        file: k.files[1].clone(),
        selection: format!("{}; plus the absorbed products before and after ({})", k.selection, k.files[2]),
        shape: format!("{q} heads per GPU measured"),
        transfer_error: None,
    });
    out.push(decode);
    Ok(out)
}

/// Latent attention from vLLM's attention-block tables (AIConfigurator's `MLAModule`, which
/// its DeepSeek model reads for vLLM in place of the granular ops): `attn_prefill` and
/// `attn_decode` are the blocks' times, projections included, at `q` heads per GPU with the
/// projections in the GEMMs' dtype; `attn_pre_proj` and `attn_post_proj` are timed inside them,
/// so their tables are zero (and say so) rather than priced twice.
fn mla_module_ops(
    db: &Db,
    files: &[String; 2],
    tp: u32,
    q: u64,
    gw: &GemmWeights,
    kv_dtype: &str,
) -> Result<Vec<OpTable>, crate::Error> {
    let gemm = &gw.quantized.dtype;
    let k = mla::read_modules(db, files, q, kv_dtype, gemm).map_err(|e| format!("latent attention (tp {tp}): {e}"))?;
    let inside = |name: &str| OpTable {
        name: name.to_string(),
        tp: Some(tp),
        axes: vec![Axis::Tokens],
        interp: Interp::Linear,
        points: vec![vec![1.0, 0.0], vec![1_048_576.0, 0.0]],
        dims: None,
        heldout: Vec::new(),
        source: Some(OpSource {
            file: files[0].clone(),
            selection: "timed inside vLLM's attention block (attn_prefill, attn_decode): zero here".into(),
            shape: String::new(),
            transfer_error: None,
        }),
    };
    let block = |name: &str, axes: Vec<Axis>, pts: &[(u64, u64, f64)], file: &str| {
        let pts = pts.iter().map(|&(b, s, ms)| vec![b as f64, s as f64, ms]).collect();
        let mut t = fit_table(name, Some(tp), axes, pts);
        t.source = Some(OpSource {
            file: file.to_string(),
            selection: format!("vLLM's whole attention block ({}), its projections included", k.selection),
            shape: format!("{q} heads per GPU measured"),
            transfer_error: None,
        });
        t
    };
    Ok(vec![
        inside("attn_pre_proj"),
        inside("attn_post_proj"),
        block("attn_prefill", vec![Axis::Batch, Axis::Sequence], &k.context, &k.files[0]),
        block("attn_decode", vec![Axis::Batch, Axis::Context], &k.generation, &k.files[1]),
    ])
}

/// Measured (x, ms) points read between them in log-log, held below the first and grown in
/// proportion beyond the last: the profiles' own rule ([`Curve1`]), for an op folded into
/// another's table at that table's points.
fn loglog(points: &[(u64, f64)]) -> Curve1 {
    Curve1::new(points.iter().map(|&(x, ms)| (x as f64, ms)).collect(), Interp::LogLog)
}

fn gemm_op(
    name: &str,
    tp: u32,
    t: &GemmTable,
    n: u64,
    k: u64,
    transfer: &Option<servesim_sim::cost::profile::ErrorStats>,
) -> Result<OpTable, crate::Error> {
    let read = t.at(n, k).map_err(|e| format!("{name} (tp {tp}): {e}"))?;
    let pts = read.points.iter().map(|&(m, ms)| vec![m as f64, ms]).collect();
    let mut table = fit_table(name, Some(tp), vec![Axis::Tokens], pts);
    table.source = Some(OpSource {
        file: t.file.clone(),
        selection: format!("{} GEMMs of kernel {}", t.dtype, t.kernel),
        shape: read.shape,
        transfer_error: if read.measured { None } else { transfer.clone() },
    });
    Ok(table)
}

/// The routed experts of one MoE layer over the iteration's tokens, experts split over the TP
/// GPUs (no expert parallelism). Where the engine's table has no expert-TP rows at this degree
/// (TensorRT-LLM's tables measure expert parallelism only), the rows with the experts spread
/// over as many GPUs by expert parallelism stand in, and the selection says so: under
/// balanced routing each GPU reads and multiplies the same bytes and FLOPs either way.
fn moe_op(db: &Db, sel: &Selection, r: &Request, tp: u32, gemms: &GemmTable) -> Result<OpTable, crate::Error> {
    let m = &r.model;
    let file = format!("{}/moe/{}/{}/moe_perf.parquet", sel.system, sel.framework, sel.version);
    if !db.exists(&file) {
        return Err(format!("moe_experts (tp {tp}): {file} is not in the database").into());
    }
    let f = db.frame(
        &file,
        &[
            "kernel_source",
            "moe_dtype",
            "num_tokens",
            "hidden_size",
            "inter_size",
            "topk",
            "num_experts",
            "moe_tp_size",
            "moe_ep_size",
            "distribution",
            "latency",
        ],
    )?;
    let (dtype, dist, kernel) = (f.strs("moe_dtype")?, f.strs("distribution")?, f.strs("kernel_source")?);
    let ints = |c: &str| f.ints(c);
    let (tokens, hidden, inter, topk, experts, mtp, mep) = (
        ints("num_tokens")?,
        ints("hidden_size")?,
        ints("inter_size")?,
        ints("topk")?,
        ints("num_experts")?,
        ints("moe_tp_size")?,
        ints("moe_ep_size")?,
    );
    let lat = f.floats("latency")?;
    let moe_dtype = r.weights.moe_dtype(&sel.framework, r.gpu.has_fp4());
    let shape = |i: usize| {
        dtype[i] == moe_dtype
            && dist[i] == r.moe_distribution
            && hidden[i] as u64 == m.hidden
            && inter[i] as u64 == m.intermediate
            && topk[i] as u64 == m.top_k
            && experts[i] as u64 == m.experts
    };
    let t = tp as i64;
    let has = |want: (i64, i64)| (0..f.rows).any(|i| shape(i) && (mtp[i], mep[i]) == want);
    let (want_tp, want_ep) = experts_split(r.expert_parallel, t, has);
    let ok = |i: usize| shape(i) && mtp[i] == want_tp && mep[i] == want_ep;
    let mut kernels: Vec<&str> = (0..f.rows).filter(|&i| ok(i)).map(|i| kernel[i]).collect();
    kernels.sort();
    kernels.dedup();
    // TensorRT-LLM's min-latency MoE rows are a mode of their own, which AIConfigurator reads
    // apart from its default view (`sdk/operations/moe.py`, `_moe_low_latency_data`).
    if kernels.len() > 1 {
        kernels.retain(|k| !k.ends_with("_min_latency"));
    }
    let Some(k) = kernels.first().copied() else {
        let mut have: Vec<&str> = (0..f.rows)
            .filter(|&i| {
                hidden[i] as u64 == m.hidden
                    && inter[i] as u64 == m.intermediate
                    && topk[i] as u64 == m.top_k
                    && experts[i] as u64 == m.experts
            })
            .map(|i| dtype[i])
            .collect();
        have.sort();
        have.dedup();
        let have = if have.is_empty() { "none".to_string() } else { have.join(", ") };
        return Err(format!(
            "moe_experts (tp {tp}): {file} has no {} rows for hidden {}, intermediate {}, top-{} of {} experts, \
             expert TP {tp}, {} routing (its dtypes for this shape: {have})",
            moe_dtype, m.hidden, m.intermediate, m.top_k, m.experts, r.moe_distribution
        )
        .into());
    };
    let mut pts: Vec<Vec<f64>> =
        (0..f.rows).filter(|&i| ok(i) && kernel[i] == k).map(|i| vec![tokens[i] as f64, lat[i]]).collect();
    // Shared experts: a gated MLP every token goes through, split over the TP GPUs, added at
    // the table's token counts.
    let mut shared_note = String::new();
    let s = m.arch.shared_experts;
    if s > 0 {
        let t = tp as u64;
        let up =
            gemms.at(2 * s * m.intermediate / t, m.hidden).map_err(|e| format!("shared experts (tp {tp}): {e}"))?;
        let down = gemms.at(m.hidden, s * m.intermediate / t).map_err(|e| format!("shared experts (tp {tp}): {e}"))?;
        let (up_at, down_at) = (loglog(&up.points), loglog(&down.points));
        for p in &mut pts {
            p[1] += up_at.eval(p[0]) + down_at.eval(p[0]);
        }
        shared_note = format!("; plus {s} shared expert(s) as {} GEMMs ({}; {})", gemms.dtype, up.shape, down.shape);
    }
    let mut table = fit_table("moe_experts", Some(tp), vec![Axis::Tokens], pts);
    let split = split_words(r.expert_parallel, want_ep, tp);
    table.source = Some(OpSource {
        file,
        selection: format!("{} MoE of kernel {k}, {} routing, {split}{shared_note}", moe_dtype, r.moe_distribution),
        shape: "the model's MoE shape measured".into(),
        transfer_error: None,
    });
    Ok(table)
}

/// The experts' rows to read, (moe_tp, moe_ep), for `t` GPUs: the expert-parallel rows with
/// expert parallelism where the table has them, else the expert-TP rows, else (TensorRT-LLM,
/// whose tables measure expert parallelism only) the expert-parallel ones. `has` says whether
/// the table has rows of a split.
fn experts_split(expert_parallel: bool, t: i64, has: impl Fn((i64, i64)) -> bool) -> (i64, i64) {
    if expert_parallel && has((1, t)) {
        (1, t)
    } else if has((t, 1)) || t == 1 {
        (t, 1)
    } else {
        (1, t)
    }
}

/// How the experts were split, in a table's selection.
fn split_words(expert_parallel: bool, want_ep: i64, tp: u32) -> String {
    let same = "the same bytes and FLOPs per GPU under balanced routing";
    match (want_ep == 1, expert_parallel) {
        (true, true) if tp > 1 => {
            format!("expert TP {tp} (the table has no expert-parallel rows at {tp} GPUs; {same})")
        }
        (true, _) => format!("expert TP {tp}"),
        (false, true) => format!("expert parallel {tp}"),
        (false, false) => format!("expert parallel {tp} (the table has no expert-TP rows at {tp} GPUs; {same})"),
    }
}

/// The `device` column of a table (the GPU's name as the collector saw it).
fn device_name(db: &Db, file: &str) -> Option<String> {
    let f = db.frame(file, &["device"]).ok()?;
    f.strs("device").ok()?.first().map(|s| s.to_string())
}
