//! Why a candidate has no recommended instance count. `plan.json`'s `infeasible_reason` is the
//! text of one of these (or of a run that stopped early).

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Infeasible {
    /// More measured requests are rejected than the SLO allows, whatever the count: they
    /// cannot fit one instance (of either pool, `pools`).
    Rejected { rejected: u64, measured: u64, pools: bool },
    /// The exploratory search on the first seed reached `plan.max_instances` failing.
    MaxInstances { max: u32 },
    /// The first seed passes somewhere, but no count up to `plan.max_instances` passes on
    /// every seed.
    NotEverySeed { max: u32 },
    /// Disaggregated: one pool at `plan.max_instances` still misses its part of the SLO.
    Pool { max: u32, pool: &'static str },
    /// Disaggregated: no pair of pool sizes up to `plan.max_instances` passes on every seed.
    NoPair { max: u32 },
}

impl fmt::Display for Infeasible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Infeasible::Rejected { rejected, measured, pools } => write!(
                f,
                "{rejected} of {measured} measured requests are rejected whatever the instance {} (they cannot fit one instance)",
                if pools { "counts" } else { "count" }
            ),
            Infeasible::MaxInstances { max } => write!(f, "{max} instances (plan.max_instances) do not meet the SLO"),
            Infeasible::NotEverySeed { max } => {
                write!(f, "no count up to {max} (plan.max_instances) meets the SLO on every seed")
            }
            Infeasible::Pool { max, pool } => {
                write!(f, "{max} {pool} instances (plan.max_instances) do not meet the SLO")
            }
            Infeasible::NoPair { max } => {
                write!(f, "no pair up to {max} instances per pool (plan.max_instances) meets the SLO on every seed")
            }
        }
    }
}
