//! `servesim validate --scenario S --backend B [--loads ...]`: capacity, then each load emulated
//! (every iteration executed) and predicted (profiled and roofline cost models) on the identical
//! request stream.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use servesim_calibrate::emulate::{Emulator, IterationLog};
use servesim_sim::cost::{BatchShape, CostModel, Profiled};
use servesim_sim::engine::{self, RunOutput};
use servesim_sim::metrics::compare::{outcomes_of, run_metrics, RunMetrics};
use servesim_sim::metrics::Status;
use servesim_sim::workload::ArrivalSpec;
use servesim_sim::{Scenario, SimTime};

use super::iterations::{op_rows, OpRow};
use super::report::{self, CapacityReport, IterationErrors, LoadReport, PooledErrors, RunsReport};
use super::{emulator, interleave, take_back, with_profile, Args, BackendKind, OutFormat, Predictor};
use crate::error::{CliError, Result};
use crate::output;

/// What load 1.0 stands for, in words (for the report and the docs).
pub(super) const CAPACITY_DEFINITION: &str = "saturation throughput: every request of the workload queued at time 0 \
(same lengths, same seed); completions per second between the S-th and the (N−S)-th completion \
(S = max_num_seqs, N = requests), which leaves out the first wave and the drain (10th to 90th \
percentile completion when N ≤ 4S)";

/// A rate the saturation run arrives at: 1 µs apart, all queued before the first iteration ends.
const SATURATION_RPS: f64 = 1e6;

fn check_workload(s: &Scenario, path: &Path) -> Result<()> {
    let w = &s.workload;
    let bad = |msg: &str| Err(CliError::input(format!("{}: {msg}", path.display())));
    if w.requests.is_none() {
        return bad("workload.requests: validate needs a request count (each load replays that many requests)");
    }
    match (&w.arrival, &w.trace) {
        (Some(ArrivalSpec::Poisson(_) | ArrivalSpec::Gamma(_) | ArrivalSpec::Constant(_)), _) | (None, Some(_)) => {
            Ok(())
        }
        _ => bad("workload.arrival: validate sets the arrival rate to fractions of capacity; use a poisson, gamma or \
             constant arrival (or a trace)"),
    }
}

/// The scenario with its arrival rate set to `rate` (a trace is rescaled to that mean rate),
/// ended by its request count only.
pub(super) fn with_rate(s: &Scenario, rate: f64) -> Scenario {
    let mut s = s.clone();
    match s.workload.arrival.as_mut() {
        Some(ArrivalSpec::Poisson(p)) => p.rate = rate,
        Some(ArrivalSpec::Gamma(g)) => g.rate = rate,
        Some(ArrivalSpec::Constant(c)) => c.rate = rate,
        _ => {}
    }
    if let Some(t) = s.workload.trace.as_mut() {
        t.target_rate = Some(rate);
        t.speedup = None;
    }
    s.workload.duration_s = None;
    s.resolved.workload = s.workload.clone();
    s
}

/// Completions per second at saturation (see [`CAPACITY_DEFINITION`]).
pub(super) fn capacity_of(out: &RunOutput, max_seqs: u64) -> Option<f64> {
    let mut done: Vec<SimTime> =
        out.recorder.records.iter().filter(|r| r.status == Status::Finished).map(|r| r.finish).collect();
    done.sort_unstable();
    let n = done.len();
    if n < 4 {
        return None;
    }
    let s = max_seqs as usize;
    let (a, b) = if n > 4 * s { (s, n - s) } else { (n / 10, n - 1 - n / 10) };
    let dt = (done[b] - done[a]).as_secs_f64();
    (dt > 0.0).then(|| (b - a) as f64 / dt)
}

/// One emulated run: its output, its iterations, and the wall-clock seconds it took.
fn emulate(emu: &Arc<Emulator>, s: &Scenario) -> Result<(RunOutput, Vec<IterationLog>, f64)> {
    let start = Instant::now();
    let cost: Arc<dyn CostModel> = emu.clone();
    let out = engine::try_run_with_cost(s, &|_| cost.clone()).map_err(CliError::input)?;
    if let Some(e) = emu.error() {
        return Err(CliError::Other(anyhow::anyhow!("executing a batch failed: {e}")));
    }
    Ok((out, emu.take_log(), start.elapsed().as_secs_f64()))
}

fn predict(s: &Scenario) -> Result<RunOutput> {
    engine::try_run(s).map_err(CliError::input)
}

/// Per op, summed over the iterations `pick` selects: its time inside the executed passes
/// against the profiled model's (empty when the executor does not time ops).
fn op_table(log: &[IterationLog], model: &Profiled, pick: impl Fn(&BatchShape) -> bool) -> Vec<OpRow> {
    let (mut measured, mut predicted) = (BTreeMap::new(), BTreeMap::new());
    let mut total_ms = 0.0;
    for l in log.iter().filter(|l| !l.ops.is_empty() && pick(&l.shape)) {
        for &(name, ns) in &l.ops {
            match name {
                "pass" => total_ms += ns as f64 * 1e-6,
                _ => *measured.entry(name).or_default() += ns as f64 * 1e-6,
            }
        }
        for o in model.breakdown(&l.shape) {
            *predicted.entry(o.name).or_default() += o.seconds * 1e3;
        }
    }
    op_rows(&measured, total_ms, &predicted)
}

/// A cost model's signed error on each iteration a run emulated, percent.
fn signed_errors(log: &[IterationLog], m: &dyn CostModel) -> Vec<f64> {
    log.iter().map(|l| (m.iteration_time(&l.shape).0 as f64 - l.ns as f64) / l.ns as f64 * 100.0).collect()
}

/// The cost models' errors on the iterations a run emulated.
fn iteration_errors(log: &[IterationLog], profiled: &dyn CostModel, roofline: &dyn CostModel) -> IterationErrors {
    IterationErrors::new(log.len() as u64, &signed_errors(log, profiled), &signed_errors(log, roofline))
}

fn metrics(out: &RunOutput, s: &Scenario) -> RunMetrics {
    run_metrics(&outcomes_of(&out.recorder), &s.slo)
}

/// One emulated run and what it took.
struct Emulated {
    out: RunOutput,
    log: Vec<IterationLog>,
    wall_s: f64,
}

pub(super) fn run(a: &Args, backend: BackendKind, s: Scenario, out_dir: &Path) -> Result<()> {
    check_workload(&s, a.scenario.as_deref().expect("runs have a scenario"))?;
    for &l in &a.loads {
        if !(l.is_finite() && l > 0.0 && l <= 2.0) {
            return Err(CliError::input(format!("--loads: every load must be in (0, 2], got {l}")));
        }
    }
    let g = s.groups[0].clone();
    if g.tp > 1 {
        errln!("warning: TP {}: one GPU's shard is executed, without the all-reduce the prediction includes", g.tp);
    }
    std::fs::create_dir_all(out_dir)?;
    let emu = emulator(a, backend, &s)?;
    // Each op of the executed passes timed too (two clock reads per op), to show where an
    // error lies.
    emu.record_ops(true);
    let predictor = interleave(&emu, Predictor::new(a, backend, &s, &emu)?);
    let requests = s.workload.requests.expect("checked");
    let max_seqs = g.scheduler.max_num_seqs as u64;
    let sat = |x: &Scenario| with_rate(x, SATURATION_RPS);

    // Emulate each run (calibrating between its iterations: one calibration phase per run), then
    // predict each with its phase's profile, and with the pooled profile of every phase.
    let phase = |dir: &Path| predictor.lock().expect("predictor lock").phase(a, backend, &s, dir);
    let cap_dir = out_dir.join("capacity");
    let cap_emulated = match a.capacity {
        Some(_) => None,
        None => {
            a.progress(&format!("capacity   emulating {requests} requests queued at time 0"));
            let (out, log, wall_s) = emulate(&emu, &sat(&s))?;
            a.progress(&format!(
                "           {} iterations in {wall_s:.1} s: {:.3} req/s",
                log.len(),
                capacity_of(&out, max_seqs).unwrap_or(f64::NAN)
            ));
            let profile = phase(&cap_dir)?;
            Some((Emulated { out, log, wall_s }, profile))
        }
    };
    let capacity = match (a.capacity, &cap_emulated) {
        (Some(c), _) => c,
        (None, Some((e, _))) => capacity_of(&e.out, max_seqs).ok_or_else(|| {
            CliError::input("the capacity run finished fewer than 4 requests: raise workload.requests")
        })?,
        (None, None) => unreachable!("emulated when not given"),
    };
    let load_dir = |load: f64| out_dir.join(format!("load-{load:.2}"));
    let mut emulated = Vec::new();
    for &load in &a.loads {
        let rate = load * capacity;
        a.progress(&format!("load {load:.2}  {rate:.3} req/s: emulating {requests} requests"));
        let (out, log, wall_s) = emulate(&emu, &with_rate(&s, rate))?;
        a.progress(&format!("           {} iterations in {wall_s:.1} s", log.len()));
        let profile = phase(&load_dir(load))?;
        emulated.push((Emulated { out, log, wall_s }, profile));
    }
    let (pooled, source) = take_back(&emu, predictor).finish(a, backend, &s, out_dir)?;
    if let Some(t) = source.calibrated_s {
        a.progress(&format!("profile    {} (calibrated in {t:.1} s in all)", source.path.display()));
    }
    // A calibrated command compares each run with its own phase's profile and the pooled one;
    // a given profile is all three.
    let calibrated = source.calibrated_s.is_some();
    let (pooled_s, roofline_s) = with_profile(&s, &pooled, &source.path)?;
    let roofline = engine::cost_model(&roofline_s, 0);
    let pooled_model = engine::cost_model(&pooled_s, 0);

    let cap_p = match &cap_emulated {
        Some((_, (profile, src))) => with_profile(&s, profile, &src.path)?.0,
        None => pooled_s.clone(),
    };
    let p = predict(&sat(&cap_p))?;
    let r = predict(&sat(&roofline_s))?;
    output::write_run(&cap_dir.join("predicted"), &sat(&cap_p), &p.summary, &p.recorder)?;
    output::write_run(&cap_dir.join("roofline"), &sat(&roofline_s), &r.summary, &r.recorder)?;
    if let Some((e, _)) = &cap_emulated {
        output::write_run(&cap_dir.join("emulated"), &sat(&s), &e.out.summary, &e.out.recorder)?;
    }
    let capacity_report = CapacityReport::new(
        capacity,
        a.capacity.is_some(),
        capacity_of(&p, max_seqs),
        capacity_of(&r, max_seqs),
        requests,
    );

    let mut loads = Vec::new();
    for (&load, (e, (profile, src))) in a.loads.iter().zip(&emulated) {
        let rate = load * capacity;
        let dir = load_dir(load);
        let sp = with_profile(&s, profile, &src.path)?.0;
        let profiled = engine::cost_model(&sp, 0);
        let model = super::profiled(&s, 0, profile, &src.path)?;
        let ops = op_table(&e.log, &model, |_| true);
        let decode_ops = op_table(&e.log, &model, |b| b.prefill_seqs == 0);
        let (se, spl, srl) = (with_rate(&s, rate), with_rate(&sp, rate), with_rate(&roofline_s, rate));
        let (p, r) = (predict(&spl)?, predict(&srl)?);
        output::write_run(&dir.join("emulated"), &se, &e.out.summary, &e.out.recorder)?;
        output::write_run(&dir.join("predicted"), &spl, &p.summary, &p.recorder)?;
        output::write_run(&dir.join("roofline"), &srl, &r.summary, &r.recorder)?;
        write_iterations(&dir.join("emulated").join("iterations.csv"), &e.log, profiled.as_ref(), roofline.as_ref())?;
        let pooled = if calibrated {
            let spp = with_rate(&pooled_s, rate);
            let pp = predict(&spp)?;
            output::write_run(&dir.join("predicted-pooled"), &spp, &pp.summary, &pp.recorder)?;
            let rows = report::report_rows(&metrics(&e.out, &s), &metrics(&pp, &s), None);
            Some(PooledErrors::new(&rows, report::ErrorStats::of(&signed_errors(&e.log, pooled_model.as_ref()))))
        } else {
            None
        };
        loads.push(LoadReport::new(
            load,
            rate,
            metrics(&e.out, &s),
            metrics(&p, &s),
            metrics(&r, &s),
            iteration_errors(&e.log, profiled.as_ref(), roofline.as_ref()),
            pooled,
            ops,
            decode_ops,
            e.out.summary.preemptions,
            e.wall_s,
        ));
    }

    let rep = RunsReport::new(
        &s,
        backend.name(),
        emu.describe(),
        if backend == BackendKind::Cpu { a.clock().name() } else { "host wall clock, stream synchronised" },
        a.repeat(),
        &source,
        capacity_report,
        loads,
    );
    let json = serde_json::to_string_pretty(&rep).expect("report serialises");
    crate::atomic::write(&out_dir.join("validate.json"), json.clone() + "\n")?;
    let csv = report::runs_csv(&rep);
    crate::atomic::write(&out_dir.join("validate.csv"), &csv)?;
    if !a.quiet {
        match a.format {
            OutFormat::Json => outln!("{json}"),
            OutFormat::Csv => out!("{csv}"),
            OutFormat::Table => {
                out!("{}", report::runs_table(&rep));
                outln!("outputs     {}/", out_dir.display());
            }
        }
    }
    Ok(())
}

/// Each emulated iteration: its shape, measured time and both models' predictions.
fn write_iterations(
    path: &Path,
    log: &[IterationLog],
    profiled: &dyn CostModel,
    roofline: &dyn CostModel,
) -> Result<()> {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(
        w,
        "iteration,decode_seqs,decode_context_tokens,prefill_seqs,prefill_tokens,prefill_cached_tokens,measured_ms,profiled_ms,roofline_ms"
    )?;
    for (i, l) in log.iter().enumerate() {
        let b = &l.shape;
        writeln!(
            w,
            "{i},{},{},{},{},{},{},{},{}",
            b.decode_seqs,
            b.decode_context_tokens,
            b.prefill_seqs,
            b.prefill_tokens,
            b.prefill_cached_tokens,
            output::ms(SimTime(l.ns)),
            output::ms(profiled.iteration_time(b)),
            output::ms(roofline.iteration_time(b))
        )?;
    }
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(arrival: &str) -> Scenario {
        let src = format!(
            "[model]\npreset = \"llama-3-8b\"\n[gpu]\npreset = \"h100-sxm\"\n[workload]\nrequests = 50\nduration_s = 10\n\
             arrival = {arrival}\nprompt_tokens = {{ kind = \"fixed\", value = 100 }}\noutput_tokens = {{ kind = \"fixed\", value = 10 }}\n"
        );
        Scenario::from_toml(&src, "t").unwrap()
    }

    #[test]
    fn rates_are_set_and_the_request_count_ends_the_run() {
        let s = with_rate(&scenario("{ kind = \"gamma\", rate = 1, cv = 2 }"), 7.5);
        assert_eq!(
            s.workload.arrival,
            Some(ArrivalSpec::Gamma(servesim_sim::workload::arrival::GammaArrival { rate: 7.5, cv: 2.0 }))
        );
        assert_eq!(s.workload.duration_s, None);
        assert_eq!(s.resolved.workload, s.workload);
        assert!(check_workload(&scenario("{ kind = \"closed-loop\", clients = 2 }"), Path::new("x.toml")).is_err());
    }

    #[test]
    fn capacity_leaves_out_the_first_wave_and_the_drain() {
        // 100 one-token requests queued at once on an instance of 10 sequences: the cost model
        // prices each iteration, so completions come in waves of 10 every iteration.
        let mut s = with_rate(&scenario("{ kind = \"poisson\", rate = 1 }"), SATURATION_RPS);
        s.workload.requests = Some(100);
        s.groups[0].scheduler.max_num_seqs = 10;
        s.workload.output_tokens =
            Some(servesim_sim::workload::LengthDist::Fixed(servesim_sim::workload::length::Fixed { value: 1 }));
        let out = engine::run(&s);
        let mut t: Vec<SimTime> = out.recorder.records.iter().map(|r| r.finish).collect();
        t.sort_unstable();
        let c = capacity_of(&out, 10).unwrap();
        let expected = 80.0 / (t[90] - t[10]).as_secs_f64();
        assert!((c - expected).abs() < 1e-9 * expected, "{c} vs {expected}");
        // Ten per wave: 80 requests over the 8 waves between the 10th and the 90th completion.
        assert!(t[90] > t[10]);
    }
}
