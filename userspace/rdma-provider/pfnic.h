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
	/* The context's doorbell page. */
	void *doorbell;
};

/* A CQ and its ring, mapped from the uverbs file. */
struct pfnic_cq {
	struct ibv_cq ibv_cq;
	struct pfnic_ib_create_cq_resp layout;
	void *ring;
};

/* A QP and its queues, mapped from the uverbs file. */
struct pfnic_qp {
	struct ibv_qp ibv_qp;
	struct pfnic_ib_create_qp_resp layout;
	void *queues;
};

static inline struct pfnic_context *to_pfnic_ctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct pfnic_context, ibv_ctx.context);
}

static inline struct pfnic_cq *to_pfnic_cq(struct ibv_cq *ibcq)
{
	return container_of(ibcq, struct pfnic_cq, ibv_cq);
}

static inline struct pfnic_qp *to_pfnic_qp(struct ibv_qp *ibqp)
{
	return container_of(ibqp, struct pfnic_qp, ibv_qp);
}

#endif /* PFNIC_PROVIDER_H */
