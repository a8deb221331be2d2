#!/usr/bin/env python3
"""Stop a guest that has stalled, in seconds instead of at its time limit.

usage: guest-watch.py [--limit SECONDS] PID REPORT SILENCE-LIMIT LOG...

Watches a running guest's serial logs (its console, and the ports its
init writes results and a heartbeat to) while QEMU (PID) runs. The guest
has stalled when
  - its kernel reports a stall: an RCU CPU or expedited stall, a soft or
    hard lockup, a task blocked too long, a panic; or
  - none of its logs has grown for SILENCE-LIMIT seconds: a guest that is
    alive always prints something (boot and KUnit lines on the console,
    the init's heartbeat on its own port every few seconds once it runs).
Then it gives the kernel a few seconds to finish its report, kills QEMU
(SIGKILL: a stalled guest has nothing to flush) and writes to REPORT why,
with the tail of the console. With --limit it also stops a guest that
runs longer than that. With --monitor (QEMU's human monitor on a unix
socket) the report also has what QEMU knew of the stalled guest: each
vCPU's registers and local APIC (its timer, IRR and ISR), read before the
kill.

Exit status: 0 when QEMU ended by itself, 2 when the guest stalled, 3
when it reached the time limit.
"""

import argparse

import os
import re
import signal
import socket
import sys
import time

STALL = re.compile(
    rb"rcu: INFO: rcu_\w+ (?:detected|self-detected) (?:expedited )?stalls?"
    rb"|rcu_\w+ kthread (?:timer wakeup didn't happen|starved)"
    rb"|watchdog: BUG: soft lockup"
    rb"|Watchdog detected hard LOCKUP"
    rb"|INFO: task \S+ blocked for more than"
    rb"|Kernel panic - not syncing"
)
# How long the kernel gets to finish printing a report it has started.
REPORT_GRACE = 5.0
POLL = 0.5
TAIL_LINES = 25


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    # A zombie is not running any more.
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def tail(path, lines):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            data = f.read()
    except OSError:
        return "(no console log)"
    text = data.decode("utf-8", "replace").replace("\r", "")
    return "\n".join(text.splitlines()[-lines:])


def monitor_dump(path, cpus=8):
    """Each vCPU's registers and local APIC, from QEMU's human monitor."""
    out = []

    def until_prompt(sock):
        data = b""
        deadline = time.monotonic() + 5
        while not data.endswith(b"(qemu) ") and time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return data.decode("utf-8", "replace").replace("\r", "")

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(path)
            until_prompt(sock)
            commands = ["info cpus", "info registers -a"]
            commands += [f"info lapic {i}" for i in range(cpus)]
            for cmd in commands:
                sock.sendall(cmd.encode() + b"\n")
                text = until_prompt(sock)
                # The monitor echoes the command, with line-editing escapes,
                # on the first line, and ends with its prompt: drop both.
                lines = [l for l in text.split("\n")[1:] if not l.startswith("(qemu)")]
                if any("not found" in l or "Invalid" in l for l in lines):
                    continue
                out.append(f"(qemu) {cmd}\n" + "\n".join(l for l in lines if l.strip()))
    except OSError as e:
        out.append(f"(the monitor at {path} did not answer: {e})")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=float, help="the guest's time limit, s")
    ap.add_argument("--monitor", help="QEMU's human monitor (a unix socket)")
    ap.add_argument("pid", type=int, help="QEMU's process id")
    ap.add_argument("report", help="where to say why the guest was stopped")
    ap.add_argument("silence", type=float, help="the silence limit, s")
    ap.add_argument("logs", nargs="+", help="the guest's serial logs, its console first")
    args = ap.parse_args()
    pid, report, silence_limit, logs = args.pid, args.report, args.silence, args.logs
    sizes = {p: 0 for p in logs}
    offsets = {p: 0 for p in logs}
    # The last bytes of each log already searched, so that a match split
    # across two reads is still found.
    carry = {p: b"" for p in logs}
    start = last_growth = time.monotonic()
    stall = None
    stall_seen = None

    while alive(pid):
        time.sleep(POLL)
        now = time.monotonic()
        for p in logs:
            try:
                size = os.path.getsize(p)
            except OSError:
                continue
            if size != sizes[p]:
                sizes[p] = size
                last_growth = now
            if stall is None and size > offsets[p]:
                with open(p, "rb") as f:
                    f.seek(offsets[p])
                    data = f.read(size - offsets[p])
                offsets[p] += len(data)
                m = STALL.search(carry[p] + data)
                if m:
                    stall = m.group(0).decode("utf-8", "replace")
                    stall_seen = now
                carry[p] = (carry[p] + data)[-256:]
        reason = None
        status = 2
        if args.limit is not None and now - start >= args.limit:
            reason = f"the guest did not finish within {args.limit:.0f}s"
            status = 3
        elif stall is not None and now - stall_seen >= REPORT_GRACE:
            reason = f"the guest kernel reported a stall ({stall}) {stall_seen - start:.0f}s after QEMU started"
        elif stall is None and now - last_growth >= silence_limit:
            reason = (f"the guest printed nothing for {silence_limit:.0f}s "
                      f"(from {last_growth - start:.0f}s after QEMU started): hung")
        if reason:
            state = ""
            if args.monitor and status == 2:
                state = "\nQEMU's view of the stalled guest:\n" + monitor_dump(args.monitor)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            with open(report, "w") as f:
                f.write(f"{reason}; the console's last lines:\n{tail(logs[0], TAIL_LINES)}\n{state}")
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
