//! Function length, as TigerBeetle's tidy rule has it: a non-test function of more than 70 lines
//! is an error, unless `tests/long-functions.txt` lists it, and a listed one may only shrink.
//! The list holds the functions that were longer when the rule came in; when one is shortened
//! its entry must follow (lowered, or removed once it fits), so the list never hides growth.
//!
//! The scan reads rustfmt-formatted sources line by line: a function starts at a line whose
//! code begins with `fn` (after `pub`, `pub(crate)`, `const`, `async`, `unsafe`, `extern`) and
//! ends at the first later line that is its closing brace at the same indentation. Test code
//! (`#[cfg(test)]` modules, `#[test]` functions, files under `tests/` and `benches/`) is left out.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

const LIMIT: usize = 70;
const LIST: &str = "tests/long-functions.txt";

/// One function's (file, name, lines).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Function {
    file: String,
    name: String,
    lines: usize,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    let mut paths: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    paths.sort();
    for p in paths {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            if !matches!(name.as_str(), "tests" | "benches" | "target" | "fuzz" | "examples") && !name.starts_with('.')
            {
                rust_files(&p, out);
            }
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

/// The function a line declares, if any: its name.
fn declared(code: &str) -> Option<&str> {
    let mut rest = code;
    loop {
        let word_end = rest.find([' ', '(']).unwrap_or(rest.len());
        let word = &rest[..word_end];
        if word == "fn" {
            let after = rest[2..].trim_start();
            let end = after.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(after.len());
            return (end > 0).then(|| &after[..end]);
        }
        let skip = match word {
            "pub" | "const" | "async" | "unsafe" | "default" => {
                let after = &rest[word_end..];
                // `pub(crate)`, `pub(in path)`.
                if word == "pub" && after.starts_with('(') {
                    word_end + after.find(')')? + 1
                } else {
                    word_end
                }
            }
            "extern" => {
                // `extern "C" fn`.
                let after = rest[word_end..].trim_start();
                let abi = match after.strip_prefix('"') {
                    Some(quoted) => quoted.find('"')? + 2,
                    None => 0,
                };
                rest.len() - after.len() + abi
            }
            _ => return None,
        };
        rest = rest[skip..].trim_start();
    }
}

/// Every non-test function of one file with its length in lines (declaration to closing brace).
fn functions(file: &str, text: &str) -> Vec<Function> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut attrs_test = false;
    while i < lines.len() {
        let line = lines[i];
        let code = line.trim_start();
        let indent = line.len() - code.len();
        if code.starts_with("#[cfg(test)]") || code.starts_with("#[test]") {
            attrs_test = true;
            i += 1;
            continue;
        }
        if code.starts_with("#[") || code.starts_with("///") || code.starts_with("//") || code.is_empty() {
            i += 1;
            continue;
        }
        let skip_item = std::mem::take(&mut attrs_test);
        // The end of the item that starts here: its closing brace at the same indentation, or
        // the line itself when it closes on it (`fn f() -> u32 { 1 }`, `fn f();`).
        let end = |from: usize| -> usize {
            let mut j = from;
            while j < lines.len() {
                let l = lines[j];
                let t = l.trim_end();
                if j == from && (t.ends_with('}') && t.contains('{') || t.ends_with(';')) {
                    return j;
                }
                if j > from && l.len() - l.trim_start().len() == indent && t.trim_start().starts_with('}') {
                    return j;
                }
                if j > from && l.len() - l.trim_start().len() == indent && t.ends_with(';') {
                    // A declaration without a body (a trait's), its signature over several lines.
                    return j;
                }
                j += 1;
            }
            lines.len() - 1
        };
        let opens_item =
            code.starts_with("mod ") || code.starts_with("pub mod ") || code.starts_with("pub(crate) mod ");
        if skip_item && (opens_item || declared(code).is_some()) {
            // A test module or a test function: skip all of it.
            i = end(i) + 1;
            continue;
        }
        if let Some(name) = declared(code) {
            let last = end(i);
            let body = lines[i..=last].iter().any(|l| l.contains('{'));
            if body {
                out.push(Function { file: file.to_string(), name: name.to_string(), lines: last - i + 1 });
            }
            // Nested functions are counted within their parent; scanning goes on inside, so a
            // long nested one is named too.
        }
        i += 1;
    }
    out
}

fn all_functions(root: &Path) -> Vec<Function> {
    let mut files = Vec::new();
    for dir in ["src", "sim/src", "aic/src", "calibrate/src", "kernels/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut out = Vec::new();
    for p in files {
        let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        out.extend(functions(&rel, &fs::read_to_string(&p).unwrap()));
    }
    out
}

/// `tests/long-functions.txt`: `lines path name` per line, `#` comments.
fn allowed(text: &str) -> BTreeMap<(String, String), usize> {
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parts: Vec<&str> = line.split_whitespace().collect();
        assert!(parts.len() == 3, "{LIST}:{}: expected `lines path name`, found {line:?}", n + 1);
        let lines: usize =
            parts[0].parse().unwrap_or_else(|_| panic!("{LIST}:{}: {:?} is not a count", n + 1, parts[0]));
        out.insert((parts[1].to_string(), parts[2].to_string()), lines);
    }
    out
}

/// What breaks the rule, one line each.
fn violations(found: &[Function], allowed: &BTreeMap<(String, String), usize>) -> Vec<String> {
    let mut longest: BTreeMap<(String, String), usize> = BTreeMap::new();
    for f in found.iter().filter(|f| f.lines > LIMIT) {
        let e = longest.entry((f.file.clone(), f.name.clone())).or_default();
        *e = (*e).max(f.lines);
    }
    let mut out = Vec::new();
    for ((file, name), &lines) in &longest {
        match allowed.get(&(file.clone(), name.clone())) {
            None => out.push(format!("{file}: fn {name} has {lines} lines (limit {LIMIT}): split it")),
            Some(&max) if lines > max => out.push(format!(
                "{file}: fn {name} grew to {lines} lines; {LIST} allows it {max}, and may only shrink: split it"
            )),
            Some(&max) if lines < max => out.push(format!(
                "{file}: fn {name} is {lines} lines now: lower its entry in {LIST} from {max} to {lines}"
            )),
            Some(_) => {}
        }
    }
    for (file, name) in allowed.keys() {
        if !longest.contains_key(&(file.clone(), name.clone())) {
            out.push(format!("{file}: fn {name} is within {LIMIT} lines (or gone): remove its entry from {LIST}"));
        }
    }
    out
}

#[test]
fn no_function_grows_past_70_lines_and_the_allow_list_only_shrinks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = all_functions(root);
    // The scan sees the code: it found the functions it must (guards against a scan that
    // silently finds nothing).
    assert!(found.len() > 1000, "only {} functions found", found.len());
    assert!(found.iter().any(|f| f.file == "src/main.rs" && f.name == "main"));
    let list = fs::read_to_string(root.join(LIST)).unwrap_or_default();
    let bad = violations(&found, &allowed(&list));
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_scan_measures_functions_and_skips_tests() {
    let text = "\
pub(crate) fn a(x: u32) -> u32 {
    x + 1
}

fn one_line() -> u32 { 1 }

impl T {
    pub fn b(
        &self,
    ) -> u32
    where
        Self: Sized,
    {
        let s = \"}\";
        2
    }
    fn declared_only(&self);
}

#[test]
fn a_test() {
    let x = 1;
}

#[cfg(test)]
mod tests {
    fn helper() {
        let y = 2;
    }
}
";
    let got: Vec<(String, usize)> = functions("f.rs", text).into_iter().map(|f| (f.name, f.lines)).collect();
    assert_eq!(got, vec![("a".to_string(), 3), ("one_line".to_string(), 1), ("b".to_string(), 9)]);
    let long = |name: &str, lines| Function { file: "f.rs".into(), name: name.into(), lines };
    let list = allowed("# comment\n100 f.rs big\n90 f.rs shrunk\n80 f.rs fixed\n");
    let bad = violations(&[long("big", 101), long("shrunk", 85), long("new", 71), long("ok", 70)], &list);
    assert_eq!(bad.len(), 4, "{bad:?}");
    assert!(bad[0].contains("fn big grew to 101"), "{bad:?}");
    assert!(bad[1].contains("fn new has 71 lines"), "{bad:?}");
    assert!(bad[2].contains("lower its entry") && bad[2].contains("from 90 to 85"), "{bad:?}");
    assert!(bad[3].contains("fn fixed is within 70") && bad[3].contains("remove its entry"), "{bad:?}");
}
