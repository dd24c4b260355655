"""The profile's report as text and as an SVG chart (no plotting library needed)."""

from __future__ import annotations

from xml.sax.saxutils import escape

from ._stats import load_line, verdict


def _bytes(n, digits: int = 1) -> str:
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.{digits}f} {unit}"
        n /= 1024
    return f"{n:.{digits}f} GiB"


def _ms(s, digits=4) -> str:
    if not s or s.get("median") is None:
        return "-"
    return f"{s['median']:.{digits}f}"


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _ci(s, digits=4, pct=False) -> str:
    """'median [ci_low..ci_high]' (a share in %), with '~' when the cell did not converge."""
    if not s or s.get("median") is None:
        return "-"
    f = (lambda x: f"{100 * x:.1f}%") if pct else (lambda x: f"{x:.{digits}g}")
    mark = "" if s.get("converged", True) else "~"
    if s.get("ci_low") is None:
        return f(s["median"]) + mark
    return f"{f(s['median'])} [{f(s['ci_low'])}..{f(s['ci_high'])}]{mark}"


def _vs(v) -> str:
    """A 'vs SDPA' cell of the table: xattn's ratio to SDPA on one clock, only
    where the intervals separate."""
    if not v or v.get("result") == "no data":
        return "-"
    if v["result"] == "a":
        return f"{v['ratio']:.2f}x faster"
    if v["result"] == "b":
        return f"{1 / v['ratio']:.2f}x slower" if v["ratio"] else "slower"
    return "within noise"


def _work_line(cells) -> str:
    """executed / useful FLOPs of the algorithms that ran, each with what its own
    figures say it did with the padding or the masked pairs."""
    seen = {}
    for x in cells:
        if x.get("form") or not x.get("flops_useful") or x["algo"] in seen:
            continue
        ex, us, de = x["flops_executed"], x["flops_useful"], x["flops_dense"]
        r = ex / us
        if ex == us:
            why = "skips all of it"
        elif ex >= de:
            why = "computes the whole padded rectangle"
        else:
            why = f"computes {100 * (ex - us) / max(de - us, 1):.0f}% of the masked pairs (partial tiles)"
        seen[x["algo"]] = f"{x['algo']} {r:.2f}x ({why})"
    return ", ".join(seen.values())


def _header_lines(r: dict, w) -> None:
    """The report's first lines: the model and versions, the load, the kinds of
    attention, what was not mapped, torch.profiler's note."""
    n_pass = r.get("passes", r.get("reps"))
    w(f"xattn profile: {r.get('model') or 'model'} on {r['device']} (torch {r['torch_version']}, "
      f"xattn {r['xattn_version']}), {n_pass} timing passes, {r['calls']} attention calls")
    if r.get("load"):
        w(r["load"].get("line") or load_line(r["load"]))
    kinds = r.get("attention_kinds") or {}
    if kinds.get("eager"):
        w(f"attention: {kinds.get('sdpa', 0)} SDPA calls, {kinds['eager']} written by hand (matmul -> softmax -> "
          "matmul, timed from the first matmul to the second)")
    for u in r.get("unmapped", []):
        w(f"not mapped: hand-written attention in {u['module'] or 'the model'}: {u['reason']}")
    if (r.get("torch_profiler") or {}).get("note"):
        w(f"torch.profiler: {r['torch_profiler']['note']}")


def _forward_lines(fwd: dict, kinds: dict, w) -> None:
    """The forward's section: its wall (and CPU) time, attention's share, and
    torch.profiler's share in the same process."""
    sh = fwd["attention_share"]
    cpu = fwd.get("forward_cpu_ms")
    w("")
    w("the forward, wall clock from Python (median [95% interval of the median] over the timing passes):")
    w(f"  forward    {_ci(fwd['forward_ms'])} ms"
      + (f"; CPU time {_ci(cpu)} ms (the process, all threads)" if cpu and cpu.get("n") else ""))
    w(f"  attention  {_ci(fwd['attention_ms'])} ms = {_ci(sh, pct=True)} of the forward "
      + ("(the SDPA calls and the hand-written spans, each timed from Python)" if kinds.get("eager")
         else "(the SDPA calls, each timed from Python)"))
    tp = fwd.get("torch_profiler")
    if tp:
        w(f"  torch.profiler, same process: attention {_ci(tp['attention_share'], pct=True)} of the forward "
          f"({tp['clock']}); "
          + ("agrees with the share above (the intervals overlap)" if tp["agree"]
             else "DISAGREES with the share above (the intervals do not overlap)"))


def _layer_lines(lay: dict, w) -> None:
    """The layer table and its sum against the total."""
    w("")
    w("layers, wall clock (attention = the layer's SDPA calls, block = the layer's module, timed from Python):")
    w(f"{'layer':<28} {'calls':>5} {'attn ms [95% CI]':>26} {'% fwd':>7} {'block ms':>9} {'% block':>8}")
    for row in lay["rows"]:
        blk = row.get("block_ms")
        w(f"{row['layer'][:28]:<28} {row['calls']:>5} {_ci(row['attention_ms']):>26} "
          f"{_pct(row['share_of_forward']['median']):>7} {_ms(blk, 3) if blk else '-':>9} "
          f"{_pct(row['share_of_block']['median']) if blk else '-':>8}")
    w(f"layers add up to {lay['sum_of_layers_ms']:.4f} ms, the total is {lay['total_ms']:.4f} ms "
      f"(difference {lay['difference_ms']:+.4f} ms, noise {lay['noise_ms']:.4f} ms)")


def _memory_lines(tmem: dict, w) -> None:
    """The forward's memory as torch.profiler saw it (or why it is missing)."""
    if tmem.get("forward_peak_bytes") is not None:
        masks = "; ".join(f"mask {_bytes(m['bytes'])} ({m['dtype']}): {m['allocations']} allocation"
                          f"{'s' if m['allocations'] != 1 else ''} of that size outside SDPA"
                          for m in tmem.get("masks", []))
        w(f"memory, {tmem.get('kind', 'torch.profiler')}: the forward allocates "
          f"{_bytes(tmem['forward_allocated_bytes'])}, "
          f"its peak is {_bytes(tmem['forward_peak_bytes'])} above what was live at its start"
          + (f"; CUDA allocator's peak {_bytes(tmem['cuda_allocator_peak_bytes'])}"
             if tmem.get("cuda_allocator_peak_bytes") is not None else "")
          + (f"; {masks}" if masks else ""))
        if tmem.get("note"):
            w(f"  {tmem['note']}")
    elif tmem.get("error"):
        w(f"memory (torch.profiler): {tmem['error']}")


def _case_head_lines(c: dict, w) -> None:
    """A case's first lines: its key and layers, the mask, the note, PyTorch's
    kernel, the decode bucket, the padding, the work and the packed form."""
    w("")
    lay_txt = ", ".join(c["layers"][:3]) + (" ..." if len(c["layers"]) > 3 else "")
    w(f"case {c['case']}: {c['key']}, {c['count']} call{'s' if c['count'] != 1 else ''} ({lay_txt})")
    w(f"  mask      {c['mask_meaning']}"
      + (f"; K/V repeated x{c['kv_repeated_by_caller']} by the model (xattn reads the "
         f"{c['shape']['kv_heads']} KV heads)" if c["kv_repeated_by_caller"] > 1 else "")
      + ("; the model folded its query heads into rows (SDPA saw Sq = "
         f"{c['q_packed_by_caller']}); xattn runs them as heads" if c.get("q_packed_by_caller", 1) > 1 else ""))
    if c.get("note"):
        w(f"  note      {c['note']}")
    if c.get("kind") == "eager":
        w(f"  attention {c['attention']} (replayed as written, and as SDPA, on the recovered tensors)")
    elif c.get("pytorch", {}).get("kernel_chosen"):
        w(f"  pytorch   SDPA ran its {c['pytorch']['kernel_chosen']} kernel"
          + (f" ({c['pytorch']['kernel_op']})" if c["pytorch"].get("kernel_op") else ""))
    if c.get("kv_bucket"):
        kb = c["kv_bucket"]
        w(f"  decode    {c['count']} decode calls of Sk {kb['sk_min']}..{kb['sk_max']} (KV-length bucket "
          f"{kb['bucket'][0]}..{kb['bucket'][1]}), timed at the Sk nearest their mean ({kb['representative_sk']})")
    _case_padding_lines(c, w)


def _case_padding_lines(c: dict, w) -> None:
    """A padded case's padding, executed / useful work, and the packed form against the padded one."""
    pad = c["padding"]
    if pad["seqlens_k"] is not None:
        waste = [x["padding_waste"] for x in c["xattn"] if x.get("padding_waste") is not None]
        w(f"  padding   {_pct(pad['waste_from_token_counts'])} of the B x Sq x Sk rectangle is padding "
          f"(token counts); xattn's records: {_pct(waste[0]) if waste else '-'}")
    work = _work_line(c["xattn"])
    if work and pad["seqlens_k"] is not None:
        w(f"  work      executed / useful FLOPs: {work}")
    for p in c["packed"]:
        fl = [x for x in c["xattn"] if x["backend"] == p["backend"] and x["algo"] == "flash"]
        if fl and fl[0]["device_ms"].get("median") and p["device_ms"].get("median"):
            v = verdict(p["device_ms"], fl[0]["device_ms"], f"{p['backend']} flash packed",
                        f"{p['backend']} flash padded", "kernel clock")
            w(f"  packed    {v['text']}; {_bytes(p['bytes_actual'])} moved vs {_bytes(fl[0]['bytes_actual'])}")


def _case_table_lines(c: dict, sd: dict, w) -> None:
    """A case's table: PyTorch's row, its SDPA backends' rows, xattn's cells, the refusals."""
    impl = sd.get("impl", "sdpa")
    vs = "SDPA" if impl == "sdpa" else impl
    w(f"  {'device':<10}{'algo':<14}{'wall ms [95% CI]':>26} {'cpu ms':>9} {'kernel ms [95% CI]':>26} "
      f"{'GFLOP/s':>8} {'workspace':>10} {'wall vs ' + vs:>13}  {'kernel vs ' + vs:>14}")
    w(f"  {'pytorch':<10}{impl:<14}{_ci(sd.get('wall_ms')):>26} {_ms(sd.get('cpu_ms'), 3):>9} "
      f"{_ci(sd.get('kernel_ms')):>26}")
    for b in c.get("pytorch_backends", []):
        _sdpa_backend_row(b, w)
    for cell in c["xattn"] + c["packed"]:
        _xattn_row(cell, w)
    for e in c["errors"]:
        w(f"  {e['backend']:<10}{e['algo']:<14} {e['status']}: {e['message']}")


def _sdpa_backend_row(b: dict, w) -> None:
    """One of PyTorch's SDPA backends on the case (or why it refused it)."""
    nm = "sdpa " + b["backend"] if b["backend"] != "default" else "sdpa"
    if not b["runs"]:
        w(f"  {'pytorch':<10}{nm:<14} refused: {b['refused']}")
        return
    bv = b.get("vs_model", {})
    w(f"  {'pytorch':<10}{nm:<14}{_ci(b.get('wall_ms')):>26} {_ms(b.get('cpu_ms'), 3):>9} "
      f"{_ci(b.get('kernel_ms')):>26} {'':>8} {'':>10} {_vs(bv.get('wall')):>13}  {_vs(bv.get('kernel')):>14}")


def _xattn_row(cell: dict, w) -> None:
    """One xattn cell of the case: an algorithm on a backend (padded or packed)."""
    name = cell["algo"] + (" packed" if cell.get("form") else "")
    gf = f"{cell['gflops_useful']:.2f}" if cell.get("gflops_useful") else "-"
    vs = cell.get("vs_sdpa", {})
    w(f"  {cell['backend'] + ':' + str(cell['device']):<10}{name:<14}{_ci(cell['wall_ms']):>26} "
      f"{_ms(cell.get('cpu_ms'), 3):>9} {_ci(cell['device_ms']):>26} {gf:>8} "
      f"{_bytes(cell['workspace_bytes']):>10} {_vs(vs.get('wall')):>13}  {_vs(vs.get('kernel')):>14}")


def _case_memory_lines(c: dict, mr: dict, w) -> None:
    """A case's memory: PyTorch's SDPA call (torch.profiler) and xattn's exact workspace."""
    tp_mem = mr.get("pytorch")
    xa = ", ".join(f"{algo} {_bytes(max(x['workspace_bytes'] for x in xs))}"
                   for algo, xs in mr.get("xattn", {}).items())
    if tp_mem:
        w(f"  memory    PyTorch (torch.profiler): an SDPA call holds {_bytes(tp_mem['sdpa_peak_bytes'])} at its "
          f"peak ({_bytes(tp_mem['sdpa_workspace_bytes'])} workspace + {_bytes(tp_mem['sdpa_kept_bytes'])} "
          "output)"
          + (f", repeat_kv copies {_bytes(tp_mem['repeat_kv_bytes_per_call'])} a call "
             f"({tp_mem['repeat_kv_copies_per_call']} copies)" if tp_mem.get("repeat_kv_copies_per_call") else ""))
    else:
        w("  memory    PyTorch: not measured (run with torch.profiler)")
    w(f"            xattn's exact workspace: {xa or '-'}; naive's score matrix "
      f"{_bytes(c['naive_scores_bytes'])} (B x Hq x Sq x Sk f32)")


def _case_lines(c: dict, mr: dict, w) -> None:
    """One case's block: its head, its table, its memory (mr: the memory
    section's row of the case) and its verdicts."""
    _case_head_lines(c, w)
    sd = c.get("pytorch", {})
    if not c["xattn"] and not sd.get("wall_ms"):
        w(f"  {c.get('verdict', '')}")
        return
    _case_table_lines(c, sd, w)
    _case_memory_lines(c, mr, w)
    for v in c.get("verdicts", []):
        w(f"  verdict   {v['text']}")
    if not c.get("verdicts"):
        w(f"  verdict   {c.get('verdict', 'no timing')}")


def _numerics_lines(num, w) -> None:
    """The numerics: xattn vs SDPA vs the reference, by dtype."""
    if num and num.get("by_dtype"):
        w("")
        w(f"numerics: xattn (auto, {num['backend']}) vs PyTorch SDPA vs the double-precision reference, "
          "on the captured activations (rows that are not padding):")
        for dt, d in num["by_dtype"].items():
            w(f"  {dt}: {d['calls']} calls, worst rel L2 xattn-vs-SDPA {d['worst_xattn_vs_sdpa']:.2e} "
              f"(bound {d['pair_bound_min']:.2e}), SDPA-vs-reference {d['worst_sdpa_vs_reference']:.2e}, "
              f"xattn-vs-reference {d['worst_xattn_vs_reference']:.2e}: {'pass' if d['all_pass'] else 'FAIL'}")


def _any_unconverged(r: dict) -> bool:
    """Whether a cell of any case (xattn's, or PyTorch's) did not converge."""
    unconv = any(not s.get("converged", True) for c in r.get("cases", []) for cell in c["xattn"] + c["packed"]
                 for s in (cell["wall_ms"], cell["device_ms"]))
    return unconv or any(not c.get("pytorch", {}).get(k, {}).get("converged", True)
                         for c in r.get("cases", []) for k in ("wall_ms", "kernel_ms"))


def _legend_lines(r: dict, w) -> None:
    """The legend: the clocks, and '~' where a cell did not converge."""
    w("")
    w("clocks: wall = the whole Python call on time.perf_counter (SDPA's call; xattn's call with the binding), "
      "what the model pays; cpu = the process's CPU time during the call (all threads); kernel = xattn's "
      "device_ms (the backend's own clock) against SDPA's op time in torch.profiler. Each 'vs SDPA' uses one "
      "clock for both sides and gives a ratio only where the 95% intervals of the medians separate.")
    if _any_unconverged(r):
        tgt = 100 * r.get("settings", {}).get("target", 0.05)
        w(f"'~': not converged (fewer than 5 samples, or the interval stayed wider than +-{tgt:g}% of the "
          "median within the cell's share of the time budget); its verdicts still rest on the intervals.")


def render_text(r: dict) -> str:
    out = []
    w = out.append
    fwd = r["forward"]
    _header_lines(r, w)
    _forward_lines(fwd, r.get("attention_kinds") or {}, w)
    _layer_lines(r["layers"], w)
    mem = r.get("memory", {})
    _memory_lines(mem.get("torch", {}), w)
    if r.get("generation"):
        from .torch._generate import render_generation

        out.extend(render_generation(r["generation"]))
    mem_rows = {m["case"]: m for m in mem.get("rows", [])}
    for c in r.get("cases", []):
        _case_lines(c, mem_rows.get(c["key"], {}), w)
    _numerics_lines(r.get("numerics"), w)
    _legend_lines(r, w)
    return "\n".join(out) + "\n"


def _log_ticks(lo: float, hi: float) -> list:
    """Tick values (ms) between 10**lo and 10**hi: 1, 2, 5 per decade (fewer when wide)."""
    import math

    out, steps = [], (1, 2, 5) if hi - lo < 3 else (1,)
    for e in range(math.floor(lo), math.ceil(hi) + 1):
        for m in steps:
            v = m * 10.0 ** e
            if lo <= math.log10(v) <= hi:
                out.append(v)
    return out


def _tick_label(v: float) -> str:
    return f"{v:g} ms" if v >= 1e-3 else f"{v * 1e3:g} us"


def render_svg(r: dict) -> str:
    """Two panels: attention's share of the forward per layer (0-100 % axis, the
    bar at the median, the whisker its 95 % interval; the layer's block in grey),
    and per case the time per call of SDPA and of each xattn cell on each clock
    (wall and kernel, never mixed), bars at the median with the 95 % interval as a
    whisker, on a log axis in ms."""
    import math

    width = 960
    rows = r["layers"]["rows"]
    cases = r.get("cases", [])
    bars = []  # (case key, [(clock title, [(name, stats)])])
    for c in cases:
        sd = c.get("pytorch", {})
        cells = c["xattn"] + c["packed"]
        nm = lambda x: f"xattn {x['backend']} {x['algo']}" + (" packed" if x.get("form") else "")  # noqa: E731
        impl = "pytorch " + sd.get("impl", "sdpa")
        pb = [b for b in c.get("pytorch_backends", []) if b.get("runs")]
        bn = lambda b: "pytorch sdpa" + ("" if b["backend"] == "default" else " " + b["backend"])  # noqa: E731
        wall = ([(impl, sd.get("wall_ms"))] + [(bn(b), b.get("wall_ms")) for b in pb]
                + [(nm(x), x.get("wall_ms")) for x in cells])
        kern = ([(impl + " (op time)", sd.get("kernel_ms"))] + [(bn(b) + " (op time)", b.get("kernel_ms")) for b in pb]
                + [(nm(x) + " (device_ms)", x.get("device_ms")) for x in cells])
        bars.append((c["key"], [("wall clock, the whole Python call", wall), ("kernel clock", kern)]))
    x0, bw = 260, width - 400
    h1 = 70 + 18 * len(rows)
    h2 = 70 + sum(22 + sum(18 + 16 * len(g) for _, g in groups) for _, groups in bars)
    height = 40 + h1 + h2
    fwd_share = r["forward"]["attention_share"]
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
         f'font-family="sans-serif" font-size="11">',
         f'<rect width="{width}" height="{height}" fill="white"/>',
         f'<text x="10" y="20" font-size="14">{escape("xattn profile: " + (r.get("model") or "model"))} '
         f'- attention {100 * (fwd_share["median"] or 0):.1f}% of the forward '
         f'[95% CI {100 * (fwd_share.get("ci_low") or 0):.1f}..{100 * (fwd_share.get("ci_high") or 0):.1f}%], '
         f'wall clock</text>']
    if r.get("load", {}).get("busy"):
        ld = r["load"]
        s.append(f'<text x="10" y="34" fill="#c0504d">BUSY machine: load {ld["start"]["load1"]:.2f} at the start, '
                 f'{ld["end"]["load1"]:.2f} at the end on {ld["cpus"]} CPUs (oversubscribed): the timings are '
                 'inflated and noisy</text>')
    y = 50
    s.append(f'<text x="10" y="{y}">attention\'s share of the forward per layer (wall clock; bar = median, '
             'whisker = 95% interval; grey = the layer\'s block)</text>')
    y += 8
    top = y
    for row in rows:
        y += 18
        sh = row["share_of_forward"]
        share = sh["median"] or 0
        blk = row.get("share_of_block", {}).get("median")
        s.append(f'<text x="10" y="{y}">{escape(row["layer"][:36])}</text>')
        if blk:
            bmax = min(1, share / blk if blk > 0 else 0)
            s.append(f'<rect x="{x0}" y="{y - 11}" width="{bw * bmax:.1f}" height="12" fill="#ddd"/>')
        s.append(f'<rect x="{x0}" y="{y - 11}" width="{bw * min(1, share):.1f}" height="12" fill="#3b6ea5"/>')
        s.extend(_whisker(x0, bw, y, sh.get("ci_low"), sh.get("ci_high"), lambda v: min(max(v, 0), 1)))
        s.append(f'<text x="{x0 + bw + 6}" y="{y}">{_ci_txt(sh, pct=True)}</text>')
    y += 8
    s.extend(_axis(x0, bw, top, y, [(i / 4, f"{25 * i}%") for i in range(5)], "share of the forward's wall time"))
    y += 40
    vals = [v for _, groups in bars for _, g in groups for _, st in g if st and st.get("median")
            for v in (st["median"], st.get("ci_low") or st["median"], st.get("ci_high") or st["median"]) if v > 0]
    s.append(f'<text x="10" y="{y}">per case: time per call in ms (log axis; bar = median, whisker = 95% '
             'interval of the median; the two clocks are never compared with each other)</text>')
    if vals:
        lo, hi = math.log10(min(vals)) - 0.05, math.log10(max(vals)) + 0.05
        span = max(hi - lo, 1e-9)
        pos = lambda v: (math.log10(v) - lo) / span  # noqa: E731
        top = y + 6
        for key, groups in bars:
            y += 22
            s.append(f'<text x="10" y="{y}" font-weight="bold">{escape(key[:120])}</text>')
            for title, group in groups:
                y += 18
                s.append(f'<text x="16" y="{y}" font-style="italic">{escape(title)}</text>')
                for name, st in group:
                    y += 16
                    s.append(f'<text x="24" y="{y}">{escape(name[:40])}</text>')
                    if st and st.get("median"):
                        ww = max(bw * pos(st["median"]), 1)
                        color = "#c0504d" if name.startswith("pytorch") else "#4f8f3a"
                        s.append(f'<rect x="{x0}" y="{y - 11}" width="{ww:.1f}" height="12" fill="{color}"/>')
                        s.extend(_whisker(x0, bw, y, st.get("ci_low"), st.get("ci_high"),
                                          lambda v: min(max(pos(v), 0), 1) if v > 0 else 0))
                        s.append(f'<text x="{x0 + bw + 6}" y="{y}">{escape(_ci_txt(st))} ms</text>')
        y += 8
        ticks = [(pos(v), _tick_label(v)) for v in _log_ticks(lo, hi)]
        s.extend(_axis(x0, bw, top, y, ticks, "ms per call (log scale)"))
    s.append("</svg>")
    return "\n".join(s) + "\n"


def _ci_txt(st, pct=False) -> str:
    f = (lambda x: f"{100 * x:.1f}%") if pct else (lambda x: f"{x:.3g}")
    if not st or st.get("median") is None:
        return "-"
    if st.get("ci_low") is None:
        return f(st["median"])
    return f"{f(st['median'])} [{f(st['ci_low'])}..{f(st['ci_high'])}]" + ("" if st.get("converged", True) else " ~")


def _whisker(x0, bw, y, lo, hi, pos) -> list:
    if lo is None or hi is None:
        return []
    a, b = x0 + bw * pos(lo), x0 + bw * pos(hi)
    m = y - 5
    return [f'<line x1="{a:.1f}" y1="{m}" x2="{b:.1f}" y2="{m}" stroke="black" stroke-width="1"/>',
            f'<line x1="{a:.1f}" y1="{m - 4}" x2="{a:.1f}" y2="{m + 4}" stroke="black" stroke-width="1"/>',
            f'<line x1="{b:.1f}" y1="{m - 4}" x2="{b:.1f}" y2="{m + 4}" stroke="black" stroke-width="1"/>']


def _axis(x0, bw, top, y, ticks, label) -> list:
    """A horizontal axis at y with ticks [(position 0..1, text)], light grid lines up to top."""
    out = [f'<line x1="{x0}" y1="{y}" x2="{x0 + bw}" y2="{y}" stroke="black" stroke-width="1"/>']
    for p, txt in ticks:
        x = x0 + bw * p
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{y}" stroke="#eee" stroke-width="1"/>')
        out.append(f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 4}" stroke="black" stroke-width="1"/>')
        out.append(f'<text x="{x:.1f}" y="{y + 15}" text-anchor="middle">{escape(txt)}</text>')
    out.append(f'<text x="{x0 + bw / 2:.1f}" y="{y + 29}" text-anchor="middle">{escape(label)}</text>')
    return out


# ---- before and after: two profile.json files ------------------------------------------------


def load_profile(path) -> dict:
    """A profile.json (or a folder holding one), checked: ValueError with a clear
    message for a missing or unreadable file, another schema, or figures without
    the intervals that a comparison needs (a profile written by an older xattn)."""
    import json
    from pathlib import Path

    p = Path(path)
    if p.is_dir():
        p = p / "profile.json"
    if not p.is_file():
        raise ValueError(f"{path}: no such file (give a profile.json or the folder that holds one)")
    try:
        doc = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{p}: not a JSON file ({e})") from None
    if not isinstance(doc, dict) or doc.get("schema") != "xattn.profile/1":
        raise ValueError(f"{p}: not an xattn profile (schema {doc.get('schema') if isinstance(doc, dict) else None!r}, "
                         "expected 'xattn.profile/1')")
    try:
        fwd, rows = doc["forward"], doc["layers"]["rows"]
        need = [fwd["attention_ms"], fwd["attention_share"]] + [r["attention_ms"] for r in rows]
    except (KeyError, TypeError):
        raise ValueError(f"{p}: an xattn profile without its forward and layers sections") from None
    for st in need:
        if not isinstance(st, dict) or any(st.get(k) is None for k in ("median", "ci_low", "ci_high")):
            raise ValueError(f"{p}: its timings carry no interval (ci_low, ci_high): written by an older "
                             "xattn; profile the model again")
    doc["_path"] = str(p)
    return doc


def compare_profiles(a: dict, b: dict) -> dict:
    """Judges B against A (before and after): the attention time per forward, its
    share of the forward and each layer's attention time (layers matched by name),
    each by the one rule (docs/python.md): ratio B/A of the medians, a verdict only
    where the 95% intervals separate, else "within noise". ValueError when the two
    are not profiles of the same model."""
    if (a.get("model") or "") != (b.get("model") or ""):
        raise ValueError(f"different models: A is {a.get('model')!r}, B is {b.get('model')!r}")
    la = [r["layer"] for r in a["layers"]["rows"]]
    lb = [r["layer"] for r in b["layers"]["rows"]]
    if a.get("calls") != b.get("calls") or set(la) != set(lb):
        raise ValueError(f"different models: A makes {a.get('calls')} attention calls in {len(la)} layers, "
                         f"B {b.get('calls')} in {len(lb)} (or the layers' names differ)")
    rows = []

    def judge(what, sa, sb, unit, clock, share=False):
        v = verdict(sa, sb, "A", "B", clock, lower_is_better=not share)
        if v["result"] == "within noise":
            word = "within noise"
        elif share:
            word = "B lower" if v["result"] == "b" else "B higher"
        else:
            word = "B faster" if v["result"] == "b" else "B slower"
        rows.append({"what": what, "unit": unit, "clock": clock, "a": sa, "b": sb, "ratio": v["ratio"],
                     "result": v["result"], "verdict": word})

    clock = "wall clock"
    judge("attention per forward", a["forward"]["attention_ms"], b["forward"]["attention_ms"], "ms", clock)
    judge("attention share of the forward", a["forward"]["attention_share"], b["forward"]["attention_share"],
          "share", clock, share=True)
    rb = {r["layer"]: r for r in b["layers"]["rows"]}
    for r in a["layers"]["rows"]:
        judge(f"{r['layer']} attention", r["attention_ms"], rb[r["layer"]]["attention_ms"], "ms", clock)
    return {"a": a.get("_path"), "b": b.get("_path"), "model": a.get("model"), "rows": rows,
            "load": {"a": a.get("load"), "b": b.get("load")},
            "counts": {k: sum(1 for r in rows if r["verdict"] == k)
                       for k in ("B faster", "B slower", "B lower", "B higher", "within noise")}}


def render_compare(c: dict) -> str:
    out = [f"xattn compare: {c['model'] or 'model'}", f"  A = {c['a']}", f"  B = {c['b']}"]
    for side in ("a", "b"):
        ld = c["load"].get(side)
        if ld:
            out.append(f"  {side.upper()}'s {ld.get('line') or load_line(ld)}")
    out.append("all on the wall clock from Python (the SDPA calls inside the forward); median [95% interval of "
               "the median]; a verdict only where the intervals separate")
    out.append(f"{'':<34} {'A':>26} {'B':>26} {'B/A':>7}  verdict")
    for r in c["rows"]:
        pct = r["unit"] == "share"
        name = r["what"] + ("" if pct else " ms")
        ratio = f"{r['ratio']:.3f}x" if r["ratio"] is not None else "-"
        out.append(f"{name[:34]:<34} {_ci(r['a'], pct=pct):>26} {_ci(r['b'], pct=pct):>26} {ratio:>7}  {r['verdict']}")
    if any(not r[side].get("converged", True) for r in c["rows"] for side in ("a", "b")):
        out.append("'~': not converged (the interval wider than +-5% of the median, or fewer than 5 samples)")
    n = c["counts"]
    out.append(f"summary: {n['B faster']} faster in B, {n['B slower']} slower, {n['within noise']} within noise"
               + (f"; share {'higher' if n['B higher'] else 'lower'} in B" if n["B higher"] or n["B lower"] else ""))
    return "\n".join(out) + "\n"
