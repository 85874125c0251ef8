//! `servesim workload fit`: a synthetic `[workload]` section whose statistics match a trace's.

use servesim_sim::workload::fit::{fit, to_toml, ArrivalFit};

use super::{profile, Input};
use crate::error::{CliError, Result};
use crate::output::thousands;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ArrivalArg {
    /// One rate and one CV: gamma-distributed gaps (easy to scale to more load).
    Gamma,
    /// One phase per window with the window's rate, so the rate over time follows the trace.
    Phases,
}

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    input: Input,
    /// The arrival process to fit.
    #[arg(long, value_enum, default_value_t = ArrivalArg::Gamma)]
    arrival: ArrivalArg,
    /// Width of the phases (`--arrival phases`), seconds.
    #[arg(long, default_value_t = 60.0)]
    window_s: f64,
}

pub(crate) fn run(a: Args) -> Result<()> {
    let loaded = a.input.load()?;
    let data = profile(&loaded.workload, loaded.seed, a.window_s)?;
    if data.profile.requests < 2 || data.profile.duration_s <= 0.0 {
        return Err(CliError::input(format!(
            "{}: a fit needs at least two requests over a positive duration; got {} over {} s",
            loaded.label, data.profile.requests, data.profile.duration_s
        )));
    }
    let how = match a.arrival {
        ArrivalArg::Gamma => ArrivalFit::Gamma,
        ArrivalArg::Phases => ArrivalFit::Phases,
    };
    // The phases' CV is calibrated with seed 0, the default seed of a scenario.
    let w = fit(&data, how, 0);
    let p = &data.profile;
    let mut o = format!("# Fitted by `servesim workload fit` to {}:\n", loaded.label);
    o += &format!(
        "# {} requests over {:.1} s ({:.3} req/s), inter-arrival CV {:.3};\n",
        thousands(p.requests),
        p.duration_s,
        p.rate_mean_rps,
        p.interarrival_cv
    );
    for (name, l) in [("prompt", &p.prompt_tokens), ("output", &p.output_tokens)] {
        o += &format!("# {name} tokens mean {:.1}, p50 {:.0}, p90 {:.0}, p99 {:.0};\n", l.mean, l.p50, l.p90, l.p99);
    }
    if p.requests_with_content > 0 {
        o += &format!(
            "# prefix reuse {:.1}% of prompt tokens (unbounded block cache): not modelled below.\n",
            p.prefix_reuse_token_fraction * 100.0
        );
    }
    if let Some(s) = &p.sessions {
        o += &format!(
            "# {} sessions, {:.2} requests each: not modelled below.\n",
            thousands(s.count),
            s.requests_per_session_mean
        );
    }
    o += "# Lengths: the trace's quantiles, as uniform pieces between them. For more load, raise the rate(s).\n";
    o += &to_toml(&w);
    out!("{o}");
    Ok(())
}
