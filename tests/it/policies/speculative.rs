//! Speculative decoding: the gain at batch 1 with a good draft, the loss with a bad one, and
//! the gain shrinking at large batch.

use super::*;

/// `clients` users with no think time: a steady batch of `clients` decodes.
fn closed(clients: u32) -> String {
    format!(
        "requests = {}\narrival = {{ kind = \"closed-loop\", clients = {clients} }}\n\
         prompt_tokens = {{ kind = \"fixed\", value = 500 }}\noutput_tokens = {{ kind = \"fixed\", value = 300 }}",
        (clients * 6).max(60)
    )
}

fn spec(k: u32, alpha: f64) -> String {
    format!("[scheduler.speculative]\nk = {k}\nacceptance = {alpha}\ndraft_cost_fraction = 0.1")
}

#[test]
fn speculation_speeds_up_batch_one_with_a_good_draft_and_slows_it_with_a_bad_one() {
    let base = run(&h100("", &closed(1))).summary;
    let good = run(&h100(&spec(4, 0.8), &closed(1))).summary;
    let bad = run(&h100(&spec(4, 0.2), &closed(1))).summary;
    eprintln!(
        "batch 1 TPOT mean: no speculation {:.2} ms, α = 0.8 {:.2} ms ({:.2} tokens/step, acceptance {:.3}), α = 0.2 {:.2} ms ({:.2} tokens/step)",
        base.tpot_ms.mean, good.tpot_ms.mean, good.speculative.tokens_per_step, good.speculative.acceptance_rate,
        bad.tpot_ms.mean, bad.speculative.tokens_per_step
    );
    // Tokens per step follow (1 − α^(k+1)) / (1 − α): 3.36 at α = 0.8, 1.25 at α = 0.2 (a
    // little fewer: near the end of an output fewer than k tokens are left to propose). Of
    // the k proposed, Σ α^i (i = 1..k) / k are accepted on average: 0.59 and 0.062.
    let accepted = |a: f64| (1..=4).map(|i| a.powi(i)).sum::<f64>() / 4.0;
    assert!((good.speculative.acceptance_rate / accepted(0.8) - 1.0).abs() < 0.06);
    assert!((bad.speculative.acceptance_rate / accepted(0.2) - 1.0).abs() < 0.1);
    assert!(good.speculative.tokens_per_step > 3.2 && good.speculative.tokens_per_step < 3.36);
    assert!(bad.speculative.tokens_per_step > 1.2 && bad.speculative.tokens_per_step < 1.25);
    // A step costs 4 draft passes (0.4 of a decode) plus a 5-token verification (about one
    // memory-bound decode): ≈ 1.4 decodes for 3.36 tokens, or for 1.25.
    assert!(good.tpot_ms.mean < 0.6 * base.tpot_ms.mean, "α = 0.8 is faster");
    assert!(bad.tpot_ms.mean > 1.05 * base.tpot_ms.mean, "α = 0.2 is slower");
    assert_eq!(good.requests.finished, base.requests.finished);
}

#[test]
fn the_gain_shrinks_at_large_batch() {
    let gain = |clients: u32| {
        let base = run(&h100("", &closed(clients))).summary;
        let good = run(&h100(&spec(4, 0.8), &closed(clients))).summary;
        base.tpot_ms.mean / good.tpot_ms.mean
    };
    let gains: Vec<(u32, f64)> = [1, 16, 64, 192].iter().map(|&c| (c, gain(c))).collect();
    eprintln!("TPOT speed-up with α = 0.8, k = 4 by batch: {gains:?}");
    // Verifying 5 tokens per request turns the iteration compute-bound as the batch grows.
    assert!(gains.windows(2).all(|w| w[1].1 < w[0].1), "gain falls with batch: {gains:?}");
    assert!(gains[0].1 > 2.0 && gains[3].1 < 0.7 * gains[0].1);
}

#[test]
fn a_draft_model_costs_memory_and_its_own_passes() {
    // A llama-3.2-1b-shaped draft (16 layers, hidden 2,048, 8 KV heads of 64).
    let draft = "[scheduler.speculative]\nk = 4\nacceptance = 0.8\n\
        draft = { name = \"draft-1b\", layers = 16, hidden = 2048, heads = 32, kv_heads = 8, head_dim = 64, \
        intermediate = 8192, vocab = 128256, max_context = 8192, tied_embeddings = true }";
    let plain = scenario(&h100("", &closed(1)));
    let with = scenario(&h100(draft, &closed(1)));
    let (a, b) = (&plain.groups[0].memory, &with.groups[0].memory);
    // The draft's KV per token: 2 × 16 layers × 8 heads × 64 × 2 B = 32,768 B, on top of the
    // target's 131,072; its weights come out of the KV space.
    assert_eq!(b.kv_bytes_per_token, 131_072 + 32_768);
    assert!(b.kv_bytes < a.kv_bytes && b.kv_blocks < a.kv_blocks);
    let base = run(&h100("", &closed(1))).summary;
    let spec = run(&h100(draft, &closed(1))).summary;
    eprintln!(
        "draft model: TPOT {:.2} → {:.2} ms, blocks {} → {}",
        base.tpot_ms.mean, spec.tpot_ms.mean, a.kv_blocks, b.kv_blocks
    );
    assert!(spec.tpot_ms.mean < 0.7 * base.tpot_ms.mean);
}

/// DeepSeek-R1 on 8 H200s with 8 DP attention ranks and its MTP layer as the draft.
fn deepseek_dp8(speculative: &str, workload: &str) -> String {
    format!(
        "name = \"t\"\n[model]\npreset = \"deepseek-r1\"\nweight_dtype = \"fp8\"\n[gpu]\npreset = \"h200\"\n\
         [cluster]\ntp = 8\ndp_attention = 8\nep = true\n[scheduler]\n{speculative}\n[workload]\n{workload}\n"
    )
}

/// With DP attention each rank keeps its own sequences' KV, the draft's beside the model's: by
/// hand, DeepSeek-R1's latent is 576 values × 2 B a layer, 61 layers (70,272 B a token) and the
/// MTP layer's one more (71,424 B); each rank's blocks are the KV bytes ÷ (16 × 71,424), eight
/// ranks of them. The ranks draft and verify in step, every request finishes, and the tokens a
/// step follow the acceptance length.
#[test]
fn dp_attention_ranks_draft_for_their_own_batches() {
    let mtp = "[scheduler.speculative]\nk = 2\nacceptance_length = 2.2\n\
               draft = { preset = \"deepseek-r1\", layers = 1, dense_layers = 0, weight_dtype = \"fp8\" }";
    let workload = &closed(64);
    let plain = scenario(&deepseek_dp8("", workload));
    let with = scenario(&deepseek_dp8(mtp, workload));
    let (a, b) = (&plain.groups[0].memory, &with.groups[0].memory);
    assert_eq!((a.kv_bytes_per_token, b.kv_bytes_per_token), (70_272, 71_424));
    assert_eq!(b.kv_blocks, b.kv_bytes / (16 * 71_424) * 8);
    assert!(b.kv_bytes < a.kv_bytes, "the MTP layer's weights come out of the KV space");
    let base = run(&deepseek_dp8("", workload)).summary;
    let spec = run(&deepseek_dp8(mtp, workload)).summary;
    eprintln!(
        "dp8 MTP: TPOT {:.2} → {:.2} ms, {:.3} tokens a step, blocks {} → {}",
        base.tpot_ms.mean, spec.tpot_ms.mean, spec.speculative.tokens_per_step, a.kv_blocks, b.kv_blocks
    );
    assert_eq!(spec.requests.finished, spec.requests.arrived);
    // ⌊L − 1⌋ = 1 token always accepted, the second half the time: 2.2 a step, a little fewer
    // near the ends of outputs, where fewer than 2 are proposed.
    assert!(spec.speculative.tokens_per_step > 2.15 && spec.speculative.tokens_per_step <= 2.2);
    // A step of 64 requests over 8 ranks: two draft passes and a 3-token verification, for 2.2
    // tokens; faster than a token a step, slower than 2.2 times faster.
    assert!(spec.tpot_ms.mean < base.tpot_ms.mean / 1.3 && spec.tpot_ms.mean > base.tpot_ms.mean / 2.2);
}
