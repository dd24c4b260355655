"""Generation: transformers' real left-padded masks of a batched generate recognized
exactly (lengths + bottom-right causality, pads moved to the end), replayed with
executed FLOPs within 5% of the model's useful work, and profile(..., generate=N)
reporting the prefill and the decode steps apart, in KV-length buckets. Small models
(2 layers, a few steps); no timing is asserted."""

import json
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install './python[torch]')")
pytest.importorskip("transformers", reason="transformers is not installed (pip install './python[torch]')")

import torch.nn.functional as F  # noqa: E402

import xattn  # noqa: E402
import xattn.torch as xt  # noqa: E402
from xattn._cases import read_document  # noqa: E402
from xattn._masks import analyze  # noqa: E402
from xattn._numerics import rel_l2, to_f64  # noqa: E402
from xattn.torch import _models  # noqa: E402
from xattn.torch._generate import GenerateRun, render_generation  # noqa: E402
from xattn.torch._profile import _inputs_for_xattn, _rows_mask, _sdpa_out  # noqa: E402

BACKENDS = [b for b in ("cpu", "opencl") if xattn.backends()[b]["available"]]
PROMPTS = [10, 7, 4]  # left-padded to 10
STEPS = 4  # decode steps after the prefill


@pytest.fixture(scope="module")
def generation():
    m = _models.load_smollm2_shape(layers=2, batch=3, prompt_len=10, generate=STEPS)
    m.kwargs = _models.left_padded_prompts(PROMPTS, m.model.config.vocab_size, 0, seed=3)
    run = GenerateRun(m.model, (), m.kwargs, STEPS)
    cap = xt.Capture(m.model, keep_tensors=True)
    with cap, torch.no_grad():
        run.run()
    return m, cap, run


def test_left_padded_generate_is_lengths_not_bias(generation):
    _, cap, run = generation
    assert run.new_tokens == STEPS + 1 and cap.steps == STEPS + 1
    assert len(cap.calls) == 2 * (STEPS + 1)
    pads = [10 - n for n in PROMPTS]
    for c in cap.calls:
        a = c.analysis
        assert a.kind == "lengths" and a.causal == "bottom-right", (c.index, a)
        assert a.pad_k == pads and "left padding" in a.note
        if c.step == 0:
            assert c.phase == "prefill" and (c.sq, c.sk) == (10, 10)
            assert a.seqlens_q == PROMPTS and a.seqlens_k == PROMPTS and a.pad_q == pads
        else:
            assert c.phase == "decode" and (c.sq, c.sk) == (1, 10 + c.step)
            assert a.seqlens_q == [1, 1, 1] and a.seqlens_k == [n + c.step for n in PROMPTS]
            assert a.pad_q == [0, 0, 0]


def test_unmasked_pad_rows_are_left_out(generation):
    """transformers may "unmask" fully masked pad rows (all allowed) for SDPA: those rows
    are padding, left out of the verification; the result is the same."""
    import warnings

    _, cap, _ = generation
    c = cap.calls[0]
    mask = _models.left_padded_prompts(PROMPTS, 100, 0)["attention_mask"].bool()
    causal = torch.ones(10, 10, dtype=torch.bool).tril()
    full = (causal[None] & mask[:, None, :] & mask[:, :, None])[:, None]  # pad rows fully masked
    add = torch.zeros(full.shape).masked_fill(~full, torch.finfo(torch.float32).min)
    try:  # transformers' own function where it still has it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            from transformers.modeling_attn_mask_utils import AttentionMaskConverter

            unmasked = AttentionMaskConverter._unmask_unattended(add, torch.finfo(torch.float32).min)
    except (ImportError, AttributeError):  # what it does: fully masked rows allow every key
        unmasked = add.masked_fill((add != 0).all(dim=-1, keepdim=True), 0.0)
    assert (unmasked[1, 0, 0] == 0).all()  # the first pad row of sequence 1 now allows every key
    for m in (full.numpy(), unmasked.numpy()):
        a = analyze(m, False, 3, 9, 10, 10)
        assert (a.kind, a.causal, a.seqlens_q, a.seqlens_k) == ("lengths", "bottom-right", PROMPTS, PROMPTS)
        assert (a.seqlens_q, a.pad_k) == (c.analysis.seqlens_q, c.analysis.pad_k)


def _useful_pairs_from_mask(c):
    """Allowed (query, key) pairs of the model's own mask over the real query rows, per
    head: the model's useful work (the kept mask has the pads moved to the end)."""
    m = c.tensors["mask"]
    while m.dim() < 4:
        m = m[None]
    m = m[:, 0].bool() if m.dtype == torch.bool else (m[:, 0] > -1e4)
    rows = torch.from_numpy(_rows_mask(c)[:, 0, :, 0])
    m = m.expand(c.batch, c.sq, c.sk)
    return int((m & rows[:, :, None]).sum())


@pytest.mark.parametrize("backend", BACKENDS)
def test_replay_work_and_numerics(generation, backend):
    """Each call replayed by xattn: its useful FLOPs are exactly the allowed pairs of the
    model's mask on real rows; the FLOPs the kernels executed are within 5% of that for
    the decode steps, and for the prefill within 5% of what the same kernel executes on
    the sequences run alone, unpadded (the padding costs nothing: what is left is the
    kernel's own tile granularity on the causal diagonal); the outputs agree with SDPA's
    on the real rows."""
    _, cap, _ = generation
    ctx = xattn.Context(backend, 0)
    try:
        for c in cap.calls:
            q, k, v, opts = _inputs_for_xattn(c)
            per_pair = 2 * (c.head_dim + c.head_dim_v) * c.heads
            for algo in ("flash", "splitkv"):
                o, rec = xattn.attention(q, k, v, algo=algo, backend=ctx, **opts)
                assert rec["flops_useful"] == per_pair * _useful_pairs_from_mask(c), (c.index, algo)
                if c.phase == "decode":
                    assert rec["flops_executed"] <= 1.05 * rec["flops_useful"], (c.index, algo, rec)
                else:
                    alone = 0.0
                    for b, n in enumerate(c.analysis.seqlens_q):
                        _, r1 = xattn.attention(q[b:b + 1, :, :n], k[b:b + 1, :, :n], v[b:b + 1, :, :n], algo=algo,
                                                backend=ctx, layout="bhsd", causal="bottom-right", scale=c.scale)
                        alone += r1["flops_executed"]
                    assert rec["flops_useful"] <= rec["flops_executed"] <= 1.05 * alone, (c.index, algo, rec, alone)
                x, s = to_f64(o), to_f64(_sdpa_out(c))
                sel = np.broadcast_to(_rows_mask(c), x.shape)
                assert rel_l2(x[sel], s[sel]) <= 2e-5, (c.index, algo)
        # the whole generation: executed within 5% of useful when the prefill's diagonal
        # tiles are counted as the unpadded kernel counts them
    finally:
        ctx.close()


def test_bias_form_would_double_the_work(generation):
    """What the fix replaces: the same prefill as a dense bias runs the full rectangle."""
    _, cap, _ = generation
    c = cap.calls[0]
    useful = _useful_pairs_from_mask(c)
    assert c.batch * c.sq * c.sk >= 2 * useful  # 300 pairs for 93 useful ones


def test_cases_file_left_padded_and_bucketed(generation, tmp_path, xattn_tool):
    m, cap, _ = generation
    path = tmp_path / "gen.json"
    doc = cap.write_cases(path, model=m.name)
    doc = read_document(path)
    pre, dec = doc["cases"]  # the prefill, and the 4 decode steps in one bucket (Sk 11..14 in 9..16)
    assert (pre["count"], pre["sq"], pre["sk"], pre["causal"]) == (2, 10, 10, "bottom-right")
    assert pre["seqlens_q"] == PROMPTS and pre["seqlens_k"] == PROMPTS and pre["bias"] is None
    assert pre["info"]["left_padding"]["pad_k"] == [0, 3, 6] and pre["info"]["phase"] == "prefill"
    assert (dec["count"], dec["sq"], dec["causal"]) == (2 * STEPS, 1, "bottom-right")
    kb = dec["info"]["kv_bucket"]
    assert kb["sk_counts"] == {"11": 2, "12": 2, "13": 2, "14": 2} and sum(kb["sk_counts"].values()) == dec["count"]
    assert dec["sk"] == kb["representative_sk"] == 12 and kb["mean_sk"] == 12.5
    assert dec["seqlens_k"] == [n + 2 for n in PROMPTS] and doc["kv_buckets"] == "pow2"
    # the C tool replays the file; its records count the useful work the model does
    res = subprocess.run([xattn_tool, "bench", "--cases", str(path), "--backend", "cpu", "--algo", "flash",
                          "--min-reps", "1", "--max-reps", "2", "--cell-budget", "0.05", "--no-progress",
                          "--out", str(tmp_path / "replay")], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    rj = json.loads((tmp_path / "replay" / "results.json").read_text())
    assert [c["count"] for c in rj["cases_file"]["cases"]] == [2, 2 * STEPS]
    rows = [r for r in rj["results"] if r["status"] == "ok"]
    assert len(rows) == 2
    d = 64
    useful = [9 * 2 * (d + d) * sum(n * (n + 1) // 2 for n in PROMPTS), 9 * 2 * (d + d) * sum(n + 2 for n in PROMPTS)]
    for r, want in zip(rows, useful):
        rec = r.get("record") or r
        assert rec["flops_useful"] == want, r
        assert rec["flops_useful"] <= rec["flops_executed"] < 2 * rec["flops_useful"], r


def _tiny_decoder():
    class Tiny(torch.nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v)

    return Tiny()


def test_257_decode_steps_are_a_few_buckets():
    """A 257-step decode (Sk 204..460 after a prefill of 203) gives one case per bucket,
    with counts that add up to the steps; kv_buckets=None keeps one case per Sk."""
    model = _tiny_decoder()
    g = torch.Generator().manual_seed(0)
    q0 = torch.randn(1, 2, 203, 8, generator=g)
    kv = torch.randn(1, 2, 460, 8, generator=g)

    def run(cap):
        with cap, torch.no_grad():
            model(q0, kv[:, :, :203], kv[:, :, :203])
            for sk in range(204, 461):
                model(q0[:, :, :1], kv[:, :, :sk], kv[:, :, :sk])

    for rule, want in (("pow2", [(203, 1), (230, 53), (358, 204)]), (64, [(203, 1), (230, 53), (288, 64),
                                                                           (352, 64), (416, 64), (454, 12)]),
                       (None, None)):
        cap = xt.Capture(model, kv_buckets=rule)
        run(cap)
        assert cap.steps == 258 and len(cap.calls) == 258
        cases = cap.cases()
        assert sum(len(g) for _, g in cases) == 258
        if rule is None:
            assert len(cases) == 258
            continue
        got = [(r.sk, len(g)) for r, g in cases]
        assert [n for _, n in got] == [n for _, n in want], got
        for (rep, grp), (sk, _) in zip(cases[1:], want[1:]):
            lo, hi = cap.kv_bucket(rep.sk)
            assert all(lo <= c.sk <= hi and c.phase == "decode" for c in grp)
            mean = sum(c.sk for c in grp) / len(grp)
            assert abs(rep.sk - mean) <= 0.5
    with pytest.raises(ValueError, match="kv_buckets"):
        xt.Capture(model, kv_buckets=0)


def test_profile_generate_structure(tmp_path):
    m = _models.load_smollm2_shape(layers=2, batch=3, prompt_len=10, generate=3)
    assert m.info["prompt_lengths"] == [10, 9, 8] and m.info["padding_side"] == "left"
    prof = xt.profile(m.model, model_name=m.name, backends=["cpu"], algos=("flash",), passes=2, budget_s=0.5,
                      max_reps=5, torch_profiler=False, generate=3, out_dir=tmp_path, **m.kwargs)
    g = prof.report["generation"]
    assert g["decode_steps"] == 3 and g["forwards"] == 4 and g["batch"] == 3 and g["new_tokens_per_sequence"] == 4
    assert (g["prefill"]["forwards"], g["prefill"]["calls"]) == (1, 2)
    assert (g["decode"]["forwards"], g["decode"]["calls"]) == (3, 6)
    for ph in ("prefill", "decode"):
        p = g[ph]
        assert p["wall_ms"]["n"] == 2 and len(p["attention_share"]["samples"]) == 2
        assert all(0 < s < 1 for s in p["attention_share"]["samples"])
        assert p["attention_share"]["ci_low"] <= p["attention_share"]["median"] <= p["attention_share"]["ci_high"]
    kb = g["kv_buckets"]
    assert sum(b["steps"] for b in kb["rows"]) == kb["steps_in_buckets"] == 3
    assert sum(b["calls"] for b in kb["rows"]) == kb["calls_in_buckets"] == 6
    for b in kb["rows"]:
        assert sum(b["sk_counts"].values()) == b["calls"]
        assert b["bucket"][0] <= b["sk_min"] <= b["representative_sk"] <= b["sk_max"] <= b["bucket"][1]
        case = prof.report["cases"][b["case"]]
        assert case["count"] == b["calls"] and case["shape"]["sk"] == b["representative_sk"]
    kv = g["kv_cache"]
    assert kv["bytes_per_token_per_layer"] == 3 * (64 + 64) * 4 and kv["layers"] == 2
    assert kv["at_end_bytes"] == 2 * 3 * (10 + 3) * 1536
    assert kv["torch_at_end"]["tensor_bytes"] == kv["at_end_bytes"]  # torch holds what the shapes say
    assert kv["torch_growth_bytes"] == [2 * 3 * s * 1536 for s in (10, 11, 12, 13)]
    pre = prof.report["cases"][0]
    assert pre["padding"]["seqlens_k"] == [10, 9, 8] and "left padding" in pre["mask_meaning"]
    for b in kb["rows"]:  # the decode buckets: xattn executes the useful work, no padding
        case = prof.report["cases"][b["case"]]
        assert case["kv_bucket"]["representative_sk"] == b["representative_sk"]
        assert case["xattn"] and all(x["flops_executed"] <= 1.05 * x["flops_useful"] for x in case["xattn"])
    assert all(d["all_pass"] for d in prof.report["numerics"]["by_dtype"].values())
    text = prof.text()
    assert "generation: a prefill and 3 decode steps" in text and "decode steps by KV length" in text
    assert "padding" in text and "KV cache" in text
    assert render_generation(None) == []
    rep = json.loads((tmp_path / "profile.json").read_text())
    assert rep["generation"]["kv_buckets"]["rows"]
    with pytest.raises(ValueError, match="generate"):
        xt.profile(torch.nn.Linear(2, 2), torch.zeros(1, 2), generate=2)
