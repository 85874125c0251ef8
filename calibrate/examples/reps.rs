use servesim_calibrate::backend::cpu::CpuBackend;
use servesim_calibrate::backend::Backend;
use servesim_calibrate::clock::Clock;
use servesim_calibrate::plan::Shape;

fn main() {
    for (k, n) in [(512u64, 8192u64), (512, 512), (1536, 512), (512, 3072)] {
        for reps in [3u32, 15] {
            let mut v = vec![];
            for _ in 0..5 {
                let mut b = CpuBackend::new(1);
                b.clock = Clock::Thread;
                b.reps = reps;
                b.evict_bytes = 4 << 20;
                v.push(format!("{:.3}", b.measure(&Shape::Gemm { m: 1, k, n }).unwrap().ms));
            }
            println!("k={k} n={n} reps={reps}: {}", v.join(" "));
        }
    }
}
