//! Trace replay and workload profiles, checked against figures this file computes itself from
//! the raw trace files in data/traces/ (its own CSV/JSON reading, date arithmetic and
//! statistics — none of servesim's code).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::Value;

const CONV: &str = "data/traces/AzureLLMInferenceTrace_conv.csv";
const CODE: &str = "data/traces/AzureLLMInferenceTrace_code.csv";
const MOONCAKE: &str = "data/traces/mooncake_conversation_trace.jsonl";

/// A trace as this test reads it: arrival offsets from the first request in 100 ns units
/// (Azure's resolution) or ms, and lengths.
struct Raw {
    /// Offsets from the first arrival, seconds.
    t: Vec<f64>,
    /// Offsets in integer nanoseconds (exact).
    t_ns: Vec<u64>,
    prompt: Vec<u64>,
    output: Vec<u64>,
    /// Mooncake: the hash ids of each request.
    ids: Vec<Vec<u64>>,
}

/// `2023-11-16 18:15:46.6805900` → 100 ns units since the start of the month (the traces span
/// one hour of one day).
fn azure_time(s: &str) -> u64 {
    let day: u64 = s[8..10].parse().unwrap();
    let h: u64 = s[11..13].parse().unwrap();
    let m: u64 = s[14..16].parse().unwrap();
    let sec: u64 = s[17..19].parse().unwrap();
    let frac: u64 = s[20..27].parse().unwrap();
    assert_eq!(s.len(), 27, "seven fractional digits: {s}");
    (((day * 24 + h) * 60 + m) * 60 + sec) * 10_000_000 + frac
}

fn read_azure(path: &str) -> Raw {
    let text = read(&root().join(path));
    let mut lines = text.lines();
    assert_eq!(lines.next().unwrap(), "TIMESTAMP,ContextTokens,GeneratedTokens");
    let (mut t100, mut prompt, mut output) = (vec![], vec![], vec![]);
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        t100.push(azure_time(f[0]));
        prompt.push(f[1].parse().unwrap());
        output.push(f[2].parse().unwrap());
    }
    let t_ns: Vec<u64> = t100.iter().map(|&x| (x - t100[0]) * 100).collect();
    Raw { t: t_ns.iter().map(|&x| x as f64 / 1e9).collect(), t_ns, prompt, output, ids: vec![] }
}

fn read_mooncake(path: &str) -> Raw {
    let text = read(&root().join(path));
    let (mut ms, mut prompt, mut output, mut ids) = (vec![], vec![], vec![], vec![]);
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(l).unwrap();
        ms.push(v["timestamp"].as_u64().unwrap());
        prompt.push(v["input_length"].as_u64().unwrap());
        output.push(v["output_length"].as_u64().unwrap());
        ids.push(v["hash_ids"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect());
    }
    let t_ns: Vec<u64> = ms.iter().map(|&x| (x - ms[0]) * 1_000_000).collect();
    Raw { t: t_ns.iter().map(|&x| x as f64 / 1e9).collect(), t_ns, prompt, output, ids }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Population standard deviation over mean.
fn cv(v: &[f64]) -> f64 {
    let m = mean(v);
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64).sqrt() / m
}

/// numpy.percentile's default (linear) on unsorted integers.
fn pct(v: &[u64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    let rank = p / 100.0 * (s.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    s[lo] as f64 + (s[hi] as f64 - s[lo] as f64) * (rank - lo as f64)
}

/// Counts per complete window of `w` seconds from the first arrival.
fn window_counts(t: &[f64], w: f64) -> Vec<f64> {
    let n = (t[t.len() - 1] / w).floor() as usize;
    let mut c = vec![0.0; n];
    for &x in t {
        let i = (x / w).floor() as usize;
        if i < n {
            c[i] += 1.0;
        }
    }
    c
}

fn dispersion(t: &[f64], w: f64) -> f64 {
    let c = window_counts(t, w);
    let m = mean(&c);
    c.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / c.len() as f64 / m
}

struct Expected {
    requests: u64,
    duration_s: f64,
    rate: f64,
    cv: f64,
    prompt: [f64; 4],
    output: [f64; 4],
}

fn expected(r: &Raw) -> Expected {
    let gaps: Vec<f64> = r.t.windows(2).map(|w| w[1] - w[0]).collect();
    let d = r.t[r.t.len() - 1];
    let lens = |v: &[u64]| [v.iter().sum::<u64>() as f64 / v.len() as f64, pct(v, 50.0), pct(v, 90.0), pct(v, 99.0)];
    Expected {
        requests: r.t.len() as u64,
        duration_s: d,
        rate: r.t.len() as f64 / d,
        cv: cv(&gaps),
        prompt: lens(&r.prompt),
        output: lens(&r.output),
    }
}

fn close(got: f64, want: f64, rel: f64, what: &str) {
    assert!((got - want).abs() <= rel * want.abs().max(1e-12), "{what}: got {got}, expected {want} (±{rel})");
}

fn describe(args: &[&str]) -> Value {
    let mut a = vec!["workload", "describe", "--format", "json"];
    a.extend_from_slice(args);
    let o = servesim(&a);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

fn lens_of(v: &Value) -> [f64; 4] {
    ["mean", "p50", "p90", "p99"].map(|k| v[k].as_f64().unwrap())
}

/// The profile matches the independent computation to rounding.
fn check_profile(p: &Value, e: &Expected) {
    assert_eq!(p["requests"].as_u64().unwrap(), e.requests);
    close(p["duration_s"].as_f64().unwrap(), e.duration_s, 1e-9, "duration_s");
    close(p["rate_mean_rps"].as_f64().unwrap(), e.rate, 1e-9, "rate_mean_rps");
    close(p["interarrival_cv"].as_f64().unwrap(), e.cv, 1e-6, "interarrival_cv");
    for (k, want) in [("prompt_tokens", e.prompt), ("output_tokens", e.output)] {
        let got = lens_of(&p[k]);
        for i in 0..4 {
            close(got[i], want[i], 1e-9, k);
        }
    }
}

#[test]
fn azure_conv_profile_matches_the_raw_file() {
    let raw = read_azure(CONV);
    let e = expected(&raw);
    let p = describe(&["--trace", CONV]);
    check_profile(&p, &e);
    // The headline figures.
    assert_eq!(e.requests, 19_366);
    close(e.rate, 5.53, 0.005, "mean rate");
    close(e.prompt[0], 1155.0, 0.001, "prompt mean");
    close(e.output[0], 211.0, 0.001, "output mean");
    close(e.cv, 1.1, 0.01, "CV");
    // Windows and dispersion.
    let c = window_counts(&raw.t, 60.0);
    let r = &p["rate_rps"];
    assert_eq!(r["windows"].as_u64().unwrap(), c.len() as u64);
    close(r["min"].as_f64().unwrap(), c.iter().cloned().fold(f64::MAX, f64::min) / 60.0, 1e-12, "min rate");
    close(r["max"].as_f64().unwrap(), c.iter().cloned().fold(0.0, f64::max) / 60.0, 1e-12, "max rate");
    for (k, w) in [("1s", 1.0), ("10s", 10.0), ("60s", 60.0)] {
        close(p["index_of_dispersion"][k].as_f64().unwrap(), dispersion(&raw.t, w), 1e-9, k);
    }
    let short = raw.prompt.iter().filter(|&&x| x < 1024).count() as f64 / raw.prompt.len() as f64;
    close(p["prompt_tokens"]["short"].as_f64().unwrap(), short, 1e-12, "short prompts");
    assert_eq!(p["prefix_reuse_token_fraction"].as_f64().unwrap(), 0.0, "Azure traces carry no content ids");
}

#[test]
fn azure_code_is_bursty_with_idle_minutes() {
    let raw = read_azure(CODE);
    let e = expected(&raw);
    let p = describe(&["--trace", CODE]);
    check_profile(&p, &e);
    assert!(e.cv > 10.0, "CV far above 1: {}", e.cv);
    close(e.cv, 13.0, 0.05, "CV ≈ 13");
    let c = window_counts(&raw.t, 60.0);
    let idle = c.iter().filter(|&&x| x == 0.0).count() as u64;
    assert!(idle >= 10, "long idle gaps: {idle} idle minutes");
    assert_eq!(p["rate_rps"]["idle_windows"].as_u64().unwrap(), idle);
    assert_eq!(p["rate_rps"]["min"].as_f64().unwrap(), 0.0);
    assert!(p["rate_rps"]["peak_to_mean"].as_f64().unwrap() > 3.0);
    // The table shows the same.
    let o = servesim(&["workload", "describe", "--trace", CODE]);
    let t = stdout(&o);
    assert!(t.contains(&format!("57 windows, {idle} idle")), "{t}");
    assert!(t.contains("CV 13.151"), "{t}");
}

/// Prefix reuse over an unbounded block cache, computed from the raw hash ids: a request's
/// leading blocks already seen count (512 tokens each, the last block partial).
fn prefix_reuse(raw: &Raw) -> f64 {
    let mut seen = HashSet::new();
    let (mut hit, mut total) = (0u64, 0u64);
    for (ids, &len) in raw.ids.iter().zip(&raw.prompt) {
        total += len;
        let mut leading = true;
        for (i, id) in ids.iter().enumerate() {
            let tokens = if i + 1 == ids.len() { len - 512 * i as u64 } else { 512 };
            leading = leading && seen.contains(id);
            if leading {
                hit += tokens;
            }
        }
        seen.extend(ids.iter().copied());
    }
    hit as f64 / total as f64
}

#[test]
fn mooncake_conversation_prefix_reuse() {
    let raw = read_mooncake(MOONCAKE);
    let e = expected(&raw);
    let p = describe(&["--trace", MOONCAKE]);
    check_profile(&p, &e);
    let reuse = prefix_reuse(&raw);
    close(reuse, 0.37, 0.02, "≈ 37% of input tokens");
    close(p["prefix_reuse_token_fraction"].as_f64().unwrap(), reuse, 1e-12, "prefix reuse");
    assert_eq!(p["requests_with_content"].as_u64().unwrap(), e.requests);
}

/// Fits a `[workload]` to `trace`, writes it into a scenario, and profiles that.
fn fit_then_describe(name: &str, trace: &str, fit_args: &[&str], edit: impl Fn(String) -> String) -> Value {
    let mut a = vec!["workload", "fit", "--trace", trace];
    a.extend_from_slice(fit_args);
    let o = servesim(&a);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let section = edit(stdout(&o));
    assert!(section.contains("[workload]"), "{section}");
    let dir = out_dir(name);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("fitted.toml");
    std::fs::write(&path, format!("[model]\npreset = \"llama-3-8b\"\n[gpu]\npreset = \"h100-sxm\"\n{section}"))
        .unwrap();
    describe(&["--scenario", path.to_str().unwrap()])
}

fn check_round_trip(got: &Value, e: &Expected, what: &str) {
    close(got["rate_mean_rps"].as_f64().unwrap(), e.rate, 0.10, &format!("{what}: mean rate"));
    close(got["interarrival_cv"].as_f64().unwrap(), e.cv, 0.10, &format!("{what}: CV"));
    for (k, want) in [("prompt_tokens", e.prompt), ("output_tokens", e.output)] {
        let g = lens_of(&got[k]);
        for (i, q) in ["p50", "p90", "p99"].iter().enumerate() {
            close(g[i + 1], want[i + 1], 0.10, &format!("{what}: {k} {q}"));
        }
    }
}

#[test]
fn fit_then_describe_reproduces_rate_cv_and_percentiles() {
    let conv = expected(&read_azure(CONV));
    let gamma = fit_then_describe("fit-conv-gamma", CONV, &[], |s| s);
    check_round_trip(&gamma, &conv, "conv gamma");
    let phases = fit_then_describe("fit-conv-phases", CONV, &["--arrival", "phases"], |s| s);
    check_round_trip(&phases, &conv, "conv phases");
    // Phases follow the trace's rate over time: the busiest minute is reproduced too.
    let raw = read_azure(CONV);
    let peak = window_counts(&raw.t, 60.0).into_iter().fold(0.0, f64::max) / 60.0;
    close(phases["rate_rps"]["max"].as_f64().unwrap(), peak, 0.10, "conv phases: peak minute");

    let mc = expected(&read_mooncake(MOONCAKE));
    let m = fit_then_describe("fit-mooncake", MOONCAKE, &[], |s| s);
    check_round_trip(&m, &mc, "mooncake gamma");

    // Azure code's CV of 13 makes an hour's request count itself vary by ~14% from one draw
    // to the next (its 60 s index of dispersion is 164): the fitted process is described over
    // ten times the trace's duration, so the check is of the process, not of one draw's luck.
    let code = expected(&read_azure(CODE));
    let ten = |s: String| {
        s.lines()
            .map(|l| match l.strip_prefix("duration_s = ") {
                Some(d) => format!("duration_s = {}", d.parse::<f64>().unwrap() * 10.0),
                None => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let c = fit_then_describe("fit-code", CODE, &[], ten);
    check_round_trip(&c, &code, "code gamma");
}

/// Writes `text` as a trace file under target/ and returns its path relative to the root.
fn trace_file(name: &str, text: &str) -> String {
    let dir = out_dir(&format!("trace-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.strip_prefix(root()).unwrap().to_str().unwrap().to_string()
}

const AZ_HEAD: &str = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
const AZ_ROWS: &str = "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n";

#[test]
fn malformed_traces_get_one_clear_line_and_exit_code_2() {
    let mc = "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0, 1]}\n";
    let cases: &[(&str, String, &str)] = &[
        ("missing-column.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.6805900,374\n".into(),
         ":1: missing column \"GeneratedTokens\" (the header has: TIMESTAMP, ContextTokens)"),
        ("bad-number.csv", format!("{AZ_HEAD}{AZ_ROWS}2023-11-16 18:15:51.0000000,12a,5\n"),
         ":4: ContextTokens: \"12a\" is not a number"),
        ("negative-length.csv", format!("{AZ_HEAD}{AZ_ROWS}2023-11-16 18:15:51.0000000,12,-5\n"),
         ":4: GeneratedTokens: -5 is negative: a token count must be ≥ 0"),
        ("backwards.csv", format!("{AZ_HEAD}{AZ_ROWS}2023-11-16 18:15:41.0000000,12,5\n"),
         ":4: TIMESTAMP: 9.995169 s earlier than line 3: timestamps go backwards; sort the trace, or set unsorted = \"sort\""),
        ("bad-date.csv", format!("{AZ_HEAD}2023-11-31 18:15:46.6805900,374,44\n"),
         ":2: TIMESTAMP: \"2023-11-31 18:15:46.6805900\" is not a date-time (YYYY-MM-DD HH:MM:SS[.fraction])"),
        ("fields.csv", format!("{AZ_HEAD}{AZ_ROWS}2023-11-16 18:15:51.0000000,12,5,7\n"),
         ":4: 4 fields where the header has 3"),
        ("empty.csv", String::new(), ": empty file: no header line"),
        ("header-only.csv", AZ_HEAD.into(), ": no requests: the file has no records"),
        ("empty.jsonl", "\n\n".into(), ": no requests: the file has no records"),
        ("not-json.jsonl", format!("{mc}{{\"timestamp\": 3,\n"), ":2: not a JSON object (column 16): EOF while parsing a value"),
        ("missing-key.jsonl", format!("{mc}{{\"timestamp\": 3, \"input_length\": 5}}\n"), ":2: output_length: missing"),
        ("negative.jsonl", format!("{mc}{{\"timestamp\": 3, \"input_length\": -5, \"output_length\": 1}}\n"),
         ":2: input_length: -5 is negative: a token count must be ≥ 0"),
        ("blocks.jsonl", "{\"timestamp\": 0, \"input_length\": 512, \"output_length\": 5, \"hash_ids\": [0, 1]}\n".into(),
         ":1: hash_ids: 2 blocks of 512 tokens need more than the request's 512 prompt tokens"),
        ("zero-output.jsonl", "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 0}\n".into(),
         ":1: output_length: 0 tokens: a request needs at least one output token (set min_output_tokens = 1 to raise it)"),
    ];
    let mut seen = HashSet::new();
    for (name, text, msg) in cases {
        let path = trace_file(name, text);
        let format = if name.ends_with(".csv") { "azure" } else { "mooncake" };
        let o = servesim(&["workload", "describe", "--trace", &path, "--trace-format", format]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert_eq!(err, format!("error: {path}{msg}\n"), "{name}");
        assert!(seen.insert(err), "{name}: its own message");
    }
    // Inputs a command cannot use.
    let one = trace_file("one.csv", "arrival_s,prompt_tokens,output_tokens\n1,2,3\n");
    let o = servesim(&["workload", "fit", "--trace", &one]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("a fit needs at least two requests over a positive duration; got 1 over 0 s"));
    let o = servesim(&["workload", "describe", "--trace", &one, "--column", "prompt=x"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--column: unknown key \"prompt\""), "{}", stderr(&o));
    let o = servesim(&["workload", "describe", "--trace", CONV, "--column", "arrival=t"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--column and --arrival-unit are for csv and jsonl traces"));
    // A mapped CSV: columns named on the command line.
    let mapped = trace_file("mapped.csv", "t_ms,in,out\n1000,5,6\n3000,7,8\n");
    let p = describe(&[
        "--trace",
        &mapped,
        "--column",
        "arrival=t_ms",
        "--column",
        "prompt_tokens=in",
        "--column",
        "output_tokens=out",
        "--arrival-unit",
        "ms",
    ]);
    assert_eq!(p["duration_s"].as_f64().unwrap(), 2.0);
    assert_eq!(p["prompt_tokens"]["max"].as_u64().unwrap(), 7);

    // Out-of-order timestamps are sorted when asked, with a warning.
    let path = trace_file("sortable.csv", &format!("{AZ_HEAD}{AZ_ROWS}2023-11-16 18:15:48.0000000,12,5\n"));
    let o = servesim(&["workload", "describe", "--trace", &path, "--sort", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!("warning: {path}: 1 requests were out of timestamp order and were sorted (reorder window 100000 requests)\n")
    );
    let p: Value = serde_json::from_str(&stdout(&o)).unwrap();
    close(p["duration_s"].as_f64().unwrap(), 4.314579, 1e-12, "sorted duration");
    assert_eq!(p["prompt_tokens"]["min"].as_u64().unwrap(), 12);
}

#[test]
fn a_scenario_with_a_malformed_trace_stops_before_running() {
    let path = trace_file("bad-for-simulate.csv", &format!("{AZ_HEAD}{AZ_ROWS}2023-11-16 18:15:51.0000000,12a,5\n"));
    let dir = out_dir("malformed-trace-scenario");
    std::fs::create_dir_all(&dir).unwrap();
    let s = dir.join("s.toml");
    let abs = root().join(&path);
    std::fs::write(&s, llama8b(&format!("trace = {{ format = \"azure\", path = {:?} }}", abs.to_str().unwrap()), ""))
        .unwrap();
    let o = servesim(&["simulate", "--scenario", s.to_str().unwrap(), "--out", dir.join("out").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    // The scenario that names the trace, then the trace's own line and field.
    assert_eq!(
        stderr(&o),
        format!("error: {}: {}:4: ContextTokens: \"12a\" is not a number\n", s.display(), abs.display())
    );
    assert!(!dir.join("out").exists(), "nothing written");
}

fn requests_csv(dir: &Path) -> Vec<Vec<String>> {
    read(&dir.join("requests.csv")).lines().skip(1).map(|l| l.split(',').map(String::from).collect()).collect()
}

/// Nanoseconds as `requests.csv` writes milliseconds.
fn ms(ns: u64) -> String {
    format!("{}.{:06}", ns / 1_000_000, ns % 1_000_000)
}

#[test]
fn shipped_replay_scenarios_replay_every_request_at_its_time() {
    let raw = read_azure(CONV);
    let dir = out_dir("azure-conv-replay");
    let o = servesim(&[
        "simulate",
        "--scenario",
        "scenarios/azure-conv-replay.toml",
        "--out",
        dir.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let r = &s["requests"];
    assert_eq!(r["arrived"].as_u64().unwrap(), 19_366);
    let sum = ["finished", "rejected", "in_flight"].iter().map(|k| r[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum, 19_366);
    let rows = requests_csv(&dir);
    assert_eq!(rows.len(), raw.t_ns.len());
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row[1], ms(raw.t_ns[i]), "request {i}: arrival");
        assert_eq!(row[5], raw.prompt[i].min(7168).to_string(), "request {i}: prompt clamped to 7168");
        assert_eq!(row[6], raw.output[i].to_string(), "request {i}: output");
    }

    // The same scenario, seed and build give byte-identical outputs.
    let again = out_dir("azure-conv-replay-again");
    let o = servesim(&[
        "simulate",
        "--scenario",
        "scenarios/azure-conv-replay.toml",
        "--out",
        again.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(o.status.code(), Some(0));
    for f in ["summary.json", "requests.csv", "timeseries.csv", "scenario.toml"] {
        assert!(std::fs::read(dir.join(f)).unwrap() == std::fs::read(again.join(f)).unwrap(), "{f} differs");
    }
    // describe --scenario profiles the replay as the scenario transforms it.
    let p = describe(&["--scenario", "scenarios/azure-conv-replay.toml"]);
    assert_eq!(p["requests"].as_u64().unwrap(), 19_366);
    assert_eq!(p["prompt_tokens"]["max"].as_u64().unwrap(), 7168);
    close(p["rate_mean_rps"].as_f64().unwrap(), expected(&raw).rate, 1e-9, "replayed rate");

    let mc = read_mooncake(MOONCAKE);
    let dir = out_dir("mooncake-replay");
    let o =
        servesim(&["simulate", "--scenario", "scenarios/mooncake-replay.toml", "--out", dir.to_str().unwrap(), "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rows = requests_csv(&dir);
    assert_eq!(rows.len(), 12_031);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row[1], ms(mc.t_ns[i]), "request {i}: arrival");
        assert_eq!(row[5], mc.prompt[i].to_string());
        assert_ne!(row[7], "rejected", "request {i}: the 128k context holds every prompt");
    }
}

/// A scenario replaying `trace` with extra keys in its trace table.
fn replay_scenario(name: &str, trace: &str, keys: &str) -> PathBuf {
    let dir = out_dir(name);
    std::fs::create_dir_all(&dir).unwrap();
    let s = dir.join("s.toml");
    let abs = root().join(trace);
    let wl = format!("trace = {{ format = \"azure\", path = {:?}{keys} }}", abs.to_str().unwrap());
    std::fs::write(&s, llama8b(&wl, "")).unwrap();
    s
}

fn arrivals_ns(scenario: &Path) -> Vec<u64> {
    let dir = scenario.parent().unwrap().join("out");
    let o = servesim(&["simulate", "--scenario", scenario.to_str().unwrap(), "--out", dir.to_str().unwrap(), "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    requests_csv(&dir)
        .iter()
        .map(|r| {
            let (a, b) = r[1].split_once('.').unwrap();
            a.parse::<u64>().unwrap() * 1_000_000 + b.parse::<u64>().unwrap()
        })
        .collect()
}

#[test]
fn replay_transforms_window_speedup_target_rate_and_sample() {
    let raw = read_azure(CODE);
    // The window [600 s, 1200 s) at 4× speed: the requests in it, from the first one, at a
    // quarter of their offsets.
    let inside: Vec<u64> = raw.t_ns.iter().copied().filter(|&t| (600e9..1200e9).contains(&(t as f64))).collect();
    let got = arrivals_ns(&replay_scenario("replay-window", CODE, ", window_s = [600, 1200], speedup = 4"));
    assert_eq!(got.len(), inside.len());
    for (g, t) in got.iter().zip(&inside) {
        assert_eq!(*g, ((t - inside[0]) as f64 / 4.0).round() as u64);
    }
    // A target rate of 10 req/s: the whole trace takes requests / 10 seconds.
    let got = arrivals_ns(&replay_scenario("replay-rate", CODE, ", target_rate = 10"));
    assert_eq!(got.len(), raw.t_ns.len());
    close(got[got.len() - 1] as f64 / 1e9, raw.t_ns.len() as f64 / 10.0, 1e-9, "replayed duration");
    // A seeded 10% sample: about a tenth, the same with the same seed, at the original times.
    let s = replay_scenario("replay-sample", CODE, ", sample = 0.1");
    let a = arrivals_ns(&s);
    assert_eq!(a, arrivals_ns(&s));
    let n = a.len() as f64;
    let expect = raw.t_ns.len() as f64 * 0.1;
    assert!((n - expect).abs() < 4.0 * (expect * 0.9).sqrt(), "{n} sampled of {}", raw.t_ns.len());
    // The replay's time zero is the trace's first request, kept or not.
    let all: HashSet<u64> = raw.t_ns.iter().copied().collect();
    assert!(a.iter().all(|x| all.contains(x)), "sampled requests keep their times");
}

#[test]
fn generate_writes_a_trace_that_replays_to_the_same_profile() {
    let dir = out_dir("generate");
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("chat.csv");
    let o = servesim(&["workload", "generate", "--scenario", "scenarios/chat.toml", "--out", csv.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let from_scenario = describe(&["--scenario", "scenarios/chat.toml"]);
    let from_trace = describe(&["--trace", csv.to_str().unwrap()]);
    assert_eq!(from_scenario, from_trace, "generated arrivals are exact to the nanosecond");
    let jsonl = dir.join("chat.jsonl");
    let o = servesim(&[
        "workload",
        "generate",
        "--scenario",
        "scenarios/chat.toml",
        "--out",
        jsonl.to_str().unwrap(),
        "--out-format",
        "jsonl",
        "--requests",
        "100",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let p = describe(&["--trace", jsonl.to_str().unwrap()]);
    assert_eq!(p["requests"].as_u64().unwrap(), 100);
    // Closed-loop arrivals depend on the service: describe says so.
    let closed = dir.join("closed.toml");
    let wl = "requests = 10\narrival = { kind = \"closed-loop\", clients = 2 }\n\
              prompt_tokens = { kind = \"fixed\", value = 5 }\noutput_tokens = { kind = \"fixed\", value = 5 }";
    std::fs::write(&closed, llama8b(wl, "")).unwrap();
    let o = servesim(&["workload", "describe", "--scenario", closed.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("a closed-loop workload's arrivals depend on how fast the service answers"));
}
