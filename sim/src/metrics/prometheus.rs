//! A window of an engine's Prometheus metrics as a measured run: two scrapes of vLLM's (or
//! SGLang's) `/metrics`, at the window's start and end, read into a [`BenchRun`].
//!
//! ```text
//!   requests    Δ count of e2e_request_latency_seconds (else Δ request_success_total)
//!   lengths     Δ sum / Δ count of request_prompt_tokens and request_generation_tokens
//!               (else Δ prompt_tokens_total, generation_tokens_total over the requests)
//!   targets     time_to_first_token_seconds → TTFT; request_time_per_output_token_seconds
//!               (per request) → TPOT; inter_token_latency_seconds, else
//!               time_per_output_token_seconds (per token) → ITL; e2e_request_latency_seconds
//!               → E2E: each mean (Δ sum / Δ count, exact) and p50, p90, p99 (read within the
//!               histogram's buckets, as Prometheus's histogram_quantile reads them)
//!   the workload Poisson arrivals at requests ÷ window, lengths fixed at their means
//! ```
//! Approximated, and said in the run's notes: the arrival process (the metrics keep no arrival
//! times), the lengths (their means), the percentiles (within a bucket), and the latencies'
//! clock (the engine's API server measures them: from its arrival to the token leaving it,
//! without the network). Series of one metric with different labels (models, engines) are
//! summed.

use std::collections::BTreeMap;

use super::bench::{BenchRun, Load};

/// One scrape: (metric name, `le` label or "") → value, every other label summed over.
type Scrape = BTreeMap<(String, String), f64>;

/// Parses a text exposition (`# HELP`, `# TYPE`, `name{labels} value [timestamp]`); `label`
/// names the file in errors.
fn scrape(text: &str, label: &str) -> Result<Scrape, String> {
    let mut out = Scrape::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let at = || format!("{label}:{}", i + 1);
        let (name, rest) = match l.find(['{', ' ']) {
            Some(p) => (&l[..p], &l[p..]),
            None => return Err(format!("{}: not a sample line: {l:?}", at())),
        };
        let (labels, value) = if let Some(r) = rest.strip_prefix('{') {
            let end = r.rfind('}').ok_or_else(|| format!("{}: unclosed labels: {l:?}", at()))?;
            (&r[..end], r[end + 1..].trim())
        } else {
            ("", rest.trim())
        };
        let le = labels
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| k.trim() == "le")
            .map(|(_, v)| v.trim().trim_matches('"').to_string())
            .unwrap_or_default();
        let v = value.split_whitespace().next().unwrap_or("");
        let x = match v {
            "+Inf" | "Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            _ => v.parse::<f64>().map_err(|_| format!("{}: {name}: {v:?} is not a number", at()))?,
        };
        *out.entry((name.to_string(), le)).or_insert(0.0) += x;
    }
    Ok(out)
}

/// A histogram's change over the window: cumulative bucket counts by upper bound, sum, count.
struct Delta {
    buckets: Vec<(f64, f64)>,
    sum: f64,
    count: f64,
}

impl Delta {
    /// The value below which a fraction `q` of the observations fell, read linearly within its
    /// bucket (Prometheus's `histogram_quantile`).
    fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.buckets.last()?.1;
        if total <= 0.0 {
            return None;
        }
        let rank = q * total;
        let mut prev = (0.0, 0.0);
        for &(le, c) in &self.buckets {
            if c >= rank {
                if le.is_infinite() {
                    return Some(prev.0); // beyond the last finite bound: that bound
                }
                let within = if c > prev.1 { (rank - prev.1) / (c - prev.1) } else { 1.0 };
                return Some(prev.0 + (le - prev.0) * within);
            }
            prev = (le, c);
        }
        None
    }
}

/// The two scrapes' difference of histogram `name` (`None` when neither has it).
fn delta(a: &Scrape, b: &Scrape, name: &str, label: &str) -> Result<Option<Delta>, String> {
    let get = |s: &Scrape, suffix: &str, le: &str| s.get(&(format!("{name}{suffix}"), le.to_string())).copied();
    let (Some(c1), Some(s1)) = (get(b, "_count", ""), get(b, "_sum", "")) else { return Ok(None) };
    let (c0, s0) = (get(a, "_count", "").unwrap_or(0.0), get(a, "_sum", "").unwrap_or(0.0));
    if c1 < c0 {
        return Err(format!("{label}: {name}_count went down ({c0} → {c1}): the server restarted between the scrapes"));
    }
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for ((n, le), v) in b.range((format!("{name}_bucket"), String::new())..) {
        if n != &format!("{name}_bucket") {
            break;
        }
        let bound = if le == "+Inf" { f64::INFINITY } else { le.parse::<f64>().unwrap_or(f64::NAN) };
        if bound.is_nan() {
            continue;
        }
        let before = a.get(&(n.clone(), le.clone())).copied().unwrap_or(0.0);
        buckets.push((bound, v - before));
    }
    buckets.sort_by(|x, y| x.0.total_cmp(&y.0));
    Ok(Some(Delta { buckets, sum: s1 - s0, count: c1 - c0 }))
}

/// A window of an engine's metrics, `window_s` seconds from the `before` scrape to the `after`
/// one, as a measured benchmark run.
pub fn window(before: &str, after: &str, window_s: f64, label: &str) -> Result<BenchRun, String> {
    if !(window_s.is_finite() && window_s > 0.0 && window_s <= 1e8) {
        return Err(format!("{label}: the window {window_s} s is not a duration in (0, 10⁸] s"));
    }
    let a = scrape(before, &format!("{label} (before)"))?;
    let b = scrape(after, &format!("{label} (after)"))?;
    let engine = if b.keys().any(|(n, _)| n.starts_with("vllm:")) {
        "vllm"
    } else if b.keys().any(|(n, _)| n.starts_with("sglang:")) {
        "sglang"
    } else {
        return Err(format!("{label}: no vllm: or sglang: metric in the scrapes"));
    };
    let m = |name: &str| format!("{engine}:{name}");
    let hist = |name: &str| delta(&a, &b, &m(name), label);
    let counter = |name: &str| -> Option<f64> {
        let k = (m(name), String::new());
        Some(b.get(&k)? - a.get(&k).copied().unwrap_or(0.0))
    };
    let e2e = hist("e2e_request_latency_seconds")?;
    let requests = match (&e2e, counter("request_success_total")) {
        (Some(d), _) => d.count,
        (None, Some(c)) => c,
        (None, None) => {
            return Err(format!(
                "{label}: no {engine}:e2e_request_latency_seconds or request_success_total to count requests"
            ))
        }
    };
    if requests < 1.0 {
        return Err(format!("{label}: no request finished between the scrapes"));
    }
    let mean_len = |hist_name: &str, total: &str| -> Result<f64, String> {
        match delta(&a, &b, &m(hist_name), label)? {
            Some(d) if d.count > 0.0 => Ok(d.sum / d.count),
            _ => counter(total)
                .map(|t| t / requests)
                .ok_or_else(|| format!("{label}: no {engine}:{hist_name} or {engine}:{total} for the lengths")),
        }
    };
    let prompt = mean_len("request_prompt_tokens", "prompt_tokens_total")?;
    let output = mean_len("request_generation_tokens", "generation_tokens_total")?;
    let mut stats = BTreeMap::new();
    let mut put = |metric: &str, d: &Option<Delta>| {
        if let Some(d) = d.as_ref().filter(|d| d.count > 0.0) {
            stats.insert(format!("{metric}.mean"), d.sum / d.count * 1e3);
            for (k, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
                if let Some(v) = d.quantile(q).filter(|v| *v > 0.0) {
                    stats.insert(format!("{metric}.{k}"), v * 1e3);
                }
            }
        }
    };
    put("ttft_ms", &hist("time_to_first_token_seconds")?);
    put("tpot_ms", &hist("request_time_per_output_token_seconds")?);
    let itl = match hist("inter_token_latency_seconds")? {
        Some(d) => Some(d),
        None => hist("time_per_output_token_seconds")?,
    };
    put("itl_ms", &itl);
    put("e2e_ms", &e2e);
    let rate = requests / window_s;
    let run = BenchRun {
        label: label.to_string(),
        format: "prometheus",
        load: Load { rate: Some(rate), burstiness: 1.0, concurrency: None },
        prompt_tokens: prompt,
        output_tokens: output,
        requests: requests.round() as u64,
        warmup: 0,
        stats,
        notes: vec![format!(
            "{engine} metrics over {window_s} s: {requests:.0} requests re-created as Poisson arrivals at {rate:.3} \
             req/s with fixed lengths at their means ({prompt:.0} + {output:.0} tokens); percentiles read within \
             the histograms' buckets; latencies as the engine's API server measures them (without the network)"
        )],
        tp: None,
    };
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape_text(n: f64, ttft_sum: f64, le: [f64; 3]) -> String {
        format!(
            "# HELP vllm:time_to_first_token_seconds Time to first token\n# TYPE vllm:time_to_first_token_seconds histogram\n\
             vllm:time_to_first_token_seconds_bucket{{le=\"0.05\",model_name=\"m\"}} {}\n\
             vllm:time_to_first_token_seconds_bucket{{le=\"0.1\",model_name=\"m\"}} {}\n\
             vllm:time_to_first_token_seconds_bucket{{le=\"+Inf\",model_name=\"m\"}} {}\n\
             vllm:time_to_first_token_seconds_sum{{model_name=\"m\"}} {ttft_sum}\n\
             vllm:time_to_first_token_seconds_count{{model_name=\"m\"}} {n}\n\
             vllm:e2e_request_latency_seconds_sum{{model_name=\"m\"}} {}\n\
             vllm:e2e_request_latency_seconds_count{{model_name=\"m\"}} {n}\n\
             vllm:e2e_request_latency_seconds_bucket{{le=\"+Inf\",model_name=\"m\"}} {n}\n\
             vllm:prompt_tokens_total{{model_name=\"m\"}} {}\n\
             vllm:generation_tokens_total{{model_name=\"m\"}} {}\n",
            le[0],
            le[1],
            le[2],
            n * 2.0,
            n * 1000.0,
            n * 100.0
        )
    }

    #[test]
    fn a_window_gives_the_rate_the_lengths_and_the_latencies() {
        let before = scrape_text(100.0, 5.0, [40.0, 90.0, 100.0]);
        // 200 more requests, 12 s more of TTFT: mean 60 ms; cumulative buckets +80, +150, +200.
        let after = scrape_text(300.0, 17.0, [120.0, 240.0, 300.0]);
        let r = window(&before, &after, 50.0, "w").unwrap();
        assert_eq!((r.requests, r.load.rate), (200, Some(4.0)));
        assert_eq!((r.prompt_tokens, r.output_tokens), (1000.0, 100.0));
        assert!((r.stats["ttft_ms.mean"] - 60.0).abs() < 1e-9);
        // The median: rank 100 of 200; 80 below 0.05 s, 150 below 0.1 s: 20 of the 70 between
        // them → 0.05 + 0.05 × 20/70 s.
        let p50 = (0.05 + 0.05 * 20.0 / 70.0) * 1e3;
        assert!((r.stats["ttft_ms.p50"] - p50).abs() < 1e-9, "{}", r.stats["ttft_ms.p50"]);
        assert_eq!(r.stats["e2e_ms.mean"], 2000.0);
        // A restart between the scrapes is an error, as is a window of no time.
        assert!(window(&after, &before, 50.0, "w").unwrap_err().contains("went down"));
        assert!(window(&before, &after, 0.0, "w").unwrap_err().contains("not a duration"));
        assert!(window("x 1\n", "x 2\n", 1.0, "w").unwrap_err().contains("no vllm: or sglang: metric"));
        assert!(window(&before, "vllm:e2e_request_latency_seconds_count{a=\"b\"} q\n", 1.0, "w")
            .unwrap_err()
            .contains("is not a number"));
    }
}
