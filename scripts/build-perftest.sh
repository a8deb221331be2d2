#!/usr/bin/env bash
# Build perftest (ib_write_bw, ib_read_bw, ib_send_bw, ib_atomic_bw and their
# _lat siblings) from Debian's source, unmodified, against pfnic's
# libibverbs.so.1, as a user builds it for a NIC that is not Mellanox's.
# Debian's own perftest binaries cannot load on pfnic: they link rdma-core's
# mlx5 and efa providers, which need rdma-core's private provider interface.
#
# The headers are rdma-core's (Debian's libibverbs-dev, librdmacm-dev,
# libibumad-dev; libpci-dev) without the vendor direct-verbs ones (mlx5dv,
# efadv, manadv), so configure leaves those features out; the libraries are
# pfnic's libibverbs.so.1 and Debian's librdmacm, libibumad and libpci. The
# binaries go to $PERFTEST_BUILD/bin; scripts/build-rootfs.sh puts them in
# pfnic guests' /usr/bin, over Debian's.
# Incremental: nothing is rebuilt unless the source, the library or this
# script changed.
# usage: scripts/build-perftest.sh
source "$(dirname "$0")/lib.sh"
take_lock perftest

need cc "Install gcc (package build-essential)."
need make "Install make (package build-essential)."
[[ -e $PERFTEST_SRC/configure ]] || die "no perftest source in $PERFTEST_SRC; run scripts/fetch-sources.sh"
so=$BUILD_DIR/userspace/x86_64-unknown-linux-gnu/release/libibverbs.so.1
[[ -e $so ]] || die "no $so; run scripts/build-userspace.sh"
rdma_core=$BUILD_DIR/rdma-core
[[ -e $rdma_core/.unpacked ]] || die "no rdma-core headers in $rdma_core; run scripts/build-userspace.sh"

bin=$PERFTEST_BUILD/bin
tools=(ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_write_lat ib_read_lat ib_send_lat ib_atomic_lat)
if stamp_fresh "$bin/.built" "$PERFTEST_SRC" "$so" "$0"; then
	log "perftest up to date: $bin"
	exit 0
fi

# --- the headers and libraries it builds against ---------------------------
dev=(librdmacm-dev librdmacm1 libibumad-dev libibumad3 libpci-dev libpci3)
debian_download "$DEBIAN_DEBS" "${dev[@]}"
sysroot=$PERFTEST_BUILD/sysroot
rm -rf "$sysroot" "$PERFTEST_BUILD/src"
mkdir -p "$sysroot/include" "$sysroot/lib"
debian_unpack "$DEBIAN_DEBS" "$sysroot/deb" "${dev[@]}"
cp -r "$rdma_core/usr/include/infiniband" "$sysroot/include/"
cp -r "$sysroot/deb/usr/include/." "$sysroot/include/"
cp -r "$sysroot/deb/usr/include/x86_64-linux-gnu/." "$sysroot/include/"
# No vendor direct verbs: pfnic is none of those devices.
rm -f "$sysroot"/include/infiniband/{mlx4dv,mlx5dv,efadv,manadv}.h \
	"$sysroot"/include/infiniband/mlx5_{api,user_ioctl_verbs}.h
ln -s "$so" "$sysroot/lib/libibverbs.so"
for l in librdmacm.so.1 libibumad.so.3 libpci.so.3; do
	ln -s "$sysroot/deb/usr/lib/x86_64-linux-gnu/$l" "$sysroot/lib/${l%.*}"
done

# --- configure and build (in a copy: the source stays pristine) -------------
log "building perftest $PERFTEST_DEB_VERSION against pfnic's libibverbs.so.1"
cp -a "$PERFTEST_SRC" "$PERFTEST_BUILD/src"
cd "$PERFTEST_BUILD/src"
# librdmacm's own dependencies (libnl) are resolved in the guest, not here.
./configure -q CPPFLAGS="-I$sysroot/include" \
	LDFLAGS="-L$sysroot/lib -Wl,--allow-shlib-undefined" >"$PERFTEST_BUILD/configure.log" 2>&1 ||
	die "perftest's configure failed; see $PERFTEST_BUILD/configure.log"
make -j"$(nproc)" >"$PERFTEST_BUILD/make.log" 2>&1 || die "perftest's build failed; see $PERFTEST_BUILD/make.log"
mkdir -p "$bin"
for t in "${tools[@]}"; do
	[[ -x $t ]] || die "perftest built no $t"
	# Every library function it calls must be one libibverbs.so.1 exports.
	missing=$(comm -23 <(objdump -T "$t" | awk '$NF ~ /^_?ibv_/ {print $NF}' | sort -u) \
		<(objdump -T "$so" | awk '$NF ~ /^_?ibv_/ && $(NF-1) !~ /^\(/ {print $NF}' | sort -u))
	[[ -z $missing ]] || die "$t needs what libibverbs.so.1 does not export: $missing"
	cp "$t" "$bin/"
done
touch "$bin/.built"
log "perftest ready: $bin (${tools[*]})"
