#!/usr/bin/env bash
# Calibrates servesim's cost profiles on one H200 within six minutes:
#   llama-3-8b at TP 1, and llama-3-70b's shard shapes at TP 2, 4 and 8 (one GPU measures the
#   per-GPU shapes of each degree; all-reduce is not measured).
# Writes under $OUT (at most 8 files, flat): check.log (every kernel against its CPU reference),
# h200-llama-3-8b.json/.csv, h200-llama-3-70b.json/.csv (profiles; CSVs streamed as measured, so
# a run cut short keeps its points) and run.log.
#
# Usage, from the repository root on the GPU machine, with a release binary built elsewhere:
#   SERVESIM_BIN=dist/servesim OUT=/some/dir bash calibrate/device/h200.sh
# Needs the NVIDIA driver and CUDA 13's NVRTC and cuBLAS (a toolkit under /usr/local/cuda, or the
# nvidia-* wheels that PyTorch's environment carries; both are looked for below).
set -uo pipefail
BIN="${SERVESIM_BIN:-target/release/servesim}"
OUT="${OUT:?set OUT to the folder for results}"
mkdir -p "$OUT"
LOG="$OUT/run.log"
START=$(date +%s)
say() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }

# CUDA libraries: the toolkit, then the wheels' nvidia/cu13 folder of the python that has them.
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
if [ -z "${SERVESIM_CUDA_HOME:-}" ]; then
    WHEELS=$(python3 -c 'import os, nvidia; print(os.path.join(list(nvidia.__path__)[0], "cu13"))' 2>/dev/null || true)
    [ -n "$WHEELS" ] && [ -d "$WHEELS/lib" ] && export SERVESIM_CUDA_HOME="$WHEELS"
fi
say "binary $BIN; CUDA_HOME=$CUDA_HOME SERVESIM_CUDA_HOME=${SERVESIM_CUDA_HOME:-unset}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv >>"$LOG" 2>&1
ls "$CUDA_HOME"/lib64/libnvrtc.so* "$CUDA_HOME"/lib64/libcublas.so* "${SERVESIM_CUDA_HOME:-/nonexistent}"/lib/lib{nvrtc,cublas}*.so* >>"$LOG" 2>&1
"$BIN" --version >>"$LOG" 2>&1 || { say "cannot run $BIN"; exit 1; }

# Each run has a sweep deadline inside and a hard wall-clock limit outside (kernel compilation,
# checks and fitting come on top of the sweep). 8b: ~2.5 min; 70b (three TP degrees): ~3 min.
say "llama-3-8b tp 1"
timeout 170 "$BIN" calibrate run --backend cuda --model llama-3-8b --tp 1 \
    --out "$OUT/h200-llama-3-8b.json" --csv "$OUT/h200-llama-3-8b.csv" \
    --deadline 130s --check-log "$OUT/check.log" --quiet >>"$LOG" 2>&1
say "exit $? ($(wc -l <"$OUT/h200-llama-3-8b.csv" 2>/dev/null || echo 0) csv lines)"

say "llama-3-70b tp 2,4,8"
timeout 180 "$BIN" calibrate run --backend cuda --model llama-3-70b --tp 2,4,8 \
    --out "$OUT/h200-llama-3-70b.json" --csv "$OUT/h200-llama-3-70b.csv" \
    --deadline 140s --quiet >>"$LOG" 2>&1
say "exit $? ($(wc -l <"$OUT/h200-llama-3-70b.csv" 2>/dev/null || echo 0) csv lines)"

for p in "$OUT"/h200-*.json; do
    [ -f "$p" ] && "$BIN" profile show "$p" >>"$LOG" 2>&1
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >>"$LOG" 2>&1
say "done"
tail -n 40 "$LOG"
