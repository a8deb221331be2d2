#!/usr/bin/env bash
# Build the userspace workspace (tests, tools, libibverbs.a) as static binaries for the guest,
# then the C examples against userspace/include and libibverbs.a, as an ordinary libibverbs
# program is built, and libibverbs.so.1: the same library as rdma-core's soname and symbol
# versions, which Debian's own binaries load in the guest.
#
# rdma-core's headers and library (Debian's libibverbs-dev and libibverbs1) are unpacked
# into the cache: the library's layout check compiles against the headers
# (PFNIC_RDMA_CORE_INCLUDE), and every symbol libibverbs.so.1 exports is checked to exist,
# with the same version, in Debian's libibverbs.so.1.
# usage: scripts/build-userspace.sh
source "$(dirname "$0")/lib.sh"
take_lock userspace

need cargo "Install Rust with rustup."
need cc "Install gcc (package build-essential)."
need objdump "Run scripts/setup-host.sh (package binutils, in build-essential)."

# --- rdma-core's headers and library (Debian bookworm's rdma-core 44) --------
rdma_core=$BUILD_DIR/rdma-core
rdma_core_debs=(libibverbs-dev libibverbs1 libnl-3-200 libnl-route-3-200)
debian_download "$DEBIAN_DEBS" "${rdma_core_debs[@]}"
if ! stamp_fresh "$rdma_core/.unpacked" "$DEBIAN_DEBS" "$0"; then
	rm -rf "$rdma_core"
	debian_unpack "$DEBIAN_DEBS" "$rdma_core" "${rdma_core_debs[@]}"
	touch "$rdma_core/.unpacked"
fi
export PFNIC_RDMA_CORE_INCLUDE=$rdma_core/usr/include

log "building userspace (cargo, static)"
cargo_checkout "$BUILD_DIR/userspace"
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

# libibverbs.so.1: the static library's verbs, linked as a shared library under rdma-core's
# soname and version nodes (libibverbs.map), with libgcc linked in so that it needs only
# glibc. -u pulls in the exported functions; the version script hides everything else.
map=$PFNIC_ROOT/userspace/pfnic-ibverbs/libibverbs.map
so=$out/libibverbs.so.1
if ! stamp_fresh "$so" "$out/libibverbs.a" "$map" "$PFNIC_ROOT/userspace/pfnic-ibverbs/tests"; then
	log "linking libibverbs.so.1"
	mapfile -t syms < <(sed -n 's/^\t\t\([a-z_][a-z0-9_]*\);$/\1/p' "$map")
	cc -shared -s -static-libgcc -o "$so.tmp" -Wl,-soname,libibverbs.so.1 -Wl,--version-script="$map" \
		"${syms[@]/#/-Wl,-u,}" "$out/libibverbs.a" -Wl,--gc-sections -Wl,-z,defs ||
		die "cannot link libibverbs.so.1"
	# Each exported symbol, with its version, must be rdma-core's.
	# The functions under libibverbs' version nodes (not the nodes' own symbols).
	exported() { objdump -T "$1" | awk 'NF > 2 && $(NF-1) ~ /^IBVERBS_/ && $NF !~ /^IBVERBS_/ {print $(NF-1), $NF}' | sort; }
	theirs=$(exported "$rdma_core/usr/lib/x86_64-linux-gnu/libibverbs.so.1")
	ours=$(exported "$so.tmp")
	[[ $(wc -l <<<"$ours") -eq ${#syms[@]} ]] ||
		die "libibverbs.so.1 exports $(wc -l <<<"$ours") of the ${#syms[@]} symbols in $map"
	stray=$(comm -23 <(echo "$ours") <(echo "$theirs"))
	[[ -z $stray ]] || die "libibverbs.so.1 exports what rdma-core does not (version, symbol): $stray"
	# Its pure functions (rate conversions, descriptions) must answer as rdma-core's.
	cmp=$out/compare-rdma-core
	cc -std=gnu11 -O2 -Wall -Werror -o "$cmp" "$PFNIC_ROOT/userspace/pfnic-ibverbs/tests/compare_rdma_core.c" -ldl ||
		die "cannot build the rdma-core comparison"
	libdirs=$rdma_core/usr/lib/x86_64-linux-gnu:$rdma_core/lib/x86_64-linux-gnu
	LD_LIBRARY_PATH=$libdirs "$cmp" "$so.tmp" "$rdma_core/usr/lib/x86_64-linux-gnu/libibverbs.so.1" ||
		die "libibverbs.so.1 answers differently from rdma-core's (above)"
	mv "$so.tmp" "$so"
fi

# The same C examples built as rdma-core's users build them: against rdma-core's headers,
# linked with rdma-core's libibverbs.so.1 (so their symbol versions are rdma-core's), with
# rdma-core's inline verbs. In the guest they load pfnic's libibverbs.so.1 instead.
for ex in rc_pingpong:pfnic-rc-pingpong-rdma-core verbs_api:pfnic-verbs-api-test-rdma-core \
	cold_bench:pfnic-cold-bench; do
	src=$PFNIC_ROOT/userspace/examples/${ex%%:*}.c bin=$out/${ex##*:}
	stamp_fresh "$bin" "$src" "$rdma_core/.unpacked" && continue
	log "building $(basename "$bin") (cc, rdma-core's headers and libibverbs.so.1)"
	cc -std=gnu11 -O2 -Wall -Wextra -Werror -I "$rdma_core/usr/include" -o "$bin.tmp" "$src" \
		-L "$rdma_core/usr/lib/x86_64-linux-gnu" -l:libibverbs.so.1 -Wl,--allow-shlib-undefined ||
		die "cannot build $src against rdma-core's headers"
	mv "$bin.tmp" "$bin"
done
