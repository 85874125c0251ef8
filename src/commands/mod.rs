pub mod bench;
pub mod compare;
pub mod memory;
pub mod merge;
pub mod plan;
pub mod simulate;

/// `--format` of commands that print a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}
