//! The serving engine's CPU work per iteration (scheduling, input preparation, sampling, output
//! processing), and whether the engine overlaps it with the GPU, per engine.
//!
//! `[cost] overhead = "<name>"` picks one; `cost.cpu_overhead_base_us`,
//! `cost.cpu_overhead_per_seq_us` and `[scheduler.cpu]` override its numbers. Without the key,
//! a scenario priced from a kernel database takes its framework's entry and any other takes
//! `vllm`. Kernel times (a database, a calibration) exclude this work; the iteration pays
//! `base_us + per_seq_us × sequences` on the CPU, in sequence with the GPU or overlapped with
//! it (an iteration then takes max(GPU, CPU)).

/// One engine's CPU overhead.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngineOverhead {
    pub name: &'static str,
    pub(crate) base_us: f64,
    pub(crate) per_seq_us: f64,
    /// Whether the next step is scheduled while the GPU runs this one.
    pub overlap: bool,
    /// Where the numbers come from.
    pub(crate) source: &'static str,
}

/// The engines' overheads. The constants of `vllm`, `sglang` and `trtllm` are fitted on half of
/// the measured end-to-end runs of AIConfigurator's `silicon_sample.csv` (the rows servesim can
/// express, split by a hash of the row id) and their errors reported on the other half
/// (`servesim validate --silicon FILE --fit-overhead`, docs/fidelity.md). The kernel database
/// times kernels inside CUDA graphs, without the engine around them: the fitted CPU work is a fraction of a millisecond per
/// iteration plus tens of µs per sequence, in series with the GPU (the grid's best on every
/// engine; overlap lost).
/// TensorRT-LLM's fit (see its `source`).
const TRTLLM_BASE: f64 = 0.0;
const TRTLLM_PER_SEQ: f64 = 2.0;

pub const OVERHEADS: &[EngineOverhead] = &[
    EngineOverhead {
        name: "vllm",
        base_us: 250.0,
        per_seq_us: 40.0,
        overlap: false,
        source: "vLLM 0.12-0.19: fitted on the fit half (168 rows) of aiconfigurator-core 0.12.0's \
                 silicon_sample.csv vLLM rows, grid 0-4000 µs × 0-80 µs/seq × overlap; report half (171 rows): \
                 TPOT median |error| 9.0%, TTFT 45.7% (docs/fidelity.md)",
    },
    EngineOverhead {
        name: "sglang",
        base_us: 750.0,
        per_seq_us: 20.0,
        overlap: false,
        source: "SGLang 0.5.6: fitted on the fit half (58 rows) of aiconfigurator-core 0.12.0's silicon_sample.csv \
                 SGLang rows, same grid; report half (72 rows): TPOT median |error| 5.8%, TTFT 15.6% \
                 (docs/fidelity.md)",
    },
    EngineOverhead {
        name: "trtllm",
        base_us: TRTLLM_BASE,
        per_seq_us: TRTLLM_PER_SEQ,
        overlap: false,
        source: "TensorRT-LLM 0.8-1.3: fitted by an earlier build on the fit half of the aiconfigurator-core \
                 0.12.0 silicon_sample.csv TensorRT-LLM rows that state their precision (grid 0-4000 µs × 0-40 µs/seq), \
                 not refitted; its rows are far off for other reasons (docs/fidelity.md)",
    },
    EngineOverhead {
        name: "vidur-2023",
        base_us: 806.3,
        per_seq_us: 37.48,
        overlap: false,
        source: "least-squares line through Vidur's per-iteration CPU costs (schedule + sampler + prepare inputs + \
                 process outputs, medians; data/vidur-profiles/) against batch size, measured on a 2023 vLLM \
                 (V0, no overlap)",
    },
    EngineOverhead { name: "none", base_us: 0.0, per_seq_us: 0.0, overlap: false, source: "no CPU overhead" },
];

impl EngineOverhead {
    pub fn find(name: &str) -> Option<&'static EngineOverhead> {
        OVERHEADS.iter().find(|o| o.name == name)
    }

    pub fn names() -> Vec<&'static str> {
        OVERHEADS.iter().map(|o| o.name).collect()
    }

    /// The default of a scenario: its database's framework, else vLLM.
    pub fn default_for(framework: Option<&str>) -> &'static EngineOverhead {
        framework.and_then(EngineOverhead::find).unwrap_or(&OVERHEADS[0])
    }
}
