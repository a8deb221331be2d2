#!/usr/bin/env bash
# Build the userspace workspace: the tools as static binaries for the guest, the guest
# suite linked with rdma-core's libibverbs.so.1 (Debian's in the guest), then the C
# examples as rdma-core's users build them: against rdma-core's headers,
# linked with rdma-core's libibverbs.so.1, which in the guest is Debian's own and reaches
# pfnic through pfnic's provider (scripts/build-provider.sh).
#
# rdma-core's headers and library (Debian's libibverbs-dev and libibverbs1) are unpacked
# into the cache: the C examples build against them, and the provider's layout check
# compiles against the headers (PFNIC_RDMA_CORE_INCLUDE).
# usage: scripts/build-userspace.sh
source "$(dirname "$0")/lib.sh"
take_lock userspace

need cargo "Install Rust with rustup."
need cc "Install gcc (package build-essential)."

# --- rdma-core's headers and library (Debian bookworm's rdma-core 44) --------
rdma_core=$BUILD_DIR/rdma-core
rdma_core_debs=(libibverbs-dev libibverbs1 libnl-3-200 libnl-route-3-200)
debian_download "$DEBIAN_DEBS" "${rdma_core_debs[@]}"
# Unpacked again when one of these packages changes; not when the cache's
# directory does (the Debian layer's downloads beside this build would
# regenerate the bindings and rebuild the ibv crate in the next build).
debs=()
for p in "${rdma_core_debs[@]}"; do
	debs+=("$DEBIAN_DEBS/${p}"_*.deb)
done
if ! stamp_fresh "$rdma_core/.unpacked" "${debs[@]}" "$0"; then
	rm -rf "$rdma_core"
	debian_unpack "$DEBIAN_DEBS" "$rdma_core" "${rdma_core_debs[@]}"
	touch "$rdma_core/.unpacked"
fi
export PFNIC_RDMA_CORE_INCLUDE=$rdma_core/usr/include

# --- the ibv crate's bindings of rdma-core's <infiniband/verbs.h> ------------
# bindgen's Rust declarations of the headers the guest suite is linked against,
# and a C file that makes their static inline functions (ibv_post_send,
# ibv_poll_cq, ...) callable, compiled into a static library (ibv_sys_bindings
# in scripts/lib.sh).
ibv_sys_bindings "$rdma_core"
export PFNIC_IBV_SYS=$IBV_SYS

# The guest suite and pfnic-perf drive the device through rdma-core's libibverbs.so.1,
# Debian's own in the guest (the Debian layer has it and the C library): dynamically linked
# (cargo_dyn in scripts/lib.sh). pfnic-info, the one program of the guests' base layer, which
# has no C library, is built in the same target directory, its dependencies shared, and
# linked static alone (cargo rustc, +crt-static for it only).
cargo_checkout "$BUILD_DIR/userspace-dyn"
log "building pfnic-info (cargo, static)"
cargo_dyn rustc --release --locked -q -p pfnic-tools --bin pfnic-info -- -C target-feature=+crt-static ||
	die "cargo build of pfnic-info failed"
log "building the guest suite and pfnic-perf (cargo, linked with libibverbs.so.1)"
cargo_dyn build --release --locked -q -p pfnic-tests -p pfnic-perf ||
	die "cargo build of pfnic-tests and pfnic-perf failed"
# The host-side unit tests (scripts/test.sh runs them): pfnic-perf's perftest exchange, the
# RDMA netlink messages, the uAPI's layouts.
cargo_dyn test --release --locked -q --no-run -p pfnic-perf -p rdma-nl -p pfnic-sys ||
	die "cargo test --no-run of pfnic-perf, rdma-nl and pfnic-sys failed"

# The C examples, with warnings as errors: against rdma-core's headers (with rdma-core's
# inline verbs), linked with rdma-core's libibverbs.so.1 (so their symbol versions are
# rdma-core's); its own libraries are the guest's.
out=$C_EXAMPLES_BUILD
mkdir -p "$out"
for ex in rc_pingpong:pfnic-rc-pingpong verbs_api:pfnic-verbs-api-test cold_bench:pfnic-cold-bench; do
	src=$PFNIC_ROOT/userspace/examples/${ex%%:*}.c bin=$out/${ex##*:}
	stamp_fresh "$bin" "$src" "$rdma_core/.unpacked" "$0" && continue
	log "building $(basename "$bin") (cc, rdma-core's headers and libibverbs.so.1)"
	cc -std=gnu11 -O2 -Wall -Wextra -Werror -I "$rdma_core/usr/include" -o "$bin.tmp" "$src" \
		-L "$rdma_core/usr/lib/x86_64-linux-gnu" -l:libibverbs.so.1 -Wl,--allow-shlib-undefined ||
		die "cannot build $src against rdma-core's headers"
	mv "$bin.tmp" "$bin"
done
