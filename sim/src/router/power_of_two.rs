//! Power of two choices: draw two different instances at random, send to the one with fewer
//! outstanding requests per unit of capacity (the first drawn on a tie).

use crate::rng::SimRng;
use rand::RngExt;
use serde::{Deserialize, Serialize};

use super::{Load, Router, RouterPolicy};
use crate::rng::{substream, Stream};
use crate::workload::Request;

/// `{ kind = "power-of-two" }`: no settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerOfTwoSpec {}

impl RouterPolicy for PowerOfTwoSpec {
    fn build(&self, seed: u64, index: u64) -> Box<dyn Router> {
        Box::new(PowerOfTwo::new(substream(seed, Stream::Router, index)))
    }
}

pub struct PowerOfTwo {
    rng: SimRng,
}

impl PowerOfTwo {
    pub fn new(rng: SimRng) -> PowerOfTwo {
        PowerOfTwo { rng }
    }
}

impl<L: Load> Router<L> for PowerOfTwo {
    fn route(&mut self, _req: &Request, instances: &[L]) -> usize {
        let n = instances.len();
        if n == 1 {
            return 0;
        }
        let mut a = self.rng.random_range(0..n);
        let mut b = (a + 1 + self.rng.random_range(0..n - 1)) % n;
        if !instances[a].routable() || !instances[b].routable() {
            // Two different routable instances, drawn the same way among them.
            let ok: Vec<usize> = (0..n).filter(|&i| instances[i].routable()).collect();
            if ok.len() == 1 {
                return ok[0];
            }
            let x = self.rng.random_range(0..ok.len());
            let y = (x + 1 + self.rng.random_range(0..ok.len() - 1)) % ok.len();
            (a, b) = (ok[x], ok[y]);
        }
        let score = |i: usize| instances[i].outstanding() as f64 / instances[i].capacity();
        if score(b) < score(a) {
            b
        } else {
            a
        }
    }
}
