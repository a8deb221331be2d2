#!/usr/bin/env bash
# Boot the guest and run the pfnic-perf benchmark twice, warm then cold, printing perftest's
# tables. The numbers are TCG's and are only comparable with each other; nothing here fails
# on time (only on a verbs failure or a guest that does not finish).
#
# usage: scripts/bench.sh [--no-build] [PFNIC-PERF-OPTIONS...]
#   PFNIC-PERF-OPTIONS   passed to both runs (default: --odp); see 'pfnic-perf --help',
#                        e.g. '-s 65536 write_bw read_lat' or '-a -n 20'
# Environment: PFNIC_BENCH_TIMEOUT (guest time limit, s; default 3600)
source "$(dirname "$0")/lib.sh"

build=1
args=()
while (($#)); do
	case $1 in
	--no-build) build=0; shift ;;
	-h | --help) sed -n '2,/^source/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) args+=("$1"); shift ;;
	esac
done
((${#args[@]})) || args=(--odp)
for a in "${args[@]}"; do
	# The command line goes through the guest's sh: keep it to plain words.
	[[ $a =~ ^[A-Za-z0-9_=.,-]+$ ]] || die "unsupported character in pfnic-perf option '$a'"
done

if ((build)); then
	"$PFNIC_ROOT/scripts/build-all.sh"
fi

limit=${PFNIC_BENCH_TIMEOUT:-3600}
log "benchmark in the guest (TCG): pfnic-perf ${args[*]}, warm then --cold; up to ${limit}s"
cmd="echo '=== warm ===' && pfnic-perf ${args[*]} && echo && echo '=== cold ===' && pfnic-perf --cold ${args[*]}"
"$PFNIC_ROOT/scripts/run-guest.sh" --timeout "$limit" --cmd "$cmd"
