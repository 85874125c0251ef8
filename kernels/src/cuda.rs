//! The GPU side: opening the device, compiling the sources, launching each op, and checking
//! each kernel against its CPU reference.
//!
//! [`Gpu::open`] checks, in order, that the CUDA driver library loads, that it sees a device,
//! that NVRTC and cuBLAS load, and only then creates a context: every missing piece is a
//! [`CudaUnavailable`] error saying what was not found and what to do instead, never a panic
//! (cudarc panics when a function of a missing library is called).
//!
//! Buffers hold bf16 as `u16`; the GEMMs are cuBLAS `cublasGemmEx` with bf16 inputs and output
//! and fp32 accumulation (`CUBLAS_COMPUTE_32F`).

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cublas::{result as blas_result, sys as blas_sys, CudaBlas};
use cudarc::driver::sys::{CUdevice_attribute as Attr, CUevent_flags};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg,
};

use crate::nvrtc;

/// Why the CUDA backend cannot run here.
#[derive(Clone, Debug, thiserror::Error)]
pub enum CudaUnavailable {
    #[error(
        "no CUDA driver found (libcuda.so could not be loaded): this machine has no NVIDIA GPU driver. \
         Run on a machine with an NVIDIA GPU and its driver, or use `--backend cpu` (the CPU reference ops), \
         or use measured GPU times with `servesim calibrate import-vidur`"
    )]
    NoDriver,
    #[error(
        "no CUDA device found ({0}): the driver is installed but reports no usable GPU. Check `nvidia-smi`, \
         or use `--backend cpu`, or `servesim calibrate import-vidur`"
    )]
    NoDevice(String),
    #[error(
        "NVRTC (libnvrtc.so.{major}) not found in {dirs:?} or the loader's paths: install the CUDA {major} toolkit, \
         or the wheels (pip install --target DIR nvidia-cuda-nvrtc=={major}.0.* nvidia-cuda-runtime=={major}.0.*) \
         and set SERVESIM_CUDA_HOME=DIR/nvidia/cu{major}"
    )]
    NoNvrtc { major: u32, dirs: Vec<std::path::PathBuf> },
    #[error(
        "cuBLAS (libcublas.so.{major}) not found in {dirs:?} or the loader's paths: install the CUDA {major} toolkit \
         or the nvidia-cublas wheel, and set SERVESIM_CUDA_HOME to the folder holding lib/"
    )]
    NoCublas { major: u32, dirs: Vec<std::path::PathBuf> },
    #[error("CUDA error while {0}")]
    Driver(String),
}

/// A CUDA call on an open GPU that failed: which call (with its shape), and the driver's or
/// cuBLAS's error.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{op}: {detail}")]
pub struct GpuError {
    pub op: String,
    pub detail: String,
}

impl GpuError {
    pub fn new(op: impl Into<String>, e: impl std::fmt::Debug) -> GpuError {
        GpuError { op: op.into(), detail: format!("{e:?}") }
    }
}

/// What the device is, for the profile's metadata.
#[derive(Clone, Debug, Default)]
pub struct DeviceInfo {
    pub name: String,
    pub compute_capability: (i32, i32),
    pub driver_version: i32,
    pub multiprocessors: i32,
    pub l2_bytes: i64,
    pub memory_bytes: usize,
    pub sm_clock_mhz: i32,
    pub mem_clock_mhz: i32,
    pub nvrtc_version: (i32, i32),
}

/// An open GPU: context, stream, cuBLAS handle and the compiled kernels.
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    blas: CudaBlas,
    funcs: HashMap<&'static str, CudaFunction>,
    pub info: DeviceInfo,
    /// Head size the prefill kernel was compiled for.
    pub head_dim: usize,
}

fn drv<T, E: std::fmt::Debug>(what: &str, r: Result<T, E>) -> Result<T, CudaUnavailable> {
    r.map_err(|e| CudaUnavailable::Driver(format!("{what}: {e:?}")))
}

/// Checks that the driver loads and sees a device, without creating a context.
pub fn probe() -> Result<(), CudaUnavailable> {
    nvrtc::preload("libcuda.so.1");
    // SAFETY: only tries to open the library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(CudaUnavailable::NoDriver);
    }
    cudarc::driver::result::init().map_err(|e| CudaUnavailable::NoDevice(format!("cuInit: {e:?}")))?;
    let mut n = 0;
    // SAFETY: the driver is loaded and initialised; `n` is valid for writes.
    unsafe { cudarc::driver::sys::cuDeviceGetCount(&mut n) }
        .result()
        .map_err(|e| CudaUnavailable::NoDevice(format!("cuDeviceGetCount: {e:?}")))?;
    if n == 0 {
        return Err(CudaUnavailable::NoDevice("cuDeviceGetCount: 0 devices".into()));
    }
    Ok(())
}

impl Gpu {
    /// Opens device 0 and compiles every kernel for its architecture (the prefill kernel for
    /// `head_dim`).
    pub fn open(head_dim: usize) -> Result<Gpu, CudaUnavailable> {
        probe()?;
        if !nvrtc::nvrtc_present() {
            return Err(CudaUnavailable::NoNvrtc { major: nvrtc::CUDA_MAJOR, dirs: nvrtc::cuda_dirs() });
        }
        nvrtc::preload(&format!("libcublasLt.so.{}", nvrtc::CUDA_MAJOR));
        nvrtc::preload(&format!("libcublas.so.{}", nvrtc::CUDA_MAJOR));
        // SAFETY: only tries to open the library.
        if !unsafe { blas_sys::is_culib_present() } {
            return Err(CudaUnavailable::NoCublas { major: nvrtc::CUDA_MAJOR, dirs: nvrtc::cuda_dirs() });
        }
        let ctx = drv("creating a context on device 0", CudaContext::new(0))?;
        let stream = drv("creating a stream", ctx.new_stream())?;
        let blas = drv("creating a cuBLAS handle", CudaBlas::new(stream.clone()))?;
        let attr = |a: Attr| ctx.attribute(a).unwrap_or(0);
        let mut driver_version = 0;
        // SAFETY: the driver is loaded; the pointer is valid for writes.
        let _ = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver_version) };
        let cc = drv("reading the compute capability", ctx.compute_capability())?;
        let info = DeviceInfo {
            name: ctx.name().unwrap_or_else(|_| "unknown CUDA device".into()),
            compute_capability: cc,
            driver_version,
            multiprocessors: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE) as i64,
            memory_bytes: ctx.total_mem().unwrap_or(0),
            sm_clock_mhz: attr(Attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE) / 1000,
            mem_clock_mhz: attr(Attr::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE) / 1000,
            nvrtc_version: nvrtc::version().unwrap_or((0, 0)),
        };
        let arch = format!("sm_{}{}", cc.0, cc.1);
        let mut funcs = HashMap::new();
        for ((file, src), (_, entries)) in crate::SOURCES.iter().zip(crate::ENTRY_POINTS) {
            let per_head_size = matches!(*file, "prefill_attention.cu" | "decode_attention.cu");
            let extra = if per_head_size { vec![format!("-DHEAD_DIM={head_dim}")] } else { vec![] };
            let cubin = nvrtc::compile(file, src, &arch, &extra).map_err(|e| CudaUnavailable::Driver(e.to_string()))?;
            let module = drv(&format!("loading {file}"), ctx.load_module(cudarc::nvrtc::Ptx::from_binary(cubin)))?;
            for e in *entries {
                funcs.insert(*e, drv(&format!("finding kernel {e}"), module.load_function(e))?);
            }
        }
        Ok(Gpu { ctx, stream, blas, funcs, info, head_dim })
    }

    fn f(&self, name: &str) -> &CudaFunction {
        &self.funcs[name]
    }

    pub fn upload_bf16(&self, v: &[f32]) -> Result<CudaSlice<u16>, GpuError> {
        self.stream.clone_htod(&crate::bf16::encode(v)).map_err(|e| GpuError::new("upload", e))
    }

    pub fn upload<T: cudarc::driver::DeviceRepr>(&self, v: &[T]) -> Result<CudaSlice<T>, GpuError> {
        self.stream.clone_htod(v).map_err(|e| GpuError::new("upload", e))
    }

    pub fn zeros<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
        &self,
        n: usize,
    ) -> Result<CudaSlice<T>, GpuError> {
        self.stream.alloc_zeros(n).map_err(|e| GpuError::new(format!("alloc of {n} elements"), e))
    }

    pub fn download_bf16(&self, s: &CudaSlice<u16>) -> Result<Vec<f32>, GpuError> {
        Ok(crate::bf16::decode(&self.stream.clone_dtoh(s).map_err(|e| GpuError::new("download", e))?))
    }

    pub fn download<T: cudarc::driver::DeviceRepr>(&self, s: &CudaSlice<T>) -> Result<Vec<T>, GpuError> {
        self.stream.clone_dtoh(s).map_err(|e| GpuError::new("download", e))
    }

    pub fn event(&self) -> Result<CudaEvent, GpuError> {
        self.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(|e| GpuError::new("event", e))
    }

    pub fn sync(&self) -> Result<(), GpuError> {
        self.stream.synchronize().map_err(|e| GpuError::new("synchronize", e))
    }

    /// c[m×n] = a[m×k] · w[k×n], row-major bf16, fp32 accumulation.
    pub fn gemm(
        &self,
        a: &CudaSlice<u16>,
        w: &CudaSlice<u16>,
        c: &mut CudaSlice<u16>,
        m: usize,
        k: usize,
        n: usize,
    ) -> Result<(), GpuError> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (ap, _ga) = a.device_ptr(&self.stream);
        let (wp, _gw) = w.device_ptr(&self.stream);
        let (cp, _gc) = c.device_ptr_mut(&self.stream);
        let bf16 = blas_sys::cudaDataType::CUDA_R_16BF;
        // Row-major C = A·W is column-major Cᵀ = Wᵀ·Aᵀ: cuBLAS sees W (n×k, ld n) times A (k×m, ld k).
        // SAFETY: the pointers are live device buffers of at least k·n, m·k and m·n elements
        // (the callers allocate them so), on the handle's stream.
        unsafe {
            blas_result::gemm_ex(
                *self.blas.handle(),
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                n as i32,
                m as i32,
                k as i32,
                &alpha as *const f32 as *const c_void,
                wp as *const c_void,
                bf16,
                n as i32,
                ap as *const c_void,
                bf16,
                k as i32,
                &beta as *const f32 as *const c_void,
                cp as *mut c_void,
                bf16,
                n as i32,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| GpuError::new(format!("cublasGemmEx {m}×{k}×{n}"), e))
    }

    /// Fused residual add + RMSNorm over `tokens` rows.
    pub fn rms_norm(
        &self,
        out: &mut CudaSlice<u16>,
        x: &mut CudaSlice<u16>,
        weight: &CudaSlice<u16>,
        residual: &mut CudaSlice<u16>,
        tokens: usize,
        hidden: usize,
    ) -> Result<(), GpuError> {
        let (h, eps) = (hidden as i32, 1e-5f32);
        let mut b = self.stream.launch_builder(self.f("rms_norm"));
        b.arg(out).arg(x).arg(weight).arg(residual).arg(&h).arg(&eps);
        let cfg = LaunchConfig { grid_dim: (tokens as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: argument types and order match rms_norm.cu; buffers hold tokens × hidden.
        unsafe { b.launch(cfg) }.map(|_| ()).map_err(|e| GpuError::new("rms_norm", e))
    }

    /// RoPE in place on q and k (contiguous `[tokens, heads, head_dim]`).
    #[allow(clippy::too_many_arguments)]
    pub fn rope(
        &self,
        q: &mut CudaSlice<u16>,
        k: &mut CudaSlice<u16>,
        positions: &CudaSlice<i32>,
        tokens: usize,
        q_heads: usize,
        kv_heads: usize,
        head_dim: usize,
    ) -> Result<(), GpuError> {
        let (qh, kh, hd) = (q_heads as i32, kv_heads as i32, head_dim as i32);
        let (qs, ks, theta) = (qh * hd, kh * hd, 500000.0f32);
        let mut b = self.stream.launch_builder(self.f("rope"));
        b.arg(q).arg(k).arg(positions).arg(&qh).arg(&kh).arg(&hd).arg(&qs).arg(&ks).arg(&theta);
        let cfg = LaunchConfig { grid_dim: (tokens as u32, 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: argument types and order match rope.cu.
        unsafe { b.launch(cfg) }.map(|_| ()).map_err(|e| GpuError::new("rope", e))
    }

    pub fn silu_mul(
        &self,
        out: &mut CudaSlice<u16>,
        gate_up: &CudaSlice<u16>,
        tokens: usize,
        d: usize,
    ) -> Result<(), GpuError> {
        let d = d as i32;
        let mut b = self.stream.launch_builder(self.f("silu_mul"));
        b.arg(out).arg(gate_up).arg(&d);
        let cfg = LaunchConfig { grid_dim: (tokens as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: argument types and order match silu_mul.cu.
        unsafe { b.launch(cfg) }.map(|_| ()).map_err(|e| GpuError::new("silu_mul", e))
    }

    /// Writes contiguous k, v (`[tokens, kv_heads, head_dim]`) into the cache slots.
    #[allow(clippy::too_many_arguments)]
    pub fn kv_write(
        &self,
        k: &CudaSlice<u16>,
        v: &CudaSlice<u16>,
        k_cache: &mut CudaSlice<u16>,
        v_cache: &mut CudaSlice<u16>,
        slots: &CudaSlice<i64>,
        tokens: usize,
        kv_heads: usize,
        head_dim: usize,
    ) -> Result<(), GpuError> {
        let (kh, hd) = (kv_heads as i32, head_dim as i32);
        let stride = kh * hd;
        let mut b = self.stream.launch_builder(self.f("kv_write"));
        b.arg(k).arg(v).arg(k_cache).arg(v_cache).arg(slots).arg(&kh).arg(&hd).arg(&stride).arg(&stride);
        let cfg = LaunchConfig { grid_dim: (tokens as u32, 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: argument types and order match kv_write.cu.
        unsafe { b.launch(cfg) }.map(|_| ()).map_err(|e| GpuError::new("kv_write", e))
    }

    /// Paged decode attention: partial slices then the merge.
    #[allow(clippy::too_many_arguments)]
    pub fn decode_attention(
        &self,
        out: &mut CudaSlice<u16>,
        ws: &mut DecodeWorkspace,
        q: &CudaSlice<u16>,
        k_cache: &CudaSlice<u16>,
        v_cache: &CudaSlice<u16>,
        tables: &CudaSlice<i32>,
        ctx_lens: &CudaSlice<i32>,
        g: &AttnGeometry,
    ) -> Result<(), GpuError> {
        assert_eq!(g.head_dim, self.head_dim, "the decode kernel was compiled for another head size");
        let group = g.q_heads / g.kv_heads;
        let (mb, qh, kh, hd, bs) =
            (g.max_blocks as i32, g.q_heads as i32, g.kv_heads as i32, g.head_dim as i32, g.block_size as i32);
        let (split, splits) = (DECODE_SPLIT_TOKENS as i32, ws.max_splits as i32);
        let scale = 1.0 / (g.head_dim as f32).sqrt();
        let shared = (DECODE_SPLIT_TOKENS * 8 + (2 * group * g.head_dim + group * DECODE_SPLIT_TOKENS) * 4) as u32;
        let mut b = self.stream.launch_builder(self.f("decode_attention_partial"));
        b.arg(&mut ws.acc).arg(&mut ws.ml).arg(q).arg(k_cache).arg(v_cache).arg(tables).arg(ctx_lens);
        b.arg(&mb).arg(&qh).arg(&kh).arg(&hd).arg(&bs).arg(&split).arg(&splits).arg(&scale);
        let cfg = LaunchConfig {
            grid_dim: (ws.max_splits as u32, g.kv_heads as u32, g.seqs as u32),
            block_dim: (128, 1, 1),
            shared_mem_bytes: shared,
        };
        // SAFETY: argument types and order match decode_attention.cu; the workspace holds
        // seqs × q_heads × max_splits slices.
        unsafe { b.launch(cfg) }.map_err(|e| GpuError::new("decode_attention_partial", e))?;
        let mut b = self.stream.launch_builder(self.f("decode_attention_reduce"));
        b.arg(out).arg(&ws.acc).arg(&ws.ml).arg(ctx_lens).arg(&qh).arg(&hd).arg(&split).arg(&splits);
        let cfg = LaunchConfig {
            grid_dim: (g.q_heads as u32, g.seqs as u32, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: as above.
        unsafe { b.launch(cfg) }.map(|_| ()).map_err(|e| GpuError::new("decode_attention_reduce", e))
    }

    /// Causal prefill attention over the paged cache; `max_new` is the longest chunk.
    #[allow(clippy::too_many_arguments)]
    pub fn prefill_attention(
        &self,
        out: &mut CudaSlice<u16>,
        q: &CudaSlice<u16>,
        k_cache: &CudaSlice<u16>,
        v_cache: &CudaSlice<u16>,
        cu_seqlens: &CudaSlice<i32>,
        tables: &CudaSlice<i32>,
        ctx_lens: &CudaSlice<i32>,
        max_new: usize,
        g: &AttnGeometry,
    ) -> Result<(), GpuError> {
        assert_eq!(g.head_dim, self.head_dim, "the prefill kernel was compiled for another head size");
        let (mb, qh, kh, bs) = (g.max_blocks as i32, g.q_heads as i32, g.kv_heads as i32, g.block_size as i32);
        let scale = 1.0 / (g.head_dim as f32).sqrt();
        let mut b = self.stream.launch_builder(self.f("prefill_attention"));
        b.arg(out).arg(q).arg(k_cache).arg(v_cache).arg(cu_seqlens).arg(tables).arg(ctx_lens);
        b.arg(&mb).arg(&qh).arg(&kh).arg(&bs).arg(&scale);
        let cfg = LaunchConfig {
            grid_dim: (max_new.div_ceil(64) as u32, g.q_heads as u32, g.seqs as u32),
            block_dim: (64, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: argument types and order match prefill_attention.cu.
        unsafe { b.launch(cfg) }.map(|_| ()).map_err(|e| GpuError::new("prefill_attention", e))
    }

    #[allow(clippy::too_many_arguments)]
    pub fn sample(
        &self,
        out: &mut CudaSlice<i32>,
        logits: &CudaSlice<f32>,
        uniforms: &CudaSlice<f32>,
        seqs: usize,
        vocab: usize,
        temperature: f32,
        top_p: f32,
    ) -> Result<(), GpuError> {
        let v = vocab as i32;
        let mut b = self.stream.launch_builder(self.f("sample"));
        b.arg(out).arg(logits).arg(uniforms).arg(&v).arg(&temperature).arg(&top_p);
        let cfg = LaunchConfig { grid_dim: (seqs as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: argument types and order match sample.cu.
        unsafe { b.launch(cfg) }.map(|_| ()).map_err(|e| GpuError::new("sample", e))
    }
}

/// Context tokens per split-K slice of decode attention (the kernel's shared memory holds a
/// group's scores for one slice).
pub const DECODE_SPLIT_TOKENS: usize = 256;

/// Shapes of a paged attention launch.
#[derive(Clone, Copy, Debug)]
pub struct AttnGeometry {
    pub seqs: usize,
    pub max_blocks: usize,
    pub q_heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub block_size: usize,
}

/// Scratch of split-K decode attention.
pub struct DecodeWorkspace {
    pub(crate) acc: CudaSlice<f32>,
    pub(crate) ml: CudaSlice<f32>,
    pub(crate) max_splits: usize,
}

impl DecodeWorkspace {
    pub fn new(
        gpu: &Gpu,
        seqs: usize,
        q_heads: usize,
        head_dim: usize,
        max_context: usize,
    ) -> Result<DecodeWorkspace, GpuError> {
        let max_splits = max_context.div_ceil(DECODE_SPLIT_TOKENS).max(1);
        Ok(DecodeWorkspace {
            acc: gpu.zeros(seqs * q_heads * max_splits * head_dim)?,
            ml: gpu.zeros(seqs * q_heads * max_splits * 2)?,
            max_splits,
        })
    }
}

/// One kernel's comparison with its CPU reference.
#[derive(Clone, Debug)]
pub struct Check {
    pub op: &'static str,
    pub shape: String,
    /// ‖gpu − cpu‖ / ‖cpu‖ (or the fraction of mismatched tokens for sampling).
    pub error: f64,
    pub tolerance: f64,
}

impl Check {
    pub fn passed(&self) -> bool {
        self.error.is_finite() && self.error <= self.tolerance
    }
}

fn rel_l2(got: &[f32], want: &[f32]) -> f64 {
    let num: f64 = got.iter().zip(want).map(|(a, b)| ((a - b) as f64).powi(2)).sum();
    let den: f64 = want.iter().map(|b| (*b as f64).powi(2)).sum();
    if got.iter().any(|x| !x.is_finite()) {
        return f64::INFINITY;
    }
    (num / den.max(1e-30)).sqrt()
}

/// Documented tolerances: bf16 outputs carry 2^-8 relative rounding, and bf16 inputs summed in
/// fp32 in a different order differ by about that per element.
pub const TOL_ELEMENTWISE: f64 = 1e-2;
pub const TOL_GEMM: f64 = 1e-2;
pub const TOL_ATTENTION: f64 = 2e-2;
/// Top-p may pick another token where u lands within rounding of a boundary.
pub const TOL_SAMPLE_MISMATCH: f64 = 0.05;

/// Runs every kernel on random inputs (fresh per check) of the given geometry and compares it
/// with the CPU reference on the same bf16-rounded inputs.
pub fn check_all(
    gpu: &Gpu,
    q_heads: usize,
    kv_heads: usize,
    head_dim: usize,
    hidden: usize,
    seed: u64,
) -> Result<Vec<Check>, GpuError> {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut rand_vec = |n: usize, scale: f32| -> Vec<f32> {
        let mut v: Vec<f32> = (0..n).map(|_| rng.random_range(-scale..scale)).collect();
        crate::bf16::round_slice(&mut v);
        v
    };
    let mut checks = Vec::new();

    // GEMM: 77 tokens × hidden → 3·128 (odd sizes catch transposes).
    let (m, k, n) = (77, hidden, 384);
    let (a, w) = (rand_vec(m * k, 1.0), rand_vec(k * n, 0.05));
    let (da, dw) = (gpu.upload_bf16(&a)?, gpu.upload_bf16(&w)?);
    let mut dc = gpu.zeros::<u16>(m * n)?;
    gpu.gemm(&da, &dw, &mut dc, m, k, n)?;
    let mut want = vec![0.0; m * n];
    crate::cpu::gemm(&a, &w, &mut want, m, k, n);
    checks.push(Check {
        op: "gemm",
        shape: format!("{m}×{k}×{n}"),
        error: rel_l2(&gpu.download_bf16(&dc)?, &want),
        tolerance: TOL_GEMM,
    });

    // Fused add + RMSNorm.
    let t = 33;
    let (x, res, wt) = (rand_vec(t * hidden, 1.0), rand_vec(t * hidden, 1.0), rand_vec(hidden, 1.0));
    let (mut dx, mut dres, dw) = (gpu.upload_bf16(&x)?, gpu.upload_bf16(&res)?, gpu.upload_bf16(&wt)?);
    let mut dout = gpu.zeros::<u16>(t * hidden)?;
    gpu.rms_norm(&mut dout, &mut dx, &dw, &mut dres, t, hidden)?;
    let (mut want, mut res_cpu) = (vec![0.0; t * hidden], res.clone());
    crate::cpu::rms_norm(&mut want, &x, &wt, Some(&mut res_cpu), hidden, 1e-5);
    checks.push(Check {
        op: "rms_norm",
        shape: format!("{t}×{hidden}"),
        error: rel_l2(&gpu.download_bf16(&dout)?, &want),
        tolerance: TOL_ELEMENTWISE,
    });

    // RoPE.
    let (q, kk) = (rand_vec(t * q_heads * head_dim, 1.0), rand_vec(t * kv_heads * head_dim, 1.0));
    let pos: Vec<i32> = (0..t as i32).map(|i| i * 97 % 4000).collect();
    let (mut dq, mut dk, dpos) = (gpu.upload_bf16(&q)?, gpu.upload_bf16(&kk)?, gpu.upload(&pos)?);
    gpu.rope(&mut dq, &mut dk, &dpos, t, q_heads, kv_heads, head_dim)?;
    let (mut qc, mut kc) = (q.clone(), kk.clone());
    crate::cpu::rope(
        &mut qc,
        &mut kc,
        &pos,
        q_heads,
        kv_heads,
        head_dim,
        q_heads * head_dim,
        kv_heads * head_dim,
        500000.0,
    );
    let mut got = gpu.download_bf16(&dq)?;
    got.extend(gpu.download_bf16(&dk)?);
    qc.extend(kc);
    checks.push(Check {
        op: "rope",
        shape: format!("{t} tokens, {q_heads}+{kv_heads} heads"),
        error: rel_l2(&got, &qc),
        tolerance: TOL_ELEMENTWISE,
    });

    // SiLU·mul.
    let d = 3 * hidden / 2;
    let gu = rand_vec(t * 2 * d, 3.0);
    let dgu = gpu.upload_bf16(&gu)?;
    let mut dout = gpu.zeros::<u16>(t * d)?;
    gpu.silu_mul(&mut dout, &dgu, t, d)?;
    let mut want = vec![0.0; t * d];
    crate::cpu::silu_mul(&mut want, &gu, d);
    checks.push(Check {
        op: "silu_mul",
        shape: format!("{t}×{d}"),
        error: rel_l2(&gpu.download_bf16(&dout)?, &want),
        tolerance: TOL_ELEMENTWISE,
    });

    // Paged attention: mixed context lengths over scattered blocks.
    let bs = 16;
    let ctx: Vec<i32> = vec![1, 17, 300, 1000, 2049];
    let max_blocks = ctx.iter().map(|&c| (c as usize).div_ceil(bs)).max().unwrap_or(1);
    let blocks = max_blocks * ctx.len() + 5;
    let mut ids: Vec<i32> = (0..blocks as i32).collect();
    for i in (1..ids.len()).rev() {
        let j = (i * 7919 + 13) % (i + 1);
        ids.swap(i, j);
    }
    let tables: Vec<i32> = ids[..max_blocks * ctx.len()].to_vec();
    let width = kv_heads * head_dim;
    let (kcache, vcache) = (rand_vec(blocks * bs * width, 1.0), rand_vec(blocks * bs * width, 1.0));
    let (dkc, dvc) = (gpu.upload_bf16(&kcache)?, gpu.upload_bf16(&vcache)?);
    let (dtab, dctx) = (gpu.upload(&tables)?, gpu.upload(&ctx)?);
    let g = AttnGeometry { seqs: ctx.len(), max_blocks, q_heads, kv_heads, head_dim, block_size: bs };
    let paged = crate::cpu::Paged {
        block_tables: &tables,
        max_blocks,
        context_lens: &ctx,
        q_heads,
        kv_heads,
        head_dim,
        block_size: bs,
    };
    let scale = 1.0 / (head_dim as f32).sqrt();
    let q = rand_vec(ctx.len() * q_heads * head_dim, 1.0);
    let dq = gpu.upload_bf16(&q)?;
    let mut dout = gpu.zeros::<u16>(q.len())?;
    let mut ws = DecodeWorkspace::new(gpu, ctx.len(), q_heads, head_dim, 2049)?;
    gpu.decode_attention(&mut dout, &mut ws, &dq, &dkc, &dvc, &dtab, &dctx, &g)?;
    let mut want = vec![0.0; q.len()];
    crate::cpu::decode_attention(&mut want, &q, &kcache, &vcache, &paged, DECODE_SPLIT_TOKENS, scale);
    checks.push(Check {
        op: "decode_attention",
        shape: format!("contexts {ctx:?}, {q_heads}/{kv_heads} heads"),
        error: rel_l2(&gpu.download_bf16(&dout)?, &want),
        tolerance: TOL_ATTENTION,
    });

    // Prefill: chunks over cached prefixes (new = the last tokens of each context).
    let new: Vec<i32> = vec![1, 17, 100, 130, 64];
    let mut cu = vec![0i32];
    for n in &new {
        cu.push(cu.last().unwrap() + n);
    }
    let total = *cu.last().unwrap() as usize;
    let q = rand_vec(total * q_heads * head_dim, 1.0);
    let (dq, dcu) = (gpu.upload_bf16(&q)?, gpu.upload(&cu)?);
    let mut dout = gpu.zeros::<u16>(q.len())?;
    gpu.prefill_attention(&mut dout, &dq, &dkc, &dvc, &dcu, &dtab, &dctx, 130, &g)?;
    let mut want = vec![0.0; q.len()];
    crate::cpu::prefill_attention(&mut want, &q, &kcache, &vcache, &cu, &paged, scale);
    checks.push(Check {
        op: "prefill_attention",
        shape: format!("chunks {new:?} over contexts {ctx:?}"),
        error: rel_l2(&gpu.download_bf16(&dout)?, &want),
        tolerance: TOL_ATTENTION,
    });

    // KV write into scattered slots (some skipped).
    let toks = 50;
    let (kn, vn) = (rand_vec(toks * width, 1.0), rand_vec(toks * width, 1.0));
    let slots: Vec<i64> =
        (0..toks as i64).map(|i| if i % 7 == 3 { -1 } else { (i * 37 + 5) % (blocks * bs) as i64 }).collect();
    let (dkn, dvn, dslots) = (gpu.upload_bf16(&kn)?, gpu.upload_bf16(&vn)?, gpu.upload(&slots)?);
    let (mut dkc2, mut dvc2) = (gpu.upload_bf16(&kcache)?, gpu.upload_bf16(&vcache)?);
    gpu.kv_write(&dkn, &dvn, &mut dkc2, &mut dvc2, &dslots, toks, kv_heads, head_dim)?;
    let (mut kc, mut vc) = (kcache.clone(), vcache.clone());
    crate::cpu::kv_write(&kn, &vn, &mut kc, &mut vc, &slots, kv_heads, head_dim, width, width);
    let mut got = gpu.download_bf16(&dkc2)?;
    got.extend(gpu.download_bf16(&dvc2)?);
    kc.extend(vc);
    checks.push(Check { op: "kv_write", shape: format!("{toks} tokens"), error: rel_l2(&got, &kc), tolerance: 0.0 });

    // Sampling: greedy must match exactly; top-p may differ only at rounding boundaries.
    let (seqs, vocab) = (64, 32000);
    let logits: Vec<f32> = (0..seqs * vocab).map(|_| rng_normalish(&mut rand_vec(4, 1.0))).collect();
    let uniforms: Vec<f32> = (0..seqs).map(|i| ((i as f32 * 0.618_034) % 1.0).min(0.999)).collect();
    let (dl, du) = (gpu.upload(&logits)?, gpu.upload(&uniforms)?);
    let mut dout = gpu.zeros::<i32>(seqs)?;
    for (temp, top_p, op, tol) in
        [(0.0f32, 1.0f32, "sample_greedy", 0.0), (0.8, 0.9, "sample_top_p", TOL_SAMPLE_MISMATCH)]
    {
        gpu.sample(&mut dout, &dl, &du, seqs, vocab, temp, top_p)?;
        let got = gpu.download(&dout)?;
        let mut want = vec![0i32; seqs];
        crate::cpu::sample(&mut want, &logits, &uniforms, vocab, temp, top_p);
        let mismatched = got.iter().zip(&want).filter(|(a, b)| a != b).count();
        checks.push(Check {
            op,
            shape: format!("{seqs}×{vocab}"),
            error: mismatched as f64 / seqs as f64,
            tolerance: tol,
        });
    }
    gpu.sync()?;
    Ok(checks)
}

/// A roughly normal value from four uniforms (logits with a realistic spread).
fn rng_normalish(u: &mut [f32]) -> f32 {
    u.iter().sum::<f32>() * 3.0
}
