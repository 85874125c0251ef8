//! What an instance does when it fails: it stops (a hang freezes the iteration in flight), or
//! loses everything (a crash, or a hang once detected) and starts over empty.

use super::Instance;
use crate::time::SimTime;

impl Instance {
    /// Whether routers may send requests here.
    pub fn routable(&self) -> bool {
        self.life.routable
    }

    pub fn set_routable(&mut self, routable: bool) {
        self.life.routable = routable;
    }

    /// When the in-flight iteration ends (`None`: none in flight, or frozen by a hang). An
    /// iteration-end event for another time is stale: its instance failed meanwhile.
    pub fn iteration_end(&self) -> Option<SimTime> {
        self.life.iteration_end
    }

    /// Hangs at `now`: the iteration in flight never ends and no other starts; arrivals still
    /// queue.
    pub fn freeze(&mut self, now: SimTime) {
        self.life.iteration_start.get_or_insert(now);
        self.life.iteration_end = None;
    }

    /// Dies: every request it holds is dropped — running, swapped, preempted, queued, in that
    /// order, rank by rank, as (id, client) — with its KV cache, swap space and CPU tier; the instance starts
    /// over empty (same configuration, same counters of work done).
    pub fn crash(&mut self) -> Vec<(u64, u32)> {
        let mut held = Vec::with_capacity(self.outstanding() as usize);
        for core in std::iter::once(&self.core).chain(self.others.iter().map(|r| &r.core)) {
            held.extend(core.running.iter().map(|s| (s.id, s.client)));
            held.extend(core.waiting.held());
        }
        let (work, routable) = (self.work, self.life.routable);
        *self = Instance::new(self.id, self.core.cfg.clone(), self.exec.cost.clone());
        self.work.iterations = work.iterations;
        self.work.decode_token_steps = work.decode_token_steps;
        self.life.routable = routable;
        held
    }
}
