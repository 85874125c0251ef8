//! `servesim calibrate fit`: factors fitted back from runs servesim itself produced under known
//! perturbations (a hand-written calibration applied with `[cost] calibration`), from
//! per-request files and from a sweep of benchmark summaries; factors the runs cannot identify
//! reported as such; the calibration applied, refused on another GPU, and reported per plan
//! candidate; the file deterministic; a fit no better than the model not written.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{out_dir, servesim, stderr, stdout};

/// The perturbation the "measured" runs were made under (the issue's): prefill ×1.5, decode
/// ×1.1, collectives ×2.5, host +3 ms per iteration, frontend +20 ms.
const TRUTH: &str = "format = 1\ngpu = \"h100-sxm\"\nengine = \"vllm\"\ncost_source = \"database\"\n\
                     [factors]\nprefill = { value = 1.5 }\ndecode = { value = 1.1 }\ncollective = { value = 2.5 }\n\
                     host_base_us = { value = 3000 }\nfrontend_ms = { value = 20 }\n";

/// llama-3-8b on one H100 at `tp`, priced by the shipped kernel database, with `workload` and
/// `extra` cost keys.
fn deployment(tp: u32, seed: u64, workload: &str, extra: &str) -> String {
    format!(
        "name = \"d\"\nseed = {seed}\n[model]\npreset = \"llama-3-8b\"\n[gpu]\npreset = \"h100-sxm\"\n[cluster]\n\
         instances = 1\ntp = {tp}\n[scheduler]\nmax_num_seqs = 256\nmax_num_batched_tokens = 8192\n[cost]\n\
         database = {{ framework = \"vllm\" }}\n{extra}\n[workload]\n{workload}\n[slo]\nttft_ms = 2000\ntpot_ms = 100\n"
    )
}

fn chat(requests: u32, rate: f64) -> String {
    format!(
        "requests = {requests}\narrival = {{ kind = \"poisson\", rate = {rate} }}\n\
         prompt_tokens = {{ kind = \"lognormal\", median = 700, p99 = 6000, max = 7000 }}\n\
         output_tokens = {{ kind = \"lognormal\", median = 150, p99 = 900, max = 1024 }}"
    )
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// Simulates `scenario` (a file in `dir`) into `dir/<name>/`; returns that folder.
fn simulate(dir: &Path, scenario: &str, name: &str) -> PathBuf {
    let out = dir.join(name);
    let o = servesim(&["simulate", "--scenario", scenario, "--out", &out.display().to_string(), "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    out
}

fn fit(args: &[&str]) -> (std::process::Output, Option<toml::Table>, String) {
    let mut all = vec!["calibrate", "fit"];
    all.extend(args);
    let o = servesim(&all);
    let out = args.iter().position(|a| *a == "--out").map(|i| args[i + 1]).expect("--out");
    let cal = std::fs::read_to_string(out).ok().map(|t| t.parse::<toml::Table>().expect("the calibration parses"));
    (o, cal, out.to_string())
}

/// `validate --measured FILE --scenario S --format json`, which must succeed, as JSON.
fn validate_json(dir: &Path, measured: &str, scenario: &str) -> Value {
    let out = dir.join("v").display().to_string();
    let o = servesim(&["validate", "--measured", measured, "--scenario", scenario, "--out", &out, "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

fn factor<'a>(cal: &'a toml::Table, name: &str) -> &'a toml::Table {
    cal["factors"][name].as_table().unwrap_or_else(|| panic!("factor {name}"))
}

fn value(cal: &toml::Table, name: &str) -> f64 {
    let v = &factor(cal, name)["value"];
    v.as_float().or_else(|| v.as_integer().map(|i| i as f64)).unwrap()
}

fn status<'a>(cal: &'a toml::Table, name: &str) -> &'a str {
    factor(cal, name).get("status").and_then(|s| s.as_str()).unwrap_or("given")
}

/// Within 5% of the truth (for the additive ones, of the perturbation).
fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 0.05 * want.abs()
}

#[test]
fn perturbed_runs_are_fitted_back_from_per_request_files() {
    let dir = out_dir("calfit-requests");
    write(&dir, "truth.toml", TRUTH);
    let cal = "calibration = \"truth.toml\"";
    // Two TP degrees (collectives from TP 2 only) at a light and a heavy load (small and
    // large batches: decode time grows with the batch, the host's does not).
    let mut measured = Vec::new();
    for (tp, rate) in [(1, 3.0), (1, 20.0), (2, 3.0), (2, 20.0)] {
        let name = format!("m-{tp}-{rate}");
        let s =
            write(&dir, &format!("{name}.toml"), &deployment(tp, 100 + tp as u64 + rate as u64, &chat(300, rate), cal));
        let out = simulate(&dir, &s, &name);
        let plain = write(&dir, &format!("tp{tp}.toml"), &deployment(tp, 1, &chat(10, 1.0), ""));
        measured.push(format!("{}@{plain}", out.join("requests.csv").display()));
    }
    let base = dir.join("tp2.toml").display().to_string();
    let out = dir.join("cal.toml").display().to_string();
    let mut args = vec!["--scenario", &base, "--out", &out, "--format", "json"];
    for m in &measured {
        args.extend(["--measured", m]);
    }
    let (o, cal, _) = fit(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let cal = cal.expect("written");
    for (name, want) in
        [("prefill", 1.5), ("decode", 1.1), ("collective", 2.5), ("host_base_us", 3000.0), ("frontend_ms", 20.0)]
    {
        let got = value(&cal, name);
        assert!(close(got, want), "{name}: fitted {got}, perturbed by {want}\n{cal}");
        assert_ne!(status(&cal, name), "unidentified", "{name}\n{cal}");
        // The range holds the truth.
        let (lo, hi) = (factor(&cal, name)["low"].as_float().unwrap(), factor(&cal, name)["high"].as_float().unwrap());
        assert!(lo <= want && want <= hi, "{name}: {want} outside {lo}–{hi}");
    }
    // Not perturbed: fitted at about nothing, or said to be unidentified.
    let per_seq = value(&cal, "host_per_seq_us");
    assert!(status(&cal, "host_per_seq_us") == "unidentified" || per_seq.abs() <= 5.0, "{per_seq}");
    // What it was fitted on, and how well.
    let fit = cal["fit"].as_table().unwrap();
    assert_eq!(fit["runs"].as_array().unwrap().len(), 4);
    let run0 = fit["runs"][0].as_table().unwrap();
    assert_eq!(run0["sha256"].as_str().unwrap().len(), 64);
    assert_eq!((run0["tp"].as_integer(), run0["kind"].as_str()), (Some(1), Some("requests")));
    let (before, after) =
        (fit["error_uncalibrated_pct"].as_float().unwrap(), fit["error_calibrated_pct"].as_float().unwrap());
    assert!(before > 20.0 && after < 2.0, "median |error| {before}% → {after}%");
    // Four runs: each predicted by a fit on the other three.
    let held = fit["held_out"].as_array().unwrap();
    assert_eq!(held.len(), 4);
    assert!(held.iter().all(|h| h["how"].as_str() == Some("leave-one-out")));
    assert!(fit["held_out_calibrated_pct"].as_float().unwrap() < 3.0);
    // The JSON report on stdout says the same.
    let j: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(j["runs"].as_array().unwrap().len(), 4);

    // Applied: the calibrated deployment predicts a run it never saw (TP 2 at another rate)
    // far better than the uncalibrated one.
    let unseen = write(&dir, "u.toml", &deployment(2, 7, &chat(300, 10.0), &cal_line("truth.toml")));
    let u = simulate(&dir, &unseen, "unseen");
    let calibrated = write(&dir, "c.toml", &deployment(2, 1, &chat(10, 1.0), &cal_line("cal.toml")));
    let r = validate_json(&dir, &u.join("requests.csv").display().to_string(), &calibrated);
    let by = r["predicted_by"].as_str().unwrap();
    assert!(by.contains("kernel database") && by.contains("calibrated by cal.toml"), "{by}");
    let (cal_err, uncal_err) = (
        r["headline_median_abs_error_pct"].as_f64().unwrap(),
        r["uncalibrated_headline_median_abs_error_pct"].as_f64().unwrap(),
    );
    assert!(cal_err < 3.0 && uncal_err > 20.0, "calibrated {cal_err}%, uncalibrated {uncal_err}%");
}

fn cal_line(file: &str) -> String {
    format!("calibration = \"{file}\"")
}

/// A summary row of a simulated benchmark: rate, tp, lengths, requests and its statistics.
fn summary_row(out: &Path, tp: u32, rate: f64, isl: u32, osl: u32, requests: u32) -> String {
    let s: Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let d = |m: &str, k: &str| s[m][k].as_f64().unwrap();
    format!(
        "{tp},{rate},{isl},{osl},{requests},{},{},{},{},{},{},{},{},{},{}\n",
        d("ttft_ms", "mean"),
        d("ttft_ms", "p50"),
        d("ttft_ms", "p99"),
        d("tpot_ms", "mean"),
        d("tpot_ms", "p50"),
        d("tpot_ms", "p99"),
        d("e2e_ms", "mean"),
        d("e2e_ms", "p99"),
        d("throughput", "requests_per_s"),
        d("throughput", "output_tokens_per_s")
    )
}

const SWEEP_HEADER: &str = "tp,rate,isl,osl,requests,ttft_ms_mean,ttft_ms_p50,ttft_ms_p99,tpot_ms_mean,\
                            tpot_ms_p50,tpot_ms_p99,e2e_ms_mean,e2e_ms_p99,throughput_rps,output_tokens_per_s\n";

fn fixed(requests: u32, rate: f64, isl: u32, osl: u32) -> String {
    format!(
        "requests = {requests}\narrival = {{ kind = \"poisson\", rate = {rate} }}\n\
         prompt_tokens = {{ kind = \"fixed\", value = {isl} }}\noutput_tokens = {{ kind = \"fixed\", value = {osl} }}"
    )
}

#[test]
fn a_sweep_of_summaries_is_fitted_back_or_said_unidentified() {
    let dir = out_dir("calfit-sweep");
    write(&dir, "truth.toml", TRUTH);
    // `vllm bench serve` at three rates on each TP degree, 1024 + 128 tokens; the benchmark is
    // re-created with the fit scenario's seed, the one the runs were made with.
    let mut sweep = SWEEP_HEADER.to_string();
    for tp in [1, 2] {
        for rate in [2.0, 8.0, 16.0] {
            let s = write(&dir, "m.toml", &deployment(tp, 1, &fixed(300, rate, 1024, 128), &cal_line("truth.toml")));
            let out = simulate(&dir, &s, &format!("m-{tp}-{rate}"));
            sweep += &summary_row(&out, tp, rate, 1024, 128, 300);
        }
    }
    let sweep = write(&dir, "sweep.csv", &sweep);
    let base = write(&dir, "tp2.toml", &deployment(2, 1, &fixed(10, 1.0, 1024, 128), ""));
    let out = dir.join("cal.toml").display().to_string();
    let (o, cal, _) = fit(&["--scenario", &base, "--measured", &sweep, "--out", &out, "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let cal = cal.expect("written");
    let mut fitted = 0;
    for (name, want) in
        [("prefill", 1.5), ("decode", 1.1), ("collective", 2.5), ("host_base_us", 3000.0), ("frontend_ms", 20.0)]
    {
        let (got, st) = (value(&cal, name), status(&cal, name));
        match st {
            "fitted" => {
                assert!(close(got, want), "{name}: fitted {got}, perturbed by {want}\n{cal}");
                fitted += 1;
            }
            "confounded" | "unidentified" => {
                // Said so, with what the runs lack.
                assert!(factor(&cal, name)["note"].as_str().is_some_and(|n| n.contains("these runs")), "{name}");
                if st == "unidentified" {
                    assert_eq!(got, if name.ends_with("_us") || name.ends_with("_ms") { 0.0 } else { 1.0 });
                }
            }
            other => panic!("{name}: status {other}"),
        }
    }
    assert!(fitted >= 2, "the sweep identifies at least the prefill and the frontend\n{cal}");
    let fit = cal["fit"].as_table().unwrap();
    assert_eq!(fit["runs"].as_array().unwrap().len(), 6);
    assert!(fit["runs"][0]["kind"].as_str() == Some("summary"));
    assert!(fit["error_calibrated_pct"].as_float().unwrap() < 3.0, "{}", fit["error_calibrated_pct"]);
}

/// `plan --seeds 1` of the scenario `text` written into `dir`: its plan.json.
fn plan_json(dir: &std::path::Path, text: &str) -> Value {
    let p = write(dir, "plan.toml", text);
    let out = dir.join("plan").display().to_string();
    let o = servesim(&["plan", "--scenario", &p, "--out", &out, "--quiet", "--seeds", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(&std::fs::read_to_string(dir.join("plan/plan.json")).unwrap()).unwrap()
}

#[test]
fn one_tp_degree_leaves_the_collectives_unidentified() {
    let dir = out_dir("calfit-tp1");
    write(&dir, "truth.toml", TRUTH);
    let mut measured = Vec::new();
    for rate in [3.0, 20.0] {
        let s = write(&dir, "m.toml", &deployment(1, 11 + rate as u64, &chat(200, rate), &cal_line("truth.toml")));
        measured.push(simulate(&dir, &s, &format!("m-{rate}")).join("requests.csv").display().to_string());
    }
    let base = write(&dir, "tp1.toml", &deployment(1, 1, &chat(10, 1.0), ""));
    let out = dir.join("cal.toml").display().to_string();
    let (o, cal, _) =
        fit(&["--scenario", &base, "--measured", &measured[0], "--measured", &measured[1], "--out", &out]);
    assert!(o.status.success(), "{}", stderr(&o));
    let cal = cal.unwrap();
    assert_eq!((status(&cal, "collective"), value(&cal, "collective")), ("unidentified", 1.0));
    let note = factor(&cal, "collective")["note"].as_str().unwrap();
    assert!(note.contains("no collective"), "{note}");
    // The table says so too.
    assert!(stdout(&o).lines().any(|l| l.starts_with("collective") && l.contains("unidentified")), "{}", stdout(&o));
    // What it does identify is right, within its range.
    assert!(close(value(&cal, "prefill"), 1.5), "{cal}");
    let f = factor(&cal, "frontend_ms");
    assert!(f["low"].as_float().unwrap() <= 20.0 && 20.0 <= f["high"].as_float().unwrap(), "{cal}");
    // A plan priced by it is banded by its own held-out runs (here each predicted by a fit on
    // the other): the median of |calibrated / measured − 1| of their mean TPOT.
    let held = cal["fit"]["held_out"].as_array().unwrap();
    let mut errors: Vec<f64> = held
        .iter()
        .map(|r| {
            let v = r["stats"]["tpot_ms.mean"].as_array().unwrap();
            (v[2].as_float().unwrap() / v[0].as_float().unwrap() - 1.0).abs()
        })
        .collect();
    errors.sort_by(f64::total_cmp);
    assert_eq!(errors.len(), 2, "{cal}");
    let expected = ((errors[0] + errors[1]) / 2.0).min(0.9);
    let plan = deployment(1, 1, &chat(200, 4.0), &cal_line("cal.toml")) + "[[plan.candidates]]\nname = \"h100\"\n";
    let j = plan_json(&dir, &plan);
    let band = &j["candidates"][0]["band"];
    assert!((band["error"].as_f64().unwrap() - expected).abs() < 1e-9, "{band} against {expected}");
    assert_eq!(band["source"], "calibrated: its own 2 held-out run(s), median |error| of mean TPOT");
}

#[test]
fn calibrations_are_applied_only_where_they_were_fitted() {
    let dir = out_dir("calfit-apply");
    write(&dir, "truth.toml", TRUTH);
    // Another GPU: refused, naming both.
    let a100 = write(
        &dir,
        "a100.toml",
        &deployment(1, 1, &chat(20, 2.0), &cal_line("truth.toml")).replace("h100-sxm", "a100-80g"),
    );
    let o = servesim(&["simulate", "--scenario", &a100, "--out", &dir.join("o").display().to_string()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("cost.calibration: refused") && e.contains("h100-sxm") && e.contains("a100-80g"), "{e}");
    // Another cost source (the roofline) likewise.
    let roof = write(
        &dir,
        "roof.toml",
        &deployment(1, 1, &chat(20, 2.0), "calibration = \"truth.toml\"\noverhead = \"vllm\"")
            .replace("database = { framework = \"vllm\" }\n", ""),
    );
    let e = stderr(&servesim(&["simulate", "--scenario", &roof, "--out", &dir.join("o").display().to_string()]));
    assert!(e.contains("priced by database") && e.contains("priced by roofline"), "{e}");
    // A broken file names itself and the key.
    write(&dir, "bad.toml", &TRUTH.replace("{ value = 1.5 }", "{ value = 50 }"));
    let bad = write(&dir, "b.toml", &deployment(1, 1, &chat(20, 2.0), &cal_line("bad.toml")));
    let e = stderr(&servesim(&["simulate", "--scenario", &bad, "--out", &dir.join("o").display().to_string()]));
    assert!(e.contains("bad.toml") && e.contains("factors.prefill.value: must be in [0.2, 5]"), "{e}");
    // A plan over two GPUs: the H100 candidate calibrated, the A100 one said not to be.
    let plan = deployment(1, 1, &chat(200, 4.0), &cal_line("truth.toml"))
        + "[[plan.candidates]]\nname = \"h100\"\n[[plan.candidates]]\nname = \"a100\"\ngpu = { preset = \"a100-80g\" }\n";
    let j = plan_json(&dir, &plan);
    let c = j["candidates"].as_array().unwrap();
    assert_eq!(c[0]["calibration"], "calibrated by truth.toml");
    // Written by hand, it has no held-out runs: the scoreboard's figure bands it, and says so.
    let source = c[0]["band"]["source"].as_str().unwrap();
    assert!(source.starts_with("calibrated, its fit holding no run out"), "{source}");
    assert!(c[1]["calibration"].as_str().unwrap().starts_with("uncalibrated: truth.toml: it was fitted on h100-sxm"));
    // A plan whose every candidate is on another GPU refuses it.
    let other = plan.replace("name = \"h100\"\n", "name = \"l40s\"\ngpu = { preset = \"l40s\" }\n");
    let p = write(&dir, "plan2.toml", &other.replace("[gpu]\npreset = \"h100-sxm\"", "[gpu]\npreset = \"a100-80g\""));
    let o = servesim(&["plan", "--scenario", &p, "--out", &dir.join("plan2").display().to_string(), "--quiet"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cost.calibration: refused: it applies to no candidate"), "{}", stderr(&o));
}

#[test]
fn the_file_is_deterministic_and_a_useless_fit_is_not_written() {
    let dir = out_dir("calfit-determinism");
    write(&dir, "truth.toml", TRUTH);
    let s = write(&dir, "m.toml", &deployment(1, 5, &chat(120, 4.0), &cal_line("truth.toml")));
    let m = simulate(&dir, &s, "m").join("requests.csv").display().to_string();
    let base = write(&dir, "tp1.toml", &deployment(1, 1, &chat(10, 1.0), ""));
    let run = |name: &str, threads: &str| {
        let out = dir.join(name).display().to_string();
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_servesim"))
            .args(["calibrate", "fit", "--scenario", &base, "--measured", &m, "--out", &out, "--quiet"])
            .env("RAYON_NUM_THREADS", threads)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        std::fs::read(&out).unwrap()
    };
    assert_eq!(run("a.toml", "1"), run("b.toml", "2"), "the same inputs give the same file on 1 and 2 threads");
    // Runs the uncalibrated model already predicts exactly: nothing to correct, nothing written.
    let plain = write(&dir, "plain.toml", &deployment(1, 5, &chat(120, 4.0), ""));
    let exact = simulate(&dir, &plain, "exact").join("requests.csv").display().to_string();
    let out = dir.join("none.toml");
    let o = servesim(&[
        "calibrate",
        "fit",
        "--scenario",
        &base,
        "--measured",
        &exact,
        "--out",
        &out.display().to_string(),
        "-q",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("not written") && stderr(&o).contains("no better"), "{}", stderr(&o));
    assert!(!out.exists());
    // Bad input: a factor that does not exist, a file that is not a run.
    let o = servesim(&["calibrate", "fit", "--scenario", &base, "--measured", &m, "--out", "x.toml", "--fix", "gpu"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--fix gpu: not a factor (one of prefill, decode"), "{}", stderr(&o));
    let junk = write(&dir, "junk.csv", "rate,isl,osl,requests,ttft_ms_mean\n2,1024,128,x,40\n");
    let o = servesim(&["calibrate", "fit", "--scenario", &base, "--measured", &junk, "--out", "x.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("junk.csv:2: requests: \"x\" is not a number"), "{}", stderr(&o));
}

/// A run measured with 4 sequences at a time, fitted against a scenario that allows 256: the
/// fit says the run held fewer requests at once, which no factor should absorb; the same run
/// against its own limits gets no such note.
#[test]
fn a_run_whose_engine_held_fewer_requests_at_once_is_named_before_fitting() {
    let dir = out_dir("calfit-in-flight");
    let tight = deployment(1, 3, &chat(80, 12.0), "").replace("max_num_seqs = 256", "max_num_seqs = 4");
    let s = write(&dir, "tight.toml", &tight);
    let m = simulate(&dir, &s, "m").join("requests.csv").display().to_string();
    let note = |scenario: &str, out: &str| {
        let out = dir.join(out).display().to_string();
        let (o, _, _) = fit(&["--scenario", scenario, "--measured", &m, "--out", &out]);
        stdout(&o).lines().filter(|l| l.contains("decoding at a time")).map(str::to_string).collect::<Vec<_>>()
    };
    let wide = write(&dir, "wide.toml", &deployment(1, 1, &chat(10, 1.0), ""));
    let n = note(&wide, "wide-cal.toml");
    assert_eq!(n.len(), 1, "{n:?}");
    // At most 4 decoding at once in the run (3.9 on average, the drain included); far more in
    // the wide scenario.
    let after = |key: &str| -> f64 {
        n[0].split(key).nth(1).unwrap().split_whitespace().next().unwrap().trim_end_matches(',').parse().unwrap()
    };
    let (kept, simulated) = (after("the measured run kept "), after("the simulation "));
    assert!(n[0].contains("requests.csv: the measured run kept"), "{}", n[0]);
    assert!(kept > 3.0 && kept <= 4.0 && simulated > 1.5 * kept, "{}", n[0]);
    assert!(
        n[0].contains("the run held fewer requests at once")
            && n[0].ends_with("fix the scenario's limits before fitting on this run"),
        "{}",
        n[0]
    );
    // Fitted against the limits it ran with: nothing to say.
    let own = write(&dir, "own.toml", &tight.replace("seed = 3", "seed = 1"));
    assert_eq!(note(&own, "own-cal.toml"), Vec::<String>::new());
    // A benchmark summary of such a run: Little's law on its request throughput and mean TTFT
    // and E2E says the same.
    let tight = deployment(1, 3, &fixed(80, 12.0, 700, 150), "").replace("max_num_seqs = 256", "max_num_seqs = 4");
    let out = simulate(&dir, &write(&dir, "tight-fixed.toml", &tight), "f");
    let sweep = write(&dir, "sweep.csv", &format!("{SWEEP_HEADER}{}", summary_row(&out, 1, 12.0, 700, 150, 80)));
    // The fit then fails (its factors absurd: decode ×0.2, below the GPU's peaks), so the note
    // comes first, on stderr.
    let (o, cal, _) =
        fit(&["--scenario", &wide, "--measured", &sweep, "--out", &dir.join("s.toml").display().to_string()]);
    assert!(cal.is_none() && !o.status.success());
    let text = stderr(&o);
    let n: Vec<&str> = text.lines().filter(|l| l.contains("decoding at a time")).collect();
    assert_eq!(n.len(), 1, "{text}");
    assert!(n[0].contains("sweep.csv") && n[0].contains("the run held fewer requests at once"), "{}", n[0]);
}

#[test]
fn validate_compares_a_benchmark_summary_with_the_benchmark_recreated() {
    let dir = out_dir("calfit-validate-summary");
    let s = write(&dir, "m.toml", &deployment(1, 1, &fixed(200, 4.0, 512, 64), ""));
    let out = simulate(&dir, &s, "m");
    let sm: Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    // vLLM's result file without per-request data, as `vllm bench serve --save-result` writes it.
    let json = format!(
        r#"{{"request_rate": 4.0, "burstiness": 1.0, "max_concurrency": null, "completed": 200,
            "total_input_tokens": {}, "total_output_tokens": {}, "mean_ttft_ms": {}, "p99_ttft_ms": {},
            "mean_tpot_ms": {}, "mean_e2el_ms": {}, "output_throughput": {}, "request_throughput": {}}}"#,
        200 * 512,
        200 * 64,
        sm["ttft_ms"]["mean"],
        sm["ttft_ms"]["p99"],
        sm["tpot_ms"]["mean"],
        sm["e2e_ms"]["mean"],
        sm["throughput"]["output_tokens_per_s"],
        sm["throughput"]["requests_per_s"]
    );
    let f = write(&dir, "bench.json", &json);
    let r = validate_json(&dir, &f, &s);
    assert!(r["predicted_by"].as_str().unwrap().starts_with("the kernel database (vllm kernels of h100-sxm)"));
    let run = &r["runs"][0];
    assert_eq!(run["requests"], 200);
    let rows = run["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 8);
    // The benchmark re-created with the scenario's own seed is the run itself: no error, the
    // requests in flight (Little's law on the summary) included.
    for row in rows {
        assert!(row["error_pct"].as_f64().unwrap().abs() < 1e-6, "{row}");
    }
    let value = |m: &str| rows.iter().find(|r| r["metric"] == m).map(|r| r["measured"].as_f64().unwrap());
    let (x, ttft, e2e) = (
        sm["throughput"]["requests_per_s"].as_f64().unwrap(),
        sm["ttft_ms"]["mean"].as_f64().unwrap(),
        sm["e2e_ms"]["mean"].as_f64().unwrap(),
    );
    assert_eq!(value("in_flight_to_first_token"), Some(x * ttft / 1e3));
    assert_eq!(value("in_flight_after_first_token"), Some(x * (e2e - ttft) / 1e3));
    assert!(!run["notes"].to_string().contains("decoding at a time"), "{}", run["notes"]);
}
