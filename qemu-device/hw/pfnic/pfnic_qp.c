/*
 * pfnic verbs: queue pair execution
 *
 * A QP's send WQEs run in the engine's bottom half (pfnic_engine.c), one
 * chunk at a time: a chunk never crosses a page on either side, so a WQE
 * can stop after any chunk and resume. Loopback: the destination QP is one
 * of ours, in any context. Local addresses are translated in the QP's
 * context, remote ones (receive buffers, RDMA targets, atomics) in the
 * destination QP's context. A page that is not present becomes a page
 * request in that context's PASID with the QP's own group index (256 +
 * QPN); the QP waits and every other QP and context goes on. An MR with a
 * translation table (ABI 1.8) is translated through it instead
 * (pfnic_mr_translate): a page its entry refuses fails the WQE at once,
 * as an unmapped page does, and no page request is sent; with FAULT (ABI
 * 1.9) the QP waits for the driver instead (a PAGE_FAULT event, then
 * FAULT_RESUME), as it would for a page request.
 *
 * RC connections are checked at every chunk: a destination accepts only
 * the QP it was connected to (number and generation), as on a wire.
 *
 * A sender of SEND or WITH_IMM takes the destination's head receive WQE
 * for itself (rq_owner) until its message is complete, so two senders
 * never share one receive WQE; the head only moves when the receive
 * completes. A destination with a shared receive queue (ABI 1.11) takes
 * the SRQ's head WQE into a slot of its own instead, and keeps it until
 * a message completes in it: the loopback sender and the wire responder
 * both go through pfnic_qp_recv_peek/consume. Other QPs are named by
 * number and generation, MRs by index and key, and both are checked again
 * at every chunk: destroying them mid-transfer fails the WQE instead of
 * leaving a dangling reference.
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
#include "system/dma.h"
#include "pfnic.h"
#include "pfnic_regs.h"
#include "trace.h"

/* Chunks (at most a page each) a QP may process per engine run. */
#define PFNIC_QP_CHUNKS_PER_RUN 16
/* Completions a QP in ERR may flush per engine run. */
#define PFNIC_QP_FLUSH_PER_RUN  64
#define PFNIC_RNR_FOREVER       7

/* The IB minimum RNR NAK timer, in units of 10 us (encoding 0: 655.36 ms) */
static const uint32_t pfnic_rnr_10us[32] = {
    65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
    256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288,
    16384, 24576, 32768, 49152,
};

/* The RNR NAK timer @timer (IB encoding 0..31) in ns */
int64_t pfnic_rnr_timer_ns(uint32_t timer)
{
    return (int64_t)pfnic_rnr_10us[timer & 31] * 10 * SCALE_US;
}

/* The local ACK timeout @timeout (IB: 4.096 us * 2^timeout) in ns; 0: none */
int64_t pfnic_ack_timeout_ns(uint32_t timeout)
{
    return timeout ? 4096ll << MIN(timeout, 31) : 0;
}

typedef enum {
    PFNIC_QP_MORE,          /* a chunk was processed */
    PFNIC_QP_WAIT,          /* waiting: page, RNR or another sender */
    PFNIC_QP_DONE,          /* the WQE completed */
} PfnicQpStep;

static bool pfnic_op_rdma(uint8_t op)
{
    return op == PFNIC_WR_RDMA_WRITE || op == PFNIC_WR_RDMA_WRITE_WITH_IMM ||
           op == PFNIC_WR_RDMA_READ;
}

uint8_t pfnic_wc_opcode(uint8_t op)
{
    switch (op) {
    case PFNIC_WR_RDMA_WRITE:
    case PFNIC_WR_RDMA_WRITE_WITH_IMM:
        return PFNIC_WC_RDMA_WRITE;
    case PFNIC_WR_RDMA_READ:
        return PFNIC_WC_RDMA_READ;
    case PFNIC_WR_ATOMIC_CMP_AND_SWP:
        return PFNIC_WC_COMP_SWAP;
    case PFNIC_WR_ATOMIC_FETCH_AND_ADD:
        return PFNIC_WC_FETCH_ADD;
    case PFNIC_WR_LOCAL_INV:
        return PFNIC_WC_LOCAL_INV;
    case PFNIC_WR_REG_MR:
        return PFNIC_WC_REG_MR;
    }
    return PFNIC_WC_SEND;
}

/* Remote access a WQE needs on the destination (QP and MR). */
static uint32_t pfnic_op_remote_access(uint8_t op)
{
    switch (op) {
    case PFNIC_WR_RDMA_WRITE:
    case PFNIC_WR_RDMA_WRITE_WITH_IMM:
        return PFNIC_ACCESS_REMOTE_WRITE;
    case PFNIC_WR_RDMA_READ:
        return PFNIC_ACCESS_REMOTE_READ;
    }
    return PFNIC_ACCESS_REMOTE_ATOMIC;
}

PfnicQp *pfnic_qp_get(PfnicState *s, uint32_t qpn)
{
    return qpn < PFNIC_MAX_QPS && s->qps[qpn].valid ? &s->qps[qpn] : NULL;
}

/* Count a page request just sent (if it was: the queue may be full). */
static void pfnic_qp_count_request(PfnicQp *qp, uint32_t before)
{
    if (qp->pw.requests != before) {
        qp->page_requests++;
        if (qp->pw.remote) {
            /* A remote fault is an RNR wait on a wire. */
            qp->rnr_waits++;
            qp->rwqe_requests++;
        }
    }
}

/* Write the heads to the QP record. */
void pfnic_qp_record(PfnicState *s, PfnicQp *qp)
{
    uint32_t rec[2] = { cpu_to_le32(qp->sq_head), cpu_to_le32(qp->rq_head) };

    if (pci_dma_write(PCI_DEVICE(s), qp->record, rec, sizeof(rec)) !=
        MEMTX_OK) {
        pfnic_guest_error(s, "QP record unwritable");
        pfnic_qp_enter_err(s, qp, true);
    }
}

bool pfnic_wqe_read(PfnicState *s, uint64_t base, uint32_t entries,
                    uint16_t index, PfnicWqe *w)
{
    hwaddr addr = base + (hwaddr)(index & (entries - 1)) * PFNIC_WQE_SIZE;

    if (pci_dma_read(PCI_DEVICE(s), addr, w, sizeof(*w)) != MEMTX_OK) {
        return false;
    }
    w->wr_id = le64_to_cpu(w->wr_id);
    w->remote_addr = le64_to_cpu(w->remote_addr);
    w->rkey = le32_to_cpu(w->rkey);
    w->compare_add = le64_to_cpu(w->compare_add);
    w->swap = le64_to_cpu(w->swap);
    for (int i = 0; i < PFNIC_MAX_SGE; i++) {
        w->sge[i].addr = le64_to_cpu(w->sge[i].addr);
        w->sge[i].length = le32_to_cpu(w->sge[i].length);
        w->sge[i].lkey = le32_to_cpu(w->sge[i].lkey);
    }
    if (w->opcode == PFNIC_WR_REG_MR) {
        /* ABI 1.21: its two 32-bit fields the RC layout leaves unconverted */
        w->reg.access = le32_to_cpu(w->reg.access);
        w->reg.pages = le32_to_cpu(w->reg.pages);
    }
    return true;
}

/*
 * pfnic_wqe_read() took bytes 0x10..0x2f as an RC WQE's fields: a UD WQE's
 * are others (ABI 1.19), so take them again.
 */
static void pfnic_wqe_ud_fields(PfnicWqe *w)
{
    w->remote_addr = cpu_to_le64(w->remote_addr);
    w->rkey = cpu_to_le32(w->rkey);
    w->compare_add = cpu_to_le64(w->compare_add);
    w->ud.remote_qpn = le32_to_cpu(w->ud.remote_qpn) & 0xffffff;
    w->ud.remote_qkey = le32_to_cpu(w->ud.remote_qkey);
    w->ud.dest_ip = le32_to_cpu(w->ud.dest_ip);
}

/* Let senders parked behind @qp's receive queue or RNR timer go on. */
void pfnic_qp_wake_senders(PfnicState *s, uint32_t qpn)
{
    for (uint32_t i = 0; i < PFNIC_MAX_QPS; i++) {
        PfnicQp *q = &s->qps[i];

        if (q->valid && q->rnr_waiting && q->busy && q->dest == qpn) {
            q->rnr_waiting = false;
        }
    }
    qemu_bh_schedule(s->engine_bh);
}

/* --- receive WQEs: the QP's receive queue, or its SRQ (ABI 1.11) ------- */

/* Write the head of SRQ @srqn to its record. */
static void pfnic_srq_record(PfnicState *s, uint32_t srqn)
{
    uint32_t head = cpu_to_le32(s->srqs[srqn].head);

    if (pci_dma_write(PCI_DEVICE(s), s->srqs[srqn].record, &head,
                      sizeof(head)) != MEMTX_OK) {
        /* The WQE is taken all the same: the record is software's view. */
        pfnic_guest_error(s, "SRQ record unwritable");
    }
}

/*
 * @qp takes the WQE at its SRQ's head into its held slot: the head moves
 * at once (and is written to the record), and an armed limit the take
 * goes below queues SRQ_LIMIT and disarms.
 */
static PfnicRecvPeek pfnic_srq_take(PfnicState *s, PfnicQp *qp)
{
    PfnicSrq *srq = qp->srqn < PFNIC_MAX_SRQS ? &s->srqs[qp->srqn] : NULL;

    if (!srq || !srq->valid || srq->ctx != qp->ctx) {
        /* QP_CREATE checked it, and SRQ_DESTROY waits for its QPs. */
        pfnic_guest_error(s, "QP attached to no SRQ");
        pfnic_qp_enter_err(s, qp, true);
        return PFNIC_RECV_BROKEN;
    }
    if (srq->head == srq->tail) {
        return PFNIC_RECV_EMPTY;
    }
    if (!pfnic_wqe_read(s, srq->ring, srq->entries, srq->head,
                        &qp->srq_wqe)) {
        pfnic_guest_error(s, "SRQ ring unreadable");
        pfnic_qp_enter_err(s, qp, true);
        return PFNIC_RECV_BROKEN;
    }
    trace_pfnic_srq_take(qp->srqn, srq->head, qp->qpn, qp->srq_wqe.wr_id);
    qp->srq_held = true;
    srq->head++;
    pfnic_srq_record(s, qp->srqn);
    if (srq->limit && (uint16_t)(srq->tail - srq->head) < srq->limit) {
        trace_pfnic_srq_limit(qp->srqn, srq->limit,
                              (uint16_t)(srq->tail - srq->head));
        srq->limit = 0;
        if (pfnic_event(s, PFNIC_EV_SRQ_LIMIT, qp->srqn)) {
            srq->limit_events++;
        }
    }
    return PFNIC_RECV_OK;
}

/*
 * The receive WQE the next message at @qp lands in, into @w: the head of
 * its receive queue, or the WQE it holds from its SRQ (taken now if it
 * holds none). The WQE stays the QP's until pfnic_qp_recv_consume(): a
 * message that does not finish leaves it for the next one.
 */
PfnicRecvPeek pfnic_qp_recv_peek(PfnicState *s, PfnicQp *qp, PfnicWqe *w)
{
    if (qp->has_srq) {
        PfnicRecvPeek r = qp->srq_held ? PFNIC_RECV_OK :
                          pfnic_srq_take(s, qp);

        if (r == PFNIC_RECV_OK) {
            *w = qp->srq_wqe;
        }
        return r;
    }
    if (qp->rq_head == qp->rq_tail) {
        return PFNIC_RECV_EMPTY;
    }
    if (!pfnic_wqe_read(s, qp->rq, qp->rq_entries, qp->rq_head, w)) {
        pfnic_guest_error(s, "receive queue unreadable");
        pfnic_qp_enter_err(s, qp, true);
        return PFNIC_RECV_BROKEN;
    }
    return PFNIC_RECV_OK;
}

/* A message completed (its CQE follows) in the WQE peek gave: consume it. */
void pfnic_qp_recv_consume(PfnicState *s, PfnicQp *qp)
{
    if (qp->has_srq) {
        qp->srq_held = false;
        return;
    }
    qp->rq_head++;
    pfnic_qp_record(s, qp);
}

/* RESET or destroy: the WQE the QP holds from its SRQ goes, without a CQE. */
void pfnic_qp_recv_drop(PfnicState *s, PfnicQp *qp)
{
    if (qp->srq_held) {
        trace_pfnic_srq_drop(qp->srqn, qp->qpn, qp->srq_wqe.wr_id);
    }
    qp->srq_held = false;
    qp->last_wqe_pending = false;
}

/* SRQ_DB in @ctx's page: SRQN << 16 | the SRQ's new tail. */
void pfnic_srq_doorbell(PfnicContext *ctx, uint32_t val)
{
    PfnicState *s = ctx->s;
    uint32_t srqn = val >> 16;
    uint16_t tail = val;
    PfnicSrq *srq;

    if (srqn >= PFNIC_MAX_SRQS || !s->srqs[srqn].valid ||
        s->srqs[srqn].ctx != ctx->index) {
        pfnic_guest_error(s, "SRQ_DB for an SRQ of another context");
        return;
    }
    srq = &s->srqs[srqn];
    trace_pfnic_srq_doorbell(ctx->index, srqn, tail);
    /* Work already posted stays posted: a tail only moves forward. */
    if ((uint16_t)(tail - srq->head) > srq->entries ||
        (uint16_t)(tail - srq->head) < (uint16_t)(srq->tail - srq->head)) {
        pfnic_guest_error(s, "SRQ doorbell past the queue or moving back");
        return;
    }
    srq->tail = tail;
    /* The senders waiting for a receive WQE at any QP that takes from it */
    for (uint32_t i = 0; i < PFNIC_MAX_QPS; i++) {
        PfnicQp *q = &s->qps[i], *dest;

        if (!q->valid || !q->rnr_waiting || !q->busy) {
            continue;
        }
        dest = pfnic_qp_get(s, q->dest);
        if (dest && dest->has_srq && dest->srqn == srqn) {
            q->rnr_waiting = false;
        }
    }
    qemu_bh_schedule(s->engine_bh);
}

/* Give up the receive WQE @qp took at its destination, if it still has it. */
static void pfnic_qp_release_dest(PfnicState *s, PfnicQp *qp)
{
    PfnicQp *dest;

    if (!qp->started || !pfnic_op_recv(qp->wqe.opcode)) {
        return;
    }
    dest = pfnic_qp_get(s, qp->dest);
    if (dest && dest->gen == qp->dest_gen && dest->rq_owner == qp->qpn) {
        dest->rq_owner = PFNIC_QPN_NONE;
        qemu_bh_schedule(s->engine_bh);
    }
}

/*
 * Drop what @qp is executing: its WQE (which stays at the send head), its
 * page and RNR waits, and the receive WQE it took at its destination.
 * Other senders lose our receive queue and fail at their next chunk.
 */
void pfnic_qp_abort(PfnicState *s, PfnicQp *qp)
{
    pfnic_qp_release_dest(s, qp);
    qp->rq_owner = PFNIC_QPN_NONE;
    qp->busy = qp->started = qp->rnr_waiting = false;
    pfnic_page_wait_reset(s, &qp->pw);
    pfnic_roce_qp_reset(s, qp);
}

void pfnic_qp_enter_err(PfnicState *s, PfnicQp *qp, bool fatal)
{
    if (qp->state == PFNIC_QPS_ERR) {
        return;
    }
    trace_pfnic_qp_state(qp->qpn, qp->state, PFNIC_QPS_ERR, fatal);
    pfnic_qp_abort(s, qp);
    qp->state = PFNIC_QPS_ERR;
    /* With an SRQ, the flush ends with LAST_WQE_REACHED (ABI 1.11). */
    qp->last_wqe_pending = qp->has_srq;
    if (fatal) {
        pfnic_event(s, PFNIC_EV_QP_FATAL, qp->qpn);
    }
    /* The flush runs in the engine; so do senders that lost our queue. */
    pfnic_qp_wake_senders(s, qp->qpn);
}

void pfnic_qp_set_state(PfnicState *s, PfnicQp *qp, uint32_t state)
{
    switch (state) {
    case PFNIC_QPS_ERR:
        pfnic_qp_enter_err(s, qp, false);
        return;
    case PFNIC_QPS_RESET:
        trace_pfnic_qp_state(qp->qpn, qp->state, state, false);
        pfnic_qp_abort(s, qp);
        pfnic_qp_recv_drop(s, qp);
        qp->sq_head = qp->sq_tail;
        qp->rq_head = qp->rq_tail;
        qp->state = state;
        pfnic_qp_record(s, qp);
        pfnic_qp_wake_senders(s, qp->qpn);
        return;
    }
    trace_pfnic_qp_state(qp->qpn, qp->state, state, false);
    qp->state = state;
    /* Senders waiting for us to become ready (or connected) ask again. */
    pfnic_qp_wake_senders(s, qp->qpn);
}

/* Stop executing the QPs of a context that stops; fail its peers' waits. */
void pfnic_qp_ctx_stop(PfnicState *s, PfnicContext *ctx)
{
    for (uint32_t i = 0; i < PFNIC_MAX_QPS; i++) {
        PfnicQp *qp = &s->qps[i];

        if (!qp->valid) {
            continue;
        }
        if (qp->ctx == ctx->index) {
            pfnic_qp_abort(s, qp);
        } else if ((qp->pw.waiting || qp->pw.retry_prq) &&
                   qp->pw.ctx == ctx->index) {
            /*
             * Its next chunk finds the destination gone. The response
             * will not come (the context's groups were dropped): run it
             * even if no QP of ours is left to wake.
             */
            qp->pw.waiting = qp->pw.retry_prq = false;
            qemu_bh_schedule(s->engine_bh);
        }
    }
    for (uint32_t i = 0; i < PFNIC_MAX_QPS; i++) {
        PfnicQp *qp = &s->qps[i];

        if (qp->valid && qp->ctx == ctx->index) {
            pfnic_qp_wake_senders(s, qp->qpn);
        }
    }
    /* Peers waiting for the driver to fill a table of the context too */
    pfnic_mr_faults_ctx_stop(s, ctx->index);
}

static void pfnic_qp_prq_retry_one(PfnicState *s, PfnicQp *qp,
                                   PfnicPageWait *w)
{
    PfnicContext *ctx;
    uint32_t before;

    if (!w->retry_prq) {
        return;
    }
    ctx = &s->contexts[w->ctx];
    if (!ctx->enabled || ctx->pasid != w->pasid) {
        w->retry_prq = false;
        return;
    }
    before = w->requests;
    pfnic_page_fault(s, w, ctx, w->mr >= 0 ? &s->mrs[w->mr] : NULL,
                     w->fault_addr, w->fault_len, w->fault_write);
    if (w == &qp->pw) {
        pfnic_qp_count_request(qp, before);
    } else if (w->requests != before) {
        qp->page_requests++;
    }
}

void pfnic_qp_prq_retry(PfnicState *s)
{
    for (uint32_t i = 0; i < PFNIC_MAX_QPS; i++) {
        PfnicQp *qp = &s->qps[i];

        if (qp->valid) {
            pfnic_qp_prq_retry_one(s, qp, &qp->pw);
            pfnic_qp_prq_retry_one(s, qp, &qp->rpw);
        }
    }
}

void pfnic_qp_rnr_timer(void *opaque)
{
    PfnicState *s = opaque;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL), next = INT64_MAX;

    for (uint32_t i = 0; i < PFNIC_MAX_QPS; i++) {
        PfnicQp *qp = &s->qps[i];

        if (!qp->valid || !qp->rnr_waiting) {
            continue;
        }
        if (qp->rnr_deadline <= now) {
            qp->rnr_waiting = false;
        } else {
            next = MIN(next, qp->rnr_deadline);
        }
    }
    if (next != INT64_MAX) {
        timer_mod(s->rnr_timer, next);
    }
    qemu_bh_schedule(s->engine_bh);
}

/* --- doorbells --------------------------------------------------------- */

void pfnic_qp_doorbell(PfnicContext *ctx, hwaddr offset, uint32_t val)
{
    PfnicState *s = ctx->s;
    uint32_t qpn = val >> 16;
    uint16_t tail = val;
    bool send = offset == PFNIC_DB_SQ;
    uint16_t head, old;
    PfnicQp *qp;

    if (!ctx->enabled) {
        pfnic_guest_error(s, "verbs doorbell of a stopped context");
        return;
    }
    if (offset == PFNIC_DB_CQ_ARM) {
        pfnic_cq_arm(ctx, val);
        return;
    }
    if (offset == PFNIC_DB_SRQ) {
        pfnic_srq_doorbell(ctx, val);
        return;
    }
    qp = pfnic_qp_get(s, qpn);
    if (!qp || qp->ctx != ctx->index) {
        pfnic_guest_error(s, "doorbell for a QP of another context");
        return;
    }
    if (!send && qp->has_srq) {
        /* Its receives come from the SRQ: it has no receive queue. */
        pfnic_guest_error(s, "RQ_DB for a QP with an SRQ");
        return;
    }
    trace_pfnic_qp_doorbell(ctx->index, qpn, send, tail);
    head = send ? qp->sq_head : qp->rq_head;
    old = send ? qp->sq_tail : qp->rq_tail;
    /* Work already posted stays posted: a tail only moves forward. */
    if ((uint16_t)(tail - head) > (send ? qp->sq_entries : qp->rq_entries) ||
        (uint16_t)(tail - head) < (uint16_t)(old - head)) {
        pfnic_guest_error(s, "QP doorbell past the queue or moving back");
        pfnic_qp_enter_err(s, qp, true);
        return;
    }
    if (send) {
        qp->sq_tail = tail;
        qemu_bh_schedule(s->engine_bh);
    } else {
        qp->rq_tail = tail;
        pfnic_qp_wake_senders(s, qpn);
    }
}

/* --- completions ------------------------------------------------------- */

/*
 * Complete the send WQE @w at the head with @status (@len bytes moved,
 * @requests page requests); errors put the QP in ERR.
 */
static void pfnic_qp_ahead_settle(PfnicState *s, PfnicQp *qp, uint16_t wqe,
                                  bool used);

void pfnic_qp_complete_wqe(PfnicState *s, PfnicQp *qp, const PfnicWqe *w,
                           uint64_t len, uint32_t requests, uint8_t status)
{
    PfnicCqe cqe = {
        .wr_id = w->wr_id,
        .byte_len = len,
        .qp_num = qp->qpn,
        .status = status,
        .opcode = pfnic_wc_opcode(w->opcode),
        .vendor_err = requests,
    };

    trace_pfnic_qp_wqe_done(qp->qpn, qp->sq_head, status, len, requests);
    qp->wqes_completed++;
    if (status == PFNIC_WC_SUCCESS) {
        qp->bytes += len;
    }
    /*
     * The slot is free before its completion is visible: software that
     * polled the completion may post into the slot at once.
     */
    pfnic_qp_ahead_settle(s, qp, qp->sq_head, status == PFNIC_WC_SUCCESS);
    qp->sq_head++;
    pfnic_qp_record(s, qp);
    if (status != PFNIC_WC_SUCCESS || w->flags & PFNIC_SEND_SIGNALED ||
        qp->flags & PFNIC_QP_FLAG_SIGNAL_ALL) {
        pfnic_cqe_write(s, qp->scqn, &cqe, false);
    }
    if (status != PFNIC_WC_SUCCESS) {
        pfnic_qp_enter_err(s, qp, false);
    }
}

/* Complete the send WQE at the head with @status; errors put the QP in ERR. */
static void pfnic_qp_complete(PfnicState *s, PfnicQp *qp, uint8_t status)
{
    if (status != PFNIC_WC_SUCCESS) {
        pfnic_qp_release_dest(s, qp);
    }
    qp->busy = qp->started = false;
    pfnic_qp_complete_wqe(s, qp, &qp->wqe,
                          status == PFNIC_WC_SUCCESS ? qp->len : qp->done,
                          qp->pw.requests, status);
}

/* Complete the receive WQE the sender took at @dest, and release it. */
static void pfnic_qp_recv_complete(PfnicState *s, PfnicQp *qp, PfnicQp *dest,
                                   uint8_t status)
{
    uint8_t op = qp->wqe.opcode;
    /* UD: the first 40 bytes of the receive buffer are the GRH's. */
    uint32_t grh = qp->ud ? PFNIC_GRH_LEN : 0;
    /* ABI 1.21: the key it invalidated, as posted (little endian) */
    bool inv = op == PFNIC_WR_SEND_WITH_INV && status == PFNIC_WC_SUCCESS;
    PfnicCqe cqe = {
        .wr_id = qp->rwqe.wr_id,
        .byte_len = status == PFNIC_WC_SUCCESS ? grh + qp->len : 0,
        .imm_data = pfnic_op_imm(op) || inv ? qp->wqe.imm_data : 0,
        .qp_num = dest->qpn,
        .src_qp = qp->qpn,
        .status = status,
        .opcode = op == PFNIC_WR_RDMA_WRITE_WITH_IMM ?
                  PFNIC_WC_RECV_RDMA_WITH_IMM : PFNIC_WC_RECV,
        .wc_flags = (pfnic_op_imm(op) ? PFNIC_WC_WITH_IMM : 0) |
                    (inv ? PFNIC_WC_WITH_INV : 0) |
                    (qp->ud && qp->wqe.ud.ah_flags & PFNIC_UD_AH_GRH ?
                     PFNIC_WC_GRH : 0),
        .vendor_err = qp->rwqe_requests,
    };

    trace_pfnic_qp_recv_done(dest->qpn, dest->rq_head, status, qp->qpn);
    dest->rq_owner = PFNIC_QPN_NONE;
    dest->wqes_completed++;
    if (status == PFNIC_WC_SUCCESS) {
        dest->bytes += qp->len;
    }
    pfnic_qp_recv_consume(s, dest);
    pfnic_cqe_write(s, dest->rcqn, &cqe,
                    qp->wqe.flags & PFNIC_SEND_SOLICITED);
    if (status != PFNIC_WC_SUCCESS) {
        pfnic_qp_enter_err(s, dest, false);
    }
    qemu_bh_schedule(s->engine_bh);
}

/*
 * The receiver failed the message: it completes @rstatus, we @status (UD:
 * SUCCESS, a datagram's sender learns nothing of its receiver).
 */
static PfnicQpStep pfnic_qp_recv_fail(PfnicState *s, PfnicQp *qp,
                                      PfnicQp *dest, uint8_t rstatus,
                                      uint8_t status)
{
    pfnic_qp_recv_complete(s, qp, dest, rstatus);
    qp->started = false;        /* nothing left to release */
    pfnic_qp_complete(s, qp, qp->ud ? PFNIC_WC_SUCCESS : status);
    return PFNIC_QP_DONE;
}

static PfnicQpStep pfnic_qp_fail(PfnicState *s, PfnicQp *qp, uint8_t status)
{
    pfnic_qp_complete(s, qp, status);
    return PFNIC_QP_DONE;
}

/*
 * UD: the datagram goes nowhere (no such QP, another Q_Key, no receive
 * WQE, the destination gone): the sender completes it as sent.
 */
static PfnicQpStep pfnic_qp_ud_drop(PfnicState *s, PfnicQp *qp,
                                    const char *why)
{
    trace_pfnic_ud_drop(qp->qpn, qp->wqe.ud.remote_qpn, why);
    pfnic_qp_release_dest(s, qp);
    return pfnic_qp_fail(s, qp, PFNIC_WC_SUCCESS);
}

/* --- execution --------------------------------------------------------- */

/*
 * RC: a responder accepts requests only from the QP it was connected to
 * (its number and the generation it had then), so a process that learns
 * another's QPN can neither send into that QP nor reach its memory.
 */
static bool pfnic_qp_is_peer(const PfnicQp *dest, const PfnicQp *qp)
{
    /* A QP connected over the wire takes nothing from this device. */
    return !dest->wire && dest->dest_qpn == qp->qpn &&
           dest->peer_gen == qp->gen;
}

static bool pfnic_qp_ready(PfnicState *s, const PfnicQp *dest)
{
    return (dest->state == PFNIC_QPS_RTR || dest->state == PFNIC_QPS_RTS) &&
           s->contexts[dest->ctx].enabled;
}

/* The destination, if it still is our connected peer and ready. */
static PfnicQp *pfnic_qp_dest(PfnicState *s, PfnicQp *qp)
{
    PfnicQp *dest = pfnic_qp_get(s, qp->dest);

    if (!dest || dest->gen != qp->dest_gen || !pfnic_qp_ready(s, dest) ||
        (!qp->ud && !pfnic_qp_is_peer(dest, qp))) {
        return NULL;
    }
    if (qp->started && pfnic_op_recv(qp->wqe.opcode) &&
        dest->rq_owner != qp->qpn) {
        return NULL;
    }
    return dest;
}

/* Where byte @off of a scatter/gather list is: entry *i, offset *o. */
bool pfnic_sge_at(const PfnicWqeSge *sge, int n, uint64_t off, int *i,
                  uint64_t *o)
{
    for (int k = 0; k < n; k++) {
        if (off < sge[k].length) {
            *i = k;
            *o = off;
            return true;
        }
        off -= sge[k].length;
    }
    return false;
}

/* The RNR NAK: wait the destination's timer, or fail after rnr_retry. */
static PfnicQpStep pfnic_qp_rnr(PfnicState *s, PfnicQp *qp, PfnicQp *dest)
{
    int64_t ns;

    if (!qp->rnr_left) {
        trace_pfnic_qp_rnr(qp->qpn, dest->qpn, 0, 0);
        return pfnic_qp_fail(s, qp, PFNIC_WC_RNR_RETRY_EXC_ERR);
    }
    ns = (int64_t)pfnic_rnr_10us[dest->min_rnr_timer] * 10 * SCALE_US;
    if (qp->rnr_retry != PFNIC_RNR_FOREVER) {
        qp->rnr_left--;
    } else {
        /*
         * Retrying forever: back off exponentially up to the longest RNR
         * timer, so an idle receiver does not keep QEMU busy. A receive
         * doorbell at the destination still retries at once.
         */
        ns = MIN(ns << MIN(qp->rnr_backoff, 16),
                 (int64_t)pfnic_rnr_10us[0] * 10 * SCALE_US);
        qp->rnr_backoff++;
    }
    trace_pfnic_qp_rnr(qp->qpn, dest->qpn, qp->rnr_left, ns);
    qp->rnr_waits++;
    qp->rnr_waiting = true;
    qp->rnr_deadline = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) + ns;
    timer_mod_anticipate_ns(s->rnr_timer, qp->rnr_deadline);
    return PFNIC_QP_WAIT;
}

/*
 * The destination is not (or no longer) our ready peer. On a wire nothing
 * would answer: the requester asks again after each local ACK timeout,
 * retry_cnt times, then completes RETRY_EXC_ERR (timeout 0: it waits for
 * ever). So here, so that a peer still on its way to RTR (the other side
 * of a connection setup) is waited for, not failed. Its transition asks
 * again at once (pfnic_qp_set_state); an early wake-up costs no retry.
 */
static PfnicQpStep pfnic_qp_unanswered(PfnicState *s, PfnicQp *qp)
{
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    int64_t t = pfnic_ack_timeout_ns(qp->timeout);

    if (!qp->ack_deadline) {
        qp->ack_deadline = t ? now + t : INT64_MAX;
        trace_pfnic_qp_unanswered(qp->qpn, qp->dest, qp->retry_left, t);
    }
    /* Every timeout that ended since is a retry (the engine may run late). */
    while (qp->ack_deadline <= now) {
        if (!qp->retry_left) {
            trace_pfnic_qp_unanswered(qp->qpn, qp->dest, 0, 0);
            return pfnic_qp_fail(s, qp, PFNIC_WC_RETRY_EXC_ERR);
        }
        qp->retry_left--;
        qp->ack_deadline = t ? qp->ack_deadline + t : INT64_MAX;
        trace_pfnic_qp_unanswered(qp->qpn, qp->dest, qp->retry_left, t);
    }
    qp->rnr_waiting = true;
    qp->rnr_deadline = qp->ack_deadline;
    if (t) {
        timer_mod_anticipate_ns(s->rnr_timer, qp->ack_deadline);
    }
    return PFNIC_QP_WAIT;
}

/* Our peer answered: the retries count timeouts in a row. */
static void pfnic_qp_answered(PfnicQp *qp)
{
    qp->ack_deadline = 0;
    qp->retry_left = qp->retry_cnt;
}

/*
 * The checks of a send WQE that need nothing but the WQE and our own keys:
 * format and local keys. Returns the completion status (SUCCESS: go on)
 * and the message length.
 */
uint8_t pfnic_wqe_check(PfnicState *s, PfnicQp *qp, const PfnicWqe *w,
                        uint64_t *len)
{
    uint8_t op = w->opcode;
    bool lwrite = op == PFNIC_WR_RDMA_READ || pfnic_op_atomic(op);

    if ((op > PFNIC_WR_ATOMIC_FETCH_AND_ADD && !pfnic_op_local(op) &&
         op != PFNIC_WR_SEND_WITH_INV) ||
        w->flags & ~PFNIC_SEND_FLAGS_MASK || w->num_sge > PFNIC_MAX_SGE ||
        (pfnic_op_atomic(op) &&
         (w->num_sge != 1 || w->sge[0].length != 8 || w->remote_addr % 8)) ||
        (pfnic_op_local(op) && w->num_sge)) {
        return PFNIC_WC_LOC_QP_OP_ERR;
    }
    *len = 0;
    for (int i = 0; i < w->num_sge; i++) {
        *len += w->sge[i].length;
        if (w->sge[i].length &&
            !pfnic_mr_lookup(s, w->sge[i].lkey, qp->ctx, qp->pd,
                             w->sge[i].addr, w->sge[i].length,
                             lwrite ? PFNIC_ACCESS_LOCAL_WRITE : 0)) {
            return PFNIC_WC_LOC_PROT_ERR;
        }
    }
    return PFNIC_WC_SUCCESS;
}

static bool pfnic_qp_xlate(PfnicState *s, PfnicQp *qp, PfnicContext *ctx,
                           bool remote, PfnicMr *mr, uint64_t va,
                           uint64_t len, bool write, hwaddr *pa,
                           AddressSpace **as);

/*
 * UD (ABI 1.19): a SEND of at most the port's MTU to the QP its WQE names,
 * here or on the wire, which takes it if it is a ready UD QP with the
 * Q_Key the datagram carries and a receive WQE posted; else the datagram
 * is lost, and the sender completes it as sent either way (C10-93.1.1: a
 * message larger than the MTU is not sent, and is no error).
 */
static PfnicQpStep pfnic_qp_ud_start(PfnicState *s, PfnicQp *qp)
{
    PfnicWqe *w = &qp->wqe;
    PfnicQp *dest;
    uint64_t rlen = 0;
    uint8_t st;

    /* SEND and SEND_WITH_IMM only: an invalidation needs a connection. */
    if ((w->opcode != PFNIC_WR_SEND && w->opcode != PFNIC_WR_SEND_WITH_IMM) ||
        w->ud.ah_flags & ~PFNIC_UD_AH_MASK) {
        return pfnic_qp_fail(s, qp, PFNIC_WC_LOC_QP_OP_ERR);
    }
    st = pfnic_wqe_check(s, qp, w, &qp->len);
    if (st != PFNIC_WC_SUCCESS) {
        return pfnic_qp_fail(s, qp, st);
    }
    if (qp->len > PFNIC_UD_MAX_MSG) {
        return pfnic_qp_ud_drop(s, qp, "larger than the MTU");
    }
    if (pfnic_ud_wire(s, w)) {
        st = pfnic_ud_send(s, qp);
        if (st == PFNIC_UD_SEND_WAIT) {
            return PFNIC_QP_WAIT;
        }
        return pfnic_qp_fail(s, qp, st);
    }
    dest = pfnic_qp_get(s, w->ud.remote_qpn);
    if (!dest || !dest->ud || !pfnic_qp_ready(s, dest)) {
        return pfnic_qp_ud_drop(s, qp, "no ready UD QP");
    }
    if (pfnic_ud_qkey(qp, w) != dest->qkey) {
        dest->refused++;
        return pfnic_qp_ud_drop(s, qp, "Q_Key");
    }
    if (dest->rq_owner != PFNIC_QPN_NONE) {
        /* Another sender fills the head receive WQE: wait for it. */
        trace_pfnic_qp_blocked(qp->qpn, dest->qpn, dest->rq_owner);
        return PFNIC_QP_WAIT;
    }
    if (pfnic_qp_recv_peek(s, dest, &qp->rwqe) != PFNIC_RECV_OK) {
        /* Counted where an RC responder counts its RNR NAKs */
        dest->rnr_naks_sent++;
        return pfnic_qp_ud_drop(s, qp, "no receive WQE");
    }
    dest->rq_owner = qp->qpn;
    qp->dest = dest->qpn;
    qp->dest_gen = dest->gen;
    qp->started = true;
    qp->grh_done = false;
    qp->rwqe_requests = 0;
    if (qp->rwqe.num_sge > PFNIC_MAX_SGE) {
        return pfnic_qp_recv_fail(s, qp, dest, PFNIC_WC_LOC_QP_OP_ERR, 0);
    }
    for (int i = 0; i < qp->rwqe.num_sge; i++) {
        PfnicWqeSge *g = &qp->rwqe.sge[i];

        rlen += g->length;
        if (g->length &&
            !pfnic_mr_lookup(s, g->lkey, dest->ctx, pfnic_qp_recv_pd(s, dest),
                             g->addr, g->length, PFNIC_ACCESS_LOCAL_WRITE)) {
            return pfnic_qp_recv_fail(s, qp, dest, PFNIC_WC_LOC_PROT_ERR, 0);
        }
    }
    if (rlen < PFNIC_GRH_LEN + qp->len) {
        return pfnic_qp_recv_fail(s, qp, dest, PFNIC_WC_LOC_LEN_ERR, 0);
    }
    return PFNIC_QP_MORE;
}

/*
 * UD: write the GRH into the first 40 bytes of the receive WQE (a page
 * that is not present waits as any remote page does); with no GRH in the
 * address handle the 40 bytes are skipped.
 */
static PfnicQpStep pfnic_qp_ud_grh(PfnicState *s, PfnicQp *qp, PfnicQp *dest)
{
    PfnicContext *dctx = &s->contexts[dest->ctx];
    uint8_t grh[PFNIC_GRH_LEN];
    uint64_t off = 0;

    if (!(qp->wqe.ud.ah_flags & PFNIC_UD_AH_GRH)) {
        qp->grh_done = true;
        return PFNIC_QP_MORE;
    }
    pfnic_ud_grh_loopback(s, qp, &qp->wqe, qp->len, grh);
    while (off < PFNIC_GRH_LEN) {
        PfnicWqeSge *g;
        uint64_t o, va, n;
        AddressSpace *as;
        PfnicMr *mr;
        hwaddr pa;
        int i;

        if (!pfnic_sge_at(qp->rwqe.sge, qp->rwqe.num_sge, off, &i, &o)) {
            return pfnic_qp_recv_fail(s, qp, dest, PFNIC_WC_LOC_LEN_ERR, 0);
        }
        g = &qp->rwqe.sge[i];
        mr = pfnic_mr_lookup(s, g->lkey, dest->ctx, pfnic_qp_recv_pd(s, dest),
                             g->addr, g->length, PFNIC_ACCESS_LOCAL_WRITE);
        if (!mr) {
            return pfnic_qp_recv_fail(s, qp, dest, PFNIC_WC_LOC_PROT_ERR, 0);
        }
        va = g->addr + o;
        n = MIN(PFNIC_GRH_LEN - off, g->length - o);
        n = MIN(n, PFNIC_PAGE_SIZE - (va & ~PFNIC_PAGE_MASK));
        if (!pfnic_qp_xlate(s, qp, dctx, true, mr, va, n, true, &pa, &as)) {
            return qp->pw.fault ? PFNIC_QP_MORE : PFNIC_QP_WAIT;
        }
        if (address_space_write(as, pa, MEMTXATTRS_UNSPECIFIED, grh + off,
                                n)) {
            return pfnic_qp_recv_fail(s, qp, dest, PFNIC_WC_LOC_PROT_ERR, 0);
        }
        off += n;
    }
    qp->grh_done = true;
    return PFNIC_QP_MORE;
}

/*
 * The checks before the first byte moves: WQE format, local keys, the
 * destination, the remote key, and the receive WQE (taken for us).
 */
static PfnicQpStep pfnic_qp_start(PfnicState *s, PfnicQp *qp)
{
    PfnicWqe *w = &qp->wqe;
    uint8_t op = w->opcode;
    PfnicQp *dest;
    uint64_t rlen = 0;
    uint8_t st;

    if (qp->ud) {
        return pfnic_qp_ud_start(s, qp);
    }
    st = pfnic_wqe_check(s, qp, w, &qp->len);
    if (st != PFNIC_WC_SUCCESS) {
        return pfnic_qp_fail(s, qp, st);
    }
    if (pfnic_op_local(op)) {
        /* ABI 1.21: no destination; everything before it has completed. */
        return pfnic_qp_fail(s, qp, pfnic_wqe_local(s, qp, w));
    }

    qp->dest = qp->dest_qpn;
    qp->dest_gen = qp->peer_gen;
    dest = pfnic_qp_get(s, qp->dest);
    if (dest && dest->gen == qp->dest_gen && pfnic_qp_ready(s, dest) &&
        !pfnic_qp_is_peer(dest, qp) && !qp->ack_deadline) {
        /*
         * On a wire the responder drops it: the requester times out.
         * Counted once for the work request, not again at each retry.
         */
        dest->refused++;
        trace_pfnic_qp_refused(dest->qpn, qp->qpn, dest->dest_qpn);
    }
    dest = pfnic_qp_dest(s, qp);
    if (!dest) {
        return pfnic_qp_unanswered(s, qp);
    }
    pfnic_qp_answered(qp);
    if (pfnic_op_rdma(op) || pfnic_op_atomic(op)) {
        if ((qp->len || pfnic_op_atomic(op)) &&
            !pfnic_mr_remote(s, w->rkey, dest, w->remote_addr,
                             pfnic_op_atomic(op) ? 8 : qp->len,
                             pfnic_op_remote_access(op))) {
            return pfnic_qp_fail(s, qp, PFNIC_WC_REM_ACCESS_ERR);
        }
    }
    if (pfnic_op_recv(op)) {
        if (dest->rq_owner != PFNIC_QPN_NONE) {
            /* Another sender fills the head receive WQE: wait for it. */
            trace_pfnic_qp_blocked(qp->qpn, dest->qpn, dest->rq_owner);
            return PFNIC_QP_WAIT;
        }
        switch (pfnic_qp_recv_peek(s, dest, &qp->rwqe)) {
        case PFNIC_RECV_OK:
            break;
        case PFNIC_RECV_EMPTY:
            return pfnic_qp_rnr(s, qp, dest);
        default:
            /* Its queue is unreadable: it entered ERR. */
            return pfnic_qp_fail(s, qp, PFNIC_WC_RETRY_EXC_ERR);
        }
        dest->rq_owner = qp->qpn;
        qp->started = true;
        qp->rwqe_requests = 0;
        qp->rnr_backoff = 0;
        if (pfnic_op_send(op)) {
            PfnicWqe *r = &qp->rwqe;

            if (r->num_sge > PFNIC_MAX_SGE) {
                return pfnic_qp_recv_fail(s, qp, dest,
                                          PFNIC_WC_LOC_QP_OP_ERR,
                                          PFNIC_WC_REM_OP_ERR);
            }
            for (int i = 0; i < r->num_sge; i++) {
                rlen += r->sge[i].length;
                if (r->sge[i].length &&
                    !pfnic_mr_lookup(s, r->sge[i].lkey, dest->ctx,
                                     pfnic_qp_recv_pd(s, dest),
                                     r->sge[i].addr, r->sge[i].length,
                                     PFNIC_ACCESS_LOCAL_WRITE)) {
                    return pfnic_qp_recv_fail(s, qp, dest,
                                              PFNIC_WC_LOC_PROT_ERR,
                                              PFNIC_WC_REM_OP_ERR);
                }
            }
            if (rlen < qp->len) {
                return pfnic_qp_recv_fail(s, qp, dest, PFNIC_WC_LOC_LEN_ERR,
                                          PFNIC_WC_REM_INV_REQ_ERR);
            }
        }
    }
    qp->started = true;
    return PFNIC_QP_MORE;
}

/*
 * Translate one side of a chunk, or send the page request group for the
 * @len bytes from @va this side of the work request still needs (the QP
 * then waits, or has pw.fault set when nobody can make the pages present,
 * as for a page a table MR's entry refuses). A FAULT MR's refused entry
 * makes the QP wait for the driver.
 */
static bool pfnic_qp_xlate(PfnicState *s, PfnicQp *qp, PfnicContext *ctx,
                           bool remote, PfnicMr *mr, uint64_t va,
                           uint64_t len, bool write, hwaddr *pa,
                           AddressSpace **as)
{
    uint32_t before = qp->pw.requests;
    PfnicXlate x = pfnic_mr_translate(ctx, mr, va, write, pa, as);

    if (x == PFNIC_XLATE_OK) {
        return true;
    }
    qp->pw.remote = remote;
    if (x == PFNIC_XLATE_DENIED && mr->fault) {
        trace_pfnic_qp_fault(qp->qpn, remote, ctx->index, va, write);
        pfnic_mr_fault(s, &qp->pw, ctx, mr, va, len, write);
        return false;
    }
    if (x == PFNIC_XLATE_DENIED) {
        qp->pw.fault = true;
        return false;
    }
    trace_pfnic_qp_fault(qp->qpn, remote, ctx->index, va, write);
    pfnic_page_fault(s, &qp->pw, ctx, mr, va, len, write);
    pfnic_qp_count_request(qp, before);
    return false;
}

/* One side of a WQE's remaining bytes: what its pages are asked for by. */
typedef struct PfnicQpSide {
    PfnicContext *ctx;
    PfnicMr *mr;
    uint64_t va;
    uint64_t len;
    bool write;
} PfnicQpSide;

/*
 * The QP waits for the first window of side @a, which missed a page; ask
 * for the rest of both sides too, so that both are made present at once:
 * window by window in the order the copy needs them (b's first, a's
 * second, b's second...), so that the OS, which serves the groups in the
 * order it reads them, hands back both halves of a window together and
 * the copy goes on while it works on the next.
 */
static void pfnic_qp_ahead(PfnicState *s, PfnicQp *qp, const PfnicQpSide *a,
                           const PfnicQpSide *b)
{
    uint32_t before = qp->pw.requests;

    if (!qp->pw.waiting) {
        return;
    }
    for (uint64_t off = 0; off < MAX(a->len, b->len) &&
         qp->pw.out < PFNIC_WAIT_GROUPS; off += PFNIC_QP_WINDOW) {
        if (off < b->len) {
            pfnic_page_ahead(s, &qp->pw, b->ctx, b->mr, b->va + off,
                             MIN(PFNIC_QP_WINDOW, b->len - off), b->write,
                             false);
        }
        if (off + PFNIC_QP_WINDOW < a->len) {
            pfnic_page_ahead(s, &qp->pw, a->ctx, a->mr,
                             a->va + off + PFNIC_QP_WINDOW,
                             MIN(PFNIC_QP_WINDOW,
                                 a->len - off - PFNIC_QP_WINDOW),
                             a->write, false);
        }
    }
    if (qp->pw.requests != before) {
        qp->page_requests++;
    }
}

/* Atomics: the remote 8 bytes once, then the original value to the SGE. */
static PfnicQpStep pfnic_qp_atomic_step(PfnicState *s, PfnicQp *qp,
                                        PfnicQp *dest)
{
    PfnicWqe *w = &qp->wqe;
    PfnicContext *ctx = &s->contexts[qp->ctx];
    uint64_t orig, val, lva, chunk;
    uint8_t bytes[8];
    PfnicMr *mr;
    hwaddr pa;
    AddressSpace *as;

    if (!qp->atomic_done) {
        PfnicContext *dctx = &s->contexts[dest->ctx];

        mr = pfnic_mr_remote(s, w->rkey, dest, w->remote_addr, 8,
                             PFNIC_ACCESS_REMOTE_ATOMIC);
        if (!mr) {
            return pfnic_qp_fail(s, qp, PFNIC_WC_REM_ACCESS_ERR);
        }
        /*
         * It reads the 8 bytes too: a table entry must allow both (the
         * write first, so that a driver fault names the write).
         */
        if (!pfnic_qp_xlate(s, qp, dctx, true, mr, w->remote_addr, 8, true,
                            &pa, &as) ||
            (pfnic_mr_table(mr) &&
             !pfnic_qp_xlate(s, qp, dctx, true, mr, w->remote_addr, 8, false,
                             &pa, &as))) {
            return qp->pw.fault ? PFNIC_QP_MORE : PFNIC_QP_WAIT;
        }
        if (address_space_read(as, pa, MEMTXATTRS_UNSPECIFIED, bytes, 8)) {
            return pfnic_qp_fail(s, qp, PFNIC_WC_REM_ACCESS_ERR);
        }
        orig = ldq_le_p(bytes);
        if (w->opcode == PFNIC_WR_ATOMIC_CMP_AND_SWP) {
            val = orig == w->compare_add ? w->swap : orig;
        } else {
            val = orig + w->compare_add;
        }
        stq_le_p(bytes, val);
        if (address_space_write(as, pa, MEMTXATTRS_UNSPECIFIED, bytes, 8)) {
            return pfnic_qp_fail(s, qp, PFNIC_WC_REM_ACCESS_ERR);
        }
        trace_pfnic_qp_atomic(qp->qpn, w->remote_addr, orig, val);
        qp->atomic_orig = orig;
        qp->atomic_done = true;
    }

    if (qp->done == 8) {
        pfnic_qp_complete(s, qp, PFNIC_WC_SUCCESS);
        return PFNIC_QP_DONE;
    }
    mr = pfnic_mr_lookup(s, w->sge[0].lkey, qp->ctx, qp->pd, w->sge[0].addr,
                         8, PFNIC_ACCESS_LOCAL_WRITE);
    if (!mr) {
        return pfnic_qp_fail(s, qp, PFNIC_WC_LOC_PROT_ERR);
    }
    lva = w->sge[0].addr + qp->done;
    chunk = MIN(8 - qp->done, PFNIC_PAGE_SIZE - (lva & ~PFNIC_PAGE_MASK));
    if (!pfnic_qp_xlate(s, qp, ctx, false, mr, lva, 8 - qp->done, true, &pa,
                        &as)) {
        return qp->pw.fault ? PFNIC_QP_MORE : PFNIC_QP_WAIT;
    }
    stq_le_p(bytes, qp->atomic_orig);
    if (address_space_write(as, pa, MEMTXATTRS_UNSPECIFIED,
                            bytes + qp->done, chunk)) {
        return pfnic_qp_fail(s, qp, PFNIC_WC_LOC_PROT_ERR);
    }
    qp->done += chunk;
    return PFNIC_QP_MORE;
}

/* One chunk of the WQE at the send head (or its start, or its end). */
static PfnicQpStep pfnic_qp_step(PfnicState *s, PfnicQp *qp)
{
    PfnicWqe *w = &qp->wqe;
    PfnicContext *ctx = &s->contexts[qp->ctx], *dctx;
    uint8_t op = w->opcode;
    bool lwrite = op == PFNIC_WR_RDMA_READ;
    uint8_t buf[PFNIC_PAGE_SIZE];
    uint64_t lva, lrem, rva, rrem, lo, ro, chunk;
    hwaddr lpa, rpa;
    PfnicQpSide local, remote;
    AddressSpace *las, *ras;
    PfnicMr *lmr, *rmr;
    PfnicQp *dest;
    /* UD: the payload lands after the GRH's 40 bytes. */
    uint64_t roff = qp->ud ? PFNIC_GRH_LEN : 0;
    int li, ri;

    if (qp->pw.fault && qp->ud && qp->pw.remote) {
        /* The receiver's page: its WQE fails, the datagram counts as sent. */
        dest = qp->started ? pfnic_qp_dest(s, qp) : NULL;
        if (!dest) {
            return pfnic_qp_ud_drop(s, qp, "the destination went");
        }
        return pfnic_qp_recv_fail(s, qp, dest, PFNIC_WC_LOC_PROT_ERR, 0);
    }
    if (qp->pw.fault) {
        return pfnic_qp_fail(s, qp, qp->pw.remote ? PFNIC_WC_REM_ACCESS_ERR :
                                                    PFNIC_WC_LOC_PROT_ERR);
    }
    if (!qp->started) {
        PfnicQpStep st = pfnic_qp_start(s, qp);

        if (st != PFNIC_QP_MORE) {
            return st;
        }
    }
    dest = pfnic_qp_dest(s, qp);
    if (!dest && qp->ud) {
        return pfnic_qp_ud_drop(s, qp, "the destination went");
    }
    if (!dest) {
        return pfnic_qp_unanswered(s, qp);
    }
    pfnic_qp_answered(qp);
    if (qp->ud && !qp->grh_done) {
        PfnicQpStep st = pfnic_qp_ud_grh(s, qp, dest);

        if (st != PFNIC_QP_MORE || !qp->grh_done) {
            return st;
        }
    }
    dctx = &s->contexts[dest->ctx];
    if (pfnic_op_atomic(op)) {
        return pfnic_qp_atomic_step(s, qp, dest);
    }
    if (qp->done == qp->len) {
        /*
         * ABI 1.21: the message is complete; its key must name a FAST MR
         * of the responder exactly, which becomes free.
         */
        if (op == PFNIC_WR_SEND_WITH_INV &&
            !pfnic_mr_fast_inv(s, dest->ctx, dest->pd, pfnic_wqe_inv_key(w))) {
            return pfnic_qp_recv_fail(s, qp, dest, PFNIC_WC_LOC_PROT_ERR,
                                      PFNIC_WC_REM_INV_REQ_ERR);
        }
        if (pfnic_op_recv(op)) {
            pfnic_qp_recv_complete(s, qp, dest, PFNIC_WC_SUCCESS);
            qp->started = false;
        }
        pfnic_qp_complete(s, qp, PFNIC_WC_SUCCESS);
        return PFNIC_QP_DONE;
    }

    /* Local side: the SGE holding byte `done` of the message. */
    if (!pfnic_sge_at(w->sge, w->num_sge, qp->done, &li, &lo)) {
        return pfnic_qp_fail(s, qp, PFNIC_WC_LOC_QP_OP_ERR);
    }
    lmr = pfnic_mr_lookup(s, w->sge[li].lkey, qp->ctx, qp->pd,
                          w->sge[li].addr, w->sge[li].length,
                          lwrite ? PFNIC_ACCESS_LOCAL_WRITE : 0);
    if (!lmr) {
        return pfnic_qp_fail(s, qp, PFNIC_WC_LOC_PROT_ERR);
    }
    lva = w->sge[li].addr + lo;
    lrem = w->sge[li].length - lo;

    /* Remote side: the receive SGE, or the RDMA range. */
    if (pfnic_op_send(op)) {
        PfnicWqe *r = &qp->rwqe;

        if (!pfnic_sge_at(r->sge, r->num_sge, roff + qp->done, &ri, &ro)) {
            return pfnic_qp_recv_fail(s, qp, dest, PFNIC_WC_LOC_LEN_ERR,
                                      PFNIC_WC_REM_INV_REQ_ERR);
        }
        rmr = pfnic_mr_lookup(s, r->sge[ri].lkey, dest->ctx,
                              pfnic_qp_recv_pd(s, dest), r->sge[ri].addr,
                              r->sge[ri].length, PFNIC_ACCESS_LOCAL_WRITE);
        if (!rmr) {
            return pfnic_qp_recv_fail(s, qp, dest, PFNIC_WC_LOC_PROT_ERR,
                                      PFNIC_WC_REM_OP_ERR);
        }
        rva = r->sge[ri].addr + ro;
        rrem = r->sge[ri].length - ro;
    } else {
        rmr = pfnic_mr_remote(s, w->rkey, dest, w->remote_addr, qp->len,
                              pfnic_op_remote_access(op));
        if (!rmr) {
            return pfnic_qp_fail(s, qp, PFNIC_WC_REM_ACCESS_ERR);
        }
        rva = w->remote_addr + qp->done;
        rrem = qp->len - qp->done;
    }

    chunk = MIN(lrem, rrem);
    chunk = MIN(chunk, PFNIC_PAGE_SIZE - (lva & ~PFNIC_PAGE_MASK));
    chunk = MIN(chunk, PFNIC_PAGE_SIZE - (rva & ~PFNIC_PAGE_MASK));

    local = (PfnicQpSide) { ctx, lmr, lva, lrem, lwrite };
    remote = (PfnicQpSide) { dctx, rmr, rva, rrem, !lwrite };
    if (!pfnic_qp_xlate(s, qp, ctx, false, lmr, lva,
                        MIN(lrem, PFNIC_QP_WINDOW), lwrite, &lpa, &las)) {
        pfnic_qp_ahead(s, qp, &local, &remote);
        return qp->pw.fault ? PFNIC_QP_MORE : PFNIC_QP_WAIT;
    }
    if (!pfnic_qp_xlate(s, qp, dctx, true, rmr, rva,
                        MIN(rrem, PFNIC_QP_WINDOW), !lwrite, &rpa, &ras)) {
        pfnic_qp_ahead(s, qp, &remote, &local);
        return qp->pw.fault ? PFNIC_QP_MORE : PFNIC_QP_WAIT;
    }
    if (lwrite) {
        if (address_space_read(ras, rpa, MEMTXATTRS_UNSPECIFIED, buf, chunk)) {
            return pfnic_qp_fail(s, qp, PFNIC_WC_REM_ACCESS_ERR);
        }
        if (address_space_write(las, lpa, MEMTXATTRS_UNSPECIFIED, buf,
                                chunk)) {
            return pfnic_qp_fail(s, qp, PFNIC_WC_LOC_PROT_ERR);
        }
    } else {
        if (address_space_read(las, lpa, MEMTXATTRS_UNSPECIFIED, buf, chunk)) {
            return pfnic_qp_fail(s, qp, PFNIC_WC_LOC_PROT_ERR);
        }
        if (address_space_write(ras, rpa, MEMTXATTRS_UNSPECIFIED, buf,
                                chunk)) {
            return pfnic_qp_fail(s, qp, PFNIC_WC_REM_ACCESS_ERR);
        }
    }
    qp->done += chunk;
    return PFNIC_QP_MORE;
}

/* Load the WQE at the send head. */
static bool pfnic_qp_load(PfnicState *s, PfnicQp *qp)
{
    if (!pfnic_wqe_read(s, qp->sq, qp->sq_entries, qp->sq_head, &qp->wqe)) {
        pfnic_guest_error(s, "send queue unreadable");
        pfnic_qp_enter_err(s, qp, true);
        return false;
    }
    if (qp->ud) {
        pfnic_wqe_ud_fields(&qp->wqe);
    }
    qp->busy = true;
    qp->started = false;
    qp->done = 0;
    qp->len = 0;
    qp->atomic_done = false;
    qp->rnr_left = qp->rnr_retry;
    qp->rnr_backoff = 0;
    qp->rnr_waiting = false;
    pfnic_qp_answered(qp);
    pfnic_page_wait_next(s, &qp->pw);
    trace_pfnic_qp_wqe_start(qp->qpn, qp->sq_head, qp->wqe.opcode,
                             qp->wqe.flags, qp->wqe.num_sge, qp->dest_qpn);
    return true;
}

/* ERR: complete everything posted with WR_FLUSH_ERR; true if more is left */
static bool pfnic_qp_flush(PfnicState *s, PfnicQp *qp)
{
    for (int budget = PFNIC_QP_FLUSH_PER_RUN; budget > 0; budget--) {
        PfnicWqe w = { };
        PfnicCqe cqe = {
            .qp_num = qp->qpn,
            .status = PFNIC_WC_WR_FLUSH_ERR,
        };

        if (qp->state != PFNIC_QPS_ERR || !qp->valid) {
            return false;
        }
        if (qp->sq_head != qp->sq_tail) {
            if (!pfnic_wqe_read(s, qp->sq, qp->sq_entries, qp->sq_head, &w)) {
                pfnic_guest_error(s, "send queue unreadable");
            }
            cqe.wr_id = w.wr_id;
            cqe.opcode = pfnic_wc_opcode(w.opcode);
            trace_pfnic_qp_flush(qp->qpn, true, qp->sq_head);
            qp->sq_head++;
            pfnic_qp_record(s, qp);
            pfnic_cqe_write(s, qp->scqn, &cqe, false);
        } else if (qp->srq_held) {
            /* The SRQ's other WQEs stay for the other QPs. */
            cqe.wr_id = qp->srq_wqe.wr_id;
            cqe.opcode = PFNIC_WC_RECV;
            trace_pfnic_srq_flush(qp->srqn, qp->qpn, qp->srq_wqe.wr_id);
            qp->srq_held = false;
            pfnic_cqe_write(s, qp->rcqn, &cqe, false);
        } else if (!qp->has_srq && qp->rq_head != qp->rq_tail) {
            if (!pfnic_wqe_read(s, qp->rq, qp->rq_entries, qp->rq_head, &w)) {
                pfnic_guest_error(s, "receive queue unreadable");
            }
            cqe.wr_id = w.wr_id;
            cqe.opcode = PFNIC_WC_RECV;
            trace_pfnic_qp_flush(qp->qpn, false, qp->rq_head);
            qp->rq_head++;
            pfnic_qp_record(s, qp);
            pfnic_cqe_write(s, qp->rcqn, &cqe, false);
        } else {
            if (qp->last_wqe_pending) {
                /* Its last receive WQE is done: the driver may destroy it. */
                qp->last_wqe_pending = false;
                trace_pfnic_srq_last_wqe(qp->srqn, qp->qpn);
                pfnic_event(s, PFNIC_EV_LAST_WQE_REACHED, qp->qpn);
            }
            return false;
        }
        qp->wqes_completed++;
    }
    return true;
}

/*
 * Look-ahead: while the WQE at the send head waits for pages, ask for the
 * pages of the WQEs posted after it (up to PFNIC_AHEAD_WQES of them and
 * PFNIC_AHEAD_PAGES pages at a time) in advisory groups, whose failure
 * fails nothing: each WQE asks for what it still lacks when it runs. Only
 * keys the WQE could use are followed (the QP's own, and its connected
 * peer's for RDMA), and a key that does not fit is skipped without the
 * side effects of a refused access: that is the WQE's error when it runs.
 */
#define PFNIC_AHEAD_PAGES       512

/* Look-ahead pages of @qp, counted for its context and the device. */
static void pfnic_qp_ahead_count(PfnicState *s, PfnicQp *qp, PfnicCounter c,
                                 uint32_t pages)
{
    pfnic_count_n(&s->contexts[qp->ctx], c, pages);
}

/* Remember @pages looked ahead for WQE @wqe, to count them at its end. */
static void pfnic_qp_ahead_note(PfnicState *s, PfnicQp *qp, uint16_t wqe,
                                uint32_t pages)
{
    int free = -1;

    for (int i = 0; i < PFNIC_QP_AHEAD_WQES; i++) {
        if (qp->ahead_for[i].pages && qp->ahead_for[i].wqe == wqe) {
            qp->ahead_for[i].pages += pages;
            return;
        }
        if (!qp->ahead_for[i].pages) {
            free = i;
        }
    }
    if (free >= 0) {
        qp->ahead_for[free].wqe = wqe;
        qp->ahead_for[free].pages = pages;
    } else {
        /* Cannot be followed: counted lost. */
        pfnic_qp_ahead_count(s, qp, PFNIC_CNT_AHEAD_WASTED, pages);
    }
}

/* WQE @wqe ended: its look-ahead pages were used, or wasted. */
static void pfnic_qp_ahead_settle(PfnicState *s, PfnicQp *qp, uint16_t wqe,
                                  bool used)
{
    for (int i = 0; i < PFNIC_QP_AHEAD_WQES; i++) {
        if (qp->ahead_for[i].pages && qp->ahead_for[i].wqe == wqe) {
            pfnic_qp_ahead_count(s, qp, used ? PFNIC_CNT_AHEAD_USED :
                                               PFNIC_CNT_AHEAD_WASTED,
                                 qp->ahead_for[i].pages);
            qp->ahead_for[i].pages = 0;
        }
    }
}

static void pfnic_qp_ahead_range(PfnicState *s, PfnicQp *qp, uint16_t wqe,
                                 PfnicContext *ctx, PfnicMr *mr, uint64_t va,
                                 uint64_t len, bool write, int64_t *budget)
{
    uint64_t pages = DIV_ROUND_UP((va & ~PFNIC_PAGE_MASK) + len,
                                  PFNIC_PAGE_SIZE);
    uint32_t before = qp->pw.requests;

    if (!len || *budget <= 0) {
        return;
    }
    if (pages > *budget) {
        len = *budget * PFNIC_PAGE_SIZE - (va & ~PFNIC_PAGE_MASK);
        pages = *budget;
    }
    *budget -= pages;
    pfnic_page_ahead(s, &qp->pw, ctx, mr, va, len, write, true);
    if (qp->pw.requests != before) {
        pfnic_qp_ahead_count(s, qp, PFNIC_CNT_AHEAD_PAGES,
                             qp->pw.requests - before);
        pfnic_qp_ahead_note(s, qp, wqe, qp->pw.requests - before);
    }
    /* Not the current WQE's requests (its completion reports those). */
    qp->pw.requests = before;
}

static void pfnic_qp_look_ahead(PfnicState *s, PfnicQp *qp)
{
    PfnicQp *peer = pfnic_qp_get(s, qp->dest_qpn);
    uint16_t posted = qp->sq_tail - qp->sq_head;
    uint16_t from = qp->ahead_next - qp->sq_head;
    int64_t budget = PFNIC_AHEAD_PAGES;

    if (peer && (peer->gen != qp->peer_gen || !pfnic_qp_ready(s, peer) ||
                 !pfnic_qp_is_peer(peer, qp))) {
        peer = NULL;
    }
    if (from == 0 || from > posted) {
        from = 1;
    }
    for (uint16_t i = from;
         i < posted && i <= PFNIC_QP_AHEAD_WQES && budget > 0; i++) {
        PfnicWqe w;
        bool lwrite;
        uint64_t len = 0;

        if (qp->pw.out >= PFNIC_WAIT_GROUPS ||
            !pfnic_wqe_read(s, qp->sq, qp->sq_entries, qp->sq_head + i, &w)) {
            return;
        }
        if (pfnic_op_atomic(w.opcode) || pfnic_op_local(w.opcode)) {
            qp->ahead_next = qp->sq_head + i + 1;
            continue;
        }
        lwrite = w.opcode == PFNIC_WR_RDMA_READ;
        for (int k = 0; k < MIN(w.num_sge, PFNIC_MAX_SGE); k++) {
            PfnicWqeSge *g = &w.sge[k];
            PfnicMr *mr = pfnic_mr_lookup(s, g->lkey, qp->ctx, qp->pd,
                                          g->addr, g->length,
                                          lwrite ? PFNIC_ACCESS_LOCAL_WRITE :
                                                   0);

            len += g->length;
            if (mr) {
                pfnic_qp_ahead_range(s, qp, qp->sq_head + i,
                                     &s->contexts[qp->ctx], mr, g->addr,
                                     g->length, lwrite, &budget);
            }
        }
        if (peer && !pfnic_op_send(w.opcode) && len) {
            uint32_t access = pfnic_op_remote_access(w.opcode);
            PfnicMr *rmr = (peer->access & access) != access ? NULL :
                           pfnic_mr_lookup(s, w.rkey, peer->ctx, peer->pd,
                                           w.remote_addr, len, access);

            if (rmr) {
                pfnic_qp_ahead_range(s, qp, qp->sq_head + i,
                                     &s->contexts[peer->ctx], rmr,
                                     w.remote_addr, len, !lwrite, &budget);
            }
        }
        if (budget <= 0) {
            return;     /* this WQE again next time, from where it stopped */
        }
        qp->ahead_next = qp->sq_head + i + 1;
    }
}

/* Run one QP for a bounded amount of work; true if more is left. */
bool pfnic_qp_run(PfnicQp *qp, PfnicState *s)
{
    if (!s->contexts[qp->ctx].enabled) {
        return false;
    }
    if (qp->state == PFNIC_QPS_ERR) {
        return pfnic_qp_flush(s, qp);
    }
    if (qp->wire) {
        return pfnic_roce_run(s, qp);
    }
    for (int budget = PFNIC_QP_CHUNKS_PER_RUN; budget > 0; budget--) {
        if (qp->state != PFNIC_QPS_RTS || qp->pw.waiting ||
            qp->pw.retry_prq || qp->rnr_waiting) {
            return false;
        }
        if (!qp->busy) {
            if (qp->sq_head == qp->sq_tail || !pfnic_qp_load(s, qp)) {
                return false;
            }
        }
        if (pfnic_qp_step(s, qp) == PFNIC_QP_WAIT) {
            if (qp->pw.waiting) {
                pfnic_qp_look_ahead(s, qp);
            }
            return false;
        }
    }
    return true;
}
