//! Every input in tests/hostile/ (listed with its command in tests/hostile/cases.toml), run
//! under `ulimit -v 2000000` (2 GB of address space): each ends with exit code 0, 2 or 3 and a
//! message naming the key or line at fault — no abort, no panic, no run that fills memory.

use std::path::PathBuf;
use std::process::Command;

use crate::common::*;

#[derive(serde::Deserialize)]
struct Cases {
    case: Vec<Case>,
}

#[derive(serde::Deserialize)]
struct Case {
    args: Vec<String>,
    code: i32,
    message: String,
}

/// Address space allowed to each run, KiB (the issue's `ulimit -v 2000000`).
const ULIMIT_V_KIB: u64 = 2_000_000;

#[cfg(unix)]
#[test]
fn hostile_inputs_end_with_a_clear_message_under_a_2_gb_address_space() {
    let dir: PathBuf = root().join("tests/hostile");
    let cases: Cases = toml::from_str(&read(&dir.join("cases.toml"))).unwrap();
    assert!(cases.case.len() >= 20, "the issue's examples and each class");
    let out = out_dir("hostile_inputs");
    let mut failures = Vec::new();
    for (i, c) in cases.case.iter().enumerate() {
        let o = out.join(format!("case{i}"));
        std::fs::create_dir_all(&o).unwrap();
        let args: Vec<String> = c.args.iter().map(|a| a.replace("{out}", o.to_str().unwrap())).collect();
        let r = Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -v {ULIMIT_V_KIB} && exec \"$0\" \"$@\""))
            .arg(env!("CARGO_BIN_EXE_servesim"))
            .args(&args)
            .current_dir(&dir)
            .output()
            .unwrap();
        let err = stderr(&r);
        let code = r.status.code();
        let ok = code == Some(c.code)
            && [0, 2, 3].contains(&c.code)
            && err.contains(&c.message)
            && !err.contains("panicked")
            && (c.code == 0 || err.lines().any(|l| l.starts_with("error: ")));
        if !ok {
            failures.push(format!("servesim {}: exit {code:?} (want {}), stderr:\n{err}", args.join(" "), c.code));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases:\n{}", failures.len(), cases.case.len(), failures.join("\n"));
}
