//! Emulation's seams in the simulator: the per-sequence view of an iteration agrees with its
//! aggregates, and durations an executor measures advance simulated time exactly as a cost
//! model's would.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::common::*;
use servesim_calibrate::emulate::{Emulator, Executor};
use servesim_sim::cost::{BatchShape, CostModel, SeqWork};
use servesim_sim::engine;
use servesim_sim::SimTime;

const WORKLOAD: &str = "requests = 300\narrival = { kind = \"poisson\", rate = 40 }\n\
    prompt_tokens = { kind = \"uniform\", min = 20, max = 900 }\noutput_tokens = { kind = \"uniform\", min = 1, max = 60 }";

/// A time that depends on every aggregate, so that any disagreement between views shows.
fn cost_of(b: &BatchShape) -> u64 {
    1_000_000
        + 3_000 * b.prefill_tokens
        + 7 * b.prefill_attn_pairs as u64
        + 50_000 * b.decode_seqs
        + 20 * b.decode_context_tokens
        + 11_000 * b.sampled_seqs
}

struct Aggregates;
impl CostModel for Aggregates {
    fn iteration_time(&self, b: &BatchShape) -> SimTime {
        SimTime(cost_of(b))
    }
}

/// Wants the sequences, checks they add up to the aggregates, prices them the same way.
struct Checking {
    iterations: AtomicU64,
}
impl CostModel for Checking {
    fn iteration_time(&self, _: &BatchShape) -> SimTime {
        panic!("a model that wants sequences gets them");
    }
    fn wants_seqs(&self) -> bool {
        true
    }
    fn iteration_time_of(&self, b: &BatchShape, seqs: &[SeqWork]) -> SimTime {
        assert_eq!(SeqWork::shape_of(seqs), *b, "{seqs:?}");
        let decodes = seqs.iter().take_while(|s| !s.prefill).count();
        assert!(seqs[decodes..].iter().all(|s| s.prefill), "decodes come first");
        self.iterations.fetch_add(1, Ordering::Relaxed);
        SimTime(cost_of(b))
    }
}

#[test]
fn the_sequence_view_agrees_with_the_aggregates_and_changes_nothing() {
    // A small model on 0.02 GiB of KV (a few hundred blocks): preemptions and recomputations
    // happen too.
    let s = scenario(&format!(
        "[model]\nname = \"tiny\"\nlayers = 4\nhidden = 512\nheads = 8\nkv_heads = 2\nhead_dim = 64\n\
         intermediate = 1024\nvocab = 1000\nmax_context = 4096\n\
         [gpu]\nname = \"small\"\nbf16_tflops = 50\nhbm_gb_per_s = 200\nmemory_gib = 0.02\n\
         interconnect_gb_per_s = 50\npcie_gb_per_s = 16\n\
         [memory]\nreserve_gib = 0\ngpu_memory_utilization = 1.0\n[scheduler]\nmax_num_seqs = 32\n[workload]\n{WORKLOAD}\n"
    ));
    let plain = engine::try_run_with_cost(&s, &|_| Arc::new(Aggregates)).unwrap();
    let checking = Arc::new(Checking { iterations: AtomicU64::new(0) });
    let c = checking.clone();
    let viewed = engine::try_run_with_cost(&s, &|_| c.clone() as Arc<dyn CostModel>).unwrap();
    assert!(plain.summary.preemptions > 0, "the scenario should preempt");
    assert_eq!(plain.summary, viewed.summary);
    assert_eq!(plain.recorder.records, viewed.recorder.records);
    assert_eq!(checking.iterations.load(Ordering::Relaxed), plain.summary.iterations);
}

/// An executor whose "measured" time is a known function of the batch.
struct FakeExecutor {
    runs: Arc<AtomicU64>,
}
impl Executor for FakeExecutor {
    fn describe(&self) -> String {
        "fake".into()
    }
    fn prepare(&mut self, _: &[SeqWork]) -> Result<(), servesim_calibrate::Error> {
        Ok(())
    }
    fn run(&mut self, seqs: &[SeqWork]) -> Result<u64, servesim_calibrate::Error> {
        // The three runs of an iteration measure x, x + 5, x − 5 µs: the median is x.
        let k = self.runs.fetch_add(1, Ordering::Relaxed) % 3;
        Ok(cost_of(&SeqWork::shape_of(seqs)) + [0, 5_000, 0][k as usize] - [0, 0, 5_000][k as usize])
    }
}

#[test]
fn measured_durations_advance_simulated_time_exactly() {
    let s = scenario(&llama8b(WORKLOAD, "[scheduler]\nmax_num_seqs = 16"));
    let runs = Arc::new(AtomicU64::new(0));
    let emu = Arc::new(Emulator::new(Box::new(FakeExecutor { runs: runs.clone() }), 3));
    let e = emu.clone();
    let emulated = engine::try_run_with_cost(&s, &|_| e.clone() as Arc<dyn CostModel>).unwrap();
    let modelled = engine::try_run_with_cost(&s, &|_| Arc::new(Aggregates)).unwrap();
    assert_eq!(emulated.recorder.records, modelled.recorder.records);
    assert_eq!(emulated.summary, modelled.summary);
    let log = emu.take_log();
    assert_eq!(log.len() as u64, modelled.summary.iterations);
    assert_eq!(runs.load(Ordering::Relaxed), 3 * log.len() as u64);
    assert!(log.iter().all(|l| l.ns == cost_of(&l.shape)));
    assert!(emu.error().is_none());
}

struct Failing;
impl Executor for Failing {
    fn describe(&self) -> String {
        "failing".into()
    }
    fn prepare(&mut self, _: &[SeqWork]) -> Result<(), servesim_calibrate::Error> {
        Ok(())
    }
    fn run(&mut self, _: &[SeqWork]) -> Result<u64, servesim_calibrate::Error> {
        Err(servesim_kernels::cuda::GpuError { op: "launch".into(), detail: "device lost".into() }.into())
    }
}

#[test]
fn an_execution_error_is_kept_for_the_caller() {
    let s = scenario(&llama8b("requests = 3\narrival = { kind = \"constant\", rate = 1 }\nprompt_tokens = { kind = \"fixed\", value = 10 }\noutput_tokens = { kind = \"fixed\", value = 2 }", ""));
    let emu = Arc::new(Emulator::new(Box::new(Failing), 1));
    let e = emu.clone();
    let out = engine::try_run_with_cost(&s, &|_| e.clone() as Arc<dyn CostModel>).unwrap();
    assert_eq!(out.summary.requests.finished, 3);
    let kept = emu.error().expect("the error is kept");
    assert!(matches!(kept, servesim_calibrate::Error::Gpu(_)), "{kept:?}");
    assert_eq!(kept.to_string(), "launch: device lost");
}
