//! The profile of a request stream (`servesim workload describe`): rate and burstiness, lengths,
//! prefix reuse, sessions.
//!
//! Requests are pushed one at a time in arrival order. Counters are streaming; the lengths are
//! kept (4 bytes each) so that percentiles are exact, and prefix reuse keeps one hash per
//! distinct content segment (it is an unbounded cache by definition).
//!
//! Definitions (each test recomputes them from the raw files):
//! - duration = last arrival − first arrival; mean rate = requests / duration;
//! - inter-arrival CV = population standard deviation / mean of the gaps between consecutive
//!   arrivals;
//! - windows of width w start at the first arrival; only complete windows count (the partial
//!   one at the end is left out); rate per window = count / w; index of dispersion = population
//!   variance / mean of the counts;
//! - percentiles interpolate linearly (numpy's default);
//! - prefix reuse = tokens of the leading content segments already seen by an unbounded block
//!   cache (every segment of every earlier request) / all prompt tokens.

use std::collections::HashSet;

use serde::Serialize;

use super::Request;
use crate::time::SimTime;
use crate::workload::NO_SESSION;

/// Prompt lengths below the first bound are short, from it to below the second medium, the rest
/// long.
pub const PROMPT_BANDS: [u32; 2] = [1024, 8192];
/// The same for output lengths.
pub const OUTPUT_BANDS: [u32; 2] = [128, 1024];
/// Window widths of the index of dispersion, seconds.
pub const DISPERSION_WINDOWS_S: [u64; 3] = [1, 10, 60];

/// What `describe` reports (`--format json` writes exactly this).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Profile {
    pub requests: u64,
    pub duration_s: f64,
    pub rate_mean_rps: f64,
    pub interarrival_cv: f64,
    /// Rates over complete windows of `rate_window_s`; null when the stream is shorter than one.
    pub rate_window_s: f64,
    pub rate_rps: Option<WindowRates>,
    /// Index of dispersion of counts at 1, 10 and 60 s windows (1 for Poisson, > 1 bursty);
    /// null when the stream is shorter than two such windows.
    pub index_of_dispersion: Dispersion,
    pub prompt_tokens: Lengths,
    pub output_tokens: Lengths,
    pub prefix_reuse_token_fraction: f64,
    /// Requests that hit the cache for at least one leading segment.
    pub prefix_hit_requests: u64,
    /// Requests that carry identified content (hash ids, prefixes).
    pub requests_with_content: u64,
    pub sessions: Option<Sessions>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowRates {
    pub windows: u64,
    pub min: f64,
    pub mean: f64,
    pub max: f64,
    pub peak_to_mean: f64,
    /// Complete windows without a single arrival.
    pub idle_windows: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Dispersion {
    #[serde(rename = "1s")]
    pub w1: Option<f64>,
    #[serde(rename = "10s")]
    pub w10: Option<f64>,
    #[serde(rename = "60s")]
    pub w60: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Lengths {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub min: u32,
    pub max: u32,
    /// Bounds of the bands: short < bands[0] ≤ medium < bands[1] ≤ long.
    pub bands: [u32; 2],
    pub short: f64,
    pub medium: f64,
    pub long: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sessions {
    pub count: u64,
    pub requests_with_session: u64,
    pub requests_per_session_mean: f64,
}

/// Counts per window of one width, closing windows as arrivals move past them.
#[derive(Clone, Debug)]
struct WindowCounter {
    width: u64,
    index: u64,
    count: u64,
    closed: u64,
    sum: f64,
    sum_sq: f64,
    min: u64,
    max: u64,
    idle: u64,
    /// Every closed count, when asked for (the fit's phases).
    keep: Option<Vec<u64>>,
    /// More than [`MAX_RATE_WINDOWS`] windows were needed: the counts stop there.
    overflow: bool,
}

/// The most windows a profile counts (80 MB of counts): a window far narrower than the
/// workload's span (`--window-s 1e-9` on an hour) is an error, not an endless loop.
pub const MAX_RATE_WINDOWS: u64 = 10_000_000;

impl WindowCounter {
    fn new(width: u64, keep: bool) -> WindowCounter {
        WindowCounter {
            width: width.max(1),
            index: 0,
            count: 0,
            closed: 0,
            sum: 0.0,
            sum_sq: 0.0,
            min: u64::MAX,
            max: 0,
            idle: 0,
            keep: keep.then(Vec::new),
            overflow: false,
        }
    }

    fn close(&mut self, c: u64) {
        self.closed += 1;
        self.sum += c as f64;
        self.sum_sq += (c as f64) * (c as f64);
        self.min = self.min.min(c);
        self.max = self.max.max(c);
        self.idle += (c == 0) as u64;
        if let Some(k) = &mut self.keep {
            k.push(c);
        }
    }

    /// An arrival `since` ns after the first one.
    fn add(&mut self, since: u64) {
        let i = since / self.width;
        if self.overflow || (self.keep.is_some() && i >= MAX_RATE_WINDOWS) {
            self.overflow = true;
            return;
        }
        if self.index < i {
            let c = std::mem::take(&mut self.count);
            self.close(c);
            self.index += 1;
            // The windows of an idle gap, at once: a count of 0 each.
            let zeros = i - self.index;
            if zeros > 0 {
                self.closed += zeros;
                self.idle += zeros;
                self.min = 0;
                if let Some(k) = &mut self.keep {
                    k.resize(k.len() + zeros as usize, 0);
                }
                self.index = i;
            }
        }
        self.count += 1;
    }

    fn mean(&self) -> f64 {
        self.sum / self.closed as f64
    }

    fn dispersion(&self) -> Option<f64> {
        if self.closed < 2 || self.sum == 0.0 {
            return None;
        }
        let m = self.mean();
        let var = (self.sum_sq / self.closed as f64 - m * m).max(0.0);
        Some(var / m)
    }
}

/// Accumulates a [`Profile`] from requests in arrival order.
pub struct Profiler {
    first: Option<SimTime>,
    last: SimTime,
    n: u64,
    gap_n: u64,
    gap_mean: f64,
    gap_m2: f64,
    rate: WindowCounter,
    dispersion: [WindowCounter; 3],
    prompt: Vec<u32>,
    output: Vec<u32>,
    prompt_sum: u64,
    output_sum: u64,
    cache: HashSet<u64>,
    hit_tokens: u64,
    hit_requests: u64,
    content_requests: u64,
    sessions: HashSet<u64>,
    session_requests: u64,
}

/// A profile and the raw material a fit needs.
pub struct ProfileData {
    pub profile: Profile,
    /// Lengths, sorted.
    pub(crate) prompt_sorted: Vec<u32>,
    pub(crate) output_sorted: Vec<u32>,
    /// Arrivals per complete rate window, then the partial last window's count and width (s).
    pub(crate) window_counts: Vec<u64>,
    pub(crate) tail: (u64, f64),
}

impl Profiler {
    /// `rate_window_s`: the width of the windows whose rates are reported.
    pub fn new(rate_window_s: f64) -> Profiler {
        let ns = |s: f64| (s * 1e9).round().max(1.0) as u64;
        Profiler {
            first: None,
            last: SimTime::ZERO,
            n: 0,
            gap_n: 0,
            gap_mean: 0.0,
            gap_m2: 0.0,
            rate: WindowCounter::new(ns(rate_window_s), true),
            dispersion: DISPERSION_WINDOWS_S.map(|w| WindowCounter::new(w * 1_000_000_000, false)),
            prompt: Vec::new(),
            output: Vec::new(),
            prompt_sum: 0,
            output_sum: 0,
            cache: HashSet::new(),
            hit_tokens: 0,
            hit_requests: 0,
            content_requests: 0,
            sessions: HashSet::new(),
            session_requests: 0,
        }
    }

    /// Whether the rate windows ran past [`MAX_RATE_WINDOWS`] (the window is too narrow for
    /// the workload's span): the profile's rates would be wrong, so callers refuse it.
    pub fn windows_overflowed(&self) -> bool {
        self.rate.overflow
    }

    /// Adds the next request; arrivals must not go backwards.
    pub fn push(&mut self, r: &Request) {
        let first = *self.first.get_or_insert(r.arrival);
        assert!(r.arrival >= self.last, "requests are pushed in arrival order");
        if self.n > 0 {
            // Welford's update of the gap mean and sum of squared deviations.
            let g = (r.arrival - self.last).0 as f64 / 1e9;
            self.gap_n += 1;
            let d = g - self.gap_mean;
            self.gap_mean += d / self.gap_n as f64;
            self.gap_m2 += d * (g - self.gap_mean);
        }
        self.last = r.arrival;
        self.n += 1;
        let since = (r.arrival - first).0;
        self.rate.add(since);
        for c in &mut self.dispersion {
            c.add(since);
        }
        self.prompt.push(r.prompt_tokens);
        self.output.push(r.output_tokens);
        self.prompt_sum += r.prompt_tokens as u64;
        self.output_sum += r.output_tokens as u64;
        if !r.content.is_empty() {
            self.content_requests += 1;
            let mut leading = true;
            let mut hit = 0u64;
            for s in &r.content {
                leading = leading && self.cache.contains(&s.hash);
                if leading {
                    hit += s.tokens as u64;
                }
                self.cache.insert(s.hash);
            }
            self.hit_tokens += hit;
            self.hit_requests += (hit > 0) as u64;
        }
        if r.session != NO_SESSION {
            self.session_requests += 1;
            self.sessions.insert(r.session);
        }
    }

    pub fn requests(&self) -> u64 {
        self.n
    }

    /// The profile; `None` without requests.
    pub fn finish(mut self) -> Option<ProfileData> {
        let first = self.first?;
        let duration_s = (self.last - first).as_secs_f64();
        let n = self.n;
        let rate_window_s = self.rate.width as f64 / 1e9;
        let rate_rps = (self.rate.closed > 0).then(|| {
            let w = rate_window_s;
            let mean = self.rate.mean() / w;
            WindowRates {
                windows: self.rate.closed,
                min: self.rate.min as f64 / w,
                mean,
                max: self.rate.max as f64 / w,
                peak_to_mean: if mean > 0.0 { self.rate.max as f64 / w / mean } else { 0.0 },
                idle_windows: self.rate.idle,
            }
        });
        let [d1, d10, d60] = &self.dispersion;
        self.prompt.sort_unstable();
        self.output.sort_unstable();
        let profile = Profile {
            requests: n,
            duration_s,
            rate_mean_rps: if duration_s > 0.0 { n as f64 / duration_s } else { 0.0 },
            interarrival_cv: if self.gap_n > 0 && self.gap_mean > 0.0 {
                (self.gap_m2 / self.gap_n as f64).sqrt() / self.gap_mean
            } else {
                0.0
            },
            rate_window_s,
            rate_rps,
            index_of_dispersion: Dispersion { w1: d1.dispersion(), w10: d10.dispersion(), w60: d60.dispersion() },
            prompt_tokens: lengths(&self.prompt, self.prompt_sum, PROMPT_BANDS),
            output_tokens: lengths(&self.output, self.output_sum, OUTPUT_BANDS),
            prefix_reuse_token_fraction: self.hit_tokens as f64 / self.prompt_sum.max(1) as f64,
            prefix_hit_requests: self.hit_requests,
            requests_with_content: self.content_requests,
            sessions: (self.session_requests > 0).then(|| Sessions {
                count: self.sessions.len() as u64,
                requests_with_session: self.session_requests,
                requests_per_session_mean: self.session_requests as f64 / self.sessions.len() as f64,
            }),
        };
        let tail_s = duration_s - self.rate.closed as f64 * rate_window_s;
        Some(ProfileData {
            profile,
            prompt_sorted: self.prompt,
            output_sorted: self.output,
            window_counts: self.rate.keep.take().unwrap_or_default(),
            tail: (self.rate.count, tail_s.max(0.0)),
        })
    }
}

/// Percentile `p` (0–100) of sorted values, interpolated linearly (numpy's default).
pub fn percentile_u32(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    sorted[lo] as f64 + (sorted[hi] as f64 - sorted[lo] as f64) * (rank - lo as f64)
}

fn lengths(sorted: &[u32], sum: u64, bands: [u32; 2]) -> Lengths {
    let n = sorted.len().max(1) as f64;
    let below = |b: u32| sorted.partition_point(|&x| x < b) as f64;
    Lengths {
        mean: sum as f64 / n,
        p50: percentile_u32(sorted, 50.0),
        p90: percentile_u32(sorted, 90.0),
        p99: percentile_u32(sorted, 99.0),
        min: sorted.first().copied().unwrap_or(0),
        max: sorted.last().copied().unwrap_or(0),
        bands,
        short: below(bands[0]) / n,
        medium: (below(bands[1]) - below(bands[0])) / n,
        long: (n - below(bands[1])) / n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Segment, NO_CLIENT};

    fn req(t_ms: u64, prompt: u32, content: &[(u64, u32)], session: u64) -> Request {
        Request {
            id: 0,
            arrival: SimTime(t_ms * 1_000_000),
            prompt_tokens: prompt,
            output_tokens: 10,
            client: NO_CLIENT,
            session,
            class: 0,
            content: content.iter().map(|&(hash, tokens)| Segment { hash, tokens }).collect(),
        }
    }

    #[test]
    fn hand_computed_profile() {
        // Arrivals at 0, 1, 3, 6 s: gaps 1, 2, 3 (mean 2, population std √(2/3)).
        let mut p = Profiler::new(2.0);
        p.push(&req(0, 100, &[(1, 50), (2, 50)], 7));
        p.push(&req(1000, 200, &[(1, 50), (3, 50)], 7));
        p.push(&req(3000, 300, &[(1, 50), (2, 50), (4, 100)], 8));
        p.push(&req(6000, 2000, &[(9, 10), (2, 50)], NO_SESSION));
        let d = p.finish().unwrap();
        let pr = &d.profile;
        assert_eq!(pr.requests, 4);
        assert_eq!(pr.duration_s, 6.0);
        assert!((pr.rate_mean_rps - 4.0 / 6.0).abs() < 1e-12);
        assert!((pr.interarrival_cv - (2.0f64 / 3.0).sqrt() / 2.0).abs() < 1e-12);
        // 2 s windows from 0: [0,2) has 2, [2,4) has 1, [4,6) has 0; [6,8) is partial.
        assert_eq!(d.window_counts, vec![2, 1, 0]);
        let r = pr.rate_rps.as_ref().unwrap();
        assert_eq!((r.min, r.mean, r.max, r.idle_windows), (0.0, 0.5, 1.0, 1));
        assert_eq!(d.tail, (1, 0.0));
        // 1 s windows: [0,1) 1, [1,2) 1, [2,3) 0, [3,4) 1, [4,5) 0, [5,6) 0 → mean 0.5, var 0.25.
        assert!((pr.index_of_dispersion.w1.unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(pr.index_of_dispersion.w10, None);
        // Hits: request 2 reuses segment 1 (50); request 3 reuses 1 and 2 (100), not 4;
        // request 4 starts with an unseen segment, so its seen segment 2 is not a prefix hit.
        assert!((pr.prefix_reuse_token_fraction - 150.0 / 2600.0).abs() < 1e-12);
        assert_eq!(pr.prefix_hit_requests, 2);
        let s = pr.sessions.as_ref().unwrap();
        assert_eq!((s.count, s.requests_with_session), (2, 3));
        assert_eq!(pr.prompt_tokens.p50, 250.0);
        assert_eq!((pr.prompt_tokens.short, pr.prompt_tokens.medium), (0.75, 0.25));
    }
}
