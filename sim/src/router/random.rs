//! Random: each request to an instance drawn at random, in proportion to capacity weights
//! (uniformly when the instances are alike).

use rand::RngExt;
use rand_chacha::ChaCha8Rng;

use super::Router;
use crate::instance::Instance;
use crate::workload::Request;

pub struct Random {
    rng: ChaCha8Rng,
}

impl Random {
    pub fn new(rng: ChaCha8Rng) -> Random {
        Random { rng }
    }
}

impl Router for Random {
    fn route(&mut self, _req: &Request, instances: &[Instance]) -> usize {
        let first = instances[0].capacity();
        if instances.iter().all(|i| i.capacity() == first) {
            return self.rng.random_range(0..instances.len());
        }
        let total: f64 = instances.iter().map(Instance::capacity).sum();
        let mut x = self.rng.random::<f64>() * total;
        for (i, inst) in instances.iter().enumerate() {
            x -= inst.capacity();
            if x < 0.0 {
                return i;
            }
        }
        instances.len() - 1
    }
}
