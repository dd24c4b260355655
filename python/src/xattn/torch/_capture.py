"""Capturing the attention calls of a PyTorch forward pass.

While a capture is active, torch.nn.functional.scaled_dot_product_attention is
replaced by a wrapper that records each call (shapes, strides, dtypes, scale,
is_causal, GQA, the mask and what it means), times it, and reads the process's
memory peak around it, then runs the real function and returns its result
unchanged. Code that calls SDPA through the attribute (transformers, torch.nn,
most models) is seen; code that bound the function to another name before the
capture started, or calls torch._C directly, is not (its calls are missing from
the capture, and its time counts as the rest of the forward).

Generation: each call also records which top-level forward of the model it ran
in (step 0 is the prefill, later single-token forwards are decode steps), and
the distinct calls are grouped with decode steps merged into KV-length buckets
(kv_buckets), so that a generation of N tokens gives a few cases, not N.

Attention written by hand (transformers' "eager", or softmax(q @ k^T * s + m) @ v in
a model's own code) is found by a TorchFunctionMode that follows the matmul ->
softmax -> matmul chain (_eager.py), and recorded as the same AttentionCall records
(kind "eager"); chains it cannot map are listed in Capture.unmapped.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F

from .._masks import MaskAnalysis, analyze

_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def dtype_name(dt) -> str:
    return _DTYPES.get(dt, str(dt).replace("torch.", ""))


@dataclass
class TensorInfo:
    shape: tuple
    stride: tuple
    dtype: str
    device: str

    @staticmethod
    def of(t: torch.Tensor) -> "TensorInfo":
        return TensorInfo(tuple(t.shape), tuple(t.stride()), dtype_name(t.dtype), str(t.device))

    def layout(self) -> str:
        """The memory order of a [B, H, S, D] tensor: "bhsd" (contiguous as SDPA
        takes it) or "bshd" (a transposed view of [B, S, H, D], as most models make)."""
        if len(self.shape) != 4:
            return "bhsd"
        (_, h, s, _), (_, sh, ss, _) = self.shape, self.stride
        if h > 1 and s > 1:
            return "bshd" if ss > sh else "bhsd"
        return "bhsd"


@dataclass
class AttentionCall:
    """One SDPA call of the forward, in xattn's terms: q [B, Hq, Sq, D], k/v
    [B, Hkv, Sk, D/Dv] as SDPA takes them (BHSD), and the options the mask means."""

    index: int
    module: str  # the innermost module running when SDPA was called
    layer: str  # the model block it belongs to ("encoder.layer.3"), else the module
    q: TensorInfo
    k: TensorInfo
    v: TensorInfo
    batch: int
    heads: int
    kv_heads: int  # as xattn would run it (K/V heads before any repeat by the caller)
    sq: int
    sk: int
    head_dim: int
    head_dim_v: int
    scale: Optional[float]  # as passed (None = 1/sqrt(D))
    is_causal: bool
    enable_gqa: bool
    dropout_p: float
    mask: Optional[dict]  # dtype, shape of attn_mask
    analysis: MaskAnalysis
    kv_repeated: int = 1  # K/V heads repeated this many times by the caller (repeat_kv)
    q_packed: int = 1  # query heads packed as rows by the caller (pack_gqa): SDPA saw Sq = this
    supported: bool = True
    reason: str = ""
    time_ms: float = float("nan")  # the capture pass's own time of the call in PyTorch
    step: int = -1  # the model's top-level forward it ran in (0 = the first), -1 = unknown
    kind: str = "sdpa"  # "sdpa" (a call of SDPA) or "eager" (attention written by hand)
    source: str = "scaled_dot_product_attention"  # or "hand-written (eager) attention in MODULE"
    span: Optional[tuple] = None  # eager: the ordinals of its two matmuls among the run's matmuls
    sdpa_kernel: str = ""  # the kernel PyTorch chose (profile(): torch.profiler's op under SDPA)
    mem: dict = field(default_factory=dict)
    tensors: Optional[dict] = field(default=None, repr=False)

    @property
    def dtype(self) -> str:
        return self.q.dtype

    @property
    def phase(self) -> str:
        """"prefill" (the first forward, or any forward of several query tokens),
        "decode" (a later forward of one query token per sequence), "" (no model
        hooks: unknown)."""
        if self.step < 0:
            return ""
        return "decode" if self.step > 0 and self.sq == 1 else "prefill"

    @property
    def kv_dtype(self) -> str:
        return self.k.dtype

    def xattn_options(self) -> dict:
        """Keyword arguments of xattn.attention for this call (layout "bhsd")."""
        a = self.analysis
        opts = {"layout": "bhsd", "scale": self.scale}
        if a.causal:
            opts["causal"] = a.causal
        if a.window:
            opts["window"] = a.window
        if a.seqlens_q is not None:
            opts["seqlens_q"] = np.asarray(a.seqlens_q, dtype=np.int32)
        if a.seqlens_k is not None:
            opts["seqlens_k"] = np.asarray(a.seqlens_k, dtype=np.int32)
        return opts

    def signature(self) -> tuple:
        """What makes two calls the same case of the cases file."""
        a = self.analysis
        return (self.dtype, self.kv_dtype, self.batch, self.heads, self.kv_heads, self.sq, self.sk,
                self.head_dim, self.head_dim_v, self.q.layout(), a.causal, a.window,
                _scale_or_default(self.scale, self.head_dim),
                tuple(a.seqlens_q) if a.seqlens_q is not None else None,
                tuple(a.seqlens_k) if a.seqlens_k is not None else None,
                a.bias_shape if a.kind == "bias" else None, self.supported)

    def token_pairs(self) -> tuple:
        """(pairs xattn computes as useful, pairs of the padded rectangle) for one head,
        summed over the batch: from the lengths and masks (no kernel involved)."""
        a = self.analysis
        lq = a.seqlens_q if a.seqlens_q is not None else [self.sq] * self.batch
        lk = a.seqlens_k if a.seqlens_k is not None else [self.sk] * self.batch
        return sum(int(x) * int(y) for x, y in zip(lq, lk)), self.batch * self.sq * self.sk


def _scale_or_default(scale, d) -> float:
    """0 when the scale is the default 1/sqrt(D) (as the cases file and the C tool write it)."""
    if scale is None:
        return 0.0
    if abs(scale * math.sqrt(d) - 1.0) < 1e-6:
        return 0.0
    return float(scale)


def _block_name(module: str) -> str:
    """The model block of a module: the longest prefix ending in a list index
    ("encoder.layer.3.attention.self" -> "encoder.layer.3")."""
    parts = module.split(".")
    for i in range(len(parts) - 1, -1, -1):
        if parts[i].isdigit():
            return ".".join(parts[: i + 1])
    return module


# ---- the process's memory around a call ----------------------------------------


class _HostMemory:
    """Linux: the resident set before a call and its peak during it. The peak
    (VmHWM) is reset before each call by writing 5 to /proc/self/clear_refs, so
    that it is the call's own; where that is not allowed, the lifetime peak is
    reported and marked so."""

    def __init__(self):
        self.ok = os.path.exists("/proc/self/status")
        self.resettable = False
        if self.ok:
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")
                self.resettable = True
            except OSError:
                self.resettable = False

    @staticmethod
    def _status() -> dict:
        out = {}
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    k, v = line.split(":", 1)
                    out[k] = int(v.split()[0]) * 1024
        return out

    def before(self) -> Optional[int]:
        if not self.ok:
            return None
        if self.resettable:
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                self.resettable = False
        return self._status().get("VmRSS")

    def after(self, rss_before) -> dict:
        if not self.ok:
            return {}
        s = self._status()
        peak = s.get("VmHWM", 0)
        return {"kind": "host-rss", "rss_before": rss_before, "rss_after": s.get("VmRSS"),
                "rss_peak": peak, "peak_delta": max(0, peak - (rss_before or 0)),
                "peak_is_call_only": self.resettable}


# ---- the capture ----------------------------------------------------------------


_active = []  # captures in force, innermost last (nesting is refused)


class Capture:
    """Records the SDPA calls of what runs while it is active.

    ``with Capture(model) as cap: model(x)`` or ``cap = capture(model, x)``.
    ``cap.calls`` are AttentionCall records in call order; ``cap.forward_ms`` the
    wall time of the last ``run``. keep_tensors=True keeps a copy of each call's
    q, k, v, mask and output (profile() uses them to compare xattn with SDPA on
    the real activations); for a left-padded call the copies have each sequence's
    pads moved to its end, the frame of the recorded lengths (analysis.pad_q/pad_k
    say by how much). kv_buckets: how cases() groups decode steps by KV length:
    "pow2" (Sk in (2^(k-1), 2^k]), an integer width W (Sk in (nW, (n+1)W]), or None
    (each Sk its own case).
    """

    def __init__(self, model=None, *, keep_tensors: bool = False, memory: bool = True, kv_buckets="pow2",
                 eager: bool = True):
        if kv_buckets is not None and kv_buckets != "pow2" and not (
                isinstance(kv_buckets, int) and not isinstance(kv_buckets, bool) and kv_buckets >= 1):
            raise ValueError(f"capture: kv_buckets {kv_buckets!r}: expected \"pow2\", a width >= 1 or None")
        self.model = model
        self.keep_tensors = keep_tensors
        self.memory = memory
        self.kv_buckets = kv_buckets
        self.steps = 0  # top-level forwards of the model seen under the capture
        self.calls: list = []
        self.eager = eager  # also find attention written by hand (matmul -> softmax -> matmul)
        self.unmapped: list = []  # hand-written chains not mapped: {"module", "reason"}
        self.matmuls = 0  # matmuls seen by the last capture (the eager spans' ordinals count them)
        self._mode = None
        self._stance = None
        self.forward_ms = float("nan")
        self._orig = None
        self._hooks = []
        self._stack = []
        self._mem = None
        # modules that repeat K/V to the query heads (transformers' num_key_value_groups)
        self._groups = {}
        if isinstance(model, torch.nn.Module):
            for name, mod in model.named_modules():
                g = getattr(mod, "num_key_value_groups", None)
                if isinstance(g, int) and g > 1:
                    self._groups[name or type(mod).__name__] = g

    # module names: a stack maintained by forward hooks on every submodule
    def _install_hooks(self):
        if self.model is None or not isinstance(self.model, torch.nn.Module):
            return

        def root_pre(_m, _inp):
            if not self._stack:  # an outermost call of the model: a new step
                self.steps += 1

        self._hooks.append(self.model.register_forward_pre_hook(root_pre))
        for name, mod in self.model.named_modules():
            label = name or type(mod).__name__

            def pre(_m, _inp, label=label):
                self._stack.append(label)

            def post(_m, _inp, _out, label=label):
                if self._stack and self._stack[-1] == label:
                    self._stack.pop()

            self._hooks.append(mod.register_forward_pre_hook(pre))
            self._hooks.append(mod.register_forward_hook(post, always_call=True))

    def __enter__(self):
        if _active:
            raise RuntimeError("xattn.torch: a capture is already active (captures do not nest)")
        self._orig = F.scaled_dot_product_attention
        self._mem = _HostMemory() if self.memory else None
        self._install_hooks()
        cap = self

        def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                 enable_gqa=False, **kw):
            return cap._call(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, kw)

        sdpa.__wrapped__ = self._orig
        F.scaled_dot_product_attention = sdpa
        _active.append(self)
        if self.eager:
            from ._eager import EagerMode

            self._mode = EagerMode(self)
            # compiled code runs as written while the mode watches (dynamo cannot trace the
            # mode's bookkeeping, and a compiled graph would hide the chain's ops anyway)
            self._stance = _force_eager()
            if self._stance is not None:
                self._stance.__enter__()
            self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        if self._mode is not None:
            self._mode.__exit__(*exc)
            self.matmuls = self._mode.matmuls
            self.unmapped.extend(self._mode.unmapped)
            self._mode = None
            if self._stance is not None:
                self._stance.__exit__(*exc)
                self._stance = None
        F.scaled_dot_product_attention = self._orig
        for h in self._hooks:
            h.remove()
        self._hooks = []
        self._stack = []
        if _active and _active[-1] is self:
            _active.pop()

    def run(self, *inputs, **kwargs):
        """Runs the model once on inputs under the capture (no gradients); returns its
        output. forward_ms is the wall time of that forward."""
        if self.model is None:
            raise ValueError("capture: no model to run (Capture(model) or capture(model, *inputs))")
        with self, torch.no_grad():
            _sync_all(inputs)
            t0 = time.perf_counter()
            out = self.model(*inputs, **kwargs)
            _sync_all(inputs)
            self.forward_ms = (time.perf_counter() - t0) * 1e3
        return out

    def _call(self, q, k, v, mask, dropout_p, is_causal, scale, enable_gqa, kw):
        real = self._orig
        mem_before = self._mem.before() if self._mem else None
        cuda = q.is_cuda
        if cuda:
            torch.cuda.synchronize(q.device)
            torch.cuda.reset_peak_memory_stats(q.device)
            cuda_before = torch.cuda.memory_allocated(q.device)
        t0 = time.perf_counter()
        out = real(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                   enable_gqa=enable_gqa, **kw)
        if cuda:
            torch.cuda.synchronize(q.device)
        ms = (time.perf_counter() - t0) * 1e3
        if cuda:
            mem = {"kind": "cuda-allocator", "allocated_before": cuda_before,
                   "peak": torch.cuda.max_memory_allocated(q.device),
                   "peak_delta": torch.cuda.max_memory_allocated(q.device) - cuda_before,
                   "peak_is_call_only": True}
        else:
            mem = self._mem.after(mem_before) if self._mem else {}
        module = self._stack[-1] if self._stack else ""
        call = _describe(len(self.calls), module, q, k, v, mask, dropout_p, is_causal, scale,
                         enable_gqa, self._stack, self._groups)
        call.time_ms = ms
        call.mem = mem
        if self.model is not None and self.steps > 0:
            call.step = self.steps - 1
        if self.keep_tensors:
            call.tensors = _kept(call, q, k, v, mask, out)
        self.calls.append(call)
        return out

    def _module(self) -> str:
        return self._stack[-1] if self._stack else ""

    def _eager_call(self, q, k, v, mask, scale, dropout_p, out, module, stack, first, last, ms):
        """A hand-written attention found by the EagerMode: recorded like an SDPA call."""
        call = _describe(len(self.calls), module, q, k, v, mask, dropout_p, False, scale, False, stack,
                         self._groups)
        call.kind, call.span, call.time_ms = "eager", (first, last), ms
        call.source = f"hand-written (eager) attention in {module or 'the model'}"
        call.sdpa_kernel = "eager (aten::matmul, aten::softmax, aten::matmul)"
        if self.model is not None and self.steps > 0:
            call.step = self.steps - 1
        if self.keep_tensors:
            call.tensors = _kept(call, q, k, v, mask, out)
        self.calls.append(call)

    # results
    def cases(self) -> list:
        """The distinct calls, merged: [(representative call, [calls])] in order of first
        appearance. Decode steps (phase "decode") whose signatures differ only in their KV
        length fall into one bucket of kv_buckets; its representative is the call whose Sk
        is nearest the bucket's mean Sk (so that its cost times the count stands for the
        bucket's, attention being linear in Sk at one query row)."""
        groups = {}
        for c in self.calls:
            groups.setdefault(self._case_key(c), []).append(c)
        out = []
        for key, g in groups.items():
            if key[0] == "bucket":
                mean = sum(c.sk for c in g) / len(g)
                rep = min(g, key=lambda c: (abs(c.sk - mean), c.sk, c.index))
                out.append((rep, g))
            else:
                out.append((g[0], g))
        return out

    def kv_bucket(self, sk: int) -> Optional[tuple]:
        """The (lowest, highest) Sk of the bucket of sk under kv_buckets, or None."""
        if self.kv_buckets is None:
            return None
        if self.kv_buckets == "pow2":
            hi = 1
            while hi < sk:
                hi *= 2
            return (hi // 2 + 1 if hi > 1 else 0, hi)
        w = int(self.kv_buckets)
        lo = ((sk - 1) // w) * w + 1 if sk > 0 else 0
        return (lo, lo + w - 1 if sk > 0 else 0)

    def _case_key(self, c) -> tuple:
        sig = c.signature()
        if c.phase != "decode" or self.kv_buckets is None:
            return ("exact", c.kind) + sig
        # the signature without Sk and the key lengths (which grow by one a step)
        a = c.analysis
        bias = tuple(sig[15][:-1]) if sig[15] is not None else None  # [.., Sk] grows too
        rest = sig[:6] + sig[7:14] + (tuple(a.pad_k) if a.pad_k is not None else None, bias) + sig[16:]
        return ("bucket", c.kind, self.kv_bucket(c.sk), c.q_packed, c.kv_repeated) + rest

    def write_cases(self, path, model: str = "", info: Optional[dict] = None, tensors: bool = False) -> dict:
        """Writes the cases file (schema xattn.cases/1) of the captured calls; returns it.
        tensors=True (with keep_tensors) also writes the activations of each case's first
        call to an .npz beside it (named in the file's "tensors" member; the C replay does
        not read it)."""
        from .._cases import cases_document, write_document, write_tensors

        doc = cases_document(self, model=model, info=info)
        if tensors:
            doc["tensors"] = write_tensors(self, path)
        write_document(doc, path)
        return doc


def _force_eager():
    """torch.compile'd code run as plain Python (torch._dynamo.set_stance), or None."""
    try:
        import torch._dynamo

        return torch._dynamo.set_stance("force_eager")
    except Exception:  # a torch without set_stance
        return None


def _kept(call, q, k, v, mask, out) -> dict:
    """Copies of a call's tensors; left padding moved to the end of each sequence (the
    frame of the recorded lengths), for the query rows and for the keys."""
    t = {"q": q.detach().clone(), "k": k.detach().clone(), "v": v.detach().clone(),
         "mask": mask.detach().clone() if isinstance(mask, torch.Tensor) else None, "out": out.detach().clone()}
    a = call.analysis
    if a.pad_k is None or q.dim() != 4:
        return t
    pq, pk = a.pad_q, a.pad_k
    if call.q_packed > 1:  # [B, Hkv, g, D]: the rows are heads of the one query token
        pq = [0] * len(pq)

    def roll(x, pads, dim):
        if x is None or not any(pads):
            return x
        if x.shape[0] == 1 and len(pads) > 1:
            if len(set(pads)) > 1:
                raise ValueError("left padding that differs between sequences on a broadcast batch")
            pads = pads[:1]
        return torch.stack([torch.roll(x[b], -int(pads[b]), dims=dim - 1) for b in range(x.shape[0])])

    t["q"], t["out"] = roll(t["q"], pq, 2), roll(t["out"], pq, 2)
    t["k"], t["v"] = roll(t["k"], pk, 2), roll(t["v"], pk, 2)
    m = t["mask"]
    if m is not None:
        while m.dim() < 4:
            m = m[None]
        if m.shape[2] == call.sq and call.q_packed == 1:
            m = roll(m, pq, 2)
        m = roll(m, pk, 3) if m.shape[3] == call.sk else m
        t["mask"] = m
    return t


def _sync_all(inputs):
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_cuda:
            torch.cuda.synchronize(x.device)
            return


def _mask_numpy(mask: torch.Tensor) -> np.ndarray:
    m = mask.detach()
    if m.dtype == torch.bool:
        return m.cpu().numpy()
    return m.float().cpu().numpy()


def _describe(index, module, q, k, v, mask, dropout_p, is_causal, scale, enable_gqa, stack, groups):
    qi, ki, vi = TensorInfo.of(q), TensorInfo.of(k), TensorInfo.of(v)
    supported, reason = True, ""
    if q.dim() == 3:  # [H, S, D]: a batch of one
        shape_q, shape_k, shape_v = (1,) + tuple(q.shape), (1,) + tuple(k.shape), (1,) + tuple(v.shape)
    else:
        shape_q, shape_k, shape_v = tuple(q.shape), tuple(k.shape), tuple(v.shape)
    if len(shape_q) != 4 or len(shape_k) != 4 or len(shape_v) != 4:
        supported, reason = False, f"{q.dim()}-D inputs (xattn takes [B, H, S, D])"
        shape_q = shape_k = shape_v = (1, 1, 1, 1)
    b, hq, sq, d = shape_q
    _, hkv, sk, _ = shape_k
    dv = shape_v[3]
    if shape_k[0] != b or shape_v[0] != b:
        supported, reason = False, "the batch of q and k/v differ (broadcast batch)"
    if supported and (q.dtype not in _DTYPES or k.dtype not in _DTYPES or v.dtype != k.dtype):
        supported, reason = False, f"dtypes {qi.dtype}/{ki.dtype}/{vi.dtype} (xattn: f32, f16, bf16)"
    if supported and (d > 256 or dv > 256):
        supported, reason = False, f"head dim {d}/{dv} above 256"
    if supported and hq % hkv:
        supported, reason = False, f"{hq} query heads are not a multiple of {hkv} KV heads"
    if supported and dropout_p > 0:
        reason = f"dropout_p {dropout_p} (xattn has no dropout: replays run without it)"
    # K/V repeated to the query heads by the caller (transformers' repeat_kv): xattn
    # reads the original heads (GQA), so the case keeps those.
    repeated = 1
    mod_groups = _groups_of_stack(stack, groups)
    if supported and hq == hkv and mod_groups > 1 and hkv % mod_groups == 0:
        g = mod_groups
        kk = k.detach().reshape(b, hkv // g, g, sk, d)
        vv = v.detach().reshape(b, hkv // g, g, sk, dv)
        if all(torch.equal(kk[:, :, 0], kk[:, :, i]) and torch.equal(vv[:, :, 0], vv[:, :, i])
               for i in range(1, g)):
            repeated = g
            hkv //= g
    # One decode token whose GQA query heads the caller folded into rows (transformers'
    # pack_gqa, used when there is a mask): q [B, Hkv, g, D] is the model's [B, Hq, 1, D].
    packed = 1
    if (supported and repeated == 1 and mod_groups > 1 and hq == hkv and sq == mod_groups
            and isinstance(mask, torch.Tensor) and mask.dim() >= 2 and mask.shape[-2] == 1):
        packed = mod_groups
        hq, sq = hq * packed, 1
    m_info, an = None, analyze(None, bool(is_causal), b, hq, sq, sk)
    if isinstance(mask, torch.Tensor):
        m_info = {"dtype": dtype_name(mask.dtype), "shape": list(mask.shape)}
        an = analyze(_mask_numpy(mask), False, b, hq, sq, sk)
        if an.kind == "bias" and an.bias is not None and (an.bias.shape[0] not in (1, b) or
                                                          an.bias.shape[1] not in (1, hq)):
            supported, reason = False, f"mask shape {list(mask.shape)}"
    return AttentionCall(
        index=index, module=module, layer=_block_name(module) if module else "", q=qi, k=ki, v=vi,
        batch=b, heads=hq, kv_heads=hkv, sq=sq, sk=sk, head_dim=d, head_dim_v=dv,
        scale=None if scale is None else float(scale), is_causal=bool(is_causal),
        enable_gqa=bool(enable_gqa), dropout_p=float(dropout_p), mask=m_info, analysis=an,
        kv_repeated=repeated, q_packed=packed, supported=supported, reason=reason)


def _groups_of_stack(stack, groups: dict) -> int:
    """num_key_value_groups of the innermost running module that has one (HF models)."""
    for name in reversed(stack):
        g = groups.get(name)
        if g:
            return g
    return 1


def capture(model=None, *inputs, keep_tensors: bool = False, memory: bool = True, kv_buckets="pow2",
            eager: bool = True, **kwargs) -> Capture:
    """Captures the SDPA calls of model(*inputs, **kwargs) (run once, without
    gradients) and returns the Capture. Without inputs, returns a Capture to use
    as a context manager around code of your own:

        with xattn.torch.capture(model) as cap:
            model.generate(...)
    """
    cap = Capture(model, keep_tensors=keep_tensors, memory=memory, kv_buckets=kv_buckets, eager=eager)
    if inputs or kwargs:
        cap.run(*inputs, **kwargs)
    return cap


__all__ = ["AttentionCall", "Capture", "TensorInfo", "capture", "dtype_name"]
