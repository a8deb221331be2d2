#!/usr/bin/env bash
# Install what the host needs to build and boot pfnic: Debian packages,
# meson (pip, in a venv in the cache) and bindgen-cli (cargo, in the cache).
# Idempotent: each step checks before it installs.
# usage: scripts/setup-host.sh [packages|tools]
#   packages   only the Debian packages (what fetching the sources needs)
#   tools      only meson and bindgen-cli (scripts/build-all.sh builds them
#              while the sources download)
source "$(dirname "$0")/lib.sh"

part=${1:-all}
case $part in
all | packages | tools) ;;
*) die "usage: scripts/setup-host.sh [packages|tools]" ;;
esac

HOST_PACKAGES=(
	# kernel + Rust (lz4 compresses the bzImage)
	build-essential flex bison bc libelf-dev libssl-dev cpio kmod lz4
	clang-19 lld-19 llvm-19 libclang-19-dev
	# QEMU
	ninja-build pkg-config libglib2.0-dev libpixman-1-dev libslirp-dev
	libfdt-dev python3-venv dpkg-dev seabios qemu-system-data ipxe-qemu
	# guest userland, source unpacking; socat reaches the second guest's
	# console (scripts/run-pair.sh)
	busybox-static xz-utils ca-certificates socat
)

[[ $part == tools ]] || apt_install "${HOST_PACKAGES[@]}"
[[ $part != packages ]] || exit 0

need rustc "Install Rust with rustup (the kernel needs rustc >= 1.78)."
need cargo "Install Rust with rustup."

mkdir -p "$TOOLS_DIR"
if [[ ! -x $TOOLS_DIR/venv/bin/meson ]] ||
	[[ $("$TOOLS_DIR/venv/bin/meson" --version) != "$MESON_VERSION" ]]; then
	log "installing meson $MESON_VERSION into $TOOLS_DIR/venv"
	python3 -m venv "$TOOLS_DIR/venv" || die "python3 -m venv failed (install python3-venv)"
	"$TOOLS_DIR/venv/bin/pip" install -q "meson==$MESON_VERSION" pycotap==1.3.1 ||
		die "pip could not install meson (is PyPI reachable?)"
fi

if [[ ! -x $TOOLS_DIR/bin/bindgen ]] ||
	! "$TOOLS_DIR/bin/bindgen" --version | grep -q " $BINDGEN_VERSION\$"; then
	log "building bindgen-cli $BINDGEN_VERSION (1-3 minutes)"
	# At opt-level 1: it builds in 60 s instead of 78 (109 CPU-s instead of
	# 146) on a fresh machine's critical path, and generates the kernel's
	# bindings as fast (7.6 s against 7.3 s).
	CARGO_PROFILE_RELEASE_OPT_LEVEL=1 \
		cargo install -q --locked --root "$TOOLS_DIR" bindgen-cli --version "$BINDGEN_VERSION" ||
		die "cargo install bindgen-cli failed (is crates.io reachable?)"
fi

for c in clippy-driver rustfmt; do
	command -v $c >/dev/null || log "warning: $c not found; 'make check' needs it (rustup component add ${c%-driver})"
done
log "host ready"
