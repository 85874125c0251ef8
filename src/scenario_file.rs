//! Reading scenario files (or the scenarios embedded in the binary).

use std::path::Path;

use servesim_sim::Scenario;

use crate::error::{CliError, Result};

/// Scenarios shipped in `scenarios/` and embedded in the binary, so that a command run without
/// `--scenario` has a default that works anywhere.
pub const EMBEDDED: &[(&str, &str)] =
    &[("chat", include_str!("../scenarios/chat.toml")), ("peak", include_str!("../scenarios/peak.toml"))];

/// Loads and validates a scenario file; errors name the file and the key.
pub fn load(path: &Path) -> Result<Scenario> {
    let src = std::fs::read_to_string(path)
        .map_err(|e| CliError::input(format!("cannot read scenario {}: {e}", path.display())))?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("scenario");
    Scenario::from_toml(&src, stem).map_err(|e| CliError::input(format!("{}: {e}", path.display())))
}

/// Loads an embedded scenario by name.
pub fn embedded(name: &str) -> Result<Scenario> {
    let (_, src) = EMBEDDED
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| CliError::input(format!("no embedded scenario {name}")))?;
    Scenario::from_toml(src, name).map_err(|e| CliError::input(format!("embedded {name}: {e}")))
}

/// `--scenario PATH`, or the embedded default when no path is given.
pub fn load_or_default(path: Option<&Path>, default: &str) -> Result<Scenario> {
    match path {
        Some(p) => load(p),
        None => {
            eprintln!("note: no --scenario given; using the embedded scenarios/{default}.toml");
            embedded(default)
        }
    }
}

/// A scenario's text, the name it takes when the file does not give one (the file stem), and
/// a label naming it in error messages: `--scenario PATH`, or the embedded default.
pub struct Source {
    pub text: String,
    pub stem: String,
    pub label: String,
}

/// Reads `--scenario PATH` (or the embedded default) without validating it.
pub fn read_source(path: Option<&Path>, default: &str) -> Result<Source> {
    match path {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| CliError::input(format!("cannot read scenario {}: {e}", p.display())))?;
            let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("scenario").to_string();
            Ok(Source { text, stem, label: p.display().to_string() })
        }
        None => {
            eprintln!("note: no --scenario given; using the embedded scenarios/{default}.toml");
            let (_, src) = EMBEDDED
                .iter()
                .find(|(n, _)| *n == default)
                .ok_or_else(|| CliError::input(format!("no embedded scenario {default}")))?;
            Ok(Source { text: src.to_string(), stem: default.to_string(), label: format!("embedded {default}") })
        }
    }
}

impl Source {
    /// Validates the text as a scenario; errors name the file and the key.
    pub fn scenario(&self) -> Result<Scenario> {
        Scenario::from_toml(&self.text, &self.stem).map_err(|e| CliError::input(format!("{}: {e}", self.label)))
    }
}
