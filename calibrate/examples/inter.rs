use servesim_calibrate::backend::cpu::CpuBackend;
use servesim_calibrate::backend::Backend;
use servesim_calibrate::clock::Clock;
use servesim_calibrate::emulate::cpu::CpuExecutor;
use servesim_calibrate::emulate::Executor;
use servesim_calibrate::plan::Shape;
use servesim_sim::cost::SeqWork;
use servesim_sim::spec::{Dtype, ModelSpec};

fn main() {
    let interleave = std::env::args().nth(1).as_deref() == Some("inter");
    let model = ModelSpec {
        name: "s".into(),
        layers: 4,
        hidden: 512,
        heads: 8,
        kv_heads: 4,
        head_dim: 64,
        intermediate: 1536,
        vocab: 8192,
        max_context: 1024,
        experts: 1,
        top_k: 1,
        tied_embeddings: false,
        weight_dtype: Dtype::Bf16,
        kv_dtype: Dtype::Bf16,
    };
    let mut e = CpuExecutor::new(&model, 1, false, Clock::Thread, 1);
    e.record_ops(true);
    let seqs = vec![SeqWork::decode(300)];
    e.prepare(&seqs).unwrap();
    let mut b = CpuBackend::new(1);
    b.clock = Clock::Thread;
    b.reps = 3;
    b.evict_bytes = std::env::args().nth(2).map_or(4, |x| x.parse().unwrap()) << 20;
    let mut cal = vec![];
    let mut inp = vec![];
    for _ in 0..12 {
        if interleave {
            e.run(&seqs).unwrap();
            inp.push(format!("{:.2}", e.op_times().iter().find(|x| x.0 == "lm_head").unwrap().1 as f64 * 1e-6));
        }
        cal.push(format!("{:.2}", b.measure(&Shape::Gemm { m: 1, k: 512, n: 8192 }).unwrap().ms));
    }
    println!("calibrated: {}", cal.join(" "));
    println!("in-pass:    {}", inp.join(" "));
}
