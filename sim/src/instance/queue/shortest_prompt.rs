//! Shortest prompt first: the request with the fewest prompt tokens goes first (ties in arrival
//! order). Cuts mean TTFT; long prompts can starve under sustained load.

use serde::{Deserialize, Serialize};

use super::{QueueOrder, QueuePolicy, Seq};

/// `kind = "shortest-prompt"`: no settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShortestPrompt {}

impl QueuePolicy for ShortestPrompt {
    fn build(&self, _seed: u64, _instance: u32) -> Box<dyn QueueOrder> {
        Box::new(ShortestPrompt {})
    }
}

impl QueueOrder for ShortestPrompt {
    fn place(&mut self, s: &Seq) -> (usize, u64) {
        (0, s.prompt as u64)
    }
}
