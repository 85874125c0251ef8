//! `servesim report OUTPUT_DIR`: the HTML report of an existing run's outputs.

use std::path::PathBuf;

use crate::error::{CliError, Result};
use crate::report;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// A run's output folder (with summary.json, requests.csv, timeseries.csv, scenario.toml).
    dir: PathBuf,
    /// Where to write the report. Default: DIR/report.html.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Which outputs to report when the folder holds several (required then).
    #[arg(long, value_enum)]
    kind: Option<report::Kind>,
}

pub(crate) fn run(a: Args) -> Result<()> {
    if !a.dir.is_dir() {
        return Err(CliError::input(format!("{}: no such output folder", a.dir.display())));
    }
    let (html, what) = report::report_for_dir(&a.dir, a.kind).map_err(CliError::Input)?;
    let out = a.out.unwrap_or_else(|| a.dir.join("report.html"));
    write(&out, &html)?;
    errln!("report of {what} written to {}", out.display());
    Ok(())
}

/// Writes a report, creating its folder.
pub(crate) fn write(path: &std::path::Path, html: &str) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    crate::atomic::write(path, html).map_err(CliError::from)
}
