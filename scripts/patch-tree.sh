# shellcheck shell=bash
# apply_series TREE PATCHDIR NAME: make TREE equal to its pristine import plus
# every PATCHDIR/*.patch, in order. TREE is a git repository whose first
# commit is the pristine source; a re-run with an unchanged series does
# nothing (so the build stays incremental), a changed series resets to
# pristine and re-applies with `git am`, touching only files that differ.

apply_series() {
	local tree=$1 dir=$2 name=$3 want have
	if [[ ! -d $tree/.git ]]; then
		log "importing pristine $name source into git (once)"
		git -C "$tree" init -q
		# No automatic gc: the import leaves tens of thousands of loose
		# objects, and the first `git am` would start a gc in the background
		# that packs them all (minutes of both cores on the cold path) while
		# holding this tree's build lock (its inherited descriptor).
		git -C "$tree" config gc.auto 0
		git -C "$tree" -c core.autocrlf=false add -A -f .
		git -C "$tree" -c user.name=pfnic -c user.email=pfnic@localhost \
			commit -q -m "pristine $name source"
		git -C "$tree" tag pristine
	fi
	local patches=()
	[[ -d $dir ]] && mapfile -t patches < <(find "$dir" -maxdepth 1 -name '*.patch' | sort)
	want=$(cat /dev/null "${patches[@]}" | sha256sum | cut -d' ' -f1)
	have=$(cat "$tree/.pfnic-series" 2>/dev/null || true)
	[[ $want == "$have" ]] && return 0
	log "applying the $name patch series from ${dir#"$PFNIC_ROOT"/}"
	git -C "$tree" am --abort >/dev/null 2>&1 || true
	# The stamp goes first: a series that fails to apply leaves the tree pristine, and
	# the old series must then apply again, not be taken as applied.
	rm -f "$tree/.pfnic-series"
	git -C "$tree" reset -q --hard pristine
	# One `git am` for the whole series: one refresh of the tree's index instead of one a
	# patch (the kernel's 53: 6 s instead of 16).
	local next
	if ((${#patches[@]})) && ! git -C "$tree" -c user.name=pfnic -c user.email=pfnic@localhost \
		am -q --keep-cr "${patches[@]}"; then
		next=$(cat "$tree/.git/rebase-apply/next" 2>/dev/null || echo 1)
		git -C "$tree" am --abort >/dev/null 2>&1
		die "patch ${patches[next - 1]#"$PFNIC_ROOT"/} does not apply to $name"
	fi
	echo "$want" >"$tree/.pfnic-series"
}

# qemu_tree: the QEMU source with qemu-device/patches applied, and the device
# and its tests linked in from qemu-device/ (edits rebuild incrementally).
qemu_tree() {
	apply_series "$QEMU_PRISTINE" "$PFNIC_ROOT/qemu-device/patches" qemu
	qemu_link_device
}

# qemu_link_device: link the device (qemu-device/hw/pfnic as hw/net/pfnic),
# its tests (every file under qemu-device/tests at the same place under
# tests/qtest: the qtests, libqos/pfnic.[ch], fuzz/pfnic_fuzz*) and the
# device set of pfnic's QEMU build (configs/devices/x86_64-softmmu/pfnic.mak)
# into the QEMU tree from this checkout; links to test files a checkout no
# longer has are removed. When the tree linked another checkout, this one's
# files are touched: ninja compares times, and they may be older than the
# objects built from the other's.
qemu_link_device() {
	local dev=$PFNIC_ROOT/qemu-device/hw/pfnic tests=$PFNIC_ROOT/qemu-device/tests f rel
	if [[ $(readlink "$QEMU_PRISTINE/hw/net/pfnic") != "$dev" ]]; then
		touch "$dev"/*
		find "$tests" -type f -exec touch {} +
	fi
	ln -sfn "$dev" "$QEMU_PRISTINE/hw/net/pfnic"
	find "$QEMU_PRISTINE/tests/qtest" -maxdepth 2 -type l -lname '*/qemu-device/tests/*' -delete
	while IFS= read -r f; do
		rel=${f#"$tests"/}
		ln -sfn "$f" "$QEMU_PRISTINE/tests/qtest/$rel"
	done < <(find "$tests" -type f)
	ln -sfn "$PFNIC_ROOT/qemu-device/configs/devices/x86_64-softmmu/pfnic.mak" \
		"$QEMU_PRISTINE/configs/devices/x86_64-softmmu/pfnic.mak"
}

# qemu_configure DIR ARG...: configure that tree into the build directory DIR
# with ARG..., unless DIR was configured with exactly those arguments.
qemu_configure() {
	local dir=$1
	shift
	mkdir -p "$dir"
	[[ -e $dir/build.ninja && $(cat "$dir/.pfnic-config" 2>/dev/null) == "$*" ]] && return 0
	log "configuring QEMU in ${dir#"$PFNIC_CACHE"/}"
	rm -rf "$dir" && mkdir -p "$dir"
	(cd "$dir" && "$QEMU_PRISTINE/configure" "$@") >"$dir/configure.log" 2>&1 ||
		die "QEMU configure failed; see $dir/configure.log"
	echo "$*" >"$dir/.pfnic-config"
}
