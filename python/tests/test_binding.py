"""xattn.attention over numpy arrays: every option against xattn.reference (the
library's double-precision reference), records, contexts, and bad arguments."""

import json
import math
import threading

import numpy as np
import pytest

import xattn
from xattn._numerics import kernel_bound, rel_l2

from conftest import backend_available

ALGOS = ["naive", "flash", "splitkv"]


def qkv(rng, b=2, sq=12, sk=17, hq=4, hkv=2, d=32, dv=None, dtype=np.float32, layout="bshd"):
    dv = dv or d
    if layout == "bshd":
        shapes = (b, sq, hq, d), (b, sk, hkv, d), (b, sk, hkv, dv)
    else:
        shapes = (b, hq, sq, d), (b, hkv, sk, d), (b, hkv, sk, dv)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def agree(o, ref, dtype="f32", lse=None, lse_ref=None):
    bound, _ = kernel_bound(dtype, ref)
    err = rel_l2(np.asarray(o, dtype=np.float64), ref)
    assert err <= bound, f"rel L2 {err:.3e} > bound {bound:.3e}"
    if lse is not None:
        a, r = np.asarray(lse, dtype=np.float64), lse_ref
        assert np.array_equal(np.isneginf(a), np.isneginf(r))
        fin = np.isfinite(r)
        assert np.max(np.abs(a[fin] - r[fin]) / (1 + np.abs(r[fin])), initial=0) <= 1e-4


# ---- every option against the reference ------------------------------------------

OPTIONS = {
    "plain": {},
    "causal-top-left": {"causal": "top-left"},
    "causal-bottom-right": {"causal": "bottom-right"},
    "window": {"window": (5, 2)},
    "window-causal": {"window": (4, -1), "causal": "bottom-right"},
    "window-align-tl": {"window": (3, 3), "align": "top-left"},
    "softcap": {"softcap": 2.5},
    "scale": {"scale": 0.3},
    "alibi": {"alibi_slopes": [0.5, 0.25, 0.125, 0.0625]},
    "seqlens": {"seqlens_q": [12, 5], "seqlens_k": [9, 17]},
    "seqlens-causal": {"seqlens_q": [7, 12], "seqlens_k": [17, 3], "causal": "bottom-right"},
}


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("name", sorted(OPTIONS))
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_options_against_reference(rng, algo, name, layout):
    q, k, v = qkv(rng, layout=layout)
    kw = dict(OPTIONS[name], layout=layout)
    o, lse, rec = xattn.attention(q, k, v, algo=algo, return_lse=True, **kw)
    ref, lse_ref = xattn.reference(q, k, v, return_lse=True, **kw)
    assert o.shape == ref.shape == (q.shape[0], q.shape[1], q.shape[2], v.shape[3])
    assert lse.shape == lse_ref.shape
    agree(o, ref, "f32", lse, lse_ref)
    assert rec["algo_chosen"] == algo and rec["algo_requested"] == algo
    assert rec["backend"] == "cpu"


@pytest.mark.parametrize("dtype,name", [(np.float16, "f16"), (np.float32, "f32")])
def test_dtypes_and_mixed_kv(rng, dtype, name):
    q, k, v = qkv(rng, dtype=dtype, d=64)
    o, rec = xattn.attention(q, k, v, causal="bottom-right")
    assert o.dtype == dtype and rec["q_dtype"] == name
    agree(o, xattn.reference(q, k, v, causal="bottom-right"), name)
    # K/V in another dtype than Q
    k16, v16 = k.astype(np.float16), v.astype(np.float16)
    o, rec = xattn.attention(q, k16, v16)
    assert rec["kv_dtype"] == "f16" and rec["q_dtype"] == name
    agree(o, xattn.reference(q, k16, v16), name)


def test_head_dims(rng):
    for d, dv in [(1, 1), (7, 7), (80, 80), (256, 256), (48, 16)]:
        q, k, v = qkv(rng, d=d, dv=dv, sq=5, sk=9)
        o, _ = xattn.attention(q, k, v)
        assert o.shape[-1] == dv
        agree(o, xattn.reference(q, k, v))


@pytest.mark.parametrize("bias_shape", [(1, 1, 12, 17), (2, 1, 12, 17), (2, 4, 12, 17), (12, 17), (4, 12, 17)])
@pytest.mark.parametrize("bias_dtype", [np.float32, np.float16])
def test_bias(rng, bias_shape, bias_dtype):
    q, k, v = qkv(rng)
    bias = rng.standard_normal(bias_shape).astype(bias_dtype)
    bias[..., 3] = -np.inf  # a masked key
    o, _ = xattn.attention(q, k, v, bias=bias)
    agree(o, xattn.reference(q, k, v, bias=bias))


def test_bias_larger_than_the_scores(rng):
    # Sq' >= Sq and Sk' >= Sk: the top-left corner is used
    q, k, v = qkv(rng)
    bias = rng.standard_normal((1, 1, 20, 30)).astype(np.float32)
    o, _ = xattn.attention(q, k, v, bias=bias)
    agree(o, xattn.reference(q, k, v, bias=bias[..., :12, :17]))


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_packed_batches(rng, algo, layout):
    lq, lk = [5, 0, 9], [7, 4, 13]
    cq = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(lk)]).astype(np.int32)
    tq, tk = int(cq[-1]), int(ck[-1])
    shp = (lambda t, h, d: (t, h, d)) if layout == "bshd" else (lambda t, h, d: (h, t, d))
    q = rng.standard_normal(shp(tq, 4, 32)).astype(np.float32)
    k = rng.standard_normal(shp(tk, 2, 32)).astype(np.float32)
    v = rng.standard_normal(shp(tk, 2, 32)).astype(np.float32)
    kw = dict(cu_seqlens_q=cq, cu_seqlens_k=ck, causal="bottom-right", layout=layout)
    o, lse, rec = xattn.attention(q, k, v, algo=algo, return_lse=True, **kw)
    ref, lse_ref = xattn.reference(q, k, v, return_lse=True, **kw)
    assert o.shape == q.shape[:-1] + (32,) and lse.shape == (4, tq)
    agree(o, ref, "f32", lse, lse_ref)
    assert rec["varlen"] == 1
    # each packed sequence equals the same sequence run alone
    for b in range(3):
        if lq[b] == 0:
            continue
        sl = (slice(cq[b], cq[b + 1]),)
        sk_ = (slice(ck[b], ck[b + 1]),)
        if layout == "bhsd":
            sl, sk_ = (slice(None),) + sl, (slice(None),) + sk_
        alone = xattn.reference(q[sl][None], k[sk_][None], v[sk_][None], layout=layout, causal="bottom-right")[0]
        np.testing.assert_allclose(ref[sl], alone, rtol=0, atol=1e-12)


def test_padding_rows_and_empty(rng):
    q, k, v = qkv(rng)
    o, lse, _ = xattn.attention(q, k, v, seqlens_q=[3, 0], seqlens_k=[17, 17], return_lse=True)
    assert np.all(o[0, 3:] == 0) and np.all(o[1] == 0)
    assert np.all(np.isneginf(lse[0, :, 3:])) and np.all(np.isneginf(lse[1]))
    # Sq = 0 is a valid no-op
    q0 = np.zeros((2, 0, 4, 32), np.float32)
    o, rec = xattn.attention(q0, k, v)
    assert o.shape == (2, 0, 4, 32)
    assert rec["flops_dense"] == 0


def test_fully_masked_rows_are_zero_not_nan(rng):
    q, k, v = qkv(rng, sq=4, sk=6)
    bias = np.zeros((1, 1, 4, 6), np.float32)
    bias[..., 2, :] = -np.inf
    o, lse, _ = xattn.attention(q, k, v, bias=bias, return_lse=True)
    assert np.all(o[:, 2] == 0) and np.all(np.isneginf(lse[:, :, 2]))
    assert not np.isnan(o).any()


# ---- strides and zero copy -------------------------------------------------------------


def test_unusual_strides(rng):
    """Non-contiguous slices, transposes, Fortran order, broadcast (stride 0) K/V."""
    big = rng.standard_normal((2, 24, 4, 64)).astype(np.float32)
    q = big[:, ::2, :, 16:48]  # every other row, a slice of D
    assert not q.flags.c_contiguous
    kv = rng.standard_normal((2, 4, 17, 32)).astype(np.float32)
    k = kv.transpose(0, 2, 1, 3)[:, :, ::2]  # a BHSD buffer seen as BSHD, every other head
    v = np.asfortranarray(rng.standard_normal((2, 17, 2, 32)).astype(np.float32))
    o, _ = xattn.attention(q, k, v)
    agree(o, xattn.reference(np.ascontiguousarray(q), np.ascontiguousarray(k), np.ascontiguousarray(v)))
    # one K/V sequence broadcast over the batch (stride 0)
    k1 = np.broadcast_to(rng.standard_normal((1, 17, 2, 32)).astype(np.float32), (2, 17, 2, 32))
    o, _ = xattn.attention(q, k1, v)
    agree(o, xattn.reference(np.ascontiguousarray(q), np.ascontiguousarray(k1), np.ascontiguousarray(v)))


def test_out_is_the_callers_memory(rng):
    q, k, v = qkv(rng)
    out = np.full((2, 12, 4, 32), np.nan, np.float32)
    ptr = out.__array_interface__["data"][0]
    o, rec = xattn.attention(q, k, v, out=out)
    assert o is out and out.__array_interface__["data"][0] == ptr
    agree(out, xattn.reference(q, k, v))
    # an out with unusual strides: the result lands in the caller's strided memory
    base = np.full((2, 4, 12, 64), 7.0, np.float32)
    view = base.transpose(0, 2, 1, 3)[..., :32]
    o, _ = xattn.attention(q, k, v, out=view)
    assert o is view and np.shares_memory(view, base)
    agree(base[..., :32].transpose(0, 2, 1, 3), xattn.reference(q, k, v))
    assert np.all(base[..., 32:] == 7.0)  # the rest of the caller's buffer is untouched


def test_inputs_are_not_copied(rng):
    """Every byte the library allocates goes through the context's allocator; the
    caller's arrays are wrapped, not copied: beyond the call's own workspace, the
    allocator's peak grows by a few bytes of bookkeeping, not by the inputs' size."""
    q, k, v = qkv(rng, b=1, sq=256, sk=2048, hq=8, hkv=8, d=64)
    inputs = q.nbytes + k.nbytes + v.nbytes + q.nbytes  # q, k, v and the output
    for algo in ALGOS:
        with xattn.Context("cpu") as ctx:
            o, rec = xattn.attention(q, k, v, algo=algo, backend=ctx)
            extra = rec["mem_peak_bytes"] - rec["workspace_bytes"]
            assert 0 <= extra < 4096, (algo, rec["mem_peak_bytes"], rec["workspace_bytes"], inputs)
            assert ctx.mem_stats()["current_bytes"] < 4096  # the wrappers are gone after the call


def test_read_only_inputs(rng):
    q, k, v = qkv(rng)
    for a in (q, k, v):
        a.setflags(write=False)
    o, _ = xattn.attention(q, k, v)
    agree(o, xattn.reference(q, k, v))


# ---- records and contexts ---------------------------------------------------------------


def test_record_has_the_c_records_fields(rng):
    from xattn._capi import Record

    q, k, v = qkv(rng)
    _, rec = xattn.attention(q, k, v, seqlens_q=[12, 6], seqlens_k=[17, 10])
    assert set(rec) == {n for n, _ in Record._fields_} - {"struct_size"}
    b, sq, hq, d = q.shape
    sk, dv = k.shape[1], v.shape[3]
    assert rec["flops_dense"] == 2 * b * hq * sq * sk * (d + dv)
    assert math.isclose(rec["padding_waste"], 1 - (12 * 17 + 6 * 10) / (b * sq * sk), rel_tol=1e-12)
    assert rec["flops_useful"] == 2 * hq * (d + dv) * (12 * 17 + 6 * 10)
    assert rec["padded"] == 1 and rec["heads"] == 4 and rec["kv_heads"] == 2
    assert rec["device_ms"] > 0 and rec["num_phases"] == len(rec["phase_names"]) >= 1


def test_context_records_ranges_and_exports(rng, tmp_path):
    q, k, v = qkv(rng)
    with xattn.Context("cpu", threads=1, keep_records=True) as ctx:
        assert ctx.get_option("threads") == 1
        with ctx.range("prefill"):
            ctx.attention(q, k, v, algo="naive")
        ctx.attention(q, k, v, algo="flash")
        recs = ctx.records()
        assert [r["algo_chosen"] for r in recs] == ["naive", "flash"]
        assert recs[0]["range"] == "prefill" and recs[1]["range"] == ""
        assert recs[1]["seq"] == recs[0]["seq"] + 1
        ctx.export(tmp_path / "r.json", "json")
        ctx.export(tmp_path / "r.csv", "csv")
        ctx.export(tmp_path / "t.json", "trace")
        doc = json.loads((tmp_path / "r.json").read_text())
        assert len(doc["records"]) == 2
        assert len((tmp_path / "r.csv").read_text().strip().splitlines()) == 3
        assert "traceEvents" in json.loads((tmp_path / "t.json").read_text())
        ctx.reset_records()
        assert ctx.records() == []
        stats = ctx.mem_stats()
        assert stats["peak_bytes"] > 0 and stats["current_bytes"] < 4096
    with pytest.raises(xattn.XattnError, match="closed"):
        ctx.attention(q, k, v)
    ctx.close()  # idempotent


def test_default_context_drops_records(rng):
    q, k, v = qkv(rng)
    xattn.attention(q, k, v)
    _, rec = xattn.attention(q, k, v)
    assert rec["seq"] >= 1  # the context lives on between calls...
    from xattn._core import _defaults

    ctx = _defaults[("cpu", 0, None)]
    assert ctx.records() == []  # ...and keeps no records unless asked


def test_threads_share_a_context(rng):
    """Python threads on one context are serialized (the library would answer BUSY)."""
    q, k, v = qkv(rng, sq=64, sk=64)
    ref = xattn.reference(q, k, v)
    errors = []
    with xattn.Context("cpu") as ctx:

        def work():
            try:
                for _ in range(5):
                    o, _ = xattn.attention(q, k, v, backend=ctx)
                    agree(o, ref)
            except Exception as e:  # reported below
                errors.append(e)

        ts = [threading.Thread(target=work) for _ in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    assert not errors, errors


def test_devices_and_backends():
    be = xattn.backends()
    assert be["cpu"]["compiled"] and be["cpu"]["available"]
    devs = xattn.devices()
    cpu = [d for d in devs if d["backend"] == "cpu"]
    assert cpu and cpu[0]["index"] == 0 and cpu[0]["device_type"] == "cpu" and cpu[0]["compute_units"] >= 1
    for name, st in be.items():
        if not st["available"]:
            assert st["reason"], f"{name}: unavailable without a reason"
    assert xattn.version() == xattn.__version__


@pytest.mark.skipif(not backend_available("opencl"), reason="no OpenCL device here")
def test_opencl_zero_copy(rng):
    """OpenCL wraps host memory with CL_MEM_USE_HOST_PTR; the result must be in the
    caller's memory when the call returns."""
    q, k, v = qkv(rng, dtype=np.float16)
    out = np.full((2, 12, 4, 32), np.nan, np.float16)
    for algo in ALGOS:
        out[:] = np.nan
        o, lse, rec = xattn.attention(q, k, v, out=out, backend="opencl", algo=algo, return_lse=True,
                                      causal="bottom-right")
        assert o is out and rec["backend"] == "opencl"
        ref, lse_ref = xattn.reference(q, k, v, causal="bottom-right", return_lse=True)
        agree(out, ref, "f16", lse, lse_ref)


# ---- bad arguments --------------------------------------------------------------------


def bad(fn, status, match):
    with pytest.raises(xattn.XattnError) as e:
        fn()
    assert e.value.status_name == "XATTN_STATUS_" + status, e.value
    assert match in e.value.message, e.value.message
    assert str(e.value).startswith(e.value.status_name)
    return e.value


def test_bad_arguments(rng):
    q, k, v = qkv(rng)
    # the library's own checks, with its message naming the field
    e = bad(lambda: xattn.attention(q, k[:, :, :1].repeat(3, axis=2), v[:, :, :1].repeat(3, axis=2)),
            "INVALID_SHAPE", "3")
    assert isinstance(e, ValueError) and isinstance(e, xattn.XattnInputError)
    bad(lambda: xattn.attention(q, k, v, seqlens_k=[18, 3]), "INVALID_LENGTHS", "18")
    bad(lambda: xattn.attention(q[..., :16], k, v), "INVALID_SHAPE", "")
    bad(lambda: xattn.attention(q, k, v, softcap=-1), "INVALID_ARGUMENT", "softcap")
    bad(lambda: xattn.attention(q, k, v[..., :300].repeat(9, axis=3)), "INVALID_SHAPE", "")
    # the Python layer's
    bad(lambda: xattn.attention(q, k, v, causal=True), "INVALID_ARGUMENT", "ambiguous")
    bad(lambda: xattn.attention(q, k, v, causal="yes"), "INVALID_ARGUMENT", "causal")
    bad(lambda: xattn.attention(q, k, v, algo="fast"), "INVALID_ARGUMENT", "algo")
    bad(lambda: xattn.attention(q, k, v, layout="sbhd"), "INVALID_ARGUMENT", "layout")
    bad(lambda: xattn.attention(q, k, v, backend="tpu"), "INVALID_ARGUMENT", "backend")
    bad(lambda: xattn.attention(q[0], k, v), "INVALID_SHAPE", "q: 3-D")
    bad(lambda: xattn.attention(q.astype(np.float64), k, v), "INVALID_DTYPE", "q: dtype float64")
    bad(lambda: xattn.attention(q.astype(np.int32), k, v), "INVALID_DTYPE", "int32")
    bad(lambda: xattn.attention(q.tolist(), k, v), "INVALID_ARGUMENT", "q: a list is not an array")
    bad(lambda: xattn.attention(q[:, ::-1], k, v), "INVALID_STRIDE", "negative")
    bad(lambda: xattn.attention(q, k, v, out=np.empty((2, 12, 4, 31), np.float32)), "INVALID_SHAPE", "out")
    bad(lambda: xattn.attention(q, k, v, out=np.empty((2, 12, 4, 32), np.float16)), "INVALID_DTYPE", "out")
    bad(lambda: xattn.attention(q, k, v, out=q), "INVALID_ARGUMENT", "overlaps q")
    ro = np.empty((2, 12, 4, 32), np.float32)
    ro.setflags(write=False)
    bad(lambda: xattn.attention(q, k, v, out=ro), "INVALID_ARGUMENT", "read-only")
    bad(lambda: xattn.attention(q, k, v, seqlens_q=[1, 2, 3]), "INVALID_LENGTHS", "3 lengths for a batch of 2")
    bad(lambda: xattn.attention(q, k, v, seqlens_q=[[1, 2]]), "INVALID_LENGTHS", "1-D")
    bad(lambda: xattn.attention(q, k, v, seqlens_q=[1.5, 2]), "INVALID_LENGTHS", "integers")
    bad(lambda: xattn.attention(q, k, v, cu_seqlens_q=[0, 12]), "INVALID_LENGTHS", "both")
    bad(lambda: xattn.attention(q, k, v, bias=np.ones((12, 17), bool)), "INVALID_DTYPE", "boolean mask")
    bad(lambda: xattn.attention(q, k, v, bias=np.ones(17, np.float32)), "INVALID_SHAPE", "bias: 1-D")
    bad(lambda: xattn.attention(q, k, v, alibi_slopes=[1.0, 2.0]), "INVALID_SHAPE", "2 slopes for 4")
    bad(lambda: xattn.attention(q, k, v, scale=float("nan")), "INVALID_ARGUMENT", "scale")
    bad(lambda: xattn.attention(q, k, v, window=3), "INVALID_ARGUMENT", "window")
    bad(lambda: xattn.attention(q, k, v, align="middle"), "INVALID_ARGUMENT", "align")
    bad(lambda: xattn.attention(q, k, v, causal="top-left", align="bottom-right"), "INVALID_ARGUMENT",
        "contradicts")
    bad(lambda: xattn.attention(q, k, v, num_splits=-1), "INVALID_ARGUMENT", "num_splits")
    bad(lambda: xattn.Context("cpu", 5), "DEVICE_NOT_FOUND", "")
    bad(lambda: xattn.Context("cpu", -1), "INVALID_ARGUMENT", "device")
    bad(lambda: xattn.Context("cpu").set_option("threads", -3), "INVALID_ARGUMENT", "")
    bad(lambda: xattn.Context("cpu").set_option("colour", 1), "INVALID_ARGUMENT", "option")
    bad(lambda: xattn.Context("cpu", stream=1), "INVALID_ARGUMENT", "stream")
    # after all these, the default context still works
    o, _ = xattn.attention(q, k, v)
    agree(o, xattn.reference(q, k, v))


def test_cuda_unavailable_is_reported():
    if backend_available("cuda"):
        pytest.skip("a CUDA device is present")
    bad(lambda: xattn.Context("cuda"), "BACKEND_UNAVAILABLE" if xattn.backends()["cuda"]["compiled"]
        else "BACKEND_UNAVAILABLE", "")
