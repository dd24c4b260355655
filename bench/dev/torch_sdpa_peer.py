#!/usr/bin/env python3
"""xattn's CPU backend against PyTorch's CPU scaled_dot_product_attention, side by side.

    python3 bench/dev/torch_sdpa_peer.py [--xattn PATH] [--rounds N] [--reps N] [--threads N]
                                         [--isa best|avx2|avx512] [--layout bshd|bhsd]
                                         [--case SPEC ...] [--markdown] [--json FILE]

For each case, `xattn run` (a separate process, timed on its own clock) and torch SDPA
(in this process, timed call by call) take turns for --rounds rounds, the one that goes
first alternating; each turn is --reps timed calls after one warm-up call. A round's
ratio is torch's fastest call over xattn's fastest call in that round (above 1: xattn is
faster), so the two figures of a ratio come from the same minute; the summary gives the
median of the rounds' ratios and each side's fastest call over all rounds, with xattn's
rate at its fastest call in the unit of its ceiling (useful GFLOP/s for prefill, as
`xattn run` counts them; K/V GB/s for decode, each byte once), to set against
`xattn devices --measure`.

Both sides get the same shapes, dtypes, memory layout, causal mask and thread count.
--isa avx2 runs xattn with --cpu-simd avx2 and torch with ATEN_CPU_CAPABILITY=avx2 and
ONEDNN_MAX_CPU_ISA=AVX2 (set before torch is imported), to measure an AVX2 machine on a
CPU that also has AVX-512; --isa best lets each library pick. The torch kernel that ran
(torch._fused_sdp_choice) is printed with each case: on CPU, FLASH_ATTENTION for these
shapes.

Default cases (issue 25): FLASH f32 B1 H32/8 D128 S2048 not causal and causal, FLASH bf16
of the same shape causal, FLASH f32 B1 H12 D64 S1024, SPLITKV f32 decode B8 H32/8 D128
Sq1 Sk8192. A --case SPEC is comma-separated key=value pairs over these defaults:
algo=flash dtype=f32 batch=1 heads=32 kv_heads=8 head_dim=128 sq=2048 sk=2048 causal=0
(e.g. --case heads=12,kv_heads=12,head_dim=64,sq=1024,sk=1024). Causal masks are
bottom-right aligned on the xattn side and torch's top-left is_causal on the other, which
agree when sq == sk; a causal case with sq != sk is refused.

Without torch importable the script says so and exits with status 0 (it is optional);
a failed xattn run exits with status 1, a bad command line with status 2.
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

DEFAULTS = dict(algo="flash", dtype="f32", batch=1, heads=32, kv_heads=8, head_dim=128,
                sq=2048, sk=2048, causal=0)
INT_KEYS = ("batch", "heads", "kv_heads", "head_dim", "sq", "sk", "causal")
DEFAULT_CASES = [
    "",
    "causal=1",
    "dtype=bf16,causal=1",
    "heads=12,kv_heads=12,head_dim=64,sq=1024,sk=1024",
    "algo=splitkv,batch=8,sq=1,sk=8192",
]
TORCH_ISA = {"avx2": ("avx2", "AVX2"), "avx512": ("avx512", "AVX512_CORE")}


def parse_case(spec):
    case = dict(DEFAULTS)
    for item in filter(None, spec.split(",")):
        key, sep, val = item.partition("=")
        if not sep or key not in case:
            raise ValueError(f"--case: '{item}' is not key=value with a key of {sorted(case)}")
        if key in INT_KEYS:
            try:
                case[key] = int(val)
            except ValueError:
                raise ValueError(f"--case: {key} wants an integer, not '{val}'") from None
            if case[key] < (0 if key == "causal" else 1):
                raise ValueError(f"--case: {key}={val} is out of range")
        else:
            case[key] = val
    if case["algo"] not in ("flash", "splitkv", "naive"):
        raise ValueError(f"--case: algo '{case['algo']}' is not flash, splitkv or naive")
    if case["dtype"] not in ("f32", "f16", "bf16"):
        raise ValueError(f"--case: dtype '{case['dtype']}' is not f32, f16 or bf16")
    if case["heads"] % case["kv_heads"]:
        raise ValueError(f"--case: heads {case['heads']} is not a multiple of kv_heads "
                         f"{case['kv_heads']}")
    if case["causal"] and case["sq"] != case["sk"]:
        raise ValueError("--case: causal with sq != sk aligns differently in torch (top-left) "
                         "and xattn (bottom-right)")
    return case


def case_name(c):
    hs = f"H{c['heads']}" + (f"/{c['kv_heads']}" if c["kv_heads"] != c["heads"] else "")
    seq = f"S{c['sq']}" if c["sq"] == c["sk"] else f"Sq{c['sq']} Sk{c['sk']}"
    return (f"{c['algo'].upper()} {c['dtype']} B{c['batch']} {hs} D{c['head_dim']} {seq}"
            + (" causal" if c["causal"] else ""))


def xattn_turn(args, c):
    """xattn's timed calls in one process: (fastest, median) in ms, useful GFLOP per call."""
    cmd = [args.xattn, "run", "--backend", "cpu", "--algo", c["algo"], "--dtype", c["dtype"],
           "--batch", str(c["batch"]), "--heads", str(c["heads"]),
           "--kv-heads", str(c["kv_heads"]), "--head-dim", str(c["head_dim"]),
           "--sq", str(c["sq"]), "--sk", str(c["sk"]), "--layout", args.layout,
           "--threads", str(args.threads), "--cpu-simd", args.isa,
           "--reps", str(args.reps), "--warmup", "1", "--no-check"]
    if c["causal"]:
        cmd.append("--causal")
    res = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"^time\s+median ([0-9.]+) ms, min ([0-9.]+) ms", res.stdout, re.M)
    w = re.search(r"^work\s+([0-9.]+) GFLOP useful", res.stdout, re.M)
    if res.returncode != 0 or not m or not w:
        sys.stderr.write(f"torch_sdpa_peer: {' '.join(cmd)} failed (status {res.returncode}):\n"
                         + (res.stdout + res.stderr)[-2000:])
        sys.exit(1)
    return float(m.group(2)), float(m.group(1)), float(w.group(1))


def xattn_rate(c, gflop, ms):
    """xattn's rate at its fastest call, in the unit of its ceiling: useful GFLOP/s (xattn's
    own count, masked pairs left out) for prefill, K/V GB/s (each byte once) for decode."""
    if c["algo"] == "splitkv":
        size = 4 if c["dtype"] == "f32" else 2
        kv = c["batch"] * c["sk"] * c["kv_heads"] * 2 * c["head_dim"] * size
        return f"{kv / ms / 1e6:.1f} GB/s K/V"
    return f"{gflop / ms * 1e3:.1f} GFLOP/s"


class TorchSide:
    def __init__(self, torch, c, layout):
        self.torch = torch
        self.F = torch.nn.functional
        dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[c["dtype"]]
        g = torch.Generator().manual_seed(42)

        def make(h, s, d):
            if layout == "bshd":  # BSHD memory seen as [B, H, S, D], as after a head split
                return torch.randn(c["batch"], s, h, d, generator=g).to(dt).transpose(1, 2)
            return torch.randn(c["batch"], h, s, d, generator=g).to(dt)

        d = c["head_dim"]
        self.q = make(c["heads"], c["sq"], d)
        self.k = make(c["kv_heads"], c["sk"], d)
        self.v = make(c["kv_heads"], c["sk"], d)
        self.kw = dict(is_causal=bool(c["causal"]), enable_gqa=c["heads"] != c["kv_heads"])

    def kernel(self):
        try:
            from torch.nn.attention import SDPBackend
            return SDPBackend(self.torch._fused_sdp_choice(self.q, self.k, self.v,
                                                           **self.kw)).name
        except Exception as e:  # a private helper: say so rather than fail
            return f"unknown ({type(e).__name__})"

    def call(self):
        with self.torch.no_grad():
            return self.F.scaled_dot_product_attention(self.q, self.k, self.v, **self.kw)

    def turn(self, reps):
        self.call()  # warm-up
        t = []
        for _ in range(reps):
            s = time.perf_counter()
            self.call()
            t.append((time.perf_counter() - s) * 1e3)
        return min(t), statistics.median(t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--xattn", default=os.path.join(root, "build", "release", "bench", "xattn"),
                    help="the xattn tool (default: build/release/bench/xattn of this tree)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    ap.add_argument("--reps", type=int, default=5, help="timed calls per turn (default 5)")
    ap.add_argument("--threads", type=int, default=0, help="threads for both (0 = every CPU "
                    "this process may run on)")
    ap.add_argument("--isa", choices=("best", "avx2", "avx512"), default="best")
    ap.add_argument("--layout", choices=("bshd", "bhsd"), default="bshd")
    ap.add_argument("--case", action="append", default=None, metavar="SPEC")
    ap.add_argument("--markdown", action="store_true", help="the summary as a Markdown table")
    ap.add_argument("--json", metavar="FILE", help="write every turn's figures and the setup")
    args = ap.parse_args()
    if args.rounds < 1 or args.reps < 1 or args.threads < 0:
        ap.error("--rounds and --reps want at least 1, --threads at least 0")
    try:
        cases = [parse_case(s) for s in (args.case or DEFAULT_CASES)]
    except ValueError as e:
        ap.error(str(e))
    if not os.access(args.xattn, os.X_OK):
        ap.error(f"--xattn: {args.xattn} is not an executable (build the release preset first)")
    if args.threads == 0:
        args.threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else os.cpu_count() or 1
    if args.isa in TORCH_ISA:  # before torch is imported: read once, at load
        os.environ["ATEN_CPU_CAPABILITY"], os.environ["ONEDNN_MAX_CPU_ISA"] = TORCH_ISA[args.isa]
    try:
        import torch
    except ImportError as e:
        print(f"torch_sdpa_peer: skipped: PyTorch is not importable by {sys.executable} ({e})")
        return 0
    torch.set_num_threads(args.threads)
    xv = subprocess.run([args.xattn, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"xattn    {args.xattn} ({xv or 'version unknown'}), --cpu-simd {args.isa}")
    print(f"torch    {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}"
          f"{', ATEN_CPU_CAPABILITY=' + os.environ['ATEN_CPU_CAPABILITY'] if args.isa in TORCH_ISA else ''}")
    print(f"setup    {args.threads} threads each, layout {args.layout}, {args.rounds} rounds of "
          f"{args.reps} timed calls a side; ratio = torch / xattn (above 1: xattn faster)")
    out = dict(setup=dict(xattn=args.xattn, xattn_version=xv, torch=torch.__version__,
                          torch_capability=torch.backends.cpu.get_cpu_capability(),
                          isa=args.isa, threads=args.threads, layout=args.layout,
                          rounds=args.rounds, reps=args.reps, machine=platform.machine(),
                          node=platform.node(), started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                          load=os.getloadavg() if hasattr(os, "getloadavg") else None),
               cases=[])
    summary = []
    for c in cases:
        ts = TorchSide(torch, c, args.layout)
        kern = ts.kernel()
        print(f"\n{case_name(c)}  (torch kernel: {kern})")
        rounds = []
        for r in range(args.rounds):
            order = ("xattn", "torch") if r % 2 == 0 else ("torch", "xattn")
            got = {}
            for who in order:
                time.sleep(0.3)  # the other side's spinning OpenMP workers wind down
                got[who] = xattn_turn(args, c) if who == "xattn" else ts.turn(args.reps)
            ratio = got["torch"][0] / got["xattn"][0]
            gflop = got["xattn"][2]
            rounds.append(dict(first=order[0], useful_gflop=gflop, xattn_min_ms=got["xattn"][0],
                               xattn_median_ms=got["xattn"][1], torch_min_ms=got["torch"][0],
                               torch_median_ms=got["torch"][1], ratio=ratio))
            print(f"  round {r + 1} ({order[0]} first): xattn {got['xattn'][0]:9.2f} ms, "
                  f"torch {got['torch'][0]:9.2f} ms (fastest calls), ratio {ratio:.2f}")
        xb = min(x["xattn_min_ms"] for x in rounds)
        tb = min(x["torch_min_ms"] for x in rounds)
        med = statistics.median(x["ratio"] for x in rounds)
        lo, hi = min(x["ratio"] for x in rounds), max(x["ratio"] for x in rounds)
        rate = xattn_rate(c, gflop, xb)
        print(f"  fastest: xattn {xb:.2f} ms ({rate}), torch {tb:.2f} ms; "
              f"paired ratios median {med:.2f} (range {lo:.2f}-{hi:.2f})")
        summary.append((case_name(c), xb, rate, tb, med, lo, hi))
        out["cases"].append(dict(case=c, name=case_name(c), torch_kernel=kern, rounds=rounds))
        del ts
    if args.markdown:
        print("\n| case | xattn ms | xattn rate | torch SDPA ms "
              "| torch / xattn, paired (range) |")
        print("|---|---|---|---|---|")
        for name, xb, rate, tb, med, lo, hi in summary:
            print(f"| {name} | {xb:.1f} | {rate} | {tb:.1f} | {med:.2f}x ({lo:.2f}-{hi:.2f}) |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
        print(f"\nwritten to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
