//! The paged KV cache: a fixed pool of blocks, each holding `block_tokens` tokens of K and V.
//!
//! Blocks are handed out from a free list and returned whole; a request's block table is the
//! list of blocks it owns. Block identities are real (not just counts) so that prefix sharing
//! and ownership checks have something to stand on.

/// A pool of KV blocks.
#[derive(Clone, Debug)]
pub struct BlockAllocator {
    total: u32,
    free: Vec<u32>,
    /// Owner count per block: 0 free, 1 owned.
    refs: Vec<u8>,
}

impl BlockAllocator {
    pub fn new(total: u32) -> BlockAllocator {
        // Hand out low block numbers first (purely cosmetic; any order is correct).
        BlockAllocator { total, free: (0..total).rev().collect(), refs: vec![0; total as usize] }
    }

    pub fn total(&self) -> u32 {
        self.total
    }

    pub fn free(&self) -> u32 {
        self.free.len() as u32
    }

    pub fn used(&self) -> u32 {
        self.total - self.free()
    }

    /// Takes one block, or `None` when the pool is empty.
    pub fn alloc(&mut self) -> Option<u32> {
        let b = self.free.pop()?;
        debug_assert_eq!(self.refs[b as usize], 0, "block {b} on the free list but owned");
        self.refs[b as usize] = 1;
        Some(b)
    }

    /// Takes `n` blocks into `table`, all or nothing.
    pub fn alloc_n(&mut self, n: u32, table: &mut Vec<u32>) -> bool {
        if n > self.free() {
            return false;
        }
        for _ in 0..n {
            let b = self.alloc().expect("checked free count");
            table.push(b);
        }
        true
    }

    /// Returns every block of `table` to the pool and empties it.
    pub fn release(&mut self, table: &mut Vec<u32>) {
        for &b in table.iter() {
            assert_eq!(self.refs[b as usize], 1, "block {b} released but not owned");
            self.refs[b as usize] = 0;
            self.free.push(b);
        }
        table.clear();
    }

    /// Checks that the free list and the owner counts agree and that `tables` (every block
    /// table in use) own each used block exactly once. O(total); for tests and debug checks.
    pub fn check(&self, tables: &[&[u32]]) {
        let mut seen = vec![0u8; self.total as usize];
        for &b in &self.free {
            assert_eq!(self.refs[b as usize], 0, "free block {b} has owners");
            seen[b as usize] += 1;
        }
        for t in tables {
            for &b in *t {
                assert_eq!(self.refs[b as usize], 1, "block {b} in a table but not marked owned");
                seen[b as usize] += 1;
            }
        }
        for (b, &n) in seen.iter().enumerate() {
            assert_eq!(n, 1, "block {b} appears {n} times among free list and tables");
        }
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
            let mut a = BlockAllocator::new(total);
            let mut tables: Vec<Vec<u32>> = vec![Vec::new(); 8];
            let mut model_free = total;
            let mut model_owned = [0u32; 8];
            for _ in 0..2000 {
                let who = rng.random_range(0..8usize);
                match rng.random_range(0..3) {
                    0 | 1 => {
                        let n = rng.random_range(0..6u32);
                        let ok = a.alloc_n(n, &mut tables[who]);
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
