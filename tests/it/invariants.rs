//! Invariants checked after every event of varied runs (conservation, KV ownership, time), and
//! determinism of the outputs.

use crate::common::*;
use servesim_sim::engine::Simulation;

/// A small custom model on a small custom GPU, so that KV space runs out and preemption,
/// rejection and queueing all happen in a short run.
fn tiny(kv_gib: f64, workload: &str, extra: &str) -> String {
    format!(
        "[model]\nname = \"tiny\"\nlayers = 4\nhidden = 512\nheads = 8\nkv_heads = 2\nhead_dim = 64\n\
         intermediate = 1024\nvocab = 1000\nmax_context = 4096\n\
         [gpu]\nname = \"small\"\nbf16_tflops = 50\nhbm_gb_per_s = 200\nmemory_gib = {kv_gib}\n\
         interconnect_gb_per_s = 50\npcie_gb_per_s = 16\n\
         [memory]\nreserve_gib = 0\ngpu_memory_utilization = 1.0\n{extra}\n[workload]\n{workload}\n"
    )
}

fn check_every_event(src: &str) -> servesim_sim::engine::RunOutput {
    let out = run_checked(src);
    assert!(out.events > 0);
    for r in &out.recorder.records {
        if let Some(e2e) = r.e2e() {
            assert!(r.first_token <= r.finish && r.scheduled <= r.first_token && r.arrival <= r.scheduled);
            assert!(r.ttft().unwrap() <= e2e);
        }
    }
    out
}

#[test]
fn preemption_under_kv_pressure_conserves_requests_and_blocks() {
    // ~0.01 GiB of KV: 2 × 4 × 2 × 64 × 2 B = 2 KiB per token → a few hundred 16-token blocks.
    let weights_gib = 0.0; // the tiny model's weights are ~6 MB
    let src = tiny(
        0.02 + weights_gib,
        "duration_s = 60\narrival = { kind = \"poisson\", rate = 30 }\n\
         prompt_tokens = { kind = \"uniform\", min = 16, max = 900 }\n\
         output_tokens = { kind = \"uniform\", min = 1, max = 600 }",
        "[scheduler]\nmax_num_seqs = 64\nmax_num_batched_tokens = 2048",
    );
    let out = check_every_event(&src);
    assert!(out.summary.preemptions > 0, "the scenario must exercise preemption");
    assert_eq!(out.summary.requests.in_flight, 0);
    assert_eq!(out.summary.requests.finished + out.summary.requests.rejected, out.summary.requests.arrived);
}

#[test]
fn rejections_are_counted_with_their_reasons() {
    let src = tiny(
        0.02,
        "duration_s = 30\narrival = { kind = \"gamma\", rate = 10, cv = 4 }\n\
         prompt_tokens = { kind = \"uniform\", min = 1, max = 4000 }\n\
         output_tokens = { kind = \"uniform\", min = 1, max = 3000 }",
        "[scheduler]\nmax_num_batched_tokens = 2048",
    );
    let out = check_every_event(&src);
    let r = &out.summary.requests;
    let by = &r.rejected_by_reason;
    assert!(by["context_too_long"] > 0 && by["prompt_exceeds_batch_tokens"] > 0, "{by:?}");
    assert_eq!(by.values().sum::<u64>(), r.rejected);
    // Rejected requests count as SLO misses.
    assert!(out.summary.slo.attainment <= 1.0 - r.rejected as f64 / r.measured as f64 + 1e-12);
}

#[test]
fn closed_loop_and_phases_and_a_time_limit() {
    let src = tiny(
        0.05,
        "requests = 500\narrival = { kind = \"closed-loop\", clients = 20, think_time_s = 0.05 }\n\
         prompt_tokens = { kind = \"lognormal\", median = 200, p99 = 1500, max = 2000 }\n\
         output_tokens = { kind = \"lognormal\", median = 50, p99 = 500, max = 1000 }",
        "",
    );
    let out = check_every_event(&src);
    assert_eq!(out.summary.requests.arrived, 500);
    // A closed loop never has more requests in the system than clients.
    assert!(out.summary.batch.max <= 20);

    let src = tiny(
        0.05,
        "arrival = { kind = \"phases\", phases = [ { duration_s = 5, rate = 50 }, { duration_s = 5, rate = 400 }, { duration_s = 5, rate = 20, cv = 2 } ] }\n\
         prompt_tokens = { kind = \"fixed\", value = 100 }\noutput_tokens = { kind = \"fixed\", value = 100 }",
        "[run]\nmax_time_s = 12",
    );
    let out = check_every_event(&src);
    assert!(out.summary.requests.in_flight > 0, "the time limit cuts the run short");
    assert!(out.summary.simulated_s <= 12.0 + 1e-9);
}

#[test]
fn failures_retries_and_autoscaling_keep_every_invariant() {
    // Crashes and hangs (random and scheduled), retries and losses, an autoscaler adding and
    // draining instances, KV pressure and preemption, a queue timeout: after every event, every
    // request is held once, stranded on a crashed instance, or done; every block is owned
    // right; the routers' view agrees with the fleet's phases.
    let workload = "arrival = { kind = \"phases\", phases = [ { duration_s = 20, rate = 20 }, { duration_s = 20, rate = 80 }, { duration_s = 30, rate = 10 } ] }\n\
         prompt_tokens = { kind = \"uniform\", min = 16, max = 900 }\n\
         output_tokens = { kind = \"uniform\", min = 1, max = 300 }";
    for (router, on_failure, timeout) in [
        ("round-robin", "retry", ""),
        ("least-outstanding", "lose", ""),
        ("session-affinity", "retry", "admission = { queue_timeout_s = 4 }\n"),
        ("power-of-two", "retry", ""),
        ("random", "retry", ""),
        ("least-kv-usage", "retry", ""),
    ] {
        let src = tiny(
            0.02,
            workload,
            &format!(
                "[cluster]\ninstances = 3\nrouter = {{ kind = \"{router}\" }}\n\
                 [scheduler]\nmax_num_seqs = 64\nmax_num_batched_tokens = 2048\n{timeout}\
                 [fleet]\ninit_s = 2\ndetection_s = 1\nhang_detection_s = 2\non_failure = \"{on_failure}\"\nmax_retries = 1\n\
                 [fleet.failures]\nmtbf_s = 15\nmttr_s = 2\nhang_fraction = 0.4\n\
                 [[fleet.failures.events]]\nat_s = 21\ninstance = 0\nkind = \"hang\"\n\
                 [fleet.autoscale]\nmin = 2\nmax = 6\ninterval_s = 2\nscale_down_cooldown_s = 10\n\
                 signals = [ {{ kind = \"queue\", target = 2 }}, {{ kind = \"request-rate\", target_rps = 15, window_s = 5 }} ]\n"
            ),
        );
        let out = check_every_event(&src);
        let (r, f) = (&out.summary.requests, &out.summary.fleet);
        assert!(f.failures >= 3 && f.restarts >= 1, "{router}: failures happen and heal: {f:?}");
        assert!(f.scale_ups >= 1 && f.scale_downs >= 1, "{router}: the autoscaler acts both ways: {f:?}");
        assert!(f.retries + f.lost > 0, "{router}: requests were caught by failures");
        assert_eq!(r.lost, f.lost, "{router}");
        if on_failure == "lose" {
            assert!(r.lost > 0 && f.retries == 0, "{router}: {f:?}");
        }
        assert_eq!(r.in_flight, 0, "{router}: every request ends");
    }
}

#[test]
fn same_seed_gives_byte_identical_outputs_and_another_seed_differs() {
    let run_cli = |seed: &str, name: &str| {
        let dir = out_dir(name);
        let o = servesim(&[
            "simulate",
            "--scenario",
            "scenarios/chat.toml",
            "--seed",
            seed,
            "--out",
            dir.to_str().unwrap(),
            "--quiet",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        dir
    };
    let a = run_cli("11", "det_a");
    let b = run_cli("11", "det_b");
    let c = run_cli("12", "det_c");
    for f in ["requests.csv", "summary.json", "timeseries.csv", "scenario.toml"] {
        assert_eq!(
            std::fs::read(a.join(f)).unwrap(),
            std::fs::read(b.join(f)).unwrap(),
            "{f} differs between equal seeds"
        );
    }
    assert_ne!(read(&a.join("requests.csv")), read(&c.join("requests.csv")));
    // The resolved scenario records the seed that was used.
    assert!(read(&c.join("scenario.toml")).contains("seed = 12"));
}

#[test]
fn trace_replay_conserves_requests_and_blocks_after_every_event() {
    // Ten minutes of Mooncake's conversation trace played 4× faster, prompts clamped to the
    // tiny model's context, on a KV budget small enough to preempt.
    let src = tiny(
        0.03,
        "trace = { format = \"mooncake\", path = \"unused\", window_s = [0, 600], speedup = 4, \
         max_prompt_tokens = 3000, max_output_tokens = 500 }",
        "[scheduler]\nmax_num_seqs = 64\nmax_num_batched_tokens = 4096",
    );
    let mut s = scenario(&src);
    let bytes = std::fs::read(root().join("data/traces/mooncake_conversation_trace.jsonl")).unwrap();
    s.workload.trace.as_mut().unwrap().source =
        Some(servesim_sim::workload::trace::TraceSource::from_bytes("mooncake", bytes));
    let mut sim = Simulation::new(&s);
    let mut last = sim.now();
    while sim.step() {
        assert!(sim.now() >= last, "time went backwards");
        last = sim.now();
        sim.check_invariants();
    }
    assert!(sim.workload_error().is_none());
    let out = sim.finish();
    let c = &out.summary.requests;
    assert_eq!(c.arrived, c.finished + c.rejected + c.in_flight, "conservation");
    assert!(c.arrived > 1000, "{} requests in the window", c.arrived);
    assert!(out.summary.preemptions > 0, "the scenario must exercise preemption");
    assert!(out.recorder.records.iter().all(|r| r.prompt_tokens <= 3000 && r.output_tokens <= 500));
}

#[test]
fn every_router_on_a_heterogeneous_cluster_under_kv_pressure() {
    // Two small instances on the tiny GPU and one bigger, faster one with its own batch limit;
    // KV runs out, so requests are preempted and recomputed while routers read the load.
    for router in servesim_sim::scenario::RouterSpec::KINDS {
        let src = tiny(
            0.02,
            "duration_s = 40\narrival = { kind = \"poisson\", rate = 60 }\n\
             prompt_tokens = { kind = \"uniform\", min = 16, max = 900 }\n\
             output_tokens = { kind = \"uniform\", min = 1, max = 600 }",
            &format!(
                "[scheduler]\nmax_num_seqs = 64\nmax_num_batched_tokens = 2048\n\
                 [cluster]\nrouter = {{ kind = \"{router}\" }}\n\
                 [[cluster.groups]]\ncount = 2\n\
                 [[cluster.groups]]\ncount = 1\ngpu = {{ name = \"big\", bf16_tflops = 100, hbm_gb_per_s = 400, memory_gib = 0.04, interconnect_gb_per_s = 50, pcie_gb_per_s = 16 }}\n\
                 scheduler = {{ max_num_seqs = 32 }}"
            ),
        );
        let out = check_every_event(&src);
        assert!(out.summary.preemptions > 0, "{router}: the scenario must exercise preemption");
        assert_eq!(out.summary.requests.in_flight, 0, "{router}");
        let used: std::collections::BTreeSet<u32> = out.recorder.records.iter().map(|r| r.instance).collect();
        assert_eq!(used.len(), 3, "{router} uses every instance");
    }
}
