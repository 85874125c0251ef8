//! `manifest.json`: what each command wrote into an output folder. `simulate`, `plan` and
//! `compare` of one scenario share `outputs/<name>/` without sharing a file; each records its
//! entry here (its files, the scenario, the seed, and the digest of everything that decides its
//! numbers), and `servesim report DIR` reads it to know which outputs the folder holds.
//!
//! The file is rewritten whole (read, the entry replaced, written to a temporary and renamed)
//! while the command holds the folder's lock, so concurrent commands cannot lose an entry.
//! It holds no time stamps: the same inputs give the same file.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The manifest's file name.
pub(crate) const FILE: &str = "manifest.json";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    /// One entry per command kind (`simulate`, `plan`, `compare`): the latest run of each.
    pub runs: BTreeMap<String, Run>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Run {
    pub scenario: String,
    pub seed: u64,
    /// SHA-256 over the resolved scenario, the seeds and the command's settings and the
    /// servesim version (the digest shard files carry).
    pub inputs_sha256: String,
    pub servesim: String,
    /// The files this run wrote, relative to the folder.
    pub files: Vec<String>,
}

impl Run {
    pub(crate) fn new(scenario: &str, seed: u64, inputs_sha256: String, files: &[&str]) -> Run {
        Run {
            scenario: scenario.to_string(),
            seed,
            inputs_sha256,
            servesim: env!("CARGO_PKG_VERSION").to_string(),
            files: files.iter().map(|f| f.to_string()).collect(),
        }
    }
}

/// The folder's manifest, if it has one this servesim can read.
pub(crate) fn read(dir: &Path) -> Option<Manifest> {
    let text = std::fs::read_to_string(dir.join(FILE)).ok()?;
    serde_json::from_str(&text).ok()
}

/// The manifest text with `kind`'s entry set to `run` (other kinds' entries kept; a manifest
/// that cannot be read is replaced).
pub(crate) fn with_entry(dir: &Path, kind: &str, run: Run) -> String {
    let mut m = read(dir).unwrap_or_default();
    m.runs.insert(kind.to_string(), run);
    serde_json::to_string_pretty(&m).expect("manifest serialises") + "\n"
}

/// Records `kind`'s entry (after its files are in place).
pub(crate) fn record(dir: &Path, kind: &str, run: Run) -> crate::error::Result<()> {
    crate::atomic::write(&dir.join(FILE), with_entry(dir, kind, run)).map_err(Into::into)
}
