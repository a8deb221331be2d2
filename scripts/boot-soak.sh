#!/usr/bin/env bash
# Boot the test guest many times, a few at a time, and count the boots that
# stall: the measure of a rare hang (one boot in tens or hundreds) before
# and after a fix. Each boot is scripts/run-guest.sh --mode test with a
# filter that matches no test, so it runs what every test guest runs before
# its suite: the kernel's boot, the KUnit doctests, the driver's probe, the
# init; the stall watchdog (scripts/guest-watch.py) ends a stalled one in
# seconds and keeps its report.
#
# usage: scripts/boot-soak.sh [--boots N] [--parallel P] [--wire-loss PPM]
#            [--out DIR]
#   --boots N      how many boots (default 30)
#   --parallel P   how many at a time (default 3: make test's two lanes and
#                  a little more, so the host is as loaded as under make test)
#   --wire-loss PPM  boot make test's wire guest instead (two pfnics joined
#                  by a wire, both losing PPM frames per million and
#                  reordering 5%, as guest-wire-loss1 and -loss10 do)
#   --out DIR      where each boot's logs go (default $PFNIC_LOG_DIR/soak-<time>)
# Environment: as scripts/run-guest.sh (PFNIC_APPEND, PFNIC_SMP, ...);
# PFNIC_SOAK_KEEP=1 keeps the logs of clean boots too.
# Prints one line per boot that did not end cleanly, then
# "N boots: N clean, N stalled, N failed otherwise"; exits non-zero unless
# every boot was clean.
source "$(dirname "$0")/lib.sh"

boots=30 parallel=3 out= loss=
while (($#)); do
	case $1 in
	--boots) boots=$2; shift 2 ;;
	--wire-loss) loss=$2; shift 2 ;;
	--parallel) parallel=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h | --help) sed -n '2,/^source/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done
[[ $boots =~ ^[1-9][0-9]*$ && $parallel =~ ^[1-9][0-9]*$ ]] || die "--boots and --parallel take positive numbers"
[[ -z $loss || $loss =~ ^[0-9]+$ ]] || die "--wire-loss takes frames per million"
out=${out:-$LOG_DIR/soak-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"

# boot I: one boot; its verdict in $out/I.status (clean, stalled or failed).
boot() {
	local i=$1 rc=0 verdict=clean wire= props= qemu_args=
	if [[ -n $loss ]]; then
		wire=$(mktemp -d /tmp/pfnic-soak.XXXXXX)
		props=",x-wire-loss=$loss,x-wire-reorder=50000"
		qemu_args=$(wire_guest_qemu_args "$wire" "$props")
		props=",netdev=w0,mac=52:54:00:00:00:01$props"
	fi
	PFNIC_DEVICE_PROPS=$props PFNIC_QEMU_ARGS=$qemu_args "$PFNIC_ROOT/scripts/run-guest.sh" \
		--mode test --debian --filter no_test_has_this_name --timeout 600 \
		--log "$out/$i-serial.log" --results "$out/$i.ktap" --stall-report "$out/$i-stall.txt" \
		>"$out/$i-run.log" 2>&1 || rc=$?
	[[ -z $wire ]] || rm -rf "$wire"
	if ((rc == 125)); then
		verdict=stalled
	elif ((rc != 0)) || ! grep -q "pfnic-guest: exit status" "$out/$i-serial.log"; then
		verdict=failed
	fi
	echo "$verdict" >"$out/$i.status"
	if [[ $verdict == clean ]]; then
		[[ -n ${PFNIC_SOAK_KEEP:-} ]] || rm -f "$out/$i"-* "$out/$i.ktap"
	else
		log "boot $i: $verdict ($(head -1 "$out/$i-stall.txt" 2>/dev/null || tail -1 "$out/$i-run.log"))"
	fi
}

start=$SECONDS
for ((i = 1; i <= boots; i++)); do
	while (($(jobs -rp | wc -l) >= parallel)); do wait -n || true; done
	boot "$i" &
done
wait

clean=0 stalled=0
for f in "$out"/*.status; do
	case $(cat "$f") in
	clean) clean=$((clean + 1)) ;;
	stalled) stalled=$((stalled + 1)) ;;
	esac
done
failed=$((boots - clean - stalled))
echo "$boots boots${loss:+ of the wire guest (loss $loss per million)} ($parallel at a time, $((SECONDS - start)) s): $clean clean, $stalled stalled, $failed failed otherwise (logs: $out)"
((clean == boots))
