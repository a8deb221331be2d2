#!/usr/bin/env bash
# Remove pfnic's build trees (kernel, QEMU, module, userspace, rootfs) but
# keep the downloaded sources and host tools, so the next build is a rebuild,
# not a re-download. `rm -rf $PFNIC_CACHE` removes everything.
# usage: scripts/clean.sh
source "$(dirname "$0")/lib.sh"
log "removing $BUILD_DIR"
rm -rf "$BUILD_DIR"
