//! What one instance's scheduler reports as it works: each request's events and its policies'
//! counters. The scheduler (`crate::instance`) takes an `&mut dyn Observer`, never the
//! [`Recorder`], which implements it; a test may observe with anything else.

use super::{PolicyStats, Recorder};
use crate::cost::BatchShape;
use crate::time::SimTime;

pub trait Observer {
    /// Request `id` was admitted (its first iteration starts at `now`).
    fn scheduled(&mut self, id: u64, now: SimTime);
    /// Its first output token came at `now`.
    fn first_token(&mut self, id: u64, now: SimTime);
    /// A gap between token deliveries, carrying `count` tokens (a speculative step's several).
    fn token_gap(&mut self, gap: SimTime, count: u32);
    /// It finished at `now`.
    fn finished(&mut self, id: u64, now: SimTime);
    /// It waited past its queue timeout, at `at`.
    fn timed_out(&mut self, id: u64, at: SimTime);
    /// It was preempted.
    fn preempted(&mut self, id: u64);
    /// One iteration of `shape` ran for `duration`.
    fn iteration(&mut self, shape: &BatchShape, duration: SimTime);
    /// The policies' counters (prefix cache, swap, speculative, CPU, admission).
    fn policy(&mut self) -> &mut PolicyStats;
}

impl Observer for Recorder {
    fn scheduled(&mut self, id: u64, now: SimTime) {
        Recorder::scheduled(self, id, now)
    }
    fn first_token(&mut self, id: u64, now: SimTime) {
        Recorder::first_token(self, id, now)
    }
    fn token_gap(&mut self, gap: SimTime, count: u32) {
        Recorder::itl(self, gap, count)
    }
    fn finished(&mut self, id: u64, now: SimTime) {
        Recorder::finished(self, id, now)
    }
    fn timed_out(&mut self, id: u64, at: SimTime) {
        Recorder::timed_out(self, id, at)
    }
    fn preempted(&mut self, id: u64) {
        Recorder::preempted(self, id)
    }
    fn iteration(&mut self, shape: &BatchShape, duration: SimTime) {
        Recorder::iteration(self, shape, duration)
    }
    fn policy(&mut self) -> &mut PolicyStats {
        &mut self.policy
    }
}
