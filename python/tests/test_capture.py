"""xattn.torch.capture on small modules of our own: every SDPA call is recorded
with its shapes, strides, dtypes, options and mask meaning, the model's results
are unchanged, and the cases file is what the C reader accepts."""

import json
import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install './python[torch]')")
import torch.nn.functional as F  # noqa: E402

import xattn.torch as xt  # noqa: E402
from xattn._cases import SCHEMA, read_document, validate  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode

    def forward(self, x, mask=None):
        b, s, _ = x.shape
        q = x.view(b, s, 4, 16).transpose(1, 2)  # BHSD view of BSHD memory
        if self.mode == "gqa":
            k = q[:, :2].contiguous()
            return F.scaled_dot_product_attention(q, k, k, enable_gqa=True, scale=0.3)
        if self.mode == "causal":
            return F.scaled_dot_product_attention(q, q, q, is_causal=True)
        return F.scaled_dot_product_attention(q, q, q, attn_mask=mask)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Block("gqa"), Block("causal"), Block("mask"), Block("mask")])

    def forward(self, x, mask):
        return [layer(x, mask) for layer in self.layers]


def inputs():
    x = torch.randn(3, 10, 64, generator=torch.Generator().manual_seed(0))
    lengths = [10, 4, 7]
    mask = torch.zeros(3, 1, 10, 10, dtype=torch.bool)
    for b, n in enumerate(lengths):
        mask[b, :, :, :n] = True
    return x, mask, lengths


def test_calls_recorded_and_results_unchanged():
    net = Net()
    x, mask, lengths = inputs()
    with torch.no_grad():
        want = net(x, mask)
    cap = xt.capture(net, x, mask)
    orig = F.scaled_dot_product_attention
    assert getattr(orig, "__wrapped__", None) is None  # restored after the run
    assert len(cap.calls) == 4 and cap.forward_ms > 0
    with torch.no_grad(), xt.capture(net, keep_tensors=True) as cap2:
        got = net(x, mask)
    for a, b in zip(want, got):
        assert torch.equal(a, b)  # the capture is transparent
    c0, c1, c2, c3 = cap2.calls
    assert [c.layer for c in cap2.calls] == ["layers.0", "layers.1", "layers.2", "layers.3"]
    assert c0.module == "layers.0"
    assert (c0.batch, c0.heads, c0.kv_heads, c0.sq, c0.sk, c0.head_dim) == (3, 4, 2, 10, 10, 16)
    assert c0.enable_gqa and c0.scale == 0.3 and c0.q.layout() == "bshd" and c0.k.layout() == "bhsd"
    assert c0.q.stride == (640, 16, 64, 1) and c0.dtype == "f32"
    assert c1.is_causal and c1.analysis.causal == "top-left"
    assert c2.mask == {"dtype": "bool", "shape": [3, 1, 10, 10]}
    assert c2.analysis.kind == "lengths" and c2.analysis.seqlens_k == lengths
    assert all(not math.isnan(c.time_ms) and c.time_ms >= 0 for c in cap2.calls)
    assert c2.mem.get("kind") in ("host-rss", None) or c2.mem == {}
    assert torch.equal(c3.tensors["out"], got[3]) and c3.tensors["mask"] is not None
    # cases: calls 2 and 3 are one case
    cases = cap2.cases()
    assert [len(g) for _, g in cases] == [1, 1, 2]


def test_cases_file(tmp_path):
    net = Net()
    x, mask, lengths = inputs()
    cap = xt.capture(net, x, mask)
    doc = cap.write_cases(tmp_path / "c.json", model="net")
    again = read_document(tmp_path / "c.json")
    assert again == json.loads(json.dumps(doc))
    assert doc["schema"] == SCHEMA and doc["calls"] == 4 and len(doc["cases"]) == 3
    gqa, causal, padded = doc["cases"]
    assert gqa["heads"] == 4 and gqa["kv_heads"] == 2 and gqa["scale"] == 0.3 and gqa["layout"] == "bshd"
    assert causal["causal"] == "top-left" and causal["scale"] == 0  # 0 = the default 1/sqrt(D)
    assert padded["count"] == 2 and padded["seqlens_k"] == lengths and padded["name"] == "layers.{2..3}"
    assert padded["info"]["calls"] == [2, 3] and padded["info"]["mask"]["dtype"] == "bool"
    assert validate(doc) == []
    bad = dict(doc, cases=[dict(gqa, kv_heads=3)])
    assert any("not a multiple" in p for p in validate(bad))
    from xattn._cases import write_document

    with pytest.raises(ValueError, match="unknown member"):
        write_document(dict(doc, cases=[dict(gqa, casual=True)]), tmp_path / "bad.json")
    # tensor data only when asked, and only from a capture that kept it
    assert "tensors" not in doc
    with pytest.raises(ValueError, match="keep_tensors"):
        cap.write_cases(tmp_path / "t.json", tensors=True)
    cap2 = xt.capture(net, x, mask, keep_tensors=True)
    doc2 = cap2.write_cases(tmp_path / "t.json", tensors=True)
    import numpy as np

    assert doc2["tensors"] == "t.npz"
    with np.load(tmp_path / "t.npz") as z:
        want = {f"case{i}.{n}" for i in range(3) for n in ("q", "k", "v", "out")} | {"case2.mask"}
        assert set(z.files) == want
        assert z["case0.k"].shape == (3, 2, 10, 16) and z["case2.mask"].dtype == bool
        np.testing.assert_array_equal(z["case2.out"], cap2.calls[2].tensors["out"].numpy())


def test_kv_repeated_by_the_caller_is_seen_as_gqa():
    class Rep(torch.nn.Module):
        num_key_value_groups = 3

        def forward(self, q, k):
            k = k[:, :, None].expand(-1, -1, 3, -1, -1).reshape(q.shape[0], 6, -1, q.shape[-1])
            return F.scaled_dot_product_attention(q, k, k)

    m = Rep()
    q, k = torch.randn(1, 6, 5, 8), torch.randn(1, 2, 9, 8)
    cap = xt.capture(m, q, k)
    c = cap.calls[0]
    assert c.kv_repeated == 3 and c.kv_heads == 2 and c.heads == 6


def test_captures_do_not_nest_and_restore_on_error():
    net = Net()
    x, mask, _ = inputs()
    orig = F.scaled_dot_product_attention
    with xt.Capture(net):
        with pytest.raises(RuntimeError, match="already active"):
            with xt.Capture(net):
                pass
    assert F.scaled_dot_product_attention is orig
    with pytest.raises(ZeroDivisionError):
        with xt.Capture(net):
            1 / 0
    assert F.scaled_dot_product_attention is orig


def test_unsupported_calls_are_kept_with_a_reason(tmp_path):
    class Odd(torch.nn.Module):
        def forward(self, q):
            return F.scaled_dot_product_attention(q.double(), q.double(), q.double())

    cap = xt.capture(Odd(), torch.randn(1, 2, 4, 8))
    c = cap.calls[0]
    assert not c.supported and "dtypes" in c.reason
    from xattn._cases import cases_document

    d = cases_document(cap)
    assert d["cases"] == [] and d["not_replayable"][0]["calls"] == [0]
    with pytest.raises(ValueError, match="non-empty"):  # nothing to replay: no file
        cap.write_cases(tmp_path / "c.json")
