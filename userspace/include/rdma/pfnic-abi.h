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

/* The driver's part of the answer to ibv_open_device() (GET_CONTEXT). */
struct pfnic_ib_alloc_ucontext_resp {
	__u32 uapi_version;	/* the private interface's version */
	__u32 device_abi;	/* register map version: major 31:16, minor 15:0 */
	__aligned_u64 caps;	/* PFNIC_CAP_* bits */
	__u32 index;		/* N of the device's /dev/pfnicN */
	__u32 reserved;
};

#endif /* PFNIC_ABI_USER_H */
