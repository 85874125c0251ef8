#!/usr/bin/env bash
# The scheduler table of docs/fidelity.md: the shipped chat.toml and peak.toml under each batching
# policy (`servesim compare --vary scheduler.batching=...`), as shipped and with KV memory short
# (peak.toml on 2 instances at gpu_memory_utilization 0.3). Written into docs/fidelity.md between
# its scheduler-policies markers. About a minute on 2 cores.
#   tools/fidelity-schedulers.sh [BINARY]   (default target/release/servesim)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-target/release/servesim}")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
KINDS='scheduler.batching={kind="continuous"},{kind="chunked"},{kind="vllm-v1"},{kind="sglang"}'
"$BIN" compare --scenario scenarios/chat.toml --vary "$KINDS" --out "$TMP/chat" -q >/dev/null
"$BIN" compare --scenario scenarios/peak.toml --vary "$KINDS" --out "$TMP/peak" -q >/dev/null
"$BIN" compare --scenario scenarios/peak.toml --vary "$KINDS" --vary cluster.instances=2 \
  --vary memory.gpu_memory_utilization=0.3 --out "$TMP/short" -q >/dev/null
python3 - "$TMP" <<'PY' >"$TMP/section.md"
import csv, sys
tmp = sys.argv[1]
print("| scenario | policy | TTFT p50 | TTFT p99 | TPOT p50 | TPOT p99 | SLO met | preemptions |")
print("|---|---|---|---|---|---|---|---|")
def f(x):
    x = float(x)
    return f"{x:,.0f}" if x >= 1000 else f"{x:.4g}"
for name, label in (("chat", "chat.toml"), ("peak", "peak.toml"),
                    ("short", "peak.toml, 2 instances, gpu_memory_utilization 0.3")):
    for r in csv.DictReader(open(f"{tmp}/{name}/compare.csv")):
        if r["variant"] == "baseline":
            continue
        kind = r["scheduler.batching"].split('"')[1]
        kind += " (default)" if kind == "continuous" else ""
        print(f"| {label} | {kind} | {f(r['ttft_ms_p50'])} | {f(r['ttft_ms_p99'])} | {f(r['tpot_ms_p50'])} | "
              f"{f(r['tpot_ms_p99'])} | {float(r['attainment']) * 100:.1f}% | {r['preemptions']} |")
print()
print("Milliseconds; made by `tools/fidelity-schedulers.sh` (`servesim compare --scenario scenarios/peak.toml "
      "--vary 'scheduler.batching={kind=\"continuous\"},...'`, the last rows with `--vary cluster.instances=2 "
      "--vary memory.gpu_memory_utilization=0.3`).")
PY
python3 - docs/fidelity.md "$TMP/section.md" <<'PY'
import sys
doc, section = sys.argv[1:3]
start, end = "<!-- scheduler-policies -->", "<!-- /scheduler-policies -->"
text = open(doc).read()
a, b = text.index(start) + len(start), text.index(end)
open(doc, "w").write(text[:a] + "\n" + open(section).read() + text[b:])
PY
cat "$TMP/section.md"
