//! The `in-pass` timing: each op timed inside forward passes of an executor, not on its own.
//!
//! For a plan point it runs the batch that executes that op at the point's shape — one prefill
//! chunk of n tokens for the per-token ops (norms, GEMMs, RoPE, KV write, SiLU·mul), b decodes
//! for the LM head and sampling, the point's decodes or prefill chunk for attention — and reads
//! the op's own time out of the executor's per-op record (per layer for the layer ops). The ops
//! then run with the caches, buffers and memory traffic of a real forward pass around them,
//! which on a CPU changes some ops' times by tens of percent against the same op timed alone
//! (docs/fidelity.md). The passes of a batch serve every op it covers: a token count's nine
//! per-token ops share one set of passes.

use crate::Error;
use std::collections::HashMap;

use servesim_sim::cost::SeqWork;

use super::{median, Backend, Device, Timing};
use crate::emulate::SharedExecutor;
use crate::plan::{Point, Shape};

pub struct InPassBackend {
    exec: SharedExecutor,
    device: Device,
    layers: u64,
    /// Passes per batch.
    pub reps: u32,
    /// The op times of the passes of each batch run since the last [`Backend::forget`].
    passes: HashMap<Vec<SeqWork>, Vec<OpTimes>>,
}

/// One pass's time per op, ns, as the executor records it.
type OpTimes = Vec<(&'static str, u64)>;

/// Context of the decodes that run the LM head and sampling (their time does not depend on it).
const SAMPLING_CONTEXT: u64 = 64;

impl InPassBackend {
    /// Times ops in the passes of `exec` (from now on it records per-op times,
    /// [`Executor::record_ops`]); `device` describes it.
    pub fn new(exec: SharedExecutor, device: Device, layers: u64) -> InPassBackend {
        exec.lock().expect("executor lock").record_ops(true);
        InPassBackend { exec, device, layers: layers.max(1), reps: 1, passes: HashMap::new() }
    }

    /// The batch that runs `p`'s op at its shape, and whether the op runs once per layer.
    fn batch(p: &Point) -> (Vec<SeqWork>, bool) {
        let chunk = |n: u64| vec![SeqWork::prefill(n.max(1), 0, false)];
        let decodes = |b: u64| (0..b.max(1)).map(|_| SeqWork::decode(SAMPLING_CONTEXT)).collect();
        match (&p.shape, p.op) {
            (Shape::Gemm { m, .. }, "lm_head") => (decodes(*m), false),
            (Shape::Sample { batch, .. }, _) => (decodes(*batch), false),
            (Shape::Gemm { m: n, .. }, _)
            | (Shape::RmsNorm { tokens: n, .. }, _)
            | (Shape::Rope { tokens: n, .. }, _)
            | (Shape::KvWrite { tokens: n, .. }, _)
            | (Shape::SiluMul { tokens: n, .. }, _) => (chunk(*n), true),
            (Shape::Decode { contexts, .. }, _) => {
                (contexts.iter().map(|&c| SeqWork::decode(c.max(1))).collect(), true)
            }
            (Shape::Prefill { chunk, cached, .. }, _) => {
                (vec![SeqWork::prefill((*chunk).max(1), *cached, false)], true)
            }
        }
    }

    /// The name the executor records `op` under.
    fn recorded(op: &str) -> &str {
        match op {
            "attn_decode_mixed" => "attn_decode",
            op => op,
        }
    }
}

impl Backend for InPassBackend {
    fn device(&self) -> Device {
        self.device.clone()
    }

    fn measure(&mut self, _: &Shape) -> Result<Timing, Error> {
        Err(Error::unsupported("in-pass timing needs the op, not only its shape (measure_point)"))
    }

    fn measure_point(&mut self, p: &Point) -> Result<Timing, Error> {
        let (seqs, per_layer) = Self::batch(p);
        if !self.passes.contains_key(&seqs) {
            let mut exec = self.exec.lock().expect("executor lock");
            exec.prepare(&seqs)?;
            let mut runs = Vec::with_capacity(self.reps as usize);
            for _ in 0..self.reps.max(1) {
                exec.run(&seqs)?;
                let ops = exec.op_times();
                if ops.is_empty() {
                    return Err(Error::unsupported("this executor does not time its ops"));
                }
                runs.push(ops);
            }
            self.passes.insert(seqs.clone(), runs);
        }
        let name = Self::recorded(p.op);
        let per = if per_layer { self.layers as f64 } else { 1.0 };
        let times: Vec<f64> = self.passes[&seqs]
            .iter()
            .filter_map(|ops| ops.iter().find(|(n, _)| *n == name))
            .map(|&(_, ns)| ns as f64 * 1e-6 / per)
            .collect();
        if times.is_empty() {
            return Err(Error::unsupported(format!("the executor records no op named {name}")));
        }
        Ok(Timing { ms: median(times.clone()), samples: times.len() as u32 })
    }

    fn times_in_context(&self) -> bool {
        true
    }

    fn forget(&mut self) {
        self.passes.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::emulate::Executor;

    /// An executor whose passes take fixed op times, and that keeps the batches it ran.
    struct Fixed {
        ran: Arc<Mutex<Vec<Vec<SeqWork>>>>,
        recording: bool,
    }

    impl Executor for Fixed {
        fn describe(&self) -> String {
            "fixed".into()
        }
        fn prepare(&mut self, _: &[SeqWork]) -> Result<(), Error> {
            Ok(())
        }
        fn run(&mut self, seqs: &[SeqWork]) -> Result<u64, Error> {
            self.ran.lock().unwrap().push(seqs.to_vec());
            Ok(10_000)
        }
        fn record_ops(&mut self, on: bool) {
            self.recording = on;
        }
        fn op_times(&self) -> Vec<(&'static str, u64)> {
            if !self.recording {
                return Vec::new();
            }
            let n = self.ran.lock().unwrap().len() as u64;
            // The n-th pass's up projection takes n µs over the four layers.
            vec![("mlp_up_proj", 4000 * n), ("attn_pre_proj", 2000), ("lm_head", 3000), ("pass", 10_000)]
        }
    }

    fn point(op: &'static str, shape: Shape) -> Point {
        Point { op, tp: 1, x: vec![1.0], shape, level: 0 }
    }

    #[test]
    fn ops_are_read_from_the_passes_of_their_batch() {
        let ran = Arc::new(Mutex::new(Vec::new()));
        let exec: Box<dyn Executor> = Box::new(Fixed { ran: ran.clone(), recording: false });
        let mut b = InPassBackend::new(Arc::new(Mutex::new(exec)), Device::default(), 4);
        b.reps = 3;
        let gemm = |m| Shape::Gemm { m, k: 8, n: 8 };
        // Three passes of one 5-token chunk: the up projection's per-layer times 1, 2, 3 µs.
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        let t = b.measure_point(&point("mlp_up_proj", gemm(5))).unwrap();
        assert!(close(t.ms, 0.002) && t.samples == 3, "{t:?}");
        assert_eq!(*ran.lock().unwrap(), vec![vec![SeqWork::prefill(5, 0, false)]; 3]);
        // The QKV projection at 5 tokens reads the same passes.
        assert!(close(b.measure_point(&point("attn_pre_proj", gemm(5))).unwrap().ms, 0.0005));
        assert_eq!(ran.lock().unwrap().len(), 3);
        // The LM head at 2 rows: two decodes, the whole op (not per layer).
        assert!(close(b.measure_point(&point("lm_head", gemm(2))).unwrap().ms, 0.003));
        assert_eq!(ran.lock().unwrap()[3], vec![SeqWork::decode(SAMPLING_CONTEXT); 2]);
        // Forgotten: the chunk runs again (passes 7 to 9: 7, 8, 9 µs per layer).
        b.forget();
        assert!(close(b.measure_point(&point("mlp_up_proj", gemm(5))).unwrap().ms, 0.008));
        assert_eq!(ran.lock().unwrap().len(), 9);
        // An op the executor does not record is an error, not a zero.
        let e = b.measure_point(&point("attn_rope", Shape::Rope { tokens: 5, q_heads: 1, kv_heads: 1, head_dim: 8 }));
        assert!(e.unwrap_err().to_string().contains("attn_rope"));
        assert!(b.measure(&gemm(5)).is_err());
    }
}
