//! CLI errors and exit codes: 2 for bad input (scenario, trace, flags), 1 for anything else.

use std::fmt;

pub enum CliError {
    /// The user's input is wrong; exit code 2.
    Input(anyhow::Error),
    /// Something else failed (writing outputs, ...); exit code 1.
    Other(anyhow::Error),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Input(_) => 2,
            CliError::Other(_) => 1,
        }
    }

    pub fn input(msg: impl fmt::Display) -> CliError {
        CliError::Input(anyhow::anyhow!("{msg}"))
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Input(e) | CliError::Other(e) => {
                if f.alternate() {
                    write!(f, "{e:#}")
                } else {
                    write!(f, "{e}")
                }
            }
        }
    }
}

impl From<anyhow::Error> for CliError {
    fn from(e: anyhow::Error) -> Self {
        CliError::Other(e)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Other(e.into())
    }
}

pub type Result<T> = std::result::Result<T, CliError>;
