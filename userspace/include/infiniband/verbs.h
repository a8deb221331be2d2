/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * pfnic's verbs API: the core of libibverbs' <infiniband/verbs.h>.
 *
 * Programs written against libibverbs compile against this header
 * unchanged, as long as they use the verbs below: the names, field names,
 * enum values, signatures and return conventions are libibverbs' own, and
 * so is the layout of every structure (checked against rdma-core's header
 * at build time), so that binaries built against either header run on
 * either library. The implementation is userspace/pfnic-ibverbs
 * (libibverbs.a, link with -libverbs; libibverbs.so.1, with rdma-core's
 * soname and symbol versions), on top of the pfnic driver. Only RC queue
 * pairs on port 1 of a pfnic device exist.
 *
 * Return conventions, as in libibverbs:
 * - constructors (ibv_open_device, ibv_alloc_pd, ibv_reg_mr, ...) return
 *   NULL and set errno;
 * - ibv_query_*, ibv_modify_qp, ibv_post_*, ibv_req_notify_cq,
 *   ibv_advise_mr, ibv_dealloc_pd, ibv_dereg_mr, ibv_destroy_* return 0 or
 *   an errno value;
 * - ibv_close_device, ibv_query_gid and ibv_get_cq_event return 0, or -1
 *   and set errno;
 * - ibv_poll_cq returns the number of completions, or a negative value.
 */

#ifndef INFINIBAND_VERBS_H
#define INFINIBAND_VERBS_H

#include <stddef.h>
#include <stdint.h>
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <linux/types.h>
/* The kernel's verbs uAPI names (IB_UVERBS_ADVISE_MR_FLAG_FLUSH, ...). */
#include <rdma/ib_user_ioctl_verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Devices                                                             */
/* ------------------------------------------------------------------ */

union ibv_gid {
    uint8_t raw[16];
    struct {
        __be64 subnet_prefix;
        __be64 interface_id;
    } global;
};

enum ibv_node_type {
    IBV_NODE_UNKNOWN = -1,
    IBV_NODE_CA = 1,
    IBV_NODE_SWITCH,
    IBV_NODE_ROUTER,
    IBV_NODE_RNIC,
    IBV_NODE_USNIC,
    IBV_NODE_USNIC_UDP,
    IBV_NODE_UNSPECIFIED,
};

enum ibv_transport_type {
    IBV_TRANSPORT_UNKNOWN = -1,
    IBV_TRANSPORT_IB = 0,
    IBV_TRANSPORT_IWARP,
    IBV_TRANSPORT_USNIC,
    IBV_TRANSPORT_USNIC_UDP,
    IBV_TRANSPORT_UNSPECIFIED,
};

enum {
    IBV_SYSFS_NAME_MAX = 64,
    IBV_SYSFS_PATH_MAX = 256,
};

enum ibv_gid_type {
    IBV_GID_TYPE_IB,
    IBV_GID_TYPE_ROCE_V1,
    IBV_GID_TYPE_ROCE_V2,
};

/* A GID with its type (ibv_query_gid_ex); pfnic's ports have no netdev. */
struct ibv_gid_entry {
    union ibv_gid gid;
    uint32_t gid_index;
    uint32_t port_num;
    uint32_t gid_type; /* enum ibv_gid_type */
    uint32_t ndev_ifindex;
};

struct ibv_context;
struct ibv_device;

/* Not used by pfnic; here so that struct ibv_device has libibverbs' layout. */
struct _ibv_device_ops {
    struct ibv_context *(*_dummy1)(struct ibv_device *device, int cmd_fd);
    void (*_dummy2)(struct ibv_context *context);
};

struct ibv_device {
    struct _ibv_device_ops _ops;
    enum ibv_node_type node_type;
    enum ibv_transport_type transport_type;
    /* Device name, e.g. "pfnic0". */
    char name[IBV_SYSFS_NAME_MAX];
    /* Character device name, e.g. "pfnic0". */
    char dev_name[IBV_SYSFS_NAME_MAX];
    /* The character device's node, e.g. "/dev/pfnic0". */
    char dev_path[IBV_SYSFS_PATH_MAX];
    /* The character device in sysfs, e.g. "/sys/class/misc/pfnic0". */
    char ibdev_path[IBV_SYSFS_PATH_MAX];
};


enum ibv_device_cap_flags {
    IBV_DEVICE_RESIZE_MAX_WR = 1,
    IBV_DEVICE_BAD_PKEY_CNTR = 1 << 1,
    IBV_DEVICE_BAD_QKEY_CNTR = 1 << 2,
    IBV_DEVICE_RAW_MULTI = 1 << 3,
    IBV_DEVICE_AUTO_PATH_MIG = 1 << 4,
    IBV_DEVICE_CHANGE_PHY_PORT = 1 << 5,
    IBV_DEVICE_UD_AV_PORT_ENFORCE = 1 << 6,
    IBV_DEVICE_CURR_QP_STATE_MOD = 1 << 7,
    IBV_DEVICE_SHUTDOWN_PORT = 1 << 8,
    IBV_DEVICE_INIT_TYPE = 1 << 9,
    IBV_DEVICE_PORT_ACTIVE_EVENT = 1 << 10,
    IBV_DEVICE_SYS_IMAGE_GUID = 1 << 11,
    IBV_DEVICE_RC_RNR_NAK_GEN = 1 << 12,
    IBV_DEVICE_SRQ_RESIZE = 1 << 13,
    IBV_DEVICE_N_NOTIFY_CQ = 1 << 14,
    IBV_DEVICE_MEM_WINDOW = 1 << 17,
    IBV_DEVICE_UD_IP_CSUM = 1 << 18,
    IBV_DEVICE_XRC = 1 << 20,
    IBV_DEVICE_MEM_MGT_EXTENSIONS = 1 << 21,
    IBV_DEVICE_MEM_WINDOW_TYPE_2A = 1 << 23,
    IBV_DEVICE_MEM_WINDOW_TYPE_2B = 1 << 24,
    IBV_DEVICE_RC_IP_CSUM = 1 << 25,
    IBV_DEVICE_RAW_IP_CSUM = 1 << 26,
    IBV_DEVICE_MANAGED_FLOW_STEERING = 1 << 29,
};

enum ibv_atomic_cap {
    IBV_ATOMIC_NONE,
    IBV_ATOMIC_HCA,
    IBV_ATOMIC_GLOB,
};

struct ibv_device_attr {
    char fw_ver[64];
    __be64 node_guid;
    __be64 sys_image_guid;
    uint64_t max_mr_size;
    uint64_t page_size_cap;
    uint32_t vendor_id;
    uint32_t vendor_part_id;
    uint32_t hw_ver;
    int max_qp;
    int max_qp_wr;
    unsigned int device_cap_flags;
    int max_sge;
    int max_sge_rd;
    int max_cq;
    int max_cqe;
    int max_mr;
    int max_pd;
    int max_qp_rd_atom;
    int max_ee_rd_atom;
    int max_res_rd_atom;
    int max_qp_init_rd_atom;
    int max_ee_init_rd_atom;
    enum ibv_atomic_cap atomic_cap;
    int max_ee;
    int max_rdd;
    int max_mw;
    int max_raw_ipv6_qp;
    int max_raw_ethy_qp;
    int max_mcast_grp;
    int max_mcast_qp_attach;
    int max_total_mcast_qp_attach;
    int max_ah;
    int max_fmr;
    int max_map_per_fmr;
    int max_srq;
    int max_srq_wr;
    int max_srq_sge;
    uint16_t max_pkeys;
    uint8_t local_ca_ack_delay;
    uint8_t phys_port_cnt;
};

struct ibv_query_device_ex_input {
    uint32_t comp_mask;
};

enum ibv_odp_general_caps {
    IBV_ODP_SUPPORT = 1 << 0,
    IBV_ODP_SUPPORT_IMPLICIT = 1 << 1,
};

enum ibv_odp_transport_cap_bits {
    IBV_ODP_SUPPORT_SEND = 1 << 0,
    IBV_ODP_SUPPORT_RECV = 1 << 1,
    IBV_ODP_SUPPORT_WRITE = 1 << 2,
    IBV_ODP_SUPPORT_READ = 1 << 3,
    IBV_ODP_SUPPORT_ATOMIC = 1 << 4,
    IBV_ODP_SUPPORT_SRQ_RECV = 1 << 5,
    IBV_ODP_SUPPORT_FLUSH = 1 << 6,
    IBV_ODP_SUPPORT_ATOMIC_WRITE = 1 << 7,
};

struct ibv_odp_caps {
    uint64_t general_caps;
    struct {
        uint32_t rc_odp_caps;
        uint32_t uc_odp_caps;
        uint32_t ud_odp_caps;
    } per_transport_caps;
};

struct ibv_tso_caps {
    uint32_t max_tso;
    uint32_t supported_qpts;
};

struct ibv_rss_caps {
    uint32_t supported_qpts;
    uint32_t max_rwq_indirection_tables;
    uint32_t max_rwq_indirection_table_size;
    uint64_t rx_hash_fields_mask;
    uint8_t rx_hash_function;
};

struct ibv_packet_pacing_caps {
    uint32_t qp_rate_limit_min;
    uint32_t qp_rate_limit_max;
    uint32_t supported_qpts;
};

struct ibv_tm_caps {
    uint32_t max_rndv_hdr_size;
    uint32_t max_num_tags;
    uint32_t flags;
    uint32_t max_ops;
    uint32_t max_sge;
};

struct ibv_cq_moderation_caps {
    uint16_t max_cq_count;
    uint16_t max_cq_period;
};

struct ibv_pci_atomic_caps {
    uint16_t fetch_add;
    uint16_t swap;
    uint16_t compare_swap;
};

/* Everything after odp_caps is zero: pfnic has none of those features. */
struct ibv_device_attr_ex {
    struct ibv_device_attr orig_attr;
    uint32_t comp_mask;
    struct ibv_odp_caps odp_caps;
    uint64_t completion_timestamp_mask;
    uint64_t hca_core_clock;
    uint64_t device_cap_flags_ex;
    struct ibv_tso_caps tso_caps;
    struct ibv_rss_caps rss_caps;
    uint32_t max_wq_type_rq;
    struct ibv_packet_pacing_caps packet_pacing_caps;
    uint32_t raw_packet_caps;
    struct ibv_tm_caps tm_caps;
    struct ibv_cq_moderation_caps cq_mod_caps;
    uint64_t max_dm_size;
    struct ibv_pci_atomic_caps pci_atomic_caps;
    uint32_t xrc_odp_caps;
    uint32_t phys_port_cnt_ex;
};

/* ------------------------------------------------------------------ */
/* Ports                                                               */
/* ------------------------------------------------------------------ */

enum ibv_mtu {
    IBV_MTU_256 = 1,
    IBV_MTU_512 = 2,
    IBV_MTU_1024 = 3,
    IBV_MTU_2048 = 4,
    IBV_MTU_4096 = 5,
};

enum ibv_port_state {
    IBV_PORT_NOP = 0,
    IBV_PORT_DOWN = 1,
    IBV_PORT_INIT = 2,
    IBV_PORT_ARMED = 3,
    IBV_PORT_ACTIVE = 4,
    IBV_PORT_ACTIVE_DEFER = 5,
};

enum {
    IBV_LINK_LAYER_UNSPECIFIED,
    IBV_LINK_LAYER_INFINIBAND,
    IBV_LINK_LAYER_ETHERNET,
};

struct ibv_port_attr {
    enum ibv_port_state state;
    enum ibv_mtu max_mtu;
    enum ibv_mtu active_mtu;
    int gid_tbl_len;
    uint32_t port_cap_flags;
    uint32_t max_msg_sz;
    uint32_t bad_pkey_cntr;
    uint32_t qkey_viol_cntr;
    uint16_t pkey_tbl_len;
    uint16_t lid;
    uint16_t sm_lid;
    uint8_t lmc;
    uint8_t max_vl_num;
    uint8_t sm_sl;
    uint8_t subnet_timeout;
    uint8_t init_type_reply;
    uint8_t active_width;
    uint8_t active_speed;
    uint8_t phys_state;
    uint8_t link_layer;
    uint8_t flags;
    uint16_t port_cap_flags2;
    uint32_t active_speed_ex;
};

/*
 * What ibv_query_port wrote before port_cap_flags2 existed: the exported
 * function still writes only this much, so that programs built against an
 * older header keep working; the ibv_query_port below (a macro) asks for
 * the whole struct ibv_port_attr through the context's query_port.
 */
struct _compat_ibv_port_attr {
    enum ibv_port_state state;
    enum ibv_mtu max_mtu;
    enum ibv_mtu active_mtu;
    int gid_tbl_len;
    uint32_t port_cap_flags;
    uint32_t max_msg_sz;
    uint32_t bad_pkey_cntr;
    uint32_t qkey_viol_cntr;
    uint16_t pkey_tbl_len;
    uint16_t lid;
    uint16_t sm_lid;
    uint8_t lmc;
    uint8_t max_vl_num;
    uint8_t sm_sl;
    uint8_t subnet_timeout;
    uint8_t init_type_reply;
    uint8_t active_width;
    uint8_t active_speed;
    uint8_t phys_state;
    uint8_t link_layer;
    uint8_t flags;
};

/* ------------------------------------------------------------------ */
/* Completions                                                         */
/* ------------------------------------------------------------------ */

enum ibv_wc_status {
    IBV_WC_SUCCESS,
    IBV_WC_LOC_LEN_ERR,
    IBV_WC_LOC_QP_OP_ERR,
    IBV_WC_LOC_EEC_OP_ERR,
    IBV_WC_LOC_PROT_ERR,
    IBV_WC_WR_FLUSH_ERR,
    IBV_WC_MW_BIND_ERR,
    IBV_WC_BAD_RESP_ERR,
    IBV_WC_LOC_ACCESS_ERR,
    IBV_WC_REM_INV_REQ_ERR,
    IBV_WC_REM_ACCESS_ERR,
    IBV_WC_REM_OP_ERR,
    IBV_WC_RETRY_EXC_ERR,
    IBV_WC_RNR_RETRY_EXC_ERR,
    IBV_WC_LOC_RDD_VIOL_ERR,
    IBV_WC_REM_INV_RD_REQ_ERR,
    IBV_WC_REM_ABORT_ERR,
    IBV_WC_INV_EECN_ERR,
    IBV_WC_INV_EEC_STATE_ERR,
    IBV_WC_FATAL_ERR,
    IBV_WC_RESP_TIMEOUT_ERR,
    IBV_WC_GENERAL_ERR,
    IBV_WC_TM_ERR,
    IBV_WC_TM_RNDV_INCOMPLETE,
};

const char *ibv_wc_status_str(enum ibv_wc_status status);

enum ibv_wc_opcode {
    IBV_WC_SEND,
    IBV_WC_RDMA_WRITE,
    IBV_WC_RDMA_READ,
    IBV_WC_COMP_SWAP,
    IBV_WC_FETCH_ADD,
    IBV_WC_BIND_MW,
    IBV_WC_LOCAL_INV,
    IBV_WC_TSO,
    IBV_WC_FLUSH,
    IBV_WC_ATOMIC_WRITE = 9,
    /* Receive completions have this bit set: (opcode & IBV_WC_RECV). */
    IBV_WC_RECV = 1 << 7,
    IBV_WC_RECV_RDMA_WITH_IMM,
};

enum ibv_wc_flags {
    IBV_WC_GRH = 1 << 0,
    IBV_WC_WITH_IMM = 1 << 1,
    IBV_WC_IP_CSUM_OK = 1 << 2,
    IBV_WC_WITH_INV = 1 << 3,
};

struct ibv_wc {
    uint64_t wr_id;
    enum ibv_wc_status status;
    enum ibv_wc_opcode opcode;
    /* pfnic: the page requests the work request caused. */
    uint32_t vendor_err;
    uint32_t byte_len;
    union {
        /* With IBV_WC_WITH_IMM: network byte order, as posted. */
        __be32 imm_data;
        uint32_t invalidated_rkey;
    };
    uint32_t qp_num;
    uint32_t src_qp;
    unsigned int wc_flags;
    uint16_t pkey_index;
    uint16_t slid;
    uint8_t sl;
    uint8_t dlid_path_bits;
};

/* ------------------------------------------------------------------ */
/* Protection domains and memory regions                               */
/* ------------------------------------------------------------------ */

enum ibv_access_flags {
    IBV_ACCESS_LOCAL_WRITE = 1,
    IBV_ACCESS_REMOTE_WRITE = 1 << 1,
    IBV_ACCESS_REMOTE_READ = 1 << 2,
    IBV_ACCESS_REMOTE_ATOMIC = 1 << 3,
    IBV_ACCESS_MW_BIND = 1 << 4,
    IBV_ACCESS_ZERO_BASED = 1 << 5,
    IBV_ACCESS_ON_DEMAND = 1 << 6,
    IBV_ACCESS_HUGETLB = 1 << 7,
    IBV_ACCESS_FLUSH_GLOBAL = 1 << 8,
    IBV_ACCESS_FLUSH_PERSISTENT = 1 << 9,
    IBV_ACCESS_RELAXED_ORDERING = 1 << 20,
};

/* Access bits at or above this one are hints a device may ignore. */
#define IBV_ACCESS_OPTIONAL_FIRST (1 << 20)
#define IBV_ACCESS_OPTIONAL_RANGE 0x3ff00000

struct ibv_pd {
    struct ibv_context *context;
    uint32_t handle;
};

struct ibv_mr {
    struct ibv_context *context;
    struct ibv_pd *pd;
    void *addr;
    size_t length;
    uint32_t handle;
    uint32_t lkey;
    uint32_t rkey;
};

struct ibv_sge {
    uint64_t addr;
    uint32_t length;
    uint32_t lkey;
};

enum ibv_advise_mr_advice {
    IBV_ADVISE_MR_ADVICE_PREFETCH,
    IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
    IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT,
};

enum ibv_advise_mr_flags {
    /* Return once the pages are present, not when the prefetch started. */
    IBV_ADVISE_MR_FLAG_FLUSH = 1 << 0,
};

/* ------------------------------------------------------------------ */
/* Completion channels and completion queues                           */
/* ------------------------------------------------------------------ */

struct ibv_comp_channel {
    struct ibv_context *context;
    /* Readable (poll(), select(), epoll) when a completion event waits. */
    int fd;
    /* CQs using the channel. */
    int refcnt;
};

struct ibv_cq {
    struct ibv_context *context;
    struct ibv_comp_channel *channel;
    void *cq_context;
    uint32_t handle;
    /* Completions the CQ holds (at least those asked for). */
    int cqe;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    uint32_t comp_events_completed;
    uint32_t async_events_completed;
};

/*
 * The extended CQ (ibv_create_cq_ex): an ibv_cq whose completions are read
 * one at a time in place, between ibv_start_poll and ibv_end_poll, through
 * the read_ functions of the fields asked for in wc_flags. pfnic has the
 * standard fields; completion timestamps, CVLAN, flow tags and tag matching
 * fail the creation with EOPNOTSUPP (their read_ functions are NULL).
 */
enum ibv_create_cq_wc_flags {
    IBV_WC_EX_WITH_BYTE_LEN = 1 << 0,
    IBV_WC_EX_WITH_IMM = 1 << 1,
    IBV_WC_EX_WITH_QP_NUM = 1 << 2,
    IBV_WC_EX_WITH_SRC_QP = 1 << 3,
    IBV_WC_EX_WITH_SLID = 1 << 4,
    IBV_WC_EX_WITH_SL = 1 << 5,
    IBV_WC_EX_WITH_DLID_PATH_BITS = 1 << 6,
    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP = 1 << 7,
    IBV_WC_EX_WITH_CVLAN = 1 << 8,
    IBV_WC_EX_WITH_FLOW_TAG = 1 << 9,
    IBV_WC_EX_WITH_TM_INFO = 1 << 10,
    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK = 1 << 11,
};

enum {
    IBV_WC_STANDARD_FLAGS = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |
                            IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
                            IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
                            IBV_WC_EX_WITH_DLID_PATH_BITS,
};

enum ibv_cq_init_attr_mask {
    IBV_CQ_INIT_ATTR_MASK_FLAGS = 1 << 0,
    IBV_CQ_INIT_ATTR_MASK_PD = 1 << 1,
};

enum ibv_create_cq_attr_flags {
    IBV_CREATE_CQ_ATTR_SINGLE_THREADED = 1 << 0,
    IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN = 1 << 1,
};

struct ibv_cq_init_attr_ex {
    uint32_t cqe;
    void *cq_context;
    struct ibv_comp_channel *channel;
    uint32_t comp_vector;
    /* enum ibv_create_cq_wc_flags */
    uint64_t wc_flags;
    /* enum ibv_cq_init_attr_mask: which of the fields below are set */
    uint32_t comp_mask;
    /* enum ibv_create_cq_attr_flags */
    uint32_t flags;
    struct ibv_pd *parent_domain;
};

struct ibv_poll_cq_attr {
    uint32_t comp_mask;
};

struct ibv_wc_tm_info;

struct ibv_cq_ex {
    struct ibv_context *context;
    struct ibv_comp_channel *channel;
    void *cq_context;
    uint32_t handle;
    int cqe;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    uint32_t comp_events_completed;
    uint32_t async_events_completed;

    uint32_t comp_mask;
    /* The current completion's status and wr_id. */
    enum ibv_wc_status status;
    uint64_t wr_id;
    int (*start_poll)(struct ibv_cq_ex *current, struct ibv_poll_cq_attr *attr);
    int (*next_poll)(struct ibv_cq_ex *current);
    void (*end_poll)(struct ibv_cq_ex *current);
    enum ibv_wc_opcode (*read_opcode)(struct ibv_cq_ex *current);
    uint32_t (*read_vendor_err)(struct ibv_cq_ex *current);
    uint32_t (*read_byte_len)(struct ibv_cq_ex *current);
    __be32 (*read_imm_data)(struct ibv_cq_ex *current);
    uint32_t (*read_qp_num)(struct ibv_cq_ex *current);
    uint32_t (*read_src_qp)(struct ibv_cq_ex *current);
    unsigned int (*read_wc_flags)(struct ibv_cq_ex *current);
    uint32_t (*read_slid)(struct ibv_cq_ex *current);
    uint8_t (*read_sl)(struct ibv_cq_ex *current);
    uint8_t (*read_dlid_path_bits)(struct ibv_cq_ex *current);
    uint64_t (*read_completion_ts)(struct ibv_cq_ex *current);
    uint16_t (*read_cvlan)(struct ibv_cq_ex *current);
    uint32_t (*read_flow_tag)(struct ibv_cq_ex *current);
    void (*read_tm_info)(struct ibv_cq_ex *current,
                         struct ibv_wc_tm_info *tm_info);
    uint64_t (*read_completion_wallclock_ns)(struct ibv_cq_ex *current);
};

static inline struct ibv_cq *ibv_cq_ex_to_cq(struct ibv_cq_ex *cq)
{
    return (struct ibv_cq *)cq;
}

/*
 * 0 and the first completion current, ENOENT if there is none (then the
 * poll is over: no ibv_end_poll), or an errno value. Until ibv_end_poll the
 * CQ is this thread's.
 */
static inline int ibv_start_poll(struct ibv_cq_ex *cq,
                                 struct ibv_poll_cq_attr *attr)
{
    return cq->start_poll(cq, attr);
}

/* 0 and the next completion current, or ENOENT. */
static inline int ibv_next_poll(struct ibv_cq_ex *cq)
{
    return cq->next_poll(cq);
}

static inline void ibv_end_poll(struct ibv_cq_ex *cq)
{
    cq->end_poll(cq);
}

static inline enum ibv_wc_opcode ibv_wc_read_opcode(struct ibv_cq_ex *cq)
{
    return cq->read_opcode(cq);
}

static inline uint32_t ibv_wc_read_vendor_err(struct ibv_cq_ex *cq)
{
    return cq->read_vendor_err(cq);
}

static inline uint32_t ibv_wc_read_byte_len(struct ibv_cq_ex *cq)
{
    return cq->read_byte_len(cq);
}

static inline __be32 ibv_wc_read_imm_data(struct ibv_cq_ex *cq)
{
    return cq->read_imm_data(cq);
}

static inline uint32_t ibv_wc_read_invalidated_rkey(struct ibv_cq_ex *cq)
{
    return be32toh(cq->read_imm_data(cq));
}

static inline uint32_t ibv_wc_read_qp_num(struct ibv_cq_ex *cq)
{
    return cq->read_qp_num(cq);
}

static inline uint32_t ibv_wc_read_src_qp(struct ibv_cq_ex *cq)
{
    return cq->read_src_qp(cq);
}

static inline unsigned int ibv_wc_read_wc_flags(struct ibv_cq_ex *cq)
{
    return cq->read_wc_flags(cq);
}

static inline uint32_t ibv_wc_read_slid(struct ibv_cq_ex *cq)
{
    return cq->read_slid(cq);
}

static inline uint8_t ibv_wc_read_sl(struct ibv_cq_ex *cq)
{
    return cq->read_sl(cq);
}

static inline uint8_t ibv_wc_read_dlid_path_bits(struct ibv_cq_ex *cq)
{
    return cq->read_dlid_path_bits(cq);
}

static inline uint64_t ibv_wc_read_completion_ts(struct ibv_cq_ex *cq)
{
    return cq->read_completion_ts(cq);
}

static inline uint64_t ibv_wc_read_completion_wallclock_ns(struct ibv_cq_ex *cq)
{
    return cq->read_completion_wallclock_ns(cq);
}

/* ------------------------------------------------------------------ */
/* Shared receive queues                                               */
/* ------------------------------------------------------------------ */

enum ibv_srq_attr_mask {
    IBV_SRQ_MAX_WR = 1 << 0,
    IBV_SRQ_LIMIT = 1 << 1,
};

struct ibv_srq_attr {
    uint32_t max_wr;
    uint32_t max_sge;
    uint32_t srq_limit;
};

struct ibv_srq_init_attr {
    void *srq_context;
    struct ibv_srq_attr attr;
};

/*
 * A receive queue the QPs created with it (ibv_qp_init_attr.srq) take
 * their receives from, in the order they were posted. srq_limit arms
 * IBV_EVENT_SRQ_LIMIT_REACHED: once fewer work requests than the limit
 * remain, the event comes once and the limit reads 0 until armed again.
 * Resizing (IBV_SRQ_MAX_WR) is EOPNOTSUPP.
 */
struct ibv_srq {
    struct ibv_context *context;
    void *srq_context;
    struct ibv_pd *pd;
    uint32_t handle;

    pthread_mutex_t mutex;
    pthread_cond_t cond;
    uint32_t events_completed;
};

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
                               struct ibv_srq_init_attr *srq_init_attr);
int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
                   int srq_attr_mask);
int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr);
/* EBUSY while a QP uses it; waits for the acks of its async events. */
int ibv_destroy_srq(struct ibv_srq *srq);

/* ------------------------------------------------------------------ */
/* Queue pairs                                                         */
/* ------------------------------------------------------------------ */

struct ibv_ah;
struct ibv_mw;

struct ibv_global_route {
    union ibv_gid dgid;
    uint32_t flow_label;
    uint8_t sgid_index;
    uint8_t hop_limit;
    uint8_t traffic_class;
};

struct ibv_ah_attr {
    struct ibv_global_route grh;
    uint16_t dlid;
    uint8_t sl;
    uint8_t src_path_bits;
    uint8_t static_rate;
    uint8_t is_global;
    uint8_t port_num;
};

enum ibv_qp_type {
    IBV_QPT_RC = 2,
    IBV_QPT_UC,
    IBV_QPT_UD,
    IBV_QPT_RAW_PACKET = 8,
    IBV_QPT_XRC_SEND = 9,
    IBV_QPT_XRC_RECV,
    IBV_QPT_DRIVER = 0xff,
};

/*
 * max_inline_data: up to 256 bytes of a SEND or RDMA WRITE posted with
 * IBV_SEND_INLINE are copied at posting (no MR needed, the buffer free at
 * once); a QP asked for more is refused (EINVAL), and one asked for any gets
 * 256.
 */
struct ibv_qp_cap {
    uint32_t max_send_wr;
    uint32_t max_recv_wr;
    uint32_t max_send_sge;
    uint32_t max_recv_sge;
    uint32_t max_inline_data;
};

struct ibv_qp_init_attr {
    void *qp_context;
    struct ibv_cq *send_cq;
    struct ibv_cq *recv_cq;
    /* Must be NULL: pfnic has no shared receive queues. */
    struct ibv_srq *srq;
    struct ibv_qp_cap cap;
    enum ibv_qp_type qp_type;
    int sq_sig_all;
};

enum ibv_qp_attr_mask {
    IBV_QP_STATE = 1 << 0,
    IBV_QP_CUR_STATE = 1 << 1,
    IBV_QP_EN_SQD_ASYNC_NOTIFY = 1 << 2,
    IBV_QP_ACCESS_FLAGS = 1 << 3,
    IBV_QP_PKEY_INDEX = 1 << 4,
    IBV_QP_PORT = 1 << 5,
    IBV_QP_QKEY = 1 << 6,
    IBV_QP_AV = 1 << 7,
    IBV_QP_PATH_MTU = 1 << 8,
    IBV_QP_TIMEOUT = 1 << 9,
    IBV_QP_RETRY_CNT = 1 << 10,
    IBV_QP_RNR_RETRY = 1 << 11,
    IBV_QP_RQ_PSN = 1 << 12,
    IBV_QP_MAX_QP_RD_ATOMIC = 1 << 13,
    IBV_QP_ALT_PATH = 1 << 14,
    IBV_QP_MIN_RNR_TIMER = 1 << 15,
    IBV_QP_SQ_PSN = 1 << 16,
    IBV_QP_MAX_DEST_RD_ATOMIC = 1 << 17,
    IBV_QP_PATH_MIG_STATE = 1 << 18,
    IBV_QP_CAP = 1 << 19,
    IBV_QP_DEST_QPN = 1 << 20,
    IBV_QP_RATE_LIMIT = 1 << 25,
};

enum ibv_qp_state {
    IBV_QPS_RESET,
    IBV_QPS_INIT,
    IBV_QPS_RTR,
    IBV_QPS_RTS,
    IBV_QPS_SQD,
    IBV_QPS_SQE,
    IBV_QPS_ERR,
    IBV_QPS_UNKNOWN,
};

enum ibv_mig_state {
    IBV_MIG_MIGRATED,
    IBV_MIG_REARM,
    IBV_MIG_ARMED,
};

struct ibv_qp_attr {
    enum ibv_qp_state qp_state;
    enum ibv_qp_state cur_qp_state;
    enum ibv_mtu path_mtu;
    enum ibv_mig_state path_mig_state;
    uint32_t qkey;
    uint32_t rq_psn;
    uint32_t sq_psn;
    uint32_t dest_qp_num;
    unsigned int qp_access_flags;
    struct ibv_qp_cap cap;
    struct ibv_ah_attr ah_attr;
    struct ibv_ah_attr alt_ah_attr;
    uint16_t pkey_index;
    uint16_t alt_pkey_index;
    uint8_t en_sqd_async_notify;
    uint8_t sq_draining;
    uint8_t max_rd_atomic;
    uint8_t max_dest_rd_atomic;
    uint8_t min_rnr_timer;
    uint8_t port_num;
    uint8_t timeout;
    uint8_t retry_cnt;
    uint8_t rnr_retry;
    uint8_t alt_port_num;
    uint8_t alt_timeout;
    uint32_t rate_limit;
};

struct ibv_qp {
    struct ibv_context *context;
    void *qp_context;
    struct ibv_pd *pd;
    struct ibv_cq *send_cq;
    struct ibv_cq *recv_cq;
    struct ibv_srq *srq;
    uint32_t handle;
    uint32_t qp_num;
    /* The state as of the last ibv_modify_qp or ibv_query_qp. */
    enum ibv_qp_state state;
    enum ibv_qp_type qp_type;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    uint32_t events_completed;
};

/*
 * The extended QP (ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS):
 * work requests built with ibv_wr_start, one ibv_wr_<opcode> each (taking
 * wr_id and wr_flags from the struct at that moment) with its ibv_wr_set_sge,
 * ibv_wr_set_sge_list or ibv_wr_set_inline_data(_list), and posted by
 * ibv_wr_complete, which returns 0 or an errno value. pfnic has the
 * operations of ibv_post_send (the first seven IBV_QP_EX_WITH_ flags); the
 * others fail the creation with EOPNOTSUPP, and a work request that uses
 * them anyway fails ibv_wr_complete (EOPNOTSUPP), which then posts nothing
 * of the batch.
 */
enum ibv_qp_init_attr_mask {
    IBV_QP_INIT_ATTR_PD = 1 << 0,
    IBV_QP_INIT_ATTR_XRCD = 1 << 1,
    IBV_QP_INIT_ATTR_CREATE_FLAGS = 1 << 2,
    IBV_QP_INIT_ATTR_MAX_TSO_HEADER = 1 << 3,
    IBV_QP_INIT_ATTR_IND_TABLE = 1 << 4,
    IBV_QP_INIT_ATTR_RX_HASH = 1 << 5,
    IBV_QP_INIT_ATTR_SEND_OPS_FLAGS = 1 << 6,
};

enum ibv_qp_create_send_ops_flags {
    IBV_QP_EX_WITH_RDMA_WRITE = 1 << 0,
    IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM = 1 << 1,
    IBV_QP_EX_WITH_SEND = 1 << 2,
    IBV_QP_EX_WITH_SEND_WITH_IMM = 1 << 3,
    IBV_QP_EX_WITH_RDMA_READ = 1 << 4,
    IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP = 1 << 5,
    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD = 1 << 6,
    IBV_QP_EX_WITH_LOCAL_INV = 1 << 7,
    IBV_QP_EX_WITH_BIND_MW = 1 << 8,
    IBV_QP_EX_WITH_SEND_WITH_INV = 1 << 9,
    IBV_QP_EX_WITH_TSO = 1 << 10,
    IBV_QP_EX_WITH_ATOMIC_WRITE = 1 << 12,
};

struct ibv_xrcd;
struct ibv_rwq_ind_table;

struct ibv_rx_hash_conf {
    uint8_t rx_hash_function;
    uint8_t rx_hash_key_len;
    uint8_t *rx_hash_key;
    uint64_t rx_hash_fields_mask;
};

struct ibv_qp_init_attr_ex {
    /* The fields of struct ibv_qp_init_attr, */
    void *qp_context;
    struct ibv_cq *send_cq;
    struct ibv_cq *recv_cq;
    struct ibv_srq *srq;
    struct ibv_qp_cap cap;
    enum ibv_qp_type qp_type;
    int sq_sig_all;
    /* then those comp_mask (enum ibv_qp_init_attr_mask) says are set. */
    uint32_t comp_mask;
    struct ibv_pd *pd;
    struct ibv_xrcd *xrcd;
    uint32_t create_flags;
    uint16_t max_tso_header;
    struct ibv_rwq_ind_table *rwq_ind_tbl;
    struct ibv_rx_hash_conf rx_hash_conf;
    uint32_t source_qpn;
    /* enum ibv_qp_create_send_ops_flags */
    uint64_t send_ops_flags;
};

struct ibv_data_buf {
    void *addr;
    size_t length;
};

struct ibv_ah;
struct ibv_mw_bind_info;

struct ibv_qp_ex {
    struct ibv_qp qp_base;
    uint64_t comp_mask;
    /* The next work request's wr_id and send flags (enum ibv_send_flags). */
    uint64_t wr_id;
    unsigned int wr_flags;
    void (*wr_atomic_cmp_swp)(struct ibv_qp_ex *qp, uint32_t rkey,
                              uint64_t remote_addr, uint64_t compare,
                              uint64_t swap);
    void (*wr_atomic_fetch_add)(struct ibv_qp_ex *qp, uint32_t rkey,
                                uint64_t remote_addr, uint64_t add);
    void (*wr_bind_mw)(struct ibv_qp_ex *qp, struct ibv_mw *mw, uint32_t rkey,
                       const struct ibv_mw_bind_info *bind_info);
    void (*wr_local_inv)(struct ibv_qp_ex *qp, uint32_t invalidate_rkey);
    void (*wr_rdma_read)(struct ibv_qp_ex *qp, uint32_t rkey,
                         uint64_t remote_addr);
    void (*wr_rdma_write)(struct ibv_qp_ex *qp, uint32_t rkey,
                          uint64_t remote_addr);
    void (*wr_rdma_write_imm)(struct ibv_qp_ex *qp, uint32_t rkey,
                              uint64_t remote_addr, __be32 imm_data);
    void (*wr_send)(struct ibv_qp_ex *qp);
    void (*wr_send_imm)(struct ibv_qp_ex *qp, __be32 imm_data);
    void (*wr_send_inv)(struct ibv_qp_ex *qp, uint32_t invalidate_rkey);
    void (*wr_send_tso)(struct ibv_qp_ex *qp, void *hdr, uint16_t hdr_sz,
                        uint16_t mss);
    void (*wr_set_ud_addr)(struct ibv_qp_ex *qp, struct ibv_ah *ah,
                           uint32_t remote_qpn, uint32_t remote_qkey);
    void (*wr_set_xrc_srqn)(struct ibv_qp_ex *qp, uint32_t remote_srqn);
    void (*wr_set_inline_data)(struct ibv_qp_ex *qp, void *addr,
                               size_t length);
    void (*wr_set_inline_data_list)(struct ibv_qp_ex *qp, size_t num_buf,
                                    const struct ibv_data_buf *buf_list);
    void (*wr_set_sge)(struct ibv_qp_ex *qp, uint32_t lkey, uint64_t addr,
                       uint32_t length);
    void (*wr_set_sge_list)(struct ibv_qp_ex *qp, size_t num_sge,
                            const struct ibv_sge *sg_list);
    void (*wr_start)(struct ibv_qp_ex *qp);
    int (*wr_complete)(struct ibv_qp_ex *qp);
    void (*wr_abort)(struct ibv_qp_ex *qp);
    void (*wr_atomic_write)(struct ibv_qp_ex *qp, uint32_t rkey,
                            uint64_t remote_addr, const void *atomic_wr);
};

/* The extended QP of qp, or NULL if it was not created as one. */
struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp);

static inline void ibv_wr_atomic_cmp_swp(struct ibv_qp_ex *qp, uint32_t rkey,
                                         uint64_t remote_addr,
                                         uint64_t compare, uint64_t swap)
{
    qp->wr_atomic_cmp_swp(qp, rkey, remote_addr, compare, swap);
}

static inline void ibv_wr_atomic_fetch_add(struct ibv_qp_ex *qp, uint32_t rkey,
                                           uint64_t remote_addr, uint64_t add)
{
    qp->wr_atomic_fetch_add(qp, rkey, remote_addr, add);
}

static inline void ibv_wr_rdma_read(struct ibv_qp_ex *qp, uint32_t rkey,
                                    uint64_t remote_addr)
{
    qp->wr_rdma_read(qp, rkey, remote_addr);
}

static inline void ibv_wr_rdma_write(struct ibv_qp_ex *qp, uint32_t rkey,
                                     uint64_t remote_addr)
{
    qp->wr_rdma_write(qp, rkey, remote_addr);
}

static inline void ibv_wr_rdma_write_imm(struct ibv_qp_ex *qp, uint32_t rkey,
                                         uint64_t remote_addr, __be32 imm_data)
{
    qp->wr_rdma_write_imm(qp, rkey, remote_addr, imm_data);
}

static inline void ibv_wr_send(struct ibv_qp_ex *qp)
{
    qp->wr_send(qp);
}

static inline void ibv_wr_send_imm(struct ibv_qp_ex *qp, __be32 imm_data)
{
    qp->wr_send_imm(qp, imm_data);
}

static inline void ibv_wr_set_inline_data(struct ibv_qp_ex *qp, void *addr,
                                          size_t length)
{
    qp->wr_set_inline_data(qp, addr, length);
}

static inline void ibv_wr_set_inline_data_list(struct ibv_qp_ex *qp,
                                               size_t num_buf,
                                               const struct ibv_data_buf *buf_list)
{
    qp->wr_set_inline_data_list(qp, num_buf, buf_list);
}

static inline void ibv_wr_set_sge(struct ibv_qp_ex *qp, uint32_t lkey,
                                  uint64_t addr, uint32_t length)
{
    qp->wr_set_sge(qp, lkey, addr, length);
}

static inline void ibv_wr_set_sge_list(struct ibv_qp_ex *qp, size_t num_sge,
                                       const struct ibv_sge *sg_list)
{
    qp->wr_set_sge_list(qp, num_sge, sg_list);
}

static inline void ibv_wr_start(struct ibv_qp_ex *qp)
{
    qp->wr_start(qp);
}

static inline int ibv_wr_complete(struct ibv_qp_ex *qp)
{
    return qp->wr_complete(qp);
}

static inline void ibv_wr_abort(struct ibv_qp_ex *qp)
{
    qp->wr_abort(qp);
}

enum ibv_wr_opcode {
    IBV_WR_RDMA_WRITE,
    IBV_WR_RDMA_WRITE_WITH_IMM,
    IBV_WR_SEND,
    IBV_WR_SEND_WITH_IMM,
    IBV_WR_RDMA_READ,
    IBV_WR_ATOMIC_CMP_AND_SWP,
    IBV_WR_ATOMIC_FETCH_AND_ADD,
    IBV_WR_LOCAL_INV,
    IBV_WR_BIND_MW,
    IBV_WR_SEND_WITH_INV,
    IBV_WR_TSO,
    IBV_WR_DRIVER1,
    IBV_WR_FLUSH = 14,
    IBV_WR_ATOMIC_WRITE = 15,
};

enum ibv_send_flags {
    IBV_SEND_FENCE = 1 << 0,
    IBV_SEND_SIGNALED = 1 << 1,
    IBV_SEND_SOLICITED = 1 << 2,
    IBV_SEND_INLINE = 1 << 3,
    IBV_SEND_IP_CSUM = 1 << 4,
};

struct ibv_mw_bind_info {
    struct ibv_mr *mr;
    uint64_t addr;
    uint64_t length;
    unsigned int mw_access_flags;
};

struct ibv_send_wr {
    uint64_t wr_id;
    struct ibv_send_wr *next;
    struct ibv_sge *sg_list;
    int num_sge;
    enum ibv_wr_opcode opcode;
    unsigned int send_flags;
    union {
        /* *_WITH_IMM: network byte order, delivered as posted. */
        __be32 imm_data;
        uint32_t invalidate_rkey;
    };
    union {
        struct {
            uint64_t remote_addr;
            uint32_t rkey;
        } rdma;
        struct {
            uint64_t remote_addr;
            uint64_t compare_add;
            uint64_t swap;
            uint32_t rkey;
        } atomic;
        struct {
            struct ibv_ah *ah;
            uint32_t remote_qpn;
            uint32_t remote_qkey;
        } ud;
    } wr;
    union {
        struct {
            uint32_t remote_srqn;
        } xrc;
    } qp_type;
    union {
        struct {
            struct ibv_mw *mw;
            uint32_t rkey;
            struct ibv_mw_bind_info bind_info;
        } bind_mw;
        struct {
            void *hdr;
            uint16_t hdr_sz;
            uint16_t mss;
        } tso;
    };
};

struct ibv_recv_wr {
    uint64_t wr_id;
    struct ibv_recv_wr *next;
    struct ibv_sge *sg_list;
    int num_sge;
};

/* ------------------------------------------------------------------ */
/* Contexts                                                            */
/* ------------------------------------------------------------------ */

/*
 * An open device, laid out as libibverbs lays it out, so that programs
 * built against rdma-core's header run on pfnic's libibverbs.so.1 and
 * programs built against this one run on rdma-core's: the data-path verbs
 * (ibv_post_send, ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq) are
 * inline calls through ops, the newer verbs (ibv_query_port,
 * ibv_query_device_ex, ibv_advise_mr) calls through the struct
 * verbs_context that precedes every struct ibv_context. The _compat_
 * entries are never used; pfnic leaves them and every verb it does not
 * have NULL, and the inline functions below then fail the call with
 * EOPNOTSUPP (or ENOSYS where libibverbs does).
 */

struct ibv_srq;
struct ibv_mw;
struct ibv_mw_bind;

enum ibv_mw_type {
    IBV_MW_TYPE_1 = 1,
    IBV_MW_TYPE_2 = 2,
};

struct ibv_context_ops {
    int (*_compat_query_device)(struct ibv_context *context,
                                struct ibv_device_attr *device_attr);
    int (*_compat_query_port)(struct ibv_context *context, uint8_t port_num,
                              struct _compat_ibv_port_attr *port_attr);
    void *(*_compat_alloc_pd)(void);
    void *(*_compat_dealloc_pd)(void);
    void *(*_compat_reg_mr)(void);
    void *(*_compat_rereg_mr)(void);
    void *(*_compat_dereg_mr)(void);
    struct ibv_mw *(*alloc_mw)(struct ibv_pd *pd, enum ibv_mw_type type);
    int (*bind_mw)(struct ibv_qp *qp, struct ibv_mw *mw,
                   struct ibv_mw_bind *mw_bind);
    int (*dealloc_mw)(struct ibv_mw *mw);
    void *(*_compat_create_cq)(void);
    int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
    int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
    void *(*_compat_cq_event)(void);
    void *(*_compat_resize_cq)(void);
    void *(*_compat_destroy_cq)(void);
    void *(*_compat_create_srq)(void);
    void *(*_compat_modify_srq)(void);
    void *(*_compat_query_srq)(void);
    void *(*_compat_destroy_srq)(void);
    int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *recv_wr,
                         struct ibv_recv_wr **bad_recv_wr);
    void *(*_compat_create_qp)(void);
    void *(*_compat_query_qp)(void);
    void *(*_compat_modify_qp)(void);
    void *(*_compat_destroy_qp)(void);
    int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr,
                     struct ibv_send_wr **bad_wr);
    int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr,
                     struct ibv_recv_wr **bad_wr);
    void *(*_compat_create_ah)(void);
    void *(*_compat_destroy_ah)(void);
    void *(*_compat_attach_mcast)(void);
    void *(*_compat_detach_mcast)(void);
    void *(*_compat_async_event)(void);
};

struct ibv_context {
    struct ibv_device *device;
    struct ibv_context_ops ops;
    /* The open device file: its completion events are read from it. */
    int cmd_fd;
    int async_fd;
    int num_comp_vectors;
    pthread_mutex_t mutex;
    /* __VERBS_ABI_IS_EXTENDED: a struct verbs_context precedes this one. */
    void *abi_compat;
};

#define __VERBS_ABI_IS_EXTENDED ((void *)UINTPTR_MAX)

/* What the verbs_context's members point to; pfnic has none of them. */
struct ibv_counters;
struct ibv_counter_attach_attr;
struct ibv_counters_init_attr;
struct ibv_flow;
struct ibv_flow_attr;
struct ibv_flow_action;
struct ibv_flow_action_esp_attr;
struct ibv_dm;
struct ibv_alloc_dm_attr;
struct ibv_qp_rate_limit_attr;
struct ibv_parent_domain_init_attr;
struct ibv_td;
struct ibv_td_init_attr;
struct ibv_modify_cq_attr;
struct ibv_ops_wr;
struct ibv_rwq_ind_table;
struct ibv_rwq_ind_table_init_attr;
struct ibv_wq;
struct ibv_wq_attr;
struct ibv_wq_init_attr;
struct verbs_ex_private;

/*
 * The device's clock (ibv_query_rt_values_ex, completion timestamps):
 * nanoseconds of the machine's virtual time since the device was created,
 * 64 bits (completion_timestamp_mask all ones, hca_core_clock 1,000,000
 * kHz); raw_clock holds it as seconds and nanoseconds. A device without
 * it has both 0 and gives EOPNOTSUPP.
 */
enum ibv_values_mask {
    IBV_VALUES_MASK_RAW_CLOCK = 1 << 0,
    IBV_VALUES_MASK_RESERVED = 1 << 1,
};

struct ibv_values_ex {
    uint32_t comp_mask;
    struct timespec raw_clock;
};
struct ibv_qp_open_attr;
struct ibv_srq_init_attr_ex;
struct ibv_xrcd_init_attr;

/*
 * The verbs added after struct ibv_context froze. It grows at the front:
 * sz says how much of it, counted back from context, the library filled.
 */
struct verbs_context {
    int (*query_port)(struct ibv_context *context, uint8_t port_num,
                      struct ibv_port_attr *port_attr, size_t port_attr_len);
    int (*advise_mr)(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
                     uint32_t flags, struct ibv_sge *sg_list,
                     uint32_t num_sges);
    struct ibv_mr *(*alloc_null_mr)(struct ibv_pd *pd);
    int (*read_counters)(struct ibv_counters *counters,
                         uint64_t *counters_value, uint32_t ncounters,
                         uint32_t flags);
    int (*attach_counters_point_flow)(struct ibv_counters *counters,
                                      struct ibv_counter_attach_attr *attr,
                                      struct ibv_flow *flow);
    struct ibv_counters *(*create_counters)(
        struct ibv_context *context, struct ibv_counters_init_attr *init_attr);
    int (*destroy_counters)(struct ibv_counters *counters);
    struct ibv_mr *(*reg_dm_mr)(struct ibv_pd *pd, struct ibv_dm *dm,
                                uint64_t dm_offset, size_t length,
                                unsigned int access);
    struct ibv_dm *(*alloc_dm)(struct ibv_context *context,
                               struct ibv_alloc_dm_attr *attr);
    int (*free_dm)(struct ibv_dm *dm);
    int (*modify_flow_action_esp)(struct ibv_flow_action *action,
                                  struct ibv_flow_action_esp_attr *attr);
    int (*destroy_flow_action)(struct ibv_flow_action *action);
    struct ibv_flow_action *(*create_flow_action_esp)(
        struct ibv_context *context, struct ibv_flow_action_esp_attr *attr);
    int (*modify_qp_rate_limit)(struct ibv_qp *qp,
                                struct ibv_qp_rate_limit_attr *attr);
    struct ibv_pd *(*alloc_parent_domain)(
        struct ibv_context *context, struct ibv_parent_domain_init_attr *attr);
    int (*dealloc_td)(struct ibv_td *td);
    struct ibv_td *(*alloc_td)(struct ibv_context *context,
                               struct ibv_td_init_attr *init_attr);
    int (*modify_cq)(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr);
    int (*post_srq_ops)(struct ibv_srq *srq, struct ibv_ops_wr *op,
                        struct ibv_ops_wr **bad_op);
    int (*destroy_rwq_ind_table)(struct ibv_rwq_ind_table *rwq_ind_table);
    struct ibv_rwq_ind_table *(*create_rwq_ind_table)(
        struct ibv_context *context,
        struct ibv_rwq_ind_table_init_attr *init_attr);
    int (*destroy_wq)(struct ibv_wq *wq);
    int (*modify_wq)(struct ibv_wq *wq, struct ibv_wq_attr *wq_attr);
    struct ibv_wq *(*create_wq)(struct ibv_context *context,
                                struct ibv_wq_init_attr *wq_init_attr);
    int (*query_rt_values)(struct ibv_context *context,
                           struct ibv_values_ex *values);
    struct ibv_cq_ex *(*create_cq_ex)(struct ibv_context *context,
                                      struct ibv_cq_init_attr_ex *init_attr);
    struct verbs_ex_private *priv;
    int (*query_device_ex)(struct ibv_context *context,
                           const struct ibv_query_device_ex_input *input,
                           struct ibv_device_attr_ex *attr, size_t attr_size);
    int (*ibv_destroy_flow)(struct ibv_flow *flow);
    void (*ABI_placeholder2)(void);
    struct ibv_flow *(*ibv_create_flow)(struct ibv_qp *qp,
                                        struct ibv_flow_attr *flow_attr);
    void (*ABI_placeholder1)(void);
    struct ibv_qp *(*open_qp)(struct ibv_context *context,
                              struct ibv_qp_open_attr *attr);
    struct ibv_qp *(*create_qp_ex)(struct ibv_context *context,
                                   struct ibv_qp_init_attr_ex *qp_init_attr_ex);
    int (*get_srq_num)(struct ibv_srq *srq, uint32_t *srq_num);
    struct ibv_srq *(*create_srq_ex)(
        struct ibv_context *context,
        struct ibv_srq_init_attr_ex *srq_init_attr_ex);
    struct ibv_xrcd *(*open_xrcd)(struct ibv_context *context,
                                  struct ibv_xrcd_init_attr *xrcd_init_attr);
    int (*close_xrcd)(struct ibv_xrcd *xrcd);
    uint64_t _ABI_placeholder3;
    size_t sz;
    struct ibv_context context;
};

static inline struct verbs_context *verbs_get_ctx(struct ibv_context *ctx)
{
    if (ctx->abi_compat != __VERBS_ABI_IS_EXTENDED)
        return NULL;
    return (struct verbs_context *)((char *)ctx -
                                    offsetof(struct verbs_context, context));
}

/* The verbs_context of ctx if its library filled in op, else NULL. */
#define verbs_get_ctx_op(ctx, op)                                          \
    ({                                                                     \
        struct verbs_context *__vctx = verbs_get_ctx(ctx);                 \
        (!__vctx ||                                                        \
         __vctx->sz < sizeof(*__vctx) - offsetof(struct verbs_context, op) || \
         !__vctx->op)                                                      \
            ? NULL                                                         \
            : __vctx;                                                      \
    })

/* ------------------------------------------------------------------ */
/* Verbs                                                               */
/* ------------------------------------------------------------------ */

/*
 * A NULL-terminated array of the pfnic devices present (empty, not NULL, if
 * there are none); *num_devices (if not NULL) gets their number.
 */
struct ibv_device **ibv_get_device_list(int *num_devices);
void ibv_free_device_list(struct ibv_device **list);
const char *ibv_get_device_name(struct ibv_device *device);
/* The node GUID, network byte order. */
__be64 ibv_get_device_guid(struct ibv_device *device);

struct ibv_context *ibv_open_device(struct ibv_device *device);
int ibv_close_device(struct ibv_context *context);

int ibv_query_device(struct ibv_context *context,
                     struct ibv_device_attr *device_attr);

/* 0 or an errno value; EINVAL for a nonzero input->comp_mask. */
static inline int ibv_query_device_ex(struct ibv_context *context,
                                      const struct ibv_query_device_ex_input *input,
                                      struct ibv_device_attr_ex *attr)
{
    struct verbs_context *vctx;
    int ret;

    if (input && input->comp_mask)
        return EINVAL;
    vctx = verbs_get_ctx_op(context, query_device_ex);
    if (vctx) {
        ret = vctx->query_device_ex(context, input, attr, sizeof(*attr));
        if (ret != EOPNOTSUPP && ret != ENOSYS)
            return ret;
    }
    /* A library without it: the base attributes, the rest zero. */
    memset(attr, 0, sizeof(*attr));
    return ibv_query_device(context, &attr->orig_attr);
}

int ibv_query_port(struct ibv_context *context, uint8_t port_num,
                   struct _compat_ibv_port_attr *port_attr);

static inline int ___ibv_query_port(struct ibv_context *context,
                                    uint8_t port_num,
                                    struct ibv_port_attr *port_attr)
{
    struct verbs_context *vctx = verbs_get_ctx_op(context, query_port);

    if (!vctx) {
        memset(port_attr, 0, sizeof(*port_attr));
        return ibv_query_port(context, port_num,
                              (struct _compat_ibv_port_attr *)port_attr);
    }
    return vctx->query_port(context, port_num, port_attr, sizeof(*port_attr));
}

#define ibv_query_port(context, port_num, port_attr) \
    ___ibv_query_port(context, port_num, port_attr)
int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index,
                  union ibv_gid *gid);
/* The port has one P_Key, the default 0xffff (network byte order). */
int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index,
                   __be16 *pkey);
/* The index of pkey in the port's table (0 for 0xffff), or -1. */
int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num,
                       __be16 pkey);

int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
                      uint32_t gid_index, struct ibv_gid_entry *entry,
                      uint32_t flags, size_t entry_size);

/*
 * 0, or an errno value: EINVAL (port, index, flags), ENODATA (an index of
 * the table without a GID).
 */
static inline int ibv_query_gid_ex(struct ibv_context *context,
                                   uint32_t port_num, uint32_t gid_index,
                                   struct ibv_gid_entry *entry, uint32_t flags)
{
    return _ibv_query_gid_ex(context, port_num, gid_index, entry, flags,
                             sizeof(*entry));
}

ssize_t _ibv_query_gid_table(struct ibv_context *context,
                             struct ibv_gid_entry *entries, size_t max_entries,
                             uint32_t flags, size_t entry_size);

/*
 * The valid GIDs of every port: how many, or a negative errno value
 * (-EINVAL: flags, or more valid GIDs than max_entries).
 */
static inline ssize_t ibv_query_gid_table(struct ibv_context *context,
                                          struct ibv_gid_entry *entries,
                                          size_t max_entries, uint32_t flags)
{
    return _ibv_query_gid_table(context, entries, max_entries, flags,
                                sizeof(*entries));
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context);
int ibv_dealloc_pd(struct ibv_pd *pd);

/*
 * Nothing is pinned. Without IBV_ACCESS_ON_DEMAND the range is made present
 * at registration; with it, pages fault in when the device first touches
 * them. addr NULL with length SIZE_MAX and IBV_ACCESS_ON_DEMAND registers
 * the whole address space (the implicit MR).
 */
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
                          int access);
/* ibv_reg_mr at an I/O virtual address: pfnic's is always addr (EOPNOTSUPP). */
struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
                               uint64_t iova, int access);
struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
                                uint64_t iova, unsigned int access);
int ibv_dereg_mr(struct ibv_mr *mr);

static inline int ibv_advise_mr(struct ibv_pd *pd,
                                enum ibv_advise_mr_advice advice,
                                uint32_t flags, struct ibv_sge *sg_list,
                                uint32_t num_sge)
{
    struct verbs_context *vctx = verbs_get_ctx_op(pd->context, advise_mr);

    if (!vctx)
        return EOPNOTSUPP;
    return vctx->advise_mr(pd, advice, flags, sg_list, num_sge);
}

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context);
int ibv_destroy_comp_channel(struct ibv_comp_channel *channel);

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe,
                             void *cq_context,
                             struct ibv_comp_channel *channel,
                             int comp_vector);
int ibv_destroy_cq(struct ibv_cq *cq);

/* NULL with errno: EOPNOTSUPP for wc_flags or flags pfnic does not have. */
static inline struct ibv_cq_ex *ibv_create_cq_ex(struct ibv_context *context,
                                                 struct ibv_cq_init_attr_ex *cq_attr)
{
    struct verbs_context *vctx = verbs_get_ctx_op(context, create_cq_ex);

    if (!vctx) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    return vctx->create_cq_ex(context, cq_attr);
}

static inline int ibv_poll_cq(struct ibv_cq *cq, int num_entries,
                              struct ibv_wc *wc)
{
    return cq->context->ops.poll_cq(cq, num_entries, wc);
}

static inline int ibv_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
    return cq->context->ops.req_notify_cq(cq, solicited_only);
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
                     void **cq_context);
void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents);

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
                             struct ibv_qp_init_attr *qp_init_attr);
int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
                 struct ibv_qp_init_attr *init_attr);
int ibv_destroy_qp(struct ibv_qp *qp);

/*
 * ibv_create_qp with the attributes comp_mask selects (pd is required);
 * with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS an extended QP (ibv_qp_to_qp_ex).
 */
static inline struct ibv_qp *ibv_create_qp_ex(struct ibv_context *context,
                                              struct ibv_qp_init_attr_ex *qp_init_attr_ex)
{
    struct verbs_context *vctx;

    if (qp_init_attr_ex->comp_mask == IBV_QP_INIT_ATTR_PD)
        return ibv_create_qp(qp_init_attr_ex->pd,
                             (struct ibv_qp_init_attr *)qp_init_attr_ex);
    vctx = verbs_get_ctx_op(context, create_qp_ex);
    if (!vctx) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    return vctx->create_qp_ex(context, qp_init_attr_ex);
}

/* On failure *bad_wr is the first work request that was not posted. */
static inline int ibv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
                                struct ibv_send_wr **bad_wr)
{
    return qp->context->ops.post_send(qp, wr, bad_wr);
}

static inline int ibv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
                                struct ibv_recv_wr **bad_wr)
{
    return qp->context->ops.post_recv(qp, wr, bad_wr);
}

/* On failure *bad_recv_wr is the first work request that was not posted. */
static inline int ibv_post_srq_recv(struct ibv_srq *srq,
                                    struct ibv_recv_wr *recv_wr,
                                    struct ibv_recv_wr **bad_recv_wr)
{
    return srq->context->ops.post_srq_recv(srq, recv_wr, bad_recv_wr);
}

static inline int ibv_query_rt_values_ex(struct ibv_context *context,
                                         struct ibv_values_ex *values)
{
    struct verbs_context *vctx = verbs_get_ctx_op(context, query_rt_values);

    if (!vctx)
        return EOPNOTSUPP;
    return vctx->query_rt_values(context, values);
}

/* ------------------------------------------------------------------ */
/* Device memory                                                       */
/* ------------------------------------------------------------------ */

/*
 * Memory on the device (max_dm_size bytes per context, whole pages): the
 * CPU reaches it with ibv_memcpy_to_dm/ibv_memcpy_from_dm, work requests
 * through an MR from ibv_reg_dm_mr, which needs IBV_ACCESS_ZERO_BASED (its
 * addresses are offsets from the MR's start). A device without it fails
 * ibv_alloc_dm with EOPNOTSUPP.
 */
struct ibv_alloc_dm_attr {
    size_t length;
    uint32_t log_align_req;
    uint32_t comp_mask;
};

enum ibv_dm_mask {
    IBV_DM_MASK_HANDLE = 1 << 0,
};

struct ibv_dm {
    struct ibv_context *context;
    int (*memcpy_to_dm)(struct ibv_dm *dm, uint64_t dm_offset,
                        const void *host_addr, size_t length);
    int (*memcpy_from_dm)(void *host_addr, struct ibv_dm *dm,
                          uint64_t dm_offset, size_t length);
    uint32_t comp_mask;
    uint32_t handle;
};

static inline struct ibv_dm *ibv_alloc_dm(struct ibv_context *context,
                                          struct ibv_alloc_dm_attr *attr)
{
    struct verbs_context *vctx = verbs_get_ctx_op(context, alloc_dm);

    if (!vctx) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    return vctx->alloc_dm(context, attr);
}

static inline int ibv_free_dm(struct ibv_dm *dm)
{
    struct verbs_context *vctx = verbs_get_ctx_op(dm->context, free_dm);

    if (!vctx)
        return EOPNOTSUPP;
    return vctx->free_dm(dm);
}

static inline int ibv_memcpy_to_dm(struct ibv_dm *dm, uint64_t dm_offset,
                                   const void *host_addr, size_t length)
{
    return dm->memcpy_to_dm(dm, dm_offset, host_addr, length);
}

static inline int ibv_memcpy_from_dm(void *host_addr, struct ibv_dm *dm,
                                     uint64_t dm_offset, size_t length)
{
    return dm->memcpy_from_dm(host_addr, dm, dm_offset, length);
}

static inline struct ibv_mr *ibv_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm,
                                           uint64_t dm_offset, size_t length,
                                           unsigned int access)
{
    struct verbs_context *vctx = verbs_get_ctx_op(pd->context, reg_dm_mr);

    if (!vctx) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    return vctx->reg_dm_mr(pd, dm, dm_offset, length, access);
}

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

const char *ibv_node_type_str(enum ibv_node_type node_type);

/* Link rates: ah_attr.static_rate, and libibverbs' conversions of them. */
enum ibv_rate {
    IBV_RATE_MAX = 0,
    IBV_RATE_2_5_GBPS = 2,
    IBV_RATE_5_GBPS = 5,
    IBV_RATE_10_GBPS = 3,
    IBV_RATE_20_GBPS = 6,
    IBV_RATE_30_GBPS = 4,
    IBV_RATE_40_GBPS = 7,
    IBV_RATE_60_GBPS = 8,
    IBV_RATE_80_GBPS = 9,
    IBV_RATE_120_GBPS = 10,
    IBV_RATE_14_GBPS = 11,
    IBV_RATE_56_GBPS = 12,
    IBV_RATE_112_GBPS = 13,
    IBV_RATE_168_GBPS = 14,
    IBV_RATE_25_GBPS = 15,
    IBV_RATE_100_GBPS = 16,
    IBV_RATE_200_GBPS = 17,
    IBV_RATE_300_GBPS = 18,
    IBV_RATE_28_GBPS = 19,
    IBV_RATE_50_GBPS = 20,
    IBV_RATE_400_GBPS = 21,
    IBV_RATE_600_GBPS = 22,
    IBV_RATE_800_GBPS = 23,
    IBV_RATE_1200_GBPS = 24,
};
int ibv_rate_to_mult(enum ibv_rate rate);
enum ibv_rate mult_to_ibv_rate(int mult);
int ibv_rate_to_mbps(enum ibv_rate rate);
enum ibv_rate mbps_to_ibv_rate(int mbps);

/* What pfnic does not have: EOPNOTSUPP (or NULL with errno EOPNOTSUPP). */
enum ibv_rereg_mr_flags {
    IBV_REREG_MR_CHANGE_TRANSLATION = (1 << 0),
    IBV_REREG_MR_CHANGE_PD = (1 << 1),
    IBV_REREG_MR_CHANGE_ACCESS = (1 << 2),
    IBV_REREG_MR_FLAGS_SUPPORTED = ((IBV_REREG_MR_CHANGE_ACCESS << 1) - 1),
};
enum ibv_rereg_mr_err_code {
    IBV_REREG_MR_ERR_INPUT = -1,
    IBV_REREG_MR_ERR_DONT_FORK_NEW = -2,
    IBV_REREG_MR_ERR_DO_FORK_OLD = -3,
    IBV_REREG_MR_ERR_CMD = -4,
    IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW = -5,
};
/* IBV_REREG_MR_ERR_INPUT with errno EOPNOTSUPP: the MR stays as it was. */
int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
                 size_t length, int access);
int ibv_resize_cq(struct ibv_cq *cq, int cqe);
struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
                                 size_t length, uint64_t iova, int fd,
                                 int access);
struct ibv_context *ibv_import_device(int cmd_fd);
struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle);
void ibv_unimport_pd(struct ibv_pd *pd);
struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle);
void ibv_unimport_mr(struct ibv_mr *mr);
struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle);
void ibv_unimport_dm(struct ibv_dm *dm);
/* 0: data is not known to be written in order before its completion. */
int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op,
                               uint32_t flags);

/* The kernel's index of an RDMA device: -1 for pfnic's (no ib_core device). */
int ibv_get_device_index(struct ibv_device *device);

/*
 * Asynchronous events. pfnic's driver reports none yet: context->async_fd
 * never becomes readable, ibv_get_async_event blocks (or, on an O_NONBLOCK
 * async_fd, returns -1 with errno EAGAIN), as on a device whose ports and
 * queues never change state on their own.
 */
enum ibv_event_type {
    IBV_EVENT_CQ_ERR,
    IBV_EVENT_QP_FATAL,
    IBV_EVENT_QP_REQ_ERR,
    IBV_EVENT_QP_ACCESS_ERR,
    IBV_EVENT_COMM_EST,
    IBV_EVENT_SQ_DRAINED,
    IBV_EVENT_PATH_MIG,
    IBV_EVENT_PATH_MIG_ERR,
    IBV_EVENT_DEVICE_FATAL,
    IBV_EVENT_PORT_ACTIVE,
    IBV_EVENT_PORT_ERR,
    IBV_EVENT_LID_CHANGE,
    IBV_EVENT_PKEY_CHANGE,
    IBV_EVENT_SM_CHANGE,
    IBV_EVENT_SRQ_ERR,
    IBV_EVENT_SRQ_LIMIT_REACHED,
    IBV_EVENT_QP_LAST_WQE_REACHED,
    IBV_EVENT_CLIENT_REREGISTER,
    IBV_EVENT_GID_CHANGE,
    IBV_EVENT_WQ_FATAL,
};

struct ibv_async_event {
    union {
        struct ibv_cq *cq;
        struct ibv_qp *qp;
        struct ibv_srq *srq;
        struct ibv_wq *wq;
        int port_num;
    } element;
    enum ibv_event_type event_type;
};

/* 0 and the next event, or -1 with errno. */
int ibv_get_async_event(struct ibv_context *context,
                        struct ibv_async_event *event);
void ibv_ack_async_event(struct ibv_async_event *event);
const char *ibv_event_type_str(enum ibv_event_type event);

/* Enhanced connection establishment: pfnic has none (EOPNOTSUPP). */
struct ibv_ece {
    uint32_t vendor_id;
    uint32_t options;
    uint32_t comp_mask;
};
int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece);
int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece);
const char *ibv_port_state_str(enum ibv_port_state port_state);

/*
 * Fork support: nothing to set up, as no memory is pinned by fork-unsafe
 * means (IBV_FORK_UNNEEDED).
 */
enum ibv_fork_status {
    IBV_FORK_DISABLED,
    IBV_FORK_ENABLED,
    IBV_FORK_UNNEEDED,
};
int ibv_fork_init(void);
enum ibv_fork_status ibv_is_fork_initialized(void);

#ifdef __cplusplus
}
#endif

#endif /* INFINIBAND_VERBS_H */
