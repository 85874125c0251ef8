//! Output files are never lost or mixed (part of the reliability issue): a scenario name cannot
//! point the outputs outside their folder, `workload generate` refuses to write over its own
//! input, and a run's files replace the previous run's whole (written to a temporary, renamed).

use crate::common::*;

#[test]
fn a_scenario_name_cannot_climb_out_of_the_outputs_folder() {
    let dir = out_dir("files_dotdot");
    for name in ["..", ".", ".hidden"] {
        let path = scenario_file(&dir, "s.toml", &format!("name = \"{name}\"\n{}", llama8b("requests = 5\narrival = { kind = \"poisson\", rate = 1 }\nprompt_tokens = { kind = \"fixed\", value = 10 }\noutput_tokens = { kind = \"fixed\", value = 5 }", "")));
        let o = servesim(&["simulate", "--scenario", &path, "--quiet"]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("name: must be letters, digits, '-', '_' or '.', not starting with '.'"),
            "{}",
            stderr(&o)
        );
    }
    // Nothing was written next to the scenario or in outputs/.
    assert!(!dir.join("summary.json").exists() && !root().join("outputs/summary.json").exists());
}

#[test]
fn generate_does_not_write_over_its_input() {
    let dir = out_dir("files_generate");
    let text = llama8b("requests = 20\narrival = { kind = \"poisson\", rate = 5 }\nprompt_tokens = { kind = \"fixed\", value = 10 }\noutput_tokens = { kind = \"fixed\", value = 5 }", "");
    let path = scenario_file(&dir, "s.toml", &text);
    let o = servesim(&["workload", "generate", "--scenario", &path, "--out", &path]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is an input of this command"), "{}", stderr(&o));
    assert_eq!(read(std::path::Path::new(&path)), text, "the scenario is untouched");
    // A run's outputs replace the previous run's whole, with no temporaries left.
    let out = dir.join("trace.csv");
    for n in ["20", "7"] {
        let o =
            servesim(&["workload", "generate", "--scenario", &path, "--out", out.to_str().unwrap(), "--requests", n]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert_eq!(read(&out).lines().count(), 8, "header + 7 rows");
    // Asking for more than the workload holds is said, not silently cut.
    let timed = scenario_file(&dir, "timed.toml", &text.replace("requests = 20", "duration_s = 2"));
    let o =
        servesim(&["workload", "generate", "--scenario", &timed, "--out", out.to_str().unwrap(), "--requests", "999"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = read(&out).lines().count() - 1;
    assert!(rows < 999);
    let want = format!("note: --requests 999 asked for more: the workload's duration of 2 s (workload.duration_s, --duration-s) ended it after {rows}");
    assert!(stderr(&o).contains(&want), "{}", stderr(&o));
    let names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().all(|n| !n.contains(".tmp-")), "{names:?}");
}

#[test]
fn an_oracle_length_predictor_is_named_so() {
    // shortest-job with no prediction error knows every output length: the run says so, and a
    // real predictor's run does not.
    let dir = out_dir("files_oracle");
    std::fs::create_dir_all(&dir).unwrap();
    let run = |extra: &str| {
        let src = format!(
            "[model]\npreset = \"llama-3-8b\"\n[gpu]\npreset = \"h100-sxm\"\n[scheduler.queue]\nkind = \"shortest-job\"\n{extra}\
             [workload]\nrequests = 50\narrival = {{ kind = \"poisson\", rate = 5 }}\n\
             prompt_tokens = {{ kind = \"fixed\", value = 100 }}\noutput_tokens = {{ kind = \"uniform\", min = 5, max = 50 }}\n"
        );
        let path = dir.join("s.toml");
        std::fs::write(&path, src).unwrap();
        let o = servesim(&["simulate", "--scenario", path.to_str().unwrap(), "--out", dir.join("o").to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    assert!(run("").contains("shortest-job with output_error = 0 is an oracle"));
    assert!(!run("output_error = 0.5\n").contains("is an oracle"));
}
