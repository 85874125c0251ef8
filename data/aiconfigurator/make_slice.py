"""Cuts the test slice of AIConfigurator's kernel database (data/aiconfigurator/systems/data/).

Not run by the tests or CI: it documents how the committed slice was made from the wheel
(`pip download --no-deps aiconfigurator-core==0.12.0`, unzipped):

    python3 data/aiconfigurator/make_slice.py PATH/TO/aiconfigurator_core

Needs pyarrow. Rows are copied unchanged; only rows are left out (other dtypes, shapes, head
counts), so every kept time is the database's own. ZSTD pages as in the original files, except
the all-reduce table, written with Snappy so both codecs are read in tests.
"""
import os
import sys

import pyarrow.compute as pc
import pyarrow.parquet as pq

src = os.path.join(sys.argv[1], "systems", "data")
dst = os.path.join(os.path.dirname(os.path.abspath(__file__)), "systems", "data")


def cut(rel, keep, compression="zstd"):
    t = pq.read_table(os.path.join(src, rel))
    t = t.filter(keep(t))
    os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
    pq.write_table(t, os.path.join(dst, rel), compression=compression)
    print(rel, t.num_rows)


def isin(col, values):
    return lambda t: pc.is_in(t[col], value_set=__import__("pyarrow").array(values))


def both(*fs):
    def f(t):
        m = fs[0](t)
        for g in fs[1:]:
            m = pc.and_(m, g(t))
        return m
    return f


V = "h100_sxm/{}/vllm/0.24.0/{}"
# GEMMs around llama-3-8b's shapes at TP 1 and 2 (bf16), llama-3.1-70b's at TP 4 and 8 (fp8)
# and gpt-oss-120b's at TP 1 and 2 (bf16: QKV 5120 or 2560 × 2880, O 2880 × 4096 or 2048, LM
# head 201088 or 100544 × 2880); and DeepSeek-R1's at TP 8 in block-scaled FP8 (its shared
# expert, dense layers and, in bf16 above, its LM head), every kernel of that dtype.
cut(V.format("gemm", "gemm_perf.parquet"), lambda t: pc.or_(
    both(
        isin("gemm_dtype", ["bfloat16", "fp8"]),
        isin("kernel_source", ["torch.nn.functional.linear", "CutlassFP8ScaledMMLinearKernel"]),
        isin("n", [1024, 2048, 2560, 3072, 4096, 5120, 6144, 8192, 12288, 16384, 51200, 65536]),
        isin("k", [1024, 2048, 2560, 3072, 4096, 7168, 8192, 12288, 16384]),
    )(t),
    both(
        isin("gemm_dtype", ["fp8_block"]),
        isin("n", [512, 2048, 2560, 3072, 4096, 7168]),
        isin("k", [256, 512, 2048, 2560, 7168]),
    )(t),
))
# Attention for 32/8, 16/4, 16/1 and 8/1 query/KV heads of 128, bf16 KV cache, full attention;
# 8/1 (llama-3.1-70b at TP 8) with an fp8 KV cache too; and gpt-oss-120b's 64/8 and 32/4 heads
# of 64 at TP 1 and 2, full and with its 128-token window, bf16 KV cache only.
dense_fp8 = both(
    isin("head_dim", [128]), isin("window_size", [0]), isin("kv_cache_dtype", ["fp8"]),
    isin("num_heads", [8]), isin("num_key_value_heads", [1]),
)
dense = both(
    isin("head_dim", [128]), isin("window_size", [0]), isin("kv_cache_dtype", ["bfloat16"]),
    lambda t: pc.or_(
        pc.or_(pc.and_(pc.equal(t["num_heads"], 32), pc.equal(t["num_key_value_heads"], 8)),
               pc.and_(pc.equal(t["num_heads"], 16), pc.equal(t["num_key_value_heads"], 4))),
        pc.and_(isin("num_heads", [8, 16])(t), pc.equal(t["num_key_value_heads"], 1))),
)
oss = both(
    isin("head_dim", [64]), isin("window_size", [0, 128]), isin("kv_cache_dtype", ["bfloat16"]),
    lambda t: pc.or_(pc.and_(pc.equal(t["num_heads"], 64), pc.equal(t["num_key_value_heads"], 8)),
                     pc.and_(pc.equal(t["num_heads"], 32), pc.equal(t["num_key_value_heads"], 4))),
)
for f in ["context_attention_perf.parquet", "generation_attention_perf.parquet"]:
    cut(V.format("attention", f), lambda t: pc.or_(pc.or_(dense(t), dense_fp8(t)), oss(t)))
# gpt-oss-120b's experts at TP 1 and 2: MXFP4 weights, bf16 activations, both routings; and
# DeepSeek-R1's at expert TP 8 in block-scaled FP8.
cut(V.format("moe", "moe_perf.parquet"), lambda t: pc.or_(
    both(
        isin("moe_dtype", ["w4a16_mxfp4"]), isin("hidden_size", [2880]), isin("num_experts", [128]),
        isin("moe_tp_size", [1, 2]), isin("moe_ep_size", [1]), isin("distribution", ["balanced", "power_law_1.2"]),
    )(t),
    both(
        isin("moe_dtype", ["fp8_block"]), isin("hidden_size", [7168]), isin("num_experts", [256]),
        isin("moe_tp_size", [8]), isin("moe_ep_size", [1]), isin("distribution", ["power_law_1.2"]),
    )(t),
))
# vLLM's latent-attention blocks (it times the whole block, not the kernels) at DeepSeek-R1's 16
# heads per GPU, bf16 KV cache, block-scaled FP8 projections.
for f in ["mla_context_module_perf.parquet", "mla_generation_module_perf.parquet"]:
    cut(V.format("mla", f), both(
        isin("num_heads", [16]), isin("kv_cache_dtype", ["bfloat16"]), isin("gemm_type", ["fp8_block"]),
    ))
cut(V.format("comm", "custom_allreduce_perf.parquet"), lambda t: pc.greater(t["num_gpus"], 0), "snappy")
cut("h100_sxm/comm/nccl/2.27.3/nccl_perf.parquet", isin("op_name", ["all_reduce"]))

# DeepSeek-R1 (latent attention, 256 experts + 1 shared, 3 dense layers) at TP 8 under SGLang
# 0.5.14, FP8 block-scaled: the GEMM sites around its shapes (fp8_block, and bf16 for the LM
# head), its MLA kernels and absorbed products at 16 heads per GPU, its experts at expert TP 8,
# and the custom all-reduce; one attention shape so that the version counts as imported.
S = "h100_sxm/{}/sglang/0.5.14/{}"
cut(S.format("gemm", "gemm_perf.parquet"), both(
    isin("gemm_dtype", ["fp8_block", "bfloat16"]),
    isin("n", [512, 2048, 2560, 3072, 4096, 5120, 7168, 12288, 16384]),
    isin("k", [256, 512, 1536, 2048, 2560, 7168]),
))
for f in ["context_attention_perf.parquet", "generation_attention_perf.parquet"]:
    cut(S.format("attention", f), both(
        isin("head_dim", [128]), isin("window_size", [0]), isin("kv_cache_dtype", ["bfloat16"]),
        isin("num_heads", [32]), isin("num_key_value_heads", [8]),
    ))
for f in ["context_mla_perf.parquet", "generation_mla_perf.parquet"]:
    cut(S.format("mla", f), both(isin("num_heads", [16]), isin("kv_cache_dtype", ["bfloat16"])))
cut(S.format("mla_bmm", "mla_bmm_perf.parquet"), both(isin("num_heads", [16]), isin("bmm_dtype", ["fp8"])))
# The experts split over 8 GPUs by TP (8, 1), and whole over 8 GPUs by expert parallelism (1, 8).
cut(S.format("moe", "moe_perf.parquet"), both(
    isin("moe_dtype", ["fp8_block"]), isin("hidden_size", [7168]), isin("num_experts", [256]),
    isin("moe_tp_size", [1, 8]), isin("moe_ep_size", [1, 8]), isin("distribution", ["power_law_1.2"]),
    lambda t: pc.not_equal(t["moe_tp_size"], t["moe_ep_size"]),
))
cut(S.format("comm", "custom_allreduce_perf.parquet"), lambda t: pc.equal(t["num_gpus"], 8))
