#!/usr/bin/env python3
"""Draw what 'pfnic-perf --compare' measured (scripts/bench.sh).

usage: scripts/bench-plot.py BENCH_JSON OUT_SVG

Reads the JSON pfnic-perf --compare --json wrote and draws two panels into
OUT_SVG: warm and cold bandwidth of one message in flight (message size over
the median message time, bars from the 90th to the 10th percentile time)
over message size for every operation, and the device's added cost per
faulted page ((cold - warm) / faults) next to the guest CPU's first touch of
the same pages (the store and load costs weighted by the pages the device
faulted for writing and for reading), per operation, size and way of waiting
for the completion (the bandwidth panel shows the first). With the
memory modes (--modes), two more: each mode's warm and cold bandwidth over
message size, and the time to register each size in each mode. Exits 1 on
unreadable input.
"""
import json
import sys

from svgplot import Panel, document, esc, log_axis, num

COLORS = {"write": "#1f77b4", "read": "#d62728", "send": "#2ca02c"}
WAIT_SHORT = {"poll": "poll", "events": "evt"}
MIB = float(1 << 20)


def load(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        # Through a serial port: the tty may have made every newline CR LF.
        text = f.read().replace("\r", "")
    start = text.find("{")
    if start < 0:
        raise ValueError(f"{path}: no JSON object")
    doc, _ = json.JSONDecoder().raw_decode(text[start:])
    return doc


def size_name(s):
    if s >= 1 << 20 and s % (1 << 20) == 0:
        return f"{s >> 20} MiB"
    if s >= 1 << 10 and s % (1 << 10) == 0:
        return f"{s >> 10} KiB"
    return f"{s} B"


def size_axis(e, sizes, x, y, w, h, label):
    """Sizes evenly across the bottom of a panel, and the axis label; their x positions."""
    n = max(1, len(sizes))
    sx = {s: x + (w * (i + 0.5) / n) for i, s in enumerate(sizes)}
    for s in sizes:
        e.append(f'<text x="{sx[s]:.1f}" y="{y + h + 16}" text-anchor="middle">{size_name(s)}</text>')
    e.append(f'<text x="{x + w / 2}" y="{y + h + 34}" text-anchor="middle">{label}</text>')
    return sx


def first_wait(doc):
    """The wait mode the bandwidth panel shows: the run's first (older runs had one)."""
    waits = doc.get("waits") or []
    return waits[0] if waits else None


def bandwidth_panel(e, doc, x, y, w, h):
    wait = first_wait(doc)
    rows = [r for r in doc["rows"] if r.get("wait") == wait]
    sizes = sorted({r["size"] for r in rows})
    ops = [op for op in COLORS if any(r["op"] == op for r in rows)]

    def bw(r, state, key):
        t = r[state].get(key)
        return r["size"] / MIB / (t / 1e6) if num(t) else None

    vals = [bw(r, s, k) for r in rows for s in ("warm", "cold") for k in ("p10_us", "p90_us")]
    lo, hi = log_axis(vals)
    p = Panel(e, x, y, w, h, lo, hi, "MiB/s (size / message time)")
    e.append(f'<text x="{x + w / 2}" y="{y - 10}" text-anchor="middle" font-size="13">'
             'Bandwidth of one message in flight: warm (solid) and cold (dashed)'
             + (f', completions: {wait}' if wait else '') + '</text>')
    sx = size_axis(e, sizes, x, y, w, h, "message size")
    for k, op in enumerate(ops):
        c = COLORS[op]
        for state, dash in (("warm", ""), ("cold", ' stroke-dasharray="6 4"')):
            pts = []
            for r in sorted((r for r in rows if r["op"] == op), key=lambda r: r["size"]):
                v = bw(r, state, "median_us")
                if v is None:
                    continue
                xx = sx[r["size"]] + (k - (len(ops) - 1) / 2) * 6
                pts.append((xx, p.ty(v)))
                a, b = bw(r, state, "p90_us"), bw(r, state, "p10_us")
                if a and b:
                    e.append(f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{p.ty(a):.1f}" '
                             f'y2="{p.ty(b):.1f}" stroke="{c}"/>')
                shape = (f'<circle cx="{xx:.1f}" cy="{p.ty(v):.1f}" r="3.5" fill="{c}">'
                         if state == "warm" else
                         f'<rect x="{xx - 3.5:.1f}" y="{p.ty(v) - 3.5:.1f}" width="7" height="7" '
                         f'fill="white" stroke="{c}">')
                e.append(shape + f'<title>{op} {size_name(r["size"])} {state}: {v:.4g} MiB/s '
                         f'(median {r[state]["median_us"]:.4g} us)</title>'
                         + ("</circle>" if state == "warm" else "</rect>"))
            if len(pts) > 1:
                path = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
                e.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="1.5"{dash}/>')
    for k, op in enumerate(ops):
        lx = x + 10 + k * 60
        e.append(f'<rect x="{lx}" y="{y + 8}" width="10" height="10" fill="{COLORS[op]}"/>')
        e.append(f'<text x="{lx + 14}" y="{y + 17}">{op}</text>')
    lx = x + 10 + len(ops) * 60
    e.append(f'<circle cx="{lx + 5}" cy="{y + 13}" r="3.5" fill="#555"/>')
    e.append(f'<text x="{lx + 14}" y="{y + 17}">warm</text>')
    e.append(f'<rect x="{lx + 56}" y="{y + 9.5}" width="7" height="7" fill="white" stroke="#555"/>')
    e.append(f'<text x="{lx + 68}" y="{y + 17}">cold (bars: p10..p90)</text>')


def cost_panel(e, doc, x, y, w, h):
    rows = [r for r in doc["rows"] if num(r.get("device_us_per_fault"))
            or num(r.get("cpu", {}).get("weighted_us_per_page"))]
    vals = [r.get("device_us_per_fault") for r in rows]
    vals += [r["cpu"].get("weighted_us_per_page") for r in rows]
    lo, hi = log_axis(vals)
    p = Panel(e, x, y, w, h, lo, hi, "us per faulted page")
    e.append(f'<text x="{x + w / 2}" y="{y - 10}" text-anchor="middle" font-size="13">'
             'Cost per faulted page: device vs the guest CPU\'s first touch</text>')
    e.append(f'<text x="{x + 8}" y="{y + 15}" font-size="10">colour: device, (cold - warm) / '
             'faults; label: device / CPU</text>')
    e.append(f'<text x="{x + 8}" y="{y + 28}" font-size="10">grey: CPU, its store and load '
             'first touches weighted by the device\'s write and read faults</text>')
    waits = any(r.get("wait") for r in rows)
    n = max(1, len(rows))
    group = w / n
    bar = min(24, group * 0.35)
    base = y + h
    for i, r in enumerate(rows):
        c = COLORS.get(r["op"], "#555")
        cx = x + group * (i + 0.5)
        for j, (v, fill, what) in enumerate((
                (r.get("device_us_per_fault"), c, "device"),
                (r["cpu"].get("weighted_us_per_page"), "#bbbbbb", "CPU"))):
            if not num(v):
                continue
            bx = cx - bar + j * bar
            top = p.ty(v)
            e.append(f'<rect x="{bx:.1f}" y="{top:.1f}" width="{bar - 1:.1f}" '
                     f'height="{max(1.0, base - top):.1f}" fill="{fill}" stroke="{c}">'
                     f'<title>{r["op"]} {size_name(r["size"])} {what}: {v:.4g} us/page</title></rect>')
        ratio = r.get("device_over_cpu")
        if num(ratio):
            top = max(r["device_us_per_fault"], r["cpu"]["weighted_us_per_page"])
            e.append(f'<text x="{cx:.1f}" y="{p.ty(top) - 4:.1f}" text-anchor="middle" '
                     f'font-size="10">{ratio:.3g}x</text>')
        if waits:
            # Narrow groups: the colour says the operation (legend), two short lines the rest.
            labels = (size_name(r["size"]).replace(" KiB", "K").replace(" MiB", "M"),
                      WAIT_SHORT.get(r.get("wait"), r.get("wait") or ""))
        else:
            labels = (r["op"], size_name(r["size"]))
        for k, label in enumerate(labels):
            e.append(f'<text x="{cx:.1f}" y="{base + 14 + 12 * k}" text-anchor="middle" '
                     f'font-size="10">{label}</text>')
    if waits:
        for k, op in enumerate(op for op in COLORS if any(r["op"] == op for r in rows)):
            lx = x + w - 190 + k * 62
            e.append(f'<rect x="{lx}" y="{y + 36}" width="10" height="10" fill="{COLORS[op]}"/>')
            e.append(f'<text x="{lx + 14}" y="{y + 45}" font-size="10">{op}</text>')
        e.append(f'<text x="{x + w}" y="{base + 40}" text-anchor="end" font-size="10">'
                 'completions: poll = polled, evt = by events</text>')


MODE_COLORS = {"pinned": "#ff7f0e", "odp": "#2ca02c", "sva": "#9467bd"}
REG_COLORS = {"odp_us": "#2ca02c", "sva_odp_us": "#9467bd", "sva_us": "#17becf",
              "pinned_us": "#ff7f0e"}
REG_NAMES = {"odp_us": "odp, on-demand MR", "sva_odp_us": "sva, on-demand MR",
             "sva_us": "sva, ordinary MR", "pinned_us": "pinned"}
OP_DASH = {"write": "", "read": ' stroke-dasharray="2 3"', "send": ' stroke-dasharray="8 3"'}


def modes_panel(e, modes, x, y, w, h):
    """Warm and cold bandwidth of each memory mode over message size."""
    rows = modes["rows"]
    sizes = sorted({r["size"] for r in rows})

    def bw(r, state):
        t = r[state].get("median_us")
        return r["size"] / MIB / (t / 1e6) if num(t) else None

    lo, hi = log_axis([bw(r, s) for r in rows for s in ("warm_us", "cold_us")])
    p = Panel(e, x, y, w, h, lo, hi, "MiB/s (size / median message time)")
    e.append(f'<text x="{x + w / 2}" y="{y - 10}" text-anchor="middle" font-size="13">'
             'Memory modes: warm (filled) and cold (open) bandwidth</text>')
    sx = size_axis(e, sizes, x, y, w, h, "message size; line: write solid, read dotted, send dashed")
    for mode, c in MODE_COLORS.items():
        for op, dash in OP_DASH.items():
            for state in ("warm_us", "cold_us"):
                pts = []
                for r in sorted((r for r in rows if r["mode"] == mode and r["op"] == op),
                                key=lambda r: r["size"]):
                    v = bw(r, state)
                    if v is None:
                        continue
                    xx, yy = sx[r["size"]], p.ty(v)
                    pts.append((xx, yy))
                    fill = c if state == "warm_us" else "white"
                    e.append(f'<circle cx="{xx:.1f}" cy="{yy:.1f}" r="3" fill="{fill}" stroke="{c}">'
                             f'<title>{mode} {op} {size_name(r["size"])} {state[:4]}: '
                             f'{v:.4g} MiB/s</title></circle>')
                if len(pts) > 1:
                    path = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
                    width = "1.8" if state == "warm_us" else "0.8"
                    e.append(f'<polyline points="{path}" fill="none" stroke="{c}" '
                             f'stroke-width="{width}"{dash}/>')
    for k, (mode, c) in enumerate(MODE_COLORS.items()):
        lx = x + 10 + k * 70
        e.append(f'<rect x="{lx}" y="{y + 8}" width="10" height="10" fill="{c}"/>')
        e.append(f'<text x="{lx + 14}" y="{y + 17}">{mode}</text>')


def registration_panel(e, modes, x, y, w, h):
    """Time to register present pages, per way of registering, over the size."""
    rows = modes.get("registration") or []
    sizes = [r["size"] for r in rows]
    vals = [r.get(k, {}).get("median_us") for r in rows for k in REG_COLORS]
    lo, hi = log_axis(vals)
    p = Panel(e, x, y, w, h, lo, hi, "us per ibv_reg_mr (median)")
    e.append(f'<text x="{x + w / 2}" y="{y - 10}" text-anchor="middle" font-size="13">'
             'Registration: what pinning costs</text>')
    sx = size_axis(e, sizes, x, y, w, h, "MR size (pages present)")
    for k, (key, c) in enumerate(REG_COLORS.items()):
        pts = []
        for r in rows:
            v = r.get(key, {}).get("median_us")
            if not num(v):
                continue
            pts.append((sx[r["size"]], p.ty(v)))
            e.append(f'<circle cx="{sx[r["size"]]:.1f}" cy="{p.ty(v):.1f}" r="3.5" fill="{c}">'
                     f'<title>{REG_NAMES[key]} {size_name(r["size"])}: {v:.4g} us</title></circle>')
        if len(pts) > 1:
            path = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
            e.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="1.5"/>')
        lx = x + 10 + (k % 2) * 170
        ly = y + 8 + (k // 2) * 16
        e.append(f'<rect x="{lx}" y="{ly}" width="10" height="10" fill="{c}"/>')
        e.append(f'<text x="{lx + 14}" y="{ly + 9}">{REG_NAMES[key]}</text>')


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    try:
        doc = load(sys.argv[1])
        if not doc.get("rows"):
            raise ValueError(f"{sys.argv[1]}: no rows")
    except (OSError, ValueError, KeyError) as err:
        print(f"bench-plot: {err}", file=sys.stderr)
        return 1
    e = []
    bandwidth_panel(e, doc, 75, 60, 470, 340)
    cost_panel(e, doc, 665, 60, 490, 340)
    height = 470
    modes = doc.get("modes")
    if modes and modes.get("rows"):
        modes_panel(e, modes, 75, 520, 470, 340)
        if modes.get("registration"):
            registration_panel(e, modes, 665, 520, 490, 340)
        height = 930
    title = (f'pfnic-perf --compare: {doc.get("reps")} x {doc.get("iters")} iterations per '
             f'row, {"ODP" if doc.get("odp") else "ordinary"} MRs, log scales (hover for values)')
    with open(sys.argv[2], "w") as f:
        f.write(document(1180, height, title, e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
