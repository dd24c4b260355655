"""Agreement between outputs, with the bounds of the C harness (docs/tool.md).

A correct kernel's output, compared with the double-precision reference, has a
relative L2 error of at most 1e-5 in f32, and in f16/bf16 at most three times
the error that rounding the reference itself to that dtype gives (e_r), plus
1e-5. Two outputs that each meet that bound differ, by the triangle inequality,
by at most twice it: that is the bound used between xattn and PyTorch's SDPA
on real activations (both are compared with the reference too).
"""

from __future__ import annotations

import numpy as np


def to_f64(x) -> np.ndarray:
    """Any array (numpy, torch of any dtype and device) as float64 numpy."""
    import sys

    t = sys.modules.get("torch")
    if t is not None and isinstance(x, t.Tensor):
        return x.detach().to("cpu", t.float64).numpy()
    a = np.asarray(x)
    return a.astype(np.float64)


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """x rounded to the dtype (round to nearest even) and back to float64."""
    if dtype == "f32":
        return x.astype(np.float32).astype(np.float64)
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float64)
    if dtype == "bf16":
        f = np.ascontiguousarray(x, dtype=np.float32)
        u = f.view(np.uint32).astype(np.uint64)
        rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
        nan = np.isnan(f)
        out = (rounded & 0xFFFFFFFF).astype(np.uint32).view(np.float32).astype(np.float64)
        out[nan] = np.nan
        return out
    raise ValueError(f"dtype {dtype!r}")


def rel_l2(a: np.ndarray, ref: np.ndarray) -> float:
    """||a - ref|| / ||ref|| over finite reference entries (0 when ref is all zero and a equals it)."""
    a = np.asarray(a, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    m = np.isfinite(ref)
    d = np.linalg.norm((a - ref)[m])
    n = np.linalg.norm(ref[m])
    if n == 0:
        return 0.0 if d == 0 else float("inf")
    return float(d / n)


def kernel_bound(dtype: str, ref: np.ndarray) -> tuple:
    """(bound on a kernel's rel L2 error against the reference, e_r)."""
    if dtype == "f32":
        return 1e-5, rel_l2(round_to(ref, "f32"), ref)
    e_r = rel_l2(round_to(ref, dtype), ref)
    return 3.0 * e_r + 1e-5, e_r


def compare_outputs(x, sdpa, ref, dtype: str, rows=None) -> dict:
    """x (xattn), sdpa (PyTorch) and ref (the double-precision reference), the same
    shape; rows: a boolean mask broadcastable to them selecting the rows compared
    (padding rows, which xattn writes as 0 and SDPA computes, are left out)."""
    x, s, r = to_f64(x), to_f64(sdpa), to_f64(ref)
    if rows is not None:
        sel = np.broadcast_to(rows, r.shape)
        x, s, r = x[sel], s[sel], r[sel]
    bound, e_r = kernel_bound(dtype, r)
    out = {
        "dtype": dtype,
        "elements": int(r.size),
        "xattn_vs_reference": rel_l2(x, r),
        "sdpa_vs_reference": rel_l2(s, r),
        "xattn_vs_sdpa": rel_l2(x, s) if np.linalg.norm(s[np.isfinite(s)]) > 0 else rel_l2(x, r),
        "reference_rounded": e_r,
        "kernel_bound": bound,
        "pair_bound": 2.0 * bound,
        "nan_mismatch": int(np.sum(np.isnan(x) != np.isnan(s))),
    }
    out["pass"] = bool(out["xattn_vs_sdpa"] <= out["pair_bound"] and out["nan_mismatch"] == 0
                       and out["xattn_vs_reference"] <= bound)
    return out
