//! The sweep recipes in deploy/ (and deploy/README.md) run as written: the Slurm array script and the
//! Kubernetes Indexed Job's shard command, with the variables their schedulers set, merge into
//! the plan the unsharded run prints.

use std::process::Command;

use crate::common::*;

fn path_with_servesim() -> String {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_servesim")).parent().unwrap().to_path_buf();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default())
}

fn unsharded(out: &std::path::Path) -> String {
    let o = servesim(&["plan", "--scenario", "tests/plan/small.toml", "--quiet", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
}

fn merged(dir: &std::path::Path) -> String {
    let o = servesim(&["merge", dir.to_str().unwrap(), "--out", dir.join("merged").to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
}

#[test]
fn slurm_array_script_shards_merge_to_the_plan() {
    let dir = out_dir("deploy_slurm");
    for task in 1..=4 {
        let o = Command::new("bash")
            .arg("deploy/slurm-plan.sh")
            .env("PATH", path_with_servesim())
            .env("SLURM_ARRAY_TASK_ID", task.to_string())
            .env("SLURM_ARRAY_TASK_COUNT", "4")
            .env("SCENARIO", "tests/plan/small.toml")
            .env("RESULTS", &dir)
            .current_dir(root())
            .output()
            .unwrap();
        assert!(o.status.success(), "task {task}: {}", stderr(&o));
    }
    assert_eq!(merged(&dir), unsharded(&out_dir("deploy_slurm_whole")));
}

#[test]
fn kubernetes_indexed_job_command_shards_merge_to_the_plan() {
    let yaml = read(&root().join("deploy/k8s-plan-job.yaml"));
    let cmd =
        yaml.lines().map(str::trim).find_map(|l| l.strip_prefix("- servesim \"$COMMAND\"")).expect("the shard command");
    let cmd = format!("servesim \"$COMMAND\"{cmd}");
    let dir = out_dir("deploy_k8s");
    for index in 0..4 {
        let o = Command::new("sh")
            .args(["-c", &cmd])
            .env("PATH", path_with_servesim())
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .env("SHARDS", "4")
            .env("COMMAND", "plan")
            .env("SCENARIO", "tests/plan/small.toml")
            .env("RESULTS", &dir)
            .current_dir(root())
            .output()
            .unwrap();
        assert!(o.status.success(), "index {index}: {}", stderr(&o));
    }
    assert!(dir.join("plan-shard-4-of-4.json").exists());
    assert_eq!(merged(&dir), unsharded(&out_dir("deploy_k8s_whole")));
}

/// deploy/slurm-plan.sh submitted with `sbatch` to a real one-node Slurm (tests/slurm/array-job.sh
/// starts it: Debian's slurm-wlm), its four array tasks run by slurmd, then the merge job its
/// header gives, after them: the merged plan is the unsharded one.
#[test]
fn slurm_array_job_on_a_one_node_slurm_merges_to_the_plan() {
    let work = out_dir("deploy_slurm_real");
    let o = Command::new("bash")
        .args(["tests/slurm/array-job.sh", work.to_str().unwrap(), "tests/plan/small.toml"])
        .env("PATH", path_with_servesim())
        .current_dir(root())
        .output()
        .unwrap();
    let out = stdout(&o);
    match o.status.code() {
        // Not installed: a dependency .ci/run installs, so a failure in CI.
        Some(77) if std::env::var("CI").as_deref() != Ok("true") => return eprintln!("{}", out.trim()),
        // Not root: a permission of the machine, not something to install.
        Some(78) => return eprintln!("{}", out.trim()),
        _ => {}
    }
    assert!(o.status.success(), "{out}\n{}", stderr(&o));
    let (head, plan) = out.split_once('\n').unwrap();
    assert!(head.starts_with("array job ") && head.ends_with(": 4 tasks"), "{head}");
    assert_eq!(plan, unsharded(&out_dir("deploy_slurm_real_whole")));
}
