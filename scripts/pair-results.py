#!/usr/bin/env python3
"""Collect the numbers of a two-guest suite into JSON.

usage: scripts/pair-results.py PAIR GUEST1.ktap GUEST2.ktap OUT.json

Reads the tools' output that rootfs/pair-test copies into each guest's KTAP
as comments ("# TEST: line") and writes, per test and per side (guest 1 is
the server, guest 2 the client), what ibv_rc_pingpong and perftest
(ib_*_bw, ib_*_lat) print (pfnic-rc-pingpong's "ok:" line and pfnic-perf's
perftest table read the same way), each test's KTAP result, and the
counters test's values. Prints a one-line summary per test.

Exits 1 when both sides reported rxe counters and one side received fewer
RoCE packets than the other sent (a frame lost on the wire).
"""
import json
import re
import sys
import time

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
    elif test == "counters":
        for line in lines:
            f = line.split()
            if len(f) == 2 and f[1].isdigit():
                out[f[0]] = int(f[1])
            elif len(f) == 4 and f[0] == "wire" and f[3].isdigit():
                out["wire_" + f[2]] = int(f[3])
    return out


def main():
    pair, k1, k2, dest = sys.argv[1:5]
    sides = {"server": parse(k1), "client": parse(k2)}
    doc = {"pair": pair, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "guest1": "server", "guest2": "client", "tests": {}}
    for side, tests in sides.items():
        for test, t in tests.items():
            entry = doc["tests"].setdefault(test, {})
            entry[side] = dict(result=t.get("result", "missing"), **numbers(test, t["lines"]))
    bad = []
    cnt = doc["tests"].get("counters", {})
    s, c = cnt.get("server", {}), cnt.get("client", {})
    for a, b, name in ((s, c, "guest 1 -> guest 2"), (c, s, "guest 2 -> guest 1")):
        if "sent_pkts" in a and "rcvd_pkts" in b and a["sent_pkts"] != b["rcvd_pkts"]:
            bad.append(f"{name}: {a['sent_pkts']} RoCE packets sent, {b['rcvd_pkts']} received")
    doc["wire_loss"] = bad
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
    for side in ("server", "client"):
        v = cnt.get(side, {})
        if "sent_pkts" in v:
            print(f"# {pair} counters, {side}: {v['sent_pkts']} packets sent, {v['rcvd_pkts']} received, "
                  f"{v.get('duplicate_request', 0)} duplicate requests, "
                  f"{v.get('completer_retry_err', 0)} retransmissions")
    for b in bad:
        print(f"{pair}: {b}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
