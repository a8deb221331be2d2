/*
 * QTest for pfnic: translation tables the driver fills (ABI 1.8): MR_SET
 * with a table, MTT_WRITE and MTT_INVALIDATE, the table space, work
 * through tables, invalid entries, tables beside PASIDs; DMA MRs (ABI
 * 1.20); key bases, fast registration and SEND_WITH_INV (ABI 1.21).
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "pfnic-test.h"

/* MR_SET, MTT_WRITE and MTT_INVALIDATE: every status */
static void test_verbs_table_commands(void *obj, void *data,
                                      QGuestAllocator *alloc)
{
    uint64_t e[3] = {
        cpu_to_le64(DATA_PAGE(1) | MTT_RW),
        cpu_to_le64(DATA_PAGE(2) | PFNIC_MTT_VALID | PFNIC_MTT_READ),
        cpu_to_le64(DATA_PAGE(3)),
    };
    uint32_t key, a[PFNIC_CMD_ARGS];

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * table-entries bounds every table together: NO_SPACE beyond it, and the
 * entries come back at MR_CLEAR and at a reset.
 */
static void test_verbs_table_space(void *obj, void *data,
                                   QGuestAllocator *alloc)
{
    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * Loopback through tables: RDMA WRITE and READ, SEND/RECV and atomics
 * across pages that are scattered in guest memory, from offsets that are
 * not page aligned.
 */
static void test_verbs_tables(void *obj, void *data,
                              QGuestAllocator *alloc)
{
    static uint8_t src[0x3000], got[0x3000];
    uint32_t lkey, rkey;
    uint64_t v;
    PfnicCqe c;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * What a table refuses fails as an unmapped page: an invalid entry
 * (never written, or invalidated), an entry without the access, locally
 * LOC_PROT_ERR and remotely REM_ACCESS_ERR; no page request is sent, and
 * the remote QP is untouched. An MTT_WRITE refused for a bad entry
 * changes nothing.
 */
static void test_verbs_table_faults(void *obj, void *data,
                                    QGuestAllocator *alloc)
{
    static uint8_t src[0x2000], got[0x2000];
    uint64_t bad[2] = {
        cpu_to_le64(DATA_PAGE(30) | MTT_RW),
        cpu_to_le64(DATA_PAGE(31) | MTT_RW | 0x10),
    };
    uint32_t lkey, rkey, key, a[PFNIC_CMD_ARGS];

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * A context with a PASID may use table MRs too: they move data without
 * any IOMMU, and a PREFETCH of one succeeds at once.
 */
static void test_verbs_table_pasid(void *obj, void *data,
                                   QGuestAllocator *alloc)
{
    static uint8_t src[0x1000], got[0x1000];
    PfnicDesc d = {
        .opcode = PFNIC_OP_PREFETCH, .flags = PFNIC_PREFETCH_WRITE,
        .dst = cpu_to_le64(TL_VA), .len = cpu_to_le64(TL_LEN),
    };
    uint32_t lkey, rkey;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * DMA MRs (ABI 1.20): a key over the device's own DMA addresses, for a
 * context without a PASID (the driver's kernel memory). MR_SET refuses it
 * with other flags, on demand, or for a context with a PASID or stopped;
 * work through it moves the bytes at the addresses the WQEs name, and a
 * range check still holds.
 */
static void test_verbs_dma_mr(void *obj, void *data, QGuestAllocator *alloc)
{
    static uint8_t src[0x1800], got[0x1800];
    uint32_t lkey, rkey, key;
    PfnicCqe c;

    pfnic_qos_start(obj, alloc);
    map_bars();
    table_counts_reset();
    /* Context 3 is not started: no DMA MR for it. */
    g_assert_cmpint(mr_set_flags(5, 3, 7, ALL_ACCESS, 0, UINT64_MAX,
                                 PFNIC_MR_FLAG_DMA, NULL), ==,
                    PFNIC_CMD_BAD_ARG);
    table_pair_start();
    g_assert_cmpint(mr_set_flags(5, 3, 7, ALL_ACCESS, 0, UINT64_MAX,
                                 PFNIC_MR_FLAG_DMA, NULL), ==,
                    PFNIC_CMD_BAD_ARG);
    /* Alone, and never on demand */
    g_assert_cmpint(mr_set_flags(1, 1, 7, ALL_ACCESS, 0, UINT64_MAX,
                                 PFNIC_MR_FLAG_DMA | PFNIC_MR_FLAG_TABLE,
                                 NULL), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mr_set_flags(1, 1, 7, ALL_ACCESS, 0, 0x1000,
                                 PFNIC_MR_FLAG_DMA | PFNIC_MR_FLAG_DM,
                                 NULL), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(mr_set_flags(1, 1, 7, PFNIC_ACCESS_ON_DEMAND, 0,
                                 UINT64_MAX, PFNIC_MR_FLAG_DMA, NULL), ==,
                    PFNIC_CMD_BAD_ARG);
    /* The whole DMA space for context 1, two pages for context 2 */
    g_assert_cmpint(mr_set_flags(1, 1, 7, PFNIC_ACCESS_LOCAL_WRITE, 0,
                                 UINT64_MAX, PFNIC_MR_FLAG_DMA, &lkey), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(mr_set_flags(2, 2, 7, ALL_ACCESS, DATA_PAGE(30),
                                 0x2000, PFNIC_MR_FLAG_DMA, &rkey), ==,
                    PFNIC_CMD_OK);
    g_assert_cmphex(lkey, !=, rkey);
    table_pair_connect();

    /* RDMA WRITE from one guest address to another, across a page */
    pattern(src, sizeof(src), 9);
    memwrite(DATA_PAGE(40) + 0x10, src, sizeof(src));
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x71, DATA_PAGE(40) + 0x10,
               sizeof(src), lkey, DATA_PAGE(30) + 0x700, rkey, 0);
    c = table_cqe(1, 0x71, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.byte_len, ==, sizeof(src));
    memread(DATA_PAGE(30) + 0x700, got, sizeof(got));
    g_assert_cmpmem(got, sizeof(got), src, sizeof(src));

    /* SEND into a receive buffer through the two DMA keys */
    pattern(src, 0x300, 10);
    memwrite(DATA_PAGE(41), src, 0x300);
    table_recv(2, 3, 0x72, DATA_PAGE(31), 0x400, rkey);
    table_post(1, 2, PFNIC_WR_SEND, 0x73, DATA_PAGE(41), 0x300, lkey, 0, 0,
               0);
    table_cqe(1, 0x73, PFNIC_WC_SUCCESS);
    c = table_cqe(2, 0x72, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.byte_len, ==, 0x300);
    memread(DATA_PAGE(31), got, 0x300);
    g_assert_cmpmem(got, 0x300, src, 0x300);

    /* Past the end of context 2's range: refused, nothing written */
    memset(got, 0x5a, 0x100);
    memwrite(DATA_PAGE(32), got, 0x100);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x74, DATA_PAGE(40), 0x100, lkey,
               DATA_PAGE(32) - 0x80, rkey, 0);
    table_cqe(1, 0x74, PFNIC_WC_REM_ACCESS_ERR);
    memread(DATA_PAGE(32), src, 0x100);
    g_assert_cmpmem(src, 0x100, got, 0x100);
    qp_reconnect(2, 3);
    /* An RDMA READ into a DMA key without LOCAL_WRITE: nothing lands */
    g_assert_cmpint(mr_set_flags(3, 1, 7, 0, 0, UINT64_MAX,
                                 PFNIC_MR_FLAG_DMA, &key), ==, PFNIC_CMD_OK);
    memwrite(DATA_PAGE(42), got, 0x100);
    table_post(1, 2, PFNIC_WR_RDMA_READ, 0x75, DATA_PAGE(42), 0x100, key,
               DATA_PAGE(30), rkey, 0);
    table_cqe(1, 0x75, PFNIC_WC_LOC_PROT_ERR);
    memread(DATA_PAGE(42), src, 0x100);
    g_assert_cmpmem(src, 0x100, got, 0x100);

    /* Never through ATS or PRI */
    assert_no_ats_pri();
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    pfnic_qos_end();
}

/*
 * A DMA MR, or a FAST MR (ABI 1.21), needs a context without a PASID: one
 * with a PASID gets BAD_ARG.
 */
static void test_verbs_dma_mr_pasid(void *obj, void *data,
                                    QGuestAllocator *alloc)
{
    pfnic_qos_start(obj, alloc);
    map_bars();
    enable_sva_caps();
    start_ctx(1, RING_ADDR);
    g_assert_cmpint(mr_set_flags(1, 1, 7, ALL_ACCESS, 0, UINT64_MAX,
                                 PFNIC_MR_FLAG_DMA, NULL), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(fast_mr(1, 1, 7, 1, NULL), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    pfnic_qos_end();
}

/*
 * Fast registration (ABI 1.21): QP 2 (context 1) and QP 3 (context 2) of
 * table_pair_start(), each context with a DMA MR over everything, and
 * context 1 with FAST MRs.
 */
#define FAST_ACCESS     (PFNIC_ACCESS_LOCAL_WRITE | \
                         PFNIC_ACCESS_REMOTE_WRITE | \
                         PFNIC_ACCESS_REMOTE_READ)

/*
 * table_pair_start(), and a DMA MR over everything in each context: MR 1
 * of context 1 (LOCAL_WRITE, @lkey) and MR 2 of context 2 (every access,
 * @rkey)
 */
static void fast_pair_start(uint32_t *lkey, uint32_t *rkey)
{
    table_pair_start();
    g_assert_cmpint(mr_set_flags(1, 1, 7, PFNIC_ACCESS_LOCAL_WRITE, 0,
                                 UINT64_MAX, PFNIC_MR_FLAG_DMA, lkey), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(mr_set_flags(2, 2, 7, ALL_ACCESS, 0, UINT64_MAX,
                                 PFNIC_MR_FLAG_DMA, rkey), ==,
                    PFNIC_CMD_OK);
}

/* QP @qpn (2 or 3) failed a WQE: it is in ERR; connect it again. */
static void fast_reconnect(uint32_t qpn)
{
    g_assert_cmpint(qp_state(qpn), ==, PFNIC_QPS_ERR);
    qp_reconnect(qpn, qpn ^ 1);
}

/*
 * Post local WQE @w on QP @qpn (2: context and CQ 1; 3: 2): its CQE has
 * @status and the opcode the WQE's makes; a failed QP is connected again.
 */
static PfnicCqe fast_expect_on(uint32_t qpn, PfnicWqe w, uint8_t status)
{
    PfnicCqe c;

    table_post_wqe(qpn - 1, qpn, &w);
    c = table_cqe(qpn - 1, le64_to_cpu(w.wr_id), status);
    g_assert_cmpint(c.opcode, ==, w.opcode == PFNIC_WR_REG_MR ?
                    PFNIC_WC_REG_MR : PFNIC_WC_LOCAL_INV);
    g_assert_cmpint(c.byte_len, ==, 0);
    if (status != PFNIC_WC_SUCCESS) {
        fast_reconnect(qpn);
    }
    return c;
}

static PfnicCqe fast_expect(PfnicWqe w, uint8_t status)
{
    return fast_expect_on(2, w, status);
}

/* An RDMA WRITE of @len bytes from QP 3 to @raddr with @rkey: @status */
static void fast_write_in(uint64_t wr_id, uint64_t laddr, uint32_t len,
                          uint32_t lkey, uint64_t raddr, uint32_t rkey,
                          uint8_t status)
{
    table_post(2, 3, PFNIC_WR_RDMA_WRITE, wr_id, laddr, len, lkey, raddr,
               rkey, 0);
    table_cqe(2, wr_id, status);
    if (status != PFNIC_WC_SUCCESS) {
        fast_reconnect(3);
    }
}

/*
 * MR_SET with FAST: alone, access 0, address 0, whole pages up to 512,
 * for a started context without a PASID; its table counts against
 * table-entries (8 here); MR_QUERY as for any MR, not the table commands
 * nor MR_MODIFY. MR 3 (PD 7) and MR 4 (PD 8) of context 1, four pages
 * each, use up the entries.
 */
static void fast_mr_set_checks(uint32_t *fkey, uint32_t *other)
{
    uint32_t a[PFNIC_CMD_ARGS] = { 3, 7, FAST_ACCESS };
    static const struct {
        uint32_t ctx, access, flags;
        uint64_t addr, len;
    } bad[] = {
        { 3, 0, PFNIC_MR_FLAG_FAST, 0, 0x1000 },     /* not started */
        { 1, 0, PFNIC_MR_FLAG_FAST | PFNIC_MR_FLAG_TABLE, 0, 0x1000 },
        { 1, 0, PFNIC_MR_FLAG_FAST | PFNIC_MR_FLAG_DMA, 0, 0x1000 },
        { 1, 0, PFNIC_MR_FLAG_FAST | PFNIC_MR_FLAG_DM, 0, 0x1000 },
        { 1, 0, PFNIC_MR_FLAG_FAST | PFNIC_MR_FLAG_FAULT, 0, 0x1000 },
        { 1, 0, PFNIC_MR_FLAG_FAST | 1u << 5, 0, 0x1000 },
        { 1, PFNIC_ACCESS_LOCAL_WRITE, PFNIC_MR_FLAG_FAST, 0, 0x1000 },
        { 1, 0, PFNIC_MR_FLAG_FAST, 0x1000, 0x1000 },
        { 1, 0, PFNIC_MR_FLAG_FAST, 0, 0 },
        { 1, 0, PFNIC_MR_FLAG_FAST, 0, 0x1800 },
        { 1, 0, PFNIC_MR_FLAG_FAST, 0, (PFNIC_FAST_MAX_PAGES + 1) * 4096ULL },
        { 1, 0, PFNIC_MR_FLAG_FAST, 0, UINT64_MAX },
    };

    for (int i = 0; i < ARRAY_SIZE(bad); i++) {
        g_assert_cmpint(mr_set_flags(3, bad[i].ctx, 7, bad[i].access,
                                     bad[i].addr, bad[i].len, bad[i].flags,
                                     NULL), ==, PFNIC_CMD_BAD_ARG);
    }
    g_assert_cmpint(fast_mr(3, 1, 7, 4, fkey), ==, PFNIC_CMD_OK);
    g_assert_cmpint(fast_mr(4, 1, 8, PFNIC_FAST_MAX_PAGES, NULL), ==,
                    PFNIC_CMD_NO_SPACE);
    g_assert_cmpint(fast_mr(4, 1, 8, 4, other), ==, PFNIC_CMD_OK);
    g_assert_cmpint(fast_mr(5, 1, 7, 1, NULL), ==, PFNIC_CMD_NO_SPACE);
    g_assert_cmpint(cmd(PFNIC_CMD_MR_MODIFY, a, 3), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(cmd(PFNIC_CMD_MR_QUERY, a, 1), ==, PFNIC_CMD_OK);
    g_assert_cmpint(mtt_write(3, 0, 1, MTT_SRC), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(mtt_invalidate(3, 0, 1), ==, PFNIC_CMD_BAD_STATE);
}

/*
 * REG_MRs of the FAST MR of @fkey (free, a table of 4 pages) that are
 * wrong in themselves (LOC_QP_OP_ERR: each field, a page list entry with
 * low bits set) or name no MR the QP may register (LOC_PROT_ERR: not a
 * FAST MR, @other of another PD, a list the device cannot read): none
 * registers it. Returns the one that does.
 */
static PfnicWqe fast_reg_refusals(uint32_t fkey, uint32_t other,
                                  uint32_t lkey, uint32_t rkey)
{
    const uint64_t two[2] = { DATA_PAGE(3), DATA_PAGE(4) };
    const struct {
        size_t off;
        uint64_t val;
        int size;
    } malformed[] = {
        { offsetof(PfnicWqe, num_sge), 1, 1 },
        { offsetof(PfnicWqe, reg.access), PFNIC_ACCESS_ON_DEMAND, 4 },
        { offsetof(PfnicWqe, reg.access), 0x10, 4 },
        { offsetof(PfnicWqe, reg.length), 0, 8 },
        { offsetof(PfnicWqe, reg.iova), UINT64_MAX - 0xf, 8 },  /* wraps */
        { offsetof(PfnicWqe, reg.pages), 1, 4 },                /* < span */
        { offsetof(PfnicWqe, reg.pages), 0, 4 },
        { offsetof(PfnicWqe, reg.pages), 5, 4 },                /* > table */
        { offsetof(PfnicWqe, reg.pages), PFNIC_FAST_MAX_PAGES + 1, 4 },
        { offsetof(PfnicWqe, reg.reserved0), 1, 4 },
        { offsetof(PfnicWqe, reg.reserved1), 1ULL << 63, 8 },
        { offsetof(PfnicWqe, reg.pbl), FAST_PBL + 4, 8 },   /* unaligned */
    };
    uint32_t key = key_next(fkey, 7);
    PfnicWqe ok = reg_mr_wqe(0x90, key, 0x5000000ff0ULL, 0x20, FAST_ACCESS,
                             FAST_PBL, 2), w;
    uint64_t bad = cpu_to_le64(DATA_PAGE(6) | 0x800);

    /* Five valid entries: only the WQE's fields are wrong. */
    for (int i = 0; i < 5; i++) {
        fast_pbl(FAST_PBL + i * 16, two, 2);
    }
    for (int i = 0; i < ARRAY_SIZE(malformed); i++) {
        uint64_t v = cpu_to_le64(malformed[i].val);

        w = ok;
        w.wr_id = cpu_to_le64(0x91 + i);
        memcpy((uint8_t *)&w + malformed[i].off, &v, malformed[i].size);
        fast_expect(w, PFNIC_WC_LOC_QP_OP_ERR);
    }
    memwrite(FAST_PBL + 8, &bad, sizeof(bad));
    w = ok;
    w.wr_id = cpu_to_le64(0xa0);
    fast_expect(w, PFNIC_WC_LOC_QP_OP_ERR);
    fast_pbl(FAST_PBL, two, 2);

    fast_expect(reg_mr_wqe(0xa1, lkey, 0x5000000ff0ULL, 0x20, FAST_ACCESS,
                           FAST_PBL, 2), PFNIC_WC_LOC_PROT_ERR);
    fast_expect(reg_mr_wqe(0xa2, key_next(other, 1), 0x5000000ff0ULL, 0x20,
                           FAST_ACCESS, FAST_PBL, 2), PFNIC_WC_LOC_PROT_ERR);
    w = ok;
    w.wr_id = cpu_to_le64(0xa3);
    w.reg.pbl = cpu_to_le64(0xfffff0000000ULL);
    fast_expect(w, PFNIC_WC_LOC_PROT_ERR);
    /* None of them registered it: the key names nothing. */
    fast_write_in(0xa4, DATA_PAGE(22), 0x10, rkey, 0x5000000ff0ULL, key,
                  PFNIC_WC_REM_ACCESS_ERR);
    return ok;
}

/*
 * Fast registration (ABI 1.21) in loopback: a FAST MR's key names nothing
 * until a REG_MR registers it over a page list (three pages out of order,
 * from an unaligned iova); then SEND from it, RDMA WRITE into it and RDMA
 * READ into and from it move the bytes of those pages, and its range
 * bounds it. LOCAL_INV frees it; a REG_MR of a registered MR, the key
 * with its old low byte after a registration with a new one, and
 * malformed WQEs are refused; MR_CLEAR takes it and its table.
 */
static void test_verbs_fast_reg(void *obj, void *data, QGuestAllocator *alloc)
{
    static uint8_t src[0x2000], got[0x2000];
    const uint64_t iova = 0x7000000234ULL, iova2 = 0x9000000ff0ULL;
    uint32_t lkey, rkey, fkey, other, k1, k2;
    uint64_t fp[3], fp2[2];
    PfnicWqe w;
    PfnicCqe c;

    pfnic_qos_start(obj, alloc);
    map_bars();
    /* Pages out of order, in the test's guest memory */
    fp[0] = DATA_PAGE(5);
    fp[1] = DATA_PAGE(2);
    fp[2] = DATA_PAGE(9);
    fp2[0] = DATA_PAGE(12);
    fp2[1] = DATA_PAGE(7);
    fast_pair_start(&lkey, &rkey);
    fast_mr_set_checks(&fkey, &other);
    table_pair_connect();

    /* Free: its key names nothing. */
    fast_write_in(0x80, DATA_PAGE(22), 0x10, rkey, iova, fkey,
                  PFNIC_WC_REM_ACCESS_ERR);

    /* REG_MR, and right behind it a SEND from the new key (0x1e00 bytes) */
    k1 = key_next(fkey, 1);
    fast_pbl(FAST_PBL, fp, 3);
    pattern(src, sizeof(src), 21);
    table_rw(fp, iova, iova + 0x100, src, 0x1e00, true);
    table_recv(2, 3, 0x300, DATA_PAGE(20), 0x2000, rkey);
    w = reg_mr_wqe(0x81, k1, iova, 0x2000, FAST_ACCESS, FAST_PBL, 3);
    table_post_wqe(1, 2, &w);
    table_post(1, 2, PFNIC_WR_SEND, 0x82, iova + 0x100, 0x1e00, k1, 0, 0, 0);
    c = table_cqe(1, 0x81, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_REG_MR);
    c = table_cqe(1, 0x82, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_SEND);
    c = table_cqe(2, 0x300, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.byte_len, ==, 0x1e00);
    memread(DATA_PAGE(20), got, 0x1e00);
    g_assert_cmpmem(got, 0x1e00, src, 0x1e00);

    /* RDMA WRITE into it from QP 3, across its three pages */
    pattern(src, sizeof(src), 22);
    memwrite(DATA_PAGE(22), src, 0x1800);
    fast_write_in(0x83, DATA_PAGE(22), 0x1800, rkey, iova + 0x700, k1,
                  PFNIC_WC_SUCCESS);
    table_rw(fp, iova, iova + 0x700, got, 0x1800, false);
    g_assert_cmpmem(got, 0x1800, src, 0x1800);
    /* RDMA READ into it by QP 2, then out of it by QP 3 */
    pattern(src, sizeof(src), 23);
    memwrite(DATA_PAGE(24), src, 0x1000);
    table_post(1, 2, PFNIC_WR_RDMA_READ, 0x84, iova + 0x10, 0x1000, k1,
               DATA_PAGE(24), rkey, 0);
    table_cqe(1, 0x84, PFNIC_WC_SUCCESS);
    table_rw(fp, iova, iova + 0x10, got, 0x1000, false);
    g_assert_cmpmem(got, 0x1000, src, 0x1000);
    table_post(2, 3, PFNIC_WR_RDMA_READ, 0x85, DATA_PAGE(26), 0x1000, rkey,
               iova + 0x10, k1, 0);
    table_cqe(2, 0x85, PFNIC_WC_SUCCESS);
    memread(DATA_PAGE(26), got, 0x1000);
    g_assert_cmpmem(got, 0x1000, src, 0x1000);
    /* Its range: past the end, refused */
    fast_write_in(0x86, DATA_PAGE(22), 0x20, rkey, iova + 0x1ff0, k1,
                  PFNIC_WC_REM_ACCESS_ERR);

    /* Registered: no REG_MR until LOCAL_INV, which needs no SGE */
    k2 = key_next(fkey, 2);
    fast_pbl(FAST_PBL, fp2, 2);
    fast_expect(reg_mr_wqe(0x87, k2, iova2, 0x20, FAST_ACCESS, FAST_PBL, 2),
                PFNIC_WC_LOC_PROT_ERR);
    w = local_inv_wqe(0x88, k1);
    w.num_sge = 1;
    fast_expect(w, PFNIC_WC_LOC_QP_OP_ERR);
    fast_expect(local_inv_wqe(0x89, k1), PFNIC_WC_SUCCESS);
    fast_write_in(0x8a, DATA_PAGE(22), 0x10, rkey, iova + 0x700, k1,
                  PFNIC_WC_REM_ACCESS_ERR);
    /* Again, with the next low byte: the old one names nothing. */
    fast_expect(reg_mr_wqe(0x8b, k2, iova2, 0x20, FAST_ACCESS, FAST_PBL, 2),
                PFNIC_WC_SUCCESS);
    memread(DATA_PAGE(22), src, 0x20);
    fast_write_in(0x8c, DATA_PAGE(22), 0x20, rkey, iova2, k2,
                  PFNIC_WC_SUCCESS);
    memread(DATA_PAGE(12) + 0xff0, got, 0x10);
    memread(DATA_PAGE(7), got + 0x10, 0x10);
    g_assert_cmpmem(got, 0x20, src, 0x20);
    fast_write_in(0x8d, DATA_PAGE(22), 0x20, rkey, iova2, k1,
                  PFNIC_WC_REM_ACCESS_ERR);
    fast_write_in(0x8e, DATA_PAGE(22), 0x20, rkey, iova + 0x700, k1,
                  PFNIC_WC_REM_ACCESS_ERR);
    /* LOCAL_INV: the key exactly, of a FAST MR of the QP's PD */
    fast_expect(local_inv_wqe(0x8f, k1), PFNIC_WC_LOC_PROT_ERR);
    fast_expect(local_inv_wqe(0x90, lkey), PFNIC_WC_LOC_PROT_ERR);
    fast_expect(local_inv_wqe(0x91, other), PFNIC_WC_LOC_PROT_ERR);
    /* Freed (twice: a free one is fine), work through it fails. */
    fast_expect(local_inv_wqe(0x92, k2), PFNIC_WC_SUCCESS);
    fast_expect(local_inv_wqe(0x93, k2), PFNIC_WC_SUCCESS);
    memset(src, 0x5a, 0x20);
    memwrite(DATA_PAGE(12) + 0xff0, src, 0x10);
    memwrite(DATA_PAGE(7), src + 0x10, 0x10);
    fast_write_in(0x94, DATA_PAGE(22), 0x20, rkey, iova2, k2,
                  PFNIC_WC_REM_ACCESS_ERR);
    memread(DATA_PAGE(12) + 0xff0, got, 0x10);
    memread(DATA_PAGE(7), got + 0x10, 0x10);
    g_assert_cmpmem(got, 0x20, src, 0x20);
    /* And LOCAL_INV right before a SEND through the key: in order */
    fast_pbl(FAST_PBL, fp, 3);
    fast_expect(reg_mr_wqe(0x95, k1, iova, 0x2000, FAST_ACCESS, FAST_PBL,
                           3), PFNIC_WC_SUCCESS);
    w = local_inv_wqe(0x96, k1);
    table_post_wqe(1, 2, &w);
    table_post(1, 2, PFNIC_WR_SEND, 0x97, iova, 0x10, k1, 0, 0, 0);
    table_cqe(1, 0x96, PFNIC_WC_SUCCESS);
    table_cqe(1, 0x97, PFNIC_WC_LOC_PROT_ERR);
    fast_reconnect(2);

    /* Malformed REG_MRs register nothing; then a good one does. */
    w = fast_reg_refusals(fkey, other, lkey, rkey);
    w.wr_id = cpu_to_le64(0xaf);
    fast_expect(w, PFNIC_WC_SUCCESS);
    fast_write_in(0xb0, DATA_PAGE(22), 0x20, rkey, 0x5000000ff0ULL,
                  le32_to_cpu(w.reg.key), PFNIC_WC_SUCCESS);
    /* MR_CLEAR while registered: the key goes, the table's entries too */
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_CLEAR, 3), ==, PFNIC_CMD_OK);
    fast_write_in(0xb1, DATA_PAGE(22), 0x20, rkey, 0x5000000ff0ULL,
                  le32_to_cpu(w.reg.key), PFNIC_WC_REM_ACCESS_ERR);
    g_assert_cmpint(fast_mr(3, 1, 7, 4, NULL), ==, PFNIC_CMD_OK);
    assert_no_ats_pri();
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    pfnic_qos_end();
}

/*
 * A SEND_WITH_INV of [@laddr, + @len) from QP 2 asking QP 3 to invalidate
 * @key, into a receive buffer at DATA_PAGE(24) under @rkey: QP 2 completes
 * @status; QP 3's receive, on success, says it invalidated @key.
 */
static void send_inv(uint64_t wr_id, uint64_t laddr, uint32_t len,
                     uint32_t lkey, uint32_t key, uint32_t rkey,
                     uint8_t status)
{
    PfnicWqe w = send_inv_wqe(wr_id, laddr, len, lkey, key);
    PfnicCqe c;

    table_recv(2, 3, wr_id + 0x100, DATA_PAGE(24), 0x2000, rkey);
    table_post_wqe(1, 2, &w);
    c = table_cqe(1, wr_id, status);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_SEND);
    if (status != PFNIC_WC_SUCCESS) {
        /* The receiver failed it: LOC_PROT_ERR there, both in ERR */
        c = table_cqe(2, wr_id + 0x100, PFNIC_WC_LOC_PROT_ERR);
        g_assert_cmpint(c.wc_flags & PFNIC_WC_WITH_INV, ==, 0);
        fast_reconnect(3);
        fast_reconnect(2);
        return;
    }
    c = table_cqe(2, wr_id + 0x100, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_RECV);
    g_assert_cmpint(c.byte_len, ==, len);
    g_assert_cmphex(c.wc_flags, ==, PFNIC_WC_WITH_INV);
    g_assert_cmphex(le32_to_cpu(c.imm_data), ==, key);
}

/*
 * SEND_WITH_INV (ABI 1.21) in loopback: QP 2 (context 1) asks QP 3
 * (context 2) to invalidate the key of QP 3's FAST MR, which QP 3
 * registered: the receive has the bytes, WITH_INV and the key, and the
 * MR is free (a WRITE through the key fails; invalidating it again is
 * fine). A key that does not name exactly a FAST MR of QP 3's context
 * and PD fails the receive (LOC_PROT_ERR) and the send (REM_INV_REQ_ERR).
 */
static void test_verbs_send_inv(void *obj, void *data, QGuestAllocator *alloc)
{
    static uint8_t src[0x1800], got[0x1800];
    uint32_t lkey, rkey, fkey, other, k1;
    uint64_t fp[2];

    pfnic_qos_start(obj, alloc);
    map_bars();
    fp[0] = DATA_PAGE(6);
    fp[1] = DATA_PAGE(3);
    fast_pair_start(&lkey, &rkey);
    g_assert_cmpint(fast_mr(3, 2, 7, 2, &fkey), ==, PFNIC_CMD_OK);
    g_assert_cmpint(fast_mr(4, 2, 8, 1, &other), ==, PFNIC_CMD_OK);
    table_pair_connect();

    /* QP 3 registers its MR; QP 2 writes through the key. */
    k1 = key_next(fkey, 0x80);
    fast_pbl(FAST_PBL, fp, 2);
    fast_expect_on(3, reg_mr_wqe(0x60, k1, 0x4000000100ULL, 0x1000,
                                 FAST_ACCESS, FAST_PBL, 2),
                   PFNIC_WC_SUCCESS);
    pattern(src, sizeof(src), 31);
    memwrite(DATA_PAGE(20), src, sizeof(src));
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x61, DATA_PAGE(20), 0x100, lkey,
               0x4000000f80ULL, k1, 0);
    table_cqe(1, 0x61, PFNIC_WC_SUCCESS);
    table_rw(fp, 0x4000000100ULL, 0x4000000f80ULL, got, 0x100, false);
    g_assert_cmpmem(got, 0x100, src, 0x100);

    /* SEND_WITH_INV of its key: the bytes land, the MR is free. */
    send_inv(0x62, DATA_PAGE(20), sizeof(src), lkey, k1, rkey,
             PFNIC_WC_SUCCESS);
    memread(DATA_PAGE(24), got, sizeof(got));
    g_assert_cmpmem(got, sizeof(got), src, sizeof(src));
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x63, DATA_PAGE(20), 0x100, lkey,
               0x4000000f80ULL, k1, 0);
    table_cqe(1, 0x63, PFNIC_WC_REM_ACCESS_ERR);
    fast_reconnect(2);
    send_inv(0x64, 0, 0, lkey, k1, rkey, PFNIC_WC_SUCCESS);

    /* Not exactly a FAST MR of QP 3's context and PD: both fail. */
    send_inv(0x65, DATA_PAGE(20), 0x10, lkey, key_next(k1, 1), rkey,
             PFNIC_WC_REM_INV_REQ_ERR);
    send_inv(0x66, DATA_PAGE(20), 0x10, lkey, rkey, rkey,
             PFNIC_WC_REM_INV_REQ_ERR);
    send_inv(0x67, DATA_PAGE(20), 0x10, lkey, other, rkey,
             PFNIC_WC_REM_INV_REQ_ERR);
    send_inv(0x68, DATA_PAGE(20), 0x10, lkey, lkey, rkey,
             PFNIC_WC_REM_INV_REQ_ERR);
    /* Registered again, and invalidated again */
    fast_expect_on(3, reg_mr_wqe(0x69, key_next(k1, 1), 0x4000000100ULL,
                                 0x1000, FAST_ACCESS, FAST_PBL, 2),
                   PFNIC_WC_SUCCESS);
    send_inv(0x6a, DATA_PAGE(20), 0x10, lkey, key_next(k1, 1), rkey,
             PFNIC_WC_SUCCESS);
    assert_no_ats_pri();
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    pfnic_qos_end();
}

/*
 * Rounds of a full MR table. With 4096 random keys two share their upper
 * 24 bits about four times in ten; with the seed below, a device that
 * draws keys without looking at their bases does so in the first round.
 */
#define KEY_BASE_ROUNDS 2

static void *key_bases_before(GString *cmd_line, void *arg)
{
    g_string_append(cmd_line, " -seed 6");
    return pfnic_qos_before(cmd_line, arg);
}

/*
 * Key bases: the upper 24 bits of a key (key >> 8) are never 0 and never
 * those of another valid MR's key, so a FAST MR (ABI 1.21) may change
 * its key's low byte without meeting another MR's key.
 */
static void test_verbs_key_bases(void *obj, void *data,
                                 QGuestAllocator *alloc)
{
    pfnic_qos_start(obj, alloc);
    map_bars();
    for (int round = 0; round < KEY_BASE_ROUNDS; round++) {
        g_autoptr(GHashTable) bases = g_hash_table_new(NULL, NULL);

        for (uint32_t i = 0; i < PFNIC_MAX_MRS; i++) {
            uint32_t key;

            g_assert_cmpint(mr_set(i, i % 4, 7, 0, 0x10000000, 0x1000,
                                   &key), ==, PFNIC_CMD_OK);
            g_assert_cmphex(key >> 8, !=, 0);
            g_assert_false(g_hash_table_contains(bases,
                                                 GUINT_TO_POINTER(key >> 8)));
            g_hash_table_add(bases, GUINT_TO_POINTER(key >> 8));
        }
        /* Every entry is in use: the next round starts from a reset. */
        reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    }
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    pfnic_qos_end();
}

/* Every argument register holds 0xffffffff, whatever the last command left. */
static void fill_cmd_args(void)
{
    for (int i = 0; i < PFNIC_CMD_ARGS; i++) {
        reg_write(PFNIC_REG_CMD_ARG + 4 * i, UINT32_MAX);
    }
}

/*
 * A command reads its own structure's words and no more (docs/verbs.md): the
 * driver writes only those, so the others hold anything.
 */
static void test_verbs_cmd_own_words(void *obj, void *data,
                                     QGuestAllocator *alloc)
{
    uint32_t a[PFNIC_CMD_ARGS] = {
        2, 1, 7, ALL_ACCESS, 0x10000000, 0, 0x2000, 0, PFNIC_MR_FLAG_TABLE,
    };
    uint32_t q[PFNIC_CMD_ARGS] = { 2 };

    pfnic_qos_start(obj, alloc);
    map_bars();
    start_ctx_no_pasid(1, RING_ADDR);

    fill_cmd_args();
    g_assert_cmpint(cmd(PFNIC_CMD_MR_SET, a, 9), ==, PFNIC_CMD_OK);
    g_assert_cmphex(a[0], !=, 0);
    fill_cmd_args();
    g_assert_cmpint(cmd(PFNIC_CMD_MR_QUERY, q, 1), ==, PFNIC_CMD_OK);
    /* its results, a0..a13, are all written: a new MR's counters are zero */
    for (int i = 0; i < 14; i++) {
        g_assert_cmphex(q[i], ==, 0);
    }
    fill_cmd_args();
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_CLEAR, 2), ==, PFNIC_CMD_OK);
    /* and the index alone decides: the MR is gone */
    fill_cmd_args();
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_CLEAR, 2), ==, PFNIC_CMD_BAD_STATE);
    pfnic_qos_end();
}

static void register_pfnic_tables_tests(void)
{
    pfnic_add_test("verbs/table-commands", test_verbs_table_commands,
                   "contexts=4,ats=off,pasid=off,pri=off", NULL);
    pfnic_add_test("verbs/cmd-own-words", test_verbs_cmd_own_words,
                   "contexts=4,ats=off,pasid=off,pri=off", NULL);
    pfnic_add_test("verbs/table-space", test_verbs_table_space,
                   "contexts=4,table-entries=16", NULL);
    pfnic_add_test("verbs/tables", test_verbs_tables,
                   "contexts=4,ats=off,pasid=off,pri=off", NULL);
    pfnic_add_test("verbs/table-faults", test_verbs_table_faults,
                   "contexts=4,ats=off,pasid=off,pri=off", NULL);
    pfnic_add_test("verbs/table-pasid", test_verbs_table_pasid,
                   "contexts=4", NULL);
    pfnic_add_test("verbs/dma-mr", test_verbs_dma_mr,
                   "contexts=4,ats=off,pasid=off,pri=off", NULL);
    pfnic_add_test("verbs/dma-fast-mr-pasid", test_verbs_dma_mr_pasid,
                   "contexts=4", NULL);
    pfnic_add_test("verbs/key-bases", test_verbs_key_bases, "contexts=4",
                   key_bases_before);
    pfnic_add_test("verbs/fast-reg", test_verbs_fast_reg,
                   "contexts=4,ats=off,pasid=off,pri=off,table-entries=8",
                   NULL);
    pfnic_add_test("verbs/send-inv", test_verbs_send_inv,
                   "contexts=4,ats=off,pasid=off,pri=off", NULL);
}

libqos_init(register_pfnic_tables_tests);
