//! The importer on the committed slice of AIConfigurator's database (data/aiconfigurator/):
//! the parquet reader against values pyarrow read from the same files, and one decode step and
//! one prefill of llama-3-8b (TP 1, H100, vLLM 0.24.0) priced as the sum of the database's own
//! kernel times, with the shapes the database did not measure read by the documented rule.

use std::path::PathBuf;

use servesim_aic::{Db, Files, Request, Weights};
use servesim_sim::cost::profile::Profile;
use servesim_sim::cost::{BatchShape, Profiled, RooflineParams};
use servesim_sim::spec::{Dtype, GpuPreset, ModelPreset, ModelSpec};

struct Dir(PathBuf);

impl Files for Dir {
    fn list(&self, dir: &str) -> Vec<String> {
        let Ok(rd) = std::fs::read_dir(self.0.join(dir)) else { return vec![] };
        rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect()
    }
    fn read(&self, path: &str) -> Result<Vec<u8>, servesim_aic::Error> {
        std::fs::read(self.0.join(path)).map_err(|e| servesim_aic::Error::Table(format!("{path}: {e}")))
    }
    fn root(&self) -> String {
        self.0.display().to_string()
    }
}

fn slice() -> Dir {
    Dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data/aiconfigurator/systems/data"))
}

fn llama(weights: Dtype) -> ModelSpec {
    ModelSpec::from_preset(ModelPreset::find("llama-3-8b").unwrap(), weights, Dtype::Bf16)
}

fn request(tp: Vec<u32>) -> Request {
    Request {
        system: "h100_sxm".into(),
        framework: "vllm".into(),
        version: None,
        model: llama(Dtype::Bf16),
        tp,
        weights: Weights::Bf16,
        kv: Dtype::Bf16,
        gemm_kernel: None,
        gpu: GpuPreset::find("h100-sxm").unwrap().spec(),
        moe_distribution: "balanced".into(),
        experts: true,
        expert_parallel: false,
        package: None,
        command: "test".into(),
        date: String::new(),
        servesim_version: "test".into(),
    }
}

fn import(tp: Vec<u32>) -> Profile {
    let files = slice();
    let db = Db::new(&files);
    servesim_aic::import(&db, &request(tp)).unwrap()
}

#[test]
fn both_codecs_read_as_pyarrow_reads_them() {
    let files = slice();
    let db = Db::new(&files);
    // ZSTD pages (as the package ships them).
    let g = db.frame("h100_sxm/gemm/vllm/0.24.0/gemm_perf.parquet", &["m", "n", "k", "latency", "gemm_dtype"]).unwrap();
    assert_eq!(g.rows, 18204);
    let (m, n, k, lat, dt) = (
        g.ints("m").unwrap(),
        g.ints("n").unwrap(),
        g.ints("k").unwrap(),
        g.floats("latency").unwrap(),
        g.strs("gemm_dtype").unwrap(),
    );
    let at = |mm, nn, kk| {
        (0..g.rows).find(|&i| m[i] == mm && n[i] == nn && k[i] == kk && dt[i] == "bfloat16").map(|i| lat[i]).unwrap()
    };
    // pyarrow 2x.x on the same file.
    assert_eq!(at(8, 6144, 4096), 0.020424889193640817);
    assert_eq!(at(1024, 4096, 16384), 0.17392178376515707);
    // Snappy pages (the slice rewrote this table with Snappy).
    let c = db.frame("h100_sxm/comm/vllm/0.24.0/custom_allreduce_perf.parquet", &[]).unwrap();
    assert_eq!(c.rows, 138);
    assert!(c.strs("backend").unwrap().contains(&"vllm_graph"));
    // Every file read is named with its SHA-256.
    let read = db.files_read();
    assert_eq!(read.len(), 2);
    let bytes = std::fs::read(files.0.join(&read[0].path)).unwrap();
    use sha2::Digest;
    let want: String = sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(read[0].sha256, want);
    // Not parquet: one line naming the file.
    let e = servesim_aic::frame::Frame::read("x.parquet", b"PAR1 nonsense".to_vec(), &[]).unwrap_err().to_string();
    assert!(e.starts_with("x.parquet: not a readable parquet file"), "{e}");
}

/// The util rule of `gemm.rs` by hand: H100 bf16 speed of light, utilization interpolated in
/// log space between two measured sites (or held beyond the last).
fn between(m: f64, n: f64, k: f64, (n0, k0, t0): (f64, f64, f64), (n1, k1, t1): (f64, f64, f64), w: f64) -> f64 {
    let sol = |m: f64, n: f64, k: f64| {
        let c = 2.0 * m * n * k / 989.4e12;
        let b = (n * k * 2.0 + 2.0 * m * (n + k)) / 3.35e12;
        c.max(b) * 1e3
    };
    let (u0, u1) = (sol(m, n0, k0) / t0, sol(m, n1, k1) / t1);
    sol(m, n, k) / ((1.0 - w) * u0.ln() + w * u1.ln()).exp()
}

fn measured_seconds(p: &Profile, b: &BatchShape) -> (f64, Vec<String>) {
    let model =
        Profiled::new(llama(Dtype::Bf16), GpuPreset::find("h100-sxm").unwrap().spec(), 1, RooflineParams::default(), p)
            .unwrap();
    let ops = model.breakdown(b);
    let measured: f64 = ops.iter().filter(|o| o.measured).map(|o| o.seconds).sum();
    let rest = ops.iter().filter(|o| !o.measured).map(|o| o.name.to_string()).collect();
    (measured, rest)
}

#[test]
fn a_decode_step_and_a_prefill_are_the_sum_of_the_database_kernels() {
    let p = import(vec![1]);
    let w_n = (28672f64 / 16384.0).ln() / (51200f64 / 16384.0).ln();
    let w_k = (14336f64 / 12288.0).ln() / (16384f64 / 12288.0).ln();

    // Eight decodes at context 1024 (generation table: batch 8, isl 1 + step 1023).
    let mut d = BatchShape::default();
    for _ in 0..8 {
        d.add_decode(1024);
    }
    let m = 8.0;
    let qkv = 0.020424889193640817;
    let o = 0.015452444553375244;
    let gate_up = between(
        m,
        28672.0,
        4096.0,
        (16384.0, 4096.0, 0.046925332811143666),
        (51200.0, 4096.0, 0.16587911711798772),
        w_n,
    );
    let down =
        between(m, 4096.0, 14336.0, (4096.0, 12288.0, 0.04373066624005636), (4096.0, 16384.0, 0.0480293333530426), w_k);
    let attn = 0.018235;
    let lm = between(
        m,
        128256.0,
        4096.0,
        (65536.0, 4096.0, 0.18400266435411242),
        (65536.0, 4096.0, 0.18400266435411242),
        0.0,
    );
    let want = (32.0 * (qkv + o + gate_up + down) + lm) * 1e-3;
    let (got, rest) = measured_seconds(&p, &d);
    // The decode attention row is read from the table with its printed precision above.
    let attn_got = got - want;
    assert!((attn_got / (32.0 * 1e-3) - attn).abs() < 1e-6, "attention {} vs {attn}", attn_got / 32e-3);
    assert_eq!(rest, ["elementwise", "cpu_overhead"]);

    // One prefill of 1024 new tokens (context table: batch 1, isl 1024) sampling one token.
    let mut f = BatchShape::default();
    f.add_prefill(1024, 0, true);
    let m = 1024.0;
    let qkv = 0.06533510817421807;
    let o = 0.043134222428003945;
    let gate_up =
        between(m, 28672.0, 4096.0, (16384.0, 4096.0, 0.17461510499318442), (51200.0, 4096.0, 0.5448240174187554), w_n);
    let down = between(
        m,
        4096.0,
        14336.0,
        (4096.0, 12288.0, 0.11411466863420273),
        (4096.0, 16384.0, 0.17392178376515707),
        w_k,
    );
    let lm = between(
        1.0,
        128256.0,
        4096.0,
        (65536.0, 4096.0, 0.21803822782304552),
        (65536.0, 4096.0, 0.21803822782304552),
        0.0,
    );
    let attn = 0.03552;
    let want = (32.0 * (qkv + o + gate_up + down + attn) + lm) * 1e-3;
    let (got, _) = measured_seconds(&p, &f);
    assert!((got - want).abs() / want < 1e-4, "{got} vs {want}");
}

#[test]
fn every_table_names_its_source_and_the_interpolated_shapes_their_error() {
    let p = import(vec![1, 2]);
    let d = p.meta.database.as_ref().unwrap();
    assert_eq!((d.system.as_str(), d.framework.as_str(), d.version.as_str()), ("h100_sxm", "vllm", "0.24.0"));
    assert!(d.files.iter().any(|f| f.path.ends_with("custom_allreduce_perf.parquet")), "{:?}", d.files);
    assert_eq!(p.ops.len(), 15, "7 ops at TP 1, 8 at TP 2 (all-reduce)");
    for t in &p.ops {
        let s = t.source.as_ref().unwrap_or_else(|| panic!("{} has no source", t.name));
        let interpolated = s.shape.contains("not measured");
        assert_eq!(interpolated, s.transfer_error.is_some(), "{}: {s:?}", t.name);
        assert!(!t.heldout.is_empty(), "{}", t.name);
    }
    let qkv = p.ops.iter().find(|t| t.name == "attn_pre_proj" && t.tp == Some(1)).unwrap();
    assert_eq!(qkv.source.as_ref().unwrap().shape, "n 6144, k 4096 measured");
    let up = p.ops.iter().find(|t| t.name == "mlp_up_proj" && t.tp == Some(1)).unwrap();
    assert!(up.source.as_ref().unwrap().shape.contains("(16384, 4096), (51200, 4096)"), "{:?}", up.source);
    // All-reduce: CUDA-graph times up to 512 tokens of 4096 elements, eager above, in bytes.
    let ar = p.ops.iter().find(|t| t.name == "all_reduce").unwrap();
    assert!(ar.source.as_ref().unwrap().selection.contains("CUDA-graph times up to 512 tokens"));
    assert_eq!(ar.points[0][0], 256.0, "128 elements are 256 bytes");
}

#[test]
fn what_is_missing_is_named_with_what_there_is() {
    let files = slice();
    let db = Db::new(&files);
    let mut r = request(vec![1]);
    r.system = "b300_sxm".into();
    let e = servesim_aic::import(&db, &r).unwrap_err();
    assert!(matches!(e, servesim_aic::Error::NotInDatabase(_)), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("system b300_sxm is not in the database") && e.contains("(it has h100_sxm)"), "{e}");
    let mut r = request(vec![1]);
    r.version = Some("0.19.0".into());
    let e = servesim_aic::import(&db, &r).unwrap_err();
    assert!(matches!(e, servesim_aic::Error::NotInDatabase(_)), "{e:?}");
    let e = e.to_string();
    assert_eq!(e, "h100_sxm has no vllm version 0.19.0 (it has 0.24.0)");
    let mut r = request(vec![1]);
    r.framework = "trtllm".into();
    let e = servesim_aic::import(&db, &r).unwrap_err().to_string();
    assert!(e.contains("has no trtllm GEMM and attention tables (it has frameworks vllm, sglang)"), "{e}");
    let mut r = request(vec![3]);
    r.tp = vec![3];
    assert!(servesim_aic::import(&db, &r).unwrap_err().to_string().contains("TP 3 does not divide"));
    // fp4 GEMMs are not in the slice: the dtypes it has are listed.
    let mut r = request(vec![1]);
    r.weights = Weights::Fp4;
    let e = servesim_aic::import(&db, &r).unwrap_err();
    assert!(matches!(e, servesim_aic::Error::Table(_)), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("no GEMMs of dtype nvfp4 (it has bfloat16, fp8, fp8_block)"), "{e}");
}

fn gpt_oss() -> ModelSpec {
    ModelSpec::from_preset(ModelPreset::find("gpt-oss-120b").unwrap(), Dtype::Mxfp4, Dtype::Bf16)
}

fn gpt_oss_request(distribution: &str) -> Request {
    Request { model: gpt_oss(), weights: Weights::Mxfp4, moe_distribution: distribution.into(), ..request(vec![1]) }
}

/// One op's seconds in a batch, from the profile's breakdown.
fn op_seconds(p: &Profile, b: &BatchShape, name: &str) -> f64 {
    let model =
        Profiled::new(gpt_oss(), GpuPreset::find("h100-sxm").unwrap().spec(), 1, RooflineParams::default(), p).unwrap();
    assert!(model.fallbacks().iter().all(|f| f.op == "elementwise"), "{:?}", model.fallbacks());
    seconds_of(&model, b, name)
}

#[test]
fn gpt_oss_reads_its_windowed_layers_and_mxfp4_experts_from_the_database() {
    let files = slice();
    let db = Db::new(&files);
    let p = servesim_aic::import(&db, &gpt_oss_request("power_law_1.2")).unwrap();
    let names: Vec<&str> = p.ops.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "attn_pre_proj",
            "attn_post_proj",
            "lm_head",
            "moe_experts",
            "attn_prefill",
            "attn_decode",
            "attn_prefill_window",
            "attn_decode_window"
        ]
    );
    let src = |n: &str| p.ops.iter().find(|t| t.name == n).unwrap().source.clone().unwrap();
    // The experts: the gpt-oss kernel vLLM runs, weight-only MXFP4, the routing asked for.
    assert!(src("moe_experts").selection.starts_with("w4a16_mxfp4 MoE of kernel vllm_gptossmxfp4moe_triton"));
    assert!(src("moe_experts").selection.contains("power_law_1.2 routing, expert TP 1"));
    // The GEMMs are bf16 (the checkpoint's attention and LM head).
    assert!(src("attn_pre_proj").selection.starts_with("bfloat16 GEMMs"), "{:?}", src("attn_pre_proj"));
    assert!(src("attn_prefill_window").selection.contains("window 128"));
    assert!(src("attn_prefill").selection.contains("full attention"));
    assert!(p.meta.notes.iter().any(|n| n.contains("bias adds are not timed")), "{:?}", p.meta.notes);

    // 18 full and 18 windowed layers (layer_types of the config), each reading its own table:
    // values pyarrow read from the slice.
    let mut d = BatchShape::default();
    for _ in 0..8 {
        d.add_decode(1024);
    }
    let ms = 1e-3;
    close(op_seconds(&p, &d, "attn_decode"), 18.0 * 0.015061333775520325 * ms);
    close(op_seconds(&p, &d, "attn_decode_window"), 18.0 * 0.01509333277742068 * ms);
    close(op_seconds(&p, &d, "moe_experts"), 36.0 * 0.1941696047782898 * ms);
    let mut f = BatchShape::default();
    f.add_prefill(1024, 0, true);
    close(op_seconds(&p, &f, "attn_prefill"), 18.0 * 0.04438933233420054 * ms);
    close(op_seconds(&p, &f, "attn_prefill_window"), 18.0 * 0.030426666140556335 * ms);
    close(op_seconds(&p, &f, "moe_experts"), 36.0 * 1.375494384765625 * ms);
    // The second half of that prompt over the first, cached: its share of the prompt's pairs.
    // Full attention (1024² − 512²) / 1024² = 0.75; under a window of 128 each query sees at
    // most 128 keys: W(s) = 128·129/2 + (s − 128)·128, (W(1024) − W(512)) / W(1024) =
    // 65536 / 122944.
    let mut c = BatchShape::default();
    c.add_prefill(512, 512, true);
    close(op_seconds(&p, &c, "attn_prefill"), 18.0 * 0.04438933233420054 * 0.75 * ms);
    close(op_seconds(&p, &c, "attn_prefill_window"), 18.0 * 0.030426666140556335 * (65536.0 / 122944.0) * ms);

    // Balanced routing reads the other rows: at 1,024 tokens every expert gets its even share.
    let b = servesim_aic::import(&db, &gpt_oss_request("balanced")).unwrap();
    close(op_seconds(&b, &f, "moe_experts"), 36.0 * 0.8561546802520752 * ms);
}

#[test]
fn a_windowed_model_without_windowed_tables_is_priced_by_the_roofline_and_says_so() {
    let files = slice();
    let db = Db::new(&files);
    let mut p = servesim_aic::import(&db, &gpt_oss_request("power_law_1.2")).unwrap();
    p.ops.retain(|t| t.name != "attn_decode_window");
    let spec = GpuPreset::find("h100-sxm").unwrap().spec();
    let m = Profiled::new(gpt_oss(), spec.clone(), 1, RooflineParams::default(), &p).unwrap();
    let f: Vec<(String, String)> = m.fallbacks().iter().map(|f| (f.op.clone(), f.reason.clone())).collect();
    assert_eq!(f.len(), 2, "{f:?}");
    assert_eq!(f[1].0, "attn_decode");
    assert!(f[1]
        .1
        .contains("18 of 36 layers attend to a window of 128 tokens and attn_decode_window is not in the profile"));
    // The prefill's tables are both there: measured.
    assert!(f.iter().all(|(op, _)| op != "attn_prefill"));
    // A windowed table for a model without windowed layers is an error.
    let llama = import(vec![1]);
    let mut with = llama.clone();
    let mut w = p.ops.iter().find(|t| t.name == "attn_prefill_window").unwrap().clone();
    w.tp = Some(1);
    with.ops.push(w);
    let e = Profiled::new(llama_spec(), spec, 1, RooflineParams::default(), &with).unwrap_err().to_string();
    assert!(e.contains("op attn_prefill_window: llama-3-8b has no windowed attention layers"), "{e}");
}

fn llama_spec() -> ModelSpec {
    llama(Dtype::Bf16)
}

fn deepseek() -> ModelSpec {
    ModelSpec::from_preset(ModelPreset::find("deepseek-r1").unwrap(), Dtype::Fp8, Dtype::Bf16)
}

/// DeepSeek-R1 at TP 8 on an H100 priced by `p`, whose only fallback must be the elementwise ops.
fn deepseek_on_h100(p: &Profile) -> Profiled {
    let spec = GpuPreset::find("h100-sxm").unwrap().spec();
    let m = Profiled::new(deepseek(), spec, 8, RooflineParams::default(), p).unwrap();
    let f: Vec<&str> = m.fallbacks().iter().map(|f| f.op.as_str()).collect();
    assert_eq!(f, ["elementwise"]);
    m
}

/// Seconds of op `name` in iteration `b`.
fn seconds_of(m: &Profiled, b: &BatchShape, name: &str) -> f64 {
    m.breakdown(b).iter().filter(|o| o.name == name).map(|o| o.seconds).sum()
}

fn close(got: f64, want: f64) {
    assert!((got - want).abs() <= 1e-9 * want, "{got} vs {want}");
}

fn deepseek_request() -> Request {
    Request {
        framework: "sglang".into(),
        model: deepseek(),
        tp: vec![8],
        weights: Weights::Fp8Block,
        moe_distribution: "power_law_1.2".into(),
        ..request(vec![8])
    }
}

#[test]
fn deepseek_under_vllm_reads_vllms_attention_blocks() {
    // vLLM times the whole latent-attention block (projections, attention, output projection)
    // instead of the kernels: AIConfigurator's `MLAModule` for vLLM (sdk/models/deepseek.py).
    let files = slice();
    let db = Db::new(&files);
    let r = Request { framework: "vllm".into(), ..deepseek_request() };
    let p = servesim_aic::import(&db, &r).unwrap();
    let src = |n: &str| p.ops.iter().find(|t| t.name == n).unwrap().source.clone().unwrap();
    assert!(src("attn_decode").selection.contains("vLLM's whole attention block"), "{:?}", src("attn_decode"));
    assert!(src("attn_decode").selection.contains("fp8_block projections; kernels FLASH_ATTN_MLA (prefill)"));
    assert_eq!(src("attn_decode").file, "h100_sxm/mla/vllm/0.24.0/mla_generation_module_perf.parquet");
    assert!(src("attn_pre_proj").selection.starts_with("timed inside vLLM's attention block"));
    let m = deepseek_on_h100(&p);
    let op = |b: &BatchShape, name: &str| seconds_of(&m, b, name);
    // Values pyarrow read from the slice (the first row of each key, of the kernel with the
    // most rows). Eight decodes at context 1,025 (isl 1 + step 1024): the block's 0.1111 ms in
    // each of the 61 layers, its projections included — none priced apart.
    let mut d = BatchShape::default();
    for _ in 0..8 {
        d.add_decode(1025);
    }
    close(op(&d, "attn_decode"), 61.0 * 0.1111e-3);
    assert_eq!(op(&d, "attn_pre_proj") + op(&d, "attn_post_proj"), 0.0);
    // Two 512-token prefills: the block's 0.2488 ms in each layer.
    let mut f = BatchShape::default();
    f.add_prefill(512, 0, true);
    f.add_prefill(512, 0, true);
    close(op(&f, "attn_prefill"), 61.0 * 0.2488e-3);
    // The slice holds vLLM's blocks with a bf16 KV cache only: an FP8 cache names what it has.
    let r = Request { framework: "vllm".into(), kv: Dtype::Fp8, ..deepseek_request() };
    let e = servesim_aic::import(&db, &r).unwrap_err().to_string();
    assert!(
        e.contains("latent attention (tp 8)") && e.contains("no rows for 16 heads per GPU with a fp8 KV cache"),
        "{e}"
    );
}

#[test]
fn deepseek_reads_latent_attention_shared_and_dense_layers_from_the_database() {
    let files = slice();
    let db = Db::new(&files);
    let p = servesim_aic::import(&db, &deepseek_request()).unwrap();
    let names: Vec<&str> = p.ops.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "mlp_up_proj",
            "mlp_down_proj",
            "lm_head",
            "moe_experts",
            "attn_pre_proj",
            "attn_post_proj",
            "attn_prefill",
            "attn_decode",
            "all_reduce"
        ]
    );
    let src = |n: &str| p.ops.iter().find(|t| t.name == n).unwrap().source.clone().unwrap();
    assert!(src("moe_experts").selection.contains("plus 1 shared expert(s) as fp8_block GEMMs"));
    assert!(
        src("attn_pre_proj").shape.contains("down: fp8_block n 2112, k 7168 not measured"),
        "{:?}",
        src("attn_pre_proj")
    );
    assert!(src("attn_decode").selection.starts_with("16 heads per GPU, bfloat16 KV cache"));
    assert_eq!(src("all_reduce").file, "h100_sxm/comm/sglang/0.5.14/custom_allreduce_perf.parquet");

    let m = deepseek_on_h100(&p);
    let op = |b: &BatchShape, name: &str| seconds_of(&m, b, name);
    let ms = 1e-3;
    // Values pyarrow read from the slice (the first row of each key, as the reader keeps).
    // Eight decodes at context 1024: in each of the 61 layers the MLA decode kernel over 16
    // heads and the two absorbed FP8 products of 8 tokens.
    let mut d = BatchShape::default();
    for _ in 0..8 {
        d.add_decode(1024);
    }
    close(op(&d, "attn_decode"), 61.0 * (0.017660799622535705 + 0.008140800148248672 + 0.008716800063848496) * ms);
    // In each of the 58 MoE layers the routed experts and the shared one (its gate/up, 512 × 7168,
    // and down, 7168 × 256, at 8 tokens); the first 3 layers are dense.
    close(op(&d, "moe_experts"), 58.0 * (0.13180992126464844 + 0.012248888611793518 + 0.004716444346639845) * ms);
    let up = p.ops.iter().find(|t| t.name == "mlp_up_proj").unwrap();
    let at8 = up.points.iter().find(|q| q[0] == 8.0).unwrap()[1];
    close(op(&d, "mlp_up_proj"), 3.0 * at8 * ms);
    // One 1,024-token prefill: the MLA prefill kernel and the KV up-projection (4096 × 512) of
    // its 1,024 tokens, in each of the 61 layers; the experts at 1,024 tokens.
    let mut f = BatchShape::default();
    f.add_prefill(1024, 0, true);
    close(op(&f, "attn_prefill"), 61.0 * (0.04887360036373138 + 0.01934400035275353) * ms);
    close(op(&f, "moe_experts"), 58.0 * (0.6535462188720703 + 0.020617778102556866 + 0.013903111219406128) * ms);
    // Expert parallelism (`cluster.ep`): whole experts on each of the 8 GPUs, the table's
    // (moe_tp 1, moe_ep 8) rows — slower here than the split ones at these counts.
    let ep = servesim_aic::import(&db, &Request { expert_parallel: true, ..deepseek_request() }).unwrap();
    let src = ep.ops.iter().find(|t| t.name == "moe_experts").unwrap().source.clone().unwrap();
    assert!(src.selection.contains("power_law_1.2 routing, expert parallel 8;"), "{src:?}");
    let m = deepseek_on_h100(&ep);
    close(
        seconds_of(&m, &d, "moe_experts"),
        58.0 * (0.1993715286254883 + 0.012248888611793518 + 0.004716444346639845) * ms,
    );
    close(
        seconds_of(&m, &f, "moe_experts"),
        58.0 * (0.7891519927978516 + 0.020617778102556866 + 0.013903111219406128) * ms,
    );
    // A DP attention rank's slice leaves the experts out (the instance's slice has them).
    let rank = servesim_aic::import(&db, &Request { experts: false, ..deepseek_request() }).unwrap();
    assert!(rank.ops.iter().all(|t| t.name != "moe_experts"));
    assert!(rank.ops.iter().any(|t| t.name == "attn_decode"));
}
