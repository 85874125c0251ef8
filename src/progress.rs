//! A progress bar on stderr for sweeps (`plan`, `compare`): shown only when stderr is a
//! terminal, `--quiet` is off, and the sweep has run for more than a second. It never touches
//! stdout, so reports stay byte-identical.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    shown: AtomicBool,
    start: Instant,
    runs: AtomicU64,
    requests: AtomicU64,
}

impl Progress {
    /// A bar over `items` work items (candidates, variants).
    pub(crate) fn new(quiet: bool, what: &str, items: usize) -> Progress {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::with_draw_target(Some(items as u64), ProgressDrawTarget::hidden());
            let style =
                ProgressStyle::with_template(&format!("{what} {{bar:30}} {{pos}}/{{len}} {{msg}} [{{elapsed}}]"))
                    .expect("valid template");
            b.set_style(style);
            b
        });
        Progress {
            bar,
            shown: AtomicBool::new(false),
            start: Instant::now(),
            runs: AtomicU64::new(0),
            requests: AtomicU64::new(0),
        }
    }

    fn show_if_slow(&self, b: &ProgressBar) {
        if !self.shown.load(Ordering::Relaxed) && self.start.elapsed() > Duration::from_secs(1) {
            self.shown.store(true, Ordering::Relaxed);
            b.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    /// One simulation run finished, having simulated `requests` requests.
    pub(crate) fn run_done(&self, requests: u64) {
        let runs = self.runs.fetch_add(1, Ordering::Relaxed) + 1;
        let reqs = self.requests.fetch_add(requests, Ordering::Relaxed) + requests;
        if let Some(b) = &self.bar {
            self.show_if_slow(b);
            b.set_message(format!("{runs} runs, {reqs} requests"));
        }
    }

    /// One work item finished.
    pub(crate) fn item_done(&self) {
        if let Some(b) = &self.bar {
            self.show_if_slow(b);
            b.inc(1);
        }
    }

    pub(crate) fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }

    /// (runs, simulated requests, wall seconds) so far.
    pub(crate) fn totals(&self) -> (u64, u64, f64) {
        (self.runs.load(Ordering::Relaxed), self.requests.load(Ordering::Relaxed), self.start.elapsed().as_secs_f64())
    }
}

/// The planner's searches run on rayon's threads (results in order), counted by the bar.
impl servesim_sim::plan::Runner for Progress {
    fn map<T: Sync, U: Send>(&self, items: &[T], f: impl Fn(&T) -> U + Sync) -> Vec<U> {
        use rayon::prelude::*;
        items.par_iter().map(&f).collect()
    }
    fn run_done(&self, requests: u64) {
        Progress::run_done(self, requests)
    }
    fn item_done(&self) {
        Progress::item_done(self)
    }
    fn runs(&self) -> u64 {
        self.totals().0
    }
}
