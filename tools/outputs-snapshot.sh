#!/usr/bin/env bash
# Write every shipped scenario's outputs (simulate, plan, compare, tune) with one servesim binary into
# one folder, so two builds can be compared with `diff -r`: the check that a restructuring left
# behaviour unchanged (ARCHITECTURE.md, "Changing the code without changing the numbers").
#
#   tools/outputs-snapshot.sh BINARY OUT_DIR
#   tools/outputs-snapshot.sh /tmp/servesim-before /tmp/before
#   tools/outputs-snapshot.sh target/release/servesim /tmp/after && diff -r /tmp/before /tmp/after
set -euo pipefail
bin=$(realpath "$1"); out=$2
cd "$(dirname "$0")/.."
rm -rf "$out"; mkdir -p "$out"
out=$(realpath "$out")
for s in scenarios/*.toml; do
  name=$(basename "$s" .toml)
  # Each command's stdout is part of its output; the exit code too (3 = stopped early, 1 = refused).
  rc=0; "$bin" simulate --scenario "$s" --out "$out/simulate/$name" --report "$out/simulate/$name.html" -q \
      >"$out/simulate-$name.stdout" 2>"$out/simulate-$name.stderr" || rc=$?
  echo "$rc" >"$out/simulate-$name.rc"
  if grep -q '^\[plan\]' "$s"; then
    rc=0; "$bin" plan --scenario "$s" --out "$out/plan/$name" --report "$out/plan/$name.html" -q \
        >"$out/plan-$name.stdout" 2>"$out/plan-$name.stderr" || rc=$?
    echo "$rc" >"$out/plan-$name.rc"
  fi
done
# compare: one categorical and one numeric sweep on the default scenario, a policy sweep on two others.
rc=0; "$bin" compare --vary scheduler.max_num_seqs=32,64,128 --vary cluster.instances=1,2 \
    --out "$out/compare/chat" --report "$out/compare/chat.html" -q >"$out/compare-chat.stdout" 2>&1 || rc=$?
echo "$rc" >"$out/compare-chat.rc"
rc=0; "$bin" compare --scenario scenarios/priority.toml --vary 'scheduler.queue={kind="fcfs"},{kind="priority"}' \
    --out "$out/compare/priority" -q >"$out/compare-priority.stdout" 2>&1 || rc=$?
echo "$rc" >"$out/compare-priority.rc"
rc=0; "$bin" compare --scenario scenarios/peak.toml --vary 'cluster.router={kind="round-robin"},{kind="least-outstanding"}' \
    --out "$out/compare/peak" -q >"$out/compare-peak.stdout" 2>&1 || rc=$?
echo "$rc" >"$out/compare-peak.rc"
# tune: the peak scenario over GPUs, TP and batch limits, pruned, and within a budget of runs.
{ cat scenarios/peak.toml; printf '\n[tune]\ngpu = ["h100-sxm", "h200", "a100-80g", "l40s"]\ntp = [1, 2]\nmax_num_seqs = [64, 256]\nmax_num_batched_tokens = [2048, 8192]\n'; } >"$out/tune-peak.toml"
rc=0; "$bin" tune --scenario "$out/tune-peak.toml" --out "$out/tune/peak" --report "$out/tune/peak.html" -q \
    >"$out/tune-peak.stdout" 2>&1 || rc=$?
echo "$rc" >"$out/tune-peak.rc"
rc=0; "$bin" tune --scenario "$out/tune-peak.toml" --budget 20 --out "$out/tune/peak-budget" -q \
    >"$out/tune-peak-budget.stdout" 2>&1 || rc=$?
echo "$rc" >"$out/tune-peak-budget.rc"
# The folder itself is named in some lines: say OUT instead, so two folders compare equal.
sed -i "s|$out|OUT|g" "$out"/*.stdout "$out"/*.stderr 2>/dev/null || true
echo "wrote $out"
