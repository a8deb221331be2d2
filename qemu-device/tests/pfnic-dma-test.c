/*
 * QTest for pfnic: DMA without an IOMMU: the descriptor engine, ATS
 * translation requests and page requests that fail (work requests that
 * fault, prefetch).
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "pfnic-test.h"

/*
 * Without an IOMMU nothing can be translated or faulted in: a descriptor
 * completes with PAGE_FAULT, written back to the ring, and signals the
 * context's vector. A ring the device cannot read stops the context, which
 * can be started again; a doorbell past the ring, or moving the tail back,
 * is refused, and offset 0 of the process's doorbell page no longer rings.
 */
static void test_engine(void *obj, void *data,
                        QGuestAllocator *alloc)
{
    uint32_t pba, status = 0;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * A SEND without an IOMMU: its gather buffer cannot be translated nor
 * faulted in, so it completes LOC_PROT_ERR, the QP enters ERR and later
 * WQEs are flushed. The receiver is untouched. The armed send CQ queues
 * a COMPLETION event, signalled as an MSI-X pending bit.
 */
static void test_verbs_send_fault(void *obj, void *data,
                                  QGuestAllocator *alloc)
{
    uint32_t pba, key, object, a[PFNIC_CMD_ARGS], rec[2];
    uint8_t type, owner;
    PfnicCqe c;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/* PREFETCH descriptors: key checks, NO_FAULT skips, faults fail. */
static void test_verbs_prefetch(void *obj, void *data,
                                QGuestAllocator *alloc)
{
    uint32_t key, key2, key3, a[PFNIC_CMD_ARGS];
    PfnicDesc d = {
        .opcode = PFNIC_OP_PREFETCH, .dst = cpu_to_le64(0x10000000),
        .len = cpu_to_le64(3 * 4096),
    };

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

static void register_pfnic_dma_tests(void)
{
    pfnic_add_test("engine", test_engine, "contexts=4", NULL);
    pfnic_add_test("verbs/send-fault", test_verbs_send_fault,
                   "contexts=4", NULL);
    pfnic_add_test("verbs/prefetch", test_verbs_prefetch, "contexts=4", NULL);
}

libqos_init(register_pfnic_dma_tests);
