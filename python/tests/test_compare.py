"""`python -m xattn compare A B` on hand-made profile.json files: the attention
time per forward, its share and each layer's attention time judged with the one
rule (ratio B/A, a verdict only where the 95% intervals separate, else "within
noise"), and exit 2 with a clear message for files that cannot be compared."""

import json

import pytest

from xattn import _report
from xattn.__main__ import main
from xattn._stats import summarize


def stats(center, width):  # five samples around center, interval [center - width, center + width]
    return summarize([center - width, center - width / 2, center, center + width / 2, center + width])


def profile_doc(model="m", attn=(10.0, 0.5), share=(0.2, 0.01), layers=None, calls=2):
    layers = layers or {"layer.0": (5.0, 0.2), "layer.1": (5.0, 0.2)}
    return {"schema": "xattn.profile/1", "model": model, "calls": calls,
            "load": {"start": {"load1": 0.1}, "end": {"load1": 0.2}, "cpus": 2, "busy": False, "known": True,
                     "line": "load: 0.10 at the start, 0.20 at the end (1-minute averages), 2 CPUs available"},
            "forward": {"forward_ms": stats(50.0, 1.0), "attention_ms": stats(*attn),
                        "attention_share": stats(*share)},
            "layers": {"rows": [{"layer": k, "calls": 1, "attention_ms": stats(*v)} for k, v in layers.items()]}}


def write(d, name, doc):
    p = d / name
    p.mkdir()
    (p / "profile.json").write_text(json.dumps(doc))
    return p


def test_compare_judges_total_share_and_layers(tmp_path, capsys):
    a = write(tmp_path, "a", profile_doc())
    b = write(tmp_path, "b", profile_doc(attn=(5.0, 0.25), share=(0.21, 0.02),
                                         layers={"layer.1": (2.5, 0.1), "layer.0": (5.1, 0.3)}))
    assert main(["compare", str(a), str(b / "profile.json"), "--json", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    c = json.loads((tmp_path / "c.json").read_text())
    rows = {r["what"]: r for r in c["rows"]}
    tot = rows["attention per forward"]
    assert tot["verdict"] == "B faster" and tot["ratio"] == pytest.approx(0.5)
    assert rows["attention share of the forward"]["verdict"] == "within noise"
    assert rows["layer.0 attention"]["verdict"] == "within noise"  # matched by name, not by position
    assert rows["layer.1 attention"]["verdict"] == "B faster"
    assert rows["layer.1 attention"]["ratio"] == pytest.approx(0.5)
    assert "within noise" in out and "B faster" in out and "wall clock" in out
    assert "summary: 2 faster in B, 0 slower, 2 within noise" in out


def test_compare_slower_and_higher_share():
    a, b = profile_doc(), profile_doc(attn=(20.0, 0.5), share=(0.4, 0.01))
    c = _report.compare_profiles(a, b)
    rows = {r["what"]: r for r in c["rows"]}
    assert rows["attention per forward"]["verdict"] == "B slower"
    assert rows["attention per forward"]["ratio"] == pytest.approx(2.0)
    assert rows["attention share of the forward"]["verdict"] == "B higher"


@pytest.mark.parametrize("make_b,words", [
    (lambda: profile_doc(model="other"), "different models"),
    (lambda: profile_doc(layers={"layer.0": (5.0, 0.2), "layer.9": (5.0, 0.2)}), "different models"),
    (lambda: profile_doc(calls=4), "different models"),
])
def test_compare_refuses_different_models(tmp_path, capsys, make_b, words):
    a = write(tmp_path, "a", profile_doc())
    b = write(tmp_path, "b", make_b())
    assert main(["compare", str(a), str(b)]) == 2
    assert words in capsys.readouterr().err


def test_compare_refuses_bad_files(tmp_path, capsys):
    a = write(tmp_path, "a", profile_doc())
    (tmp_path / "junk.json").write_text("{not json")
    (tmp_path / "other.json").write_text(json.dumps({"schema": "xattn.cases/1"}))
    old = profile_doc()
    for s in [old["forward"]["attention_ms"]] + [r["attention_ms"] for r in old["layers"]["rows"]]:
        del s["ci_low"], s["ci_high"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    for bad, words in ((tmp_path / "missing", "no such file"), (tmp_path / "junk.json", "not a JSON file"),
                       (tmp_path / "other.json", "not an xattn profile"), (tmp_path / "old.json", "older xattn")):
        assert main(["compare", str(a), str(bad)]) == 2
        err = capsys.readouterr().err
        assert words in err and err.startswith("python -m xattn compare:"), err
