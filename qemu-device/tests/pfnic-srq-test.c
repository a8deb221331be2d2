/*
 * QTest for pfnic: shared receive queues (ABI 1.11).
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "pfnic-test.h"

#define SRQ_VA          0x30000000ULL   /* MR 3 of srq_setup(): PD 9 */

/* The pages of srq_setup()'s MR 3 */
#define SV_PAGES        { DATA_PAGE(24), DATA_PAGE(25) }

static uint32_t srq_modify(uint32_t srqn, uint32_t limit)
{
    uint32_t a[PFNIC_CMD_ARGS] = { srqn, limit };

    return cmd(PFNIC_CMD_SRQ_MODIFY, a, PFNIC_CMD_ARGS);
}

/* SRQ_CREATE, MODIFY, QUERY, DESTROY and QP_CREATE a13/a14: every status */
static void test_verbs_srq_commands(void *obj, void *data,
                                    QGuestAllocator *alloc)
{
    uint32_t a[PFNIC_CMD_ARGS];

    pfnic_qos_start(obj, alloc);
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
                                   PFNIC_QP_FLAG_SRQ | 8, 1), ==,
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
    pfnic_qos_end();
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
    const uint64_t sv_pages[2] = SV_PAGES;
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
static void test_verbs_srq(void *obj, void *data,
                           QGuestAllocator *alloc)
{
    const uint64_t sv_pages[2] = SV_PAGES;
    static uint8_t src[0x1000], got[0x1000];
    uint32_t lkey, rkey, qkey, a[PFNIC_CMD_ARGS], rec[2];
    PfnicCqe c;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * Doorbells of an SRQ: a tail past the queue or moving back, the page of
 * another context, an SRQ that does not exist, and RQ_DB for a QP with an
 * SRQ are guest errors that change nothing (the QP stays in RTS); the SRQ
 * works on.
 */
static void test_verbs_srq_doorbells(void *obj, void *data,
                                     QGuestAllocator *alloc)
{
    uint32_t lkey, rkey, qkey, a[PFNIC_CMD_ARGS];

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

static void register_pfnic_srq_tests(void)
{
    pfnic_add_test("verbs/srq-commands", test_verbs_srq_commands,
                   "contexts=4", NULL);
    pfnic_add_test("verbs/srq", test_verbs_srq,
                   "contexts=4,ats=off,pasid=off,pri=off", NULL);
    pfnic_add_test("verbs/srq-doorbells", test_verbs_srq_doorbells,
                   "contexts=4,ats=off,pasid=off,pri=off", NULL);
}

libqos_init(register_pfnic_srq_tests);
