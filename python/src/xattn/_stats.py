"""Statistics of repeated timings, with the same definitions as the C tool
(docs/tool.md): median, min, nearest-rank p90, MAD, spread = MAD / median, and
the noise rule of `xattn compare`."""

from __future__ import annotations

import math


def summarize(xs) -> dict:
    xs = sorted(float(x) for x in xs if x is not None and not math.isnan(x))
    n = len(xs)
    if n == 0:
        return {"n": 0, "median": None, "min": None, "max": None, "p90": None, "mad": None, "spread": None}
    med = _median(xs)
    mad = _median(sorted(abs(x - med) for x in xs))
    p90 = xs[max(0, math.ceil(0.9 * n) - 1)]
    return {"n": n, "median": med, "min": xs[0], "max": xs[-1], "p90": p90, "mad": mad,
            "spread": mad / med if med > 0 else 0.0}


def _median(xs):
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def real_difference(a: dict, b: dict) -> bool:
    """True when two timing summaries differ beyond noise: their [min, p90]
    intervals do not overlap and the ratio of medians is beyond both spreads."""
    if not a.get("n") or not b.get("n"):
        return False
    if a["min"] <= b["p90"] and b["min"] <= a["p90"]:
        return False
    ratio = max(a["median"], b["median"]) / max(min(a["median"], b["median"]), 1e-300)
    return ratio - 1 > max(a["spread"], b["spread"])
