#!/usr/bin/env python3
"""How close servesim's own CUDA kernels come to a GPU's datasheet peaks, from a `calibrate run`
measurements CSV of llama-3-8b at TP 1 (bf16).

Usage: tools/kernel-efficiency.py HBM_GB_PER_S BF16_TFLOPS CSV [CSV ...] [--doc DOC.md]
                                  [--reference PROFILE.json --bin SERVESIM]
Prints a Markdown table; with --doc, replaces the section between the kernel-efficiency markers.
A point measured in several CSVs is taken from the last one. --reference adds the time another
profile gives the same op and size (`servesim profile query`), e.g. one imported from
AIConfigurator's database for the same GPU (`calibrate import-aic`), whose attention tables are
indexed by sequences × sequence length (a prefill with nothing cached is 1 × its chunk).

For each op and size: the time measured, the bytes it must move (weights, activations, KV) and the
FLOPs it must do, and the share of the peak each implies (the larger share is the bound the op is
nearer). The shapes are llama-3-8b's: hidden 4096, 32 query / 8 KV heads of 128, intermediate 14336.
"""
import csv
import os
import subprocess
import sys

HIDDEN, QH, KVH, HD, INTER = 4096, 32, 8, 128, 14336
BF16 = 2
GEMMS = {  # op: (K, N)
    "attn_pre_proj": (HIDDEN, (QH + 2 * KVH) * HD),
    "attn_post_proj": (QH * HD, HIDDEN),
    "mlp_up_proj": (HIDDEN, 2 * INTER),
    "mlp_down_proj": (INTER, HIDDEN),
}
BEGIN = "<!-- kernel-efficiency: written by tools/kernel-efficiency.py -->"
END = "<!-- /kernel-efficiency -->"


def gemm(op, m):
    k, n = GEMMS[op]
    return (m * k + k * n + m * n) * BF16, 2.0 * m * k * n


def decode(batch, ctx):
    kv = batch * ctx * KVH * HD * 2 * BF16  # K and V of every context token
    return kv + batch * QH * HD * 2 * BF16, 4.0 * batch * ctx * QH * HD


def prefill(chunk, cached):
    keys = chunk * cached + chunk * (chunk + 1) // 2  # causal: query i sees the cache and i + 1 new keys
    nbytes = (2 * chunk * QH * HD + 2 * (chunk + cached) * KVH * HD) * BF16
    return nbytes, 4.0 * QH * HD * keys


def rows(paths):
    points = {}
    for path in paths:
        with open(path) as f:
            for r in csv.DictReader(f):
                if r["tp"] != "1":
                    continue
                op, x1, t = r["op"], int(r["x1"]), float(r["time_ms"]) / 1e3
                x2 = int(r["x2"]) if r["x2"] else None
                if op in GEMMS and x1 in (1, 64, 1024, 16384):
                    points[(op, x1, x2)] = (f"{x1} tokens", *gemm(op, x1), t)
                elif op == "attn_decode" and (x1, x2) in ((1, 8192), (16, 1024), (16, 8192), (64, 8192)):
                    points[(op, x1, x2)] = (f"{x1} sequences × {x2} tokens", *decode(x1, x2), t)
                elif op == "attn_prefill" and (x1, x2) in ((1024, 0), (4096, 0), (1024, 2048)):
                    points[(op, x1, x2)] = (f"{x1} new over {x2} cached", *prefill(x1, x2), t)
    order = list(GEMMS) + ["attn_decode", "attn_prefill"]
    keys = sorted(points, key=lambda k: (order.index(k[0]), k[1], k[2] or 0))
    return [(*k, *points[k]) for k in keys]


def reference_us(ref, op, x1, x2):
    """The reference profile's time for the point, in µs, or None where it has no such point."""
    if ref is None:
        return None
    profile, binary = ref
    if op == "attn_prefill":
        if x2:
            return None  # its prefill tables have no cached-prefix axis
        x1, x2 = 1, x1
    cmd = [binary, "profile", "query", "--profile", profile, "--op", op, "--tp", "1", "--tokens", str(x1)]
    if x2 is not None:
        cmd += ["--context", str(x2)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: {out.stderr.strip()}")
    return float(out.stdout) * 1e3


def table(paths, gbps, tflops, ref):
    head = "| op | size | time µs | GB/s moved | share of HBM | TFLOP/s | share of BF16 |"
    rule = "|---|---|---|---|---|---|---|"
    if ref:
        head += " reference µs | time ÷ reference |"
        rule += "---|---|"
    lines = [head, rule]
    for op, x1, x2, size, nbytes, flops, t in rows(paths):
        bw, fl = nbytes / t / 1e9, flops / t / 1e12
        line = f"| {op} | {size} | {t * 1e6:,.1f} | {bw:,.0f} | {bw / gbps:.0%} | {fl:,.1f} | {fl / tflops:.0%} |"
        if ref:
            r = reference_us(ref, op, x1, x2)
            line += " – | – |" if r is None else f" {r:,.1f} | {t * 1e6 / r:.2f} |"
        lines.append(line)
    return "\n".join(lines)


def main():
    args = sys.argv[1:]
    opts = {}
    for name in ("--doc", "--reference", "--bin"):
        if name in args:
            i = args.index(name)
            opts[name] = args[i + 1] if i + 1 < len(args) else sys.exit(__doc__)
            del args[i : i + 2]
    if len(args) < 3 or ("--reference" in opts) != ("--bin" in opts):
        sys.exit(__doc__)
    gbps, tflops, paths = float(args[0]), float(args[1]), args[2:]
    ref = (opts["--reference"], opts["--bin"]) if "--reference" in opts else None
    text = table(paths, gbps, tflops, ref)
    doc = opts.get("--doc")
    if doc is None:
        print(text)
        return
    with open(doc) as f:
        body = f.read()
    if BEGIN not in body or END not in body:
        sys.exit(f"{doc}: no section between '{BEGIN}' and '{END}'")
    head, rest = body.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    made_by = " ".join(["tools/kernel-efficiency.py", *sys.argv[1:]])
    tmp = doc + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{head}{BEGIN}\n{text}\n\nWritten by `{made_by}`.\n{END}{tail}")
    os.replace(tmp, doc)


if __name__ == "__main__":
    main()
