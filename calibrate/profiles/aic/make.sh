#!/usr/bin/env bash
# Rebuilds the shipped kernel-backed profiles from AIConfigurator's database.
#   pip download --no-deps aiconfigurator-core==0.12.0 && unzip -q aiconfigurator_core-*.whl -d aic
#   calibrate/profiles/aic/make.sh aic          (with target/release/servesim built)
set -euo pipefail
DB=${1:?usage: make.sh DATABASE_DIR}
B=${SERVESIM:-target/release/servesim}
OUT=$(dirname "$0")
for s in h100_sxm h200_sxm b200_sxm a100_sxm l40s; do
  "$B" calibrate import-aic --system $s --framework vllm --model llama-3-8b --tp 1,2,4,8 --database "$DB" \
    --out "$OUT/$s-vllm-llama-3-8b-bf16.json"
done
"$B" calibrate import-aic --system h100_sxm --framework vllm --model llama-3-8b --tp 1,2,4,8 --weights fp8 --kv fp8 \
  --database "$DB" --out "$OUT/h100_sxm-vllm-llama-3-8b-fp8.json"
# SGLang's kernels for the same model on H100, for the shipped scenarios under engine = "sglang"
# (`compare --vary engine=vllm,sglang`: a varied engine reads its own kernels).
"$B" calibrate import-aic --system h100_sxm --framework sglang --model llama-3-8b --tp 1,2,4,8 --database "$DB" \
  --out "$OUT/h100_sxm-sglang-llama-3-8b-bf16.json"
# gpt-oss-120b as shipped (MXFP4 experts, bf16 GEMMs) for scenarios/gpt-oss-120b-h100.toml's
# candidates; experts routed as AIConfigurator's default (power_law_1.2).
for s in h100_sxm h200_sxm b200_sxm; do
  "$B" calibrate import-aic --system $s --framework vllm --model gpt-oss-120b --tp 1 --weights mxfp4 \
    --database "$DB" --out "$OUT/$s-vllm-gpt-oss-120b-mxfp4.json"
done
