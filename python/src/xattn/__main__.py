"""python -m xattn: devices, capture, profile, compare (docs/python.md).

Exit status: 0 success; 1 a run failed (or, for profile, xattn disagreed with
SDPA beyond the bounds); 2 a bad command line (or, for compare, files that are
not two profiles of the same model).
"""

from __future__ import annotations

import argparse
import json
import sys


def _devices(args) -> int:
    import xattn

    print(f"xattn {xattn.version()} ({xattn.library_path})")
    for name, st in xattn.backends().items():
        state = "available" if st["available"] else ("not compiled in" if not st["compiled"] else "unavailable")
        print(f"{name:<7} {state}{': ' + st['reason'] if st['reason'] and not st['available'] else ''}")
    for d in xattn.devices():
        print(f"  {d['backend']}:{d['index']}  {d['name']}  ({d['device_type']}, {d['compute_units']} units, "
              f"{d['global_mem_bytes'] / 2**30:.1f} GiB)")
    return 0


def _load(args):
    from xattn.torch import _models

    kw = {"dtype": args.dtype, "device": args.device}
    if args.sentences:
        kw["sentences"] = args.sentences
    for k in ("prompt_len", "batch", "decode_steps", "layers", "generate"):
        v = getattr(args, k, None)
        if v is not None:
            kw[k] = v
    return _models.load(args.model, **kw)


def _kv_buckets(args):
    v = getattr(args, "kv_bucket", "pow2")
    if v in ("pow2", "none"):
        return None if v == "none" else v
    if not v.isdigit() or int(v) < 1:
        raise ValueError(f"--kv-bucket {v!r}: expected pow2, none or a width >= 1")
    return int(v)


def _capture(args) -> int:
    import xattn.torch as xt

    m = _load(args)
    cap = xt.Capture(m.model, keep_tensors=args.tensors, kv_buckets=_kv_buckets(args))
    if args.generate is not None:
        from xattn.torch._generate import GenerateRun

        run = GenerateRun(m.model, m.inputs, m.kwargs, args.generate).run
        import torch

        with cap, torch.no_grad():
            run()
    elif m.run is not None:
        import torch

        with cap, torch.no_grad():
            m.run()
    else:
        cap.run(*m.inputs, **m.kwargs)
    doc = cap.write_cases(args.out, model=m.name, info=m.info, tensors=args.tensors)
    print(f"{len(cap.calls)} attention calls, {len(doc['cases'])} cases: written to {args.out}")
    for c in doc["cases"]:
        print(f"  x{c['count']:<4} B{c['batch']} H{c['heads']}/{c['kv_heads']} Sq{c['sq']} Sk{c['sk']} "
              f"D{c['head_dim']} {c['dtype']}  {c['name']}")
    return 0


def _profile(args) -> int:
    import xattn.torch as xt

    m = _load(args)
    backends = args.backend.split(",") if args.backend else None
    algos = tuple(args.algo.split(",")) if args.algo else xt._profile.ALGOS
    prof = xt.profile(m.model, *m.inputs, run=m.run, model_name=m.name, backends=backends, algos=algos,
                      passes=args.passes, budget_s=args.budget, compare=not args.no_compare,
                      packed=not args.no_packed, threads=args.threads, out_dir=args.out,
                      generate=args.generate, kv_buckets=_kv_buckets(args), **m.kwargs)
    prof.report["model_info"] = m.info
    if args.out:
        with open(prof.report["files"]["json"], "w") as f:
            json.dump(prof.report, f, indent=1, default=str)
    sys.stdout.write(prof.text())
    if args.out:
        print(f"written to {args.out}/{{profile.json,profile.txt,chart.svg,cases.json}}")
    num = prof.report.get("numerics", {}).get("by_dtype", {})
    return 0 if all(d["all_pass"] for d in num.values()) else 1


def _compare(args) -> int:
    from xattn import _report

    c = _report.compare_profiles(_report.load_profile(args.a), _report.load_profile(args.b))
    sys.stdout.write(_report.render_compare(c))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(c, f, indent=1, default=str)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m xattn", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd")
    sub.add_parser("devices", help="backends and devices the library sees")

    def model_args(sp):
        sp.add_argument("--model", required=True,
                        help="all-minilm-l6-v2, smollm2-135m-shape, a Hugging Face model folder, or a "
                             "script.py defining build() -> (model, inputs[, run])")
        sp.add_argument("--dtype", choices=("f32", "f16", "bf16"), default="f32", help="model dtype (f32)")
        sp.add_argument("--device", default="cpu", help="torch device of the model (cpu, cuda, cuda:1)")
        sp.add_argument("--sentences", nargs="+", help="the batch of a text model (default: 8 sentences)")
        sp.add_argument("--prompt-len", type=int, help="smollm2-135m-shape: prompt tokens (64)")
        sp.add_argument("--batch", type=int, help="smollm2-135m-shape: sequences (1)")
        sp.add_argument("--decode-steps", type=int, help="smollm2-135m-shape: decode steps after the prefill (4)")
        sp.add_argument("--layers", type=int, help="smollm2-135m-shape: layers (30)")
        sp.add_argument("--generate", type=int, metavar="N",
                        help="run model.generate greedily: a prefill and N decode steps, reported apart "
                             "(smollm2-135m-shape: a left-padded batch of --batch prompts of different lengths)")
        sp.add_argument("--kv-bucket", default="pow2",
                        help="group decode steps into cases by KV length: pow2 (Sk in (2^(k-1), 2^k]), a width "
                             "W, or none (one case per Sk) (pow2)")

    sc = sub.add_parser("capture", help="capture a model's attention calls into a cases file")
    model_args(sc)
    sc.add_argument("--out", default="cases.json", help="the cases file to write (cases.json)")
    sc.add_argument("--tensors", action="store_true",
                    help="also write each case's activations (q, k, v, mask, output) to an .npz beside it")
    sp = sub.add_parser("profile", help="profile a model's attention on every backend and algorithm")
    model_args(sp)
    sp.add_argument("--backend", help="comma list of cpu, opencl, cuda (default: every available one)")
    sp.add_argument("--algo", help="comma list of naive, flash, splitkv (default: all three)")
    sp.add_argument("--passes", "--reps", dest="passes", type=int, default=7,
                    help="timing passes of the whole forward, each followed by one under torch.profiler (7; "
                         "--reps is its old name)")
    sp.add_argument("--budget", type=float, default=10.0,
                    help="seconds that all the timed cells (SDPA and xattn per case) share (10); each cell makes "
                         "at least 5 calls")
    sp.add_argument("--threads", type=int, help="CPU backend threads (default: all)")
    sp.add_argument("--no-compare", action="store_true", help="skip the comparison with SDPA and the reference")
    sp.add_argument("--no-packed", action="store_true", help="skip the packed (varlen) form of padded batches")
    sp.add_argument("--out", default="xattn-profile", help="output folder (xattn-profile)")
    cp = sub.add_parser("compare", help="judge two profile.json files of the same model (before and after)")
    cp.add_argument("a", help="profile.json (or its folder): before")
    cp.add_argument("b", help="profile.json (or its folder): after")
    cp.add_argument("--json", help="also write the judgments to this JSON file")
    args = p.parse_args(argv)
    if args.cmd is None:
        p.print_help(sys.stderr)
        return 2
    if getattr(args, "budget", None) is not None and not args.budget >= 0:
        p.error(f"--budget: {args.budget} is out of range")
    for k in ("passes", "prompt_len", "batch", "decode_steps", "layers", "threads", "generate"):
        v = getattr(args, k, None)
        if v is not None and v < (0 if k in ("decode_steps", "threads") else 1):
            p.error(f"--{k.replace('_', '-')}{' (--reps)' if k == 'passes' else ''}: {v} is out of range")
    try:
        if args.cmd == "devices":
            return _devices(args)
        if args.cmd == "capture":
            return _capture(args)
        if args.cmd == "compare":
            return _compare(args)
        return _profile(args)
    except (ValueError, ImportError) as e:
        print(f"python -m xattn {args.cmd}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
