//! Workloads: the stream of requests a run serves.
//!
//! Requests are generated lazily, one at a time, so a run's memory does not grow with the
//! number of requests it will see. Each random aspect (arrival gaps, prompt lengths, output
//! lengths, think times) has its own random substream.

pub mod arrival;
#[cfg(test)]
mod bounds_tests;
pub(crate) mod daily;
pub mod fit;
pub mod length;
pub(crate) mod list;
pub mod offered;
pub(crate) mod prefix;
pub mod profile;
pub mod trace;

use crate::rng::SimRng;
use rand::RngExt;
use serde::{Deserialize, Serialize};

pub use arrival::ArrivalSpec;
pub use length::LengthDist;
pub use prefix::PrefixSpec;
pub use trace::{TraceError, TraceSpec};

use crate::config::{check, ConfigError};
use crate::rng::{substream, Stream};
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
    /// `[workload.prefix]`: shared system prompts, RAG documents, multi-turn sessions. With it,
    /// `prompt_tokens` is the length of each request's new user tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<PrefixSpec>,
    /// Weights of priority classes 0, 1, 2, ... (0 is the most important); each request draws
    /// its class. Default: every request in class 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_weights: Option<Vec<f64>>,
}

/// The longest workload: 10⁹ s (31 years; simulated time itself ends at 584 years).
pub const MAX_DURATION_S: f64 = 1e9;

impl WorkloadSpec {
    /// A workload that replays `trace` and nothing else.
    pub fn of_trace(trace: TraceSpec) -> WorkloadSpec {
        WorkloadSpec {
            duration_s: None,
            requests: None,
            arrival: None,
            prompt_tokens: None,
            output_tokens: None,
            trace: Some(trace),
            prefix: None,
            class_weights: None,
        }
    }

    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        if let Some(d) = self.duration_s {
            check(d.is_finite() && d > 0.0 && d <= MAX_DURATION_S, path, "duration_s", "must be in (0, 1e9] s", d)?;
        }
        if let Some(n) = self.requests {
            check(n >= 1, path, "requests", "must be ≥ 1", n)?;
        }
        if self.trace.is_some() {
            for (key, given) in [("prefix", self.prefix.is_some()), ("class_weights", self.class_weights.is_some())] {
                if given {
                    return Err(ConfigError::at(
                        &format!("{path}.{key}"),
                        "not used with a trace (a trace carries its own prefixes and classes)".into(),
                    ));
                }
            }
        }
        let (arrival, prompt, output) = match (&self.trace, &self.arrival, &self.prompt_tokens, &self.output_tokens) {
            (Some(t), None, None, None) => return t.validate(&format!("{path}.trace")),
            (Some(_), ..) => {
                return Err(ConfigError::at(
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
                return Err(ConfigError::at(
                    &format!("{path}.{key}"),
                    "missing: give arrival, prompt_tokens and output_tokens, or a trace".into(),
                ));
            }
        };
        arrival.validate(&format!("{path}.arrival"))?;
        if self.duration_s.is_none() && self.requests.is_none() && arrival.natural_duration_s().is_none() {
            return Err(ConfigError::at(path, "set duration_s or requests: the workload needs an end".into()));
        }
        prompt.validate(&format!("{path}.prompt_tokens"))?;
        output.validate(&format!("{path}.output_tokens"))?;
        if let Some(p) = &self.prefix {
            p.validate(&format!("{path}.prefix"))?;
        }
        if let Some(w) = &self.class_weights {
            check(!w.is_empty() && w.len() <= 256, path, "class_weights", "must list 1 to 256 weights", w.len())?;
            for (i, &x) in w.iter().enumerate() {
                check(x.is_finite() && x >= 0.0, path, &format!("class_weights[{i}]"), "must be ≥ 0", x)?;
            }
            let total: f64 = w.iter().sum();
            check(total > 0.0, path, "class_weights", "must not all be 0, sum", total)?;
        }
        Ok(())
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

    /// The highest scheduled rate (of a phase schedule or a daily curve), else the mean rate.
    pub fn peak_rate(&self) -> Option<f64> {
        match &self.arrival {
            Some(a) => a.peak_rate(),
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
    prompt_rng: SimRng,
    output_rng: SimRng,
    /// The prompt and output length distributions, built once (synthetic workloads).
    lengths: Option<(length::Sampler, length::Sampler)>,
    think_rng: SimRng,
    issued: u64,
    end: SimTime,
    /// Prefix structure (system prompts, documents, sessions), when the spec has one.
    prefix: Option<prefix::PrefixGen>,
    class_rng: SimRng,
    /// A fixed list of requests replacing the generated open-loop arrivals.
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
            lengths: spec
                .prompt_tokens
                .as_ref()
                .zip(spec.output_tokens.as_ref())
                .map(|(p, o)| (p.sampler(), o.sampler())),
            think_rng: substream(seed, Stream::ThinkTime, 0),
            issued: 0,
            end,
            prefix: spec.prefix.clone().map(|p| prefix::PrefixGen::new(p, seed)),
            class_rng: substream(seed, Stream::Class, 0),
            list: None,
            spec,
        }
    }

    /// A workload that replays `requests` (open-loop, at their own arrival times) instead of
    /// generating them; `spec` still bounds it (`requests`, `duration_s`).
    pub fn from_requests(spec: WorkloadSpec, seed: u64, requests: Vec<Request>) -> Workload {
        let mut w = Workload::new(spec, seed);
        w.list = Some(list::RequestList::new(requests));
        w
    }

    /// Whether `req` arrived on the open-loop schedule (so its arrival schedules the next one):
    /// requests of no client, and the first turn of an open-loop session.
    pub fn is_open(&self, req: &Request) -> bool {
        req.client == NO_CLIENT
            || (req.client >= prefix::SESSION_CLIENT_BASE
                && self.prefix.as_ref().is_some_and(|p| p.first_turn(req.client)))
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
        let (prompt_len, output_len) = self.lengths.as_ref().expect("validated: a synthetic workload has both lengths");
        let prompt = prompt_len.sample(&mut self.prompt_rng);
        let output = output_len.sample(&mut self.output_rng);
        let (prompt, output) = (prompt.min(u32::MAX as u64) as u32, output.min(u32::MAX as u64) as u32);
        let mut req = Request {
            id,
            arrival,
            prompt_tokens: prompt,
            output_tokens: output,
            client,
            session: NO_SESSION,
            class: 0,
            content: Vec::new(),
        };
        if let Some(p) = &mut self.prefix {
            // Open-loop sessions each get a client slot, so that their next turn follows the
            // answer to this one.
            if p.has_sessions() && client == NO_CLIENT {
                req.client = p.new_slot();
            }
            let c = p.compose(id, req.client, prompt as u64, output as u64);
            req.prompt_tokens = c.prompt_tokens.min(u32::MAX as u64) as u32;
            req.content = c.content;
            if let Some(s) = c.session {
                req.session = s;
            }
        }
        if let Some(w) = &self.spec.class_weights {
            let total: f64 = w.iter().sum();
            let mut u = self.class_rng.random::<f64>() * total;
            req.class = (w.len() - 1) as u8;
            for (i, &x) in w.iter().enumerate() {
                if u < x {
                    req.class = i as u8;
                    break;
                }
                u -= x;
            }
        }
        req
    }

    /// The requests that exist at the start: the first open-loop arrival, or each closed-loop
    /// client's first request (at time zero, or evenly over the ramp, as a load generator starts
    /// its users).
    pub fn initial(&mut self) -> Vec<Request> {
        if self.list.is_some() {
            return self.next_open().into_iter().collect();
        }
        match &self.spec.arrival {
            Some(ArrivalSpec::ClosedLoop(c)) => {
                let (clients, ramp) = (c.clients, c.ramp_s);
                (0..clients)
                    .map_while(|i| {
                        let at = SimTime::from_secs_f64(ramp * i as f64 / clients as f64);
                        (!self.exhausted()).then(|| self.make(at, i))
                    })
                    .collect()
            }
            _ => self.next_open().into_iter().collect(),
        }
    }

    /// The next open-loop arrival after the previous one, if the workload has not ended.
    pub fn next_open(&mut self) -> Option<Request> {
        if self.exhausted() {
            return None;
        }
        if let Some(list) = &mut self.list {
            let r = list.pop()?;
            if r.arrival > self.end {
                return None;
            }
            self.issued += 1;
            return Some(r);
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
        // A session continues with its next turn after the user's think time.
        let exhausted = self.exhausted();
        if let Some(p) = &mut self.prefix {
            if p.continues(client) {
                let at = now + SimTime::from_secs_f64(p.think_s());
                if exhausted || at > self.end {
                    p.end(client);
                    return None;
                }
                return Some(self.make(at, client));
            }
        }
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
