"""Attention written by hand: the matmul -> (scale, mask) -> softmax -> matmul chain.

Models that do not call SDPA (transformers' "eager" attention, or a module that does
``softmax(q @ k.transpose(-2, -1) * scale + mask) @ v`` itself) are found during a
capture by a torch.overrides.TorchFunctionMode, which sees every torch function and
Tensor method the forward calls (torch.matmul, ``@``, ``*``, ``+``, masked_fill,
softmax, dropout, ``.to``), whatever name the model imported them under. Each tensor
produced by the chain carries a small state (a weak dictionary keyed by the tensor):

  q @ k^T                 a "scores" state: q, k^T, scale 1, no mask
  * s, / s (a scalar)     scale *= s (or /= s); the masks added so far are scaled too
  + m (a tensor)          an additive mask (several add up); + a scalar is ignored
                          (softmax does not see it)
  masked_fill(m, v)       a boolean mask (m True = masked), v -inf or <= -1e4
  .to, .float, .contiguous, .type_as, dropout in eval (p = 0 or training=False)
                          the same state (dropout in training is recorded, as SDPA's
                          dropout_p is)
  softmax(dim=-1)         a "probs" state
  probs @ v               attention: q, k, v, scale, mask, output -> one AttentionCall

Any other operation on a tensor of the chain (tanh, a non-scalar product, softmax on
another dim) marks its result with the reason, so that a chain that still ends in
softmax -> matmul is listed as unmapped attention with that reason and the module.
The q, k, v recovered are the tensors the model multiplied (K/V after repeat_kv: the
capture recognizes the repetition as it does for SDPA calls).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakTensorKeyDictionary

T = torch.Tensor
MATMULS = {torch.matmul, T.matmul, T.__matmul__, T.__rmatmul__, torch.bmm, T.bmm}
_MULS = {torch.mul, T.mul, T.__mul__, T.__rmul__, T.mul_, T.__imul__}
_DIVS = {torch.div, T.div, T.__truediv__, T.div_, T.__itruediv__, torch.true_divide}
_ADDS = {torch.add, T.add, T.__add__, T.__radd__, T.add_, T.__iadd__}
_FILLS = {T.masked_fill, T.masked_fill_, torch.masked_fill}
_SOFTMAX = {torch.softmax, F.softmax, T.softmax, torch.nn.functional.softmax}
_SAME = {T.to, T.float, T.half, T.bfloat16, T.contiguous, T.type_as, T.type, T.clone, T.detach}


@dataclass
class _State:
    kind: str  # "scores", "probs", "bad"
    q: Optional[torch.Tensor] = None
    kt: Optional[torch.Tensor] = None
    scale: float = 1.0
    add: list = field(default_factory=list)  # additive masks (already scaled)
    masked: list = field(default_factory=list)  # boolean masks, True = masked out
    dropout_p: float = 0.0
    module: str = ""
    stack: tuple = ()
    ordinal: int = -1  # the matmul that opened the chain (its rank among the forward's matmuls)
    t0: float = 0.0
    reason: str = ""


def _scalar(x) -> Optional[float]:
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, torch.Tensor) and x.numel() == 1 and x.dim() == 0:
        return float(x.detach().float().cpu())
    return None


def _name(func) -> str:
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or str(func)


class EagerMode(TorchFunctionMode):
    """The capture's observer of hand-written attention (see the module's docstring).

    cap: the Capture (its module stack, its record of calls); matmul_count: the
    forward's matmuls seen so far (the timing passes count the same entry points)."""

    def __init__(self, cap):
        super().__init__()
        self.cap = cap
        self.state = WeakTensorKeyDictionary()
        self.matmuls = 0
        self.unmapped = []  # {"module", "reason"}

    def _of(self, x) -> Optional[_State]:
        return self.state.get(x) if isinstance(x, torch.Tensor) else None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        is_mm = func in MATMULS
        if is_mm:
            ordinal = self.matmuls
            self.matmuls += 1
            t0 = time.perf_counter()
        out = func(*args, **kwargs)
        try:
            if is_mm:
                self._matmul(func, args, out, ordinal, t0)
            else:
                self._step(func, args, kwargs, out)
        except Exception as e:  # the observer never breaks the model
            self.unmapped.append({"module": self.cap._module(), "reason": f"capture error: {e!r}"})
        return out

    # the chain's steps
    def _matmul(self, func, args, out, ordinal, t0):
        if len(args) < 2 or not isinstance(out, torch.Tensor):
            return
        a, b = (args[1], args[0]) if func is T.__rmatmul__ else (args[0], args[1])
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return
        sa = self._of(a)
        if sa is not None and sa.kind in ("probs", "bad-probs"):
            self._finish(sa, b, out)
            return
        if sa is not None or self._of(b) is not None:
            return
        if a.dim() >= 3 and a.dim() == b.dim() and a.is_floating_point() and out.dim() == a.dim():
            self.state[out] = _State("scores", q=a, kt=b, module=self.cap._module(), stack=tuple(self.cap._stack),
                                     ordinal=ordinal, t0=t0)

    def _step(self, func, args, kwargs, out):
        srcs = [(i, self._of(x)) for i, x in enumerate(args) if self._of(x) is not None]
        srcs += [(k, self._of(v)) for k, v in kwargs.items() if self._of(v) is not None]
        if not srcs:
            return
        (pos, s) = srcs[0]
        outs = out if isinstance(out, (tuple, list)) else (out,)
        outs = [o for o in outs if isinstance(o, torch.Tensor)]
        if not outs:
            return
        new = self._next(func, args, kwargs, pos, s, len(srcs))
        for o in outs:
            self.state[o] = new

    def _bad(self, s: _State, why: str) -> _State:
        if s.kind in ("bad", "bad-probs"):
            return s
        return _State("bad-probs" if s.kind == "probs" else "bad", q=s.q, kt=s.kt, module=s.module, stack=s.stack,
                      ordinal=s.ordinal, t0=s.t0, reason=why)

    def _next(self, func, args, kwargs, pos, s: _State, nsrc) -> _State:
        other = [x for i, x in enumerate(args) if i != pos]
        if s.kind in ("bad", "bad-probs"):
            if func in _SOFTMAX and s.kind == "bad":
                return _State("bad-probs", q=s.q, kt=s.kt, module=s.module, stack=s.stack, ordinal=s.ordinal,
                              t0=s.t0, reason=s.reason)
            return s
        if func in _SAME:
            return s
        if func in (F.dropout, torch.dropout):
            p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
            training = kwargs.get("training", kwargs.get("train", args[2] if len(args) > 2 else True))
            if p and training:
                return _State(**{**s.__dict__, "dropout_p": float(p)})
            return s
        if nsrc > 1:
            return self._bad(s, f"{_name(func)} of two tensors of the chain")
        if s.kind == "scores":
            if func in _MULS or func in _DIVS:
                k = _scalar(other[0]) if other else None
                if k is None or k == 0:
                    return self._bad(s, f"{_name(func)} by a tensor (not a scalar) between q.k^T and softmax")
                f = k if func in _MULS else 1.0 / k
                return _State(**{**s.__dict__, "scale": s.scale * f, "add": [m * f for m in s.add]})
            if func in _ADDS:
                m = other[0] if other else kwargs.get("other")
                alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
                if _scalar(m) is not None:
                    return s  # a constant shift: softmax does not see it
                if isinstance(m, torch.Tensor) and m.is_floating_point():
                    return _State(**{**s.__dict__, "add": s.add + [m if alpha == 1 else m * alpha]})
                return self._bad(s, f"{_name(func)} of a {getattr(m, 'dtype', type(m))} between q.k^T and softmax")
            if func in _FILLS:
                m = args[1] if len(args) > 1 else kwargs.get("mask")
                v = args[2] if len(args) > 2 else kwargs.get("value")
                v = _scalar(v)
                if isinstance(m, torch.Tensor) and m.dtype == torch.bool and v is not None and (v <= -1e4):
                    return _State(**{**s.__dict__, "masked": s.masked + [m]})
                return self._bad(s, f"masked_fill with value {v} (not -inf or <= -1e4)")
            if func in _SOFTMAX:
                dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
                nd = args[0].dim()
                if dim is None or dim not in (-1, nd - 1):
                    return self._bad(s, f"softmax over dim {dim} (attention takes it over the keys, the last)")
                return _State(**{**s.__dict__, "kind": "probs"})
            return self._bad(s, f"{_name(func)} between q.k^T and softmax")
        return self._bad(s, f"{_name(func)} between softmax and the product with v")

    def _finish(self, s: _State, v, out):
        cap = self.cap
        if s.kind == "bad-probs":
            self.unmapped.append({"module": s.module, "reason": s.reason})
            return
        q, k = s.q, s.kt.transpose(-2, -1)
        if not (q.dim() == k.dim() == v.dim() and q.shape[-1] == k.shape[-1] and k.shape[-2] == v.shape[-2]):
            self.unmapped.append({"module": s.module, "reason": f"shapes q {list(q.shape)} k {list(k.shape)} "
                                                                f"v {list(v.shape)}"})
            return
        keep = None  # boolean masks: True = takes part (SDPA's convention)
        for m in s.masked:
            keep = ~m if keep is None else keep & ~m
        mask = keep
        if s.add:
            mask = s.add[0]
            for m in s.add[1:]:
                mask = mask + m
            mask = mask.to(q.dtype)
            if keep is not None:
                mask = mask.masked_fill(~keep, -math.inf)
        if isinstance(mask, torch.Tensor) and mask.dim() > q.dim():
            self.unmapped.append({"module": s.module, "reason": f"mask of {mask.dim()} dims"})
            return
        if q.is_cuda:
            torch.cuda.synchronize(q.device)
        ms = (time.perf_counter() - s.t0) * 1e3
        cap._eager_call(q, k, v, mask, s.scale, s.dropout_p, out, s.module, list(s.stack), s.ordinal,
                        self.matmuls - 1, ms)


class MatmulClock:
    """The timing passes' light wrapper for hand-written attention: torch.matmul,
    torch.bmm and the Tensor methods (``@``) counted in call order (the capture's
    ordinals), and the clock read before the matmul that opens each recorded span
    and after the one that closes it. No state is kept on tensors. With
    ranges=True (a pass under torch.profiler) each span is also a record_function
    range named "xattn eager attention <module>"."""

    _ENTRIES = ((torch, "matmul"), (torch, "bmm"), (T, "matmul"), (T, "__matmul__"), (T, "__rmatmul__"),
                (T, "bmm"))

    def __init__(self, spans: dict, on_span, ranges: bool = False):
        self.spans = spans  # opening ordinal -> (closing ordinal, module)
        self.ends = {e: o for o, (e, _) in spans.items()}
        self.on_span = on_span  # called with (opening ordinal, ms)
        self.ranges = ranges
        self.count = 0
        self._depth = 0
        self._open = {}
        self._saved = []

    def __enter__(self):
        for owner, name in self._ENTRIES:
            orig = getattr(owner, name)
            self._saved.append((owner, name, orig))
            setattr(owner, name, self._wrap(orig))
        return self

    def __exit__(self, *exc):
        for owner, name, orig in reversed(self._saved):
            setattr(owner, name, orig)
        self._saved = []

    def _wrap(self, orig):
        clock = self

        def mm(*a, **kw):
            if clock._depth:  # one entry point calling another (Tensor.__rmatmul__ -> torch.matmul)
                return orig(*a, **kw)
            i = clock.count
            clock.count += 1
            if i in clock.spans:
                rf = None
                if clock.ranges:
                    rf = torch.autograd.profiler.record_function(f"xattn eager attention {clock.spans[i][1]}")
                    rf.__enter__()
                clock._open[clock.spans[i][0]] = (i, time.perf_counter(), rf)
            clock._depth += 1
            try:
                out = orig(*a, **kw)
            finally:
                clock._depth -= 1
            if i in clock.ends and i in clock._open:
                start, t0, rf = clock._open.pop(i)
                if isinstance(out, torch.Tensor) and out.is_cuda:
                    torch.cuda.synchronize(out.device)
                clock.on_span(start, (time.perf_counter() - t0) * 1e3)
                if rf is not None:
                    rf.__exit__(None, None, None)
            return out

        mm.__wrapped__ = orig
        return mm


__all__ = ["EagerMode", "MatmulClock", "MATMULS"]
