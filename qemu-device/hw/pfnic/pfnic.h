/*
 * pfnic: a PCIe RDMA NIC with ATS, PASID and PRI
 *
 * Device state shared by the PCI glue (pfnic.c) and the control register
 * block (pfnic_ctrl.c).
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_PFNIC_H
#define HW_PFNIC_H

#include "hw/pci/pci_device.h"
#include "qom/object.h"

#define TYPE_PFNIC "pfnic"
OBJECT_DECLARE_SIMPLE_TYPE(PfnicState, PFNIC)

#include "hw/pci/pci.h"
#include "pfnic_regs.h"

typedef struct PfnicStats {
    uint32_t count[PFNIC_CNT_NR];   /* PfnicCounter; register order */
    uint32_t fault_lat[PFNIC_FAULT_LAT_BUCKETS];
} PfnicStats;

/* The device side of one process: see docs/registers.md, "Hardware contexts" */
typedef struct PfnicContext {
    PfnicState *s;
    uint32_t index;
    uint32_t pasid;
    bool enabled;

    /* Descriptor ring (driver memory) and doorbell */
    uint64_t ring;
    uint32_t ring_size;
    uint32_t vector;
    uint32_t head;
    uint32_t tail;

    /* The descriptor being executed */
    bool busy;
    PfnicDesc desc;
    uint64_t done;              /* bytes completed */
    bool waiting;               /* for a page request response */
    bool fault;                 /* the response said invalid/failure */
    bool retry_prq;             /* the page request queue was full */
    uint64_t fault_addr;
    bool fault_write;
    uint32_t refaults;          /* page requests in a row for one page */
    int64_t pri_sent_ns;        /* when the outstanding request was sent */
    PfnicStats stats;           /* since the context started */

    /* Page request responses and device-IOTLB invalidations for our PASID */
    IOMMUPRINotifier pri_notifier;
    IOMMUNotifier iotlb_notifier;
    bool pri_registered;
    bool iotlb_registered;
} PfnicContext;

/* The address translation cache: 4 KiB entries, direct mapped. */
#define PFNIC_ATC_ENTRIES 64

typedef struct PfnicAtcEntry {
    bool valid;
    uint32_t pasid;
    uint64_t vpage;
    hwaddr paddr;
    AddressSpace *as;
    IOMMUAccessFlags perm;
} PfnicAtcEntry;


struct PfnicState {
    PCIDevice parent_obj;

    MemoryRegion ctrl;          /* BAR0 */
    MemoryRegion doorbell;      /* BAR2 */

    /* Properties */
    bool ats;
    bool pasid;
    bool pri;
    uint32_t num_vectors;
    uint32_t num_contexts;

    /* Control registers (BAR0) */
    uint32_t status;
    uint32_t irq_status;
    uint32_t selftest_cookie;
    uint32_t selftest_echo;
    uint32_t selftest_count;
    uint32_t scratch;

    /* Hardware contexts: programmed through BAR0 by the driver only */
    uint32_t ctx_select;
    PfnicContext *contexts;     /* num_contexts entries */

    /* The DMA engine (pfnic_engine.c) */
    QEMUBH *engine_bh;
    QEMUTimer *retry_timer;
    PfnicAtcEntry atc[PFNIC_ATC_ENTRIES];
    PfnicStats stats;

    /* A self-test in flight: its vector, completed by selftest_bh */
    uint32_t selftest_vector;
    bool selftest_busy;
    QEMUBH *selftest_bh;
};

/* pfnic_ctrl.c */
extern const MemoryRegionOps pfnic_ctrl_ops;
extern const MemoryRegionOps pfnic_doorbell_ops;
uint32_t pfnic_caps(const PfnicState *s);
void pfnic_ctrl_reset(PfnicState *s);
void pfnic_selftest_bh(void *opaque);
void pfnic_guest_error(PfnicState *s, const char *what);

/* pfnic_engine.c */
void pfnic_engine_init(PfnicState *s);
void pfnic_engine_exit(PfnicState *s);
void pfnic_engine_reset(PfnicState *s);
bool pfnic_ctx_start(PfnicContext *ctx);
void pfnic_ctx_stop(PfnicContext *ctx);
void pfnic_doorbell(PfnicContext *ctx, uint32_t tail);

#endif /* HW_PFNIC_H */
