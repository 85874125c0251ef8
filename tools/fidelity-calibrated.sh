#!/usr/bin/env bash
# The scoreboard's calibration table of docs/fidelity.md: `validate --silicon --calibrate-by` on
# AIConfigurator's measured vLLM and SGLang runs, a calibration per (model, system, engine, TP,
# weights) fitted on each group's two lowest concurrencies and reported on its other rows, beside
# the uncalibrated figures for the same rows, every row with a BF16 KV cache. Written into
# docs/fidelity.md between its calibrated-scoreboard markers. Takes hours on 2 cores (every group is a fit).
#
#   pip download --no-deps aiconfigurator-core==0.12.0 && unzip -q aiconfigurator_core-*.whl -d aic
#   tools/fidelity-calibrated.sh aic [BINARY] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
DB=$(realpath "$1")
BIN=$(realpath "${2:-target/release/servesim}")
OUT=${3:-$(mktemp -d)}
KEYS=model_path,system,backend,tp_size,gemm_quant_mode
for b in vllm sglang; do
  if [ ! -f "$OUT/$b/silicon-calibrated.csv" ]; then
    "$BIN" validate --silicon "$DB/aiconfigurator_core/systems/silicon_sample.csv" --database "$DB" \
      --filter backend=$b --calibrate-by $KEYS --kv-cache bf16 --out "$OUT/$b" -q
  fi
done
python3 - "$OUT" <<'PY' >"$OUT/section.md"
import csv, statistics, sys
out = sys.argv[1]
rows = []
for b in ("vllm", "sglang"):
    rows += [dict(r, engine=b) for r in csv.DictReader(open(f"{out}/{b}/silicon-calibrated.csv"))]
def err(r, k, w): return abs(float(r[f"{w}_{k}_ms"]) / float(r[f"measured_{k}_ms"]) - 1) * 100
def line(label, rs):
    if not rs:
        return
    m = lambda k, w: statistics.median(err(r, k, w) for r in rs)
    groups = len({r["group"] for r in rs})
    print(f"| {label} | {groups} | {len(rs)} | {m('ttft','uncalibrated'):.1f}% | {m('ttft','calibrated'):.1f}% | {m('tpot','uncalibrated'):.1f}% | {m('tpot','calibrated'):.1f}% |")
print("| held-out rows | groups | rows | TTFT uncalibrated | TTFT calibrated | TPOT uncalibrated | TPOT calibrated |")
print("|---|---|---|---|---|---|---|")
line("vLLM", [r for r in rows if r["engine"] == "vllm"])
line("SGLang", [r for r in rows if r["engine"] == "sglang"])
line("both", rows)
better = lambda k: sum(err(r, k, "calibrated") < err(r, k, "uncalibrated") for r in rows)
print()
print(f"Median |error| over the held-out rows only (no row a fit saw). Calibrated closer than uncalibrated on "
      f"{better('ttft')} of {len(rows)} rows for TTFT, {better('tpot')} for TPOT. Made by "
      f"`tools/fidelity-calibrated.sh` (`servesim validate --silicon ... --filter backend=vllm|sglang "
      f"--calibrate-by model_path,system,backend,tp_size,gemm_quant_mode --kv-cache bf16`).")
PY
python3 - docs/fidelity.md "$OUT/section.md" <<'PY'
import sys
doc, section = sys.argv[1:3]
start = "<!-- calibrated-scoreboard: written by tools/fidelity-calibrated.sh -->"
end = "<!-- /calibrated-scoreboard -->"
text = open(doc).read()
a, b = text.index(start) + len(start), text.index(end)
open(doc, "w").write(text[:a] + "\n" + open(section).read() + text[b:])
PY
cat "$OUT/section.md"
