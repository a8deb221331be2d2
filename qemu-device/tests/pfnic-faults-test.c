/*
 * QTest for pfnic: driver-managed faults (ABI 1.9): FAULT MRs, the fault
 * events and FAULT_RESUME, their errors and deduplication, the implicit
 * MR's table.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "pfnic-test.h"

static void expect_fault(uint32_t mr, uint64_t first, uint32_t count,
                         bool write)
{
    expect_fault_on(&eq, mr, first, count, write);
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
    table_pair_start();
    *lkey = fault_mr(1, 1, TL_VA, TL_LEN);
    *rkey = fault_mr(2, 2, raddr, rlen);
    table_pair_connect();
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
static void test_verbs_fault_commands(void *obj, void *data,
                                      QGuestAllocator *alloc)
{
    PfnicDesc d = {
        .opcode = PFNIC_OP_PREFETCH, .flags = PFNIC_PREFETCH_WRITE,
        .dst = cpu_to_le64(0x10000ff8), .len = cpu_to_le64(0x1010),
    };
    uint32_t key;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * The implicit MR with a table (ABI 1.10): MR_SET takes it with FAULT, its
 * entries are the pages of the whole address space (64-bit indexes: a
 * PAGE_FAULT event carries bits 47:32 of the first at 63:48, MTT_WRITE
 * takes them in a5, MTT_INVALIDATE in a3, FAULT_RESUME in a4), and only
 * the valid entries written count against table-entries, until
 * invalidated or cleared.
 */
static void test_verbs_implicit_table(void *obj, void *data,
                                      QGuestAllocator *alloc)
{
    static uint8_t src[0x2800], got[0x2800];
    const uint64_t hi_va = 0x7f1234567000ULL;     /* entry 0x7f1234567 */
    const uint64_t first = hi_va / 4096;
    const uint64_t pages[3] = { DATA_PAGE(12), DATA_PAGE(20), DATA_PAGE(15) };
    uint32_t lkey, rkey;

    /* MR 1: 4 of the 8 entries; MR 2: the implicit one */
    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * FAULT MRs whose entries are all invalid: every RDMA op waits for the
 * driver, one side at a time, with one PAGE_FAULT event per side (the
 * entries it still needs, and whether it writes them); once the driver
 * writes the entries and resumes, the data moves.
 */
static void test_verbs_driver_faults(void *obj, void *data,
                                     QGuestAllocator *alloc)
{
    static uint8_t src[0x3000], got[0x3000];
    uint32_t lkey, rkey;
    uint64_t v;
    PfnicCqe c;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * FAULT_RESUME status 1 fails the waiting work as an unmapped page
 * (LOC_PROT_ERR, REM_ACCESS_ERR), and other QPs go on meanwhile.
 * MR_CLEAR, a QP reset or destroy and a context stop leave nothing
 * waiting and no report behind: the next miss raises an event of its own.
 */
static void test_verbs_driver_fault_errors(void *obj, void *data,
                                           QGuestAllocator *alloc)
{
    uint32_t lkey, rkey, key3, key4, a[PFNIC_CMD_ARGS];
    TestEqe ev;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * One event per fault episode: work that needs entries already reported
 * waits for that report (a write's report serves a read, not the other
 * way round). FAULT_RESUME wakes exactly the work waiting for an entry in
 * its range. An event that finds the event queue full is held, not
 * dropped: it is queued once the driver consumes an entry, and forgotten
 * if its work goes first.
 */
static void test_verbs_driver_fault_dedupe(void *obj, void *data,
                                           QGuestAllocator *alloc)
{
    static uint8_t src[0x4000], got[0x3000];
    uint32_t lkey, rkey;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

static void register_pfnic_faults_tests(void)
{
    pfnic_add_test("verbs/fault-commands", test_verbs_fault_commands,
                   "contexts=4", NULL);
    pfnic_add_test("verbs/driver-faults", test_verbs_driver_faults,
                   "contexts=4,ats=off,pasid=off,pri=off", NULL);
    pfnic_add_test("verbs/driver-fault-errors", test_verbs_driver_fault_errors,
                   "contexts=4,ats=off,pasid=off,pri=off", NULL);
    pfnic_add_test("verbs/driver-fault-dedupe", test_verbs_driver_fault_dedupe,
                   "contexts=4,ats=off,pasid=off,pri=off", NULL);
    pfnic_add_test("verbs/implicit-table", test_verbs_implicit_table,
                   "contexts=4,ats=off,pasid=off,pri=off,table-entries=8",
                   NULL);
}

libqos_init(register_pfnic_faults_tests);
