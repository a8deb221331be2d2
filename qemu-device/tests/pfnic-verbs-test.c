/*
 * QTest for pfnic: the verbs objects (docs/verbs.md): the limits, MRs and
 * their keys, CQs and QPs with the QP state table, the event queue, and
 * the doorbells.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "pfnic-test.h"

static void test_verbs_limits(void *obj, void *data,
                              QGuestAllocator *alloc)
{
    pfnic_qos_start(obj, alloc);
    map_bars();
    g_assert_cmphex(reg_read(PFNIC_REG_VERSION), ==, PFNIC_VERSION_VALUE);
    g_assert_cmphex(reg_read(PFNIC_REG_FW_VERSION), ==, PFNIC_FW_VERSION_VALUE);
    /*
     * ABI 1.21 (fast registration), model 1.21.0; 1.20's DMA MRs, 1.19's
     * UD QPs, 1.18's MR_MODIFY, 1.17's QP_SET_DMAC, 1.16's
     * Ethernet queues (CAPS bit 11 ETH), 1.14's PORT_CHANGE events, 1.13's
     * CAPS bit 10 DM
     */
    g_assert_cmphex(reg_read(PFNIC_REG_VERSION), ==, 0x00010015);
    g_assert_cmphex(reg_read(PFNIC_REG_FW_VERSION), ==, 0x01150000);
    g_assert_cmphex(PFNIC_MR_FLAG_FAST, ==, 1u << 4);
    g_assert_cmpint(PFNIC_FAST_MAX_PAGES, ==, 512);
    g_assert_cmpint(PFNIC_WR_LOCAL_INV, ==, 7);
    g_assert_cmpint(PFNIC_WR_SEND_WITH_INV, ==, 9);
    g_assert_cmphex(PFNIC_WC_WITH_INV, ==, 8);
    g_assert_cmphex(PFNIC_WR_REG_MR, ==, 0x20);
    g_assert_cmpint(PFNIC_WC_LOCAL_INV, ==, 6);
    g_assert_cmpint(PFNIC_WC_REG_MR, ==, 10);
    g_assert_cmphex(PFNIC_MR_FLAG_DMA, ==, 1u << 3);
    g_assert_cmphex(PFNIC_QP_FLAG_UD, ==, 1u << 2);
    g_assert_cmphex(PFNIC_WC_GRH, ==, 1);
    g_assert_cmphex(PFNIC_CMD_MR_MODIFY, ==, 0x07);
    g_assert_cmphex(PFNIC_CMD_QP_SET_DMAC, ==, 0x24);
    g_assert_cmphex(PFNIC_CAPS_ETH, ==, 1u << 11);
    g_assert_true(reg_read(PFNIC_REG_CAPS) & PFNIC_CAPS_ETH);
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
    pfnic_qos_end();
}

static void test_verbs_mr(void *obj, void *data,
                          QGuestAllocator *alloc)
{
    uint32_t key, key2, a[PFNIC_CMD_ARGS];
    bool renewed = false;

    pfnic_qos_start(obj, alloc);
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

    /*
     * MR_MODIFY (ABI 1.18): a valid MR gets another PD and access; whether
     * it is on demand cannot change. (That its key keeps working is the
     * guest suite's check, through traffic.)
     */
    a[0] = 4095;
    a[1] = 2;
    a[2] = PFNIC_ACCESS_LOCAL_WRITE | PFNIC_ACCESS_REMOTE_WRITE;
    g_assert_cmpint(cmd(PFNIC_CMD_MR_MODIFY, a, 3), ==, PFNIC_CMD_OK);
    a[0] = 4095;
    a[1] = 2;
    a[2] = PFNIC_ACCESS_LOCAL_WRITE | PFNIC_ACCESS_ON_DEMAND;
    g_assert_cmpint(cmd(PFNIC_CMD_MR_MODIFY, a, 3), ==, PFNIC_CMD_BAD_ARG);
    a[0] = 4095;
    a[1] = 2;
    a[2] = 0x10;
    g_assert_cmpint(cmd(PFNIC_CMD_MR_MODIFY, a, 3), ==, PFNIC_CMD_BAD_ARG);
    a[0] = 4096;
    g_assert_cmpint(cmd(PFNIC_CMD_MR_MODIFY, a, 3), ==, PFNIC_CMD_BAD_INDEX);
    a[0] = 5;
    a[1] = 1;
    a[2] = 0;
    g_assert_cmpint(cmd(PFNIC_CMD_MR_MODIFY, a, 3), ==, PFNIC_CMD_BAD_STATE);

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
    pfnic_qos_end();
}

static void test_verbs_cq_qp(void *obj, void *data,
                             QGuestAllocator *alloc)
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

    pfnic_qos_start(obj, alloc);
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
    /*
     * Flag bit 3 is unknown (bit 1, SRQ, is test_verbs_srq_commands', bit
     * 2, UD, pfnic-ud-test's)
     */
    g_assert_cmpint(qp_create(2, 0, 1, 1, 1, 4, 8), ==, PFNIC_CMD_BAD_ARG);
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
    pfnic_qos_end();
}

static void test_verbs_eq(void *obj, void *data,
                          QGuestAllocator *alloc)
{
    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * User doorbells: checked against the context whose page is written; a
 * tail past the queue puts the QP in ERR with a QP_FATAL event, signalled
 * on EQ_VECTOR.
 */
static void test_verbs_doorbells(void *obj, void *data,
                                 QGuestAllocator *alloc)
{
    uint32_t pba, object, a[PFNIC_CMD_ARGS];
    uint8_t type, owner;

    pfnic_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * x-inject-destroy-busy=2: every second destroy is refused as busy and the
 * object stays (the driver then quarantines it); other commands do not
 * count, and a destroy asked again goes.
 */
static void test_verbs_destroy_busy(void *obj, void *data,
                                    QGuestAllocator *alloc)
{
    pfnic_qos_start(obj, alloc);
    map_bars();
    g_assert_cmpint(cq_create(1, 0, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create(2, 0, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cmd1(PFNIC_CMD_CQ_DESTROY, 1), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cmd1(PFNIC_CMD_CQ_DESTROY, 2), ==, PFNIC_CMD_BUSY);
    /* Still there: it cannot be created again. */
    g_assert_cmpint(cq_create(2, 0, 4), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(cmd1(PFNIC_CMD_CQ_DESTROY, 2), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create(2, 0, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cmd1(PFNIC_CMD_CQ_DESTROY, 2), ==, PFNIC_CMD_BUSY);
    pfnic_qos_end();
}

static void register_pfnic_verbs_tests(void)
{
    pfnic_add_test("verbs/limits", test_verbs_limits, NULL, NULL);
    pfnic_add_test("verbs/mr", test_verbs_mr, NULL, NULL);
    pfnic_add_test("verbs/cq-qp", test_verbs_cq_qp, NULL, NULL);
    pfnic_add_test("verbs/eq", test_verbs_eq, NULL, NULL);
    pfnic_add_test("verbs/destroy-busy", test_verbs_destroy_busy,
                   "x-inject-destroy-busy=2", NULL);
    pfnic_add_test("verbs/doorbells", test_verbs_doorbells, "contexts=4", NULL);
}

libqos_init(register_pfnic_verbs_tests);
