# shellcheck shell=bash
# Common settings for pfnic's scripts: where the cache is, versions, helpers.
# Sourced, never run. Every path the scripts use is derived here.

set -euo pipefail

PFNIC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PFNIC_CACHE=${PFNIC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pfnic}
PFNIC_JOBS=${PFNIC_JOBS:-$(($(nproc) + 1))}

# Pinned versions (see ../shared/docs/ENVIRONMENT.md for why these).
KERNEL_SERIES=7.3
QEMU_DEB_VERSION=1:10.2.2+ds-1
# rdma-core's source: the tree pfnic's provider is built in
# (scripts/build-provider.sh) and its libibverbs examples
# (scripts/build-rdma-examples.sh): trixie's rdma-core.
RDMA_CORE_DEB_VERSION=56.1-1
# fio's source (bookworm's), built static for the guests (scripts/build-fio.sh).
FIO_DEB_VERSION=3.33-3
QEMU_VERSION=10.2.2
BINDGEN_VERSION=0.71.1
MESON_VERSION=1.9.0
LLVM_SUFFIX=-19

SRC_DIR=$PFNIC_CACHE/src
BUILD_DIR=$PFNIC_CACHE/build
TOOLS_DIR=$PFNIC_CACHE/tools
APT_DIR=$PFNIC_CACHE/apt
# The key the private apt indexes check Debian's archive against (fetch-sources.sh,
# setup-host.sh's bindgen-cli).
DEBIAN_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

# PFNIC_FLAVOR=debug builds and boots the debug kernel (kernel/debug.config on
# top of kernel/pfnic.config) with its own module and initramfs, beside the
# ordinary ones: make test-debug. PFNIC_FLAVOR=trace does the same with
# kernel/trace.config (tracepoints in tracefs): make trace.
PFNIC_FLAVOR=${PFNIC_FLAVOR:-}
case $PFNIC_FLAVOR in
'') FLAVOR_SUFFIX= ;;
debug | trace) FLAVOR_SUFFIX=-$PFNIC_FLAVOR ;;
*) printf '[pfnic] error: PFNIC_FLAVOR=%s: only "debug" and "trace" exist\n' "$PFNIC_FLAVOR" >&2; exit 1 ;;
esac
KERNEL_FRAGMENTS=("$PFNIC_ROOT/kernel/pfnic.config")
if [[ -n $PFNIC_FLAVOR ]]; then
	KERNEL_FRAGMENTS+=("$PFNIC_ROOT/kernel/$PFNIC_FLAVOR.config")
fi
# The kernel's C compiler: GCC, which builds this configuration with a third
# less CPU than clang 19 on the 2-core machines (864 against 1337 CPU-seconds
# alone, docs/build-times.md); the Rust side is rustc either way. The debug
# flavor is built by clang (LLVM=-19): Rust and KASAN go together only in a
# kernel clang builds (init/Kconfig: RUST depends on !KASAN || CC_IS_CLANG).
if [[ $PFNIC_FLAVOR == debug ]]; then
	KERNEL_LLVM=$LLVM_SUFFIX
	KERNEL_CC=clang$LLVM_SUFFIX
else
	KERNEL_LLVM=
	KERNEL_CC=gcc
fi

KERNEL_SRC=$SRC_DIR/linux-$KERNEL_SERIES
KERNEL_BUILD=$BUILD_DIR/linux$FLAVOR_SUFFIX
QEMU_PRISTINE=$SRC_DIR/qemu-$QEMU_VERSION
QEMU_SRC=$BUILD_DIR/qemu-src
QEMU_BUILD=$BUILD_DIR/qemu
QEMU_BIN=$QEMU_BUILD/qemu-system-x86_64
RDMA_CORE_SRC=$SRC_DIR/rdma-core-${RDMA_CORE_DEB_VERSION%-*}
RDMA_EXAMPLES_BUILD=$BUILD_DIR/rdma-core-examples
# pfnic's C examples (userspace/examples), built against rdma-core's headers.
C_EXAMPLES_BUILD=$BUILD_DIR/c-examples
FIO_SRC=$SRC_DIR/fio-${FIO_DEB_VERSION%-*}
FIO_BUILD=$BUILD_DIR/fio
# The qtests make test runs: the device's, and intel-iommu's (our svm patch).
QTESTS=(pfnic-test intel-iommu-test)
# Firmware: Debian's +ds QEMU source ships no ROMs; these packages do.
QEMU_FIRMWARE_ARGS=(-L /usr/share/seabios -L /usr/share/qemu -L /usr/lib/ipxe/qemu)
MODULE_BUILD=$BUILD_DIR/module$FLAVOR_SUFFIX
ROOTFS_BUILD=$BUILD_DIR/rootfs$FLAVOR_SUFFIX
# The guest's archives are not compressed: a guest unpacks them at every boot,
# and under TCG gunzip took 2.3-2.8 s of a boot's 4.2-4.8 s (plain: 1.3 s of
# 3.6 s), some twenty boots in make test.
INITRAMFS=$ROOTFS_BUILD/initramfs.cpio
# Debian bookworm's rdma-core/perftest/iproute2 binaries and their libraries,
# an initramfs archive appended for the two-guest harness (flavor-independent).
DEBIAN_LAYER=$BUILD_DIR/debian-layer/debian.cpio
# pfnic's rdma-core provider and the programs that need Debian's libraries
# (pfnic's C examples, rdma-core's, the provider's check), appended after the
# Debian layer in a pfnic guest.
PROVIDER_LAYER=$ROOTFS_BUILD/provider.cpio
RUST_SRC_ROOT=$SRC_DIR/rust-src
LOG_DIR=${PFNIC_LOG_DIR:-$PFNIC_CACHE/logs}

export PATH="$TOOLS_DIR/bin:$TOOLS_DIR/venv/bin:$PATH"
export LIBCLANG_PATH=${LIBCLANG_PATH:-/usr/lib/llvm$LLVM_SUFFIX/lib}

log() { printf '[pfnic] %s\n' "$*" >&2; }
die() { printf '[pfnic] error: %s\n' "$*" >&2; exit 1; }
# guest_words WORD...: dies unless every WORD is safe to pass through the
# guest's sh unquoted (the pfnic-perf options of bench, profile and trace).
guest_words() {
	local w
	for w; do
		[[ $w =~ ^[A-Za-z0-9_=.,-]+$ ]] || die "unsupported character in pfnic-perf option '$w'"
	done
}

# need CMD HINT: fail with a fix-it message when a command is missing.
need() {
	command -v "$1" >/dev/null 2>&1 || die "'$1' not found. $2"
}

# Run apt-get with the project's private source list (trixie-backports for
# the kernel and rust-src, sid deb-src for QEMU, trixie deb-src
# for rdma-core) without touching the host's own apt configuration.
private_apt() {
	apt-get -o Dir::Etc::SourceList="$APT_DIR/sources.list" \
		-o Dir::Etc::SourceParts=/dev/null \
		-o Dir::State::Lists="$APT_DIR/lists" \
		-o Dir::Cache::Archives="$APT_DIR/archives" \
		-o Debug::NoLocking=1 \
		-o APT::Sandbox::User=root \
		"$@"
}

# rustc's upstream version, e.g. 1.95.0: the rust-src we fetch must match.
rustc_version() {
	rustc --version | awk '{print $2}'
}

rust_lib_src() {
	echo "$RUST_SRC_ROOT/$(rustc_version)/usr/lib/rustlib/src/rust/library"
}

# Kernel make invocation shared by every script that builds against it.
kmake() {
	make -C "$KERNEL_SRC" O="$KERNEL_BUILD" ${KERNEL_LLVM:+LLVM="$KERNEL_LLVM"} \
		RUST_LIB_SRC="$(rust_lib_src)" "$@"
}

# cargo_checkout TARGET_DIR: make cargo see this checkout's driver uAPI in
# TARGET_DIR. pfnic-sys compiles drivers/pfnic/uapi.rs, outside the cargo
# workspace, and cargo records such a file by its absolute path: built last
# from another checkout, cargo would compare that one's times and keep a
# pfnic-sys with another uAPI. A change of checkout drops pfnic-sys's
# fingerprint in TARGET_DIR, so that it is compiled again there (and
# records this checkout's file). (Touching its source instead would make
# it newer than what the other target directories had built from this
# checkout: each would compile it again at its next build.)
cargo_checkout() {
	local mark=$1/.pfnic-checkout
	mkdir -p "$1"
	if [[ $(cat "$mark" 2>/dev/null) != "$PFNIC_ROOT" ]]; then
		find "$1" -path '*/.fingerprint/pfnic-sys-*' -prune -exec rm -rf {} +
		echo "$PFNIC_ROOT" >"$mark"
	fi
}

# ibv_sys_bindings RDMA_CORE: the ibv crate's bindings (userspace/ibv) of the
# <infiniband/verbs.h> unpacked under RDMA_CORE (Debian's libibverbs-dev) in
# $IBV_SYS: bindgen's bindings.rs, and libibv_static_fns.a with the header's
# static inline functions made callable (bindgen's --wrap-static-fns).
IBV_SYS=$BUILD_DIR/ibv-sys
ibv_sys_bindings() {
	local inc=$1/usr/include
	stamp_fresh "$IBV_SYS/.built" "$1/.unpacked" "${BASH_SOURCE[0]}" && return 0
	need bindgen "Run scripts/setup-host.sh tools (bindgen-cli in the cache)."
	log "generating the ibv crate's bindings of rdma-core's verbs.h (bindgen)"
	rm -rf "$IBV_SYS" && mkdir -p "$IBV_SYS"
	# ___ibv_query_port is what verbs.h's ibv_query_port() macro calls.
	bindgen "$inc/infiniband/verbs.h" --allowlist-function 'ibv_.*|___ibv_query_port' \
		--allowlist-type 'ibv_.*' --allowlist-var 'IBV_.*' --no-layout-tests \
		--wrap-static-fns --wrap-static-fns-path "$IBV_SYS/static_fns.c" \
		-o "$IBV_SYS/bindings.rs" -- -I "$inc" ||
		die "bindgen of $inc/infiniband/verbs.h failed"
	cc -O2 -fPIC -Wall -Werror -I "$inc" -c -o "$IBV_SYS/static_fns.o" "$IBV_SYS/static_fns.c" ||
		die "cannot compile bindgen's static_fns.c"
	ar rcs "$IBV_SYS/libibv_static_fns.a" "$IBV_SYS/static_fns.o" || die "ar failed"
	touch "$IBV_SYS/.built"
}

# cargo_dyn ARG...: cargo in userspace/ for what links rdma-core's
# libibverbs.so.1 (the guest suite, pfnic-perf): dynamically linked against the
# library Debian's libibverbs1 has (unpacked under $BUILD_DIR/rdma-core by
# scripts/build-userspace.sh, which the guests load as their own), in a target
# directory of its own so that the static build of the other programs is not
# rebuilt each time. Host tests of these crates run with that library too.
cargo_dyn() {
	local lib=$BUILD_DIR/rdma-core/usr/lib/x86_64-linux-gnu
	(cd "$PFNIC_ROOT/userspace" && CARGO_TARGET_DIR=$BUILD_DIR/userspace-dyn \
		RUSTFLAGS="-C target-feature=-crt-static" PFNIC_IBV_SYS=$IBV_SYS PFNIC_IBVERBS_LIB=$lib \
		PFNIC_RDMA_CORE_INCLUDE=$BUILD_DIR/rdma-core/usr/include \
		LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} cargo "$@")
}

# stamp NAME INPUT...: succeed when the stamp is newer than every input file.
stamp_fresh() {
	local stamp=$1
	shift
	[[ -e $stamp ]] || return 1
	[[ -z $(find "$@" -newer "$stamp" -print -quit 2>/dev/null) ]]
}

# apt_install PACKAGE...: install the Debian packages that are not installed yet.
apt_install() {
	local p missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
			missing+=("$p")
	done
	((${#missing[@]})) || return 0
	((EUID == 0)) || die "missing Debian packages: ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}"
	log "installing Debian packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y --no-install-recommends "${missing[@]}" ||
		{ apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"; } ||
		die "apt-get install failed for: ${missing[*]} (is Debian's archive reachable?)"
}

# debian_lock DIR MODE COMMAND...: COMMAND holding DIR's lock, exclusive
# (MODE -x) or shared (-s). Builds run side by side (scripts/build-all.sh)
# and fetch some of the same packages: a .deb another build is writing is
# missing or torn for a reader, so downloads take the lock alone and
# unpacking shares it. Appending opens the lock file without changing its
# time, which the steps' freshness checks look at.
debian_lock() {
	local dir=$1 mode=$2
	shift 2
	mkdir -p "$dir"
	(
		flock "$mode" 9
		"$@"
	) 9>>"$dir/.lock"
}

# debian_download DIR PACKAGE...: the .deb of each package not in DIR yet,
# from the host's apt (Debian bookworm), into DIR; updates the host's package
# lists once if a download fails (a new machine has none).
debian_download() {
	debian_lock "$1" -x debian_download_locked "$@"
}

debian_download_locked() {
	local dir=$1 p missing=()
	shift
	for p in "$@"; do
		compgen -G "$dir/${p}_*.deb" >/dev/null || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	log "downloading Debian packages: ${missing[*]}"
	local dl="cd '$dir' && apt-get -q -o APT::Sandbox::User=root download ${missing[*]}"
	if ! bash -c "$dl" >"$dir/download.log" 2>&1; then
		((EUID == 0)) || die "apt-get download failed (see $dir/download.log); run 'sudo apt-get update' and retry"
		log "apt-get download failed; updating the host's package lists"
		apt-get -q update >"$dir/update.log" 2>&1 || die "apt-get update failed; see $dir/update.log"
		bash -c "$dl" >"$dir/download.log" 2>&1 ||
			die "could not download ${missing[*]} from Debian; see $dir/download.log"
	fi
}

# debian_unpack DIR DEST PACKAGE...: dpkg -x each package's newest .deb in DIR
# into DEST.
debian_unpack() {
	debian_lock "$1" -s debian_unpack_locked "$@"
}

debian_unpack_locked() {
	local dir=$1 dest=$2 p deb
	shift 2
	mkdir -p "$dest"
	for p in "$@"; do
		deb=$(compgen -G "$dir/${p}_*.deb" | sort -V | tail -1) || true
		[[ -n $deb ]] || die "no $p package in $dir"
		dpkg -x "$deb" "$dest" || die "dpkg -x $deb failed"
	done
}

# The Debian packages' cache (bookworm, as the host).
DEBIAN_DEBS=$PFNIC_CACHE/debs/bookworm

# take_lock NAME: hold an exclusive lock on one part of the cache for the
# rest of this script, waiting if another pfnic build holds it (two builds
# writing one tree corrupt it).
take_lock() {
	mkdir -p "$PFNIC_CACHE/locks"
	exec {PFNIC_LOCK_FD}>"$PFNIC_CACHE/locks/$1"
	if ! flock -n "$PFNIC_LOCK_FD"; then
		log "waiting for another build of $1 in $PFNIC_CACHE"
		flock "$PFNIC_LOCK_FD"
	fi
}

# wire_guest_qemu_args DIR PROPS: the QEMU arguments of make test's wire
# guest beyond its first pfnic: two dgram netdevs joined through unix
# sockets in DIR (short: sun_path) and a second pfnic with PROPS on a second
# root port. The first pfnic gets ",netdev=w0,mac=52:54:00:00:00:01PROPS".
wire_guest_qemu_args() {
	local dir=$1 props=$2
	echo "-netdev dgram,id=w0,local.type=unix,local.path=$dir/a,remote.type=unix,remote.path=$dir/b
		-netdev dgram,id=w1,local.type=unix,local.path=$dir/b,remote.type=unix,remote.path=$dir/a
		-device pcie-root-port,id=rp1,chassis=2,slot=1
		-device pfnic,bus=rp1,netdev=w1,mac=52:54:00:00:00:02$props"
}
