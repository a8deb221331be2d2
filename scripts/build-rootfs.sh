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
	echo "file /usr/bin/pfnic-pair-mpi $PFNIC_ROOT/rootfs/pair-mpi 0755 0 0"
	echo "file /usr/bin/pfnic-pair-nvme $PFNIC_ROOT/rootfs/pair-nvme 0755 0 0"
	echo "file /usr/bin/pfnic-pair-qperf $PFNIC_ROOT/rootfs/pair-qperf 0755 0 0"
	echo "file /usr/bin/pfnic-pair-word $PFNIC_ROOT/rootfs/pair-word 0755 0 0"
	echo "file /lib/modules/pfnic.ko $module 0644 0 0"
	# The static program (Rust); the guest suite, pfnic-perf and the C programs need
	# Debian's libraries (below).
	info=$BUILD_DIR/userspace-dyn/x86_64-unknown-linux-gnu/release/pfnic-info
	[[ -x $info ]] || die "no $info; run scripts/build-userspace.sh"
	echo "file /usr/bin/pfnic-info $info 0755 0 0"
} >"$list.tmp"
mv "$list.tmp" "$list"

"$gen" "$list" >"$INITRAMFS.tmp"
mv "$INITRAMFS.tmp" "$INITRAMFS"
log "initramfs ready: $INITRAMFS"

# The provider layer, appended after the Debian layer (whose libibverbs.so.1,
# Debian's own and unmodified, loads it): pfnic's rdma-core provider where
# that library looks for providers, and the programs built against it:
# pfnic's C examples, rdma-core's and the provider's check, and the guest suite
# (linked with libibverbs.so.1).
provider=$BUILD_DIR/rdma-provider
[[ -e $provider/.built ]] || die "no provider in $provider; run scripts/build-provider.sh"
[[ -e $RDMA_EXAMPLES_BUILD/.built ]] || die "no rdma-core examples in $RDMA_EXAMPLES_BUILD; run scripts/build-rdma-examples.sh"
# The MD5 sums of Debian's libibverbs1 as dpkg keeps them: the guest suite checks that the
# library its programs load is the package's (the newest .deb, the one debian_unpack takes).
deb=$(compgen -G "$DEBIAN_DEBS/libibverbs1_*.deb" | sort -V | tail -1) ||
	die "no libibverbs1 package in $DEBIAN_DEBS; run scripts/build-userspace.sh"
md5sums=$ROOTFS_BUILD/libibverbs1.md5sums
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./md5sums >"$md5sums" ||
	die "no md5sums in $deb"
{
	for d in usr usr/bin usr/lib usr/lib/x86_64-linux-gnu usr/libexec usr/libexec/rdma-core-examples \
		usr/lib/x86_64-linux-gnu/libibverbs etc etc/libibverbs.d usr/lib/pfnic; do
		echo "dir /$d 0755 0 0"
	done
	echo "file /usr/lib/x86_64-linux-gnu/libibverbs/libpfnic-rdmav34.so $provider/libpfnic-rdmav34.so 0644 0 0"
	echo "file /etc/libibverbs.d/pfnic.driver $provider/pfnic.driver 0644 0 0"
	echo "file /usr/lib/pfnic/pfnic-uverbs-test $provider/pfnic-uverbs-test 0755 0 0"
	echo "file /usr/lib/pfnic/libibverbs1.md5sums $md5sums 0644 0 0"
	for b in pfnic-rc-pingpong pfnic-verbs-api-test pfnic-cold-bench; do
		[[ -x $C_EXAMPLES_BUILD/$b ]] || die "no $C_EXAMPLES_BUILD/$b; run scripts/build-userspace.sh"
		echo "file /usr/bin/$b $C_EXAMPLES_BUILD/$b 0755 0 0"
	done
	for b in pfnic-test pfnic-perf; do
		dyn=$BUILD_DIR/userspace-dyn/x86_64-unknown-linux-gnu/release/$b
		[[ -x $dyn ]] || die "no $dyn; run scripts/build-userspace.sh"
		echo "file /usr/bin/$b $dyn 0755 0 0"
	done
	for t in "$RDMA_EXAMPLES_BUILD"/ibv_*; do
		echo "file /usr/libexec/rdma-core-examples/${t##*/} $t 0755 0 0"
	done
} >"$ROOTFS_BUILD/provider.list"
"$gen" "$ROOTFS_BUILD/provider.list" >"$PROVIDER_LAYER.tmp"
mv "$PROVIDER_LAYER.tmp" "$PROVIDER_LAYER"
log "provider layer ready: $PROVIDER_LAYER"
