#!/usr/bin/env bash
# Fetch the sources pfnic builds, from Debian's archive, into $PFNIC_CACHE/src:
#   - Linux 7.3 (linux-source-7.3, trixie-backports)
#   - rust-src with the same upstream version as `rustc --version`
#   - QEMU 10.2.2 (source package, sid) with Debian's patches applied
#   - rdma-core 56.1 (source package, trixie): the tree pfnic's provider is
#     built in, and its libibverbs examples
#   - fio 3.33 (source package, bookworm): the guests' fio, built static
# Uses a private apt configuration so the host's sources stay bookworm-only.
# Idempotent: a source already unpacked is left alone.
# usage: scripts/fetch-sources.sh
source "$(dirname "$0")/lib.sh"
take_lock sources

need apt-get "pfnic needs a Debian host."
need dpkg-source "Run scripts/setup-host.sh (package dpkg-dev)."
mkdir -p "$SRC_DIR" "$APT_DIR/lists/partial" "$APT_DIR/archives/partial"

keyring=$DEBIAN_KEYRING
cat >"$APT_DIR/sources.list" <<EOS
deb [signed-by=$keyring] http://deb.debian.org/debian trixie-backports main
deb-src [signed-by=$keyring] http://deb.debian.org/debian sid main
deb-src [signed-by=$keyring] http://deb.debian.org/debian trixie main
deb-src [signed-by=$keyring] http://deb.debian.org/debian bookworm main
EOS

apt_updated=
apt_update() {
	[[ -n $apt_updated ]] && return
	log "updating the private apt index ($APT_DIR)"
	private_apt -q update >"$APT_DIR/update.log" 2>&1 ||
		die "apt-get update of trixie-backports/sid failed; see $APT_DIR/update.log"
	apt_updated=1
}

# download_deb PKG=VERSION|PKG DEST: dpkg -x the binary package into DEST.
download_deb() {
	local spec=$1 dest=$2 tmp
	tmp=$(mktemp -d "$SRC_DIR/.dl.XXXXXX")
	(cd "$tmp" && private_apt -q download "$spec") >"$tmp.log" 2>&1 ||
		{ rm -rf "$tmp"; die "could not download $spec from Debian; see $tmp.log"; }
	mkdir -p "$dest.tmp"
	dpkg -x "$tmp"/*.deb "$dest.tmp"
	rm -rf "$tmp" "$tmp.log"
	mv "$dest.tmp" "$dest"
}

# --- Linux -------------------------------------------------------------
if [[ ! -e $KERNEL_SRC/Makefile ]]; then
	apt_update
	pkg=linux-source-$KERNEL_SERIES
	log "downloading $pkg"
	rm -rf "$SRC_DIR/$pkg"
	download_deb "$pkg" "$SRC_DIR/$pkg"
	log "unpacking Linux $KERNEL_SERIES"
	rm -rf "$KERNEL_SRC.tmp" && mkdir -p "$KERNEL_SRC.tmp"
	tar -C "$KERNEL_SRC.tmp" --strip-components=1 \
		-xf "$SRC_DIR/$pkg/usr/src/linux-source-$KERNEL_SERIES.tar.xz"
	rm -rf "$SRC_DIR/$pkg" "$KERNEL_SRC"
	mv "$KERNEL_SRC.tmp" "$KERNEL_SRC"
fi

# --- rust-src, matching rustc ------------------------------------------
need rustc "Install Rust with rustup."
rv=$(rustc_version)
if [[ ! -d $(rust_lib_src) ]]; then
	apt_update
	debver=$(apt-cache \
		-o Dir::Etc::SourceList="$APT_DIR/sources.list" \
		-o Dir::Etc::SourceParts=/dev/null \
		-o Dir::State::Lists="$APT_DIR/lists" \
		madison rust-src | awk -v v="$rv" '$3 ~ "^"v"[+-]" {print $3; exit}')
	[[ -n $debver ]] ||
		die "Debian has no rust-src for rustc $rv (trixie-backports); install a rustc whose version Debian packages (see ENVIRONMENT.md)"
	log "downloading rust-src=$debver for rustc $rv"
	download_deb "rust-src=$debver" "$RUST_SRC_ROOT/$rv"
fi

# --- QEMU ----------------------------------------------------------------
if [[ ! -e $QEMU_PRISTINE/configure ]]; then
	apt_update
	log "downloading QEMU $QEMU_DEB_VERSION source with Debian's patches"
	tmp=$(mktemp -d "$SRC_DIR/.qemu.XXXXXX")
	(cd "$tmp" && private_apt -q source "qemu=$QEMU_DEB_VERSION") >"$tmp.log" 2>&1 ||
		die "apt-get source qemu=$QEMU_DEB_VERSION failed; see $tmp.log"
	rm -rf "$QEMU_PRISTINE"
	mv "$tmp"/qemu-"$QEMU_VERSION"* "$QEMU_PRISTINE"
	rm -rf "$tmp" "$tmp.log"
fi

# fetch_source PKG VERSION DEST: Debian's source package PKG=VERSION, unpacked
# into DEST with Debian's patches applied. The archive serves the source
# tarballs but not always the .dsc, so they are fetched one by one with apt's
# own downloader, each checked against the hash the (signed) source index
# gives, then unpacked as dpkg-source would.
fetch_source() {
	local pkg=$1 ver=$2 dest=$3 tmp uri name hash p
	apt_update
	log "downloading $pkg $ver source with Debian's patches"
	tmp=$(mktemp -d "$SRC_DIR/.$pkg.XXXXXX")
	private_apt -q source --print-uris "$pkg=$ver" 2>"$tmp.log" |
		sed -n "s/^'\([^']*\)' \([^ ]*\.tar\.[a-z]*\) [0-9]* \(SHA256:[0-9a-f]*\)$/\1 \2 \3/p" >"$tmp/uris"
	[[ $(wc -l <"$tmp/uris") -eq 2 ]] || die "no $pkg=$ver source in the index; see $tmp.log"
	while read -r uri name hash; do
		/usr/lib/apt/apt-helper -o APT::Sandbox::User=root download-file "$uri" "$tmp/$name" "$hash" >>"$tmp.log" 2>&1 ||
			die "could not download $name; see $tmp.log"
	done <"$tmp/uris"
	mkdir -p "$tmp/src"
	tar -C "$tmp/src" --strip-components=1 -xf "$tmp"/*.orig.tar.*
	tar -C "$tmp/src" -xf "$tmp"/*.debian.tar.*
	if [[ -e $tmp/src/debian/patches/series ]]; then
		sed '/^#/d' "$tmp/src/debian/patches/series" | while read -r p _; do
			[[ -n $p ]] || continue
			patch -d "$tmp/src" -p1 -s <"$tmp/src/debian/patches/$p" || die "$pkg patch $p failed"
		done
	fi
	rm -rf "$dest"
	mv "$tmp/src" "$dest"
	rm -rf "$tmp" "$tmp.log"
}

# --- rdma-core ------------------------------------------------------------------
[[ -e $RDMA_CORE_SRC/libibverbs/examples/rc_pingpong.c ]] ||
	fetch_source rdma-core "$RDMA_CORE_DEB_VERSION" "$RDMA_CORE_SRC"

# --- fio --------------------------------------------------------------------------
[[ -e $FIO_SRC/fio.c ]] ||
	fetch_source fio "$FIO_DEB_VERSION" "$FIO_SRC"

log "sources ready in $SRC_DIR"
