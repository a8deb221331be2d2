#!/usr/bin/env python3
"""Set the memory modes side by side on the RDMA core's path (scripts/bench.sh).

usage: scripts/bench-core.py CONSOLE_LOG OUT_JSON OUT_SVG

The guest ran pfnic-cold-bench (userspace/examples/cold_bench.c: Debian's
libibverbs.so.1, pfnic's provider, the RDMA core) once per memory mode
(PFNIC_MEM_MODE), each printing its JSON, labelled with the mode, on a
console line that starts with "@core ". Prints a table of the warm WRITE
time, the device's added cost per faulted page and its ratio to the guest
CPU's first touch in each mode, with each mode against the first; writes
the runs to OUT_JSON and draws the times and per-page costs into OUT_SVG.
Exits 1 if fewer than two runs are there.
"""
import json
import sys

from svgplot import Panel, document, esc, log_axis, num

COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c")
DESCRIPTION = {"sva": "sva: the IOMMU's page requests (PRI)",
               "odp": "odp: the driver's page faults (HMM)"}


def size_name(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def load(path):
    runs = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip().replace("\r", "")
            at = line.find("@core ")
            if at < 0:
                continue
            try:
                doc = json.loads(line[at + len("@core "):])
            except json.JSONDecodeError:
                continue
            runs[doc.get("label")] = doc
    return runs


def ratio(a, b):
    return a / b if num(a) and num(b) else float("nan")


def table(runs):
    labels = list(runs)
    first = labels[0]
    print("the RDMA core's path in each memory mode: RDMA WRITE on on-demand memory, "
          f"warm and cold (one process, loopback; x{first}: against {first}, below 1 faster)")
    cols = [f"warm {m}" for m in labels] + [f"x{first}" for m in labels[1:]] \
        + [f"page {m}" for m in labels] + [f"x{first}" for m in labels[1:]] \
        + [f"xCPU {m}" for m in labels]
    print(f"{'size':>8} " + " ".join(f"{c:>10}" for c in cols))
    for i, row in enumerate(runs[first]["rows"]):
        rows = [runs[m]["rows"][i] for m in labels]
        vals = [r["warm_us"] for r in rows] \
            + [ratio(r["warm_us"], rows[0]["warm_us"]) for r in rows[1:]] \
            + [r["device_per_page_us"] for r in rows] \
            + [ratio(r["device_per_page_us"], rows[0]["device_per_page_us"]) for r in rows[1:]] \
            + [r["ratio"] for r in rows]
        print(f"{size_name(row['size']):>8} " + " ".join(f"{v:10.2f}" for v in vals))
    print("warm: us per WRITE (median); page: the device's added cost per faulted page, "
          "(cold - warm) / pages, us; xCPU: that over the guest CPU's own first touch")


def bars(e, runs, key, x, y, w, h, ylabel, title):
    labels = list(runs)
    sizes = [r["size"] for r in runs[labels[0]]["rows"]]
    vals = [r[key] for doc in runs.values() for r in doc["rows"]]
    lo, hi = log_axis(vals)
    p = Panel(e, x, y, w, h, lo, hi, ylabel)
    e.append(f'<text x="{x + w / 2}" y="{y - 10}" text-anchor="middle" font-size="13">'
             f'{esc(title)}</text>')
    group = w / max(1, len(sizes))
    bar = min(30, group * 0.6 / len(labels))
    for i, size in enumerate(sizes):
        cx = x + group * (i + 0.5) - bar * len(labels) / 2
        got = []
        for j, label in enumerate(labels):
            row = next(r for r in runs[label]["rows"] if r["size"] == size)
            v = row[key]
            if not num(v):
                continue
            got.append(v)
            top = p.ty(v)
            e.append(f'<rect x="{cx + j * bar:.1f}" y="{top:.1f}" width="{bar - 1:.1f}" '
                     f'height="{max(1.0, y + h - top):.1f}" fill="{COLOURS[j % len(COLOURS)]}">'
                     f'<title>{label} {size_name(size)}: {v:.4g}</title></rect>')
        if len(got) == len(labels) > 1:
            e.append(f'<text x="{x + group * (i + 0.5):.1f}" y="{p.ty(max(got)) - 4:.1f}" '
                     f'text-anchor="middle" font-size="10">{labels[1]}/{labels[0]} '
                     f'{got[1] / got[0]:.2f}</text>')
        e.append(f'<text x="{x + group * (i + 0.5):.1f}" y="{y + h + 14}" '
                 f'text-anchor="middle">{size_name(size)}</text>')


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    runs = load(sys.argv[1])
    if len(runs) < 2:
        print(f"bench-core: {len(runs)} pfnic-cold-bench runs in {sys.argv[1]}, "
              "want one per memory mode (two at least)", file=sys.stderr)
        return 1
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(runs, f, indent=1)
    table(runs)
    e = []
    bars(e, runs, "warm_us", 90, 70, 440, 300, "us per WRITE (median)",
         "Warm RDMA WRITE, post to completion")
    bars(e, runs, "device_per_page_us", 660, 70, 440, 300, "us per faulted page",
         "Device's added cost per faulted page")
    for k, label in enumerate(runs):
        lx = 90 + k * 430
        e.append(f'<rect x="{lx}" y="{420}" width="10" height="10" '
                 f'fill="{COLOURS[k % len(COLOURS)]}"/>')
        e.append(f'<text x="{lx + 14}" y="{429}">{esc(DESCRIPTION.get(label, label))}</text>')
    with open(sys.argv[3], "w", encoding="utf-8") as f:
        f.write(document(1180, 450, "pfnic through the RDMA core: the memory modes", e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
