//! A request inside an instance.

use super::queue::QPos;
use crate::time::SimTime;

#[derive(Debug)]
pub struct Seq {
    pub id: u64,
    pub arrival: SimTime,
    pub prompt: u32,
    pub output: u32,
    pub class: u8,
    pub client: u32,
    /// Output tokens produced so far.
    pub generated: u32,
    /// Tokens whose K and V are in the cache (prefix hits included).
    pub computed: u64,
    /// KV block table.
    pub blocks: Vec<u32>,
    /// Tokens this request processes in the in-flight iteration (0: not in it).
    pub step: u64,
    /// Draft tokens it verifies in the in-flight iteration (speculative decoding).
    pub draft: u32,
    /// Blocks of its KV held in CPU swap space while swapped out.
    pub swapped_blocks: u64,
    /// Names of its full KV blocks (prefix caching; empty without it).
    pub hashes: Vec<u64>,
    /// When this request's latest token was produced.
    pub last_token: SimTime,
    /// Whether this request's inter-token gaps enter the statistics.
    pub counted: bool,
    /// Whether it has been admitted before (preempted requests have).
    pub admitted: bool,
    pub qpos: QPos,
}

impl Seq {
    /// Tokens whose K and V the next step needs in the cache: the prompt and every generated
    /// token (the newest one is written by the step itself).
    pub fn context(&self) -> u64 {
        self.prompt as u64 + self.generated as u64
    }

    /// Tokens still to process before the next token can be sampled.
    pub fn pending(&self) -> u64 {
        self.context() - self.computed
    }

    /// Whether the next step is a decode (one new token on a computed context).
    pub fn is_decode(&self) -> bool {
        self.generated >= 1 && self.pending() == 1
    }
}
