//! Finding AIConfigurator's kernel database on this machine and reading it from a folder.
//!
//! Where: `--database DIR`, else `$SERVESIM_AIC_DATA`, else an installed `aiconfigurator_core`
//! Python package (asked of `python3`'s import machinery without importing it). `DIR` may be
//! the tables' root (`…/systems/data`), the package folder, or a folder holding the unpacked
//! wheel.

use std::path::{Path, PathBuf};

use servesim_aic::Files;
use servesim_sim::scenario::ResourceError;

use crate::error::{CliError, Result};

/// The install hint of every "not found" message.
pub(crate) const INSTALL: &str = "pip install aiconfigurator-core==0.12.0 (or `pip download --no-deps \
aiconfigurator-core==0.12.0` and unzip the wheel), then name its folder: `[cost] database = { ..., path = \"DIR\" }` \
in a scenario (simulate, plan, compare, tune), `--database DIR` (calibrate import-aic, validate --silicon), or \
SERVESIM_AIC_DATA=DIR for every command";

/// A database folder on disk.
#[derive(Clone, Debug)]
pub(crate) struct DirFiles {
    pub root: PathBuf,
    /// `aiconfigurator-core <version>` when the package's metadata is next to it.
    pub package: Option<String>,
}

impl Files for DirFiles {
    fn list(&self, dir: &str) -> Vec<String> {
        let Ok(rd) = std::fs::read_dir(self.root.join(dir)) else { return Vec::new() };
        let mut v: Vec<String> =
            rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    fn read(&self, path: &str) -> std::result::Result<Vec<u8>, servesim_aic::Error> {
        let p = self.root.join(path);
        std::fs::read(&p).map_err(|e| servesim_aic::Error::Table(format!("cannot read {}: {e}", p.display())))
    }

    fn root(&self) -> String {
        self.root.display().to_string()
    }
}

/// The tables' root under `dir`, if `dir` is one of the accepted layouts.
fn data_root(dir: &Path) -> Option<PathBuf> {
    [dir.to_path_buf(), dir.join("systems/data"), dir.join("aiconfigurator_core/systems/data")].into_iter().find(|d| {
        d.join("h100_sxm").is_dir()
            || std::fs::read_dir(d).is_ok_and(|mut r| r.any(|e| e.is_ok_and(|e| e.path().join("gemm").is_dir())))
    })
}

/// The package's version from the `*.dist-info/METADATA` beside it.
fn package_version(data: &Path) -> Option<String> {
    // data = <site>/aiconfigurator_core/systems/data
    let site = data.parent()?.parent()?.parent()?;
    for e in std::fs::read_dir(site).ok()?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("aiconfigurator_core-") && name.ends_with(".dist-info") {
            let meta = std::fs::read_to_string(e.path().join("METADATA")).ok()?;
            let v = meta.lines().find_map(|l| l.strip_prefix("Version: "))?;
            return Some(format!("aiconfigurator-core {}", v.trim()));
        }
    }
    None
}

/// Asks python3 where `aiconfigurator_core` is installed (without importing it).
fn installed_package() -> Option<PathBuf> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import importlib.util as u; s = u.find_spec('aiconfigurator_core'); \
             print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')",
        ])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!p.is_empty()).then(|| PathBuf::from(p))
}

/// Finds the database: `explicit` (given as `option`: `--database` or the scenario's
/// `[cost] database.path`), `SERVESIM_AIC_DATA`, the installed package.
pub(crate) fn locate(explicit: Option<&Path>, option: &str) -> Result<DirFiles> {
    let found = |d: PathBuf| {
        let package = package_version(&d);
        DirFiles { root: d, package }
    };
    if let Some(d) = explicit {
        return data_root(d).map(found).ok_or_else(|| {
            CliError::input(format!(
                "{option} {}: no AIConfigurator kernel tables there (expected <system>/gemm/<framework>/<version>/, \
                 or systems/data/ below it)",
                d.display()
            ))
        });
    }
    if let Some(v) = std::env::var_os("SERVESIM_AIC_DATA").filter(|v| !v.is_empty()) {
        let d = PathBuf::from(&v);
        return data_root(&d).map(found).ok_or_else(|| {
            CliError::input(format!("SERVESIM_AIC_DATA={}: no AIConfigurator kernel tables there", d.display()))
        });
    }
    if let Some(p) = installed_package().and_then(|p| data_root(&p)) {
        return Ok(found(p));
    }
    Err(CliError::input(format!("no AIConfigurator kernel database found: {INSTALL}")))
}

/// Builds the profile a scenario's `[cost] database` asks for (one TP degree).
pub(crate) fn build(
    files: &DirFiles,
    req: &servesim_sim::scenario::DatabaseRequest,
) -> std::result::Result<servesim_sim::cost::profile::Profile, ResourceError> {
    let weights = servesim_aic::Weights::parse(&req.weights)
        .ok_or_else(|| ResourceError::Unavailable(format!("weights {:?}", req.weights)))?;
    let r = servesim_aic::Request {
        system: req.system.clone(),
        framework: req.framework.clone(),
        version: req.version.clone(),
        model: req.model.clone(),
        tp: vec![req.tp],
        weights,
        kv: req.model.kv_dtype,
        gemm_kernel: req.gemm_kernel.clone(),
        gpu: req.gpu.clone(),
        moe_distribution: req.moe_distribution.clone(),
        experts: req.experts,
        expert_parallel: req.expert_parallel,
        package: files.package.clone(),
        command: format!("[cost] database ({} {})", req.framework, req.system),
        // Built on the fly: no date, so nothing in a run depends on when it ran.
        date: String::new(),
        servesim_version: env!("CARGO_PKG_VERSION").into(),
    };
    let db = servesim_aic::Db::new(files);
    servesim_aic::import(&db, &r).map_err(|e| {
        let msg = format!("{}: {e}", files.root.display());
        match e {
            servesim_aic::Error::NotInDatabase(_) => ResourceError::Unavailable(msg),
            servesim_aic::Error::Table(_) => ResourceError::File(msg),
        }
    })
}

/// A `--moe-distribution` argument: one of the experts' routings the database measured.
pub(crate) fn moe_distribution(d: &str) -> Result<&'static str> {
    servesim_sim::cost::MOE_DISTRIBUTIONS.iter().copied().find(|m| *m == d).ok_or_else(|| {
        CliError::input(format!(
            "--moe-distribution: expected one of {}, got {d:?}",
            servesim_sim::cost::MOE_DISTRIBUTIONS.join(", ")
        ))
    })
}
