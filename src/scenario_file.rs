//! Reading scenario files (or the scenarios embedded in the binary).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use servesim_sim::cost::profile::Profile;
use servesim_sim::cost::Calibration;
use servesim_sim::scenario::{DatabaseRequest, ResourceError, Resources};
use servesim_sim::workload::trace::{TraceSource, TraceSpec};
use servesim_sim::Scenario;

use crate::error::{CliError, Result};

/// The files a scenario names (cost profiles, traces), read relative to the scenario's folder
/// and cached: scenarios derived from it (plan candidates, compare variants) share them without
/// reading or checking them again.
#[derive(Debug)]
pub(crate) struct FileResources {
    base: PathBuf,
    profiles: Mutex<HashMap<PathBuf, Arc<Profile>>>,
    traces: Mutex<HashMap<String, TraceSource>>,
    /// Profiles built from kernel databases, by their inputs.
    databases: Mutex<HashMap<String, Arc<Profile>>>,
    calibrations: Mutex<HashMap<PathBuf, Arc<Calibration>>>,
}

impl FileResources {
    pub(crate) fn new(base: &Path) -> Arc<FileResources> {
        Arc::new(FileResources {
            base: base.to_path_buf(),
            profiles: Mutex::default(),
            traces: Mutex::default(),
            databases: Mutex::default(),
            calibrations: Mutex::default(),
        })
    }
}

impl Resources for FileResources {
    fn profile(&self, path: &str) -> std::result::Result<Arc<Profile>, ResourceError> {
        let abs = self.base.join(path);
        if let Some(p) = self.profiles.lock().expect("not poisoned").get(&abs) {
            return Ok(p.clone());
        }
        let p = Arc::new(crate::input::load_profile(&abs)?);
        self.profiles.lock().expect("not poisoned").insert(abs, p.clone());
        Ok(p)
    }

    fn trace(&self, spec: &mut TraceSpec) -> std::result::Result<(), ResourceError> {
        let label = crate::trace_source::normalize(&self.base.join(&spec.path)).display().to_string();
        let abs =
            std::fs::canonicalize(&label).map_err(|e| format!("workload.trace.path: cannot read {label}: {e}"))?;
        // The resolved scenario names the absolute path, so it runs from anywhere.
        spec.path = abs.display().to_string();
        let key = toml::to_string(spec).expect("a trace spec serialises");
        if let Some(src) = self.traces.lock().expect("not poisoned").get(&key) {
            spec.source = Some(src.clone());
            return Ok(());
        }
        let readable = crate::input::rereadable(&abs, "trace").map_err(|e| e.to_string())?;
        crate::trace_source::install(spec, readable, label).map_err(|e| e.to_string())?;
        let src = spec.source.clone().expect("installed");
        self.traces.lock().expect("not poisoned").insert(key, src);
        Ok(())
    }

    fn calibration(&self, path: &str) -> std::result::Result<Arc<Calibration>, ResourceError> {
        let abs = self.base.join(path);
        if let Some(c) = self.calibrations.lock().expect("not poisoned").get(&abs) {
            return Ok(c.clone());
        }
        let c = Arc::new(load_calibration(&abs)?);
        self.calibrations.lock().expect("not poisoned").insert(abs, c.clone());
        Ok(c)
    }

    fn database(&self, req: &DatabaseRequest) -> std::result::Result<Arc<Profile>, ResourceError> {
        let key = req.key();
        if let Some(p) = self.databases.lock().expect("not poisoned").get(&key) {
            return Ok(p.clone());
        }
        let p = match servesim_sim::cost::shipped::find(req) {
            Some((_, p)) => p,
            None => {
                let dir = req.path.as_ref().map(|p| self.base.join(p));
                let files = crate::aic::locate(dir.as_deref(), "[cost] database.path")
                    .map_err(|e| format!("no shipped profile for {}, and {e}", req.describe()))?;
                Arc::new(crate::aic::build(&files, req)?)
            }
        };
        self.databases.lock().expect("not poisoned").insert(key, p.clone());
        Ok(p)
    }
}

/// Reads and checks a calibration file; errors name the file and the key.
pub(crate) fn load_calibration(path: &Path) -> std::result::Result<Calibration, String> {
    let text = crate::input::read_text(path, "calibration").map_err(|e| e.to_string())?;
    Calibration::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Scenarios shipped in `scenarios/` and embedded in the binary, so that a command run without
/// `--scenario` has a default that works anywhere.
pub(crate) const EMBEDDED: &[(&str, &str)] =
    &[("chat", include_str!("../scenarios/chat.toml")), ("peak", include_str!("../scenarios/peak.toml"))];

/// Validates scenario text whose files are relative to `dir`, its plan candidates included.
pub(crate) fn validated(src: &str, stem: &str, dir: &Path) -> std::result::Result<Scenario, servesim_sim::ConfigError> {
    let s = Scenario::from_toml_in(src, stem, FileResources::new(dir))?;
    servesim_sim::plan::check_candidates(&s)?;
    s.check_calibration(true)?;
    servesim_sim::engine::check_calibrations(&s)?;
    Ok(s)
}

/// Loads and validates a scenario file; errors name the file and the key.
pub(crate) fn load(path: &Path) -> Result<Scenario> {
    let src = crate::input::read_text(path, "scenario")?;
    let stem =
        if path.as_os_str() == "-" { "stdin" } else { path.file_stem().and_then(|s| s.to_str()).unwrap_or("scenario") };
    // Files a scenario names are relative to the scenario file.
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    validated(&src, stem, &dir).map_err(|e| CliError::input(format!("{}: {e}", path.display())))
}

/// Loads an embedded scenario by name.
pub(crate) fn embedded(name: &str) -> Result<Scenario> {
    let (_, src) = EMBEDDED
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| CliError::input(format!("no embedded scenario {name}")))?;
    validated(src, name, Path::new("")).map_err(|e| CliError::input(format!("embedded {name}: {e}")))
}

/// How errors name `--scenario PATH` (or the embedded default).
pub(crate) fn label(path: Option<&Path>) -> String {
    path.map_or("the embedded scenario".into(), |p| p.display().to_string())
}

/// `--scenario PATH`, or the embedded default when no path is given.
pub(crate) fn load_or_default(path: Option<&Path>, default: &str) -> Result<Scenario> {
    match path {
        Some(p) => load(p),
        None => {
            errln!("note: no --scenario given; using the embedded scenarios/{default}.toml");
            embedded(default)
        }
    }
}

/// A scenario's text, the name it takes when the file does not give one (the file stem), and
/// a label naming it in error messages: `--scenario PATH`, or the embedded default.
pub(crate) struct Source {
    pub text: String,
    pub stem: String,
    pub label: String,
    /// The folder the scenario's file paths are relative to.
    pub base: PathBuf,
}

/// Reads `--scenario PATH` (or the embedded default) without validating it.
pub(crate) fn read_source(path: Option<&Path>, default: &str) -> Result<Source> {
    match path {
        Some(p) => {
            let text = crate::input::read_text(p, "scenario")?;
            let stem = if p.as_os_str() == "-" {
                "stdin"
            } else {
                p.file_stem().and_then(|s| s.to_str()).unwrap_or("scenario")
            }
            .to_string();
            let base = p.parent().map(Path::to_path_buf).unwrap_or_default();
            Ok(Source { text, stem, label: p.display().to_string(), base })
        }
        None => {
            errln!("note: no --scenario given; using the embedded scenarios/{default}.toml");
            let (_, src) = EMBEDDED
                .iter()
                .find(|(n, _)| *n == default)
                .ok_or_else(|| CliError::input(format!("no embedded scenario {default}")))?;
            Ok(Source {
                text: src.to_string(),
                stem: default.to_string(),
                label: format!("embedded {default}"),
                base: PathBuf::new(),
            })
        }
    }
}

impl Source {
    /// Validates the text as a scenario; errors name the file and the key.
    pub(crate) fn scenario(&self) -> Result<Scenario> {
        validated(&self.text, &self.stem, &self.base).map_err(|e| CliError::input(format!("{}: {e}", self.label)))
    }
}
