"""What an SDPA mask means (xattn._masks): padding becomes lengths, causality and
windows are recognized, anything else stays a bias; and each decomposition
computes what the mask computes (xattn with the options = xattn with the mask
as a bias, on every row that is not padding)."""

import numpy as np
import pytest

import xattn
from xattn._masks import analyze


def key_padding(lengths, s, rows=None):
    rows = rows or s
    m = np.zeros((len(lengths), 1, rows, s), bool)
    for b, n in enumerate(lengths):
        m[b, :, :, :n] = True
    return m


def causal_tl(sq, sk):
    return np.arange(sk)[None, :] <= np.arange(sq)[:, None]


def same_result(m, an, rng, b, h, sq, sk):
    """xattn with the decomposition's options equals xattn with the mask as a bias."""
    q = rng.standard_normal((b, h, sq, 16)).astype(np.float32)
    k = rng.standard_normal((b, h, sk, 16)).astype(np.float32)
    v = rng.standard_normal((b, h, sk, 16)).astype(np.float32)
    bias = np.where(np.broadcast_to(m, (m.shape[0], m.shape[1], sq, sk)), 0, -np.inf).astype(np.float32)
    want = xattn.reference(q, k, v, layout="bhsd", bias=bias)
    kw = {"layout": "bhsd"}
    if an.causal:
        kw["causal"] = an.causal
    if an.window:
        kw["window"] = an.window
    if an.seqlens_q is not None:
        kw["seqlens_q"] = an.seqlens_q
    if an.seqlens_k is not None:
        kw["seqlens_k"] = an.seqlens_k
    got = xattn.reference(q, k, v, **kw)
    lq = an.seqlens_q or [sq] * b
    for i in range(b):
        np.testing.assert_allclose(got[i, :, : lq[i]], want[i, :, : lq[i]], rtol=0, atol=1e-12)


def test_no_mask():
    assert analyze(None, False, 2, 4, 8, 8).kind == "none"
    a = analyze(None, True, 2, 4, 8, 8)
    assert a.kind == "causal" and a.causal == "top-left"


def test_key_padding_bool(rng):
    m = key_padding([5, 8, 2], 8)
    a = analyze(m, False, 3, 4, 8, 8)
    assert a.kind == "lengths" and a.seqlens_k == [5, 8, 2] and a.seqlens_q == [5, 8, 2] and a.causal is None
    same_result(m, a, rng, 3, 4, 8, 8)
    # the [B, 1, 1, Sk] form
    m1 = key_padding([5, 8, 2], 8, rows=1)
    a1 = analyze(m1, False, 3, 4, 8, 8)
    assert a1.seqlens_k == [5, 8, 2]


def test_key_padding_additive():
    m = np.where(key_padding([3, 6], 6), 0.0, np.finfo(np.float32).min).astype(np.float32)
    a = analyze(m, False, 2, 2, 6, 6)
    assert a.kind == "lengths" and a.seqlens_k == [3, 6]
    m16 = np.where(key_padding([3, 6], 6), 0.0, -np.inf).astype(np.float16)
    assert analyze(m16, False, 2, 2, 6, 6).seqlens_k == [3, 6]


def test_all_true_mask_is_no_mask():
    assert analyze(np.ones((2, 1, 5, 5), bool), False, 2, 3, 5, 5).kind == "none"


def test_causal_and_padding(rng):
    """transformers' mask for a right-padded decoder batch: causal and key padding."""
    lengths = [6, 3]
    m = key_padding(lengths, 6) & causal_tl(6, 6)[None, None]
    a = analyze(m, False, 2, 4, 6, 6)
    assert a.kind == "lengths" and a.causal == "top-left" and a.seqlens_k == lengths
    same_result(m, a, rng, 2, 4, 6, 6)


def test_decode_with_cache_bottom_right(rng):
    # 3 new query rows against 7 keys, the last row sees every key
    m = (np.arange(7)[None, :] <= np.arange(3)[:, None] + 4)[None, None]
    a = analyze(m, False, 1, 2, 3, 7)
    assert a.causal == "bottom-right" and a.seqlens_k is None
    same_result(m, a, rng, 1, 2, 3, 7)


def test_sliding_window(rng):
    i, j = np.arange(10)[:, None], np.arange(10)[None, :]
    m = ((j <= i) & (j >= i - 3))[None, None]
    a = analyze(m, False, 1, 2, 10, 10)
    assert a.causal == "top-left" and a.window == (3, -1)
    same_result(m, a, rng, 1, 2, 10, 10)


def left_padded(lengths, sq, sk, causal=True, window=None, pad_rows="masked"):
    """A left-padded mask [B, 1, Sq, Sk] as transformers builds it for batched
    generation: sequence b's first sk - lengths[b] keys are padding, its query rows are
    the last sq positions; pad rows fully masked, all allowed ("unmasked") or random."""
    m = np.zeros((len(lengths), 1, sq, sk), bool)
    i = np.arange(sq)[:, None] + (sk - sq)
    j = np.arange(sk)[None, :]
    for b, n in enumerate(lengths):
        p = sk - n
        ok = (j >= p) & (i >= p)
        if causal:
            ok &= j <= i
        if window is not None:
            ok &= j >= i - window
        m[b, 0] = ok
        pad = (i[:, 0] < p)
        if pad_rows == "unmasked":
            m[b, 0, pad] = True
        elif pad_rows == "random":
            m[b, 0, pad] = np.random.default_rng(b).random((int(pad.sum()), sk)) > 0.5
    return m


def same_result_left(m, an, rng, h, sq, sk):
    """xattn with the options, on each sequence's tokens moved to the front, equals
    xattn with the mask as a bias on the real rows."""
    from xattn._masks import to_right_padded

    b = m.shape[0]
    q = rng.standard_normal((b, h, sq, 16)).astype(np.float32)
    k = rng.standard_normal((b, h, sk, 16)).astype(np.float32)
    v = rng.standard_normal((b, h, sk, 16)).astype(np.float32)
    bias = np.where(m, 0, -np.inf).astype(np.float32)
    want = xattn.reference(q, k, v, layout="bhsd", bias=bias)
    kw = {"layout": "bhsd", "seqlens_q": an.seqlens_q, "seqlens_k": an.seqlens_k}
    if an.causal:
        kw["causal"] = an.causal
    if an.window:
        kw["window"] = an.window
    got = xattn.reference(to_right_padded(q, an.pad_q, 2), to_right_padded(k, an.pad_k, 2),
                          to_right_padded(v, an.pad_k, 2), **kw)
    for i in range(b):
        n, p = an.seqlens_q[i], an.pad_q[i]
        np.testing.assert_allclose(got[i, :, :n], want[i, :, p:p + n], rtol=0, atol=1e-12)


@pytest.mark.parametrize("pad_rows", ["masked", "unmasked", "random"])
def test_left_padding_prefill(rng, pad_rows):
    """Batched generation's prefill: left padding + causality becomes per-sequence
    lengths, bottom-right, with the pads moved to the end; pad rows are left out."""
    m = left_padded([8, 5, 2], 8, 8, pad_rows=pad_rows)
    a = analyze(m, False, 3, 4, 8, 8)
    assert a.kind == "lengths" and a.causal == "bottom-right" and a.window is None, a
    assert a.seqlens_q == a.seqlens_k == [8, 5, 2] and a.pad_q == a.pad_k == [0, 3, 6]
    assert "left padding" in a.note
    same_result_left(m, a, rng, 4, 8, 8)
    # additive, as transformers writes it with finfo.min
    add = np.where(m, 0.0, np.finfo(np.float32).min).astype(np.float32)
    assert analyze(add, False, 3, 4, 8, 8).seqlens_k == [8, 5, 2]


def test_left_padding_decode_and_chunk(rng):
    # one decode token per sequence against the cache: Lq = 1, Lk = the real keys
    m = left_padded([9, 6, 3], 1, 9)
    a = analyze(m, False, 3, 4, 1, 9)
    assert (a.kind, a.causal, a.seqlens_q, a.seqlens_k, a.pad_q, a.pad_k) == (
        "lengths", "bottom-right", [1, 1, 1], [9, 6, 3], [0, 0, 0], [0, 3, 6])
    same_result_left(m, a, rng, 4, 1, 9)
    # a chunk of 4 queries whose first rows are padding of a short sequence
    m = left_padded([9, 6, 2], 4, 9)
    a = analyze(m, False, 3, 2, 4, 9)
    assert a.seqlens_q == [4, 4, 2] and a.seqlens_k == [9, 6, 2] and a.pad_q == [0, 0, 2]
    same_result_left(m, a, rng, 2, 4, 9)


def test_left_padding_window(rng):
    m = left_padded([10, 7, 4], 10, 10, window=3)
    a = analyze(m, False, 3, 2, 10, 10)
    assert a.kind == "lengths" and a.window == (3, -1) and a.pad_k == [0, 3, 6]
    same_result_left(m, a, rng, 2, 10, 10)


def test_left_padding_not_guessed():
    """A real row that sees a pad key, or a hole in a real row: not left padding."""
    m = left_padded([8, 5], 8, 8)
    m[1, 0, 7, 1] = True  # the last row of sequence 1 sees a pad key
    assert analyze(m, False, 2, 2, 8, 8).kind == "bias"
    m = left_padded([8, 5], 8, 8)
    m[1, 0, 6, 4] = False  # a hole
    assert analyze(m, False, 2, 2, 8, 8).kind == "bias"


@pytest.mark.parametrize("what", ["holes", "real-bias", "per-head", "random"])
def test_kept_as_bias(rng, what):
    if what == "holes":
        m = key_padding([6, 6], 6)
        m[0, :, :, 2] = False  # one key masked in the middle of the sequence
    elif what == "real-bias":
        m = rng.standard_normal((1, 1, 6, 6)).astype(np.float32)
    elif what == "per-head":
        m = np.ones((1, 2, 6, 6), bool)
        m[0, 1, :, 4:] = False
    else:
        m = rng.random((2, 1, 6, 6)) > 0.3
    a = analyze(m, False, 2, 2, 6, 6)
    assert a.kind == "bias" and a.note
    assert a.bias.dtype == np.float32 and a.bias.shape == (m.shape[0], m.shape[1], 6, 6)
    if m.dtype == bool:
        assert np.array_equal(np.isneginf(a.bias), ~m)
    else:
        np.testing.assert_array_equal(a.bias, m)
