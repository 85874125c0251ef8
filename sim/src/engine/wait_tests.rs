//! TensorRT-LLM's batch waiting (`instance::batch_wait`) run through the engine: a hand-computed
//! timeline, the scenario key's checks, and what to deploy.

use crate::scenario::Scenario;

/// One instance, linear cost (5 ms + 50 µs a token): request 1 (100-token prompt) runs
/// alone, its first token at 10 ms, then decodes in 5.05 ms steps from 10, 15.05 and 20.1 ms.
/// Request 2 arrives at 20 ms: without waiting it prefills beside that decode from 20.1 ms
/// (5 ms + 101 × 50 µs = 10.05 ms), first token at 30.15 ms; with a timeout of 3 iterations
/// (101 tokens are far under 0.9 × 8192) three decode-only steps come first, so at
/// 20.1 + 3 × 5.05 + 10.05 = 45.3 ms.
#[test]
fn a_prompt_beside_decodes_waits_its_iterations_by_hand() {
    let run = super::recv_tests::first_tokens;
    assert_eq!(run(""), [10_000_000, 30_150_000]);
    assert_eq!(run("batch_wait = { timeout_iters = 3, max_tokens_ratio = 0.9 }"), [10_000_000, 45_300_000]);
    let toml = "[model]\npreset = \"llama-3-8b\"\n[gpu]\npreset = \"h100-sxm\"\n[scheduler]\n\
                batch_wait = { timeout_iters = 3, max_tokens_ratio = 1.5 }\n[workload]\nrequests = 1\n\
                arrival = { kind = \"poisson\", rate = 1 }\nprompt_tokens = { kind = \"fixed\", value = 10 }\n\
                output_tokens = { kind = \"fixed\", value = 2 }\n";
    let e = Scenario::from_toml(toml, "t").unwrap_err().to_string();
    assert!(e.contains("scheduler.batch_wait.max_tokens_ratio") && e.contains("1.5"), "{e}");
}

/// What to deploy tells trtllm-serve's options file the waiting simulated, and says vLLM has
/// none.
#[test]
fn what_to_deploy_carries_it() {
    let notes = |engine: &str| {
        let toml = format!(
            "engine = \"{engine}\"\n[model]\npreset = \"llama-3-8b\"\n[gpu]\npreset = \"h100-sxm\"\n[scheduler]\n\
             batch_wait = {{ timeout_iters = 20, max_tokens_ratio = 0.9 }}\n[workload]\nrequests = 1\n\
             arrival = {{ kind = \"poisson\", rate = 1 }}\nprompt_tokens = {{ kind = \"fixed\", value = 10 }}\n\
             output_tokens = {{ kind = \"fixed\", value = 2 }}\n"
        );
        let s = Scenario::from_toml(&toml, "t").unwrap();
        crate::scenario::Deployment::of(&s, &[1]).servers[0].command.notes.clone()
    };
    let trt = notes("trtllm");
    assert!(
        trt.iter().any(|n| n
            == "batch_wait_timeout_iters: 20, batch_wait_max_tokens_ratio: 0.9 in the \
                                 --extra_llm_api_options file, as simulated"),
        "{trt:?}"
    );
    let vllm = notes("vllm");
    assert!(vllm.iter().any(|n| n.ends_with("which vllm does not have")), "{vllm:?}");
}
