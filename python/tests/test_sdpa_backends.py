"""PyTorch's own SDPA backends beside xattn's algorithms in the profile (docs/python.md,
"PyTorch's implementations side by side"): the structure of profile.json and of the
table on a tiny model. Nothing here asserts a timing."""

import json

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install './python[torch]')")

import torch.nn.functional as F  # noqa: E402

import xattn.torch as xt  # noqa: E402
from xattn.torch import _profile  # noqa: E402


class Attn(torch.nn.Module):
    def __init__(self, d=32, h=2):
        super().__init__()
        self.h, self.qkv, self.o = h, torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        return self.o(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d))


@pytest.fixture(scope="module")
def prof(tmp_path_factory):
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("backends")
    p = xt.profile(torch.nn.Sequential(Attn(), Attn()).eval(), torch.randn(2, 16, 32), backends=["cpu"],
                   algos=("flash",), passes=3, budget_s=0.3, max_reps=6, out_dir=out)
    return p, json.loads((out / "profile.json").read_text())


def test_every_sdpa_backend_is_listed(prof):
    _, doc = prof
    (case,) = doc["cases"]
    rows = {r["backend"]: r for r in case["pytorch_backends"]}
    assert set(rows) == {"math", "flash", "efficient", "cudnn"}
    for r in rows.values():
        if r["runs"]:  # timed on the same clocks as the xattn cells, in the same round-robin
            for clock in ("wall_ms", "cpu_ms", "kernel_ms"):
                assert r[clock]["n"] >= 5 and len(r[clock]["samples"]) == r[clock]["n"], (r["name"], clock)
            assert set(r["vs_model"]) == {"wall", "kernel"}
            assert r["kernel_op"].startswith("aten::_scaled_dot_product")
            assert _profile.kernel_label(r["kernel_op"]) == r["backend"]
        else:  # refused: listed with torch's reason, not dropped
            assert r["refused"] and "wall_ms" not in r
    assert rows["math"]["runs"]  # math runs everywhere
    if not torch.cuda.is_available():
        assert not rows["efficient"]["runs"] and "CUDA only" in rows["efficient"]["refused"]
        assert not rows["cudnn"]["runs"] and "CUDA only" in rows["cudnn"]["refused"]


def test_the_kernel_pytorch_chose_is_named(prof):
    _, doc = prof
    (case,) = doc["cases"]
    assert case["pytorch"]["kernel_op"].startswith("aten::_scaled_dot_product")
    assert case["pytorch"]["kernel_chosen"] in ("flash", "math", "efficient", "cudnn")
    for row in doc["calls_detail"]:
        assert row["kind"] == "sdpa" and row["sdpa_kernel"].startswith(case["pytorch"]["kernel_chosen"])


def test_the_table_lists_them(prof):
    p, doc = prof
    text = p.text()
    for r in doc["cases"][0]["pytorch_backends"]:
        line = next(l for l in text.splitlines() if l.strip().startswith(f"pytorch   sdpa {r['backend']} "))
        assert ("refused:" in line) == (not r["runs"])
    assert "SDPA ran its" in text


def test_refusal_reason_comes_from_torch():
    q = torch.randn(1, 2, 4, 8)
    call = type("C", (), {})()
    call.tensors = {"q": q, "k": q, "v": q, "mask": None}
    call.is_causal, call.scale, call.enable_gqa = False, None, False
    assert _profile._SdpaCell(call, "MATH").refusal() == ""
    why = _profile._SdpaCell(call, "CUDNN_ATTENTION").refusal()
    assert why and "cpu" in why
