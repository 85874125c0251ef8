//! Routers: which instance an arriving request goes to. One policy per file.

mod round_robin;

pub use round_robin::RoundRobin;

use crate::instance::Instance;
use crate::scenario::RouterSpec;
use crate::workload::Request;

/// Picks an instance for each arriving request.
pub trait Router: Send {
    fn route(&mut self, req: &Request, instances: &[Instance]) -> usize;
}

/// Builds the router a scenario asks for.
pub fn build(spec: &RouterSpec, _seed: u64) -> Box<dyn Router> {
    match spec {
        RouterSpec::RoundRobin(_) => Box::new(RoundRobin::default()),
    }
}
