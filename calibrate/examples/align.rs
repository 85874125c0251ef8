use servesim_calibrate::clock::{keep_heap_mapped, Clock};
use servesim_kernels::cpu;

fn main() {
    keep_heap_mapped();
    let clock = Clock::Thread;
    for &(k, n, name) in
        &[(512usize, 8192usize, "lm_head"), (512, 512, "o_proj"), (1536, 512, "down"), (512, 3072, "up")]
    {
        for m in [1usize, 4] {
            let mut line = format!("{name} m={m}:");
            for off in [0usize, 4, 8, 12] {
                // 4 copies, each at `off` floats past a 64-byte boundary.
                let copies: Vec<Vec<f32>> =
                    (0..(64 << 20) / (4 * k * n) + 1).map(|_| vec![0.5f32; k * n + 64]).collect();
                let start = |v: &Vec<f32>| {
                    let a = v.as_ptr() as usize;
                    ((64 - a % 64) % 64) / 4 + off
                };
                let a = vec![0.25f32; m * k];
                let mut c = vec![0f32; m * n];
                let mut ts = vec![];
                for i in 0..41 {
                    let w = &copies[i % copies.len()];
                    let s = start(w);
                    let t = clock.now_ns();
                    cpu::gemm(&a, &w[s..s + k * n], &mut c, m, k, n);
                    if i > 0 {
                        ts.push((clock.now_ns() - t) as f64 * 1e-6);
                    }
                }
                ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
                line += &format!("  off{:>2}B {:.3}", off * 4, ts[ts.len() / 2]);
            }
            println!("{line}");
        }
    }
}
