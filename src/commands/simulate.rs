//! `servesim simulate`: one run of a scenario.

use std::path::PathBuf;

use servesim_sim::engine;

use super::Format;
use crate::error::{CliError, Result};
use crate::{output, scenario_file};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Scenario TOML file. Default: the embedded scenarios/chat.toml.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Seed for every random choice (overrides the scenario's `seed`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=servesim_sim::scenario::MAX_SEED))]
    seed: Option<u64>,
    /// Output folder. Default: outputs/<scenario name>/.
    #[arg(long)]
    out: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Also write a self-contained HTML report (charts and tables) to this path.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Print nothing on stdout (outputs are still written).
    #[arg(long, short)]
    quiet: bool,
}

pub(crate) fn run(a: Args) -> Result<()> {
    let mut s = scenario_file::load_or_default(a.scenario.as_deref(), "chat")?;
    s.check_calibration(false)
        .map_err(|e| CliError::input(format!("{}: {e}", scenario_file::label(a.scenario.as_deref()))))?;
    if let Some(seed) = a.seed {
        s.set_seed(seed);
    }
    let mut out = engine::try_run(&s).map_err(CliError::input)?;
    if let Some(st) = &mut out.summary.stopped {
        if st.reason == engine::Stopped::Cancelled {
            st.reason = crate::error::cancel_reason();
        }
    }
    crate::output::check_strict(&s, &out.summary)?;
    if let Some(n) = output::fallback_note(&out.summary) {
        errln!("note: cost fallbacks: {n}");
    }
    let dir = a.out.unwrap_or_else(|| PathBuf::from("outputs").join(&s.name));
    output::write_run(&dir, &s, &out.summary, &out.recorder)?;
    if let Some(path) = &a.report {
        let html = crate::report::simulate_report(&dir)?;
        super::report::write(path, &html)?;
    }
    if !a.quiet {
        match a.format {
            Format::Json => outln!("{}", serde_json::to_string_pretty(&out.summary).expect("summary serialises")),
            Format::Table => {
                out!("{}", output::summary_table(&s, &out.summary));
                outln!("outputs     {}/", dir.display());
            }
        }
    }
    match &out.summary.stopped {
        Some(st) => Err(crate::error::stopped_run(&s, st)),
        None => Ok(()),
    }
}
