//! SGLang's receive interval (`instance::recv`) run through the engine: a hand-computed
//! timeline and the scenario key's checks.

use crate::scenario::Scenario;

/// The first-token times (ns) of two requests on one instance with linear cost (5 ms + 50 µs a
/// token) and `[scheduler] extra`: request 1 (100-token prompt, 50 tokens out) at 0, request 2
/// at 20 ms (also `wait_tests`' timeline).
pub(super) fn first_tokens(extra: &str) -> Vec<u64> {
    let toml = format!(
        "[model]\npreset = \"llama-3-8b\"\n[gpu]\npreset = \"h100-sxm\"\n[cost]\nkind = \"linear\"\n\
         base_us = 5000\nper_token_us = 50\n[scheduler]\n{extra}\n[workload]\nrequests = 2\n\
         arrival = {{ kind = \"constant\", rate = 50 }}\nprompt_tokens = {{ kind = \"fixed\", value = 100 }}\n\
         output_tokens = {{ kind = \"fixed\", value = 50 }}\n"
    );
    let s = Scenario::from_toml(&toml, "t").unwrap();
    let mut recs = crate::engine::run(&s).recorder.records.clone();
    recs.sort_by_key(|r| r.arrival);
    recs.iter().map(|r| r.first_token.0).collect()
}

/// Request 1 arrives at an idle scheduler and prefills at once (10 ms), then decodes in 5.05 ms
/// steps from 10, 15.05, 20.1, 25.15 ms. Request 2, sent at 20 ms, joins the step at 20.1 ms
/// by default (its prefill beside the decode: 5 + 101 × 0.05 = 10.05 ms, first token at
/// 30.15 ms). With an interval of 3 (scheduler_recv_skipper.py): the loop at 10 ms follows a
/// prefill (weight 1000) and receives, the count restarts; the decode steps add 1 each, so the
/// loops at 15.05 (1) and 20.1 ms (2) do not receive and the one at 25.15 ms (3) does: 25.15 +
/// 10.05 = 35.2 ms. With 100, request 1's 49 decodes end at 10 + 49 × 5.05 = 257.45 ms before
/// the count gets there; the idle loop receives at once and request 2 prefills alone (10 ms):
/// 267.45 ms.
#[test]
fn a_request_sent_while_decoding_waits_for_the_interval_by_hand() {
    assert_eq!(first_tokens(""), [10_000_000, 30_150_000]);
    assert_eq!(first_tokens("recv_interval = 1"), [10_000_000, 30_150_000]);
    assert_eq!(first_tokens("recv_interval = 3"), [10_000_000, 35_200_000]);
    assert_eq!(first_tokens("recv_interval = 100"), [10_000_000, 267_450_000]);
}

#[test]
fn the_interval_is_refused_at_0_and_with_dp_attention() {
    let scenario = |sched: &str, cluster: &str| {
        let toml = format!(
            "[model]\npreset = \"deepseek-v3\"\nweight_dtype = \"fp8\"\n[gpu]\npreset = \"h200\"\n[cluster]\ntp = 8\n{cluster}\n\
             [scheduler]\n{sched}\n[workload]\nrequests = 1\narrival = {{ kind = \"poisson\", rate = 1 }}\n\
             prompt_tokens = {{ kind = \"fixed\", value = 10 }}\noutput_tokens = {{ kind = \"fixed\", value = 2 }}\n"
        );
        Scenario::from_toml(&toml, "t").map(|_| ()).map_err(|e| e.to_string())
    };
    let e = scenario("recv_interval = 0", "").unwrap_err();
    assert!(e.contains("scheduler.recv_interval") && e.contains("must be in [1, 1000000]"), "{e}");
    let e = scenario("recv_interval = 30", "dp_attention = 8").unwrap_err();
    assert!(e.contains("scheduler.recv_interval") && e.contains("30 with DP attention"), "{e}");
    assert_eq!(scenario("recv_interval = 30", ""), Ok(()));
}
