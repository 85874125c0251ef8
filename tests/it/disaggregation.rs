//! Prefill/decode disaggregation: one request's transfer computed by hand,
//! the acceptance test (the decode pool's TPOT tail below the colocated one at equal GPUs, and
//! what it costs), the invariants after every event under KV pressure in both pools,
//! determinism, and `plan` sizing both pools.

use crate::common::*;
use servesim_sim::engine::{self, RunOutput};
use servesim_sim::metrics::Status;
use servesim_sim::plan;
use servesim_sim::SimTime;

/// A llama-3-8b cluster of `prefill` and `decode` H100 groups (TP `tp_p`, `tp_d`) with `extra`
/// lines in `[cluster.disaggregation]` and around, serving `workload`.
fn pools(prefill: u32, decode: u32, tp_p: u32, tp_d: u32, extra: &str, workload: &str) -> String {
    format!(
        "[model]\npreset = \"llama-3-8b\"\n[gpu]\npreset = \"h100-sxm\"\n{extra}\n\
         [[cluster.groups]]\nname = \"prefill\"\nrole = \"prefill\"\ncount = {prefill}\ntp = {tp_p}\n\
         [[cluster.groups]]\nname = \"decode\"\nrole = \"decode\"\ncount = {decode}\ntp = {tp_d}\n\
         [workload]\n{workload}\n"
    )
}

const ONE: &str = "requests = 1\narrival = { kind = \"constant\", rate = 1 }\n\
    prompt_tokens = { kind = \"fixed\", value = 1000 }\noutput_tokens = { kind = \"fixed\", value = 3 }";

/// Linear cost: 5 ms + 50 µs per token, so every iteration is computable by hand.
const LINEAR: &str = "[cost]\nkind = \"linear\"\nbase_us = 5000\nper_token_us = 50";

#[test]
fn one_request_transfer_time_by_hand() {
    // Prefill: 5 ms + 1000 × 50 µs = 55 ms → the first token (TTFT) on the prefill instance.
    // Transfer: 1000 tokens × 131,072 B (llama-3-8b bf16 KV per token at TP 1) = 131.072 MB
    // over 50 GB/s = 2.62144 ms, plus 10 µs latency = 2.63144 ms.
    // Decode: two iterations of one token each, 5 ms + 50 µs = 5.05 ms.
    let out = engine::run(&scenario(&pools(1, 1, 1, 1, LINEAR, ONE)));
    let r = out.recorder.records[0];
    assert_eq!(r.status, Status::Finished);
    let transfer = SimTime(2_621_440 + 10_000);
    assert_eq!(r.ttft(), Some(SimTime(55_000_000)));
    assert_eq!(r.e2e(), Some(SimTime(55_000_000) + transfer + SimTime(2 * 5_050_000)));
    let d = out.summary.disaggregation.as_ref().expect("a disaggregated run reports its pools");
    assert_eq!(d.transfers, 1);
    assert_eq!(d.transfer_bytes, 131_072_000);
    assert!((d.transfer_ms.mean - 2.63144).abs() < 1e-9, "{}", d.transfer_ms.mean);
    assert_eq!(d.transfer_wait_ms.max, 0.0, "the decode instance had room at once");
    // TPOT includes the transfer: (2.63144 + 2 × 5.05) / 2; the decode pool's own does not.
    assert!((out.summary.tpot_ms.mean - (2.63144 + 10.1) / 2.0).abs() < 1e-9);
    assert!((d.decode_tpot_ms.mean - 5.05).abs() < 1e-9);
    // ITL: the first gap is the transfer and one decode; the second one decode.
    assert_eq!(out.summary.itl_ms.count, 2);
    assert!((out.summary.itl_ms.max - 7.68144).abs() < 0.01, "{}", out.summary.itl_ms.max);
    assert_eq!((d.prefill.iterations, d.decode.iterations), (1, 2));
    assert_eq!(out.recorder.records[0].instance, 0, "arrivals go to the prefill pool");

    // TP 2 on both sides: each of two links carries half the KV heads (65,536 B per token).
    let out = engine::run(&scenario(&pools(1, 1, 2, 2, LINEAR, ONE)));
    let d = out.summary.disaggregation.unwrap();
    assert!((d.transfer_ms.mean - (1.31072 + 0.01)).abs() < 1e-9, "{}", d.transfer_ms.mean);
    assert_eq!(d.transfer_bytes, 131_072_000, "the same bytes in all");
    // TP 2 to TP 1: one decode GPU receives all of it over its one link.
    let out = engine::run(&scenario(&pools(1, 1, 2, 1, LINEAR, ONE)));
    assert!((out.summary.disaggregation.unwrap().transfer_ms.mean - 2.63144).abs() < 1e-9);
    // A slower link and a longer latency, fp8 KV on the prefill pool (half the bytes).
    let link = format!(
        "{LINEAR}\n[cluster.disaggregation]\nlink_gb_per_s = 12.5\nlink_latency_us = 1000\n\
         [scheduler.kv_cache]\ndtype = \"fp8\""
    );
    let out = engine::run(&scenario(&pools(1, 1, 1, 1, &link, ONE)));
    let d = out.summary.disaggregation.unwrap();
    // 1000 × 65,536 B / 12.5 GB/s = 5.24288 ms, plus 1 ms.
    assert!((d.transfer_ms.mean - 6.24288).abs() < 1e-9, "{}", d.transfer_ms.mean);
    // A one-token answer finishes on its prefill instance: nothing to transfer.
    let one_token = ONE.replace("value = 3", "value = 1");
    let out = engine::run(&scenario(&pools(1, 1, 1, 1, LINEAR, &one_token)));
    assert_eq!(out.summary.requests.finished, 1);
    assert_eq!(out.summary.disaggregation.unwrap().transfers, 0);
    assert_eq!(out.recorder.records[0].e2e(), Some(SimTime(55_000_000)));
}

/// Short chats mixed with documents thousands of tokens long (as tests/policies/batching.rs).
const LONG_PROMPTS: &str = "duration_s = 120\narrival = { kind = \"poisson\", rate = 5 }\n\
    prompt_tokens = { kind = \"mixture\", components = [ \
        { weight = 0.6, kind = \"uniform\", min = 100, max = 400 }, \
        { weight = 0.4, kind = \"uniform\", min = 6000, max = 7500 } ] }\n\
    output_tokens = { kind = \"uniform\", min = 100, max = 300 }";

#[test]
fn disaggregation_removes_prefill_interference_from_tpot() {
    for seed in [1, 2] {
        let disagg = engine::run(&scenario(&format!("seed = {seed}\n{}", pools(1, 1, 1, 1, "", LONG_PROMPTS)))).summary;
        let coloc = run(&format!("seed = {seed}\n{}", llama8b(LONG_PROMPTS, "[cluster]\ninstances = 2"))).summary;
        let d = disagg.disaggregation.as_ref().unwrap();
        eprintln!(
            "seed {seed}, 2 H100s: colocated TPOT p99 {:.2} ms, ITL max {:.1}, TTFT p50 {:.1} p99 {:.1}; \
             disaggregated 1+1 TPOT p99 {:.2} (decode pool {:.2}), ITL max {:.1}, TTFT p50 {:.1} p99 {:.1}; \
             transfer mean {:.2} ms p99 {:.2}",
            coloc.tpot_ms.p99,
            coloc.itl_ms.max,
            coloc.ttft_ms.p50,
            coloc.ttft_ms.p99,
            disagg.tpot_ms.p99,
            d.decode_tpot_ms.p99,
            disagg.itl_ms.max,
            disagg.ttft_ms.p50,
            disagg.ttft_ms.p99,
            d.transfer_ms.mean,
            d.transfer_ms.p99
        );
        assert_eq!(disagg.requests.finished, coloc.requests.finished, "same requests served");
        // Colocated, a 7,000-token prefill stalls every decode in its iteration (~200 ms);
        // on the decode pool nothing but decodes share an iteration.
        assert!(
            d.decode_tpot_ms.p99 < 0.85 * coloc.tpot_ms.p99,
            "decode pool {} vs colocated {}",
            d.decode_tpot_ms.p99,
            coloc.tpot_ms.p99
        );
        assert!(disagg.tpot_ms.p99 < 0.85 * coloc.tpot_ms.p99, "even with the transfer in it");
        assert!(
            disagg.itl_ms.max < 0.5 * coloc.itl_ms.max,
            "worst stall {} vs {}",
            disagg.itl_ms.max,
            coloc.itl_ms.max
        );
        // The worst gap is a transfer (the longest prompt's KV) plus a decode step, not a prefill.
        let longest = 7500.0 * 131_072.0 / 50e9 * 1e3 + 0.01;
        assert!(d.transfer_ms.max <= longest + 1e-9, "{} > {longest}", d.transfer_ms.max);
        // The cost: every prompt now queues for one GPU instead of two, so the TTFT tail grows.
        assert!(disagg.ttft_ms.p99 > 1.3 * coloc.ttft_ms.p99, "{} vs {}", disagg.ttft_ms.p99, coloc.ttft_ms.p99);
        assert!(d.prefill.busy_fraction < 0.6 && d.decode.batch_mean > 4.0 * d.prefill.batch_mean);
    }
}

/// Runs `src` checking every invariant after every event, twice for determinism.
fn run_twice_checked(src: &str) -> RunOutput {
    let out = run_checked(src);
    let again = engine::run(&scenario(src));
    assert_eq!(out.recorder.records, again.recorder.records, "not deterministic");
    assert_eq!(out.summary, again.summary, "not deterministic");
    for r in out.recorder.records.iter().filter(|r| r.status == Status::Finished) {
        assert!(r.arrival <= r.scheduled && r.scheduled < r.first_token && r.first_token <= r.finish, "{r:?}");
    }
    out
}

/// The tiny model on small GPUs: `p_gib` of memory for each prefill instance, `d_gib` for each
/// decode one, so KV runs out in either pool.
fn tiny(p_gib: f64, d_gib: f64, extra: &str, groups: &str, workload: &str) -> String {
    let gpu = |gib: f64| {
        format!(
            "{{ name = \"small\", bf16_tflops = 50, hbm_gb_per_s = 200, memory_gib = {gib}, \
             interconnect_gb_per_s = 50, pcie_gb_per_s = 16 }}"
        )
    };
    format!(
        "[model]\nname = \"tiny\"\nlayers = 4\nhidden = 512\nheads = 8\nkv_heads = 2\nhead_dim = 64\n\
         intermediate = 1024\nvocab = 1000\nmax_context = 4096\n\
         [memory]\nreserve_gib = 0\ngpu_memory_utilization = 1.0\n\
         [scheduler]\nmax_num_seqs = 64\nmax_num_batched_tokens = 2048\n{extra}\n\
         [[cluster.groups]]\nrole = \"prefill\"\ncount = 2\ngpu = {}\n\
         [[cluster.groups]]\nrole = \"decode\"\ncount = 2\ngpu = {}\n{groups}\n[workload]\n{workload}\n",
        gpu(p_gib),
        gpu(d_gib)
    )
}

const LOAD: &str = "duration_s = 20\narrival = { kind = \"poisson\", rate = 40 }\n\
    prompt_tokens = { kind = \"uniform\", min = 16, max = 1500 }\noutput_tokens = { kind = \"uniform\", min = 1, max = 600 }";

#[test]
fn invariants_hold_after_every_event_under_kv_pressure_in_both_pools() {
    let prefixed = "duration_s = 30\narrival = { kind = \"poisson\", rate = 30 }\n\
        prompt_tokens = { kind = \"uniform\", min = 16, max = 300 }\noutput_tokens = { kind = \"uniform\", min = 1, max = 300 }\n\
        [workload.prefix]\nsystem = { groups = 5, tokens = { kind = \"uniform\", min = 100, max = 600 }, skew = 1 }\n\
        sessions = { turns = { kind = \"uniform\", min = 1, max = 4 }, think_time_s = 0.5 }";
    let closed = "requests = 600\narrival = { kind = \"closed-loop\", clients = 40, think_time_s = 0.05 }\n\
        prompt_tokens = { kind = \"uniform\", min = 16, max = 1500 }\noutput_tokens = { kind = \"uniform\", min = 1, max = 600 }";
    // (name, prefill GiB, decode GiB, extra scheduler/cluster lines, extra group lines, workload)
    let cases: Vec<(&str, f64, f64, &str, &str, &str)> = vec![
        ("decode KV short", 0.05, 0.025, "", "", LOAD),
        ("prefill KV short", 0.022, 0.05, "", "", LOAD),
        (
            "least-kv-usage decode router, chunked prefill, swap",
            0.03,
            0.026,
            "[scheduler.batching]\nkind = \"chunked\"\n[scheduler.preemption]\nkind = \"swap\"\ncpu_swap_gib = 0.001\n\
             [cluster.disaggregation]\ndecode_router = { kind = \"least-kv-usage\" }\nlink_gb_per_s = 0.5\nlink_latency_us = 500",
            "",
            LOAD,
        ),
        (
            "prefix cache on the prefill pool, session affinity, power-of-two decode router",
            0.03,
            0.026,
            "[scheduler.prefix_cache]\nenabled = true\n[cluster]\nrouter = { kind = \"session-affinity\" }\n\
             [cluster.disaggregation]\ndecode_router = { kind = \"power-of-two\" }",
            "",
            prefixed,
        ),
        ("closed loop, random decode router", 0.03, 0.026, "[cluster.disaggregation]\ndecode_router = { kind = \"random\" }", "", closed),
        (
            "heterogeneous decode pool, admission limits",
            0.03,
            0.026,
            "[scheduler.admission]\nmax_queue = 30\nmax_prompt_tokens = 1400\nqueue_timeout_s = 2",
            "[[cluster.groups]]\nrole = \"decode\"\ncount = 1\nscheduler = { max_num_seqs = 8 }\n\
             gpu = { name = \"big\", bf16_tflops = 100, hbm_gb_per_s = 400, memory_gib = 0.04, interconnect_gb_per_s = 50, pcie_gb_per_s = 16 }",
            LOAD,
        ),
    ];
    for (name, p, d, extra, groups, w) in cases {
        let out = run_twice_checked(&tiny(p, d, extra, groups, w));
        let s = &out.summary;
        let x = s.disaggregation.as_ref().unwrap();
        eprintln!(
            "{name:<54} finished {:>4} rejected {:>3} timed out {:>3} preemptions {:>4} transfers {:>4} wait p99 {:>7.1} ms max {:>7.1}",
            s.requests.finished,
            s.requests.rejected,
            s.requests.timed_out,
            s.preemptions,
            x.transfers,
            x.transfer_wait_ms.p99,
            x.transfer_wait_ms.max
        );
        assert_eq!(s.requests.in_flight, 0, "{name}: everything ends");
        assert!(s.requests.finished > 300, "{name}");
        let one_token =
            out.recorder.records.iter().filter(|r| r.status == Status::Finished && r.output_tokens == 1).count();
        assert_eq!(x.transfers as usize + one_token, s.requests.finished as usize, "{name}: one transfer per decode");
        match name {
            "decode KV short" => {
                assert!(x.transfer_wait_ms.max > 0.0, "{name}: transfers wait for decode KV");
                assert!(s.preemptions > 0, "{name}: decodes preempt each other");
            }
            "prefill KV short" => assert!(s.preemptions > 0, "{name}: prefills preempt each other"),
            n if n.starts_with("prefix") => assert!(s.prefix_cache.hit_rate_tokens > 0.2, "{name}"),
            n if n.starts_with("heterogeneous") => {
                assert_eq!((x.prefill.instances, x.decode.instances, x.decode.gpus), (2, 3, 3), "{name}");
                assert!(s.requests.timed_out + s.requests.rejected > 0, "{name}: admission acts on the prefill pool");
            }
            _ => {}
        }
    }
    // A time limit cuts transfers short: requests in transfer count as in flight.
    let out = run_twice_checked(&tiny(0.05, 0.025, "[run]\nmax_time_s = 7", "", LOAD));
    assert!(out.summary.requests.in_flight > 0);
}

#[test]
fn a_request_too_big_for_the_decode_pool_is_rejected_at_arrival() {
    // The decode GPUs hold fewer blocks than the longest requests need; the prefill ones more.
    let w = "requests = 200\narrival = { kind = \"poisson\", rate = 20 }\n\
        prompt_tokens = { kind = \"uniform\", min = 100, max = 3000 }\noutput_tokens = { kind = \"uniform\", min = 1, max = 1000 }";
    let out = run_twice_checked(&tiny(0.05, 0.024, "", "", w));
    let r = &out.summary.requests;
    assert!(r.rejected_by_reason["exceeds_kv_capacity"] > 0, "{:?}", r.rejected_by_reason);
    assert_eq!(r.finished + r.rejected, r.arrived);
}

#[test]
fn the_binary_reports_the_pools_and_is_deterministic() {
    let run_cli = |name: &str| {
        let dir = out_dir(name);
        let o = servesim(&["simulate", "--scenario", "scenarios/disaggregated.toml", "--out", dir.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        (dir, stdout(&o))
    };
    let (a, table) = run_cli("disagg_a");
    let (b, _) = run_cli("disagg_b");
    for f in ["requests.csv", "summary.json", "timeseries.csv", "scenario.toml"] {
        assert_eq!(std::fs::read(a.join(f)).unwrap(), std::fs::read(b.join(f)).unwrap(), "{f} differs");
    }
    assert!(
        table.contains("(tp 1, prefill)") && table.contains("KV transfer") && table.contains("decode-pool TPOT"),
        "{table}"
    );
    let j: serde_json::Value = serde_json::from_str(&read(&a.join("summary.json"))).unwrap();
    let d = &j["disaggregation"];
    assert_eq!(d["prefill"]["instances"], 3);
    assert_eq!(d["decode"]["gpus"], 3);
    assert_eq!(d["transfers"], j["requests"]["finished"], "every request decodes after a transfer");
    // The resolved scenario runs to the same summary.
    let c = out_dir("disagg_resolved");
    let again = servesim(&[
        "simulate",
        "--scenario",
        a.join("scenario.toml").to_str().unwrap(),
        "--format",
        "json",
        "--out",
        c.to_str().unwrap(),
    ]);
    assert!(again.status.success(), "{}", stderr(&again));
    let k: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(k["disaggregation"], j["disaggregation"]);
    assert_eq!(k["tpot_ms"], j["tpot_ms"]);
}

#[test]
fn plan_sizes_both_pools_and_one_fewer_of_either_fails() {
    let out = out_dir("plan_disagg");
    let o = servesim(&[
        "plan",
        "--scenario",
        "tests/plan/disaggregated.toml",
        "--format",
        "json",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &v["candidates"][0];
    assert_eq!(c["feasible"], true, "{c}");
    let p = &c["pools"];
    let (np, nd) =
        (p["prefill_instances_min"].as_u64().unwrap() as u32, p["decode_instances_min"].as_u64().unwrap() as u32);
    eprintln!("plan: {np} prefill + {nd} decode; trail {}", p["trail"]);
    assert!(np >= 2 && nd >= 2, "the load needs more than one instance in each pool: {np} + {nd}");
    assert_eq!(c["instances_min"].as_u64().unwrap() as u32, np + nd);

    // Checked by running the engine directly, not by trusting the plan's own records.
    let s = scenario(&read(&root().join("tests/plan/disaggregated.toml")));
    let cand = &plan::candidates(&s).unwrap()[0];
    let run = |np: u32, nd: u32, seed: u64| {
        let mut sc = cand.scenario.clone().unwrap();
        sc.groups[0].count = np;
        sc.groups[1].count = nd;
        sc.set_seed(seed);
        engine::run(&sc).summary.slo.met
    };
    let seeds = [5, 6];
    assert!(seeds.iter().all(|&sd| run(np, nd, sd)), "{np} + {nd} must pass on every seed");
    assert!(seeds.iter().any(|&sd| !run(np - 1, nd, sd)), "{} + {nd} must fail on some seed", np - 1);
    assert!(seeds.iter().any(|&sd| !run(np, nd - 1, sd)), "{np} + {} must fail on some seed", nd - 1);

    // Headroom per pool, GPUs and cost from each pool's own GPU and price.
    let (ip, id) = (p["prefill_instances"].as_u64().unwrap(), p["decode_instances"].as_u64().unwrap());
    assert_eq!(ip, (np as f64 * 1.5).ceil() as u64);
    assert_eq!(id, (nd as f64 * 1.5).ceil() as u64);
    assert_eq!(p["prefill_gpus"].as_u64().unwrap(), ip * 2, "prefill at TP 2");
    assert_eq!(p["decode_gpus"].as_u64().unwrap(), id);
    assert_eq!(c["gpus"].as_u64().unwrap(), ip * 2 + id);
    let cost = c["cost_per_hour"].as_f64().unwrap();
    assert!((cost - (3.0 * (ip * 2) as f64 + 1.8 * id as f64)).abs() < 1e-9, "{cost}");
    assert_eq!(p["prefill"]["gpu"], "h100-sxm");
    assert_eq!(p["decode"]["gpu"], "a100-80g");

    // The table says it in words.
    let t =
        servesim(&["plan", "--scenario", "tests/plan/disaggregated.toml", "--quiet", "--out", out.to_str().unwrap()]);
    let text = stdout(&t);
    assert!(text.contains(&format!("{np} prefill + {nd} decode instances meet the SLO on every seed")), "{text}");
}
