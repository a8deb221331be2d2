#!/usr/bin/env bash
# Everything from a fresh machine to a bootable guest, each step incremental.
# usage: scripts/build-all.sh
source "$(dirname "$0")/lib.sh"
for step in setup-host fetch-sources build-kernel build-qemu build-module build-userspace build-perftest build-rdma-examples build-rootfs build-debian-layer; do
	"$PFNIC_ROOT/scripts/$step.sh"
done
