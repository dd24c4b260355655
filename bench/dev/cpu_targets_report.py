#!/usr/bin/env python3
"""Tables of the CPU speed targets, before and after, from `xattn bench` results.json files.

    python3 bench/dev/cpu_targets_report.py AFTER.json[,AFTER2.json...] [BEFORE.json,...]

Each list holds the runs of one build (results.json files, schema xattn.bench/1);
a cell's figure is the median over the runs of each run's median time, so one
noisy run on a shared machine does not decide it. The ceilings are those the
AFTER runs recorded (`xattn devices --measure` on the same machine). A cell is
one (algorithm, case, CPU threads); files written before `threads` existed
give their run's --threads setting (0: every core).
"""
import json
import statistics
import sys


def cells_of(paths):
    cells, ceil, cores = {}, {}, 0
    for path in paths:
        doc = json.load(open(path))
        for dev in doc.get("devices", []):
            if dev.get("backend") == "cpu" or not ceil:
                ceil = dev.get("ceilings") or ceil
                cores = dev.get("compute_units") or cores
        setting = doc.get("settings", {}).get("threads", 0)
        for r in doc["results"]:
            if r.get("status") != "ok" or r.get("backend") != "cpu":
                continue
            t = r.get("threads") or setting or 0
            cells.setdefault((r["algo"], r["case"], t), []).append(r)
    return cells, ceil, cores


def kv_bytes(r):
    es = {"f32": 4, "f16": 2, "bf16": 2}[r["kv_dtype"]]
    return r["batch"] * r["sk"] * r["kv_heads"] * (r["head_dim"] + r["head_dim_v"]) * es


def median_ms(runs):
    return statistics.median(r["median_ms"] for r in runs)


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    after, ceil, cores = cells_of(argv[1].split(","))
    before = cells_of(argv[2].split(","))[0] if len(argv) > 2 else {}
    fma, bw = ceil.get("fma_f32_gflops"), ceil.get("read_gbps")
    if not fma or not bw:
        sys.exit("no CPU ceilings in the AFTER files: run `xattn devices --measure` first")
    cores = cores or 1

    def full(t):  # thread count as a number (0 = every core)
        return cores if not t else t

    def before_ms(a, c, t):
        for (a2, c2, t2), runs in before.items():
            if a2 == a and c2 == c and full(t2) == full(t):
                return median_ms(runs)
        return None

    print(f"ceilings: f32 FMA {fma:.1f} GFLOP/s, read {bw:.1f} GB/s, {cores} cores\n")
    print("| algo | case | threads | before ms | before | after ms | after | speed-up | runs |")
    print("|---|---|---|---|---|---|---|---|---|")
    phases = []
    for (a, c, t), runs in sorted(after.items(), key=lambda x: (x[0][0] != "flash", x[0][1], x[0][2])):
        ms, b = median_ms(runs), before_ms(a, c, t)
        share = full(t) / cores  # the ceiling pro-rated to the cores used
        if a == "splitkv":
            def fig(m):
                g = kv_bytes(runs[0]) / m / 1e6
                return f"{g:.1f} GB/s K/V, {100 * g / bw:.0f}% of read"
        else:
            def fig(m):
                g = runs[0]["flops_useful"] / m / 1e6
                return f"{g:.0f} GFLOP/s, {100 * g / (fma * share):.0f}% of FMA" + (
                    " (per core)" if share < 1 else "")
        bcol = f"{b:.2f} | {fig(b)}" if b else "- | -"
        spd = f"{b / ms:.2f}x" if b else "-"
        print(f"| {a} | {c} | {full(t)} | {bcol} | {ms:.2f} | {fig(ms)} | {spd} | {len(runs)} |")
        if a == "naive":
            per = {}
            for r in runs:
                for p in r.get("phases") or []:
                    per.setdefault(p["name"], []).append(p["ms"])
            half = runs[0]["flops_useful"] / 2  # QK^T and PV: half the FLOPs each
            line = []
            for name, v in per.items():
                m = statistics.median(v)
                pct = "" if name == "softmax" else f", {100 * half / m / 1e6 / (fma * share):.0f}%"
                line.append(f"{name} {m:.1f} ms{pct}")
            phases.append(f"- naive {c}, {full(t)} thread(s): " + "; ".join(line))
    if phases:
        print("\nNAIVE phases (last timed call of each run, median over runs; % of the FMA "
              "ceiling for the qk and pv products):\n")
        print("\n".join(phases))
    scaling = {}
    for (a, c, t), runs in after.items():
        scaling.setdefault((a, c), {})[full(t)] = median_ms(runs)
    rows = [(a, c, v) for (a, c), v in sorted(scaling.items()) if len(v) > 1]
    if rows:
        print("\n| algo | case | 1 thread ms | all threads ms | speed-up |")
        print("|---|---|---|---|---|")
        for a, c, v in rows:
            lo, hi = min(v), max(v)
            print(f"| {a} | {c} | {v[lo]:.2f} | {v[hi]:.2f} | {v[lo] / v[hi]:.2f}x |")


if __name__ == "__main__":
    main(sys.argv)
