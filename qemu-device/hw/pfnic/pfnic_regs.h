/*
 * pfnic register layout (device ABI 1.21)
 *
 * Mirrors docs/registers.md, docs/verbs.md and docs/wire.md, which are the
 * definition;
 * the Rust driver's drivers/pfnic/regs.rs mirrors the same documents.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_PFNIC_REGS_H
#define HW_PFNIC_REGS_H

/* PCI identity */
#define PFNIC_PCI_VENDOR_ID         0x1af4
#define PFNIC_PCI_DEVICE_ID         0x10f5
#define PFNIC_PCI_SUBSYS_ID         0x0001
#define PFNIC_PCI_REVISION          1

/* BARs */
#define PFNIC_BAR_CTRL              0
#define PFNIC_BAR_DM                1       /* ABI 1.13: device memory */
#define PFNIC_BAR_DOORBELL          2
#define PFNIC_BAR_MSIX              4
#define PFNIC_CTRL_SIZE             0x1000
#define PFNIC_DOORBELL_PAGE_SIZE    0x1000

/* BAR0 registers */
#define PFNIC_REG_ID                0x000
#define PFNIC_REG_VERSION           0x004
#define PFNIC_REG_FW_VERSION        0x008
#define PFNIC_REG_CAPS              0x00c
#define PFNIC_REG_NUM_VECTORS       0x010
#define PFNIC_REG_NUM_CONTEXTS      0x014
#define PFNIC_REG_PASID_WIDTH       0x018
#define PFNIC_REG_CONTROL           0x020
#define PFNIC_REG_STATUS            0x024
#define PFNIC_REG_IRQ_STATUS        0x030
#define PFNIC_REG_SELFTEST_COOKIE   0x040
#define PFNIC_REG_SELFTEST_TRIGGER  0x044
#define PFNIC_REG_SELFTEST_ECHO     0x048
#define PFNIC_REG_SELFTEST_COUNT    0x04c
#define PFNIC_REG_SCRATCH           0x050
#define PFNIC_REG_CTX_SELECT        0x060
#define PFNIC_REG_CTX_PASID         0x064
#define PFNIC_REG_CTX_CTRL          0x068
#define PFNIC_REG_CTX_STATUS        0x06c
#define PFNIC_REG_CTX_RING_LO       0x070
#define PFNIC_REG_CTX_RING_HI       0x074
#define PFNIC_REG_CTX_RING_SIZE     0x078
#define PFNIC_REG_CTX_VECTOR        0x07c
#define PFNIC_REG_CTX_HEAD          0x080
#define PFNIC_REG_CTX_COUNTERS      0x090   /* PFNIC_CNT_NR registers */
#define PFNIC_REG_COUNTERS          0x100   /* PFNIC_CNT_NR registers */
#define PFNIC_REG_STAT_FAULT_LAT    0x140   /* 16 registers */
#define PFNIC_FAULT_LAT_BUCKETS     16
#define PFNIC_REG_STAT_GROUP_PAGES  0x180   /* 8 registers */
#define PFNIC_GROUP_PAGES_BUCKETS   8

/* Verbs (docs/verbs.md): admin command mailbox, event queue, limits */
#define PFNIC_REG_CMD_ARG           0x200   /* PFNIC_CMD_ARGS registers */
#define PFNIC_CMD_ARGS              16
#define PFNIC_REG_CMD_OP            0x240
#define PFNIC_REG_CMD_STATUS        0x244
#define PFNIC_REG_EQ_BASE_LO        0x248
#define PFNIC_REG_EQ_BASE_HI        0x24c
#define PFNIC_REG_EQ_SIZE           0x250
#define PFNIC_REG_EQ_HEAD           0x254
#define PFNIC_REG_EQ_VECTOR         0x258
#define PFNIC_REG_EQ_OVERFLOW       0x25c
#define PFNIC_REG_MAX_QPS           0x260
#define PFNIC_REG_MAX_CQS           0x264
#define PFNIC_REG_MAX_MRS           0x268
#define PFNIC_REG_MAX_WQES          0x26c
#define PFNIC_REG_MAX_CQES          0x270
#define PFNIC_REG_MAX_SGE           0x274
#define PFNIC_REG_RING_DB           0x278   /* context << 16 | ring tail */
#define PFNIC_REG_MAX_SRQS          0x27c   /* ABI 1.11 */

/* The Ethernet port (docs/wire.md) */
#define PFNIC_REG_PORT_MAC_LO       0x280
#define PFNIC_REG_PORT_MAC_HI       0x284
#define PFNIC_REG_PORT_IPV4         0x288
#define PFNIC_REG_PORT_STATUS       0x28c
#define PFNIC_REG_DM_SIZE           0x290   /* ABI 1.13: BAR1's size */
#define PFNIC_REG_PORT_COUNTERS     0x2c0   /* PFNIC_PORT_CNT_NR registers */
#define PFNIC_BACKUP_SLOT           4096    /* one packet's payload */
#define PFNIC_BACKUP_MAX            (16u << 20)
#define PFNIC_QP_WIRE_BACKUP        (1u << 0)   /* QP_MODIFY a15 */
#define PFNIC_PORT_STATUS_WIRE      (1u << 0)
#define PFNIC_PORT_STATUS_LINK_UP   (1u << 1)

/*
 * The Ethernet queues (docs/wire.md, ABI 1.16): the transmit ring's
 * registers, then the receive ring's in the same order
 */
#define PFNIC_REG_ETH_CTRL          0x380
#define PFNIC_REG_ETH_VECTOR        0x384
#define PFNIC_REG_ETH_TX_LO         0x388
#define PFNIC_REG_ETH_TX_HI         0x38c
#define PFNIC_REG_ETH_TX_SIZE       0x390
#define PFNIC_REG_ETH_TX_TAIL       0x394
#define PFNIC_REG_ETH_TX_HEAD       0x398
#define PFNIC_REG_ETH_RX_LO         0x39c
#define PFNIC_REG_ETH_RX_HI         0x3a0
#define PFNIC_REG_ETH_RX_SIZE       0x3a4
#define PFNIC_REG_ETH_RX_TAIL       0x3a8
#define PFNIC_REG_ETH_RX_HEAD       0x3ac
#define PFNIC_ETH_CTRL_ENABLE       (1u << 0)
#define PFNIC_ETH_CTRL_IRQ_ENABLE   (1u << 1)
#define PFNIC_ETH_CTRL_PROMISC      (1u << 2)
#define PFNIC_ETH_CTRL_MASK         0x7u
/* Rings: 16-byte aligned, sizes a power of two in PFNIC_RING_MIN..MAX */
#define PFNIC_ETH_RING_ALIGN        16
/* Frames to transmit: from the destination MAC on, without FCS */
#define PFNIC_ETH_FRAME_MIN         14
#define PFNIC_ETH_FRAME_MAX         1518

/* Ethernet descriptors (16 bytes, both rings): status when done */
#define PFNIC_ETH_DESC_SIZE         16
#define PFNIC_ETH_DONE              (1u << 31)
#define PFNIC_ETH_CODE_SHIFT        16      /* bits 23:16 */
#define PFNIC_ETH_LEN_MASK          0xffffu /* received frame's length */
#define PFNIC_ETH_OK                1
#define PFNIC_ETH_BAD               2
#define PFNIC_ETH_NO_LINK           3

typedef struct PfnicEthDesc {
    uint64_t addr;              /* the buffer (DMA, no PASID) */
    uint16_t len;               /* transmit: the frame's; receive: room */
    uint16_t flags;             /* 0 */
    uint32_t status;            /* written by the device */
} PfnicEthDesc;

typedef enum PfnicPortCounter {
    PFNIC_PORT_TX_FRAMES,
    PFNIC_PORT_RX_FRAMES,
    PFNIC_PORT_RX_ROCE,
    PFNIC_PORT_RX_NOT_OURS,
    PFNIC_PORT_RX_MALFORMED,
    PFNIC_PORT_RX_BAD_ICRC,
    PFNIC_PORT_RX_NO_QP,
    PFNIC_PORT_RX_NOT_PEER,
    PFNIC_PORT_RX_DUPLICATE,
    PFNIC_PORT_TX_SEQ_NAKS,
    PFNIC_PORT_TX_RNR_NAKS,
    PFNIC_PORT_RX_RNR_NAKS,
    PFNIC_PORT_RETRANSMITS,
    PFNIC_PORT_TIMEOUTS,
    PFNIC_PORT_ARP_REQUESTS,
    PFNIC_PORT_INJECTED,
    PFNIC_PORT_BACKUP_PACKETS,  /* payloads parked in the backup buffer */
    PFNIC_PORT_BACKUP_BYTES,
    PFNIC_PORT_BACKUP_PLACED,   /* parked payloads placed once present */
    PFNIC_PORT_BACKUP_FULL,     /* no slot free: RNR NAK instead */
    PFNIC_PORT_ETH_TX,          /* ABI 1.16: sent from the transmit ring */
    PFNIC_PORT_ETH_RX,          /* placed in the receive ring */
    PFNIC_PORT_ETH_RX_DROPPED,  /* for it, but no buffer or too short */
    PFNIC_PORT_CNT_NR
} PfnicPortCounter;

/*
 * Translation and page-request counters, in register order. The device-wide
 * block (COUNTERS) and the selected context's block (CTX_COUNTERS) both use
 * this layout.
 */
typedef enum PfnicCounter {
    PFNIC_CNT_PAGE_REQUESTS,    /* page requests sent */
    PFNIC_CNT_PRI_SUCCESS,      /* responses: success */
    PFNIC_CNT_PRI_FAILED,       /* responses: invalid request or failure */
    PFNIC_CNT_ATC_HITS,         /* translations served by the ATC */
    PFNIC_CNT_ATC_MISSES,       /* ATS translation requests */
    PFNIC_CNT_INVALIDATIONS,    /* device-IOTLB invalidations */
    PFNIC_CNT_PRQ_FULL,         /* page requests the IOMMU could not queue */
    PFNIC_CNT_PRQ_HELD,         /* held back: the context had its share out */
    PFNIC_CNT_PR_GROUPS,        /* page request groups sent (LPIG set) */
    PFNIC_CNT_PR_GROUPS_MAX,    /* most groups out at once (a maximum) */
    PFNIC_CNT_AHEAD_PAGES,      /* page requests of look-ahead groups */
    PFNIC_CNT_AHEAD_USED,       /* ... for WQEs that then completed */
    PFNIC_CNT_AHEAD_WASTED,     /* ... for WQEs that failed or were flushed */
    PFNIC_CNT_NR
} PfnicCounter;

/* Register values and fields */
#define PFNIC_ID_VALUE              0x434e4650 /* "PFNC" in memory order */
#define PFNIC_ABI_MAJOR             1
#define PFNIC_ABI_MINOR             21
#define PFNIC_VERSION_VALUE         ((PFNIC_ABI_MAJOR << 16) | PFNIC_ABI_MINOR)
#define PFNIC_FW_VERSION_VALUE      0x01150000 /* model 1.21.0 */

#define PFNIC_CAPS_ATS              (1u << 0)
#define PFNIC_CAPS_PASID            (1u << 1)
#define PFNIC_CAPS_PRI              (1u << 2)
#define PFNIC_CAPS_SELFTEST         (1u << 3)
#define PFNIC_CAPS_VERBS            (1u << 4)
#define PFNIC_CAPS_WIRE             (1u << 5)
#define PFNIC_CAPS_TABLES           (1u << 6)   /* ABI 1.8 */
#define PFNIC_CAPS_SRQ              (1u << 8)   /* ABI 1.11 */
#define PFNIC_CAPS_TIMESTAMPS       (1u << 9)   /* ABI 1.12 */
#define PFNIC_CAPS_DM               (1u << 10)  /* ABI 1.13: dm-size != 0 */
#define PFNIC_CAPS_ETH              (1u << 11)  /* ABI 1.16 */

#define PFNIC_CONTROL_RESET         (1u << 0)

#define PFNIC_STATUS_READY          (1u << 0)
#define PFNIC_STATUS_ERROR          (1u << 1)

#define PFNIC_IRQ_SELFTEST          (1u << 0)

#define PFNIC_CTX_CTRL_ENABLE       (1u << 0)
#define PFNIC_CTX_CTRL_NO_PASID     (1u << 1)   /* ABI 1.8 */
#define PFNIC_CTX_STATUS_ACTIVE     (1u << 0)
#define PFNIC_CTX_STATUS_WAITING    (1u << 1)
#define PFNIC_CTX_STATUS_NO_PASID   (1u << 2)   /* ABI 1.8 */
#define PFNIC_RING_MIN              2
#define PFNIC_RING_MAX              4096

/* Descriptors (docs/registers.md, "Descriptor rings and doorbells") */
#define PFNIC_DESC_SIZE             64
#define PFNIC_OP_COPY               1
#define PFNIC_OP_FILL               2
#define PFNIC_OP_COMPARE            3
#define PFNIC_OP_PREFETCH           4
#define PFNIC_PREFETCH_WRITE        (1u << 0)
#define PFNIC_PREFETCH_NO_FAULT     (1u << 1)
#define PFNIC_DESC_DONE             (1u << 31)
#define PFNIC_ST_SUCCESS            1
#define PFNIC_ST_PAGE_FAULT         2
#define PFNIC_ST_BAD_DESCRIPTOR     3
#define PFNIC_ST_MISMATCH           4
#define PFNIC_ST_PROTECTION         5
#define PFNIC_DESC_MAX_LEN          (1ull << 30)

typedef struct PfnicDesc {
    uint8_t opcode;
    uint8_t flags;
    uint16_t reserved0;
    uint32_t status;
    uint64_t src;
    uint64_t dst;
    uint64_t len;
    uint64_t pattern;
    uint64_t result;
    uint32_t page_requests;
    uint32_t reserved1;
    uint64_t cookie;
} PfnicDesc;
#define PFNIC_CTX_PASID_MASK        0xfffffu

/* Verbs limits (docs/verbs.md, "Limits") */
#define PFNIC_MAX_QPS               256
#define PFNIC_MAX_CQS               256
#define PFNIC_MAX_MRS               4096
#define PFNIC_MAX_WQES              4096
#define PFNIC_MAX_CQES              4096
#define PFNIC_MAX_SGE               4
#define PFNIC_MAX_LOG2              12      /* log2 of MAX_WQES and MAX_CQES */
#define PFNIC_FIRST_QPN             2       /* 0 and 1: UD only (ABI 1.20) */
#define PFNIC_MAX_SRQS              64      /* ABI 1.11 */
#define PFNIC_SRQ_RECORD_SIZE       16

/* Admin commands and their statuses */
#define PFNIC_CMD_MR_SET            0x01
#define PFNIC_CMD_MR_CLEAR          0x02
#define PFNIC_CMD_MR_QUERY          0x03
#define PFNIC_CMD_MTT_WRITE         0x04
#define PFNIC_CMD_MTT_INVALIDATE    0x05
#define PFNIC_CMD_FAULT_RESUME      0x06    /* ABI 1.9 */
#define PFNIC_CMD_MR_MODIFY         0x07    /* ABI 1.18 */
#define PFNIC_CMD_CQ_CREATE         0x10
#define PFNIC_CMD_CQ_DESTROY        0x11
#define PFNIC_CMD_QP_CREATE         0x20
#define PFNIC_CMD_QP_MODIFY         0x21
#define PFNIC_CMD_QP_QUERY          0x22
#define PFNIC_CMD_QP_DESTROY        0x23
#define PFNIC_CMD_QP_SET_DMAC       0x24    /* ABI 1.17 */
#define PFNIC_CMD_CTX_QUERY         0x30
#define PFNIC_CMD_BACKUP_SET        0x31
#define PFNIC_CMD_SRQ_CREATE        0x40    /* ABI 1.11 */
#define PFNIC_CMD_SRQ_MODIFY        0x41
#define PFNIC_CMD_SRQ_QUERY         0x42
#define PFNIC_CMD_SRQ_DESTROY       0x43

#define PFNIC_CMD_OK                0
#define PFNIC_CMD_BAD_ARG           1
#define PFNIC_CMD_BAD_INDEX         2
#define PFNIC_CMD_BAD_STATE         3
#define PFNIC_CMD_BUSY              4
#define PFNIC_CMD_BAD_OP            5
#define PFNIC_CMD_NO_SPACE          6

/*
 * Memory keys are 32 random bits (docs/verbs.md, "Memory keys"); access
 * bits are IBV_ACCESS_*
 */
#define PFNIC_ACCESS_LOCAL_WRITE    0x01
#define PFNIC_ACCESS_REMOTE_WRITE   0x02
#define PFNIC_ACCESS_REMOTE_READ    0x04
#define PFNIC_ACCESS_REMOTE_ATOMIC  0x08
#define PFNIC_ACCESS_ON_DEMAND      0x40
#define PFNIC_MR_ACCESS_MASK        0x4f
#define PFNIC_QP_ACCESS_MASK        0x0f

/*
 * Translation tables (docs/verbs.md, ABI 1.8): MR_SET a8 flags, and the
 * 64-bit entries of a table, one per 4 KiB page
 */
#define PFNIC_MR_FLAG_TABLE         (1u << 0)
#define PFNIC_MR_FLAG_FAULT         (1u << 1)   /* ABI 1.9, with TABLE */
#define PFNIC_MR_FLAG_DM            (1u << 2)   /* ABI 1.13, alone */
#define PFNIC_MR_FLAG_DMA           (1u << 3)   /* ABI 1.20, alone */
#define PFNIC_MR_FLAG_FAST          (1u << 4)   /* ABI 1.21, alone */
#define PFNIC_MR_FLAGS_MASK         0x1fu
#define PFNIC_MTT_VALID             (1ull << 0)
#define PFNIC_MTT_READ              (1ull << 1)
#define PFNIC_MTT_WRITE             (1ull << 2)
#define PFNIC_MTT_RESERVED          0xff8ull    /* bits 11:3 */
#define PFNIC_MTT_WRITE_MAX         512     /* entries one MTT_WRITE takes */
#define PFNIC_TABLE_ENTRIES         2097152 /* property table-entries */
#define PFNIC_TABLE_ENTRIES_MAX     (1u << 27)
#define PFNIC_FAST_MAX_PAGES        512     /* ABI 1.21: a FAST MR's table */

/*
 * Driver-managed faults (docs/verbs.md, ABI 1.9): FAULT_RESUME a3, and the
 * entries one PAGE_FAULT event names at most
 */
#define PFNIC_FAULT_RESUME_RETRY    0
#define PFNIC_FAULT_RESUME_FAIL     1
#define PFNIC_FAULT_MAX_ENTRIES     64

/* Per-MR counters (MR_QUERY), mlx5's names */
typedef enum PfnicMrCounter {
    PFNIC_MR_PAGE_FAULTS,
    PFNIC_MR_PAGE_FAULTS_HANDLED,
    PFNIC_MR_PAGE_INVALIDATIONS,
    PFNIC_MR_PAGE_INVALIDATIONS_HANDLED,
    PFNIC_MR_PAGE_PREFETCH,
    PFNIC_MR_REMOTE_ACCESS_ERRORS,  /* remote use of the key that was refused */
    PFNIC_MR_PAGE_FAULT_GROUPS,     /* page request groups for the MR's pages */
    PFNIC_MR_CNT_NR
} PfnicMrCounter;

/* QP states (libibverbs' numbers) and flags */
#define PFNIC_QPS_RESET             0
#define PFNIC_QPS_INIT              1
#define PFNIC_QPS_RTR               2
#define PFNIC_QPS_RTS               3
#define PFNIC_QPS_SQD               4
#define PFNIC_QPS_SQE               5
#define PFNIC_QPS_ERR               6
#define PFNIC_QP_FLAG_SIGNAL_ALL    (1u << 0)
#define PFNIC_QP_FLAG_SRQ           (1u << 1)   /* ABI 1.11: SRQ in a14 */
#define PFNIC_QP_FLAG_UD            (1u << 2)   /* ABI 1.19: datagrams */
#define PFNIC_QP_FLAGS_MASK         0x7u

/* Event queue entries */
#define PFNIC_EQE_SIZE              16
#define PFNIC_EQE_OWNER             3       /* offset of the owner byte */
#define PFNIC_EQ_MAX                4096
#define PFNIC_EV_COMPLETION         1
#define PFNIC_EV_QP_FATAL           2
#define PFNIC_EV_CQ_ERROR           3
#define PFNIC_EV_ACCESS_ERROR       4
#define PFNIC_EV_PAGE_FAULT         5       /* ABI 1.9 */
#define PFNIC_EV_SRQ_LIMIT          6       /* ABI 1.11 */
#define PFNIC_EV_LAST_WQE_REACHED   7       /* ABI 1.11 */
#define PFNIC_EV_PORT_CHANGE        8       /* ABI 1.14 */
#define PFNIC_EQE_FLAGS             1       /* PAGE_FAULT: bit 0 write; */
                                            /* PORT_CHANGE: PORT_STATUS */
#define PFNIC_EQE_FAULT_WRITE       (1u << 0)
#define PFNIC_EQE_DATA              8       /* PAGE_FAULT: first, count */

/* Work queue entries (128 bytes) */
#define PFNIC_WQE_SIZE              128
#define PFNIC_WR_RDMA_WRITE         0
#define PFNIC_WR_RDMA_WRITE_WITH_IMM 1
#define PFNIC_WR_SEND               2
#define PFNIC_WR_SEND_WITH_IMM      3
#define PFNIC_WR_RDMA_READ          4
#define PFNIC_WR_ATOMIC_CMP_AND_SWP 5
#define PFNIC_WR_ATOMIC_FETCH_AND_ADD 6
#define PFNIC_WR_LOCAL_INV          7       /* ABI 1.21 */
#define PFNIC_WR_SEND_WITH_INV      9       /* ABI 1.21 */
#define PFNIC_WR_REG_MR             0x20    /* ABI 1.21: IB_WR_REG_MR */
#define PFNIC_SEND_FENCE            (1u << 0)
#define PFNIC_SEND_SIGNALED         (1u << 1)
#define PFNIC_SEND_SOLICITED        (1u << 2)
#define PFNIC_SEND_FLAGS_MASK       0x07

typedef struct PfnicWqeSge {
    uint64_t addr;
    uint32_t length;
    uint32_t lkey;
} PfnicWqeSge;

/*
 * ABI 1.19: a UD QP's send WQE carries its address handle where an RC
 * WQE has its RDMA and atomic fields (bytes 0x10..0x3f).
 */
#define PFNIC_UD_AH_GRH             (1u << 0)   /* the receiver gets a GRH */
#define PFNIC_UD_AH_IPV4            (1u << 1)   /* ... of RoCEv2 over IPv4 */
#define PFNIC_UD_AH_MASK            0x3u
#define PFNIC_UD_QKEY_CONTROLLED    (1u << 31)  /* use the QP's own Q_Key */
#define PFNIC_UD_MAX_MSG            4096        /* the port's largest MTU */
#define PFNIC_GRH_LEN               40

typedef struct PfnicWqeUd {
    uint32_t remote_qpn;        /* 24 bits */
    uint32_t remote_qkey;
    uint32_t dest_ip;           /* IPv4, 0: this device */
    uint8_t traffic_class;
    uint8_t hop_limit;          /* 0: 64 */
    uint8_t ah_flags;           /* PFNIC_UD_AH_* */
    uint8_t reserved0;
    uint8_t dmac[6];            /* zero: the neighbour cache's */
    uint8_t reserved1[10];
    uint8_t dgid[16];           /* the destination GID (a GRH's) */
} PfnicWqeUd;

/*
 * ABI 1.21: a REG_MR WQE's fields at bytes 0x10..0x3f: the FAST MR whose
 * key has the base of key gets that key, [iova, iova + length), access and
 * the pages of the list at pbl (u64 DMA addresses, no PASID)
 */
typedef struct PfnicWqeReg {
    uint64_t iova;
    uint32_t key;
    uint32_t access;            /* IBV_ACCESS_*, ON_DEMAND refused */
    uint64_t length;
    uint64_t pbl;               /* 8-byte aligned */
    uint32_t pages;
    uint32_t reserved0;
    uint64_t reserved1;
} PfnicWqeReg;

typedef struct PfnicWqe {
    uint8_t opcode;
    uint8_t flags;
    uint8_t num_sge;
    uint8_t reserved0;
    uint32_t imm_data;          /* as posted */
    uint64_t wr_id;             /* as posted */
    union {
        struct {
            uint64_t remote_addr;
            uint32_t rkey;
            uint32_t reserved1;
            uint64_t compare_add;
            uint64_t swap;
            uint8_t reserved2[16];
        };
        PfnicWqeUd ud;
        PfnicWqeReg reg;
    };
    PfnicWqeSge sge[PFNIC_MAX_SGE];
} PfnicWqe;

/* Completion queue entries (32 bytes; 64 in a TIMESTAMP CQ, ABI 1.12) */
#define PFNIC_CQE_SIZE              32
#define PFNIC_CQE_TS_SIZE           64
#define PFNIC_CQ_FLAG_TIMESTAMP     (1u << 0)   /* CQ_CREATE a7 */
#define PFNIC_CQ_FLAGS_MASK         PFNIC_CQ_FLAG_TIMESTAMP
#define PFNIC_WC_SUCCESS            0
#define PFNIC_WC_LOC_LEN_ERR        1
#define PFNIC_WC_LOC_QP_OP_ERR      2
#define PFNIC_WC_LOC_PROT_ERR       4
#define PFNIC_WC_WR_FLUSH_ERR       5
#define PFNIC_WC_REM_INV_REQ_ERR    9
#define PFNIC_WC_REM_ACCESS_ERR     10
#define PFNIC_WC_REM_OP_ERR         11
#define PFNIC_WC_RETRY_EXC_ERR      12
#define PFNIC_WC_RNR_RETRY_EXC_ERR  13
#define PFNIC_WC_SEND               0
#define PFNIC_WC_RDMA_WRITE         1
#define PFNIC_WC_RDMA_READ          2
#define PFNIC_WC_COMP_SWAP          3
#define PFNIC_WC_FETCH_ADD          4
#define PFNIC_WC_LOCAL_INV          6   /* ABI 1.21 */
#define PFNIC_WC_REG_MR             10  /* ABI 1.21: IB_WC_REG_MR */
#define PFNIC_WC_RECV               128
#define PFNIC_WC_RECV_RDMA_WITH_IMM 129
#define PFNIC_WC_GRH                1   /* ABI 1.19: UD receives */
#define PFNIC_WC_WITH_IMM           2
#define PFNIC_WC_WITH_INV           8   /* ABI 1.21: imm_data the rkey */

typedef struct PfnicCqe {
    uint64_t wr_id;
    uint32_t byte_len;
    uint32_t imm_data;
    uint32_t qp_num;
    uint32_t src_qp;
    uint8_t status;
    uint8_t opcode;
    uint8_t wc_flags;
    uint8_t owner;
    uint32_t vendor_err;
} PfnicCqe;

/* The CQE of a TIMESTAMP CQ: the 32 bytes above, then the device clock */
typedef struct PfnicCqeTs {
    PfnicCqe cqe;
    uint64_t timestamp;         /* ns of the device clock at the write */
    uint8_t reserved[24];
} PfnicCqeTs;

/*
 * User doorbells in each context's BAR2 page (offset 0, the ring tail of
 * ABI 1.3, is reserved: the driver's ring is rung through RING_DB in BAR0)
 */
#define PFNIC_DB_SQ                 0x008
#define PFNIC_DB_RQ                 0x00c
#define PFNIC_DB_CQ_ARM             0x010
#define PFNIC_DB_SRQ                0x014   /* ABI 1.11: SRQN << 16 | tail */
#define PFNIC_DB_CLOCK_LO           0x020   /* ABI 1.12: read-only */
#define PFNIC_DB_CLOCK_HI           0x024
#define PFNIC_CQ_ARM_SOLICITED      (1u << 0)

/* Capability parameters */
#define PFNIC_PASID_WIDTH           20
#define PFNIC_PRI_OUTSTANDING       2048

#endif /* HW_PFNIC_REGS_H */
