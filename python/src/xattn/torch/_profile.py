"""The profile of a model's attention: where its time goes, what each call would
cost with xattn's algorithms on each backend, memory, padding, and agreement
with PyTorch's SDPA on the real activations.

Steps (docs/python.md, "The profile"):
1. a warm-up forward, then a capture pass (shapes, masks, activations);
2. `passes` timing passes: the forward's wall and CPU time, each SDPA call's wall
   time and each model block's, with a light wrapper; after each, one forward
   under torch.profiler (attention's share as torch sees it, memory events);
3. for each distinct call shape (a case): SDPA alone on the captured tensors,
   and xattn's NAIVE, FLASH and SPLITKV on every backend (and, for padded
   batches, FLASH on the same batch packed), called in turns (round-robin) until
   each cell's interval of the median is narrow or the case's share of
   `budget_s` is spent; then SDPA under torch.profiler in turns with xattn (the
   kernel clock). Every comparison is on one clock (wall, or kernel) and gives a
   ratio only where the intervals separate (_stats.verdict);
4. every call's output from xattn compared with SDPA's and with the reference.
"""

from __future__ import annotations

import collections
import contextlib
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
from .._stats import is_converged, load_line, load_section, load_snapshot, summarize, verdict
from ._capture import Capture, _block_name, capture

ALGOS = ("naive", "flash", "splitkv")


class _Timer:
    """The timing passes' wrapper: one clock reading before and after each SDPA call."""

    def __init__(self, blocks: dict, calls=(), ranges: bool = False):
        self.times = []
        self.clock = _eager_clock(calls, self.times, ranges)
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
        if self.clock is not None:
            self.clock.__enter__()
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
        if self.clock is not None:
            self.clock.__exit__(*exc)
        for h in self._hooks:
            h.remove()


def _eager_clock(calls, times: list, ranges: bool = False):
    """The MatmulClock of the hand-written attention spans among calls (None if there
    are none): each span's wall time (first matmul to second) appended to times when it
    closes, as the SDPA wrapper appends each SDPA call's."""
    spans = {c.span[0]: (c.span[1], c.module) for c in calls if c.kind == "eager" and c.span}
    if not spans:
        return None
    from ._eager import MatmulClock

    return MatmulClock(spans, lambda _start, ms: times.append(ms), ranges=ranges)


def _user_profiler_active() -> bool:
    """A torch.profiler (or autograd profiler) is recording in this thread: torch does
    not nest them, so profile() then runs none of its own."""
    try:
        return bool(torch._C._autograd._profiler_enabled())
    except Exception:  # pragma: no cover - a torch without that entry point
        return False


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
    """Calls fn (which returns a time in ms) until the median's interval is narrow
    (docs/python.md: (ci_high - ci_low) / median <= 2 x max_spread) after min_reps
    calls, or budget_s is spent (then the cell is not converged), or max_reps."""
    for _ in range(warmup):
        fn()
    xs, t_start, exhausted = [], time.perf_counter(), False
    while len(xs) < max_reps:
        xs.append(fn())
        if len(xs) >= min_reps and is_converged(summarize(xs, max_spread), max_spread):
            break
        if len(xs) >= min_reps and time.perf_counter() - t_start >= budget_s:
            exhausted = True
            break
    return summarize(xs, max_spread, budget_exhausted=exhausted)


SDPA_OP = "aten::scaled_dot_product_attention"


class _Cell:
    """One timed thing of a case (SDPA or an xattn algorithm on a backend). The
    cells of a case are called in turns (round-robin), so that a burst of load
    hits them alike. Each call is read on the wall clock and on the process's CPU
    clock (all its threads); xattn's calls also on the backend's own clock."""

    clocks = ("wall_ms", "cpu_ms")
    judged = ("wall_ms",)  # the clocks whose intervals say when the cell has converged

    def __init__(self, name: str):
        self.name = name
        self.samples = {k: [] for k in self.clocks}
        self.exhausted = False

    def call(self) -> dict:  # one call; returns the extra clocks' readings
        raise NotImplementedError

    def warm(self):
        self.call()

    def once(self):
        c0, t0 = time.process_time(), time.perf_counter()
        extra = self.call()
        t1, c1 = time.perf_counter(), time.process_time()
        self.samples["wall_ms"].append((t1 - t0) * 1e3)
        self.samples["cpu_ms"].append((c1 - c0) * 1e3)
        for k, v in extra.items():
            self.samples[k].append(v)

    def n(self) -> int:
        return len(self.samples["wall_ms"])

    def done(self, target: float, max_reps: int) -> bool:
        return self.n() >= max_reps or all(is_converged(summarize(self.samples[k], target), target)
                                           for k in self.judged)

    def stats(self, target: float) -> dict:
        return {k: summarize(v, target, budget_exhausted=self.exhausted) for k, v in self.samples.items()}


SDPA_BACKENDS = (("math", "MATH"), ("flash", "FLASH_ATTENTION"), ("efficient", "EFFICIENT_ATTENTION"),
                 ("cudnn", "CUDNN_ATTENTION"))


class _SdpaCell(_Cell):
    """PyTorch's SDPA alone on a call's captured tensors (the Python call: wall
    clock, what the model pays), and its op time in torch.profiler's events.
    backend: None (PyTorch's own choice) or an SDPBackend name ("MATH", ...), the
    call then made under torch.nn.attention.sdpa_kernel([that backend]), entered
    outside the timed call."""

    def __init__(self, c, backend: Optional[str] = None, label: Optional[str] = None):
        super().__init__(label or ("pytorch sdpa" if backend is None else f"pytorch sdpa {backend.lower()}"))
        t = c.tensors
        self.backend = backend
        self.q, self.k, self.v = t["q"], t["k"], t["v"]
        self.kw = {"attn_mask": t["mask"], "is_causal": c.is_causal, "scale": c.scale}
        if c.enable_gqa:
            self.kw["enable_gqa"] = True

    def ctx(self):
        if self.backend is None:
            return contextlib.nullcontext()
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel([getattr(SDPBackend, self.backend)])

    def warm(self):
        with self.ctx():
            self.call()

    def once(self):
        with self.ctx():
            super().once()

    def call(self) -> dict:
        F.scaled_dot_product_attention(self.q, self.k, self.v, **self.kw)
        if self.q.is_cuda:
            torch.cuda.synchronize(self.q.device)
        return {}

    def refusal(self) -> str:
        """"" when this backend runs the call; else why not (torch's error and warnings)."""
        import warnings

        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            try:
                self.warm()
                return ""
            except RuntimeError as e:
                why = [str(w.message).strip() for w in ws] + [str(e).strip().splitlines()[0]]
        dev = self.q.device.type
        if dev != "cuda" and self.backend in ("EFFICIENT_ATTENTION", "CUDNN_ATTENTION"):
            why.insert(0, f"PyTorch has no {self.backend} kernel for {dev} tensors (CUDA only)")
        return "; ".join(dict.fromkeys(w for w in why if w))


class _EagerCell(_SdpaCell):
    """The model's own hand-written attention, replayed on the recovered tensors:
    softmax(q @ k^T * scale + mask) @ v (the bool mask as masked_fill)."""

    def __init__(self, c):
        super().__init__(c, None, "pytorch eager")
        self.scale = c.scale if c.scale is not None else c.head_dim ** -0.5
        m = self.kw["attn_mask"]
        self.add = m if isinstance(m, torch.Tensor) and m.dtype != torch.bool else None
        self.masked = ~m if isinstance(m, torch.Tensor) and m.dtype == torch.bool else None
        self.kt = self.k.transpose(-2, -1)

    def call(self) -> dict:
        s = torch.matmul(self.q, self.kt) * self.scale
        if self.add is not None:
            s = s + self.add
        if self.masked is not None:
            s = s.masked_fill(self.masked, -math.inf)
        torch.matmul(torch.softmax(s, dim=-1), self.v)
        if self.q.is_cuda:
            torch.cuda.synchronize(self.q.device)
        return {}


class _XattnCell(_Cell):
    """xattn's algorithm on a backend: the whole Python call (wall and CPU clocks)
    and the backend's own clock (device_ms: the kernels' time)."""

    clocks = ("wall_ms", "cpu_ms", "device_ms")
    judged = ("wall_ms", "device_ms")

    def __init__(self, ctx, q, k, v, opts, algo, form=None):
        super().__init__(f"{ctx.backend} {algo}" + (" packed" if form else ""))
        self.ctx, self.q, self.k, self.v, self.opts, self.algo, self.form = ctx, q, k, v, opts, algo, form
        self.copy = ctx.backend == "cuda" and not q.is_cuda
        self.last = None

    def call(self) -> dict:
        o, rec = _core.attention(self.q, self.k, self.v, algo=self.algo, backend=self.ctx, copy=self.copy,
                                 **self.opts)
        self.last = (o, rec)
        return {"device_ms": rec["device_ms"]}

    def device_once(self):
        """A call whose only reading kept is the device clock (the kernel phase,
        under torch.profiler, whose overhead would inflate the wall clock)."""
        self.samples["device_ms"].append(self.call()["device_ms"])

    def cell(self, target: float) -> dict:
        rec, ctx, st = self.last[1], self.ctx, self.stats(target)
        d = st["device_ms"]
        out = {"backend": ctx.backend, "device": ctx.device, "device_name": ctx.device_info["name"],
               "algo": self.algo, "algo_chosen": rec["algo_chosen"], "kernel": rec["kernel"],
               "device_ms": d, "wall_ms": st["wall_ms"], "cpu_ms": st["cpu_ms"],
               "workspace_bytes": rec["workspace_bytes"], "context_peak_bytes": ctx.mem_stats()["peak_bytes"],
               "flops_dense": rec["flops_dense"], "flops_useful": rec["flops_useful"],
               "flops_executed": rec["flops_executed"], "work_counted": bool(rec["work_counted"]),
               "bytes_min": rec["bytes_min"], "bytes_actual": rec["bytes_actual"],
               "padding_waste": rec["padding_waste"],
               "gflops_useful": rec["flops_useful"] / (d["median"] * 1e6) if d["median"] else None,
               "phases": dict(zip(rec["phase_names"], rec["phase_ms"]))}
        if self.form:
            out["form"] = self.form
        return out


def _round_robin(cells, warmup: int, budget_s: float, target: float, max_reps: int, min_reps: int = 5):
    """Calls the cells in turns until each has converged (or made max_reps calls),
    or budget_s is spent after min_reps rounds (then the cells still running are
    marked as having run out of their budget: not converged). The order of a
    round rotates, so that no cell always follows the same one. Each timed call
    follows an untimed call of the same cell: PyTorch's and xattn's thread teams
    are different OpenMP runtimes, and a team that slept through the other
    cells' calls wakes slowly on a busy machine (a 0.13 ms SDPA call took 9.6 ms
    after 2 ms of idling at load 5), so every cell is timed with its own threads
    awake, as in a model that calls it among its own kind of work."""
    for c in cells:
        for _ in range(warmup):
            c.warm()
    t0, rnd = time.perf_counter(), 0
    while True:
        active = [c for c in cells if rnd < min_reps or not c.done(target, max_reps)]
        active = [c for c in active if c.n() < max_reps]
        if not active:
            return
        if rnd >= min_reps and time.perf_counter() - t0 >= budget_s:
            for c in active:
                c.exhausted = True
            return
        k = rnd % len(active)
        for c in active[k:] + active[:k]:
            c.warm()
            c.once()
        rnd += 1


def _op_times(prof, name: str, cuda: bool) -> list:
    """The durations (ms, in call order) of the outermost `name` ops in a
    torch.profiler trace: on CPU the op's own span (its CPU time total), on CUDA
    the time of the kernels it launched."""
    evs = [e for e in prof.events() if e.name == name and not (e.cpu_parent is not None and e.cpu_parent.name == name)]
    evs.sort(key=lambda e: e.time_range.start)
    if cuda:
        return [getattr(e, "device_time_total", getattr(e, "cuda_time_total", 0.0)) / 1e3 for e in evs]
    return [e.cpu_time_total / 1e3 for e in evs]


KERNEL_OP_PREFIX = "aten::_scaled_dot_product"


def _event_ms(e, cuda: bool) -> float:
    if cuda:
        return getattr(e, "device_time_total", getattr(e, "cuda_time_total", 0.0)) / 1e3
    return e.cpu_time_total / 1e3


def _first_below(e, match):
    """The first event below e, breadth first, for which match(event) holds (None if none)."""
    queue = collections.deque(e.cpu_children)
    while queue:
        c = queue.popleft()
        if match(c):
            return c
        queue.extend(c.cpu_children)
    return None


KERNEL_OPS = ("aten::_efficient_attention_forward", "aten::_flash_attention_forward")


def _chosen_op(e) -> str:
    """The kernel op an aten::scaled_dot_product_attention event ran (its child
    aten::_scaled_dot_product_*: flash_attention_for_cpu, efficient_attention,
    cudnn_attention, attention_math...), "" if none is seen."""
    c = _first_below(e, lambda c: c.name.startswith(KERNEL_OP_PREFIX) or c.name in KERNEL_OPS)
    return c.name if c is not None else ""


def kernel_label(op: str) -> str:
    """"flash", "efficient", "cudnn", "math" (or the op's name) from a kernel op's name."""
    for k in ("flash", "efficient", "cudnn", "math", "overrideable"):
        if k in op:
            return k
    return op or "?"


def _kernel_phase(tcells, xcells, rounds: int, target: float) -> dict:
    """PyTorch's cells under torch.profiler in turns with the xattn cells (whose device
    clock is read): each PyTorch call runs inside a record_function range of its cell;
    an SDPA cell's time is its aten::scaled_dot_product_attention op below that range
    (and the kernel op under it says which SDPA kernel ran), the eager cell's the range
    itself (its matmuls and softmax). Returns {cell name: (stats, kernel op)}."""
    from torch.profiler import ProfilerActivity, profile as tprofile, record_function

    cuda = tcells[0].q.is_cuda
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    cells = list(tcells) + list(xcells)
    tags = {id(c): f"xattn.profile cell {i}" for i, c in enumerate(tcells)}
    with tprofile(activities=acts) as pr:
        for r in range(rounds):
            k = r % len(cells)
            for c in cells[k:] + cells[:k]:
                c.warm()  # untimed: the cell's threads awake (see _round_robin)
                if id(c) in tags:
                    with c.ctx(), record_function(tags[id(c)]):
                        c.call()
                else:
                    c.device_once()
    times, ops = {id(c): [] for c in tcells}, {id(c): "" for c in tcells}
    by_tag = {t: i for i, t in tags.items()}
    evs = sorted((e for e in pr.events() if e.name in by_tag), key=lambda e: e.time_range.start)
    for e in evs:
        cid = by_tag[e.name]
        cell = next(c for c in tcells if id(c) == cid)
        if isinstance(cell, _EagerCell):
            times[cid].append(_event_ms(e, cuda))
            continue
        op = _first_below(e, lambda c: c.name == SDPA_OP)
        if op is not None:
            times[cid].append(_event_ms(op, cuda))
            ops[cid] = ops[cid] or _chosen_op(op)
    return {c.name: (summarize(times[id(c)], target, budget_exhausted=False), ops[id(c)]) for c in tcells}


def _fused_choice(c) -> str:
    """PyTorch's own selection helper (torch._fused_sdp_choice) on a call's kept
    tensors: the SDPA backend it would pick, where no profiler can show it."""
    t = c.tensors
    if not t:
        return ""
    try:
        from torch.nn.attention import SDPBackend

        n = int(torch._fused_sdp_choice(t["q"], t["k"], t["v"], attn_mask=t["mask"], dropout_p=0.0,
                                        is_causal=c.is_causal, scale=c.scale, enable_gqa=c.enable_gqa))
        names = {int(v.value): k for k, v in SDPBackend.__members__.items()}
        return names.get(n, str(n)).lower().replace("_attention", "")
    except Exception:
        return ""


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


def _passes_count(passes, reps, budget_s, max_spread, max_reps) -> int:
    """The timing passes asked for (passes, or reps, its old name; 7 by default),
    once the settings are checked."""
    if passes is not None and reps is not None and passes != reps:
        raise ValueError(f"profile: passes={passes} and reps={reps} (its old name) disagree")
    passes_n = passes if passes is not None else (reps if reps is not None else 7)
    if not isinstance(passes_n, int) or passes_n < 1:
        raise ValueError(f"profile: passes must be a positive integer, not {passes_n!r}")
    if not budget_s >= 0 or not max_spread > 0 or max_reps < 1:
        raise ValueError("profile: budget_s >= 0, max_spread > 0 and max_reps >= 1 are required")
    return passes_n


def _runner(model, inputs, kwargs, run, generate):
    """What one pass runs: (run, gen), gen the GenerateRun of model.generate (a
    prefill and `generate` decode steps) or None; run() the forward by default."""
    gen = None
    if generate is not None:  # model.generate(*inputs, **kwargs): a prefill and `generate` decode steps
        from ._generate import GenerateRun

        gen = GenerateRun(model, inputs, kwargs, generate)
        run = gen.run
    if run is None:
        if not callable(model):
            raise TypeError("profile: model must be callable (an nn.Module), or give run=")

        def run():
            return model(*inputs, **kwargs)

    return run, gen


def _capture_step(run, model, device, kv_buckets) -> Capture:
    """Step 1: a warm-up pass, then the capture pass (its calls, with their tensors)."""
    from torch.profiler import record_function

    with torch.no_grad(), record_function("xattn.profile capture"):
        run()
        _sync(device)
        cap = Capture(model, keep_tensors=True, kv_buckets=kv_buckets)
        with cap:
            _sync(device)
            t0 = time.perf_counter()
            run()
            _sync(device)
            cap.forward_ms = (time.perf_counter() - t0) * 1e3
    if not cap.calls:
        um = "; ".join(f"{u['module'] or 'the model'}: {u['reason']}" for u in cap.unmapped)
        raise RuntimeError("profile: the model made no scaled_dot_product_attention call and no hand-written "
                           "attention (matmul -> softmax -> matmul) was found"
                           + (f"; chains not mapped: {um}" if um else ""))
    return cap


def _check_pass(tm, cap, calls) -> None:
    """A timing pass must have made the capture's calls (and matmuls, for hand-written attention)."""
    if len(tm.times) != len(calls):
        raise RuntimeError(f"profile: a timing pass made {len(tm.times)} attention calls, the "
                           f"capture {len(calls)}: the forward is not repeatable")
    if tm.clock is not None and tm.clock.count != cap.matmuls:
        raise RuntimeError(f"profile: a timing pass made {tm.clock.count} matmuls, the capture "
                           f"{cap.matmuls}: the hand-written attention spans cannot be placed"
                           + (" (a torch.compile'd model: its matmuls do not pass through Python; "
                              "profile it uncompiled)" if tm.clock.count == 0 else ""))


def _timing_passes(run, model, device, cap, gen, passes_n, own_profiler) -> tuple:
    """Step 2: the timing passes, each (with own_profiler) followed by one under
    torch.profiler; returns (passes, torch.profiler passes)."""
    from torch.profiler import record_function

    calls = cap.calls
    block_names = sorted({c.layer for c in calls if c.layer})
    mods = dict(model.named_modules()) if isinstance(model, torch.nn.Module) else {}
    blocks = {n: mods[n] for n in block_names if n in mods}
    passes, tprof = [], []
    with torch.no_grad():
        for pi in range(passes_n):
            tm = _Timer(blocks, calls)
            clk = gen.clock() if gen else contextlib.nullcontext()
            with tm, clk, record_function(f"xattn.profile timing pass {pi}"):
                _sync(device)
                c0, t0 = time.process_time(), time.perf_counter()
                run()
                _sync(device)
                fwd, fwd_cpu = (time.perf_counter() - t0) * 1e3, (time.process_time() - c0) * 1e3
            _check_pass(tm, cap, calls)
            passes.append({"forward_ms": fwd, "cpu_ms": fwd_cpu, "call_ms": tm.times, "block_ms": tm.block_ms})
            if gen:
                passes[-1]["step_ms"] = clk.times
            if own_profiler:  # in turns with the timing passes: a burst of load hits both alike
                tprof.append(_profiler_pass(run, device, calls, memory=True))
    return passes, tprof


def _torch_profiler_note(own_profiler, user_profiler, torch_profiler) -> dict:
    """The report's torch_profiler entry: whether the profile ran its own passes, and why not."""
    out = {"own_passes": own_profiler, "caller_profiler_active": user_profiler}
    if user_profiler:
        out["note"] = (
            "a torch.profiler of the caller's was recording: torch does not nest profilers, so the profile's own "
            "torch.profiler passes were skipped (no torch.profiler share, no memory events, no PyTorch kernel "
            "clock; the kernel PyTorch chose is from torch._fused_sdp_choice); the caller's trace has the "
            "profile's phases (xattn.profile ...) and every xattn replay as record_function ranges")
    elif not torch_profiler:
        out["note"] = "torch_profiler=False: no torch.profiler pass"
    return out


def _cases_step(report, cap, passes, backends, threads, algos, warmup, budget_s, max_spread, max_reps,
                packed, compare, kernel_clock, log) -> None:
    """Steps 3 and 4: the cases (SDPA alone, xattn on every backend and algorithm,
    packed), then the numerics on every call; the backends' contexts are closed after."""
    from torch.profiler import record_function

    bks = _pick_backends(backends)
    ctxs = {}
    try:
        for b in bks:
            try:
                ctxs[b] = _core.Context(b, 0, threads=threads if b == "cpu" else None)
            except Exception as e:  # a backend that fails to open is reported, not fatal
                report.setdefault("backend_errors", {})[b] = str(e)
        cases, groups = [], list(cap.cases())
        t_cells = time.perf_counter()
        for ci, (first, group) in enumerate(groups):
            log(f"case {ci}: {_case_key(first)} x {len(group)}")
            # the budget left, shared by the cases left (a case that converges early leaves its rest)
            share = max(budget_s - (time.perf_counter() - t_cells), 0.0) / (len(groups) - ci)
            with record_function(f"xattn.profile case {ci}"):
                cases.append(_case_section(ci, first, group, passes, ctxs, algos, warmup, share,
                                           max_spread, max_reps, packed, kernel_clock=kernel_clock))
        report["cases"] = cases
        from ._generate import annotate_buckets

        annotate_buckets(cases, groups, cap.kv_bucket)
        report["backends"] = {b: ctxs[b].device_info["name"] for b in ctxs}
        # 4. numerics on every call
        if compare:
            report["numerics"] = _numerics_section(cap.calls, ctxs.get("cpu") or next(iter(ctxs.values()), None))
    finally:
        for c in ctxs.values():
            c.close()


def profile(model, *inputs, run: Optional[Callable] = None, model_name: str = "", backends=None,
            algos=ALGOS, passes: Optional[int] = None, reps: Optional[int] = None, warmup: int = 1,
            budget_s: float = 10.0, max_spread: float = 0.05, max_reps: int = 200, compare: bool = True,
            packed: bool = True, threads: Optional[int] = None, torch_profiler: bool = True, out_dir=None,
            verbose: bool = False, generate: Optional[int] = None, kv_buckets="pow2", **kwargs) -> Profile:
    """Profiles the attention of model(*inputs, **kwargs) (or of run(), a callable
    that runs the model, e.g. a prefill and decode steps). Returns a Profile;
    with out_dir, writes profile.json, profile.txt, chart.svg and cases.json there.

    backends: None = every available one ("cpu", "opencl", "cuda"); algos: the
    xattn algorithms replayed; passes (reps, its old name): timing passes of the
    whole forward (7), each followed by one under torch.profiler (attention's
    share as torch sees it, and memory) unless torch_profiler=False; budget_s: the
    seconds that all the timed cells share (each cell makes at least 5 calls);
    max_spread: the target of a cell's interval ((ci_high - ci_low) / median <=
    2 x max_spread: converged); max_reps: the most calls of a cell; compare: check
    every call's output against SDPA's and the reference; packed: time the packed
    (varlen) form of padded batches; threads: the CPU backend's threads.
    generate=N: run model.generate(*inputs, **kwargs) greedily for a prefill and N
    decode steps instead of a forward, and report them apart (report["generation"]);
    kv_buckets: how decode steps are grouped into cases by KV length ("pow2", a
    width, or None for one case per Sk).
    """
    passes_n = _passes_count(passes, reps, budget_s, max_spread, max_reps)
    load_start = load_snapshot()

    # Inside a caller's torch.profiler.profile(): torch does not nest profilers, so the
    # profile's own torch.profiler passes are skipped (and said so); the caller's trace
    # gets the profile's phases as record_function ranges, and xattn's replays as theirs.
    user_profiler = _user_profiler_active()
    own_profiler = torch_profiler and not user_profiler
    run, gen = _runner(model, inputs, kwargs, run, generate)

    device = _device_of(model, inputs)
    t_all = time.perf_counter()
    log = print if verbose else (lambda *a, **k: None)

    # 1. warm-up, then the capture pass
    cap = _capture_step(run, model, device, kv_buckets)
    calls = cap.calls
    log(f"captured {len(calls)} attention calls")

    # 2. timing passes
    passes, tprof = _timing_passes(run, model, device, cap, gen, passes_n, own_profiler)
    # cases.json's forward_ms: the timing passes' median, not the capture pass (which copies every tensor)
    cap.capture_forward_ms = cap.forward_ms
    cap.timed_forward_ms = summarize([p["forward_ms"] for p in passes])["median"]

    report = {"schema": "xattn.profile/1", "model": model_name, "xattn_version": _core.version(),
              "torch_version": torch.__version__, "device": str(device), "passes": passes_n, "reps": passes_n,
              "calls": len(calls), "settings": {"passes": passes_n, "budget_s": budget_s, "target": max_spread,
                                                "max_reps": max_reps, "min_reps": 5, "warmup": warmup}}
    _assign_kernels(calls, tprof)
    report["attention_kinds"] = {k: sum(1 for c in calls if c.kind == k) for k in ("sdpa", "eager")}
    report["unmapped"] = list(cap.unmapped)
    report["torch_profiler"] = _torch_profiler_note(own_profiler, user_profiler, torch_profiler)
    report["forward"] = _forward_section(calls, passes, tprof, max_spread)
    report["layers"] = _layer_section(calls, passes)
    if gen:
        from ._generate import generation_section

        report["generation"] = generation_section(cap, passes, gen)
    report["calls_detail"] = [_call_row(c, passes) for c in calls]

    # 3. the cases: SDPA alone, xattn on every backend and algorithm, packed; 4. the numerics
    _cases_step(report, cap, passes, backends, threads, algos, warmup, budget_s, max_spread, max_reps,
                packed, compare, not user_profiler, log)
    report["memory"] = _memory_section(report, tprof, calls)
    report["load"] = load_section(load_start, load_snapshot())
    report["load"]["line"] = load_line(report["load"])
    report["wall_s"] = time.perf_counter() - t_all
    prof = Profile(report, cap)
    if out_dir is not None:
        prof.write(out_dir)
    return prof


def _profiler_pass(run, device, calls, memory: bool = True) -> dict:
    """One forward under torch.profiler (with profile_memory): the SDPA ops' time
    as torch sees it, the forward's time in the same pass, and the memory events."""
    from torch.profiler import ProfilerActivity, profile as tprofile

    cuda = device is not None and device.type == "cuda"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    out = {}
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
    eager = _eager_clock(calls, [], ranges=True)
    with tprofile(activities=acts, profile_memory=memory) as pr, (eager or contextlib.nullcontext()):
        _sync(device)
        t0 = time.perf_counter()
        run()
        _sync(device)
        fwd = (time.perf_counter() - t0) * 1e3
    if cuda:
        out["cuda_peak_bytes"] = torch.cuda.max_memory_allocated(device) - before
    ts = _op_times(pr, SDPA_OP, cuda)
    # the hand-written spans: their record_function ranges (first matmul to second)
    es = [e for e in pr.events() if e.name.startswith("xattn eager attention ")]
    es.sort(key=lambda e: e.time_range.start)
    ems = [_event_ms(e, cuda) for e in es]
    evs = [e for e in pr.events()
           if e.name == SDPA_OP and not (e.cpu_parent is not None and e.cpu_parent.name == SDPA_OP)]
    evs.sort(key=lambda e: e.time_range.start)
    out.update({"forward_ms": fwd, "sdpa_ms": ts, "eager_ms": ems, "attention_ms": sum(ts) + sum(ems),
                "calls": len(ts) + len(ems), "kernels": [_chosen_op(e) for e in evs]})
    if memory:
        out["memory"] = _torch_memory(pr, device, calls)
    return out


def _assign_kernels(calls, tprof):
    """Each SDPA call's kernel as PyTorch chose it: the op below its
    aten::scaled_dot_product_attention in the last torch.profiler pass (in call
    order), else PyTorch's selection helper on the kept tensors."""
    sd = [c for c in calls if c.kind != "eager"]
    seen = next((t["kernels"] for t in reversed(list(tprof)) if len(t.get("kernels", [])) == len(sd)), None)
    for i, c in enumerate(sd):
        if seen is not None and seen[i]:
            c.sdpa_kernel = f"{kernel_label(seen[i])} ({seen[i]}, torch.profiler)"
        else:
            k = _fused_choice(c)
            c.sdpa_kernel = f"{k} (torch._fused_sdp_choice)" if k else ""


def _torch_memory(pr, device, calls) -> dict:
    """The allocations of one forward as torch.profiler's memory events show them
    (profile_memory=True): the forward's peak above what was live at its start,
    and per SDPA call the bytes it allocated at its peak, kept (its output) and
    freed before it returned (its workspace); the copies made between two SDPA
    calls of exactly the size of a repeated K or V (transformers' repeat_kv);
    and the allocations of exactly the size of the call's mask."""
    cuda = device is not None and device.type == "cuda"
    want = "CUDA" if cuda else "CPU"
    try:
        evs = list(pr.profiler.kineto_results.events())
    except AttributeError:
        return {"error": "this torch's profiler does not expose its memory events"}
    mem = sorted((e.start_ns(), e.nbytes()) for e in evs
                 if e.name() == "[memory]" and want in str(e.device_type()))
    spans = sorted((e.start_ns(), e.end_ns()) for e in evs if e.name() == SDPA_OP)
    outer = []
    for s0, s1 in spans:  # the outermost SDPA ops
        if outer and s0 >= outer[-1][0] and s1 <= outer[-1][1]:
            continue
        outer.append((s0, s1))
    run, peak = 0, 0
    for _, nb in mem:
        run += nb
        peak = max(peak, run)
    per_call, prev_end = [], -1
    for i, (s0, s1) in enumerate(outer):
        inside = [nb for t, nb in mem if s0 <= t <= s1]
        r, pk = 0, 0
        for nb in inside:
            r += nb
            pk = max(pk, r)
        row = {"peak_bytes": pk, "kept_bytes": r, "workspace_bytes": max(pk - max(r, 0), 0),
               "allocated_bytes": sum(nb for nb in inside if nb > 0)}
        c = calls[i] if i < len(calls) and len(outer) == len(calls) else None
        if c is not None and c.kv_repeated > 1 and c.tensors is not None:
            sizes = {c.tensors["k"].numel() * c.tensors["k"].element_size(),
                     c.tensors["v"].numel() * c.tensors["v"].element_size()}
            before = [nb for t, nb in mem if prev_end < t < s0 and nb in sizes]
            row["repeat_kv_copies"] = len(before)
            row["repeat_kv_bytes"] = sum(before)
        per_call.append(row)
        prev_end = s1
    masks = {}
    for c in calls:
        m = c.tensors.get("mask") if c.tensors else None
        if isinstance(m, torch.Tensor):
            masks[m.numel() * m.element_size()] = str(m.dtype).replace("torch.", "")
    outside = [nb for t, nb in mem if nb > 0 and not any(s0 <= t <= s1 for s0, s1 in outer)]
    mask_rows = [{"bytes": b, "dtype": dt, "allocations": sum(1 for nb in outside if nb == b)}
                 for b, dt in masks.items()]
    return {"kind": f"torch.profiler profile_memory ({want})", "forward_peak_bytes": peak,
            "forward_allocated_bytes": sum(nb for _, nb in mem if nb > 0), "calls": per_call,
            "masks": mask_rows, "sdpa_calls_seen": len(outer)}


def _forward_section(calls, passes, tprof=(), target: float = 0.05) -> dict:
    fwd = summarize([p["forward_ms"] for p in passes], target)
    cpu = summarize([p["cpu_ms"] for p in passes if p.get("cpu_ms") is not None], target)
    att = summarize([sum(p["call_ms"]) for p in passes], target)
    share = summarize([sum(p["call_ms"]) / p["forward_ms"] for p in passes if p["forward_ms"] > 0], target)
    out = {"forward_ms": fwd, "forward_cpu_ms": cpu, "attention_ms": att, "attention_share": share,
           "clock": "wall clock (time.perf_counter around each SDPA call, each hand-written attention span and the "
                    "whole forward, from Python)",
           "note": "over the timing passes; attention = the SDPA calls' wall time inside the forward (and each "
                   "hand-written attention's, from its first matmul to its second), share = "
                   "attention / forward per pass; forward_cpu_ms = the process's CPU time (all threads)"}
    if tprof:
        tp_share = summarize([t["attention_ms"] / t["forward_ms"] for t in tprof if t["forward_ms"] > 0], target)
        agree = bool(share.get("n") and tp_share.get("n") and share["ci_low"] <= tp_share["ci_high"]
                     and tp_share["ci_low"] <= share["ci_high"])
        cuda = any("cuda_peak_bytes" in t for t in tprof)
        out["torch_profiler"] = {
            "attention_ms": summarize([t["attention_ms"] for t in tprof], target),
            "forward_ms": summarize([t["forward_ms"] for t in tprof], target),
            "attention_share": tp_share, "agree": agree,
            "calls_seen": [t["calls"] for t in tprof],
            "clock": ("the kernels' device time of each " if cuda else "the duration of each ") + SDPA_OP
                     + " op (and each hand-written attention's range, first matmul to second) in torch.profiler, "
                     "over the forward's wall time in the same pass",
            "note": "one forward under torch.profiler after each timing pass; agree = the two shares' "
                    "intervals overlap"}
    return out


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
    return {"index": c.index, "module": c.module, "layer": c.layer, "case": _case_key(c), "kind": c.kind,
            "attention": c.source, "sdpa_kernel": c.sdpa_kernel,
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
    if c.kind == "eager":
        s += " eager"
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


def _case_base(ci, first, group, passes) -> dict:
    """The case's description before any replay: its key, shape, mask, padding,
    the time its calls took in the model, and the allocator's peak around them."""
    a = first.analysis
    in_model = summarize([p["call_ms"][c.index] for c in group for p in passes])
    useful, dense = first.token_pairs()
    sec = {"case": ci, "key": _case_key(first), "count": len(group), "calls": [c.index for c in group],
           "layers": sorted({c.layer for c in group}, key=_natural), "dtype": first.dtype,
           "shape": {"batch": first.batch, "heads": first.heads, "kv_heads": first.kv_heads, "sq": first.sq,
                     "sk": first.sk, "head_dim": first.head_dim, "head_dim_v": first.head_dim_v},
           "mask_meaning": a.note or a.kind, "kv_repeated_by_caller": first.kv_repeated,
           "q_packed_by_caller": first.q_packed,
           "pytorch": {"in_model_ms": in_model, "impl": "eager" if first.kind == "eager" else "sdpa",
                       "kernel_chosen": first.sdpa_kernel},
           "attention": first.source, "kind": first.kind, "supported": first.supported, "note": first.reason,
           "padding": {"pairs_useful": useful, "pairs_dense": dense,
                       "waste_from_token_counts": 1.0 - useful / dense if dense else 0.0,
                       "seqlens_q": a.seqlens_q, "seqlens_k": a.seqlens_k},
           "naive_scores_bytes": 4 * first.batch * first.heads * first.sq * first.sk,
           "xattn": [], "packed": [], "errors": []}
    # the allocator's peak around the call (CUDA); the host's RSS high-water mark is no
    # peak of the call (the allocator reuses freed memory): torch.profiler's figures replace it
    mem = [c.mem.get("peak_delta") for c in group
           if c.mem.get("peak_delta") is not None and c.mem.get("kind") == "cuda-allocator"]
    if mem:
        sec["pytorch"]["peak_delta_bytes"] = max(mem)
        sec["pytorch"]["peak_kind"] = group[0].mem.get("kind")
    return sec


def _sdpa_backend_cells(first, sec) -> list:
    """PyTorch's SDPA backends on the case's tensors (and, for attention written by
    hand, SDPA with PyTorch's own choice): the cells of those that run it; each one
    that refuses the case is listed in sec["pytorch_backends"] with why."""
    others = [_SdpaCell(first)] if first.kind == "eager" else []
    others += [_SdpaCell(first, b, f"pytorch sdpa {short}") for short, b in SDPA_BACKENDS]
    sec["pytorch_backends"], bcells = [], []
    for cell in others:
        why = cell.refusal()
        row = {"name": cell.name, "backend": next((k for k, b in SDPA_BACKENDS if b == cell.backend), "default"),
               "sdpa_backend": cell.backend or "PyTorch's choice", "runs": not why}
        if why:
            row["refused"] = why
        else:
            bcells.append(cell)
        sec["pytorch_backends"].append(row)
    return bcells


def _packed_form(first, q, k, v):
    """The case's batch packed (varlen) for FLASH: (q, k, v, options), the real rows only."""
    a = first.analysis
    lq, lk = a.seqlens_q, a.seqlens_k
    popts = {"layout": "bshd", "scale": first.scale, "cu_seqlens_q": _cu(lq), "cu_seqlens_k": _cu(lk)}
    if a.causal:
        popts["causal"] = a.causal
    return _packed(q, lq), _packed(k, lk), _packed(v, lk), popts


def _has_packed_form(a, algos, packed: bool) -> bool:
    """Whether the case is timed packed too: a batch padded by lengths, no window, FLASH asked for."""
    return (packed and a.seqlens_k is not None and a.seqlens_q is not None and a.kind == "lengths"
            and a.window is None and "flash" in algos)


def _xattn_cells(first, ctxs, algos, packed: bool, sec) -> list:
    """xattn's cells of the case, [(where, cell)] with where "xattn" (padded) or
    "packed": every algorithm on every backend, and FLASH packed where the batch
    is padded; each one refused on its first call goes to sec["errors"]."""
    xcells = []
    for b, ctx in ctxs.items():
        q, k, v, opts = _on_backend(ctx, *_inputs_for_xattn(first))
        forms = [(algo, q, k, v, opts, None) for algo in algos]
        if _has_packed_form(first.analysis, algos, packed):
            forms.append(("flash", *_packed_form(first, q, k, v), "packed (varlen)"))
        for algo, q_, k_, v_, o_, form in forms:
            cell = _XattnCell(ctx, q_, k_, v_, o_, algo, form)
            try:
                cell.call()  # the first call: refused cases are reported, not timed
            except _core.XattnError as e:
                sec["errors"].append({"backend": b, "algo": algo + (" packed" if form else ""),
                                      "status": e.status_name, "message": e.message})
                continue
            xcells.append(("packed" if form else "xattn", cell))
    return xcells


def _kernel_rounds(cells, budget_s, spent, max_reps, kernel_clock: bool) -> int:
    """The kernel phase's rounds: what the case's budget has left, at the wall clock's pace."""
    per_round = sum(summarize(c.samples["wall_ms"])["median"] or 0 for c in cells) / 1e3
    left = max(budget_s - spent, 0.0)
    return int(min(max_reps, max(5, left / max(2 * per_round, 1e-6)))) if kernel_clock else 0


def _kernel_clock_text(first, sdpa, kernels) -> str:
    """What PyTorch's kernel clock is on this case (or why it was not read)."""
    what = ("the record_function range around the replayed chain (aten::matmul, aten::softmax, aten::matmul)"
            if first.kind == "eager" else SDPA_OP)
    return (("torch.profiler: the device time of the kernels launched by " if sdpa.q.is_cuda
             else "torch.profiler: the duration of ") + what) if kernels else (
        "not measured: a torch.profiler of the caller's was recording (torch does not nest profilers)")


def _pytorch_cell_results(sec, first, sdpa, kernels, max_spread) -> tuple:
    """The model's PyTorch attention on the case's clocks into sec["pytorch"];
    returns its stats and its kernel-clock stats."""
    st = sdpa.stats(max_spread)
    kclock = _kernel_clock_text(first, sdpa, kernels)
    k_sd, op = kernels.get(sdpa.name, ({}, ""))
    sec["pytorch"].update({"wall_ms": st["wall_ms"], "cpu_ms": st["cpu_ms"], "kernel_ms": k_sd,
                           "kernel_clock": kclock})
    if op and first.kind != "eager":
        sec["pytorch"]["kernel_op"] = op
        sec["pytorch"]["kernel_chosen"] = kernel_label(op)
    return st, k_sd


def _sdpa_backend_results(sec, bcells, kernels, st, k_sd, label, max_spread) -> None:
    """Each SDPA backend that ran: its clocks, and its verdicts against the model's PyTorch attention."""
    for row, cell in ((r, next((c for c in bcells if c.name == r["name"]), None)) for r in sec["pytorch_backends"]):
        if cell is None:
            continue
        bst = cell.stats(max_spread)
        k_b, op_b = kernels.get(cell.name, ({}, ""))
        row.update({"wall_ms": bst["wall_ms"], "cpu_ms": bst["cpu_ms"], "kernel_ms": k_b})
        if op_b:
            row["kernel_op"] = op_b
        row["vs_model"] = {
            "wall": verdict(bst["wall_ms"], st["wall_ms"], cell.name, label, "wall clock"),
            "kernel": verdict(k_b, k_sd, cell.name, label, "kernel clock") if k_sd else {"result": "no data"}}


def _xattn_results(sec, xcells, sdpa_out, first, label, max_spread) -> None:
    """Each xattn cell's row (padded ones with their agreement with SDPA's output),
    with its verdicts against the model's PyTorch attention."""
    for where, cell in xcells:
        row = cell.cell(max_spread)
        o = cell.last[0]
        if where == "xattn":
            row["xattn_vs_sdpa"] = _quick_agreement(o, sdpa_out, first.analysis, first)
        row["vs_sdpa"] = _vs_sdpa(row, sec["pytorch"], label)
        sec[where].append(row)


def _case_section(ci, first, group, passes, ctxs, algos, warmup, budget_s, max_spread, max_reps,
                  packed, kernel_clock: bool = True) -> dict:
    sec = _case_base(ci, first, group, passes)
    if not first.supported:
        sec["verdict"] = f"not replayed: {first.reason}"
        return sec
    q, k, v, opts = _inputs_for_xattn(first)
    sdpa_out = _sdpa_out(first)
    if q.is_cuda:  # the captured copies were made on PyTorch's stream; xattn has its own
        torch.cuda.synchronize(q.device)
    sdpa = _EagerCell(first) if first.kind == "eager" else _SdpaCell(first)
    bcells = _sdpa_backend_cells(first, sec)
    xcells = _xattn_cells(first, ctxs, algos, packed, sec)
    for _, cell in xcells:
        cell.ctx.reset_peak()
    cells = [sdpa] + bcells + [c for _, c in xcells]
    t0 = time.perf_counter()
    _round_robin(cells, max(0, warmup - 1), budget_s * 0.65, max_spread, max_reps)
    spent = time.perf_counter() - t0
    # the kernel clock: SDPA's op time from torch.profiler, in turns with xattn's device clock
    rounds = _kernel_rounds(cells, budget_s, spent, max_reps, kernel_clock)
    kernels = _kernel_phase([sdpa] + bcells, [c for _, c in xcells], rounds, max_spread) if rounds else {}
    st, k_sd = _pytorch_cell_results(sec, first, sdpa, kernels, max_spread)
    label = "pytorch " + sec["pytorch"]["impl"]
    _sdpa_backend_results(sec, bcells, kernels, st, k_sd, label, max_spread)
    _xattn_results(sec, xcells, sdpa_out, first, label, max_spread)
    sec["rounds"] = {"wall": sdpa.n(), "kernel": rounds, "seconds": time.perf_counter() - t0}
    sec["verdicts"] = _verdicts(sec)
    sec["verdict"] = "; ".join(v["text"] for v in sec["verdicts"]) or "no timing"
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


def _vs_sdpa(row, sd, label: str = "pytorch sdpa") -> dict:
    """An xattn cell against the model's PyTorch attention (SDPA, or the hand-written
    chain) on each clock, never across: wall (both whole Python calls) and kernel
    (xattn's device_ms against PyTorch's op time)."""
    name = f"xattn {row['backend']} {row['algo']}" + (" packed" if row.get("form") else "")
    return {"wall": verdict(row["wall_ms"], sd.get("wall_ms", {}), name, label, "wall clock"),
            "kernel": verdict(row["device_ms"], sd.get("kernel_ms", {}), name, label, "kernel clock")}


def _best(cells, clock):
    have = [c for c in cells if c[clock].get("median") is not None]
    return min(have, key=lambda c: c[clock]["median"]) if have else None


def _verdicts(sec) -> list:
    """The case's verdicts, one per clock, each by the one rule (intervals that
    separate, else "within noise"): the best xattn cell against SDPA on the wall
    clock (both whole Python calls), and on the kernel clock (xattn's device time
    against SDPA's op time in torch.profiler)."""
    out = []
    cells = sec["xattn"] + sec["packed"]
    sd = sec["pytorch"]
    for clock, mine, theirs, label in (("wall", "wall_ms", "wall_ms", "wall clock"),
                                       ("kernel", "device_ms", "kernel_ms", "kernel clock")):
        best = _best(cells, mine)
        if best is None or not sd.get(theirs, {}).get("n"):
            continue
        name = f"{best['backend']} {best['algo']}" + (" packed" if best.get("form") else "")
        v = verdict(best[mine], sd[theirs], f"xattn {name}", "pytorch " + sd.get("impl", "sdpa"), label)
        v["on"] = clock
        v["xattn_cell"] = name
        out.append(v)
    return out


def _verdict(sec) -> str:  # the verdicts in one line (kept for callers of the old name)
    return "; ".join(v["text"] for v in _verdicts(sec)) or "no timing"


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


def _memory_section(report, tprof=(), calls=()) -> dict:
    """Memory as PyTorch sees it (torch.profiler's memory events, the last
    profiled forward; on CUDA also the caching allocator's peak) beside xattn's
    own exact figures (each algorithm's workspace, the context's peak)."""
    tm = next((t["memory"] for t in reversed(list(tprof)) if t.get("memory") and "calls" in t["memory"]), None)
    rows = []
    for c in report.get("cases", []):
        by_algo = {}
        for cell in c["xattn"] + c["packed"]:
            by_algo.setdefault(cell["algo"] + (" packed" if cell.get("form") else ""), []).append(
                {"backend": cell["backend"], "workspace_bytes": cell["workspace_bytes"],
                 "context_peak_bytes": cell["context_peak_bytes"]})
        row = {"case": c["key"], "naive_scores_bytes": c["naive_scores_bytes"], "xattn": by_algo}
        if tm is not None and len(tm["calls"]) == len(calls):
            mine = [tm["calls"][i] for i in c["calls"] if i < len(tm["calls"])]
            if mine:
                row["pytorch"] = {
                    "sdpa_peak_bytes": max(m["peak_bytes"] for m in mine),
                    "sdpa_workspace_bytes": max(m["workspace_bytes"] for m in mine),
                    "sdpa_kept_bytes": max(m["kept_bytes"] for m in mine),
                    "repeat_kv_bytes_per_call": max((m.get("repeat_kv_bytes", 0) for m in mine), default=0),
                    "repeat_kv_copies_per_call": max((m.get("repeat_kv_copies", 0) for m in mine), default=0),
                }
        rows.append(row)
    out = {"rows": rows,
           "note": "pytorch: torch.profiler's memory events (profile_memory=True) of one forward; per SDPA call "
                   "peak = the most bytes it held above its entry, kept = its output, workspace = peak - kept; "
                   "repeat_kv = copies of a repeated K or V's exact size made before the call; xattn: the "
                   "library's exact workspace of each algorithm and the context's peak"}
    if tm is not None:
        out["torch"] = {k: tm[k] for k in ("kind", "forward_peak_bytes", "forward_allocated_bytes", "masks",
                                           "sdpa_calls_seen") if k in tm}
        out["torch"]["forward_peak_bytes_passes"] = [t["memory"].get("forward_peak_bytes") for t in tprof
                                                     if t.get("memory")]
        if any("cuda_peak_bytes" in t for t in tprof):
            out["torch"]["cuda_allocator_peak_bytes"] = max(t.get("cuda_peak_bytes", 0) for t in tprof)
        if len(tm["calls"]) != len(calls):
            out["torch"]["note"] = (f"torch.profiler saw {len(tm['calls'])} SDPA ops for {len(calls)} captured "
                                    "calls: the per-call figures are not matched")
    elif tprof:
        out["torch"] = {"error": next((t["memory"].get("error") for t in tprof if t.get("memory")), "no data")}
    else:
        out["torch"] = {"error": "not measured (torch_profiler=False)"}
    return out


__all__ = ["Profile", "profile", "capture", "_block_name"]
