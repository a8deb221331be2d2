/*
 * pfnic control registers (BAR0) and the doorbell pages (BAR2)
 *
 * The layout is defined in docs/registers.md. Everything here runs under
 * the BQL; the self-test completes from a bottom half so that, as on real
 * hardware, the interrupt arrives after the triggering store returns.
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
#include "hw/pci/msix.h"
#include "hw/pci/pcie.h"
#include "pfnic.h"
#include "pfnic_regs.h"
#include "trace.h"

void pfnic_guest_error(PfnicState *s, const char *what)
{
    qemu_log_mask(LOG_GUEST_ERROR, "pfnic: %s\n", what);
    trace_pfnic_guest_error(what);
    s->status |= PFNIC_STATUS_ERROR;
}

uint32_t pfnic_caps(const PfnicState *s)
{
    return (s->ats ? PFNIC_CAPS_ATS : 0) |
           (s->pasid ? PFNIC_CAPS_PASID : 0) |
           (s->pri ? PFNIC_CAPS_PRI : 0) |
           (s->nic ? PFNIC_CAPS_WIRE : 0) |
           PFNIC_CAPS_SELFTEST | PFNIC_CAPS_VERBS | PFNIC_CAPS_TABLES |
           PFNIC_CAPS_SRQ | PFNIC_CAPS_TIMESTAMPS |
           (s->dm_size ? PFNIC_CAPS_DM : 0) | PFNIC_CAPS_ETH;
}

/*
 * The device clock (ABI 1.12, docs/verbs.md): nanoseconds of the guest's
 * virtual clock since the device was realized. The virtual clock never
 * goes back, so neither does this.
 */
uint64_t pfnic_clock(const PfnicState *s)
{
    return qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) - s->clock_base;
}

void pfnic_ctrl_reset(PfnicState *s)
{
    qemu_bh_cancel(s->selftest_bh);
    s->irq_status = 0;
    s->selftest_cookie = 0;
    s->selftest_echo = 0;
    s->selftest_count = 0;
    s->selftest_vector = 0;
    s->selftest_busy = false;
    s->scratch = 0;
    s->ctx_select = 0;
    pfnic_engine_reset(s);
    pfnic_net_reset(s);
    pfnic_eth_reset(s);
    if (s->dm_size) {
        /* ABI 1.13: a reset zeroes the device memory. */
        memset(memory_region_get_ram_ptr(&s->dm), 0, s->dm_size);
        memory_region_set_dirty(&s->dm, 0, s->dm_size);
    }
    s->status = PFNIC_STATUS_READY;
}

static PfnicContext *pfnic_selected_ctx(PfnicState *s)
{
    if (s->ctx_select >= s->num_contexts) {
        pfnic_guest_error(s, "CTX_SELECT out of range");
        return NULL;
    }
    return &s->contexts[s->ctx_select];
}

/* Ring registers only change while the context is stopped. */
static PfnicContext *pfnic_stopped_ctx(PfnicState *s)
{
    PfnicContext *ctx = pfnic_selected_ctx(s);

    if (ctx && ctx->enabled) {
        pfnic_guest_error(s, "ring of an enabled context changed");
        return NULL;
    }
    return ctx;
}

static void pfnic_ctx_set_ring_size(PfnicState *s, uint32_t size)
{
    PfnicContext *ctx = pfnic_stopped_ctx(s);

    if (!ctx) {
        return;
    }
    if (size < PFNIC_RING_MIN || size > PFNIC_RING_MAX ||
        !is_power_of_2(size)) {
        pfnic_guest_error(s, "bad ring size");
        return;
    }
    ctx->ring_size = size;
}

static void pfnic_ctx_set_pasid(PfnicState *s, uint32_t pasid)
{
    PfnicContext *ctx = pfnic_selected_ctx(s);

    if (!ctx) {
        return;
    }
    if (ctx->enabled) {
        pfnic_guest_error(s, "PASID of an enabled context changed");
        return;
    }
    ctx->pasid = pasid & PFNIC_CTX_PASID_MASK;
}

static void pfnic_ctx_set_ctrl(PfnicState *s, uint32_t val)
{
    PfnicContext *ctx = pfnic_selected_ctx(s);
    bool enable = val & PFNIC_CTX_CTRL_ENABLE;
    bool no_pasid = val & PFNIC_CTX_CTRL_NO_PASID;

    if (!ctx) {
        return;
    }
    if (val & ~(PFNIC_CTX_CTRL_ENABLE | PFNIC_CTX_CTRL_NO_PASID)) {
        pfnic_guest_error(s, "reserved CTX_CTRL bits set");
    }
    if (enable && ctx->enabled && no_pasid != ctx->no_pasid) {
        pfnic_guest_error(s, "NO_PASID of an enabled context changed");
        return;
    }
    /* Without a PASID nothing is translated or faulted in: no checks. */
    if (enable && !ctx->enabled && !no_pasid) {
        if (ctx->pasid == 0 ||
            ctx->pasid >= (1u << PFNIC_PASID_WIDTH)) {
            pfnic_guest_error(s, "context enabled without a valid PASID");
            return;
        }
        /* A context's DMA is translated (ATS) and faults (PRI) in its PASID. */
        if (!s->pasid || !pcie_pasid_enabled(PCI_DEVICE(s)) ||
            !s->ats || !pcie_ats_enabled(PCI_DEVICE(s)) ||
            !s->pri || !pcie_pri_enabled(PCI_DEVICE(s))) {
            pfnic_guest_error(s, "context enabled without PASID, ATS and PRI");
            return;
        }
    }
    if (enable && !ctx->enabled && ctx->stuck) {
        pfnic_guest_error(s, "context enabled while it has not stopped");
        return;
    }
    if (enable && !ctx->enabled) {
        ctx->no_pasid = no_pasid;
        ctx->enabled = pfnic_ctx_start(ctx);
    } else if (!enable && ctx->enabled) {
        pfnic_ctx_stop(ctx);
        ctx->enabled = false;
        /* Fault injection: the stop never completes (until a reset). */
        ctx->stuck = s->inject_ctx_stuck &&
                     ++s->inject_stop_seq % s->inject_ctx_stuck == 0;
    }
    trace_pfnic_ctx(s->ctx_select, ctx->pasid, ctx->enabled, ctx->no_pasid);
}

void pfnic_selftest_bh(void *opaque)
{
    PfnicState *s = opaque;
    PCIDevice *pdev = PCI_DEVICE(s);

    s->selftest_busy = false;
    s->selftest_echo = ~s->selftest_cookie;
    s->selftest_count++;
    s->irq_status |= PFNIC_IRQ_SELFTEST;
    trace_pfnic_selftest_done(s->selftest_vector, s->selftest_echo,
                              s->selftest_count);
    /* msix_notify() records a pending bit if the vector is masked. */
    if (msix_enabled(pdev)) {
        msix_notify(pdev, s->selftest_vector);
    }
}

static void pfnic_selftest_start(PfnicState *s, uint32_t vector)
{
    if (vector >= s->num_vectors) {
        pfnic_guest_error(s, "self-test vector out of range");
        return;
    }
    if (s->selftest_busy) {
        pfnic_guest_error(s, "self-test already in progress");
        return;
    }
    trace_pfnic_selftest_start(vector, s->selftest_cookie);
    s->selftest_vector = vector;
    s->selftest_busy = true;
    qemu_bh_schedule(s->selftest_bh);
}

static uint64_t pfnic_ctrl_read(void *opaque, hwaddr addr, unsigned size)
{
    PfnicState *s = opaque;
    uint64_t val;

    switch (addr) {
    case PFNIC_REG_ID:
        val = PFNIC_ID_VALUE;
        break;
    case PFNIC_REG_VERSION:
        val = PFNIC_VERSION_VALUE;
        break;
    case PFNIC_REG_FW_VERSION:
        val = PFNIC_FW_VERSION_VALUE;
        break;
    case PFNIC_REG_CAPS:
        val = pfnic_caps(s);
        break;
    case PFNIC_REG_NUM_VECTORS:
        val = s->num_vectors;
        break;
    case PFNIC_REG_NUM_CONTEXTS:
        val = s->num_contexts;
        break;
    case PFNIC_REG_PASID_WIDTH:
        val = s->pasid ? PFNIC_PASID_WIDTH : 0;
        break;
    case PFNIC_REG_CONTROL:
        val = 0; /* RESET completes synchronously */
        break;
    case PFNIC_REG_STATUS:
        val = s->status;
        break;
    case PFNIC_REG_IRQ_STATUS:
        val = s->irq_status;
        break;
    case PFNIC_REG_SELFTEST_COOKIE:
        val = s->selftest_cookie;
        break;
    case PFNIC_REG_SELFTEST_ECHO:
        val = s->selftest_echo;
        break;
    case PFNIC_REG_SELFTEST_COUNT:
        val = s->selftest_count;
        break;
    case PFNIC_REG_SCRATCH:
        val = s->scratch;
        break;
    case PFNIC_REG_CTX_SELECT:
        val = s->ctx_select;
        break;
    case PFNIC_REG_CTX_PASID:
        val = s->ctx_select < s->num_contexts ?
              s->contexts[s->ctx_select].pasid : 0;
        break;
    case PFNIC_REG_CTX_CTRL:
        if (s->ctx_select < s->num_contexts &&
            s->contexts[s->ctx_select].enabled) {
            val = PFNIC_CTX_CTRL_ENABLE |
                  (s->contexts[s->ctx_select].no_pasid ?
                   PFNIC_CTX_CTRL_NO_PASID : 0);
        } else {
            val = 0;
        }
        break;
    case PFNIC_REG_CTX_STATUS:
        if (s->ctx_select < s->num_contexts) {
            PfnicContext *ctx = &s->contexts[s->ctx_select];
            bool active = ctx->enabled || ctx->stuck;

            val = (active ? PFNIC_CTX_STATUS_ACTIVE : 0) |
                  (ctx->pw.waiting ? PFNIC_CTX_STATUS_WAITING : 0) |
                  (active && ctx->no_pasid ? PFNIC_CTX_STATUS_NO_PASID : 0);
        } else {
            val = 0;
        }
        break;
    case PFNIC_REG_CTX_RING_LO:
    case PFNIC_REG_CTX_RING_HI:
    case PFNIC_REG_CTX_RING_SIZE:
    case PFNIC_REG_CTX_VECTOR:
    case PFNIC_REG_CTX_HEAD:
        if (s->ctx_select < s->num_contexts) {
            PfnicContext *ctx = &s->contexts[s->ctx_select];

            val = addr == PFNIC_REG_CTX_RING_LO ? (uint32_t)ctx->ring :
                  addr == PFNIC_REG_CTX_RING_HI ? ctx->ring >> 32 :
                  addr == PFNIC_REG_CTX_RING_SIZE ? ctx->ring_size :
                  addr == PFNIC_REG_CTX_VECTOR ? ctx->vector : ctx->head;
        } else {
            val = 0;
        }
        break;
    case PFNIC_REG_CTX_COUNTERS ...
         PFNIC_REG_CTX_COUNTERS + 4 * (PFNIC_CNT_NR - 1):
        val = s->ctx_select < s->num_contexts ?
              s->contexts[s->ctx_select].stats.count[
                  (addr - PFNIC_REG_CTX_COUNTERS) / 4] : 0;
        break;
    case PFNIC_REG_COUNTERS ... PFNIC_REG_COUNTERS + 4 * (PFNIC_CNT_NR - 1):
        val = s->stats.count[(addr - PFNIC_REG_COUNTERS) / 4];
        break;
    case PFNIC_REG_STAT_FAULT_LAT ...
         PFNIC_REG_STAT_FAULT_LAT + 4 * (PFNIC_FAULT_LAT_BUCKETS - 1):
        val = s->stats.fault_lat[(addr - PFNIC_REG_STAT_FAULT_LAT) / 4];
        break;
    case PFNIC_REG_STAT_GROUP_PAGES ...
         PFNIC_REG_STAT_GROUP_PAGES + 4 * (PFNIC_GROUP_PAGES_BUCKETS - 1):
        val = s->stats.group_pages[(addr - PFNIC_REG_STAT_GROUP_PAGES) / 4];
        break;
    case PFNIC_REG_CMD_ARG ... PFNIC_REG_CMD_ARG + 4 * (PFNIC_CMD_ARGS - 1):
        val = s->cmd.word[(addr - PFNIC_REG_CMD_ARG) / 4];
        break;
    case PFNIC_REG_CMD_OP:
        val = 0;
        break;
    case PFNIC_REG_CMD_STATUS:
        val = s->cmd_status;
        break;
    case PFNIC_REG_EQ_BASE_LO ... PFNIC_REG_EQ_OVERFLOW:
        val = pfnic_eq_read_reg(s, addr);
        break;
    case PFNIC_REG_MAX_QPS:
        val = PFNIC_MAX_QPS;
        break;
    case PFNIC_REG_MAX_CQS:
        val = PFNIC_MAX_CQS;
        break;
    case PFNIC_REG_MAX_MRS:
        val = PFNIC_MAX_MRS;
        break;
    case PFNIC_REG_MAX_WQES:
        val = PFNIC_MAX_WQES;
        break;
    case PFNIC_REG_MAX_CQES:
        val = PFNIC_MAX_CQES;
        break;
    case PFNIC_REG_MAX_SGE:
        val = PFNIC_MAX_SGE;
        break;
    case PFNIC_REG_MAX_SRQS:
        val = PFNIC_MAX_SRQS;
        break;
    case PFNIC_REG_PORT_MAC_LO:
        val = ldl_le_p(s->conf.macaddr.a);
        break;
    case PFNIC_REG_PORT_MAC_HI:
        val = lduw_le_p(s->conf.macaddr.a + 4);
        break;
    case PFNIC_REG_PORT_IPV4:
        val = s->port_ipv4;
        break;
    case PFNIC_REG_PORT_STATUS:
        val = pfnic_port_status(s);
        break;
    case PFNIC_REG_DM_SIZE:
        val = s->dm_size;
        break;
    case PFNIC_REG_PORT_COUNTERS ...
         PFNIC_REG_PORT_COUNTERS + 4 * (PFNIC_PORT_CNT_NR - 1):
        val = s->port_counters[(addr - PFNIC_REG_PORT_COUNTERS) / 4];
        break;
    case PFNIC_REG_ETH_CTRL ... PFNIC_REG_ETH_RX_HEAD:
        val = pfnic_eth_read(s, addr);
        break;
    case PFNIC_REG_RING_DB:
        val = 0;                /* write-only */
        break;
    default:
        qemu_log_mask(LOG_GUEST_ERROR,
                      "pfnic: read of unknown register 0x%" HWADDR_PRIx "\n",
                      addr);
        val = 0;
        break;
    }
    trace_pfnic_ctrl_read(addr, val);
    return val;
}

static void pfnic_ctrl_write(void *opaque, hwaddr addr, uint64_t val,
                             unsigned size)
{
    PfnicState *s = opaque;
    uint32_t cleared;

    trace_pfnic_ctrl_write(addr, val);
    switch (addr) {
    case PFNIC_REG_CONTROL:
        if (val & PFNIC_CONTROL_RESET) {
            trace_pfnic_reset("CONTROL.RESET");
            pfnic_ctrl_reset(s);
        }
        if (val & ~PFNIC_CONTROL_RESET) {
            pfnic_guest_error(s, "reserved CONTROL bits set");
        }
        break;
    case PFNIC_REG_IRQ_STATUS:
        cleared = s->irq_status & val;
        s->irq_status &= ~val;
        trace_pfnic_irq_clear(cleared, s->irq_status);
        break;
    case PFNIC_REG_SELFTEST_COOKIE:
        s->selftest_cookie = val;
        break;
    case PFNIC_REG_SELFTEST_TRIGGER:
        pfnic_selftest_start(s, val);
        break;
    case PFNIC_REG_SCRATCH:
        s->scratch = val;
        break;
    case PFNIC_REG_CTX_SELECT:
        s->ctx_select = val;
        break;
    case PFNIC_REG_CTX_PASID:
        pfnic_ctx_set_pasid(s, val);
        break;
    case PFNIC_REG_CTX_CTRL:
        pfnic_ctx_set_ctrl(s, val);
        break;
    case PFNIC_REG_CTX_RING_LO:
    case PFNIC_REG_CTX_RING_HI: {
        PfnicContext *ctx = pfnic_stopped_ctx(s);

        if (ctx) {
            ctx->ring = addr == PFNIC_REG_CTX_RING_LO ?
                        deposit64(ctx->ring, 0, 32, val) :
                        deposit64(ctx->ring, 32, 32, val);
            if (ctx->ring % PFNIC_DESC_SIZE) {
                pfnic_guest_error(s, "unaligned descriptor ring");
                ctx->ring &= ~(uint64_t)(PFNIC_DESC_SIZE - 1);
            }
        }
        break;
    }
    case PFNIC_REG_CTX_RING_SIZE:
        pfnic_ctx_set_ring_size(s, val);
        break;
    case PFNIC_REG_CTX_VECTOR: {
        PfnicContext *ctx = pfnic_stopped_ctx(s);

        if (ctx && val >= s->num_vectors) {
            pfnic_guest_error(s, "context vector out of range");
        } else if (ctx) {
            ctx->vector = val;
        }
        break;
    }
    case PFNIC_REG_CMD_ARG ... PFNIC_REG_CMD_ARG + 4 * (PFNIC_CMD_ARGS - 1):
        s->cmd.word[(addr - PFNIC_REG_CMD_ARG) / 4] = val;
        break;
    case PFNIC_REG_CMD_OP:
        pfnic_cmd_execute(s, val);
        break;
    case PFNIC_REG_EQ_BASE_LO ... PFNIC_REG_EQ_VECTOR:
        pfnic_eq_write_reg(s, addr, val);
        break;
    case PFNIC_REG_PORT_IPV4:
        /* Packets on the wire already sent keep their source address. */
        s->port_ipv4 = val;
        break;
    case PFNIC_REG_ETH_CTRL ... PFNIC_REG_ETH_RX_HEAD:
        pfnic_eth_write(s, addr, val);
        break;
    case PFNIC_REG_RING_DB:
        if ((val >> 16) >= s->num_contexts) {
            pfnic_guest_error(s, "RING_DB for a context out of range");
        } else {
            pfnic_doorbell(&s->contexts[val >> 16], val & 0xffff);
        }
        break;
    case PFNIC_REG_ID:
    case PFNIC_REG_VERSION:
    case PFNIC_REG_FW_VERSION:
    case PFNIC_REG_CAPS:
    case PFNIC_REG_NUM_VECTORS:
    case PFNIC_REG_NUM_CONTEXTS:
    case PFNIC_REG_PASID_WIDTH:
    case PFNIC_REG_STATUS:
    case PFNIC_REG_SELFTEST_ECHO:
    case PFNIC_REG_SELFTEST_COUNT:
    case PFNIC_REG_CTX_STATUS:
    case PFNIC_REG_CTX_HEAD:
    case PFNIC_REG_CTX_COUNTERS ...
         PFNIC_REG_CTX_COUNTERS + 4 * (PFNIC_CNT_NR - 1):
    case PFNIC_REG_COUNTERS ... PFNIC_REG_COUNTERS + 4 * (PFNIC_CNT_NR - 1):
    case PFNIC_REG_STAT_FAULT_LAT ...
         PFNIC_REG_STAT_FAULT_LAT + 4 * (PFNIC_FAULT_LAT_BUCKETS - 1):
    case PFNIC_REG_CMD_STATUS:
    case PFNIC_REG_EQ_OVERFLOW:
    case PFNIC_REG_MAX_QPS ... PFNIC_REG_MAX_SGE:
    case PFNIC_REG_MAX_SRQS:
    case PFNIC_REG_DM_SIZE:
        pfnic_guest_error(s, "write to a read-only register");
        break;
    default:
        qemu_log_mask(LOG_GUEST_ERROR,
                      "pfnic: write of unknown register 0x%" HWADDR_PRIx "\n",
                      addr);
        break;
    }
}

const MemoryRegionOps pfnic_ctrl_ops = {
    .read = pfnic_ctrl_read,
    .write = pfnic_ctrl_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = {
        .min_access_size = 4,
        .max_access_size = 4,
    },
    .impl = {
        .min_access_size = 4,
        .max_access_size = 4,
    },
};

/*
 * BAR2: one doorbell page per hardware context, mapped by the process that
 * owns the context: 0x8/0xc/0x10/0x14 are the verbs doorbells and
 * 0x20/0x24 read the device clock (docs/verbs.md); the rest of the page
 * is reserved. The driver's descriptor ring is rung through RING_DB in
 * BAR0, out of the process's reach.
 *
 * Accesses are 4 or 8 bytes, naturally aligned. An 8-byte read at 0x20
 * returns the whole clock from one sample (CLOCK_LO in the low half,
 * CLOCK_HI in the high); any other 8-byte read is its two 4-byte halves,
 * and an 8-byte write is two 4-byte writes, the low word's first.
 */
static uint64_t pfnic_doorbell_read(void *opaque, hwaddr addr, unsigned size)
{
    PfnicState *s = opaque;
    hwaddr offset = addr % PFNIC_DOORBELL_PAGE_SIZE;
    uint64_t val = 0;

    if (offset == PFNIC_DB_CLOCK_LO) {
        val = pfnic_clock(s);
        if (size == 4) {
            val = (uint32_t)val;
        }
    } else if (offset == PFNIC_DB_CLOCK_HI) {
        val = pfnic_clock(s) >> 32;
    }
    trace_pfnic_doorbell_read(addr, size, val);
    return val;
}

static void pfnic_doorbell_write32(PfnicState *s, hwaddr addr, uint32_t val)
{
    uint32_t index = addr / PFNIC_DOORBELL_PAGE_SIZE;
    hwaddr offset = addr % PFNIC_DOORBELL_PAGE_SIZE;

    trace_pfnic_doorbell_write(addr, val);
    if (offset == PFNIC_DB_CLOCK_LO || offset == PFNIC_DB_CLOCK_HI) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "pfnic: write to the read-only clock at 0x%"
                      HWADDR_PRIx "\n", addr);
        return;
    }
    if (index >= s->num_contexts ||
        (offset != PFNIC_DB_SQ && offset != PFNIC_DB_RQ &&
         offset != PFNIC_DB_CQ_ARM && offset != PFNIC_DB_SRQ)) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "pfnic: doorbell write at reserved 0x%" HWADDR_PRIx "\n",
                      addr);
        return;
    }
    pfnic_qp_doorbell(&s->contexts[index], offset, val);
}

static void pfnic_doorbell_write(void *opaque, hwaddr addr, uint64_t val,
                                 unsigned size)
{
    pfnic_doorbell_write32(opaque, addr, val);
    if (size == 8) {
        pfnic_doorbell_write32(opaque, addr + 4, val >> 32);
    }
}

const MemoryRegionOps pfnic_doorbell_ops = {
    .read = pfnic_doorbell_read,
    .write = pfnic_doorbell_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = {
        .min_access_size = 4,
        .max_access_size = 8,
    },
    /* 8-byte accesses whole: a read of the clock is one sample. */
    .impl = {
        .min_access_size = 4,
        .max_access_size = 8,
    },
};
