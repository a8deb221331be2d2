#!/usr/bin/env python3
"""The report of scripts/profile-cold.sh.

usage: scripts/profile-report.py DIR SYSTEM.MAP QEMU-PID FREQUENCY

Reads DIR/perf-flat.data (every thread of the guest's QEMU, sampled at
FREQUENCY per second of CPU time), DIR/perf-main.data (the main loop
thread's call graphs) and DIR/console.log (the workload's tables and the
guest's /proc/stat and /proc/interrupts before and after it). Code QEMU
translated for the guest is named by the guest address it came from (QEMU's
-perfmap); this maps kernel addresses to the guest kernel's functions with
SYSTEM.MAP, and user addresses to "guest user space".
"""
import bisect
import collections
import re
import subprocess
import sys

USER_TOP = 0xffff800000000000


def kernel_symbols(path):
    syms = []
    for line in open(path):
        f = line.split()
        if len(f) >= 3 and f[1] in "tTwW":
            syms.append((int(f[0], 16), f[2]))
    syms.sort()
    return [a for a, _ in syms], [n for _, n in syms]


def perf_script(data, fields):
    r = subprocess.run(["perf", "script", "-i", data, "-F", fields],
                       capture_output=True, text=True)
    return r.stdout.splitlines()


def flat(out, ksyms, pid, freq):
    addrs, names = ksyms
    per_thread = collections.defaultdict(collections.Counter)
    times = []
    # Symbols are resolved only with the address asked for too.
    for line in perf_script(f"{out}/perf-flat.data", "tid,time,ip,sym"):
        f = line.split()
        if len(f) < 3:
            continue
        tid, t = int(f[0]), float(f[1].rstrip(":"))
        times.append(t)
        sym = f[3] if len(f) > 3 else "[unknown]"
        if sym.startswith("guest-0x"):
            pc = int(sym[8:], 16)
            if pc < USER_TOP:
                name = "guest: user space"
            else:
                i = bisect.bisect_right(addrs, pc) - 1
                name = "guest: " + (names[i] if i >= 0 else "?")
        else:
            name = "qemu: " + sym
        per_thread[tid][name] += 1
    if not times:
        print("no samples (was the workload running?)")
        return
    span = max(times) - min(times)
    print(f"## Host threads of QEMU {pid} ({span:.1f} s sampled at {freq}/s of CPU time)\n")
    print("| thread | CPU (share of one core) | in guest code | top functions |")
    print("|---|---|---|---|")
    for tid, c in sorted(per_thread.items(), key=lambda kv: -sum(kv[1].values())):
        total = sum(c.values())
        guest = sum(v for k, v in c.items() if k.startswith("guest: "))
        label = "main loop" if tid == pid else f"thread {tid}"
        top = ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in c.most_common(6))
        print(f"| {label} | {total / max(span, 1e-9) / freq:.2f} | {100 * guest / total:.0f}% | {top} |")
    print()
    for tid, c in sorted(per_thread.items(), key=lambda kv: -sum(kv[1].values())):
        total = sum(c.values())
        if total < 50:
            continue
        label = "main loop" if tid == pid else f"thread {tid}"
        print(f"### {label}: {total} samples\n")
        for k, v in c.most_common(20):
            print(f"    {100 * v / total:5.1f}%  {k}")
        print()


def main_loop(out):
    r = subprocess.run(["perf", "report", "-i", f"{out}/perf-main.data", "--children",
                        "--stdio", "--sort", "sym"], capture_output=True, text=True)
    rows = []
    for line in r.stdout.splitlines():
        m = re.match(r"^\s+([0-9.]+)%\s+([0-9.]+)%\s+\[.\]\s+(\S+)", line)
        if m and re.match(r"(pfnic_|vtd_|pci_|address_space_|qemu_mutex|aio_bh_call)", m.group(3)):
            rows.append((float(m.group(1)), float(m.group(2)), m.group(3)))
    print("## The main loop's time, by function and its callees (device and IOMMU model)\n")
    print("    total   self  function")
    for total, self_, name in rows[:30]:
        print(f"    {total:5.1f}% {self_:5.1f}%  {name}")
    print()


def guest(out):
    text = open(f"{out}/console.log", errors="replace").read()
    text = re.sub(r"\r", "", text)

    def block(tag):
        m = re.search(rf"{tag}\n(.*?)(?:PROFILE-|\Z)", text, re.S)
        return m.group(1) if m else ""

    def cpus(b):
        out = {}
        for line in b.splitlines():
            f = line.split()
            if f and re.fullmatch(r"cpu[0-9]+", f[0]):
                v = list(map(int, f[1:8]))
                out[f[0]] = (v[0] + v[1], v[2] + v[5] + v[6], v[3] + v[4])
        return out

    def prq(b):
        for line in b.splitlines():
            if "prq" in line:
                return sum(int(x) for x in line.split()[1:] if x.isdigit())
        return 0

    before, after = block("PROFILE-STAT-BEFORE"), block("PROFILE-STAT-AFTER")
    b, a = cpus(before), cpus(after)
    print("## The guest's CPUs over the whole workload (/proc/stat)\n")
    print("| CPU | user | kernel (incl. interrupts) | idle |")
    print("|---|---|---|---|")
    for cpu in sorted(a):
        d = [x - y for x, y in zip(a[cpu], b.get(cpu, (0, 0, 0)))]
        tot = sum(d) or 1
        print(f"| {cpu} | {100 * d[0] / tot:.0f}% | {100 * d[1] / tot:.0f}% | {100 * d[2] / tot:.0f}% |")
    print(f"\npage request interrupts: {prq(after) - prq(before)}\n")
    print("## The workload's own report\n")
    for line in text.splitlines():
        if re.match(r"^(op |write |read |send )", line):
            print("    " + line)


def main():
    out, system_map, pid, freq = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    print(f"# Profile of cold transfers ({out})\n")
    guest(out)
    print()
    flat(out, kernel_symbols(system_map), pid, freq)
    main_loop(out)


if __name__ == "__main__":
    main()
