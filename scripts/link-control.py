#!/usr/bin/env python3
"""The host end of a guest test that needs a link pulled out and plugged in.

usage: scripts/link-control.py QMP-SOCKET KTAP-FILE

Connects to the guest's QEMU monitor (QMP on the unix socket QMP-SOCKET,
which QEMU serves with server=on,wait=off; retried while QEMU starts), then
follows KTAP-FILE, the guest suite's results as QEMU writes them. For every
line

    # pfnic-host: set_link NETDEV up|down

that a test prints there, it runs QMP's set_link on NETDEV, and says so on
stdout. It returns when QEMU closes the monitor (the guest powered off): 0,
or 1 if it never could connect or a set_link failed.

Only what the guest asks is done, and only set_link on a netdev of that one
QEMU: a guest can pull its own cable, nothing else.
"""
import json
import os
import re
import socket
import sys
import time

REQUEST = re.compile(r"^# pfnic-host: set_link ([A-Za-z0-9_.-]+) (up|down)$")
CONNECT_S = 300


def connect(path):
    deadline = time.monotonic() + CONNECT_S
    while True:
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            return s
        except OSError:
            s.close()
            if time.monotonic() > deadline:
                return None
            time.sleep(0.2)


class Qmp:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.sock.settimeout(0.2)
        self.closed = False

    def lines(self):
        """Monitor messages received so far (without blocking for long)."""
        out = []
        try:
            data = self.sock.recv(65536)
            if not data:
                self.closed = True
            self.buf += data
        except socket.timeout:
            pass
        except OSError:
            self.closed = True
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            if line.strip():
                out.append(json.loads(line))
        return out

    def execute(self, cmd, args=None):
        msg = {"execute": cmd}
        if args is not None:
            msg["arguments"] = args
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not self.closed:
            for m in self.lines():
                if "return" in m:
                    return True, m["return"]
                if "error" in m:
                    return False, m["error"]
        return False, "no answer"


def main():
    qmp_path, ktap = sys.argv[1:3]
    sock = connect(qmp_path)
    if sock is None:
        print(f"link-control: no QMP at {qmp_path} within {CONNECT_S} s")
        return 1
    qmp = Qmp(sock)
    ok, why = qmp.execute("qmp_capabilities")
    if not ok:
        print(f"link-control: qmp_capabilities: {why}")
        return 1
    pos, partial, status = 0, "", 0
    while not qmp.closed:
        qmp.lines()  # events; also notices the monitor closing
        try:
            size = os.path.getsize(ktap)
        except OSError:
            continue
        if size < pos:  # truncated: a new run of the suite
            pos, partial = 0, ""
        if size == pos:
            continue
        with open(ktap, errors="replace") as f:
            f.seek(pos)
            text = f.read()
            pos = f.tell()
        text = partial + text
        *complete, partial = text.split("\n")
        for line in complete:
            m = REQUEST.match(line.rstrip("\r"))
            if not m:
                continue
            netdev, state = m.groups()
            ok, why = qmp.execute("set_link", {"name": netdev, "up": state == "up"})
            print(f"link-control: set_link {netdev} {state}: {'ok' if ok else why}", flush=True)
            if not ok:
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
