# pfnic: the front door. `make run` boots the NIC in a guest, `make test`
# runs every test. Everything is built in $(PFNIC_CACHE) (default
# ~/.cache/pfnic), incrementally. See README.md.

SCRIPTS := $(CURDIR)/scripts

# make run knobs (see docs/knobs.md): CMD='command in the guest', OVERLAY=dir
CMD ?=
OVERLAY ?=
# make run2 knobs: PAIR=rxe-rxe|pfnic-rxe|rxe-pfnic|pfnic-pfnic, CMD1/CMD2
# (a command per guest, both or neither), PCAP=1 (record the wire)
PAIR ?= rxe-rxe
CMD1 ?=
CMD2 ?=
PCAP ?=
# make test knob: FILTER=name (guest tests whose name contains it)
FILTER ?=
# make bench knob: BENCH_ARGS='pfnic-perf --compare options', or '--perftest [options]'
# (see scripts/bench.sh)
BENCH_ARGS ?=
# make profile knob: PROFILE_ARGS='pfnic-perf --compare options' (the workload)
PROFILE_ARGS ?=
# make trace knob: TRACE_ARGS='pfnic-perf --compare options' (the workload)
TRACE_ARGS ?=
# make fuzz knobs: FUZZ_SECONDS=how long to fuzz the device (default 60);
# FUZZ_TARGET=pfnic-iommu (default: the device behind an IOMMU with SVA, ATS,
# page requests and QPs), pfnic-wire (the same with the device's port on a
# netdev the fuzzer feeds) or generic (QEMU's generic-fuzz, no IOMMU); see
# docs/fuzzing.md
FUZZ_SECONDS ?= 60
FUZZ_TARGET ?= pfnic-iommu

.PHONY: all setup sources kernel qemu module userspace rdma-examples provider rootfs run run2 test test-debug fuzz bench profile trace check clean help

all:
	$(SCRIPTS)/build-all.sh

setup:
	$(SCRIPTS)/setup-host.sh

sources: setup
	$(SCRIPTS)/fetch-sources.sh

kernel: sources
	$(SCRIPTS)/build-kernel.sh

qemu: sources
	$(SCRIPTS)/build-qemu.sh

module: kernel
	$(SCRIPTS)/build-module.sh

userspace: setup
	$(SCRIPTS)/build-userspace.sh

rdma-examples: sources userspace
	$(SCRIPTS)/build-rdma-examples.sh

provider: sources userspace
	$(SCRIPTS)/build-provider.sh

rootfs: module userspace rdma-examples provider
	$(SCRIPTS)/build-rootfs.sh
	$(SCRIPTS)/build-debian-layer.sh

run: all
	$(SCRIPTS)/run-guest.sh --debian $(if $(CMD),--cmd '$(CMD)') $(if $(OVERLAY),--overlay '$(OVERLAY)')

# Two guests joined by a wire (see docs/running.md, "Two guests on a wire").
run2: all
	$(SCRIPTS)/run-pair.sh --pair '$(PAIR)' $(if $(CMD1),--cmd1 '$(CMD1)') $(if $(CMD2),--cmd2 '$(CMD2)') \
		$(if $(OVERLAY),--overlay '$(OVERLAY)') $(if $(PCAP),--pcap)

test: all
	$(SCRIPTS)/test.sh --no-build $(if $(FILTER),--filter '$(FILTER)')

# The same tests on the debug kernel (KASAN, lockdep, kmemleak): a second
# kernel, module and initramfs, built beside the ordinary ones.
test-debug:
	PFNIC_FLAVOR=debug $(SCRIPTS)/build-all.sh
	PFNIC_FLAVOR=debug $(SCRIPTS)/test.sh --no-build $(if $(FILTER),--filter '$(FILTER)')

# libFuzzer + ASan on the device (docs/fuzzing.md), a second QEMU build.
fuzz:
	$(SCRIPTS)/fuzz.sh --target $(FUZZ_TARGET) --seconds $(FUZZ_SECONDS)

bench: all
	$(SCRIPTS)/bench.sh --no-build $(BENCH_ARGS)

# Where a cold page's time goes: perf on the guest's QEMU during cold transfers
# (scripts/profile-cold.sh; PROFILE_ARGS= are pfnic-perf --compare options).
profile: all
	$(SCRIPTS)/profile-cold.sh --no-build $(PROFILE_ARGS)

# The guest's side of the same: the trace flavour of the guest kernel, its
# scheduler, workqueue and interrupt events per cold message
# (scripts/trace-cold.sh; it builds the flavour; TRACE_ARGS= as PROFILE_ARGS=).
trace:
	$(SCRIPTS)/trace-cold.sh $(TRACE_ARGS)

check: all
	$(SCRIPTS)/check.sh

clean:
	$(SCRIPTS)/clean.sh

help:
	@cat docs/make-targets.md
