#!/usr/bin/env bash
# Boot the guest and run the pfnic-perf benchmark. The numbers are TCG's and are only
# comparable with each other; nothing here fails on time (only on a verbs failure or a guest
# that does not finish).
#
# By default: 'pfnic-perf --compare --odp --waits=poll,events --modes', warm and cold side by
# side in one process, with the device's cost per faulted page against the guest CPU's own
# first touch (two tables on the console), each row twice: completions polled (one CPU
# spins) and waited for on a completion channel (none does), then the memory modes side by side (pinned, odp and sva: warm,
# cold, registration; two more tables). Its JSON comes out through the guest's second serial port; the run leaves
# console.log, bench.json and the plot bench.svg (scripts/bench-plot.py) in
# $PFNIC_LOG_DIR/bench-<time>/ and prints the plot's path. Then, in the same guest, the
# RDMA core's path in the sva and odp memory modes side by side (scripts/bench-core.py):
# one C program, pfnic-cold-bench (warm and cold RDMA WRITEs on on-demand memory, and the
# CPU's own first touch) on Debian's libibverbs.so.1 with pfnic's provider, once per mode,
# with odp / sva; core.json and core.svg. Last, two guests on a wire: the rxe-rxe baseline
# and pfnic-pfnic side by side (scripts/test.sh's pairings; pairs/<time>/pairs.svg), with
# pfnic-pfnic's MPI job on rxe and TCP too.
#
# usage: scripts/bench.sh [--no-build] [--perftest] [PFNIC-PERF-OPTIONS...]
#   --perftest           the older form instead: 'pfnic-perf' twice, warm then --cold, two
#                        processes, perftest's tables (default options: --odp)
#   PFNIC-PERF-OPTIONS   added to the run; see 'pfnic-perf --help', e.g.
#                        '-s 65536 -n 10 --reps 3 write' (--compare) or '-s 65536 write_bw'
#                        (--perftest)
# Environment: PFNIC_BENCH_TIMEOUT (guest time limit, s; default 3600),
# PFNIC_BENCH_PAIRS (the pairings compared; default "rxe-rxe pfnic-pfnic")
source "$(dirname "$0")/lib.sh"

build=1
perftest=0
args=()
while (($#)); do
	case $1 in
	--no-build) build=0; shift ;;
	--perftest) perftest=1; shift ;;
	-h | --help) sed -n '2,/^source/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) args+=("$1"); shift ;;
	esac
done
guest_words "${args[@]}"

if ((build)); then
	"$PFNIC_ROOT/scripts/build-all.sh"
fi

limit=${PFNIC_BENCH_TIMEOUT:-3600}
if ((perftest)); then
	((${#args[@]})) || args=(--odp)
	log "benchmark in the guest (TCG): pfnic-perf ${args[*]}, warm then --cold; up to ${limit}s"
	cmd="echo '=== warm ===' && pfnic-perf ${args[*]} && echo && echo '=== cold ===' && pfnic-perf --cold ${args[*]}"
	exec "$PFNIC_ROOT/scripts/run-guest.sh" --debian --timeout "$limit" --cmd "$cmd"
fi

need python3 "Install python3."
run_dir=$LOG_DIR/bench-$(date +%Y%m%d-%H%M%S)
mkdir -p "$run_dir"
# What else the host was doing: the numbers depend on it.
echo "start: $(date -u '+%F %T UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" \
	>"$run_dir/host.txt"
args=(--compare --odp --waits=poll,events --modes "${args[@]}")
log "benchmark in the guest (TCG): pfnic-perf ${args[*]}; up to ${limit}s; logs in $run_dir"
rc=0
# Then the RDMA core's path (Debian's libibverbs.so.1, pfnic's provider) in each memory mode
# with on-demand MRs, side by side: the same C program, pfnic-cold-bench.
core="echo \"@core \$(PFNIC_MEM_MODE=sva pfnic-cold-bench -n 20 -r 5 -l sva)\" && \
echo \"@core \$(PFNIC_MEM_MODE=odp pfnic-cold-bench -n 20 -r 5 -l odp)\""
"$PFNIC_ROOT/scripts/run-guest.sh" --debian --timeout "$limit" --log "$run_dir/console.log" \
	--results "$run_dir/bench.json" --cmd "pfnic-perf ${args[*]} --json /dev/ttyS1 && $core" ||
	rc=$?
echo "end: $(date -u '+%F %T UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$run_dir/host.txt"
if [[ -s $run_dir/bench.json ]]; then
	python3 "$PFNIC_ROOT/scripts/bench-plot.py" "$run_dir/bench.json" "$run_dir/bench.svg" ||
		die "cannot draw $run_dir/bench.svg from $run_dir/bench.json"
	log "results: $run_dir/bench.json; plot: $run_dir/bench.svg"
else
	log "no results in $run_dir/bench.json (see $run_dir/console.log)"
	((rc)) || rc=1
fi
if python3 "$PFNIC_ROOT/scripts/bench-core.py" "$run_dir/console.log" "$run_dir/core.json" \
	"$run_dir/core.svg"; then
	log "the RDMA core's path: $run_dir/core.json; plot: $run_dir/core.svg"
else
	((rc)) || rc=1
fi
# Last, two guests on a wire: the rxe-rxe baseline (Linux's soft-RoCE and Debian's tools on
# both sides, no pfnic code) and pfnic-pfnic, the same tests, side by side (the pair suites
# of scripts/test.sh; pairs.txt, pairs.json, pairs.svg under pairs/), pfnic-pfnic's Open MPI
# job on rxe and TCP beside pfnic's (PFNIC_PAIR_BASELINES).
log "two guests on a wire: rxe-rxe and pfnic-pfnic side by side (scripts/test.sh's pairings)"
if PFNIC_PAIRS="${PFNIC_BENCH_PAIRS:-rxe-rxe pfnic-pfnic}" PFNIC_PAIR_BASELINES=1 PFNIC_LOG_DIR="$run_dir/pairs" \
	"$PFNIC_ROOT/scripts/test.sh" --no-build --filter pair_ >"$run_dir/pairs.log" 2>&1; then
	cat "$run_dir/pairs/"*/pairs.txt 2>/dev/null || true
	log "the pairings: $(ls "$run_dir/pairs/"*/pairs.svg 2>/dev/null)"
else
	log "the pairings failed: $run_dir/pairs.log"
	((rc)) || rc=1
fi
exit "$rc"
