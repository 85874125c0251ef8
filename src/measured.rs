//! Measured serving runs as users have them, read for `validate --measured` and `calibrate
//! fit`: per-request files (replayed) and benchmark summaries (re-created), recognised from
//! their content, hashed, with `--column KEY=NAME` renames.

use std::path::Path;

use servesim_sim::calibration::{Measured, Origin};
use servesim_sim::metrics::bench;
use servesim_sim::metrics::measured::{self, MeasuredFormat};

use crate::error::{CliError, Result};

/// `--measured-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum MeasuredKind {
    /// Recognised from the content.
    Auto,
    /// vLLM's `bench serve --save-result --save-detailed` JSON, or SGLang bench_serving's output file.
    Vllm,
    /// AIPerf's profile_export.jsonl.
    Aiperf,
    /// One JSON object per request with arrival, first-token and last-token times (or vLLM's
    /// engine-side request stats: queued_ts, first_token_ts, last_token_ts).
    Jsonl,
    /// One row per request.
    Csv,
    /// A benchmark's statistics: vLLM's or SGLang's result JSON without per-request data,
    /// AIPerf's summary export, the benchmark's printed result, or a CSV with a row per run.
    Summary,
}

/// A measured file: where it is (and its SHA-256), and the runs in it.
pub(crate) struct MeasuredFile {
    pub origin: Origin,
    pub runs: Vec<Measured>,
}

/// `--column KEY=NAME`.
pub(crate) fn parse_column(v: &str) -> std::result::Result<(String, String), String> {
    match v.split_once('=') {
        Some((k, n)) if !k.trim().is_empty() && !n.trim().is_empty() => Ok((k.trim().into(), n.trim().into())),
        _ => Err(format!("{v:?} is not KEY=NAME (servesim's name = the file's)")),
    }
}

/// The hex SHA-256 of bytes.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads a measured file: its runs, and its origin.
pub(crate) fn read(path: &Path, kind: MeasuredKind, columns: &[(String, String)]) -> Result<MeasuredFile> {
    let label = path.display().to_string();
    let text = crate::input::read_text(path, "measured run")?;
    let origin = Origin { file: label.clone(), sha256: sha256_hex(text.as_bytes()) };
    let text = measured::rename_columns(&text, &label, columns).map_err(CliError::input)?;
    let summary = match kind {
        MeasuredKind::Summary => true,
        MeasuredKind::Auto => bench::is_summary(&text),
        _ => false,
    };
    let runs = if summary {
        bench::parse(&text, &label).map_err(CliError::input)?.into_iter().map(Measured::Bench).collect()
    } else {
        let format = match kind {
            MeasuredKind::Vllm => Some(MeasuredFormat::Vllm),
            MeasuredKind::Aiperf => Some(MeasuredFormat::Aiperf),
            MeasuredKind::Jsonl => Some(MeasuredFormat::Jsonl),
            MeasuredKind::Csv => Some(MeasuredFormat::Csv),
            MeasuredKind::Auto | MeasuredKind::Summary => None,
        };
        vec![Measured::Requests(measured::parse(&text, &label, format).map_err(CliError::input)?)]
    };
    Ok(MeasuredFile { origin, runs })
}
