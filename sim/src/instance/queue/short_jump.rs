//! FCFS, except that while more than `queue_threshold` requests wait, short prompts (up to
//! `short_max_tokens`) jump ahead of the longer ones: under a backlog the cheap requests get
//! through fast; without one the order is fair.

use serde::{Deserialize, Serialize};

use super::{QueueCtx, QueueOrder, QueuePolicy, Seq};
use crate::config::{check, ConfigError};

/// `kind = "short-jump"`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShortJump {
    /// Prompts up to this many tokens are short.
    pub(crate) short_max_tokens: u32,
    /// Short requests jump ahead while more than this many requests wait.
    pub(crate) queue_threshold: u32,
}

impl QueuePolicy for ShortJump {
    fn validate(&self, path: &str) -> Result<(), ConfigError> {
        check(self.short_max_tokens >= 1, path, "short_max_tokens", "must be ≥ 1", self.short_max_tokens)
    }

    fn build(&self, _seed: u64, _instance: u32) -> Box<dyn QueueOrder> {
        Box::new(self.clone())
    }
}

impl QueueOrder for ShortJump {
    fn lanes(&self) -> usize {
        2
    }

    fn place(&mut self, s: &Seq) -> (usize, u64) {
        ((s.prompt > self.short_max_tokens) as usize, 0)
    }

    fn choose(&self, heads: &[Option<&Seq>], ctx: &QueueCtx) -> Option<usize> {
        match (heads[0], heads[1]) {
            (Some(_), _) if ctx.waiting > self.queue_threshold as usize => Some(0),
            (Some(a), Some(b)) => Some(if a.cold.qpos.order < b.cold.qpos.order { 0 } else { 1 }),
            (Some(_), None) => Some(0),
            (None, Some(_)) => Some(1),
            (None, None) => None,
        }
    }
}
