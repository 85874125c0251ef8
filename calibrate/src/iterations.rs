//! The batch space of iteration-level validation: batches of decodes, prefill chunks and both,
//! drawn with a seed within a scheduler's limits, to compare a cost model's predicted iteration
//! time with a measured execution.
//!
//! ```text
//!   decode   B decodes (B log-uniform in 1..max_seqs), contexts uniform in 16..max_context
//!   prefill  1–4 chunks, total tokens log-uniform in 16..max_tokens, half over a cached prefix
//!   mixed    B decodes + 1–2 chunks within the token budget (what chunked prefill schedules)
//! ```

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use servesim_sim::cost::SeqWork;

/// Limits of the space: the scheduler's `max_num_seqs`, `max_num_batched_tokens` and the
/// longest context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Space {
    pub max_seqs: u64,
    pub max_tokens: u64,
    pub max_context: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Decode,
    Prefill,
    Mixed,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Decode, Kind::Prefill, Kind::Mixed];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Decode => "decode",
            Kind::Prefill => "prefill",
            Kind::Mixed => "mixed",
        }
    }
}

/// One batch: its kind and its sequences, decodes first.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    pub kind: Kind,
    pub seqs: Vec<SeqWork>,
}

fn log_uniform(rng: &mut ChaCha8Rng, lo: u64, hi: u64) -> u64 {
    let (lo, hi) = (lo.max(1), hi.max(lo.max(1)));
    let x = rng.random_range((lo as f64).ln()..=(hi as f64).ln()).exp().round() as u64;
    x.clamp(lo, hi)
}

/// Splits `total` tokens into `k` chunks of at least one token each, at random.
fn split(rng: &mut ChaCha8Rng, total: u64, k: u64) -> Vec<u64> {
    let k = k.min(total).max(1);
    let mut cuts: Vec<u64> = (0..k - 1).map(|_| rng.random_range(1..total)).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::new();
    let mut prev = 0;
    for c in cuts.into_iter().chain(std::iter::once(total)) {
        out.push(c - prev);
        prev = c;
    }
    out
}

/// Prefill chunks of `total` tokens (in at most `k` pieces), each over a cached prefix half
/// of the time; a chunk over a prefix samples half of the time (a middle chunk does not).
fn chunks(rng: &mut ChaCha8Rng, total: u64, k: u64, max_context: u64) -> Vec<SeqWork> {
    split(rng, total, k)
        .into_iter()
        .map(|new| {
            let room = max_context.saturating_sub(new);
            if room > 0 && rng.random_bool(0.5) {
                let cached = rng.random_range(1..=room);
                SeqWork::prefill(new, cached, rng.random_bool(0.5))
            } else {
                SeqWork::prefill(new, 0, true)
            }
        })
        .collect()
}

/// `n` batches cycling through the kinds, drawn from `seed`.
pub fn batches(space: Space, n: usize, seed: u64) -> Vec<Batch> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let max_seqs = space.max_seqs.max(1);
    let max_tokens = space.max_tokens.max(16);
    let max_context = space.max_context.max(32);
    let min_tokens = 16.min(max_tokens);
    (0..n)
        .map(|i| {
            let kind = Kind::ALL[i % 3];
            let decode = |rng: &mut ChaCha8Rng, b: u64| -> Vec<SeqWork> {
                (0..b).map(|_| SeqWork::decode(rng.random_range(16.min(max_context)..=max_context))).collect()
            };
            let seqs = match kind {
                Kind::Decode => {
                    let b = log_uniform(&mut rng, 1, max_seqs);
                    decode(&mut rng, b)
                }
                Kind::Prefill => {
                    let total = log_uniform(&mut rng, min_tokens, max_tokens.min(max_context));
                    let k = rng.random_range(1..=4u64.min(max_seqs));
                    chunks(&mut rng, total, k, max_context)
                }
                Kind::Mixed => {
                    let b = log_uniform(&mut rng, 1, max_seqs.saturating_sub(1).max(1));
                    let budget = max_tokens.saturating_sub(b).min(max_context).max(1);
                    let total = log_uniform(&mut rng, min_tokens.min(budget), budget);
                    let k = rng.random_range(1..=2u64.min(max_seqs.saturating_sub(b).max(1)));
                    let mut s = decode(&mut rng, b);
                    s.extend(chunks(&mut rng, total, k, max_context));
                    s
                }
            };
            Batch { kind, seqs }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_stay_within_the_limits_and_repeat_with_the_seed() {
        let space = Space { max_seqs: 16, max_tokens: 512, max_context: 1024 };
        let b = batches(space, 60, 7);
        assert_eq!(b, batches(space, 60, 7));
        assert_ne!(b, batches(space, 60, 8));
        for x in &b {
            let decodes = x.seqs.iter().take_while(|s| !s.prefill).count();
            assert!(x.seqs[decodes..].iter().all(|s| s.prefill), "decodes first");
            assert!(x.seqs.len() as u64 <= 16 + 2);
            let tokens: u64 = x.seqs.iter().map(|s| s.new_tokens).sum();
            assert!(tokens <= 512, "{tokens}");
            assert!(x.seqs.iter().all(|s| s.context_tokens <= 1024 && s.new_tokens >= 1));
            match x.kind {
                Kind::Decode => assert_eq!(decodes, x.seqs.len()),
                Kind::Prefill => assert_eq!(decodes, 0),
                Kind::Mixed => assert!(decodes >= 1 && decodes < x.seqs.len()),
            }
        }
        // The space is covered: single decodes and full batches, short and long prefills.
        assert!(b.iter().any(|x| x.kind == Kind::Decode && x.seqs.len() == 1));
        assert!(b.iter().any(|x| x.kind == Kind::Decode && x.seqs.len() >= 12));
        assert!(b.iter().any(|x| x.seqs.iter().any(|s| s.prefill && s.context_tokens > s.new_tokens)));
        let totals: Vec<u64> =
            b.iter().filter(|x| x.kind == Kind::Prefill).map(|x| x.seqs.iter().map(|s| s.new_tokens).sum()).collect();
        assert!(totals.iter().any(|&t| t < 64) && totals.iter().any(|&t| t > 256), "{totals:?}");
    }
}
