//! Trace replay: requests read from a log of real traffic instead of drawn from distributions.
//!
//! ```text
//!   TraceSource::open ─► reader (Azure CSV | Mooncake JSONL | mapped CSV/JSONL), one record
//!   at a time ─► order check / bounded reorder ─► window ─► seeded sample ─► time scaling
//!   (speedup or target rate) ─► length clamps ─► Request
//! ```
//! Everything streams: memory holds one record (or the reorder window when sorting is asked
//! for), never the file. This module does no file IO itself: the binary gives it a
//! [`TraceSource`], a function that opens the trace as a [`BufRead`], and labels errors with the
//! file name it chose. Errors name the file, line and field:
//! `trace.csv:1043: ContextTokens: "12a" is not a number`.

mod datetime;
mod reader;
pub use reader::segments_text;
mod replay;

use std::fmt;
use std::io::BufRead;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use datetime::{parse_datetime_ns, parse_decimal_ns};
pub use replay::{scan, TraceReplay, TraceScan};

use crate::config::{check, ConfigError};

/// Tokens per Mooncake hash id (one id per 512-token block).
pub const MOONCAKE_BLOCK_TOKENS: u32 = 512;

/// Records kept in memory to sort a trace whose timestamps go backwards, by default.
pub const DEFAULT_REORDER_WINDOW: u32 = 100_000;

/// `[workload] trace = { ... }`: where the trace is, how to read it, and how to replay it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    /// `azure`, `mooncake`, `csv` or `jsonl`.
    pub(crate) format: TraceFormat,
    /// The trace file, relative to the scenario file.
    pub path: String,
    /// Which column (CSV header) or key (JSONL) holds what; `csv` and `jsonl` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub columns: Option<Columns>,
    /// Unit of the arrival column: `s`, `ms`, `us`, `ns` or `datetime`. Default: `s` for `csv`
    /// and `jsonl` (datetime for azure, ms for mooncake, fixed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_unit: Option<TimeUnit>,
    /// Tokens per hash id of the `hash_ids` column. Default 512 (Mooncake's block).
    #[serde(default = "default_block")]
    pub(crate) hash_block_tokens: u32,
    /// Play the trace this many times faster (2 = twice the rate, half the duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup: Option<f64>,
    /// Rescale time so the replayed mean rate is this many requests per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rate: Option<f64>,
    /// Replay only requests in `[start, end)` seconds after the trace's first request; the
    /// replay starts at the first request of the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) window_s: Option<[f64; 2]>,
    /// Keep each request with this probability (seeded): 0.1 replays a tenth of the trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) sample: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) min_prompt_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) max_prompt_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) min_output_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) max_output_tokens: Option<u32>,
    /// What to do when timestamps go backwards: `error` (default) or `sort`.
    #[serde(default)]
    pub unsorted: Unsorted,
    /// With `unsorted = "sort"`: how many requests are held to restore the order. A request
    /// that is out of order by more than this many requests is an error.
    #[serde(default = "default_reorder_window")]
    pub reorder_window: u32,
    /// How to open the file; installed by the program that read the scenario.
    #[serde(skip)]
    pub source: Option<TraceSource>,
}

fn default_block() -> u32 {
    MOONCAKE_BLOCK_TOKENS
}

fn default_reorder_window() -> u32 {
    DEFAULT_REORDER_WINDOW
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TraceFormat {
    /// Azure LLM inference trace CSV: `TIMESTAMP` (date-time), `ContextTokens`,
    /// `GeneratedTokens`.
    Azure,
    /// Mooncake JSONL: `timestamp` (ms), `input_length`, `output_length`, `hash_ids`.
    Mooncake,
    /// CSV with a header; columns mapped by `columns`.
    Csv,
    /// One JSON object per line; keys mapped by `columns`.
    Jsonl,
}

impl TraceFormat {
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Azure => "azure",
            TraceFormat::Mooncake => "mooncake",
            TraceFormat::Csv => "csv",
            TraceFormat::Jsonl => "jsonl",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeUnit {
    S,
    Ms,
    Us,
    Ns,
    /// `YYYY-MM-DD HH:MM:SS[.fraction][Z|±HH:MM]` (or with a `T`).
    Datetime,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unsorted {
    #[default]
    Error,
    Sort,
}

/// The column mapping of a `csv` or `jsonl` trace. Required columns default to servesim's own
/// names; optional ones are read when a column of that name exists (CSV) or the key is present
/// (JSONL), and must exist when named explicitly.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Columns {
    /// Arrival time (unit: `arrival_unit`). Default `arrival_s`.
    pub arrival: Option<String>,
    /// Prompt tokens. Default `prompt_tokens`.
    pub prompt_tokens: Option<String>,
    /// Output tokens. Default `output_tokens`.
    pub output_tokens: Option<String>,
    /// Session or conversation key (any text). Default `session`, if present.
    pub session: Option<String>,
    /// Priority class, an integer 0–255 (0 most important). Default `class`, if present.
    pub class: Option<String>,
    /// Ids of the prompt's blocks of `hash_block_tokens` tokens (a JSON array, or ids separated
    /// by spaces or `;` in CSV); equal ids are identical prefix blocks. Default `hash_ids`, if
    /// present.
    pub hash_ids: Option<String>,
    /// Id of a shared prompt prefix (system prompt, document). Default `prefix`, if present.
    pub prefix: Option<String>,
    /// That prefix's length in tokens. Default `prefix_tokens`, if present.
    pub prefix_tokens: Option<String>,
    /// The prompt's identified leading content exactly, as `HASH:TOKENS` pairs (hexadecimal
    /// 64-bit hash, token count) separated by spaces or `;`: what `workload generate` writes, so
    /// that a generated trace replays the synthetic workload's shared prefixes exactly. Default
    /// `segments`, if present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<String>,
}

/// Opens a trace, as often as needed (a target rate reads it twice; each run of a sweep reads
/// it again), and names it in error messages.
#[derive(Clone)]
pub struct TraceSource {
    /// How errors name the file (the path as the user gave it).
    pub(crate) label: String,
    open: Arc<dyn Fn() -> std::io::Result<Box<dyn BufRead + Send>> + Send + Sync>,
    /// The result of a scan, when the program already made one (saves reading the file again
    /// for a target rate, and sizes the run's records).
    pub scan: Option<TraceScan>,
}

impl TraceSource {
    pub fn new(
        label: impl Into<String>,
        open: impl Fn() -> std::io::Result<Box<dyn BufRead + Send>> + Send + Sync + 'static,
    ) -> TraceSource {
        TraceSource { label: label.into(), open: Arc::new(open), scan: None }
    }

    /// A trace held in memory (tests, library users).
    pub fn from_bytes(label: impl Into<String>, bytes: impl Into<Arc<[u8]>>) -> TraceSource {
        let bytes: Arc<[u8]> = bytes.into();
        TraceSource::new(label, move || {
            Ok(Box::new(std::io::Cursor::new(ArcBytes(bytes.clone()))) as Box<dyn BufRead + Send>)
        })
    }

    pub fn open(&self) -> Result<Box<dyn BufRead + Send>, TraceError> {
        (self.open)().map_err(|e| TraceError::file(&self.label, format!("cannot read: {e}")))
    }
}

struct ArcBytes(Arc<[u8]>);

impl AsRef<[u8]> for ArcBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for TraceSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceSource({:?})", self.label)
    }
}

/// Sources compare by label: two scenarios naming the same file are equal.
impl PartialEq for TraceSource {
    fn eq(&self, o: &Self) -> bool {
        self.label == o.label
    }
}

/// A problem in a trace: the file, the line (1-based, the CSV header is line 1), the field,
/// and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    pub(crate) file: String,
    pub(crate) line: Option<u64>,
    pub(crate) field: Option<String>,
    pub(crate) message: String,
}

impl TraceError {
    pub fn file(file: &str, message: String) -> TraceError {
        TraceError { file: file.to_string(), line: None, field: None, message }
    }

    pub fn line(file: &str, line: u64, message: String) -> TraceError {
        TraceError { file: file.to_string(), line: Some(line), field: None, message }
    }

    pub fn field(file: &str, line: u64, field: &str, message: String) -> TraceError {
        TraceError { file: file.to_string(), line: Some(line), field: Some(field.to_string()), message }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for TraceError {}

impl TraceSpec {
    /// A spec that replays `path` as it is (no transforms).
    pub fn plain(format: TraceFormat, path: impl Into<String>) -> TraceSpec {
        TraceSpec {
            format,
            path: path.into(),
            columns: None,
            arrival_unit: None,
            hash_block_tokens: MOONCAKE_BLOCK_TOKENS,
            speedup: None,
            target_rate: None,
            window_s: None,
            sample: None,
            min_prompt_tokens: None,
            max_prompt_tokens: None,
            min_output_tokens: None,
            max_output_tokens: None,
            unsorted: Unsorted::Error,
            reorder_window: DEFAULT_REORDER_WINDOW,
            source: None,
        }
    }

    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        check(!self.path.is_empty(), path, "path", "must name a file", "\"\"")?;
        match self.format {
            TraceFormat::Azure | TraceFormat::Mooncake => {
                if self.columns.is_some() {
                    return Err(ConfigError::at(
                        &format!("{path}.columns"),
                        format!(
                            "only for format \"csv\" or \"jsonl\"; {} traces have fixed columns",
                            self.format.name()
                        ),
                    ));
                }
                if self.arrival_unit.is_some() {
                    return Err(ConfigError::at(
                        &format!("{path}.arrival_unit"),
                        format!(
                            "only for format \"csv\" or \"jsonl\"; {} traces have a fixed unit",
                            self.format.name()
                        ),
                    ));
                }
            }
            TraceFormat::Csv | TraceFormat::Jsonl => {
                if let Some(c) = &self.columns {
                    for (key, v) in c.named() {
                        if let Some(name) = v {
                            check(!name.is_empty(), &format!("{path}.columns"), key, "must name a column", "\"\"")?;
                        }
                    }
                }
            }
        }
        check(self.hash_block_tokens >= 1, path, "hash_block_tokens", "must be ≥ 1", self.hash_block_tokens)?;
        if let Some(k) = self.speedup {
            check(k.is_finite() && k > 0.0, path, "speedup", "must be > 0", k)?;
        }
        if let Some(r) = self.target_rate {
            check(r.is_finite() && r > 0.0, path, "target_rate", "must be > 0", r)?;
        }
        if self.speedup.is_some() && self.target_rate.is_some() {
            return Err(ConfigError::at(path, "give speedup or target_rate, not both".into()));
        }
        if let Some([a, b]) = self.window_s {
            check(a.is_finite() && a >= 0.0, &format!("{path}.window_s"), "[0]", "must be ≥ 0", a)?;
            check(b.is_finite() && b > a, &format!("{path}.window_s"), "[1]", &format!("must be > start ({a})"), b)?;
        }
        if let Some(s) = self.sample {
            check(s.is_finite() && s > 0.0 && s <= 1.0, path, "sample", "must be in (0, 1]", s)?;
        }
        for (lo_key, lo, hi_key, hi) in [
            ("min_prompt_tokens", self.min_prompt_tokens, "max_prompt_tokens", self.max_prompt_tokens),
            ("min_output_tokens", self.min_output_tokens, "max_output_tokens", self.max_output_tokens),
        ] {
            if let Some(l) = lo {
                check(l >= 1, path, lo_key, "must be ≥ 1", l)?;
            }
            if let Some(h) = hi {
                let l = lo.unwrap_or(1);
                check(h >= l, path, hi_key, &format!("must be ≥ {l}"), h)?;
            }
        }
        check(
            self.reorder_window >= 1 && self.reorder_window <= 100_000_000,
            path,
            "reorder_window",
            "must be in [1, 100000000]",
            self.reorder_window,
        )
    }

    /// The arrival unit actually used.
    pub fn unit(&self) -> TimeUnit {
        match self.format {
            TraceFormat::Azure => TimeUnit::Datetime,
            TraceFormat::Mooncake => TimeUnit::Ms,
            _ => self.arrival_unit.unwrap_or(TimeUnit::S),
        }
    }

    /// How long the replay lasts, in seconds, when the source's scan is known.
    pub fn replay_span_s(&self) -> Option<f64> {
        let scan = self.source.as_ref()?.scan.as_ref()?;
        let span = scan.span_s();
        match (self.speedup, self.target_rate) {
            (Some(k), _) => Some(span / k),
            (None, Some(rate)) if scan.requests >= 2 && span > 0.0 => {
                Some(self.sample.unwrap_or(1.0) * scan.requests as f64 / rate)
            }
            _ => Some(span),
        }
    }

    /// The label errors use: the source's, or the path.
    pub fn label(&self) -> &str {
        self.source.as_ref().map(|s| s.label.as_str()).unwrap_or(&self.path)
    }
}

impl Columns {
    fn named(&self) -> [(&'static str, &Option<String>); 9] {
        [
            ("arrival", &self.arrival),
            ("prompt_tokens", &self.prompt_tokens),
            ("output_tokens", &self.output_tokens),
            ("session", &self.session),
            ("class", &self.class),
            ("hash_ids", &self.hash_ids),
            ("prefix", &self.prefix),
            ("prefix_tokens", &self.prefix_tokens),
            ("segments", &self.segments),
        ]
    }
}

/// Stable 64-bit hash of text (FNV-1a), for session keys and prefix ids.
pub fn hash_text(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Spreads an id over 64 bits (splitmix64's finaliser), so ids from a trace do not collide with
/// the small integers other content sources might use.
pub fn mix_id(x: u64) -> u64 {
    let mut z = x ^ 0x7261_6365_2d69_6473; // "race-ids"
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests;
