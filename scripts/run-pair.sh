#!/usr/bin/env bash
# Boot two guests joined by a wire and a side channel: QEMU dgram netdevs
# over unix datagram sockets (no root, no tap, never the host's network).
# Each guest is scripts/run-guest.sh with --kind, --node, --wire, --side.
#
#   guest N (1, 2)   side channel 192.168.100.N (virtio-net, for the TCP
#                    exchange of ibv_rc_pingpong and perftest)
#                    wire 10.0.0.N: pfnic's port (pfnic guest, its address
#                    set with pfnic-info --set-ipv4) or rxe0 on a virtio-net
#                    NIC (rxe guest)
#
# usage: scripts/run-pair.sh [--pair KIND1-KIND2] [--cmd1 'CMD' --cmd2 'CMD']
#            [--results] [--log-dir DIR] [--label NAME] [--timeout SECONDS]
#            [--grace SECONDS] [--pcap] [--pcap-snaplen BYTES] [--overlay DIR]
#
#   --pair P       pfnic-pfnic, pfnic-rxe, rxe-pfnic or rxe-rxe (default);
#                  KIND1 is guest 1
#   (no commands)  two shells: guest 1 on this terminal, guest 2's console
#                  on a unix socket; the command to reach it (socat) is
#                  printed. Powering off guest 1 stops guest 2.
#   --cmd1/--cmd2  run CMD in guest 1 / guest 2 (sh -c; both needed), their
#                  consoles printed here with "[1] "/"[2] " in front, both
#                  powered off at the end; exits non-zero unless both
#                  commands exited 0. A guest that ends makes the other's
#                  time limit at most --grace seconds more (default 300).
#   --results      cmd mode: each guest's /dev/ttyS1 goes to
#                  DIR/LABEL-guestN.ktap (the two-guest suites' KTAP); a
#                  guest may pull its own wire out and plug it in by asking
#                  there ("# pfnic-host: set_link wire down|up", served by
#                  scripts/link-control.py through its QEMU's monitor, log
#                  DIR/LABEL-guestN-link-control.log; the guest's kernel
#                  command line says pfnic_link_control=wire)
#   --log-dir DIR  where DIR/LABEL-guestN-serial.log (each console) go
#                  (default: $PFNIC_LOG_DIR/pair-<time>)
#   --label NAME   file name prefix in --log-dir (default: the pair)
#   --timeout S    time limit of each guest (cmd mode; default 900)
#   --pcap         record the wire in DIR/LABEL-wire-guestN.pcap (each
#                  guest's netdev: what it sent and what reached it)
#   --pcap-snaplen BYTES  record only each frame's first BYTES
#   --overlay DIR  add DIR's files to both guests' / (as run-guest.sh)
#
# pfnic guests need a pfnic device with a netdev= property (device ABI
# 1.5); with an older QEMU build this exits 77 and says so.
# Environment: as scripts/run-guest.sh (PFNIC_MEM, PFNIC_SMP, ...), for both
# guests; PFNIC_DEVICE_PROPS goes to every pfnic (e.g. ',x-wire-loss=10000').
source "$(dirname "$0")/lib.sh"

pair=rxe-rxe cmd1= cmd2= log_dir= label= limit=900 grace=300 pcap=0 snaplen= overlay= results=0
while (($#)); do
	case $1 in
	--pair) pair=$2; shift 2 ;;
	--cmd1) cmd1=$2; shift 2 ;;
	--cmd2) cmd2=$2; shift 2 ;;
	--log-dir) log_dir=$2; shift 2 ;;
	--label) label=$2; shift 2 ;;
	--timeout) limit=$2; shift 2 ;;
	--grace) grace=$2; shift 2 ;;
	--pcap) pcap=1; shift ;;
	--pcap-snaplen) snaplen=$2; shift 2 ;;
	--results) results=1; shift ;;
	--overlay) overlay=$2; shift 2 ;;
	-h | --help) sed -n '2,/^source/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done
case $pair in
pfnic-pfnic | pfnic-rxe | rxe-pfnic | rxe-rxe) ;;
*) die "--pair must be pfnic-pfnic, pfnic-rxe, rxe-pfnic or rxe-rxe" ;;
esac
kinds=("${pair%-*}" "${pair#*-}")
[[ (-z $cmd1 && -z $cmd2) || (-n $cmd1 && -n $cmd2) ]] || die "--cmd1 and --cmd2 go together"
label=${label:-$pair}
[[ -x $QEMU_BIN ]] || die "no QEMU at $QEMU_BIN; run 'make qemu'"

# pfnic_has_wire: this QEMU's pfnic takes netdev= (device ABI 1.5).
pfnic_has_wire() {
	"$QEMU_BIN" -device pfnic,help 2>/dev/null | grep -q '^ *netdev='
}
if [[ $pair == *pfnic* ]] && ! pfnic_has_wire; then
	log "skip: the pfnic device in $QEMU_BIN has no netdev= property yet (no wire): $pair needs it"
	exit 77
fi

# Short socket paths (sun_path holds 108 bytes): a private directory in /tmp.
sock=$(mktemp -d /tmp/pfnic-pair.XXXXXX)
log_dir=${log_dir:-$LOG_DIR/pair-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$log_dir"
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill -TERM -- "-$p" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	rm -rf "$sock"
}
trap cleanup EXIT
# Background guests get their own process group, so one can be stopped
# (QEMU and all) without touching the other.
set -m

# guest_args N: run-guest.sh's arguments for guest N (1 or 2).
guest_args() {
	local n=$1 peer=$((3 - $1))
	args=(--kind "${kinds[n - 1]}" --node "$n" --debian
		--wire "$sock/wire$n,$sock/wire$peer" --side "$sock/side$n,$sock/side$peer")
	[[ -n $overlay ]] && args+=(--overlay "$overlay")
	((pcap)) && args+=(--pcap "$log_dir/$label-wire-guest$n.pcap")
	[[ -n $snaplen ]] && args+=(--pcap-snaplen "$snaplen")
	return 0
}

if [[ -z $cmd1 ]]; then
	# Two shells: guest 2 in the background on a console socket, guest 1 here.
	guest_args 2
	console=$sock/console2
	"$PFNIC_ROOT/scripts/run-guest.sh" "${args[@]}" --console-socket "$console" \
		--log "$log_dir/$label-guest2-serial.log" >"$log_dir/$label-guest2-qemu.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 50); do [[ -S $console ]] && break; sleep 0.1; done
	[[ -S $console ]] || die "guest 2 did not start (see $log_dir/$label-guest2-qemu.log)"
	cat >&2 <<EOF
[pfnic] two guests: $pair (guest 1 ${kinds[0]} here, guest 2 ${kinds[1]} on a socket)
[pfnic]   guest N: side channel 192.168.100.N, wire 10.0.0.N
[pfnic] guest 2's console, from another terminal (Ctrl-A X there powers guest 2 off):
[pfnic]   socat -,raw,echo=0 unix-connect:$console
[pfnic] powering off guest 1 (poweroff or Ctrl-A X) stops both.
EOF
	guest_args 1
	rc=0
	"$PFNIC_ROOT/scripts/run-guest.sh" "${args[@]}" || rc=$?
	exit "$rc"
fi

# Command mode: both guests in the background, their consoles here.
start_guest() {
	local n=$1 cmd=$2 extra=() qemu_args=${PFNIC_QEMU_ARGS:-} append=${PFNIC_APPEND:-}
	guest_args "$n"
	if ((results)); then
		extra=(--results "$log_dir/$label-guest$n.ktap")
		# The guest's own wire link, at its request in its results.
		qemu_args+=" -qmp unix:$sock/qmp$n,server=on,wait=off"
		append+=" pfnic_link_control=wire"
		python3 "$PFNIC_ROOT/scripts/link-control.py" "$sock/qmp$n" "$log_dir/$label-guest$n.ktap" \
			>"$log_dir/$label-guest$n-link-control.log" 2>&1 &
		controls+=($!)
	fi
	extra+=(--stall-report "$log_dir/$label-guest$n-stall.txt")
	# timeout's own process group: the whole guest stops with it.
	(
		PFNIC_QEMU_ARGS=$qemu_args PFNIC_APPEND=$append \
			"$PFNIC_ROOT/scripts/run-guest.sh" "${args[@]}" "${extra[@]}" --timeout "$limit" \
			--log "$log_dir/$label-guest$n-serial.log" --cmd "$cmd" 2>&1 |
			sed -u "s/^/[$n] /"
		exit "${PIPESTATUS[0]}"
	) &
	pids+=($!)
}
controls=()
start_guest 1 "$cmd1"
start_guest 2 "$cmd2"
declare -A status=()
# Wait for the first guest to end, then give the other at most --grace s.
first_rc=0
wait -n -p done_pid "${pids[@]}" || first_rc=$?
for i in 0 1; do [[ ${pids[i]} == "$done_pid" ]] && status[$i]=$first_rc && other=$((1 - i)); done
deadline=$((SECONDS + grace))
while kill -0 "${pids[other]}" 2>/dev/null && ((SECONDS < deadline)); do sleep 1; done
if kill -0 "${pids[other]}" 2>/dev/null; then
	log "guest $((other + 1)) still running ${grace}s after guest $((2 - other)) ended: stopping it"
	kill -TERM -- "-${pids[other]}" 2>/dev/null || true
fi
rc=0
wait "${pids[other]}" || rc=$?
status[$other]=$rc
pids=()
# The link controls end with their QEMU's monitor; one that never connected is stopped.
control_rc=0
for c in "${controls[@]}"; do
	kill "$c" 2>/dev/null || true
	rc=0
	wait "$c" || rc=$?
	((rc == 0 || rc == 143)) || control_rc=$rc
done
((control_rc == 0)) || log "scripts/link-control.py failed (status $control_rc; see $log_dir/$label-guest*-link-control.log)"
log "guest 1 exit status ${status[0]}, guest 2 exit status ${status[1]} (logs: $log_dir)"
((status[0] == 0 && status[1] == 0 && control_rc == 0))
