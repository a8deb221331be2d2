/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR MIT) */
/*
 * The driver data of pfnic's RDMA device verbs (/dev/infiniband/uverbsN):
 * what the rdma-core provider, libpfnic-rdmav34.so, and the driver exchange
 * after the RDMA core's own arguments. The driver's declarations are in
 * drivers/pfnic/uapi.rs; make test's host unit tests compile this header
 * against their layout (userspace/pfnic-sys/src/rdma_abi_check.rs).
 */
#ifndef PFNIC_ABI_USER_H
#define PFNIC_ABI_USER_H

#include <linux/types.h>

/* The uverbs device's abi_version in sysfs; the provider accepts only this. */
#define PFNIC_IB_ABI_VERSION 1

/* Memory modes: how a context's MRs reach its memory (docs/uapi.md). */
#define PFNIC_IB_MEM_MODE_SVA 1		/* the IOMMU, in the process's PASID */
#define PFNIC_IB_MEM_MODE_PINNED 2	/* pinned pages, the device's tables */
#define PFNIC_IB_MEM_MODE_ODP 3		/* tables the driver fills on demand */

/* The provider's request in ibv_open_device() (GET_CONTEXT). */
struct pfnic_ib_alloc_ucontext_req {
	__u32 mem_mode;		/* PFNIC_IB_MEM_MODE_*, 0 for the default */
	__u32 reserved;
};

/* The driver's part of the answer to ibv_open_device() (GET_CONTEXT). */
struct pfnic_ib_alloc_ucontext_resp {
	__u32 uapi_version;	/* the private interface's version */
	__u32 device_abi;	/* register map version: major 31:16, minor 15:0 */
	__aligned_u64 caps;	/* PFNIC_CAP_* bits */
	__u32 index;		/* N of the device's /dev/pfnicN */
	__u32 reserved;
	__u32 mem_mode;		/* the context's PFNIC_IB_MEM_MODE_* */
	__u32 odp_rc_caps;	/* IBV_ODP_SUPPORT_* of RC QPs in that mode */
	__aligned_u64 odp_general_caps;	/* IBV_ODP_SUPPORT{,_IMPLICIT} in it */
};

/*
 * The first page of the uverbs file is the context's doorbell page; a CQ's
 * or QP's ring memory is at the offset its creation answered.
 */
#define PFNIC_IB_MMAP_DOORBELL 0

/* pfnic_ib_create_cq_req.flags: 64-byte CQEs with the device clock. */
#define PFNIC_IB_CQ_CREATE_TIMESTAMP 1

/* The provider's request in ibv_create_cq() and ibv_create_cq_ex(). */
struct pfnic_ib_create_cq_req {
	__u32 flags;		/* PFNIC_IB_CQ_CREATE_* */
	__u32 reserved;
};

/* The driver's part of the answer to ibv_create_cq(). */
struct pfnic_ib_create_cq_resp {
	__u32 cqn;
	__u32 entries;		/* CQEs in the ring, a power of 2 */
	__aligned_u64 mmap_offset;	/* of the ring in the uverbs file */
	__aligned_u64 mmap_len;
	__aligned_u64 record_offset;	/* of the CQ record in the mapping */
	__u32 cqe_size;		/* 32, or 64 with timestamps */
	__u32 reserved;
};

/* The provider's request in ibv_create_qp(). */
struct pfnic_ib_create_qp_req {
	__u32 flags;		/* 1: receive faults use the backup buffer */
	__u32 reserved;
};

/*
 * The driver's part of the answer to ibv_create_qp(): the send queue at the
 * start of the mapping, the receive queue at rq_offset, the QP record at
 * record_offset.
 */
struct pfnic_ib_create_qp_resp {
	__u32 sq_entries;
	__u32 rq_entries;
	__aligned_u64 mmap_offset;
	__aligned_u64 mmap_len;
	__aligned_u64 rq_offset;
	__aligned_u64 record_offset;
};

/*
 * The driver's part of the answer to ibv_create_srq(): the queue at the
 * start of the mapping, the SRQ record at record_offset.
 */
struct pfnic_ib_create_srq_resp {
	__u32 srqn;
	__u32 entries;		/* a power of 2 */
	__aligned_u64 mmap_offset;
	__aligned_u64 mmap_len;
	__aligned_u64 record_offset;
};

/*
 * The driver's part of the answer to ibv_alloc_dm(), in the attribute
 * UVERBS_ATTR_UHW_OUT of the core's DM_ALLOC: the memory is mmap_len bytes of
 * the uverbs file at mmap_offset. The provider sends no request.
 */
struct pfnic_ib_alloc_dm_resp {
	__aligned_u64 mmap_offset;
	__aligned_u64 mmap_len;	/* the length, rounded up to pages */
};

/*
 * The driver's part of the answer to ibv_create_ah(): the address vector
 * a UD send work queue entry carries at bytes 0x18..0x3f (docs/verbs.md),
 * as the device reads it. The provider copies it into each work request.
 */
#define PFNIC_AH_FLAG_GRH 1		/* the receiver gets a GRH */
#define PFNIC_AH_FLAG_IPV4 2		/* ... of RoCEv2 over IPv4 */

struct pfnic_ib_create_ah_resp {
	__u32 dest_ip;		/* IPv4, 0: this device */
	__u8 traffic_class;
	__u8 hop_limit;		/* 0: 64 */
	__u8 ah_flags;		/* PFNIC_AH_FLAG_* */
	__u8 reserved0;
	__u8 dmac[6];		/* zero: none resolved */
	__u8 reserved1[10];
	__u8 dgid[16];
};

#endif /* PFNIC_ABI_USER_H */
