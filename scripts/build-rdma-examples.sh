#!/usr/bin/env bash
# Build rdma-core's own libibverbs examples (rdma-core 56.1, Debian trixie's
# source: rc_pingpong and srq_pingpong with pingpong.c, device_list,
# asyncwatch), unmodified, against rdma-core's headers and linked with
# Debian bookworm's libibverbs.so.1: newer than bookworm's ibverbs-utils, the
# same programs a user builds from rdma-core's tree. Named as rdma-core
# installs them (ibv_rc_pingpong, ibv_srq_pingpong, ibv_devices,
# ibv_asyncwatch), in $RDMA_EXAMPLES_BUILD; scripts/build-rootfs.sh puts them
# in pfnic guests' /usr/libexec/rdma-core-examples.
#
# The examples include rdma-core's config.h, which its cmake generates from
# buildlib/config.h.in; it is generated here the same way, with none of the
# optional features. The examples pfnic's features do not cover (UD, UC and
# XRC ping-pongs) and devinfo (it includes rdma-core's provider header
# <infiniband/driver.h>) are not built; Debian's binaries of them are in the
# guest.
# usage: scripts/build-rdma-examples.sh
source "$(dirname "$0")/lib.sh"
take_lock rdma-examples

need cc "Install gcc (package build-essential)."
ex=$RDMA_CORE_SRC/libibverbs/examples
[[ -e $ex/rc_pingpong.c ]] || die "no rdma-core source in $RDMA_CORE_SRC; run scripts/fetch-sources.sh"
rdma_core=$BUILD_DIR/rdma-core
[[ -e $rdma_core/.unpacked ]] || die "no rdma-core headers; run scripts/build-userspace.sh"
if stamp_fresh "$RDMA_EXAMPLES_BUILD/.built" "$ex" "$rdma_core/.unpacked" "$0"; then
	log "rdma-core's examples up to date: $RDMA_EXAMPLES_BUILD"
	exit 0
fi

rm -rf "$RDMA_EXAMPLES_BUILD"
mkdir -p "$RDMA_EXAMPLES_BUILD/config"
version=${RDMA_CORE_DEB_VERSION%-*}
sed -e 's/^#cmakedefine \([A-Z_0-9]*\).*/\/* #undef \1 *\//' \
	-e "s/@PACKAGE_VERSION@/$version/" \
	-e 's/@IOCTL_MODE_NUM@/3/' \
	-e 's/@SIZEOF_LONG_CODE@/#define SIZEOF_LONG 8/' \
	-e 's/@IBACM_SERVER_MODE_DEFAULT@/IBACM_SERVER_MODE_UNIX/' \
	-e 's/@IBACM_ACME_PLUS_KERNEL_ONLY_DEFAULT@/0/' \
	-e 's/@[A-Z_]*@//g' \
	"$RDMA_CORE_SRC/buildlib/config.h.in" >"$RDMA_EXAMPLES_BUILD/config/config.h"

out=$RDMA_EXAMPLES_BUILD
log "building rdma-core $version's examples"
for prog in ibv_rc_pingpong:rc_pingpong.c,pingpong.c ibv_srq_pingpong:srq_pingpong.c,pingpong.c \
	ibv_devices:device_list.c ibv_asyncwatch:asyncwatch.c; do
	src=()
	IFS=, read -ra files <<<"${prog#*:}"
	for f in "${files[@]}"; do src+=("$ex/$f"); done
	cc -std=gnu11 -O2 -Wall -Werror -I "$RDMA_EXAMPLES_BUILD/config" -I "$rdma_core/usr/include" \
		-I "$RDMA_CORE_SRC" -o "$out/${prog%%:*}" "${src[@]}" \
		-L "$rdma_core/usr/lib/x86_64-linux-gnu" -l:libibverbs.so.1 -Wl,--allow-shlib-undefined ||
		die "rdma-core's ${prog#*:} does not build"
done
touch "$RDMA_EXAMPLES_BUILD/.built"
log "rdma-core's examples ready: $RDMA_EXAMPLES_BUILD"
