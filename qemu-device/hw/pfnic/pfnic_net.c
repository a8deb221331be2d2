/*
 * pfnic port: one Ethernet NIC, ARP, IPv4/UDP and the RoCEv2 ICRC
 *
 * docs/wire.md is the definition. The port owns a QEMU NIC (netdev=);
 * frames it receives are queued and handled in a bottom half, so that a
 * peer answering synchronously (a hub in the same QEMU) never re-enters
 * the transport while it sends. Every field of a received frame is
 * checked before it is used; what is not ours or does not parse is counted
 * and dropped. The RC transport above (pfnic_roce.c) sees only checked
 * RoCEv2 packets: BTH onwards, ICRC removed. While the Ethernet queues run
 * (ABI 1.16, pfnic_eth.c), the frames that are not RoCE for us go to their
 * receive ring, and the operating system answers ARP instead of the port.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "qemu/timer.h"
#include "net/checksum.h"
#include "net/eth.h"
#include <zlib.h>
#include "pfnic.h"
#include "pfnic_regs.h"
#include "trace.h"

#define ETH_HLEN            14
#define ROCE_HDRS           (ETH_HLEN + IPV4_HLEN + UDP_HLEN)
#define ROCE_UDP_PORT       4791
#define ARP_LEN             28
#define ARP_RETRY_NS        (100 * SCALE_MS)
/* Largest RoCE packet: headers, 4096 bytes of payload, pad and ICRC. */
#define ROCE_MAX_FRAME      (ROCE_HDRS + 64 + 4096 + ICRC_LEN)

static const uint8_t pfnic_bcast[ETH_ALEN] = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff
};

void pfnic_port_count(PfnicState *s, PfnicPortCounter c)
{
    s->port_counters[c]++;
}

uint32_t pfnic_port_status(PfnicState *s)
{
    uint32_t st = 0;

    if (s->nic) {
        st |= PFNIC_PORT_STATUS_WIRE;
        if (!qemu_get_queue(s->nic)->link_down) {
            st |= PFNIC_PORT_STATUS_LINK_UP;
        }
    }
    return st;
}

/* --- the ICRC (IBTA annex A17, as Linux's rxe computes it) -------------- */

/*
 * CRC-32 over eight bytes of 0xff (the masked LRH of InfiniBand), the IPv4
 * and UDP headers with their variant fields masked, and the packet from
 * the BTH (with its FECN/BECN byte masked) up to the ICRC.
 */
static uint32_t pfnic_icrc(const uint8_t *ip, const uint8_t *bth, size_t len)
{
    static const uint8_t ones[8] = {
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff
    };
    uint8_t hdr[IPV4_HLEN + UDP_HLEN + BTH_LEN];
    uLong crc = crc32(0, ones, sizeof(ones));

    memcpy(hdr, ip, IPV4_HLEN + UDP_HLEN);
    hdr[1] = 0xff;                              /* TOS */
    hdr[8] = 0xff;                              /* TTL */
    hdr[10] = hdr[11] = 0xff;                   /* header checksum */
    hdr[IPV4_HLEN + 6] = hdr[IPV4_HLEN + 7] = 0xff; /* UDP checksum */
    memcpy(hdr + IPV4_HLEN + UDP_HLEN, bth, BTH_LEN);
    hdr[IPV4_HLEN + UDP_HLEN + 4] = 0xff;       /* BTH FECN, BECN, resv */
    crc = crc32(crc, hdr, sizeof(hdr));
    crc = crc32(crc, bth + BTH_LEN, len - BTH_LEN);
    return crc;
}

/* --- the neighbour cache ------------------------------------------------ */

static PfnicNeigh *pfnic_neigh_find(PfnicState *s, uint32_t ip)
{
    for (int i = 0; i < PFNIC_NEIGH_ENTRIES; i++) {
        if (s->neigh[i].ip == ip) {
            return &s->neigh[i];
        }
    }
    return NULL;
}

/* The entry for @ip, taking the least recently used one if it has none. */
static PfnicNeigh *pfnic_neigh_get(PfnicState *s, uint32_t ip)
{
    PfnicNeigh *n = pfnic_neigh_find(s, ip), *lru = &s->neigh[0];

    if (n) {
        return n;
    }
    for (int i = 0; i < PFNIC_NEIGH_ENTRIES; i++) {
        if (!s->neigh[i].ip) {
            lru = &s->neigh[i];
            break;
        }
        if (s->neigh[i].used_ns < lru->used_ns) {
            lru = &s->neigh[i];
        }
    }
    *lru = (PfnicNeigh) { .ip = ip };
    return lru;
}

static void pfnic_neigh_learn(PfnicState *s, uint32_t ip, const uint8_t *mac)
{
    PfnicNeigh *n;

    if (!ip || mac[0] & 1) {
        return;
    }
    n = pfnic_neigh_get(s, ip);
    n->resolved = true;
    memcpy(n->mac, mac, ETH_ALEN);
    n->used_ns = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
}

/* --- transmit ----------------------------------------------------------- */

static uint32_t pfnic_rng_ppm(PfnicState *s)
{
    /* xorshift64: a fixed seed, so that a lossy run is repeatable */
    s->wire_rng ^= s->wire_rng << 13;
    s->wire_rng ^= s->wire_rng >> 7;
    s->wire_rng ^= s->wire_rng << 17;
    return s->wire_rng % 1000000;
}

static void pfnic_net_xmit(PfnicState *s, const uint8_t *frame, size_t len)
{
    NetClientState *nc = qemu_get_queue(s->nic);

    pfnic_port_count(s, PFNIC_PORT_TX_FRAMES);
    qemu_send_packet(nc, frame, len);
}

/* A RoCE frame, through the loss and reordering the x-wire-* props ask. */
static void pfnic_net_xmit_roce(PfnicState *s, const uint8_t *frame,
                                size_t len)
{
    if (s->wire_loss && pfnic_rng_ppm(s) < s->wire_loss) {
        pfnic_port_count(s, PFNIC_PORT_INJECTED);
        trace_pfnic_wire_injected("drop", len);
        return;
    }
    if (s->wire_reorder && !s->held && pfnic_rng_ppm(s) < s->wire_reorder) {
        pfnic_port_count(s, PFNIC_PORT_INJECTED);
        trace_pfnic_wire_injected("hold", len);
        s->held = g_memdup2(frame, len);
        s->held_len = len;
        return;
    }
    pfnic_net_xmit(s, frame, len);
    if (s->held) {
        pfnic_net_xmit(s, s->held, s->held_len);
        g_clear_pointer(&s->held, g_free);
    }
}

static void pfnic_arp_send(PfnicState *s, uint16_t op, const uint8_t *dmac,
                           uint32_t tip)
{
    uint8_t f[ETH_HLEN + ARP_LEN];
    uint8_t *a = f + ETH_HLEN;

    memcpy(f, dmac, ETH_ALEN);
    memcpy(f + 6, s->conf.macaddr.a, ETH_ALEN);
    stw_be_p(f + 12, ETH_P_ARP);
    stw_be_p(a, 1);                         /* Ethernet */
    stw_be_p(a + 2, ETH_P_IP);
    a[4] = ETH_ALEN;
    a[5] = 4;
    stw_be_p(a + 6, op);
    memcpy(a + 8, s->conf.macaddr.a, ETH_ALEN);
    stl_be_p(a + 14, s->port_ipv4);
    memcpy(a + 18, op == 1 ? (const uint8_t *)"\0\0\0\0\0\0" : dmac,
           ETH_ALEN);
    stl_be_p(a + 24, tip);
    pfnic_net_xmit(s, f, sizeof(f));
}

/*
 * Send a frame of the Ethernet transmit ring (ABI 1.16) as it is: not
 * through the x-wire-* faults, which are the RoCE frames'. The caller
 * checked that the link is up (PORT_STATUS.LINK_UP).
 */
void pfnic_net_send_frame(PfnicState *s, const uint8_t *frame, size_t len)
{
    if (s->nic) {
        pfnic_net_xmit(s, frame, len);
    }
}

/*
 * Send a RoCEv2 packet (@pkt: BTH onwards, without the ICRC) to @dest_ip
 * from QP @qpn, to the MAC @dmac, or without one (NULL) to the neighbour
 * cache's for @dest_ip. False if it could not go out: no address or link,
 * or the peer's MAC is not known yet (an ARP request is then on its way and
 * the transport's retransmission sends the packet again).
 */
bool pfnic_net_send_roce(PfnicState *s, uint32_t dest_ip, const uint8_t *dmac,
                         uint32_t qpn, uint8_t tos, uint8_t ttl,
                         const uint8_t *pkt, size_t len)
{
    uint8_t f[ROCE_MAX_FRAME];
    uint8_t *ip = f + ETH_HLEN, *udp = ip + IPV4_HLEN;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    PfnicNeigh *n;

    if (!s->nic || !s->port_ipv4 || qemu_get_queue(s->nic)->link_down ||
        len + ROCE_HDRS + ICRC_LEN > sizeof(f)) {
        return false;
    }
    if (!dmac) {
        n = pfnic_neigh_get(s, dest_ip);
        n->used_ns = now;
        if (!n->resolved) {
            if (!n->arp_sent_ns || now - n->arp_sent_ns >= ARP_RETRY_NS) {
                n->arp_sent_ns = now;
                pfnic_port_count(s, PFNIC_PORT_ARP_REQUESTS);
                trace_pfnic_wire_arp_request(dest_ip);
                pfnic_arp_send(s, 1, pfnic_bcast, dest_ip);
            }
            return false;
        }
        dmac = n->mac;
    }

    memcpy(f, dmac, ETH_ALEN);
    memcpy(f + 6, s->conf.macaddr.a, ETH_ALEN);
    stw_be_p(f + 12, ETH_P_IP);
    ip[0] = 0x45;
    ip[1] = tos;
    stw_be_p(ip + 2, IPV4_HLEN + UDP_HLEN + len + ICRC_LEN);
    stw_be_p(ip + 4, 0);
    stw_be_p(ip + 6, 0x4000);               /* DF */
    ip[8] = ttl;
    ip[9] = IP_PROTO_UDP;
    stw_be_p(ip + 10, 0);
    stl_be_p(ip + 12, s->port_ipv4);
    stl_be_p(ip + 16, dest_ip);
    stw_be_p(ip + 10, net_raw_checksum(ip, IPV4_HLEN));
    stw_be_p(udp, 0xc000 | (qpn & 0x3fff));
    stw_be_p(udp + 2, ROCE_UDP_PORT);
    stw_be_p(udp + 4, UDP_HLEN + len + ICRC_LEN);
    stw_be_p(udp + 6, 0);
    memcpy(udp + UDP_HLEN, pkt, len);
    stl_le_p(udp + UDP_HLEN + len, pfnic_icrc(ip, udp + UDP_HLEN, len));
    pfnic_net_xmit_roce(s, f, ROCE_HDRS + len + ICRC_LEN);
    return true;
}

/* --- receive ------------------------------------------------------------ */

/*
 * ARP: learn the sender of a request or reply for our address, and answer
 * a request, except while the Ethernet queues run (ABI 1.16: the operating
 * system answers for the addresses it has). @taken: the Ethernet queues
 * took the frame, so that nothing here counts it.
 */
static void pfnic_rx_arp(PfnicState *s, const uint8_t *f, size_t len,
                         bool taken)
{
    const uint8_t *a = f + ETH_HLEN;
    uint32_t sip, tip;
    uint16_t op;

    if (len < ETH_HLEN + ARP_LEN || lduw_be_p(a) != 1 ||
        lduw_be_p(a + 2) != ETH_P_IP || a[4] != ETH_ALEN || a[5] != 4) {
        if (!taken) {
            pfnic_port_count(s, PFNIC_PORT_RX_MALFORMED);
        }
        return;
    }
    op = lduw_be_p(a + 6);
    sip = ldl_be_p(a + 14);
    tip = ldl_be_p(a + 24);
    if (!s->port_ipv4 || tip != s->port_ipv4 || (op != 1 && op != 2)) {
        if (!taken) {
            pfnic_port_count(s, PFNIC_PORT_RX_NOT_OURS);
        }
        return;
    }
    trace_pfnic_wire_arp(op, sip);
    pfnic_neigh_learn(s, sip, a + 8);
    if (op == 1) {
        if (!pfnic_eth_enabled(s)) {
            pfnic_arp_send(s, 2, a + 8, sip);
        }
    } else {
        /* Packets that waited for this MAC go with the next retransmit. */
        qemu_bh_schedule(s->engine_bh);
    }
}

static void pfnic_rx_ipv4(PfnicState *s, uint8_t *f, size_t len)
{
    uint8_t *ip = f + ETH_HLEN, *udp = ip + IPV4_HLEN, *bth;
    size_t ip_len, udp_len, pkt_len;
    uint32_t src;

    if (len < ROCE_HDRS) {
        pfnic_port_count(s, PFNIC_PORT_RX_MALFORMED);
        return;
    }
    if (ip[9] != IP_PROTO_UDP || ldl_be_p(ip + 16) != s->port_ipv4 ||
        !s->port_ipv4) {
        pfnic_port_count(s, PFNIC_PORT_RX_NOT_OURS);
        return;
    }
    ip_len = lduw_be_p(ip + 2);
    if (ip[0] != 0x45 || ip_len < IPV4_HLEN + UDP_HLEN ||
        ip_len > len - ETH_HLEN || lduw_be_p(ip + 6) & 0x3fff ||
        net_raw_checksum(ip, IPV4_HLEN) != 0) {
        /* Options, fragments, a bad length or checksum: not for us. */
        pfnic_port_count(s, PFNIC_PORT_RX_MALFORMED);
        return;
    }
    if (lduw_be_p(udp + 2) != ROCE_UDP_PORT) {
        pfnic_port_count(s, PFNIC_PORT_RX_NOT_OURS);
        return;
    }
    udp_len = lduw_be_p(udp + 4);
    if (udp_len != ip_len - IPV4_HLEN ||
        udp_len < UDP_HLEN + BTH_LEN + ICRC_LEN) {
        pfnic_port_count(s, PFNIC_PORT_RX_MALFORMED);
        return;
    }
    bth = udp + UDP_HLEN;
    pkt_len = udp_len - UDP_HLEN - ICRC_LEN;
    if (pfnic_icrc(ip, bth, pkt_len) != ldl_le_p(bth + pkt_len)) {
        pfnic_port_count(s, PFNIC_PORT_RX_BAD_ICRC);
        trace_pfnic_wire_drop("bad ICRC", ldl_be_p(ip + 12));
        return;
    }
    src = ldl_be_p(ip + 12);
    if ((bth[0] & 0xe0) == 0x60) {
        /* UD's opcodes (ABI 1.19): a datagram teaches no neighbour. */
        pfnic_ud_rx(s, ip, bth, pkt_len);
        return;
    }
    /*
     * A QP's peer that reached us is on this link: remember its MAC. Only
     * then: a stranger's frame cannot redirect our traffic.
     */
    if (pfnic_roce_rx(s, src, bth, pkt_len)) {
        pfnic_neigh_learn(s, src, f + 6);
    }
}

/*
 * Whether the frame @f (at least an Ethernet header) is RoCE for this
 * port, the RC transport's alone (ABI 1.16): an IPv4 datagram to
 * PORT_IPV4 of UDP to port 4791, whatever its destination MAC and whether
 * or not the transport can parse it. The operating system never sees one,
 * so its stack never answers RoCE (an ICMP port unreachable).
 */
static bool pfnic_rx_roce(PfnicState *s, const uint8_t *f, size_t len)
{
    const uint8_t *ip = f + ETH_HLEN;
    size_t ihl;

    if (len < ETH_HLEN + IPV4_HLEN || lduw_be_p(f + 12) != ETH_P_IP ||
        ip[0] >> 4 != 4 || ip[9] != IP_PROTO_UDP || !s->port_ipv4 ||
        ldl_be_p(ip + 16) != s->port_ipv4 || lduw_be_p(ip + 6) & 0x1fff) {
        /* Not IPv4 UDP to us, or a fragment after the first */
        return false;
    }
    ihl = (ip[0] & 0xf) * 4;
    return ihl >= IPV4_HLEN && len >= ETH_HLEN + ihl + UDP_HLEN &&
           lduw_be_p(ip + ihl + 2) == ROCE_UDP_PORT;
}

static void pfnic_rx_frame(PfnicState *s, uint8_t *f, size_t len)
{
    bool bcast, eth;

    pfnic_port_count(s, PFNIC_PORT_RX_FRAMES);
    if (len < ETH_HLEN) {
        pfnic_port_count(s, PFNIC_PORT_RX_MALFORMED);
        return;
    }
    /*
     * ABI 1.16: a frame that is not RoCE for us may be the Ethernet
     * queues'. The port still learns from an ARP frame they take, but
     * counts such a frame nowhere else (RX_NOT_OURS, RX_MALFORMED).
     */
    eth = pfnic_eth_enabled(s) && !pfnic_rx_roce(s, f, len) &&
          pfnic_eth_rx(s, f, len);
    bcast = !memcmp(f, pfnic_bcast, ETH_ALEN);
    if (!bcast && memcmp(f, s->conf.macaddr.a, ETH_ALEN)) {
        if (!eth) {
            pfnic_port_count(s, PFNIC_PORT_RX_NOT_OURS);
        }
        return;
    }
    switch (lduw_be_p(f + 12)) {
    case ETH_P_ARP:
        pfnic_rx_arp(s, f, len, eth);
        return;
    case ETH_P_IP:
        if (!bcast && !eth) {
            pfnic_rx_ipv4(s, f, len);
            return;
        }
        break;
    }
    if (!eth) {
        pfnic_port_count(s, PFNIC_PORT_RX_NOT_OURS);
    }
}

static void pfnic_rx_bh(void *opaque)
{
    PfnicState *s = opaque;
    GByteArray *f;

    while ((f = g_queue_pop_head(&s->rx_queue))) {
        pfnic_rx_frame(s, f->data, f->len);
        g_byte_array_unref(f);
    }
}

static bool pfnic_net_can_receive(NetClientState *nc)
{
    return true;
}

/*
 * Frames are copied to a bounded queue: a full queue drops (as a NIC's
 * receive ring would), and the sender's retransmission recovers.
 */
static ssize_t pfnic_net_receive(NetClientState *nc, const uint8_t *buf,
                                 size_t size)
{
    PfnicState *s = qemu_get_nic_opaque(nc);
    GByteArray *f;

    if (g_queue_get_length(&s->rx_queue) >= PFNIC_RX_QUEUE || size < 14 ||
        size > ROCE_MAX_FRAME + 64) {
        pfnic_port_count(s, PFNIC_PORT_RX_FRAMES);
        pfnic_port_count(s, PFNIC_PORT_RX_MALFORMED);
        /* Taken (and dropped): 0 would stop the netdev delivering to us. */
        return MAX(size, 1);
    }
    f = g_byte_array_sized_new(size);
    g_byte_array_append(f, buf, size);
    g_queue_push_tail(&s->rx_queue, f);
    qemu_bh_schedule(s->rx_bh);
    return size;
}

/*
 * The link went up or down (QMP set_link on the NIC or its netdev): the
 * driver hears of it from a PORT_CHANGE event that carries PORT_STATUS as
 * it is now, so that two changes in a row are two events with their own
 * states. Frames sent while the link is down are lost, as on a cable
 * pulled out; RC's retransmission recovers them once it is back.
 */
static void pfnic_net_link_status_changed(NetClientState *nc)
{
    PfnicState *s = qemu_get_nic_opaque(nc);
    uint32_t st = pfnic_port_status(s);

    trace_pfnic_port_change(st);
    pfnic_event_flags(s, PFNIC_EV_PORT_CHANGE, st, 1);
}

static NetClientInfo pfnic_net_info = {
    .type = NET_CLIENT_DRIVER_NIC,
    .size = sizeof(NICState),
    .can_receive = pfnic_net_can_receive,
    .receive = pfnic_net_receive,
    .link_status_changed = pfnic_net_link_status_changed,
};

/* --- lifecycle ---------------------------------------------------------- */

void pfnic_net_realize(PfnicState *s, DeviceState *dev)
{
    g_queue_init(&s->rx_queue);
    s->rx_bh = aio_bh_new_guarded(qemu_get_aio_context(), pfnic_rx_bh, s,
                                  &dev->mem_reentrancy_guard);
    qemu_macaddr_default_if_unset(&s->conf.macaddr);
    if (!s->conf.peers.ncs[0]) {
        /* No netdev: a loopback-only port, as in ABI 1.4. */
        return;
    }
    s->nic = qemu_new_nic(&pfnic_net_info, &s->conf,
                          object_get_typename(OBJECT(dev)), dev->id,
                          &dev->mem_reentrancy_guard, s);
    qemu_format_nic_info_str(qemu_get_queue(s->nic), s->conf.macaddr.a);
}

static void pfnic_rx_flush(PfnicState *s)
{
    GByteArray *f;

    while ((f = g_queue_pop_head(&s->rx_queue))) {
        g_byte_array_unref(f);
    }
}

void pfnic_net_exit(PfnicState *s)
{
    if (s->nic) {
        qemu_del_nic(s->nic);
    }
    qemu_bh_delete(s->rx_bh);
    pfnic_rx_flush(s);
    g_clear_pointer(&s->held, g_free);
}

void pfnic_net_reset(PfnicState *s)
{
    qemu_bh_cancel(s->rx_bh);
    pfnic_rx_flush(s);
    g_clear_pointer(&s->held, g_free);
    s->port_ipv4 = 0;
    memset(s->port_counters, 0, sizeof(s->port_counters));
    memset(s->neigh, 0, sizeof(s->neigh));
    s->wire_rng = 0x9e3779b97f4a7c15ull;
}
