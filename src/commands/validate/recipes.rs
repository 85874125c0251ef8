//! The launch flags of published benchmark recipes, for `validate --silicon` (`--engine-limits
//! auto`, the default): the scoreboard's campaign rows record the container image their server
//! ran and the day it was measured, not its flags. Where a row's model, system, engine, weights and
//! image match a recipe of SemiAnalysis's InferenceX (Apache-2.0) in the days that image was
//! its config's, the recipe's flags are the row's launch settings — an assumption (that the
//! row is InferenceX's run), labelled as such in the row's `limits` column and in
//! docs/fidelity.md.
//!
//! ```text
//!   InferenceX, SemiAnalysisAI/InferenceX 12ba0ae07 (2026-03-25, "[NV] Update DSR1 h200 & b200
//!   sglang image to v0.5.9-cu130"): .github/configs/nvidia-master.yaml sets the image of
//!   dsr1-fp8-b200-sglang, dsr1-fp4-b200-sglang and dsr1-fp8-h200-sglang to
//!   lmsysorg/sglang:v0.5.9-cu130 (replaced on 2026-05-12 to 2026-05-17: a15f7c25f, 6d089f7ab,
//!   c824b1a52); the launch flags are benchmarks/single_node/dsr1_{fp8_b200,fp4_b200,fp8_h200}.sh
//!   at that commit, unchanged until then. The search space is that commit's until 626932a11
//!   (2026-03-27, "change to 8k1k, remove 1k8k"), so the recipes match rows measured on
//!   2026-03-25 to 2026-03-27.
//!   InferenceX cec542a9a (2026-03-27, "update gptoss H100 & H200 vLLM image to v0.18.0") and
//!   d2c2acb19 (2026-02-25, "update NVIDIA GPT-OSS vLLM image from v0.13.0 to v0.15.1"): the
//!   gpt-oss-120b vLLM configs on H100, H200 and B200 ([`GPT_OSS_VLLM`]).
//!   InferenceX ec7bafaae (2026-01-29, "[NV] dsr1 fp8 b200 agg update") and 6eecc0e66
//!   (2026-02-03, "[NV] dsr1 fp4 b200 trt agg update"): the DeepSeek-R1 B200 TensorRT-LLM
//!   configs without MTP on 1.2.0rc6.post2 ([`DSR1_TRTLLM`]).
//!   Their client, every one: benchmark_serving with --num-prompts CONC × 10, --max-concurrency
//!   CONC and --random-range-ratio 0.8 (.github/workflows/benchmark-tmpl.yml).
//! ```
//! What a recipe does not set stays the engine's default ([`super::silicon::engine_settings`]).
//! An image that only speculative-decoding configs ran on a row's day ([`SPECULATIVE`]) gives
//! the row a note instead: it was most likely measured with MTP drafts, which are not simulated.

/// The rows of one InferenceX config: its model, system, engine and weights, and the image it
/// ran on the days given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Config {
    /// The config key and the script (or the commit that set the image), as InferenceX names
    /// them.
    pub source: &'static str,
    /// The row's servesim model, system, engine and weights.
    pub models: &'static [&'static str],
    pub system: &'static str,
    pub framework: &'static str,
    pub weights: &'static str,
    /// The container image, as the row's `silicon_data_source` names it.
    pub image: &'static str,
    /// The days (`YYYY-MM-DD`, inclusive) the image was the config's (and, for
    /// [`SPECULATIVE`], no other config's).
    pub measured: (&'static str, &'static str),
}

impl Config {
    /// Whether a row's run is of this config's model, system, engine, weights, image and days.
    fn ran(&self, run: &RowRun) -> bool {
        let (Some(image), Some(day)) = (image_of(run.source), measured_day(run.source)) else {
            return false;
        };
        self.models.contains(&run.model)
            && (self.system, self.framework, self.weights, self.image)
                == (run.system, run.framework, run.weights, image.as_str())
            && (self.measured.0..=self.measured.1).contains(&day)
    }
}

/// One recipe: the rows it matches and the flags it launches with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Recipe {
    pub at: Config,
    /// The runs the config's search space schedules with these flags.
    pub runs: &'static [Run],
    pub flags: Flags,
}

/// A search-space entry: TP, ISL, OSL and the concurrencies from `conc-start` to `conc-end`;
/// where the entry says, whether the experts are expert-parallel (`ep` above 1) and attention
/// data-parallel (`dp-attn`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Run {
    pub tp: u32,
    pub isl: u64,
    pub osl: u64,
    pub concurrency: (u32, u32),
    /// (EP, DP attention); None: any.
    pub layout: Option<(bool, bool)>,
}

const fn run(tp: u32, isl: u64, osl: u64, lo: u32, hi: u32) -> Run {
    Run { tp, isl, osl, concurrency: (lo, hi), layout: None }
}

/// An entry that names its layout: `ep` (EP above 1) and `dp` (`dp-attn: true`).
const fn laid(tp: u32, ep: bool, dp: bool, isl: u64, osl: u64, lo: u32, hi: u32) -> Run {
    Run { tp, isl, osl, concurrency: (lo, hi), layout: Some((ep, dp)) }
}

/// A recipe's launch flags and its client, as servesim keys.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Flags {
    /// The engine's own flags.
    pub launch: Launch,
    /// `--kv-cache-dtype` as servesim's `model.kv_dtype` (None: the engine's `auto`, the
    /// checkpoint's dtype: BF16 for these).
    pub kv_dtype: Option<&'static str>,
    /// Requests per client (`--num-prompts` ÷ `--max-concurrency`).
    pub rounds: u32,
    /// The client's `--random-range-ratio`: each prompt and output length uniform in
    /// [⌊ratio × L⌋, L] (`sample_random_requests`, utils/bench_serving/benchmark_serving.py).
    pub range_ratio: f64,
}

/// The flags of a recipe's engine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Launch {
    Sglang(Sglang),
    Vllm(Vllm),
    Trtllm(Trtllm),
}

/// An SGLang launch. The scripts' `--stream-interval` (30 on B200) is not modelled: it does not
/// delay the first token, which goes out when `len(output_ids) % stream_interval == 1`
/// (`stream_output_generation`, sglang/srt/managers/scheduler_output_processor_mixin.py of the
/// 0.5.9 sdist, the rows' release).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Sglang {
    /// `--max-running-requests`.
    pub max_running: u64,
    /// `--chunked-prefill-size`.
    pub chunk: u64,
    /// `--max-prefill-tokens` (None: its default, 16384).
    pub max_prefill: Option<u64>,
    /// `--mem-fraction-static`.
    pub mem_fraction_static: f64,
    /// `--scheduler-recv-interval` below 16 clients and from 16 (the scripts' `CONC -ge 16`
    /// test); 1: not given, SGLang's default.
    pub recv_interval: (u32, u32),
}

impl Sglang {
    /// The receive interval at `concurrency` clients.
    pub(crate) fn recv_interval_at(&self, concurrency: u32) -> u32 {
        if concurrency >= 16 {
            self.recv_interval.1
        } else {
            self.recv_interval.0
        }
    }
}

/// A TensorRT-LLM launch (`trtllm-serve` with an options file), the script's settings following
/// the row's lengths, TP and concurrency ([`Trtllm::at`]). Chunked prefill stays off and
/// `max_batch_size` at TensorRT-LLM's default unless the script sets it; the MoE backend,
/// CUDA graphs and `stream_interval` (10, 20) are not modelled — the last does not delay the
/// first token (`PyExecutor._handle_responses` answers at `py_decoding_iter == 1`,
/// tensorrt_llm/_torch/pyexecutor/py_executor.py, NVIDIA/TensorRT-LLM 0004396).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Trtllm {
    /// benchmarks/dsr1_fp8_b200_trt.sh at ec7bafaae.
    Dsr1Fp8B200,
    /// benchmarks/dsr1_fp4_b200_trt.sh at 6eecc0e66.
    Dsr1Fp4B200,
    /// benchmarks/gptoss_fp4_b200_trt.sh at d7dbd045b.
    GptOssB200,
}

/// What a TensorRT-LLM script launches a run with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct TrtllmAt {
    /// `--max_batch_size` (None: TensorRT-LLM's default).
    pub max_batch_size: Option<u64>,
    /// `--max_num_tokens`.
    pub max_num_tokens: u64,
    /// `kv_cache_config.free_gpu_memory_fraction`.
    pub free_gpu_memory_fraction: f64,
    /// `batch_wait_timeout_iters` and `batch_wait_max_tokens_ratio`, where set.
    pub batch_wait: Option<(u32, f64)>,
    /// With DP attention, `attention_dp_config` (`enable_balance: true`): `timeout_iters` and
    /// `batching_wait_iters` (TensorRT-LLM's 50 and 10 where the script leaves them).
    pub adp_balance: (u32, u32),
}

impl Trtllm {
    /// The settings of a run of `isl`/`osl` at `concurrency` clients on `tp` GPUs: the scripts'
    /// `if` branches. The DeepSeek scripts' `--max_num_tokens` is `((CONC + ISL + 64 + 63) /
    /// 64) × 64`, at least 8192; gpt-oss's 20000 with `--max_batch_size 512`.
    pub(crate) fn at(&self, isl: u64, osl: u64, concurrency: u32, tp: u32) -> TrtllmAt {
        let c = concurrency as u64;
        let dsr1 = |free_gpu_memory_fraction, batch_wait| TrtllmAt {
            max_batch_size: None,
            max_num_tokens: ((c + isl + 64).div_ceil(64) * 64).max(8192),
            free_gpu_memory_fraction,
            batch_wait,
            adp_balance: (60, 0),
        };
        match self {
            Trtllm::Dsr1Fp8B200 => match (isl, osl) {
                (1024, 1024) if c >= 64 => dsr1(0.8, Some((40, 0.8))),
                (1024, 8192) if c >= 256 => dsr1(0.7, None),
                (8192, 1024) if tp == 4 => dsr1(0.75, None),
                _ => dsr1(0.8, None),
            },
            Trtllm::Dsr1Fp4B200 => dsr1(0.8, None),
            Trtllm::GptOssB200 => TrtllmAt {
                max_batch_size: Some(512),
                max_num_tokens: 20000,
                free_gpu_memory_fraction: 0.85,
                batch_wait: None,
                adp_balance: (50, 10),
            },
        }
    }
}

/// A vLLM launch (prefix caching off, `no-enable-prefix-caching` in these recipes, as
/// `validate --silicon` runs every row without a prompt pool).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Vllm {
    /// `--max-num-seqs`; None: the row's concurrency (`--max-num-seqs $CONC`).
    pub max_num_seqs: Option<u64>,
    /// `max-num-batched-tokens`.
    pub max_num_batched_tokens: u64,
    /// `--gpu-memory-utilization`, under vLLM's memory rule.
    pub gpu_memory_utilization: f64,
}

impl Vllm {
    /// `--max-num-seqs` at `concurrency` clients.
    pub(crate) fn max_num_seqs_at(&self, concurrency: u32) -> u64 {
        self.max_num_seqs.unwrap_or(concurrency as u64)
    }
}

const DSR1: &[&str] = &["deepseek-r1", "deepseek-v3"];
const V059: &str = "lmsysorg/sglang:v0.5.9-cu130";
/// From the image's commit to the one that changed the search space (module doc).
const V059_DAYS: (&str, &str) = ("2026-03-25", "2026-03-27");
/// `RANDOM_RANGE_RATIO: 0.8` (.github/workflows/benchmark-tmpl.yml at 12ba0ae07, cec542a9a,
/// d2c2acb19, ec7bafaae and 6eecc0e66).
const RANGE_RATIO: f64 = 0.8;

/// A DeepSeek-R1 SGLang config on `lmsysorg/sglang:v0.5.9-cu130` (12ba0ae07 to a15f7c25f).
const fn v059(source: &'static str, system: &'static str, weights: &'static str) -> Config {
    Config { source, models: DSR1, system, framework: "sglang", weights, image: V059, measured: V059_DAYS }
}

/// An SGLang script's flags (`--max-running-requests`, `--chunked-prefill-size`,
/// `--max-prefill-tokens`, `--mem-fraction-static`, `--kv-cache-dtype`,
/// `--scheduler-recv-interval` below and from 16 clients) with InferenceX's client.
const fn sglang(
    max_running: u64,
    chunk: u64,
    max_prefill: Option<u64>,
    mem_fraction_static: f64,
    kv_dtype: Option<&'static str>,
    recv_interval: (u32, u32),
) -> Flags {
    let launch = Sglang { max_running, chunk, max_prefill, mem_fraction_static, recv_interval };
    Flags { launch: Launch::Sglang(launch), kv_dtype, rounds: 10, range_ratio: RANGE_RATIO }
}

/// The DeepSeek-R1 SGLang recipes (module doc), with the search space of nvidia-master.yaml at
/// 12ba0ae07.
const DSR1_SGLANG: &[Recipe] = &[
    // dsr1_fp8_b200.sh, TP 8: 128 running, chunks of 32768, 0.82, FP8 cache.
    Recipe {
        at: v059(
            "InferenceX dsr1-fp8-b200-sglang, benchmarks/single_node/dsr1_fp8_b200.sh at 12ba0ae07 (TP 8)",
            "b200_sxm",
            "fp8-block",
        ),
        runs: &[run(8, 1024, 1024, 4, 64), run(8, 1024, 8192, 4, 64), run(8, 8192, 1024, 4, 4)],
        flags: sglang(128, 32768, Some(32768), 0.82, Some("fp8"), (10, 30)),
    },
    // dsr1_fp8_b200.sh, TP 4 (8192/1024 only): 32 running, chunks of 8192, 0.95, FP8 cache.
    Recipe {
        at: v059(
            "InferenceX dsr1-fp8-b200-sglang, benchmarks/single_node/dsr1_fp8_b200.sh at 12ba0ae07 (TP 4)",
            "b200_sxm",
            "fp8-block",
        ),
        runs: &[run(4, 8192, 1024, 4, 32)],
        flags: sglang(32, 8192, Some(8192), 0.95, Some("fp8"), (10, 10)),
    },
    // dsr1_fp4_b200.sh: 256 running, chunks of 16384, 0.85, FP8 cache; EP over the TP GPUs.
    Recipe {
        at: v059(
            "InferenceX dsr1-fp4-b200-sglang, benchmarks/single_node/dsr1_fp4_b200.sh at 12ba0ae07",
            "b200_sxm",
            "fp4",
        ),
        runs: &[
            run(4, 1024, 1024, 4, 128),
            run(8, 1024, 1024, 4, 128),
            run(4, 1024, 8192, 4, 128),
            run(8, 1024, 8192, 4, 128),
            run(4, 8192, 1024, 4, 128),
            run(8, 8192, 1024, 4, 16),
        ],
        flags: sglang(256, 16384, None, 0.85, Some("fp8"), (10, 30)),
    },
    // dsr1_fp8_h200.sh, 1024/1024: 512 running, chunks of 32768, 0.82, cache auto.
    Recipe {
        at: v059(
            "InferenceX dsr1-fp8-h200-sglang, benchmarks/single_node/dsr1_fp8_h200.sh at 12ba0ae07 (1024/1024)",
            "h200_sxm",
            "fp8-block",
        ),
        runs: &[run(8, 1024, 1024, 4, 64)],
        flags: sglang(512, 32768, Some(32768), 0.82, None, (1, 1)),
    },
    // dsr1_fp8_h200.sh, the other lengths: 256 running.
    Recipe {
        at: v059(
            "InferenceX dsr1-fp8-h200-sglang, benchmarks/single_node/dsr1_fp8_h200.sh at 12ba0ae07 (not 1024/1024)",
            "h200_sxm",
            "fp8-block",
        ),
        runs: &[run(8, 1024, 8192, 4, 64), run(8, 8192, 1024, 4, 64)],
        flags: sglang(256, 32768, Some(32768), 0.82, None, (1, 1)),
    },
];

const GPT_OSS: &[&str] = &["gpt-oss-120b"];

/// A gpt-oss-120b config (the checkpoint's MXFP4 experts) of `framework` on `image` from
/// `days.0` to `days.1`.
const fn gpt_oss(
    source: &'static str,
    system: &'static str,
    framework: &'static str,
    image: &'static str,
    days: (&'static str, &'static str),
) -> Config {
    Config { source, models: GPT_OSS, system, framework, weights: "mxfp4", image, measured: days }
}

/// A vLLM script's flags (`--max-num-seqs`, None: `$CONC`; `max-num-batched-tokens`;
/// `--gpu-memory-utilization`; `kv-cache-dtype`) with InferenceX's client.
const fn vllm(
    max_num_seqs: Option<u64>,
    max_num_batched_tokens: u64,
    gpu_memory_utilization: f64,
    kv_dtype: Option<&'static str>,
) -> Flags {
    let launch = Vllm { max_num_seqs, max_num_batched_tokens, gpu_memory_utilization };
    Flags { launch: Launch::Vllm(launch), kv_dtype, rounds: 10, range_ratio: RANGE_RATIO }
}

/// `vllm/vllm-openai:v0.18.0`, set for gptoss-fp4-h100-vllm and gptoss-fp4-h200-vllm by
/// cec542a9a (2026-03-27 08:01 UTC); 626932a11 (2026-03-28 06:38 UTC) then dropped their
/// 1024/8192 runs.
const V018_DAYS: (&str, &str) = ("2026-03-27", "2026-03-27");

/// The gpt-oss vLLM recipes: InferenceX (SemiAnalysisAI/InferenceX) gptoss-fp4-{h100,h200}-vllm
/// at cec542a9a and gptoss-fp4-b200-vllm at d2c2acb19 (2026-02-25 19:02 UTC, "update NVIDIA
/// GPT-OSS vLLM image from v0.13.0 to v0.15.1"; the image and search space held until
/// da5515841 on 2026-03-10). Their scripts' `config.yaml` sets `no-enable-prefix-caching`,
/// `max-num-batched-tokens: 8192`, `max-cudagraph-capture-size: 2048` and a `max-model-len`
/// above ISL + OSL; the command line `--gpu-memory-utilization 0.9` and `--max-num-seqs` (`$CONC`
/// on Hopper, 512 on B200, whose `config.yaml` also sets `kv-cache-dtype: fp8`). Hopper runs
/// the experts through Marlin (`VLLM_MXFP4_USE_MARLIN=1`), B200 through FlashInfer's
/// MXFP4 × MXFP8 MoE: servesim prices both from the database's vLLM MXFP4 MoE table.
const GPT_OSS_VLLM: &[Recipe] = &[
    // benchmarks/single_node/gptoss_fp4_h100.sh at cec542a9a.
    Recipe {
        at: gpt_oss(
            "InferenceX gptoss-fp4-h100-vllm, benchmarks/single_node/gptoss_fp4_h100.sh at cec542a9a",
            "h100_sxm",
            "vllm",
            "vllm/vllm-openai:v0.18.0",
            V018_DAYS,
        ),
        runs: &[
            run(2, 1024, 1024, 4, 64),
            run(4, 1024, 1024, 4, 64),
            run(8, 1024, 1024, 4, 64),
            run(2, 1024, 8192, 4, 64),
            run(4, 1024, 8192, 4, 64),
            run(8, 1024, 8192, 4, 64),
            run(2, 8192, 1024, 4, 64),
            run(4, 8192, 1024, 4, 64),
            run(8, 8192, 1024, 4, 16),
        ],
        flags: vllm(None, 8192, 0.9, None),
    },
    // benchmarks/single_node/gptoss_fp4_h200.sh at cec542a9a.
    Recipe {
        at: gpt_oss(
            "InferenceX gptoss-fp4-h200-vllm, benchmarks/single_node/gptoss_fp4_h200.sh at cec542a9a",
            "h200_sxm",
            "vllm",
            "vllm/vllm-openai:v0.18.0",
            V018_DAYS,
        ),
        runs: &[
            run(1, 1024, 1024, 4, 4),
            run(2, 1024, 1024, 4, 64),
            run(4, 1024, 1024, 4, 64),
            run(8, 1024, 1024, 4, 64),
            run(1, 1024, 8192, 4, 4),
            run(2, 1024, 8192, 4, 64),
            run(4, 1024, 8192, 4, 64),
            run(8, 1024, 8192, 4, 64),
            run(1, 8192, 1024, 4, 64),
            run(2, 8192, 1024, 4, 64),
            run(4, 8192, 1024, 4, 64),
            run(8, 8192, 1024, 4, 32),
        ],
        flags: vllm(None, 8192, 0.9, None),
    },
    // benchmarks/single_node/gptoss_fp4_b200.sh at d2c2acb19.
    Recipe {
        at: gpt_oss(
            "InferenceX gptoss-fp4-b200-vllm, benchmarks/single_node/gptoss_fp4_b200.sh at d2c2acb19",
            "b200_sxm",
            "vllm",
            "vllm/vllm-openai:v0.15.1",
            ("2026-02-25", "2026-03-09"),
        ),
        runs: &[
            run(1, 1024, 1024, 4, 128),
            run(2, 1024, 1024, 4, 128),
            run(4, 1024, 1024, 4, 64),
            run(8, 1024, 1024, 4, 8),
            run(1, 1024, 8192, 4, 128),
            run(2, 1024, 8192, 4, 128),
            run(4, 1024, 8192, 4, 64),
            run(8, 1024, 8192, 4, 8),
            run(1, 8192, 1024, 4, 128),
            run(2, 8192, 1024, 4, 128),
            run(4, 8192, 1024, 4, 64),
            run(8, 8192, 1024, 4, 4),
        ],
        flags: vllm(Some(512), 8192, 0.9, Some("fp8")),
    },
];

/// A DeepSeek-R1 B200 TensorRT-LLM config on 1.2.0rc6.post2 from `from` (the commit that set
/// it) until 8d81e0bf4 moved the scripts (2026-02-19).
const fn rc6_post2(source: &'static str, weights: &'static str, from: &'static str) -> Config {
    Config {
        source,
        models: DSR1,
        system: "b200_sxm",
        framework: "trtllm",
        weights,
        image: "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post2",
        measured: (from, "2026-02-18"),
    }
}

/// A TensorRT-LLM script's flags (its options file: `kv_cache_config.dtype: fp8` in both) with
/// InferenceX's client.
const fn trtllm(script: Trtllm) -> Flags {
    Flags { launch: Launch::Trtllm(script), kv_dtype: Some("fp8"), rounds: 10, range_ratio: RANGE_RATIO }
}

/// InferenceX's DeepSeek-R1 B200 TensorRT-LLM configs without MTP on 1.2.0rc6.post2:
/// dsr1-fp8-b200-trt at ec7bafaae (2026-01-29, "[NV] dsr1 fp8 b200 agg update", the only config
/// on that image until 6eecc0e66) and dsr1-fp4-b200-trt at 6eecc0e66 (2026-02-03, "[NV] dsr1 fp4
/// b200 trt agg update"), with their search spaces (TP, EP, DP attention per entry).
const DSR1_TRTLLM: &[Recipe] = &[
    Recipe {
        at: rc6_post2(
            "InferenceX dsr1-fp8-b200-trt, benchmarks/dsr1_fp8_b200_trt.sh at ec7bafaae",
            "fp8-block",
            "2026-01-29",
        ),
        runs: &[
            laid(8, false, false, 1024, 1024, 64, 128),
            laid(4, false, false, 1024, 1024, 8, 16),
            laid(8, false, false, 1024, 1024, 4, 8),
            laid(8, true, true, 1024, 8192, 256, 256),
            laid(8, false, false, 1024, 8192, 4, 128),
            laid(8, false, false, 8192, 1024, 64, 256),
            laid(4, false, false, 8192, 1024, 8, 32),
            laid(8, false, false, 8192, 1024, 4, 8),
        ],
        flags: trtllm(Trtllm::Dsr1Fp8B200),
    },
    Recipe {
        at: rc6_post2(
            "InferenceX dsr1-fp4-b200-trt, benchmarks/dsr1_fp4_b200_trt.sh at 6eecc0e66",
            "fp4",
            "2026-02-03",
        ),
        runs: &[
            laid(4, false, false, 1024, 1024, 4, 16),
            laid(4, true, true, 1024, 1024, 256, 256),
            laid(8, false, false, 1024, 1024, 4, 4),
            laid(8, true, false, 1024, 1024, 64, 64),
            laid(8, true, true, 1024, 1024, 128, 256),
            laid(4, false, false, 1024, 8192, 4, 16),
            laid(4, true, true, 1024, 8192, 256, 256),
            laid(8, false, false, 1024, 8192, 4, 4),
            laid(8, true, false, 1024, 8192, 64, 64),
            laid(8, true, true, 1024, 8192, 128, 256),
            laid(4, false, false, 8192, 1024, 4, 32),
            laid(4, true, false, 8192, 1024, 32, 32),
            laid(4, true, true, 8192, 1024, 256, 256),
            laid(8, false, false, 8192, 1024, 4, 4),
            laid(8, true, true, 8192, 1024, 128, 256),
        ],
        flags: trtllm(Trtllm::Dsr1Fp4B200),
    },
];

/// InferenceX's gpt-oss-120b B200 TensorRT-LLM config: gptoss-fp4-b200-trt at d7dbd045b
/// (2026-02-05 23:18 UTC, "GPTOSS B200 AGG configuration updates", which set
/// `release:1.2.0rc2.post2` and this search space; replaced on 2026-05-18, 0977b65f1). Its
/// script's options file: `max_batch_size 512`, `max_num_tokens 20000`, an FP8 cache at 0.85 of
/// the free memory, and with DP attention `attention_dp_config: {enable_balance: true}`.
const GPT_OSS_TRTLLM: &[Recipe] = &[Recipe {
    at: gpt_oss(
        "InferenceX gptoss-fp4-b200-trt, benchmarks/gptoss_fp4_b200_trt.sh at d7dbd045b",
        "b200_sxm",
        "trtllm",
        "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc2.post2",
        ("2026-02-05", "2026-05-17"),
    ),
    runs: &[
        laid(1, false, false, 1024, 1024, 256, 256),
        laid(2, true, true, 1024, 1024, 256, 256),
        laid(2, false, false, 1024, 1024, 4, 256),
        laid(4, true, true, 1024, 1024, 64, 64),
        laid(4, false, false, 1024, 1024, 4, 4),
        laid(8, false, false, 1024, 1024, 4, 4),
        laid(1, false, false, 1024, 8192, 256, 256),
        laid(2, false, false, 1024, 8192, 128, 256),
        laid(4, false, false, 1024, 8192, 4, 256),
        laid(8, false, false, 1024, 8192, 4, 4),
        laid(1, false, false, 8192, 1024, 4, 256),
        laid(2, false, false, 8192, 1024, 4, 256),
        laid(4, false, false, 8192, 1024, 4, 32),
        laid(8, false, false, 8192, 1024, 4, 4),
    ],
    flags: trtllm(Trtllm::GptOssB200),
}];

/// An image that, on the days given, only InferenceX's configs with speculative decoding ran:
/// a row of it was most likely measured with MTP draft layers, which the scoreboard does not
/// simulate (the drafts' acceptance on the benchmark's random prompts is not recorded), so the
/// row says so and its TPOT is predicted too slow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Speculative {
    pub at: Config,
    /// `num_nextn_predict_layers`: without DP attention, and with it.
    pub mtp: (u32, u32),
}

/// TensorRT-LLM 1.2.0rc6.post3, set for the DeepSeek-R1 B200 MTP configs on 2026-02-05
/// (5d517074c, "[NV] dsr1 fp8 b200 trt agg mtp update") and 2026-02-06 (0aae52d4c, fp4) while
/// the configs without MTP ran 1.2.0rc6.post2, until 2026-05-18 (e43ae2f1b, 0d8d1f93d);
/// benchmarks/dsr1_{fp8,fp4}_b200_trt_mtp.sh set `MTP=3`, 1 with DP attention.
pub(crate) const SPECULATIVE: &[Speculative] = &[
    post3("InferenceX dsr1-fp8-b200-trt-mtp (5d517074c)", "fp8-block", "2026-02-05"),
    post3("InferenceX dsr1-fp4-b200-trt-mtp (0aae52d4c)", "fp4", "2026-02-06"),
];

/// A DeepSeek-R1 B200 MTP config on TensorRT-LLM 1.2.0rc6.post3 from `from` until its
/// replacement (above).
const fn post3(source: &'static str, weights: &'static str, from: &'static str) -> Speculative {
    Speculative {
        at: Config {
            source,
            models: DSR1,
            system: "b200_sxm",
            framework: "trtllm",
            weights,
            image: "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post3",
            measured: (from, "2026-05-17"),
        },
        mtp: (3, 1),
    }
}

/// The note of a row whose image was only a speculative-decoding config's that day, if any.
pub(crate) fn speculative_note(run: &RowRun, dp: bool) -> Option<String> {
    let s = SPECULATIVE.iter().find(|s| s.at.ran(run))?;
    let layers = if dp { s.mtp.1 } else { s.mtp.0 };
    Some(format!(
        "speculative decoding (MTP, {layers} draft layer{}) by its image, {}'s that day: not simulated",
        if layers == 1 { "" } else { "s" },
        s.at.source
    ))
}

/// What a row says of its run: its servesim model, system, engine, weights, TP and lengths, and
/// its `silicon_data_source`.
pub(crate) struct RowRun<'a> {
    pub model: &'a str,
    pub system: &'a str,
    pub framework: &'a str,
    pub weights: &'a str,
    pub tp: u32,
    /// Experts expert-parallel, attention data-parallel.
    pub layout: (bool, bool),
    pub lengths: (u64, u64),
    pub concurrency: u32,
    pub source: &'a str,
}

/// The image a `silicon_data_source` names: `image=NAME`, or the `;`-separated part that is an
/// image reference (`registry/name:tag`, no `=`); `nvcr.io#` as `nvcr.io/`.
pub(crate) fn image_of(source: &str) -> Option<String> {
    let parts = source.split(';').map(str::trim);
    let image = parts
        .clone()
        .find_map(|p| p.strip_prefix("image="))
        .or_else(|| parts.clone().find(|p| !p.contains('=') && p.contains(':') && p.contains('/')))?;
    Some(image.replacen("nvcr.io#", "nvcr.io/", 1))
}

/// The day a `silicon_data_source` says the row was measured (`measured=YYYY-MM-DD…`).
fn measured_day(source: &str) -> Option<&str> {
    source.split(';').map(str::trim).find_map(|p| p.strip_prefix("measured=")).and_then(|d| d.get(..10))
}

/// The recipe a row's run matches, if any.
pub(crate) fn recipe_of(run: &RowRun) -> Option<&'static Recipe> {
    [DSR1_SGLANG, GPT_OSS_VLLM, DSR1_TRTLLM, GPT_OSS_TRTLLM].into_iter().flatten().find(|r| {
        r.at.ran(run)
            && r.runs.iter().any(|s| {
                (s.tp, (s.isl, s.osl)) == (run.tp, run.lengths)
                    && (s.concurrency.0..=s.concurrency.1).contains(&run.concurrency)
                    && s.layout.is_none_or(|l| l == run.layout)
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A B200 SGLang row: (TP, ISL, OSL, concurrency).
    fn row<'a>(model: &'a str, weights: &'a str, layout: (u32, u64, u64, u32), source: &'a str) -> RowRun<'a> {
        let (tp, isl, osl, concurrency) = layout;
        RowRun {
            model,
            system: "b200_sxm",
            framework: "sglang",
            weights,
            tp,
            layout: (false, false),
            lengths: (isl, osl),
            concurrency,
            source,
        }
    }

    // The sources as the scoreboard's rows write them (aiconfigurator-core 0.12.0
    // systems/silicon_sample.csv, rows 2005 and 438).
    const CAMPAIGN: &str = "source_file=2026-03-25.csv; model=DeepSeek-R1; silicon_concurrency=32; \
         measured=2026-03-25T16:34:14Z; wip=False; image=lmsysorg/sglang:v0.5.9-cu130";
    const DUMP: &str = "db-dump/2026-04-27; config_id=271; silicon_concurrency=8; \
         measured=2026-03-25T00:00:00.000Z; workflow_run_id=337; lmsysorg/sglang:v0.5.9-cu130";

    #[test]
    fn a_row_of_an_mtp_only_image_says_so() {
        // silicon_sample.csv's DeepSeek-R1 FP8 B200 TensorRT-LLM rows of 2026-02-05 name
        // `nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post3`.
        let src = "source_file=2026-04-06.csv; measured=2026-02-05T00:00:00.000Z; \
                   image=nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post3";
        let trt = |weights, source| RowRun {
            framework: "trtllm",
            ..row("deepseek-r1", weights, (8, 1024, 1024, 64), source)
        };
        let n = speculative_note(&trt("fp8-block", src), false).expect("MTP");
        assert_eq!(
            n,
            "speculative decoding (MTP, 3 draft layers) by its image, InferenceX dsr1-fp8-b200-trt-mtp \
             (5d517074c)'s that day: not simulated"
        );
        assert!(speculative_note(&trt("fp8-block", src), true).unwrap().contains("(MTP, 1 draft layer)"));
        // The fp4 config took the image a day later; the configs without MTP ran post2.
        assert_eq!(speculative_note(&trt("fp4", src), false), None);
        assert_eq!(speculative_note(&trt("fp8-block", &src.replace("post3", "post2")), false), None);
    }

    #[test]
    fn the_image_is_read_in_both_forms_and_nvcr_hash_as_a_slash() {
        assert_eq!(image_of(CAMPAIGN).as_deref(), Some("lmsysorg/sglang:v0.5.9-cu130"));
        assert_eq!(image_of(DUMP).as_deref(), Some("lmsysorg/sglang:v0.5.9-cu130"));
        assert_eq!(
            image_of("measured=2026-01-14T00:00:00Z; image=nvcr.io#nvidia/tensorrt-llm/release:1.1.0rc2.post2")
                .as_deref(),
            Some("nvcr.io/nvidia/tensorrt-llm/release:1.1.0rc2.post2")
        );
        assert_eq!(image_of("source_file=/x/aic-auto-gap-analysis/data/h100_sxm/sglang/0.5.1.post1/q.csv"), None);
    }

    #[test]
    fn a_row_matches_the_recipe_of_its_image_days_and_search_space() {
        // dsr1_fp8_b200.sh at 12ba0ae07: TP 4 (8192/1024 only) runs 32 requests at 0.95 with an
        // FP8 cache; TP 8 runs 128 at 0.82.
        let tp4 = recipe_of(&row("deepseek-r1", "fp8-block", (4, 8192, 1024, 32), CAMPAIGN)).expect("TP 4");
        let s4 = sglang_of(tp4);
        assert_eq!((s4.max_running, s4.mem_fraction_static, tp4.flags.kv_dtype), (32, 0.95, Some("fp8")));
        let tp8 = recipe_of(&row("deepseek-v3", "fp8-block", (8, 1024, 8192, 8), DUMP)).expect("TP 8");
        let s8 = sglang_of(tp8);
        assert_eq!((s8.max_running, s8.chunk, s8.mem_fraction_static), (128, 32768, 0.82));
        assert_eq!((tp8.flags.rounds, tp8.flags.range_ratio), (10, 0.8));
        // SCHEDULER_RECV_INTERVAL: TP 8 10 below 16 clients and 30 from 16; TP 4 always 10.
        assert_eq!((s8.recv_interval_at(8), s8.recv_interval_at(16)), (10, 30));
        assert_eq!((s4.recv_interval_at(8), s4.recv_interval_at(32)), (10, 10));
        // Outside the config's search space (TP 4 only at 8192/1024 and up to 32 clients; TP 8
        // at 8192/1024 only with 4; up to 64 otherwise): not the recipe's run.
        for (tp, isl, osl, c) in [(4, 1024, 1024, 8), (4, 8192, 1024, 64), (8, 8192, 1024, 8), (8, 1024, 1024, 128)] {
            assert_eq!(
                recipe_of(&row("deepseek-r1", "fp8-block", (tp, isl, osl, c), CAMPAIGN)),
                None,
                "{tp} {isl} {c}"
            );
        }
        // Another image, another day, another engine or model: none.
        let fits = (8, 1024, 1024, 16);
        let older = CAMPAIGN.replace("v0.5.9-cu130", "v0.5.8.post1-cu130-amd64");
        assert_eq!(recipe_of(&row("deepseek-r1", "fp8-block", fits, &older)), None);
        let later = CAMPAIGN.replace("2026-03-25T16", "2026-03-28T16");
        assert_eq!(recipe_of(&row("deepseek-r1", "fp8-block", fits, &later)), None);
        assert_eq!(recipe_of(&RowRun { framework: "trtllm", ..row("deepseek-r1", "fp8-block", fits, CAMPAIGN) }), None);
        assert_eq!(recipe_of(&row("llama-3.1-70b", "fp8-block", fits, CAMPAIGN)), None);
        // H200: 512 running at 1024/1024, 256 at the other lengths; the cache left to auto.
        let h200 = |l: (u64, u64)| {
            recipe_of(&RowRun { system: "h200_sxm", ..row("deepseek-r1", "fp8-block", (8, l.0, l.1, 64), CAMPAIGN) })
        };
        assert_eq!(h200((1024, 1024)).map(|r| (sglang_of(r).max_running, r.flags.kv_dtype)), Some((512, None)));
        assert_eq!(h200((8192, 1024)).map(|r| sglang_of(r).max_running), Some(256));
    }

    /// A recipe's SGLang flags.
    fn sglang_of(r: &Recipe) -> Sglang {
        match r.flags.launch {
            Launch::Sglang(s) => s,
            _ => panic!("{} is not an SGLang recipe", r.at.source),
        }
    }

    /// A recipe's vLLM flags.
    fn vllm_of(r: &Recipe) -> Vllm {
        match r.flags.launch {
            Launch::Vllm(v) => v,
            _ => panic!("{} is not a vLLM recipe", r.at.source),
        }
    }

    #[test]
    fn a_gpt_oss_vllm_row_matches_its_configs_flags_and_search_space() {
        // silicon_sample.csv's gpt-oss-120b vLLM rows of 2026-03-27 name vllm/vllm-openai:v0.18.0
        // (lines 1904-1933 as a campaign, 3224-3651 as a dump), those of 2026-02-25 v0.15.1.
        let v018 = "source_file=2026-03-27.csv; model=gpt-oss-120b; silicon_concurrency=64; \
                    measured=2026-03-27T08:01:51Z; wip=False; image=vllm/vllm-openai:v0.18.0";
        let oss = |system, layout, source| RowRun {
            system,
            framework: "vllm",
            ..row("gpt-oss-120b", "mxfp4", layout, source)
        };
        // gptoss_fp4_h100.sh at cec542a9a: --max-num-seqs $CONC, 8192 batched tokens, 0.9, the
        // cache left to auto.
        let h100 = recipe_of(&oss("h100_sxm", (4, 1024, 1024, 64), v018)).expect("H100 TP 4");
        let v = vllm_of(h100);
        assert_eq!((v.max_num_seqs_at(64), v.max_num_seqs_at(8)), (64, 8));
        assert_eq!((v.max_num_batched_tokens, v.gpu_memory_utilization, h100.flags.kv_dtype), (8192, 0.9, None));
        assert_eq!((h100.flags.rounds, h100.flags.range_ratio), (10, 0.8));
        // H200 runs TP 1 (1024/1024 with 4 clients only), H100 does not; H200 TP 8 at 8192/1024
        // up to 32, H100 up to 16.
        assert!(recipe_of(&oss("h200_sxm", (1, 1024, 1024, 4), v018)).is_some());
        assert_eq!(recipe_of(&oss("h200_sxm", (1, 1024, 1024, 8), v018)), None);
        assert_eq!(recipe_of(&oss("h100_sxm", (1, 1024, 1024, 4), v018)), None);
        assert!(recipe_of(&oss("h200_sxm", (8, 8192, 1024, 32), v018)).is_some());
        assert_eq!(recipe_of(&oss("h100_sxm", (8, 8192, 1024, 32), v018)), None);
        // gptoss_fp4_b200.sh at d2c2acb19: 512 sequences whatever the clients, an FP8 cache.
        let v015 = "measured=2026-02-25T00:00:00.000Z; vllm/vllm-openai:v0.15.1";
        let b200 = recipe_of(&oss("b200_sxm", (1, 8192, 1024, 128), v015)).expect("B200 TP 1");
        assert_eq!((vllm_of(b200).max_num_seqs_at(128), b200.flags.kv_dtype), (512, Some("fp8")));
        // v0.15.1 on H100 (the image before cec542a9a), v0.18.0 a day later (626932a11 dropped
        // 1024/8192), another engine or weights: none.
        assert_eq!(recipe_of(&oss("h100_sxm", (4, 1024, 1024, 64), v015)), None);
        let later = v018.replace("2026-03-27T08", "2026-03-28T08");
        assert_eq!(recipe_of(&oss("h100_sxm", (4, 1024, 8192, 64), &later)), None);
        let trt = RowRun { framework: "trtllm", ..oss("h100_sxm", (4, 1024, 1024, 64), v018) };
        assert_eq!(recipe_of(&trt), None);
        assert_eq!(recipe_of(&RowRun { weights: "fp8", ..oss("h100_sxm", (4, 1024, 1024, 64), v018) }), None);
    }

    #[test]
    fn a_deepseek_trtllm_row_matches_by_layout_and_runs_its_scripts_branches() {
        // silicon_sample.csv's DeepSeek-R1 B200 TensorRT-LLM rows of 2026-01-29 (FP8) and
        // 2026-02-03 (FP4) name 1.2.0rc6.post2 in both source forms.
        let fp8 = "measured=2026-01-29T00:00:00.000Z; nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post2";
        let fp4 = "source_file=2026-04-06.csv; measured=2026-02-03T00:00:00.000Z; \
                   image=nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post2";
        let trt = |weights, layout: (u32, u64, u64, u32), ep_dp, source| RowRun {
            framework: "trtllm",
            layout: ep_dp,
            ..row("deepseek-r1", weights, layout, source)
        };
        let plain = (false, false);
        // dsr1_fp8_b200_trt.sh at ec7bafaae: 1024/1024 from 64 clients waits for batches (40
        // iterations, 0.8 of the token budget); 8192/1024 on TP 4 keeps 0.75 of the free memory,
        // 1024/8192 at 256 clients (TP 8, EP 8, DP attention) 0.7; otherwise 0.8.
        let r = recipe_of(&trt("fp8-block", (8, 1024, 1024, 64), plain, fp8)).expect("FP8 TP 8");
        let Launch::Trtllm(script) = r.flags.launch else { panic!("{:?}", r.flags.launch) };
        assert_eq!(r.flags.kv_dtype, Some("fp8"));
        // --max_num_tokens: ((64 + 1024 + 64 + 63) / 64) × 64 = 1152, at least 8192.
        assert_eq!(
            script.at(1024, 1024, 64, 8),
            TrtllmAt {
                max_batch_size: None,
                max_num_tokens: 8192,
                free_gpu_memory_fraction: 0.8,
                batch_wait: Some((40, 0.8)),
                adp_balance: (60, 0)
            }
        );
        assert_eq!(script.at(1024, 1024, 32, 8).batch_wait, None);
        assert_eq!(script.at(8192, 1024, 32, 4).free_gpu_memory_fraction, 0.75);
        assert_eq!(script.at(8192, 1024, 32, 8).free_gpu_memory_fraction, 0.8);
        assert_eq!(script.at(1024, 8192, 256, 8).free_gpu_memory_fraction, 0.7);
        // (256 + 8192 + 64 + 63) / 64 × 64 = 8512.
        assert_eq!(script.at(8192, 1024, 256, 8).max_num_tokens, 8512);
        // The layout decides where the search space gives one: 1024/8192 at 256 clients is TP 8
        // with EP and DP attention, not plain TP 8 (that entry ends at 128).
        assert!(recipe_of(&trt("fp8-block", (8, 1024, 8192, 256), (true, true), fp8)).is_some());
        assert_eq!(recipe_of(&trt("fp8-block", (8, 1024, 8192, 256), plain, fp8)), None);
        assert_eq!(recipe_of(&trt("fp8-block", (8, 1024, 8192, 128), (true, false), fp8)), None);
        // dsr1_fp4_b200_trt.sh at 6eecc0e66: 8192/1024 at 32 clients on TP 4 with or without EP,
        // 0.8 and no batch waiting anywhere.
        let f4 = |ep_dp| recipe_of(&trt("fp4", (4, 8192, 1024, 32), ep_dp, fp4));
        assert!(f4(plain).is_some() && f4((true, false)).is_some());
        assert_eq!(f4((true, true)), None);
        let Launch::Trtllm(s4) = f4(plain).unwrap().flags.launch else { panic!() };
        assert_eq!(
            s4.at(1024, 1024, 64, 8),
            TrtllmAt {
                max_batch_size: None,
                max_num_tokens: 8192,
                free_gpu_memory_fraction: 0.8,
                batch_wait: None,
                adp_balance: (60, 0)
            }
        );
        // The FP8 image a day before its config took it, and the FP4 config before 2026-02-03:
        // none; the MTP configs' post3 is not a recipe (speculative).
        for (weights, layout, source) in [
            ("fp8-block", (8, 1024, 1024, 64), fp8.replace("01-29", "01-28")),
            ("fp4", (8, 1024, 1024, 4), fp4.replace("02-03", "01-29")),
            ("fp8-block", (8, 1024, 1024, 64), fp8.replace("post2", "post3")),
        ] {
            let r = RowRun { framework: "trtllm", ..row("deepseek-r1", weights, layout, &source) };
            assert_eq!(recipe_of(&r), None, "{source}");
        }
    }

    #[test]
    fn a_gpt_oss_trtllm_row_runs_its_scripts_options() {
        // silicon_sample.csv's gpt-oss-120b B200 TensorRT-LLM rows of 2026-02-05 name
        // 1.2.0rc2.post2; gptoss_fp4_b200_trt.sh at d7dbd045b: 512 sequences, 20000 tokens, an
        // FP8 cache at 0.85, `attention_dp_config: {enable_balance: true}` (TensorRT-LLM's 50
        // and 10 iterations otherwise).
        let src = "measured=2026-02-05T23:18:58Z; wip=False; image=nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc2.post2";
        let oss =
            |layout, ep_dp| RowRun { framework: "trtllm", layout: ep_dp, ..row("gpt-oss-120b", "mxfp4", layout, src) };
        let r = recipe_of(&oss((2, 1024, 1024, 256), (true, true))).expect("TP 2, EP 2, DP attention at 256");
        let Launch::Trtllm(script) = r.flags.launch else { panic!("{:?}", r.flags.launch) };
        assert_eq!(
            script.at(1024, 1024, 256, 2),
            TrtllmAt {
                max_batch_size: Some(512),
                max_num_tokens: 20000,
                free_gpu_memory_fraction: 0.85,
                batch_wait: None,
                adp_balance: (50, 10)
            }
        );
        assert_eq!(r.flags.kv_dtype, Some("fp8"));
        // Plain TP 2 runs 4-256 clients; with EP and DP attention only 256; TP 4 with them only 64.
        assert!(recipe_of(&oss((2, 1024, 1024, 8), (false, false))).is_some());
        assert_eq!(recipe_of(&oss((2, 1024, 1024, 8), (true, true))), None);
        assert!(recipe_of(&oss((4, 1024, 1024, 64), (true, true))).is_some());
        assert_eq!(recipe_of(&oss((4, 1024, 1024, 64), (false, false))), None);
    }
}
