"""The CPU backend leaves the calling thread's CPU affinity as it found it
(docs/api.md, "Threads"; docs/guarantees.md).

With XATTN_CPU_BIND=1 the library binds its OpenMP team to cores inside a
call's parallel regions; unset, it binds nothing. Either way the caller's
mask (and so the mask of every process it starts later) is the same after
the call as before: full, narrowed by the caller, from the main thread or
from another Python thread, with the default threads and with threads=N.
Each test runs with XATTN_CPU_BIND=1 and unset. Skipped where the caller's
mask holds one CPU (nothing to bind). No timing.
"""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import xattn

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="os.sched_getaffinity is Linux-only"),
    pytest.mark.skipif(
        hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) < 2,
        reason="one CPU in this thread's mask: the library has nothing to bind",
    ),
]

ALGOS = ("naive", "flash", "splitkv")


@pytest.fixture(autouse=True, params=["1", None], ids=["bind=1", "bind-default"])
def _own_mask(request, monkeypatch):
    """XATTN_CPU_BIND as the parameter says (the library reads it at each
    call); each test starts from the mask the thread had, whatever the one
    before did."""
    if request.param is None:
        monkeypatch.delenv("XATTN_CPU_BIND", raising=False)
    else:
        monkeypatch.setenv("XATTN_CPU_BIND", request.param)
    mask = os.sched_getaffinity(0)
    yield
    os.sched_setaffinity(0, mask)


def _inputs(rng, b, h, sq, sk, d, hkv=None):
    hkv = hkv or h
    q = rng.standard_normal((b, h, sq, d), dtype=np.float32)
    k = rng.standard_normal((b, hkv, sk, d), dtype=np.float32)
    v = rng.standard_normal((b, hkv, sk, d), dtype=np.float32)
    return q, k, v


def _calls(run, rng):
    """Prefill and decode shapes through every algorithm; each result checked."""
    q, _, _ = _inputs(rng, 1, 4, 80, 80, 32)
    for algo in ALGOS:
        out, _ = run(q, q, q, layout="bhsd", algo=algo)
        assert out.shape == q.shape and np.isfinite(out).all()
    # A larger prefill: several tiles a thread, FLASH's packed K/V.
    q, _, _ = _inputs(rng, 1, 8, 512, 512, 64)
    for algo in ALGOS:
        out, _ = run(q, q, q, layout="bhsd", algo=algo, causal="top-left")
        assert out.shape == q.shape and np.isfinite(out).all()
    q, k, v = _inputs(rng, 2, 8, 1, 600, 64, hkv=2)
    for algo in ALGOS:
        out, _ = run(q, k, v, layout="bhsd", algo=algo)
        assert out.shape == q.shape and np.isfinite(out).all()


def _check_calls(run, rng):
    before = os.sched_getaffinity(0)
    _calls(run, rng)
    after = os.sched_getaffinity(0)
    assert after == before, f"the calling thread's CPU mask was {sorted(before)}, is {sorted(after)}"


def test_attention_leaves_the_callers_mask(rng):
    # The issue's own call first: q, q, q in bhsd on the default CPU context.
    before = os.sched_getaffinity(0)
    q = rng.standard_normal((1, 4, 64, 32), dtype=np.float32)
    xattn.attention(q, q, q, layout="bhsd", backend="cpu")
    assert os.sched_getaffinity(0) == before
    _check_calls(lambda *a, **kw: xattn.attention(*a, backend="cpu", **kw), rng)


@pytest.mark.parametrize("threads", [1, 2, "all"])
def test_context_threads_leave_the_callers_mask(rng, threads):
    n = len(os.sched_getaffinity(0)) if threads == "all" else threads
    ctx = xattn.Context("cpu", threads=n)
    try:
        _check_calls(ctx.attention, rng)
    finally:
        ctx.close()


def test_a_narrowed_mask_is_kept(rng):
    full = os.sched_getaffinity(0)
    ctx = xattn.Context("cpu", threads=2)
    try:
        for n in (1, 2):
            if n >= len(full):
                continue
            narrowed = set(sorted(full)[-n:])  # the last CPUs: not where thread 0 would be bound
            os.sched_setaffinity(0, narrowed)
            try:
                _check_calls(ctx.attention, rng)
                _check_calls(lambda *a, **kw: xattn.attention(*a, backend="cpu", **kw), rng)
                assert os.sched_getaffinity(0) == narrowed
            finally:
                os.sched_setaffinity(0, full)
    finally:
        ctx.close()


def test_another_python_thread(rng):
    main_before = os.sched_getaffinity(0)
    errors = []

    def body():
        try:
            ctx = xattn.Context("cpu", threads=2)
            try:
                _check_calls(ctx.attention, np.random.default_rng(7))
            finally:
                ctx.close()
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    if errors:
        raise errors[0]
    assert os.sched_getaffinity(0) == main_before


def test_processes_started_afterwards_inherit_the_full_mask(rng):
    before = os.sched_getaffinity(0)
    q = rng.standard_normal((1, 8, 512, 64), dtype=np.float32)
    ctx = xattn.Context("cpu")  # its own: a context's first calls are checked
    try:
        for algo in ALGOS:
            ctx.attention(q, q, q, layout="bhsd", algo=algo)
    finally:
        ctx.close()
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
        capture_output=True, text=True, check=True, timeout=120,
    )
    assert child.stdout.strip() == str(sorted(before))
