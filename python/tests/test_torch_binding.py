"""xattn.attention on torch tensors: against PyTorch's SDPA and the reference, in
f32, f16 and bf16, with PyTorch's own layouts and views, out= as the caller's
memory; CUDA tensors where a GPU is present."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install './python[torch]')")
import torch.nn.functional as F  # noqa: E402

import xattn  # noqa: E402
from xattn._numerics import compare_outputs, kernel_bound, rel_l2  # noqa: E402

TD = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def bhsd(b, h, s, d, dtype="f32", seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, h, s, d, generator=g).to(device=device, dtype=TD[dtype])


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("algo", ["naive", "flash", "splitkv"])
@pytest.mark.parametrize("variant", ["plain", "causal", "gqa", "bias", "scale", "bool-mask-as-bias"])
def test_against_sdpa(dtype, algo, variant):
    q, k, v = bhsd(2, 6, 20, 64, dtype, 1), bhsd(2, 6, 20, 64, dtype, 2), bhsd(2, 6, 20, 64, dtype, 3)
    sdpa_kw, x_kw = {}, {"layout": "bhsd", "algo": algo}
    if variant == "causal":
        sdpa_kw["is_causal"] = True
        x_kw["causal"] = "top-left"
    elif variant == "gqa":
        k, v = k[:, :2], v[:, :2]
        sdpa_kw["enable_gqa"] = True
    elif variant == "bias":
        bias = torch.randn(1, 6, 20, 20, generator=torch.Generator().manual_seed(4))
        sdpa_kw["attn_mask"] = bias.to(TD[dtype])
        x_kw["bias"] = bias if dtype == "f32" else bias.to(torch.float16)
        if dtype != "f32":  # both sides see the same rounded bias
            sdpa_kw["attn_mask"] = bias.to(torch.float16).to(TD[dtype])
    elif variant == "scale":
        sdpa_kw["scale"] = x_kw["scale"] = 0.05
    elif variant == "bool-mask-as-bias":
        m = torch.rand(2, 1, 20, 20, generator=torch.Generator().manual_seed(5)) > 0.3
        m[..., 0] = True  # no fully masked row (SDPA gives NaN there, xattn 0)
        sdpa_kw["attn_mask"] = m
        x_kw["bias"] = torch.zeros(m.shape).masked_fill(~m, float("-inf"))
    want = F.scaled_dot_product_attention(q, k, v, **sdpa_kw)
    o, rec = xattn.attention(q, k, v, **x_kw)
    assert isinstance(o, torch.Tensor) and o.dtype == q.dtype and o.shape == want.shape
    ref_kw = {key: val for key, val in x_kw.items() if key != "algo"}
    ref = xattn.reference(q, k, v, **ref_kw)
    r = compare_outputs(o, want, ref, dtype)
    assert r["pass"], r
    assert rec["q_dtype"] == dtype and rec["heads"] == 6 and rec["kv_heads"] == (2 if variant == "gqa" else 6)


def test_pytorch_layout_views_and_slices():
    """BHSD views of a BSHD tensor (as models make them), non-contiguous slices."""
    x = torch.randn(2, 24, 3, 8, 64)  # [B, S, (q, k, v), H, D], one fused projection
    q, k, v = (x[:, :, i].transpose(1, 2) for i in range(3))  # [B, H, S, D] views, not contiguous
    assert not q.is_contiguous()
    o, _ = xattn.attention(q, k, v, layout="bhsd", causal="top-left")
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert rel_l2(o.double().numpy(), want.double().numpy()) < 2e-5
    # the same memory as BSHD without any view
    o2, _ = xattn.attention(x[:, :, 0], x[:, :, 1], x[:, :, 2], layout="bshd", causal="top-left")
    assert torch.equal(o2.transpose(1, 2), o)
    # every other head and a slice of the sequence
    qs, ks, vs = q[:, ::2, 4:], k[:, ::2], v[:, ::2]
    o3, _ = xattn.attention(qs, ks, vs, layout="bhsd")
    want3 = F.scaled_dot_product_attention(qs, ks, vs)
    assert rel_l2(o3.double().numpy(), want3.double().numpy()) < 2e-5


def test_out_tensor_is_the_callers_memory():
    q, k, v = bhsd(1, 4, 16, 32, seed=1), bhsd(1, 4, 16, 32, seed=2), bhsd(1, 4, 16, 32, seed=3)
    out = torch.full((1, 4, 16, 32), float("nan"))
    ptr = out.data_ptr()
    o, _ = xattn.attention(q, k, v, layout="bhsd", out=out)
    assert o is out and out.data_ptr() == ptr
    assert rel_l2(out.double().numpy(), F.scaled_dot_product_attention(q, k, v).double().numpy()) < 2e-5
    # a strided out: the transposed view of a BSHD buffer
    buf = torch.zeros(1, 16, 4, 32)
    o, _ = xattn.attention(q, k, v, layout="bhsd", out=buf.transpose(1, 2))
    assert o.data_ptr() == buf.data_ptr()
    assert torch.allclose(buf.transpose(1, 2), out, atol=1e-6)


def test_bf16_packed_and_lse():
    lq = [3, 9]
    cu = np.array([0, 3, 12], np.int32)
    q = torch.randn(12, 4, 64).to(torch.bfloat16)
    k = torch.randn(12, 2, 64).to(torch.bfloat16)
    v = torch.randn(12, 2, 64).to(torch.bfloat16)
    o, lse, rec = xattn.attention(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=torch.tensor(cu), causal="bottom-right",
                                  return_lse=True)
    assert o.dtype == torch.bfloat16 and lse.dtype == torch.float32 and lse.shape == (4, 12)
    ref, lse_ref = xattn.reference(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, causal="bottom-right",
                                   return_lse=True)
    bound, _ = kernel_bound("bf16", ref)
    assert rel_l2(o.double().numpy(), ref) <= bound
    assert np.max(np.abs(lse.numpy() - lse_ref) / (1 + np.abs(lse_ref))) < 1e-4
    for b in range(2):  # each sequence against SDPA alone (bottom-right = top-left when Sq = Sk)
        s = slice(cu[b], cu[b + 1])
        want = F.scaled_dot_product_attention(q[s].transpose(0, 1)[None], k[s].transpose(0, 1)[None],
                                              v[s].transpose(0, 1)[None], is_causal=True, enable_gqa=True)
        got = o[s].transpose(0, 1)[None]
        assert rel_l2(got.double().numpy(), want.double().numpy()) <= 2 * bound
    assert rec["varlen"] == 1 and lq


def test_tensor_errors():
    q = torch.randn(1, 4, 8, 32)
    with pytest.raises(xattn.XattnError, match="INVALID_DTYPE"):
        xattn.attention(q.double(), q.double(), q.double(), layout="bhsd")
    with pytest.raises(xattn.XattnError, match="dense, strided"):
        xattn.attention(q.to_sparse(), q, q, layout="bhsd")
    with pytest.raises(xattn.XattnError, match="overlaps q"):
        xattn.attention(q, q, q, layout="bhsd", out=q)
    with pytest.raises(xattn.XattnError, match="out: dtype bf16, expected q's f32"):
        xattn.attention(q, q, q, layout="bhsd", out=torch.empty(1, 4, 8, 32, dtype=torch.bfloat16))
    with pytest.raises(xattn.XattnError, match="q: a list is not an array"):
        xattn.attention([q], q, q, layout="bhsd")


def test_requires_grad_inputs_are_refused_in_grad_mode_and_read_in_place_without():
    q = torch.randn(1, 2, 8, 16, requires_grad=True)
    with pytest.raises(xattn.XattnInputError, match="no backward pass"):  # no silent graph loss
        xattn.attention(q, q, q, layout="bhsd")
    with torch.no_grad():
        o, _ = xattn.attention(q, q, q, layout="bhsd")
    assert not o.requires_grad  # xattn computes forward only (no autograd)
    assert rel_l2(o.double().numpy(), F.scaled_dot_product_attention(q, q, q).detach().double().numpy()) < 2e-5


cuda_ok = torch.cuda.is_available() and xattn.backends()["cuda"]["available"]


@pytest.mark.skipif(not cuda_ok, reason="no CUDA device (or the library has no CUDA backend)")
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_cuda_tensors(dtype):
    dev = "cuda"
    q, k, v = bhsd(2, 8, 64, 64, dtype, 1, dev), bhsd(2, 2, 64, 64, dtype, 2, dev), bhsd(2, 2, 64, 64, dtype, 3, dev)
    out = torch.empty_like(q)
    o, rec = xattn.attention(q, k, v, layout="bhsd", causal="top-left", out=out)
    torch.cuda.synchronize()
    assert o is out and rec["backend"] == "cuda"
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    ref = xattn.reference(q, k, v, layout="bhsd", causal="top-left")
    assert compare_outputs(o, want, ref, dtype)["pass"]
    with pytest.raises(xattn.XattnError):
        xattn.attention(q, k, v, layout="bhsd", backend="cpu")


@pytest.mark.skipif(not cuda_ok, reason="no CUDA device (or the library has no CUDA backend)")
def test_cuda_copy_staging_for_host_tensors():
    q = bhsd(1, 4, 32, 64)
    with xattn.Context("cuda") as ctx:
        with pytest.raises(xattn.XattnError, match="copy=True"):
            xattn.attention(q, q, q, layout="bhsd", backend=ctx)
        o, _ = xattn.attention(q, q, q, layout="bhsd", backend=ctx, copy=True)
    assert rel_l2(o.double().numpy(), F.scaled_dot_product_attention(q, q, q).double().numpy()) < 2e-5
