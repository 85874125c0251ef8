//! The paged KV cache: a fixed pool of blocks, each holding `block_tokens` tokens of K and V.
//!
//! ```text
//!   free (no content) ──alloc──► owned (refs ≥ 1) ──release, refs → 0──► free
//!                                  ▲      │ registered (hash)                 (uncached)
//!                        hit: refs+1│      └──release, refs → 0──► evictable (LRU) ──alloc when
//!                                  └───────────────────────────────┘          free is empty──► owned
//! ```
//! Blocks are handed out from a free list; a request's block table is the list of blocks it
//! owns. With prefix caching, a block whose tokens are computed can be registered under the hash
//! of its content (and of everything before it); other requests with the same prefix then share
//! it (reference counts), and when no request uses it, it stays cached but evictable, in least
//! recently used order, until an allocation needs the space. Without prefix caching nothing is
//! registered and this is a plain free list.
//!
//! Blocks never used yet take no memory: block numbers are handed out from a high-water mark
//! once the free list of released blocks is empty (low numbers first, as a full free list
//! would), and the per-block arrays grow with it. So an instance's memory follows the KV it
//! uses at its peak, not the pool's size — 10,000 instances of 80 GiB GPUs cost what their
//! traffic does.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::time::SimTime;

/// A hasher for keys that are already well-mixed 64-bit hashes.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
}

pub(crate) type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

const NIL: u32 = u32::MAX;

/// A pool of KV blocks.
#[derive(Clone, Debug)]
pub(crate) struct BlockAllocator {
    total: u32,
    /// Blocks `0..fresh` have been handed out at least once; the rest are free and untouched.
    fresh: u32,
    /// Released blocks (below `fresh`) with no content, taken before fresh ones.
    free: Vec<u32>,
    /// Owner count per block.
    refs: Vec<u32>,
    /// Prefix-caching state, allocated only when caching is on.
    cache: Option<Box<Cache>>,
}

/// Cached (registered) blocks and the evictable LRU list.
#[derive(Clone, Debug)]
struct Cache {
    /// The hash a block is registered under, if any.
    hash: Vec<Option<u64>>,
    by_hash: IdMap<u32>,
    /// Intrusive doubly linked LRU list of evictable blocks (refs 0, registered); head = least
    /// recently used.
    prev: Vec<u32>,
    next: Vec<u32>,
    head: u32,
    tail: u32,
    evictable: u32,
    /// When each evictable block was last released.
    released: Vec<SimTime>,
}

impl BlockAllocator {
    pub(crate) fn new(total: u32) -> BlockAllocator {
        // Hand out low block numbers first (purely cosmetic; any order is correct).
        BlockAllocator { total, fresh: 0, free: Vec::new(), refs: Vec::new(), cache: None }
    }

    /// A free block: the last released one, else the next never-used one (growing the
    /// per-block arrays), else none.
    #[inline]
    fn pop_free(&mut self) -> Option<u32> {
        if let Some(b) = self.free.pop() {
            return Some(b);
        }
        if self.fresh == self.total {
            return None;
        }
        let b = self.fresh;
        self.fresh += 1;
        self.refs.push(0);
        if let Some(c) = self.cache.as_mut() {
            c.hash.push(None);
            c.prev.push(NIL);
            c.next.push(NIL);
            c.released.push(SimTime::ZERO);
        }
        Some(b)
    }

    /// A pool whose blocks can be registered, shared and kept cached (prefix caching).
    pub(crate) fn with_prefix_cache(total: u32) -> BlockAllocator {
        let mut a = BlockAllocator::new(total);
        a.cache = Some(Box::new(Cache {
            hash: Vec::new(),
            by_hash: IdMap::default(),
            prev: Vec::new(),
            next: Vec::new(),
            head: NIL,
            tail: NIL,
            evictable: 0,
            released: Vec::new(),
        }));
        a
    }

    pub(crate) fn total(&self) -> u32 {
        self.total
    }

    /// Blocks an allocation can take: free ones and evictable cached ones.
    pub(crate) fn free(&self) -> u32 {
        self.free.len() as u32 + (self.total - self.fresh) + self.evictable()
    }

    /// Blocks owned by at least one request.
    pub(crate) fn used(&self) -> u32 {
        self.total - self.free()
    }

    /// Cached blocks no request uses (reclaimable).
    pub(crate) fn evictable(&self) -> u32 {
        self.cache.as_ref().map_or(0, |c| c.evictable)
    }

    /// Registered (cached) blocks, in use or not.
    #[cfg(test)]
    pub(crate) fn cached(&self) -> u32 {
        self.cache.as_ref().map_or(0, |c| c.by_hash.len() as u32)
    }

    pub(crate) fn refs(&self, b: u32) -> u32 {
        self.refs.get(b as usize).copied().unwrap_or(0)
    }

    /// Takes one block, or `None` when the pool is empty.
    #[cfg(test)]
    pub(crate) fn alloc(&mut self) -> Option<u32> {
        self.alloc_evicting().map(|(b, _)| b)
    }

    /// Takes one block, evicting the least recently used cached block when no free one is
    /// left; returns the block and the hash it was evicted from, if any.
    pub(crate) fn alloc_evicting(&mut self) -> Option<(u32, Option<u64>)> {
        if let Some(b) = self.pop_free() {
            debug_assert_eq!(self.refs[b as usize], 0, "block {b} on the free list but owned");
            self.refs[b as usize] = 1;
            return Some((b, None));
        }
        let c = self.cache.as_mut()?;
        let b = c.head;
        if b == NIL {
            return None;
        }
        c.unlink(b);
        let h = c.hash[b as usize].take().expect("evictable blocks are registered");
        c.by_hash.remove(&h);
        self.refs[b as usize] = 1;
        Some((b, Some(h)))
    }

    /// Takes one block from the free list (never evicting a cached one).
    #[inline]
    pub(crate) fn alloc_free(&mut self) -> Option<u32> {
        let b = self.pop_free()?;
        debug_assert_eq!(self.refs[b as usize], 0, "block {b} on the free list but owned");
        self.refs[b as usize] = 1;
        Some(b)
    }

    /// Grows `table` from the free blocks (never evicting) until it holds `need`; false if the
    /// free ones run out first (what was taken stays taken).
    #[inline]
    pub(crate) fn fill_free(&mut self, table: &mut Vec<u32>, need: usize) -> bool {
        while table.len() < need {
            match self.alloc_free() {
                Some(b) => table.push(b),
                None => return false,
            }
        }
        true
    }

    /// Takes `n` blocks from the free ones into `table` — the very blocks, in the same order,
    /// as `n` calls of [`BlockAllocator::alloc_free`] — if `n` are free (never evicting);
    /// otherwise takes none and returns false.
    pub(crate) fn alloc_free_into(&mut self, n: usize, table: &mut Vec<u32>) -> bool {
        let fresh_left = (self.total - self.fresh) as usize;
        if n > self.free.len() + fresh_left {
            return false;
        }
        let from_list = n.min(self.free.len());
        let start = table.len();
        table.extend(self.free.drain(self.free.len() - from_list..).rev());
        let fresh = (n - from_list) as u32;
        table.extend(self.fresh..self.fresh + fresh);
        self.refs.resize(self.refs.len() + fresh as usize, 0);
        if let Some(c) = self.cache.as_mut() {
            let k = fresh as usize;
            c.hash.resize(c.hash.len() + k, None);
            c.prev.resize(c.prev.len() + k, NIL);
            c.next.resize(c.next.len() + k, NIL);
            c.released.resize(c.released.len() + k, SimTime::ZERO);
        }
        self.fresh += fresh;
        for &b in &table[start..] {
            debug_assert_eq!(self.refs[b as usize], 0, "block {b} on the free list but owned");
            self.refs[b as usize] = 1;
        }
        true
    }

    /// Takes `n` blocks into `table`, all or nothing.
    #[cfg(test)]
    pub(crate) fn alloc_n(&mut self, n: u32, table: &mut Vec<u32>) -> bool {
        if n > self.free() {
            return false;
        }
        for _ in 0..n {
            let b = self.alloc().expect("checked free count");
            table.push(b);
        }
        true
    }

    /// The cached block registered under `hash`, if any.
    pub(crate) fn lookup(&self, hash: u64) -> Option<u32> {
        self.cache.as_ref()?.by_hash.get(&hash).copied()
    }

    /// One more owner for a cached block (a prefix hit); an evictable block stops being one.
    pub(crate) fn acquire(&mut self, b: u32) {
        let r = &mut self.refs[b as usize];
        if *r == 0 {
            self.cache.as_mut().expect("only cached blocks are acquired").unlink(b);
        }
        *r += 1;
    }

    /// Registers an owned block under `hash`, unless the hash is already cached elsewhere (two
    /// requests computed the same prefix at once: the first keeps it) or the block already has
    /// one. Returns whether it was registered.
    pub(crate) fn register(&mut self, b: u32, hash: u64) -> bool {
        let Some(c) = self.cache.as_mut() else { return false };
        debug_assert!(self.refs[b as usize] > 0, "only owned blocks are registered");
        if c.hash[b as usize].is_some() || c.by_hash.contains_key(&hash) {
            return false;
        }
        c.hash[b as usize] = Some(hash);
        c.by_hash.insert(hash, b);
        true
    }

    /// Unregisters block `b` if its one owner is the only one (its content will not be cached
    /// when released); a block others share keeps its name.
    pub(crate) fn forget(&mut self, b: u32) {
        if self.refs[b as usize] != 1 {
            return;
        }
        let Some(c) = self.cache.as_mut() else { return };
        if let Some(h) = c.hash[b as usize].take() {
            c.by_hash.remove(&h);
        }
    }

    /// Drops one owner of every block of `table` (at `now`) and empties it. Blocks nobody owns
    /// any more become free, or evictable if they are cached; the table's last blocks are
    /// released first, so they are evicted first (they are the least likely to be shared).
    pub(crate) fn release_at(&mut self, table: &mut Vec<u32>, now: SimTime) {
        self.release_blocks(table, now);
        table.clear();
    }

    /// [`BlockAllocator::release_at`] for some blocks of a table, which keeps them.
    pub(crate) fn release_blocks(&mut self, table: &[u32], now: SimTime) {
        for &b in table.iter().rev() {
            let r = &mut self.refs[b as usize];
            assert!(*r >= 1, "block {b} released but not owned");
            *r -= 1;
            if *r > 0 {
                continue;
            }
            match self.cache.as_mut() {
                Some(c) if c.hash[b as usize].is_some() => {
                    c.push_back(b);
                    c.released[b as usize] = now;
                }
                _ => self.free.push(b),
            }
        }
    }

    /// [`BlockAllocator::release_at`] without a time (no prefix caching).
    #[cfg(test)]
    pub(crate) fn release(&mut self, table: &mut Vec<u32>) {
        self.release_at(table, SimTime::ZERO);
    }

    /// Evicts cached blocks nobody has used since `before` (a time-to-live); returns how many.
    pub(crate) fn expire(&mut self, before: SimTime) -> u64 {
        let Some(c) = self.cache.as_mut() else { return 0 };
        let mut n = 0;
        while c.head != NIL && c.released[c.head as usize] < before {
            let b = c.head;
            c.unlink(b);
            let h = c.hash[b as usize].take().expect("evictable blocks are registered");
            c.by_hash.remove(&h);
            self.free.push(b);
            n += 1;
        }
        n
    }

    /// Checks that the free list, the LRU list, the hash map and the owner counts agree, and
    /// that `tables` (every block table in use) hold each owned block exactly as many times as
    /// its owner count, never twice in one table. O(total); for tests and debug checks.
    pub(crate) fn check(&self, tables: &[&[u32]]) {
        // Blocks from `fresh` on were never used: free, and in no table (checked below).
        let n = self.fresh as usize;
        assert!(self.fresh <= self.total && self.refs.len() == n, "high-water mark out of step");
        let mut held = vec![0u32; n];
        for t in tables {
            let mut mine = std::collections::HashSet::new();
            for &b in *t {
                assert!(b < self.fresh, "block {b} in a table but never handed out");
                assert!(mine.insert(b), "block {b} twice in one table");
                held[b as usize] += 1;
            }
        }
        let mut free_seen = vec![false; n];
        for &b in &self.free {
            assert_eq!(self.refs[b as usize], 0, "free block {b} has owners");
            assert!(!free_seen[b as usize], "block {b} twice on the free list");
            free_seen[b as usize] = true;
        }
        let mut lru_seen = vec![false; n];
        if let Some(c) = &self.cache {
            let mut count = 0;
            let mut b = c.head;
            let mut prev = NIL;
            while b != NIL {
                assert_eq!(c.prev[b as usize], prev, "LRU list broken at block {b}");
                assert_eq!(self.refs[b as usize], 0, "evictable block {b} has owners");
                assert!(c.hash[b as usize].is_some(), "evictable block {b} is not cached");
                assert!(!free_seen[b as usize] && !lru_seen[b as usize], "block {b} both free and evictable");
                lru_seen[b as usize] = true;
                count += 1;
                prev = b;
                b = c.next[b as usize];
            }
            assert_eq!(prev, c.tail);
            assert_eq!(count, c.evictable, "evictable count");
            for (b, h) in c.hash.iter().enumerate() {
                if let Some(h) = h {
                    assert_eq!(c.by_hash.get(h), Some(&(b as u32)), "hash of block {b} not mapped to it");
                    assert!(!free_seen[b], "free block {b} is cached");
                }
            }
            assert_eq!(c.by_hash.len(), c.hash.iter().filter(|h| h.is_some()).count());
        }
        for b in 0..n {
            assert_eq!(held[b], self.refs[b], "block {b}: {} table entries, {} owners", held[b], self.refs[b]);
            let places = free_seen[b] as u32 + lru_seen[b] as u32 + (self.refs[b] > 0) as u32;
            assert_eq!(places, 1, "block {b} is in {places} of free / evictable / owned");
        }
    }
}

impl Cache {
    fn unlink(&mut self, b: u32) {
        let (p, nx) = (self.prev[b as usize], self.next[b as usize]);
        if p == NIL {
            self.head = nx;
        } else {
            self.next[p as usize] = nx;
        }
        if nx == NIL {
            self.tail = p;
        } else {
            self.prev[nx as usize] = p;
        }
        self.prev[b as usize] = NIL;
        self.next[b as usize] = NIL;
        self.evictable -= 1;
    }

    fn push_back(&mut self, b: u32) {
        self.prev[b as usize] = self.tail;
        self.next[b as usize] = NIL;
        if self.tail == NIL {
            self.head = b;
        } else {
            self.next[self.tail as usize] = b;
        }
        self.tail = b;
        self.evictable += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{substream, Stream};
    use rand::RngExt;

    /// Model-based test: a seeded random stream of allocations and releases against the real
    /// allocator and a trivially correct model (a count of free blocks and a set per owner),
    /// compared after every step.
    #[test]
    fn matches_a_simple_model_under_random_operations() {
        for seed in 0..20 {
            let mut rng = substream(seed, Stream::Sampling, 0);
            let total = rng.random_range(1..200u32);
            // Half of them with the (unused) prefix cache's per-block arrays.
            let mut a =
                if seed % 2 == 0 { BlockAllocator::new(total) } else { BlockAllocator::with_prefix_cache(total) };
            let mut tables: Vec<Vec<u32>> = vec![Vec::new(); 8];
            let mut model_free = total;
            let mut model_owned = [0u32; 8];
            for _ in 0..2000 {
                let who = rng.random_range(0..8usize);
                match rng.random_range(0..3) {
                    0 | 1 => {
                        let n = rng.random_range(0..6u32);
                        // Taking them at once gives the very blocks one by one would.
                        let (mut twin, mut twin_table) = (a.clone(), tables[who].clone());
                        let twin_ok = twin.alloc_free_into(n as usize, &mut twin_table);
                        let ok = a.alloc_n(n, &mut tables[who]);
                        assert_eq!((twin_ok, &twin_table), (ok, &tables[who]), "seed {seed}");
                        assert_eq!(format!("{twin:?}"), format!("{a:?}"), "seed {seed}");
                        assert_eq!(ok, n <= model_free, "seed {seed}");
                        if ok {
                            model_free -= n;
                            model_owned[who] += n;
                        }
                    }
                    _ => {
                        model_free += model_owned[who];
                        model_owned[who] = 0;
                        a.release(&mut tables[who]);
                    }
                }
                assert_eq!(a.free(), model_free, "seed {seed}");
                for w in 0..8 {
                    assert_eq!(tables[w].len() as u32, model_owned[w]);
                }
                let refs: Vec<&[u32]> = tables.iter().map(|t| t.as_slice()).collect();
                a.check(&refs);
            }
        }
    }

    /// Model-based test of the prefix cache: requests over a small universe of prefix chains
    /// look up, share, register, release and evict, against a model that keeps, per cached
    /// hash, its owners and when it was last released (LRU order), compared after every step.
    #[test]
    fn prefix_cache_matches_a_simple_model() {
        #[derive(Clone, Default)]
        struct Entry {
            owners: u32,
            released: u64,
        }
        for seed in 0..20 {
            let mut rng = substream(seed, Stream::Sampling, 1);
            let total = rng.random_range(4..64u32);
            let mut a = BlockAllocator::with_prefix_cache(total);
            // Per request: its block table and, per block, the hash it is registered under.
            let mut tables: Vec<Vec<u32>> = vec![Vec::new(); 6];
            let mut names: Vec<Vec<Option<u64>>> = vec![Vec::new(); 6];
            let chains: Vec<Vec<u64>> = (0..4).map(|c| (0..12).map(|i| 1000 * c + i).collect()).collect();
            let mut model: std::collections::BTreeMap<u64, Entry> = Default::default();
            let mut clock = 0u64;
            for _ in 0..3000 {
                let who = rng.random_range(0..6usize);
                if tables[who].is_empty() && rng.random_range(0..3) > 0 {
                    // Admit: hit the cached prefix of a chain, allocate the rest, register it.
                    let chain = &chains[rng.random_range(0..4usize)];
                    let len = rng.random_range(1..=chain.len());
                    let hits: Vec<u32> = chain[..len].iter().map_while(|&h| a.lookup(h)).collect();
                    let k = hits.len();
                    for h in &chain[..k] {
                        assert!(model.contains_key(h), "seed {seed}: hit on a hash the model lacks");
                    }
                    if k < len {
                        assert!(!model.contains_key(&chain[k]), "seed {seed}: missed a cached hash");
                    }
                    let evictable_hits = hits.iter().filter(|&&b| a.refs(b) == 0).count() as u32;
                    if a.free() - evictable_hits < (len - k) as u32 {
                        continue;
                    }
                    for (&b, &h) in hits.iter().zip(&chain[..k]) {
                        a.acquire(b);
                        tables[who].push(b);
                        names[who].push(Some(h));
                        model.get_mut(&h).unwrap().owners += 1;
                    }
                    for &h in &chain[k..len] {
                        let (b, evicted) = a.alloc_evicting().expect("checked");
                        if let Some(e) = evicted {
                            let lru = model.values().filter(|e| e.owners == 0).map(|e| e.released).min().unwrap();
                            assert_eq!(model[&e].owners, 0, "seed {seed}: evicted an owned block");
                            assert_eq!(model[&e].released, lru, "seed {seed}: evicted not the LRU");
                            model.remove(&e);
                        }
                        tables[who].push(b);
                        if a.register(b, h) {
                            model.insert(h, Entry { owners: 1, released: 0 });
                            names[who].push(Some(h));
                        } else {
                            // A later block of the chain is still cached elsewhere.
                            assert!(model.contains_key(&h));
                            names[who].push(None);
                        }
                    }
                } else if !tables[who].is_empty() {
                    // Release, last block first: each gets its own release time in the model.
                    clock += 1;
                    for h in names[who].iter().rev().flatten() {
                        let e = model.get_mut(h).unwrap();
                        e.owners -= 1;
                        if e.owners == 0 {
                            e.released = clock;
                        }
                    }
                    a.release_at(&mut tables[who], SimTime(clock));
                    names[who].clear();
                }
                let refs: Vec<&[u32]> = tables.iter().map(|t| t.as_slice()).collect();
                a.check(&refs);
                assert_eq!(a.cached() as usize, model.len(), "seed {seed}");
                let unowned = model.values().filter(|e| e.owners == 0).count() as u32;
                assert_eq!(a.evictable(), unowned, "seed {seed}");
            }
        }
    }

    #[test]
    fn expired_blocks_become_free() {
        let mut a = BlockAllocator::with_prefix_cache(4);
        let mut t = vec![];
        assert!(a.alloc_n(2, &mut t));
        assert!(a.register(t[0], 7) && a.register(t[1], 8));
        a.release_at(&mut t, SimTime(100));
        assert_eq!((a.evictable(), a.free()), (2, 4));
        assert_eq!(a.expire(SimTime(100)), 0, "released at 100, not before it");
        assert_eq!(a.expire(SimTime(101)), 2);
        assert_eq!((a.evictable(), a.cached(), a.free()), (0, 0, 4));
        assert_eq!(a.lookup(7), None);
    }

    #[test]
    fn a_forgotten_block_is_freed_not_cached_unless_shared() {
        let mut a = BlockAllocator::with_prefix_cache(4);
        let mut t = vec![];
        assert!(a.alloc_n(2, &mut t));
        assert!(a.register(t[0], 7) && a.register(t[1], 8));
        // Block 1 is shared with another owner: it keeps its name.
        a.acquire(t[1]);
        a.forget(t[0]);
        a.forget(t[1]);
        assert_eq!((a.lookup(7), a.lookup(8)), (None, Some(t[1])));
        let shared = t[1];
        a.release_at(&mut t, SimTime(5));
        // Block 0 is free (not evictable); block 1 is still owned once.
        assert_eq!((a.evictable(), a.cached(), a.used()), (0, 1, 1));
        a.release_at(&mut vec![shared], SimTime(6));
        assert_eq!((a.evictable(), a.cached(), a.used()), (1, 1, 0));
    }

    #[test]
    #[should_panic(expected = "released but not owned")]
    fn double_release_is_caught() {
        let mut a = BlockAllocator::new(4);
        let mut t = vec![];
        assert!(a.alloc_n(2, &mut t));
        let mut copy = t.clone();
        a.release(&mut t);
        a.release(&mut copy);
    }
}
