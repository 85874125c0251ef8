//! vLLM's data-parallel load balancer (`vllm serve --data-parallel-size N`): the API server sends
//! each request to the engine with the lowest `4 × waiting + running`, scanning from engine 0 and
//! keeping the first minimum (`vllm/v1/engine/core_client.py`, `DPLBAsyncMPClient.
//! get_core_engine_for_request`, vLLM 0.19). It sees the engines' counts as the DP coordinator
//! last published them — at most every `stats_interval_ms` (the coordinator's
//! `min_stats_update_interval_ms`, 100) — and between publications adds each request it sends
//! to that engine's waiting count (`current_counts[eng_index][0] += client_count`, one API
//! server). Capacity is not weighed: the replicas are identical.
//!
//! Here a publication is read at the first routing at least `stats_interval_ms` after the last
//! one (time taken as the request's arrival), rather than pushed on the coordinator's clock.

use serde::{Deserialize, Serialize};

use super::{Load, Router, RouterPolicy};
use crate::config::{check, ConfigError};
use crate::time::SimTime;
use crate::workload::Request;

/// `{ kind = "vllm-dp", stats_interval_ms = 100 }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VllmDpSpec {
    /// How often the balancer's view of the engines' counts is refreshed, ms (0: always exact).
    pub(crate) stats_interval_ms: f64,
}

impl Default for VllmDpSpec {
    fn default() -> Self {
        VllmDpSpec { stats_interval_ms: 100.0 }
    }
}

impl RouterPolicy for VllmDpSpec {
    fn build(&self, _seed: u64, _index: u64) -> Box<dyn Router> {
        Box::new(VllmDp::new(self))
    }

    fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let x = self.stats_interval_ms;
        check(x.is_finite() && (0.0..=3.6e6).contains(&x), path, "stats_interval_ms", "must be in [0, 3600000]", x)
    }
}

#[derive(Debug)]
pub struct VllmDp {
    interval: SimTime,
    /// (waiting, running) per engine, as last published plus the requests sent since.
    counts: Vec<(u64, u64)>,
    published: Option<SimTime>,
}

impl VllmDp {
    pub fn new(spec: &VllmDpSpec) -> VllmDp {
        VllmDp { interval: SimTime::from_secs_f64(spec.stats_interval_ms / 1e3), counts: Vec::new(), published: None }
    }
}

impl<L: Load> Router<L> for VllmDp {
    fn route(&mut self, req: &Request, instances: &[L]) -> usize {
        let now = req.arrival;
        let stale = self.published.is_none_or(|t| now >= t + self.interval);
        if stale || self.counts.len() != instances.len() {
            self.counts.clear();
            self.counts.extend(instances.iter().map(|x| (x.waiting(), x.running())));
            self.published = Some(now);
        }
        let mut best = usize::MAX;
        let mut best_score = u64::MAX;
        for (i, x) in instances.iter().enumerate() {
            if !x.routable() {
                continue;
            }
            let (waiting, running) = self.counts[i];
            let score = 4 * waiting + running;
            if best == usize::MAX || score < best_score {
                (best, best_score) = (i, score);
            }
        }
        debug_assert!(best != usize::MAX, "routed with no routable instance");
        self.counts[best].0 += 1;
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{NO_CLIENT, NO_SESSION};

    /// An engine showing given counts.
    struct Engine(u64, u64);

    impl Load for Engine {
        fn routable(&self) -> bool {
            true
        }
        fn outstanding(&self) -> u64 {
            self.0 + self.1
        }
        fn capacity(&self) -> f64 {
            1.0
        }
        fn pending_prefill_tokens(&self) -> u64 {
            0
        }
        fn pending_decode_tokens(&self) -> u64 {
            0
        }
        fn kv_blocks_used(&self) -> u32 {
            0
        }
        fn kv_blocks_total(&self) -> u32 {
            1
        }
        fn block_tokens(&self) -> u64 {
            16
        }
        fn waiting(&self) -> u64 {
            self.0
        }
        fn running(&self) -> u64 {
            self.1
        }
    }

    fn at(ms: u64) -> Request {
        Request {
            id: 0,
            arrival: SimTime(ms * 1_000_000),
            prompt_tokens: 1,
            output_tokens: 1,
            client: NO_CLIENT,
            session: NO_SESSION,
            class: 0,
            content: Vec::new(),
        }
    }

    #[test]
    fn lowest_four_waiting_plus_running_first_minimum_wins_on_published_counts() {
        // vLLM's own example numbers: (waiting, running) = (2, 30), (0, 40), (5, 10), (3, 25):
        // scores 38, 40, 30, 37 — engine 2.
        let engines = [Engine(2, 30), Engine(0, 40), Engine(5, 10), Engine(3, 25)];
        let mut r = VllmDp::new(&VllmDpSpec::default());
        assert_eq!(r.route(&at(0), &engines), 2);
        // Within 100 ms the balancer counts its own sends: engine 2's waiting becomes 6 (34),
        // then 7 (38): 34 < 37 → 2; then 38 > 37 → 3 (the engines' true counts unchanged).
        assert_eq!(r.route(&at(10), &engines), 2);
        assert_eq!(r.route(&at(20), &engines), 3);
        // Engine 3 at 4 waiting (41), engine 0 and 2 at 38: the first minimum, 0.
        assert_eq!(r.route(&at(30), &engines), 0);
        // 100 ms after the last publication the true counts are read again: engine 2.
        assert_eq!(r.route(&at(100), &engines), 2);
        // Equal scores: engine 0, the first (no rotation).
        let tied = [Engine(0, 4), Engine(1, 0), Engine(0, 4)];
        let mut r = VllmDp::new(&VllmDpSpec { stats_interval_ms: 0.0 });
        assert_eq!(r.route(&at(0), &tied), 0);
    }
}
