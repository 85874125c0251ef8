//! Emulation: the simulator's iterations timed by really executing each batch's forward pass.
//!
//! ```text
//!   the simulator's scheduler ─ iteration's sequences (SeqWork) ─► Emulator (a CostModel)
//!     Executor::prepare   buffers big enough (untimed)
//!     Executor::run       inputs (positions, KV slots, block tables), then per layer:
//!                         RMSNorm+residual · QKV GEMM · RoPE · KV write · attention (decodes:
//!                         paged split-K; prefill chunks: causal over cached + new) · O GEMM ·
//!                         RMSNorm+residual · gate/up GEMM · SiLU·mul · down GEMM;
//!                         then final norm · LM head · sampling of the sampling sequences
//!     time = median of `repeat` runs ─► the iteration's duration in simulated time
//! ```
//! The scheduler, router and KV cache are the simulator's own; only execution is real, and
//! measured durations advance simulated time, so queueing is exact. Two runs of the same
//! scenario differ by the timing noise of the machine: emulation is not deterministic (the
//! simulator with a cost model is).

pub mod cpu;
pub mod cuda;

use crate::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use servesim_sim::cost::{BatchShape, CostModel, SeqWork};
use servesim_sim::spec::ModelSpec;
use servesim_sim::SimTime;

/// Tokens per KV block in the executors' paged caches (vLLM's default).
pub const BLOCK_TOKENS: usize = 16;

/// Something that can execute a model's forward pass over a batch.
pub trait Executor: Send {
    /// What runs where, for reports.
    fn describe(&self) -> String;
    /// Makes every buffer big enough for `seqs` (allocation and first touch stay out of the
    /// timed run).
    fn prepare(&mut self, seqs: &[SeqWork]) -> Result<(), Error>;
    /// Executes one forward pass over `seqs` (decodes first, then prefill chunks) and returns
    /// its duration in nanoseconds on the executor's clock.
    fn run(&mut self, seqs: &[SeqWork]) -> Result<u64, Error>;
    /// Whether the following runs also time each op (for [`Executor::op_times`]); executors
    /// that cannot ignore it.
    fn record_ops(&mut self, _on: bool) {}
    /// The last run's time per op, ns, and its whole time as `pass`, when recording (empty
    /// otherwise).
    fn op_times(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// An executor shared between the emulator and a calibration that times ops in its passes.
pub type SharedExecutor = Arc<Mutex<Box<dyn Executor>>>;

/// One emulated iteration.
#[derive(Clone, Debug, PartialEq)]
pub struct IterationLog {
    pub shape: BatchShape,
    /// The duration used (median of the runs), ns.
    pub ns: u64,
    /// The last execution's time per op and its whole pass, ns, when the executor records
    /// them ([`Emulator::record_ops`]); empty otherwise.
    pub ops: Vec<(&'static str, u64)>,
}

/// Called after each measurement (untimed) with the executions' total time so far, ns.
pub type Hook = Box<dyn FnMut(u64) + Send>;

/// A [`CostModel`] that times real executions: each iteration runs `repeat` times and the
/// median duration is the iteration's time.
pub struct Emulator {
    exec: SharedExecutor,
    /// The op times of the last measured batch's last execution (read before the hook runs,
    /// which may execute other batches on the same executor).
    last_ops: Mutex<Vec<(&'static str, u64)>>,
    repeat: u32,
    log: Mutex<Vec<IterationLog>>,
    error: Mutex<Option<Error>>,
    executed_ns: AtomicU64,
    hook: Mutex<Option<Hook>>,
}

impl Emulator {
    pub fn new(exec: Box<dyn Executor>, repeat: u32) -> Emulator {
        Emulator {
            exec: Arc::new(Mutex::new(exec)),
            last_ops: Mutex::new(Vec::new()),
            repeat: repeat.max(1),
            log: Mutex::new(Vec::new()),
            error: Mutex::new(None),
            executed_ns: AtomicU64::new(0),
            hook: Mutex::new(None),
        }
    }

    /// Installs (or removes) a function run after each measurement, outside the timed runs:
    /// `servesim validate` calibrates a few points there, so that the calibration sees the
    /// machine in the same states as the emulation.
    pub fn set_hook(&self, hook: Option<Hook>) {
        *self.hook.lock().expect("hook lock") = hook;
    }

    /// Total time of every timed execution so far, ns.
    pub fn executed_ns(&self) -> u64 {
        self.executed_ns.load(Ordering::Relaxed)
    }

    /// Asks the executor to time each op of the following runs (see [`Executor::record_ops`]).
    pub fn record_ops(&self, on: bool) {
        self.exec.lock().expect("executor lock").record_ops(on);
    }

    /// The last measured batch's time per op, ns (its last execution; empty when the executor
    /// does not record them).
    pub fn op_times(&self) -> Vec<(&'static str, u64)> {
        self.last_ops.lock().expect("ops lock").clone()
    }

    /// The executor itself, for calibrating on it (ops timed in its passes: the same weights
    /// and buffers as the emulated iterations) between the emulated iterations.
    pub fn executor(&self) -> SharedExecutor {
        self.exec.clone()
    }

    pub fn describe(&self) -> String {
        self.exec.lock().expect("executor lock").describe()
    }

    /// The median duration (ns) of `repeat` executions of `seqs`.
    pub fn measure(&self, seqs: &[SeqWork]) -> Result<u64, Error> {
        let mut v = Vec::with_capacity(self.repeat as usize);
        {
            let mut exec = self.exec.lock().expect("executor lock");
            exec.prepare(seqs)?;
            for _ in 0..self.repeat {
                v.push(exec.run(seqs)?);
            }
            *self.last_ops.lock().expect("ops lock") = exec.op_times();
        }
        let total = self.executed_ns.fetch_add(v.iter().sum(), Ordering::Relaxed) + v.iter().sum::<u64>();
        if let Some(h) = self.hook.lock().expect("hook lock").as_mut() {
            h(total);
        }
        v.sort_unstable();
        // The lower middle for an even count: interference only ever adds time.
        Ok(v[(v.len() - 1) / 2])
    }

    /// Runs a few batches (the largest prefill and decode batches the limits allow) so that
    /// buffers, page tables and caches are settled before anything is timed.
    pub fn warm_up(&self, max_tokens: u64, max_seqs: u64, max_context: u64) -> Result<(), Error> {
        let prefill = [SeqWork::prefill(max_tokens.max(1), 0, true)];
        let decode: Vec<SeqWork> = (0..max_seqs.max(1)).map(|_| SeqWork::decode(max_context.max(1))).collect();
        for seqs in [&prefill[..], &decode[..]] {
            let mut exec = self.exec.lock().expect("executor lock");
            exec.prepare(seqs)?;
            exec.run(seqs)?;
        }
        Ok(())
    }

    /// Every iteration emulated so far, in order.
    pub fn take_log(&self) -> Vec<IterationLog> {
        std::mem::take(&mut *self.log.lock().expect("log lock"))
    }

    /// The first execution error met during a run (the run's times are then meaningless).
    pub fn error(&self) -> Option<Error> {
        self.error.lock().expect("error lock").clone()
    }
}

/// Sequences matching a batch's aggregates when no per-sequence view is given: equal decode
/// contexts and equal prefill chunks (the remainders on the first ones).
pub fn seqs_of(b: &BatchShape) -> Vec<SeqWork> {
    let mut out = Vec::with_capacity(b.seqs() as usize);
    let split = |total: u64, n: u64, i: u64| total / n + u64::from(i < total % n);
    for i in 0..b.decode_seqs {
        out.push(SeqWork::decode(split(b.decode_context_tokens, b.decode_seqs, i).max(1)));
    }
    for i in 0..b.prefill_seqs {
        let new = split(b.prefill_tokens, b.prefill_seqs, i).max(1);
        let cached = split(b.prefill_cached_tokens, b.prefill_seqs, i);
        // Sampling chunks first: which ones sample does not change the cost.
        let samples = i < b.sampled_seqs.saturating_sub(b.decode_seqs);
        out.push(SeqWork::prefill(new, cached, samples));
    }
    out
}

impl CostModel for Emulator {
    fn iteration_time(&self, batch: &BatchShape) -> SimTime {
        self.iteration_time_of(batch, &seqs_of(batch))
    }

    fn wants_seqs(&self) -> bool {
        true
    }

    fn iteration_time_of(&self, batch: &BatchShape, seqs: &[SeqWork]) -> SimTime {
        let ns = match self.measure(seqs) {
            Ok(ns) => ns,
            Err(e) => {
                self.error.lock().expect("error lock").get_or_insert(e);
                1
            }
        };
        let ns = ns.max(1);
        let ops = self.op_times();
        self.log.lock().expect("log lock").push(IterationLog { shape: *batch, ns, ops });
        SimTime(ns)
    }
}

/// Per-GPU dimensions of a model at TP `tp` (heads and FFN width divided, as the calibration
/// plan shards them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    pub layers: usize,
    pub(crate) hidden: usize,
    pub(crate) q_heads: usize,
    pub(crate) kv_heads: usize,
    pub(crate) head_dim: usize,
    pub(crate) intermediate: usize,
    pub(crate) vocab: usize,
    /// Columns of the LM head on this GPU (vocab / tp).
    pub(crate) vocab_shard: usize,
}

impl Dims {
    pub fn of(m: &ModelSpec, tp: u64) -> Dims {
        Dims {
            layers: m.layers as usize,
            hidden: m.hidden as usize,
            q_heads: (m.heads / tp) as usize,
            kv_heads: m.kv_heads.div_ceil(tp) as usize,
            head_dim: m.head_dim as usize,
            intermediate: (m.intermediate / tp) as usize,
            vocab: m.vocab as usize,
            vocab_shard: (m.vocab / tp) as usize,
        }
    }

    /// Width of the fused QKV projection's output.
    pub fn qkv(&self) -> usize {
        (self.q_heads + 2 * self.kv_heads) * self.head_dim
    }

    /// Weight elements of one layer.
    pub fn layer_weights(&self) -> usize {
        self.hidden * self.qkv() + self.q_heads * self.head_dim * self.hidden + 3 * self.hidden * self.intermediate
    }
}

/// The inputs of one forward pass that an engine prepares on the host: per-token positions and
/// KV slots, block tables and context lengths of the decode and prefill groups, and which
/// token rows sample.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    pub(crate) tokens: usize,
    pub(crate) decodes: usize,
    pub(crate) positions: Vec<i32>,
    pub(crate) slots: Vec<i64>,
    pub(crate) decode_tables: Vec<i32>,
    pub(crate) decode_max_blocks: usize,
    pub(crate) decode_ctx: Vec<i32>,
    pub(crate) prefill_tables: Vec<i32>,
    pub(crate) prefill_max_blocks: usize,
    pub(crate) prefill_ctx: Vec<i32>,
    /// Cumulative query rows of the prefill chunks, from 0 (rows after the decodes).
    pub(crate) prefill_cu: Vec<i32>,
    pub(crate) prefill_max_new: usize,
    /// Token rows whose hidden state goes through the LM head.
    pub(crate) sample_rows: Vec<usize>,
    /// KV blocks the batch's tables use.
    pub(crate) blocks: usize,
}

/// Blocks and tokens a batch needs, for sizing buffers.
pub fn needs(seqs: &[SeqWork]) -> (usize, usize) {
    let blocks = seqs.iter().map(|s| (s.context_tokens as usize).div_ceil(BLOCK_TOKENS)).sum();
    let tokens = seqs.iter().map(|s| s.new_tokens as usize).sum();
    (blocks, tokens)
}

impl Inputs {
    /// Fills the inputs for `seqs` (decodes first). Blocks are handed out round-robin over the
    /// sequences (block b of every sequence, then b + 1, ...), so a sequence's blocks are
    /// scattered through the cache as in a long-running server.
    pub fn build(&mut self, seqs: &[SeqWork]) {
        let decodes = seqs.iter().take_while(|s| !s.prefill).count();
        debug_assert!(seqs[decodes..].iter().all(|s| s.prefill), "decodes must come first");
        let nblocks: Vec<usize> = seqs.iter().map(|s| (s.context_tokens as usize).div_ceil(BLOCK_TOKENS)).collect();
        let max_blocks = nblocks.iter().copied().max().unwrap_or(0);
        let mut table = vec![0i32; seqs.len() * max_blocks.max(1)];
        let mut next = 0i32;
        for b in 0..max_blocks {
            for (s, &n) in nblocks.iter().enumerate() {
                if b < n {
                    table[s * max_blocks + b] = next;
                    next += 1;
                }
            }
        }
        self.blocks = next as usize;
        self.decodes = decodes;
        self.tokens = 0;
        self.positions.clear();
        self.slots.clear();
        self.sample_rows.clear();
        let row_table = |s: usize| &table[s * max_blocks..(s + 1) * max_blocks];
        for (s, w) in seqs.iter().enumerate() {
            let cached = (w.context_tokens - w.new_tokens) as usize;
            for p in cached..w.context_tokens as usize {
                self.positions.push(p as i32);
                let blk = row_table(s)[p / BLOCK_TOKENS] as i64;
                self.slots.push(blk * BLOCK_TOKENS as i64 + (p % BLOCK_TOKENS) as i64);
            }
            self.tokens += w.new_tokens as usize;
            if w.samples {
                self.sample_rows.push(self.tokens - 1);
            }
        }
        let group = |range: std::ops::Range<usize>, tables: &mut Vec<i32>, ctx: &mut Vec<i32>| -> usize {
            let mb = range.clone().map(|s| nblocks[s]).max().unwrap_or(0).max(1);
            tables.clear();
            ctx.clear();
            for s in range {
                let mut row = row_table(s)[..nblocks[s]].to_vec();
                row.resize(mb, 0);
                tables.extend_from_slice(&row);
                ctx.push(seqs[s].context_tokens as i32);
            }
            mb
        };
        self.decode_max_blocks = group(0..decodes, &mut self.decode_tables, &mut self.decode_ctx);
        self.prefill_max_blocks = group(decodes..seqs.len(), &mut self.prefill_tables, &mut self.prefill_ctx);
        self.prefill_cu.clear();
        self.prefill_cu.push(0);
        self.prefill_max_new = 0;
        for w in &seqs[decodes..] {
            let last = *self.prefill_cu.last().expect("starts with 0");
            self.prefill_cu.push(last + w.new_tokens as i32);
            self.prefill_max_new = self.prefill_max_new.max(w.new_tokens as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_by_hand() {
        // Two decodes (contexts 20 and 3) and a chunk of 4 new tokens over 14 cached.
        let seqs = [SeqWork::decode(20), SeqWork::decode(3), SeqWork::prefill(4, 14, true)];
        let mut i = Inputs::default();
        i.build(&seqs);
        assert_eq!((i.tokens, i.decodes, i.blocks), (6, 2, 2 + 1 + 2));
        // Blocks round-robin: seq0 [0, 3], seq1 [1], seq2 [2, 4].
        assert_eq!(i.decode_tables, vec![0, 3, 1, 0]);
        assert_eq!(i.prefill_tables, vec![2, 4]);
        assert_eq!(i.positions, vec![19, 2, 14, 15, 16, 17]);
        // Position 19 of seq0 is in its block 1 (= 3), offset 3; the chunk's 14..18 are in
        // block 0 (= 2) then block 1 (= 4).
        assert_eq!(i.slots, vec![3 * 16 + 3, 16 + 2, 2 * 16 + 14, 2 * 16 + 15, 4 * 16, 4 * 16 + 1]);
        assert_eq!((i.decode_ctx.clone(), i.prefill_ctx.clone()), (vec![20, 3], vec![18]));
        assert_eq!((i.prefill_cu.clone(), i.prefill_max_new), (vec![0, 4], 4));
        assert_eq!(i.sample_rows, vec![0, 1, 5]);
        assert_eq!(needs(&seqs), (5, 6));
    }

    #[test]
    fn seqs_of_reproduces_the_aggregates() {
        let seqs =
            [SeqWork::decode(20), SeqWork::decode(3), SeqWork::prefill(5, 0, true), SeqWork::prefill(4, 0, false)];
        let b = SeqWork::shape_of(&seqs);
        let s = seqs_of(&b);
        let again = SeqWork::shape_of(&s);
        assert_eq!(
            (again.decode_seqs, again.decode_context_tokens, again.prefill_tokens, again.sampled_seqs),
            (2, 23, 9, 3)
        );
        assert_eq!(again.prefill_seqs, 2);
    }
}
