//! First come, first served (vLLM's default).

use super::{QueueOrder, Seq};

pub struct Fcfs;

impl QueueOrder for Fcfs {
    fn place(&mut self, _s: &Seq) -> (usize, u64) {
        (0, 0)
    }
}
