//! Entry points for fuzzing the parsers: each takes arbitrary bytes, must never panic, and
//! returns whether the input was accepted. The cargo-fuzz targets in `fuzz/` call these, and
//! `tests/it/fuzz_corpus.rs` replays the committed corpus and every past crash through them.

use std::sync::Arc;

use crate::cost::profile::Profile;
use crate::cost::Profiled;
use crate::scenario::Scenario;
use crate::spec::{Dtype, GpuPreset, ModelPreset, ModelSpec};
use crate::workload::trace::{self, Columns, TimeUnit, TraceFormat, TraceReplay, TraceSource, TraceSpec, Unsorted};

/// Events a fuzzed scenario runs for (its own `run.max_events` if lower).
pub const SCENARIO_EVENTS: u64 = 3_000;

/// A scenario file: parse and validate; then, if it has at most 64 instances, run it for at
/// most [`SCENARIO_EVENTS`] events with every invariant checked after each event, and check
/// conservation in its summary.
pub fn scenario(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else { return false };
    let Ok(mut s) = Scenario::from_toml(text, "fuzz") else { return false };
    if s.groups.iter().map(|g| g.count as u64).sum::<u64>() > 64 {
        return true;
    }
    s.run.max_events = s.run.max_events.min(SCENARIO_EVENTS);
    let mut sim = crate::engine::Simulation::new(&s);
    while sim.step() {
        sim.check_invariants();
    }
    let out = sim.finish();
    let c = &out.summary.requests;
    assert_eq!(c.arrived, c.finished + c.rejected + c.timed_out + c.lost + c.in_flight, "conservation: {c:?}");
    true
}

/// A trace file. The first byte picks the format and transforms; the rest is the file. The
/// whole trace is scanned, then replayed to the end.
pub fn trace(data: &[u8]) -> bool {
    let Some((&mode, body)) = data.split_first() else { return false };
    let format = match mode % 4 {
        0 => TraceFormat::Azure,
        1 => TraceFormat::Mooncake,
        2 => TraceFormat::Csv,
        _ => TraceFormat::Jsonl,
    };
    let mut spec = TraceSpec::plain(format, "fuzz");
    if matches!(format, TraceFormat::Csv | TraceFormat::Jsonl) {
        spec.columns = Some(Columns {
            arrival: Some("t".into()),
            prompt_tokens: Some("p".into()),
            output_tokens: Some("o".into()),
            session: (mode & 0x10 != 0).then(|| "s".into()),
            class: (mode & 0x20 != 0).then(|| "c".into()),
            hash_ids: (mode & 0x40 != 0).then(|| "h".into()),
            ..Columns::default()
        });
        spec.arrival_unit = Some(if mode & 0x80 != 0 { TimeUnit::Datetime } else { TimeUnit::S });
    }
    if mode & 0x04 != 0 {
        spec.unsorted = Unsorted::Sort;
        spec.reorder_window = 8;
    }
    if mode & 0x08 != 0 {
        spec.window_s = Some([0.5, 100.0]);
        spec.sample = Some(0.5);
        spec.speedup = Some(3.0);
        spec.max_prompt_tokens = Some(1000);
        spec.min_output_tokens = Some(2);
    }
    if spec.validate("fuzz").is_err() {
        return false;
    }
    spec.source = Some(TraceSource::from_bytes("fuzz", body.to_vec()));
    if trace::scan(&spec).is_err() {
        return false;
    }
    let Ok(mut replay) = TraceReplay::new(&spec, 1) else { return false };
    let mut ok = true;
    for r in &mut replay {
        match r {
            Ok(req) => {
                let segment_tokens: u64 = req.content.iter().map(|s| s.tokens as u64).sum();
                assert!(segment_tokens <= req.prompt_tokens as u64, "content longer than the prompt");
                assert!(req.output_tokens >= 1, "a request without output tokens");
            }
            Err(_) => {
                ok = false;
                break;
            }
        }
    }
    ok
}

/// A cost profile file: parse, check, build the cost model for the model the profile says it
/// measured (so that valid profiles reach the cost model) on an H100, and price a few batches.
pub fn profile(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else { return false };
    let Ok(p) = Profile::from_json(text) else { return false };
    let d = &p.meta.model;
    let mut model = ModelSpec::from_preset(ModelPreset::find("llama-3-8b").expect("preset"), Dtype::Bf16, Dtype::Bf16);
    (model.hidden, model.heads, model.kv_heads, model.head_dim, model.intermediate, model.vocab) =
        (d.hidden, d.heads, d.kv_heads, d.head_dim, d.intermediate, d.vocab);
    let sane =
        [d.hidden, d.heads, d.kv_heads, d.head_dim, d.intermediate, d.vocab].iter().all(|&x| (1..1 << 24).contains(&x));
    if !sane || d.heads % d.kv_heads != 0 {
        return false;
    }
    let tp = p.meta.tp.first().copied().unwrap_or(1).clamp(1, 64) as u64;
    if d.heads % tp != 0 {
        return false;
    }
    // The GPU it was measured on (kernels of another GPU are refused), else an H100.
    let gpu = GpuPreset::of_device(&p.meta.gpu).or(GpuPreset::find("h100-sxm")).expect("preset").spec();
    let Ok(m) = Profiled::new(model, gpu, tp, Default::default(), &p) else { return false };
    let m: Arc<dyn crate::cost::CostModel> = Arc::new(m);
    for (prefill, decodes) in [(0u64, 1u64), (1, 0), (8192, 0), (512, 64), (0, 256)] {
        let mut b = crate::cost::BatchShape::default();
        if prefill > 0 {
            b.add_prefill(prefill, 0, true);
        }
        for _ in 0..decodes {
            b.add_decode(1000);
        }
        assert!(m.iteration_time(&b) > crate::SimTime::ZERO, "an iteration must take time");
    }
    true
}
