/*
 * pfnic: unreliable datagram QPs (device ABI 1.19) on the wire, and GRHs
 *
 * A UD QP's send WQE names its destination (docs/verbs.md, "UD QPs"): a
 * QP of this device (pfnic_qp.c runs those as loopback), or a QP behind
 * an IPv4 address on the wire, which gets one RoCEv2 packet: BTH (UD
 * SEND ONLY, with or without immediate), DETH (Q_Key, source QP) and the
 * payload. Nothing is acknowledged or sent again: a datagram that finds
 * no ready QP, another Q_Key, no receive WQE or a receive buffer that is
 * not present is lost (the last one asks for its pages, so that the next
 * datagram finds them). A receive gets the GRH in the first 40 bytes of
 * its buffer: on RoCEv2 over IPv4 the packet's IPv4 header in the last 20
 * of them, as Linux's rxe and mlx5 place it.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "net/checksum.h"
#include "net/eth.h"
#include "pfnic.h"
#include "pfnic_regs.h"
#include "trace.h"

#define OP_UD_SEND_ONLY         0x64
#define OP_UD_SEND_ONLY_IMM     0x65
#define DETH_LEN                8
#define GRH_NEXT_HEADER_IB      0x1b

/* Whether @w goes on the wire: an IPv4 destination other than ours. */
bool pfnic_ud_wire(PfnicState *s, const PfnicWqe *w)
{
    return w->ud.dest_ip && w->ud.dest_ip != s->port_ipv4;
}

/* The Q_Key a datagram carries: the QP's own if the WQE's high bit says so */
uint32_t pfnic_ud_qkey(const PfnicQp *qp, const PfnicWqe *w)
{
    return w->ud.remote_qkey & PFNIC_UD_QKEY_CONTROLLED ? qp->qkey :
                                                          w->ud.remote_qkey;
}

/* BTH to ICRC of the packet that carries @len bytes of @w */
static uint32_t pfnic_ud_pkt_len(const PfnicWqe *w, uint64_t len)
{
    return BTH_LEN + DETH_LEN +
           (w->opcode == PFNIC_WR_SEND_WITH_IMM ? IMM_LEN : 0) + len +
           pfnic_pad(len) + ICRC_LEN;
}

/*
 * The GRH a datagram from @qp to a QP of this device gets, as if it had
 * crossed a wire: RoCEv2's IPv4 header (both addresses ours), or an IB
 * GRH whose two GIDs are the address handle's (a device reaches itself
 * through one of its own GIDs).
 */
void pfnic_ud_grh_loopback(PfnicState *s, const PfnicQp *qp,
                           const PfnicWqe *w, uint64_t len, uint8_t *grh)
{
    uint8_t hop = w->ud.hop_limit ? w->ud.hop_limit : 64;
    uint32_t plen = pfnic_ud_pkt_len(w, len);

    memset(grh, 0, PFNIC_GRH_LEN);
    if (w->ud.ah_flags & PFNIC_UD_AH_IPV4) {
        uint8_t *ip = grh + PFNIC_GRH_LEN - IPV4_HLEN;

        ip[0] = 0x45;
        ip[1] = w->ud.traffic_class;
        stw_be_p(ip + 2, IPV4_HLEN + UDP_HLEN + plen);
        stw_be_p(ip + 6, 0x4000);           /* DF */
        ip[8] = hop;
        ip[9] = IP_PROTO_UDP;
        stl_be_p(ip + 12, s->port_ipv4);
        stl_be_p(ip + 16, s->port_ipv4);
        stw_be_p(ip + 10, net_raw_checksum(ip, IPV4_HLEN));
        return;
    }
    stl_be_p(grh, 6u << 28 | (uint32_t)w->ud.traffic_class << 20);
    stw_be_p(grh + 4, plen);
    grh[6] = GRH_NEXT_HEADER_IB;
    grh[7] = hop;
    memcpy(grh + 8, w->ud.dgid, 16);
    memcpy(grh + 24, w->ud.dgid, 16);
}

/*
 * Send the datagram at @qp's send head on the wire: its status (SUCCESS
 * when sent, or lost on the way), or PFNIC_UD_SEND_WAIT while a page of
 * the payload is asked for (the QP runs it again from the start then).
 * A destination whose MAC the neighbour cache lacks gets an ARP request,
 * and the datagram is lost: the next one finds the MAC.
 */
uint8_t pfnic_ud_send(PfnicState *s, PfnicQp *qp)
{
    uint8_t pkt[BTH_LEN + DETH_LEN + IMM_LEN + PFNIC_UD_MAX_MSG + 4], *p;
    static const uint8_t zero_mac[6];
    const PfnicWqe *w = &qp->wqe;
    bool imm = w->opcode == PFNIC_WR_SEND_WITH_IMM;
    uint32_t pad = pfnic_pad(qp->len);
    PfnicCopy c;

    p = pfnic_bth_put(pkt, imm ? OP_UD_SEND_ONLY_IMM : OP_UD_SEND_ONLY,
                      w->flags & PFNIC_SEND_SOLICITED, pad,
                      w->ud.remote_qpn, false, qp->req.psn);
    stl_be_p(p, pfnic_ud_qkey(qp, w));
    stl_be_p(p + 4, qp->qpn);               /* reserved byte 0 */
    p += DETH_LEN;
    if (imm) {
        memcpy(p, &w->imm_data, IMM_LEN);   /* as posted: network order */
        p += IMM_LEN;
    }
    c = pfnic_roce_sge_copy(s, qp, &qp->pw, qp->pd, w, 0, p, qp->len, false);
    if (c == PFNIC_COPY_WAIT) {
        return PFNIC_UD_SEND_WAIT;
    }
    if (c != PFNIC_COPY_OK) {
        return PFNIC_WC_LOC_PROT_ERR;
    }
    p += qp->len;
    memset(p, 0, pad);
    qp->req.psn = (qp->req.psn + 1) & 0xffffff;
    trace_pfnic_ud_tx(qp->qpn, w->ud.dest_ip, w->ud.remote_qpn, qp->len);
    if (!pfnic_net_send_roce(s, w->ud.dest_ip,
                             memcmp(w->ud.dmac, zero_mac, 6) ? w->ud.dmac :
                                                               NULL,
                             qp->qpn, w->ud.traffic_class,
                             w->ud.hop_limit ? w->ud.hop_limit : 64, pkt,
                             p + pad - pkt)) {
        trace_pfnic_ud_drop(qp->qpn, w->ud.remote_qpn, "not sent");
    }
    return PFNIC_WC_SUCCESS;
}

/* Complete @qp's receive WQE @r (held since the peek) with @status. */
static void pfnic_ud_recv_done(PfnicState *s, PfnicQp *qp, const PfnicWqe *r,
                               PfnicCqe *cqe, bool se)
{
    cqe->wr_id = r->wr_id;
    cqe->qp_num = qp->qpn;
    cqe->opcode = PFNIC_WC_RECV;
    cqe->vendor_err = qp->rpw.requests;
    pfnic_qp_recv_consume(s, qp);
    qp->wqes_completed++;
    if (cqe->status == PFNIC_WC_SUCCESS) {
        qp->bytes += cqe->byte_len;
    } else {
        cqe->byte_len = 0;
    }
    pfnic_cqe_write(s, qp->rcqn, cqe, se);
    if (cqe->status != PFNIC_WC_SUCCESS) {
        pfnic_qp_enter_err(s, qp, false);
    }
}

/*
 * A checked RoCEv2 packet (@ip its IPv4 header, @pkt its BTH onwards, no
 * ICRC) whose opcode is UD's: place it in the receive WQE of the QP it
 * names. False if it is not one a UD QP of ours takes.
 */
bool pfnic_ud_rx(PfnicState *s, const uint8_t *ip, const uint8_t *pkt,
                 size_t len)
{
    uint8_t grh[PFNIC_GRH_LEN] = { };
    uint8_t op = pkt[0];
    bool imm = op == OP_UD_SEND_ONLY_IMM;
    size_t hlen = BTH_LEN + DETH_LEN + (imm ? IMM_LEN : 0);
    uint32_t pad = pkt[1] >> 4 & 3, plen, rlen = 0;
    PfnicCqe cqe = { };
    PfnicWqe r;
    PfnicCopy c;
    PfnicQp *qp;

    if ((op != OP_UD_SEND_ONLY && !imm) || (pkt[1] & 0x0f) != 0 ||
        lduw_be_p(pkt + 2) != 0xffff || len % 4 || len < hlen + pad ||
        pkt[BTH_LEN + 4] != 0) {
        pfnic_port_count(s, PFNIC_PORT_RX_MALFORMED);
        return false;
    }
    plen = len - hlen - pad;
    if (plen > PFNIC_UD_MAX_MSG) {
        pfnic_port_count(s, PFNIC_PORT_RX_MALFORMED);
        return false;
    }
    qp = pfnic_qp_get(s, ldl_be_p(pkt + 4) & 0xffffff);
    if (!qp || !qp->ud || !s->contexts[qp->ctx].enabled ||
        (qp->state != PFNIC_QPS_RTR && qp->state != PFNIC_QPS_RTS)) {
        pfnic_port_count(s, PFNIC_PORT_RX_NO_QP);
        return false;
    }
    pfnic_port_count(s, PFNIC_PORT_RX_ROCE);
    cqe.src_qp = ldl_be_p(pkt + BTH_LEN + 4) & 0xffffff;
    trace_pfnic_ud_rx(qp->qpn, ldl_be_p(ip + 12), cqe.src_qp, plen);
    if (ldl_be_p(pkt + BTH_LEN) != qp->qkey) {
        qp->refused++;
        trace_pfnic_ud_drop(qp->qpn, cqe.src_qp, "Q_Key");
        return false;
    }
    if (pfnic_qp_recv_peek(s, qp, &r) != PFNIC_RECV_OK) {
        qp->rnr_naks_sent++;
        trace_pfnic_ud_drop(qp->qpn, cqe.src_qp, "no receive WQE");
        return true;
    }
    if (r.num_sge > PFNIC_MAX_SGE) {
        cqe.status = PFNIC_WC_LOC_QP_OP_ERR;
        pfnic_ud_recv_done(s, qp, &r, &cqe, false);
        return true;
    }
    for (int i = 0; i < r.num_sge; i++) {
        rlen += r.sge[i].length;
    }
    if (rlen < PFNIC_GRH_LEN + plen) {
        cqe.status = PFNIC_WC_LOC_LEN_ERR;
        pfnic_ud_recv_done(s, qp, &r, &cqe, false);
        return true;
    }
    memcpy(grh + PFNIC_GRH_LEN - IPV4_HLEN, ip, IPV4_HLEN);
    c = pfnic_roce_sge_copy(s, qp, &qp->rpw, pfnic_qp_recv_pd(s, qp), &r, 0,
                            grh, PFNIC_GRH_LEN, true);
    if (c == PFNIC_COPY_OK && plen) {
        c = pfnic_roce_sge_copy(s, qp, &qp->rpw, pfnic_qp_recv_pd(s, qp), &r,
                                PFNIC_GRH_LEN, (uint8_t *)pkt + hlen, plen,
                                true);
    }
    if (c == PFNIC_COPY_WAIT) {
        /* Its pages are on their way: the next datagram finds them. */
        qp->rnr_naks_sent++;
        trace_pfnic_ud_drop(qp->qpn, cqe.src_qp, "receive page not present");
        return true;
    }
    if (c != PFNIC_COPY_OK) {
        pfnic_page_wait_reset(s, &qp->rpw);
        cqe.status = PFNIC_WC_LOC_PROT_ERR;
        pfnic_ud_recv_done(s, qp, &r, &cqe, false);
        return true;
    }
    cqe.byte_len = PFNIC_GRH_LEN + plen;
    cqe.wc_flags = PFNIC_WC_GRH | (imm ? PFNIC_WC_WITH_IMM : 0);
    if (imm) {
        memcpy(&cqe.imm_data, pkt + BTH_LEN + DETH_LEN, IMM_LEN);
    }
    pfnic_ud_recv_done(s, qp, &r, &cqe, pkt[1] & 0x80);
    return true;
}
