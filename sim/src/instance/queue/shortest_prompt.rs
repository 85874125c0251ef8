//! Shortest prompt first: the request with the fewest prompt tokens goes first (ties in arrival
//! order). Cuts mean TTFT; long prompts can starve under sustained load.

use super::{QueueOrder, Seq};

pub struct ShortestPrompt;

impl QueueOrder for ShortestPrompt {
    fn place(&mut self, s: &Seq) -> (usize, u64) {
        (0, s.prompt as u64)
    }
}
