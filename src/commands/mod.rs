pub(crate) mod bench;
pub(crate) mod calibrate;
pub(crate) mod calibrate_fit;
pub(crate) mod compare;
pub(crate) mod memory;
pub(crate) mod merge;
pub(crate) mod plan;
pub(crate) mod profile;
pub(crate) mod report;
pub(crate) mod scenario;
pub(crate) mod simulate;
pub(crate) mod tune;
pub(crate) mod validate;
pub(crate) mod workload;

/// `--format` of commands that print a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    Table,
    Json,
}
