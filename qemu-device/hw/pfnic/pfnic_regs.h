/*
 * pfnic register layout (device ABI 1.1)
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

/* Register values and fields */
#define PFNIC_ID_VALUE              0x434e4650 /* "PFNC" in memory order */
#define PFNIC_ABI_MAJOR             1
#define PFNIC_ABI_MINOR             1
#define PFNIC_VERSION_VALUE         ((PFNIC_ABI_MAJOR << 16) | PFNIC_ABI_MINOR)
#define PFNIC_FW_VERSION_VALUE      0x01010000 /* model 1.1.0 */

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
#define PFNIC_CTX_PASID_MASK        0xfffffu

/* Capability parameters */
#define PFNIC_PASID_WIDTH           20
#define PFNIC_PRI_OUTSTANDING       32

#endif /* HW_PFNIC_REGS_H */
