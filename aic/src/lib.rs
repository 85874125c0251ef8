//! NVIDIA AIConfigurator's measured kernel database as servesim cost profiles.
//!
//! ```text
//!   Files (the binary's folder access) ─► Db: systems, frameworks, versions, provenance
//!     frame.rs      a parquet file's columns (ZSTD/Snappy pages, no Arrow)
//!     gemm.rs       GEMMs by (m, n, k), read between measured (n, k) in utilization
//!     attention.rs  context and generation attention by (batch, tokens) per head geometry
//!     comm.rs       the engine's all-reduce (else NCCL) by message size
//!     mla.rs        latent attention kernels and absorbed products by (batch, tokens)
//!     import.rs     one model's ops per TP degree ─► servesim_sim::cost::profile::Profile
//! ```
//! The database (`aiconfigurator-core` on PyPI, Apache-2.0, github.com/ai-dynamo/aiconfigurator)
//! times kernels per GPU and per engine version. Column meanings follow AIConfigurator's own
//! loaders (`aic-core/rust/aiconfigurator-core/src/perf_database/`) and collectors
//! (`collector/`); the files read are named, with their SHA-256, in every profile built.

#![warn(unreachable_pub)]

pub(crate) mod attention;
pub(crate) mod comm;
pub(crate) mod db;
pub mod frame;
pub(crate) mod gemm;
pub(crate) mod import;
pub(crate) mod mla;

pub use db::{Db, Files, Selection};

/// Why the database could not give what was asked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A system, framework or version the database does not hold; the message lists the
    /// ones it does.
    #[error("{0}")]
    NotInDatabase(String),
    /// A table that cannot be read, lacks a column, or has no measurement for a shape the
    /// model needs: the file and what is missing.
    #[error("{0}")]
    Table(String),
}

impl From<&str> for Error {
    fn from(msg: &str) -> Error {
        Error::Table(msg.to_string())
    }
}

impl From<String> for Error {
    fn from(msg: String) -> Error {
        Error::Table(msg)
    }
}
pub use import::{import, Request, Weights};
