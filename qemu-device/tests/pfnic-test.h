/*
 * pfnic qtests: what the areas share. A pfnic (libqos/pfnic.c) behind a
 * pcie-root-port on q35, reached through libqos (configuration space,
 * extended capabilities included, through the q35 bus; BARs through the
 * driver), its registers, the command mailbox, contexts, queues and the
 * helpers the tests of several areas use.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef PFNIC_TEST_H
#define PFNIC_TEST_H

#include "qemu/bswap.h"
#include "qemu/cutils.h"
#include "qemu/module.h"
#include "qemu/units.h"
#include "libqtest-single.h"
#include "qobject/qbool.h"
#include "qobject/qdict.h"
#include "qobject/qnum.h"
#include <sys/socket.h>
#include <sys/un.h>
#include "hw/pci/pci_regs.h"
#include "hw/net/pfnic/pfnic_regs.h"
#include "libqos/qgraph.h"
#include "libqos/pci-pc.h"
#include "libqos/pfnic.h"
#include "fuzz/pfnic_fuzz.h"

/*
 * The pfnic the helpers address: the qos graph's object, or after a
 * restart or a system reset the one setup_topology() reaches; in the wire
 * tests the one on rp0 (A) or on rp1 (B), switched with use_nic().
 */
extern QPfnic *pfnic_nic;
#define BAR0_ADDR       (pfnic_nic->bar0.addr)
#define BAR4_ADDR       (pfnic_nic->bar4.addr)
#define BAR2_ADDR       (pfnic_nic->bar2.addr)
#define BAR1_ADDR       (pfnic_nic->bar1.addr)   /* device memory, ABI 1.13 */

/*
 * Register @fn as the qos test @name of the "pfnic" node, its pfnic with
 * @device_opts (or none); @before edits the command line (and gives the
 * test its data) and ends with pfnic_qos_before(), or is NULL.
 */
void pfnic_add_test(const char *name, QOSTestFunc fn, const char *device_opts,
                    QOSBeforeTest before);
/*
 * The same for a wire test: pfnic A (the graph's, on rp0, with @a_opts)
 * and B (on rp1, with @b_opts) joined by a QEMU hub.
 */
void pfnic_add_wire_test(const char *name, QOSTestFunc fn, const char *a_opts,
                         const char *b_opts, QOSBeforeTest before);
/*
 * Reach the pfnic on rp0 of the machine global_qtest runs (again after a
 * system reset: routes its root port), and make it the current one.
 */
void setup_topology(void);
/*
 * The start of a wire test (pfnic_add_wire_test()): A is the graph's @obj,
 * B the pfnic on rp1; both BARs mapped, A current.
 */
void wire_qos_start(void *obj, QGuestAllocator *alloc);
/* Make pfnic A (0) or B (1) the one the helpers address. */
void use_nic(int n);
/*
 * Every pfnic test's QOSGraphTestOptions.before, or what its own calls
 * last: keeps the test's command line, which pfnic_qos_restart() and
 * pfnic_qos_cmdline() give back.
 */
void *pfnic_qos_before(GString *cmd_line, void *arg);
const char *pfnic_qos_cmdline(void);
/*
 * A qos test's start and end: its pfnic is the graph's object @obj, its
 * guest memory (pfnic_mem) from @alloc; at the end QEMU quits, and the
 * next test starts its own.
 */
void pfnic_qos_start(void *obj, QGuestAllocator *alloc);
void pfnic_qos_end(void);
/*
 * Within a qos test: quit QEMU and start it again with the test's command
 * line and @extra added to pfnic's -device (the graph's line ends with it).
 */
void pfnic_qos_restart(const char *extra);

uint32_t nic_cfg_readl(uint16_t off);
uint16_t nic_cfg_readw(uint16_t off);
void nic_cfg_writel(uint16_t off, uint32_t val);
void nic_cfg_writew(uint16_t off, uint16_t val);
/*
 * Map BAR0, BAR1 (device memory, when there is some), BAR2 and BAR4 (both
 * 64-bit) and enable memory decoding.
 */
void map_bars(void);
uint32_t reg_read(uint32_t reg);
void reg_write(uint32_t reg, uint32_t val);
/* Fill ids[] with the extended capability IDs in list order. */
int ext_caps(uint16_t *ids, uint16_t *offs, int max);

/*
 * Guest memory for the tests' rings, records, tables and data pages: a
 * region each test takes from libqos's guest allocator (pfnic_qos_start()),
 * 16 MiB aligned. The addresses below are offsets into it.
 */
extern uint64_t pfnic_mem;
#define PFNIC_GPA(off)  (pfnic_mem + (off))
#define PFNIC_MEM_SIZE  0x1100000ULL

#define RING_ADDR       PFNIC_GPA(0x300000ULL)  /* a descriptor ring */

uint16_t find_cap(uint8_t id);

/*
 * Enable MSI-X with every vector masked, so that a notify leaves a pending
 * bit; return the offset of the PBA in BAR4.
 */
uint32_t msix_enable_masked(void);

void ctx_select(uint32_t ctx);

bool ctx_active(uint32_t ctx);

/* Enable one extended capability the way the IOMMU driver does. */
void enable_ext_cap(uint16_t id);

/* What a context needs, enabled as Linux does when it binds SVA with PRI. */
void enable_sva_caps(void);

/* Expect the last write to have been refused as a guest error. */
void assert_refused(void);

/* Enable context @ctx with PASID 5 and a ring of 8 at @ring, vector 2. */
void start_ctx(uint32_t ctx, uint64_t ring);

/* The driver rings a context's descriptor ring through RING_DB in BAR0. */
void doorbell(uint32_t ctx, uint32_t tail);

/* Enable context @ctx without a PASID, a ring of 8 at @ring, vector 2. */
void start_ctx_no_pasid(uint32_t ctx, uint64_t ring);

/* Nothing went to ATS or PRI: every device counter is still 0. */
void assert_no_ats_pri(void);

/* --- verbs (docs/verbs.md) --------------------------------------------- */

/* Guest memory for the verbs objects */
#define CQ_RING         PFNIC_GPA(0x400000ULL)  /* CQ n: + n * 0x10000 */

#define CQ_REC          PFNIC_GPA(0x480000ULL)  /* CQ n: + n * 0x100 */

#define SQ_ADDR         PFNIC_GPA(0x500000ULL)  /* QP n: + n * 0x10000 */

#define RQ_ADDR         PFNIC_GPA(0x600000ULL)

#define QP_REC          PFNIC_GPA(0x700000ULL)  /* QP n: + n * 0x100 */

#define EQ_ADDR         PFNIC_GPA(0x780000ULL)

#define EQ_VEC          5

uint32_t cmd(uint32_t op, uint32_t *args, int n);

uint32_t cmd1(uint32_t op, uint32_t a0);

/* MR_SET with a8 @flags (all arguments: a8 must not be a stale value) */
uint32_t mr_set_flags(uint32_t index, uint32_t ctx, uint32_t pd,
                      uint32_t access, uint64_t addr, uint64_t len,
                      uint32_t flags, uint32_t *key);

uint32_t mr_set(uint32_t index, uint32_t ctx, uint32_t pd,
                uint32_t access, uint64_t addr, uint64_t len,
                uint32_t *key);

/* Which CQs were created with TIMESTAMP (ABI 1.12): 64-byte CQEs */
extern bool cq_ts[PFNIC_MAX_CQS];

/* CQ_CREATE with a7 @flags (all arguments: a7 must not be a stale value) */
uint32_t cq_create_flags(uint32_t cqn, uint32_t ctx, uint32_t log2,
                         uint32_t flags);

uint32_t cq_create(uint32_t cqn, uint32_t ctx, uint32_t log2);

/* QP_CREATE with receive queue entries 2^@rq_log2, a13 @flags, a14 @srqn */
uint32_t qp_create_full(uint32_t qpn, uint32_t ctx, uint32_t pd,
                        uint32_t scq, uint32_t rcq, uint32_t log2,
                        uint32_t rq_log2, uint32_t flags,
                        uint32_t srqn);

uint32_t qp_create(uint32_t qpn, uint32_t ctx, uint32_t pd,
                   uint32_t scq, uint32_t rcq, uint32_t log2,
                   uint32_t flags);

/* A QP (queues of 16) whose receive WQEs come from SRQ @srqn (ABI 1.11) */
uint32_t qp_create_srq(uint32_t qpn, uint32_t ctx, uint32_t pd,
                       uint32_t scq, uint32_t rcq, uint32_t srqn);

/*
 * The local ACK timeout the tests' loopback QPs have (IB encoding: 65.5 us)
 * and how long a sender to an unready peer waits before RETRY_EXC_ERR with
 * retry_cnt 7: the first try and 7 retries, a timeout each.
 */
#define TEST_ACK_TIMEOUT        4

uint32_t qp_modify_full(uint32_t qpn, uint32_t state, uint32_t access,
                        uint32_t dest, uint32_t rnr_timer,
                        uint32_t rnr_retry, uint32_t retry_cnt,
                        uint32_t timeout);

uint32_t qp_modify(uint32_t qpn, uint32_t state, uint32_t access,
                   uint32_t dest, uint32_t rnr_timer,
                   uint32_t rnr_retry);

/* RESET -> INIT -> RTR -> RTS, connected to @dest. */
void qp_connect(uint32_t qpn, uint32_t dest, uint32_t rnr_retry);

uint32_t qp_query(uint32_t qpn, uint32_t *a);

uint32_t qp_state(uint32_t qpn);

void post_wqe(uint64_t queue, uint32_t slot, uint8_t opcode,
              uint8_t flags, uint64_t wr_id, int num_sge,
              uint64_t addr, uint32_t len, uint32_t key);

void verbs_db(uint32_t ctx, uint32_t off, uint32_t val);

/*
 * The device clock (ABI 1.12) as a process reads it in context @ctx's
 * doorbell page: high, low, high again until the two high words agree.
 */
uint64_t clock_read(uint32_t ctx);

/* Where CQE @slot of CQ @cqn is: 32 or (TIMESTAMP) 64 bytes a slot */
uint64_t cqe_addr(uint32_t cqn, uint32_t slot);

PfnicCqe read_cqe(uint32_t cqn, uint32_t slot);

/* Wait for the CQE in @slot to turn owned by software (@owner). */
PfnicCqe wait_cqe(uint32_t cqn, uint32_t slot, uint8_t owner);

void read_eqe(uint32_t slot, uint8_t *type, uint8_t *owner,
              uint32_t *object);

void eq_setup(uint32_t size);

/*
 * Context 1 (with the SVA capabilities on) and its MR 1 (PD 7), with every
 * access, over [0x10000000, 0x30000000). Returns the MR's key.
 */
uint32_t ctx_and_mr_setup(void);

/*
 * A context (1, with the SVA capabilities on), an MR of it (index 1, PD
 * 7), CQ 1 (send) and CQ 2 (receive), and QPs 2 and 3 connected to each
 * other in RTS. Returns the MR's key.
 */
uint32_t verbs_setup(uint32_t rnr_retry);

/* An RDMA WRITE of @len bytes from 0x10000000 to @raddr with @rkey. */
void post_write(uint32_t qpn, uint32_t slot, uint64_t wr_id,
                uint32_t lkey, uint32_t rkey, uint64_t raddr,
                uint32_t len);

/* A signaled zero-length SEND in send queue slot @slot, rung. */
void post_send0(uint32_t qpn, uint32_t slot, uint64_t wr_id,
                uint32_t key);

/* An empty receive WQE in receive queue slot @slot, rung. */
void post_recv0(uint32_t qpn, uint32_t slot, uint64_t wr_id,
                uint32_t key);

/* A QP that a failed WQE left in ERR, back to RTS towards @dest. */
void qp_reconnect(uint32_t qpn, uint32_t dest);

uint64_t ctx_access_errors(uint32_t ctx);

/* Run descriptor number @n (free-running) in context 1's ring of 8. */
uint32_t run_desc(uint32_t n, PfnicDesc *d);

/* --- translation tables (ABI 1.8) ---------------------------------------- */
#define MTT_SRC         PFNIC_GPA(0x800000ULL)  /* entries MTT_WRITE reads */

#define DATA_PAGE(n)    PFNIC_GPA(0x1000000ULL + (n) * 0x1000ULL)

#define ALL_ACCESS      (PFNIC_ACCESS_LOCAL_WRITE | \
                         PFNIC_ACCESS_REMOTE_WRITE | \
                         PFNIC_ACCESS_REMOTE_READ | \
                         PFNIC_ACCESS_REMOTE_ATOMIC)

#define MTT_RW          (PFNIC_MTT_VALID | PFNIC_MTT_READ | PFNIC_MTT_WRITE)

/* Entry indexes above 2^32 (an implicit table's, ABI 1.10): a5's high word */
uint32_t mtt_write(uint32_t mr, uint64_t first, uint32_t count,
                   uint64_t src);

uint32_t mtt_invalidate(uint32_t mr, uint64_t first, uint32_t count);

/* Point entries [first, first + n) of MR @mr at @pages, with @bits. */
uint32_t mtt_map(uint32_t mr, uint64_t first, const uint64_t *pages,
                 uint32_t n, uint64_t bits);

/* A table MR @index of @ctx (PD 7, every access) mapping @n @pages. */
uint32_t table_mr(uint32_t index, uint32_t ctx, uint64_t addr,
                  uint64_t len, const uint64_t *pages, uint32_t n);

/*
 * Guest memory as the device sees [va, va + len) of an MR at @base whose
 * table maps @pages: read or written page by page.
 */
void table_rw(const uint64_t *pages, uint64_t base, uint64_t va,
              void *buf, size_t len, bool write);

/* Send and receive queue tails and CQEs seen, per QP and CQ */
extern uint16_t sq_next[PFNIC_MAX_QPS], rq_next[PFNIC_MAX_QPS];

extern uint32_t cq_seen[8];

void table_counts_reset(void);

/* Post @w as it is (little endian) on QP @qpn of context @ctx, and ring. */
void table_post_wqe(uint32_t ctx, uint32_t qpn, const PfnicWqe *w);

/* Post a signaled send WQE of one SGE on QP @qpn of context @ctx. */
void table_post(uint32_t ctx, uint32_t qpn, uint8_t op, uint64_t wr_id,
                uint64_t laddr, uint32_t len, uint32_t lkey,
                uint64_t raddr, uint32_t rkey, uint64_t add);

void table_recv(uint32_t ctx, uint32_t qpn, uint64_t wr_id,
                uint64_t addr, uint32_t len, uint32_t key);

/* The next CQE of CQ @cqn (16 entries), consumed: its wr_id and status. */
PfnicCqe table_cqe(uint32_t cqn, uint64_t wr_id, uint8_t status);

/*
 * Two contexts without a PASID (no ATS, PASID nor PRI on the device) and a
 * table MR each, whose entries point at scattered guest pages (DMA without
 * PASID is guest physical here: data moves in a qtest). QP 2 (context 1,
 * CQ 1) and QP 3 (context 2, CQ 2) are connected.
 */
#define TL_VA           0x10000800ULL   /* MR 1: not page aligned */

#define TL_LEN          0x3800ULL       /* four pages: 0x10000000.. */

#define TR_VA           0x20000000ULL   /* MR 2: four pages */

#define TR_LEN          0x4000ULL

/*
 * The pages of MR 1 (DATA_PAGE 5, 2, 9, 7) and MR 2 (12, 20, 15, 11):
 * pfnic_qos_start() fills them in, in the test's guest memory.
 */
extern uint64_t tl_pages[4], tr_pages[4];

/*
 * A loopback pair over translation tables: table_pair_start() zeroes the
 * data pages and starts contexts 1 and 2; once the caller has made MR 1 on
 * context 1 and MR 2 on context 2, table_pair_connect() makes CQs 1 and 2
 * and QP 2 (context 1) and QP 3 (context 2), connected to each other.
 */
void table_pair_start(void);
void table_pair_connect(void);
void tables_setup(uint32_t *lkey, uint32_t *rkey);

/* Bytes of @len from @seed, different at every offset */
void pattern(uint8_t *p, size_t len, uint8_t seed);

/* --- fast registration (ABI 1.21) ---------------------------------------- */
#define FAST_PBL        PFNIC_GPA(0x840000ULL)  /* REG_MR page lists */

/* MR_SET of FAST MR @index of @ctx and @pd, a table of @pages */
uint32_t fast_mr(uint32_t index, uint32_t ctx, uint32_t pd, uint32_t pages,
                 uint32_t *key);

/* A signaled REG_MR of @pages at @pbl to @key, [@iova, + @len), @access */
PfnicWqe reg_mr_wqe(uint64_t wr_id, uint32_t key, uint64_t iova,
                    uint64_t len, uint32_t access, uint64_t pbl,
                    uint32_t pages);

/* A signaled LOCAL_INV of @key */
PfnicWqe local_inv_wqe(uint64_t wr_id, uint32_t key);

/* A signaled SEND_WITH_INV of [@laddr, + @len) (0: no SGE) asking @key's */
PfnicWqe send_inv_wqe(uint64_t wr_id, uint64_t laddr, uint32_t len,
                      uint32_t lkey, uint32_t key);

/* The page list of @n @pages at @pbl */
void fast_pbl(uint64_t pbl, const uint64_t *pages, uint32_t n);

/* @key with its low byte moved on by @n (ib_inc_rkey), its base kept */
static inline uint32_t key_next(uint32_t key, uint32_t n)
{
    return (key & ~0xffu) | ((key + n) & 0xff);
}

/* --- driver-managed faults (ABI 1.9) ------------------------------------- */
#define FAULT_TABLE     (PFNIC_MR_FLAG_TABLE | PFNIC_MR_FLAG_FAULT)

/* An event queue and what the test has read of it */
typedef struct TestEq {
    uint64_t base;
    uint32_t size;
    uint32_t seen;
} TestEq;

extern TestEq eq;

void test_eq_setup(TestEq *q, uint64_t base, uint32_t size);

typedef struct TestEqe {
    uint8_t type;
    uint8_t flags;
    uint32_t object;
    uint64_t data;
} TestEqe;

/* The next event of @q if the device has queued it (not consumed) */
bool test_eq_peek(TestEq *q, TestEqe *ev);

/* Take the next event of @q (waiting for it a little), and consume it. */
TestEqe test_eq_next(TestEq *q);

/* Nothing more in @q, even after a while. */
void test_eq_none(TestEq *q);

/*
 * The next event of @q is PAGE_FAULT for entries @first + @count of @mr
 * (bits 47:32 of @first at 63:48 of the data, ABI 1.10).
 */
void expect_fault_on(TestEq *q, uint32_t mr, uint64_t first,
                     uint32_t count, bool write);

/* The first entry's high word in a4 (ABI 1.10) */
uint32_t fault_resume(uint32_t mr, uint64_t first, uint32_t count,
                      uint32_t status);

/* Make entries [first, first + n) of @mr point at @pages, then resume. */
void fault_serve(uint32_t mr, uint64_t first, const uint64_t *pages,
                 uint32_t n);

/* No completion in CQ @cqn after the ones the test has taken. */
void assert_no_cqe(uint32_t cqn);

/* MR_QUERY @mr: page_faults, page_faults_handled, page_fault_groups */
void assert_mr_faults(uint32_t mr, uint64_t faults, uint64_t handled,
                      uint64_t groups);

uint32_t fault_mr(uint32_t index, uint32_t ctx, uint64_t addr,
                  uint64_t len);

/* --- shared receive queues (ABI 1.11) ------------------------------------ */
#define SRQ_RING        PFNIC_GPA(0x880000ULL)  /* SRQ n: + n * 0x2000 */

#define SRQ_REC         PFNIC_GPA(0x8f0000ULL)  /* SRQ n: + n * 0x100 */

/* The receive tail software has posted up to, per SRQ */
extern uint16_t srq_next[PFNIC_MAX_SRQS];

uint32_t srq_create_at(uint32_t srqn, uint32_t ctx, uint32_t pd,
                       uint64_t ring, uint32_t log2, uint64_t rec);

/* SRQ @srqn at its place in guest memory; its record starts all ones. */
uint32_t srq_create(uint32_t srqn, uint32_t ctx, uint32_t pd,
                    uint32_t log2);

/* SRQ_QUERY @srqn: a0 limit, a1 head, a2 tail, a3 QPs, a4 limit events */
void srq_query(uint32_t srqn, uint32_t *a);

/* The head the device wrote to SRQ @srqn's record */
uint32_t srq_rec_head(uint32_t srqn);

/* A receive WQE of one SGE on SRQ @srqn (16 entries) of @ctx, rung. */
void srq_post(uint32_t ctx, uint32_t srqn, uint64_t wr_id,
              uint64_t addr, uint32_t len, uint32_t key);

/* An RDMA WRITE with immediate 0x78563412 of one SGE on QP @qpn of @ctx */
void table_post_imm(uint32_t ctx, uint32_t qpn, uint64_t wr_id,
                    uint64_t laddr, uint32_t len, uint32_t lkey,
                    uint64_t raddr, uint32_t rkey);

/*
 * CQE @n of CQ @cqn (2^@log2 entries), once software owns it, then
 * consumed: in a TIMESTAMP CQ, the timestamp in *@ts, and the reserved
 * bytes after it must be 0.
 */
PfnicCqe ts_cqe(uint32_t cqn, uint32_t log2, uint32_t n, uint64_t *ts);

/* MR_SET with DM: bytes [start, start + len) of the device memory */
uint32_t dm_mr(uint32_t index, uint32_t ctx, uint32_t pd,
               uint32_t access, uint64_t start, uint64_t len,
               uint32_t *key);

/* The CPU's view of the device memory, through BAR1 */
void dm_write(uint64_t off, const void *buf, size_t len);

void dm_read(uint64_t off, void *buf, size_t len);

/* MR_QUERY @mr: every page_* counter is 0 (a10/a11 count refusals). */
void assert_mr_no_pages(uint32_t mr);

/* --- the wire (docs/wire.md) ------------------------------------------- */

#define IP_A            0x0a000001      /* 10.0.0.1 */
#define IP_B            0x0a000002      /* 10.0.0.2 */
#define IP_S            0x0a000063      /* 10.0.0.99: a stranger's */
#define WIRE_SQ_PSN_A   0xfffff0        /* A's PSNs wrap around 2^24 */
#define WIRE_SQ_PSN_B   0x000100

uint32_t wire_modify(uint32_t qpn, uint32_t state, uint32_t dest,
                     uint32_t dest_ip, uint32_t sq_psn, uint32_t rq_psn,
                     uint32_t timeout, uint32_t retry,
                     uint32_t rnr_retry);

/*
 * On the current NIC: CQs @cq and @cq + 1 of context 1, and its QP @qpn
 * (PD 7), connected to QP @dest at @dest_ip.
 */
void wire_qp_flags(uint32_t cq, uint32_t qpn, uint32_t dest,
                   uint32_t dest_ip, uint32_t sq_psn, uint32_t rq_psn,
                   uint32_t timeout, uint32_t scq_flags,
                   uint32_t rcq_flags);

void wire_qp(uint32_t cq, uint32_t qpn, uint32_t dest,
             uint32_t dest_ip, uint32_t sq_psn, uint32_t rq_psn,
             uint32_t timeout);

/*
 * On the current NIC: context 1, MR 1 (PD 7), and wire_qp()'s CQs and QP.
 * Returns the MR's key.
 */
uint32_t wire_side(uint32_t cq, uint32_t qpn, uint32_t dest,
                   uint32_t ip, uint32_t dest_ip, uint32_t sq_psn,
                   uint32_t rq_psn, uint32_t timeout);

/* A's QP 2 (CQs 1, 2) and B's QP 3 (CQs 3, 4), connected over the wire. */
void wire_setup(uint32_t timeout, uint32_t *key_a, uint32_t *key_b);

uint32_t port_counter(int c);

/* Make pfnic @n current, give its port @ip, start its context 1 (no PASID) */
void wire_ctx_no_pasid(int n, uint32_t ip);

/* Wait up to @ms of virtual time for the CQE in @slot. */
PfnicCqe wait_cqe_ms(uint32_t cqn, uint32_t slot, uint32_t ms);

/* QMP set_link on netdev @name (the wire tests': w0 is A's, w1 B's) */
void set_link(const char *name, bool up);

/*
 * MACs: pfnic A's and B's (pfnic_add_wire_test()), a stranger's on the
 * hub, broadcast, and zeros
 */
extern const uint8_t mac_a[6], mac_b[6], mac_s[6], mac_bcast[6];
extern const uint8_t mac_zero[6];

/* The IPv4 header checksum of @n bytes at @p: 0 over a correct header */
uint16_t ip_csum(const uint8_t *p, size_t n);

/*
 * An ARP frame (42 bytes, returned) of @op from @smac at @sip to @tip,
 * @tmac in its target field (zeros for a request), sent to @dmac
 */
size_t arp_frame(uint8_t *f, uint16_t op, const uint8_t *dmac,
                 const uint8_t *smac, uint32_t sip, const uint8_t *tmac,
                 uint32_t tip);

/*
 * A third port on the wire tests' hub, behind a unix datagram socket the
 * test holds: it sees the frames the devices send and sends its own.
 */
typedef struct Stranger {
    int fd;
    char *ours, *qemus;
} Stranger;

/*
 * Open @st's socket; returns the options that give QEMU its other end
 * (netdev "inj") on the hub as port "w2"
 */
char *stranger_open(Stranger *st);
/* Send a frame (waiting while QEMU's queue is full), then step 100 us. */
void stranger_send(Stranger *st, const uint8_t *f, size_t len);
/* The next frame on the hub with EtherType @type, or 0 if none came. */
ssize_t stranger_recv(Stranger *st, uint16_t type, uint8_t *f, size_t max);
/* Take what the devices sent so far, unread. */
void stranger_drain(Stranger *st);
void stranger_close(Stranger *st);
/*
 * The QOSGraphTestOptions.before of a wire test with a stranger on the
 * hub: its Stranger is the test's data.
 */
void *stranger_qos_before(GString *cmd_line, void *arg);

#endif /* PFNIC_TEST_H */
