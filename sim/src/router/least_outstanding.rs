//! Least outstanding requests: to the instance with the fewest requests waiting or running,
//! per unit of capacity.

use serde::{Deserialize, Serialize};

use super::{least_weighted, Load, Router, RouterPolicy};
use crate::workload::Request;

/// `{ kind = "least-outstanding" }`: no settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeastOutstandingSpec {}

impl RouterPolicy for LeastOutstandingSpec {
    fn build(&self, _seed: u64, _index: u64) -> Box<dyn Router> {
        Box::new(LeastOutstanding::default())
    }
}

#[derive(Debug, Default)]
pub struct LeastOutstanding {
    next: usize,
}

impl<L: Load> Router<L> for LeastOutstanding {
    fn route(&mut self, _req: &Request, instances: &[L]) -> usize {
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
    fn picks_the_least_loaded_and_rotates_ties() {
        let mut inst = instances(3);
        load(&mut inst, 0, 2, 100);
        load(&mut inst, 1, 1, 100);
        load(&mut inst, 2, 3, 100);
        let mut r = LeastOutstanding::default();
        assert_eq!(r.route(&request(1, 1, 0), &inst), 1);
        load(&mut inst, 1, 1, 100);
        // 0 and 1 tie at 2: the first after the last choice (1) is 2, then wraps to 0.
        assert_eq!(r.route(&request(1, 1, 0), &inst), 0);
    }
}
