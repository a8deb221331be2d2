/*
 * pfnic op interpreter: one byte string, run as a sequence of operations
 * against a pfnic behind an intel-iommu in scalable mode, by both the
 * libFuzzer target (pfnic_fuzz.c) and the qtest (pfnic-test.c).
 *
 * Setup (pfnic_fuzz_setup) builds, through qtest writes to guest memory,
 * what Linux builds for SVA: a scalable-mode root and context entry (page
 * requests enabled), a PASID directory and table whose PASID 0 (requests
 * without PASID: the rings) passes through and whose PASIDs 5 and 9 have
 * their own 4-level first-level tables, the invalidation queue (256-bit
 * descriptors) and the page request queue; then the device: ATS, PASID
 * and PRI enabled, context 1 bound to PASID 5 and context 2 to PASID 9,
 * an MR, a CQ and a QP in each, the two QPs connected; context 2's CQ
 * has 64-byte CQEs with timestamps (ABI 1.12).
 *
 * The operations (docs/fuzzing.md) post work requests and descriptors on
 * addresses that are mapped, read-only or not present; map and unmap
 * pages with or without the invalidations Linux would send; answer the
 * page request queue (serving the faults, or with failures and bogus
 * group responses); write raw BAR0/BAR2 registers and device commands;
 * stop contexts, reset the device and step the clock.
 *
 * After every operation the invariants are checked, and a violation
 * aborts (a crash for libFuzzer, a failure for the qtest): completions
 * are well-formed (timestamps within the device clock, which never goes
 * back), descriptors are written back with a defined status,
 * contexts stay enabled and ready, the page request queue holds only the
 * device's requests in its PASIDs and never more pages than the PRI
 * allocation; and unless the input misprogrammed the device, serving
 * every page request at the end lets all posted work complete.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include <sys/socket.h>
#include <sys/un.h>
#include "hw/i386/intel_iommu_internal.h"
#include "hw/net/pfnic/pfnic_regs.h"
#include "tests/qtest/libqos/pci-pc.h"
#include "tests/qtest/libqos/pfnic.h"
#include "pfnic_fuzz.h"

/*
 * Topology: pfnic at 01:00.0 behind the root port at 00:02.0, reached
 * through libqos's q35 bus and pfnic driver (libqos/pfnic.h), which put
 * the root port's window, and BAR0, at 0xc0000000.
 */
#define NIC_BUS         1
#define NIC_SID         (NIC_BUS << 8)
#define BAR0            (0xc0000000ULL + QPFNIC_BAR0_OFF)
#define BAR2            (0xc0000000ULL + QPFNIC_BAR2_OFF)
#define BAR1            (0xc0000000ULL + QPFNIC_BAR1_OFF) /* device memory */
#define DMAR            Q35_HOST_BRIDGE_IOMMU_ADDR

/* Guest memory (cleared at setup: RAM survives a system reset) */
#define ROOT_TABLE      0x100000ULL
#define CTX_TABLE       0x101000ULL
#define PASID_DIR       0x102000ULL
#define PASID_TABLE     0x103000ULL
#define IQ_BASE         0x104000ULL     /* 128 descriptors of 256 bits */
#define PRQ_BASE        0x105000ULL     /* 128 page requests */
#define WAIT_STATUS     0x106000ULL
#define FL_TABLES       0x108000ULL     /* per PASID: PML4, PDPT, PD, PT */
#define RING(c)         (0x200000ULL + (c) * 0x1000)
#define CQ_RING(c)      (0x210000ULL + (c) * 0x1000)  /* up to 64-byte CQEs */
#define CQ_REC(c)       (0x212000ULL + (c) * 0x100)
#define SQ(q)           (0x220000ULL + (q) * 0x2000)
#define RQ(q)           (0x221000ULL + (q) * 0x2000)
#define QP_REC(q)       (0x228000ULL + (q) * 0x100)
#define EQ_BASE         0x230000ULL
#define MTT_SRC         0x238000ULL     /* entries MTT_WRITE reads */
#define SRQ_RING(n)     (0x23c000ULL + (n) * 0x800) /* SRQs 0..3: 16 WQEs */
#define SRQ_REC(n)      (0x23e000ULL + (n) * 0x100)
#define SRQS            4               /* SRQNs the shaped commands use */
#define SCRATCH_END     0x240000ULL
/* pfnic-wire: the Ethernet queues (ABI 1.16), DMA without a PASID */
#define ETH_RING_N      16              /* descriptors a ring */
#define ETH_TX_RING     0x240000ULL
#define ETH_RX_RING     0x240100ULL
#define ETH_TX_BUF(n)   (0x241000ULL + (n) * 0x800ULL)
#define ETH_RX_SLOT     4096            /* a receive buffer and its edge */
#define ETH_RX_BUF(n)   (0x24a000ULL + (n) * (uint64_t)ETH_RX_SLOT)
#define ETH_END         0x25a000ULL
#define ETH_SENT_N      64              /* frames to the port remembered */
/* pfnic-wire: a UD QP of context 1 (ABI 1.19) */
#define UD_QPN          6
#define UD_QKEY         0x1234abcdu
#define UD_SQ           0x25a000ULL
#define UD_RQ           0x25b000ULL
#define UD_REC          0x25c000ULL
#define UD_END          0x25c100ULL
#define UD_RECV_PAGE    20              /* VA pages 20..23: its receives */
#define OP_UD_SEND      0x64            /* BTH opcodes: UD SEND ONLY */
#define OP_UD_SEND_IMM  0x65            /* ... with immediate */
#define POOL            0x2000000ULL    /* data pages the tables map */
#define POOL_PAGES      128
#define LARGE_PAGE      0x4000000ULL    /* a 2 MiB page */

#define IQ_ENTRIES      128
#define PRQ_ENTRIES     128
#define RING_SIZE       16
#define QUEUE_LOG2      4
#define QUEUE_SIZE      (1u << QUEUE_LOG2)
#define CQ_LOG2         5
#define CQ_SIZE         (1u << CQ_LOG2)
#define CQ_TS_SETUP     2               /* setup: side 1's CQ has TIMESTAMP */
#define EQ_SIZE         16
#define PRI_ALLOC       32

/*
 * Each of the two sides: context c + 1 bound to PASID pasid[c], its MR
 * c + 1, CQ c + 1 and QP c + 2, over VAs [VA_BASE, VA_BASE + 4 MiB): one
 * page table (VA pages 0..511) and one page directory entry that the
 * large-page operation sets to a 2 MiB page (VA pages 512..1023).
 */
#define SIDES           2
#define VA_BASE         0x10000000ULL
#define VA_PAGES        1024
#define VA_PT_PAGES     512
#define PD_INDEX        128             /* VA_BASE >> 21 */
#define PD_LARGE        (PD_INDEX + 1)
#define PD_ADDR         0x100000000ULL  /* the PD entries' 1 GiB */
#define WR_MAGIC        0xf22d000000000000ULL
/*
 * ABI 1.13: side s also has DM MR DM_MR + s over bytes [s * DM_MR_LEN,
 * (s + 1) * DM_MR_LEN) of the device memory (dm-size's default is more)
 */
#define DM_MR           3
#define DM_MR_LEN       0x8000
#define MAX_OPS         256
#define MAX_XFER        0x10000         /* bytes of a work request's SGE */
/*
 * Ring r is context r + 1's: the two sides', and context 3's, which a
 * process may bind to the PASID of context 1 or 2 (two opens of the same
 * process share its PASID, and the IOMMU's page response notifier).
 */
#define RINGS           3
/*
 * QP q is QPN q + 2: QPs 2 (context 1) and 3 (context 2) are connected
 * across PASIDs, QPs 4 and 5 (both context 1) within one; the QPs of a
 * context share its CQ.
 */
#define QPS             4

/*
 * The wire (pfnic-wire): the port is 10.0.0.1 with PFNIC_FUZZ_WIRE_MAC;
 * the harness is its peer 10.0.0.2, and QPs 4 and 5 (q 2 and 3, context
 * 1) are wire QPs connected to its QPs 0x100 and 0x101.
 */
#define WIRE_IP         0x0a000001
#define PEER_IP         0x0a000002
#define STRANGER_IP     0x0a000063
#define WIRE_Q          2               /* q of the first wire QP */
#define WIRE_QPS        2
#define PEER_QPN(w)     (0x100 + (w))
#define WIRE_SQ_PSN     0x10000
#define WIRE_RQ_PSN     0xfffff0        /* wraps soon: 24-bit arithmetic */
#define WIRE_MTU_ENUM   3
#define WIRE_MTU        1024
#define WIRE_TIMEOUT    8               /* 4.096 us << 8: about 1 ms */
#define LOOP_TIMEOUT    4               /* 65 us: an unready peer fails soon */
#define WIRE_JUMBO      9216
#define WIRE_BUF        (WIRE_JUMBO + 64)
#define WIRE_REQ_KEEP   64              /* bytes kept of a request sent */
#define WIRE_MAPPED     16              /* VA pages 16..19 of side 0 */
#define ETH_IP_UDP      42              /* Ethernet, IPv4 and UDP headers */
#define DM_SENTINEL     (SIDES * DM_MR_LEN) /* device memory past the MRs */
#define SENTINEL_BYTE   0xa5

static int qp_side(int q)
{
    return q == 1;
}

static const uint32_t pasids[SIDES] = { 5, 9 };

/* A frame the harness put on the Ethernet transmit ring */
typedef struct PfnicFuzzEthFrame {
    uint32_t desc;                      /* the descriptor's number */
    uint16_t len;
    uint8_t data[PFNIC_ETH_FRAME_MAX];
} PfnicFuzzEthFrame;

/* A frame the harness gave the port (its first bytes) */
typedef struct PfnicFuzzSent {
    size_t len;
    uint8_t data[ETH_RX_SLOT];
} PfnicFuzzSent;

struct PfnicFuzz {
    QTestState *qts;
    QPCIBusPC bus;
    QPfnic nic;
    void (*flush)(QTestState *qts);
    const uint8_t *data;
    size_t len, pos;
    uint16_t ats_off, pasid_off, pri_off;
    uint32_t key[SIDES];
    uint32_t dm_key[SIDES];     /* ABI 1.13: the sides' DM MRs */
    uint32_t ring_tail[RINGS];
    uint32_t ctx3_pasid;        /* 0: context 3 stopped */
    uint32_t sq_tail[QPS], rq_tail[QPS];
    uint32_t cq_cons[SIDES], cq_seen[SIDES];
    uint32_t cqe_size[SIDES];   /* 64: a TIMESTAMP CQ (ABI 1.12) */
    uint64_t cq_time[SIDES];    /* the last timestamp seen (or creation) */
    uint64_t clock;             /* the device clock's last value read */
    uint32_t iq_tail;
    uint64_t wr_seq;
    int op;                     /* the operation running, for messages */
    /*
     * The input misprogrammed the device (raw registers, commands, a
     * stopped context, a reset): the checks that assume the setup's
     * objects hold no longer apply, those of well-formedness still do.
     */
    bool disturbed;
    bool iq_error_ok;           /* the input queued a malformed descriptor */
    bool bogus_response;        /* a response the device did not ask for */
    bool prq_moved;             /* the input moved the queue's head */
    bool trace;                 /* PFNIC_FUZZ_TRACE: print each operation */
    bool well_formed;           /* only OP_WELL_FORMED operations */
    /* pfnic-wire */
    PfnicFuzzWire *wire;
    uint8_t last_req[WIRE_QPS][WIRE_REQ_KEEP]; /* BTH on, of the last */
    size_t last_req_len[WIRE_QPS];  /* request sent to PEER_QPN(w) */
    uint32_t peer_msn[WIRE_QPS];
    bool arp_answered;          /* the port answered the peer's ARP */
    /*
     * The Ethernet queues: the harness is their driver. A transmit
     * descriptor's code is predicted; its frame, if it goes, must come
     * out of the port (tx_frame, in order). Every frame the harness gave
     * the port is remembered (sent), and a received one must be one of
     * them, in order, within its buffer.
     */
    bool eth_on;
    bool eth_wild;      /* the input misprogrammed the queues: any frame */
    uint32_t eth_tx_tail, eth_tx_cons, eth_rx_tail, eth_rx_cons;
    uint8_t eth_tx_code[ETH_RING_N];    /* predicted completion */
    uint16_t eth_rx_room[ETH_RING_N];   /* the buffer's length posted */
    PfnicFuzzEthFrame eth_tx_frame[ETH_RING_N];
    uint32_t eth_tx_first, eth_tx_last; /* frames expected on the wire */
    PfnicFuzzSent sent[ETH_SENT_N];
    uint32_t sent_first, sent_last;     /* frames a buffer may hold */
    uint32_t ud_sq_tail, ud_rq_tail;    /* the UD QP's */
};

static void wire_setup(PfnicFuzz *f);
static void wire_check(PfnicFuzz *f, bool full);

static G_NORETURN G_GNUC_PRINTF(2, 3)
void pfz_fail(PfnicFuzz *f, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fprintf(stderr, "pfnic-fuzz: invariant violated at op %d: ", f->op);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

#define PFZ_CHECK(f, cond, ...) \
    do { \
        if (!(cond)) { \
            pfz_fail(f, __VA_ARGS__); \
        } \
    } while (0)

/* --- input --------------------------------------------------------------- */

/* The next @n bytes of input, little endian; zeros past its end. */
static uint64_t pfz_take(PfnicFuzz *f, int n)
{
    uint64_t v = 0;

    for (int i = 0; i < n; i++) {
        if (f->pos < f->len) {
            v |= (uint64_t)f->data[f->pos++] << (8 * i);
        }
    }
    return v;
}

#define U8(f)   ((uint8_t)pfz_take(f, 1))
#define U16(f)  ((uint16_t)pfz_take(f, 2))
#define U32(f)  ((uint32_t)pfz_take(f, 4))
#define U64(f)  pfz_take(f, 8)

/* --- guest access -------------------------------------------------------- */

static void reg_write(PfnicFuzz *f, uint32_t reg, uint32_t val)
{
    qtest_writel(f->qts, BAR0 + reg, val);
}

static uint32_t reg_read(PfnicFuzz *f, uint32_t reg)
{
    return qtest_readl(f->qts, BAR0 + reg);
}

static void cfg_writew(PfnicFuzz *f, uint16_t off, uint16_t val)
{
    qpci_config_writew(&f->nic.dev, off, val);
}

static void mem_write64(PfnicFuzz *f, uint64_t addr, uint64_t val)
{
    qtest_writeq(f->qts, addr, val);
}

static uint64_t mem_read64(PfnicFuzz *f, uint64_t addr)
{
    return qtest_readq(f->qts, addr);
}

static void dmar_write64(PfnicFuzz *f, uint32_t reg, uint64_t val)
{
    qtest_writeq(f->qts, DMAR + reg, val);
}

static uint64_t dmar_read64(PfnicFuzz *f, uint32_t reg)
{
    return qtest_readq(f->qts, DMAR + reg);
}

static uint32_t dmar_read32(PfnicFuzz *f, uint32_t reg)
{
    return qtest_readl(f->qts, DMAR + reg);
}

/*
 * Clear guest memory. In the fuzzer (in-process, f->flush set), libqtest's
 * qtest_memset wrapper leaks a buffer of @size per call, which
 * LeakSanitizer reports: write zeros from a static buffer instead.
 */
static void mem_zero(PfnicFuzz *f, uint64_t addr, uint64_t size)
{
    static const uint8_t zero[0x10000];

    if (!f->flush) {
        qtest_memset(f->qts, addr, 0, size);
        return;
    }
    for (uint64_t done = 0; done < size; done += sizeof(zero)) {
        qtest_memwrite(f->qts, addr + done, zero,
                       MIN(sizeof(zero), size - done));
    }
}

static void flush(PfnicFuzz *f)
{
    if (f->flush) {
        f->flush(f->qts);
    }
}

static void clock_step(PfnicFuzz *f, int64_t ns)
{
    qtest_clock_step(f->qts, ns);
    flush(f);
}

/* --- the IOMMU's tables -------------------------------------------------- */

static uint64_t fl_table(int side, int level)
{
    /* level 4: PML4, 3: PDPT, 2: PD, 1: PT */
    return FL_TABLES + side * 0x4000 + (4 - level) * 0x1000;
}

static uint64_t pte_addr(int side, uint32_t vpage)
{
    return fl_table(side, 1) + (vpage % VA_PT_PAGES) * 8;
}

static uint64_t va_of(uint32_t vpage)
{
    return VA_BASE + (uint64_t)(vpage % VA_PAGES) * 4096;
}

static uint64_t pool_page(uint32_t n)
{
    return POOL + (uint64_t)(n % POOL_PAGES) * 4096;
}

/* Submit one 256-bit descriptor to the invalidation queue. */
static void iq_submit(PfnicFuzz *f, uint64_t lo, uint64_t hi)
{
    uint64_t desc[4] = { cpu_to_le64(lo), cpu_to_le64(hi), 0, 0 };

    qtest_memwrite(f->qts, IQ_BASE + (f->iq_tail % IQ_ENTRIES) * 32,
                   desc, sizeof(desc));
    f->iq_tail = (f->iq_tail + 1) % IQ_ENTRIES;
    /* IQT counts 128-bit units; bit 4 is reserved with 256-bit ones. */
    dmar_write64(f, DMAR_IQT_REG, (uint64_t)f->iq_tail << 5);
    flush(f);
}

/* What Linux sends after changing a first-level mapping of @side. */
static void invalidate_page(PfnicFuzz *f, int side, uint64_t va, bool dev)
{
    uint32_t pasid = pasids[side];

    iq_submit(f, VTD_INV_DESC_PIOTLB | VTD_INV_DESC_PIOTLB_PSI_IN_PASID |
                 ((uint64_t)(side + 2) << 16) | ((uint64_t)pasid << 32),
              va & ~0xfffULL);
    if (dev) {
        iq_submit(f, VTD_INV_DESC_DEV_PIOTLB | ((uint64_t)NIC_SID << 16) |
                     ((uint64_t)pasid << 32), va & ~0xfffULL);
    }
}

bool pfnic_fuzz_piotlb(PfnicFuzz *f, int side, uint64_t addr, unsigned am)
{
    iq_submit(f, VTD_INV_DESC_PIOTLB | VTD_INV_DESC_PIOTLB_PSI_IN_PASID |
                 ((uint64_t)(side + 2) << 16) |
                 ((uint64_t)pasids[side] << 32),
              (addr & ~0xfffULL) | (am & 0x3f));
    return !(dmar_read32(f, DMAR_FSTS_REG) & VTD_FSTS_IQE);
}

static void pasid_entry(PfnicFuzz *f, uint32_t pasid, uint64_t v0,
                        uint64_t v1, uint64_t v2)
{
    uint64_t e[8] = { cpu_to_le64(v0), cpu_to_le64(v1), cpu_to_le64(v2) };

    qtest_memwrite(f->qts, PASID_TABLE + pasid * VTD_PASID_ENTRY_SIZE, e,
                   sizeof(e));
}

static void setup_iommu(PfnicFuzz *f)
{
    uint64_t ce[4] = {
        cpu_to_le64(PASID_DIR | VTD_CONTEXT_ENTRY_P |
                    VTD_SM_CONTEXT_ENTRY_PRE),
        0,                                      /* RID_PASID 0 */
    };
    uint64_t rtaddr = ROOT_TABLE | VTD_RTADDR_SMT;

    mem_write64(f, ROOT_TABLE + NIC_BUS * 16, CTX_TABLE | VTD_ROOT_ENTRY_P);
    qtest_memwrite(f->qts, CTX_TABLE, ce, sizeof(ce));
    mem_write64(f, PASID_DIR, PASID_TABLE | 1);
    /* Requests without PASID (rings, records) pass through. */
    pasid_entry(f, 0, VTD_PASID_ENTRY_P | VTD_SM_PASID_ENTRY_PT, 1, 0);
    for (int side = 0; side < SIDES; side++) {
        for (int level = 4; level > 1; level--) {
            uint32_t index = level == 2 ? PD_INDEX : 0;

            mem_write64(f, fl_table(side, level) + index * 8,
                        fl_table(side, level - 1) | VTD_FL_P | VTD_FL_RW |
                        VTD_FL_US);
        }
        pasid_entry(f, pasids[side],
                    VTD_PASID_ENTRY_P | VTD_SM_PASID_ENTRY_FLT, side + 2,
                    fl_table(side, 4));
    }

    /* Interrupts masked: the harness polls. */
    qtest_writel(f->qts, DMAR + DMAR_FECTL_REG, 1u << 31);
    qtest_writel(f->qts, DMAR + DMAR_IECTL_REG, 1u << 31);
    qtest_writel(f->qts, DMAR + DMAR_PECTL_REG, VTD_PR_PECTL_IM);
    dmar_write64(f, DMAR_RTADDR_REG, rtaddr);
    qtest_writel(f->qts, DMAR + DMAR_GCMD_REG, VTD_GCMD_SRTP);
    dmar_write64(f, DMAR_IQA_REG, IQ_BASE | VTD_IQA_DW_MASK);
    dmar_write64(f, DMAR_IQT_REG, 0);
    qtest_writel(f->qts, DMAR + DMAR_GCMD_REG, VTD_GCMD_QIE);
    dmar_write64(f, DMAR_PQA_REG, PRQ_BASE);
    dmar_write64(f, DMAR_PQH_REG, 0);
    dmar_write64(f, DMAR_PQT_REG, 0);
    qtest_writel(f->qts, DMAR + DMAR_GCMD_REG, VTD_GCMD_QIE | VTD_GCMD_TE);
    PFZ_CHECK(f, (dmar_read32(f, DMAR_GSTS_REG) &
                  (VTD_GSTS_TES | VTD_GSTS_QIES | VTD_GSTS_RTPS)) ==
                 (VTD_GSTS_TES | VTD_GSTS_QIES | VTD_GSTS_RTPS),
              "IOMMU not enabled: GSTS %x", dmar_read32(f, DMAR_GSTS_REG));
    f->iq_tail = 0;
}

/* --- the device ---------------------------------------------------------- */

/* Where CQE @n of @side's CQ is */
static uint64_t cqe_addr(PfnicFuzz *f, int side, uint32_t n)
{
    return CQ_RING(side) + (uint64_t)(n % CQ_SIZE) * f->cqe_size[side];
}

/*
 * The device clock (ABI 1.12), as a process reads it in context @ctx's
 * doorbell page (enabled or not): high, low, high again until the two
 * high words agree. It never goes back.
 */
static uint64_t clock_read(PfnicFuzz *f, uint32_t ctx)
{
    uint64_t page = BAR2 + ctx * PFNIC_DOORBELL_PAGE_SIZE;
    uint32_t hi, lo;
    uint64_t now;

    do {
        hi = qtest_readl(f->qts, page + PFNIC_DB_CLOCK_HI);
        lo = qtest_readl(f->qts, page + PFNIC_DB_CLOCK_LO);
    } while (hi != qtest_readl(f->qts, page + PFNIC_DB_CLOCK_HI));
    now = (uint64_t)hi << 32 | lo;
    PFZ_CHECK(f, now >= f->clock, "device clock went back from %" PRIu64
              " to %" PRIu64, f->clock, now);
    f->clock = now;
    return now;
}

/*
 * An admin command. The arguments go in and come back in one qtest command
 * each (the device still sees 4-byte accesses, the only size its control
 * BAR takes): setups issue dozens of commands per input.
 */
static uint32_t cmd(PfnicFuzz *f, uint32_t op, uint32_t *a, int n)
{
    uint32_t le[PFNIC_CMD_ARGS];

    g_assert(n <= PFNIC_CMD_ARGS);
    for (int i = 0; i < n; i++) {
        le[i] = cpu_to_le32(a[i]);
    }
    if (n) {
        qtest_memwrite(f->qts, BAR0 + PFNIC_REG_CMD_ARG, le, 4 * n);
    }
    reg_write(f, PFNIC_REG_CMD_OP, op);
    qtest_memread(f->qts, BAR0 + PFNIC_REG_CMD_ARG, le, sizeof(le));
    for (int i = 0; i < PFNIC_CMD_ARGS; i++) {
        a[i] = le32_to_cpu(le[i]);
    }
    return reg_read(f, PFNIC_REG_CMD_STATUS);
}

static void setup_ok(PfnicFuzz *f, uint32_t st, const char *what)
{
    PFZ_CHECK(f, st == PFNIC_CMD_OK, "setup: %s failed with %u", what, st);
}

static void qp_modify(PfnicFuzz *f, uint32_t qpn, uint32_t state,
                      uint32_t dest)
{
    uint32_t a[PFNIC_CMD_ARGS] = {
        qpn, state, PFNIC_ACCESS_REMOTE_WRITE | PFNIC_ACCESS_REMOTE_READ |
        PFNIC_ACCESS_REMOTE_ATOMIC, dest,
        1,      /* min RNR timer: 0.01 ms */
        3,      /* RNR retries: a missing receive fails soon */
        7,
        [11] = LOOP_TIMEOUT,
    };

    if (f->wire && qpn >= WIRE_Q + 2 && qpn < WIRE_Q + 2 + WIRE_QPS) {
        /* A wire QP: its peer is the harness (docs/wire.md's a7..a14) */
        a[3] = PEER_QPN(qpn - WIRE_Q - 2);
        a[7] = PEER_IP;
        a[8] = WIRE_SQ_PSN;
        a[9] = WIRE_RQ_PSN;
        a[10] = WIRE_MTU_ENUM;
        a[11] = WIRE_TIMEOUT;
        a[12] = 4;
        a[14] = 4;
    }
    setup_ok(f, cmd(f, PFNIC_CMD_QP_MODIFY, a, PFNIC_CMD_ARGS), "QP_MODIFY");
}

/*
 * The device's objects, on a device fresh from reset; the CQs of the
 * sides in the mask @ts (bit 0: side 0) with TIMESTAMP (ABI 1.12).
 */
static void setup_device(PfnicFuzz *f, unsigned ts)
{
    reg_write(f, PFNIC_REG_EQ_BASE_LO, EQ_BASE);
    reg_write(f, PFNIC_REG_EQ_BASE_HI, 0);
    reg_write(f, PFNIC_REG_EQ_VECTOR, 1);
    reg_write(f, PFNIC_REG_EQ_SIZE, EQ_SIZE);
    for (int side = 0; side < SIDES; side++) {
        uint32_t ctx = side + 1;
        uint32_t a[PFNIC_CMD_ARGS] = {
            ctx, ctx, 7, PFNIC_ACCESS_LOCAL_WRITE |
            PFNIC_ACCESS_REMOTE_WRITE | PFNIC_ACCESS_REMOTE_READ |
            PFNIC_ACCESS_REMOTE_ATOMIC | PFNIC_ACCESS_ON_DEMAND,
            (uint32_t)VA_BASE, VA_BASE >> 32, VA_PAGES * 4096, 0,
        };

        reg_write(f, PFNIC_REG_CTX_SELECT, ctx);
        reg_write(f, PFNIC_REG_CTX_RING_LO, RING(side));
        reg_write(f, PFNIC_REG_CTX_RING_HI, 0);
        reg_write(f, PFNIC_REG_CTX_RING_SIZE, RING_SIZE);
        reg_write(f, PFNIC_REG_CTX_VECTOR, 0);
        reg_write(f, PFNIC_REG_CTX_PASID, pasids[side]);
        reg_write(f, PFNIC_REG_CTX_CTRL, PFNIC_CTX_CTRL_ENABLE);
        PFZ_CHECK(f, reg_read(f, PFNIC_REG_CTX_STATUS) &
                     PFNIC_CTX_STATUS_ACTIVE, "setup: context %u refused",
                  ctx);
        /* All arguments: a8 (flags) must not be a stale value. */
        setup_ok(f, cmd(f, PFNIC_CMD_MR_SET, a, PFNIC_CMD_ARGS), "MR_SET");
        f->key[side] = a[0];

        uint32_t m[PFNIC_CMD_ARGS] = {
            DM_MR + side, ctx, 7, PFNIC_ACCESS_LOCAL_WRITE |
            PFNIC_ACCESS_REMOTE_WRITE | PFNIC_ACCESS_REMOTE_READ |
            PFNIC_ACCESS_REMOTE_ATOMIC, side * DM_MR_LEN, 0, DM_MR_LEN, 0,
            PFNIC_MR_FLAG_DM,
        };
        setup_ok(f, cmd(f, PFNIC_CMD_MR_SET, m, PFNIC_CMD_ARGS),
                 "MR_SET DM");
        f->dm_key[side] = m[0];

        uint32_t c[PFNIC_CMD_ARGS] = {
            ctx, ctx, CQ_RING(side), 0, CQ_LOG2, CQ_REC(side), 0,
            (ts >> side) & 1 ? PFNIC_CQ_FLAG_TIMESTAMP : 0,
        };
        /* a7 too (ABI 1.12, the flags): it must not be a stale value. */
        setup_ok(f, cmd(f, PFNIC_CMD_CQ_CREATE, c, 8), "CQ_CREATE");
        f->cqe_size[side] = (ts >> side) & 1 ? PFNIC_CQE_TS_SIZE
                                             : PFNIC_CQE_SIZE;
        /* Its CQEs come later: their times cannot be earlier. */
        f->cq_time[side] = clock_read(f, side);

        f->ring_tail[side] = 0;
        f->ctx3_pasid = 0;
        f->cq_cons[side] = f->cq_seen[side] = 0;
    }
    for (int q = 0; q < QPS; q++) {
        uint32_t ctx = qp_side(q) + 1;
        uint32_t a[PFNIC_CMD_ARGS] = {
            q + 2, ctx, 7, ctx, ctx, SQ(q), 0, QUEUE_LOG2, RQ(q), 0,
            QUEUE_LOG2, QP_REC(q), 0, 0,
        };

        /* All arguments: a14 (ABI 1.11, the SRQ) must not be stale. */
        setup_ok(f, cmd(f, PFNIC_CMD_QP_CREATE, a, PFNIC_CMD_ARGS),
                 "QP_CREATE");
        f->sq_tail[q] = f->rq_tail[q] = 0;
    }
    for (uint32_t state = PFNIC_QPS_INIT; state <= PFNIC_QPS_RTS; state++) {
        for (int q = 0; q < QPS; q++) {
            qp_modify(f, q + 2, state, (q ^ 1) + 2);
        }
    }
    if (f->wire) {
        wire_setup(f);
    }
}

/* Bus master, ATS, PASID and PRI (with its allocation) on, as Linux does. */
static void enable_caps(PfnicFuzz *f)
{
    cfg_writew(f, PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
    cfg_writew(f, f->ats_off + PCI_ATS_CTRL, PCI_ATS_CTRL_ENABLE);
    cfg_writew(f, f->pasid_off + PCI_PASID_CTRL, PCI_PASID_CTRL_ENABLE);
    cfg_writew(f, f->pri_off + PCI_PRI_CTRL, 0);
    qpci_config_writel(&f->nic.dev, f->pri_off + PCI_PRI_ALLOC_REQ,
                       PRI_ALLOC);
    cfg_writew(f, f->pri_off + PCI_PRI_CTRL, PCI_PRI_CTRL_ENABLE);
}

void pfnic_fuzz_setup(PfnicFuzz *f)
{
    QTestState *qts = f->qts;
    uint16_t ids[8], offs[8];
    int n;

    mem_zero(f, ROOT_TABLE, SCRATCH_END - ROOT_TABLE);
    mem_zero(f, POOL, POOL_PAGES * 4096);
    f->disturbed = f->iq_error_ok = f->bogus_response = false;
    f->prq_moved = false;
    f->wr_seq = 0;
    f->op = -1;

    qpci_init_q35(&f->bus, qts, NULL);
    qpfnic_init(&f->nic, &f->bus.bus, QPFNIC_RP0_DEVFN, NIC_BUS);
    g_assert(f->nic.bar0.addr == BAR0);
    qpfnic_map_bars(&f->nic);
    PFZ_CHECK(f, reg_read(f, PFNIC_REG_ID) == 0x434e4650,
              "setup: no pfnic at BAR0");

    /* The IOMMU first: the device's capabilities are enabled under it. */
    setup_iommu(f);
    n = qpfnic_ext_caps(&f->nic, ids, offs, 8);
    f->ats_off = f->pasid_off = f->pri_off = 0;
    for (int i = 0; i < n; i++) {
        switch (ids[i]) {
        case PCI_EXT_CAP_ID_ATS:
            f->ats_off = offs[i];
            break;
        case PCI_EXT_CAP_ID_PASID:
            f->pasid_off = offs[i];
            break;
        case PCI_EXT_CAP_ID_PRI:
            f->pri_off = offs[i];
            break;
        }
    }
    PFZ_CHECK(f, f->ats_off && f->pasid_off && f->pri_off,
              "setup: ATS, PASID or PRI missing");
    enable_caps(f);
    setup_device(f, CQ_TS_SETUP);
}

/* --- checks -------------------------------------------------------------- */

static bool wc_status_known(uint8_t st)
{
    switch (st) {
    case PFNIC_WC_SUCCESS:
    case PFNIC_WC_LOC_LEN_ERR:
    case PFNIC_WC_LOC_QP_OP_ERR:
    case PFNIC_WC_LOC_PROT_ERR:
    case PFNIC_WC_WR_FLUSH_ERR:
    case PFNIC_WC_REM_INV_REQ_ERR:
    case PFNIC_WC_REM_ACCESS_ERR:
    case PFNIC_WC_REM_OP_ERR:
    case PFNIC_WC_RETRY_EXC_ERR:
    case PFNIC_WC_RNR_RETRY_EXC_ERR:
        return true;
    }
    return false;
}

static bool wc_opcode_known(uint8_t op)
{
    return op <= PFNIC_WC_FETCH_ADD || op == PFNIC_WC_LOCAL_INV ||
           op == PFNIC_WC_REG_MR || op == PFNIC_WC_RECV ||
           op == PFNIC_WC_RECV_RDMA_WITH_IMM;
}

/*
 * A timestamped CQE (ABI 1.12): zeros after the time, which the device
 * clock read now has reached and, for well-formed inputs, the CQ's
 * earlier CQEs have not passed.
 */
static void check_cqe_time(PfnicFuzz *f, int side, const PfnicCqeTs *t)
{
    static const uint8_t zero[sizeof(t->reserved)];
    uint64_t ts = le64_to_cpu(t->timestamp);
    uint64_t now = clock_read(f, 0);

    PFZ_CHECK(f, !memcmp(t->reserved, zero, sizeof(zero)),
              "CQ %d: reserved bytes of a timestamped CQE set", side + 1);
    PFZ_CHECK(f, ts <= now, "CQ %d: timestamp %" PRIu64 " after the clock %"
              PRIu64, side + 1, ts, now);
    PFZ_CHECK(f, f->disturbed || ts >= f->cq_time[side],
              "CQ %d: timestamp %" PRIu64 " before the previous %" PRIu64,
              side + 1, ts, f->cq_time[side]);
    f->cq_time[side] = ts;
}

/* Every CQE the device wrote since the last check is well-formed. */
static void check_cqs(PfnicFuzz *f)
{
    for (int side = 0; side < SIDES; side++) {
        for (int i = 0; i < CQ_SIZE; i++) {
            uint32_t n = f->cq_seen[side];
            PfnicCqeTs t;
            PfnicCqe c;
            bool ud;

            qtest_memread(f->qts, cqe_addr(f, side, n), &t,
                          f->cqe_size[side]);
            c = t.cqe;
            if (c.owner != (((n / CQ_SIZE) & 1) ^ 1)) {
                break;
            }
            if (f->cqe_size[side] == PFNIC_CQE_TS_SIZE) {
                check_cqe_time(f, side, &t);
            }
            PFZ_CHECK(f, n - f->cq_cons[side] < CQ_SIZE,
                      "CQ %d: CQE %u overwrote an unconsumed one (cons %u)",
                      side + 1, n, f->cq_cons[side]);
            PFZ_CHECK(f, wc_status_known(c.status), "CQ %d: status %u",
                      side + 1, c.status);
            PFZ_CHECK(f, wc_opcode_known(c.opcode), "CQ %d: opcode %u",
                      side + 1, c.opcode);
            /* ABI 1.19: a UD receive has a GRH */
            ud = f->wire && le32_to_cpu(c.qp_num) == UD_QPN;
            PFZ_CHECK(f, !(c.wc_flags & ~(PFNIC_WC_WITH_IMM |
                                          PFNIC_WC_WITH_INV |
                                          (ud ? PFNIC_WC_GRH : 0))),
                      "CQ %d: wc_flags %x", side + 1, c.wc_flags);
            if (!f->disturbed) {
                uint32_t q = le32_to_cpu(c.qp_num) - 2;

                PFZ_CHECK(f, (q < QPS && qp_side(q) == side) ||
                             (ud && side == 0),
                          "CQ %d: CQE of QP %u", side + 1,
                          le32_to_cpu(c.qp_num));
                PFZ_CHECK(f, (le64_to_cpu(c.wr_id) & ~0xffffffffULL) ==
                             WR_MAGIC, "CQ %d: wr_id %" PRIx64 " never posted",
                          side + 1, le64_to_cpu(c.wr_id));
                PFZ_CHECK(f, c.status != PFNIC_WC_SUCCESS ||
                             le32_to_cpu(c.byte_len) <=
                             PFNIC_MAX_SGE * MAX_XFER,
                          "CQ %d: byte_len %u", side + 1,
                          le32_to_cpu(c.byte_len));
            }
            f->cq_seen[side] = n + 1;
        }
    }
}

/*
 * Descriptors complete with a defined status, or not at all. Each ring is
 * read in one qtest command: this runs after every operation, and a read
 * per descriptor was most of a make test run's qtest messages.
 */
static void check_rings(PfnicFuzz *f)
{
    PfnicDesc ring[RING_SIZE];

    QEMU_BUILD_BUG_ON(sizeof(PfnicDesc) != PFNIC_DESC_SIZE);
    for (int r = 0; r < RINGS && !f->disturbed; r++) {
        qtest_memread(f->qts, RING(r), ring, sizeof(ring));
        for (int i = 0; i < RING_SIZE; i++) {
            uint32_t st = le32_to_cpu(ring[i].status);

            PFZ_CHECK(f, st == 0 || (st & ~0xffu) == PFNIC_DESC_DONE,
                      "ring %d slot %d: status %x", r + 1, i, st);
            PFZ_CHECK(f, st == 0 || ((st & 0xff) >= PFNIC_ST_SUCCESS &&
                                     (st & 0xff) <= PFNIC_ST_PROTECTION),
                      "ring %d slot %d: status %x", r + 1, i, st);
        }
    }
}

static void check_contexts(PfnicFuzz *f)
{
    uint32_t status = reg_read(f, PFNIC_REG_STATUS);

    PFZ_CHECK(f, status & PFNIC_STATUS_READY, "STATUS %x not ready", status);
    for (int side = 0; side < RINGS; side++) {
        uint32_t st, head;
        bool on = side < SIDES || f->ctx3_pasid;

        reg_write(f, PFNIC_REG_CTX_SELECT, side + 1);
        st = reg_read(f, PFNIC_REG_CTX_STATUS);
        head = reg_read(f, PFNIC_REG_CTX_HEAD);
        /* NO_PASID (ABI 1.8): a context an input started without one */
        PFZ_CHECK(f, !(st & ~(PFNIC_CTX_STATUS_ACTIVE |
                              PFNIC_CTX_STATUS_WAITING |
                              PFNIC_CTX_STATUS_NO_PASID)),
                  "context %d: CTX_STATUS %x", side + 1, st);
        PFZ_CHECK(f, !(st & PFNIC_CTX_STATUS_NO_PASID) ||
                     (st & PFNIC_CTX_STATUS_ACTIVE),
                  "context %d: no PASID while stopped (%x)", side + 1, st);
        PFZ_CHECK(f, !(st & PFNIC_CTX_STATUS_WAITING) ||
                     (st & PFNIC_CTX_STATUS_ACTIVE),
                  "context %d: waits while stopped (%x)", side + 1, st);
        if (!f->disturbed) {
            PFZ_CHECK(f, !(st & PFNIC_CTX_STATUS_ACTIVE) == !on,
                      "context %d: CTX_STATUS %x, enabled %d", side + 1, st,
                      on);
            PFZ_CHECK(f, !(status & PFNIC_STATUS_ERROR),
                      "STATUS.ERROR from a well-formed input");
            PFZ_CHECK(f, ((f->ring_tail[side] - head) & 0xffff) <= RING_SIZE,
                      "context %d: head %u past tail %u", side + 1, head,
                      f->ring_tail[side]);
        }
    }
}

/*
 * The page request queue holds the device's requests only: its RID, one
 * of its contexts' PASIDs, and never more pages waiting for a response
 * than the PRI allocation.
 */
static void check_prq(PfnicFuzz *f)
{
    uint64_t head = dmar_read64(f, DMAR_PQH_REG);
    uint64_t tail = dmar_read64(f, DMAR_PQT_REG);
    uint32_t fsts = dmar_read32(f, DMAR_FSTS_REG);

    PFZ_CHECK(f, !(tail % 32) && tail < PRQ_ENTRIES * 32, "PQT %" PRIx64,
              tail);
    /* Every request in the queue is unanswered: the harness answers all. */
    PFZ_CHECK(f, f->disturbed || f->bogus_response ||
                 ((tail - head) / 32) % PRQ_ENTRIES <= PRI_ALLOC,
              "%" PRIu64 " page requests outstanding, allocation %d",
              ((tail - head) / 32) % PRQ_ENTRIES, PRI_ALLOC);
    PFZ_CHECK(f, f->iq_error_ok || !(fsts & VTD_FSTS_IQE),
              "invalidation queue error (FSTS %x) from well-formed "
              "descriptors", fsts);
    /*
     * Rings pass through and translation requests do not record the
     * faults a page request resolves (patch 0003): a correct driver and
     * OS cause no recorded fault at all.
     */
    PFZ_CHECK(f, f->disturbed || !(fsts & (VTD_FSTS_PPF | VTD_FSTS_PFO)),
              "DMAR fault recorded (FSTS %x) from a well-formed input", fsts);
    for (uint64_t h = head % (PRQ_ENTRIES * 32); h != tail && !f->prq_moved;
         h = (h + 32) % (PRQ_ENTRIES * 32)) {
        uint64_t lo = mem_read64(f, PRQ_BASE + h);
        uint32_t pasid = (lo >> 32) & 0xfffff;

        PFZ_CHECK(f, (lo & 0xff) == VTD_PRD_TYPE &&
                     ((lo >> 16) & 0xffff) == NIC_SID && (lo & VTD_PRD_PP(1)),
                  "PRQ entry %" PRIx64 ": %" PRIx64, h, lo);
        PFZ_CHECK(f, f->disturbed || pasid == pasids[0] || pasid == pasids[1],
                  "PRQ entry in PASID %u", pasid);
    }
}

static void check_all(PfnicFuzz *f)
{
    check_cqs(f);
    check_rings(f);
    check_contexts(f);
    check_prq(f);
    if (f->wire) {
        wire_check(f, false);
    }
}

/* --- page requests ------------------------------------------------------ */

static void map_page(PfnicFuzz *f, int side, uint32_t vpage, uint64_t pa,
                     uint64_t flags)
{
    if (vpage % VA_PAGES >= VA_PT_PAGES) {
        uint64_t pde = fl_table(side, 2) + PD_LARGE * 8;

        /* The large page holds every page of the second 2 MiB. */
        mem_write64(f, pde, flags ? LARGE_PAGE | VTD_PT_PAGE_SIZE_MASK | flags
                                  : 0);
        return;
    }
    mem_write64(f, pte_addr(side, vpage), flags ? pa | flags : 0);
}

static int side_of_pasid(uint32_t pasid)
{
    for (int side = 0; side < SIDES; side++) {
        if (pasids[side] == pasid) {
            return side;
        }
    }
    return -1;
}

/*
 * Answer every page request group in the queue with @code (0 success, 1
 * invalid request, 15 failure); with @serve, first map each requested
 * page of the harness's VA range writable, as Linux's fault handler does,
 * and answer INVALID for addresses outside it.
 */
static void prq_answer(PfnicFuzz *f, bool serve, uint32_t code)
{
    uint64_t head = dmar_read64(f, DMAR_PQH_REG);
    uint64_t tail = dmar_read64(f, DMAR_PQT_REG);
    bool bad_group = false;

    for (int i = 0; i < PRQ_ENTRIES && head != tail; i++) {
        uint64_t lo = mem_read64(f, PRQ_BASE + head);
        uint64_t hi = mem_read64(f, PRQ_BASE + head + 8);
        uint32_t pasid = (lo >> 32) & 0xfffff;
        uint64_t va = hi & ~0xfffULL;
        int side = side_of_pasid(pasid);
        uint32_t rc = code;

        if (serve) {
            if (side >= 0 && va >= VA_BASE && va < va_of(VA_PAGES - 1) + 4096) {
                uint32_t vpage = (va - VA_BASE) / 4096;

                map_page(f, side, vpage, pool_page(vpage * 7 + side),
                         VTD_FL_P | VTD_FL_RW | VTD_FL_US);
                invalidate_page(f, side, va, false);
            } else {
                bad_group = true;
            }
        }
        if (hi & VTD_PRD_LPIG(1)) {
            if (serve && bad_group) {
                rc = 1;
            }
            iq_submit(f, VTD_INV_DESC_PGRESP | (1ULL << 4) |
                         ((uint64_t)rc << 12) | ((uint64_t)NIC_SID << 16) |
                         ((uint64_t)pasid << 32),
                      hi & (0x1ffULL << 3));
            bad_group = false;
        }
        head = (head + 32) % (PRQ_ENTRIES * 32);
    }
    dmar_write64(f, DMAR_PQH_REG, head);
    qtest_writel(f->qts, DMAR + DMAR_PRS_REG, VTD_PR_STATUS_PPR |
                 VTD_PR_STATUS_PRO);
    flush(f);
}

/* --- operations ---------------------------------------------------------- */

/*
 * The first OP_WELL_FORMED operations are what a correct driver and OS do
 * (with bad keys and addresses from the process); the rest misprogram the
 * device or the IOMMU. An input whose first byte is odd uses only the
 * former, so that the checks of a well-formed run apply to all of it.
 */
enum {
    OP_WQE,
    OP_RECV,
    OP_DESC,
    OP_MAP,
    OP_INVALIDATE,
    OP_PRQ,
    OP_CLOCK,
    OP_CQ_POLL,
    OP_CTX3,
    OP_WELL_FORMED,
    OP_PRQ_BOGUS = OP_WELL_FORMED,
    OP_BAR0,
    OP_BAR2,
    OP_CMD,
    OP_CTX,
    OP_RESET,
    OP_IOMMU_REG,
    OP_PCI_CFG,
    OP_COUNT,
};

/*
 * Whether a queue of @size with the device at @head has room past @tail.
 * A driver never posts into a full queue (the device refuses the doorbell
 * as a guest error); an input that is not well-formed may, and is then
 * disturbed.
 */
static bool room(PfnicFuzz *f, uint32_t tail, uint32_t head, uint32_t size)
{
    if (((tail - head) & 0xffff) < size) {
        return true;
    }
    if (f->well_formed) {
        return false;
    }
    f->disturbed = true;
    return true;
}

/*
 * Post @w on a work queue, if a driver would: its ring at @ring, its head
 * (the send head, or with @rq the receive head) in the record at @rec, its
 * tail in *@tail; the doorbell of QP @qpn on context @ctx's page.
 */
static void wq_post(PfnicFuzz *f, uint32_t *tail, uint64_t ring, uint64_t rec,
                    uint32_t ctx, uint32_t qpn, bool rq, const PfnicWqe *w)
{
    if (!room(f, *tail, qtest_readl(f->qts, rec + (rq ? 4 : 0)),
              QUEUE_SIZE)) {
        return;
    }
    qtest_memwrite(f->qts, ring + (*tail % QUEUE_SIZE) * PFNIC_WQE_SIZE, w,
                   sizeof(*w));
    (*tail)++;
    qtest_writel(f->qts, BAR2 + ctx * PFNIC_DOORBELL_PAGE_SIZE +
                 (rq ? PFNIC_DB_RQ : PFNIC_DB_SQ), qpn << 16 |
                 (*tail & 0xffff));
}

/* Post @w on QP @q's receive (@rq) or send queue, if a driver would. */
static void qp_post(PfnicFuzz *f, int q, bool rq, const PfnicWqe *w)
{
    wq_post(f, rq ? &f->rq_tail[q] : &f->sq_tail[q], rq ? RQ(q) : SQ(q),
            QP_REC(q), qp_side(q) + 1, q + 2, rq, w);
}

static uint32_t pick_key(PfnicFuzz *f, int side, uint8_t sel)
{
    switch (sel % 8) {
    case 0:
        return f->key[side ^ 1];        /* the other context's key */
    case 1:
        return U32(f);                  /* a guess */
    case 7:
        return f->dm_key[side];         /* its DM MR's (ABI 1.13) */
    default:
        return f->key[side];
    }
}

/* An address in the harness's VA range (mostly), or anywhere. */
static uint64_t pick_addr(PfnicFuzz *f)
{
    uint16_t page = U16(f);
    uint16_t off = U16(f);

    if (page & 0x8000) {
        return U64(f);
    }
    return va_of(page) + (off % 4096);
}

/*
 * A DM MR's addresses are zero-based (ABI 1.13): with one of their keys,
 * @addr mostly lands inside the MR (a 64-bit one stays as it is).
 */
static uint64_t dm_addr(PfnicFuzz *f, uint32_t key, uint64_t addr)
{
    if ((key == f->dm_key[0] || key == f->dm_key[1]) &&
        addr >= VA_BASE && addr < VA_BASE + VA_PAGES * 4096ULL) {
        return addr % DM_MR_LEN;
    }
    return addr;
}

/* @n scatter/gather entries of a work request of @side's QP */
static void fill_sges(PfnicFuzz *f, PfnicWqe *w, int n, int side)
{
    for (int i = 0; i < MIN(n, PFNIC_MAX_SGE); i++) {
        uint64_t addr = pick_addr(f);
        uint32_t key;

        w->sge[i].length = cpu_to_le32(U16(f) % (MAX_XFER + 1));
        key = pick_key(f, side, U8(f));
        w->sge[i].addr = cpu_to_le64(dm_addr(f, key, addr));
        w->sge[i].lkey = cpu_to_le32(key);
    }
}

/*
 * The send opcodes a work request takes, and one that is none (8);
 * LOCAL_INV, SEND_WITH_INV and REG_MR (ABI 1.21) of keys that name no
 * FAST MR here
 */
static const uint8_t wqe_opcodes[] = {
    PFNIC_WR_RDMA_WRITE, PFNIC_WR_RDMA_WRITE_WITH_IMM, PFNIC_WR_SEND,
    PFNIC_WR_SEND_WITH_IMM, PFNIC_WR_RDMA_READ, PFNIC_WR_ATOMIC_CMP_AND_SWP,
    PFNIC_WR_ATOMIC_FETCH_AND_ADD, PFNIC_WR_LOCAL_INV, 8, PFNIC_WR_REG_MR,
    PFNIC_WR_SEND_WITH_INV,
};

static void op_wqe(PfnicFuzz *f)
{
    uint8_t sel = U8(f), opc = U8(f), flags = U8(f), nsge = U8(f);
    int q = sel & 3, side = qp_side(q);
    PfnicWqe w = {
        .opcode = wqe_opcodes[opc % ARRAY_SIZE(wqe_opcodes)],
        .flags = (flags & 0x80) ? flags : (flags & PFNIC_SEND_FLAGS_MASK) |
                                          PFNIC_SEND_SIGNALED,
        .num_sge = (nsge & 0x80) ? nsge : nsge % (PFNIC_MAX_SGE + 1),
        .imm_data = 0x12345678,
        .wr_id = cpu_to_le64(WR_MAGIC | f->wr_seq++),
    };
    w.remote_addr = pick_addr(f);
    w.rkey = pick_key(f, qp_side(q ^ 1), sel >> 2);
    w.remote_addr = cpu_to_le64(dm_addr(f, w.rkey, w.remote_addr));
    w.rkey = cpu_to_le32(w.rkey);
    w.compare_add = cpu_to_le64(U8(f));
    w.swap = cpu_to_le64(U8(f));
    fill_sges(f, &w, w.num_sge, side);
    if ((w.opcode == PFNIC_WR_ATOMIC_CMP_AND_SWP ||
         w.opcode == PFNIC_WR_ATOMIC_FETCH_AND_ADD) && (sel & 0x40)) {
        /* What a well-formed atomic looks like, so that some succeed. */
        w.num_sge = 1;
        w.sge[0].length = cpu_to_le32(8);
        w.sge[0].addr = cpu_to_le64(le64_to_cpu(w.sge[0].addr) & ~7ULL);
        w.remote_addr = cpu_to_le64(le64_to_cpu(w.remote_addr) & ~7ULL);
    }
    if ((w.opcode == PFNIC_WR_LOCAL_INV || w.opcode == PFNIC_WR_REG_MR ||
         w.opcode == PFNIC_WR_SEND_WITH_INV) && (sel & 0x40)) {
        /* As a driver posts them: a key to invalidate, local ones no SGE */
        w.num_sge = w.opcode == PFNIC_WR_SEND_WITH_INV ? w.num_sge : 0;
        w.imm_data = w.rkey;
    }
    qp_post(f, q, false, &w);
}

static void op_recv(PfnicFuzz *f)
{
    uint8_t sel = U8(f), nsge = U8(f);
    int q = sel & 3, side = qp_side(q);
    PfnicWqe w = {
        .num_sge = nsge % (PFNIC_MAX_SGE + 1),
        .wr_id = cpu_to_le64(WR_MAGIC | f->wr_seq++),
    };
    fill_sges(f, &w, w.num_sge, side);
    qp_post(f, q, true, &w);
}

static void op_desc(PfnicFuzz *f)
{
    uint8_t sel = U8(f), opc = U8(f), flags = U8(f);
    int side = sel & 1;
    int r = (sel & 2) && f->ctx3_pasid ? 2 : side;
    uint32_t slot = f->ring_tail[r] % RING_SIZE;
    PfnicDesc d = {
        .opcode = opc % 6,
        .flags = flags & 0x83,
        .dst = cpu_to_le64(pick_addr(f)),
        .len = cpu_to_le64((uint64_t)U16(f) << ((sel >> 5) % 4)),
        .pattern = cpu_to_le64(U64(f)),
    };

    if (d.opcode == PFNIC_OP_PREFETCH) {
        d.src = pick_key(f, side, sel >> 1);
        d.dst = cpu_to_le64(dm_addr(f, d.src, le64_to_cpu(d.dst)));
        d.src = cpu_to_le64(d.src);
    } else {
        d.src = cpu_to_le64(pick_addr(f));
    }
    reg_write(f, PFNIC_REG_CTX_SELECT, r + 1);
    if (!room(f, f->ring_tail[r], reg_read(f, PFNIC_REG_CTX_HEAD), RING_SIZE)) {
        return;
    }
    qtest_memwrite(f->qts, RING(r) + slot * PFNIC_DESC_SIZE, &d, sizeof(d));
    f->ring_tail[r]++;
    reg_write(f, PFNIC_REG_RING_DB, (r + 1) << 16 | (f->ring_tail[r] & 0xffff));
}

static void op_map(PfnicFuzz *f)
{
    uint8_t sel = U8(f);
    uint16_t vpage = U16(f) % VA_PAGES;
    uint8_t ppage = U8(f);
    int side = sel & 1;
    static const uint64_t perms[4] = {
        0,                                      /* not present */
        VTD_FL_P | VTD_FL_US,                   /* read-only */
        VTD_FL_P | VTD_FL_RW | VTD_FL_US,       /* read-write */
        VTD_FL_P | VTD_FL_RW,                   /* supervisor only */
    };

    map_page(f, side, vpage, pool_page(ppage), perms[(sel >> 1) & 3]);
    /* Mostly what Linux sends; sometimes nothing, or no device-TLB flush. */
    if (!(sel & 0x08)) {
        invalidate_page(f, side, va_of(vpage), !(sel & 0x10));
    }
}

static void op_invalidate(PfnicFuzz *f)
{
    uint8_t kind = U8(f);
    uint64_t addr = U64(f);
    uint32_t pasid = (kind & 0x80) ? U32(f) & 0xfffff : pasids[kind & 1];
    uint16_t sid = (kind & 0x40) ? U16(f) : NIC_SID;

    switch ((kind >> 1) % (f->well_formed ? 6 : 7)) {
    case 0:     /* PASID-based IOTLB, page selective */
        /* Any AM: above MAMV it invalidates the whole PASID (patch 0005). */
        iq_submit(f, VTD_INV_DESC_PIOTLB | VTD_INV_DESC_PIOTLB_PSI_IN_PASID |
                     ((uint64_t)((kind & 1) + 2) << 16) |
                     ((uint64_t)pasid << 32), addr & ~0xf80ULL);
        break;
    case 1:     /* PASID-based IOTLB, all of a PASID */
        iq_submit(f, VTD_INV_DESC_PIOTLB | VTD_INV_DESC_PIOTLB_ALL_IN_PASID |
                     ((uint64_t)((kind & 1) + 2) << 16) |
                     ((uint64_t)pasid << 32), 0);
        break;
    case 2:     /* PASID-based device-TLB, with size and global bits */
        iq_submit(f, VTD_INV_DESC_DEV_PIOTLB | ((uint64_t)sid << 16) |
                     ((uint64_t)pasid << 32), addr & ~0x7feULL);
        break;
    case 3:     /* device-TLB without PASID */
        iq_submit(f, VTD_INV_DESC_DEVICE | ((uint64_t)sid << 32),
                  addr & ~0xffeULL);
        break;
    case 4: {   /* PASID cache: domain, PASID or global (2 is reserved) */
        static const uint64_t granularity[3] = { 0, 1, 3 };

        iq_submit(f, VTD_INV_DESC_PC | granularity[addr % 3] << 4 |
                     ((uint64_t)((kind & 1) + 2) << 16) |
                     ((uint64_t)pasid << 32), 0);
        break;
    }
    case 5:     /* wait, with status write and page-request drain */
        iq_submit(f, VTD_INV_DESC_WAIT | VTD_INV_DESC_WAIT_SW |
                     VTD_INV_DESC_WAIT_PD | (1ULL << 32), WAIT_STATUS);
        PFZ_CHECK(f, qtest_readl(f->qts, WAIT_STATUS) == 1 || f->iq_error_ok,
                  "wait descriptor not completed");
        qtest_writel(f->qts, WAIT_STATUS, 0);
        break;
    default:    /* raw: anything, including reserved bits */
        f->iq_error_ok = true;
        f->disturbed = true;
        iq_submit(f, addr, U64(f));
        /* An error stops the queue; the harness restarts it. */
        qtest_writel(f->qts, DMAR + DMAR_FSTS_REG, VTD_FSTS_IQE);
        break;
    }
}

static void op_prq_bogus(PfnicFuzz *f)
{
    uint8_t sel = U8(f);
    uint16_t prgi = U16(f) & 0x1ff;
    uint32_t pasid = (sel & 1) ? U32(f) & 0xfffff : pasids[(sel >> 1) & 1];
    uint16_t rid = (sel & 4) ? U16(f) : NIC_SID;
    uint32_t rc = (sel >> 3) & 0xf;

    /* A response for a group nobody asked for, or someone else's. */
    f->bogus_response = true;
    iq_submit(f, VTD_INV_DESC_PGRESP | (1ULL << 4) | ((uint64_t)rc << 12) |
                 ((uint64_t)rid << 16) | ((uint64_t)pasid << 32),
              (uint64_t)prgi << 3);
}

static void op_cq_poll(PfnicFuzz *f)
{
    uint8_t sel = U8(f);
    int side = sel & 1;

    check_cqs(f);
    f->cq_cons[side] = f->cq_seen[side];
    qtest_writel(f->qts, CQ_REC(side), f->cq_cons[side]);
    if (sel & 2) {
        qtest_writel(f->qts, BAR2 + (side + 1) * PFNIC_DOORBELL_PAGE_SIZE +
                     PFNIC_DB_CQ_ARM, (side + 1) << 16 | ((sel >> 2) & 1));
    }
}

/*
 * Post receive WQEs on SRQ @srqn (ABI 1.11) of @side's context, from the
 * tail the device has, and ring its SRQ_DB: with that tail, or (rarely) a
 * random one, which the device must ignore when it is past the queue or
 * moves back. Nothing happens when the SRQ does not exist. @srqn < SRQS.
 */
static void srq_post(PfnicFuzz *f, uint32_t srqn, int side)
{
    uint32_t a[PFNIC_CMD_ARGS] = { srqn };
    uint8_t sel = U8(f);
    uint32_t n = sel % (QUEUE_SIZE + 1);
    uint16_t tail;

    if (cmd(f, PFNIC_CMD_SRQ_QUERY, a, 1) != PFNIC_CMD_OK) {
        return;
    }
    tail = a[2];
    for (uint32_t i = 0; i < n; i++) {
        PfnicWqe w = {
            .num_sge = U8(f) % (PFNIC_MAX_SGE + 1),
            .wr_id = cpu_to_le64(WR_MAGIC | f->wr_seq++),
        };

        fill_sges(f, &w, w.num_sge, side);
        qtest_memwrite(f->qts, SRQ_RING(srqn) +
                       ((tail + i) % QUEUE_SIZE) * PFNIC_WQE_SIZE, &w,
                       sizeof(w));
    }
    tail = (sel & 0x80) ? U16(f) : (uint16_t)(tail + n);
    qtest_writel(f->qts, BAR2 + (side + 1) * PFNIC_DOORBELL_PAGE_SIZE +
                 PFNIC_DB_SRQ, srqn << 16 | tail);
}

/* SRQ_CREATE of SRQ @srqn < SRQS, of @side's context, in our memory */
static void srq_create(PfnicFuzz *f, uint32_t srqn, int side)
{
    uint32_t a[PFNIC_CMD_ARGS] = {
        srqn, side + 1, 7, SRQ_RING(srqn), 0, QUEUE_LOG2, SRQ_REC(srqn), 0,
    };

    cmd(f, PFNIC_CMD_SRQ_CREATE, a, PFNIC_CMD_ARGS);
}

/*
 * Make the harness's QP 5 (context 1) take its receive WQEs from SRQ
 * @srqn < SRQS (ABI 1.11; created if it does not exist): destroyed,
 * created again with the SRQ and connected to QP 4, which is connected
 * again to it (a QP created later at the number of its peer is not its
 * peer until then); then WQEs posted on the SRQ. Each step may fail in a
 * device the input has misprogrammed; the next ones are tried anyway.
 */
static void srq_attach(PfnicFuzz *f, uint32_t srqn)
{
    const int q = 3;
    uint32_t a[PFNIC_CMD_ARGS] = {
        q + 2, 1, 7, 1, 1, SQ(q), 0, QUEUE_LOG2, 0, 0, 0, QP_REC(q), 0,
        PFNIC_QP_FLAG_SRQ, srqn,
    };
    uint32_t d[PFNIC_CMD_ARGS] = { q + 2 };

    srq_create(f, srqn, 0);
    cmd(f, PFNIC_CMD_QP_DESTROY, d, 1);
    cmd(f, PFNIC_CMD_QP_CREATE, a, PFNIC_CMD_ARGS);
    f->sq_tail[q] = f->rq_tail[q] = 0;
    for (uint32_t state = PFNIC_QPS_INIT; state <= PFNIC_QPS_RTS; state++) {
        uint32_t m[PFNIC_CMD_ARGS] = {
            q + 2, state, PFNIC_ACCESS_REMOTE_WRITE |
            PFNIC_ACCESS_REMOTE_READ | PFNIC_ACCESS_REMOTE_ATOMIC, q + 1, 1,
            3, 7, [11] = LOOP_TIMEOUT,
        };

        cmd(f, PFNIC_CMD_QP_MODIFY, m, PFNIC_CMD_ARGS);
    }
    for (int i = 0; i < 2; i++) {
        uint32_t m[PFNIC_CMD_ARGS] = {
            q + 1, PFNIC_QPS_RTS, PFNIC_ACCESS_REMOTE_WRITE |
            PFNIC_ACCESS_REMOTE_READ | PFNIC_ACCESS_REMOTE_ATOMIC,
            i ? q + 2 : UINT32_MAX, 1, 3, 7, [11] = LOOP_TIMEOUT,
        };

        cmd(f, PFNIC_CMD_QP_MODIFY, m, PFNIC_CMD_ARGS);
    }
    srq_post(f, srqn, 0);
}

static void op_cmd(PfnicFuzz *f)
{
    static const uint32_t ops[] = {
        PFNIC_CMD_MR_SET, PFNIC_CMD_MR_CLEAR, PFNIC_CMD_MR_QUERY,
        PFNIC_CMD_CQ_CREATE, PFNIC_CMD_CQ_DESTROY, PFNIC_CMD_QP_CREATE,
        PFNIC_CMD_QP_MODIFY, PFNIC_CMD_QP_QUERY, PFNIC_CMD_QP_DESTROY,
        PFNIC_CMD_CTX_QUERY, PFNIC_CMD_BACKUP_SET, PFNIC_CMD_MTT_WRITE,
        PFNIC_CMD_MTT_INVALIDATE, PFNIC_CMD_FAULT_RESUME,
        PFNIC_CMD_SRQ_CREATE, PFNIC_CMD_SRQ_MODIFY, PFNIC_CMD_SRQ_QUERY,
        PFNIC_CMD_SRQ_DESTROY,
    };
    int side = 0;
    uint32_t srqn;
    uint8_t sel = U8(f);
    uint32_t op = ops[sel % ARRAY_SIZE(ops)];
    uint32_t a[PFNIC_CMD_ARGS];

    for (int i = 0; i < PFNIC_CMD_ARGS; i++) {
        /* Small numbers name the harness's objects. */
        a[i] = (sel & 0x80) ? U32(f) : U8(f) % 8;
    }
    if (sel & 0x40) {
        /*
         * Shapes random arguments rarely take (ABI 1.10): the implicit MR
         * with a table, and entries from guest memory at 64-bit indexes
         * (the high word of the index is then small, or random).
         */
        uint32_t hi = U8(f) & 1 ? U32(f) : U8(f);

        switch (op) {
        case PFNIC_CMD_MR_SET:
            a[4] = a[5] = 0;
            a[6] = a[7] = UINT32_MAX;
            a[8] = PFNIC_MR_FLAG_TABLE | (U8(f) & 1 ? PFNIC_MR_FLAG_FAULT : 0);
            break;
        case PFNIC_CMD_MTT_WRITE:
            a[2] = a[2] % PFNIC_MTT_WRITE_MAX + 1;
            for (uint32_t i = 0; i < a[2]; i++) {
                uint64_t page = POOL + (U8(f) % POOL_PAGES) * 0x1000ULL;

                mem_write64(f, MTT_SRC + 8 * i,
                            page | PFNIC_MTT_VALID | (U8(f) & 6));
            }
            a[3] = MTT_SRC;
            a[4] = 0;
            a[5] = hi;
            break;
        case PFNIC_CMD_MTT_INVALIDATE:
            a[3] = hi;
            break;
        case PFNIC_CMD_FAULT_RESUME:
            a[3] &= 1;
            a[4] = hi;
            break;
        /*
         * ABI 1.11: an SRQ of a side's context (PD 7, as its MR) in the
         * harness's memory, then WQEs posted on it; QP 5 taking from
         * one; a limit in range, then WQEs posted.
         */
        case PFNIC_CMD_SRQ_CREATE:
            side = hi & 1;
            f->disturbed = true;
            srq_create(f, a[0] % SRQS, side);
            srq_post(f, a[0] % SRQS, side);
            return;
        case PFNIC_CMD_QP_CREATE:
            f->disturbed = true;
            srq_attach(f, a[14] % SRQS);
            return;
        case PFNIC_CMD_SRQ_MODIFY:
            side = hi & 1;
            a[0] %= SRQS;
            a[1] %= QUEUE_SIZE + 1;
            break;
        }
    }
    if (op != PFNIC_CMD_MR_QUERY && op != PFNIC_CMD_QP_QUERY &&
        op != PFNIC_CMD_CTX_QUERY && op != PFNIC_CMD_SRQ_QUERY) {
        f->disturbed = true;
    }
    srqn = a[0];
    cmd(f, op, a, PFNIC_CMD_ARGS);
    if ((sel & 0x40) && op == PFNIC_CMD_SRQ_MODIFY) {
        srq_post(f, srqn, side);
    }
}

/*
 * Start context 3 in the PASID of context 1 or 2 (a second open by the
 * same process), or stop it: the others must go on getting their page
 * responses, and a stopped context must read stopped at once.
 */
static void op_ctx3(PfnicFuzz *f)
{
    uint8_t sel = U8(f);

    reg_write(f, PFNIC_REG_CTX_SELECT, 3);
    if (f->ctx3_pasid) {
        reg_write(f, PFNIC_REG_CTX_CTRL, 0);
        PFZ_CHECK(f, reg_read(f, PFNIC_REG_CTX_STATUS) == 0,
                  "context 3 stopped: CTX_STATUS %x",
                  reg_read(f, PFNIC_REG_CTX_STATUS));
        f->ctx3_pasid = 0;
        return;
    }
    f->ctx3_pasid = pasids[sel & 1];
    mem_zero(f, RING(2), RING_SIZE * PFNIC_DESC_SIZE);
    f->ring_tail[2] = 0;
    reg_write(f, PFNIC_REG_CTX_RING_LO, RING(2));
    reg_write(f, PFNIC_REG_CTX_RING_HI, 0);
    reg_write(f, PFNIC_REG_CTX_RING_SIZE, RING_SIZE);
    reg_write(f, PFNIC_REG_CTX_PASID, f->ctx3_pasid);
    reg_write(f, PFNIC_REG_CTX_CTRL, PFNIC_CTX_CTRL_ENABLE);
}

/* What the OS may do to the capabilities under a running device. */
static void op_pci_cfg(PfnicFuzz *f)
{
    uint8_t sel = U8(f);
    uint32_t val = U32(f);

    f->disturbed = true;
    switch (sel % 5) {
    case 0:
        cfg_writew(f, f->ats_off + PCI_ATS_CTRL, val);
        break;
    case 1:
        cfg_writew(f, f->pasid_off + PCI_PASID_CTRL, val);
        break;
    case 2:
        cfg_writew(f, f->pri_off + PCI_PRI_CTRL, val);
        break;
    case 3:     /* a new allocation: PRI off, then on again */
        cfg_writew(f, f->pri_off + PCI_PRI_CTRL, 0);
        qpci_config_writel(&f->nic.dev, f->pri_off + PCI_PRI_ALLOC_REQ,
                           val);
        cfg_writew(f, f->pri_off + PCI_PRI_CTRL, PCI_PRI_CTRL_ENABLE);
        break;
    default:    /* bus master on or off (BAR0 stays decoded) */
        cfg_writew(f, PCI_COMMAND, val | PCI_COMMAND_MEMORY);
        break;
    }
}

static void op_ctx(PfnicFuzz *f)
{
    uint8_t sel = U8(f);
    int side = sel & 1;

    f->disturbed = true;
    reg_write(f, PFNIC_REG_CTX_SELECT, side + 1);
    reg_write(f, PFNIC_REG_CTX_CTRL, (sel >> 1) & 1);
    if ((sel >> 1) & 1) {
        f->ring_tail[side] = 0;
    }
}

static void op_reset(PfnicFuzz *f)
{
    uint8_t sel = U8(f);

    reg_write(f, PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    PFZ_CHECK(f, reg_read(f, PFNIC_REG_STATUS) == PFNIC_STATUS_READY,
              "after reset: STATUS %x", reg_read(f, PFNIC_REG_STATUS));
    for (int side = 0; side < SIDES; side++) {
        reg_write(f, PFNIC_REG_CTX_SELECT, side + 1);
        PFZ_CHECK(f, reg_read(f, PFNIC_REG_CTX_STATUS) == 0,
                  "after reset: context %d status %x", side + 1,
                  reg_read(f, PFNIC_REG_CTX_STATUS));
    }
    /* ABI 1.13: a reset zeroes the device memory (the DM MRs' ends). */
    for (uint64_t off = 0; off < SIDES * DM_MR_LEN; off += DM_MR_LEN / 2) {
        PFZ_CHECK(f, qtest_readq(f->qts, BAR1 + off) == 0 &&
                     qtest_readq(f->qts, BAR1 + off + DM_MR_LEN / 2 - 8) == 0,
                  "after reset: device memory at 0x%" PRIx64 " not zero",
                  off);
    }
    if (sel & 1) {
        /*
         * The device set up again, rings and CQs from 0, the CQs with
         * TIMESTAMP or not as bits 2:1 say.
         */
        mem_zero(f, RING(0), SCRATCH_END - RING(0));
        enable_caps(f);
        setup_device(f, (sel >> 1) & 3);
    } else {
        f->disturbed = true;
    }
}

static void op_iommu_reg(PfnicFuzz *f)
{
    uint8_t sel = U8(f);
    uint32_t val = U32(f);

    switch (sel % 3) {
    case 0:     /* page request status: write 1 to clear */
        qtest_writel(f->qts, DMAR + DMAR_PRS_REG, val);
        break;
    case 1:     /* the queue's head, anywhere */
        dmar_write64(f, DMAR_PQH_REG, (val % PRQ_ENTRIES) * 32);
        f->disturbed = f->prq_moved = true;
        break;
    default:    /* fault status: write 1 to clear */
        qtest_writel(f->qts, DMAR + DMAR_FSTS_REG, val);
        break;
    }
}

/* --- the wire (pfnic-wire) ----------------------------------------------- */

static const uint8_t wire_mac[6] = { 0x52, 0x54, 0x00, 0x00, 0x00, 0x0a };
static const uint8_t peer_mac[6] = { 0x52, 0x54, 0x00, 0x00, 0x00, 0x0b };
static const uint8_t bcast_mac[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

/* BTH opcodes (RC) and what each carries, as docs/wire.md has them */
enum {
    W_SEND_FIRST, W_SEND_MIDDLE, W_SEND_LAST, W_SEND_LAST_IMM, W_SEND_ONLY,
    W_SEND_ONLY_IMM, W_WRITE_FIRST, W_WRITE_MIDDLE, W_WRITE_LAST,
    W_WRITE_LAST_IMM, W_WRITE_ONLY, W_WRITE_ONLY_IMM, W_READ_REQUEST,
    W_READ_RESP_FIRST, W_READ_RESP_MIDDLE, W_READ_RESP_LAST,
    W_READ_RESP_ONLY, W_ACK, W_ATOMIC_ACK, W_CMP_SWAP, W_FETCH_ADD,
    W_RESERVED, W_SEND_LAST_INV, W_SEND_ONLY_INV, W_OP_NR
};

#define WH_RETH         (1u << 0)       /* 16 bytes */
#define WH_IMM          (1u << 1)       /* 4 */
#define WH_AETH         (1u << 2)       /* 4 */
#define WH_ATOMIC       (1u << 3)       /* 28 */
#define WH_ATOMICACK    (1u << 4)       /* 8 */
#define WH_PAYLOAD      (1u << 5)
#define WH_IETH         (1u << 6)       /* 4, ABI 1.21 */

static const uint8_t wire_hdrs[W_OP_NR] = {
    [W_SEND_FIRST] = WH_PAYLOAD, [W_SEND_MIDDLE] = WH_PAYLOAD,
    [W_SEND_LAST] = WH_PAYLOAD, [W_SEND_LAST_IMM] = WH_PAYLOAD | WH_IMM,
    [W_SEND_ONLY] = WH_PAYLOAD, [W_SEND_ONLY_IMM] = WH_PAYLOAD | WH_IMM,
    [W_WRITE_FIRST] = WH_PAYLOAD | WH_RETH, [W_WRITE_MIDDLE] = WH_PAYLOAD,
    [W_WRITE_LAST] = WH_PAYLOAD, [W_WRITE_LAST_IMM] = WH_PAYLOAD | WH_IMM,
    [W_WRITE_ONLY] = WH_PAYLOAD | WH_RETH,
    [W_WRITE_ONLY_IMM] = WH_PAYLOAD | WH_RETH | WH_IMM,
    [W_READ_REQUEST] = WH_RETH,
    [W_READ_RESP_FIRST] = WH_PAYLOAD | WH_AETH,
    [W_READ_RESP_MIDDLE] = WH_PAYLOAD,
    [W_READ_RESP_LAST] = WH_PAYLOAD | WH_AETH,
    [W_READ_RESP_ONLY] = WH_PAYLOAD | WH_AETH,
    [W_ACK] = WH_AETH, [W_ATOMIC_ACK] = WH_AETH | WH_ATOMICACK,
    [W_CMP_SWAP] = WH_ATOMIC, [W_FETCH_ADD] = WH_ATOMIC,
    [W_SEND_LAST_INV] = WH_PAYLOAD | WH_IETH,
    [W_SEND_ONLY_INV] = WH_PAYLOAD | WH_IETH,
};

static bool wire_is_response(uint8_t op)
{
    return op >= W_READ_RESP_FIRST && op <= W_ATOMIC_ACK;
}

/* The extended headers of @op, in bytes (what follows the BTH) */
static size_t wire_ext_len(uint8_t op)
{
    uint8_t h = op < W_OP_NR ? wire_hdrs[op] : 0;

    return (h & WH_RETH ? 16 : 0) + (h & WH_IMM ? 4 : 0) +
           (h & WH_AETH ? 4 : 0) + (h & WH_ATOMIC ? 28 : 0) +
           (h & WH_ATOMICACK ? 8 : 0) + (h & WH_IETH ? 4 : 0);
}

/* CRC-32 (IEEE, reflected), as zlib's crc32() computes it */
static uint32_t wire_crc32(uint32_t crc, const uint8_t *p, size_t n)
{
    static uint32_t table[256];

    if (!table[1]) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;

            for (int k = 0; k < 8; k++) {
                c = c & 1 ? 0xedb88320 ^ (c >> 1) : c >> 1;
            }
            table[i] = c;
        }
    }
    crc = ~crc;
    while (n--) {
        crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    }
    return ~crc;
}

/* The ICRC of a RoCEv2 frame of @len bytes (ICRC included; docs/wire.md) */
static uint32_t wire_icrc(const uint8_t *fr, size_t len)
{
    static const uint8_t ones[8] = {
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff
    };
    uint8_t h[20 + 8 + 12];
    uint32_t crc = wire_crc32(0, ones, sizeof(ones));

    memcpy(h, fr + 14, sizeof(h));
    h[1] = h[8] = h[10] = h[11] = 0xff;         /* TOS, TTL, checksum */
    h[26] = h[27] = 0xff;                       /* UDP checksum */
    h[32] = 0xff;                               /* BTH FECN, BECN */
    crc = wire_crc32(crc, h, sizeof(h));
    return wire_crc32(crc, fr + 14 + sizeof(h), len - 14 - sizeof(h) - 4);
}

static uint16_t wire_ip_csum(const uint8_t *p, size_t n)
{
    uint32_t sum = 0;

    for (size_t i = 0; i < n; i += 2) {
        sum += lduw_be_p(p + i);
    }
    while (sum >> 16) {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    return ~sum;
}

static uint32_t wire_counter(PfnicFuzz *f, int c)
{
    return reg_read(f, PFNIC_REG_PORT_COUNTERS + 4 * c);
}

static void wire_seen(PfnicFuzz *f, const uint8_t *fr, size_t n);

/*
 * Read what the port sent; with @seen, check it and answer ARP. A unix
 * datagram socket holds few datagrams (net.unix.max_dgram_qlen, 10): QEMU
 * keeps the rest in the netdev's queue until ours has room, so read until
 * a round after QEMU's main loop has run again finds nothing.
 */
static void wire_recv(PfnicFuzz *f, bool seen)
{
    uint8_t fr[WIRE_BUF];
    ssize_t n;

    for (int round = 0; round < 10000; round++) {
        int got = 0;

        while ((n = recv(f->wire->fd, fr, sizeof(fr), MSG_DONTWAIT)) > 0) {
            got++;
            if (seen) {
                wire_seen(f, fr, n);
            }
        }
        if (!got && round) {
            return;
        }
        /* QEMU's main loop sees our room: in-process, or a round trip */
        flush(f);
        if (!f->flush) {
            reg_read(f, PFNIC_REG_PORT_STATUS);
            reg_read(f, PFNIC_REG_PORT_STATUS);
        }
    }
    pfz_fail(f, "wire: the port never stops sending");
}

/*
 * Give the port a frame through its netdev, as a peer's would come, and
 * wait until it has taken it: the port counts every frame the netdev
 * delivers (RX_FRAMES) in its receive bottom half, or when it drops it.
 */
static void wire_send(PfnicFuzz *f, const uint8_t *fr, size_t len)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    uint32_t before = wire_counter(f, PFNIC_PORT_RX_FRAMES);
    ssize_t n = -1;

    g_assert(len > 0);  /* QEMU's dgram netdev takes 0 bytes for EOF */
    g_strlcpy(sa.sun_path, f->wire->qemus, sizeof(sa.sun_path));
    for (int i = 0; i < 1000 && n < 0; i++) {
        n = sendto(f->wire->fd, fr, len, 0, (struct sockaddr *)&sa,
                   sizeof(sa));
        if (n < 0) {
            PFZ_CHECK(f, errno == EAGAIN || errno == EWOULDBLOCK,
                      "wire: sendto: %s", strerror(errno));
            /* QEMU's socket is full, maybe as it waits for room in ours. */
            wire_recv(f, true);
            if (!f->flush) {
                g_usleep(1000);
            }
        }
    }
    PFZ_CHECK(f, n == len, "wire: sent %zd of %zu bytes", n, len);
    if (f->eth_on) {
        /* What a receive buffer may hold from now on */
        f->sent[f->sent_last % ETH_SENT_N].len = len;
        memcpy(f->sent[f->sent_last % ETH_SENT_N].data, fr,
               MIN(len, ETH_RX_SLOT));
        if (++f->sent_last - f->sent_first > ETH_SENT_N) {
            f->sent_first++;
        }
    }
    for (int i = 0; i < 20000; i++) {
        flush(f);
        if (wire_counter(f, PFNIC_PORT_RX_FRAMES) != before) {
            return;
        }
        if (!f->flush && i >= 100) {
            g_usleep(100);
        }
    }
    pfz_fail(f, "wire: a frame of %zu bytes never reached the port", len);
}

static void wire_arp(PfnicFuzz *f, uint16_t op, const uint8_t *dmac,
                     uint32_t sip, uint32_t tip)
{
    uint8_t fr[ETH_IP_UDP] = { 0 };

    memcpy(fr, dmac, 6);
    memcpy(fr + 6, peer_mac, 6);
    stw_be_p(fr + 12, 0x0806);
    stw_be_p(fr + 14, 1);
    stw_be_p(fr + 16, 0x0800);
    fr[18] = 6;
    fr[19] = 4;
    stw_be_p(fr + 20, op);
    memcpy(fr + 22, peer_mac, 6);
    stl_be_p(fr + 28, sip);
    if (op == 2) {
        memcpy(fr + 32, dmac, 6);
    }
    stl_be_p(fr + 38, tip);
    wire_send(f, fr, sizeof(fr));
}

/*
 * A frame the port sent: its MAC, and for IPv4 RoCEv2 as docs/wire.md has
 * it (header checksum, lengths, UDP port, BTH, ICRC); to the harness's
 * QPs unless the input misprogrammed the device. The last request of each
 * wire QP is kept for the answer operation. An ARP request for the peer
 * is answered (the harness is the peer).
 */
static void wire_seen(PfnicFuzz *f, const uint8_t *fr, size_t n)
{
    const uint8_t *ip = fr + 14, *bth = fr + ETH_IP_UDP;
    uint32_t qpn;
    bool arp;

    if (f->eth_tx_first != f->eth_tx_last) {
        /* The transmit ring's next frame, as the driver wrote it */
        PfnicFuzzEthFrame *t;

        t = &f->eth_tx_frame[f->eth_tx_first % ETH_RING_N];
        if (n == t->len && !memcmp(fr, t->data, n)) {
            f->eth_tx_first++;
            return;
        }
    }
    arp = n >= ETH_IP_UDP && !memcmp(fr + 6, wire_mac, 6) &&
          lduw_be_p(fr + 12) == 0x0806 && lduw_be_p(fr + 14) == 1 &&
          lduw_be_p(fr + 16) == 0x0800 &&
          (lduw_be_p(fr + 20) == 1 || lduw_be_p(fr + 20) == 2) &&
          (f->disturbed || ldl_be_p(fr + 28) == WIRE_IP);
    if (f->eth_wild && !arp) {
        return;         /* a transmit ring the input wrote: any bytes */
    }
    PFZ_CHECK(f, n >= 14 && !memcmp(fr + 6, wire_mac, 6),
              "wire: a frame of %zu bytes not from the port's MAC", n);
    if (lduw_be_p(fr + 12) == 0x0806) {
        PFZ_CHECK(f, arp, "wire: the port sent a bad ARP frame");
        if (lduw_be_p(fr + 20) == 1 && ldl_be_p(fr + 38) == PEER_IP) {
            wire_arp(f, 2, fr + 6, PEER_IP, ldl_be_p(fr + 28));
        } else if (lduw_be_p(fr + 20) == 2 && ldl_be_p(fr + 38) == PEER_IP) {
            f->arp_answered = true;
        }
        return;
    }
    PFZ_CHECK(f, lduw_be_p(fr + 12) == 0x0800 && n >= ETH_IP_UDP + 12 + 4 &&
                 n <= 14 + 20 + 8 + 12 + 28 + 4096 + 4 + 4,
              "wire: the port sent ethertype %x, %zu bytes",
              n >= 14 ? lduw_be_p(fr + 12) : 0, n);
    PFZ_CHECK(f, ip[0] == 0x45 && lduw_be_p(ip + 2) == n - 14 &&
                 ip[9] == 17 && wire_ip_csum(ip, 20) == 0 &&
                 lduw_be_p(ip + 22) == 4791 && lduw_be_p(ip + 24) == n - 34 &&
                 (n - ETH_IP_UDP) % 4 == 0,
              "wire: the port sent a bad IPv4/UDP header (%zu bytes)", n);
    PFZ_CHECK(f, ldl_le_p(fr + n - 4) == wire_icrc(fr, n),
              "wire: the port sent a bad ICRC");
    qpn = ldl_be_p(bth + 4) & 0xffffff;
    if (bth[0] == OP_UD_SEND || bth[0] == OP_UD_SEND_IMM) {
        /* A datagram of the UD QP: DETH with its QPN, to the AH's peer */
        PFZ_CHECK(f, n >= ETH_IP_UDP + 12 + 8 + 4 && !(bth[1] & 0x0f) &&
                     lduw_be_p(bth + 2) == 0xffff && !bth[16] &&
                     (f->disturbed ||
                      ((ldl_be_p(bth + 16) & 0xffffff) == UD_QPN &&
                       ldl_be_p(ip + 16) == PEER_IP &&
                       ldl_be_p(ip + 12) == WIRE_IP)),
                  "wire: the port sent a bad datagram (BTH %02x %02x, "
                  "DETH %08x %08x, to %08x)", bth[0], bth[1],
                  ldl_be_p(bth + 12), ldl_be_p(bth + 16), ldl_be_p(ip + 16));
        return;
    }
    PFZ_CHECK(f, bth[0] < W_OP_NR && wire_hdrs[bth[0]] && !(bth[1] & 0x0f) &&
                 lduw_be_p(bth + 2) == 0xffff,
              "wire: the port sent BTH %02x %02x %04x", bth[0], bth[1],
              lduw_be_p(bth + 2));
    PFZ_CHECK(f, f->disturbed || (ldl_be_p(ip + 16) == PEER_IP &&
                                  ldl_be_p(ip + 12) == WIRE_IP &&
                                  qpn - PEER_QPN(0) < WIRE_QPS),
              "wire: the port sent to %08x QP %x", ldl_be_p(ip + 16), qpn);
    if (!wire_is_response(bth[0]) && qpn - PEER_QPN(0) < WIRE_QPS) {
        int w = qpn - PEER_QPN(0);

        f->last_req_len[w] = n - ETH_IP_UDP - 4;
        memcpy(f->last_req[w], bth, MIN(WIRE_REQ_KEEP, n - ETH_IP_UDP - 4));
    }
}

/* Run QEMU's pending work and take in what the port sent. */
static void wire_drain(PfnicFuzz *f)
{
    flush(f);
    wire_recv(f, true);
}

/*
 * Build a RoCEv2 frame from the peer to the port's QP @qpn: BTH with
 * opcode @op, byte 1 @b1 (SE, M, pad count, TVer), AckReq and @psn; the
 * extended headers @ext; @plen bytes of payload (a pattern from @seed)
 * and @pad bytes of pad; checksum and ICRC right. Returns its length.
 */
static size_t wire_frame(uint8_t *fr, uint32_t qpn, uint8_t op, uint8_t b1,
                         bool ackreq, uint32_t psn, const uint8_t *ext,
                         size_t ext_len, size_t plen, size_t pad,
                         uint8_t seed)
{
    uint8_t *ip = fr + 14, *udp = ip + 20, *bth = udp + 8;
    size_t len = ETH_IP_UDP + 12 + ext_len + plen + pad + 4;

    memcpy(fr, wire_mac, 6);
    memcpy(fr + 6, peer_mac, 6);
    stw_be_p(fr + 12, 0x0800);
    memset(ip, 0, 20);
    ip[0] = 0x45;
    stw_be_p(ip + 2, len - 14);
    stw_be_p(ip + 6, 0x4000);
    ip[8] = 64;
    ip[9] = 17;
    stl_be_p(ip + 12, PEER_IP);
    stl_be_p(ip + 16, WIRE_IP);
    stw_be_p(ip + 10, wire_ip_csum(ip, 20));
    stw_be_p(udp, 0xc000 | (qpn & 0x3fff));
    stw_be_p(udp + 2, 4791);
    stw_be_p(udp + 4, len - 34);
    stw_be_p(udp + 6, 0);
    bth[0] = op;
    bth[1] = b1;
    stw_be_p(bth + 2, 0xffff);
    stl_be_p(bth + 4, qpn & 0xffffff);
    stl_be_p(bth + 8, (ackreq ? 0x80000000u : 0) | (psn & 0xffffff));
    memcpy(bth + 12, ext, ext_len);
    for (size_t i = 0; i < plen + pad; i++) {
        bth[12 + ext_len + i] = i < plen ? seed + i : 0;
    }
    stl_le_p(fr + len - 4, wire_icrc(fr, len));
    return len;
}

/* Fix the header checksum and the ICRC after changing a frame. */
static void wire_reseal(uint8_t *fr, size_t len)
{
    stw_be_p(fr + 24, 0);
    stw_be_p(fr + 24, wire_ip_csum(fr + 14, 20));
    stl_le_p(fr + len - 4, wire_icrc(fr, len));
}

static uint32_t wire_qp_query(PfnicFuzz *f, int w, int arg)
{
    uint32_t a[PFNIC_CMD_ARGS] = { WIRE_Q + w + 2 };

    if (cmd(f, PFNIC_CMD_QP_QUERY, a, 1) != PFNIC_CMD_OK) {
        return 0;
    }
    return a[arg];
}

/* The PSN the harness's frame to wire QP @w starts from, for @op */
static uint32_t wire_base_psn(PfnicFuzz *f, int w, uint8_t op)
{
    if (wire_is_response(op)) {
        /* What the port's requester sent last, or is about to send */
        if (f->last_req_len[w]) {
            return ldl_be_p(f->last_req[w] + 8) & 0xffffff;
        }
        return wire_qp_query(f, w, 9) - 1;
    }
    return wire_qp_query(f, w, 10);      /* the responder's expected PSN */
}

/* RETH or AtomicETH's address and key: the MR's, DM's, another's, any */
static void wire_va_key(PfnicFuzz *f, uint8_t sel, uint64_t *va,
                        uint32_t *key)
{
    uint64_t addr = pick_addr(f);

    switch (sel & 3) {
    case 0:
        *key = f->key[0];
        break;
    case 1:
        *key = f->dm_key[0];
        break;
    case 2:
        *key = f->key[1];       /* context 2's: refused to QPs 4 and 5 */
        break;
    default:
        *key = U32(f);
        break;
    }
    *va = dm_addr(f, *key, addr);
}

/*
 * A frame shaped to get deep into the RoCEv2 path: to one of the wire
 * QPs (or any QPN), an opcode of the RC set (or any byte), a PSN at the
 * one expected, near it or anywhere, the headers the opcode carries
 * (keys and addresses good or bad), a payload up to the path MTU or
 * past it, and the ICRC right unless the input breaks the frame.
 */
static size_t wire_shape(PfnicFuzz *f, uint8_t sel, uint8_t *fr)
{
    uint8_t opsel = U8(f), psel = U8(f), hsel = U8(f);
    uint8_t bad = (sel & 0x70) == 0x70 ? U8(f) : 0;
    unsigned brk = 0;
    int w = (sel >> 3) & 1;
    uint32_t qpn = (sel & 0xc0) == 0xc0 ? U32(f) & 0xffffff : WIRE_Q + w + 2;
    uint8_t op = opsel < 0xf0 ? opsel % W_OP_NR : U8(f);
    uint8_t h = op < W_OP_NR ? wire_hdrs[op] : 0;
    uint8_t ext[64] = { 0 }, *e = ext;
    uint32_t psn = wire_base_psn(f, w, op), plen = 0, pad;
    uint64_t va;
    uint32_t key;
    size_t len;

    if ((sel & 0x70) == 0x70) {
        /* One breakage (bits 2:0 of @bad), or two (bit 7: also 6:4) */
        brk = 1u << (bad & 7);
        if (bad & 0x80) {
            brk |= 1u << ((bad >> 4) & 7);
        }
    }
    switch (psel & 3) {
    case 1:
        psn += (int8_t)U8(f);
        break;
    case 2:
        psn -= 1 + (psel >> 6);         /* a duplicate */
        break;
    case 3:
        psn = U32(f);
        break;
    }
    if (h & WH_PAYLOAD) {
        switch (hsel & 3) {
        case 0:
            plen = WIRE_MTU;            /* FIRST and MIDDLE must be full */
            break;
        case 1:
            plen = U16(f) % (WIRE_MTU + 1);
            break;
        case 2:
            plen = U8(f) % 16;
            break;
        default:
            plen = U16(f) % (WIRE_JUMBO - 128);
            break;
        }
    }
    if (h & WH_RETH) {
        uint32_t dmalen;

        wire_va_key(f, hsel >> 2, &va, &key);
        if (hsel & 0x10) {
            dmalen = U32(f);
        } else if (op == W_READ_REQUEST) {
            dmalen = U16(f) % (4 * WIRE_MTU + 1);
        } else {
            dmalen = plen * (op == W_WRITE_FIRST ? 1 + U8(f) % 4 : 1);
        }
        stq_be_p(e, va);
        stl_be_p(e + 8, key);
        stl_be_p(e + 12, dmalen);
        e += 16;
    }
    if (h & WH_ATOMIC) {
        wire_va_key(f, hsel >> 2, &va, &key);
        stq_be_p(e, hsel & 0x10 ? va : va & ~7ULL);
        stl_be_p(e + 8, key);
        stq_be_p(e + 12, U8(f));        /* swap or add */
        stq_be_p(e + 20, U8(f));        /* compare */
        e += 28;
    }
    if (h & WH_AETH) {
        uint8_t asel = U8(f);
        static const uint8_t syn[8] = {
            0x1f, 0x1f, 0x00, 0x20, 0x60, 0x61, 0x62, 0x63,
        };

        e[0] = asel & 0x80 ? asel : syn[asel % 8] | (asel % 8 == 3 ?
                                                     (asel >> 3) & 0x1f : 0);
        stl_be_p(e, (uint32_t)e[0] << 24 | (f->peer_msn[w]++ & 0xffffff));
        e += 4;
    }
    if (h & WH_ATOMICACK) {
        stq_be_p(e, U8(f));
        e += 8;
    }
    if (h & WH_IMM) {
        stl_be_p(e, 0x1234abcd);
        e += 4;
    }
    if (h & WH_IETH) {
        wire_va_key(f, hsel >> 2, &va, &key);
        stl_be_p(e, key);
        e += 4;
    }
    pad = (4 - plen % 4) % 4;
    len = wire_frame(fr, qpn, op,
                     (psel & 8 ? 0x80 : 0) |
                     (brk & 0x08 ? (psel >> 4) & 3 : pad) << 4,
                     psel & 4, psn, ext, e - ext, plen, pad, hsel);
    if (brk) {
        uint8_t arg = U8(f);

        if (brk & 0x10) {           /* TVer, P_Key */
            fr[ETH_IP_UDP + 1] |= arg & 0x0f;
            stw_be_p(fr + ETH_IP_UDP + 2, arg & 0x10 ? U16(f) : 0x7fff);
        }
        if (brk & 0x04) {           /* from a stranger */
            stl_be_p(fr + 14 + 12, STRANGER_IP);
        }
        if (brk & 0x20) {           /* the UDP length or port, any */
            stw_be_p(fr + 34 + (arg & 1 ? 2 : 4), U16(f));
        }
        wire_reseal(fr, len);
        if (brk & 0x01) {           /* the ICRC */
            fr[len - 1 - (arg >> 6)] ^= 1 << ((arg >> 3) & 7);
        }
        if (brk & 0x02) {           /* the IPv4 header checksum */
            fr[24] ^= 0x40;
        }
        if (brk & 0x40) {
            memcpy(fr, bcast_mac, 6);
        }
        if (brk & 0x80) {           /* truncated */
            len -= MIN(len - 1, 1 + (size_t)(arg & 0x0f) * 4);
        }
    }
    return len;
}

/*
 * One frame from the wire: raw (any bytes from the input, any length up
 * to a jumbo frame, addressed to the port's MAC or not), or shaped.
 */
static void op_frame(PfnicFuzz *f)
{
    static uint8_t fr[WIRE_BUF];
    uint8_t sel = U8(f);
    size_t len;

    if ((sel & 7) == 0) {
        /* Up to 255 bytes from the input, repeated to the length */
        size_t n = U8(f);

        /* Half of them fit an Ethernet receive buffer. */
        len = U16(f) % (sel & 0x40 ? PFNIC_ETH_FRAME_MAX : WIRE_JUMBO) + 1;
        memset(fr, 0, len);
        n = MIN(n, f->len - f->pos);
        for (size_t i = 0; i < len && n; i++) {
            fr[i] = f->data[f->pos + i % n];
        }
        f->pos += n;
        if (sel & 0x08) {
            memcpy(fr, wire_mac, MIN(len, 6));
        }
        if ((sel & 0x10) && len >= 14) {
            stw_be_p(fr + 12, sel & 0x20 ? 0x0806 : 0x0800);
        }
        if (f->trace) {
            fprintf(stderr, "pfnic-fuzz: raw frame, %zu bytes\n", len);
        }
    } else {
        len = wire_shape(f, sel, fr);
        if (f->trace) {
            fprintf(stderr, "pfnic-fuzz: frame op %02x QP %x PSN %x, %zu "
                    "bytes\n", fr[ETH_IP_UDP],
                    ldl_be_p(fr + ETH_IP_UDP + 4) & 0xffffff,
                    ldl_be_p(fr + ETH_IP_UDP + 8) & 0xffffff, len);
        }
    }
    wire_send(f, fr, len);
    wire_drain(f);
}

/*
 * A work request on wire QP @w the peer can answer: any opcode (@arg),
 * from or to the pages the setup mapped, up to three packets long.
 */
static void wire_post(PfnicFuzz *f, int w, uint8_t arg)
{
    uint32_t len = (arg >> 3) * 97 % (3 * WIRE_MTU);
    PfnicWqe r = {
        .opcode = arg % 7,
        .flags = PFNIC_SEND_SIGNALED,
        .num_sge = 1,
        .imm_data = 0x12345678,
        .wr_id = cpu_to_le64(WR_MAGIC | f->wr_seq++),
        .remote_addr = cpu_to_le64(0x7000),
        .rkey = cpu_to_le32(0x77),
        .compare_add = cpu_to_le64(1),
        .swap = cpu_to_le64(2),
        .sge[0] = {
            .addr = cpu_to_le64(va_of(WIRE_MAPPED)),
            .length = cpu_to_le32(len),
            .lkey = cpu_to_le32(f->key[0]),
        },
    };

    if (r.opcode >= PFNIC_WR_ATOMIC_CMP_AND_SWP) {
        r.sge[0].length = cpu_to_le32(8);
    }
    qp_post(f, WIRE_Q + w, false, &r);
    wire_drain(f);
}

/*
 * The peer answers the last request wire QP @w sent (with none, it posts
 * one first): what the request
 * asks (ACK with its PSN, READ RESPONSE packets with the length asked,
 * ATOMIC ACKNOWLEDGE), an RNR NAK, a sequence NAK, an error NAK, an ACK
 * of a PSN near it, or the request itself sent back to the QP.
 */
static void op_answer(PfnicFuzz *f)
{
    static uint8_t fr[WIRE_BUF];
    uint8_t sel = U8(f), arg = U8(f);
    int w = sel & 1;
    const uint8_t *req = f->last_req[w];
    uint32_t qpn = WIRE_Q + w + 2, psn;
    uint8_t aeth[12] = { 0 };
    uint8_t op, syn = 0x1f;

    wire_drain(f);
    if (!f->last_req_len[w]) {
        wire_post(f, w, arg);
    }
    if (!f->last_req_len[w]) {
        return;
    }
    op = req[0];
    psn = ldl_be_p(req + 8) & 0xffffff;
    if (f->trace) {
        fprintf(stderr, "pfnic-fuzz: answer %d to QP %u op %02x PSN %x\n",
                (sel >> 1) % 8, qpn, op, psn);
    }
    switch ((sel >> 1) % 8) {
    case 0:
    case 1:
        if (op == W_READ_REQUEST) {
            uint32_t dmalen = ldl_be_p(req + 12 + 12);
            uint32_t n = MAX(DIV_ROUND_UP(dmalen, WIRE_MTU), 1);

            for (uint32_t k = 0; k < MIN(n, 16); k++) {
                uint32_t plen = MIN(WIRE_MTU, dmalen - k * WIRE_MTU);
                uint8_t rop = n == 1 ? W_READ_RESP_ONLY :
                              k == 0 ? W_READ_RESP_FIRST :
                              k == n - 1 ? W_READ_RESP_LAST :
                              W_READ_RESP_MIDDLE;
                bool has_aeth = rop != W_READ_RESP_MIDDLE;

                stl_be_p(aeth, 0x1f000000 | (f->peer_msn[w] & 0xffffff));
                wire_send(f, fr, wire_frame(fr, qpn, rop,
                                            ((4 - plen % 4) % 4) << 4, false,
                                            psn + k, aeth, has_aeth ? 4 : 0,
                                            plen, (4 - plen % 4) % 4, arg));
            }
            f->peer_msn[w]++;
            wire_drain(f);
            return;
        }
        if (op == W_CMP_SWAP || op == W_FETCH_ADD) {
            stl_be_p(aeth, 0x1f000000 | (++f->peer_msn[w] & 0xffffff));
            stq_be_p(aeth + 4, arg);
            wire_send(f, fr, wire_frame(fr, qpn, W_ATOMIC_ACK, 0, false, psn,
                                        aeth, 12, 0, 0, 0));
            wire_drain(f);
            return;
        }
        f->peer_msn[w]++;
        break;
    case 2:
        syn = 0x20 | (arg & 0x1f);      /* RNR NAK */
        break;
    case 3:
        syn = 0x60;                     /* sequence NAK */
        psn -= arg % 4;
        break;
    case 4:
        syn = 0x61 + arg % 3;           /* invalid, access, operational */
        break;
    case 5:
        psn += (int8_t)arg;
        break;
    case 6: {
        /* The request back to the QP that sent it, as from its peer */
        size_t ext = wire_ext_len(op);
        size_t plen = f->last_req_len[w] - 12 - MIN(f->last_req_len[w] - 12,
                                                    ext);
        size_t pad = (req[1] >> 4) & 3;

        plen -= MIN(plen, pad);
        wire_send(f, fr, wire_frame(fr, qpn, op, req[1], req[8] & 0x80, psn,
                                    req + 12, MIN(ext, WIRE_REQ_KEEP - 12),
                                    plen, pad, arg));
        wire_drain(f);
        return;
    }
    default:
        psn--;                          /* only what came before */
        break;
    }
    stl_be_p(aeth, (uint32_t)syn << 24 | (f->peer_msn[w] & 0xffffff));
    wire_send(f, fr, wire_frame(fr, qpn, W_ACK, 0, false, psn, aeth, 4, 0, 0,
                                0));
    wire_drain(f);
}

/* --- pfnic-wire: a UD QP ------------------------------------------------- */

/* Post @w on the UD QP's receive (@rq) or send queue, if a driver would. */
static void ud_post(PfnicFuzz *f, bool rq, const PfnicWqe *w)
{
    wq_post(f, rq ? &f->ud_rq_tail : &f->ud_sq_tail, rq ? UD_RQ : UD_SQ,
            UD_REC, 1, UD_QPN, rq, w);
}

/* A receive of @len bytes at @off into UD receive page @page */
static void ud_recv(PfnicFuzz *f, int page, uint32_t off, uint32_t len)
{
    PfnicWqe r = {
        .num_sge = 1,
        .wr_id = cpu_to_le64(WR_MAGIC | f->wr_seq++),
        .sge[0] = {
            .addr = cpu_to_le64(va_of(UD_RECV_PAGE + page % 4) + off),
            .length = cpu_to_le32(len),
            .lkey = cpu_to_le32(f->key[0]),
        },
    };

    ud_post(f, true, &r);
}

/*
 * The UD QP in RTS with Q_Key UD_QKEY, on context 1's CQ, four receives
 * of a page posted (their pages not present: the first datagrams fault).
 */
static void ud_setup(PfnicFuzz *f)
{
    uint32_t a[PFNIC_CMD_ARGS] = {
        UD_QPN, 1, 7, 1, 1, UD_SQ, 0, QUEUE_LOG2, UD_RQ, 0, QUEUE_LOG2,
        UD_REC, 0, PFNIC_QP_FLAG_UD, 0,
    };

    mem_zero(f, UD_SQ, UD_END - UD_SQ);
    setup_ok(f, cmd(f, PFNIC_CMD_QP_CREATE, a, PFNIC_CMD_ARGS),
             "QP_CREATE UD");
    for (uint32_t state = PFNIC_QPS_INIT; state <= PFNIC_QPS_RTS; state++) {
        uint32_t m[PFNIC_CMD_ARGS] = {
            UD_QPN, state, 0, UD_QKEY, [8] = 0x5000,
        };

        setup_ok(f, cmd(f, PFNIC_CMD_QP_MODIFY, m, PFNIC_CMD_ARGS),
                 "QP_MODIFY UD");
    }
    f->ud_sq_tail = f->ud_rq_tail = 0;
    for (int i = 0; i < 4; i++) {
        ud_recv(f, i, 0, 4096);
    }
}

/*
 * The UD QP, from the peer's side or its driver's: a datagram to it (UD
 * SEND ONLY, with or without immediate; its Q_Key, another or any; any
 * source QP; a payload up to the largest MTU or past it; the pad count
 * right or not; rarely to any QPN or with a reserved DETH byte), a receive
 * (any room and offset in its pages), or a datagram from it (to the peer
 * or to a QP of this device, any QPN and Q_Key, its own Q_Key by the
 * high bit, the peer's MAC or the neighbour cache's, a GRH or not; up
 * to the largest MTU or past it).
 */
static void op_ud(PfnicFuzz *f)
{
    static uint8_t fr[WIRE_BUF];
    uint8_t sel = U8(f), ext[12];
    uint32_t len = U16(f), x = U32(f);

    if (f->trace) {
        fprintf(stderr, "pfnic-fuzz: UD %d, %u bytes\n", sel & 3, len);
    }
    switch (sel & 3) {
    case 0:
    case 1: {
        bool imm = sel & 4, stray = (sel & 0xe0) == 0xe0;
        uint32_t qkey = (sel >> 3) % 4 < 2 ? UD_QKEY :
                        (sel >> 3) % 4 == 2 ? UD_QKEY ^ 1 : x;
        uint32_t plen = len % (PFNIC_UD_MAX_MSG + 65);
        uint32_t pad = (4 - plen % 4) % 4;

        stl_be_p(ext, qkey);
        stl_be_p(ext + 4, x & 0xffffff);
        ext[4] = stray ? x >> 24 : 0;           /* reserved */
        stl_be_p(ext + 8, x);
        if ((sel & 0x60) == 0x60) {
            pad = x % 4;
        }
        wire_send(f, fr, wire_frame(fr, stray ? x : UD_QPN,
                                    imm ? OP_UD_SEND_IMM : OP_UD_SEND,
                                    pad << 4 | (sel & 0x40 ? 0x80 : 0), false,
                                    x >> 8, ext, imm ? 12 : 8, plen, pad,
                                    sel));
        break;
    }
    case 2:
        ud_recv(f, sel >> 2, x % 4096, len % 4097);
        break;
    default: {
        PfnicWqe w = {
            .opcode = sel & 4 ? PFNIC_WR_SEND_WITH_IMM : PFNIC_WR_SEND,
            .flags = PFNIC_SEND_SIGNALED | (sel & 8 ? PFNIC_SEND_SOLICITED
                                                     : 0),
            .num_sge = 1,
            .imm_data = cpu_to_le32(x),
            .wr_id = cpu_to_le64(WR_MAGIC | f->wr_seq++),
            .ud = {
                .remote_qpn = cpu_to_le32(sel & 0x10 ? x & 0xffffff :
                                          PEER_QPN(0)),
                .remote_qkey = cpu_to_le32(sel & 0x20 ? x : UD_QKEY),
                .dest_ip = cpu_to_le32(sel & 0x40 ? 0 : PEER_IP),
                .ah_flags = (sel >> 6) & PFNIC_UD_AH_MASK,
            },
            .sge[0] = {
                .addr = cpu_to_le64(va_of(WIRE_MAPPED) + x % 4096),
                .length = cpu_to_le32(len % (PFNIC_UD_MAX_MSG + 65)),
                .lkey = cpu_to_le32(f->key[0]),
            },
        };

        if (sel & 0x80) {
            memcpy(w.ud.dmac, peer_mac, 6);
        }
        if (sel & 0x40) {
            /* This device: the UD QP itself, or any QPN */
            w.ud.remote_qpn = cpu_to_le32(sel & 0x10 ? x & 0xffffff : UD_QPN);
        }
        ud_post(f, false, &w);
        break;
    }
    }
    wire_drain(f);
}

/* --- pfnic-wire: the Ethernet queues ------------------------------------- */

static uint64_t eth_desc_addr(bool rx, uint32_t n)
{
    return (rx ? ETH_RX_RING : ETH_TX_RING) +
           n % ETH_RING_N * PFNIC_ETH_DESC_SIZE;
}

static void eth_desc_write(PfnicFuzz *f, bool rx, uint32_t n, uint64_t addr,
                           uint16_t len, uint16_t flags)
{
    PfnicEthDesc d = {
        .addr = cpu_to_le64(addr),
        .len = cpu_to_le16(len),
        .flags = cpu_to_le16(flags),
    };

    qtest_memwrite(f->qts, eth_desc_addr(rx, n), &d, sizeof(d));
}

static uint32_t eth_status(PfnicFuzz *f, bool rx, uint32_t n)
{
    return qtest_readl(f->qts, eth_desc_addr(rx, n) +
                       offsetof(PfnicEthDesc, status));
}

/* The rings programmed, the queues stopped, nothing expected. */
static void eth_setup(PfnicFuzz *f)
{
    mem_zero(f, ETH_TX_RING, ETH_END - ETH_TX_RING);
    reg_write(f, PFNIC_REG_ETH_TX_LO, ETH_TX_RING);
    reg_write(f, PFNIC_REG_ETH_TX_HI, 0);
    reg_write(f, PFNIC_REG_ETH_TX_SIZE, ETH_RING_N);
    reg_write(f, PFNIC_REG_ETH_RX_LO, ETH_RX_RING);
    reg_write(f, PFNIC_REG_ETH_RX_HI, 0);
    reg_write(f, PFNIC_REG_ETH_RX_SIZE, ETH_RING_N);
    f->eth_on = f->eth_wild = false;
    f->eth_tx_tail = f->eth_tx_cons = f->eth_rx_tail = f->eth_rx_cons = 0;
    f->eth_tx_first = f->eth_tx_last = 0;
    f->sent_first = f->sent_last;
}

/*
 * A received frame of @len bytes in buffer @slot: one the harness gave the
 * port since the last one received (the queues take those that are not
 * RoCE for the port, in order), and not a byte past it in the buffer.
 */
static void eth_rx_seen(PfnicFuzz *f, uint32_t slot, uint32_t len)
{
    static uint8_t got[ETH_RX_SLOT];
    uint32_t i;

    qtest_memread(f->qts, ETH_RX_BUF(slot), got, ETH_RX_SLOT);
    for (i = f->sent_first; i != f->sent_last; i++) {
        if (f->sent[i % ETH_SENT_N].len == len &&
            !memcmp(f->sent[i % ETH_SENT_N].data, got, len)) {
            break;
        }
    }
    PFZ_CHECK(f, i != f->sent_last, "Ethernet: received %u bytes in "
              "buffer %u that no peer sent", len, slot);
    f->sent_first = i + 1;
    for (uint32_t k = len; k < ETH_RX_SLOT; k++) {
        PFZ_CHECK(f, got[k] == SENTINEL_BYTE, "Ethernet: a frame of %u "
                  "bytes wrote byte %u of receive buffer %u", len, k, slot);
    }
}

/*
 * The queues' state after an operation, unless the input misprogrammed
 * the device: heads within what was posted; every descriptor the device
 * passed done, with the code predicted (transmit) or a frame a peer sent
 * (receive); none beyond it done.
 */
static void eth_check(PfnicFuzz *f)
{
    uint32_t head[2], tail[2] = { f->eth_tx_tail, f->eth_rx_tail };
    uint32_t *cons[2] = { &f->eth_tx_cons, &f->eth_rx_cons };

    if (f->disturbed) {
        return;
    }
    head[0] = reg_read(f, PFNIC_REG_ETH_TX_HEAD);
    head[1] = reg_read(f, PFNIC_REG_ETH_RX_HEAD);
    for (int rx = 0; rx < 2; rx++) {
        uint32_t done = (head[rx] - *cons[rx]) % ETH_RING_N;

        PFZ_CHECK(f, head[rx] < ETH_RING_N &&
                     done <= (tail[rx] - *cons[rx]) % ETH_RING_N,
                  "Ethernet %s head %u: consumed %u, tail %u",
                  rx ? "receive" : "transmit", head[rx], *cons[rx], tail[rx]);
        for (; *cons[rx] != head[rx];
             *cons[rx] = (*cons[rx] + 1) % ETH_RING_N) {
            uint32_t n = *cons[rx], st = eth_status(f, rx, n);
            uint32_t code = (st >> PFNIC_ETH_CODE_SHIFT) & 0xff;
            uint32_t len = st & PFNIC_ETH_LEN_MASK;

            PFZ_CHECK(f, (st & PFNIC_ETH_DONE) && !(st & 0x7f000000),
                      "Ethernet %s descriptor %u passed, status %08x",
                      rx ? "receive" : "transmit", n, st);
            if (!rx) {
                PFZ_CHECK(f, code == f->eth_tx_code[n] && !len,
                          "Ethernet transmit descriptor %u: status %08x, "
                          "code %u expected", n, st, f->eth_tx_code[n]);
                continue;
            }
            PFZ_CHECK(f, code == PFNIC_ETH_OK && len >= PFNIC_ETH_FRAME_MIN &&
                         len <= f->eth_rx_room[n],
                      "Ethernet receive descriptor %u of %u bytes: status "
                      "%08x", n, f->eth_rx_room[n], st);
            eth_rx_seen(f, n, len);
        }
        for (uint32_t n = head[rx]; n != tail[rx]; n = (n + 1) % ETH_RING_N) {
            uint8_t edge[16];

            PFZ_CHECK(f, !eth_status(f, rx, n), "Ethernet %s descriptor %u "
                      "done before the head reached it",
                      rx ? "receive" : "transmit", n);
            if (rx) {
                qtest_memread(f->qts, ETH_RX_BUF(n), edge, sizeof(edge));
                for (int k = 0; k < sizeof(edge); k++) {
                    PFZ_CHECK(f, edge[k] == SENTINEL_BYTE, "Ethernet "
                              "receive buffer %u written, its descriptor "
                              "not done", n);
                }
            }
        }
    }
}

/*
 * A frame on the transmit ring: @len bytes (any: 14 to 1518 go, others
 * complete BAD), the port's MAC as the source (as Linux's stack writes
 * it), the rest up to 255 bytes from the input repeated; flags rarely
 * not 0 (BAD). Posted only into a free slot of running queues.
 */
static void eth_tx(PfnicFuzz *f, uint8_t sel)
{
    PfnicFuzzEthFrame *t;
    uint32_t n = f->eth_tx_tail, len = U16(f), k = U8(f);
    uint16_t flags = (sel & 0xe0) == 0xe0 ? U8(f) | 1 : 0;
    bool good;

    if (!f->eth_on || (n + 1) % ETH_RING_N == f->eth_tx_cons) {
        return;                 /* stopped (a tail write is an error), full */
    }
    len = sel & 0x10 ? len % (PFNIC_ETH_FRAME_MAX + 64) :
          PFNIC_ETH_FRAME_MIN + len % (PFNIC_ETH_FRAME_MAX - 13);
    good = !flags && len >= PFNIC_ETH_FRAME_MIN && len <= PFNIC_ETH_FRAME_MAX;
    t = &f->eth_tx_frame[f->eth_tx_last % ETH_RING_N];
    memset(t->data, 0, sizeof(t->data));
    k = MIN(k, f->len - f->pos);
    for (uint32_t i = 0; i < MIN(len, sizeof(t->data)) && k; i++) {
        t->data[i] = f->data[f->pos + i % k];
    }
    f->pos += k;
    if (len >= 12) {
        memcpy(t->data + 6, wire_mac, 6);
    }
    qtest_memwrite(f->qts, ETH_TX_BUF(n), t->data,
                   MIN(len, sizeof(t->data)));
    eth_desc_write(f, false, n, ETH_TX_BUF(n), len, flags);
    f->eth_tx_code[n] = good ? PFNIC_ETH_OK : PFNIC_ETH_BAD;
    if (good) {
        t->desc = n;
        t->len = len;
        f->eth_tx_last++;
    }
    f->eth_tx_tail = (n + 1) % ETH_RING_N;
    reg_write(f, PFNIC_REG_ETH_TX_TAIL, f->eth_tx_tail);
}

/* A receive buffer of any length up to its slot, the slot's bytes 0xa5. */
static void eth_rx_post(PfnicFuzz *f)
{
    static uint8_t pat[ETH_RX_SLOT];
    uint32_t n = f->eth_rx_tail;
    uint16_t room = U16(f) % (ETH_RX_SLOT + 1);

    if (!f->eth_on || (n + 1) % ETH_RING_N == f->eth_rx_cons) {
        return;                 /* stopped, full */
    }
    memset(pat, SENTINEL_BYTE, sizeof(pat));
    qtest_memwrite(f->qts, ETH_RX_BUF(n), pat, sizeof(pat));
    eth_desc_write(f, true, n, ETH_RX_BUF(n), room, 0);
    f->eth_rx_room[n] = room;
    f->eth_rx_tail = (n + 1) % ETH_RING_N;
    reg_write(f, PFNIC_REG_ETH_RX_TAIL, f->eth_rx_tail);
}

/*
 * Stop the queues: what was posted and not done stays not done, and the
 * frames of transmit descriptors the device did not reach never go; the
 * others went before their descriptors completed.
 */
static void eth_stop(PfnicFuzz *f)
{
    reg_write(f, PFNIC_REG_ETH_CTRL, 0);
    f->eth_on = false;
    wire_drain(f);
    if (f->disturbed) {
        return;
    }
    eth_check(f);
    for (uint32_t n = f->eth_tx_cons; n != f->eth_tx_tail;
         n = (n + 1) % ETH_RING_N) {
        if (f->eth_tx_code[n] == PFNIC_ETH_OK) {
            f->eth_tx_last--;
        }
    }
    PFZ_CHECK(f, f->eth_tx_first == f->eth_tx_last, "Ethernet: %u frames of "
              "completed transmit descriptors never came out",
              f->eth_tx_last - f->eth_tx_first);
}

/*
 * The harness as the port's Ethernet driver: start the queues (with or
 * without PROMISC and IRQ_ENABLE; starting resets both rings), stop them,
 * post transmit frames or receive buffers; or (misprogramming) a raw
 * write to the block's registers or a descriptor pointing anywhere.
 */
static void op_eth(PfnicFuzz *f)
{
    uint8_t sel = U8(f);

    if (f->well_formed && (sel & 7) == 7) {
        sel ^= 5;               /* no misprogramming: a transmit */
    }
    if (f->trace) {
        fprintf(stderr, "pfnic-fuzz: Ethernet %d\n", sel & 7);
    }
    switch (sel & 7) {
    case 0: {
        uint32_t ctrl = PFNIC_ETH_CTRL_ENABLE |
                        (sel & 0x08 ? PFNIC_ETH_CTRL_PROMISC : 0) |
                        (sel & 0x10 ? PFNIC_ETH_CTRL_IRQ_ENABLE : 0);

        if (!f->eth_on) {
            mem_zero(f, ETH_TX_RING, 2 * ETH_RING_N * PFNIC_ETH_DESC_SIZE);
            f->eth_tx_tail = f->eth_tx_cons = 0;
            f->eth_rx_tail = f->eth_rx_cons = 0;
            f->eth_tx_first = f->eth_tx_last;
            f->sent_first = f->sent_last;
        }
        reg_write(f, PFNIC_REG_ETH_CTRL, ctrl);
        f->eth_on = true;
        break;
    }
    case 1:
        if (f->eth_on) {
            eth_stop(f);
        }
        break;
    case 2:
    case 3:
    case 4:
        for (int i = 0; i <= (sel >> 3) % 4; i++) {
            eth_tx(f, sel);
        }
        break;
    case 5:
    case 6:
        for (int i = 0; i <= (sel >> 3) % 8; i++) {
            eth_rx_post(f);
        }
        break;
    default: {
        uint32_t val = U32(f);

        f->disturbed = f->eth_wild = true;
        if (sel & 0x08) {
            /* A descriptor at the tail pointing anywhere, then the tail */
            bool rx = sel & 0x10;
            uint32_t n = rx ? f->eth_rx_tail : f->eth_tx_tail;

            eth_desc_write(f, rx, n, (uint64_t)val << (sel >> 5),
                           U16(f), 0);
            reg_write(f, rx ? PFNIC_REG_ETH_RX_TAIL : PFNIC_REG_ETH_TX_TAIL,
                      (n + 1) % ETH_RING_N);
        } else {
            reg_write(f, PFNIC_REG_ETH_CTRL +
                         4 * ((sel >> 4) % 12), val);
        }
        break;
    }
    }
    wire_drain(f);
}

/* The sentinel ranges: guest pages around the harness's data pages */
static const uint64_t wire_sentinels[] = {
    POOL - 4096, POOL + POOL_PAGES * 4096ULL,
    LARGE_PAGE - 4096, LARGE_PAGE + 0x200000,
};

static void wire_sentinels_fill(PfnicFuzz *f)
{
    uint8_t pat[4096];

    memset(pat, SENTINEL_BYTE, sizeof(pat));
    for (int i = 0; i < ARRAY_SIZE(wire_sentinels); i++) {
        qtest_memwrite(f->qts, wire_sentinels[i], pat, sizeof(pat));
    }
    qtest_memwrite(f->qts, BAR1 + DM_SENTINEL, pat, sizeof(pat));
}

/*
 * The port has its address and the peer's MAC (from the peer's ARP
 * request, which it answers), QPs 4 and 5 are wire QPs, and each has
 * receive WQEs for the SENDs that come.
 */
static void wire_setup(PfnicFuzz *f)
{
    wire_recv(f, false);        /* what a previous input left */
    memset(f->last_req_len, 0, sizeof(f->last_req_len));
    memset(f->peer_msn, 0, sizeof(f->peer_msn));
    wire_sentinels_fill(f);
    eth_setup(f);
    ud_setup(f);
    reg_write(f, PFNIC_REG_PORT_IPV4, WIRE_IP);
    f->arp_answered = false;
    wire_arp(f, 1, bcast_mac, PEER_IP, WIRE_IP);
    wire_drain(f);
    PFZ_CHECK(f, f->arp_answered, "setup: the port did not answer ARP");
    /* Pages the requests of wire_post() read and write, present */
    for (int i = 0; i < 4; i++) {
        map_page(f, 0, WIRE_MAPPED + i, pool_page(100 + i),
                 VTD_FL_P | VTD_FL_RW | VTD_FL_US);
        invalidate_page(f, 0, va_of(WIRE_MAPPED + i), true);
    }
    for (int w = 0; w < WIRE_QPS; w++) {
        for (int i = 0; i < 4; i++) {
            PfnicWqe r = {
                .num_sge = 1,
                .wr_id = cpu_to_le64(WR_MAGIC | f->wr_seq++),
                .sge[0] = {
                    .addr = cpu_to_le64(va_of(8 + 4 * w + i)),
                    .length = cpu_to_le32(4096),
                    .lkey = cpu_to_le32(f->key[0]),
                },
            };

            qp_post(f, WIRE_Q + w, true, &r);
        }
    }
}

/*
 * After each operation: the port still has its wire and link, everything
 * it sent was well-formed (wire_seen), and, unless the input
 * misprogrammed the device, it kept its address and wrote no byte of the
 * sentinel pages (the edges next to the data pages; all of them with
 * @full).
 */
static void wire_check(PfnicFuzz *f, bool full)
{
    uint8_t buf[4096], pat[4096];
    uint32_t st = reg_read(f, PFNIC_REG_PORT_STATUS);

    wire_drain(f);
    PFZ_CHECK(f, st == (PFNIC_PORT_STATUS_WIRE | PFNIC_PORT_STATUS_LINK_UP),
              "PORT_STATUS %x", st);
    if (f->disturbed) {
        return;
    }
    PFZ_CHECK(f, reg_read(f, PFNIC_REG_PORT_IPV4) == WIRE_IP,
              "PORT_IPV4 %x", reg_read(f, PFNIC_REG_PORT_IPV4));
    eth_check(f);
    memset(pat, SENTINEL_BYTE, sizeof(pat));
    for (int i = 0; i < ARRAY_SIZE(wire_sentinels) + 1; i++) {
        uint64_t at = i < ARRAY_SIZE(wire_sentinels) ? wire_sentinels[i]
                                                     : BAR1 + DM_SENTINEL;
        size_t n = full ? 4096 : 64;

        /* The page before a buffer ends at it, the one after starts there */
        if (!full && !(i & 1)) {
            at += 4096 - n;
        }
        qtest_memread(f->qts, at, buf, n);
        PFZ_CHECK(f, !memcmp(buf, pat, n), "sentinel at 0x%" PRIx64
                  " written", at);
    }
}

/*
 * The end of an input: the wire QPs' send queues drain (the harness as
 * the peer answers ARP but nothing else, so the work requests time out
 * or complete); then the port still answers an ARP request.
 */
static void wire_settle(PfnicFuzz *f)
{
    int rounds = f->disturbed || f->bogus_response ? 4 : 100;

    for (int round = 0; round < rounds; round++) {
        bool busy = false;

        wire_drain(f);
        for (int w = 0; w < WIRE_QPS; w++) {
            busy |= wire_qp_query(f, w, 1) !=
                    (f->sq_tail[WIRE_Q + w] & 0xffff);
        }
        if (!busy) {
            break;
        }
        prq_answer(f, true, 0);
        clock_step(f, 100 * SCALE_MS);
    }
    wire_drain(f);
    /*
     * The transmit ring has sent all it was given; then the queues stop
     * (and the port answers ARP again, for wire_alive()).
     */
    if (f->eth_on && !f->disturbed) {
        eth_check(f);
        PFZ_CHECK(f, f->eth_tx_cons == f->eth_tx_tail &&
                     f->eth_tx_first == f->eth_tx_last,
                  "Ethernet: the transmit ring stopped at %u of %u, %u "
                  "frames not out", f->eth_tx_cons, f->eth_tx_tail,
                  f->eth_tx_last - f->eth_tx_first);
    }
    eth_stop(f);
}

static void wire_alive(PfnicFuzz *f)
{
    if (f->trace) {
        fprintf(stderr, "pfnic-fuzz: port counters");
        for (int c = 0; c < PFNIC_PORT_CNT_NR; c++) {
            fprintf(stderr, " %u", wire_counter(f, c));
        }
        fprintf(stderr, "\n");
        if (!f->disturbed) {
            uint32_t a[PFNIC_CMD_ARGS] = { UD_QPN };

            cmd(f, PFNIC_CMD_QP_QUERY, a, 1);
            fprintf(stderr, "pfnic-fuzz: UD QP state %u, send head %u, "
                    "receive head %u, %u refused, %u lost\n", a[0], a[1],
                    a[2], a[8], a[12]);
        }
    }
    if (reg_read(f, PFNIC_REG_PORT_IPV4) != WIRE_IP) {
        return;
    }
    f->arp_answered = false;
    wire_arp(f, 1, bcast_mac, PEER_IP, WIRE_IP);
    wire_drain(f);
    PFZ_CHECK(f, f->arp_answered, "the port no longer answers ARP");
    wire_check(f, true);
}

char *pfnic_fuzz_wire_netdev(PfnicFuzzWire *w)
{
    return g_strdup_printf("-netdev dgram,id=wire0,local.type=unix,"
                           "local.path=%s,remote.type=unix,remote.path=%s",
                           w->qemus, w->ours);
}

char *pfnic_fuzz_wire_open(PfnicFuzzWire *w)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int size = 4 << 20;
    char *netdev, *args;

    w->dir = g_dir_make_tmp("pfnic-wire-fuzz-XXXXXX", NULL);
    g_assert(w->dir);
    w->ours = g_strdup_printf("%s/h", w->dir);
    w->qemus = g_strdup_printf("%s/q", w->dir);
    w->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    g_assert(w->fd >= 0);
    g_strlcpy(sa.sun_path, w->ours, sizeof(sa.sun_path));
    g_assert(bind(w->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    setsockopt(w->fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
    netdev = pfnic_fuzz_wire_netdev(w);
    args = g_strdup_printf(PFNIC_FUZZ_ARGS ",netdev=wire0,mac="
                           PFNIC_FUZZ_WIRE_MAC " %s", netdev);
    g_free(netdev);
    return args;
}

void pfnic_fuzz_wire_close(PfnicFuzzWire *w)
{
    close(w->fd);
    unlink(w->ours);
    unlink(w->qemus);
    rmdir(w->dir);
    g_free(w->ours);
    g_free(w->qemus);
    g_free(w->dir);
}

void pfnic_fuzz_set_wire(PfnicFuzz *f, PfnicFuzzWire *w)
{
    f->wire = w;
}

static void run_op(PfnicFuzz *f, uint8_t op)
{
    if (f->wire && op >= 0x60) {
        /*
         * pfnic-wire: most operations are the wire's (a frame from a
         * stranger or the peer is no misprogramming: any input has them).
         */
        if (f->trace) {
            fprintf(stderr, "pfnic-fuzz: op %d: %s at byte %zu\n", f->op,
                    op % 4 == 3 ? "answer" : op % 8 == 2 ? "Ethernet" :
                    op % 8 == 6 ? "UD" : "frame", f->pos - 1);
        }
        if (op % 4 == 3) {
            op_answer(f);
        } else if (op % 8 == 2) {
            op_eth(f);
        } else if (op % 8 == 6) {
            op_ud(f);
        } else {
            op_frame(f);
        }
        flush(f);
        return;
    }
    op %= f->well_formed ? OP_WELL_FORMED : OP_COUNT;
    if (f->trace) {
        fprintf(stderr, "pfnic-fuzz: op %d: %d at byte %zu\n", f->op, op,
                f->pos - 1);
    }
    switch (op) {
    case OP_WQE:
        op_wqe(f);
        break;
    case OP_RECV:
        op_recv(f);
        break;
    case OP_DESC:
        op_desc(f);
        break;
    case OP_MAP:
        op_map(f);
        break;
    case OP_INVALIDATE:
        op_invalidate(f);
        break;
    case OP_PRQ: {
        uint8_t sel = U8(f);
        static const uint32_t codes[4] = { 0, 0, 1, 15 };

        prq_answer(f, !(sel & 4), codes[sel & 3]);
        break;
    }
    case OP_PRQ_BOGUS:
        op_prq_bogus(f);
        break;
    case OP_CLOCK:
        clock_step(f, (int64_t)(U16(f) + 1) << (U8(f) % 24));
        break;
    case OP_CQ_POLL:
        op_cq_poll(f);
        break;
    case OP_BAR0: {
        uint16_t off = U16(f) % PFNIC_CTRL_SIZE;
        uint32_t val = U32(f);

        f->disturbed = true;
        /* The Ethernet queues may then send what memory holds. */
        f->eth_wild |= off >= PFNIC_REG_ETH_CTRL &&
                       off <= PFNIC_REG_ETH_RX_HEAD + 3;
        if (off & 3) {
            qtest_writeb(f->qts, BAR0 + off, val);
        } else {
            qtest_writel(f->qts, BAR0 + off, val);
        }
        qtest_readl(f->qts, BAR0 + (off & ~3));
        break;
    }
    case OP_BAR2: {
        uint16_t off = U16(f) % (4 * PFNIC_DOORBELL_PAGE_SIZE);

        f->disturbed = true;
        qtest_writel(f->qts, BAR2 + (off & ~3), U32(f));
        /* Read back (ABI 1.12: the clock at 0x20), 8 bytes if bit 0. */
        if (off & 1) {
            qtest_readq(f->qts, BAR2 + (off & ~7));
        } else {
            qtest_readl(f->qts, BAR2 + (off & ~3));
        }
        break;
    }
    case OP_CMD:
        op_cmd(f);
        break;
    case OP_CTX3:
        op_ctx3(f);
        break;
    case OP_CTX:
        op_ctx(f);
        break;
    case OP_PCI_CFG:
        op_pci_cfg(f);
        break;
    case OP_RESET:
        op_reset(f);
        break;
    default:
        op_iommu_reg(f);
        break;
    }
    flush(f);
}

static uint32_t prq_pending(PfnicFuzz *f)
{
    return ((dmar_read64(f, DMAR_PQT_REG) - dmar_read64(f, DMAR_PQH_REG)) /
            32) % PRQ_ENTRIES;
}

/*
 * Serve every page request and let time pass until the device is idle:
 * with each fault served (or refused for addresses outside the tables),
 * nothing posted may stay pending.
 */
static void quiesce(PfnicFuzz *f)
{
    /* Without the liveness check below, a few rounds will do. */
    int rounds = f->disturbed || f->bogus_response ? 16 : 512, idle = 0;

    /*
     * A waiter has at most PFNIC_WAIT_GROUPS groups out, within a quarter
     * of the PRI allocation: a long descriptor takes a few rounds.
     */
    for (int round = 0; round < rounds && idle < 4; round++) {
        bool waiting = false;

        prq_answer(f, true, 0);
        clock_step(f, 2 * SCALE_MS);
        for (int r = 0; r < RINGS; r++) {
            reg_write(f, PFNIC_REG_CTX_SELECT, r + 1);
            waiting |= reg_read(f, PFNIC_REG_CTX_STATUS) &
                       PFNIC_CTX_STATUS_WAITING;
        }
        idle = (waiting || prq_pending(f)) ? 0 : idle + 1;
    }
    if (f->wire) {
        wire_settle(f);
    }
    check_all(f);
    if (f->wire) {
        wire_alive(f);
    }
    if (f->disturbed || f->bogus_response) {
        return;
    }
    for (int r = 0; r < RINGS; r++) {
        reg_write(f, PFNIC_REG_CTX_SELECT, r + 1);
        PFZ_CHECK(f, (r == 2 && !f->ctx3_pasid) ||
                     (reg_read(f, PFNIC_REG_CTX_HEAD) & 0xffff) ==
                     (f->ring_tail[r] & 0xffff),
                  "context %d: head %u, tail %u after serving every fault",
                  r + 1, reg_read(f, PFNIC_REG_CTX_HEAD), f->ring_tail[r]);
    }
    for (int q = 0; q < QPS; q++) {
        uint32_t a[PFNIC_CMD_ARGS] = { q + 2 };

        PFZ_CHECK(f, cmd(f, PFNIC_CMD_QP_QUERY, a, 1) == PFNIC_CMD_OK,
                  "QP %d gone", q + 2);
        PFZ_CHECK(f, a[1] == (f->sq_tail[q] & 0xffff),
                  "QP %d: send head %u, tail %u after serving every fault",
                  q + 2, a[1], f->sq_tail[q]);
    }
    if (f->wire) {
        uint32_t a[PFNIC_CMD_ARGS] = { UD_QPN };

        PFZ_CHECK(f, cmd(f, PFNIC_CMD_QP_QUERY, a, 1) == PFNIC_CMD_OK,
                  "the UD QP gone");
        PFZ_CHECK(f, a[1] == (f->ud_sq_tail & 0xffff), "the UD QP: send "
                  "head %u, tail %u after serving every fault", a[1],
                  f->ud_sq_tail);
    }
}

void pfnic_fuzz_run(PfnicFuzz *f, const uint8_t *data, size_t len)
{
    f->data = data;
    f->len = len;
    f->pos = 0;
    f->well_formed = U8(f) & 1;
    for (f->op = 0; f->op < MAX_OPS && f->pos < f->len; f->op++) {
        run_op(f, U8(f));
        check_all(f);
    }
    quiesce(f);
}

/* --- the known-good sequence --------------------------------------------- */

static void post_write(PfnicFuzz *f, uint64_t src, uint64_t dst, uint32_t len)
{
    PfnicWqe w = {
        .opcode = PFNIC_WR_RDMA_WRITE, .flags = PFNIC_SEND_SIGNALED,
        .num_sge = 1, .wr_id = cpu_to_le64(WR_MAGIC | f->wr_seq++),
        .remote_addr = cpu_to_le64(dst), .rkey = cpu_to_le32(f->key[1]),
        .sge[0] = {
            .addr = cpu_to_le64(src), .length = cpu_to_le32(len),
            .lkey = cpu_to_le32(f->key[0]),
        },
    };

    qp_post(f, 0, false, &w);
    flush(f);
}

/* Wait for CQ 1's next CQE and return its status. */
static uint8_t next_cqe(PfnicFuzz *f, PfnicCqe *c)
{
    uint32_t n = f->cq_cons[0];

    for (int i = 0; i < 100; i++) {
        qtest_memread(f->qts, cqe_addr(f, 0, n), c, sizeof(*c));
        if (c->owner == (((n / CQ_SIZE) & 1) ^ 1)) {
            check_cqs(f);
            f->cq_cons[0] = n + 1;
            qtest_writel(f->qts, CQ_REC(0), f->cq_cons[0]);
            return c->status;
        }
        clock_step(f, 100 * SCALE_US);
    }
    pfz_fail(f, "no CQE");
}

/*
 * Fill @src (64 bytes) from @seed, put it in PASID 5's page 0 and WRITE it
 * through PASID 9's page 1 (pool page 4), which caches the translation and
 * PASID 9's entry; whether that WRITE succeeded with the bytes in place.
 */
static bool first_write(PfnicFuzz *f, uint8_t *src, uint8_t seed)
{
    uint8_t got[64];
    PfnicCqe c;

    for (int i = 0; i < sizeof(got); i++) {
        src[i] = seed + i;
    }
    map_page(f, 0, 0, pool_page(3), VTD_FL_P | VTD_FL_US);
    qtest_memwrite(f->qts, pool_page(3), src, sizeof(got));
    map_page(f, 1, 1, pool_page(4), VTD_FL_P | VTD_FL_RW | VTD_FL_US);
    post_write(f, va_of(0), va_of(1), sizeof(got));
    if (next_cqe(f, &c) != PFNIC_WC_SUCCESS) {
        return false;
    }
    qtest_memread(f->qts, pool_page(4), got, sizeof(got));
    return !memcmp(src, got, sizeof(got));
}

/* The same WRITE again; whether it succeeded with the bytes at @pa. */
static bool second_write(PfnicFuzz *f, const uint8_t *src, uint64_t pa)
{
    uint8_t got[64];
    PfnicCqe c;

    post_write(f, va_of(0), va_of(1), sizeof(got));
    if (next_cqe(f, &c) != PFNIC_WC_SUCCESS) {
        return false;
    }
    qtest_memread(f->qts, pa, got, sizeof(got));
    return !memcmp(src, got, sizeof(got));
}

bool pfnic_fuzz_remap_seen(PfnicFuzz *f, unsigned am)
{
    uint8_t src[64];

    if (!first_write(f, src, 0xa0)) {
        return false;
    }
    /* Remapped elsewhere, then invalidated as Linux does: IOTLB, device. */
    map_page(f, 1, 1, pool_page(5), VTD_FL_P | VTD_FL_RW | VTD_FL_US);
    if (!pfnic_fuzz_piotlb(f, 1, va_of(1), am)) {
        return false;
    }
    iq_submit(f, VTD_INV_DESC_DEV_PIOTLB | ((uint64_t)NIC_SID << 16) |
                 ((uint64_t)pasids[1] << 32), va_of(1));
    return second_write(f, src, pool_page(5));
}

bool pfnic_fuzz_pasid_switch_seen(PfnicFuzz *f, bool invalidate)
{
    uint8_t src[64];

    if (!first_write(f, src, 0x50)) {
        return false;
    }
    /*
     * PASID 9 now takes side 0's page tables, whose page 1 is another
     * page; then what Linux sends after changing a present PASID entry:
     * PASID cache, IOTLB and device-TLB of the PASID.
     */
    map_page(f, 0, 1, pool_page(6), VTD_FL_P | VTD_FL_RW | VTD_FL_US);
    mem_zero(f, pool_page(6), 4096);
    pasid_entry(f, pasids[1], VTD_PASID_ENTRY_P | VTD_SM_PASID_ENTRY_FLT, 3,
                fl_table(0, 4));
    if (invalidate) {
        iq_submit(f, VTD_INV_DESC_PC |
                     (uint64_t)VTD_INV_DESC_PASIDC_G_PASID_SI << 4 |
                     (3ULL << 16) | ((uint64_t)pasids[1] << 32), 0);
    }
    iq_submit(f, VTD_INV_DESC_PIOTLB | VTD_INV_DESC_PIOTLB_ALL_IN_PASID |
                 (3ULL << 16) | ((uint64_t)pasids[1] << 32), 0);
    iq_submit(f, VTD_INV_DESC_DEV_PIOTLB | ((uint64_t)NIC_SID << 16) |
                 ((uint64_t)pasids[1] << 32), va_of(1));
    return second_write(f, src, pool_page(6));
}

bool pfnic_fuzz_pde_switch_seen(PfnicFuzz *f)
{
    uint8_t src[64];

    if (!first_write(f, src, 0x30)) {
        return false;
    }
    /*
     * PASID 9's 2 MiB now goes through side 0's page table, whose page 1
     * is another page; then what Linux sends after it changes a page
     * directory entry: the range's PASID IOTLB (which covers the
     * paging-structure caches) and device-TLB.
     */
    map_page(f, 0, 1, pool_page(7), VTD_FL_P | VTD_FL_RW | VTD_FL_US);
    mem_zero(f, pool_page(7), 4096);
    mem_write64(f, fl_table(1, 2) + PD_INDEX * 8,
                fl_table(0, 1) | VTD_FL_P | VTD_FL_RW | VTD_FL_US);
    if (!pfnic_fuzz_piotlb(f, 1, va_of(1), 0)) {
        return false;
    }
    iq_submit(f, VTD_INV_DESC_DEV_PIOTLB | ((uint64_t)NIC_SID << 16) |
                 ((uint64_t)pasids[1] << 32), va_of(1));
    return second_write(f, src, pool_page(7));
}

void pfnic_fuzz_known_good(PfnicFuzz *f)
{
    uint8_t src[256], got[256];
    PfnicCqe c;
    uint32_t st;

    f->op = -1;
    for (int i = 0; i < sizeof(src); i++) {
        src[i] = i * 7 + 1;
    }
    /* PASID 5's page 0 -> pool page 3 (read-only: WRITE only reads it) */
    map_page(f, 0, 0, pool_page(3), VTD_FL_P | VTD_FL_US);
    qtest_memwrite(f->qts, pool_page(3) + 0x100, src, sizeof(src));
    /* PASID 9's page 1 -> pool page 4, writable */
    map_page(f, 1, 1, pool_page(4), VTD_FL_P | VTD_FL_RW | VTD_FL_US);

    /* The WRITE lands at the translated guest-physical page, only there. */
    post_write(f, va_of(0) + 0x100, va_of(1) + 0x40, sizeof(src));
    st = next_cqe(f, &c);
    PFZ_CHECK(f, st == PFNIC_WC_SUCCESS, "WRITE: status %u", st);
    PFZ_CHECK(f, c.opcode == PFNIC_WC_RDMA_WRITE &&
                 le32_to_cpu(c.byte_len) == sizeof(src), "WRITE: CQE");
    qtest_memread(f->qts, pool_page(4) + 0x40, got, sizeof(got));
    PFZ_CHECK(f, !memcmp(src, got, sizeof(src)), "WRITE: wrong bytes");
    PFZ_CHECK(f, qtest_readl(f->qts, pool_page(4) + 0x3c) == 0 &&
                 qtest_readl(f->qts, pool_page(4) + 0x140) == 0,
              "WRITE: bytes outside the target");
    PFZ_CHECK(f, prq_pending(f) == 0, "WRITE: page request for mapped pages");

    /*
     * A WRITE to PASID 9's page 2, not present: a page request for it,
     * LPIG set, and no completion until the answer.
     */
    post_write(f, va_of(0) + 0x100, va_of(2), sizeof(src));
    clock_step(f, SCALE_MS);
    PFZ_CHECK(f, prq_pending(f) == 1, "fault: %u page requests",
              prq_pending(f));
    {
        uint64_t h = dmar_read64(f, DMAR_PQH_REG);
        uint64_t lo = mem_read64(f, PRQ_BASE + h);
        uint64_t hi = mem_read64(f, PRQ_BASE + h + 8);

        PFZ_CHECK(f, ((lo >> 32) & 0xfffff) == pasids[1] &&
                     (hi & ~0xfffULL) == va_of(2) && (hi & VTD_PRD_WRR(1)) &&
                     (hi & VTD_PRD_LPIG(1)),
                  "fault: page request %" PRIx64 " %" PRIx64, lo, hi);
    }
    qtest_memread(f->qts, cqe_addr(f, 0, f->cq_cons[0]), &c, sizeof(c));
    PFZ_CHECK(f, c.owner != (((f->cq_cons[0] / CQ_SIZE) & 1) ^ 1),
              "fault: completed before the response");
    prq_answer(f, true, 0);
    st = next_cqe(f, &c);
    PFZ_CHECK(f, st == PFNIC_WC_SUCCESS, "served fault: status %u", st);
    qtest_memread(f->qts, pool_page(2 * 7 + 1), got, sizeof(got));
    PFZ_CHECK(f, !memcmp(src, got, sizeof(src)),
              "served fault: wrong bytes");

    /* A FILL of a page answered "invalid" fails with PAGE_FAULT. */
    {
        PfnicDesc d = {
            .opcode = PFNIC_OP_FILL, .dst = cpu_to_le64(va_of(9)),
            .len = cpu_to_le64(64), .pattern = cpu_to_le64(0x55),
        };

        qtest_memwrite(f->qts, RING(0), &d, sizeof(d));
        f->ring_tail[0] = 1;
        reg_write(f, PFNIC_REG_RING_DB, 1 << 16 | 1);
        clock_step(f, SCALE_MS);
        PFZ_CHECK(f, prq_pending(f) == 1, "FILL: %u page requests",
                  prq_pending(f));
        prq_answer(f, false, 1);
        clock_step(f, SCALE_MS);
        st = qtest_readl(f->qts, RING(0) + offsetof(PfnicDesc, status));
        PFZ_CHECK(f, st == (PFNIC_DESC_DONE | PFNIC_ST_PAGE_FAULT),
                  "FILL: status %x", st);
    }
    check_all(f);
}

PfnicFuzz *pfnic_fuzz_new(QTestState *qts, void (*flush_fn)(QTestState *qts))
{
    PfnicFuzz *f = g_new0(PfnicFuzz, 1);

    f->qts = qts;
    f->flush = flush_fn;
    f->trace = getenv("PFNIC_FUZZ_TRACE");
    return f;
}

void pfnic_fuzz_free(PfnicFuzz *f)
{
    g_free(f);
}
