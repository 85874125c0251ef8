//! Predicted vs measured: the metrics `servesim validate` puts side by side, computed the same
//! way from a simulation's records and from a measured per-request file.
//!
//! ```text
//!   RequestRecord (a run) ─┐
//!                          ├─► Outcome (arrival, lengths, first token, finish, counted) ─► RunMetrics
//!   measured file ─────────┘                                     RunMetrics × 2 ─► rows with % error
//! ```
//! Definitions are those of the run summary (vLLM's benchmark_serving): TTFT = first token −
//! arrival, TPOT = (E2E − TTFT) / (output − 1), E2E = finish − arrival, percentiles
//! interpolated linearly; throughput over the first counted arrival to the last counted
//! completion; SLO attainment over counted requests (a request that did not finish misses).
//! Requests in flight are time-weighted means over that same span (Σ of the finished counted
//! requests' times ÷ the span, which is Little's law: throughput × the mean time), split at the
//! first token: before it (the client's path, queueing and prefill) and after it (decoding).
//! They tell a run that admitted fewer requests at once than the simulation from one whose
//! iterations are slower.
//! Times stay integer nanoseconds until the statistics, so a file that repeats a run's times to
//! the nanosecond gives exactly the run's numbers.

use serde::Serialize;

use super::SloSection;
use super::{Dist, RequestRecord, Status};
use crate::time::SimTime;

/// What a run says about one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub(crate) arrival: SimTime,
    pub(crate) prompt_tokens: u32,
    pub(crate) output_tokens: u32,
    /// When its first token came, if it came.
    pub(crate) first_token: Option<SimTime>,
    /// When it finished, if it finished (rejected, failed and unfinished requests have none).
    pub(crate) finish: Option<SimTime>,
    /// Whether it enters the statistics (warm-up and cool-down windows, a load generator's
    /// warm-up phase).
    pub counted: bool,
}

impl Outcome {
    /// A simulated request; `counted` is the run's (or a measured file's) verdict.
    pub fn from_record(r: &RequestRecord, counted: bool) -> Outcome {
        let finished = r.status == Status::Finished;
        Outcome {
            arrival: r.arrival,
            prompt_tokens: r.prompt_tokens,
            output_tokens: r.output_tokens,
            first_token: (r.first_token != SimTime::MAX).then_some(r.first_token),
            finish: finished.then_some(r.finish),
            counted,
        }
    }

    pub fn ttft_ms(&self) -> Option<f64> {
        self.first_token.map(|t| (t - self.arrival).as_millis_f64())
    }

    pub fn e2e_ms(&self) -> Option<f64> {
        self.finish.map(|t| (t - self.arrival).as_millis_f64())
    }

    /// As [`RequestRecord::tpot_ms`]: mean time per output token after the first.
    pub fn tpot_ms(&self) -> Option<f64> {
        super::tpot_ms(self.first_token?, self.finish?, self.output_tokens)
    }

    /// Whether it finished within every threshold of `slo`.
    pub fn meets(&self, slo: &SloSection) -> bool {
        self.finish.is_some() && slo.met_by(self.ttft_ms(), self.tpot_ms(), self.e2e_ms())
    }
}

/// The outcomes of a run's records, each counted as the run's measurement window says.
pub fn outcomes_of(rec: &super::Recorder) -> Vec<Outcome> {
    rec.records.iter().map(|r| Outcome::from_record(r, rec.counts(r.arrival))).collect()
}

/// The compared metrics of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunMetrics {
    /// Counted requests.
    pub requests: u64,
    /// Counted requests that finished.
    pub finished: u64,
    pub ttft_ms: Dist,
    pub(crate) tpot_ms: Dist,
    pub e2e_ms: Dist,
    /// Counted completions per second, from the first counted arrival to the last counted
    /// completion.
    pub(crate) throughput_rps: f64,
    pub(crate) output_tokens_per_s: f64,
    /// Fraction of counted requests that finished within every SLO threshold.
    pub(crate) slo_attainment: f64,
    /// Counted finished requests between their arrival and their first token, on average over
    /// the throughput's span.
    pub in_flight_to_first_token: f64,
    /// Counted finished requests past their first token (decoding), on average over the span.
    pub in_flight_after_first_token: f64,
}

/// The metrics of a list of outcomes.
pub fn run_metrics(outcomes: &[Outcome], slo: &SloSection) -> RunMetrics {
    let counted = || outcomes.iter().filter(|o| o.counted);
    let done = || counted().filter(|o| o.finish.is_some());
    let dist = |f: &dyn Fn(&Outcome) -> Option<f64>| {
        let mut v: Vec<f64> = done().filter_map(f).collect();
        Dist::of(&mut v)
    };
    let start = counted().map(|o| o.arrival).min().unwrap_or(SimTime::ZERO);
    let end = done().filter_map(|o| o.finish).max().unwrap_or(start);
    let duration_s = end.saturating_sub(start).as_secs_f64();
    let per_s = |x: f64| if duration_s > 0.0 { x / duration_s } else { 0.0 };
    let n = counted().count() as u64;
    let met = counted().filter(|o| o.meets(slo)).count() as f64;
    let span_ns = |o: &Outcome, from: Option<SimTime>, to: Option<SimTime>| match (from, to) {
        (Some(a), Some(b)) if o.finish.is_some() => b.saturating_sub(a).0 as f64,
        _ => 0.0,
    };
    let in_flight = |f: &dyn Fn(&Outcome) -> f64| per_s(done().map(f).sum::<f64>() / 1e9);
    RunMetrics {
        requests: n,
        finished: done().count() as u64,
        ttft_ms: dist(&|o| o.ttft_ms()),
        tpot_ms: dist(&|o| o.tpot_ms()),
        e2e_ms: dist(&|o| o.e2e_ms()),
        throughput_rps: per_s(done().count() as f64),
        output_tokens_per_s: per_s(done().map(|o| o.output_tokens as f64).sum()),
        slo_attainment: if n == 0 { 0.0 } else { met / n as f64 },
        in_flight_to_first_token: in_flight(&|o| span_ns(o, Some(o.arrival), o.first_token)),
        in_flight_after_first_token: in_flight(&|o| span_ns(o, o.first_token, o.finish)),
    }
}

/// One compared number.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// `ttft_ms`, `tpot_ms`, `e2e_ms`, `throughput_rps`, `output_tokens_per_s`, `slo_attainment`.
    pub metric: &'static str,
    /// `mean`, `p50`, `p90`, `p99`, or `value` for single numbers.
    pub stat: &'static str,
    pub measured: f64,
    pub predicted: f64,
    /// (predicted − measured) / measured, in percent; `None` when the measured value is 0 and
    /// the predicted one is not.
    pub error_pct: Option<f64>,
}

impl Row {
    /// Whether the acceptance figure counts this row: TTFT, TPOT and E2E, mean and p99.
    pub fn is_headline(&self) -> bool {
        matches!(self.metric, "ttft_ms" | "tpot_ms" | "e2e_ms") && matches!(self.stat, "mean" | "p99")
    }
}

/// (predicted − measured) / measured in percent (0 when both are 0).
pub fn error_pct(predicted: f64, measured: f64) -> Option<f64> {
    if measured != 0.0 {
        Some((predicted - measured) / measured.abs() * 100.0)
    } else if predicted == 0.0 {
        Some(0.0)
    } else {
        None
    }
}

/// The requests in flight before and after their first token of a run known by its request
/// throughput and mean TTFT and E2E (ms), by Little's law: throughput × each mean time.
pub fn in_flight_by_little(requests_per_s: f64, ttft_ms: f64, e2e_ms: f64) -> (f64, f64) {
    (requests_per_s * ttft_ms / 1e3, requests_per_s * (e2e_ms - ttft_ms) / 1e3)
}

/// The compared numbers of two runs, in a fixed order.
pub fn rows(measured: &RunMetrics, predicted: &RunMetrics) -> Vec<Row> {
    let mut out = Vec::with_capacity(17);
    for (metric, m, p) in [
        ("ttft_ms", &measured.ttft_ms, &predicted.ttft_ms),
        ("tpot_ms", &measured.tpot_ms, &predicted.tpot_ms),
        ("e2e_ms", &measured.e2e_ms, &predicted.e2e_ms),
    ] {
        for (stat, a, b) in
            [("mean", m.mean, p.mean), ("p50", m.p50, p.p50), ("p90", m.p90, p.p90), ("p99", m.p99, p.p99)]
        {
            out.push(Row { metric, stat, measured: a, predicted: b, error_pct: error_pct(b, a) });
        }
    }
    for (metric, a, b) in [
        ("throughput_rps", measured.throughput_rps, predicted.throughput_rps),
        ("output_tokens_per_s", measured.output_tokens_per_s, predicted.output_tokens_per_s),
        ("slo_attainment", measured.slo_attainment, predicted.slo_attainment),
        ("in_flight_to_first_token", measured.in_flight_to_first_token, predicted.in_flight_to_first_token),
        ("in_flight_after_first_token", measured.in_flight_after_first_token, predicted.in_flight_after_first_token),
    ] {
        out.push(Row { metric, stat: "value", measured: a, predicted: b, error_pct: error_pct(b, a) });
    }
    out
}

/// Median and P90 of absolute errors (percent); `None` for an empty list.
pub fn abs_error_stats(errors: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    let mut v: Vec<f64> = errors.into_iter().map(f64::abs).filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some((super::stats::percentile_sorted(&v, 50.0), super::stats::percentile_sorted(&v, 90.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> SimTime {
        SimTime(x * 1_000_000)
    }

    fn done(arrival: u64, first: u64, finish: u64, output: u32) -> Outcome {
        Outcome {
            arrival: ms(arrival),
            prompt_tokens: 10,
            output_tokens: output,
            first_token: Some(ms(first)),
            finish: Some(ms(finish)),
            counted: true,
        }
    }

    #[test]
    fn metrics_by_hand() {
        let slo = SloSection { ttft_ms: Some(100.0), tpot_ms: None, e2e_ms: None, ..SloSection::default() };
        let mut rejected = done(5, 0, 0, 3);
        rejected.first_token = None;
        rejected.finish = None;
        let mut warmup = done(0, 1000, 2000, 2);
        warmup.counted = false;
        // TTFT 50 and 150 ms; TPOT (1050−50)/4 = 250 and (350−150)/2 = 100 ms.
        let o = [warmup, done(0, 50, 1050, 5), done(10, 160, 360, 3), rejected];
        let m = run_metrics(&o, &slo);
        assert_eq!((m.requests, m.finished), (3, 2));
        assert_eq!((m.ttft_ms.mean, m.ttft_ms.p50, m.ttft_ms.max), (100.0, 100.0, 150.0));
        assert_eq!(m.tpot_ms.mean, 175.0);
        assert_eq!(m.e2e_ms.mean, (1050.0 + 350.0) / 2.0);
        // 2 completions over 0 → 1.05 s; 8 output tokens.
        assert!((m.throughput_rps - 2.0 / 1.05).abs() < 1e-12);
        assert!((m.output_tokens_per_s - 8.0 / 1.05).abs() < 1e-12);
        // Only the first counted request meets TTFT ≤ 100 ms; the rejected one misses.
        assert!((m.slo_attainment - 1.0 / 3.0).abs() < 1e-12);
        // In flight over the 1.05 s: (50 + 150) ms before the first token, (1000 + 200) ms after.
        assert!((m.in_flight_to_first_token - 0.2 / 1.05).abs() < 1e-12);
        assert!((m.in_flight_after_first_token - 1.2 / 1.05).abs() < 1e-12);
    }

    #[test]
    fn rows_and_errors() {
        let slo = SloSection::default();
        let a = run_metrics(&[done(0, 100, 1100, 11)], &slo);
        let b = run_metrics(&[done(0, 110, 1000, 11)], &slo);
        let r = rows(&a, &b);
        assert_eq!(r.len(), 17);
        let ttft = &r[0];
        assert_eq!((ttft.metric, ttft.stat), ("ttft_ms", "mean"));
        assert!((ttft.error_pct.unwrap() - 10.0).abs() < 1e-9);
        assert_eq!(r.iter().filter(|x| x.is_headline()).count(), 6);
        assert_eq!(error_pct(0.0, 0.0), Some(0.0));
        assert_eq!(error_pct(1.0, 0.0), None);
        assert_eq!(abs_error_stats([-10.0, 2.0, 4.0]), Some((4.0, 8.8)));
        assert_eq!(abs_error_stats([]), None);
    }
}
