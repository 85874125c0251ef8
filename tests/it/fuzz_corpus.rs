//! Replays the committed fuzzing seeds (fuzz/seeds/<target>/: the shipped scenarios and traces plus inputs the fuzzers found covering new code) and every input that once crashed a
//! target (fuzz/regressions/<target>/) through the same entry points the cargo-fuzz targets
//! call: none may panic. The fuzzers themselves run with `cargo fuzz run <target>` (see
//! DEVELOPERS.md); this keeps what they found fixed.

use std::path::Path;

fn replay(target: &str, f: fn(&[u8]) -> bool) -> (usize, usize) {
    let mut seen = 0;
    let mut accepted = 0;
    for dir in ["fuzz/seeds", "fuzz/regressions"] {
        let d = crate::common::root().join(dir).join(target);
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        let mut files: Vec<_> = entries.map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
        files.sort();
        for p in files {
            if p.file_name().is_some_and(|n| n == ".gitkeep") {
                continue;
            }
            let data = std::fs::read(&p).unwrap();
            let result = std::panic::catch_unwind(|| f(&data));
            match result {
                Ok(ok) => accepted += ok as usize,
                Err(_) => panic!("{target}: {} panics", rel(&p)),
            }
            seen += 1;
        }
    }
    (seen, accepted)
}

fn rel(p: &Path) -> String {
    p.strip_prefix(crate::common::root()).unwrap_or(p).display().to_string()
}

#[test]
fn scenario_corpus_never_panics() {
    let (seen, accepted) = replay("scenario", servesim_sim::fuzz::scenario);
    assert!(seen >= 20, "{seen} inputs");
    // The shipped scenarios are among the seeds and are valid.
    assert!(accepted >= 10, "{accepted} of {seen} accepted");
}

#[test]
fn trace_corpus_never_panics() {
    let (seen, accepted) = replay("trace", servesim_sim::fuzz::trace);
    assert!(seen >= 8, "{seen} inputs");
    assert!(accepted >= 5, "{accepted} of {seen} accepted");
}

#[test]
fn profile_corpus_never_panics() {
    let (seen, accepted) = replay("profile", servesim_sim::fuzz::profile);
    assert!(seen >= 1, "{seen} inputs");
    assert!(accepted >= 1, "{accepted} of {seen} accepted");
}
