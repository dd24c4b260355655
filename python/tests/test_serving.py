"""The serving fields of xattn.attention and xattn.reference: attention sinks,
a paged KV cache (block_table) and an append (k_new/v_new), against a numpy
computation of the same semantics and against the library's reference."""

import numpy as np
import pytest

import xattn
from xattn._numerics import kernel_bound, rel_l2

ALGOS = ["naive", "flash", "splitkv"]


def dense_attention(q, k, v, lens_k=None, sinks=None):
    """O [B, Sq, Hq, Dv] in float64 of bshd arrays, non-causal; each sequence b
    sees keys 0 .. lens_k[b] - 1; sinks [Hq] join each row's denominator."""
    b_, sq, hq, d = q.shape
    hkv = k.shape[2]
    g = hq // hkv
    o = np.zeros((b_, sq, hq, v.shape[3]))
    for b in range(b_):
        n = k.shape[1] if lens_k is None else lens_k[b]
        for h in range(hq):
            s = q[b, :, h, :].astype(np.float64) @ k[b, :n, h // g, :].astype(np.float64).T / np.sqrt(d)
            m = s.max(axis=1, keepdims=True)
            if sinks is not None:
                m = np.maximum(m, sinks[h])
            p = np.exp(s - m)
            den = p.sum(axis=1, keepdims=True)
            if sinks is not None:
                den = den + np.exp(sinks[h] - m)
            o[b, :, h, :] = (p @ v[b, :n, h // g, :].astype(np.float64)) / den
    return o


def agree(o, ref):
    bound, _ = kernel_bound("f32", ref)
    err = rel_l2(np.asarray(o, dtype=np.float64), ref)
    assert err <= bound, f"rel L2 {err:.3e} > bound {bound:.3e}"


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("algo", ALGOS)
def test_sinks(rng, algo):
    q, k, v = rand(rng, 2, 3, 4, 16), rand(rng, 2, 20, 2, 16), rand(rng, 2, 20, 2, 16)
    sinks = np.array([0.5, -1.0, 2.0, 3.0], dtype=np.float32)
    want = dense_attention(q, k, v, sinks=sinks)
    out, rec = xattn.attention(q, k, v, sinks=sinks, algo=algo, backend="cpu")
    agree(out, want)
    assert rec["has_sinks"] == 1
    np.testing.assert_allclose(xattn.reference(q, k, v, sinks=sinks, backend="cpu"), want, rtol=1e-12,
                               atol=1e-12)
    # a sink only takes weight away: without it the output differs
    assert rel_l2(xattn.attention(q, k, v, algo=algo, backend="cpu")[0].astype(np.float64), want) > 1e-3


def test_sinks_bad(rng):
    q, k, v = rand(rng, 1, 2, 4, 8), rand(rng, 1, 5, 2, 8), rand(rng, 1, 5, 2, 8)
    with pytest.raises(xattn.XattnError, match="sinks"):
        xattn.attention(q, k, v, sinks=np.zeros(3, dtype=np.float32), backend="cpu")
    with pytest.raises(xattn.XattnError, match="sinks"):
        xattn.attention(q, k, v, sinks=np.zeros(4, dtype=np.float64), backend="cpu")


@pytest.mark.parametrize("algo", ALGOS)
def test_append(rng, algo):
    """Append 2 tokens to caches of 5 and 9: the cache gets them, the call attends
    over all, the lengths stay the caller's."""
    k_full, v_full = rand(rng, 2, 12, 2, 16), rand(rng, 2, 12, 2, 16)
    q = rand(rng, 2, 2, 4, 16)
    cache = np.array([5, 9], dtype=np.int32)
    k_new = np.stack([k_full[b, cache[b]:cache[b] + 2] for b in range(2)])
    v_new = np.stack([v_full[b, cache[b]:cache[b] + 2] for b in range(2)])
    k, v = k_full.copy(), v_full.copy()
    for b in range(2):  # the slots the append writes start as garbage
        k[b, cache[b]:cache[b] + 2] = 1e6
        v[b, cache[b]:cache[b] + 2] = -1e6
    want = dense_attention(q, k_full, v_full, lens_k=cache + 2)
    out, rec = xattn.attention(q, k, v, seqlens_k=cache, k_new=k_new, v_new=v_new, algo=algo,
                               backend="cpu")
    agree(out, want)
    for b in range(2):
        np.testing.assert_array_equal(k[b, :cache[b] + 2], k_full[b, :cache[b] + 2])
        np.testing.assert_array_equal(v[b, :cache[b] + 2], v_full[b, :cache[b] + 2])
        assert (k[b, cache[b] + 2:] == k_full[b, cache[b] + 2:]).all()
    assert list(cache) == [5, 9]
    assert rec["append_tokens"] == 2
    assert rec["append_bytes"] == 2 * 2 * 2 * (16 + 16) * 4


def test_append_bad(rng):
    q, k, v = rand(rng, 1, 1, 2, 8), rand(rng, 1, 6, 2, 8), rand(rng, 1, 6, 2, 8)
    kn = rand(rng, 1, 2, 2, 8)
    with pytest.raises(xattn.XattnError, match="v_new"):
        xattn.attention(q, k, v, seqlens_k=[4], k_new=kn, backend="cpu")
    with pytest.raises(xattn.XattnError, match="seqlens_k"):  # 5 cached + 2 new > 6 positions
        xattn.attention(q, k, v, seqlens_k=[5], k_new=kn, v_new=kn.copy(), backend="cpu")
    with pytest.raises(xattn.XattnError, match="seqlens_k"):  # an append needs the cache lengths
        xattn.attention(q, k, v, k_new=kn, v_new=kn.copy(), backend="cpu")


def paged(rng, k_full, v_full, lens, page):
    """k_full/v_full [B, S, Hkv, D] as page pools in shuffled order, and the table."""
    b_, _, hkv, d = k_full.shape
    need = [(n + page - 1) // page for n in lens]
    perm = rng.permutation(sum(need) + 1)  # one spare page never named
    mp = max(need)
    table = np.zeros((b_, mp), dtype=np.int32)
    kp = np.full((len(perm), page, hkv, d), np.nan, dtype=np.float32)
    vp = np.full((len(perm), page, hkv, v_full.shape[3]), np.nan, dtype=np.float32)
    at = 0
    for b in range(b_):
        for g in range(need[b]):
            pg = perm[at]
            at += 1
            table[b, g] = pg
            n = min(page, lens[b] - g * page)
            kp[pg, :n] = k_full[b, g * page:g * page + n]
            vp[pg, :n] = v_full[b, g * page:g * page + n]
    return kp, vp, table


def test_block_table_reference(rng):
    """The reference reads pages through the table: the same O as the contiguous cache."""
    lens = [13, 4, 9]
    k_full, v_full = rand(rng, 3, 13, 2, 8), rand(rng, 3, 13, 2, 8)
    q = rand(rng, 3, 2, 4, 8)
    kp, vp, table = paged(rng, k_full, v_full, lens, 5)
    sinks = np.array([0.0, 1.0, -1.0, 0.5], dtype=np.float32)
    want = xattn.reference(q, k_full, v_full, seqlens_k=lens, sinks=sinks, backend="cpu")
    got = xattn.reference(q, kp, vp, seqlens_k=lens, block_table=table, sinks=sinks, backend="cpu")
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("algo", ALGOS)
def test_block_table_attention(rng, algo):
    lens = [13, 4, 9]
    k_full, v_full = rand(rng, 3, 13, 2, 8), rand(rng, 3, 13, 2, 8)
    q = rand(rng, 3, 1, 4, 8)
    kp, vp, table = paged(rng, k_full, v_full, lens, 4)
    want = dense_attention(q, k_full, v_full, lens_k=lens)
    out, rec = xattn.attention(q, kp, vp, seqlens_k=lens, block_table=table, algo=algo, backend="cpu")
    agree(out, want)
    assert rec["page_size"] == 4


def test_block_table_bad(rng):
    q, kp, vp = rand(rng, 2, 1, 2, 8), rand(rng, 4, 4, 2, 8), rand(rng, 4, 4, 2, 8)
    with pytest.raises(xattn.XattnError, match="block_table"):  # not [B, pages]
        xattn.attention(q, kp, vp, seqlens_k=[3, 3], block_table=np.zeros(2, np.int32), backend="cpu")
    with pytest.raises(xattn.XattnError, match="block_table"):  # page 7 of a 4-page pool
        xattn.reference(q, kp, vp, seqlens_k=[3, 3], block_table=[[0], [7]], backend="cpu")
    with pytest.raises(xattn.XattnError, match="seqlens_k"):  # 9 keys need 3 pages of 4
        xattn.reference(q, kp, vp, seqlens_k=[9, 3], block_table=[[0, 1], [2, 3]], backend="cpu")


@pytest.mark.parametrize("algo", ALGOS)
def test_q8_0_cache(rng, algo):
    """A q8_0 cache (uint8 blocks, kv_dtype='q8_0'): against numpy on the dequantized
    values, against the reference, paged with an append, and its bytes in the record."""
    q, k, v = rand(rng, 2, 3, 4, 64), rand(rng, 2, 40, 2, 64), rand(rng, 2, 40, 2, 32)
    kq, vq = xattn.quantize_q8_0(k), xattn.quantize_q8_0(v)
    assert kq.shape == (2, 40, 2, 68) and kq.dtype == np.uint8 and vq.shape == (2, 40, 2, 34)
    kd, vd = xattn.dequantize_q8_0(kq), xattn.dequantize_q8_0(vq)
    assert np.abs(kd - k).max() <= np.abs(k).max() / 127  # half a step of the largest block's d, and some
    want = dense_attention(q, kd, vd)
    out, rec = xattn.attention(q, kq, vq, kv_dtype="q8_0", algo=algo, backend="cpu")
    agree(out, want)
    assert rec["kv_dtype"] == "q8_0"
    np.testing.assert_allclose(xattn.reference(q, kq, vq, kv_dtype="q8_0", backend="cpu"), want, rtol=1e-12,
                               atol=1e-12)
    # paged, with one token appended per sequence: pages of 16 tokens in a shuffled pool
    lens = np.array([30, 39], dtype=np.int32)
    table = np.array([[3, 0, 5], [1, 4, 2]], dtype=np.int32)
    kp, vp = np.zeros((6, 16, 2, 68), np.uint8), np.zeros((6, 16, 2, 34), np.uint8)
    for b in range(2):
        for j in range(lens[b] + 1):
            kp[table[b, j // 16], j % 16] = kq[b, j]
            vp[table[b, j // 16], j % 16] = vq[b, j]
    pages, slots = [table[0, 30 // 16], table[1, 39 // 16]], [30 % 16, 39 % 16]
    kn, vn = kp[pages, slots].copy(), vp[pages, slots].copy()  # the appended tokens
    kp[pages, slots] = 0  # their slots, which the append writes
    want = np.stack([dense_attention(q[b:b + 1], kd[b:b + 1, :lens[b] + 1], vd[b:b + 1, :lens[b] + 1])[0]
                     for b in range(2)])
    out, rec = xattn.attention(q, kp, vp, kv_dtype="q8_0", block_table=table, seqlens_k=lens,
                               k_new=kn[:, None], v_new=vn[:, None], algo=algo, backend="cpu")
    agree(out, want)
    assert rec["append_bytes"] == 2 * 2 * (68 + 34)
    np.testing.assert_array_equal(kp[pages, slots], kn)


def test_q8_0_bad(rng):
    q, k = rand(rng, 1, 2, 2, 32), rand(rng, 1, 8, 2, 32)
    kq = xattn.quantize_q8_0(k)
    with pytest.raises(xattn.XattnInputError, match="uint8"):
        xattn.attention(q, k, k, kv_dtype="q8_0", backend="cpu")
    with pytest.raises(xattn.XattnInputError, match="34"):
        xattn.attention(q, kq[..., :33], kq[..., :33], kv_dtype="q8_0", backend="cpu")
    with pytest.raises(xattn.XattnInputError, match="kv_dtype"):
        xattn.attention(q, kq, kq, kv_dtype="q4_0", backend="cpu")
    with pytest.raises(xattn.XattnInputError, match="dtype"):  # bytes without kv_dtype
        xattn.attention(q, kq, kq, backend="cpu")
    with pytest.raises(xattn.XattnInputError, match="multiple of 32"):
        xattn.quantize_q8_0(np.zeros((2, 40), np.float32))
