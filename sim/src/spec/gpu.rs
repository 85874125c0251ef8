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
    /// Dense fp4 tensor-core peak, FLOP/s (Blackwell); `None` without fp4 tensor cores.
    pub(crate) fp4_flops: Option<f64>,
    /// Device memory bandwidth, bytes/s.
    pub hbm_bytes_per_s: f64,
    /// Device memory capacity, bytes.
    pub(crate) memory_bytes: u64,
    /// The memory CUDA reports (`cudaMemGetInfo`'s total, what vLLM multiplies by
    /// gpu_memory_utilization): a little less than the capacity; `None` where no log gives it.
    pub(crate) visible_bytes: Option<u64>,
    /// GPU-to-GPU bandwidth per direction for tensor-parallel collectives, bytes/s (NVLink, or
    /// PCIe where the GPU has no NVLink).
    pub(crate) interconnect_bytes_per_s: f64,
    /// Host link bandwidth per direction (KV swap, weight loading), bytes/s.
    pub(crate) pcie_bytes_per_s: f64,
    /// Whether GPUs talk over NVLink/NVSwitch; false: collectives cross PCIe.
    pub(crate) nvlink: bool,
    /// Network bandwidth per GPU per direction between nodes, bytes/s (`[gpu]
    /// network_gb_per_s`); `None`: the preset's ([`GpuSpec::network_bytes_per_s`]).
    pub(crate) network_bytes_per_s: Option<f64>,
}

pub struct GpuPreset {
    pub name: &'static str,
    pub(crate) bf16_tflops: f64,
    pub(crate) fp8_tflops: Option<f64>,
    pub(crate) fp4_tflops: Option<f64>,
    pub(crate) hbm_gb_per_s: f64,
    pub(crate) memory_mib: u64,
    pub(crate) interconnect_gb_per_s: f64,
    pub(crate) pcie_gb_per_s: f64,
    pub(crate) nvlink: bool,
    /// The system's name in AIConfigurator's kernel database (`h100_sxm`), the folder of its
    /// measured kernels; `None` for a GPU the database has not measured.
    pub database_system: Option<&'static str>,
}

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// Memory CUDA reports per preset, where a published log gives it: vLLM's start-up line "Free
/// memory on device (78.66/79.19 GiB)" on an H100 80GB (vLLM 0.10.2) and "(139.21/139.81 GiB)"
/// on an H200; torch's `total_memory=85093777408` on an A100 80GB PCIe, and
/// `total_memory=32109MB` (torch prints MiB) on an RTX 5090 (the mamf-finder log of the
/// Hugging Face dataset dnakov/consumer-mamf). vLLM prints GiB to two
/// decimals, so those two are known to ±0.005 GiB: the whole MiB nearest (81,091 MiB =
/// 79.1904 GiB; 143,165 MiB = 139.8096 GiB) stands for them.
const CUDA_VISIBLE: &[(&str, u64)] =
    &[("h100-sxm", 81_091 * MIB), ("h200", 143_165 * MIB), ("a100-pcie", 85_093_777_408), ("rtx-5090", 32_109 * MIB)];

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
        fp4_tflops: None,
        nvlink: true,
        database_system: Some("a100_sxm"),
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
        fp4_tflops: None,
        nvlink: true,
        database_system: Some("h100_sxm"),
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
        fp4_tflops: None,
        nvlink: true,
        database_system: Some("h200_sxm"),
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
        fp4_tflops: None,
        nvlink: false,
        database_system: Some("l40s"),
    },
    // NVIDIA DGX/HGX B200 datasheet: per GPU 2.25 PFLOPS BF16, 4.5 PFLOPS FP8 and 9 PFLOPS FP4
    // dense (half the sparse figures), 180 GB HBM3e at 8 TB/s, NVLink 5 1.8 TB/s total = 900 GB/s per
    // direction, PCIe Gen5 x16 64 GB/s per direction. Memory: 183,359 MiB as nvidia-smi reports it
    // (the "180 GB" of the datasheet is rounded; AIConfigurator's b200_sxm.yaml says 180 GiB,
    // 184,320 MiB). 180 GB decimal (171,661 MiB) would refuse DeepSeek-R1 FP8 at TP 4, which
    // real runs served.
    GpuPreset {
        name: "b200",
        bf16_tflops: 2250.0,
        fp8_tflops: Some(4500.0),
        hbm_gb_per_s: 8000.0,
        memory_mib: 183_359,
        interconnect_gb_per_s: 900.0,
        pcie_gb_per_s: 64.0,
        fp4_tflops: Some(9000.0),
        nvlink: true,
        database_system: Some("b200_sxm"),
    },
    // The systems below are AIConfigurator's (`aiconfigurator_core/systems/<system>.yaml` of
    // aiconfigurator-core 0.12.0, Apache-2.0), whose numbers are NVIDIA's datasheets: dense
    // tensor FLOP/s, `mem_bw`, `mem_capacity` (bytes, shown here in MiB), `intra_node_bw` (the
    // GPU-to-GPU bandwidth per direction: NVLink where it is large, PCIe where it equals
    // `pcie_bw`) and `pcie_bw`.
    // a100_pcie.yaml: A100 80GB PCIe, BF16 312 TFLOPS, no FP8, 1,935 GB/s, 80 GiB; no NVLink
    // (intra_node_bw = pcie_bw = 32 GB/s).
    GpuPreset {
        name: "a100-pcie",
        bf16_tflops: 312.0,
        fp8_tflops: None,
        fp4_tflops: None,
        hbm_gb_per_s: 1935.0,
        memory_mib: 81_920,
        interconnect_gb_per_s: 32.0,
        pcie_gb_per_s: 32.0,
        nvlink: false,
        database_system: Some("a100_pcie"),
    },
    // a30.yaml: A30 24GB, BF16 165 TFLOPS, 933 GB/s, 24 GiB, PCIe Gen4 (32 GB/s).
    GpuPreset {
        name: "a30",
        bf16_tflops: 165.0,
        fp8_tflops: None,
        fp4_tflops: None,
        hbm_gb_per_s: 933.0,
        memory_mib: 24_576,
        interconnect_gb_per_s: 32.0,
        pcie_gb_per_s: 32.0,
        nvlink: false,
        database_system: Some("a30"),
    },
    // b300_sxm.yaml: B300 (Blackwell Ultra), BF16 2,250, FP8 4,500, FP4 14,000 TFLOPS dense,
    // 7,750 GB/s, 288,400,343,040 B, NVLink 5 900 GB/s, PCIe Gen6 128 GB/s.
    GpuPreset {
        name: "b300",
        bf16_tflops: 2250.0,
        fp8_tflops: Some(4500.0),
        fp4_tflops: Some(14000.0),
        hbm_gb_per_s: 7750.0,
        memory_mib: 288_400_343_040 / MIB,
        interconnect_gb_per_s: 900.0,
        pcie_gb_per_s: 128.0,
        nvlink: true,
        database_system: Some("b300_sxm"),
    },
    // b60.yaml: Intel Arc Pro B60 24GB, 98.3 TFLOPS (BF16 and FP8 alike), 456 GB/s, 24 GiB,
    // 28.4 GB/s between GPUs, PCIe 32 GB/s.
    GpuPreset {
        name: "b60",
        bf16_tflops: 98.304,
        fp8_tflops: Some(98.304),
        fp4_tflops: None,
        hbm_gb_per_s: 456.0,
        memory_mib: 24_576,
        interconnect_gb_per_s: 28.4,
        pcie_gb_per_s: 32.0,
        nvlink: false,
        database_system: Some("b60"),
    },
    // gb200.yaml: GB200 (per Blackwell GPU of a Grace-Blackwell superchip), BF16 2,500, FP8
    // 5,000, FP4 10,000 TFLOPS dense, 8,000 GB/s, 198,674,743,296 B, NVLink 5 900 GB/s across the
    // NVL72 rack, 4 GPUs per node, host link 64 GB/s.
    GpuPreset {
        name: "gb200",
        bf16_tflops: 2500.0,
        fp8_tflops: Some(5000.0),
        fp4_tflops: Some(10000.0),
        hbm_gb_per_s: 8000.0,
        memory_mib: 198_674_743_296 / MIB,
        interconnect_gb_per_s: 900.0,
        pcie_gb_per_s: 64.0,
        nvlink: true,
        database_system: Some("gb200"),
    },
    // gb300.yaml: GB300, BF16 2,500, FP8 5,000, FP4 15,000 TFLOPS dense, 8,000 GB/s,
    // 298,013,687,808 B, NVLink 5 900 GB/s, host link 64 GB/s.
    GpuPreset {
        name: "gb300",
        bf16_tflops: 2500.0,
        fp8_tflops: Some(5000.0),
        fp4_tflops: Some(15000.0),
        hbm_gb_per_s: 8000.0,
        memory_mib: 298_013_687_808 / MIB,
        interconnect_gb_per_s: 900.0,
        pcie_gb_per_s: 64.0,
        nvlink: true,
        database_system: Some("gb300"),
    },
    // h100_pcie.yaml: H100 PCIe 80GB, BF16 756.5, FP8 1,513 TFLOPS dense, 2,000 GB/s, 80 GiB; no
    // NVLink (intra_node_bw = pcie_bw = 64 GB/s).
    GpuPreset {
        name: "h100-pcie",
        bf16_tflops: 756.5,
        fp8_tflops: Some(1513.0),
        fp4_tflops: None,
        hbm_gb_per_s: 2000.0,
        memory_mib: 81_920,
        interconnect_gb_per_s: 64.0,
        pcie_gb_per_s: 64.0,
        nvlink: false,
        database_system: Some("h100_pcie"),
    },
    // l4.yaml: L4 24GB, BF16 121, FP8 242 TFLOPS dense, 300 GB/s, 24 GiB, PCIe Gen4 32 GB/s.
    GpuPreset {
        name: "l4",
        bf16_tflops: 121.0,
        fp8_tflops: Some(242.0),
        fp4_tflops: None,
        hbm_gb_per_s: 300.0,
        memory_mib: 24_576,
        interconnect_gb_per_s: 32.0,
        pcie_gb_per_s: 32.0,
        nvlink: false,
        database_system: Some("l4"),
    },
    // rtx_pro_6000_server.yaml: RTX PRO 6000 Blackwell Server Edition 96GB, BF16 467.8, FP8
    // 935.6, FP4 1,871.2 TFLOPS dense, 1,792 GB/s, 102,641,958,912 B; no NVLink (64 GB/s PCIe
    // Gen5 between GPUs).
    GpuPreset {
        name: "rtx-pro-6000",
        bf16_tflops: 467.800_535,
        fp8_tflops: Some(935.601_070),
        fp4_tflops: Some(1_871.202_140),
        hbm_gb_per_s: 1792.0,
        memory_mib: 102_641_958_912 / MIB,
        interconnect_gb_per_s: 64.0,
        pcie_gb_per_s: 64.0,
        nvlink: false,
        database_system: Some("rtx_pro_6000_server"),
    },
    // GPUs AIConfigurator's database has not measured (priced by the roofline, or by a profile
    // or calibration of the user's own), from NVIDIA's published figures. Dense tensor FLOP/s
    // are those with FP32 accumulation, what the engines' BF16 and FP8 GEMMs use: GeForce
    // cards run it at half their FP16-accumulate rate.
    // NVIDIA Ada Lovelace architecture whitepaper (Appendix A, GeForce RTX 4090): BF16 tensor
    // 165.2 TFLOPS dense with FP32 accumulate (330.4 sparse), FP8 330.3 dense with FP32
    // accumulate; 24 GB GDDR6X at 1,008 GB/s; no NVLink, PCIe Gen4 x16 (32 GB/s per direction).
    // Memory: 24,564 MiB as nvidia-smi reports it.
    GpuPreset {
        name: "rtx-4090",
        bf16_tflops: 165.2,
        fp8_tflops: Some(330.3),
        fp4_tflops: None,
        hbm_gb_per_s: 1008.0,
        memory_mib: 24_564,
        interconnect_gb_per_s: 32.0,
        pcie_gb_per_s: 32.0,
        nvlink: false,
        database_system: None,
    },
    // NVIDIA RTX Blackwell GPU architecture whitepaper (Appendix A, GeForce RTX 5090): BF16
    // tensor 209.5 TFLOPS dense with FP32 accumulate (419 sparse), FP8 419 dense with FP32
    // accumulate, FP4 1,676 dense (3,352 sparse, the "AI TOPS" of the product page); 32 GB
    // GDDR7 at 1,792 GB/s; no NVLink, PCIe Gen5 x16 (64 GB/s per direction). Memory: 32,607
    // MiB as nvidia-smi reports it. (The half rate with FP32 accumulation is measured on the
    // same generation's GeForce silicon: 47.0 against 87.9 TFLOPS with FP16 accumulation on an
    // RTX 5060 Ti, github.com/QuantumDrizzy/BLACKWALL.)
    GpuPreset {
        name: "rtx-5090",
        bf16_tflops: 209.5,
        fp8_tflops: Some(419.0),
        fp4_tflops: Some(1676.0),
        hbm_gb_per_s: 1792.0,
        memory_mib: 32_607,
        interconnect_gb_per_s: 64.0,
        pcie_gb_per_s: 64.0,
        nvlink: false,
        database_system: None,
    },
    // NVIDIA RTX PRO 6000 Blackwell Workstation Edition (600 W) datasheet: 4,000 FP4 AI TOPS
    // with sparsity, so FP4 2,000, FP8 1,000 and BF16 500 TFLOPS dense (professional cards
    // accumulate in FP32 at full rate); 96 GB GDDR7 at 1,792 GB/s; no NVLink, PCIe Gen5 x16.
    // Memory: the Server Edition's (below, the same board memory). Its kernels are not in the
    // database: the Server Edition's (`rtx-pro-6000`) run at a different power limit.
    GpuPreset {
        name: "rtx-pro-6000-ws",
        bf16_tflops: 500.0,
        fp8_tflops: Some(1000.0),
        fp4_tflops: Some(2000.0),
        hbm_gb_per_s: 1792.0,
        memory_mib: 102_641_958_912 / MIB,
        interconnect_gb_per_s: 64.0,
        pcie_gb_per_s: 64.0,
        nvlink: false,
        database_system: None,
    },
    // NVIDIA A10 datasheet: BF16 and FP16 tensor 125 TFLOPS dense (250 with sparsity), no FP8;
    // 24 GB GDDR6 at 600 GB/s; no NVLink, PCIe Gen4 x16 (64 GB/s both directions together).
    // Memory: 23,028 MiB as nvidia-smi reports it (ECC on, as shipped).
    GpuPreset {
        name: "a10",
        bf16_tflops: 125.0,
        fp8_tflops: None,
        fp4_tflops: None,
        hbm_gb_per_s: 600.0,
        memory_mib: 23_028,
        interconnect_gb_per_s: 32.0,
        pcie_gb_per_s: 32.0,
        nvlink: false,
        database_system: None,
    },
];

/// GPUs users ask for that have no preset, and why: said where an unknown preset is refused.
const WITHOUT_PRESET: &[(&str, &str)] = &[(
    "a10g",
    "AWS's A10G has no NVIDIA datasheet: it shares the A10's 24 GB and 600 GB/s (preset \"a10\") \
     but not its tensor throughput; describe it with the [gpu] keys (bf16_tflops, hbm_gb_per_s, \
     memory_gib, ...) from your own measurements",
)];

impl GpuPreset {
    /// Why `name` has no preset, for a GPU users ask for that servesim knows it cannot describe;
    /// else the preset a device name such as `h100` or `NVIDIA H100 80GB HBM3` most likely means
    /// ([`GpuPreset::of_device`]), offered, not taken: an H100 is an SXM or a PCIe card. An NVL
    /// card or a 40 GB A100 is offered nothing (neither has a preset).
    pub fn why_none(name: &str) -> Option<String> {
        let lower = name.to_ascii_lowercase();
        let words: Vec<&str> = lower.split(|c: char| !c.is_ascii_alphanumeric()).collect();
        if let Some((_, why)) = WITHOUT_PRESET.iter().find(|(n, _)| words.contains(n)) {
            return Some(why.to_string());
        }
        if lower.contains("nvl") || lower.contains("40g") {
            return None;
        }
        let p = GpuPreset::of_device(name).filter(|p| p.name != name)?;
        let pcie = match p.name {
            "h100-sxm" if !lower.contains("sxm") => ", or \"h100-pcie\" for the PCIe card",
            "a100-80g" if !lower.contains("sxm") => ", or \"a100-pcie\" for the PCIe card",
            _ => "",
        };
        Some(format!("did you mean \"{}\"{pcie}?", p.name))
    }

    /// The preset a device name names: a preset's name or database system, or a name as CUDA
    /// and the kernel database give it (`NVIDIA H100 80GB HBM3`, `NVIDIA H200`, `NVIDIA A100-SXM4-80GB`,
    /// `A100-80G (Vidur)`). `None` for a device no preset is (a CPU, a GPU without a preset).
    pub fn of_device(name: &str) -> Option<&'static GpuPreset> {
        if let Some(p) = GpuPreset::find(name) {
            return Some(p);
        }
        let lower = name.to_ascii_lowercase();
        let words: Vec<&str> = lower.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
        let has = |w: &str| {
            words.contains(&w)
                || words.iter().any(|x| x.starts_with(w) && x[w.len()..].chars().all(|c| !c.is_ascii_digit()))
        };
        let pcie = lower.contains("pcie");
        let preset = if has("gb300") {
            "gb300"
        } else if has("gb200") {
            "gb200"
        } else if has("b300") {
            "b300"
        } else if has("b200") {
            "b200"
        } else if has("h200") {
            "h200"
        } else if has("h100") {
            if pcie {
                "h100-pcie"
            } else {
                "h100-sxm"
            }
        } else if has("a100") {
            if pcie {
                "a100-pcie"
            } else {
                "a100-80g"
            }
        } else if has("l40s") {
            "l40s"
        } else if words.contains(&"l4") {
            "l4"
        } else if words.contains(&"a30") {
            "a30"
        } else if words.contains(&"a10") {
            // Not the A10G (its own word): AWS's variant, without a datasheet.
            "a10"
        } else if lower.contains("rtx pro 6000") || lower.contains("rtx-pro-6000") {
            // The Max-Q Workstation Edition runs at 300 W: neither preset.
            match (has("workstation"), has("max")) {
                (_, true) => return None,
                (true, false) => "rtx-pro-6000-ws",
                (false, false) => "rtx-pro-6000",
            }
        } else if words.contains(&"rtx") && !has("laptop") && !words.contains(&"d") {
            // GeForce desktop cards only: a laptop GPU or a China-market "D" has fewer SMs.
            match () {
                _ if words.contains(&"4090") => "rtx-4090",
                _ if words.contains(&"5090") => "rtx-5090",
                _ => return None,
            }
        } else {
            return None;
        };
        GpuPreset::find(preset)
    }

    /// A preset by its name, or by its kernel database system (`h100_sxm`).
    pub fn find(name: &str) -> Option<&'static GpuPreset> {
        GPU_PRESETS
            .iter()
            .find(|p| p.name == name)
            .or_else(|| GPU_PRESETS.iter().find(|p| p.database_system == Some(name)))
    }

    pub fn names() -> Vec<&'static str> {
        GPU_PRESETS.iter().map(|p| p.name).collect()
    }

    pub fn spec(&self) -> GpuSpec {
        GpuSpec {
            name: self.name.to_string(),
            bf16_flops: self.bf16_tflops * 1e12,
            fp8_flops: self.fp8_tflops.map(|t| t * 1e12),
            fp4_flops: self.fp4_tflops.map(|t| t * 1e12),
            hbm_bytes_per_s: self.hbm_gb_per_s * 1e9,
            memory_bytes: self.memory_mib * MIB,
            visible_bytes: CUDA_VISIBLE.iter().find(|(n, _)| *n == self.name).map(|&(_, b)| b),
            interconnect_bytes_per_s: self.interconnect_gb_per_s * 1e9,
            pcie_bytes_per_s: self.pcie_gb_per_s * 1e9,
            nvlink: self.nvlink,
            network_bytes_per_s: None,
        }
    }
}

/// GPUs per node and the network between nodes per GPU per direction (GB/s), by kernel
/// database system: AIConfigurator's system yamls (`node.num_gpus_per_node`,
/// `node.inter_node_bw`; aiconfigurator-core 0.12.0) — one 400 Gb/s NIC per H100/H200, 800 Gb/s
/// per B200/B300, 200 Gb/s per A100, NVLink across the rack for GB200/GB300 (4 GPUs a tray).
const NODES: &[(&str, u64, f64)] = &[
    ("a100_sxm", 8, 25.0),
    ("a100_pcie", 8, 25.0),
    ("a30", 8, 25.0),
    ("l4", 8, 25.0),
    ("h100_sxm", 8, 50.0),
    ("h100_pcie", 8, 50.0),
    ("h200_sxm", 8, 50.0),
    ("l40s", 8, 50.0),
    ("b60", 8, 50.0),
    ("rtx_pro_6000_server", 8, 50.0),
    ("b200_sxm", 8, 100.0),
    ("b300_sxm", 8, 100.0),
    ("gb200", 4, 900.0),
    ("gb300", 4, 900.0),
];

/// A custom GPU's node: 8 GPUs, 400 Gb/s per GPU (the H100's).
const DEFAULT_NODE: (u64, f64) = (8, 50.0);

impl GpuSpec {
    /// The preset's node: (GPUs per node, network GB/s per GPU).
    fn node(&self) -> (u64, f64) {
        GpuPreset::find(&self.name)
            .and_then(|p| NODES.iter().find(|n| Some(n.0) == p.database_system))
            .map_or(DEFAULT_NODE, |n| (n.1, n.2))
    }

    /// GPUs one node holds (a pipeline beyond it sends between nodes).
    pub fn gpus_per_node(&self) -> u64 {
        self.node().0
    }

    /// Network bandwidth per GPU per direction between nodes, bytes/s.
    pub fn network_bytes_per_s(&self) -> f64 {
        self.network_bytes_per_s.unwrap_or_else(|| self.node().1 * 1e9)
    }

    /// Whether the GPU has FP4 tensor cores (Blackwell, compute capability 10.0 and up): the
    /// engines pick their 4-bit MoE kernels by it.
    pub fn has_fp4(&self) -> bool {
        self.fp4_flops.is_some()
    }

    pub fn memory_gib(&self) -> f64 {
        self.memory_bytes as f64 / GIB as f64
    }

    /// Memory as CUDA reports it, if known (see `visible_bytes`).
    pub fn visible_bytes(&self) -> Option<u64> {
        self.visible_bytes
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn device_names_map_to_their_presets() {
        let of = |n: &str| GpuPreset::of_device(n).map(|p| p.name);
        for (name, want) in [
            ("NVIDIA H100 80GB HBM3", Some("h100-sxm")),
            ("NVIDIA H100 PCIe", Some("h100-pcie")),
            ("NVIDIA H200", Some("h200")),
            ("NVIDIA A100-SXM4-80GB", Some("a100-80g")),
            ("A100-80G (Vidur)", Some("a100-80g")),
            ("NVIDIA L40S", Some("l40s")),
            ("NVIDIA L4", Some("l4")),
            ("NVIDIA B200", Some("b200")),
            ("NVIDIA GB200", Some("gb200")),
            ("h100_sxm", Some("h100-sxm")),
            ("NVIDIA RTX PRO 6000 Blackwell Server Edition", Some("rtx-pro-6000")),
            ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", Some("rtx-pro-6000-ws")),
            ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", None),
            ("NVIDIA GeForce RTX 4090", Some("rtx-4090")),
            ("NVIDIA A10", Some("a10")),
            ("NVIDIA A10G", None),
            ("NVIDIA GeForce RTX 5090", Some("rtx-5090")),
            ("NVIDIA GeForce RTX 4090 D", None),
            ("NVIDIA GeForce RTX 5090 Laptop GPU", None),
            ("NVIDIA GeForce RTX 4080", None),
            ("NVIDIA H1000", None),
            ("AMD EPYC 9654", None),
        ] {
            assert_eq!(of(name), want, "{name}");
        }
    }
    use super::*;

    /// The A10G has a reason for having no preset (said where a scenario names it:
    /// `scenario::tests`); the A10 has one.
    #[test]
    fn the_a10g_is_refused_with_why() {
        assert!(GpuPreset::why_none("a10g").is_some() && GpuPreset::why_none("NVIDIA A10G").is_some());
        assert!(GpuPreset::why_none("a10").is_none() && GpuPreset::why_none("h9000").is_none());
    }

    /// A device name is offered the preset it most likely is, never taken for it.
    #[test]
    fn a_device_name_is_offered_its_preset() {
        let why = |n: &str| GpuPreset::why_none(n);
        assert_eq!(why("h100").as_deref(), Some("did you mean \"h100-sxm\", or \"h100-pcie\" for the PCIe card?"));
        assert_eq!(why("NVIDIA H100 80GB HBM3").as_deref(), why("h100").as_deref());
        assert_eq!(why("H100-SXM").as_deref(), Some("did you mean \"h100-sxm\"?"));
        assert_eq!(why("NVIDIA H100 PCIe").as_deref(), Some("did you mean \"h100-pcie\"?"));
        assert_eq!(why("B200").as_deref(), Some("did you mean \"b200\"?"));
        assert_eq!(why("a100").as_deref(), Some("did you mean \"a100-80g\", or \"a100-pcie\" for the PCIe card?"));
        for none in ["H100 NVL", "NVIDIA H200 NVL", "A100-SXM4-40GB", "h9000", "h200"] {
            assert_eq!(why(none), None, "{none}");
        }
    }

    #[test]
    fn presets_are_consistent() {
        for p in GPU_PRESETS {
            let s = p.spec();
            assert!(s.bf16_flops > 9e13, "{}", p.name);
            if let Some(f8) = s.fp8_flops {
                // Every NVIDIA fp8-capable generation doubles bf16 throughput (Intel's B60 has
                // no faster fp8 path).
                let want = if p.name == "b60" { 1.0 } else { 2.0 };
                assert!((f8 / s.bf16_flops - want).abs() < 0.03, "{}", p.name);
            }
            if let Some(f4) = s.fp4_flops {
                assert!(f4 >= 2.0 * s.fp8_flops.unwrap() * 0.99, "{}", p.name);
            }
            assert!(s.memory_gib() > 20.0 && s.memory_gib() < 300.0, "{}", p.name);
            // GPUs without NVLink talk over their host link.
            assert_eq!(s.nvlink, s.interconnect_bytes_per_s > s.pcie_bytes_per_s, "{}", p.name);
            if let Some(system) = p.database_system {
                assert_eq!(GpuPreset::find(system).unwrap().name, p.name);
            }
        }
        assert_eq!(GpuPreset::find("a100-80g").unwrap().spec().memory_bytes, 80 * GIB);
        // What CUDA reports sits under what nvidia-smi does (498 MiB on an RTX 5090, 468 on an
        // H100 SXM).
        let rtx = GpuPreset::find("rtx-5090").unwrap().spec();
        assert_eq!((rtx.visible_bytes(), rtx.memory_bytes - 32_109 * MIB), (Some(32_109 * MIB), 498 * MIB));
        for p in GPU_PRESETS {
            let s = p.spec();
            assert!(s.visible_bytes().is_none_or(|v| v < s.memory_bytes), "{}", p.name);
        }
        assert!(GpuPreset::find("a100-80g").unwrap().fp8_tflops.is_none());
    }
}
