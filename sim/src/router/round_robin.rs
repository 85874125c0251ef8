//! Round-robin: instance 0, 1, 2, ... in turn, whatever their load or capacity (skipping those
//! not routable).

use super::{next_routable, Load, Router};
use crate::workload::Request;

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
