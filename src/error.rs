//! CLI errors and exit codes: 2 for bad input (scenario, trace, flags), 3 for a run stopped by
//! its event budget (`run.max_events`) or the wall-clock limit (`--time-limit`), 1 for anything
//! else.

use std::fmt;

pub enum CliError {
    /// The user's input is wrong; exit code 2.
    Input(anyhow::Error),
    /// Something else failed (writing outputs, ...); exit code 1.
    Other(anyhow::Error),
    /// A run stopped before its end (event budget or wall-clock limit); exit code 3.
    Stopped(String),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Input(_) => 2,
            CliError::Other(_) => 1,
            CliError::Stopped(_) => 3,
        }
    }

    pub fn input(msg: impl fmt::Display) -> CliError {
        CliError::Input(anyhow::anyhow!("{msg}"))
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Input(e) | CliError::Other(e) => {
                if f.alternate() {
                    write!(f, "{e:#}")
                } else {
                    write!(f, "{e}")
                }
            }
            CliError::Stopped(why) => write!(f, "{why}"),
        }
    }
}

impl From<anyhow::Error> for CliError {
    fn from(e: anyhow::Error) -> Self {
        CliError::Other(e)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Other(e.into())
    }
}

pub type Result<T> = std::result::Result<T, CliError>;

/// The wall-clock limit (`--time-limit`), once it has passed: every run in progress stops at
/// its next check and the command reports this instead of results.
pub fn time_limit_passed() -> Option<CliError> {
    use std::sync::atomic::Ordering;
    servesim_sim::engine::CANCEL.load(Ordering::Relaxed).then(|| {
        CliError::Stopped(format!(
            "stopped: the wall-clock limit (--time-limit {} s) passed before the work was done; \
             raise it, or shorten the workload (workload.requests, workload.duration_s)",
            TIME_LIMIT_S.get().copied().unwrap_or(0.0)
        ))
    })
}

/// `--time-limit`, in seconds, once set.
pub static TIME_LIMIT_S: std::sync::OnceLock<f64> = std::sync::OnceLock::new();

/// Starts the wall-clock guard: after `seconds`, [`servesim_sim::engine::CANCEL`] is set.
pub fn start_time_limit(seconds: f64) {
    let _ = TIME_LIMIT_S.set(seconds);
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
        servesim_sim::engine::CANCEL.store(true, std::sync::atomic::Ordering::Relaxed);
    });
}

/// The error for a run whose summary says it stopped early, naming what stopped it.
pub fn stopped_run(s: &servesim_sim::Scenario, st: &servesim_sim::metrics::StoppedEarly) -> CliError {
    if st.reason == "event_budget" {
        CliError::Stopped(format!(
            "stopped: the run reached its event budget, run.max_events = {}, at simulated time {:.3} s; \
             the outputs written cover the run so far (unfinished requests count as in flight). \
             Raise run.max_events, or shorten the workload",
            s.run.max_events, st.at_s
        ))
    } else {
        time_limit_passed().unwrap_or_else(|| CliError::Stopped("stopped: the run was cancelled".into()))
    }
}
