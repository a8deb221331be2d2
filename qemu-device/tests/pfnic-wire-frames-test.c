/*
 * QTest for pfnic: frames on the wire from a stranger on the hub (a
 * unix datagram socket the test holds): ARP, the devices' frames checked
 * field by field and against a second ICRC implementation, replays, bad
 * ICRCs, forged sources, unknown QPs, PSNs far ahead, truncated and
 * oversized frames, and random frames, after which the QPs still work;
 * SEND ONLY with invalidate (ABI 1.21); and the MAC a QP sends to, as the
 * driver sets it (QP_SET_DMAC).
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "pfnic-test.h"

/* CRC-32 (IEEE, reflected), bit by bit: a second implementation. */
static uint32_t crc32_ieee(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++) {
            crc = crc >> 1 ^ (0xedb88320 & -(crc & 1));
        }
    }
    return ~crc;
}

/* The ICRC of a RoCEv2 frame of @len bytes (ICRC included). */
static uint32_t frame_icrc(const uint8_t *f, size_t len)
{
    static const uint8_t ones[8] = {
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff
    };
    uint8_t h[20 + 8 + 12];
    uint32_t crc = crc32_ieee(0, ones, 8);

    memcpy(h, f + 14, sizeof(h));
    h[1] = h[8] = h[10] = h[11] = 0xff;
    h[26] = h[27] = 0xff;
    h[32] = 0xff;
    crc = crc32_ieee(crc, h, sizeof(h));
    return crc32_ieee(crc, f + 14 + sizeof(h), len - 14 - sizeof(h) - 4);
}

/* Fix the IPv4 checksum and the ICRC after changing a frame. */
static void frame_seal(uint8_t *f, size_t len)
{
    stw_be_p(f + 24, 0);
    stw_be_p(f + 24, ip_csum(f + 14, 20));
    stl_le_p(f + len - 4, frame_icrc(f, len));
}

/*
 * What a stranger on the wire can make the device do: ARP answers, and
 * every broken, spoofed or replayed RoCE frame counted and dropped; the
 * frames the device sends are RoCEv2 as docs/wire.md has them (checked
 * with a second ICRC implementation).
 */
static void test_wire_frames(void *obj, void *data,
                             QGuestAllocator *alloc)
{
    uint8_t f[4096], send[4096], g[4096];
    uint32_t key_a, key_b, a[PFNIC_CMD_ARGS], timeouts;
    Stranger st = *(Stranger *)data;
    ssize_t n, len;
    GRand *rnd = g_rand_new_with_seed(4791);
    PfnicWqe w;
    PfnicCqe c;

    g_free(data);
    wire_qos_start(obj, alloc);
    wire_setup(10, &key_a, &key_b);

    /* ARP: who has 10.0.0.1? A answers with its MAC. */
    stranger_send(&st, f, arp_frame(f, 1, mac_bcast, mac_s, IP_S,
                                    mac_zero, IP_A));
    n = stranger_recv(&st, 0x0806, g, sizeof(g));
    while (n && lduw_be_p(g + 20) != 2) {
        n = stranger_recv(&st, 0x0806, g, sizeof(g));
    }
    g_assert_cmpint(n, >=, 42);
    g_assert_cmpmem(g + 22, 6, mac_a, 6);
    g_assert_cmphex((uint32_t)ldl_be_p(g + 28), ==, IP_A);
    g_assert_cmphex((uint32_t)ldl_be_p(g + 38), ==, IP_S);

    /* A SEND from A to B, as seen on the wire */
    use_nic(1);
    post_recv0(3, 0, 0x300, key_b);
    use_nic(0);
    post_send0(2, 0, 0x200, key_a);
    g_assert_cmpint(wait_cqe_ms(1, 0, 100).status, ==, PFNIC_WC_SUCCESS);
    do {
        len = stranger_recv(&st, 0x0800, send, sizeof(send));
        g_assert_cmpint(len, >, 0);
    } while (send[14 + 28] != 0x04);            /* SEND ONLY */
    g_assert_cmpint(len, ==, 14 + 20 + 8 + 12 + 4);
    g_assert_cmpmem(send, 6, mac_b, 6);
    g_assert_cmpmem(send + 6, 6, mac_a, 6);
    g_assert_cmphex(send[14], ==, 0x45);
    g_assert_cmphex(lduw_be_p(send + 14 + 6), ==, 0x4000);     /* DF */
    g_assert_cmpint(send[14 + 8], ==, 64);                     /* TTL */
    g_assert_cmpint(send[14 + 9], ==, 17);                     /* UDP */
    g_assert_cmphex(ip_csum(send + 14, 20), ==, 0);
    g_assert_cmphex((uint32_t)ldl_be_p(send + 14 + 12), ==, IP_A);
    g_assert_cmphex((uint32_t)ldl_be_p(send + 14 + 16), ==, IP_B);
    g_assert_cmphex(lduw_be_p(send + 34), ==, 0xc000 | 2);
    g_assert_cmphex(lduw_be_p(send + 36), ==, 4791);
    g_assert_cmphex(lduw_be_p(send + 40), ==, 0);              /* no csum */
    g_assert_cmphex(lduw_be_p(send + 42 + 2), ==, 0xffff);     /* P_Key */
    g_assert_cmphex((uint32_t)ldl_be_p(send + 42 + 4), ==, 3); /* dest QP */
    g_assert_cmphex((uint32_t)ldl_be_p(send + 42 + 8), ==,
                    0x80000000 | WIRE_SQ_PSN_A);               /* AckReq */
    g_assert_cmphex((uint32_t)ldl_le_p(send + len - 4), ==,
                    frame_icrc(send, len));

    use_nic(1);
    /* The same frame again: a duplicate, acknowledged, not received. */
    stranger_send(&st, send, len);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_DUPLICATE), ==, 1);
    /* One bit of the payload area flipped: a bad ICRC. */
    memcpy(f, send, len);
    f[42 + 11] ^= 1;
    stranger_send(&st, f, len);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_BAD_ICRC), ==, 1);
    /* From another address, sealed right: not the peer. */
    memcpy(f, send, len);
    stl_be_p(f + 14 + 12, IP_S);
    frame_seal(f, len);
    stranger_send(&st, f, len);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_NOT_PEER), ==, 1);
    /* A QP that is not there */
    memcpy(f, send, len);
    stl_be_p(f + 42 + 4, 77);
    frame_seal(f, len);
    stranger_send(&st, f, len);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_NO_QP), ==, 1);
    /* A PSN far ahead, twice: one sequence NAK */
    for (int i = 0; i < 2; i++) {
        memcpy(f, send, len);
        stl_be_p(f + 42 + 8, 0x80000000 | (WIRE_SQ_PSN_A + 1000 + i));
        frame_seal(f, len);
        stranger_send(&st, f, len);
    }
    g_assert_cmpint(port_counter(PFNIC_PORT_TX_SEQ_NAKS), ==, 1);
    /* Truncated, and a payload larger than the path MTU (1024) */
    stranger_send(&st, send, 40);
    memcpy(f, send, 42 + 12);
    memset(f + 42 + 12, 0x5a, 2000);
    stw_be_p(f + 14 + 2, 20 + 8 + 12 + 2000 + 4);
    stw_be_p(f + 38, 8 + 12 + 2000 + 4);
    stl_be_p(f + 42 + 8, WIRE_SQ_PSN_A + 1);
    frame_seal(f, 42 + 12 + 2000 + 4);
    stranger_send(&st, f, 42 + 12 + 2000 + 4);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_MALFORMED), ==, 2);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[0], ==, PFNIC_QPS_RTS);
    g_assert_cmpint(a[2], ==, 1);               /* one receive, the real one */

    /*
     * Noise: random frames, half of them well-formed RoCEv2 to B's QP 3
     * (a random BTH and body, sealed): counted and dropped, or answered,
     * and the QPs work after.
     */
    for (int i = 0; i < 2000; i++) {
        /* Not 0: QEMU's dgram netdev takes an empty datagram for EOF. */
        size_t flen = g_rand_int_range(rnd, 1, 1200);

        for (size_t k = 0; k < flen; k++) {
            f[k] = g_rand_int(rnd);
        }
        if (i & 1 && flen >= 42 + 12 + 4 + 4) {
            flen &= ~3ul;
            memcpy(f, send, 42);
            stw_be_p(f + 14 + 2, flen - 14);
            stw_be_p(f + 38, flen - 34);
            stl_be_p(f + 42 + 4, 3);
            f[42 + 1] &= 0xf0;
            stw_be_p(f + 42 + 2, 0xffff);
            frame_seal(f, flen);
        }
        stranger_send(&st, f, flen);
        while (recv(st.fd, g, sizeof(g), 0) > 0) {
            /* drain what the devices answer */
        }
    }
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_FRAMES), >=, 2000);

    use_nic(1);
    post_recv0(3, 1, 0x301, key_b);
    use_nic(0);
    post_send0(2, 1, 0x201, key_a);
    g_assert_cmpint(wait_cqe_ms(1, 1, 1000).status, ==, PFNIC_WC_SUCCESS);

    /*
     * From A's address but another MAC, to a QP that is not there: B must
     * not take that MAC for A's, or its next SEND to A goes astray and
     * times out.
     */
    memcpy(f, send, len);
    memcpy(f + 6, mac_s, 6);
    stl_be_p(f + 42 + 4, 77);
    frame_seal(f, len);
    stranger_send(&st, f, len);
    post_recv0(2, 0, 0x210, key_a);
    use_nic(1);
    timeouts = port_counter(PFNIC_PORT_TIMEOUTS);
    post_send0(3, 0, 0x310, key_b);
    g_assert_cmpint(wait_cqe_ms(3, 0, 1000).status, ==, PFNIC_WC_SUCCESS);
    g_assert_cmpint(port_counter(PFNIC_PORT_TIMEOUTS), ==, timeouts);

    /*
     * ABI 1.21: SEND ONLY with invalidate (0x17), the key in an IETH after
     * the BTH, big endian. B has no FAST MR: its receive fails, and its
     * NAK (invalid request) fails A's send.
     */
    post_recv0(3, 2, 0x302, key_b);
    use_nic(0);
    w = send_inv_wqe(0x202, 0, 0, 0, 0x12345678);
    memwrite(SQ_ADDR + 2 * 0x10000 + 2 * PFNIC_WQE_SIZE, &w, sizeof(w));
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | 3);
    c = wait_cqe_ms(1, 2, 100);
    g_assert_cmphex(c.wr_id, ==, 0x202);
    g_assert_cmpint(c.status, ==, PFNIC_WC_REM_INV_REQ_ERR);
    do {
        len = stranger_recv(&st, 0x0800, f, sizeof(f));
        g_assert_cmpint(len, >, 0);
    } while (f[42] != 0x17);
    g_assert_cmpint(len, ==, 14 + 20 + 8 + 12 + 4 + 4);
    g_assert_cmphex(f[42 + 1], ==, 0);          /* no SE, pad 0 */
    g_assert_cmphex((uint32_t)ldl_be_p(f + 42 + 12), ==, 0x12345678);
    g_assert_cmphex((uint32_t)ldl_le_p(f + len - 4), ==, frame_icrc(f, len));
    use_nic(1);
    c = wait_cqe_ms(4, 2, 10);
    g_assert_cmphex(c.wr_id, ==, 0x302);
    g_assert_cmpint(c.status, ==, PFNIC_WC_LOC_PROT_ERR);
    g_assert_cmpint(c.wc_flags, ==, 0);
    pfnic_qos_end();
    stranger_close(&st);
    g_rand_free(rnd);
}

/* QP_SET_DMAC of @qpn to @mac (NULL: all zeroes); the command's status. */
static uint32_t set_dmac(uint32_t qpn, const uint8_t *mac, uint32_t low)
{
    static const uint8_t zero[6];
    uint32_t a[PFNIC_CMD_ARGS] = { qpn };

    mac = mac ? mac : zero;
    a[1] = ldl_be_p(mac);
    a[2] = (uint32_t)lduw_be_p(mac + 4) << 16 | low;
    return cmd(PFNIC_CMD_QP_SET_DMAC, a, 3);
}

/*
 * QP_SET_DMAC (ABI 1.17): a QP's packets go to the MAC the driver gives
 * it, not to the one the device's neighbour cache has for the peer's
 * address; all zeroes goes back to the cache. Given a stranger's MAC, A's
 * SEND reaches the stranger and not B, and A asks nothing by ARP; given
 * B's, the retransmission reaches B; cleared, the cache serves.
 */
static void test_wire_dmac(void *obj, void *data, QGuestAllocator *alloc)
{
    static const uint8_t mcast[6] = { 0x01, 0x00, 0x5e, 0, 0, 1 };
    uint32_t key_a, key_b, a[PFNIC_CMD_ARGS];
    Stranger st = *(Stranger *)data;
    uint8_t f[4096];
    ssize_t len;

    g_free(data);
    wire_qos_start(obj, alloc);
    wire_setup(10, &key_a, &key_b);

    /* What the command refuses. */
    g_assert_cmpint(set_dmac(PFNIC_MAX_QPS, mac_b, 0), ==,
                    PFNIC_CMD_BAD_INDEX);
    g_assert_cmpint(set_dmac(77, mac_b, 0), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(set_dmac(2, mcast, 0), ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(set_dmac(2, mac_b, 1), ==, PFNIC_CMD_BAD_ARG);

    /* A stranger's MAC: A's SEND goes there, for B's address. */
    g_assert_cmpint(set_dmac(2, mac_s, 0), ==, PFNIC_CMD_OK);
    use_nic(1);
    post_recv0(3, 0, 0x300, key_b);
    use_nic(0);
    post_send0(2, 0, 0x200, key_a);
    do {
        len = stranger_recv(&st, 0x0800, f, sizeof(f));
        g_assert_cmpint(len, >, 0);
    } while (f[14 + 28] != 0x04);               /* SEND ONLY */
    g_assert_cmpmem(f, 6, mac_s, 6);
    g_assert_cmpmem(f + 6, 6, mac_a, 6);
    g_assert_cmphex((uint32_t)ldl_be_p(f + 14 + 16), ==, IP_B);
    g_assert_cmpint(port_counter(PFNIC_PORT_ARP_REQUESTS), ==, 0);
    use_nic(1);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[2], ==, 0);               /* B received nothing */

    /* B's MAC: the retransmission arrives. */
    use_nic(0);
    g_assert_cmpint(set_dmac(2, mac_b, 0), ==, PFNIC_CMD_OK);
    g_assert_cmpint(wait_cqe_ms(1, 0, 1000).status, ==, PFNIC_WC_SUCCESS);
    g_assert_cmpint(port_counter(PFNIC_PORT_RETRANSMITS), >=, 1);
    g_assert_cmpint(port_counter(PFNIC_PORT_ARP_REQUESTS), ==, 0);
    use_nic(1);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[2], ==, 1);

    /* Cleared: the neighbour cache again (B's MAC, asked or learnt by ARP). */
    use_nic(0);
    g_assert_cmpint(set_dmac(2, NULL, 0), ==, PFNIC_CMD_OK);
    use_nic(1);
    post_recv0(3, 1, 0x301, key_b);
    use_nic(0);
    post_send0(2, 1, 0x201, key_a);
    g_assert_cmpint(wait_cqe_ms(1, 1, 1000).status, ==, PFNIC_WC_SUCCESS);
    use_nic(1);
    g_assert_cmpint(qp_query(3, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[2], ==, 2);
    pfnic_qos_end();
    stranger_close(&st);
}

static void register_pfnic_wire_frames_tests(void)
{
    pfnic_add_wire_test("wire/frames", test_wire_frames,
                        NULL, NULL, stranger_qos_before);
    pfnic_add_wire_test("wire/dmac", test_wire_dmac,
                        NULL, NULL, stranger_qos_before);
}

libqos_init(register_pfnic_wire_frames_tests);
