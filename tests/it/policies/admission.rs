//! Admission and overload: circuit breaker, queue cap, max prompt, queue timeout.

use super::*;

/// 60 s at 20 req/s (half the capacity of ~41 req/s), a 30 s burst at 3× that (60 req/s),
/// then 60 s at 20 again.
const BURST: &str = "arrival = { kind = \"phases\", phases = [ { duration_s = 60, rate = 20 }, \
    { duration_s = 30, rate = 60 }, { duration_s = 60, rate = 20 } ] }\n\
    prompt_tokens = { kind = \"fixed\", value = 512 }\noutput_tokens = { kind = \"fixed\", value = 128 }";

#[test]
fn circuit_breaker_bounds_accepted_ttft_under_a_3x_burst_and_rejects_the_excess() {
    let open = run(&h100("", BURST)).summary;
    let guarded =
        run(&h100("[scheduler.admission]\ncircuit_breaker = { open_delay_s = 1.0, close_delay_s = 0.5 }", BURST))
            .summary;
    let rejected = guarded.requests.rejected_by_reason["circuit_open"];
    // The excess of the burst over capacity: (60 − capacity) req/s for 30 s, with capacity the
    // throughput the unguarded run sustains while saturated (it serves everything eventually).
    let capacity = 41.0;
    let excess = (60.0 - capacity) * 30.0;
    eprintln!(
        "TTFT p99 unguarded {:.0} ms, with breaker {:.0} ms (max {:.0}); rejected {rejected} (excess ≈ {excess:.0}); trips {}",
        open.ttft_ms.p99, guarded.ttft_ms.p99, guarded.ttft_ms.max, guarded.admission.circuit_breaker_trips
    );
    assert_eq!(open.requests.rejected, 0);
    assert!(open.ttft_ms.p99 > 5_000.0, "without the breaker the burst queues up: {}", open.ttft_ms.p99);
    // Accepted requests wait about the open bound at most (1 s), plus their prefill.
    assert!(guarded.ttft_ms.p99 < 1_500.0, "accepted TTFT p99 {}", guarded.ttft_ms.p99);
    assert!(guarded.ttft_ms.max < 2_000.0);
    // What it rejects is about the excess, not the whole burst.
    assert!((rejected as f64) > 0.6 * excess && (rejected as f64) < 1.4 * excess, "rejected {rejected}");
    assert_eq!(guarded.requests.rejected, rejected);
    // Rejected requests are SLO misses.
    let s = &guarded.slo;
    assert!(s.attainment <= 1.0 - rejected as f64 / guarded.requests.measured as f64 + 1e-12);
}

#[test]
fn queue_cap_and_max_prompt_reject_with_their_reasons() {
    let src = h100(
        "[scheduler.admission]\nmax_queue = 10\nmax_prompt_tokens = 2000",
        "duration_s = 60\narrival = { kind = \"poisson\", rate = 60 }\n\
         prompt_tokens = { kind = \"uniform\", min = 100, max = 3000 }\noutput_tokens = { kind = \"fixed\", value = 128 }",
    );
    let s = scenario(&src);
    let mut sim = Simulation::new(&s);
    let mut most = 0;
    while sim.step() {
        most = most.max(sim.instances()[0].gauges().waiting);
    }
    let out = sim.finish();
    let by = &out.summary.requests.rejected_by_reason;
    eprintln!("rejected {by:?}; most waiting {most}");
    assert!(most <= 10, "never more than max_queue waiting: {most}");
    assert!(by["queue_full"] > 100 && by["prompt_too_long"] > 100);
    for r in &out.recorder.records {
        let too_long = r.prompt_tokens > 2000;
        assert_eq!(too_long, r.status == Status::Rejected(servesim_sim::metrics::RejectReason::PromptTooLong), "{r:?}");
    }
}

#[test]
fn queue_timeouts_drop_requests_and_count_them() {
    let out = run_checked(&h100(
        "max_num_seqs = 8\n[scheduler.admission]\nqueue_timeout_s = 2",
        "duration_s = 60\narrival = { kind = \"poisson\", rate = 20 }\n\
         prompt_tokens = { kind = \"fixed\", value = 512 }\noutput_tokens = { kind = \"fixed\", value = 128 }",
    ));
    let c = &out.summary.requests;
    eprintln!("finished {}, timed out {}", c.finished, c.timed_out);
    assert!(c.timed_out > 100 && c.finished > 100);
    assert_eq!(c.in_flight, 0);
    let timeout = servesim_sim::SimTime::from_secs_f64(2.0);
    for r in &out.recorder.records {
        match r.status {
            // Dropped exactly at their deadline, never admitted.
            Status::TimedOut => {
                assert_eq!(r.finish - r.arrival, timeout);
                assert_eq!(r.first_token, servesim_sim::SimTime::MAX);
            }
            // Everyone admitted was admitted in time.
            Status::Finished => assert!(r.queue().unwrap() <= timeout),
            s => panic!("unexpected {s:?}"),
        }
    }
    // Timed-out requests are SLO misses.
    assert!(out.summary.slo.attainment <= c.finished as f64 / c.measured as f64 + 1e-12);
}
