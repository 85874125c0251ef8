#!/usr/bin/env bash
# Regenerates docs/screenshots/: the plan, compare, simulate and tune reports of shipped scenarios,
# rendered by headless Chromium at 1400 px wide. Usage: tools/screenshots.sh [BIN]
set -euo pipefail
BIN=${1:-target/release/servesim}
OUT=docs/screenshots
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$OUT"
"$BIN" plan --scenario scenarios/peak.toml --out "$TMP/plan" --report "$TMP/plan.html" --quiet >/dev/null
# compare: three routers over a rising load on two instances of the chat scenario, a curve per router.
sed 's/^instances = 1$/instances = 2/' scenarios/chat.toml >"$TMP/chat2.toml"
"$BIN" compare --scenario "$TMP/chat2.toml" \
  --vary 'cluster.router={kind="round-robin"},{kind="random"},{kind="least-outstanding"}' \
  --vary workload.arrival.rate=10,20,30,40,45,50 --out "$TMP/compare" --report "$TMP/compare.html" --quiet >/dev/null
"$BIN" simulate --scenario scenarios/priority.toml --out "$TMP/simulate" --report "$TMP/simulate.html" --quiet >/dev/null
# tune: the peak scenario over GPUs, TP and batch limits.
{ cat scenarios/peak.toml; printf '\n[tune]\ngpu = ["h100-sxm", "h200", "a100-80g", "l40s"]\ntp = [1, 2]\nmax_num_seqs = [64, 256]\nmax_num_batched_tokens = [2048, 8192]\n'; } >"$TMP/tune.toml"
"$BIN" tune --scenario "$TMP/tune.toml" --out "$TMP/tune" --report "$TMP/tune.html" --quiet >/dev/null
shot() { # page, png, height
  chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$TMP/profile" \
    --hide-scrollbars --window-size=1400,"$3" --screenshot="$2" "file://$1" 2>/dev/null
}
shot "$TMP/plan.html" "$OUT/plan.png" 4300
shot "$TMP/compare.html" "$OUT/compare.png" 3500
shot "$TMP/simulate.html" "$OUT/simulate.png" 4700
shot "$TMP/tune.html" "$OUT/tune.png" 1900
ls -l "$OUT"
