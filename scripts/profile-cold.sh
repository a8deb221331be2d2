#!/usr/bin/env bash
# Where a cold page's time goes (issue 9): boot the guest, run cold transfers,
# and profile the QEMU process from the host with perf while they run.
#
# QEMU translates the guest's code itself (TCG); with -perfmap it tells perf
# which guest address each piece of translated code came from, so one
# recording shows the device and the IOMMU model (QEMU's functions), the guest
# kernel (its functions, from System.map) and the guest's user space, per
# host thread (the main loop, where the device and the IOMMU model run under
# QEMU's big lock, and one thread per vCPU). The guest also reports how busy
# each of its CPUs was (/proc/stat) and where the page request interrupts went.
#
# usage: scripts/profile-cold.sh [--no-build] [--seconds N] [PFNIC-PERF-OPTIONS...]
#   --seconds N   length of the flat recording (default 10); a call-graph
#                 recording of the main loop thread follows (4 s)
#   PFNIC-PERF-OPTIONS  the workload, 'pfnic-perf --compare' options
#                 (default: -s 1048576 -n 300 --reps 10 write: cold 1 MiB
#                 RDMA WRITEs for about 15 s)
# Leaves console.log, perf-flat.data, perf-main.data and report.txt in
# $PFNIC_LOG_DIR/profile-<time>/ and prints the report. Needs the host's perf
# (Debian: linux-perf) and root or perf_event_paranoid <= 1. Nothing in make
# test runs it.
source "$(dirname "$0")/lib.sh"

build=1 seconds=10 args=()
while (($#)); do
	case $1 in
	--no-build) build=0; shift ;;
	--seconds) seconds=$2; shift 2 ;;
	-h | --help) sed -n '2,/^source/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) args+=("$1"); shift ;;
	esac
done
((${#args[@]})) || args=(-s 1048576 -n 300 --reps 10 write)
guest_words "${args[@]}"
need perf "Install the host's perf (Debian: apt-get install linux-perf)."
((build)) && "$PFNIC_ROOT/scripts/build-all.sh"

out=$LOG_DIR/profile-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
stat='grep "^cpu" /proc/stat; grep -E "prq|pfnic" /proc/interrupts'
cmd="echo PROFILE-STAT-BEFORE; $stat; echo PROFILE-START; pfnic-perf --compare ${args[*]}; echo PROFILE-STAT-AFTER; $stat; echo PROFILE-END"
log "booting the guest: pfnic-perf --compare ${args[*]}"
PFNIC_QEMU_ARGS="${PFNIC_QEMU_ARGS:-} -perfmap" "$PFNIC_ROOT/scripts/run-guest.sh" --debian --timeout 1800 \
	--cmd "$cmd" >"$out/console.log" 2>&1 &
guest=$!
until grep -q PROFILE-START "$out/console.log" 2>/dev/null; do
	kill -0 "$guest" 2>/dev/null || { cat "$out/console.log" >&2; die "the guest ended before the workload started"; }
	sleep 0.5
done
# The guest's QEMU: the newest one (its main thread's id is the process id).
pid=$(pgrep -n -x qemu-system-x86) || die "no QEMU process"
sleep 3 # past the CPU reference and the first warm messages
log "recording QEMU $pid for $seconds s (all threads), then its main loop's call graphs for 4 s"
perf record -q -F 999 -p "$pid" -o "$out/perf-flat.data" -- sleep "$seconds" >/dev/null 2>&1 ||
	die "perf record failed (perf_event_paranoid: $(cat /proc/sys/kernel/perf_event_paranoid))"
perf record -q -F 499 --call-graph dwarf,16384 -t "$pid" -o "$out/perf-main.data" -- sleep 4 >/dev/null 2>&1 || true
# The map file stays readable after QEMU exits; perf looks for it by process id.
cp "/tmp/perf-$pid.map" "$out/" 2>/dev/null || true
wait "$guest" || die "the guest failed; see $out/console.log"
grep -q PROFILE-END "$out/console.log" || log "warning: the workload outlived the guest's time limit"
python3 "$PFNIC_ROOT/scripts/profile-report.py" "$out" "$KERNEL_BUILD/System.map" "$pid" 999 >"$out/report.txt"
cat "$out/report.txt"
log "profile: $out"
