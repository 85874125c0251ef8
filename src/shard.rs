//! Sharding sweeps over machines: `--shard I/N` runs items I−1, I−1+N, I−1+2N, ... of a sweep
//! (candidates of `plan`, variants of `compare`) and writes them to `<kind>-shard-I-of-N.json`;
//! `servesim merge` joins the shards of a sweep into the report the unsharded run prints.
//! Every item's result depends only on the scenario, so the split changes nothing.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::error::{CliError, Result};

/// `--shard I/N` (1-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shard {
    pub index: u32,
    pub count: u32,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Shard, String> {
        let bad = || format!("expected I/N with 1 ≤ I ≤ N, got \"{s}\"");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl Shard {
    /// The item indices of `items` a run with `shard` runs: all without one. A shard's siblings
    /// write into the same folder, so it waits for the folder rather than refuse it.
    pub(crate) fn picked(shard: Option<Shard>, items: usize) -> Vec<usize> {
        match shard {
            Some(sh) => {
                crate::atomic::wait_for_folder_locks();
                sh.select(items)
            }
            None => (0..items).collect(),
        }
    }

    /// What a sweep (`plan`, `compare`, `tune`) does before its work: picks its items
    /// ([`Shard::picked`]) and checks that its outputs (`out`, `report`) can be written, so that
    /// it fails now rather than after the search.
    pub(crate) fn before_sweep(
        shard: Option<Shard>,
        items: usize,
        out: Option<&Path>,
        report: Option<&Path>,
    ) -> Result<Vec<usize>> {
        crate::atomic::check_writable(out, report)?;
        Ok(Shard::picked(shard, items))
    }

    /// The item indices (of `items`) this shard runs.
    pub(crate) fn select(&self, items: usize) -> Vec<usize> {
        (0..items).filter(|i| i % self.count as usize == (self.index - 1) as usize).collect()
    }

    pub(crate) fn file_name(&self, kind: &str) -> String {
        format!("{kind}-shard-{}-of-{}.json", self.index, self.count)
    }
}

/// What a shard writes.
#[derive(Serialize, Deserialize)]
pub(crate) struct ShardFile<H, R> {
    /// "plan" or "compare".
    pub kind: String,
    pub shard: u32,
    pub shards: u32,
    /// The sweep's header: identical in every shard of one sweep.
    pub header: H,
    /// SHA-256 of what decides every result: the resolved scenario, the seeds, the sweep's
    /// settings and the servesim version. Shards merge only when their digests are equal.
    pub digest: String,
    /// (item index, result) pairs.
    pub items: Vec<(usize, R)>,
}

/// The digest of a sweep: SHA-256 over `parts` (the resolved scenario, seeds, settings) and
/// the servesim version, as hex.
pub(crate) fn digest(parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn write<H: Serialize, R: Serialize>(
    dir: &Path,
    shard: Shard,
    kind: &str,
    (header, digest): (H, String),
    items: Vec<(usize, R)>,
) -> Result<PathBuf> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(shard.file_name(kind));
    let f = ShardFile { kind: kind.to_string(), shard: shard.index, shards: shard.count, header, digest, items };
    let json = serde_json::to_string_pretty(&f).expect("shard serialises");
    crate::atomic::write(&path, json + "\n")?;
    Ok(path)
}

/// The shard files in `paths` (folders are searched for `*-shard-*-of-*.json`), sorted.
pub(crate) fn find(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let entries = fs::read_dir(p).map_err(|e| CliError::input(format!("cannot read {}: {e}", p.display())))?;
            for e in entries {
                let path = e.map_err(|e| CliError::input(format!("cannot read {}: {e}", p.display())))?.path();
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if name.contains("-shard-") && name.ends_with(".json") {
                    files.push(path);
                }
            }
        } else if p.is_file() {
            files.push(p.clone());
        } else {
            return Err(CliError::input(format!("{}: no such file or folder", p.display())));
        }
    }
    files.sort();
    files.dedup();
    if files.is_empty() {
        return Err(CliError::input("no shard files (*-shard-I-of-N.json) found in the given folders"));
    }
    Ok(files)
}

/// The kind of a shard file ("plan" or "compare").
pub(crate) fn kind_of(path: &Path) -> Result<String> {
    #[derive(Deserialize)]
    struct Kind {
        kind: String,
    }
    let text = crate::input::read_text(path, "shard file")?;
    let k: Kind = serde_json::from_str(&text)
        .map_err(|e| CliError::input(format!("{}: not a shard file: {e}", path.display())))?;
    Ok(k.kind)
}

/// Reads the shards of one sweep and returns its header and every item's result in item order,
/// checking that they belong together and that every shard and item is there exactly once.
pub(crate) fn join<H: DeserializeOwned + PartialEq, R: DeserializeOwned>(
    files: &[PathBuf],
    kind: &str,
    items_of: impl Fn(&H) -> usize,
) -> Result<(H, Vec<R>, String)> {
    let mut header: Option<H> = None;
    let mut digest: Option<(String, String)> = None;
    let mut shards: Option<u32> = None;
    let mut seen_shards = std::collections::BTreeSet::new();
    let mut items: Vec<Option<R>> = Vec::new();
    for path in files {
        let name = path.display();
        let text = crate::input::read_text(path, "shard file")?;
        let f: ShardFile<H, R> = serde_json::from_str(&text)
            .map_err(|e| CliError::input(format!("{name}: not a {kind} shard file: {e}")))?;
        if f.kind != kind {
            return Err(CliError::input(format!("{name}: a {} shard, not a {kind} shard", f.kind)));
        }
        match shards {
            None => shards = Some(f.shards),
            Some(n) if n != f.shards => {
                return Err(CliError::input(format!("{name}: shard of {} where the others are of {n}", f.shards)))
            }
            _ => {}
        }
        match &digest {
            None => digest = Some((f.digest.clone(), name.to_string())),
            Some((d, first)) if *d != f.digest => {
                return Err(CliError::input(format!(
                    "{name}: from a different sweep than {first}: the resolved scenario, seeds, settings or \
                     servesim version differ (digest {} vs {})",
                    &f.digest[..f.digest.len().min(12)],
                    &d[..d.len().min(12)]
                )))
            }
            _ => {}
        }
        if !seen_shards.insert(f.shard) {
            return Err(CliError::input(format!("{name}: shard {}/{} given twice", f.shard, f.shards)));
        }
        match &header {
            None => {
                items = (0..items_of(&f.header)).map(|_| None).collect();
                header = Some(f.header);
            }
            Some(h) if *h != f.header => {
                return Err(CliError::input(format!("{name}: from a different sweep (scenario or settings differ)")))
            }
            _ => {}
        }
        for (i, r) in f.items {
            let slot = items.get_mut(i).ok_or_else(|| CliError::input(format!("{name}: item {i} out of range")))?;
            if slot.is_some() {
                return Err(CliError::input(format!("{name}: item {i} given twice")));
            }
            *slot = Some(r);
        }
    }
    let n = shards.expect("at least one file");
    let missing: Vec<String> = (1..=n).filter(|i| !seen_shards.contains(i)).map(|i| format!("{i}/{n}")).collect();
    if !missing.is_empty() {
        return Err(CliError::input(format!("missing shards: {}", missing.join(", "))));
    }
    let results: Option<Vec<R>> = items.into_iter().collect();
    let results = results.ok_or_else(|| CliError::input("some items are in no shard"))?;
    Ok((header.expect("at least one file"), results, digest.expect("at least one file").0))
}
