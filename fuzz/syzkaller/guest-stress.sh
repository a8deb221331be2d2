#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# Runs syzkaller's local fuzzer (syz-execprog -stress) on the pfnic calls in
# the pfnic guest, then prints the tail of its log and dmesg's findings.
#
# usage: fuzz/syzkaller/guest-stress.sh SYZKALLER_DIR [SECONDS]
#
# SYZKALLER_DIR holds bin/linux_amd64/syz-execprog and syz-executor, built
# with fuzz/syzkaller/sys/linux/dev_pfnic.txt installed (README.md beside
# this file). SECONDS of fuzzing: 240 by default. The guest is the debug one
# (KASAN, lockdep, kmemleak) unless PFNIC_FLAVOR is set in the environment.
set -euo pipefail

syz=${1:?usage: $0 SYZKALLER_DIR [SECONDS]}
seconds=${2:-240}
bin=$syz/bin/linux_amd64
for f in syz-execprog syz-executor; do
	[[ -x $bin/$f ]] || { echo "no $bin/$f; see fuzz/syzkaller/README.md" >&2; exit 1; }
done
repo=$(cd "$(dirname "$0")/../.." && pwd)

overlay=$(mktemp -d "${TMPDIR:-/tmp}/pfnic-syz.XXXXXX")
trap 'rm -rf "$overlay"' EXIT
mkdir -p "$overlay/usr/local/bin" "$overlay/etc"
cp "$bin/syz-execprog" "$bin/syz-executor" "$overlay/usr/local/bin/"

cat >"$overlay/etc/syz-stress.sh" <<'EOF'
mkdir -p /tmp && cd /tmp
# syz-executor connects to syz-execprog over TCP on localhost.
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
ls -l /dev/pfnic*
SYSCALLS='openat$pfnic,syz_open_dev$pfnic,ioctl$PFNIC*,close,dup,dup3,poll,ppoll,syz_clone,socketpair$unix,sendmsg$unix,recvmsg$unix'
echo "syz-execprog -stress: $SYZ_SECONDS s"
# -repeat=0: without it -stress stops after one program. -output prints every
# program before it runs, so the console log holds the reproducer of a crash.
timeout -s INT "$SYZ_SECONDS" /usr/local/bin/syz-execprog -executor=/usr/local/bin/syz-executor \
	-stress -repeat=0 -output -vv=1 -procs=2 -sandbox=none -slowdown=3 -syscalls="$SYSCALLS" 2>&1 |
	tee /tmp/execprog.log | grep -v -E '^(CALL |$)'
echo "syz-execprog: $(grep -c 'executing program' /tmp/execprog.log) programs in $SYZ_SECONDS s"
echo '--- dmesg: WARNING/BUG/KASAN/lockdep/kmemleak ---'
dmesg | grep -E 'WARNING|BUG|KASAN|Oops|panic|lockdep|kmemleak:|Call Trace|refcount_t|UBSAN' | grep -v -E 'Kernel command line|Command line|RCU lockdep checking|Kernel memory leak detector initialized' || echo none
echo '--- dmesg: pfnic ---'
dmesg | grep -i pfnic | tail -30
EOF

PFNIC_FLAVOR=${PFNIC_FLAVOR-debug} "$repo/scripts/run-guest.sh" --mode cmd \
	--cmd "SYZ_SECONDS=$seconds sh /etc/syz-stress.sh" --overlay "$overlay" \
	--timeout $((seconds + 600))
