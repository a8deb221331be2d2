/*
 * pfnic: a PCIe RDMA NIC with ATS, PASID and PRI
 *
 * Device state shared by the PCI glue (pfnic.c), the control register
 * block (pfnic_ctrl.c), the DMA engine (pfnic_engine.c), the verbs
 * (pfnic_verbs.c: tables, commands, CQEs and events; pfnic_qp.c: QP
 * execution in loopback, and the receive WQEs of QPs and shared receive
 * queues), the Ethernet port (pfnic_net.c), its Ethernet queues
 * (pfnic_eth.c) and the RoCEv2 transport of QPs on the wire
 * (pfnic_roce.c).
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_PFNIC_H
#define HW_PFNIC_H

#include "hw/pci/pci_device.h"
#include "qom/object.h"

#define TYPE_PFNIC "pfnic"
OBJECT_DECLARE_SIMPLE_TYPE(PfnicState, PFNIC)

#include "hw/pci/pci.h"
#include "net/net.h"
#include "pfnic_regs.h"
#include "pfnic_cmd.h"

typedef struct PfnicStats {
    uint32_t count[PFNIC_CNT_NR];   /* PfnicCounter; register order */
    uint32_t fault_lat[PFNIC_FAULT_LAT_BUCKETS];
    uint32_t group_pages[PFNIC_GROUP_PAGES_BUCKETS];
} PfnicStats;

/*
 * Something whose work waits for pages: a context's current descriptor, a
 * QP's current send WQE, or a wire QP's responder. It may have several
 * page request groups out (PfnicGroup); it sleeps while a page its work
 * needs is in one of them.
 */
typedef struct PfnicPageWait {
    bool waiting;               /* the work needs a page of a group out */
    bool fault;                 /* nobody can make a page it needs present */
    bool retry_prq;             /* its request could not be sent: resend */
    bool remote;                /* the last miss was of the remote side */
    uint32_t ctx;               /* context whose PASID the last miss used */
    uint32_t pasid;
    uint64_t fault_addr;        /* the last miss, for a resend and refaults */
    uint64_t fault_len;         /* bytes from fault_addr the work still needs */
    bool fault_write;
    bool prefetch;              /* a PREFETCH's: count made-present pages */
    uint32_t out;               /* its groups outstanding */
    uint32_t refaults;          /* page requests in a row for one page */
    bool taken_back;            /* the OS invalidated fault_addr's page since */
    /* The pages of its last group answered with a failure */
    uint32_t failed_pasid;
    uint64_t failed_start, failed_end;
    int32_t mr;                 /* MR the faulting chunk used, or -1 */
    uint32_t mr_key;
    uint32_t requests;          /* sent for the current work item */
    /*
     * ABI 1.9: the FAULT MR entry it waits for the driver to fill, and the
     * report (PfnicMrFault) out for it: its index + 1, 0 when none
     */
    uint32_t drv;
    uint64_t drv_entry;
} PfnicPageWait;

/*
 * A page request group: pages [start, end) of a PASID, the missing ones
 * requested under one group index (the index of the group in the device's
 * table, so unique across the device), the last with LPIG. PARTIAL: the
 * IOMMU's queue filled up before the last page went; the group is sent
 * again, whole, under the same index (Linux merges partial requests by
 * index alone, so the index is not reused before its LPIG went out).
 * STRANDED: a PARTIAL group whose context stopped; its index stays taken
 * until a reset.
 */
typedef enum {
    PFNIC_GROUP_FREE,
    PFNIC_GROUP_OUT,            /* sent, waiting for its response */
    PFNIC_GROUP_PARTIAL,        /* some pages queued, LPIG not yet */
    PFNIC_GROUP_STRANDED,       /* PARTIAL when its context stopped */
} PfnicGroupState;

typedef struct PfnicGroup {
    PfnicGroupState state;
    PfnicPageWait *w;           /* NULL once its waiter moved on */
    bool advisory;              /* look-ahead: its failure fails nothing */
    bool write;
    bool prefetch;
    uint32_t ctx;               /* the context whose PASID it is for */
    uint32_t pasid;
    uint64_t start, end;
    uint32_t pages;             /* counted against the PRI allocation */
    int32_t mr;
    uint32_t mr_key;
    int64_t sent_ns;
} PfnicGroup;

/* Group indices: PRGI is 9 bits */
#define PFNIC_GROUPS                512
/*
 * Pages in one page request group, at most: the range one ATS request
 * probes. A work request's side gets one group per this many pages, and
 * a QP asks for its two sides a window of this size at a time.
 */
#define PFNIC_GROUP_PAGES           64
#define PFNIC_QP_WINDOW             (PFNIC_GROUP_PAGES * PFNIC_PAGE_SIZE)
/* Groups one waiter may have out at once */
#define PFNIC_WAIT_GROUPS           16
/* A context may have at most 1/PFNIC_PRI_SHARE of the PRI allocation out. */
#define PFNIC_PRI_SHARE             4

/*
 * A driver-managed fault (ABI 1.9, docs/verbs.md): entries [first, first +
 * count) of a FAULT MR reported in one PAGE_FAULT event, while some work
 * waits for one of them. It goes with its last waiter (woken by
 * FAULT_RESUME, or its work gone), so there are never more of them than
 * waiters: a QP's two sides.
 */
typedef struct PfnicMrFault {
    uint32_t waiters;           /* 0: free */
    bool held;                  /* not queued yet: no room in the EQ */
    bool write;
    uint32_t mr;                /* the MR's index and key */
    uint32_t mr_key;
    uint64_t first;
    uint32_t count;
    uint64_t left;              /* bit i: entry first + i not resumed */
    uint64_t seq;               /* held events are queued in this order */
} PfnicMrFault;

#define PFNIC_MR_FAULTS             (2 * PFNIC_MAX_QPS)

/* Pages a page request group made present: [start, end), for @write or not */
typedef struct PfnicRefill {
    uint64_t start, end;
    bool write;
} PfnicRefill;

#define PFNIC_REFILLS               4

/* The device side of one process: see docs/registers.md, "Hardware contexts" */
typedef struct PfnicContext {
    PfnicState *s;
    uint32_t index;
    uint32_t pasid;
    bool enabled;
    /*
     * Started with CTX_CTRL.NO_PASID: no address space, so nothing may go
     * to ATS or PRI for it; its memory is reached through table MRs only.
     */
    bool no_pasid;
    bool stuck;                 /* fault injection: ACTIVE after a stop */
    uint32_t mrs;               /* valid MRs (memory keys) of the context */
    uint64_t remote_access_errors;  /* refused remote accesses to us */
    bool access_alert_armed;    /* the next refusal queues ACCESS_ERROR */

    /* Descriptor ring (driver memory) and doorbell */
    uint64_t ring;
    uint32_t ring_size;
    uint32_t vector;
    uint32_t head;
    uint32_t tail;

    /* The descriptor being executed */
    bool busy;
    PfnicDesc desc;
    uint64_t done;              /* bytes completed */
    PfnicPageWait pw;
    /*
     * Pages the last page request groups made present, in this address
     * space: the next miss in one translates the rest of it with one ATS
     * request. Several, since groups come back together (both sides of a
     * work request's window).
     */
    PfnicRefill refill[PFNIC_REFILLS];
    uint32_t refill_next;
    int32_t prefetch_mr;        /* PREFETCH: the MR of the key */
    uint32_t groups_out;        /* groups for this context's PASID */
    uint32_t pages_out;
    PfnicStats stats;           /* since the context started */

    /* Page request responses and device-IOTLB invalidations for our PASID */
    IOMMUPRINotifier pri_notifier;
    IOMMUNotifier iotlb_notifier;
    bool pri_registered;
    bool iotlb_registered;
} PfnicContext;

/* The address translation cache: 4 KiB entries, direct mapped. */
#define PFNIC_ATC_ENTRIES 512

typedef struct PfnicAtcEntry {
    bool valid;
    uint32_t pasid;
    uint64_t vpage;
    hwaddr paddr;
    AddressSpace *as;
    IOMMUAccessFlags perm;
} PfnicAtcEntry;

/* A memory key table entry (docs/verbs.md, "Memory keys") */
typedef struct PfnicMr {
    bool valid;
    uint32_t key;
    uint32_t ctx;
    uint32_t pd;
    uint32_t access;
    uint64_t addr;
    uint64_t len;               /* UINT64_MAX with addr 0: implicit MR */
    uint64_t count[PFNIC_MR_CNT_NR];
    /*
     * MR_SET with TABLE: the driver's translation table, an entry
     * (PFNIC_MTT_*) per 4 KiB page from addr & PFNIC_PAGE_MASK; NULL for
     * an MR translated through its context's PASID
     */
    uint64_t *mtt;
    /*
     * The implicit MR's table (ABI 1.10): entry i is the page at i * 4 KiB,
     * and only the VALID ones written are kept, as { i, entry } pairs keyed
     * by i (g_int64_hash); NULL otherwise
     */
    GHashTable *sparse;
    uint64_t mtt_entries;
    /* MR_SET with FAULT too: a refused entry waits for the driver */
    bool fault;
    /*
     * MR_SET with DM (ABI 1.13): bytes [dm_start, dm_start + len) of the
     * device memory, zero-based (addr is 0), the range checked by MR_SET
     */
    bool dm;
    uint64_t dm_start;
    /*
     * MR_SET with DMA (ABI 1.20): addresses are the device's own DMA
     * addresses, untranslated (the driver's kernel memory, as the IOMMU
     * maps it for the device's domain)
     */
    bool dma;
    /*
     * MR_SET with FAST (ABI 1.21): a table of mtt_entries pages that REG_MR
     * work requests fill. Its key names nothing until one registers it
     * (fast_reg), nor after an invalidation frees it again.
     */
    bool fast;
    bool fast_reg;
} PfnicMr;

typedef struct PfnicCq {
    bool valid;
    uint32_t ctx;
    uint64_t ring;
    uint32_t entries;
    uint64_t record;
    uint32_t prod;              /* CQEs produced */
    bool timestamp;             /* ABI 1.12: 64-byte CQEs with the clock */
    bool armed;
    bool armed_solicited;
    bool overflowed;            /* in error: CQEs are dropped */
} PfnicCq;

/*
 * A shared receive queue (ABI 1.11, docs/verbs.md): receive WQEs that the
 * QPs attached to it take one at a time, each into its own held slot
 * (PfnicQp.srq_wqe), so the SRQ's head moves at once.
 */
typedef struct PfnicSrq {
    bool valid;
    uint32_t ctx;
    uint32_t pd;
    uint64_t ring;
    uint32_t entries;
    uint64_t record;            /* u32 head, 12 reserved bytes */
    uint16_t head, tail;        /* free-running */
    uint32_t limit;             /* armed when nonzero */
    uint32_t users;             /* QPs attached */
    uint32_t limit_events;      /* SRQ_LIMIT events queued */
} PfnicSrq;

#define PFNIC_QPN_NONE              UINT32_MAX

/* Look-ahead: posted WQEs after the send head whose pages are asked for */
#define PFNIC_QP_AHEAD_WQES         4

/* RoCEv2 transport limits (docs/wire.md) */
#define PFNIC_ROCE_MAX_INFLIGHT     16      /* send WQEs on the wire */
#define PFNIC_ROCE_MAX_RES          16      /* responder resources */
#define PFNIC_ROCE_PSN_WINDOW       128     /* PSNs unacknowledged */
#define PFNIC_ROCE_ACKREQ_EVERY     64      /* packets between AckReqs */

/* A send WQE on the wire, from its first packet until it completes */
typedef struct PfnicRoceSend {
    PfnicWqe wqe;
    uint64_t len;               /* bytes of the message */
    uint32_t psn;               /* its first PSN */
    uint32_t npsn;              /* PSNs it uses */
    uint32_t sent;              /* PSNs sent (READ: asked for) */
    uint32_t got;               /* READ: response packets received */
    uint32_t acked;             /* SEND, WRITE: packets acknowledged */
} PfnicRoceSend;

/* The requester side of a wire QP */
typedef struct PfnicRoceReq {
    uint32_t psn;               /* next PSN for a new WQE */
    PfnicRoceSend fl[PFNIC_ROCE_MAX_INFLIGHT];
    uint32_t fl_head;           /* oldest in fl[], at the send head */
    uint32_t fl_count;
    uint32_t tx;                /* fl[head + tx]: the one being sent */
    uint32_t high;              /* PSN after the highest one sent */
    uint32_t since_ackreq;      /* packets since the last AckReq */
    bool arp_wait;              /* deadline: look for the peer's MAC */
    /*
     * After a timeout: one packet at a time, each asking for an ACK, until
     * the peer answers. A peer that is slow rather than gone gets one
     * duplicate per timeout, not a window of them to work through.
     */
    bool probing;
    uint32_t retry_left;
    uint32_t rnr_left;
    int64_t deadline;           /* local ACK timeout (0: none armed) */
    bool rnr_waiting;
    int64_t rnr_deadline;
    uint32_t rnr_psn;
} PfnicRoceReq;

/* A READ or atomic a responder has answered (IB "responder resources") */
typedef struct PfnicRoceRes {
    bool valid;
    bool atomic;
    uint32_t psn;
    uint32_t npsn;
    uint64_t va;
    uint32_t rkey;
    uint32_t len;
    uint32_t sent;              /* READ: response packets sent */
    uint64_t orig;              /* atomic: the value returned */
} PfnicRoceRes;

/*
 * A payload parked in the backup buffer until its page is present
 * (docs/wire.md, "Receive faults"), and what completes after it
 */
typedef struct PfnicParked {
    uint32_t slot;              /* backup slot, UINT32_MAX: no payload */
    uint32_t len;
    bool send;                  /* into rwqe at off; else RDMA WRITE */
    PfnicWqe rwqe;
    uint64_t off;
    uint64_t va;                /* WRITE: target and key */
    uint32_t rkey;
    bool complete;              /* then write cqe to the receive CQ */
    bool se;
    PfnicCqe cqe;
} PfnicParked;

/* The responder side of a wire QP */
typedef struct PfnicRoceResp {
    uint32_t epsn;              /* expected PSN */
    uint32_t msn;               /* messages completed */
    bool nak_sent;              /* a sequence NAK for epsn is out */
    uint8_t cur;                /* message in progress: PFNIC_MSG_* */
    uint64_t off;               /* its bytes received */
    uint64_t va;                /* WRITE: target, key and length */
    uint32_t rkey;
    uint32_t len;
    bool have_rwqe;             /* rwqe: pfnic_qp_recv_peek() gave it */
    PfnicWqe rwqe;
    PfnicRoceRes res[PFNIC_ROCE_MAX_RES];
    uint32_t res_next;          /* slot for the next READ/atomic */
    GQueue parked;              /* of PfnicParked, oldest first */
} PfnicRoceResp;

/* A queue pair: its attributes and the send WQE being executed */
typedef struct PfnicQp {
    bool valid;
    uint32_t qpn;
    uint32_t gen;               /* bumped by each QP_CREATE at this QPN */
    uint32_t ctx;
    uint32_t pd;
    bool ud;                    /* ABI 1.19: unreliable datagram */
    uint32_t qkey;              /* UD: the Q_Key its receives need */
    uint32_t scqn, rcqn;
    uint64_t sq, rq, record;
    uint32_t sq_entries, rq_entries;
    uint32_t flags;
    uint32_t state;
    uint32_t access;
    uint32_t dest_qpn;
    uint32_t peer_gen;          /* generation of dest_qpn when connected */
    uint32_t min_rnr_timer;
    uint32_t rnr_retry;
    uint32_t retry_cnt;

    /* The wire (docs/wire.md): a destination IPv4 other than ours */
    bool wire;
    uint32_t dest_ip;
    uint32_t sq_psn, rq_psn;    /* as QP_MODIFY set them */
    uint32_t mtu;               /* path MTU, bytes */
    uint32_t timeout;           /* local ACK timeout, IB encoding */
    uint32_t max_dest_rd_atomic;
    uint32_t max_rd_atomic;
    uint8_t hop_limit;
    uint8_t traffic_class;
    /* ABI 1.17: the peer's MAC the driver resolved, else the neighbours' */
    bool dmac_set;
    uint8_t dmac[6];
    bool backup;                /* receive faults: park, do not RNR NAK */
    PfnicRoceReq req;
    PfnicRoceResp resp;
    PfnicPageWait rpw;          /* the responder's page request */
    uint16_t sq_head, sq_tail, rq_head, rq_tail;

    /* The sender now writing into our receive queue's head WQE */
    uint32_t rq_owner;

    /*
     * ABI 1.11: receives come from SRQ srqn instead of a receive queue.
     * The WQE taken from it for the message in progress stays here until
     * that message completes (pfnic_qp_recv_peek, pfnic_qp_recv_consume).
     */
    bool has_srq;
    uint32_t srqn;
    bool srq_held;
    PfnicWqe srq_wqe;
    bool last_wqe_pending;      /* in ERR: LAST_WQE_REACHED not queued yet */

    /* Execution of the send WQE at sq_head */
    bool busy;
    bool started;               /* checks done, receive WQE claimed */
    PfnicWqe wqe;
    uint64_t len;               /* bytes of the message */
    uint64_t done;
    uint32_t dest;              /* destination QPN and generation */
    uint32_t dest_gen;
    PfnicWqe rwqe;              /* the claimed receive WQE (SEND, WITH_IMM) */
    bool grh_done;              /* UD: its 40 bytes are in the receive WQE */
    uint32_t rwqe_requests;     /* page requests on the receive buffers */
    uint32_t rnr_left;
    uint32_t rnr_backoff;       /* RNR waits in a row with rnr_retry 7 */
    bool rnr_waiting;           /* parked until rnr_deadline or a wake-up */
    int64_t rnr_deadline;
    /* The destination not our ready peer: timeouts left, the next one's end */
    uint32_t retry_left;
    int64_t ack_deadline;       /* 0: none running; INT64_MAX: timeout 0 */
    bool atomic_done;
    uint64_t atomic_orig;
    PfnicPageWait pw;
    uint16_t ahead_next;        /* the next posted WQE to look ahead at */
    /* Look-ahead pages requested for a posted WQE, until it completes */
    struct {
        uint16_t wqe;
        uint32_t pages;
    } ahead_for[PFNIC_QP_AHEAD_WQES];

    /* QP_QUERY counters */
    uint32_t page_requests;
    uint32_t rnr_waits;
    uint32_t wqes_completed;
    uint64_t bytes;
    uint32_t refused;           /* requests from QPs that are not our peer */
    uint32_t retransmits;       /* wire: packets sent again */
    uint32_t rnr_naks_sent;
    uint32_t rnr_naks_rcvd;
    uint32_t seq_naks_sent;
    uint32_t duplicates;
} PfnicQp;

/* The port's neighbour cache (docs/wire.md, "Addresses") */
#define PFNIC_NEIGH_ENTRIES         64

typedef struct PfnicNeigh {
    uint32_t ip;                /* 0: free */
    bool resolved;
    uint8_t mac[6];
    int64_t used_ns;            /* LRU */
    int64_t arp_sent_ns;        /* last ARP request for it */
} PfnicNeigh;

/* Frames received, waiting for the port's bottom half */
#define PFNIC_RX_QUEUE              256

/*
 * One of the Ethernet rings (ABI 1.16, docs/wire.md): descriptors [head,
 * tail) are posted, head == tail is empty; both below size
 */
typedef struct PfnicEthRing {
    uint64_t base;              /* ETH_*_LO/HI, checked at ENABLE */
    uint32_t size;              /* 0 until written (a power of two) */
    uint32_t head;
    uint32_t tail;
} PfnicEthRing;

struct PfnicState {
    PCIDevice parent_obj;

    MemoryRegion ctrl;          /* BAR0 */
    MemoryRegion doorbell;      /* BAR2 */
    /*
     * Device memory (ABI 1.13): the RAM, BAR1 (an alias of it), and the
     * address space the engine reaches it through (the RAM at 0)
     */
    MemoryRegion dm;
    MemoryRegion dm_bar;
    AddressSpace dm_as;

    /* Properties */
    bool ats;
    bool pasid;
    bool pri;
    uint32_t pri_requests;      /* the PRI capability's outstanding requests */
    uint32_t num_vectors;
    uint32_t num_contexts;
    uint32_t table_entries;     /* translation table entries, all MRs' */
    uint32_t dm_size;           /* ABI 1.13: device memory, 0: none */
    /*
     * Fault injection, for tests: every Nth page request is refused as if
     * the IOMMU's page request queue were full, every Nth successful
     * response is taken as a Response Failure, every Nth context stop
     * leaves the context reporting ACTIVE until a reset (0: never).
     */
    uint32_t inject_prq_full;
    uint32_t inject_pri_failure;
    uint32_t inject_ctx_stuck;
    uint32_t inject_destroy_busy;   /* every Nth object destroy refused */
    uint32_t inject_destroy_seq;
    uint32_t inject_prq_seq;
    uint32_t inject_resp_seq;
    uint32_t inject_stop_seq;

    /*
     * The device clock (ABI 1.12): QEMU_CLOCK_VIRTUAL at realize, its 0;
     * a reset leaves it
     */
    int64_t clock_base;

    /* Control registers (BAR0) */
    uint32_t status;
    uint32_t irq_status;
    uint32_t selftest_cookie;
    uint32_t selftest_echo;
    uint32_t selftest_count;
    uint32_t scratch;

    /* Hardware contexts: programmed through BAR0 by the driver only */
    uint32_t ctx_select;
    PfnicContext *contexts;     /* num_contexts entries */

    /* The DMA engine (pfnic_engine.c) */
    QEMUBH *engine_bh;
    QEMUTimer *retry_timer;
    PfnicGroup groups[PFNIC_GROUPS];    /* by group index */
    uint32_t group_next;        /* where the search for a free index starts */
    uint32_t groups_out;        /* groups not FREE, and their pages */
    uint32_t pages_out;
    bool retry_soon;            /* a response freed room: resend first */
    PfnicAtcEntry atc[PFNIC_ATC_ENTRIES];
    PfnicStats stats;

    /* Verbs (pfnic_verbs.c, pfnic_qp.c): docs/verbs.md */
    PfnicCmdArgs cmd;       /* the CMD_ARG registers (pfnic_cmd.h) */
    uint32_t cmd_status;
    uint64_t eq_base;
    uint32_t eq_size;
    uint32_t eq_prod;
    uint32_t eq_cons;
    uint32_t eq_vector;
    uint32_t eq_overflow;
    PfnicMr *mrs;               /* PFNIC_MAX_MRS entries */
    uint64_t table_used;        /* of table_entries, by valid MRs' tables */
    GHashTable *keys;           /* key base of each valid MR -> index + 1 */
    PfnicMrFault mr_faults[PFNIC_MR_FAULTS];
    uint64_t mr_fault_seq;
    PfnicCq *cqs;               /* PFNIC_MAX_CQS entries */
    PfnicQp *qps;               /* PFNIC_MAX_QPS entries */
    PfnicSrq srqs[PFNIC_MAX_SRQS];  /* ABI 1.11 */
    uint32_t qp_next;           /* round robin: first QP of the next run */
    QEMUTimer *rnr_timer;

    /* The Ethernet port (pfnic_net.c) and the RoCEv2 transport */
    NICConf conf;
    NICState *nic;
    uint32_t wire_loss;         /* x-wire-loss: per million */
    uint32_t wire_reorder;      /* x-wire-reorder: per million */
    uint64_t wire_rng;
    uint8_t *held;              /* a frame held back (x-wire-reorder) */
    size_t held_len;
    uint32_t port_ipv4;
    uint32_t port_counters[PFNIC_PORT_CNT_NR];
    PfnicNeigh neigh[PFNIC_NEIGH_ENTRIES];
    GQueue rx_queue;            /* of GByteArray */
    uint64_t backup_base;       /* the driver's backup buffer (BACKUP_SET) */
    uint32_t backup_slots;
    unsigned long *backup_used; /* bitmap of slots holding a payload */
    QEMUBH *rx_bh;
    QEMUTimer *wire_timer;      /* ACK timeouts and RNR waits of wire QPs */

    /* The Ethernet queues (pfnic_eth.c, ABI 1.16) */
    uint32_t eth_ctrl;          /* ETH_CTRL: ENABLE, IRQ_ENABLE, PROMISC */
    uint32_t eth_vector;
    bool eth_pending;           /* completions since the last signal */
    PfnicEthRing eth_tx, eth_rx;
    QEMUBH *eth_tx_bh;

    /* A self-test in flight: its vector, completed by selftest_bh */
    uint32_t selftest_vector;
    bool selftest_busy;
    QEMUBH *selftest_bh;
};

/* pfnic_ctrl.c */
extern const MemoryRegionOps pfnic_ctrl_ops;
extern const MemoryRegionOps pfnic_doorbell_ops;
uint32_t pfnic_caps(const PfnicState *s);
uint64_t pfnic_clock(const PfnicState *s);
void pfnic_ctrl_reset(PfnicState *s);
void pfnic_selftest_bh(void *opaque);
void pfnic_guest_error(PfnicState *s, const char *what);

/* pfnic_engine.c */
void pfnic_engine_init(PfnicState *s);
void pfnic_engine_exit(PfnicState *s);
void pfnic_engine_reset(PfnicState *s);
bool pfnic_ctx_start(PfnicContext *ctx);
void pfnic_ctx_stop(PfnicContext *ctx);
void pfnic_doorbell(PfnicContext *ctx, uint16_t tail16);

#define PFNIC_PAGE_SIZE         4096ull
#define PFNIC_PAGE_MASK         (~(PFNIC_PAGE_SIZE - 1))

typedef enum {
    PFNIC_XLATE_OK,
    PFNIC_XLATE_FAULT,      /* not present or not permitted: page request */
    PFNIC_XLATE_DENIED,     /* a table entry (or no PASID) refuses: final */
} PfnicXlate;

void pfnic_count(PfnicContext *ctx, PfnicCounter c);
void pfnic_count_n(PfnicContext *ctx, PfnicCounter c, uint32_t n);
PfnicXlate pfnic_translate(PfnicContext *ctx, uint64_t va, bool write,
                           hwaddr *pa, AddressSpace **as);
void pfnic_page_fault(PfnicState *s, PfnicPageWait *w, PfnicContext *ctx,
                      PfnicMr *mr, uint64_t va, uint64_t len, bool write);
void pfnic_page_ahead(PfnicState *s, PfnicPageWait *w, PfnicContext *ctx,
                      PfnicMr *mr, uint64_t va, uint64_t len, bool write,
                      bool advisory);
/* A waiter's work is gone: its groups out wake nobody any more. */
void pfnic_page_wait_reset(PfnicState *s, PfnicPageWait *w);
/* A waiter moves to its next work item, keeping its groups (look-ahead). */
void pfnic_page_wait_next(PfnicState *s, PfnicPageWait *w);

/* pfnic_verbs.c */
void pfnic_verbs_init(PfnicState *s);
void pfnic_verbs_exit(PfnicState *s);
void pfnic_verbs_reset(PfnicState *s);
void pfnic_cmd_execute(PfnicState *s, uint32_t op);
void pfnic_eq_write_reg(PfnicState *s, hwaddr addr, uint32_t val);
uint32_t pfnic_eq_read_reg(PfnicState *s, hwaddr addr);
bool pfnic_event(PfnicState *s, uint8_t type, uint32_t object);
bool pfnic_event_flags(PfnicState *s, uint8_t type, uint8_t flags,
                       uint32_t object);
PfnicMr *pfnic_mr_lookup(PfnicState *s, uint32_t key, uint32_t ctx,
                         uint32_t pd, uint64_t addr, uint64_t len,
                         uint32_t access);
PfnicMr *pfnic_mr_remote(PfnicState *s, uint32_t key, PfnicQp *dest,
                         uint64_t addr, uint64_t len, uint32_t access);
PfnicXlate pfnic_mr_translate(PfnicContext *ctx, PfnicMr *mr, uint64_t va,
                              bool write, hwaddr *pa, AddressSpace **as);
bool pfnic_cqe_write(PfnicState *s, uint32_t cqn, PfnicCqe *cqe,
                     bool solicited);
void pfnic_mr_invalidate(PfnicContext *ctx, uint64_t start, uint64_t last);
void pfnic_mr_fault(PfnicState *s, PfnicPageWait *w, PfnicContext *ctx,
                    PfnicMr *mr, uint64_t va, uint64_t len, bool write);
/* @w waits for no FAULT MR entry any more (its work moves on or is gone). */
void pfnic_mr_fault_leave(PfnicState *s, PfnicPageWait *w);
void pfnic_mr_faults_ctx_stop(PfnicState *s, uint32_t ctx);
void pfnic_cq_arm(PfnicContext *ctx, uint32_t val);
/* ABI 1.21: fast registration */
bool pfnic_mr_fast_inv(PfnicState *s, uint32_t ctx, uint32_t pd, uint32_t key);
uint8_t pfnic_wqe_local(PfnicState *s, const PfnicQp *qp, const PfnicWqe *w);

/*
 * A key's base, its upper 24 bits: no two valid MRs' keys share one, so a
 * key's low byte may change (docs/verbs.md, "Memory keys")
 */
static inline uint32_t pfnic_key_base(uint32_t key)
{
    return key >> 8;
}

/* Whether @mr is translated by a table (MR_SET with TABLE) */
static inline bool pfnic_mr_table(const PfnicMr *mr)
{
    return mr->mtt != NULL || mr->sparse != NULL;
}

/*
 * Whether @mr is translated through its context's PASID (ATC, ATS, page
 * requests): neither a table MR nor (ABI 1.13) a DM MR nor (ABI 1.20) a
 * DMA MR
 */
static inline bool pfnic_mr_pasid(const PfnicMr *mr)
{
    return !pfnic_mr_table(mr) && !mr->dm && !mr->dma;
}

/* Entry @i (below mtt_entries) of table MR @mr: 0 when not written valid */
static inline uint64_t pfnic_mtt_get(const PfnicMr *mr, uint64_t i)
{
    if (mr->sparse) {
        const uint64_t *pair = g_hash_table_lookup(mr->sparse, &i);

        return pair ? pair[1] : 0;
    }
    return mr->mtt[i];
}

/* pfnic_qp.c */
bool pfnic_qp_run(PfnicQp *qp, PfnicState *s);
void pfnic_qp_doorbell(PfnicContext *ctx, hwaddr offset, uint32_t val);
void pfnic_qp_set_state(PfnicState *s, PfnicQp *qp, uint32_t state);
void pfnic_qp_enter_err(PfnicState *s, PfnicQp *qp, bool fatal);
void pfnic_qp_abort(PfnicState *s, PfnicQp *qp);
void pfnic_qp_wake_senders(PfnicState *s, uint32_t qpn);
void pfnic_qp_ctx_stop(PfnicState *s, PfnicContext *ctx);
void pfnic_qp_rnr_timer(void *opaque);
void pfnic_qp_prq_retry(PfnicState *s);

/*
 * The receive WQEs of a QP, from its receive queue or (ABI 1.11) its SRQ,
 * for the loopback sender and the wire responder alike. peek gives the WQE
 * the next message lands in (with an SRQ: the one the QP holds, taking the
 * SRQ's head if it holds none); consume, once that message completed,
 * moves on from it; drop forgets what the QP holds (RESET, destroy).
 */
typedef enum {
    PFNIC_RECV_OK,
    PFNIC_RECV_EMPTY,           /* nothing posted: RNR */
    PFNIC_RECV_BROKEN,          /* unreadable: the QP entered ERR */
} PfnicRecvPeek;

PfnicRecvPeek pfnic_qp_recv_peek(PfnicState *s, PfnicQp *qp, PfnicWqe *w);
void pfnic_qp_recv_consume(PfnicState *s, PfnicQp *qp);
void pfnic_qp_recv_drop(PfnicState *s, PfnicQp *qp);
void pfnic_srq_doorbell(PfnicContext *ctx, uint32_t val);

/* The PD the keys of @qp's receive WQEs belong to: its SRQ's, or its own */
static inline uint32_t pfnic_qp_recv_pd(const PfnicState *s,
                                        const PfnicQp *qp)
{
    if (qp->has_srq && qp->srqn < PFNIC_MAX_SRQS) {
        return s->srqs[qp->srqn].pd;
    }
    return qp->pd;
}

/* Helpers the loopback engine and the wire share (pfnic_qp.c) */
PfnicQp *pfnic_qp_get(PfnicState *s, uint32_t qpn);
bool pfnic_wqe_read(PfnicState *s, uint64_t base, uint32_t entries,
                    uint16_t index, PfnicWqe *w);
void pfnic_qp_record(PfnicState *s, PfnicQp *qp);
void pfnic_qp_complete_wqe(PfnicState *s, PfnicQp *qp, const PfnicWqe *w,
                           uint64_t len, uint32_t requests, uint8_t status);
bool pfnic_sge_at(const PfnicWqeSge *sge, int n, uint64_t off, int *i,
                  uint64_t *o);
int64_t pfnic_rnr_timer_ns(uint32_t timer);
int64_t pfnic_ack_timeout_ns(uint32_t timeout);
uint8_t pfnic_wc_opcode(uint8_t op);
uint8_t pfnic_wqe_check(PfnicState *s, PfnicQp *qp, const PfnicWqe *w,
                        uint64_t *len);

static inline bool pfnic_op_atomic(uint8_t op)
{
    return op == PFNIC_WR_ATOMIC_CMP_AND_SWP ||
           op == PFNIC_WR_ATOMIC_FETCH_AND_ADD;
}

/*
 * SEND, SEND_WITH_IMM, SEND_WITH_INV (ABI 1.21) and RDMA_WRITE_WITH_IMM
 * consume a receive WQE.
 */
static inline bool pfnic_op_recv(uint8_t op)
{
    return op == PFNIC_WR_SEND || op == PFNIC_WR_SEND_WITH_IMM ||
           op == PFNIC_WR_SEND_WITH_INV || op == PFNIC_WR_RDMA_WRITE_WITH_IMM;
}

static inline bool pfnic_op_send(uint8_t op)
{
    return op == PFNIC_WR_SEND || op == PFNIC_WR_SEND_WITH_IMM ||
           op == PFNIC_WR_SEND_WITH_INV;
}

static inline bool pfnic_op_imm(uint8_t op)
{
    return op == PFNIC_WR_SEND_WITH_IMM || op == PFNIC_WR_RDMA_WRITE_WITH_IMM;
}

/* ABI 1.21: LOCAL_INV and REG_MR act on our own MR table, nothing moves. */
static inline bool pfnic_op_local(uint8_t op)
{
    return op == PFNIC_WR_LOCAL_INV || op == PFNIC_WR_REG_MR;
}

/*
 * The key a LOCAL_INV or SEND_WITH_INV invalidates: imm_data as a
 * little-endian u32 (ABI 1.21)
 */
static inline uint32_t pfnic_wqe_inv_key(const PfnicWqe *w)
{
    return le32_to_cpu(w->imm_data);
}

/* pfnic_net.c: the Ethernet port */
void pfnic_net_realize(PfnicState *s, DeviceState *dev);
void pfnic_net_exit(PfnicState *s);
void pfnic_net_reset(PfnicState *s);
uint32_t pfnic_port_status(PfnicState *s);
void pfnic_port_count(PfnicState *s, PfnicPortCounter c);
bool pfnic_net_send_roce(PfnicState *s, uint32_t dest_ip, const uint8_t *dmac,
                         uint32_t qpn, uint8_t tos, uint8_t ttl,
                         const uint8_t *pkt, size_t len);
void pfnic_net_send_frame(PfnicState *s, const uint8_t *frame, size_t len);

/* pfnic_eth.c: the Ethernet queues (ABI 1.16) */
void pfnic_eth_init(PfnicState *s);
void pfnic_eth_exit(PfnicState *s);
void pfnic_eth_reset(PfnicState *s);
uint32_t pfnic_eth_read(PfnicState *s, hwaddr addr);
void pfnic_eth_write(PfnicState *s, hwaddr addr, uint32_t val);
bool pfnic_eth_rx(PfnicState *s, const uint8_t *frame, size_t len);

static inline bool pfnic_eth_enabled(const PfnicState *s)
{
    return s->eth_ctrl & PFNIC_ETH_CTRL_ENABLE;
}

/* RoCEv2 framing (docs/wire.md): header sizes the port, RC and UD share */
#define IPV4_HLEN                   20
#define UDP_HLEN                    8
#define BTH_LEN                     12
#define IMM_LEN                     4
#define ICRC_LEN                    4

/* Pad bytes after a payload of @plen bytes (to 4) */
static inline uint32_t pfnic_pad(uint64_t plen)
{
    return (4 - (plen & 3)) & 3;
}

/* pfnic_roce.c: RC over RoCEv2 */
typedef enum {
    PFNIC_COPY_OK,
    PFNIC_COPY_WAIT,            /* a page request is out */
    PFNIC_COPY_FAULT,           /* the OS cannot make the page present */
    PFNIC_COPY_PROT,            /* a key no longer covers the range */
} PfnicCopy;

void pfnic_roce_init(PfnicState *s);
void pfnic_roce_exit(PfnicState *s);
void pfnic_roce_qp_reset(PfnicState *s, PfnicQp *qp);
uint32_t pfnic_roce_backup_set(PfnicState *s, uint64_t base, uint32_t size);
bool pfnic_roce_run(PfnicState *s, PfnicQp *qp);
bool pfnic_roce_rx(PfnicState *s, uint32_t src_ip, uint8_t *pkt, size_t len);
void pfnic_roce_timer(void *opaque);
/* ... and what UD (pfnic_ud.c) shares of it */
PfnicCopy pfnic_roce_sge_copy(PfnicState *s, PfnicQp *qp, PfnicPageWait *w,
                              uint32_t pd, const PfnicWqe *wqe, uint64_t off,
                              uint8_t *buf, uint64_t len, bool to_mem);
uint8_t *pfnic_bth_put(uint8_t *p, uint8_t op, bool se, uint32_t pad,
                       uint32_t dqpn, bool ackreq, uint32_t psn);

/* pfnic_ud.c: UD QPs (ABI 1.19) on the wire, and their GRHs */
#define PFNIC_UD_SEND_WAIT          0xff    /* pfnic_ud_send(): a page */
bool pfnic_ud_wire(PfnicState *s, const PfnicWqe *w);
uint32_t pfnic_ud_qkey(const PfnicQp *qp, const PfnicWqe *w);
void pfnic_ud_grh_loopback(PfnicState *s, const PfnicQp *qp,
                           const PfnicWqe *w, uint64_t len, uint8_t *grh);
uint8_t pfnic_ud_send(PfnicState *s, PfnicQp *qp);
bool pfnic_ud_rx(PfnicState *s, const uint8_t *ip, const uint8_t *pkt,
                 size_t len);

#endif /* HW_PFNIC_H */
