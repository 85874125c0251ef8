//! What a workload offers, in the figures a user checks a run against: how many requests over
//! what span, the mean rate and the peak rates over 1 s, 10 s and 60 s windows, and for a trace
//! the steps applied to it in the order they are applied.

use serde::{Deserialize, Serialize};

use super::{ArrivalSpec, Workload, WorkloadSpec};
use crate::time::SimTime;

/// The windows the peak rates are taken over, in seconds.
pub const PEAK_WINDOWS_S: [f64; 3] = [1.0, 10.0, 60.0];

/// The arrivals a workload makes under one seed (open-loop or replayed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Offered {
    pub requests: u64,
    /// First and last arrival, seconds.
    pub first_s: f64,
    pub last_s: f64,
    /// Requests per second over the span from the first arrival to the last.
    pub mean_rps: f64,
    /// The most requests in any window of 1, 10 and 60 s, per second; `None` for a window
    /// longer than the span.
    pub peak_rps: [Option<f64>; 3],
    /// For a trace replay: its steps, in the order applied ("window [0, 900) s of the trace",
    /// "sampled 10%", "3× faster"), empty for a generated workload.
    pub steps: Vec<String>,
}

/// What the workload `w` offers under `seed`, by drawing its arrivals (no simulation). `None`
/// for a closed loop, whose arrivals follow the service: its clients are what it offers.
pub fn offered(w: &WorkloadSpec, seed: u64) -> Option<Offered> {
    if matches!(w.arrival, Some(ArrivalSpec::ClosedLoop(_))) {
        return None;
    }
    let mut wl = Workload::new(w.clone(), seed);
    let mut at: Vec<SimTime> = Vec::new();
    while let Some(r) = wl.next_open() {
        at.push(r.arrival);
    }
    Some(of_arrivals(&at, steps(w)))
}

/// [`Offered`] of arrival times in order.
fn of_arrivals(at: &[SimTime], steps: Vec<String>) -> Offered {
    let secs = |t: SimTime| t.0 as f64 / 1e9;
    let (first_s, last_s) = match (at.first(), at.last()) {
        (Some(&a), Some(&b)) => (secs(a), secs(b)),
        _ => (0.0, 0.0),
    };
    let span = last_s - first_s;
    let peak = |w: f64| {
        if span < w {
            return None;
        }
        let win = SimTime::from_secs_f64(w);
        let (mut left, mut most) = (0usize, 0usize);
        for (i, &t) in at.iter().enumerate() {
            while t.0 - at[left].0 >= win.0 {
                left += 1;
            }
            most = most.max(i + 1 - left);
        }
        Some(most as f64 / w)
    };
    Offered {
        requests: at.len() as u64,
        first_s,
        last_s,
        mean_rps: if span > 0.0 { at.len() as f64 / span } else { 0.0 },
        peak_rps: PEAK_WINDOWS_S.map(peak),
        steps,
    }
}

/// A trace replay's steps, in the order the replay applies them (window, sample, time scale).
fn steps(w: &WorkloadSpec) -> Vec<String> {
    let Some(t) = &w.trace else { return Vec::new() };
    let mut s = vec![format!("trace {}", t.label())];
    if let Some([a, b]) = t.window_s {
        s.push(format!("window [{a}, {b}) s of the trace"));
    }
    if let Some(p) = t.sample {
        s.push(format!("each request kept with probability {p}"));
    }
    match (t.speedup, t.target_rate) {
        (Some(k), _) => s.push(format!("played {k}× faster")),
        (None, Some(r)) => s.push(format!("time rescaled to a mean of {r} req/s")),
        _ => {}
    }
    if let Some(d) = w.duration_s {
        s.push(format!("cut at {d} s"));
    }
    s
}

impl Offered {
    /// One line: `1,800 requests over 147.3 s (mean 12.2 req/s; peak 31 req/s over 1 s, 18.4
    /// over 10 s, 14.0 over 60 s)`, then the trace's steps.
    pub fn line(&self) -> String {
        let peaks: Vec<String> = PEAK_WINDOWS_S
            .iter()
            .zip(&self.peak_rps)
            .filter_map(|(w, p)| p.map(|p| format!("{p:.1} over {w} s")))
            .collect();
        let peaks = if peaks.is_empty() { String::new() } else { format!("; peak req/s {}", peaks.join(", ")) };
        let digits = self.requests.to_string();
        let requests: String = digits
            .chars()
            .enumerate()
            .flat_map(|(i, c)| ((i > 0 && (digits.len() - i).is_multiple_of(3)).then_some(',')).into_iter().chain([c]))
            .collect();
        let mut l = format!(
            "{requests} requests over {:.1} s (t = {:.1}–{:.1} s; mean {:.2} req/s{peaks})",
            self.last_s - self.first_s,
            self.first_s,
            self.last_s,
            self.mean_rps
        );
        if !self.steps.is_empty() {
            l += &format!("; {}", self.steps.join(" → "));
        }
        l
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arrivals at 0, 0.5, 0.9, 1.0, 5, 20 s: 6 requests over 20 s (0.3 req/s); at most 3 in a
    /// 1 s window ([0, 1) holds 0, 0.5, 0.9; [0.5, 1.5) holds 0.5, 0.9, 1.0), 5 in 10 s
    /// ([0, 10)), none over 60 s (longer than the span).
    #[test]
    fn peaks_count_the_fullest_window() {
        let at: Vec<SimTime> = [0.0, 0.5, 0.9, 1.0, 5.0, 20.0].iter().map(|&s| SimTime::from_secs_f64(s)).collect();
        let o = of_arrivals(&at, Vec::new());
        assert_eq!((o.requests, o.first_s, o.last_s, o.mean_rps), (6, 0.0, 20.0, 0.3));
        assert_eq!(o.peak_rps, [Some(3.0), Some(0.5), None]);
        assert_eq!(
            o.line(),
            "6 requests over 20.0 s (t = 0.0–20.0 s; mean 0.30 req/s; peak req/s 3.0 over 1 s, 0.5 over 10 s)"
        );
    }

    /// A Poisson workload of 2,000 requests at 10 req/s offers them over about 200 s.
    #[test]
    fn a_generated_workload_offers_its_requests() {
        let many = Offered {
            requests: 1_234_567,
            first_s: 0.0,
            last_s: 1.0,
            mean_rps: 0.0,
            peak_rps: [None; 3],
            steps: vec![],
        };
        assert!(many.line().starts_with("1,234,567 requests over 1.0 s"), "{}", many.line());
        let w: WorkloadSpec = toml::from_str(
            "requests = 2000\narrival = { kind = \"poisson\", rate = 10 }\n\
             prompt_tokens = { kind = \"fixed\", value = 10 }\noutput_tokens = { kind = \"fixed\", value = 10 }\n",
        )
        .unwrap();
        let o = offered(&w, 1).unwrap();
        assert_eq!(o.requests, 2000);
        assert!((o.mean_rps - 10.0).abs() < 0.6, "{o:?}");
        assert!(
            o.peak_rps[0].unwrap() >= o.peak_rps[1].unwrap() && o.peak_rps[1].unwrap() >= o.peak_rps[2].unwrap(),
            "{o:?}"
        );
    }
}
