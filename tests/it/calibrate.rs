//! The calibration pipeline end to end on the CPU backend (sweep → fit → profile → simulate),
//! the CUDA backend's message on a machine without a GPU, and the profile commands.

use crate::common::*;
use servesim_sim::cost::profile::Profile;
use servesim_sim::cost::{BatchShape, CostModel, Profiled};
use servesim_sim::scenario::CostSpec;
use servesim_sim::spec::GpuPreset;

const TINY_DIMS: &str = "name = \"tiny\"\nlayers = 2\nhidden = 256\nheads = 4\nkv_heads = 2\nhead_dim = 64\n\
                         intermediate = 512\nvocab = 2048\nmax_context = 1024\n";

#[test]
fn cpu_calibration_of_a_tiny_model_drives_simulate() {
    let dir = out_dir("calibrate-cpu");
    let profile_path = dir.join("profile.json");
    let o = servesim(&[
        "calibrate",
        "run",
        "--backend",
        "cpu",
        "--model",
        "calibrate/models/tiny.toml",
        "--tp",
        "1,2",
        "--out",
        profile_path.to_str().unwrap(),
        "--deadline",
        "90s",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("points/s"), "{out}");
    println!("{out}");
    let profile: Profile = serde_json::from_str(&read(&profile_path)).unwrap();
    assert_eq!(profile.meta.backend, "cpu");
    assert_eq!(profile.meta.tp, vec![1, 2]);
    // Every measured row of the streamed CSV is a point of its op's table (mixed-length decode
    // batches are checks, not table points).
    let csv = read(&dir.join("profile.csv"));
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert!(rows.len() > 100, "{} rows", rows.len());
    for row in &rows {
        let f: Vec<&str> = row.split(',').collect();
        if f[0] == "attn_decode_mixed" {
            continue;
        }
        let t = profile.ops.iter().find(|t| t.name == f[0] && t.tp == Some(f[1].parse().unwrap())).unwrap();
        let x1: f64 = f[2].parse().unwrap();
        assert!(t.points.iter().any(|p| p[0] == x1), "{row}");
    }
    // A measured point is reproduced by `profile query` (the table passes through its points).
    let t = profile.ops.iter().find(|t| t.name == "mlp_up_proj" && t.tp == Some(1)).unwrap();
    let p = &t.points[5];
    let q = servesim(&[
        "profile",
        "query",
        "--profile",
        profile_path.to_str().unwrap(),
        "--op",
        "mlp_up_proj",
        "--tp",
        "1",
        "--tokens",
        &p[0].to_string(),
    ]);
    assert!(q.status.success(), "{}", stderr(&q));
    let got: f64 = stdout(&q).trim().parse().unwrap();
    assert!((got - p[1]).abs() <= 5e-7, "{got} vs {}", p[1]);

    // The profile drives a simulation: one request alone, TTFT = the profiled prefill iteration
    // and E2E = TTFT + 9 decode iterations, computed here from the same tables.
    let scenario = dir.join("tiny.toml");
    std::fs::write(
        &scenario,
        format!(
            "[model]\n{TINY_DIMS}[gpu]\npreset = \"h100-sxm\"\n[cost]\nprofile = \"profile.json\"\n[workload]\nrequests = 1\n\
             arrival = {{ kind = \"constant\", rate = 1 }}\nprompt_tokens = {{ kind = \"fixed\", value = 100 }}\n\
             output_tokens = {{ kind = \"fixed\", value = 10 }}\n"
        ),
    )
    .unwrap();
    let sim_out = dir.join("sim");
    let o = servesim(&[
        "simulate",
        "--scenario",
        scenario.to_str().unwrap(),
        "--out",
        sim_out.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let summary: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let s = scenario_with_profile(&read(&scenario), &profile);
    let g = GpuPreset::find("h100-sxm").unwrap().spec();
    // The scenario's engine overhead (its CPU work per iteration, overlapped or not).
    let CostSpec::Roofline(c) = &s.groups[0].cost else { panic!("roofline cost") };
    let overlap = s.groups[0].scheduler.cpu.overlap.unwrap_or(c.engine_overhead().overlap);
    let m = Profiled::new(s.model.clone(), g, 1, c.params(), &profile).unwrap();
    let step = |b: &BatchShape| {
        let (t, cpu) = (m.iteration_time(b), m.cpu_time(b));
        if overlap {
            (t - cpu).max(cpu)
        } else {
            t
        }
    };
    let mut b = BatchShape::default();
    b.add_prefill(100, 0, true);
    let ttft = step(&b);
    let mut e2e = ttft;
    for k in 1..10 {
        let mut d = BatchShape::default();
        d.add_decode(100 + k);
        e2e += step(&d);
    }
    let ms = |v: &serde_json::Value| v.as_f64().unwrap();
    assert!((ms(&summary["ttft_ms"]["mean"]) - ttft.as_millis_f64()).abs() < 1e-6, "{}", summary["ttft_ms"]);
    assert!((ms(&summary["e2e_ms"]["mean"]) - e2e.as_millis_f64()).abs() < 1e-6, "{}", summary["e2e_ms"]);
    // The resolved scenario keeps the profile key.
    assert!(read(&sim_out.join("scenario.toml")).contains("profile = \"profile.json\""));
}

/// Resources whose every profile is one already parsed profile.
#[derive(Debug)]
struct OneProfile(std::sync::Arc<Profile>);

impl servesim_sim::scenario::Resources for OneProfile {
    fn profile(&self, _path: &str) -> Result<std::sync::Arc<Profile>, servesim_sim::scenario::ResourceError> {
        Ok(self.0.clone())
    }
    fn trace(
        &self,
        _spec: &mut servesim_sim::workload::trace::TraceSpec,
    ) -> Result<(), servesim_sim::scenario::ResourceError> {
        Ok(())
    }
}

/// Validates scenario text whose `cost.profile` is the given, already parsed profile.
fn scenario_with_profile(src: &str, p: &Profile) -> servesim_sim::Scenario {
    let res = std::sync::Arc::new(OneProfile(std::sync::Arc::new(p.clone())));
    servesim_sim::Scenario::from_toml_in(src, "t", res).unwrap()
}

#[test]
fn cuda_backend_without_a_gpu_says_what_is_missing_and_what_to_do() {
    if std::path::Path::new("/dev/nvidia0").exists() {
        eprintln!("SKIPPED: this machine has an NVIDIA device");
        return;
    }
    let dir = out_dir("calibrate-cuda");
    let o = servesim(&[
        "calibrate",
        "run",
        "--backend",
        "cuda",
        "--model",
        "llama-3-8b",
        "--out",
        dir.join("p.json").to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.starts_with("error: --backend cuda: no CUDA"), "{err}");
    assert!(err.contains("driver") && err.contains("--backend cpu") && err.contains("import-vidur"), "{err}");
    assert!(!err.contains("panicked") && !err.contains("backtrace") && !err.contains("RUST_BACKTRACE"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!dir.join("p.json").exists());
}

#[test]
fn profile_commands_show_query_and_reject_bad_input() {
    let dir = out_dir("profile-cmds");
    let p = dir.join("llama3.json");
    let mlp = root().join("data/vidur-profiles/compute/a100/meta-llama/Meta-Llama-3-8B/mlp.csv");
    let o = servesim(&["calibrate", "import-vidur", "--mlp", mlp.to_str().unwrap(), "--out", p.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let show = stdout(&servesim(&["profile", "show", p.to_str().unwrap()]));
    assert!(show.contains("Meta-Llama-3-8B") && show.contains("a100 (Vidur)"), "{show}");
    assert!(show.lines().any(|l| l.starts_with("mlp_up_proj") && l.contains("1..32768")), "{show}");
    // 4096 tokens at TP 1 is a measured point of Vidur's CSV: 3.8485 ms (median) for mlp_up_proj.
    let q = servesim(&[
        "profile",
        "query",
        "--profile",
        p.to_str().unwrap(),
        "--op",
        "mlp_up_proj",
        "--tokens",
        "4096",
        "--tp",
        "1",
    ]);
    let raw = measured(&mlp, "mlp_up_proj", 4096, 1);
    let got: f64 = stdout(&q).trim().parse().unwrap();
    assert!((got - raw).abs() < 5e-7, "{got} vs {raw}");
    let j = servesim(&[
        "profile",
        "query",
        "--profile",
        p.to_str().unwrap(),
        "--op",
        "mlp_up_proj",
        "--tokens",
        "4096",
        "--tp",
        "1",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&j)).unwrap();
    assert!((v["ms"].as_f64().unwrap() - raw).abs() < 1e-12 && v["tp"] == 1, "{v}");
    assert_eq!(v["measured_range"], true, "{v}");
    assert!(!stderr(&j).contains("note:"), "{}", stderr(&j));
    // Twice the last measured point (32,768 tokens): the table's own reading, in proportion,
    // and a note that a run reads it along the op's bound instead.
    let args = ["--op", "mlp_up_proj", "--tokens", "65536", "--tp", "1", "--format", "json"];
    let far = servesim(&[&["profile", "query", "--profile", p.to_str().unwrap()][..], &args].concat());
    let v: serde_json::Value = serde_json::from_str(&stdout(&far)).unwrap();
    let edge = measured(&mlp, "mlp_up_proj", 32768, 1);
    assert!((v["ms"].as_f64().unwrap() - 2.0 * edge).abs() < 1e-9 && v["measured_range"] == false, "{v}");
    let note = stderr(&far);
    assert!(note.contains("outside its measured range") && note.contains("roofline bound"), "{note}");
    for (args, msg) in [
        (vec!["--op", "nope", "--tokens", "1", "--tp", "1"], "--op: no op \"nope\""),
        (vec!["--op", "mlp_up_proj", "--tokens", "1"], "--tp: op mlp_up_proj was measured at TP 1, 2, 4, 8; say which"),
        (vec!["--op", "mlp_up_proj", "--tokens", "1", "--tp", "3"], "not 3"),
    ] {
        let mut a = vec!["profile", "query", "--profile", p.to_str().unwrap()];
        a.extend(args);
        let o = servesim(&a);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(msg), "{}", stderr(&o));
    }
    // A scenario whose model does not match the profile: one line naming cost.profile, exit 2.
    let scen = dir.join("mismatch.toml");
    std::fs::write(&scen, "[model]\npreset = \"llama-2-7b\"\n[gpu]\npreset = \"a100-80g\"\n[cost]\nprofile = \"llama3.json\"\n[workload]\nrequests = 1\narrival = { kind = \"constant\", rate = 1 }\nprompt_tokens = { kind = \"fixed\", value = 10 }\noutput_tokens = { kind = \"fixed\", value = 2 }\n").unwrap();
    let o = servesim(&[
        "simulate",
        "--scenario",
        scen.to_str().unwrap(),
        "--quiet",
        "--out",
        dir.join("o").to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cost.profile: llama3.json: the profile was measured for Meta-Llama-3-8B")
            && err.contains("intermediate 11008"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1);
}

/// The mean of Vidur's medians for (op, num_tokens, tp) rows.
fn measured(path: &std::path::Path, op: &str, tokens: u64, tp: u32) -> f64 {
    let mut r = csv::Reader::from_path(path).unwrap();
    let h = r.headers().unwrap().clone();
    let col = |n: &str| h.iter().position(|x| x == n).unwrap();
    let (mut sum, mut n) = (0.0, 0.0);
    for rec in r.records() {
        let rec = rec.unwrap();
        if rec[col("num_tokens")].parse::<u64>().unwrap() == tokens
            && rec[col("num_tensor_parallel_workers")].parse::<u32>().unwrap() == tp
        {
            sum += rec[col(&format!("time_stats.{op}.median"))].parse::<f64>().unwrap();
            n += 1.0;
        }
    }
    assert!(n > 0.0);
    sum / n
}

#[test]
fn ops_limits_a_sweep_to_the_ops_named_and_refuses_an_op_the_layer_lacks() {
    let dir = out_dir("calibrate-ops");
    let profile_path = dir.join("profile.json");
    let run = |ops: &str| {
        servesim(&[
            "calibrate",
            "run",
            "--backend",
            "cpu",
            "--model",
            "calibrate/models/tiny.toml",
            "--ops",
            ops,
            "--out",
            profile_path.to_str().unwrap(),
            "--deadline",
            "30s",
            "--quiet",
        ])
    };
    let o = run("attn_decode,mlp_up_proj");
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = read(&dir.join("profile.csv"));
    let mut ops: Vec<&str> = csv.lines().skip(1).map(|l| l.split(',').next().unwrap()).collect();
    ops.sort_unstable();
    ops.dedup();
    assert_eq!(ops, ["attn_decode", "mlp_up_proj"]);
    let profile: Profile = serde_json::from_str(&read(&profile_path)).unwrap();
    let mut names: Vec<&str> = profile.ops.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names, ["attn_decode", "mlp_up_proj"]);
    // An op the layer does not have: refused before anything is measured, naming it and the ops there are.
    let o = run("attn_decode,mlp_gate");
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("--ops") && err.contains("\"mlp_gate\"") && err.contains("mlp_up_proj"), "{err}");
}
