//! The iteration being formed, as the cost model will see it: kept up to date as requests are
//! given steps and lose them (preempted, or trimmed by the batching policy), so forming a batch
//! needs no extra pass over the running requests.

use super::seq::Seq;
use crate::cost::BatchShape;

#[derive(Clone, Debug, Default)]
pub(super) struct Batch {
    pub(crate) shape: BatchShape,
    /// Per draft depth j (from 1): requests drafting at least j tokens, and the sum of the
    /// contexts their j-th draft pass attends to.
    pub(crate) drafts: Vec<(u64, u64)>,
}

impl Batch {
    pub(super) fn clear(&mut self) {
        self.shape = BatchShape::default();
        self.drafts.clear();
    }

    /// Adds `s`'s step (set, not yet run).
    pub(super) fn add(&mut self, s: &Seq) {
        self.apply(s, 1);
    }

    /// Takes back `s`'s step.
    pub(super) fn remove(&mut self, s: &Seq) {
        self.apply(s, -1);
    }

    fn apply(&mut self, s: &Seq, sign: i64) {
        if s.step == 0 {
            return;
        }
        let b = &mut self.shape;
        let add = |x: &mut u64, v: u64| {
            if sign > 0 {
                *x += v
            } else {
                *x -= v
            }
        };
        if s.draft > 0 {
            // Verification: the newest token and the drafts over the computed context, with
            // logits for every position (`BatchShape::add_verify`).
            add(&mut b.decode_seqs, s.step);
            add(&mut b.decode_context_tokens, s.computed + s.step);
            add(&mut b.sampled_seqs, s.step);
            if self.drafts.len() < s.draft as usize {
                self.drafts.resize(s.draft as usize, (0, 0));
            }
            for (j, d) in self.drafts.iter_mut().enumerate().take(s.draft as usize) {
                add(&mut d.0, 1);
                add(&mut d.1, s.context() + j as u64);
            }
        } else if s.is_decode() {
            add(&mut b.decode_seqs, 1);
            add(&mut b.decode_context_tokens, s.context());
            add(&mut b.sampled_seqs, 1);
        } else {
            prefill(b, s.step, s.computed, s.step == s.pending(), sign);
        }
    }
}

fn prefill(b: &mut BatchShape, new: u64, cached: u64, samples: bool, sign: i64) {
    if sign > 0 {
        b.add_prefill(new, cached, samples);
    } else {
        b.prefill_seqs -= 1;
        b.prefill_tokens -= new;
        b.prefill_cached_tokens -= cached;
        let n = new as f64;
        b.prefill_attn_pairs -= n * cached as f64 + n * (n + 1.0) / 2.0;
        if samples {
            b.sampled_seqs -= 1;
        }
    }
}
