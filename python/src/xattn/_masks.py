"""What an SDPA attention mask means, in xattn's terms.

PyTorch's scaled_dot_product_attention takes a mask (boolean: True = take part,
or additive: 0 / -inf, or a large negative number standing for -inf) that
broadcasts to [B, H, Sq, Sk]. Models build most masks from a few facts: which
keys of each sequence are real (padding), causality, a sliding window. This
module recovers those facts when the mask is exactly made of them, so that a
padded batch becomes per-sequence lengths (padding measured as padding, as the
library's records count it), and keeps any other mask as an additive bias.

The decomposition is verified, never guessed: the mask that xattn's semantics
give for the recovered (lengths, causal, alignment, window) must equal the
model's mask on every row that is not padding.

Left padding (batched generation: each sequence's p_b pad tokens come first) is
recognized too. Its real tokens are moved to the front of their sequence (the
frame that per-sequence lengths describe: pad_q / pad_k give the offsets), so
that it becomes the same lengths + bottom-right causality as right padding.
Pad query rows are left out of the verification: their mask rows may be
anything (transformers "unmasks" fully masked rows for SDPA) and their outputs
are unused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

# An additive mask value at or below this is a "-inf" (models write finfo.min or
# -1e9 instead of -inf; exp() of either is exactly 0 in f32 after the max shift).
MASKED_BELOW = -1e4


@dataclass
class MaskAnalysis:
    """kind: "none" (no mask), "causal" (is_causal, no mask), "lengths" (the mask is
    padding, perhaps with causality and a window), or "bias" (anything else: kept
    as an additive f32 bias [Bm, Hm, Sq, Sk])."""

    kind: str
    causal: Optional[str] = None  # "top-left" | "bottom-right"
    window: Optional[tuple] = None  # (left, right), -1 = unbounded
    seqlens_q: Optional[list] = None
    seqlens_k: Optional[list] = None
    bias: Optional[np.ndarray] = field(default=None, repr=False)
    bias_shape: Optional[tuple] = None
    note: str = ""
    # Left padding: the pad tokens at the start of each sequence, in the query and the
    # key frame ([B] each); seqlens_q / seqlens_k then count the real tokens, as they
    # sit after each sequence's pads are moved to its end (see to_right_padded).
    pad_q: Optional[list] = None
    pad_k: Optional[list] = None


def allowed_from_mask(mask: np.ndarray) -> tuple:
    """(allowed bool array, additive values or None): additive masks whose allowed
    entries are not all 0 carry a real bias (ALiBi, relative positions...)."""
    if mask.dtype == np.bool_:
        return mask, None
    m = mask.astype(np.float32)
    allowed = m > MASKED_BELOW
    real_bias = bool(np.any(m[allowed] != 0))
    return allowed, (m if real_bias else None)


def _as4d(a: np.ndarray) -> np.ndarray:
    while a.ndim < 4:
        a = a[None]
    return a


def _expected(lq, lk, sq, sk, causal, window_left):
    """xattn's allowed pairs for these lengths and options: bool [B, Sq, Sk], and
    the rows that are not padding, bool [B, Sq]."""
    i = np.arange(sq)[None, :, None]
    j = np.arange(sk)[None, None, :]
    lq3 = np.asarray(lq)[:, None, None]
    lk3 = np.asarray(lk)[:, None, None]
    ok = j < lk3
    if causal is not None or window_left is not None:
        p = i if causal == "top-left" else i + lk3 - lq3
        if causal is not None:
            ok = ok & (j <= p)
        if window_left is not None:
            ok = ok & (j >= p - window_left)
    rows = np.arange(sq)[None, :] < np.asarray(lq)[:, None]
    return ok, rows


def analyze(mask, is_causal: bool, batch: int, heads: int, sq: int, sk: int) -> MaskAnalysis:
    """Decomposes an SDPA mask (numpy array broadcastable to [B, H, Sq, Sk], or None)."""
    if mask is None:
        if is_causal:
            return MaskAnalysis("causal", causal="top-left", note="is_causal (top-left alignment)")
        return MaskAnalysis("none")
    m = _as4d(np.asarray(mask))
    if m.ndim != 4 or any(d not in (1, full) for d, full in zip(m.shape, (batch, heads, sq, sk))):
        return _bias(m, f"mask shape {list(np.asarray(mask).shape)} does not broadcast simply")
    allowed, values = allowed_from_mask(m)
    if values is not None:
        return _bias(m, "additive mask with non-zero values (a real bias)")
    if allowed.shape[2] != sq or allowed.shape[3] != sk:
        allowed = np.broadcast_to(allowed, allowed.shape[:2] + (sq, sk))
    if allowed.shape[1] > 1 and not np.all(allowed == allowed[:, :1]):
        return _bias(m, "the mask differs between heads")
    a = allowed[:, 0]  # [Bm, Sq, Sk]
    bm = a.shape[0]
    # Keys that some row may see: a prefix of each sequence (right padding).
    cols = a.any(axis=1)  # [Bm, Sk]
    lk = cols.sum(axis=1)
    prefix = np.arange(sk)[None, :] < lk[:, None]
    if not np.array_equal(cols, prefix):
        left = _left_padded(a, batch, bm, sq, sk)
        if left is not None:
            return left
        return _bias(m, "the visible keys are neither a prefix nor a suffix of each sequence "
                        "(not right or left padding)")
    # Self-attention with padded keys: the padded query rows are padding too.
    padded = bool(np.any(lk < sk))
    lq_options = []
    if padded and sq == sk:
        lq_options.append(lk.copy())
    lq_options.append(np.full(bm, sq))
    for lq in lq_options:
        for causal in (None, "top-left", "bottom-right"):
            for wl in _window_candidates(a, lq, lk, sq, causal):
                exp, rows = _expected(lq, lk, sq, sk, causal, wl)
                if np.array_equal(exp & rows[:, :, None], a & rows[:, :, None]):
                    return _lengths(lq, lk, batch, bm, sq, sk, causal, wl, padded)
    # Left-padded pad rows "unmasked" (all allowed) make every key visible to some row.
    left = _left_padded(a, batch, bm, sq, sk)
    if left is not None:
        return left
    return _bias(m, "not a combination of padding, causality and a sliding window")


def _left_pads(a: np.ndarray, sq: int, sk: int):
    """Candidate (pad_q, pad_k) per sequence of a left-padded mask a [Bm, Sq, Sk]: the
    last query row is real, and its first visible key is the first real key (or, with a
    window, the first key that any partly visible row sees). The query rows are the last
    Sq positions of the Sk keys, so pad_q = max(0, pad_k - (Sk - Sq))."""
    bm = a.shape[0]
    out = []
    for b in range(bm):
        last = a[b, sq - 1]
        if not last.any():
            return []
        cands = [int(np.argmax(last))]
        partial = a[b][a[b].any(axis=1) & ~a[b].all(axis=1)]
        if partial.shape[0]:
            lo = int(np.min(np.argmax(partial, axis=1)))
            if lo not in cands:
                cands.append(lo)
        out.append(cands)
    combos = [[c[0] for c in out]]
    if any(len(c) > 1 for c in out):
        combos.append([c[-1] for c in out])
    return [(np.maximum(0, np.asarray(pk) - (sk - sq)), np.asarray(pk)) for pk in combos]


def to_right_padded(x: np.ndarray, pads, axis: int) -> np.ndarray:
    """Moves each sequence's first pads[b] positions along axis to its end (x[b, ...])."""
    out = np.empty_like(x)
    for b in range(x.shape[0]):
        out[b] = np.roll(x[b], -int(pads[b if len(pads) > 1 else 0]), axis=axis - 1)
    return out


def _left_padded(a: np.ndarray, batch: int, bm: int, sq: int, sk: int) -> Optional[MaskAnalysis]:
    """The left-padding decomposition of a [Bm, Sq, Sk] (verified), or None."""
    if sq == 0 or sk == 0:
        return None
    for pq, pk in _left_pads(a, sq, sk):
        if not np.any(pk > 0):
            continue
        ar = to_right_padded(to_right_padded(a, pq, 1), pk, 2)
        lq, lk = sq - pq, sk - pk
        if np.any(lq <= 0) or np.any(lk <= 0):
            continue
        for causal in ("bottom-right", None, "top-left"):
            for wl in _window_candidates(ar, lq, lk, sq, causal):
                exp, rows = _expected(lq, lk, sq, sk, causal, wl)
                if np.array_equal(exp & rows[:, :, None], ar & rows[:, :, None]):
                    res = _lengths(lq, lk, batch, bm, sq, sk, causal, wl, True, left=True)
                    rep = (lambda x: [int(v) for v in np.repeat(x, batch)]) if bm == 1 and batch > 1 else \
                        (lambda x: [int(v) for v in x])
                    res.pad_q, res.pad_k = rep(pq), rep(pk)
                    return res
    return None


def _window_candidates(a, lq, lk, sq, causal):
    """No window, and the left window that the first visible key of the last
    real row of sequence 0 implies."""
    yield None
    if causal is None or lq[0] == 0:  # windows come with causality in the models seen
        return
    i = int(lq[0]) - 1
    row = a[0, i]
    if not row.any():
        return
    lo = int(np.argmax(row))
    p = i if causal == "top-left" else i + int(lk[0]) - int(lq[0])
    w = p - lo
    if w >= 0 and lo > 0:
        yield w


def _lengths(lq, lk, batch, bm, sq, sk, causal, wl, padded, left=False):
    if bm == 1 and batch > 1:
        lq = np.repeat(lq, batch)
        lk = np.repeat(lk, batch)
    window = (int(wl), -1) if wl is not None else None
    if not padded and causal is None and window is None:
        return MaskAnalysis("none", note="the mask allows every pair")
    note = []
    if left:
        note.append("left padding (each sequence's pads moved to its end: per-sequence lengths)")
    elif padded:
        note.append("key padding" + (" (and the same query rows)" if sq == sk else ""))
    if causal:
        note.append(f"causal {causal}")
    if window:
        note.append(f"sliding window {window[0]} left")
    return MaskAnalysis(
        "lengths" if padded else "causal",
        causal=causal,
        window=window,
        seqlens_q=[int(x) for x in lq] if padded and (sq == sk or left) else None,
        seqlens_k=[int(x) for x in lk] if padded else None,
        note=", ".join(note),
    )


def _bias(m: np.ndarray, why: str) -> MaskAnalysis:
    if m.dtype == np.bool_:
        b = np.where(m, np.float32(0), np.float32(-np.inf)).astype(np.float32)
    else:
        b = m.astype(np.float32)
        b = np.where(b <= MASKED_BELOW, np.float32(-np.inf), b).astype(np.float32)
    return MaskAnalysis("bias", bias=b, bias_shape=tuple(b.shape), note=why)
