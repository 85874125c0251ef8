//! Workloads: the stream of requests a run serves.
//!
//! Requests are generated lazily, one at a time, so a run's memory does not grow with the
//! number of requests it will see. Each random aspect (arrival gaps, prompt lengths, output
//! lengths, think times) has its own random substream.

pub mod arrival;
pub mod fit;
pub mod length;
mod list;
pub mod profile;
pub mod trace;

use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

pub use arrival::ArrivalSpec;
pub use length::LengthDist;
pub use trace::{TraceError, TraceSpec};

use crate::rng::{substream, Stream};
use crate::scenario::{check, ScenarioError};
use crate::time::SimTime;

/// `[workload]`: arrivals and lengths (synthetic) or a trace to replay, and when the workload
/// ends. Exactly one of `arrival` (with both lengths) and `trace` is given.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Stop generating arrivals after this many seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Stop after this many requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<ArrivalSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<LengthDist>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<LengthDist>,
    /// Replay a trace instead of generating requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceSpec>,
}

impl WorkloadSpec {
    pub fn validate(&self, path: &str) -> Result<(), ScenarioError> {
        if let Some(d) = self.duration_s {
            check(d.is_finite() && d > 0.0, path, "duration_s", "must be > 0", d)?;
        }
        if let Some(n) = self.requests {
            check(n >= 1, path, "requests", "must be ≥ 1", n)?;
        }
        let (arrival, prompt, output) = match (&self.trace, &self.arrival, &self.prompt_tokens, &self.output_tokens) {
            (Some(t), None, None, None) => return t.validate(&format!("{path}.trace")),
            (Some(_), ..) => {
                return Err(ScenarioError::at(
                    path,
                    "give either a trace, or arrival with prompt_tokens and output_tokens, not both".into(),
                ))
            }
            (None, Some(a), Some(p), Some(o)) => (a, p, o),
            (None, a, p, _) => {
                let key = if a.is_none() {
                    "arrival"
                } else if p.is_none() {
                    "prompt_tokens"
                } else {
                    "output_tokens"
                };
                return Err(ScenarioError::at(
                    &format!("{path}.{key}"),
                    "missing: give arrival, prompt_tokens and output_tokens, or a trace".into(),
                ));
            }
        };
        arrival.validate(&format!("{path}.arrival"))?;
        if self.duration_s.is_none() && self.requests.is_none() && arrival.natural_duration_s().is_none() {
            return Err(ScenarioError::at(path, "set duration_s or requests: the workload needs an end".into()));
        }
        prompt.validate(&format!("{path}.prompt_tokens"))?;
        output.validate(&format!("{path}.output_tokens"))
    }

    /// When arrivals stop, in seconds, if the workload ends by time (for a trace: when its
    /// source's scan says the replay ends).
    pub fn end_s(&self) -> Option<f64> {
        let natural = match (&self.arrival, &self.trace) {
            (Some(a), _) => a.natural_duration_s(),
            (None, Some(t)) => t.replay_span_s(),
            (None, None) => None,
        };
        match (self.duration_s, natural) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Long-run mean offered rate in requests per second: the arrival process's, or the
    /// replayed trace's (when its scan is known). `None` for closed loops.
    pub fn mean_rate(&self) -> Option<f64> {
        match (&self.arrival, &self.trace) {
            (Some(a), _) => a.mean_rate(),
            (None, Some(t)) => {
                if let Some(r) = t.target_rate {
                    return Some(r);
                }
                let scan = t.source.as_ref()?.scan.as_ref()?;
                let span = t.replay_span_s()?;
                (span > 0.0).then(|| scan.requests as f64 * t.sample.unwrap_or(1.0) / span)
            }
            (None, None) => None,
        }
    }

    /// The highest scheduled rate (of a phase schedule), else the mean rate.
    pub fn peak_rate(&self) -> Option<f64> {
        match &self.arrival {
            Some(ArrivalSpec::Phases(p)) => p.phases.iter().map(|ph| ph.rate).reduce(f64::max),
            _ => self.mean_rate(),
        }
    }

    /// Multiplies the offered load by `k`: every arrival rate, or the trace's replay speed.
    pub fn scale_rate(&mut self, k: f64) {
        if let Some(a) = self.arrival.as_mut() {
            a.scale_rate(k);
        } else if let Some(t) = self.trace.as_mut() {
            match t.target_rate.as_mut() {
                Some(r) => *r *= k,
                None => t.speedup = Some(t.speedup.unwrap_or(1.0) * k),
            }
        }
    }
}

/// Marks a request that belongs to no closed-loop client.
pub const NO_CLIENT: u32 = u32::MAX;

/// Marks a request that belongs to no session.
pub const NO_SESSION: u64 = u64::MAX;

/// A run of prompt tokens with a known identity: two requests whose `content` lists agree on
/// their first k segments have identical first (sum of those segments' tokens) prompt tokens.
/// This is how shared system prompts, multi-turn history, RAG documents and trace hash ids
/// (Mooncake's one id per 512-token block) reach the prefix cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Segment {
    pub hash: u64,
    pub tokens: u32,
}

/// One request as the workload produced it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Dense id in arrival order (the engine assigns it when the request arrives).
    pub id: u64,
    pub arrival: SimTime,
    pub prompt_tokens: u32,
    pub output_tokens: u32,
    /// The closed-loop client that sent it, or [`NO_CLIENT`].
    pub client: u32,
    /// Conversation/session key (for affinity routing and multi-turn prefixes), or
    /// [`NO_SESSION`].
    pub session: u64,
    /// Priority class; 0 is the default (lower number = more important).
    pub class: u8,
    /// Identified leading content of the prompt (see [`Segment`]); empty = unique prompt with
    /// nothing shareable. The segments' tokens never exceed `prompt_tokens`.
    pub content: Vec<Segment>,
}

/// Produces requests on demand: the next open-loop arrival, or a client's next request.
pub struct Workload {
    spec: WorkloadSpec,
    open: Option<arrival::OpenArrivals>,
    /// The replay of a trace workload.
    replay: Option<trace::TraceReplay>,
    /// Why a trace workload stopped early.
    error: Option<TraceError>,
    prompt_rng: ChaCha8Rng,
    output_rng: ChaCha8Rng,
    think_rng: ChaCha8Rng,
    issued: u64,
    end: SimTime,
    /// A fixed list of requests replacing the generated open-loop stream.
    list: Option<list::RequestList>,
}

impl Workload {
    pub fn new(spec: WorkloadSpec, seed: u64) -> Workload {
        let open = match &spec.arrival {
            Some(ArrivalSpec::ClosedLoop(_)) | None => None,
            Some(s) => Some(arrival::OpenArrivals::new(s.clone(), substream(seed, Stream::Arrivals, 0))),
        };
        let (replay, error) = match spec.trace.as_ref().map(|t| trace::TraceReplay::new(t, seed)) {
            Some(Ok(r)) => (Some(r), None),
            Some(Err(e)) => (None, Some(e)),
            None => (None, None),
        };
        // A replay ends with its trace; only duration_s cuts it short.
        let end = if spec.trace.is_some() { spec.duration_s } else { spec.end_s() };
        let end = end.map(SimTime::from_secs_f64).unwrap_or(SimTime::MAX);
        Workload {
            open,
            replay,
            error,
            prompt_rng: substream(seed, Stream::PromptTokens, 0),
            output_rng: substream(seed, Stream::OutputTokens, 0),
            think_rng: substream(seed, Stream::ThinkTime, 0),
            issued: 0,
            end,
            spec,
            list: None,
        }
    }

    /// A workload that plays `requests` (sorted by arrival) as its open-loop arrivals.
    pub fn from_requests(spec: WorkloadSpec, requests: Vec<Request>) -> Workload {
        let mut w = Workload::new(spec, 0);
        w.list = Some(list::RequestList::new(requests));
        w
    }

    pub fn spec(&self) -> &WorkloadSpec {
        &self.spec
    }

    /// Why a trace workload stopped early (a malformed record), if it did.
    pub fn error(&self) -> Option<&TraceError> {
        self.error.as_ref()
    }

    /// Requests issued so far.
    pub fn issued(&self) -> u64 {
        self.issued
    }

    fn exhausted(&self) -> bool {
        self.spec.requests.is_some_and(|n| self.issued >= n)
    }

    fn make(&mut self, arrival: SimTime, client: u32) -> Request {
        let id = self.issued;
        self.issued += 1;
        let prompt = self.spec.prompt_tokens.as_ref().expect("validated").sample(&mut self.prompt_rng);
        let output = self.spec.output_tokens.as_ref().expect("validated").sample(&mut self.output_rng);
        let (prompt, output) = (prompt.min(u32::MAX as u64) as u32, output.min(u32::MAX as u64) as u32);
        Request {
            id,
            arrival,
            prompt_tokens: prompt,
            output_tokens: output,
            client,
            session: NO_SESSION,
            class: 0,
            content: Vec::new(),
        }
    }

    /// The requests that exist at the start: the first open-loop arrival, or each closed-loop
    /// client's first request (all at time zero, as a load generator starts its users).
    pub fn initial(&mut self) -> Vec<Request> {
        if self.list.is_some() {
            return self.next_open().into_iter().collect();
        }
        match &self.spec.arrival {
            Some(ArrivalSpec::ClosedLoop(c)) => {
                let clients = c.clients;
                (0..clients).map_while(|i| (!self.exhausted()).then(|| self.make(SimTime::ZERO, i))).collect()
            }
            _ => self.next_open().into_iter().collect(),
        }
    }

    /// The next open-loop arrival after the previous one, if the workload has not ended.
    pub fn next_open(&mut self) -> Option<Request> {
        if let Some(l) = &mut self.list {
            let r = l.next()?;
            self.issued += 1;
            return Some(r);
        }
        if self.exhausted() {
            return None;
        }
        if self.replay.is_some() {
            return self.next_replayed();
        }
        let t = self.open.as_mut()?.next_s()?;
        let at = SimTime::from_secs_f64(t);
        if at > self.end {
            return None;
        }
        Some(self.make(at, NO_CLIENT))
    }

    /// A closed-loop client's next request after its previous one ended at `now`.
    pub fn next_for_client(&mut self, client: u32, now: SimTime) -> Option<Request> {
        let Some(ArrivalSpec::ClosedLoop(c)) = &self.spec.arrival else {
            return None;
        };
        if self.exhausted() {
            return None;
        }
        let think = arrival::think_time_s(c, &mut self.think_rng);
        let at = now + SimTime::from_secs_f64(think);
        if at > self.end {
            return None;
        }
        Some(self.make(at, client))
    }

    /// The next request of a trace replay; a malformed record ends the workload and is kept in
    /// [`Workload::error`].
    fn next_replayed(&mut self) -> Option<Request> {
        match self.replay.as_mut()?.next()? {
            Ok(mut r) if r.arrival <= self.end => {
                r.id = self.issued;
                self.issued += 1;
                Some(r)
            }
            Ok(_) => None,
            Err(e) => {
                self.error = Some(e);
                self.replay = None;
                None
            }
        }
    }
}
