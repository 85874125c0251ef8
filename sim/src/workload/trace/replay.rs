//! The replay pipeline: order → window → clamps → sample → time scaling → [`Request`].

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::rng::SimRng;
use rand::RngExt;

use super::reader::{Names, RawRecord, Reader};
use super::{TraceError, TraceSpec, Unsorted};
use crate::rng::{substream, Stream};
use crate::time::SimTime;
use crate::workload::{Request, NO_CLIENT};

/// What one pass over a trace found (seed-independent: before sampling).
#[derive(Clone, Debug, PartialEq)]
pub struct TraceScan {
    /// Requests inside the window (all of them without a window).
    pub(crate) requests: u64,
    /// First and last arrival inside the window, in ns on the trace's clock.
    pub(crate) first_ns: i64,
    pub(crate) last_ns: i64,
    /// Requests that came after a later timestamp in the file (sorted by the reorder window).
    pub reordered: u64,
}

impl TraceScan {
    /// Seconds from the first to the last request of the window.
    pub fn span_s(&self) -> f64 {
        (self.last_ns - self.first_ns) as f64 / 1e9
    }
}

/// Reads the trace once (the window only) and checks every record on the way.
pub fn scan(spec: &TraceSpec) -> Result<TraceScan, TraceError> {
    let mut w = Windowed::open(spec)?;
    let mut last = 0;
    for r in &mut w {
        last = r?.t_ns;
    }
    Ok(TraceScan {
        requests: w.in_window,
        first_ns: w.origin.expect("a window with requests has a first one"),
        last_ns: last,
        reordered: w.ordered.reordered,
    })
}

/// A record in the reorder heap, ordered by (time, position in the file).
struct Held {
    seq: u64,
    rec: RawRecord,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.rec.t_ns, self.seq) == (o.rec.t_ns, o.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.rec.t_ns, self.seq).cmp(&(o.rec.t_ns, o.seq))
    }
}

/// Records in timestamp order: checked (`unsorted = "error"`), or sorted through a bounded heap
/// of `reorder_window` records (`unsorted = "sort"`).
struct Ordered {
    reader: Reader,
    names: Names,
    sort: bool,
    window: usize,
    heap: BinaryHeap<Reverse<Held>>,
    seq: u64,
    /// Time and line of the last record given out.
    last: Option<(i64, u64)>,
    /// Latest time read so far.
    max_seen: i64,
    reordered: u64,
    records: u64,
    eof: bool,
}

impl Ordered {
    fn out_of_order(&self, rec: &RawRecord, prev: (i64, u64), how: &str) -> TraceError {
        let back = (prev.0 - rec.t_ns) as f64 / 1e9;
        TraceError::field(
            self.reader.file(),
            rec.line,
            &self.names.arrival,
            format!("{back} s earlier than line {}: timestamps go backwards; {how}", prev.1),
        )
    }
}

impl Iterator for Ordered {
    type Item = Result<RawRecord, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if !self.sort {
            let rec = match self.reader.next()? {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            };
            self.records += 1;
            self.max_seen = rec.t_ns;
            if let Some(prev) = self.last {
                if rec.t_ns < prev.0 {
                    return Some(Err(self.out_of_order(&rec, prev, "sort the trace, or set unsorted = \"sort\"")));
                }
            }
            self.last = Some((rec.t_ns, rec.line));
            return Some(Ok(rec));
        }
        while !self.eof && self.heap.len() <= self.window {
            match self.reader.next() {
                None => self.eof = true,
                Some(Err(e)) => return Some(Err(e)),
                Some(Ok(rec)) => {
                    self.records += 1;
                    if self.records > 1 && rec.t_ns < self.max_seen {
                        self.reordered += 1;
                    }
                    self.max_seen = if self.records == 1 { rec.t_ns } else { self.max_seen.max(rec.t_ns) };
                    self.heap.push(Reverse(Held { seq: self.seq, rec }));
                    self.seq += 1;
                }
            }
        }
        let Reverse(Held { rec, .. }) = self.heap.pop()?;
        if let Some(prev) = self.last {
            if rec.t_ns < prev.0 {
                let how = format!(
                    "it is out of order by more than reorder_window = {} requests; raise reorder_window or sort the trace",
                    self.window
                );
                return Some(Err(self.out_of_order(&rec, prev, &how)));
            }
        }
        self.last = Some((rec.t_ns, rec.line));
        Some(Ok(rec))
    }
}

/// Ordered records inside the window, with length clamps applied and checked.
struct Windowed {
    ordered: Ordered,
    file: String,
    spec_window: Option<[f64; 2]>,
    window_ns: Option<(i64, i64)>,
    t0: Option<i64>,
    /// The first arrival of the window: time zero of the replay.
    origin: Option<i64>,
    in_window: u64,
    clamp_prompt: (u64, u64),
    clamp_output: (u64, u64),
    done: bool,
}

impl Windowed {
    fn open(spec: &TraceSpec) -> Result<Windowed, TraceError> {
        let src = spec.source.as_ref().ok_or_else(|| {
            TraceError::file(
                spec.label(),
                "no way to open the trace (the program reading the scenario gives one)".into(),
            )
        })?;
        let reader = Reader::new(spec, src.open()?)?;
        let names = reader.names();
        let file = reader.file().to_string();
        let to_ns = |s: f64| (s * 1e9).round() as i64;
        Ok(Windowed {
            ordered: Ordered {
                reader,
                names,
                sort: spec.unsorted == Unsorted::Sort,
                window: spec.reorder_window as usize,
                heap: BinaryHeap::new(),
                seq: 0,
                last: None,
                max_seen: 0,
                reordered: 0,
                records: 0,
                eof: false,
            },
            file,
            spec_window: spec.window_s,
            window_ns: spec.window_s.map(|[a, b]| (to_ns(a), to_ns(b))),
            t0: None,
            origin: None,
            in_window: 0,
            clamp_prompt: (
                spec.min_prompt_tokens.unwrap_or(0) as u64,
                spec.max_prompt_tokens.map(|m| m as u64).unwrap_or(u64::MAX),
            ),
            clamp_output: (
                spec.min_output_tokens.unwrap_or(0) as u64,
                spec.max_output_tokens.map(|m| m as u64).unwrap_or(u64::MAX),
            ),
            done: false,
        })
    }

    fn names(&self) -> &Names {
        &self.ordered.names
    }

    /// Clamps the lengths (dropping content segments that no longer fit whole) and checks them.
    fn clamp(&self, mut r: RawRecord) -> Result<RawRecord, TraceError> {
        r.prompt = r.prompt.clamp(self.clamp_prompt.0, self.clamp_prompt.1);
        r.output = r.output.clamp(self.clamp_output.0, self.clamp_output.1);
        let n = self.names();
        for (v, name, key, what) in
            [(r.prompt, &n.prompt, "min_prompt_tokens", "prompt"), (r.output, &n.output, "min_output_tokens", "output")]
        {
            if v == 0 {
                return Err(TraceError::field(
                    &self.file,
                    r.line,
                    name,
                    format!("0 tokens: a request needs at least one {what} token (set {key} = 1 to raise it)"),
                ));
            }
            if v > u32::MAX as u64 {
                return Err(TraceError::field(&self.file, r.line, name, format!("{v} tokens is too many")));
            }
        }
        let mut sum = 0u64;
        let keep = r
            .content
            .iter()
            .take_while(|s| {
                sum += s.tokens as u64;
                sum <= r.prompt
            })
            .count();
        r.content.truncate(keep);
        Ok(r)
    }
}

impl Iterator for Windowed {
    type Item = Result<RawRecord, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        loop {
            let rec = match self.ordered.next() {
                Some(Ok(r)) => r,
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                None => {
                    self.done = true;
                    if self.in_window > 0 {
                        return None;
                    }
                    let msg = match (self.ordered.records, self.spec_window, self.t0) {
                        (0, _, _) => "no requests: the file has no records".to_string(),
                        (_, Some([a, b]), Some(t0)) => format!(
                            "no requests in window_s [{a}, {b}): the trace spans {} s",
                            (self.ordered.max_seen - t0) as f64 / 1e9
                        ),
                        _ => "no requests".to_string(),
                    };
                    return Some(Err(TraceError::file(&self.file, msg)));
                }
            };
            let t0 = *self.t0.get_or_insert(rec.t_ns);
            if let Some((a, b)) = self.window_ns {
                let rel = rec.t_ns - t0;
                if rel < a {
                    continue;
                }
                if rel >= b {
                    // Records are in time order: nothing later is in the window.
                    self.done = true;
                    if self.in_window == 0 {
                        return Some(Err(TraceError::file(
                            &self.file,
                            format!("no requests in window_s [{}, {})", a as f64 / 1e9, b as f64 / 1e9),
                        )));
                    }
                    return None;
                }
            }
            self.origin.get_or_insert(rec.t_ns);
            self.in_window += 1;
            return Some(self.clamp(rec));
        }
    }
}

/// Replays a trace as requests, one at a time.
pub struct TraceReplay {
    windowed: Windowed,
    /// Divides trace time: 2 plays twice as fast.
    speedup: f64,
    sample: Option<(f64, SimRng)>,
    produced: u64,
    failed: bool,
}

impl TraceReplay {
    /// Opens the trace of `spec` (through its source) for a run with `seed`. A target rate needs
    /// the trace's own rate first: the source's cached scan, or one more pass over the file.
    pub fn new(spec: &TraceSpec, seed: u64) -> Result<TraceReplay, TraceError> {
        let windowed = Windowed::open(spec)?;
        let speedup = match (spec.speedup, spec.target_rate) {
            (Some(k), _) => k,
            (None, Some(target)) => {
                let cached = spec.source.as_ref().and_then(|s| s.scan.clone());
                let sc = match cached {
                    Some(s) => s,
                    None => scan(spec)?,
                };
                let span = sc.span_s();
                if sc.requests < 2 || span <= 0.0 {
                    return Err(TraceError::file(
                        spec.label(),
                        format!(
                            "target_rate needs a trace with a duration; this one has {} requests over {span} s",
                            sc.requests
                        ),
                    ));
                }
                let natural = spec.sample.unwrap_or(1.0) * sc.requests as f64 / span;
                target / natural
            }
            (None, None) => 1.0,
        };
        let sample = spec.sample.filter(|&p| p < 1.0).map(|p| (p, substream(seed, Stream::Sampling, 0)));
        Ok(TraceReplay { windowed, speedup, sample, produced: 0, failed: false })
    }

    /// The factor trace time is divided by.
    pub fn speedup(&self) -> f64 {
        self.speedup
    }

    /// Requests the file had out of timestamp order (sorted) so far.
    pub fn reordered(&self) -> u64 {
        self.windowed.ordered.reordered
    }
}

impl Iterator for TraceReplay {
    type Item = Result<Request, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        loop {
            let rec = match self.windowed.next() {
                Some(Ok(r)) => r,
                Some(Err(e)) => {
                    self.failed = true;
                    return Some(Err(e));
                }
                None if self.produced == 0 => {
                    self.failed = true;
                    let p = self.sample.as_ref().map(|s| s.0).unwrap_or(1.0);
                    let n = self.windowed.in_window;
                    return Some(Err(TraceError::file(
                        &self.windowed.file,
                        format!("sample = {p} kept none of the {n} requests"),
                    )));
                }
                None => return None,
            };
            if let Some((p, rng)) = &mut self.sample {
                if rng.random::<f64>() >= *p {
                    continue;
                }
            }
            let rel = rec.t_ns - self.windowed.origin.expect("set with the first record of the window");
            let at = if self.speedup == 1.0 {
                SimTime(rel as u64)
            } else {
                SimTime((rel as f64 / self.speedup).round() as u64)
            };
            self.produced += 1;
            return Some(Ok(Request {
                id: 0,
                arrival: at,
                prompt_tokens: rec.prompt as u32,
                output_tokens: rec.output as u32,
                client: NO_CLIENT,
                session: rec.session,
                class: rec.class,
                content: rec.content,
            }));
        }
    }
}
