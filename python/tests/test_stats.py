"""The timing statistics of the profile and of `python -m xattn compare`
(docs/python.md, "The profile"): the order-statistic interval of the median
against exact binomial values, the converged flag, the one verdict rule and the
load line. Synthetic samples only: nothing here depends on timing."""

import math

import pytest

from xattn._stats import (is_converged, load_line, load_section, median_ci_ranks, real_difference, summarize,
                          verdict)


def binom_tail(k, n):  # P(B <= k), B ~ Binomial(n, 1/2), computed here independently
    return sum(math.comb(n, i) for i in range(0, k + 1)) / 2 ** n


@pytest.mark.parametrize("n,l,level", [
    (1, 1, 0.0), (2, 1, 0.5), (3, 1, 0.75), (4, 1, 0.875), (5, 1, 0.9375), (6, 1, 1 - 2 / 64),
    (8, 1, 1 - 2 / 256), (9, 2, 1 - 2 * 10 / 512), (10, 2, 1 - 2 * 11 / 1024),
    (20, 6, 1 - 2 * 21700 / 2 ** 20), (100, 40, None)])
def test_median_interval_ranks_are_the_exact_binomial_ones(n, l, level):
    lo, hi, cov = median_ci_ranks(n)
    assert (lo, hi) == (l, n + 1 - l)
    if level is not None:
        assert cov == pytest.approx(level, abs=1e-15)
    # the definition itself: the largest l whose coverage reaches 95% (or l = 1 below n = 6)
    assert cov == pytest.approx(1 - 2 * binom_tail(lo - 1, n), abs=1e-15)
    if n >= 6:
        assert cov >= 0.95 and 1 - 2 * binom_tail(lo, n) < 0.95


def test_summarize_keeps_every_sample_in_order_and_the_interval():
    xs = [5.0, 1.0, 4.0, 2.0, 3.0, 9.0, 7.0, 8.0, 6.0]
    s = summarize(xs)
    assert s["samples"] == xs and s["n"] == 9
    assert s["median"] == 5.0 and s["min"] == 1.0 and s["max"] == 9.0
    assert (s["ci_low"], s["ci_high"]) == (2.0, 8.0)  # ranks 2 and 8 of the sorted samples
    assert s["ci_level"] == pytest.approx(1 - 2 * 10 / 512)
    assert s["p90"] == 9.0 and s["mad"] == 2.0 and s["spread"] == pytest.approx(0.4)
    assert not s["converged"]  # (8 - 2) / 5 is far above 2 x 5%


def test_summarize_small_n_is_min_max_at_its_real_level():
    s = summarize([3.0, 1.0, 2.0, 5.0, 4.0])
    assert (s["ci_low"], s["ci_high"], s["ci_level"]) == (1.0, 5.0, 0.9375)
    s = summarize([2.0, 1.0])
    assert (s["ci_low"], s["ci_high"], s["ci_level"]) == (1.0, 2.0, 0.5)
    assert summarize([])["n"] == 0 and summarize([float("nan"), None])["median"] is None


def test_converged_needs_five_samples_a_narrow_interval_and_budget_left():
    narrow = [1.0, 1.01, 0.99, 1.02, 1.0]
    assert not summarize(narrow[:4])["converged"]  # too few
    assert summarize(narrow)["converged"] and is_converged(summarize(narrow))
    assert not summarize(narrow, budget_exhausted=True)["converged"]
    wide = [1.0, 1.2, 0.9, 1.3, 1.0]
    assert not summarize(wide)["converged"]
    assert summarize(wide, target=0.25)["converged"]  # (1.3 - 0.9) / 1.0 <= 2 x 0.25


def test_verdict_only_where_the_intervals_separate():
    fast = summarize([1.0, 1.1, 0.9, 1.05, 0.95])
    slow = summarize([2.0, 2.1, 1.9, 2.05, 1.95])
    v = verdict(fast, slow, "xattn", "sdpa", "wall clock")
    assert v["result"] == "a" and v["ratio"] == pytest.approx(2.0)
    assert v["text"] == "xattn is 2.00x faster than sdpa (wall clock)"
    v = verdict(slow, fast, "xattn", "sdpa", "kernel clock")
    assert v["result"] == "b" and v["ratio"] == pytest.approx(0.5) and "sdpa is 2.00x faster" in v["text"]
    # overlapping intervals: no ratio verdict, the words "within noise"
    a = summarize([1.0, 1.5, 0.5, 1.2, 0.8])
    b = summarize([1.4, 1.6, 1.3, 1.45, 1.35])
    v = verdict(a, b, "A", "B", "wall clock")
    assert v["result"] == "within noise" and "within noise" in v["text"] and "faster" not in v["text"]
    assert not real_difference(a, b) and real_difference(fast, slow)
    # touching intervals do not separate
    c = summarize([1.0, 1.0, 1.0, 1.0, 1.0])
    d = summarize([1.0, 2.0, 2.0, 2.0, 2.0])
    assert verdict(c, d)["result"] == "within noise"
    assert verdict(c, summarize([]))["result"] == "no data"


def test_verdict_of_a_share_says_higher_or_lower():
    lo = summarize([0.10, 0.11, 0.09, 0.10, 0.10])
    hi = summarize([0.20, 0.21, 0.19, 0.20, 0.20])
    assert "higher" in verdict(lo, hi, "A", "B", lower_is_better=False)["text"]
    assert "lower" in verdict(hi, lo, "A", "B", lower_is_better=False)["text"]


def test_load_busy_when_either_end_exceeds_the_cpus():
    calm = {"load1": 0.5, "load5": 0.5, "load15": 0.5}
    busy = {"load1": 2.0, "load5": 1.0, "load15": 1.0}
    assert not load_section(calm, calm, cpus=2)["busy"]
    assert load_section(calm, busy, cpus=2)["busy"] and load_section(busy, calm, cpus=2)["busy"]
    assert not load_section(calm, {"load1": 1.5, "load5": 0, "load15": 0}, cpus=2)["busy"]  # 1.5 = 2 - 0.5
    line = load_line(load_section(calm, busy, cpus=2))
    assert "BUSY" in line and "2 CPUs" in line and "0.50 at the start" in line and "2.00 at the end" in line
    assert "not known" in load_line(load_section({"load1": None}, {"load1": None}, cpus=2))
