//! Editing a scenario as a TOML document before it is validated: set a dotted key path, merge
//! a table of overrides into a section, deserialise a section with its key path kept.
//!
//! `compare --vary`, plan candidates and instance groups all work on the document rather than
//! on the validated types, so every key that exists — and every key added later — can be
//! varied or overridden without code that knows about it.

use serde::de::DeserializeOwned;

use super::{de, ConfigError};

/// One step of a key path: a table key or an array index.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// Splits `a.b[2].c` into steps; `"quoted.keys"` are not supported (no scenario key has a dot).
/// Why a key path cannot be set.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// Not a key path (`a.b[0].c`).
    #[error("bad key path \"{0}\"")]
    Syntax(String),
    /// An index in brackets that is not a whole number.
    #[error("bad index in key path \"{0}\"")]
    BadIndex(String),
    /// The path indexes a value that is not an array.
    #[error("{at}: not an array, cannot index [{index}]")]
    NotAnArray { at: String, index: usize },
    /// The path indexes past the end of an array.
    #[error("{at}: index {index} out of range (length {len})")]
    OutOfRange { at: String, index: usize, len: usize },
    /// The path goes through a value that is not a table.
    #[error("{at}: is a {found}, not a table")]
    NotATable { at: String, found: &'static str },
}

fn steps(path: &str) -> Result<Vec<Step>, PathError> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(PathError::Syntax(path.to_string()));
        }
        out.push(Step::Key(key.to_string()));
        while let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').ok_or_else(|| PathError::Syntax(path.to_string()))?;
            let i: usize = r[..end].parse().map_err(|_| PathError::BadIndex(path.to_string()))?;
            out.push(Step::Index(i));
            rest = &r[end + 1..];
        }
        if !rest.is_empty() {
            return Err(PathError::Syntax(path.to_string()));
        }
    }
    Ok(out)
}

/// Sets `path` (`a.b[0].c`) to `value` in `doc`, creating missing tables on the way. Errors
/// when the path goes through a value that is not a table or array, or past the end of an
/// array.
pub fn set_path(doc: &mut toml::Table, path: &str, value: toml::Value) -> Result<(), PathError> {
    let steps = steps(path)?;
    let mut cur = doc;
    let mut walked = String::new();
    let mut i = 0;
    loop {
        let Step::Key(key) = &steps[i] else { unreachable!("paths start with a key") };
        walked = de::join_path(&walked, key);
        i += 1;
        if i == steps.len() {
            cur.insert(key.clone(), value);
            return Ok(());
        }
        let mut slot = cur.entry(key.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        while let Some(Step::Index(ix)) = steps.get(i) {
            let toml::Value::Array(a) = slot else {
                return Err(PathError::NotAnArray { at: walked, index: *ix });
            };
            let len = a.len();
            slot = a.get_mut(*ix).ok_or_else(|| PathError::OutOfRange { at: walked.clone(), index: *ix, len })?;
            walked = format!("{walked}[{ix}]");
            i += 1;
            if i == steps.len() {
                *slot = value;
                return Ok(());
            }
        }
        cur = match slot {
            toml::Value::Table(t) => t,
            other => return Err(PathError::NotATable { at: walked, found: other.type_str() }),
        };
    }
}

/// Merges `over` into `base`: keys of `over` replace those of `base`, tables merge key by key —
/// except a tagged table (`kind = "..."`) whose kind changes, which is replaced whole (the old
/// kind's settings mean nothing to the new one).
pub fn merge(base: &mut toml::Table, over: &toml::Table) {
    for (k, v) in over {
        match (base.get_mut(k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o))
                if o.get("kind").is_none_or(|kind| b.get("kind") == Some(kind)) =>
            {
                merge(b, o)
            }
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

/// `over` laid over `base` by the same rule as [`merge`], for a whole section: a section whose
/// `kind` changes is replaced.
pub fn overlay(base: &toml::Table, over: &toml::Table) -> toml::Table {
    match over.get("kind") {
        Some(kind) if base.get("kind") != Some(kind) => over.clone(),
        _ => {
            let mut t = base.clone();
            merge(&mut t, over);
            t
        }
    }
}

/// Deserialises `table` as a `T`, naming the key under `path` in any error.
pub fn from_table<T: DeserializeOwned>(table: toml::Table, path: &str) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
        let inner = e.path().to_string();
        let inner = if inner == "." { String::new() } else { inner };
        let msg = e.into_inner().to_string();
        let msg = msg.lines().next().unwrap_or("").trim_end().to_string();
        let (p, m) = match de::split_marked(&msg) {
            Some((i2, m)) => (de::join_path(&de::join_path(path, &inner), i2), m.to_string()),
            None => (de::join_path(path, &inner), msg),
        };
        ConfigError::at(&p, m)
    })
}

/// Serialises a section into a table (for merging overrides into it).
pub fn to_table<T: serde::Serialize>(v: &T) -> toml::Table {
    toml::Table::try_from(v).expect("sections serialise to tables")
}

/// Parses a value as written on a command line: TOML when it is TOML (`128`, `0.5`, `true`,
/// `"x"`, `{ kind = "poisson", rate = 3 }`, `[1, 2]`), else a bare string (`h100-sxm`).
pub fn parse_value(text: &str) -> toml::Value {
    let t = text.trim();
    match format!("v = {t}").parse::<toml::Table>() {
        Ok(mut tab) => tab.remove("v").expect("parsed the key"),
        Err(_) => toml::Value::String(t.to_string()),
    }
}

/// Splits `a,b,{ x = 1, y = 2 },[1, 2]` at top-level commas (not inside braces, brackets or
/// quotes).
pub fn split_values(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut cur = String::new();
    for c in text.chars() {
        match quote {
            Some(q) => {
                if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' => quote = Some(c),
                '{' | '[' => depth += 1,
                '}' | ']' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(std::mem::take(&mut cur).trim().to_string());
                    continue;
                }
                _ => {}
            },
        }
        cur.push(c);
    }
    out.push(cur.trim().to_string());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(s: &str) -> toml::Table {
        s.parse().unwrap()
    }

    #[test]
    fn set_creates_tables_and_indexes_arrays() {
        let mut d = doc("[a]\nx = 1\n[[g]]\nn = 1\n[[g]]\nn = 2\n");
        set_path(&mut d, "a.y", toml::Value::Integer(3)).unwrap();
        set_path(&mut d, "b.c.d", toml::Value::Boolean(true)).unwrap();
        set_path(&mut d, "g[1].n", toml::Value::Integer(9)).unwrap();
        assert_eq!(d["a"]["y"].as_integer(), Some(3));
        assert_eq!(d["b"]["c"]["d"].as_bool(), Some(true));
        assert_eq!(d["g"][1]["n"].as_integer(), Some(9));
        let e = set_path(&mut d, "a.x.z", toml::Value::Integer(1)).unwrap_err();
        assert_eq!(e, PathError::NotATable { at: "a.x".into(), found: "integer" });
        assert_eq!(e.to_string(), "a.x: is a integer, not a table");
        let e = set_path(&mut d, "g[5].n", toml::Value::Integer(1)).unwrap_err();
        assert_eq!(e.to_string(), "g: index 5 out of range (length 2)");
        assert_eq!(set_path(&mut d, "a..b", toml::Value::Integer(1)), Err(PathError::Syntax("a..b".into())));
        assert_eq!(set_path(&mut d, "g[x]", toml::Value::Integer(1)), Err(PathError::BadIndex("g[x]".into())));
        assert_eq!(
            set_path(&mut d, "a.x[0]", toml::Value::Integer(1)),
            Err(PathError::NotAnArray { at: "a.x".into(), index: 0 })
        );
    }

    #[test]
    fn merge_replaces_tagged_tables_whose_kind_changes() {
        let mut d = doc("r = { kind = \"a\", x = 1 }\ns = { kind = \"a\", x = 1, y = 2 }\nt = { p = 1, q = 2 }");
        let o = doc("r = { kind = \"b\", z = 3 }\ns = { kind = \"a\", x = 5 }\nt = { q = 7 }");
        merge(&mut d, &o);
        assert_eq!(d["r"].as_table().unwrap().len(), 2);
        assert_eq!(d["s"]["x"].as_integer(), Some(5));
        assert_eq!(d["s"]["y"].as_integer(), Some(2));
        assert_eq!(d["t"]["p"].as_integer(), Some(1));
        assert_eq!(d["t"]["q"].as_integer(), Some(7));
    }

    #[test]
    fn values_parse_as_toml_or_bare_strings() {
        assert_eq!(parse_value("128"), toml::Value::Integer(128));
        assert_eq!(parse_value("0.5"), toml::Value::Float(0.5));
        assert_eq!(parse_value("h100-sxm"), toml::Value::String("h100-sxm".into()));
        assert_eq!(parse_value("\"x,y\""), toml::Value::String("x,y".into()));
        assert!(parse_value("{ kind = \"poisson\", rate = 3 }").is_table());
        assert_eq!(
            split_values("1,2, {a = 1, b = 2},\"x,y\",[1,2]"),
            vec!["1", "2", "{a = 1, b = 2}", "\"x,y\"", "[1,2]"]
        );
    }
}
