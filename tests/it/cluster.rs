//! Heterogeneous clusters: groups resolve with their own GPU, TP and overrides, round-trip
//! through the resolved file, and capacity-weighted routers give faster groups more work.

use crate::common::*;
use servesim_sim::Scenario;

const WORKLOAD: &str = "duration_s = 120\narrival = { kind = \"poisson\", rate = 30 }\n\
    prompt_tokens = { kind = \"lognormal\", median = 700, p99 = 6000, max = 7000 }\n\
    output_tokens = { kind = \"lognormal\", median = 150, p99 = 900, max = 1024 }";

fn mixed(router: &str) -> String {
    format!(
        "seed = 2\n[model]\npreset = \"llama-3-8b\"\n[scheduler]\nmax_num_seqs = 256\n\
         [cluster]\nrouter = {{ kind = \"{router}\" }}\n\
         [[cluster.groups]]\nname = \"fast\"\ncount = 2\ngpu = \"h100-sxm\"\nscheduler = {{ max_num_seqs = 128 }}\n\
         [[cluster.groups]]\nname = \"slow\"\ncount = 2\ngpu = {{ preset = \"a100-80g\" }}\ntp = 1\n\
         [workload]\n{WORKLOAD}\n[slo]\nttft_ms = 2000\ntpot_ms = 100\n"
    )
}

#[test]
fn groups_resolve_with_their_own_gpu_and_overrides() {
    let s = scenario(&mixed("round-robin"));
    assert_eq!(s.groups.len(), 2);
    assert_eq!(s.instances(), 4);
    let (fast, slow) = (&s.groups[0], &s.groups[1]);
    assert_eq!((fast.name.as_str(), fast.gpu.name.as_str(), fast.count), ("fast", "h100-sxm", 2));
    assert_eq!((slow.name.as_str(), slow.gpu.name.as_str(), slow.tp), ("slow", "a100-80g", 1));
    // The override applies to its group only; the other keeps [scheduler].
    assert_eq!(fast.scheduler.max_num_seqs, 128);
    assert_eq!(slow.scheduler.max_num_seqs, 256);
    // KV blocks as `servesim memory` computes them for each GPU and its settings.
    assert_eq!(fast.memory.kv_blocks, 28_147);
    assert_eq!(slow.memory.kv_blocks, 28_279);
    // The resolved file is a valid scenario giving the same groups.
    let again = Scenario::from_toml(&s.resolved_toml(), "t").unwrap();
    assert_eq!(again.groups.len(), 2);
    for (a, b) in again.groups.iter().zip(&s.groups) {
        assert_eq!(
            (&a.name, a.count, &a.gpu, a.tp, &a.scheduler, &a.memory, &a.cost),
            (&b.name, b.count, &b.gpu, b.tp, &b.scheduler, &b.memory, &b.cost)
        );
    }
    assert_eq!(again.resolved, s.resolved);
}

#[test]
fn weighted_routers_give_the_faster_group_more() {
    let share_fast = |router: &str| {
        let out = run(&mixed(router));
        let c = &out.summary.requests;
        assert_eq!(c.arrived, c.finished + c.rejected + c.in_flight);
        let fast = out.recorder.records.iter().filter(|r| r.instance < 2).count();
        fast as f64 / out.recorder.records.len() as f64
    };
    // Round-robin ignores capacity: half each.
    assert!((share_fast("round-robin") - 0.5).abs() < 0.01);
    // The H100 streams weights 1.6× faster than the A100 (3,350 vs 2,039 GB/s): weighted
    // routers send it clearly more than half.
    for router in ["least-outstanding", "least-pending-tokens", "power-of-two", "random"] {
        let f = share_fast(router);
        assert!(f > 0.55 && f < 0.7, "{router}: fast share {f:.3}");
    }
}

#[test]
fn capacity_weights_follow_the_cost_model() {
    let s = scenario(&mixed("least-outstanding"));
    let sim = servesim_sim::engine::Simulation::new(&s);
    let w: Vec<f64> = sim.instances().iter().map(|i| i.capacity()).collect();
    assert_eq!(w[0], w[1]);
    assert_eq!(w[2], w[3]);
    let ratio = w[0] / w[2];
    // Decode of 64 × 1,024 tokens is bandwidth-bound: near the HBM ratio, minus fixed CPU time.
    assert!(ratio > 1.2 && ratio < 3350.0 / 2039.0, "H100/A100 weight {ratio:.3}");
    // The figure docs/scenario.md quotes.
    assert!((ratio - 1.44).abs() < 0.005, "H100/A100 weight {ratio:.4}");
}

#[test]
fn group_errors_name_the_group_key() {
    let err = |src: String| Scenario::from_toml(&src, "t").unwrap_err().to_string();
    let base = mixed("round-robin");
    assert_eq!(
        err(base.replace("gpu = { preset = \"a100-80g\" }", "gpu = \"a100\"")),
        "cluster.groups[1].gpu.preset: unknown preset \"a100\" (did you mean \"a100-80g\", or \"a100-pcie\" for the PCIe card?); known: a100-80g, h100-sxm, h200, l40s, b200, a100-pcie, a30, b300, b60, gb200, gb300, h100-pcie, l4, rtx-pro-6000, rtx-4090, rtx-5090, rtx-pro-6000-ws, a10"
    );
    assert!(err(base.replace("max_num_seqs = 128", "max_num_seq = 128"))
        .starts_with("cluster.groups[0].scheduler.max_num_seq: unknown field `max_num_seq`"));
    assert_eq!(
        err(base.replace("max_num_seqs = 128", "max_num_seqs = 0")),
        "cluster.groups[0].scheduler.max_num_seqs: must be ≥ 1, got 0"
    );
    assert_eq!(
        err(base.replace("count = 2\ngpu = \"h100", "count = 0\ngpu = \"h100")),
        "cluster.groups[0].count: must be in [1, 100000], got 0"
    );
    assert_eq!(
        err(base.replace("tp = 1", "tp = 3")),
        "cluster.groups[1].tp: must divide the model's 32 attention heads, got 3"
    );
    assert_eq!(
        err(base.replace("[cluster]\n", "[cluster]\ninstances = 3\n")),
        "cluster.instances: must not be set with cluster.groups (give each group a count), got 3"
    );
    assert_eq!(
        err(base.replace("gpu = \"h100-sxm\"\n", "")),
        "cluster.groups[0].gpu: required when there is no top-level [gpu]"
    );
    assert!(err(base.replace("gpu = { preset = \"a100-80g\" }", "gpu = 7"))
        .contains("cluster.groups[1].gpu: expected a GPU preset name or a table"));
    // A top-level [gpu] is the default of groups that name none.
    let s = scenario(&base.replace("gpu = \"h100-sxm\"\n", "").replace("[model]", "[gpu]\npreset = \"h200\"\n[model]"));
    assert_eq!(s.groups[0].gpu.name, "h200");
    assert_eq!(s.groups[1].gpu.name, "a100-80g");
}

#[test]
fn linear_cost_in_a_group() {
    let s = scenario(&mixed("round-robin").replace(
        "gpu = { preset = \"a100-80g\" }",
        "gpu = { preset = \"a100-80g\" }\ncost = { kind = \"linear\", base_us = 1000, per_token_us = 10 }",
    ));
    assert!(matches!(s.groups[0].cost, servesim_sim::scenario::CostSpec::Roofline(_)));
    assert!(matches!(s.groups[1].cost, servesim_sim::scenario::CostSpec::Linear(_)));
    let cost = servesim_sim::engine::cost_model(&s, 1);
    let mut b = servesim_sim::cost::BatchShape::default();
    b.add_prefill(90, 0, true);
    b.add_decode(10);
    assert_eq!(cost.iteration_time(&b), servesim_sim::SimTime(1_910_000));
}
