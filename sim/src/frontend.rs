//! The serving frontend: the API server between a client and the engine's scheduler.
//!
//! An engine's HTTP server parses each request, applies the chat template and tokenizes the
//! prompt before the scheduler sees it, and detokenizes and streams every output token back.
//! vLLM does this in one Python process per `vllm serve` (`--api-server-count`, default 1):
//! requests are processed one after another, so requests sent together reach the scheduler
//! apart, and a client sees each token a little after the GPU produced it.
//!
//! `[frontend]` models both: `servers` first-come-first-served workers (one per instance at
//! the start, by default), each request holding one for `request_us + prompt_token_us ×
//! prompt tokens` before it is routed; and `token_us` between a token's iteration end and the
//! client receiving it (TTFT and end-to-end latency grow by it, the gaps between tokens do not,
//! and a closed-loop client sends its next request that much later).
//!
//! Without the section there is no frontend: requests reach the router when sent and tokens
//! the client when produced (servesim before this section existed).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use crate::config::{check, ConfigError};
use crate::metrics::FrontendSummary;
use crate::time::SimTime;

/// One engine's frontend costs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngineFrontend {
    pub name: &'static str,
    pub request_us: f64,
    pub prompt_token_us: f64,
    pub token_us: f64,
    /// Where the numbers come from (`servesim scenario`-level docs and docs/scenario.md).
    pub source: &'static str,
}

/// The engines' frontends.
pub const FRONTENDS: &[EngineFrontend] = &[
    EngineFrontend {
        name: "vllm",
        request_us: VLLM_REQUEST_US,
        prompt_token_us: VLLM_PROMPT_TOKEN_US,
        token_us: 0.0,
        source: VLLM_SOURCE,
    },
    EngineFrontend {
        name: "sglang",
        request_us: SGLANG_REQUEST_US,
        prompt_token_us: SGLANG_PROMPT_TOKEN_US,
        token_us: 0.0,
        source: SGLANG_SOURCE,
    },
    EngineFrontend {
        name: "trtllm",
        request_us: VLLM_REQUEST_US,
        prompt_token_us: VLLM_PROMPT_TOKEN_US,
        token_us: 0.0,
        source: "TensorRT-LLM's trtllm-serve: not measured; vLLM's numbers stand in",
    },
    EngineFrontend { name: "none", request_us: 0.0, prompt_token_us: 0.0, token_us: 0.0, source: "no frontend cost" },
];

// The per-token tokenization cost is read from vLLM PR #19334 (vllm-project/vllm,
// "microbatch tokenization"): 100 requests with the same ~10,000-token prompt ("hello " × 10000)
// and max_tokens 1, sent at once to one API server, took 1.338 s before the change, 13.4 ms a
// request. Taking all of it as tokenization gives 1.3 µs a prompt token: an upper bound, since
// the 1.338 s also holds the engine's work. The per-request cost (HTTP parsing, the chat
// template, request validation, the hand-off to the engine process) is an estimate, not a
// measurement: no published figure separates it. The scoreboard does not support turning this
// section on by default (docs/fidelity.md, "The frontend").
const VLLM_PROMPT_TOKEN_US: f64 = 1.3;
const VLLM_REQUEST_US: f64 = 1000.0;
const VLLM_SOURCE: &str = "vLLM: 1.3 µs per prompt token read from vLLM PR #19334 (100 ~10k-token prompts \
                           through one API server in 1.338 s, engine work included: an upper bound); 1000 µs per \
                           request estimated, not measured";
const SGLANG_PROMPT_TOKEN_US: f64 = 1.3;
const SGLANG_REQUEST_US: f64 = 1000.0;
const SGLANG_SOURCE: &str = "SGLang: its tokenizer manager is one process like vLLM's API server; vLLM's numbers \
                             stand in (not measured on SGLang)";

impl EngineFrontend {
    pub fn find(name: &str) -> Option<&'static EngineFrontend> {
        FRONTENDS.iter().find(|f| f.name == name)
    }

    pub fn names() -> Vec<&'static str> {
        FRONTENDS.iter().map(|f| f.name).collect()
    }
}

/// `[frontend]`: the API server's cost per request and per token.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FrontendSection {
    /// The engine whose measured costs are the defaults: `vllm`, `sglang`, `trtllm` or `none`.
    /// Default `vllm`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Serial work per request before the scheduler sees it, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_us: Option<f64>,
    /// Serial tokenization work per prompt token, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_token_us: Option<f64>,
    /// Delay from a token's iteration end to the client (detokenize, stream), µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_us: Option<f64>,
    /// Requests processed at once (API server processes). Default: the instances at the start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub servers: Option<u32>,
}

/// The frontend of a run, resolved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrontendSpec {
    pub request: SimTime,
    pub prompt_token_ns: f64,
    pub token: SimTime,
    pub servers: u32,
}

impl FrontendSection {
    /// Checks the keys and writes the engine's defaults into those not given (the resolved
    /// scenario shows the numbers a run used); `instances` is the default server count, left
    /// unwritten so that a derived scenario with other instance counts follows them.
    pub fn resolve(&mut self, path: &str, instances: u32) -> Result<FrontendSpec, ConfigError> {
        let name = self.engine.as_deref().unwrap_or("vllm");
        let e = EngineFrontend::find(name).ok_or_else(|| {
            ConfigError::at(
                &format!("{path}.engine"),
                format!("unknown engine {name:?}; one of: {}", EngineFrontend::names().join(", ")),
            )
        })?;
        let us = |key: &str, v: Option<f64>, default: f64| -> Result<f64, ConfigError> {
            let v = v.unwrap_or(default);
            check(v.is_finite() && (0.0..=1e7).contains(&v), path, key, "must be in [0, 10⁷] µs", v)?;
            Ok(v)
        };
        let request = us("request_us", self.request_us, e.request_us)?;
        let prompt = us("prompt_token_us", self.prompt_token_us, e.prompt_token_us)?;
        let token = us("token_us", self.token_us, e.token_us)?;
        let servers = self.servers.unwrap_or(instances.max(1));
        check((1..=100_000).contains(&servers), path, "servers", "must be in [1, 100000]", servers)?;
        self.engine = Some(e.name.to_string());
        (self.request_us, self.prompt_token_us, self.token_us) = (Some(request), Some(prompt), Some(token));
        Ok(FrontendSpec {
            request: SimTime((request * 1e3).round() as u64),
            prompt_token_ns: prompt * 1e3,
            token: SimTime((token * 1e3).round() as u64),
            servers,
        })
    }
}

/// The frontend's servers while a run goes on.
#[derive(Clone, Debug)]
pub(crate) struct Frontend {
    spec: FrontendSpec,
    /// When each server is next free (a min-heap).
    free_at: BinaryHeap<Reverse<SimTime>>,
    /// Requests sent and not yet handed to the router.
    pub(crate) holding: u64,
    /// Time requests spent in the frontend (waiting and being processed), for the summary.
    total: SimTime,
    max: SimTime,
    passed: u64,
}

impl Frontend {
    pub(crate) fn new(spec: FrontendSpec) -> Frontend {
        Frontend {
            spec,
            free_at: (0..spec.servers).map(|_| Reverse(SimTime::ZERO)).collect(),
            holding: 0,
            total: SimTime::ZERO,
            max: SimTime::ZERO,
            passed: 0,
        }
    }

    /// A request of `prompt` tokens sent at `now`: when the router gets it.
    pub(crate) fn admit(&mut self, now: SimTime, prompt: u32) -> SimTime {
        let Reverse(free) = self.free_at.pop().expect("at least one server");
        let work = self.spec.request + SimTime((self.spec.prompt_token_ns * prompt as f64).round() as u64);
        let done = free.max(now) + work;
        self.free_at.push(Reverse(done));
        self.holding += 1;
        let spent = done - now;
        self.total += spent;
        self.max = self.max.max(spent);
        self.passed += 1;
        done
    }

    /// A request admitted earlier has been handed to the router.
    pub(crate) fn release(&mut self) {
        self.holding -= 1;
    }

    /// The delay from a token's iteration end to the client.
    pub(crate) fn token_delay(&self) -> SimTime {
        self.spec.token
    }

    /// The summary's `frontend` section.
    pub(crate) fn summary(&self) -> FrontendSummary {
        FrontendSummary {
            requests: self.passed,
            mean_ms: if self.passed > 0 { self.total.as_millis_f64() / self.passed as f64 } else { 0.0 },
            max_ms: self.max.as_millis_f64(),
            token_delay_ms: self.spec.token.as_millis_f64(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(request_us: f64, prompt_token_us: f64, servers: u32) -> FrontendSpec {
        let mut f = FrontendSection {
            request_us: Some(request_us),
            prompt_token_us: Some(prompt_token_us),
            servers: Some(servers),
            ..Default::default()
        };
        f.resolve("frontend", 1).unwrap()
    }

    #[test]
    fn one_server_processes_requests_one_after_another() {
        // 1000 µs + 1 µs × 1000 tokens = 2 ms each: three sent together reach the router at
        // 2, 4 and 6 ms; one sent at 10 ms (server idle) at 12 ms.
        let mut f = Frontend::new(spec(1000.0, 1.0, 1));
        let t = |ms: f64| SimTime::from_secs_f64(ms / 1e3);
        assert_eq!(f.admit(t(0.0), 1000), t(2.0));
        assert_eq!(f.admit(t(0.0), 1000), t(4.0));
        assert_eq!(f.admit(t(0.0), 1000), t(6.0));
        assert_eq!(f.admit(t(10.0), 1000), t(12.0));
        assert_eq!(f.holding, 4);
        let sum = f.summary();
        assert_eq!((sum.requests, sum.max_ms, sum.mean_ms), (4, 6.0, 14.0 / 4.0));
    }

    #[test]
    fn two_servers_take_requests_in_parallel() {
        let mut f = Frontend::new(spec(500.0, 0.0, 2));
        let t = |ms: f64| SimTime::from_secs_f64(ms / 1e3);
        let done: Vec<SimTime> = (0..5).map(|_| f.admit(SimTime::ZERO, 7)).collect();
        assert_eq!(done, vec![t(0.5), t(0.5), t(1.0), t(1.0), t(1.5)]);
    }

    #[test]
    fn engines_give_the_defaults_and_keys_override_them() {
        let s = FrontendSection::default().resolve("frontend", 3).unwrap();
        let v = EngineFrontend::find("vllm").unwrap();
        assert_eq!(s.request, SimTime((v.request_us * 1e3) as u64));
        assert_eq!(s.prompt_token_ns, v.prompt_token_us * 1e3);
        assert_eq!(s.servers, 3);
        let none =
            FrontendSection { engine: Some("none".into()), ..Default::default() }.resolve("frontend", 1).unwrap();
        assert_eq!((none.request, none.prompt_token_ns, none.token), (SimTime::ZERO, 0.0, SimTime::ZERO));
        let e =
            FrontendSection { engine: Some("tgi".into()), ..Default::default() }.resolve("frontend", 1).unwrap_err();
        assert!(e.to_string().contains("frontend.engine") && e.to_string().contains("vllm, sglang"), "{e}");
        let e = FrontendSection { request_us: Some(-1.0), ..Default::default() }.resolve("frontend", 1).unwrap_err();
        assert!(e.to_string().contains("frontend.request_us") && e.to_string().contains("-1"), "{e}");
        let e = FrontendSection { servers: Some(0), ..Default::default() }.resolve("frontend", 1).unwrap_err();
        assert!(e.to_string().contains("frontend.servers"), "{e}");
    }
}
