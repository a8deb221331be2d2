#!/usr/bin/env bash
# Everything from a fresh machine to a bootable guest, each step incremental.
# The host's packages come first; then meson and bindgen-cli build while the
# sources download and the kernel's patch series applies (the kernel is the
# longest chain, and its import into git and the series take 40-50 s); then
# four independent chains run side by side: the kernel and the module, QEMU,
# the userspace programs and what is built against them, fio and the Debian
# layer. Each compile has serial stretches (rustc on the kernel crate, the
# links, QEMU's configure, downloads) in which one of the two cores would
# idle; side by side they keep both busy. The guest's initramfs comes last.
# Each step says how long it took.
#
# usage: scripts/build-all.sh
# Environment: PFNIC_BUILD_SERIAL=1 runs the steps one after another (a
# readable log, or one step's time alone).
source "$(dirname "$0")/lib.sh"

# step NAME[:ARG]: run scripts/NAME.sh [ARG] and say how long it took.
step() {
	local t=$SECONDS name=${1%%:*} arg=()
	[[ $1 == *:* ]] && arg=("${1#*:}")
	"$PFNIC_ROOT/scripts/$name.sh" "${arg[@]}" || return
	log "step $1: $((SECONDS - t)) s"
}
# chain 'STEP...': the steps one after another, stopping at the first that
# fails.
chain() {
	local s
	for s in $1; do
		step "$s" || return
	done
}
# side_by_side 'STEP...' ...: the chains at once (or one after another with
# PFNIC_BUILD_SERIAL=1); fails, once all have ended, if any failed.
side_by_side() {
	local chains=("$@") pids=() failed=() i
	for i in "${!chains[@]}"; do
		if [[ ${PFNIC_BUILD_SERIAL:-0} == 1 ]]; then
			chain "${chains[i]}" || failed+=("${chains[i]}")
		else
			chain "${chains[i]}" &
			pids[i]=$!
		fi
	done
	for i in "${!pids[@]}"; do
		wait "${pids[i]}" || failed+=("${chains[i]}")
	done
	((${#failed[@]} == 0)) || die "the build failed in: ${failed[*]} (see above)"
}

start=$SECONDS
# What older builds left in the cache and no build uses now: make check's own cargo
# target directory and the C examples' old place, the provider's own cargo target
# directory, the retired libibverbs' layer list, gzipped archives.
rm -rf "$BUILD_DIR/userspace" "$BUILD_DIR/rdma-provider-cargo" "$ROOTFS_BUILD/libibverbs.list" \
	"$ROOTFS_BUILD"/*.cpio.gz "$DEBIAN_LAYER.gz"
step setup-host:packages
side_by_side "setup-host:tools" "fetch-sources build-kernel:--tree"
side_by_side "build-kernel build-module" "build-qemu" \
	"build-userspace build-rdma-examples build-provider" "build-fio build-debian-layer"
step build-rootfs
log "built in $((SECONDS - start)) s"
