"""xattn.torch.scaled_dot_product_attention: PyTorch's SDPA semantics on xattn.

Each configuration runs the drop-in and F.scaled_dot_product_attention on the same
tensors and checks both against SDPA in float64 (PyTorch's math on the upcast
inputs) with the harness's bounds (xattn._numerics); on the CPU and OpenCL
backends, in f32, f16 and bf16. Plus SDPA's errors, the custom op under
torch.compile(fullgraph=True), and what a fully masked row gives on each side.
"""

import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install './python[torch]')")
import torch.nn.functional as F  # noqa: E402

import xattn  # noqa: E402
import xattn.torch as xt  # noqa: E402
from xattn._numerics import compare_outputs  # noqa: E402

TD = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def _backends():
    out = ["cpu"]
    if xattn.backends()["opencl"]["available"]:
        out.append("opencl")
    return out


def randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _pad_mask(b, sk, lens):
    m = torch.zeros(b, 1, 1, sk, dtype=torch.bool)
    for i, n in enumerate(lens):
        m[i, ..., :n] = True
    return m


def _window(sq, sk, w):
    i = torch.arange(sq)[:, None]
    j = torch.arange(sk)[None, :]
    return (j <= i) & (j >= i - w)


# name -> (q shape, k shape, v shape, sdpa kwargs builder(dtype) -> dict)
def _configs():
    c = {}

    def add(name, qs, ks, vs, kw=lambda dt: {}):
        c[name] = (qs, ks, vs, kw)

    add("plain", (2, 4, 16, 32), (2, 4, 16, 32), (2, 4, 16, 32))
    add("causal", (2, 4, 16, 32), (2, 4, 16, 32), (2, 4, 16, 32), lambda dt: {"is_causal": True})
    add("causal-sq<sk", (2, 4, 5, 32), (2, 4, 12, 32), (2, 4, 12, 32), lambda dt: {"is_causal": True})
    add("causal-sq>sk", (2, 4, 12, 32), (2, 4, 5, 32), (2, 4, 5, 32), lambda dt: {"is_causal": True})
    add("gqa", (2, 8, 10, 32), (2, 2, 10, 32), (2, 2, 10, 32), lambda dt: {"enable_gqa": True})
    add("gqa-causal-sq<sk", (1, 6, 4, 64), (1, 2, 9, 64), (1, 2, 9, 64),
        lambda dt: {"enable_gqa": True, "is_causal": True})
    add("mqa-broadcast", (2, 4, 8, 32), (2, 1, 8, 32), (2, 1, 8, 32))
    add("bool-full", (2, 3, 9, 32), (2, 3, 11, 32), (2, 3, 11, 32),
        lambda dt: {"attn_mask": _keep_rows(randn(2, 3, 9, 11, seed=7) > 0)})
    add("bool-2d", (2, 3, 9, 32), (2, 3, 11, 32), (2, 3, 11, 32),
        lambda dt: {"attn_mask": _keep_rows(randn(9, 11, seed=8) > 0)})
    add("bool-3d-heads", (2, 3, 9, 32), (2, 3, 11, 32), (2, 3, 11, 32),
        lambda dt: {"attn_mask": _keep_rows(randn(3, 9, 11, seed=9) > 0)})
    add("bool-key-padding", (3, 4, 12, 32), (3, 4, 12, 32), (3, 4, 12, 32),
        lambda dt: {"attn_mask": _pad_mask(3, 12, [12, 7, 3])})
    add("bool-padding-causal", (2, 4, 12, 32), (2, 4, 12, 32), (2, 4, 12, 32),
        lambda dt: {"attn_mask": _pad_mask(2, 12, [12, 8]) & torch.ones(12, 12, dtype=torch.bool).tril()})
    add("bool-sliding-window", (1, 4, 20, 32), (1, 4, 20, 32), (1, 4, 20, 32),
        lambda dt: {"attn_mask": _window(20, 20, 5)})
    add("float-full", (2, 3, 9, 32), (2, 3, 11, 32), (2, 3, 11, 32),
        lambda dt: {"attn_mask": randn(2, 3, 9, 11, seed=10).to(TD[dt])})
    add("float-broadcast-1-1", (2, 3, 9, 32), (2, 3, 11, 32), (2, 3, 11, 32),
        lambda dt: {"attn_mask": randn(1, 1, 9, 11, seed=11).to(TD[dt])})
    add("float-padding-finfo-min", (2, 4, 10, 32), (2, 4, 10, 32), (2, 4, 10, 32),
        lambda dt: {"attn_mask": torch.zeros(2, 1, 1, 10, dtype=TD[dt]).masked_fill(
            ~_pad_mask(2, 10, [10, 4]), torch.finfo(TD[dt]).min)})
    add("float-alibi-3d", (2, 4, 10, 32), (2, 4, 10, 32), (2, 4, 10, 32),
        lambda dt: {"attn_mask": (-0.25 * torch.arange(1, 5)[:, None, None]
                                  * (torch.arange(10)[None, :] - torch.arange(10)[:, None]).abs()).to(TD[dt])})
    add("scale", (2, 4, 16, 32), (2, 4, 16, 32), (2, 4, 16, 32), lambda dt: {"scale": 0.3})
    add("scale-causal-gqa", (2, 8, 7, 64), (2, 4, 7, 64), (2, 4, 7, 64),
        lambda dt: {"scale": 0.07, "is_causal": True, "enable_gqa": True})
    add("3d-inputs", (4, 9, 32), (4, 12, 32), (4, 12, 32), lambda dt: {"is_causal": True})
    add("5d-inputs-mask", (2, 3, 4, 6, 16), (2, 3, 4, 8, 16), (2, 3, 4, 8, 16),
        lambda dt: {"attn_mask": _keep_rows(randn(3, 1, 6, 8, seed=12) > 0)})
    add("batch-broadcast-kv", (3, 4, 6, 32), (1, 4, 8, 32), (1, 4, 8, 32))
    add("dv-differs", (2, 4, 8, 32), (2, 4, 10, 32), (2, 4, 10, 16), lambda dt: {"is_causal": True})
    add("decode-padding", (3, 4, 1, 64), (3, 4, 17, 64), (3, 4, 17, 64),
        lambda dt: {"attn_mask": _pad_mask(3, 17, [17, 9, 1])})
    return c


def _keep_rows(m):
    """A random boolean mask with every row keeping key 0 (no fully masked row)."""
    m = m.clone()
    m[..., 0] = True
    return m


CONFIGS = _configs()


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_matches_sdpa(name, dtype, backend):
    qs, ks, vs, kw = CONFIGS[name]
    q, k, v = (randn(*s, seed=i).to(TD[dtype]) for i, s in enumerate((qs, ks, vs), 1))
    args = kw(dtype)
    want = F.scaled_dot_product_attention(q, k, v, **args)
    o, rec = xt.scaled_dot_product_attention(q, k, v, **args, backend=backend, return_record=True)
    assert o.shape == want.shape and o.dtype == q.dtype and o.device == q.device
    a64 = {key: (val.double() if isinstance(val, torch.Tensor) and val.dtype != torch.bool else val)
           for key, val in args.items()}
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), **a64)
    r = compare_outputs(o, want, ref, dtype)
    assert r["pass"], r
    assert rec["backend"] == backend
    # what the mask became: lengths (padding skipped), causal, window, or a bias
    if name in ("bool-key-padding", "decode-padding", "float-padding-finfo-min", "bool-padding-causal"):
        assert rec["padded"] and not rec["has_bias"], rec
    if name == "bool-padding-causal":
        assert rec["causal"] and rec["align"] == "top-left"
    if name == "bool-sliding-window":
        assert rec["causal"] and rec["window_left"] == 5 and not rec["has_bias"]
    if name.startswith(("bool-full", "bool-2d", "bool-3d", "float-full", "float-broadcast", "float-alibi")):
        assert rec["has_bias"]
    if name.startswith("gqa") or name == "scale-causal-gqa":
        assert rec["kv_heads"] < rec["heads"]  # the K/V heads as given, no copy
    if name.startswith("causal"):
        assert rec["causal"] and rec["align"] == "top-left"


def test_many_configurations():
    assert len(CONFIGS) >= 20


def test_views_are_not_copied():
    """A [B, S, H, D] projection seen as [B, H, S, D] (what models pass) runs in place."""
    x = randn(2, 10, 3, 4, 32, seed=3)
    q, k, v = (x[:, :, i].transpose(1, 2) for i in range(3))
    o, rec = xt.scaled_dot_product_attention(q, k, v, is_causal=True, return_record=True)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert compare_outputs(o, want, F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                                   is_causal=True), "f32")["pass"]


def test_fully_masked_row_each_side():
    """xattn's documented semantics: a row with no key gives 0. PyTorch: 0 or NaN for
    boolean / -inf masks (kernel-dependent); a finfo.min mask leaves every key with the
    same finite score, and both sides give the mean of V."""
    q, k, v = randn(1, 2, 4, 16, seed=1), randn(1, 2, 6, 16, seed=2), randn(1, 2, 6, 16, seed=3)
    m = torch.ones(1, 1, 4, 6, dtype=torch.bool)
    m[..., 2, :] = False  # row 2 sees nothing
    o = xt.scaled_dot_product_attention(q, k, v, attn_mask=m)
    assert torch.equal(o[:, :, 2], torch.zeros_like(o[:, :, 2]))
    s = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    row = s[:, :, 2]
    assert bool(torch.all(row == 0)) or bool(torch.all(torch.isnan(row)))
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        rm = F.scaled_dot_product_attention(q, k, v, attn_mask=m)[:, :, 2]
    assert bool(torch.all(rm == 0)) or bool(torch.all(torch.isnan(rm)))
    fm = torch.zeros(m.shape).masked_fill(~m, torch.finfo(torch.float32).min)
    sf = F.scaled_dot_product_attention(q, k, v, attn_mask=fm)[:, :, 2]
    assert torch.allclose(sf, v.mean(dim=2), atol=1e-5)  # SDPA: uniform weights over the "masked" keys
    of = xt.scaled_dot_product_attention(q, k, v, attn_mask=fm)[:, :, 2]
    assert torch.allclose(of, sf, atol=1e-5)  # xattn adds the finite bias as given: the same mean
    # the other rows agree
    keep = torch.tensor([0, 1, 3])
    assert torch.allclose(o[:, :, keep], s[:, :, keep], atol=1e-5)


# ---- SDPA's errors, and what xattn refuses ------------------------------------------


def _qkv(hq=4, hk=4, sq=6, sk=6, d=16, dtype=torch.float32):
    return randn(2, hq, sq, d, seed=1).to(dtype), randn(2, hk, sk, d, seed=2).to(dtype), \
        randn(2, hk, sk, d, seed=3).to(dtype)


@pytest.mark.parametrize("case", ["mask+causal", "gqa-without-flag", "gqa-not-divisible", "dtypes-differ",
                                  "mask-dtype", "mask-shape", "d-mismatch", "dropout"])
def test_errors_as_sdpa(case):
    q, k, v = _qkv()
    kw = {}
    if case == "mask+causal":
        kw = {"attn_mask": torch.ones(6, 6, dtype=torch.bool), "is_causal": True}
    elif case == "gqa-without-flag":
        q, k, v = _qkv(hq=4, hk=2)
    elif case == "gqa-not-divisible":
        q, k, v = _qkv(hq=4, hk=3)
        kw = {"enable_gqa": True}
    elif case == "dtypes-differ":
        k = k.half()
    elif case == "mask-dtype":
        kw = {"attn_mask": torch.zeros(6, 6, dtype=torch.float16)}
    elif case == "mask-shape":
        kw = {"attn_mask": torch.zeros(3, 6, dtype=torch.bool)}
    elif case == "d-mismatch":
        k = randn(2, 4, 6, 8, seed=2)
    elif case == "dropout":
        kw = {"dropout_p": 0.1}
    if case != "dropout":
        with pytest.raises(RuntimeError):
            F.scaled_dot_product_attention(q, k, v, **kw)
    with pytest.raises(xattn.XattnInputError) as e:
        xt.scaled_dot_product_attention(q, k, v, **kw)
    if case == "dropout":
        assert "dropout" in str(e.value)
    if case == "gqa-without-flag":
        assert "enable_gqa" in str(e.value)


def test_requires_grad_refused_but_not_under_no_grad():
    q, k, v = _qkv()
    q.requires_grad_(True)
    with pytest.raises(xattn.XattnInputError, match="no backward pass.*no_grad"):
        xt.scaled_dot_product_attention(q, k, v)
    with pytest.raises(xattn.XattnInputError, match="no backward pass"):
        xattn.attention(q, k, v, layout="bhsd")
    with torch.no_grad():
        o = xt.scaled_dot_product_attention(q, k, v)
    with torch.inference_mode():
        o2 = xt.scaled_dot_product_attention(q, k, v)
    o3 = xt.scaled_dot_product_attention(q.detach(), k, v)
    assert torch.equal(o, o2) and torch.equal(o, o3) and not o.requires_grad


def test_cuda_refused_clearly_without_the_backend():
    q, k, v = _qkv()
    if xattn.backends()["cuda"]["available"]:
        pytest.skip("a CUDA device is present")
    with pytest.raises(xattn.XattnError):
        xt.scaled_dot_product_attention(q, k, v, backend="cuda")
    with pytest.raises(xattn.XattnInputError, match="backend"):
        xt.scaled_dot_product_attention(q, k, v, backend="tpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_cuda_tensors():  # pragma: no cover - needs a GPU
    q, k, v = (t.cuda() for t in _qkv())
    if not xattn.backends()["cuda"]["available"]:
        with pytest.raises(xattn.XattnInputError, match="CUDA backend is not available"):
            xt.scaled_dot_product_attention(q, k, v)
        return
    o = xt.scaled_dot_product_attention(q, k, v, is_causal=True)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert o.is_cuda and torch.allclose(o, want, atol=1e-5)


# ---- the custom op and torch.compile --------------------------------------------------


def test_custom_op_schema_and_fake():
    q, k, v = _qkv(hq=4, hk=2)
    m = torch.ones(2, 1, 6, 6, dtype=torch.bool).tril()
    torch.library.opcheck(torch.ops.xattn.sdpa.default,
                          (q, k, v, m, False, None, True, 0.0, None, "cpu", 0, "auto", ""),
                          test_utils=("test_schema", "test_faketensor"))


def test_under_torch_compile_fullgraph():
    torch._dynamo.reset()

    def block(q, k, v, m):
        x = xt.scaled_dot_product_attention(q * 1.5, k, v, attn_mask=m, enable_gqa=True)
        return torch.tanh(x) + 1

    q, k, v = _qkv(hq=4, hk=2, sq=5, sk=7)
    m = torch.ones(2, 1, 5, 7, dtype=torch.bool)
    m[1, ..., 4:] = False
    compiled = torch.compile(block, fullgraph=True, backend="eager")
    got = compiled(q, k, v, m)
    want = torch.tanh(F.scaled_dot_product_attention(q * 1.5, k, v, attn_mask=m, enable_gqa=True)) + 1
    assert torch.allclose(got, want, atol=1e-5)


def test_under_torch_compile_inductor():
    """The default backend (inductor): the op stays opaque, the rest is compiled."""
    torch._dynamo.reset()
    q, k, v = _qkv(sq=4, sk=4, d=8)
    f = torch.compile(lambda a, b, c: xt.scaled_dot_product_attention(a, b, c, is_causal=True).sum(-1),
                      fullgraph=True)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True).sum(-1)
    assert torch.allclose(f(q, k, v), want, atol=1e-5)
    assert math.isfinite(float(f(q, k, v).sum()))
