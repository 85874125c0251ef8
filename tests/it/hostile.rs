//! Absurd but legal input ends with a correct result or a clear message, never a hang or a
//! crash: billion-token prompts, zero-length outputs, a million requests per second, a single
//! KV block, ten thousand instances; and every run has an event budget (`run.max_events`) and
//! the CLI a wall-clock limit (`--time-limit`), each ending the run with a message naming it.

use std::time::Instant;

use crate::common::*;
use servesim_sim::metrics::Status;

#[test]
fn billion_token_prompts_are_rejected_with_their_reason() {
    let out = run_checked(&llama8b(
        "requests = 50\narrival = { kind = \"poisson\", rate = 10 }\n\
         prompt_tokens = { kind = \"fixed\", value = 1000000000 }\noutput_tokens = { kind = \"fixed\", value = 10 }",
        "",
    ));
    let c = &out.summary.requests;
    assert_eq!((c.arrived, c.rejected), (50, 50), "{c:?}");
    // llama-3-8b's context is 8,192 tokens: longer prompt + output never fits.
    assert_eq!(c.rejected_by_reason.get("context_too_long"), Some(&50), "{:?}", c.rejected_by_reason);
    assert_eq!(out.summary.slo.attainment, 0.0);
}

#[test]
fn zero_length_outputs_are_refused_naming_the_key() {
    let path = scenario_file(
        &out_dir("hostile_zero_output"),
        "zero.toml",
        &llama8b(
            "requests = 10\narrival = { kind = \"poisson\", rate = 1 }\n\
             prompt_tokens = { kind = \"fixed\", value = 100 }\noutput_tokens = { kind = \"fixed\", value = 0 }",
            "",
        ),
    );
    let o = servesim(&["simulate", "--scenario", &path, "--quiet"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("workload.output_tokens") && err.lines().count() == 1, "{err}");
}

#[test]
fn a_million_requests_per_second_queue_up_and_all_finish() {
    // 20,000 requests in 20 ms on one H100: the queue holds nearly all of them at once.
    let out = run_checked(&llama8b(
        "requests = 20000\narrival = { kind = \"poisson\", rate = 1000000 }\n\
         prompt_tokens = { kind = \"uniform\", min = 10, max = 200 }\noutput_tokens = { kind = \"uniform\", min = 1, max = 20 }",
        "",
    ));
    let s = &out.summary;
    assert_eq!((s.requests.finished, s.requests.in_flight), (20000, 0));
    assert!(s.stopped.is_none());
    // Arrivals end after ~0.02 s; the last request waits for nearly all the others, so the
    // worst TTFT is close to the whole run's length.
    let span = out.recorder.records.iter().map(|r| r.finish.as_secs_f64()).fold(0.0, f64::max);
    assert!(span > 1.0 && s.ttft_ms.max > 0.8 * span * 1e3, "span {span} s, TTFT max {} ms", s.ttft_ms.max);
}

/// The memory (GiB) at which `base` leaves exactly `blocks` KV blocks (found by bisection on
/// the validated scenario, so the test does not restate the memory formula).
fn memory_for_blocks(base: &dyn Fn(f64) -> String, blocks: u64) -> f64 {
    let kv = |gib: f64| -> Option<u64> {
        servesim_sim::Scenario::from_toml(&base(gib), "t").ok().map(|s| s.groups[0].memory.kv_blocks)
    };
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    assert!(kv(hi).unwrap_or(0) > blocks);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        match kv(mid) {
            Some(k) if k > blocks => hi = mid,
            Some(k) if k == blocks => return mid,
            _ => lo = mid,
        }
    }
    panic!("no memory size gives {blocks} blocks");
}

#[test]
fn one_kv_block_serves_what_fits_and_rejects_the_rest() {
    let base = |gib: f64| {
        format!(
            "[model]\nname = \"tiny\"\nlayers = 2\nhidden = 256\nheads = 4\nkv_heads = 2\nhead_dim = 64\n\
             intermediate = 512\nvocab = 1000\nmax_context = 4096\n\
             [gpu]\nname = \"one-block\"\nbf16_tflops = 50\nhbm_gb_per_s = 200\nmemory_gib = {gib}\n\
             interconnect_gb_per_s = 50\npcie_gb_per_s = 16\n\
             [memory]\nreserve_gib = 0\ngpu_memory_utilization = 1.0\n\
             [workload]\nrequests = 300\narrival = {{ kind = \"poisson\", rate = 50 }}\n\
             prompt_tokens = {{ kind = \"uniform\", min = 1, max = 24 }}\noutput_tokens = {{ kind = \"uniform\", min = 1, max = 12 }}\n"
        )
    };
    let gib = memory_for_blocks(&base, 1);
    let out = run_checked(&base(gib));
    let s = &out.summary;
    assert_eq!(s.kv.blocks_total, 1);
    assert_eq!(s.requests.in_flight, 0);
    assert!(s.stopped.is_none());
    // A request runs only if its KV fits the block's 16 tokens: the prompt and every output
    // token but the last (which is sampled, never fed back). The rest can never run and must
    // be rejected, not preempted forever.
    for r in &out.recorder.records {
        let fits = r.prompt_tokens + r.output_tokens - 1 <= 16;
        match r.status {
            Status::Finished => assert!(fits, "{r:?} finished in one block"),
            _ => assert!(!fits, "{r:?} fits one block but did not finish"),
        }
    }
    assert!(s.requests.finished > 0 && s.requests.rejected > 0, "{:?}", s.requests);
}

#[test]
fn ten_thousand_instances() {
    let out = run(&llama8b(
        "requests = 30000\narrival = { kind = \"poisson\", rate = 3000 }\n\
         prompt_tokens = { kind = \"uniform\", min = 100, max = 1000 }\noutput_tokens = { kind = \"uniform\", min = 10, max = 100 }",
        "[cluster]\ninstances = 10000\nrouter = { kind = \"least-outstanding\" }",
    ));
    let s = &out.summary;
    assert_eq!((s.requests.finished, s.requests.in_flight), (30000, 0));
    // 30,000 requests over 10,000 instances, least-outstanding: nobody waits for another.
    assert!(s.queue_ms.p99 < 1.0, "queue p99 {} ms", s.queue_ms.p99);
    let mut per = vec![0u32; 10_000];
    for r in &out.recorder.records {
        per[r.instance as usize] += 1;
    }
    assert!(per.iter().filter(|&&n| n > 0).count() > 9_000, "most instances serve");
}

#[test]
fn the_event_budget_stops_a_run_and_says_so() {
    let src = llama8b(
        "requests = 5000\narrival = { kind = \"poisson\", rate = 200 }\n\
         prompt_tokens = { kind = \"fixed\", value = 500 }\noutput_tokens = { kind = \"fixed\", value = 200 }",
        "[run]\nmax_events = 700",
    );
    let out = run_checked(&src);
    let st = out.summary.stopped.as_ref().expect("stopped by the budget");
    assert_eq!((st.reason.as_str(), st.events, out.events), ("event_budget", 700, 700));
    let c = &out.summary.requests;
    assert!(c.in_flight > 0 && c.arrived < 5000, "{c:?}");
    // The CLI writes what it has, then exits with code 3 naming the key.
    let dir = out_dir("hostile_event_budget");
    let path = scenario_file(&dir, "budget.toml", &src);
    let o = servesim(&["simulate", "--scenario", &path, "--out", dir.join("out").to_str().unwrap(), "--quiet"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("run.max_events = 700"), "{}", stderr(&o));
    let summary = read(&dir.join("out/summary.json"));
    assert!(summary.contains("\"event_budget\""), "{summary}");
}

#[test]
fn the_wall_clock_limit_stops_a_long_command_with_a_message() {
    // Ten million requests: minutes of simulation; the limit stops it after about a second.
    let dir = out_dir("hostile_time_limit");
    let path = scenario_file(
        &dir,
        "long.toml",
        &llama8b(
            "requests = 10000000\narrival = { kind = \"closed-loop\", clients = 64 }\n\
             prompt_tokens = { kind = \"fixed\", value = 100 }\noutput_tokens = { kind = \"fixed\", value = 100 }",
            "",
        ),
    );
    let start = Instant::now();
    let o = servesim(&[
        "simulate",
        "--scenario",
        &path,
        "--out",
        dir.join("out").to_str().unwrap(),
        "--quiet",
        "--time-limit",
        "1",
    ]);
    let took = start.elapsed().as_secs_f64();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("wall-clock limit (--time-limit 1 s)"), "{}", stderr(&o));
    // A guard, not a benchmark: it must not run to the end of ten million requests.
    assert!(took < 120.0, "took {took} s");
    let bad = servesim(&["simulate", "--time-limit", "-3"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("-3"), "{}", stderr(&bad));
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    use std::process::{Command, Stdio};
    // `servesim plan | true`: the reader is gone before the table is printed.
    let mut child = Command::new(env!("CARGO_BIN_EXE_servesim"))
        .args(["plan", "--scenario", "scenarios/n-plus-1.toml", "--quiet", "--out"])
        .arg(out_dir("hostile_pipe"))
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("servesim runs");
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_ne!(out.status.code(), Some(101), "{err}");
}
