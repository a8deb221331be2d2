/*
 * pfnic verbs: object tables, the admin command mailbox, completion queue
 * entries and the event queue
 *
 * docs/verbs.md is the definition. The driver fills the tables through the
 * command mailbox in BAR0 (one command at a time, executed synchronously
 * under the BQL); the QPs execute in the engine's bottom half (pfnic_qp.c).
 * Nothing here keeps a pointer to a table entry across commands: the engine
 * names MRs by index and key and QPs by number and generation, so clearing
 * or destroying an object can never leave a dangling reference.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "qemu/guest-random.h"
#include "qemu/timer.h"
#include "hw/pci/msix.h"
#include "net/eth.h"
#include "system/dma.h"
#include "pfnic.h"
#include "pfnic_regs.h"
#include "trace.h"

QEMU_BUILD_BUG_ON(sizeof(PfnicWqe) != PFNIC_WQE_SIZE);
/* ABI 1.19: a UD WQE's address vector, which the driver hands the provider */
QEMU_BUILD_BUG_ON(offsetof(PfnicWqe, ud.dest_ip) != 0x18);
QEMU_BUILD_BUG_ON(offsetof(PfnicWqe, ud.dmac) != 0x20);
QEMU_BUILD_BUG_ON(offsetof(PfnicWqe, ud.dgid) != 0x30);
/* ABI 1.21: a REG_MR WQE's fields */
QEMU_BUILD_BUG_ON(offsetof(PfnicWqe, reg.access) != 0x1c);
QEMU_BUILD_BUG_ON(offsetof(PfnicWqe, reg.pbl) != 0x28);
QEMU_BUILD_BUG_ON(offsetof(PfnicWqe, reg.reserved1) != 0x38);
QEMU_BUILD_BUG_ON(sizeof(PfnicCqe) != PFNIC_CQE_SIZE);
QEMU_BUILD_BUG_ON(sizeof(PfnicCqeTs) != PFNIC_CQE_TS_SIZE);
QEMU_BUILD_BUG_ON(sizeof(PfnicDesc) != PFNIC_DESC_SIZE);

static void pfnic_mr_faults_drop(PfnicState *s, uint32_t mr, uint32_t ctx);
static void pfnic_mr_fault_flush(PfnicState *s);

/* --- memory keys ------------------------------------------------------- */

/* The valid MR whose key has @key's base (its low byte may differ), if any */
static PfnicMr *pfnic_mr_by_base(PfnicState *s, uint32_t key)
{
    uintptr_t slot = GPOINTER_TO_UINT(g_hash_table_lookup(s->keys,
                                      GUINT_TO_POINTER(pfnic_key_base(key))));

    return slot ? &s->mrs[slot - 1] : NULL;
}

/*
 * The MR that @key names, if it belongs to context @ctx and protection
 * domain @pd (UINT32_MAX: any), covers [addr, addr + len) and allows
 * @access. A zero-length range is covered by any valid entry.
 */
PfnicMr *pfnic_mr_lookup(PfnicState *s, uint32_t key, uint32_t ctx,
                         uint32_t pd, uint64_t addr, uint64_t len,
                         uint32_t access)
{
    PfnicMr *mr = pfnic_mr_by_base(s, key);

    /* The whole key names it, not its base alone; a free FAST MR nothing. */
    if (!mr || !mr->valid || mr->key != key || (mr->fast && !mr->fast_reg) ||
        mr->ctx != ctx || (pd != UINT32_MAX && mr->pd != pd) ||
        (mr->access & access) != access) {
        return NULL;
    }
    if (len && (addr < mr->addr || addr - mr->addr > mr->len - 1 ||
                len - 1 > mr->len - 1 - (addr - mr->addr))) {
        return NULL;
    }
    return mr;
}

/*
 * A remote access through the destination QP @dest: the MR, if both the QP
 * and the key allow it. A refusal counts against the destination's context
 * (and the MR, when the key names one of that context), and the first one
 * since the driver last read the count queues an ACCESS_ERROR event, so a
 * key scan is visible to the victim without flooding the event queue.
 */
PfnicMr *pfnic_mr_remote(PfnicState *s, uint32_t key, PfnicQp *dest,
                         uint64_t addr, uint64_t len, uint32_t access)
{
    PfnicContext *ctx = &s->contexts[dest->ctx];
    PfnicMr *mr = NULL;

    if ((dest->access & access) == access) {
        mr = pfnic_mr_lookup(s, key, dest->ctx, dest->pd, addr, len, access);
    }
    if (mr) {
        return mr;
    }
    mr = pfnic_mr_by_base(s, key);
    if (mr && mr->key == key && mr->ctx == dest->ctx) {
        mr->count[PFNIC_MR_REMOTE_ACCESS_ERRORS]++;
    }
    ctx->remote_access_errors++;
    trace_pfnic_remote_access_refused(dest->qpn, key, addr, len, access);
    if (ctx->access_alert_armed) {
        ctx->access_alert_armed = false;
        pfnic_event(s, PFNIC_EV_ACCESS_ERROR, ctx->index);
    }
    return NULL;
}

/*
 * Translate @va of table MR @mr: the entry of its page, if VALID with the
 * access, gives an address of the device's own DMA address space (no
 * PASID, as pci_dma_rw: the IOMMU translates it in the device's domain).
 */
static PfnicXlate pfnic_mtt_translate(PfnicState *s, PfnicMr *mr,
                                      uint64_t va, bool write, hwaddr *pa,
                                      AddressSpace **as)
{
    uint64_t need = PFNIC_MTT_VALID | (write ? PFNIC_MTT_WRITE :
                                               PFNIC_MTT_READ);
    uint64_t i = va / PFNIC_PAGE_SIZE - mr->addr / PFNIC_PAGE_SIZE;
    uint64_t e = va >= mr->addr && i < mr->mtt_entries ? pfnic_mtt_get(mr, i)
                                                       : 0;

    if ((e & need) != need) {
        trace_pfnic_mtt_fault(mr - s->mrs, va, write, e);
        return PFNIC_XLATE_DENIED;
    }
    *pa = (e & PFNIC_PAGE_MASK) | (va & ~PFNIC_PAGE_MASK);
    *as = pci_get_address_space(PCI_DEVICE(s));
    return PFNIC_XLATE_OK;
}

/*
 * Translate @va (one page of a chunk) of @mr, an MR of context @ctx, for
 * reading or writing: through the MR's table, or through the context's
 * PASID (ATC, ATS). DENIED is final: no page request can help.
 */
PfnicXlate pfnic_mr_translate(PfnicContext *ctx, PfnicMr *mr, uint64_t va,
                              bool write, hwaddr *pa, AddressSpace **as)
{
    if (mr->dm) {
        /*
         * ABI 1.13: zero-based, straight into device memory. The key check
         * kept @va inside [0, len), and MR_SET the MR inside the memory;
         * checked again so that no caller can reach past it.
         */
        if (va >= mr->len) {
            trace_pfnic_mr_dm_denied(mr - ctx->s->mrs, va, write);
            return PFNIC_XLATE_DENIED;
        }
        *pa = mr->dm_start + va;
        *as = &ctx->s->dm_as;
        return PFNIC_XLATE_OK;
    }
    if (mr->dma) {
        /*
         * ABI 1.20: the address is already one of the device's DMA address
         * space; the key check kept [va, va + len) inside the MR.
         */
        *pa = va;
        *as = pci_get_address_space(PCI_DEVICE(ctx->s));
        return PFNIC_XLATE_OK;
    }
    if (pfnic_mr_table(mr)) {
        return pfnic_mtt_translate(ctx->s, mr, va, write, pa, as);
    }
    return pfnic_translate(ctx, va, write, pa, as);
}

/* A device-IOTLB invalidation of [start, last] in @ctx's address space. */
void pfnic_mr_invalidate(PfnicContext *ctx, uint64_t start, uint64_t last)
{
    PfnicState *s = ctx->s;

    if (!ctx->mrs) {
        /* Not a verbs process: no need to scan the whole table. */
        return;
    }
    for (uint32_t i = 0; i < PFNIC_MAX_MRS; i++) {
        PfnicMr *mr = &s->mrs[i];

        if (mr->valid && mr->ctx == ctx->index && pfnic_mr_pasid(mr) &&
            start <= mr->addr + (mr->len - 1) && last >= mr->addr) {
            /* The ATC was flushed synchronously: every one is applied. */
            mr->count[PFNIC_MR_PAGE_INVALIDATIONS]++;
            mr->count[PFNIC_MR_PAGE_INVALIDATIONS_HANDLED]++;
        }
    }
}

/* Store @val in the result words @lo and @hi */
static void pfnic_cmd_set_u64(uint32_t *lo, uint32_t *hi, uint64_t val)
{
    *lo = val;
    *hi = val >> 32;
}

/*
 * The implicit MR's table (ABI 1.10): an entry for every page of the
 * address space, kept sparse: only the VALID entries written exist, each
 * counted against the table-entries property while it does.
 */
#define PFNIC_IMPLICIT_ENTRIES      (UINT64_MAX / PFNIC_PAGE_SIZE + 1)

static GHashTable *pfnic_sparse_new(void)
{
    /* The key is the first word of its { entry index, entry } pair. */
    return g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
}

/*
 * A table for an MR of [addr, addr + len) (no wrap): an entry per page
 * it touches, all invalid, counted against the table-entries property.
 * NULL when the entries are used up.
 */
static uint64_t *pfnic_mtt_alloc(PfnicState *s, uint64_t addr, uint64_t len,
                                 uint64_t *entries)
{
    uint64_t n = (addr + len - 1) / PFNIC_PAGE_SIZE - addr / PFNIC_PAGE_SIZE
                 + 1;
    uint64_t *mtt;

    if (n > s->table_entries - s->table_used) {
        return NULL;
    }
    mtt = g_try_new0(uint64_t, n);
    if (mtt) {
        s->table_used += n;
        *entries = n;
    }
    return mtt;
}

/* Give an MR's table (if any) back to the table-entries pool. */
static void pfnic_mtt_free(PfnicState *s, PfnicMr *mr)
{
    if (mr->sparse) {
        s->table_used -= g_hash_table_size(mr->sparse);
        g_hash_table_destroy(mr->sparse);
        mr->sparse = NULL;
        mr->mtt_entries = 0;
    } else if (pfnic_mr_table(mr)) {
        s->table_used -= mr->mtt_entries;
        g_free(mr->mtt);
        mr->mtt = NULL;
        mr->mtt_entries = 0;
    }
}

static uint32_t pfnic_cmd_mr_set(PfnicState *s)
{
    const PfnicCmdMrSet *a = &s->cmd.mr_set;
    uint32_t index = a->index, ctx = a->ctx, pd = a->pd;
    uint32_t access = a->access, flags = a->flags;
    uint64_t addr = pfnic_cmd_u64(a->addr_lo, a->addr_hi);
    uint64_t len = pfnic_cmd_u64(a->len_lo, a->len_hi);
    bool implicit = addr == 0 && len == UINT64_MAX;
    bool table = flags & PFNIC_MR_FLAG_TABLE;
    bool fault = flags & PFNIC_MR_FLAG_FAULT;
    bool dm = flags & PFNIC_MR_FLAG_DM;
    bool dma = flags & PFNIC_MR_FLAG_DMA;
    bool fast = flags & PFNIC_MR_FLAG_FAST;
    PfnicContext *c;
    uint64_t *mtt = NULL, entries = 0;
    GHashTable *sparse = NULL;
    PfnicMr *mr;
    uint32_t v;

    if (index >= PFNIC_MAX_MRS || ctx >= s->num_contexts) {
        return PFNIC_CMD_BAD_INDEX;
    }
    c = &s->contexts[ctx];
    /* ABI 1.18: a device memory MR may be empty (it covers no byte). */
    if (access & ~PFNIC_MR_ACCESS_MASK || (!len && !dm) ||
        (addr + len < addr && !implicit)) {
        return PFNIC_CMD_BAD_ARG;
    }
    /*
     * The implicit MR is a whole address space: a PASID's, or (ABI 1.10) a
     * sparse table the driver fills on demand, so only with FAULT. A
     * context running without a PASID reaches memory through tables only.
     */
    if (dm) {
        /*
         * ABI 1.13: [addr, addr + len) of the device memory, alone, and
         * never on demand; any context may have it (no translation).
         */
        if (flags != PFNIC_MR_FLAG_DM || !s->dm_size || implicit ||
            access & PFNIC_ACCESS_ON_DEMAND || addr >= s->dm_size ||
            len > s->dm_size - addr) {
            return PFNIC_CMD_BAD_ARG;
        }
    } else if (dma) {
        /*
         * ABI 1.20: the device's own DMA addresses, alone, never on demand,
         * and only for a context running without a PASID (the driver's:
         * its addresses are the device's, not a process's).
         */
        if (flags != PFNIC_MR_FLAG_DMA || access & PFNIC_ACCESS_ON_DEMAND ||
            !c->enabled || !c->no_pasid) {
            return PFNIC_CMD_BAD_ARG;
        }
    } else if (fast) {
        /*
         * ABI 1.21: a table of len / 4096 pages for REG_MR to fill, alone,
         * and for the driver's context, as DMA MRs: its work requests
         * register it, with the driver's DMA addresses.
         */
        if (flags != PFNIC_MR_FLAG_FAST || access || addr ||
            len % PFNIC_PAGE_SIZE ||
            len / PFNIC_PAGE_SIZE > PFNIC_FAST_MAX_PAGES ||
            !c->enabled || !c->no_pasid) {
            return PFNIC_CMD_BAD_ARG;
        }
    } else if (flags & ~PFNIC_MR_FLAGS_MASK ||
               (table && implicit && !fault) ||
               (!table && c->enabled && c->no_pasid) || (fault && !table)) {
        return PFNIC_CMD_BAD_ARG;
    }
    mr = &s->mrs[index];
    if (mr->valid) {
        return PFNIC_CMD_BAD_STATE;
    }
    if (table && implicit) {
        sparse = pfnic_sparse_new();
        entries = PFNIC_IMPLICIT_ENTRIES;
    } else if (table || fast) {
        mtt = pfnic_mtt_alloc(s, addr, len, &entries);
        if (!mtt) {
            return PFNIC_CMD_NO_SPACE;
        }
        trace_pfnic_mr_table(index, entries, s->table_used, s->table_entries);
    }
    /*
     * 32 random bits, nothing in them predictable; the base (never 0, so
     * no key is) unused, so that no low byte of ours meets another's key.
     */
    do {
        qemu_guest_getrandom_nofail(&v, sizeof(v));
    } while (!pfnic_key_base(v) || pfnic_mr_by_base(s, v));
    *mr = (PfnicMr) {
        .valid = true,
        .key = v,
        .ctx = ctx,
        .pd = pd,
        .access = access,
        .addr = addr,
        .len = len,
        .mtt = mtt,
        .sparse = sparse,
        .mtt_entries = entries,
        .fault = fault,
        .dma = dma,
        .fast = fast,
    };
    if (dm) {
        /* Zero-based: its addresses are offsets from addr in the memory. */
        mr->addr = 0;
        mr->dm = true;
        mr->dm_start = addr;
    }
    g_hash_table_insert(s->keys, GUINT_TO_POINTER(pfnic_key_base(v)),
                        GUINT_TO_POINTER(index + 1));
    c->mrs++;
    s->cmd.mr_set_reply.key = mr->key;
    if (dm) {
        trace_pfnic_mr_set_dm(index, mr->key, ctx, pd, access, addr, len);
    } else {
        trace_pfnic_mr_set(index, mr->key, ctx, pd, access, addr, len);
    }
    return PFNIC_CMD_OK;
}

/*
 * MR_MODIFY (ABI 1.18): a valid MR gets another PD and access, and keeps its
 * key, range, table and counters (ibv_rereg_mr of the PD or the access, as
 * mlx5 and rxe do it in place). Whether it is on demand cannot change; work
 * in flight meets the new PD and access at its next check.
 */
static uint32_t pfnic_cmd_mr_modify(PfnicState *s)
{
    const PfnicCmdMrModify *a = &s->cmd.mr_modify;
    uint32_t index = a->index, pd = a->pd, access = a->access;
    PfnicMr *mr;

    if (index >= PFNIC_MAX_MRS) {
        return PFNIC_CMD_BAD_INDEX;
    }
    mr = &s->mrs[index];
    /* A FAST MR's access is its registration's (ABI 1.21). */
    if (!mr->valid || mr->fast) {
        return PFNIC_CMD_BAD_STATE;
    }
    if (access & ~PFNIC_MR_ACCESS_MASK ||
        (access ^ mr->access) & PFNIC_ACCESS_ON_DEMAND) {
        return PFNIC_CMD_BAD_ARG;
    }
    mr->pd = pd;
    mr->access = access;
    trace_pfnic_mr_modify(index, mr->key, pd, access);
    return PFNIC_CMD_OK;
}

static uint32_t pfnic_cmd_mr_clear(PfnicState *s)
{
    uint32_t index = s->cmd.index.index;

    if (index >= PFNIC_MAX_MRS) {
        return PFNIC_CMD_BAD_INDEX;
    }
    if (!s->mrs[index].valid) {
        return PFNIC_CMD_BAD_STATE;
    }
    /*
     * In-flight work holds index and key only: it fails its next check.
     * Work waiting for the driver to fill the table goes on to fail it,
     * and the MR's reports are forgotten.
     */
    if (s->mrs[index].fault) {
        pfnic_mr_faults_drop(s, index, UINT32_MAX);
    }
    s->contexts[s->mrs[index].ctx].mrs--;
    g_hash_table_remove(s->keys,
                        GUINT_TO_POINTER(pfnic_key_base(s->mrs[index].key)));
    pfnic_mtt_free(s, &s->mrs[index]);
    s->mrs[index] = (PfnicMr) { };
    trace_pfnic_mr_clear(index);
    return PFNIC_CMD_OK;
}

static uint32_t pfnic_cmd_mr_query(PfnicState *s)
{
    uint32_t index = s->cmd.index.index;

    if (index >= PFNIC_MAX_MRS) {
        return PFNIC_CMD_BAD_INDEX;
    }
    if (!s->mrs[index].valid) {
        return PFNIC_CMD_BAD_STATE;
    }
    /* The reply's pairs of words are the counters in their order. */
    QEMU_BUILD_BUG_ON(sizeof(PfnicCmdMrQueryReply) !=
                      PFNIC_MR_CNT_NR * sizeof(uint64_t));
    for (int c = 0; c < PFNIC_MR_CNT_NR; c++) {
        pfnic_cmd_set_u64(&s->cmd.word[2 * c], &s->cmd.word[2 * c + 1],
                          s->mrs[index].count[c]);
    }
    return PFNIC_CMD_OK;
}

/*
 * MTT_WRITE and MTT_INVALIDATE: the table MR @index and its entries
 * [first, first + @count), 1..@max of them, all in the table.
 */
static uint32_t pfnic_mtt_range(PfnicState *s, uint32_t index, uint64_t first,
                                uint32_t count, uint32_t max, PfnicMr **mrp)
{
    PfnicMr *mr;

    if (index >= PFNIC_MAX_MRS) {
        return PFNIC_CMD_BAD_INDEX;
    }
    mr = &s->mrs[index];
    /* A FAST MR's table is its registration's (ABI 1.21). */
    if (!mr->valid || !pfnic_mr_table(mr) || mr->fast) {
        return PFNIC_CMD_BAD_STATE;
    }
    if (!count || count > max || first >= mr->mtt_entries ||
        count > mr->mtt_entries - first) {
        return PFNIC_CMD_BAD_ARG;
    }
    *mrp = mr;
    return PFNIC_CMD_OK;
}

/* Store @count entries @e from @first into the implicit table of @mr. */
static uint32_t pfnic_sparse_write(PfnicState *s, PfnicMr *mr, uint64_t first,
                                   const uint64_t *e, uint32_t count)
{
    uint64_t added = 0;

    /* Room for every new VALID entry, or nothing changes. */
    for (uint32_t i = 0; i < count; i++) {
        uint64_t k = first + i;

        if ((e[i] & PFNIC_MTT_VALID) &&
            !g_hash_table_contains(mr->sparse, &k)) {
            added++;
        }
    }
    if (added > s->table_entries - s->table_used) {
        return PFNIC_CMD_NO_SPACE;
    }
    for (uint32_t i = 0; i < count; i++) {
        uint64_t k = first + i;

        if (e[i] & PFNIC_MTT_VALID) {
            uint64_t *pair = g_new(uint64_t, 2);

            pair[0] = k;
            pair[1] = e[i];
            /* Replaces (and frees) the pair of the same key, if any. */
            g_hash_table_replace(mr->sparse, pair, pair);
        } else if (g_hash_table_remove(mr->sparse, &k)) {
            s->table_used--;
        }
    }
    s->table_used += added;
    return PFNIC_CMD_OK;
}

/*
 * Entries from the driver's memory (DMA without PASID): all are checked
 * before any is written, so a bad one changes nothing.
 */
static uint32_t pfnic_cmd_mtt_write(PfnicState *s)
{
    const PfnicCmdMttWrite *a = &s->cmd.mtt_write;
    uint32_t count = a->count;
    uint64_t src = pfnic_cmd_u64(a->entries_lo, a->entries_hi);
    uint64_t first = pfnic_cmd_u64(a->first, a->first_hi);
    uint64_t e[PFNIC_MTT_WRITE_MAX];
    PfnicMr *mr = NULL;
    uint32_t st = pfnic_mtt_range(s, a->index, first, count,
                                  PFNIC_MTT_WRITE_MAX, &mr);

    if (st != PFNIC_CMD_OK) {
        return st;
    }
    if (src % sizeof(e[0]) || src + count * sizeof(e[0]) - 1 < src ||
        pci_dma_read(PCI_DEVICE(s), src, e, count * sizeof(e[0])) !=
        MEMTX_OK) {
        return PFNIC_CMD_BAD_ARG;
    }
    for (uint32_t i = 0; i < count; i++) {
        e[i] = le64_to_cpu(e[i]);
        if (e[i] & PFNIC_MTT_RESERVED) {
            return PFNIC_CMD_BAD_ARG;
        }
    }
    if (mr->sparse) {
        st = pfnic_sparse_write(s, mr, first, e, count);
    } else {
        memcpy(&mr->mtt[first], e, count * sizeof(e[0]));
    }
    trace_pfnic_mtt_write(a->index, first, count, src);
    return st;
}

typedef struct PfnicSparseRange {
    uint64_t first, count;
} PfnicSparseRange;

static gboolean pfnic_sparse_in_range(gpointer key, gpointer value,
                                      gpointer opaque)
{
    const PfnicSparseRange *r = opaque;
    uint64_t k = *(uint64_t *)key;

    return k >= r->first && k - r->first < r->count;
}

/* The device reads the table for every page it moves: nothing to flush. */
static uint32_t pfnic_cmd_mtt_invalidate(PfnicState *s)
{
    const PfnicCmdMttInvalidate *a = &s->cmd.mtt_invalidate;
    uint32_t count = a->count;
    uint64_t first = pfnic_cmd_u64(a->first, a->first_hi);
    PfnicMr *mr = NULL;
    uint32_t st = pfnic_mtt_range(s, a->index, first, count, UINT32_MAX, &mr);

    if (st != PFNIC_CMD_OK) {
        return st;
    }
    if (mr->sparse && count > g_hash_table_size(mr->sparse)) {
        /* A long range: look at the entries there are instead. */
        PfnicSparseRange r = { first, count };

        s->table_used -= g_hash_table_foreach_remove(mr->sparse,
                                                     pfnic_sparse_in_range,
                                                     &r);
    } else if (mr->sparse) {
        for (uint32_t i = 0; i < count; i++) {
            uint64_t k = first + i;

            if (g_hash_table_remove(mr->sparse, &k)) {
                s->table_used--;
            }
        }
    } else {
        for (uint32_t i = 0; i < count; i++) {
            mr->mtt[first + i] &= ~PFNIC_MTT_VALID;
        }
    }
    trace_pfnic_mtt_invalidate(a->index, first, count);
    return PFNIC_CMD_OK;
}

/* --- fast registration (ABI 1.21) --------------------------------------- */

/*
 * The FAST MR of context @ctx and PD @pd whose key has @key's base; with
 * @exact, only if @key is its key, low byte and all
 */
static PfnicMr *pfnic_mr_fast(PfnicState *s, uint32_t ctx, uint32_t pd,
                              uint32_t key, bool exact)
{
    PfnicMr *mr = pfnic_mr_by_base(s, key);

    if (!mr || !mr->valid || !mr->fast || mr->ctx != ctx || mr->pd != pd ||
        (exact && mr->key != key)) {
        return NULL;
    }
    return mr;
}

/*
 * LOCAL_INV, or a SEND_WITH_INV at its responder: the FAST MR that @key
 * names exactly, registered or not, becomes free. Work in flight holds
 * index and key only: its next key check fails. Its table goes too, so
 * that nothing reaches the pages through it.
 */
bool pfnic_mr_fast_inv(PfnicState *s, uint32_t ctx, uint32_t pd, uint32_t key)
{
    PfnicMr *mr = pfnic_mr_fast(s, ctx, pd, key, true);

    if (!mr) {
        return false;
    }
    mr->fast_reg = false;
    memset(mr->mtt, 0, mr->mtt_entries * sizeof(mr->mtt[0]));
    trace_pfnic_mr_fast_inv(mr - s->mrs, key);
    return true;
}

/*
 * REG_MR: the free FAST MR of the QP's context and PD whose key has the
 * base of the WQE's key takes that key, the range, the access and the
 * pages of the list at pbl (the driver's DMA addresses, read without
 * PASID). Returns the WQE's completion status.
 */
static uint8_t pfnic_mr_fast_reg(PfnicState *s, const PfnicQp *qp,
                                 const PfnicWqe *w)
{
    const PfnicWqeReg *r = &w->reg;
    uint64_t e[PFNIC_FAST_MAX_PAGES], span;
    PfnicMr *mr;

    /* What the WQE alone says is wrong */
    if (r->access & ~PFNIC_QP_ACCESS_MASK || !r->length ||
        r->iova + (r->length - 1) < r->iova || r->reserved0 ||
        r->reserved1 || r->pbl % sizeof(e[0]) || !r->pages ||
        r->pages > PFNIC_FAST_MAX_PAGES) {
        return PFNIC_WC_LOC_QP_OP_ERR;
    }
    span = (r->iova + (r->length - 1)) / PFNIC_PAGE_SIZE -
           r->iova / PFNIC_PAGE_SIZE + 1;
    if (r->pages < span) {
        return PFNIC_WC_LOC_QP_OP_ERR;
    }
    mr = pfnic_mr_fast(s, qp->ctx, qp->pd, r->key, false);
    if (!mr || mr->fast_reg) {
        return PFNIC_WC_LOC_PROT_ERR;
    }
    if (r->pages > mr->mtt_entries) {
        return PFNIC_WC_LOC_QP_OP_ERR;
    }
    if (r->pbl + (r->pages * sizeof(e[0]) - 1) < r->pbl ||
        pci_dma_read(PCI_DEVICE(s), r->pbl, e, r->pages * sizeof(e[0])) !=
        MEMTX_OK) {
        /* The WQE's status says it: the device itself is fine. */
        qemu_log_mask(LOG_GUEST_ERROR, "pfnic: QP %u: REG_MR page list at "
                      "0x%" PRIx64 " unreadable\n", qp->qpn, r->pbl);
        return PFNIC_WC_LOC_PROT_ERR;
    }
    for (uint32_t i = 0; i < r->pages; i++) {
        e[i] = le64_to_cpu(e[i]);
        if (e[i] & ~PFNIC_PAGE_MASK) {
            return PFNIC_WC_LOC_QP_OP_ERR;
        }
    }
    for (uint64_t i = 0; i < mr->mtt_entries; i++) {
        mr->mtt[i] = i < r->pages ? e[i] | PFNIC_MTT_VALID | PFNIC_MTT_READ |
                                    PFNIC_MTT_WRITE : 0;
    }
    mr->key = r->key;
    mr->addr = r->iova;
    mr->len = r->length;
    mr->access = r->access;
    mr->fast_reg = true;
    trace_pfnic_mr_fast_reg(qp->qpn, mr - s->mrs, r->key, r->iova, r->length,
                            r->access, r->pages);
    return PFNIC_WC_SUCCESS;
}

/*
 * A local WQE (LOCAL_INV or REG_MR) of @qp, which pfnic_wqe_check() took:
 * what it does to the MR table, and its completion status
 */
uint8_t pfnic_wqe_local(PfnicState *s, const PfnicQp *qp, const PfnicWqe *w)
{
    if (w->opcode == PFNIC_WR_REG_MR) {
        return pfnic_mr_fast_reg(s, qp, w);
    }
    return pfnic_mr_fast_inv(s, qp->ctx, qp->pd, pfnic_wqe_inv_key(w)) ?
           PFNIC_WC_SUCCESS : PFNIC_WC_LOC_PROT_ERR;
}

/* Refused remote accesses to a context; re-arms its ACCESS_ERROR event. */
static uint32_t pfnic_cmd_ctx_query(PfnicState *s)
{
    uint32_t index = s->cmd.index.index;
    PfnicContext *ctx;

    if (index >= s->num_contexts) {
        return PFNIC_CMD_BAD_INDEX;
    }
    ctx = &s->contexts[index];
    pfnic_cmd_set_u64(&s->cmd.ctx_query_reply.access_errors_lo,
                      &s->cmd.ctx_query_reply.access_errors_hi,
                      ctx->remote_access_errors);
    ctx->access_alert_armed = true;
    return PFNIC_CMD_OK;
}

/* --- completion queues ------------------------------------------------- */

static bool pfnic_cq_used(PfnicState *s, uint32_t cqn)
{
    for (uint32_t i = 0; i < PFNIC_MAX_QPS; i++) {
        PfnicQp *qp = &s->qps[i];

        if (qp->valid && (qp->scqn == cqn || qp->rcqn == cqn)) {
            return true;
        }
    }
    return false;
}

/*
 * CQ_CREATE: 2^log2_entries CQEs at the ring, the record, for a context;
 * flags (ABI 1.12: TIMESTAMP, 64-byte CQEs carrying the device clock).
 */
static uint32_t pfnic_cmd_cq_create(PfnicState *s)
{
    const PfnicCmdCqCreate *a = &s->cmd.cq_create;
    uint32_t cqn = a->cqn, ctx = a->ctx, log2 = a->log2_entries;
    uint32_t flags = a->flags;
    PfnicCq *cq;

    if (cqn >= PFNIC_MAX_CQS || ctx >= s->num_contexts) {
        return PFNIC_CMD_BAD_INDEX;
    }
    if (log2 > PFNIC_MAX_LOG2 || (flags & ~PFNIC_CQ_FLAGS_MASK)) {
        return PFNIC_CMD_BAD_ARG;
    }
    cq = &s->cqs[cqn];
    if (cq->valid) {
        return PFNIC_CMD_BAD_STATE;
    }
    *cq = (PfnicCq) {
        .valid = true,
        .ctx = ctx,
        .ring = pfnic_cmd_u64(a->ring_lo, a->ring_hi),
        .entries = 1u << log2,
        .record = pfnic_cmd_u64(a->record_lo, a->record_hi),
        .timestamp = flags & PFNIC_CQ_FLAG_TIMESTAMP,
    };
    trace_pfnic_cq_create(cqn, ctx, cq->ring, cq->entries, cq->record,
                          cq->timestamp);
    return PFNIC_CMD_OK;
}

static uint32_t pfnic_cmd_cq_destroy(PfnicState *s)
{
    uint32_t cqn = s->cmd.index.index;

    if (cqn >= PFNIC_MAX_CQS) {
        return PFNIC_CMD_BAD_INDEX;
    }
    if (!s->cqs[cqn].valid) {
        return PFNIC_CMD_BAD_STATE;
    }
    if (pfnic_cq_used(s, cqn)) {
        return PFNIC_CMD_BUSY;
    }
    s->cqs[cqn] = (PfnicCq) { };
    trace_pfnic_cq_destroy(cqn);
    return PFNIC_CMD_OK;
}

/* The consumer index software wrote to the CQ record. */
static bool pfnic_cq_consumer(PfnicState *s, PfnicCq *cq, uint32_t *cons)
{
    if (pci_dma_read(PCI_DEVICE(s), cq->record, cons, sizeof(*cons)) !=
        MEMTX_OK) {
        return false;
    }
    *cons = le32_to_cpu(*cons);
    return true;
}

static void pfnic_cq_overflow(PfnicState *s, uint32_t cqn)
{
    PfnicCq *cq = &s->cqs[cqn];

    trace_pfnic_cq_overflow(cqn, cq->prod);
    cq->overflowed = true;
    for (uint32_t i = 0; i < PFNIC_MAX_QPS; i++) {
        PfnicQp *qp = &s->qps[i];

        if (qp->valid && (qp->scqn == cqn || qp->rcqn == cqn)) {
            pfnic_qp_enter_err(s, qp, false);
        }
    }
    pfnic_event(s, PFNIC_EV_CQ_ERROR, cqn);
}

/*
 * Write entry @prod of a ring of @entries entries of @size bytes at @base
 * (a CQ or the EQ): the entry with the owner byte at @owner_off still at the
 * previous lap's value, then the owner byte, which hands it to software.
 */
static bool pfnic_ring_put(PfnicState *s, uint64_t base, uint32_t entries,
                           uint32_t prod, void *entry, size_t size,
                           size_t owner_off)
{
    PCIDevice *pdev = PCI_DEVICE(s);
    hwaddr addr = base + (hwaddr)(prod % entries) * size;
    uint8_t owner = ((prod / entries) & 1) ^ 1;

    ((uint8_t *)entry)[owner_off] = owner ^ 1;
    return pci_dma_write(pdev, addr, entry, size) == MEMTX_OK &&
           pci_dma_write(pdev, addr + owner_off, &owner, 1) == MEMTX_OK;
}

/*
 * Write a CQE to CQ @cqn: the entry first, its owner byte last; in a
 * TIMESTAMP CQ (ABI 1.12) 64 bytes, stamped with the device clock now.
 * @solicited (or an error status) satisfies a solicited-only arm. Returns
 * false when the CQ is unusable (destroyed, overflowed, unwritable); the
 * caller's QP has then entered ERR or its CQ is in error.
 */
bool pfnic_cqe_write(PfnicState *s, uint32_t cqn, PfnicCqe *cqe,
                     bool solicited)
{
    PfnicCq *cq;
    PfnicCqeTs le = { };
    size_t size;
    uint32_t cons;

    if (cqn >= PFNIC_MAX_CQS || !s->cqs[cqn].valid) {
        return false;
    }
    cq = &s->cqs[cqn];
    if (cq->overflowed) {
        trace_pfnic_cqe_dropped(cqn, cqe->qp_num, cqe->status);
        return false;
    }
    if (!pfnic_cq_consumer(s, cq, &cons)) {
        pfnic_guest_error(s, "CQ record unreadable");
        pfnic_cq_overflow(s, cqn);
        return false;
    }
    if (cq->prod - cons >= cq->entries) {
        pfnic_cq_overflow(s, cqn);
        return false;
    }

    le.cqe = (PfnicCqe) {
        .wr_id = cpu_to_le64(cqe->wr_id),
        .byte_len = cpu_to_le32(cqe->byte_len),
        .imm_data = cqe->imm_data,
        .qp_num = cpu_to_le32(cqe->qp_num),
        .src_qp = cpu_to_le32(cqe->src_qp),
        .status = cqe->status,
        .opcode = cqe->opcode,
        .wc_flags = cqe->wc_flags,
        .vendor_err = cpu_to_le32(cqe->vendor_err),
    };
    size = sizeof(le.cqe);
    if (cq->timestamp) {
        le.timestamp = cpu_to_le64(pfnic_clock(s));
        size = sizeof(le);
    }
    trace_pfnic_cqe(cqn, cq->prod, cqe->qp_num, cqe->wr_id, cqe->status,
                    cqe->opcode, cqe->byte_len, le64_to_cpu(le.timestamp));
    if (!pfnic_ring_put(s, cq->ring, cq->entries, cq->prod, &le, size,
                        offsetof(PfnicCqe, owner))) {
        pfnic_guest_error(s, "CQ ring unwritable");
        pfnic_cq_overflow(s, cqn);
        return false;
    }
    cq->prod++;
    if (cq->armed && (!cq->armed_solicited || solicited ||
                      cqe->status != PFNIC_WC_SUCCESS)) {
        cq->armed = false;
        pfnic_event(s, PFNIC_EV_COMPLETION, cqn);
    }
    return true;
}

/* CQ_ARM doorbell in @ctx's page. */
void pfnic_cq_arm(PfnicContext *ctx, uint32_t val)
{
    PfnicState *s = ctx->s;
    uint32_t cqn = val >> 16;
    PfnicCq *cq;

    if (cqn >= PFNIC_MAX_CQS || !s->cqs[cqn].valid ||
        s->cqs[cqn].ctx != ctx->index) {
        pfnic_guest_error(s, "CQ_ARM for a CQ of another context");
        return;
    }
    if (val & 0xffff & ~PFNIC_CQ_ARM_SOLICITED) {
        pfnic_guest_error(s, "reserved CQ_ARM bits set");
    }
    cq = &s->cqs[cqn];
    trace_pfnic_cq_arm(cqn, val & PFNIC_CQ_ARM_SOLICITED, cq->prod);
    /*
     * As ibv_req_notify_cq: only the next CQE raises the event. CQEs
     * already there raise none (software polls after arming), or a program
     * that takes each event as the promise of a CQE would find none.
     */
    cq->armed = true;
    cq->armed_solicited = val & PFNIC_CQ_ARM_SOLICITED;
}

/* --- event queue ------------------------------------------------------- */

/*
 * Queue the event entry @e (type and object filled in), owner byte last,
 * and signal EQ_VECTOR. 0 once queued; -ENODEV with no queue, -ENOSPC
 * when it is full, -EIO when it cannot be written.
 */
static int pfnic_eq_put(PfnicState *s, uint8_t *e)
{
    PCIDevice *pdev = PCI_DEVICE(s);

    trace_pfnic_event(e[0], ldl_le_p(&e[4]), s->eq_prod);
    if (!s->eq_size) {
        return -ENODEV;
    }
    if (s->eq_prod - s->eq_cons >= s->eq_size) {
        return -ENOSPC;
    }
    if (!pfnic_ring_put(s, s->eq_base, s->eq_size, s->eq_prod, e,
                        PFNIC_EQE_SIZE, PFNIC_EQE_OWNER)) {
        pfnic_guest_error(s, "event queue unwritable");
        return -EIO;
    }
    s->eq_prod++;
    if (msix_enabled(pdev) && s->eq_vector < s->num_vectors) {
        msix_notify(pdev, s->eq_vector);
    }
    return 0;
}

/*
 * Queue one event with its type-specific flags byte; one that finds the
 * queue full is dropped and counted. Returns whether it was queued.
 */
bool pfnic_event_flags(PfnicState *s, uint8_t type, uint8_t flags,
                       uint32_t object)
{
    uint8_t e[PFNIC_EQE_SIZE] = { type };
    int ret;

    e[PFNIC_EQE_FLAGS] = flags;
    stl_le_p(&e[4], object);
    ret = pfnic_eq_put(s, e);
    if (ret == -ENOSPC) {
        s->eq_overflow++;
        trace_pfnic_event_overflow(type, object, s->eq_overflow);
    }
    return ret == 0;
}

bool pfnic_event(PfnicState *s, uint8_t type, uint32_t object)
{
    return pfnic_event_flags(s, type, 0, object);
}

void pfnic_eq_write_reg(PfnicState *s, hwaddr addr, uint32_t val)
{
    switch (addr) {
    case PFNIC_REG_EQ_BASE_LO:
        s->eq_base = deposit64(s->eq_base, 0, 32, val);
        if (s->eq_base % PFNIC_EQE_SIZE) {
            pfnic_guest_error(s, "unaligned event queue");
            s->eq_base &= ~(uint64_t)(PFNIC_EQE_SIZE - 1);
        }
        break;
    case PFNIC_REG_EQ_BASE_HI:
        s->eq_base = deposit64(s->eq_base, 32, 32, val);
        break;
    case PFNIC_REG_EQ_SIZE:
        if (val && (val < 2 || val > PFNIC_EQ_MAX || !is_power_of_2(val))) {
            pfnic_guest_error(s, "bad event queue size");
            return;
        }
        s->eq_size = val;
        s->eq_prod = s->eq_cons = 0;
        pfnic_mr_fault_flush(s);
        break;
    case PFNIC_REG_EQ_HEAD:
        if (val - s->eq_cons > s->eq_prod - s->eq_cons) {
            pfnic_guest_error(s, "EQ_HEAD past the produced events");
            return;
        }
        s->eq_cons = val;
        /* Room again: PAGE_FAULT events held back go first. */
        pfnic_mr_fault_flush(s);
        break;
    case PFNIC_REG_EQ_VECTOR:
        if (val >= s->num_vectors) {
            pfnic_guest_error(s, "event queue vector out of range");
            return;
        }
        s->eq_vector = val;
        break;
    default:
        pfnic_guest_error(s, "write to a read-only register");
        break;
    }
}

uint32_t pfnic_eq_read_reg(PfnicState *s, hwaddr addr)
{
    switch (addr) {
    case PFNIC_REG_EQ_BASE_LO:
        return s->eq_base;
    case PFNIC_REG_EQ_BASE_HI:
        return s->eq_base >> 32;
    case PFNIC_REG_EQ_SIZE:
        return s->eq_size;
    case PFNIC_REG_EQ_HEAD:
        return s->eq_cons;
    case PFNIC_REG_EQ_VECTOR:
        return s->eq_vector;
    case PFNIC_REG_EQ_OVERFLOW:
        return s->eq_overflow;
    }
    return 0;
}

/* --- driver-managed faults (ABI 1.9) ------------------------------------ */

/*
 * A FAULT MR's entry that refuses a page makes the work wait for the
 * driver instead of failing it: one PAGE_FAULT event per report
 * (PfnicMrFault) names the entries, the driver fills them with MTT_WRITE
 * and answers FAULT_RESUME, which wakes every waiter of an entry in its
 * range (or fails it). A waiter names its report by index and the report
 * its MR by index and key, so an MR_CLEAR or a reset can never leave a
 * report that a later MR at the same index would take for its own.
 */

/* The report @w waits for, if any */
static PfnicMrFault *pfnic_wait_report(PfnicState *s, PfnicPageWait *w)
{
    if (!w->drv || w->drv > PFNIC_MR_FAULTS) {
        return NULL;
    }
    return &s->mr_faults[w->drv - 1];
}

void pfnic_mr_fault_leave(PfnicState *s, PfnicPageWait *w)
{
    PfnicMrFault *f = pfnic_wait_report(s, w);

    w->drv = 0;
    if (f && f->waiters && !--f->waiters) {
        /* Nobody needs it: a later miss of its entries reports again. */
        trace_pfnic_mr_fault_forget(f->mr, f->first, f->count, f->held);
        *f = (PfnicMrFault) { };
    }
}

/*
 * Whether report @f of MR @index (@key) is out for entry @e, for the access
 * @write needs, and not answered yet
 */
static bool pfnic_mr_fault_covers(const PfnicMrFault *f, uint32_t index,
                                  uint32_t key, uint64_t e, bool write)
{
    return f->waiters && f->mr == index && f->mr_key == key &&
           e >= f->first && e - f->first < f->count &&
           (f->left >> (e - f->first) & 1) && (f->write || !write);
}

static PfnicMrFault *pfnic_mr_fault_find(PfnicState *s, uint32_t index,
                                         uint32_t key, uint64_t e, bool write)
{
    for (uint32_t i = 0; i < PFNIC_MR_FAULTS; i++) {
        if (pfnic_mr_fault_covers(&s->mr_faults[i], index, key, e, write)) {
            return &s->mr_faults[i];
        }
    }
    return NULL;
}

/* The oldest report whose event is not queued yet */
static PfnicMrFault *pfnic_mr_fault_oldest_held(PfnicState *s)
{
    PfnicMrFault *old = NULL;

    for (uint32_t i = 0; i < PFNIC_MR_FAULTS; i++) {
        PfnicMrFault *f = &s->mr_faults[i];

        if (f->waiters && f->held && (!old || f->seq < old->seq)) {
            old = f;
        }
    }
    return old;
}

/* Queue @f's PAGE_FAULT event; false if the queue cannot take it now. */
static bool pfnic_mr_fault_post(PfnicState *s, PfnicMrFault *f)
{
    uint8_t e[PFNIC_EQE_SIZE] = { PFNIC_EV_PAGE_FAULT };
    PfnicMr *mr = &s->mrs[f->mr];

    e[PFNIC_EQE_FLAGS] = f->write ? PFNIC_EQE_FAULT_WRITE : 0;
    stl_le_p(&e[4], f->mr);
    /* The first entry's bits 47:32 (an implicit table's, ABI 1.10) at 63:48 */
    stq_le_p(&e[PFNIC_EQE_DATA], (f->first & UINT32_MAX) |
             (uint64_t)f->count << 32 | (f->first >> 32) << 48);
    if (pfnic_eq_put(s, e) < 0) {
        trace_pfnic_mr_fault_event(f->mr, f->first, f->count, f->write,
                                   true);
        return false;
    }
    trace_pfnic_mr_fault_event(f->mr, f->first, f->count, f->write, false);
    f->held = false;
    if (mr->valid && mr->key == f->mr_key) {
        mr->count[PFNIC_MR_PAGE_FAULTS] += f->count;
        mr->count[PFNIC_MR_PAGE_FAULT_GROUPS]++;
    }
    return true;
}

/*
 * The event queue may have room again (EQ_HEAD, EQ_SIZE): queue the events
 * held back, oldest first. Their work waits meanwhile, so they are held,
 * never dropped.
 */
static void pfnic_mr_fault_flush(PfnicState *s)
{
    PfnicMrFault *f;

    while ((f = pfnic_mr_fault_oldest_held(s)) && pfnic_mr_fault_post(s, f)) {
        /* next */
    }
}

/*
 * A new report for entry @e of @mr, which a work needs for @write, and the
 * entries after it the work needs (@n from @e): up to the last one that
 * refuses it, and not into another report's. Its event is queued, or held
 * until the queue has room. NULL if no report is free (it cannot happen:
 * each waiter holds at most one).
 */
static PfnicMrFault *pfnic_mr_fault_new(PfnicState *s, PfnicMr *mr,
                                        uint64_t e, uint64_t n, bool write)
{
    uint64_t need = PFNIC_MTT_VALID | (write ? PFNIC_MTT_WRITE :
                                               PFNIC_MTT_READ);
    uint32_t index = mr - s->mrs;
    uint64_t last = e;
    PfnicMrFault *f = NULL;

    n = MIN(n, PFNIC_FAULT_MAX_ENTRIES);
    n = MIN(n, mr->mtt_entries - e);
    for (uint64_t i = 1; i < n; i++) {
        if (pfnic_mr_fault_find(s, index, mr->key, e + i, write)) {
            break;
        }
        if ((pfnic_mtt_get(mr, e + i) & need) != need) {
            last = e + i;
        }
    }
    for (uint32_t i = 0; i < PFNIC_MR_FAULTS; i++) {
        if (!s->mr_faults[i].waiters) {
            f = &s->mr_faults[i];
            break;
        }
    }
    if (!f) {
        return NULL;
    }
    *f = (PfnicMrFault) {
        .waiters = 1,
        .held = true,
        .write = write,
        .mr = index,
        .mr_key = mr->key,
        .first = e,
        .count = last - e + 1,
        .left = MAKE_64BIT_MASK(0, last - e + 1),
        .seq = s->mr_fault_seq++,
    };
    /* Behind the events held already, in order. */
    if (pfnic_mr_fault_oldest_held(s) == f) {
        pfnic_mr_fault_post(s, f);
    }
    return f;
}

/*
 * The work of @w found the entry of @va in FAULT MR @mr (of context @ctx)
 * invalid or without the access @write needs, and needs @len bytes from
 * @va: it waits (w->waiting) for the report out for that entry, or for a
 * new one. A work woken for another reason while its report is still out
 * waits again without a second event.
 */
void pfnic_mr_fault(PfnicState *s, PfnicPageWait *w, PfnicContext *ctx,
                    PfnicMr *mr, uint64_t va, uint64_t len, bool write)
{
    uint32_t index = mr - s->mrs;
    uint64_t e = va / PFNIC_PAGE_SIZE - mr->addr / PFNIC_PAGE_SIZE;
    PfnicMrFault *f = pfnic_wait_report(s, w);

    if (va < mr->addr || e >= mr->mtt_entries) {
        /* Past the table: the key check keeps work from getting here. */
        w->fault = true;
        return;
    }
    if (!f || !pfnic_mr_fault_covers(f, index, mr->key, e, write)) {
        pfnic_mr_fault_leave(s, w);
        f = pfnic_mr_fault_find(s, index, mr->key, e, write);
        if (f) {
            f->waiters++;
        } else {
            len = MIN(MAX(len, 1), PFNIC_FAULT_MAX_ENTRIES * PFNIC_PAGE_SIZE);
            f = pfnic_mr_fault_new(s, mr, e,
                                   DIV_ROUND_UP((va & ~PFNIC_PAGE_MASK) + len,
                                                PFNIC_PAGE_SIZE), write);
            if (!f) {
                w->fault = true;
                return;
            }
        }
        w->drv = f - s->mr_faults + 1;
    }
    w->drv_entry = e;
    trace_pfnic_mr_fault_wait(index, e, write, f->first, f->count);
    w->waiting = true;
}

/*
 * The waiters of the QPs' sides (only QPs reach a table: a PREFETCH of a
 * table MR has nothing to do) that wait for a report of MR @mr, or of any
 * MR of context @ctx, and for an entry in [first, first + count): they
 * leave it, and the waiting ones are woken (failing with @fail). Returns
 * how many were woken.
 */
static uint32_t pfnic_mr_fault_wake(PfnicState *s, uint32_t mr, uint32_t ctx,
                                    uint64_t first, uint64_t count, bool fail)
{
    uint32_t woken = 0;

    for (uint32_t i = 0; i < PFNIC_MAX_QPS; i++) {
        PfnicQp *qp = &s->qps[i];
        PfnicPageWait *ws[2] = { &qp->pw, &qp->rpw };

        if (!qp->valid) {
            continue;
        }
        for (int k = 0; k < 2; k++) {
            PfnicPageWait *w = ws[k];
            PfnicMrFault *f = pfnic_wait_report(s, w);

            if (!f || (mr != UINT32_MAX && f->mr != mr) ||
                (ctx != UINT32_MAX && s->mrs[f->mr].ctx != ctx) ||
                w->drv_entry < first || w->drv_entry - first >= count) {
                continue;
            }
            pfnic_mr_fault_leave(s, w);
            if (w->waiting) {
                /* One woken for another reason has moved on: not failed. */
                w->waiting = false;
                w->fault |= fail;
                woken++;
            }
        }
    }
    if (woken) {
        qemu_bh_schedule(s->engine_bh);
    }
    return woken;
}

/*
 * MR_CLEAR of FAULT MR @mr, or a stop of context @ctx (UINT32_MAX: any):
 * the reports go, and their work goes on to fail its key check, or to
 * find its destination gone.
 */
static void pfnic_mr_faults_drop(PfnicState *s, uint32_t mr, uint32_t ctx)
{
    pfnic_mr_fault_wake(s, mr, ctx, 0, UINT64_MAX, false);
    /* Nothing is left without a waiter; nothing with one survives. */
    for (uint32_t i = 0; i < PFNIC_MR_FAULTS; i++) {
        PfnicMrFault *f = &s->mr_faults[i];

        if (f->waiters && (mr == UINT32_MAX || f->mr == mr) &&
            (ctx == UINT32_MAX || s->mrs[f->mr].ctx == ctx)) {
            *f = (PfnicMrFault) { };
        }
    }
}

void pfnic_mr_faults_ctx_stop(PfnicState *s, uint32_t ctx)
{
    pfnic_mr_faults_drop(s, UINT32_MAX, ctx);
}

/*
 * FAULT_RESUME: the driver answered entries [a1, a1 + a2) of FAULT MR a0
 * with status a3: 0, they are in the table (the work translates again), 1,
 * they cannot be (the work fails as at an unmapped page). Entries no work
 * waits for are fine: the work may have gone, or never faulted.
 */
static uint32_t pfnic_cmd_fault_resume(PfnicState *s)
{
    const PfnicCmdFaultResume *a = &s->cmd.fault_resume;
    uint32_t index = a->index;
    uint64_t first = pfnic_cmd_u64(a->first, a->first_hi);
    uint32_t count = a->count, status = a->status;
    uint64_t handled = 0;
    uint32_t woken;
    PfnicMr *mr;

    if (index >= PFNIC_MAX_MRS) {
        return PFNIC_CMD_BAD_INDEX;
    }
    mr = &s->mrs[index];
    if (!mr->valid || !mr->fault) {
        return PFNIC_CMD_BAD_STATE;
    }
    if (!count || first >= mr->mtt_entries ||
        count > mr->mtt_entries - first ||
        status > PFNIC_FAULT_RESUME_FAIL) {
        return PFNIC_CMD_BAD_ARG;
    }
    for (uint32_t i = 0; i < PFNIC_MR_FAULTS; i++) {
        PfnicMrFault *f = &s->mr_faults[i];
        uint64_t lo, hi, bits;

        if (!f->waiters || f->mr != index || f->mr_key != mr->key) {
            continue;
        }
        lo = MAX(first, f->first);
        hi = MIN(first + count, f->first + f->count);
        if (lo >= hi) {
            continue;
        }
        bits = f->left & MAKE_64BIT_MASK(lo - f->first, hi - lo);
        f->left &= ~bits;
        if (!f->held && status == PFNIC_FAULT_RESUME_RETRY) {
            handled += ctpop64(bits);
        }
    }
    mr->count[PFNIC_MR_PAGE_FAULTS_HANDLED] += handled;
    woken = pfnic_mr_fault_wake(s, index, UINT32_MAX, first, count,
                                status == PFNIC_FAULT_RESUME_FAIL);
    trace_pfnic_mr_fault_resume(index, first, count, status, woken);
    return PFNIC_CMD_OK;
}

/* --- shared receive queues (ABI 1.11) ----------------------------------- */

/*
 * SRQ_CREATE: 2^a5 receive WQEs at a3/a4 and the record at a6/a7 (the
 * device writes head 0 there now), for context a1 and PD a2. Checked as
 * CQ_CREATE; a ring or record that wraps, or a record the device cannot
 * write, is BAD_ARG.
 */
static uint32_t pfnic_cmd_srq_create(PfnicState *s)
{
    const PfnicCmdSrqCreate *a = &s->cmd.srq_create;
    uint32_t srqn = a->srqn, ctx = a->ctx, log2 = a->log2_entries, zero = 0;
    uint64_t ring = pfnic_cmd_u64(a->ring_lo, a->ring_hi);
    uint64_t record = pfnic_cmd_u64(a->record_lo, a->record_hi);
    PfnicSrq *srq;

    if (srqn >= PFNIC_MAX_SRQS || ctx >= s->num_contexts) {
        return PFNIC_CMD_BAD_INDEX;
    }
    if (log2 > PFNIC_MAX_LOG2) {
        return PFNIC_CMD_BAD_ARG;
    }
    srq = &s->srqs[srqn];
    if (srq->valid) {
        return PFNIC_CMD_BAD_STATE;
    }
    if (ring + ((uint64_t)PFNIC_WQE_SIZE << log2) - 1 < ring ||
        record + PFNIC_SRQ_RECORD_SIZE - 1 < record ||
        pci_dma_write(PCI_DEVICE(s), record, &zero, sizeof(zero)) !=
        MEMTX_OK) {
        return PFNIC_CMD_BAD_ARG;
    }
    *srq = (PfnicSrq) {
        .valid = true,
        .ctx = ctx,
        .pd = a->pd,
        .ring = ring,
        .entries = 1u << log2,
        .record = record,
    };
    trace_pfnic_srq_create(srqn, ctx, srq->pd, ring, srq->entries, record);
    return PFNIC_CMD_OK;
}

/* The valid SRQ the command names in *@srq: OK, BAD_INDEX or BAD_STATE. */
static uint32_t pfnic_cmd_srq_arg(PfnicState *s, PfnicSrq **srq)
{
    uint32_t srqn = s->cmd.index.index;

    if (srqn >= PFNIC_MAX_SRQS) {
        return PFNIC_CMD_BAD_INDEX;
    }
    *srq = &s->srqs[srqn];
    return (*srq)->valid ? PFNIC_CMD_OK : PFNIC_CMD_BAD_STATE;
}

/* SRQ_MODIFY: arm an SRQ with a limit (1..entries), or disarm it (0). */
static uint32_t pfnic_cmd_srq_modify(PfnicState *s)
{
    uint32_t srqn = s->cmd.srq_modify.srqn, limit = s->cmd.srq_modify.limit;
    PfnicSrq *srq;
    uint32_t st = pfnic_cmd_srq_arg(s, &srq);

    if (st != PFNIC_CMD_OK) {
        return st;
    }
    if (limit > srq->entries) {
        return PFNIC_CMD_BAD_ARG;
    }
    srq->limit = limit;
    trace_pfnic_srq_modify(srqn, limit, (uint16_t)(srq->tail - srq->head));
    return PFNIC_CMD_OK;
}

static uint32_t pfnic_cmd_srq_query(PfnicState *s)
{
    PfnicSrq *srq;
    uint32_t st = pfnic_cmd_srq_arg(s, &srq);

    if (st != PFNIC_CMD_OK) {
        return st;
    }
    s->cmd.srq_query_reply = (PfnicCmdSrqQueryReply) {
        .limit = srq->limit,
        .head = srq->head,
        .tail = srq->tail,
        .users = srq->users,
        .limit_events = srq->limit_events,
    };
    return PFNIC_CMD_OK;
}

static uint32_t pfnic_cmd_srq_destroy(PfnicState *s)
{
    uint32_t srqn = s->cmd.index.index;
    PfnicSrq *srq;
    uint32_t st = pfnic_cmd_srq_arg(s, &srq);

    if (st != PFNIC_CMD_OK) {
        return st;
    }
    if (srq->users) {
        /* QP_DESTROY first, as libibverbs requires */
        return PFNIC_CMD_BUSY;
    }
    *srq = (PfnicSrq) { };
    trace_pfnic_srq_destroy(srqn);
    return PFNIC_CMD_OK;
}

/* --- queue pairs ------------------------------------------------------- */

/*
 * QP_CREATE; with a13 bit 1 (ABI 1.11) the QP takes its receive WQEs from
 * SRQ a14, a valid SRQ of its context, and has no receive queue (a8..a10
 * are ignored); without it a14 must be 0.
 */
static uint32_t pfnic_cmd_qp_create(PfnicState *s)
{
    const PfnicCmdQpCreate *a = &s->cmd.qp_create;
    uint32_t qpn = a->qpn, ctx = a->ctx, scqn = a->send_cqn;
    uint32_t rcqn = a->recv_cqn, flags = a->flags, srqn = a->srqn;
    bool srq = flags & PFNIC_QP_FLAG_SRQ;
    PfnicQp *qp;

    /* ABI 1.20: QPNs 0 and 1, the special QPs (SMI, GSI), are UD QPs. */
    if (qpn >= PFNIC_MAX_QPS ||
        (qpn < PFNIC_FIRST_QPN && !(flags & PFNIC_QP_FLAG_UD)) ||
        ctx >= s->num_contexts || scqn >= PFNIC_MAX_CQS ||
        rcqn >= PFNIC_MAX_CQS) {
        return PFNIC_CMD_BAD_INDEX;
    }
    if (a->sq_log2 > PFNIC_MAX_LOG2 ||
        (!srq && a->rq_log2 > PFNIC_MAX_LOG2) ||
        flags & ~PFNIC_QP_FLAGS_MASK) {
        return PFNIC_CMD_BAD_ARG;
    }
    qp = &s->qps[qpn];
    if (qp->valid || !s->cqs[scqn].valid || !s->cqs[rcqn].valid) {
        return PFNIC_CMD_BAD_STATE;
    }
    if (s->cqs[scqn].ctx != ctx || s->cqs[rcqn].ctx != ctx) {
        return PFNIC_CMD_BAD_ARG;
    }
    if (srq && (srqn >= PFNIC_MAX_SRQS || !s->srqs[srqn].valid ||
                s->srqs[srqn].ctx != ctx)) {
        return PFNIC_CMD_BAD_ARG;
    }
    if (!srq && srqn) {
        return PFNIC_CMD_BAD_ARG;
    }
    /* A QP destroyed with groups out: they wake nobody (not the new QP). */
    pfnic_page_wait_reset(s, &qp->pw);
    pfnic_page_wait_reset(s, &qp->rpw);
    *qp = (PfnicQp) {
        .valid = true,
        .qpn = qpn,
        .gen = qp->gen + 1,
        .ctx = ctx,
        .pd = a->pd,
        .scqn = scqn,
        .rcqn = rcqn,
        .sq = pfnic_cmd_u64(a->sq_lo, a->sq_hi),
        .sq_entries = 1u << a->sq_log2,
        .rq = srq ? 0 : pfnic_cmd_u64(a->rq_lo, a->rq_hi),
        .rq_entries = srq ? 1 : 1u << a->rq_log2,
        .record = pfnic_cmd_u64(a->record_lo, a->record_hi),
        .flags = flags,
        .state = PFNIC_QPS_RESET,
        .dest_qpn = PFNIC_QPN_NONE,
        .rq_owner = PFNIC_QPN_NONE,
        .has_srq = srq,
        .srqn = srq ? srqn : 0,
        .ud = flags & PFNIC_QP_FLAG_UD,
    };
    pfnic_page_wait_reset(s, &qp->pw);
    pfnic_roce_qp_reset(s, qp);
    trace_pfnic_qp_create(qpn, ctx, qp->pd, scqn, rcqn, qp->sq_entries,
                          qp->rq_entries);
    if (srq) {
        s->srqs[srqn].users++;
        trace_pfnic_srq_attach(srqn, qpn, s->srqs[srqn].users);
    }
    return PFNIC_CMD_OK;
}

static bool pfnic_qp_transition_ok(uint32_t from, uint32_t to)
{
    switch (to) {
    case PFNIC_QPS_RESET:
    case PFNIC_QPS_ERR:
        return true;
    case PFNIC_QPS_INIT:
        return from == PFNIC_QPS_RESET || from == PFNIC_QPS_INIT;
    case PFNIC_QPS_RTR:
        return from == PFNIC_QPS_INIT;
    case PFNIC_QPS_RTS:
        return from == PFNIC_QPS_RTR || from == PFNIC_QPS_RTS;
    }
    return false;
}

/*
 * Whether another QP of this device is connected to QP @qpn at @ip. A
 * remote QP accepts packets by our address only: it cannot tell two of
 * our QPs apart, so one remote QP is the peer of at most one of ours (the
 * first), and no process here can speak into another's connection.
 */
static bool pfnic_wire_peer_taken(PfnicState *s, PfnicQp *self, uint32_t ip,
                                  uint32_t qpn)
{
    for (uint32_t i = 0; i < PFNIC_MAX_QPS; i++) {
        PfnicQp *q = &s->qps[i];

        if (q != self && q->valid && q->wire && q->dest_ip == ip &&
            q->dest_qpn == qpn && q->state != PFNIC_QPS_RESET &&
            q->state != PFNIC_QPS_ERR) {
            return true;
        }
    }
    return false;
}

/*
 * A UD QP (ABI 1.19) has no destination and no transport state: its access
 * flags, its Q_Key (in dest_qpn) and its send PSN; the other arguments are
 * ignored. Its WQEs name their destinations.
 */
static uint32_t pfnic_cmd_qp_modify_ud(PfnicState *s, PfnicQp *qp)
{
    const PfnicCmdQpModify *a = &s->cmd.qp_modify;
    uint32_t state = a->state;

    if (state > PFNIC_QPS_ERR || a->access & ~PFNIC_QP_ACCESS_MASK ||
        a->sq_psn > 0xffffff) {
        return PFNIC_CMD_BAD_ARG;
    }
    if (!pfnic_qp_transition_ok(qp->state, state)) {
        return PFNIC_CMD_BAD_STATE;
    }
    qp->access = a->access;
    qp->qkey = a->dest_qpn;
    qp->sq_psn = a->sq_psn;
    if (state == PFNIC_QPS_RTS && qp->state != PFNIC_QPS_RTS) {
        memset(&qp->req, 0, sizeof(qp->req));
        qp->req.psn = qp->sq_psn;
    }
    trace_pfnic_ud_modify(qp->qpn, qp->state, state, qp->qkey);
    pfnic_qp_set_state(s, qp, state);
    return PFNIC_CMD_OK;
}

static uint32_t pfnic_cmd_qp_modify(PfnicState *s)
{
    const PfnicCmdQpModify *a = &s->cmd.qp_modify;
    uint32_t qpn = a->qpn, state = a->state;
    PfnicQp *qp;
    bool wire;

    if (qpn >= PFNIC_MAX_QPS) {
        return PFNIC_CMD_BAD_INDEX;
    }
    if (s->qps[qpn].valid && s->qps[qpn].ud) {
        return pfnic_cmd_qp_modify_ud(s, &s->qps[qpn]);
    }
    wire = a->dest_ip && a->dest_ip != s->port_ipv4;
    /* On the wire the peer's QPN is any 24-bit number of another device. */
    if (state > PFNIC_QPS_ERR || a->access & ~PFNIC_QP_ACCESS_MASK ||
        (!wire && a->dest_qpn >= PFNIC_MAX_QPS &&
         a->dest_qpn != PFNIC_QPN_NONE) ||
        (wire && a->dest_qpn > 0xffffff) ||
        a->min_rnr_timer > 31 || a->rnr_retry > 7 || a->retry_cnt > 7 ||
        a->sq_psn > 0xffffff || a->rq_psn > 0xffffff || a->path_mtu > 5 ||
        a->timeout > 31 || a->max_dest_rd_atomic > PFNIC_ROCE_MAX_RES ||
        a->hop_limit_tclass > 0xffff ||
        a->max_rd_atomic > PFNIC_ROCE_MAX_INFLIGHT ||
        a->wire_flags & ~PFNIC_QP_WIRE_BACKUP) {
        return PFNIC_CMD_BAD_ARG;
    }
    qp = &s->qps[qpn];
    if (!qp->valid || !pfnic_qp_transition_ok(qp->state, state)) {
        return PFNIC_CMD_BAD_STATE;
    }
    if (wire && state != PFNIC_QPS_RESET && state != PFNIC_QPS_ERR &&
        pfnic_wire_peer_taken(s, qp, a->dest_ip, a->dest_qpn)) {
        return PFNIC_CMD_BUSY;
    }
    if (qp->busy || (qp->wire && qp->req.fl_count)) {
        /* Where a QP sends cannot change under work in flight. */
        if (wire != qp->wire || a->dest_ip != qp->dest_ip) {
            return PFNIC_CMD_BUSY;
        }
    }
    qp->wire = wire;
    qp->dest_ip = wire ? a->dest_ip : 0;
    qp->sq_psn = a->sq_psn;
    qp->rq_psn = a->rq_psn;
    /* IBV_MTU_*; 0: 1024 */
    qp->mtu = 128u << (a->path_mtu ? a->path_mtu : 3);
    qp->timeout = a->timeout;
    qp->max_dest_rd_atomic = a->max_dest_rd_atomic;
    qp->hop_limit = a->hop_limit_tclass & 0xff ?
                    a->hop_limit_tclass & 0xff : 64;
    qp->traffic_class = a->hop_limit_tclass >> 8;
    qp->max_rd_atomic = a->max_rd_atomic;
    qp->backup = a->wire_flags & PFNIC_QP_WIRE_BACKUP;
    if (state == PFNIC_QPS_RTR && qp->state != PFNIC_QPS_RTR) {
        /* From INIT: nothing received or sent yet. */
        pfnic_roce_qp_reset(s, qp);
        qp->resp.epsn = qp->rq_psn;
    }
    if (state == PFNIC_QPS_RTS && qp->state != PFNIC_QPS_RTS) {
        memset(&qp->req, 0, sizeof(qp->req));
        qp->req.psn = qp->req.high = qp->sq_psn;
    }
    qp->req.retry_left = a->retry_cnt;
    qp->req.rnr_left = a->rnr_retry;
    qp->access = a->access;
    if (state == PFNIC_QPS_RTR || a->dest_qpn != qp->dest_qpn) {
        /*
         * The connection is to the QP that has this number now: a QP
         * created later at the same number is not our peer.
         */
        qp->peer_gen = a->dest_qpn < PFNIC_MAX_QPS &&
                       s->qps[a->dest_qpn].valid ?
                       s->qps[a->dest_qpn].gen : 0;
    }
    qp->dest_qpn = a->dest_qpn;
    qp->min_rnr_timer = a->min_rnr_timer;
    qp->rnr_retry = a->rnr_retry;
    qp->retry_cnt = a->retry_cnt;
    trace_pfnic_qp_modify(qpn, qp->state, state, qp->access, qp->dest_qpn);
    pfnic_qp_set_state(s, qp, state);
    return PFNIC_CMD_OK;
}

/* A driver that reads the state alone reads QP_QUERY's first word. */
QEMU_BUILD_BUG_ON(offsetof(PfnicCmdQpQueryReply, state) !=
                  offsetof(PfnicCmdQpStateReply, state));

static uint32_t pfnic_cmd_qp_query(PfnicState *s)
{
    uint32_t qpn = s->cmd.index.index;
    PfnicCmdQpQueryReply *r = &s->cmd.qp_query_reply;
    PfnicQp *qp;

    if (qpn >= PFNIC_MAX_QPS) {
        return PFNIC_CMD_BAD_INDEX;
    }
    qp = &s->qps[qpn];
    if (!qp->valid) {
        return PFNIC_CMD_BAD_STATE;
    }
    *r = (PfnicCmdQpQueryReply) {
        .state = qp->state,
        .sq_head = qp->sq_head,
        .rq_head = qp->rq_head,
        .page_requests = qp->page_requests,
        .rnr_waits = qp->rnr_waits,
        .completed = qp->wqes_completed,
        .refused = qp->refused,
        .next_psn = qp->wire ? qp->req.psn : 0,
        .expected_psn = qp->wire ? qp->resp.epsn : 0,
        .retransmits = qp->retransmits,
        .rnr_naks_sent = qp->rnr_naks_sent,
        .rnr_naks_received = qp->rnr_naks_rcvd,
        .seq_naks_sent = qp->seq_naks_sent,
        .duplicates = qp->duplicates,
    };
    pfnic_cmd_set_u64(&r->bytes_lo, &r->bytes_hi, qp->bytes);
    return PFNIC_CMD_OK;
}

static uint32_t pfnic_cmd_qp_destroy(PfnicState *s)
{
    uint32_t qpn = s->cmd.index.index, gen;
    PfnicQp *qp;

    if (qpn >= PFNIC_MAX_QPS) {
        return PFNIC_CMD_BAD_INDEX;
    }
    qp = &s->qps[qpn];
    if (!qp->valid) {
        return PFNIC_CMD_BAD_STATE;
    }
    pfnic_qp_abort(s, qp);
    pfnic_qp_recv_drop(s, qp);
    if (qp->has_srq && qp->srqn < PFNIC_MAX_SRQS &&
        s->srqs[qp->srqn].users) {
        s->srqs[qp->srqn].users--;
        trace_pfnic_srq_attach(qp->srqn, qpn, s->srqs[qp->srqn].users);
    }
    gen = qp->gen;
    *qp = (PfnicQp) { .gen = gen, .rq_owner = PFNIC_QPN_NONE };
    trace_pfnic_qp_destroy(qpn);
    /* Senders parked on this QP notice it is gone. */
    pfnic_qp_wake_senders(s, qpn);
    return PFNIC_CMD_OK;
}

/*
 * QP_SET_DMAC (ABI 1.17): the MAC the QP's packets go to, as the operating
 * system resolved it for the QP's peer (the RDMA core's address handle),
 * instead of the device's neighbour cache; all zeroes goes back to the
 * cache. mac_hi holds MAC bytes 0-3 (byte 0 in bits 31:24), mac_lo bytes
 * 4-5 in bits 31:16, its bits 15:0 zero.
 */
static uint32_t pfnic_cmd_qp_set_dmac(PfnicState *s)
{
    const PfnicCmdQpSetDmac *a = &s->cmd.qp_set_dmac;
    uint32_t qpn = a->qpn;
    uint8_t mac[ETH_ALEN];
    PfnicQp *qp;

    if (qpn >= PFNIC_MAX_QPS) {
        return PFNIC_CMD_BAD_INDEX;
    }
    stl_be_p(mac, a->mac_hi);
    stw_be_p(mac + 4, a->mac_lo >> 16);
    /* A multicast address names no peer. */
    if (a->mac_lo & 0xffff || mac[0] & 1) {
        return PFNIC_CMD_BAD_ARG;
    }
    qp = &s->qps[qpn];
    if (!qp->valid) {
        return PFNIC_CMD_BAD_STATE;
    }
    memcpy(qp->dmac, mac, ETH_ALEN);
    qp->dmac_set = !!(a->mac_hi | a->mac_lo);
    trace_pfnic_qp_set_dmac(qpn, a->mac_hi, a->mac_lo >> 16);
    return PFNIC_CMD_OK;
}

/* --- mailbox ----------------------------------------------------------- */

/*
 * x-inject-destroy-busy=N: every Nth QP, CQ or SRQ destroy or MR clear is
 * refused as busy, the object left as it was (a device that will not let
 * go of an object the driver must then keep out of use).
 */
static bool pfnic_inject_destroy_busy(PfnicState *s, uint32_t op)
{
    bool destroy = op == PFNIC_CMD_QP_DESTROY || op == PFNIC_CMD_CQ_DESTROY ||
                   op == PFNIC_CMD_SRQ_DESTROY || op == PFNIC_CMD_MR_CLEAR;

    return destroy && s->inject_destroy_busy &&
           ++s->inject_destroy_seq % s->inject_destroy_busy == 0;
}

static uint32_t pfnic_cmd_dispatch(PfnicState *s, uint32_t op)
{
    /* Every command's structure is the argument registers, no more. */
    QEMU_BUILD_BUG_ON(sizeof(PfnicCmdArgs) !=
                      PFNIC_CMD_ARGS * sizeof(uint32_t));

    uint32_t st;

    switch (op) {
    case PFNIC_CMD_MR_SET:
        st = pfnic_cmd_mr_set(s);
        break;
    case PFNIC_CMD_MR_CLEAR:
        st = pfnic_cmd_mr_clear(s);
        break;
    case PFNIC_CMD_MR_QUERY:
        st = pfnic_cmd_mr_query(s);
        break;
    case PFNIC_CMD_MR_MODIFY:
        st = pfnic_cmd_mr_modify(s);
        break;
    case PFNIC_CMD_MTT_WRITE:
        st = pfnic_cmd_mtt_write(s);
        break;
    case PFNIC_CMD_MTT_INVALIDATE:
        st = pfnic_cmd_mtt_invalidate(s);
        break;
    case PFNIC_CMD_FAULT_RESUME:
        st = pfnic_cmd_fault_resume(s);
        break;
    case PFNIC_CMD_CQ_CREATE:
        st = pfnic_cmd_cq_create(s);
        break;
    case PFNIC_CMD_CQ_DESTROY:
        st = pfnic_cmd_cq_destroy(s);
        break;
    case PFNIC_CMD_QP_CREATE:
        st = pfnic_cmd_qp_create(s);
        break;
    case PFNIC_CMD_QP_MODIFY:
        st = pfnic_cmd_qp_modify(s);
        break;
    case PFNIC_CMD_QP_QUERY:
        st = pfnic_cmd_qp_query(s);
        break;
    case PFNIC_CMD_QP_SET_DMAC:
        st = pfnic_cmd_qp_set_dmac(s);
        break;
    case PFNIC_CMD_QP_DESTROY:
        st = pfnic_cmd_qp_destroy(s);
        break;
    case PFNIC_CMD_CTX_QUERY:
        st = pfnic_cmd_ctx_query(s);
        break;
    case PFNIC_CMD_BACKUP_SET: {
        const PfnicCmdBackupSet *a = &s->cmd.backup_set;

        st = pfnic_roce_backup_set(s, pfnic_cmd_u64(a->addr_lo, a->addr_hi),
                                   a->bytes);
        break;
    }
    case PFNIC_CMD_SRQ_CREATE:
        st = pfnic_cmd_srq_create(s);
        break;
    case PFNIC_CMD_SRQ_MODIFY:
        st = pfnic_cmd_srq_modify(s);
        break;
    case PFNIC_CMD_SRQ_QUERY:
        st = pfnic_cmd_srq_query(s);
        break;
    case PFNIC_CMD_SRQ_DESTROY:
        st = pfnic_cmd_srq_destroy(s);
        break;
    default:
        st = PFNIC_CMD_BAD_OP;
        break;
    }
    return st;
}

void pfnic_cmd_execute(PfnicState *s, uint32_t op)
{
    uint32_t st = pfnic_inject_destroy_busy(s, op) ? PFNIC_CMD_BUSY :
                  pfnic_cmd_dispatch(s, op);

    s->cmd_status = st;
    trace_pfnic_cmd(op, st);
    if (st != PFNIC_CMD_OK) {
        qemu_log_mask(LOG_GUEST_ERROR, "pfnic: command 0x%x failed: %u\n",
                      op, st);
    }
}

/* --- lifecycle --------------------------------------------------------- */

void pfnic_verbs_reset(PfnicState *s)
{
    for (uint32_t i = 0; i < PFNIC_MAX_QPS; i++) {
        uint32_t gen = s->qps[i].gen;

        pfnic_roce_qp_reset(s, &s->qps[i]);
        s->qps[i] = (PfnicQp) { .gen = gen, .rq_owner = PFNIC_QPN_NONE };
    }
    pfnic_roce_backup_set(s, 0, 0);
    memset(s->srqs, 0, sizeof(s->srqs));
    memset(s->cqs, 0, sizeof(*s->cqs) * PFNIC_MAX_CQS);
    for (uint32_t i = 0; i < PFNIC_MAX_MRS; i++) {
        pfnic_mtt_free(s, &s->mrs[i]);
    }
    assert(s->table_used == 0);
    memset(s->mrs, 0, sizeof(*s->mrs) * PFNIC_MAX_MRS);
    memset(s->mr_faults, 0, sizeof(s->mr_faults));
    g_hash_table_remove_all(s->keys);
    for (uint32_t i = 0; i < s->num_contexts; i++) {
        s->contexts[i].mrs = 0;
        s->contexts[i].remote_access_errors = 0;
        s->contexts[i].access_alert_armed = true;
    }
    memset(&s->cmd, 0, sizeof(s->cmd));
    s->cmd_status = 0;
    s->eq_base = 0;
    s->eq_size = s->eq_prod = s->eq_cons = 0;
    s->eq_vector = s->eq_overflow = 0;
    s->qp_next = 0;
    timer_del(s->rnr_timer);
}

void pfnic_verbs_init(PfnicState *s)
{
    s->mrs = g_new0(PfnicMr, PFNIC_MAX_MRS);
    s->keys = g_hash_table_new(g_direct_hash, g_direct_equal);
    s->cqs = g_new0(PfnicCq, PFNIC_MAX_CQS);
    s->qps = g_new0(PfnicQp, PFNIC_MAX_QPS);
    s->rnr_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, pfnic_qp_rnr_timer, s);
}

void pfnic_verbs_exit(PfnicState *s)
{
    for (uint32_t i = 0; i < PFNIC_MAX_QPS; i++) {
        pfnic_roce_qp_reset(s, &s->qps[i]);
    }
    g_free(s->backup_used);
    timer_free(s->rnr_timer);
    g_free(s->qps);
    g_free(s->cqs);
    g_hash_table_destroy(s->keys);
    g_free(s->mrs);
}
