#!/usr/bin/env bash
# Boot the pfnic guest: q35 + intel-iommu (scalable mode, first-level
# translation, PASID) + a pcie-root-port with pfnic behind it, under TCG.
#
# usage: scripts/run-guest.sh [--mode shell|test|cmd] [--cmd 'COMMAND']
#            [--overlay DIR] [--filter NAME] [--timeout SECONDS]
#            [--log FILE] [--results FILE] [--stall-report FILE] [--kunit]
#            [--kind pfnic|rxe] [--node N]
#            [--wire LOCAL,REMOTE] [--side LOCAL,REMOTE] [--debian]
#            [--console-socket PATH] [--pcap FILE] [--pcap-snaplen BYTES]
#            [-- EXTRA-QEMU-ARGS...]
#
#   --mode shell   (default) interactive shell on the serial console;
#                  leave with 'poweroff' or Ctrl-A X
#   --cmd 'CMD'    run CMD (sh -c) in the guest, print its output, power
#                  off; exits with CMD's exit status
#   --mode test    run the guest test suite; console to --log, KTAP to
#                  --results (both required)
#   --overlay DIR  add DIR's contents to the guest's / (e.g. DIR/usr/local/bin/x)
#   --filter NAME  test mode: only tests whose name contains NAME
#   --kunit        run the kernel's built-in KUnit suites (the kernel crate's
#                  doctests among them) at boot, KTAP on the console
#   --results FILE cmd mode: a second serial port (the guest's /dev/ttyS1)
#                  written to FILE
#   --timeout S    stop the guest after S seconds (exit status 124)
#   --stall-report FILE  where the stall watchdog says why it stopped the
#                  guest (test and cmd modes; default: only on stderr)
#
# In test and cmd modes a watchdog (scripts/guest-watch.py) stops a guest
# that stalls: one whose kernel reports an RCU stall, a lockup or a hung
# task, or that prints nothing on any serial port (its console, its results,
# the heartbeat its init writes every 5 s to /dev/ttyS2) for
# PFNIC_SILENCE_LIMIT seconds (default 60; 180 with PFNIC_FLAVOR=debug).
# It exits with status 125 and the console's last lines on stderr; the
# report adds each vCPU's registers and local APIC, from QEMU's monitor.
#
# A guest of a pair (scripts/run-pair.sh starts two of these):
#   --kind pfnic|rxe  pfnic (default): q35 + intel-iommu + pfnic, the driver
#                  loaded; rxe: no IOMMU, no pfnic, a virtio-net NIC on the
#                  wire with Linux's soft-RoCE (rxe0) over it, and the Debian
#                  layer (Debian's rdma-core, perftest and iproute2)
#   --node N       this guest's number (1 or 2): side channel 192.168.100.N
#                  (MAC 52:54:00:00:01:0N), wire address 10.0.0.N (MAC
#                  52:54:00:00:02:0N, on pfnic's port or the rxe NIC)
#   --wire LOCAL,REMOTE  the wire: a QEMU dgram netdev between two unix
#                  datagram sockets, this guest's and the peer's
#   --side LOCAL,REMOTE  the side channel (virtio-net, TCP for rdma-core's
#                  out-of-band exchange): the same kind of netdev
#   --debian       add the Debian layer to the initrd (implied by --kind rxe):
#                  Debian's rdma-core tools and perftest, glibc and the other
#                  shared libraries they need, so dynamically linked programs
#                  run too; in a pfnic guest, with pfnic's rdma-core provider
#                  for Debian's libibverbs.so.1 and pfnic's C examples
#   --console-socket PATH  shell mode: the serial console (with QEMU's
#                  monitor, Ctrl-A X) on a unix socket server at PATH instead
#                  of stdio; connect with 'socat -,raw,echo=0 unix-connect:PATH'
#   --pcap FILE    record the wire's frames (QEMU filter-dump), both ways
#   --pcap-snaplen BYTES  record only each frame's first BYTES (headers;
#                  default: whole frames)
#
# Environment: PFNIC_SOAK (1: the guest suite's nightly iteration counts),
# PFNIC_MEM_MODE (sva, odp or pinned: the memory mode of the guest's verbs
# contexts, as the variable means to the verbs library; unset: the driver's),
# PFNIC_ACCEL (tcg; kvm where it works), PFNIC_MEM (2G),
# PFNIC_SMP (2), PFNIC_NUMA_NODES (1; N splits the CPUs and memory into N
# NUMA nodes, which the fault matrix's move_pages case needs),
# PFNIC_DEVICE_PROPS (extra pfnic properties, e.g. ",pri=off"),
# PFNIC_QEMU_ARGS (extra QEMU arguments), PFNIC_APPEND (extra kernel args).
source "$(dirname "$0")/lib.sh"

mode=shell cmd= overlay= filter= timeout_s= logfile= results= stall_report= kunit=0
kind=pfnic node= wire= side= debian=0 console_sock= pcap= snaplen=
extra_qemu=()
while (($#)); do
	case $1 in
	--mode) mode=$2; shift 2 ;;
	--cmd) cmd=$2; mode=cmd; shift 2 ;;
	--overlay) overlay=$2; shift 2 ;;
	--filter) filter=$2; shift 2 ;;
	--timeout) timeout_s=$2; shift 2 ;;
	--log) logfile=$2; shift 2 ;;
	--results) results=$2; shift 2 ;;
	--stall-report) stall_report=$2; shift 2 ;;
	--kunit) kunit=1; shift ;;
	--kind) kind=$2; shift 2 ;;
	--node) node=$2; shift 2 ;;
	--wire) wire=$2; shift 2 ;;
	--side) side=$2; shift 2 ;;
	--debian) debian=1; shift ;;
	--console-socket) console_sock=$2; shift 2 ;;
	--pcap) pcap=$2; shift 2 ;;
	--pcap-snaplen) snaplen=$2; shift 2 ;;
	--) shift; extra_qemu=("$@"); break ;;
	-h | --help) sed -n '2,/^source/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done
case $mode in
shell | cmd | test) ;;
*) die "--mode must be shell, cmd or test" ;;
esac
[[ $mode != cmd || -n $cmd ]] || die "--mode cmd needs --cmd 'COMMAND'"
[[ $mode != test || (-n $logfile && -n $results) ]] || die "--mode test needs --log and --results"
[[ -z $overlay || -d $overlay ]] || die "--overlay $overlay is not a directory"
case $kind in
pfnic) ;;
rxe) debian=1 ;;
*) die "--kind must be pfnic or rxe" ;;
esac
[[ -z $node || $node =~ ^[1-9]$ ]] || die "--node must be 1..9"
[[ (-z $wire && -z $side) || -n $node ]] || die "--wire and --side need --node"
[[ -z $wire || $wire == *,* ]] || die "--wire needs LOCAL,REMOTE socket paths"
[[ -z $side || $side == *,* ]] || die "--side needs LOCAL,REMOTE socket paths"
[[ -z $console_sock || $mode == shell ]] || die "--console-socket is for shell mode"
((debian == 0)) || [[ -e $DEBIAN_LAYER ]] || die "no Debian layer at $DEBIAN_LAYER; run scripts/build-debian-layer.sh"
[[ -x $QEMU_BIN ]] || die "no QEMU at $QEMU_BIN; run 'make qemu'"
bzimage=$KERNEL_BUILD/arch/x86/boot/bzImage
[[ -e $bzimage ]] || die "no kernel at $bzimage; run 'make kernel'"
[[ -e $INITRAMFS ]] || die "no initramfs at $INITRAMFS; run 'make rootfs'"

work=$(mktemp -d "${TMPDIR:-/tmp}/pfnic-run.XXXXXX")
# QEMU and its watchdog when they run in the background (watched, below):
# they ignore the user's Ctrl-C there (a script's background jobs do), so
# whatever ends this script ends them.
qpid= wpid=
cleanup() {
	[[ -z $qpid ]] || kill -TERM "$qpid" 2>/dev/null || true
	[[ -z $wpid ]] || kill -TERM "$wpid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The initrd is the base archive plus one with the command and the overlay:
# the kernel unpacks concatenated archives in order.
initrd=$work/initrd.cpio
{
	echo "dir /etc 0755 0 0"
	echo "dir /etc/pfnic 0755 0 0"
	if [[ $mode == cmd ]]; then
		printf '%s\n' "$cmd" >"$work/cmd"
		echo "file /etc/pfnic/cmd $work/cmd 0644 0 0"
	fi
	if [[ -n $overlay ]]; then
		(cd "$overlay" && find . -mindepth 1 | sort) | while read -r rel; do
			p=${rel#.}
			src=$overlay/$rel
			m=$(stat -c %a "$src")
			if [[ -L $src ]]; then
				echo "slink $p $(readlink "$src") 0777 0 0"
			elif [[ -d $src ]]; then
				echo "dir $p $m 0 0"
			elif [[ -f $src ]]; then
				echo "file $p $(realpath "$src") $m 0 0"
			fi
		done
	fi
} >"$work/extra.list"
"$ROOTFS_BUILD/gen_init_cpio" "$work/extra.list" >"$work/extra.cpio"
layers=("$INITRAMFS")
((debian)) && layers+=("$DEBIAN_LAYER")
# A pfnic guest's Debian libibverbs.so.1 loads pfnic's provider.
if ((debian)) && [[ $kind == pfnic ]]; then
	[[ -e $PROVIDER_LAYER ]] || die "no provider layer at $PROVIDER_LAYER; run 'make rootfs'"
	layers+=("$PROVIDER_LAYER")
fi
cat "${layers[@]}" "$work/extra.cpio" >"$initrd"

# no_timer_check: Linux checks the IO-APIC timer by counting its ticks during a
# busy-wait; a TCG vCPU on a loaded host (make test's lanes on 2 cores) can miss
# them all, and with interrupt remapping on, the kernel then panics at boot
# ("timer doesn't work through Interrupt-remapped IO-APIC"). KVM guests skip
# the check for the same reason.
# tsc=reliable: under TCG every vCPU reads one monotonic counter as its TSC
# (QEMU's cpu_get_ticks()), but with "-cpu max" on an AMD host and two CPUs
# Linux assumes the TSCs unsynchronized and falls back to the HPET, read by
# a trap each time. Timestamps by TSC then: gettimeofday() in the vDSO, and
# perftest's calibration of rdtsc against it (a regression that fails under
# load against the HPET: "Correlation coefficient", its results 0 or inf)
# holds.
# IPv6 sockets but no IPv6 address on any interface (kernel/pfnic.config):
# pfnic's RoCE is IPv4 only, and the wires carry no neighbour discovery.
append="console=ttyS0 intel_iommu=on,sm_on panic=-1 no_timer_check tsc=reliable ipv6.disable_ipv6=1 pfnic_guest.mode=$mode"
[[ -n $filter ]] && append+=" pfnic_guest.filter=$filter"
[[ ${PFNIC_SOAK:-0} == 1 ]] && append+=" pfnic_guest.soak=1"
if [[ -n ${PFNIC_MEM_MODE:-} ]]; then
	[[ $PFNIC_MEM_MODE =~ ^[a-z]+$ ]] || die "PFNIC_MEM_MODE='$PFNIC_MEM_MODE': expected sva, odp or pinned"
	append+=" pfnic_guest.mem_mode=$PFNIC_MEM_MODE"
fi
[[ $mode == cmd ]] && append+=" quiet"
# Built-in KUnit suites (the kernel crate's doctests) at boot, when asked: make
# test judges them in one guest (1.5-2 s of each boot under TCG).
((kunit)) && append+=" kunit.enable=1 kunit.autorun=1"
[[ $kind != pfnic ]] && append+=" pfnic_guest.kind=$kind"
[[ -n $node ]] && append+=" pfnic_guest.node=$node"
append+=" ${PFNIC_APPEND:-}"

qemu=(
	"$QEMU_BIN" -accel "${PFNIC_ACCEL:-tcg}" -M q35 -cpu max,la57=off
	-smp "${PFNIC_SMP:-2}" -m "${PFNIC_MEM:-2G}"
	-nodefaults -display none -no-reboot
	"${QEMU_FIRMWARE_ARGS[@]}"
	-kernel "$bzimage" -initrd "$initrd"
)
# NUMA nodes: the CPUs and the memory split evenly, node i's memory a RAM
# backend of its own.
numa_nodes=${PFNIC_NUMA_NODES:-1}
if ((numa_nodes > 1)); then
	smp=${PFNIC_SMP:-2}
	mem_bytes=$(numfmt --from=iec "${PFNIC_MEM:-2G}")
	((smp % numa_nodes == 0 && mem_bytes % numa_nodes == 0)) ||
		die "PFNIC_NUMA_NODES=$numa_nodes: the CPUs (PFNIC_SMP=$smp) and the memory must split evenly"
	# A socket per node: CPUs that share a cache on different nodes are a topology the
	# kernel warns about.
	qemu+=(-smp "$smp,sockets=$numa_nodes,cores=$((smp / numa_nodes)),threads=1")
	for ((i = 0; i < numa_nodes; i++)); do
		qemu+=(-object "memory-backend-ram,id=numa$i,size=$((mem_bytes / numa_nodes))"
			-numa "node,nodeid=$i,memdev=numa$i,cpus=$((i * smp / numa_nodes))-$(((i + 1) * smp / numa_nodes - 1))")
	done
fi
# The virtio-net NICs have no option ROM (romfile=): the guest boots with
# -kernel, iPXE would only cost boot time.
# dgram_netdev ID LOCAL,REMOTE: a netdev joined to the peer's by two unix
# datagram sockets (no root, no tap, no start order: frames sent before the
# peer is up are lost, like on a cable not yet plugged in).
dgram_netdev() {
	local id=$1 local_path=${2%%,*} remote_path=${2#*,}
	rm -f "$local_path"
	qemu+=(-netdev "dgram,id=$id,local.type=unix,local.path=$local_path,remote.type=unix,remote.path=$remote_path")
}
[[ -n $side ]] && dgram_netdev side "$side" &&
	qemu+=(-device "virtio-net-pci,netdev=side,mac=52:54:00:00:01:0$node,romfile=")
wire_mac=52:54:00:00:02:0$node
[[ -n $wire ]] && dgram_netdev wire "$wire"
[[ -n $wire && -n $pcap ]] &&
	qemu+=(-object "filter-dump,id=wiredump,netdev=wire,file=$pcap${snaplen:+,maxlen=$snaplen}")
case $kind in
pfnic)
	qemu+=(
		# The IOMMU comes first: devices behind it look it up when they realize.
		-device intel-iommu,intremap=on,x-scalable-mode=on,x-flts=on,aw-bits=48,x-pasid-mode=on,device-iotlb=on,svm=on
		-device pcie-root-port,id=rp0,chassis=1,slot=0
		-device "pfnic,bus=rp0${wire:+,netdev=wire,mac=$wire_mac}${PFNIC_DEVICE_PROPS:-}"
	)
	;;
rxe)
	[[ -n $wire ]] && qemu+=(-device "virtio-net-pci,netdev=wire,mac=$wire_mac,romfile=")
	;;
esac
# shellcheck disable=SC2206 # word splitting of the user's extra args is intended
qemu+=(${PFNIC_QEMU_ARGS:-} "${extra_qemu[@]}")

# The watchdog's silence limit (see the top of this file).
silence=${PFNIC_SILENCE_LIMIT:-$([[ ${PFNIC_FLAVOR:-} == debug ]] && echo 180 || echo 60)}
[[ $silence =~ ^[0-9]+$ ]] || die "PFNIC_SILENCE_LIMIT='$silence': expected seconds"

# watched LOG... -- QEMU-ARGS...: run QEMU under the stall watchdog and the
# time limit. Returns QEMU's exit status, 124 when the time limit stopped
# it, 125 when the watchdog did (its report on stderr and in --stall-report).
watched() {
	local logs=() rc=0 wrc=0 report=${stall_report:-$work/stall}
	while [[ $1 != -- ]]; do logs+=("$1"); shift; done
	shift
	rm -f "$report"
	"$@" -monitor "unix:$work/monitor,server=on,wait=off" </dev/null &
	qpid=$!
	python3 "$PFNIC_ROOT/scripts/guest-watch.py" ${timeout_s:+--limit "$timeout_s"} --monitor "$work/monitor" \
		"$qpid" "$report" "$silence" "${logs[@]}" &
	wpid=$!
	wait "$qpid" || rc=$?
	wait "$wpid" || wrc=$?
	qpid= wpid=
	case $wrc in
	0) return "$rc" ;;
	2)
		log "the guest stalled: $(sed "/^QEMU's view/,\$d" "$report")"
		[[ -z $stall_report ]] || log "(QEMU's view of its vCPUs and local APICs: $stall_report)"
		return 125
		;;
	3) return 124 ;;
	*) die "the stall watchdog failed (status $wrc)" ;;
	esac
}
# The guest's init writes a heartbeat to its third serial port (the
# watchdog's proof of life while a test prints nothing): ttyS2, after the
# console and the results port (a null one when there are no results).
heartbeat=(-serial "file:$work/heartbeat")
[[ $mode == shell ]] || append+=" pfnic_guest.heartbeat=ttyS2"
qemu+=(-append "$append")

case $mode in
shell)
	run_limited() {
		if [[ -n $timeout_s ]]; then
			timeout --foreground -k 10 "$timeout_s" "$@"
		else
			"$@"
		fi
	}
	if [[ -n $console_sock ]]; then
		rm -f "$console_sock"
		run_limited "${qemu[@]}" -chardev "socket,id=con,path=$console_sock,server=on,wait=off,mux=on${logfile:+,logfile=$logfile}" \
			-serial chardev:con -mon chardev=con,mode=readline </dev/null
	else
		log "booting (TCG: about 10 s); leave the guest with 'poweroff' or Ctrl-A X"
		run_limited "${qemu[@]}" -serial mon:stdio
	fi
	;;
cmd)
	logfile=${logfile:-$work/serial.log}
	rc=0
	second=(-serial null)
	[[ -n $results ]] && second=(-serial "file:$results")
	watched "$logfile" ${results:+"$results"} "$work/heartbeat" -- "${qemu[@]}" \
		-chardev "stdio,id=con,signal=off,logfile=$logfile" -serial chardev:con "${second[@]}" "${heartbeat[@]}" || rc=$?
	((rc != 124)) || die "the guest did not finish within ${timeout_s}s"
	((rc != 125)) || die "the guest stalled and was stopped"
	((rc == 0)) || die "QEMU failed (exit $rc)"
	status=$(sed -n 's/^pfnic-guest: exit status \([0-9]*\).*/\1/p' "$logfile" | tail -1)
	[[ -n $status ]] || die "the guest did not report the command's exit status"
	exit "$status"
	;;
test)
	rc=0
	watched "$logfile" "$results" "$work/heartbeat" -- "${qemu[@]}" \
		-serial "file:$logfile" -serial "file:$results" "${heartbeat[@]}" || rc=$?
	exit "$rc"
	;;
esac
