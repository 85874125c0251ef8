//! Automatic prefix caching, block-granular as in vLLM: each full KV block of a request is
//! named by a chained hash of its content and everything before it, so equal names mean equal
//! KV. A new request reuses the cached blocks of its longest cached prefix and prefills only
//! the rest.
//!
//! ```text
//!   Request.content ─► block hashes h₀, h₁, … (chained; blocks of generated tokens included)
//!   admission: h₀ h₁ h₂ on GPU ─ hit (shared, refs+1) · h₃ in the CPU tier ─ loaded over PCIe ·
//!              h₄ nowhere ─ stop: tokens from block 4 on are prefilled
//!   every computed full block is registered; released blocks stay cached, evictable in LRU
//!   order (optionally expiring after ttl_s); evicted blocks go to the CPU tier if there is one
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::kv::{BlockAllocator, IdMap};
use crate::config::{check, ConfigError};
use crate::workload::prefix::{mix, output_hash};
use crate::workload::Segment;

/// `[scheduler.prefix_cache]`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PrefixCacheSection {
    /// Turns automatic prefix caching on. Default false.
    pub enabled: bool,
    /// Cached prefixes shorter than this many tokens are recomputed rather than reused.
    /// Default 0.
    pub(crate) min_prefix_tokens: u64,
    /// Cached blocks unused for this many seconds are dropped. Default: never.
    pub(crate) ttl_s: Option<f64>,
    /// A second tier in CPU memory, GiB per GPU: blocks evicted from the GPU are kept there and
    /// loaded back over PCIe on a hit. Default 0 (none).
    pub(crate) cpu_gib: f64,
}

impl PrefixCacheSection {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        if let Some(t) = self.ttl_s {
            check(t.is_finite() && t > 0.0, path, "ttl_s", "must be > 0", t)?;
        }
        check(self.cpu_gib.is_finite() && self.cpu_gib >= 0.0, path, "cpu_gib", "must be ≥ 0", self.cpu_gib)
    }
}

/// Names every full KV block a request will write — its `prompt + output − 1` tokens — as the
/// engines' prefix caches do (vLLM hashes every full block of a request's tokens,
/// `Request.block_hashes`): the blocks `content` identifies by its chain of segment names (the
/// answer too, named by [`output_hash`], when the content covers the whole prompt); the rest —
/// prompt tokens the content does not describe, and the answer of a request whose prompt it
/// does not cover — by a segment that is request `id`'s alone. Such blocks never match another
/// request, but a request preempted and recomputed finds its own still cached.
pub(crate) fn block_hashes(
    content: &[Segment],
    id: u64,
    prompt: u32,
    output: u32,
    block_tokens: u64,
    out: &mut Vec<u64>,
) {
    out.clear();
    let covered: u64 = content.iter().map(|s| s.tokens as u64).sum();
    let whole = !content.is_empty() && covered >= prompt as u64;
    let limit = prompt as u64 + output as u64 - 1;
    let rest = if whole {
        Segment { hash: output_hash(content), tokens: output }
    } else {
        Segment { hash: mix(OWN_TAG, id), tokens: (limit - covered).min(u32::MAX as u64) as u32 }
    };
    let blocks = limit / block_tokens;
    out.reserve(blocks as usize);
    let mut segs = content.iter().copied().chain(std::iter::once(rest));
    let mut cur = segs.next();
    let mut off = 0u64;
    let mut h = 0x7072_6566_6978u64; // "prefix"
    for _ in 0..blocks {
        let mut need = block_tokens;
        while need > 0 {
            let Some(s) = cur else { return };
            let take = (s.tokens as u64 - off).min(need);
            if take > 0 {
                h = mix(mix(h, s.hash), off << 24 | take);
            }
            off += take;
            need -= take;
            if off == s.tokens as u64 {
                cur = segs.next();
                off = 0;
            }
        }
        out.push(h);
    }
}

/// Tags the segment of a request's own tokens (those no content describes).
const OWN_TAG: u64 = 0x6f77_6e5f_746f_6b73; // "own_toks"

/// Where a block of a prefix hit comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hit {
    /// A cached GPU block, shared.
    Gpu(u32),
    /// A block in the CPU tier, to be loaded into a new GPU block.
    Cpu(u64),
}

/// The longest cached prefix of `hashes`, at most `max_blocks` blocks, into `out`. Returns
/// (GPU hits, GPU hits on evictable blocks).
pub(crate) fn lookup(
    kv: &BlockAllocator,
    tier: Option<&CpuTier>,
    hashes: &[u64],
    max_blocks: u64,
    out: &mut Vec<Hit>,
) -> (u64, u64) {
    out.clear();
    let (mut gpu, mut evictable) = (0, 0);
    for &h in hashes.iter().take(max_blocks as usize) {
        if let Some(b) = kv.lookup(h) {
            out.push(Hit::Gpu(b));
            gpu += 1;
            evictable += (kv.refs(b) == 0) as u64;
        } else if tier.is_some_and(|t| t.contains(h)) {
            out.push(Hit::Cpu(h));
        } else {
            break;
        }
    }
    (gpu, evictable)
}

/// The CPU-memory tier of the prefix cache: block hashes in LRU order, bounded in blocks.
#[derive(Clone, Debug, Default)]
pub(crate) struct CpuTier {
    capacity: u64,
    clock: u64,
    stamp: IdMap<u64>,
    lru: BTreeMap<u64, u64>,
}

impl CpuTier {
    pub(crate) fn new(capacity_blocks: u64) -> CpuTier {
        CpuTier { capacity: capacity_blocks, ..CpuTier::default() }
    }

    pub(crate) fn len(&self) -> u64 {
        self.stamp.len() as u64
    }

    pub(crate) fn contains(&self, h: u64) -> bool {
        self.stamp.contains_key(&h)
    }

    /// Stores (or refreshes) a block; the least recently used goes when full. Returns whether
    /// the block was newly stored (so it had to be copied over).
    pub(crate) fn put(&mut self, h: u64) -> bool {
        if self.capacity == 0 {
            return false;
        }
        self.clock += 1;
        if let Some(old) = self.stamp.insert(h, self.clock) {
            self.lru.remove(&old);
            self.lru.insert(self.clock, h);
            return false;
        }
        self.lru.insert(self.clock, h);
        if self.stamp.len() as u64 > self.capacity {
            let (_, victim) = self.lru.pop_first().expect("over capacity");
            self.stamp.remove(&victim);
        }
        true
    }

    /// Checks the map and the LRU order agree and the capacity holds; for tests.
    pub(crate) fn check(&self) {
        assert!(self.len() <= self.capacity, "CPU tier over capacity");
        assert_eq!(self.lru.len(), self.stamp.len(), "CPU tier map and LRU disagree");
        for (s, h) in &self.lru {
            assert_eq!(self.stamp.get(h), Some(s));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(hash: u64, tokens: u32) -> Segment {
        Segment { hash, tokens }
    }

    #[test]
    fn equal_prefixes_give_equal_block_names_and_diverge_after() {
        let (mut a, mut b) = (vec![], vec![]);
        // 40 shared tokens then different: blocks of 16 → blocks 0 and 1 equal, block 2 (32..48)
        // straddles the divergence.
        block_hashes(&[seg(1, 40), seg(2, 30)], 1, 70, 10, 16, &mut a);
        block_hashes(&[seg(1, 40), seg(3, 30)], 2, 70, 10, 16, &mut b);
        assert_eq!(&a[..2], &b[..2]);
        assert_ne!(a[2], b[2]);
        // The whole prompt is covered: KV of 70 + 10 − 1 = 79 tokens → 4 full blocks.
        assert_eq!(a.len(), 4);
        // The same tokens cut into segments differently are different content (segment
        // identities differ), but the same segments always give the same names.
        let mut c = vec![];
        block_hashes(&[seg(1, 40), seg(2, 30)], 3, 70, 10, 16, &mut c);
        assert_eq!(a, c);
        // Content covering only part of the prompt: its full blocks by the content, then the
        // request's own tokens: 100 + 10 − 1 = 109 tokens → 6 full blocks, the first two shared.
        block_hashes(&[seg(1, 40)], 4, 100, 10, 16, &mut c);
        assert_eq!(c.len(), 6);
        assert_eq!(c[..2], a[..2]);
        let mut d = vec![];
        block_hashes(&[seg(1, 40)], 5, 100, 10, 16, &mut d);
        assert_eq!(d[..2], a[..2]);
        assert!(c[2..].iter().zip(&d[2..]).all(|(x, y)| x != y), "another request's own tokens differ");
        // No content: every block the request's own, the same for the same request.
        block_hashes(&[], 6, 100, 10, 16, &mut c);
        block_hashes(&[], 6, 100, 10, 16, &mut d);
        assert_eq!(c.len(), 6);
        assert_eq!(c, d);
        block_hashes(&[], 7, 100, 10, 16, &mut d);
        assert!(c.iter().all(|h| !d.contains(h)));
    }

    #[test]
    fn a_turn_s_answer_is_a_prefix_of_the_next_turn() {
        let t1 = [seg(9, 100)];
        let t2 = [seg(9, 100), seg(output_hash(&t1), 60), seg(10, 50)];
        let (mut a, mut b) = (vec![], vec![]);
        block_hashes(&t1, 1, 100, 60, 16, &mut a);
        block_hashes(&t2, 2, 210, 5, 16, &mut b);
        // Turn 1 writes KV for 159 tokens: 9 full blocks, all of them the start of turn 2.
        assert_eq!(a.len(), 9);
        assert_eq!(&b[..9], &a[..]);
    }

    #[test]
    fn cpu_tier_keeps_the_most_recent() {
        let mut t = CpuTier::new(2);
        assert!(t.put(1) && t.put(2));
        assert!(!t.put(1), "refresh");
        assert!(t.put(3));
        assert!(t.contains(1) && t.contains(3) && !t.contains(2));
        t.check();
    }
}
