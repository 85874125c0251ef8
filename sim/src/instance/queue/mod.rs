//! Queue order: which waiting request is admitted next.
//!
//! ```text
//!   enqueue ─► policy.place(seq) = (lane, key) ─► lanes[lane]: ordered by (key, arrival order)
//!   admit   ◄─ policy.choose(head of each lane) ◄─┘
//! ```
//! Every policy is a small rule over this one structure: a key that orders a lane (prompt
//! length, predicted job size, aged priority) and, for policies with several lanes (length
//! tiers, short-jump), a choice among the lanes' heads. Keys are fixed when a request enters,
//! so each operation is O(log n) however long the queue. Requests preempted for recomputation
//! and swapped-out requests do not come back through here: they resume ahead of the queue,
//! except where the engine puts them back in its queue (SGLang's retraction, vLLM's priority
//! policy).

use std::collections::BTreeMap;

pub use priority::Rank;

use super::seq::Seq;
use crate::config::ConfigError;
use crate::metrics::SloSection;
use crate::policy_family;

policy_family!(
    /// A queue order (`[scheduler.queue]`, `kind = "..."`). A new order is a file in this folder
    /// (its settings, implementing [`QueuePolicy`], and its [`QueueOrder`]) and a line here.
    pub enum QueueSpec: dyn QueuePolicy {
        "fcfs" => Fcfs(fcfs::Fcfs),
        "shortest-prompt" => ShortestPrompt(shortest_prompt::ShortestPrompt),
        "shortest-job" => ShortestJob(shortest_job::ShortestJob),
        "priority" => Priority(priority::Priority),
        "length-tiers" => LengthTiers(length_tiers::LengthTiers),
        "short-jump" => ShortJump(short_jump::ShortJump),
        "edf" => Edf(edf::Edf),
    }
);

/// A queue order's settings: checked, completed from the scenario's SLO, built per instance.
pub trait QueuePolicy {
    /// Checks the settings; `path` names the section in errors.
    fn validate(&self, _path: &str) -> Result<(), ConfigError> {
        Ok(())
    }
    /// Fills settings that default to the scenario's `[slo]` (a deadline).
    fn resolve(&mut self, _slo: &SloSection, _path: &str) -> Result<(), ConfigError> {
        Ok(())
    }
    /// The policy object of one instance; `seed` and `instance` seed its randomness, if any.
    fn build(&self, seed: u64, instance: u32) -> Box<dyn QueueOrder>;
    /// What a user must know of these settings' results (knowledge no engine has), if anything.
    fn caveat(&self) -> Option<&'static str> {
        None
    }
    /// The requests' priority under this order, where it has one: an engine that preempts its
    /// lowest-priority running request (vLLM's priority policy) picks its victim by it.
    fn priority(&self) -> Option<Rank> {
        None
    }
}

impl Default for QueueSpec {
    fn default() -> Self {
        QueueSpec::Fcfs(Fcfs {})
    }
}

impl QueueSpec {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        self.spec().validate(path)
    }

    /// Fills the settings that default to the scenario's `[slo]`.
    pub fn resolve(&mut self, slo: &SloSection, path: &str) -> Result<(), ConfigError> {
        self.spec_mut().resolve(slo, path)
    }

    /// The policy object of one instance; `seed` and `instance` seed its randomness, if any.
    pub fn build(&self, seed: u64, instance: u32) -> Box<dyn QueueOrder> {
        self.spec().build(seed, instance)
    }

    /// [`QueuePolicy::priority`].
    pub(crate) fn priority(&self) -> Option<Rank> {
        self.spec().priority()
    }
}

/// What a policy may look at when choosing.
#[derive(Clone, Copy, Debug)]
pub struct QueueCtx {
    /// Requests waiting (queue, preempted and swapped).
    pub(crate) waiting: usize,
}

/// Where a request sits in the queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QPos {
    pub(crate) lane: u8,
    pub(crate) key: u64,
    pub(crate) order: u64,
}

/// A queue-order policy.
pub trait QueueOrder: Send {
    /// Lanes this policy uses (at most 255).
    fn lanes(&self) -> usize {
        1
    }
    /// The lane and key of a request entering the queue; lower keys go first, equal keys in
    /// arrival order.
    fn place(&mut self, s: &Seq) -> (usize, u64);
    /// Which lane's head to admit next; `None` admits nothing now. Default: the head with the
    /// lowest (key, arrival order) over all lanes.
    fn choose(&self, heads: &[Option<&Seq>], _ctx: &QueueCtx) -> Option<usize> {
        heads
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.map(|s| (i, (s.cold.qpos.key, s.cold.qpos.order))))
            .min_by_key(|x| x.1)
            .map(|x| x.0)
    }
    /// A request started running (first admission or resumption).
    fn admitted(&mut self, _s: &Seq) {}
    /// A running request stopped running (finished or preempted).
    fn left(&mut self, _s: &Seq) {}
}

/// The waiting requests of one instance, in the order of its policy.
pub struct Queue {
    lanes: Vec<BTreeMap<(u64, u64), Box<Seq>>>,
    order: u64,
    len: usize,
    policy: Box<dyn QueueOrder>,
}

impl Queue {
    pub fn new(policy: Box<dyn QueueOrder>) -> Queue {
        Queue { lanes: (0..policy.lanes()).map(|_| BTreeMap::new()).collect(), order: 0, len: 0, policy }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds a request; returns where it sits.
    pub fn push(&mut self, mut s: Box<Seq>) -> QPos {
        let (lane, key) = self.policy.place(&s);
        debug_assert!(lane < self.lanes.len());
        let pos = QPos { lane: lane as u8, key, order: self.order };
        self.order += 1;
        s.cold.qpos = pos;
        self.lanes[lane].insert((key, pos.order), s);
        self.len += 1;
        pos
    }

    fn chosen(&self, ctx: &QueueCtx) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        if self.lanes.len() == 1 {
            return Some(0);
        }
        let heads: Vec<Option<&Seq>> = self.lanes.iter().map(|l| l.first_key_value().map(|(_, s)| &**s)).collect();
        self.policy.choose(&heads, ctx)
    }

    /// The request the policy would admit next.
    pub fn peek(&self, ctx: &QueueCtx) -> Option<&Seq> {
        let lane = self.chosen(ctx)?;
        self.lanes[lane].first_key_value().map(|(_, s)| &**s)
    }

    /// Takes the request [`Queue::peek`] returns under the same context.
    pub fn pop(&mut self, ctx: &QueueCtx) -> Option<Box<Seq>> {
        let lane = self.chosen(ctx)?;
        let s = self.lanes[lane].pop_first().map(|(_, s)| s)?;
        self.len -= 1;
        Some(s)
    }

    /// Removes the request at `pos`, if it is still waiting.
    pub fn remove(&mut self, pos: QPos) -> Option<Box<Seq>> {
        let s = self.lanes.get_mut(pos.lane as usize)?.remove(&(pos.key, pos.order))?;
        self.len -= 1;
        Some(s)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Seq> {
        self.lanes.iter().flat_map(|l| l.values().map(|s| &**s))
    }

    pub fn admitted(&mut self, s: &Seq) {
        self.policy.admitted(s);
    }

    pub fn left(&mut self, s: &Seq) {
        self.policy.left(s);
    }
}

/// An order-preserving key for a non-negative float.
pub fn float_key(x: f64) -> u64 {
    if x.is_nan() || x <= 0.0 {
        0
    } else {
        x.to_bits()
    }
}
