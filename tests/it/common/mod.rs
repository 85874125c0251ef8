//! Helpers shared by the end-to-end tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use servesim_sim::engine::{self, RunOutput};
use servesim_sim::Scenario;

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the `servesim` binary with `args` from the repository root.
pub fn servesim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_servesim")).args(args).current_dir(root()).output().expect("servesim runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Parses and validates scenario text, panicking with the message on error. The loads of these
/// tests were sized for the CPU overhead of Vidur's 2023 vLLM (806 µs + 37.5 µs per sequence,
/// not overlapped); a scenario that names no `cost.overhead` gets that one, so what they test
/// (a policy, a router, an invariant under pressure) does not move when the default engine's
/// overhead is re-measured.
pub fn scenario(src: &str) -> Scenario {
    let src = &pin_overhead(src);
    Scenario::from_toml(src, "test").unwrap_or_else(|e| panic!("bad test scenario: {e}\n{src}"))
}

/// `src` with `overhead = "vidur-2023"` in its `[cost]` section unless it names one.
pub fn pin_overhead(src: &str) -> String {
    if src.contains("overhead =") || src.contains("kind = \"linear\"") {
        return src.to_string();
    }
    let line = "overhead = \"vidur-2023\"\n";
    match src.find("[cost]\n") {
        Some(i) => format!("{}{line}{}", &src[..i + 7], &src[i + 7..]),
        None => format!("{src}\n[cost]\n{line}"),
    }
}

pub fn run(src: &str) -> RunOutput {
    engine::run(&scenario(src))
}

/// Runs `src` with every invariant checked after every event (`Simulation::check_invariants`),
/// time never going back, and conservation at the end; returns the output.
pub fn run_checked(src: &str) -> RunOutput {
    let mut sim = engine::Simulation::new(&scenario(src));
    let mut last = sim.now();
    while sim.step() {
        assert!(sim.now() >= last, "time went backwards");
        last = sim.now();
        sim.check_invariants();
    }
    let out = sim.finish();
    let c = &out.summary.requests;
    assert_eq!(c.arrived, c.finished + c.rejected + c.timed_out + c.lost + c.in_flight, "conservation: {c:?}");
    out
}

/// A llama-3-8b on one H100 serving `workload` (a `[workload]` body), with extra sections.
pub fn llama8b(workload: &str, extra: &str) -> String {
    format!("[model]\npreset = \"llama-3-8b\"\n[gpu]\npreset = \"h100-sxm\"\n{extra}\n[workload]\n{workload}\n")
}

/// A temporary output folder under target/, unique per test name.
pub fn out_dir(name: &str) -> PathBuf {
    let d = root().join("target").join("test-outputs").join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Writes scenario `text` as `dir/name`, creating `dir`; returns the path as a string.
pub fn scenario_file(dir: &Path, name: &str, text: &str) -> String {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path.display().to_string()
}

pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `servesim plan --scenario SCENARIO --format json --quiet --out OUT`, which must succeed: its JSON.
pub fn plan_json(scenario: &str, out: &Path) -> serde_json::Value {
    let o = servesim(&["plan", "--scenario", scenario, "--format", "json", "--quiet", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).expect("plan --format json prints JSON")
}
