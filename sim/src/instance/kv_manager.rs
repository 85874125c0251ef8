//! An instance's KV memory: the GPU block pool (with the prefix cache's blocks), the CPU tier
//! of evicted prefix blocks, the swap space of swapped-out requests, and the bytes this moves
//! over the host link each iteration; and the one rule for whether new blocks may be taken.
//!
//! Invariants ([`KvManager::check`]): every block is free, cached or owned by the tables given
//! (each owner counted once); the swap space in use is what the swapped-out requests hold and
//! never more than its capacity; the CPU tier is consistent.

use super::kv::BlockAllocator;
use super::prefix::{CpuTier, Hit};
use crate::metrics::Observer;

pub(crate) struct KvManager {
    pub(crate) blocks: BlockAllocator,
    pub(crate) cpu_tier: Option<CpuTier>,
    /// Blocks of swapped-out requests in CPU memory, out of `swap_blocks`.
    pub(crate) swap_used: u64,
    swap_blocks: u64,
    block_tokens: u64,
    block_bytes: u64,
    /// Blocks kept free when admitting while others hold blocks that may grow.
    watermark: u64,
    /// Bytes over the host link this iteration, each way (swap-in, CPU-tier hits / swap-out,
    /// CPU-tier offloads).
    pub(crate) bytes_in: u64,
    pub(crate) bytes_out: u64,
    /// Scratch: the prefix-cache hits of the admission being considered.
    pub(crate) hits: Vec<Hit>,
}

impl KvManager {
    pub(crate) fn new(cfg: &super::InstanceConfig) -> KvManager {
        let p = &cfg.policy;
        KvManager {
            blocks: if p.prefix.enabled {
                BlockAllocator::with_prefix_cache(cfg.kv_blocks)
            } else {
                BlockAllocator::new(cfg.kv_blocks)
            },
            cpu_tier: (p.prefix.enabled && p.cpu_tier_blocks > 0).then(|| CpuTier::new(p.cpu_tier_blocks)),
            swap_used: 0,
            swap_blocks: p.swap_blocks,
            block_tokens: cfg.block_tokens,
            block_bytes: p.block_bytes,
            watermark: cfg.watermark_blocks as u64,
            bytes_in: 0,
            bytes_out: 0,
            hits: Vec::new(),
        }
    }

    /// The one admission-capacity rule (queue admission, swap-in, a decode instance taking a
    /// transfer): `need` new blocks fit when the free blocks, less `unusable` of them (free but
    /// holding prefix-cache hits this admission will take), cover them plus the watermark. The
    /// watermark keeps room for requests holding blocks to grow (`busy`: running ones, and ones
    /// receiving their KV); with none, it would only stall the queue.
    #[inline]
    pub(crate) fn fits(&self, need: u64, unusable: u64, busy: bool) -> bool {
        let reserve = if busy { self.watermark } else { 0 };
        (self.blocks.free() as u64).saturating_sub(unusable) >= need + reserve
    }

    /// Blocks holding `tokens` tokens.
    #[inline]
    pub(crate) fn blocks_for(&self, tokens: u64) -> u64 {
        tokens.div_ceil(self.block_tokens)
    }

    /// One block, evicting a cached one if need be (and keeping it in the CPU tier, if any).
    #[inline]
    pub(crate) fn alloc_block(&mut self, rec: &mut dyn Observer) -> Option<u32> {
        let (b, evicted) = self.blocks.alloc_evicting()?;
        if let Some(h) = evicted {
            rec.policy().prefix_evictions += 1;
            if let Some(t) = &mut self.cpu_tier {
                if t.put(h) {
                    self.bytes_out += self.block_bytes;
                    rec.policy().prefix_cpu_offloads += 1;
                }
            }
        }
        Some(b)
    }

    /// Whether `blocks` more fit in the swap space.
    #[inline]
    pub(crate) fn swap_has_room(&self, blocks: u64) -> bool {
        self.swap_used + blocks <= self.swap_blocks
    }

    /// Moves `blocks` blocks out to the swap space (their GPU blocks already released).
    #[inline]
    pub(crate) fn swap_out(&mut self, blocks: u64) {
        self.swap_used += blocks;
        self.bytes_out += blocks * self.block_bytes;
    }

    /// Brings `blocks` blocks back from the swap space (into GPU blocks already taken).
    #[inline]
    pub(crate) fn swap_in(&mut self, blocks: u64) {
        self.swap_used -= blocks;
        self.bytes_in += blocks * self.block_bytes;
    }

    /// `blocks` prefix blocks read back from the CPU tier.
    #[inline]
    pub(crate) fn cpu_hits_in(&mut self, blocks: u64) {
        self.bytes_in += blocks * self.block_bytes;
    }

    /// The invariants (see the module's docs): `tables` are the block tables that own blocks,
    /// `swapped` the swap space the swapped-out requests hold.
    pub(crate) fn check(&self, tables: &[&[u32]], swapped: u64) {
        self.blocks.check(tables);
        assert_eq!(swapped, self.swap_used, "swap space not conserved");
        assert!(self.swap_used <= self.swap_blocks, "swap space over capacity");
        if let Some(t) = &self.cpu_tier {
            t.check();
        }
    }

    /// The cheap part of the check (every iteration in debug builds).
    #[cfg(debug_assertions)]
    pub(crate) fn debug_check(&self) {
        assert!(self.swap_used <= self.swap_blocks);
    }
}
