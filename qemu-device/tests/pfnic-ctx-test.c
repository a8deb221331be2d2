/*
 * QTest for pfnic: the command mailbox and contexts: starting and stopping
 * them, with a PASID and without.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "pfnic-test.h"

static void test_contexts(void *obj, void *data,
                          QGuestAllocator *alloc)
{
    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
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

/*
 * Contexts without a PASID (ABI 1.8) start with no PASID, ATS or PRI at
 * all, read back as such, cannot change mode while enabled, complete
 * every descriptor BAD_DESCRIPTOR, and stop and reset as the others.
 */
static void test_contexts_no_pasid(void *obj, void *data,
                                   QGuestAllocator *alloc)
{
    PfnicDesc d = {
        .opcode = PFNIC_OP_FILL, .dst = cpu_to_le64(0x10000000),
        .len = cpu_to_le64(64), .pattern = cpu_to_le64(0x55),
    };
    uint32_t pba;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

static void register_pfnic_ctx_tests(void)
{
    pfnic_add_test("contexts", test_contexts, "contexts=4", NULL);
    pfnic_add_test("contexts/no-pasid", test_contexts_no_pasid,
                   "contexts=4,ats=off,pasid=off,pri=off", NULL);
}

libqos_init(register_pfnic_ctx_tests);
