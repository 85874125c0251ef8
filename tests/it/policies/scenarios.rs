//! Every shipped scenario runs, keeps conservation, shows the policy it is about, and its
//! resolved form (every default filled in) reads back as the same scenario.

use super::*;
use servesim_sim::Scenario;

#[test]
fn shipped_scenarios_run_and_round_trip() {
    let mut names: Vec<_> = std::fs::read_dir(root().join("scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    names.sort();
    assert!(names.len() >= 11);
    for path in names {
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        let text = read(&path);
        // Scenarios that name files (traces, cost profiles) need the binary's file access; their
        // own tests run them (tests/workload_traces.rs, tests/calibrate.rs).
        if text.lines().any(|l| l.trim_start().starts_with("trace =") || l.trim_start().starts_with("profile =")) {
            continue;
        }
        let s = Scenario::from_toml(&text, &stem).unwrap_or_else(|e| panic!("{stem}: {e}"));
        let again = Scenario::from_toml(&s.resolved_toml(), &stem).unwrap_or_else(|e| panic!("{stem} resolved: {e}"));
        assert_eq!(again.resolved, s.resolved, "{stem}: resolved scenario does not round-trip");
        assert_eq!(again.groups[0].memory, s.groups[0].memory, "{stem}");
        if stem == "autoscale-diurnal" {
            // A whole day at up to 60 req/s (2.8 million requests): tests/fleet.rs runs a
            // compressed day of the same kind instead.
            continue;
        }
        let out = servesim_sim::engine::run(&s).summary;
        let c = &out.requests;
        assert_eq!(c.arrived, c.finished + c.rejected + c.timed_out + c.in_flight, "{stem}");
        assert!(c.finished > 100, "{stem}");
        match stem.as_str() {
            "prefix-cache" => assert!(out.prefix_cache.hit_rate_tokens > 0.5, "{stem}"),
            "rag" => assert!(out.prefix_cache.hit_rate_tokens > 0.2 && out.prefix_cache.cpu_hit_tokens > 0, "{stem}"),
            "overload" => assert!(c.rejected_by_reason["circuit_open"] > 0 && out.ttft_ms.p99 < 2000.0, "{stem}"),
            "speculative" => assert!(out.speculative.tokens_per_step > 3.0, "{stem}"),
            "swap" => assert!(out.swap.swapped_out_blocks > 0, "{stem}"),
            "cpu-bound" => assert!(out.cpu.gpu_wait_fraction > 0.0 && out.cpu.overhead_fraction > 0.5, "{stem}"),
            "disaggregated" => {
                let d = out.disaggregation.as_ref().expect("pools reported");
                assert!(d.transfers == c.finished && d.decode_tpot_ms.p99 < out.slo.tpot_ms.unwrap(), "{stem}")
            }
            _ => {}
        }
    }
}
