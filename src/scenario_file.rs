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
    // `cost.profile` is relative to the scenario file.
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut load_profile = |p: &str| crate::commands::profile::load(&dir.join(p));
    let mut s = Scenario::from_toml_with(&src, stem, &mut load_profile)
        .map_err(|e| CliError::input(format!("{}: {e}", path.display())))?;
    crate::trace_source::attach(&mut s, path)?;
    Ok(s)
}

/// Loads an embedded scenario by name.
pub fn embedded(name: &str) -> Result<Scenario> {
    let (_, src) = EMBEDDED
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| CliError::input(format!("no embedded scenario {name}")))?;
    let mut load_profile = |p: &str| crate::commands::profile::load(Path::new(p));
    Scenario::from_toml_with(src, name, &mut load_profile).map_err(|e| CliError::input(format!("embedded {name}: {e}")))
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
