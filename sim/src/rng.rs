//! Seeded, portable randomness with one independent substream per component.
//!
//! A run's seed defines every random choice. Each component (arrivals, prompt lengths, output
//! lengths, router, ...) draws from its own ChaCha8 stream, so adding draws to one component
//! never shifts the values another sees, and results are identical on every platform.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Stable identifiers of the random substreams. Never renumber: that would change every
/// seeded result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub(crate) enum Stream {
    Arrivals = 1,
    PromptTokens = 2,
    OutputTokens = 3,
    Router = 4,
    ThinkTime = 5,
    Prefix = 6,
    Sampling = 7,
    Failures = 8,
    Speculation = 9,
    /// Priority class of each request.
    Class = 10,
    /// Noise of the output-length predictor (shortest-predicted-job-first).
    Predictor = 11,
}

/// Returns the generator for `stream` under `seed`. `index` separates several instances of the
/// same component (for example one per instance group); use 0 when there is one.
pub(crate) fn substream(seed: u64, stream: Stream, index: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream((stream as u64) << 32 | (index & 0xffff_ffff));
    rng
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngExt;
    const GOLDEN: [u64; 2] = [10517904778964690192, 5246156849874060613];

    #[test]
    fn streams_are_independent_and_reproducible() {
        let a: Vec<u64> = (0..4).map(|_| 0).scan(substream(7, Stream::Arrivals, 0), |r, _| Some(r.random())).collect();
        let b: Vec<u64> = (0..4).scan(substream(7, Stream::Arrivals, 0), |r, _| Some(r.random())).collect();
        let c: Vec<u64> = (0..4).scan(substream(7, Stream::PromptTokens, 0), |r, _| Some(r.random())).collect();
        let d: Vec<u64> = (0..4).scan(substream(8, Stream::Arrivals, 0), |r, _| Some(r.random())).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
    }

    #[test]
    fn generator_is_pinned() {
        // Golden values: a change of generator or seeding scheme would silently change every
        // seeded result, so it must show up here first.
        let mut r = substream(42, Stream::Arrivals, 0);
        let v: [u64; 2] = [r.random(), r.random()];
        assert_eq!(v, GOLDEN);
    }
}
