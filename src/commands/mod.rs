pub mod bench;
pub mod calibrate;
pub mod compare;
pub mod memory;
pub mod merge;
pub mod plan;
pub mod profile;
pub mod report;
pub mod simulate;
pub mod validate;
pub mod workload;

/// `--format` of commands that print a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}
