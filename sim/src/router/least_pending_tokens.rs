//! Least pending tokens: to the instance with the least work queued, in tokens — prompt
//! tokens still to prefill, plus (with `count_decode`, the default) output tokens still to
//! generate — per unit of capacity. Counting output tokens uses the true output lengths,
//! which a real router cannot know: it is the best a length-aware router could do. With
//! `count_decode = false` it sees only what a real router sees, the queued prompts.

use serde::{Deserialize, Serialize};

use super::{least_weighted, Load, Router, RouterPolicy};
use crate::workload::Request;

/// `{ kind = "least-pending-tokens", count_decode = true }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LeastPendingTokensSpec {
    /// Count output tokens still to generate (known only to the simulator). Default true.
    pub(crate) count_decode: bool,
}

impl Default for LeastPendingTokensSpec {
    fn default() -> Self {
        LeastPendingTokensSpec { count_decode: true }
    }
}

impl RouterPolicy for LeastPendingTokensSpec {
    fn build(&self, _seed: u64, _index: u64) -> Box<dyn Router> {
        Box::new(LeastPendingTokens::new(self.clone()))
    }
}

#[derive(Debug)]
pub struct LeastPendingTokens {
    spec: LeastPendingTokensSpec,
    next: usize,
}

impl LeastPendingTokens {
    pub fn new(spec: LeastPendingTokensSpec) -> LeastPendingTokens {
        LeastPendingTokens { spec, next: 0 }
    }
}

impl<L: Load> Router<L> for LeastPendingTokens {
    fn route(&mut self, _req: &Request, instances: &[L]) -> usize {
        let decode = self.spec.count_decode;
        let i = least_weighted(instances, self.next, |x| {
            (x.pending_prefill_tokens() + if decode { x.pending_decode_tokens() } else { 0 }) as f64
        });
        self.next = (i + 1) % instances.len();
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::testing::*;

    #[test]
    fn weighs_tokens_not_requests() {
        let mut inst = instances(2);
        load(&mut inst, 0, 1, 5000); // one long prompt
        load(&mut inst, 1, 3, 100); // three short ones
        let mut r = LeastPendingTokens::new(LeastPendingTokensSpec::default());
        assert_eq!(r.route(&request(1, 1, 0), &inst), 1);
        assert_eq!(inst[0].pending_prefill_tokens(), 5000);
        assert_eq!(inst[1].pending_decode_tokens(), 30);
    }
}
