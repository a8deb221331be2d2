/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The pfnic uAPI (drivers/pfnic/uapi.rs, uAPI version 20) as a C header, written
 * by hand from uapi.rs for syz-extract only: the kernel tree has no C header for
 * pfnic, and uapi.rs stays the one definition. syz-extract compiles this file to
 * generate ../sys/linux/dev_pfnic.txt.const; the _Static_asserts below hold the
 * sizes the Rust definitions have (checked against uapi.rs when this was written;
 * see ../README.md for how to check again after a uAPI change).
 */
#ifndef PFNIC_UAPI_H
#define PFNIC_UAPI_H

#include <linux/types.h>
#include <linux/ioctl.h>

#define PFNIC_UAPI_VERSION 20
#define PFNIC_IOCTL_MAGIC 0xf5

#define PFNIC_CAP_ATS (1ULL << 0)
#define PFNIC_CAP_PASID (1ULL << 1)
#define PFNIC_CAP_PRI (1ULL << 2)
#define PFNIC_CAP_SELFTEST (1ULL << 3)
#define PFNIC_CAP_VERBS (1ULL << 4)
#define PFNIC_CAP_WIRE (1ULL << 5)
#define PFNIC_CAP_TABLES (1ULL << 6)
#define PFNIC_CAP_FAULTS (1ULL << 7)
#define PFNIC_CAP_SRQ (1ULL << 8)
#define PFNIC_CAP_TIMESTAMPS (1ULL << 9)
#define PFNIC_CAP_DM (1ULL << 10)

struct pfnic_query_device {
	__u32 uapi_version, device_abi, fw_version, revision;
	__u16 vendor_id, device_id, subsystem_vendor_id, subsystem_id;
	__u32 pci_rid, index;
	__u64 caps;
	__u32 pasid_width, pri_max_requests, num_vectors, num_contexts;
	__u64 reserved[4];
};

struct pfnic_selftest {
	__u32 vector, cookie, flags, echo;
	__u64 latency_ns, interrupts;
};

struct pfnic_translation_stats {
	__u32 page_requests, pri_success, pri_failed, atc_hits, atc_misses;
	__u32 invalidations, prq_full, prq_held, page_request_groups, page_request_groups_max;
	__u32 lookahead_pages, lookahead_used, lookahead_wasted, reserved;
};

struct pfnic_query_context {
	__u32 context, pasid;
	struct pfnic_translation_stats translation;
	__u64 remote_access_errors;
	__u32 mem_mode, reserved;
};

struct pfnic_device_stats {
	__u64 contexts_created, contexts_stopped_by_exit, context_failures, interrupts;
	__u32 contexts_active;
	struct pfnic_translation_stats translation;
	__u32 fault_latency_us_log2[16];
	__u32 reserved0;
	__u64 contexts_stuck, objects_quarantined;
	__u32 group_pages_log2[8];
};

#define PFNIC_OP_COPY 1
#define PFNIC_OP_FILL 2
#define PFNIC_OP_COMPARE 3

struct pfnic_submit {
	__u32 opcode, flags;
	__u64 src, dst, len, pattern;
	__u32 status, page_requests;
	__u64 result, latency_ns;
};

#define PFNIC_MMAP_DOORBELL 0

#define PFNIC_ACCESS_LOCAL_WRITE 1
#define PFNIC_ACCESS_REMOTE_WRITE 2
#define PFNIC_ACCESS_REMOTE_READ 4
#define PFNIC_ACCESS_REMOTE_ATOMIC 8
#define PFNIC_ACCESS_ON_DEMAND 0x40

#define PFNIC_GID_TBL_LEN 2
#define PFNIC_PORT_COUNTERS 20

struct pfnic_query_verbs {
	__u64 node_guid, max_mr_size, page_size_cap, odp_general_caps;
	__u32 odp_rc_caps, max_qp, max_qp_wr, max_sge, max_cq, max_cqe, max_mr, max_pd;
	__u32 max_qp_rd_atom, atomic_cap;
	__u32 max_srq, max_srq_wr, max_srq_sge, max_dm_size;
	__u64 completion_timestamp_mask, hca_core_clock;
};

struct pfnic_query_port {
	__u32 state, max_mtu, active_mtu, link_layer, max_msg_sz, gid_tbl_len;
	__u16 lid, sm_lid;
	__u8 active_width, active_speed;
	__u16 reserved0;
	__u8 gids[PFNIC_GID_TBL_LEN][16];
	__u32 port_flags, ipv4;
	__u8 mac[6];
	__u16 reserved1;
	__u32 counters[PFNIC_PORT_COUNTERS];
	__u64 reserved[2];
};

struct pfnic_port_ipv4 {
	__u32 ipv4, reserved;
};

struct pfnic_pd_handle {
	__u32 pd, reserved;
};

struct pfnic_reg_mr {
	__u32 pd, access;
	__u64 addr, length;
	__u32 mr, lkey, rkey, reserved;
};

struct pfnic_mr_handle {
	__u32 mr, reserved;
};

#define PFNIC_ADVISE_PREFETCH 0
#define PFNIC_ADVISE_PREFETCH_WRITE 1
#define PFNIC_ADVISE_PREFETCH_NO_FAULT 2
#define PFNIC_ADVISE_FLAG_FLUSH 1
#define PFNIC_ADVISE_MAX_SGE 8

struct pfnic_sge {
	__u64 addr;
	__u32 length, lkey;
};

struct pfnic_advise_mr {
	__u32 advice, flags, num_sge, reserved;
	struct pfnic_sge sge[PFNIC_ADVISE_MAX_SGE];
};

struct pfnic_query_mr {
	__u32 mr, reserved;
	__u64 page_faults, page_faults_handled, page_invalidations;
	__u64 page_invalidations_handled, page_prefetch, remote_access_errors, page_fault_groups;
	__u64 pages_pinned, pages_mapped;
};

#define PFNIC_MEM_MODE_SVA 1
#define PFNIC_MEM_MODE_PINNED 2
#define PFNIC_MEM_MODE_ODP 3

struct pfnic_mem_mode {
	__u32 mode, reserved;
};

#define PFNIC_CQ_CREATE_TIMESTAMP (1 << 0)
#define PFNIC_DB_CLOCK_LO 0x020
#define PFNIC_DB_CLOCK_HI 0x024

struct pfnic_create_cq {
	__u32 cqe;
	__s32 channel;
	__u64 cq_context;
	__u32 cqn, entries;
	__u64 mmap_offset, mmap_len, record_offset;
	__u32 flags, cqe_size;
};

struct pfnic_comp_channel {
	__s32 fd;
	__u32 reserved;
};

#define PFNIC_MAX_COMP_CHANNELS 64

struct pfnic_object_number {
	__u32 num, events_reported;
};

struct pfnic_qp_cap {
	__u32 max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data;
};

#define PFNIC_QPT_RC 2
#define PFNIC_QP_CREATE_RECV_FAULT_BACKUP (1 << 0)
#define PFNIC_QP_CREATE_SRQ (1 << 1)

struct pfnic_create_qp {
	__u32 pd, send_cq, recv_cq, qp_type, sq_sig_all, flags;
	struct pfnic_qp_cap cap;
	__u32 qpn, sq_entries, rq_entries;
	__u64 mmap_offset, mmap_len, rq_offset, record_offset;
	__u64 qp_context;
	__u32 srq, reserved;
};

#define PFNIC_QP_STATE (1 << 0)
#define PFNIC_QP_CUR_STATE (1 << 1)
#define PFNIC_QP_ACCESS_FLAGS (1 << 3)
#define PFNIC_QP_PKEY_INDEX (1 << 4)
#define PFNIC_QP_PORT (1 << 5)
#define PFNIC_QP_AV (1 << 7)
#define PFNIC_QP_PATH_MTU (1 << 8)
#define PFNIC_QP_TIMEOUT (1 << 9)
#define PFNIC_QP_RETRY_CNT (1 << 10)
#define PFNIC_QP_RNR_RETRY (1 << 11)
#define PFNIC_QP_RQ_PSN (1 << 12)
#define PFNIC_QP_MAX_QP_RD_ATOMIC (1 << 13)
#define PFNIC_QP_MIN_RNR_TIMER (1 << 15)
#define PFNIC_QP_SQ_PSN (1 << 16)
#define PFNIC_QP_MAX_DEST_RD_ATOMIC (1 << 17)
#define PFNIC_QP_DEST_QPN (1 << 20)

/*
 * Not in uapi.rs: the attribute masks of the RC transitions' required
 * attributes (docs/uapi.md, "Queue pairs"), so that the fuzzer reaches
 * INIT, RTR and RTS without guessing seven bits at once.
 */
#define PFNIC_SYZ_MASK_TO_INIT (PFNIC_QP_STATE | PFNIC_QP_PKEY_INDEX | PFNIC_QP_PORT | PFNIC_QP_ACCESS_FLAGS)
#define PFNIC_SYZ_MASK_TO_RTR (PFNIC_QP_STATE | PFNIC_QP_AV | PFNIC_QP_PATH_MTU | PFNIC_QP_DEST_QPN | \
			       PFNIC_QP_RQ_PSN | PFNIC_QP_MAX_DEST_RD_ATOMIC | PFNIC_QP_MIN_RNR_TIMER)
#define PFNIC_SYZ_MASK_TO_RTS (PFNIC_QP_STATE | PFNIC_QP_SQ_PSN | PFNIC_QP_TIMEOUT | PFNIC_QP_RETRY_CNT | \
			       PFNIC_QP_RNR_RETRY | PFNIC_QP_MAX_QP_RD_ATOMIC)

struct pfnic_qp_attr {
	__u32 qp_state, cur_qp_state, path_mtu, qp_access_flags, pkey_index, port_num;
	__u32 dest_qp_num, rq_psn, sq_psn, min_rnr_timer, timeout, retry_cnt, rnr_retry;
	__u32 max_rd_atomic, max_dest_rd_atomic, dlid, sl, is_global, sgid_index;
	__u32 hop_limit, traffic_class, flow_label;
	__u8 dgid[16];
	__u32 reserved[2];
};

struct pfnic_modify_qp {
	__u32 qpn, attr_mask;
	struct pfnic_qp_attr attr;
};

struct pfnic_qp_stats {
	__u64 page_requests, rnr_waits, wqes, bytes, refused;
	__u32 next_send_psn, expected_recv_psn;
	__u64 retransmits, rnr_naks_sent, rnr_naks_received, seq_naks_sent, duplicates;
};

struct pfnic_query_qp {
	__u32 qpn, sq_sig_all;
	struct pfnic_qp_attr attr;
	struct pfnic_qp_cap cap;
	__u32 reserved;
	struct pfnic_qp_stats stats;
};

struct pfnic_cq_event {
	__u64 cq_context;
	__u32 cqn, reserved;
};

struct pfnic_async_fd {
	__s32 fd;
	__u32 reserved;
};

#define PFNIC_EVENT_CQ_ERR 0
#define PFNIC_EVENT_QP_FATAL 1
#define PFNIC_EVENT_DEVICE_FATAL 8
#define PFNIC_EVENT_PORT_ACTIVE 9
#define PFNIC_EVENT_PORT_ERR 10
#define PFNIC_EVENT_SRQ_LIMIT_REACHED 15
#define PFNIC_EVENT_QP_LAST_WQE_REACHED 16
#define PFNIC_EVENT_GID_CHANGE 18

struct pfnic_async_event {
	__u64 element;
	__u32 event_type, object;
};

struct pfnic_create_srq {
	__u32 pd, max_wr, max_sge, srq_limit;
	__u64 srq_context;
	__u32 srqn, entries;
	__u64 mmap_offset, mmap_len, record_offset;
};

#define PFNIC_SRQ_MAX_WR (1 << 0)
#define PFNIC_SRQ_LIMIT (1 << 1)

struct pfnic_modify_srq {
	__u32 srqn, attr_mask, max_wr, srq_limit;
};

struct pfnic_query_srq {
	__u32 srqn, max_wr, max_sge, srq_limit, head, tail, qps, limit_events;
};

struct pfnic_alloc_dm {
	__u64 length;
	__u32 log_align_req, dm;
	__u64 mmap_offset, mmap_len;
};

struct pfnic_dm_handle {
	__u32 dm, reserved;
};

struct pfnic_reg_dm_mr {
	__u32 pd, dm, access, reserved;
	__u64 dm_offset, length;
	__u32 mr, lkey, rkey, reserved2;
};

#define PFNIC_IOCTL_QUERY_DEVICE _IOR(PFNIC_IOCTL_MAGIC, 0x00, struct pfnic_query_device)
#define PFNIC_IOCTL_SELFTEST _IOWR(PFNIC_IOCTL_MAGIC, 0x01, struct pfnic_selftest)
#define PFNIC_IOCTL_QUERY_CONTEXT _IOR(PFNIC_IOCTL_MAGIC, 0x02, struct pfnic_query_context)
#define PFNIC_IOCTL_QUERY_STATS _IOR(PFNIC_IOCTL_MAGIC, 0x03, struct pfnic_device_stats)
#define PFNIC_IOCTL_SUBMIT _IOWR(PFNIC_IOCTL_MAGIC, 0x04, struct pfnic_submit)
#define PFNIC_IOCTL_QUERY_VERBS _IOR(PFNIC_IOCTL_MAGIC, 0x05, struct pfnic_query_verbs)
#define PFNIC_IOCTL_QUERY_PORT _IOR(PFNIC_IOCTL_MAGIC, 0x06, struct pfnic_query_port)
#define PFNIC_IOCTL_ALLOC_PD _IOR(PFNIC_IOCTL_MAGIC, 0x07, struct pfnic_pd_handle)
#define PFNIC_IOCTL_DEALLOC_PD _IOW(PFNIC_IOCTL_MAGIC, 0x08, struct pfnic_pd_handle)
#define PFNIC_IOCTL_REG_MR _IOWR(PFNIC_IOCTL_MAGIC, 0x09, struct pfnic_reg_mr)
#define PFNIC_IOCTL_DEREG_MR _IOW(PFNIC_IOCTL_MAGIC, 0x0a, struct pfnic_mr_handle)
#define PFNIC_IOCTL_ADVISE_MR _IOW(PFNIC_IOCTL_MAGIC, 0x0b, struct pfnic_advise_mr)
#define PFNIC_IOCTL_QUERY_MR _IOWR(PFNIC_IOCTL_MAGIC, 0x0c, struct pfnic_query_mr)
#define PFNIC_IOCTL_CREATE_CQ _IOWR(PFNIC_IOCTL_MAGIC, 0x0d, struct pfnic_create_cq)
#define PFNIC_IOCTL_DESTROY_CQ _IOWR(PFNIC_IOCTL_MAGIC, 0x0e, struct pfnic_object_number)
#define PFNIC_IOCTL_CREATE_QP _IOWR(PFNIC_IOCTL_MAGIC, 0x0f, struct pfnic_create_qp)
#define PFNIC_IOCTL_MODIFY_QP _IOW(PFNIC_IOCTL_MAGIC, 0x10, struct pfnic_modify_qp)
#define PFNIC_IOCTL_QUERY_QP _IOWR(PFNIC_IOCTL_MAGIC, 0x11, struct pfnic_query_qp)
#define PFNIC_IOCTL_DESTROY_QP _IOWR(PFNIC_IOCTL_MAGIC, 0x12, struct pfnic_object_number)
#define PFNIC_IOCTL_SET_PORT_IPV4 _IOW(PFNIC_IOCTL_MAGIC, 0x13, struct pfnic_port_ipv4)
#define PFNIC_IOCTL_SET_MEM_MODE _IOW(PFNIC_IOCTL_MAGIC, 0x15, struct pfnic_mem_mode)
#define PFNIC_IOCTL_CREATE_COMP_CHANNEL _IOR(PFNIC_IOCTL_MAGIC, 0x14, struct pfnic_comp_channel)
#define PFNIC_IOCTL_GET_ASYNC_FD _IOR(PFNIC_IOCTL_MAGIC, 0x16, struct pfnic_async_fd)
#define PFNIC_IOCTL_CREATE_SRQ _IOWR(PFNIC_IOCTL_MAGIC, 0x17, struct pfnic_create_srq)
#define PFNIC_IOCTL_MODIFY_SRQ _IOW(PFNIC_IOCTL_MAGIC, 0x18, struct pfnic_modify_srq)
#define PFNIC_IOCTL_QUERY_SRQ _IOWR(PFNIC_IOCTL_MAGIC, 0x19, struct pfnic_query_srq)
#define PFNIC_IOCTL_DESTROY_SRQ _IOWR(PFNIC_IOCTL_MAGIC, 0x1a, struct pfnic_object_number)
#define PFNIC_IOCTL_ALLOC_DM _IOWR(PFNIC_IOCTL_MAGIC, 0x1b, struct pfnic_alloc_dm)
#define PFNIC_IOCTL_FREE_DM _IOW(PFNIC_IOCTL_MAGIC, 0x1c, struct pfnic_dm_handle)
#define PFNIC_IOCTL_REG_DM_MR _IOWR(PFNIC_IOCTL_MAGIC, 0x1d, struct pfnic_reg_dm_mr)

/* The sizes of drivers/pfnic/uapi.rs (core::mem::size_of), uAPI 20. */
_Static_assert(sizeof(struct pfnic_query_device) == 88, "QueryDevice");
_Static_assert(sizeof(struct pfnic_selftest) == 32, "Selftest");
_Static_assert(sizeof(struct pfnic_query_context) == 80, "QueryContext");
_Static_assert(sizeof(struct pfnic_translation_stats) == 56, "TranslationStats");
_Static_assert(sizeof(struct pfnic_device_stats) == 208, "DeviceStats");
_Static_assert(sizeof(struct pfnic_submit) == 64, "Submit");
_Static_assert(sizeof(struct pfnic_query_verbs) == 104, "QueryVerbs");
_Static_assert(sizeof(struct pfnic_query_port) == 176, "QueryPort");
_Static_assert(sizeof(struct pfnic_port_ipv4) == 8, "PortIpv4");
_Static_assert(sizeof(struct pfnic_pd_handle) == 8, "PdHandle");
_Static_assert(sizeof(struct pfnic_reg_mr) == 40, "RegMr");
_Static_assert(sizeof(struct pfnic_mr_handle) == 8, "MrHandle");
_Static_assert(sizeof(struct pfnic_sge) == 16, "Sge");
_Static_assert(sizeof(struct pfnic_advise_mr) == 144, "AdviseMr");
_Static_assert(sizeof(struct pfnic_query_mr) == 80, "QueryMr");
_Static_assert(sizeof(struct pfnic_mem_mode) == 8, "MemMode");
_Static_assert(sizeof(struct pfnic_create_cq) == 56, "CreateCq");
_Static_assert(sizeof(struct pfnic_comp_channel) == 8, "CompChannel");
_Static_assert(sizeof(struct pfnic_object_number) == 8, "ObjectNumber");
_Static_assert(sizeof(struct pfnic_qp_cap) == 20, "QpCap");
_Static_assert(sizeof(struct pfnic_create_qp) == 104, "CreateQp");
_Static_assert(sizeof(struct pfnic_qp_attr) == 112, "QpAttr");
_Static_assert(sizeof(struct pfnic_modify_qp) == 120, "ModifyQp");
_Static_assert(sizeof(struct pfnic_qp_stats) == 88, "QpStats");
_Static_assert(sizeof(struct pfnic_query_qp) == 232, "QueryQp");
_Static_assert(sizeof(struct pfnic_cq_event) == 16, "CqEvent");
_Static_assert(sizeof(struct pfnic_async_fd) == 8, "AsyncFd");
_Static_assert(sizeof(struct pfnic_async_event) == 16, "AsyncEvent");
_Static_assert(sizeof(struct pfnic_create_srq) == 56, "CreateSrq");
_Static_assert(sizeof(struct pfnic_modify_srq) == 16, "ModifySrq");
_Static_assert(sizeof(struct pfnic_query_srq) == 32, "QuerySrq");
_Static_assert(sizeof(struct pfnic_alloc_dm) == 32, "AllocDm");
_Static_assert(sizeof(struct pfnic_dm_handle) == 8, "DmHandle");
_Static_assert(sizeof(struct pfnic_reg_dm_mr) == 48, "RegDmMr");

#endif /* PFNIC_UAPI_H */
