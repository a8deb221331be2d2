/*
 * pfnic's op interpreter (pfnic_fuzz_ops.c), which the libFuzzer targets
 * "pfnic-iommu" and "pfnic-wire" (pfnic_fuzz.c) and the qtest run.
 *
 * The interpreter reaches the pfnic behind a pcie-root-port on q35
 * through libqos (its q35 bus and the pfnic driver, without the graph:
 * the fuzzer builds the machine itself). It boots nothing itself: it
 * programs an intel-iommu in scalable mode with first-level tables for two
 * PASIDs, binds two contexts of the device to them, and then runs a byte
 * string as a sequence of operations (docs/fuzzing.md), checking the
 * device's and the IOMMU's invariants as it goes.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef PFNIC_FUZZ_H
#define PFNIC_FUZZ_H

#include "tests/qtest/libqtest.h"
#include "hw/pci/pci_regs.h"

/* --- the op interpreter (pfnic_fuzz_ops.c, docs/fuzzing.md) ------------- */

/* The machine the interpreter expects (plus firmware paths if needed). */
#define PFNIC_FUZZ_IOMMU \
    "-device intel-iommu,intremap=off,x-scalable-mode=on,x-flts=on," \
    "aw-bits=48,x-pasid-mode=on,device-iotlb=on,svm=on"
#define PFNIC_FUZZ_ARGS \
    "-M q35 -nodefaults " PFNIC_FUZZ_IOMMU " " \
    "-device pcie-root-port,id=rp0,chassis=1,addr=2.0 " \
    "-device pfnic,bus=rp0,contexts=4"

typedef struct PfnicFuzz PfnicFuzz;

/*
 * The wire of the "pfnic-wire" target and of /pfnic/wire/random: the
 * device's port is a QEMU dgram netdev whose other end is a unix datagram
 * socket the harness holds, so that the frames it sends reach the port
 * through QEMU's net layer, as a peer's would, and it reads what the port
 * sends.
 */
#define PFNIC_FUZZ_WIRE_MAC     "52:54:00:00:00:0a"

typedef struct PfnicFuzzWire {
    int fd;                     /* the harness's end, non-blocking */
    char *dir, *ours, *qemus;   /* socket paths */
} PfnicFuzzWire;

/*
 * Open the harness's end of the wire; returns the command line of the
 * machine (PFNIC_FUZZ_ARGS with the netdev), to g_free().
 */
char *pfnic_fuzz_wire_open(PfnicFuzzWire *w);
/*
 * The netdev of an open wire, "wire0" (the device needs
 * ",netdev=wire0,mac=" PFNIC_FUZZ_WIRE_MAC), to g_free().
 */
char *pfnic_fuzz_wire_netdev(PfnicFuzzWire *w);
void pfnic_fuzz_wire_close(PfnicFuzzWire *w);

/*
 * @flush runs the main loop's pending work after each operation: the
 * fuzzer executes QEMU in-process, where bottom halves run only when asked;
 * under the qtest (a separate QEMU process) it is NULL.
 */
PfnicFuzz *pfnic_fuzz_new(QTestState *qts, void (*flush)(QTestState *qts));
void pfnic_fuzz_free(PfnicFuzz *f);
/*
 * Run on the wire machine: pfnic_fuzz_setup() also gives the port its
 * address, makes QPs 4 and 5 wire QPs whose peer is the harness, and the
 * operations include frames from the wire (docs/fuzzing.md, pfnic-wire).
 */
void pfnic_fuzz_set_wire(PfnicFuzz *f, PfnicFuzzWire *w);
/* Program the IOMMU and the device on a machine fresh from reset. */
void pfnic_fuzz_setup(PfnicFuzz *f);
/* Run @len bytes of operations, checking the invariants after each one. */
void pfnic_fuzz_run(PfnicFuzz *f, const uint8_t *data, size_t len);
/*
 * The deterministic start of the qtest: a WRITE through the IOMMU lands
 * at the translated page, a fault is served through the page request
 * queue, a failed response fails the work.
 */
void pfnic_fuzz_known_good(PfnicFuzz *f);
/*
 * Submit a page-selective PASID-based IOTLB invalidation of 2^@am pages at
 * @addr in side @side's PASID (0: PASID 5, 1: PASID 9); returns whether the
 * IOMMU took it (no invalidation queue error; after one, the queue stays
 * stopped at the descriptor, as on hardware).
 */
bool pfnic_fuzz_piotlb(PfnicFuzz *f, int side, uint64_t addr, unsigned am);
/*
 * Whether a device write reaches a page's new mapping after a remap and a
 * page-selective PASID-based IOTLB invalidation of 2^@am pages (with the
 * device-TLB invalidation Linux sends beside it): the first write through
 * PASID 9's page 1 caches the old translation.
 */
bool pfnic_fuzz_remap_seen(PfnicFuzz *f, unsigned am);
/*
 * Whether a device write through PASID 9 follows its PASID entry to new
 * page tables after the entry changed and the PASID cache (if
 * @invalidate), the PASID's IOTLB and its device-TLB were invalidated: the
 * first write caches the old entry.
 */
bool pfnic_fuzz_pasid_switch_seen(PfnicFuzz *f, bool invalidate);
/*
 * Whether a device write through PASID 9 follows a changed page directory
 * entry (another page table for the 2 MiB of its page 1) after the
 * PASID's IOTLB invalidation of the page: the first write caches the walk.
 */
bool pfnic_fuzz_pde_switch_seen(PfnicFuzz *f);

#endif /* PFNIC_FUZZ_H */
