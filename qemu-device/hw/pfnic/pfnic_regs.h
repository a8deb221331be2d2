/*
 * pfnic register layout (device ABI 1.2)
 *
 * Mirrors docs/registers.md, which is the definition; the Rust driver's
 * drivers/pfnic/regs.rs mirrors the same document.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_PFNIC_REGS_H
#define HW_PFNIC_REGS_H

/* PCI identity */
#define PFNIC_PCI_VENDOR_ID         0x1af4
#define PFNIC_PCI_DEVICE_ID         0x10f5
#define PFNIC_PCI_SUBSYS_ID         0x0001
#define PFNIC_PCI_REVISION          1

/* BARs */
#define PFNIC_BAR_CTRL              0
#define PFNIC_BAR_DOORBELL          2
#define PFNIC_BAR_MSIX              4
#define PFNIC_CTRL_SIZE             0x1000
#define PFNIC_DOORBELL_PAGE_SIZE    0x1000

/* BAR0 registers */
#define PFNIC_REG_ID                0x000
#define PFNIC_REG_VERSION           0x004
#define PFNIC_REG_FW_VERSION        0x008
#define PFNIC_REG_CAPS              0x00c
#define PFNIC_REG_NUM_VECTORS       0x010
#define PFNIC_REG_NUM_CONTEXTS      0x014
#define PFNIC_REG_PASID_WIDTH       0x018
#define PFNIC_REG_CONTROL           0x020
#define PFNIC_REG_STATUS            0x024
#define PFNIC_REG_IRQ_STATUS        0x030
#define PFNIC_REG_SELFTEST_COOKIE   0x040
#define PFNIC_REG_SELFTEST_TRIGGER  0x044
#define PFNIC_REG_SELFTEST_ECHO     0x048
#define PFNIC_REG_SELFTEST_COUNT    0x04c
#define PFNIC_REG_SCRATCH           0x050
#define PFNIC_REG_CTX_SELECT        0x060
#define PFNIC_REG_CTX_PASID         0x064
#define PFNIC_REG_CTX_CTRL          0x068
#define PFNIC_REG_CTX_STATUS        0x06c
#define PFNIC_REG_CTX_RING_LO       0x070
#define PFNIC_REG_CTX_RING_HI       0x074
#define PFNIC_REG_CTX_RING_SIZE     0x078
#define PFNIC_REG_CTX_VECTOR        0x07c
#define PFNIC_REG_CTX_HEAD          0x080
#define PFNIC_REG_CTX_COUNTERS      0x090   /* PFNIC_CNT_NR registers */
#define PFNIC_REG_COUNTERS          0x100   /* PFNIC_CNT_NR registers */
#define PFNIC_REG_STAT_FAULT_LAT    0x140   /* 16 registers */
#define PFNIC_FAULT_LAT_BUCKETS     16

/*
 * Translation and page-request counters, in register order. The device-wide
 * block (COUNTERS) and the selected context's block (CTX_COUNTERS) both use
 * this layout.
 */
typedef enum PfnicCounter {
    PFNIC_CNT_PAGE_REQUESTS,    /* page requests sent */
    PFNIC_CNT_PRI_SUCCESS,      /* responses: success */
    PFNIC_CNT_PRI_FAILED,       /* responses: invalid request or failure */
    PFNIC_CNT_ATC_HITS,         /* translations served by the ATC */
    PFNIC_CNT_ATC_MISSES,       /* ATS translation requests */
    PFNIC_CNT_INVALIDATIONS,    /* device-IOTLB invalidations */
    PFNIC_CNT_PRQ_FULL,         /* page requests the IOMMU could not queue */
    PFNIC_CNT_NR
} PfnicCounter;

/* Register values and fields */
#define PFNIC_ID_VALUE              0x434e4650 /* "PFNC" in memory order */
#define PFNIC_ABI_MAJOR             1
#define PFNIC_ABI_MINOR             2
#define PFNIC_VERSION_VALUE         ((PFNIC_ABI_MAJOR << 16) | PFNIC_ABI_MINOR)
#define PFNIC_FW_VERSION_VALUE      0x01020000 /* model 1.2.0 */

#define PFNIC_CAPS_ATS              (1u << 0)
#define PFNIC_CAPS_PASID            (1u << 1)
#define PFNIC_CAPS_PRI              (1u << 2)
#define PFNIC_CAPS_SELFTEST         (1u << 3)

#define PFNIC_CONTROL_RESET         (1u << 0)

#define PFNIC_STATUS_READY          (1u << 0)
#define PFNIC_STATUS_ERROR          (1u << 1)

#define PFNIC_IRQ_SELFTEST          (1u << 0)

#define PFNIC_CTX_CTRL_ENABLE       (1u << 0)
#define PFNIC_CTX_STATUS_ACTIVE     (1u << 0)
#define PFNIC_CTX_STATUS_WAITING    (1u << 1)
#define PFNIC_RING_MIN              2
#define PFNIC_RING_MAX              4096

/* Descriptors (docs/registers.md, "Descriptor rings and doorbells") */
#define PFNIC_DESC_SIZE             64
#define PFNIC_OP_COPY               1
#define PFNIC_OP_FILL               2
#define PFNIC_OP_COMPARE            3
#define PFNIC_DESC_DONE             (1u << 31)
#define PFNIC_ST_SUCCESS            1
#define PFNIC_ST_PAGE_FAULT         2
#define PFNIC_ST_BAD_DESCRIPTOR     3
#define PFNIC_ST_MISMATCH           4
#define PFNIC_DESC_MAX_LEN          (1ull << 30)

typedef struct PfnicDesc {
    uint8_t opcode;
    uint8_t flags;
    uint16_t reserved0;
    uint32_t status;
    uint64_t src;
    uint64_t dst;
    uint64_t len;
    uint64_t pattern;
    uint64_t result;
    uint32_t page_requests;
    uint32_t reserved1;
    uint64_t cookie;
} PfnicDesc;
#define PFNIC_CTX_PASID_MASK        0xfffffu

/* Capability parameters */
#define PFNIC_PASID_WIDTH           20
#define PFNIC_PRI_OUTSTANDING       32

#endif /* HW_PFNIC_REGS_H */
