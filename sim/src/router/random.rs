//! Random: each request to an instance drawn at random, in proportion to capacity weights
//! (uniformly when the instances are alike).

use rand::RngExt;
use rand_chacha::ChaCha8Rng;

use super::{Load, Router};
use crate::workload::Request;

pub struct Random {
    rng: ChaCha8Rng,
}

impl Random {
    pub fn new(rng: ChaCha8Rng) -> Random {
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
