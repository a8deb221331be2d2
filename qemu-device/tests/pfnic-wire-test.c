/*
 * QTest for pfnic: the wire (docs/wire.md): two pfnics on a QEMU hub,
 * RoCEv2 between them: ARP, the PSNs, ACKs and NAKs, retransmission,
 * loss, port events, SRQs, device memory and timestamps over the wire.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "pfnic-test.h"

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
static void test_wire_basic(void *obj, void *data,
                            QGuestAllocator *alloc)
{
    uint32_t key_a, key_b, a[PFNIC_CMD_ARGS];
    PfnicCqe c;

    wire_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * The start of a wire test through tables: A's MR pages (DATA_PAGE 30, 33,
 * 31) in @pa, B's (40, 38, 44) in @pb, all of 30..44 cleared, and the
 * tables' queue tails and CQEs seen reset.
 */
static void wire_tables_start(void *obj, QGuestAllocator *alloc,
                              uint64_t *pa, uint64_t *pb)
{
    static const uint8_t zero[4096];
    static const int ia[3] = { 30, 33, 31 }, ib[3] = { 40, 38, 44 };

    wire_qos_start(obj, alloc);
    table_counts_reset();
    for (int i = 0; i < 3; i++) {
        pa[i] = DATA_PAGE(ia[i]);
        pb[i] = DATA_PAGE(ib[i]);
    }
    for (int i = 30; i < 45; i++) {
        memwrite(DATA_PAGE(i), zero, sizeof(zero));
    }
}

/*
 * Data on the wire, through tables (ABI 1.8): A's QP 2 and B's QP 3 in
 * contexts without a PASID, each with a table MR over scattered guest
 * pages (both devices reach the same guest memory). A WRITE of 9 packets,
 * a READ, a SEND, and a WRITE to an invalid entry (REM_ACCESS_ERR).
 */
static void test_wire_tables(void *obj, void *data,
                             QGuestAllocator *alloc)
{
    uint64_t pa[3], pb[3];
    static uint8_t src[0x2400], got[0x2400];
    uint32_t key_a, key_b;
    PfnicCqe c;

    wire_tables_start(obj, alloc, pa, pb);
    wire_ctx_no_pasid(1, IP_B);
    key_b = table_mr(1, 1, TR_VA, 0x3000, pb, 3);
    wire_qp(3, 3, 2, IP_A, WIRE_SQ_PSN_B, WIRE_SQ_PSN_A, 10);
    wire_ctx_no_pasid(0, IP_A);
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
    pfnic_qos_end();
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
static void test_wire_driver_faults(void *obj, void *data,
                                    QGuestAllocator *alloc)
{
    uint64_t pa[3], pb[3];
    static uint8_t src[0x2400], got[0x2400];
    uint32_t key_a, key_b, a[PFNIC_CMD_ARGS];
    TestEq eqa, eqb;
    PfnicCqe c;
    uint64_t v;

    wire_tables_start(obj, alloc, pa, pb);
    wire_ctx_no_pasid(1, IP_B);
    key_b = fault_mr(1, 1, TR_VA, 0x3000);
    wire_qp(3, 3, 2, IP_A, WIRE_SQ_PSN_B, WIRE_SQ_PSN_A, 10);
    test_eq_setup(&eqb, EQ_ADDR + 0x1000, 16);
    wire_ctx_no_pasid(0, IP_A);
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
    a[0] = PFNIC_GPA(0x900000);
    a[1] = PFNIC_GPA(0x900000) >> 32;
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
    pfnic_qos_end();
}

/*
 * A responder accepts packets from its peer's address only: B's QP 3 now
 * names another address, so A's SEND is refused there and A's retries run
 * out (RETRY_EXC_ERR). B's receive WQE is untouched.
 */
static void test_wire_peer(void *obj, void *data,
                           QGuestAllocator *alloc)
{
    uint32_t key_a, key_b, a[PFNIC_CMD_ARGS];
    PfnicCqe c;

    wire_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * Frames lost on the way (x-wire-loss: 20% each way) are sent again, and
 * every message still completes, in order, exactly once at B.
 */
static void test_wire_loss(void *obj, void *data,
                           QGuestAllocator *alloc)
{
    uint32_t key_a, key_b, a[PFNIC_CMD_ARGS];
    const int n = 12;

    wire_qos_start(obj, alloc);
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
    pfnic_qos_end();
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
static void test_wire_port_events(void *obj, void *data,
                                  QGuestAllocator *alloc)
{
    uint32_t key_a, key_b;
    const uint32_t up = PFNIC_PORT_STATUS_WIRE | PFNIC_PORT_STATUS_LINK_UP;
    TestEq eq_b;
    PfnicCqe c;

    wire_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * A wire QP with an SRQ (ABI 1.11): B's QP 3 (PD 9) takes its receive
 * WQEs from SRQ 1 (PD 7, like B's MR): the responder takes them as the
 * loopback sender does. The SRQ's head moves, the QP's receive head stays
 * 0; WRITE with immediate consumes one; an empty SRQ is answered with RNR
 * NAKs until SRQ_DB posts one.
 */
static void test_wire_srq(void *obj, void *data,
                          QGuestAllocator *alloc)
{
    uint64_t pa[3], pb[3];
    static uint8_t src[0x500], got[0x500];
    uint32_t key_a, key_b, a[PFNIC_CMD_ARGS];
    PfnicCqe c;

    wire_tables_start(obj, alloc, pa, pb);
    wire_ctx_no_pasid(1, IP_B);
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
    wire_ctx_no_pasid(0, IP_A);
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
    pfnic_qos_end();
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
static void test_wire_dm(void *obj, void *data,
                         QGuestAllocator *alloc)
{
    static uint8_t src[0x1300], got[0x1300];
    uint32_t key_a, key_b, dm_a, dm_b;
    uint64_t v;
    PfnicCqe c;

    wire_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/*
 * Timestamps on the wire (ABI 1.12): A's send CQ 1 and B's receive CQ 4
 * have TIMESTAMP, A's receive CQ 2 and B's send CQ 3 not. Each device
 * stamps with its own clock; zero-length SENDs (nothing to translate).
 */
static void test_wire_timestamps(void *obj, void *data,
                                 QGuestAllocator *alloc)
{
    uint32_t key_a, key_b;
    uint64_t last_a = 0, last_b = 0;

    wire_qos_start(obj, alloc);
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
    pfnic_qos_end();
}

/* The FAST MR of B in wire/fast-reg: its pages are wire_tables_start()'s. */
#define WIRE_FAST_VA    0x30000000ULL
#define WIRE_FAST_IOVA  (WIRE_FAST_VA + 0x7c0)
#define WIRE_FAST_LEN   0x2800ULL

/*
 * A SEND_WITH_INV of @len bytes from A's DATA_PAGE(60) asking B to
 * invalidate @key, into B's receive WQE at DATA_PAGE(70), in send queue
 * slot and receive CQE @n of each; A completes @status, and B's receive
 * on success says it invalidated @key, else LOC_PROT_ERR.
 */
static void wire_send_inv(uint32_t n, uint32_t len, uint32_t key_a,
                          uint32_t key_b, uint32_t key, uint8_t status)
{
    PfnicWqe w = send_inv_wqe(0x220 + n, DATA_PAGE(60), len, key_a, key);
    PfnicCqe c;

    use_nic(1);
    table_recv(1, 3, 0x320 + n, DATA_PAGE(70), 0x1000, key_b);
    use_nic(0);
    table_post_wqe(1, 2, &w);
    c = wait_cqe_ms(1, sq_next[2] - 1, 100);
    g_assert_cmphex(c.wr_id, ==, 0x220 + n);
    g_assert_cmpint(c.status, ==, status);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_SEND);
    use_nic(1);
    c = wait_cqe_ms(4, n, 100);
    g_assert_cmphex(c.wr_id, ==, 0x320 + n);
    if (status != PFNIC_WC_SUCCESS) {
        g_assert_cmpint(c.status, ==, PFNIC_WC_LOC_PROT_ERR);
        g_assert_cmpint(qp_state(3), ==, PFNIC_QPS_ERR);
    } else {
        g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
        g_assert_cmpint(c.byte_len, ==, len);
        g_assert_cmphex(c.wc_flags, ==, PFNIC_WC_WITH_INV);
        g_assert_cmphex(le32_to_cpu(c.imm_data), ==, key);
    }
    use_nic(0);
}

/*
 * Fast registration on the wire (ABI 1.21), contexts without a PASID and
 * DMA MRs over everything: B's REG_MR waits behind a READ in flight (its
 * CQE comes second); A writes and reads B's FAST MR (three scattered pages
 * from an unaligned iova) through the key; A's SEND_WITH_INV (SEND FIRST,
 * MIDDLE, then LAST with invalidate; then ONLY with invalidate) frees it,
 * so that B registers it again; a key that names no FAST MR of B's fails
 * B's receive (LOC_PROT_ERR) and A's send (NAK invalid request:
 * REM_INV_REQ_ERR).
 */
static void test_wire_fast_reg(void *obj, void *data,
                               QGuestAllocator *alloc)
{
    static uint8_t src[0x3000], got[0x3000];
    uint32_t key_a, key_b, fkey, k1, k2;
    uint64_t pa[3], pb[3];
    PfnicWqe w;
    PfnicCqe c;

    wire_tables_start(obj, alloc, pa, pb);
    wire_ctx_no_pasid(1, IP_B);
    g_assert_cmpint(mr_set_flags(1, 1, 7, ALL_ACCESS, 0, UINT64_MAX,
                                 PFNIC_MR_FLAG_DMA, &key_b), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(fast_mr(2, 1, 7, 4, &fkey), ==, PFNIC_CMD_OK);
    wire_qp(3, 3, 2, IP_A, WIRE_SQ_PSN_B, WIRE_SQ_PSN_A, 10);
    wire_ctx_no_pasid(0, IP_A);
    g_assert_cmpint(mr_set_flags(1, 1, 7, ALL_ACCESS, 0, UINT64_MAX,
                                 PFNIC_MR_FLAG_DMA, &key_a), ==,
                    PFNIC_CMD_OK);
    wire_qp(1, 2, 3, IP_B, WIRE_SQ_PSN_A, WIRE_SQ_PSN_B, 10);

    /* B: a READ of 12 packets from A, then a REG_MR that waits for it */
    pattern(src, sizeof(src), 41);
    memwrite(DATA_PAGE(50), src, sizeof(src));
    use_nic(1);
    table_post(1, 3, PFNIC_WR_RDMA_READ, 0x301, DATA_PAGE(54), sizeof(src),
               key_b, DATA_PAGE(50), key_a, 0);
    k1 = key_next(fkey, 1);
    fast_pbl(FAST_PBL, pb, 3);
    w = reg_mr_wqe(0x302, k1, WIRE_FAST_IOVA, WIRE_FAST_LEN,
                   PFNIC_ACCESS_LOCAL_WRITE | PFNIC_ACCESS_REMOTE_WRITE |
                   PFNIC_ACCESS_REMOTE_READ, FAST_PBL, 3);
    table_post_wqe(1, 3, &w);
    c = wait_cqe_ms(3, 0, 100);
    g_assert_cmphex(c.wr_id, ==, 0x301);
    g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    c = wait_cqe_ms(3, 1, 100);
    g_assert_cmphex(c.wr_id, ==, 0x302);
    g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.opcode, ==, PFNIC_WC_REG_MR);
    memread(DATA_PAGE(54), got, sizeof(got));
    g_assert_cmpmem(got, sizeof(got), src, sizeof(src));

    /* A: WRITE through the key into B's three pages, READ back */
    use_nic(0);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x201, DATA_PAGE(50), 0x2000,
               key_a, WIRE_FAST_IOVA + 0x300, k1, 0);
    g_assert_cmpint(wait_cqe_ms(1, 0, 100).status, ==, PFNIC_WC_SUCCESS);
    table_rw(pb, WIRE_FAST_IOVA, WIRE_FAST_IOVA + 0x300, got, 0x2000, false);
    g_assert_cmpmem(got, 0x2000, src, 0x2000);
    table_post(1, 2, PFNIC_WR_RDMA_READ, 0x202, DATA_PAGE(58), 0x1000,
               key_a, WIRE_FAST_IOVA + 0x1300, k1, 0);
    g_assert_cmpint(wait_cqe_ms(1, 1, 100).status, ==, PFNIC_WC_SUCCESS);
    memread(DATA_PAGE(58), got, 0x1000);
    g_assert_cmpmem(got, 0x1000, src + 0x1000, 0x1000);

    /* SEND_WITH_INV in three packets: the bytes land, the key is freed. */
    memwrite(DATA_PAGE(60), src, 0xa00);
    wire_send_inv(0, 0xa00, key_a, key_b, k1, PFNIC_WC_SUCCESS);
    use_nic(1);
    memread(DATA_PAGE(70), got, 0xa00);
    g_assert_cmpmem(got, 0xa00, src, 0xa00);
    /* Free: B registers it again, under the next low byte. */
    k2 = key_next(fkey, 2);
    w = reg_mr_wqe(0x303, k2, WIRE_FAST_IOVA, WIRE_FAST_LEN,
                   PFNIC_ACCESS_REMOTE_WRITE, FAST_PBL, 3);
    table_post_wqe(1, 3, &w);
    c = wait_cqe_ms(3, 2, 100);
    g_assert_cmphex(c.wr_id, ==, 0x303);
    g_assert_cmpint(c.status, ==, PFNIC_WC_SUCCESS);
    use_nic(0);
    /* SEND ONLY with invalidate; then one of a key B has no FAST MR for */
    wire_send_inv(1, 0x10, key_a, key_b, k2, PFNIC_WC_SUCCESS);
    wire_send_inv(2, 0x10, key_a, key_b, key_b, PFNIC_WC_REM_INV_REQ_ERR);
    g_assert_cmpint(qp_state(2), ==, PFNIC_QPS_ERR);
    assert_no_bad_frames();
    pfnic_qos_end();
}

static void register_pfnic_wire_tests(void)
{
    pfnic_add_wire_test("wire/basic", test_wire_basic, NULL, NULL, NULL);
    pfnic_add_wire_test("wire/tables", test_wire_tables,
                        "ats=off,pasid=off,pri=off",
                        "ats=off,pasid=off,pri=off",
                        NULL);
    pfnic_add_wire_test("wire/driver-faults", test_wire_driver_faults,
                        "ats=off,pasid=off,pri=off",
                        "ats=off,pasid=off,pri=off",
                        NULL);
    pfnic_add_wire_test("wire/peer", test_wire_peer, NULL, NULL, NULL);
    pfnic_add_wire_test("wire/loss", test_wire_loss,
                        "x-wire-loss=200000,x-wire-reorder=200000",
                        "x-wire-loss=200000",
                        NULL);
    pfnic_add_wire_test("wire/port-events", test_wire_port_events,
                        NULL, NULL, NULL);
    pfnic_add_wire_test("wire/srq", test_wire_srq,
                        "ats=off,pasid=off,pri=off",
                        "ats=off,pasid=off,pri=off",
                        NULL);
    pfnic_add_wire_test("wire/timestamps", test_wire_timestamps,
                        NULL, NULL, NULL);
    pfnic_add_wire_test("wire/dm", test_wire_dm, NULL, NULL, NULL);
    pfnic_add_wire_test("wire/fast-reg", test_wire_fast_reg,
                        "ats=off,pasid=off,pri=off",
                        "ats=off,pasid=off,pri=off",
                        NULL);
}

libqos_init(register_pfnic_wire_tests);
