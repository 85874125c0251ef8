//! Random: each request to an instance drawn at random, in proportion to capacity weights
//! (uniformly when the instances are alike).

use crate::rng::SimRng;
use rand::RngExt;
use serde::{Deserialize, Serialize};

use super::{Load, Router, RouterPolicy};
use crate::rng::{substream, Stream};
use crate::workload::Request;

/// `{ kind = "random" }`: no settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomSpec {}

impl RouterPolicy for RandomSpec {
    fn build(&self, seed: u64, index: u64) -> Box<dyn Router> {
        Box::new(Random::new(substream(seed, Stream::Router, index)))
    }
}

pub struct Random {
    rng: SimRng,
}

impl Random {
    pub fn new(rng: SimRng) -> Random {
        Random { rng }
    }
}

impl<L: Load> Router<L> for Random {
    fn route(&mut self, _req: &Request, instances: &[L]) -> usize {
        let first = instances[0].capacity();
        if instances.iter().all(|i| i.capacity() == first) {
            // Drawn again while the draw is not routable: uniform over the routable ones.
            loop {
                let i = self.rng.random_range(0..instances.len());
                if instances[i].routable() {
                    return i;
                }
            }
        }
        let weight = |inst: &L| if inst.routable() { inst.capacity() } else { 0.0 };
        let total: f64 = instances.iter().map(weight).sum();
        let mut x = self.rng.random::<f64>() * total;
        for (i, inst) in instances.iter().enumerate() {
            x -= weight(inst);
            if x < 0.0 {
                return i;
            }
        }
        (0..instances.len()).rev().find(|&i| instances[i].routable()).expect("a routable instance")
    }
}
