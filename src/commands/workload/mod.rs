//! `servesim workload ...`: profile a trace or a scenario's workload (`describe`), fit a
//! synthetic `[workload]` to it (`fit`), or write a workload out as a trace (`generate`).

pub(crate) mod describe;
pub(crate) mod fit;
pub(crate) mod generate;

use std::io::Read;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use servesim_sim::workload::profile::{ProfileData, Profiler};
use servesim_sim::workload::trace::{Columns, TimeUnit, TraceFormat, TraceSpec, Unsorted};
use servesim_sim::workload::{ArrivalSpec, Workload, WorkloadSpec};

use crate::error::{CliError, Result};
use crate::{scenario_file, trace_source};

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The request profile of a trace or a scenario's workload: rate and burstiness, lengths,
    /// prefix reuse, sessions.
    Describe(describe::Args),
    /// A synthetic `[workload]` section whose statistics match a trace's.
    Fit(fit::Args),
    /// Write a scenario's workload (synthetic, or a transformed trace) as a CSV or JSONL trace.
    Generate(generate::Args),
}

pub(crate) fn run(a: Args) -> Result<()> {
    match a.command {
        Cmd::Describe(a) => describe::run(a),
        Cmd::Fit(a) => fit::run(a),
        Cmd::Generate(a) => generate::run(a),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    Azure,
    Mooncake,
    Csv,
    Jsonl,
}

impl From<FormatArg> for TraceFormat {
    fn from(f: FormatArg) -> TraceFormat {
        match f {
            FormatArg::Azure => TraceFormat::Azure,
            FormatArg::Mooncake => TraceFormat::Mooncake,
            FormatArg::Csv => TraceFormat::Csv,
            FormatArg::Jsonl => TraceFormat::Jsonl,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum UnitArg {
    S,
    Ms,
    Us,
    Ns,
    Datetime,
}

impl From<UnitArg> for TimeUnit {
    fn from(u: UnitArg) -> TimeUnit {
        match u {
            UnitArg::S => TimeUnit::S,
            UnitArg::Ms => TimeUnit::Ms,
            UnitArg::Us => TimeUnit::Us,
            UnitArg::Ns => TimeUnit::Ns,
            UnitArg::Datetime => TimeUnit::Datetime,
        }
    }
}

/// Where the requests come from: a trace file, or a scenario's `[workload]`.
#[derive(clap::Args)]
pub(crate) struct Input {
    /// A trace file (Azure CSV, Mooncake JSONL, or a CSV/JSONL mapped with --column).
    #[arg(long, conflicts_with = "scenario", required_unless_present = "scenario")]
    trace: Option<PathBuf>,
    /// The trace's format. Default: recognised from its first line.
    #[arg(long, value_enum)]
    trace_format: Option<FormatArg>,
    /// Column of a csv/jsonl trace, as KEY=NAME; keys: arrival, prompt_tokens, output_tokens,
    /// session, class, hash_ids, prefix, prefix_tokens. Repeat for several.
    #[arg(long = "column", value_name = "KEY=NAME")]
    columns: Vec<String>,
    /// Unit of a csv/jsonl trace's arrival column (default s).
    #[arg(long, value_enum)]
    arrival_unit: Option<UnitArg>,
    /// Sort a trace whose timestamps go backwards (through a window of 100,000 requests)
    /// instead of stopping with an error.
    #[arg(long)]
    sort: bool,
    /// A scenario: its workload (a trace with its transforms, or the synthetic generator).
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Seed of a scenario's workload (overrides its `seed`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=servesim_sim::scenario::MAX_SEED))]
    seed: Option<u64>,
}

/// Recognises a trace's format from its first line.
fn detect(path: &Path) -> Result<TraceFormat> {
    let mut head = Vec::with_capacity(4096);
    std::fs::File::open(path)
        .and_then(|f| f.take(4096).read_to_end(&mut head))
        .map_err(|e| CliError::input(format!("{}: cannot read: {e}", path.display())))?;
    let text = String::from_utf8_lossy(&head);
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    Ok(if first.trim_start().starts_with('{') {
        if first.contains("\"input_length\"") && first.contains("\"timestamp\"") {
            TraceFormat::Mooncake
        } else {
            TraceFormat::Jsonl
        }
    } else if first.contains("TIMESTAMP") && first.contains("ContextTokens") {
        TraceFormat::Azure
    } else {
        TraceFormat::Csv
    })
}

fn columns(pairs: &[String]) -> Result<Option<Columns>> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let mut c = Columns::default();
    for p in pairs {
        let (k, v) =
            p.split_once('=').ok_or_else(|| CliError::input(format!("--column: expected KEY=NAME, got \"{p}\"")))?;
        let slot = match k.trim() {
            "arrival" => &mut c.arrival,
            "prompt_tokens" => &mut c.prompt_tokens,
            "output_tokens" => &mut c.output_tokens,
            "session" => &mut c.session,
            "class" => &mut c.class,
            "hash_ids" => &mut c.hash_ids,
            "prefix" => &mut c.prefix,
            "prefix_tokens" => &mut c.prefix_tokens,
            other => {
                return Err(CliError::input(format!(
                    "--column: unknown key \"{other}\"; known: arrival, prompt_tokens, output_tokens, session, class, hash_ids, prefix, prefix_tokens"
                )))
            }
        };
        *slot = Some(v.trim().to_string());
    }
    Ok(Some(c))
}

/// What was read: the workload, its seed, and how to name it.
pub(crate) struct Loaded {
    pub workload: WorkloadSpec,
    pub seed: u64,
    pub label: String,
}

impl Input {
    /// The files this input reads (to refuse writing over one of them).
    pub(crate) fn paths(&self) -> Vec<&std::path::Path> {
        self.trace.iter().chain(self.scenario.iter()).map(|p| p.as_path()).collect()
    }

    pub(crate) fn load(&self) -> Result<Loaded> {
        if let Some(p) = &self.scenario {
            let s = scenario_file::load(p)?;
            return Ok(Loaded {
                workload: s.workload.clone(),
                seed: self.seed.unwrap_or(s.seed),
                label: format!("{} ([workload] of {})", s.name, p.display()),
            });
        }
        let given = self.trace.as_ref().expect("clap requires --trace or --scenario");
        // `-`, a FIFO or a device is read once, into a temporary file.
        let readable = crate::input::rereadable(given, "trace")?;
        let path = &readable;
        let format = match self.trace_format {
            Some(f) => f.into(),
            None => detect(path)?,
        };
        let mut spec = TraceSpec::plain(format, path.display().to_string());
        if matches!(format, TraceFormat::Csv | TraceFormat::Jsonl) {
            spec.columns = columns(&self.columns)?;
            spec.arrival_unit = self.arrival_unit.map(Into::into);
        } else if !self.columns.is_empty() || self.arrival_unit.is_some() {
            return Err(CliError::input(format!(
                "--column and --arrival-unit are for csv and jsonl traces; {} is a {} trace",
                given.display(),
                format.name()
            )));
        }
        if self.sort {
            spec.unsorted = Unsorted::Sort;
        }
        let name = if given.as_os_str() == "-" {
            "standard input".to_string()
        } else {
            trace_source::normalize(given).display().to_string()
        };
        let abs = std::fs::canonicalize(path).map_err(|e| CliError::input(format!("{name}: cannot read: {e}")))?;
        trace_source::install(&mut spec, abs, name.clone())?;
        let label = format!("{name} ({})", format.name());
        Ok(Loaded { workload: WorkloadSpec::of_trace(spec), seed: self.seed.unwrap_or(0), label })
    }
}

/// Calls `f` with every request of the workload, in arrival order.
pub(crate) fn for_each_request(
    w: &WorkloadSpec,
    seed: u64,
    mut f: impl FnMut(&servesim_sim::workload::Request),
) -> Result<()> {
    if let Some(ArrivalSpec::ClosedLoop(_)) = &w.arrival {
        return Err(CliError::input(
            "a closed-loop workload's arrivals depend on how fast the service answers; \
             describe open-loop workloads and traces (or simulate it and read requests.csv)",
        ));
    }
    if w.prefix.as_ref().is_some_and(|p| p.sessions.is_some()) {
        return Err(CliError::input(
            "workload.prefix.sessions: a session's later turns arrive a think time after the service's answer \
             to the previous one, so the request stream depends on the service; simulate it and read \
             requests.csv (describe and generate take open-loop workloads without sessions, and traces)",
        ));
    }
    // Refused at once when the workload is known to be too large (rate × duration).
    let expected = match (w.arrival.as_ref().and_then(|a| a.mean_rate()), w.end_s()) {
        (Some(rate), Some(end)) => rate * end,
        _ => 0.0,
    };
    if w.requests.is_none_or(|n| n > MAX_STREAMED_REQUESTS) && expected > MAX_STREAMED_REQUESTS as f64 {
        return Err(CliError::input(format!(
            "the workload would have about {expected:.3e} requests, more than {MAX_STREAMED_REQUESTS}, the most described or \
             generated at once; bound it (workload.requests, workload.duration_s, --requests, --duration-s)"
        )));
    }
    let mut wl = Workload::new(w.clone(), seed);
    for r in wl.initial() {
        f(&r);
    }
    let mut n = 0u64;
    while let Some(r) = wl.next_open() {
        f(&r);
        n += 1;
        if n.is_multiple_of(1 << 16) {
            crate::error::check_cancel()?;
        }
        if n > MAX_STREAMED_REQUESTS {
            return Err(CliError::input(format!(
                "the workload has more than {MAX_STREAMED_REQUESTS} requests, the most described or generated at once; \
                 bound it (workload.requests, workload.duration_s, --requests, --duration-s)"
            )));
        }
    }
    match wl.error() {
        Some(e) => Err(CliError::input(e)),
        None => Ok(()),
    }
}

/// The most requests `workload describe`, `fit` and `generate` stream from one workload (a CSV
/// of that many is over 20 GB at the 21 bytes of a short row).
pub(crate) const MAX_STREAMED_REQUESTS: u64 = 1_000_000_000;

/// The profile of a workload.
pub(crate) fn profile(w: &WorkloadSpec, seed: u64, window_s: f64) -> Result<ProfileData> {
    if !(window_s.is_finite() && window_s > 0.0) {
        return Err(CliError::input(format!("--window-s: must be > 0, got {window_s}")));
    }
    let mut p = Profiler::new(window_s);
    for_each_request(w, seed, |r| p.push(r))?;
    if p.windows_overflowed() {
        return Err(CliError::input(format!(
            "--window-s {window_s}: the workload spans more than {} windows of it (the most counted); raise --window-s",
            servesim_sim::workload::profile::MAX_RATE_WINDOWS
        )));
    }
    p.finish().ok_or_else(|| CliError::input("the workload has no requests"))
}
