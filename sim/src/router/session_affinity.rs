//! Session (or prefix) affinity: consistent hashing with bounded loads.
//!
//! ```text
//!   key = the request's session (or its first content segment: a shared prefix)
//!   ring: each instance owns ≈ vnodes × (its capacity / mean capacity) points on a 64-bit ring
//!   target = owner of the first point at or after hash(key)
//!   if target's outstanding + 1 ≤ ⌈load_factor × (total outstanding + 1) × its capacity share⌉ + slack
//!        → target                          (every request of a session lands on one instance)
//!   else → the least-outstanding instance  (per unit of capacity)
//! ```
//! The bound is that of consistent hashing with bounded loads (Mirrokni, Thorup and
//! Zadimoghaddam, 2018) with an absolute `slack`, so a lightly loaded cluster does not spill
//! sessions over one or two requests. Requests without the key go to the least-loaded instance.
//! Adding an instance moves only the keys of the ring arcs it takes over.

use serde::{Deserialize, Serialize};

use super::{least_weighted, Load, Router, RouterPolicy};
use crate::config::{check, ConfigError};
use crate::workload::{Request, NO_SESSION};

/// What a request is hashed on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AffinityKey {
    /// The session id; requests without one use their prefix.
    #[default]
    Session,
    /// The first content segment (a shared system prompt or document); requests without
    /// content use their session.
    Prefix,
}

/// `{ kind = "session-affinity", key = "session", load_factor = 1.25, slack = 2, vnodes = 64 }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionAffinitySpec {
    pub(crate) key: AffinityKey,
    /// How far above its fair share of the outstanding requests an instance may go before
    /// sessions spill to the least-loaded instance. Default 1.25.
    pub(crate) load_factor: f64,
    /// Requests an instance may take above `load_factor` × its share. Default 2.
    pub(crate) slack: u32,
    /// Ring points per instance of mean capacity. Default 64.
    pub(crate) vnodes: u32,
}

impl Default for SessionAffinitySpec {
    fn default() -> Self {
        SessionAffinitySpec { key: AffinityKey::Session, load_factor: 1.25, slack: 2, vnodes: 64 }
    }
}

impl RouterPolicy for SessionAffinitySpec {
    fn build(&self, _seed: u64, _index: u64) -> Box<dyn Router> {
        Box::new(SessionAffinity::new(self.clone()))
    }

    fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let f = self.load_factor;
        check(f.is_finite() && (1.0..=1e6).contains(&f), path, "load_factor", "must be in [1, 1e6]", f)?;
        check((1..=4096).contains(&self.vnodes), path, "vnodes", "must be in [1, 4096]", self.vnodes)
    }
}

/// SplitMix64's finaliser: a fixed, portable 64-bit mix.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

pub struct SessionAffinity {
    spec: SessionAffinitySpec,
    /// (point, instance), sorted.
    ring: Vec<(u64, u32)>,
    next: usize,
}

impl SessionAffinity {
    pub fn new(spec: SessionAffinitySpec) -> SessionAffinity {
        SessionAffinity { spec, ring: Vec::new(), next: 0 }
    }

    /// Places `instances` on the ring (done on the first request; public for tests).
    pub fn build_ring<L: Load>(&mut self, instances: &[L]) {
        let mean = instances.iter().map(L::capacity).sum::<f64>() / instances.len() as f64;
        self.ring.clear();
        for (i, inst) in instances.iter().enumerate() {
            let points = ((self.spec.vnodes as f64 * inst.capacity() / mean).round() as u64).max(1);
            for v in 0..points {
                self.ring.push((mix(mix(i as u64) ^ v), i as u32));
            }
        }
        self.ring.sort_unstable();
    }

    fn key(&self, req: &Request) -> Option<u64> {
        let session = (req.session != NO_SESSION).then_some(req.session);
        let prefix = req.content.first().map(|s| s.hash);
        match self.spec.key {
            AffinityKey::Session => session.or(prefix),
            AffinityKey::Prefix => prefix.or(session),
        }
    }

    /// The instance that owns `key` on the ring.
    pub fn owner(&self, key: u64) -> usize {
        let h = mix(key);
        let at = self.ring.partition_point(|&(p, _)| p < h);
        self.ring[at % self.ring.len()].1 as usize
    }

    /// The routable instance that owns `key`: the owner of the first point at or after it
    /// whose instance is routable (so an instance leaving moves only its own keys).
    pub fn routable_owner<L: Load>(&self, key: u64, instances: &[L]) -> usize {
        let h = mix(key);
        let at = self.ring.partition_point(|&(p, _)| p < h);
        let n = self.ring.len();
        (0..n)
            .map(|k| self.ring[(at + k) % n].1 as usize)
            .find(|&i| instances[i].routable())
            .expect("a routable instance")
    }

    /// Whether instance `i` may take one more request under the load bound (shares among the
    /// routable instances).
    pub fn under_bound<L: Load>(&self, instances: &[L], i: usize) -> bool {
        let up = || instances.iter().filter(|x| x.routable());
        let total: u64 = up().map(L::outstanding).sum();
        let share = instances[i].capacity() / up().map(L::capacity).sum::<f64>();
        let limit = (self.spec.load_factor * (total + 1) as f64 * share).ceil() as u64 + self.spec.slack as u64;
        instances[i].outstanding() < limit
    }
}

impl<L: Load> Router<L> for SessionAffinity {
    fn route(&mut self, req: &Request, instances: &[L]) -> usize {
        if self.ring.is_empty() || self.ring.iter().any(|&(_, i)| i as usize >= instances.len()) {
            self.build_ring(instances);
        }
        if let Some(key) = self.key(req) {
            let i = self.routable_owner(key, instances);
            if self.under_bound(instances, i) {
                return i;
            }
        }
        let i = least_weighted(instances, self.next, |x| x.outstanding() as f64);
        self.next = (i + 1) % instances.len();
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::testing::*;

    #[test]
    fn a_session_stays_on_its_instance_while_under_the_bound_then_spills() {
        let mut inst = instances(4);
        let mut r = SessionAffinity::new(SessionAffinitySpec::default());
        let home = r.route(&request(10, 10, 77), &inst);
        assert_eq!(r.owner(77), home);
        // Load the home instance request by request: the session stays while the bound allows.
        let mut spilled = false;
        for _ in 0..20 {
            let under = r.under_bound(&inst, home);
            let got = r.route(&request(10, 10, 77), &inst);
            if under {
                assert_eq!(got, home, "under the bound the session stays home");
            } else {
                assert_ne!(got, home, "above the bound it spills");
                spilled = true;
            }
            load(&mut inst, home, 1, 10);
        }
        assert!(spilled, "20 requests on one of 4 idle instances exceed the bound");
        // With 0 outstanding elsewhere: limit = ⌈1.25 × (k + 1) / 4⌉ + 2; home holds k.
        // k = 3 → ⌈1.25⌉ + 2 = 4 > 3: stays; k = 4 → ⌈1.5625⌉ + 2 = 4: spills.
        let mut fresh = instances(4);
        load(&mut fresh, home, 3, 10);
        assert!(r.under_bound(&fresh, home));
        load(&mut fresh, home, 1, 10);
        assert!(!r.under_bound(&fresh, home));
    }

    #[test]
    fn sessions_spread_over_the_ring() {
        let inst = instances(4);
        let mut r = SessionAffinity::new(SessionAffinitySpec::default());
        r.build_ring(&inst);
        let mut counts = [0u32; 4];
        for s in 0..4000u64 {
            counts[r.owner(s)] += 1;
        }
        // 64 points per instance: each owns roughly a quarter of the keys.
        assert!(counts.iter().all(|&c| (600..1400).contains(&c)), "{counts:?}");
    }
}
