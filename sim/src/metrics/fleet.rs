//! What the recorder is told about failures (lost and retried requests) and what it tells an
//! autoscaler (recent arrivals and first tokens).

use std::collections::VecDeque;

use super::{stats, Recorder, Status};
use crate::time::SimTime;

impl Recorder {
    /// Width of a time-series window.
    pub fn window(&self) -> SimTime {
        self.window
    }

    /// A request was lost to an instance failure at `now`.
    pub fn lost(&mut self, id: u64, now: SimTime) {
        let r = &mut self.records[id as usize];
        debug_assert_eq!(r.status, Status::InFlight);
        r.status = Status::Lost;
        r.finish = now;
    }

    /// A request is retried after its instance failed: it starts over (its admission and first
    /// token are those of the attempt that succeeds; its arrival stays).
    pub fn retried(&mut self, id: u64) {
        let r = &mut self.records[id as usize];
        debug_assert_eq!(r.status, Status::InFlight);
        r.scheduled = SimTime::MAX;
        r.first_token = SimTime::MAX;
    }

    /// Requests that arrived at or after `from` (records are in arrival order).
    pub fn arrivals_since(&self, from: SimTime) -> u64 {
        (self.records.len() - self.records.partition_point(|r| r.arrival < from)) as u64
    }

    /// Starts keeping recent first tokens (for an autoscaler on TTFT).
    pub fn keep_recent_first_tokens(&mut self) {
        self.recent_ttft.get_or_insert_with(VecDeque::new);
    }

    /// Forgets first tokens before `before`.
    pub fn forget_first_tokens_before(&mut self, before: SimTime) {
        if let Some(q) = &mut self.recent_ttft {
            while q.front().is_some_and(|&(t, _)| t < before) {
                q.pop_front();
            }
        }
    }

    /// p99 TTFT of the first tokens at or after `from` that are still kept, ms.
    pub fn recent_ttft_p99_ms(&self, from: SimTime) -> Option<f64> {
        let q = self.recent_ttft.as_ref()?;
        let mut v: Vec<f64> = q.iter().filter(|&&(t, _)| t >= from).map(|&(_, x)| x).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_unstable_by(|a, b| a.total_cmp(b));
        Some(stats::percentile_sorted(&v, 99.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_since_counts_by_arrival_time() {
        let mut r = Recorder::new((SimTime::ZERO, SimTime::MAX), 1, SimTime::from_secs_f64(1.0));
        for t in [0.5, 1.0, 1.5, 2.0, 3.0] {
            r.arrived(SimTime::from_secs_f64(t), 1, 1);
        }
        assert_eq!(r.arrivals_since(SimTime::from_secs_f64(1.0)), 4);
        assert_eq!(r.arrivals_since(SimTime::from_secs_f64(2.5)), 1);
        assert_eq!(r.arrivals_since(SimTime::from_secs_f64(9.0)), 0);
    }

    #[test]
    fn recent_ttft_window() {
        let mut r = Recorder::new((SimTime::ZERO, SimTime::MAX), 1, SimTime::from_secs_f64(1.0));
        r.keep_recent_first_tokens();
        for (i, ttft) in [100.0, 200.0, 300.0].iter().enumerate() {
            let at = SimTime::from_secs_f64(i as f64);
            let id = r.arrived(at, 1, 1);
            r.first_token(id, at + SimTime::from_secs_f64(ttft / 1000.0));
        }
        // p99 of {200, 300} by linear interpolation: 200 + 0.99 × 100.
        let p = r.recent_ttft_p99_ms(SimTime::from_secs_f64(1.0)).unwrap();
        assert!((p - 299.0).abs() < 1e-6, "{p}");
        r.forget_first_tokens_before(SimTime::from_secs_f64(5.0));
        assert_eq!(r.recent_ttft_p99_ms(SimTime::ZERO), None);
    }
}
