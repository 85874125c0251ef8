//! Capacity planning: for each candidate configuration, the fewest instances that meet the SLO.
//!
//! ```text
//!   [plan] candidates ──materialise (edit the scenario document)──► Candidate (a Scenario, 1 instance)
//!        │
//!        ├─ single-instance capacity: highest rate of this traffic shape one instance serves
//!        │     within the SLO (rate doubled/halved, then bisected to 1%)
//!        ├─ instance search on the scenario's load, seed 0: exponential from ⌈rate / capacity⌉,
//!        │     then binary, down to N₀ (passes) and N₀ − 1 (fails)
//!        ├─ decisive points on every seed: N = the first count from N₀ up that passes on all
//!        │     seeds; N − 1 must fail on at least one; a count passing on some seeds only is
//!        │     reported as borderline with its spread, never as passing
//!        └─ headroom, GPUs, $/h, binding constraint (from the failing run at N − 1)
//! ```
//! The search assumes attainment does not fall when instances are added (true of every router
//! here up to noise, which the seeds measure). Everything is deterministic: a candidate's result
//! depends only on the scenario, so candidates can run in any order, on any thread or machine.

pub mod band;
mod candidate;
mod economics;
mod evidence;
mod infeasible;
mod pools;
mod prune;
mod search;
pub mod tune;

pub use crate::scenario::{CandidateSection, PlanSection};
pub use band::Band;
pub use candidate::{candidates, Candidate};
pub use economics::{Economics, HOURS_PER_MONTH};
pub use evidence::{classify, Binding, Misses, Point, SeedResult};
pub use infeasible::Infeasible;
pub use pools::{PairPoint, PairStep, PoolCandidate, PoolSpec, PoolsResult};
pub use prune::{prune_search, search, Outcome, Runner, Serial};
pub use search::{
    assemble, header, instances, plan_candidate, probe, AutoscaleComparison, AutoscaleSeed, Borderline,
    CandidateResult, PlanHeader, PlanReport, SearchConfig, SpareCheck, Step,
};

use crate::config::ConfigError;
use crate::scenario::Scenario;

/// Checks a validated scenario's `[plan]` candidates (each one derived and validated), so that
/// every command reports a bad candidate, not only `plan`. [`Scenario::from_file_in`] validates
/// the rest of the file; the candidates are the planner's, and it checks them.
pub fn check_candidates(s: &Scenario) -> Result<(), ConfigError> {
    if s.resolved.plan.is_some() {
        for c in candidates(s)? {
            // A calibration applied to a candidate's own GPU and TP is held to its floor too.
            if let Some(sc) = &c.scenario {
                crate::engine::check_calibrations(sc)
                    .map_err(|e| ConfigError::at(&e.path, format!("candidate {}: {}", c.name, e.message)))?;
            }
        }
    }
    Ok(())
}
