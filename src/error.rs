//! CLI errors and exit codes: 2 for bad input (scenario, trace, flags), 3 for a run stopped by
//! its event budget (`run.max_events`) or the wall-clock limit (`--time-limit`), 1 for anything
//! else.

use std::fmt;

use servesim_sim::metrics::StopReason;

pub(crate) enum CliError {
    /// The user's input is wrong; exit code 2.
    Input(anyhow::Error),
    /// Something else failed (writing outputs, ...); exit code 1.
    Other(anyhow::Error),
    /// A run stopped before its end (event budget or wall-clock limit); exit code 3.
    Stopped(String),
}

impl CliError {
    pub(crate) fn exit_code(&self) -> i32 {
        match self {
            CliError::Input(_) => 2,
            CliError::Other(_) => 1,
            CliError::Stopped(_) => 3,
        }
    }

    pub(crate) fn input(msg: impl fmt::Display) -> CliError {
        CliError::Input(anyhow::anyhow!("{msg}"))
    }
}

impl fmt::Debug for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:#}")
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
        // An output refused for what the user asked is bad input (exit 2), not a failure.
        if e.chain().any(|c| c.is::<crate::atomic::Refused>()) {
            CliError::Input(e)
        } else {
            CliError::Other(e)
        }
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Other(e.into())
    }
}

pub(crate) type Result<T> = std::result::Result<T, CliError>;

/// What set [`servesim_sim::engine::CANCEL`]: 0 nothing yet, 1 the wall-clock limit, else the
/// number of the signal (SIGINT, SIGTERM) that asked the process to stop.
static STOP_CAUSE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Asks every run in progress to stop at its next check, recording why (the first cause wins).
/// Async-signal-safe: two atomic stores.
fn request_stop(cause: i32) {
    use std::sync::atomic::Ordering;
    let _ = STOP_CAUSE.compare_exchange(0, cause, Ordering::Relaxed, Ordering::Relaxed);
    servesim_sim::engine::CANCEL.store(true, Ordering::Relaxed);
}

/// Once the wall-clock limit has passed or SIGINT/SIGTERM arrived: every run in progress stops at
/// its next check and the command reports this instead of results (exit code 3).
pub(crate) fn cancelled() -> Option<CliError> {
    use std::sync::atomic::Ordering;
    if !servesim_sim::engine::CANCEL.load(Ordering::Relaxed) {
        return None;
    }
    Some(CliError::Stopped(match STOP_CAUSE.load(Ordering::Relaxed) {
        #[cfg(unix)]
        sig @ (libc::SIGINT | libc::SIGTERM) => format!(
            "stopped: {} arrived before the work was done; the outputs written are complete files \
             (a run cut short says so in its summary); a second signal ends the process at once",
            if sig == libc::SIGINT { "SIGINT (Ctrl-C)" } else { "SIGTERM" }
        ),
        _ => format!(
            "stopped: the wall-clock limit (--time-limit {} s) passed before the work was done; \
             raise it, or shorten the workload (workload.requests, workload.duration_s)",
            TIME_LIMIT_S.get().copied().unwrap_or(0.0)
        ),
    }))
}

/// What a run's `summary.stopped.reason` says when it was cancelled: `time_limit`, `SIGINT` or
/// `SIGTERM`.
pub(crate) fn cancel_reason() -> StopReason {
    match STOP_CAUSE.load(std::sync::atomic::Ordering::Relaxed) {
        #[cfg(unix)]
        libc::SIGINT => StopReason::Sigint,
        #[cfg(unix)]
        libc::SIGTERM => StopReason::Sigterm,
        _ => StopReason::TimeLimit,
    }
}

/// `Err` once the command has been asked to stop (see [`cancelled`]): for loops outside the
/// simulator's event loop (candidates, calibration, trace reading) to look at between steps.
pub(crate) fn check_cancel() -> Result<()> {
    cancelled().map_or(Ok(()), Err)
}

/// How long past `--time-limit` (plus a tenth of it) the process may take to stop by itself.
const GRACE_S: f64 = 5.0;

/// `--time-limit`, in seconds, once set.
pub(crate) static TIME_LIMIT_S: std::sync::OnceLock<f64> = std::sync::OnceLock::new();

/// Starts the wall-clock guard: after `seconds`, [`servesim_sim::engine::CANCEL`] is set.
pub(crate) fn start_time_limit(seconds: f64) {
    let _ = TIME_LIMIT_S.set(seconds);
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
        request_stop(1);
        // Runs stop within milliseconds of the request; what can ignore it is a read blocked
        // on its input (a FIFO nobody writes) or a long write of outputs. Past the grace period
        // the process ends anyway: outputs not yet renamed into place are absent, never half.
        let grace = GRACE_S + seconds * 0.1;
        std::thread::sleep(std::time::Duration::from_secs_f64(grace));
        force_exit(&format!(
            "stopped: the wall-clock limit (--time-limit {seconds} s) passed and the command had not \
             stopped {grace:.0} s later (blocked reading an input?); outputs not written by then are absent"
        ));
    });
}

/// Ends the process with `msg` (exit code 3) from a watchdog thread, whatever the main thread is
/// doing: raw writes (the main thread may hold the stdout/stderr locks, blocked on a full pipe),
/// temporaries removed, so outputs not yet renamed into place are absent, never half.
fn force_exit(msg: &str) -> ! {
    #[cfg(unix)]
    {
        let raw = |fd: i32, text: String| {
            // SAFETY: writing a valid buffer to a file descriptor; failures are ignored.
            unsafe { libc::write(fd, text.as_ptr().cast(), text.len()) };
        };
        if !STDOUT_USED.load(std::sync::atomic::Ordering::Relaxed) {
            raw(1, format!("STOPPED{}\n", msg.strip_prefix("stopped").unwrap_or(msg)));
        }
        raw(2, format!("error: {msg}\n"));
    }
    #[cfg(not(unix))]
    write_stderr(format_args!("error: {msg}\n"));
    crate::atomic::remove_temporaries();
    std::process::exit(3);
}

/// How long after SIGINT or SIGTERM the process may take to stop by itself (finish the step in
/// progress and write what a stopped command writes) before the watchdog ends it.
const SIGNAL_GRACE_S: f64 = 2.0;

/// The write end of the pipe the signal handler wakes the watchdog through (-1: none).
#[cfg(unix)]
static SIGNAL_PIPE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// SIGINT and SIGTERM stop the command like `--time-limit` does: runs stop at their next check,
/// the files already written stay whole, the exit code is 3. Whatever the command is doing —
/// a step that does not check, an `open` or `read` blocked on a FIFO nobody writes — a watchdog
/// ends it [`SIGNAL_GRACE_S`] after the signal. The handler puts the default action back, so a
/// second signal ends the process at once (its temporaries are hidden files; no output is ever
/// half written).
#[cfg(unix)]
pub(crate) fn install_signal_handlers() {
    use std::sync::atomic::Ordering;
    extern "C" fn on_signal(sig: libc::c_int) {
        request_stop(sig);
        let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
        // SAFETY: signal() and write() are async-signal-safe; SIG_DFL is a valid disposition and
        // the buffer is a valid byte.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            if fd >= 0 {
                libc::write(fd, [sig as u8].as_ptr().cast(), 1);
            }
        }
    }
    let mut fds = [-1; 2];
    // SAFETY: pipe() fills a two-element array.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } == 0 {
        SIGNAL_PIPE.store(fds[1], Ordering::Relaxed);
        let read_end = fds[0];
        std::thread::spawn(move || {
            let mut byte = [0u8; 1];
            loop {
                // SAFETY: reading one byte into a valid buffer from our own pipe.
                let n = unsafe { libc::read(read_end, byte.as_mut_ptr().cast(), 1) };
                if n == 1 || (n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted) {
                    break;
                }
            }
            std::thread::sleep(std::time::Duration::from_secs_f64(SIGNAL_GRACE_S));
            let name = if STOP_CAUSE.load(Ordering::Relaxed) == libc::SIGINT { "SIGINT (Ctrl-C)" } else { "SIGTERM" };
            force_exit(&format!(
                "stopped: {name} arrived and the command had not stopped {SIGNAL_GRACE_S:.0} s later (blocked \
                 reading an input?); outputs not written by then are absent"
            ));
        });
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to atomics and calls signal() and write(), all
        // async-signal-safe.
        unsafe {
            libc::signal(sig, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        }
    }
}

#[cfg(not(unix))]
pub fn install_signal_handlers() {}

/// The error for a run whose summary says it stopped early, naming what stopped it.
pub(crate) fn stopped_run(s: &servesim_sim::Scenario, st: &servesim_sim::metrics::StoppedEarly) -> CliError {
    match st.reason {
        StopReason::EventBudget => CliError::Stopped(format!(
            "stopped: the run reached its event budget, run.max_events = {}, at simulated time {:.3} s; \
             the outputs written cover the run so far (unfinished requests count as in flight). \
             Raise run.max_events, or shorten the workload",
            s.run.max_events, st.at_s
        )),
        StopReason::RequestBudget => CliError::Stopped(format!(
            "stopped: the run reached its request bound, run.max_requests = {}, at simulated time {:.3} s; \
             the outputs written cover the run so far. Raise run.max_requests (about 56 bytes each), or \
             shorten the workload",
            s.run.max_requests, st.at_s
        )),
        StopReason::SeriesBudget => CliError::Stopped(format!(
            "stopped: the time series reached its bound of {} windows of metrics.window_s = {} s at simulated time \
             {:.3} s (a long idle gap or a very low arrival rate); the outputs written cover the run so far. \
             Raise metrics.window_s",
            servesim_sim::metrics::MAX_WINDOWS,
            s.metrics.window_s,
            st.at_s
        )),
        StopReason::Cancelled | StopReason::TimeLimit | StopReason::Sigint | StopReason::Sigterm => {
            cancelled().unwrap_or_else(|| CliError::Stopped("stopped: the run was cancelled".into()))
        }
    }
}

/// The first failed write to standard output or error, once one failed.
static STDIO_FAILED: std::sync::OnceLock<String> = std::sync::OnceLock::new();

fn write_to(w: &mut dyn std::io::Write, name: &str, args: fmt::Arguments<'_>) {
    if STDIO_FAILED.get().is_none() {
        if let Err(e) = w.write_fmt(args) {
            let _ = STDIO_FAILED.set(format!("writing to standard {name}: {e}"));
        }
    }
}

/// Whether anything was printed on stdout.
static STDOUT_USED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// What `outln!`/`out!` call: writes to stdout; a failure is kept for [`stdio_failure`].
pub(crate) fn write_stdout(args: fmt::Arguments<'_>) {
    STDOUT_USED.store(true, std::sync::atomic::Ordering::Relaxed);
    write_to(&mut std::io::stdout().lock(), "output", args);
}

/// For a command stopped before it printed anything: stdout's first line says so too, so that
/// a script reading stdout never takes an empty or partial answer for a result.
pub(crate) fn announce_stop(e: &CliError) {
    if let CliError::Stopped(msg) = e {
        if !STDOUT_USED.load(std::sync::atomic::Ordering::Relaxed) {
            let rest = msg.strip_prefix("stopped").unwrap_or(msg);
            write_stdout(format_args!("STOPPED{rest}\n"));
        }
    }
}

/// What `errln!`/`err!` call: writes to stderr; a failure is kept for [`stdio_failure`].
pub(crate) fn write_stderr(args: fmt::Arguments<'_>) {
    write_to(&mut std::io::stderr().lock(), "error", args);
}

/// Flushes stdout; `Err` (exit code 1) if that or any earlier write to stdout/stderr failed.
pub(crate) fn stdio_failure() -> Result<()> {
    use std::io::Write;
    if let Err(e) = std::io::stdout().flush() {
        let _ = STDIO_FAILED.set(format!("writing to standard output: {e}"));
    }
    match STDIO_FAILED.get() {
        Some(m) => Err(CliError::Other(anyhow::anyhow!("{m}"))),
        None => Ok(()),
    }
}

/// The largest `RAYON_NUM_THREADS` accepted: more threads than this cannot speed anything up
/// here, and rayon panics when the system refuses to start them.
pub(crate) const MAX_THREADS: usize = 1024;

/// Checks `RAYON_NUM_THREADS` (the thread count of plan, compare and validate sweeps; results do
/// not depend on it) and starts the pool, so a bad value is one clear error instead of a panic.
pub(crate) fn check_rayon_threads() -> Result<()> {
    let n = match std::env::var("RAYON_NUM_THREADS") {
        Err(std::env::VarError::NotPresent) => return Ok(()),
        Err(std::env::VarError::NotUnicode(v)) => {
            return Err(CliError::input(format!("RAYON_NUM_THREADS: not a number, got {v:?}")));
        }
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n <= MAX_THREADS => n,
            _ => {
                return Err(CliError::input(format!(
                    "RAYON_NUM_THREADS: must be a whole number from 0 (one per core) to {MAX_THREADS}, got {v:?}"
                )));
            }
        },
    };
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build_global()
        .map_err(|e| CliError::Other(anyhow::anyhow!("starting {n} threads (RAYON_NUM_THREADS): {e}")))
}
