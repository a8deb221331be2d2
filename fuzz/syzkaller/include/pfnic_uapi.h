/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The pfnic uAPI (drivers/pfnic/uapi.rs, uAPI version 21) as a C header, written
 * by hand from uapi.rs for syz-extract only: the kernel tree has no C header for
 * pfnic, and uapi.rs stays the one definition: the device file's ioctls (the
 * verbs objects' ioctls were retired in uAPI 21). syz-extract compiles this file to
 * generate ../sys/linux/dev_pfnic.txt.const; the _Static_asserts below hold the
 * sizes the Rust definitions have (checked against uapi.rs when this was written;
 * see ../README.md for how to check again after a uAPI change).
 */
#ifndef PFNIC_UAPI_H
#define PFNIC_UAPI_H

#include <linux/types.h>
#include <linux/ioctl.h>

#define PFNIC_UAPI_VERSION 21
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

#define PFNIC_IOCTL_QUERY_DEVICE _IOR(PFNIC_IOCTL_MAGIC, 0x00, struct pfnic_query_device)
#define PFNIC_IOCTL_SELFTEST _IOWR(PFNIC_IOCTL_MAGIC, 0x01, struct pfnic_selftest)
#define PFNIC_IOCTL_QUERY_CONTEXT _IOR(PFNIC_IOCTL_MAGIC, 0x02, struct pfnic_query_context)
#define PFNIC_IOCTL_QUERY_STATS _IOR(PFNIC_IOCTL_MAGIC, 0x03, struct pfnic_device_stats)
#define PFNIC_IOCTL_SUBMIT _IOWR(PFNIC_IOCTL_MAGIC, 0x04, struct pfnic_submit)
#define PFNIC_IOCTL_QUERY_VERBS _IOR(PFNIC_IOCTL_MAGIC, 0x05, struct pfnic_query_verbs)
#define PFNIC_IOCTL_QUERY_PORT _IOR(PFNIC_IOCTL_MAGIC, 0x06, struct pfnic_query_port)
#define PFNIC_IOCTL_SET_PORT_IPV4 _IOW(PFNIC_IOCTL_MAGIC, 0x13, struct pfnic_port_ipv4)

/* The sizes of drivers/pfnic/uapi.rs (core::mem::size_of), uAPI 21. */
_Static_assert(sizeof(struct pfnic_query_device) == 88, "QueryDevice");
_Static_assert(sizeof(struct pfnic_selftest) == 32, "Selftest");
_Static_assert(sizeof(struct pfnic_query_context) == 80, "QueryContext");
_Static_assert(sizeof(struct pfnic_translation_stats) == 56, "TranslationStats");
_Static_assert(sizeof(struct pfnic_device_stats) == 208, "DeviceStats");
_Static_assert(sizeof(struct pfnic_submit) == 64, "Submit");
_Static_assert(sizeof(struct pfnic_query_verbs) == 104, "QueryVerbs");
_Static_assert(sizeof(struct pfnic_query_port) == 176, "QueryPort");
_Static_assert(sizeof(struct pfnic_port_ipv4) == 8, "PortIpv4");

#endif /* PFNIC_UAPI_H */
