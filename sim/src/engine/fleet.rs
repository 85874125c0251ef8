//! The engine's side of fleet dynamics: what failures, detections, restarts and the
//! autoscaler do to instances and to the requests they hold.
//!
//! ```text
//!   Fail(crash) ─► instance dies now: its requests are stranded until crash + detection_s;
//!                  requests the router still sends there are stranded until sent + detection_s
//!   Fail(hang)  ─► instance freezes: it keeps accepting requests, runs nothing
//!   Detect      ─► the router stops sending there; a hung instance's requests fail now;
//!                  restart: repair time, then the start-up delay
//!   RetryDue    ─► stranded requests fail: re-routed with their original arrival, or lost
//!   Ready       ─► back in service (a new random failure is drawn)
//!   Tick        ─► the autoscaler starts or drains instances
//! ```

use super::{Event, Simulation};
use crate::fleet::state::Phase;
use crate::fleet::{FailureKind, FleetEvent, FleetEventKind, OnFailure};
use crate::time::SimTime;
use crate::workload::Request;

impl Simulation {
    /// Schedules the fleet's first events (after the instances are built).
    pub(super) fn start_fleet(&mut self, events: Vec<(SimTime, FleetEvent)>) {
        for (t, ev) in events {
            self.push_fleet(t, ev);
        }
        if self.fleet.cfg.autoscale.as_ref().is_some_and(|a| a.uses_ttft()) {
            self.rec.keep_recent_first_tokens();
        }
    }

    fn push_fleet(&mut self, t: SimTime, ev: FleetEvent) {
        self.fleet.pending += 1;
        self.queue.push(t, Event::Fleet(ev));
    }

    /// Whether only fleet events are left and no request is in flight: the run is over (ticks
    /// and failures would otherwise go on forever).
    pub(super) fn fleet_idle(&self) -> bool {
        // Without fleet events pending (no `[fleet]` section) the first test is false.
        self.queue.len() == self.fleet.pending && self.fleet.stranded() == 0 && {
            let g = self.rec.gauges();
            g.waiting + g.running == 0
        }
    }

    pub(super) fn on_fleet(&mut self, ev: FleetEvent) {
        self.fleet.pending -= 1;
        match ev.kind {
            FleetEventKind::RetryDue => return self.retry_due(),
            FleetEventKind::Tick => return self.autoscale_tick(),
            _ => {}
        }
        if !self.fleet.current(&ev) {
            return;
        }
        let i = ev.instance as usize;
        match ev.kind {
            // Only a serving instance fails (a scheduled failure of one that is off, starting
            // or already failed is left out).
            FleetEventKind::Fail(..) if self.fleet.phase(i) == Phase::Ready => self.fail(&ev),
            FleetEventKind::Fail(..) => {}
            FleetEventKind::Detect => self.detect(i),
            FleetEventKind::Ready => {
                if let Some((t, next)) = self.fleet.become_ready(i, self.now, &mut self.instances[i]) {
                    self.push_fleet(t, next);
                }
            }
            FleetEventKind::RetryDue | FleetEventKind::Tick => unreachable!("handled above"),
        }
    }

    fn fail(&mut self, ev: &FleetEvent) {
        let i = ev.instance as usize;
        let kind = self.fleet.begin_failure(ev, self.now, &mut self.instances[i]);
        let detect_at = self.now + self.fleet.detection(kind);
        match kind {
            FailureKind::Crash => {
                // Everything on it is gone; each request fails when the crash is noticed.
                for (id, _) in self.drop_held(i) {
                    let (req, retries) = self.fleet.take_tracked(id);
                    self.strand(req, retries, detect_at);
                }
            }
            FailureKind::Hang => self.instances[i].freeze(self.now),
        }
        let epoch = self.fleet.epoch(i);
        self.push_fleet(detect_at, FleetEvent { kind: FleetEventKind::Detect, instance: i as u32, epoch });
    }

    /// Empties instance `i` (a crash), keeping the occupancy gauges in step.
    fn drop_held(&mut self, i: usize) -> Vec<(u64, u32)> {
        super::tracked(&mut self.instances[i], &mut self.rec, |inst, _| inst.crash())
    }

    fn detect(&mut self, i: usize) {
        let hung = self.fleet.phase(i) == Phase::Failed(FailureKind::Hang);
        let ready_at = self.fleet.begin_restart(i, self.now, &mut self.instances[i]);
        if hung {
            // The liveness check kills it: its requests fail now (the router no longer
            // sends there, so retries go elsewhere).
            for (id, _) in self.drop_held(i) {
                let (req, retries) = self.fleet.take_tracked(id);
                self.retry(req, retries);
            }
        }
        let epoch = self.fleet.epoch(i);
        self.push_fleet(ready_at, FleetEvent { kind: FleetEventKind::Ready, instance: i as u32, epoch });
    }

    /// A request the router sent to a crashed instance: it fails `detection_s` later.
    pub(super) fn strand_sent(&mut self, req: Request, retries: u32) {
        let due = self.now + self.fleet.detection(FailureKind::Crash);
        self.strand(req, retries, due);
    }

    fn strand(&mut self, req: Request, retries: u32, due: SimTime) {
        if self.fleet.strand(req, retries, due) {
            self.push_fleet(due, FleetEvent { kind: FleetEventKind::RetryDue, instance: 0, epoch: 0 });
        }
    }

    fn retry_due(&mut self) {
        while let Some(l) = self.fleet.pop_due(self.now) {
            self.retry(l.req, l.retries);
        }
    }

    /// A request whose instance failed: re-routed with its original arrival time, or lost
    /// (per `on_failure`, when out of retries, or when no instance is routable).
    fn retry(&mut self, req: Request, retries: u32) {
        let cfg = &self.fleet.cfg;
        if cfg.on_failure == OnFailure::Lose || retries >= cfg.max_retries || self.fleet.routable() == 0 {
            self.rec.lost(req.id, self.now);
            self.fleet.count_lost();
            self.client_done(req.client);
            return;
        }
        self.fleet.count_retry();
        self.rec.retried(req.id);
        let i = self.router.route(&req, &self.instances);
        self.rec.routed(req.id, i as u32);
        if self.fleet.is_crashed(i) {
            return self.strand_sent(req, retries + 1);
        }
        let inst = &mut self.instances[i];
        // A client that set a queue timeout has given up by now if it has passed.
        if let Some(t) = inst.config().policy.admission.queue_timeout_s {
            if req.arrival + SimTime::from_secs_f64(t) <= self.now {
                self.rec.timed_out(req.id, self.now);
                self.client_done(req.client);
                return;
            }
        }
        match inst.accept(&req, self.now, &mut self.rec) {
            Ok(()) => {
                self.enqueue(i, &req);
                self.fleet.track(&req, retries + 1);
            }
            Err(why) => {
                self.rec.rejected(req.id, self.now, why);
                self.client_done(req.client);
            }
        }
    }

    /// A draining instance that has finished its last request is switched off.
    pub(super) fn drained(&mut self, i: usize) {
        if self.fleet.is_draining(i) && !self.instances[i].has_work() && !self.instances[i].is_busy() {
            self.fleet.set_phase(i, Phase::Off, self.now, &mut self.instances[i]);
        }
    }

    fn autoscale_tick(&mut self) {
        let interval = self.fleet.cfg.autoscale.as_ref().expect("ticks come from [fleet.autoscale]").interval_s;
        let m = self.fleet.measure(&self.instances, &mut self.rec, self.now);
        let change = self.fleet.decide(&m, self.now);
        if change > 0 {
            let up = self.fleet.scale_up_candidates(change as usize);
            for &i in &up {
                if self.fleet.phase(i) == Phase::Draining {
                    // Still loaded: it serves again at once.
                    if let Some((t, ev)) = self.fleet.become_ready(i, self.now, &mut self.instances[i]) {
                        self.push_fleet(t, ev);
                    }
                } else {
                    self.fleet.set_phase(i, Phase::Starting, self.now, &mut self.instances[i]);
                    let epoch = self.fleet.epoch(i);
                    let at = self.now + self.fleet.startup(i);
                    self.push_fleet(at, FleetEvent { kind: FleetEventKind::Ready, instance: i as u32, epoch });
                }
            }
            self.fleet.scaled_up(self.now, up.len());
        } else if change < 0 {
            let down = self.fleet.scale_down_candidates((-change) as usize, &self.instances);
            for &i in &down {
                if self.fleet.phase(i) == Phase::Ready {
                    self.fleet.set_phase(i, Phase::Draining, self.now, &mut self.instances[i]);
                    self.drained(i);
                } else {
                    // Starting or restarting: cancelled, its ready event now stale.
                    self.fleet.set_phase(i, Phase::Off, self.now, &mut self.instances[i]);
                }
            }
            self.fleet.scaled_down(self.now, down.len());
        }
        let next = self.now + SimTime::from_secs_f64(interval);
        self.push_fleet(next, FleetEvent { kind: FleetEventKind::Tick, instance: 0, epoch: 0 });
    }

    /// The fleet's invariants (tests): phases agree with the routers' view, requests in flight
    /// on instances are tracked when failures can happen.
    pub(super) fn check_fleet(&self, held: u64) {
        self.fleet.check(&self.instances, held);
    }
}
