//! `servesim compare`: variants on the identical request stream, against the scenario as
//! written, and errors that name the key.

use crate::common::*;

const SRC: &str = "name = \"cmp\"\nseed = 5\n[model]\npreset = \"llama-3-8b\"\n[gpu]\npreset = \"h100-sxm\"\n\
    [cluster]\ninstances = 2\n[scheduler]\nmax_num_seqs = 64\n\
    [workload]\nduration_s = 60\narrival = { kind = \"poisson\", rate = 20 }\n\
    prompt_tokens = { kind = \"lognormal\", median = 700, p99 = 6000, max = 7000 }\n\
    output_tokens = { kind = \"lognormal\", median = 150, p99 = 900, max = 1024 }\n\
    [slo]\nttft_ms = 2000\ntpot_ms = 100\n";

fn setup(name: &str) -> (std::path::PathBuf, String) {
    let dir = out_dir(name);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cmp.toml");
    std::fs::write(&path, pin_overhead(SRC)).unwrap();
    (dir.clone(), path.to_str().unwrap().to_string())
}

fn rows(csv: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::ReaderBuilder::new().from_reader(csv.as_bytes());
    let head = r.headers().unwrap().iter().map(String::from).collect();
    (head, r.records().map(|x| x.unwrap().iter().map(String::from).collect()).collect())
}

#[test]
fn variants_match_independent_runs_and_show_their_change() {
    let (dir, path) = setup("compare_basic");
    let o = servesim(&[
        "compare",
        "--scenario",
        &path,
        "--vary",
        "scheduler.max_num_seqs=16,256",
        "--vary",
        "cluster.instances=1,2",
        "--quiet",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (head, rows) = rows(&read(&dir.join("compare.csv")));
    let col = |name: &str| head.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
    assert_eq!(rows.len(), 5, "baseline + 2 × 2");
    assert_eq!(rows[0][0], "baseline");
    assert_eq!(rows[1][0], "scheduler.max_num_seqs=16 cluster.instances=1");
    assert_eq!(rows[4][0], "scheduler.max_num_seqs=256 cluster.instances=2");
    assert_eq!(
        (rows[2][col("scheduler.max_num_seqs")].as_str(), rows[2][col("cluster.instances")].as_str()),
        ("16", "2")
    );

    // Each row is what `simulate` gives for the scenario edited by hand.
    let expect = |src: &str| run(src).summary;
    let base = expect(SRC);
    let v4 = expect(&SRC.replace("max_num_seqs = 64", "max_num_seqs = 256"));
    let v1 = expect(&SRC.replace("max_num_seqs = 64", "max_num_seqs = 16").replace("instances = 2", "instances = 1"));
    let f = |row: &Vec<String>, c: &str| row[col(c)].parse::<f64>().unwrap();
    for (row, s) in [(&rows[0], &base), (&rows[4], &v4), (&rows[1], &v1)] {
        assert_eq!(row[col("ttft_ms_p99")], format!("{:.3}", s.ttft_ms.p99));
        assert_eq!(row[col("tpot_ms_p99")], format!("{:.3}", s.tpot_ms.p99));
        assert_eq!(row[col("goodput_rps")], format!("{:.3}", s.slo.goodput_rps));
        // The identical request stream: every variant serves the same requests.
        assert_eq!(f(row, "finished") + f(row, "rejected"), base.requests.arrived as f64);
    }
    // One instance with 16 sequences is far slower than the baseline: the change is exact.
    let change = f(&rows[1], "ttft_ms_p99_change_pct");
    let want = (v1.ttft_ms.p99 - base.ttft_ms.p99) / base.ttft_ms.p99 * 100.0;
    assert!((change - want).abs() < 1e-3 && want > 100.0, "{change} vs {want}");
    assert_eq!(rows[0][col("ttft_ms_p99_change_pct")], "0.000");
}

#[test]
fn bad_keys_and_values_name_the_key() {
    let (dir, path) = setup("compare_errors");
    let out = dir.to_str().unwrap();
    for (vary, expect) in [
        (
            "scheduler.max_num_seq=1,2",
            "--vary scheduler.max_num_seq=1: scheduler.max_num_seq: unknown field `max_num_seq`",
        ),
        ("scheduler.max_num_seqs=0", "--vary scheduler.max_num_seqs=0: scheduler.max_num_seqs: must be ≥ 1, got 0"),
        (
            "workload.arrival.rate=fast",
            "--vary workload.arrival.rate=fast: workload.arrival.rate: invalid type: string \"fast\", expected f64",
        ),
        ("seed.x=1", "--vary seed.x=1: seed: is a integer, not a table"),
        ("gpu.preset=h900", "--vary gpu.preset=h900: gpu.preset: unknown preset \"h900\""),
        ("novalue", "--vary novalue: expected KEY=V1,V2,..."),
    ] {
        let o = servesim(&["compare", "--scenario", &path, "--vary", vary, "--out", out]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{vary}: {e}");
        assert!(e.contains(expect), "{vary}: expected «{expect}» in «{e}»");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}

#[test]
fn compare_is_thread_count_independent_and_shards_merge() {
    let (dir, path) = setup("compare_shards");
    let args = |extra: &[&str], out: &str| {
        let mut a = vec![
            "compare",
            "--scenario",
            &path,
            "--vary",
            "cluster.router={kind=\"least-outstanding\"},{kind=\"power-of-two\"}",
            "--vary",
            "workload.arrival.rate=15,25",
            "--quiet",
            "--out",
        ];
        a.push(out);
        a.extend_from_slice(extra);
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let run_with = |threads: &str, a: Vec<String>| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_servesim"))
            .args(&a)
            .env("RAYON_NUM_THREADS", threads)
            .current_dir(root())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8(o.stdout).unwrap()
    };
    let one = dir.join("t1");
    let two = dir.join("t2");
    let t1 = run_with("1", args(&[], one.to_str().unwrap()));
    let t2 = run_with("2", args(&[], two.to_str().unwrap()));
    assert_eq!(t1.replace(one.to_str().unwrap(), ""), t2.replace(two.to_str().unwrap(), ""));
    assert_eq!(read(&one.join("compare.csv")), read(&two.join("compare.csv")));
    let sh = dir.join("shards");
    for s in ["1/3", "2/3", "3/3"] {
        run_with("2", args(&["--shard", s], sh.to_str().unwrap()));
    }
    let merged = dir.join("merged");
    let o = servesim(&["merge", sh.to_str().unwrap(), "--out", merged.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read(&merged.join("compare.csv")), read(&one.join("compare.csv")));
    assert_eq!(stdout(&o).replace(merged.to_str().unwrap(), ""), t1.replace(one.to_str().unwrap(), ""));
}

#[test]
fn a_varied_engine_brings_its_rules_to_each_variant() {
    // `engine = "vllm"` fills in vLLM's rules (vllm-v1 batching, prefix caching, its memory
    // rule); a variant built from the same document gets them too, so the variant that names
    // the same engine is the baseline, number for number, and SGLang's rules differ.
    let out = out_dir("compare_engine");
    std::fs::create_dir_all(&out).unwrap();
    let src = format!(
        "engine = \"vllm\"\n{}",
        read(&root().join("scenarios/chat.toml")).replace("duration_s = 300", "duration_s = 40")
    );
    let path = out.join("engine.toml");
    std::fs::write(&path, src).unwrap();
    let report = out.join("compare.html");
    let o = servesim(&[
        "compare",
        "--scenario",
        path.to_str().unwrap(),
        "--vary",
        "engine=vllm,sglang",
        "--format",
        "json",
        "--out",
        out.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[1]["metrics"], rows[0]["metrics"], "engine=vllm is the baseline");
    assert_ne!(rows[2]["metrics"]["tpot_ms_p99"], rows[0]["metrics"]["tpot_ms_p99"], "SGLang's rules differ");
    // The kernel database follows the varied engine (the scenario's `framework = "vllm"` is
    // the baseline's), and stderr says what priced the variant priced otherwise.
    let e = stderr(&o);
    let cost = |row: &str| e.lines().find(|l| l.starts_with(&format!("cost ({row}): "))).map(str::to_string);
    assert!(cost("baseline").is_some_and(|l| l.contains("measured kernels: h100_sxm vllm")), "{e}");
    assert!(cost("engine=sglang").is_some_and(|l| l.contains("measured kernels: h100_sxm sglang")), "{e}");
    assert_eq!(cost("engine=vllm"), None, "priced as the baseline: {e}");
    let priced = |i: usize| rows[i]["priced_by"][0].as_str().unwrap().to_string();
    assert!(priced(2).contains("measured kernels: h100_sxm sglang"), "{}", priced(2));
    assert_eq!(priced(1), priced(0));
    // compare.csv's last column and the HTML report say the same.
    let csv = read(&out.join("compare.csv"));
    // (the cell holds commas, so it is quoted: its closing part is the line's end)
    let last = |row: usize| csv.lines().nth(row + 1).unwrap().rsplit(",\"").next().unwrap().to_string();
    assert!(csv.lines().next().unwrap().ends_with(",priced_by"), "{csv}");
    assert!(last(2).starts_with("h100-sxm-tp1: measured kernels: h100_sxm sglang"), "{csv}");
    assert!(last(0).starts_with("h100-sxm-tp1: measured kernels: h100_sxm vllm"), "{csv}");
    let html = read(&report);
    assert!(html.contains("Priced by (baseline): h100-sxm-tp1: measured kernels: h100_sxm vllm"), "{html}");
    assert!(html.contains("<li>engine=sglang: h100-sxm-tp1: measured kernels: h100_sxm sglang"), "{html}");
    assert!(!html.contains("<li>engine=vllm:"), "priced as the baseline");
    // Another engine's database in a scenario is refused, naming both; left out, the framework
    // is the engine's.
    let sglang = read(&path).replace("engine = \"vllm\"", "engine = \"sglang\"");
    let refused = out.join("refused.toml");
    std::fs::write(&refused, &sglang).unwrap();
    let o = servesim(&["simulate", "--scenario", refused.to_str().unwrap(), "--out", out.join("r").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("cost.database.framework: \"vllm\"") && e.contains("whose engine is sglang"), "{e}");
    // Said before the database is read: under TensorRT-LLM, whose kernels for this GPU and
    // model do not ship, the mismatch is the error, not the missing database.
    std::fs::write(&refused, sglang.replace("engine = \"sglang\"", "engine = \"trtllm\"")).unwrap();
    let o = servesim(&["simulate", "--scenario", refused.to_str().unwrap(), "--out", out.join("r").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("whose engine is trtllm; leave framework out"), "{}", stderr(&o));
    let follows = out.join("follows.toml");
    std::fs::write(&follows, sglang.replace("database = { framework = \"vllm\" }", "database = {}")).unwrap();
    let o = servesim(&["simulate", "--scenario", follows.to_str().unwrap(), "--out", out.join("f").to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("measured kernels: h100_sxm sglang"), "{}", stdout(&o));
}

/// `--seeds 3` runs every row on seeds 5, 6 and 7: its range is that of `simulate` over them, and
/// a change is marked as within the spread exactly when its seed-by-seed changes (each variant
/// against the baseline on the same stream) include 0.
#[test]
fn seeds_give_each_row_its_range_and_mark_changes_within_it() {
    let (dir, path) = setup("compare_seeds");
    let random_router = |seeds: &str, out: &std::path::Path| {
        let (path, out) = (path.as_str(), out.to_str().unwrap());
        servesim(&[
            "compare",
            "--scenario",
            path,
            "--vary",
            "cluster.router={kind=\"random\"}",
            "--seeds",
            seeds,
            "--quiet",
            "--out",
            out,
        ])
    };
    let o = random_router("3", &dir);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    let (head, rows) = rows(&read(&dir.join("compare.csv")));
    let col = |name: &str| head.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
    // One seed (runs that draw, nothing else to run): the first seed's figures of the three.
    let one = dir.join("one");
    let o = random_router("1", &one);
    assert!(o.status.success(), "{}", stderr(&o));
    let (_, single) = self::rows(&read(&one.join("compare.csv")));
    for (a, b) in single.iter().zip(&rows) {
        assert_eq!(a[col("ttft_ms_p99")], b[col("ttft_ms_p99")]);
        assert_eq!(a[col("goodput_rps")], b[col("goodput_rps")]);
    }
    let runs = |router: &str| -> Vec<_> {
        (5..=7)
            .map(|seed| {
                let src = SRC.replace("seed = 5", &format!("seed = {seed}"));
                let src =
                    src.replace("instances = 2\n", &format!("instances = 2\nrouter = {{ kind = \"{router}\" }}\n"));
                run(&src).summary
            })
            .collect()
    };
    let (base, random) = (runs("round-robin"), runs("random"));
    type Metric = fn(&servesim_sim::metrics::Summary) -> f64;
    let metrics: [(&str, Metric); 3] =
        [("ttft_ms_p99", |s| s.ttft_ms.p99), ("tpot_ms_p99", |s| s.tpot_ms.p99), ("e2e_ms_p99", |s| s.e2e_ms.p99)];
    let mut marked = 0;
    for (name, f) in metrics {
        for (row, runs) in [(&rows[0], &base), (&rows[1], &random)] {
            let vals: Vec<f64> = runs.iter().map(f).collect();
            let (lo, hi) =
                (vals.iter().cloned().fold(f64::INFINITY, f64::min), vals.iter().cloned().fold(0.0, f64::max));
            assert_eq!(row[col(&format!("{name}_min"))], format!("{lo:.6}"), "{name}");
            assert_eq!(row[col(&format!("{name}_max"))], format!("{hi:.6}"), "{name}");
            // The figures shown are the first seed's, as `simulate` gives them.
            assert_eq!(row[col(name)], format!("{:.3}", vals[0]));
        }
        let changes: Vec<f64> = base.iter().zip(&random).map(|(b, r)| (f(r) - f(b)) / f(b) * 100.0).collect();
        let within = changes.iter().any(|c| *c <= 0.0) && changes.iter().any(|c| *c >= 0.0);
        assert_eq!(rows[1][col(&format!("{name}_within_spread"))], within.to_string(), "{name}: {changes:?}");
        assert_eq!(rows[0][col(&format!("{name}_within_spread"))], "false");
        marked += within as usize;
    }
    // Seed 5 to 7 give this comparison both kinds (the test would not tell them apart otherwise).
    assert!(marked > 0 && marked < 3, "{marked}");
    assert!(table.contains("their range over seeds 5–7 below"), "{table}");
    assert!(table.contains("~)"), "{table}");

    // Nothing drawn at random (evenly spaced arrivals of fixed sizes, round-robin): each row's
    // first run draws no random number, so it stands for every seed: 2 runs, not 2 × 3, and
    // the table says why the seeds agree.
    let fixed = SRC
        .replace("kind = \"poisson\", rate = 20", "kind = \"constant\", rate = 5")
        .replace("kind = \"lognormal\", median = 700, p99 = 6000, max = 7000", "kind = \"fixed\", value = 500")
        .replace("kind = \"lognormal\", median = 150, p99 = 900, max = 1024", "kind = \"fixed\", value = 100");
    std::fs::write(dir.join("fixed.toml"), pin_overhead(&fixed)).unwrap();
    let o = servesim(&[
        "compare",
        "--scenario",
        dir.join("fixed.toml").to_str().unwrap(),
        "--vary",
        "scheduler.max_num_seqs=8",
        "--out",
        dir.join("fixed").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("compare: 2 runs, "), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(
            "seeds 5–7 give every variant the same figures: nothing in this scenario is drawn at random (a trace \
             replayed whole, fixed sizes), so each variant's one run stands for every seed"
        ),
        "{}",
        stdout(&o)
    );
    // The same comparison with the seeds run one by one (a seed each): the same figures.
    let csv = read(&dir.join("fixed").join("compare.csv"));
    for seed in ["5", "6", "7"] {
        let one = dir.join(format!("fixed-{seed}"));
        let o = servesim(&[
            "compare",
            "--scenario",
            dir.join("fixed.toml").to_str().unwrap(),
            "--vary",
            "scheduler.max_num_seqs=8",
            "--seeds",
            "1",
            "--seed",
            seed,
            "--quiet",
            "--out",
            one.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let single = read(&one.join("compare.csv"));
        let figures =
            |c: &str| c.lines().map(|l| l.split(',').take(12).collect::<Vec<_>>().join(",")).collect::<Vec<_>>();
        assert_eq!(figures(&single), figures(&csv), "seed {seed}");
    }
}
