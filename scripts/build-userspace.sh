#!/usr/bin/env bash
# Build the userspace workspace (tests, tools) as static binaries for the guest.
# usage: scripts/build-userspace.sh
source "$(dirname "$0")/lib.sh"
take_lock userspace

need cargo "Install Rust with rustup."
log "building userspace (cargo, static)"
(cd "$PFNIC_ROOT/userspace" && CARGO_TARGET_DIR=$BUILD_DIR/userspace cargo build --release --locked -q) ||
	die "cargo build of userspace/ failed"
