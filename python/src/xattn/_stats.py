"""Statistics of repeated timings, with the same definitions as the C tool
(docs/tool.md): median, min, nearest-rank p90, MAD, spread = MAD / median, every
sample kept, the distribution-free confidence interval of the median (order
statistics), a "converged" flag, the one verdict rule of every comparison, and
the machine's load (docs/python.md, "The profile")."""

from __future__ import annotations

import math
import os

CI_LEVEL = 0.95
DEFAULT_TARGET = 0.05


def _binom_cdf_half(k: int, n: int) -> float:
    """P(B <= k), B ~ Binomial(n, 1/2), exact."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return sum(math.comb(n, i) for i in range(k + 1)) / (1 << n)  # exact ints: no overflow past n = 1023


def median_ci_ranks(n: int, level: float = CI_LEVEL):
    """(l, u, coverage): the 1-based ranks of the order-statistic interval of the
    median, u = n + 1 - l, with the largest l whose coverage 1 - 2 P(B <= l - 1)
    is at least `level`. When n is too small for any l to reach it, l = 1 (the
    interval [min, max]) and the coverage is what that interval really has."""
    if n <= 0:
        return None
    best, cum, term, total = 1, 0, 1, 1 << n  # cum = sum of C(n, i) for i < l, kept exact
    coverage = 1 - 2 / total  # l = 1: [min, max]
    for l in range(1, (n + 1) // 2 + 1):
        cum += term  # + C(n, l - 1)
        term = term * (n - l + 1) // l  # C(n, l)
        c = 1 - 2 * (cum / total)
        if c >= level:
            best, coverage = l, c
        else:
            break
    return best, n + 1 - best, coverage


def summarize(xs, target: float = DEFAULT_TARGET, budget_exhausted: bool = False) -> dict:
    """The stats dict of a list of timings (ms; None and NaN dropped): n, median,
    min, max, p90, mad, spread, samples (in the order taken), ci_low, ci_high,
    ci_level and converged (n >= 5 and (ci_high - ci_low) / median <= 2 * target,
    and the cell did not run out of its budget first)."""
    samples = [float(x) for x in xs if x is not None and not math.isnan(x)]
    ys = sorted(samples)
    n = len(ys)
    if n == 0:
        return {"n": 0, "median": None, "min": None, "max": None, "p90": None, "mad": None, "spread": None,
                "samples": [], "ci_low": None, "ci_high": None, "ci_level": None, "converged": False}
    med = _median(ys)
    mad = _median(sorted(abs(x - med) for x in ys))
    p90 = ys[max(0, math.ceil(0.9 * n) - 1)]
    lo, hi, level = median_ci_ranks(n)
    ci_low, ci_high = ys[lo - 1], ys[hi - 1]
    narrow = med > 0 and (ci_high - ci_low) / med <= 2 * target
    return {"n": n, "median": med, "min": ys[0], "max": ys[-1], "p90": p90, "mad": mad,
            "spread": mad / med if med > 0 else 0.0, "samples": samples, "ci_low": ci_low, "ci_high": ci_high,
            "ci_level": level, "converged": bool(n >= 5 and narrow and not budget_exhausted)}


def is_converged(s: dict, target: float = DEFAULT_TARGET) -> bool:
    """The convergence test alone (the stopping rule of a timed cell)."""
    if not s or not s.get("n") or s["n"] < 5 or not s.get("median"):
        return False
    return (s["ci_high"] - s["ci_low"]) / s["median"] <= 2 * target


def _median(xs):
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def has_interval(s) -> bool:
    return bool(s) and bool(s.get("n")) and s.get("ci_low") is not None and s.get("ci_high") is not None \
        and s.get("median") is not None


def verdict(a: dict, b: dict, name_a: str = "A", name_b: str = "B", clock: str = "", lower_is_better=True) -> dict:
    """The one verdict rule: a is faster than b only where the intervals separate
    (a.ci_high < b.ci_low); ratio = b.median / a.median; otherwise "within noise".
    Returns {"result": "a" | "b" | "within noise" | "no data", "ratio", "text"}.
    lower_is_better=False words it for figures that are not times (a share): the
    separation is judged the same way, the words say "higher" / "lower"."""
    on = f" ({clock})" if clock else ""
    if not (has_interval(a) and has_interval(b)):
        return {"result": "no data", "ratio": None, "clock": clock,
                "text": f"{name_a} vs {name_b}: no interval to judge{on}"}
    ratio = b["median"] / a["median"] if a["median"] > 0 else math.inf
    if a["ci_high"] < b["ci_low"]:
        res = "a"
    elif b["ci_high"] < a["ci_low"]:
        res = "b"
    else:
        res = "within noise"
    if res == "within noise":
        text = f"{name_a} vs {name_b}{on}: within noise (ratio {ratio:.2f}x, the intervals overlap)"
    elif lower_is_better:
        fast, slow, r = (name_a, name_b, ratio) if res == "a" else (name_b, name_a, 1 / ratio if ratio else math.inf)
        text = f"{fast} is {r:.2f}x faster than {slow}{on}"
    else:
        word = "higher" if res == "a" else "lower"  # a below b: b is the higher
        text = f"{name_b} is {word} than {name_a}: {ratio:.2f}x{on}"
    return {"result": res, "ratio": ratio, "clock": clock, "text": text}


def real_difference(a: dict, b: dict) -> bool:
    """True when two timing summaries differ beyond noise (their intervals separate)."""
    return verdict(a, b)["result"] in ("a", "b")


def cpus_available() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def load_snapshot() -> dict:
    """The 1, 5 and 15-minute load averages now (None where the platform has none)
    and the CPUs available to the process."""
    try:
        l1, l5, l15 = os.getloadavg()
        out = {"load1": l1, "load5": l5, "load15": l15}
    except (AttributeError, OSError):
        out = {"load1": None, "load5": None, "load15": None}
    out["cpus"] = cpus_available()
    return out


def load_section(start: dict, end: dict, cpus: int = None) -> dict:
    """The run's load: start and end, the CPUs available to the process, and busy
    (the 1-minute load at either end above cpus - 0.5: the machine is oversubscribed)."""
    cpus = cpus or (start or {}).get("cpus") or cpus_available()
    l1 = [x["load1"] for x in (start, end) if x and x.get("load1") is not None]
    busy = bool(l1) and max(l1) > cpus - 0.5
    return {"start": start, "end": end, "cpus": cpus, "busy": busy, "known": bool(l1)}


def load_line(load: dict) -> str:
    if not load or not load.get("known"):
        return "load: not known on this platform"
    s, e = load["start"], load["end"]
    txt = (f"load: {s['load1']:.2f} at the start, {e['load1']:.2f} at the end (1-minute averages), "
           f"{load['cpus']} CPU{'s' if load['cpus'] != 1 else ''} available")
    if load["busy"]:
        txt += ("; BUSY: the machine was oversubscribed, timings are inflated and noisy (every verdict "
                "below is still judged on intervals)")
    return txt
