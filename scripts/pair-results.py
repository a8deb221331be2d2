#!/usr/bin/env python3
"""Collect the numbers of a two-guest suite into JSON.

usage: scripts/pair-results.py PAIR GUEST1.ktap GUEST2.ktap OUT.json
                                [GUEST1.pcap GUEST2.pcap]

Reads the tools' output that rootfs/pair-test copies into each guest's KTAP
as comments ("# TEST: line") and writes, per test and per side (guest 1 is
the server, guest 2 the client), what ibv_rc_pingpong and perftest
(ib_*_bw, ib_*_lat) print (pfnic-rc-pingpong's "ok:" line and pfnic-perf's
perftest table read the same way), each test's KTAP result, and the
counters test's values. Prints a one-line summary per test.

With the two guests' wire recordings (run-pair.sh --pcap: each guest's
netdev, both ways), checks that the wire lost nothing: every RoCE frame
(UDP port 4791) one guest's netdev sent reached the other's, and nothing
reached a guest that its peer did not send. Exits 1 when one did not.

rxe's own counters (sent_pkts against the peer's rcvd_pkts) are reported but
are not a measure of the wire: rxe counts a packet as received only after
its header check, which drops the late responses that reach a queue pair
already torn down (they follow retransmissions under a slow TCG host).
"""
import collections
import os
import struct
import json
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svgplot import Panel, document, esc, log_axis, num as plottable  # noqa: E402

NUM = r"([0-9]+(?:\.[0-9]+)?)"
BW_COLS = ["bytes", "iterations", "bw_peak_MB_s", "bw_avg_MB_s", "msg_rate_Mpps"]
LAT_COLS = ["bytes", "iterations", "t_min_us", "t_max_us", "t_typical_us",
            "t_avg_us", "t_stdev_us", "p99_us", "p99_9_us"]


def num(s):
    return float(s) if "." in s else int(s)


def parse(path):
    """{test: {"result": ..., "lines": [...]}} from one guest's KTAP."""
    tests = {}
    for line in open(path, errors="replace"):
        line = line.rstrip("\n").rstrip("\r")
        m = re.match(r"^# ([a-z_0-9]+): ?(.*)$", line)
        if m:
            tests.setdefault(m.group(1), {"lines": []})["lines"].append(m.group(2))
            continue
        m = re.match(r"^(ok|not ok) [0-9]+ ([a-z_0-9]+)(.*)$", line)
        if m:
            t = tests.setdefault(m.group(2), {"lines": []})
            t["result"] = "skip" if "# SKIP" in m.group(3) else (
                "pass" if m.group(1) == "ok" else "fail")
    return tests


def numbers(test, lines):
    out = {}
    text = "\n".join(lines)
    if "pingpong" in test:
        m = re.search(r"([0-9]+) bytes in " + NUM + r" seconds = " + NUM + r" Mbit/sec", text)
        if m:
            out.update(bytes=num(m.group(1)), seconds=num(m.group(2)), Mbit_s=num(m.group(3)))
        m = re.search(r"([0-9]+) iters in " + NUM + r" seconds = " + NUM + r" usec/iter", text)
        if m:
            out.update(iterations=num(m.group(1)), usec_per_iter=num(m.group(3)))
        m = re.search(r"^ok: (.*)$", text, re.M)
        if m:
            out["ok"] = m.group(1)
            m = re.search(NUM + r" us per round trip", m.group(1))
            if m:
                out["usec_per_iter"] = num(m.group(1))
    elif test.endswith("_bw") or test.endswith("_lat"):
        cols = BW_COLS if test.endswith("_bw") else LAT_COLS
        for line in lines:
            f = line.split()
            if len(f) >= 5 and all(re.fullmatch(NUM, x) for x in f[:len(cols)]):
                out.update({c: num(v) for c, v in zip(cols, f)})
    elif test.startswith("mpi_"):
        # pfnic-mpi-pingpong: "size BYTES iters N lat_us F bw_MBps F" a size.
        for line in lines:
            m = re.match(r"^size ([0-9]+) iters ([0-9]+) lat_us " + NUM + r" bw_MBps " + NUM, line)
            if m:
                out.setdefault("sizes", {})[m.group(1)] = {
                    "iterations": int(m.group(2)), "lat_us": num(m.group(3)),
                    "bw_MB_s": num(m.group(4))}
        m = re.search(r"^mpi-pingpong: ok, ([0-9]+) messages checked", text, re.M)
        if m:
            out["messages_checked"] = int(m.group(1))
    elif test.startswith("nvme_"):
        # fio's summary: "READ: bw=11.5MiB/s (12.1MB/s), ..." (decimal units in
        # the parentheses), the write phase and the verifying read phase.
        scale = {"B": 1e-6, "kB": 1e-3, "MB": 1.0, "GB": 1e3}
        for line in lines:
            m = re.match(r"^\s*(READ|WRITE): bw=\S+ \(" + NUM + r"(B|kB|MB|GB)/s\)", line)
            if m:
                out[m.group(1).lower() + "_MB_s"] = round(num(m.group(2)) * scale[m.group(3)], 3)
        m = re.search(r"Successfully reconnected \(([0-9]+) attempts?\)", text)
        if m:
            out["reconnect_attempts"] = int(m.group(1))
    elif test == "qperf":
        # "rc_bw:" then "    bw  =  1.2 MB/sec"; "rc_lat:" then "    latency  =  310 us".
        units = {"B/sec": 1e-6, "KB/sec": 1e-3, "MB/sec": 1.0, "GB/sec": 1e3,
                 "ns": 1e-3, "us": 1.0, "ms": 1e3, "sec": 1e6}
        for m in re.finditer(r"^(\w+):\n\s*(bw|latency)\s+=\s+" + NUM + r" (\S+)$", text, re.M):
            if m.group(4) in units:
                key = m.group(1) + ("_MB_s" if m.group(2) == "bw" else "_us")
                out[key] = round(num(m.group(3)) * units[m.group(4)], 3)
    elif test == "counters":
        for line in lines:
            f = line.split()
            if len(f) == 2 and f[1].isdigit():
                out[f[0]] = int(f[1])
            elif len(f) == 4 and f[0] == "wire" and f[3].isdigit():
                out["wire_" + f[2]] = int(f[3])
    return out


ROCE_PORT = 4791


def roce_frames(path):
    """{source MAC: Counter of frames} of the RoCE frames in a pcap file.

    A frame is its recorded bytes and its length on the wire (a recording
    with a snap length keeps only the headers, the same on both sides).
    """
    out = collections.defaultdict(collections.Counter)
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24:
            raise ValueError(f"{path}: not a pcap file")
        magic = struct.unpack("<I", head[:4])[0]
        order = {0xa1b2c3d4: "<", 0xd4c3b2a1: ">"}.get(magic)
        if order is None:
            raise ValueError(f"{path}: not a pcap file (magic {magic:#x})")
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                break
            _, _, caplen, wirelen = struct.unpack(order + "IIII", rec)
            data = f.read(caplen)
            if len(data) < caplen:
                break
            if is_roce(data):
                out[data[6:12]][(wirelen, data)] += 1
    return out


def is_roce(frame):
    """An untagged Ethernet frame carrying UDP to port 4791 (IPv4 or IPv6)."""
    if len(frame) < 14:
        return False
    ethertype = struct.unpack(">H", frame[12:14])[0]
    ip = frame[14:]
    if ethertype == 0x0800 and len(ip) >= 20 and ip[9] == 17:
        udp = ip[(ip[0] & 0xf) * 4:]
    elif ethertype == 0x86dd and len(ip) >= 40 and ip[6] == 17:
        udp = ip[40:]
    else:
        return False
    return len(udp) >= 4 and struct.unpack(">H", udp[2:4])[0] == ROCE_PORT


def wire_loss(pcap1, pcap2):
    """Problems found comparing the two recordings, and per-direction counts."""
    f1, f2 = roce_frames(pcap1), roce_frames(pcap2)
    macs = {"guest 1": bytes.fromhex("525400000201"), "guest 2": bytes.fromhex("525400000202")}
    bad, counts = [], {}
    for (src, sent), (dst, arrived) in (((("guest 1", f1), ("guest 2", f2))),
                                         (("guest 2", f2), ("guest 1", f1))):
        mac = macs[src]
        out, got = sent.get(mac, collections.Counter()), arrived.get(mac, collections.Counter())
        lost, extra = out - got, got - out
        name = f"{src} -> {dst}"
        counts[name] = {"sent": sum(out.values()), "arrived": sum(got.values()),
                        "lost": sum(lost.values()), "unsent": sum(extra.values())}
        if lost:
            bad.append(f"{name}: {sum(lost.values())} of {sum(out.values())} RoCE frames "
                       f"sent never arrived")
        if extra:
            bad.append(f"{name}: {sum(extra.values())} RoCE frames arrived that were never sent")
    return bad, counts


def mpi_side_by_side(tests):
    """The MPI jobs of one run side by side: each fabric's latency at 8 bytes and
    bandwidth at its largest size, and pfnic's against the others' (latency:
    theirs over pfnic's, so above 1 is pfnic faster; bandwidth: pfnic's over
    theirs)."""
    fabrics = {}
    for test, entry in sorted(tests.items()):
        sizes = entry.get("client", {}).get("sizes")
        if not test.startswith("mpi_") or not sizes:
            continue
        big = max(sizes, key=int)
        fabrics[test[4:]] = {"lat_us": sizes.get("8", {}).get("lat_us"),
                             "bw_MB_s": sizes[big]["bw_MB_s"], "bw_bytes": int(big)}
    if not fabrics or any(v["lat_us"] is None for v in fabrics.values()):
        return None
    out = {"lat_bytes": 8, "bw_bytes": min(v["bw_bytes"] for v in fabrics.values()),
           "fabrics": fabrics, "ratios": {}}
    p = fabrics.get("pfnic")
    for other, v in fabrics.items():
        if p and other != "pfnic" and p["lat_us"] and v["bw_MB_s"]:
            out["ratios"][f"pfnic against {other}"] = {
                "lat": v["lat_us"] / p["lat_us"], "bw": p["bw_MB_s"] / v["bw_MB_s"]}
    return out


def nvme_side_by_side(tests):
    """fio's numbers over NVMe/RDMA and NVMe/TCP on the same wire, and RDMA's over TCP's
    (above 1: RDMA faster)."""
    nvme = {t[5:]: tests[t]["client"] for t in ("nvme_rdma", "nvme_tcp")
            if tests.get(t, {}).get("client", {}).get("write_MB_s")}
    if len(nvme) < 2:
        return None
    return {"transports": nvme, "rdma_over_tcp": {
        k: nvme["rdma"][k] / nvme["tcp"][k] for k in ("write_MB_s", "read_MB_s")
        if nvme["rdma"].get(k) and nvme["tcp"].get(k)}}


def mpi_svg(pair, tests, path):
    """Two panels, latency and bandwidth against message size, a line a fabric."""
    lines = {}
    for test, entry in sorted(tests.items()):
        sizes = entry.get("client", {}).get("sizes")
        if test.startswith("mpi_") and sizes:
            lines[test[4:]] = sorted((int(k), dict(v)) for k, v in sizes.items())
    if not lines:
        return False
    xs = sorted({x for pts in lines.values() for x, _ in pts})
    colors = {"pfnic": "#1f77b4", "rxe": "#ff7f0e", "tcp": "#2ca02c"}
    W, H, left, top, pw, ph = 900, 400, 80, 40, 330, 280
    e = []
    # Latency in ms: short tick labels.
    for pts in lines.values():
        for _, v in pts:
            v["lat_ms"] = v["lat_us"] / 1000
    for k, (key, label) in enumerate((("lat_ms", "latency, ms (half round trip)"),
                                      ("bw_MB_s", "bandwidth, MB/s"))):
        x0 = left + k * (pw + 110)
        lo, hi = log_axis([v[key] for pts in lines.values() for _, v in pts])
        p = Panel(e, x0, top, pw, ph, lo, hi, label)

        def tx(size, x0=x0):
            return x0 + 15 + (pw - 30) * xs.index(size) / max(1, len(xs) - 1)
        for size in xs:
            e.append(f'<text x="{tx(size):.1f}" y="{top + ph + 16}" text-anchor="middle">'
                     f'{size if size < 1024 else f"{size // 1024}K"}</text>')
        e.append(f'<text x="{x0 + pw / 2}" y="{top + ph + 34}" text-anchor="middle">'
                 f'message size, bytes</text>')
        for fabric, pts in lines.items():
            pts = [(x, v[key]) for x, v in pts if plottable(v[key])]
            c = colors.get(fabric, "#888")
            path_d = " ".join(f"{'M' if i == 0 else 'L'}{tx(x):.1f},{p.ty(v):.1f}"
                              for i, (x, v) in enumerate(pts))
            e.append(f'<path d="{path_d}" fill="none" stroke="{c}" stroke-width="2"/>')
            for x, v in pts:
                e.append(f'<circle cx="{tx(x):.1f}" cy="{p.ty(v):.1f}" r="3" fill="{c}">'
                         f'<title>{esc(fabric)} {x} B: {v}</title></circle>')
    for j, fabric in enumerate(lines):
        e.append(f'<rect x="{left + j * 110}" y="{H - 22}" width="12" height="12" '
                 f'fill="{colors.get(fabric, "#888")}"/>')
        e.append(f'<text x="{left + j * 110 + 16}" y="{H - 12}">{esc(fabric)}</text>')
    title = f"{pair}: Open MPI ping-pong by fabric, one run, log scales"
    with open(path, "w") as f:
        f.write(document(W, H, title, e, font_size=12))
    return True


def main():
    pair, k1, k2, dest = sys.argv[1:5]
    pcaps = sys.argv[5:7]
    sides = {"server": parse(k1), "client": parse(k2)}
    doc = {"pair": pair, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "guest1": "server", "guest2": "client", "tests": {}}
    for side, tests in sides.items():
        for test, t in tests.items():
            entry = doc["tests"].setdefault(test, {})
            entry[side] = dict(result=t.get("result", "missing"), **numbers(test, t["lines"]))
    bad = []
    cnt = doc["tests"].get("counters", {})
    if len(pcaps) == 2:
        missing = [p for p in pcaps if not os.path.exists(p)]
        if missing:
            bad = [f"no recording of the wire: {p}" for p in missing]
        else:
            bad, doc["wire_frames"] = wire_loss(*pcaps)
    doc["wire_loss"] = bad
    mpi = mpi_side_by_side(doc["tests"])
    if mpi:
        doc["mpi"] = mpi
    nvme = nvme_side_by_side(doc["tests"])
    if nvme:
        doc["nvme"] = nvme
    with open(dest, "w") as f:
        json.dump(doc, f, indent=2, sort_keys=True)
        f.write("\n")
    for test, entry in doc["tests"].items():
        c = entry.get("client", {})
        if "usec_per_iter" in c:
            print(f"# {pair} {test}: {c['usec_per_iter']} usec/iter")
        elif "bw_avg_MB_s" in c:
            print(f"# {pair} {test}: {c['bw_avg_MB_s']} MB/s average, {c['bytes']}-byte messages")
        elif "t_typical_us" in c:
            print(f"# {pair} {test}: {c['t_typical_us']} us typical, {c['bytes']}-byte messages")
        elif "rc_bw_MB_s" in c or "rc_lat_us" in c:
            print(f"# {pair} {test}: rc_bw {c.get('rc_bw_MB_s')} MB/s, rc_lat {c.get('rc_lat_us')} us")
        elif "write_MB_s" in c:
            print(f"# {pair} {test}: fio {c['write_MB_s']} MB/s writing, "
                  f"{c.get('read_MB_s')} MB/s reading back (every block checked)")
    if nvme:
        print(f"# {pair} NVMe over RDMA against NVMe over TCP on the same wire: "
              + ", ".join(f"{k} x{v:.2f}" for k, v in nvme["rdma_over_tcp"].items()))
    if mpi:
        for fabric, v in mpi["fabrics"].items():
            print(f"# {pair} MPI ping-pong over {fabric}: {v['lat_us']} us ({mpi['lat_bytes']} B), "
                  f"{v['bw_MB_s']} MB/s ({mpi['bw_bytes']} B)")
        for name, r in mpi["ratios"].items():
            print(f"# {pair} MPI {name}: latency x{r['lat']:.2f}, bandwidth x{r['bw']:.2f}")
        plot = re.sub(r"\.json$", "", dest) + "-mpi.svg"
        if mpi_svg(pair, doc["tests"], plot):
            print(f"# {pair} MPI plot: {plot}")
    for side in ("server", "client"):
        v = cnt.get(side, {})
        if "sent_pkts" in v:
            print(f"# {pair} counters, {side}: {v['sent_pkts']} packets sent, {v['rcvd_pkts']} received, "
                  f"{v.get('duplicate_request', 0)} duplicate requests, "
                  f"{v.get('completer_retry_err', 0)} retransmissions")
    for name, n in doc.get("wire_frames", {}).items():
        print(f"# {pair} wire, {name}: {n['sent']} RoCE frames sent, {n['arrived']} arrived")
    for b in bad:
        print(f"{pair}: {b}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
