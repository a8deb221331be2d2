#!/usr/bin/env bash
# Install what the host needs to build and boot pfnic: Debian packages,
# meson (pip, in a venv in the cache) and bindgen-cli (Debian trixie's, else
# cargo's, in the cache).
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

# bindgen-cli $BINDGEN_VERSION, the 7.3 kernel's minimum (bookworm has 0.60): Debian
# trixie's package. Its binary needs trixie's C library (GLIBC_2.39; bookworm has 2.36),
# so it runs under the loader and libc of trixie's libc6, both unpacked beside it into
# $TOOLS_DIR/bindgen; the host's own C library is untouched, and libclang is the host's
# (LIBCLANG_PATH). Fetched with an apt index of its own, beside fetch-sources.sh's.
# Where that cannot be had or does not run, cargo builds it: 60-110 s of both cores at
# the start of a fresh machine's build.
bindgen_ok() {
	[[ -x $TOOLS_DIR/bin/bindgen ]] &&
		"$TOOLS_DIR/bin/bindgen" --version 2>/dev/null | grep -q " $BINDGEN_VERSION\$"
}
bindgen_from_debian() {
	local apt=$TOOLS_DIR/apt dir=$TOOLS_DIR/bindgen tmp deb
	mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$TOOLS_DIR/bin"
	echo "deb [signed-by=$DEBIAN_KEYRING] http://deb.debian.org/debian trixie main" \
		>"$apt/sources.list"
	APT_DIR=$apt private_apt -q update >"$apt/update.log" 2>&1 || return 1
	tmp=$(mktemp -d "$TOOLS_DIR/.bindgen.XXXXXX")
	(cd "$tmp" && APT_DIR=$apt private_apt -q download bindgen libc6) >"$apt/download.log" 2>&1 ||
		{ rm -rf "$tmp"; return 1; }
	rm -rf "$dir" && mkdir -p "$dir"
	for deb in "$tmp"/*.deb; do
		dpkg -x "$deb" "$dir" || { rm -rf "$tmp"; return 1; }
	done
	rm -rf "$tmp"
	cat >"$TOOLS_DIR/bin/bindgen" <<WRAPPER
#!/bin/sh
# Debian trixie's bindgen-cli, under trixie's C library (scripts/setup-host.sh).
lib=$dir/usr/lib/x86_64-linux-gnu
exec "\$lib/ld-linux-x86-64.so.2" --library-path "\$lib" "$dir/usr/bin/bindgen" "\$@"
WRAPPER
	chmod +x "$TOOLS_DIR/bin/bindgen"
	bindgen_ok
}
if ! bindgen_ok; then
	log "installing bindgen-cli $BINDGEN_VERSION (Debian trixie's package)"
	if ! bindgen_from_debian; then
		log "Debian's bindgen-cli cannot be had or does not run here (see $TOOLS_DIR/apt); building it (1-3 minutes)"
		rm -f "$TOOLS_DIR/bin/bindgen"
		# At opt-level 1: it builds in 60 s instead of 78 (109 CPU-s instead of 146), and
		# generates the kernel's bindings as fast (7.6 s against 7.3 s).
		CARGO_PROFILE_RELEASE_OPT_LEVEL=1 \
			cargo install -q --locked --root "$TOOLS_DIR" bindgen-cli --version "$BINDGEN_VERSION" ||
			die "cargo install bindgen-cli failed (is crates.io reachable?)"
	fi
fi

for c in clippy-driver rustfmt; do
	command -v $c >/dev/null || log "warning: $c not found; 'make check' needs it (rustup component add ${c%-driver})"
done
log "host ready"
