"""Every number the Python binding hands to the C library is checked against the
C type it becomes before ctypes converts it: ctypes wraps a Python int modulo
2^bits (window=(2**64 + 3, 0) would run as (3, 0)), numpy's astype wraps int64
lengths into int32, and a double becomes a float by rounding (scale=1e-50 would
become 0, which the library reads as 1/sqrt(D)). Each value at a C type's bound
that is valid is accepted; one past it is refused with XattnInputError (a
ValueError) naming the argument, the value and the range, and the refused call
writes nothing (out, the caches) and changes no context state (options,
records, memory counters).

Booleans: True is refused where a count, a position, a length, a device or a
number is expected (window, num_splits, device, threads, memory_limit, cpu_simd,
scale, softcap, length arrays); it is a flag only for poison (and causal=True is
refused as ambiguous, as before).
"""

import ctypes

import numpy as np
import pytest

import xattn
from xattn._capi import lib

I32_MAX, I32_MIN = 2**31 - 1, -(2**31)
I64_MAX, I64_MIN = 2**63 - 1, -(2**63)
FLT_MAX = float(np.finfo(np.float32).max)
FLT_MIN = float(np.finfo(np.float32).tiny)

B, SQ, SK, HQ, HKV, D = 2, 5, 7, 2, 1, 8
SENTINEL = 7.25


@pytest.fixture
def qkv(rng):
    q = rng.standard_normal((B, SQ, HQ, D)).astype(np.float32)
    k = rng.standard_normal((B, SK, HKV, D)).astype(np.float32)
    v = rng.standard_normal((B, SK, HKV, D)).astype(np.float32)
    return q, k, v


def fresh_out():
    return np.full((B, SQ, HQ, D), SENTINEL, np.float32)


def refused(fn, status, *words):
    """fn() raises XattnInputError with this status and a message holding each word."""
    with pytest.raises(xattn.XattnInputError) as ei:
        fn()
    e = ei.value
    assert isinstance(e, ValueError)
    assert e.status_name == "XATTN_STATUS_" + status, e
    for w in words:
        assert w in e.message, f"{w!r} not in {e.message!r}"
    return e


def refused_call(qkv, status, words, **kw):
    """attention(**kw) refused, out= untouched; reference(**kw) refused too."""
    q, k, v = qkv
    out = fresh_out()
    refused(lambda: xattn.attention(q, k, v, out=out, backend="cpu", **kw), status, *words)
    assert np.all(out == SENTINEL), "a refused call wrote out="
    ref_kw = {n: x for n, x in kw.items() if n not in ("num_splits", "algo")}
    if ref_kw:
        refused(lambda: xattn.reference(q, k, v, backend="cpu", **ref_kw), status, *words)


# ---- window: int64 each side ---------------------------------------------------------------

@pytest.mark.parametrize("bad", [2**63, 2**64, 2**64 + 3, I64_MIN - 1, -(2**64) - 3, np.uint64(2**63),
                                 np.uint64(2**64 - 1)])
@pytest.mark.parametrize("side", [0, 1])
def test_window_beyond_int64_refused(qkv, bad, side):
    w = [4, 4]
    w[side] = bad
    refused_call(qkv, "INVALID_ARGUMENT", [f"window[{side}]", str(int(bad)), f"{I64_MIN}..{I64_MAX}"],
                 window=tuple(w))


@pytest.mark.parametrize("bad", [True, False, np.True_, 1.0, 3.5, float("inf"), float("nan"), "3", [4]])
def test_window_non_integers_refused(qkv, bad):
    refused_call(qkv, "INVALID_ARGUMENT", ["window[0]", f"{I64_MIN}..{I64_MAX}"], window=(bad, 0))


def test_window_headline_not_wrapped(qkv):
    """(2**64 + 3, 0) once ran as (3, 0): refused; the record of a valid call says what ran."""
    q, k, v = qkv
    out = fresh_out()
    refused(lambda: xattn.attention(q, k, v, out=out, window=(2**64 + 3, 0)), "INVALID_ARGUMENT",
            "window[0]: 18446744073709551619")
    assert np.all(out == SENTINEL)


@pytest.mark.parametrize("w", [(I64_MAX, I64_MAX), (I64_MIN, 0), (np.int64(I64_MAX), None), (0, I64_MIN)])
def test_window_at_int64_bounds_accepted(qkv, w):
    q, k, v = qkv
    o, rec = xattn.attention(q, k, v, window=w, backend="cpu")
    left = -1 if w[0] is None or w[0] < 0 else int(w[0])
    right = -1 if w[1] is None or w[1] < 0 else int(w[1])
    assert (rec["window_left"], rec["window_right"]) == (left, right)
    ref = xattn.reference(q, k, v, window=w, backend="cpu")
    assert np.allclose(o, ref, atol=1e-5)


# ---- num_splits: C int --------------------------------------------------------------------

@pytest.mark.parametrize("bad", [2**31, 2**32 + 1, 2**63, 2**64 + 3, -1, I64_MIN - 1, True, 2.0,
                                 np.uint64(2**64 - 1)])
def test_num_splits_out_of_range_refused(qkv, bad):
    refused_call(qkv, "INVALID_ARGUMENT", ["num_splits", f"0..{I32_MAX}"], algo="splitkv", num_splits=bad)


def test_num_splits_bounds(qkv):
    q, k, v = qkv
    out = fresh_out()
    # the C int's bound passes the binding; the library's own range (1..4096) refuses it
    refused(lambda: xattn.attention(q, k, v, out=out, algo="splitkv", num_splits=I32_MAX), "INVALID_ARGUMENT",
            "num_splits", str(I32_MAX))
    assert np.all(out == SENTINEL)
    o, rec = xattn.attention(q, k, v, algo="splitkv", num_splits=np.int64(4096), backend="cpu")
    assert np.allclose(o, xattn.reference(q, k, v), atol=1e-5)


# ---- scale and softcap: C floats ------------------------------------------------------------

@pytest.mark.parametrize("bad,why", [(1e-50, "smallest normal"), (-1e-50, "smallest normal"),
                                     (1e-39, "smallest normal"), (5e-324, "smallest normal"),
                                     (1e39, "beyond float32"), (-1e39, "beyond float32"),
                                     (3.4028236e38 * 1.0001, "beyond float32"), (2**128, "beyond float32"),
                                     (10**400, "does not fit"), (float("inf"), "not finite"),
                                     (float("-inf"), "not finite"), (float("nan"), "not finite"),
                                     (0.0, "non-zero"), (True, "not a number"), ("0.1", "not a number")])
def test_scale_refused(qkv, bad, why):
    refused_call(qkv, "INVALID_ARGUMENT", ["scale", why, "1.1754944e-38", "3.4028235e+38"], scale=bad)


def test_scale_1e_minus_50_is_not_the_default(qkv):
    """1e-50 flushed to 0 once ran as 1/sqrt(D), silently."""
    q, k, v = qkv
    out = fresh_out()
    e = refused(lambda: xattn.attention(q, k, v, out=out, scale=1e-50), "INVALID_ARGUMENT", "scale: 1e-50")
    assert "1/sqrt(D)" in e.message
    assert np.all(out == SENTINEL)


@pytest.mark.parametrize("ok", [FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX, np.float32(0.25), np.float64(0.5), 2])
def test_scale_at_float32_bounds_accepted(qkv, ok):
    q, k, v = qkv
    o, rec = xattn.attention(q, k, v, scale=ok, backend="cpu")
    assert rec["scale"] == np.float32(ok)
    if abs(float(ok)) < 1e30:  # (FLT_MAX overflows the scores in f32: accepted, not compared)
        assert np.allclose(o, xattn.reference(q, k, v, scale=ok), atol=1e-5)


@pytest.mark.parametrize("bad,why", [(1e-50, "smallest normal"), (1e-40, "smallest normal"),
                                     (1e39, "beyond float32"), (float("inf"), "not finite"),
                                     (float("nan"), "not finite"), (-1.0, ">= 0"), (-FLT_MIN, ">= 0"),
                                     (True, "not a number")])
def test_softcap_refused(qkv, bad, why):
    refused_call(qkv, "INVALID_ARGUMENT", ["softcap", why, "3.4028235e+38"], softcap=bad)


@pytest.mark.parametrize("ok", [0, 0.0, FLT_MIN, FLT_MAX, np.float32(30.0)])
def test_softcap_at_float32_bounds_accepted(qkv, ok):
    q, k, v = qkv
    o, rec = xattn.attention(q, k, v, softcap=ok, backend="cpu")
    assert rec["softcap"] == np.float32(ok)


# ---- ALiBi slopes: C floats ---------------------------------------------------------------

@pytest.mark.parametrize("bad,why", [([1e39, 0.5], "alibi_slopes[0]: 1e+39 is beyond float32"),
                                     ([0.5, 1e-50], "alibi_slopes[1]: 1e-50 is below"),
                                     ([0.5, float("nan")], "alibi_slopes[1]: nan is not finite"),
                                     (np.array([-np.inf, 1.0]), "alibi_slopes[0]: -inf is not finite"),
                                     ([2**1024, 1.0], "not an array of real numbers"),
                                     (np.array([True, False]), "bool"),
                                     (["a", "b"], "not an array of real numbers")])
def test_alibi_slopes_refused(qkv, bad, why):
    refused_call(qkv, "INVALID_ARGUMENT", [why], alibi_slopes=bad)


def test_alibi_slopes_at_bounds_accepted(qkv):
    q, k, v = qkv
    slopes = [0.0, FLT_MIN]
    o, _ = xattn.attention(q, k, v, alibi_slopes=slopes, backend="cpu")
    assert np.allclose(o, xattn.reference(q, k, v, alibi_slopes=slopes), atol=1e-5)
    xattn.attention(q, k, v, alibi_slopes=np.array([FLT_MAX, -FLT_MAX]), backend="cpu")


# ---- lengths and offsets: C int32 (numpy's astype would wrap them) ----------------------------------

BAD_LENGTHS = [np.array([2**31, 3], np.int64), np.array([3, 2**32 + 4], np.int64), np.array([I32_MIN - 1, 3]),
               np.array([I64_MAX, 3], np.int64), np.array([3, 2**64 - 1], np.uint64), [2**64 + 3, 3],
               [3, I64_MIN - 1], [2**63, 3]]


def _first_bad(a):
    for i, x in enumerate(list(a)):
        if not I32_MIN <= int(x) <= I32_MAX:
            return i, int(x)


@pytest.mark.parametrize("bad", BAD_LENGTHS, ids=range(len(BAD_LENGTHS)))
@pytest.mark.parametrize("name", ["seqlens_q", "seqlens_k"])
def test_seqlens_beyond_int32_refused(qkv, bad, name):
    i, x = _first_bad(bad)
    refused_call(qkv, "INVALID_LENGTHS", [f"{name}[{i}]: {x}", f"{I32_MIN}..{I32_MAX}"], **{name: bad})


@pytest.mark.parametrize("bad,why", [(np.array([True, True]), "bool"), ([3.0, 2.0], "float64"),
                                     (["3", "2"], "<U1")])
def test_seqlens_non_integers_refused(qkv, bad, why):
    refused_call(qkv, "INVALID_LENGTHS", ["seqlens_q", why, f"{I32_MIN}..{I32_MAX}"], seqlens_q=bad)


def test_seqlens_at_bounds(qkv):
    q, k, v = qkv
    # int32's bound passes the binding and is the library's to refuse (longer than Sq), writing nothing
    out = fresh_out()
    refused(lambda: xattn.attention(q, k, v, out=out, seqlens_q=np.array([I32_MAX, 1], np.int64)),
            "INVALID_LENGTHS", str(I32_MAX))
    assert np.all(out == SENTINEL)
    # any integer dtype holding int32 values runs
    for dt in (np.int64, np.uint64, np.int16, np.uint32):
        lq = np.array([SQ, 2], dt)
        o, _ = xattn.attention(q, k, v, seqlens_q=lq, seqlens_k=np.array([SK, 3], dt), backend="cpu")
        ref = xattn.reference(q, k, v, seqlens_q=[SQ, 2], seqlens_k=[SK, 3])
        assert np.allclose(o, ref, atol=1e-5)


def test_seqlens_torch_int64_refused(qkv):
    torch = pytest.importorskip("torch")
    refused_call(qkv, "INVALID_LENGTHS", ["seqlens_k[1]: 4294967299"],
                 seqlens_k=torch.tensor([3, 2**32 + 3], dtype=torch.int64))


def packed(rng, lens_q=(3, 4), lens_k=(5, 2)):
    tq, tk = sum(lens_q), sum(lens_k)
    q = rng.standard_normal((tq, HQ, D)).astype(np.float32)
    k = rng.standard_normal((tk, HKV, D)).astype(np.float32)
    v = rng.standard_normal((tk, HKV, D)).astype(np.float32)
    return q, k, v, np.cumsum((0,) + lens_q), np.cumsum((0,) + lens_k)


@pytest.mark.parametrize("which", ["cu_seqlens_q", "cu_seqlens_k"])
@pytest.mark.parametrize("bad_last", [2**32 + 7, 2**32 + 3, 2**64 + 7, I64_MAX])
def test_cu_seqlens_beyond_int32_refused(rng, which, bad_last):
    """[0, 3, 2**32 + 7] would become [0, 3, 7] through astype: a valid-looking batch."""
    q, k, v, cq, ck = packed(rng)
    offs = {"cu_seqlens_q": cq.tolist(), "cu_seqlens_k": ck.tolist()}
    offs[which] = offs[which][:-1] + [bad_last]
    if bad_last < 2**63:
        offs[which] = np.array(offs[which], np.int64)
    out = np.full((q.shape[0], HQ, D), SENTINEL, np.float32)
    refused(lambda: xattn.attention(q, k, v, out=out, **offs), "INVALID_LENGTHS", f"{which}[2]: {bad_last}",
            f"{I32_MIN}..{I32_MAX}")
    assert np.all(out == SENTINEL)
    refused(lambda: xattn.reference(q, k, v, **offs), "INVALID_LENGTHS", f"{which}[2]")


def test_cu_seqlens_int64_in_range_accepted(rng):
    q, k, v, cq, ck = packed(rng)
    o, _ = xattn.attention(q, k, v, cu_seqlens_q=cq.astype(np.int64), cu_seqlens_k=ck.astype(np.uint64))
    assert np.allclose(o, xattn.reference(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck), atol=1e-5)


# ---- block tables: int32 page indices; the caches an append would write --------------------------

def paged(rng, page=4, pages=6):
    q = rng.standard_normal((B, 1, HQ, D)).astype(np.float32)
    kp = rng.standard_normal((pages, page, HKV, D)).astype(np.float32)
    vp = rng.standard_normal((pages, page, HKV, D)).astype(np.float32)
    return q, kp, vp, np.array([[0, 1], [2, 3]], np.int32), np.array([6, 5], np.int32)


@pytest.mark.parametrize("bad", [2**31, 2**32 + 2, 2**64 + 1, I32_MIN - 1])
def test_block_table_beyond_int32_refused(rng, bad):
    q, kp, vp, table, lens = paged(rng)
    t = table.tolist()
    t[1][1] = bad
    if I64_MIN <= bad <= I64_MAX:
        t = np.array(t, np.int64)
    kn = rng.standard_normal((B, 1, HKV, D)).astype(np.float32)
    k0, v0 = kp.copy(), vp.copy()
    out = np.full(q.shape, SENTINEL, np.float32)
    refused(lambda: xattn.attention(q, kp, vp, out=out, seqlens_k=lens, block_table=t, k_new=kn, v_new=kn.copy(),
                                    backend="cpu"),
            "OUT_OF_BOUNDS", f"block_table[1][1]: {bad}", f"{I32_MIN}..{I32_MAX}")
    assert np.all(out == SENTINEL)
    assert np.array_equal(kp, k0) and np.array_equal(vp, v0), "a refused append wrote the cache"


def test_refused_append_writes_no_cache(rng):
    """The contiguous cache of an append, with each bad number in turn."""
    q = rng.standard_normal((B, 1, HQ, D)).astype(np.float32)
    k = rng.standard_normal((B, SK, HKV, D)).astype(np.float32)
    v = rng.standard_normal((B, SK, HKV, D)).astype(np.float32)
    kn = rng.standard_normal((B, 1, HKV, D)).astype(np.float32)
    k0, v0 = k.copy(), v.copy()
    for kw in ({"window": (2**64 + 3, 0)}, {"scale": 1e-50}, {"softcap": 1e39}, {"num_splits": 2**32},
               {"alibi_slopes": [1e39, 1.0]}):
        out = np.full(q.shape, SENTINEL, np.float32)
        with pytest.raises(xattn.XattnInputError):
            xattn.attention(q, k, v, out=out, seqlens_k=[3, 4], k_new=kn, v_new=kn.copy(), backend="cpu", **kw)
        assert np.all(out == SENTINEL), kw
        assert np.array_equal(k, k0) and np.array_equal(v, v0), kw
    with pytest.raises(xattn.XattnInputError):
        xattn.attention(q, k, v, seqlens_k=np.array([3, 2**32 + 4], np.int64), k_new=kn, v_new=kn.copy())
    assert np.array_equal(k, k0) and np.array_equal(v, v0)


# ---- contexts: device, stream, options ----------------------------------------------------------

@pytest.mark.parametrize("bad", [2**31, 2**32, 2**64 + 3, -1, I64_MIN - 1, True, 0.0, "0"])
def test_device_index_refused(qkv, bad):
    refused(lambda: xattn.Context("cpu", bad), "INVALID_ARGUMENT", "device", f"0..{I32_MAX}")
    q, k, v = qkv
    out = fresh_out()
    refused(lambda: xattn.attention(q, k, v, out=out, backend="cpu", device=bad), "INVALID_ARGUMENT", "device")
    assert np.all(out == SENTINEL)


def test_device_index_numpy_accepted(qkv):
    with xattn.Context("cpu", np.int64(0)) as ctx:
        assert ctx.device == 0
    q, k, v = qkv
    xattn.attention(q, k, v, backend="cpu", device=np.uint8(0))


@pytest.mark.parametrize("bad", [2**64, 2**64 + 3, -1, True, 1.5])
def test_stream_refused(bad):
    refused(lambda: xattn.Context("cuda", stream=bad), "INVALID_ARGUMENT", "stream", f"0..{2**64 - 1}")


@pytest.mark.parametrize("name", ["threads", "memory_limit", "cpu_simd"])
@pytest.mark.parametrize("bad", [2**63, 2**64 + 3, I64_MIN - 1, True, 2.5, "2"])
def test_option_values_refused_and_unchanged(name, bad):
    with xattn.Context("cpu") as ctx:
        before = ctx.get_option(name)
        refused(lambda: ctx.set_option(name, bad), "INVALID_ARGUMENT", name, f"{I64_MIN}..{I64_MAX}")
        assert ctx.get_option(name) == before
    refused(lambda: xattn.Context("cpu", **{name: bad}), "INVALID_ARGUMENT", name)


def test_memory_limit_2_64_plus_3_is_not_3_bytes():
    with xattn.Context("cpu") as ctx:
        refused(lambda: ctx.set_option("memory_limit", 2**64 + 3), "INVALID_ARGUMENT", "memory_limit")
        assert ctx.get_option("memory_limit") == 0
        assert ctx.mem_stats()["limit_bytes"] == 0


def test_option_values_at_bounds():
    with xattn.Context("cpu") as ctx:
        ctx.set_option("memory_limit", I64_MAX)
        assert ctx.get_option("memory_limit") == I64_MAX
        ctx.set_option("memory_limit", np.int64(0))
        ctx.set_option("threads", 1)
        # int64's bounds pass the binding: the library's own ranges refuse them, changing nothing
        refused(lambda: ctx.set_option("threads", I64_MAX), "INVALID_ARGUMENT", "NUM_THREADS")
        refused(lambda: ctx.set_option("memory_limit", I64_MIN), "INVALID_ARGUMENT", "negative")
        assert ctx.get_option("threads") == 1 and ctx.get_option("memory_limit") == 0
        ctx.set_option("poison", True)  # a flag: a bool is fine
        assert ctx.get_option("poison") == 1
        ctx.set_option("poison", False)
        assert ctx.get_option("poison") == 0
    refused(lambda: xattn.Context("cpu", threads=I64_MAX), "INVALID_ARGUMENT", "NUM_THREADS")


def test_refused_call_leaves_context_state(qkv):
    q, k, v = qkv
    with xattn.Context("cpu", keep_records=True) as ctx:
        xattn.attention(q, k, v, backend=ctx)
        n, mem = len(ctx.records()), ctx.mem_stats()
        for kw in ({"window": (0, 2**64)}, {"scale": 1e-45}, {"seqlens_q": [2**32, 1]}, {"num_splits": True}):
            out = fresh_out()
            with pytest.raises(xattn.XattnInputError):
                ctx.attention(q, k, v, out=out, **kw)
            with pytest.raises(xattn.XattnInputError):
                ctx.reference(q, k, v, **kw) if "num_splits" not in kw else ctx.attention(q, k, v, **kw)
            assert np.all(out == SENTINEL)
        assert len(ctx.records()) == n
        after = ctx.mem_stats()
        assert (after["current_bytes"], after["alloc_count"], after["limit_bytes"]) == \
            (mem["current_bytes"], mem["alloc_count"], mem["limit_bytes"])


# ---- strings: a NUL would cut the C string -----------------------------------------------------

def test_c_strings_with_nul_refused(tmp_path, qkv):
    with xattn.Context("cpu", keep_records=True) as ctx:
        q, k, v = qkv
        ctx.attention(q, k, v)
        target = tmp_path / "records.json"
        refused(lambda: ctx.export(str(target) + "\0.csv"), "INVALID_ARGUMENT", "path", "NUL")
        assert not target.exists()
        with pytest.raises(xattn.XattnInputError, match="NUL"):
            with ctx.range("layer\0evil"):
                pass
        ctx.export(target)
        assert target.exists()


# ---- arrays described by foreign objects: their numbers become int64 and size_t ----------------------

class FakeCudaArray:
    def __init__(self, shape, strides=None, ptr=4096):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4", "data": (ptr, False),
                                         "strides": strides, "version": 3}


@pytest.mark.parametrize("iface,status,words", [
    ({"shape": (2**64 + 3, 1, 1, 8)}, "INVALID_SHAPE", ["q.shape[0]", "18446744073709551619"]),
    ({"shape": (1, 2**63, 1, 8)}, "INVALID_SHAPE", ["q.shape[1]"]),
    ({"shape": (1, 1, 1, 8), "strides": (4, 4, 4, 2**64 + 4)}, "INVALID_STRIDE", ["q.strides[3]"]),
    ({"shape": (1, 1, 1, 8), "ptr": 2**64 + 4096}, "INVALID_ARGUMENT", ["data pointer", "18446744073709555712"]),
    ({"shape": (2**40, 2**40, 2**40, 8)}, "SIZE_OVERFLOW", ["beyond int64"]),
    ({"shape": (1.5, 1, 1, 8)}, "INVALID_SHAPE", ["q.shape[0]", "not an integer"]),
])
def test_foreign_array_numbers_refused(qkv, iface, status, words):
    _, k, v = qkv
    x = FakeCudaArray(**iface)
    refused(lambda: xattn.attention(x, k, v), status, *words)


# ---- the last line: the bound C functions themselves ------------------------------------------

def test_bound_functions_refuse_what_ctypes_would_wrap():
    ctx = xattn.Context("cpu")
    buf = ctypes.c_void_p()
    refused(lambda: lib.xattn_buffer_alloc(ctx._ptr, 2**64 + 3, ctypes.byref(buf)), "SIZE_OVERFLOW",
            "xattn_buffer_alloc", "argument 2", "18446744073709551619", f"0..{2**64 - 1}")
    assert not buf.value
    refused(lambda: lib.xattn_ctx_set_option(ctx._ptr, 2**32 + 2, 1), "INVALID_ARGUMENT",
            "xattn_ctx_set_option", "argument 2", f"{I32_MIN}..{I32_MAX}")
    refused(lambda: lib.xattn_ctx_set_option(ctx._ptr, 2, 2**64 + 3), "INVALID_ARGUMENT", "argument 3")
    refused(lambda: lib.xattn_ctx_set_option(ctx._ptr, 2, np.uint64(2**64 - 1)), "INVALID_ARGUMENT", "argument 3")
    assert ctx.get_option("memory_limit") == 0
    refused(lambda: lib.xattn_device_get_info(0, 2**32, None), "INVALID_ARGUMENT", "argument 2")
    refused(lambda: lib.xattn_f32_to_f16(1e39), "INVALID_ARGUMENT", "beyond float32")
    refused(lambda: lib.xattn_range_push(ctx._ptr, b"a\0b"), "INVALID_ARGUMENT", "NUL")
    # values at the bounds still go through
    assert lib.xattn_f32_to_f16(FLT_MAX) == 0x7C00  # f16's infinity: a real conversion, not a refusal
    assert lib.xattn_status_name(I32_MIN)
    ctx.close()


# ---- q8_0 helpers: float32 values in, bytes in ------------------------------------------------

def test_quantize_q8_0_refuses_values_float32_cannot_hold():
    x = np.ones((2, 32))
    x[1, 5] = 1e39
    refused(lambda: xattn.quantize_q8_0(x), "INVALID_ARGUMENT", "x[1, 5]: 1e+39", "beyond float32")
    x[1, 5] = FLT_MAX  # the bound is a float32
    xattn.quantize_q8_0(x)


def test_dequantize_q8_0_refuses_values_beyond_a_byte():
    blocks = xattn.quantize_q8_0(np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32))
    wide = blocks.astype(np.int64)
    assert np.array_equal(xattn.dequantize_q8_0(wide), xattn.dequantize_q8_0(blocks))  # bytes in int64: fine
    wide[0, 3] = 256 + int(blocks[0, 3])  # astype(uint8) would read it as blocks[0, 3]
    refused(lambda: xattn.dequantize_q8_0(wide), "INVALID_ARGUMENT", "blocks[0, 3]", "0..255")
    wide[0, 3] = -1
    refused(lambda: xattn.dequantize_q8_0(wide), "INVALID_ARGUMENT", "blocks[0, 3]: -1")
    refused(lambda: xattn.dequantize_q8_0(blocks.astype(np.float32)), "INVALID_DTYPE", "uint8")
