//! The reliability issue's classes, one test each, each failing without its fix: signals stop
//! a run like `--time-limit` with complete files, a stopped run says so on stdout's first line,
//! write errors on stdout are exit 1 (not a panic), a bad `RAYON_NUM_THREADS` is one line, an
//! output folder is locked while a run writes it, an output never replaces an input or another
//! output, FIFOs / `-` / devices as traces are read once with bounded lines, the time series is
//! bounded, and `--time-limit` ends a command blocked on its input.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

fn small(requests: u64) -> String {
    llama8b(
        &format!(
            "requests = {requests}\narrival = {{ kind = \"poisson\", rate = 20 }}\n\
             prompt_tokens = {{ kind = \"fixed\", value = 100 }}\noutput_tokens = {{ kind = \"fixed\", value = 10 }}"
        ),
        "[cost]\noverhead = \"vidur-2023\"\n",
    )
}

/// No hidden file (a temporary `.NAME.tmp-PID`) is left in `dir`.
fn assert_no_temporaries(dir: &std::path::Path) {
    let names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().all(|n| !n.starts_with('.')), "no temporaries: {names:?}");
}

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_servesim"));
    c.current_dir(root());
    c
}

/// `simulate --scenario path --out out`, sent `sig` `after_ms` after its start: its output and
/// the seconds it took to end after the signal.
#[cfg(unix)]
fn simulate_signalled(path: &str, out: &std::path::Path, sig: i32, after_ms: u64) -> (std::process::Output, f64) {
    let child = bin()
        .args(["simulate", "--scenario", path, "--out", out.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(after_ms));
    let sent = Instant::now();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
    let o = child.wait_with_output().unwrap();
    (o, sent.elapsed().as_secs_f64())
}

#[cfg(unix)]
#[test]
fn sigterm_stops_a_run_with_complete_files_marked_stopped_and_exit_3() {
    let dir = out_dir("rel_sigterm");
    // About 2 million requests: several seconds, so the signal comes mid-run.
    let text = small(0).replace("requests = 0", "duration_s = 100000");
    let path = scenario_file(&dir, "s.toml", &format!("name = \"sig\"\n{text}"));
    let out = dir.join("out");
    let (o, _) = simulate_signalled(&path, &out, libc::SIGTERM, 1500);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("stopped: SIGTERM arrived before the work was done"), "{}", stderr(&o));
    assert!(stdout(&o).lines().next().unwrap_or("").starts_with("STOPPED EARLY (SIGTERM)"), "{}", stdout(&o));
    assert!(stdout(&o).contains("met so far, run stopped early") || stdout(&o).contains("MISSED so far"));
    let summary: serde_json::Value = serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    assert_eq!(summary["stopped"]["reason"], "SIGTERM");
    // requests.csv is whole: every line has the header's field count, and it ends with a newline.
    let csv = read(&out.join("requests.csv"));
    let fields = csv.lines().next().unwrap().split(',').count();
    assert!(csv.ends_with('\n') && csv.lines().all(|l| l.split(',').count() == fields));
    assert_no_temporaries(&out);
}

#[cfg(unix)]
#[test]
fn sigterm_stops_a_command_blocked_opening_a_fifo_within_its_grace() {
    // A trace FIFO nobody writes: `open` blocks, no loop ever checks the stop flag. The watchdog
    // ends the process 2 s after the signal, exit 3, saying why; no output is left half written.
    let dir = out_dir("rel_sigterm_fifo");
    make_fifo(&dir, "never.fifo");
    let path = scenario_file(
        &dir,
        "s.toml",
        &llama8b("trace = { path = \"never.fifo\", format = \"csv\" }", "[cost]\noverhead = \"vidur-2023\"\n"),
    );
    let out = dir.join("out");
    for (sig, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT (Ctrl-C)")] {
        let (o, took) = simulate_signalled(&path, &out, sig, 500);
        assert!((1.9..4.0).contains(&took), "{name}: stopped {took:.2} s after the signal");
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("stopped: {name} arrived and the command had not stopped 2 s later")),
            "{}",
            stderr(&o)
        );
        assert!(stdout(&o).starts_with("STOPPED:"), "{}", stdout(&o));
        assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none(), "nothing half written");
    }
}

#[test]
fn a_run_stopped_by_its_event_budget_says_so_on_stdouts_first_line() {
    let dir = out_dir("rel_budget");
    let path = scenario_file(&dir, "s.toml", &format!("{}[run]\nmax_events = 5000\n", small(2000)));
    let report = dir.join("r.html");
    let o = servesim(&[
        "simulate",
        "--scenario",
        &path,
        "--out",
        dir.join("o").to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(3));
    let first = stdout(&o).lines().next().unwrap_or("").to_string();
    assert!(first.starts_with("STOPPED EARLY (run.max_events reached) after 5,000 events"), "{first}");
    assert!(!stdout(&o).contains("target 99.00%: met)"), "{}", stdout(&o));
    // The report gives no plain verdict either: only what held until the run stopped.
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("so far, run stopped early (event_budget)</td>"), "{html}");
    assert!(!html.contains(">met</td>") && !html.contains(">missed</td>"));
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_stdout_is_exit_1_with_a_message_not_a_panic() {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let o = bin().args(["memory", "--model", "llama-3-8b", "--gpu", "h100-sxm"]).stdout(full).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(stderr(&o), "error: writing to standard output: No space left on device (os error 28)\n");
}

#[test]
fn rayon_num_threads_out_of_range_is_one_clear_line() {
    let o = bin()
        .args(["memory", "--model", "llama-3-8b", "--gpu", "h100-sxm"])
        .env("RAYON_NUM_THREADS", "100000")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "error: RAYON_NUM_THREADS: must be a whole number from 0 (one per core) to 1024, got \"100000\"\n"
    );
    // Any thread count in range gives the same bytes.
    let a = bin()
        .args(["memory", "--model", "llama-3-8b", "--gpu", "h100-sxm"])
        .env("RAYON_NUM_THREADS", "3")
        .output()
        .unwrap();
    let b = servesim(&["memory", "--model", "llama-3-8b", "--gpu", "h100-sxm"]);
    assert!(a.status.success() && a.stdout == b.stdout);
}

#[test]
fn an_output_folder_in_use_is_refused_and_an_output_never_replaces_an_input() {
    let dir = out_dir("rel_lock");
    let path = scenario_file(&dir, "s.toml", &small(50));
    let out = dir.join("o");
    std::fs::create_dir_all(&out).unwrap();
    // Another process holds the folder's lock (as a running servesim does).
    let holder = std::fs::File::open(&out).unwrap();
    holder.lock().unwrap();
    let o = servesim(&["simulate", "--scenario", &path, "--out", out.to_str().unwrap(), "--quiet"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is in use by another servesim run"), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "nothing written");
    holder.unlock().unwrap();
    // The scenario as the output folder's scenario.toml: refused, the scenario untouched.
    let inside = out.join("scenario.toml");
    std::fs::write(&inside, small(50)).unwrap();
    let o = servesim(&["simulate", "--scenario", inside.to_str().unwrap(), "--out", out.to_str().unwrap(), "--quiet"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("scenario.toml: it is this run's scenario; choose another output path"),
        "{}",
        stderr(&o)
    );
    assert_eq!(read(&inside), small(50));
    // The report over one of the run's own outputs: refused, summary.json kept.
    let o2 = dir.join("o2");
    let report = o2.join("summary.json");
    let o = servesim(&[
        "simulate",
        "--scenario",
        &path,
        "--out",
        o2.to_str().unwrap(),
        "--quiet",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("twice"), "{}", stderr(&o));
    assert!(read(&report).starts_with('{'), "summary.json is still JSON");
}

/// A FIFO `dir/name` (the folder is created).
#[cfg(unix)]
fn make_fifo(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let fifo = dir.join(name);
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    fifo
}

const TRACE: &str = "arrival_s,prompt_tokens,output_tokens\r\n0,100,10\r\n0.5,100,10\r\n1,100,10\r\n";

#[cfg(unix)]
#[test]
fn a_fifo_stdin_or_device_as_a_trace_is_read_once_with_bounded_lines() {
    let dir = out_dir("rel_fifo");
    let fifo = make_fifo(&dir, "trace.fifo");
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(fifo, format!("\u{feff}{TRACE}")).unwrap())
    };
    let path = scenario_file(
        &dir,
        "s.toml",
        &llama8b("trace = { path = \"trace.fifo\", format = \"csv\" }", "[cost]\noverhead = \"vidur-2023\"\n"),
    );
    let o = servesim(&["simulate", "--scenario", &path, "--out", dir.join("o").to_str().unwrap(), "--format", "json"]);
    writer.join().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["requests"]["finished"], 3);
    // `-` is standard input.
    let mut child = bin()
        .args(["workload", "describe", "--trace", "-", "--format", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(TRACE.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["requests"], 3, "{v}");
    // /dev/zero: one endless line, refused after 1 MiB.
    let o = servesim(&["workload", "describe", "--trace", "/dev/zero"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o), "error: /dev/zero: cannot read trace: a line longer than 1 MiB: not a trace file\n");
    // /dev/urandom: refused at its first bytes that are not text, not after copying gigabytes.
    let t = Instant::now();
    let o = servesim(&["workload", "describe", "--trace", "/dev/urandom"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("/dev/urandom: line ") && stderr(&o).contains("not UTF-8 text"), "{}", stderr(&o));
    assert!(t.elapsed().as_secs_f64() < 2.0);
    // `yes` into standard input: an endless stream of lines no trace has, refused at line 1.
    let mut child = bin()
        .args(["workload", "describe", "--trace", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let chunk = "y\n".repeat(1 << 16);
        // Until servesim closes the pipe (a write error ends the loop).
        for _ in 0..100_000 {
            if stdin.write_all(chunk.as_bytes()).is_err() {
                return;
            }
        }
    });
    let o = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("standard input: line 1: \"y\" is neither a CSV header (column names) nor a JSON object"),
        "{}",
        stderr(&o)
    );
}

#[cfg(unix)]
#[test]
fn the_time_limit_ends_a_command_blocked_on_a_fifo_nobody_writes() {
    let dir = out_dir("rel_fifo_block");
    let fifo = make_fifo(&dir, "never.fifo");
    let t = Instant::now();
    let o = servesim(&["--time-limit", "1", "workload", "describe", "--trace", fifo.to_str().unwrap()]);
    let took = t.elapsed().as_secs_f64();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("(blocked reading an input?)"), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("STOPPED: the wall-clock limit (--time-limit 1 s) passed"), "{}", stdout(&o));
    // 1 s + the 5.1 s grace; generous for a loaded machine, far from "forever".
    assert!(took < 60.0, "took {took} s");
}

#[test]
fn a_long_idle_gap_stops_at_the_time_series_bound_instead_of_filling_memory() {
    let dir = out_dir("rel_gap");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("gap.csv"),
        "arrival_s,prompt_tokens,output_tokens\n0,100,10\n1,100,10\n1700000000,100,10\n",
    )
    .unwrap();
    let path = scenario_file(&dir, "s.toml", &llama8b("trace = { path = \"gap.csv\", format = \"csv\" }", ""));
    let o = servesim(&["simulate", "--scenario", &path, "--out", dir.join("o").to_str().unwrap(), "--quiet"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the time series reached its bound of 1000000 windows of metrics.window_s = 1 s"),
        "{}",
        stderr(&o)
    );
    let ts = read(&dir.join("o/timeseries.csv"));
    assert!(ts.lines().count() <= 1_000_002, "{} lines", ts.lines().count());
}

/// Every line of a CSV has the header's field count, and it ends with a newline.
#[cfg(unix)]
fn whole_csv(path: &std::path::Path) -> bool {
    let csv = read(path);
    let fields = csv.lines().next().map_or(0, |h| h.split(',').count());
    csv.ends_with('\n') && csv.lines().all(|l| l.split(',').count() == fields)
}

/// The run's four files belong together: requests.csv has the rows summary.json counts, and
/// timeseries.csv and scenario.toml are whole.
#[cfg(unix)]
fn consistent(out: &std::path::Path) -> Result<u64, String> {
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).map_err(|e| e.to_string())?)
            .map_err(|e| format!("summary.json: {e}"))?;
    let arrived = summary["requests"]["arrived"].as_u64().ok_or("no requests.arrived")?;
    let csv = std::fs::read_to_string(out.join("requests.csv")).map_err(|e| e.to_string())?;
    let rows = csv.lines().count() as u64 - 1;
    if !csv.ends_with('\n') || rows != arrived {
        return Err(format!("requests.csv has {rows} rows, summary.json says {arrived}"));
    }
    let ts = std::fs::read_to_string(out.join("timeseries.csv")).map_err(|e| e.to_string())?;
    if !ts.ends_with('\n') {
        return Err("timeseries.csv cut".into());
    }
    toml::from_str::<toml::Table>(&std::fs::read_to_string(out.join("scenario.toml")).map_err(|e| e.to_string())?)
        .map_err(|e| format!("scenario.toml: {e}"))?;
    Ok(arrived)
}

#[cfg(unix)]
#[test]
fn runs_killed_at_any_point_leave_one_runs_whole_files() {
    let dir = out_dir("rel_chaos");
    let text = small(0).replace("requests = 0", "duration_s = 20000");
    let path = scenario_file(&dir, "s.toml", &text);
    let out = dir.join("o");
    let run = |seed: &str| {
        let mut c = bin();
        c.args(["simulate", "--scenario", &path, "--out", out.to_str().unwrap(), "--quiet", "--seed", seed]);
        c
    };
    let t = Instant::now();
    assert!(run("1").status().unwrap().success());
    let full = t.elapsed();
    let first = consistent(&out).unwrap();
    // Kills spread over the whole run, writing included (SIGKILL: no handler runs).
    let mut mixed = 0;
    for i in 1..=8u32 {
        let mut child = run(&(i + 1).to_string()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        std::thread::sleep(full.mul_f64(f64::from(i) / 8.0));
        let _ = child.kill();
        let _ = child.wait();
        // Every file is always whole, and the five belong to one run: they are put in place
        // together by exchanging the whole folder (renameat2, Linux). Elsewhere they are renamed
        // one after another at the very end, so a kill inside that window (microseconds, longer
        // when the machine is loaded) can leave one run's requests.csv beside the other's
        // summary.json; at most one of the eight kills may land there.
        match consistent(&out) {
            Ok(n) => {
                if i == 1 {
                    // An eighth of the way in, the new run is still simulating: the old files stand.
                    assert_eq!(n, first, "kill 1/8");
                }
            }
            Err(e) => {
                mixed += 1;
                assert!(e.contains("rows, summary.json says"), "kill {i}/8: a file is not whole: {e}");
                assert!(mixed <= 1, "kill {i}/8: a second mix: {e}");
                if cfg!(target_os = "linux") {
                    panic!("kill {i}/8: files of two runs mixed: {e}");
                }
            }
        }
        assert!(whole_csv(&out.join("requests.csv")), "kill {i}/8: requests.csv cut");
    }
    // A whole run after the kills: it removes what killed runs left beside the folder.
    assert!(run("99").status().unwrap().success());
    let beside: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!beside.iter().any(|n| n.contains(".swap-")), "staging folders left: {beside:?}");
    let names: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    // Only the four outputs and the manifest; a killed run's hidden temporaries may remain,
    // never a half target.
    assert_eq!(names.iter().filter(|n| !n.starts_with('.')).count(), 5, "{names:?}");
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["runs"]["simulate"]["files"].as_array().unwrap().len(), 4, "{m}");
}

#[test]
fn merge_refuses_shards_of_different_scenarios_with_the_same_name_and_variants() {
    let dir = out_dir("rel_merge_digest");
    let a = scenario_file(&dir.join("a"), "s.toml", &format!("name = \"m\"\n{}", small(40)));
    let b = scenario_file(&dir.join("b"), "s.toml", &format!("name = \"m\"\n{}", small(60)));
    let shards = dir.join("shards");
    let sh = shards.to_str().unwrap();
    for (scen, part) in [(&a, "1/2"), (&b, "2/2")] {
        let o = servesim(&[
            "compare",
            "--scenario",
            scen,
            "--vary",
            "scheduler.max_num_seqs=8,16",
            "--shard",
            part,
            "--out",
            sh,
            "--quiet",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let o = servesim(&["merge", sh, "--out", dir.join("m").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("from a different sweep than"), "{}", stderr(&o));
    assert!(stderr(&o).contains("the resolved scenario, seeds, settings or servesim version differ"), "{}", stderr(&o));
    // Shards of one scenario merge.
    let o = servesim(&[
        "compare",
        "--scenario",
        &a,
        "--vary",
        "scheduler.max_num_seqs=8,16",
        "--shard",
        "2/2",
        "--out",
        sh,
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = servesim(&["merge", sh, "--out", dir.join("m").to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn plan_and_compare_do_not_give_a_verdict_from_a_run_cut_short() {
    let dir = out_dir("rel_plan_budget");
    let text = format!(
        "{}[slo]\nttft_ms = 2000\n[run]\nmax_events = 3000\n",
        small(0).replace("requests = 0", "duration_s = 100")
    );
    let path = scenario_file(&dir, "s.toml", &text);
    let plan = plan_json(&path, &dir.join("p"));
    let c = &plan["candidates"][0];
    assert_eq!(c["feasible"], false, "{c}");
    let why = c["infeasible_reason"].as_str().unwrap();
    assert!(why.contains("stopped early") && why.contains("run.max_events = 3000"), "{why}");
    let o = servesim(&[
        "compare",
        "--scenario",
        &path,
        "--vary",
        "scheduler.max_num_seqs=8,16",
        "--out",
        dir.join("c").to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    // 3 rows on 3 seeds each.
    assert!(stderr(&o).contains("9 of the runs stopped before their workload ended"), "{}", stderr(&o));
    assert!(dir.join("c/compare.csv").exists(), "the rows are still written");
}

#[cfg(unix)]
#[test]
fn a_full_disk_while_writing_leaves_the_previous_outputs_and_no_temporaries() {
    let dir = out_dir("rel_full_disk");
    let path = scenario_file(&dir, "s.toml", &small(20_000));
    let out = dir.join("o");
    let o = servesim(&["simulate", "--scenario", &path, "--out", out.to_str().unwrap(), "--quiet", "--seed", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let before = read(&out.join("summary.json"));
    // `ulimit -f 1000`: no file past 1000 blocks (≤ 1 MB); requests.csv is ~3 MB. The kernel
    // refuses the write as it would on a full disk.
    let o = Command::new("sh")
        .arg("-c")
        .arg("ulimit -f 1000 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_servesim"))
        .args(["simulate", "--scenario", &path, "--out", out.to_str().unwrap(), "--quiet", "--seed", "2"])
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("File too large"), "{}", stderr(&o));
    assert_eq!(read(&out.join("summary.json")), before, "the previous run's files stand");
    assert_eq!(consistent(&out).unwrap(), 20_000);
    assert_no_temporaries(&out);
}

#[test]
fn a_trace_longer_than_run_max_requests_is_refused_before_it_runs() {
    let dir = out_dir("rel_trace_bound");
    std::fs::create_dir_all(&dir).unwrap();
    let rows: String = (0..100).map(|i| format!("{}.0,100,10\n", i)).collect();
    std::fs::write(dir.join("t.csv"), format!("arrival_s,prompt_tokens,output_tokens\n{rows}")).unwrap();
    let path = scenario_file(
        &dir,
        "s.toml",
        &llama8b("trace = { path = \"t.csv\", format = \"csv\" }", "[run]\nmax_requests = 50\n"),
    );
    let o = servesim(&["simulate", "--scenario", &path, "--out", dir.join("o").to_str().unwrap(), "--quiet"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("workload.trace: has more requests than run.max_requests = 50"), "{}", stderr(&o));
    assert!(stderr(&o).trim_end().ends_with("got 100"), "{}", stderr(&o));
}

#[test]
fn the_time_limit_stops_a_plan_of_many_candidates() {
    let dir = out_dir("rel_plan_many");
    let cands: String = (0..20_000)
        .map(|i| format!("[[plan.candidates]]\nname = \"c{i}\"\nscheduler = {{ max_num_seqs = {} }}\n", 1 + i % 256))
        .collect();
    let path = scenario_file(&dir, "s.toml", &format!("{}[slo]\nttft_ms = 2000\n{cands}", small(200)));
    let t = Instant::now();
    let o = servesim(&[
        "--time-limit",
        "2",
        "plan",
        "--scenario",
        &path,
        "--out",
        dir.join("p").to_str().unwrap(),
        "--quiet",
    ]);
    let took = t.elapsed().as_secs_f64();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("--time-limit 2 s"), "{}", stderr(&o));
    // Nothing else was printed: stdout's first line says the command stopped, and why.
    assert!(stdout(&o).starts_with("STOPPED: the wall-clock limit (--time-limit 2 s) passed"), "{}", stdout(&o));
    // 2 s + the grace period at most; it stops at its next check, not after every candidate.
    assert!(took < 30.0, "took {took} s");
    assert!(!dir.join("p/plan.json").exists());
}

#[test]
fn a_generated_trace_replays_the_synthetic_stream_with_its_shared_prefixes_and_sessions_are_refused() {
    let dir = out_dir("rel_generate_parity");
    std::fs::create_dir_all(&dir).unwrap();
    let rag = root().join("scenarios/rag.toml");
    let trace = dir.join("rag.csv");
    let o = servesim(&["workload", "generate", "--scenario", rag.to_str().unwrap(), "--out", trace.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(read(&trace).starts_with("arrival_s,prompt_tokens,output_tokens,class,segments\n"));
    // describe gives the same profile (prefix reuse included) for the scenario and its trace.
    let d1 = servesim(&["workload", "describe", "--scenario", rag.to_str().unwrap(), "--format", "json"]);
    let d2 = servesim(&["workload", "describe", "--trace", trace.to_str().unwrap(), "--format", "json"]);
    assert!(d1.status.success() && d2.status.success());
    assert_eq!(stdout(&d1), stdout(&d2));
    // simulate gives every request the same outcome (the replay starts at its first arrival,
    // so the absolute times shift; lengths, status, TTFT, TPOT, E2E and queueing are equal).
    let text = read(&rag);
    let (head, tail) = (text.find("[workload]").unwrap(), text.find("[slo]").unwrap());
    let replay =
        format!("{}[workload]\ntrace = {{ path = \"rag.csv\", format = \"csv\" }}\n\n{}", &text[..head], &text[tail..]);
    let replay = scenario_file(&dir, "replay.toml", &replay);
    let outcomes = |scenario: &str, out: &str| -> Vec<String> {
        let o = servesim(&["simulate", "--scenario", scenario, "--out", dir.join(out).to_str().unwrap(), "--quiet"]);
        assert!(o.status.success(), "{}", stderr(&o));
        read(&dir.join(out).join("requests.csv"))
            .lines()
            .map(|l| l.splitn(6, ',').nth(5).unwrap_or("").to_string())
            .collect()
    };
    let (a, b) = (outcomes(rag.to_str().unwrap(), "a"), outcomes(&replay, "b"));
    assert!(a.len() > 500);
    assert_eq!(a, b);
    // A session's later turns depend on the service's answers: refused, not described wrong.
    let s = root().join("scenarios/prefix-cache.toml");
    for cmd in ["describe", "generate"] {
        let mut args = vec!["workload", cmd, "--scenario", s.to_str().unwrap()];
        let out = dir.join("s.csv");
        if cmd == "generate" {
            args.extend(["--out", out.to_str().unwrap()]);
        }
        let o = servesim(&args);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", stderr(&o));
        assert!(stderr(&o).contains("workload.prefix.sessions: a session's later turns"), "{}", stderr(&o));
    }
}

#[test]
fn report_of_a_folder_with_several_commands_outputs_asks_which() {
    let dir = out_dir("rel_report_kinds");
    let path = scenario_file(&dir, "s.toml", &small(50));
    let out = dir.join("o");
    let o = servesim(&["simulate", "--scenario", &path, "--out", out.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = servesim(&[
        "compare",
        "--scenario",
        &path,
        "--vary",
        "scheduler.max_num_seqs=8,16",
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Before: the newest file won, and a simulate folder got a compare report.
    let o = servesim(&["report", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("holds the outputs of several commands: simulate (summary.json), compare (compare.csv); choose one with --kind simulate|compare"),
        "{}",
        stderr(&o)
    );
    let o = servesim(&["report", out.to_str().unwrap(), "--kind", "simulate"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(read(&out.join("report.html")).contains("Time to first token"));
    assert!(stderr(&o).contains("report of the simulate run of scenario s (seed "), "{}", stderr(&o));

    // The manifest records both commands, each with its files and the digest of its inputs.
    let m: serde_json::Value = serde_json::from_str(&read(&out.join("manifest.json"))).unwrap();
    assert_eq!(m["runs"]["simulate"]["files"][0], "summary.json", "{m}");
    assert_eq!(m["runs"]["compare"]["files"][0], "compare.csv", "{m}");
    assert_eq!(m["runs"]["simulate"]["inputs_sha256"].as_str().unwrap().len(), 64);
    // Same inputs, same manifest: no time stamps.
    let before = read(&out.join("manifest.json"));
    let o = servesim(&["simulate", "--scenario", &path, "--out", out.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read(&out.join("manifest.json")), before);
    // A run whose files are gone is no longer in the folder: the report takes the other one.
    std::fs::remove_file(out.join("requests.csv")).unwrap();
    let o = servesim(&["report", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("report of the compare run of scenario s"), "{}", stderr(&o));
}

/// What a run as root does to `/dev`: in a private mount namespace with a throw-away `/dev`
/// (tmpfs: `null` and `zero` devices, `stdout` a link to `/proc/self/fd/1`), outputs named
/// there are written through and `/dev` is left as it was.
#[cfg(unix)]
#[test]
fn outputs_naming_devices_or_dev_stdout_write_through_and_never_replace_them() {
    let dir = out_dir("rel_dev");
    std::fs::create_dir_all(&dir).unwrap();
    let script = r#"set -e
BIN=$1; S=$2; W=$3
mount -t tmpfs none /dev
mknod /dev/null c 1 3; mknod /dev/zero c 1 5; chmod 666 /dev/null /dev/zero
ln -s /proc/self/fd/1 /dev/stdout
"$BIN" simulate --scenario "$S" --report /dev/null --out "$W/sim" -q > /dev/null
"$BIN" report "$W/sim" --out /dev/zero > /dev/null
"$BIN" workload generate --scenario "$S" --out /dev/stdout > "$W/gen.csv" 2> "$W/gen.err"
test -c /dev/null && test -c /dev/zero && test -L /dev/stdout && echo DEV-INTACT
"#;
    let probe = Command::new("unshare").args(["-m", "--propagation", "private", "true"]).output();
    if !probe.as_ref().is_ok_and(|o| o.status.success()) {
        // A permission of the machine, not a dependency to install: skipped even under CI.
        eprintln!("skipped: unshare -m is not permitted here (needs root and CAP_SYS_ADMIN)");
        return;
    }
    let o = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", script, "sh"])
        .arg(env!("CARGO_BIN_EXE_servesim"))
        .arg(root().join("scenarios/chat.toml"))
        .arg(&dir)
        .output()
        .unwrap();
    assert!(o.status.success() && stdout(&o).contains("DEV-INTACT"), "{}\n{}", stdout(&o), stderr(&o));
    // What went to /dev/stdout reached the process's standard output.
    let csv = read(&dir.join("gen.csv"));
    assert!(csv.starts_with("arrival_s,prompt_tokens,output_tokens\n") && csv.lines().count() > 100, "{csv}");
    assert!(read(&dir.join("gen.err")).contains("to /dev/stdout"));
}

#[cfg(unix)]
#[test]
fn an_output_through_a_fifo_or_a_symlink_is_written_through_or_followed_and_a_dangling_link_refused() {
    let dir = out_dir("rel_out_links");
    let scenario = root().join("scenarios/chat.toml");
    let s = scenario.to_str().unwrap();
    // A FIFO: written through to its reader, left a FIFO.
    let fifo = make_fifo(&dir, "out.fifo");
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let o = servesim(&["workload", "generate", "--scenario", s, "--out", fifo.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let got = reader.join().unwrap();
    assert!(got.starts_with("arrival_s,") && got.lines().count() > 100);
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    // A link to a regular file: the file is replaced whole, the link stays a link (as cp does).
    let real = dir.join("real.csv");
    std::fs::write(&real, "old\n").unwrap();
    let link = dir.join("link.csv");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let o = servesim(&["workload", "generate", "--scenario", s, "--out", link.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert!(read(&real).starts_with("arrival_s,"));
    // A link to nothing: refused by name, nothing created.
    let dangling = dir.join("dangling.csv");
    let _ = std::fs::remove_file(&dangling);
    std::os::unix::fs::symlink(dir.join("nowhere/x.csv"), &dangling).unwrap();
    let o = servesim(&["workload", "generate", "--scenario", s, "--out", dangling.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("is a symbolic link to") && stderr(&o).contains("which does not exist"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.join("nowhere").exists());
}

/// Runs `args` (a sharded command without `--shard`) as `n` shards at once into `out`; every
/// shard must succeed; returns what `servesim merge out` prints.
fn concurrent_shards(args: &[&str], n: u32, out: &std::path::Path) -> String {
    let _ = std::fs::remove_dir_all(out);
    std::fs::create_dir_all(out).unwrap();
    let children: Vec<_> = (1..=n)
        .map(|i| {
            bin()
                .args(args)
                .args(["--quiet", "--out", out.to_str().unwrap(), "--shard", &format!("{i}/{n}")])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, c) in children.into_iter().enumerate() {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{args:?} shard {}/{n}: {}", i + 1, stderr(&o));
    }
    let merged = out.join("merged");
    let o = servesim(&["merge", out.to_str().unwrap(), "--out", merged.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Without the lines naming where the outputs went.
    stdout(&o).replace(merged.to_str().unwrap(), "OUT")
}

#[test]
fn eight_shards_of_plan_compare_and_tune_into_one_folder_at_once_all_succeed() {
    let tune_scenario = out_dir("rel_shards_tune_src").join("tune.toml");
    std::fs::create_dir_all(tune_scenario.parent().unwrap()).unwrap();
    std::fs::write(
        &tune_scenario,
        read(&root().join("tests/plan/known-answer.toml"))
            + "[plan.price_per_gpu_hour]\nh100-sxm = 3.00\n[tune]\nmax_num_seqs = [32, 64, 128, 256]\nprefix_caching = [false, true]\n",
    )
    .unwrap();
    let t = tune_scenario.to_str().unwrap();
    let cases: [(&str, Vec<&str>); 3] = [
        ("plan", vec!["plan", "--scenario", "tests/plan/small.toml"]),
        (
            "compare",
            vec!["compare", "--vary", "scheduler.max_num_seqs=32,64,128,256", "--vary", "cluster.instances=1,2"],
        ),
        ("tune", vec!["tune", "--scenario", t]),
    ];
    for (name, args) in cases {
        let merged = concurrent_shards(&args, 8, &out_dir(&format!("rel_shards_{name}")));
        // The unsharded run prints the same.
        let whole = out_dir(&format!("rel_shards_{name}_whole"));
        let mut full = args.clone();
        full.extend(["--quiet", "--out", whole.to_str().unwrap()]);
        let o = servesim(&full);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(merged, stdout(&o).replace(whole.to_str().unwrap(), "OUT"), "{name}: merged shards differ");
    }
}

#[test]
fn a_sweep_whose_outputs_cannot_be_written_fails_before_its_search() {
    let dir = out_dir("rel_unwritable");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let under_file = file.join("out");
    let tune = dir.join("tune.toml");
    std::fs::write(
        &tune,
        read(&root().join("tests/plan/known-answer.toml"))
            + "[plan.price_per_gpu_hour]\nh100-sxm = 3.00\n[tune]\ntp = [1, 2]\n",
    )
    .unwrap();
    for (args, want) in [
        (vec!["plan", "--scenario", "scenarios/peak.toml", "--out", "/proc/servesim-out"], "cannot write in /proc"),
        (vec!["tune", "--scenario", tune.to_str().unwrap(), "--out", under_file.to_str().unwrap()], "is not a folder"),
        (vec!["compare", "--vary", "cluster.instances=1,2", "--report", "/proc/x/r.html"], "report's folder /proc/x"),
    ] {
        let t = Instant::now();
        let o = servesim(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want) && stderr(&o).contains("nothing was run"), "{args:?}: {}", stderr(&o));
        assert!(t.elapsed().as_secs_f64() < 2.0, "{args:?} failed only after {:.1} s", t.elapsed().as_secs_f64());
    }
}

#[test]
fn kernel_times_faster_than_the_gpu_can_run_are_refused_naming_the_op_and_both_times() {
    let dir = out_dir("rel_impossible");
    std::fs::create_dir_all(&dir).unwrap();
    let profile = root().join("calibrate/profiles/aic/a100_sxm-vllm-llama-3-8b-bf16.json");
    // A preset by its name; `slow-l4`: the L4's figures under a name no preset has (a GPU servesim
    // cannot tell from the profile's, so only the floor can refuse its kernels).
    let scenario = |gpu: &str, profile: &std::path::Path| {
        let gpu = match gpu {
            "slow-l4" => "name = \"slow-l4\"\nbf16_tflops = 121\nhbm_gb_per_s = 300\nmemory_gib = 24\n\
                          interconnect_gb_per_s = 32\npcie_gb_per_s = 32"
                .to_string(),
            p => format!("preset = \"{p}\""),
        };
        format!(
            "name = \"x\"\n[model]\npreset = \"llama-3-8b\"\n[gpu]\n{gpu}\n[cost]\nprofile = \"{}\"\n\
             [workload]\nrequests = 20\narrival = {{ kind = \"poisson\", rate = 1 }}\n\
             prompt_tokens = {{ kind = \"fixed\", value = 500 }}\noutput_tokens = {{ kind = \"fixed\", value = 50 }}\n",
            profile.display()
        )
    };
    let run = |name: &str, text: String| {
        let path = scenario_file(&dir, name, &text);
        servesim(&["simulate", "--scenario", &path, "--out", dir.join("out").to_str().unwrap(), "-q"])
    };
    // Its own GPU: accepted.
    let o = run("a100.toml", scenario("a100-80g", &profile));
    assert!(o.status.success(), "{}", stderr(&o));
    // An A100's GEMMs on an L4: the L4 cannot read llama-3-8b's QKV weights (32 layers × 4096 ×
    // 6144 × 2 bytes = 1.61 GB) in less than 1.61 GB ÷ 300 GB/s = 5.37 ms; the A100 took 1.22 ms.
    // On the L4 preset the profile is refused first for its GPU, naming both.
    let o = run("l4.toml", scenario("l4", &profile));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "the profile was measured on NVIDIA A100-SXM4-80GB (the a100-80g preset); the scenario's GPU is l4"
        ),
        "{}",
        stderr(&o)
    );
    let o = run("slow-l4.toml", scenario("slow-l4", &profile));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("cost.profile") && e.contains("attn_pre_proj takes 1221.86 µs in a decode step of 1 sequence"),
        "{e}"
    );
    assert!(e.contains("below the 5370.89 µs the slow-l4 needs at its peaks (300 GB/s"), "{e}");
    // The A100 profile with its times in seconds read as milliseconds (÷ 1000): on its own GPU.
    let mut v: serde_json::Value = serde_json::from_str(&read(&profile)).unwrap();
    for op in v["ops"].as_array_mut().unwrap() {
        for p in op["points"].as_array_mut().unwrap() {
            let last = p.as_array().unwrap().len() - 1;
            p[last] = serde_json::json!(p[last].as_f64().unwrap() / 1000.0);
        }
    }
    let scaled = dir.join("scaled.json");
    std::fs::write(&scaled, v.to_string()).unwrap();
    let o = run("scaled.toml", scenario("a100-80g", &scaled));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("below the") && stderr(&o).contains("the a100-80g needs at its peaks"),
        "{}",
        stderr(&o)
    );
}

/// A calibration is held to the GPU's physical floor. Llama-3-8B's dense GEMMs hold 6.98 G
/// parameters (32 layers × 218.1 M: qkv 4096×6144, o 4096², gate-up 4096×28672, down
/// 14336×4096), 13.96 GB in bf16, plus 134 MB of KV for 1,024 tokens: 4.21 ms at the H100's
/// 3.35 TB/s for a decode step of one sequence. The roofline prices that step at 6.63 ms, so
/// scaling it by 0.5 (3.31 ms) is refused with both times and by 0.9 (5.96 ms) is not.
#[test]
fn a_calibration_faster_than_the_gpu_is_refused_and_one_above_it_runs() {
    let dir = out_dir("rel_cal_floor");
    let cal = |v: f64| {
        format!(
            "format = 1\ngpu = \"h100-sxm\"\nengine = \"unspecified\"\ncost_source = \"roofline\"\n[factors]\n\
             prefill = {{ value = {v} }}\ndecode = {{ value = {v} }}\n"
        )
    };
    let scen = "[model]\npreset = \"llama-3-8b\"\n[gpu]\npreset = \"h100-sxm\"\n[cost]\ncalibration = \"cal.toml\"\n\
                [workload]\nrequests = 20\narrival = { kind = \"poisson\", rate = 20 }\n\
                prompt_tokens = { kind = \"fixed\", value = 100 }\noutput_tokens = { kind = \"fixed\", value = 10 }\n";
    let path = scenario_file(&dir, "s.toml", scen);
    for (v, refused) in [(0.5, true), (0.9, false)] {
        std::fs::write(dir.join("cal.toml"), cal(v)).unwrap();
        let o = servesim(&["simulate", "--scenario", &path, "--out", dir.join("o").to_str().unwrap(), "--quiet"]);
        if refused {
            assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
            let e = stderr(&o);
            assert!(
                e.contains("cost.calibration: cal.toml: calibrated, a decode step of 1 sequence takes 3313.32 µs"),
                "{e}"
            );
            assert!(e.contains("below the 4208.31 µs the h100-sxm needs"), "{e}");
        } else {
            assert!(o.status.success(), "{}", stderr(&o));
        }
    }
}
