#!/usr/bin/env bash
# Pack the Debian layer: Debian bookworm's own rdma-core and iproute2
# binaries, UCX, Open MPI and dropbear (an SSH server and client for
# mpirun), unmodified, with every shared library they need, as an initramfs
# archive that the two-guest harness (scripts/run-pair.sh) appends to the
# guest's. An rxe guest uses it for the interop tools; a pfnic guest of a
# pair gets it too. With them goes pfnic's MPI ping-pong
# (userspace/examples/mpi_pingpong.c), built here against the packages'
# Open MPI (its headers from libopenmpi-dev, which is not packed).
#
# The packages come from the host's apt (bookworm): `apt-get download` into
# $PFNIC_CACHE/debs, `dpkg -x`, then only the files the tools need are
# packed: the tools below, rxe's provider, and the closure of their ELF
# NEEDED entries (readelf), glibc's loader at /lib64/ld-linux-x86-64.so.2.
# A library nobody provides fails the build with its name.
# Incremental: nothing is downloaded or packed again unless something changed.
# usage: scripts/build-debian-layer.sh
source "$(dirname "$0")/lib.sh"
take_lock debian-layer

need apt-get "pfnic needs a Debian host."
need readelf "Run scripts/setup-host.sh (package binutils, in build-essential)."
[[ -e $KERNEL_SRC/usr/gen_init_cpio.c ]] || die "no kernel source in $KERNEL_SRC; run scripts/fetch-sources.sh"

# The packages: the tools, then the libraries their binaries link (checked
# below: a missing one is named). Versions are bookworm's.
DEBIAN_PACKAGES=(
	ibverbs-utils ibverbs-providers libibverbs1 librdmacm1 rdmacm-utils perftest iproute2
	libc6 libnl-3-200 libnl-route-3-200 libmnl0 libbsd0 libmd0
	libcap2 libelf1 libbpf1 zlib1g libpci3 libudev1 libibumad3
	libucx0 ucx-utils libnuma1 libgomp1
	tcpdump libpcap0.8 libdbus-1-3 libsystemd0 libssl3 libgcrypt20 liblz4-1
	liblzma5 libzstd1 libgpg-error0
	python3-pyverbs python3-minimal python3.11-minimal libpython3.11-minimal
	libpython3.11-stdlib libpython3.11 libexpat1 libffi8 libbz2-1.0 libuuid1
	libcrypt1
	openmpi-bin libopenmpi3 openmpi-common libopenmpi-dev libpmix2 libhwloc15
	libevent-core-2.1-7 libevent-pthreads-2.1-7 libstdc++6 libgcc-s1
	dropbear-bin libtomcrypt1 libtommath1 libgmp10 libmunge2
	nvme-cli libnvme1 libjson-c5
	qperf
)
# What the guest gets (paths as Debian installs them), and rxe's provider.
DEBIAN_TOOLS=(
	usr/bin/ibv_devices usr/bin/ibv_devinfo usr/bin/ibv_rc_pingpong
	usr/bin/ibv_srq_pingpong usr/bin/ibv_ud_pingpong usr/bin/ibv_uc_pingpong
	usr/bin/ibv_xsrq_pingpong usr/bin/ibv_asyncwatch
	usr/bin/ib_write_bw usr/bin/ib_read_bw usr/bin/ib_send_bw usr/bin/ib_atomic_bw
	usr/bin/ib_write_lat usr/bin/ib_read_lat usr/bin/ib_send_lat usr/bin/ib_atomic_lat
	bin/ip usr/bin/rdma
	usr/bin/rping usr/bin/ucmatose usr/bin/udaddy usr/bin/rdma_server usr/bin/rdma_client
	usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
	etc/libibverbs.d/rxe.driver
	usr/bin/tcpdump
	usr/bin/ucx_info usr/bin/ucx_perftest
	usr/lib/x86_64-linux-gnu/ucx/libuct_ib.so.0 usr/lib/x86_64-linux-gnu/ucx/libuct_cma.so.0
	usr/bin/python3
	usr/bin/mpirun.openmpi usr/bin/orterun usr/bin/orted usr/bin/ompi_info
	usr/sbin/dropbear usr/bin/dbclient usr/bin/dropbearkey
	usr/bin/pfnic-mpi-pingpong
	usr/sbin/nvme usr/bin/fio
	usr/bin/qperf
)
# Whole trees the guest gets too: Python's standard library, pyverbs (rdma-core's Python
# bindings) and rdma-core's own test suite, which Debian ships with them
# (usr/share/doc/rdma-core/tests, gzipped; unpacked below); Open MPI's and
# PMIx's components (loaded at run time), help texts and configuration. What
# the tests do not need is left out (see PRUNE).
DEBIAN_TREES=(
	usr/lib/python3.11 usr/lib/python3/dist-packages/pyverbs usr/share/doc/rdma-core/tests
	usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3 usr/lib/x86_64-linux-gnu/pmix2
	usr/share/openmpi etc/openmpi
)
# Parts of those trees left out (find -path patterns): Python's own tests, GUIs, the
# build configuration, and the extension modules whose libraries nothing else needs
# (terminal, database and NIS modules).
PRUNE=(
	'*/__pycache__' usr/lib/python3.11/test usr/lib/python3.11/idlelib
	usr/lib/python3.11/tkinter usr/lib/python3.11/turtledemo usr/lib/python3.11/ensurepip
	usr/lib/python3.11/lib2to3 usr/lib/python3.11/pydoc_data 'usr/lib/python3.11/config-*'
	'usr/lib/python3.11/lib-dynload/nis.*' 'usr/lib/python3.11/lib-dynload/_curses*'
	'usr/lib/python3.11/lib-dynload/readline.*' 'usr/lib/python3.11/lib-dynload/_dbm.*'
	'usr/lib/python3.11/lib-dynload/_sqlite3.*' 'usr/lib/python3.11/lib-dynload/_gdbm.*'
	'usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_*_ofi.so'
	'usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_mtl_psm*.so'
	usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_btl_openib.so
	'usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_s[cp]oll_*.so'
	'usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_spml_*.so'
	'usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_sshmem_*.so'
	'usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_atomic_*.so'
	'usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_memheap_*.so'
)

debs=$DEBIAN_DEBS
out=$(dirname "$DEBIAN_LAYER")
root=$out/root
mkdir -p "$debs" "$out"

# --- download (once per package) ----------------------------------------------
debian_download "$debs" "${DEBIAN_PACKAGES[@]}"

# --- unpack and pack (when a package or this script changed) ---------------------
gen=$out/gen_init_cpio
if [[ ! -x $gen || $KERNEL_SRC/usr/gen_init_cpio.c -nt $gen ]]; then
	cc -O2 -o "$gen" "$KERNEL_SRC/usr/gen_init_cpio.c" || die "cannot build gen_init_cpio"
fi
[[ -e $FIO_BUILD/.built ]] || die "no fio in $FIO_BUILD; run scripts/build-fio.sh"
if stamp_fresh "$DEBIAN_LAYER" "$debs" "$0" "$PFNIC_ROOT/userspace/examples/mpi_pingpong.c" \
	"$FIO_BUILD/.built"; then
	log "Debian layer up to date: $DEBIAN_LAYER"
	exit 0
fi

log "unpacking ${#DEBIAN_PACKAGES[@]} Debian packages"
rm -rf "$root.tmp"
debian_unpack "$debs" "$root.tmp" "${DEBIAN_PACKAGES[@]}"
rm -rf "$root"
mv "$root.tmp" "$root"
# rdma-core's tests are gzipped as documentation; Python reads them plain.
find "$root/usr/share/doc/rdma-core/tests" -name '*.py.gz' -exec gunzip -f {} +
# pfnic's MPI ping-pong, on the packages' Open MPI (libmpi's own libraries are
# resolved in the guest).
mpi=$root/usr/lib/x86_64-linux-gnu/openmpi
cc -std=gnu11 -O2 -Wall -Wextra -Werror -I "$mpi/include" \
	-o "$root/usr/bin/pfnic-mpi-pingpong" "$PFNIC_ROOT/userspace/examples/mpi_pingpong.c" \
	"$root/usr/lib/x86_64-linux-gnu/libmpi.so.40" -Wl,--allow-shlib-undefined ||
	die "userspace/examples/mpi_pingpong.c does not build"
# fio, built static from bookworm's source (scripts/build-fio.sh).
cp "$FIO_BUILD/fio" "$root/usr/bin/fio"

# The closure: every file to pack (relative to $root), symlinks followed
# (both the link and its target go in), ELF NEEDED entries resolved in the
# multiarch library directories, as Debian's ld.so searches them, and PMIx's
# own (Open MPI's PMIx component finds it there by its RUNPATH).
libdirs=(lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu/pmix2/lib)
declare -A want=()
# The guest suite (pfnic-test, Rust, linked with libibverbs.so.1) also needs
# the C library and libgcc_s (Rust's standard library unwinds through it).
queue=("${DEBIAN_TOOLS[@]}" lib64/ld-linux-x86-64.so.2 lib/x86_64-linux-gnu/libgcc_s.so.1)
prune=()
for p in "${PRUNE[@]}"; do prune+=(-path "$root/$p" -prune -o); done
for t in "${DEBIAN_TREES[@]}"; do
	mapfile -t -O "${#queue[@]}" queue < <(find "$root/$t" "${prune[@]}" \( -type f -o -type l \) -printf '%P\n' |
		sed "s|^|$t/|")
done
unresolved=()
for ((qi = 0; qi < ${#queue[@]}; qi++)); do
	rel=${queue[qi]}
	[[ -n ${want[$rel]:-} ]] && continue
	f=$root/$rel
	[[ -e $f || -L $f ]] || die "Debian package file /$rel is missing (package list in $0)"
	want[$rel]=1
	if [[ -L $f ]]; then
		t=$(readlink "$f")
		if [[ $t == /* ]]; then t=${t#/}; else t=$(dirname "$rel")/$t; fi
		queue+=("$(realpath -m --relative-to="$root" "$root/$t")")
		continue
	fi
	readelf -h "$f" >/dev/null 2>&1 || continue
	while read -r so; do
		found=
		for d in "${libdirs[@]}"; do
			if [[ -e $root/$d/$so ]]; then found=$d/$so; break; fi
		done
		if [[ -n $found ]]; then queue+=("$found"); else unresolved+=("/$rel needs $so"); fi
	done < <(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p')
done
((${#unresolved[@]} == 0)) ||
	die "no package in the list provides: ${unresolved[*]} (add it to DEBIAN_PACKAGES in $0)"

list=$out/debian.list
{
	declare -A dirs=()
	for rel in $(printf '%s\n' "${!want[@]}" | sort); do
		d=$(dirname "$rel") parts=
		IFS=/ read -ra comps <<<"$d"
		for c in "${comps[@]}"; do
			parts+=/$c
			[[ -n ${dirs[$parts]:-} ]] && continue
			dirs[$parts]=1
			echo "dir $parts 0755 0 0"
		done
		f=$root/$rel
		if [[ -L $f ]]; then
			echo "slink /$rel $(readlink "$f") 0777 0 0"
		else
			echo "file /$rel $f $(stat -c %a "$f") 0 0"
		fi
	done
} >"$list.tmp"
mv "$list.tmp" "$list"
"$gen" "$list" >"$DEBIAN_LAYER.tmp"
mv "$DEBIAN_LAYER.tmp" "$DEBIAN_LAYER"
log "Debian layer ready: $DEBIAN_LAYER ($(grep -c '^file' "$list") files, $(du -h "$DEBIAN_LAYER" | cut -f1))"
