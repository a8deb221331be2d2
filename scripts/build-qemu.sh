#!/usr/bin/env bash
# Build qemu-system-x86_64 with the pfnic device, and pfnic's qtest.
# The QEMU source in the cache is reset to its pristine import plus
# qemu-device/patches/ whenever the series changes; the device and its
# qtest are linked in from qemu-device/ so edits rebuild incrementally.
# usage: scripts/build-qemu.sh
source "$(dirname "$0")/lib.sh"
take_lock qemu

[[ -e $QEMU_PRISTINE/configure ]] || die "no QEMU source in $QEMU_PRISTINE; run scripts/fetch-sources.sh"
need ninja "Run scripts/setup-host.sh (package ninja-build)."
need meson "Run scripts/setup-host.sh (it installs meson $MESON_VERSION)."

source "$PFNIC_ROOT/scripts/patch-tree.sh"
qemu_tree

# Only what the guests need: one target, TCG (+ KVM where it works), slirp,
# and of the devices only the ones they use (qemu-device/configs/devices/
# x86_64-softmmu/pfnic.mak). No debug information unless asked for
# (PFNIC_QEMU_DEBUG_INFO=1, for gdb): -g is a sixth of the compiler's time.
debug_info=--disable-debug-info
[[ ${PFNIC_QEMU_DEBUG_INFO:-0} == 1 ]] && debug_info=--enable-debug-info
qemu_configure "$QEMU_BUILD" \
	--target-list=x86_64-softmmu --without-default-features \
	--enable-tcg --enable-kvm --enable-slirp --disable-docs --disable-werror \
	--disable-install-blobs --disable-download --disable-rust "$debug_info" \
	--without-default-devices --with-devices-x86_64=pfnic

log "building QEMU (ninja -j$PFNIC_JOBS; 3-8 minutes cold)"
ninja -C "$QEMU_BUILD" -j"$PFNIC_JOBS" qemu-system-x86_64 $(printf "tests/qtest/%s " "${QTESTS[@]}") >"$QEMU_BUILD/ninja.log" 2>&1 ||
	{ grep -B2 -A12 -m3 "error\|FAILED" "$QEMU_BUILD/ninja.log" >&2; die "QEMU build failed; see $QEMU_BUILD/ninja.log"; }
log "QEMU ready: $QEMU_BIN"
