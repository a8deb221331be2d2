#!/usr/bin/env bash
# Build the guest kernel: apply kernel/patches/ to the Linux source (a git
# tree in the cache, reset to pristine whenever the series changes), merge
# kernel/pfnic.config (and kernel/debug.config or kernel/trace.config with
# PFNIC_FLAVOR=debug or trace) onto tinyconfig, and build bzImage out of tree,
# its C with GCC (the debug flavor's with clang: KERNEL_CC in scripts/lib.sh).
# Incremental: make only rebuilds what changed.
# usage: scripts/build-kernel.sh [--tree]
#   --tree  only apply the series (no bindgen needed: build-all.sh does this
#           while bindgen-cli builds, taking it off the kernel's path)
source "$(dirname "$0")/lib.sh"
take_lock kernel

[[ -e $KERNEL_SRC/Makefile ]] || die "no kernel source in $KERNEL_SRC; run scripts/fetch-sources.sh"
source "$PFNIC_ROOT/scripts/patch-tree.sh"
if [[ ${1-} == --tree ]]; then
	apply_series "$KERNEL_SRC" "$PFNIC_ROOT/kernel/patches" kernel
	exit 0
fi
[[ $# == 0 ]] || die "usage: scripts/build-kernel.sh [--tree]"
[[ -d $(rust_lib_src) ]] || die "no rust-src for rustc $(rustc_version); run scripts/fetch-sources.sh"
need bindgen "Run scripts/setup-host.sh (it builds bindgen-cli $BINDGEN_VERSION)."
need "$KERNEL_CC" "Run scripts/setup-host.sh (it installs gcc and clang$LLVM_SUFFIX)."

apply_series "$KERNEL_SRC" "$PFNIC_ROOT/kernel/patches" kernel

mkdir -p "$KERNEL_BUILD"
names=$(printf '%s + ' "${KERNEL_FRAGMENTS[@]#"$PFNIC_ROOT"/}")
# A tree configured for the other compiler is configured again (and rebuilt).
[[ $(cat "$KERNEL_BUILD/.pfnic-compiler" 2>/dev/null) == "$KERNEL_CC" ]] ||
	rm -f "$KERNEL_BUILD/.pfnic-config.stamp"
if ! stamp_fresh "$KERNEL_BUILD/.pfnic-config.stamp" "${KERNEL_FRAGMENTS[@]}" "$KERNEL_SRC/.pfnic-series"; then
	log "configuring the kernel for $KERNEL_CC (tinyconfig + ${names% + })"
	kmake -s rustavailable >/dev/null ||
		{ kmake rustavailable; die "the kernel cannot use this Rust toolchain (see above)"; }
	# tiny.config's SLUB_TINY and guess unwinder need EXPERT, which ours turns on:
	# they go (pfnic.config says SLUB and ORC) rather than be overridden with a warning.
	{
		grep -hvx -e CONFIG_SLUB_TINY=y -e CONFIG_UNWINDER_GUESS=y \
			"$KERNEL_SRC/kernel/configs/tiny.config" "$KERNEL_SRC/arch/x86/configs/tiny.config"
		cat "${KERNEL_FRAGMENTS[@]}"
	} >"$KERNEL_BUILD/pfnic-allconfig"
	KCONFIG_ALLCONFIG=$KERNEL_BUILD/pfnic-allconfig kmake -s allnoconfig
	# Kconfig silently drops symbols with unmet dependencies: check every one.
	bad=0
	while IFS= read -r line; do
		[[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]] || continue
		sym=${BASH_REMATCH[1]} want=${BASH_REMATCH[2]}
		if [[ $want == n ]]; then
			grep -q "^$sym=" "$KERNEL_BUILD/.config" || continue
		else
			grep -qx "$sym=$want" "$KERNEL_BUILD/.config" && continue
		fi
		log "kernel config: $sym=$want did not stick (got: $(grep "^$sym=\|^# $sym " "$KERNEL_BUILD/.config" || echo unset))"
		bad=1
	done < <(cat "${KERNEL_FRAGMENTS[@]}")
	((bad == 0)) || die "${names% + } has symbols Kconfig rejected; fix their dependencies"
	echo "$KERNEL_CC" >"$KERNEL_BUILD/.pfnic-compiler"
	touch "$KERNEL_BUILD/.pfnic-config.stamp"
fi

log "building the kernel (make -j$PFNIC_JOBS; 6-15 minutes cold)"
# The kernel crate's doctests have mangled names longer than kallsyms keeps;
# kallsyms skips them with a two-line notice per symbol, which is noise here.
kmake -s -j"$PFNIC_JOBS" bzImage modules \
	2> >(grep -v -e 'too long for kallsyms' -e '^Please increase KSYM_NAME_LEN' >&2) ||
	die "kernel build failed (see above)"
log "kernel ready: $KERNEL_BUILD/arch/x86/boot/bzImage"
