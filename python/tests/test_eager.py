"""Attention written by hand (docs/python.md, "Attention written by hand"): transformers'
eager attention and a module's own softmax(q @ k^T * s + m) @ v are captured as the same
calls as with SDPA, replayed, timed in the passes, and listed when they cannot be mapped;
and profile() inside a caller's torch.profiler. Nothing here asserts a timing."""

import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install './python[torch]')")

import torch.nn.functional as F  # noqa: E402

import xattn.torch as xt  # noqa: E402
from xattn.torch import _models  # noqa: E402


class Hand(torch.nn.Module):
    """One attention layer; how= "sdpa", "bool" (masked_fill), "add" (an additive
    mask, scale after the product), "softcap" (tanh between: not mappable)."""

    def __init__(self, how, d=32, h=4, kv=2):
        super().__init__()
        self.how, self.h, self.kv, self.hd = how, h, kv, d // h
        self.num_key_value_groups = h // kv
        self.q, self.k, self.v = (torch.nn.Linear(d, h * self.hd), torch.nn.Linear(d, kv * self.hd),
                                  torch.nn.Linear(d, kv * self.hd))
        self.o = torch.nn.Linear(d, d)

    def forward(self, x, mask):
        b, n, d = x.shape
        q = self.q(x).view(b, n, self.h, self.hd).transpose(1, 2)
        k = self.k(x).view(b, n, self.kv, self.hd).transpose(1, 2)
        v = self.v(x).view(b, n, self.kv, self.hd).transpose(1, 2)
        g = self.num_key_value_groups  # repeat_kv, as transformers does it
        k = k[:, :, None].expand(b, self.kv, g, n, self.hd).reshape(b, self.h, n, self.hd)
        v = v[:, :, None].expand(b, self.kv, g, n, self.hd).reshape(b, self.h, n, self.hd)
        if self.how == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        elif self.how == "bool":
            a = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
            y = torch.softmax(a.masked_fill(~mask, float("-inf")), dim=-1) @ v
        elif self.how == "add":
            add = torch.zeros(mask.shape).masked_fill(~mask, torch.finfo(torch.float32).min)
            a = torch.matmul(q, k.transpose(2, 3)) * self.hd ** -0.5 + add
            a = F.dropout(F.softmax(a, dim=-1, dtype=torch.float32).to(q.dtype), p=0.1, training=False)
            y = torch.matmul(a, v)
        else:
            a = torch.tanh(q @ k.transpose(-2, -1) / 10) * 10
            y = torch.softmax(a.masked_fill(~mask, float("-inf")), dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(b, n, d))


class Model(torch.nn.Module):
    def __init__(self, how):
        super().__init__()
        torch.manual_seed(3)
        self.layers = torch.nn.ModuleList([Hand(how), Hand(how)])

    def forward(self, x, mask):
        for m in self.layers:
            x = x + m(x, mask)
        return x


def inputs():
    torch.manual_seed(0)
    lens = torch.tensor([12, 7])
    keys = torch.arange(12)[None, :] < lens[:, None]
    mask = (keys[:, None, None, :] & torch.ones(12, 12, dtype=torch.bool).tril()[None, None])
    return torch.randn(2, 12, 32), mask


def same_calls(a, b):
    assert len(a.calls) == len(b.calls) > 0
    for x, y in zip(a.calls, b.calls):
        assert x.signature() == y.signature(), (x, y)
        assert (x.module, x.kv_repeated, x.analysis.kind, x.analysis.note) == \
            (y.module, y.kv_repeated, y.analysis.kind, y.analysis.note)


@pytest.mark.parametrize("how", ["bool", "add"])
def test_hand_written_module_is_captured_as_sdpa_would_be(how):
    x, mask = inputs()
    ref = xt.capture(Model("sdpa").eval(), x, mask, keep_tensors=True)
    cap = xt.capture(Model(how).eval(), x, mask, keep_tensors=True)
    same_calls(ref, cap)
    assert not cap.unmapped
    for r, c in zip(ref.calls, cap.calls):
        assert r.kind == "sdpa" and c.kind == "eager"
        assert c.source == f"hand-written (eager) attention in {c.module}"
        assert c.kv_repeated == 2 and c.kv_heads == 2 and c.analysis.causal  # GQA through repeat_kv, causal
        assert c.span[1] > c.span[0] >= 0
        for t in ("q", "k", "v"):  # the same tensors (the layers before differ by rounding only)
            assert torch.allclose(r.tensors[t], c.tensors[t], atol=1e-5)
        keep = torch.isfinite(r.tensors["out"])
        assert torch.allclose(r.tensors["out"][keep], c.tensors["out"][keep], atol=1e-5)
        # replayed like an SDPA call: SDPA on the recovered tensors gives the model's output
        m = c.tensors["mask"]
        o = F.scaled_dot_product_attention(c.tensors["q"], c.tensors["k"], c.tensors["v"], attn_mask=m,
                                           scale=c.scale)
        rows = mask.any(-1, keepdim=True).expand_as(o)
        assert torch.allclose(o[rows], c.tensors["out"][rows], atol=1e-5)


def test_what_cannot_be_mapped_is_listed_by_module():
    x, mask = inputs()
    cap = xt.capture(Model("softcap").eval(), x, mask)
    assert not cap.calls
    assert [u["module"] for u in cap.unmapped] == ["layers.0", "layers.1"]
    assert all("tanh" in u["reason"] for u in cap.unmapped)
    with pytest.raises(RuntimeError, match="layers.0: .*tanh"):
        xt.profile(Model("softcap").eval(), x, mask, backends=["cpu"], passes=1, budget_s=0.0, max_reps=1)


def test_a_compiled_model_is_captured_as_written():
    x, mask = inputs()
    for how, kind in (("sdpa", "sdpa"), ("bool", "eager")):
        model = torch.compile(Model(how).eval())
        with torch.no_grad():
            want = model(x, mask)
        cap = xt.capture(model, x, mask)
        assert [c.kind for c in cap.calls] == [kind, kind]
        with torch.no_grad():  # the compiled model is left as it was
            assert torch.allclose(model(x, mask), want)


def test_capture_can_leave_hand_written_attention_out():
    x, mask = inputs()
    assert not xt.capture(Model("bool").eval(), x, mask, eager=False).calls


def test_profile_times_the_hand_written_spans_and_replays_them():
    x, mask = inputs()
    prof = xt.profile(Model("add").eval(), x, mask, backends=["cpu"], algos=("flash",), passes=2,
                      budget_s=0.2, max_reps=5)
    r = prof.report
    assert r["attention_kinds"] == {"sdpa": 0, "eager": 2} and r["unmapped"] == []
    assert r["forward"]["attention_ms"]["n"] == 2 and r["forward"]["attention_ms"]["median"] > 0
    assert r["forward"]["torch_profiler"]["calls_seen"] == [2, 2]  # the spans as record_function ranges
    (case,) = r["cases"]
    assert case["kind"] == "eager" and case["pytorch"]["impl"] == "eager"
    assert case["pytorch"]["wall_ms"]["n"] >= 5 and case["pytorch"]["kernel_ms"]["n"] >= 5
    names = [b["backend"] for b in case["pytorch_backends"]]
    assert names == ["default", "math", "flash", "efficient", "cudnn"]  # SDPA on the recovered tensors
    assert case["xattn"] and case["xattn"][0]["xattn_vs_sdpa"] < 1e-5
    assert r["numerics"]["by_dtype"]["f32"]["all_pass"]
    assert "pytorch   eager" in prof.text()


def test_profile_inside_a_callers_torch_profiler():
    from torch.profiler import ProfilerActivity, profile

    x, mask = inputs()
    with profile(activities=[ProfilerActivity.CPU]) as tp:
        prof = xt.profile(Model("sdpa").eval(), x, mask, backends=["cpu"], algos=("flash",), passes=2,
                          budget_s=0.2, max_reps=5)
    r = prof.report
    assert r["torch_profiler"] == {"own_passes": False, "caller_profiler_active": True,
                                   "note": r["torch_profiler"]["note"]}
    assert "torch.profiler" not in r["forward"]
    assert "skipped" in prof.text()
    (case,) = r["cases"]
    assert case["pytorch"]["kernel_ms"] == {} and case["pytorch"]["wall_ms"]["n"] >= 5
    assert all(c["sdpa_kernel"].endswith("(torch._fused_sdp_choice)") for c in r["calls_detail"])
    names = {e.name for e in tp.events()}
    assert {"xattn.profile capture", "xattn.profile timing pass 0", "xattn.profile case 0"} <= names
    assert any(n.startswith("xattn ") and "[cpu flash]" in n for n in names)  # xattn's replays, as ranges


def minilm_or_skip():
    try:
        _models.minilm_path()
    except ImportError as e:
        pytest.skip(str(e))
    return _models.load_minilm()


def test_minilm_eager_is_captured_as_with_sdpa():
    from transformers import AutoModel

    m = minilm_or_skip()
    ref = xt.capture(m.model, **m.kwargs)
    eager = AutoModel.from_pretrained(_models.minilm_path(), attn_implementation="eager").eval()
    cap = xt.capture(eager, **m.kwargs)
    same_calls(ref, cap)
    assert len(cap.calls) == 6 and not cap.unmapped
    assert all(c.kind == "eager" and c.analysis.kind == "lengths" for c in cap.calls)
    assert [len(g) for _, g in cap.cases()] == [len(g) for _, g in ref.cases()] == [6]
