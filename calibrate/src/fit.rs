//! Fitting: measured points → per-op tables with the interpolation that predicts held-out points
//! best, and the profile that holds them.

use std::collections::BTreeMap;

use servesim_sim::cost::profile::{Axis, Curve, Profile, ProfileMeta, PROFILE_FORMAT_VERSION};

use crate::sweep::Measurement;

pub use servesim_sim::cost::profile::fit_table;

/// The axes of each op a sweep measures.
pub fn axes_of(op: &str) -> Vec<Axis> {
    servesim_sim::cost::KNOWN_OPS.iter().find(|(n, _)| *n == op).map(|(_, a)| a.to_vec()).unwrap_or_else(|| {
        if op == "attn_decode_mixed" {
            vec![Axis::Batch, Axis::Context]
        } else {
            vec![Axis::Tokens]
        }
    })
}

/// A profile from a sweep's measurements. Mixed-length decode batches are not tabulated: they
/// check the decode table read at the batch's mean context, and the result goes to the notes.
pub fn profile(mut meta: ProfileMeta, measurements: &[Measurement]) -> Profile {
    let mut groups: BTreeMap<(String, u32), Vec<Vec<f64>>> = BTreeMap::new();
    for m in measurements {
        let mut p = m.x.clone();
        p.push(m.ms);
        groups.entry((m.op.clone(), m.tp)).or_default().push(p);
    }
    let mut ops = Vec::new();
    for ((op, tp), pts) in &groups {
        if op == "attn_decode_mixed" {
            continue;
        }
        ops.push(fit_table(op, Some(*tp), axes_of(op), pts.clone()));
    }
    for ((op, tp), pts) in &groups {
        if op != "attn_decode_mixed" {
            continue;
        }
        let Some(t) = ops.iter().find(|t| t.name == "attn_decode" && t.tp == Some(*tp)) else { continue };
        let c = Curve::from_table(t);
        let errs: Vec<String> =
            pts.iter().map(|p| format!("batch {} {:+.1}%", p[0], (c.eval_at(&p[..2]) - p[2]) / p[2] * 100.0)).collect();
        meta.notes.push(format!(
            "attn_decode (tp {tp}) read at the mean context vs mixed-length batches measured: {}",
            errs.join(", ")
        ));
    }
    add_interp_note(&mut meta);
    Profile { format_version: PROFILE_FORMAT_VERSION, meta, ops }
}

pub use servesim_sim::cost::profile::INTERP_NOTE;

/// Adds [`INTERP_NOTE`] to a profile's notes once.
pub fn add_interp_note(meta: &mut ProfileMeta) {
    servesim_sim::cost::profile::add_interp_note(&mut meta.notes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use servesim_sim::cost::profile::Interp;

    #[test]
    fn picks_step_for_a_step_function_and_loglog_for_a_power_law() {
        // A tiled kernel whose time steps up at every multiple of 16 tokens; every 4th held-out
        // point (x = 16, 32, ...) sits on a step, where only `step` reads the next point right.
        let step: Vec<Vec<f64>> = (1..=128).map(|x| vec![x as f64, (x / 16 + 1) as f64]).collect();
        let t = fit_table("g", Some(1), vec![Axis::Tokens], step);
        assert_eq!(t.interp, Interp::Step, "{:?}", t.heldout);
        assert_eq!(t.heldout[0].p90_pct, 0.0);
        // t = x^1.5 on a geometric grid: log-log interpolation is exact.
        let pow: Vec<Vec<f64>> = (0..25).map(|i| (1.5f64).powi(i)).map(|x| vec![x, x.powf(1.5)]).collect();
        let t = fit_table("p", Some(1), vec![Axis::Tokens], pow);
        assert_eq!(t.interp, Interp::LogLog, "{:?}", t.heldout);
        assert!(t.heldout[0].max_pct < 1e-9);
        assert_eq!(t.heldout.len(), 3);
    }

    #[test]
    fn duplicates_are_averaged() {
        let t = fit_table("a", None, vec![Axis::Batch], vec![vec![2.0, 1.0], vec![1.0, 5.0], vec![2.0, 3.0]]);
        assert_eq!(t.points, vec![vec![1.0, 5.0], vec![2.0, 2.0]]);
    }
}
