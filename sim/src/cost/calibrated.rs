//! A cost model corrected by factors fitted on a deployment's own measured runs
//! (`servesim calibrate fit`), and the calibration file that holds them.
//!
//! ```text
//!   the group's model:  iteration = GPU + CPU          (its own split: CostModel::cpu_time)
//!   split of the GPU:   C = the iteration's collectives (all-reduce, all-to-all)
//!                       D = the GPU time of its decodes alone, less their collectives
//!                       P = GPU − C − D: what its prefill chunks add
//!   calibrated:         GPU' = prefill·P + decode·D + collective·C
//!                       CPU' = max(0, CPU + host_base_us + host_per_seq_us × sequences)
//!                       (in series with the GPU or overlapped, as the group's engine runs it)
//!   the client:         each first and last token reaches it frontend_ms later
//! ```
//! All factors at their identity (1, 1, 1, 0, 0, 0) give the group's model exactly. Prefill is
//! the compute-bound part of an iteration (GEMMs over many tokens, causal attention), decode
//! the memory-bound part (the weights and each sequence's KV read once per step), so the two
//! scales correct a machine whose FLOP/s and bandwidth differ from those the kernels were
//! measured or modelled at; the collective scale corrects the interconnect (PCIe against
//! NVLink); the host terms the engine's CPU work per step; the frontend the path from the
//! client to the engine and back (HTTP, tokenization, detokenization, streaming).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{BatchShape, CostAccount, CostModel, Fallback, FallbackShare, PipelineShare, SeqWork};
use crate::config::{check, ConfigError};
use crate::time::SimTime;

/// `[factors]`: each factor's entry, in the order of [`FACTORS`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactorTable {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill: Option<FactorEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode: Option<FactorEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective: Option<FactorEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_base_us: Option<FactorEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_per_seq_us: Option<FactorEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontend_ms: Option<FactorEntry>,
}

impl FactorTable {
    /// Factor `i` (in the order of [`FACTORS`]).
    pub fn get(&self, i: usize) -> Option<&FactorEntry> {
        [&self.prefill, &self.decode, &self.collective, &self.host_base_us, &self.host_per_seq_us, &self.frontend_ms][i]
            .as_ref()
    }

    pub fn set(&mut self, i: usize, e: FactorEntry) {
        let slot = match i {
            0 => &mut self.prefill,
            1 => &mut self.decode,
            2 => &mut self.collective,
            3 => &mut self.host_base_us,
            4 => &mut self.host_per_seq_us,
            5 => &mut self.frontend_ms,
            _ => panic!("factor {i} out of range"),
        };
        *slot = Some(e);
    }
}

/// The calibration file format this build reads and writes.
pub const CALIBRATION_FORMAT: u32 = 1;

/// One correction factor: its name, identity, the bounds a file may give and the fit searches
/// (the fit's own bounds for the additive terms are tighter, see `calibration::fit`), and what
/// it means.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FactorInfo {
    pub name: &'static str,
    pub identity: f64,
    pub min: f64,
    pub max: f64,
    /// A scale (multiplies a time) rather than an added time.
    pub scale: bool,
    pub unit: &'static str,
    pub meaning: &'static str,
}

/// The six factors, in the order of [`Factors::get`].
pub const FACTORS: [FactorInfo; 6] = [
    FactorInfo {
        name: "prefill",
        identity: 1.0,
        min: 0.2,
        max: 5.0,
        scale: true,
        unit: "×",
        meaning: "scales the GPU time prefill chunks add to an iteration (compute-bound: GEMMs over many tokens, \
                  causal attention)",
    },
    FactorInfo {
        name: "decode",
        identity: 1.0,
        min: 0.2,
        max: 5.0,
        scale: true,
        unit: "×",
        meaning: "scales the GPU time of an iteration's decode steps (memory-bound: the weights and each \
                  sequence's KV read once per step)",
    },
    FactorInfo {
        name: "collective",
        identity: 1.0,
        min: 0.2,
        max: 5.0,
        scale: true,
        unit: "×",
        meaning: "scales the iteration's collectives (all-reduce, all-to-all between the GPUs of an instance)",
    },
    FactorInfo {
        name: "host_base_us",
        identity: 0.0,
        min: -100_000.0,
        max: 100_000.0,
        scale: false,
        unit: "µs",
        meaning: "CPU time added to every iteration (scheduling, input preparation, output processing), in series \
                  with the GPU or overlapped as the engine runs it",
    },
    FactorInfo {
        name: "host_per_seq_us",
        identity: 0.0,
        min: -10_000.0,
        max: 10_000.0,
        scale: false,
        unit: "µs",
        meaning: "CPU time added per sequence in an iteration",
    },
    FactorInfo {
        name: "frontend_ms",
        identity: 0.0,
        min: 0.0,
        max: 60_000.0,
        scale: false,
        unit: "ms",
        meaning: "latency added to every request on its way between the client and the engine (HTTP, \
                  tokenization, detokenization, streaming): TTFT and E2E grow by it, the gaps between tokens do not",
    },
];

/// The correction factors themselves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Factors {
    pub prefill: f64,
    pub decode: f64,
    pub collective: f64,
    pub host_base_us: f64,
    pub host_per_seq_us: f64,
    pub frontend_ms: f64,
}

impl Default for Factors {
    fn default() -> Self {
        Factors::IDENTITY
    }
}

impl Factors {
    /// No correction.
    pub const IDENTITY: Factors = Factors {
        prefill: 1.0,
        decode: 1.0,
        collective: 1.0,
        host_base_us: 0.0,
        host_per_seq_us: 0.0,
        frontend_ms: 0.0,
    };

    /// Factor `i` in the order of [`FACTORS`].
    pub fn get(&self, i: usize) -> f64 {
        [self.prefill, self.decode, self.collective, self.host_base_us, self.host_per_seq_us, self.frontend_ms][i]
    }

    pub fn set(&mut self, i: usize, v: f64) {
        match i {
            0 => self.prefill = v,
            1 => self.decode = v,
            2 => self.collective = v,
            3 => self.host_base_us = v,
            4 => self.host_per_seq_us = v,
            5 => self.frontend_ms = v,
            _ => panic!("factor {i} out of range"),
        }
    }

    /// Whether the cost model is left as it is (the frontend aside).
    pub fn costs_unchanged(&self) -> bool {
        (0..5).all(|i| self.get(i) == FACTORS[i].identity)
    }

    /// The delay the client sees on every first and last token.
    pub fn client_delay(&self) -> SimTime {
        SimTime((self.frontend_ms * 1e6).round().max(0.0) as u64)
    }
}

/// One factor as a calibration file holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactorEntry {
    pub value: f64,
    /// The range the fit's uncertainty gives (`calibration.uncertainty` says how).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high: Option<f64>,
    /// `fitted`, `confounded` (fitted, but its value also carries the effect of a factor the runs
    /// cannot tell from it), `unidentified` (the runs cannot tell it: left at its identity),
    /// `fixed` (not fitted, on request) or `given` (written by hand). Default `given`.
    #[serde(default = "given", skip_serializing_if = "is_given")]
    pub status: String,
    /// Why it has its status, in words (unidentified factors: what the runs lack).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What it means physically (written by the fit for the reader; ignored when read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meaning: Option<String>,
}

fn given() -> String {
    "given".into()
}

fn is_given(s: &str) -> bool {
    s == "given"
}

/// The statuses a factor may have.
pub const FACTOR_STATUSES: [&str; 5] = ["fitted", "confounded", "unidentified", "fixed", "given"];

/// A calibration file (`servesim calibrate fit --out CAL.toml`; `[cost] calibration`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    pub format: u32,
    /// The GPU preset (or `[gpu] name`) of the deployment it was fitted on.
    pub gpu: String,
    /// The serving engine (`vllm`, `sglang`, `trtllm`, or `unspecified` for a scenario that
    /// names none).
    pub engine: String,
    /// What priced the iterations it corrects: `database`, `profile`, `roofline` or `linear`.
    pub cost_source: String,
    /// The factors ([`FACTORS`]); a factor left out is at its identity.
    #[serde(default)]
    pub factors: FactorTable,
    /// How the fit was made and how well it did (written by `calibrate fit`, not read back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<toml::Table>,
}

impl Calibration {
    /// A calibration of `factors` for a deployment (all of them `given`).
    pub fn of(gpu: &str, engine: &str, cost_source: &str, factors: &Factors) -> Calibration {
        let mut table = FactorTable::default();
        for i in 0..FACTORS.len() {
            table.set(
                i,
                FactorEntry {
                    value: factors.get(i),
                    low: None,
                    high: None,
                    status: given(),
                    note: None,
                    meaning: None,
                },
            );
        }
        Calibration {
            format: CALIBRATION_FORMAT,
            gpu: gpu.into(),
            engine: engine.into(),
            cost_source: cost_source.into(),
            factors: table,
            fit: None,
        }
    }

    /// Parses and checks a calibration file's text; errors name the key (the caller adds the
    /// file).
    pub fn parse(text: &str) -> Result<Calibration, ConfigError> {
        let c: Calibration = crate::config::parse(text)?;
        c.validate()?;
        Ok(c)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        check(
            self.format == CALIBRATION_FORMAT,
            "",
            "format",
            &format!("must be {CALIBRATION_FORMAT} (the calibration format this build reads)"),
            self.format,
        )?;
        for (key, v) in [("gpu", &self.gpu), ("engine", &self.engine)] {
            check(!v.trim().is_empty(), "", key, "must not be empty", "\"\"")?;
        }
        check(
            COST_SOURCES.contains(&self.cost_source.as_str()),
            "",
            "cost_source",
            &format!("must be one of {}", COST_SOURCES.join(", ")),
            format!("{:?}", self.cost_source),
        )?;
        for (i, f) in FACTORS.iter().enumerate() {
            let Some(e) = self.factors.get(i) else { continue };
            let path = format!("factors.{}", f.name);
            let range = format!("must be in [{}, {}] {}", f.min, f.max, f.unit);
            for (key, v) in [("value", Some(e.value)), ("low", e.low), ("high", e.high)] {
                if let Some(v) = v {
                    let shown = crate::config::shown(v);
                    check(v.is_finite() && (f.min..=f.max).contains(&v), &path, key, &range, shown)?;
                }
            }
            if let (Some(lo), Some(hi)) = (e.low, e.high) {
                check(lo <= e.value && e.value <= hi, &path, "low", "must be ≤ value ≤ high", lo)?;
            }
            check(
                FACTOR_STATUSES.contains(&e.status.as_str()),
                &path,
                "status",
                &format!("must be one of {}", FACTOR_STATUSES.join(", ")),
                format!("{:?}", e.status),
            )?;
        }
        Ok(())
    }

    /// The factors' values (identity for those left out).
    pub fn factors(&self) -> Factors {
        let mut f = Factors::IDENTITY;
        for i in 0..FACTORS.len() {
            if let Some(e) = self.factors.get(i) {
                f.set(i, e.value);
            }
        }
        f
    }

    /// Why this calibration does not apply to a group on `gpu` under `engine` priced by
    /// `source`, naming both deployments (`None`: it applies).
    pub fn mismatch(&self, gpu: &str, engine: &str, source: &str) -> Option<String> {
        let ours = (self.gpu.as_str(), self.engine.as_str(), self.cost_source.as_str());
        if ours == (gpu, engine, source) {
            return None;
        }
        Some(format!(
            "it was fitted on {} under {} priced by {}, this is {gpu} under {engine} priced by {source}: \
             a calibration corrects one GPU, engine and cost source (fit one on runs of this deployment)",
            self.gpu, self.engine, self.cost_source
        ))
    }
}

/// What may price the iterations a calibration corrects.
pub const COST_SOURCES: [&str; 4] = ["database", "profile", "roofline", "linear"];

/// The group's cost model with a calibration's factors applied (see the module's text).
pub struct Calibrated {
    inner: Arc<dyn CostModel>,
    f: Factors,
}

impl Calibrated {
    pub fn new(inner: Arc<dyn CostModel>, f: Factors) -> Calibrated {
        Calibrated { inner, f }
    }

    /// The calibrated (total, CPU) of an iteration whose model gave `(total, cpu)` and its
    /// collectives `coll`, the decodes alone `decode` (GPU time, collectives), for `seqs`
    /// sequences. Times in ns.
    fn apply(
        &self,
        (total, cpu): (SimTime, SimTime),
        coll: SimTime,
        decode: (f64, f64),
        seqs: u64,
    ) -> (SimTime, SimTime) {
        let cpu_ns = cpu.0.min(total.0) as f64;
        let gpu = (total.0 as f64 - cpu_ns).max(0.0);
        let coll = (coll.0 as f64).min(gpu);
        let d = (decode.0 - decode.1).clamp(0.0, gpu - coll);
        let p = gpu - coll - d;
        let f = &self.f;
        let gpu2 = f.prefill * p + f.decode * d + f.collective * coll;
        let cpu2 = (cpu_ns + (f.host_base_us + f.host_per_seq_us * seqs as f64) * 1e3).max(0.0);
        let cpu_out = SimTime(cpu2.round() as u64);
        let t = (gpu2 + cpu2).ceil();
        let t = if t.is_finite() { t.min(u64::MAX as f64 / 4.0) } else { u64::MAX as f64 / 4.0 };
        (SimTime((t as u64).max(1)), cpu_out)
    }

    /// The decodes of `b` alone.
    fn decodes_of(b: &BatchShape) -> BatchShape {
        BatchShape {
            decode_seqs: b.decode_seqs,
            decode_context_tokens: b.decode_context_tokens,
            sampled_seqs: b.decode_seqs,
            ..BatchShape::default()
        }
    }

    /// (GPU time, collectives) of the decodes of `b` alone, in ns, given the whole batch's.
    fn decode_part(
        &self,
        b: &BatchShape,
        whole: (SimTime, SimTime),
        coll: SimTime,
        seqs: Option<&[SeqWork]>,
    ) -> (f64, f64) {
        if b.decode_seqs == 0 {
            return (0.0, 0.0);
        }
        if b.prefill_seqs == 0 && b.prefill_tokens == 0 {
            return ((whole.0 .0 as f64 - whole.1 .0.min(whole.0 .0) as f64).max(0.0), coll.0 as f64);
        }
        let d = Calibrated::decodes_of(b);
        let (t, c) = match seqs {
            Some(s) => {
                let dec: Vec<SeqWork> = s.iter().filter(|w| !w.prefill).copied().collect();
                self.inner.iteration_times_of(&d, &dec, None)
            }
            None => self.inner.iteration_times(&d, None),
        };
        ((t.0 as f64 - c.0.min(t.0) as f64).max(0.0), self.inner.collective_time(&d).0 as f64)
    }

    fn calibrate(&self, b: &BatchShape, whole: (SimTime, SimTime), seqs: Option<&[SeqWork]>) -> (SimTime, SimTime) {
        let f = &self.f;
        if b.is_empty() || f.costs_unchanged() {
            return whole;
        }
        // Parts that share one scale need not be told apart.
        let coll = if f.collective == f.prefill && f.collective == f.decode {
            SimTime::ZERO
        } else {
            self.inner.collective_time(b)
        };
        let decode = if f.prefill == f.decode { (0.0, 0.0) } else { self.decode_part(b, whole, coll, seqs) };
        self.apply(whole, coll, decode, b.seqs())
    }
}

impl CostModel for Calibrated {
    fn iteration_time(&self, b: &BatchShape) -> SimTime {
        self.iteration_times(b, None).0
    }

    fn wants_seqs(&self) -> bool {
        self.inner.wants_seqs()
    }

    fn iteration_time_of(&self, b: &BatchShape, seqs: &[SeqWork]) -> SimTime {
        self.iteration_times_of(b, seqs, None).0
    }

    fn iteration_times_of(
        &self,
        b: &BatchShape,
        seqs: &[SeqWork],
        acc: Option<&mut CostAccount>,
    ) -> (SimTime, SimTime) {
        let whole = self.inner.iteration_times_of(b, seqs, acc);
        self.calibrate(b, whole, Some(seqs))
    }

    fn accounts(&self) -> bool {
        self.inner.accounts()
    }

    fn iteration_time_accounted(&self, b: &BatchShape, acc: &mut CostAccount) -> SimTime {
        self.iteration_times(b, Some(acc)).0
    }

    fn fallbacks(&self) -> Vec<Fallback> {
        self.inner.fallbacks()
    }

    fn shares(&self, acc: &CostAccount) -> Vec<FallbackShare> {
        self.inner.shares(acc)
    }

    fn pipeline(&self, acc: &CostAccount) -> Option<PipelineShare> {
        self.inner.pipeline(acc)
    }

    fn cpu_time(&self, b: &BatchShape) -> SimTime {
        self.iteration_times(b, None).1
    }

    fn collective_time(&self, b: &BatchShape) -> SimTime {
        let c = self.inner.collective_time(b);
        SimTime((c.0 as f64 * self.f.collective).round() as u64)
    }

    fn iteration_times(&self, b: &BatchShape, acc: Option<&mut CostAccount>) -> (SimTime, SimTime) {
        let whole = self.inner.iteration_times(b, acc);
        self.calibrate(b, whole, None)
    }

    /// The inner model's lock-step time, its parts told apart over the ranks' batches as one.
    fn dp_iteration_times(&self, ranks: &[BatchShape], acc: Option<&mut CostAccount>) -> (SimTime, SimTime) {
        let whole = self.inner.dp_iteration_times(ranks, acc);
        self.calibrate(&BatchShape::union(ranks), whole, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::{Roofline, RooflineParams};
    use crate::spec::{Dtype, GpuPreset, ModelPreset, ModelSpec};

    fn roofline(tp: u64) -> Arc<dyn CostModel> {
        let m = ModelSpec::from_preset(ModelPreset::find("llama-3-8b").unwrap(), Dtype::Bf16, Dtype::Bf16);
        let g = GpuPreset::find("h100-sxm").unwrap().spec();
        Arc::new(Roofline::new(m, g, tp, RooflineParams::default()))
    }

    fn mixed() -> BatchShape {
        let mut b = BatchShape::default();
        b.add_prefill(512, 0, true);
        for _ in 0..16 {
            b.add_decode(1000);
        }
        b
    }

    #[test]
    fn identity_factors_give_the_model_exactly() {
        let inner = roofline(2);
        let c = Calibrated::new(inner.clone(), Factors::IDENTITY);
        for b in [mixed(), Calibrated::decodes_of(&mixed())] {
            assert_eq!(c.iteration_times(&b, None), inner.iteration_times(&b, None));
        }
    }

    #[test]
    fn each_factor_scales_its_part_by_hand() {
        let inner = roofline(2);
        let b = mixed();
        let (t, cpu) = inner.iteration_times(&b, None);
        let gpu = (t.0 - cpu.0) as f64;
        let coll = inner.collective_time(&b).0 as f64;
        assert!(coll > 0.0 && coll < gpu, "TP 2 has all-reduces: {coll} of {gpu}");
        let d = Calibrated::decodes_of(&b);
        let (td, cd) = inner.iteration_times(&d, None);
        let dec = (td.0 - cd.0) as f64 - inner.collective_time(&d).0 as f64;
        let pre = gpu - coll - dec;
        assert!(pre > 0.0 && dec > 0.0);
        let f = Factors {
            prefill: 1.5,
            decode: 1.1,
            collective: 2.5,
            host_base_us: 3000.0,
            host_per_seq_us: 10.0,
            frontend_ms: 20.0,
        };
        let (t2, cpu2) = Calibrated::new(inner.clone(), f).iteration_times(&b, None);
        let want_cpu = cpu.0 as f64 + 3000e3 + 10e3 * 17.0;
        assert_eq!(cpu2, SimTime(want_cpu.round() as u64));
        let want = 1.5 * pre + 1.1 * dec + 2.5 * coll + want_cpu;
        assert!((t2.0 as f64 - want).abs() <= 1.0, "{} vs {want}", t2.0);
        // A decode-only batch has no prefill part; a TP 1 model no collectives.
        let one = roofline(1);
        assert_eq!(one.collective_time(&b), SimTime::ZERO);
        let (t1, c1) = one.iteration_times(&d, None);
        let only_decode = Factors { decode: 2.0, ..Factors::IDENTITY };
        let (t3, _) = Calibrated::new(one, only_decode).iteration_times(&d, None);
        assert!((t3.0 as f64 - (2.0 * (t1.0 - c1.0) as f64 + c1.0 as f64)).abs() <= 1.0);
    }

    #[test]
    fn files_parse_with_errors_naming_the_key() {
        let ok = "format = 1\ngpu = \"h100-sxm\"\nengine = \"vllm\"\ncost_source = \"database\"\n\
                  [factors]\nprefill = { value = 1.5 }\nfrontend_ms = { value = 20, low = 18, high = 22, status = \"fitted\" }\n";
        let c = Calibration::parse(ok).unwrap();
        let f = c.factors();
        assert_eq!((f.prefill, f.decode, f.frontend_ms), (1.5, 1.0, 20.0));
        let e = Calibration::parse(&ok.replace("1.5", "9")).unwrap_err().to_string();
        assert!(e.contains("factors.prefill.value: must be in [0.2, 5]") && e.contains("9"), "{e}");
        let e = Calibration::parse(&ok.replace("prefill =", "prefil =")).unwrap_err().to_string();
        assert!(e.contains("factors") && e.contains("prefil") && e.contains("prefill"), "{e}");
        let e = Calibration::parse(&ok.replace("\"database\"", "\"guess\"")).unwrap_err().to_string();
        assert!(e.contains("cost_source: must be one of database"), "{e}");
        let e = Calibration::parse(&ok.replace("format = 1", "format = 2")).unwrap_err().to_string();
        assert!(e.contains("format: must be 1"), "{e}");
        let m = c.mismatch("a100-80g", "vllm", "database").unwrap();
        assert!(m.contains("h100-sxm under vllm") && m.contains("a100-80g under vllm"), "{m}");
        assert!(c.mismatch("h100-sxm", "vllm", "database").is_none());
    }
}
