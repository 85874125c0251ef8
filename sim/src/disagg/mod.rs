//! Prefill/decode disaggregation: separate pools for prompts and for decoding, joined by a KV
//! transfer (DistServe, Splitwise, Mooncake; vLLM's disaggregated prefill).
//!
//! ```text
//!   arrival ─► cluster.router ─► prefill instance P ── prefill ─► first token (TTFT)
//!                                   │ P keeps the request's KV blocks
//!                                   ▼
//!              decode_router ─► decode instance D: incoming (FIFO), waits for D's KV blocks
//!                                   │ D allocates the blocks ─► transfer starts
//!                                   ▼   latency + shard bytes / link bandwidth
//!                               KvTransferDone: P frees the blocks, the request decodes on D
//! ```
//! A group's `role` says which pool it is in (`[[cluster.groups]] role = "prefill" | "decode"`);
//! `[cluster.disaggregation]` holds the link and the decode router. A request with one output
//! token finishes on its prefill instance. The decode instance allocates the blocks before the
//! transfer starts (the KV must land somewhere), so decode admission is limited by decode KV:
//! while D has no room, the request waits in D's incoming queue and its prefill KV stays
//! pinned on P — back-pressure onto the prefill pool, as a pull-based transfer does.
//!
//! Transfer time: each GPU of the side with fewer GPUs exchanges its shard of the KV over its
//! own link, in parallel: `latency + tokens × KV bytes per token per GPU at min(tp_P, tp_D) /
//! link bandwidth` (the KV dtype of the prefill group; heads replicated under TP count once).
//!
//! Metrics: TTFT is the prefill pool's; TPOT and ITL include the gap the transfer (and any wait
//! for decode KV) adds before the second token. The summary's `disaggregation` key reports
//! both pools, the transfers, and the decode-pool TPOT (time from the KV's arrival to the last
//! token, per output token after the first), which leaves the transfer out.

pub use crate::metrics::{DisaggSummary, PoolSummary};

use serde::{Deserialize, Serialize};

use crate::config::{check, ConfigError};
use crate::instance::InstanceGroup;
pub use crate::instance::Role;
use crate::router::RouterSpec;
use crate::time::SimTime;

/// Default KV-link bandwidth per GPU, GB/s: one 400 Gb/s NIC per GPU (InfiniBand NDR or
/// RoCE, as in H100 and H200 HGX nodes), the inter-node case.
pub const DEFAULT_LINK_GB_PER_S: f64 = 50.0;
/// Default fixed latency per transfer, µs: an RDMA round trip and the request's handshake.
pub const DEFAULT_LINK_LATENCY_US: f64 = 10.0;

/// `[cluster.disaggregation]`: the KV link between the pools and the decode router.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DisaggregationSection {
    /// Bandwidth of each GPU's KV link, per direction, GB/s. Default 50 (400 Gb/s per GPU).
    pub(crate) link_gb_per_s: f64,
    /// Fixed latency of each transfer, µs. Default 10.
    pub(crate) link_latency_us: f64,
    /// How prefilled requests are spread over decode instances. Default round-robin.
    pub(crate) decode_router: RouterSpec,
}

impl Default for DisaggregationSection {
    fn default() -> Self {
        DisaggregationSection {
            link_gb_per_s: DEFAULT_LINK_GB_PER_S,
            link_latency_us: DEFAULT_LINK_LATENCY_US,
            decode_router: RouterSpec::default(),
        }
    }
}

impl DisaggregationSection {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let b = self.link_gb_per_s;
        check(b.is_finite() && b > 0.0 && b < 1e9, path, "link_gb_per_s", "must be > 0", b)?;
        let l = self.link_latency_us;
        check(l.is_finite() && (0.0..1e9).contains(&l), path, "link_latency_us", "must be ≥ 0", l)?;
        self.decode_router.validate(&format!("{path}.decode_router"))
    }
}

/// A validated disaggregated cluster: the link and the decode router.
#[derive(Clone, Debug, PartialEq)]
pub struct Disaggregation {
    pub(crate) link_bytes_per_s: f64,
    pub(crate) latency: SimTime,
    pub(crate) decode_router: RouterSpec,
}

/// Checks the groups' roles against `[cluster.disaggregation]`: either every group is mixed and
/// the section is absent, or there are prefill and decode groups and no mixed one. Returns the
/// resolved section (defaults filled in) when the cluster is disaggregated.
pub(crate) fn resolve(
    section: Option<&DisaggregationSection>,
    groups: &[InstanceGroup],
    group_keys: bool,
) -> Result<Option<DisaggregationSection>, ConfigError> {
    let has = |r: Role| groups.iter().position(|g| g.role == r);
    let (prefill, decode, mixed) = (has(Role::Prefill), has(Role::Decode), has(Role::Mixed));
    if prefill.is_none() && decode.is_none() {
        if section.is_some() {
            let why = if group_keys {
                "needs [[cluster.groups]] with role = \"prefill\" and role = \"decode\""
            } else {
                "needs [[cluster.groups]] with role = \"prefill\" and role = \"decode\" (not cluster.instances)"
            };
            return Err(ConfigError::at("cluster.disaggregation", why.into()));
        }
        return Ok(None);
    }
    let role_err = |i: usize, msg: &str| {
        Err(ConfigError::at(
            &format!("cluster.groups[{i}].role"),
            format!("{msg}, got \"{}\"", groups[i].role.as_str()),
        ))
    };
    if let Some(i) = mixed {
        return role_err(i, "must be \"prefill\" or \"decode\" in a disaggregated cluster (every group has a role)");
    }
    let missing = |want: &str, have: &str| {
        Err(ConfigError::at(
            "cluster.groups",
            format!("a disaggregated cluster needs a group with role = \"{want}\" (only \"{have}\" groups given)"),
        ))
    };
    match (prefill, decode) {
        (Some(_), None) => missing("decode", "prefill"),
        (None, Some(_)) => missing("prefill", "decode"),
        _ => {
            let s = section.cloned().unwrap_or_default();
            s.validate("cluster.disaggregation")?;
            Ok(Some(s))
        }
    }
}

impl From<&DisaggregationSection> for Disaggregation {
    fn from(s: &DisaggregationSection) -> Self {
        Disaggregation {
            link_bytes_per_s: s.link_gb_per_s * 1e9,
            latency: SimTime::from_secs_f64(s.link_latency_us * 1e-6),
            decode_router: s.decode_router.clone(),
        }
    }
}

/// How long moving `tokens` tokens of KV takes: `latency + ⌈tokens × shard_bytes_per_token /
/// bandwidth⌉` (ns), where `shard_bytes_per_token` is what one GPU's link carries per token.
pub fn transfer_time(tokens: u64, shard_bytes_per_token: u64, link: &Disaggregation) -> SimTime {
    let bytes = tokens as f64 * shard_bytes_per_token as f64;
    link.latency + SimTime((bytes / link.link_bytes_per_s * 1e9).ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_time_is_latency_plus_bytes_over_bandwidth() {
        let link = Disaggregation::from(&DisaggregationSection::default());
        // llama-3-8b bf16 at TP 1: 131,072 B per token; 1,000 tokens = 131.072 MB at 50 GB/s
        // = 2.62144 ms, plus 10 µs.
        assert_eq!(transfer_time(1000, 131_072, &link), SimTime(2_621_440 + 10_000));
        assert_eq!(transfer_time(0, 131_072, &link), SimTime(10_000));
    }
}
