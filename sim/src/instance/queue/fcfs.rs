//! First come, first served (vLLM's default).

use serde::{Deserialize, Serialize};

use super::{QueueOrder, QueuePolicy, Seq};

/// `kind = "fcfs"`: no settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fcfs {}

impl QueuePolicy for Fcfs {
    fn build(&self, _seed: u64, _instance: u32) -> Box<dyn QueueOrder> {
        Box::new(Fcfs {})
    }
}

impl QueueOrder for Fcfs {
    fn place(&mut self, _s: &Seq) -> (usize, u64) {
        (0, 0)
    }
}
