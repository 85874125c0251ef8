//! Configuration foundations: the error every configuration check returns, the key-path helpers
//! and the registration macro of policy families. The bottom layer of the crate.
//!
//! ```text
//!   TOML text ──parse (serde, key paths)──► file model (scenario::ScenarioFile, policy specs)
//!             ──resolve (scenario)────────► runtime types (Scenario, Instance, Router, …)
//! ```
//! Nothing here imports the runtime (`instance`, `router`, `metrics`, `engine`, …): every
//! module may use `config`, and `config` uses only the standard library, serde and toml. The
//! check in `sim/tests/layers.rs` keeps it so.

pub(crate) mod de;
mod registry;

use std::fmt;

use serde::de::DeserializeOwned;

/// A configuration error: the key path, the problem, and the line where the parser knows it.
/// Shown as `line 12: workload.arrival.rate: must be in [1e-12, 1e9] requests/s, got -3`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    pub(crate) message: String,
    pub(crate) line: Option<usize>,
}

impl ConfigError {
    pub fn at(path: &str, message: String) -> ConfigError {
        ConfigError { path: path.to_string(), message, line: None }
    }

    /// What is wrong, without the key.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// A number as errors show it: exponent notation when it is huge or tiny (`1e308`, not 309
/// digits).
pub(crate) fn shown(x: f64) -> String {
    if x != 0.0 && x.is_finite() && !(1e-6..1e9).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// Returns an error at `path.key` saying `msg, got value` unless `ok`.
pub fn check<V: fmt::Display>(ok: bool, path: &str, key: &str, msg: &str, value: V) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::at(&de::join_path(path, key), format!("{msg}, got {value}")))
    }
}

/// Parses TOML text into a file model `T`, turning serde's errors into key-path messages.
pub(crate) fn parse<T: DeserializeOwned>(src: &str) -> Result<T, ConfigError> {
    let de = toml::Deserializer::parse(src).map_err(|e| toml_error(src, "", &e))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        toml_error(src, &path, e.inner())
    })
}

fn toml_error(src: &str, path: &str, e: &toml::de::Error) -> ConfigError {
    let line = e.span().map(|s| src[..s.start.min(src.len())].matches('\n').count() + 1);
    let msg = e.message().lines().next().unwrap_or("").trim_end();
    let path = if path == "." { "" } else { path };
    let (path, message) = match de::split_marked(msg) {
        Some((inner, m)) => (de::join_path(path, inner), m.to_string()),
        None => (path.to_string(), msg.to_string()),
    };
    let at = e
        .span()
        .map(|s| {
            let text = src.get(s.clone()).unwrap_or("").trim();
            // A table header's span is its name: say it is a table.
            let header = s.start > 0 && src.get(s.start - 1..s.start) == Some("[");
            if header {
                format!("[{text}]")
            } else {
                text.to_string()
            }
        })
        .unwrap_or_default();
    ConfigError { path, message: plain_message(&message, &at), line }
}

/// The TOML and serde messages in a user's words: the duplicated key named, numbers out of
/// range said to be out of range (with the bound), no internal type names.
pub(crate) fn plain_message(msg: &str, at: &str) -> String {
    let max_of = |ty: &str| match ty {
        "u8" => Some(u8::MAX as u128),
        "u16" => Some(u16::MAX as u128),
        "u32" => Some(u32::MAX as u128),
        "u64" => Some(u64::MAX as u128),
        "usize" => Some(usize::MAX as u128),
        "i64" => Some(i64::MAX as u128),
        _ => None,
    };
    let quoted = |m: &str| m.split('`').nth(1).map(str::to_string);
    let expected = msg.rsplit("expected ").next().unwrap_or("").trim();
    if msg.starts_with("duplicate key") {
        return if at.starts_with('[') {
            format!("table {at} appears twice")
        } else if at.is_empty() {
            "a key appears twice".into()
        } else {
            format!("key `{}` appears twice", at.split('=').next().unwrap_or(at).trim())
        };
    }
    if let (Some(n), Some(max)) = (quoted(msg), max_of(expected)) {
        if msg.starts_with("invalid type: integer") || msg.starts_with("invalid value: integer") {
            return if n.starts_with('-') {
                format!("must be a whole number from 0 to {max}, got {n}")
            } else {
                format!("out of range: must be at most {max}, got {n}")
            };
        }
        if msg.starts_with("invalid type: floating point") {
            let shown = n.parse::<f64>().map(|x| if x.abs() >= 1e15 { format!("{x:e}") } else { x.to_string() });
            return format!("must be a whole number (no decimal point or exponent), got {}", shown.unwrap_or(n));
        }
    }
    // serde names the Rust type: `expected struct GpuSection` says nothing to a user.
    for (rust, plain) in [("expected struct ", "expected a table"), ("expected enum ", "expected one of its names")] {
        if let Some(i) = msg.find(rust) {
            let rest = &msg[i + rust.len()..];
            let tail = rest.find(|c: char| !c.is_alphanumeric() && c != '_').map_or("", |j| &rest[j..]);
            return format!("{}{plain}{tail}", &msg[..i]);
        }
    }
    msg.to_string()
}
