//! Unit tests of the autoscaler's rule and the failure draws.

use super::autoscale::{Measurements, QueueSignal, RateSignal, SignalSpec, TtftSignal};
use super::failures::RepairDist;
use super::*;
use crate::rng::{substream, Stream};

fn scaler(signals: Vec<SignalSpec>) -> AutoscaleSection {
    AutoscaleSection {
        group: None,
        min: 1,
        max: 20,
        interval_s: 15.0,
        tolerance: 0.1,
        scale_up_cooldown_s: 0.0,
        scale_down_cooldown_s: 300.0,
        signals,
    }
}

#[test]
fn request_rate_asks_for_rate_over_target_instances() {
    let a = scaler(vec![SignalSpec::RequestRate(RateSignal { target_rps: 5.0, window_s: 60.0 })]);
    let mut m = Measurements::default();
    m.rate_rps.insert(60f64.to_bits(), 23.0);
    // ⌈23 / 5⌉ = 5, whatever is running now.
    assert_eq!(a.desired(&m, 2, 2), 5);
    // 23 / (5 × 5) = 0.92: within the 10% tolerance of 5 instances, no change.
    assert_eq!(a.desired(&m, 5, 5), 5);
    // Within tolerance of 4.7 → 4.6 would ask 4 rounding down; at 5 instances and 21 req/s:
    // 21 / 25 = 0.84, outside the tolerance: ⌈4.2⌉ = 5.
    m.rate_rps.insert(60f64.to_bits(), 21.0);
    assert_eq!(a.desired(&m, 5, 5), 5);
    m.rate_rps.insert(60f64.to_bits(), 14.0);
    assert_eq!(a.desired(&m, 5, 5), 3);
    // Clamped to [min, max].
    m.rate_rps.insert(60f64.to_bits(), 1000.0);
    assert_eq!(a.desired(&m, 5, 5), 20);
    m.rate_rps.insert(60f64.to_bits(), 0.0);
    assert_eq!(a.desired(&m, 5, 5), 1);
}

#[test]
fn per_instance_signals_scale_the_ready_count_and_the_largest_wins() {
    let a = scaler(vec![
        SignalSpec::Queue(QueueSignal { target: 4.0 }),
        SignalSpec::TtftP99(TtftSignal { target_ms: 500.0, window_s: 30.0 }),
    ]);
    let mut m = Measurements { queue_per_instance: Some(10.0), ..Measurements::default() };
    m.ttft_p99_ms.insert(30f64.to_bits(), Some(600.0));
    // Queue: ⌈3 × 10/4⌉ = 8; TTFT: ⌈3 × 1.2⌉ = 4 → 8.
    assert_eq!(a.desired(&m, 3, 3), 8);
    // No first token in the window: TTFT has no opinion; queue within tolerance (4.2/4).
    m.ttft_p99_ms.insert(30f64.to_bits(), None);
    m.queue_per_instance = Some(4.2);
    assert_eq!(a.desired(&m, 3, 4), 4);
    // No ready instance: the current count stands.
    m.queue_per_instance = None;
    assert_eq!(a.desired(&m, 0, 3), 3);
}

#[test]
fn failure_draws_have_their_means() {
    let f = FailuresSection { mtbf_s: Some(1000.0), mttr_s: 50.0, hang_fraction: 0.25, ..Default::default() };
    let mut rng = substream(1, Stream::Failures, 0);
    let n = 20_000;
    let ttf: f64 = (0..n).map(|_| f.time_to_failure(&mut rng).unwrap().as_secs_f64()).sum::<f64>() / n as f64;
    assert!((ttf / 1000.0 - 1.0).abs() < 0.03, "{ttf}");
    let rep: f64 = (0..n).map(|_| f.draw_repair(&mut rng).as_secs_f64()).sum::<f64>() / n as f64;
    assert!((rep / 50.0 - 1.0).abs() < 0.03, "{rep}");
    let hangs = (0..n).filter(|_| f.draw_kind(&mut rng) == FailureKind::Hang).count() as f64 / n as f64;
    assert!((hangs - 0.25).abs() < 0.015, "{hangs}");
    let fixed = FailuresSection { repair: RepairDist::Fixed, ..f };
    assert_eq!(fixed.draw_repair(&mut rng), crate::SimTime::from_secs_f64(50.0));
}
