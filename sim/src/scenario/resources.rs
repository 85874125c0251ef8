//! How the library gets the files a scenario names without reading files itself.
//!
//! A scenario may name a cost profile (`cost.profile`) and a trace (`workload.trace.path`). The
//! simulator is pure, so the program that loads the scenario hands [`Scenario::from_file_in`]
//! a [`Resources`] that turns those paths into a parsed profile and a trace source. The
//! scenario keeps it, so scenarios derived from it (plan candidates, compare variants) find the
//! same files — through the caller's caches, without reading them again.
//!
//! [`Scenario::from_file_in`]: super::Scenario::from_file_in

use std::fmt;
use std::sync::Arc;

use crate::cost::profile::Profile;
use crate::cost::{Calibration, DatabaseRequest};
use crate::workload::trace::TraceSpec;

/// Why the caller could not give a file the scenario names: the message names the file and
/// what is wrong with it (missing, unreadable, not a profile, no such kernel data).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    /// The file is missing, unreadable, or not what it should be.
    #[error("{0}")]
    File(String),
    /// This caller does not provide such resources (a scenario built from text alone, a
    /// database request no shipped profile answers).
    #[error("{0}")]
    Unavailable(String),
}

impl From<String> for ResourceError {
    fn from(msg: String) -> ResourceError {
        ResourceError::File(msg)
    }
}

/// Files a scenario names, as the caller provides them.
pub trait Resources: Send + Sync + fmt::Debug {
    /// The profile at `path`, as written in the scenario.
    fn profile(&self, path: &str) -> Result<Arc<Profile>, ResourceError>;

    /// Gives `spec` a source for its trace (`spec.path` as written), checked and scanned. It
    /// may rewrite `spec.path` (for example to an absolute path, so the resolved scenario runs
    /// from anywhere). Leaving `spec.source` empty is allowed: the run then fails with a clear
    /// message unless someone installs a source first.
    fn trace(&self, spec: &mut TraceSpec) -> Result<(), ResourceError>;

    /// The calibration at `path` (`cost.calibration`), as written in the scenario, parsed and
    /// checked. By default none can be read.
    fn calibration(&self, path: &str) -> Result<Arc<Calibration>, ResourceError> {
        Err(ResourceError::Unavailable(format!(
            "cannot read {path}: calibrations are read by the program that loads the scenario (Scenario::from_file_in)"
        )))
    }

    /// The profile a kernel database gives for `req` (`[cost] database`), built or found by
    /// the caller and cached by its inputs. By default only the profiles built into servesim
    /// ([`crate::cost::shipped`]) answer.
    fn database(&self, req: &DatabaseRequest) -> Result<Arc<Profile>, ResourceError> {
        crate::cost::shipped::find(req).map(|(_, p)| p).ok_or_else(|| {
            ResourceError::Unavailable(format!(
                "no shipped profile for {}; other kernel databases are read by the program that loads the \
                 scenario (Scenario::from_file_in)",
                req.describe()
            ))
        })
    }
}

/// No files at all: the resources of a scenario built from text alone. Profiles are an error;
/// traces are left without a source (a test or library user may install one).
#[derive(Debug, Default)]
pub struct NoFiles;

impl Resources for NoFiles {
    fn profile(&self, path: &str) -> Result<Arc<Profile>, ResourceError> {
        Err(ResourceError::Unavailable(format!(
            "cannot read {path}: profiles are read by the program that loads the scenario (Scenario::from_file_in)"
        )))
    }

    fn trace(&self, _spec: &mut TraceSpec) -> Result<(), ResourceError> {
        Ok(())
    }
}
