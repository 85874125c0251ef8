//! `servesim merge DIR...`: joins the shard files of a `plan`, `tune` or `compare` sweep (written with
//! `--shard I/N`) into the report the unsharded run prints, and writes its output file.

use std::path::PathBuf;

use servesim_sim::plan::{self, CandidateResult, PlanHeader};

use super::compare::{CompareHeader, Metrics};
use super::Format;
use crate::error::{CliError, Result};
use crate::shard;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Folders holding shard files (`plan-shard-I-of-N.json`, `compare-shard-I-of-N.json`),
    /// or the files themselves.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Output folder for plan.json / compare.csv. Default: outputs/<scenario name>/.
    #[arg(long)]
    out: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

pub(crate) fn run(a: Args) -> Result<()> {
    let files = shard::find(&a.paths)?;
    let kind = shard::kind_of(&files[0])?;
    match kind.as_str() {
        "plan" => {
            let (header, results, digest): (PlanHeader, Vec<CandidateResult>, String) =
                shard::join(&files, "plan", |h: &PlanHeader| h.candidate_names.len())?;
            let dir = a.out.unwrap_or_else(|| PathBuf::from("outputs").join(&header.scenario));
            let report = plan::assemble(header, results);
            super::plan::finish(&report, &dir, a.format, digest)
        }
        "tune" => {
            let (header, results, digest): (super::tune::TuneHeader, Vec<CandidateResult>, String) =
                shard::join(&files, "tune", |h: &super::tune::TuneHeader| h.plan.candidate_names.len())?;
            super::tune::merge(header, results, a.out, a.format, digest)
        }
        "compare" => {
            let (header, rows, digest): (CompareHeader, Vec<Vec<Metrics>>, String) =
                shard::join(&files, "compare", |h: &CompareHeader| h.rows.len())?;
            let dir = a.out.unwrap_or_else(|| PathBuf::from("outputs").join(&header.scenario));
            super::compare::finish(&header, &rows, &dir, a.format, digest)
        }
        other => Err(CliError::input(format!("{}: unknown shard kind \"{other}\"", files[0].display()))),
    }
}
