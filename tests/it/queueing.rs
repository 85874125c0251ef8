//! Queueing behaviour: Little's law at a stable load, and the saturation shape.

use crate::common::*;

fn fixed_lengths(rate: f64, duration_s: f64) -> String {
    llama8b(
        &format!(
            "duration_s = {duration_s}\narrival = {{ kind = \"poisson\", rate = {rate} }}\n\
             prompt_tokens = {{ kind = \"fixed\", value = 512 }}\noutput_tokens = {{ kind = \"fixed\", value = 128 }}"
        ),
        "",
    )
}

#[test]
fn littles_law_holds_at_a_stable_load() {
    // About half of this instance's capacity (≈ 41 req/s for these lengths).
    let rate = 20.0;
    let out = run(&fixed_lengths(rate, 1200.0));
    let s = &out.summary;
    assert_eq!(s.requests.in_flight, 0);
    // L: the engine's own time-weighted count of requests waiting or running.
    let l = s.requests_in_system_mean;
    // λ·W: the configured arrival rate times the mean time in system from the request records.
    let w_s = s.e2e_ms.mean / 1e3;
    let lw = rate * w_s;
    assert!((l / lw - 1.0).abs() < 0.03, "L = {l:.3}, λW = {lw:.3}");
    // And exactly, with the empirical rate over the simulated span: Σ E2E / span.
    let sum_e2e: f64 = out.recorder.records.iter().map(|r| r.e2e().unwrap().as_secs_f64()).sum();
    let exact = sum_e2e / s.simulated_s;
    assert!((l / exact - 1.0).abs() < 1e-9, "L = {l}, ΣE2E/T = {exact}");
}

#[test]
fn throughput_plateaus_and_ttft_grows_without_bound_past_it() {
    let tput = |rate: f64| run(&fixed_lengths(rate, 120.0)).summary.throughput.requests_per_s;
    // Below capacity, throughput follows the offered load.
    let low: Vec<(f64, f64)> = [10.0, 20.0, 30.0].iter().map(|&r| (r, tput(r))).collect();
    for &(r, t) in &low {
        assert!((t / r - 1.0).abs() < 0.03, "offered {r}, served {t}");
    }
    assert!(low.windows(2).all(|w| w[1].1 > w[0].1), "throughput rises with load: {low:?}");
    // Past it, more load gives no more throughput.
    let high: Vec<f64> = [50.0, 60.0, 80.0].iter().map(|&r| tput(r)).collect();
    let top = high.iter().cloned().fold(f64::MIN, f64::max);
    let bottom = high.iter().cloned().fold(f64::MAX, f64::min);
    assert!(top / bottom < 1.02, "plateau {high:?}");
    assert!(top < 0.9 * 50.0 && top > low[2].1, "plateau {top} between 30 and 50 req/s");

    // Overloaded, the queue grows for as long as the overload lasts: doubling the duration
    // roughly doubles the tail TTFT. Below capacity it does not move.
    let p99 = |rate: f64, d: f64| run(&fixed_lengths(rate, d)).summary.ttft_ms.p99;
    let (a, b) = (p99(60.0, 60.0), p99(60.0, 120.0));
    assert!(b > 1.7 * a && a > 10_000.0, "overloaded TTFT p99: {a:.0} ms at 60 s, {b:.0} ms at 120 s");
    let (c, d) = (p99(20.0, 60.0), p99(20.0, 120.0));
    assert!((d / c - 1.0).abs() < 0.5 && d < 500.0, "stable TTFT p99: {c:.0} ms at 60 s, {d:.0} ms at 120 s");
}
