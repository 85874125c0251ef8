//! The requests waiting at an instance, in the order they are taken: swapped out to CPU memory
//! (resumed before any admission), preempted for recomputation (first in line), then never
//! admitted ones in the queue policy's order; the queue timeouts; and the requests sent but not
//! yet received by a scheduler that receives only every few iterations ([`super::recv`]).
//!
//! Invariants ([`Waiting::check`]): no waiting request holds a KV block; preempted, queued and
//! unreceived ones have computed nothing; `pending_prefill` is the tokens the queued,
//! preempted and unreceived requests have to (re)compute; the timeouts are in deadline order.

use std::collections::VecDeque;

use super::queue::{QPos, Queue};
use super::seq::Seq;
use crate::time::SimTime;

pub(crate) struct Waiting {
    /// Never-admitted requests, in the queue policy's order.
    pub(crate) queue: Queue,
    /// Requests preempted for recomputation: first in line.
    pub(crate) preempted: VecDeque<Box<Seq>>,
    /// Requests swapped out to CPU memory: resumed before any admission.
    pub(crate) swapped: VecDeque<Box<Seq>>,
    /// (deadline, id, position) of queued requests, in deadline order, when a queue timeout
    /// is set.
    timeouts: VecDeque<(SimTime, u64, QPos)>,
    /// Tokens the queued, preempted and unreceived requests have to (re)compute, kept up to
    /// date for routers.
    pub(crate) pending_prefill: u64,
    /// New requests sent while the scheduler did not receive, in arrival order, with their
    /// queue deadlines.
    unreceived: Vec<(Box<Seq>, Option<SimTime>)>,
}

impl Waiting {
    pub(crate) fn new(queue: Queue) -> Waiting {
        Waiting {
            queue,
            preempted: VecDeque::new(),
            swapped: VecDeque::new(),
            timeouts: VecDeque::new(),
            pending_prefill: 0,
            unreceived: Vec::new(),
        }
    }

    /// Requests waiting: queued, preempted, swapped out, and sent but not yet received.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.queue.len() + self.preempted.len() + self.swapped.len() + self.unreceived.len()
    }

    /// A new request sent while the scheduler does not receive ([`super::recv`]): it counts as
    /// waiting for the routers, and no batch sees it until [`Waiting::receive`].
    pub(crate) fn push_unreceived(&mut self, s: Box<Seq>, deadline: Option<SimTime>) {
        self.pending_prefill += s.context();
        self.unreceived.push((s, deadline));
    }

    /// The scheduler receives the requests sent since it last did, in the order they came.
    pub(crate) fn receive(&mut self) {
        let mut sent = std::mem::take(&mut self.unreceived);
        for (s, deadline) in sent.drain(..) {
            self.pending_prefill -= s.context();
            self.push(s, deadline);
        }
        self.unreceived = sent; // its capacity kept
    }

    /// Whether requests wait to be received.
    pub(crate) fn has_unreceived(&self) -> bool {
        !self.unreceived.is_empty()
    }

    /// Queues a new request, with its queue deadline if a timeout is set.
    #[inline]
    pub(crate) fn push(&mut self, s: Box<Seq>, deadline: Option<SimTime>) {
        self.pending_prefill += s.context();
        let id = s.id;
        let pos = self.queue.push(s);
        if let Some(deadline) = deadline {
            // Arrivals come in time order; a retried request (its original arrival kept after
            // an instance failure) may come earlier and takes its place in deadline order.
            if self.timeouts.back().is_some_and(|b| b.0 > deadline) {
                let at = self.timeouts.partition_point(|x| x.0 <= deadline);
                self.timeouts.insert(at, (deadline, id, pos));
            } else {
                self.timeouts.push_back((deadline, id, pos));
            }
        }
    }

    /// A request preempted for recomputation: first in line.
    #[inline]
    pub(crate) fn push_preempted(&mut self, s: Box<Seq>) {
        self.pending_prefill += s.context();
        self.preempted.push_front(s);
    }

    /// Moves the request preempted last (first in line) to the queue instead, where the queue's
    /// order places it: SGLang puts a retracted request back in its waiting queue
    /// (`_add_request_to_queue`), behind those already there under FCFS.
    pub(crate) fn requeue_last_preempted(&mut self) {
        if let Some(s) = self.preempted.pop_front() {
            // Its tokens stay pending: it leaves one list for the other.
            self.queue.push(s);
        }
    }

    /// Takes the next preempted request (`preempted`), else the queue's next, for admission.
    #[inline]
    pub(crate) fn take(&mut self, preempted: bool, ctx: &super::queue::QueueCtx) -> Box<Seq> {
        let s = if preempted {
            self.preempted.pop_front().expect("front exists")
        } else {
            self.queue.pop(ctx).expect("peeked")
        };
        self.pending_prefill -= s.context();
        s
    }

    /// Removes the queued requests whose deadline is at or before `now`, oldest deadline
    /// first, giving each to `f` with its deadline.
    #[inline]
    pub(crate) fn expire(&mut self, now: SimTime, mut f: impl FnMut(Box<Seq>, SimTime)) {
        while let Some(&(deadline, id, pos)) = self.timeouts.front() {
            if deadline > now {
                break;
            }
            self.timeouts.pop_front();
            if let Some(s) = self.queue.remove(pos) {
                debug_assert_eq!(s.id, id);
                self.pending_prefill -= s.context();
                f(s, deadline);
            }
        }
    }

    /// Every waiting request: queued, preempted, swapped, not yet received.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Seq> {
        self.queue
            .iter()
            .chain(self.preempted.iter().map(|b| &**b))
            .chain(self.swapped.iter().map(|b| &**b))
            .chain(self.unreceived.iter().map(|(s, _)| &**s))
    }

    /// Every waiting request as (id, client), in the order a crash drops them: swapped,
    /// preempted, queued.
    pub(crate) fn held(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.swapped
            .iter()
            .chain(&self.preempted)
            .map(|s| (s.id, s.client))
            .chain(self.queue.iter().map(|s| (s.id, s.client)))
            .chain(self.unreceived.iter().map(|(s, _)| (s.id, s.client)))
    }

    /// The invariants (see the module's docs); `swapped_blocks(s)` is the swap space a
    /// swapped-out request must hold.
    pub(crate) fn check(&self, swapped_blocks: impl Fn(&Seq) -> u64) {
        assert!(self.queue.iter().all(|s| s.blocks.is_empty() && s.computed == 0), "a queued request holds KV");
        assert!(self.iter().all(|s| s.cold.window.is_empty()), "a waiting request holds window blocks");
        assert!(self.unreceived.iter().all(|(s, _)| s.blocks.is_empty() && s.computed == 0));
        assert!(self.preempted.iter().all(|s| s.blocks.is_empty() && s.computed == 0 && s.cold.swapped_blocks == 0));
        assert!(self.swapped.iter().all(|s| s.blocks.is_empty() && s.cold.swapped_blocks == swapped_blocks(s)));
        assert!(
            self.timeouts.iter().zip(self.timeouts.iter().skip(1)).all(|(a, b)| a.0 <= b.0),
            "timeouts out of order"
        );
        self.check_pending();
    }

    /// `pending_prefill` agrees with the queued and preempted requests (O(requests)).
    pub(crate) fn check_pending(&self) {
        let prefill: u64 = self
            .queue
            .iter()
            .chain(self.preempted.iter().map(|b| &**b))
            .chain(self.unreceived.iter().map(|(s, _)| &**s))
            .map(|s| s.context())
            .sum();
        assert_eq!(prefill, self.pending_prefill, "pending prefill tokens out of step");
    }

    /// No preempted or swapped request holds blocks (the cheap part of the check, every
    /// iteration in debug builds).
    #[cfg(debug_assertions)]
    pub(crate) fn debug_check(&self) {
        assert!(
            self.preempted.iter().chain(&self.swapped).all(|s| s.blocks.is_empty()),
            "a waiting request holds blocks"
        );
    }
}
