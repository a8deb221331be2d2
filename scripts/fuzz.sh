#!/usr/bin/env bash
# Fuzz the pfnic device model with libFuzzer and AddressSanitizer, in QEMU's
# fuzz framework, with one of three targets (docs/fuzzing.md):
#   pfnic-iommu  (default) pfnic behind an intel-iommu with SVA: the input is a
#                sequence of operations (work requests and descriptors on
#                mapped, read-only and absent pages, map/unmap with IOTLB and
#                device-TLB invalidations, page request answers good and
#                bogus, raw BAR0/BAR2 writes, commands, resets, clock steps),
#                run by the interpreter the qtest shares, which checks the
#                device's and the IOMMU's invariants after each one;
#   pfnic-wire   the same machine with the device's port on a netdev the
#                interpreter holds the other end of: beside pfnic-iommu's
#                operations, frames from the link (raw, or shaped RoCEv2
#                frames to its wire QPs and datagrams to its UD QP),
#                answers to the device's own requests, and the port's
#                Ethernet queues driven as its driver would; also checks
#                the frames it sends, sentinel pages around its memory and
#                receive buffers, and that the port still answers;
#   generic      QEMU's generic-fuzz on the device on the root bus, no IOMMU:
#                random MMIO to its registers and doorbell pages, and random
#                data for every DMA read it makes.
# A crash, an ASan report, a violated invariant or a hang fails the run;
# libFuzzer writes the input that caused it (crash-*, leak-*, timeout-*) to
# the run's log directory, where `scripts/fuzz.sh --replay FILE` (with the
# same --target) runs it again; PFNIC_FUZZ_TRACE=1 prints the
# operations of pfnic-iommu and pfnic-wire as they run.
#
# The fuzzer is a second QEMU build (clang, --enable-fuzzing) beside the
# ordinary one, in $PFNIC_CACHE/build/qemu-fuzz; the corpus is kept in
# $PFNIC_CACHE/fuzz-corpus/pfnic-iommu (generic: .../pfnic) between runs.
#
# usage: scripts/fuzz.sh [--target pfnic-iommu|pfnic-wire|generic] [--seconds N]
#                        [--replay FILE]
#   --target T     pfnic-iommu (default), pfnic-wire or generic
#   --seconds N    how long to fuzz (default 60)
#   --replay FILE  run one saved input instead of fuzzing
source "$(dirname "$0")/lib.sh"

seconds=60 replay= target=pfnic-iommu fuzz_opts=()
while (($#)); do
	case $1 in
	--target) target=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--replay) replay=$2; shift 2 ;;
	-h | --help) sed -n '2,/^source/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done

case $target in
pfnic-iommu | pfnic-wire | generic) ;;
*) die "--target must be pfnic-iommu, pfnic-wire or generic" ;;
esac

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
if [[ $target == generic ]]; then
	# The generic-fuzz corpus predates --target: it stays in fuzz-corpus/pfnic.
	corpus=$PFNIC_CACHE/fuzz-corpus/pfnic
	fuzz_target=generic-fuzz
	# The machine, and the memory regions whose accesses it fuzzes (BAR0 is
	# "pfnic-ctrl", BAR2 "pfnic-doorbell"); every DMA read the device makes gets
	# fuzz data. The device sits on the root bus: generic-fuzz maps the BARs of
	# bus 0 only.
	export QEMU_FUZZ_ARGS="${QEMU_FIRMWARE_ARGS[*]} -M q35 -nodefaults -device pfnic"
	export QEMU_FUZZ_OBJECTS="pfnic*"
	export QEMU_AVOID_DOUBLE_FETCH=1
else
	corpus=$PFNIC_CACHE/fuzz-corpus/$target
	fuzz_target=$target
	# The target builds its own machine (q35, intel-iommu, root port, pfnic;
	# pfnic-wire: and its netdev); QEMU_FUZZ_ARGS only adds the firmware paths.
	export QEMU_FUZZ_ARGS="${QEMU_FIRMWARE_ARGS[*]}"
	# Inputs are operation sequences: longer ones than libFuzzer starts with
	# (pfnic-wire's frames take more bytes).
	if [[ $target == pfnic-wire ]]; then
		fuzz_opts=(-max_len=2048)
	else
		fuzz_opts=(-max_len=1024)
	fi
fi
mkdir -p "$run_dir" "$corpus"
if [[ $target != generic && -z $(ls -A "$corpus") ]]; then
	# Random bytes are valid operation sequences: a start for the corpus.
	for i in $(seq 16); do head -c 256 /dev/urandom >"$corpus/seed-$i"; done
fi
if [[ -n $replay ]]; then
	log "replaying $replay ($fuzz_target)"
	exec "$fuzzer" --fuzz-target="$fuzz_target" "$replay"
fi
log "fuzzing pfnic ($fuzz_target) for ${seconds}s (log and any crashing input in $run_dir)"
rc=0
(cd "$run_dir" && "$fuzzer" --fuzz-target="$fuzz_target" -max_total_time="$seconds" \
	-timeout=30 -rss_limit_mb=4096 -print_final_stats=1 "${fuzz_opts[@]}" "$corpus") >"$run_dir/fuzz.log" 2>&1 || rc=$?
grep -E '^(stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb)' "$run_dir/fuzz.log" || true
grep -E '^#[0-9]+.*(DONE|cov:)' "$run_dir/fuzz.log" | tail -1 || true
if ((rc != 0)); then
	grep -m20 -E 'ERROR|SUMMARY|pfnic-fuzz:|crash-|timeout-|leak-' "$run_dir/fuzz.log" >&2 || true
	die "the fuzzer found a problem (exit $rc): see $run_dir"
fi
log "no crash in ${seconds}s; corpus: $(find "$corpus" -type f | wc -l) inputs"
