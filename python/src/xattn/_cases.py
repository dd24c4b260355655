"""Cases files (schema xattn.cases/1): the distinct attention calls of a model's
forward pass and how often each ran, written by a capture and replayed by
``xattn bench --cases FILE`` (C, no Python needed) on any machine.
docs/python.md documents the schema; the C reader (bench/tool/xtool_cases_file.c)
refuses what this writer would not write.
"""

from __future__ import annotations

import datetime
import json
import math
import platform
from pathlib import Path
from typing import Optional

SCHEMA = "xattn.cases/1"

CASE_KEYS = (
    "name", "count", "dtype", "kv_dtype", "batch", "heads", "kv_heads", "sq", "sk", "head_dim",
    "head_dim_v", "layout", "causal", "window", "scale", "softcap", "alibi", "bias", "lse",
    "seqlens_q", "seqlens_k", "varlen", "info",
)


def natural_key(s: str):
    """Sort key that puts "layers.2" before "layers.10"."""
    import re

    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def _scale_field(scale, d) -> float:
    if scale is None or abs(scale * math.sqrt(d) - 1.0) < 1e-6:
        return 0
    return float(scale)


def _name(calls) -> str:
    """"encoder.layer.{0..5}.attention.self" for the same module in numbered blocks."""
    mods = [c.module for c in calls]
    if len(set(mods)) == 1:
        return mods[0]
    import re

    pat = [re.sub(r"\.(\d+)(\.|$)", r".#\2", m) for m in mods]
    if len(set(pat)) == 1:
        nums = [int(re.search(r"\.(\d+)(\.|$)", m).group(1)) for m in mods]
        lo, hi = min(nums), max(nums)
        if sorted(set(nums)) == list(range(lo, hi + 1)):
            return pat[0].replace("#", "{%d..%d}" % (lo, hi), 1)
    return " + ".join(sorted(set(mods)))[:120]


def case_dict(first, calls) -> dict:
    """One case of the file from its calls (AttentionCall records of one signature)."""
    a = first.analysis
    c = {
        "name": _name(calls),
        "count": len(calls),
        "dtype": first.dtype,
        "kv_dtype": first.kv_dtype,
        "batch": first.batch,
        "heads": first.heads,
        "kv_heads": first.kv_heads,
        "sq": first.sq,
        "sk": first.sk,
        "head_dim": first.head_dim,
        "head_dim_v": first.head_dim_v,
        "layout": first.q.layout(),
        "causal": a.causal or False,
        "window": list(a.window) if a.window else None,
        "scale": _scale_field(first.scale, first.head_dim),
        "softcap": 0,
        "alibi": False,
        "bias": {"shape": list(a.bias_shape), "dtype": "f32"} if a.kind == "bias" else None,
        "lse": False,
        "seqlens_q": list(a.seqlens_q) if a.seqlens_q is not None else None,
        "seqlens_k": list(a.seqlens_k) if a.seqlens_k is not None else None,
        "varlen": False,
        "info": {
            "calls": [x.index for x in calls],
            "layers": sorted({x.layer for x in calls}, key=natural_key),
            "mask": first.mask,
            "mask_meaning": a.note or a.kind,
            "is_causal": first.is_causal,
            "enable_gqa": first.enable_gqa,
            "kv_repeated_by_caller": first.kv_repeated,
            "query_heads_packed_by_caller": first.q_packed,
            "q_stride": list(first.q.stride),
            "k_stride": list(first.k.stride),
            "kv_layout": first.k.layout(),
            "pytorch_ms": [round(x.time_ms, 6) for x in calls if not math.isnan(x.time_ms)],
        },
    }
    if first.reason:
        c["info"]["note"] = first.reason
    phases = sorted({x.phase for x in calls if x.phase})
    if phases:
        c["info"]["phase"] = "+".join(phases)
    if a.pad_k is not None:
        c["info"]["left_padding"] = {"pad_q": list(a.pad_q), "pad_k": list(a.pad_k),
                                     "meaning": "each sequence's first pad_k keys (pad_q query rows) are "
                                                "padding; the lengths count the real tokens, placed first"}
    sks = sorted({x.sk for x in calls})
    if len(sks) > 1:  # decode steps merged into a KV-length bucket
        counts = {}
        for x in calls:
            counts[x.sk] = counts.get(x.sk, 0) + 1
        c["info"]["kv_bucket"] = {
            "representative_sk": first.sk, "sk_min": sks[0], "sk_max": sks[-1],
            "mean_sk": sum(x.sk for x in calls) / len(calls),
            "sk_counts": {str(k): counts[k] for k in sks},
            "meaning": "decode calls of Sk in [sk_min, sk_max] replayed at the representative's shape "
                       "(the Sk nearest their mean) times count"}
    return c


def cases_document(capture, model: str = "", info: Optional[dict] = None) -> dict:
    import torch

    from . import __version__

    cases, skipped = [], []
    for first, calls in capture.cases():
        if not first.supported:
            skipped.append({"calls": [x.index for x in calls], "reason": first.reason})
            continue
        cases.append(case_dict(first, calls))
    doc = {
        "schema": SCHEMA,
        "model": model,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": {
            "captured_by": f"xattn {__version__} (python)",
            "torch": torch.__version__,
            "host": platform.node(),
            "machine": platform.machine(),
            "device": capture.calls[0].q.device if capture.calls else "",
        },
        "calls": len(capture.calls),
        "forward_ms": _forward_ms(capture),
        "forward_ms_source": ("the median of the profile's timing passes (wall clock)"
                              if getattr(capture, "timed_forward_ms", None) is not None
                              else "the capture pass (wall clock; it copies what it records)"),
        "cases": cases,
    }
    if getattr(capture, "kv_buckets", None) is not None and any("kv_bucket" in c["info"] for c in cases):
        doc["kv_buckets"] = capture.kv_buckets
    if skipped:
        doc["not_replayable"] = skipped
    if info:
        doc["info"] = info
    return doc


def _forward_ms(capture):
    """The forward's wall time: the profile's timing passes' median where a profile
    measured it, else the capture pass's own (slower: it records every call)."""
    t = getattr(capture, "timed_forward_ms", None)
    if t is None:
        t = capture.forward_ms
    return None if t is None or math.isnan(t) else round(t, 6)


def write_tensors(capture, path) -> str:
    """The q, k, v, mask and output of each replayable case's first call, as
    "case<i>.<name>" arrays of an .npz beside path (bf16 stored as float32, which holds
    every bf16 value exactly). Returns the .npz's file name."""
    import numpy as np

    arrays = {}
    i = 0
    for first, _ in capture.cases():
        if not first.supported:
            continue
        if first.tensors is None:
            raise ValueError("cases file: tensors=True needs a capture made with keep_tensors=True")
        for name, t in first.tensors.items():
            if t is not None:
                t = t.detach().cpu()
                arrays[f"case{i}.{name}"] = (t.float() if str(t.dtype) == "torch.bfloat16" else t).numpy()
        i += 1
    npz = Path(path).with_suffix(".npz")
    np.savez_compressed(npz, **arrays)
    return npz.name


def write_document(doc: dict, path) -> None:
    problems = validate(doc)
    if problems:
        raise ValueError("cases file: " + "; ".join(problems))
    Path(path).write_text(json.dumps(doc, indent=1) + "\n")


def validate(doc: dict) -> list:
    """What the C reader would refuse in doc, as messages (empty when valid)."""
    out = []
    if doc.get("schema") != SCHEMA:
        out.append(f"schema: expected {SCHEMA!r}")
    cases = doc.get("cases")
    if not isinstance(cases, list) or not cases:
        out.append("cases: expected a non-empty list")
        return out
    if len(cases) > 1024:
        out.append(f"cases: {len(cases)} cases, at most 1024")
    for i, c in enumerate(cases):
        for k in c:
            if k not in CASE_KEYS:
                out.append(f"cases[{i}]: unknown member {k!r}")
        for k, lo, hi in (("count", 1, 1 << 40), ("batch", 1, 65536), ("heads", 1, 4096),
                          ("kv_heads", 1, 4096), ("sq", 0, 1 << 22), ("sk", 0, 1 << 22),
                          ("head_dim", 1, 256), ("head_dim_v", 1, 256)):
            v = c.get(k, 1 if k in ("kv_heads", "head_dim_v") else None)
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                out.append(f"cases[{i}].{k}: {v!r} is not an integer in {lo}..{hi}")
        if c.get("dtype") not in ("f32", "f16", "bf16"):
            out.append(f"cases[{i}].dtype: {c.get('dtype')!r}")
        if isinstance(c.get("heads"), int) and isinstance(c.get("kv_heads"), int) and c["kv_heads"] > 0 \
                and c["heads"] % c["kv_heads"]:
            out.append(f"cases[{i}].kv_heads: {c['heads']} heads are not a multiple of {c['kv_heads']}")
        for k, ext in (("seqlens_q", "sq"), ("seqlens_k", "sk")):
            v = c.get(k)
            if v is not None and (len(v) != c.get("batch") or any(not 0 <= x <= c.get(ext, 0) for x in v)):
                out.append(f"cases[{i}].{k}: expected {c.get('batch')} lengths in 0..{c.get(ext)}")
    return out


def read_document(path) -> dict:
    doc = json.loads(Path(path).read_text())
    problems = validate(doc)
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    return doc
