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

/* The device side of one process: see docs/registers.md, "Hardware contexts" */
typedef struct PfnicContext {
    uint32_t pasid;
    bool enabled;
} PfnicContext;
OBJECT_DECLARE_SIMPLE_TYPE(PfnicState, PFNIC)

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

#endif /* HW_PFNIC_H */
