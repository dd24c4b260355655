#!/usr/bin/env python3
"""sass-report: a static measure of the CUDA flash kernels, without a GPU.

Compiles the flash mma kernel of kernels_cuda/xattn_cuda_flash_mma.cuh (the
instances asked for: head dim, dtype, fp8 K/V) for one architecture to a cubin
(nvcc -cubin, the Release build's -O3), disassembles it (cuobjdump -sass)
and prints, per kernel (head dim, dtype, fp8 K/V or not):

  mma       HMMA (mma.sync) and HGMMA (wgmma) instructions, static count
  instr     static SASS instructions of the kernel, and per MMA
  loop      the KV loop: the back-edge branch (a BRA to a lower address)
            whose body holds the most MMAs (the tightest such loop on a tie);
            its instructions, MMAs, and instructions per MMA
  LDSM      ldmatrix in that loop: plain (.x4) and transposed (.T). K and V
            tiles take the same number of each (their fragments have the same
            shape), so plain ones beyond the transposed count are Q fragments
            read again from shared memory every KV tile ("Q re-read: yes"; SASS
            names them LDSM.16.M88 and LDSM.16.MT88)
  regs      registers a thread (cuobjdump -res-usage), spill stores/loads in
            bytes (ptxas -v), static shared memory, and the dynamic shared
            memory the launcher asks for (the tile shape of
            xattn_cuda_common.cuh: (BM + 2 ST BN) (DP + 8) 2 bytes, ST the
            K/V ring's stages)

Usage: bench/dev/sass-report.py [--arch sm_90] [--dp 128|all] [--dtype bf16|f16|all]
                                [--fp8 0|1|all] [--shape wide|narrow|all] [--keep DIR] [--sass]
Default: sm_90, every head dim, both dtypes, no fp8, the wide shape (the
default launch; narrow: the 64-row shape of XATTN_CUDA_MMA_SHAPE=narrow). Needs nvcc (PATH, CUDACXX
or /usr/local/cuda/bin) and cuobjdump (PATH, CUOBJDUMP, the toolkit, or the
copy in the triton wheel that PyTorch installs). No GPU needed. Static counts
say what the code is, not how fast it runs.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DPS = [64, 80, 96, 128, 256]


def find_tool(name, env):
    cands = [os.environ.get(env, ""), shutil.which(name) or "", "/usr/local/cuda/bin/" + name]
    cands += sorted(glob.glob(os.path.join(ROOT, "build", "*", "lib", "python3*", "site-packages",
                                           "triton", "backends", "nvidia", "bin", name)))
    cands += sorted(glob.glob("/usr/lib/python3*/site-packages/triton/backends/nvidia/bin/" + name))
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                             check=True).stdout.splitlines()
        return dict(zip(names, out))
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}


def tile_cfg():
    """{(DP, narrow): (MT, NW, BN, ST)} from xattn_cuda_common.cuh, or {} if its
    shape changed."""
    src = open(os.path.join(ROOT, "kernels_cuda", "xattn_cuda_common.cuh")).read()
    if "SMEM = (BM + 2 * ST * BN) * LDS * 2" not in src or "LDS = DP + 8" not in src:
        return {}
    m = re.search(r"#define XATTN_CUDA_MMA_STAGES (\d+)", src)
    macros = {"XATTN_CUDA_MMA_STAGES": int(m.group(1)) if m else 2}
    cfg = {}
    for m in re.finditer(r"struct xattn_cuda_mma_cfg<(\d+)> \{\s*enum \{(.*?)\};", src, re.S):
        kv = {}
        for k, v in re.findall(r"(\w+) = (\w+)", m.group(2)):
            kv[k] = int(v) if v.isdigit() else macros.get(v, 0)
        for narrow, sfx in ((0, "_W"), (1, "_N")):
            try:
                cfg[(int(m.group(1)), narrow)] = (kv["MT" + sfx], kv["NW"], kv["BN" + sfx],
                                                  kv["ST" + sfx])
            except KeyError:
                return {}
    return cfg


def parse_sass(text):
    """{mangled name: [(addr, opcode, full text)]}"""
    funcs, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m and cur is not None:
            ins = m.group(2).strip()
            op = re.sub(r"^@!?U?P[T0-9]+\s+", "", ins).split()[0]
            cur.append((int(m.group(1), 16), op, ins))
    return funcs


def is_mma(op):
    return op.startswith("HMMA") or op.startswith("HGMMA")


def main_loop(ins):
    """(start, end) addresses of the back-edge loop with the most MMAs."""
    best = None
    for addr, op, text in ins:
        if not op.startswith("BRA"):
            continue
        m = re.search(r"`\(\.L_x_\d+\)|0x([0-9a-f]+)", text)
        if not m or not m.group(1):
            continue
        tgt = int(m.group(1), 16)
        if tgt > addr:
            continue
        n = sum(1 for a, o, _ in ins if tgt <= a <= addr and is_mma(o))
        key = (n, -(addr - tgt))
        if n and (best is None or key > best[0]):
            best = (key, tgt, addr)
    return (best[1], best[2]) if best else None


def resolve_labels(sass):
    """cuobjdump prints branch targets as `(.L_x_N); map them to addresses."""
    labels = {}
    for m in re.finditer(r"\.L_x_(\d+):\s*\n\s*/\*([0-9a-f]+)\*/", sass):
        labels[m.group(1)] = m.group(2)
    return re.sub(r"`\(\.L_x_(\d+)\)", lambda m: "0x" + labels.get(m.group(1), "0"), sass)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--dp", default="all", help="padded head dim: 64 80 96 128 256 or all")
    ap.add_argument("--dtype", default="all", choices=["bf16", "f16", "all"])
    ap.add_argument("--fp8", default="0", choices=["0", "1", "all"], help="fp8 K/V instances")
    ap.add_argument("--shape", default="wide", choices=["wide", "narrow", "all"],
                    help="the mma shape: wide (default, 128 rows but d256), narrow (64 rows)")
    ap.add_argument("--keep", help="keep the cubins and SASS in this folder")
    ap.add_argument("--sass", action="store_true", help="print the main loop's SASS too")
    ap.add_argument("--cubin", help="report on this cubin of --dp (no compile; no spill figures)")
    args = ap.parse_args()
    nvcc = find_tool("nvcc", "CUDACXX")
    cuobjdump = find_tool("cuobjdump", "CUOBJDUMP")
    if not nvcc or not cuobjdump:
        sys.exit("sass-report: needs nvcc and cuobjdump (set CUDACXX / CUOBJDUMP): nvcc %s, "
                 "cuobjdump %s" % (nvcc, cuobjdump))
    dps = DPS if args.dp == "all" else [int(args.dp)]
    if any(d not in DPS for d in dps):
        sys.exit("sass-report: --dp: one of %s or all" % DPS)
    cfg = tile_cfg()
    work = args.keep or tempfile.mkdtemp(prefix="xattn-sass-")
    os.makedirs(work, exist_ok=True)
    print("sass-report: %s, nvcc %s, cuobjdump %s" % (args.arch, nvcc, cuobjdump))
    print("%-40s %5s %7s %6s %7s %5s %6s %9s %5s %4s %7s %8s" %
          ("kernel", "mma", "instr", "/mma", "loop", "mma", "/mma", "LDSM/.T", "Q re", "regs",
           "spill", "smem"))
    for dp in dps:
        # Only the instances asked for: explicit instantiations of the kernel
        # template (the launcher's .cu file would build all four).
        src = os.path.join(work, "flash_mma_d%d.cu" % dp)
        with open(src, "w") as f:
            f.write('#include "xattn_cuda_flash_mma.cuh"\n')
            for t in (["__nv_bfloat16", "__half"] if args.dtype == "all" else
                      ["__nv_bfloat16" if args.dtype == "bf16" else "__half"]):
                for q in ([0, 1] if args.fp8 == "all" else [int(args.fp8)]):
                    for n in ([0, 1] if args.shape == "all" else [int(args.shape == "narrow")]):
                        f.write("template __global__ void xattn_cuda_flash_mma_kernel<%d, %s, %d, "
                                "%d>(const xattn_cuda_kparams);\n" % (dp, t, q, n))
        cubin = os.path.join(work, "flash_mma_d%d_%s.cubin" % (dp, args.arch))
        cmd = [nvcc, "-std=c++17", "-O3", "-DNDEBUG", "-arch=" + args.arch, "-cubin",
               "-Xptxas=-v", "-I" + os.path.join(ROOT, "kernels_cuda"),
               "-I" + os.path.join(ROOT, "include"), "-I" + os.path.join(ROOT, "kernels_common"),
               "-I" + os.path.join(ROOT, "backends"), "-o", cubin, src]
        if args.cubin:
            cubin = args.cubin
            r = subprocess.CompletedProcess(cmd, 0, "", "")
        else:
            r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.exit("sass-report: nvcc failed:\n" + " ".join(cmd) + "\n" + r.stderr[-3000:])
        spills, cur = {}, None
        for line in r.stderr.splitlines():
            m = re.search(r"Function properties for (\S+)", line) or \
                re.search(r"Compiling entry function '(\S+)'", line)
            if m:
                cur = m.group(1)
            m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if m and cur:
                spills[cur] = (int(m.group(1)), int(m.group(2)))
        sass = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True,
                              check=True).stdout
        sass = resolve_labels(sass)
        res = subprocess.run([cuobjdump, "-res-usage", cubin], capture_output=True, text=True,
                             check=True).stdout
        if args.keep and not args.cubin:
            open(cubin + ".sass", "w").write(sass)
        usage = {}
        for m in re.finditer(r"Function (\S+):\s*\n?\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) "
                             r"LOCAL:(\d+)", res):
            usage[m.group(1)] = tuple(int(x) for x in m.group(2, 3, 4, 5))
        funcs = parse_sass(sass)
        names = demangle(list(funcs))
        for mangled in sorted(funcs, key=lambda n: names[n]):
            pretty = names[mangled]
            m = re.search(r"<(\d+), (__nv_bfloat16|__half), (\d), (\d)>", pretty)
            if not m:
                continue
            dt = "bf16" if m.group(2) == "__nv_bfloat16" else "f16"
            fp8 = m.group(3)
            if args.dtype not in ("all", dt) or args.fp8 not in ("all", fp8):
                continue
            ins = funcs[mangled]
            nmma = sum(1 for _, o, _ in ins if is_mma(o))
            loop = main_loop(ins)
            lin = [x for x in ins if loop and loop[0] <= x[0] <= loop[1]]
            lmma = sum(1 for _, o, _ in lin if is_mma(o))
            # LDSM.16.M88.4: ldmatrix.x4; LDSM.16.MT88.4: with .trans.
            ldsm = sum(1 for _, o, _ in lin if o.startswith("LDSM") and ".MT88" not in o)
            ldsmt = sum(1 for _, o, _ in lin if o.startswith("LDSM") and ".MT88" in o)
            reg, _, shared, _ = usage.get(mangled, (0, 0, 0, 0))
            sp = spills.get(mangled)
            smem = ""
            narrow = int(m.group(4))
            shape = ""
            if (dp, narrow) in cfg:
                mt, nw, bn, st = cfg[(dp, narrow)]
                smem = "%d" % ((16 * mt * nw + 2 * st * bn) * (dp + 8) * 2 + shared)
                shape = " %dx%d/%d" % (16 * mt * nw, bn, st)
            label = "d%d %s%s %s%s" % (dp, dt, " fp8-kv" if fp8 == "1" else "",
                                       "narrow" if narrow else "wide", shape)
            per = lambda n, d: "%.1f" % (n / d) if d else "-"
            print("%-40s %5d %7d %6s %7d %5d %6s %4d/%-4d %5s %4d %7s %8s" %
                  (label, nmma, len(ins), per(len(ins), nmma), len(lin), lmma, per(len(lin), lmma),
                   ldsm, ldsmt, "yes" if ldsm > ldsmt else "no", reg,
                   "%d/%d" % sp if sp else "?", smem))
            if args.sass and lin:
                for a, _, t in lin:
                    print("    /*%04x*/ %s" % (a, t))
    print("columns: mma = HMMA+HGMMA; instr = static SASS instructions (/mma: per MMA); loop = "
          "the KV loop's instructions, its MMAs and instructions per MMA; LDSM/.T = plain and "
          "transposed ldmatrix in the loop; Q re = Q fragments re-read in the loop; spill = "
          "bytes stored/loaded; smem = bytes a block (dynamic + static); shape = rows x keys a "
          "tile / K-V ring stages")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
