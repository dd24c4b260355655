"""xattn's calls in torch.profiler, on PyTorch's time base.

While a torch.profiler (or torch.autograd.profiler) session records, every
xattn.attention call made from Python (the drop-in SDPA, the transformers
attention function, the capture's replays, xattn.attention itself) runs inside
a ``record_function`` range named

    xattn <layer or "attention"> [<backend> <algorithm requested>]

and its record (host span, device span, phases) is kept. ``export_chrome_trace``
writes the profiler's trace and adds xattn's events to it, converted to the
trace's time base:

* xattn's records are microseconds on CLOCK_MONOTONIC since the context was
  created (docs/measurement.md, "Timeline"); the context's origin is not
  published by the library, so it is bounded from each call: xattn.attention reads
  CLOCK_MONOTONIC (time.monotonic_ns) just before the C call (a) and just after
  it (b); the call's host_submit_us and host_return_us lie between them, so the
  origin lies in [a - host_submit_us, b - host_return_us]. The intersection of
  these intervals over a context's calls is kept; any origin in it puts every
  call's events inside its [a, b], hence inside its record_function range.
* torch.profiler (Kineto) stamps events in Unix time (c10's clock: CLOCK_REALTIME
  through a TSC fit on x86) and writes ``ts`` in microseconds relative to the
  trace's ``baseTimeNanoseconds`` (absolute Unix microseconds where a trace has
  none). CLOCK_MONOTONIC maps to Unix time by an offset read at each call (the two
  clocks read back to back).
"""

from __future__ import annotations

import collections
import json
import os
import threading
import time
import weakref

import torch

from .. import _core

if time.get_clock_info("monotonic").implementation != "clock_gettime(CLOCK_MONOTONIC)":  # pragma: no cover
    _MONO_OK = False
else:
    _MONO_OK = True


class _Origin:
    """Bounds on a context's profiler origin, in CLOCK_MONOTONIC microseconds."""

    __slots__ = ("lo", "hi")

    def __init__(self):
        self.lo, self.hi = float("-inf"), float("inf")

    def add(self, a_us, b_us, submit_us, return_us):
        self.lo = max(self.lo, a_us - submit_us)
        self.hi = min(self.hi, b_us - return_us)

    def value(self):
        if self.lo > self.hi:  # cannot happen on one clock: a sign that the clocks differ
            return None
        return 0.5 * (self.lo + self.hi)


# The record fields the trace events use (the rest of a record is not kept).
_REC_FIELDS = ("seq", "algo_chosen", "host_submit_us", "host_return_us", "device_start_us", "device_end_us",
               "phase_names", "phase_ms", "phase_start_us", "device_name", "device_ms", "gflops_useful", "kernel")


class _Tracer:
    def __init__(self):
        self.lock = threading.Lock()
        self.calls = collections.deque(maxlen=100_000)  # calls seen while a profiler was on, not exported
        self.origins = weakref.WeakKeyDictionary()  # Context -> _Origin

    @staticmethod
    def profiling() -> bool:
        return bool(torch.autograd._profiler_enabled())

    def begin(self, ctx, name, algo):
        if not _MONO_OK or not self.profiling():
            return None
        label = f"xattn {name or 'attention'} [{ctx.backend} {algo}]"
        rf = torch.autograd.profiler.record_function(label)
        rf.__enter__()
        m1 = time.monotonic_ns()
        u = time.time_ns()
        m2 = time.monotonic_ns()
        return [rf, ctx, name or "", algo, label, u - (m1 + m2) // 2]

    def end(self, span, rec, a, b):
        rf, ctx, name, algo, label, unix_minus_mono = span
        rf.__exit__(None, None, None)
        if not isinstance(rec, dict) or "host_submit_us" not in rec or not a or not b:
            return
        with self.lock:
            org = self.origins.get(ctx)
            if org is None:
                org = self.origins[ctx] = _Origin()
            org.add(a / 1e3, b / 1e3, rec["host_submit_us"], rec["host_return_us"])
            slim = {k: rec.get(k) for k in _REC_FIELDS}
            self.calls.append({"label": label, "name": name, "algo_requested": algo, "backend": ctx.backend,
                               "device": ctx.device, "rec": slim, "a_us": a / 1e3, "b_us": b / 1e3,
                               "unix_minus_mono_us": unix_minus_mono / 1e3, "origin": org, "pid": os.getpid(),
                               "tid": threading.get_native_id()})

    def take(self) -> list:
        with self.lock:
            out = list(self.calls)
            self.calls.clear()
        return out


tracer = _Tracer()
_core.set_tracer(tracer)


def xattn_events(calls: list, base_ns: int = 0) -> list:
    """Chrome-trace events for recorded calls: each call's host span, device span
    and phases, in the trace's microseconds (Unix time minus base_ns)."""
    events, named = [], set()
    for c in calls:
        t0 = c["origin"].value()
        if t0 is None:
            continue
        r = c["rec"]
        off = t0 + c["unix_minus_mono_us"] - base_ns / 1e3  # record microseconds -> trace microseconds
        pid = c["pid"]
        tid = 7_700_000 + 100 * {"cpu": 0, "opencl": 1, "cuda": 2}.get(c["backend"], 3) + int(c["device"])
        if (pid, tid) not in named:
            named.add((pid, tid))
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": f"xattn {c['backend']}:{c['device']} ({r.get('device_name', '')})"}})
        seq = r.get("seq", 0)
        common = {"range": c["label"], "layer": c["name"], "seq": seq, "algo": r.get("algo_chosen"),
                  "clock": "xattn CLOCK_MONOTONIC record times mapped to the trace's Unix time base"}
        events.append({"ph": "X", "cat": "xattn", "name": f"xattn_attention #{seq}", "pid": pid, "tid": tid,
                       "ts": r["host_submit_us"] + off, "dur": r["host_return_us"] - r["host_submit_us"],
                       "args": dict(common, span="host")})
        events.append({"ph": "X", "cat": "xattn", "name": f"{r.get('algo_chosen')} #{seq}", "pid": pid,
                       "tid": tid, "ts": r["device_start_us"] + off,
                       "dur": r["device_end_us"] - r["device_start_us"],
                       "args": dict(common, span="device", device_ms=r.get("device_ms"),
                                    gflops_useful=r.get("gflops_useful"), kernel=r.get("kernel"))})
        for pn, pms, ps in zip(r.get("phase_names", []), r.get("phase_ms", []), r.get("phase_start_us", [])):
            events.append({"ph": "X", "cat": "xattn.phase", "name": pn, "pid": pid, "tid": tid,
                           "ts": ps + off, "dur": pms * 1e3, "args": dict(common, span="phase")})
    return events


def export_chrome_trace(prof, path) -> dict:
    """Writes prof's Chrome/Perfetto trace (torch.profiler.profile, stopped) to
    path with xattn's events of the calls made while it recorded (their host span,
    device span and phases, on a track "xattn <backend>:<device>") on the trace's
    time base. Returns {"events": n added, "calls": n}."""
    path = str(path)
    prof.export_chrome_trace(path)
    with open(path) as f:
        doc = json.load(f)
    base = int(doc.get("baseTimeNanoseconds", 0) or 0)
    spans = [(e["ts"], e["ts"] + e.get("dur", 0)) for e in doc.get("traceEvents", [])
             if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
    calls = tracer.take()
    if spans:  # the calls of this trace's window (a session never exported leaves older ones)
        lo, hi = min(s for s, _ in spans), max(t for _, t in spans)
        calls = [c for c in calls if lo <= c["a_us"] + c["unix_minus_mono_us"] - base / 1e3 <= hi]
    evs = xattn_events(calls, base)
    doc.setdefault("traceEvents", []).extend(evs)
    other = doc.setdefault("xattn", {})
    other.update({"schema": "xattn.torch-trace/1", "calls": len(calls),
                  "time_base": "ts = Unix microseconds - baseTimeNanoseconds / 1000 (PyTorch's); xattn's "
                               "CLOCK_MONOTONIC records converted"})
    with open(path, "w") as f:
        json.dump(doc, f)
    return {"events": len(evs), "calls": len(calls)}


def timeline_svg(doc: dict, width: int = 960, start=None, end=None) -> str:
    """An SVG drawing of a trace written by export_chrome_trace: the model's outermost
    ops of the thread that called xattn, the xattn record_function ranges, and xattn's
    device spans and phases, on the trace's one time axis (ms from the first event
    shown); start / end: the window, in the trace's ts (microseconds)."""
    ev = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X" and "ts" in e]
    if start is not None or end is not None:
        lo = float("-inf") if start is None else start
        hi = float("inf") if end is None else end
        ev = [dict(e, ts=max(e["ts"], lo), dur=min(e["ts"] + e.get("dur", 0), hi) - max(e["ts"], lo))
              for e in ev if e["ts"] < hi and e["ts"] + e.get("dur", 0) > lo]  # clipped to the window
    xs = [e for e in ev if str(e.get("cat", "")).startswith("xattn")]
    ranges = [e for e in ev if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("xattn ")]
    if not xs or not ranges:
        raise ValueError("timeline_svg: the trace has no xattn events (write it with export_chrome_trace)")
    tid = ranges[0]["tid"]
    ops = sorted((e for e in ev if e.get("cat") == "cpu_op" and e.get("tid") == tid),
                 key=lambda e: (e["ts"], -e["dur"]))
    top, end = [], float("-inf")
    for e in ops:  # outermost ops only
        if e["ts"] >= end:
            top.append(e)
            end = e["ts"] + e["dur"]
    t0 = min(e["ts"] for e in top + ranges + xs)
    t1 = max(e["ts"] + e["dur"] for e in top + ranges + xs)
    left, lane, pad = 150, 26, 6
    scale = (width - left - 10) / max(t1 - t0, 1e-9)

    def box(e, y, color, label=True):
        x = left + (e["ts"] - t0) * scale
        w = max(e["dur"] * scale, 0.8)
        name = str(e["name"]).replace("&", "&amp;").replace("<", "&lt;")
        t = f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{lane - pad}" fill="{color}"><title>{name} ' \
            f'{e["dur"]:.1f} us</title></rect>'
        if label and w > 7 * len(name):
            t += f'<text x="{x + 3:.1f}" y="{y + lane - pad - 6}" font-size="11">{name}</text>'
        return t

    rows = [("torch ops (outermost)", [box(e, 30, "#9ecae1") for e in top]),
            ("record_function", [box(e, 30 + lane, "#fdd0a2") for e in ranges]),
            ("xattn device span", [box(e, 30 + 2 * lane, "#a1d99b") for e in xs if e["args"].get("span") == "device"]),
            ("xattn phases", [box(e, 30 + 3 * lane, "#31a354") for e in xs if e.get("cat") == "xattn.phase"])]
    h = 30 + 4 * lane + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" font-family="sans-serif">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="18" font-size="12">one torch.profiler trace: the model\'s ops and xattn\'s phases '
           f'(one time axis: the trace\'s ts; {(t1 - t0) / 1e3:.2f} ms shown)</text>']
    for i, (name, boxes) in enumerate(rows):
        out.append(f'<text x="10" y="{30 + i * lane + lane - pad - 6}" font-size="11">{name}</text>')
        out.extend(boxes)
    ya = 30 + 4 * lane + 5
    out.append(f'<line x1="{left}" y1="{ya}" x2="{width - 10}" y2="{ya}" stroke="black"/>')
    for k in range(6):
        x = left + k * (width - left - 10) / 5
        out.append(f'<text x="{x:.0f}" y="{ya + 15}" font-size="10" text-anchor="middle">'
                   f'{k * (t1 - t0) / 5e3:.2f} ms</text>')
    out.append("</svg>")
    return "\n".join(out)


def reset() -> None:
    """Drops the calls recorded and not yet exported."""
    tracer.take()


__all__ = ["export_chrome_trace", "reset", "timeline_svg", "xattn_events"]
