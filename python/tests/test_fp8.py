"""fp8 K/V caches in xattn.attention and xattn.reference: torch.float8_e4m3fn /
torch.float8_e5m2 tensors, or uint8 arrays of fp8 bytes with kv_dtype, and the
per-KV-head f32 scales k_scale / v_scale. The expected output is computed from
torch's own dequantization (k.float() * k_scale), in float64 and with torch's
SDPA. Skipped where torch (2.1 or later, with float8 dtypes) is absent."""

import numpy as np
import pytest

import xattn
from xattn._numerics import kernel_bound, rel_l2

ALGOS = ["naive", "flash", "splitkv"]
FORMATS = [("fp8e4m3", "float8_e4m3fn"), ("fp8e5m2", "float8_e5m2")]


@pytest.fixture(scope="module")
def torch(torch_mod):
    if not hasattr(torch_mod, "float8_e4m3fn") or not hasattr(torch_mod, "float8_e5m2"):
        pytest.skip("this torch has no float8 dtypes (torch 2.1 or later)")
    return torch_mod


def dense(q, k, v):
    """O [B, Sq, Hq, Dv] in float64 of bshd arrays (numpy, float64), non-causal, GQA."""
    b_, sq, hq, d = q.shape
    g = hq // k.shape[2]
    o = np.zeros((b_, sq, hq, v.shape[3]))
    for b in range(b_):
        for h in range(hq):
            s = q[b, :, h, :] @ k[b, :, h // g, :].T / np.sqrt(d)
            p = np.exp(s - s.max(axis=1, keepdims=True))
            o[b, :, h, :] = (p @ v[b, :, h // g, :]) / p.sum(axis=1, keepdims=True)
    return o


def agree(o, want):
    bound, _ = kernel_bound("f32", want)
    err = rel_l2(np.asarray(o, dtype=np.float64), want)
    assert err <= bound, f"rel L2 {err:.3e} > bound {bound:.3e}"


def fp8_bytes(torch, tdt, shape, gen):
    """Random fp8 values over the format's whole finite range (every exponent,
    subnormals, both signs, the largest magnitude): random bytes, NaN and
    infinity bytes replaced by the largest finite value."""
    raw = torch.randint(0, 256, shape, dtype=torch.uint8, generator=gen)
    x = raw.view(tdt)
    big = torch.tensor(torch.finfo(tdt).max).to(tdt).view(torch.uint8)
    raw[~torch.isfinite(x.float())] = big
    return raw.view(tdt)


def case(torch, tdt, hq=4, hkv=2, d=64, dv=32, sq=3, sk=40, seed=7):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(2, sq, hq, d, generator=gen)
    k = fp8_bytes(torch, tdt, (2, sk, hkv, d), gen)
    v = fp8_bytes(torch, tdt, (2, sk, hkv, dv), gen)
    # scales that bring the format's range to about 1 (the largest value is 448 or
    # 57344), a different one for each head, as a cache quantized per head has
    top = float(torch.finfo(tdt).max)
    ks = torch.tensor([0.5 / top, 2.0 / top][:hkv], dtype=torch.float32)
    vs = torch.tensor([3.0 / top, 0.25 / top][:hkv], dtype=torch.float32)
    return q, k, v, ks, vs


def dequant(x, scale):
    """torch's own dequantization: the fp8 value times the head's scale."""
    return x.float() * scale.view(1, 1, -1, 1)


@pytest.mark.parametrize("name,tname", FORMATS)
@pytest.mark.parametrize("algo", ALGOS)
def test_fp8_torch(torch, name, tname, algo):
    tdt = getattr(torch, tname)
    q, k, v, ks, vs = case(torch, tdt)
    kd, vd = dequant(k, ks), dequant(v, vs)
    # in float64 the fp8 value times its scale is exact, as in the library's reference
    want = dense(q.double().numpy(), (k.float().double() * ks.double().view(1, 1, -1, 1)).numpy(),
                 (v.float().double() * vs.double().view(1, 1, -1, 1)).numpy())
    out, rec = xattn.attention(q, k, v, k_scale=ks, v_scale=vs, algo=algo, backend="cpu")
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert rec["kv_dtype"] == name
    agree(out.numpy(), want)
    # torch's SDPA on the dequantized values (bhsd, the KV heads repeated for GQA)
    g = q.shape[2] // k.shape[2]
    sdpa = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), kd.repeat_interleave(g, 2).transpose(1, 2), vd.repeat_interleave(g, 2).transpose(1, 2)
    ).transpose(1, 2)
    agree(out.numpy(), sdpa.double().numpy())
    np.testing.assert_allclose(xattn.reference(q, k, v, k_scale=ks, v_scale=vs, backend="cpu"), want,
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,tname", FORMATS)
def test_fp8_uint8_bytes(torch, name, tname):
    """numpy has no fp8: the same bytes as uint8 arrays with kv_dtype give the same
    output, bit for bit, as the torch tensors."""
    tdt = getattr(torch, tname)
    q, k, v, ks, vs = case(torch, tdt, sq=1, sk=33)
    o_t, _ = xattn.attention(q, k, v, k_scale=ks, v_scale=vs, algo="flash", backend="cpu")
    kb, vb = k.view(torch.uint8).numpy(), v.view(torch.uint8).numpy()
    o_n, rec = xattn.attention(q.numpy(), kb, vb, kv_dtype=name, k_scale=ks.numpy(), v_scale=vs.numpy(),
                               algo="flash", backend="cpu")
    assert isinstance(o_n, np.ndarray) and rec["kv_dtype"] == name
    np.testing.assert_array_equal(o_n, o_t.numpy())
    # torch uint8 tensors with kv_dtype are the same bytes too
    o_u, _ = xattn.attention(q, k.view(torch.uint8), v.view(torch.uint8), kv_dtype=name, k_scale=ks,
                             v_scale=vs, algo="flash", backend="cpu")
    np.testing.assert_array_equal(o_u.numpy(), o_t.numpy())


def test_fp8_scales_optional(torch):
    """Without k_scale / v_scale the scale is 1 (values of a small range here)."""
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(1, 2, 2, 32, generator=gen)
    k = torch.randn(1, 16, 2, 32, generator=gen).to(torch.float8_e4m3fn)
    v = torch.randn(1, 16, 2, 32, generator=gen).to(torch.float8_e4m3fn)
    want = dense(q.double().numpy(), k.double().numpy(), v.double().numpy())
    out, _ = xattn.attention(q, k, v, backend="cpu")
    agree(out.numpy(), want)
    # a scale is applied: halving V's halves O
    half = torch.full((2,), 0.5)
    out2, _ = xattn.attention(q, k, v, v_scale=half, backend="cpu")
    agree(out2.numpy(), want * 0.5)


def test_fp8_bad(torch):
    q, k, v, ks, vs = case(torch, torch.float8_e4m3fn, sq=1, sk=8)
    with pytest.raises(xattn.XattnInputError, match="kv_dtype is 'fp8e5m2'"):
        xattn.attention(q, k, v, kv_dtype="fp8e5m2", backend="cpu")
    with pytest.raises(xattn.XattnInputError, match="k: dtype f32, expected uint8"):
        xattn.attention(q, k.float(), v, kv_dtype="fp8e4m3", backend="cpu")
    with pytest.raises(xattn.XattnInputError, match=r"k_scale: f32 \[3\], expected float32 \[Hkv\] \(2\)"):
        xattn.attention(q, k, v, k_scale=torch.ones(3), backend="cpu")
    with pytest.raises(xattn.XattnInputError, match="v_scale: torch.float64"):
        xattn.attention(q, k, v, v_scale=torch.ones(2, dtype=torch.float64), backend="cpu")
    with pytest.raises(xattn.XattnInputError, match="k_scale: given, but k is f32"):
        xattn.attention(q, k.float(), v.float(), k_scale=ks, backend="cpu")
    with pytest.raises(xattn.XattnInputError, match="q: dtype fp8e4m3"):
        xattn.attention(k[:, :1].repeat(1, 1, 2, 1), k, v, backend="cpu")
    with pytest.raises(xattn.XattnInputError, match="kv_dtype"):
        xattn.attention(q, k, v, kv_dtype="fp8", backend="cpu")
