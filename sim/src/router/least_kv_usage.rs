//! Least KV usage: to the instance whose KV cache is least committed — blocks in use plus the
//! blocks its waiting requests' prompts will need — as a fraction of its blocks. Counting the
//! queued demand keeps every request that arrives during one iteration (before any KV is
//! allocated) from herding onto the same instance.

use serde::{Deserialize, Serialize};

use super::{least_by, Load, Router, RouterPolicy};
use crate::workload::Request;

/// `{ kind = "least-kv-usage" }`: no settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeastKvUsageSpec {}

impl RouterPolicy for LeastKvUsageSpec {
    fn build(&self, _seed: u64, _index: u64) -> Box<dyn Router> {
        Box::new(LeastKvUsage::default())
    }
}

#[derive(Debug, Default)]
pub struct LeastKvUsage {
    next: usize,
}

/// Committed fraction of an instance's KV blocks. A fraction is already relative to the
/// instance's own capacity, so it is compared as it is.
fn committed<L: Load>(x: &L) -> f64 {
    let blocks = x.kv_blocks_used() as f64 + x.pending_prefill_tokens() as f64 / x.block_tokens() as f64;
    blocks / x.kv_blocks_total().max(1) as f64
}

impl<L: Load> Router<L> for LeastKvUsage {
    fn route(&mut self, _req: &Request, instances: &[L]) -> usize {
        let i = least_by(instances, self.next, committed);
        self.next = (i + 1) % instances.len();
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::testing::*;

    #[test]
    fn counts_queued_prompt_blocks() {
        let mut inst = instances(2);
        load(&mut inst, 0, 1, 1600); // 100 blocks committed
        load(&mut inst, 1, 4, 160); // 40 blocks committed, more requests
        let mut r = LeastKvUsage::default();
        assert_eq!(r.route(&request(1, 1, 0), &inst), 1);
    }
}
