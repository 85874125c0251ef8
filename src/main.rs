//! The `servesim` command-line tool. Only this crate reads files, prints, or looks at the clock;
//! the simulator itself lives in `servesim-sim`.

#![warn(unreachable_pub)]

/// `println!` that never panics: a failed write to standard output (a full disk, `> /dev/full`)
/// is remembered and the command ends with exit code 1 saying so.
macro_rules! outln {
    () => { $crate::error::write_stdout(format_args!("\n")) };
    ($($t:tt)*) => { $crate::error::write_stdout(format_args!("{}\n", format_args!($($t)*))) };
}

/// `print!` that never panics (see [`outln!`]).
macro_rules! out {
    ($($t:tt)*) => { $crate::error::write_stdout(format_args!($($t)*)) };
}

/// `eprintln!` that never panics: a failed write to standard error ends the command with exit 1.
macro_rules! errln {
    () => { $crate::error::write_stderr(format_args!("\n")) };
    ($($t:tt)*) => { $crate::error::write_stderr(format_args!("{}\n", format_args!($($t)*))) };
}

/// `eprint!` that never panics (see [`errln!`]).
macro_rules! err {
    ($($t:tt)*) => { $crate::error::write_stderr(format_args!($($t)*)) };
}

mod aic;
mod atomic;
mod commands;
mod error;
mod input;
mod manifest;
mod measured;
mod output;
mod progress;
mod report;
mod rows;
mod scenario_file;
mod shard;
mod trace_source;

use clap::{Parser, Subcommand};

/// servesim — how many GPU instances, of which kind, with which serving policy, meet your
/// latency SLOs.
#[derive(Parser)]
#[command(name = "servesim", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Wall-clock limit in seconds for the whole command: runs still going then stop, and the
    /// command exits with code 3 and says so (each run also has an event budget, run.max_events).
    #[arg(long, global = true, value_name = "SECONDS", value_parser = parse_time_limit)]
    time_limit: Option<f64>,
}

fn parse_time_limit(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x < 1e9 => Ok(x),
        _ => Err(format!("{v:?} is not a number of seconds > 0")),
    }
}

#[derive(Subcommand)]
enum Command {
    /// Simulate one deployment under a workload and report latencies, SLO attainment, goodput.
    Simulate(commands::simulate::Args),
    /// Print the per-GPU memory budget of a model on a GPU: weights, reserve, KV blocks.
    Memory(commands::memory::Args),
    /// Measure the simulator's own speed and memory on a fixed scenario.
    Bench(commands::bench::Args),
    /// Write the HTML report of an existing run's output folder.
    Report(commands::report::Args),
    /// Profile, fit or generate workloads: `workload describe`, `workload fit`, `workload generate`.
    Workload(commands::workload::Args),
    /// Measure kernels on a GPU (or the CPU) and fit a cost profile, import Vidur's or AIConfigurator's, or fit a calibration on your own measured runs.
    Calibrate(commands::calibrate::Args),
    /// Inspect a cost profile: its ops and errors, or one op's predicted time.
    Profile(commands::profile::Args),
    /// Find the fewest instances of each candidate configuration that meet the SLOs, and the cheapest.
    Plan(commands::plan::Args),
    /// Search the [tune] knobs (GPU, TP, batch limits, batching, router, prefix caching, weights): the cheapest configuration meeting the SLOs, the cost/latency frontier, the winner as a scenario and a launch command.
    Tune(commands::tune::Args),
    /// Compare variants of a scenario (--vary KEY=V1,V2) on the identical request stream.
    Compare(commands::compare::Args),
    /// Join the shard files of a plan or compare sweep (--shard I/N) into its report.
    Merge(commands::merge::Args),
    /// Predicted vs executed: emulated runs, iteration times, or a measured serving run.
    Validate(commands::validate::Args),
    /// Write an editable scenario from a real launch command: `scenario from-vllm -- <vllm serve args>`.
    Scenario(commands::scenario::Args),
}

fn main() {
    // Rust ignores SIGPIPE, so printing into a closed pipe (`servesim simulate | head`) would
    // be an error at every print; the default action ends the process quietly, as for `cat`.
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        // A file over the size limit (`ulimit -f`, some quota setups) is then a write error
        // like a full disk, not a killed process.
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let cli = Cli::parse();
    if let Err(e) = error::check_rayon_threads() {
        finish(Err(e));
    }
    error::install_signal_handlers();
    if let Some(t) = cli.time_limit {
        error::start_time_limit(t);
    }
    let result = match cli.command {
        Command::Simulate(a) => commands::simulate::run(a),
        Command::Memory(a) => commands::memory::run(a),
        Command::Bench(a) => commands::bench::run(a),
        Command::Report(a) => commands::report::run(a),
        Command::Workload(a) => commands::workload::run(a),
        Command::Calibrate(a) => commands::calibrate::run(a),
        Command::Profile(a) => commands::profile::run(a),
        Command::Plan(a) => commands::plan::run(a),
        Command::Tune(a) => commands::tune::run(a),
        Command::Compare(a) => commands::compare::run(a),
        Command::Merge(a) => commands::merge::run(a),
        Command::Validate(a) => commands::validate::run(a),
        Command::Scenario(a) => commands::scenario::run(a),
    };
    finish(result.and_then(|()| error::check_cancel()));
}

/// Flushes standard output and ends the process: exit 0, or the error's code with its message
/// on stderr; a failed write to stdout or stderr on the way is exit code 1.
fn finish(result: error::Result<()>) -> ! {
    // An error after a stop request (a loop cut short) is reported as the stop it follows from.
    let result = match result {
        Err(e) if !matches!(e, error::CliError::Stopped(_)) => Err(error::cancelled().unwrap_or(e)),
        r => r.and_then(|()| error::check_cancel()),
    };
    if let Err(e) = &result {
        error::announce_stop(e);
    }
    let code = match result.and_then(|()| error::stdio_failure()) {
        Ok(()) => 0,
        Err(e) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            e.exit_code()
        }
    };
    atomic::remove_temporaries();
    std::process::exit(code)
}
