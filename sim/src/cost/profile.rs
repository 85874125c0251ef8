//! Cost profiles: measured per-operator times, as tables with an interpolation rule.
//!
//! ```text
//!   profile (JSON, written by `servesim calibrate`)
//!     meta: GPU, driver, clocks, dtype, model dims, TP degrees, date, version, backend
//!     ops:  name (Vidur's op names) × TP → table over 1 or 2 axes, interpolation, held-out error
//!   Curve1 / Curve2: the tables made ready for O(log n) lookups by the Profiled cost model
//! ```
//! The binary reads the file and deserialises it into [`Profile`]; this module only checks and
//! evaluates it. Times are milliseconds, as in Vidur's CSVs; axes are token, byte or sequence
//! counts.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// Why a profile cannot be used: not a profile at all, a version this build does not read, a
/// table or value out of range (the message names the op or key), or measured for another
/// model than the scenario's.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ProfileError {
    #[error("not a servesim profile: {0}")]
    NotAProfile(String),
    #[error("profile format version {found} is not supported (this servesim reads {PROFILE_FORMAT_VERSION})")]
    Version { found: u32 },
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    OtherModel(String),
    #[error("{0}")]
    OtherGpu(String),
    /// Tables measured at other TP degrees than the scenario's.
    #[error("{0}")]
    OtherTp(String),
}

impl From<String> for ProfileError {
    fn from(msg: String) -> ProfileError {
        ProfileError::Invalid(msg)
    }
}

/// The version of the profile format, written in every profile.
pub const PROFILE_FORMAT_VERSION: u32 = 1;

/// A whole profile file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub format_version: u32,
    pub meta: ProfileMeta,
    pub ops: Vec<OpTable>,
}

/// Where and how a profile was measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileMeta {
    /// What produced it: `servesim calibrate run --backend cuda`, `vidur import`, ...
    pub source: String,
    /// `cuda`, `cpu` or `vidur`.
    pub backend: String,
    /// The device's name (`NVIDIA H200`, `A100-80G (Vidur)`, the CPU's model).
    pub gpu: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clocks: Option<String>,
    /// Element type of weights and activations (`bf16`; the CPU backend computes in `f32`).
    pub dtype: String,
    /// The model geometry the token ops were measured for.
    pub model: ModelDims,
    /// Tensor-parallel degrees with shard shapes in the profile.
    pub tp: Vec<u32>,
    /// UTC date and time of the measurement (or of the import).
    pub date: String,
    pub servesim_version: String,
    /// Anything else a reader should know (inputs, deadlines, what was left out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The kernel database the tables were read from (`servesim calibrate import-aic`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<DatabaseMeta>,
}

/// Where an imported profile's tables come from: a kernel database's system, framework and
/// version, the package that shipped it, and every file read with its SHA-256.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseMeta {
    /// `aiconfigurator` (NVIDIA AIConfigurator, Apache-2.0).
    pub name: String,
    /// The package and version that shipped it (`aiconfigurator-core 0.12.0`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// The database's system (`h100_sxm`).
    pub system: String,
    /// `vllm`, `sglang` or `trtllm`.
    pub framework: String,
    pub version: String,
    /// Element types of the GEMMs and of the KV cache the tables were selected for.
    pub weights: String,
    pub kv: String,
    /// How the MoE tables' tokens were routed over the experts (`power_law_1.2`); absent for
    /// dense models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe_distribution: Option<String>,
    pub files: Vec<SourceFile>,
}

/// One file a profile was built from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceFile {
    /// Relative to the database's root (`h100_sxm/gemm/vllm/0.24.0/gemm_perf.parquet`).
    pub path: String,
    pub sha256: String,
    pub rows: u64,
}

/// How one imported table was obtained from the database.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpSource {
    /// The database file (as in [`DatabaseMeta::files`]).
    pub file: String,
    /// The rows selected (kernel, dtype, shape), in words.
    pub selection: String,
    /// Whether the op's own shape was measured or read between measured shapes, in words.
    pub shape: String,
    /// When the shape was read between measured ones: the error of that reading on measured
    /// shapes left out in turn (percent of the measured time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer_error: Option<ErrorStats>,
}

/// Median, 90th percentile and maximum of |error| in percent, over `points` points.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorStats {
    pub points: u64,
    pub median_pct: f64,
    pub p90_pct: f64,
    pub(crate) max_pct: f64,
}

impl ErrorStats {
    /// The statistics of a list of |errors| in percent; None when it is empty.
    pub fn of(mut errs: Vec<f64>) -> Option<ErrorStats> {
        errs.retain(|e| e.is_finite());
        if errs.is_empty() {
            return None;
        }
        errs.sort_by(f64::total_cmp);
        Some(ErrorStats {
            points: errs.len() as u64,
            median_pct: median_sorted(&errs),
            p90_pct: nearest_rank(&errs, 0.9),
            max_pct: *errs.last().expect("non-empty"),
        })
    }
}

/// The dimensions that decide every op's shape (per GPU: heads / TP, intermediate / TP).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelDims {
    pub name: String,
    pub hidden: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub intermediate: u64,
    pub vocab: u64,
}

impl Profile {
    /// Parses a profile file's text and checks every table; errors say what is wrong.
    pub fn from_json(text: &str) -> Result<Profile, ProfileError> {
        let p: Profile = serde_json::from_str(text).map_err(|e| ProfileError::NotAProfile(e.to_string()))?;
        // TP degrees divide head counts: 0 would divide by zero.
        if let Some(t) = p.meta.tp.iter().find(|&&t| !(1..=64).contains(&t)) {
            return Err(format!("meta.tp: every degree must be in [1, 64], got {t}").into());
        }
        let m = &p.meta.model;
        for (key, v) in [
            ("hidden", m.hidden),
            ("heads", m.heads),
            ("kv_heads", m.kv_heads),
            ("head_dim", m.head_dim),
            ("intermediate", m.intermediate),
            ("vocab", m.vocab),
        ] {
            if !(1..=crate::spec::MAX_DIMENSION).contains(&v) {
                return Err(format!("meta.model.{key}: must be in [1, 2^40], got {v}").into());
            }
        }
        for t in &p.ops {
            t.check()?;
            super::check_op_axes(&t.name, &t.axes)?;
        }
        Ok(p)
    }
}

impl ModelDims {
    pub fn from_spec(m: &crate::spec::ModelSpec) -> ModelDims {
        ModelDims {
            name: m.name.clone(),
            hidden: m.hidden,
            heads: m.heads,
            kv_heads: m.kv_heads,
            head_dim: m.head_dim,
            intermediate: m.intermediate,
            vocab: m.vocab,
        }
    }

    /// Whether the GEMM and elementwise shapes are the same as `m`'s.
    pub fn same_shapes(&self, m: &crate::spec::ModelSpec) -> bool {
        (self.hidden, self.heads, self.kv_heads, self.head_dim, self.intermediate, self.vocab)
            == (m.hidden, m.heads, m.kv_heads, m.head_dim, m.intermediate, m.vocab)
    }

    /// Query heads, KV heads and head size on one GPU at TP `tp`.
    pub fn attention_per_gpu(&self, tp: u64) -> (u64, u64, u64) {
        (self.heads / tp, self.kv_heads.div_ceil(tp).max(1), self.head_dim)
    }
}

/// What a table's axis counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    /// Tokens through the op (GEMMs, elementwise ops).
    Tokens,
    /// Bytes reduced (all-reduce).
    Bytes,
    /// Sequences in the batch (decode attention, CPU overheads, sampling).
    Batch,
    /// Tokens of context each decoding sequence attends to.
    Context,
    /// New tokens of a prefill chunk.
    Chunk,
    /// Tokens already in the KV cache that a prefill chunk attends to.
    Cached,
    /// Tokens of each prefilling sequence once its chunk is in: cached prefix plus chunk (the
    /// kernel databases time whole prompts of this length; a cached prefix is priced by the
    /// share of causal query-key pairs the chunk adds).
    Sequence,
}

impl Axis {
    pub fn name(self) -> &'static str {
        match self {
            Axis::Tokens => "tokens",
            Axis::Bytes => "bytes",
            Axis::Batch => "batch",
            Axis::Context => "context",
            Axis::Chunk => "chunk",
            Axis::Cached => "cached",
            Axis::Sequence => "sequence",
        }
    }
}

/// How a table is read between its points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Interp {
    /// The time of the next measured point: kernels are tiled, so a shape costs what the next
    /// tile edge costs (GEMM times are step functions of the token count).
    Step,
    /// Piecewise linear in log(x), log(time) (linear where x or the time is 0).
    LogLog,
    /// Piecewise linear.
    Linear,
}

impl Interp {
    pub const ALL: [Interp; 3] = [Interp::Step, Interp::LogLog, Interp::Linear];

    pub fn name(self) -> &'static str {
        match self {
            Interp::Step => "step",
            Interp::LogLog => "loglog",
            Interp::Linear => "linear",
        }
    }
}

/// Errors of an interpolation on points left out of its fit, in percent of the measured time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeldOut {
    pub(crate) interp: Interp,
    /// Held-out points.
    pub(crate) points: u64,
    pub median_pct: f64,
    pub p90_pct: f64,
    pub max_pct: f64,
}

/// One op's measured times on one TP degree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpTable {
    /// Vidur's op name (`attn_pre_proj`, `mlp_up_proj`, `attn_decode`, `all_reduce`, ...).
    pub name: String,
    /// TP degree of the shard shapes; absent when the times hold for any degree (CPU overheads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp: Option<u32>,
    /// One axis (`[x, ms]` points) or two (`[x1, x2, ms]`: rows keyed by x1, curves over x2).
    pub axes: Vec<Axis>,
    pub interp: Interp,
    pub points: Vec<Vec<f64>>,
    /// Geometry the op was measured on when it is not the profile's model (Vidur's attention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dims: Option<ModelDims>,
    /// Held-out error of the chosen interpolation (first) and of the other candidates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub heldout: Vec<HeldOut>,
    /// Where an imported table came from (kernel databases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<OpSource>,
}

#[cfg(test)]
impl OpTable {
    /// A table of `points` read linearly, without provenance (for tests).
    pub(crate) fn linear(name: &str, tp: Option<u32>, axes: Vec<Axis>, points: Vec<Vec<f64>>) -> OpTable {
        OpTable {
            name: name.into(),
            tp,
            axes,
            interp: Interp::Linear,
            points,
            dims: None,
            heldout: vec![],
            source: None,
        }
    }
}

impl OpTable {
    /// The held-out error of the chosen interpolation, when it was measured.
    pub fn chosen_heldout(&self) -> Option<&HeldOut> {
        self.heldout.iter().find(|h| h.interp == self.interp)
    }

    /// Checks the table's shape; the message names the op.
    pub fn check(&self) -> Result<(), ProfileError> {
        let who = match self.tp {
            Some(t) => format!("op {} (tp {t})", self.name),
            None => format!("op {}", self.name),
        };
        if let Some(t) = self.tp.filter(|t| !(1..=64).contains(t)) {
            return Err(format!("{who}: tp must be in [1, 64], got {t}").into());
        }
        if self.axes.is_empty() || self.axes.len() > 2 {
            return Err(format!("{who}: needs 1 or 2 axes, got {}", self.axes.len()).into());
        }
        if self.points.is_empty() {
            return Err(format!("{who}: has no points").into());
        }
        let width = self.axes.len() + 1;
        for p in &self.points {
            if p.len() != width {
                return Err(format!("{who}: every point needs {width} numbers, got {p:?}").into());
            }
            if p.iter().any(|v| !v.is_finite() || *v < 0.0) {
                return Err(format!("{who}: point {p:?} has a negative or non-finite number").into());
            }
        }
        Ok(())
    }
}

/// Splits points into (fit, held out): every 4th point along the last axis of each row is held
/// out (the 4th, 8th, ...: indices 3, 7, ...). `points` must be sorted.
pub fn holdout_split(points: &[Vec<f64>]) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let (mut fit, mut out) = (Vec::new(), Vec::new());
    let mut i = 0usize;
    let mut row: Option<f64> = None;
    for p in points {
        let key = if p.len() == 3 { Some(p[0]) } else { None };
        if key != row {
            row = key;
            i = 0;
        }
        if i % 4 == 3 {
            out.push(p.clone());
        } else {
            fit.push(p.clone());
        }
        i += 1;
    }
    (fit, out)
}

/// A one-axis table ready for lookups.
#[derive(Clone, Debug)]
pub struct Curve1 {
    xs: Vec<f64>,
    ys: Vec<f64>,
    interp: Interp,
    /// ln of xs and ys (log-log curves only), so a lookup takes one logarithm, not four.
    logs: Option<(Vec<f64>, Vec<f64>)>,
}

impl Curve1 {
    /// Builds a curve from `(x, ms)` pairs; equal x values are averaged. Panics on an empty set.
    pub fn new(mut pts: Vec<(f64, f64)>, interp: Interp) -> Curve1 {
        assert!(!pts.is_empty(), "a curve needs points");
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut xs, mut ys): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
        let mut n = 0.0;
        for (x, y) in pts {
            if xs.last() == Some(&x) {
                let last = ys.last_mut().expect("same length");
                *last = (*last * n + y) / (n + 1.0);
                n += 1.0;
            } else {
                xs.push(x);
                ys.push(y);
                n = 1.0;
            }
        }
        let logs = (interp == Interp::LogLog)
            .then(|| (xs.iter().map(|v| v.ln()).collect(), ys.iter().map(|v| v.ln()).collect()));
        Curve1 { xs, ys, interp, logs }
    }

    pub fn min_x(&self) -> f64 {
        self.xs[0]
    }

    pub fn max_x(&self) -> f64 {
        *self.xs.last().expect("non-empty")
    }

    pub fn len(&self) -> usize {
        self.xs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.xs.is_empty()
    }

    /// Whether `x` lies within the measured points.
    pub fn covers(&self, x: f64) -> bool {
        x >= self.xs[0] && x <= self.max_x()
    }

    /// The time at `x`, in ms. Below the first point it is the first point's time (a kernel
    /// never gets cheaper than its smallest measured shape); above the last it grows in
    /// proportion to x (large shapes are throughput-bound).
    pub fn eval(&self, x: f64) -> f64 {
        self.eval_ln(x, &mut None)
    }

    /// [`Curve1::eval`], taking ln(x) from `ln_x` when an earlier read of the same x has it
    /// (two rows of a table read at one x), and leaving it there.
    fn eval_ln(&self, x: f64, ln_x: &mut Option<f64>) -> f64 {
        let (xs, ys) = (&self.xs, &self.ys);
        let n = xs.len();
        if x <= xs[0] {
            return ys[0];
        }
        if x >= xs[n - 1] {
            return if xs[n - 1] > 0.0 { ys[n - 1] * x / xs[n - 1] } else { ys[n - 1] };
        }
        // The segment (xs[i], xs[i+1]] holding x.
        let i = xs.partition_point(|&v| v < x) - 1;
        if xs[i + 1] == x {
            return ys[i + 1];
        }
        if let Some((lx, ly)) = &self.logs {
            // What `segment` computes for log-log, with the knots' logarithms kept.
            if xs[i] > 0.0 && ys[i] > 0.0 && ys[i + 1] > 0.0 {
                let t = (*ln_x.get_or_insert_with(|| x.ln()) - lx[i]) / (lx[i + 1] - lx[i]);
                return (ly[i] + t * (ly[i + 1] - ly[i])).exp();
            }
        }
        segment(self.interp, xs[i], ys[i], xs[i + 1], ys[i + 1], x)
    }
}

/// Interpolates between (x0, y0) and (x1, y1) at x0 < x < x1.
fn segment(interp: Interp, x0: f64, y0: f64, x1: f64, y1: f64, x: f64) -> f64 {
    match interp {
        Interp::Step => y1,
        Interp::LogLog if x0 > 0.0 && y0 > 0.0 && y1 > 0.0 => {
            let t = (x / x0).ln() / (x1 / x0).ln();
            (y0.ln() + t * (y1.ln() - y0.ln())).exp()
        }
        _ => y0 + (x - x0) / (x1 - x0) * (y1 - y0),
    }
}

/// The op's bound at a point of a table's axes, for reading beyond what was measured: its
/// speed-of-light time (any unit: only ratios are taken), and the measured points' utilization
/// of it. AIConfigurator reads its own tables so (`aic-core/rust/aiconfigurator-core/src/
/// perf_database/perf_interp.rs`, ai-dynamo/aiconfigurator 095f58a51): beyond the range the
/// time is SOL(query) / util, the util held from the boundary — on a one-axis table its last
/// point's, on a two-axis table the tapered (modified-Shepard) blend of the [`HOLD_ANCHORS`]
/// nearest measured points in joint log2 space; between two rows of which only one reaches the
/// query, that row's reading is carried across by the SOL ratio. Below the first point a table
/// stays flat (a kernel never gets cheaper than its smallest measured shape).
pub struct Bound<'a> {
    pub sol: &'a dyn Fn(&[f64]) -> f64,
    /// Every measured point with a positive time and SOL: (log2 of its coordinates, SOL / time),
    /// sorted by the first coordinate ([`anchors`] makes them).
    pub anchors: &'a [([f64; 2], f64)],
}

/// Measured points blended for a two-axis hold (AIConfigurator's `nn_leaves`).
pub const HOLD_ANCHORS: usize = 4;

/// A two-axis table's anchors under `sol` ([`Bound::anchors`]; none for a one-axis table, which
/// holds its last point's util). Coordinates below 1 read as 1 (a table's zero cached tokens):
/// AIConfigurator's tables have none.
pub fn anchors(curve: &Curve, sol: &dyn Fn(&[f64]) -> f64) -> Box<[([f64; 2], f64)]> {
    let Curve::Two(c) = curve else { return Box::default() };
    let mut all: Vec<([f64; 2], f64)> = c
        .points()
        .filter_map(|(x, t)| {
            let s = sol(&x);
            (t > 0.0 && s > 0.0 && s.is_finite()).then(|| ([x[0].max(1.0).log2(), x[1].max(1.0).log2()], s / t))
        })
        .collect();
    // Sorted by the first coordinate, as [`Bound::hold`] walks them.
    all.sort_by(|a, b| a.0[0].total_cmp(&b.0[0]));
    all.into()
}

impl Bound<'_> {
    /// `t` read at `from`, carried to `to` by the ratio of their SOLs (unchanged where a SOL
    /// is not positive).
    fn carry(&self, t: f64, from: &[f64], to: &[f64]) -> f64 {
        let (a, b) = ((self.sol)(from), (self.sol)(to));
        if a > 0.0 && b > 0.0 && a.is_finite() && b.is_finite() {
            t * b / a
        } else {
            t
        }
    }

    /// SOL(x) / the blended util of the nearest anchors (None without anchors or a SOL). Read
    /// per iteration beyond a table: it allocates nothing.
    fn hold(&self, x: &[f64]) -> Option<f64> {
        const K: usize = HOLD_ANCHORS + 1;
        let q = [x[0].max(1.0).log2(), x.get(1).map_or(0.0, |v| v.max(1.0).log2())];
        // The K nearest (squared distance, util), ascending, the first `n` filled. The anchors
        // are sorted by their first coordinate: walk out from the query's both ways while that
        // axis alone is nearer than the farthest kept.
        let (mut best, mut n) = ([(f64::INFINITY, 0.0); K], 0);
        let keep = |best: &mut [(f64, f64); K], n: &mut usize, (a, util): &([f64; 2], f64)| {
            let d = (a[0] - q[0]).powi(2) + (a[1] - q[1]).powi(2);
            if *n == K && d >= best[K - 1].0 {
                return;
            }
            let at = best[..*n].partition_point(|e| e.0 <= d);
            *n = (*n + 1).min(K);
            best.copy_within(at..*n - 1, at + 1);
            best[at] = (d, *util);
        };
        let anchors = self.anchors;
        let mut lo = anchors.partition_point(|a| a.0[0] < q[0]);
        let mut hi = lo;
        loop {
            // The farthest kept once K are (else no bound).
            let reach = best[K - 1].0;
            let down = lo > 0 && (anchors[lo - 1].0[0] - q[0]).powi(2) < reach;
            let up = hi < anchors.len() && (anchors[hi].0[0] - q[0]).powi(2) < reach;
            if !down && !up {
                break;
            }
            if down {
                lo -= 1;
                keep(&mut best, &mut n, &anchors[lo]);
            }
            if up {
                keep(&mut best, &mut n, &anchors[hi]);
                hi += 1;
            }
        }
        // The K-th is the support radius R; weights ((R − d) / (R d))², equal where all are 0.
        let (picked, radius) = if n == K { (K - 1, best[K - 1].0.sqrt()) } else { (n, f64::INFINITY) };
        let weight = |d: f64| {
            if radius.is_infinite() {
                1.0 / (d * d + 1e-12)
            } else {
                ((radius - d).max(0.0) / (radius * d + 1e-12)).powi(2)
            }
        };
        let nearest = &best[..picked];
        let total: f64 = nearest.iter().map(|e| weight(e.0.sqrt())).sum();
        let w = |e: &(f64, f64)| if total > 0.0 { weight(e.0.sqrt()) } else { 1.0 };
        let util = nearest.iter().map(|e| w(e) * e.1).sum::<f64>() / nearest.iter().map(w).sum::<f64>();
        let sol = (self.sol)(x);
        (util > 0.0 && sol > 0.0 && sol.is_finite()).then(|| sol / util)
    }
}

/// A two-axis table: rows keyed by the first axis, each a curve over the second. Rows may cover
/// different ranges (prefill attention: cached + chunk ≤ the longest context).
#[derive(Debug)]
pub struct Curve2 {
    rows: Vec<(f64, Curve1)>,
    interp: Interp,
    /// The log-log weight between the two rows around a whole x1 below [`WEIGHTS`], filled as
    /// read (the first axis is a batch size: it repeats): the bits of
    /// ln(x1 / k0) / ln(k1 / k0), 0 for not yet computed.
    weights: Box<[AtomicU64]>,
}

/// Whole first-axis values whose log-log weights [`Curve2`] keeps.
const WEIGHTS: usize = 1024;

impl Clone for Curve2 {
    /// The same table with an empty weight cache.
    fn clone(&self) -> Curve2 {
        Curve2::of_rows(self.rows.clone(), self.interp)
    }
}

impl Curve2 {
    /// Builds a table from `[x1, x2, ms]` points. Panics on an empty set.
    pub fn new(points: &[Vec<f64>], interp: Interp) -> Curve2 {
        assert!(!points.is_empty(), "a table needs points");
        let mut sorted: Vec<&Vec<f64>> = points.iter().collect();
        sorted.sort_by(|a, b| a[0].total_cmp(&b[0]).then(a[1].total_cmp(&b[1])));
        let mut rows: Vec<(f64, Vec<(f64, f64)>)> = Vec::new();
        for p in sorted {
            match rows.last_mut() {
                Some((k, pts)) if *k == p[0] => pts.push((p[1], p[2])),
                _ => rows.push((p[0], vec![(p[1], p[2])])),
            }
        }
        let rows = rows.into_iter().map(|(k, pts)| (k, Curve1::new(pts, interp))).collect();
        Curve2::of_rows(rows, interp)
    }

    fn of_rows(rows: Vec<(f64, Curve1)>, interp: Interp) -> Curve2 {
        let weights = std::iter::repeat_with(|| AtomicU64::new(0)).take(WEIGHTS).collect();
        Curve2 { rows, interp, weights }
    }

    /// Interpolates the readings `y0` of row `k0` and `y1` of row `k1` at `x1` (k0 < x1 < k1):
    /// what [`segment`] computes, with the log-log weight of a whole x1 kept.
    fn across(&self, k0: f64, y0: f64, k1: f64, y1: f64, x1: f64) -> f64 {
        if self.interp != Interp::LogLog || !(k0 > 0.0 && y0 > 0.0 && y1 > 0.0) {
            return segment(self.interp, k0, y0, k1, y1, x1);
        }
        let weight = || (x1 / k0).ln() / (k1 / k0).ln();
        let cell = (x1.fract() == 0.0 && x1 >= 0.0).then(|| self.weights.get(x1 as usize)).flatten();
        let t = match cell {
            Some(c) => match c.load(Ordering::Relaxed) {
                0 => {
                    let t = weight();
                    c.store(t.to_bits(), Ordering::Relaxed);
                    t
                }
                bits => f64::from_bits(bits),
            },
            None => weight(),
        };
        (y0.ln() + t * (y1.ln() - y0.ln())).exp()
    }

    pub fn rows(&self) -> usize {
        self.rows.len()
    }

    /// Whether (x1, x2) lies within the measured rows and, along x2, within the measured range
    /// of both neighbouring rows.
    pub fn covers(&self, x1: f64, x2: f64) -> bool {
        let rows = &self.rows;
        let n = rows.len();
        if x1 < rows[0].0 || x1 > rows[n - 1].0 {
            return false;
        }
        let i = rows.partition_point(|r| r.0 < x1);
        if rows[i].0 == x1 {
            return rows[i].1.covers(x2);
        }
        rows[i - 1].1.covers(x2) && rows[i].1.covers(x2)
    }

    /// [`Curve2::eval`] and [`Curve2::covers`] together, with one search for the rows.
    pub fn read(&self, x1: f64, x2: f64) -> (f64, bool) {
        let rows = &self.rows;
        let n = rows.len();
        let (k0, c0) = &rows[0];
        if x1 <= *k0 {
            return (c0.eval(x2), x1 == *k0 && c0.covers(x2));
        }
        if x1 >= rows[n - 1].0 {
            let (k, c) = &rows[n - 1];
            let y = c.eval(x2);
            return (if *k > 0.0 { y * x1 / k } else { y }, x1 == *k && c.covers(x2));
        }
        let i = rows.partition_point(|r| r.0 < x1) - 1;
        let (k1, c1) = &rows[i + 1];
        if *k1 == x1 {
            return (c1.eval(x2), c1.covers(x2));
        }
        let (k0, c0) = &rows[i];
        let mut ln_x2 = None;
        let (y0, y1) = (c0.eval_ln(x2, &mut ln_x2), c1.eval_ln(x2, &mut ln_x2));
        (self.across(*k0, y0, *k1, y1, x1), c0.covers(x2) && c1.covers(x2))
    }

    /// [`Curve2::read`] beyond the measured range along the op's bound (see [`Bound`]).
    pub fn read_bound(&self, x1: f64, x2: f64, bound: &Bound) -> (f64, bool) {
        let rows = &self.rows;
        let n = rows.len();
        // Flat below the first row.
        let x1 = x1.max(rows[0].0);
        // A row's reading at x2 if it reaches it (flat below its first point).
        let row = |c: &Curve1, ln: &mut Option<f64>| (x2 <= c.max_x()).then(|| c.eval_ln(x2, ln));
        let mut ln_x2 = None;
        let held = |q: [f64; 2]| bound.hold(&q).unwrap_or_else(|| self.eval(q[0], q[1]));
        if x1 > rows[n - 1].0 {
            return (held([x1, x2]), false);
        }
        let i = rows.partition_point(|r| r.0 < x1);
        let (k1, c1) = &rows[i];
        if *k1 == x1 {
            return match row(c1, &mut ln_x2) {
                Some(t) => (t, c1.covers(x2)),
                None => (held([x1, x2]), false),
            };
        }
        let (k0, c0) = &rows[i - 1];
        match (row(c0, &mut ln_x2), row(c1, &mut ln_x2)) {
            (Some(y0), Some(y1)) => (self.across(*k0, y0, *k1, y1, x1), c0.covers(x2) && c1.covers(x2)),
            // One row reaches x2: its reading carried across the other axis by the SOL ratio.
            (Some(y), None) => (bound.carry(y, &[*k0, x2], &[x1, x2]), false),
            (None, Some(y)) => (bound.carry(y, &[*k1, x2], &[x1, x2]), false),
            (None, None) => (held([x1, x2]), false),
        }
    }

    /// Every measured point, `[x1, x2]` and its time.
    fn points(&self) -> impl Iterator<Item = ([f64; 2], f64)> + '_ {
        self.rows.iter().flat_map(|(k, c)| c.xs.iter().zip(&c.ys).map(move |(x, y)| ([*k, *x], *y)))
    }

    /// The time at (x1, x2): each neighbouring row is read at x2, then the two are
    /// interpolated along x1 (proportionally beyond the last row, flat below the first).
    pub fn eval(&self, x1: f64, x2: f64) -> f64 {
        let rows = &self.rows;
        let n = rows.len();
        if x1 <= rows[0].0 {
            return rows[0].1.eval(x2);
        }
        if x1 >= rows[n - 1].0 {
            let (k, c) = &rows[n - 1];
            let y = c.eval(x2);
            return if *k > 0.0 { y * x1 / k } else { y };
        }
        let i = rows.partition_point(|r| r.0 < x1) - 1;
        let (k1, c1) = &rows[i + 1];
        if *k1 == x1 {
            return c1.eval(x2);
        }
        let (k0, c0) = &rows[i];
        let mut ln_x2 = None;
        let (y0, y1) = (c0.eval_ln(x2, &mut ln_x2), c1.eval_ln(x2, &mut ln_x2));
        self.across(*k0, y0, *k1, y1, x1)
    }
}

/// A table of either shape.
#[derive(Clone, Debug)]
pub enum Curve {
    One(Curve1),
    Two(Curve2),
}

impl Curve {
    /// Builds the lookup structure of a checked table.
    pub fn from_table(t: &OpTable) -> Curve {
        if t.axes.len() == 1 {
            Curve::One(Curve1::new(t.points.iter().map(|p| (p[0], p[1])).collect(), t.interp))
        } else {
            Curve::Two(Curve2::new(&t.points, t.interp))
        }
    }

    /// Builds a table from a subset of points with another interpolation (for held-out fits).
    pub fn from_points(points: &[Vec<f64>], axes: usize, interp: Interp) -> Curve {
        if axes == 1 {
            Curve::One(Curve1::new(points.iter().map(|p| (p[0], p[1])).collect(), interp))
        } else {
            Curve::Two(Curve2::new(points, interp))
        }
    }

    /// Evaluates at a point given as its axis values (one or two).
    pub fn eval_at(&self, x: &[f64]) -> f64 {
        match self {
            Curve::One(c) => c.eval(x[0]),
            Curve::Two(c) => c.eval(x[0], x[1]),
        }
    }

    /// The time at a point and whether it lies within the measured range, in one search.
    pub fn read(&self, x: &[f64]) -> (f64, bool) {
        match self {
            Curve::One(c) => (c.eval(x[0]), c.covers(x[0])),
            Curve::Two(c) => c.read(x[0], x[1]),
        }
    }

    /// [`Curve::read`], beyond the measured range along the op's bound (see [`Bound`]).
    pub fn read_bound(&self, x: &[f64], bound: &Bound) -> (f64, bool) {
        match self {
            Curve::One(c) if x[0] > c.max_x() => {
                let last = c.max_x();
                (bound.carry(c.eval(last), &[last], x), false)
            }
            Curve::One(c) => (c.eval(x[0]), c.covers(x[0])),
            Curve::Two(c) => c.read_bound(x[0], x[1], bound),
        }
    }

    /// Whether a point lies within the measured range (see [`Curve2::covers`]).
    pub fn covers(&self, x: &[f64]) -> bool {
        match self {
            Curve::One(c) => c.covers(x[0]),
            Curve::Two(c) => c.covers(x[0], x[1]),
        }
    }

    /// The measured range in words, for messages: `tokens 1–32768` or `rows 1–256, up to
    /// 16384 along the second axis`.
    pub fn range_text(&self, _op: &str) -> String {
        match self {
            Curve::One(c) => format!("{}–{}", c.min_x(), c.max_x()),
            Curve::Two(c) => {
                let (first, last) = (&c.rows[0], &c.rows[c.rows.len() - 1]);
                format!(
                    "{}–{} on the first axis; {}–{} on the second at the first, {}–{} at the last",
                    first.0,
                    last.0,
                    first.1.min_x(),
                    first.1.max_x(),
                    last.1.min_x(),
                    last.1.max_x()
                )
            }
        }
    }
}

/// Held-out error of `interp` on `points` (sorted, every 4th point of each row held out).
/// Returns None when too few points are left to fit or to test.
pub fn heldout_error(points: &[Vec<f64>], axes: usize, interp: Interp) -> Option<HeldOut> {
    let (fit, out) = holdout_split(points);
    if fit.is_empty() || out.is_empty() {
        return None;
    }
    let curve = Curve::from_points(&fit, axes, interp);
    let mut errs: Vec<f64> = out
        .iter()
        .filter(|p| p[axes] > 0.0)
        .map(|p| (curve.eval_at(&p[..axes]) - p[axes]).abs() / p[axes] * 100.0)
        .collect();
    if errs.is_empty() {
        return None;
    }
    errs.sort_by(f64::total_cmp);
    Some(HeldOut {
        interp,
        points: errs.len() as u64,
        median_pct: median_sorted(&errs),
        p90_pct: nearest_rank(&errs, 0.9),
        max_pct: *errs.last().expect("non-empty"),
    })
}

/// Averages points with equal axis values and sorts them.
fn dedupe(points: Vec<Vec<f64>>, axes: usize) -> Vec<Vec<f64>> {
    let mut groups: BTreeMap<Vec<u64>, (Vec<f64>, f64, f64)> = BTreeMap::new();
    for p in points {
        let key: Vec<u64> = p[..axes].iter().map(|v| v.to_bits()).collect();
        let e = groups.entry(key).or_insert((p[..axes].to_vec(), 0.0, 0.0));
        e.1 += p[axes];
        e.2 += 1.0;
    }
    let mut out: Vec<Vec<f64>> = groups
        .into_values()
        .map(|(mut x, sum, n)| {
            x.push(sum / n);
            x
        })
        .collect();
    out.sort_by(|a, b| {
        a.iter().zip(b.iter()).map(|(x, y)| x.total_cmp(y)).find(|o| o.is_ne()).unwrap_or(std::cmp::Ordering::Equal)
    });
    out
}

/// Builds an op's table: every candidate interpolation is fitted on all but every 4th point
/// (of each row) and scored on the held-out points; the lowest median error wins (then the
/// lowest P90; ties keep the order step, loglog, linear). The table keeps every point, and the
/// held-out errors of all candidates, the chosen one first.
pub fn fit_table(name: &str, tp: Option<u32>, axes: Vec<Axis>, points: Vec<Vec<f64>>) -> OpTable {
    let points = dedupe(points, axes.len());
    let mut scores: Vec<HeldOut> = Interp::ALL.iter().filter_map(|&i| heldout_error(&points, axes.len(), i)).collect();
    let best = scores
        .iter()
        .enumerate()
        .min_by(|(ia, a), (ib, b)| {
            a.median_pct.total_cmp(&b.median_pct).then(a.p90_pct.total_cmp(&b.p90_pct)).then(ia.cmp(ib))
        })
        .map(|(i, _)| i);
    let interp = match best {
        Some(i) => {
            let chosen = scores.remove(i);
            let interp = chosen.interp;
            scores.insert(0, chosen);
            interp
        }
        None => Interp::LogLog,
    };
    OpTable { name: name.to_string(), tp, axes, interp, points, dims: None, heldout: scores, source: None }
}

/// Says what the interpolation names mean, for a reader of the file.
pub const INTERP_NOTE: &str =
    "interp: step = time of the next measured point; loglog = linear in log-log; linear = linear; \
beyond the last point times grow in proportion, below the first they stay flat";

/// Adds [`INTERP_NOTE`] to a profile's notes once.
pub fn add_interp_note(notes: &mut Vec<String>) {
    if !notes.iter().any(|x| x == INTERP_NOTE) {
        notes.push(INTERP_NOTE.to_string());
    }
}

/// The median of sorted values (the mean of the middle two for an even count).
pub fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The nearest-rank percentile of sorted values: the smallest value with at least `q` of the
/// values at or below it.
pub fn nearest_rank(v: &[f64], q: f64) -> f64 {
    let k = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[k - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(pts: &[(f64, f64)], i: Interp) -> Curve1 {
        Curve1::new(pts.to_vec(), i)
    }

    #[test]
    fn one_axis_interpolations_by_hand() {
        let pts = [(1.0, 1.0), (4.0, 2.0), (16.0, 8.0)];
        // Linear: halfway between 4 and 16 is 10 → 5.
        assert_eq!(c(&pts, Interp::Linear).eval(10.0), 5.0);
        // Log-log: 8 is halfway between 4 and 16 in log space → sqrt(2 × 8) = 4.
        assert!((c(&pts, Interp::LogLog).eval(8.0) - 4.0).abs() < 1e-12);
        // Step: anything in (4, 16] costs what 16 costs; 4 itself costs what 4 costs.
        assert_eq!(c(&pts, Interp::Step).eval(5.0), 8.0);
        assert_eq!(c(&pts, Interp::Step).eval(4.0), 2.0);
        for i in Interp::ALL {
            // Below the first point: flat; above the last: proportional.
            assert_eq!(c(&pts, i).eval(0.5), 1.0);
            assert_eq!(c(&pts, i).eval(32.0), 16.0);
            // Every knot is reproduced exactly.
            for (x, y) in pts {
                assert_eq!(c(&pts, i).eval(x), y);
            }
        }
    }

    /// A table's points `[x1, x2, t]`, t = f(x1, x2).
    fn grid(rows: &[(f64, &[f64])], f: &dyn Fn(f64, f64) -> f64) -> Vec<Vec<f64>> {
        rows.iter().flat_map(|&(k, xs)| xs.iter().map(move |&x| vec![k, x, f(k, x)])).collect()
    }

    #[test]
    fn beyond_a_ragged_grid_times_follow_the_bound_as_aiconfigurator_reads_them() {
        // AIConfigurator's own fixture (perf_interp.rs tests, ai-dynamo/aiconfigurator
        // 095f58a51): t = 1e-6 · batch · seq² on a staircase; where its SOL is t itself the
        // util is 1 everywhere, and every read beyond the measured points is exact.
        let f = |b: f64, s: f64| 1e-6 * b * s * s;
        let stairs: [(f64, &[f64]); 4] = [
            (1.0, &[512.0, 1024.0, 2048.0, 4096.0]),
            (2.0, &[512.0, 1024.0, 2048.0, 4096.0]),
            (4.0, &[512.0, 1024.0, 2048.0]),
            (8.0, &[512.0, 1024.0]),
        ];
        let curve = Curve::Two(Curve2::new(&grid(&stairs, &f), Interp::Linear));
        let sol = |x: &[f64]| f(x[0], x[1]);
        let anchors = anchors(&curve, &sol);
        assert_eq!(anchors.len(), 13);
        let bound = Bound { sol: &sol, anchors: &anchors };
        for (b, s, what) in [
            (6.0, 2048.0, "between rows 4 and 8, only row 4 reaches 2048: carried by the SOL ratio"),
            (2.0, 8192.0, "beyond every row's sequences: the held util"),
            (16.0, 1024.0, "beyond the last row"),
            (3.0, 4096.0, "between rows 2 and 4, only row 2 reaches 4096"),
        ] {
            let (t, inside) = curve.read_bound(&[b, s], &bound);
            assert!((t / f(b, s) - 1.0).abs() < 1e-12, "{what}: {t} against {}", f(b, s));
            assert!(!inside, "{what}");
        }
        // Inside the grid the reading is the table's, and says so.
        assert_eq!(curve.read_bound(&[4.0, 2048.0], &bound), (f(4.0, 2048.0), true));
        // The old proportional rule would be 4× short at (2, 8192): t grows with seq².
        assert!((curve.eval_at(&[2.0, 8192.0]) / f(2.0, 8192.0) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn a_two_axis_hold_blends_the_four_nearest_utils_by_hand() {
        // SOL = x1 · x2; utils (SOL / t): (1,1) 1, (1,2) 2, (2,1) 2, (2,2) 1, (4,1) 2.
        let pts = vec![
            vec![1.0, 1.0, 1.0],
            vec![1.0, 2.0, 1.0],
            vec![2.0, 1.0, 1.0],
            vec![2.0, 2.0, 4.0],
            vec![4.0, 1.0, 2.0],
        ];
        let curve = Curve::Two(Curve2::new(&pts, Interp::Linear));
        let sol = |x: &[f64]| x[0] * x[1];
        let anchors = anchors(&curve, &sol);
        let bound = Bound { sol: &sol, anchors: &anchors };
        // (4, 4): the last row ends at 1. In log2 space the query is (2, 2): the four nearest
        // are (2,2) at √2, (4,1) at 2, (1,2) and (2,1) at √5; the fifth, (1,1) at √8, is the
        // support radius R. Weights ((R − d) / (R d))².
        let r = 8f64.sqrt();
        let w = |d: f64| ((r - d) / (r * d)).powi(2);
        let (w1, w2, w3) = (w(2f64.sqrt()), w(2.0), w(5f64.sqrt()));
        let util = (w1 * 1.0 + w2 * 2.0 + 2.0 * w3 * 2.0) / (w1 + w2 + 2.0 * w3);
        let (t, inside) = curve.read_bound(&[4.0, 4.0], &bound);
        assert!((t - 16.0 / util).abs() < 1e-12, "{t} against {}", 16.0 / util);
        assert!((t - 12.927).abs() < 1e-3 && !inside);
    }

    #[test]
    fn the_hold_walks_to_the_same_anchors_as_a_search_of_every_point() {
        // A staircase of 12 × up to 16 points with utils that vary, queried beyond it all over:
        // the walk out along the first axis must pick what sorting every point picks.
        let rows: Vec<(f64, Vec<f64>)> =
            (0..12).map(|i| (2f64.powi(i), (0..16 - i).map(|j| 2f64.powi(j + 1)).collect())).collect();
        let f = |b: f64, c: f64| 0.01 + 1e-6 * b * c * (1.0 + 0.3 * ((b * 7.0 + c).ln()).sin());
        let stairs: Vec<(f64, &[f64])> = rows.iter().map(|(k, xs)| (*k, xs.as_slice())).collect();
        let curve = Curve::Two(Curve2::new(&grid(&stairs, &f), Interp::LogLog));
        let sol = |x: &[f64]| x[0] * x[1];
        let anchors = anchors(&curve, &sol);
        let bound = Bound { sol: &sol, anchors: &anchors };
        let every = |x: &[f64]| {
            let q = [x[0].log2(), x[1].log2()];
            let mut d: Vec<(f64, f64)> =
                anchors.iter().map(|(a, u)| (((a[0] - q[0]).powi(2) + (a[1] - q[1]).powi(2)).sqrt(), *u)).collect();
            d.sort_by(|a, b| a.0.total_cmp(&b.0));
            let r = d[HOLD_ANCHORS].0;
            let w = |e: &(f64, f64)| ((r - e.0) / (r * e.0 + 1e-12)).powi(2);
            let util = d[..HOLD_ANCHORS].iter().map(|e| w(e) * e.1).sum::<f64>()
                / d[..HOLD_ANCHORS].iter().map(w).sum::<f64>();
            sol(x) / util
        };
        let mut n = 0;
        for b in [3.0, 100.0, 700.0, 2048.0, 5000.0] {
            for c in [3000.0, 20000.0, 70000.0, 300000.0] {
                let (t, inside) = curve.read_bound(&[b, c], &bound);
                assert!(t > 0.0);
                if let Some(h) = bound.hold(&[b, c]).filter(|_| !inside) {
                    assert!((h / every(&[b, c]) - 1.0).abs() < 1e-12, "({b}, {c}): {h} against {}", every(&[b, c]));
                    n += 1;
                }
            }
        }
        assert!(n >= 15, "{n} queries held");
    }

    #[test]
    fn a_one_axis_table_holds_its_last_points_util() {
        // t = 0.5 + x / 1000 ms, SOL = x / 1000: at 20,000, twice the last point's 10.5 ms (the
        // fixed 0.5 ms scales with it, as AIConfigurator's util hold does).
        let curve = Curve::One(Curve1::new(vec![(1000.0, 1.5), (10000.0, 10.5)], Interp::Linear));
        let sol = |x: &[f64]| x[0] / 1000.0;
        let bound = Bound { sol: &sol, anchors: &[] };
        assert_eq!(curve.read_bound(&[20000.0], &bound), (21.0, false));
        // Below the first point: flat.
        assert_eq!(curve.read_bound(&[10.0], &bound), (1.5, false));
        // A SOL of nothing (zero) leaves the last point's time.
        let none = |_: &[f64]| 0.0;
        assert_eq!(curve.read_bound(&[20000.0], &Bound { sol: &none, anchors: &[] }), (10.5, false));
    }

    #[test]
    fn duplicates_are_averaged_and_zero_x_reads_linearly() {
        let cv = c(&[(0.0, 1.0), (8.0, 3.0), (8.0, 5.0)], Interp::LogLog);
        assert_eq!(cv.len(), 2);
        assert_eq!(cv.eval(8.0), 4.0);
        // A segment starting at x = 0 has no logarithm: linear.
        assert_eq!(cv.eval(4.0), 2.5);
    }

    #[test]
    fn two_axis_table_reads_rows_then_across() {
        // t = batch × (1 + context / 100) on a 2 × 2 grid.
        let pts: Vec<Vec<f64>> =
            vec![vec![1.0, 100.0, 2.0], vec![1.0, 300.0, 4.0], vec![3.0, 100.0, 6.0], vec![3.0, 300.0, 12.0]];
        let t = Curve2::new(&pts, Interp::Linear);
        assert_eq!(t.eval(1.0, 200.0), 3.0);
        assert_eq!(t.eval(3.0, 200.0), 9.0);
        assert_eq!(t.eval(2.0, 200.0), 6.0);
        // Beyond the last row: proportional to the batch.
        assert_eq!(t.eval(6.0, 300.0), 24.0);
    }

    #[test]
    fn one_read_equals_eval_and_covers_everywhere() {
        // Rows of different ranges (as prefill attention's are), read on and between rows,
        // below, above and beyond both axes, with both interpolations.
        let pts: Vec<Vec<f64>> = vec![
            vec![1.0, 100.0, 2.0],
            vec![1.0, 300.0, 4.0],
            vec![2.0, 50.0, 3.0],
            vec![2.0, 200.0, 5.0],
            vec![4.0, 100.0, 6.0],
            vec![4.0, 400.0, 12.0],
        ];
        for interp in [Interp::Linear, Interp::LogLog] {
            let t = Curve2::new(&pts, interp);
            let mut outside = 0;
            for x1 in [0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0] {
                for x2 in [10.0, 50.0, 100.0, 150.0, 200.0, 300.0, 400.0, 500.0] {
                    let (y, inside) = t.read(x1, x2);
                    assert_eq!(y.to_bits(), t.eval(x1, x2).to_bits(), "({x1}, {x2})");
                    assert_eq!(inside, t.covers(x1, x2), "({x1}, {x2})");
                    outside += !inside as u32;
                }
            }
            // Between rows, cold and warm (the weight of a whole x1 is kept): the plain formula.
            for _ in 0..2 {
                for (x1, x2) in [(3.0, 150.0), (3.0, 120.0), (1.5, 150.0), (3.5, 400.0)] {
                    let i = t.rows.partition_point(|r| r.0 < x1) - 1;
                    let ((k0, c0), (k1, c1)) = (&t.rows[i], &t.rows[i + 1]);
                    let want = segment(interp, *k0, c0.eval(x2), *k1, c1.eval(x2), x1);
                    assert_eq!(t.read(x1, x2).0.to_bits(), want.to_bits(), "({x1}, {x2})");
                    assert_eq!(t.clone().eval(x1, x2).to_bits(), want.to_bits(), "({x1}, {x2})");
                }
            }
            // Inside: row 1 at 100–300 (4 of the x2), row 2 at 50–200 (4), row 4 at 100–400 (5);
            // between rows 1 and 2 (x1 = 1.5) and rows 2 and 4 (x1 = 3) at 100–200 (3 each).
            assert_eq!(7 * 8 - outside, 4 + 4 + 5 + 3 + 3);
        }
    }

    #[test]
    fn holdout_takes_every_fourth_point_of_each_row() {
        let pts: Vec<Vec<f64>> = (0..8).map(|i| vec![i as f64, 1.0]).collect();
        let (fit, out) = holdout_split(&pts);
        assert_eq!(out, vec![vec![3.0, 1.0], vec![7.0, 1.0]]);
        assert_eq!(fit.len(), 6);
        let rows: Vec<Vec<f64>> =
            [1.0, 2.0].iter().flat_map(|r| (0..4).map(move |i| vec![*r, i as f64, 1.0])).collect();
        let (_, out) = holdout_split(&rows);
        assert_eq!(out, vec![vec![1.0, 3.0, 1.0], vec![2.0, 3.0, 1.0]]);
    }

    #[test]
    fn heldout_error_by_hand() {
        // y = x on 1..=8: linear interpolation is exact inside; the held-out 8 lies beyond the
        // fitted range (last fitted 7) and is extrapolated proportionally: exact too.
        let pts: Vec<Vec<f64>> = (1..=8).map(|i| vec![i as f64, i as f64]).collect();
        let h = heldout_error(&pts, 1, Interp::Linear).unwrap();
        assert_eq!(h.points, 2);
        assert!(h.max_pct < 1e-9);
        // Step reads the held-out 4 as 5 (25% off) and 8 as 8·7/7 = 8 (exact).
        let h = heldout_error(&pts, 1, Interp::Step).unwrap();
        assert_eq!(h.max_pct, 25.0);
        assert_eq!(h.median_pct, 12.5);
        assert_eq!(h.p90_pct, 25.0);
    }

    #[test]
    fn percentiles() {
        let v: Vec<f64> = (1..=10).map(|i| i as f64).collect();
        assert_eq!(median_sorted(&v), 5.5);
        assert_eq!(nearest_rank(&v, 0.9), 9.0);
        assert_eq!(nearest_rank(&v[..1], 0.9), 1.0);
    }
}
