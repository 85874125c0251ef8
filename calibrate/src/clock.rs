//! Clocks for timing on the CPU: the wall clock, or the CPU time of the calling thread.
//!
//! On a shared machine the wall clock also counts the time the OS gives other processes while
//! ours waits; the thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`) counts only the time this
//! thread ran, so it measures what an idle, dedicated core would show. It only covers work
//! done on the calling thread: single-threaded kernels (the CPU GEMM pinned to one thread with
//! `MATMUL_NUM_THREADS=1`).

use std::sync::OnceLock;
use std::time::Instant;

/// Which clock a CPU measurement reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Clock {
    /// Elapsed real time.
    #[default]
    Wall,
    /// CPU time of the calling thread.
    Thread,
}

impl Clock {
    pub fn name(self) -> &'static str {
        match self {
            Clock::Wall => "wall",
            Clock::Thread => "thread",
        }
    }

    /// Nanoseconds on this clock since an arbitrary origin.
    pub fn now_ns(self) -> u64 {
        match self {
            Clock::Wall => {
                static ORIGIN: OnceLock<Instant> = OnceLock::new();
                ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64
            }
            Clock::Thread => thread_cpu_ns(),
        }
    }
}

#[cfg(unix)]
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID exists on every
    // platform this builds for (Linux, the BSDs, macOS ≥ 10.12).
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(not(unix))]
fn thread_cpu_ns() -> u64 {
    // No portable thread clock: fall back to the wall clock.
    Clock::Wall.now_ns()
}

/// Keeps freed heap memory mapped (glibc: no `mmap` for large blocks, no trimming), so that
/// buffers allocated inside timed code — the GEMM's packing buffers, allocated per call — do
/// not page-fault on every call. Measured on `validate --iterations`: 11.2 million minor page
/// faults and 31 s of system time in a 125 s run before, 97 thousand and 0.3 s after. Timing
/// code calls this once before measuring; elsewhere it is a no-op.
pub fn keep_heap_mapped() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator thresholds; called before the timed work, with
    // values in range (32 MiB is glibc's largest mmap threshold on 64-bit).
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_time_advances_with_work_and_not_with_sleep() {
        let t0 = Clock::Thread.now_ns();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let slept = Clock::Thread.now_ns() - t0;
        assert!(slept < 10_000_000, "sleeping cost {slept} ns of thread time");
        let t1 = Clock::Thread.now_ns();
        let mut x = 0u64;
        while Clock::Thread.now_ns() - t1 < 5_000_000 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        let w0 = Clock::Wall.now_ns();
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(Clock::Wall.now_ns() - w0 >= 5_000_000);
    }
}
