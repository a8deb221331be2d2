#!/usr/bin/env python3
"""Set pfnic's two verbs paths side by side (scripts/bench.sh).

usage: scripts/bench-paths.py CONSOLE_LOG OUT_JSON OUT_SVG

The guest ran pfnic-cold-bench (userspace/examples/cold_bench.c) twice, on
pfnic's own libibverbs.so.1 (the private ioctls: "old") and on rdma-core's
with pfnic's provider (the RDMA core: "new"), each printing its JSON on a
console line that starts with "@paths ". Prints a table of the warm WRITE
time, the device's added cost per faulted page and its ratio to the guest
CPU's first touch for both, with new / old; writes both runs to OUT_JSON
and draws the times and per-page costs into OUT_SVG. Exits 1 if either run
is missing.
"""
import json
import sys

from svgplot import Panel, document, esc, log_axis, num

PATHS = {"old": ("pfnic's libibverbs.so.1, private ioctls", "#ff7f0e"),
         "new": ("rdma-core's libibverbs.so.1 + provider, RDMA core", "#1f77b4")}


def size_name(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def load(path):
    runs = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip().replace("\r", "")
            at = line.find("@paths ")
            if at < 0:
                continue
            try:
                doc = json.loads(line[at + len("@paths "):])
            except json.JSONDecodeError:
                continue
            runs[doc.get("label")] = doc
    return runs


def ratio(a, b):
    return a / b if num(a) and num(b) else float("nan")


def table(old, new):
    print("verbs paths side by side: RDMA WRITE on on-demand memory, warm and cold "
          "(one process, loopback; new / old: below 1 the new path is faster)")
    head = (f"{'size':>8} {'warm old':>9} {'warm new':>9} {'new/old':>8} "
            f"{'page old':>9} {'page new':>9} {'new/old':>8} {'xCPU old':>9} {'xCPU new':>9}")
    print(head)
    print(f"{'':>8} {'us':>9} {'us':>9} {'':>8} {'us':>9} {'us':>9} {'':>8} {'':>9} {'':>9}")
    for o, n in zip(old["rows"], new["rows"]):
        print(f"{size_name(o['size']):>8} {o['warm_us']:9.1f} {n['warm_us']:9.1f} "
              f"{ratio(n['warm_us'], o['warm_us']):8.2f} "
              f"{o['device_per_page_us']:9.2f} {n['device_per_page_us']:9.2f} "
              f"{ratio(n['device_per_page_us'], o['device_per_page_us']):8.2f} "
              f"{o['ratio']:9.2f} {n['ratio']:9.2f}")
    print("page: the device's added cost per faulted page, (cold - warm) / pages; "
          "xCPU: that over the guest CPU's own first touch")


def bars(e, runs, key, x, y, w, h, ylabel, title):
    sizes = [r["size"] for r in runs["old"]["rows"]]
    vals = [r[key] for doc in runs.values() for r in doc["rows"]]
    lo, hi = log_axis(vals)
    p = Panel(e, x, y, w, h, lo, hi, ylabel)
    e.append(f'<text x="{x + w / 2}" y="{y - 10}" text-anchor="middle" font-size="13">'
             f'{esc(title)}</text>')
    group = w / max(1, len(sizes))
    bar = min(30, group * 0.3)
    for i, size in enumerate(sizes):
        cx = x + group * (i + 0.5)
        for j, label in enumerate(("old", "new")):
            row = next(r for r in runs[label]["rows"] if r["size"] == size)
            v = row[key]
            if not num(v):
                continue
            top = p.ty(v)
            e.append(f'<rect x="{cx - bar + j * bar:.1f}" y="{top:.1f}" width="{bar - 1:.1f}" '
                     f'height="{max(1.0, y + h - top):.1f}" fill="{PATHS[label][1]}">'
                     f'<title>{label} {size_name(size)}: {v:.4g}</title></rect>')
        old = next(r for r in runs["old"]["rows"] if r["size"] == size)[key]
        new = next(r for r in runs["new"]["rows"] if r["size"] == size)[key]
        if num(old) and num(new):
            e.append(f'<text x="{cx:.1f}" y="{p.ty(max(old, new)) - 4:.1f}" '
                     f'text-anchor="middle" font-size="10">new/old {new / old:.2f}</text>')
        e.append(f'<text x="{cx:.1f}" y="{y + h + 14}" text-anchor="middle">'
                 f'{size_name(size)}</text>')


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    runs = load(sys.argv[1])
    if "old" not in runs or "new" not in runs:
        print(f"bench-paths: no old and new pfnic-cold-bench runs in {sys.argv[1]}",
              file=sys.stderr)
        return 1
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(runs, f, indent=1)
    table(runs["old"], runs["new"])
    e = []
    bars(e, runs, "warm_us", 90, 70, 440, 300, "us per WRITE (median)",
         "Warm RDMA WRITE, post to completion")
    bars(e, runs, "device_per_page_us", 660, 70, 440, 300, "us per faulted page",
         "Device's added cost per faulted page")
    for k, label in enumerate(("old", "new")):
        lx = 90 + k * 430
        e.append(f'<rect x="{lx}" y="{420}" width="10" height="10" fill="{PATHS[label][1]}"/>')
        e.append(f'<text x="{lx + 14}" y="{429}">{label}: {esc(PATHS[label][0])}</text>')
    with open(sys.argv[3], "w", encoding="utf-8") as f:
        f.write(document(1180, 450, "pfnic: the private verbs path against the RDMA core's", e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
