//! `servesim workload describe`: the request profile of a trace or a scenario's workload.

use servesim_sim::workload::profile::{Lengths, Profile};

use super::{profile, Input};
use crate::commands::Format;
use crate::error::Result;
use crate::output::thousands;

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    input: Input,
    /// Width of the windows whose rates are reported (min, mean, max, peak-to-mean), seconds.
    #[arg(long, default_value_t = 60.0)]
    window_s: f64,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

pub(crate) fn run(a: Args) -> Result<()> {
    let loaded = a.input.load()?;
    let data = profile(&loaded.workload, loaded.seed, a.window_s)?;
    match a.format {
        Format::Json => outln!("{}", serde_json::to_string_pretty(&data.profile).expect("profile serialises")),
        Format::Table => out!("{}", table(&loaded.label, &data.profile)),
    }
    Ok(())
}

fn opt(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.2}")).unwrap_or_else(|| "—".into())
}

fn length_row(name: &str, l: &Lengths) -> String {
    format!(
        "  {name:<15}{:>9.1}{:>9.0}{:>9.0}{:>9.0}{:>9}{:>9}   {:>5.1}% {:>5.1}% {:>5.1}%\n",
        l.mean,
        l.p50,
        l.p90,
        l.p99,
        l.min,
        l.max,
        l.short * 100.0,
        l.medium * 100.0,
        l.long * 100.0
    )
}

/// The human-readable profile.
pub(crate) fn table(label: &str, p: &Profile) -> String {
    let mut o = format!("workload {label}\n");
    o += &format!(
        "  requests       {} over {:.1} s: mean {:.3} req/s\n",
        thousands(p.requests),
        p.duration_s,
        p.rate_mean_rps
    );
    match &p.rate_rps {
        Some(r) => {
            o += &format!(
                "  rate per {} s  min {:.2}  mean {:.2}  max {:.2} req/s; peak/mean {:.2}; {} windows, {} idle\n",
                p.rate_window_s, r.min, r.mean, r.max, r.peak_to_mean, r.windows, r.idle_windows
            )
        }
        None => o += &format!("  rate per {} s  — (shorter than one window)\n", p.rate_window_s),
    }
    o += &format!("  inter-arrival  CV {:.3} (1 = Poisson)\n", p.interarrival_cv);
    let d = &p.index_of_dispersion;
    o += &format!(
        "  dispersion     index of counts {} at 1 s, {} at 10 s, {} at 60 s (1 = Poisson)\n",
        opt(d.w1),
        opt(d.w10),
        opt(d.w60)
    );
    o += &format!(
        "\n  {:<15}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}   {:>6} {:>6} {:>6}\n",
        "tokens", "mean", "p50", "p90", "p99", "min", "max", "short", "medium", "long"
    );
    o += &length_row("prompt", &p.prompt_tokens);
    o += &length_row("output", &p.output_tokens);
    let (pb, ob) = (p.prompt_tokens.bands, p.output_tokens.bands);
    o += &format!(
        "  (short/medium/long: prompt < {} ≤ … < {} ≤; output < {} ≤ … < {} ≤)\n\n",
        pb[0], pb[1], ob[0], ob[1]
    );
    if p.requests_with_content > 0 {
        o += &format!(
            "  prefix reuse   {:.1}% of prompt tokens hit an unbounded block cache; {} of {} requests hit\n",
            p.prefix_reuse_token_fraction * 100.0,
            thousands(p.prefix_hit_requests),
            thousands(p.requests)
        );
    } else {
        o += "  prefix reuse   unknown: the requests carry no content ids (hash ids, prefixes)\n";
    }
    match &p.sessions {
        Some(s) => {
            o += &format!(
                "  sessions       {} sessions; {} requests with one, {:.2} per session\n",
                thousands(s.count),
                thousands(s.requests_with_session),
                s.requests_per_session_mean
            )
        }
        None => o += "  sessions       none recorded\n",
    }
    o
}
