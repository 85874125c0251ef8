//! Reading trace records, one at a time, from CSV or JSONL with a column mapping. Azure and
//! Mooncake traces are mappings fixed in advance.

use std::io::BufRead;

use serde_json::Value;

use super::datetime::{parse_datetime_ns, parse_decimal_ns};
use super::{hash_text, mix_id, TimeUnit, TraceError, TraceFormat, TraceSpec};
use crate::workload::{Segment, NO_SESSION};

/// One request as the file states it: absolute time, lengths, identity.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct RawRecord {
    pub(crate) line: u64,
    /// Arrival in nanoseconds, on the trace's own clock.
    pub(crate) t_ns: i64,
    pub(crate) prompt: u64,
    pub(crate) output: u64,
    pub(crate) session: u64,
    pub(crate) class: u8,
    pub(crate) content: Vec<Segment>,
}

/// The column names in use, for error messages.
#[derive(Clone, Debug)]
pub(super) struct Names {
    pub(crate) arrival: String,
    pub(crate) prompt: String,
    pub(crate) output: String,
}

/// A column: its name, and whether the user named it (then it must exist).
#[derive(Clone, Debug)]
struct Col {
    name: String,
    explicit: bool,
}

#[derive(Clone, Debug)]
struct Mapping {
    arrival: String,
    prompt: String,
    output: String,
    session: Option<Col>,
    class: Option<Col>,
    hash_ids: Option<Col>,
    prefix: Option<Col>,
    prefix_tokens: Option<Col>,
    segments: Option<Col>,
    unit: TimeUnit,
    block: u64,
}

fn optional(explicit: &Option<String>, default: &str) -> Option<Col> {
    Some(match explicit {
        Some(n) => Col { name: n.clone(), explicit: true },
        None => Col { name: default.to_string(), explicit: false },
    })
}

impl Mapping {
    fn of(spec: &TraceSpec) -> Mapping {
        let unit = spec.unit();
        let block = spec.hash_block_tokens as u64;
        match spec.format {
            TraceFormat::Azure => Mapping {
                arrival: "TIMESTAMP".into(),
                prompt: "ContextTokens".into(),
                output: "GeneratedTokens".into(),
                session: None,
                class: None,
                hash_ids: None,
                prefix: None,
                prefix_tokens: None,
                segments: None,
                unit,
                block,
            },
            TraceFormat::Mooncake => Mapping {
                arrival: "timestamp".into(),
                prompt: "input_length".into(),
                output: "output_length".into(),
                session: None,
                class: None,
                hash_ids: Some(Col { name: "hash_ids".into(), explicit: false }),
                prefix: None,
                prefix_tokens: None,
                segments: None,
                unit,
                block: super::MOONCAKE_BLOCK_TOKENS as u64,
            },
            TraceFormat::Csv | TraceFormat::Jsonl => {
                let c = spec.columns.clone().unwrap_or_default();
                Mapping {
                    arrival: c.arrival.unwrap_or_else(|| "arrival_s".into()),
                    prompt: c.prompt_tokens.unwrap_or_else(|| "prompt_tokens".into()),
                    output: c.output_tokens.unwrap_or_else(|| "output_tokens".into()),
                    session: optional(&c.session, "session"),
                    class: optional(&c.class, "class"),
                    hash_ids: optional(&c.hash_ids, "hash_ids"),
                    prefix: optional(&c.prefix, "prefix"),
                    prefix_tokens: optional(&c.prefix_tokens, "prefix_tokens"),
                    segments: optional(&c.segments, "segments"),
                    unit,
                    block,
                }
            }
        }
    }

    fn names(&self) -> Names {
        Names { arrival: self.arrival.clone(), prompt: self.prompt.clone(), output: self.output.clone() }
    }
}

/// Reads records from a trace.
pub(super) struct Reader {
    file: String,
    map: Mapping,
    kind: Kind,
}

enum Kind {
    Csv { rdr: Box<csv::Reader<Box<dyn BufRead + Send>>>, rec: csv::StringRecord, idx: CsvIdx },
    Jsonl { src: Box<dyn BufRead + Send>, buf: String, line: u64 },
}

/// Column positions in a CSV header.
struct CsvIdx {
    arrival: usize,
    prompt: usize,
    output: usize,
    session: Option<usize>,
    class: Option<usize>,
    hash_ids: Option<usize>,
    prefix: Option<usize>,
    prefix_tokens: Option<usize>,
    segments: Option<usize>,
}

impl Reader {
    pub(super) fn new(spec: &TraceSpec, src: Box<dyn BufRead + Send>) -> Result<Reader, TraceError> {
        let file = spec.label().to_string();
        let map = Mapping::of(spec);
        let kind = match spec.format {
            TraceFormat::Azure | TraceFormat::Csv => {
                let mut rdr = csv::ReaderBuilder::new().has_headers(true).flexible(false).from_reader(src);
                let header = rdr.headers().map_err(|e| csv_error(&file, e))?.clone();
                if header.is_empty() || (header.len() == 1 && header[0].trim().is_empty()) {
                    return Err(TraceError::file(&file, "empty file: no header line".into()));
                }
                let names: Vec<&str> = header.iter().map(|h| h.trim()).collect();
                let find = |n: &str| names.iter().position(|h| *h == n);
                let missing = |n: &str| {
                    TraceError::line(&file, 1, format!("missing column \"{n}\" (the header has: {})", names.join(", ")))
                };
                let req = |n: &str| find(n).ok_or_else(|| missing(n));
                let opt = |c: &Option<Col>| -> Result<Option<usize>, TraceError> {
                    match c {
                        None => Ok(None),
                        Some(c) => match find(&c.name) {
                            Some(i) => Ok(Some(i)),
                            None if c.explicit => Err(missing(&c.name)),
                            None => Ok(None),
                        },
                    }
                };
                let idx = CsvIdx {
                    arrival: req(&map.arrival)?,
                    prompt: req(&map.prompt)?,
                    output: req(&map.output)?,
                    session: opt(&map.session)?,
                    class: opt(&map.class)?,
                    hash_ids: opt(&map.hash_ids)?,
                    prefix: opt(&map.prefix)?,
                    prefix_tokens: opt(&map.prefix_tokens)?,
                    segments: opt(&map.segments)?,
                };
                let ways = [idx.hash_ids, idx.prefix, idx.segments].iter().filter(|x| x.is_some()).count();
                if ways > 1 {
                    return Err(TraceError::line(
                        &file,
                        1,
                        "more than one of the hash_ids, prefix and segments columns: give one way of naming shared content"
                            .into(),
                    ));
                }
                if idx.prefix.is_some() != idx.prefix_tokens.is_some() {
                    let (has, lacks) = if idx.prefix.is_some() {
                        (map.prefix.as_ref(), map.prefix_tokens.as_ref())
                    } else {
                        (map.prefix_tokens.as_ref(), map.prefix.as_ref())
                    };
                    return Err(TraceError::line(
                        &file,
                        1,
                        format!(
                            "column \"{}\" needs column \"{}\" too",
                            has.map(|c| c.name.as_str()).unwrap_or(""),
                            lacks.map(|c| c.name.as_str()).unwrap_or("")
                        ),
                    ));
                }
                Kind::Csv { rdr: Box::new(rdr), rec: csv::StringRecord::new(), idx }
            }
            TraceFormat::Mooncake | TraceFormat::Jsonl => Kind::Jsonl { src, buf: String::new(), line: 0 },
        };
        Ok(Reader { file, map, kind })
    }

    pub(super) fn names(&self) -> Names {
        self.map.names()
    }

    pub(super) fn file(&self) -> &str {
        &self.file
    }

    fn next_csv(&mut self) -> Option<Result<RawRecord, TraceError>> {
        let Kind::Csv { rdr, rec, idx } = &mut self.kind else { unreachable!() };
        match rdr.read_record(rec) {
            Ok(false) => None,
            Err(e) => Some(Err(csv_error(&self.file, e))),
            Ok(true) => {
                let line = rec.position().map(|p| p.line()).unwrap_or(0);
                let f = &self.file;
                let m = &self.map;
                let get = |i: usize| rec.get(i).unwrap_or("");
                let r = (|| {
                    let t_ns =
                        parse_time(get(idx.arrival), m.unit).map_err(|e| TraceError::field(f, line, &m.arrival, e))?;
                    let prompt = parse_len(get(idx.prompt)).map_err(|e| TraceError::field(f, line, &m.prompt, e))?;
                    let output = parse_len(get(idx.output)).map_err(|e| TraceError::field(f, line, &m.output, e))?;
                    let session = idx.session.map(|i| session_key(get(i))).unwrap_or(NO_SESSION);
                    let class = match idx.class {
                        Some(i) => parse_class(get(i)).map_err(|e| field_err(f, line, &m.class, e))?,
                        None => 0,
                    };
                    let mut content = Vec::new();
                    if let Some(i) = idx.hash_ids {
                        let ids = parse_id_list(get(i)).map_err(|e| field_err(f, line, &m.hash_ids, e))?;
                        content = blocks(&ids, prompt, m.block).map_err(|e| field_err(f, line, &m.hash_ids, e))?;
                    }
                    if let Some(i) = idx.segments {
                        content = parse_segments(get(i), prompt).map_err(|e| field_err(f, line, &m.segments, e))?;
                    }
                    if let (Some(i), Some(j)) = (idx.prefix, idx.prefix_tokens) {
                        let id = get(i).trim();
                        if !id.is_empty() {
                            let tokens = parse_len(get(j)).map_err(|e| field_err(f, line, &m.prefix_tokens, e))?;
                            content = prefix_segment(id, tokens, prompt)
                                .map_err(|e| field_err(f, line, &m.prefix_tokens, e))?;
                        }
                    }
                    Ok(RawRecord { line, t_ns, prompt, output, session, class, content })
                })();
                Some(r)
            }
        }
    }

    fn next_jsonl(&mut self) -> Option<Result<RawRecord, TraceError>> {
        let Kind::Jsonl { src, buf, line } = &mut self.kind else { unreachable!() };
        let f = &self.file;
        loop {
            buf.clear();
            *line += 1;
            match src.read_line(buf) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => return Some(Err(TraceError::line(f, *line, format!("cannot read: {e}")))),
            }
            if !buf.trim().is_empty() {
                break;
            }
        }
        let line = *line;
        let m = &self.map;
        let obj: serde_json::Map<String, Value> = match serde_json::from_str(buf.trim()) {
            Ok(o) => o,
            Err(e) => {
                // serde's message ends with "at line 1 column N" of the record; keep the column.
                let msg = e.to_string();
                let msg = msg.split(" at line ").next().unwrap_or("").to_string();
                let col = e.column();
                return Some(Err(TraceError::line(f, line, format!("not a JSON object (column {col}): {msg}"))));
            }
        };
        let r = (|| {
            let get_req = |name: &str| match obj.get(name) {
                None | Some(Value::Null) => Err(TraceError::field(f, line, name, "missing".into())),
                Some(v) => Ok(v),
            };
            let get_opt = |c: &Option<Col>| -> Result<Option<&Value>, TraceError> {
                match c {
                    None => Ok(None),
                    Some(c) => match obj.get(&c.name) {
                        None | Some(Value::Null) if c.explicit => {
                            Err(TraceError::field(f, line, &c.name, "missing".into()))
                        }
                        None | Some(Value::Null) => Ok(None),
                        Some(v) => Ok(Some(v)),
                    },
                }
            };
            let t_ns = json_str(get_req(&m.arrival)?, |s| parse_time(s, m.unit))
                .map_err(|e| TraceError::field(f, line, &m.arrival, e))?;
            let prompt = json_len(get_req(&m.prompt)?).map_err(|e| TraceError::field(f, line, &m.prompt, e))?;
            let output = json_len(get_req(&m.output)?).map_err(|e| TraceError::field(f, line, &m.output, e))?;
            let session = match get_opt(&m.session)? {
                Some(Value::String(s)) => session_key(s),
                Some(v) => session_key(&v.to_string()),
                None => NO_SESSION,
            };
            let class = match get_opt(&m.class)? {
                Some(v) => json_str(v, parse_class).map_err(|e| field_err(f, line, &m.class, e))?,
                None => 0,
            };
            let hash_ids = get_opt(&m.hash_ids)?;
            let prefix = get_opt(&m.prefix)?;
            let segments = get_opt(&m.segments)?;
            if [hash_ids.is_some(), prefix.is_some(), segments.is_some()].iter().filter(|&&x| x).count() > 1 {
                return Err(TraceError::line(
                    f,
                    line,
                    "more than one of hash_ids, a prefix and segments: give one way of naming shared content".into(),
                ));
            }
            let mut content = Vec::new();
            if let Some(v) = segments {
                let text = match v {
                    Value::String(s) => s.clone(),
                    v => v.to_string(),
                };
                content = parse_segments(&text, prompt).map_err(|e| field_err(f, line, &m.segments, e))?;
            }
            if let Some(v) = hash_ids {
                let ids = json_ids(v).map_err(|e| field_err(f, line, &m.hash_ids, e))?;
                content = blocks(&ids, prompt, m.block).map_err(|e| field_err(f, line, &m.hash_ids, e))?;
            }
            if let Some(p) = prefix {
                let id = match p {
                    Value::String(s) => s.clone(),
                    v => v.to_string(),
                };
                let Some(pt) = get_opt(&m.prefix_tokens)? else {
                    let name = m.prefix_tokens.as_ref().map(|c| c.name.as_str()).unwrap_or("prefix_tokens");
                    return Err(TraceError::field(f, line, name, "missing (the request names a prefix)".into()));
                };
                let tokens = json_len(pt).map_err(|e| field_err(f, line, &m.prefix_tokens, e))?;
                content = prefix_segment(&id, tokens, prompt).map_err(|e| field_err(f, line, &m.prefix_tokens, e))?;
            }
            Ok(RawRecord { line, t_ns, prompt, output, session, class, content })
        })();
        Some(r)
    }
}

impl Iterator for Reader {
    type Item = Result<RawRecord, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.kind {
            Kind::Csv { .. } => self.next_csv(),
            Kind::Jsonl { .. } => self.next_jsonl(),
        }
    }
}

fn field_err(f: &str, line: u64, c: &Option<Col>, msg: String) -> TraceError {
    TraceError::field(f, line, c.as_ref().map(|c| c.name.as_str()).unwrap_or("?"), msg)
}

fn csv_error(file: &str, e: csv::Error) -> TraceError {
    let line = e.position().map(|p| p.line());
    let msg = match e.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
            format!("{len} fields where the header has {expected_len}")
        }
        csv::ErrorKind::Utf8 { .. } => "not valid UTF-8".to_string(),
        csv::ErrorKind::Io(io) => format!("cannot read: {io}"),
        _ => e.to_string(),
    };
    TraceError { file: file.to_string(), line, field: None, message: msg }
}

/// Parses a time in `unit` to nanoseconds.
fn parse_time(s: &str, unit: TimeUnit) -> Result<i64, String> {
    let unit_ns = match unit {
        TimeUnit::Datetime => {
            return parse_datetime_ns(s)
                .ok_or_else(|| format!("\"{}\" is not a date-time (YYYY-MM-DD HH:MM:SS[.fraction])", s.trim()));
        }
        TimeUnit::S => 1_000_000_000,
        TimeUnit::Ms => 1_000_000,
        TimeUnit::Us => 1_000,
        TimeUnit::Ns => 1,
    };
    parse_decimal_ns(s, unit_ns).ok_or_else(|| format!("\"{}\" is not a number", s.trim()))
}

/// Parses a token count: a non-negative whole number.
pub(super) fn parse_len(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if let Ok(v) = t.parse::<u64>() {
        return Ok(v);
    }
    match t.parse::<f64>() {
        Ok(x) if x < 0.0 => Err(format!("{t} is negative: a token count must be ≥ 0")),
        Ok(x) if x.is_finite() && x.fract() == 0.0 && x < 4.0e9 => Ok(x as u64),
        Ok(x) if x.is_finite() && x.fract() != 0.0 => Err(format!("{t} is not a whole number of tokens")),
        Ok(_) => Err(format!("{t} is too large")),
        Err(_) => Err(format!("\"{t}\" is not a number")),
    }
}

fn parse_class(s: &str) -> Result<u8, String> {
    let t = s.trim();
    t.parse::<u8>().map_err(|_| format!("\"{t}\" is not a priority class (an integer 0–255)"))
}

fn session_key(s: &str) -> u64 {
    let t = s.trim();
    if t.is_empty() {
        NO_SESSION
    } else {
        hash_text(t).min(NO_SESSION - 1)
    }
}

/// Ids separated by spaces, commas or semicolons, optionally in brackets: `[1, 2, 3]`, `1 2 3`.
fn parse_id_list(s: &str) -> Result<Vec<u64>, String> {
    let t = s.trim().trim_start_matches('[').trim_end_matches(']');
    t.split([' ', ',', ';', '|'])
        .filter(|x| !x.is_empty())
        .map(|x| x.parse::<u64>().map_err(|_| format!("\"{x}\" is not an id (a non-negative integer)")))
        .collect()
}

fn json_str<T>(v: &Value, parse: impl Fn(&str) -> Result<T, String>) -> Result<T, String> {
    match v {
        Value::String(s) => parse(s),
        Value::Number(n) => parse(&n.to_string()),
        other => Err(format!("expected a number, got {other}")),
    }
}

fn json_len(v: &Value) -> Result<u64, String> {
    if let Some(n) = v.as_u64() {
        return Ok(n);
    }
    json_str(v, parse_len)
}

fn json_ids(v: &Value) -> Result<Vec<u64>, String> {
    match v {
        Value::Array(a) => {
            a.iter().map(|x| x.as_u64().ok_or_else(|| format!("{x} is not an id (a non-negative integer)"))).collect()
        }
        Value::String(s) => parse_id_list(s),
        other => Err(format!("expected a list of ids, got {other}")),
    }
}

/// One segment per block id: `block` tokens each, the last one partial. Every block must hold
/// at least one prompt token; prompt tokens beyond the last block are unique content.
fn blocks(ids: &[u64], prompt: u64, block: u64) -> Result<Vec<Segment>, String> {
    let n = ids.len() as u64;
    if n > 0 && prompt <= block * (n - 1) {
        return Err(format!("{n} blocks of {block} tokens need more than the request's {prompt} prompt tokens"));
    }
    Ok(ids
        .iter()
        .enumerate()
        .map(|(i, &id)| Segment { hash: mix_id(id), tokens: (prompt - block * i as u64).min(block) as u32 })
        .collect())
}

/// `HASH:TOKENS` pairs (hexadecimal hash) separated by spaces or `;`; their tokens may not
/// exceed the prompt's.
pub(crate) fn parse_segments(s: &str, prompt: u64) -> Result<Vec<Segment>, String> {
    let mut out = Vec::new();
    let mut total = 0u64;
    for pair in s.split([' ', ';']).filter(|x| !x.is_empty()) {
        let (h, t) = pair.split_once(':').ok_or_else(|| format!("\"{pair}\" is not HASH:TOKENS"))?;
        let hash = u64::from_str_radix(h, 16).map_err(|_| format!("\"{h}\" is not a hexadecimal hash"))?;
        let tokens = t.parse::<u32>().map_err(|_| format!("\"{t}\" is not a token count"))?;
        total += tokens as u64;
        out.push(Segment { hash, tokens });
    }
    if total > prompt {
        return Err(format!("its {total} tokens are more than the request's {prompt} prompt tokens"));
    }
    Ok(out)
}

/// The `segments` text of `content` (what [`parse_segments`] reads).
pub fn segments_text(content: &[Segment]) -> String {
    content.iter().map(|s| format!("{:x}:{}", s.hash, s.tokens)).collect::<Vec<_>>().join(" ")
}

fn prefix_segment(id: &str, tokens: u64, prompt: u64) -> Result<Vec<Segment>, String> {
    if tokens > prompt {
        return Err(format!("{tokens} is more than the request's {prompt} prompt tokens"));
    }
    if tokens == 0 {
        return Ok(Vec::new());
    }
    Ok(vec![Segment { hash: hash_text(id), tokens: tokens as u32 }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_parse_or_say_why_not() {
        assert_eq!(parse_len(" 12 "), Ok(12));
        assert_eq!(parse_len("12.0"), Ok(12));
        assert_eq!(parse_len("12a"), Err("\"12a\" is not a number".into()));
        assert_eq!(parse_len("-5"), Err("-5 is negative: a token count must be ≥ 0".into()));
        assert_eq!(parse_len("1.5"), Err("1.5 is not a whole number of tokens".into()));
        assert_eq!(parse_len("1e30"), Err("1e30 is too large".into()));
    }

    #[test]
    fn segments_read_back_what_generate_writes_and_errors_say_why() {
        let s = vec![Segment { hash: 0x646d62f478a11fee, tokens: 400 }, Segment { hash: 7, tokens: 12 }];
        let text = segments_text(&s);
        assert_eq!(text, "646d62f478a11fee:400 7:12");
        assert_eq!(parse_segments(&text, 412).unwrap(), s);
        assert_eq!(parse_segments("", 10).unwrap(), vec![]);
        assert_eq!(
            parse_segments(&text, 411).unwrap_err(),
            "its 412 tokens are more than the request's 411 prompt tokens"
        );
        assert_eq!(parse_segments("zz:4", 10).unwrap_err(), "\"zz\" is not a hexadecimal hash");
        assert_eq!(parse_segments("7", 10).unwrap_err(), "\"7\" is not HASH:TOKENS");
    }

    #[test]
    fn blocks_are_full_but_the_last() {
        let s = blocks(&[7, 8, 9], 1100, 512).unwrap();
        assert_eq!(s.iter().map(|x| x.tokens).collect::<Vec<_>>(), vec![512, 512, 76]);
        assert_eq!(s[0].hash, mix_id(7));
        assert!(blocks(&[1, 2, 3], 1024, 512).is_err(), "the third block would be empty");
        assert_eq!(blocks(&[1], 5000, 512).unwrap()[0].tokens, 512, "the rest is unique content");
        assert_eq!(parse_id_list("[1, 2;3 4]").unwrap(), vec![1, 2, 3, 4]);
    }
}
