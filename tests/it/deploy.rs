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
