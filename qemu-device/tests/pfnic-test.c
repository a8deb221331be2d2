/*
 * QTest for the pfnic device: config space, extended capabilities
 * (ATS, PASID, PRI and their properties), BAR0 registers, reset and the
 * self-test interrupt (seen as an MSI-X pending bit).
 *
 * pfnic sits behind a pcie-root-port on q35. libqos only reaches the
 * first 256 bytes of config space through 0xcf8, so the test programs the
 * MCH's PCIEXBAR and reads the extended capabilities through ECAM.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "libqtest-single.h"
#include "hw/pci/pci_regs.h"
#include "../../hw/net/pfnic/pfnic_regs.h"

#define ECAM_BASE       0xb0000000ULL
#define MCH_PCIEXBAR    0x60
#define RP_DEVFN        0x10            /* pcie-root-port at 02.0 */
#define NIC_BUS         1
#define WIN_BASE        0xc0000000ULL   /* root port memory window */
#define BAR0_ADDR       WIN_BASE
#define BAR4_ADDR       (WIN_BASE + 0x100000)
#define BAR2_ADDR       (WIN_BASE + 0x200000)
#define RING_ADDR       0x300000ULL     /* a descriptor ring in guest RAM */

#define PFNIC_ARGS "-M q35 -nodefaults " \
                   "-device pcie-root-port,id=rp0,chassis=1,addr=2.0 " \
                   "-device pcie-root-port,id=rp1,chassis=2,addr=3.0 "

static void cf8_writel(int devfn, uint8_t off, uint32_t val)
{
    outl(0xcf8, (1U << 31) | (devfn << 8) | off);
    outl(0xcfc, val);
}

static uint64_t ecam(int bus, int devfn, uint16_t off)
{
    return ECAM_BASE + ((uint64_t)bus << 20) + ((uint64_t)devfn << 12) + off;
}

static uint32_t nic_cfg_readl(uint16_t off)
{
    return readl(ecam(NIC_BUS, 0, off));
}

static uint16_t nic_cfg_readw(uint16_t off)
{
    return readw(ecam(NIC_BUS, 0, off));
}

static void nic_cfg_writel(uint16_t off, uint32_t val)
{
    writel(ecam(NIC_BUS, 0, off), val);
}

static void nic_cfg_writew(uint16_t off, uint16_t val)
{
    writew(ecam(NIC_BUS, 0, off), val);
}

/* Enable ECAM and route bus 1 plus a memory window through the root port. */
static void setup_topology(void)
{
    cf8_writel(0, MCH_PCIEXBAR + 4, ECAM_BASE >> 32);
    cf8_writel(0, MCH_PCIEXBAR, (uint32_t)ECAM_BASE | 1); /* 256 buses */
    cf8_writel(RP_DEVFN, PCI_PRIMARY_BUS, (NIC_BUS << 16) | (NIC_BUS << 8));
    cf8_writel(RP_DEVFN, PCI_MEMORY_BASE,
               ((WIN_BASE + 0xffffff) >> 16 & 0xfff0) << 16 |
               (WIN_BASE >> 16 & 0xfff0));
    cf8_writel(RP_DEVFN, PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
}

static void start(const char *extra)
{
    qtest_start(g_strdup_printf(PFNIC_ARGS "-device pfnic,bus=rp0%s", extra));
    setup_topology();
}

/* Map BAR0 and BAR4 (64-bit) and enable memory decoding. */
static void map_bars(void)
{
    nic_cfg_writel(PCI_BASE_ADDRESS_0, BAR0_ADDR);
    nic_cfg_writel(PCI_BASE_ADDRESS_4, BAR4_ADDR);
    nic_cfg_writel(PCI_BASE_ADDRESS_5, 0);
    nic_cfg_writel(PCI_BASE_ADDRESS_2, BAR2_ADDR);
    nic_cfg_writel(PCI_BASE_ADDRESS_3, 0);
    nic_cfg_writew(PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
}

static uint32_t reg_read(uint32_t reg)
{
    return readl(BAR0_ADDR + reg);
}

static void reg_write(uint32_t reg, uint32_t val)
{
    writel(BAR0_ADDR + reg, val);
}

static uint16_t find_cap(uint8_t id)
{
    uint8_t pos = nic_cfg_readw(PCI_CAPABILITY_LIST) & 0xfc;

    while (pos) {
        uint16_t hdr = nic_cfg_readw(pos);

        if ((hdr & 0xff) == id) {
            return pos;
        }
        pos = (hdr >> 8) & 0xfc;
    }
    return 0;
}

/* Fill ids[] with the extended capability IDs in list order. */
static int ext_caps(uint16_t *ids, uint16_t *offs, int max)
{
    uint16_t pos = PCI_CFG_SPACE_SIZE;
    int n = 0;

    while (pos && n < max) {
        uint32_t hdr = nic_cfg_readl(pos);

        if (hdr == 0 || hdr == 0xffffffff) {
            break;
        }
        ids[n] = PCI_EXT_CAP_ID(hdr);
        offs[n++] = pos;
        pos = PCI_EXT_CAP_NEXT(hdr);
    }
    return n;
}

static void test_config_space(void)
{
    uint16_t exp, msix;

    start("");
    g_assert_cmphex(nic_cfg_readw(PCI_VENDOR_ID), ==, PFNIC_PCI_VENDOR_ID);
    g_assert_cmphex(nic_cfg_readw(PCI_DEVICE_ID), ==, PFNIC_PCI_DEVICE_ID);
    g_assert_cmphex(nic_cfg_readw(PCI_SUBSYSTEM_VENDOR_ID), ==,
                    PFNIC_PCI_VENDOR_ID);
    g_assert_cmphex(nic_cfg_readw(PCI_SUBSYSTEM_ID), ==, PFNIC_PCI_SUBSYS_ID);
    g_assert_cmphex(nic_cfg_readw(PCI_CLASS_DEVICE), ==, 0x0280);
    g_assert_cmphex(nic_cfg_readl(PCI_CLASS_REVISION) & 0xff, ==,
                    PFNIC_PCI_REVISION);

    exp = find_cap(PCI_CAP_ID_EXP);
    g_assert_cmphex(exp, !=, 0);
    g_assert_cmphex((nic_cfg_readw(exp + PCI_EXP_FLAGS) & PCI_EXP_FLAGS_TYPE)
                    >> 4, ==, PCI_EXP_TYPE_ENDPOINT);

    msix = find_cap(PCI_CAP_ID_MSIX);
    g_assert_cmphex(msix, !=, 0);
    g_assert_cmpint((nic_cfg_readw(msix + PCI_MSIX_FLAGS) &
                     PCI_MSIX_FLAGS_QSIZE) + 1, ==, 8);
    g_assert_cmpint(nic_cfg_readl(msix + PCI_MSIX_TABLE) &
                    PCI_MSIX_TABLE_BIR, ==, PFNIC_BAR_MSIX);
    qtest_end();
}

static void test_ext_caps_default(void)
{
    uint16_t ids[8], offs[8];
    int n;

    start("");
    n = ext_caps(ids, offs, 8);
    g_assert_cmpint(n, ==, 3);
    g_assert_cmphex(ids[0], ==, PCI_EXT_CAP_ID_ATS);
    g_assert_cmphex(ids[1], ==, PCI_EXT_CAP_ID_PASID);
    g_assert_cmphex(ids[2], ==, PCI_EXT_CAP_ID_PRI);
    g_assert_cmphex(offs[0], ==, PCI_CFG_SPACE_SIZE);

    /* ATS: page-aligned requests */
    g_assert_true(nic_cfg_readw(offs[0] + PCI_ATS_CAP) &
                  PCI_ATS_CAP_PAGE_ALIGNED);
    /* PASID: 20 bits, no execute or privileged mode, disabled */
    g_assert_cmpint((nic_cfg_readw(offs[1] + PCI_PASID_CAP) >> 8) & 0x1f, ==,
                    PFNIC_PASID_WIDTH);
    g_assert_cmphex(nic_cfg_readw(offs[1] + PCI_PASID_CAP) &
                    (PCI_PASID_CAP_EXEC | PCI_PASID_CAP_PRIV), ==, 0);
    g_assert_cmphex(nic_cfg_readw(offs[1] + PCI_PASID_CTRL), ==, 0);
    /* PRI: 32 outstanding requests, PASID required on responses, stopped */
    g_assert_cmpint(nic_cfg_readl(offs[2] + PCI_PRI_MAX_REQ), ==,
                    PFNIC_PRI_OUTSTANDING);
    g_assert_true(nic_cfg_readw(offs[2] + PCI_PRI_STATUS) &
                  PCI_PRI_STATUS_PASID);
    g_assert_true(nic_cfg_readw(offs[2] + PCI_PRI_STATUS) &
                  PCI_PRI_STATUS_STOPPED);

    /* The guest can enable them. */
    nic_cfg_writew(offs[1] + PCI_PASID_CTRL, PCI_PASID_CTRL_ENABLE);
    g_assert_cmphex(nic_cfg_readw(offs[1] + PCI_PASID_CTRL), ==,
                    PCI_PASID_CTRL_ENABLE);
    qtest_end();
}

static void test_ext_caps_switchable(void)
{
    uint16_t ids[8], offs[8];

    start(",pri=off,pasid=off");
    g_assert_cmpint(ext_caps(ids, offs, 8), ==, 1);
    g_assert_cmphex(ids[0], ==, PCI_EXT_CAP_ID_ATS);
    qtest_end();

    start(",ats=off,pri=off");
    g_assert_cmpint(ext_caps(ids, offs, 8), ==, 1);
    g_assert_cmphex(ids[0], ==, PCI_EXT_CAP_ID_PASID);
    g_assert_cmphex(offs[0], ==, PCI_CFG_SPACE_SIZE);
    qtest_end();

    start(",pasid=off");
    g_assert_cmpint(ext_caps(ids, offs, 8), ==, 2);
    g_assert_cmphex(ids[1], ==, PCI_EXT_CAP_ID_PRI);
    /* Without PASID, responses need not carry one. */
    g_assert_false(nic_cfg_readw(offs[1] + PCI_PRI_STATUS) &
                   PCI_PRI_STATUS_PASID);
    qtest_end();
}

static void test_bad_properties(void)
{
    QDict *resp;

    start("");
    resp = qmp("{'execute': 'device_add', 'arguments': {"
               "'driver': 'pfnic', 'bus': 'rp1', 'ats': false}}");
    g_assert_true(qdict_haskey(resp, "error"));
    qobject_unref(resp);
    resp = qmp("{'execute': 'device_add', 'arguments': {"
               "'driver': 'pfnic', 'bus': 'rp1', 'vectors': 1}}");
    g_assert_true(qdict_haskey(resp, "error"));
    qobject_unref(resp);
    resp = qmp("{'execute': 'device_add', 'arguments': {"
               "'driver': 'pfnic', 'bus': 'rp1', 'contexts': 3}}");
    g_assert_true(qdict_haskey(resp, "error"));
    qobject_unref(resp);
    qtest_end();
}

static void test_registers(void)
{
    start(",pri=off,vectors=16,contexts=8");
    map_bars();
    g_assert_cmphex(reg_read(PFNIC_REG_ID), ==, PFNIC_ID_VALUE);
    g_assert_cmphex(reg_read(PFNIC_REG_VERSION), ==, PFNIC_VERSION_VALUE);
    g_assert_cmphex(reg_read(PFNIC_REG_FW_VERSION), ==,
                    PFNIC_FW_VERSION_VALUE);
    g_assert_cmphex(reg_read(PFNIC_REG_CAPS), ==,
                    PFNIC_CAPS_ATS | PFNIC_CAPS_PASID | PFNIC_CAPS_SELFTEST);
    g_assert_cmpint(reg_read(PFNIC_REG_NUM_VECTORS), ==, 16);
    g_assert_cmpint(reg_read(PFNIC_REG_NUM_CONTEXTS), ==, 8);
    g_assert_cmpint(reg_read(PFNIC_REG_PASID_WIDTH), ==, PFNIC_PASID_WIDTH);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);

    /* Scratch holds a value; read-only registers ignore writes. */
    reg_write(PFNIC_REG_SCRATCH, 0xdeadbeef);
    g_assert_cmphex(reg_read(PFNIC_REG_SCRATCH), ==, 0xdeadbeef);
    reg_write(PFNIC_REG_ID, 0);
    g_assert_cmphex(reg_read(PFNIC_REG_ID), ==, PFNIC_ID_VALUE);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==,
                    PFNIC_STATUS_READY | PFNIC_STATUS_ERROR);

    /* Reset clears state and the error latch. */
    reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    g_assert_cmphex(reg_read(PFNIC_REG_CONTROL), ==, 0);
    g_assert_cmphex(reg_read(PFNIC_REG_SCRATCH), ==, 0);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);

    /* Unknown offsets read as zero. */
    g_assert_cmphex(reg_read(0xffc), ==, 0);
    qtest_end();
}

static void wait_selftests(uint32_t count)
{
    for (int i = 0; i < 1000 && reg_read(PFNIC_REG_SELFTEST_COUNT) < count;
         i++) {
        clock_step(1000);
    }
    g_assert_cmpint(reg_read(PFNIC_REG_SELFTEST_COUNT), ==, count);
}

/*
 * Enable MSI-X with every vector masked, so that a notify leaves a pending
 * bit; return the offset of the PBA in BAR4.
 */
static uint32_t msix_enable_masked(void)
{
    uint16_t msix = find_cap(PCI_CAP_ID_MSIX);

    nic_cfg_writew(msix + PCI_MSIX_FLAGS,
                   PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL);
    return nic_cfg_readl(msix + PCI_MSIX_PBA) & ~PCI_MSIX_PBA_BIR;
}

static void test_selftest_msix(void)
{
    uint32_t pba;

    start("");
    map_bars();
    pba = msix_enable_masked();
    g_assert_cmphex(readl(BAR4_ADDR + pba), ==, 0);

    reg_write(PFNIC_REG_SELFTEST_COOKIE, 0x12345678);
    reg_write(PFNIC_REG_SELFTEST_TRIGGER, 3);
    wait_selftests(1);
    g_assert_cmphex(reg_read(PFNIC_REG_SELFTEST_ECHO), ==, ~0x12345678u);
    g_assert_cmphex(reg_read(PFNIC_REG_IRQ_STATUS), ==, PFNIC_IRQ_SELFTEST);
    g_assert_cmphex(readl(BAR4_ADDR + pba), ==, 1u << 3);

    /* IRQ_STATUS is write-1-to-clear. */
    reg_write(PFNIC_REG_IRQ_STATUS, PFNIC_IRQ_SELFTEST);
    g_assert_cmphex(reg_read(PFNIC_REG_IRQ_STATUS), ==, 0);

    /* A vector past NUM_VECTORS is a guest error and raises nothing. */
    reg_write(PFNIC_REG_SELFTEST_TRIGGER, 8);
    clock_step(1000000);
    g_assert_cmpint(reg_read(PFNIC_REG_SELFTEST_COUNT), ==, 1);
    g_assert_true(reg_read(PFNIC_REG_STATUS) & PFNIC_STATUS_ERROR);
    g_assert_cmphex(readl(BAR4_ADDR + pba), ==, 1u << 3);
    qtest_end();
}

static void ctx_select(uint32_t ctx)
{
    reg_write(PFNIC_REG_CTX_SELECT, ctx);
}

static bool ctx_active(uint32_t ctx)
{
    ctx_select(ctx);
    return reg_read(PFNIC_REG_CTX_STATUS) & PFNIC_CTX_STATUS_ACTIVE;
}

/* Enable one extended capability the way the IOMMU driver does. */
static void enable_ext_cap(uint16_t id)
{
    uint16_t ids[8], offs[8];
    int n = ext_caps(ids, offs, 8);

    for (int i = 0; i < n; i++) {
        if (ids[i] != id) {
            continue;
        }
        switch (id) {
        case PCI_EXT_CAP_ID_PASID:
            nic_cfg_writew(offs[i] + PCI_PASID_CTRL, PCI_PASID_CTRL_ENABLE);
            break;
        case PCI_EXT_CAP_ID_ATS:
            nic_cfg_writew(offs[i] + PCI_ATS_CTRL, PCI_ATS_CTRL_ENABLE);
            break;
        case PCI_EXT_CAP_ID_PRI:
            nic_cfg_writew(offs[i] + PCI_PRI_CTRL, PCI_PRI_CTRL_ENABLE);
            break;
        }
    }
}

/* What a context needs, enabled as Linux does when it binds SVA with PRI. */
static void enable_sva_caps(void)
{
    enable_ext_cap(PCI_EXT_CAP_ID_PASID);
    enable_ext_cap(PCI_EXT_CAP_ID_ATS);
    enable_ext_cap(PCI_EXT_CAP_ID_PRI);
}

/* Expect the last write to have been refused as a guest error. */
static void assert_refused(void)
{
    g_assert_true(reg_read(PFNIC_REG_STATUS) & PFNIC_STATUS_ERROR);
    reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
}

static void test_contexts(void)
{
    start(",contexts=4");
    map_bars();

    /* PASID 0 is reserved for requests without PASID. */
    ctx_select(1);
    reg_write(PFNIC_REG_CTX_CTRL, PFNIC_CTX_CTRL_ENABLE);
    g_assert_false(ctx_active(1));
    assert_refused();

    /* A PASID wider than PASID_WIDTH is masked to bits 19:0. */
    ctx_select(1);
    reg_write(PFNIC_REG_CTX_PASID, 0xfff00005);
    g_assert_cmphex(reg_read(PFNIC_REG_CTX_PASID), ==, 0x00005);

    /* Not before PASID, ATS and PRI are all enabled. */
    reg_write(PFNIC_REG_CTX_CTRL, PFNIC_CTX_CTRL_ENABLE);
    g_assert_false(ctx_active(1));
    assert_refused();
    enable_ext_cap(PCI_EXT_CAP_ID_PASID);
    enable_ext_cap(PCI_EXT_CAP_ID_ATS);
    ctx_select(1);
    reg_write(PFNIC_REG_CTX_PASID, 5);
    reg_write(PFNIC_REG_CTX_CTRL, PFNIC_CTX_CTRL_ENABLE);
    g_assert_false(ctx_active(1));
    assert_refused();

    /* A device reset leaves config space alone: PASID and ATS are on. */
    enable_ext_cap(PCI_EXT_CAP_ID_PRI);
    ctx_select(1);
    reg_write(PFNIC_REG_CTX_PASID, 5);
    reg_write(PFNIC_REG_CTX_CTRL, PFNIC_CTX_CTRL_ENABLE);
    g_assert_true(ctx_active(1));
    g_assert_false(ctx_active(0));
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);

    /* The PASID of an enabled context cannot change. */
    ctx_select(1);
    reg_write(PFNIC_REG_CTX_PASID, 6);
    g_assert_cmphex(reg_read(PFNIC_REG_CTX_PASID), ==, 5);
    g_assert_true(reg_read(PFNIC_REG_STATUS) & PFNIC_STATUS_ERROR);

    /* Out-of-range contexts are refused and change nothing. */
    ctx_select(4);
    reg_write(PFNIC_REG_CTX_PASID, 7);
    reg_write(PFNIC_REG_CTX_CTRL, PFNIC_CTX_CTRL_ENABLE);
    g_assert_cmphex(reg_read(PFNIC_REG_CTX_STATUS), ==, 0);
    g_assert_true(ctx_active(1));

    /* Disabling stops the context; reset stops them all. */
    ctx_select(1);
    reg_write(PFNIC_REG_CTX_CTRL, 0);
    g_assert_false(ctx_active(1));
    ctx_select(2);
    reg_write(PFNIC_REG_CTX_PASID, 9);
    reg_write(PFNIC_REG_CTX_CTRL, PFNIC_CTX_CTRL_ENABLE);
    g_assert_true(ctx_active(2));
    reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    g_assert_false(ctx_active(2));
    ctx_select(2);
    g_assert_cmphex(reg_read(PFNIC_REG_CTX_PASID), ==, 0);
    qtest_end();
}

/* Enable context @ctx with PASID 5 and a ring of 8 at @ring, vector 2. */
static void start_ctx(uint32_t ctx, uint64_t ring)
{
    ctx_select(ctx);
    reg_write(PFNIC_REG_CTX_RING_LO, ring);
    reg_write(PFNIC_REG_CTX_RING_HI, ring >> 32);
    reg_write(PFNIC_REG_CTX_RING_SIZE, 8);
    reg_write(PFNIC_REG_CTX_VECTOR, 2);
    reg_write(PFNIC_REG_CTX_PASID, 5);
    reg_write(PFNIC_REG_CTX_CTRL, PFNIC_CTX_CTRL_ENABLE);
    g_assert_true(ctx_active(ctx));
}

static void doorbell(uint32_t ctx, uint32_t tail)
{
    writel(BAR2_ADDR + ctx * PFNIC_DOORBELL_PAGE_SIZE, tail);
}

/*
 * Without an IOMMU nothing can be translated or faulted in: a descriptor
 * completes with PAGE_FAULT, written back to the ring, and signals the
 * context's vector. A ring the device cannot read stops the context, which
 * can be started again; a doorbell past the ring is refused.
 */
static void test_engine(void)
{
    uint32_t pba, status = 0;

    start(",contexts=4");
    map_bars();
    pba = msix_enable_masked();
    enable_sva_caps();

    /* A FILL of one page: no translation possible. */
    PfnicDesc d = {
        .opcode = PFNIC_OP_FILL, .dst = cpu_to_le64(0x10000000),
        .len = cpu_to_le64(4096), .pattern = cpu_to_le64(0x55),
    };
    memwrite(RING_ADDR, &d, sizeof(d));
    start_ctx(1, RING_ADDR);
    doorbell(1, 1);
    for (int i = 0; i < 1000 && !(status & PFNIC_DESC_DONE); i++) {
        clock_step(1000);
        memread(RING_ADDR + offsetof(PfnicDesc, status), &status, 4);
        status = le32_to_cpu(status);
    }
    g_assert_cmphex(status, ==, PFNIC_DESC_DONE | PFNIC_ST_PAGE_FAULT);
    ctx_select(1);
    g_assert_cmpint(reg_read(PFNIC_REG_CTX_HEAD), ==, 1);
    g_assert_cmphex(readl(BAR4_ADDR + pba), ==, 1u << 2);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);

    /* A doorbell more than a ring ahead is refused. */
    doorbell(1, 100);
    clock_step(1000000);
    g_assert_cmpint(reg_read(PFNIC_REG_CTX_HEAD), ==, 1);
    assert_refused();

    /* An unreadable ring stops the context; it can be started again. */
    for (int round = 0; round < 3; round++) {
        start_ctx(2, 0xfffff0000000ULL);
        doorbell(2, 1);
        clock_step(1000000);
        g_assert_false(ctx_active(2));
        g_assert_true(reg_read(PFNIC_REG_STATUS) & PFNIC_STATUS_ERROR);
        reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    }
    qtest_end();
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qtest_add_func("/pfnic/config-space", test_config_space);
    qtest_add_func("/pfnic/ext-caps/default", test_ext_caps_default);
    qtest_add_func("/pfnic/ext-caps/switchable", test_ext_caps_switchable);
    qtest_add_func("/pfnic/bad-properties", test_bad_properties);
    qtest_add_func("/pfnic/registers", test_registers);
    qtest_add_func("/pfnic/selftest-msix", test_selftest_msix);
    qtest_add_func("/pfnic/contexts", test_contexts);
    qtest_add_func("/pfnic/engine", test_engine);
    return g_test_run();
}
