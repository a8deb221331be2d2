/*
 * QTest for the pfnic device: config space, extended capabilities
 * (ATS, PASID, PRI and their properties), BAR0 registers, reset, the
 * self-test interrupt (seen as an MSI-X pending bit), the descriptor
 * engine and the verbs (docs/verbs.md): the command mailbox, the event
 * queue, the doorbells and work requests executed without an IOMMU.
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
#include "qemu/cutils.h"
#include "libqtest-single.h"
#include "qobject/qbool.h"
#include "qobject/qdict.h"
#include "qobject/qnum.h"
#include <sys/socket.h>
#include <sys/un.h>
#include "hw/pci/pci_regs.h"
#include "../../hw/net/pfnic/pfnic_regs.h"
#include "fuzz/pfnic_fuzz.h"

#define RP_DEVFN        0x10            /* pcie-root-port at 02.0 */
#define RP1_DEVFN       0x18            /* pcie-root-port at 03.0 */
#define WIN_BASE        0xc0000000ULL   /* root port memory window */
#define WIN1_BASE       0xd0000000ULL   /* the second root port's */
/*
 * The pfnic the helpers below address: the one on rp0 (bus 1), or, in the
 * wire tests, the one on rp1 (bus 2), switched with use_nic().
 */
static int nic_bus = 1;
static uint64_t nic_win = WIN_BASE;
#define NIC_BUS         nic_bus
#define BAR0_ADDR       nic_win
#define BAR4_ADDR       (nic_win + 0x100000)
#define BAR2_ADDR       (nic_win + 0x200000)
#define BAR1_ADDR       (nic_win + 0x400000)   /* device memory, ABI 1.13 */
#define RING_ADDR       0x300000ULL     /* a descriptor ring in guest RAM */

#define PFNIC_ARGS "-M q35 -nodefaults " \
                   "-device pcie-root-port,id=rp0,chassis=1,addr=2.0 " \
                   "-device pcie-root-port,id=rp1,chassis=2,addr=3.0 "

static uint64_t ecam(int bus, int devfn, uint16_t off)
{
    return pfnic_qt_ecam(bus, devfn, off);
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
    nic_bus = 1;
    nic_win = WIN_BASE;
    pfnic_qt_enable_ecam(global_qtest);
    pfnic_qt_setup_root_port(global_qtest, RP_DEVFN, 1, WIN_BASE);
}

static void start(const char *extra)
{
    qtest_start(g_strdup_printf(PFNIC_ARGS "-device pfnic,bus=rp0%s", extra));
    setup_topology();
}

/*
 * Map BAR0, BAR1 (device memory, when there is some), BAR2 and BAR4 (both
 * 64-bit) and enable memory decoding.
 */
static void map_bars(void)
{
    nic_cfg_writel(PCI_BASE_ADDRESS_0, BAR0_ADDR);
    nic_cfg_writel(PCI_BASE_ADDRESS_1, BAR1_ADDR);
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
    return pfnic_qt_ext_caps(global_qtest, NIC_BUS, ids, offs, max);
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
    /* PRI: 2048 outstanding requests, PASID required on responses, stopped */
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

/* device_add of a pfnic whose property @prop is @value must fail. */
static void assert_device_add_fails(const char *prop, QObject *value)
{
    QDict *args = qdict_new();
    QDict *resp;

    qdict_put_str(args, "driver", "pfnic");
    qdict_put_str(args, "bus", "rp1");
    qdict_put_obj(args, prop, value);
    resp = qmp("{'execute': 'device_add', 'arguments': %p}", args);
    g_assert_true(qdict_haskey(resp, "error"));
    qobject_unref(resp);
}

static void test_bad_properties(void)
{
    start("");
    assert_device_add_fails("ats", QOBJECT(qbool_from_bool(false)));
    assert_device_add_fails("vectors", QOBJECT(qnum_from_int(1)));
    assert_device_add_fails("contexts", QOBJECT(qnum_from_int(3)));
    assert_device_add_fails("pri-requests", QOBJECT(qnum_from_int(0)));
    assert_device_add_fails("pri-requests", QOBJECT(qnum_from_int(4096)));
    assert_device_add_fails("table-entries", QOBJECT(qnum_from_int(0)));
    assert_device_add_fails("table-entries",
                            QOBJECT(qnum_from_int(PFNIC_TABLE_ENTRIES_MAX +
                                                  1ull)));
    /* ABI 1.13: 0, or a power of two in 4 KiB..16 MiB */
    assert_device_add_fails("dm-size", QOBJECT(qnum_from_int(5000)));
    assert_device_add_fails("dm-size", QOBJECT(qnum_from_int(2048)));
    assert_device_add_fails("dm-size", QOBJECT(qnum_from_int(32 << 20)));
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
                    PFNIC_CAPS_ATS | PFNIC_CAPS_PASID | PFNIC_CAPS_SELFTEST |
                    PFNIC_CAPS_VERBS | PFNIC_CAPS_TABLES | PFNIC_CAPS_SRQ |
                    PFNIC_CAPS_TIMESTAMPS | PFNIC_CAPS_DM);
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

/* The driver rings a context's descriptor ring through RING_DB in BAR0. */
static void doorbell(uint32_t ctx, uint32_t tail)
{
    reg_write(PFNIC_REG_RING_DB, ctx << 16 | (tail & 0xffff));
}

/* Enable context @ctx without a PASID, a ring of 8 at @ring, vector 2. */
static void start_ctx_no_pasid(uint32_t ctx, uint64_t ring)
{
    ctx_select(ctx);
    reg_write(PFNIC_REG_CTX_RING_LO, ring);
    reg_write(PFNIC_REG_CTX_RING_HI, ring >> 32);
    reg_write(PFNIC_REG_CTX_RING_SIZE, 8);
    reg_write(PFNIC_REG_CTX_VECTOR, 2);
    reg_write(PFNIC_REG_CTX_CTRL,
              PFNIC_CTX_CTRL_ENABLE | PFNIC_CTX_CTRL_NO_PASID);
    g_assert_cmphex(reg_read(PFNIC_REG_CTX_STATUS), ==,
                    PFNIC_CTX_STATUS_ACTIVE | PFNIC_CTX_STATUS_NO_PASID);
}

/* Wait for descriptor @n (free-running) of a ring of 8 at @ring. */
static uint32_t wait_desc(uint64_t ring, uint32_t n)
{
    uint64_t addr = ring + (n % 8) * PFNIC_DESC_SIZE;
    uint32_t status = 0;

    for (int i = 0; i < 1000 && !(status & PFNIC_DESC_DONE); i++) {
        clock_step(1000);
        memread(addr + offsetof(PfnicDesc, status), &status, 4);
        status = le32_to_cpu(status);
    }
    return status;
}

/* Nothing went to ATS or PRI: every device counter is still 0. */
static void assert_no_ats_pri(void)
{
    for (int c = 0; c < PFNIC_CNT_NR; c++) {
        g_assert_cmpint(reg_read(PFNIC_REG_COUNTERS + 4 * c), ==, 0);
    }
}

/*
 * Contexts without a PASID (ABI 1.8) start with no PASID, ATS or PRI at
 * all, read back as such, cannot change mode while enabled, complete
 * every descriptor BAD_DESCRIPTOR, and stop and reset as the others.
 */
static void test_contexts_no_pasid(void)
{
    PfnicDesc d = {
        .opcode = PFNIC_OP_FILL, .dst = cpu_to_le64(0x10000000),
        .len = cpu_to_le64(64), .pattern = cpu_to_le64(0x55),
    };
    uint32_t pba;

    start(",contexts=4,ats=off,pasid=off,pri=off");
    map_bars();
    pba = msix_enable_masked();
    g_assert_true(reg_read(PFNIC_REG_CAPS) & PFNIC_CAPS_TABLES);
    g_assert_cmpint(reg_read(PFNIC_REG_PASID_WIDTH), ==, 0);

    /* A context with a PASID is refused here; one without starts. */
    ctx_select(1);
    reg_write(PFNIC_REG_CTX_PASID, 5);
    reg_write(PFNIC_REG_CTX_CTRL, PFNIC_CTX_CTRL_ENABLE);
    g_assert_false(ctx_active(1));
    assert_refused();
    start_ctx_no_pasid(1, RING_ADDR);
    g_assert_cmphex(reg_read(PFNIC_REG_CTX_CTRL), ==,
                    PFNIC_CTX_CTRL_ENABLE | PFNIC_CTX_CTRL_NO_PASID);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    /* CTX_PASID is ignored: 0 is as good as any. */
    ctx_select(2);
    reg_write(PFNIC_REG_CTX_PASID, 0);
    start_ctx_no_pasid(2, RING_ADDR + 0x1000);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);

    /* The mode is set at the start: changing it while enabled is refused. */
    ctx_select(1);
    reg_write(PFNIC_REG_CTX_CTRL, PFNIC_CTX_CTRL_ENABLE);
    g_assert_cmphex(reg_read(PFNIC_REG_CTX_STATUS), ==,
                    PFNIC_CTX_STATUS_ACTIVE | PFNIC_CTX_STATUS_NO_PASID);
    assert_refused();

    /* Descriptors: BAD_DESCRIPTOR, written back and signalled */
    start_ctx_no_pasid(1, RING_ADDR);
    start_ctx_no_pasid(2, RING_ADDR + 0x1000);
    memwrite(RING_ADDR, &d, sizeof(d));
    d.opcode = PFNIC_OP_PREFETCH;
    memwrite(RING_ADDR + PFNIC_DESC_SIZE, &d, sizeof(d));
    doorbell(1, 2);
    g_assert_cmphex(wait_desc(RING_ADDR, 1), ==,
                    PFNIC_DESC_DONE | PFNIC_ST_BAD_DESCRIPTOR);
    g_assert_cmphex(wait_desc(RING_ADDR, 0), ==,
                    PFNIC_DESC_DONE | PFNIC_ST_BAD_DESCRIPTOR);
    ctx_select(1);
    g_assert_cmpint(reg_read(PFNIC_REG_CTX_HEAD), ==, 2);
    g_assert_cmphex(readl(BAR4_ADDR + pba), ==, 1u << 2);
    assert_no_ats_pri();

    /* NO_PASID alone stops it, as clearing ENABLE does. */
    reg_write(PFNIC_REG_CTX_CTRL, PFNIC_CTX_CTRL_NO_PASID);
    g_assert_cmphex(reg_read(PFNIC_REG_CTX_STATUS), ==, 0);
    g_assert_cmphex(reg_read(PFNIC_REG_CTX_CTRL), ==, 0);
    start_ctx_no_pasid(1, RING_ADDR);
    ctx_select(1);
    g_assert_cmpint(reg_read(PFNIC_REG_CTX_HEAD), ==, 0);
    reg_write(PFNIC_REG_CTX_CTRL, 0);
    g_assert_false(ctx_active(1));
    /* A reset stops every context. */
    g_assert_true(ctx_active(2));
    reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    g_assert_false(ctx_active(2));
    g_assert_cmphex(reg_read(PFNIC_REG_CTX_STATUS), ==, 0);
    qtest_end();
}

/*
 * Without an IOMMU nothing can be translated or faulted in: a descriptor
 * completes with PAGE_FAULT, written back to the ring, and signals the
 * context's vector. A ring the device cannot read stops the context, which
 * can be started again; a doorbell past the ring, or moving the tail back,
 * is refused, and offset 0 of the process's doorbell page no longer rings.
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

    /*
     * The ring's tail is the driver's: the process's page (BAR2) does not
     * move it (ABI 1.3 had it at offset 0).
     */
    memwrite(RING_ADDR, &d, sizeof(d));
    start_ctx(1, RING_ADDR);
    writel(BAR2_ADDR + 1 * PFNIC_DOORBELL_PAGE_SIZE, 1);
    clock_step(1000000);
    ctx_select(1);
    g_assert_cmpint(reg_read(PFNIC_REG_CTX_HEAD), ==, 0);
    /* A tail behind the head is refused: posted work stays posted. */
    doorbell(1, 0xffff);
    clock_step(1000000);
    ctx_select(1);
    g_assert_cmpint(reg_read(PFNIC_REG_CTX_HEAD), ==, 0);
    assert_refused();
    /* So is a context out of range. */
    reg_write(PFNIC_REG_RING_DB, 4 << 16 | 1);
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

/* --- verbs (docs/verbs.md) --------------------------------------------- */

/* Guest memory for the verbs objects */
#define CQ_RING         0x400000ULL     /* CQ n: CQ_RING + n * 0x10000 */
#define CQ_REC          0x480000ULL     /* CQ n: CQ_REC + n * 0x100 */
#define SQ_ADDR         0x500000ULL     /* QP n: SQ_ADDR + n * 0x10000 */
#define RQ_ADDR         0x600000ULL
#define QP_REC          0x700000ULL     /* QP n: QP_REC + n * 0x100 */
#define EQ_ADDR         0x780000ULL
#define EQ_VEC          5

static uint32_t cmd(uint32_t op, uint32_t *args, int n)
{
    for (int i = 0; i < n; i++) {
        reg_write(PFNIC_REG_CMD_ARG + 4 * i, args[i]);
    }
    reg_write(PFNIC_REG_CMD_OP, op);
    for (int i = 0; i < PFNIC_CMD_ARGS && args; i++) {
        args[i] = reg_read(PFNIC_REG_CMD_ARG + 4 * i);
    }
    return reg_read(PFNIC_REG_CMD_STATUS);
}

static uint32_t cmd1(uint32_t op, uint32_t a0)
{
    uint32_t a[PFNIC_CMD_ARGS] = { a0 };

    return cmd(op, a, 1);
}

/* MR_SET with a8 @flags (all arguments: a8 must not be a stale value) */
static uint32_t mr_set_flags(uint32_t index, uint32_t ctx, uint32_t pd,
                             uint32_t access, uint64_t addr, uint64_t len,
                             uint32_t flags, uint32_t *key)
{
    uint32_t a[PFNIC_CMD_ARGS] = {
        index, ctx, pd, access, addr, addr >> 32, len, len >> 32, flags,
    };
    uint32_t st = cmd(PFNIC_CMD_MR_SET, a, PFNIC_CMD_ARGS);

    if (key) {
        *key = a[0];
    }
    return st;
}

static uint32_t mr_set(uint32_t index, uint32_t ctx, uint32_t pd,
                       uint32_t access, uint64_t addr, uint64_t len,
                       uint32_t *key)
{
    return mr_set_flags(index, ctx, pd, access, addr, len, 0, key);
}

/* Which CQs were created with TIMESTAMP (ABI 1.12): 64-byte CQEs */
static bool cq_ts[PFNIC_MAX_CQS];

/* CQ_CREATE with a7 @flags (all arguments: a7 must not be a stale value) */
static uint32_t cq_create_flags(uint32_t cqn, uint32_t ctx, uint32_t log2,
                                uint32_t flags)
{
    uint64_t ring = CQ_RING + cqn * 0x10000ULL, rec = CQ_REC + cqn * 0x100;
    uint32_t a[PFNIC_CMD_ARGS] = {
        cqn, ctx, ring, ring >> 32, log2, rec, rec >> 32, flags,
    };
    uint8_t zero[0x10000] = { };
    uint32_t st;

    memwrite(ring, zero, sizeof(zero));
    memwrite(rec, zero, 16);
    st = cmd(PFNIC_CMD_CQ_CREATE, a, PFNIC_CMD_ARGS);
    if (st == PFNIC_CMD_OK) {
        cq_ts[cqn] = flags & PFNIC_CQ_FLAG_TIMESTAMP;
    }
    return st;
}

static uint32_t cq_create(uint32_t cqn, uint32_t ctx, uint32_t log2)
{
    return cq_create_flags(cqn, ctx, log2, 0);
}

/* QP_CREATE with receive queue entries 2^@rq_log2, a13 @flags, a14 @srqn */
static uint32_t qp_create_full(uint32_t qpn, uint32_t ctx, uint32_t pd,
                               uint32_t scq, uint32_t rcq, uint32_t log2,
                               uint32_t rq_log2, uint32_t flags,
                               uint32_t srqn)
{
    uint64_t sq = SQ_ADDR + qpn * 0x10000ULL, rq = RQ_ADDR + qpn * 0x10000ULL;
    uint64_t rec = QP_REC + qpn * 0x100;
    uint32_t a[PFNIC_CMD_ARGS] = {
        qpn, ctx, pd, scq, rcq, sq, sq >> 32, log2, rq, rq >> 32, rq_log2,
        rec, rec >> 32, flags, srqn,
    };

    /* All arguments: a14 (ABI 1.11, the SRQ) must not be a stale value. */
    return cmd(PFNIC_CMD_QP_CREATE, a, PFNIC_CMD_ARGS);
}

static uint32_t qp_create(uint32_t qpn, uint32_t ctx, uint32_t pd,
                          uint32_t scq, uint32_t rcq, uint32_t log2,
                          uint32_t flags)
{
    return qp_create_full(qpn, ctx, pd, scq, rcq, log2, log2, flags, 0);
}

/* A QP (queues of 16) whose receive WQEs come from SRQ @srqn (ABI 1.11) */
static uint32_t qp_create_srq(uint32_t qpn, uint32_t ctx, uint32_t pd,
                              uint32_t scq, uint32_t rcq, uint32_t srqn)
{
    return qp_create_full(qpn, ctx, pd, scq, rcq, 4, 4, PFNIC_QP_FLAG_SRQ,
                          srqn);
}

/*
 * The local ACK timeout the tests' loopback QPs have (IB encoding: 65.5 us)
 * and how long a sender to an unready peer waits before RETRY_EXC_ERR with
 * retry_cnt 7: the first try and 7 retries, a timeout each.
 */
#define TEST_ACK_TIMEOUT        4
#define TEST_ACK_NS             (4096 << TEST_ACK_TIMEOUT)
#define TEST_UNANSWERED_NS      (8 * TEST_ACK_NS)

static uint32_t qp_modify_full(uint32_t qpn, uint32_t state, uint32_t access,
                               uint32_t dest, uint32_t rnr_timer,
                               uint32_t rnr_retry, uint32_t retry_cnt,
                               uint32_t timeout)
{
    uint32_t a[PFNIC_CMD_ARGS] = {
        qpn, state, access, dest, rnr_timer, rnr_retry, retry_cnt,
        [11] = timeout,
    };

    /* All arguments: a7.. (the wire's) must not be stale values. */
    return cmd(PFNIC_CMD_QP_MODIFY, a, PFNIC_CMD_ARGS);
}

static uint32_t qp_modify(uint32_t qpn, uint32_t state, uint32_t access,
                          uint32_t dest, uint32_t rnr_timer,
                          uint32_t rnr_retry)
{
    return qp_modify_full(qpn, state, access, dest, rnr_timer, rnr_retry, 7,
                          TEST_ACK_TIMEOUT);
}

/* RESET -> INIT -> RTR -> RTS, connected to @dest. */
static void qp_connect(uint32_t qpn, uint32_t dest, uint32_t rnr_retry)
{
    uint32_t acc = PFNIC_ACCESS_REMOTE_WRITE | PFNIC_ACCESS_REMOTE_READ |
                   PFNIC_ACCESS_REMOTE_ATOMIC;

    g_assert_cmpint(qp_modify(qpn, PFNIC_QPS_INIT, acc, dest, 1, rnr_retry),
                    ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_modify(qpn, PFNIC_QPS_RTR, acc, dest, 1, rnr_retry),
                    ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_modify(qpn, PFNIC_QPS_RTS, acc, dest, 1, rnr_retry),
                    ==, PFNIC_CMD_OK);
}

static uint32_t qp_query(uint32_t qpn, uint32_t *a)
{
    a[0] = qpn;
    return cmd(PFNIC_CMD_QP_QUERY, a, 1);
}

static uint32_t qp_state(uint32_t qpn)
{
    uint32_t a[PFNIC_CMD_ARGS];

    g_assert_cmpint(qp_query(qpn, a), ==, PFNIC_CMD_OK);
    return a[0];
}

static void post_wqe(uint64_t queue, uint32_t slot, uint8_t opcode,
                     uint8_t flags, uint64_t wr_id, int num_sge,
                     uint64_t addr, uint32_t len, uint32_t key)
{
    PfnicWqe w = {
        .opcode = opcode, .flags = flags, .num_sge = num_sge,
        .imm_data = 0x78563412, .wr_id = cpu_to_le64(wr_id),
        .remote_addr = cpu_to_le64(0x20000000), .rkey = cpu_to_le32(key),
        .sge[0] = {
            .addr = cpu_to_le64(addr), .length = cpu_to_le32(len),
            .lkey = cpu_to_le32(key),
        },
    };

    memwrite(queue + slot * PFNIC_WQE_SIZE, &w, sizeof(w));
}

static void verbs_db(uint32_t ctx, uint32_t off, uint32_t val)
{
    writel(BAR2_ADDR + ctx * PFNIC_DOORBELL_PAGE_SIZE + off, val);
}

/*
 * The device clock (ABI 1.12) as a process reads it in context @ctx's
 * doorbell page: high, low, high again until the two high words agree.
 */
static uint64_t clock_read(uint32_t ctx)
{
    uint64_t page = BAR2_ADDR + ctx * PFNIC_DOORBELL_PAGE_SIZE;
    uint32_t hi, lo;

    do {
        hi = readl(page + PFNIC_DB_CLOCK_HI);
        lo = readl(page + PFNIC_DB_CLOCK_LO);
    } while (hi != readl(page + PFNIC_DB_CLOCK_HI));
    return (uint64_t)hi << 32 | lo;
}

/* Where CQE @slot of CQ @cqn is: 32 or (TIMESTAMP) 64 bytes a slot */
static uint64_t cqe_addr(uint32_t cqn, uint32_t slot)
{
    return CQ_RING + cqn * 0x10000ULL +
           slot * (cq_ts[cqn] ? PFNIC_CQE_TS_SIZE : PFNIC_CQE_SIZE);
}

static PfnicCqe read_cqe(uint32_t cqn, uint32_t slot)
{
    PfnicCqe c;

    memread(cqe_addr(cqn, slot), &c, sizeof(c));
    c.wr_id = le64_to_cpu(c.wr_id);
    c.byte_len = le32_to_cpu(c.byte_len);
    c.qp_num = le32_to_cpu(c.qp_num);
    c.src_qp = le32_to_cpu(c.src_qp);
    c.vendor_err = le32_to_cpu(c.vendor_err);
    return c;
}

/* Wait for the CQE in @slot to turn owned by software (@owner). */
static PfnicCqe wait_cqe(uint32_t cqn, uint32_t slot, uint8_t owner)
{
    PfnicCqe c = read_cqe(cqn, slot);

    for (int i = 0; i < 1000 && c.owner != owner; i++) {
        clock_step(10000);
        c = read_cqe(cqn, slot);
    }
    g_assert_cmpint(c.owner, ==, owner);
    return c;
}

static void read_eqe(uint32_t slot, uint8_t *type, uint8_t *owner,
                     uint32_t *object)
{
    uint8_t e[PFNIC_EQE_SIZE];

    memread(EQ_ADDR + slot * PFNIC_EQE_SIZE, e, sizeof(e));
    *type = e[0];
    *owner = e[3];
    *object = ldl_le_p(&e[4]);
}

static void eq_setup(uint32_t size)
{
    uint8_t zero[PFNIC_EQE_SIZE * 16] = { };

    memwrite(EQ_ADDR, zero, sizeof(zero));
    reg_write(PFNIC_REG_EQ_BASE_LO, EQ_ADDR);
    reg_write(PFNIC_REG_EQ_BASE_HI, 0);
    reg_write(PFNIC_REG_EQ_VECTOR, EQ_VEC);
    reg_write(PFNIC_REG_EQ_SIZE, size);
}

/*
 * Context 1 (with the SVA capabilities on) and its MR 1 (PD 7), with every
 * access, over [0x10000000, 0x30000000). Returns the MR's key.
 */
static uint32_t ctx_and_mr_setup(void)
{
    uint32_t key;

    enable_sva_caps();
    start_ctx(1, RING_ADDR);
    g_assert_cmpint(mr_set(1, 1, 7, PFNIC_ACCESS_LOCAL_WRITE |
                           PFNIC_ACCESS_REMOTE_WRITE |
                           PFNIC_ACCESS_REMOTE_READ |
                           PFNIC_ACCESS_REMOTE_ATOMIC |
                           PFNIC_ACCESS_ON_DEMAND,
                           0x10000000, 0x20000000, &key), ==, PFNIC_CMD_OK);
    return key;
}

/*
 * A context (1, with the SVA capabilities on), an MR of it (index 1, PD
 * 7), CQ 1 (send) and CQ 2 (receive), and QPs 2 and 3 connected to each
 * other in RTS. Returns the MR's key.
 */
static uint32_t verbs_setup(uint32_t rnr_retry)
{
    uint32_t key;

    key = ctx_and_mr_setup();
    g_assert_cmpint(cq_create(1, 1, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create(2, 1, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(2, 1, 7, 1, 2, 4, 0), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(3, 1, 7, 1, 2, 4, 0), ==, PFNIC_CMD_OK);
    qp_connect(2, 3, rnr_retry);
    qp_connect(3, 2, rnr_retry);
    return key;
}

static void test_verbs_limits(void)
{
    start("");
    map_bars();
    g_assert_cmphex(reg_read(PFNIC_REG_VERSION), ==, PFNIC_VERSION_VALUE);
    g_assert_cmphex(reg_read(PFNIC_REG_FW_VERSION), ==, PFNIC_FW_VERSION_VALUE);
    /*
     * ABI 1.15 (loopback senders retry an unready peer), model 1.15.0;
     * 1.14's PORT_CHANGE events, 1.13's CAPS bit 10 DM
     */
    g_assert_cmphex(reg_read(PFNIC_REG_VERSION), ==, 0x0001000f);
    g_assert_cmphex(reg_read(PFNIC_REG_FW_VERSION), ==, 0x010f0000);
    g_assert_cmpint(PFNIC_EV_PORT_CHANGE, ==, 8);
    g_assert_cmphex(PFNIC_CAPS_DM, ==, 1u << 10);
    g_assert_true(reg_read(PFNIC_REG_CAPS) & PFNIC_CAPS_DM);
    g_assert_cmphex(PFNIC_REG_DM_SIZE, ==, 0x290);
    g_assert_cmpint(reg_read(PFNIC_REG_DM_SIZE), ==, 256 * 1024);
    g_assert_cmphex(PFNIC_CAPS_TIMESTAMPS, ==, 1u << 9);
    g_assert_true(reg_read(PFNIC_REG_CAPS) & PFNIC_CAPS_TIMESTAMPS);
    g_assert_true(reg_read(PFNIC_REG_CAPS) & PFNIC_CAPS_VERBS);
    g_assert_cmpint(reg_read(PFNIC_REG_MAX_QPS), ==, 256);
    g_assert_cmpint(reg_read(PFNIC_REG_MAX_CQS), ==, 256);
    g_assert_cmpint(reg_read(PFNIC_REG_MAX_MRS), ==, 4096);
    g_assert_cmpint(reg_read(PFNIC_REG_MAX_WQES), ==, 4096);
    g_assert_cmpint(reg_read(PFNIC_REG_MAX_CQES), ==, 4096);
    g_assert_cmpint(reg_read(PFNIC_REG_MAX_SGE), ==, 4);
    g_assert_true(reg_read(PFNIC_REG_CAPS) & PFNIC_CAPS_SRQ);
    g_assert_cmpint(reg_read(PFNIC_REG_MAX_SRQS), ==, 64);
    /* Limits are read-only. */
    reg_write(PFNIC_REG_MAX_QPS, 1);
    g_assert_cmpint(reg_read(PFNIC_REG_MAX_QPS), ==, 256);
    assert_refused();
    reg_write(PFNIC_REG_MAX_SRQS, 1);
    g_assert_cmpint(reg_read(PFNIC_REG_MAX_SRQS), ==, 64);
    assert_refused();
    reg_write(PFNIC_REG_DM_SIZE, 4096);
    g_assert_cmpint(reg_read(PFNIC_REG_DM_SIZE), ==, 256 * 1024);
    assert_refused();
    /* An unknown command */
    g_assert_cmpint(cmd1(0x7f, 0), ==, PFNIC_CMD_BAD_OP);
    g_assert_cmpint(cmd1(0, 0), ==, PFNIC_CMD_BAD_OP);
    qtest_end();
}

static void test_verbs_mr(void)
{
    uint32_t key, key2, a[PFNIC_CMD_ARGS];
    bool renewed = false;

    start("");
    map_bars();

    /* Keys: 32 random bits, never zero; the index is not in them. */
    g_assert_cmpint(mr_set(4095, 3, 1, PFNIC_ACCESS_LOCAL_WRITE, 0x1000,
                           0x2000, &key), ==, PFNIC_CMD_OK);
    g_assert_cmphex(key, !=, 0);
    /* A filled entry is refused; re-registration draws a new key. */
    g_assert_cmpint(mr_set(4095, 3, 1, 0, 0x1000, 0x2000, NULL), ==,
                    PFNIC_CMD_BAD_STATE);
    for (int i = 0; i < 8; i++) {
        g_assert_cmpint(cmd1(PFNIC_CMD_MR_CLEAR, 4095), ==, PFNIC_CMD_OK);
        g_assert_cmpint(mr_set(4095, 3, 1, 0, 0x1000, 0x2000, &key2), ==,
                        PFNIC_CMD_OK);
        g_assert_cmphex(key2, !=, 0);
        renewed |= key2 != key;
    }
    g_assert_true(renewed);
    /* 64 live keys: all different, and their low bits are not the index. */
    {
        uint32_t keys[64];
        int index_in_key = 0;

        for (int i = 0; i < 64; i++) {
            g_assert_cmpint(mr_set(100 + i, 3, 1, 0, 0x1000, 0x1000,
                                   &keys[i]), ==, PFNIC_CMD_OK);
            index_in_key += (keys[i] & 0xfff) == 100 + i;
            for (int j = 0; j < i; j++) {
                g_assert_cmphex(keys[i], !=, keys[j]);
            }
        }
        g_assert_cmpint(index_in_key, <, 4);
        /* A key from a cleared entry names nothing, even its old index. */
        g_assert_cmpint(cmd1(PFNIC_CMD_MR_CLEAR, 100), ==, PFNIC_CMD_OK);
        g_assert_cmpint(mr_set(100, 3, 1, 0, 0x1000, 0x1000, &key2), ==,
                        PFNIC_CMD_OK);
        g_assert_cmphex(key2, !=, keys[0]);
    }

    /* Counters start at zero. */
    memset(a, 0xff, sizeof(a));
    a[0] = 4095;
    g_assert_cmpint(cmd(PFNIC_CMD_MR_QUERY, a, 1), ==, PFNIC_CMD_OK);
    for (int i = 0; i < 12; i++) {
        g_assert_cmphex(a[i], ==, 0);
    }

    /* The implicit MR: address 0, length 2^64 - 1 */
    g_assert_cmpint(mr_set(0, 0, 1, PFNIC_ACCESS_ON_DEMAND |
                           PFNIC_ACCESS_LOCAL_WRITE, 0, UINT64_MAX, &key), ==,
                    PFNIC_CMD_OK);
    g_assert_cmphex(key, !=, 0);

    /* Errors */
    g_assert_cmpint(mr_set(4096, 0, 1, 0, 0x1000, 0x1000, NULL), ==,
                    PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(mr_set(5, 64, 1, 0, 0x1000, 0x1000, NULL), ==,
                    PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(mr_set(5, 0, 1, 0x10, 0x1000, 0x1000, NULL), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mr_set(5, 0, 1, 0, 0x1000, 0, NULL), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mr_set(5, 0, 1, 0, 0x1000, UINT64_MAX, NULL), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_CLEAR, 4096), ==, PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_CLEAR, 5), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_QUERY, 4096), ==, PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_QUERY, 5), ==, PFNIC_CMD_BAD_STATE);

    /* A device reset clears the table. */
    reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_QUERY, 4095), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(reg_read(PFNIC_REG_CMD_STATUS), ==, PFNIC_CMD_BAD_STATE);
    qtest_end();
}

static void test_verbs_cq_qp(void)
{
    uint32_t a[PFNIC_CMD_ARGS];
    static const struct {
        uint32_t to, status;
    } steps[] = {
        { PFNIC_QPS_RTR, PFNIC_CMD_BAD_STATE },     /* RESET -> RTR */
        { PFNIC_QPS_RTS, PFNIC_CMD_BAD_STATE },     /* RESET -> RTS */
        { PFNIC_QPS_INIT, PFNIC_CMD_OK },
        { PFNIC_QPS_INIT, PFNIC_CMD_OK },           /* INIT -> INIT */
        { PFNIC_QPS_RTS, PFNIC_CMD_BAD_STATE },     /* INIT -> RTS */
        { PFNIC_QPS_SQD, PFNIC_CMD_BAD_STATE },
        { PFNIC_QPS_RTR, PFNIC_CMD_OK },
        { PFNIC_QPS_INIT, PFNIC_CMD_BAD_STATE },    /* RTR -> INIT */
        { PFNIC_QPS_RTS, PFNIC_CMD_OK },
        { PFNIC_QPS_RTS, PFNIC_CMD_OK },            /* RTS -> RTS */
        { PFNIC_QPS_RTR, PFNIC_CMD_BAD_STATE },     /* RTS -> RTR */
        { PFNIC_QPS_SQE, PFNIC_CMD_BAD_STATE },
        { PFNIC_QPS_ERR, PFNIC_CMD_OK },
        { PFNIC_QPS_RTS, PFNIC_CMD_BAD_STATE },     /* ERR -> RTS */
        { PFNIC_QPS_INIT, PFNIC_CMD_BAD_STATE },    /* ERR -> INIT */
        { PFNIC_QPS_RESET, PFNIC_CMD_OK },
        { PFNIC_QPS_RESET, PFNIC_CMD_OK },          /* RESET -> RESET */
        { PFNIC_QPS_INIT, PFNIC_CMD_OK },
        { PFNIC_QPS_RESET, PFNIC_CMD_OK },          /* any -> RESET */
    };

    start("");
    map_bars();

    /* CQs */
    g_assert_cmpint(cq_create(256, 0, 4), ==, PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(cq_create(1, 64, 4), ==, PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(cq_create(1, 0, 13), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(cq_create(1, 0, 12), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create(1, 0, 4), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(cq_create(2, 1, 0), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cmd1(PFNIC_CMD_CQ_DESTROY, 256), ==, PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(cmd1(PFNIC_CMD_CQ_DESTROY, 3), ==, PFNIC_CMD_BAD_STATE);

    /* QP_CREATE */
    g_assert_cmpint(qp_create(0, 0, 1, 1, 1, 4, 0), ==, PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(qp_create(1, 0, 1, 1, 1, 4, 0), ==, PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(qp_create(256, 0, 1, 1, 1, 4, 0), ==,
                    PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(qp_create(2, 64, 1, 1, 1, 4, 0), ==,
                    PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(qp_create(2, 0, 1, 256, 1, 4, 0), ==,
                    PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(qp_create(2, 0, 1, 1, 1, 13, 0), ==, PFNIC_CMD_BAD_ARG);
    /* Flag bit 2 is unknown (bit 1, SRQ, is test_verbs_srq_commands') */
    g_assert_cmpint(qp_create(2, 0, 1, 1, 1, 4, 4), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(qp_create(2, 0, 1, 1, 3, 4, 0), ==, PFNIC_CMD_BAD_STATE);
    /* CQ 2 belongs to context 1. */
    g_assert_cmpint(qp_create(2, 0, 1, 1, 2, 4, 0), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(qp_create(2, 0, 1, 1, 1, 4, PFNIC_QP_FLAG_SIGNAL_ALL), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(2, 0, 1, 1, 1, 4, 0), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(qp_create(255, 0, 1, 1, 1, 0, 0), ==, PFNIC_CMD_OK);

    /* A CQ in use cannot go. */
    g_assert_cmpint(cmd1(PFNIC_CMD_CQ_DESTROY, 1), ==, PFNIC_CMD_BUSY);

    /* The state machine */
    g_assert_cmpint(qp_state(2), ==, PFNIC_QPS_RESET);
    for (size_t i = 0; i < G_N_ELEMENTS(steps); i++) {
        uint32_t before = qp_state(2);

        g_assert_cmpint(qp_modify(2, steps[i].to, 0, 3, 0, 0), ==,
                        steps[i].status);
        g_assert_cmpint(qp_state(2), ==,
                        steps[i].status ? before : steps[i].to);
    }

    /* QP_MODIFY arguments */
    g_assert_cmpint(qp_modify(256, PFNIC_QPS_INIT, 0, 3, 0, 0), ==,
                    PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(qp_modify(3, PFNIC_QPS_INIT, 0, 3, 0, 0), ==,
                    PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(qp_modify(2, 7, 0, 3, 0, 0), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(qp_modify(2, PFNIC_QPS_INIT, 0x10, 3, 0, 0), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(qp_modify(2, PFNIC_QPS_INIT, 0, 256, 0, 0), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(qp_modify(2, PFNIC_QPS_INIT, 0, 3, 32, 0), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(qp_modify(2, PFNIC_QPS_INIT, 0, 3, 0, 8), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(qp_state(2), ==, PFNIC_QPS_RESET);

    /* QP_QUERY of a fresh QP */
    g_assert_cmpint(qp_query(255, a), ==, PFNIC_CMD_OK);
    for (int i = 0; i < 8; i++) {
        g_assert_cmphex(a[i], ==, 0);
    }
    g_assert_cmpint(qp_query(256, a), ==, PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_BAD_STATE);

    /* QP_DESTROY, then the CQ can go. */
    g_assert_cmpint(cmd1(PFNIC_CMD_QP_DESTROY, 256), ==, PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(cmd1(PFNIC_CMD_QP_DESTROY, 2), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cmd1(PFNIC_CMD_QP_DESTROY, 2), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(cmd1(PFNIC_CMD_CQ_DESTROY, 1), ==, PFNIC_CMD_BUSY);
    g_assert_cmpint(cmd1(PFNIC_CMD_QP_DESTROY, 255), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cmd1(PFNIC_CMD_CQ_DESTROY, 1), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cmd1(PFNIC_CMD_CQ_DESTROY, 1), ==, PFNIC_CMD_BAD_STATE);

    /* A device reset empties every table. */
    g_assert_cmpint(qp_create(2, 1, 1, 2, 2, 4, 0), ==, PFNIC_CMD_OK);
    reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    g_assert_cmpint(qp_query(2, a), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(cmd1(PFNIC_CMD_CQ_DESTROY, 2), ==, PFNIC_CMD_BAD_STATE);
    qtest_end();
}

static void test_verbs_eq(void)
{
    start("");
    map_bars();
    eq_setup(4);
    g_assert_cmphex(reg_read(PFNIC_REG_EQ_BASE_LO), ==, EQ_ADDR);
    g_assert_cmphex(reg_read(PFNIC_REG_EQ_BASE_HI), ==, 0);
    g_assert_cmpint(reg_read(PFNIC_REG_EQ_SIZE), ==, 4);
    g_assert_cmpint(reg_read(PFNIC_REG_EQ_VECTOR), ==, EQ_VEC);
    g_assert_cmpint(reg_read(PFNIC_REG_EQ_HEAD), ==, 0);
    g_assert_cmpint(reg_read(PFNIC_REG_EQ_OVERFLOW), ==, 0);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);

    /* Sizes: powers of 2 in 2..4096, or 0 */
    reg_write(PFNIC_REG_EQ_SIZE, 3);
    g_assert_cmpint(reg_read(PFNIC_REG_EQ_SIZE), ==, 4);
    assert_refused();
    eq_setup(4);
    reg_write(PFNIC_REG_EQ_SIZE, 8192);
    assert_refused();
    eq_setup(4);
    reg_write(PFNIC_REG_EQ_SIZE, 1);
    assert_refused();
    eq_setup(0);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);

    /* The vector must exist; the head cannot pass the producer. */
    reg_write(PFNIC_REG_EQ_VECTOR, 8);
    g_assert_cmpint(reg_read(PFNIC_REG_EQ_VECTOR), ==, EQ_VEC);
    assert_refused();
    eq_setup(4);
    reg_write(PFNIC_REG_EQ_HEAD, 1);
    g_assert_cmpint(reg_read(PFNIC_REG_EQ_HEAD), ==, 0);
    assert_refused();
    reg_write(PFNIC_REG_EQ_OVERFLOW, 1);
    assert_refused();

    /* An unaligned base is refused and aligned down. */
    reg_write(PFNIC_REG_EQ_BASE_LO, EQ_ADDR + 4);
    g_assert_cmphex(reg_read(PFNIC_REG_EQ_BASE_LO), ==, EQ_ADDR);
    assert_refused();
    g_assert_cmpint(reg_read(PFNIC_REG_EQ_SIZE), ==, 0);
    qtest_end();
}

/*
 * User doorbells: checked against the context whose page is written; a
 * tail past the queue puts the QP in ERR with a QP_FATAL event, signalled
 * on EQ_VECTOR.
 */
static void test_verbs_doorbells(void)
{
    uint32_t pba, object, a[PFNIC_CMD_ARGS];
    uint8_t type, owner;

    start(",contexts=4");
    map_bars();
    pba = msix_enable_masked();
    eq_setup(4);
    verbs_setup(7);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);

    /* QP 2 is context 1's: context 2's page (stopped) and 3's refuse. */
    verbs_db(2, PFNIC_DB_SQ, 2 << 16 | 1);
    assert_refused();
    verbs_setup(7);
    start_ctx(3, RING_ADDR);
    verbs_db(3, PFNIC_DB_SQ, 2 << 16 | 1);
    verbs_db(3, PFNIC_DB_RQ, 2 << 16 | 1);
    verbs_db(3, PFNIC_DB_CQ_ARM, 1 << 16);
    g_assert_true(reg_read(PFNIC_REG_STATUS) & PFNIC_STATUS_ERROR);
    clock_step(1000000);
    g_assert_cmpint(qp_query(2, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[0], ==, PFNIC_QPS_RTS);
    g_assert_cmpint(a[1], ==, 0);
    g_assert_cmpint(a[2], ==, 0);
    /* Unknown QPs and CQs, reserved offsets */
    verbs_db(1, PFNIC_DB_SQ, 200 << 16 | 1);
    verbs_db(1, PFNIC_DB_CQ_ARM, 9 << 16);
    verbs_db(1, 0x18, 1);
    g_assert_cmpint(readl(BAR4_ADDR + pba), ==, 0);
    assert_refused();

    /* A receive tail more than the queue (16) past the head: fatal */
    eq_setup(4);
    verbs_setup(7);
    verbs_db(1, PFNIC_DB_RQ, 3 << 16 | 17);
    g_assert_true(reg_read(PFNIC_REG_STATUS) & PFNIC_STATUS_ERROR);
    g_assert_cmpint(qp_state(3), ==, PFNIC_QPS_ERR);
    g_assert_cmpint(qp_state(2), ==, PFNIC_QPS_RTS);
    read_eqe(0, &type, &owner, &object);
    g_assert_cmpint(type, ==, PFNIC_EV_QP_FATAL);
    g_assert_cmpint(owner, ==, 1);
    g_assert_cmpint(object, ==, 3);
    g_assert_cmphex(readl(BAR4_ADDR + pba), ==, 1u << EQ_VEC);
    /*
     * Exactly 16 ahead is fine: QP 2 runs its (zeroed) WQEs, and the
     * first finds its destination in ERR.
     */
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | 16);
    g_assert_cmpint(wait_cqe(1, 0, 1).status, ==, PFNIC_WC_RETRY_EXC_ERR);
    g_assert_cmpint(qp_state(2), ==, PFNIC_QPS_ERR);
    read_eqe(1, &type, &owner, &object);
    g_assert_cmpint(owner, ==, 0);

    /* A tail never moves back: QP 2's receive tail 5, then 3, is fatal. */
    reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    eq_setup(4);
    verbs_setup(7);
    verbs_db(1, PFNIC_DB_RQ, 2 << 16 | 5);
    g_assert_cmpint(qp_state(2), ==, PFNIC_QPS_RTS);
    verbs_db(1, PFNIC_DB_RQ, 2 << 16 | 3);
    g_assert_cmpint(qp_state(2), ==, PFNIC_QPS_ERR);
    g_assert_cmpint(qp_state(3), ==, PFNIC_QPS_RTS);
    read_eqe(0, &type, &owner, &object);
    g_assert_cmpint(type, ==, PFNIC_EV_QP_FATAL);
    g_assert_cmpint(object, ==, 2);
    qtest_end();
}

/*
 * A SEND without an IOMMU: its gather buffer cannot be translated nor
 * faulted in, so it completes LOC_PROT_ERR, the QP enters ERR and later
 * WQEs are flushed. The receiver is untouched. The armed send CQ queues
 * a COMPLETION event, signalled as an MSI-X pending bit.
 */
static void test_verbs_send_fault(void)
{
    uint32_t pba, key, object, a[PFNIC_CMD_ARGS], rec[2];
    uint8_t type, owner;
    PfnicCqe c;

    start(",contexts=4");
    map_bars();
    pba = msix_enable_masked();
    eq_setup(4);
    key = verbs_setup(7);

    /* QP 3 posts a receive; QP 2 sends one page to it. */
    post_wqe(RQ_ADDR + 3 * 0x10000, 0, 0, 0, 0x3333, 1, 0x10002000, 4096,
             key);
    verbs_db(1, PFNIC_DB_RQ, 3 << 16 | 1);
    verbs_db(1, PFNIC_DB_CQ_ARM, 1 << 16);
    post_wqe(SQ_ADDR + 2 * 0x10000, 0, PFNIC_WR_SEND, PFNIC_SEND_SIGNALED,
             0xabcdef01234ULL, 1, 0x10000000, 4096, key);
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | 1);

    c = wait_cqe(1, 0, 1);
    g_assert_cmphex(c.wr_id, ==, 0xabcdef01234ULL);
    g_assert_cmpint(c.status, ==, PFNIC_WC_LOC_PROT_ERR);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_SEND);
    g_assert_cmpint(c.qp_num, ==, 2);
    g_assert_cmpint(c.byte_len, ==, 0);
    g_assert_cmpint(qp_state(2), ==, PFNIC_QPS_ERR);
    memread(QP_REC + 2 * 0x100, rec, sizeof(rec));
    g_assert_cmpint(le32_to_cpu(rec[0]), ==, 1);

    /* The armed CQ: one COMPLETION event on EQ_VECTOR */
    read_eqe(0, &type, &owner, &object);
    g_assert_cmpint(type, ==, PFNIC_EV_COMPLETION);
    g_assert_cmpint(owner, ==, 1);
    g_assert_cmpint(object, ==, 1);
    g_assert_cmphex(readl(BAR4_ADDR + pba), ==, 1u << EQ_VEC);

    /* The receiver is untouched: RTS, its receive WQE still posted. */
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[0], ==, PFNIC_QPS_RTS);
    g_assert_cmpint(a[2], ==, 0);
    g_assert_cmpint(read_cqe(2, 0).owner, ==, 0);

    /* A WQE posted in ERR is flushed; the CQ was not re-armed. */
    post_wqe(SQ_ADDR + 2 * 0x10000, 1, PFNIC_WR_RDMA_WRITE, 0, 0x77, 1,
             0x10000000, 8, key);
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | 2);
    c = wait_cqe(1, 1, 1);
    g_assert_cmphex(c.wr_id, ==, 0x77);
    g_assert_cmpint(c.status, ==, PFNIC_WC_WR_FLUSH_ERR);
    g_assert_cmpint(c.qp_num, ==, 2);
    g_assert_cmpint(qp_query(2, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[1], ==, 2);
    g_assert_cmpint(a[5], ==, 2);
    read_eqe(1, &type, &owner, &object);
    g_assert_cmpint(owner, ==, 0);

    /*
     * Consumed events: the head moves. Arming with CQEs pending raises
     * nothing for them (ABI 1.12); the next CQE, an error one, fires the
     * solicited-only arm.
     */
    reg_write(PFNIC_REG_EQ_HEAD, 1);
    g_assert_cmpint(reg_read(PFNIC_REG_EQ_HEAD), ==, 1);
    verbs_db(1, PFNIC_DB_CQ_ARM, 1 << 16 | PFNIC_CQ_ARM_SOLICITED);
    read_eqe(1, &type, &owner, &object);
    g_assert_cmpint(owner, ==, 0);
    post_wqe(SQ_ADDR + 2 * 0x10000, 2, PFNIC_WR_RDMA_WRITE, 0, 0x78, 1,
             0x10000000, 8, key);
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | 3);
    c = wait_cqe(1, 2, 1);
    g_assert_cmphex(c.wr_id, ==, 0x78);
    g_assert_cmpint(c.status, ==, PFNIC_WC_WR_FLUSH_ERR);
    read_eqe(1, &type, &owner, &object);
    g_assert_cmpint(type, ==, PFNIC_EV_COMPLETION);
    g_assert_cmpint(owner, ==, 1);
    g_assert_cmpint(object, ==, 1);

    /* QP 3 to ERR: its receive WQE is flushed to CQ 2. */
    g_assert_cmpint(qp_modify(3, PFNIC_QPS_ERR, 0, 2, 0, 0), ==,
                    PFNIC_CMD_OK);
    c = wait_cqe(2, 0, 1);
    g_assert_cmphex(c.wr_id, ==, 0x3333);
    g_assert_cmpint(c.status, ==, PFNIC_WC_WR_FLUSH_ERR);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_RECV);
    g_assert_cmpint(c.qp_num, ==, 3);
    /* No QP_FATAL for either: only bad doorbells and DMA errors are. */
    read_eqe(2, &type, &owner, &object);
    g_assert_cmpint(owner, ==, 0);
    qtest_end();
}

/* Each row: a WQE and the status it completes with. */
static void test_verbs_errors(void)
{
    uint32_t key, a[PFNIC_CMD_ARGS];
    PfnicCqe c;

    start(",contexts=4");
    map_bars();
    key = verbs_setup(0);

    /* Bad opcode: LOC_QP_OP_ERR */
    post_wqe(SQ_ADDR + 2 * 0x10000, 0, 9, 0, 1, 1, 0x10000000, 8, key);
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | 1);
    c = wait_cqe(1, 0, 1);
    g_assert_cmpint(c.status, ==, PFNIC_WC_LOC_QP_OP_ERR);
    g_assert_cmpint(qp_state(2), ==, PFNIC_QPS_ERR);
    g_assert_cmpint(qp_state(3), ==, PFNIC_QPS_RTS);

    /* Atomic of 4 bytes: LOC_QP_OP_ERR (from QP 3) */
    post_wqe(SQ_ADDR + 3 * 0x10000, 0, PFNIC_WR_ATOMIC_FETCH_AND_ADD, 0, 2,
             1, 0x10000000, 4, key);
    verbs_db(1, PFNIC_DB_SQ, 3 << 16 | 1);
    c = wait_cqe(1, 1, 1);
    g_assert_cmpint(c.status, ==, PFNIC_WC_LOC_QP_OP_ERR);
    g_assert_cmpint(c.qp_num, ==, 3);

    /* Reset both, connect again. */
    for (uint32_t q = 2; q <= 3; q++) {
        g_assert_cmpint(qp_modify(q, PFNIC_QPS_RESET, 0, 0, 0, 0), ==,
                        PFNIC_CMD_OK);
        qp_connect(q, 5 - q, 0);
    }

    /* Bad local key: LOC_PROT_ERR (the head continues from slot 1) */
    post_wqe(SQ_ADDR + 2 * 0x10000, 1, PFNIC_WR_RDMA_WRITE,
             PFNIC_SEND_SIGNALED, 3, 1, 0x10000000, 8, key ^ 0x80);
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | 2);
    c = wait_cqe(1, 2, 1);
    g_assert_cmpint(c.status, ==, PFNIC_WC_LOC_PROT_ERR);
    g_assert_cmphex(c.wr_id, ==, 3);
    g_assert_cmpint(qp_modify(2, PFNIC_QPS_RESET, 0, 0, 0, 0), ==,
                    PFNIC_CMD_OK);
    qp_connect(2, 3, 0);

    /* Atomic at a faulting remote address: REM_ACCESS_ERR */
    post_wqe(SQ_ADDR + 3 * 0x10000, 1, PFNIC_WR_ATOMIC_CMP_AND_SWP,
             PFNIC_SEND_SIGNALED, 4, 1, 0x10000000, 8, key);
    verbs_db(1, PFNIC_DB_SQ, 3 << 16 | 2);
    c = wait_cqe(1, 3, 1);
    g_assert_cmpint(c.status, ==, PFNIC_WC_REM_ACCESS_ERR);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_COMP_SWAP);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[0], ==, PFNIC_QPS_ERR);

    /* SEND with no receive WQE and rnr_retry 0: RNR_RETRY_EXC_ERR */
    g_assert_cmpint(qp_modify(2, PFNIC_QPS_RESET, 0, 0, 0, 0), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(qp_modify(3, PFNIC_QPS_RESET, 0, 0, 0, 0), ==,
                    PFNIC_CMD_OK);
    qp_connect(2, 3, 0);
    qp_connect(3, 2, 0);
    post_wqe(SQ_ADDR + 2 * 0x10000, 2, PFNIC_WR_SEND, 0, 5, 0, 0, 0, key);
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | 3);
    c = wait_cqe(1, 4, 1);
    g_assert_cmpint(c.status, ==, PFNIC_WC_RNR_RETRY_EXC_ERR);

    /* One RNR retry: one RNR wait of the destination's timer, then fail */
    g_assert_cmpint(qp_modify(2, PFNIC_QPS_RESET, 0, 0, 0, 0), ==,
                    PFNIC_CMD_OK);
    qp_connect(2, 3, 1);
    post_wqe(SQ_ADDR + 2 * 0x10000, 3, PFNIC_WR_SEND, 0, 6, 0, 0, 0, key);
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | 4);
    c = wait_cqe(1, 5, 1);
    g_assert_cmpint(c.status, ==, PFNIC_WC_RNR_RETRY_EXC_ERR);
    g_assert_cmpint(qp_query(2, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[4], ==, 1);

    /* Destination not ready (INIT): RETRY_EXC_ERR */
    g_assert_cmpint(qp_modify(2, PFNIC_QPS_RESET, 0, 0, 0, 0), ==,
                    PFNIC_CMD_OK);
    qp_connect(2, 3, 7);
    g_assert_cmpint(qp_modify(3, PFNIC_QPS_RESET, 0, 0, 0, 0), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(qp_modify(3, PFNIC_QPS_INIT, 0, 2, 0, 0), ==,
                    PFNIC_CMD_OK);
    post_wqe(SQ_ADDR + 2 * 0x10000, 4, PFNIC_WR_SEND, 0, 7, 0, 0, 0, key);
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | 5);
    c = wait_cqe(1, 6, 1);
    g_assert_cmpint(c.status, ==, PFNIC_WC_RETRY_EXC_ERR);

    /* RDMA_WRITE with a bad rkey: REM_ACCESS_ERR */
    g_assert_cmpint(qp_modify(2, PFNIC_QPS_RESET, 0, 0, 0, 0), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(qp_modify(3, PFNIC_QPS_RESET, 0, 0, 0, 0), ==,
                    PFNIC_CMD_OK);
    qp_connect(2, 3, 7);
    qp_connect(3, 2, 7);
    {
        PfnicWqe w = {
            .opcode = PFNIC_WR_RDMA_WRITE, .num_sge = 1,
            .wr_id = cpu_to_le64(8), .remote_addr = cpu_to_le64(0x10000000),
            .rkey = cpu_to_le32(key + 1),
            .sge[0] = {
                .addr = cpu_to_le64(0x10000000), .length = cpu_to_le32(8),
                .lkey = cpu_to_le32(key),
            },
        };

        memwrite(SQ_ADDR + 2 * 0x10000 + 5 * PFNIC_WQE_SIZE, &w, sizeof(w));
    }
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | 6);
    c = wait_cqe(1, 7, 1);
    g_assert_cmpint(c.status, ==, PFNIC_WC_REM_ACCESS_ERR);
    g_assert_cmphex(c.wr_id, ==, 8);
    g_assert_cmpint(qp_state(3), ==, PFNIC_QPS_RTS);
    qtest_end();
}

/* An RDMA WRITE of @len bytes from 0x10000000 to @raddr with @rkey. */
static void post_write(uint32_t qpn, uint32_t slot, uint64_t wr_id,
                       uint32_t lkey, uint32_t rkey, uint64_t raddr,
                       uint32_t len)
{
    PfnicWqe w = {
        .opcode = PFNIC_WR_RDMA_WRITE, .flags = PFNIC_SEND_SIGNALED,
        .num_sge = 1, .wr_id = cpu_to_le64(wr_id),
        .remote_addr = cpu_to_le64(raddr), .rkey = cpu_to_le32(rkey),
        .sge[0] = {
            .addr = cpu_to_le64(0x10000000), .length = cpu_to_le32(len),
            .lkey = cpu_to_le32(lkey),
        },
    };

    memwrite(SQ_ADDR + qpn * 0x10000 + slot * PFNIC_WQE_SIZE, &w, sizeof(w));
    verbs_db(1, PFNIC_DB_SQ, qpn << 16 | (slot + 1));
}

/* A signaled zero-length SEND in send queue slot @slot, rung. */
static void post_send0(uint32_t qpn, uint32_t slot, uint64_t wr_id,
                       uint32_t key)
{
    post_wqe(SQ_ADDR + qpn * 0x10000, slot, PFNIC_WR_SEND,
             PFNIC_SEND_SIGNALED, wr_id, 0, 0, 0, key);
    verbs_db(1, PFNIC_DB_SQ, qpn << 16 | (slot + 1));
}

/* An empty receive WQE in receive queue slot @slot, rung. */
static void post_recv0(uint32_t qpn, uint32_t slot, uint64_t wr_id,
                       uint32_t key)
{
    post_wqe(RQ_ADDR + qpn * 0x10000, slot, 0, 0, wr_id, 0, 0, 0, key);
    verbs_db(1, PFNIC_DB_RQ, qpn << 16 | (slot + 1));
}

/* A QP that a failed WQE left in ERR, back to RTS towards @dest. */
static void qp_reconnect(uint32_t qpn, uint32_t dest)
{
    g_assert_cmpint(qp_modify(qpn, PFNIC_QPS_RESET, 0, 0, 0, 0), ==,
                    PFNIC_CMD_OK);
    qp_connect(qpn, dest, 7);
}

/* Wait for CQE @slot of CQ @cqn: its wr_id and status. */
static PfnicCqe expect_cqe(uint32_t cqn, uint32_t slot, uint64_t wr_id,
                           uint8_t status)
{
    PfnicCqe c = wait_cqe(cqn, slot, 1);

    g_assert_cmphex(c.wr_id, ==, wr_id);
    g_assert_cmpint(c.status, ==, status);
    return c;
}

static uint64_t ctx_access_errors(uint32_t ctx)
{
    uint32_t a[PFNIC_CMD_ARGS] = { ctx };

    g_assert_cmpint(cmd(PFNIC_CMD_CTX_QUERY, a, 1), ==, PFNIC_CMD_OK);
    return a[0] | (uint64_t)a[1] << 32;
}

/*
 * RC connections: a QP that is not the destination's connected peer is
 * refused (RETRY_EXC_ERR; the destination counts it and is untouched), and
 * so is a QP created later at the peer's number. The peer itself is
 * accepted.
 */
static void test_verbs_peer(void)
{
    uint32_t key, a[PFNIC_CMD_ARGS];

    start(",contexts=4");
    map_bars();
    key = verbs_setup(7);

    /* QP 4 targets QP 3, whose peer is QP 2. */
    g_assert_cmpint(qp_create(4, 1, 7, 1, 2, 4, 0), ==, PFNIC_CMD_OK);
    qp_connect(4, 3, 7);
    post_recv0(3, 0, 0x300, key);
    post_send0(4, 0, 0x400, key);
    expect_cqe(1, 0, 0x400, PFNIC_WC_RETRY_EXC_ERR);
    /* With the right key, an RDMA WRITE is refused just the same. */
    qp_reconnect(4, 3);
    post_write(4, 1, 0x401, key, key, 0x20000000, 8);
    expect_cqe(1, 1, 0x401, PFNIC_WC_RETRY_EXC_ERR);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[0], ==, PFNIC_QPS_RTS);
    g_assert_cmpint(a[2], ==, 0);           /* its receive WQE is still there */
    g_assert_cmpint(a[8], ==, 2);           /* refused */
    g_assert_cmpint(read_cqe(2, 0).owner, ==, 0);

    /* The peer is accepted: its SEND takes the receive WQE. */
    post_send0(2, 0, 0x200, key);
    g_assert_cmpint(expect_cqe(2, 0, 0x300, PFNIC_WC_SUCCESS).src_qp, ==, 2);
    expect_cqe(1, 2, 0x200, PFNIC_WC_SUCCESS);

    /* A new QP 2 is not the QP 3 was connected to. */
    g_assert_cmpint(cmd1(PFNIC_CMD_QP_DESTROY, 2), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(2, 1, 7, 1, 2, 4, 0), ==, PFNIC_CMD_OK);
    qp_connect(2, 3, 7);
    post_recv0(3, 1, 0x301, key);
    post_send0(2, 0, 0x201, key);
    expect_cqe(1, 3, 0x201, PFNIC_WC_RETRY_EXC_ERR);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[2], ==, 1);
    g_assert_cmpint(a[8], ==, 3);
    /* Connecting QP 3 again (to the new QP 2) makes them peers. */
    qp_reconnect(3, 2);
    qp_reconnect(2, 3);
    post_recv0(3, 2, 0x302, key);
    post_send0(2, 1, 0x202, key);
    expect_cqe(1, 4, 0x202, PFNIC_WC_SUCCESS);
    expect_cqe(2, 1, 0x302, PFNIC_WC_SUCCESS);
    qtest_end();
}

/*
 * ABI 1.15: a loopback sender whose destination does not answer (not yet
 * RTR) asks again after each local ACK timeout, retry_cnt times. A peer
 * that becomes ready inside that window gets the work request at once;
 * one that never does fails the sender RETRY_EXC_ERR after retry_cnt + 1
 * timeouts and no sooner, however often something wakes the sender early;
 * timeout 0 waits for ever.
 */
static void test_verbs_unready_peer(void)
{
    uint32_t acc = PFNIC_ACCESS_REMOTE_WRITE;
    uint32_t key, a[PFNIC_CMD_ARGS];
    uint64_t word;

    start("");
    map_bars();
    key = verbs_setup(7);
    /* QP 3 back to INIT: the other side of a connection being set up */
    g_assert_cmpint(qp_modify(3, PFNIC_QPS_RESET, 0, 0, 0, 0), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(qp_modify(3, PFNIC_QPS_INIT, acc, 2, 1, 7), ==,
                    PFNIC_CMD_OK);

    /* The peer reaches RTR late in the window: the SEND is delivered. */
    post_recv0(3, 0, 0x300, key);
    post_send0(2, 0, 0x200, key);
    clock_step(TEST_UNANSWERED_NS - TEST_ACK_NS / 2);
    g_assert_cmpint(read_cqe(1, 0).owner, ==, 0);
    g_assert_cmpint(qp_modify(3, PFNIC_QPS_RTR, acc, 2, 1, 7), ==,
                    PFNIC_CMD_OK);
    clock_step(1000);           /* its transition asked again: no timeout */
    expect_cqe(1, 0, 0x200, PFNIC_WC_SUCCESS);
    g_assert_cmpint(expect_cqe(2, 0, 0x300, PFNIC_WC_SUCCESS).src_qp, ==, 2);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[8], ==, 0);           /* nothing refused */

    /*
     * Never ready: RETRY_EXC_ERR after 8 timeouts, not sooner, though the
     * destination's QP_MODIFY (INIT to INIT) wakes the sender every quarter
     * of a timeout for the first four; the target's memory is untouched.
     */
    g_assert_cmpint(qp_modify(3, PFNIC_QPS_RESET, 0, 0, 0, 0), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(qp_modify(3, PFNIC_QPS_INIT, acc, 2, 1, 7), ==,
                    PFNIC_CMD_OK);
    word = 0x1122334455667788ull;
    memwrite(0x10000000, &word, 8);
    word = 0;
    memwrite(0x20000000, &word, 8);
    post_write(2, 1, 0x201, key, key, 0x20000000, 8);
    for (int i = 0; i < 15; i++) {
        clock_step(TEST_ACK_NS / 4);
        g_assert_cmpint(qp_modify(3, PFNIC_QPS_INIT, acc, 2, 1, 7), ==,
                        PFNIC_CMD_OK);
    }
    clock_step(TEST_UNANSWERED_NS - 15 * (TEST_ACK_NS / 4) - TEST_ACK_NS / 2);
    g_assert_cmpint(read_cqe(1, 1).owner, ==, 0);
    clock_step(TEST_ACK_NS);
    expect_cqe(1, 1, 0x201, PFNIC_WC_RETRY_EXC_ERR);
    memread(0x20000000, &word, 8);
    g_assert_cmphex(word, ==, 0);
    g_assert_cmpint(qp_state(3), ==, PFNIC_QPS_INIT);

    /* retry_cnt 0: one timeout, no retry */
    g_assert_cmpint(qp_modify(2, PFNIC_QPS_RESET, 0, 0, 0, 0), ==,
                    PFNIC_CMD_OK);
    for (uint32_t st = PFNIC_QPS_INIT; st <= PFNIC_QPS_RTS; st++) {
        g_assert_cmpint(qp_modify_full(2, st, acc, 3, 1, 7, 0,
                                       TEST_ACK_TIMEOUT), ==, PFNIC_CMD_OK);
    }
    post_write(2, 2, 0x202, key, key, 0x20000000, 8);
    clock_step(TEST_ACK_NS / 2);
    g_assert_cmpint(read_cqe(1, 2).owner, ==, 0);
    clock_step(TEST_ACK_NS);
    expect_cqe(1, 2, 0x202, PFNIC_WC_RETRY_EXC_ERR);

    /* Timeout 0 waits for ever, until the peer is ready. */
    g_assert_cmpint(qp_modify(2, PFNIC_QPS_RESET, 0, 0, 0, 0), ==,
                    PFNIC_CMD_OK);
    for (uint32_t st = PFNIC_QPS_INIT; st <= PFNIC_QPS_RTS; st++) {
        g_assert_cmpint(qp_modify_full(2, st, acc, 3, 1, 7, 7, 0), ==,
                        PFNIC_CMD_OK);
    }
    post_recv0(3, 1, 0x301, key);
    post_send0(2, 3, 0x203, key);
    clock_step(10000000000ll);     /* 10 s */
    g_assert_cmpint(read_cqe(1, 3).owner, ==, 0);
    g_assert_cmpint(qp_state(2), ==, PFNIC_QPS_RTS);
    g_assert_cmpint(qp_modify(3, PFNIC_QPS_RTR, acc, 2, 1, 7), ==,
                    PFNIC_CMD_OK);
    clock_step(1000);
    expect_cqe(1, 3, 0x203, PFNIC_WC_SUCCESS);
    expect_cqe(2, 1, 0x301, PFNIC_WC_SUCCESS);
    qtest_end();
}

/*
 * Refused remote accesses count against the destination's context, and
 * against the MR when the key names one; the first queues one
 * ACCESS_ERROR event, and the next one only after CTX_QUERY read the count.
 */
static void test_verbs_access_errors(void)
{
    uint32_t key, object, a[PFNIC_CMD_ARGS];
    uint8_t type, owner;

    start(",contexts=4");
    map_bars();
    eq_setup(8);
    key = verbs_setup(7);
    g_assert_cmpint(ctx_access_errors(1), ==, 0);

    /* A key that names nothing */
    post_write(2, 0, 1, key, key ^ 0x5a5a5a5a, 0x20000000, 8);
    expect_cqe(1, 0, 1, PFNIC_WC_REM_ACCESS_ERR);
    read_eqe(0, &type, &owner, &object);
    g_assert_cmpint(owner, ==, 1);
    g_assert_cmpint(type, ==, PFNIC_EV_ACCESS_ERROR);
    g_assert_cmpint(object, ==, 1);

    /* The MR's key past its end: counted by the MR too; no second event */
    qp_reconnect(2, 3);
    post_write(2, 1, 2, key, key, 0x30000000 - 4, 8);
    expect_cqe(1, 1, 2, PFNIC_WC_REM_ACCESS_ERR);
    read_eqe(1, &type, &owner, &object);
    g_assert_cmpint(owner, ==, 0);
    memset(a, 0, sizeof(a));
    a[0] = 1;
    g_assert_cmpint(cmd(PFNIC_CMD_MR_QUERY, a, 1), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[10], ==, 1);
    g_assert_cmpint(ctx_access_errors(1), ==, 2);

    /* Read and re-armed: the next refusal is told again. */
    qp_reconnect(2, 3);
    post_write(2, 2, 3, key, key + 1, 0x20000000, 8);
    expect_cqe(1, 2, 3, PFNIC_WC_REM_ACCESS_ERR);
    read_eqe(1, &type, &owner, &object);
    g_assert_cmpint(owner, ==, 1);
    g_assert_cmpint(type, ==, PFNIC_EV_ACCESS_ERROR);
    g_assert_cmpint(ctx_access_errors(1), ==, 3);
    g_assert_cmpint(cmd1(PFNIC_CMD_CTX_QUERY, 4), ==, PFNIC_CMD_BAD_INDEX);
    qtest_end();
}

/*
 * Zero-length messages need no translation, so they succeed without an
 * IOMMU: a SEND consumes a receive WQE (RECV CQE with src_qp), an
 * RDMA_WRITE_WITH_IMM delivers its immediate, an unsignaled SEND moves
 * the send head without a CQE, and a solicited-only arm fires on the
 * solicited message. A receive doorbell wakes a sender in an RNR wait.
 */
static void test_verbs_zero_length(void)
{
    uint32_t key, object, a[PFNIC_CMD_ARGS], rec[2];
    uint8_t type, owner;
    PfnicCqe c;

    start(",contexts=4");
    map_bars();
    eq_setup(8);
    key = verbs_setup(7);

    for (int i = 0; i < 3; i++) {
        post_wqe(RQ_ADDR + 3 * 0x10000, i, 0, 0, 0x300 + i, 0, 0, 0, key);
    }
    verbs_db(1, PFNIC_DB_RQ, 3 << 16 | 3);
    verbs_db(1, PFNIC_DB_CQ_ARM, 2 << 16 | PFNIC_CQ_ARM_SOLICITED);
    post_wqe(SQ_ADDR + 2 * 0x10000, 0, PFNIC_WR_SEND, PFNIC_SEND_SIGNALED,
             0x200, 0, 0, 0, key);
    post_wqe(SQ_ADDR + 2 * 0x10000, 1, PFNIC_WR_SEND, 0, 0x201, 0, 0, 0, key);
    post_wqe(SQ_ADDR + 2 * 0x10000, 2, PFNIC_WR_RDMA_WRITE_WITH_IMM,
             PFNIC_SEND_SIGNALED | PFNIC_SEND_SOLICITED, 0x202, 0, 0, 0, key);
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | 3);

    c = wait_cqe(2, 2, 1);
    g_assert_cmphex(c.wr_id, ==, 0x302);
    g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_RECV_RDMA_WITH_IMM);
    g_assert_cmpint(c.wc_flags, ==, PFNIC_WC_WITH_IMM);
    g_assert_cmphex(c.imm_data, ==, 0x78563412);
    g_assert_cmpint(c.qp_num, ==, 3);
    g_assert_cmpint(c.src_qp, ==, 2);
    c = read_cqe(2, 0);
    g_assert_cmphex(c.wr_id, ==, 0x300);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_RECV);
    g_assert_cmpint(c.wc_flags, ==, 0);
    g_assert_cmpint(c.owner, ==, 1);
    g_assert_cmpint(c.byte_len, ==, 0);

    /* Sender: CQEs for the two signaled WQEs only */
    c = wait_cqe(1, 1, 1);
    g_assert_cmphex(c.wr_id, ==, 0x202);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_RDMA_WRITE);
    g_assert_cmphex(read_cqe(1, 0).wr_id, ==, 0x200);
    g_assert_cmpint(read_cqe(1, 2).owner, ==, 0);
    memread(QP_REC + 2 * 0x100, rec, sizeof(rec));
    g_assert_cmpint(le32_to_cpu(rec[0]), ==, 3);
    memread(QP_REC + 3 * 0x100, rec, sizeof(rec));
    g_assert_cmpint(le32_to_cpu(rec[1]), ==, 3);
    g_assert_cmpint(qp_query(2, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[0], ==, PFNIC_QPS_RTS);
    g_assert_cmpint(a[1], ==, 3);
    g_assert_cmpint(a[5], ==, 3);

    /* The solicited-only arm fired once, for CQ 2. */
    read_eqe(0, &type, &owner, &object);
    g_assert_cmpint(type, ==, PFNIC_EV_COMPLETION);
    g_assert_cmpint(object, ==, 2);
    read_eqe(1, &type, &owner, &object);
    g_assert_cmpint(owner, ==, 0);

    /* No receive WQE: the sender waits (RNR 655 ms) until RQ_DB wakes it. */
    post_wqe(SQ_ADDR + 2 * 0x10000, 3, PFNIC_WR_SEND, PFNIC_SEND_SIGNALED,
             0x203, 0, 0, 0, key);
    g_assert_cmpint(qp_modify(3, PFNIC_QPS_RTS, PFNIC_ACCESS_REMOTE_WRITE, 2,
                              0, 7), ==, PFNIC_CMD_OK);
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | 4);
    clock_step(1000000);
    g_assert_cmpint(read_cqe(1, 2).owner, ==, 0);
    g_assert_cmpint(qp_query(2, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[4], >=, 1);
    post_wqe(RQ_ADDR + 3 * 0x10000, 3, 0, 0, 0x303, 0, 0, 0, key);
    verbs_db(1, PFNIC_DB_RQ, 3 << 16 | 4);
    clock_step(1000);
    c = read_cqe(1, 2);
    g_assert_cmpint(c.owner, ==, 1);
    g_assert_cmphex(c.wr_id, ==, 0x203);
    g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    g_assert_cmphex(read_cqe(2, 3).wr_id, ==, 0x303);

    /*
     * The destination destroyed while the sender waits: nothing answers it
     * any more, and after its retries it completes RETRY_EXC_ERR.
     */
    post_wqe(SQ_ADDR + 2 * 0x10000, 4, PFNIC_WR_SEND, 0, 0x204, 0, 0, 0, key);
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | 5);
    clock_step(1000000);
    g_assert_cmpint(cmd1(PFNIC_CMD_QP_DESTROY, 3), ==, PFNIC_CMD_OK);
    clock_step(TEST_UNANSWERED_NS - TEST_ACK_NS / 2);
    g_assert_cmpint(read_cqe(1, 3).owner, ==, 0);
    clock_step(TEST_ACK_NS);
    c = read_cqe(1, 3);
    g_assert_cmpint(c.owner, ==, 1);
    g_assert_cmphex(c.wr_id, ==, 0x204);
    g_assert_cmpint(c.status, ==, PFNIC_WC_RETRY_EXC_ERR);

    /* A stopped context's QPs do not run, and its doorbells are refused. */
    g_assert_cmpint(qp_modify(2, PFNIC_QPS_RESET, 0, 0, 0, 0), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(qp_modify(2, PFNIC_QPS_INIT, 0, 2, 1, 7), ==,
                    PFNIC_CMD_OK);
    post_wqe(RQ_ADDR + 2 * 0x10000, 0, 0, 0, 0x400, 0, 0, 0, key);
    post_wqe(SQ_ADDR + 2 * 0x10000, 5, PFNIC_WR_SEND, PFNIC_SEND_SIGNALED,
             0x205, 0, 0, 0, key);
    verbs_db(1, PFNIC_DB_RQ, 2 << 16 | 1);
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | 6);
    ctx_select(1);
    reg_write(PFNIC_REG_CTX_CTRL, 0);
    g_assert_cmpint(qp_modify(2, PFNIC_QPS_RTR, 0, 2, 1, 7), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(qp_modify(2, PFNIC_QPS_RTS, 0, 2, 1, 7), ==,
                    PFNIC_CMD_OK);
    clock_step(1000000);
    g_assert_cmpint(read_cqe(1, 4).owner, ==, 0);
    g_assert_cmpint(read_cqe(2, 4).owner, ==, 0);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | 6);
    assert_refused();
    qtest_end();
}

/* A CQ of 2 entries that nobody consumes: the third CQE overflows it. */
static void test_verbs_cq_overflow(void)
{
    uint32_t key, object, pba;
    uint8_t type, owner;

    start(",contexts=4");
    map_bars();
    pba = msix_enable_masked();
    eq_setup(4);
    key = verbs_setup(7);
    g_assert_cmpint(cq_create(3, 1, 1), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(4, 1, 7, 3, 3, 4, PFNIC_QP_FLAG_SIGNAL_ALL), ==,
                    PFNIC_CMD_OK);
    qp_connect(4, 4, 7);
    for (int i = 0; i < 4; i++) {
        post_wqe(SQ_ADDR + 4 * 0x10000, i, 9, 0, 0x500 + i, 0, 0, 0, key);
    }
    verbs_db(1, PFNIC_DB_SQ, 4 << 16 | 4);
    wait_cqe(3, 1, 1);
    clock_step(1000000);
    g_assert_cmpint(read_cqe(3, 0).status, ==, PFNIC_WC_LOC_QP_OP_ERR);
    g_assert_cmpint(read_cqe(3, 1).status, ==, PFNIC_WC_WR_FLUSH_ERR);
    read_eqe(0, &type, &owner, &object);
    g_assert_cmpint(type, ==, PFNIC_EV_CQ_ERROR);
    g_assert_cmpint(owner, ==, 1);
    g_assert_cmpint(object, ==, 3);
    read_eqe(1, &type, &owner, &object);
    g_assert_cmpint(owner, ==, 0);
    g_assert_cmphex(readl(BAR4_ADDR + pba), ==, 1u << EQ_VEC);
    g_assert_cmpint(qp_state(4), ==, PFNIC_QPS_ERR);
    g_assert_cmpint(qp_state(2), ==, PFNIC_QPS_RTS);
    qtest_end();
}

/* Run descriptor number @n (free-running) in context 1's ring of 8. */
static uint32_t run_desc(uint32_t n, PfnicDesc *d)
{
    uint64_t addr = RING_ADDR + (n % 8) * PFNIC_DESC_SIZE;
    uint32_t status = 0;

    memwrite(addr, d, sizeof(*d));
    doorbell(1, n + 1);
    for (int i = 0; i < 1000 && !(status & PFNIC_DESC_DONE); i++) {
        clock_step(1000);
        memread(addr + offsetof(PfnicDesc, status), &status, 4);
        status = le32_to_cpu(status);
    }
    return status;
}

/* PREFETCH descriptors: key checks, NO_FAULT skips, faults fail. */
static void test_verbs_prefetch(void)
{
    uint32_t key, key2, key3, a[PFNIC_CMD_ARGS];
    PfnicDesc d = {
        .opcode = PFNIC_OP_PREFETCH, .dst = cpu_to_le64(0x10000000),
        .len = cpu_to_le64(3 * 4096),
    };

    start(",contexts=4");
    map_bars();
    key = verbs_setup(7);
    g_assert_cmpint(mr_set(2, 1, 7, 0, 0x10000000, 0x1000, &key2), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(mr_set(3, 2, 7, PFNIC_ACCESS_LOCAL_WRITE, 0x10000000,
                           0x10000, &key3), ==, PFNIC_CMD_OK);

    /* Bad key, range past the MR, write to a read-only MR, other context */
    d.src = cpu_to_le64(key ^ 1);
    g_assert_cmphex(run_desc(0, &d), ==, PFNIC_DESC_DONE |
                    PFNIC_ST_PROTECTION);
    d.src = cpu_to_le64(key2);
    g_assert_cmphex(run_desc(1, &d), ==, PFNIC_DESC_DONE |
                    PFNIC_ST_PROTECTION);
    d.flags = PFNIC_PREFETCH_WRITE;
    d.len = cpu_to_le64(4096);
    g_assert_cmphex(run_desc(2, &d), ==, PFNIC_DESC_DONE |
                    PFNIC_ST_PROTECTION);
    d.src = cpu_to_le64(key3);
    g_assert_cmphex(run_desc(3, &d), ==, PFNIC_DESC_DONE |
                    PFNIC_ST_PROTECTION);
    /* A key with bits set above 31 (NO_FAULT would otherwise succeed) */
    d.src = cpu_to_le64(key2 | 1ULL << 32);
    d.flags = PFNIC_PREFETCH_NO_FAULT;
    g_assert_cmphex(run_desc(4, &d), ==, PFNIC_DESC_DONE |
                    PFNIC_ST_PROTECTION);
    /* A read prefetch in the read-only MR is fine (NO_FAULT: skipped). */
    d.src = cpu_to_le64(key2);
    d.flags = PFNIC_PREFETCH_NO_FAULT;
    g_assert_cmphex(run_desc(5, &d), ==, PFNIC_DESC_DONE | PFNIC_ST_SUCCESS);
    /* Reserved flags: a bad descriptor */
    d.flags = 4;
    d.src = cpu_to_le64(key);
    g_assert_cmphex(run_desc(6, &d), ==, PFNIC_DESC_DONE |
                    PFNIC_ST_BAD_DESCRIPTOR);

    /* NO_FAULT: nothing present, nothing requested, success */
    d.flags = PFNIC_PREFETCH_WRITE | PFNIC_PREFETCH_NO_FAULT;
    d.len = cpu_to_le64(3 * 4096);
    g_assert_cmphex(run_desc(7, &d), ==, PFNIC_DESC_DONE | PFNIC_ST_SUCCESS);
    /* Faulting without an IOMMU fails. */
    d.flags = 0;
    g_assert_cmphex(run_desc(8, &d), ==, PFNIC_DESC_DONE |
                    PFNIC_ST_PAGE_FAULT);
    a[0] = 1;
    g_assert_cmpint(cmd(PFNIC_CMD_MR_QUERY, a, 1), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[0], ==, 0);   /* no page request could be sent */
    g_assert_cmpint(a[8], ==, 0);   /* nothing was made present */
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    qtest_end();
}

/* --- translation tables (ABI 1.8) ---------------------------------------- */

#define MTT_SRC         0x800000ULL     /* entries MTT_WRITE reads */
#define DATA_PAGE(n)    (0x1000000ULL + (n) * 0x1000ULL)
#define ALL_ACCESS      (PFNIC_ACCESS_LOCAL_WRITE | \
                         PFNIC_ACCESS_REMOTE_WRITE | \
                         PFNIC_ACCESS_REMOTE_READ | \
                         PFNIC_ACCESS_REMOTE_ATOMIC)
#define MTT_RW          (PFNIC_MTT_VALID | PFNIC_MTT_READ | PFNIC_MTT_WRITE)

/* Entry indexes above 2^32 (an implicit table's, ABI 1.10): a5's high word */
static uint32_t mtt_write(uint32_t mr, uint64_t first, uint32_t count,
                          uint64_t src)
{
    uint32_t a[PFNIC_CMD_ARGS] = {
        mr, first, count, src, src >> 32, first >> 32,
    };

    return cmd(PFNIC_CMD_MTT_WRITE, a, PFNIC_CMD_ARGS);
}

static uint32_t mtt_invalidate(uint32_t mr, uint64_t first, uint32_t count)
{
    uint32_t a[PFNIC_CMD_ARGS] = { mr, first, count, first >> 32 };

    return cmd(PFNIC_CMD_MTT_INVALIDATE, a, PFNIC_CMD_ARGS);
}

/* Point entries [first, first + n) of MR @mr at @pages, with @bits. */
static uint32_t mtt_map(uint32_t mr, uint64_t first, const uint64_t *pages,
                        uint32_t n, uint64_t bits)
{
    uint64_t e[16];

    g_assert_cmpint(n, <=, ARRAY_SIZE(e));
    for (uint32_t i = 0; i < n; i++) {
        e[i] = cpu_to_le64(pages[i] | bits);
    }
    memwrite(MTT_SRC, e, n * sizeof(e[0]));
    return mtt_write(mr, first, n, MTT_SRC);
}

/* A table MR @index of @ctx (PD 7, every access) mapping @n @pages. */
static uint32_t table_mr(uint32_t index, uint32_t ctx, uint64_t addr,
                         uint64_t len, const uint64_t *pages, uint32_t n)
{
    uint32_t key;

    g_assert_cmpint(mr_set_flags(index, ctx, 7, ALL_ACCESS, addr, len,
                                 PFNIC_MR_FLAG_TABLE, &key), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(mtt_map(index, 0, pages, n, MTT_RW), ==, PFNIC_CMD_OK);
    return key;
}

/*
 * Guest memory as the device sees [va, va + len) of an MR at @base whose
 * table maps @pages: read or written page by page.
 */
static void table_rw(const uint64_t *pages, uint64_t base, uint64_t va,
                     void *buf, size_t len, bool write)
{
    uint8_t *p = buf;

    while (len) {
        uint64_t i = va / 4096 - base / 4096;
        size_t n = MIN(len, 4096 - va % 4096);
        uint64_t gpa = pages[i] + va % 4096;

        if (write) {
            memwrite(gpa, p, n);
        } else {
            memread(gpa, p, n);
        }
        va += n;
        p += n;
        len -= n;
    }
}

/* Send and receive queue tails and CQEs seen, per QP and CQ */
static uint16_t sq_next[PFNIC_MAX_QPS], rq_next[PFNIC_MAX_QPS];
static uint32_t cq_seen[8];

static void table_counts_reset(void)
{
    memset(sq_next, 0, sizeof(sq_next));
    memset(rq_next, 0, sizeof(rq_next));
    memset(cq_seen, 0, sizeof(cq_seen));
}

/* Post a signaled send WQE of one SGE on QP @qpn of context @ctx. */
static void table_post(uint32_t ctx, uint32_t qpn, uint8_t op, uint64_t wr_id,
                       uint64_t laddr, uint32_t len, uint32_t lkey,
                       uint64_t raddr, uint32_t rkey, uint64_t add)
{
    uint16_t slot = sq_next[qpn]++;
    PfnicWqe w = {
        .opcode = op, .flags = PFNIC_SEND_SIGNALED, .num_sge = 1,
        .wr_id = cpu_to_le64(wr_id), .remote_addr = cpu_to_le64(raddr),
        .rkey = cpu_to_le32(rkey), .compare_add = cpu_to_le64(add),
        .sge[0] = {
            .addr = cpu_to_le64(laddr), .length = cpu_to_le32(len),
            .lkey = cpu_to_le32(lkey),
        },
    };

    memwrite(SQ_ADDR + qpn * 0x10000 + (slot % 16) * PFNIC_WQE_SIZE, &w,
             sizeof(w));
    verbs_db(ctx, PFNIC_DB_SQ, qpn << 16 | (uint16_t)(slot + 1));
}

static void table_recv(uint32_t ctx, uint32_t qpn, uint64_t wr_id,
                       uint64_t addr, uint32_t len, uint32_t key)
{
    uint16_t slot = rq_next[qpn]++;

    post_wqe(RQ_ADDR + qpn * 0x10000, slot % 16, 0, 0, wr_id, 1, addr, len,
             key);
    verbs_db(ctx, PFNIC_DB_RQ, qpn << 16 | (uint16_t)(slot + 1));
}

/* The next CQE of CQ @cqn (16 entries), consumed: its wr_id and status. */
static PfnicCqe table_cqe(uint32_t cqn, uint64_t wr_id, uint8_t status)
{
    uint32_t n = cq_seen[cqn]++;
    uint32_t cons = cpu_to_le32(cq_seen[cqn]);
    PfnicCqe c = wait_cqe(cqn, n % 16, ((n / 16) & 1) ^ 1);

    memwrite(CQ_REC + cqn * 0x100, &cons, sizeof(cons));
    g_assert_cmphex(c.wr_id, ==, wr_id);
    g_assert_cmpint(c.status, ==, status);
    return c;
}

/* MR_SET, MTT_WRITE and MTT_INVALIDATE: every status */
static void test_verbs_table_commands(void)
{
    uint64_t e[3] = {
        cpu_to_le64(DATA_PAGE(1) | MTT_RW),
        cpu_to_le64(DATA_PAGE(2) | PFNIC_MTT_VALID | PFNIC_MTT_READ),
        cpu_to_le64(DATA_PAGE(3)),
    };
    uint32_t key, a[PFNIC_CMD_ARGS];

    start(",contexts=4,ats=off,pasid=off,pri=off");
    map_bars();
    start_ctx_no_pasid(1, RING_ADDR);

    /* MR_SET: a8 bits other than TABLE, TABLE on the implicit MR */
    g_assert_cmpint(mr_set_flags(1, 1, 7, 0, 0x10000000, 0x1000, 2, NULL),
                    ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mr_set_flags(1, 1, 7, 0, 0, UINT64_MAX,
                                 PFNIC_MR_FLAG_TABLE, NULL), ==,
                    PFNIC_CMD_BAD_ARG);
    /* Without TABLE in a context without a PASID; with, wherever */
    g_assert_cmpint(mr_set(1, 1, 7, 0, 0x10000000, 0x1000, NULL), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mr_set(1, 1, 7, 0, 0, UINT64_MAX, NULL), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mr_set(1, 2, 7, 0, 0x10000000, 0x1000, &key), ==,
                    PFNIC_CMD_OK);
    /* [0x10000ff8, 0x10002008): three pages, three entries */
    g_assert_cmpint(mr_set_flags(2, 1, 7, ALL_ACCESS, 0x10000ff8, 0x1010,
                                 PFNIC_MR_FLAG_TABLE, &key), ==,
                    PFNIC_CMD_OK);
    g_assert_cmphex(key, !=, 0);
    g_assert_cmpint(mr_set_flags(2, 1, 7, 0, 0x10000000, 0x1000,
                                 PFNIC_MR_FLAG_TABLE, NULL), ==,
                    PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(mr_set_flags(3, 2, 7, 0, UINT64_MAX - 0xfff, 0x1000,
                                 PFNIC_MR_FLAG_TABLE, NULL), ==,
                    PFNIC_CMD_BAD_ARG);

    /* MTT_WRITE: index, state (no MR, no table), count, range, address */
    memwrite(MTT_SRC, e, sizeof(e));
    g_assert_cmpint(mtt_write(4096, 0, 1, MTT_SRC), ==, PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(mtt_write(5, 0, 1, MTT_SRC), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(mtt_write(1, 0, 1, MTT_SRC), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(mtt_write(2, 0, 0, MTT_SRC), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mtt_write(2, 0, 513, MTT_SRC), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mtt_write(2, 3, 1, MTT_SRC), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mtt_write(2, 2, 2, MTT_SRC), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mtt_write(2, UINT32_MAX, 2, MTT_SRC), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mtt_write(2, 1, UINT32_MAX, MTT_SRC), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mtt_write(2, 0, 1, MTT_SRC + 4), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mtt_write(2, 0, 2, UINT64_MAX - 7), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mtt_write(2, 0, 1, 0xfffff0000000ULL), ==,
                    PFNIC_CMD_BAD_ARG);
    /* Reserved bits 11:3, in any entry */
    for (int bit = 3; bit < 12; bit++) {
        uint64_t bad = cpu_to_le64(DATA_PAGE(4) | MTT_RW | 1ull << bit);

        memwrite(MTT_SRC + 16, &bad, sizeof(bad));
        g_assert_cmpint(mtt_write(2, 0, 3, MTT_SRC), ==, PFNIC_CMD_BAD_ARG);
    }
    g_assert_cmpint(mtt_write(2, 2, 1, MTT_SRC), ==, PFNIC_CMD_OK);
    memwrite(MTT_SRC, e, sizeof(e));
    g_assert_cmpint(mtt_write(2, 0, 3, MTT_SRC), ==, PFNIC_CMD_OK);

    /* MTT_INVALIDATE: the same checks, any count up to the table's end */
    g_assert_cmpint(mtt_invalidate(4096, 0, 1), ==, PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(mtt_invalidate(5, 0, 1), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(mtt_invalidate(1, 0, 1), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(mtt_invalidate(2, 0, 0), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mtt_invalidate(2, 0, 4), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mtt_invalidate(2, 3, 1), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mtt_invalidate(2, 1, UINT32_MAX), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mtt_invalidate(2, 1, 2), ==, PFNIC_CMD_OK);
    g_assert_cmpint(mtt_invalidate(2, 0, 3), ==, PFNIC_CMD_OK);
    /* A table of more than 512 entries is invalidated whole at once. */
    g_assert_cmpint(mr_set_flags(3, 1, 7, 0, 0x40000000, 0x400000,
                                 PFNIC_MR_FLAG_TABLE, NULL), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(mtt_write(3, 1023, 1, MTT_SRC), ==, PFNIC_CMD_OK);
    g_assert_cmpint(mtt_invalidate(3, 0, 1024), ==, PFNIC_CMD_OK);

    /* A table MR counts nothing of page requests. */
    memset(a, 0xff, sizeof(a));
    a[0] = 2;
    g_assert_cmpint(cmd(PFNIC_CMD_MR_QUERY, a, 1), ==, PFNIC_CMD_OK);
    for (int i = 0; i < 14; i++) {
        g_assert_cmphex(a[i], ==, 0);
    }
    /* MR_CLEAR takes the table: the index is no table MR any more. */
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_CLEAR, 2), ==, PFNIC_CMD_OK);
    g_assert_cmpint(mtt_write(2, 0, 1, MTT_SRC), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(mtt_invalidate(2, 0, 1), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    qtest_end();
}

/*
 * table-entries bounds every table together: NO_SPACE beyond it, and the
 * entries come back at MR_CLEAR and at a reset.
 */
static void test_verbs_table_space(void)
{
    start(",contexts=4,table-entries=16");
    map_bars();

    /* 0x1800 bytes from 0x10000800: two pages. Then 14: full. */
    g_assert_cmpint(mr_set_flags(1, 1, 7, 0, 0x10000800, 0x1800,
                                 PFNIC_MR_FLAG_TABLE, NULL), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(mr_set_flags(2, 1, 7, 0, 0x20000000, 14 * 4096 + 1,
                                 PFNIC_MR_FLAG_TABLE, NULL), ==,
                    PFNIC_CMD_NO_SPACE);
    g_assert_cmpint(mr_set_flags(2, 1, 7, 0, 0x20000000, 14 * 4096,
                                 PFNIC_MR_FLAG_TABLE, NULL), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(mr_set_flags(3, 1, 7, 0, 0x30000000, 1,
                                 PFNIC_MR_FLAG_TABLE, NULL), ==,
                    PFNIC_CMD_NO_SPACE);
    /* A huge range is NO_SPACE too, not an allocation. */
    g_assert_cmpint(mr_set_flags(3, 1, 7, 0, 0x1000, UINT64_MAX - 0x1000,
                                 PFNIC_MR_FLAG_TABLE, NULL), ==,
                    PFNIC_CMD_NO_SPACE);
    /* MRs without a table take no entries. */
    g_assert_cmpint(mr_set(3, 1, 7, 0, 0x30000000, 1 << 30, NULL), ==,
                    PFNIC_CMD_OK);
    /* MR_CLEAR gives them back: set, clear, set again. */
    for (int i = 0; i < 3; i++) {
        g_assert_cmpint(cmd1(PFNIC_CMD_MR_CLEAR, 1), ==, PFNIC_CMD_OK);
        g_assert_cmpint(mr_set_flags(4, 1, 7, 0, 0x40000000, 2 * 4096,
                                     PFNIC_MR_FLAG_TABLE, NULL), ==,
                        PFNIC_CMD_OK);
        g_assert_cmpint(mr_set_flags(1, 1, 7, 0, 0x10000000, 1,
                                     PFNIC_MR_FLAG_TABLE, NULL), ==,
                        PFNIC_CMD_NO_SPACE);
        g_assert_cmpint(cmd1(PFNIC_CMD_MR_CLEAR, 4), ==, PFNIC_CMD_OK);
        g_assert_cmpint(mr_set_flags(1, 1, 7, 0, 0x10000800, 0x1800,
                                     PFNIC_MR_FLAG_TABLE, NULL), ==,
                        PFNIC_CMD_OK);
    }
    /* A reset gives back all of them. */
    reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    g_assert_cmpint(mr_set_flags(1, 1, 7, 0, 0x10000000, 16 * 4096,
                                 PFNIC_MR_FLAG_TABLE, NULL), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(mr_set_flags(2, 1, 7, 0, 0x10000000, 1,
                                 PFNIC_MR_FLAG_TABLE, NULL), ==,
                    PFNIC_CMD_NO_SPACE);
    qtest_end();
}

/*
 * Two contexts without a PASID (no ATS, PASID nor PRI on the device) and a
 * table MR each, whose entries point at scattered guest pages (DMA without
 * PASID is guest physical here: data moves in a qtest). QP 2 (context 1,
 * CQ 1) and QP 3 (context 2, CQ 2) are connected.
 */
#define TL_VA           0x10000800ULL   /* MR 1: not page aligned */
#define TL_LEN          0x3800ULL       /* four pages: 0x10000000.. */
#define TR_VA           0x20000000ULL   /* MR 2: four pages */
#define TR_LEN          0x4000ULL

static const uint64_t tl_pages[4] = {
    DATA_PAGE(5), DATA_PAGE(2), DATA_PAGE(9), DATA_PAGE(7),
};
static const uint64_t tr_pages[4] = {
    DATA_PAGE(12), DATA_PAGE(20), DATA_PAGE(15), DATA_PAGE(11),
};

static void tables_setup(uint32_t *lkey, uint32_t *rkey)
{
    uint8_t zero[4096] = { };

    table_counts_reset();
    for (int i = 0; i < 32; i++) {
        memwrite(DATA_PAGE(i), zero, sizeof(zero));
    }
    start_ctx_no_pasid(1, RING_ADDR);
    start_ctx_no_pasid(2, RING_ADDR + 0x1000);
    *lkey = table_mr(1, 1, TL_VA, TL_LEN, tl_pages, 4);
    *rkey = table_mr(2, 2, TR_VA, TR_LEN, tr_pages, 4);
    g_assert_cmpint(cq_create(1, 1, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create(2, 2, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(2, 1, 7, 1, 1, 4, 0), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(3, 2, 7, 2, 2, 4, 0), ==, PFNIC_CMD_OK);
    qp_connect(2, 3, 7);
    qp_connect(3, 2, 7);
}

/* Bytes of @len from @seed, different at every offset */
static void pattern(uint8_t *p, size_t len, uint8_t seed)
{
    for (size_t i = 0; i < len; i++) {
        p[i] = seed + i * 7 + (i >> 8);
    }
}

/*
 * Loopback through tables: RDMA WRITE and READ, SEND/RECV and atomics
 * across pages that are scattered in guest memory, from offsets that are
 * not page aligned.
 */
static void test_verbs_tables(void)
{
    static uint8_t src[0x3000], got[0x3000];
    uint32_t lkey, rkey;
    uint64_t v;
    PfnicCqe c;

    start(",contexts=4,ats=off,pasid=off,pri=off");
    map_bars();
    tables_setup(&lkey, &rkey);

    /* RDMA WRITE: 0x2800 bytes, 4 local pages to 3 remote ones */
    pattern(src, 0x2800, 1);
    table_rw(tl_pages, TL_VA, TL_VA + 0x100, src, 0x2800, true);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x21, TL_VA + 0x100, 0x2800, lkey,
               TR_VA + 0x300, rkey, 0);
    c = table_cqe(1, 0x21, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.byte_len, ==, 0x2800);
    table_rw(tr_pages, TR_VA, TR_VA + 0x300, got, 0x2800, false);
    g_assert_cmpmem(got, 0x2800, src, 0x2800);
    /* Nothing around it: the bytes before, after, and the fourth page */
    table_rw(tr_pages, TR_VA, TR_VA, got, 0x300, false);
    table_rw(tr_pages, TR_VA, TR_VA + 0x2b00, got + 0x300, 0x1500, false);
    memset(src, 0, 0x1800);
    g_assert_cmpmem(got, 0x1800, src, 0x1800);

    /* RDMA READ: 0x1000 remote bytes across two pages into one local */
    pattern(src, 0x1000, 2);
    table_rw(tr_pages, TR_VA, TR_VA + 0x2800, src, 0x1000, true);
    table_post(1, 2, PFNIC_WR_RDMA_READ, 0x22, TL_VA + 0x2800, 0x1000, lkey,
               TR_VA + 0x2800, rkey, 0);
    table_cqe(1, 0x22, PFNIC_WC_SUCCESS);
    table_rw(tl_pages, TL_VA, TL_VA + 0x2800, got, 0x1000, false);
    g_assert_cmpmem(got, 0x1000, src, 0x1000);

    /* SEND from an odd offset into a receive buffer across two pages */
    pattern(src, 0x600, 3);
    table_rw(tl_pages, TL_VA, TL_VA + 0x123, src, 0x600, true);
    table_recv(2, 3, 0x31, TR_VA + 0xd00, 0x800, rkey);
    table_post(1, 2, PFNIC_WR_SEND, 0x23, TL_VA + 0x123, 0x600, lkey, 0, 0,
               0);
    table_cqe(1, 0x23, PFNIC_WC_SUCCESS);
    c = table_cqe(2, 0x31, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.byte_len, ==, 0x600);
    g_assert_cmpint(c.src_qp, ==, 2);
    table_rw(tr_pages, TR_VA, TR_VA + 0xd00, got, 0x600, false);
    g_assert_cmpmem(got, 0x600, src, 0x600);

    /* Atomics: the remote 8 bytes change, the original lands locally. */
    v = cpu_to_le64(100);
    table_rw(tr_pages, TR_VA, TR_VA + 0x3ff8, &v, 8, true);
    table_post(1, 2, PFNIC_WR_ATOMIC_FETCH_AND_ADD, 0x24, TL_VA + 0x37f8, 8,
               lkey, TR_VA + 0x3ff8, rkey, 5);
    g_assert_cmpint(table_cqe(1, 0x24, PFNIC_WC_SUCCESS).opcode, ==,
                    PFNIC_WC_FETCH_ADD);
    table_rw(tr_pages, TR_VA, TR_VA + 0x3ff8, &v, 8, false);
    g_assert_cmpint(le64_to_cpu(v), ==, 105);
    table_rw(tl_pages, TL_VA, TL_VA + 0x37f8, &v, 8, false);
    g_assert_cmpint(le64_to_cpu(v), ==, 100);
    {
        PfnicWqe w = {
            .opcode = PFNIC_WR_ATOMIC_CMP_AND_SWP,
            .flags = PFNIC_SEND_SIGNALED, .num_sge = 1,
            .wr_id = cpu_to_le64(0x25),
            .remote_addr = cpu_to_le64(TR_VA + 0x3ff8),
            .rkey = cpu_to_le32(rkey), .compare_add = cpu_to_le64(105),
            .swap = cpu_to_le64(7),
            .sge[0] = {
                .addr = cpu_to_le64(TL_VA + 0x37f8), .length = cpu_to_le32(8),
                .lkey = cpu_to_le32(lkey),
            },
        };
        uint16_t slot = sq_next[2]++;

        memwrite(SQ_ADDR + 2 * 0x10000 + (slot % 16) * PFNIC_WQE_SIZE, &w,
                 sizeof(w));
        verbs_db(1, PFNIC_DB_SQ, 2 << 16 | (slot + 1));
    }
    table_cqe(1, 0x25, PFNIC_WC_SUCCESS);
    table_rw(tr_pages, TR_VA, TR_VA + 0x3ff8, &v, 8, false);
    g_assert_cmpint(le64_to_cpu(v), ==, 7);
    table_rw(tl_pages, TL_VA, TL_VA + 0x37f8, &v, 8, false);
    g_assert_cmpint(le64_to_cpu(v), ==, 105);

    assert_no_ats_pri();
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    qtest_end();
}

/*
 * What a table refuses fails as an unmapped page: an invalid entry
 * (never written, or invalidated), an entry without the access, locally
 * LOC_PROT_ERR and remotely REM_ACCESS_ERR; no page request is sent, and
 * the remote QP is untouched. An MTT_WRITE refused for a bad entry
 * changes nothing.
 */
static void test_verbs_table_faults(void)
{
    static uint8_t src[0x2000], got[0x2000];
    uint64_t bad[2] = {
        cpu_to_le64(DATA_PAGE(30) | MTT_RW),
        cpu_to_le64(DATA_PAGE(31) | MTT_RW | 0x10),
    };
    uint32_t lkey, rkey, key, a[PFNIC_CMD_ARGS];

    start(",contexts=4,ats=off,pasid=off,pri=off");
    map_bars();
    tables_setup(&lkey, &rkey);
    /* src[i] at VA 0x10000000 + i: MR 1's pages 0 and 1 */
    pattern(src, sizeof(src), 4);
    table_rw(tl_pages, TL_VA, TL_VA & ~0xfffULL, src, sizeof(src), true);

    /* An invalidated local page: LOC_PROT_ERR, and QP 3 is untouched */
    g_assert_cmpint(mtt_invalidate(1, 1, 1), ==, PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x41, TL_VA + 0x700, 0x200, lkey,
               TR_VA, rkey, 0);
    table_cqe(1, 0x41, PFNIC_WC_LOC_PROT_ERR);
    g_assert_cmpint(qp_state(2), ==, PFNIC_QPS_ERR);
    g_assert_cmpint(qp_state(3), ==, PFNIC_QPS_RTS);
    /* Its first half (page 0) moved before the refusal. */
    table_rw(tr_pages, TR_VA, TR_VA, got, 0x100, false);
    g_assert_cmpmem(got, 0x100, src + 0xf00, 0x100);
    /* Mapped again, the same WQE goes through. */
    g_assert_cmpint(mtt_map(1, 1, &tl_pages[1], 1, MTT_RW), ==,
                    PFNIC_CMD_OK);
    qp_reconnect(2, 3);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x42, TL_VA + 0x700, 0x200, lkey,
               TR_VA, rkey, 0);
    table_cqe(1, 0x42, PFNIC_WC_SUCCESS);
    table_rw(tr_pages, TR_VA, TR_VA, got, 0x200, false);
    g_assert_cmpmem(got, 0x200, src + 0xf00, 0x200);

    /* An invalidated remote page: REM_ACCESS_ERR */
    g_assert_cmpint(mtt_invalidate(2, 2, 2), ==, PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x43, TL_VA, 0x100, lkey,
               TR_VA + 0x2000, rkey, 0);
    table_cqe(1, 0x43, PFNIC_WC_REM_ACCESS_ERR);
    g_assert_cmpint(qp_state(3), ==, PFNIC_QPS_RTS);
    qp_reconnect(2, 3);
    table_post(1, 2, PFNIC_WR_RDMA_READ, 0x44, TL_VA, 0x100, lkey,
               TR_VA + 0x3000, rkey, 0);
    table_cqe(1, 0x44, PFNIC_WC_REM_ACCESS_ERR);
    /* Not a refused key: no access error counted */
    g_assert_cmpint(ctx_access_errors(2), ==, 0);
    qp_reconnect(2, 3);
    /* Into a receive buffer whose page is invalid: REM_ACCESS_ERR too */
    table_recv(2, 3, 0x51, TR_VA + 0x2000, 0x100, rkey);
    table_post(1, 2, PFNIC_WR_SEND, 0x45, TL_VA, 0x100, lkey, 0, 0, 0);
    table_cqe(1, 0x45, PFNIC_WC_REM_ACCESS_ERR);
    g_assert_cmpint(mtt_map(2, 2, &tr_pages[2], 2, MTT_RW), ==,
                    PFNIC_CMD_OK);
    qp_reconnect(2, 3);

    /* Read-only remote page: READ from it works, WRITE to it does not. */
    g_assert_cmpint(mtt_map(2, 0, &tr_pages[0], 1,
                            PFNIC_MTT_VALID | PFNIC_MTT_READ), ==,
                    PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_RDMA_READ, 0x46, TL_VA + 0x1000, 0x200, lkey,
               TR_VA, rkey, 0);
    table_cqe(1, 0x46, PFNIC_WC_SUCCESS);
    table_rw(tl_pages, TL_VA, TL_VA + 0x1000, got, 0x200, false);
    g_assert_cmpmem(got, 0x200, src + 0xf00, 0x200);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x47, TL_VA, 8, lkey, TR_VA, rkey,
               0);
    table_cqe(1, 0x47, PFNIC_WC_REM_ACCESS_ERR);
    qp_reconnect(2, 3);
    /* An atomic both reads and writes: a read-only page refuses it. */
    table_post(1, 2, PFNIC_WR_ATOMIC_FETCH_AND_ADD, 0x48, TL_VA, 8, lkey,
               TR_VA, rkey, 1);
    table_cqe(1, 0x48, PFNIC_WC_REM_ACCESS_ERR);
    qp_reconnect(2, 3);
    /* ... and so does a write-only one. */
    g_assert_cmpint(mtt_map(2, 0, &tr_pages[0], 1,
                            PFNIC_MTT_VALID | PFNIC_MTT_WRITE), ==,
                    PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_ATOMIC_FETCH_AND_ADD, 0x49, TL_VA, 8, lkey,
               TR_VA, rkey, 1);
    table_cqe(1, 0x49, PFNIC_WC_REM_ACCESS_ERR);
    qp_reconnect(2, 3);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x4a, TL_VA, 8, lkey, TR_VA, rkey,
               0);
    table_cqe(1, 0x4a, PFNIC_WC_SUCCESS);
    /* A read-only local page takes no READ response: LOC_PROT_ERR */
    g_assert_cmpint(mtt_map(1, 3, &tl_pages[3], 1,
                            PFNIC_MTT_VALID | PFNIC_MTT_READ), ==,
                    PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_RDMA_READ, 0x4b, TL_VA + 0x2800, 8, lkey,
               TR_VA + 0x1000, rkey, 0);
    table_cqe(1, 0x4b, PFNIC_WC_LOC_PROT_ERR);
    qp_reconnect(2, 3);

    /*
     * MTT_WRITE of a good entry and a bad one: BAD_ARG, and the good one
     * is not written (MR 1's page 0 still is where it was).
     */
    memwrite(MTT_SRC, bad, sizeof(bad));
    g_assert_cmpint(mtt_write(1, 0, 2, MTT_SRC), ==, PFNIC_CMD_BAD_ARG);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x4c, TL_VA, 0x100, lkey,
               TR_VA + 0x1000, rkey, 0);
    table_cqe(1, 0x4c, PFNIC_WC_SUCCESS);
    table_rw(tr_pages, TR_VA, TR_VA + 0x1000, got, 0x100, false);
    g_assert_cmpmem(got, 0x100, src + 0x800, 0x100);

    /* A DMA the platform refuses (no RAM there) fails the same way. */
    bad[0] = cpu_to_le64(0xfffff0000000ULL | MTT_RW);
    memwrite(MTT_SRC, bad, 8);
    g_assert_cmpint(mtt_write(2, 1, 1, MTT_SRC), ==, PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x4d, TL_VA, 0x100, lkey,
               TR_VA + 0x1000, rkey, 0);
    table_cqe(1, 0x4d, PFNIC_WC_REM_ACCESS_ERR);
    qp_reconnect(2, 3);

    /*
     * An MR without a table is refused while context 2 runs without a
     * PASID; set while it is stopped, it reaches nothing once it runs.
     */
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_CLEAR, 2), ==, PFNIC_CMD_OK);
    g_assert_cmpint(mr_set(2, 2, 7, ALL_ACCESS, TR_VA, TR_LEN, &key), ==,
                    PFNIC_CMD_BAD_ARG);
    ctx_select(2);
    reg_write(PFNIC_REG_CTX_CTRL, 0);
    g_assert_cmpint(mr_set(2, 2, 7, ALL_ACCESS, TR_VA, TR_LEN, &key), ==,
                    PFNIC_CMD_OK);
    start_ctx_no_pasid(2, RING_ADDR + 0x1000);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x4e, TL_VA, 0x100, lkey, TR_VA,
               key, 0);
    table_cqe(1, 0x4e, PFNIC_WC_REM_ACCESS_ERR);

    /* No page request went anywhere, and no MR counted one. */
    for (int i = 0; i < PFNIC_CNT_NR; i++) {
        g_assert_cmpint(reg_read(PFNIC_REG_COUNTERS + 4 * i), ==, 0);
    }
    a[0] = 1;
    g_assert_cmpint(cmd(PFNIC_CMD_MR_QUERY, a, 1), ==, PFNIC_CMD_OK);
    for (int i = 0; i < 14; i++) {
        g_assert_cmphex(a[i], ==, 0);
    }
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    qtest_end();
}

/*
 * A context with a PASID may use table MRs too: they move data without
 * any IOMMU, and a PREFETCH of one succeeds at once.
 */
static void test_verbs_table_pasid(void)
{
    static uint8_t src[0x1000], got[0x1000];
    PfnicDesc d = {
        .opcode = PFNIC_OP_PREFETCH, .flags = PFNIC_PREFETCH_WRITE,
        .dst = cpu_to_le64(TL_VA), .len = cpu_to_le64(TL_LEN),
    };
    uint32_t lkey, rkey;

    start(",contexts=4");
    map_bars();
    table_counts_reset();
    enable_sva_caps();
    start_ctx(1, RING_ADDR);
    start_ctx_no_pasid(2, RING_ADDR + 0x1000);
    lkey = table_mr(1, 1, TL_VA, TL_LEN, tl_pages, 4);
    rkey = table_mr(2, 2, TR_VA, TR_LEN, tr_pages, 4);
    g_assert_cmpint(cq_create(1, 1, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create(2, 2, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(2, 1, 7, 1, 1, 4, 0), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(3, 2, 7, 2, 2, 4, 0), ==, PFNIC_CMD_OK);
    qp_connect(2, 3, 7);
    qp_connect(3, 2, 7);

    d.src = cpu_to_le64(lkey);
    g_assert_cmphex(run_desc(0, &d), ==, PFNIC_DESC_DONE | PFNIC_ST_SUCCESS);
    memread(RING_ADDR + offsetof(PfnicDesc, result), &d.result, 8);
    g_assert_cmpint(le64_to_cpu(d.result), ==, TL_LEN);
    /* A bad key is still PROTECTION. */
    d.src = cpu_to_le64(lkey ^ 1);
    g_assert_cmphex(run_desc(1, &d), ==, PFNIC_DESC_DONE |
                    PFNIC_ST_PROTECTION);

    pattern(src, sizeof(src), 5);
    table_rw(tl_pages, TL_VA, TL_VA + 0x10, src, sizeof(src), true);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x61, TL_VA + 0x10, sizeof(src),
               lkey, TR_VA + 0x20, rkey, 0);
    table_cqe(1, 0x61, PFNIC_WC_SUCCESS);
    table_rw(tr_pages, TR_VA, TR_VA + 0x20, got, sizeof(got), false);
    g_assert_cmpmem(got, sizeof(got), src, sizeof(src));
    /* Nothing asked of ATS: the table MR never enters the ATC. */
    g_assert_cmpint(reg_read(PFNIC_REG_COUNTERS + 4 * PFNIC_CNT_ATC_MISSES),
                    ==, 0);
    g_assert_cmpint(reg_read(PFNIC_REG_COUNTERS + 4 * PFNIC_CNT_ATC_HITS),
                    ==, 0);
    qtest_end();
}

/* --- driver-managed faults (ABI 1.9) ------------------------------------- */

#define FAULT_TABLE     (PFNIC_MR_FLAG_TABLE | PFNIC_MR_FLAG_FAULT)

/* An event queue and what the test has read of it */
typedef struct TestEq {
    uint64_t base;
    uint32_t size;
    uint32_t seen;
} TestEq;

static TestEq eq;

static void test_eq_setup(TestEq *q, uint64_t base, uint32_t size)
{
    uint8_t zero[PFNIC_EQE_SIZE * 16] = { };

    g_assert_cmpint(size, <=, 16);
    *q = (TestEq) { .base = base, .size = size };
    memwrite(base, zero, sizeof(zero));
    reg_write(PFNIC_REG_EQ_BASE_LO, base);
    reg_write(PFNIC_REG_EQ_BASE_HI, base >> 32);
    reg_write(PFNIC_REG_EQ_VECTOR, EQ_VEC);
    reg_write(PFNIC_REG_EQ_SIZE, size);
}

typedef struct TestEqe {
    uint8_t type;
    uint8_t flags;
    uint32_t object;
    uint64_t data;
} TestEqe;

/* The next event of @q if the device has queued it (not consumed) */
static bool test_eq_peek(TestEq *q, TestEqe *ev)
{
    uint8_t e[PFNIC_EQE_SIZE];

    memread(q->base + (q->seen % q->size) * PFNIC_EQE_SIZE, e, sizeof(e));
    if (e[PFNIC_EQE_OWNER] != (((q->seen / q->size) & 1) ^ 1)) {
        return false;
    }
    *ev = (TestEqe) {
        .type = e[0], .flags = e[PFNIC_EQE_FLAGS], .object = ldl_le_p(&e[4]),
        .data = ldq_le_p(&e[PFNIC_EQE_DATA]),
    };
    return true;
}

/* Take the next event of @q (waiting for it a little), and consume it. */
static TestEqe test_eq_next(TestEq *q)
{
    TestEqe ev;

    for (int i = 0; i < 1000 && !test_eq_peek(q, &ev); i++) {
        clock_step(10000);
    }
    g_assert_true(test_eq_peek(q, &ev));
    q->seen++;
    reg_write(PFNIC_REG_EQ_HEAD, q->seen);
    return ev;
}

/* Nothing more in @q, even after a while. */
static void test_eq_none(TestEq *q)
{
    TestEqe ev;

    clock_step(1000000);
    g_assert_false(test_eq_peek(q, &ev));
}

/*
 * The next event of @q is PAGE_FAULT for entries @first + @count of @mr
 * (bits 47:32 of @first at 63:48 of the data, ABI 1.10).
 */
static void expect_fault_on(TestEq *q, uint32_t mr, uint64_t first,
                            uint32_t count, bool write)
{
    TestEqe ev = test_eq_next(q);

    g_assert_cmpint(ev.type, ==, PFNIC_EV_PAGE_FAULT);
    g_assert_cmpint(ev.object, ==, mr);
    g_assert_cmphex(ev.flags, ==, write ? PFNIC_EQE_FAULT_WRITE : 0);
    g_assert_cmphex(ev.data, ==, (first & UINT32_MAX) |
                                 (uint64_t)count << 32 | (first >> 32) << 48);
}

static void expect_fault(uint32_t mr, uint64_t first, uint32_t count,
                         bool write)
{
    expect_fault_on(&eq, mr, first, count, write);
}

/* The first entry's high word in a4 (ABI 1.10) */
static uint32_t fault_resume(uint32_t mr, uint64_t first, uint32_t count,
                             uint32_t status)
{
    uint32_t a[PFNIC_CMD_ARGS] = { mr, first, count, status, first >> 32 };

    return cmd(PFNIC_CMD_FAULT_RESUME, a, PFNIC_CMD_ARGS);
}

/* Make entries [first, first + n) of @mr point at @pages, then resume. */
static void fault_serve(uint32_t mr, uint64_t first, const uint64_t *pages,
                        uint32_t n)
{
    g_assert_cmpint(mtt_map(mr, first, pages, n, MTT_RW), ==, PFNIC_CMD_OK);
    g_assert_cmpint(fault_resume(mr, first, n, PFNIC_FAULT_RESUME_RETRY), ==,
                    PFNIC_CMD_OK);
}

/* No completion in CQ @cqn after the ones the test has taken. */
static void assert_no_cqe(uint32_t cqn)
{
    uint32_t n = cq_seen[cqn];

    clock_step(1000000);
    g_assert_cmpint(read_cqe(cqn, n % 16).owner, !=, ((n / 16) & 1) ^ 1);
}

/* MR_QUERY @mr: page_faults, page_faults_handled, page_fault_groups */
static void assert_mr_faults(uint32_t mr, uint64_t faults, uint64_t handled,
                             uint64_t groups)
{
    uint32_t a[PFNIC_CMD_ARGS] = { mr };

    g_assert_cmpint(cmd(PFNIC_CMD_MR_QUERY, a, 1), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[0] | (uint64_t)a[1] << 32, ==, faults);
    g_assert_cmpint(a[2] | (uint64_t)a[3] << 32, ==, handled);
    g_assert_cmpint(a[12] | (uint64_t)a[13] << 32, ==, groups);
    /* invalidations, prefetch and refused keys: none */
    for (int i = 4; i < 12; i++) {
        g_assert_cmpint(a[i], ==, 0);
    }
}

static uint32_t fault_mr(uint32_t index, uint32_t ctx, uint64_t addr,
                         uint64_t len)
{
    uint32_t key;

    g_assert_cmpint(mr_set_flags(index, ctx, 7, ALL_ACCESS, addr, len,
                                 FAULT_TABLE, &key), ==, PFNIC_CMD_OK);
    return key;
}

/*
 * As tables_setup(), but MRs 1 (context 1, TL_VA) and 2 (context 2,
 * [@raddr, @raddr + @rlen)) are FAULT MRs whose entries are all invalid,
 * and the event queue has 16 entries. With @more, QP 4 (context 1, CQ 3)
 * and QP 5 (context 2, CQ 4) are connected too.
 */
static void faults_setup_at(uint32_t *lkey, uint32_t *rkey, bool more,
                            uint64_t raddr, uint64_t rlen)
{
    uint8_t zero[4096] = { };

    table_counts_reset();
    for (int i = 0; i < 32; i++) {
        memwrite(DATA_PAGE(i), zero, sizeof(zero));
    }
    start_ctx_no_pasid(1, RING_ADDR);
    start_ctx_no_pasid(2, RING_ADDR + 0x1000);
    *lkey = fault_mr(1, 1, TL_VA, TL_LEN);
    *rkey = fault_mr(2, 2, raddr, rlen);
    g_assert_cmpint(cq_create(1, 1, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create(2, 2, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(2, 1, 7, 1, 1, 4, 0), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(3, 2, 7, 2, 2, 4, 0), ==, PFNIC_CMD_OK);
    qp_connect(2, 3, 7);
    qp_connect(3, 2, 7);
    if (more) {
        g_assert_cmpint(cq_create(3, 1, 4), ==, PFNIC_CMD_OK);
        g_assert_cmpint(cq_create(4, 2, 4), ==, PFNIC_CMD_OK);
        g_assert_cmpint(qp_create(4, 1, 7, 3, 3, 4, 0), ==, PFNIC_CMD_OK);
        g_assert_cmpint(qp_create(5, 2, 7, 4, 4, 4, 0), ==, PFNIC_CMD_OK);
        qp_connect(4, 5, 7);
        qp_connect(5, 4, 7);
    }
    test_eq_setup(&eq, EQ_ADDR, 16);
}

/* faults_setup_at() with MR 2 over TR_VA */
static void faults_setup(uint32_t *lkey, uint32_t *rkey, bool more)
{
    faults_setup_at(lkey, rkey, more, TR_VA, TR_LEN);
}

/*
 * MR_SET FAULT and FAULT_RESUME: every status. A PREFETCH of a FAULT MR
 * succeeds at once and raises no event.
 */
static void test_verbs_fault_commands(void)
{
    PfnicDesc d = {
        .opcode = PFNIC_OP_PREFETCH, .flags = PFNIC_PREFETCH_WRITE,
        .dst = cpu_to_le64(0x10000ff8), .len = cpu_to_le64(0x1010),
    };
    uint32_t key;

    start(",contexts=4");
    map_bars();
    enable_sva_caps();
    start_ctx(1, RING_ADDR);
    test_eq_setup(&eq, EQ_ADDR, 16);

    /* FAULT needs TABLE; bits above FAULT are reserved. */
    g_assert_cmpint(mr_set_flags(1, 1, 7, 0, 0x10000000, 0x1000,
                                 PFNIC_MR_FLAG_FAULT, NULL), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mr_set_flags(1, 1, 7, 0, 0x10000000, 0x1000,
                                 FAULT_TABLE | 4, NULL), ==,
                    PFNIC_CMD_BAD_ARG);
    /* The implicit MR has a table only with FAULT (ABI 1.10). */
    g_assert_cmpint(mr_set_flags(1, 1, 7, 0, 0, UINT64_MAX,
                                 PFNIC_MR_FLAG_TABLE, NULL), ==,
                    PFNIC_CMD_BAD_ARG);
    /* [0x10000ff8, 0x10002008): three entries */
    g_assert_cmpint(mr_set_flags(2, 1, 7, ALL_ACCESS, 0x10000ff8, 0x1010,
                                 FAULT_TABLE, &key), ==, PFNIC_CMD_OK);
    g_assert_cmpint(mr_set_flags(3, 1, 7, ALL_ACCESS, 0x20000000, 0x1000,
                                 PFNIC_MR_FLAG_TABLE, NULL), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(mr_set(4, 1, 7, ALL_ACCESS, 0x30000000, 0x1000, NULL),
                    ==, PFNIC_CMD_OK);

    /* Index, then state (a FAULT MR), then range and status */
    g_assert_cmpint(fault_resume(4096, 0, 1, 0), ==, PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(fault_resume(UINT32_MAX, 0, 1, 0), ==,
                    PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(fault_resume(5, 0, 1, 0), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(fault_resume(3, 0, 1, 0), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(fault_resume(4, 0, 1, 0), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(fault_resume(3, 9, 0, 7), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(fault_resume(2, 0, 0, 0), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(fault_resume(2, 3, 1, 0), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(fault_resume(2, 2, 2, 0), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(fault_resume(2, UINT32_MAX, 2, 0), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(fault_resume(2, 1, UINT32_MAX, 0), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(fault_resume(2, 0, 1, 2), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(fault_resume(2, 0, 1, UINT32_MAX), ==,
                    PFNIC_CMD_BAD_ARG);
    /* Entries nothing waits for: fine, and nothing happens. */
    g_assert_cmpint(fault_resume(2, 0, 3, 0), ==, PFNIC_CMD_OK);
    g_assert_cmpint(fault_resume(2, 2, 1, 1), ==, PFNIC_CMD_OK);

    /* PREFETCH: nothing to make present, no event */
    d.src = cpu_to_le64(key);
    g_assert_cmphex(run_desc(0, &d), ==, PFNIC_DESC_DONE | PFNIC_ST_SUCCESS);
    memread(RING_ADDR + offsetof(PfnicDesc, result), &d.result, 8);
    g_assert_cmpint(le64_to_cpu(d.result), ==, 0x1010);
    test_eq_none(&eq);
    assert_mr_faults(2, 0, 0, 0);

    /* MR_CLEAR: the index is no FAULT MR any more. */
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_CLEAR, 2), ==, PFNIC_CMD_OK);
    g_assert_cmpint(fault_resume(2, 0, 1, 0), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmphex(reg_read(PFNIC_REG_EQ_OVERFLOW), ==, 0);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    qtest_end();
}

/*
 * The implicit MR with a table (ABI 1.10): MR_SET takes it with FAULT, its
 * entries are the pages of the whole address space (64-bit indexes: a
 * PAGE_FAULT event carries bits 47:32 of the first at 63:48, MTT_WRITE
 * takes them in a5, MTT_INVALIDATE in a3, FAULT_RESUME in a4), and only
 * the valid entries written count against table-entries, until
 * invalidated or cleared.
 */
static void test_verbs_implicit_table(void)
{
    static uint8_t src[0x2800], got[0x2800];
    const uint64_t hi_va = 0x7f1234567000ULL;     /* entry 0x7f1234567 */
    const uint64_t first = hi_va / 4096;
    const uint64_t pages[3] = { DATA_PAGE(12), DATA_PAGE(20), DATA_PAGE(15) };
    uint32_t lkey, rkey;

    /* MR 1: 4 of the 8 entries; MR 2: the implicit one */
    start(",contexts=4,ats=off,pasid=off,pri=off,table-entries=8");
    map_bars();
    faults_setup_at(&lkey, &rkey, false, 0, UINT64_MAX);

    /* RDMA WRITE into three pages far up: the source first, then them */
    pattern(src, sizeof(src), 4);
    table_rw(tl_pages, TL_VA, TL_VA + 0x100, src, sizeof(src), true);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x41, TL_VA + 0x100, sizeof(src),
               lkey, hi_va + 0x300, rkey, 0);
    expect_fault(1, 0, 4, false);
    fault_serve(1, 0, tl_pages, 4);
    expect_fault(2, first, 3, true);
    assert_no_cqe(1);
    /* Without the high word the entries are others: the work still waits. */
    g_assert_cmpint(mtt_map(2, (uint32_t)first, pages, 3, MTT_RW), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(fault_resume(2, (uint32_t)first, 3, 0), ==,
                    PFNIC_CMD_OK);
    assert_no_cqe(1);
    /* One entry left: two more do not fit, and change nothing. */
    g_assert_cmpint(mtt_map(2, first + 3, pages, 2, MTT_RW), ==,
                    PFNIC_CMD_NO_SPACE);
    /* The 3 entries at the low index go: a long range, by the entries */
    g_assert_cmpint(mtt_invalidate(2, (uint32_t)first, UINT32_MAX), ==,
                    PFNIC_CMD_OK);
    fault_serve(2, first, pages, 3);
    table_cqe(1, 0x41, PFNIC_WC_SUCCESS);
    table_rw(pages, hi_va, hi_va + 0x300, got, sizeof(got), false);
    g_assert_cmpmem(got, sizeof(got), src, sizeof(src));
    assert_mr_faults(2, 3, 3, 1);

    /* MTT_INVALIDATE with the high word in a3: the READ faults again. */
    g_assert_cmpint(mtt_invalidate(2, first, 1), ==, PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_RDMA_READ, 0x42, TL_VA, 0x100, lkey,
               hi_va + 0x300, rkey, 0);
    expect_fault(2, first, 1, false);
    /* Past the address space: BAD_ARG */
    g_assert_cmpint(fault_resume(2, 0xfffffffffffffULL, 2, 0), ==,
                    PFNIC_CMD_BAD_ARG);
    fault_serve(2, first, pages, 1);
    table_cqe(1, 0x42, PFNIC_WC_SUCCESS);
    table_rw(tl_pages, TL_VA, TL_VA, got, 0x100, false);
    g_assert_cmpmem(got, 0x100, src, 0x100);

    /* MR_CLEAR gives the entries back: a 4-entry table fits again. */
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_CLEAR, 2), ==, PFNIC_CMD_OK);
    g_assert_cmpint(mr_set_flags(2, 2, 7, 0, 0x30000000, 4 * 4096,
                                 PFNIC_MR_FLAG_TABLE, NULL), ==,
                    PFNIC_CMD_OK);
    test_eq_none(&eq);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    qtest_end();
}

/*
 * FAULT MRs whose entries are all invalid: every RDMA op waits for the
 * driver, one side at a time, with one PAGE_FAULT event per side (the
 * entries it still needs, and whether it writes them); once the driver
 * writes the entries and resumes, the data moves.
 */
static void test_verbs_driver_faults(void)
{
    static uint8_t src[0x3000], got[0x3000];
    uint32_t lkey, rkey;
    uint64_t v;
    PfnicCqe c;

    start(",contexts=4,ats=off,pasid=off,pri=off");
    map_bars();
    faults_setup(&lkey, &rkey, false);

    /* RDMA WRITE of 0x2800 bytes: the local source's 4 pages first */
    pattern(src, 0x2800, 1);
    table_rw(tl_pages, TL_VA, TL_VA + 0x100, src, 0x2800, true);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x21, TL_VA + 0x100, 0x2800, lkey,
               TR_VA + 0x300, rkey, 0);
    expect_fault(1, 0, 4, false);
    test_eq_none(&eq);
    assert_no_cqe(1);
    /* ... then the remote target's 3 pages, to write */
    fault_serve(1, 0, tl_pages, 4);
    expect_fault(2, 0, 3, true);
    assert_no_cqe(1);
    fault_serve(2, 0, tr_pages, 3);
    c = table_cqe(1, 0x21, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.byte_len, ==, 0x2800);
    g_assert_cmpint(c.vendor_err, ==, 0);   /* no page request */
    table_rw(tr_pages, TR_VA, TR_VA + 0x300, got, 0x2800, false);
    g_assert_cmpmem(got, 0x2800, src, 0x2800);
    g_assert_cmpint(qp_state(3), ==, PFNIC_QPS_RTS);

    /* RDMA READ: the local target (to write), then the remote source */
    g_assert_cmpint(mtt_invalidate(1, 0, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(mtt_invalidate(2, 0, 4), ==, PFNIC_CMD_OK);
    pattern(src, 0x1000, 2);
    table_rw(tr_pages, TR_VA, TR_VA + 0x2800, src, 0x1000, true);
    table_post(1, 2, PFNIC_WR_RDMA_READ, 0x22, TL_VA + 0x2800, 0x1000, lkey,
               TR_VA + 0x2800, rkey, 0);
    expect_fault(1, 3, 1, true);
    fault_serve(1, 3, &tl_pages[3], 1);
    expect_fault(2, 2, 2, false);
    fault_serve(2, 2, &tr_pages[2], 2);
    table_cqe(1, 0x22, PFNIC_WC_SUCCESS);
    table_rw(tl_pages, TL_VA, TL_VA + 0x2800, got, 0x1000, false);
    g_assert_cmpmem(got, 0x1000, src, 0x1000);

    /* SEND: the local source, then the receive buffer (two pages) */
    pattern(src, 0x600, 3);
    table_rw(tl_pages, TL_VA, TL_VA + 0x123, src, 0x600, true);
    table_recv(2, 3, 0x31, TR_VA + 0xd00, 0x800, rkey);
    table_post(1, 2, PFNIC_WR_SEND, 0x23, TL_VA + 0x123, 0x600, lkey, 0, 0,
               0);
    expect_fault(1, 0, 1, false);
    fault_serve(1, 0, tl_pages, 1);
    expect_fault(2, 0, 2, true);
    assert_no_cqe(2);
    fault_serve(2, 0, tr_pages, 2);
    table_cqe(1, 0x23, PFNIC_WC_SUCCESS);
    c = table_cqe(2, 0x31, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.byte_len, ==, 0x600);
    table_rw(tr_pages, TR_VA, TR_VA + 0xd00, got, 0x600, false);
    g_assert_cmpmem(got, 0x600, src, 0x600);

    /* An atomic's target readable only: its event asks for writing. */
    v = cpu_to_le64(100);
    table_rw(tr_pages, TR_VA, TR_VA + 0x3ff8, &v, 8, true);
    g_assert_cmpint(mtt_map(2, 3, &tr_pages[3], 1,
                            PFNIC_MTT_VALID | PFNIC_MTT_READ), ==,
                    PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_ATOMIC_FETCH_AND_ADD, 0x24, TL_VA + 0x37f8, 8,
               lkey, TR_VA + 0x3ff8, rkey, 5);
    expect_fault(2, 3, 1, true);
    fault_serve(2, 3, &tr_pages[3], 1);
    table_cqe(1, 0x24, PFNIC_WC_SUCCESS);
    table_rw(tr_pages, TR_VA, TR_VA + 0x3ff8, &v, 8, false);
    g_assert_cmpint(le64_to_cpu(v), ==, 105);
    table_rw(tl_pages, TL_VA, TL_VA + 0x37f8, &v, 8, false);
    g_assert_cmpint(le64_to_cpu(v), ==, 100);

    /* Look-ahead at the next WQE raises no event: only the head's does. */
    g_assert_cmpint(mtt_invalidate(1, 0, 4), ==, PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x25, TL_VA, 0x100, lkey, TR_VA,
               rkey, 0);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x26, TL_VA + 0x2800, 0x100, lkey,
               TR_VA, rkey, 0);
    expect_fault(1, 0, 1, false);
    test_eq_none(&eq);
    fault_serve(1, 0, tl_pages, 1);
    table_cqe(1, 0x25, PFNIC_WC_SUCCESS);
    expect_fault(1, 3, 1, false);
    fault_serve(1, 3, &tl_pages[3], 1);
    table_cqe(1, 0x26, PFNIC_WC_SUCCESS);

    /* Entries in events, entries resumed, events */
    assert_mr_faults(1, 8, 8, 5);
    assert_mr_faults(2, 8, 8, 4);
    test_eq_none(&eq);
    g_assert_cmphex(reg_read(PFNIC_REG_EQ_OVERFLOW), ==, 0);
    assert_no_ats_pri();
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    qtest_end();
}

/*
 * FAULT_RESUME status 1 fails the waiting work as an unmapped page
 * (LOC_PROT_ERR, REM_ACCESS_ERR), and other QPs go on meanwhile.
 * MR_CLEAR, a QP reset or destroy and a context stop leave nothing
 * waiting and no report behind: the next miss raises an event of its own.
 */
static void test_verbs_driver_fault_errors(void)
{
    uint32_t lkey, rkey, key3, key4, a[PFNIC_CMD_ARGS];
    TestEqe ev;

    start(",contexts=4,ats=off,pasid=off,pri=off");
    map_bars();
    faults_setup(&lkey, &rkey, true);
    fault_serve(2, 0, tr_pages, 4);
    /* MRs 3 and 4: plain tables for QP 4 to QP 5, which must go on */
    key3 = table_mr(3, 1, 0x30000000, 0x1000, &tl_pages[0], 1);
    key4 = table_mr(4, 2, 0x40000000, 0x1000, &tr_pages[3], 1);

    /* Status 1 for a local page: LOC_PROT_ERR; QPs 3, 4, 5 untouched */
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x41, TL_VA, 0x100, lkey, TR_VA,
               rkey, 0);
    expect_fault(1, 0, 1, false);
    table_post(1, 4, PFNIC_WR_RDMA_WRITE, 0x81, 0x30000000, 0x100, key3,
               0x40000000, key4, 0);
    table_cqe(3, 0x81, PFNIC_WC_SUCCESS);
    assert_no_cqe(1);
    g_assert_cmpint(fault_resume(1, 0, 1, PFNIC_FAULT_RESUME_FAIL), ==,
                    PFNIC_CMD_OK);
    table_cqe(1, 0x41, PFNIC_WC_LOC_PROT_ERR);
    g_assert_cmpint(qp_state(2), ==, PFNIC_QPS_ERR);
    g_assert_cmpint(qp_state(3), ==, PFNIC_QPS_RTS);
    g_assert_cmpint(qp_state(4), ==, PFNIC_QPS_RTS);
    table_post(1, 4, PFNIC_WR_RDMA_WRITE, 0x82, 0x30000000, 0x100, key3,
               0x40000000, key4, 0);
    table_cqe(3, 0x82, PFNIC_WC_SUCCESS);
    assert_mr_faults(1, 1, 0, 1);

    /* Status 1 for a remote page: REM_ACCESS_ERR, no refused key */
    qp_reconnect(2, 3);
    fault_serve(1, 0, tl_pages, 4);
    g_assert_cmpint(mtt_invalidate(2, 1, 1), ==, PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x42, TL_VA, 0x100, lkey,
               TR_VA + 0x1000, rkey, 0);
    expect_fault(2, 1, 1, true);
    g_assert_cmpint(fault_resume(2, 0, 4, PFNIC_FAULT_RESUME_FAIL), ==,
                    PFNIC_CMD_OK);
    table_cqe(1, 0x42, PFNIC_WC_REM_ACCESS_ERR);
    g_assert_cmpint(qp_state(3), ==, PFNIC_QPS_RTS);
    g_assert_cmpint(ctx_access_errors(2), ==, 0);

    /*
     * MR_CLEAR of the local MR while QP 2 waits: its key check fails
     * (LOC_PROT_ERR). A new FAULT MR at index 1 is not confused with the
     * old one: its miss raises an event of its own, and resumes it.
     */
    qp_reconnect(2, 3);
    g_assert_cmpint(mtt_invalidate(1, 0, 1), ==, PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x43, TL_VA, 0x100, lkey, TR_VA,
               rkey, 0);
    expect_fault(1, 0, 1, false);
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_CLEAR, 1), ==, PFNIC_CMD_OK);
    table_cqe(1, 0x43, PFNIC_WC_LOC_PROT_ERR);
    g_assert_cmpint(fault_resume(1, 0, 1, 0), ==, PFNIC_CMD_BAD_STATE);
    lkey = fault_mr(1, 1, TL_VA, TL_LEN);
    assert_mr_faults(1, 0, 0, 0);
    qp_reconnect(2, 3);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x44, TL_VA, 0x100, lkey, TR_VA,
               rkey, 0);
    expect_fault(1, 0, 1, false);
    assert_no_cqe(1);
    fault_serve(1, 0, tl_pages, 4);
    table_cqe(1, 0x44, PFNIC_WC_SUCCESS);
    assert_mr_faults(1, 1, 1, 1);

    /*
     * MR_CLEAR of the remote MR while QP 2 waits for it: its remote key
     * check fails (REM_ACCESS_ERR, a refused key, whose first queues an
     * ACCESS_ERROR event).
     */
    g_assert_cmpint(mtt_invalidate(2, 2, 1), ==, PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x45, TL_VA, 0x100, lkey,
               TR_VA + 0x2000, rkey, 0);
    expect_fault(2, 2, 1, true);
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_CLEAR, 2), ==, PFNIC_CMD_OK);
    table_cqe(1, 0x45, PFNIC_WC_REM_ACCESS_ERR);
    ev = test_eq_next(&eq);
    g_assert_cmpint(ev.type, ==, PFNIC_EV_ACCESS_ERROR);
    g_assert_cmpint(ev.object, ==, 2);
    g_assert_cmpint(ctx_access_errors(2), ==, 1);
    rkey = fault_mr(2, 2, TR_VA, TR_LEN);
    fault_serve(2, 0, tr_pages, 4);

    /*
     * A QP reset while it waits: no completion; the report goes with its
     * only waiter, so the driver's late answer is a no-op, and the WQE
     * posted again raises a new event.
     */
    qp_reconnect(2, 3);
    g_assert_cmpint(mtt_invalidate(1, 1, 1), ==, PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x46, TL_VA + 0x800, 0x1000, lkey,
               TR_VA, rkey, 0);
    expect_fault(1, 1, 1, false);
    g_assert_cmpint(qp_modify(2, PFNIC_QPS_RESET, 0, 0, 0, 0), ==,
                    PFNIC_CMD_OK);
    assert_no_cqe(1);
    g_assert_cmpint(fault_resume(1, 1, 1, 0), ==, PFNIC_CMD_OK);
    qp_connect(2, 3, 7);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x47, TL_VA + 0x800, 0x1000, lkey,
               TR_VA, rkey, 0);
    expect_fault(1, 1, 1, false);
    fault_serve(1, 1, &tl_pages[1], 1);
    table_cqe(1, 0x47, PFNIC_WC_SUCCESS);

    /* The same for a QP destroyed while it waits */
    g_assert_cmpint(mtt_invalidate(1, 2, 1), ==, PFNIC_CMD_OK);
    table_post(1, 4, PFNIC_WR_RDMA_WRITE, 0x83, TL_VA + 0x1800, 0x100, lkey,
               0x40000000, key4, 0);
    expect_fault(1, 2, 1, false);
    a[0] = 4;
    g_assert_cmpint(cmd(PFNIC_CMD_QP_DESTROY, a, 1), ==, PFNIC_CMD_OK);
    g_assert_cmpint(fault_resume(1, 2, 1, PFNIC_FAULT_RESUME_FAIL), ==,
                    PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x48, TL_VA + 0x1800, 0x100, lkey,
               TR_VA, rkey, 0);
    expect_fault(1, 2, 1, false);
    fault_serve(1, 2, &tl_pages[2], 1);
    table_cqe(1, 0x48, PFNIC_WC_SUCCESS);

    /*
     * A stop of the remote context while QP 2 waits for its table: QP 2
     * finds its destination gone (RETRY_EXC_ERR), the report goes, and
     * once the context runs again the miss is reported anew.
     */
    g_assert_cmpint(mtt_invalidate(2, 3, 1), ==, PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x49, TL_VA, 0x100, lkey,
               TR_VA + 0x3000, rkey, 0);
    expect_fault(2, 3, 1, true);
    ctx_select(2);
    reg_write(PFNIC_REG_CTX_CTRL, 0);
    table_cqe(1, 0x49, PFNIC_WC_RETRY_EXC_ERR);
    g_assert_cmpint(fault_resume(2, 3, 1, 0), ==, PFNIC_CMD_OK);
    start_ctx_no_pasid(2, RING_ADDR + 0x1000);
    qp_reconnect(3, 2);
    qp_reconnect(2, 3);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x4a, TL_VA, 0x100, lkey,
               TR_VA + 0x3000, rkey, 0);
    expect_fault(2, 3, 1, true);
    fault_serve(2, 3, &tr_pages[3], 1);
    table_cqe(1, 0x4a, PFNIC_WC_SUCCESS);

    test_eq_none(&eq);
    g_assert_cmphex(reg_read(PFNIC_REG_EQ_OVERFLOW), ==, 0);

    /* A reset while QP 2 waits forgets it all: the miss is new after it. */
    g_assert_cmpint(mtt_invalidate(1, 0, 1), ==, PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x4b, TL_VA, 0x100, lkey, TR_VA,
               rkey, 0);
    expect_fault(1, 0, 1, false);
    reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    faults_setup(&lkey, &rkey, false);
    fault_serve(2, 0, tr_pages, 4);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x4c, TL_VA, 0x100, lkey, TR_VA,
               rkey, 0);
    expect_fault(1, 0, 1, false);
    fault_serve(1, 0, tl_pages, 1);
    table_cqe(1, 0x4c, PFNIC_WC_SUCCESS);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    qtest_end();
}

/*
 * One event per fault episode: work that needs entries already reported
 * waits for that report (a write's report serves a read, not the other
 * way round). FAULT_RESUME wakes exactly the work waiting for an entry in
 * its range. An event that finds the event queue full is held, not
 * dropped: it is queued once the driver consumes an entry, and forgotten
 * if its work goes first.
 */
static void test_verbs_driver_fault_dedupe(void)
{
    static uint8_t src[0x4000], got[0x3000];
    uint32_t lkey, rkey;

    start(",contexts=4,ats=off,pasid=off,pri=off");
    map_bars();
    faults_setup(&lkey, &rkey, true);
    fault_serve(2, 0, tr_pages, 4);
    pattern(src, sizeof(src), 7);
    table_rw(tl_pages, TL_VA, TL_VA & ~0xfffULL, src, sizeof(src), true);

    /* QP 2 needs entries 0..3 of MR 1, QP 4 entries 1..2: one event */
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x51, TL_VA + 0x100, 0x2800, lkey,
               TR_VA, rkey, 0);
    expect_fault(1, 0, 4, false);
    table_post(1, 4, PFNIC_WR_RDMA_WRITE, 0x91, TL_VA + 0x1000, 0x1000,
               lkey, TR_VA + 0x3000, rkey, 0);
    test_eq_none(&eq);
    assert_no_cqe(1);
    assert_no_cqe(3);
    /* Entry 3: neither waits for it (QP 2 for 0, QP 4 for 1) */
    g_assert_cmpint(mtt_map(1, 0, tl_pages, 4, MTT_RW), ==, PFNIC_CMD_OK);
    g_assert_cmpint(fault_resume(1, 3, 1, 0), ==, PFNIC_CMD_OK);
    assert_no_cqe(1);
    assert_no_cqe(3);
    /* Entry 0 wakes QP 2 only, though entry 1 is valid now too. */
    g_assert_cmpint(fault_resume(1, 0, 1, 0), ==, PFNIC_CMD_OK);
    table_cqe(1, 0x51, PFNIC_WC_SUCCESS);
    table_rw(tr_pages, TR_VA, TR_VA, got, 0x2800, false);
    g_assert_cmpmem(got, 0x2800, src + 0x900, 0x2800);
    assert_no_cqe(3);
    g_assert_cmpint(fault_resume(1, 1, 1, 0), ==, PFNIC_CMD_OK);
    table_cqe(3, 0x91, PFNIC_WC_SUCCESS);
    table_rw(tr_pages, TR_VA, TR_VA + 0x3000, got, 0x1000, false);
    g_assert_cmpmem(got, 0x1000, src + 0x1800, 0x1000);
    test_eq_none(&eq);
    /* One event of 4 entries; 3 of them answered while work waited */
    assert_mr_faults(1, 4, 3, 1);

    /* A write's report serves a read of the same entry ... */
    g_assert_cmpint(mtt_invalidate(2, 2, 2), ==, PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x52, TL_VA, 0x100, lkey,
               TR_VA + 0x2000, rkey, 0);
    expect_fault(2, 2, 1, true);
    table_post(1, 4, PFNIC_WR_RDMA_READ, 0x92, TL_VA, 0x100, lkey,
               TR_VA + 0x2100, rkey, 0);
    test_eq_none(&eq);
    /* ... but a read's (QP 3's source) does not serve a write (QP 5's). */
    table_post(2, 3, PFNIC_WR_RDMA_WRITE, 0x61, TR_VA + 0x3000, 0x100, rkey,
               TL_VA + 0x1800, lkey, 0);
    expect_fault(2, 3, 1, false);
    table_post(2, 5, PFNIC_WR_RDMA_READ, 0xa1, TR_VA + 0x3100, 0x100, rkey,
               TL_VA, lkey, 0);
    expect_fault(2, 3, 1, true);
    test_eq_none(&eq);
    fault_serve(2, 2, &tr_pages[2], 2);
    table_cqe(1, 0x52, PFNIC_WC_SUCCESS);
    table_cqe(3, 0x92, PFNIC_WC_SUCCESS);
    table_cqe(2, 0x61, PFNIC_WC_SUCCESS);
    table_cqe(4, 0xa1, PFNIC_WC_SUCCESS);
    assert_mr_faults(2, 3, 3, 3);

    /*
     * An event queue of 2: A (QP 2) and B (QP 4) fill it, C (QP 3's
     * remote side) and D (QP 5) are held, not dropped. D's QP is reset:
     * D is forgotten. The driver consumes A: C is queued. Then nothing.
     */
    test_eq_setup(&eq, EQ_ADDR, 2);
    g_assert_cmpint(mtt_invalidate(1, 0, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(mtt_invalidate(2, 1, 1), ==, PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x53, TL_VA, 0x100, lkey, TR_VA,
               rkey, 0);
    clock_step(10000);
    table_post(1, 4, PFNIC_WR_RDMA_WRITE, 0x93, TL_VA + 0x1800, 0x100, lkey,
               TR_VA, rkey, 0);
    clock_step(10000);
    table_post(2, 3, PFNIC_WR_RDMA_WRITE, 0x62, TR_VA, 0x100, rkey,
               TL_VA + 0x2800, lkey, 0);
    clock_step(10000);
    table_post(2, 5, PFNIC_WR_RDMA_WRITE, 0xa2, TR_VA + 0x1000, 0x100, rkey,
               TL_VA, lkey, 0);
    clock_step(1000000);
    for (uint32_t slot = 0; slot < 2; slot++) {
        uint8_t type, owner;
        uint32_t object;

        read_eqe(slot, &type, &owner, &object);
        g_assert_cmpint(type, ==, PFNIC_EV_PAGE_FAULT);
        g_assert_cmpint(owner, ==, 1);
        g_assert_cmpint(object, ==, 1);
    }
    g_assert_cmphex(reg_read(PFNIC_REG_EQ_OVERFLOW), ==, 0);
    g_assert_cmpint(qp_modify(5, PFNIC_QPS_RESET, 0, 0, 0, 0), ==,
                    PFNIC_CMD_OK);
    qp_connect(5, 4, 7);        /* QP 4's destination, again */
    expect_fault(1, 0, 1, false);
    expect_fault(1, 2, 1, false);
    expect_fault(1, 3, 1, true);
    test_eq_none(&eq);
    g_assert_cmphex(reg_read(PFNIC_REG_EQ_OVERFLOW), ==, 0);
    fault_serve(1, 0, tl_pages, 4);
    table_cqe(1, 0x53, PFNIC_WC_SUCCESS);
    table_cqe(3, 0x93, PFNIC_WC_SUCCESS);
    table_cqe(2, 0x62, PFNIC_WC_SUCCESS);
    assert_no_cqe(4);

    /* No event queue at all: held until there is one */
    reg_write(PFNIC_REG_EQ_SIZE, 0);
    g_assert_cmpint(mtt_invalidate(1, 1, 1), ==, PFNIC_CMD_OK);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x54, TL_VA + 0x800, 0x100, lkey,
               TR_VA, rkey, 0);
    assert_no_cqe(1);
    test_eq_setup(&eq, EQ_ADDR, 4);
    expect_fault(1, 1, 1, false);
    fault_serve(1, 1, &tl_pages[1], 1);
    table_cqe(1, 0x54, PFNIC_WC_SUCCESS);
    g_assert_cmphex(reg_read(PFNIC_REG_EQ_OVERFLOW), ==, 0);
    /* 4 + 3 + 1 entries in 5 events; 3 + 3 + 1 answered while awaited */
    assert_mr_faults(1, 8, 7, 5);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    qtest_end();
}

/* --- shared receive queues (ABI 1.11) ------------------------------------ */

#define SRQ_RING        0x880000ULL     /* SRQ n: SRQ_RING + n * 0x2000 */
#define SRQ_REC         0x8f0000ULL     /* SRQ n: SRQ_REC + n * 0x100 */
#define SRQ_VA          0x30000000ULL   /* MR 3 of srq_setup(): PD 9 */

static const uint64_t sv_pages[2] = { DATA_PAGE(24), DATA_PAGE(25) };

/* The receive tail software has posted up to, per SRQ */
static uint16_t srq_next[PFNIC_MAX_SRQS];

static uint32_t srq_create_at(uint32_t srqn, uint32_t ctx, uint32_t pd,
                              uint64_t ring, uint32_t log2, uint64_t rec)
{
    uint32_t a[PFNIC_CMD_ARGS] = {
        srqn, ctx, pd, ring, ring >> 32, log2, rec, rec >> 32,
    };

    return cmd(PFNIC_CMD_SRQ_CREATE, a, PFNIC_CMD_ARGS);
}

/* SRQ @srqn at its place in guest memory; its record starts all ones. */
static uint32_t srq_create(uint32_t srqn, uint32_t ctx, uint32_t pd,
                           uint32_t log2)
{
    uint32_t ones = UINT32_MAX;

    g_assert_cmpint(srqn, <, PFNIC_MAX_SRQS);
    memwrite(SRQ_REC + srqn * 0x100, &ones, sizeof(ones));
    srq_next[srqn] = 0;
    return srq_create_at(srqn, ctx, pd, SRQ_RING + srqn * 0x2000ULL, log2,
                         SRQ_REC + srqn * 0x100);
}

static uint32_t srq_modify(uint32_t srqn, uint32_t limit)
{
    uint32_t a[PFNIC_CMD_ARGS] = { srqn, limit };

    return cmd(PFNIC_CMD_SRQ_MODIFY, a, PFNIC_CMD_ARGS);
}

/* SRQ_QUERY @srqn: a0 limit, a1 head, a2 tail, a3 QPs, a4 limit events */
static void srq_query(uint32_t srqn, uint32_t *a)
{
    a[0] = srqn;
    g_assert_cmpint(cmd(PFNIC_CMD_SRQ_QUERY, a, 1), ==, PFNIC_CMD_OK);
}

/* The head the device wrote to SRQ @srqn's record */
static uint32_t srq_rec_head(uint32_t srqn)
{
    uint32_t head;

    memread(SRQ_REC + srqn * 0x100, &head, sizeof(head));
    return le32_to_cpu(head);
}

/* A receive WQE of one SGE on SRQ @srqn (16 entries) of @ctx, rung. */
static void srq_post(uint32_t ctx, uint32_t srqn, uint64_t wr_id,
                     uint64_t addr, uint32_t len, uint32_t key)
{
    uint16_t slot = srq_next[srqn]++;

    post_wqe(SRQ_RING + srqn * 0x2000ULL, slot % 16, 0, 0, wr_id, 1, addr,
             len, key);
    verbs_db(ctx, PFNIC_DB_SRQ, srqn << 16 | (uint16_t)(slot + 1));
}

/* An RDMA WRITE with immediate 0x78563412 of one SGE on QP @qpn of @ctx */
static void table_post_imm(uint32_t ctx, uint32_t qpn, uint64_t wr_id,
                           uint64_t laddr, uint32_t len, uint32_t lkey,
                           uint64_t raddr, uint32_t rkey)
{
    uint16_t slot = sq_next[qpn]++;
    PfnicWqe w = {
        .opcode = PFNIC_WR_RDMA_WRITE_WITH_IMM, .flags = PFNIC_SEND_SIGNALED,
        .num_sge = len ? 1 : 0, .imm_data = 0x78563412,
        .wr_id = cpu_to_le64(wr_id), .remote_addr = cpu_to_le64(raddr),
        .rkey = cpu_to_le32(rkey),
        .sge[0] = {
            .addr = cpu_to_le64(laddr), .length = cpu_to_le32(len),
            .lkey = cpu_to_le32(lkey),
        },
    };

    memwrite(SQ_ADDR + qpn * 0x10000 + (slot % 16) * PFNIC_WQE_SIZE, &w,
             sizeof(w));
    verbs_db(ctx, PFNIC_DB_SQ, qpn << 16 | (uint16_t)(slot + 1));
}

/* SRQ_CREATE, MODIFY, QUERY, DESTROY and QP_CREATE a13/a14: every status */
static void test_verbs_srq_commands(void)
{
    uint32_t a[PFNIC_CMD_ARGS];

    start(",contexts=4");
    map_bars();

    /* SRQ_CREATE: index, context, log2, addresses that wrap or fail */
    g_assert_cmpint(srq_create_at(64, 1, 7, SRQ_RING, 4, SRQ_REC), ==,
                    PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(srq_create(1, 4, 7, 4), ==, PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(srq_create(1, 1, 7, 13), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(srq_create_at(1, 1, 7, UINT64_MAX - 0x7f, 1,
                                  SRQ_REC + 0x100), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(srq_create_at(1, 1, 7, SRQ_RING, 4, UINT64_MAX - 7), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(srq_create_at(1, 1, 7, SRQ_RING, 4, 0xfffff0000000ULL),
                    ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(cmd1(PFNIC_CMD_SRQ_QUERY, 1), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(srq_create(1, 1, 7, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(srq_rec_head(1), ==, 0);    /* the device wrote it */
    g_assert_cmpint(srq_create(1, 1, 7, 4), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(srq_rec_head(1), ==, UINT32_MAX);   /* not touched */
    g_assert_cmpint(srq_create(63, 2, 7, 0), ==, PFNIC_CMD_OK);

    /* SRQ_QUERY */
    g_assert_cmpint(cmd1(PFNIC_CMD_SRQ_QUERY, 64), ==, PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(cmd1(PFNIC_CMD_SRQ_QUERY, 2), ==, PFNIC_CMD_BAD_STATE);
    memset(a, 0xff, sizeof(a));
    srq_query(1, a);
    for (int i = 0; i < 5; i++) {
        g_assert_cmphex(a[i], ==, 0);
    }

    /* SRQ_MODIFY: a limit of 1..entries arms it, 0 disarms */
    g_assert_cmpint(srq_modify(64, 1), ==, PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(srq_modify(2, 1), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(srq_modify(1, 17), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(srq_modify(63, 2), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(srq_modify(63, 1), ==, PFNIC_CMD_OK);
    g_assert_cmpint(srq_modify(1, 16), ==, PFNIC_CMD_OK);
    srq_query(1, a);
    g_assert_cmpint(a[0], ==, 16);
    g_assert_cmpint(srq_modify(1, 0), ==, PFNIC_CMD_OK);
    srq_query(1, a);
    g_assert_cmpint(a[0], ==, 0);

    /* QP_CREATE with SRQ: a valid SRQ of the same context in a14 */
    g_assert_cmpint(cq_create(1, 1, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create_srq(2, 1, 7, 1, 1, 64), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(qp_create_srq(2, 1, 7, 1, 1, 2), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(qp_create_srq(2, 1, 7, 1, 1, 63), ==, PFNIC_CMD_BAD_ARG);
    /* Without SRQ, a14 must be 0; unknown flags stay BAD_ARG. */
    g_assert_cmpint(qp_create_full(2, 1, 7, 1, 1, 4, 4, 0, 1), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(qp_create_full(2, 1, 7, 1, 1, 4, 4,
                                   PFNIC_QP_FLAG_SRQ | 4, 1), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(qp_create_full(2, 1, 7, 1, 1, 4, 4, 8, 0), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(qp_query(2, a), ==, PFNIC_CMD_BAD_STATE);
    /* a8..a10 are ignored: a log2 of 13 is no error. */
    g_assert_cmpint(qp_create_full(2, 1, 7, 1, 1, 4, 13, PFNIC_QP_FLAG_SRQ,
                                   1), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create_full(3, 1, 7, 1, 1, 4, 4,
                                   PFNIC_QP_FLAG_SRQ |
                                   PFNIC_QP_FLAG_SIGNAL_ALL, 1), ==,
                    PFNIC_CMD_OK);
    srq_query(1, a);
    g_assert_cmpint(a[3], ==, 2);
    g_assert_cmpint(qp_query(2, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[2], ==, 0);

    /* SRQ_DESTROY: BUSY while a QP uses it */
    g_assert_cmpint(cmd1(PFNIC_CMD_SRQ_DESTROY, 64), ==, PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(cmd1(PFNIC_CMD_SRQ_DESTROY, 2), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(cmd1(PFNIC_CMD_SRQ_DESTROY, 1), ==, PFNIC_CMD_BUSY);
    g_assert_cmpint(cmd1(PFNIC_CMD_QP_DESTROY, 2), ==, PFNIC_CMD_OK);
    srq_query(1, a);
    g_assert_cmpint(a[3], ==, 1);
    g_assert_cmpint(cmd1(PFNIC_CMD_SRQ_DESTROY, 1), ==, PFNIC_CMD_BUSY);
    g_assert_cmpint(cmd1(PFNIC_CMD_QP_DESTROY, 3), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cmd1(PFNIC_CMD_SRQ_DESTROY, 1), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cmd1(PFNIC_CMD_SRQ_DESTROY, 1), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(cmd1(PFNIC_CMD_SRQ_DESTROY, 63), ==, PFNIC_CMD_OK);

    /* A reset frees every SRQ, with the QPs using them. */
    g_assert_cmpint(srq_create(1, 1, 7, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create_srq(2, 1, 7, 1, 1, 1), ==, PFNIC_CMD_OK);
    reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    g_assert_cmpint(cmd1(PFNIC_CMD_SRQ_QUERY, 1), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(srq_create(1, 1, 7, 4), ==, PFNIC_CMD_OK);
    srq_query(1, a);
    g_assert_cmpint(a[3], ==, 0);
    g_assert_cmpint(cmd1(PFNIC_CMD_SRQ_DESTROY, 1), ==, PFNIC_CMD_OK);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    qtest_end();
}

/*
 * As tables_setup(), with a shared receive queue: context 1's QPs 2 and 4
 * (PD 7, CQ 1) are connected to context 2's QPs 3 and 5 (PD 9; send CQ 2,
 * receive CQs 3 and 5), which both take their receive WQEs from SRQ 1
 * (context 2, PD 7, 16 WQEs). MRs 1 (context 1) and 2 (context 2) are PD
 * 7's; MR 3 (context 2, SRQ_VA) is PD 9's: the receivers' RDMA target,
 * and a key of another PD than the SRQ's. The event queue has 16 entries.
 */
static void srq_setup(uint32_t *lkey, uint32_t *rkey, uint32_t *qkey)
{
    uint8_t zero[4096] = { };

    table_counts_reset();
    for (int i = 0; i < 32; i++) {
        memwrite(DATA_PAGE(i), zero, sizeof(zero));
    }
    start_ctx_no_pasid(1, RING_ADDR);
    start_ctx_no_pasid(2, RING_ADDR + 0x1000);
    *lkey = table_mr(1, 1, TL_VA, TL_LEN, tl_pages, 4);
    *rkey = table_mr(2, 2, TR_VA, TR_LEN, tr_pages, 4);
    g_assert_cmpint(mr_set_flags(3, 2, 9, ALL_ACCESS, SRQ_VA, 0x2000,
                                 PFNIC_MR_FLAG_TABLE, qkey), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(mtt_map(3, 0, sv_pages, 2, MTT_RW), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create(1, 1, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create(2, 2, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create(3, 2, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create(5, 2, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(srq_create(1, 2, 7, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(2, 1, 7, 1, 1, 4, 0), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(4, 1, 7, 1, 1, 4, 0), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create_srq(3, 2, 9, 2, 3, 1), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create_srq(5, 2, 9, 2, 5, 1), ==, PFNIC_CMD_OK);
    qp_connect(2, 3, 7);
    qp_connect(3, 2, 7);
    qp_connect(4, 5, 7);
    qp_connect(5, 4, 7);
    test_eq_setup(&eq, EQ_ADDR, 16);
}

/* The next event is @type for @object. */
static void expect_event(uint8_t type, uint32_t object)
{
    TestEqe ev = test_eq_next(&eq);

    g_assert_cmpint(ev.type, ==, type);
    g_assert_cmpint(ev.object, ==, object);
}

/* A SEND of @len bytes from TL_VA + @off on QP @qpn (context 1) */
static void srq_send(uint32_t qpn, uint64_t wr_id, uint64_t off, uint32_t len,
                     uint32_t lkey)
{
    table_post(1, qpn, PFNIC_WR_SEND, wr_id, TL_VA + off, len, lkey, 0, 0, 0);
}

/*
 * Two connections whose receivers share SRQ 1, in loopback through tables:
 * their messages take the SRQ's WQEs in order, each completing on its own
 * QP's receive CQ; an empty SRQ is an RNR wait that SRQ_DB ends; the
 * limit event; a message that does not finish leaves its WQE with the QP;
 * ERR flushes only the WQE the QP holds and queues LAST_WQE_REACHED;
 * RESET drops it; a receive key of another PD than the SRQ's fails.
 */
static void test_verbs_srq(void)
{
    static uint8_t src[0x1000], got[0x1000];
    uint32_t lkey, rkey, qkey, a[PFNIC_CMD_ARGS], rec[2];
    PfnicCqe c;

    start(",contexts=4,ats=off,pasid=off,pri=off");
    map_bars();
    srq_setup(&lkey, &rkey, &qkey);

    /* Four WQEs of 0x400 bytes in MR 2; three SENDs over both connections */
    for (int i = 0; i < 4; i++) {
        srq_post(2, 1, 0x100 + i, TR_VA + i * 0x400, 0x400, rkey);
    }
    pattern(src, 0x1000, 1);
    table_rw(tl_pages, TL_VA, TL_VA, src, 0x1000, true);
    srq_send(2, 0x21, 0, 0x300, lkey);
    table_cqe(1, 0x21, PFNIC_WC_SUCCESS);
    c = table_cqe(3, 0x100, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.qp_num, ==, 3);
    g_assert_cmpint(c.src_qp, ==, 2);
    g_assert_cmpint(c.byte_len, ==, 0x300);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_RECV);
    srq_send(4, 0x41, 0x300, 0x200, lkey);
    table_cqe(1, 0x41, PFNIC_WC_SUCCESS);
    c = table_cqe(5, 0x101, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.qp_num, ==, 5);
    g_assert_cmpint(c.src_qp, ==, 4);
    g_assert_cmpint(c.byte_len, ==, 0x200);
    srq_send(2, 0x22, 0x500, 0x100, lkey);
    table_cqe(1, 0x22, PFNIC_WC_SUCCESS);
    c = table_cqe(3, 0x102, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.byte_len, ==, 0x100);
    table_rw(tr_pages, TR_VA, TR_VA, got, 0x300, false);
    g_assert_cmpmem(got, 0x300, src, 0x300);
    table_rw(tr_pages, TR_VA, TR_VA + 0x400, got, 0x200, false);
    g_assert_cmpmem(got, 0x200, src + 0x300, 0x200);
    table_rw(tr_pages, TR_VA, TR_VA + 0x800, got, 0x100, false);
    g_assert_cmpmem(got, 0x100, src + 0x500, 0x100);
    /* The SRQ's head moved (and is in its record); the QPs' stay 0. */
    g_assert_cmpint(srq_rec_head(1), ==, 3);
    srq_query(1, a);
    g_assert_cmpint(a[0], ==, 0);
    g_assert_cmpint(a[1], ==, 3);
    g_assert_cmpint(a[2], ==, 4);
    g_assert_cmpint(a[3], ==, 2);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[2], ==, 0);
    memread(QP_REC + 5 * 0x100, rec, sizeof(rec));
    g_assert_cmpint(le32_to_cpu(rec[1]), ==, 0);

    /* RDMA WRITE with immediate consumes a WQE too (the target: MR 3). */
    table_post_imm(1, 4, 0x42, TL_VA + 0x600, 0x80, lkey, SRQ_VA + 0x10,
                   qkey);
    table_cqe(1, 0x42, PFNIC_WC_SUCCESS);
    c = table_cqe(5, 0x103, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_RECV_RDMA_WITH_IMM);
    g_assert_cmpint(c.wc_flags, ==, PFNIC_WC_WITH_IMM);
    g_assert_cmphex(c.imm_data, ==, 0x78563412);
    g_assert_cmpint(c.byte_len, ==, 0x80);
    g_assert_cmpint(c.qp_num, ==, 5);
    table_rw(sv_pages, SRQ_VA, SRQ_VA + 0x10, got, 0x80, false);
    g_assert_cmpmem(got, 0x80, src + 0x600, 0x80);

    /*
     * The SRQ is empty: QP 2 waits (RNR, at least 10 us each time); an
     * SRQ_DB wakes it at once, well within 1 us.
     */
    srq_send(2, 0x23, 0, 0x10, lkey);
    assert_no_cqe(1);
    assert_no_cqe(3);
    g_assert_cmpint(qp_query(2, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[4], >, 1);
    srq_post(2, 1, 0x104, TR_VA + 0xc00, 0x400, rkey);
    clock_step(1000);
    g_assert_cmpint(read_cqe(3, cq_seen[3] % 16).owner, ==,
                    ((cq_seen[3] / 16) & 1) ^ 1);
    table_cqe(1, 0x23, PFNIC_WC_SUCCESS);
    g_assert_cmpint(table_cqe(3, 0x104, PFNIC_WC_SUCCESS).byte_len, ==, 0x10);

    /* Limit 3 with 4 posted: the take that leaves 2 fires it, once. */
    g_assert_cmpint(srq_modify(1, 3), ==, PFNIC_CMD_OK);
    for (int i = 0; i < 4; i++) {
        srq_post(2, 1, 0x105 + i, TR_VA + (i < 3 ? i * 0x400 : 0x1000),
                 i < 3 ? 0x400 : 0x1000, rkey);
    }
    srq_send(4, 0x43, 0, 0x10, lkey);
    table_cqe(1, 0x43, PFNIC_WC_SUCCESS);
    table_cqe(5, 0x105, PFNIC_WC_SUCCESS);
    test_eq_none(&eq);
    srq_send(2, 0x24, 0, 0x10, lkey);
    table_cqe(1, 0x24, PFNIC_WC_SUCCESS);
    table_cqe(3, 0x106, PFNIC_WC_SUCCESS);
    expect_event(PFNIC_EV_SRQ_LIMIT, 1);
    srq_query(1, a);
    g_assert_cmpint(a[0], ==, 0);
    g_assert_cmpint(a[4], ==, 1);
    srq_send(4, 0x44, 0, 0x10, lkey);
    table_cqe(1, 0x44, PFNIC_WC_SUCCESS);
    table_cqe(5, 0x107, PFNIC_WC_SUCCESS);
    test_eq_none(&eq);

    /*
     * A message that does not finish: QP 4's SEND of 0x1000 bytes fails at
     * its second page, which MR 1 no longer maps. QP 5 keeps WQE 0x108,
     * and QP 4's next SEND lands in it.
     */
    g_assert_cmpint(mtt_invalidate(1, 1, 1), ==, PFNIC_CMD_OK);
    srq_send(4, 0x45, 0, 0x1000, lkey);
    table_cqe(1, 0x45, PFNIC_WC_LOC_PROT_ERR);
    assert_no_cqe(5);
    srq_query(1, a);
    g_assert_cmpint(a[1], ==, 9);
    g_assert_cmpint(a[2], ==, 9);
    g_assert_cmpint(mtt_map(1, 1, &tl_pages[1], 1, MTT_RW), ==, PFNIC_CMD_OK);
    qp_reconnect(4, 5);
    srq_send(4, 0x46, 0, 0x1000, lkey);
    table_cqe(1, 0x46, PFNIC_WC_SUCCESS);
    g_assert_cmpint(table_cqe(5, 0x108, PFNIC_WC_SUCCESS).byte_len, ==,
                    0x1000);
    table_rw(tr_pages, TR_VA, TR_VA + 0x1000, got, 0x1000, false);
    g_assert_cmpmem(got, 0x1000, src, 0x1000);

    /*
     * QP 5 enters ERR holding WQE 0x109: that one is flushed, then
     * LAST_WQE_REACHED; the SRQ's next WQE goes to QP 3.
     */
    srq_post(2, 1, 0x109, TR_VA + 0x1000, 0x1000, rkey);
    srq_post(2, 1, 0x10a, TR_VA, 0x400, rkey);
    g_assert_cmpint(mtt_invalidate(1, 1, 1), ==, PFNIC_CMD_OK);
    srq_send(4, 0x47, 0, 0x1000, lkey);
    table_cqe(1, 0x47, PFNIC_WC_LOC_PROT_ERR);
    g_assert_cmpint(qp_modify(5, PFNIC_QPS_ERR, 0, 4, 1, 7), ==,
                    PFNIC_CMD_OK);
    c = table_cqe(5, 0x109, PFNIC_WC_WR_FLUSH_ERR);
    g_assert_cmpint(c.qp_num, ==, 5);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_RECV);
    expect_event(PFNIC_EV_LAST_WQE_REACHED, 5);
    test_eq_none(&eq);
    assert_no_cqe(5);
    srq_query(1, a);
    g_assert_cmpint(a[1], ==, 10);
    srq_send(2, 0x25, 0, 0x100, lkey);
    table_cqe(1, 0x25, PFNIC_WC_SUCCESS);
    table_cqe(3, 0x10a, PFNIC_WC_SUCCESS);
    /* Once per entry into ERR: again only after a RESET */
    g_assert_cmpint(qp_modify(5, PFNIC_QPS_ERR, 0, 4, 1, 7), ==,
                    PFNIC_CMD_OK);
    test_eq_none(&eq);
    g_assert_cmpint(qp_modify(5, PFNIC_QPS_RESET, 0, 4, 1, 7), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(qp_modify(5, PFNIC_QPS_ERR, 0, 4, 1, 7), ==,
                    PFNIC_CMD_OK);
    expect_event(PFNIC_EV_LAST_WQE_REACHED, 5);
    assert_no_cqe(5);

    /* RESET drops the WQE QP 5 holds, without a CQE or an event. */
    qp_reconnect(5, 4);
    qp_reconnect(4, 5);
    srq_post(2, 1, 0x10b, TR_VA + 0x1000, 0x1000, rkey);
    srq_post(2, 1, 0x10c, TR_VA, 0x400, rkey);
    srq_send(4, 0x48, 0, 0x1000, lkey);
    table_cqe(1, 0x48, PFNIC_WC_LOC_PROT_ERR);
    g_assert_cmpint(qp_modify(5, PFNIC_QPS_RESET, 0, 4, 1, 7), ==,
                    PFNIC_CMD_OK);
    assert_no_cqe(5);
    test_eq_none(&eq);
    qp_connect(5, 4, 7);
    qp_reconnect(4, 5);
    srq_send(4, 0x49, 0, 0x100, lkey);
    table_cqe(1, 0x49, PFNIC_WC_SUCCESS);
    table_cqe(5, 0x10c, PFNIC_WC_SUCCESS);

    /*
     * A receive SGE with a key of another PD than the SRQ's (MR 3: PD 9,
     * the QP's own): the receiver completes LOC_PROT_ERR and enters ERR,
     * the sender REM_OP_ERR.
     */
    srq_post(2, 1, 0x10d, SRQ_VA, 0x100, qkey);
    srq_send(2, 0x26, 0, 0x80, lkey);
    table_cqe(1, 0x26, PFNIC_WC_REM_OP_ERR);
    g_assert_cmpint(table_cqe(3, 0x10d, PFNIC_WC_LOC_PROT_ERR).qp_num, ==, 3);
    g_assert_cmpint(qp_state(3), ==, PFNIC_QPS_ERR);
    expect_event(PFNIC_EV_LAST_WQE_REACHED, 3);

    /* SRQ_DESTROY waits for its QPs. */
    g_assert_cmpint(cmd1(PFNIC_CMD_SRQ_DESTROY, 1), ==, PFNIC_CMD_BUSY);
    g_assert_cmpint(cmd1(PFNIC_CMD_QP_DESTROY, 3), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cmd1(PFNIC_CMD_QP_DESTROY, 5), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cmd1(PFNIC_CMD_SRQ_DESTROY, 1), ==, PFNIC_CMD_OK);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    qtest_end();
}

/*
 * Doorbells of an SRQ: a tail past the queue or moving back, the page of
 * another context, an SRQ that does not exist, and RQ_DB for a QP with an
 * SRQ are guest errors that change nothing (the QP stays in RTS); the SRQ
 * works on.
 */
static void test_verbs_srq_doorbells(void)
{
    uint32_t lkey, rkey, qkey, a[PFNIC_CMD_ARGS];

    start(",contexts=4,ats=off,pasid=off,pri=off");
    map_bars();
    for (int i = 0; i < 5; i++) {
        srq_setup(&lkey, &rkey, &qkey);
        g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
        switch (i) {
        case 0:     /* 17 past the head of 16 entries */
            verbs_db(2, PFNIC_DB_SRQ, 1 << 16 | 17);
            break;
        case 1:     /* back from 2 to 1 */
            srq_post(2, 1, 0x100, TR_VA, 0x400, rkey);
            srq_post(2, 1, 0x101, TR_VA + 0x400, 0x400, rkey);
            g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==,
                            PFNIC_STATUS_READY);
            verbs_db(2, PFNIC_DB_SRQ, 1 << 16 | 1);
            break;
        case 2:     /* SRQ 1 is context 2's */
            verbs_db(1, PFNIC_DB_SRQ, 1 << 16 | 1);
            break;
        case 3:     /* SRQs that do not exist */
            verbs_db(2, PFNIC_DB_SRQ, 2 << 16 | 1);
            verbs_db(2, PFNIC_DB_SRQ, 64 << 16 | 1);
            verbs_db(2, PFNIC_DB_SRQ, 0xffffu << 16 | 1);
            break;
        case 4:     /* QP 3 has no receive queue of its own */
            verbs_db(2, PFNIC_DB_RQ, 3 << 16 | 1);
            verbs_db(2, PFNIC_DB_RQ, 3 << 16 | 17);
            break;
        }
        g_assert_true(reg_read(PFNIC_REG_STATUS) & PFNIC_STATUS_ERROR);
        srq_query(1, a);
        g_assert_cmpint(a[1], ==, 0);
        g_assert_cmpint(a[2], ==, srq_next[1]);
        g_assert_cmpint(qp_state(3), ==, PFNIC_QPS_RTS);
        g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
        g_assert_cmpint(a[2], ==, 0);
        srq_post(2, 1, 0x1ff, TR_VA + 0x800, 0x400, rkey);
        srq_send(2, 0x2f, 0, 0x10, lkey);
        table_cqe(1, 0x2f, PFNIC_WC_SUCCESS);
        table_cqe(3, i == 1 ? 0x100 : 0x1ff, PFNIC_WC_SUCCESS);
        reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    }
    qtest_end();
}

/* --- completion timestamps (ABI 1.12) ---------------------------------- */

/*
 * The device clock in every context's doorbell page (enabled or not):
 * the pages agree, it follows the virtual clock, a reset does not restart
 * it, and it is read-only; the other offsets of a page read 0.
 */
static void test_verbs_clock(void)
{
    uint64_t t0, t1, t2, t3, q;

    start(",contexts=4");
    map_bars();
    g_assert_true(reg_read(PFNIC_REG_CAPS) & PFNIC_CAPS_TIMESTAMPS);
    clock_step(1000);
    t0 = clock_read(0);
    g_assert_cmpuint(t0, >=, 1000);
    t1 = clock_read(3);
    g_assert_cmpuint(t1, >=, t0);
    g_assert_cmpuint(clock_read(0), >=, t1);

    /* At least the step; past 2^32 ns, so CLOCK_HI counts too */
    clock_step(5000000000ULL);
    t2 = clock_read(1);
    g_assert_cmpuint(t2 - t1, >=, 5000000000ULL);
    g_assert_cmpuint(readl(BAR2_ADDR + PFNIC_DB_CLOCK_HI), ==, t2 >> 32);
    g_assert_cmpuint(readl(BAR2_ADDR + PFNIC_DB_CLOCK_HI), >=, 1);
    /* An 8-byte read of CLOCK_LO is the whole clock, from one sample. */
    q = readq(BAR2_ADDR + 2 * PFNIC_DOORBELL_PAGE_SIZE + PFNIC_DB_CLOCK_LO);
    g_assert_cmpuint(q, >=, t2);
    g_assert_cmpuint(q, <=, clock_read(2));

    /* A device reset does not restart it. */
    reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    t3 = clock_read(2);
    g_assert_cmpuint(t3, >=, t2);

    /* Writes to it are ignored; the other offsets read 0. */
    for (uint32_t ctx = 0; ctx < 4; ctx++) {
        uint64_t page = BAR2_ADDR + ctx * PFNIC_DOORBELL_PAGE_SIZE;

        writel(page + PFNIC_DB_CLOCK_LO, 0);
        writel(page + PFNIC_DB_CLOCK_HI, 0);
        writeq(page + PFNIC_DB_CLOCK_LO, 0);
        g_assert_cmpuint(clock_read(ctx), >=, t3);
        g_assert_cmphex(readl(page + 0x028), ==, 0);
        g_assert_cmphex(readq(page + 0x028), ==, 0);
        g_assert_cmphex(readl(page + 0x01c), ==, 0);
        g_assert_cmphex(readl(page + PFNIC_DB_SQ), ==, 0);
        g_assert_cmphex(readl(page + PFNIC_DB_SRQ), ==, 0);
        g_assert_cmphex(readl(page + 0xffc), ==, 0);
    }
    clock_step(1000);
    g_assert_cmpuint(clock_read(1), >=, t3 + 1000);
    qtest_end();
}

/*
 * CQE @n of CQ @cqn (2^@log2 entries), once software owns it, then
 * consumed: in a TIMESTAMP CQ, the timestamp in *@ts, and the reserved
 * bytes after it must be 0.
 */
static PfnicCqe ts_cqe(uint32_t cqn, uint32_t log2, uint32_t n, uint64_t *ts)
{
    static const uint8_t zero[sizeof(((PfnicCqeTs *)0)->reserved)];
    uint32_t entries = 1u << log2, cons = cpu_to_le32(n + 1);
    PfnicCqe c = wait_cqe(cqn, n % entries, ((n / entries) & 1) ^ 1);

    if (cq_ts[cqn]) {
        PfnicCqeTs t;

        memread(cqe_addr(cqn, n % entries), &t, sizeof(t));
        g_assert_cmpmem(t.reserved, sizeof(t.reserved), zero, sizeof(zero));
        *ts = le64_to_cpu(t.timestamp);
    }
    memwrite(CQ_REC + cqn * 0x100, &cons, sizeof(cons));
    return c;
}

/*
 * CQ_CREATE a7 (ABI 1.12): bit 0 TIMESTAMP, others BAD_ARG. A TIMESTAMP
 * CQ (of 4 entries: the loop below wraps it three times) takes QP 2's
 * CQEs, 64 bytes each, stamped between the clock read before the work
 * was posted and after its CQE was seen, in order; QP 3's CQ beside it
 * keeps 32-byte CQEs. Through tables, so that data moves.
 */
static void test_verbs_timestamps(void)
{
    static uint8_t src[0x800], got[0x800];
    uint32_t a[PFNIC_CMD_ARGS], lkey, rkey, n1 = 0, n2 = 0;
    uint64_t last = 0, ts;
    uint8_t fill[4 * PFNIC_CQE_TS_SIZE];
    PfnicCqe c;

    start(",contexts=4,ats=off,pasid=off,pri=off");
    map_bars();
    table_counts_reset();
    memset(src, 0, sizeof(src));
    for (int i = 0; i < 32; i++) {
        memwrite(DATA_PAGE(i), src, 4096);
    }
    start_ctx_no_pasid(1, RING_ADDR);
    start_ctx_no_pasid(2, RING_ADDR + 0x1000);
    lkey = table_mr(1, 1, TL_VA, TL_LEN, tl_pages, 4);
    rkey = table_mr(2, 2, TR_VA, TR_LEN, tr_pages, 4);

    /* a7: unknown bits, alone or with TIMESTAMP, and stale ones */
    g_assert_cmpint(cq_create_flags(1, 1, 2, 2), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(cq_create_flags(1, 1, 2, PFNIC_CQ_FLAG_TIMESTAMP |
                                    0x80000000), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(cq_create_flags(1, 1, 2, UINT32_MAX), ==,
                    PFNIC_CMD_BAD_ARG);
    reg_write(PFNIC_REG_CMD_ARG + 4 * 7, 0x10);
    a[0] = 1;
    a[1] = 1;
    a[2] = CQ_RING + 0x10000;
    a[3] = 0;
    a[4] = 2;
    a[5] = CQ_REC + 0x100;
    a[6] = 0;
    g_assert_cmpint(cmd(PFNIC_CMD_CQ_CREATE, a, 7), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(cmd1(PFNIC_CMD_CQ_DESTROY, 1), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(cq_create_flags(1, 1, 2, PFNIC_CQ_FLAG_TIMESTAMP), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(cq_create_flags(2, 2, 2, 0), ==, PFNIC_CMD_OK);
    /* Junk where the CQEs go: the device writes every byte of an entry. */
    memset(fill, 0xa4, sizeof(fill));
    memwrite(cqe_addr(1, 0), fill, sizeof(fill));
    memwrite(cqe_addr(2, 0), fill, 4 * PFNIC_CQE_SIZE);
    g_assert_cmpint(qp_create(2, 1, 7, 1, 1, 4, 0), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(3, 2, 7, 2, 2, 4, 0), ==, PFNIC_CMD_OK);
    qp_connect(2, 3, 7);
    qp_connect(3, 2, 7);

    for (uint32_t i = 0; i < 12; i++) {
        uint32_t len = 0x100 + i * 0x30;
        uint64_t before, after;

        clock_step(1000 + i * 100);
        before = clock_read(1);
        pattern(src, len, i);
        switch (i % 3) {
        case 0:     /* RDMA WRITE by QP 2: its CQE on CQ 1 */
            table_rw(tl_pages, TL_VA, TL_VA + 0x40, src, len, true);
            table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x100 + i, TL_VA + 0x40,
                       len, lkey, TR_VA + 0x1f00, rkey, 0);
            break;
        case 1:     /* SEND by QP 2: its CQE on CQ 1, the receive's on 2 */
            table_rw(tl_pages, TL_VA, TL_VA + 0x40, src, len, true);
            table_recv(2, 3, 0x300 + i, TR_VA + 0x1f00, 0x800, rkey);
            table_post(1, 2, PFNIC_WR_SEND, 0x100 + i, TL_VA + 0x40, len,
                       lkey, 0, 0, 0);
            break;
        default:    /* SEND by QP 3: its CQE on CQ 2, the receive's on 1 */
            table_rw(tr_pages, TR_VA, TR_VA + 0x40, src, len, true);
            table_recv(1, 2, 0x100 + i, TL_VA + 0x1f00, 0x800, lkey);
            table_post(2, 3, PFNIC_WR_SEND, 0x300 + i, TR_VA + 0x40, len,
                       rkey, 0, 0, 0);
            break;
        }

        /* CQ 1: the 32 bytes as before, at slot * 64, then the time */
        ts = 0;
        c = ts_cqe(1, 2, n1++, &ts);
        after = clock_read(3);
        g_assert_cmphex(c.wr_id, ==, 0x100 + i);
        g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
        g_assert_cmpint(c.byte_len, ==, len);
        g_assert_cmpint(c.qp_num, ==, 2);
        g_assert_cmpint(c.vendor_err, ==, 0);
        g_assert_cmpint(c.opcode, ==, (i % 3 == 0) ? PFNIC_WC_RDMA_WRITE :
                        (i % 3 == 1) ? PFNIC_WC_SEND : PFNIC_WC_RECV);
        g_assert_cmpint(c.src_qp, ==, (i % 3 == 2) ? 3 : 0);
        g_assert_cmpuint(ts, >=, before);
        g_assert_cmpuint(ts, <=, after);
        g_assert_cmpuint(ts, >=, last);
        last = ts;
        if (i % 3 == 2) {
            table_rw(tl_pages, TL_VA, TL_VA + 0x1f00, got, len, false);
        } else {
            table_rw(tr_pages, TR_VA, TR_VA + 0x1f00, got, len, false);
        }
        g_assert_cmpmem(got, len, src, len);

        /* CQ 2: 32-byte CQEs at slot * 32 */
        if (i % 3) {
            c = ts_cqe(2, 2, n2++, &ts);
            g_assert_cmphex(c.wr_id, ==, 0x300 + i);
            g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
            g_assert_cmpint(c.qp_num, ==, 3);
            g_assert_cmpint(c.opcode, ==, (i % 3 == 1) ? PFNIC_WC_RECV :
                            PFNIC_WC_SEND);
        }
    }
    /* Nothing more, and the next lap's slots still hold the last one's. */
    g_assert_cmpint(read_cqe(1, n1 % 4).owner, ==, ((n1 / 4) & 1));
    g_assert_cmpint(read_cqe(2, n2 % 4).owner, ==, ((n2 / 4) & 1));
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    qtest_end();
}

/* --- device memory (ABI 1.13) ------------------------------------------ */

#define DM_SIZE_DEFAULT (256 * 1024)

/* What a BAR register reads after all ones are written (then restored) */
static uint32_t bar_probe(uint16_t reg)
{
    uint32_t old = nic_cfg_readl(reg), val;

    nic_cfg_writel(reg, 0xffffffff);
    val = nic_cfg_readl(reg);
    nic_cfg_writel(reg, old);
    return val;
}

/* MR_SET with DM: bytes [start, start + len) of the device memory */
static uint32_t dm_mr(uint32_t index, uint32_t ctx, uint32_t pd,
                      uint32_t access, uint64_t start, uint64_t len,
                      uint32_t *key)
{
    return mr_set_flags(index, ctx, pd, access, start, len, PFNIC_MR_FLAG_DM,
                        key);
}

/* The CPU's view of the device memory, through BAR1 */
static void dm_write(uint64_t off, const void *buf, size_t len)
{
    memwrite(BAR1_ADDR + off, buf, len);
}

static void dm_read(uint64_t off, void *buf, size_t len)
{
    memread(BAR1_ADDR + off, buf, len);
}

/* MR_QUERY @mr: every page_* counter is 0 (a10/a11 count refusals). */
static void assert_mr_no_pages(uint32_t mr)
{
    uint32_t a[PFNIC_CMD_ARGS] = { mr };

    g_assert_cmpint(cmd(PFNIC_CMD_MR_QUERY, a, 1), ==, PFNIC_CMD_OK);
    for (int i = 0; i < 14; i++) {
        if (i != 10 && i != 11) {
            g_assert_cmpint(a[i], ==, 0);
        }
    }
}

/*
 * BAR1: a 32-bit prefetchable memory BAR of dm-size bytes, DM_SIZE and
 * CAPS.DM; the CPU reads back what it wrote, and a CONTROL reset or a
 * device reset zeroes it. Other sizes, and dm-size=0: no BAR1, DM_SIZE 0,
 * no CAPS.DM, and MR_SET with DM refused.
 */
static void test_dm_bar(void)
{
    static uint8_t buf[0x1000], got[0x1000], zero[0x1000];

    start("");
    g_assert_cmphex(bar_probe(PCI_BASE_ADDRESS_1), ==,
                    (uint32_t)~(DM_SIZE_DEFAULT - 1) |
                    PCI_BASE_ADDRESS_MEM_PREFETCH);
    map_bars();
    g_assert_cmpint(reg_read(PFNIC_REG_DM_SIZE), ==, DM_SIZE_DEFAULT);
    g_assert_true(reg_read(PFNIC_REG_CAPS) & PFNIC_CAPS_DM);

    /* Its first and last bytes, and a page across two of them */
    g_assert_cmphex(readl(BAR1_ADDR), ==, 0);
    writel(BAR1_ADDR, 0x12345678);
    writel(BAR1_ADDR + DM_SIZE_DEFAULT - 4, 0x9abcdef0);
    pattern(buf, sizeof(buf), 7);
    dm_write(0x1800, buf, sizeof(buf));
    g_assert_cmphex(readl(BAR1_ADDR), ==, 0x12345678);
    g_assert_cmphex(readl(BAR1_ADDR + DM_SIZE_DEFAULT - 4), ==, 0x9abcdef0);
    g_assert_cmphex(readq(BAR1_ADDR + 0x1800), ==, ldq_le_p(buf));
    dm_read(0x1800, got, sizeof(got));
    g_assert_cmpmem(got, sizeof(got), buf, sizeof(buf));

    /* CONTROL.RESET zeroes it. */
    reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    g_assert_cmphex(readl(BAR1_ADDR), ==, 0);
    g_assert_cmphex(readl(BAR1_ADDR + DM_SIZE_DEFAULT - 4), ==, 0);
    dm_read(0x1800, got, sizeof(got));
    g_assert_cmpmem(got, sizeof(got), zero, sizeof(zero));

    /* So does a device reset (the system's). */
    dm_write(0x1800, buf, sizeof(buf));
    qtest_system_reset(global_qtest);
    setup_topology();
    map_bars();
    dm_read(0x1800, got, sizeof(got));
    g_assert_cmpmem(got, sizeof(got), zero, sizeof(zero));
    qtest_end();

    start(",dm-size=4096");
    g_assert_cmphex(bar_probe(PCI_BASE_ADDRESS_1), ==,
                    0xfffff000 | PCI_BASE_ADDRESS_MEM_PREFETCH);
    map_bars();
    g_assert_cmpint(reg_read(PFNIC_REG_DM_SIZE), ==, 4096);
    writel(BAR1_ADDR + 4092, 0x55aa55aa);
    g_assert_cmphex(readl(BAR1_ADDR + 4092), ==, 0x55aa55aa);
    qtest_end();

    start(",dm-size=16777216");
    g_assert_cmphex(bar_probe(PCI_BASE_ADDRESS_1), ==,
                    0xff000000 | PCI_BASE_ADDRESS_MEM_PREFETCH);
    qtest_end();

    start(",dm-size=0");
    g_assert_cmphex(bar_probe(PCI_BASE_ADDRESS_1), ==, 0);
    map_bars();
    g_assert_cmpint(reg_read(PFNIC_REG_DM_SIZE), ==, 0);
    g_assert_false(reg_read(PFNIC_REG_CAPS) & PFNIC_CAPS_DM);
    g_assert_cmpint(dm_mr(1, 1, 7, 0, 0, 0x1000, NULL), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_QUERY, 1), ==, PFNIC_CMD_BAD_STATE);
    qtest_end();
}

/*
 * MR_SET with DM: alone, inside DM_SIZE (overflow-safe), never empty,
 * never on demand, never the implicit MR's pattern; a context without a
 * PASID may have one; the table commands refuse it.
 */
static void test_dm_mr_set(void)
{
    static const struct {
        uint32_t access, flags;
        uint64_t start, len;
    } bad[] = {
        { 0, PFNIC_MR_FLAG_DM | PFNIC_MR_FLAG_TABLE, 0, 0x1000 },
        { 0, PFNIC_MR_FLAG_DM | PFNIC_MR_FLAG_FAULT, 0, 0x1000 },
        { 0, PFNIC_MR_FLAG_DM | PFNIC_MR_FLAG_TABLE | PFNIC_MR_FLAG_FAULT,
          0, 0x1000 },
        { 0, PFNIC_MR_FLAG_DM | 8, 0, 0x1000 },
        { 0, PFNIC_MR_FLAG_DM, DM_SIZE_DEFAULT - 0x1000, 0x1001 },
        { 0, PFNIC_MR_FLAG_DM, DM_SIZE_DEFAULT, 1 },
        { 0, PFNIC_MR_FLAG_DM, 0, DM_SIZE_DEFAULT + 1 },
        { 0, PFNIC_MR_FLAG_DM, 1ULL << 32, 0x1000 },
        { 0, PFNIC_MR_FLAG_DM, 0x1000, 1ULL << 32 },
        { 0, PFNIC_MR_FLAG_DM, 0xfffffffffffff000ULL, 0x2000 },
        { 0, PFNIC_MR_FLAG_DM, 0x1000, 0xfffffffffffff000ULL },
        { 0, PFNIC_MR_FLAG_DM, 0xffffffffffffffffULL, 1 },
        { 0, PFNIC_MR_FLAG_DM, 0x1000, 0 },
        { PFNIC_ACCESS_ON_DEMAND, PFNIC_MR_FLAG_DM, 0, 0x1000 },
        { PFNIC_ACCESS_LOCAL_WRITE | PFNIC_ACCESS_ON_DEMAND,
          PFNIC_MR_FLAG_DM, 0x1000, 0x1000 },
        { 0, PFNIC_MR_FLAG_DM, 0, UINT64_MAX },
    };
    uint32_t key, key2;

    start(",contexts=4");
    map_bars();
    for (int i = 0; i < ARRAY_SIZE(bad); i++) {
        g_test_message("bad MR_SET DM %d", i);
        g_assert_cmpint(mr_set_flags(3, 1, 7, bad[i].access, bad[i].start,
                                     bad[i].len, bad[i].flags, NULL), ==,
                        PFNIC_CMD_BAD_ARG);
        g_assert_cmpint(cmd1(PFNIC_CMD_MR_QUERY, 3), ==,
                        PFNIC_CMD_BAD_STATE);
    }
    /* The whole memory, its last byte, and overlapping ranges */
    g_assert_cmpint(dm_mr(1, 1, 7, ALL_ACCESS, 0, DM_SIZE_DEFAULT, &key), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(dm_mr(2, 1, 7, 0, DM_SIZE_DEFAULT - 1, 1, &key2), ==,
                    PFNIC_CMD_OK);
    g_assert_cmphex(key, !=, key2);
    g_assert_cmpint(dm_mr(2, 1, 7, 0, 0, 1, NULL), ==, PFNIC_CMD_BAD_STATE);
    assert_mr_no_pages(1);
    /* Not a table MR: MTT_WRITE and MTT_INVALIDATE refuse it. */
    g_assert_cmpint(mtt_write(1, 0, 1, MTT_SRC), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(mtt_invalidate(1, 0, 1), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_CLEAR, 1), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_QUERY, 1), ==, PFNIC_CMD_BAD_STATE);
    /* A context without a PASID: a DM MR, but no MR without a table */
    start_ctx_no_pasid(2, RING_ADDR);
    g_assert_cmpint(mr_set(4, 2, 7, ALL_ACCESS, 0x10000000, 0x1000, NULL),
                    ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(dm_mr(4, 2, 7, ALL_ACCESS, 0x1000, 0x1000, NULL), ==,
                    PFNIC_CMD_OK);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    qtest_end();
}

#define DM_L_START      0x2000          /* MR 5 (context 1): 3 pages */
#define DM_L_LEN        0x3000
#define DM_R_START      0x8000          /* MR 6 (context 2): 2 pages */
#define DM_R_LEN        0x2000

/* A signaled CMP_AND_SWP on QP 2 of context 1 (table_post() has no swap) */
static void dm_post_cas(uint64_t wr_id, uint64_t laddr, uint32_t lkey,
                        uint64_t raddr, uint32_t rkey, uint64_t compare,
                        uint64_t swap)
{
    uint16_t slot = sq_next[2]++;
    PfnicWqe w = {
        .opcode = PFNIC_WR_ATOMIC_CMP_AND_SWP, .flags = PFNIC_SEND_SIGNALED,
        .num_sge = 1, .wr_id = cpu_to_le64(wr_id),
        .remote_addr = cpu_to_le64(raddr), .rkey = cpu_to_le32(rkey),
        .compare_add = cpu_to_le64(compare), .swap = cpu_to_le64(swap),
        .sge[0] = {
            .addr = cpu_to_le64(laddr), .length = cpu_to_le32(8),
            .lkey = cpu_to_le32(lkey),
        },
    };

    memwrite(SQ_ADDR + 2 * 0x10000 + (slot % 16) * PFNIC_WQE_SIZE, &w,
             sizeof(w));
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | (uint16_t)(slot + 1));
}

/*
 * Loopback with DM MRs (zero-based) beside table MRs over host memory, in
 * contexts without a PASID: SENDs from and into device memory, RDMA WRITE
 * into it and READ from it, device memory to device memory, atomics on it;
 * the key checks of [x, x + len) against [0, length), and the PD; no page
 * request, no translation, no page counted.
 */
static void test_dm_loopback(void)
{
    static uint8_t src[0x2000], got[0x2000], zero[0x2000];
    uint32_t lkey, rkey, ldm, rdm, odm, lodm;
    uint64_t v;
    PfnicCqe c;

    start(",contexts=4,ats=off,pasid=off,pri=off");
    map_bars();
    tables_setup(&lkey, &rkey);
    g_assert_cmpint(dm_mr(5, 1, 7, ALL_ACCESS, DM_L_START, DM_L_LEN, &ldm),
                    ==, PFNIC_CMD_OK);
    g_assert_cmpint(dm_mr(6, 2, 7, ALL_ACCESS, DM_R_START, DM_R_LEN, &rdm),
                    ==, PFNIC_CMD_OK);
    /* The same memory in PD 8, remotely and locally */
    g_assert_cmpint(dm_mr(7, 2, 8, ALL_ACCESS, DM_R_START, DM_R_LEN, &odm),
                    ==, PFNIC_CMD_OK);
    g_assert_cmpint(dm_mr(8, 1, 8, ALL_ACCESS, DM_L_START, DM_L_LEN, &lodm),
                    ==, PFNIC_CMD_OK);

    /* SEND from device memory (MR 5's 0x100: byte 0x2100) into host memory */
    pattern(src, 0x1800, 11);
    dm_write(DM_L_START + 0x100, src, 0x1800);
    table_recv(2, 3, 0x61, TR_VA + 0x100, 0x2000, rkey);
    table_post(1, 2, PFNIC_WR_SEND, 0x51, 0x100, 0x1800, ldm, 0, 0, 0);
    table_cqe(1, 0x51, PFNIC_WC_SUCCESS);
    c = table_cqe(2, 0x61, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.byte_len, ==, 0x1800);
    table_rw(tr_pages, TR_VA, TR_VA + 0x100, got, 0x1800, false);
    g_assert_cmpmem(got, 0x1800, src, 0x1800);

    /* SEND from host memory into a receive buffer in device memory */
    pattern(src, 0x900, 12);
    table_rw(tl_pages, TL_VA, TL_VA, src, 0x900, true);
    table_recv(2, 3, 0x62, 0x200, 0x1000, rdm);
    table_post(1, 2, PFNIC_WR_SEND, 0x52, TL_VA, 0x900, lkey, 0, 0, 0);
    table_cqe(1, 0x52, PFNIC_WC_SUCCESS);
    c = table_cqe(2, 0x62, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.byte_len, ==, 0x900);
    dm_read(DM_R_START + 0x200, got, 0x900);
    g_assert_cmpmem(got, 0x900, src, 0x900);
    dm_read(DM_R_START, got, 0x200);
    g_assert_cmpmem(got, 0x200, zero, 0x200);

    /* RDMA WRITE from host memory to MR 6's 0x1000 */
    pattern(src, 0xc00, 13);
    table_rw(tl_pages, TL_VA, TL_VA + 0x1000, src, 0xc00, true);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x53, TL_VA + 0x1000, 0xc00, lkey,
               0x1000, rdm, 0);
    table_cqe(1, 0x53, PFNIC_WC_SUCCESS);
    dm_read(DM_R_START + 0x1000, got, 0xc00);
    g_assert_cmpmem(got, 0xc00, src, 0xc00);
    dm_read(DM_R_START + 0x1c00, got, 0x400);
    g_assert_cmpmem(got, 0x400, zero, 0x400);
    /* Nothing at byte 0x1000 of the memory itself */
    dm_read(0x1000, got, 0x1000);
    g_assert_cmpmem(got, 0x1000, zero, 0x1000);

    /* RDMA READ from device memory across its pages into host memory */
    pattern(src, 0x1100, 14);
    dm_write(DM_R_START + 0xe00, src, 0x1100);
    table_post(1, 2, PFNIC_WR_RDMA_READ, 0x54, TL_VA + 0x2000, 0x1100, lkey,
               0xe00, rdm, 0);
    table_cqe(1, 0x54, PFNIC_WC_SUCCESS);
    table_rw(tl_pages, TL_VA, TL_VA + 0x2000, got, 0x1100, false);
    g_assert_cmpmem(got, 0x1100, src, 0x1100);

    /* RDMA WRITE from device memory to device memory */
    pattern(src, 0x800, 15);
    dm_write(DM_L_START + 0x2800, src, 0x800);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x55, 0x2800, 0x800, ldm, 0x1800,
               rdm, 0);
    table_cqe(1, 0x55, PFNIC_WC_SUCCESS);
    dm_read(DM_R_START + 0x1800, got, 0x800);
    g_assert_cmpmem(got, 0x800, src, 0x800);

    /* Atomics on MR 6's last 8 bytes: the original to host memory, to DM */
    v = cpu_to_le64(1000);
    dm_write(DM_R_START + DM_R_LEN - 8, &v, 8);
    table_post(1, 2, PFNIC_WR_ATOMIC_FETCH_AND_ADD, 0x56, TL_VA + 0x3000, 8,
               lkey, DM_R_LEN - 8, rdm, 24);
    g_assert_cmpint(table_cqe(1, 0x56, PFNIC_WC_SUCCESS).opcode, ==,
                    PFNIC_WC_FETCH_ADD);
    dm_read(DM_R_START + DM_R_LEN - 8, &v, 8);
    g_assert_cmpint(le64_to_cpu(v), ==, 1024);
    table_rw(tl_pages, TL_VA, TL_VA + 0x3000, &v, 8, false);
    g_assert_cmpint(le64_to_cpu(v), ==, 1000);
    dm_post_cas(0x57, 8, ldm, DM_R_LEN - 8, rdm, 1024, 0x5555);
    g_assert_cmpint(table_cqe(1, 0x57, PFNIC_WC_SUCCESS).opcode, ==,
                    PFNIC_WC_COMP_SWAP);
    dm_read(DM_R_START + DM_R_LEN - 8, &v, 8);
    g_assert_cmphex(le64_to_cpu(v), ==, 0x5555);
    dm_read(DM_L_START + 8, &v, 8);
    g_assert_cmpint(le64_to_cpu(v), ==, 1024);
    /* A compare that fails swaps nothing. */
    dm_post_cas(0x58, 16, ldm, DM_R_LEN - 8, rdm, 1024, 1);
    table_cqe(1, 0x58, PFNIC_WC_SUCCESS);
    dm_read(DM_R_START + DM_R_LEN - 8, &v, 8);
    g_assert_cmphex(le64_to_cpu(v), ==, 0x5555);

    /* x + len past the MR: LOC_PROT_ERR locally, REM_ACCESS_ERR remotely */
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x59, DM_L_LEN - 0x100, 0x200, ldm,
               0, rdm, 0);
    table_cqe(1, 0x59, PFNIC_WC_LOC_PROT_ERR);
    qp_reconnect(2, 3);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x5a, TL_VA, 0x200, lkey,
               DM_R_LEN - 0x100, rdm, 0);
    table_cqe(1, 0x5a, PFNIC_WC_REM_ACCESS_ERR);
    qp_reconnect(2, 3);
    /* Zero-based: the MR's start in device memory is no address of it. */
    table_post(1, 2, PFNIC_WR_RDMA_READ, 0x5b, TL_VA, 0x100, lkey,
               DM_R_START, rdm, 0);
    table_cqe(1, 0x5b, PFNIC_WC_REM_ACCESS_ERR);
    qp_reconnect(2, 3);
    table_post(1, 2, PFNIC_WR_ATOMIC_FETCH_AND_ADD, 0x5c, TL_VA, 8, lkey,
               DM_R_LEN, rdm, 1);
    table_cqe(1, 0x5c, PFNIC_WC_REM_ACCESS_ERR);
    qp_reconnect(2, 3);
    /* Another PD's DM MR: refused remotely and locally */
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x5d, TL_VA, 0x100, lkey, 0, odm,
               0);
    table_cqe(1, 0x5d, PFNIC_WC_REM_ACCESS_ERR);
    qp_reconnect(2, 3);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x5e, 0, 0x100, lodm, 0, rdm, 0);
    table_cqe(1, 0x5e, PFNIC_WC_LOC_PROT_ERR);
    qp_reconnect(2, 3);
    /* None of them wrote anything. */
    dm_read(DM_R_START, got, 0x200);
    g_assert_cmpmem(got, 0x200, zero, 0x200);
    /* And the QPs work on. */
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x5f, 0x2800, 0x10, ldm, 0x10, rdm,
               0);
    table_cqe(1, 0x5f, PFNIC_WC_SUCCESS);
    dm_read(DM_R_START + 0x10, got, 0x10);
    g_assert_cmpmem(got, 0x10, src, 0x10);

    assert_no_ats_pri();
    assert_mr_no_pages(5);
    assert_mr_no_pages(6);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    qtest_end();
}

/*
 * DM MRs of a context with a PASID, without an IOMMU (where no other MR's
 * page can be made present): data moves without translation, a PREFETCH
 * succeeds at once (within the MR), nothing goes to ATS or PRI.
 */
static void test_dm_pasid(void)
{
    static uint8_t src[0x1400], got[0x1400];
    uint32_t k1, k2;
    PfnicDesc d = {
        .opcode = PFNIC_OP_PREFETCH, .flags = PFNIC_PREFETCH_WRITE,
        .dst = cpu_to_le64(0x800), .len = cpu_to_le64(0x1800),
    };

    start(",contexts=4");
    map_bars();
    verbs_setup(7);
    table_counts_reset();
    g_assert_cmpint(dm_mr(5, 1, 7, ALL_ACCESS, 0x4000, 0x2000, &k1), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(dm_mr(6, 1, 7, ALL_ACCESS, 0x10000, 0x2000, &k2), ==,
                    PFNIC_CMD_OK);
    pattern(src, sizeof(src), 21);
    dm_write(0x4000 + 0x300, src, sizeof(src));
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x71, 0x300, sizeof(src), k1,
               0x500, k2, 0);
    table_cqe(1, 0x71, PFNIC_WC_SUCCESS);
    dm_read(0x10000 + 0x500, got, sizeof(got));
    g_assert_cmpmem(got, sizeof(got), src, sizeof(src));

    d.src = cpu_to_le64(k1);
    g_assert_cmphex(run_desc(0, &d), ==, PFNIC_DESC_DONE | PFNIC_ST_SUCCESS);
    d.len = cpu_to_le64(0x1801);
    g_assert_cmphex(run_desc(1, &d), ==, PFNIC_DESC_DONE |
                    PFNIC_ST_PROTECTION);
    assert_no_ats_pri();
    assert_mr_no_pages(5);
    assert_mr_no_pages(6);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    qtest_end();
}

/* --- the wire (docs/wire.md) ------------------------------------------- */

#define IP_A            0x0a000001      /* 10.0.0.1 */
#define IP_B            0x0a000002      /* 10.0.0.2 */
#define WIRE_SQ_PSN_A   0xfffff0        /* A's PSNs wrap around 2^24 */
#define WIRE_SQ_PSN_B   0x000100

static void use_nic(int n)
{
    nic_bus = n ? 2 : 1;
    nic_win = n ? WIN1_BASE : WIN_BASE;
}

/*
 * Two pfnics joined by a QEMU hub: A on rp0, B on rp1. @more adds netdevs
 * and hub ports; @a and @b add properties to A's and B's -device.
 */
static void wire_start(const char *more, const char *a, const char *b)
{
    qtest_start(g_strdup_printf(
        PFNIC_ARGS "-netdev hubport,id=w0,hubid=0 "
        "-netdev hubport,id=w1,hubid=0 %s "
        "-device pfnic,bus=rp0,netdev=w0,mac=52:54:00:00:00:0a%s "
        "-device pfnic,bus=rp1,netdev=w1,mac=52:54:00:00:00:0b%s",
        more, a, b));
    setup_topology();
    pfnic_qt_setup_root_port(global_qtest, RP1_DEVFN, 2, WIN1_BASE);
    use_nic(1);
    map_bars();
    use_nic(0);
    map_bars();
}

static uint32_t wire_modify(uint32_t qpn, uint32_t state, uint32_t dest,
                            uint32_t dest_ip, uint32_t sq_psn, uint32_t rq_psn,
                            uint32_t timeout, uint32_t retry,
                            uint32_t rnr_retry)
{
    uint32_t a[PFNIC_CMD_ARGS] = {
        qpn, state, PFNIC_ACCESS_REMOTE_WRITE | PFNIC_ACCESS_REMOTE_READ |
        PFNIC_ACCESS_REMOTE_ATOMIC, dest, 1, rnr_retry, retry, dest_ip,
        sq_psn, rq_psn, 3 /* IBV_MTU_1024 */, timeout, 4, 64, 4,
    };

    return cmd(PFNIC_CMD_QP_MODIFY, a, PFNIC_CMD_ARGS);
}

/*
 * On the current NIC: CQs @cq and @cq + 1 of context 1, and its QP @qpn
 * (PD 7), connected to QP @dest at @dest_ip.
 */
static void wire_qp_flags(uint32_t cq, uint32_t qpn, uint32_t dest,
                          uint32_t dest_ip, uint32_t sq_psn, uint32_t rq_psn,
                          uint32_t timeout, uint32_t scq_flags,
                          uint32_t rcq_flags)
{
    g_assert_cmpint(cq_create_flags(cq, 1, 4, scq_flags), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create_flags(cq + 1, 1, 4, rcq_flags), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(qpn, 1, 7, cq, cq + 1, 4, 0), ==, PFNIC_CMD_OK);
    for (uint32_t st = PFNIC_QPS_INIT; st <= PFNIC_QPS_RTS; st++) {
        g_assert_cmpint(wire_modify(qpn, st, dest, dest_ip, sq_psn, rq_psn,
                                    timeout, 2, 7), ==, PFNIC_CMD_OK);
    }
}

static void wire_qp(uint32_t cq, uint32_t qpn, uint32_t dest,
                    uint32_t dest_ip, uint32_t sq_psn, uint32_t rq_psn,
                    uint32_t timeout)
{
    wire_qp_flags(cq, qpn, dest, dest_ip, sq_psn, rq_psn, timeout, 0, 0);
}

/*
 * On the current NIC: context 1, MR 1 (PD 7), and wire_qp()'s CQs and QP.
 * Returns the MR's key.
 */
static uint32_t wire_side(uint32_t cq, uint32_t qpn, uint32_t dest,
                          uint32_t ip, uint32_t dest_ip, uint32_t sq_psn,
                          uint32_t rq_psn, uint32_t timeout)
{
    uint32_t key;

    reg_write(PFNIC_REG_PORT_IPV4, ip);
    key = ctx_and_mr_setup();
    wire_qp(cq, qpn, dest, dest_ip, sq_psn, rq_psn, timeout);
    return key;
}

/* A's QP 2 (CQs 1, 2) and B's QP 3 (CQs 3, 4), connected over the wire. */
static void wire_setup(uint32_t timeout, uint32_t *key_a, uint32_t *key_b)
{
    use_nic(1);
    *key_b = wire_side(3, 3, 2, IP_B, IP_A, WIRE_SQ_PSN_B, WIRE_SQ_PSN_A,
                       timeout);
    use_nic(0);
    *key_a = wire_side(1, 2, 3, IP_A, IP_B, WIRE_SQ_PSN_A, WIRE_SQ_PSN_B,
                       timeout);
}

static uint32_t port_counter(int c)
{
    return reg_read(PFNIC_REG_PORT_COUNTERS + 4 * c);
}

/* Wait up to @ms of virtual time for the CQE in @slot. */
static PfnicCqe wait_cqe_ms(uint32_t cqn, uint32_t slot, uint32_t ms)
{
    PfnicCqe c = read_cqe(cqn, slot);

    for (uint32_t i = 0; i < ms * 10 && c.owner != 1; i++) {
        clock_step(100000);
        c = read_cqe(cqn, slot);
    }
    g_assert_cmpint(c.owner, ==, 1);
    return c;
}

static void assert_no_bad_frames(void)
{
    for (int n = 0; n < 2; n++) {
        use_nic(n);
        g_assert_cmpint(port_counter(PFNIC_PORT_RX_MALFORMED), ==, 0);
        g_assert_cmpint(port_counter(PFNIC_PORT_RX_BAD_ICRC), ==, 0);
        g_assert_cmpint(port_counter(PFNIC_PORT_RX_NO_QP), ==, 0);
        g_assert_cmpint(port_counter(PFNIC_PORT_RX_NOT_PEER), ==, 0);
    }
    use_nic(0);
}

/*
 * The port: its registers, ARP, and RC messages between two devices
 * (without an IOMMU nothing can be translated, so the messages that
 * carry data are zero-length; the guest suite moves data).
 */
static void test_wire_basic(void)
{
    uint32_t key_a, key_b, a[PFNIC_CMD_ARGS];
    PfnicCqe c;

    wire_start("", "", "");
    g_assert_true(reg_read(PFNIC_REG_CAPS) & PFNIC_CAPS_WIRE);
    g_assert_cmphex(reg_read(PFNIC_REG_PORT_STATUS), ==,
                    PFNIC_PORT_STATUS_WIRE | PFNIC_PORT_STATUS_LINK_UP);
    g_assert_cmphex(reg_read(PFNIC_REG_PORT_MAC_LO), ==, 0x00005452);
    g_assert_cmphex(reg_read(PFNIC_REG_PORT_MAC_HI), ==, 0x0a00);
    g_assert_cmphex(reg_read(PFNIC_REG_PORT_IPV4), ==, 0);
    wire_setup(10, &key_a, &key_b);
    g_assert_cmphex(reg_read(PFNIC_REG_PORT_IPV4), ==, IP_A);

    /* SEND: A resolves B's MAC first; B's receive names A's QP. */
    use_nic(1);
    post_recv0(3, 0, 0x300, key_b);
    use_nic(0);
    post_send0(2, 0, 0x200, key_a);
    c = wait_cqe_ms(1, 0, 100);
    g_assert_cmphex(c.wr_id, ==, 0x200);
    g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_SEND);
    g_assert_cmpint(port_counter(PFNIC_PORT_ARP_REQUESTS), ==, 1);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_ROCE), ==, 1); /* the ACK */
    use_nic(1);
    c = wait_cqe_ms(4, 0, 10);
    g_assert_cmphex(c.wr_id, ==, 0x300);
    g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_RECV);
    g_assert_cmpint(c.byte_len, ==, 0);
    g_assert_cmpint(c.qp_num, ==, 3);
    g_assert_cmpint(c.src_qp, ==, 2);
    /* B answered A's ARP and learnt A's MAC: it asked nothing. */
    g_assert_cmpint(port_counter(PFNIC_PORT_ARP_REQUESTS), ==, 0);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmphex(a[10], ==, (WIRE_SQ_PSN_A + 1) & 0xffffff);

    /* WRITE with immediate, READ and a SEND that wait for nothing */
    post_recv0(3, 1, 0x301, key_b);
    use_nic(0);
    post_wqe(SQ_ADDR + 2 * 0x10000, 1, PFNIC_WR_RDMA_WRITE_WITH_IMM,
             PFNIC_SEND_SIGNALED | PFNIC_SEND_SOLICITED, 0x201, 0, 0, 0,
             key_b);
    post_wqe(SQ_ADDR + 2 * 0x10000, 2, PFNIC_WR_RDMA_READ,
             PFNIC_SEND_SIGNALED, 0x202, 0, 0, 0, key_b);
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | 3);
    c = wait_cqe_ms(1, 2, 100);
    g_assert_cmphex(c.wr_id, ==, 0x202);
    g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_RDMA_READ);
    g_assert_cmpint(read_cqe(1, 1).status, ==, PFNIC_WC_SUCCESS);
    g_assert_cmpint(read_cqe(1, 1).opcode, ==, PFNIC_WC_RDMA_WRITE);
    g_assert_cmpint(qp_query(2, a), ==, PFNIC_CMD_OK);
    /* three PSNs used, past the 24-bit wrap */
    g_assert_cmphex(a[9], ==, (WIRE_SQ_PSN_A + 3) & 0xffffff);
    g_assert_cmpint(a[11], ==, 0);              /* nothing retransmitted */
    use_nic(1);
    c = wait_cqe_ms(4, 1, 10);
    g_assert_cmphex(c.wr_id, ==, 0x301);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_RECV_RDMA_WITH_IMM);
    g_assert_cmpint(c.wc_flags, ==, PFNIC_WC_WITH_IMM);
    g_assert_cmphex(c.imm_data, ==, 0x78563412);

    /* No receive WQE at B: RNR NAKs until one is posted (rnr_retry 7). */
    use_nic(0);
    post_send0(2, 3, 0x203, key_a);
    clock_step(5 * 1000 * 1000);
    g_assert_cmpint(read_cqe(1, 3).owner, ==, 0);
    g_assert_cmpint(qp_query(2, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[13], >, 0);               /* RNR NAKs received */
    use_nic(1);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[12], >, 0);               /* RNR NAKs sent */
    g_assert_cmpint(port_counter(PFNIC_PORT_TX_RNR_NAKS), ==, a[12]);
    post_recv0(3, 2, 0x302, key_b);
    use_nic(0);
    c = wait_cqe_ms(1, 3, 100);
    g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    use_nic(1);
    g_assert_cmphex(wait_cqe_ms(4, 2, 10).wr_id, ==, 0x302);

    /* Data: A cannot translate its buffer here, so the WQE fails locally. */
    use_nic(0);
    post_write(2, 4, 0x204, key_a, key_b, 0x20000000, 8);
    c = wait_cqe_ms(1, 4, 10);
    g_assert_cmpint(c.status, ==, PFNIC_WC_LOC_PROT_ERR);
    g_assert_cmpint(qp_state(2), ==, PFNIC_QPS_ERR);
    assert_no_bad_frames();
    qtest_end();
}

/*
 * Data on the wire, through tables (ABI 1.8): A's QP 2 and B's QP 3 in
 * contexts without a PASID, each with a table MR over scattered guest
 * pages (both devices reach the same guest memory). A WRITE of 9 packets,
 * a READ, a SEND, and a WRITE to an invalid entry (REM_ACCESS_ERR).
 */
static void test_wire_tables(void)
{
    static const uint64_t pa[3] = {
        DATA_PAGE(30), DATA_PAGE(33), DATA_PAGE(31),
    };
    static const uint64_t pb[3] = {
        DATA_PAGE(40), DATA_PAGE(38), DATA_PAGE(44),
    };
    static uint8_t src[0x2400], got[0x2400];
    uint32_t key_a, key_b;
    PfnicCqe c;

    wire_start("", ",ats=off,pasid=off,pri=off", ",ats=off,pasid=off,pri=off");
    table_counts_reset();
    memset(src, 0, sizeof(src));
    for (int i = 30; i < 45; i++) {
        memwrite(DATA_PAGE(i), src, 4096);
    }
    use_nic(1);
    reg_write(PFNIC_REG_PORT_IPV4, IP_B);
    start_ctx_no_pasid(1, RING_ADDR);
    key_b = table_mr(1, 1, TR_VA, 0x3000, pb, 3);
    wire_qp(3, 3, 2, IP_A, WIRE_SQ_PSN_B, WIRE_SQ_PSN_A, 10);
    use_nic(0);
    reg_write(PFNIC_REG_PORT_IPV4, IP_A);
    start_ctx_no_pasid(1, RING_ADDR);
    key_a = table_mr(1, 1, 0x10000000, 0x3000, pa, 3);
    wire_qp(1, 2, 3, IP_B, WIRE_SQ_PSN_A, WIRE_SQ_PSN_B, 10);

    /* WRITE: 0x2400 bytes, MTU 1024, from and to odd offsets */
    pattern(src, sizeof(src), 6);
    table_rw(pa, 0x10000000, 0x10000200, src, sizeof(src), true);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x71, 0x10000200, sizeof(src),
               key_a, TR_VA + 0x400, key_b, 0);
    c = wait_cqe_ms(1, 0, 100);
    g_assert_cmphex(c.wr_id, ==, 0x71);
    g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    table_rw(pb, TR_VA, TR_VA + 0x400, got, sizeof(got), false);
    g_assert_cmpmem(got, sizeof(got), src, sizeof(src));

    /* READ it back elsewhere: B's pages 0..1 into A's page 2 */
    table_post(1, 2, PFNIC_WR_RDMA_READ, 0x72, 0x10002000, 0x1000, key_a,
               TR_VA + 0x400, key_b, 0);
    c = wait_cqe_ms(1, 1, 100);
    g_assert_cmphex(c.wr_id, ==, 0x72);
    g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    table_rw(pa, 0x10000000, 0x10002000, got, 0x1000, false);
    g_assert_cmpmem(got, 0x1000, src, 0x1000);

    /* SEND into B's receive buffer, across its pages 1 and 2 */
    use_nic(1);
    table_recv(1, 3, 0x301, TR_VA + 0x1e00, 0x600, key_b);
    use_nic(0);
    table_post(1, 2, PFNIC_WR_SEND, 0x73, 0x10000300, 0x500, key_a, 0, 0, 0);
    g_assert_cmpint(wait_cqe_ms(1, 2, 100).status, ==, PFNIC_WC_SUCCESS);
    use_nic(1);
    c = wait_cqe_ms(4, 0, 10);
    g_assert_cmphex(c.wr_id, ==, 0x301);
    g_assert_cmpint(c.byte_len, ==, 0x500);
    table_rw(pb, TR_VA, TR_VA + 0x1e00, got, 0x500, false);
    g_assert_cmpmem(got, 0x500, src + 0x100, 0x500);

    /* B's page 2 invalidated: A's WRITE there is NAKed, REM_ACCESS_ERR. */
    g_assert_cmpint(mtt_invalidate(1, 2, 1), ==, PFNIC_CMD_OK);
    use_nic(0);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x74, 0x10000000, 0x100, key_a,
               TR_VA + 0x2000, key_b, 0);
    c = wait_cqe_ms(1, 3, 100);
    g_assert_cmphex(c.wr_id, ==, 0x74);
    g_assert_cmpint(c.status, ==, PFNIC_WC_REM_ACCESS_ERR);
    for (int i = 0; i < PFNIC_CNT_NR; i++) {
        g_assert_cmpint(reg_read(PFNIC_REG_COUNTERS + 4 * i), ==, 0);
    }
    assert_no_bad_frames();
    qtest_end();
}

/* QP_MODIFY RTS -> RTS of a wire QP with the receive-fault policy @backup */
static void wire_policy(uint32_t qpn, uint32_t dest, uint32_t dest_ip,
                        uint32_t sq_psn, uint32_t rq_psn, bool backup)
{
    uint32_t a[PFNIC_CMD_ARGS] = {
        qpn, PFNIC_QPS_RTS, PFNIC_ACCESS_REMOTE_WRITE |
        PFNIC_ACCESS_REMOTE_READ | PFNIC_ACCESS_REMOTE_ATOMIC, dest, 1, 7, 2,
        dest_ip, sq_psn, rq_psn, 3 /* IBV_MTU_1024 */, 10, 4, 64, 4,
        backup ? PFNIC_QP_WIRE_BACKUP : 0,
    };

    g_assert_cmpint(cmd(PFNIC_CMD_QP_MODIFY, a, PFNIC_CMD_ARGS), ==,
                    PFNIC_CMD_OK);
}

/*
 * Driver-managed faults on the wire (ABI 1.9): A's QP 2 and B's QP 3 in
 * contexts without a PASID, each with a FAULT MR. A WRITE into B's
 * invalid entries is answered with RNR NAKs (one event at B) until B's
 * driver resumes, then lands; a READ of them waits at B; a SEND from A's
 * invalid entries waits at A; with the BACKUP policy a SEND is parked and
 * acknowledged, and placed once B resumes; an atomic asks for writing;
 * status 1 fails a WRITE with REM_ACCESS_ERR.
 */
static void test_wire_driver_faults(void)
{
    static const uint64_t pa[3] = {
        DATA_PAGE(30), DATA_PAGE(33), DATA_PAGE(31),
    };
    static const uint64_t pb[3] = {
        DATA_PAGE(40), DATA_PAGE(38), DATA_PAGE(44),
    };
    static uint8_t src[0x2400], got[0x2400];
    uint32_t key_a, key_b, a[PFNIC_CMD_ARGS];
    TestEq eqa, eqb;
    PfnicCqe c;
    uint64_t v;

    wire_start("", ",ats=off,pasid=off,pri=off", ",ats=off,pasid=off,pri=off");
    table_counts_reset();
    memset(src, 0, sizeof(src));
    for (int i = 30; i < 45; i++) {
        memwrite(DATA_PAGE(i), src, 4096);
    }
    use_nic(1);
    reg_write(PFNIC_REG_PORT_IPV4, IP_B);
    start_ctx_no_pasid(1, RING_ADDR);
    key_b = fault_mr(1, 1, TR_VA, 0x3000);
    wire_qp(3, 3, 2, IP_A, WIRE_SQ_PSN_B, WIRE_SQ_PSN_A, 10);
    test_eq_setup(&eqb, EQ_ADDR + 0x1000, 16);
    use_nic(0);
    reg_write(PFNIC_REG_PORT_IPV4, IP_A);
    start_ctx_no_pasid(1, RING_ADDR);
    key_a = fault_mr(1, 1, 0x10000000, 0x3000);
    g_assert_cmpint(mtt_map(1, 0, pa, 3, MTT_RW), ==, PFNIC_CMD_OK);
    wire_qp(1, 2, 3, IP_B, WIRE_SQ_PSN_A, WIRE_SQ_PSN_B, 10);
    test_eq_setup(&eqa, EQ_ADDR, 16);

    /* WRITE: 0x2400 bytes into B's three invalid entries */
    pattern(src, sizeof(src), 8);
    table_rw(pa, 0x10000000, 0x10000200, src, sizeof(src), true);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x71, 0x10000200, sizeof(src),
               key_a, TR_VA + 0x400, key_b, 0);
    use_nic(1);
    expect_fault_on(&eqb, 1, 0, 3, true);
    /* A comes back after each RNR NAK: no second event */
    test_eq_none(&eqb);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[12], >, 0);
    use_nic(0);
    assert_no_cqe(1);
    use_nic(1);
    fault_serve(1, 0, pb, 3);
    use_nic(0);
    table_cqe(1, 0x71, PFNIC_WC_SUCCESS);
    table_rw(pb, TR_VA, TR_VA + 0x400, got, sizeof(got), false);
    g_assert_cmpmem(got, sizeof(got), src, sizeof(src));

    /* READ of B's invalid entries 0..1: B's responder waits for them. */
    use_nic(1);
    g_assert_cmpint(mtt_invalidate(1, 0, 3), ==, PFNIC_CMD_OK);
    use_nic(0);
    table_post(1, 2, PFNIC_WR_RDMA_READ, 0x72, 0x10002000, 0x1000, key_a,
               TR_VA + 0x400, key_b, 0);
    use_nic(1);
    expect_fault_on(&eqb, 1, 0, 2, false);
    fault_serve(1, 0, pb, 3);
    use_nic(0);
    table_cqe(1, 0x72, PFNIC_WC_SUCCESS);
    table_rw(pa, 0x10000000, 0x10002000, got, 0x1000, false);
    g_assert_cmpmem(got, 0x1000, src, 0x1000);

    /* SEND from A's invalid entry: A's requester waits for its driver. */
    g_assert_cmpint(mtt_invalidate(1, 0, 3), ==, PFNIC_CMD_OK);
    use_nic(1);
    table_recv(1, 3, 0x301, TR_VA + 0x1e00, 0x600, key_b);
    use_nic(0);
    table_post(1, 2, PFNIC_WR_SEND, 0x73, 0x10000300, 0x500, key_a, 0, 0, 0);
    expect_fault_on(&eqa, 1, 0, 1, false);
    assert_no_cqe(1);
    fault_serve(1, 0, pa, 3);
    table_cqe(1, 0x73, PFNIC_WC_SUCCESS);
    use_nic(1);
    c = table_cqe(4, 0x301, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.byte_len, ==, 0x500);
    table_rw(pb, TR_VA, TR_VA + 0x1e00, got, 0x500, false);
    g_assert_cmpmem(got, 0x500, src + 0x100, 0x500);

    /*
     * BACKUP policy: a SEND into B's invalid entries 1..2 is parked and
     * acknowledged; its receive completes once B's driver resumes.
     */
    a[0] = 0x900000;
    a[1] = 0;
    a[2] = 4 * PFNIC_BACKUP_SLOT;
    g_assert_cmpint(cmd(PFNIC_CMD_BACKUP_SET, a, 3), ==, PFNIC_CMD_OK);
    wire_policy(3, 2, IP_A, WIRE_SQ_PSN_B, WIRE_SQ_PSN_A, true);
    g_assert_cmpint(mtt_invalidate(1, 1, 2), ==, PFNIC_CMD_OK);
    table_recv(1, 3, 0x302, TR_VA + 0x1e00, 0x600, key_b);
    use_nic(0);
    table_post(1, 2, PFNIC_WR_SEND, 0x74, 0x10000200, 0x600, key_a, 0, 0, 0);
    table_cqe(1, 0x74, PFNIC_WC_SUCCESS);
    use_nic(1);
    expect_fault_on(&eqb, 1, 1, 2, true);
    assert_no_cqe(4);
    g_assert_cmpint(port_counter(PFNIC_PORT_BACKUP_PACKETS), ==, 2);
    fault_serve(1, 1, &pb[1], 2);
    c = table_cqe(4, 0x302, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.byte_len, ==, 0x600);
    table_rw(pb, TR_VA, TR_VA + 0x1e00, got, 0x600, false);
    g_assert_cmpmem(got, 0x600, src, 0x600);
    g_assert_cmpint(port_counter(PFNIC_PORT_BACKUP_PLACED), ==, 2);
    wire_policy(3, 2, IP_A, WIRE_SQ_PSN_B, WIRE_SQ_PSN_A, false);

    /* An atomic on B's read-only entry: its event asks for writing. */
    v = cpu_to_le64(40);
    table_rw(pb, TR_VA, TR_VA + 8, &v, 8, true);
    g_assert_cmpint(mtt_map(1, 0, pb, 1, PFNIC_MTT_VALID | PFNIC_MTT_READ),
                    ==, PFNIC_CMD_OK);
    use_nic(0);
    table_post(1, 2, PFNIC_WR_ATOMIC_FETCH_AND_ADD, 0x76, 0x10000010, 8,
               key_a, TR_VA + 8, key_b, 2);
    use_nic(1);
    expect_fault_on(&eqb, 1, 0, 1, true);
    fault_serve(1, 0, pb, 1);
    use_nic(0);
    table_cqe(1, 0x76, PFNIC_WC_SUCCESS);
    table_rw(pb, TR_VA, TR_VA + 8, &v, 8, false);
    g_assert_cmpint(le64_to_cpu(v), ==, 42);
    table_rw(pa, 0x10000000, 0x10000010, &v, 8, false);
    g_assert_cmpint(le64_to_cpu(v), ==, 40);
    use_nic(1);

    /* Status 1: A's next try is NAKed, REM_ACCESS_ERR; B goes on. */
    g_assert_cmpint(mtt_invalidate(1, 2, 1), ==, PFNIC_CMD_OK);
    use_nic(0);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x75, 0x10000000, 0x100, key_a,
               TR_VA + 0x2000, key_b, 0);
    use_nic(1);
    expect_fault_on(&eqb, 1, 2, 1, true);
    g_assert_cmpint(fault_resume(1, 2, 1, PFNIC_FAULT_RESUME_FAIL), ==,
                    PFNIC_CMD_OK);
    use_nic(0);
    table_cqe(1, 0x75, PFNIC_WC_REM_ACCESS_ERR);
    assert_mr_faults(1, 1, 1, 1);
    use_nic(1);
    g_assert_cmpint(qp_state(3), ==, PFNIC_QPS_RTS);
    assert_mr_faults(1, 9, 8, 5);
    test_eq_none(&eqb);
    for (int n = 0; n < 2; n++) {
        use_nic(n);
        g_assert_cmphex(reg_read(PFNIC_REG_EQ_OVERFLOW), ==, 0);
        for (int i = 0; i < PFNIC_CNT_NR; i++) {
            g_assert_cmpint(reg_read(PFNIC_REG_COUNTERS + 4 * i), ==, 0);
        }
    }
    assert_no_bad_frames();
    qtest_end();
}

/*
 * A responder accepts packets from its peer's address only: B's QP 3 now
 * names another address, so A's SEND is refused there and A's retries run
 * out (RETRY_EXC_ERR). B's receive WQE is untouched.
 */
static void test_wire_peer(void)
{
    uint32_t key_a, key_b, a[PFNIC_CMD_ARGS];
    PfnicCqe c;

    wire_start("", "", "");
    wire_setup(10, &key_a, &key_b);             /* 4 ms, 2 retries */
    use_nic(1);
    g_assert_cmpint(wire_modify(3, PFNIC_QPS_RTS, 2, 0x0a000063,
                                WIRE_SQ_PSN_B, WIRE_SQ_PSN_A, 10, 2, 7), ==,
                    PFNIC_CMD_OK);
    post_recv0(3, 0, 0x300, key_b);
    use_nic(0);
    post_send0(2, 0, 0x200, key_a);
    c = wait_cqe_ms(1, 0, 100);
    g_assert_cmpint(c.status, ==, PFNIC_WC_RETRY_EXC_ERR);
    g_assert_cmpint(port_counter(PFNIC_PORT_TIMEOUTS), ==, 3);
    g_assert_cmpint(qp_query(2, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[0], ==, PFNIC_QPS_ERR);
    g_assert_cmpint(a[11], ==, 2);              /* sent again twice */
    use_nic(1);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_NOT_PEER), ==, 3);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[0], ==, PFNIC_QPS_RTS);
    g_assert_cmpint(a[2], ==, 0);               /* receive WQE still there */
    g_assert_cmpint(a[8], ==, 3);               /* refused */
    g_assert_cmpint(read_cqe(4, 0).owner, ==, 0);

    /*
     * A's QP 2 is connected over the wire to QP 3 of B. A local QP that
     * happens to be number 3 on A (here when QP 2 is connected) cannot
     * reach QP 2 through the loopback path.
     */
    use_nic(0);
    g_assert_cmpint(qp_create(3, 1, 7, 1, 2, 4, 0), ==, PFNIC_CMD_OK);
    qp_connect(3, 2, 0);
    for (uint32_t st = PFNIC_QPS_RESET; st <= PFNIC_QPS_RTS; st++) {
        g_assert_cmpint(wire_modify(2, st, 3, IP_B, WIRE_SQ_PSN_A,
                                    WIRE_SQ_PSN_B, 10, 2, 7), ==,
                        PFNIC_CMD_OK);
    }
    /* Nor can a QP here connect to B's QP 3 while QP 2 is its peer. */
    g_assert_cmpint(qp_create(4, 1, 7, 1, 2, 4, 0), ==, PFNIC_CMD_OK);
    g_assert_cmpint(wire_modify(4, PFNIC_QPS_INIT, 3, IP_B, 0, 0, 10, 2, 7),
                    ==, PFNIC_CMD_BUSY);
    g_assert_cmpint(wire_modify(4, PFNIC_QPS_INIT, 4, IP_B, 0, 0, 10, 2, 7),
                    ==, PFNIC_CMD_OK);
    g_assert_cmpint(wire_modify(4, PFNIC_QPS_RTR, 3, IP_B, 0, 0, 10, 2, 7),
                    ==, PFNIC_CMD_BUSY);
    g_assert_cmpint(qp_state(4), ==, PFNIC_QPS_INIT);
    post_recv0(2, 0, 0x210, key_a);
    post_send0(3, 0, 0x310, key_a);
    c = wait_cqe_ms(1, 1, 100);
    g_assert_cmphex(c.wr_id, ==, 0x310);
    g_assert_cmpint(c.status, ==, PFNIC_WC_RETRY_EXC_ERR);
    g_assert_cmpint(qp_query(2, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[0], ==, PFNIC_QPS_RTS);
    g_assert_cmpint(a[2], ==, 0);
    g_assert_cmpint(read_cqe(2, 0).owner, ==, 0);
    qtest_end();
}

/*
 * Frames lost on the way (x-wire-loss: 20% each way) are sent again, and
 * every message still completes, in order, exactly once at B.
 */
static void test_wire_loss(void)
{
    uint32_t key_a, key_b, a[PFNIC_CMD_ARGS];
    const int n = 12;

    wire_start("", ",x-wire-loss=200000,x-wire-reorder=200000",
               ",x-wire-loss=200000");
    wire_setup(10, &key_a, &key_b);
    /* Loss can hit every retry: allow as many as there are (7). */
    use_nic(0);
    g_assert_cmpint(wire_modify(2, PFNIC_QPS_RTS, 3, IP_B, WIRE_SQ_PSN_A,
                                WIRE_SQ_PSN_B, 10, 7, 7), ==, PFNIC_CMD_OK);
    use_nic(1);
    for (int i = 0; i < n; i++) {
        post_wqe(RQ_ADDR + 3 * 0x10000, i, 0, 0, 0x300 + i, 0, 0, 0, key_b);
    }
    verbs_db(1, PFNIC_DB_RQ, 3 << 16 | n);
    use_nic(0);
    for (int i = 0; i < n; i++) {
        post_wqe(SQ_ADDR + 2 * 0x10000, i, PFNIC_WR_SEND, PFNIC_SEND_SIGNALED,
                 0x200 + i, 0, 0, 0, key_a);
    }
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | n);
    for (int i = 0; i < n; i++) {
        PfnicCqe c = wait_cqe_ms(1, i, 1000);

        g_assert_cmphex(c.wr_id, ==, 0x200 + i);
        g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    }
    g_assert_cmpint(port_counter(PFNIC_PORT_INJECTED), >, 0);
    g_assert_cmpint(port_counter(PFNIC_PORT_RETRANSMITS), >, 0);
    g_assert_cmpint(qp_query(2, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[0], ==, PFNIC_QPS_RTS);
    use_nic(1);
    for (int i = 0; i < n; i++) {
        PfnicCqe c = wait_cqe_ms(4, i, 100);

        g_assert_cmphex(c.wr_id, ==, 0x300 + i);
        g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    }
    /* Exactly n receives: duplicates were acknowledged, not received. */
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[2], ==, n);
    g_assert_cmpint(read_cqe(4, n).owner, ==, 0);
    qtest_end();
}

/* QMP set_link on netdev @name */
static void set_link(const char *name, bool up)
{
    qtest_qmp_assert_success(global_qtest,
                             "{'execute': 'set_link', 'arguments': "
                             "{'name': %s, 'up': %i}}", name, up);
}

static void expect_port_change(uint32_t status)
{
    TestEqe ev = test_eq_next(&eq);

    g_assert_cmpint(ev.type, ==, PFNIC_EV_PORT_CHANGE);
    g_assert_cmpint(ev.object, ==, 1);
    g_assert_cmphex(ev.flags, ==, status);
    g_assert_cmphex(ev.data, ==, 0);
}

/*
 * ABI 1.14: the link of A's netdev goes down and up (QMP set_link): A
 * raises PORT_CHANGE with PORT_STATUS as it became, each change its own
 * event, and B, whose link did not change, raises none. A SEND posted while
 * the link is down does not reach B, and completes once the link is back.
 */
static void test_wire_port_events(void)
{
    uint32_t key_a, key_b;
    const uint32_t up = PFNIC_PORT_STATUS_WIRE | PFNIC_PORT_STATUS_LINK_UP;
    TestEq eq_b;
    PfnicCqe c;

    wire_start("", "", "");
    wire_setup(10, &key_a, &key_b);
    use_nic(1);
    test_eq_setup(&eq_b, EQ_ADDR + 0x1000, 4);
    use_nic(0);
    test_eq_setup(&eq, EQ_ADDR, 16);

    set_link("w0", false);
    g_assert_cmphex(reg_read(PFNIC_REG_PORT_STATUS), ==,
                    PFNIC_PORT_STATUS_WIRE);
    expect_port_change(PFNIC_PORT_STATUS_WIRE);
    use_nic(1);
    g_assert_cmphex(reg_read(PFNIC_REG_PORT_STATUS), ==, up);

    post_recv0(3, 0, 0x300, key_b);
    use_nic(0);
    post_send0(2, 0, 0x200, key_a);
    clock_step(50 * 1000 * 1000);
    g_assert_cmpint(read_cqe(1, 0).owner, ==, 0);
    use_nic(1);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_ROCE), ==, 0);
    use_nic(0);

    /* Down twice is one change; down then up are two. */
    set_link("w0", false);
    set_link("w0", true);
    set_link("w0", false);
    set_link("w0", true);
    g_assert_cmphex(reg_read(PFNIC_REG_PORT_STATUS), ==, up);
    expect_port_change(PFNIC_PORT_STATUS_WIRE);
    expect_port_change(up);
    expect_port_change(PFNIC_PORT_STATUS_WIRE);
    expect_port_change(up);
    test_eq_none(&eq);

    c = wait_cqe_ms(1, 0, 1000);
    g_assert_cmphex(c.wr_id, ==, 0x200);
    g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    use_nic(1);
    c = wait_cqe_ms(4, 0, 100);
    g_assert_cmphex(c.wr_id, ==, 0x300);
    g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    test_eq_none(&eq_b);
    qtest_end();
}

/*
 * A wire QP with an SRQ (ABI 1.11): B's QP 3 (PD 9) takes its receive
 * WQEs from SRQ 1 (PD 7, like B's MR): the responder takes them as the
 * loopback sender does. The SRQ's head moves, the QP's receive head stays
 * 0; WRITE with immediate consumes one; an empty SRQ is answered with RNR
 * NAKs until SRQ_DB posts one.
 */
static void test_wire_srq(void)
{
    static const uint64_t pa[3] = {
        DATA_PAGE(30), DATA_PAGE(33), DATA_PAGE(31),
    };
    static const uint64_t pb[3] = {
        DATA_PAGE(40), DATA_PAGE(38), DATA_PAGE(44),
    };
    static uint8_t src[0x500], got[0x500];
    uint32_t key_a, key_b, a[PFNIC_CMD_ARGS];
    PfnicCqe c;

    wire_start("", ",ats=off,pasid=off,pri=off", ",ats=off,pasid=off,pri=off");
    table_counts_reset();
    memset(src, 0, sizeof(src));
    for (int i = 30; i < 45; i++) {
        memwrite(DATA_PAGE(i), src, 4096);
    }
    use_nic(1);
    reg_write(PFNIC_REG_PORT_IPV4, IP_B);
    start_ctx_no_pasid(1, RING_ADDR);
    key_b = table_mr(1, 1, TR_VA, 0x3000, pb, 3);
    g_assert_cmpint(srq_create(1, 1, 7, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create(3, 1, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create(4, 1, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create_srq(3, 1, 9, 3, 4, 1), ==, PFNIC_CMD_OK);
    for (uint32_t st = PFNIC_QPS_INIT; st <= PFNIC_QPS_RTS; st++) {
        g_assert_cmpint(wire_modify(3, st, 2, IP_A, WIRE_SQ_PSN_B,
                                    WIRE_SQ_PSN_A, 10, 2, 7), ==,
                        PFNIC_CMD_OK);
    }
    use_nic(0);
    reg_write(PFNIC_REG_PORT_IPV4, IP_A);
    start_ctx_no_pasid(1, RING_ADDR);
    key_a = table_mr(1, 1, 0x10000000, 0x3000, pa, 3);
    wire_qp(1, 2, 3, IP_B, WIRE_SQ_PSN_A, WIRE_SQ_PSN_B, 10);

    /* SEND into B's first SRQ WQE, across its pages 1 and 2 */
    use_nic(1);
    srq_post(1, 1, 0x301, TR_VA + 0x1e00, 0x600, key_b);
    srq_post(1, 1, 0x302, TR_VA, 0x100, key_b);
    use_nic(0);
    pattern(src, sizeof(src), 9);
    table_rw(pa, 0x10000000, 0x10000300, src, sizeof(src), true);
    table_post(1, 2, PFNIC_WR_SEND, 0x73, 0x10000300, 0x500, key_a, 0, 0, 0);
    g_assert_cmpint(wait_cqe_ms(1, 0, 100).status, ==, PFNIC_WC_SUCCESS);
    use_nic(1);
    c = wait_cqe_ms(4, 0, 10);
    g_assert_cmphex(c.wr_id, ==, 0x301);
    g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.byte_len, ==, 0x500);
    g_assert_cmpint(c.qp_num, ==, 3);
    g_assert_cmpint(c.src_qp, ==, 2);
    table_rw(pb, TR_VA, TR_VA + 0x1e00, got, 0x500, false);
    g_assert_cmpmem(got, 0x500, src, 0x500);

    /* WRITE with immediate (no data) takes the second */
    use_nic(0);
    table_post_imm(1, 2, 0x74, 0, 0, key_a, 0, 0);
    g_assert_cmpint(wait_cqe_ms(1, 1, 100).status, ==, PFNIC_WC_SUCCESS);
    use_nic(1);
    c = wait_cqe_ms(4, 1, 10);
    g_assert_cmphex(c.wr_id, ==, 0x302);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_RECV_RDMA_WITH_IMM);
    g_assert_cmphex(c.imm_data, ==, 0x78563412);
    srq_query(1, a);
    g_assert_cmpint(a[1], ==, 2);
    g_assert_cmpint(srq_rec_head(1), ==, 2);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[2], ==, 0);

    /* The SRQ is empty: RNR NAKs, until B posts on it */
    use_nic(0);
    table_post(1, 2, PFNIC_WR_SEND, 0x75, 0x10000300, 0x10, key_a, 0, 0, 0);
    clock_step(5 * 1000 * 1000);
    g_assert_cmpint(read_cqe(1, 2).owner, ==, 0);
    g_assert_cmpint(qp_query(2, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[13], >, 0);               /* RNR NAKs received */
    use_nic(1);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[12], >, 0);               /* RNR NAKs sent */
    srq_post(1, 1, 0x303, TR_VA + 0x800, 0x100, key_b);
    use_nic(0);
    g_assert_cmpint(wait_cqe_ms(1, 2, 100).status, ==, PFNIC_WC_SUCCESS);
    use_nic(1);
    c = wait_cqe_ms(4, 2, 10);
    g_assert_cmphex(c.wr_id, ==, 0x303);
    g_assert_cmpint(c.byte_len, ==, 0x10);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    assert_no_bad_frames();
    qtest_end();
}

/* Post a signaled one-SGE WQE in slot @slot of QP @qpn (context 1), rung. */
static void dm_post(uint32_t qpn, uint32_t slot, uint8_t op, uint64_t wr_id,
                    uint64_t laddr, uint32_t len, uint32_t lkey,
                    uint64_t raddr, uint32_t rkey, uint64_t add)
{
    PfnicWqe w = {
        .opcode = op, .flags = PFNIC_SEND_SIGNALED, .num_sge = 1,
        .wr_id = cpu_to_le64(wr_id), .remote_addr = cpu_to_le64(raddr),
        .rkey = cpu_to_le32(rkey), .compare_add = cpu_to_le64(add),
        .sge[0] = {
            .addr = cpu_to_le64(laddr), .length = cpu_to_le32(len),
            .lkey = cpu_to_le32(lkey),
        },
    };

    memwrite(SQ_ADDR + qpn * 0x10000 + slot * PFNIC_WQE_SIZE, &w, sizeof(w));
    verbs_db(1, PFNIC_DB_SQ, qpn << 16 | (slot + 1));
}

/*
 * Device memory on the wire (ABI 1.13): A's DM MR to B's, in contexts
 * with a PASID and no IOMMU (only device memory needs no translation): a
 * WRITE of five packets, a READ of three, a FETCH_AND_ADD, and a WRITE
 * past B's MR (REM_ACCESS_ERR).
 */
static void test_wire_dm(void)
{
    static uint8_t src[0x1300], got[0x1300];
    uint32_t key_a, key_b, dm_a, dm_b;
    uint64_t v;
    PfnicCqe c;

    wire_start("", "", "");
    wire_setup(10, &key_a, &key_b);
    use_nic(1);
    g_assert_cmpint(dm_mr(5, 1, 7, ALL_ACCESS, 0x1000, 0x4000, &dm_b), ==,
                    PFNIC_CMD_OK);
    use_nic(0);
    g_assert_cmpint(dm_mr(5, 1, 7, ALL_ACCESS, 0x3000, 0x4000, &dm_a), ==,
                    PFNIC_CMD_OK);

    /* WRITE: A's MR 5 at 0x100 (byte 0x3100) to B's at 0x200 (0x1200) */
    pattern(src, 0x1300, 31);
    dm_write(0x3000 + 0x100, src, 0x1300);
    dm_post(2, 0, PFNIC_WR_RDMA_WRITE, 0x81, 0x100, 0x1300, dm_a, 0x200,
            dm_b, 0);
    c = wait_cqe_ms(1, 0, 100);
    g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_RDMA_WRITE);
    use_nic(1);
    dm_read(0x1000 + 0x200, got, 0x1300);
    g_assert_cmpmem(got, 0x1300, src, 0x1300);

    /* READ: B's MR 5 at 0x2000 into A's at 0x1800 */
    pattern(src, 0x900, 32);
    dm_write(0x1000 + 0x2000, src, 0x900);
    use_nic(0);
    dm_post(2, 1, PFNIC_WR_RDMA_READ, 0x82, 0x1800, 0x900, dm_a, 0x2000,
            dm_b, 0);
    c = wait_cqe_ms(1, 1, 100);
    g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_RDMA_READ);
    dm_read(0x3000 + 0x1800, got, 0x900);
    g_assert_cmpmem(got, 0x900, src, 0x900);

    /* FETCH_AND_ADD on B's last 8 bytes, the original to A's 0x8 */
    use_nic(1);
    v = cpu_to_le64(5);
    dm_write(0x1000 + 0x3ff8, &v, 8);
    use_nic(0);
    dm_post(2, 2, PFNIC_WR_ATOMIC_FETCH_AND_ADD, 0x83, 0x8, 8, dm_a, 0x3ff8,
            dm_b, 3);
    c = wait_cqe_ms(1, 2, 100);
    g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    dm_read(0x3000 + 0x8, &v, 8);
    g_assert_cmpint(le64_to_cpu(v), ==, 5);
    use_nic(1);
    dm_read(0x1000 + 0x3ff8, &v, 8);
    g_assert_cmpint(le64_to_cpu(v), ==, 8);

    /* Past B's MR: refused by B */
    use_nic(0);
    dm_post(2, 3, PFNIC_WR_RDMA_WRITE, 0x84, 0, 0x100, dm_a, 0x3f80, dm_b, 0);
    c = wait_cqe_ms(1, 3, 100);
    g_assert_cmpint(c.status, ==, PFNIC_WC_REM_ACCESS_ERR);

    assert_no_bad_frames();
    for (int n = 0; n < 2; n++) {
        use_nic(n);
        assert_no_ats_pri();
        assert_mr_no_pages(5);
    }
    use_nic(0);
    qtest_end();
}

/* --- frames from a stranger on the wire -------------------------------- */

/* CRC-32 (IEEE, reflected), bit by bit: a second implementation. */
static uint32_t crc32_ieee(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++) {
            crc = crc >> 1 ^ (0xedb88320 & -(crc & 1));
        }
    }
    return ~crc;
}

static uint16_t ip_csum(const uint8_t *p, size_t n)
{
    uint32_t sum = 0;

    for (size_t i = 0; i < n; i += 2) {
        sum += p[i] << 8 | p[i + 1];
    }
    while (sum >> 16) {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    return ~sum;
}

/* The ICRC of a RoCEv2 frame of @len bytes (ICRC included). */
static uint32_t frame_icrc(const uint8_t *f, size_t len)
{
    static const uint8_t ones[8] = {
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff
    };
    uint8_t h[20 + 8 + 12];
    uint32_t crc = crc32_ieee(0, ones, 8);

    memcpy(h, f + 14, sizeof(h));
    h[1] = h[8] = h[10] = h[11] = 0xff;
    h[26] = h[27] = 0xff;
    h[32] = 0xff;
    crc = crc32_ieee(crc, h, sizeof(h));
    return crc32_ieee(crc, f + 14 + sizeof(h), len - 14 - sizeof(h) - 4);
}

/* Fix the IPv4 checksum and the ICRC after changing a frame. */
static void frame_seal(uint8_t *f, size_t len)
{
    stw_be_p(f + 24, 0);
    stw_be_p(f + 24, ip_csum(f + 14, 20));
    stl_le_p(f + len - 4, frame_icrc(f, len));
}

typedef struct Stranger {
    int fd;
    char *ours, *qemus;
} Stranger;

/* A third port on the hub, behind a unix datagram socket the test holds. */
static char *stranger_open(Stranger *st)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    char *dir = g_dir_make_tmp("pfnic-wire-XXXXXX", NULL);

    st->ours = g_strdup_printf("%s/test.sock", dir);
    st->qemus = g_strdup_printf("%s/qemu.sock", dir);
    g_free(dir);
    st->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    g_assert_cmpint(st->fd, >=, 0);
    g_strlcpy(sa.sun_path, st->ours, sizeof(sa.sun_path));
    g_assert_cmpint(bind(st->fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
    return g_strdup_printf("-netdev dgram,id=inj,local.type=unix,"
                           "local.path=%s,remote.type=unix,remote.path=%s "
                           "-netdev hubport,id=w2,hubid=0,netdev=inj",
                           st->qemus, st->ours);
}

static void stranger_send(Stranger *st, const uint8_t *f, size_t len)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    uint8_t drop[4096];

    g_strlcpy(sa.sun_path, st->qemus, sizeof(sa.sun_path));
    for (int i = 0; i < 1000; i++) {
        ssize_t n = sendto(st->fd, f, len, 0, (struct sockaddr *)&sa,
                           sizeof(sa));

        if (n >= 0 || errno != EAGAIN) {
            g_assert_cmpint(n, ==, len);
            break;
        }
        /*
         * QEMU's socket queue is full: its main loop may itself wait for
         * room in ours (the hub stops while a port cannot take a frame).
         */
        while (recv(st->fd, drop, sizeof(drop), 0) > 0) {
            /* what the devices sent meanwhile */
        }
        g_usleep(1000);
    }
    clock_step(100000);
}

/* The next frame on the hub with EtherType @type, or 0 if none came. */
static ssize_t stranger_recv(Stranger *st, uint16_t type, uint8_t *f,
                             size_t max)
{
    for (int i = 0; i < 100; i++) {
        ssize_t n = recv(st->fd, f, max, 0);

        if (n >= 14 && lduw_be_p(f + 12) == type) {
            return n;
        }
        if (n < 0) {
            clock_step(100000);
        }
    }
    return 0;
}

static void stranger_close(Stranger *st)
{
    unlink(st->ours);
    unlink(st->qemus);
    close(st->fd);
    g_free(st->ours);
    g_free(st->qemus);
}

/*
 * What a stranger on the wire can make the device do: ARP answers, and
 * every broken, spoofed or replayed RoCE frame counted and dropped; the
 * frames the device sends are RoCEv2 as docs/wire.md has them (checked
 * with a second ICRC implementation).
 */
static void test_wire_frames(void)
{
    static const uint8_t mac_a[6] = { 0x52, 0x54, 0, 0, 0, 0x0a };
    static const uint8_t mac_b[6] = { 0x52, 0x54, 0, 0, 0, 0x0b };
    uint8_t f[4096], send[4096], g[4096];
    uint32_t key_a, key_b, a[PFNIC_CMD_ARGS], timeouts;
    Stranger st;
    char *more = stranger_open(&st);
    ssize_t n, len;
    GRand *rnd = g_rand_new_with_seed(4791);

    wire_start(more, "", "");
    g_free(more);
    wire_setup(10, &key_a, &key_b);

    /* ARP: who has 10.0.0.1? A answers with its MAC. */
    memset(f, 0, sizeof(f));
    memset(f, 0xff, 6);
    memcpy(f + 6, "\x52\x54\x00\x00\x00\x99", 6);
    stw_be_p(f + 12, 0x0806);
    stw_be_p(f + 14, 1);
    stw_be_p(f + 16, 0x0800);
    f[18] = 6;
    f[19] = 4;
    stw_be_p(f + 20, 1);
    memcpy(f + 22, f + 6, 6);
    stl_be_p(f + 28, 0x0a000063);
    stl_be_p(f + 38, IP_A);
    stranger_send(&st, f, 42);
    n = stranger_recv(&st, 0x0806, g, sizeof(g));
    while (n && lduw_be_p(g + 20) != 2) {
        n = stranger_recv(&st, 0x0806, g, sizeof(g));
    }
    g_assert_cmpint(n, >=, 42);
    g_assert_cmpmem(g + 22, 6, mac_a, 6);
    g_assert_cmphex((uint32_t)ldl_be_p(g + 28), ==, IP_A);
    g_assert_cmphex((uint32_t)ldl_be_p(g + 38), ==, 0x0a000063);

    /* A SEND from A to B, as seen on the wire */
    use_nic(1);
    post_recv0(3, 0, 0x300, key_b);
    use_nic(0);
    post_send0(2, 0, 0x200, key_a);
    g_assert_cmpint(wait_cqe_ms(1, 0, 100).status, ==, PFNIC_WC_SUCCESS);
    do {
        len = stranger_recv(&st, 0x0800, send, sizeof(send));
        g_assert_cmpint(len, >, 0);
    } while (send[14 + 28] != 0x04);            /* SEND ONLY */
    g_assert_cmpint(len, ==, 14 + 20 + 8 + 12 + 4);
    g_assert_cmpmem(send, 6, mac_b, 6);
    g_assert_cmpmem(send + 6, 6, mac_a, 6);
    g_assert_cmphex(send[14], ==, 0x45);
    g_assert_cmphex(lduw_be_p(send + 14 + 6), ==, 0x4000);     /* DF */
    g_assert_cmpint(send[14 + 8], ==, 64);                     /* TTL */
    g_assert_cmpint(send[14 + 9], ==, 17);                     /* UDP */
    g_assert_cmphex(ip_csum(send + 14, 20), ==, 0);
    g_assert_cmphex((uint32_t)ldl_be_p(send + 14 + 12), ==, IP_A);
    g_assert_cmphex((uint32_t)ldl_be_p(send + 14 + 16), ==, IP_B);
    g_assert_cmphex(lduw_be_p(send + 34), ==, 0xc000 | 2);
    g_assert_cmphex(lduw_be_p(send + 36), ==, 4791);
    g_assert_cmphex(lduw_be_p(send + 40), ==, 0);              /* no csum */
    g_assert_cmphex(lduw_be_p(send + 42 + 2), ==, 0xffff);     /* P_Key */
    g_assert_cmphex((uint32_t)ldl_be_p(send + 42 + 4), ==, 3); /* dest QP */
    g_assert_cmphex((uint32_t)ldl_be_p(send + 42 + 8), ==,
                    0x80000000 | WIRE_SQ_PSN_A);               /* AckReq */
    g_assert_cmphex((uint32_t)ldl_le_p(send + len - 4), ==,
                    frame_icrc(send, len));

    use_nic(1);
    /* The same frame again: a duplicate, acknowledged, not received. */
    stranger_send(&st, send, len);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_DUPLICATE), ==, 1);
    /* One bit of the payload area flipped: a bad ICRC. */
    memcpy(f, send, len);
    f[42 + 11] ^= 1;
    stranger_send(&st, f, len);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_BAD_ICRC), ==, 1);
    /* From another address, sealed right: not the peer. */
    memcpy(f, send, len);
    stl_be_p(f + 14 + 12, 0x0a000063);
    frame_seal(f, len);
    stranger_send(&st, f, len);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_NOT_PEER), ==, 1);
    /* A QP that is not there */
    memcpy(f, send, len);
    stl_be_p(f + 42 + 4, 77);
    frame_seal(f, len);
    stranger_send(&st, f, len);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_NO_QP), ==, 1);
    /* A PSN far ahead, twice: one sequence NAK */
    for (int i = 0; i < 2; i++) {
        memcpy(f, send, len);
        stl_be_p(f + 42 + 8, 0x80000000 | (WIRE_SQ_PSN_A + 1000 + i));
        frame_seal(f, len);
        stranger_send(&st, f, len);
    }
    g_assert_cmpint(port_counter(PFNIC_PORT_TX_SEQ_NAKS), ==, 1);
    /* Truncated, and a payload larger than the path MTU (1024) */
    stranger_send(&st, send, 40);
    memcpy(f, send, 42 + 12);
    memset(f + 42 + 12, 0x5a, 2000);
    stw_be_p(f + 14 + 2, 20 + 8 + 12 + 2000 + 4);
    stw_be_p(f + 38, 8 + 12 + 2000 + 4);
    stl_be_p(f + 42 + 8, WIRE_SQ_PSN_A + 1);
    frame_seal(f, 42 + 12 + 2000 + 4);
    stranger_send(&st, f, 42 + 12 + 2000 + 4);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_MALFORMED), ==, 2);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[0], ==, PFNIC_QPS_RTS);
    g_assert_cmpint(a[2], ==, 1);               /* one receive, the real one */

    /*
     * Noise: random frames, half of them well-formed RoCEv2 to B's QP 3
     * (a random BTH and body, sealed): counted and dropped, or answered,
     * and the QPs work after.
     */
    for (int i = 0; i < 2000; i++) {
        /* Not 0: QEMU's dgram netdev takes an empty datagram for EOF. */
        size_t flen = g_rand_int_range(rnd, 1, 1200);

        for (size_t k = 0; k < flen; k++) {
            f[k] = g_rand_int(rnd);
        }
        if (i & 1 && flen >= 42 + 12 + 4 + 4) {
            flen &= ~3ul;
            memcpy(f, send, 42);
            stw_be_p(f + 14 + 2, flen - 14);
            stw_be_p(f + 38, flen - 34);
            stl_be_p(f + 42 + 4, 3);
            f[42 + 1] &= 0xf0;
            stw_be_p(f + 42 + 2, 0xffff);
            frame_seal(f, flen);
        }
        stranger_send(&st, f, flen);
        while (recv(st.fd, g, sizeof(g), 0) > 0) {
            /* drain what the devices answer */
        }
    }
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_FRAMES), >=, 2000);

    use_nic(1);
    post_recv0(3, 1, 0x301, key_b);
    use_nic(0);
    post_send0(2, 1, 0x201, key_a);
    g_assert_cmpint(wait_cqe_ms(1, 1, 1000).status, ==, PFNIC_WC_SUCCESS);

    /*
     * From A's address but another MAC, to a QP that is not there: B must
     * not take that MAC for A's, or its next SEND to A goes astray and
     * times out.
     */
    memcpy(f, send, len);
    memcpy(f + 6, "\x52\x54\x00\x00\x00\x99", 6);
    stl_be_p(f + 42 + 4, 77);
    frame_seal(f, len);
    stranger_send(&st, f, len);
    post_recv0(2, 0, 0x210, key_a);
    use_nic(1);
    timeouts = port_counter(PFNIC_PORT_TIMEOUTS);
    post_send0(3, 0, 0x310, key_b);
    g_assert_cmpint(wait_cqe_ms(3, 0, 1000).status, ==, PFNIC_WC_SUCCESS);
    g_assert_cmpint(port_counter(PFNIC_PORT_TIMEOUTS), ==, timeouts);
    qtest_end();
    stranger_close(&st);
    g_rand_free(rnd);
}

/*
 * Timestamps on the wire (ABI 1.12): A's send CQ 1 and B's receive CQ 4
 * have TIMESTAMP, A's receive CQ 2 and B's send CQ 3 not. Each device
 * stamps with its own clock; zero-length SENDs (nothing to translate).
 */
static void test_wire_timestamps(void)
{
    uint32_t key_a, key_b;
    uint64_t last_a = 0, last_b = 0;

    wire_start("", "", "");
    use_nic(1);
    reg_write(PFNIC_REG_PORT_IPV4, IP_B);
    key_b = ctx_and_mr_setup();
    wire_qp_flags(3, 3, 2, IP_A, WIRE_SQ_PSN_B, WIRE_SQ_PSN_A, 10, 0,
                  PFNIC_CQ_FLAG_TIMESTAMP);
    use_nic(0);
    reg_write(PFNIC_REG_PORT_IPV4, IP_A);
    key_a = ctx_and_mr_setup();
    wire_qp_flags(1, 2, 3, IP_B, WIRE_SQ_PSN_A, WIRE_SQ_PSN_B, 10,
                  PFNIC_CQ_FLAG_TIMESTAMP, 0);

    for (uint32_t i = 0; i < 3; i++) {
        uint64_t a0, a1, b0, b1, ts_a = 0, ts_b = 0;
        PfnicCqe c;

        use_nic(1);
        post_recv0(3, i, 0x300 + i, key_b);
        b0 = clock_read(1);
        use_nic(0);
        clock_step(2000);
        a0 = clock_read(1);
        post_send0(2, i, 0x200 + i, key_a);
        wait_cqe_ms(1, i, 100);
        c = ts_cqe(1, 4, i, &ts_a);
        a1 = clock_read(1);
        g_assert_cmphex(c.wr_id, ==, 0x200 + i);
        g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
        g_assert_cmpint(c.opcode, ==, PFNIC_WC_SEND);
        g_assert_cmpuint(ts_a, >=, a0);
        g_assert_cmpuint(ts_a, <=, a1);
        g_assert_cmpuint(ts_a, >=, last_a);
        last_a = ts_a;
        use_nic(1);
        wait_cqe_ms(4, i, 10);
        c = ts_cqe(4, 4, i, &ts_b);
        b1 = clock_read(1);
        g_assert_cmphex(c.wr_id, ==, 0x300 + i);
        g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
        g_assert_cmpint(c.opcode, ==, PFNIC_WC_RECV);
        g_assert_cmpint(c.src_qp, ==, 2);
        g_assert_cmpuint(ts_b, >=, b0);
        g_assert_cmpuint(ts_b, <=, b1);
        g_assert_cmpuint(ts_b, >=, last_b);
        last_b = ts_b;
    }
    /* A's 32-byte receive CQ and B's send CQ hold nothing. */
    use_nic(0);
    g_assert_cmpint(read_cqe(2, 0).owner, ==, 0);
    use_nic(1);
    g_assert_cmpint(read_cqe(3, 0).owner, ==, 0);
    assert_no_bad_frames();
    qtest_end();
}

/* --- behind an IOMMU: the op interpreter (docs/fuzzing.md) -------------- */

/*
 * A pfnic behind intel-iommu with SVA, programmed by the interpreter that
 * the libFuzzer target runs (hw/net/pfnic/pfnic_fuzz_ops.c). Each input
 * runs on a machine fresh from a system reset, as in the fuzzer.
 */
static PfnicFuzz *iommu_start(void)
{
    PfnicFuzz *f;

    qtest_start(PFNIC_FUZZ_ARGS);
    use_nic(0);     /* the interpreter's topology is setup_topology()'s */
    f = pfnic_fuzz_new(global_qtest, NULL);
    pfnic_fuzz_setup(f);
    return f;
}

static void iommu_input(PfnicFuzz *f, const uint8_t *data, size_t len)
{
    qtest_system_reset(global_qtest);
    pfnic_fuzz_setup(f);
    pfnic_fuzz_run(f, data, len);
}

/*
 * The tables are right: a WRITE lands at the translated page, a fault on a
 * page that is not present is served through the page request queue, a
 * failed response fails the descriptor.
 */
static void test_iommu_known_good(void)
{
    PfnicFuzz *f = iommu_start();

    pfnic_fuzz_known_good(f);
    /* A reset brings the device back to ready, and it works again. */
    iommu_input(f, NULL, 0);
    pfnic_fuzz_known_good(f);
    pfnic_fuzz_free(f);
    qtest_end();
}

/*
 * Random inputs from a seeded PRNG: PFNIC_FUZZ_SEED replays a run,
 * PFNIC_FUZZ_INPUTS sets how many (default 200); PFNIC_FUZZ_INPUT=FILE
 * runs that input instead, under the ordinary build.
 */
static void fuzz_random(PfnicFuzz *f, unsigned int seed, int inputs,
                        size_t max_len)
{
    GRand *rand;
    uint8_t buf[2048];

    g_assert_cmpint(max_len, <=, sizeof(buf));

    if (getenv("PFNIC_FUZZ_SEED")) {
        g_assert_cmpint(qemu_strtoui(getenv("PFNIC_FUZZ_SEED"), NULL, 0,
                                     &seed), ==, 0);
    }
    if (getenv("PFNIC_FUZZ_INPUTS")) {
        g_assert_cmpint(qemu_strtoi(getenv("PFNIC_FUZZ_INPUTS"), NULL, 0,
                                    &inputs), ==, 0);
    }
    rand = g_rand_new_with_seed(seed);
    if (getenv("PFNIC_FUZZ_INPUT")) {
        /* One saved input (a fuzzer's crash-*), then a reset after it. */
        gchar *data;
        gsize len;

        g_assert_true(g_file_get_contents(getenv("PFNIC_FUZZ_INPUT"), &data,
                                          &len, NULL));
        iommu_input(f, (uint8_t *)data, len);
        qtest_system_reset(global_qtest);
        g_free(data);
        inputs = 0;
    }

    g_test_message("PFNIC_FUZZ_SEED=%u (%d inputs)", seed, inputs);
    for (int i = 0; i < inputs; i++) {
        size_t len = g_rand_int_range(rand, 1, max_len + 1);

        for (size_t j = 0; j < len; j++) {
            buf[j] = g_rand_int(rand);
        }
        fprintf(stderr, "# input %d of seed %u\n", i, seed);
        if (getenv("PFNIC_FUZZ_SAVE")) {
            g_assert_true(g_file_set_contents(getenv("PFNIC_FUZZ_SAVE"),
                                              (char *)buf, len, NULL));
        }
        iommu_input(f, buf, len);
    }
    g_rand_free(rand);
}

static void test_iommu_random(void)
{
    PfnicFuzz *f = iommu_start();

    fuzz_random(f, g_random_int(), 200, 512);
    pfnic_fuzz_free(f);
    qtest_end();
}

/*
 * The wire target's machine (pfnic-wire): the interpreter's, with the
 * port on a dgram netdev whose other end the interpreter holds.
 */
static PfnicFuzz *wire_fuzz_start(PfnicFuzzWire *w)
{
    char *args = pfnic_fuzz_wire_open(w);
    PfnicFuzz *f;

    qtest_start(args);
    g_free(args);
    use_nic(0);
    f = pfnic_fuzz_new(global_qtest, NULL);
    pfnic_fuzz_set_wire(f, w);
    pfnic_fuzz_setup(f);
    return f;
}

/*
 * Random inputs of the wire interpreter (frames from the link, answers to
 * the device's requests, and the IOMMU target's operations), with the
 * same PFNIC_FUZZ_* variables as /pfnic/iommu/random; 200 inputs of up
 * to 2 KiB by default, seed 4791 (so that make test is repeatable).
 */
static void test_wire_random(void)
{
    PfnicFuzzWire w;
    PfnicFuzz *f = wire_fuzz_start(&w);

    fuzz_random(f, 4791, 200, 2048);
    pfnic_fuzz_free(f);
    qtest_end();
    pfnic_fuzz_wire_close(&w);
}

/* Append @n bytes of @v, little endian, to @in at *@len. */
static void input_put(uint8_t *in, size_t *len, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) {
        in[(*len)++] = v >> (8 * i);
    }
}

/*
 * The interpreter's SRQ shapes (ABI 1.11, docs/fuzzing.md's command
 * operation): QP 5 taking its receive WQEs from SRQ 0 of context 1, four
 * WQEs posted on it, and three SENDs from QP 4, behind the IOMMU: the
 * buffers on both sides fault and are served through the page request
 * queue, and each SEND takes the SRQ's next WQE.
 */
static void test_iommu_srq(void)
{
    uint32_t a[PFNIC_CMD_ARGS];
    uint8_t in[256];
    size_t len = 0;
    PfnicFuzz *f;

    input_put(in, &len, 0, 1);          /* not only well-formed operations */
    input_put(in, &len, 12, 1);         /* a command: */
    input_put(in, &len, 77, 1);         /* QP_CREATE, shaped, ... */
    input_put(in, &len, 0, 16 + 2);     /* ... with SRQ 0 */
    input_put(in, &len, 4, 1);          /* 4 WQEs on it, one SGE each */
    for (int i = 0; i < 4; i++) {
        input_put(in, &len, 1, 1);
        input_put(in, &len, i, 2);      /* VA page i */
        input_put(in, &len, 0, 2);
        input_put(in, &len, 0x100, 2);
        input_put(in, &len, 2, 1);      /* the context's key */
    }
    for (int i = 0; i < 3; i++) {
        input_put(in, &len, 0, 1);      /* a work request: */
        input_put(in, &len, 2, 1);      /* on QP 4 */
        input_put(in, &len, PFNIC_WR_SEND, 1);
        input_put(in, &len, 0, 1);
        input_put(in, &len, 1, 1);      /* one SGE */
        input_put(in, &len, 0, 2 + 2 + 1 + 1);
        input_put(in, &len, 8 + i, 2);  /* VA page 8 + i */
        input_put(in, &len, 0, 2);
        input_put(in, &len, 0x80, 2);
        input_put(in, &len, 2, 1);
        input_put(in, &len, 6, 1);      /* the clock */
        input_put(in, &len, 100, 2);
        input_put(in, &len, 10, 1);
    }
    g_assert_cmpint(len, <=, sizeof(in));

    f = iommu_start();
    iommu_input(f, in, len);
    a[0] = 0;
    g_assert_cmpint(cmd(PFNIC_CMD_SRQ_QUERY, a, 1), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[1], ==, 3);       /* head */
    g_assert_cmpint(a[2], ==, 4);       /* tail */
    g_assert_cmpint(a[3], ==, 1);       /* QP 5 */
    g_assert_cmpint(qp_query(5, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[0], ==, PFNIC_QPS_RTS);
    g_assert_cmpint(a[2], ==, 0);       /* no receive queue of its own */
    g_assert_cmpint(a[5], ==, 3);       /* three receives completed */
    pfnic_fuzz_free(f);
    qtest_end();
}

/* Write @val to the control register of the extended capability @id. */
static void ext_cap_ctrl(uint16_t id, uint16_t val)
{
    uint16_t ids[8], offs[8];
    int n = ext_caps(ids, offs, 8);

    for (int i = 0; i < n; i++) {
        if (ids[i] == id) {
            /* ATS_CTRL, PASID_CTRL and PRI_CTRL are all at offset 4/6. */
            nic_cfg_writew(offs[i] + (id == PCI_EXT_CAP_ID_ATS ?
                                      PCI_ATS_CTRL : id == PCI_EXT_CAP_ID_PRI ?
                                      PCI_PRI_CTRL : PCI_PASID_CTRL), val);
            return;
        }
    }
    g_assert_not_reached();
}

/*
 * Found by the fuzzer (docs/fuzzing.md, finding 1): the guest disables
 * PASID while contexts are bound to PASIDs. A reset stopped them, but
 * pci_iommu_unregister_iotlb_notifier() refused to unregister without
 * PASID, so intel-iommu kept the contexts' notifiers, which the reset then
 * cleared: the next system reset (or root table change) walked them and
 * aborted (an assertion in vtd_address_space_unmap). Patch 0004.
 */
static void test_iommu_pasid_disabled(void)
{
    PfnicFuzz *f = iommu_start();

    ext_cap_ctrl(PCI_EXT_CAP_ID_PASID, 0);
    reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    qtest_system_reset(global_qtest);
    /* QEMU is alive, and the device works behind the IOMMU again. */
    pfnic_fuzz_setup(f);
    pfnic_fuzz_known_good(f);
    pfnic_fuzz_free(f);
    qtest_end();
}

/*
 * Found reviewing the paths the fuzzer reaches (docs/fuzzing.md, finding
 * 2): a page-selective PASID-based IOTLB invalidation with an address mask
 * above the capability's MAMV (18) was taken, and intel-iommu computed
 * 1 << am in int (undefined from 31 on; on x86 a much smaller range was
 * invalidated). Linux 7.3 sends such descriptors (an AM of 21 in the guest
 * suite), so they must invalidate at least the range asked for: the whole
 * PASID (patch 0005). A remapped page's new translation must be seen.
 */
static void test_iommu_piotlb_am(void)
{
    const unsigned ams[] = { 0, 18, 21, 52 };

    for (int i = 0; i < ARRAY_SIZE(ams); i++) {
        PfnicFuzz *f = iommu_start();

        g_assert_true(pfnic_fuzz_remap_seen(f, ams[i]));
        pfnic_fuzz_free(f);
        qtest_end();
    }
}

/*
 * intel-iommu keeps the present PASID entries translations read (patch
 * 0006): a PASID-cache invalidation must drop them, so that a changed
 * entry is read again. Without that invalidation the cached entry may be
 * used, as on hardware, which this test only prints.
 */
static void test_iommu_pasid_cache(void)
{
    PfnicFuzz *f = iommu_start();

    g_assert_true(pfnic_fuzz_pasid_switch_seen(f, true));
    pfnic_fuzz_free(f);
    qtest_end();

    f = iommu_start();
    g_test_message("without a PASID-cache invalidation the new entry is %s",
                   pfnic_fuzz_pasid_switch_seen(f, false) ? "seen" :
                   "not seen (the cached one is used)");
    pfnic_fuzz_free(f);
    qtest_end();
}

/*
 * intel-iommu keeps the page tables first-stage walks reached (patch
 * 0007): an IOTLB invalidation must drop them, so that a changed page
 * directory entry is walked again.
 */
static void test_iommu_pde_cache(void)
{
    PfnicFuzz *f = iommu_start();

    g_assert_true(pfnic_fuzz_pde_switch_seen(f));
    pfnic_fuzz_free(f);
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
    qtest_add_func("/pfnic/contexts/no-pasid", test_contexts_no_pasid);
    qtest_add_func("/pfnic/engine", test_engine);
    qtest_add_func("/pfnic/verbs/limits", test_verbs_limits);
    qtest_add_func("/pfnic/verbs/mr", test_verbs_mr);
    qtest_add_func("/pfnic/verbs/cq-qp", test_verbs_cq_qp);
    qtest_add_func("/pfnic/verbs/eq", test_verbs_eq);
    qtest_add_func("/pfnic/verbs/doorbells", test_verbs_doorbells);
    qtest_add_func("/pfnic/verbs/send-fault", test_verbs_send_fault);
    qtest_add_func("/pfnic/verbs/errors", test_verbs_errors);
    qtest_add_func("/pfnic/verbs/peer", test_verbs_peer);
    qtest_add_func("/pfnic/verbs/unready-peer", test_verbs_unready_peer);
    qtest_add_func("/pfnic/verbs/access-errors", test_verbs_access_errors);
    qtest_add_func("/pfnic/verbs/zero-length", test_verbs_zero_length);
    qtest_add_func("/pfnic/verbs/cq-overflow", test_verbs_cq_overflow);
    qtest_add_func("/pfnic/verbs/prefetch", test_verbs_prefetch);
    qtest_add_func("/pfnic/verbs/table-commands", test_verbs_table_commands);
    qtest_add_func("/pfnic/verbs/table-space", test_verbs_table_space);
    qtest_add_func("/pfnic/verbs/tables", test_verbs_tables);
    qtest_add_func("/pfnic/verbs/table-faults", test_verbs_table_faults);
    qtest_add_func("/pfnic/verbs/table-pasid", test_verbs_table_pasid);
    qtest_add_func("/pfnic/verbs/fault-commands", test_verbs_fault_commands);
    qtest_add_func("/pfnic/verbs/driver-faults", test_verbs_driver_faults);
    qtest_add_func("/pfnic/verbs/driver-fault-errors",
                   test_verbs_driver_fault_errors);
    qtest_add_func("/pfnic/verbs/driver-fault-dedupe",
                   test_verbs_driver_fault_dedupe);
    qtest_add_func("/pfnic/verbs/implicit-table", test_verbs_implicit_table);
    qtest_add_func("/pfnic/verbs/srq-commands", test_verbs_srq_commands);
    qtest_add_func("/pfnic/verbs/srq", test_verbs_srq);
    qtest_add_func("/pfnic/verbs/srq-doorbells", test_verbs_srq_doorbells);
    qtest_add_func("/pfnic/verbs/clock", test_verbs_clock);
    qtest_add_func("/pfnic/verbs/timestamps", test_verbs_timestamps);
    qtest_add_func("/pfnic/dm/bar", test_dm_bar);
    qtest_add_func("/pfnic/dm/mr-set", test_dm_mr_set);
    qtest_add_func("/pfnic/dm/loopback", test_dm_loopback);
    qtest_add_func("/pfnic/dm/pasid", test_dm_pasid);
    qtest_add_func("/pfnic/wire/basic", test_wire_basic);
    qtest_add_func("/pfnic/wire/tables", test_wire_tables);
    qtest_add_func("/pfnic/wire/driver-faults", test_wire_driver_faults);
    qtest_add_func("/pfnic/wire/peer", test_wire_peer);
    qtest_add_func("/pfnic/wire/loss", test_wire_loss);
    qtest_add_func("/pfnic/wire/port-events", test_wire_port_events);
    qtest_add_func("/pfnic/wire/srq", test_wire_srq);
    qtest_add_func("/pfnic/wire/timestamps", test_wire_timestamps);
    qtest_add_func("/pfnic/wire/dm", test_wire_dm);
    qtest_add_func("/pfnic/wire/frames", test_wire_frames);
    qtest_add_func("/pfnic/iommu/known-good", test_iommu_known_good);
    qtest_add_func("/pfnic/iommu/random", test_iommu_random);
    qtest_add_func("/pfnic/wire/random", test_wire_random);
    qtest_add_func("/pfnic/iommu/pasid-disabled", test_iommu_pasid_disabled);
    qtest_add_func("/pfnic/iommu/piotlb-am", test_iommu_piotlb_am);
    qtest_add_func("/pfnic/iommu/pasid-cache", test_iommu_pasid_cache);
    qtest_add_func("/pfnic/iommu/pde-cache", test_iommu_pde_cache);
    qtest_add_func("/pfnic/iommu/srq", test_iommu_srq);
    return g_test_run();
}
