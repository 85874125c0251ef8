//! Timing backends: something that can run an op of a given shape and say how long it took.

pub mod cpu;
pub mod cuda;
pub mod inpass;

use crate::plan::{Point, Shape};
use crate::Error;

/// What the backend runs on, for the profile's metadata.
#[derive(Clone, Debug, Default)]
pub struct Device {
    pub backend: String,
    pub name: String,
    pub driver: Option<String>,
    pub clocks: Option<String>,
    pub dtype: String,
}

/// A measured time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    /// Median time of one run, ms.
    pub ms: f64,
    /// Timed samples behind the median.
    pub samples: u32,
}

pub trait Backend {
    fn device(&self) -> Device;
    /// Times `shape` on fresh random data: warm-up, then the median of repeated runs over
    /// buffers rotated so the working set exceeds the caches. The error says why it could not.
    fn measure(&mut self, shape: &Shape) -> Result<Timing, Error>;
    /// Times a plan point: its shape, unless the backend also needs to know the op.
    fn measure_point(&mut self, p: &Point) -> Result<Timing, Error> {
        self.measure(&p.shape)
    }
    /// Whether an op's time depends on more than its shape (ops timed inside a forward pass):
    /// then points of equal shapes but different ops are timed separately.
    fn times_in_context(&self) -> bool {
        false
    }
    /// Makes the measurements to come fresh: a backend that reuses runs between points (one
    /// forward pass serving several ops) forgets them.
    fn forget(&mut self) {}
}

/// The median of samples (the mean of the middle two for an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    servesim_sim::cost::profile::median_sorted(&v)
}

/// How many copies of a buffer set of `set_bytes` make the working set exceed `cache_bytes`
/// twice over (at least 1, at most `max`).
pub fn rotation(set_bytes: u64, cache_bytes: u64, max: u64) -> usize {
    (2 * cache_bytes).div_ceil(set_bytes.max(1)).clamp(1, max) as usize
}
