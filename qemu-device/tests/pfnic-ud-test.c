/*
 * QTest for pfnic: UD QPs (device ABI 1.19, docs/verbs.md "UD QPs"):
 * datagrams between two contexts of one device and between two devices
 * on the wire, their GRHs, Q_Keys, and the datagrams that are lost.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "pfnic-test.h"

#define QKEY_A          0x11111111
#define QKEY_B          0x22222222
#define GSI_QKEY        0x80010000

/* A UD QP @qpn (queues of 16) of @ctx on CQ @cq, in RTS with @qkey */
static void ud_qp(uint32_t qpn, uint32_t ctx, uint32_t cq, uint32_t qkey)
{
    static const uint32_t states[] = {
        PFNIC_QPS_INIT, PFNIC_QPS_RTR, PFNIC_QPS_RTS,
    };

    g_assert_cmpint(qp_create(qpn, ctx, 7, cq, cq, 4, PFNIC_QP_FLAG_UD), ==,
                    PFNIC_CMD_OK);
    for (int i = 0; i < ARRAY_SIZE(states); i++) {
        uint32_t a[PFNIC_CMD_ARGS] = {
            qpn, states[i], 0, qkey, [8] = 0x123456,
        };

        g_assert_cmpint(cmd(PFNIC_CMD_QP_MODIFY, a, PFNIC_CMD_ARGS), ==,
                        PFNIC_CMD_OK);
    }
}

/*
 * Post a signaled UD send (@op) of [@laddr, + @len) to QP @dqpn with
 * @qkey; @grh: a GRH of the IB kind to GID @dgid, or @dest_ip's.
 */
static void ud_post(uint32_t ctx, uint32_t qpn, uint8_t op, uint64_t wr_id,
                    uint64_t laddr, uint32_t len, uint32_t lkey,
                    uint32_t dqpn, uint32_t qkey, uint8_t ah_flags,
                    uint32_t dest_ip, const uint8_t *dmac)
{
    uint16_t slot = sq_next[qpn]++;
    PfnicWqe w = {
        .opcode = op, .flags = PFNIC_SEND_SIGNALED, .num_sge = 1,
        .imm_data = 0x78563412, .wr_id = cpu_to_le64(wr_id),
        .ud = {
            .remote_qpn = cpu_to_le32(dqpn),
            .remote_qkey = cpu_to_le32(qkey),
            .dest_ip = cpu_to_le32(dest_ip),
            .traffic_class = 0x20, .hop_limit = 9, .ah_flags = ah_flags,
        },
        .sge[0] = {
            .addr = cpu_to_le64(laddr), .length = cpu_to_le32(len),
            .lkey = cpu_to_le32(lkey),
        },
    };

    for (int i = 0; i < 16; i++) {
        w.ud.dgid[i] = 0xf0 + i;
    }
    if (dmac) {
        memcpy(w.ud.dmac, dmac, 6);
    }
    memwrite(SQ_ADDR + qpn * 0x10000 + (slot % 16) * PFNIC_WQE_SIZE, &w,
             sizeof(w));
    verbs_db(ctx, PFNIC_DB_SQ, qpn << 16 | (uint16_t)(slot + 1));
}

static void assert_no_recv(uint32_t cqn)
{
    clock_step(10 * 1000 * 1000);
    assert_no_cqe(cqn);
}

/* UD QP @qpn of @ctx destroyed and made again on CQ @cq, in RTS */
static void ud_qp_again(uint32_t qpn, uint32_t ctx, uint32_t cq,
                        uint32_t qkey)
{
    g_assert_cmpint(cmd1(PFNIC_CMD_QP_DESTROY, qpn), ==, PFNIC_CMD_OK);
    sq_next[qpn] = rq_next[qpn] = 0;
    ud_qp(qpn, ctx, cq, qkey);
}

/*
 * A datagram of 16 bytes from QP 2 (context 1) into a receive WQE of QP 3
 * (context 2) at [@addr, + @len), which fails the receiver with @status
 * (its QP enters ERR): the sender completes it as sent.
 */
static void ud_receiver_fails(uint32_t lkey, uint32_t rkey, uint64_t addr,
                              uint32_t len, uint64_t send_id,
                              uint64_t recv_id, uint8_t status)
{
    table_recv(2, 3, recv_id, addr, len, rkey);
    ud_post(1, 2, PFNIC_WR_SEND, send_id, TL_VA, 0x10, lkey, 3, QKEY_B, 0, 0,
            NULL);
    table_cqe(1, send_id, PFNIC_WC_SUCCESS);
    table_cqe(2, recv_id, status);
    g_assert_cmpint(qp_state(3), ==, PFNIC_QPS_ERR);
    g_assert_cmpint(qp_state(2), ==, PFNIC_QPS_RTS);
}

/*
 * Loopback: UD QP 2 (context 1, CQ 1) and UD QP 3 (context 2, CQ 2) over
 * translation tables. Datagrams with and without a GRH and immediate;
 * lost ones (another Q_Key, no receive WQE, larger than the MTU, to an RC
 * QP) complete as sent; a receive buffer too short fails the receiver
 * only; RDMA on a UD QP is LOC_QP_OP_ERR.
 */
static void test_ud_loopback(void *obj, void *data, QGuestAllocator *alloc)
{
    uint32_t lkey, rkey, a[PFNIC_CMD_ARGS];
    static uint8_t src[0x1000], got[0x1000];
    uint8_t grh[PFNIC_GRH_LEN];
    PfnicWqe w;
    PfnicCqe c;

    pfnic_qos_start(obj, alloc);
    map_bars();
    table_pair_start();
    lkey = table_mr(1, 1, TL_VA, TL_LEN, tl_pages, 4);
    rkey = table_mr(2, 2, TR_VA, TR_LEN, tr_pages, 4);
    g_assert_cmpint(cq_create(1, 1, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create(2, 2, 4), ==, PFNIC_CMD_OK);
    ud_qp(2, 1, 1, QKEY_A);
    ud_qp(3, 2, 2, QKEY_B);
    g_assert_cmpint(qp_query(2, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[0], ==, PFNIC_QPS_RTS);

    /* A datagram across a page of the receive buffer, with an IB GRH */
    pattern(src, sizeof(src), 3);
    table_rw(tl_pages, TL_VA, TL_VA + 0x100, src, 0x700, true);
    table_recv(2, 3, 0x300, TR_VA + 0xfe0, 0x800, rkey);
    ud_post(1, 2, PFNIC_WR_SEND, 0x200, TL_VA + 0x100, 0x700, lkey, 3,
            QKEY_B, PFNIC_UD_AH_GRH, 0, NULL);
    c = table_cqe(1, 0x200, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_SEND);
    c = table_cqe(2, 0x300, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_RECV);
    g_assert_cmpint(c.byte_len, ==, PFNIC_GRH_LEN + 0x700);
    g_assert_cmpint(c.wc_flags, ==, PFNIC_WC_GRH);
    g_assert_cmpint(c.qp_num, ==, 3);
    g_assert_cmpint(c.src_qp, ==, 2);
    table_rw(tr_pages, TR_VA, TR_VA + 0xfe0, grh, sizeof(grh), false);
    g_assert_cmphex(grh[0], ==, 0x62);          /* IPVer 6, TClass 0x20 */
    g_assert_cmphex(grh[1], ==, 0x00);
    g_assert_cmpint(grh[4] << 8 | grh[5], ==, 12 + 8 + 0x700 + 4);
    g_assert_cmphex(grh[6], ==, 0x1b);
    g_assert_cmpint(grh[7], ==, 9);
    g_assert_cmphex(grh[8], ==, 0xf0);
    g_assert_cmphex(grh[39], ==, 0xff);
    table_rw(tr_pages, TR_VA, TR_VA + 0xfe0 + PFNIC_GRH_LEN, got, 0x700,
             false);
    g_assert_cmpmem(got, 0x700, src, 0x700);

    /* With immediate and no GRH: the 40 bytes are skipped, untouched. */
    memset(got, 0xaa, 0x100);
    table_rw(tr_pages, TR_VA, TR_VA + 0x2000, got, 0x100, true);
    table_recv(2, 3, 0x301, TR_VA + 0x2000, 0x100, rkey);
    ud_post(1, 2, PFNIC_WR_SEND_WITH_IMM, 0x201, TL_VA, 0x10, lkey, 3,
            QKEY_B, 0, 0, NULL);
    table_cqe(1, 0x201, PFNIC_WC_SUCCESS);
    c = table_cqe(2, 0x301, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.byte_len, ==, PFNIC_GRH_LEN + 0x10);
    g_assert_cmpint(c.wc_flags, ==, PFNIC_WC_WITH_IMM);
    g_assert_cmphex(c.imm_data, ==, 0x78563412);
    table_rw(tr_pages, TR_VA, TR_VA + 0x2000, got, 0x50, false);
    for (int i = 0; i < PFNIC_GRH_LEN; i++) {
        g_assert_cmphex(got[i], ==, 0xaa);
    }
    table_rw(tl_pages, TL_VA, TL_VA, src, 0x10, false);
    g_assert_cmpmem(got + PFNIC_GRH_LEN, 0x10, src, 0x10);

    /* Lost: another Q_Key (refused), then no receive WQE (dropped) */
    table_recv(2, 3, 0x302, TR_VA + 0x2000, 0x100, rkey);
    ud_post(1, 2, PFNIC_WR_SEND, 0x202, TL_VA, 0x10, lkey, 3, QKEY_A, 0, 0,
            NULL);
    table_cqe(1, 0x202, PFNIC_WC_SUCCESS);
    assert_no_recv(2);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[8], ==, 1);
    /* A controlled Q_Key is the sender's own: QKEY_A again, refused */
    ud_post(1, 2, PFNIC_WR_SEND, 0x203, TL_VA, 0x10, lkey, 3,
            PFNIC_UD_QKEY_CONTROLLED, 0, 0, NULL);
    table_cqe(1, 0x203, PFNIC_WC_SUCCESS);
    assert_no_recv(2);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[8], ==, 2);
    /* Larger than the MTU: not sent, no error; to an RC QP: lost */
    ud_post(1, 2, PFNIC_WR_SEND, 0x204, TL_VA, PFNIC_UD_MAX_MSG + 1, lkey,
            3, QKEY_B, 0, 0, NULL);
    table_cqe(1, 0x204, PFNIC_WC_SUCCESS);
    g_assert_cmpint(qp_create(4, 2, 7, 2, 2, 4, 0), ==, PFNIC_CMD_OK);
    qp_connect(4, 2, 7);
    ud_post(1, 2, PFNIC_WR_SEND, 0x205, TL_VA, 0x10, lkey, 4, QKEY_B, 0, 0,
            NULL);
    table_cqe(1, 0x205, PFNIC_WC_SUCCESS);
    assert_no_recv(2);
    /* The receive WQE posted above takes the next one. */
    ud_post(1, 2, PFNIC_WR_SEND, 0x206, TL_VA, 0x10, lkey, 3, QKEY_B, 0, 0,
            NULL);
    table_cqe(1, 0x206, PFNIC_WC_SUCCESS);
    table_cqe(2, 0x302, PFNIC_WC_SUCCESS);
    ud_post(1, 2, PFNIC_WR_SEND, 0x207, TL_VA, 0x10, lkey, 3, QKEY_B, 0, 0,
            NULL);
    table_cqe(1, 0x207, PFNIC_WC_SUCCESS);
    assert_no_recv(2);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[12], ==, 1);              /* for want of a WQE */

    /* RDMA on a UD QP, an AH flag the device lacks: the sender fails. */
    ud_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x208, TL_VA, 0x10, lkey, 3, QKEY_B,
            0, 0, NULL);
    table_cqe(1, 0x208, PFNIC_WC_LOC_QP_OP_ERR);
    g_assert_cmpint(qp_state(2), ==, PFNIC_QPS_ERR);
    ud_qp_again(2, 1, 1, QKEY_A);
    ud_post(1, 2, PFNIC_WR_SEND, 0x209, TL_VA, 0x10, lkey, 3, QKEY_B, 0x4,
            0, NULL);
    table_cqe(1, 0x209, PFNIC_WC_LOC_QP_OP_ERR);
    /*
     * ABI 1.21: LOCAL_INV, REG_MR and SEND_WITH_INV are RC's, where these
     * (of a key that names no FAST MR) would be LOC_PROT_ERR, or a
     * datagram to QP 0 that is lost.
     */
    ud_qp_again(2, 1, 1, QKEY_A);
    w = local_inv_wqe(0x210, lkey);
    table_post_wqe(1, 2, &w);
    table_cqe(1, 0x210, PFNIC_WC_LOC_QP_OP_ERR);
    ud_qp_again(2, 1, 1, QKEY_A);
    fast_pbl(FAST_PBL, tl_pages, 1);
    w = reg_mr_wqe(0x211, lkey, TL_VA, 0x10, 0, FAST_PBL, 1);
    table_post_wqe(1, 2, &w);
    table_cqe(1, 0x211, PFNIC_WC_LOC_QP_OP_ERR);
    ud_qp_again(2, 1, 1, QKEY_A);
    w = send_inv_wqe(0x212, TL_VA, 0x10, lkey, rkey);
    table_post_wqe(1, 2, &w);
    table_cqe(1, 0x212, PFNIC_WC_LOC_QP_OP_ERR);

    /* A receive buffer too short for GRH and payload: the receiver fails. */
    ud_qp_again(2, 1, 1, QKEY_A);
    ud_receiver_fails(lkey, rkey, TR_VA, PFNIC_GRH_LEN + 0xf, 0x20a, 0x303,
                      PFNIC_WC_LOC_LEN_ERR);

    /* A receive page its table refuses: the receiver fails, not the sender. */
    ud_qp_again(3, 2, 2, QKEY_B);
    g_assert_cmpint(mtt_invalidate(2, 3, 1), ==, PFNIC_CMD_OK);
    ud_receiver_fails(lkey, rkey, TR_VA + 0x3000, 0x100, 0x20b, 0x304,
                      PFNIC_WC_LOC_PROT_ERR);

    /* QP_CREATE takes no other flag; a UD QP's send PSN has 24 bits. */
    g_assert_cmpint(qp_create(5, 1, 7, 1, 1, 4, 0x8), ==, PFNIC_CMD_BAD_ARG);
    memset(a, 0, sizeof(a));
    a[0] = 2;
    a[1] = PFNIC_QPS_RTS;
    a[8] = 0x1000000;
    g_assert_cmpint(cmd(PFNIC_CMD_QP_MODIFY, a, PFNIC_CMD_ARGS), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    pfnic_qos_end();
}

/*
 * The wire: UD QP 2 on A and 3 on B, through tables. A datagram to a MAC
 * the port does not know is lost to an ARP request; then datagrams go,
 * with the receiver's GRH the packet's IPv4 header; a MAC in the WQE is
 * used as is; another Q_Key is refused at B.
 */
static void test_ud_wire(void *obj, void *data, QGuestAllocator *alloc)
{
    uint64_t pa[2] = { DATA_PAGE(30), DATA_PAGE(31) };
    uint64_t pb[2] = { DATA_PAGE(40), DATA_PAGE(41) };
    static uint8_t src[0x400], got[0x400];
    uint32_t key_a, key_b, a[PFNIC_CMD_ARGS];
    uint8_t grh[PFNIC_GRH_LEN];
    PfnicCqe c;

    wire_qos_start(obj, alloc);
    table_counts_reset();
    wire_ctx_no_pasid(1, IP_B);
    key_b = table_mr(1, 1, TR_VA, 0x2000, pb, 2);
    g_assert_cmpint(cq_create(3, 1, 4), ==, PFNIC_CMD_OK);
    ud_qp(3, 1, 3, QKEY_B);
    wire_ctx_no_pasid(0, IP_A);
    key_a = table_mr(1, 1, 0x10000000, 0x2000, pa, 2);
    g_assert_cmpint(cq_create(1, 1, 4), ==, PFNIC_CMD_OK);
    ud_qp(2, 1, 1, QKEY_A);

    pattern(src, sizeof(src), 9);
    table_rw(pa, 0x10000000, 0x10000000, src, sizeof(src), true);
    use_nic(1);
    table_recv(1, 3, 0x300, TR_VA, 0x1000, key_b);
    table_recv(1, 3, 0x301, TR_VA + 0x1000, 0x1000, key_b);
    use_nic(0);
    /* B's MAC unknown: an ARP request, and the datagram is lost. */
    ud_post(1, 2, PFNIC_WR_SEND, 0x200, 0x10000000, 0x100, key_a, 3,
            QKEY_B, PFNIC_UD_AH_GRH | PFNIC_UD_AH_IPV4, IP_B, NULL);
    table_cqe(1, 0x200, PFNIC_WC_SUCCESS);
    g_assert_cmpint(port_counter(PFNIC_PORT_ARP_REQUESTS), ==, 1);
    clock_step(10 * 1000 * 1000);
    ud_post(1, 2, PFNIC_WR_SEND_WITH_IMM, 0x201, 0x10000000, sizeof(src),
            key_a, 3, QKEY_B, PFNIC_UD_AH_GRH | PFNIC_UD_AH_IPV4, IP_B,
            NULL);
    table_cqe(1, 0x201, PFNIC_WC_SUCCESS);
    use_nic(1);
    c = wait_cqe_ms(3, 0, 100);
    cq_seen[3]++;
    g_assert_cmphex(c.wr_id, ==, 0x300);
    g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.byte_len, ==, PFNIC_GRH_LEN + sizeof(src));
    g_assert_cmpint(c.wc_flags, ==, PFNIC_WC_GRH | PFNIC_WC_WITH_IMM);
    g_assert_cmphex(c.imm_data, ==, 0x78563412);
    g_assert_cmpint(c.src_qp, ==, 2);
    g_assert_cmpint(c.qp_num, ==, 3);
    table_rw(pb, TR_VA, TR_VA, grh, sizeof(grh), false);
    for (int i = 0; i < 20; i++) {
        g_assert_cmphex(grh[i], ==, 0);
    }
    g_assert_cmphex(grh[20], ==, 0x45);
    g_assert_cmphex(grh[21], ==, 0x20);         /* TOS: the traffic class */
    g_assert_cmpint(grh[28], ==, 9);            /* TTL: the hop limit */
    g_assert_cmpint(grh[29], ==, 17);
    g_assert_cmphex(ldl_be_p(grh + 32), ==, IP_A);
    g_assert_cmphex(ldl_be_p(grh + 36), ==, IP_B);
    g_assert_cmphex(ip_csum(grh + 20, 20), ==, 0);
    table_rw(pb, TR_VA, TR_VA + PFNIC_GRH_LEN, got, sizeof(got), false);
    g_assert_cmpmem(got, sizeof(got), src, sizeof(src));

    /* Another Q_Key: refused at B; then a MAC given in the WQE */
    use_nic(0);
    ud_post(1, 2, PFNIC_WR_SEND, 0x202, 0x10000000, 0x10, key_a, 3, QKEY_A,
            PFNIC_UD_AH_GRH | PFNIC_UD_AH_IPV4, IP_B, NULL);
    table_cqe(1, 0x202, PFNIC_WC_SUCCESS);
    use_nic(1);
    assert_no_recv(3);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[8], ==, 1);
    use_nic(0);
    ud_post(1, 2, PFNIC_WR_SEND, 0x203, 0x10000000, 0x10, key_a, 3, QKEY_B,
            PFNIC_UD_AH_GRH | PFNIC_UD_AH_IPV4, IP_B, mac_b);
    table_cqe(1, 0x203, PFNIC_WC_SUCCESS);
    g_assert_cmpint(port_counter(PFNIC_PORT_ARP_REQUESTS), ==, 1);
    use_nic(1);
    c = wait_cqe_ms(3, 1, 100);
    g_assert_cmphex(c.wr_id, ==, 0x301);
    g_assert_cmpint(c.byte_len, ==, PFNIC_GRH_LEN + 0x10);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_MALFORMED), ==, 0);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_BAD_ICRC), ==, 0);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_NO_QP), ==, 0);
    pfnic_qos_end();
}

/*
 * The special QPs (ABI 1.20): QPNs 0 and 1 are UD QPs only. QP 1 (the
 * GSI's, Q_Key 0x80010000) takes datagrams to QPN 1 and names itself as
 * their source when it sends.
 */
static void test_ud_special_qps(void *obj, void *data,
                                QGuestAllocator *alloc)
{
    uint32_t lkey, rkey;
    PfnicCqe c;

    pfnic_qos_start(obj, alloc);
    map_bars();
    table_pair_start();
    lkey = table_mr(1, 1, TL_VA, TL_LEN, tl_pages, 4);
    rkey = table_mr(2, 2, TR_VA, TR_LEN, tr_pages, 4);
    g_assert_cmpint(cq_create(1, 1, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create(2, 2, 4), ==, PFNIC_CMD_OK);
    /* RC QPs cannot have the special numbers. */
    g_assert_cmpint(qp_create(0, 1, 7, 1, 1, 4, 0), ==, PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(qp_create(1, 1, 7, 1, 1, 4, 0), ==, PFNIC_CMD_BAD_INDEX);
    /*
     * Both with the GSI's Q_Key, as two ports' QP1s: a Q_Key with bit 31
     * set in a work request means the sender's own.
     */
    ud_qp(1, 2, 2, GSI_QKEY);
    ud_qp(3, 1, 1, GSI_QKEY);

    /* To QPN 1 with its Q_Key: received, from QP 3 */
    table_recv(2, 1, 0x400, TR_VA, 0x200, rkey);
    ud_post(1, 3, PFNIC_WR_SEND, 0x401, TL_VA, 0x100, lkey, 1, GSI_QKEY, 0,
            0, NULL);
    table_cqe(1, 0x401, PFNIC_WC_SUCCESS);
    c = table_cqe(2, 0x400, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.qp_num, ==, 1);
    g_assert_cmpint(c.src_qp, ==, 3);
    g_assert_cmpint(c.byte_len, ==, PFNIC_GRH_LEN + 0x100);

    /* From QP 1 back to QP 3: its source is QPN 1. */
    table_recv(1, 3, 0x402, TL_VA + 0x1000, 0x200, lkey);
    ud_post(2, 1, PFNIC_WR_SEND, 0x403, TR_VA + 0x1000, 0x20, rkey, 3,
            GSI_QKEY, 0, 0, NULL);
    table_cqe(2, 0x403, PFNIC_WC_SUCCESS);
    c = table_cqe(1, 0x402, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.qp_num, ==, 3);
    g_assert_cmpint(c.src_qp, ==, 1);

    /* Another Q_Key for QP 1: lost */
    table_recv(2, 1, 0x404, TR_VA, 0x200, rkey);
    ud_post(1, 3, PFNIC_WR_SEND, 0x405, TL_VA, 0x10, lkey, 1, QKEY_B, 0, 0,
            NULL);
    table_cqe(1, 0x405, PFNIC_WC_SUCCESS);
    assert_no_recv(2);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    pfnic_qos_end();
}

static void register_pfnic_ud_tests(void)
{
    pfnic_add_test("ud/loopback", test_ud_loopback,
                   "contexts=4,ats=off,pasid=off,pri=off", NULL);
    pfnic_add_test("ud/special-qps", test_ud_special_qps,
                   "contexts=4,ats=off,pasid=off,pri=off", NULL);
    pfnic_add_wire_test("ud/wire", test_ud_wire, "ats=off,pasid=off,pri=off",
                        "ats=off,pasid=off,pri=off", NULL);
}

libqos_init(register_pfnic_ud_tests);
