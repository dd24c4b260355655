"""xattn inside torch.profiler: each call a record_function range named by layer and
algorithm; xattn's events (host span, device span, phases) converted to the
profiler's time base, so that one exported trace holds the model's ops and xattn's
phases on one axis. The tests parse real exported traces; no timing is asserted."""

import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install './python[torch]')")
pytest.importorskip("transformers", reason="transformers is not installed")
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import xattn  # noqa: E402
import xattn.torch as xt  # noqa: E402
from xattn.torch import _trace  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_hf_attention import tiny_llama  # noqa: E402


def _backends():
    out = ["cpu"]
    if xattn.backends()["opencl"]["available"]:
        out.append("opencl")
    return out


def _load(path):
    with open(path) as f:
        return json.load(f)


@pytest.mark.parametrize("backend", _backends())
def test_one_trace_model_ops_and_xattn_phases(tmp_path, backend):
    _trace.reset()
    model = tiny_llama("xattn")
    ids = torch.randint(3, 256, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), xt.attention_options(backend=backend):
        model(input_ids=ids)  # warm: kernels built, contexts made
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            model(input_ids=ids)
    out = tmp_path / "trace.json"
    info = xt.export_chrome_trace(prof, out)
    assert info["calls"] == 3
    doc = _load(out)
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    ranges = sorted((e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("xattn ")),
                    key=lambda e: e["ts"])
    names = [r["name"] for r in ranges]
    assert names == [f"xattn LlamaAttention[{i}] [{backend} auto]" for i in range(3)]
    phases = [e for e in ev if e.get("cat") == "xattn.phase"]
    device = [e for e in ev if e.get("cat") == "xattn" and e["args"]["span"] == "device"]
    host = [e for e in ev if e.get("cat") == "xattn" and e["args"]["span"] == "host"]
    assert len(device) == len(host) == 3 and len(phases) >= 3
    for e in phases + device + host:
        r = next(r for r in ranges if r["name"] == e["args"]["range"])
        # inside the matching record_function range, on the trace's time axis
        assert r["ts"] <= e["ts"] and e["ts"] + e["dur"] <= r["ts"] + r["dur"], (e, r)
        assert e["args"]["algo"] in ("naive", "flash", "splitkv")
    # the model's own ops sit on the same axis: layer 0's output projection and layer
    # 1's Q/K/V projections run between layer 0's phases and layer 1's range
    end0 = max(e["ts"] + e["dur"] for e in phases if e["args"]["range"] == names[0])
    ops_between = [e for e in ev if e.get("cat") == "cpu_op" and e["name"] in ("aten::linear", "aten::mm",
                                                                                 "aten::addmm", "aten::matmul")
                   and end0 <= e["ts"] and e["ts"] + e["dur"] <= ranges[1]["ts"]]
    assert len(ops_between) >= 4  # o_proj, MLP, q/k/v projections of the next layer
    # the drawing of it (docs/python.md shows one): valid SVG, each xattn event a box
    import xml.etree.ElementTree as ET

    svg = ET.fromstring(_trace.timeline_svg(doc))
    ns = "{http://www.w3.org/2000/svg}"
    titles = [r.find(ns + "title").text for r in svg.iter(ns + "rect") if r.find(ns + "title") is not None]
    assert sum(t.startswith("xattn LlamaAttention") for t in titles) == 3
    assert sum(t.startswith(("flash", "naive", "splitkv")) for t in titles) == 3 + len(phases)
    assert any(t.startswith("aten::") for t in titles)


def test_direct_calls_are_ranges_and_nothing_is_kept_without_a_profiler(tmp_path):
    _trace.reset()
    q = torch.randn(1, 2, 8, 16)
    xattn.attention(q, q, q, layout="bhsd", algo="naive", name="mine")
    assert len(_trace.tracer.calls) == 0  # no profiler: no range, nothing kept
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        xattn.attention(q, q, q, layout="bhsd", algo="naive", name="mine")
        xt.scaled_dot_product_attention(q, q, q, algo="flash")
    info = xt.export_chrome_trace(prof, tmp_path / "t.json")
    assert info["calls"] == 2
    doc = _load(tmp_path / "t.json")
    names = {e["name"] for e in doc["traceEvents"] if e.get("cat") == "user_annotation"}
    assert {"xattn mine [cpu naive]", "xattn attention [cpu flash]"} <= names
    dev = {e["name"].split(" #")[0] for e in doc["traceEvents"]
           if e.get("cat") == "xattn" and e["args"]["span"] == "device"}
    assert dev == {"naive", "flash"}
    assert doc["xattn"]["calls"] == 2


def test_conversion_on_synthetic_calls():
    """The clock arithmetic: origin bounds from (a, b, submit, return), then record
    microseconds -> Unix microseconds -> the trace's ts (minus baseTimeNanoseconds)."""
    o = _trace._Origin()
    # true origin 1000 us on CLOCK_MONOTONIC; two calls observed by Python
    o.add(a_us=1500.0, b_us=1700.0, submit_us=505.0, return_us=690.0)  # origin in [995, 1010]
    o.add(a_us=2000.0, b_us=2100.0, submit_us=1002.0, return_us=1097.0)  # origin in [998, 1003]
    assert (o.lo, o.hi) == (998.0, 1003.0) and o.value() == 1000.5
    rec = {"seq": 7, "algo_chosen": "flash", "host_submit_us": 1002.0, "host_return_us": 1097.0,
           "device_start_us": 1010.0, "device_end_us": 1090.0, "phase_names": ["main"], "phase_ms": [0.08],
           "phase_start_us": [1010.0], "device_name": "x"}
    call = {"label": "xattn L [cpu auto]", "name": "L", "backend": "cpu", "device": 0, "rec": rec,
            "a_us": 2000.0, "b_us": 2100.0, "unix_minus_mono_us": 5_000_000.0, "origin": o, "pid": 1, "tid": 1}
    evs = _trace.xattn_events([call], base_ns=4_000_000_000)
    ph = next(e for e in evs if e.get("cat") == "xattn.phase")
    # 1010 us after an origin of 1000.5 us = 2010.5 us monotonic = 5002010.5 us Unix; minus 4e6 us
    assert ph["ts"] == pytest.approx(1_002_010.5) and ph["dur"] == pytest.approx(80.0)
    host = next(e for e in evs if e.get("cat") == "xattn" and e["args"]["span"] == "host")
    assert host["ts"] == pytest.approx(1_002_002.5) and host["dur"] == pytest.approx(95.0)
    # inconsistent bounds (clocks that differ) produce no events rather than wrong ones
    bad = _trace._Origin()
    bad.add(a_us=100.0, b_us=110.0, submit_us=0.0, return_us=50.0)
    assert bad.value() is None
    assert _trace.xattn_events([dict(call, origin=bad)]) == []
