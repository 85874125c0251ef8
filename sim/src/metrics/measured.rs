//! Measured per-request files from real serving runs, read into [`Outcome`]s and the request
//! list to replay.
//!
//! ```text
//!   vLLM benchmark_serving / `vllm bench serve` JSON (--save-result --save-detailed):
//!     input_lens, output_lens, ttfts [s], itls [[s]], start_times [s] (newer versions),
//!     e2els or latencies [s] (some versions), errors
//!   AIPerf profile_export.jsonl (or a JSON array of its records):
//!     metadata.request_start_ns, metadata.benchmark_phase, metrics.input_sequence_length,
//!     output_sequence_length, time_to_first_token, request_latency ({value, unit}), error
//!   SGLang bench_serving --output-file (JSON lines, one run per line, the same per-request
//!     arrays as vLLM's): the last run is read, and said so
//!   per-request JSONL: one object per request with its timestamps, e.g.
//!     {"arrival_time": 12.5, "queued_time": 12.51, "first_token_time": 12.9,
//!      "last_token_time": 15.2, "prompt_tokens": 812, "output_tokens": 128}
//!     (times in seconds; `_ns`, `_ms` or `_s` key suffixes give the unit; `error` or a
//!     `status` other than finished marks a failure)
//!   CSV with a header: servesim's requests.csv, or the same columns under AIPerf's names
//! ```
//! Arrival times are taken relative to the first request. Failed requests (an error, no
//! output) are left out of both the replay and the statistics, and counted. The library reads
//! text; the binary opens the file.

use std::collections::HashMap;

use serde_json::Value;

use super::compare::Outcome;
use crate::time::SimTime;
use crate::workload::trace::parse_decimal_ns;

/// Which kind of file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeasuredFormat {
    Vllm,
    Aiperf,
    /// One JSON object per request with its timestamps.
    Jsonl,
    Csv,
}

impl MeasuredFormat {
    pub fn name(self) -> &'static str {
        match self {
            MeasuredFormat::Vllm => "vllm",
            MeasuredFormat::Aiperf => "aiperf",
            MeasuredFormat::Jsonl => "jsonl",
            MeasuredFormat::Csv => "csv",
        }
    }

    /// Recognises a file by its content: JSON objects with `metadata` and `metrics` (one per
    /// line, or in an array) are AIPerf's; objects with an arrival and a first-token time are
    /// per-request JSONL; other JSON (vLLM's and SGLang's result files, with `ttfts`) is vLLM's;
    /// anything else CSV.
    pub fn detect(text: &str) -> MeasuredFormat {
        let t = text.trim_start();
        if t.starts_with('[') {
            return MeasuredFormat::Aiperf;
        }
        if t.starts_with('{') {
            let first_line = t.lines().next().unwrap_or("");
            if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(first_line) {
                if o.contains_key("metadata") || o.contains_key("metrics") {
                    return MeasuredFormat::Aiperf;
                }
                if timed(&o, ARRIVAL_KEYS).is_some() && timed(&o, FIRST_KEYS).is_some() {
                    return MeasuredFormat::Jsonl;
                }
                if ENGINE_KEYS.iter().all(|k| o.contains_key(*k)) {
                    return MeasuredFormat::Jsonl;
                }
            }
            return MeasuredFormat::Vllm;
        }
        MeasuredFormat::Csv
    }
}

/// One request as the file states it, on the file's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeasuredRequest {
    pub(crate) arrival_ns: i64,
    pub(crate) prompt_tokens: u32,
    pub(crate) output_tokens: u32,
    pub(crate) ttft_ns: Option<i64>,
    pub(crate) e2e_ns: Option<i64>,
    /// Finished with its output (else rejected or unfinished: replayed, and a miss).
    pub(crate) finished: bool,
    pub(crate) counted: bool,
}

/// A measured run.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredRun {
    pub format: MeasuredFormat,
    /// Requests sorted by arrival (stable: equal arrivals keep the file's order).
    pub requests: Vec<MeasuredRequest>,
    /// Failed requests left out (error, or no output).
    pub failed: u64,
    /// What a reader should know about how the file was read.
    pub notes: Vec<String>,
    /// Its latencies are the engine's own (from its queue to its tokens), not the client's.
    pub engine_clock: bool,
}

impl MeasuredRun {
    fn origin(&self) -> i64 {
        self.requests.first().map_or(0, |r| r.arrival_ns)
    }

    /// Outcomes with arrivals relative to the first request, in arrival order.
    pub fn outcomes(&self) -> Vec<Outcome> {
        let t0 = self.origin();
        self.requests
            .iter()
            .map(|r| {
                let arrival = SimTime((r.arrival_ns - t0) as u64);
                Outcome {
                    arrival,
                    prompt_tokens: r.prompt_tokens,
                    output_tokens: r.output_tokens,
                    first_token: r.ttft_ns.map(|t| arrival + SimTime(t as u64)),
                    finish: if r.finished { r.e2e_ns.map(|t| arrival + SimTime(t as u64)) } else { None },
                    counted: r.counted,
                }
            })
            .collect()
    }

    /// The requests to replay as a CSV trace (`arrival_ns,prompt_tokens,output_tokens`, ns
    /// after the first request), for a `csv` trace with `arrival_unit = "ns"`.
    pub fn replay_csv(&self) -> String {
        let t0 = self.origin();
        let mut s = String::with_capacity(32 * (self.requests.len() + 1));
        s.push_str("arrival_ns,prompt_tokens,output_tokens\n");
        for r in &self.requests {
            s.push_str(&format!("{},{},{}\n", r.arrival_ns - t0, r.prompt_tokens, r.output_tokens));
        }
        s
    }
}

/// Why a measured file cannot be replayed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum MeasuredError {
    /// Not a file of the format, or a bad value: one line naming the file and the line, field
    /// or key.
    #[error("{0}")]
    Unreadable(String),
    /// Read, but every request in it failed.
    #[error("{file}: no request to replay ({failed} failed)")]
    NothingToReplay { file: String, failed: u64 },
    /// Read, but no request in it is measured: every one is warm-up or marked not measured.
    #[error(
        "{file}: no request to compare: all {replayed} that succeeded are warm-up or marked not measured \
         (they would be replayed, never counted)"
    )]
    NothingToCompare { file: String, replayed: usize },
}

/// Keys of a per-request record's times, each with its unit in ns (a bare key is seconds).
const ARRIVAL_KEYS: &[&str] = &["arrival_time", "arrival", "start_time", "sent_time"];
const QUEUED_KEYS: &[&str] = &["queued_time", "queued", "scheduled_time"];
const FIRST_KEYS: &[&str] = &["first_token_time", "first_token"];
const LAST_KEYS: &[&str] = &["last_token_time", "last_token", "finish_time", "end_time"];

/// The first of `keys` the record has, with any unit suffix: (key as written, ns per unit).
fn timed(o: &serde_json::Map<String, Value>, keys: &[&str]) -> Option<(String, i64)> {
    keys.iter().find_map(|k| {
        [("", 1_000_000_000), ("_s", 1_000_000_000), ("_ms", 1_000_000), ("_ns", 1)].iter().find_map(
            |(suffix, unit)| {
                let key = format!("{k}{suffix}");
                o.contains_key(&key).then_some((key, *unit))
            },
        )
    })
}

/// The JSON objects of a JSON-lines text, one per non-blank line, each with the `file:line`
/// its errors name.
fn json_lines<'a>(
    text: &'a str,
    label: &'a str,
) -> impl Iterator<Item = Result<(String, serde_json::Map<String, Value>), String>> + 'a {
    text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).map(move |(i, line)| {
        let at = format!("{label}:{}", i + 1);
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(o)) => Ok((at, o)),
            Ok(_) => Err(format!("{at}: expected a JSON object per request")),
            Err(e) => Err(format!("{at}: not JSON: {e}")),
        }
    })
}

/// vLLM's engine-side request stats (vllm/v1/metrics/stats.py `RequestStateStats`):
/// `queued_ts`, `scheduled_ts`, `first_token_ts`, `last_token_ts` on the engine core's
/// monotonic clock (seconds), `arrival_time` on the API server's wall clock.
const ENGINE_KEYS: [&str; 3] = ["queued_ts", "first_token_ts", "last_token_ts"];

/// Per-request JSONL of vLLM's engine-side stats: arrivals (their gaps) from `arrival_time`,
/// latencies from the engine's queue entry, each on its own clock.
fn engine_stats(text: &str, label: &str) -> Result<MeasuredRun, String> {
    let mut requests = Vec::new();
    let mut failed = 0;
    for rec in json_lines(text, label) {
        let (at, o) = rec?;
        let o = &o;
        let secs = |key: &str| -> Result<Option<f64>, String> {
            match o.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v
                    .as_f64()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .map(Some)
                    .ok_or_else(|| format!("{at}: {key}: {v} is not a time in seconds")),
            }
        };
        let count = |keys: &[&str]| -> Result<u32, String> {
            let (key, v) = keys
                .iter()
                .find_map(|k| o.get(*k).map(|v| (*k, v)))
                .ok_or_else(|| format!("{at}: no {} key", keys.join(" or ")))?;
            v.as_f64()
                .ok_or_else(|| format!("{at}: {key}: {v} is not a token count"))
                .and_then(|x| tokens(x, &format!("{at}: {key}")))
        };
        let output = count(&["output_toks", "num_generation_tokens", "output_tokens", "completion_tokens"])?;
        let (queued, first, last) = (secs("queued_ts")?, secs("first_token_ts")?, secs("last_token_ts")?);
        let errored = o.get("error").is_some_and(|e| !e.is_null() && e != "" && e != false);
        let (Some(queued), Some(first), Some(last)) = (queued, first, last) else {
            failed += 1;
            continue;
        };
        if errored || output == 0 {
            failed += 1;
            continue;
        }
        if !(queued <= first && first <= last) {
            return Err(format!("{at}: times out of order (queued_ts ≤ first_token_ts ≤ last_token_ts)"));
        }
        let arrival = secs("arrival_time")?.ok_or_else(|| format!("{at}: arrival_time: missing"))?;
        requests.push(MeasuredRequest {
            arrival_ns: secs_to_ns(arrival, &format!("{at}: arrival_time"))?,
            prompt_tokens: count(&["input_toks", "num_prompt_tokens", "prompt_tokens", "input_tokens"])?,
            output_tokens: output,
            ttft_ns: Some(secs_to_ns(first - queued, &format!("{at}: first_token_ts"))?),
            e2e_ns: Some(secs_to_ns(last - queued, &format!("{at}: last_token_ts"))?),
            finished: true,
            counted: true,
        });
    }
    Ok(MeasuredRun {
        format: MeasuredFormat::Jsonl,
        requests,
        failed,
        notes: vec!["vLLM engine-side stats: latencies from the engine's queue (queued_ts, its monotonic clock), \
                     arrival gaps from arrival_time (the API server's wall clock); the client's path is not in them"
            .into()],
        engine_clock: true,
    })
}

/// Per-request JSONL: one object per request with its timestamps.
fn jsonl(text: &str, label: &str) -> Result<MeasuredRun, String> {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(first) {
        if ENGINE_KEYS.iter().all(|k| o.contains_key(*k)) {
            return engine_stats(text, label);
        }
    }
    let mut requests = Vec::new();
    let mut failed = 0;
    for rec in json_lines(text, label) {
        let (at, o) = rec?;
        let o = &o;
        let time = |keys: &[&str], what: &str| -> Result<Option<i64>, String> {
            let Some((key, unit)) = timed(o, keys) else { return Ok(None) };
            match &o[&key] {
                Value::Null => Ok(None),
                Value::Number(n) => {
                    let ns =
                        n.as_f64().map(|x| (x * unit as f64).round()).filter(|x| x.is_finite() && x.abs() < 9.0e18);
                    ns.map(|x| Some(x as i64)).ok_or_else(|| format!("{at}: {key}: {n} is not a time"))
                }
                other => Err(format!("{at}: {key}: {other} is not a number ({what})")),
            }
        };
        let count = |keys: &[&str]| -> Result<u32, String> {
            let (key, v) = keys
                .iter()
                .find_map(|k| o.get(*k).map(|v| (*k, v)))
                .ok_or_else(|| format!("{at}: no {} key", keys.join(" or ")))?;
            v.as_f64()
                .ok_or_else(|| format!("{at}: {key}: {v} is not a token count"))
                .and_then(|x| tokens(x, &format!("{at}: {key}")))
        };
        let status = o.get("status").and_then(Value::as_str).unwrap_or("");
        let errored = o.get("error").is_some_and(|e| !e.is_null() && e != "" && e != false)
            || status == "error"
            || status == "failed";
        let output = count(&["output_tokens", "output_len", "completion_tokens"])?;
        if errored || output == 0 {
            failed += 1;
            continue;
        }
        let arrival = time(ARRIVAL_KEYS, "the arrival")?
            .ok_or_else(|| format!("{at}: no arrival time ({})", ARRIVAL_KEYS.join(", ")))?;
        let first = time(FIRST_KEYS, "the first token")?;
        let last = time(LAST_KEYS, "the last token")?;
        let finished = !matches!(status, "rejected" | "in_flight" | "timed_out");
        if finished && (first.is_none() || last.is_none()) {
            return Err(format!("{at}: a finished request needs a first-token and a last-token time"));
        }
        if let Some(q) = time(QUEUED_KEYS, "the queue entry")? {
            if q < arrival || first.is_some_and(|f| q > f) {
                return Err(format!("{at}: the queued time is not between the arrival and the first token"));
            }
        }
        let ttft = first.map(|f| f - arrival);
        let e2e = last.map(|l| l - arrival);
        if ttft.is_some_and(|t| t < 0)
            || e2e.is_some_and(|e| e < 0)
            || matches!((ttft, e2e), (Some(t), Some(e)) if e < t)
        {
            return Err(format!("{at}: times out of order (arrival ≤ first token ≤ last token)"));
        }
        requests.push(MeasuredRequest {
            arrival_ns: arrival,
            prompt_tokens: count(&["prompt_tokens", "input_len", "input_tokens"])?,
            output_tokens: output,
            ttft_ns: ttft,
            e2e_ns: if finished { e2e } else { None },
            finished,
            counted: o.get("warmup") != Some(&Value::Bool(true)),
        });
    }
    Ok(MeasuredRun { format: MeasuredFormat::Jsonl, requests, failed, notes: Vec::new(), engine_clock: false })
}

/// The names `--column KEY=NAME` may give a file's column (or JSON key) as.
pub fn column_keys() -> Vec<String> {
    let mut k: Vec<String> = ARRIVAL.iter().map(|x| x.0.to_string()).collect();
    k.extend([PROMPT[0], OUTPUT[0]].map(String::from));
    k.extend(TTFT.iter().chain(E2E).map(|x| x.0.to_string()));
    for base in [ARRIVAL_KEYS[0], FIRST_KEYS[0], LAST_KEYS[0]] {
        k.extend(["_s", "_ms", "_ns"].map(|suffix| format!("{base}{suffix}")));
    }
    k.extend(
        ["status", "error", "measured", "queued_ts", "first_token_ts", "last_token_ts", "arrival_time"]
            .map(String::from),
    );
    k.sort_unstable();
    k.dedup();
    k
}

/// The file's text with columns (CSV header names) or keys (JSON lines) renamed: each
/// `(key, name)` makes the file's `name` read as `key`. Errors name a key servesim does not
/// read and a name the file does not have.
pub fn rename_columns(text: &str, label: &str, renames: &[(String, String)]) -> Result<String, MeasuredError> {
    if renames.is_empty() {
        return Ok(text.to_string());
    }
    let keys = column_keys();
    for (k, _) in renames {
        if !keys.contains(k) {
            return Err(MeasuredError::Unreadable(format!(
                "--column {k}=...: {k} is not a column servesim reads (one of {})",
                keys.join(", ")
            )));
        }
    }
    let t = text.trim_start();
    let mut seen = vec![false; renames.len()];
    let out = if t.starts_with('{') {
        let mut out = String::with_capacity(text.len());
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let mut v: Value = serde_json::from_str(line)
                .map_err(|e| MeasuredError::Unreadable(format!("{label}:{}: not JSON: {e}", i + 1)))?;
            if let Some(o) = v.as_object_mut() {
                for (j, (k, name)) in renames.iter().enumerate() {
                    if let Some(x) = o.remove(name) {
                        o.insert(k.clone(), x);
                        seen[j] = true;
                    }
                }
            }
            out.push_str(&v.to_string());
            out.push('\n');
        }
        out
    } else {
        let (head, rest) = text.split_once('\n').unwrap_or((text, ""));
        let mut rd = csv::ReaderBuilder::new().has_headers(false).from_reader(head.as_bytes());
        let mut cols: Vec<String> = match rd.records().next() {
            Some(Ok(r)) => r.iter().map(|c| c.trim().to_string()).collect(),
            _ => return Err(MeasuredError::Unreadable(format!("{label}:1: no header line"))),
        };
        for (j, (k, name)) in renames.iter().enumerate() {
            for c in cols.iter_mut().filter(|c| *c == name) {
                *c = k.clone();
                seen[j] = true;
            }
        }
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&cols).map_err(|e| MeasuredError::Unreadable(format!("{label}:1: {e}")))?;
        let mut out = String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default();
        out.push_str(rest);
        out
    };
    if let Some(j) = seen.iter().position(|s| !s) {
        let (k, name) = &renames[j];
        return Err(MeasuredError::Unreadable(format!(
            "{label}: --column {k}={name}: the file has no column or key {name}"
        )));
    }
    Ok(out)
}

/// Reads a measured file (`label` names it in errors).
pub fn parse(text: &str, label: &str, format: Option<MeasuredFormat>) -> Result<MeasuredRun, MeasuredError> {
    let format = format.unwrap_or_else(|| MeasuredFormat::detect(text));
    let mut run = match format {
        MeasuredFormat::Vllm => vllm(text, label),
        MeasuredFormat::Aiperf => aiperf(text, label),
        MeasuredFormat::Jsonl => jsonl(text, label),
        MeasuredFormat::Csv => csv_file(text, label),
    }
    .map_err(MeasuredError::Unreadable)?;
    if run.requests.is_empty() {
        return Err(MeasuredError::NothingToReplay { file: label.to_string(), failed: run.failed });
    }
    if !run.requests.iter().any(|r| r.counted) {
        return Err(MeasuredError::NothingToCompare { file: label.to_string(), replayed: run.requests.len() });
    }
    run.requests.sort_by_key(|r| r.arrival_ns);
    Ok(run)
}

fn tokens(x: f64, what: &str) -> Result<u32, String> {
    if x.is_finite() && x >= 0.0 && x.fract() == 0.0 && x < 4.0e9 {
        Ok(x as u32)
    } else {
        Err(format!("{what}: {x} is not a token count"))
    }
}

fn secs_to_ns(x: f64, what: &str) -> Result<i64, String> {
    let ns = (x * 1e9).round();
    if ns.is_finite() && ns.abs() < 9.0e18 {
        Ok(ns as i64)
    } else {
        Err(format!("{what}: {x} is not a time in seconds"))
    }
}

fn vllm(text: &str, label: &str) -> Result<MeasuredRun, String> {
    // SGLang's bench_serving appends one result object per line to its output file: the last
    // line is the latest run.
    let lines: Vec<(usize, &str)> = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).collect();
    let one: Result<Value, _> = serde_json::from_str(text);
    let (v, note) = match one {
        Ok(v) => (v, None),
        Err(_) if lines.len() > 1 && lines.iter().all(|(_, l)| l.trim_start().starts_with('{')) => {
            let (i, last) = *lines.last().expect("more than one line");
            let v = serde_json::from_str(last).map_err(|e| format!("{label}:{}: not JSON: {e}", i + 1))?;
            (
                v,
                Some(format!(
                    "{} runs in the file, one per line (SGLang bench_serving appends): line {} read",
                    lines.len(),
                    i + 1
                )),
            )
        }
        Err(e) => return Err(format!("{label}: not JSON: {e}")),
    };
    let mut run = vllm_object(&v, label)?;
    run.notes.extend(note);
    Ok(run)
}

fn vllm_object(v: &Value, label: &str) -> Result<MeasuredRun, String> {
    let o = v.as_object().ok_or_else(|| format!("{label}: expected a JSON object (vLLM's result file)"))?;
    let array = |key: &str| -> Result<Option<&Vec<Value>>, String> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(_) => Err(format!("{label}: {key}: expected an array")),
        }
    };
    let need = |key: &str| -> Result<&Vec<Value>, String> {
        array(key)?.ok_or_else(|| {
            format!("{label}: {key}: missing (vLLM writes per-request data with --save-result --save-detailed)")
        })
    };
    let (inputs, outputs, ttfts, itls) = (need("input_lens")?, need("output_lens")?, need("ttfts")?, need("itls")?);
    let n = inputs.len();
    for (key, a) in [("output_lens", outputs), ("ttfts", ttfts), ("itls", itls)] {
        if a.len() != n {
            return Err(format!("{label}: {key}: {} entries where input_lens has {n}", a.len()));
        }
    }
    let starts = array("start_times")?;
    let e2es = match array("e2els")? {
        Some(a) => Some(("e2els", a)),
        None => array("latencies")?.map(|a| ("latencies", a)),
    };
    let errors = array("errors")?;
    let successes = array("successes")?;
    for (key, a) in [("start_times", starts), ("errors", errors), ("successes", successes)]
        .into_iter()
        .chain(std::iter::once(("e2els", e2es.map(|e| e.1))))
    {
        if let Some(a) = a {
            if a.len() != n {
                return Err(format!("{label}: {key}: {} entries where input_lens has {n}", a.len()));
            }
        }
    }
    let mut notes = Vec::new();
    if starts.is_none() {
        let rate = o.get("request_rate");
        let all_at_once = match rate {
            Some(Value::String(s)) => s.eq_ignore_ascii_case("inf"),
            Some(Value::Number(x)) => x.as_f64().is_some_and(|x| x.is_infinite()),
            _ => false,
        };
        if !all_at_once {
            return Err(format!(
                "{label}: start_times: missing, and request_rate is {} (not inf): the arrival times cannot be \
                 recovered; use a vLLM version that saves start_times, or a CSV with an arrival column",
                rate.map_or("absent".to_string(), |r| r.to_string())
            ));
        }
        notes.push("no start_times and request_rate inf: every request replayed at time 0".into());
        if o.get("max_concurrency").is_some_and(|c| !c.is_null()) {
            notes.push("max_concurrency was set: the client held requests back, which the replay does not".into());
        }
    }
    let num = |a: &Vec<Value>, i: usize, key: &str| -> Result<f64, String> {
        a[i].as_f64().ok_or_else(|| format!("{label}: {key}[{i}]: expected a number, got {}", a[i]))
    };
    let mut requests = Vec::with_capacity(n);
    let mut failed = 0;
    for i in 0..n {
        let err = errors.and_then(|e| e[i].as_str()).is_some_and(|s| !s.is_empty());
        let ok = successes.is_none_or(|s| s[i].as_bool().unwrap_or(true));
        let output = tokens(num(outputs, i, "output_lens")?, &format!("{label}: output_lens[{i}]"))?;
        if err || !ok || output == 0 {
            failed += 1;
            continue;
        }
        let prompt = tokens(num(inputs, i, "input_lens")?, &format!("{label}: input_lens[{i}]"))?;
        let ttft = secs_to_ns(num(ttfts, i, "ttfts")?, &format!("{label}: ttfts[{i}]"))?;
        let e2e = match e2es {
            Some((key, a)) => secs_to_ns(num(a, i, key)?, &format!("{label}: {key}[{i}]"))?,
            None => {
                let gaps = itls[i].as_array().ok_or_else(|| format!("{label}: itls[{i}]: expected an array"))?;
                let mut sum = ttft;
                for (j, g) in gaps.iter().enumerate() {
                    let g = g.as_f64().ok_or_else(|| format!("{label}: itls[{i}][{j}]: expected a number"))?;
                    sum += secs_to_ns(g, &format!("{label}: itls[{i}][{j}]"))?;
                }
                sum
            }
        };
        let arrival = match starts {
            Some(a) => secs_to_ns(num(a, i, "start_times")?, &format!("{label}: start_times[{i}]"))?,
            None => 0,
        };
        if ttft < 0 || e2e < ttft {
            return Err(format!("{label}: request {i}: TTFT {ttft} ns and E2E {e2e} ns are not 0 ≤ TTFT ≤ E2E"));
        }
        requests.push(MeasuredRequest {
            arrival_ns: arrival,
            prompt_tokens: prompt,
            output_tokens: output,
            ttft_ns: Some(ttft),
            e2e_ns: Some(e2e),
            finished: true,
            counted: true,
        });
    }
    if e2es.is_none() {
        notes.push("E2E = TTFT + the sum of ITLs (the file has no per-request latencies)".into());
    }
    Ok(MeasuredRun { format: MeasuredFormat::Vllm, requests, failed, notes, engine_clock: false })
}

/// `{"value": x, "unit": "ms"}` (or a bare number, in ms) as nanoseconds.
fn aiperf_time(m: &serde_json::Map<String, Value>, key: &str, at: &str) -> Result<Option<i64>, String> {
    let Some(v) = m.get(key) else { return Ok(None) };
    let (x, unit) = match v {
        Value::Object(o) => {
            (o.get("value").and_then(Value::as_f64), o.get("unit").and_then(Value::as_str).unwrap_or("ms"))
        }
        Value::Number(n) => (n.as_f64(), "ms"),
        Value::Null => return Ok(None),
        _ => (None, "ms"),
    };
    let x = x.ok_or_else(|| format!("{at}: metrics.{key}: expected {{\"value\": number, \"unit\": ...}}"))?;
    let scale = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" | "sec" => 1e9,
        u => return Err(format!("{at}: metrics.{key}: unit {u:?} is not a time unit (ns, us, ms, s)")),
    };
    let ns = (x * scale).round();
    if !(0.0..9.0e18).contains(&ns) {
        return Err(format!("{at}: metrics.{key}: {x} {unit} is not a duration"));
    }
    Ok(Some(ns as i64))
}

fn aiperf_count(m: &serde_json::Map<String, Value>, key: &str, at: &str) -> Result<Option<u32>, String> {
    let x = match m.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(o)) => o.get("value").and_then(Value::as_f64),
        Some(v) => v.as_f64(),
    };
    let x = x.ok_or_else(|| format!("{at}: metrics.{key}: expected a token count"))?;
    tokens(x, &format!("{at}: metrics.{key}")).map(Some)
}

fn aiperf(text: &str, label: &str) -> Result<MeasuredRun, String> {
    let records: Vec<(String, Value)> = if text.trim_start().starts_with('[') {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("{label}: not JSON: {e}"))?;
        let a = v.as_array().cloned().unwrap_or_default();
        a.into_iter().enumerate().map(|(i, r)| (format!("{label}: record {i}"), r)).collect()
    } else {
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let at = format!("{label}:{}", i + 1);
            let v: Value = serde_json::from_str(line).map_err(|e| format!("{at}: not JSON: {e}"))?;
            out.push((at, v));
        }
        out
    };
    let mut requests = Vec::with_capacity(records.len());
    let (mut failed, mut warmup) = (0u64, 0u64);
    for (at, r) in &records {
        let o = r.as_object().ok_or_else(|| format!("{at}: expected a JSON object"))?;
        let empty = serde_json::Map::new();
        let meta = o.get("metadata").and_then(Value::as_object).unwrap_or(&empty);
        let m = o.get("metrics").and_then(Value::as_object).ok_or_else(|| format!("{at}: metrics: missing"))?;
        let error = o.get("error").is_some_and(|e| !e.is_null());
        let cancelled = meta.get("was_cancelled").and_then(Value::as_bool).unwrap_or(false);
        let output = match aiperf_count(m, "output_sequence_length", at)? {
            Some(x) => Some(x),
            None => aiperf_count(m, "output_token_count", at)?,
        };
        if error || cancelled || output.unwrap_or(0) == 0 {
            failed += 1;
            continue;
        }
        let start = meta
            .get("request_start_ns")
            .and_then(Value::as_f64)
            .ok_or_else(|| format!("{at}: metadata.request_start_ns: missing"))?;
        let arrival = start as i64;
        let prompt = aiperf_count(m, "input_sequence_length", at)?
            .ok_or_else(|| format!("{at}: metrics.input_sequence_length: missing"))?;
        let ttft = aiperf_time(m, "time_to_first_token", at)?
            .ok_or_else(|| format!("{at}: metrics.time_to_first_token: missing (a streaming run records it)"))?;
        let e2e = match aiperf_time(m, "request_latency", at)? {
            Some(x) => x,
            None => {
                let end = meta.get("request_end_ns").and_then(Value::as_f64).ok_or_else(|| {
                    format!("{at}: metrics.request_latency and metadata.request_end_ns: both missing")
                })?;
                end as i64 - arrival
            }
        };
        if e2e < ttft {
            return Err(format!("{at}: request_latency {e2e} ns is shorter than time_to_first_token {ttft} ns"));
        }
        let counted = meta.get("benchmark_phase").and_then(Value::as_str) != Some("warmup");
        warmup += !counted as u64;
        requests.push(MeasuredRequest {
            arrival_ns: arrival,
            prompt_tokens: prompt,
            output_tokens: output.expect("checked above"),
            ttft_ns: Some(ttft),
            e2e_ns: Some(e2e),
            finished: true,
            counted,
        });
    }
    let mut notes = Vec::new();
    if warmup > 0 {
        notes.push(format!("{warmup} warm-up requests replayed but not counted"));
    }
    Ok(MeasuredRun { format: MeasuredFormat::Aiperf, requests, failed, notes, engine_clock: false })
}

/// Column names the CSV reader knows, with the unit of time columns in ns.
const ARRIVAL: &[(&str, i64)] = &[
    ("arrival_ms", 1_000_000),
    ("arrival_s", 1_000_000_000),
    ("arrival_us", 1_000),
    ("arrival_ns", 1),
    ("request_start_ns", 1),
];
const PROMPT: &[&str] = &["prompt_tokens", "input_sequence_length", "input_tokens", "input_len"];
const OUTPUT: &[&str] = &["output_tokens", "output_sequence_length", "output_len"];
const TTFT: &[(&str, i64)] = &[("ttft_ms", 1_000_000), ("time_to_first_token", 1_000_000), ("ttft_s", 1_000_000_000)];
const E2E: &[(&str, i64)] = &[("e2e_ms", 1_000_000), ("request_latency", 1_000_000), ("e2e_s", 1_000_000_000)];

fn csv_file(text: &str, label: &str) -> Result<MeasuredRun, String> {
    let mut rd = csv::ReaderBuilder::new().flexible(false).from_reader(text.as_bytes());
    let header: HashMap<String, usize> = rd
        .headers()
        .map_err(|e| format!("{label}:1: {e}"))?
        .iter()
        .enumerate()
        .map(|(i, h)| (h.trim().to_string(), i))
        .collect();
    let find_timed = |names: &[(&str, i64)], what: &str| -> Result<(usize, i64), String> {
        names.iter().find_map(|(n, u)| header.get(*n).map(|&i| (i, *u))).ok_or_else(|| {
            let names: Vec<&str> = names.iter().map(|x| x.0).collect();
            format!("{label}:1: no {what} column (one of {})", names.join(", "))
        })
    };
    let name_of = |i: usize| header.iter().find(|(_, &j)| j == i).map(|(n, _)| n.clone()).unwrap_or_default();
    let find = |names: &[&str], what: &str| -> Result<usize, String> {
        names
            .iter()
            .find_map(|n| header.get(*n).copied())
            .ok_or_else(|| format!("{label}:1: no {what} column (one of {})", names.join(", ")))
    };
    let (c_arrival, u_arrival) = find_timed(ARRIVAL, "arrival")?;
    let (c_prompt, c_output) = (find(PROMPT, "prompt length")?, find(OUTPUT, "output length")?);
    let (c_ttft, u_ttft) = find_timed(TTFT, "TTFT")?;
    let (c_e2e, u_e2e) = find_timed(E2E, "E2E")?;
    let c_status = header.get("status").copied();
    let c_error = header.get("error").copied();
    let c_measured = header.get("measured").copied();
    let c_phase = header.get("benchmark_phase").copied();
    let mut requests = Vec::new();
    let mut failed = 0;
    for (i, row) in rd.records().enumerate() {
        let line = i + 2;
        let row = row.map_err(|e| format!("{label}:{line}: {e}"))?;
        let field = |c: usize| row.get(c).unwrap_or("").trim();
        let time = |c: usize, unit: i64| -> Result<Option<i64>, String> {
            let s = field(c);
            if s.is_empty() {
                return Ok(None);
            }
            parse_decimal_ns(s, unit)
                .filter(|&x| x >= 0)
                .map(Some)
                .ok_or_else(|| format!("{label}:{line}: {}: {s:?} is not a time", name_of(c)))
        };
        let count = |c: usize| -> Result<u32, String> {
            let s = field(c);
            s.parse::<u32>().map_err(|_| format!("{label}:{line}: {}: {s:?} is not a token count", name_of(c)))
        };
        let status = c_status.map(field).unwrap_or("");
        let errored = c_error.map(field).is_some_and(|e| !e.is_empty()) || status == "error" || status == "failed";
        let output = count(c_output)?;
        if errored || output == 0 {
            failed += 1;
            continue;
        }
        let finished = match status {
            "" | "finished" | "success" | "ok" => true,
            "rejected" | "in_flight" | "timed_out" => false,
            other => {
                return Err(format!(
                    "{label}:{line}: status: {other:?} is not finished, rejected, in_flight, timed_out or error"
                ))
            }
        };
        let arrival =
            time(c_arrival, u_arrival)?.ok_or_else(|| format!("{label}:{line}: {}: missing", name_of(c_arrival)))?;
        let (ttft, e2e) = (time(c_ttft, u_ttft)?, time(c_e2e, u_e2e)?);
        if finished && (ttft.is_none() || e2e.is_none()) {
            return Err(format!("{label}:{line}: a finished request needs {} and {}", name_of(c_ttft), name_of(c_e2e)));
        }
        if let (Some(t), Some(e)) = (ttft, e2e) {
            if e < t {
                return Err(format!("{label}:{line}: {} is shorter than {}", name_of(c_e2e), name_of(c_ttft)));
            }
        }
        let counted = match c_measured.map(field) {
            None | Some("" | "1" | "true") => true,
            Some("0" | "false") => false,
            Some(other) => return Err(format!("{label}:{line}: measured: {other:?} is not 0 or 1")),
        } && c_phase.map(field) != Some("warmup");
        requests.push(MeasuredRequest {
            arrival_ns: arrival,
            prompt_tokens: count(c_prompt)?,
            output_tokens: output,
            ttft_ns: ttft,
            e2e_ns: if finished { e2e } else { None },
            finished,
            counted,
        });
    }
    Ok(MeasuredRun { format: MeasuredFormat::Csv, requests, failed, notes: Vec::new(), engine_clock: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servesim_requests_csv_is_read_to_the_nanosecond() {
        let csv = "id,arrival_ms,scheduled_ms,first_token_ms,finish_ms,prompt_tokens,output_tokens,status,reject_reason,preemptions,instance,measured,ttft_ms,tpot_ms,e2e_ms,queue_ms\n\
                   0,1.000001,1.000001,5.5,20.25,100,4,finished,,0,0,1,4.499999,5.25,19.249999,0.000000\n\
                   1,0.5,,,0.5,5000,4,rejected,context_too_long,0,0,0,,,,\n";
        let run = parse(csv, "r.csv", None).unwrap();
        assert_eq!(run.format, MeasuredFormat::Csv);
        assert_eq!(run.requests.len(), 2);
        // Sorted by arrival: the rejected one (0.5 ms) first, time zero.
        let o = run.outcomes();
        assert_eq!(o[0].arrival, SimTime(0));
        assert_eq!((o[0].finish, o[0].counted), (None, false));
        assert_eq!(o[1].arrival, SimTime(500_001));
        assert_eq!(o[1].first_token, Some(SimTime(500_001 + 4_499_999)));
        assert_eq!(o[1].finish, Some(SimTime(500_001 + 19_249_999)));
        assert_eq!(run.replay_csv(), "arrival_ns,prompt_tokens,output_tokens\n0,5000,4\n500001,100,4\n");
    }

    #[test]
    fn vllm_result_with_and_without_start_times() {
        let j = r#"{"request_rate": 4.0, "input_lens": [10, 20, 30], "output_lens": [3, 0, 2],
                    "ttfts": [0.1, 0.0, 0.2], "itls": [[0.01, 0.02], [], [0.05]],
                    "start_times": [100.5, 100.6, 100.25], "errors": ["", "timeout", ""]}"#;
        let run = parse(j, "v.json", None).unwrap();
        assert_eq!(run.format, MeasuredFormat::Vllm);
        assert_eq!(run.failed, 1);
        let o = run.outcomes();
        assert_eq!(o.len(), 2);
        assert_eq!((o[0].prompt_tokens, o[0].arrival), (30, SimTime(0)));
        assert_eq!(o[1].arrival, SimTime(250_000_000));
        // E2E = TTFT + ITLs: 0.1 + 0.03 s.
        assert_eq!(o[1].finish, Some(SimTime(250_000_000 + 130_000_000)));
        let no_starts = j.replace(r#""start_times": [100.5, 100.6, 100.25], "#, "");
        let e = parse(&no_starts, "v.json", None).unwrap_err().to_string();
        assert!(e.contains("start_times: missing") && e.contains("4.0"), "{e}");
        let inf = no_starts.replace("4.0", "\"inf\"");
        assert!(parse(&inf, "v.json", None).unwrap().notes[0].contains("time 0"));
        let bad = j.replace("[0.1, 0.0, 0.2]", "[\"x\", 0.0, 0.2]");
        assert!(parse(&bad, "v.json", None).unwrap_err().to_string().contains("ttfts[0]: expected a number"));
    }

    #[test]
    fn per_request_jsonl_reads_timestamps_in_any_unit() {
        let j = concat!(
            r#"{"arrival_time": 12.5, "queued_time": 12.51, "first_token_time": 12.9, "last_token_time": 15.25, "prompt_tokens": 812, "output_tokens": 128}"#,
            "\n",
            r#"{"arrival_ms": 12000, "first_token_ms": 12100.5, "last_token_ms": 12400, "prompt_tokens": 10, "output_tokens": 5}"#,
            "\n\n",
            r#"{"arrival_ns": 13000000000, "first_token_ns": null, "last_token_ns": null, "prompt_tokens": 7, "output_tokens": 3, "error": "timeout"}"#,
            "\n",
        );
        let run = parse(j, "r.jsonl", None).unwrap();
        assert_eq!((run.format, run.failed), (MeasuredFormat::Jsonl, 1));
        let o = run.outcomes();
        // Sorted by arrival: the ms record (12.0 s) first, then 12.5 s.
        assert_eq!((o[0].prompt_tokens, o[0].arrival, o[0].first_token), (10, SimTime(0), Some(SimTime(100_500_000))));
        assert_eq!(o[0].finish, Some(SimTime(400_000_000)));
        assert_eq!(o[1].arrival, SimTime(500_000_000));
        assert_eq!(o[1].first_token, Some(SimTime(500_000_000 + 400_000_000)));
        assert_eq!(o[1].finish, Some(SimTime(500_000_000 + 2_750_000_000)));
        // Errors name the line and the key.
        let e = |text: &str| parse(text, "r.jsonl", Some(MeasuredFormat::Jsonl)).unwrap_err().to_string();
        let bad = r#"{"arrival_time": 1, "first_token_time": 0.5, "last_token_time": 2, "prompt_tokens": 1, "output_tokens": 1}"#;
        assert!(e(bad).contains("r.jsonl:1: times out of order"), "{}", e(bad));
        let q = r#"{"arrival_time": 1, "queued_time": 3, "first_token_time": 2, "last_token_time": 4, "prompt_tokens": 1, "output_tokens": 1}"#;
        assert!(e(q).contains("queued time is not between"), "{}", e(q));
        let s = r#"{"arrival_time": "soon", "first_token_time": 2, "last_token_time": 4, "prompt_tokens": 1, "output_tokens": 1}"#;
        assert!(e(s).contains("r.jsonl:1: arrival_time: \"soon\" is not a number"), "{}", e(s));
        assert!(e("{\"arrival_time\": 1, \"first_token_time\": 2}\nnot json").contains("r.jsonl:1: no output_tokens"));
    }

    #[test]
    fn sglang_output_files_with_several_runs_read_the_last() {
        let run = |ttft: f64| {
            format!(
                r#"{{"input_lens": [10], "output_lens": [2], "ttfts": [{ttft}], "itls": [[0.01]], "start_times": [5.0]}}"#
            )
        };
        let text = format!("{}\n{}\n", run(0.1), run(0.3));
        let r = parse(&text, "s.jsonl", None).unwrap();
        assert_eq!(r.format, MeasuredFormat::Vllm);
        assert_eq!(r.outcomes()[0].first_token, Some(SimTime(300_000_000)));
        assert!(r.notes.iter().any(|n| n.contains("2 runs in the file") && n.contains("line 2 read")), "{:?}", r.notes);
    }

    #[test]
    fn aiperf_jsonl_skips_errors_and_does_not_count_warmup() {
        let rec = |start: u64, phase: &str, err: &str| {
            format!(
                r#"{{"metadata": {{"request_start_ns": {start}, "benchmark_phase": "{phase}"}}, "metrics": {{"input_sequence_length": {{"value": 100, "unit": "tokens"}}, "output_sequence_length": {{"value": 20, "unit": "tokens"}}, "time_to_first_token": {{"value": 31.5, "unit": "ms"}}, "request_latency": {{"value": 400.25, "unit": "ms"}}}}, "error": {err}}}"#
            )
        };
        let text = [rec(1000, "warmup", "null"), rec(2000, "profiling", "null"), rec(3000, "profiling", "{\"x\": 1}")]
            .join("\n");
        let run = parse(&text, "a.jsonl", None).unwrap();
        assert_eq!((run.format, run.failed, run.requests.len()), (MeasuredFormat::Aiperf, 1, 2));
        let o = run.outcomes();
        assert_eq!((o[0].counted, o[1].counted), (false, true));
        assert_eq!(o[1].arrival, SimTime(1000));
        assert_eq!(o[1].first_token, Some(SimTime(1000 + 31_500_000)));
        assert_eq!(o[1].finish, Some(SimTime(1000 + 400_250_000)));
        // Nothing measured is nothing to compare, not a 0% error.
        let warm = [rec(1000, "warmup", "null"), rec(2000, "warmup", "null")].join("\n");
        assert_eq!(
            parse(&warm, "a.jsonl", None).unwrap_err().to_string(),
            "a.jsonl: no request to compare: all 2 that succeeded are warm-up or marked not measured (they would be \
             replayed, never counted)"
        );
        let bad = text.replace("\"ms\"}, \"request", "\"hours\"}, \"request");
        assert!(parse(&bad, "a.jsonl", None)
            .unwrap_err()
            .to_string()
            .contains("a.jsonl:1: metrics.time_to_first_token: unit"));
    }

    #[test]
    fn csv_errors_name_line_and_column() {
        let e = parse("a,b\n1,2\n", "m.csv", None).unwrap_err().to_string();
        assert!(e.starts_with("m.csv:1: no arrival column"), "{e}");
        let head = "arrival_s,input_sequence_length,output_sequence_length,time_to_first_token,request_latency\n";
        let e = parse(&format!("{head}0.5,10,x,1,2\n"), "m.csv", None).unwrap_err();
        assert_eq!(e, MeasuredError::Unreadable("m.csv:2: output_sequence_length: \"x\" is not a token count".into()));
        let e = parse(&format!("{head}0.5,10,3,5,2\n"), "m.csv", None).unwrap_err().to_string();
        assert!(e.contains("m.csv:2: request_latency is shorter"), "{e}");
        assert_eq!(
            parse(head, "m.csv", None).unwrap_err(),
            MeasuredError::NothingToReplay { file: "m.csv".into(), failed: 0 }
        );
        let ok = parse(&format!("{head}0.5,10,3,5,20\n0.25,1,1,1,1\n"), "m.csv", None).unwrap();
        assert_eq!(ok.outcomes()[1].finish, Some(SimTime(250_000_000 + 20_000_000)));
    }
}
