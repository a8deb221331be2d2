/*
 * pfnic DMA engine: descriptor rings executed in process address spaces
 *
 * Every address a descriptor names is a virtual address in its context's
 * PASID. Pages are translated through ATS (with a small ATC kept coherent
 * by the IOMMU's device-IOTLB invalidations); a page that is not present
 * or lacks the permission becomes a PRI page request, and the context
 * waits for the response while the others go on. Nothing here blocks: the
 * engine is a bottom half, and a response (delivered in the vCPU thread
 * that wrote the page group response) only reschedules it.
 *
 * The same bottom half runs the QPs of the verbs (pfnic_qp.c) with the same
 * translation code: each QP waits for its own page request groups (each
 * with an index of its own from the device's table) and never stalls the
 * others.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "qemu/timer.h"
#include "hw/pci/msix.h"
#include "hw/pci/pcie.h"
#include "system/dma.h"
#include "pfnic.h"
#include "pfnic_regs.h"
#include "trace.h"

/* Pages one context may process per engine run: keeps contexts fair. */
#define PFNIC_PAGES_PER_RUN     64
/*
 * A successful response does not make a page resident for good, so a page
 * is translated again after each one; an OS that keeps answering success
 * without mapping the page gets the descriptor failed after this many.
 */
#define PFNIC_MAX_REFAULTS      8
/* Back-off when the IOMMU's page request queue is full. */
#define PFNIC_PRQ_RETRY_NS      (100 * SCALE_US)

/* Count @n events for the context and for the device. */
void pfnic_count_n(PfnicContext *ctx, PfnicCounter c, uint32_t n)
{
    ctx->stats.count[c] += n;
    ctx->s->stats.count[c] += n;
}

/* Count one event for the context and for the device. */
void pfnic_count(PfnicContext *ctx, PfnicCounter c)
{
    pfnic_count_n(ctx, c, 1);
}

/* --- address translation cache ------------------------------------------ */

static PfnicAtcEntry *pfnic_atc_slot(PfnicState *s, uint32_t pasid,
                                     uint64_t vpage)
{
    return &s->atc[(vpage ^ ((uint64_t)pasid << 5)) % PFNIC_ATC_ENTRIES];
}

static void pfnic_atc_flush(PfnicState *s, uint32_t pasid, uint64_t start,
                            uint64_t last)
{
    for (int i = 0; i < PFNIC_ATC_ENTRIES; i++) {
        PfnicAtcEntry *e = &s->atc[i];
        uint64_t va = e->vpage * PFNIC_PAGE_SIZE;

        if (e->valid && e->pasid == pasid && va >= start && va <= last) {
            e->valid = false;
        }
    }
}

/*
 * Call @fn on every page waiter of the device: each enabled context's
 * descriptor ring, and each QP's requester and responder sides.
 */
static void pfnic_each_wait(PfnicState *s,
                            void (*fn)(PfnicPageWait *w, void *opaque),
                            void *opaque)
{
    for (uint32_t i = 0; i < s->num_contexts; i++) {
        if (s->contexts[i].enabled) {
            fn(&s->contexts[i].pw, opaque);
        }
    }
    for (uint32_t i = 0; i < PFNIC_MAX_QPS; i++) {
        if (s->qps[i].valid) {
            fn(&s->qps[i].pw, opaque);
            fn(&s->qps[i].rpw, opaque);
        }
    }
}

/* An invalidation of [start, last] in @pasid. */
typedef struct PfnicInval {
    uint32_t pasid;
    uint64_t start, last;
} PfnicInval;

/* The OS took back the waiter's page (see refaults in pfnic_page_fault). */
static void pfnic_wait_taken_back(PfnicPageWait *w, void *opaque)
{
    const PfnicInval *v = opaque;
    uint64_t page = w->fault_addr & PFNIC_PAGE_MASK;

    if (w->pasid == v->pasid && w->fault_addr != UINT64_MAX &&
        page >= v->start && page <= v->last) {
        w->taken_back = true;
    }
}

/* IOMMU device-IOTLB invalidation for one context's PASID. */
static void pfnic_iotlb_unmap(IOMMUNotifier *n, IOMMUTLBEntry *entry)
{
    PfnicContext *ctx = container_of(n, PfnicContext, iotlb_notifier);
    uint64_t last = entry->iova + entry->addr_mask;

    pfnic_count(ctx, PFNIC_CNT_INVALIDATIONS);
    trace_pfnic_atc_invalidate(ctx->index, ctx->pasid, entry->iova, last);
    pfnic_atc_flush(ctx->s, ctx->pasid, entry->iova & PFNIC_PAGE_MASK, last);
    pfnic_mr_invalidate(ctx, entry->iova, last);
    pfnic_each_wait(ctx->s, pfnic_wait_taken_back, &(PfnicInval) {
        .pasid = ctx->pasid,
        .start = entry->iova & PFNIC_PAGE_MASK,
        .last = last,
    });
}

/* Cache the 4 KiB page @vpage of the translation @t (of any size) in @e. */
static void pfnic_atc_fill(PfnicContext *ctx, PfnicAtcEntry *e, uint64_t vpage,
                           const IOMMUTLBEntry *t)
{
    e->valid = ctx->iotlb_registered;   /* only when kept coherent */
    e->pasid = ctx->pasid;
    e->vpage = vpage;
    e->paddr = (t->translated_addr & ~t->addr_mask) |
               ((vpage * PFNIC_PAGE_SIZE) & t->addr_mask);
    e->as = t->target_as;
    e->perm = t->perm;
}

static uint32_t pfnic_probe_range(PfnicContext *ctx, uint64_t va0, uint32_t n,
                                  bool write, bool *missing);

/*
 * Translate one page of the context's address space for reading or
 * writing. On success *pa and *as are where the byte at @va lives.
 */
PfnicXlate pfnic_translate(PfnicContext *ctx, uint64_t va, bool write,
                           hwaddr *pa, AddressSpace **as)
{
    PfnicState *s = ctx->s;
    IOMMUAccessFlags need = write ? IOMMU_WO : IOMMU_RO;
    uint64_t vpage = va / PFNIC_PAGE_SIZE;
    PfnicAtcEntry *e = pfnic_atc_slot(s, ctx->pasid, vpage);
    IOMMUTLBEntry t;
    uint32_t err = 0;
    ssize_t n;

    if (ctx->no_pasid) {
        /* No address space: CTX_PASID is stale, never to be used. */
        return PFNIC_XLATE_DENIED;
    }
    if (e->valid && e->pasid == ctx->pasid && e->vpage == vpage &&
        (e->perm & need) == need) {
        pfnic_count(ctx, PFNIC_CNT_ATC_HITS);
        *pa = e->paddr + (va & ~PFNIC_PAGE_MASK);
        *as = e->as;
        return PFNIC_XLATE_OK;
    }

    for (int i = 0; i < PFNIC_REFILLS; i++) {
        PfnicRefill *r = &ctx->refill[i];
        uint64_t va0 = va & PFNIC_PAGE_MASK;
        bool missing[PFNIC_GROUP_PAGES];
        uint32_t span;

        if (va < r->start || va >= r->end || (write && !r->write)) {
            continue;
        }
        /* Right after a group's response: its pages in one ATS request. */
        span = MIN((r->end - va0) / PFNIC_PAGE_SIZE, PFNIC_GROUP_PAGES);
        pfnic_probe_range(ctx, va0, span, write, missing);
        r->start = va0 + span * PFNIC_PAGE_SIZE;
        if (!missing[0] && e->valid && e->pasid == ctx->pasid &&
            e->vpage == vpage && (e->perm & need) == need) {
            *pa = e->paddr + (va & ~PFNIC_PAGE_MASK);
            *as = e->as;
            return PFNIC_XLATE_OK;
        }
        break;
    }
    pfnic_count(ctx, PFNIC_CNT_ATC_MISSES);
    n = pci_ats_request_translation(PCI_DEVICE(s), ctx->pasid, false, false,
                                    va & PFNIC_PAGE_MASK, PFNIC_PAGE_SIZE,
                                    !write, &t, 1, &err);
    trace_pfnic_ats(ctx->index, ctx->pasid, va, write, n,
                    n > 0 ? t.perm : 0, err);
    if (n != 1 || err || (t.perm & need) != need) {
        return PFNIC_XLATE_FAULT;
    }

    pfnic_atc_fill(ctx, e, vpage, &t);
    *pa = e->paddr + (va & ~PFNIC_PAGE_MASK);
    *as = e->as;
    return PFNIC_XLATE_OK;
}

/*
 * Which of the @n pages from @va0 (page aligned, n <= PFNIC_GROUP_PAGES)
 * lack the access @write needs, in @missing: one ATS request for the whole
 * range, whose present pages go to the ATC. Returns how many are missing.
 */
static uint32_t pfnic_probe_range(PfnicContext *ctx, uint64_t va0, uint32_t n,
                                  bool write, bool *missing)
{
    IOMMUAccessFlags need = write ? IOMMU_WO : IOMMU_RO;
    IOMMUTLBEntry t[PFNIC_GROUP_PAGES];
    uint64_t end = va0 + n * PFNIC_PAGE_SIZE;
    uint32_t err = 0, count = n;
    ssize_t got;

    for (uint32_t i = 0; i < n; i++) {
        missing[i] = true;
    }
    pfnic_count(ctx, PFNIC_CNT_ATC_MISSES);
    got = pci_ats_request_translation(PCI_DEVICE(ctx->s), ctx->pasid, false,
                                      false, va0, n * PFNIC_PAGE_SIZE, !write,
                                      t, n, &err);
    trace_pfnic_ats(ctx->index, ctx->pasid, va0, write, got, 0, err);
    for (ssize_t k = 0; k < got; k++) {
        uint64_t base = t[k].iova & ~t[k].addr_mask;
        uint64_t last = MIN(base + t[k].addr_mask + 1, end);

        if ((t[k].perm & need) != need) {
            continue;
        }
        for (uint64_t v = MAX(base, va0); v < last; v += PFNIC_PAGE_SIZE) {
            uint32_t i = (v - va0) / PFNIC_PAGE_SIZE;
            uint64_t vpage = v / PFNIC_PAGE_SIZE;

            if (missing[i]) {
                missing[i] = false;
                count--;
                pfnic_atc_fill(ctx, pfnic_atc_slot(ctx->s, ctx->pasid, vpage),
                               vpage, &t[k]);
            }
        }
    }
    return count;
}

/* --- page requests ------------------------------------------------------- */

void pfnic_page_wait_reset(PfnicState *s, PfnicPageWait *w)
{
    pfnic_mr_fault_leave(s, w);
    /* Its groups stay out (their pages count) but wake nobody. */
    for (uint32_t i = 0; i < PFNIC_GROUPS; i++) {
        if (s->groups[i].w == w) {
            s->groups[i].w = NULL;
        }
    }
    *w = (PfnicPageWait) {
        .fault_addr = UINT64_MAX,
        .mr = -1,
    };
}

void pfnic_page_wait_next(PfnicState *s, PfnicPageWait *w)
{
    uint32_t out = w->out;

    pfnic_mr_fault_leave(s, w);
    /* Its groups out may be this item's look-ahead: they stay, advisory. */
    for (uint32_t i = 0; out && i < PFNIC_GROUPS; i++) {
        if (s->groups[i].w == w) {
            s->groups[i].advisory = true;
        }
    }
    *w = (PfnicPageWait) {
        .fault_addr = UINT64_MAX,
        .mr = -1,
        .out = out,
    };
}

/* Account a group of @pages pages just sent: bucket i holds [2^i, 2^(i+1)). */
static void pfnic_count_group_pages(PfnicState *s, uint32_t pages)
{
    int bucket = MIN(31 - clz32(MAX(pages, 1)), PFNIC_GROUP_PAGES_BUCKETS - 1);

    s->stats.group_pages[bucket]++;
}

/* Account the round trip of the group just answered. */
static void pfnic_fault_latency(PfnicState *s, PfnicGroup *g)
{
    int64_t us = (qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) - g->sent_ns) /
                 SCALE_US;
    int bucket = us > 1 ? MIN(63 - clz64(us), PFNIC_FAULT_LAT_BUCKETS - 1) : 0;

    s->stats.fault_lat[bucket]++;
}

/* The MR a group was for, if it still is the same registration. */
static PfnicMr *pfnic_group_mr(PfnicState *s, PfnicGroup *g)
{
    PfnicMr *mr;

    if (g->mr < 0 || g->mr >= PFNIC_MAX_MRS) {
        return NULL;
    }
    mr = &s->mrs[g->mr];
    return mr->valid && mr->key == g->mr_key ? mr : NULL;
}

/* Give a group's index and pages back; wake its waiter. */
static void pfnic_group_free(PfnicState *s, PfnicGroup *g)
{
    PfnicContext *ctx = &s->contexts[g->ctx];

    s->groups_out--;
    s->pages_out -= g->pages;
    ctx->groups_out--;
    ctx->pages_out -= g->pages;
    if (g->w) {
        g->w->out--;
        g->w->waiting = false;
    }
    g->state = PFNIC_GROUP_FREE;
    g->w = NULL;
}


/*
 * A page response for our PASID. Its group index names the group, whose
 * waiter may be another context's (a loopback QP's remote side lives in
 * another address space) or nobody's any more. The IOMMU keeps one
 * notifier per PASID, so the response may be for another context of the
 * same process (the same PASID).
 */
static void pfnic_pri_response(IOMMUPRINotifier *n, IOMMUPRIResponse *r)
{
    PfnicContext *ctx = container_of(n, PfnicContext, pri_notifier);
    PfnicState *s = ctx->s;
    PfnicGroup *g = &s->groups[r->prgi & PCI_PRI_PRGI_MASK];
    bool ok = r->response_code == IOMMU_PRI_RESP_SUCCESS;
    PfnicMr *mr;

    trace_pfnic_pri_response(ctx->index, ctx->pasid, r->prgi,
                             r->response_code);
    if (g->state != PFNIC_GROUP_OUT || g->pasid != ctx->pasid) {
        /* A context stopped while its group was out, or a bogus response. */
        trace_pfnic_pri_response_stale(ctx->index, r->prgi);
        return;
    }
    pfnic_fault_latency(s, g);
    mr = pfnic_group_mr(s, g);
    if (ok && s->inject_pri_failure &&
        ++s->inject_resp_seq % s->inject_pri_failure == 0) {
        /*
         * Fault injection: handled as a Response Failure, which the
         * device does not re-probe (the OS made the pages present, so a
         * probe would find them): the work that waited for it fails.
         */
        trace_pfnic_pri_response_injected(ctx->index, r->prgi);
        ok = false;
        if (g->w && !g->advisory) {
            g->w->fault = true;
        }
    }
    if (ok) {
        PfnicContext *gc = &s->contexts[g->ctx];

        if (gc->enabled && gc->pasid == g->pasid) {
            gc->refill[gc->refill_next++ % PFNIC_REFILLS] = (PfnicRefill) {
                .start = g->start,
                .end = g->end,
                .write = g->write,
            };
        }
        pfnic_count_n(ctx, PFNIC_CNT_PRI_SUCCESS, g->pages);
        if (mr) {
            mr->count[PFNIC_MR_PAGE_FAULTS_HANDLED] += g->pages;
            if (g->prefetch) {
                mr->count[PFNIC_MR_PAGE_PREFETCH] += g->pages;
            }
        }
    } else {
        /*
         * One response code for the whole group (Linux's too): the work
         * fails only at a page of it that is still missing when it gets
         * there. A look-ahead's failure fails nothing.
         */
        pfnic_count_n(ctx, PFNIC_CNT_PRI_FAILED, g->pages);
        if (g->w && !g->advisory) {
            g->w->failed_pasid = g->pasid;
            g->w->failed_start = g->start;
            g->w->failed_end = g->end;
        }
    }
    pfnic_group_free(s, g);
    /*
     * Room again: whoever waited for it goes at the engine's next run (not
     * from here, inside the IOMMU's handling of the response).
     */
    s->retry_soon = true;
    qemu_bh_schedule(s->engine_bh);
}

/*
 * The group of @w out for @pasid that holds the page of @va, with the
 * access @write needs.
 */
static PfnicGroup *pfnic_group_covering(PfnicState *s, PfnicPageWait *w,
                                        uint32_t pasid, uint64_t va,
                                        bool write)
{
    for (uint32_t i = 0, seen = 0; i < PFNIC_GROUPS && seen < w->out; i++) {
        PfnicGroup *g = &s->groups[i];

        if (g->state == PFNIC_GROUP_FREE || g->w != w) {
            continue;
        }
        seen++;
        if (g->pasid == pasid && va >= g->start && va < g->end &&
            (g->write || !write)) {
            return g;
        }
    }
    return NULL;
}

/*
 * Of the @n pages from @va0 found @missing, forget those a group of @w
 * already asks for: the OS is on them.
 */
static void pfnic_wait_drop_covered(PfnicState *s, PfnicPageWait *w,
                                    uint32_t pasid, uint64_t va0, uint32_t n,
                                    bool write, bool *missing)
{
    uint64_t end = va0 + n * PFNIC_PAGE_SIZE;

    for (uint32_t i = 0, seen = 0; i < PFNIC_GROUPS && seen < w->out; i++) {
        PfnicGroup *g = &s->groups[i];

        if (g->state == PFNIC_GROUP_FREE || g->w != w) {
            continue;
        }
        seen++;
        if (g->pasid != pasid || (write && !g->write) || g->end <= va0 ||
            g->start >= end) {
            continue;
        }
        for (uint64_t v = MAX(g->start, va0); v < MIN(g->end, end);
             v += PFNIC_PAGE_SIZE) {
            missing[(v - va0) / PFNIC_PAGE_SIZE] = false;
        }
    }
}

/*
 * Pages the device may still ask of the OS for @ctx's PASID: never more
 * outstanding than the OS allocated (PRI capability), and no context more
 * than a quarter of that, so that one process's faults cannot hold back
 * every other's.
 */
static uint32_t pfnic_pri_room(PfnicState *s, PfnicContext *ctx)
{
    uint32_t alloc = pcie_pri_get_req_alloc(PCI_DEVICE(s));
    uint32_t share;

    alloc = alloc ? alloc : s->pri_requests;
    share = MAX(alloc / PFNIC_PRI_SHARE, 1);
    return MIN(alloc - MIN(s->pages_out, alloc),
               share - MIN(ctx->pages_out, share));
}

static PfnicGroup *pfnic_group_alloc(PfnicState *s)
{
    for (uint32_t i = 0; i < PFNIC_GROUPS; i++) {
        uint32_t idx = (s->group_next + i) % PFNIC_GROUPS;

        if (s->groups[idx].state == PFNIC_GROUP_FREE) {
            s->group_next = (idx + 1) % PFNIC_GROUPS;
            return &s->groups[idx];
        }
    }
    return NULL;
}

/*
 * Send the pages of @g that the IOMMU lacks (@missing, from g->start) as
 * its group, the last with LPIG. 0 once the group is out; -ENOSPC if the
 * queue was full (the group is PARTIAL if pages went); other errors if
 * nobody can serve page requests.
 */
static int pfnic_group_post(PfnicState *s, PfnicGroup *g, const bool *missing)
{
    PfnicContext *ctx = &s->contexts[g->ctx];
    uint32_t span = (g->end - g->start) / PFNIC_PAGE_SIZE, sent = 0;
    uint16_t prgi = g - s->groups;
    int ret = 0;

    /* Fault injection: every Nth group finds the queue full at its start. */
    if (s->inject_prq_full && ++s->inject_prq_seq % s->inject_prq_full == 0) {
        trace_pfnic_page_request(ctx->index, g->pasid, g->start, g->write,
                                 prgi, -ENOSPC);
        return -ENOSPC;
    }
    for (uint32_t i = 0; i < span && sent < g->pages; i++) {
        uint64_t page = g->start + i * PFNIC_PAGE_SIZE;

        if (!missing[i]) {
            continue;
        }
        ret = pci_pri_request_page(PCI_DEVICE(s), g->pasid, false, false,
                                   page, sent + 1 == g->pages, prgi, true,
                                   g->write);
        trace_pfnic_page_request(ctx->index, g->pasid, page, g->write, prgi,
                                 ret);
        if (ret < 0) {
            break;
        }
        sent++;
    }
    if (ret == -ENOSPC && sent) {
        g->state = PFNIC_GROUP_PARTIAL;
    }
    if (ret < 0) {
        return ret;
    }
    g->state = PFNIC_GROUP_OUT;
    g->sent_ns = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    return 0;
}

/*
 * Probe the @n pages from @va0 (page aligned) of @ctx's PASID and request
 * the missing ones as a new group of @w (with @force, @va0's page even if
 * the probe finds it: there must be a response to wait for). Returns the
 * group, NULL with *err 0 if nothing was missing, or NULL with *err:
 * -EAGAIN no room (allocation, share, indices), -ENOSPC queue full, or
 * another error when nobody can serve page requests.
 */
static PfnicGroup *pfnic_group_send(PfnicState *s, PfnicPageWait *w,
                                    PfnicContext *ctx, PfnicMr *mr,
                                    uint64_t va0, uint32_t n, bool write,
                                    bool force, bool advisory, int *err)
{
    bool missing[PFNIC_GROUP_PAGES];
    uint32_t room = pfnic_pri_room(s, ctx), want = 0;
    uint32_t *ctx_max = &ctx->stats.count[PFNIC_CNT_PR_GROUPS_MAX];
    uint32_t *dev_max = &s->stats.count[PFNIC_CNT_PR_GROUPS_MAX];
    PfnicGroup *g;
    int ret;

    *err = 0;
    n = MIN(n, PFNIC_GROUP_PAGES);
    if (!room || w->out >= PFNIC_WAIT_GROUPS) {
        *err = -EAGAIN;
        return NULL;
    }
    pfnic_probe_range(ctx, va0, n, write, missing);
    pfnic_wait_drop_covered(s, w, ctx->pasid, va0, n, write, missing);
    missing[0] |= force;
    /* Cut to what fits: the pages outstanding never exceed the room. */
    for (uint32_t i = 0; i < n; i++) {
        if (missing[i] && want == room) {
            n = i;
            break;
        }
        want += missing[i];
    }
    if (!want) {
        return NULL;
    }
    g = pfnic_group_alloc(s);
    if (!g) {
        *err = -EAGAIN;
        return NULL;
    }
    *g = (PfnicGroup) {
        .w = w,
        .advisory = advisory,
        .write = write,
        .prefetch = w->prefetch,
        .ctx = ctx->index,
        .pasid = ctx->pasid,
        .start = va0,
        .end = va0 + n * PFNIC_PAGE_SIZE,
        .pages = want,
        .mr = mr ? mr - s->mrs : -1,
        .mr_key = mr ? mr->key : 0,
    };
    ret = pfnic_group_post(s, g, missing);
    if (ret < 0 && g->state == PFNIC_GROUP_FREE) {
        *err = ret;
        return NULL;
    }
    /* Out, or PARTIAL (sent again whole later): it holds its pages. */
    s->groups_out++;
    s->pages_out += want;
    ctx->groups_out++;
    ctx->pages_out += want;
    w->out++;
    *ctx_max = MAX(*ctx_max, ctx->groups_out);
    *dev_max = MAX(*dev_max, s->groups_out);
    if (ret < 0) {
        pfnic_count(ctx, PFNIC_CNT_PRQ_FULL);
        timer_mod(s->retry_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) + PFNIC_PRQ_RETRY_NS);
        return g;
    }
    pfnic_count_n(ctx, PFNIC_CNT_PAGE_REQUESTS, want);
    pfnic_count(ctx, PFNIC_CNT_PR_GROUPS);
    pfnic_count_group_pages(s, want);
    w->requests += want;
    if (mr) {
        mr->count[PFNIC_MR_PAGE_FAULTS] += want;
        mr->count[PFNIC_MR_PAGE_FAULT_GROUPS]++;
    }
    return g;
}

/*
 * Request the pages of [va, va + len) of @ctx's PASID that @w's groups do
 * not already cover, a group per PFNIC_GROUP_PAGES pages, while there is
 * room: the work finds them present when it gets there. Does not make @w
 * wait; stops at the first group that cannot go.
 */
void pfnic_page_ahead(PfnicState *s, PfnicPageWait *w, PfnicContext *ctx,
                      PfnicMr *mr, uint64_t va, uint64_t len, bool write,
                      bool advisory)
{
    uint64_t p = va & PFNIC_PAGE_MASK, end = va + len;

    /*
     * A table's pages are the driver's business, device memory (ABI 1.13)
     * is always there: nothing to ask for.
     */
    if (ctx->no_pasid || (mr && !pfnic_mr_pasid(mr))) {
        return;
    }
    if (!len || end < va) {
        end = UINT64_MAX;
    }
    while (p < end && w->out < PFNIC_WAIT_GROUPS) {
        PfnicGroup *g = pfnic_group_covering(s, w, ctx->pasid, p, write);
        uint32_t n;
        int err;

        if (g) {
            p = g->end;
            continue;
        }
        n = MIN(DIV_ROUND_UP(end - p, PFNIC_PAGE_SIZE), PFNIC_GROUP_PAGES);
        g = pfnic_group_send(s, w, ctx, mr, p, n, write, false, advisory,
                             &err);
        if (err) {
            break;
        }
        p = g ? g->end : p + n * PFNIC_PAGE_SIZE;
    }
}

/*
 * The work of @w missed the page of @va in @ctx's PASID, and needs @len
 * bytes from @va (@write: for writing): wait for the group that holds the
 * page, or ask the OS for it in a new group, then for the rest of the
 * range in more groups while there is room. Afterwards the waiter waits
 * (w->waiting), is to send again (w->retry_prq), or has w->fault set when
 * nobody can make the page present.
 */
void pfnic_page_fault(PfnicState *s, PfnicPageWait *w, PfnicContext *ctx,
                      PfnicMr *mr, uint64_t va, uint64_t len, bool write)
{
    uint64_t va0 = va & PFNIC_PAGE_MASK;
    bool again = w->retry_prq;
    PfnicGroup *g;
    uint32_t n;
    int err;

    if (ctx->no_pasid || (mr && !pfnic_mr_pasid(mr))) {
        /* Nobody to ask: only the driver can fix a table. */
        w->fault = true;
        return;
    }
    /* It waits for the OS now, not for a FAULT MR's entry. */
    pfnic_mr_fault_leave(s, w);
    w->ctx = ctx->index;
    w->pasid = ctx->pasid;
    w->retry_prq = false;
    w->mr = mr ? mr - s->mrs : -1;
    w->mr_key = mr ? mr->key : 0;
    if (pfnic_group_covering(s, w, ctx->pasid, va0, write)) {
        w->waiting = true;
        return;
    }
    if (w->failed_pasid == ctx->pasid && va0 >= w->failed_start &&
        va0 < w->failed_end) {
        /* Its group failed, and the page is still missing. */
        w->fault = true;
        return;
    }
    /*
     * The same page again: the OS answered success without mapping it,
     * unless it took the page back since (an invalidation: a racing
     * munmap or MADV_DONTNEED), which is not the OS's fault to count.
     */
    if (va0 == (w->fault_addr & PFNIC_PAGE_MASK) && !again) {
        if (!w->taken_back && ++w->refaults > PFNIC_MAX_REFAULTS) {
            w->fault = true;
            return;
        }
    } else if (!again) {
        w->refaults = 0;
    }
    w->taken_back = false;
    w->fault_addr = va;
    w->fault_len = MAX(len, 1);
    w->fault_write = write;

    n = DIV_ROUND_UP((va & ~PFNIC_PAGE_MASK) + w->fault_len, PFNIC_PAGE_SIZE);
    g = pfnic_group_send(s, w, ctx, mr, va0, n, write, true, false, &err);
    if (err == -EAGAIN || err == -ENOSPC) {
        /* Held back or refused: the whole request goes again. */
        trace_pfnic_page_request_throttled(ctx->index, w->out,
                                           s->pages_out);
        pfnic_count(ctx, err == -EAGAIN ? PFNIC_CNT_PRQ_HELD :
                                          PFNIC_CNT_PRQ_FULL);
        w->retry_prq = true;
        timer_mod(s->retry_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) + PFNIC_PRQ_RETRY_NS);
        return;
    }
    if (err || !g) {
        /* PRI disabled or no IOMMU: nobody can make the pages present. */
        w->fault = true;
        return;
    }
    w->waiting = true;
    /* The rest of what this side needs, while the OS works on the first. */
    if (w->fault_len > g->end - va) {
        pfnic_page_ahead(s, w, ctx, mr, g->end, va + w->fault_len - g->end,
                         write, false);
    }
}

/* Send a PARTIAL group again, whole, under its own index. */
static void pfnic_group_resend(PfnicState *s, PfnicGroup *g)
{
    PfnicContext *ctx = &s->contexts[g->ctx];
    uint32_t n = (g->end - g->start) / PFNIC_PAGE_SIZE;
    bool missing[PFNIC_GROUP_PAGES];
    uint32_t want = 0;
    int ret;

    pfnic_probe_range(ctx, g->start, n, g->write, missing);
    /* The pages queued before wait for an LPIG under this index. */
    missing[0] = true;
    for (uint32_t i = 0; i < n; i++) {
        want += missing[i];
    }
    /* It keeps the pages it counted; it may send fewer, never more. */
    want = MIN(want, g->pages);
    s->pages_out -= g->pages - want;
    ctx->pages_out -= g->pages - want;
    g->pages = want;
    ret = pfnic_group_post(s, g, missing);
    if (ret == -ENOSPC) {
        pfnic_count(ctx, PFNIC_CNT_PRQ_FULL);
        return;
    }
    if (ret < 0) {
        /* Nobody serves page requests any more: let its waiter fail. */
        if (g->w && !g->advisory) {
            g->w->failed_pasid = g->pasid;
            g->w->failed_start = g->start;
            g->w->failed_end = g->end;
        }
        pfnic_group_free(s, g);
        return;
    }
    pfnic_count_n(ctx, PFNIC_CNT_PAGE_REQUESTS, want);
    pfnic_count(ctx, PFNIC_CNT_PR_GROUPS);
    pfnic_count_group_pages(s, want);
}

/* Send again what could not go: PARTIAL groups, held-back waiters. */
static void pfnic_prq_resend(PfnicState *s)
{
    bool partial = false;

    s->retry_soon = false;
    for (uint32_t i = 0; i < PFNIC_GROUPS; i++) {
        if (s->groups[i].state == PFNIC_GROUP_PARTIAL) {
            pfnic_group_resend(s, &s->groups[i]);
            partial |= s->groups[i].state == PFNIC_GROUP_PARTIAL;
        }
    }
    for (uint32_t i = 0; i < s->num_contexts; i++) {
        PfnicContext *ctx = &s->contexts[i];

        if (ctx->enabled && ctx->pw.retry_prq) {
            pfnic_page_fault(s, &ctx->pw, ctx,
                             ctx->pw.mr >= 0 ? &s->mrs[ctx->pw.mr] : NULL,
                             ctx->pw.fault_addr, ctx->pw.fault_len,
                             ctx->pw.fault_write);
        }
    }
    pfnic_qp_prq_retry(s);
    if (partial) {
        timer_mod(s->retry_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) + PFNIC_PRQ_RETRY_NS);
    }
}

/* The back-off timer: resend, then let the engine run what got through. */
static void pfnic_prq_retry(void *opaque)
{
    PfnicState *s = opaque;

    pfnic_prq_resend(s);
    qemu_bh_schedule(s->engine_bh);
}

/*
 * Forget the groups of a context that stops: the OS will not answer them
 * through us (the PASID's notifier goes). A PARTIAL one keeps its index
 * until a reset, so that no other group ever joins its queued pages.
 */
static void pfnic_ctx_drop_groups(PfnicContext *ctx)
{
    PfnicState *s = ctx->s;

    for (uint32_t i = 0; i < PFNIC_GROUPS; i++) {
        PfnicGroup *g = &s->groups[i];

        if (g->state == PFNIC_GROUP_FREE || g->ctx != ctx->index) {
            continue;
        }
        if (g->state == PFNIC_GROUP_STRANDED) {
            continue;
        }
        if (g->state == PFNIC_GROUP_OUT) {
            pfnic_group_free(s, g);
            continue;
        }
        /* PARTIAL: its pages no longer count, its index stays taken. */
        pfnic_group_free(s, g);
        g->state = PFNIC_GROUP_STRANDED;
        s->groups_out++;
    }
}

/* --- descriptors ---------------------------------------------------------- */

/* The context's ring is unusable: stop it (a guest programming error). */
static void pfnic_ctx_fail(PfnicContext *ctx, const char *what)
{
    pfnic_guest_error(ctx->s, what);
    pfnic_ctx_stop(ctx);
    ctx->enabled = false;
}

static hwaddr pfnic_desc_addr(PfnicContext *ctx, uint32_t index)
{
    return ctx->ring + (hwaddr)(index % ctx->ring_size) * PFNIC_DESC_SIZE;
}

static bool pfnic_desc_load(PfnicContext *ctx)
{
    PCIDevice *pdev = PCI_DEVICE(ctx->s);
    PfnicDesc *d = &ctx->desc;

    if (pci_dma_read(pdev, pfnic_desc_addr(ctx, ctx->head), d,
                     sizeof(*d)) != MEMTX_OK) {
        pfnic_ctx_fail(ctx, "descriptor ring unreadable");
        return false;
    }
    d->src = le64_to_cpu(d->src);
    d->dst = le64_to_cpu(d->dst);
    d->len = le64_to_cpu(d->len);
    d->pattern = le64_to_cpu(d->pattern);
    d->cookie = le64_to_cpu(d->cookie);
    d->result = 0;
    d->page_requests = 0;
    ctx->done = 0;
    pfnic_page_wait_reset(ctx->s, &ctx->pw);
    ctx->prefetch_mr = -1;
    ctx->busy = true;
    trace_pfnic_desc_start(ctx->index, ctx->head, d->opcode, d->src, d->dst,
                           d->len);
    return true;
}

/* Write the results back, status last, and signal the context's vector. */
static void pfnic_desc_complete(PfnicContext *ctx, uint32_t code,
                                uint64_t result)
{
    PCIDevice *pdev = PCI_DEVICE(ctx->s);
    hwaddr addr = pfnic_desc_addr(ctx, ctx->head);
    uint64_t res = cpu_to_le64(result);
    uint32_t prs = cpu_to_le32(ctx->pw.requests);
    uint32_t status = cpu_to_le32(PFNIC_DESC_DONE | code);

    ctx->desc.page_requests = ctx->pw.requests;
    trace_pfnic_desc_done(ctx->index, ctx->head, code, result,
                          ctx->pw.requests);
    if (pci_dma_write(pdev, addr + offsetof(PfnicDesc, result), &res,
                      sizeof(res)) != MEMTX_OK ||
        pci_dma_write(pdev, addr + offsetof(PfnicDesc, page_requests), &prs,
                      sizeof(prs)) != MEMTX_OK ||
        pci_dma_write(pdev, addr + offsetof(PfnicDesc, status), &status,
                      sizeof(status)) != MEMTX_OK) {
        pfnic_ctx_fail(ctx, "descriptor ring unwritable");
        return;
    }
    ctx->busy = false;
    ctx->head++;
    if (msix_enabled(pdev) && ctx->vector < ctx->s->num_vectors) {
        msix_notify(pdev, ctx->vector);
    }
}

static bool pfnic_desc_valid(const PfnicDesc *d)
{
    if (d->opcode == PFNIC_OP_PREFETCH) {
        return !(d->flags &
                 ~(PFNIC_PREFETCH_WRITE | PFNIC_PREFETCH_NO_FAULT)) &&
               d->len <= PFNIC_DESC_MAX_LEN;
    }
    return (d->opcode == PFNIC_OP_COPY || d->opcode == PFNIC_OP_FILL ||
            d->opcode == PFNIC_OP_COMPARE) &&
           d->flags == 0 && d->len <= PFNIC_DESC_MAX_LEN;
}

typedef enum {
    PFNIC_STEP_MORE,        /* a page was processed */
    PFNIC_STEP_WAIT,        /* waiting for a page request */
    PFNIC_STEP_DONE,        /* the descriptor completed */
} PfnicStep;

/*
 * Translate @va; on a fault, wait for the page, asking for the @len bytes
 * from @va the descriptor still needs, and for the @olen bytes from @ova
 * of its other side (@owrite) while the OS works on them.
 */
static bool pfnic_xlate_or_request(PfnicContext *ctx, uint64_t va,
                                   uint64_t len, bool write, uint64_t ova,
                                   uint64_t olen, bool owrite, hwaddr *pa,
                                   AddressSpace **as)
{
    if (pfnic_translate(ctx, va, write, pa, as) == PFNIC_XLATE_OK) {
        return true;
    }
    ctx->pw.prefetch = false;
    pfnic_page_fault(ctx->s, &ctx->pw, ctx, NULL, va, len, write);
    if (olen && ctx->pw.waiting) {
        pfnic_page_ahead(ctx->s, &ctx->pw, ctx, NULL, ova, olen, owrite,
                         false);
    }
    return false;
}

/*
 * PREFETCH: make the pages of [dst, dst + len) of an MR present (and
 * cached), in as many page request groups at once as there is room for.
 * With NO_FAULT a page that ATS cannot translate is skipped instead of
 * requested. A page counts in the MR's page_prefetch when a page request
 * of the prefetch made it present.
 */
static PfnicStep pfnic_prefetch_step(PfnicContext *ctx)
{
    PfnicState *s = ctx->s;
    PfnicDesc *d = &ctx->desc;
    bool write = d->flags & PFNIC_PREFETCH_WRITE;
    uint64_t va = d->dst + ctx->done;
    uint64_t chunk = MIN(d->len - ctx->done,
                         PFNIC_PAGE_SIZE - (va & ~PFNIC_PAGE_MASK));
    PfnicMr *mr;
    hwaddr pa;
    AddressSpace *as;

    if (ctx->prefetch_mr < 0) {
        /* A key is 32 bits: more in src is not a key. */
        mr = d->src > UINT32_MAX ? NULL :
             pfnic_mr_lookup(s, d->src, ctx->index, UINT32_MAX, d->dst,
                             d->len, write ? PFNIC_ACCESS_LOCAL_WRITE : 0);
        if (!mr) {
            trace_pfnic_prefetch_bad_key(ctx->index, (uint32_t)d->src,
                                         d->dst, d->len);
            pfnic_desc_complete(ctx, PFNIC_ST_PROTECTION, 0);
            return PFNIC_STEP_DONE;
        }
        if (!pfnic_mr_pasid(mr)) {
            /*
             * Its pages are where the driver's table says, or in device
             * memory (ABI 1.13): nothing to do.
             */
            pfnic_desc_complete(ctx, PFNIC_ST_SUCCESS, d->len);
            return PFNIC_STEP_DONE;
        }
        ctx->prefetch_mr = mr - s->mrs;
        ctx->pw.mr = ctx->prefetch_mr;
        ctx->pw.mr_key = mr->key;
    }
    mr = &s->mrs[ctx->prefetch_mr];
    if (!mr->valid || mr->key != ctx->pw.mr_key) {
        /* MR_CLEAR while the prefetch ran */
        pfnic_desc_complete(ctx, PFNIC_ST_PROTECTION, ctx->done);
        return PFNIC_STEP_DONE;
    }
    if (ctx->pw.fault) {
        pfnic_desc_complete(ctx, PFNIC_ST_PAGE_FAULT, ctx->done);
        return PFNIC_STEP_DONE;
    }
    if (ctx->done == d->len) {
        pfnic_desc_complete(ctx, PFNIC_ST_SUCCESS, d->len);
        return PFNIC_STEP_DONE;
    }
    if (pfnic_translate(ctx, va, write, &pa, &as) != PFNIC_XLATE_OK &&
        !(d->flags & PFNIC_PREFETCH_NO_FAULT)) {
        /* The pages the groups make present count as prefetched. */
        ctx->pw.prefetch = true;
        pfnic_page_fault(s, &ctx->pw, ctx, mr, va, d->len - ctx->done,
                         write);
        return ctx->pw.fault ? PFNIC_STEP_MORE : PFNIC_STEP_WAIT;
    }
    ctx->done += chunk;
    return PFNIC_STEP_MORE;
}

/* Execute the part of the descriptor that lies in one page of each side. */
static PfnicStep pfnic_desc_step(PfnicContext *ctx)
{
    PfnicDesc *d = &ctx->desc;
    uint64_t src = d->src + ctx->done, dst = d->dst + ctx->done;
    uint64_t chunk = d->len - ctx->done;
    uint8_t a[PFNIC_PAGE_SIZE], b[PFNIC_PAGE_SIZE];
    hwaddr spa = 0, dpa = 0;
    AddressSpace *sas = NULL, *das = NULL;
    bool reads_src = d->opcode != PFNIC_OP_FILL;
    bool writes_dst = d->opcode != PFNIC_OP_COMPARE;

    if (d->opcode == PFNIC_OP_PREFETCH) {
        return pfnic_prefetch_step(ctx);
    }
    if (ctx->pw.fault) {
        pfnic_desc_complete(ctx, PFNIC_ST_PAGE_FAULT, ctx->done);
        return PFNIC_STEP_DONE;
    }
    if (ctx->done == d->len) {
        pfnic_desc_complete(ctx, PFNIC_ST_SUCCESS, d->len);
        return PFNIC_STEP_DONE;
    }
    chunk = MIN(chunk, PFNIC_PAGE_SIZE - (dst & ~PFNIC_PAGE_MASK));
    if (reads_src) {
        chunk = MIN(chunk, PFNIC_PAGE_SIZE - (src & ~PFNIC_PAGE_MASK));
        if (!pfnic_xlate_or_request(ctx, src, d->len - ctx->done, false,
                                    dst, d->len - ctx->done, writes_dst,
                                    &spa, &sas)) {
            return ctx->pw.fault ? PFNIC_STEP_MORE : PFNIC_STEP_WAIT;
        }
    }
    if (!pfnic_xlate_or_request(ctx, dst, d->len - ctx->done, writes_dst,
                                src, reads_src ? d->len - ctx->done : 0,
                                false, &dpa, &das)) {
        return ctx->pw.fault ? PFNIC_STEP_MORE : PFNIC_STEP_WAIT;
    }

    if (reads_src &&
        address_space_read(sas, spa, MEMTXATTRS_UNSPECIFIED, a, chunk)) {
        ctx->pw.fault = true;
        return PFNIC_STEP_MORE;
    }
    switch (d->opcode) {
    case PFNIC_OP_FILL:
        for (uint64_t i = 0; i < chunk; i++) {
            a[i] = d->pattern >> (8 * ((ctx->done + i) % 8));
        }
        /* fall through */
    case PFNIC_OP_COPY:
        if (address_space_write(das, dpa, MEMTXATTRS_UNSPECIFIED, a, chunk)) {
            ctx->pw.fault = true;
            return PFNIC_STEP_MORE;
        }
        break;
    case PFNIC_OP_COMPARE:
        if (address_space_read(das, dpa, MEMTXATTRS_UNSPECIFIED, b, chunk)) {
            ctx->pw.fault = true;
            return PFNIC_STEP_MORE;
        }
        for (uint64_t i = 0; i < chunk; i++) {
            if (a[i] != b[i]) {
                pfnic_desc_complete(ctx, PFNIC_ST_MISMATCH, ctx->done + i);
                return PFNIC_STEP_DONE;
            }
        }
        break;
    }
    ctx->done += chunk;
    return PFNIC_STEP_MORE;
}

/* Run one context for up to PFNIC_PAGES_PER_RUN pages; true if more is left */
static bool pfnic_ctx_run(PfnicContext *ctx)
{
    for (int budget = PFNIC_PAGES_PER_RUN; budget > 0; budget--) {
        if (!ctx->enabled || ctx->pw.waiting || ctx->pw.retry_prq) {
            return false;
        }
        if (!ctx->busy) {
            if (ctx->head == ctx->tail) {
                return false;
            }
            if (!pfnic_desc_load(ctx)) {
                return false;
            }
            /* Without a PASID there is no address space to work in. */
            if (ctx->no_pasid || !pfnic_desc_valid(&ctx->desc)) {
                pfnic_desc_complete(ctx, PFNIC_ST_BAD_DESCRIPTOR, 0);
                continue;
            }
        }
        if (pfnic_desc_step(ctx) == PFNIC_STEP_WAIT) {
            return false;
        }
    }
    return true;
}

/*
 * One engine run: every context's ring, then every QP starting from a
 * rotating one, each for a bounded amount of work.
 */
static void pfnic_engine_bh(void *opaque)
{
    PfnicState *s = opaque;
    uint32_t first = s->qp_next;
    bool more = false;

    if (s->retry_soon) {
        pfnic_prq_resend(s);
    }
    for (uint32_t i = 0; i < s->num_contexts; i++) {
        more |= pfnic_ctx_run(&s->contexts[i]);
    }
    for (uint32_t i = 0; i < PFNIC_MAX_QPS; i++) {
        PfnicQp *qp = &s->qps[(first + i) % PFNIC_MAX_QPS];

        if (qp->valid) {
            more |= pfnic_qp_run(qp, s);
        }
    }
    s->qp_next = (first + 1) % PFNIC_MAX_QPS;
    if (more) {
        qemu_bh_schedule(s->engine_bh);
    }
}

/* --- context lifecycle ----------------------------------------------- */

/*
 * RING_DB: the low 16 bits of the ring's new tail. The full tail is the one
 * within a ring of the head; it may not move back (descriptors once posted
 * stay posted) nor past the ring.
 */
void pfnic_doorbell(PfnicContext *ctx, uint16_t tail16)
{
    uint32_t tail = ctx->head + (uint16_t)(tail16 - (uint16_t)ctx->head);

    if (!ctx->enabled || !ctx->ring_size) {
        pfnic_guest_error(ctx->s, "doorbell of a stopped context");
        return;
    }
    if (tail - ctx->head > ctx->ring_size) {
        pfnic_guest_error(ctx->s, "doorbell past the ring");
        return;
    }
    if (tail - ctx->head < ctx->tail - ctx->head) {
        pfnic_guest_error(ctx->s, "doorbell moving the ring tail back");
        return;
    }
    ctx->tail = tail;
    qemu_bh_schedule(ctx->s->engine_bh);
}

/* Follow the context's PASID: page responses and invalidations. */
static void pfnic_ctx_follow(PfnicContext *ctx)
{
    PCIDevice *pdev = PCI_DEVICE(ctx->s);

    ctx->pri_notifier.notify = pfnic_pri_response;
    ctx->pri_registered =
        pci_pri_register_notifier(pdev, ctx->pasid, &ctx->pri_notifier) == 0;
    ctx->iotlb_registered =
        pci_iommu_init_iotlb_notifier(pdev, &ctx->iotlb_notifier,
                                      pfnic_iotlb_unmap, ctx) == 0 &&
        pci_iommu_register_iotlb_notifier(pdev, ctx->pasid,
                                          &ctx->iotlb_notifier) == 0;
    trace_pfnic_ctx_follow(ctx->index, ctx->pasid, ctx->pri_registered,
                           ctx->iotlb_registered);
}

/* Start the context: from descriptor 0, in its PASID if it has one. */
bool pfnic_ctx_start(PfnicContext *ctx)
{
    ctx->head = ctx->tail = 0;
    ctx->busy = false;
    pfnic_page_wait_reset(ctx->s, &ctx->pw);
    memset(&ctx->stats, 0, sizeof(ctx->stats));
    ctx->remote_access_errors = 0;
    memset(ctx->refill, 0, sizeof(ctx->refill));
    ctx->access_alert_armed = true;
    if (!ctx->no_pasid) {
        pfnic_ctx_follow(ctx);
    }
    return true;
}

/* Another running context of the same PASID (the same process), if any */
static PfnicContext *pfnic_ctx_same_pasid(PfnicContext *ctx)
{
    PfnicState *s = ctx->s;

    for (uint32_t i = 0; i < s->num_contexts; i++) {
        PfnicContext *c = &s->contexts[i];

        if (c != ctx && c->enabled && c->pri_registered &&
            c->pasid == ctx->pasid) {
            return c;
        }
    }
    return NULL;
}

/* Stop the context: nothing in flight survives, and its PASID is forgotten. */
void pfnic_ctx_stop(PfnicContext *ctx)
{
    PCIDevice *pdev = PCI_DEVICE(ctx->s);

    if (ctx->pri_registered) {
        /* One notifier per PASID: hand it to a context still using it. */
        PfnicContext *other = pfnic_ctx_same_pasid(ctx);

        if (other) {
            pci_pri_register_notifier(pdev, ctx->pasid, &other->pri_notifier);
        } else {
            pci_pri_unregister_notifier(pdev, ctx->pasid);
        }
        ctx->pri_registered = false;
    }
    if (ctx->iotlb_registered) {
        pci_iommu_unregister_iotlb_notifier(pdev, ctx->pasid,
                                            &ctx->iotlb_notifier);
        ctx->iotlb_registered = false;
    }
    if (!ctx->no_pasid) {
        /* Not another context's entries, whose PASID CTX_PASID may name */
        pfnic_atc_flush(ctx->s, ctx->pasid, 0, UINT64_MAX);
    }
    ctx->busy = false;
    pfnic_ctx_drop_groups(ctx);
    pfnic_page_wait_reset(ctx->s, &ctx->pw);
    pfnic_qp_ctx_stop(ctx->s, ctx);
}

void pfnic_engine_reset(PfnicState *s)
{
    for (uint32_t i = 0; i < s->num_contexts; i++) {
        PfnicContext *ctx = &s->contexts[i];

        if (ctx->enabled) {
            pfnic_ctx_stop(ctx);
        }
        *ctx = (PfnicContext) { .s = s, .index = i };
    }
    memset(s->atc, 0, sizeof(s->atc));
    memset(s->groups, 0, sizeof(s->groups));
    s->groups_out = s->pages_out = 0;
    s->retry_soon = false;
    memset(&s->stats, 0, sizeof(s->stats));
    pfnic_verbs_reset(s);
    qemu_bh_cancel(s->engine_bh);
    timer_del(s->retry_timer);
}

void pfnic_engine_init(PfnicState *s)
{
    s->engine_bh = aio_bh_new_guarded(qemu_get_aio_context(), pfnic_engine_bh,
                                      s, &DEVICE(s)->mem_reentrancy_guard);
    s->retry_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, pfnic_prq_retry, s);
    pfnic_verbs_init(s);
}

void pfnic_engine_exit(PfnicState *s)
{
    pfnic_engine_reset(s);
    pfnic_verbs_exit(s);
    timer_free(s->retry_timer);
    qemu_bh_delete(s->engine_bh);
}
