#!/usr/bin/env python3
"""Compare the pairings of one run side by side, against rxe-rxe.

usage: scripts/pair-compare.py RUN_DIR

Reads RUN_DIR/pair-*.json (scripts/pair-results.py, one per pairing of the
run) and, for every measured test, takes the client's number: round-trip
time of rc_pingpong, average bandwidth of the *_bw tests, typical latency of
the *_lat tests. Prints a table of the numbers and of each pairing's speed
relative to rxe-rxe (bandwidth over rxe-rxe's; rxe-rxe's latency over the
pairing's: above 1 is faster than rxe-rxe), writes RUN_DIR/pairs.json and
draws the ratios in RUN_DIR/pairs.svg. Exits 1 only on unreadable input.
"""
import glob
import json
import os
import sys

from svgplot import Panel, document, esc, log_axis, num

BASE = "rxe-rxe"
# test: (the client's field, unit, larger is better)
METRICS = {
    "rc_pingpong": ("usec_per_iter", "us/iter", False),
    "rc_pingpong_events": ("usec_per_iter", "us/iter", False),
    "rc_pingpong_odp": ("usec_per_iter", "us/iter", False),
    "write_bw": ("bw_avg_MB_s", "MiB/s", True),
    "read_bw": ("bw_avg_MB_s", "MiB/s", True),
    "send_bw": ("bw_avg_MB_s", "MiB/s", True),
    "write_lat": ("t_typical_us", "us", False),
    "read_lat": ("t_typical_us", "us", False),
    "send_lat": ("t_typical_us", "us", False),
    "nvme_rdma": ("write_MB_s", "MB/s", True),
    "nvme_tcp": ("write_MB_s", "MB/s", True),
}
ORDER = ["rxe-rxe", "pfnic-pfnic", "pfnic-rxe", "rxe-pfnic"]


def load(run_dir):
    pairs = {}
    for path in sorted(glob.glob(os.path.join(run_dir, "pair-*.json"))):
        with open(path) as f:
            doc = json.load(f)
        if os.path.basename(path) != f"pair-{doc['pair']}.json":
            # Another suite of the pairing (its link-pull run): not the compared one.
            continue
        values = {}
        for test, (field, _, _) in METRICS.items():
            v = doc.get("tests", {}).get(test, {}).get("client", {}).get(field)
            if isinstance(v, (int, float)) and v > 0:
                values[test] = v
        pairs[doc["pair"]] = values
    return dict(sorted(pairs.items(), key=lambda p: (ORDER + [p[0]]).index(p[0])))


def ratios(pairs):
    base = pairs.get(BASE, {})
    out = {}
    for pair, values in pairs.items():
        r = {}
        for test, v in values.items():
            b = base.get(test)
            if b:
                better = METRICS[test][2]
                r[test] = round(v / b if better else b / v, 3)
        out[pair] = r
    return out


def svg(pairs, rel, path):
    """Grouped bars: per test, each pairing's speed relative to rxe-rxe (log scale)."""
    tests = [t for t in METRICS if any(t in r for r in rel.values())]
    names = list(pairs)
    colors = ["#888888", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b"]
    left, top, group = 80, 40, 90
    W, H = left + 30 + group * len(tests), 420
    e = []
    lo, hi = log_axis([v for r in rel.values() for v in r.values()] + [1.0])
    p = Panel(e, left, top, W - left - 20, H - top - 90, lo, hi, "speed relative to rxe-rxe")
    e.append(f'<line x1="{left}" x2="{W - 20}" y1="{p.ty(1):.1f}" y2="{p.ty(1):.1f}" stroke="#000"/>')
    bar = (group - 20) / max(1, len(names))
    for i, t in enumerate(tests):
        x0 = left + 10 + i * group
        for j, name in enumerate(names):
            v = rel.get(name, {}).get(t)
            if not num(v):
                continue
            y1, y2 = sorted((p.ty(v), p.ty(1.0)))
            e.append(f'<rect x="{x0 + j * bar:.1f}" y="{y1:.1f}" width="{bar - 2:.1f}" '
                     f'height="{max(1, y2 - y1):.1f}" fill="{colors[j % len(colors)]}">'
                     f'<title>{esc(name)} {t}: {v}</title></rect>')
        tx, ty = x0 + (group - 20) / 2, H - 74
        e.append(f'<text x="{tx:.1f}" y="{ty}" text-anchor="end" '
                 f'transform="rotate(-35 {tx:.1f} {ty})">{t}</text>')
    for j, name in enumerate(names):
        e.append(f'<rect x="{left + j * 130}" y="{H - 22}" width="12" height="12" '
                 f'fill="{colors[j % len(colors)]}"/>')
        e.append(f'<text x="{left + j * 130 + 16}" y="{H - 12}">{esc(name)}</text>')
    title = "Speed relative to rxe-rxe (above 1: faster), one run, log scale"
    with open(path, "w") as f:
        f.write(document(W, H, title, e, font_size=12))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    run_dir = sys.argv[1]
    try:
        pairs = load(run_dir)
    except (OSError, ValueError, KeyError) as err:
        print(f"pair-compare: {err}", file=sys.stderr)
        return 1
    if not pairs:
        return 0
    rel = ratios(pairs)
    names = list(pairs)
    print("# pairings side by side (client's numbers; x: speed relative to " + BASE + ")")
    print("# " + f"{'test':<20}" + "".join(f"{p:>28}" for p in names))
    for test, (_, unit, _) in METRICS.items():
        if not any(test in v for v in pairs.values()):
            continue
        cells = []
        for p in names:
            v = pairs[p].get(test)
            r = rel[p].get(test)
            cells.append("-" if v is None else f"{v:g} {unit}" + ("" if r is None else f" ({r:g}x)"))
        print("# " + f"{test:<20}" + "".join(f"{c:>28}" for c in cells))
    with open(os.path.join(run_dir, "pairs.json"), "w") as f:
        json.dump({"base": BASE, "values": pairs, "speed_vs_base": rel,
                   "units": {t: m[1] for t, m in METRICS.items()}}, f, indent=2, sort_keys=True)
        f.write("\n")
    svg(pairs, rel, os.path.join(run_dir, "pairs.svg"))
    print(f"# plot: {os.path.join(run_dir, 'pairs.svg')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
