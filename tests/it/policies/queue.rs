//! Queue order: priority classes with aging, earliest deadline first, shortest-first orders,
//! length tiers, short-jump.

use super::*;
use servesim_sim::SimTime;

/// Two classes (70% class 0, 30% class 1): 30 s at 70% of capacity, 60 s at 130% (class 0
/// alone stays below capacity, class 1 cannot all be served), then 60 s at 40%.
const BURST: &str = "class_weights = [0.7, 0.3]\n\
    arrival = { kind = \"phases\", phases = [ { duration_s = 30, rate = 28 }, { duration_s = 60, rate = 52 }, \
    { duration_s = 60, rate = 16 } ] }\n\
    prompt_tokens = { kind = \"fixed\", value = 512 }\noutput_tokens = { kind = \"fixed\", value = 128 }";

fn max_queue_s(out: &RunOutput, class: u8) -> f64 {
    max(finished(out).filter(|r| r.class == class).map(|r| r.queue().unwrap().as_secs_f64()))
}

#[test]
fn aging_bounds_the_wait_of_the_lowest_class() {
    let strict = run(&h100("[scheduler.queue]\nkind = \"priority\"", BURST));
    let (s0, s1) = (max_queue_s(&strict, 0), max_queue_s(&strict, 1));
    eprintln!("max queueing delay, strict priority: class 0 {s0:.2} s, class 1 {s1:.2} s");
    // Strict priority: class 0 never waits long, class 1 waits out the whole overload.
    assert!(s0 < 1.0, "class 0 under strict priority: {s0}");
    assert!(s1 > 30.0, "class 1 starves during the burst: {s1}");
    for aging in [0.1, 0.2, 0.5] {
        let aged = run(&h100(&format!("[scheduler.queue]\nkind = \"priority\"\naging_per_s = {aging}"), BURST));
        let (a0, a1) = (max_queue_s(&aged, 0), max_queue_s(&aged, 1));
        eprintln!("aging {aging}/s: class 0 {a0:.2} s, class 1 {a1:.2} s");
        // A class-1 request overtakes class-0 requests that arrived more than 1 / aging
        // seconds after it: it waits at most that much longer than the worst class-0 wait
        // (plus the iteration in which the order is applied).
        assert!(a1 <= a0 + 1.0 / aging + 0.2, "class 1 {a1} s vs class 0 {a0} s + {} s", 1.0 / aging);
        assert!(a1 < s1 - 10.0);
        // The cost: class 0 now shares the overload.
        assert!(a0 > s0);
        assert_eq!(strict.summary.requests.finished, aged.summary.requests.finished);
    }
}

#[test]
fn earliest_deadline_first_with_one_target_is_fcfs() {
    // Every request has the same target: deadlines are in arrival order, so the order is FCFS.
    let fcfs = run(&h100("", BURST));
    let edf = run(&h100("[scheduler.queue]\nkind = \"edf\"\nttft_ms = [800]", BURST));
    assert_eq!(fcfs.summary.requests, edf.summary.requests);
    assert!(fcfs.recorder.records == edf.recorder.records, "EDF with one target admitted in another order than FCFS");
    // Without ttft_ms the target is [slo] ttft_ms, and a scenario without one is refused.
    let slo = format!("{}[slo]\nttft_ms = 800\n", h100("[scheduler.queue]\nkind = \"edf\"", BURST));
    assert!(run(&slo).recorder.records == edf.recorder.records);
    let err = servesim_sim::Scenario::from_toml(&h100("[scheduler.queue]\nkind = \"edf\"", BURST), "t").unwrap_err();
    assert_eq!(err.path, "scheduler.queue.ttft_ms", "{err}");
}

#[test]
fn earliest_deadline_first_bounds_the_wait_of_the_loose_class() {
    // Class 0 must start within 0.5 s, class 1 within 10 s. A class-1 request goes ahead of
    // class-0 requests that arrive more than 10 − 0.5 = 9.5 s after it, so it waits at most
    // 9.5 s longer than the worst class-0 wait; strict priority lets it starve instead.
    let strict = run(&h100("[scheduler.queue]\nkind = \"priority\"", BURST));
    let fcfs = run(&h100("", BURST));
    let edf = run(&h100("[scheduler.queue]\nkind = \"edf\"\nttft_ms = [500, 10000]", BURST));
    let (e0, e1) = (max_queue_s(&edf, 0), max_queue_s(&edf, 1));
    let (s1, f0) = (max_queue_s(&strict, 1), max_queue_s(&fcfs, 0));
    eprintln!("max queueing delay: EDF class 0 {e0:.2} s, class 1 {e1:.2} s; strict class 1 {s1:.2} s; FCFS class 0 {f0:.2} s");
    assert!(e1 <= e0 + 9.5 + 0.2, "class 1 {e1} s vs class 0 {e0} s + 9.5 s");
    assert!(e1 < s1 - 10.0, "EDF class 1 {e1} s, strict priority {s1} s");
    assert!(e0 < f0, "class 0 waits less under EDF ({e0} s) than under FCFS ({f0} s)");
    assert_eq!(strict.summary.requests.finished, edf.summary.requests.finished);
}

/// Lengths spread over two orders of magnitude, at about 90% of the capacity of an instance
/// running at most 16 requests (`SEQS`).
const SPREAD: &str = "duration_s = 300\narrival = { kind = \"poisson\", rate = 5.5 }\n\
    prompt_tokens = { kind = \"lognormal\", median = 600, p99 = 6000, max = 7000 }\n\
    output_tokens = { kind = \"lognormal\", median = 200, p99 = 1500, max = 2000 }";

#[test]
fn shortest_first_orders_cut_mean_latency_under_load() {
    let fcfs = run(&h100("max_num_seqs = 16", SPREAD)).summary;
    let spf = run(&h100("max_num_seqs = 16\n[scheduler.queue]\nkind = \"shortest-prompt\"", SPREAD)).summary;
    let sjf = run(&h100("max_num_seqs = 16\n[scheduler.queue]\nkind = \"shortest-job\"", SPREAD)).summary;
    let noisy =
        run(&h100("max_num_seqs = 16\n[scheduler.queue]\nkind = \"shortest-job\"\noutput_error = 1.5", SPREAD)).summary;
    eprintln!(
        "E2E mean: fcfs {:.0} ms, shortest-prompt {:.0}, shortest-job {:.0}, shortest-job σ=1.5 {:.0}; TTFT mean {:.0} {:.0} {:.0} {:.0}",
        fcfs.e2e_ms.mean, spf.e2e_ms.mean, sjf.e2e_ms.mean, noisy.e2e_ms.mean,
        fcfs.ttft_ms.mean, spf.ttft_ms.mean, sjf.ttft_ms.mean, noisy.ttft_ms.mean
    );
    assert!(spf.ttft_ms.mean < 0.8 * fcfs.ttft_ms.mean);
    // Output length dominates a request's time: knowing it cuts the mean wait most.
    assert!(sjf.ttft_ms.mean < spf.ttft_ms.mean && sjf.ttft_ms.mean < 0.7 * fcfs.ttft_ms.mean);
    assert!(sjf.e2e_ms.mean < spf.e2e_ms.mean && spf.e2e_ms.mean < fcfs.e2e_ms.mean);
    // A noisy predictor loses part of the gain.
    assert!(noisy.ttft_ms.mean > sjf.ttft_ms.mean);
    // The cost: the longest jobs wait longer than under FCFS.
    assert!(sjf.queue_ms.max > fcfs.queue_ms.max && spf.queue_ms.max > fcfs.queue_ms.max);
}

#[test]
fn length_tiers_cap_concurrent_long_requests() {
    let tiers = "max_num_seqs = 16\n[scheduler.queue]\nkind = \"length-tiers\"\nshort_max_tokens = 1000\nmedium_max_tokens = 3000\nlong_max_running = 2";
    let out = run(&h100(tiers, SPREAD));
    // At no time do more than two requests with prompts over 3,000 tokens run: sweep their
    // [admitted, finished] intervals (no preemption happens here).
    assert_eq!(out.summary.preemptions, 0);
    let mut edges: Vec<(SimTime, i32)> =
        finished(&out).filter(|r| r.prompt_tokens > 3000).flat_map(|r| [(r.scheduled, 1), (r.finish, -1)]).collect();
    assert!(edges.len() > 40, "the workload has long prompts");
    edges.sort();
    let (mut now, mut most) = (0, 0);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    eprintln!("long requests running at once: at most {most}");
    assert_eq!(most, 2, "cap of 2 reached, never exceeded");
    let fcfs = run(&h100("max_num_seqs = 16", SPREAD)).summary;
    let short_ttft = |o: &RunOutput| {
        mean(finished(o).filter(|r| r.prompt_tokens <= 1000).map(|r| r.ttft().unwrap().as_millis_f64()))
    };
    let fcfs_out = run(&h100("max_num_seqs = 16", SPREAD));
    eprintln!("short prompts' mean TTFT: fcfs {:.1} ms, tiers {:.1} ms", short_ttft(&fcfs_out), short_ttft(&out));
    assert!(short_ttft(&out) < short_ttft(&fcfs_out));
    assert_eq!(fcfs.requests.finished, out.summary.requests.finished);
}

#[test]
fn short_requests_jump_ahead_only_past_the_threshold() {
    let fcfs = run(&h100("max_num_seqs = 16", SPREAD));
    // Never more than a million waiting: exactly FCFS.
    let never = run(&h100("max_num_seqs = 16\n[scheduler.queue]\nkind = \"short-jump\"\nshort_max_tokens = 500\nqueue_threshold = 1000000", SPREAD));
    assert_eq!(fcfs.recorder.records, never.recorder.records);
    let jump = run(&h100(
        "max_num_seqs = 16\n[scheduler.queue]\nkind = \"short-jump\"\nshort_max_tokens = 500\nqueue_threshold = 4",
        SPREAD,
    ));
    let short_ttft =
        |o: &RunOutput| mean(finished(o).filter(|r| r.prompt_tokens <= 500).map(|r| r.ttft().unwrap().as_millis_f64()));
    let long_ttft =
        |o: &RunOutput| mean(finished(o).filter(|r| r.prompt_tokens > 500).map(|r| r.ttft().unwrap().as_millis_f64()));
    eprintln!(
        "short TTFT mean: fcfs {:.0} ms, jump {:.0} ms; long: {:.0} vs {:.0}",
        short_ttft(&fcfs),
        short_ttft(&jump),
        long_ttft(&fcfs),
        long_ttft(&jump)
    );
    assert!(short_ttft(&jump) < 0.7 * short_ttft(&fcfs));
    assert!(long_ttft(&jump) > long_ttft(&fcfs), "the cost falls on the long ones");
}
