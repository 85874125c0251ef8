//! Measured benchmark summaries: one run's statistics without its requests, as load generators
//! write them, read into [`BenchRun`]s (the benchmark to re-create and the figures it gave).
//!
//! ```text
//!   vLLM `vllm bench serve --save-result` JSON (without --save-detailed):
//!     request_rate ("inf" or req/s), burstiness, max_concurrency, num_prompts, completed,
//!     total_input_tokens, total_output_tokens, request_throughput, output_throughput,
//!     {mean,median,p90,p95,p99}_{ttft,tpot,itl,e2el}_ms            (vllm/benchmarks/serve.py)
//!   SGLang bench_serving --output-file (one JSON object per run and line; the last is read):
//!     the same keys, E2E as {mean,median,p90,p99}_e2e_latency_ms, random_input_len, ...
//!   AIPerf profile_export_aiperf.json: time_to_first_token, inter_token_latency (AIPerf's is
//!     (latency − TTFT) / (output − 1) per request: TPOT), request_latency, request_throughput,
//!     output_token_throughput, input/output_sequence_length, request_count, each
//!     {unit, avg, p50, p90, p95, p99}; input_config.loadgen {concurrency, request_rate,
//!     request_count, warmup_request_count}     (ai-dynamo/aiperf db4f639, exporters/json_exporter.py)
//!   the benchmark's printed result ("============ Serving Benchmark Result ============"):
//!     "Mean TTFT (ms):  12.3", "Traffic request rate: inf", "Maximum request concurrency: 8", ...
//!   CSV, one run per row (a sweep of rates or concurrencies): rate or concurrency, isl and
//!     osl (or prompt_tokens, output_tokens), requests, and any of ttft_ms_mean, ttft_ms_p50,
//!     ..., tpot_ms_*, itl_ms_*, e2e_ms_*, throughput_rps, output_tokens_per_s; optionally
//!     burstiness, warmup and tp (the run's tensor-parallel degree)
//! ```
//! Lengths are the run's means; a re-created benchmark uses them as fixed lengths (the random
//! datasets' default), which the notes say.

use std::collections::BTreeMap;

use serde_json::Value;

use super::measured::MeasuredError;
use crate::config::shown;

/// How the benchmark sent its requests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Load {
    /// Requests per second (`None`: all at once, or as fast as the concurrency allows).
    pub rate: Option<f64>,
    /// The gamma shape of the gaps (vLLM's `--burstiness`; 1 is Poisson).
    pub burstiness: f64,
    /// At most this many requests in flight (`None`: no limit).
    pub concurrency: Option<u32>,
}

/// One measured benchmark run.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchRun {
    /// The file, and the row of a sweep.
    pub label: String,
    pub format: &'static str,
    pub load: Load,
    /// Mean prompt and output lengths, tokens.
    pub prompt_tokens: f64,
    pub output_tokens: f64,
    /// Requests measured (completed), and warm-up requests sent before them.
    pub requests: u64,
    pub warmup: u64,
    /// The measured statistics: `ttft_ms.mean`, `tpot_ms.p99`, `throughput.output_tokens_per_s`, ...
    pub stats: BTreeMap<String, f64>,
    pub notes: Vec<String>,
    /// The run's tensor-parallel degree, when the file says (a sweep's `tp` column): the
    /// deployment is the scenario's at that TP.
    pub tp: Option<u32>,
}

/// The statistics a summary may carry, by their key.
pub const STAT_METRICS: [&str; 4] = ["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"];
pub const STAT_KINDS: [&str; 5] = ["mean", "p50", "p90", "p95", "p99"];
pub const THROUGHPUT_STATS: [&str; 2] = ["throughput.requests_per_s", "throughput.output_tokens_per_s"];

/// Whether `text` looks like a benchmark summary (not a per-request file).
pub fn is_summary(text: &str) -> bool {
    let t = text.trim_start();
    if t.contains("Serving Benchmark Result") {
        return true;
    }
    if t.starts_with('{') {
        let last = t.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
        let v = serde_json::from_str::<Value>(t).or_else(|_| serde_json::from_str::<Value>(last));
        if let Ok(Value::Object(o)) = v {
            let per_request = o.contains_key("ttfts") || o.contains_key("metadata");
            let summary =
                o.contains_key("mean_ttft_ms") || o.get("time_to_first_token").is_some_and(|v| v.get("avg").is_some());
            return summary && !per_request;
        }
        return false;
    }
    if t.starts_with('[') {
        return false;
    }
    // CSV: a sweep has a rate or concurrency column and no per-request arrival.
    let header = t.lines().next().unwrap_or("").to_ascii_lowercase();
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    let per_request = cols.iter().any(|c| c.starts_with("arrival") || *c == "request_start_ns");
    !per_request && cols.iter().any(|c| ["rate", "request_rate", "concurrency", "max_concurrency"].contains(c))
}

/// Reads a benchmark summary file (`label` names it in errors): one run, or a sweep's rows.
pub fn parse(text: &str, label: &str) -> Result<Vec<BenchRun>, MeasuredError> {
    let t = text.trim_start();
    let runs = if t.contains("Serving Benchmark Result") {
        printed(text, label)
    } else if t.starts_with('{') {
        json(text, label).map(|r| vec![r])
    } else {
        csv_sweep(text, label)
    }
    .map_err(MeasuredError::Unreadable)?;
    for r in &runs {
        if r.stats.is_empty() {
            return Err(MeasuredError::Unreadable(format!(
                "{}: no latency or throughput statistic (TTFT, TPOT, ITL, E2E, throughput) to compare",
                r.label
            )));
        }
    }
    Ok(runs)
}

fn positive(x: f64, what: &str) -> Result<f64, String> {
    if x.is_finite() && x >= 0.0 {
        Ok(x)
    } else {
        Err(format!("{what}: {} is not a non-negative number", shown(x)))
    }
}

/// The checks every run's load and lengths get.
fn check_run(r: &BenchRun) -> Result<(), String> {
    let at = &r.label;
    if let Some(x) = r.load.rate {
        if !(x.is_finite() && x > 0.0 && x <= 1e6) {
            return Err(format!(
                "{at}: request rate {} is not in (0, 10⁶] requests/s (write inf for all at once)",
                shown(x)
            ));
        }
    }
    if !(r.load.burstiness.is_finite() && r.load.burstiness > 0.0 && r.load.burstiness <= 1e4) {
        return Err(format!("{at}: burstiness {} is not in (0, 10⁴]", shown(r.load.burstiness)));
    }
    if let Some(c) = r.load.concurrency {
        if !(1..=1_000_000).contains(&c) {
            return Err(format!("{at}: concurrency {c} is not in [1, 10⁶]"));
        }
    }
    for (what, x) in [("mean prompt length", r.prompt_tokens), ("mean output length", r.output_tokens)] {
        if !(x.is_finite() && (1.0..=1e7).contains(&x)) {
            return Err(format!("{at}: {what} {} is not in [1, 10⁷] tokens", shown(x)));
        }
    }
    if !(1..=50_000_000).contains(&r.requests) {
        return Err(format!("{at}: {} requests is not in [1, 5·10⁷]", r.requests));
    }
    for (k, v) in &r.stats {
        positive(*v, &format!("{at}: {k}"))?;
    }
    Ok(())
}

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
}

/// vLLM's / SGLang's result JSON, or AIPerf's summary export.
fn json(text: &str, label: &str) -> Result<BenchRun, String> {
    let lines: Vec<(usize, &str)> = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).collect();
    let (v, note) = match serde_json::from_str::<Value>(text) {
        Ok(v) => (v, None),
        Err(_) if lines.len() > 1 => {
            let (i, last) = *lines.last().expect("more than one line");
            let v = serde_json::from_str(last).map_err(|e| format!("{label}:{}: not JSON: {e}", i + 1))?;
            (v, Some(format!("{} runs in the file, one per line: line {} read", lines.len(), i + 1)))
        }
        Err(e) => return Err(format!("{label}: not JSON: {e}")),
    };
    let o = v.as_object().ok_or_else(|| format!("{label}: expected a JSON object"))?;
    let mut run = if o.contains_key("time_to_first_token") { aiperf(o, label)? } else { vllm(o, label)? };
    run.notes.extend(note);
    check_run(&run)?;
    Ok(run)
}

fn vllm(o: &serde_json::Map<String, Value>, label: &str) -> Result<BenchRun, String> {
    let get = |k: &str| o.get(k).filter(|v| !v.is_null());
    let number = |k: &str| -> Result<Option<f64>, String> {
        match get(k) {
            None => Ok(None),
            Some(v) => num(v).map(Some).ok_or_else(|| format!("{label}: {k}: {v} is not a number")),
        }
    };
    let rate = match get("request_rate") {
        None => None,
        Some(Value::String(s)) if s.trim().eq_ignore_ascii_case("inf") => None,
        Some(v) => match num(v) {
            Some(x) if x.is_infinite() => None,
            Some(x) => Some(x),
            None => return Err(format!("{label}: request_rate: {v} is not a rate or \"inf\"")),
        },
    };
    let concurrency = match number("max_concurrency")? {
        None => None,
        Some(c) if c >= 1.0 && c.fract() == 0.0 && c <= 1e6 => Some(c as u32),
        Some(c) => return Err(format!("{label}: max_concurrency: {c} is not a whole number of requests ≥ 1")),
    };
    let completed =
        number("completed")?.ok_or_else(|| format!("{label}: completed: missing (the requests measured)"))?;
    if !(completed >= 1.0 && completed.fract() == 0.0 && completed <= 5e7) {
        return Err(format!("{label}: completed: {} is not a count in [1, 5·10⁷]", shown(completed)));
    }
    let mean = |total: &str, fallback: &str| -> Result<f64, String> {
        match number(total)? {
            Some(t) => Ok(positive(t, &format!("{label}: {total}"))? / completed),
            None => number(fallback)?.ok_or_else(|| format!("{label}: {total}: missing (and no {fallback})")),
        }
    };
    let prompt = mean("total_input_tokens", "random_input_len")?;
    let output = mean("total_output_tokens", "random_output_len")?;
    let mut stats = BTreeMap::new();
    for (metric, names) in [
        ("ttft_ms", &["ttft"][..]),
        ("tpot_ms", &["tpot"][..]),
        ("itl_ms", &["itl"][..]),
        ("e2e_ms", &["e2el", "e2e_latency"][..]),
    ] {
        for name in names {
            for (stat, key) in [("mean", "mean"), ("p50", "median"), ("p90", "p90"), ("p95", "p95"), ("p99", "p99")] {
                let k = format!("{key}_{name}_ms");
                if let Some(x) = number(&k)? {
                    stats.insert(format!("{metric}.{stat}"), positive(x, &format!("{label}: {k}"))?);
                }
            }
        }
    }
    for (key, stat) in [("request_throughput", THROUGHPUT_STATS[0]), ("output_throughput", THROUGHPUT_STATS[1])] {
        if let Some(x) = number(key)? {
            stats.insert(stat.into(), positive(x, &format!("{label}: {key}"))?);
        }
    }
    let failed = number("failed")?.unwrap_or(0.0);
    let mut notes = vec![format!(
        "benchmark re-created: {}, fixed lengths at the run's means ({prompt:.0} + {output:.0} tokens)",
        load_words(rate, number("burstiness")?.unwrap_or(1.0), concurrency)
    )];
    if failed > 0.0 {
        notes.push(format!("{failed} failed requests in the run are not re-created"));
    }
    Ok(BenchRun {
        label: label.to_string(),
        format: "vllm-summary",
        load: Load { rate, burstiness: number("burstiness")?.unwrap_or(1.0), concurrency },
        prompt_tokens: prompt,
        output_tokens: output,
        requests: completed as u64,
        warmup: 0,
        stats,
        notes,
        tp: None,
    })
}

fn load_words(rate: Option<f64>, burstiness: f64, concurrency: Option<u32>) -> String {
    let r = match rate {
        Some(r) if burstiness == 1.0 => format!("Poisson arrivals at {r} req/s"),
        Some(r) => format!("gamma arrivals at {r} req/s (burstiness {burstiness})"),
        None => "every request sent at once".into(),
    };
    match concurrency {
        Some(c) if rate.is_none() => format!("{c} concurrent clients"),
        Some(c) => format!("{r}, at most {c} in flight (the cap is not re-created: arrivals keep the rate)"),
        None => r,
    }
}

/// `{"unit": "ms", "avg": ...}` of an AIPerf summary, in ms (times) or as is.
fn aiperf(o: &serde_json::Map<String, Value>, label: &str) -> Result<BenchRun, String> {
    let field = |metric: &str, stat: &str| -> Result<Option<f64>, String> {
        let Some(m) = o.get(metric).filter(|v| !v.is_null()) else { return Ok(None) };
        let Some(x) = m.get(stat).filter(|v| !v.is_null()) else { return Ok(None) };
        let x = num(x).ok_or_else(|| format!("{label}: {metric}.{stat}: {x} is not a number"))?;
        let scale = match m.get("unit").and_then(Value::as_str).unwrap_or("ms") {
            "ns" => 1e-6,
            "us" => 1e-3,
            "ms" => 1.0,
            "s" | "sec" => 1e3,
            _ => 1.0, // counts and rates: as given
        };
        Ok(Some(x * scale))
    };
    let loadgen = o.get("input_config").and_then(|c| c.get("loadgen"));
    let lg = |k: &str| loadgen.and_then(|l| l.get(k)).and_then(num);
    let rate = lg("request_rate");
    let concurrency = lg("concurrency").map(|c| c as u32);
    let requests = match field("request_count", "avg")? {
        Some(n) => n,
        None => lg("request_count").ok_or_else(|| format!("{label}: request_count: missing"))?,
    };
    if !(requests >= 1.0 && requests.fract() == 0.0 && requests <= 5e7) {
        return Err(format!("{label}: request_count: {} is not a count in [1, 5·10⁷]", shown(requests)));
    }
    let prompt =
        field("input_sequence_length", "avg")?.ok_or_else(|| format!("{label}: input_sequence_length.avg: missing"))?;
    let output = field("output_sequence_length", "avg")?
        .ok_or_else(|| format!("{label}: output_sequence_length.avg: missing"))?;
    let mut stats = BTreeMap::new();
    for (metric, name) in
        [("ttft_ms", "time_to_first_token"), ("tpot_ms", "inter_token_latency"), ("e2e_ms", "request_latency")]
    {
        for (stat, key) in [("mean", "avg"), ("p50", "p50"), ("p90", "p90"), ("p95", "p95"), ("p99", "p99")] {
            if let Some(x) = field(name, key)? {
                stats.insert(format!("{metric}.{stat}"), positive(x, &format!("{label}: {name}.{key}"))?);
            }
        }
    }
    for (key, stat) in [("request_throughput", THROUGHPUT_STATS[0]), ("output_token_throughput", THROUGHPUT_STATS[1])] {
        if let Some(x) = field(key, "avg")? {
            stats.insert(stat.into(), positive(x, &format!("{label}: {key}.avg"))?);
        }
    }
    let warmup = lg("warmup_request_count").unwrap_or(0.0).max(0.0) as u64;
    let mut notes = vec![format!(
        "benchmark re-created: {}, fixed lengths at the run's means ({prompt:.0} + {output:.0} tokens); \
         AIPerf's inter_token_latency is TPOT",
        load_words(rate, 1.0, concurrency)
    )];
    if warmup > 0 {
        notes.push(format!(
            "{warmup} warm-up requests ran before the measured ones and are not re-created (AIPerf waits for them \
             to finish before measuring)"
        ));
    }
    Ok(BenchRun {
        label: label.to_string(),
        format: "aiperf-summary",
        load: Load { rate, burstiness: 1.0, concurrency },
        prompt_tokens: prompt,
        output_tokens: output,
        requests: requests as u64,
        warmup,
        stats,
        notes,
        tp: None,
    })
}

/// The result vLLM's and SGLang's benchmarks print.
fn printed(text: &str, label: &str) -> Result<Vec<BenchRun>, String> {
    // Several results in one log: each ends with its "=====" line after the statistics.
    let mut runs = Vec::new();
    let mut cur: Vec<(usize, String, String)> = Vec::new();
    let mut pre: Vec<(usize, String, String)> = Vec::new();
    let mut in_result = false;
    let flush = |pre: &mut Vec<(usize, String, String)>,
                 cur: &mut Vec<(usize, String, String)>,
                 runs: &mut Vec<BenchRun>|
     -> Result<(), String> {
        if cur.is_empty() {
            return Ok(());
        }
        let n = runs.len() + 1;
        let mut all = std::mem::take(pre);
        all.append(cur);
        runs.push(printed_run(&all, &format!("{label}: result {n}"))?);
        Ok(())
    };
    for (i, line) in text.lines().enumerate() {
        let l = line.trim().trim_start_matches('#').trim();
        if l.contains("Serving Benchmark Result") {
            flush(&mut pre, &mut cur, &mut runs)?;
            in_result = true;
            continue;
        }
        if l.starts_with("=====") && in_result {
            flush(&mut pre, &mut cur, &mut runs)?;
            in_result = false;
            continue;
        }
        let Some((k, v)) = l.split_once(':') else { continue };
        let entry = (i + 1, k.trim().to_string(), v.trim().to_string());
        if in_result {
            cur.push(entry);
        } else {
            pre.push(entry);
        }
    }
    flush(&mut pre, &mut cur, &mut runs)?;
    if runs.is_empty() {
        return Err(format!("{label}: no benchmark result found"));
    }
    if runs.len() == 1 {
        runs[0].label = label.to_string();
    }
    Ok(runs)
}

fn printed_run(lines: &[(usize, String, String)], label: &str) -> Result<BenchRun, String> {
    let find = |names: &[&str]| lines.iter().rev().find(|(_, k, _)| names.iter().any(|n| k.eq_ignore_ascii_case(n)));
    let number = |names: &[&str]| -> Result<Option<f64>, String> {
        match find(names) {
            None => Ok(None),
            Some((line, k, v)) => {
                let first = v.split_whitespace().next().unwrap_or("");
                first.parse::<f64>().map(Some).map_err(|_| format!("{label}: line {line}: {k}: {v:?} is not a number"))
            }
        }
    };
    let rate = match find(&["Traffic request rate", "Request rate"]) {
        None => None,
        Some((_, _, v)) if v.split_whitespace().next().is_some_and(|x| x.eq_ignore_ascii_case("inf")) => None,
        Some(_) => number(&["Traffic request rate", "Request rate"])?,
    };
    let concurrency =
        number(&["Maximum request concurrency", "Max request concurrency", "Max concurrency"])?.map(|c| c as u32);
    let burstiness = number(&["Burstiness factor"])?.unwrap_or(1.0);
    let completed =
        number(&["Successful requests"])?.ok_or_else(|| format!("{label}: Successful requests: missing"))?;
    if !(completed >= 1.0 && completed.fract() == 0.0 && completed <= 5e7) {
        return Err(format!("{label}: Successful requests: {} is not a count in [1, 5·10⁷]", shown(completed)));
    }
    let input = number(&["Total input tokens"])?.ok_or_else(|| format!("{label}: Total input tokens: missing"))?;
    let output =
        number(&["Total generated tokens"])?.ok_or_else(|| format!("{label}: Total generated tokens: missing"))?;
    let mut stats = BTreeMap::new();
    for (metric, names) in [
        ("ttft_ms", &["TTFT"][..]),
        ("tpot_ms", &["TPOT"][..]),
        ("itl_ms", &["ITL"][..]),
        ("e2e_ms", &["E2EL", "E2E Latency"][..]),
    ] {
        for name in names {
            for (stat, word) in [("mean", "Mean"), ("p50", "Median"), ("p90", "P90"), ("p95", "P95"), ("p99", "P99")] {
                let key = format!("{word} {name} (ms)");
                if let Some(x) = number(&[&key])? {
                    stats.insert(format!("{metric}.{stat}"), positive(x, &format!("{label}: {key}"))?);
                }
            }
        }
    }
    for (keys, stat) in [
        (&["Request throughput (req/s)"][..], THROUGHPUT_STATS[0]),
        (&["Output token throughput (tok/s)"][..], THROUGHPUT_STATS[1]),
    ] {
        if let Some(x) = number(keys)? {
            stats.insert(stat.into(), positive(x, &format!("{label}: {}", keys[0]))?);
        }
    }
    let (prompt, out) = (input / completed, output / completed);
    let run = BenchRun {
        label: label.to_string(),
        format: "printed",
        load: Load { rate, burstiness, concurrency },
        prompt_tokens: prompt,
        output_tokens: out,
        requests: completed as u64,
        warmup: 0,
        stats,
        notes: vec![format!(
            "benchmark re-created: {}, fixed lengths at the run's means ({prompt:.0} + {out:.0} tokens)",
            load_words(rate, burstiness, concurrency)
        )],
        tp: None,
    };
    check_run(&run)?;
    Ok(run)
}

/// A sweep: one run per CSV row.
fn csv_sweep(text: &str, label: &str) -> Result<Vec<BenchRun>, String> {
    let mut rd = csv::ReaderBuilder::new().flexible(false).from_reader(text.as_bytes());
    let header: Vec<String> =
        rd.headers().map_err(|e| format!("{label}:1: {e}"))?.iter().map(|h| h.trim().to_ascii_lowercase()).collect();
    let mut seen = std::collections::HashSet::new();
    for h in &header {
        if !seen.insert(h.as_str()) {
            return Err(format!("{label}:1: column {h} is given twice"));
        }
    }
    let col = |names: &[&str]| names.iter().find_map(|n| header.iter().position(|h| h == n));
    let c_rate = col(&["rate", "request_rate"]);
    let c_conc = col(&["concurrency", "max_concurrency"]);
    if c_rate.is_none() && c_conc.is_none() {
        return Err(format!("{label}:1: no rate or concurrency column (rate, request_rate, concurrency)"));
    }
    let c_isl = col(&["isl", "prompt_tokens", "input_len", "input_tokens"])
        .ok_or_else(|| format!("{label}:1: no prompt length column (isl, prompt_tokens, input_len)"))?;
    let c_osl = col(&["osl", "output_tokens", "output_len"])
        .ok_or_else(|| format!("{label}:1: no output length column (osl, output_tokens, output_len)"))?;
    let c_req = col(&["requests", "num_prompts", "completed", "request_count"])
        .ok_or_else(|| format!("{label}:1: no request count column (requests, num_prompts, completed)"))?;
    let c_burst = col(&["burstiness"]);
    let c_tp = col(&["tp", "tensor_parallel_size"]);
    let c_warm = col(&["warmup", "warmup_requests"]);
    let mut stat_cols: Vec<(usize, String)> = Vec::new();
    for (i, h) in header.iter().enumerate() {
        let key = STAT_METRICS.iter().find_map(|m| {
            let rest = h.strip_prefix(m)?.strip_prefix('_')?;
            STAT_KINDS.contains(&rest).then(|| format!("{m}.{rest}"))
        });
        let key = key.or_else(|| match h.as_str() {
            "throughput_rps" | "request_throughput" => Some(THROUGHPUT_STATS[0].to_string()),
            "output_tokens_per_s" | "output_throughput" => Some(THROUGHPUT_STATS[1].to_string()),
            _ => None,
        });
        if let Some(k) = key {
            stat_cols.push((i, k));
        }
    }
    if stat_cols.is_empty() {
        return Err(format!(
            "{label}:1: no statistic column (ttft_ms_mean, ttft_ms_p99, tpot_ms_mean, itl_ms_p50, e2e_ms_mean, \
             throughput_rps, output_tokens_per_s, ...)"
        ));
    }
    let mut runs = Vec::new();
    for (i, row) in rd.records().enumerate() {
        let line = i + 2;
        let row = row.map_err(|e| format!("{label}:{line}: {e}"))?;
        let cell = |c: usize| row.get(c).unwrap_or("").trim();
        let number = |c: usize| -> Result<Option<f64>, String> {
            let s = cell(c);
            if s.is_empty() {
                return Ok(None);
            }
            s.parse::<f64>().map(Some).map_err(|_| format!("{label}:{line}: {}: {s:?} is not a number", header[c]))
        };
        let rate = match c_rate {
            Some(c) if cell(c).eq_ignore_ascii_case("inf") => None,
            Some(c) => number(c)?,
            None => None,
        };
        let concurrency = match c_conc.map(number).transpose()?.flatten() {
            Some(x) if x >= 1.0 && x.fract() == 0.0 && x <= 1e6 => Some(x as u32),
            Some(x) => return Err(format!("{label}:{line}: concurrency: {x} is not a whole number ≥ 1")),
            None => None,
        };
        let need = |c: usize| number(c)?.ok_or_else(|| format!("{label}:{line}: {}: missing", header[c]));
        let requests = need(c_req)?;
        if !(requests >= 1.0 && requests.fract() == 0.0 && requests <= 5e7) {
            return Err(format!("{label}:{line}: {}: {} is not a count in [1, 5·10⁷]", header[c_req], shown(requests)));
        }
        let mut stats = BTreeMap::new();
        for (c, k) in &stat_cols {
            if let Some(x) = number(*c)? {
                stats.insert(k.clone(), x);
            }
        }
        let burstiness = c_burst.map(number).transpose()?.flatten().unwrap_or(1.0);
        let run_label = format!("{label}:{line}");
        let (prompt, output) = (need(c_isl)?, need(c_osl)?);
        let run = BenchRun {
            notes: vec![format!(
                "benchmark re-created: {}, fixed lengths ({prompt:.0} + {output:.0} tokens)",
                load_words(rate, burstiness, concurrency)
            )],
            label: run_label,
            format: "csv-sweep",
            load: Load { rate, burstiness, concurrency },
            prompt_tokens: prompt,
            output_tokens: output,
            requests: requests as u64,
            warmup: c_warm.map(number).transpose()?.flatten().unwrap_or(0.0).max(0.0) as u64,
            stats,
            tp: match c_tp.map(number).transpose()?.flatten() {
                Some(x) if x >= 1.0 && x.fract() == 0.0 && x <= 1024.0 => Some(x as u32),
                Some(x) => return Err(format!("{label}:{line}: tp: {x} is not a tensor-parallel degree in [1, 1024]")),
                None => None,
            },
        };
        check_run(&run)?;
        runs.push(run);
    }
    if runs.is_empty() {
        return Err(format!("{label}: no rows"));
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vllm_summary_json_is_read_with_its_load() {
        let j = r#"{"request_rate": 4.0, "burstiness": 1.0, "max_concurrency": null, "num_prompts": 200,
                    "completed": 200, "total_input_tokens": 204800, "total_output_tokens": 25600,
                    "request_throughput": 3.9, "output_throughput": 499.2, "mean_ttft_ms": 45.5,
                    "median_ttft_ms": 40.1, "p99_ttft_ms": 120.0, "mean_tpot_ms": 12.5, "mean_e2el_ms": 1630.0}"#;
        assert!(is_summary(j));
        let r = &parse(j, "v.json").unwrap()[0];
        assert_eq!(r.load, Load { rate: Some(4.0), burstiness: 1.0, concurrency: None });
        assert_eq!((r.prompt_tokens, r.output_tokens, r.requests), (1024.0, 128.0, 200));
        assert_eq!(r.stats["ttft_ms.p50"], 40.1);
        assert_eq!(r.stats["e2e_ms.mean"], 1630.0);
        assert_eq!(r.stats["throughput.output_tokens_per_s"], 499.2);
        let inf = j.replace("4.0,", "\"inf\",").replace("null", "16");
        let r = &parse(&inf, "v.json").unwrap()[0];
        assert_eq!(r.load, Load { rate: None, burstiness: 1.0, concurrency: Some(16) });
        let bad = j.replace("45.5", "\"soon\"");
        assert!(parse(&bad, "v.json").unwrap_err().to_string().contains("v.json: mean_ttft_ms"));
        // Per-request files are not summaries.
        assert!(!is_summary(r#"{"ttfts": [0.1], "mean_ttft_ms": 100}"#));
    }

    #[test]
    fn aiperf_summary_converts_units_and_reads_tpot() {
        let j = r#"{"input_config": {"loadgen": {"concurrency": 8, "warmup_request_count": 16}},
                    "time_to_first_token": {"unit": "ms", "avg": 30.0, "p99": 90.0},
                    "inter_token_latency": {"unit": "ms", "avg": 9.5},
                    "request_latency": {"unit": "s", "avg": 1.25},
                    "request_count": {"unit": "requests", "avg": 160},
                    "input_sequence_length": {"unit": "tokens", "avg": 1000},
                    "output_sequence_length": {"unit": "tokens", "avg": 128}}"#;
        assert!(is_summary(j));
        let r = &parse(j, "a.json").unwrap()[0];
        assert_eq!(r.load.concurrency, Some(8));
        assert_eq!((r.requests, r.warmup), (160, 16));
        assert_eq!(r.stats["tpot_ms.mean"], 9.5);
        assert_eq!(r.stats["e2e_ms.mean"], 1250.0);
    }

    #[test]
    fn printed_results_are_read_one_per_block() {
        let text = "Traffic request rate: inf\nBurstiness factor: 1.0 (Poisson process)\nMaximum request concurrency: 32\n\
                    ============ Serving Benchmark Result ============\nSuccessful requests:                     32\n\
                    Total input tokens:                      65536\nTotal generated tokens:                  65536\n\
                    Request throughput (req/s):              0.21\nMean TTFT (ms):                          7279.56\n\
                    Median TTFT (ms):                        7099.88\nP99 TTFT (ms):                           10999.46\n\
                    Mean TPOT (ms):                          70.14\n==================================================\n";
        assert!(is_summary(text));
        let r = parse(text, "log.txt").unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].load, Load { rate: None, burstiness: 1.0, concurrency: Some(32) });
        assert_eq!((r[0].prompt_tokens, r[0].output_tokens), (2048.0, 2048.0));
        assert_eq!(r[0].stats["ttft_ms.p99"], 10999.46);
        assert_eq!(r[0].stats["tpot_ms.mean"], 70.14);
        let two = format!("{text}{text}");
        let r = parse(&two, "log.txt").unwrap();
        assert_eq!((r.len(), r[1].label.as_str()), (2, "log.txt: result 2"));
    }

    #[test]
    fn csv_sweeps_give_a_run_per_row_and_errors_name_the_cell() {
        let text = "rate,isl,osl,requests,ttft_ms_mean,tpot_ms_p50,output_tokens_per_s\n\
                    1,1024,128,100,40,10,128\n4,1024,128,400,55,12.5,500\n";
        assert!(is_summary(text));
        let r = parse(text, "sweep.csv").unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!((r[1].label.as_str(), r[1].load.rate, r[1].requests), ("sweep.csv:3", Some(4.0), 400));
        assert_eq!(r[1].stats["tpot_ms.p50"], 12.5);
        let e = parse(&text.replace("12.5", "x"), "sweep.csv").unwrap_err().to_string();
        assert!(e.contains("sweep.csv:3: tpot_ms_p50: \"x\" is not a number"), "{e}");
        let e = parse(&text.replace(",requests,", ",rate,"), "sweep.csv").unwrap_err().to_string();
        assert!(e.contains("column rate is given twice"), "{e}");
        let e = parse("rate,isl,osl,requests\n1,10,10,10\n", "s.csv").unwrap_err().to_string();
        assert!(e.contains("no statistic column"), "{e}");
        let e = parse(&text.replace("1,1024,128,100", "-1,1024,128,100"), "s.csv").unwrap_err().to_string();
        assert!(e.contains("request rate -1"), "{e}");
        // A per-request CSV is not a sweep.
        assert!(!is_summary("arrival_ms,prompt_tokens,output_tokens,ttft_ms,e2e_ms\n0,1,1,1,1\n"));
    }
}
