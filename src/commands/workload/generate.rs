//! `servesim workload generate`: write a scenario's workload as a trace file, streaming (a
//! 10-million-request trace takes no more memory than a short one).
//!
//! Columns are servesim's own names, so a `csv` or `jsonl` trace reads it back without a
//! mapping: `arrival_s` (exact to the nanosecond), `prompt_tokens`, `output_tokens`. Sessions,
//! classes and content ids are not written.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;

use super::{for_each_request, Input};
use crate::error::{CliError, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OutFormat {
    Csv,
    Jsonl,
}

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    input: Input,
    /// The file to write.
    #[arg(long)]
    out: PathBuf,
    #[arg(long, value_enum, default_value_t = OutFormat::Csv)]
    out_format: OutFormat,
    /// Stop after this many requests (overrides the workload's `requests`).
    #[arg(long)]
    requests: Option<u64>,
    /// Stop after this many seconds (overrides the workload's `duration_s`).
    #[arg(long)]
    duration_s: Option<f64>,
}

pub(crate) fn run(a: Args) -> Result<()> {
    let mut loaded = a.input.load()?;
    if let Some(n) = a.requests {
        if n == 0 {
            return Err(CliError::input("--requests: must be ≥ 1, got 0"));
        }
        loaded.workload.requests = Some(n);
    }
    if let Some(d) = a.duration_s {
        if !(d.is_finite() && d > 0.0 && d <= servesim_sim::workload::MAX_DURATION_S) {
            return Err(CliError::input(format!("--duration-s: must be in (0, 1e9] s, got {d:e}")));
        }
        loaded.workload.duration_s = Some(d);
    }
    // Never write over what is being read (the scenario, its trace): the output is a new file.
    let same = |p: &std::path::Path| match (std::fs::canonicalize(p), std::fs::canonicalize(&a.out)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    };
    let mut inputs: Vec<PathBuf> = a.input.paths().into_iter().map(|p| p.to_path_buf()).collect();
    inputs.extend(loaded.workload.trace.as_ref().map(|t| PathBuf::from(&t.path)));
    if let Some(p) = inputs.iter().find(|p| same(p)) {
        return Err(CliError::input(format!(
            "--out {}: is an input of this command ({}); write elsewhere",
            a.out.display(),
            p.display()
        )));
    }
    let mut w = crate::atomic::AtomicFile::create(&a.out)?;
    let mut io: std::io::Result<()> = Ok(());
    let mut n = 0u64;
    // Shared content and priority classes are written too (as `segments` and `class`) when
    // the workload can have them, so the trace replays exactly the stream simulate runs.
    let rich =
        loaded.workload.prefix.is_some() || loaded.workload.class_weights.is_some() || loaded.workload.trace.is_some();
    if a.out_format == OutFormat::Csv {
        io = if rich {
            writeln!(w, "arrival_s,prompt_tokens,output_tokens,class,segments")
        } else {
            writeln!(w, "arrival_s,prompt_tokens,output_tokens")
        };
    }
    for_each_request(&loaded.workload, loaded.seed, |r| {
        if io.is_err() {
            return;
        }
        let t = r.arrival.0;
        let (s, ns) = (t / 1_000_000_000, t % 1_000_000_000);
        let segments = servesim_sim::workload::trace::segments_text(&r.content);
        io = match (a.out_format, rich) {
            (OutFormat::Csv, false) => writeln!(w, "{s}.{ns:09},{},{}", r.prompt_tokens, r.output_tokens),
            (OutFormat::Csv, true) => {
                writeln!(w, "{s}.{ns:09},{},{},{},{segments}", r.prompt_tokens, r.output_tokens, r.class)
            }
            (OutFormat::Jsonl, false) => writeln!(
                w,
                "{{\"arrival_s\": {s}.{ns:09}, \"prompt_tokens\": {}, \"output_tokens\": {}}}",
                r.prompt_tokens, r.output_tokens
            ),
            (OutFormat::Jsonl, true) => writeln!(
                w,
                "{{\"arrival_s\": {s}.{ns:09}, \"prompt_tokens\": {}, \"output_tokens\": {}, \"class\": {}, \"segments\": \"{segments}\"}}",
                r.prompt_tokens, r.output_tokens, r.class
            ),
        };
        n += 1;
    })?;
    io.with_context(|| format!("writing {}", a.out.display()))?;
    w.commit()?;
    errln!("wrote {n} requests to {}", a.out.display());
    if let Some(want) = a.requests.filter(|&want| n < want) {
        // --requests is a bound, not a promise: say what ended the stream first.
        let why = match (loaded.workload.duration_s, &loaded.workload.trace) {
            (Some(d), _) => format!("the workload's duration of {d} s (workload.duration_s, --duration-s)"),
            (None, Some(_)) => "the end of the trace".to_string(),
            (None, None) => "the end of the workload".to_string(),
        };
        errln!("note: --requests {want} asked for more: {why} ended it after {n}");
    }
    Ok(())
}
