//! Opening trace files for the simulator, which does no file IO itself.
//!
//! A scenario's `[workload] trace` names a file relative to the scenario file. [`attach`]
//! resolves it, gives the workload a [`TraceSource`] that opens it (streamed through a buffered
//! reader), and reads it once to check every record before anything runs: a malformed trace is
//! one clear error (exit code 2) instead of a run that stops half way. The same pass counts the
//! requests, which sizes the run's records, and reports requests that had to be sorted.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Component, Path, PathBuf};

use servesim_sim::workload::trace::{self, TraceSource, TraceSpec, Unsorted};
use servesim_sim::Scenario;

use crate::error::{CliError, Result};

/// Read buffer per open trace.
const BUFFER_BYTES: usize = 1 << 20;

/// `a/b/../c` → `a/c`, without touching the file system (for labels in messages).
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.components().next_back(), Some(Component::Normal(_))) => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        out
    }
}

/// A source that opens `path`; errors name it as `label`.
pub fn file_source(path: PathBuf, label: String) -> TraceSource {
    TraceSource::new(label, move || {
        let f = File::open(&path)?;
        Ok(Box::new(BufReader::with_capacity(BUFFER_BYTES, f)) as Box<dyn BufRead + Send>)
    })
}

/// Installs the source of `spec`'s file (`path` as given, relative to `base`), checks the trace
/// and caches its scan. Returns the absolute path, for the resolved scenario.
pub fn open_checked(spec: &mut TraceSpec, base: &Path) -> Result<PathBuf> {
    let rel = Path::new(&spec.path);
    let joined = normalize(&base.join(rel));
    let label = joined.display().to_string();
    let abs = std::fs::canonicalize(&joined).map_err(|e| CliError::input(format!("{label}: cannot read: {e}")))?;
    spec.source = Some(file_source(abs.clone(), label.clone()));
    let scan = trace::scan(spec).map_err(CliError::input)?;
    if scan.reordered > 0 {
        let how = match spec.unsorted {
            Unsorted::Sort => format!("sorted (reorder window {} requests)", spec.reorder_window),
            Unsorted::Error => "sorted".to_string(),
        };
        eprintln!("warning: {label}: {} requests were out of timestamp order and were {how}", scan.reordered);
    }
    if let Some(src) = spec.source.as_mut() {
        src.scan = Some(scan);
    }
    Ok(abs)
}

/// For a scenario that replays a trace: resolves the path relative to the scenario file,
/// installs the source and checks the trace. The resolved scenario names the absolute path, so
/// it runs from anywhere.
pub fn attach(s: &mut Scenario, scenario_path: &Path) -> Result<()> {
    let Some(spec) = s.workload.trace.as_mut() else { return Ok(()) };
    let base = scenario_path.parent().unwrap_or(Path::new(""));
    let abs = open_checked(spec, base)?;
    if let Some(t) = s.resolved.workload.trace.as_mut() {
        t.path = abs.display().to_string();
        t.source = spec.source.clone();
    }
    Ok(())
}
