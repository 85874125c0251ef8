//! Every time a cost model gives, times one factor: how `plan` and `tune` re-size a candidate over
//! its cost source's error band (its iterations 1 − e and 1 + e as long).

use std::sync::Arc;

use super::{BatchShape, CostAccount, CostModel, Fallback, FallbackShare, PipelineShare, SeqWork};
use crate::time::SimTime;

pub struct Scaled {
    inner: Arc<dyn CostModel>,
    factor: f64,
}

impl Scaled {
    /// `inner`'s times × `factor` (> 0).
    pub fn new(inner: Arc<dyn CostModel>, factor: f64) -> Scaled {
        assert!(factor.is_finite() && factor > 0.0, "a time factor is positive: {factor}");
        Scaled { inner, factor }
    }

    fn t(&self, t: SimTime) -> SimTime {
        // At least 1 ns: a non-empty batch never costs nothing.
        SimTime(((t.0 as f64 * self.factor).round() as u64).max(t.0.min(1)))
    }

    fn pair(&self, (a, b): (SimTime, SimTime)) -> (SimTime, SimTime) {
        (self.t(a), self.t(b))
    }
}

impl CostModel for Scaled {
    fn iteration_time(&self, b: &BatchShape) -> SimTime {
        self.t(self.inner.iteration_time(b))
    }
    fn wants_seqs(&self) -> bool {
        self.inner.wants_seqs()
    }
    fn iteration_time_of(&self, b: &BatchShape, seqs: &[SeqWork]) -> SimTime {
        self.t(self.inner.iteration_time_of(b, seqs))
    }
    fn iteration_times_of(
        &self,
        b: &BatchShape,
        seqs: &[SeqWork],
        acc: Option<&mut CostAccount>,
    ) -> (SimTime, SimTime) {
        self.pair(self.inner.iteration_times_of(b, seqs, acc))
    }
    fn head_time(&self, b: &BatchShape) -> SimTime {
        self.t(self.inner.head_time(b))
    }
    fn collective_time(&self, b: &BatchShape) -> SimTime {
        self.t(self.inner.collective_time(b))
    }
    fn accounts(&self) -> bool {
        self.inner.accounts()
    }
    fn iteration_time_accounted(&self, b: &BatchShape, acc: &mut CostAccount) -> SimTime {
        self.t(self.inner.iteration_time_accounted(b, acc))
    }
    fn fallbacks(&self) -> Vec<Fallback> {
        self.inner.fallbacks()
    }
    fn shares(&self, acc: &CostAccount) -> Vec<FallbackShare> {
        self.inner.shares(acc)
    }
    fn pipeline(&self, acc: &CostAccount) -> Option<PipelineShare> {
        self.inner.pipeline(acc)
    }
    fn cpu_time(&self, b: &BatchShape) -> SimTime {
        self.t(self.inner.cpu_time(b))
    }
    fn iteration_times(&self, b: &BatchShape, acc: Option<&mut CostAccount>) -> (SimTime, SimTime) {
        self.pair(self.inner.iteration_times(b, acc))
    }
    fn dp_iteration_times(&self, ranks: &[BatchShape], acc: Option<&mut CostAccount>) -> (SimTime, SimTime) {
        self.pair(self.inner.dp_iteration_times(ranks, acc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::{Roofline, RooflineParams};
    use crate::spec::{Dtype, GpuPreset, ModelPreset, ModelSpec};

    #[test]
    fn every_time_is_scaled_by_the_factor() {
        let m = ModelSpec::from_preset(ModelPreset::find("llama-3-8b").unwrap(), Dtype::Bf16, Dtype::Bf16);
        let inner: Arc<dyn CostModel> =
            Arc::new(Roofline::new(m, GpuPreset::find("h100-sxm").unwrap().spec(), 2, RooflineParams::default()));
        let s = Scaled::new(inner.clone(), 1.25);
        let mut b = BatchShape::default();
        b.add_prefill(512, 0, true);
        b.add_decode(1000);
        let (t, cpu) = inner.iteration_times(&b, None);
        assert_eq!(
            s.iteration_times(&b, None),
            (SimTime((t.0 as f64 * 1.25).round() as u64), SimTime((cpu.0 as f64 * 1.25).round() as u64))
        );
        assert_eq!(s.iteration_time(&b).0, (inner.iteration_time(&b).0 as f64 * 1.25).round() as u64);
        assert_eq!(s.collective_time(&b).0, (inner.collective_time(&b).0 as f64 * 1.25).round() as u64);
        assert!(inner.collective_time(&b).0 > 0, "TP 2 has all-reduces to scale");
    }
}
