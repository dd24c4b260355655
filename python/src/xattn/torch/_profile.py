"""The profile of a model's attention: where its time goes, what each call would
cost with xattn's algorithms on each backend, memory, padding, and agreement
with PyTorch's SDPA on the real activations.

Steps (docs/python.md, "The profile"):
1. a warm-up forward, then a capture pass (shapes, masks, activations, memory);
2. `reps` timing passes: the forward's wall time, each SDPA call's wall time and
   each model block's, with a light wrapper (nothing recorded but three clocks);
3. for each distinct call shape (a case): SDPA alone on the captured tensors,
   and xattn's NAIVE, FLASH and SPLITKV on every backend (and, for padded
   batches, FLASH on the same batch packed), each repeated until its spread is
   under `max_spread` or `budget_s` is spent;
4. every call's output from xattn compared with SDPA's and with the reference.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F

from .. import _core
from .._numerics import compare_outputs
from .._stats import real_difference, summarize
from ._capture import Capture, _block_name, capture

ALGOS = ("naive", "flash", "splitkv")


class _Timer:
    """The timing passes' wrapper: one clock reading before and after each SDPA call."""

    def __init__(self, blocks: dict):
        self.times = []
        self.block_ms = {}
        self.blocks = blocks  # name -> module
        self._hooks = []
        self._t0 = {}

    def __enter__(self):
        self._orig = F.scaled_dot_product_attention
        orig, times = self._orig, self.times

        def sdpa(*a, **kw):
            q = a[0] if a else kw["query"]
            t0 = time.perf_counter()
            out = orig(*a, **kw)
            if q.is_cuda:
                torch.cuda.synchronize(q.device)
            times.append((time.perf_counter() - t0) * 1e3)
            return out

        F.scaled_dot_product_attention = sdpa
        for name, mod in self.blocks.items():
            def pre(_m, _i, name=name):
                self._t0[name] = time.perf_counter()

            def post(_m, _i, _o, name=name):
                t0 = self._t0.pop(name, None)
                if t0 is not None:
                    self.block_ms[name] = self.block_ms.get(name, 0.0) + (time.perf_counter() - t0) * 1e3

            self._hooks.append(mod.register_forward_pre_hook(pre))
            self._hooks.append(mod.register_forward_hook(post))
        return self

    def __exit__(self, *exc):
        F.scaled_dot_product_attention = self._orig
        for h in self._hooks:
            h.remove()


def _sync(device):
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)


def _device_of(model, inputs):
    for x in inputs:
        if isinstance(x, torch.Tensor):
            return x.device
    if isinstance(model, torch.nn.Module):
        for p in model.parameters():
            return p.device
    return torch.device("cpu")


def _measure(fn, warmup: int, min_reps: int, max_reps: int, budget_s: float, max_spread: float):
    """Calls fn (which returns a time in ms) until the spread is under max_spread
    after min_reps calls, or budget_s is spent (at least 2 calls), or max_reps."""
    for _ in range(warmup):
        fn()
    xs, t_start = [], time.perf_counter()
    while len(xs) < max_reps:
        xs.append(fn())
        n = len(xs)
        s = summarize(xs)
        if n >= min_reps and s["spread"] <= max_spread:
            break
        if n >= 2 and time.perf_counter() - t_start >= budget_s:
            break
    s = summarize(xs)
    s["converged"] = bool(s["spread"] is not None and s["spread"] <= max_spread)
    return s


def _packed(t: torch.Tensor, lengths, heads_dim=1):
    """[B, H, S, D] padded -> [T, H, D] packed (the real rows of each sequence)."""
    parts = [t[b, :, : int(n)].transpose(0, 1) for b, n in enumerate(lengths)]
    return torch.cat(parts, 0).contiguous()


def _cu(lengths):
    return np.concatenate([[0], np.cumsum(np.asarray(lengths, dtype=np.int64))]).astype(np.int32)


class Profile:
    """The result of profile(): `report` (a JSON-ready dict), `capture` (the
    Capture with its calls), `text()` the printed report, `write(dir)` the files."""

    def __init__(self, report: dict, cap: Capture):
        self.report = report
        self.capture = cap

    def text(self) -> str:
        from .._report import render_text

        return render_text(self.report)

    def write(self, out_dir) -> dict:
        """Writes profile.json, profile.txt, chart.svg and cases.json to out_dir."""
        from .._report import render_svg

        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        paths = {"json": d / "profile.json", "text": d / "profile.txt", "svg": d / "chart.svg",
                 "cases": d / "cases.json"}
        paths["json"].write_text(json.dumps(self.report, indent=1, default=_json_default) + "\n")
        paths["text"].write_text(self.text())
        paths["svg"].write_text(render_svg(self.report))
        try:
            self.capture.write_cases(paths["cases"], model=self.report.get("model", ""))
        except ValueError as e:  # no call xattn can replay: no cases file
            self.report["cases_file_note"] = f"cases.json not written: {e}"
            del paths["cases"]
        self.report["files"] = {k: str(v) for k, v in paths.items()}
        return self.report["files"]


def _json_default(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def _pick_backends(backends) -> list:
    avail = _core.backends()
    if backends is None:
        return [b for b in ("cpu", "opencl", "cuda") if avail[b]["available"]]
    out = []
    for b in backends:
        if b not in avail:
            raise ValueError(f"backends: {b!r} is not cpu, opencl or cuda")
        if avail[b]["available"]:
            out.append(b)
    return out


def profile(model, *inputs, run: Optional[Callable] = None, model_name: str = "", backends=None,
            algos=ALGOS, reps: int = 5, warmup: int = 1, budget_s: float = 0.5, max_spread: float = 0.05,
            max_reps: int = 50, compare: bool = True, packed: bool = True, threads: Optional[int] = None,
            out_dir=None, verbose: bool = False, **kwargs) -> Profile:
    """Profiles the attention of model(*inputs, **kwargs) (or of run(), a callable
    that runs the model, e.g. a prefill and decode steps). Returns a Profile;
    with out_dir, writes profile.json, profile.txt, chart.svg and cases.json there.

    backends: None = every available one ("cpu", "opencl", "cuda"); algos: the
    xattn algorithms replayed; reps: timing passes of the whole forward; budget_s,
    max_spread, max_reps: how long each xattn and SDPA cell is repeated; compare:
    check every call's output against SDPA's and the reference; packed: time the
    packed (varlen) form of padded batches; threads: the CPU backend's threads.
    """
    if run is None:
        if not callable(model):
            raise TypeError("profile: model must be callable (an nn.Module), or give run=")

        def run():
            return model(*inputs, **kwargs)

    device = _device_of(model, inputs)
    t_all = time.perf_counter()
    log = print if verbose else (lambda *a, **k: None)

    # 1. warm-up, then the capture pass
    with torch.no_grad():
        run()
        _sync(device)
        cap = Capture(model, keep_tensors=True)
        with cap:
            _sync(device)
            t0 = time.perf_counter()
            run()
            _sync(device)
            cap.forward_ms = (time.perf_counter() - t0) * 1e3
    calls = cap.calls
    if not calls:
        raise RuntimeError("profile: the model made no scaled_dot_product_attention call "
                           "(does it use attn_implementation='sdpa'?)")
    log(f"captured {len(calls)} attention calls")

    # 2. timing passes
    block_names = sorted({c.layer for c in calls if c.layer})
    mods = dict(model.named_modules()) if isinstance(model, torch.nn.Module) else {}
    blocks = {n: mods[n] for n in block_names if n in mods}
    passes = []
    with torch.no_grad():
        for _ in range(reps):
            tm = _Timer(blocks)
            with tm:
                _sync(device)
                t0 = time.perf_counter()
                run()
                _sync(device)
                fwd = (time.perf_counter() - t0) * 1e3
            if len(tm.times) != len(calls):
                raise RuntimeError(f"profile: a timing pass made {len(tm.times)} attention calls, the "
                                   f"capture {len(calls)}: the forward is not repeatable")
            passes.append({"forward_ms": fwd, "call_ms": tm.times, "block_ms": tm.block_ms})

    report = {"schema": "xattn.profile/1", "model": model_name, "xattn_version": _core.version(),
              "torch_version": torch.__version__, "device": str(device), "reps": reps,
              "calls": len(calls)}
    report["forward"] = _forward_section(calls, passes)
    report["layers"] = _layer_section(calls, passes)
    report["calls_detail"] = [_call_row(c, passes) for c in calls]

    # 3. the cases: SDPA alone, xattn on every backend and algorithm, packed
    bks = _pick_backends(backends)
    ctxs = {}
    try:
        for b in bks:
            try:
                ctxs[b] = _core.Context(b, 0, threads=threads if b == "cpu" else None)
            except Exception as e:  # a backend that fails to open is reported, not fatal
                report.setdefault("backend_errors", {})[b] = str(e)
        cases = []
        for ci, (first, group) in enumerate(cap.cases()):
            log(f"case {ci}: {_case_key(first)} x {len(group)}")
            cases.append(_case_section(ci, first, group, passes, ctxs, algos, warmup, budget_s,
                                       max_spread, max_reps, packed))
        report["cases"] = cases
        report["backends"] = {b: ctxs[b].device_info["name"] for b in ctxs}
        # 4. numerics on every call
        if compare:
            report["numerics"] = _numerics_section(calls, ctxs.get("cpu") or next(iter(ctxs.values()), None))
    finally:
        for c in ctxs.values():
            c.close()
    report["memory"] = _memory_section(report)
    report["wall_s"] = time.perf_counter() - t_all
    prof = Profile(report, cap)
    if out_dir is not None:
        prof.write(out_dir)
    return prof


def _forward_section(calls, passes) -> dict:
    fwd = summarize([p["forward_ms"] for p in passes])
    att = summarize([sum(p["call_ms"]) for p in passes])
    share = summarize([sum(p["call_ms"]) / p["forward_ms"] for p in passes if p["forward_ms"] > 0])
    return {"forward_ms": fwd, "attention_ms": att, "attention_share": share,
            "note": "medians over the timing passes; attention = the SDPA calls' wall time inside the "
                    "forward, share = attention / forward per pass"}


def _layer_section(calls, passes) -> dict:
    layers = []
    for name in sorted({c.layer for c in calls}, key=_natural):
        idx = [c.index for c in calls if c.layer == name]
        per_pass = [sum(p["call_ms"][i] for i in idx) for p in passes]
        blk = [p["block_ms"].get(name) for p in passes]
        blk = [b for b in blk if b is not None]
        shares = [a / p["forward_ms"] for a, p in zip(per_pass, passes) if p["forward_ms"] > 0]
        row = {"layer": name, "calls": len(idx), "attention_ms": summarize(per_pass),
               "share_of_forward": summarize(shares)}
        if blk:
            row["block_ms"] = summarize(blk)
            row["share_of_block"] = summarize([a / b for a, b in zip(per_pass, blk) if b > 0])
        layers.append(row)
    total = summarize([sum(p["call_ms"]) for p in passes])
    layer_sum = sum(r["attention_ms"]["median"] for r in layers)
    # Medians of sums and sums of medians both lie within the sum of the layers'
    # [min, max]: their difference is at most the sum of the layers' ranges.
    noise = sum(r["attention_ms"]["max"] - r["attention_ms"]["min"] for r in layers)
    return {"rows": layers, "sum_of_layers_ms": layer_sum, "total_ms": total["median"],
            "difference_ms": layer_sum - total["median"], "noise_ms": noise,
            "note": "noise = the sum of each layer's range (max - min) over the timing passes, "
                    "a bound on |sum of layer medians - median of the totals|"}


def _natural(s):
    from .._cases import natural_key

    return natural_key(s)


def _call_row(c, passes) -> dict:
    t = summarize([p["call_ms"][c.index] for p in passes])
    return {"index": c.index, "module": c.module, "layer": c.layer, "case": _case_key(c),
            "pytorch_ms": t, "memory": c.mem, "mask": c.mask, "mask_meaning": c.analysis.note or c.analysis.kind,
            "supported": c.supported, "note": c.reason}


def _case_key(c) -> str:
    a = c.analysis
    s = f"B{c.batch} H{c.heads}/{c.kv_heads} Sq{c.sq} Sk{c.sk} D{c.head_dim}"
    if c.head_dim_v != c.head_dim:
        s += f"/{c.head_dim_v}"
    s += f" {c.dtype}"
    if c.kv_dtype != c.dtype:
        s += f"/{c.kv_dtype}"
    if a.causal:
        s += " causal-" + ("tl" if a.causal == "top-left" else "br")
    if a.window:
        s += f" win{a.window[0]},{a.window[1]}"
    if a.seqlens_k is not None:
        s += f" padded{sum(a.seqlens_q or [c.sq] * c.batch)}/{sum(a.seqlens_k)}"
    if a.kind == "bias":
        s += " bias"
    return s


def _inputs_for_xattn(c):
    """q, k, v (K/V un-repeated when the caller repeated them), the bias, and options."""
    t = c.tensors
    q, k, v = t["q"], t["k"], t["v"]
    if q.dim() == 3:
        q, k, v = q[None], k[None], v[None]
    if c.kv_repeated > 1:
        k, v = k[:, :: c.kv_repeated], v[:, :: c.kv_repeated]
    if c.q_packed > 1:  # back to the model's [B, Hq, 1, D]
        q = q.reshape(c.batch, c.heads, 1, c.head_dim)
    opts = c.xattn_options()
    if c.analysis.kind == "bias":
        opts["bias"] = torch.from_numpy(c.analysis.bias).to(q.device)
    return q, k, v, opts


def _on_backend(ctx, q, k, v, opts):
    """The tensors where ctx's backend can use them: CUDA tensors are copied to the host
    for the CPU and OpenCL backends (a replay's copy, outside the timed calls); host
    tensors stay where they are (the CUDA backend stages them itself, copy=True)."""
    if ctx.backend == "cuda" or not q.is_cuda:
        return q, k, v, opts
    moved = {key: (val.cpu() if isinstance(val, torch.Tensor) else val) for key, val in opts.items()}
    return q.cpu(), k.cpu(), v.cpu(), moved


def _sdpa_out(c):
    """SDPA's output of the call in the shape xattn's has ([B, Hq, Sq, Dv])."""
    o = c.tensors["out"]
    if o.dim() == 3:
        o = o[None]
    if c.q_packed > 1:
        o = o.reshape(c.batch, c.heads, 1, c.head_dim_v)
    return o


def _sdpa_alone(c, warmup, budget_s, max_spread, max_reps):
    t = c.tensors
    q, k, v, mask = t["q"], t["k"], t["v"], t["mask"]
    kw = {"attn_mask": mask, "is_causal": c.is_causal, "scale": c.scale}
    if c.enable_gqa:
        kw["enable_gqa"] = True

    def once():
        t0 = time.perf_counter()
        F.scaled_dot_product_attention(q, k, v, **kw)
        if q.is_cuda:
            torch.cuda.synchronize(q.device)
        return (time.perf_counter() - t0) * 1e3

    with torch.no_grad():
        return _measure(once, warmup, 5, max_reps, budget_s, max_spread)


def _xattn_cell(ctx, q, k, v, opts, algo, warmup, budget_s, max_spread, max_reps, out=None):
    """Times xattn on ctx; returns (cell dict, the last output)."""
    last = {}
    copy = ctx.backend == "cuda" and not q.is_cuda

    def once():
        o, rec = _core.attention(q, k, v, algo=algo, backend=ctx, copy=copy, out=out, **opts)
        last["o"], last["rec"] = o, rec
        return rec["device_ms"]

    walls = []

    def timed():
        t0 = time.perf_counter()
        ms = once()
        walls.append((time.perf_counter() - t0) * 1e3)
        return ms

    ctx.reset_peak()
    s = _measure(timed, warmup, 5, max_reps, budget_s, max_spread)
    rec = last["rec"]
    cell = {"backend": ctx.backend, "device": ctx.device, "device_name": ctx.device_info["name"],
            "algo": algo, "algo_chosen": rec["algo_chosen"], "kernel": rec["kernel"], "time_ms": s,
            "wall_ms": summarize(walls[-s["n"]:]),
            "workspace_bytes": rec["workspace_bytes"], "context_peak_bytes": ctx.mem_stats()["peak_bytes"],
            "flops_dense": rec["flops_dense"], "flops_useful": rec["flops_useful"],
            "flops_executed": rec["flops_executed"], "work_counted": bool(rec["work_counted"]),
            "bytes_min": rec["bytes_min"],
            "bytes_actual": rec["bytes_actual"], "padding_waste": rec["padding_waste"],
            "gflops_useful": rec["flops_useful"] / (s["median"] * 1e6) if s["median"] else None,
            "phases": dict(zip(rec["phase_names"], rec["phase_ms"]))}
    return cell, last["o"]


def _case_section(ci, first, group, passes, ctxs, algos, warmup, budget_s, max_spread, max_reps,
                  packed) -> dict:
    a = first.analysis
    in_model = summarize([p["call_ms"][c.index] for c in group for p in passes])
    useful, dense = first.token_pairs()
    sec = {"case": ci, "key": _case_key(first), "count": len(group), "calls": [c.index for c in group],
           "layers": sorted({c.layer for c in group}, key=_natural), "dtype": first.dtype,
           "shape": {"batch": first.batch, "heads": first.heads, "kv_heads": first.kv_heads, "sq": first.sq,
                     "sk": first.sk, "head_dim": first.head_dim, "head_dim_v": first.head_dim_v},
           "mask_meaning": a.note or a.kind, "kv_repeated_by_caller": first.kv_repeated,
           "q_packed_by_caller": first.q_packed,
           "pytorch": {"in_model_ms": in_model}, "supported": first.supported, "note": first.reason,
           "padding": {"pairs_useful": useful, "pairs_dense": dense,
                       "waste_from_token_counts": 1.0 - useful / dense if dense else 0.0,
                       "seqlens_q": a.seqlens_q, "seqlens_k": a.seqlens_k},
           "naive_scores_bytes": 4 * first.batch * first.heads * first.sq * first.sk,
           "xattn": [], "packed": [], "errors": []}
    mem = [c.mem.get("peak_delta") for c in group if c.mem.get("peak_delta") is not None]
    if mem:
        sec["pytorch"]["peak_delta_bytes"] = max(mem)
        sec["pytorch"]["peak_kind"] = group[0].mem.get("kind")
    if not first.supported:
        sec["verdict"] = f"not replayed: {first.reason}"
        return sec
    sec["pytorch"]["alone_ms"] = _sdpa_alone(first, warmup, budget_s, max_spread, max_reps)
    q, k, v, opts = _inputs_for_xattn(first)
    sdpa_out = _sdpa_out(first)
    if q.is_cuda:  # the captured copies were made on PyTorch's stream; xattn has its own
        torch.cuda.synchronize(q.device)
    for b, ctx in ctxs.items():
        q, k, v, opts = _on_backend(ctx, *_inputs_for_xattn(first))
        for algo in algos:
            try:
                cell, o = _xattn_cell(ctx, q, k, v, opts, algo, warmup, budget_s, max_spread, max_reps)
                cell["xattn_vs_sdpa"] = _quick_agreement(o, sdpa_out, a, first)
                sec["xattn"].append(cell)
            except _core.XattnError as e:
                sec["errors"].append({"backend": b, "algo": algo, "status": e.status_name, "message": e.message})
        if packed and a.seqlens_k is not None and a.seqlens_q is not None and a.kind == "lengths" \
                and a.window is None:
            lq, lk = a.seqlens_q, a.seqlens_k
            qp, kp, vp = _packed(q, lq), _packed(k, lk), _packed(v, lk)
            popts = {"layout": "bshd", "scale": first.scale, "cu_seqlens_q": _cu(lq), "cu_seqlens_k": _cu(lk)}
            if a.causal:
                popts["causal"] = a.causal
            try:
                cell, _ = _xattn_cell(ctx, qp, kp, vp, popts, "flash", warmup, budget_s, max_spread, max_reps)
                cell["form"] = "packed (varlen)"
                sec["packed"].append(cell)
            except _core.XattnError as e:
                sec["errors"].append({"backend": b, "algo": "flash packed", "status": e.status_name,
                                      "message": e.message})
    sec["verdict"] = _verdict(sec)
    return sec


def _rows_mask(c):
    """Rows compared with SDPA: [B, 1, Sq, 1] True for rows that are not padding."""
    a = c.analysis
    if a.seqlens_q is None:
        return None
    lq = np.asarray(a.seqlens_q)
    return (np.arange(c.sq)[None, :] < lq[:, None])[:, None, :, None]


def _quick_agreement(o, sdpa_out, a, c) -> Optional[float]:
    from .._numerics import rel_l2, to_f64

    x, s = to_f64(o), to_f64(sdpa_out)
    if x.shape != s.shape:
        return None
    rows = _rows_mask(c)
    if rows is not None:
        sel = np.broadcast_to(rows, x.shape)
        x, s = x[sel], s[sel]
    m = np.isfinite(s)
    return rel_l2(x[m], s[m])


def _verdict(sec) -> str:
    cells = [(f"{c['backend']} {c['algo']}", c["time_ms"]) for c in sec["xattn"] if c["time_ms"]["n"]]
    cells += [(f"{c['backend']} flash packed", c["time_ms"]) for c in sec["packed"] if c["time_ms"]["n"]]
    sd = sec["pytorch"].get("alone_ms")
    if sd and sd["n"]:
        cells.append(("pytorch sdpa", sd))
    if not cells:
        return "no timing"
    cells.sort(key=lambda x: x[1]["median"])
    best, bs = cells[0]
    parts = [f"{best} is fastest ({bs['median']:.4g} ms, spread {100 * bs['spread']:.0f}%)"]
    for name, s in cells[1:3]:
        ratio = s["median"] / bs["median"] if bs["median"] > 0 else float("inf")
        real = real_difference(bs, s)
        parts.append(f"{ratio:.2f}x vs {name}" + ("" if real else " (within noise)"))
    if sd and sd["n"] and best != "pytorch sdpa":
        ratio = sd["median"] / bs["median"] if bs["median"] > 0 else float("inf")
        if not any("pytorch" in p for p in parts):
            parts.append(f"{ratio:.2f}x vs pytorch sdpa" + ("" if real_difference(bs, sd) else " (within noise)"))
    return ", ".join(parts)


def _numerics_section(calls, ctx) -> dict:
    """Every call: xattn (AUTO on ctx) against SDPA's output and the reference."""
    rows, by_dtype = [], {}
    if ctx is None:
        return {"rows": [], "by_dtype": {}, "note": "no backend available"}
    for c in calls:
        if not c.supported or c.tensors is None:
            continue
        q, k, v, opts = _inputs_for_xattn(c)
        if q.is_cuda:
            torch.cuda.synchronize(q.device)
        q, k, v, opts = _on_backend(ctx, q, k, v, opts)
        copy = ctx.backend == "cuda" and not q.is_cuda
        try:
            o, _ = _core.attention(q, k, v, backend=ctx, copy=copy, **opts)
            ref = _core.reference(q, k, v, backend=ctx, copy=copy, **opts)
        except _core.XattnError as e:
            rows.append({"call": c.index, "error": f"{e.status_name}: {e.message}"})
            continue
        r = compare_outputs(o, _sdpa_out(c), ref, c.dtype, rows=_rows_mask(c))
        r["call"] = c.index
        r["layer"] = c.layer
        rows.append(r)
        d = by_dtype.setdefault(c.dtype, {"calls": 0, "worst_xattn_vs_sdpa": 0.0, "worst_sdpa_vs_reference": 0.0,
                                          "worst_xattn_vs_reference": 0.0, "pair_bound_min": math.inf,
                                          "all_pass": True})
        d["calls"] += 1
        d["worst_xattn_vs_sdpa"] = max(d["worst_xattn_vs_sdpa"], r["xattn_vs_sdpa"])
        d["worst_sdpa_vs_reference"] = max(d["worst_sdpa_vs_reference"], r["sdpa_vs_reference"])
        d["worst_xattn_vs_reference"] = max(d["worst_xattn_vs_reference"], r["xattn_vs_reference"])
        d["pair_bound_min"] = min(d["pair_bound_min"], r["pair_bound"])
        d["all_pass"] = d["all_pass"] and r["pass"]
    return {"backend": ctx.backend, "rows": rows, "by_dtype": by_dtype,
            "note": "relative L2 over the rows that are not padding; bound: f32 2e-5, f16/bf16 "
                    "2 x (3 e_r + 1e-5), e_r = the error of the reference rounded to the dtype"}


def _memory_section(report) -> dict:
    rows = []
    for c in report.get("cases", []):
        by_algo = {}
        for cell in c["xattn"]:
            by_algo.setdefault(cell["algo"], []).append(
                {"backend": cell["backend"], "workspace_bytes": cell["workspace_bytes"],
                 "context_peak_bytes": cell["context_peak_bytes"]})
        rows.append({"case": c["key"], "naive_scores_bytes": c["naive_scores_bytes"],
                     "pytorch_peak_delta_bytes": c["pytorch"].get("peak_delta_bytes"),
                     "pytorch_peak_kind": c["pytorch"].get("peak_kind"), "xattn": by_algo})
    return {"rows": rows}


__all__ = ["Profile", "profile", "capture", "_block_name"]
