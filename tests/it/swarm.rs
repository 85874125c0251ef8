//! Swarm test: from each seed, a random scenario drawn over every policy — cluster shape, router,
//! batching, queue order, admission, KV allocation, prefix cache, preemption, speculative
//! decoding, disaggregation, failures, autoscaling, arrival process and lengths — run with every
//! invariant checked after every event (`Simulation::check_invariants`: conservation, KV blocks
//! owned once, prefix-cache reference counts, swap and CPU tiers, disaggregation hand-offs, fleet
//! bookkeeping), then checked as a whole (conservation with losses counted, per-request time
//! order, determinism: the same seed twice gives identical records and summary).
//!
//! `cargo test --test swarm` runs 300 seeds; `SERVESIM_SWARM_SEEDS=5000` (and optionally
//! `SERVESIM_SWARM_FIRST=N`) runs more. A failure prints the seed and the scenario TOML that
//! reproduces it (`servesim simulate --scenario that.toml`).

use std::fmt::Write as _;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use servesim_sim::engine::{RunOutput, Simulation};
use servesim_sim::instance::batching::BatchingSpec;
use servesim_sim::instance::preemption::PreemptionSpec;
use servesim_sim::instance::queue::QueueSpec;
use servesim_sim::metrics::Status;
use servesim_sim::router::RouterSpec;
use servesim_sim::time::SimTime;
use servesim_sim::Scenario;

struct Draw {
    rng: ChaCha8Rng,
}

impl Draw {
    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }
    fn int(&mut self, lo: u64, hi: u64) -> u64 {
        self.rng.random_range(lo..=hi)
    }
    fn real(&mut self, lo: f64, hi: f64) -> f64 {
        // Rounded so the TOML text is short and exact.
        let x = self.rng.random_range(lo..hi);
        (x * 1000.0).round() / 1000.0
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.rng.random_range(0..xs.len())]
    }
}

/// A router of every registered kind (the registry's list, not a hand-kept one), with settings
/// drawn for those that have some; a new router runs here with its defaults.
fn router(d: &mut Draw) -> String {
    let kind = d.pick(RouterSpec::KINDS);
    let settings = match kind {
        "least-pending-tokens" if d.chance(0.5) => ", count_decode = false".to_string(),
        "session-affinity" if d.chance(0.5) => ", key = \"prefix\", load_factor = 1.1, slack = 1".to_string(),
        "vllm-dp" => format!(", stats_interval_ms = {}", d.real(0.0, 500.0)),
        _ => String::new(),
    };
    format!("{{ kind = \"{kind}\"{settings} }}")
}

/// A batching kind of the registry with its settings drawn (none for a kind this test does not
/// know yet: it runs with its defaults). Static batching does not go with disaggregation's
/// hand-offs, nor the engines' own schedulers with disaggregated pools.
fn batching(d: &mut Draw, disaggregated: bool) -> (&'static str, String) {
    let kinds: Vec<&'static str> = BatchingSpec::KINDS
        .iter()
        .copied()
        .filter(|k| !disaggregated || matches!(*k, "continuous" | "chunked"))
        .collect();
    let kind = d.pick(&kinds);
    let settings = match kind {
        "continuous" => format!("priority = \"{}\"\n", d.pick(&["mixed", "prefill"])),
        "chunked" => format!("priority = \"{}\"\n", d.pick(&["decode", "prefill"])),
        "vllm-v1" => format!("long_prefill_token_threshold = {}\n", d.int(0, 512)),
        "sglang" => format!(
            "max_prefill_tokens = {}\nschedule_conservativeness = {}\nmixed_chunk = {}\n",
            d.int(16, 4096),
            d.real(0.0, 2.0),
            d.chance(0.3)
        ),
        _ => String::new(),
    };
    (kind, settings)
}

/// A preemption kind of the registry with its settings; SGLang's scheduler only recomputes.
fn preemption(d: &mut Draw, batching: &str) -> String {
    let kind = if batching == "sglang" { "recompute" } else { d.pick(PreemptionSpec::KINDS) };
    let settings = match kind {
        "swap" => format!("cpu_swap_gib = {}\n", d.real(0.0005, 0.05)),
        _ => String::new(),
    };
    format!("kind = \"{kind}\"\n{settings}")
}

/// A length distribution between `lo` and `hi` tokens.
fn lengths(d: &mut Draw, lo: u64, hi: u64) -> String {
    let mid = (lo + hi) / 2;
    if hi <= lo + 1 {
        return format!("{{ kind = \"fixed\", value = {hi} }}");
    }
    match d.int(0, 3) {
        0 => format!("{{ kind = \"fixed\", value = {} }}", d.int(lo, hi)),
        1 => format!("{{ kind = \"uniform\", min = {lo}, max = {hi} }}"),
        2 => format!(
            "{{ kind = \"lognormal\", median = {}, p99 = {hi}, min = {lo}, max = {hi} }}",
            mid.max(lo + 1).min(hi)
        ),
        _ => format!(
            "{{ kind = \"mixture\", components = [{{ weight = 3, kind = \"uniform\", min = {lo}, max = {mid} }}, \
             {{ weight = 1, kind = \"fixed\", value = {hi} }}], min = {lo}, max = {hi} }}"
        ),
    }
}

/// Settings of a queue order, drawn at random; none for an order without settings (or one
/// this test does not know yet: it runs with its defaults).
fn queue_settings(d: &mut Draw, kind: &str) -> String {
    match kind {
        "shortest-job" => format!("output_error = {}\n", d.real(0.0, 1.0)),
        "priority" => format!("aging_per_s = {}\n", d.real(0.0, 2.0)),
        "length-tiers" => {
            let short = d.int(16, 200);
            format!(
                "short_max_tokens = {short}\nmedium_max_tokens = {}\nlong_max_running = {}\n",
                short + d.int(1, 400),
                d.int(1, 3)
            )
        }
        "short-jump" => format!("short_max_tokens = {}\nqueue_threshold = {}\n", d.int(16, 300), d.int(0, 20)),
        "edf" if d.chance(0.5) => format!("ttft_ms = [{}, {}]\n", d.int(50, 2000), d.int(500, 20000)),
        _ => String::new(),
    }
}

/// The `[scheduler]` keys and subsections of one group (or the whole scenario).
fn scheduler(d: &mut Draw, prefix: &str, disaggregated: bool) -> String {
    let mut o = String::new();
    let seqs = d.int(1, 48);
    let tokens = d.int(64, 2048);
    let _ = writeln!(o, "[{prefix}scheduler]\nmax_num_seqs = {seqs}\nmax_num_batched_tokens = {tokens}");
    let _ = writeln!(o, "block_tokens = {}", d.pick(&["8", "16", "32"]));
    if d.chance(0.3) {
        let _ = writeln!(o, "watermark = {}", d.real(0.0, 0.2));
    }
    let (batching, settings) = batching(d, disaggregated);
    let _ = writeln!(o, "[{prefix}scheduler.batching]\nkind = \"{batching}\"\n{settings}");
    // Every registered queue order (the registry's list, not a hand-kept one), with settings
    // drawn for those that have some; a new order runs here with its defaults.
    let kind = d.pick(QueueSpec::KINDS);
    o += &format!("[{prefix}scheduler.queue]\nkind = \"{kind}\"\n{}", queue_settings(d, kind));
    if d.chance(0.4) {
        o += &format!("[{prefix}scheduler.admission]\n");
        if d.chance(0.5) {
            o += &format!("max_queue = {}\n", d.int(0, 50));
        }
        if d.chance(0.5) {
            o += &format!("max_prompt_tokens = {}\n", d.int(1, 1500));
        }
        if d.chance(0.5) {
            o += &format!("queue_timeout_s = {}\n", d.real(0.05, 20.0));
        }
        if d.chance(0.4) {
            let open = d.real(0.05, 3.0);
            o += &format!("circuit_breaker = {{ open_delay_s = {open}, close_delay_s = {} }}\n", d.real(0.0, open));
        }
    }
    if d.chance(0.6) {
        o += &format!("[{prefix}scheduler.preemption]\n{}", preemption(d, batching));
    }
    if d.chance(0.4) {
        o += &format!("[{prefix}scheduler.kv_cache]\n");
        if d.chance(0.5) {
            o += "allocation = \"reserve-max\"\n";
            if d.chance(0.5) {
                o += &format!("reserve_output_tokens = {}\n", d.int(1, 600));
            }
        }
        if d.chance(0.5) {
            o += "dtype = \"fp8\"\n";
        }
    }
    if d.chance(0.4) {
        o += &format!("[{prefix}scheduler.prefix_cache]\nenabled = true\n");
        if d.chance(0.4) {
            o += &format!("min_prefix_tokens = {}\n", d.int(0, 256));
        }
        if d.chance(0.3) {
            o += &format!("ttl_s = {}\n", d.real(0.1, 30.0));
        }
        if d.chance(0.3) {
            o += &format!("cpu_gib = {}\n", d.real(0.0005, 0.02));
        }
    }
    if batching != "static" && d.chance(0.25) {
        o += &format!(
            "[{prefix}scheduler.speculative]\nk = {}\nacceptance = {}\ndraft_cost_fraction = {}\n",
            d.int(1, 6),
            d.real(0.0, 0.95),
            d.real(0.01, 0.5)
        );
    }
    if d.chance(0.3) {
        o += &format!(
            "[{prefix}scheduler.cpu]\nbase_us = {}\nper_seq_us = {}\noverlap = {}\n",
            d.int(0, 2000),
            d.int(0, 100),
            d.chance(0.5)
        );
    }
    o
}

/// A random scenario: small model and memory, so KV pressure, preemption and rejection happen
/// in runs of at most a few hundred requests.
fn draw(seed: u64) -> String {
    let d = &mut Draw { rng: ChaCha8Rng::seed_from_u64(seed) };
    let mut o = format!("name = \"swarm-{seed}\"\nseed = {seed}\n");
    let kv_heads = d.int(1, 2) * 2; // 2 or 4: divides 8 heads, any TP ≤ 2 divides both
    let max_context = d.int(512, 4096);
    let layers = d.int(1, 4);
    o += &format!(
        "[model]\nname = \"tiny\"\nlayers = {layers}\nhidden = 512\nheads = 8\nkv_heads = {kv_heads}\nhead_dim = 64\n\
         intermediate = {}\nvocab = 1000\nmax_context = {max_context}\n",
        d.pick(&["512", "1024", "1536"])
    );
    if d.chance(0.2) {
        o += "kv_dtype = \"fp8\"\n";
    }
    o += &format!(
        "[gpu]\nname = \"small\"\nbf16_tflops = {}\nhbm_gb_per_s = {}\nmemory_gib = {}\ninterconnect_gb_per_s = 50\npcie_gb_per_s = {}\n",
        d.int(5, 200),
        d.int(100, 3000),
        d.real(0.04, 0.15),
        d.int(4, 64)
    );
    o += "[memory]\nreserve_gib = 0\ngpu_memory_utilization = 1.0\n";
    let shape = d.int(0, 9); // 0–5 identical instances, 6–7 heterogeneous, 8–9 disaggregated
    let disaggregated = shape >= 8;
    let mut groups = String::new();
    let instances;
    if shape <= 5 {
        instances = d.int(1, 4);
        o += &format!("[cluster]\ninstances = {instances}\ntp = {}\nrouter = {}\n", d.int(1, 2), router(d));
        if layers >= 2 && d.chance(0.25) {
            o += &format!("pp = {}\n", d.int(2, layers));
        }
        o += &scheduler(d, "", false);
    } else {
        o += &format!("[cluster]\nrouter = {}\n", router(d));
        if disaggregated {
            o += &format!(
                "[cluster.disaggregation]\nlink_gb_per_s = {}\nlink_latency_us = {}\ndecode_router = {}\n",
                d.real(0.5, 100.0),
                d.int(0, 100),
                router(d)
            );
        }
        o += &scheduler(d, "", disaggregated);
        let (a, b) = (d.int(1, 2), d.int(1, 3));
        instances = a + b;
        for (i, count) in [a, b].into_iter().enumerate() {
            let role = match (disaggregated, i) {
                (false, _) => "mixed",
                (true, 0) => "prefill",
                (true, _) => "decode",
            };
            let _ = write!(
                groups,
                "[[cluster.groups]]\nname = \"g{i}\"\ncount = {count}\ntp = {}\nrole = \"{role}\"\n",
                d.int(1, 2)
            );
            if d.chance(0.5) {
                let _ = writeln!(
                    groups,
                    "gpu = {{ name = \"other{i}\", bf16_tflops = {}, hbm_gb_per_s = {}, memory_gib = {}, interconnect_gb_per_s = 50, pcie_gb_per_s = 16 }}",
                    d.int(5, 200),
                    d.int(100, 3000),
                    d.real(0.04, 0.15)
                );
            }
            if d.chance(0.5) {
                let _ = writeln!(
                    groups,
                    "scheduler = {{ max_num_seqs = {}, max_num_batched_tokens = {} }}",
                    d.int(1, 48),
                    d.int(64, 2048)
                );
            }
        }
    }
    o += &groups;

    // Workload: an end, an arrival process, lengths, sometimes prefixes and classes.
    let mut w = String::from("[workload]\n");
    let requests = d.int(1, 250);
    let closed = d.chance(0.15);
    if closed {
        w += &format!(
            "requests = {requests}\narrival = {{ kind = \"closed-loop\", clients = {}, think_time_s = {} }}\n",
            d.int(1, 20),
            d.real(0.0, 2.0)
        );
    } else {
        let rate = d.real(0.5, 60.0);
        if d.chance(0.7) {
            w += &format!("requests = {requests}\n");
        } else {
            w += &format!("duration_s = {}\n", d.real(1.0, (requests as f64 / rate).max(1.5)));
        }
        w += &match d.int(0, 5) {
            0 => format!("arrival = {{ kind = \"poisson\", rate = {rate} }}\n"),
            1 => format!("arrival = {{ kind = \"gamma\", rate = {rate}, cv = {} }}\n", d.real(0.2, 5.0)),
            2 => format!("arrival = {{ kind = \"constant\", rate = {rate} }}\n"),
            3 => format!(
                "arrival = {{ kind = \"phases\", phases = [{{ duration_s = {}, rate = {rate} }}, {{ duration_s = {}, rate = 0 }}, {{ duration_s = 1000, rate = {} }}] }}\n",
                d.real(0.5, 5.0),
                d.real(0.01, 3.0), // a phase lasts > 0 s: 0.0 could round to 0
                d.real(0.5, 80.0)
            ),
            4 => format!("arrival = {{ kind = \"diurnal\", peak_rate = {rate}, trough_rate = {}, period_s = {}, peak_at_s = 5 }}\n", rate / 4.0, d.real(5.0, 60.0)),
            _ => format!("arrival = {{ kind = \"curve\", points = [[0, {}], [{}, {rate}]], period_s = 30 }}\n", d.real(0.1, 10.0), d.real(1.0, 20.0)),
        };
    }
    let prompt_max = d.int(8, (max_context * 3 / 4).max(16));
    w += &format!("prompt_tokens = {}\n", lengths(d, 1, prompt_max));
    let output_max = d.int(1, 400);
    w += &format!("output_tokens = {}\n", lengths(d, 1, output_max));
    if d.chance(0.3) {
        w += "class_weights = [3, 2, 1]\n";
    }
    if d.chance(0.35) {
        w += "[workload.prefix]\n";
        if d.chance(0.6) {
            w += &format!(
                "system = {{ groups = {}, tokens = {}, skew = {} }}\n",
                d.int(1, 5),
                lengths(d, 8, 300),
                d.real(0.0, 2.0)
            );
        }
        if d.chance(0.5) {
            w += &format!(
                "rag = {{ documents = {}, tokens = {}, per_request = {} }}\n",
                d.int(1, 30),
                lengths(d, 16, 400),
                d.int(1, 3)
            );
        }
        if d.chance(0.4) {
            w += &format!("sessions = {{ turns = {}, think_time_s = {} }}\n", lengths(d, 1, 5), d.real(0.0, 3.0));
        }
    }
    o += &w;
    o += &format!("[slo]\nttft_ms = {}\ntpot_ms = {}\n", d.int(50, 5000), d.int(5, 200));
    o += &format!("[metrics]\nwarmup_s = {}\nwindow_s = {}\n", d.real(0.0, 2.0), d.real(0.5, 5.0));
    if d.chance(0.15) {
        o += &format!("[run]\nmax_time_s = {}\n", d.real(0.5, 20.0));
    }

    // Failures and autoscaling (not for a disaggregated cluster: rejected by validation).
    if !disaggregated && d.chance(0.3) {
        o += &format!(
            "[fleet]\nload_gb_per_s = {}\ninit_s = {}\ndetection_s = {}\nhang_detection_s = {}\non_failure = \"{}\"\nmax_retries = {}\n",
            d.real(0.1, 20.0),
            d.real(0.0, 5.0),
            d.real(0.0, 3.0),
            d.real(0.0, 5.0),
            d.pick(&["retry", "lose"]),
            d.int(0, 3)
        );
        if d.chance(0.7) {
            o += "[fleet.failures]\n";
            if d.chance(0.6) {
                o += &format!(
                    "mtbf_s = {}\nmttr_s = {}\nrepair = \"{}\"\nhang_fraction = {}\n",
                    d.real(1.0, 30.0),
                    d.real(0.0, 5.0),
                    d.pick(&["exponential", "fixed"]),
                    d.real(0.0, 1.0)
                );
            }
            if instances > 1 && d.chance(0.2) {
                o += &format!("down = {}\n", d.int(1, instances - 1));
            }
            for _ in 0..d.int(0, 3) {
                o += &format!(
                    "[[fleet.failures.events]]\nat_s = {}\ninstance = {}\nkind = \"{}\"\n",
                    d.real(0.0, 10.0),
                    d.int(0, instances - 1),
                    d.pick(&["crash", "hang"])
                );
                if d.chance(0.5) {
                    o += &format!("repair_s = {}\n", d.real(0.0, 5.0));
                }
            }
        }
        if shape <= 5 && d.chance(0.5) {
            let min = d.int(1, instances);
            o += &format!(
                "[fleet.autoscale]\nmin = {min}\nmax = {}\ninterval_s = {}\ntolerance = {}\nscale_up_cooldown_s = {}\nscale_down_cooldown_s = {}\nsignals = [",
                instances.max(min) + d.int(0, 3),
                d.real(0.2, 5.0),
                d.real(0.0, 0.5),
                d.real(0.0, 5.0),
                d.real(0.0, 10.0)
            );
            let sigs = [
                format!("{{ kind = \"queue\", target = {} }}", d.real(0.5, 10.0)),
                format!("{{ kind = \"kv-utilization\", target = {} }}", d.real(0.1, 1.0)),
                format!("{{ kind = \"ttft-p99\", target_ms = {}, window_s = {} }}", d.int(10, 3000), d.real(0.5, 10.0)),
                format!(
                    "{{ kind = \"request-rate\", target_rps = {}, window_s = {} }}",
                    d.real(0.5, 20.0),
                    d.real(0.5, 10.0)
                ),
            ];
            let chosen: Vec<&String> = sigs.iter().filter(|_| d.chance(0.5)).collect();
            let chosen = if chosen.is_empty() { vec![&sigs[0]] } else { chosen };
            o += &chosen.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
            o += "]\n";
        }
    }
    // The API server in front (drawn last, so the draws above stay those of earlier builds).
    if d.chance(0.25) {
        o += &format!(
            "[frontend]\nengine = \"{}\"\nrequest_us = {}\nprompt_token_us = {}\ntoken_us = {}\nservers = {}\n",
            d.pick(&["vllm", "sglang", "none"]),
            d.real(0.0, 5000.0),
            d.real(0.0, 5.0),
            d.real(0.0, 2000.0),
            d.int(1, 4)
        );
    }
    o
}

/// Runs `s` checking every invariant after every event (in debug builds; `check_invariants`
/// is O(requests + blocks)), and that time never goes back.
fn run_checked(s: &Scenario) -> RunOutput {
    let mut sim = Simulation::new(s);
    let mut last = sim.now();
    while sim.step() {
        assert!(sim.now() >= last, "time went backwards: {:?} after {:?}", sim.now(), last);
        last = sim.now();
        if cfg!(debug_assertions) {
            sim.check_invariants();
        }
    }
    sim.check_invariants();
    sim.finish()
}

/// Everything checked of one seed; `Err` says what broke.
fn check_seed(seed: u64, src: &str) -> Result<(), String> {
    let s = Scenario::from_toml(src, &format!("swarm-{seed}"))
        .map_err(|e| format!("the drawn scenario is invalid: {e}"))?;
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_checked(&s))).map_err(|p| panic_text(&p))?;
    let c = &out.summary.requests;
    if c.arrived != c.finished + c.rejected + c.timed_out + c.lost + c.in_flight {
        return Err(format!("conservation: {c:?}"));
    }
    if s.run.max_time_s.is_none() && c.in_flight != 0 {
        return Err(format!("{} requests still in flight at the end of an unbounded run", c.in_flight));
    }
    if s.fleet.is_none() && c.lost != 0 {
        return Err(format!("{} requests lost without failures", c.lost));
    }
    if c.rejected_by_reason.values().sum::<u64>() != c.rejected {
        return Err(format!("rejections by reason do not add up: {c:?}"));
    }
    let (mut finished, mut in_flight) = (0, 0);
    for (i, r) in out.recorder.records.iter().enumerate() {
        match r.status {
            Status::Finished => {
                finished += 1;
                let ordered = r.arrival <= r.scheduled && r.scheduled <= r.first_token && r.first_token <= r.finish;
                if !ordered || r.finish == SimTime::MAX {
                    return Err(format!("request {i}: times out of order: {r:?}"));
                }
                if r.output_tokens == 0 || r.prompt_tokens == 0 {
                    return Err(format!("request {i}: finished with no tokens: {r:?}"));
                }
            }
            Status::InFlight => in_flight += 1,
            _ => {
                if r.finish != SimTime::MAX && r.finish < r.arrival {
                    return Err(format!("request {i}: ended before it arrived: {r:?}"));
                }
            }
        }
    }
    if (finished, in_flight) != (c.finished, c.in_flight) {
        return Err(format!("records say {finished} finished, {in_flight} in flight; the summary {c:?}"));
    }
    // Determinism: the same scenario and seed again, without the per-event checks.
    let again = servesim_sim::engine::run(&s);
    if again.recorder.records != out.recorder.records {
        return Err("a second run gave different request records".into());
    }
    let (a, b) = (serde_json::to_string(&out.summary).unwrap(), serde_json::to_string(&again.summary).unwrap());
    if a != b {
        return Err(format!("a second run gave a different summary:\n{a}\n{b}"));
    }
    Ok(())
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
    format!("panicked: {}", msg.unwrap_or_else(|| "(no message)".into()))
}

fn env_u64(key: &str, default: u64) -> u64 {
    match std::env::var(key) {
        Ok(v) => v.parse().unwrap_or_else(|_| panic!("{key}={v:?} is not a whole number")),
        Err(_) => default,
    }
}

#[test]
fn swarm_of_random_scenarios_keeps_every_invariant() {
    let first = env_u64("SERVESIM_SWARM_FIRST", 0);
    let n = env_u64("SERVESIM_SWARM_SEEDS", 300);
    let mut failures = Vec::new();
    for seed in first..first + n {
        let src = draw(seed);
        if let Err(why) = check_seed(seed, &src) {
            eprintln!(
                "swarm seed {seed} failed: {why}\n--- scenario (save as swarm-{seed}.toml) ---\n{src}--- end ---\n"
            );
            failures.push(seed);
        }
    }
    assert!(failures.is_empty(), "{} of {n} seeds failed: {failures:?} (scenarios printed above)", failures.len());
}

#[test]
fn the_swarm_covers_every_policy() {
    // The generator must actually reach each policy in the CI's seeds (a typo in a key would
    // make a policy silently absent: validation would reject it, but a skipped branch would not).
    let all: String = (0..300).map(draw).collect();
    // Every kind each registry lists: a new policy the draws never reach fails here.
    let families: [(&str, &[&str], &str); 4] = [
        ("queue order", QueueSpec::KINDS, "queue]\nkind = \"{}\""),
        ("batching kind", BatchingSpec::KINDS, "batching]\nkind = \"{}\""),
        ("preemption kind", PreemptionSpec::KINDS, "preemption]\nkind = \"{}\""),
        ("router", RouterSpec::KINDS, "router = { kind = \"{}\""),
    ];
    for (family, kinds, pattern) in families {
        for kind in kinds {
            let n = all.matches(&pattern.replace("{}", kind)).count();
            assert!(n >= 3, "only {n} of 300 drawn scenarios use the {family} {kind:?}");
        }
    }
    for key in [
        "circuit_breaker",
        "queue_timeout_s",
        "reserve-max",
        "[scheduler.prefix_cache]",
        "cpu_gib",
        "[scheduler.speculative]",
        "[cluster.disaggregation]",
        "[[cluster.groups]]",
        "[fleet.failures]",
        "[[fleet.failures.events]]",
        "kind = \"hang\"",
        "on_failure = \"lose\"",
        "[fleet.autoscale]",
        "kind = \"closed-loop\"",
        "sessions = {",
        "rag = {",
        "system = {",
        "kind = \"diurnal\"",
        "[run]",
        "[frontend]",
    ] {
        let n = all.matches(key).count();
        assert!(n >= 3, "only {n} of 300 drawn scenarios have {key}");
    }
}
