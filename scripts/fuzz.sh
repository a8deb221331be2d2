#!/usr/bin/env bash
# Fuzz the pfnic device model with QEMU's generic-fuzz target (libFuzzer, with
# AddressSanitizer): random MMIO to its registers and doorbell pages, and random
# data for every DMA read it makes (rings, work requests, records). A crash,
# an ASan report or a hang fails the run; libFuzzer writes the input that
# caused it (crash-*, leak-*, timeout-*) to the run's log directory, where
# `scripts/fuzz.sh --replay FILE` runs it again.
#
# The fuzzer is a second QEMU build (clang, --enable-fuzzing) beside the
# ordinary one, in $PFNIC_CACHE/build/qemu-fuzz; the corpus is kept in
# $PFNIC_CACHE/fuzz-corpus/pfnic between runs.
#
# usage: scripts/fuzz.sh [--seconds N] [--replay FILE]
#   --seconds N    how long to fuzz (default 60)
#   --replay FILE  run one saved input instead of fuzzing
source "$(dirname "$0")/lib.sh"

seconds=60 replay=
while (($#)); do
	case $1 in
	--seconds) seconds=$2; shift 2 ;;
	--replay) replay=$2; shift 2 ;;
	-h | --help) sed -n '2,/^source/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done

"$PFNIC_ROOT/scripts/setup-host.sh"
"$PFNIC_ROOT/scripts/fetch-sources.sh"
# libFuzzer and the sanitizer runtimes of the clang the kernel build uses.
apt_install "libclang-rt${LLVM_SUFFIX}-dev" "libfuzzer${LLVM_SUFFIX}-dev"

(
	take_lock qemu
	source "$PFNIC_ROOT/scripts/patch-tree.sh"
	qemu_tree
	build=$BUILD_DIR/qemu-fuzz
	qemu_configure "$build" \
		--cc=clang$LLVM_SUFFIX --cxx=clang++$LLVM_SUFFIX --enable-fuzzing --enable-asan \
		--target-list=x86_64-softmmu --without-default-features --enable-tcg \
		--disable-docs --disable-werror --disable-install-blobs --disable-download --disable-rust
	log "building qemu-fuzz-x86_64 (ninja -j$PFNIC_JOBS; about 10 minutes cold)"
	ninja -C "$build" -j"$PFNIC_JOBS" qemu-fuzz-x86_64 >"$build/ninja.log" 2>&1 ||
		{ grep -B2 -A12 -m3 "error\|FAILED" "$build/ninja.log" >&2; die "build failed; see $build/ninja.log"; }
)

fuzzer=$BUILD_DIR/qemu-fuzz/qemu-fuzz-x86_64
run_dir=$LOG_DIR/fuzz-$(date +%Y%m%d-%H%M%S)
corpus=$PFNIC_CACHE/fuzz-corpus/pfnic
mkdir -p "$run_dir" "$corpus"
# generic-fuzz: the machine, and the memory regions whose accesses it fuzzes (BAR0 is
# "pfnic-ctrl", BAR2 "pfnic-doorbell"); every DMA read the device makes gets fuzz data.
# The device sits on the root bus: generic-fuzz maps the BARs of bus 0 only.
export QEMU_FUZZ_ARGS="${QEMU_FIRMWARE_ARGS[*]} -M q35 -nodefaults -device pfnic"
export QEMU_FUZZ_OBJECTS="pfnic*"
export QEMU_AVOID_DOUBLE_FETCH=1
if [[ -n $replay ]]; then
	log "replaying $replay"
	exec "$fuzzer" --fuzz-target=generic-fuzz "$replay"
fi
log "fuzzing pfnic for ${seconds}s (log and any crashing input in $run_dir)"
rc=0
(cd "$run_dir" && "$fuzzer" --fuzz-target=generic-fuzz -max_total_time="$seconds" \
	-timeout=30 -rss_limit_mb=4096 -print_final_stats=1 "$corpus") >"$run_dir/fuzz.log" 2>&1 || rc=$?
grep -E '^(stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb)' "$run_dir/fuzz.log" || true
if ((rc != 0)); then
	grep -m20 -E 'ERROR|SUMMARY|crash-|timeout-|leak-' "$run_dir/fuzz.log" >&2 || true
	die "the fuzzer found a problem (exit $rc): see $run_dir"
fi
log "no crash in ${seconds}s; corpus: $(find "$corpus" -type f | wc -l) inputs"
