//! SGLang's receive interval (`[scheduler] recv_interval`, its `--scheduler-recv-interval`).
//!
//! SGLang's scheduler takes new requests off its socket at the top of each loop iteration, and
//! with an interval above 1 only when `SchedulerRecvSkipper.handle` says so
//! (python/sglang/srt/managers/scheduler_recv_skipper.py, sgl-project/sglang 70310f05): a
//! counter, from 0, gains the weight of the batch that last ran — 1 after a decode batch, 1
//! after none (the loop idling), 1000 after any other (a prefill or a mixed one:
//! `SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_*`'s defaults) — and when it reaches the interval the
//! scheduler receives and the counter restarts at 0. So after a prefill it receives at once;
//! while it only decodes, every `interval` iterations; idle, within the loop's next few spins
//! (microseconds: here, at once). Requests sent meanwhile wait unseen by any batch
//! ([`super::waiting::Waiting::push_unreceived`]). SGLang creates no skipper for an interval of
//! 1 (its default) and refuses one with DP attention; so does servesim.

/// The skipper's count across an instance's iterations.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RecvSkipper {
    threshold: u32,
    counter: u32,
    /// The batch that ran last: None (none: idle), Some(true) with prefill tokens, Some(false)
    /// decodes only.
    last: Option<bool>,
}

/// A batch's weight toward the next receive, by whether it had prefill tokens (None: no batch).
fn weight(last: Option<bool>) -> u32 {
    match last {
        Some(true) => 1000,
        _ => 1,
    }
}

impl RecvSkipper {
    /// `None` for an interval of 1 (every iteration receives).
    pub(crate) fn new(interval: u32) -> Option<RecvSkipper> {
        (interval > 1).then_some(RecvSkipper { threshold: interval, counter: 0, last: None })
    }

    /// Whether the scheduler receives at the top of this iteration; advances the count.
    pub(crate) fn handle(&mut self) -> bool {
        self.counter += weight(self.last);
        if self.counter >= self.threshold {
            self.counter = 0;
            return true;
        }
        false
    }

    /// The iteration formed a batch (`prefill`: with prefill tokens), or none (`None`).
    pub(crate) fn ran(&mut self, batch: Option<bool>) {
        self.last = batch;
    }

    /// The scheduler idled and received (its spins reached the interval): the count restarts.
    pub(crate) fn received_idle(&mut self) {
        self.counter = 0;
        self.last = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_of_one_makes_no_skipper() {
        assert_eq!(RecvSkipper::new(1), None);
        assert!(RecvSkipper::new(2).is_some());
    }

    #[test]
    fn decodes_receive_every_interval_and_a_prefill_at_once() {
        // scheduler_recv_skipper.py: counter += weight(last batch); receive and reset at >=.
        let mut r = RecvSkipper::new(3).unwrap();
        r.ran(Some(false));
        let got: Vec<bool> = (0..7).map(|_| r.handle()).collect();
        assert_eq!(got, [false, false, true, false, false, true, false]);
        // After a prefill batch (weight 1000) the next loop receives whatever the count.
        r.ran(Some(true));
        assert!(r.handle());
        r.ran(Some(false));
        assert!(!r.handle());
        // Idle (no batch: weight 1), as decodes.
        r.ran(None);
        assert!(!r.handle());
        assert!(r.handle());
        r.received_idle();
        r.ran(Some(false));
        assert!(!r.handle() && !r.handle() && r.handle());
    }
}
