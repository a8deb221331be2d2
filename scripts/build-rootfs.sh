#!/usr/bin/env bash
# Pack the guest initramfs: busybox, rootfs/init, the module and the
# userspace binaries, from a gen_init_cpio list (no root needed).
# usage: scripts/build-rootfs.sh
source "$(dirname "$0")/lib.sh"
take_lock rootfs

busybox=/bin/busybox
# The guest has no shared libraries: busybox must have no dynamic dependencies.
[[ -x $busybox ]] && ! readelf -d "$busybox" 2>/dev/null | grep -q NEEDED ||
	die "no static busybox at $busybox; run scripts/setup-host.sh (package busybox-static)"
module=$MODULE_BUILD/drivers/pfnic/pfnic.ko
[[ -e $module ]] || die "no $module; run scripts/build-module.sh"
bins=$BUILD_DIR/userspace/x86_64-unknown-linux-gnu/release
mkdir -p "$ROOTFS_BUILD"

# gen_init_cpio is a single C file in the kernel tree; build our own copy.
gen=$ROOTFS_BUILD/gen_init_cpio
if [[ ! -x $gen || $KERNEL_SRC/usr/gen_init_cpio.c -nt $gen ]]; then
	cc -O2 -o "$gen" "$KERNEL_SRC/usr/gen_init_cpio.c" || die "cannot build gen_init_cpio"
fi

list=$ROOTFS_BUILD/initramfs.list
{
	for d in bin sbin usr usr/bin usr/sbin usr/local usr/local/bin dev proc sys tmp \
		root etc etc/pfnic lib lib/modules; do
		echo "dir /$d 0755 0 0"
	done
	echo "nod /dev/console 0600 0 0 c 5 1"
	echo "file /bin/busybox $busybox 0755 0 0"
	"$busybox" --list-full | while read -r applet; do
		[[ $applet == bin/busybox ]] && continue
		echo "slink /$applet /bin/busybox 0777 0 0"
	done
	echo "file /init $PFNIC_ROOT/rootfs/init 0755 0 0"
	echo "file /usr/bin/pfnic-pair-test $PFNIC_ROOT/rootfs/pair-test 0755 0 0"
	echo "file /lib/modules/pfnic.ko $module 0644 0 0"
	for b in pfnic-test pfnic-info pfnic-rc-pingpong pfnic-verbs-api-test pfnic-perf \
		pfnic-rc-pingpong-rdma-core pfnic-verbs-api-test-rdma-core pfnic-cold-bench; do
		[[ -x $bins/$b ]] || die "no $bins/$b; run scripts/build-userspace.sh"
		echo "file /usr/bin/$b $bins/$b 0755 0 0"
	done
} >"$list.tmp"
mv "$list.tmp" "$list"

"$gen" "$list" | gzip -1 >"$INITRAMFS.tmp"
mv "$INITRAMFS.tmp" "$INITRAMFS"
log "initramfs ready: $INITRAMFS"

# The libibverbs layer: libibverbs.so.1 where Debian's loader looks for it, replacing
# rdma-core's (a symlink in the Debian layer, which this archive follows), and perftest
# built against it in /usr/bin, replacing Debian's (which cannot load on pfnic).
so=$bins/libibverbs.so.1
[[ -e $so ]] || die "no $so; run scripts/build-userspace.sh"
[[ -e $PERFTEST_BUILD/bin/.built ]] || die "no perftest in $PERFTEST_BUILD/bin; run scripts/build-perftest.sh"
[[ -e $RDMA_EXAMPLES_BUILD/.built ]] || die "no rdma-core examples in $RDMA_EXAMPLES_BUILD; run scripts/build-rdma-examples.sh"
provider=$BUILD_DIR/rdma-provider
[[ -e $provider/.built ]] || die "no provider in $provider; run scripts/build-provider.sh"
debian_so=$(cd "$BUILD_DIR/rdma-core/usr/lib/x86_64-linux-gnu" && echo libibverbs.so.1.*.*)
[[ -e $BUILD_DIR/rdma-core/usr/lib/x86_64-linux-gnu/$debian_so ]] || die "no Debian libibverbs in $BUILD_DIR/rdma-core"
{
	for d in usr usr/bin usr/lib usr/lib/x86_64-linux-gnu usr/libexec usr/libexec/rdma-core-examples \
		usr/lib/x86_64-linux-gnu/libibverbs etc etc/libibverbs.d usr/lib/pfnic usr/lib/pfnic/debian-libibverbs; do
		echo "dir /$d 0755 0 0"
	done
	echo "file /usr/lib/x86_64-linux-gnu/libibverbs.so.1 $so 0755 0 0"
	# pfnic's rdma-core provider, for Debian's own libibverbs.so.1 (the Debian
	# layer's, which the line above hides at its usual name): programs run with
	# LD_LIBRARY_PATH=/usr/lib/pfnic/debian-libibverbs load it, and through the
	# provider reach pfnic's RDMA device in the RDMA core.
	echo "file /usr/lib/x86_64-linux-gnu/libibverbs/libpfnic-rdmav34.so $provider/libpfnic-rdmav34.so 0644 0 0"
	echo "file /etc/libibverbs.d/pfnic.driver $provider/pfnic.driver 0644 0 0"
	echo "slink /usr/lib/pfnic/debian-libibverbs/libibverbs.so.1 /usr/lib/x86_64-linux-gnu/$debian_so 0777 0 0"
	echo "file /usr/lib/pfnic/pfnic-uverbs-test $provider/pfnic-uverbs-test 0755 0 0"
	for t in "$PERFTEST_BUILD"/bin/ib_*; do
		echo "file /usr/bin/${t##*/} $t 0755 0 0"
	done
	# rdma-core's examples, built against each header (scripts/build-rdma-examples.sh).
	for v in pfnic-header rdma-core-header; do
		echo "dir /usr/libexec/rdma-core-examples/$v 0755 0 0"
		for t in "$RDMA_EXAMPLES_BUILD/$v"/ibv_*; do
			echo "file /usr/libexec/rdma-core-examples/$v/${t##*/} $t 0755 0 0"
		done
	done
} >"$ROOTFS_BUILD/libibverbs.list"
"$gen" "$ROOTFS_BUILD/libibverbs.list" | gzip -1 >"$IBVERBS_LAYER.tmp"
mv "$IBVERBS_LAYER.tmp" "$IBVERBS_LAYER"
log "libibverbs layer ready: $IBVERBS_LAYER"
