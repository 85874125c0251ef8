//! The kernel database end to end: `calibrate import-aic`, `[cost] database` in scenarios (the
//! committed slice, and the shipped profiles with no database installed), loud fallbacks and
//! `cost.strict`, and the `validate --silicon` scoreboard on five real rows.

use std::process::{Command, Output};

use crate::common::*;

const SLICE: &str = "data/aiconfigurator";

/// servesim with no database reachable: no SERVESIM_AIC_DATA and no python3 on the PATH.
fn isolated(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_servesim"))
        .args(args)
        .current_dir(root())
        .env_remove("SERVESIM_AIC_DATA")
        .env("PATH", "")
        .output()
        .expect("servesim runs")
}

#[test]
fn import_aic_writes_a_profile_with_its_provenance() {
    let dir = out_dir("aic_import");
    // `calibrate import-aic` from the test slice for H100s, writing `out`.
    let import = |out: &std::path::Path, args: &[&str]| {
        let head = ["calibrate", "import-aic", "--system", "h100-sxm", "--database", SLICE];
        isolated(&[&head[..], args, &["--out", out.to_str().unwrap()]].concat())
    };
    let out = dir.join("p.json");
    let o = import(&out, &["--framework", "vllm", "--model", "llama-3-8b", "--tp", "1,2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("(15 op tables, TP [1, 2]) from h100_sxm vllm 0.24.0"), "{}", stdout(&o));
    let o = isolated(&["profile", "show", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let show = stdout(&o);
    assert!(show.contains("database    aiconfigurator") && show.contains("h100_sxm vllm 0.24.0"), "{show}");
    assert!(show.contains("h100_sxm/comm/vllm/0.24.0/custom_allreduce_perf.parquet (138 rows, sha256 "), "{show}");
    assert!(show.contains("n 28672, k 4096 not measured"), "{show}");

    // `--expert-parallel`: DeepSeek's experts at the slice's expert-parallel rows, and the
    // command that made the profile says so.
    let ep = dir.join("ep.json");
    let o = import(
        &ep,
        &[
            "--framework",
            "sglang",
            "--model",
            "deepseek-r1",
            "--tp",
            "8",
            "--weights",
            "fp8-block",
            "--expert-parallel",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let p: serde_json::Value = serde_json::from_str(&read(&ep)).unwrap();
    let moe = p["ops"].as_array().unwrap().iter().find(|t| t["name"] == "moe_experts").unwrap();
    assert!(moe["source"]["selection"].as_str().unwrap().contains("expert parallel 8;"), "{moe}");
    assert!(
        p["meta"]["source"].as_str().unwrap().contains("--moe-distribution power_law_1.2 --expert-parallel"),
        "{}",
        p["meta"]
    );

    // Bad input: one line naming the flag or what the database has.
    let bad = |args: &[&str], want: &str| {
        let mut a = vec!["calibrate", "import-aic", "--model", "llama-3-8b", "--out", "/tmp/never.json"];
        a.extend_from_slice(args);
        let o = isolated(&a);
        assert_eq!(o.status.code(), Some(2), "{a:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{a:?}: {}", stderr(&o));
    };
    bad(
        &["--system", "h100_sxm", "--framework", "vllm", "--database", SLICE, "--weights", "int4"],
        "--weights: expected one of bf16, fp8, fp8-block, fp4",
    );
    bad(
        &["--system", "b200_sxm", "--framework", "vllm", "--database", SLICE],
        "system b200_sxm is not in the database",
    );
    bad(&["--system", "h100_sxm", "--framework", "vllm", "--version", "0.1", "--database", SLICE], "(it has 0.24.0)");
    bad(
        &["--system", "h100_sxm", "--framework", "vllm"],
        "no AIConfigurator kernel database found: pip install aiconfigurator-core==0.12.0",
    );
    bad(
        &["--system", "h100_sxm", "--framework", "vllm", "--database", "docs"],
        "--database docs: no AIConfigurator kernel tables there",
    );
    // A GPU preset the database has not measured: its own line, not "no preset".
    bad(
        &["--system", "rtx-4090", "--framework", "vllm", "--database", SLICE],
        "--system rtx-4090: the kernel database has not measured this GPU (its systems: a100_sxm, h100_sxm,",
    );
    assert!(!std::path::Path::new("/tmp/never.json").exists());
    // A scenario on such a GPU that asks for the database is refused naming the key and the
    // GPU; on its own the roofline prices it from the preset's datasheet figures.
    let dir = out_dir("aic_scenario_gpu_without_db");
    let rtx = scenario_file(&dir, "rtx.toml", &db_scenario("").replace("\"h100-sxm\"", "\"rtx-4090\""));
    let o = isolated(&["simulate", "--scenario", &rtx, "--out", dir.join("r").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cost.database.system: the GPU rtx-4090 is not a preset with a kernel database"),
        "{}",
        stderr(&o)
    );
    let database = format!("database = {{ framework = \"vllm\", path = \"{}/{SLICE}\" }}", root().display());
    let roof = scenario_file(&dir, "roof.toml", &read(std::path::Path::new(&rtx)).replace(&database, ""));
    let o = isolated(&["simulate", "--scenario", &roof, "--out", dir.join("f").to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Every decode step reads each GPU's half of llama-3-8b's 8,030,261,248 bf16 weights at the
    // 4090's 1,008 GB/s: 8.03e9 × 2 B / 2 / 1.008e12 B/s = 7.97 ms at the least.
    let summary: serde_json::Value = serde_json::from_str(&read(&dir.join("f/summary.json"))).unwrap();
    let tpot = summary["tpot_ms"]["p50"].as_f64().unwrap();
    assert!(tpot > 8_030_261_248.0 * 2.0 / 2.0 / 1.008e12 * 1e3, "{tpot}");
    // A scenario names the database its own way, and the message says so: the key it has, or
    // what each command accepts when nothing is found (simulate and plan take no --database).
    let dir = out_dir("aic_scenario_missing");
    let text = db_scenario("").replace("llama-3-8b", "qwen3-32b");
    let wrong = scenario_file(&dir, "wrong.toml", &text.replace(&format!("{}/{SLICE}", root().display()), "docs"));
    let o = isolated(&["simulate", "--scenario", &wrong, "--out", dir.join("w").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("[cost] database.path") && stderr(&o).contains("no AIConfigurator kernel tables there"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("--database"), "{}", stderr(&o));
    let none =
        scenario_file(&dir, "none.toml", &text.replace(&format!(", path = \"{}/{SLICE}\"", root().display()), ""));
    let o = isolated(&["plan", "--scenario", &none, "--out", dir.join("n").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("no AIConfigurator kernel database found")
            && e.contains("path = \"DIR\" }` in a scenario (simulate, plan, compare, tune)")
            && e.contains("SERVESIM_AIC_DATA=DIR"),
        "{e}"
    );
}

fn db_scenario(extra_cost: &str) -> String {
    format!(
        "name = \"aic\"\nseed = 3\n[model]\npreset = \"llama-3-8b\"\n[gpu]\npreset = \"h100-sxm\"\n[cluster]\ntp = 2\n\
         [cost]\ndatabase = {{ framework = \"vllm\", path = \"{}/{SLICE}\" }}\n{extra_cost}\n\
         [workload]\nrequests = 200\narrival = {{ kind = \"poisson\", rate = 10 }}\n\
         prompt_tokens = {{ kind = \"uniform\", min = 100, max = 2000 }}\noutput_tokens = {{ kind = \"uniform\", min = 10, max = 200 }}\n",
        root().display()
    )
}

#[test]
fn a_scenario_priced_from_the_database_names_its_fallbacks() {
    let dir = out_dir("aic_scenario");
    let path = scenario_file(&dir, "s.toml", &db_scenario(""));
    let run = |out: &str| {
        let o = isolated(&["simulate", "--scenario", &path, "--out", dir.join(out).to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        o
    };
    let o = run("a");
    // One stderr line; the table says where times come from.
    let err = stderr(&o);
    let note: Vec<&str> = err.lines().filter(|l| l.starts_with("note: cost fallbacks:")).collect();
    assert_eq!(note.len(), 1, "{}", stderr(&o));
    assert!(note[0].contains("elementwise") && note[0].contains("priced by the roofline"), "{note:?}");
    assert!(stdout(&o).contains("measured kernels: h100_sxm vllm 0.24.0 (bf16 weights, bf16 KV)"), "{}", stdout(&o));
    let summary: serde_json::Value = serde_json::from_str(&read(&dir.join("a/summary.json"))).unwrap();
    let f = summary["cost"]["fallbacks"].as_array().unwrap();
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["op"], "elementwise");
    assert_eq!(f[0]["iterations"], summary["iterations"]);
    let share = f[0]["share"].as_f64().unwrap();
    assert!(share > 0.005 && share < 0.3, "{share}");
    // Deterministic: the same scenario again gives the same bytes.
    run("b");
    for file in ["summary.json", "requests.csv"] {
        assert_eq!(read(&dir.join("a").join(file)), read(&dir.join("b").join(file)), "{file}");
    }

    // Strict: the fallback is an error naming the key, before anything is written.
    let strict = scenario_file(&dir, "strict.toml", &db_scenario("strict = true"));
    let o = isolated(&["simulate", "--scenario", &strict, "--out", dir.join("c").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cost.strict: the roofline would price elementwise"), "{}", stderr(&o));
    assert!(!dir.join("c").exists());

    // A database and a profile at once, or a framework it does not know: the key and the value.
    let both = scenario_file(&dir, "both.toml", &db_scenario("profile = \"p.json\""));
    let o = isolated(&["simulate", "--scenario", &both]);
    assert!(stderr(&o).contains("cost.database: give either cost.profile or cost.database"), "{}", stderr(&o));
    let fw = scenario_file(&dir, "fw.toml", &db_scenario("").replace("\"vllm\"", "\"ollama\""));
    let o = isolated(&["simulate", "--scenario", &fw]);
    assert!(
        stderr(&o).contains("cost.database.framework: must be one of vllm, sglang, trtllm, got \"ollama\""),
        "{}",
        stderr(&o)
    );
}

#[test]
fn shipped_profiles_price_the_peak_plan_with_no_database() {
    let dir = out_dir("aic_peak");
    let o = isolated(&["plan", "--scenario", "scenarios/peak.toml", "--seeds", "1", "--out", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    for (cand, sys) in [
        ("h100-tp1", "h100_sxm vllm 0.24.0 (bf16"),
        ("h100-tp1-fp8", "h100_sxm vllm 0.24.0 (fp8 weights, fp8 KV)"),
        ("a100-tp1", "a100_sxm vllm 0.14.0"),
        ("l40s-tp1", "l40s vllm 0.24.0"),
        ("h200-tp1", "h200_sxm"),
        ("b200-tp1", "b200_sxm"),
    ] {
        let line =
            err.lines().find(|l| l.starts_with(&format!("cost ({cand}):"))).unwrap_or_else(|| panic!("{cand}: {err}"));
        assert!(line.contains(&format!("measured kernels: {sys}")), "{line}");
    }
    // A GPU without a shipped profile and no database: the key, and how to get one.
    let text = read(&root().join("scenarios/peak.toml")).replace("gpu = \"b200\"", "gpu = \"b300\"");
    let path = scenario_file(&dir, "b300.toml", &text);
    let o = isolated(&["plan", "--scenario", &path]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("cost.database: no shipped profile for llama-3-8b on b300_sxm")
            && e.contains("pip install aiconfigurator-core"),
        "{e}"
    );
}

#[test]
fn the_scoreboard_compares_each_row_and_counts_what_it_cannot_run() {
    let dir = out_dir("aic_silicon");
    let slice_scoreboard = |out: &std::path::Path, extra: &[&str]| {
        let csv = "data/aiconfigurator/silicon_sample_slice.csv";
        isolated(
            &[&["validate", "--silicon", csv, "--database", SLICE, "--out", out.to_str().unwrap()], extra].concat(),
        )
    };
    let o = slice_scoreboard(&dir, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    // gpt-oss-120b (windowed layers, MXFP4 experts) runs on the database; DeepSeek-R1 (MLA) on
    // B200, which the slice does not hold, on the roofline, saying why; the disaggregated row is
    // not run.
    assert!(table.contains("rows 6 in all: 5 run; not run:"), "{table}");
    assert!(table.contains("1  mode disagg"), "{table}");
    assert!(table.contains("Kernels the database lacks (roofline), all engines, all    half: 1 rows"), "{table}");
    assert!(table.contains("Windowed models (database), all engines, all    half: 1 rows"), "{table}");
    let csv = read(&dir.join("silicon.csv"));
    let mut reader = ::csv::Reader::from_reader(csv.as_bytes());
    let head: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    let col = |row: &[&str], name: &str| -> f64 {
        row[head.iter().position(|h| *h == name).unwrap()].parse().unwrap_or_else(|_| panic!("{name} in {row:?}"))
    };
    let records: Vec<::csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    let mut run = 0;
    let mut errs = vec![];
    for record in &records {
        let row: Vec<&str> = record.iter().collect();
        let l = &row.join(",");
        assert_eq!(row.len(), head.len(), "{l}");
        if l.contains("not expressed") {
            continue;
        }
        run += 1;
        // The error is (predicted − measured) / measured, of the row's own measured numbers.
        let (m, p, e) = (col(&row, "measured_ttft_ms"), col(&row, "predicted_ttft_ms"), col(&row, "ttft_error_pct"));
        assert!(((p - m) / m * 100.0 - e).abs() < 0.01, "{l}");
        let (mt, p, e) = (col(&row, "measured_tpot_ms"), col(&row, "predicted_tpot_ms"), col(&row, "tpot_error_pct"));
        assert!(((p - mt) / mt * 100.0 - e).abs() < 0.01, "{l}");
        // Concurrency 4–56 at contexts up to 9,216 lie within the slice's grids (the roofline's
        // DeepSeek row has no grid): nothing was read beyond them.
        assert_eq!(row[head.iter().position(|h| *h == "extrapolated_pct").unwrap()], "0.0", "{l}");
        // The KV pool in whole 16-token blocks; a run whose clients' every token fits it at
        // once is never preempted.
        let (kv, preempted) = (col(&row, "kv_tokens"), col(&row, "preemptions"));
        assert!(kv > 0.0 && kv % 16.0 == 0.0, "{l}");
        let demand = col(&row, "concurrency") * (col(&row, "isl") + col(&row, "osl"));
        assert!(demand > kv || preempted == 0.0, "{l}");
        if l.contains("deepseek-r1") {
            assert!(
                l.contains("roofline: not in the database (system b200_sxm is not in the database"),
                "the MLA row says why the roofline prices it: {l}"
            );
            assert!(
                l.contains("MoE TP 1 × EP 4 priced as EP") || !l.contains("read from the database's experts"),
                "{l}"
            );
            continue;
        }
        // The KV cache assumed (`--kv-cache auto`): FP8 for vLLM's FP8 rows, read from the
        // database's FP8-KV attention (the slice has it at 8/1 heads); BF16 for gpt-oss's MXFP4.
        let kv = row[head.iter().position(|h| *h == "kv_cache").unwrap()];
        assert!(!l.contains("KV cache bf16:"), "{l}");
        if l.contains("gpt-oss-120b") {
            // The row's image and day are InferenceX's gptoss-fp4-h100-vllm recipe's.
            assert!(l.contains(",recipe,") && l.contains("gptoss_fp4_h100.sh at cec542a9a"), "{l}");
            assert_eq!(kv, "bf16", "{l}");
            assert!(!l.contains("roofline") && l.contains("mxfp4"), "{l}");
            assert_eq!(m, 59.322, "the CSV's measured TTFT");
            // TPOT from the database's own gpt-oss kernels: within 25% of the measured run.
            assert!(e.abs() < 25.0, "{l}");
            continue;
        }
        assert_eq!(kv, "fp8", "{l}");
        assert!(m > 70.0 && m < 301.0, "measured TTFT {m} is the CSV's");
        errs.push(e.abs());
    }
    assert_eq!(run, 5);
    // TPOT of a 70B on 8 H100s from measured kernels: within 25% of the measured runs.
    assert!(errs.iter().all(|e| *e < 25.0), "{errs:?}");
    let json: serde_json::Value = serde_json::from_str(&read(&dir.join("silicon.json"))).unwrap();
    assert_eq!(json["run"], 5);
    assert_eq!(json["windowed_models"][2]["rows"], 1);
    assert_eq!(json["vllm_sglang"][2]["rows"], 3);
    assert_eq!(json["kv_cache"], "auto");

    // Every row FP8: gpt-oss's attention was measured only with a BF16 cache, so its row runs
    // BF16 and says why; the Llama rows are as before.
    let fp8_dir = out_dir("aic_silicon_fp8");
    let o = slice_scoreboard(&fp8_dir, &["--kv-cache", "fp8"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let fp8 = read(&fp8_dir.join("silicon.csv"));
    let oss = fp8.lines().find(|l| l.contains("gpt-oss-120b")).unwrap();
    assert!(
        oss.contains(",mxfp4,bf16,")
            && oss.contains("KV cache bf16: the database has no FP8-KV attention for this engine and GPU"),
        "{oss}"
    );
    assert_eq!(predicted_ttfts(&fp8_dir), predicted_ttfts(&dir), "the Llama rows ran FP8 in both; gpt-oss BF16");

    // `--roofline`: every row priced by the roofline (its own error, the plan's band for it),
    // each saying so, none read from the database.
    let roof_dir = out_dir("aic_silicon_roofline");
    let o = slice_scoreboard(&roof_dir, &["--roofline"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let roof = read(&roof_dir.join("silicon.csv"));
    let runs: Vec<&str> = roof.lines().skip(1).filter(|l| !l.contains("not expressed")).collect();
    assert_eq!(runs.len(), 5);
    assert!(
        runs.iter().all(|l| l.contains(",\"roofline: --roofline") || l.contains(",roofline: --roofline")),
        "{roof}"
    );
    let json: serde_json::Value = serde_json::from_str(&read(&roof_dir.join("silicon.json"))).unwrap();
    assert_eq!((json["roofline"].as_bool(), json["run"].as_u64()), (Some(true), Some(5)));
    let (by_db, by_roof) = (predicted_ttfts(&dir), predicted_ttfts(&roof_dir));
    assert!(by_db.iter().any(|(id, t)| by_roof[id] != *t), "the database rows priced otherwise");

    let o =
        isolated(&["validate", "--silicon", "data/aiconfigurator/silicon_sample_slice.csv", "--filter", "nosuch=1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--filter nosuch=1: no column nosuch"), "{}", stderr(&o));
}

/// `--scenarios` writes the scenario each row ran; `simulate` runs it again to the same mean
/// TTFT and TPOT as silicon.csv's (the committed slice's gpt-oss-120b vLLM row, line 7, and
/// the Llama-3.1-70B one, line 2); a row not run has none.
#[test]
fn a_scoreboard_rows_scenario_runs_again_to_its_prediction() {
    let dir = out_dir("aic_silicon_scenarios");
    let csv = "data/aiconfigurator/silicon_sample_slice.csv";
    let o = isolated(&[
        "validate",
        "--silicon",
        csv,
        "--database",
        SLICE,
        "--out",
        dir.to_str().unwrap(),
        "--scenarios",
        "-q",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = read(&dir.join("silicon.csv"));
    for line in ["2", "7"] {
        let row = table.lines().find(|l| l.starts_with(&format!("{line},"))).unwrap();
        let cols: Vec<&str> = row.split(',').collect();
        let (ttft, tpot): (f64, f64) = (cols[14].parse().unwrap(), cols[17].parse().unwrap());
        let scenario = dir.join("scenarios").join(format!("{line}.toml"));
        assert!(read(&scenario).starts_with(&format!("# validate --silicon, line {line} of the file: {}", cols[1])));
        let run = dir.join(format!("run{line}"));
        let o = isolated(&["simulate", "--scenario", scenario.to_str().unwrap(), "--out", run.to_str().unwrap(), "-q"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let summary: serde_json::Value = serde_json::from_str(&read(&run.join("summary.json"))).unwrap();
        let again = (summary["ttft_ms"]["mean"].as_f64().unwrap(), summary["tpot_ms"]["mean"].as_f64().unwrap());
        assert!((again.0 - ttft).abs() < 5e-4 && (again.1 - tpot).abs() < 5e-5, "{again:?} against {ttft}, {tpot}");
    }
    // The disaggregated row (line 6) was not run: no scenario.
    assert!(!dir.join("scenarios").join("6.toml").exists());
}

/// The predicted TTFT of each run row of a scoreboard, by row id.
fn predicted_ttfts(dir: &std::path::Path) -> std::collections::BTreeMap<String, f64> {
    let csv = read(&dir.join("silicon.csv"));
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = |name: &str| head.iter().position(|h| *h == name).unwrap();
    lines
        .filter(|l| !l.contains("not expressed"))
        .map(|l| {
            let row: Vec<&str> = l.split(',').collect();
            (row[at("id")].to_string(), row[at("predicted_ttft_ms")].parse().unwrap())
        })
        .collect()
}

#[test]
fn a_prompt_pool_makes_repeated_prompts_prefix_cache_hits() {
    // AIPerf draws each request's prompt from a pool (100 by default). With a pool of one, every
    // request after the first wave repeats a cached prompt and prefills only its last block:
    // the mean TTFT must fall well below the all-distinct run's, row by row.
    let scoreboard = |name: &str, extra: &[&str]| {
        let dir = out_dir(name);
        let mut args = vec![
            "validate",
            "--silicon",
            "data/aiconfigurator/silicon_sample_slice.csv",
            "--database",
            SLICE,
            "--rounds",
            "4",
            "--out",
            dir.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = isolated(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        dir
    };
    let distinct = predicted_ttfts(&scoreboard("aic_pool_none", &[]));
    let pooled_dir = scoreboard("aic_pool_one", &["--prompt-pool", "1"]);
    let pooled = predicted_ttfts(&pooled_dir);
    assert_eq!(distinct.len(), 5);
    for (id, t) in &distinct {
        // Rounds 2–4 hit: at most about a quarter of the prefill work remains, plus decode steps.
        assert!(pooled[id] < 0.6 * t, "{id}: pooled {} ms vs distinct {t} ms", pooled[id]);
    }
    let json: serde_json::Value = serde_json::from_str(&read(&pooled_dir.join("silicon.json"))).unwrap();
    assert_eq!((json["prompt_pool"].as_u64(), json["rounds"].as_u64()), (Some(1), Some(4)));

    let o = isolated(&["validate", "--silicon", "data/aiconfigurator/silicon_sample_slice.csv", "--prompt-pool", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--prompt-pool: must be ≥ 1"), "{}", stderr(&o));
}

#[test]
fn a_profile_op_servesim_does_not_read_is_an_error() {
    let dir = out_dir("aic_unknown_op");
    let text = read(&root().join("calibrate/profiles/aic/h100_sxm-vllm-llama-3-8b-bf16.json")).replacen(
        "\"name\": \"attn_post_proj\"",
        "\"name\": \"attn_post_projection\"",
        1,
    );
    let path = dir.join("bad.json");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(&path, text).unwrap();
    let o = isolated(&["profile", "show", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("op attn_post_projection is not an op servesim reads"), "{}", stderr(&o));
}

/// A profile imported from one engine's kernels under a scenario whose `engine` is another is an
/// error naming both; under its own engine it runs.
#[test]
fn a_profile_of_another_engines_kernels_is_refused_naming_both() {
    let dir = out_dir("aic_profile_engine");
    let profile = root().join("calibrate/profiles/aic/h100_sxm-vllm-llama-3-8b-bf16.json");
    let text = |engine: &str| {
        format!(
            "name = \"e\"\nengine = \"{engine}\"\n[model]\npreset = \"llama-3-8b\"\n[gpu]\npreset = \"h100-sxm\"\n\
             [cost]\nprofile = \"{}\"\n[workload]\nrequests = 20\narrival = {{ kind = \"poisson\", rate = 5 }}\n\
             prompt_tokens = {{ kind = \"fixed\", value = 100 }}\noutput_tokens = {{ kind = \"fixed\", value = 10 }}\n",
            profile.display()
        )
    };
    let sglang = scenario_file(&dir, "sglang.toml", &text("sglang"));
    let o = isolated(&["simulate", "--scenario", &sglang, "--out", dir.join("s").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("cost.profile: ")
            && e.contains(
                "its kernels are vllm's (aiconfigurator database: h100_sxm vllm 0.24.0), and the scenario's engine is sglang"
            )
            && e.contains("--framework sglang"),
        "{e}"
    );
    assert!(!dir.join("s").exists(), "nothing written");
    let vllm = scenario_file(&dir, "vllm.toml", &text("vllm"));
    let o = isolated(&["simulate", "--scenario", &vllm, "--out", dir.join("v").to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
}
