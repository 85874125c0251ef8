//! One serving instance: a vLLM-style continuous-batching scheduler over a paged KV cache.
//!
//! ```text
//!   arrival ─► waiting (FCFS; preempted requests go back to the front)
//!                 │  admitted while max_num_seqs, max_num_batched_tokens and free blocks allow
//!                 ▼
//!              running ── one iteration: every running request decodes one token, newly
//!                 │        admitted ones prefill their whole prompt and sample their first token
//!                 ▼
//!              finished (blocks freed)
//! ```
//! When a running request needs a new block and none is free, the most recently admitted
//! request is preempted: its blocks are freed and it is recomputed later (prompt and the tokens
//! generated so far prefilled again), as vLLM does by default.

pub mod kv;

use std::collections::VecDeque;
use std::sync::Arc;

use crate::cost::{BatchShape, CostModel, SeqWork};
use crate::metrics::{Recorder, RejectReason};
use crate::time::SimTime;
use crate::workload::Request;
use kv::BlockAllocator;

/// The scheduler limits of one instance.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceConfig {
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u64,
    pub block_tokens: u64,
    /// Blocks kept free when admitting while other requests run.
    pub watermark_blocks: u32,
    pub max_model_len: u64,
    pub kv_blocks: u32,
}

/// A request inside an instance.
#[derive(Debug)]
struct Seq {
    id: u64,
    prompt: u32,
    output: u32,
    /// Output tokens produced so far.
    generated: u32,
    /// KV block table.
    blocks: Vec<u32>,
    /// When this request's latest token was produced.
    last_token: SimTime,
    /// Whether this request's inter-token gaps enter the statistics.
    counted: bool,
    client: u32,
}

impl Seq {
    /// Tokens whose K and V the next step needs in the cache: the prompt and every generated
    /// token (the newest one is written by the step itself).
    fn context(&self) -> u64 {
        self.prompt as u64 + self.generated as u64
    }
}

/// A request that left the instance during an iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Departure {
    pub id: u64,
    pub client: u32,
}

/// Occupancy of an instance, for time-weighted statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gauges {
    pub waiting: u64,
    pub running: u64,
    pub kv_used: u64,
}

pub struct Instance {
    pub id: u32,
    cfg: InstanceConfig,
    cost: Arc<dyn CostModel>,
    kv: BlockAllocator,
    waiting: VecDeque<Seq>,
    /// Running requests in admission order; the last `n_prefill` prefill in the current
    /// iteration.
    running: Vec<Seq>,
    n_prefill: usize,
    /// When the in-flight iteration started, if one is in flight.
    iteration_start: Option<SimTime>,
    /// Iterations run so far.
    pub iterations: u64,
    /// Decode token-steps run so far (one per decoding request per iteration).
    pub decode_token_steps: u64,
    /// Whether the cost model wants each iteration's sequences, and the reused list of them.
    wants_seqs: bool,
    seqs: Vec<SeqWork>,
}

impl Instance {
    pub fn new(id: u32, cfg: InstanceConfig, cost: Arc<dyn CostModel>) -> Instance {
        let wants_seqs = cost.wants_seqs();
        Instance {
            id,
            kv: BlockAllocator::new(cfg.kv_blocks),
            cfg,
            cost,
            waiting: VecDeque::new(),
            running: Vec::new(),
            n_prefill: 0,
            iteration_start: None,
            iterations: 0,
            decode_token_steps: 0,
            wants_seqs,
            seqs: Vec::new(),
        }
    }

    pub fn config(&self) -> &InstanceConfig {
        &self.cfg
    }

    pub fn is_busy(&self) -> bool {
        self.iteration_start.is_some()
    }

    pub fn has_work(&self) -> bool {
        !self.waiting.is_empty() || !self.running.is_empty()
    }

    pub fn gauges(&self) -> Gauges {
        Gauges {
            waiting: self.waiting.len() as u64,
            running: self.running.len() as u64,
            kv_used: self.kv.used() as u64,
        }
    }

    pub fn kv_blocks_total(&self) -> u32 {
        self.kv.total()
    }

    fn blocks_for(&self, tokens: u64) -> u64 {
        tokens.div_ceil(self.cfg.block_tokens)
    }

    /// Whether this instance could ever serve `req`; the reason if not.
    pub fn check_fits(&self, req: &Request) -> Result<(), RejectReason> {
        let p = req.prompt_tokens as u64;
        let o = req.output_tokens as u64;
        if p + o > self.cfg.max_model_len {
            return Err(RejectReason::ContextTooLong);
        }
        if p > self.cfg.max_num_batched_tokens {
            return Err(RejectReason::PromptExceedsBatchTokens);
        }
        // The last output token is sampled, never written to the cache.
        if self.blocks_for(p + o - 1) > self.kv.total() as u64 {
            return Err(RejectReason::ExceedsKvCapacity);
        }
        Ok(())
    }

    /// Queues a request that passed [`Instance::check_fits`].
    pub fn enqueue(&mut self, req: &Request, counted: bool) {
        self.waiting.push_back(Seq {
            id: req.id,
            prompt: req.prompt_tokens,
            output: req.output_tokens,
            generated: 0,
            blocks: Vec::new(),
            last_token: req.arrival,
            counted,
            client: req.client,
        });
    }

    /// Forms the next batch and starts it at `now`; returns when it ends, or `None` when there
    /// is nothing to run.
    pub fn start_iteration(&mut self, now: SimTime, rec: &mut Recorder) -> Option<SimTime> {
        debug_assert!(!self.is_busy());
        let mut shape = BatchShape::default();
        let preempted = self.grow_running(rec);
        for s in &self.running {
            shape.add_decode(s.context());
        }
        if !preempted {
            self.admit(now, &mut shape, rec);
        }
        if shape.is_empty() {
            return None;
        }
        let dur = if self.wants_seqs {
            // Decodes first, then this iteration's prefills, as `running` holds them.
            let first_prefill = self.running.len() - self.n_prefill;
            self.seqs.clear();
            for (i, s) in self.running.iter().enumerate() {
                self.seqs.push(if i < first_prefill {
                    SeqWork::decode(s.context())
                } else {
                    SeqWork::prefill(s.context(), 0, true)
                });
            }
            self.cost.iteration_time_of(&shape, &self.seqs)
        } else {
            self.cost.iteration_time(&shape)
        };
        debug_assert!(dur > SimTime::ZERO, "an iteration must take time");
        self.iteration_start = Some(now);
        self.iterations += 1;
        self.decode_token_steps += shape.decode_seqs;
        rec.iteration(&shape, dur);
        self.debug_check();
        Some(now + dur)
    }

    /// Gives every running request the block its next token needs, preempting the most
    /// recently admitted requests when the pool runs dry. Returns whether any was preempted.
    fn grow_running(&mut self, rec: &mut Recorder) -> bool {
        let mut preempted = false;
        let mut i = 0;
        while i < self.running.len() {
            let need = self.blocks_for(self.running[i].context());
            while (self.running[i].blocks.len() as u64) < need {
                if let Some(b) = self.kv.alloc() {
                    self.running[i].blocks.push(b);
                    continue;
                }
                let mut victim = self.running.pop().expect("running is not empty");
                self.kv.release(&mut victim.blocks);
                rec.preempted(victim.id);
                self.waiting.push_front(victim);
                preempted = true;
                if i == self.running.len() {
                    // The request itself was the most recent: it waits for recomputation.
                    break;
                }
            }
            i += 1;
        }
        preempted
    }

    /// Admits waiting requests in FCFS order while the limits allow.
    fn admit(&mut self, now: SimTime, shape: &mut BatchShape, rec: &mut Recorder) {
        let mut budget = self.cfg.max_num_batched_tokens.saturating_sub(self.running.len() as u64);
        while let Some(front) = self.waiting.front() {
            if self.running.len() >= self.cfg.max_num_seqs as usize {
                break;
            }
            // A recomputation can exceed the token budget (prompt + generated tokens); it then
            // runs as the only prefill of its iteration rather than never.
            let tokens = front.context();
            let oversized = tokens > self.cfg.max_num_batched_tokens && self.n_prefill == 0;
            if tokens > budget && !oversized {
                break;
            }
            let need = self.blocks_for(tokens);
            // The watermark keeps room for running requests to grow; with none running it
            // would only stall the queue.
            let reserve = if self.running.is_empty() { 0 } else { self.cfg.watermark_blocks as u64 };
            if (self.kv.free() as u64) < need + reserve {
                break;
            }
            let mut seq = self.waiting.pop_front().expect("front exists");
            assert!(self.kv.alloc_n(need as u32, &mut seq.blocks));
            rec.scheduled(seq.id, now);
            shape.add_prefill(tokens, 0, true);
            budget = budget.saturating_sub(tokens);
            self.running.push(seq);
            self.n_prefill += 1;
        }
    }

    /// Ends the in-flight iteration at `now`: every request in the batch gains a token;
    /// finished ones leave (pushed to `departed`).
    pub fn finish_iteration(&mut self, now: SimTime, rec: &mut Recorder, departed: &mut Vec<Departure>) {
        let start = self.iteration_start.take().expect("an iteration is in flight");
        let first_prefill = self.running.len() - self.n_prefill;
        self.n_prefill = 0;
        let mut steady = 0u32;
        let kv = &mut self.kv;
        let mut idx = 0usize;
        self.running.retain_mut(|s| {
            let prefilled = idx >= first_prefill;
            idx += 1;
            s.generated += 1;
            if s.generated == 1 {
                rec.first_token(s.id, now);
            } else if s.counted {
                // A request that decoded in the previous iteration too had its last token at
                // this iteration's start: all of them share one gap, recorded once.
                if !prefilled && s.last_token == start {
                    steady += 1;
                } else {
                    rec.itl(now - s.last_token, 1);
                }
            }
            s.last_token = now;
            if s.generated >= s.output {
                kv.release(&mut s.blocks);
                rec.finished(s.id, now);
                departed.push(Departure { id: s.id, client: s.client });
                false
            } else {
                true
            }
        });
        if steady > 0 {
            rec.itl(now - start, steady);
        }
        self.debug_check();
    }

    /// KV conservation: blocks in use are exactly those in running block tables, and waiting
    /// requests hold none. O(running) per call, debug builds only.
    fn debug_check(&self) {
        #[cfg(debug_assertions)]
        {
            let owned: usize = self.running.iter().map(|s| s.blocks.len()).sum();
            assert_eq!(owned, self.kv.used() as usize, "KV blocks not conserved on instance {}", self.id);
            assert!(self.waiting.iter().all(|s| s.blocks.is_empty()), "a waiting request holds blocks");
            assert!(self.running.len() <= self.cfg.max_num_seqs as usize);
        }
    }

    /// Full ownership check of every block (O(blocks)); used by tests.
    pub fn check_kv_ownership(&self) {
        let tables: Vec<&[u32]> = self.running.iter().map(|s| s.blocks.as_slice()).collect();
        self.kv.check(&tables);
    }
}
