use servesim_calibrate::clock::Clock;
use servesim_calibrate::emulate::cpu::CpuExecutor;
use servesim_calibrate::emulate::Executor;
use servesim_sim::cost::SeqWork;
use servesim_sim::spec::{Dtype, ModelSpec};

fn med(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
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
    let mut a = CpuExecutor::new(&model, 1, false, Clock::Thread, 1);
    let mut b = CpuExecutor::new(&model, 1, false, Clock::Thread, 1);
    a.record_ops(true);
    b.record_ops(true);
    let long: Vec<SeqWork> = vec![SeqWork::decode(500), SeqWork::decode(700)];
    let short: Vec<SeqWork> = vec![SeqWork::decode(64), SeqWork::decode(64)];
    // Warm both on their largest batch.
    let big: Vec<SeqWork> = (0..16).map(|_| SeqWork::decode(1024)).collect();
    for e in [&mut a, &mut b] {
        e.prepare(&big).unwrap();
        e.run(&big).unwrap();
    }
    let lm = |e: &CpuExecutor| e.op_times().iter().find(|x| x.0 == "lm_head").unwrap().1 as f64 * 1e-6;
    let (mut al, mut bs, mut bl, mut as_) = (vec![], vec![], vec![], vec![]);
    for _ in 0..25 {
        a.prepare(&long).unwrap();
        a.run(&long).unwrap();
        al.push(lm(&a));
        b.prepare(&short).unwrap();
        b.run(&short).unwrap();
        bs.push(lm(&b));
        b.prepare(&long).unwrap();
        b.run(&long).unwrap();
        bl.push(lm(&b));
        a.prepare(&short).unwrap();
        a.run(&short).unwrap();
        as_.push(lm(&a));
    }
    println!(
        "lm_head median ms: A long {:.3}  A short {:.3}  B long {:.3}  B short {:.3}",
        med(al),
        med(as_),
        med(bl),
        med(bs)
    );
}
