/*
 * pfnic RC transport over RoCEv2: the requester and the responder of QPs
 * whose peer is on the wire
 *
 * docs/wire.md is the definition. The requester cuts a QP's send WQEs
 * into packets at the path MTU, keeps up to PFNIC_ROCE_MAX_INFLIGHT WQEs
 * unacknowledged and goes back to the oldest unacknowledged PSN on a
 * timeout, a sequence NAK or after an RNR wait (go-back-N, as rxe and the
 * IBTA's reliable connection do). It re-reads what it sends from the WQE
 * and the process's memory each time, so nothing is buffered.
 *
 * The responder accepts packets in PSN order from the QP's destination
 * address only. A page that is not present where a SEND, WRITE or atomic
 * lands starts a page request and is answered with an RNR NAK: the
 * sender comes back after the RNR timer and the port never waits for the
 * OS (mlx5's ODP behaviour). READ responses are sent from the engine's
 * bottom half, where they may wait for a page like any other DMA. A FAULT
 * MR's entry (ABI 1.9) waits for the driver the same way: the event goes
 * to the driver instead of a page request to the OS.
 *
 * Requests run in the engine (pfnic_roce_run) and in the port's receive
 * bottom half (pfnic_roce_rx), both under the BQL.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/bitmap.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "qemu/timer.h"
#include "system/dma.h"
#include "pfnic.h"
#include "pfnic_regs.h"
#include "trace.h"

/* Packets a QP may send per engine run. */
#define PFNIC_ROCE_PKTS_PER_RUN     16
/* An ARP miss: look again this soon (no retry is used up). */
#define PFNIC_ROCE_ARP_WAIT_NS      (10 * SCALE_MS)

/* BTH opcodes, RC (IBTA 9.2) */
enum {
    OP_SEND_FIRST = 0x00, OP_SEND_MIDDLE, OP_SEND_LAST, OP_SEND_LAST_IMM,
    OP_SEND_ONLY, OP_SEND_ONLY_IMM,
    OP_WRITE_FIRST = 0x06, OP_WRITE_MIDDLE, OP_WRITE_LAST, OP_WRITE_LAST_IMM,
    OP_WRITE_ONLY, OP_WRITE_ONLY_IMM,
    OP_READ_REQUEST = 0x0c,
    OP_READ_RESP_FIRST = 0x0d, OP_READ_RESP_MIDDLE, OP_READ_RESP_LAST,
    OP_READ_RESP_ONLY,
    OP_ACK = 0x11, OP_ATOMIC_ACK, OP_CMP_SWAP, OP_FETCH_ADD,
    /* 0x15 is reserved; ABI 1.21: SEND_WITH_INV's */
    OP_SEND_LAST_INV = 0x16, OP_SEND_ONLY_INV,
    OP_NR
};

/* What each opcode carries and where it sits in a message */
#define H_RETH      (1u << 0)
#define H_IMM       (1u << 1)
#define H_AETH      (1u << 2)
#define H_ATOMIC    (1u << 3)
#define H_ATOMICACK (1u << 4)
#define H_PAYLOAD   (1u << 5)
#define H_FIRST     (1u << 6)
#define H_LAST      (1u << 7)
#define H_IETH      (1u << 8)   /* the rkey the responder invalidates */

/* 0: not an opcode of ours (the reserved ones) */
static const uint16_t pfnic_roce_hdrs[OP_NR] = {
    [OP_SEND_FIRST] = H_PAYLOAD | H_FIRST,
    [OP_SEND_MIDDLE] = H_PAYLOAD,
    [OP_SEND_LAST] = H_PAYLOAD | H_LAST,
    [OP_SEND_LAST_IMM] = H_PAYLOAD | H_LAST | H_IMM,
    [OP_SEND_ONLY] = H_PAYLOAD | H_FIRST | H_LAST,
    [OP_SEND_ONLY_IMM] = H_PAYLOAD | H_FIRST | H_LAST | H_IMM,
    [OP_WRITE_FIRST] = H_PAYLOAD | H_FIRST | H_RETH,
    [OP_WRITE_MIDDLE] = H_PAYLOAD,
    [OP_WRITE_LAST] = H_PAYLOAD | H_LAST,
    [OP_WRITE_LAST_IMM] = H_PAYLOAD | H_LAST | H_IMM,
    [OP_WRITE_ONLY] = H_PAYLOAD | H_FIRST | H_LAST | H_RETH,
    [OP_WRITE_ONLY_IMM] = H_PAYLOAD | H_FIRST | H_LAST | H_RETH | H_IMM,
    [OP_READ_REQUEST] = H_FIRST | H_LAST | H_RETH,
    [OP_READ_RESP_FIRST] = H_PAYLOAD | H_FIRST | H_AETH,
    [OP_READ_RESP_MIDDLE] = H_PAYLOAD,
    [OP_READ_RESP_LAST] = H_PAYLOAD | H_LAST | H_AETH,
    [OP_READ_RESP_ONLY] = H_PAYLOAD | H_FIRST | H_LAST | H_AETH,
    [OP_ACK] = H_FIRST | H_LAST | H_AETH,
    [OP_ATOMIC_ACK] = H_FIRST | H_LAST | H_AETH | H_ATOMICACK,
    [OP_CMP_SWAP] = H_FIRST | H_LAST | H_ATOMIC,
    [OP_FETCH_ADD] = H_FIRST | H_LAST | H_ATOMIC,
    [OP_SEND_LAST_INV] = H_PAYLOAD | H_LAST | H_IETH,
    [OP_SEND_ONLY_INV] = H_PAYLOAD | H_FIRST | H_LAST | H_IETH,
};

/* The message a responder is in the middle of (PfnicRoceResp.cur) */
enum {
    PFNIC_MSG_NONE,
    PFNIC_MSG_SEND,
    PFNIC_MSG_WRITE,
};

/* AETH syndromes (IBTA 9.3.5) */
#define AETH_ACK            0x1f        /* ACK, credits "unlimited" */
#define AETH_RNR_NAK        0x20        /* | timer */
#define AETH_NAK_SEQ        0x60
#define AETH_NAK_INV_REQ    0x61
#define AETH_NAK_REM_ACCESS 0x62
#define AETH_NAK_REM_OP     0x63
#define AETH_TYPE(syn)      ((syn) & 0xe0)

#define RETH_LEN            16
#define IETH_LEN            4
#define AETH_LEN            4
#define ATOMIC_LEN          28
#define ATOMICACK_LEN       8
#define PSN_MASK            0xffffffu

/* A received packet, its headers parsed and checked */
typedef struct PfnicRocePkt {
    uint8_t op;
    uint16_t hdrs;
    bool se;
    bool ackreq;
    uint32_t psn;
    uint64_t va;                /* RETH or AtomicETH */
    uint32_t rkey;
    uint32_t dmalen;
    uint64_t swap_add;          /* AtomicETH */
    uint64_t compare;
    uint32_t imm;               /* ImmDt, as on the wire */
    uint32_t ieth;              /* IETH: the rkey to invalidate */
    uint8_t syndrome;           /* AETH */
    uint64_t orig;              /* AtomicAckETH */
    const uint8_t *payload;
    uint32_t plen;
} PfnicRocePkt;

/* PSNs are 24 bits: a before b when (a - b) is negative in 24 bits. */
static int32_t psn_diff(uint32_t a, uint32_t b)
{
    return (int32_t)((a - b) << 8) >> 8;
}

static int64_t pfnic_now(void)
{
    return qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
}

static void pfnic_roce_arm(PfnicState *s, int64_t when)
{
    timer_mod_anticipate_ns(s->wire_timer, when);
}

/* --- the backup buffer ------------------------------------------------ */

/*
 * BACKUP_SET: the driver's buffer for payloads whose page is not present
 * (0 bytes: none). It changes only while no QP has anything parked.
 */
uint32_t pfnic_roce_backup_set(PfnicState *s, uint64_t base, uint32_t size)
{
    if (size % PFNIC_BACKUP_SLOT || size > PFNIC_BACKUP_MAX ||
        base % PFNIC_PAGE_SIZE) {
        return PFNIC_CMD_BAD_ARG;
    }
    if (s->backup_used &&
        find_first_bit(s->backup_used, s->backup_slots) < s->backup_slots) {
        return PFNIC_CMD_BUSY;
    }
    g_free(s->backup_used);
    s->backup_base = base;
    s->backup_slots = size / PFNIC_BACKUP_SLOT;
    s->backup_used = s->backup_slots ? bitmap_new(s->backup_slots) : NULL;
    return PFNIC_CMD_OK;
}

static void pfnic_parked_free(PfnicState *s, PfnicParked *p)
{
    if (p->slot != UINT32_MAX && s->backup_used) {
        clear_bit(p->slot, s->backup_used);
    }
    g_free(p);
}

/* Drop what the QP has parked (it is being reset or destroyed). */
static void pfnic_roce_drop_parked(PfnicState *s, PfnicQp *qp)
{
    PfnicParked *p;

    while ((p = g_queue_pop_head(&qp->resp.parked))) {
        pfnic_parked_free(s, p);
    }
}

void pfnic_roce_qp_reset(PfnicState *s, PfnicQp *qp)
{
    pfnic_roce_drop_parked(s, qp);
    memset(&qp->req, 0, sizeof(qp->req));
    memset(&qp->resp, 0, sizeof(qp->resp));
    g_queue_init(&qp->resp.parked);
    pfnic_page_wait_reset(s, &qp->rpw);
}

/* --- memory ------------------------------------------------------------ */

/*
 * Translate @va of @mr, of the QP's own context, for waiter @w (the
 * requester's pw or the responder's rpw). A page a table MR's entry
 * refuses fails at once, as a page the OS would not make present; a FAULT
 * MR's waits for the driver as others wait for the OS.
 */
static PfnicCopy pfnic_roce_xlate(PfnicState *s, PfnicQp *qp,
                                  PfnicPageWait *w, PfnicMr *mr, uint64_t va,
                                  uint64_t len, bool write, hwaddr *pa,
                                  AddressSpace **as)
{
    PfnicContext *ctx = &s->contexts[qp->ctx];
    uint32_t before = w->requests;

    switch (pfnic_mr_translate(ctx, mr, va, write, pa, as)) {
    case PFNIC_XLATE_OK:
        return PFNIC_COPY_OK;
    case PFNIC_XLATE_DENIED:
        if (!mr->fault) {
            return PFNIC_COPY_FAULT;
        }
        break;
    case PFNIC_XLATE_FAULT:
        break;
    }
    if (w->fault) {
        return PFNIC_COPY_FAULT;
    }
    if (w->waiting || w->retry_prq) {
        return PFNIC_COPY_WAIT;
    }
    trace_pfnic_qp_fault(qp->qpn, w == &qp->rpw, ctx->index, va, write);
    if (pfnic_mr_table(mr)) {
        pfnic_mr_fault(s, w, ctx, mr, va, len, write);
        return w->fault ? PFNIC_COPY_FAULT : PFNIC_COPY_WAIT;
    }
    pfnic_page_fault(s, w, ctx, mr, va, len, write);
    if (w->requests != before) {
        qp->page_requests++;
    }
    return w->fault ? PFNIC_COPY_FAULT : PFNIC_COPY_WAIT;
}

/*
 * Move @n bytes (within a page) between @buf and @va; @reach is how much
 * from @va the work needs, which a page request group covers.
 */
static PfnicCopy pfnic_roce_rw(PfnicState *s, PfnicQp *qp, PfnicPageWait *w,
                               PfnicMr *mr, uint64_t va, uint64_t reach,
                               uint8_t *buf, uint64_t n, bool to_mem)
{
    hwaddr pa;
    AddressSpace *as;
    PfnicCopy r = pfnic_roce_xlate(s, qp, w, mr, va, reach, to_mem, &pa, &as);

    if (r != PFNIC_COPY_OK) {
        return r;
    }
    if (address_space_rw(as, pa, MEMTXATTRS_UNSPECIFIED, buf, n, to_mem)) {
        return PFNIC_COPY_FAULT;
    }
    return PFNIC_COPY_OK;
}

/*
 * Move @len bytes between @buf and byte @off of a scatter/gather list,
 * whose keys belong to PD @pd of the QP's context (a receive WQE's: the
 * SRQ's, with one).
 */
PfnicCopy pfnic_roce_sge_copy(PfnicState *s, PfnicQp *qp, PfnicPageWait *w,
                              uint32_t pd, const PfnicWqe *wqe, uint64_t off,
                              uint8_t *buf, uint64_t len, bool to_mem)
{
    while (len) {
        uint64_t o, va, n;
        PfnicMr *mr;
        PfnicCopy r;
        int i;

        if (!pfnic_sge_at(wqe->sge, wqe->num_sge, off, &i, &o)) {
            return PFNIC_COPY_PROT;
        }
        mr = pfnic_mr_lookup(s, wqe->sge[i].lkey, qp->ctx, pd,
                             wqe->sge[i].addr, wqe->sge[i].length,
                             to_mem ? PFNIC_ACCESS_LOCAL_WRITE : 0);
        if (!mr) {
            return PFNIC_COPY_PROT;
        }
        va = wqe->sge[i].addr + o;
        n = MIN(len, wqe->sge[i].length - o);
        n = MIN(n, PFNIC_PAGE_SIZE - (va & ~PFNIC_PAGE_MASK));
        /* The rest of this SGE: what the work request needs from @va. */
        r = pfnic_roce_rw(s, qp, w, mr, va, wqe->sge[i].length - o, buf, n,
                          to_mem);
        if (r != PFNIC_COPY_OK) {
            return r;
        }
        off += n;
        buf += n;
        len -= n;
    }
    return PFNIC_COPY_OK;
}

/*
 * Move @len bytes between @buf and [va, va + len) of the MR named @rkey,
 * of a message that needs @reach bytes from @va: a FAULT MR's event names
 * the pages of all of them (a page request, those of this packet).
 */
static PfnicCopy pfnic_roce_mr_copy(PfnicState *s, PfnicQp *qp,
                                    PfnicPageWait *w, uint32_t rkey,
                                    uint32_t access, uint64_t va,
                                    uint8_t *buf, uint64_t len,
                                    uint64_t reach, bool to_mem)
{
    PfnicMr *mr = pfnic_mr_lookup(s, rkey, qp->ctx, qp->pd, va, len, access);

    if (!mr || (qp->access & access) != access) {
        return PFNIC_COPY_PROT;
    }
    reach = MAX(reach, len);
    while (len) {
        uint64_t n = MIN(len, PFNIC_PAGE_SIZE - (va & ~PFNIC_PAGE_MASK));
        PfnicCopy r = PFNIC_COPY_OK;
        hwaddr pa;
        AddressSpace *as;

        if (mr->fault && access == PFNIC_ACCESS_REMOTE_ATOMIC && !to_mem) {
            /* An atomic writes what it reads: its driver event says so. */
            r = pfnic_roce_xlate(s, qp, w, mr, va, reach, true, &pa, &as);
        }
        if (r == PFNIC_COPY_OK) {
            r = pfnic_roce_rw(s, qp, w, mr, va, mr->fault ? reach : len, buf,
                              n, to_mem);
        }
        if (r != PFNIC_COPY_OK) {
            return r;
        }
        va += n;
        buf += n;
        len -= n;
        reach -= n;
    }
    return PFNIC_COPY_OK;
}

/* --- packets ----------------------------------------------------------- */

uint8_t *pfnic_bth_put(uint8_t *p, uint8_t op, bool se, uint32_t pad,
                       uint32_t dqpn, bool ackreq, uint32_t psn)
{
    p[0] = op;
    p[1] = (se ? 0x80 : 0) | (pad & 3) << 4;    /* M 0, TVer 0 */
    stw_be_p(p + 2, 0xffff);                    /* default P_Key */
    stl_be_p(p + 4, dqpn & PSN_MASK);           /* FECN/BECN/resv 0 */
    stl_be_p(p + 8, (ackreq ? 1u << 31 : 0) | (psn & PSN_MASK));
    return p + BTH_LEN;
}

static uint8_t *pfnic_reth_put(uint8_t *p, uint64_t va, uint32_t rkey,
                               uint32_t len)
{
    stq_be_p(p, va);
    stl_be_p(p + 8, rkey);
    stl_be_p(p + 12, len);
    return p + RETH_LEN;
}

static uint8_t *pfnic_aeth_put(uint8_t *p, uint8_t syndrome, uint32_t msn)
{
    stl_be_p(p, (uint32_t)syndrome << 24 | (msn & PSN_MASK));
    return p + AETH_LEN;
}

/* Pad the payload to 4 bytes and send the packet from @qp to its peer. */
static bool pfnic_roce_xmit(PfnicState *s, PfnicQp *qp, uint8_t *pkt,
                            uint8_t *end)
{
    uint32_t pad = (4 - ((end - pkt) & 3)) & 3;

    /* The pad count is in the BTH already; the pad bytes are zero. */
    memset(end, 0, pad);
    trace_pfnic_roce_tx(qp->qpn, pkt[0], ldl_be_p(pkt + 8) & PSN_MASK,
                        end - pkt);
    return pfnic_net_send_roce(s, qp->dest_ip,
                               qp->dmac_set ? qp->dmac : NULL, qp->qpn,
                               qp->traffic_class, qp->hop_limit, pkt,
                               end + pad - pkt);
}

/* The responder's ACK, RNR NAK or NAK for @psn. */
static void pfnic_roce_ack(PfnicState *s, PfnicQp *qp, uint8_t syndrome,
                           uint32_t psn)
{
    uint8_t pkt[BTH_LEN + AETH_LEN], *p;

    trace_pfnic_roce_ack(qp->qpn, syndrome, psn & PSN_MASK);
    p = pfnic_bth_put(pkt, OP_ACK, false, 0, qp->dest_qpn, false, psn);
    p = pfnic_aeth_put(p, syndrome, qp->resp.msn);
    pfnic_roce_xmit(s, qp, pkt, p);
}

/* --- requester --------------------------------------------------------- */

static PfnicRoceSend *pfnic_req_at(PfnicQp *qp, uint32_t i)
{
    return &qp->req.fl[(qp->req.fl_head + i) % PFNIC_ROCE_MAX_INFLIGHT];
}

static bool pfnic_wqe_rd_atomic(const PfnicWqe *w)
{
    return w->opcode == PFNIC_WR_RDMA_READ || pfnic_op_atomic(w->opcode);
}

/* Complete the oldest WQE on the wire with @status. */
static void pfnic_req_retire(PfnicState *s, PfnicQp *qp, uint8_t status)
{
    PfnicRoceSend e = *pfnic_req_at(qp, 0);
    PfnicRoceReq *rq = &qp->req;

    rq->fl_head = (rq->fl_head + 1) % PFNIC_ROCE_MAX_INFLIGHT;
    rq->fl_count--;
    rq->tx = rq->tx ? rq->tx - 1 : 0;
    rq->retry_left = qp->retry_cnt;
    rq->rnr_left = qp->rnr_retry;
    /* Completing with an error enters ERR, which resets the requester. */
    pfnic_qp_complete_wqe(s, qp, &e.wqe, status == PFNIC_WC_SUCCESS ?
                          e.len : 0, qp->pw.requests, status);
}

/* (Re)start the local ACK timer while anything is unacknowledged. */
static void pfnic_req_rearm(PfnicState *s, PfnicQp *qp)
{
    int64_t t = pfnic_ack_timeout_ns(qp->timeout);

    if (!qp->req.fl_count || !t) {
        qp->req.deadline = 0;
        return;
    }
    qp->req.deadline = pfnic_now() + t;
    pfnic_roce_arm(s, qp->req.deadline);
}

/* Everything up to and including @psn is acknowledged. */
static void pfnic_req_acked(PfnicState *s, PfnicQp *qp, uint32_t psn)
{
    bool progress = false;

    while (qp->state == PFNIC_QPS_RTS && qp->req.fl_count) {
        PfnicRoceSend *e = pfnic_req_at(qp, 0);
        int32_t d = psn_diff(psn, e->psn);

        /*
         * READs and atomics complete with their responses only. An ACK
         * may cover PSNs we have gone back to send again: the responder
         * has them (from the first time).
         */
        if (pfnic_wqe_rd_atomic(&e->wqe) || d < 0) {
            break;
        }
        if (d + 1 < (int32_t)e->npsn) {
            /* Part of a long message (AckReq every 64 packets). */
            if (d + 1 > (int32_t)e->acked) {
                e->acked = d + 1;
                /* Gone back past it: no need to send those again. */
                e->sent = MAX(e->sent, e->acked);
                progress = true;
            }
            break;
        }
        pfnic_req_retire(s, qp, PFNIC_WC_SUCCESS);
        progress = true;
    }
    if (progress) {
        /*
         * The retries count timeouts in a row, not per message. The peer
         * moves again: the whole window may go (a duplicate ACK that
         * moves nothing keeps a probing requester probing).
         */
        qp->req.probing = false;
        qp->req.retry_left = qp->retry_cnt;
        pfnic_req_rearm(s, qp);
        qemu_bh_schedule(s->engine_bh);
    }
}

/* Go back to @psn: everything from there is sent again. */
static void pfnic_req_go_back(PfnicState *s, PfnicQp *qp, uint32_t psn)
{
    PfnicRoceReq *rq = &qp->req;

    for (uint32_t i = 0; i < rq->fl_count; i++) {
        PfnicRoceSend *e = pfnic_req_at(qp, i);
        int32_t d = psn_diff(psn, e->psn);

        if (d >= (int32_t)e->npsn) {
            continue;
        }
        if (d < 0) {
            d = 0;
        }
        trace_pfnic_roce_go_back(qp->qpn, psn & PSN_MASK, i);
        e->sent = MIN(e->sent, d);
        e->got = MIN(e->got, d);
        e->acked = MIN(e->acked, d);
        for (uint32_t j = i + 1; j < rq->fl_count; j++) {
            pfnic_req_at(qp, j)->sent = 0;
            pfnic_req_at(qp, j)->got = 0;
            pfnic_req_at(qp, j)->acked = 0;
        }
        rq->tx = MIN(rq->tx, i);
        rq->since_ackreq = 0;
        pfnic_port_count(s, PFNIC_PORT_RETRANSMITS);
        qemu_bh_schedule(s->engine_bh);
        return;
    }
}

/* The next PSN nobody has acknowledged: where a timeout goes back to. */
static uint32_t pfnic_req_una(PfnicQp *qp)
{
    PfnicRoceSend *e = pfnic_req_at(qp, 0);

    return e->psn + (e->wqe.opcode == PFNIC_WR_RDMA_READ ? e->got : e->acked);
}

/*
 * The next posted WQE that goes on the wire, checked, in @w (@len its
 * bytes); false if none can go yet. A bad WQE, and (ABI 1.21) a local
 * one, LOCAL_INV or REG_MR, completes here instead, in order: once
 * everything before it has completed; after a local one the next goes.
 */
static bool pfnic_req_next(PfnicState *s, PfnicQp *qp, PfnicWqe *w,
                           uint64_t *len)
{
    PfnicRoceReq *rq = &qp->req;

    for (;;) {
        uint16_t index = qp->sq_head + rq->fl_count;
        uint8_t st;

        if (qp->state != PFNIC_QPS_RTS || index == qp->sq_tail ||
            rq->fl_count == PFNIC_ROCE_MAX_INFLIGHT) {
            return false;
        }
        if (!pfnic_wqe_read(s, qp->sq, qp->sq_entries, index, w)) {
            pfnic_guest_error(s, "send queue unreadable");
            pfnic_qp_enter_err(s, qp, true);
            return false;
        }
        st = pfnic_wqe_check(s, qp, w, len);
        if (st == PFNIC_WC_SUCCESS && !pfnic_op_atomic(w->opcode) &&
            *len > UINT32_MAX) {
            st = PFNIC_WC_LOC_LEN_ERR;
        }
        if (st == PFNIC_WC_SUCCESS && !pfnic_op_local(w->opcode)) {
            return true;
        }
        if (rq->fl_count) {
            return false;
        }
        if (st == PFNIC_WC_SUCCESS) {
            trace_pfnic_qp_wqe_start(qp->qpn, index, w->opcode, w->flags,
                                     w->num_sge, qp->dest_qpn);
            st = pfnic_wqe_local(s, qp, w);
        }
        pfnic_qp_complete_wqe(s, qp, w, 0, 0, st);
        if (st != PFNIC_WC_SUCCESS) {
            return false;
        }
    }
}

/* Take the next posted WQE onto the wire; false if it cannot go yet. */
static bool pfnic_req_load(PfnicState *s, PfnicQp *qp)
{
    PfnicRoceReq *rq = &qp->req;
    uint32_t rd = 0, mtu = qp->mtu;
    PfnicRoceSend *e;
    uint16_t index;
    PfnicWqe w;
    uint64_t len;

    if (!pfnic_req_next(s, qp, &w, &len)) {
        return false;
    }
    index = qp->sq_head + rq->fl_count;
    if (pfnic_wqe_rd_atomic(&w)) {
        for (uint32_t i = 0; i < rq->fl_count; i++) {
            rd += pfnic_wqe_rd_atomic(&pfnic_req_at(qp, i)->wqe);
        }
        if (rd >= MAX(qp->max_rd_atomic, 1)) {
            return false;
        }
    }
    e = pfnic_req_at(qp, rq->fl_count);
    *e = (PfnicRoceSend) {
        .wqe = w,
        .len = pfnic_op_atomic(w.opcode) ? 8 : len,
        .psn = rq->psn,
        .npsn = pfnic_op_atomic(w.opcode) ? 1 :
                MAX(1, DIV_ROUND_UP(len, mtu)),
    };
    rq->psn = (rq->psn + e->npsn) & PSN_MASK;
    rq->fl_count++;
    pfnic_page_wait_reset(s, &qp->pw);
    trace_pfnic_qp_wqe_start(qp->qpn, index, w.opcode, w.flags, w.num_sge,
                             qp->dest_qpn);
    return true;
}

static uint8_t pfnic_req_opcode(const PfnicRoceSend *e, uint32_t k)
{
    bool first = k == 0, last = k + 1 == e->npsn;
    bool imm = pfnic_op_imm(e->wqe.opcode);
    bool inv = e->wqe.opcode == PFNIC_WR_SEND_WITH_INV;

    if (pfnic_op_send(e->wqe.opcode)) {
        if (first && last) {
            return imm ? OP_SEND_ONLY_IMM : inv ? OP_SEND_ONLY_INV :
                   OP_SEND_ONLY;
        }
        return first ? OP_SEND_FIRST : !last ? OP_SEND_MIDDLE :
               imm ? OP_SEND_LAST_IMM : inv ? OP_SEND_LAST_INV :
               OP_SEND_LAST;
    }
    if (first && last) {
        return imm ? OP_WRITE_ONLY_IMM : OP_WRITE_ONLY;
    }
    return first ? OP_WRITE_FIRST : !last ? OP_WRITE_MIDDLE :
           imm ? OP_WRITE_LAST_IMM : OP_WRITE_LAST;
}

typedef enum {
    PFNIC_TX_SENT,
    PFNIC_TX_WAIT,              /* a local page, or the peer's MAC */
    PFNIC_TX_FAILED,            /* the WQE failed: the QP is in ERR */
} PfnicTx;

/* Send the next packet of @e (packet e->sent). */
static PfnicTx pfnic_req_send(PfnicState *s, PfnicQp *qp, PfnicRoceSend *e)
{
    uint8_t pkt[BTH_LEN + ATOMIC_LEN + IMM_LEN + PFNIC_PAGE_SIZE + 4];
    const PfnicWqe *w = &e->wqe;
    uint32_t k = e->sent, psn = (e->psn + k) & PSN_MASK, npsn = 1;
    uint64_t off = (uint64_t)k * qp->mtu;
    uint8_t op, *p = pkt;
    bool ackreq, se = false;
    uint32_t plen = 0;

    if (w->opcode == PFNIC_WR_RDMA_READ) {
        op = OP_READ_REQUEST;
        npsn = e->npsn - k;
        p = pfnic_bth_put(p, op, false, 0, qp->dest_qpn, true, psn);
        p = pfnic_reth_put(p, w->remote_addr + off, w->rkey, e->len - off);
        ackreq = true;
    } else if (pfnic_op_atomic(w->opcode)) {
        bool cas = w->opcode == PFNIC_WR_ATOMIC_CMP_AND_SWP;

        op = cas ? OP_CMP_SWAP : OP_FETCH_ADD;
        p = pfnic_bth_put(p, op, false, 0, qp->dest_qpn, true, psn);
        stq_be_p(p, w->remote_addr);
        stl_be_p(p + 8, w->rkey);
        stq_be_p(p + 12, cas ? w->swap : w->compare_add);
        stq_be_p(p + 20, cas ? w->compare_add : 0);
        p += ATOMIC_LEN;
        ackreq = true;
    } else {
        uint16_t hdrs;
        PfnicCopy r;

        op = pfnic_req_opcode(e, k);
        hdrs = pfnic_roce_hdrs[op];
        plen = MIN(qp->mtu, e->len - off);
        ackreq = hdrs & H_LAST || qp->req.probing ||
                 qp->req.since_ackreq + 1 >= PFNIC_ROCE_ACKREQ_EVERY;
        se = hdrs & H_LAST && w->flags & PFNIC_SEND_SOLICITED;
        p = pfnic_bth_put(p, op, se, pfnic_pad(plen), qp->dest_qpn, ackreq,
                          psn);
        if (hdrs & H_RETH) {
            p = pfnic_reth_put(p, w->remote_addr, w->rkey, e->len);
        }
        if (hdrs & H_IMM) {
            memcpy(p, &w->imm_data, IMM_LEN);   /* as posted: big endian */
            p += IMM_LEN;
        }
        if (hdrs & H_IETH) {
            stl_be_p(p, pfnic_wqe_inv_key(w));
            p += IETH_LEN;
        }
        r = pfnic_roce_sge_copy(s, qp, &qp->pw, qp->pd, w, off, p, plen,
                                false);
        if (r == PFNIC_COPY_WAIT) {
            return PFNIC_TX_WAIT;
        }
        if (r != PFNIC_COPY_OK) {
            qp->req.tx = 0;
            pfnic_req_retire(s, qp, PFNIC_WC_LOC_PROT_ERR);
            return PFNIC_TX_FAILED;
        }
        p += plen;
    }
    if (!pfnic_roce_xmit(s, qp, pkt, p)) {
        /* No address, no link, or the peer's MAC is being resolved. */
        qp->req.arp_wait = true;
        qp->req.deadline = pfnic_now() + PFNIC_ROCE_ARP_WAIT_NS;
        pfnic_roce_arm(s, qp->req.deadline);
        return PFNIC_TX_WAIT;
    }
    if (psn_diff(psn, qp->req.high) < 0) {
        qp->retransmits++;
    } else {
        qp->req.high = (psn + npsn) & PSN_MASK;
    }
    qp->req.since_ackreq = ackreq ? 0 : qp->req.since_ackreq + 1;
    e->sent = k + npsn;
    if (!qp->req.deadline || qp->req.arp_wait) {
        qp->req.arp_wait = false;
        pfnic_req_rearm(s, qp);
    }
    return PFNIC_TX_SENT;
}

/* Send what the window allows; true if there is more to do at once. */
static bool pfnic_req_run(PfnicState *s, PfnicQp *qp)
{
    PfnicRoceReq *rq = &qp->req;

    if (qp->state != PFNIC_QPS_RTS || qp->pw.waiting || qp->pw.retry_prq ||
        rq->rnr_waiting) {
        return false;
    }
    if (qp->pw.fault) {
        /* A local page the OS would not make present. */
        pfnic_page_wait_reset(s, &qp->pw);
        if (rq->fl_count) {
            rq->tx = 0;
            pfnic_req_retire(s, qp, PFNIC_WC_LOC_PROT_ERR);
        }
        return false;
    }
    for (int budget = PFNIC_ROCE_PKTS_PER_RUN; budget > 0; budget--) {
        PfnicRoceSend *e;

        if (qp->state != PFNIC_QPS_RTS) {
            return false;
        }
        if (rq->tx == rq->fl_count && !pfnic_req_load(s, qp)) {
            return false;
        }
        e = pfnic_req_at(qp, rq->tx);
        if (e->sent == e->npsn) {
            rq->tx++;
            continue;
        }
        /*
         * The window: at most 128 PSNs past the oldest unacknowledged, one
         * packet while probing.
         */
        if (psn_diff(e->psn + e->sent, pfnic_req_una(qp)) >=
            (rq->probing ? 1 : PFNIC_ROCE_PSN_WINDOW)) {
            return false;
        }
        switch (pfnic_req_send(s, qp, e)) {
        case PFNIC_TX_SENT:
            break;
        case PFNIC_TX_WAIT:
        case PFNIC_TX_FAILED:
            return false;
        }
    }
    return true;
}

/* An ACK or NAK for our requests. */
static void pfnic_req_rx_ack(PfnicState *s, PfnicQp *qp,
                             const PfnicRocePkt *pk)
{
    PfnicRoceReq *rq = &qp->req;
    uint8_t syn = pk->syndrome;
    uint8_t status;

    if (!rq->fl_count || psn_diff(pk->psn, rq->psn) >= 0 ||
        psn_diff(pk->psn, pfnic_req_at(qp, 0)->psn) < -1) {
        /* For nothing we have outstanding: stale. */
        return;
    }
    switch (AETH_TYPE(syn)) {
    case 0x00:
        pfnic_req_acked(s, qp, pk->psn);
        return;
    case AETH_RNR_NAK:
        pfnic_req_acked(s, qp, pk->psn - 1);
        rq->probing = false;
        pfnic_port_count(s, PFNIC_PORT_RX_RNR_NAKS);
        qp->rnr_naks_rcvd++;
        qp->rnr_waits++;
        if (qp->rnr_retry != 7) {
            if (!rq->rnr_left) {
                rq->tx = 0;
                pfnic_req_retire(s, qp, PFNIC_WC_RNR_RETRY_EXC_ERR);
                return;
            }
            rq->rnr_left--;
        }
        rq->rnr_waiting = true;
        rq->rnr_psn = pk->psn;
        rq->rnr_deadline = pfnic_now() + pfnic_rnr_timer_ns(syn & 0x1f);
        rq->deadline = 0;
        pfnic_roce_arm(s, rq->rnr_deadline);
        return;
    case 0x60:
        pfnic_req_acked(s, qp, pk->psn - 1);
        if (syn == AETH_NAK_SEQ) {
            /* The peer says where it is: everything from there again. */
            rq->probing = false;
            pfnic_req_go_back(s, qp, pk->psn);
            return;
        }
        status = syn == AETH_NAK_INV_REQ ? PFNIC_WC_REM_INV_REQ_ERR :
                 syn == AETH_NAK_REM_ACCESS ? PFNIC_WC_REM_ACCESS_ERR :
                 PFNIC_WC_REM_OP_ERR;
        if (qp->state == PFNIC_QPS_RTS && rq->fl_count) {
            rq->tx = 0;
            pfnic_req_retire(s, qp, status);
        }
        return;
    }
    /* Reserved syndrome: ignored. */
}

/* READ RESPONSE and ATOMIC ACKNOWLEDGE: the data of our oldest request. */
static void pfnic_req_rx_response(PfnicState *s, PfnicQp *qp,
                                  const PfnicRocePkt *pk)
{
    PfnicRoceSend *e = NULL;
    uint8_t orig[8];
    PfnicCopy r;
    uint64_t off;

    for (uint32_t i = 0; i < qp->req.fl_count; i++) {
        PfnicRoceSend *c = pfnic_req_at(qp, i);
        int32_t d = psn_diff(pk->psn, c->psn);

        if (d >= 0 && d < (int32_t)c->npsn && pfnic_wqe_rd_atomic(&c->wqe)) {
            e = c;
            break;
        }
    }
    if (!e || psn_diff(pk->psn, e->psn + e->got) != 0) {
        /* Not the response we expect next: the timeout asks again. */
        return;
    }
    if (qp->req.probing) {
        /* The peer answers: the whole window may go again. */
        qp->req.probing = false;
        qemu_bh_schedule(s->engine_bh);
    }
    /* A response acknowledges every request before it. */
    pfnic_req_acked(s, qp, e->psn - 1);
    if (qp->state != PFNIC_QPS_RTS || pfnic_req_at(qp, 0) != e) {
        return;
    }
    if (pfnic_op_atomic(e->wqe.opcode)) {
        if (pk->op != OP_ATOMIC_ACK) {
            return;
        }
        stq_le_p(orig, pk->orig);
        r = pfnic_roce_sge_copy(s, qp, &qp->pw, qp->pd, &e->wqe, 0, orig, 8,
                                true);
    } else {
        uint32_t want;

        if (pk->op < OP_READ_RESP_FIRST || pk->op > OP_READ_RESP_ONLY) {
            return;
        }
        off = (uint64_t)e->got * qp->mtu;
        want = MIN(qp->mtu, e->len - off);
        if (pk->plen != want ||
            !!(pfnic_roce_hdrs[pk->op] & H_LAST) != (e->got + 1 == e->npsn)) {
            return;
        }
        r = pfnic_roce_sge_copy(s, qp, &qp->pw, qp->pd, &e->wqe, off,
                                (uint8_t *)pk->payload, pk->plen, true);
    }
    switch (r) {
    case PFNIC_COPY_OK:
        break;
    case PFNIC_COPY_WAIT:
        /* Dropped: asked again once the page is there (pfnic_roce_run). */
        return;
    default:
        qp->req.tx = 0;
        pfnic_req_retire(s, qp, PFNIC_WC_LOC_PROT_ERR);
        return;
    }
    e->got++;
    qp->req.retry_left = qp->retry_cnt;
    if (e->got == e->npsn) {
        pfnic_req_retire(s, qp, PFNIC_WC_SUCCESS);
    }
    pfnic_req_rearm(s, qp);
    qemu_bh_schedule(s->engine_bh);
}

/* --- responder --------------------------------------------------------- */

static void pfnic_resp_nak(PfnicState *s, PfnicQp *qp, uint8_t syndrome)
{
    if (AETH_TYPE(syndrome) == AETH_RNR_NAK) {
        pfnic_port_count(s, PFNIC_PORT_TX_RNR_NAKS);
        qp->rnr_naks_sent++;
    }
    pfnic_roce_ack(s, qp, syndrome, qp->resp.epsn);
}

/* Account and write a receive completion. */
static void pfnic_resp_cqe_write(PfnicState *s, PfnicQp *qp, PfnicCqe *cqe,
                                 bool se)
{
    qp->wqes_completed++;
    if (cqe->status == PFNIC_WC_SUCCESS) {
        qp->bytes += cqe->byte_len;
    }
    pfnic_cqe_write(s, qp->rcqn, cqe, se);
    if (cqe->status != PFNIC_WC_SUCCESS) {
        pfnic_qp_enter_err(s, qp, false);
    }
}

/*
 * Complete the receive WQE at the head of our receive queue. With payloads
 * still parked, the completion waits for them (and the WQE is consumed
 * now: the parked entries keep copies of its scatter list).
 */
static void pfnic_resp_recv_done(PfnicState *s, PfnicQp *qp,
                                 const PfnicRocePkt *pk, uint32_t len,
                                 uint8_t status)
{
    bool write = pk->op == OP_WRITE_LAST_IMM || pk->op == OP_WRITE_ONLY_IMM;
    bool inv = pk->hdrs & H_IETH && status == PFNIC_WC_SUCCESS;
    PfnicCqe cqe = {
        .wr_id = qp->resp.rwqe.wr_id,
        .byte_len = status == PFNIC_WC_SUCCESS ? len : 0,
        .qp_num = qp->qpn,
        .src_qp = qp->dest_qpn,
        .status = status,
        .opcode = write ? PFNIC_WC_RECV_RDMA_WITH_IMM : PFNIC_WC_RECV,
        .wc_flags = (pk->hdrs & H_IMM ? PFNIC_WC_WITH_IMM : 0) |
                    (inv ? PFNIC_WC_WITH_INV : 0),
        .vendor_err = qp->rpw.requests,
    };

    if (pk->hdrs & H_IMM) {
        memcpy(&cqe.imm_data, &pk->imm, IMM_LEN);
    }
    if (inv) {
        /* ABI 1.21: the key it invalidated, little endian */
        cqe.imm_data = cpu_to_le32(pk->ieth);
    }
    trace_pfnic_qp_recv_done(qp->qpn, qp->rq_head, status, qp->dest_qpn);
    qp->resp.have_rwqe = false;
    pfnic_qp_recv_consume(s, qp);
    if (status == PFNIC_WC_SUCCESS && !g_queue_is_empty(&qp->resp.parked)) {
        PfnicParked *p = g_new0(PfnicParked, 1);

        p->slot = UINT32_MAX;
        p->complete = true;
        p->se = pk->se;
        p->cqe = cqe;
        g_queue_push_tail(&qp->resp.parked, p);
        return;
    }
    pfnic_resp_cqe_write(s, qp, &cqe, pk->se);
}

/*
 * Backup policy: park @pk's payload (for a SEND at byte @off of the receive
 * WQE, or a WRITE at @va) in a slot of the driver's backup buffer. False
 * if no slot is free (the caller answers RNR NAK instead).
 */
static bool pfnic_resp_park(PfnicState *s, PfnicQp *qp,
                            const PfnicRocePkt *pk, bool send, uint64_t at)
{
    PfnicParked *p;
    uint32_t slot = UINT32_MAX;

    if (pk->plen) {
        slot = s->backup_used ?
               find_first_zero_bit(s->backup_used, s->backup_slots) :
               s->backup_slots;
        if (slot >= s->backup_slots) {
            pfnic_port_count(s, PFNIC_PORT_BACKUP_FULL);
            return false;
        }
        if (pci_dma_write(PCI_DEVICE(s), s->backup_base +
                          (uint64_t)slot * PFNIC_BACKUP_SLOT, pk->payload,
                          pk->plen) != MEMTX_OK) {
            pfnic_guest_error(s, "backup buffer unwritable");
            return false;
        }
        set_bit(slot, s->backup_used);
    }
    p = g_new0(PfnicParked, 1);
    p->slot = slot;
    p->len = pk->plen;
    p->send = send;
    if (send) {
        p->rwqe = qp->resp.rwqe;
        p->off = at;
    } else {
        p->va = at;
        p->rkey = qp->resp.rkey;
    }
    g_queue_push_tail(&qp->resp.parked, p);
    /* Placed by the engine, as soon as the pages are there. */
    qemu_bh_schedule(s->engine_bh);
    pfnic_port_count(s, PFNIC_PORT_BACKUP_PACKETS);
    s->port_counters[PFNIC_PORT_BACKUP_BYTES] += pk->plen;
    trace_pfnic_roce_parked(qp->qpn, pk->psn, slot, pk->plen);
    return true;
}

/*
 * Place what the QP parked, in order, as its pages come; then the
 * completions that waited for it. False while a page is awaited.
 */
static bool pfnic_resp_drain(PfnicState *s, PfnicQp *qp)
{
    uint8_t buf[PFNIC_BACKUP_SLOT];
    PfnicParked *p;

    while ((p = g_queue_peek_head(&qp->resp.parked))) {
        PfnicCopy c = PFNIC_COPY_OK;

        if (p->len) {
            if (pci_dma_read(PCI_DEVICE(s), s->backup_base +
                             (uint64_t)p->slot * PFNIC_BACKUP_SLOT, buf,
                             p->len) != MEMTX_OK) {
                pfnic_guest_error(s, "backup buffer unreadable");
                c = PFNIC_COPY_FAULT;
            } else if (p->send) {
                c = pfnic_roce_sge_copy(s, qp, &qp->rpw,
                                        pfnic_qp_recv_pd(s, qp), &p->rwqe,
                                        p->off, buf, p->len, true);
            } else {
                c = pfnic_roce_mr_copy(s, qp, &qp->rpw, p->rkey,
                                       PFNIC_ACCESS_REMOTE_WRITE, p->va, buf,
                                       p->len, p->len, true);
            }
        }
        if (c == PFNIC_COPY_WAIT) {
            return false;
        }
        if (c != PFNIC_COPY_OK) {
            /*
             * Acknowledged data that can no longer be placed: the QP is
             * broken. A SEND's receive completes in error first.
             */
            for (GList *l = qp->resp.parked.head; l; l = l->next) {
                PfnicParked *q = l->data;

                if (q->complete) {
                    q->cqe.status = PFNIC_WC_LOC_PROT_ERR;
                    q->cqe.byte_len = 0;
                    pfnic_cqe_write(s, qp->rcqn, &q->cqe, q->se);
                    break;
                }
            }
            pfnic_qp_enter_err(s, qp, true);
            return false;
        }
        if (p->len) {
            pfnic_port_count(s, PFNIC_PORT_BACKUP_PLACED);
        }
        g_queue_pop_head(&qp->resp.parked);
        if (p->complete) {
            pfnic_resp_cqe_write(s, qp, &p->cqe, p->se);
        }
        pfnic_parked_free(s, p);
        if (qp->state == PFNIC_QPS_ERR) {
            return false;
        }
    }
    return true;
}

/*
 * The receive WQE for the message in progress: the head of the receive
 * queue, or the one the QP holds from its SRQ (ABI 1.11). False when
 * there is none (RNR), or the queue is unreadable (the QP is in ERR).
 */
static bool pfnic_resp_take_rwqe(PfnicState *s, PfnicQp *qp)
{
    if (qp->resp.have_rwqe) {
        return true;
    }
    if (pfnic_qp_recv_peek(s, qp, &qp->resp.rwqe) != PFNIC_RECV_OK) {
        return false;
    }
    qp->resp.have_rwqe = true;
    return true;
}

/* A page fault where a request lands: RNR NAK now, or NAK if it failed. */
static void pfnic_resp_copy_failed(PfnicState *s, PfnicQp *qp,
                                   PfnicCopy r, uint8_t nak)
{
    if (r == PFNIC_COPY_WAIT) {
        pfnic_resp_nak(s, qp, AETH_RNR_NAK | qp->min_rnr_timer);
        return;
    }
    /* The next attempt asks the OS again. */
    pfnic_page_wait_reset(s, &qp->rpw);
    pfnic_resp_nak(s, qp, nak);
}

/*
 * A QP with this much parked (payloads, and completions waiting for them)
 * takes no more requests until some is placed: RNR NAK. A peer cannot
 * make the device hold more than this per QP.
 */
#define PFNIC_PARKED_MAX            512

/*
 * Whether the responder takes @pk, a packet of a message of kind @msg
 * (SEND or WRITE): not while the QP has too much parked (RNR NAK), and
 * only in message order: FIRST/ONLY start one, MIDDLE/LAST continue it
 * (NAK invalid request otherwise).
 */
static bool pfnic_resp_takes(PfnicState *s, PfnicQp *qp,
                             const PfnicRocePkt *pk, uint8_t msg)
{
    uint8_t cur = qp->resp.cur;

    if (g_queue_get_length(&qp->resp.parked) >= PFNIC_PARKED_MAX) {
        pfnic_port_count(s, PFNIC_PORT_BACKUP_FULL);
        pfnic_resp_nak(s, qp, AETH_RNR_NAK | qp->min_rnr_timer);
        return false;
    }
    if (!!(pk->hdrs & H_FIRST) != (cur == PFNIC_MSG_NONE) ||
        (cur != PFNIC_MSG_NONE && cur != msg)) {
        pfnic_resp_nak(s, qp, AETH_NAK_INV_REQ);
        return false;
    }
    return true;
}

static void pfnic_resp_send(PfnicState *s, PfnicQp *qp,
                            const PfnicRocePkt *pk)
{
    PfnicRoceResp *rs = &qp->resp;
    PfnicWqe *r = &rs->rwqe;
    uint64_t rlen = 0;
    PfnicCopy c;

    if (!pfnic_resp_takes(s, qp, pk, PFNIC_MSG_SEND)) {
        return;
    }
    if (!pfnic_resp_take_rwqe(s, qp)) {
        if (qp->state != PFNIC_QPS_ERR) {
            pfnic_resp_nak(s, qp, AETH_RNR_NAK | qp->min_rnr_timer);
        }
        return;
    }
    if (pk->hdrs & H_FIRST) {
        rs->off = 0;
    }
    if (r->num_sge > PFNIC_MAX_SGE) {
        pfnic_resp_recv_done(s, qp, pk, 0, PFNIC_WC_LOC_QP_OP_ERR);
        pfnic_roce_ack(s, qp, AETH_NAK_REM_OP, pk->psn);
        return;
    }
    for (int i = 0; i < r->num_sge; i++) {
        rlen += r->sge[i].length;
    }
    if (rs->off + pk->plen > rlen) {
        pfnic_roce_ack(s, qp, AETH_NAK_INV_REQ, pk->psn);
        pfnic_resp_recv_done(s, qp, pk, 0, PFNIC_WC_LOC_LEN_ERR);
        return;
    }
    /* Behind parked payloads, in order: parked too. */
    c = qp->backup && !g_queue_is_empty(&rs->parked) ? PFNIC_COPY_WAIT :
        pfnic_roce_sge_copy(s, qp, &qp->rpw, pfnic_qp_recv_pd(s, qp), r,
                            rs->off, (uint8_t *)pk->payload, pk->plen, true);
    if (c == PFNIC_COPY_PROT) {
        pfnic_roce_ack(s, qp, AETH_NAK_REM_OP, pk->psn);
        pfnic_resp_recv_done(s, qp, pk, 0, PFNIC_WC_LOC_PROT_ERR);
        return;
    }
    if (c == PFNIC_COPY_WAIT && qp->backup &&
        pfnic_resp_park(s, qp, pk, true, rs->off)) {
        c = PFNIC_COPY_OK;
    }
    if (c != PFNIC_COPY_OK) {
        pfnic_resp_copy_failed(s, qp, c, AETH_NAK_REM_OP);
        return;
    }
    /*
     * ABI 1.21: the message is complete; the key must name a FAST MR of
     * ours exactly, which becomes free.
     */
    if (pk->hdrs & H_IETH &&
        !pfnic_mr_fast_inv(s, qp->ctx, qp->pd, pk->ieth)) {
        pfnic_roce_ack(s, qp, AETH_NAK_INV_REQ, pk->psn);
        pfnic_resp_recv_done(s, qp, pk, 0, PFNIC_WC_LOC_PROT_ERR);
        return;
    }
    rs->cur = PFNIC_MSG_SEND;
    rs->off += pk->plen;
    rs->epsn = (rs->epsn + 1) & PSN_MASK;
    if (pk->hdrs & H_LAST) {
        uint32_t len = rs->off;

        rs->cur = PFNIC_MSG_NONE;
        rs->off = 0;
        rs->msn++;
        pfnic_resp_recv_done(s, qp, pk, len, PFNIC_WC_SUCCESS);
    }
    if (pk->ackreq) {
        pfnic_roce_ack(s, qp, AETH_ACK, rs->epsn - 1);
    }
}

static void pfnic_resp_write(PfnicState *s, PfnicQp *qp,
                             const PfnicRocePkt *pk)
{
    PfnicRoceResp *rs = &qp->resp;
    PfnicCopy c;

    if (!pfnic_resp_takes(s, qp, pk, PFNIC_MSG_WRITE)) {
        return;
    }
    if (pk->hdrs & H_FIRST) {
        if (pk->dmalen &&
            !pfnic_mr_remote(s, pk->rkey, qp, pk->va, pk->dmalen,
                             PFNIC_ACCESS_REMOTE_WRITE)) {
            pfnic_resp_nak(s, qp, AETH_NAK_REM_ACCESS);
            return;
        }
        rs->va = pk->va;
        rs->rkey = pk->rkey;
        rs->len = pk->dmalen;
        rs->off = 0;
    }
    if (rs->off + pk->plen > rs->len ||
        (pk->hdrs & H_LAST && rs->off + pk->plen != rs->len)) {
        pfnic_resp_nak(s, qp, AETH_NAK_INV_REQ);
        return;
    }
    if (pk->hdrs & H_IMM && !pfnic_resp_take_rwqe(s, qp)) {
        if (qp->state != PFNIC_QPS_ERR) {
            pfnic_resp_nak(s, qp, AETH_RNR_NAK | qp->min_rnr_timer);
        }
        return;
    }
    if (pk->plen) {
        c = qp->backup && !g_queue_is_empty(&rs->parked) ? PFNIC_COPY_WAIT :
            pfnic_roce_mr_copy(s, qp, &qp->rpw, rs->rkey,
                               PFNIC_ACCESS_REMOTE_WRITE, rs->va + rs->off,
                               (uint8_t *)pk->payload, pk->plen,
                               rs->len - rs->off, true);
        if (c == PFNIC_COPY_PROT) {
            pfnic_resp_nak(s, qp, AETH_NAK_REM_ACCESS);
            return;
        }
        if (c == PFNIC_COPY_WAIT && qp->backup &&
            pfnic_resp_park(s, qp, pk, false, rs->va + rs->off)) {
            c = PFNIC_COPY_OK;
        }
        if (c != PFNIC_COPY_OK) {
            pfnic_resp_copy_failed(s, qp, c, AETH_NAK_REM_ACCESS);
            return;
        }
    }
    rs->cur = PFNIC_MSG_WRITE;
    rs->off += pk->plen;
    rs->epsn = (rs->epsn + 1) & PSN_MASK;
    if (pk->hdrs & H_LAST) {
        rs->cur = PFNIC_MSG_NONE;
        rs->off = 0;
        rs->msn++;
        if (pk->hdrs & H_IMM) {
            pfnic_resp_recv_done(s, qp, pk, rs->len, PFNIC_WC_SUCCESS);
        } else {
            qp->bytes += rs->len;
        }
    }
    if (pk->ackreq) {
        pfnic_roce_ack(s, qp, AETH_ACK, rs->epsn - 1);
    }
}

static PfnicRoceRes *pfnic_resp_new_res(PfnicQp *qp)
{
    uint32_t n = MAX(qp->max_dest_rd_atomic, 1);
    PfnicRoceRes *res = &qp->resp.res[qp->resp.res_next % n];

    qp->resp.res_next = (qp->resp.res_next + 1) % n;
    return res;
}

static void pfnic_resp_read(PfnicState *s, PfnicQp *qp,
                            const PfnicRocePkt *pk)
{
    PfnicRoceResp *rs = &qp->resp;
    PfnicRoceRes *res;

    if (rs->cur || !qp->max_dest_rd_atomic) {
        pfnic_resp_nak(s, qp, AETH_NAK_INV_REQ);
        return;
    }
    if (pk->dmalen &&
        !pfnic_mr_remote(s, pk->rkey, qp, pk->va, pk->dmalen,
                         PFNIC_ACCESS_REMOTE_READ)) {
        pfnic_resp_nak(s, qp, AETH_NAK_REM_ACCESS);
        return;
    }
    res = pfnic_resp_new_res(qp);
    *res = (PfnicRoceRes) {
        .valid = true,
        .psn = pk->psn,
        .npsn = MAX(1, DIV_ROUND_UP(pk->dmalen, qp->mtu)),
        .va = pk->va,
        .rkey = pk->rkey,
        .len = pk->dmalen,
    };
    rs->epsn = (rs->epsn + res->npsn) & PSN_MASK;
    rs->msn++;
    qemu_bh_schedule(s->engine_bh);
}

static void pfnic_resp_atomic_ack(PfnicState *s, PfnicQp *qp,
                                  const PfnicRoceRes *res)
{
    uint8_t pkt[BTH_LEN + AETH_LEN + ATOMICACK_LEN], *p;

    p = pfnic_bth_put(pkt, OP_ATOMIC_ACK, false, 0, qp->dest_qpn, false,
                      res->psn);
    p = pfnic_aeth_put(p, AETH_ACK, qp->resp.msn);
    stq_be_p(p, res->orig);
    pfnic_roce_xmit(s, qp, pkt, p + ATOMICACK_LEN);
}

static void pfnic_resp_atomic(PfnicState *s, PfnicQp *qp,
                              const PfnicRocePkt *pk)
{
    PfnicRoceResp *rs = &qp->resp;
    PfnicRoceRes *res;
    uint8_t bytes[8];
    uint64_t orig, val;
    PfnicCopy c;

    if (rs->cur || !qp->max_dest_rd_atomic) {
        pfnic_resp_nak(s, qp, AETH_NAK_INV_REQ);
        return;
    }
    if (pk->va % 8 ||
        !pfnic_mr_remote(s, pk->rkey, qp, pk->va, 8,
                         PFNIC_ACCESS_REMOTE_ATOMIC)) {
        pfnic_resp_nak(s, qp, AETH_NAK_REM_ACCESS);
        return;
    }
    if (!g_queue_is_empty(&rs->parked)) {
        /* It must see the parked writes: come back once they are placed. */
        pfnic_resp_nak(s, qp, AETH_RNR_NAK | qp->min_rnr_timer);
        return;
    }
    /* Both the read and the write of the 8 bytes must be possible. */
    c = pfnic_roce_mr_copy(s, qp, &qp->rpw, pk->rkey,
                           PFNIC_ACCESS_REMOTE_ATOMIC, pk->va, bytes, 8, 8,
                           false);
    if (c == PFNIC_COPY_OK) {
        orig = ldq_le_p(bytes);
        if (pk->op == OP_CMP_SWAP) {
            val = orig == pk->compare ? pk->swap_add : orig;
        } else {
            val = orig + pk->swap_add;
        }
        stq_le_p(bytes, val);
        c = pfnic_roce_mr_copy(s, qp, &qp->rpw, pk->rkey,
                               PFNIC_ACCESS_REMOTE_ATOMIC, pk->va, bytes, 8,
                               8, true);
    }
    if (c != PFNIC_COPY_OK) {
        pfnic_resp_copy_failed(s, qp, c, AETH_NAK_REM_ACCESS);
        return;
    }
    trace_pfnic_qp_atomic(qp->qpn, pk->va, orig, val);
    res = pfnic_resp_new_res(qp);
    *res = (PfnicRoceRes) {
        .valid = true,
        .atomic = true,
        .psn = pk->psn,
        .npsn = 1,
        .va = pk->va,
        .rkey = pk->rkey,
        .orig = orig,
    };
    rs->epsn = (rs->epsn + 1) & PSN_MASK;
    rs->msn++;
    pfnic_resp_atomic_ack(s, qp, res);
}

/* A request with a PSN before the expected one. */
static void pfnic_resp_duplicate(PfnicState *s, PfnicQp *qp,
                                 const PfnicRocePkt *pk)
{
    PfnicRoceResp *rs = &qp->resp;

    pfnic_port_count(s, PFNIC_PORT_RX_DUPLICATE);
    qp->duplicates++;
    if (pk->op == OP_READ_REQUEST || pk->op == OP_CMP_SWAP ||
        pk->op == OP_FETCH_ADD) {
        for (int i = 0; i < PFNIC_ROCE_MAX_RES; i++) {
            PfnicRoceRes *res = &rs->res[i];
            int32_t d = psn_diff(pk->psn, res->psn);

            if (!res->valid || d < 0 || d >= (int32_t)res->npsn ||
                res->atomic != (pk->op != OP_READ_REQUEST)) {
                continue;
            }
            if (res->atomic) {
                pfnic_resp_atomic_ack(s, qp, res);
                return;
            }
            /* Answer again from where the requester asks (the data now). */
            if (pk->dmalen &&
                !pfnic_mr_remote(s, pk->rkey, qp, pk->va, pk->dmalen,
                                 PFNIC_ACCESS_REMOTE_READ)) {
                return;
            }
            res->psn = pk->psn;
            res->va = pk->va;
            res->rkey = pk->rkey;
            res->len = pk->dmalen;
            res->npsn = MAX(1, DIV_ROUND_UP(pk->dmalen, qp->mtu));
            res->sent = 0;
            qemu_bh_schedule(s->engine_bh);
            return;
        }
        return;
    }
    /* A SEND or WRITE already done: say so again. */
    pfnic_roce_ack(s, qp, AETH_ACK, rs->epsn - 1);
}

static void pfnic_resp_rx(PfnicState *s, PfnicQp *qp, const PfnicRocePkt *pk)
{
    PfnicRoceResp *rs = &qp->resp;
    int32_t d = psn_diff(pk->psn, rs->epsn);

    if (d < 0) {
        pfnic_resp_duplicate(s, qp, pk);
        return;
    }
    if (d > 0) {
        /* A gap: one sequence NAK until the expected PSN comes. */
        if (!rs->nak_sent) {
            rs->nak_sent = true;
            pfnic_port_count(s, PFNIC_PORT_TX_SEQ_NAKS);
            qp->seq_naks_sent++;
            pfnic_resp_nak(s, qp, AETH_NAK_SEQ);
        }
        return;
    }
    rs->nak_sent = false;
    switch (pk->op) {
    case OP_SEND_FIRST ... OP_SEND_ONLY_IMM:
    case OP_SEND_LAST_INV:
    case OP_SEND_ONLY_INV:
        pfnic_resp_send(s, qp, pk);
        break;
    case OP_WRITE_FIRST ... OP_WRITE_ONLY_IMM:
        pfnic_resp_write(s, qp, pk);
        break;
    case OP_READ_REQUEST:
        pfnic_resp_read(s, qp, pk);
        break;
    case OP_CMP_SWAP:
    case OP_FETCH_ADD:
        pfnic_resp_atomic(s, qp, pk);
        break;
    }
}

/* Send READ responses the responder owes, in PSN order. */
static bool pfnic_resp_run(PfnicState *s, PfnicQp *qp)
{
    uint8_t pkt[BTH_LEN + AETH_LEN + PFNIC_PAGE_SIZE + 4];

    if (qp->rpw.waiting || qp->rpw.retry_prq ||
        (qp->state != PFNIC_QPS_RTR && qp->state != PFNIC_QPS_RTS)) {
        return false;
    }
    /* READ responses see the writes parked before them. */
    if (!pfnic_resp_drain(s, qp)) {
        return false;
    }
    for (int budget = PFNIC_ROCE_PKTS_PER_RUN; budget > 0; budget--) {
        PfnicRoceRes *res = NULL;
        uint32_t k, plen;
        uint64_t off;
        uint8_t op, *p;
        PfnicCopy c;

        for (int i = 0; i < PFNIC_ROCE_MAX_RES; i++) {
            PfnicRoceRes *r = &qp->resp.res[i];

            if (r->valid && !r->atomic && r->sent < r->npsn &&
                (!res || psn_diff(r->psn, res->psn) < 0)) {
                res = r;
            }
        }
        if (!res) {
            return false;
        }
        k = res->sent;
        off = (uint64_t)k * qp->mtu;
        plen = MIN(qp->mtu, res->len - off);
        op = res->npsn == 1 ? OP_READ_RESP_ONLY : k == 0 ? OP_READ_RESP_FIRST :
             k + 1 == res->npsn ? OP_READ_RESP_LAST : OP_READ_RESP_MIDDLE;
        p = pfnic_bth_put(pkt, op, false, pfnic_pad(plen), qp->dest_qpn,
                          false, res->psn + k);
        if (pfnic_roce_hdrs[op] & H_AETH) {
            p = pfnic_aeth_put(p, AETH_ACK, qp->resp.msn);
        }
        c = plen ? pfnic_roce_mr_copy(s, qp, &qp->rpw, res->rkey,
                                      PFNIC_ACCESS_REMOTE_READ,
                                      res->va + off, p, plen,
                                      res->len - off, false) :
                   PFNIC_COPY_OK;
        if (c == PFNIC_COPY_WAIT) {
            return false;
        }
        if (c != PFNIC_COPY_OK) {
            pfnic_page_wait_reset(s, &qp->rpw);
            pfnic_roce_ack(s, qp, AETH_NAK_REM_ACCESS, res->psn + k);
            res->valid = false;
            continue;
        }
        pfnic_roce_xmit(s, qp, pkt, p + plen);
        res->sent++;
    }
    return true;
}

/* --- receive ----------------------------------------------------------- */

/* Parse and check the headers of @pkt (BTH onwards, no ICRC). */
static bool pfnic_roce_parse(const uint8_t *pkt, size_t len,
                             PfnicRocePkt *pk)
{
    const uint8_t *p = pkt + BTH_LEN;
    size_t hlen = BTH_LEN;
    uint32_t pad;

    if (len < BTH_LEN) {
        return false;
    }
    pk->op = pkt[0];
    if (pk->op >= OP_NR || !pfnic_roce_hdrs[pk->op] || (pkt[1] & 0x0f) != 0 ||
        lduw_be_p(pkt + 2) != 0xffff) {
        /* Not RC (or reserved), a TVer other than 0, or another partition. */
        return false;
    }
    pk->hdrs = pfnic_roce_hdrs[pk->op];
    pk->se = pkt[1] & 0x80;
    pad = pkt[1] >> 4 & 3;
    pk->ackreq = pkt[8] & 0x80;
    pk->psn = ldl_be_p(pkt + 8) & PSN_MASK;
    hlen += (pk->hdrs & H_RETH ? RETH_LEN : 0) +
            (pk->hdrs & H_IMM ? IMM_LEN : 0) +
            (pk->hdrs & H_IETH ? IETH_LEN : 0) +
            (pk->hdrs & H_AETH ? AETH_LEN : 0) +
            (pk->hdrs & H_ATOMIC ? ATOMIC_LEN : 0) +
            (pk->hdrs & H_ATOMICACK ? ATOMICACK_LEN : 0);
    if (len < hlen + pad || len % 4 ||
        (!(pk->hdrs & H_PAYLOAD) && len != hlen) ||
        (pad && !(pk->hdrs & H_LAST))) {
        return false;
    }
    if (pk->hdrs & H_RETH) {
        pk->va = ldq_be_p(p);
        pk->rkey = ldl_be_p(p + 8);
        pk->dmalen = ldl_be_p(p + 12);
        p += RETH_LEN;
    }
    if (pk->hdrs & H_ATOMIC) {
        pk->va = ldq_be_p(p);
        pk->rkey = ldl_be_p(p + 8);
        pk->swap_add = ldq_be_p(p + 12);
        pk->compare = ldq_be_p(p + 20);
        p += ATOMIC_LEN;
    }
    if (pk->hdrs & H_AETH) {
        pk->syndrome = p[0];
        p += AETH_LEN;
    }
    if (pk->hdrs & H_ATOMICACK) {
        pk->orig = ldq_be_p(p);
        p += ATOMICACK_LEN;
    }
    if (pk->hdrs & H_IMM) {
        memcpy(&pk->imm, p, IMM_LEN);
        p += IMM_LEN;
    }
    if (pk->hdrs & H_IETH) {
        pk->ieth = ldl_be_p(p);
        p += IETH_LEN;
    }
    pk->payload = p;
    pk->plen = len - hlen - pad;
    return true;
}

/*
 * A checked RoCEv2 packet from @src_ip: true if a QP took it (from its
 * peer), the only packets the port learns a MAC address from.
 */
bool pfnic_roce_rx(PfnicState *s, uint32_t src_ip, uint8_t *pkt, size_t len)
{
    PfnicRocePkt pk = { };
    PfnicQp *qp;
    bool response;

    if (!pfnic_roce_parse(pkt, len, &pk)) {
        pfnic_port_count(s, PFNIC_PORT_RX_MALFORMED);
        return false;
    }
    qp = pfnic_qp_get(s, ldl_be_p(pkt + 4) & PSN_MASK);
    if (!qp || !qp->wire || !s->contexts[qp->ctx].enabled ||
        (qp->state != PFNIC_QPS_RTR && qp->state != PFNIC_QPS_RTS)) {
        pfnic_port_count(s, PFNIC_PORT_RX_NO_QP);
        return false;
    }
    if (src_ip != qp->dest_ip) {
        /* RC: only the peer this QP was connected to. */
        pfnic_port_count(s, PFNIC_PORT_RX_NOT_PEER);
        qp->refused++;
        trace_pfnic_wire_drop("not the peer", src_ip);
        return false;
    }
    /* A payload larger than the path MTU was not cut by a peer of ours. */
    if (pk.plen > qp->mtu ||
        (pk.hdrs & H_PAYLOAD && !(pk.hdrs & H_LAST) && pk.plen != qp->mtu)) {
        pfnic_port_count(s, PFNIC_PORT_RX_MALFORMED);
        return false;
    }
    pfnic_port_count(s, PFNIC_PORT_RX_ROCE);
    trace_pfnic_roce_rx(qp->qpn, pk.op, pk.psn, pk.plen);
    response = pk.op >= OP_READ_RESP_FIRST && pk.op <= OP_ATOMIC_ACK;
    if (!response) {
        pfnic_resp_rx(s, qp, &pk);
    } else if (qp->state == PFNIC_QPS_RTS) {
        if (pk.op == OP_ACK) {
            pfnic_req_rx_ack(s, qp, &pk);
        } else {
            pfnic_req_rx_response(s, qp, &pk);
        }
    }
    return true;
}

/* --- engine and timers ------------------------------------------------- */

/* Run a wire QP: its READ responses, then its send queue. */
bool pfnic_roce_run(PfnicState *s, PfnicQp *qp)
{
    bool more = pfnic_resp_run(s, qp);

    return pfnic_req_run(s, qp) || more;
}

/* ACK timeouts and RNR waits of every wire QP. */
void pfnic_roce_timer(void *opaque)
{
    PfnicState *s = opaque;
    int64_t now = pfnic_now(), next = INT64_MAX;

    for (uint32_t i = 0; i < PFNIC_MAX_QPS; i++) {
        PfnicQp *qp = &s->qps[i];
        PfnicRoceReq *rq = &qp->req;

        if (!qp->valid || !qp->wire || qp->state != PFNIC_QPS_RTS) {
            continue;
        }
        if (rq->rnr_waiting && rq->rnr_deadline <= now) {
            rq->rnr_waiting = false;
            pfnic_req_go_back(s, qp, rq->rnr_psn);
            pfnic_req_rearm(s, qp);
            qemu_bh_schedule(s->engine_bh);
        }
        if (!rq->rnr_waiting && rq->deadline && rq->deadline <= now) {
            rq->deadline = 0;
            if (!rq->fl_count || rq->arp_wait) {
                /* The peer's MAC was unknown: try again, no retry used. */
                rq->arp_wait = false;
                qemu_bh_schedule(s->engine_bh);
            } else {
                pfnic_port_count(s, PFNIC_PORT_TIMEOUTS);
                trace_pfnic_roce_timeout(qp->qpn, pfnic_req_una(qp),
                                         rq->retry_left);
                if (!rq->retry_left) {
                    rq->tx = 0;
                    pfnic_req_retire(s, qp, PFNIC_WC_RETRY_EXC_ERR);
                    continue;
                }
                rq->retry_left--;
                pfnic_req_go_back(s, qp, pfnic_req_una(qp));
                rq->probing = true;
                pfnic_req_rearm(s, qp);
            }
        }
        if (qp->state == PFNIC_QPS_RTS && rq->rnr_waiting) {
            next = MIN(next, rq->rnr_deadline);
        } else if (qp->state == PFNIC_QPS_RTS && rq->deadline) {
            next = MIN(next, rq->deadline);
        }
    }
    if (next != INT64_MAX) {
        timer_mod(s->wire_timer, next);
    }
}

void pfnic_roce_init(PfnicState *s)
{
    s->wire_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, pfnic_roce_timer, s);
}

void pfnic_roce_exit(PfnicState *s)
{
    timer_free(s->wire_timer);
}
