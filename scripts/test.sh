#!/usr/bin/env bash
# Build what is missing, then run every test: the device qtests (TAP), the
# guest suite (KTAP) in a booted guest, and the two-guest suites (two guests
# joined by a wire, scripts/run-pair.sh; their numbers in pair-*.json). Any
# failed test, a guest kernel WARNING:/BUG:/Oops/Call Trace (KASAN and
# lockdep reports among them), a kmemleak report, an IOMMU invalidation
# queue error (an invalidation the IOMMU model refused: stale translations),
# a missing result or a timeout fails the run. With
# PFNIC_FLAVOR=debug (make test-debug) the guest runs the debug kernel.
# Logs are kept in $PFNIC_LOG_DIR (default $PFNIC_CACHE/logs/<time>).
# The last line is "N passed, N failed".
#
# usage: scripts/test.sh [--no-build] [--filter NAME]
#   --filter NAME   run only the guest tests whose name contains NAME
# Environment: PFNIC_TEST_TIMEOUT (guest time limit, s; default 900),
# PFNIC_TEST_LANES (1: every suite one after another; 2: the single-guest
# suites in two lanes at once, since a guest mostly waits (the host is
# 65-90% idle while one runs), the two-guest suites after them; default 3:
# the two-guest suites in a third lane beside the other two), PFNIC_PAIR_TIMEOUT (each two-guest suite, s; default 300; 900 with
# PFNIC_FLAVOR=debug, where each command of a pairing also gets 240 s instead
# of 60: rxe under KASAN needs more than 60 s for one ibv_rc_pingpong), PFNIC_PAIRS
# (the two-guest pairings to run; default "pfnic-pfnic pfnic-rxe rxe-pfnic";
# rxe-rxe, the baseline without pfnic, runs in make bench, or add it here),
# PFNIC_PAIR_BASELINES (1: pfnic-pfnic's MPI job on rxe and TCP too, as make
# bench runs it).
# --filter pair_... runs only two-guest suites.
source "$(dirname "$0")/lib.sh"

# What a guest kernel log must not contain (see above).
KERNEL_LOG_BAD='WARNING:|BUG:|Oops|Call Trace|general protection fault|Kernel panic|unreferenced object|VT-d detected Invalidation|UBSAN:|rcu: INFO:|detected stalls|blocked for more than'
# Lines of the programs' own output on the console that match it and are not
# the kernel's: perftest's ib_send_bw server announces it measures no peak.
TOOL_LOG_OK="WARNING: BW peak won't be measured in this run"

# kernel_log_bad FILE: the lines of a guest's console that show a kernel problem.
kernel_log_bad() {
	grep -nE "$KERNEL_LOG_BAD" "$1" | grep -vF "$TOOL_LOG_OK" || true
}

build=1 filter=
while (($#)); do
	case $1 in
	--no-build) build=0; shift ;;
	--filter) filter=$2; shift 2 ;;
	-h | --help) sed -n '2,/^source/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done

if ((build)); then
	"$PFNIC_ROOT/scripts/build-all.sh"
fi

run_dir=$LOG_DIR/$(date +%Y%m%d-%H%M%S)
tests_start=$SECONDS
mkdir -p "$run_dir"
passed=0 failed=0 skipped=0
failures=()

# count_tap FILE LABEL: add a TAP/KTAP file's top-level results to the totals
# and check that as many results as planned arrived.
count_tap() {
	local file=$1 label=$2 plan ran=0 line
	plan=$(sed -n 's/^\(TAP version [0-9]*\|KTAP version [0-9]*\)$//; s/^1\.\.\([0-9]*\).*$/\1/p' "$file" | head -1)
	while IFS= read -r line; do
		if [[ $line =~ ^ok\ [0-9]+\ (.*)$ ]]; then
			ran=$((ran + 1))
			if [[ ${BASH_REMATCH[1]} =~ \#\ SKIP ]]; then
				skipped=$((skipped + 1))
			else
				passed=$((passed + 1))
			fi
		elif [[ $line =~ ^not\ ok\ [0-9]+\ (.*)$ ]]; then
			ran=$((ran + 1))
			failed=$((failed + 1))
			failures+=("$label: ${BASH_REMATCH[1]}")
		fi
	done <"$file"
	if [[ -z $plan ]]; then
		failed=$((failed + 1))
		failures+=("$label: no test plan (did it start?)")
	elif ((ran != plan)); then
		failed=$((failed + 1))
		failures+=("$label: planned $plan tests, $ran reported")
	fi
}

# expect LABEL MESSAGE COMMAND...: a harness-level check counted like a
# test: passes when COMMAND succeeds. (Never a bare test under set -e: a
# failing check must be counted and reported, not end the run.)
expect() {
	local label=$1 msg=$2
	shift 2
	if "$@"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		failures+=("$label: $msg")
	fi
}

# lane FUNCTION...: run the FUNCTIONs (parts of the suite that count with
# count_tap and expect) one after another in the background; lanes_wait adds
# their tallies to the totals. With PFNIC_TEST_LANES=1 they run here, now.
lane_pids=() lane_n=0
lane() {
	if ((${PFNIC_TEST_LANES:-3} <= 1)); then
		local f
		for f; do "$f"; done
		return
	fi
	lane_n=$((lane_n + 1))
	local tally=$run_dir/.lane-$lane_n
	(
		passed=0 failed=0 skipped=0 failures=()
		for f; do "$f"; done
		{
			echo "$passed $failed $skipped"
			printf '%s\n' "${failures[@]}"
		} >"$tally"
	) &
	lane_pids+=($!)
}
lanes_wait() {
	local pid tally p f s line i
	for pid in "${lane_pids[@]}"; do
		wait "$pid" || true
	done
	for ((i = 1; i <= lane_n; i++)); do
		tally=$run_dir/.lane-$i
		if [[ ! -s $tally ]]; then
			failed=$((failed + 1))
			failures+=("lane $i: ended without its tally")
			continue
		fi
		read -r p f s <"$tally"
		passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
		while IFS= read -r line; do
			[[ -n $line ]] && failures+=("$line")
		done < <(tail -n +2 "$tally")
		rm -f "$tally"
	done
	lane_pids=() lane_n=0
}

# --- device qtests ------------------------------------------------------------
qtests() {
	local wrapper=$run_dir/bin/qemu-system-x86_64 qtest rc t0
	# FILTER=pair... names only two-guest suites.
	[[ $filter != pair* ]] || return 0
	log "running the qtests: ${QTESTS[*]}"
	# libqtest derives the target from the binary's name and takes no extra
	# arguments: a wrapper of the same name adds the firmware search path.
	mkdir -p "${wrapper%/*}"
	printf '#!/bin/sh\nexec %q %s "$@"\n' "$QEMU_BIN" "${QEMU_FIRMWARE_ARGS[*]}" >"$wrapper"
	chmod +x "$wrapper"
	for qtest in "${QTESTS[@]}"; do
		rc=0 t0=$SECONDS
		QTEST_QEMU_BINARY=$wrapper timeout -k 10 300 "$QEMU_BUILD/tests/qtest/$qtest" --tap -k \
			>"$run_dir/$qtest.tap" 2>"$run_dir/$qtest.stderr" || rc=$?
		log "$qtest: $((SECONDS - t0)) s"
		count_tap "$run_dir/$qtest.tap" "$qtest"
		expect "$qtest-exit" "$qtest exited with status $rc (see $run_dir/$qtest.stderr)" test "$rc" -eq 0
	done
}

# --- host unit tests ------------------------------------------------------------
# Userspace code that needs no device: pfnic-perf's perftest exchange, both sides
# over a real TCP connection and against perftest's message formats; the RDMA
# netlink messages pfnic-perf reads the MR counters with (rdma-nl); the uAPI's
# layouts against the syzkaller descriptions' C mirror (pfnic-sys).
host_unit() {
	local rc=0
	[[ -z $filter || host_unit == *"$filter"* ]] || return 0
	log "running the host unit tests (cargo test -p pfnic-perf -p rdma-nl -p pfnic-sys)"
	cargo_dyn test --release --locked -q -p pfnic-perf -p rdma-nl -p pfnic-sys >"$run_dir/host-unit.log" 2>&1 ||
		rc=$?
	expect host-unit-tests "cargo test -p pfnic-perf -p rdma-nl -p pfnic-sys failed (see $run_dir/host-unit.log)" \
		test "$rc" -eq 0
}

# --- guest suites -------------------------------------------------------------
# guest_suite LABEL DEVICE-PROPS FILTER [APPEND]: boot a guest whose pfnic has
# DEVICE-PROPS (and APPEND on its kernel command line), run the guest tests
# matching FILTER, and judge the results and the guest kernel's log. With
# KUNIT=1 the kernel also runs its KUnit suites at boot, and they are judged.
guest_suite() {
	local label=$1 props=$2 filter=$3 append=${4:-} serial ktap rc=0 limit=${PFNIC_TEST_TIMEOUT:-900} t0=$SECONDS
	serial=$run_dir/$label-serial.log ktap=$run_dir/$label.ktap
	: >"$serial"
	: >"$ktap"
	PFNIC_DEVICE_PROPS=$props PFNIC_APPEND=$append "$PFNIC_ROOT/scripts/run-guest.sh" --mode test --debian --timeout "$limit" \
		--log "$serial" --results "$ktap" --stall-report "$run_dir/$label-stall.txt" \
		${filter:+--filter "$filter"} ${KUNIT:+--kunit} || rc=$?
	log "$label: $((SECONDS - t0)) s"
	if ((rc == 124)); then
		expect "$label-timeout" "the guest did not finish within ${limit}s" false
	elif ((rc == 125)); then
		# The watchdog stopped it (scripts/guest-watch.py): its reason and
		# the console's tail go in the verdict.
		expect "$label-stall" "$(head -1 "$run_dir/$label-stall.txt")" false
	else
		expect "$label-exit" "QEMU exited with status $rc" test "$rc" -eq 0
	fi
	count_tap "$ktap" "$label"
	expect "$label-finished" "the guest suite did not run to the end" \
		grep -q "pfnic-guest: exit status" "$serial"
	local bad
	bad=$(kernel_log_bad "$serial")
	expect "$label-kernel-log" "guest kernel log has: $(head -3 <<<"$bad" | tr '\n' ' ')" test -z "$bad"
	if [[ -n ${KUNIT:-} ]]; then
		# KUnit: the suites the guest kernel ran at boot (KTAP on the console).
		local kunit=$run_dir/kunit.ktap ours suite
		sed -E 's/^\[ *[0-9]+\.[0-9]+\] ?//' "$serial" | tr -d '\r' >"$kunit"
		count_tap "$kunit" kunit
		ours=$(grep -cE '^ +ok [0-9]+ rust_doctest_kernel_((device_bind_scope|pci_irq|pci_io|miscdevice|iommu_sva|mm_mmu_notifier|mm_virt|fs_file|fs_anon_inode|cred|rdma_attr|rdma_umem|rdma_umem_odp)_rs_[0-9]+|dma_rs_(9|10))$' "$kunit" || true)
		expect kunit-our-doctests "the doctests of kernel/patches did not all run and pass ($ours ok)" \
			test "$ours" -ge 18
		# The KUnit suites of kernel/patches, each run and passed.
		for suite in rust_kernel_rdma_dm rust_kernel_rdma_qp rust_kernel_rdma_kverbs; do
			expect "kunit-$suite" "KUnit suite $suite did not run and pass" \
				grep -qE "^ok [0-9]+ $suite\$" "$kunit"
		done
	fi
}

main_guest() {
	# FILTER=pair... names only two-guest suites: no single guest for them.
	[[ $filter != pair* ]] || return 0
	log "booting the guest and running the guest suite (TCG; a few minutes)"
	# Two NUMA nodes: the fault matrix moves pages between them (move_pages).
	KUNIT=1 PFNIC_NUMA_NODES=2 guest_suite guest "" "$filter"
}
# Without PRI there is no SVA: contexts have no PASID, and run in the `odp`
# memory mode (the driver fills the device's translation tables on demand).
# The verbs suite, the fault matrix and the C programs run there in that mode,
# with the memory mode tests; then the verbs suite and the C programs again in
# the `pinned` mode (PFNIC_MEM_MODE=pinned; their ODP tests skip: the mode has
# no on-demand paging).
nopri_guest() {
	local label=$1 mode=$2 tests=$3 run=0 part
	for part in ${tests//|/ }; do
		[[ -z $filter || $part == *"$filter"* || $filter == "$part"* ]] && run=1
	done
	((run)) || return 0
	log "booting a guest without PRI (pfnic pri=off): ${tests//|/, } in the ${mode:-default} memory mode"
	# Two NUMA nodes, as the main guest: the fault matrix's move_pages case.
	PFNIC_NUMA_NODES=2 PFNIC_MEM_MODE=$mode guest_suite "$label" ",pri=off" "${filter:-$tests}"
}
nopri_guests() {
	nopri_guest guest-nopri "" "test_open_without_sva|test_verbs|test_mode_|test_c_|test_debian_|test_matrix"
	nopri_guest guest-pinned pinned "test_verbs|test_mode_pinned|test_c_|test_debian_"
}

wire_guests() {
	[[ -z $filter || test_wire == *"$filter"* || $filter == test_wire* ]] || return 0
	# The wire (docs/wire.md): a second pfnic on a second root port, the two
	# ports joined by a pair of unix datagram sockets, so RoCEv2 runs between
	# them inside one guest. PROPS go to both pfnics.
	# The host controls the first port's link (netdev w0) through QEMU's
	# monitor: test_wire_port_events asks for it to go down and up
	# (scripts/link-control.py; the kernel command line tells the test so).
	wire_guest() {
		local label=$1 props=$2 filter=$3 append=${4:-} link ctl rc=0
		link=$(mktemp -d /tmp/pfnic-wire.XXXXXX) # short: unix socket paths
		python3 "$PFNIC_ROOT/scripts/link-control.py" "$link/qmp" "$run_dir/$label.ktap" \
			>"$run_dir/$label-link-control.log" 2>&1 &
		ctl=$!
		PFNIC_QEMU_ARGS="$(wire_guest_qemu_args "$link" "$props")
			-qmp unix:$link/qmp,server=on,wait=off" \
			guest_suite "$label" ",netdev=w0,mac=52:54:00:00:00:01$props" "$filter" "pfnic_link_control=w0$append"
		# It ends with QEMU's monitor; a QEMU that never started leaves it waiting.
		kill "$ctl" 2>/dev/null || true
		wait "$ctl" || rc=$?
		expect "$label-link-control" "scripts/link-control.py failed (status $rc): $(tail -2 "$run_dir/$label-link-control.log" | tr '\n' ' ')" \
			test "$rc" -eq 0 -o "$rc" -eq 143
		rm -rf "$link"
	}
	log "booting a guest with two pfnics joined by a wire (the wire tests)"
	wire_guest guest-wire "" test_wire
	# The same link losing and reordering frames: retransmission is tested, not
	# assumed (x-wire-loss/x-wire-reorder, per million frames each port sends;
	# the tests read the loss from pfnic_wire_loss= on the command line). UD
	# datagrams too: lost ones are not sent again, the others arrive whole.
	for loss in 10000 100000; do
		log "the wire guest again, $((loss / 10000))% of the frames lost and 5% reordered"
		wire_guest "guest-wire-loss$((loss / 10000))" ",x-wire-loss=$loss,x-wire-reorder=50000" \
			"test_wire_rc_ops|test_wire_large|test_wire_cold|test_wire_ud" " pfnic_wire_loss=$loss"
	done
}

inject_guests() {
	[[ -z $filter || test_inject == *"$filter"* || $filter == test_inject* ]] || return 0
	# Fault injection: the tests skip in the other guests and run here.
	log "booting a guest whose pfnic takes every 2nd page request as refused by a full queue"
	guest_suite guest-prq-full ",x-inject-prq-full=2" test_inject pfnic_inject=prq-full
	log "booting a guest whose pfnic takes every 3rd page response as a failure"
	guest_suite guest-pri-failure ",x-inject-pri-failure=3" test_inject pfnic_inject=pri-failure
	log "booting a guest whose pfnic leaves every 2nd stopped context active"
	guest_suite guest-ctx-stuck ",x-inject-ctx-stuck=2" test_inject pfnic_inject=ctx-stuck
	log "booting a guest whose pfnic refuses every 2nd destroy of a QP, SRQ or CQ and clear of an MR"
	guest_suite guest-destroy-busy ",x-inject-destroy-busy=2" test_inject pfnic_inject=destroy-busy
}

pri_small_guest() {
	[[ -z $filter || test_fault_path == *"$filter"* || $filter == test_fault_path* ]] || return 0
	# The fault path on a PRI allocation of 16 (a context's quarter: 4 pages): the
	# page requests of faulting transfers wait their turn, and none is lost.
	log "booting a guest whose pfnic has a PRI allocation of 16 page requests"
	guest_suite guest-pri-small ",pri-requests=16" \
		"test_fault_path_small|test_fault_path_failed|test_verbs_odp_rc|test_verbs_odp_prefetch" \
		pfnic_pri_requests=16
}


# --- two-guest suites ---------------------------------------------------------------
# pair_suite PAIR TESTS: boot two guests joined by a wire (scripts/run-pair.sh),
# run rootfs/pair-test's TESTS with guest 1 as the server and guest 2 as the
# client, and judge both sides' KTAP and kernel logs. The numbers the tools
# print go to pair-PAIR.json.
pair_suite() {
	# Each guest's limit, boot included: pfnic-pfnic's suite takes 200-220 s
	# with its MPI jobs on this machine kind, twice that on a slow one.
	local pair=$1 tests=$2 label=pair-$1${3:+-$3} rc=0 n bad try limit=600 env= t0=$SECONDS
	# The wire is recorded (and checked: nothing lost) unless the suite loses
	# frames by design (a lossy wire, a link pulled out).
	local pcap=(--pcap --pcap-snaplen 96) pcaps=()
	[[ -z ${3:-} ]] || pcap=()
	# The debug kernel is several times slower: its pfnic-pfnic suite took
	# 854 s and 799 s of the 900 it had (two runs, 2026-11-30).
	if [[ ${PFNIC_FLAVOR:-} == debug ]]; then
		limit=1500 env="PAIR_TEST_LIMIT=240 "
	fi
	limit=${PFNIC_PAIR_TIMEOUT:-$limit}
	for try in 1 2 3; do
		rc=0
		"$PFNIC_ROOT/scripts/run-pair.sh" --pair "$pair" --label "$label" --log-dir "$run_dir" \
			--results --timeout "$limit" "${pcap[@]}" \
			--cmd1 "${env}pfnic-pair-test server 192.168.100.2 $tests" \
			--cmd2 "${env}pfnic-pair-test client 192.168.100.1 $tests" >"$run_dir/$label-console.log" 2>&1 || rc=$?
		((rc != 77)) || break # skipped (the device has no netdev=)
		if [[ $pair == rxe-rxe && $rc == 0 ]] && ((try < 3)) &&
			grep -qs '^not ok' "$run_dir/$label-guest1.ktap" "$run_dir/$label-guest2.ktap"; then
			# rxe-rxe runs no pfnic code at all (Linux's rxe and Debian's tools
			# on both sides; it is the baseline the others are compared with),
			# and rxe under TCG sometimes fails a run on its own (seen:
			# ib_send_bw's receiver completing LOC_QP_OP_ERR; ib_write_bw's
			# requester REM_INV_REQ_ERR or RETRY_EXC_ERR, in about a quarter of
			# the runs of 2026-11-26 before rootfs/pair-test's RXE_TIMEOUT): up
			# to three tries.
			log "$pair: rxe failed a test on its own ($(grep -hs '^not ok' "$run_dir/$label-guest1.ktap" "$run_dir/$label-guest2.ktap" | head -2 | tr '\n' ' ')); running the baseline again"
		else
			break
		fi
		# Keep this try's logs beside the next one's.
		for f in console.log guest1.ktap guest2.ktap guest1-serial.log guest2-serial.log \
			guest1-stall.txt guest2-stall.txt; do
			mv "$run_dir/$label-$f" "$run_dir/$label-try$try-$f" 2>/dev/null || true
		done
	done
	log "$label: $((SECONDS - t0)) s"
	if ((rc == 77)); then
		log "skip $pair: $(grep -h 'skip:' "$run_dir/$label-console.log" | sed 's/.*skip: //')"
		skipped=$((skipped + 1))
		return
	fi
	expect "$label-exit" "the guests' commands or QEMU failed (status $rc; see $label-console.log)" test "$rc" -eq 0
	for n in 1 2; do
		# Stopped by the stall watchdog or the time limit (its reason; the
		# console's tail is in the verdict).
		[[ ! -s $run_dir/$label-guest$n-stall.txt ]] ||
			expect "$label-guest$n-stall" "$(head -1 "$run_dir/$label-guest$n-stall.txt")" false
		count_tap "$run_dir/$label-guest$n.ktap" "$label-guest$n"
		expect "$label-guest$n-finished" "guest $n did not run to the end" \
			grep -q "pfnic-guest: exit status" "$run_dir/$label-guest$n-serial.log"
		bad=$(kernel_log_bad "$run_dir/$label-guest$n-serial.log")
		expect "$label-guest$n-kernel-log" "guest $n kernel log has: $(head -3 <<<"$bad" | tr '\n' ' ')" test -z "$bad"
	done
	# The numbers, and the wire lost nothing: every RoCE frame one guest's
	# netdev sent reached the other's (both recorded, headers only; the
	# recordings are kept only when they show a loss).
	rc=0
	((${#pcap[@]} == 0)) || pcaps=("$run_dir/$label-wire-guest1.pcap" "$run_dir/$label-wire-guest2.pcap")
	python3 "$PFNIC_ROOT/scripts/pair-results.py" "$pair" "$run_dir/$label-guest1.ktap" \
		"$run_dir/$label-guest2.ktap" "$run_dir/$label.json" \
		"${pcaps[@]}" \
		>"$run_dir/$label-summary.txt" 2>"$run_dir/$label-results.err" || rc=$?
	expect "$label-wire" "$(tr '\n' ' ' <"$run_dir/$label-results.err")" test "$rc" -eq 0
	((rc != 0)) || rm -f "$run_dir/$label-wire-guest"[12].pcap
}

# The tests of each pairing (rootfs/pair-test). rxe-rxe is Debian's tools on
# both sides: the interop baseline and the reference numbers. A pairing with
# a pfnic guest needs the device's wire (netdev=; run-pair.sh skips it
# otherwise); there pfnic-perf speaks perftest's exchange. pfnic-rxe and
# rxe-pfnic are the interop: Debian's unmodified tools on rxe against pfnic's,
# each side as server; in debian_*, Debian's ibv_rc_pingpong on both sides
# (on pfnic through pfnic's rdma-core provider under Debian's libibverbs.so.1);
# in debian_srq_pingpong, Debian's ibv_srq_pingpong on both sides (SRQs on the
# wire); in debian_ud_pingpong, Debian's ibv_ud_pingpong (UD QPs and address
# handles on the wire); in rping, librdmacm's rping (the kernel's rdma_cm,
# its CM messages MADs on QP1, each side's kernel's own UD QP).
pair_tests=device,ping,debian_lib_rc_pingpong,rc_pingpong,rc_pingpong_events,rc_pingpong_odp,debian_rc_pingpong,debian_rc_pingpong_odp,debian_srq_pingpong,debian_ud_pingpong,rping
perf_tests=write_bw,read_bw,send_bw,write_lat,read_lat,send_lat
# With a pfnic guest, Debian's perftest too (pfnic's provider, through the
# RDMA core); rxe-rxe runs them already as perf_tests. And the rest of
# rdmacm-utils beside rping, perftest connected by rdma_cm (-R) and qperf's
# rc_bw and rc_lat (connected by rdma_cm too): the kernel's rdma_cm on
# pfnic's QP1, against pfnic and rxe.
core_perf_tests=debian_lib_write_bw,debian_lib_read_bw,debian_lib_send_bw,debian_lib_write_lat,ucmatose,udaddy,rdma_server_client,cm_write_bw,qperf
# NVMe over RDMA in every pairing (rootfs/pair-nvme): the kernel's
# nvmet-rdma target on guest 1, its NVMe host (nvme-cli) and fio with
# verification on guest 2: kernel verbs with fast registration, local
# invalidation and send with invalidate, against pfnic and rxe. Between two
# pfnic guests (and in rxe-rxe, the baseline) NVMe over TCP on the same wire
# too, to compare.
nvme_tests=nvme_rdma
nvme_tcp_tests=nvme_tcp
# pfnic-pfnic once more, unrecorded, each pfnic losing 1% of the frames it
# sends (x-wire-loss): rdma_cm's connections (its CM messages are MADs on
# QP1, UD: the CM sends them again), and NVMe over RDMA with the client's
# wire pulled out and plugged in again mid-I/O (rootfs/pair-nvme's pull).
# One connection a test, and no perftest: ucmatose's two connections race
# the server's start (a lost MAD can delay the server's previous test: the
# first is refused, the second reaches the server after the client gave
# up), and ib_write_bw -R failed two runs of three on the lossy wire (a
# refused connection; RETRY_EXC_ERR after its numbers, at its closing
# exchange).
lossy_tests=rping,rdma_server_client,nvme_link
lossy_props=,x-wire-loss=10000
# Between two pfnic guests, Debian's UCX too: its perftest at the transport
# layer sends the client's device name to the server, so it cannot pair two
# kinds of device.
# ucx_put_bw_odp: the same with UCX_IB_REG_METHODS=odp (UCX's own crash at
# exit when its implicit MR's lkey is odd is told apart: rootfs/pair-test).
# ucx_tag_bw: UCX's protocol layer (UCP tag matching) on rc_verbs, wired up
# through ud_verbs (pfnic's UD QPs); ucx_tag_bw_odp with on-demand
# registration.
ucx_tests=ucx_put_bw,ucx_put_bw_odp,ucx_tag_bw,ucx_tag_bw_odp
# Between two pfnic guests, receive faults parked in the driver's backup buffer
# through the provider's PFNIC_RECV_FAULT=backup (rootfs/pair-test).
backup_tests=rc_pingpong_backup
# A pfnic guest's pfnic0 and an rxe device over its side channel's virtio-net
# in one process (rootfs/pair-test's two_devices).
two_device_tests=two_devices
# Between two pfnic guests, an Open MPI job (pml ucx, launched by mpirun over
# SSH) on pfnic (rootfs/pair-mpi). With PFNIC_PAIR_BASELINES=1 (make bench)
# the same job on rxe over the side channel's NIC and on TCP over it too, in
# the same boot, to compare (pair-pfnic-pfnic.json's "mpi"): neither runs
# pfnic code, so make test leaves them out, as it leaves out rxe-rxe.
mpi_tests=mpi_pfnic
mpi_baseline_tests=mpi_rxe,mpi_tcp
# pair_suites: every pairing, one after another.
pair_suites() {
	for pair in ${PFNIC_PAIRS:-pfnic-pfnic pfnic-rxe rxe-pfnic}; do
		[[ -z $filter || pair_${pair/-/_} == *"$filter"* ]] || continue
		tests=$pair_tests,$perf_tests,$nvme_tests
		[[ $pair != *pfnic* ]] || tests=$tests,$core_perf_tests
		[[ $pair != pfnic-pfnic && $pair != rxe-rxe ]] || tests=$tests,$nvme_tcp_tests
		[[ $pair != pfnic-pfnic ]] || tests=$tests,$backup_tests,$ucx_tests,$two_device_tests,$mpi_tests
		[[ $pair != pfnic-pfnic || ${PFNIC_PAIR_BASELINES:-0} != 1 ]] || tests=$tests,$mpi_baseline_tests
		tests=$tests,counters
		# Between two pfnic guests NVMe's target takes its receives from
		# shared receive queues (the kernel verbs' SRQs; rootfs/pair-nvme
		# checks it made some); pfnic-rxe's pfnic target keeps one receive
		# queue per QP.
		append=
		[[ $pair != pfnic-pfnic ]] || append=" nvmet_rdma.use_srq=1"
		log "booting two guests joined by a wire, $pair (guest 1 the servers, guest 2 the clients): $tests"
		PFNIC_APPEND="${PFNIC_APPEND:-}$append" pair_suite "$pair" "$tests"
	done
}
# pair_lossy: the lossy pfnic-pfnic boot (lossy_tests), with the pfnic-pfnic
# pairing's filter.
pair_lossy() {
	[[ " ${PFNIC_PAIRS:-pfnic-pfnic} " == *" pfnic-pfnic "* ]] || return 0
	[[ -z $filter || pair_pfnic_pfnic == *"$filter"* ]] || return 0
	log "booting two pfnic guests again, 1% of the frames lost, the client's wire pulled out mid-I/O: $lossy_tests"
	PFNIC_DEVICE_PROPS=$lossy_props pair_suite pfnic-pfnic "$lossy_tests" lossy
}

# The single-guest suites in two lanes (PFNIC_TEST_LANES), about 4 minutes
# each; the two-guest suites (about 5) in a third lane beside them, the
# host being 30-50% idle with two lanes (measured 2026-11-27; three lanes
# took the tests from 365-389 s to 270-280 s in three runs, with no rxe
# baseline rerun), or with PFNIC_TEST_LANES=2 after them, alone. The lossy
# pfnic-pfnic boot ends the second lane, which is the shorter by about as
# much.
lane qtests host_unit main_guest
lane nopri_guests wire_guests inject_guests pri_small_guest pair_lossy
if ((${PFNIC_TEST_LANES:-3} >= 3)); then
	lane pair_suites
fi
lanes_wait
if ((${PFNIC_TEST_LANES:-3} < 3)); then
	pair_suites
fi

# The pairings side by side: each one's speed against rxe-rxe's in this run
# (pairs.json, pairs.svg), when the run has the baseline (make bench's).
if [[ -e $run_dir/pair-rxe-rxe.json ]]; then
	python3 "$PFNIC_ROOT/scripts/pair-compare.py" "$run_dir" >"$run_dir/pairs.txt" 2>&1 ||
		expect pair-compare "$(cat "$run_dir/pairs.txt")" false
fi

# --- verdict ----------------------------------------------------------------------
echo
grep -h '^#' "$run_dir"/guest*.ktap | grep -v '^# Subtest' || true
cat "$run_dir"/pair-*-summary.txt "$run_dir/pairs.txt" 2>/dev/null || true
for f in "$run_dir"/*-stall.txt; do
	[[ -e $f ]] || continue
	echo "--- ${f##*/} (QEMU's view of the vCPUs, when the guest stalled: in the file)"
	sed "/^QEMU's view/,\$d" "$f"
done
for f in "${failures[@]}"; do
	echo "FAIL $f"
done
echo "logs: $run_dir"
echo "the tests took $((SECONDS - tests_start)) s"
summary="$passed passed, $failed failed"
if ((skipped)); then summary+=", $skipped skipped"; fi
echo "$summary"
((failed == 0))
