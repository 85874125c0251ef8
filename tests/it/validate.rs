//! `servesim validate` end to end on the CPU backend with a tiny model: the iteration table, the
//! run comparison, a deliberately wrong cost model caught at both levels, the `--measured`
//! round trip (the emulation's own per-request output gives its numbers exactly), vLLM and
//! AIPerf files, and the errors of bad input. Timing-dependent checks are loose (the machine is
//! shared); the checks of consistency are exact.

use std::path::Path;

use crate::common::*;
use serde_json::Value;
use servesim_sim::metrics::compare::run_metrics;
use servesim_sim::metrics::measured;

/// The CPU as a "GPU": its peaks are upper bounds no CPU this runs on beats (5 TFLOP/s, 200 GB/s),
/// since measured kernels faster than a group's peaks are refused as measured elsewhere.
const TINY: &str = "[model]\nname = \"tiny\"\nlayers = 2\nhidden = 256\nheads = 4\nkv_heads = 2\nhead_dim = 64\n\
    intermediate = 512\nvocab = 2048\nmax_context = 1024\n\
    [gpu]\nname = \"cpu\"\nbf16_tflops = 5\nhbm_gb_per_s = 200\nmemory_gib = 1\ninterconnect_gb_per_s = 10\npcie_gb_per_s = 10\n\
    [scheduler]\nmax_num_seqs = 8\nmax_num_batched_tokens = 256\nmax_model_len = 512\n\
    [memory]\nreserve_gib = 0\n[cost]\ncpu_overhead_base_us = 0\ncpu_overhead_per_seq_us = 0\nkernel_launch_us = 0\n\
    [slo]\nttft_ms = 20\ntpot_ms = 5\n";

fn tiny_scenario(dir: &Path, workload: &str) -> String {
    scenario_file(dir, "tiny.toml", &format!("{TINY}[workload]\n{workload}\n"))
}

const WORKLOAD: &str = "requests = 60\narrival = { kind = \"poisson\", rate = 1 }\n\
    prompt_tokens = { kind = \"uniform\", min = 16, max = 200 }\noutput_tokens = { kind = \"uniform\", min = 4, max = 24 }";

fn ok(args: &[&str]) -> String {
    let o = servesim(args);
    assert!(o.status.success(), "servesim {args:?} failed: {}", stderr(&o));
    stdout(&o)
}

fn json(p: &Path) -> Value {
    serde_json::from_str(&read(p)).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Every profile time multiplied by `k`.
fn scaled_profile(src: &Path, dst: &Path, k: f64) {
    let mut p = json(src);
    for t in p["ops"].as_array_mut().unwrap() {
        for pt in t["points"].as_array_mut().unwrap() {
            let pt = pt.as_array_mut().unwrap();
            let last = pt.len() - 1;
            pt[last] = Value::from(f(&pt[last]) * k);
        }
    }
    std::fs::write(dst, serde_json::to_string(&p).unwrap()).unwrap();
}

#[test]
fn cpu_validation_end_to_end() {
    let dir = out_dir("validate-cpu");
    let scen = tiny_scenario(&dir, WORKLOAD);
    let d = |s: &str| dir.join(s).display().to_string();

    // 1. Iteration level: calibrate here, then 24 batches (8 of each kind).
    ok(&[
        "validate",
        "--iterations",
        "--scenario",
        &scen,
        "--backend",
        "cpu",
        "--batches",
        "24",
        "--repeat",
        "1",
        "--calibration-deadline",
        "40s",
        "--out",
        &d("it"),
        "--quiet",
    ]);
    let it = json(&dir.join("it/iterations.json"));
    // On the cpu backend the calibration times each op inside the emulator's forward passes.
    assert_eq!(it["op_timing"], "in-pass");
    assert!(json(&dir.join("it/profile.json"))["meta"]["source"].as_str().unwrap().contains("inside forward passes"));
    let batches = it["batches"].as_array().unwrap();
    assert_eq!(batches.len(), 24);
    let kinds: Vec<(String, u64)> = it["by_kind"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["kind"].as_str().unwrap().into(), k["batches"].as_u64().unwrap()))
        .collect();
    assert_eq!(kinds, vec![("decode".into(), 8), ("prefill".into(), 8), ("mixed".into(), 8), ("all".into(), 24)]);
    let mut errs = Vec::new();
    for b in batches {
        let (m, p) = (f(&b["measured_ms"]), f(&b["profiled_ms"]));
        assert!(m > 0.0 && p > 0.0);
        let e = f(&b["profiled_error_pct"]);
        assert!((e - (p - m) / m * 100.0).abs() < 1e-9, "{b}");
        errs.push(e.abs());
    }
    errs.sort_by(f64::total_cmp);
    let median = (errs[11] + errs[12]) / 2.0;
    let all = &it["by_kind"][3]["profiled"];
    assert!((f(&all["median_abs_pct"]) - median).abs() < 1e-9);
    assert_eq!(read(&dir.join("it/iterations.csv")).lines().count(), 25);
    // Per op: the thirteen timed ops, `other` and `all`. With one execution per batch, `all`
    // is the batches' measured total and the model's total, and `other` what the timed ops
    // leave of the passes.
    let ops = it["ops"].as_array().unwrap();
    assert_eq!(ops.len(), 15, "{ops:?}");
    let row = |name: &str| ops.iter().find(|o| o["op"] == name).unwrap_or_else(|| panic!("no {name} row"));
    let sum = |key: &str| batches.iter().map(|b| f(&b[key])).sum::<f64>();
    assert!((f(&row("all")["measured_ms"]) - sum("measured_ms")).abs() < 1e-6 * sum("measured_ms"));
    assert!((f(&row("all")["profiled_ms"]) - sum("profiled_ms")).abs() < 1e-3, "breakdown sums to the iteration time");
    let timed: f64 = ops[..13].iter().map(|o| f(&o["measured_ms"])).sum();
    assert!((timed + f(&row("other")["measured_ms"]) - f(&row("all")["measured_ms"])).abs() < 1e-6);
    assert!(f(&row("other")["measured_ms"]) >= 0.0 && f(&row("mlp_up_proj")["measured_ms"]) > 0.0);
    // How close the prediction is depends on this shared machine's timing noise (a tiny model's
    // ops take microseconds): accuracy is measured by docs/fidelity.md's commands, not here.
    assert!(median.is_finite());
    // A profile twice too slow is caught.
    let profile = dir.join("it/profile.json");
    scaled_profile(&profile, &dir.join("wrong.json"), 2.0);
    ok(&[
        "validate",
        "--iterations",
        "--scenario",
        &scen,
        "--backend",
        "cpu",
        "--batches",
        "24",
        "--repeat",
        "1",
        "--profile",
        &d("wrong.json"),
        "--out",
        &d("it-wrong"),
        "--quiet",
    ]);
    let wrong = json(&dir.join("it-wrong/iterations.json"));
    // The same seeded batches, each predicted exactly twice as slow (to the nanosecond the
    // iteration times are rounded to)...
    for (w, b) in wrong["batches"].as_array().unwrap().iter().zip(batches) {
        assert!((f(&w["profiled_ms"]) - 2.0 * f(&b["profiled_ms"])).abs() < 1e-5, "{w} vs {b}");
    }
    // ...and each error computed from the doubled prediction. (How far off that is depends on
    // the machine's noise between the two processes: from +43% to +228% here.)
    for w in wrong["batches"].as_array().unwrap() {
        let (m, p) = (f(&w["measured_ms"]), f(&w["profiled_ms"]));
        assert!((f(&w["profiled_error_pct"]) - (p - m) / m * 100.0).abs() < 1e-9, "{w}");
    }

    // 2. Runs: capacity, then load 0.5, predicted with the calibrated profile.
    let out = ok(&[
        "validate",
        "--scenario",
        &scen,
        "--backend",
        "cpu",
        "--loads",
        "0.5",
        "--profile",
        &profile.display().to_string(),
        "--out",
        &d("runs"),
        "--format",
        "json",
    ]);
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r, json(&dir.join("runs/validate.json")));
    let cap = f(&r["capacity"]["measured_rps"]);
    assert!(cap > 0.0);
    let load = &r["loads"][0];
    assert!((f(&load["rate_rps"]) - 0.5 * cap).abs() < 1e-9 * cap);
    let rows = load["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 17);
    for row in rows {
        let (m, p) = (f(&row["measured"]), f(&row["predicted"]));
        if m != 0.0 {
            assert!((f(&row["error_pct"]) - (p - m) / m * 100.0).abs() < 1e-9, "{row}");
        }
    }
    // The CSV holds the same numbers.
    let csv = read(&dir.join("runs/validate.csv"));
    assert_eq!(csv.lines().count(), 1 + 1 + 17);
    // serde_json's default float parser may be one ulp off: numbers parsed from JSON are
    // compared within 1e-12.
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs();
    for (line, row) in csv.lines().skip(2).zip(rows) {
        let c: Vec<&str> = line.split(',').collect();
        assert_eq!((c[0], c[2], c[3]), ("0.5", row["metric"].as_str().unwrap(), row["stat"].as_str().unwrap()));
        assert!(
            close(c[4].parse().unwrap(), f(&row["measured"])) && close(c[5].parse().unwrap(), f(&row["predicted"])),
            "{line}"
        );
    }
    // The measured side is the emulated run's per-request file.
    let emulated = dir.join("runs/load-0.50/emulated/requests.csv");
    let slo = servesim_sim::scenario::SloSection { ttft_ms: Some(20.0), tpot_ms: Some(5.0), ..Default::default() };
    let m = run_metrics(&measured::parse(&read(&emulated), "e", None).unwrap().outcomes(), &slo);
    assert!(close(f(&rows[0]["measured"]), m.ttft_ms.mean));
    assert!(close(f(&rows[11]["measured"]), m.e2e_ms.p99));
    assert_eq!(m.requests, 60);
    // The predicted side is reproduced by `simulate` on the scenario written next to it.
    let sim = ok(&[
        "simulate",
        "--scenario",
        &d("runs/load-0.50/predicted/scenario.toml"),
        "--out",
        &d("resim"),
        "--format",
        "json",
    ]);
    let sim: Value = serde_json::from_str(&sim).unwrap();
    assert_eq!(f(&sim["ttft_ms"]["mean"]), f(&rows[0]["predicted"]));
    assert_eq!(f(&sim["e2e_ms"]["p99"]), f(&rows[11]["predicted"]));
    // The headline is the median of the six |errors| (TTFT, TPOT, E2E × mean, p99). Its value
    // is the machine's business (7.7% to 102.8% in runs of this test here, 60 requests on a
    // tiny model): docs/fidelity.md's command measures accuracy.
    let mut six: Vec<f64> = [0usize, 3, 4, 7, 8, 11].iter().map(|&i| f(&rows[i]["error_pct"]).abs()).collect();
    six.sort_by(f64::total_cmp);
    let headline = f(&load["headline_median_abs_error_pct"]);
    assert!((headline - (six[2] + six[3]) / 2.0).abs() < 1e-9, "headline {headline} vs {six:?}");

    // 3. The round trip: the emulated requests.csv as "measured" gives the emulation's numbers
    // exactly, and the replay (same requests, same arrival times) the same predictions.
    let rt = ok(&[
        "validate",
        "--measured",
        &emulated.display().to_string(),
        "--scenario",
        &scen,
        "--profile",
        &profile.display().to_string(),
        "--out",
        &d("roundtrip"),
        "--format",
        "json",
    ]);
    let rt: Value = serde_json::from_str(&rt).unwrap();
    assert_eq!(rt["format"], "csv");
    assert_eq!(rt["replayed"], 60);
    let rt_rows = rt["rows"].as_array().unwrap();
    for (a, b) in rt_rows.iter().zip(rows) {
        assert_eq!(a["metric"], b["metric"]);
        assert_eq!(a["measured"], b["measured"], "{}: measured differs", a["metric"]);
        assert_eq!(a["predicted"], b["predicted"], "{}: predicted differs", a["metric"]);
        assert_eq!(a["roofline"], b["roofline"], "{}: roofline differs", a["metric"]);
    }

    // 4. The wrong profile at the run level (capacity given: no second capacity run).
    let w = ok(&[
        "validate",
        "--scenario",
        &scen,
        "--backend",
        "cpu",
        "--loads",
        "0.5",
        "--profile",
        &d("wrong.json"),
        "--capacity",
        &cap.to_string(),
        "--out",
        &d("runs-wrong"),
        "--format",
        "json",
    ]);
    let w: Value = serde_json::from_str(&w).unwrap();
    assert_eq!(w["capacity"]["given"], true);
    let e2e_err = f(&w["loads"][0]["rows"][8]["error_pct"]);
    assert_eq!(w["loads"][0]["rows"][8]["metric"], "e2e_ms");
    assert!(e2e_err > 60.0, "a ×2 profile should overpredict E2E by far more than 60%, got {e2e_err}%");
}

/// A run calibrated while it is emulated (no --profile): its own profile, the pooled one, and
/// the per-op table that sums to the iterations.
#[test]
fn a_calibrated_run_is_predicted_by_its_own_phase() {
    let dir = out_dir("validate-phases");
    let scen = tiny_scenario(&dir, WORKLOAD);
    let d = |s: &str| dir.join(s).display().to_string();
    let out = ok(&[
        "validate",
        "--scenario",
        &scen,
        "--backend",
        "cpu",
        "--loads",
        "0.5",
        "--capacity",
        "20",
        "--calibration-deadline",
        "20s",
        "--out",
        &d("o"),
        "--format",
        "json",
        "--quiet",
    ]);
    assert!(out.is_empty(), "--quiet prints nothing");
    let r = json(&dir.join("o/validate.json"));
    assert_eq!(r["op_timing"], "in-pass");
    let load = &r["loads"][0];
    // The run's prediction names the profile of its own phase, and `simulate` reproduces it.
    let toml = read(&dir.join("o/load-0.50/predicted/scenario.toml"));
    let own = std::fs::canonicalize(dir.join("o/load-0.50/profile.json")).unwrap();
    assert!(toml.contains(&format!("profile = \"{}\"", own.display())), "{toml}");
    assert!(json(&own)["meta"]["notes"][0].as_str().unwrap().starts_with("phase 0 of the command"));
    let sim = ok(&[
        "simulate",
        "--scenario",
        &d("o/load-0.50/predicted/scenario.toml"),
        "--out",
        &d("resim"),
        "--format",
        "json",
    ]);
    let sim: Value = serde_json::from_str(&sim).unwrap();
    assert_eq!(f(&sim["e2e_ms"]["mean"]), f(&load["rows"][8]["predicted"]));
    // Beside it, the pooled profile's prediction: its headline is the median of its six errors.
    let pooled = &load["pooled"];
    let mut six: Vec<f64> = pooled["headline_errors_pct"].as_array().unwrap().iter().map(|e| f(e).abs()).collect();
    assert_eq!(six.len(), 6);
    six.sort_by(f64::total_cmp);
    assert!((f(&pooled["headline_median_abs_error_pct"]) - (six[2] + six[3]) / 2.0).abs() < 1e-9);
    assert!(dir.join("o/profile.json").exists() && dir.join("o/load-0.50/predicted-pooled/summary.json").exists());
    // Per op: the executed ops and `other` make up the passes, which are the iterations'
    // measured times (one execution each); the profiled ops add up to the prediction.
    let ops = load["ops"].as_array().unwrap();
    let row = |name: &str| ops.iter().find(|o| o["op"] == name).unwrap_or_else(|| panic!("no {name} row"));
    let it = read(&dir.join("o/load-0.50/emulated/iterations.csv"));
    let col = |i: usize| it.lines().skip(1).map(|l| l.split(',').nth(i).unwrap().parse::<f64>().unwrap()).sum::<f64>();
    let (measured, profiled) = (col(6), col(7));
    assert!((f(&row("all")["measured_ms"]) - measured).abs() < 1e-3 * measured, "{measured} ms of iterations");
    assert!((f(&row("all")["profiled_ms"]) - profiled).abs() < 1e-3 * profiled, "{profiled} ms predicted");
    let timed: f64 = ops.iter().filter(|o| o["op"] != "all").map(|o| f(&o["measured_ms"])).sum();
    assert!((timed - f(&row("all")["measured_ms"])).abs() < 1e-6 * timed);
    // Decode-only iterations are a part of them.
    let dec = load["decode_only_ops"].as_array().unwrap();
    let dec_all = dec.iter().find(|o| o["op"] == "all").unwrap();
    assert!(f(&dec_all["measured_ms"]) <= f(&row("all")["measured_ms"]));
    assert_eq!(
        f(&dec.iter().find(|o| o["op"] == "attn_prefill").map_or(Value::from(0.0), |o| o["measured_ms"].clone())),
        0.0
    );
}

#[test]
fn external_vllm_and_aiperf_files_are_replayed() {
    let dir = out_dir("validate-external");
    let scen = tiny_scenario(&dir, WORKLOAD);
    // vLLM: three requests, one failed; 0.1 s apart; E2E from the ITLs.
    let vllm = r#"{"request_rate": 10.0, "input_lens": [100, 50, 80], "output_lens": [5, 0, 3],
        "ttfts": [0.020, 0.0, 0.030], "itls": [[0.005, 0.005, 0.005, 0.005], [], [0.010, 0.010]],
        "start_times": [10.0, 10.1, 10.2], "errors": ["", "boom", ""]}"#;
    // `validate --measured dir/file`, its JSON report (the files go to dir/out).
    let measured = |file: &str, text: &str, out: &str| -> Value {
        std::fs::write(dir.join(file), text).unwrap();
        let d = |x: &str| dir.join(x).display().to_string();
        let o = ok(&["validate", "--measured", &d(file), "--scenario", &scen, "--out", &d(out), "--format", "json"]);
        serde_json::from_str(&o).unwrap()
    };
    let v = measured("vllm.json", vllm, "v");
    assert_eq!((v["format"].as_str(), v["replayed"].as_u64(), v["failed"].as_u64()), (Some("vllm"), Some(2), Some(1)));
    assert!(v["predicted_by"].as_str().unwrap().starts_with("roofline"));
    assert_eq!(f(&v["measured"]["ttft_ms"]["mean"]), 25.0);
    assert_eq!(f(&v["measured"]["e2e_ms"]["mean"]), (40.0 + 50.0) / 2.0);
    // TPOT: (40 − 20) / 4 = 5 and (50 − 30) / 2 = 10 ms.
    assert_eq!(f(&v["measured"]["tpot_ms"]["mean"]), 7.5);
    // The replay ran both requests (arrivals 0.2 s apart: each alone).
    assert_eq!(v["predicted"]["finished"], 2);
    assert_eq!(read(&dir.join("v/validate.csv")).lines().count(), 18);
    // In flight over 10.0 → 10.25 s: (20 + 30) ms before the first token, (20 + 20) ms after.
    assert!((f(&v["measured"]["in_flight_to_first_token"]) - 0.05 / 0.25).abs() < 1e-12);
    assert!((f(&v["measured"]["in_flight_after_first_token"]) - 0.04 / 0.25).abs() < 1e-12);
    // AIPerf: the same two requests as per-request JSONL records.
    let rec = |start: u64, isl: u32, osl: u32, ttft: f64, lat: f64| {
        format!(
            r#"{{"metadata": {{"request_start_ns": {start}, "benchmark_phase": "profiling"}}, "metrics": {{"input_sequence_length": {{"value": {isl}, "unit": "tokens"}}, "output_sequence_length": {{"value": {osl}, "unit": "tokens"}}, "time_to_first_token": {{"value": {ttft}, "unit": "ms"}}, "request_latency": {{"value": {lat}, "unit": "ms"}}}}, "error": null}}"#
        )
    };
    let jsonl = format!("{}\n{}\n", rec(10_000_000_000, 100, 5, 20.0, 40.0), rec(10_200_000_000, 80, 3, 30.0, 50.0));
    let a = measured("a.jsonl", &jsonl, "a");
    assert!(!a["notes"].to_string().contains("decoding at a time"), "{}", a["notes"]);
    assert_eq!(a["format"], "aiperf");
    for key in ["measured", "predicted"] {
        assert_eq!(a[key], v[key], "{key}: the same requests give the same numbers");
    }
}

/// Eight requests sent together and served one at a time (100 ms each, the first token 10 ms in):
/// 0.9 decoding at a time over the 0.8 s, where the tiny scenario runs all eight at once — the
/// report says the run held fewer at once, which no kernel time explains.
#[test]
fn a_run_that_held_fewer_requests_at_once_is_told_so() {
    let dir = out_dir("validate-in-flight");
    let scen = tiny_scenario(&dir, WORKLOAD);
    let mut csv = String::from("arrival_ms,prompt_tokens,output_tokens,ttft_ms,e2e_ms\n");
    for i in 0..8 {
        csv += &format!("0,100,20,{},{}\n", i * 100 + 10, (i + 1) * 100);
    }
    std::fs::write(dir.join("serial.csv"), csv).unwrap();
    let d = |x: &str| dir.join(x).display().to_string();
    let o =
        ok(&["validate", "--measured", &d("serial.csv"), "--scenario", &scen, "--out", &d("o"), "--format", "json"]);
    let v: Value = serde_json::from_str(&o).unwrap();
    // Σ TTFT = 8 × 10 + 100 × 28 = 2,880 ms; Σ decoding = 8 × 90 = 720 ms; over 0.8 s.
    assert!((f(&v["measured"]["in_flight_to_first_token"]) - 3.6).abs() < 1e-12);
    assert!((f(&v["measured"]["in_flight_after_first_token"]) - 0.9).abs() < 1e-12);
    let predicted = f(&v["predicted"]["in_flight_after_first_token"]);
    assert!(predicted > 1.5 * 0.9, "the simulation runs the eight together: {predicted}");
    let notes = v["notes"].to_string();
    assert!(notes.contains("the measured run kept 0.9 requests decoding at a time on average"), "{notes}");
    assert!(notes.contains("while 3.6 waited for their first token"), "{notes}");
    assert!(notes.contains("held fewer requests at once"), "{notes}");
}

#[test]
fn cuda_without_a_gpu_fails_cleanly() {
    let dir = out_dir("validate-cuda");
    let scen = tiny_scenario(&dir, WORKLOAD);
    let o = servesim(&[
        "validate",
        "--scenario",
        &scen,
        "--backend",
        "cuda",
        "--out",
        &dir.join("o").display().to_string(),
    ]);
    if o.status.success() {
        // A machine with a GPU ran it; nothing to check here.
        return;
    }
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("--backend cuda: no CUDA driver found") || e.contains("--backend cuda: no CUDA device"), "{e}");
    assert_eq!(e.trim().lines().filter(|l| l.starts_with("error:")).count(), 1, "{e}");
}

#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    let dir = out_dir("validate-bad");
    let scen = tiny_scenario(&dir, WORKLOAD);
    let closed = {
        let d = dir.join("closed");
        tiny_scenario(&d, "requests = 5\narrival = { kind = \"closed-loop\", clients = 2 }\nprompt_tokens = { kind = \"fixed\", value = 10 }\noutput_tokens = { kind = \"fixed\", value = 2 }")
    };
    let no_count = {
        let d = dir.join("nocount");
        tiny_scenario(&d, "duration_s = 5\narrival = { kind = \"poisson\", rate = 1 }\nprompt_tokens = { kind = \"fixed\", value = 10 }\noutput_tokens = { kind = \"fixed\", value = 2 }")
    };
    std::fs::write(dir.join("bad.csv"), "arrival_ms,prompt_tokens,output_tokens,ttft_ms,e2e_ms\n1,10,x,1,2\n").unwrap();
    let bad_csv = dir.join("bad.csv").display().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--scenario", &scen], "--backend: give cpu or cuda"),
        (vec!["--scenario", &scen, "--backend", "cpu", "--loads", "0"], "--loads: every load must be in (0, 2], got 0"),
        (vec!["--scenario", &scen, "--backend", "cpu", "--repeat", "0"], "--repeat: must be ≥ 1, got 0"),
        (vec!["--scenario", &scen, "--backend", "cpu", "--capacity", "0"], "--capacity: must be > 0"),
        (vec!["--scenario", &scen, "--iterations", "--measured", "x.csv"], "give one"),
        (vec!["--scenario", &scen, "--measured", &bad_csv, "--backend", "cpu"], "nothing is executed"),
        (vec!["--scenario", &scen, "--measured", &bad_csv], "bad.csv:2: output_tokens: \"x\" is not a token count"),
        (vec!["--scenario", &scen, "--measured", "missing.json"], "cannot read measured run missing.json"),
        (vec!["--scenario", &closed, "--backend", "cpu"], "workload.arrival: validate sets the arrival rate"),
        (vec!["--scenario", &no_count, "--backend", "cpu"], "workload.requests: validate needs a request count"),
        (vec!["--scenario", &scen, "--backend", "cpu", "--profile", "nope.json"], "nope.json"),
        (
            vec!["--scenario", &scen, "--backend", "cuda", "--op-timing", "in-pass"],
            "--op-timing in-pass: needs --backend cpu",
        ),
    ];
    for (args, want) in cases {
        let mut all = vec!["validate"];
        all.extend(args.iter());
        all.extend(["--out", "target/test-outputs/validate-bad/o"]);
        let o = servesim(&all);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{all:?}: {e}");
        assert!(e.contains(want), "{all:?}: expected {want:?} in {e}");
        assert_eq!(e.lines().filter(|l| l.starts_with("error:")).count(), 1, "{e}");
    }
}
