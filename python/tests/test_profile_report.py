"""The profile's statistics, clocks, load, memory and report (docs/python.md,
"The profile"), on a tiny two-layer model run once with a small budget, and the
report's text on figures made by hand: no mixed clocks, "within noise" where the
intervals overlap, only the algorithms that ran in the work line, no RSS figure
shown as a peak. Nothing here asserts a timing."""

import copy
import json
import xml.etree.ElementTree as ET

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install './python[torch]')")

import torch.nn.functional as F  # noqa: E402

import xattn.torch as xt  # noqa: E402
from xattn import _report  # noqa: E402
from xattn._stats import summarize  # noqa: E402
from xattn.torch import _profile  # noqa: E402

STATS_KEYS = {"n", "median", "min", "max", "p90", "mad", "spread", "samples", "ci_low", "ci_high", "ci_level",
              "converged"}


class Attn(torch.nn.Module):
    def __init__(self, d=32, h=2):
        super().__init__()
        self.h, self.qkv, self.o = h, torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, s, d))


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Attn(), Attn()])

    def forward(self, x):
        for m in self.layers:
            x = x + m(x)
        return x


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("tiny")
    x = torch.randn(2, 16, 32)
    prof = xt.profile(Tiny().eval(), x, model_name="tiny", backends=["cpu"], algos=("naive", "flash"),
                      passes=5, budget_s=0.3, max_reps=8, out_dir=out)
    return prof, out


def is_stats(s):
    return isinstance(s, dict) and STATS_KEYS <= set(s) and len(s["samples"]) == s["n"]


def test_profile_json_has_samples_intervals_clocks_and_load(tiny):
    prof, out = tiny
    rep = json.loads((out / "profile.json").read_text())
    assert rep["passes"] == 5 and rep["settings"]["budget_s"] == 0.3
    fwd = rep["forward"]
    for k in ("forward_ms", "forward_cpu_ms", "attention_ms", "attention_share"):
        assert is_stats(fwd[k]) and fwd[k]["n"] == 5, k
    assert fwd["attention_share"]["ci_level"] == 0.9375  # n = 5: [min, max] at its real level
    assert "wall clock" in fwd["clock"]
    tp = fwd["torch_profiler"]
    assert is_stats(tp["attention_share"]) and tp["attention_share"]["n"] == 5 and tp["calls_seen"] == [2] * 5
    assert isinstance(tp["agree"], bool) and "aten::scaled_dot_product_attention" in tp["clock"]
    ld = rep["load"]
    assert set(ld) >= {"start", "end", "cpus", "busy", "line"} and ld["cpus"] >= 1
    for row in rep["layers"]["rows"]:
        assert is_stats(row["attention_ms"])
    (case,) = rep["cases"]
    assert is_stats(case["pytorch"]["wall_ms"]) and is_stats(case["pytorch"]["cpu_ms"])
    assert is_stats(case["pytorch"]["kernel_ms"]) and "torch.profiler" in case["pytorch"]["kernel_clock"]
    assert 5 <= case["pytorch"]["wall_ms"]["n"] <= 8 and case["pytorch"]["kernel_ms"]["n"] >= 5
    assert {c["algo"] for c in case["xattn"]} == {"naive", "flash"}
    for cell in case["xattn"]:
        for k in ("wall_ms", "cpu_ms", "device_ms"):
            assert is_stats(cell[k]) and cell[k]["n"] >= 5, k
        assert "time_ms" not in cell  # no figure without its clock in its name
        assert cell["vs_sdpa"]["wall"]["clock"] == "wall clock"
        assert cell["vs_sdpa"]["kernel"]["clock"] == "kernel clock"
    assert {v["on"] for v in case["verdicts"]} == {"wall", "kernel"}


def test_memory_as_torch_sees_it(tiny):
    prof, _ = tiny
    mem = prof.report["memory"]
    t = mem["torch"]
    assert "torch.profiler" in t["kind"] and t["sdpa_calls_seen"] == 2
    assert t["forward_allocated_bytes"] >= t["forward_peak_bytes"] > 0
    (row,) = mem["rows"]
    p = row["pytorch"]
    out_bytes = 2 * 2 * 16 * 16 * 4  # SDPA's output, B x H x S x D f32: what a call keeps
    assert p["sdpa_kept_bytes"] == out_bytes and p["sdpa_peak_bytes"] >= out_bytes
    assert p["sdpa_workspace_bytes"] == p["sdpa_peak_bytes"] - p["sdpa_kept_bytes"]
    assert set(row["xattn"]) == {"naive", "flash"}
    text = prof.text()
    assert "host-rss" not in text and "0 B (" not in text
    assert "torch.profiler" in text and "xattn's exact workspace" in text


def test_cases_file_forward_ms_is_the_timing_passes_median(tiny):
    prof, out = tiny
    doc = json.loads((out / "cases.json").read_text())
    assert doc["forward_ms"] == round(prof.report["forward"]["forward_ms"]["median"], 6)
    assert "timing passes" in doc["forward_ms_source"]
    assert prof.capture.capture_forward_ms != prof.capture.timed_forward_ms


def test_chart_has_intervals_and_axes(tiny):
    _, out = tiny
    svg = (out / "chart.svg").read_text()
    root = ET.fromstring(svg)
    texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert any("ms per call" in t for t in texts) and any(t.endswith(" ms") or t.endswith(" us") for t in texts)
    assert any("share of the forward" in t for t in texts) and "100%" in texts
    assert any("wall clock" in t for t in texts) and any("kernel clock" in t for t in texts)
    assert len(list(root.iter("{http://www.w3.org/2000/svg}line"))) > 10  # whiskers and ticks


def test_text_has_the_load_line_and_no_mixed_clock(tiny):
    prof, _ = tiny
    text = prof.text()
    assert text.splitlines()[1].startswith("load: ")
    assert "wall vs SDPA" in text and "kernel vs SDPA" in text
    assert "median ms" not in text and "(device_ms, the ratios use it)" not in text
    assert "torch.profiler, same process: attention" in text


def fake_case(sd_wall, x_wall, sd_kernel, x_dev, algos=("flash",)):
    cells = []
    for algo in algos:
        cell = {"backend": "cpu", "device": 0, "algo": algo, "wall_ms": x_wall, "cpu_ms": x_wall, "device_ms": x_dev,
                "workspace_bytes": 1024, "gflops_useful": 1.0, "flops_useful": 100, "flops_dense": 200,
                "flops_executed": 100 if algo == "flash" else 200, "padding_waste": 0.5, "bytes_actual": 1}
        cells.append(cell)
    sd = {"wall_ms": sd_wall, "cpu_ms": sd_wall, "kernel_ms": sd_kernel}
    for cell in cells:
        cell["vs_sdpa"] = _profile._vs_sdpa(cell, sd)
    case = {"case": 0, "key": "B1 H1/1 Sq4 Sk4 D8 f32", "count": 1, "layers": ["l0"], "mask_meaning": "lengths",
            "kv_repeated_by_caller": 1, "q_packed_by_caller": 1, "note": "", "pytorch": sd,
            "padding": {"seqlens_k": [2], "seqlens_q": [2], "waste_from_token_counts": 0.5},
            "naive_scores_bytes": 64, "xattn": cells, "packed": [], "errors": []}
    case["verdicts"] = _profile._verdicts(case)
    return case


def with_case(tiny, case):
    rep = copy.deepcopy(tiny[0].report)
    rep["cases"] = [case]
    rep["memory"]["rows"] = []
    return _report.render_text(rep)


def s(center, width):
    return summarize([center - width, center - width / 2, center, center + width / 2, center + width])


def test_within_noise_when_the_intervals_overlap(tiny):
    text = with_case(tiny, fake_case(s(1.0, 0.3), s(1.2, 0.3), s(1.0, 0.01), s(0.5, 0.01)))
    lines = [ln for ln in text.splitlines() if ln.strip().startswith("verdict")]
    assert len(lines) == 2
    assert "(wall clock): within noise" in lines[0] and "faster" not in lines[0]
    assert "xattn cpu flash is 2.00x faster than pytorch sdpa (kernel clock)" in lines[1]
    row = [ln for ln in text.splitlines() if ln.strip().startswith("cpu:0")][0]
    assert "within noise" in row and "2.00x faster" in row


def test_a_slower_xattn_is_said_so_on_its_clock(tiny):
    text = with_case(tiny, fake_case(s(0.066, 0.001), s(0.27, 0.01), s(0.5, 0.01), s(0.25, 0.01)))
    assert "pytorch sdpa is 4.09x faster than xattn cpu flash (wall clock)" in text
    assert "xattn cpu flash is 2.00x faster than pytorch sdpa (kernel clock)" in text


def test_work_line_lists_only_the_algorithms_that_ran(tiny):
    text = with_case(tiny, fake_case(s(1, 0.1), s(1, 0.1), s(1, 0.1), s(1, 0.1), algos=("flash",)))
    work = [ln for ln in text.splitlines() if ln.strip().startswith("work")][0]
    assert "flash 1.00x (skips all of it)" in work and "naive" not in work and "splitkv" not in work
    text = with_case(tiny, fake_case(s(1, 0.1), s(1, 0.1), s(1, 0.1), s(1, 0.1), algos=("naive", "flash")))
    work = [ln for ln in text.splitlines() if ln.strip().startswith("work")][0]
    assert "naive 2.00x (computes the whole padded rectangle)" in work and "flash 1.00x" in work


def test_work_line_reason_comes_from_the_figures():
    cells = [{"algo": "splitkv", "flops_useful": 100, "flops_executed": 150, "flops_dense": 200}]
    assert _report._work_line(cells) == "splitkv 1.50x (computes 50% of the masked pairs (partial tiles))"


def test_busy_run_says_so(tiny):
    rep = copy.deepcopy(tiny[0].report)
    from xattn._stats import load_line, load_section

    rep["load"] = load_section({"load1": 6.0}, {"load1": 9.5}, cpus=2)
    rep["load"]["line"] = load_line(rep["load"])
    text = _report.render_text(rep)
    assert "BUSY" in text.splitlines()[1] and "6.00 at the start" in text and "9.50 at the end" in text
    assert "busy" in _report.render_svg(rep).lower()


def test_passes_and_reps_are_one_option():
    m = Tiny().eval()
    x = torch.randn(1, 4, 32)
    with pytest.raises(ValueError, match="disagree"):
        xt.profile(m, x, passes=3, reps=4)
    with pytest.raises(ValueError, match="positive"):
        xt.profile(m, x, passes=0)
