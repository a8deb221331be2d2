#!/usr/bin/env bash
# The guest's side of cold transfers (issue 9): boot the trace flavour of the
# guest kernel (kernel/trace.config: tracepoints in tracefs), record the
# scheduler, the workqueues, interrupts and intel-iommu's invalidation queue
# (page responses) while pfnic-perf runs cold transfers, and print a line per
# cold message: where the page request thread ran and when, when the fault
# work items were queued and started, on which CPUs they ran, and when the
# last one ended. scripts/profile-cold.sh is the host's side.
#
# usage: scripts/trace-cold.sh [--no-build] [PFNIC-PERF-OPTIONS...]
#   PFNIC-PERF-OPTIONS  the workload, 'pfnic-perf --compare' options
#                 (default: -s 1048576 -n 30 --reps 1 --waits=poll write:
#                 30 cold 1 MiB RDMA WRITEs, completions polled)
# Leaves console.log, trace.txt (the guest's whole trace, as tracefs prints
# it) and report.txt in $PFNIC_LOG_DIR/trace-<time>/ and prints the report.
# Builds the trace flavour beside the ordinary kernel (its own module and
# initramfs). Nothing in make test runs it.
export PFNIC_FLAVOR=trace
source "$(dirname "$0")/lib.sh"

build=1 args=()
while (($#)); do
	case $1 in
	--no-build) build=0; shift ;;
	-h | --help) sed -n '2,/^export/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) args+=("$1"); shift ;;
	esac
done
((${#args[@]})) || args=(-s 1048576 -n 30 --reps 1 --waits=poll write)
guest_words "${args[@]}"
((build)) && "$PFNIC_ROOT/scripts/build-all.sh"

out=$LOG_DIR/trace-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
events=(sched/sched_switch sched/sched_wakeup workqueue/workqueue_queue_work
	workqueue/workqueue_execute_start workqueue/workqueue_execute_end
	irq/irq_handler_entry intel_iommu/qi_submit)
# The trace leaves through the second serial port, base64 (the line is not
# 8-bit clean) of its gzip.
cmd="T=/sys/kernel/tracing; mount -t tracefs nodev \$T || exit 1
echo 16384 > \$T/buffer_size_kb
for e in ${events[*]}; do echo 1 > \$T/events/\$e/enable || exit 1; done
echo 1 > \$T/tracing_on
pfnic-perf --compare ${args[*]} || exit 1
echo 0 > \$T/tracing_on
grep overrun \$T/per_cpu/cpu*/stats
gzip -c \$T/trace | base64 > /dev/ttyS1"
log "booting the trace guest: pfnic-perf --compare ${args[*]}"
"$PFNIC_ROOT/scripts/run-guest.sh" --debian --timeout 1800 --results "$out/trace.b64" --cmd "$cmd" \
	>"$out/console.log" 2>&1 || { tail -20 "$out/console.log" >&2; die "the guest failed; see $out/console.log"; }
tr -d '\r' <"$out/trace.b64" | base64 -d | gzip -dc >"$out/trace.txt" ||
	die "the trace did not come out whole; see $out/console.log"
rm -f "$out/trace.b64"
grep -q 'overrun: [1-9]' "$out/console.log" && log "warning: the trace buffer overran; the oldest events are lost"
python3 "$PFNIC_ROOT/scripts/trace-report.py" "$out/trace.txt" >"$out/report.txt"
grep -E '^(op|write|read|send) ' "$out/console.log" | tr -d '\r'
cat "$out/report.txt"
log "trace: $out"
