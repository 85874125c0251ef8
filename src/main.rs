//! The `servesim` command-line tool. Only this crate reads files, prints, or looks at the clock;
//! the simulator itself lives in `servesim-sim`.

mod commands;
mod error;
mod output;
mod progress;
mod scenario_file;
mod shard;

use clap::{Parser, Subcommand};

/// servesim — how many GPU instances, of which kind, with which serving policy, meet your
/// latency SLOs.
#[derive(Parser)]
#[command(name = "servesim", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate one deployment under a workload and report latencies, SLO attainment, goodput.
    Simulate(commands::simulate::Args),
    /// Print the per-GPU memory budget of a model on a GPU: weights, reserve, KV blocks.
    Memory(commands::memory::Args),
    /// Measure the simulator's own speed and memory on a fixed scenario.
    Bench(commands::bench::Args),
    /// Find the fewest instances of each candidate configuration that meet the SLOs, and the cheapest.
    Plan(commands::plan::Args),
    /// Compare variants of a scenario (--vary KEY=V1,V2) on the identical request stream.
    Compare(commands::compare::Args),
    /// Join the shard files of a plan or compare sweep (--shard I/N) into its report.
    Merge(commands::merge::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Simulate(a) => commands::simulate::run(a),
        Command::Memory(a) => commands::memory::run(a),
        Command::Bench(a) => commands::bench::run(a),
        Command::Plan(a) => commands::plan::run(a),
        Command::Compare(a) => commands::compare::run(a),
        Command::Merge(a) => commands::merge::run(a),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(e.exit_code());
    }
}
