#!/usr/bin/env bash
# Build what is missing, then run every test: the device qtests (TAP) and the
# guest suite (KTAP) in a booted guest. Any failed test, a guest kernel
# WARNING:/BUG:/Oops/Call Trace (KASAN and lockdep reports among them), a
# kmemleak report, a missing result or a timeout fails the run. With
# PFNIC_FLAVOR=debug (make test-debug) the guest runs the debug kernel.
# Logs are kept in $PFNIC_LOG_DIR (default $PFNIC_CACHE/logs/<time>).
# The last line is "N passed, N failed".
#
# usage: scripts/test.sh [--no-build] [--filter NAME]
#   --filter NAME   run only the guest tests whose name contains NAME
# Environment: PFNIC_TEST_TIMEOUT (guest time limit, s; default 900)
source "$(dirname "$0")/lib.sh"

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

# --- device qtests ------------------------------------------------------------
log "running the qtests: ${QTESTS[*]}"
# libqtest derives the target from the binary's name and takes no extra
# arguments: a wrapper of the same name adds the firmware search path.
wrapper=$run_dir/bin/qemu-system-x86_64
mkdir -p "${wrapper%/*}"
printf '#!/bin/sh\nexec %q %s "$@"\n' "$QEMU_BIN" "${QEMU_FIRMWARE_ARGS[*]}" >"$wrapper"
chmod +x "$wrapper"
for qtest in "${QTESTS[@]}"; do
	rc=0
	QTEST_QEMU_BINARY=$wrapper timeout -k 10 300 "$QEMU_BUILD/tests/qtest/$qtest" --tap -k \
		>"$run_dir/$qtest.tap" 2>"$run_dir/$qtest.stderr" || rc=$?
	count_tap "$run_dir/$qtest.tap" "$qtest"
	expect "$qtest-exit" "$qtest exited with status $rc (see $run_dir/$qtest.stderr)" test "$rc" -eq 0
done

# --- guest suites -------------------------------------------------------------
# guest_suite LABEL DEVICE-PROPS FILTER [APPEND]: boot a guest whose pfnic has
# DEVICE-PROPS (and APPEND on its kernel command line), run the guest tests
# matching FILTER, and judge the results and the guest kernel's log. With
# KUNIT=1 also judge the boot's KUnit suites.
guest_suite() {
	local label=$1 props=$2 filter=$3 append=${4:-} serial ktap rc=0 limit=${PFNIC_TEST_TIMEOUT:-900}
	serial=$run_dir/$label-serial.log ktap=$run_dir/$label.ktap
	: >"$serial"
	: >"$ktap"
	PFNIC_DEVICE_PROPS=$props PFNIC_APPEND=$append "$PFNIC_ROOT/scripts/run-guest.sh" --mode test --timeout "$limit" \
		--log "$serial" --results "$ktap" ${filter:+--filter "$filter"} || rc=$?
	if ((rc == 124)); then
		expect "$label-timeout" "the guest did not finish within ${limit}s" false
	else
		expect "$label-exit" "QEMU exited with status $rc" test "$rc" -eq 0
	fi
	count_tap "$ktap" "$label"
	expect "$label-finished" "the guest suite did not run to the end" \
		grep -q "pfnic-guest: exit status" "$serial"
	local bad
	bad=$(grep -nE 'WARNING:|BUG:|Oops|Call Trace|general protection fault|Kernel panic|unreferenced object' "$serial" || true)
	expect "$label-kernel-log" "guest kernel log has: $(head -3 <<<"$bad" | tr '\n' ' ')" test -z "$bad"
	if ((${KUNIT:-0})); then
		# KUnit: the suites the guest kernel ran at boot (KTAP on the console).
		local kunit=$run_dir/kunit.ktap ours
		sed -E 's/^\[ *[0-9]+\.[0-9]+\] ?//' "$serial" | tr -d '\r' >"$kunit"
		count_tap "$kunit" kunit
		ours=$(grep -cE '^ +ok [0-9]+ rust_doctest_kernel_((pci_irq|miscdevice|iommu_sva|mm_mmu_notifier|mm_virt|fs_file)_rs_[0-9]+|dma_rs_9)$' "$kunit" || true)
		expect kunit-our-doctests "the doctests of kernel/patches did not all run and pass ($ours ok)" \
			test "$ours" -ge 9
	fi
}

log "booting the guest and running the guest suite (TCG; a few minutes)"
KUNIT=1 guest_suite guest "" "$filter"
if [[ -z $filter || test_open_without_sva == *"$filter"* ]]; then
	log "booting a guest without PRI (pfnic pri=off): open() must fail cleanly"
	guest_suite guest-nopri ",pri=off" test_open_without_sva
fi

if [[ -z $filter || test_inject == *"$filter"* || $filter == test_inject* ]]; then
	# Fault injection: the tests skip in the other guests and run here.
	log "booting a guest whose pfnic takes every 2nd page request as refused by a full queue"
	guest_suite guest-prq-full ",x-inject-prq-full=2" test_inject pfnic_inject=prq-full
	log "booting a guest whose pfnic takes every 3rd page response as a failure"
	guest_suite guest-pri-failure ",x-inject-pri-failure=3" test_inject pfnic_inject=pri-failure
	log "booting a guest whose pfnic leaves every 2nd stopped context active"
	guest_suite guest-ctx-stuck ",x-inject-ctx-stuck=2" test_inject pfnic_inject=ctx-stuck
fi

# --- verdict ----------------------------------------------------------------------
echo
grep -h '^#' "$run_dir"/guest*.ktap | grep -v '^# Subtest' || true
for f in "${failures[@]}"; do
	echo "FAIL $f"
done
echo "logs: $run_dir"
summary="$passed passed, $failed failed"
if ((skipped)); then summary+=", $skipped skipped"; fi
echo "$summary"
((failed == 0))
