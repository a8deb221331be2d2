#!/usr/bin/env python3
"""Fails when a document or a comment states a device ABI or uAPI version the code does not have.

The versions are read from where they are defined: the device ABI from the device's register
header (PFNIC_ABI_MAJOR, PFNIC_ABI_MINOR and the firmware version PFNIC_FW_VERSION_VALUE in
qemu-device/hw/pfnic/pfnic_regs.h), the uAPI from the driver's uAPI (PFNIC_UAPI_VERSION in
drivers/pfnic/uapi.rs). Every file git tracks is read (the SVG plots aside):

- no mention may name a version after the current one (a device ABI minor above
  PFNIC_ABI_MINOR, a uAPI, or the end of a range of them, above PFNIC_UAPI_VERSION);
- these state the current version and must be it: a document's title ("# ... (uAPI version
  N)"), pfnic-info's "versions:" line quoted in a document, and a version given with a
  reference to its spec, in one pair of parentheses or in parentheses right after it
  ("(device ABI X.Y, docs/registers.md)", "`docs/registers.md` (device ABI X.Y)",
  "(docs/uapi.md, uAPI N)", "(drivers/pfnic/uapi.rs, uAPI version N)");
- a copy of the uAPI's version in code (the syzkaller header's PFNIC_UAPI_VERSION) must be it.

Any other mention dates a feature ("ABI 1.5 added the port", "uAPI 13") and may name any
earlier version.
usage: scripts/check-versions.py [ROOT]
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
REGS_H = "qemu-device/hw/pfnic/pfnic_regs.h"
UAPI_RS = "drivers/pfnic/uapi.rs"
# Copies of the uAPI version in code: (file, pattern whose group 1 is the version).
UAPI_COPIES = [("fuzz/syzkaller/include/pfnic_uapi.h", r"#define PFNIC_UAPI_VERSION (\d+)")]

ABI = re.compile(r"\bABI (\d+)\.(\d+)\b(?:/(\d+)\.(\d+)\b)?")
UAPI = re.compile(r"\buAPI (?:version )?(\d+)\b(?:\s*-\s*(\d+)\b)?")
# pfnic-info's line: "versions:      device ABI 1.21, firmware 1.21.0, uAPI 21".
INFO_LINE = re.compile(r"versions:\s+device ABI (\d+)\.(\d+), firmware (\d+)\.(\d+)\.(\d+), uAPI (\d+)")
# Parentheses (one level of nested ones inside, as in a Markdown link), with the word before.
PARENS = re.compile(r"(\S*)[ \t]*\(((?:[^()]|\([^()]*\))*)\)")
# A list item of a parenthesis that is only a version.
BARE = re.compile(r"(?:device )?ABI \d+\.\d+|uAPI (?:version )?\d+")
ABI_SPEC = re.compile(r"registers\.md")
UAPI_SPEC = re.compile(r"uapi\.(?:md|rs)")


def items(inside):
    """The comma- or semicolon-separated items of a parenthesis (not split inside a link)."""
    out, depth, cur = [], 0, ""
    for c in inside:
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(c, 0)
        if c in ",;" and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
    return out + [cur.strip()]


def stated_current(before, inside):
    """The versions a parenthesis gives as its spec's: a bare version beside a reference to
    the spec, in the parenthesis or right before it."""
    parts = items(" ".join(inside.split()))
    versions = [p for p in parts if BARE.fullmatch(p)]
    refs = " ".join([p for p in parts if not BARE.fullmatch(p)] + [before])
    out = []
    for v in versions:
        spec = ABI_SPEC if "ABI" in v and "uAPI" not in v else UAPI_SPEC
        if spec.search(refs):
            out.append(v)
    return out


def define(path, name):
    text = (ROOT / path).read_text()
    m = re.search(rf"#define {name}\s+(0x[0-9a-fA-F]+|\d+)", text)
    if not m:
        sys.exit(f"check-versions: no {name} in {path}")
    return int(m.group(1), 0)


def uapi_version():
    text = (ROOT / UAPI_RS).read_text()
    m = re.search(r"pub const PFNIC_UAPI_VERSION: u32 = (\d+);", text)
    if not m:
        sys.exit(f"check-versions: no PFNIC_UAPI_VERSION in {UAPI_RS}")
    return int(m.group(1))


def main():
    abi = (define(REGS_H, "PFNIC_ABI_MAJOR"), define(REGS_H, "PFNIC_ABI_MINOR"))
    fw = define(REGS_H, "PFNIC_FW_VERSION_VALUE")
    fw = (fw >> 24, (fw >> 16) & 0xFF, fw & 0xFFFF)
    uapi = uapi_version()
    abi_s, fw_s = "%d.%d" % abi, "%d.%d.%d" % fw
    bad = []

    for path, pattern in UAPI_COPIES:
        m = re.search(pattern, (ROOT / path).read_text())
        if not m or int(m.group(1)) != uapi:
            bad.append(f"{path}: PFNIC_UAPI_VERSION is not {uapi} ({UAPI_RS})")

    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                           check=True, text=True).stdout.split("\0")
    for name in files:
        if not name or name.endswith(".svg") or not (ROOT / name).is_file():
            continue
        try:
            text = (ROOT / name).read_text()
        except UnicodeDecodeError:
            continue
        def at(offset):
            return f"{name}:{text.count(chr(10), 0, offset) + 1}"

        for m in ABI.finditer(text):
            for major, minor in ((m[1], m[2]), (m[3], m[4])):
                if major and (int(major), int(minor)) > abi:
                    bad.append(f"{at(m.start())}: device ABI {major}.{minor}, after the "
                               f"device's {abi_s}")
        for m in UAPI.finditer(text):
            for v in (m[1], m[2]):
                if v and int(v) > uapi:
                    bad.append(f"{at(m.start())}: uAPI {v}, after the driver's {uapi}")
        for m in INFO_LINE.finditer(text):
            said = ("%s.%s" % (m[1], m[2]), "%s.%s.%s" % (m[3], m[4], m[5]), int(m[6]))
            if said != (abi_s, fw_s, uapi):
                bad.append(f"{at(m.start())}: pfnic-info's versions line says device ABI "
                           f"{said[0]}, firmware {said[1]}, uAPI {said[2]}; the code: "
                           f"{abi_s}, {fw_s}, {uapi}")
        current = []
        if name.endswith(".md"):
            current += [(m.start(), m[0]) for m in re.finditer(r"(?m)^# .*$", text)]
        for m in PARENS.finditer(text):
            current += [(m.start(), v) for v in stated_current(m[1], m[2])]
        for offset, said in current:
            for a in ABI.finditer(said):
                if (int(a[1]), int(a[2])) != abi:
                    bad.append(f"{at(offset)}: states device ABI {a[1]}.{a[2]}; the device "
                               f"is at {abi_s} ({REGS_H})")
            for u in UAPI.finditer(said):
                if int(u[1]) != uapi:
                    bad.append(f"{at(offset)}: states uAPI {u[1]}; the driver is at {uapi} "
                               f"({UAPI_RS})")
    for b in dict.fromkeys(bad):
        print(b)
    if bad:
        sys.exit(f"check-versions: {len(set(bad))} stale version statements (device ABI "
                 f"{abi_s}, uAPI {uapi})")
    print(f"check-versions: device ABI {abi_s}, firmware {fw_s}, uAPI {uapi}: "
          f"every statement agrees")


if __name__ == "__main__":
    main()
