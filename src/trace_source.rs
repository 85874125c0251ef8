//! Opening trace files for the simulator, which does no file IO itself.
//!
//! A scenario's `[workload] trace` names a file relative to the scenario file. `scenario_file::FileResources`
//! resolves it, gives the workload a [`TraceSource`] that opens it (streamed through a buffered
//! reader), and reads it once to check every record before anything runs: a malformed trace is
//! one clear error (exit code 2) instead of a run that stops half way. The same pass counts the
//! requests, which sizes the run's records, and reports requests that had to be sorted.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Component, Path, PathBuf};

use servesim_sim::workload::trace::{self, TraceSource, TraceSpec};

use crate::error::{CliError, Result};

/// Read buffer per open trace.
const BUFFER_BYTES: usize = 1 << 20;

/// `a/b/../c` → `a/c`, without touching the file system (for labels in messages).
pub(crate) fn normalize(p: &Path) -> PathBuf {
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
pub(crate) fn file_source(path: PathBuf, label: String) -> TraceSource {
    TraceSource::new(label, move || {
        let f = crate::input::LineBound::new(File::open(&path)?);
        Ok(Box::new(BufReader::with_capacity(BUFFER_BYTES, f)) as Box<dyn BufRead + Send>)
    })
}

/// Installs a source that opens `abs` (named `label` in messages), checks the trace and caches
/// its scan.
pub(crate) fn install(spec: &mut TraceSpec, abs: PathBuf, label: String) -> Result<()> {
    spec.source = Some(file_source(abs, label.clone()));
    let scan = trace::scan(spec).map_err(CliError::input)?;
    if scan.reordered > 0 {
        errln!(
            "warning: {label}: {} requests were out of timestamp order and were sorted (reorder window {} requests)",
            scan.reordered,
            spec.reorder_window
        );
    }
    if let Some(src) = spec.source.as_mut() {
        src.scan = Some(scan);
    }
    Ok(())
}
