#!/usr/bin/env bash
# The scoreboard tables of docs/fidelity.md: `servesim validate --silicon` on AIConfigurator's
# measured serving runs, once as servesim runs it by default and once per alternative the
# document discusses, summarized by partition (model class × engine × half), per group, and the
# rows not run with their reasons. Written into docs/fidelity.md between its scoreboard markers.
# About 7 minutes on 2 cores (eleven runs of every row, two of the TensorRT-LLM rows, one of the SGLang rows).
#
#   pip download --no-deps aiconfigurator-core==0.12.0 && unzip -q aiconfigurator_core-*.whl -d aic
#   tools/fidelity-scoreboard.sh aic [BINARY] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
DB=$(realpath "$1")
BIN=$(realpath "${2:-target/release/servesim}")
OUT=${3:-$(mktemp -d)}
CSV="$DB/aiconfigurator_core/systems/silicon_sample.csv"
run() { # name, extra flags...
  local name=$1
  shift
  if [ ! -f "$OUT/$name/silicon.csv" ]; then
    "$BIN" validate --silicon "$CSV" --database "$DB" --out "$OUT/$name" -q "$@"
  fi
}
run default
run defaults --engine-limits defaults
run generator --engine-limits generator
run kvbf16 --kv-cache bf16
run pool --prompt-pool 100
run frontend --frontend
run schedulers --engine-schedulers
run balanced --moe-distribution balanced
run roofline --roofline
run adp --adp-balance
run staggered-trtllm --staggered --filter backend=trtllm
run staggered-trtllm-adp --staggered --adp-balance --filter backend=trtllm
run clients --clients source
run kvfp8 --kv-cache fp8 --filter backend=sglang
python3 - "$OUT" "$CSV" <<'PY' >"$OUT/section.md"
import csv, json, statistics, sys
out = sys.argv[1]
DP_IDS = {r["id"] for r in csv.DictReader(open(sys.argv[2])) if int(r["attention_dp_size"] or 1) > 1}
def rows(name):
    return [r for r in csv.DictReader(open(f"{out}/{name}/silicon.csv")) if r["predicted_ttft_ms"]]
KINDS = {}
def kind(r):
    # A row's kind as run by default (under `--roofline` every row's status says roofline).
    if r["line"] in KINDS:
        return KINDS[r["line"]]
    if r["status"].startswith("roofline"):
        return "roofline"
    m = r["model"]
    if m.startswith("deepseek"):
        return "mla"
    if m.startswith("gpt-oss"):
        return "windowed"
    if m.startswith("qwen3-235b") or m.startswith("qwen3-30b"):
        return "moe"
    if m.startswith("minimax"):
        return "minimax"
    if m.startswith("kimi"):
        return "kimi"
    return "dense"
VS = lambda r: r["framework"] in ("vllm", "sglang")
TRT = lambda r: r["framework"] == "trtllm"
PARTS = [
    ("dense, vLLM + SGLang, fit half", lambda r: kind(r) == "dense" and VS(r) and r["half"] == "fit"),
    ("dense, vLLM + SGLang, report half", lambda r: kind(r) == "dense" and VS(r) and r["half"] == "report"),
    ("dense, vLLM + SGLang, all", lambda r: kind(r) == "dense" and VS(r)),
    ("dense, TensorRT-LLM, fit half", lambda r: kind(r) == "dense" and TRT(r) and r["half"] == "fit"),
    ("dense, TensorRT-LLM, report half", lambda r: kind(r) == "dense" and TRT(r) and r["half"] == "report"),
    ("Qwen3 MoE, vLLM + SGLang", lambda r: kind(r) == "moe" and VS(r)),
    ("Qwen3 MoE, TensorRT-LLM", lambda r: kind(r) == "moe" and TRT(r)),
    ("MiniMax-M2.5 (MoE), vLLM, database", lambda r: kind(r) == "minimax"),
    ("Kimi-K2.5 (latent attention, MoE), vLLM, database", lambda r: kind(r) == "kimi"),
    ("gpt-oss-120b (windowed, MoE), database", lambda r: kind(r) == "windowed"),
    ("DeepSeek-R1/V3 (latent attention), database", lambda r: kind(r) == "mla"),
    ("priced by the roofline (kernels the database lacks)", lambda r: kind(r) == "roofline"),
    ("every row run", lambda r: True),
]
def med(rs, k, signed=False):
    v = [float(r[f"{k}_error_pct"]) for r in rs]
    return statistics.median(v if signed else [abs(x) for x in v])
def cell(rs):
    return f"{med(rs, 'ttft'):.1f}% / {med(rs, 'tpot'):.1f}%" if rs else "—"
VARIANTS = [
    ("default", "as run by default"),
    ("defaults", "`--engine-limits defaults`"),
    ("generator", "`--engine-limits generator`"),
    ("kvbf16", "`--kv-cache bf16`"),
    ("pool", "`--prompt-pool 100`"),
    ("frontend", "`--frontend`"),
    ("schedulers", "`--engine-schedulers`"),
    ("balanced", "`--moe-distribution balanced`"),
    ("roofline", "`--roofline`"),
]
data = {name: rows(name) for name, _ in VARIANTS}
KINDS.update({r["line"]: kind(r) for r in data["default"]})
print("<!-- scoreboard-partitions -->")
print("| rows (count as run by default) | " + " | ".join(label for _, label in VARIANTS) + " |")
print("|---|" + "---|" * len(VARIANTS))
for label, pred in PARTS:
    n = sum(1 for r in data["default"] if pred(r))
    print(f"| {label} ({n}) | " + " | ".join(cell([r for r in data[v] if pred(r)]) for v, _ in VARIANTS) + " |")
summary = json.load(open(f"{out}/default/silicon.json"))
print()
print(f"Median |error| of mean TTFT / mean TPOT per partition; {summary['run']} of {summary['rows']} rows run. "
      "Halves are a hash of the row's id; the engine overheads (below) were fitted on the fit half only. "
      "Made by `tools/fidelity-scoreboard.sh` (`servesim validate --silicon .../silicon_sample.csv "
      "--database aic`, then once with each flag in the header).")
print("<!-- /scoreboard-partitions -->")
print()
print("<!-- scoreboard-kv -->")
by_line = {r["line"]: r for r in data["default"]}
ratio = lambda r: float(r["predicted_ttft_ms"]) / float(r["measured_ttft_ms"])
over = [r for r in data["kvbf16"] if ratio(r) >= 10 and r["line"] in by_line]
now = [ratio(by_line[r["line"]]) for r in over]
within = sum(1 for x in now if 0.5 <= x <= 2)
print(f"Of the {len(over)} rows `--kv-cache bf16` predicts at 10× the measured TTFT or more "
      f"({min(ratio(r) for r in over):.0f}–{max(ratio(r) for r in over):.0f}×), run as by default "
      f"{within} are within 2× of it, {sum(1 for x in now if x > 2)} above 2× "
      f"(up to {max(now):.0f}×) and {sum(1 for x in now if x < 0.5)} under half of it "
      f"(down to {min(now):.2f}×); over all rows, {sum(1 for r in data['default'] if ratio(r) >= 10)} "
      f"are at 10× or more by default, {len([r for r in data['kvbf16'] if ratio(r) >= 10])} with `--kv-cache bf16`. "
      "Made by `tools/fidelity-scoreboard.sh`.")
print()
full = [r for r in data["default"] if int(r["concurrency"]) * (int(r["isl"]) + int(r["osl"])) > int(r["kv_tokens"])]
fr = [ratio(r) for r in full]
print(f"Over-full rows, whose clients' full lengths C × (ISL + OSL) exceed the KV pool servesim sizes for "
      f"them (`kv_tokens` in silicon.csv), run as by default: {len(full)}, of which {sum(1 for x in fr if 0.5 <= x <= 2)} "
      f"are within 2× of the measured TTFT, {sum(1 for x in fr if x > 2)} above 2× (up to {max(fr):.0f}×) and "
      f"{sum(1 for x in fr if x < 0.5)} under half of it (down to {min(fr):.2f}×); median |TTFT error| "
      f"{statistics.median(abs(float(r['ttft_error_pct'])) for r in full):.1f}%, "
      f"{sum(1 for r in full if int(r['preemptions']) > 0)} of them with preemptions. Made by `tools/fidelity-scoreboard.sh`.")
print()
# Over-full rows whose measured TTFT no pool explains: another deployment of the same model,
# engine, weights, lengths and clients, with a pool servesim sizes larger, measured more than
# twice the TTFT.
same = lambda r: (r["model"], r["framework"], r["weights"], r["isl"], r["osl"], r["concurrency"])
pairs = sorted({(a["line"], b["line"]) for b in full for a in data["default"]
                if a is not b and same(a) == same(b) and int(a["kv_tokens"]) > 1.1 * int(b["kv_tokens"])
                and float(a["measured_ttft_ms"]) > 2 * float(b["measured_ttft_ms"])})
if pairs:
    a, b = max(((by_line[x], by_line[y]) for x, y in pairs),
               key=lambda p: float(p[0]["measured_ttft_ms"]) / float(p[1]["measured_ttft_ms"]))
    dep = lambda r: f"{r['system']} TP {r['tp']}: {float(r['measured_ttft_ms']) / 1000:.1f} s, {int(r['kv_tokens']):,} tokens"
    print(f"No pool reconciles {len(pairs)} pairs of these rows: the same model, engine, weights, lengths and "
          f"clients measured more than twice the TTFT on the deployment servesim sizes the larger pool for — "
          f"{a['model']} {a['weights']} under {a['framework']} at {a['isl']}/{a['osl']} with {a['concurrency']} "
          f"clients: {dep(a)} of KV against {dep(b)}. Made by `tools/fidelity-scoreboard.sh`.")
print()
# Requests decoding at a time, measured against predicted (Little's law on the row's clients).
x2 = lambda x: f"{x:.2f}×" if x >= 0.01 else f"{x:.3f}×"
dec = lambda r, side: float(r[f"{side}_decoding"])
every = data["default"]
fewer = [r for r in every if 2 * dec(r, "measured") <= dec(r, "predicted")]
more = [r for r in every if dec(r, "measured") >= 2 * dec(r, "predicted")]
print(f"Requests decoding at a time (`measured_decoding` and `predicted_decoding` in silicon.csv: Little's law "
      f"on the row's C clients, C × D ÷ (TTFT + D) with D = (mean OSL − 1) × TPOT, from the measured and from the "
      f"predicted TTFT and TPOT), run as by default: within 2× of each other on "
      f"{len(every) - len(fewer) - len(more):,} of {len(every):,} rows; the measured count is half the predicted one or "
      f"less on {len(fewer)} and twice it or more on {len(more)}. Where they differ, the run and servesim held "
      f"different numbers of requests at once, which kernel times alone do not explain: the {len(fewer)} rows' "
      f"median predicted ÷ measured TTFT is {x2(statistics.median(ratio(r) for r in fewer))}." if fewer else "")
groups = {}
for r in fewer:
    groups.setdefault((r["model"], r["system"], r["framework"], r["concurrency"]), []).append(r)
(m, system, fw, c), g = max(groups.items(), key=lambda kv: (len(kv[1]), kv[0])) if groups else ((0,) * 4, [])
if len(g) >= 3:
    lo, hi = min(dec(r, "measured") for r in g), max(dec(r, "measured") for r in g)
    tps = sorted({int(r["tp"]) for r in g})
    shapes = sorted({f"{r['isl']}/{r['osl']}" for r in g})
    print()
    print(f"{len(g)} of them are {m} on {system} under {fw} with {c} clients: measured {lo:.1f} to {hi:.1f} "
          f"decoding at a time at TP {', '.join(map(str, tps))} and lengths {', '.join(shapes)}, where servesim's "
          f"pools ({min(int(r['kv_tokens']) for r in g):,} to {max(int(r['kv_tokens']) for r in g):,} tokens) run "
          f"{min(dec(r, 'predicted') for r in g):.0f} to {max(dec(r, 'predicted') for r in g):.0f}; "
          + ("about the same count whatever the GPUs and lengths, a bound on requests at once that the rows do "
             "not record (a server limit or the client's connections), which servesim cannot know. "
             if hi <= 1.25 * lo else "")
          + f"Their TTFT is predicted at {x2(min(ratio(r) for r in g))} to {x2(max(ratio(r) for r in g))} the "
          "measured. Made by `tools/fidelity-scoreboard.sh`.")
# The rows that decoded twice servesim's count or more, against an FP8 cache's pool.
fp8 = {r["line"]: r for r in rows("kvfp8")}
twice = [(r, fp8[r["line"]]) for r in more if r["line"] in fp8 and r["kv_cache"] != "fp8"]
if twice:
    ids = sorted({(r["model"], r["system"], r["framework"], r["version"], r["isl"], r["osl"], r["concurrency"]) for r, _ in twice})
    one = lambda r, f: (f"{r['model']} on {r['system']} under {r['framework']} {r['version']} at {r['isl']}/{r['osl']} "
                        f"with {r['concurrency']} clients: measured {dec(r, 'measured'):.1f} decoding at a time, "
                        f"servesim's {r['kv_cache'].upper()} pool ({int(r['kv_tokens']):,} tokens) {dec(r, 'predicted'):.1f}, "
                        f"an FP8 cache's ({int(f['kv_tokens']):,}) {dec(f, 'predicted'):.1f}, TTFT {x2(ratio(r))} → "
                        f"{x2(ratio(f))} the measured")
    firsts = [next((r, f) for r, f in twice if (r["model"], r["system"], r["framework"], r["version"], r["isl"], r["osl"], r["concurrency"]) == k) for k in ids]
    print()
    print(f"The {len(twice)} rows that decoded twice servesim's count or more (SGLang's `auto` cache, BF16 for "
          f"these checkpoints, assumed) held what an FP8 cache holds (`--kv-cache fp8`): "
          + "; ".join(one(r, f) for r, f in firsts)
          + ". The rows do not record their cache; FP8 is the other assumption, reported, not the default "
          "(docs/fidelity.md). Made by `tools/fidelity-scoreboard.sh`.")
print("<!-- /scoreboard-kv -->")
print()
print("<!-- scoreboard-recipes -->")
gen = {r["line"]: r for r in data["generator"]}
recipe = [r for r in data["default"] if r["limits"] == "recipe"]
def ratios(rs):
    v = [ratio(r) for r in rs]
    if not v:
        return "—"
    return f"{min(v):.2f}–{max(v):.2f}×" if min(v) < max(v) else f"{v[0]:.2f}×"
print("| rows run by a recipe | rows | TTFT / TPOT, recipe (default) | TTFT / TPOT, `--engine-limits generator` | predicted ÷ measured TTFT, recipe | the same, generator |")
print("|---|---|---|---|---|---|")
DSR1 = lambda r: r["model"].startswith("deepseek")
OSS = lambda r: r["model"] == "gpt-oss-120b"
SGL = lambda r: DSR1(r) and r["framework"] == "sglang"
parts = [("DeepSeek, B200, FP8 (SGLang)", lambda r: SGL(r) and r["system"] == "b200_sxm" and r["weights"] == "fp8-block"),
         ("DeepSeek, B200, FP4 (SGLang)", lambda r: SGL(r) and r["system"] == "b200_sxm" and r["weights"] == "fp4"),
         ("DeepSeek, H200, FP8 (SGLang)", lambda r: SGL(r) and r["system"] == "h200_sxm"),
         ("gpt-oss-120b, H100 (vLLM)", lambda r: OSS(r) and r["system"] == "h100_sxm"),
         ("gpt-oss-120b, H200 (vLLM)", lambda r: OSS(r) and r["system"] == "h200_sxm"),
         ("gpt-oss-120b, B200 (vLLM)", lambda r: OSS(r) and r["system"] == "b200_sxm" and r["framework"] == "vllm"),
         ("DeepSeek, B200, FP8 (TensorRT-LLM)", lambda r: DSR1(r) and r["framework"] == "trtllm" and r["weights"] == "fp8-block"),
         ("DeepSeek, B200, FP4 (TensorRT-LLM)", lambda r: DSR1(r) and r["framework"] == "trtllm" and r["weights"] == "fp4"),
         ("gpt-oss-120b, B200 (TensorRT-LLM)", lambda r: OSS(r) and r["framework"] == "trtllm"),
         ("all", lambda r: True)]
for label, pred in parts:
    rs = [r for r in recipe if pred(r)]
    # A row the generator's settings cannot run (its weights do not load) has no cell there.
    gs = [gen[r["line"]] for r in rs if r["line"] in gen]
    fewer = f" ({len(gs)} run)" if len(gs) < len(rs) else ""
    print(f"| {label} | {len(rs)} | {cell(rs)} | {cell(gs)}{fewer} | {ratios(rs)} | {ratios(gs)} |")
def pools(rs):
    v = [int(r["kv_tokens"]) for r in rs] or [0]
    return f"{min(v):,}–{max(v):,}" if min(v) < max(v) else f"{v[0]:,}"
full_gen = [r for r in data["generator"] if int(r["concurrency"]) * (int(r["isl"]) + int(r["osl"])) > int(r["kv_tokens"])]
ran = [by_line[r["line"]] for r in full_gen if by_line.get(r["line"], {}).get("limits") == "recipe"]
print()
recipe_runs = (
    f"{len(ran)} run a recipe by default: predicted ÷ measured TTFT "
    f"{ratios([gen[r['line']] for r in ran])} under the generator's limits, {ratios(ran)} under the recipe "
    f"(its pool {pools(ran)} tokens)"
    if ran
    else "none of them runs a recipe by default"
)
print(f"Of the {len(full_gen)} rows over-full under `--engine-limits generator` (C × (ISL + OSL) above the pool "
      f"servesim sizes under it), {recipe_runs}. "
      "Median |error| of mean TTFT / mean TPOT; made by `tools/fidelity-scoreboard.sh`.")
# TTFT at 4 clients as a fixed part plus a part per prompt token: the line through the medians at
# ISL 1,024 and 8,192 (the same TP), measured and predicted.
fixed = {}
for r in recipe:
    if r["concurrency"] == "4" and r["isl"] in ("1024", "8192"):
        model = "DeepSeek-R1/V3" if r["model"].startswith("deepseek") else r["model"]
        engine = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}[r["framework"]]
        key = (model, r["system"].split("_")[0].upper(), engine, r["weights"], r["tp"])
        fixed.setdefault(key, {}).setdefault(int(r["isl"]), []).append(r)
lines = []
for key, by_isl in sorted(fixed.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2], kv[0][3], int(kv[0][4]))):
    if len(by_isl) < 2:
        continue
    def fit(k):
        short = statistics.median(float(r[k]) for r in by_isl[1024])
        slope = (statistics.median(float(r[k]) for r in by_isl[8192]) - short) / 7168
        return short - slope * 1024, slope * 1000
    (ma, mb), (pa, pb) = fit("measured_ttft_ms"), fit("predicted_ttft_ms")
    model, system, engine, weights, tp = key
    lines.append(f"| {model}, {system}, {engine}, {weights}, TP {tp} | {ma:.0f} | {pa:.0f} | {mb:.1f} | {pb:.1f} |")
if lines:
    print()
    print("| recipe rows at 4 clients | fixed TTFT, measured (ms) | predicted | per 1,000 prompt tokens, measured (ms) | predicted |")
    print("|---|---|---|---|---|")
    print("\n".join(lines))
    print()
    print("The line through the median TTFTs at ISL 1,024 and 8,192 (each drawn from [0.8 L, L], the same in both): "
          "its value at no prompt and its slope. Made by `tools/fidelity-scoreboard.sh`.")
mtp = [r for r in data["default"] if "speculative decoding (MTP" in r["status"]]
keys = {(r["model"], r["system"], r["framework"], r["weights"]) for r in mtp}
rest = [r for r in data["default"] if (r["model"], r["system"], r["framework"], r["weights"]) in keys and r not in mtp]
if mtp:
    print()
    print(f"{len(mtp)} TensorRT-LLM rows name an image that only InferenceX's DeepSeek-R1 MTP configs ran on their day "
          f"(silicon.csv's status says so): servesim runs them without speculative decoding, and their TPOT is "
          f"predicted {med(mtp, 'tpot', True):+.1f}% (median signed error; TTFT {med(mtp, 'ttft', True):+.1f}%) against "
          f"{med(rest, 'tpot', True):+.1f}% ({med(rest, 'ttft', True):+.1f}%) for the {len(rest)} other rows of their groups.")
print("<!-- /scoreboard-recipes -->")
print()
print("<!-- scoreboard-groups -->")
print("| model | system | engine | weights | rows | TTFT | TTFT signed | TPOT | TPOT signed | TTFT, pool 100 | TPOT, pool 100 |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
def by_group(rs):
    groups = {}
    for r in rs:
        groups.setdefault((r["model"], r["system"], r["framework"], r["weights"]), []).append(r)
    return groups
groups, pooled = by_group(data["default"]), by_group(data["pool"])
for key in sorted(groups):
    rs, ps = groups[key], pooled.get(key, [])
    pool = f"{med(ps, 'ttft'):.1f}% | {med(ps, 'tpot'):.1f}%" if ps else "— | —"
    print(f"| {' | '.join(key)} | {len(rs)} | {med(rs, 'ttft'):.1f}% | {med(rs, 'ttft', True):+.1f}% | "
          f"{med(rs, 'tpot'):.1f}% | {med(rs, 'tpot', True):+.1f}% | {pool} |")
print()
print("Median |error| and median signed error per group as run by default, and with `--prompt-pool 100`; made by `tools/fidelity-scoreboard.sh`.")
print("<!-- /scoreboard-groups -->")
print()
print("<!-- scoreboard-dp -->")
dp_runs = [
    ("default", "as run by default"),
    ("adp", "`--adp-balance`"),
    ("staggered-trtllm", "`--staggered`"),
    ("staggered-trtllm-adp", "`--staggered --adp-balance`"),
]
for name, _ in dp_runs:
    data.setdefault(name, rows(name))
dp = {name: [r for r in data[name] if r["id"] in DP_IDS] for name, _ in dp_runs}
lines = {r["line"] for r in dp["default"]}
engines = sorted({r["framework"] for r in dp["default"]})
print(f"| rows with DP attention ({len(lines)}; {', '.join(engines)}) | TTFT | TTFT signed | TPOT | TPOT signed |")
print("|---|---|---|---|---|")
for name, label in dp_runs:
    rs = [r for r in dp[name] if r["line"] in lines]
    print(f"| {label} ({len(rs)}) | {med(rs, 'ttft'):.1f}% | {med(rs, 'ttft', True):+.1f}% | "
          f"{med(rs, 'tpot'):.1f}% | {med(rs, 'tpot', True):+.1f}% |")
print()
trt = {name: [r for r in data[name] if TRT(r)] for name in ("default", "staggered-trtllm")}
print(f"Median |error| and median signed error of the rows with DP attention. Over all {len(trt['default'])} "
      f"TensorRT-LLM rows, TTFT / TPOT {cell(trt['default'])} as run by default and {cell(trt['staggered-trtllm'])} "
      "with `--staggered`. Made by `tools/fidelity-scoreboard.sh`.")
print("<!-- /scoreboard-dp -->")
print()
print("<!-- scoreboard-trtllm-waits -->")
ttft = {}
for r in data["default"]:
    if r["framework"] == "trtllm" and r["model"] == "llama-3.1-70b":
        ttft[(r["system"], r["weights"], r["tp"], r["isl"], r["osl"], r["concurrency"])] = float(r["measured_ttft_ms"])
pairs = {}
for (system, weights, tp, isl, osl, c), t in ttft.items():
    other = ttft.get((system, weights, tp, isl, "8192", c))
    if isl == "1024" and osl == "1024" and other:
        pairs.setdefault("TP 8" if tp == "8" else "TP 1, 2 and 4", []).append(t / other)
print("| Llama-3.1-70B on TensorRT-LLM | pairs | measured TTFT 1024/1024 ÷ 1024/8192, median | min | max |")
print("|---|---|---|---|---|")
for label in ("TP 1, 2 and 4", "TP 8"):
    v = pairs.get(label, [])
    if v:
        print(f"| {label} | {len(v)} | {statistics.median(v):.2f} | {min(v):.2f} | {max(v):.2f} |")
print()
print("Pairs of rows with the same system, weights, TP and concurrency; computed from silicon_sample.csv's "
      "measured TTFT by `tools/fidelity-scoreboard.sh`.")
print("<!-- /scoreboard-trtllm-waits -->")
print()
print("<!-- scoreboard-not-run -->")
def reason_class(reason):
    if reason.startswith("model "):
        return "model without a servesim preset"
    if reason.startswith("mode disagg"):
        return "disaggregated (prefill and decode workers)"
    if reason.startswith("moe_tp_size"):
        return "MoE TP different from the attention TP"
    if reason.startswith("tp_size"):
        return "more than 8 GPUs (one node)"
    return reason
reasons = {}
for reason, count in summary["not_run"].items():
    reasons[reason_class(reason)] = reasons.get(reason_class(reason), 0) + count
print("| not run | rows |")
print("|---|---|")
for head, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
    print(f"| {head} | {count} |")
print()
print("Counted from silicon.json's `not_run` (which gives every reason in full); made by `tools/fidelity-scoreboard.sh`.")
print("<!-- /scoreboard-not-run -->")
print()
print("<!-- scoreboard-clients -->")
# Rows whose id and silicon_concurrency name more clients than batch_size × ranks, under both.
src = {r["line"]: r for r in rows("clients")}
two = [(r, src[r["line"]]) for r in data["default"] if r["line"] in src and src[r["line"]]["concurrency"] != r["concurrency"]]
med_abs = lambda rs, k: statistics.median(abs(float(x[k])) for x in rs)
if two:
    a, b = [r for r, _ in two], [s for _, s in two]
    times = [int(s["concurrency"]) / int(r["concurrency"]) for r, s in two]
    print(f"Of the rows run, {len(two)} name another number of clients in their id and `silicon_concurrency` than "
          f"their `batch_size` × attention-DP ranks ({min(times):.3g} to {max(times):.3g} times as many). servesim runs "
          f"the `batch_size` reading (`--clients batch-size`, AIConfigurator's, whose batch_size is each worker's), "
          f"and each row's note names both. Median |error| of mean TTFT / mean TPOT over them: "
          f"{med_abs(a, 'ttft_error_pct'):.1f}% / {med_abs(a, 'tpot_error_pct'):.1f}% so, "
          f"{med_abs(b, 'ttft_error_pct'):.1f}% / {med_abs(b, 'tpot_error_pct'):.1f}% with the id's clients on one "
          "instance (`--clients source`): neither reading brings them near, and the rows record nothing else "
          "(workers, a router) that would decide between them. Made by `tools/fidelity-scoreboard.sh`.")
print("<!-- /scoreboard-clients -->")
PY
python3 - docs/fidelity.md "$OUT/section.md" <<'PY'
import re, sys
doc, section = sys.argv[1:3]
text = open(doc).read()
for m in re.finditer(r"<!-- (scoreboard-[a-z-]+) -->\n.*?<!-- /\1 -->", open(section).read(), re.S):
    name = m.group(1)
    a = text.index(f"<!-- {name} -->")
    b = text.index(f"<!-- /{name} -->") + len(f"<!-- /{name} -->")
    text = text[:a] + m.group(0) + text[b:]
open(doc, "w").write(text)
PY
cat "$OUT/section.md"
