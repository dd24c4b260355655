"""The profile's report as text and as an SVG chart (no plotting library needed)."""

from __future__ import annotations

from xml.sax.saxutils import escape

from ._stats import real_difference


def _bytes(n) -> str:
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _ms(s, digits=4) -> str:
    if not s or s.get("median") is None:
        return "-"
    return f"{s['median']:.{digits}f}"


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def render_text(r: dict) -> str:
    out = []
    w = out.append
    fwd = r["forward"]
    w(f"xattn profile: {r.get('model') or 'model'} on {r['device']} (torch {r['torch_version']}, "
      f"xattn {r['xattn_version']}), {r['reps']} timing passes, {r['calls']} attention calls")
    sh = fwd["attention_share"]
    w(f"forward    {_ms(fwd['forward_ms'], 3)} ms (spread {_pct(fwd['forward_ms']['spread'])}); "
      f"attention {_ms(fwd['attention_ms'], 3)} ms = {_pct(sh['median'])} of the forward "
      f"(per pass {_pct(sh['min'])}..{_pct(sh['max'])})")
    lay = r["layers"]
    w("")
    w(f"{'layer':<28} {'calls':>5} {'attn ms':>9} {'% fwd':>7} {'block ms':>9} {'% block':>8}")
    for row in lay["rows"]:
        blk = row.get("block_ms")
        w(f"{row['layer'][:28]:<28} {row['calls']:>5} {_ms(row['attention_ms']):>9} "
          f"{_pct(row['share_of_forward']['median']):>7} {_ms(blk, 3) if blk else '-':>9} "
          f"{_pct(row['share_of_block']['median']) if blk else '-':>8}")
    w(f"layers add up to {lay['sum_of_layers_ms']:.4f} ms, the total is {lay['total_ms']:.4f} ms "
      f"(difference {lay['difference_ms']:+.4f} ms, noise {lay['noise_ms']:.4f} ms)")
    for c in r.get("cases", []):
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
        pad = c["padding"]
        if pad["seqlens_k"] is not None:
            waste = [x["padding_waste"] for x in c["xattn"] if x.get("padding_waste") is not None]
            w(f"  padding   {_pct(pad['waste_from_token_counts'])} of the B x Sq x Sk rectangle is padding "
              f"(token counts); xattn's records: {_pct(waste[0]) if waste else '-'}")
            ex = {}
            for x in c["xattn"]:
                if x["flops_useful"]:
                    ex.setdefault(x["algo"], x["flops_executed"] / x["flops_useful"])
            if ex:
                w("  work      executed / useful FLOPs: " + ", ".join(f"{a} {r:.2f}x" for a, r in ex.items())
                  + " (naive computes the padding, flash and splitkv skip its tiles)")
            for p in c["packed"]:
                fl = [x for x in c["xattn"] if x["backend"] == p["backend"] and x["algo"] == "flash"]
                if fl and fl[0]["time_ms"].get("median") and p["time_ms"].get("median"):
                    f0 = fl[0]
                    w(f"  packed    {p['backend']}: flash on the packed batch {p['time_ms']['median']:.4f} ms vs "
                      f"{f0['time_ms']['median']:.4f} ms padded ({f0['time_ms']['median'] / p['time_ms']['median']:.2f}x"
                      f"{'' if real_difference(p['time_ms'], f0['time_ms']) else ', within noise'}), "
                      f"{_bytes(p['bytes_actual'])} moved vs {_bytes(f0['bytes_actual'])}")
        if not c["xattn"] and not c.get("pytorch", {}).get("alone_ms"):
            w(f"  {c.get('verdict', '')}")
            continue
        w(f"  {'device':<10}{'algo':<14}{'median ms':>10} {'spread':>7} {'call ms':>8} {'GFLOP/s':>9} "
          f"{'workspace':>10} {'ctx peak':>10} {'vs SDPA':>8}")
        sd = c["pytorch"].get("alone_ms")
        w(f"  {'pytorch':<10}{'sdpa':<14}{_ms(sd):>10} {_pct(sd['spread']) if sd else '-':>7} "
          f"{_ms(sd):>8} {'':>9} {'':>10} {'':>10} {'1.00x':>8}")
        for cell in c["xattn"] + c["packed"]:
            name = cell["algo"] + (" packed" if cell.get("form") else "")
            t = cell["time_ms"]
            vs = f"{sd['median'] / t['median']:.2f}x" if sd and t.get("median") else "-"
            gf = f"{cell['gflops_useful']:.2f}" if cell.get("gflops_useful") else "-"
            conv = "" if t.get("converged", True) else "~"
            w(f"  {cell['backend'] + ':' + str(cell['device']):<10}{name:<14}{_ms(t):>10} "
              f"{_pct(t['spread']) + conv:>8}{_ms(cell.get('wall_ms')):>8} {gf:>9} "
              f"{_bytes(cell['workspace_bytes']):>10} {_bytes(cell['context_peak_bytes']):>10} {vs:>8}")
        for e in c["errors"]:
            w(f"  {e['backend']:<10}{e['algo']:<14} {e['status']}: {e['message']}")
        w(f"  memory    naive's score matrix {_bytes(c['naive_scores_bytes'])} (B x Hq x Sq x Sk f32); "
          f"PyTorch's peak during the call: {_bytes(c['pytorch'].get('peak_delta_bytes'))} "
          f"({c['pytorch'].get('peak_kind') or 'not measured'})")
        w(f"  verdict   {c['verdict']}")
    num = r.get("numerics")
    if num and num.get("by_dtype"):
        w("")
        w(f"numerics: xattn (auto, {num['backend']}) vs PyTorch SDPA vs the double-precision reference, "
          "on the captured activations (rows that are not padding):")
        for dt, d in num["by_dtype"].items():
            w(f"  {dt}: {d['calls']} calls, worst rel L2 xattn-vs-SDPA {d['worst_xattn_vs_sdpa']:.2e} "
              f"(bound {d['pair_bound_min']:.2e}), SDPA-vs-reference {d['worst_sdpa_vs_reference']:.2e}, "
              f"xattn-vs-reference {d['worst_xattn_vs_reference']:.2e}: {'pass' if d['all_pass'] else 'FAIL'}")
    w("")
    w("median ms: SDPA's wall time alone on the captured tensors, xattn's on the backend's own clock "
      "(device_ms, the ratios use it); call ms: the whole Python call (xattn: with the binding's "
      "overhead); '~': the spread did not fall under 5% within the cell's budget.")
    return "\n".join(out) + "\n"


def render_svg(r: dict) -> str:
    """Two panels: attention's share of each layer's block (or of the forward), and
    per case the median time of SDPA and of each xattn cell (log scale)."""
    width = 900
    rows = r["layers"]["rows"]
    cases = r.get("cases", [])
    bars = []
    for c in cases:
        sd = c["pytorch"].get("alone_ms")
        group = [("pytorch sdpa", sd["median"] if sd and sd.get("median") else None)]
        for cell in c["xattn"] + c["packed"]:
            nm = f"{cell['backend']} {cell['algo']}" + (" packed" if cell.get("form") else "")
            group.append((nm, cell["time_ms"].get("median")))
        bars.append((c["key"], group))
    h1 = 40 + 18 * len(rows)
    h2 = 30 + sum(22 + 16 * len(g) for _, g in bars)
    height = 60 + h1 + h2
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
         f'font-family="sans-serif" font-size="11">',
         f'<rect width="{width}" height="{height}" fill="white"/>',
         f'<text x="10" y="20" font-size="14">{escape("xattn profile: " + (r.get("model") or "model"))} '
         f'- attention {100 * (r["forward"]["attention_share"]["median"] or 0):.1f}% of the forward</text>']
    y = 45
    s.append(f'<text x="10" y="{y}">attention share of each layer (of the forward; block time in grey)</text>')
    y += 10
    x0, bw = 220, width - 300
    for row in rows:
        y += 18
        share = row["share_of_forward"]["median"] or 0
        blk = row.get("share_of_block", {}).get("median")
        s.append(f'<text x="10" y="{y}">{escape(row["layer"][:32])}</text>')
        end = min(1, share)
        if blk:
            bmax = min(1, share / blk if blk > 0 else 0)
            end = max(end, bmax)
            s.append(f'<rect x="{x0}" y="{y - 11}" width="{bw * bmax:.1f}" height="12" fill="#ddd"/>')
        s.append(f'<rect x="{x0}" y="{y - 11}" width="{bw * min(1, share):.1f}" height="12" fill="#3b6ea5"/>')
        label = f"{100 * share:.1f}%" + (f" ({100 * blk:.0f}% of the block)" if blk else "")
        s.append(f'<text x="{x0 + bw * end + 4:.1f}" y="{y}">{label}</text>')
    y += 30
    s.append(f'<text x="10" y="{y}">per case: median ms per call (log scale)</text>')
    vals = [v for _, g in bars for _, v in g if v]
    if vals:
        import math

        lo, hi = math.log10(min(vals)) - 0.1, math.log10(max(vals)) + 0.1
        span = max(hi - lo, 1e-9)
        for key, group in bars:
            y += 22
            s.append(f'<text x="10" y="{y}" font-weight="bold">{escape(key[:90])}</text>')
            for name, v in group:
                y += 16
                s.append(f'<text x="20" y="{y}">{escape(name)}</text>')
                if v:
                    ww = bw * (math.log10(v) - lo) / span
                    color = "#c0504d" if name.startswith("pytorch") else "#4f8f3a"
                    s.append(f'<rect x="{x0}" y="{y - 11}" width="{max(ww, 1):.1f}" height="12" fill="{color}"/>')
                    s.append(f'<text x="{x0 + max(ww, 1) + 4:.1f}" y="{y}">{v:.4g} ms</text>')
    s.append("</svg>")
    return "\n".join(s) + "\n"
