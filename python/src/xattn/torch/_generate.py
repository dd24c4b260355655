"""Generation in the profile: a prefill and N decode steps of a decoder model,
timed per step, and reported by phase (docs/python.md, "Generation").

- GenerateRun: the run that profile(..., generate=N) times: greedy
  model.generate with a KV cache, N + 1 new tokens (the prefill's forward makes
  the first, each of the N decode steps one more), EOS suppressed so that every
  pass runs the same N steps; the same generation each pass (greedy, no
  sampling, the inputs fixed).
- StepClock: the wall time of each top-level forward of the model in a timing
  pass (forward hooks on the model itself).
- generation_section: prefill and decode apart (wall time, attention time and
  attention's share per phase, per pass, summarized with intervals), the decode
  steps in KV-length buckets (the capture's kv_buckets: the same groups as the
  cases), and the KV cache's memory (from the shapes, and from the cache's own
  tensors as torch holds them).
- render_generation: the text report's lines.
"""

from __future__ import annotations

import time
from typing import Optional

import torch

from .._stats import summarize

_ESIZE = {"f32": 4, "f16": 2, "bf16": 2}


def _cache_bytes(cache) -> Optional[dict]:
    """torch's view of a transformers cache: the bytes of its key and value tensors
    (numel x element size) and of their storages (what the allocator holds), or None."""
    if cache is None:
        return None
    tensors = []
    layers = getattr(cache, "layers", None)
    if layers is not None:
        for lay in layers:
            for name in ("keys", "values"):
                t = getattr(lay, name, None)
                if isinstance(t, torch.Tensor):
                    tensors.append(t)
    else:
        for name in ("key_cache", "value_cache"):
            for t in getattr(cache, name, None) or []:
                if isinstance(t, torch.Tensor):
                    tensors.append(t)
    if not tensors:
        return None
    storages = {}
    for t in tensors:
        st = t.untyped_storage()
        storages[st.data_ptr()] = st.nbytes()
    return {"tensor_bytes": sum(t.numel() * t.element_size() for t in tensors),
            "storage_bytes": sum(storages.values()), "tensors": len(tensors)}


class GenerateRun:
    """A greedy generation of steps decode steps after the prefill, as a run() for
    profile(). inputs / kwargs are those of model.generate (input_ids, attention_mask;
    left padding for a batch of prompts of different lengths)."""

    def __init__(self, model, inputs=(), kwargs=None, steps: int = 1):
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
            raise ValueError(f"profile: generate={steps!r}: expected a number of decode steps >= 1")
        if not callable(getattr(model, "generate", None)):
            raise ValueError("profile: generate= needs a model with a generate() method (a transformers "
                             f"decoder such as *ForCausalLM), not {type(model).__name__}")
        cfg = getattr(model, "config", None)
        if cfg is not None and getattr(cfg, "is_encoder_decoder", False):
            raise ValueError("profile: generate= profiles decoder-only models; "
                             f"{type(model).__name__} is an encoder-decoder")
        self.model, self.inputs, self.kwargs, self.steps = model, tuple(inputs), dict(kwargs or {}), steps
        self.last_cache = None  # torch's view of the cache after the last run
        self.cache_growth = []  # torch's view after each forward of the first run
        self.new_tokens = None
        self._runs = 0

    def run(self):
        opts = dict(self.kwargs)
        ids = opts.get("input_ids", self.inputs[0] if self.inputs else None)
        pad = getattr(getattr(self.model, "generation_config", None), "pad_token_id", None)
        if pad is None:
            pad = getattr(getattr(self.model, "config", None), "pad_token_id", None)
        opts.update(max_new_tokens=self.steps + 1, min_new_tokens=self.steps + 1, do_sample=False,
                    use_cache=True, return_dict_in_generate=True)
        if pad is not None:
            opts.setdefault("pad_token_id", pad)
        hook = None
        if self._runs == 0:  # torch's view of the cache after each forward (first run only)
            def post(_m, _i, out):
                pkv = getattr(out, "past_key_values", None)
                b = _cache_bytes(pkv)
                if b is not None:
                    self.cache_growth.append(b["tensor_bytes"])

            hook = self.model.register_forward_hook(post)
        try:
            out = self.model.generate(*self.inputs, **opts)
        finally:
            if hook is not None:
                hook.remove()
        self._runs += 1
        seqs = getattr(out, "sequences", out)
        if isinstance(seqs, torch.Tensor) and isinstance(ids, torch.Tensor):
            self.new_tokens = int(seqs.shape[-1] - ids.shape[-1])
        self.last_cache = _cache_bytes(getattr(out, "past_key_values", None))
        return out

    def clock(self) -> "StepClock":
        return StepClock(self.model)


class StepClock:
    """Wall time (ms, time.perf_counter; synchronized on CUDA) of each outermost forward
    of model while active: times[0] is the prefill, times[1:] the decode steps."""

    def __init__(self, model):
        self.model = model
        self.times = []
        self._depth = 0
        self._t0 = None
        self._hooks = []

    def _sync(self, args):
        for x in args:
            if isinstance(x, torch.Tensor) and x.is_cuda:
                torch.cuda.synchronize(x.device)
                return

    def __enter__(self):
        def pre(_m, args, kwargs):
            if self._depth == 0:
                self._sync(list(args) + list(kwargs.values()))
                self._t0 = time.perf_counter()
            self._depth += 1

        def post(_m, args, kwargs, out):
            self._depth -= 1
            if self._depth == 0 and self._t0 is not None:
                logits = getattr(out, "logits", None)
                if isinstance(logits, torch.Tensor) and logits.is_cuda:
                    torch.cuda.synchronize(logits.device)
                self.times.append((time.perf_counter() - self._t0) * 1e3)
                self._t0 = None

        self._hooks = [self.model.register_forward_pre_hook(pre, with_kwargs=True),
                       self.model.register_forward_hook(post, with_kwargs=True, always_call=True)]
        return self

    def __exit__(self, *exc):
        for h in self._hooks:
            h.remove()
        self._hooks = []


def generation_section(cap, passes: list, run: Optional[GenerateRun] = None) -> dict:
    """The "generation" member of the profile: see the module's docstring. passes: the
    timing passes, each with "forward_ms" (the whole generation), "call_ms" (every SDPA
    call, in capture order) and "step_ms" (StepClock.times)."""
    calls = cap.calls
    n_steps = cap.steps
    for i, p in enumerate(passes):
        if len(p.get("step_ms", [])) != n_steps:
            raise RuntimeError(f"profile: timing pass {i} ran {len(p.get('step_ms', []))} forwards, the capture "
                               f"{n_steps}: the generation is not repeatable")
    pre_idx = [c.index for c in calls if c.phase == "prefill"]
    dec_idx = [c.index for c in calls if c.phase == "decode"]
    pre_steps = sorted({c.step for c in calls if c.phase == "prefill"} | {0})
    dec_steps = sorted({c.step for c in calls if c.phase == "decode"})
    batch = calls[0].batch if calls else 0

    def phase(idx, steps):
        wall = [sum(p["step_ms"][s] for s in steps) for p in passes]
        att = [sum(p["call_ms"][i] for i in idx) for p in passes]
        out = {"forwards": len(steps), "calls": len(idx), "wall_ms": summarize((wall)),
               "attention_ms": summarize((att)),
               "attention_share": summarize(([a / w for a, w in zip(att, wall) if w > 0]))}
        if steps:
            out["per_step_ms"] = summarize(([w / len(steps) for w in wall]))
            out["attention_per_step_ms"] = summarize(([a / len(steps) for a in att]))
        return out

    sec = {"decode_steps": len(dec_steps), "forwards": n_steps, "batch": batch,
           "new_tokens_per_sequence": run.new_tokens if run is not None else None,
           "prefill": phase(pre_idx, pre_steps), "decode": phase(dec_idx, dec_steps)}
    if dec_steps:
        sec["decode"]["per_token_ms"] = summarize((
            [sum(p["step_ms"][s] for s in dec_steps) / (len(dec_steps) * max(batch, 1)) for p in passes]))
    total = [p["forward_ms"] for p in passes]
    outside = [p["forward_ms"] - sum(p["step_ms"]) for p in passes]
    sec["total_ms"] = summarize((total))
    sec["outside_forwards_ms"] = summarize((outside))

    # the decode buckets: the capture's own groups (the cases of the profile and of cases.json)
    buckets = []
    for ci, (rep, group) in enumerate(cap.cases()):
        if rep.phase != "decode":
            continue
        steps = sorted({c.step for c in group})
        idx = [c.index for c in group]
        sks = sorted({c.sk for c in group})
        att = [sum(p["call_ms"][i] for i in idx) / len(steps) for p in passes]
        wall = [sum(p["step_ms"][s] for s in steps) / len(steps) for p in passes]
        counts = {}
        for c in group:
            counts[c.sk] = counts.get(c.sk, 0) + 1
        lo_hi = cap.kv_bucket(rep.sk)
        buckets.append({"case": ci, "bucket": list(lo_hi) if lo_hi else [sks[0], sks[-1]],
                        "sk_min": sks[0], "sk_max": sks[-1], "representative_sk": rep.sk, "steps": len(steps),
                        "calls": len(group), "sk_counts": {str(k): counts[k] for k in sks},
                        "attention_per_step_ms": summarize((att)),
                        "step_ms": summarize((wall)),
                        "attention_share": summarize(([a / w for a, w in zip(att, wall) if w > 0]))})
    # several buckets may hold one step when calls of a step differ (e.g. layers of two shapes)
    sec["kv_buckets"] = {"rule": cap.kv_buckets, "rows": buckets,
                         "steps_in_buckets": sum(len({c.step for c in g}) for r, g in cap.cases()
                                                 if r.phase == "decode"),
                         "calls_in_buckets": sum(b["calls"] for b in buckets)}
    sec["kv_cache"] = _kv_cache(calls, dec_idx, pre_idx, run)
    sec["note"] = ("wall clock (time.perf_counter) of each forward of the model (hooks on the model), medians "
                   "over the timing passes with the order-statistic interval of the median; attention = the "
                   "SDPA calls' wall time inside the phase, share = attention / the phase's forwards per "
                   "pass; per token = decode time / (steps x batch); outside = generate()'s own work between "
                   "the forwards (logits processing, token selection)")
    return sec


def annotate_buckets(cases: list, groups: list, kv_bucket) -> None:
    """Adds "kv_bucket" to each profile case (cases[i]) whose calls (groups[i] =
    (representative, calls) of Capture.cases()) are decode steps of several Sk;
    kv_bucket: the capture's Capture.kv_bucket."""
    for sec, (rep, group) in zip(cases, groups):
        sks = sorted({c.sk for c in group})
        if len(sks) < 2:
            continue
        sec["kv_bucket"] = {"sk_min": sks[0], "sk_max": sks[-1], "representative_sk": rep.sk,
                            "bucket": list(kv_bucket(rep.sk) or (sks[0], sks[-1])),
                            "sk_counts": {str(k): sum(1 for c in group if c.sk == k) for k in sks}}


def _kv_cache(calls, dec_idx, pre_idx, run) -> dict:
    """The cache's bytes from the shapes the attention calls saw (K and V of each layer:
    KV heads x (D + Dv) x element size per token per sequence), and torch's view."""
    if not calls:
        return {}
    c0 = calls[0]
    per_token_layer = c0.kv_heads * (c0.head_dim + c0.head_dim_v) * _ESIZE.get(c0.kv_dtype, 4)
    pre_set = set(pre_idx)
    layers = len({c.layer for c in calls if c.index in pre_set}) or len({c.layer for c in calls})
    last = calls[dec_idx[-1]] if dec_idx else calls[pre_idx[-1]]
    first = calls[pre_idx[0]] if pre_idx else c0
    a = last.analysis
    real_last = sum(a.seqlens_k) if a.seqlens_k is not None else last.batch * last.sk
    growth = []
    seen = set()
    for c in calls:
        if c.step in seen:
            continue
        seen.add(c.step)
        growth.append({"step": c.step, "phase": c.phase, "sk": c.sk,
                       "bytes": layers * c.batch * c.sk * per_token_layer})
    out = {"bytes_per_token_per_layer": per_token_layer,
           "bytes_per_step": layers * last.batch * per_token_layer,
           "layers": layers, "kv_heads": c0.kv_heads, "head_dim": c0.head_dim, "head_dim_v": c0.head_dim_v,
           "kv_dtype": c0.kv_dtype, "after_prefill_bytes": layers * first.batch * first.sk * per_token_layer,
           "at_end_bytes": layers * last.batch * last.sk * per_token_layer,
           "at_end_real_tokens_bytes": layers * real_last * per_token_layer,
           "growth_from_shapes": growth,
           "note": "from the shapes: layers x batch x Sk (the padded length) x bytes per token per layer; "
                   "real tokens: the same over the sequences' own lengths (left padding excluded)"}
    if run is not None:
        out["torch_at_end"] = run.last_cache
        out["torch_growth_bytes"] = list(run.cache_growth)
    return out


# ---- text ----------------------------------------------------------------------


def _bytes(n) -> str:
    from .._report import _bytes as report_bytes

    return report_bytes(n, 2)


def _ci(s: Optional[dict], pct: bool = False) -> str:
    """"median [ci_low..ci_high]" (the 95% interval of the median), "~" when not converged."""
    if not s or s.get("median") is None:
        return "-"
    f = (lambda x: f"{100 * x:.1f}%") if pct else (lambda x: f"{x:.0f}" if abs(x) >= 1000 else f"{x:.4g}")
    txt = f(s["median"])
    if s.get("ci_low") is not None and s.get("ci_high") is not None:
        txt += f" [{f(s['ci_low'])}..{f(s['ci_high'])}]"
    return txt + ("" if s.get("converged", True) else "~")


def render_generation(g: Optional[dict]) -> list:
    """The text report's lines for a profile's "generation" member (none without it)."""
    if not g:
        return []
    out = []
    w = out.append
    w("")
    w(f"generation: a prefill and {g['decode_steps']} decode steps ({g['forwards']} forwards of the model), "
      f"batch {g['batch']}; wall clock, median [95% interval of the median] over the timing passes")
    w(f"  {'phase':<8}{'forwards':>9}{'calls':>7}  {'wall ms':<27} {'attention ms':<27} attention share")
    for name in ("prefill", "decode"):
        p = g[name]
        w(f"  {name:<8}{p['forwards']:>9}{p['calls']:>7}  {_ci(p['wall_ms']):<27} {_ci(p['attention_ms']):<27} "
          f"{_ci(p['attention_share'], pct=True)}")
    d = g["decode"]
    if d.get("per_step_ms"):
        w(f"  decode: {_ci(d['per_step_ms'])} ms a step ({g['batch']} tokens), {_ci(d.get('per_token_ms'))} "
          f"ms a token; attention {_ci(d['attention_per_step_ms'])} ms a step")
    w(f"  whole generation {_ci(g['total_ms'])} ms, of which {_ci(g['outside_forwards_ms'])} ms outside the "
      "forwards (generate()'s own work)")
    kb = g["kv_buckets"]
    if kb["rows"]:
        rule = kb["rule"] if kb["rule"] == "pow2" or kb["rule"] is None else f"width {kb['rule']}"
        w(f"  decode steps by KV length (buckets: {rule}; {kb['steps_in_buckets']} steps, "
          f"{kb['calls_in_buckets']} calls):")
        w(f"    {'bucket Sk':<12}{'steps':>6}{'calls':>7}{'case':>6}{'rep Sk':>8}  {'attn ms a step':<27} "
          f"{'step ms':<27} share")
        for b in kb["rows"]:
            rng = f"{b['bucket'][0]}..{b['bucket'][1]}"
            w(f"    {rng:<12}{b['steps']:>6}{b['calls']:>7}{b['case']:>6}{b['representative_sk']:>8}  "
              f"{_ci(b['attention_per_step_ms']):<27} {_ci(b['step_ms']):<27} "
              f"{_ci(b['attention_share'], pct=True)}")
    kv = g.get("kv_cache") or {}
    if kv:
        line = (f"  KV cache: {_bytes(kv['bytes_per_token_per_layer'])} per token per layer ({kv['kv_heads']} KV "
                f"heads x (D {kv['head_dim']} + Dv {kv['head_dim_v']}) x {kv['kv_dtype']}), "
                f"+{_bytes(kv['bytes_per_step'])} a decode step ({kv['layers']} layers x batch); "
                f"{_bytes(kv['after_prefill_bytes'])} after the prefill, {_bytes(kv['at_end_bytes'])} at the end "
                f"({_bytes(kv['at_end_real_tokens_bytes'])} of real tokens)")
        w(line)
        te = kv.get("torch_at_end")
        if te:
            w(f"  KV cache as torch holds it at the end: {_bytes(te['tensor_bytes'])} in {te['tensors']} tensors "
              f"({_bytes(te['storage_bytes'])} of storage)")
    return out


__all__ = ["GenerateRun", "StepClock", "generation_section", "render_generation"]
