//! Length tiers: short, medium and long prompts in tier order (FCFS within a tier); long
//! requests wait in their own lane and at most `long_max_running` of them run at once, so a
//! burst of long prompts cannot take the whole batch. The cost: under sustained overload the
//! lower tiers wait behind the shorter ones.

use serde::{Deserialize, Serialize};

use super::{QueueCtx, QueueOrder, QueuePolicy, Seq};
use crate::config::{check, ConfigError};

/// `kind = "length-tiers"`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LengthTiers {
    /// Prompts up to this many tokens are short.
    pub(crate) short_max_tokens: u32,
    /// Prompts up to this many tokens (and above `short_max_tokens`) are medium; longer are long.
    pub(crate) medium_max_tokens: u32,
    /// Most long requests running at once. Default 1.
    #[serde(default = "one")]
    pub(crate) long_max_running: u32,
}

fn one() -> u32 {
    1
}

impl QueuePolicy for LengthTiers {
    fn validate(&self, path: &str) -> Result<(), ConfigError> {
        check(self.short_max_tokens >= 1, path, "short_max_tokens", "must be ≥ 1", self.short_max_tokens)?;
        check(
            self.medium_max_tokens >= self.short_max_tokens,
            path,
            "medium_max_tokens",
            &format!("must be ≥ short_max_tokens ({})", self.short_max_tokens),
            self.medium_max_tokens,
        )?;
        check(self.long_max_running >= 1, path, "long_max_running", "must be ≥ 1", self.long_max_running)
    }

    fn build(&self, _seed: u64, _instance: u32) -> Box<dyn QueueOrder> {
        Box::new(Tiers::new(self.clone()))
    }
}

impl LengthTiers {
    fn tier(&self, prompt: u32) -> usize {
        if prompt <= self.short_max_tokens {
            0
        } else if prompt <= self.medium_max_tokens {
            1
        } else {
            2
        }
    }
}

pub(super) struct Tiers {
    spec: LengthTiers,
    long_running: u32,
}

impl Tiers {
    pub(super) fn new(spec: LengthTiers) -> Tiers {
        Tiers { spec, long_running: 0 }
    }
}

impl QueueOrder for Tiers {
    fn lanes(&self) -> usize {
        3
    }

    fn place(&mut self, s: &Seq) -> (usize, u64) {
        (self.spec.tier(s.prompt), 0)
    }

    fn choose(&self, heads: &[Option<&Seq>], _ctx: &QueueCtx) -> Option<usize> {
        if heads[0].is_some() {
            Some(0)
        } else if heads[1].is_some() {
            Some(1)
        } else if heads[2].is_some() && self.long_running < self.spec.long_max_running {
            Some(2)
        } else {
            None
        }
    }

    fn admitted(&mut self, s: &Seq) {
        if self.spec.tier(s.prompt) == 2 {
            self.long_running += 1;
        }
    }

    fn left(&mut self, s: &Seq) {
        if self.spec.tier(s.prompt) == 2 {
            self.long_running -= 1;
        }
    }
}
