//! The scheduler reports through `metrics::Observer`, not the `Recorder`: an instance runs
//! with any observer, and what it reports for one request is the hand-computed story.

use std::sync::Arc;

use servesim_sim::cost::{BatchShape, LinearCost};
use servesim_sim::instance::{Instance, InstanceConfig};
use servesim_sim::metrics::{Observer, PolicyStats};
use servesim_sim::workload::{Request, NO_CLIENT, NO_SESSION};
use servesim_sim::SimTime;

/// Writes down what it is told.
#[derive(Default)]
struct Log {
    events: Vec<String>,
    policy: PolicyStats,
}

impl Observer for Log {
    fn scheduled(&mut self, id: u64, now: SimTime) {
        self.events.push(format!("scheduled {id} at {}", now.0));
    }
    fn first_token(&mut self, id: u64, now: SimTime) {
        self.events.push(format!("first token {id} at {}", now.0));
    }
    fn token_gap(&mut self, gap: SimTime, count: u32) {
        self.events.push(format!("gap {} for {count}", gap.0));
    }
    fn finished(&mut self, id: u64, now: SimTime) {
        self.events.push(format!("finished {id} at {}", now.0));
    }
    fn timed_out(&mut self, id: u64, at: SimTime) {
        self.events.push(format!("timed out {id} at {}", at.0));
    }
    fn preempted(&mut self, id: u64) {
        self.events.push(format!("preempted {id}"));
    }
    fn iteration(&mut self, shape: &BatchShape, duration: SimTime) {
        self.events.push(format!("iteration of {} tokens, {} ns", shape.tokens(), duration.0));
    }
    fn policy(&mut self) -> &mut PolicyStats {
        &mut self.policy
    }
}

#[test]
fn an_instance_runs_with_any_observer_and_reports_each_step() {
    let cfg = InstanceConfig {
        max_num_seqs: 8,
        max_num_batched_tokens: 8192,
        block_tokens: 16,
        watermark_blocks: 0,
        max_model_len: 4096,
        kv_blocks: 100,
        dp_ranks: 1,
        capacity: 1.0,
        policy: Default::default(),
    };
    // 5 ms + 50 µs per token: a 100-token prefill takes 10 ms, each one-token decode 5.05 ms.
    let mut inst = Instance::new(0, cfg, Arc::new(LinearCost::default()));
    let req = Request {
        id: 0,
        arrival: SimTime::ZERO,
        prompt_tokens: 100,
        output_tokens: 3,
        client: NO_CLIENT,
        session: NO_SESSION,
        class: 0,
        content: Vec::new(),
    };
    let mut log = Log::default();
    inst.accept(&req, SimTime::ZERO, &mut log).expect("it fits");
    inst.enqueue(&req, true);
    let mut now = SimTime::ZERO;
    let mut departed = Vec::new();
    while let Some(end) = inst.start_iteration(now, &mut log) {
        now = end;
        inst.finish_iteration(now, &mut log, &mut departed);
    }
    let iterations: Vec<&String> = log.events.iter().filter(|e| e.starts_with("iteration")).collect();
    assert_eq!(iterations.len(), 3, "{:#?}", log.events);
    let story: Vec<&String> = log.events.iter().filter(|e| !e.starts_with("iteration")).collect();
    assert_eq!(
        story,
        [
            "scheduled 0 at 0",
            "first token 0 at 10000000",
            "gap 5050000 for 1",
            // The last token: the request finishes, then its gap is counted.
            "finished 0 at 20100000",
            "gap 5050000 for 1",
        ],
        "{:#?}",
        log.events
    );
    assert_eq!(departed.len(), 1);
    assert_eq!(log.policy.busy_ns, 20_100_000, "the policy counters reach the observer too");
}
