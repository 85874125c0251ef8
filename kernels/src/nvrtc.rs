//! Finding CUDA's libraries and compiling the .cu sources to CUBIN with NVRTC.
//!
//! cudarc loads libraries by name (`libnvrtc.so.13`, `libcublas.so.13`, `libcuda.so`), which the
//! dynamic loader finds through `LD_LIBRARY_PATH` and the system paths. To also find the PyPI
//! wheels (`nvidia-cuda-nvrtc`, `nvidia-cuda-runtime`, see DEVELOPERS.md) and toolkits outside
//! those paths, [`preload`] opens the libraries by full path first from the folders
//! [`cuda_dirs`] lists; a library already loaded satisfies cudarc's later lookup by name.
//! Nothing here panics when a library is missing: callers ask [`nvrtc_present`] first.

use std::ffi::{c_char, CString};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use cudarc::nvrtc::{result, sys};

/// The CUDA major version this build's bindings target (cudarc feature `cuda-13000`).
pub const CUDA_MAJOR: u32 = 13;

/// Environment variable naming a CUDA folder with `lib/` (or `lib64/`) and `include/`, such as
/// the wheels' `site-packages/nvidia/cu13`. Checked first.
pub const CUDA_HOME_VAR: &str = "SERVESIM_CUDA_HOME";

/// Folders that may hold CUDA (each with lib/, lib64/ and include/ below it), in search order.
pub fn cuda_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for var in [CUDA_HOME_VAR, "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"] {
        if let Some(v) = std::env::var_os(var) {
            if !v.is_empty() {
                dirs.push(PathBuf::from(v));
            }
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda"));
    dirs.push(PathBuf::from(format!("/usr/local/cuda-{CUDA_MAJOR}.0")));
    dirs
}

fn lib_dirs(root: &Path) -> [PathBuf; 3] {
    [root.join("lib"), root.join("lib64"), root.join("targets/x86_64-linux/lib")]
}

/// The first folder among [`cuda_dirs`] that holds `cuda_bf16.h`.
pub fn include_dir() -> Option<PathBuf> {
    cuda_dirs()
        .into_iter()
        .flat_map(|d| [d.join("include"), d.join("targets/x86_64-linux/include")])
        .find(|d| d.join("cuda_bf16.h").is_file())
}

static LOADED: OnceLock<Mutex<Vec<(PathBuf, libloading::Library)>>> = OnceLock::new();

/// Opens `file` (e.g. `libnvrtc.so.13`) by full path from the first CUDA folder that has it,
/// and keeps it loaded. Returns the path, or None when no folder has it.
pub fn preload(file: &str) -> Option<PathBuf> {
    let loaded = LOADED.get_or_init(|| Mutex::new(Vec::new()));
    let mut loaded = loaded.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((p, _)) = loaded.iter().find(|(p, _)| p.file_name().and_then(|n| n.to_str()) == Some(file)) {
        return Some(p.clone());
    }
    for dir in cuda_dirs() {
        for lib in lib_dirs(&dir) {
            let path = lib.join(file);
            if path.is_file() {
                // SAFETY: loading a shared library runs its initialisers; NVIDIA's libraries
                // are made to be loaded this way (it is what dlopen by name would do).
                if let Ok(l) = unsafe { libloading::Library::new(&path) } {
                    loaded.push((path.clone(), l));
                    return Some(path);
                }
            }
        }
    }
    None
}

/// Whether NVRTC can be used: preloads it from the CUDA folders, then asks cudarc.
pub fn nvrtc_present() -> bool {
    // NVRTC opens its builtins library by name when it compiles; load it from the same folder.
    if preload(&format!("libnvrtc.so.{CUDA_MAJOR}")).is_some() {
        preload(&format!("libnvrtc-builtins.so.{CUDA_MAJOR}.0"));
    }
    // SAFETY: only tries to open the library; no NVRTC function is called.
    unsafe { sys::is_culib_present() }
}

/// An NVRTC call that failed: the source (or call) it was for, the call, and NVRTC's error
/// with its compile log.
#[derive(Debug, thiserror::Error)]
#[error("{source_name}: {}{detail}", if call.is_empty() { String::new() } else { format!("{call}: ") })]
pub struct NvrtcError {
    pub source_name: String,
    pub(crate) call: &'static str,
    pub detail: String,
}

impl NvrtcError {
    fn new(source_name: &str, call: &'static str, detail: impl Into<String>) -> NvrtcError {
        NvrtcError { source_name: source_name.to_string(), call, detail: detail.into() }
    }
}

/// NVRTC's version, e.g. (13, 0). Call only when [`nvrtc_present`] is true.
pub fn version() -> Result<(i32, i32), NvrtcError> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: NVRTC is loaded (the caller checked); the pointers are valid for writes.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| NvrtcError::new("nvrtcVersion", "", format!("{e:?}")))?;
    Ok((major, minor))
}

/// Compiles one CUDA C source to a CUBIN for `arch` (e.g. `sm_90`) with extra options
/// (`-DHEAD_DIM=128`). The error carries NVRTC's log. Call only when [`nvrtc_present`] is true.
pub fn compile(name: &str, src: &str, arch: &str, extra: &[String]) -> Result<Vec<u8>, NvrtcError> {
    let csrc = CString::new(src).map_err(|_| NvrtcError::new(name, "", "the source has a NUL byte"))?;
    let cname = CString::new(name).map_err(|_| NvrtcError::new(name, "", "the name has a NUL byte"))?;
    let prog = result::create_program(&csrc, Some(&cname))
        .map_err(|e| NvrtcError::new(name, "nvrtcCreateProgram", format!("{e:?}")))?;
    let mut opts = vec![format!("--gpu-architecture={arch}"), "--std=c++17".to_string()];
    if let Some(inc) = include_dir() {
        opts.push(format!("--include-path={}", inc.display()));
    }
    opts.extend(extra.iter().cloned());
    // SAFETY: `prog` is a live program created above; it is destroyed once below.
    let out = unsafe {
        let r = match result::compile_program(prog, &opts) {
            Ok(()) => {
                let mut size = 0usize;
                match sys::nvrtcGetCUBINSize(prog, &mut size).result() {
                    Ok(()) => {
                        let mut buf = vec![0u8; size];
                        sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut c_char)
                            .result()
                            .map(|_| buf)
                            .map_err(|e| NvrtcError::new(name, "nvrtcGetCUBIN", format!("{e:?}")))
                    }
                    Err(e) => Err(NvrtcError::new(name, "nvrtcGetCUBINSize", format!("{e:?}"))),
                }
            }
            Err(e) => {
                let log = result::get_program_log(prog)
                    .map(|l| l.iter().map(|&c| c as u8 as char).collect::<String>())
                    .unwrap_or_default();
                Err(NvrtcError::new(name, "", format!("{e:?} with options {opts:?}\n{}", log.trim_end_matches('\0'))))
            }
        };
        let _ = result::destroy_program(prog);
        r
    };
    out
}
