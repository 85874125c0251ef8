//! CPU overhead per iteration: at high concurrency the CPU's share grows until the GPU waits
//! for it, even when the engine overlaps the two.

use super::*;
use servesim_sim::cost::BatchShape;
use servesim_sim::engine::cost_model;

fn closed(clients: u32, scheduler: &str) -> String {
    h100(
        scheduler,
        &format!(
            "requests = {}\narrival = {{ kind = \"closed-loop\", clients = {clients} }}\n\
             prompt_tokens = {{ kind = \"fixed\", value = 20 }}\noutput_tokens = {{ kind = \"fixed\", value = 200 }}",
            clients * 4
        ),
    )
}

/// CPU and total time of a steady decode iteration of `n` sequences at context `ctx`.
fn decode_iteration(src: &str, n: u64, ctx: u64) -> (f64, f64) {
    let s = scenario(src);
    let c = cost_model(&s, 0);
    let mut b = BatchShape::default();
    for _ in 0..n {
        b.add_decode(ctx);
    }
    (c.cpu_time(&b).as_secs_f64(), c.iteration_time(&b).as_secs_f64())
}

#[test]
fn the_cpu_share_grows_with_concurrency_until_the_gpu_waits() {
    let low = run(&closed(1, "")).summary;
    let high = run(&closed(256, "")).summary;
    // By hand (defaults 806.3 µs + 37.48 µs per sequence): one sequence, 843.8 µs of CPU per
    // iteration; 256 sequences, 10,401 µs.
    let (cpu1, it1) = decode_iteration(&closed(1, ""), 1, 120);
    let (cpu256, it256) = decode_iteration(&closed(256, ""), 256, 120);
    assert!((cpu1 - 843.78e-6).abs() < 1e-9 && (cpu256 - 10_401.18e-6).abs() < 1e-9);
    eprintln!(
        "CPU share of busy time: batch 1 {:.3} (one decode {:.3}), batch 256 {:.3} (one decode {:.3})",
        low.cpu.overhead_fraction,
        cpu1 / it1,
        high.cpu.overhead_fraction,
        cpu256 / it256
    );
    // The run's share is the steady decode iterations' share, less where prefills (GPU-heavy)
    // and smaller batches (while requests come and go) mix in.
    assert!((low.cpu.overhead_fraction - cpu1 / it1).abs() < 0.01);
    assert!(high.cpu.overhead_fraction < cpu256 / it256 && high.cpu.overhead_fraction > cpu256 / it256 - 0.1);
    assert!(high.cpu.overhead_fraction > 3.0 * low.cpu.overhead_fraction);
    // Without overlap the GPU waits through every CPU part.
    assert!((high.cpu.gpu_wait_fraction - high.cpu.overhead_fraction).abs() < 1e-12);

    // Overlapped (async scheduling): at batch 1 the CPU hides behind the GPU; at 256 the CPU
    // part (10.4 ms) exceeds the GPU's (≈ 7.5 ms: the weights and 256 short contexts of KV)
    // and the GPU waits for it.
    let low_o = run(&closed(1, "[scheduler.cpu]\noverlap = true")).summary;
    let high_o = run(&closed(256, "[scheduler.cpu]\noverlap = true")).summary;
    let gpu256 = it256 - cpu256;
    eprintln!(
        "overlapped: GPU waits {:.3} of busy time at batch 1, {:.3} at 256 (one decode: {:.3}); TPOT {:.2} → {:.2} ms at 256",
        low_o.cpu.gpu_wait_fraction,
        high_o.cpu.gpu_wait_fraction,
        (cpu256 - gpu256) / cpu256,
        high.tpot_ms.mean,
        high_o.tpot_ms.mean
    );
    assert!(low_o.cpu.gpu_wait_fraction < 0.01);
    assert!(cpu256 > gpu256 && (high_o.cpu.gpu_wait_fraction - (cpu256 - gpu256) / cpu256).abs() < 0.05);
    assert!(high_o.tpot_ms.mean < high.tpot_ms.mean);
}

#[test]
fn cpu_overhead_is_configurable_per_group() {
    let none = run(&closed(64, "[scheduler.cpu]\nbase_us = 0\nper_seq_us = 0")).summary;
    assert_eq!(none.cpu.overhead_fraction, 0.0);
    let (cpu, _) = decode_iteration(&closed(64, "[scheduler.cpu]\nbase_us = 100\nper_seq_us = 10"), 64, 300);
    assert!((cpu - 740e-6).abs() < 1e-9, "100 + 64 × 10 µs");
    let fast = run(&closed(64, "[scheduler.cpu]\nbase_us = 100\nper_seq_us = 10")).summary;
    let default = run(&closed(64, "")).summary;
    assert!(fast.tpot_ms.mean < default.tpot_ms.mean && fast.cpu.overhead_fraction < default.cpu.overhead_fraction);
}
