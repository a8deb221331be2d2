#!/usr/bin/env bash
# Build the userspace workspace (tests, tools, libibverbs.a) as static binaries for the guest,
# then the C examples against userspace/include and libibverbs.a, as an ordinary libibverbs
# program is built.
# usage: scripts/build-userspace.sh
source "$(dirname "$0")/lib.sh"
take_lock userspace

need cargo "Install Rust with rustup."
need cc "Install gcc (package build-essential)."
log "building userspace (cargo, static)"
(cd "$PFNIC_ROOT/userspace" && CARGO_TARGET_DIR=$BUILD_DIR/userspace cargo build --release --locked -q) ||
	die "cargo build of userspace/ failed"
# The host-side unit tests (scripts/test.sh runs them): pfnic-perf's perftest exchange.
(cd "$PFNIC_ROOT/userspace" && CARGO_TARGET_DIR=$BUILD_DIR/userspace cargo test --release --locked -q \
	--no-run -p pfnic-perf) || die "cargo test --no-run of pfnic-perf failed"

# C examples: compiled with warnings as errors, linked statically with -libverbs. glibc's
# link-time notes about NSS functions in static programs (Rust's std references
# getaddrinfo and getpwuid_r; the examples never call them) are silenced with the linker's
# warnings.
out=$BUILD_DIR/userspace/x86_64-unknown-linux-gnu/release
include=$PFNIC_ROOT/userspace/include
for ex in rc_pingpong:pfnic-rc-pingpong verbs_api:pfnic-verbs-api-test; do
	src=$PFNIC_ROOT/userspace/examples/${ex%%:*}.c bin=$out/${ex##*:}
	stamp_fresh "$bin" "$src" "$out/libibverbs.a" "$include" && continue
	log "building $(basename "$bin") (cc, static, -libverbs)"
	cc -std=gnu11 -O2 -Wall -Wextra -Werror -static -I "$include" -o "$bin.tmp" "$src" \
		-L "$out" -libverbs -Wl,--gc-sections -Wl,--no-warnings ||
		die "cannot build $src against libibverbs.a"
	mv "$bin.tmp" "$bin"
done
