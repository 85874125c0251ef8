//! Routers in whole runs: load-aware routing against round-robin under skewed lengths, and
//! session affinity checked request by request against its documented rule.

use crate::common::*;
use servesim_sim::engine::{self, Simulation};
use servesim_sim::metrics::Status;
use servesim_sim::router::{SessionAffinity, SessionAffinitySpec};
use servesim_sim::workload::{Request, Segment, NO_CLIENT, NO_SESSION};
use servesim_sim::SimTime;

/// Four H100s with 32 batch slots each; 90% short requests (200 prompt, 50 output tokens), 10%
/// long ones (6,000 and 1,000) that hold a slot for a thousand iterations. Round-robin keeps
/// dealing requests to an instance whose slots long requests fill, and they queue there.
fn skewed(router: &str, rate: f64, duration_s: f64) -> String {
    llama8b(
        &format!(
            "duration_s = {duration_s}\narrival = {{ kind = \"poisson\", rate = {rate} }}\n\
             prompt_tokens = {{ kind = \"mixture\", components = [ {{ weight = 0.9, kind = \"fixed\", value = 200 }}, {{ weight = 0.1, kind = \"fixed\", value = 6000 }} ] }}\n\
             output_tokens = {{ kind = \"mixture\", components = [ {{ weight = 0.9, kind = \"fixed\", value = 50 }}, {{ weight = 0.1, kind = \"fixed\", value = 1000 }} ] }}"
        ),
        &format!("[scheduler]\nmax_num_seqs = 32\n[cluster]\ninstances = 4\nrouter = {{ kind = \"{router}\" }}\n[metrics]\nwarmup_s = 10"),
    )
}

fn run_seeded(src: &str, seed: u64) -> servesim_sim::engine::RunOutput {
    let mut s = scenario(src);
    s.set_seed(seed);
    engine::run(&s)
}

#[test]
fn least_outstanding_beats_round_robin_on_ttft_p99_under_skewed_lengths() {
    // 48 req/s is close to what the four instances serve (at 50, round-robin's TTFT p99 reaches
    // seconds on some seeds). Over seeds 1–8 least-outstanding's TTFT p99 was 6–78% lower than
    // round-robin's (release build, 300 s runs); seeds 1–3 are checked here.
    for seed in [1, 2, 3] {
        let rr = run_seeded(&skewed("round-robin", 48.0, 300.0), seed).summary;
        let lo = run_seeded(&skewed("least-outstanding", 48.0, 300.0), seed).summary;
        // The same requests arrive (same seed): only the routing differs.
        assert_eq!(rr.requests.arrived, lo.requests.arrived);
        assert_eq!(rr.requests.finished, lo.requests.finished);
        assert!(
            lo.ttft_ms.p99 < rr.ttft_ms.p99 * 0.97,
            "seed {seed}: least-outstanding TTFT p99 {:.1} ms vs round-robin {:.1} ms",
            lo.ttft_ms.p99,
            rr.ttft_ms.p99
        );
    }
}

#[test]
fn every_router_spreads_a_homogeneous_cluster() {
    for router in [
        "round-robin",
        "random",
        "least-outstanding",
        "least-kv-usage",
        "least-pending-tokens",
        "power-of-two",
        "session-affinity",
    ] {
        let out = run_seeded(&skewed(router, 40.0, 120.0), 5);
        let mut per = [0u64; 4];
        for r in &out.recorder.records {
            per[r.instance as usize] += 1;
        }
        let n = out.recorder.records.len() as f64;
        assert!(per.iter().all(|&k| (k as f64) > n / 4.0 * 0.8 && (k as f64) < n / 4.0 * 1.2), "{router}: {per:?}");
        assert_eq!(out.summary.requests.finished, out.summary.requests.arrived, "{router}");
    }
}

fn request(at_ms: u64, session: u64, content: Vec<Segment>) -> Request {
    Request {
        id: 0,
        arrival: SimTime(at_ms * 1_000_000),
        prompt_tokens: 500,
        output_tokens: 100,
        client: NO_CLIENT,
        session,
        class: 0,
        content,
    }
}

/// `sessions` sessions of 5 turns, 4–5.5 s apart, the first turns spread over 100 s.
fn sessions(sessions: u64) -> Vec<Request> {
    let mut v: Vec<Request> = (0..sessions)
        .flat_map(|s| {
            let start = s * 100_000 / sessions + 1;
            (0..5).map(move |t| request(start + t * 4_000 + (s * 37 + t * 101) % 1_500, s, Vec::new()))
        })
        .collect();
    v.sort_by_key(|r| (r.arrival, r.session));
    v
}

fn affinity_scenario() -> servesim_sim::Scenario {
    scenario(&llama8b(
        "duration_s = 200\narrival = { kind = \"poisson\", rate = 1 }\n\
         prompt_tokens = { kind = \"fixed\", value = 500 }\noutput_tokens = { kind = \"fixed\", value = 100 }",
        "[cluster]\ninstances = 4\nrouter = { kind = \"session-affinity\" }",
    ))
}

/// Replays a run and checks the rule for every request: to the session's ring owner when the
/// owner holds fewer than ⌈1.25 × (outstanding + 1) / 4⌉ + 2 requests, else to a least-loaded
/// other instance. Returns (requests kept home, requests spilled).
fn check_affinity(reqs: Vec<Request>) -> (usize, usize, Vec<u32>) {
    let s = affinity_scenario();
    let sim = Simulation::with_requests(&s, reqs.clone());
    let mut ring = SessionAffinity::new(SessionAffinitySpec::default());
    ring.build_ring(sim.instances());
    let out = sim.run();
    let recs = &out.recorder.records;
    assert_eq!(recs.len(), reqs.len());
    assert!(recs.iter().all(|r| r.status == Status::Finished));
    // Departures in time order, to rebuild each instance's outstanding count at each arrival.
    let mut departures: Vec<(SimTime, u32)> = recs.iter().map(|r| (r.finish, r.instance)).collect();
    departures.sort();
    let mut load = [0u64; 4];
    let (mut next_departure, mut home, mut spilled) = (0, 0, 0);
    let mut instance_of = Vec::new();
    for (k, (req, rec)) in reqs.iter().zip(recs).enumerate() {
        assert_eq!(req.arrival, rec.arrival, "records follow the list");
        while next_departure < departures.len() && departures[next_departure].0 < rec.arrival {
            load[departures[next_departure].1 as usize] -= 1;
            next_departure += 1;
        }
        let tie = departures.get(next_departure).is_some_and(|d| d.0 == rec.arrival);
        let owner = ring.owner(req.session);
        let total: u64 = load.iter().sum();
        let limit = (1.25 * (total + 1) as f64 / 4.0).ceil() as u64 + 2;
        let got = rec.instance as usize;
        if !tie {
            if load[owner] < limit {
                assert_eq!(got, owner, "request {k}: under the bound it goes to its session's instance");
                home += 1;
            } else {
                assert_ne!(got, owner, "request {k}: above the bound it spills");
                assert_eq!(load[got], *load.iter().min().unwrap(), "request {k}: to a least-loaded instance");
                spilled += 1;
            }
        }
        load[got] += 1;
        instance_of.push(rec.instance);
    }
    (home, spilled, instance_of)
}

#[test]
fn session_affinity_keeps_sessions_home_while_under_the_bound() {
    // Light load: every request of a session on one instance.
    let reqs = sessions(60);
    let (home, spilled, inst) = check_affinity(reqs.clone());
    assert_eq!(spilled, 0);
    assert!(home >= reqs.len() - 2);
    for s in 0..60 {
        let mine: Vec<u32> = reqs.iter().zip(&inst).filter(|(r, _)| r.session == s).map(|(_, i)| *i).collect();
        assert!(mine.iter().all(|&i| i == mine[0]), "session {s} on {mine:?}");
    }
    // A router without affinity (random) scatters the same sessions.
    let s = scenario(&llama8b(
        "duration_s = 200\narrival = { kind = \"poisson\", rate = 1 }\n\
         prompt_tokens = { kind = \"fixed\", value = 500 }\noutput_tokens = { kind = \"fixed\", value = 100 }",
        "[cluster]\ninstances = 4\nrouter = { kind = \"random\" }",
    ));
    let out = Simulation::with_requests(&s, reqs.clone()).run();
    let scattered = (0..60u64)
        .filter(|&sess| {
            let mut on =
                reqs.iter().zip(&out.recorder.records).filter(|(r, _)| r.session == sess).map(|(_, rec)| rec.instance);
            let first = on.next().unwrap();
            on.any(|i| i != first)
        })
        .count();
    assert!(scattered > 50, "random routing keeps only {} of 60 sessions together", 60 - scattered);

    // Heavy load (all sessions within 25 s): some owners go above the bound and spill, and
    // the rule holds for every request.
    let mut heavy = sessions(400);
    for r in &mut heavy {
        r.arrival = SimTime(r.arrival.0 / 4);
    }
    heavy.sort_by_key(|r| (r.arrival, r.session));
    let (home, spilled, _) = check_affinity(heavy);
    assert!(spilled > 10 && home > spilled, "home {home}, spilled {spilled}");
}

#[test]
fn prefix_affinity_groups_requests_by_their_first_segment() {
    let s = scenario(&llama8b(
        "duration_s = 200\narrival = { kind = \"poisson\", rate = 1 }\n\
         prompt_tokens = { kind = \"fixed\", value = 500 }\noutput_tokens = { kind = \"fixed\", value = 100 }",
        "[cluster]\ninstances = 4\nrouter = { kind = \"session-affinity\", key = \"prefix\" }",
    ));
    // 8 system prompts, 200 requests without sessions, one every 500 ms.
    let reqs: Vec<Request> =
        (0..200u64).map(|k| request(k * 500 + 1, NO_SESSION, vec![Segment { hash: k % 8, tokens: 300 }])).collect();
    let out = Simulation::with_requests(&s, reqs.clone()).run();
    for p in 0..8 {
        let on: Vec<u32> = reqs
            .iter()
            .zip(&out.recorder.records)
            .filter(|(r, _)| r.content[0].hash == p)
            .map(|(_, rec)| rec.instance)
            .collect();
        assert!(on.iter().all(|&i| i == on[0]), "prefix {p} on {on:?}");
    }
    // Without a key (no session, no content) it falls back to least-outstanding: all four used.
    let plain: Vec<Request> = (0..40u64).map(|k| request(k * 500 + 1, NO_SESSION, Vec::new())).collect();
    let out = Simulation::with_requests(&s, plain).run();
    let used: std::collections::BTreeSet<u32> = out.recorder.records.iter().map(|r| r.instance).collect();
    assert_eq!(used.len(), 4);
}
