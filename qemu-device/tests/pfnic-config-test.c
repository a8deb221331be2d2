/*
 * QTest for pfnic: config space, extended capabilities (ATS, PASID, PRI
 * and their properties), BAR0 registers and the self-test interrupt.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "pfnic-test.h"

static void test_config_space(void *obj, void *data,
                              QGuestAllocator *alloc)
{
    uint16_t exp, msix;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

static void test_ext_caps_default(void *obj, void *data,
                                  QGuestAllocator *alloc)
{
    uint16_t ids[8], offs[8];
    int n;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

static void test_ext_caps_switchable(void *obj, void *data,
                                     QGuestAllocator *alloc)
{
    uint16_t ids[8], offs[8];

    pfnic_qos_restart(",pri=off,pasid=off");
    g_assert_cmpint(ext_caps(ids, offs, 8), ==, 1);
    g_assert_cmphex(ids[0], ==, PCI_EXT_CAP_ID_ATS);
    pfnic_qos_restart(",ats=off,pri=off");
    g_assert_cmpint(ext_caps(ids, offs, 8), ==, 1);
    g_assert_cmphex(ids[0], ==, PCI_EXT_CAP_ID_PASID);
    g_assert_cmphex(offs[0], ==, PCI_CFG_SPACE_SIZE);
    pfnic_qos_restart(",pasid=off");
    g_assert_cmpint(ext_caps(ids, offs, 8), ==, 2);
    g_assert_cmphex(ids[1], ==, PCI_EXT_CAP_ID_PRI);
    /* Without PASID, responses need not carry one. */
    g_assert_false(nic_cfg_readw(offs[1] + PCI_PRI_STATUS) &
                   PCI_PRI_STATUS_PASID);
    pfnic_qos_end();
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

static void test_bad_properties(void *obj, void *data,
                                QGuestAllocator *alloc)
{
    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

static void test_registers(void *obj, void *data,
                           QGuestAllocator *alloc)
{
    pfnic_qos_start(obj, alloc);
    map_bars();
    g_assert_cmphex(reg_read(PFNIC_REG_ID), ==, PFNIC_ID_VALUE);
    g_assert_cmphex(reg_read(PFNIC_REG_VERSION), ==, PFNIC_VERSION_VALUE);
    g_assert_cmphex(reg_read(PFNIC_REG_FW_VERSION), ==,
                    PFNIC_FW_VERSION_VALUE);
    g_assert_cmphex(reg_read(PFNIC_REG_CAPS), ==,
                    PFNIC_CAPS_ATS | PFNIC_CAPS_PASID | PFNIC_CAPS_SELFTEST |
                    PFNIC_CAPS_VERBS | PFNIC_CAPS_TABLES | PFNIC_CAPS_SRQ |
                    PFNIC_CAPS_TIMESTAMPS | PFNIC_CAPS_DM | PFNIC_CAPS_ETH);
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
    pfnic_qos_end();
}

static void wait_selftests(uint32_t count)
{
    for (int i = 0; i < 1000 && reg_read(PFNIC_REG_SELFTEST_COUNT) < count;
         i++) {
        clock_step(1000);
    }
    g_assert_cmpint(reg_read(PFNIC_REG_SELFTEST_COUNT), ==, count);
}

static void test_selftest_msix(void *obj, void *data,
                               QGuestAllocator *alloc)
{
    uint32_t pba;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

static void register_pfnic_config_tests(void)
{
    pfnic_add_test("config-space", test_config_space, NULL, NULL);
    pfnic_add_test("ext-caps/default", test_ext_caps_default, NULL, NULL);
    pfnic_add_test("ext-caps/switchable", test_ext_caps_switchable, NULL, NULL);
    pfnic_add_test("bad-properties", test_bad_properties, NULL, NULL);
    pfnic_add_test("registers", test_registers,
                   "pri=off,vectors=16,contexts=8", NULL);
    pfnic_add_test("selftest-msix", test_selftest_msix, NULL, NULL);
}

libqos_init(register_pfnic_config_tests);
