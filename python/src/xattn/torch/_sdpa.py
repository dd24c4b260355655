"""A drop-in torch.nn.functional.scaled_dot_product_attention on xattn.

    out = xattn.torch.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0,
                                                   is_causal=False, scale=None, enable_gqa=False)

has SDPA's semantics (docs/python.md, "Inside PyTorch"): boolean masks (True =
take part) and additive float masks broadcast to [..., Hq, L, S]; is_causal is
top-left (query i sees keys j <= i) and excludes attn_mask; GQA with
enable_gqa (and one K/V head broadcast, as SDPA broadcasts it); batch dims that
broadcast. The call runs through the custom op ``xattn::sdpa`` (torch.library,
with a fake-tensor implementation) so that it traces under
torch.compile(fullgraph=True).

A mask that is exactly key padding, causality and a sliding window is passed as
per-sequence key lengths, causal and window (the padded keys are skipped, not
computed and masked); any other mask is an additive bias. The one difference
from PyTorch: a query row that the mask leaves without any key gives 0 in xattn
(its documented semantics); PyTorch gives 0 (bool or -inf masks, this
version's CPU kernels), NaN (some kernels) or, for a mask of finite minima
(finfo.min), the mean of V.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from .. import _core
from .._errors import input_error
from .._masks import MASKED_BELOW, _expected, allowed_from_mask, analyze

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_ALGOS = ("auto", "naive", "flash", "splitkv")
_BACKENDS = ("auto", "cpu", "opencl", "cuda")


# ---- the checks (pure torch: they trace under torch.compile) -----------------------


def _check_args(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa):
    for t, nm in ((query, "query"), (key, "key"), (value, "value")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"scaled_dot_product_attention: {nm} is {type(t).__name__}, expected a torch.Tensor")
    if dropout_p != 0.0:
        raise input_error("INVALID_ARGUMENT", f"dropout_p: {dropout_p} (xattn has no dropout: pass 0.0, as "
                          "models do in eval mode)")
    if torch.is_grad_enabled():
        for t, nm in ((query, "query"), (key, "key"), (value, "value"), (attn_mask, "attn_mask")):
            if isinstance(t, torch.Tensor) and t.requires_grad:
                raise input_error("INVALID_ARGUMENT",
                                  f"{nm}: requires grad, but xattn has no backward pass (its output would "
                                  "carry no graph); run under torch.no_grad() or torch.inference_mode(), or "
                                  "pass .detach()'ed tensors")
    if query.dtype != key.dtype or query.dtype != value.dtype:
        raise input_error("INVALID_DTYPE", f"Expected query, key, and value to have the same dtype, but got "
                          f"query.dtype: {query.dtype} key.dtype: {key.dtype} and value.dtype: {value.dtype} "
                          "instead.")
    if query.dtype not in _FLOATS:
        raise input_error("INVALID_DTYPE", f"query: dtype {query.dtype} (xattn: float32, float16, bfloat16)")
    if query.device != key.device or query.device != value.device:
        raise input_error("INVALID_ARGUMENT", f"query, key, value: on {query.device}, {key.device}, "
                          f"{value.device} (one device)")
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise input_error("INVALID_SHAPE", f"query, key, value: {query.dim()}-D, {key.dim()}-D, {value.dim()}-D "
                          "(expected [..., L, E], [..., S, E], [..., S, Ev])")
    if query.shape[-1] != key.shape[-1]:
        raise input_error("INVALID_SHAPE", f"query's last dimension {query.shape[-1]} is not key's "
                          f"{key.shape[-1]} (E)")
    if key.shape[-2] != value.shape[-2]:
        raise input_error("INVALID_SHAPE", f"key has {key.shape[-2]} positions, value {value.shape[-2]} (S)")
    if attn_mask is not None:
        if is_causal:
            raise input_error("INVALID_ARGUMENT", "_scaled_dot_product_attention: Explicit attn_mask should not "
                              "be set when is_causal=True")
        if not isinstance(attn_mask, torch.Tensor):
            raise TypeError(f"attn_mask: {type(attn_mask).__name__}, expected a torch.Tensor or None")
        if attn_mask.dtype != torch.bool and attn_mask.dtype != query.dtype:
            raise input_error("INVALID_DTYPE", "Expected attn_mask dtype to be bool or float or to match query "
                              f"dtype, but got attn_mask.dtype: {attn_mask.dtype} and query.dtype: "
                              f"{query.dtype} instead.")
        if attn_mask.device != query.device:
            raise input_error("INVALID_ARGUMENT", f"attn_mask: on {attn_mask.device}, query on {query.device}")


def _shapes(query, key, value, enable_gqa):
    """(batch shape, Hq, Hkv) after SDPA's broadcasting; raises SDPA's shape errors."""
    nd = max(query.dim(), key.dim(), value.dim())

    def lead(t):  # [..., H] of a tensor, left-padded with 1s
        s = tuple(t.shape[:-2])
        return (1,) * (nd - 2 - len(s)) + s

    lq, lk, lv = lead(query), lead(key), lead(value)
    if nd == 2:
        return (), 1, 1
    hq, hk, hv = lq[-1], lk[-1], lv[-1]
    if hk != hv:
        raise input_error("INVALID_SHAPE", f"key has {hk} heads, value {hv}")
    if hq != hk:
        if enable_gqa:
            if hq % hk:
                raise input_error("INVALID_SHAPE", "Number of heads in key and value must divide the number of "
                                  f"heads in query ({hq} query heads, {hk} key/value heads)")
        elif hk != 1:  # one K/V head broadcasts (as SDPA's matmul does); others need enable_gqa
            raise input_error("INVALID_SHAPE", f"The size of tensor a ({hq}) must match the size of tensor b "
                              f"({hk}) at non-singleton dimension {nd - 3}: query has {hq} heads, key/value {hk}; "
                              "pass enable_gqa=True for grouped-query attention")
    batch = []
    for dims in zip(lq[:-1], lk[:-1], lv[:-1]):
        big = max(dims)
        if any(x != 1 and x != big for x in dims):
            raise input_error("INVALID_SHAPE", f"the batch dimensions {list(lq[:-1])}, {list(lk[:-1])}, "
                              f"{list(lv[:-1])} of query, key, value do not broadcast")
        batch.append(big)
    return tuple(batch), hq, hk


# ---- the drop-in ------------------------------------------------------------------


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False, *, backend=None, device=None, algo=None, return_record=False):
    """torch.nn.functional.scaled_dot_product_attention's semantics, run by xattn.

    backend: None (CUDA for CUDA tensors, else the CPU), "cpu", "opencl", "cuda";
    device: the device index of that backend (None: the tensors' own, else 0);
    algo: None/"auto", "naive", "flash", "splitkv". return_record=True returns
    (out, record) with the call's record (a dict; not under torch.compile).
    """
    _check_args(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa)
    _shapes(query, key, value, enable_gqa)
    if attn_mask is not None:
        _check_mask_shape(attn_mask, query, key)
    be = backend or ("cuda" if query.is_cuda else "cpu")
    dev = device if device is not None else (query.device.index or 0) if query.is_cuda else 0
    al = algo or "auto"
    if be not in _BACKENDS:
        raise input_error("INVALID_ARGUMENT", f"backend: {be!r} is not None, 'cpu', 'opencl' or 'cuda'")
    if al not in _ALGOS:
        raise input_error("INVALID_ARGUMENT", f"algo: {al!r} is not None, 'auto', 'naive', 'flash' or 'splitkv'")
    if scale is not None:
        scale = float(scale)
    if return_record:
        return run(query, key, value, attn_mask, bool(is_causal), scale, bool(enable_gqa), backend=be, device=dev,
                   algo=al, return_record=True)
    return torch.ops.xattn.sdpa(query, key, value, attn_mask, bool(is_causal), scale, bool(enable_gqa), 0.0, None,
                                be, int(dev), al, "")


def _check_mask_shape(attn_mask, query, key):
    target = tuple(query.shape[:-1]) + (key.shape[-2],)
    if attn_mask.dim() > len(target):
        raise input_error("INVALID_SHAPE", f"attn_mask: {attn_mask.dim()}-D {list(attn_mask.shape)}, more "
                          f"dimensions than the attention's {list(target)} ([..., L, S])")
    nd = len(target)
    t = (1,) * (nd - len(target)) + target
    m = (1,) * (nd - attn_mask.dim()) + tuple(attn_mask.shape)
    for a, b in zip(m, t):
        if a != 1 and a != b and b != 1:
            raise input_error("INVALID_SHAPE", f"attn_mask: shape {list(attn_mask.shape)} does not broadcast to "
                              f"{list(target)} ([..., L, S])")


# ---- the eager implementation -------------------------------------------------------


class _MaskCache:
    """The last mask analysed (models pass one mask object to every layer)."""

    def __init__(self):
        self.entry = None  # (key, value), replaced as one (threads read it without a lock)

    def get(self, key):
        e = self.entry
        if e is not None and e[0][0] is key[0] and e[0][1:] == key[1:]:
            return e[1]
        return None

    def put(self, key, value):
        self.entry = (key, value)


_mask_cache = _MaskCache()


def _mask_options(mask4: torch.Tensor, b: int, hq: int, sq: int, sk: int) -> dict:
    """xattn options for an SDPA mask given as [Bm, Hm, Lm, Sm] (each 1 or full):
    lengths / causal / window where the mask is exactly those, else an additive bias."""
    key = (mask4, mask4._version, tuple(mask4.shape), tuple(mask4.stride()), mask4.data_ptr(), b, hq, sq, sk)
    hit = _mask_cache.get(key)
    if hit is not None:
        return hit
    opts = _decompose(mask4, b, hq, sq, sk)
    if opts is None:
        opts = {"bias": _as_bias(mask4, sq, sk)}
    _mask_cache.put(key, opts)
    return opts


def _decompose(mask4, b, hq, sq, sk) -> Optional[dict]:
    m = mask4.detach()
    mn = m.cpu().numpy() if m.dtype == torch.bool else m.float().cpu().numpy()
    an = analyze(mn, False, b, hq, sq, sk)
    if an.kind not in ("none", "causal", "lengths"):
        return None
    if getattr(an, "pad_q", None) is not None or getattr(an, "pad_k", None) is not None:
        return None  # left padding: xattn's lengths are right padding; the mask stays a bias
    # analyze() checks the rows that are not padding; SDPA computes every row, so the
    # decomposition is re-checked on all of them with every query row real.
    allowed, values = allowed_from_mask(mn)
    if values is not None:
        return None
    allowed = np.broadcast_to(allowed, allowed.shape[:2] + (sq, sk))[:, 0]  # heads agree (analyze checked)
    bm = allowed.shape[0]
    lk = list(an.seqlens_k)[:bm] if an.seqlens_k is not None else [sk] * bm
    wl = an.window[0] if an.window else None
    exp, _ = _expected([sq] * bm, lk, sq, sk, an.causal, wl)
    if not np.array_equal(np.broadcast_to(exp, allowed.shape), allowed):
        return None
    if m.dtype != torch.bool and not allowed.any(axis=-1).all() and np.isfinite(mn).all():
        # finite "minus infinity" (finfo.min): PyTorch gives a row without keys the mean
        # of V; as an additive bias xattn computes the same, as lengths it would give 0
        return None
    opts = {}
    if an.causal:
        opts["causal"] = an.causal
    if an.window:
        opts["window"] = an.window
    if an.seqlens_k is not None and any(x < sk for x in lk):
        full = lk * b if bm == 1 else lk
        opts["seqlens_k"] = np.asarray(full, dtype=np.int32)
    return opts


def _as_bias(mask4: torch.Tensor, sq: int, sk: int) -> torch.Tensor:
    """The mask as xattn's additive bias (f32 or f16), broadcast to [Bm, Hm, Sq, Sk]
    with stride 0 where the mask has extent 1 (no copy of a float mask)."""
    m = mask4.detach()
    if m.dtype == torch.bool:
        m = torch.zeros(m.shape, dtype=torch.float32, device=m.device).masked_fill_(~m, float("-inf"))
    elif m.dtype not in (torch.float32, torch.float16):
        m = m.float()  # bf16 -> f32 is exact
    return m.expand(m.shape[0], m.shape[1], sq, sk)


def _to4d(query, key, value, mask, enable_gqa):
    """q, k, v as [B, H, S, D] (views, with stride 0 where SDPA broadcasts, unless
    several batch dims must be flattened) and the mask as [Bm, Hm, Lm, Sm] (each 1
    or full); plus the caller's output shape and (B, Hq, Hkv)."""
    batch, hq, hk = _shapes(query, key, value, enable_gqa)
    nd = max(query.dim(), key.dim(), value.dim())
    nb = 1
    for x in batch:
        nb *= x
    sq, sk = query.shape[-2], key.shape[-2]
    out_shape = (sq, value.shape[-1]) if nd == 2 else tuple(batch) + (hq, sq, value.shape[-1])

    def four(t, h):
        t = t.reshape((1,) * (max(nd, 3) - t.dim()) + tuple(t.shape))  # SDPA's leading 1s (a view)
        full = tuple(batch) + (h,) + tuple(t.shape[-2:])
        if tuple(t.shape) != full:
            t = t.expand(full)
        return t.reshape((nb,) + full[-3:])

    q4, k4, v4 = four(query, hq), four(key, hk), four(value, hk)
    m4 = None
    if mask is not None:
        m = mask.reshape((1,) * (max(nd, 4) - mask.dim()) + tuple(mask.shape))
        if m.dim() > 4:  # several batch dims: the mask over all of them, flattened
            m = m.expand(tuple(batch) + (hq, sq, sk)).reshape(nb, hq, sq, sk)
        m4 = m
    return q4, k4, v4, m4, out_shape, (nb, hq, hk)


_cuda = []


def _cuda_status() -> dict:
    """xattn's CUDA backend: compiled and usable here (asked once per process)."""
    if not _cuda:
        _cuda.append(_core.backends()["cuda"])
    return _cuda[0]


def run(query, key, value, attn_mask=None, is_causal=False, scale=None, enable_gqa=False, *, softcap=0.0,
        sinks=None, backend="cpu", device=0, algo="auto", name="", return_record=False):
    """The drop-in's work on real tensors (the custom op's implementation)."""
    q4, k4, v4, m4, out_shape, (b, hq, hk) = _to4d(query, key, value, attn_mask, enable_gqa)
    if query.is_cuda and backend in ("cuda", "auto"):
        st = _cuda_status()
        if not st["available"]:
            raise input_error("INVALID_ARGUMENT", "query: a CUDA tensor, but xattn's CUDA backend is not available "
                              f"here ({st['reason'] or 'not compiled'}): move the tensors to the CPU, or use a "
                              "build of xattn with CUDA")
    sq, sk = q4.shape[2], k4.shape[2]
    opts = {}
    if is_causal:
        opts["causal"] = "top-left"
    if m4 is not None:
        opts.update(_mask_options(m4, b, hq, sq, sk))
    if sinks is not None:
        opts["sinks"] = sinks.detach().float().contiguous()
    o, rec = _core.attention(q4.detach(), k4.detach(), v4.detach(), layout="bhsd", scale=scale,
                             softcap=float(softcap or 0.0), algo=algo, backend=backend, device=device,
                             name=name or None, record=return_record, **opts)
    o = o.reshape(out_shape)
    return (o, rec) if return_record else o


# ---- the custom op -----------------------------------------------------------------

# xattn::sdpa(Tensor query, Tensor key, Tensor value, Tensor? attn_mask, bool is_causal, float? scale,
#             bool enable_gqa, float softcap, Tensor? sinks, str backend, int device, str algo, str name)
#             -> Tensor


@torch.library.custom_op("xattn::sdpa", mutates_args=())
def _sdpa_op(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: Optional[torch.Tensor],
             is_causal: bool, scale: Optional[float], enable_gqa: bool, softcap: float,
             sinks: Optional[torch.Tensor], backend: str, device: int, algo: str, name: str) -> torch.Tensor:
    return run(query, key, value, attn_mask, is_causal, scale, enable_gqa, softcap=softcap, sinks=sinks,
               backend=backend, device=device, algo=algo, name=name)


@_sdpa_op.register_fake
def _sdpa_fake(query, key, value, attn_mask, is_causal, scale, enable_gqa, softcap, sinks, backend, device, algo,
               name):
    batch, hq, _ = _shapes(query, key, value, enable_gqa)
    if max(query.dim(), key.dim(), value.dim()) == 2:
        shape = (query.shape[-2], value.shape[-1])
    else:
        shape = tuple(batch) + (hq, query.shape[-2], value.shape[-1])
    return query.new_empty(shape)


__all__ = ["scaled_dot_product_attention", "run", "MASKED_BELOW"]
