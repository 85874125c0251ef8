//! Round-robin: instance 0, 1, 2, ... in turn, whatever their load or capacity (skipping those
//! not routable).

use serde::{Deserialize, Serialize};

use super::{next_routable, Load, Router, RouterPolicy};
use crate::workload::Request;

/// `{ kind = "round-robin" }`: no settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoundRobinSpec {}

impl RouterPolicy for RoundRobinSpec {
    fn build(&self, _seed: u64, _index: u64) -> Box<dyn Router> {
        Box::new(RoundRobin::default())
    }
}

#[derive(Debug, Default)]
pub struct RoundRobin {
    next: usize,
}

impl<L: Load> Router<L> for RoundRobin {
    fn route(&mut self, _req: &Request, instances: &[L]) -> usize {
        let i = next_routable(instances, self.next % instances.len());
        self.next = (i + 1) % instances.len();
        i
    }
}
