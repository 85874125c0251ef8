//! The database's layout: systems, frameworks, versions and their files.
//!
//! ```text
//!   <root>/<system>/<family>/<framework>/<version>/<table>_perf.parquet
//!     family: gemm, attention, comm (framework = vllm | sglang | trtllm | nccl), moe, mla, ...
//! ```
//! `<root>` is `aiconfigurator_core/systems/data` of the `aiconfigurator-core` package (or a
//! copy of part of it). The library never opens files: a [`Files`] (the binary's, over a
//! folder) lists folders and reads files, and every file read is remembered with its SHA-256
//! for the profile's provenance.

use std::cell::RefCell;
use std::cmp::Ordering;

use servesim_sim::cost::profile::SourceFile;
use sha2::{Digest, Sha256};

use crate::frame::Frame;

/// Access to a database's files, relative to its root.
pub trait Files {
    /// The entries of a folder (names only, any order); empty when it does not exist.
    fn list(&self, dir: &str) -> Vec<String>;
    /// A file's bytes, or why it cannot be read.
    fn read(&self, path: &str) -> Result<Vec<u8>, crate::Error>;
    /// The root, as a user would recognise it (for messages).
    fn root(&self) -> String;
}

/// The engines whose kernels the database measured.
pub(crate) const FRAMEWORKS: [&str; 3] = ["vllm", "sglang", "trtllm"];

/// A database: its files, and the files read so far.
pub struct Db<'a> {
    files: &'a dyn Files,
    read: RefCell<Vec<SourceFile>>,
}

/// A system, framework and version whose GEMM and attention tables exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    pub(crate) system: String,
    pub(crate) framework: String,
    pub(crate) version: String,
}

impl<'a> Db<'a> {
    pub fn new(files: &'a dyn Files) -> Db<'a> {
        Db { files, read: RefCell::new(Vec::new()) }
    }

    pub fn root(&self) -> String {
        self.files.root()
    }

    /// Systems with at least one GEMM table, sorted.
    pub fn systems(&self) -> Vec<String> {
        let mut s: Vec<String> =
            self.files.list("").into_iter().filter(|sys| !self.files.list(&format!("{sys}/gemm")).is_empty()).collect();
        s.sort();
        s
    }

    /// Frameworks of a system with GEMM and attention tables.
    pub fn frameworks(&self, system: &str) -> Vec<String> {
        FRAMEWORKS.iter().filter(|f| !self.versions(system, f).is_empty()).map(|f| f.to_string()).collect()
    }

    /// Versions of a framework on a system that have both GEMM and attention tables, oldest
    /// first.
    pub fn versions(&self, system: &str, framework: &str) -> Vec<String> {
        let gemm = self.files.list(&format!("{system}/gemm/{framework}"));
        let attn = self.files.list(&format!("{system}/attention/{framework}"));
        let mut v: Vec<String> = gemm.into_iter().filter(|x| attn.contains(x)).collect();
        v.sort_by(|a, b| version_cmp(a, b));
        v
    }

    /// Versions of a folder `<system>/<family>/<framework>`, oldest first.
    pub fn folder_versions(&self, system: &str, family: &str, framework: &str) -> Vec<String> {
        let mut v = self.files.list(&format!("{system}/{family}/{framework}"));
        v.sort_by(|a, b| version_cmp(a, b));
        v
    }

    /// Checks a system, framework and version (the newest when None), listing what there is
    /// when one is missing.
    pub fn select(&self, system: &str, framework: &str, version: Option<&str>) -> Result<Selection, crate::Error> {
        let systems = self.systems();
        if systems.is_empty() {
            return Err(crate::Error::NotInDatabase(format!(
                "{}: no kernel tables here (expected <system>/gemm/<framework>/<version>/)",
                self.root()
            )));
        }
        if !systems.iter().any(|s| s == system) {
            return Err(crate::Error::NotInDatabase(format!(
                "system {system} is not in the database at {} (it has {})",
                self.root(),
                systems.join(", ")
            )));
        }
        if !FRAMEWORKS.contains(&framework) {
            return Err(crate::Error::NotInDatabase(format!(
                "framework {framework} is not one of {}",
                FRAMEWORKS.join(", ")
            )));
        }
        let versions = self.versions(system, framework);
        if versions.is_empty() {
            return Err(crate::Error::NotInDatabase(format!(
                "{system} has no {framework} GEMM and attention tables (it has frameworks {})",
                or_none(&self.frameworks(system))
            )));
        }
        let version = match version {
            None => versions.last().expect("non-empty").clone(),
            Some(v) if versions.iter().any(|x| x == v) => v.to_string(),
            Some(v) => {
                return Err(crate::Error::NotInDatabase(format!(
                    "{system} has no {framework} version {v} (it has {})",
                    versions.join(", ")
                )));
            }
        };
        Ok(Selection { system: system.into(), framework: framework.into(), version })
    }

    /// Reads the named columns of a table, remembering the file for the provenance.
    pub fn frame(&self, path: &str, want: &[&str]) -> Result<Frame, crate::Error> {
        let bytes = self.files.read(path)?;
        let sha = Sha256::digest(&bytes);
        let sha256 = sha.iter().map(|b| format!("{b:02x}")).collect();
        let f = Frame::read(path, bytes, want)?;
        let mut read = self.read.borrow_mut();
        if !read.iter().any(|s| s.path == path) {
            read.push(SourceFile { path: path.to_string(), sha256, rows: f.rows as u64 });
        }
        Ok(f)
    }

    /// Whether a file exists (its folder lists it).
    pub fn exists(&self, path: &str) -> bool {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        self.files.list(dir).iter().any(|n| n == name)
    }

    /// Every file read so far, in the order first read.
    pub fn files_read(&self) -> Vec<SourceFile> {
        self.read.borrow().clone()
    }
}

/// The most frequent of the values (ties: the first in order): the kernel a table measured
/// most, where it holds several for one shape.
pub(crate) fn most_rows<'a>(it: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for k in it {
        *counts.entry(k).or_default() += 1;
    }
    counts.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map(|(k, _)| *k)
}

fn or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Orders versions like `0.5.6.post2`, `1.3.0rc20`, `0.24.0` by their numeric runs.
pub(crate) fn version_cmp(a: &str, b: &str) -> Ordering {
    fn parts(s: &str) -> Vec<(u64, String)> {
        let mut out = Vec::new();
        let mut num = String::new();
        let mut text = String::new();
        for c in s.chars() {
            if c.is_ascii_digit() {
                if !text.is_empty() && num.is_empty() {
                    out.push((0, std::mem::take(&mut text)));
                }
                num.push(c);
            } else {
                if !num.is_empty() {
                    out.push((num.parse().unwrap_or(u64::MAX), std::mem::take(&mut text)));
                    num.clear();
                }
                if c != '.' {
                    text.push(c);
                }
            }
        }
        if !num.is_empty() {
            out.push((num.parse().unwrap_or(u64::MAX), text));
        }
        out
    }
    let (pa, pb) = (parts(a), parts(b));
    for (x, y) in pa.iter().zip(&pb) {
        match x.0.cmp(&y.0) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    pa.len().cmp(&pb.len()).then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_by_their_numbers() {
        let mut v = vec!["0.24.0", "0.5.14", "0.5.6.post2", "0.14.0", "0.5.10"];
        v.sort_by(|a, b| version_cmp(a, b));
        assert_eq!(v, ["0.5.6.post2", "0.5.10", "0.5.14", "0.14.0", "0.24.0"]);
        assert_eq!(version_cmp("1.3.0rc20", "1.3.0rc5"), Ordering::Greater);
        assert_eq!(version_cmp("2.27.3", "2.29.2"), Ordering::Less);
    }
}
