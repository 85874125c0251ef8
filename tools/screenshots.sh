#!/usr/bin/env bash
# Regenerates docs/screenshots/: the plan, compare and simulate reports of shipped scenarios,
# rendered by headless Chromium at 1400 px wide. Usage: tools/screenshots.sh [BIN]
set -euo pipefail
BIN=${1:-target/release/servesim}
OUT=docs/screenshots
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$OUT"
"$BIN" plan --scenario scenarios/peak.toml --out "$TMP/plan" --report "$TMP/plan.html" --quiet >/dev/null
"$BIN" compare --scenario scenarios/chat.toml --vary workload.arrival.rate=4,8,12,16,20,24 \
  --out "$TMP/compare" --report "$TMP/compare.html" --quiet >/dev/null
"$BIN" simulate --scenario scenarios/priority.toml --out "$TMP/simulate" --report "$TMP/simulate.html" --quiet >/dev/null
shot() { # page, png, height
  chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$TMP/profile" \
    --hide-scrollbars --window-size=1400,"$3" --screenshot="$2" "file://$1" 2>/dev/null
}
shot "$TMP/plan.html" "$OUT/plan.png" 4300
shot "$TMP/compare.html" "$OUT/compare.png" 3500
shot "$TMP/simulate.html" "$OUT/simulate.png" 4700
ls -l "$OUT"
