/*
 * QTest for pfnic: RC work requests without an IOMMU (docs/verbs.md):
 * their error statuses, connections (the peer rule, a peer that is not
 * ready), refused remote accesses, zero-length messages, CQ overflow,
 * the device clock and completion timestamps.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "pfnic-test.h"

#define TEST_ACK_NS             (4096 << TEST_ACK_TIMEOUT)

#define TEST_UNANSWERED_NS      (8 * TEST_ACK_NS)

/* Each row: a WQE and the status it completes with. */
static void test_verbs_errors(void *obj, void *data,
                              QGuestAllocator *alloc)
{
    uint32_t key, a[PFNIC_CMD_ARGS];
    PfnicCqe c;

    pfnic_qos_start(obj, alloc);
    map_bars();
    key = verbs_setup(0);

    /* Bad opcode (8: none, 9 is SEND_WITH_INV since ABI 1.21) */
    post_wqe(SQ_ADDR + 2 * 0x10000, 0, 8, 0, 1, 1, 0x10000000, 8, key);
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
    pfnic_qos_end();
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

/*
 * RC connections: a QP that is not the destination's connected peer is
 * refused (RETRY_EXC_ERR; the destination counts it and is untouched), and
 * so is a QP created later at the peer's number. The peer itself is
 * accepted.
 */
static void test_verbs_peer(void *obj, void *data,
                            QGuestAllocator *alloc)
{
    uint32_t key, a[PFNIC_CMD_ARGS];

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * ABI 1.15: a loopback sender whose destination does not answer (not yet
 * RTR) asks again after each local ACK timeout, retry_cnt times. A peer
 * that becomes ready inside that window gets the work request at once;
 * one that never does fails the sender RETRY_EXC_ERR after retry_cnt + 1
 * timeouts and no sooner, however often something wakes the sender early;
 * timeout 0 waits for ever.
 */
static void test_verbs_unready_peer(void *obj, void *data,
                                    QGuestAllocator *alloc)
{
    uint32_t acc = PFNIC_ACCESS_REMOTE_WRITE;
    uint32_t key, a[PFNIC_CMD_ARGS];
    uint64_t word;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * Refused remote accesses count against the destination's context, and
 * against the MR when the key names one; the first queues one
 * ACCESS_ERROR event, and the next one only after CTX_QUERY read the count.
 */
static void test_verbs_access_errors(void *obj, void *data,
                                     QGuestAllocator *alloc)
{
    uint32_t key, object, a[PFNIC_CMD_ARGS];
    uint8_t type, owner;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * Zero-length messages need no translation, so they succeed without an
 * IOMMU: a SEND consumes a receive WQE (RECV CQE with src_qp), an
 * RDMA_WRITE_WITH_IMM delivers its immediate, an unsignaled SEND moves
 * the send head without a CQE, and a solicited-only arm fires on the
 * solicited message. A receive doorbell wakes a sender in an RNR wait.
 */
static void test_verbs_zero_length(void *obj, void *data,
                                   QGuestAllocator *alloc)
{
    uint32_t key, object, a[PFNIC_CMD_ARGS], rec[2];
    uint8_t type, owner;
    PfnicCqe c;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/* A CQ of 2 entries that nobody consumes: the third CQE overflows it. */
static void test_verbs_cq_overflow(void *obj, void *data,
                                   QGuestAllocator *alloc)
{
    uint32_t key, object, pba;
    uint8_t type, owner;

    pfnic_qos_start(obj, alloc);
    map_bars();
    pba = msix_enable_masked();
    eq_setup(4);
    key = verbs_setup(7);
    g_assert_cmpint(cq_create(3, 1, 1), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(4, 1, 7, 3, 3, 4, PFNIC_QP_FLAG_SIGNAL_ALL), ==,
                    PFNIC_CMD_OK);
    qp_connect(4, 4, 7);
    for (int i = 0; i < 4; i++) {
        post_wqe(SQ_ADDR + 4 * 0x10000, i, 8, 0, 0x500 + i, 0, 0, 0, key);
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
    pfnic_qos_end();
}

/* --- completion timestamps (ABI 1.12) ---------------------------------- */

/*
 * The device clock in every context's doorbell page (enabled or not):
 * the pages agree, it follows the virtual clock, a reset does not restart
 * it, and it is read-only; the other offsets of a page read 0.
 */
static void test_verbs_clock(void *obj, void *data,
                             QGuestAllocator *alloc)
{
    uint64_t t0, t1, t2, t3, q;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * CQ_CREATE a7 (ABI 1.12): bit 0 TIMESTAMP, others BAD_ARG. A TIMESTAMP
 * CQ (of 4 entries: the loop below wraps it three times) takes QP 2's
 * CQEs, 64 bytes each, stamped between the clock read before the work
 * was posted and after its CQE was seen, in order; QP 3's CQ beside it
 * keeps 32-byte CQEs. Through tables, so that data moves.
 */
static void test_verbs_timestamps(void *obj, void *data,
                                  QGuestAllocator *alloc)
{
    static uint8_t src[0x800], got[0x800];
    uint32_t a[PFNIC_CMD_ARGS], lkey, rkey, n1 = 0, n2 = 0;
    uint64_t last = 0, ts;
    uint8_t fill[4 * PFNIC_CQE_TS_SIZE];
    PfnicCqe c;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

static void register_pfnic_rc_tests(void)
{
    pfnic_add_test("verbs/errors", test_verbs_errors, "contexts=4", NULL);
    pfnic_add_test("verbs/peer", test_verbs_peer, "contexts=4", NULL);
    pfnic_add_test("verbs/unready-peer", test_verbs_unready_peer, NULL, NULL);
    pfnic_add_test("verbs/access-errors", test_verbs_access_errors,
                   "contexts=4", NULL);
    pfnic_add_test("verbs/zero-length", test_verbs_zero_length,
                   "contexts=4", NULL);
    pfnic_add_test("verbs/cq-overflow", test_verbs_cq_overflow,
                   "contexts=4", NULL);
    pfnic_add_test("verbs/clock", test_verbs_clock, "contexts=4", NULL);
    pfnic_add_test("verbs/timestamps", test_verbs_timestamps,
                   "contexts=4,ats=off,pasid=off,pri=off", NULL);
}

libqos_init(register_pfnic_rc_tests);
