#!/usr/bin/env bash
# Build the pfnic kernel module against the project's kernel, out of tree,
# with objects in the cache (kbuild's MO=), so the checkout stays clean.
# usage: scripts/build-module.sh [extra kbuild args, e.g. CLIPPY=1]
source "$(dirname "$0")/lib.sh"
take_lock module

[[ -e $KERNEL_BUILD/Module.symvers ]] || die "the kernel is not built; run scripts/build-kernel.sh"
mkdir -p "$MODULE_BUILD"
log "building pfnic.ko $*"
kmake -s M="$PFNIC_ROOT" MO="$MODULE_BUILD" "$@" modules
[[ -e $MODULE_BUILD/drivers/pfnic/pfnic.ko ]] || die "pfnic.ko was not produced"
log "module ready: $MODULE_BUILD/drivers/pfnic/pfnic.ko"
