#!/usr/bin/env bash
# Build fio (bookworm's 3.33 source, with Debian's patches) static, for the
# guests' NVMe over RDMA tests. Debian's fio binary links the libraries of its
# Ceph, Gluster, NBD and persistent-memory engines (some 40 MB with theirs);
# none of them is used on a block device, so they are left out, and a static
# binary needs nothing from the guest's root. The output is $FIO_BUILD/fio;
# scripts/build-rootfs.sh puts it in the guests' /usr/bin.
# usage: scripts/build-fio.sh
source "$(dirname "$0")/lib.sh"
take_lock fio

need cc "Install gcc (package build-essential)."
need make "Install make (package build-essential)."
[[ -e $FIO_SRC/fio.c ]] || die "no fio source in $FIO_SRC; run scripts/fetch-sources.sh"
if stamp_fresh "$FIO_BUILD/.built" "$FIO_SRC" "$0"; then
	log "fio up to date: $FIO_BUILD/fio"
	exit 0
fi

log "building fio ${FIO_DEB_VERSION%-*} (static, block-device engines only)"
rm -rf "$FIO_BUILD"
mkdir -p "$FIO_BUILD"
cp -a "$FIO_SRC/." "$FIO_BUILD/src"
(
	cd "$FIO_BUILD/src"
	# Whatever the build host has installed, the guest's fio has only these;
	# without System V IPC in the guests' kernel, its jobs are threads.
	./configure --build-static --disable-native --disable-numa --disable-rdma \
		--disable-rados --disable-rbd --disable-http --disable-gfapi --disable-pmem \
		--disable-xnvme --disable-libzbc --disable-tcmalloc --disable-dfs \
		--disable-libnfs --disable-lex --disable-shm >"$FIO_BUILD/configure.log" 2>&1 ||
		die "fio's configure failed; see $FIO_BUILD/configure.log"
	make -s -j"$PFNIC_JOBS" fio >"$FIO_BUILD/make.log" 2>&1 ||
		die "fio does not build; see $FIO_BUILD/make.log"
) || exit 1
strip -o "$FIO_BUILD/fio" "$FIO_BUILD/src/fio"
rm -rf "$FIO_BUILD/src"
touch "$FIO_BUILD/.built"
log "fio ready: $FIO_BUILD/fio"
