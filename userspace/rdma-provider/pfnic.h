/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * pfnic's rdma-core provider: the userspace half of the RDMA device the
 * driver registers with the RDMA core (pfnicN, /dev/infiniband/uverbsN).
 */
#ifndef PFNIC_PROVIDER_H
#define PFNIC_PROVIDER_H

#include <infiniband/driver.h>
#include <rdma/pfnic-abi.h>

struct pfnic_device {
	struct verbs_device ibv_dev;
};

struct pfnic_context {
	struct verbs_context ibv_ctx;
	/* What the driver said of itself when the context was opened. */
	struct pfnic_ib_alloc_ucontext_resp info;
};

static inline struct pfnic_context *to_pfnic_ctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct pfnic_context, ibv_ctx.context);
}

#endif /* PFNIC_PROVIDER_H */
