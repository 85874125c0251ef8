//! Metrics: per-request timestamps, time-weighted occupancy, and the time series.
//!
//! The [`Recorder`] is told what happens (arrival, admission, first token, finish, rejection,
//! preemption, each iteration) and derives every statistic afterwards with the definitions of
//! vLLM's benchmark_serving: TTFT = first token − arrival; TPOT = (E2E − TTFT) / (output − 1);
//! ITL = gaps between consecutive tokens of a request; E2E = finish − arrival; queueing delay =
//! first admission − arrival.

pub mod bench;
pub mod compare;
mod fleet;
pub mod measured;
mod observer;
mod parts;
pub(crate) mod policy;
pub mod prometheus;
mod sections;
pub mod stats;
mod summary;

pub use observer::Observer;
pub use parts::{DisaggSummary, FleetSummary, PoolSummary};
pub use policy::PolicyStats;
pub use sections::{MetricsSection, SloSection};
pub use stats::Dist;
pub use summary::{
    meets_slo, offered_window_s, summarize, ClassSummary, CostSummary, FrontendSummary, GroupCostSource, KvSummary,
    RequestCounts, SloSummary, StopReason, StoppedEarly, Summary, Throughput,
};

use crate::cost::BatchShape;
use crate::time::SimTime;

/// Occupancy of an instance, for time-weighted statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gauges {
    pub waiting: u64,
    pub(crate) running: u64,
    pub(crate) kv_used: u64,
}

/// Why a request was turned away.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// Prompt + output longer than the model's context (`max_model_len`).
    ContextTooLong,
    /// Prompt longer than `max_num_batched_tokens`, with no chunked prefill to split it.
    PromptExceedsBatchTokens,
    /// Even alone, the request's KV would not fit in the instance's blocks.
    ExceedsKvCapacity,
    /// The queue held `scheduler.admission.max_queue` requests.
    QueueFull,
    /// Prompt longer than `scheduler.admission.max_prompt_tokens`.
    PromptTooLong,
    /// The circuit breaker was open (estimated queueing delay too long).
    CircuitOpen,
    /// No instance the router believes healthy (every one failed, starting or down).
    NoInstance,
}

impl RejectReason {
    pub const ALL: [RejectReason; 7] = [
        RejectReason::ContextTooLong,
        RejectReason::PromptExceedsBatchTokens,
        RejectReason::ExceedsKvCapacity,
        RejectReason::QueueFull,
        RejectReason::PromptTooLong,
        RejectReason::CircuitOpen,
        RejectReason::NoInstance,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::ContextTooLong => "context_too_long",
            RejectReason::PromptExceedsBatchTokens => "prompt_exceeds_batch_tokens",
            RejectReason::ExceedsKvCapacity => "exceeds_kv_capacity",
            RejectReason::QueueFull => "queue_full",
            RejectReason::PromptTooLong => "prompt_too_long",
            RejectReason::CircuitOpen => "circuit_open",
            RejectReason::NoInstance => "no_instance",
        }
    }
}

/// Where a request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    InFlight,
    Finished,
    Rejected(RejectReason),
    /// Dropped after waiting longer than `scheduler.admission.queue_timeout_s` unadmitted.
    TimedOut,
    /// Lost to an instance failure (`[fleet] on_failure = "lose"`, or out of retries).
    Lost,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::InFlight => "in_flight",
            Status::Finished => "finished",
            Status::Rejected(_) => "rejected",
            Status::TimedOut => "timed_out",
            Status::Lost => "lost",
        }
    }
}

/// Everything recorded about one request; 56 bytes (checked by a test). `SimTime::MAX` marks "not yet".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    pub arrival: SimTime,
    pub scheduled: SimTime,
    pub first_token: SimTime,
    pub finish: SimTime,
    pub prompt_tokens: u32,
    pub output_tokens: u32,
    pub preemptions: u32,
    pub instance: u32,
    pub status: Status,
    /// Priority class (0 = most important).
    pub class: u8,
}

// The docs' "about 56 bytes a request" (`run.max_requests`) is this layout.
const _: () = assert!(std::mem::size_of::<RequestRecord>() == 56);

impl RequestRecord {
    pub fn ttft(&self) -> Option<SimTime> {
        (self.first_token != SimTime::MAX).then(|| self.first_token - self.arrival)
    }

    pub fn e2e(&self) -> Option<SimTime> {
        (self.status == Status::Finished).then(|| self.finish - self.arrival)
    }

    pub fn queue(&self) -> Option<SimTime> {
        (self.scheduled != SimTime::MAX).then(|| self.scheduled - self.arrival)
    }

    /// Mean time per output token after the first, in ms; `None` for one-token outputs.
    pub fn tpot_ms(&self) -> Option<f64> {
        let finished = self.status == Status::Finished && self.first_token != SimTime::MAX;
        if !finished {
            return None;
        }
        tpot_ms(self.first_token, self.finish, self.output_tokens)
    }
}

/// TPOT, the one definition (records, measured runs, comparisons): the mean time per output
/// token after the first, (finish − first token) / (output tokens − 1), in ms; `None` for
/// one-token outputs. vLLM's benchmark_serving defines it so.
pub fn tpot_ms(first_token: SimTime, finish: SimTime, output_tokens: u32) -> Option<f64> {
    (output_tokens > 1).then(|| (finish - first_token).as_millis_f64() / (output_tokens - 1) as f64)
}

/// The most windows a run's time series holds (about 100 MB); a run that would need more stops
/// there with `summary.stopped.reason = "timeseries_windows"`: raise `metrics.window_s`.
pub const MAX_WINDOWS: usize = 1_000_000;

/// One window of the time series.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WindowRow {
    pub start: SimTime,
    pub arrivals: u64,
    pub rejections: u64,
    pub completions: u64,
    pub first_tokens: u64,
    /// Time-weighted means over the window.
    pub waiting_mean: f64,
    pub running_mean: f64,
    pub kv_used_blocks_mean: f64,
    /// p99 of TTFT of the requests whose first token came in this window, ms (`None` if none).
    pub ttft_ms_p99: Option<f64>,
    /// Time-weighted means of instances provisioned and serving (see `fleet`), and of the KV
    /// blocks of those provisioned.
    pub instances_mean: f64,
    pub instances_ready_mean: f64,
    pub kv_blocks_mean: f64,
    /// Instance failures and restarts (back in service) in this window.
    pub failures: u64,
    pub restarts: u64,
    /// SLO attainment of the requests that arrived in this window (`None` if none).
    pub slo_attainment: Option<f64>,
}

#[derive(Default)]
struct WindowAcc {
    arrivals: u64,
    rejections: u64,
    completions: u64,
    first_tokens: u64,
    waiting_ns: u128,
    running_ns: u128,
    kv_ns: u128,
    ttft_ms: Vec<f64>,
}

/// Collects what happens during a run.
pub struct Recorder {
    pub records: Vec<RequestRecord>,
    include_from: SimTime,
    include_to: SimTime,
    /// Inter-token gaps of counted requests.
    pub(crate) itl: stats::LogHistogram,
    gauges: Gauges,
    kv_total: u64,
    last: SimTime,
    waiting_ns: u128,
    running_ns: u128,
    kv_ns: u128,
    pub(crate) kv_used_max: u64,
    pub(crate) iterations: u64,
    pub(crate) batch_seqs_sum: u64,
    pub(crate) batch_seqs_max: u64,
    pub(crate) decode_token_steps: u64,
    pub(crate) prefill_tokens: u64,
    pub(crate) preemptions: u64,
    /// Counters of the serving policies (prefix cache, swap, speculation, CPU overhead).
    pub(crate) policy: PolicyStats,
    window: SimTime,
    window_start: SimTime,
    acc: WindowAcc,
    pub series: Vec<WindowRow>,
    /// The series reached [`MAX_WINDOWS`]: the run stops at its next event (its summary says so).
    pub(crate) series_full: bool,
    /// (time, TTFT ms) of recent first tokens, kept only for an autoscaler that reads them.
    recent_ttft: Option<std::collections::VecDeque<(SimTime, f64)>>,
    /// From a token's iteration end to the client (`frontend.token_us`): first-token and
    /// finish times are the client's.
    pub(crate) token_delay: SimTime,
}

impl Recorder {
    /// `include` is the arrival-time range of requests that enter the statistics (warm-up and
    /// cool-down excluded); `kv_total` the blocks of all instances; `window` the series width.
    pub fn new(include: (SimTime, SimTime), kv_total: u64, window: SimTime) -> Recorder {
        Recorder {
            records: Vec::new(),
            include_from: include.0,
            include_to: include.1,
            itl: stats::LogHistogram::default(),
            gauges: Gauges::default(),
            kv_total,
            last: SimTime::ZERO,
            waiting_ns: 0,
            running_ns: 0,
            kv_ns: 0,
            kv_used_max: 0,
            iterations: 0,
            batch_seqs_sum: 0,
            batch_seqs_max: 0,
            decode_token_steps: 0,
            prefill_tokens: 0,
            preemptions: 0,
            policy: PolicyStats::default(),
            window: window.max(SimTime(1)),
            window_start: SimTime::ZERO,
            acc: WindowAcc::default(),
            series: Vec::new(),
            series_full: false,
            recent_ttft: None,
            token_delay: SimTime::ZERO,
        }
    }

    /// Reserves room for `n` request records.
    pub fn reserve(&mut self, n: usize) {
        self.records.reserve_exact(n);
    }

    pub fn kv_total(&self) -> u64 {
        self.kv_total
    }

    /// Whether a request arriving at `t` enters the statistics.
    pub fn counts(&self, arrival: SimTime) -> bool {
        arrival >= self.include_from && arrival <= self.include_to
    }

    pub fn is_counted(&self, id: u64) -> bool {
        self.counts(self.records[id as usize].arrival)
    }

    /// Moves the clock to `now`, integrating occupancy since the last call and closing the
    /// windows that ended.
    pub fn advance(&mut self, now: SimTime) {
        debug_assert!(now >= self.last, "time went backwards");
        while now >= self.window_start + self.window {
            if self.series.len() >= MAX_WINDOWS {
                // A long idle gap (a trace's hours-long pause, a tiny arrival rate) would
                // otherwise fill memory with empty windows.
                self.series_full = true;
                break;
            }
            let end = self.window_start + self.window;
            self.integrate(end);
            self.close_window();
            self.window_start = end;
        }
        self.integrate(now);
    }

    fn integrate(&mut self, to: SimTime) {
        let dt = (to - self.last).0 as u128;
        let g = self.gauges;
        self.waiting_ns += dt * g.waiting as u128;
        self.running_ns += dt * g.running as u128;
        self.kv_ns += dt * g.kv_used as u128;
        self.acc.waiting_ns += dt * g.waiting as u128;
        self.acc.running_ns += dt * g.running as u128;
        self.acc.kv_ns += dt * g.kv_used as u128;
        self.last = to;
    }

    fn close_window(&mut self) {
        let width = (self.last - self.window_start).0.max(1) as f64;
        let mut acc = std::mem::take(&mut self.acc);
        let ttft_ms_p99 = if acc.ttft_ms.is_empty() {
            None
        } else {
            acc.ttft_ms.sort_unstable_by(|a, b| a.total_cmp(b));
            Some(stats::percentile_sorted(&acc.ttft_ms, 99.0))
        };
        self.series.push(WindowRow {
            start: self.window_start,
            arrivals: acc.arrivals,
            rejections: acc.rejections,
            completions: acc.completions,
            first_tokens: acc.first_tokens,
            waiting_mean: acc.waiting_ns as f64 / width,
            running_mean: acc.running_ns as f64 / width,
            kv_used_blocks_mean: acc.kv_ns as f64 / width,
            ttft_ms_p99,
            ..WindowRow::default()
        });
    }

    /// Applies a change of occupancy (an instance's gauges after minus before).
    pub fn gauge_delta(&mut self, before: Gauges, after: Gauges) {
        let g = &mut self.gauges;
        g.waiting = g.waiting + after.waiting - before.waiting;
        g.running = g.running + after.running - before.running;
        g.kv_used = g.kv_used + after.kv_used - before.kv_used;
        self.kv_used_max = self.kv_used_max.max(g.kv_used);
    }

    pub fn gauges(&self) -> Gauges {
        self.gauges
    }

    /// A request arrived at `now`; returns its id, which is its record's index (ids are
    /// dense and in arrival order).
    pub fn arrived(&mut self, now: SimTime, prompt: u32, output: u32) -> u64 {
        let id = self.records.len() as u64;
        self.records.push(RequestRecord {
            arrival: now,
            scheduled: SimTime::MAX,
            first_token: SimTime::MAX,
            finish: SimTime::MAX,
            prompt_tokens: prompt,
            output_tokens: output,
            preemptions: 0,
            instance: u32::MAX,
            status: Status::InFlight,
            class: 0,
        });
        self.acc.arrivals += 1;
        id
    }

    pub fn set_class(&mut self, id: u64, class: u8) {
        self.records[id as usize].class = class;
    }

    /// A queued request was dropped at `at` for waiting too long.
    pub fn timed_out(&mut self, id: u64, at: SimTime) {
        let r = &mut self.records[id as usize];
        debug_assert_eq!(r.status, Status::InFlight);
        r.status = Status::TimedOut;
        r.finish = at;
    }

    pub fn routed(&mut self, id: u64, instance: u32) {
        self.records[id as usize].instance = instance;
    }

    pub fn rejected(&mut self, id: u64, now: SimTime, reason: RejectReason) {
        let r = &mut self.records[id as usize];
        r.status = Status::Rejected(reason);
        r.finish = now;
        self.acc.rejections += 1;
    }

    pub fn scheduled(&mut self, id: u64, now: SimTime) {
        let r = &mut self.records[id as usize];
        if r.scheduled == SimTime::MAX {
            r.scheduled = now;
        }
    }

    pub fn first_token(&mut self, id: u64, now: SimTime) {
        let now = now + self.token_delay;
        let counted = self.is_counted(id);
        let r = &mut self.records[id as usize];
        r.first_token = now;
        self.acc.first_tokens += 1;
        if counted {
            self.acc.ttft_ms.push((now - r.arrival).as_millis_f64());
        }
        if let Some(q) = &mut self.recent_ttft {
            q.push_back((now, (now - r.arrival).as_millis_f64()));
        }
    }

    pub fn finished(&mut self, id: u64, now: SimTime) {
        let now = now + self.token_delay;
        let r = &mut self.records[id as usize];
        debug_assert!(r.first_token <= now);
        r.status = Status::Finished;
        r.finish = now;
        self.acc.completions += 1;
    }

    pub fn preempted(&mut self, id: u64) {
        self.records[id as usize].preemptions += 1;
        self.preemptions += 1;
    }

    /// `count` requests each saw an inter-token gap of `gap`.
    pub fn itl(&mut self, gap: SimTime, count: u32) {
        self.itl.add(gap.0, count as u64);
    }

    pub fn iteration(&mut self, shape: &BatchShape, _duration: SimTime) {
        self.iterations += 1;
        let seqs = shape.seqs();
        self.batch_seqs_sum += seqs;
        self.batch_seqs_max = self.batch_seqs_max.max(seqs);
        self.decode_token_steps += shape.decode_seqs;
        self.prefill_tokens += shape.prefill_tokens;
    }

    /// Closes the last window at `end`.
    pub fn finish(&mut self, end: SimTime) {
        self.advance(end);
        if end > self.window_start || self.acc.arrivals + self.acc.completions + self.acc.rejections > 0 {
            self.close_window();
        }
    }

    /// Time-weighted mean occupancy over [0, end]: (waiting, running, KV blocks used).
    pub fn occupancy_means(&self) -> (f64, f64, f64) {
        let span = self.last.0.max(1) as f64;
        (self.waiting_ns as f64 / span, self.running_ns as f64 / span, self.kv_ns as f64 / span)
    }

    pub fn end(&self) -> SimTime {
        self.last
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_request_record_stays_56_bytes() {
        // One per request, kept for the whole run: its size is the simulator's memory per request.
        assert_eq!(std::mem::size_of::<super::RequestRecord>(), 56);
    }
}
