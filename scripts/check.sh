#!/usr/bin/env bash
# Static checks: rustfmt and clippy for the module and userspace, QEMU's
# checkpatch for the device code and its patches, the kernel's checkpatch
# for the kernel patch series, the versions the docs and comments state
# against the code's, and the relative links of the README and docs/.
# Fails on any finding.
# usage: scripts/check.sh
source "$(dirname "$0")/lib.sh"

fail=0
step() { log "check: $*"; }
bad() { log "check FAILED: $*"; fail=1; }

# The checkpatch runs are single-threaded perl (about 25 s): they run in the
# background beside rustfmt and clippy (clippy keeps both cores busy only in
# stretches), and report when those are done.
out_dir=$(mktemp -d)
trap 'rm -rf "$out_dir"' EXIT

qemu_checkpatch() {
	local fail=0
	# Checked where they sit in QEMU's tree (hw/net/pfnic; tests/qtest and its
	# libqos/ and fuzz/), since checkpatch's rules depend on the path (tests may
	# use g_assert_cmp*, ...). The tree links them from this checkout, as the
	# builds do (a tree last built from another checkout links that one's).
	source "$PFNIC_ROOT/scripts/patch-tree.sh"
	qemu_link_device
	mapfile -t qemu_tests < <(cd "$PFNIC_ROOT/qemu-device/tests" && find . -name '*.[ch]' | sed 's|^\./|tests/qtest/|' | sort)
	for f in hw/net/pfnic/*.[ch] "${qemu_tests[@]}"; do
		(cd "$QEMU_PRISTINE" && for g in $f; do
			[[ -e $g ]] || { echo "$g: no such file in $QEMU_PRISTINE"; exit 1; }
			perl scripts/checkpatch.pl -q -f "$g" || exit 1
		done) || bad "QEMU checkpatch: $f"
	done
	for p in "$PFNIC_ROOT"/qemu-device/patches/*.patch; do
		(cd "$QEMU_PRISTINE" && perl scripts/checkpatch.pl -q "$p") || bad "checkpatch: ${p#"$PFNIC_ROOT"/}"
	done
	return "$fail"
}

kernel_checkpatch() {
	local fail=0
	for p in "$PFNIC_ROOT"/kernel/patches/*.patch; do
		[[ -e $p ]] || continue
		# On stdin: given a path git tracks, checkpatch checks it as a source file.
		# New files sit in directories MAINTAINERS already covers (rust/kernel/iommu/).
		# The tree is Debian's tarball, without upstream's history: checkpatch
		# cannot look up the commits that Fixes: tags name.
		perl "$KERNEL_SRC/scripts/checkpatch.pl" --no-tree -q --ignore FILE_PATH_CHANGES,UNKNOWN_COMMIT_ID - <"$p" ||
			bad "checkpatch: ${p#"$PFNIC_ROOT"/}"
	done
	return "$fail"
}

qemu_checkpatch >"$out_dir/qemu" 2>&1 &
qemu_pid=$!
kernel_checkpatch >"$out_dir/kernel" 2>&1 &
kernel_pid=$!

step "rustfmt (module, kernel style)"
rustfmt --check --edition 2021 --config-path "$KERNEL_SRC/.rustfmt.toml" \
	"$PFNIC_ROOT"/drivers/pfnic/*.rs || bad "rustfmt: run scripts/format.sh"

step "rustfmt (userspace)"
(cd "$PFNIC_ROOT/userspace" && cargo fmt --all --check) || bad "cargo fmt: run scripts/format.sh"

step "clippy (module, CLIPPY=1)"
clippy_out=$BUILD_DIR/module-clippy
rm -rf "$clippy_out" && mkdir -p "$clippy_out"
if ! out=$(kmake M="$PFNIC_ROOT" MO="$clippy_out" CLIPPY=1 modules 2>&1); then
	echo "$out"
	bad "module build with CLIPPY=1"
elif grep -q "warning:" <<<"$out"; then
	echo "$out"
	bad "clippy warnings in the module"
fi

step "clippy (userspace)"
# In the build's own target directory (make check follows make all): its build scripts'
# outputs and proc macros serve clippy too.
cargo_checkout "$BUILD_DIR/userspace-dyn"
cargo_dyn clippy --release --locked -q --all-targets -- -D warnings || bad "clippy in userspace/"

step "QEMU checkpatch (device sources and patches)"
wait "$qemu_pid" || fail=1
cat "$out_dir/qemu"

step "kernel checkpatch (kernel/patches)"
wait "$kernel_pid" || fail=1
cat "$out_dir/kernel"

step "device ABI and uAPI versions in docs and comments"
python3 "$PFNIC_ROOT/scripts/check-versions.py" "$PFNIC_ROOT" || bad "a stale version (above)"

step "relative links of the README and docs/"
python3 "$PFNIC_ROOT/scripts/check-links.py" "$PFNIC_ROOT" || bad "a link that leads nowhere (above)"

((fail == 0)) || die "static checks failed"
log "static checks passed"
