//! The roofline cost model against real GPU measurements: Vidur's per-operator GEMM timings on
//! A100-80G and H100 (data/vidur-profiles, MIT). The model is not fitted to these numbers; its
//! defaults come from a few round figures (see `cost::roofline`). This test keeps it honest:
//! the median error of every GEMM must stay within 20%, and the table is printed for
//! docs/fidelity.md (`cargo test --test fidelity_vidur -- --nocapture`).

use crate::common::root;
use servesim_sim::cost::{BatchShape, Roofline, RooflineParams};
use servesim_sim::spec::{Dtype, GpuPreset, ModelSpec};

fn model(h: u64, heads: u64, kv: u64, ff: u64, vocab: u64) -> ModelSpec {
    ModelSpec {
        name: "vidur".into(),
        layers: 1,
        hidden: h,
        heads,
        kv_heads: kv,
        head_dim: h / heads,
        intermediate: ff,
        vocab,
        max_context: 1 << 20,
        experts: 1,
        top_k: 1,
        tied_embeddings: false,
        weight_dtype: Dtype::Bf16,
        kv_dtype: Dtype::Bf16,
        attention_dtype: None,
        arch: servesim_sim::spec::Arch::PLAIN,
    }
}

/// (our op name, Vidur's column)
const OPS: [(&str, &str); 4] = [
    ("qkv_proj", "attn_pre_proj"),
    ("o_proj", "attn_post_proj"),
    ("gate_up_proj", "mlp_up_proj"),
    ("down_proj", "mlp_down_proj"),
];

fn errors(gpu: &str, path: &str) -> Vec<(&'static str, Vec<f64>)> {
    let mut rdr = csv::Reader::from_path(root().join("data/vidur-profiles").join(path)).unwrap();
    let headers = rdr.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap_or_else(|| panic!("{path}: no {name}"));
    let (c_h, c_nh, c_kv, c_ff, c_v, c_n, c_tp) = (
        col("n_embd"),
        col("n_head"),
        col("n_kv_head"),
        col("n_expanded_embd"),
        col("vocab_size"),
        col("num_tokens"),
        col("num_tensor_parallel_workers"),
    );
    let g = GpuPreset::find(gpu).unwrap().spec();
    let params = RooflineParams::default();
    let mut out: Vec<(&'static str, Vec<f64>)> = OPS.iter().map(|(o, _)| (*o, vec![])).collect();
    for rec in rdr.records() {
        let rec = rec.unwrap();
        let num = |i: usize| rec[i].parse::<u64>().unwrap();
        let m = model(num(c_h), num(c_nh), num(c_kv), num(c_ff), num(c_v));
        let r = Roofline::new(m, g.clone(), num(c_tp), params.clone());
        let mut b = BatchShape::default();
        b.add_prefill(num(c_n), 0, false);
        let ops = r.breakdown(&b);
        for (i, (ours, theirs)) in OPS.iter().enumerate() {
            let pred = ops.iter().find(|o| o.name == *ours).unwrap().seconds + params.kernel_launch_us * 1e-6;
            let meas = rec[col(&format!("time_stats.{theirs}.median"))].parse::<f64>().unwrap() * 1e-3;
            out[i].1.push((pred - meas) / meas);
        }
    }
    out
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[test]
fn roofline_gemms_are_within_20_percent_of_vidur_measurements() {
    let files = [
        ("a100-80g", "compute/a100/meta-llama/Meta-Llama-3-8B/mlp.csv"),
        ("a100-80g", "compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv"),
        ("a100-80g", "compute/a100/meta-llama/Llama-2-70b-hf/mlp.csv"),
        ("a100-80g", "compute/a100/codellama/CodeLlama-34b-Instruct-hf/mlp.csv"),
        ("h100-sxm", "compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv"),
        ("h100-sxm", "compute/h100/meta-llama/Llama-2-70b-hf/mlp.csv"),
        ("h100-sxm", "compute/h100/codellama/CodeLlama-34b-Instruct-hf/mlp.csv"),
    ];
    println!("| GPU | model | op | points | median error (signed) | median abs error | P90 abs error |");
    println!("|---|---|---|---|---|---|---|");
    let mut worst: f64 = 0.0;
    for (gpu, path) in files {
        let model = path.split('/').nth(3).unwrap();
        for (op, mut e) in errors(gpu, path) {
            let n = e.len();
            let signed = median(&mut e.clone());
            let mut abs: Vec<f64> = e.iter_mut().map(|x| x.abs()).collect();
            let mabs = median(&mut abs);
            let p90 = abs[(abs.len() as f64 * 0.9) as usize];
            println!(
                "| {gpu} | {model} | {op} | {n} | {:+.1}% | {:.1}% | {:.1}% |",
                signed * 100.0,
                mabs * 100.0,
                p90 * 100.0
            );
            worst = worst.max(mabs);
        }
    }
    assert!(worst < 0.20, "worst per-op median abs error {:.1}%", worst * 100.0);
}

#[test]
fn default_cpu_overhead_is_the_least_squares_line_through_vidur() {
    let mut rdr = csv::Reader::from_path(root().join("data/vidur-profiles/legacy-a100-tp2/cpu_overheads.csv")).unwrap();
    let h = rdr.headers().unwrap().clone();
    let col = |n: &str| h.iter().position(|x| x == n).unwrap();
    let parts = ["schedule_median", "sampler_e2e_median", "prepare_inputs_e2e_median", "process_model_outputs_median"];
    let (mut xs, mut ys) = (vec![], vec![]);
    for r in rdr.records() {
        let r = r.unwrap();
        xs.push(r[col("batch_size")].parse::<f64>().unwrap());
        ys.push(parts.iter().map(|p| r[col(p)].parse::<f64>().unwrap()).sum::<f64>() * 1e3);
    }
    let n = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let slope = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum::<f64>()
        / xs.iter().map(|x| (x - mx).powi(2)).sum::<f64>();
    let base = my - slope * mx;
    let p = RooflineParams::default();
    assert!((p.cpu_overhead_base_us - base).abs() < 0.05, "base {base}");
    assert!((p.cpu_overhead_per_seq_us - slope).abs() < 0.005, "slope {slope}");
}
