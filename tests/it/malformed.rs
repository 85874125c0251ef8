//! Every file in tests/malformed/ is a broken scenario whose first line says
//! `# expect: <message>`. The binary must exit with code 2 and print that message, naming the
//! file — never panic.

use crate::common::*;

#[test]
fn each_malformed_scenario_gets_its_own_message_and_exit_code_2() {
    let dir = root().join("tests/malformed");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 10, "at least 10 malformed scenarios");
    let mut messages = std::collections::HashSet::new();
    for f in &files {
        let text = read(f);
        let expect = text.lines().next().unwrap().strip_prefix("# expect: ").expect("first line is # expect: ...");
        let rel = f.strip_prefix(root()).unwrap().to_str().unwrap();
        let o = servesim(&["simulate", "--scenario", rel, "--out", "target/test-outputs/malformed", "--quiet"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{rel}: exit code; stderr: {err}");
        assert!(err.starts_with(&format!("error: {rel}: ")), "{rel}: message names the file: {err}");
        assert!(err.contains(expect), "{rel}: expected «{expect}» in «{err}»");
        assert!(!err.contains("panicked"), "{rel}: {err}");
        assert_eq!(err.lines().count(), 1, "{rel}: one line: {err}");
        messages.insert(err);
    }
    assert_eq!(messages.len(), files.len(), "every file has its own message");
}

#[test]
fn a_missing_file_is_named() {
    let o = servesim(&["simulate", "--scenario", "scenarios/nope.toml"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("cannot read scenario scenarios/nope.toml"), "{e}");
}

#[test]
fn bad_flags_exit_2() {
    let o = servesim(&["simulate", "--seed", "minus-one"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("invalid value 'minus-one' for '--seed"), "{}", stderr(&o));
    let o = servesim(&["memory", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--tp", "3"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--tp: must divide the model's 32 attention heads, got 3"));
    let o = servesim(&["memory", "--model", "gpt-5", "--gpu", "h100-sxm"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--model: unknown preset \"gpt-5\""));
}
