//! GPU presets. FLOP/s are dense (no structured sparsity) tensor-core peaks; bandwidths are per
//! direction, which is what a ring all-reduce or a host copy can use.

/// What the cost and memory models need to know about one GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuSpec {
    pub name: String,
    /// Dense bf16 tensor-core peak, FLOP/s.
    pub bf16_flops: f64,
    /// Dense fp8 tensor-core peak, FLOP/s; `None` where the GPU has no fp8 tensor cores (fp8
    /// weights then run weight-only: half the bytes, bf16 math).
    pub fp8_flops: Option<f64>,
    /// Device memory bandwidth, bytes/s.
    pub hbm_bytes_per_s: f64,
    /// Device memory capacity, bytes.
    pub memory_bytes: u64,
    /// GPU-to-GPU bandwidth per direction for tensor-parallel collectives, bytes/s (NVLink, or
    /// PCIe where the GPU has no NVLink).
    pub interconnect_bytes_per_s: f64,
    /// Host link bandwidth per direction (KV swap, weight loading), bytes/s.
    pub pcie_bytes_per_s: f64,
}

pub struct GpuPreset {
    pub name: &'static str,
    pub bf16_tflops: f64,
    pub fp8_tflops: Option<f64>,
    pub hbm_gb_per_s: f64,
    pub memory_mib: u64,
    pub interconnect_gb_per_s: f64,
    pub pcie_gb_per_s: f64,
}

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

pub const GPU_PRESETS: &[GpuPreset] = &[
    // NVIDIA A100 80GB SXM datasheet (2021): BF16 tensor 312 TFLOPS dense (624 with sparsity),
    // no FP8; HBM2e 2,039 GB/s; NVLink 3 600 GB/s total = 300 GB/s per direction; PCIe Gen4 x16
    // 32 GB/s per direction. Memory: 81,920 MiB as nvidia-smi reports it.
    GpuPreset {
        name: "a100-80g",
        bf16_tflops: 312.0,
        fp8_tflops: None,
        hbm_gb_per_s: 2039.0,
        memory_mib: 81_920,
        interconnect_gb_per_s: 300.0,
        pcie_gb_per_s: 32.0,
    },
    // NVIDIA H100 SXM5 80GB datasheet: BF16 989.4 TFLOPS dense (1,979 sparse), FP8 1,978.9 dense;
    // HBM3 3.35 TB/s; NVLink 4 900 GB/s total = 450 per direction; PCIe Gen5 x16 64 GB/s per
    // direction. Memory: 81,559 MiB as nvidia-smi reports it.
    GpuPreset {
        name: "h100-sxm",
        bf16_tflops: 989.4,
        fp8_tflops: Some(1978.9),
        hbm_gb_per_s: 3350.0,
        memory_mib: 81_559,
        interconnect_gb_per_s: 450.0,
        pcie_gb_per_s: 64.0,
    },
    // NVIDIA H200 SXM datasheet: same tensor cores as H100 SXM (BF16 989.4 / FP8 1,978.9 dense);
    // HBM3e 141 GB at 4.8 TB/s; NVLink 4 900 GB/s total. Memory: 143,771 MiB as nvidia-smi
    // reports it.
    GpuPreset {
        name: "h200",
        bf16_tflops: 989.4,
        fp8_tflops: Some(1978.9),
        hbm_gb_per_s: 4800.0,
        memory_mib: 143_771,
        interconnect_gb_per_s: 450.0,
        pcie_gb_per_s: 64.0,
    },
    // NVIDIA L40S datasheet: BF16 362.05 TFLOPS dense (733 sparse), FP8 733 dense (1,466 sparse);
    // 48 GB GDDR6 at 864 GB/s; no NVLink, so collectives cross PCIe Gen4 x16 (32 GB/s per
    // direction). Memory: 46,068 MiB as nvidia-smi reports it.
    GpuPreset {
        name: "l40s",
        bf16_tflops: 362.05,
        fp8_tflops: Some(733.0),
        hbm_gb_per_s: 864.0,
        memory_mib: 46_068,
        interconnect_gb_per_s: 32.0,
        pcie_gb_per_s: 32.0,
    },
    // NVIDIA DGX/HGX B200 datasheet: per GPU 2.25 PFLOPS BF16 dense and 4.5 PFLOPS FP8 dense
    // (half the sparse figures), 180 GB HBM3e at 8 TB/s, NVLink 5 1.8 TB/s total = 900 GB/s per
    // direction, PCIe Gen5 x16 64 GB/s per direction. Memory: 180 GB (decimal) as listed.
    GpuPreset {
        name: "b200",
        bf16_tflops: 2250.0,
        fp8_tflops: Some(4500.0),
        hbm_gb_per_s: 8000.0,
        memory_mib: 180_000_000_000 / MIB,
        interconnect_gb_per_s: 900.0,
        pcie_gb_per_s: 64.0,
    },
];

impl GpuPreset {
    pub fn find(name: &str) -> Option<&'static GpuPreset> {
        GPU_PRESETS.iter().find(|p| p.name == name)
    }

    pub fn names() -> Vec<&'static str> {
        GPU_PRESETS.iter().map(|p| p.name).collect()
    }

    pub fn spec(&self) -> GpuSpec {
        GpuSpec {
            name: self.name.to_string(),
            bf16_flops: self.bf16_tflops * 1e12,
            fp8_flops: self.fp8_tflops.map(|t| t * 1e12),
            hbm_bytes_per_s: self.hbm_gb_per_s * 1e9,
            memory_bytes: self.memory_mib * MIB,
            interconnect_bytes_per_s: self.interconnect_gb_per_s * 1e9,
            pcie_bytes_per_s: self.pcie_gb_per_s * 1e9,
        }
    }
}

impl GpuSpec {
    pub fn memory_gib(&self) -> f64 {
        self.memory_bytes as f64 / GIB as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_consistent() {
        for p in GPU_PRESETS {
            let s = p.spec();
            assert!(s.bf16_flops > 1e14, "{}", p.name);
            if let Some(f8) = s.fp8_flops {
                // Every fp8-capable generation doubles bf16 throughput.
                assert!((f8 / s.bf16_flops - 2.0).abs() < 0.03, "{}", p.name);
            }
            assert!(s.memory_gib() > 40.0 && s.memory_gib() < 200.0, "{}", p.name);
        }
        assert_eq!(GpuPreset::find("a100-80g").unwrap().spec().memory_bytes, 80 * GIB);
        assert!(GpuPreset::find("a100-80g").unwrap().fp8_tflops.is_none());
    }
}
