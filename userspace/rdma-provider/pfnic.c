// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * pfnic's rdma-core provider (libpfnic-rdmav34.so): Debian's own
 * libibverbs.so.1 loads it for the RDMA devices the pfnic driver registers
 * with the RDMA core, matched by their PCI function's IDs.
 *
 * It opens a context through the core (GET_CONTEXT, checking the driver's
 * ABI), answers the device and port queries with the core's commands, and
 * creates PDs, MRs, CQs and RC QPs through the core. The data path is
 * Rust's (userspace/pfnic-provider, on pfnic-verbs): it maps the context's
 * doorbell page and each CQ's ring and QP's queues from the uverbs file,
 * and posts and polls there without a system call.
 *
 * It uses only provider calls whose signature is the same in rdma-core 44
 * (Debian bookworm's libibverbs) and 56.1 (the source it is built in), both
 * private ABI 34: it is built against 56.1's headers and loaded by 44.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>

#include "pfnic.h"

/* The PCI IDs of the pfnic function (docs/registers.md). */
#define PCI_VENDOR_ID_REDHAT_QUMRANET 0x1af4
#define PCI_DEVICE_ID_PFNIC 0x10f5

_Static_assert(sizeof(struct pfnic_ib_alloc_ucontext_resp) == 24,
	       "struct pfnic_ib_alloc_ucontext_resp differs from the driver's");

struct pfnic_get_context_resp {
	struct ib_uverbs_get_context_resp ibv_resp;
	struct pfnic_ib_alloc_ucontext_resp drv;
};

struct pfnic_create_cq_cmd {
	struct ibv_create_cq ibv_cmd;
	struct pfnic_ib_create_cq_req drv;
};

struct pfnic_create_cq_resp {
	struct ib_uverbs_create_cq_resp ibv_resp;
	struct pfnic_ib_create_cq_resp drv;
};

struct pfnic_create_srq_resp {
	struct ib_uverbs_create_srq_resp ibv_resp;
	struct pfnic_ib_create_srq_resp drv;
};

struct pfnic_create_qp_cmd {
	struct ibv_create_qp ibv_cmd;
	struct pfnic_ib_create_qp_req drv;
};

struct pfnic_create_qp_resp {
	struct ib_uverbs_create_qp_resp ibv_resp;
	struct pfnic_ib_create_qp_resp drv;
};

static struct ibv_pd *pfnic_alloc_pd(struct ibv_context *context)
{
	struct ib_uverbs_alloc_pd_resp resp;
	struct ibv_alloc_pd cmd;
	struct ibv_pd *pd;

	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;
	errno = ibv_cmd_alloc_pd(context, pd, &cmd, sizeof(cmd), &resp,
				 sizeof(resp));
	if (errno) {
		free(pd);
		return NULL;
	}
	return pd;
}

static int pfnic_dealloc_pd(struct ibv_pd *pd)
{
	int ret = ibv_cmd_dealloc_pd(pd);

	if (!ret)
		free(pd);
	return ret;
}

static struct ibv_mr *pfnic_reg_mr(struct ibv_pd *pd, void *addr,
				   size_t length, uint64_t hca_va, int access)
{
	struct ib_uverbs_reg_mr_resp resp;
	struct ibv_reg_mr cmd;
	struct verbs_mr *vmr;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;
	errno = ibv_cmd_reg_mr(pd, addr, length, hca_va, access, vmr, &cmd,
			       sizeof(cmd), &resp, sizeof(resp));
	if (errno) {
		free(vmr);
		return NULL;
	}
	return &vmr->ibv_mr;
}

static int pfnic_dereg_mr(struct verbs_mr *vmr)
{
	int ret = ibv_cmd_dereg_mr(vmr);

	if (!ret)
		free(vmr);
	return ret;
}

static struct ibv_cq *pfnic_create_cq(struct ibv_context *context, int cqe,
				      struct ibv_comp_channel *channel,
				      int comp_vector)
{
	struct pfnic_create_cq_resp resp = {};
	struct pfnic_create_cq_cmd cmd = {};
	struct pfnic_cq *cq;

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	errno = ibv_cmd_create_cq(context, cqe, channel, comp_vector,
				  &cq->ibv_cq, &cmd.ibv_cmd, sizeof(cmd),
				  &resp.ibv_resp, sizeof(resp));
	if (errno)
		goto err;
	cq->rs = pfnic_rs_cq_new(to_pfnic_ctx(context)->rs, &resp.drv, cqe);
	if (!cq->rs) {
		int err = errno;

		ibv_cmd_destroy_cq(&cq->ibv_cq);
		errno = err;
		goto err;
	}
	return &cq->ibv_cq;

err:
	free(cq);
	return NULL;
}

static int pfnic_destroy_cq(struct ibv_cq *ibcq)
{
	struct pfnic_cq *cq = to_pfnic_cq(ibcq);
	int ret;

	ret = ibv_cmd_destroy_cq(ibcq);
	if (ret)
		return ret;
	pfnic_rs_cq_free(cq->rs);
	free(cq);
	return 0;
}

/*
 * Inline slots for @qp: one per send queue entry and one more, registered on
 * @pd for the device to read. 0 or an errno value.
 */
static int pfnic_qp_inline_slots(struct ibv_pd *pd, struct pfnic_qp *qp)
{
	size_t len = pfnic_rs_qp_inline_bytes(qp->rs);
	struct ib_uverbs_reg_mr_resp resp;
	struct ibv_reg_mr cmd;
	int ret;

	ret = posix_memalign(&qp->inline_buf, sysconf(_SC_PAGESIZE), len);
	if (ret) {
		qp->inline_buf = NULL;
		return ret;
	}
	memset(qp->inline_buf, 0, len);
	ret = ibv_cmd_reg_mr(pd, qp->inline_buf, len,
			     (uintptr_t)qp->inline_buf, IBV_ACCESS_LOCAL_WRITE,
			     &qp->inline_mr, &cmd, sizeof(cmd), &resp,
			     sizeof(resp));
	if (ret) {
		free(qp->inline_buf);
		qp->inline_buf = NULL;
		return ret;
	}
	pfnic_rs_qp_set_inline(qp->rs, qp->inline_buf,
			       qp->inline_mr.ibv_mr.lkey);
	return 0;
}

static void pfnic_qp_free_inline_slots(struct pfnic_qp *qp)
{
	if (!qp->inline_buf)
		return;
	ibv_cmd_dereg_mr(&qp->inline_mr);
	free(qp->inline_buf);
	qp->inline_buf = NULL;
}

static struct ibv_qp *pfnic_create_qp(struct ibv_pd *pd,
				      struct ibv_qp_init_attr *attr)
{
	struct pfnic_create_qp_resp resp = {};
	struct pfnic_create_qp_cmd cmd = {};
	uint32_t want_inline = attr->cap.max_inline_data;
	struct pfnic_qp *qp;
	int err;

	/* The device has no inline data of its own: the provider copies it. */
	if (want_inline > pfnic_rs_max_inline_data()) {
		errno = EINVAL;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	attr->cap.max_inline_data = 0;
	errno = ibv_cmd_create_qp(pd, &qp->ibv_qp, attr, &cmd.ibv_cmd,
				  sizeof(cmd), &resp.ibv_resp, sizeof(resp));
	if (errno)
		goto err;
	/* attr->cap now holds the capabilities the driver granted. */
	qp->rs = pfnic_rs_qp_new(to_pfnic_cq(attr->send_cq)->rs,
				 to_pfnic_cq(attr->recv_cq)->rs,
				 attr->srq ? to_pfnic_srq(attr->srq)->rs : NULL,
				 qp->ibv_qp.qp_num, &attr->cap, attr->sq_sig_all,
				 &resp.drv);
	if (!qp->rs) {
		err = errno;
		goto err_destroy;
	}
	if (want_inline) {
		err = pfnic_qp_inline_slots(pd, qp);
		if (err)
			goto err_free_rs;
		attr->cap.max_inline_data = pfnic_rs_max_inline_data();
	}
	return &qp->ibv_qp;

err_free_rs:
	pfnic_rs_qp_free(qp->rs);
err_destroy:
	ibv_cmd_destroy_qp(&qp->ibv_qp);
	errno = err;
err:
	attr->cap.max_inline_data = want_inline;
	free(qp);
	return NULL;
}

static struct ibv_srq *pfnic_create_srq(struct ibv_pd *pd,
					struct ibv_srq_init_attr *attr)
{
	struct pfnic_create_srq_resp resp = {};
	struct ibv_create_srq cmd = {};
	struct pfnic_srq *srq;

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;
	errno = ibv_cmd_create_srq(pd, &srq->ibv_srq, attr, &cmd, sizeof(cmd),
				   &resp.ibv_resp, sizeof(resp));
	if (errno)
		goto err;
	/* attr->attr now holds what the driver granted. */
	srq->rs = pfnic_rs_srq_new(to_pfnic_ctx(pd->context)->rs, &resp.drv,
				   attr->attr.max_wr, attr->attr.max_sge);
	if (!srq->rs) {
		int err = errno;

		ibv_cmd_destroy_srq(&srq->ibv_srq);
		errno = err;
		goto err;
	}
	return &srq->ibv_srq;

err:
	free(srq);
	return NULL;
}

static int pfnic_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr,
			    int attr_mask)
{
	struct ibv_modify_srq cmd;

	return ibv_cmd_modify_srq(srq, attr, attr_mask, &cmd, sizeof(cmd));
}

static int pfnic_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct ibv_query_srq cmd;

	return ibv_cmd_query_srq(srq, attr, &cmd, sizeof(cmd));
}

static int pfnic_destroy_srq(struct ibv_srq *ibsrq)
{
	struct pfnic_srq *srq = to_pfnic_srq(ibsrq);
	int ret;

	ret = ibv_cmd_destroy_srq(ibsrq);
	if (ret)
		return ret;
	pfnic_rs_srq_free(srq->rs);
	free(srq);
	return 0;
}

static int pfnic_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			       struct ibv_recv_wr **bad_wr)
{
	return pfnic_rs_post_srq_recv(to_pfnic_srq(srq)->rs, wr, bad_wr);
}

static int pfnic_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			   int attr_mask)
{
	struct ibv_modify_qp cmd;

	return ibv_cmd_modify_qp(qp, attr, attr_mask, &cmd, sizeof(cmd));
}

static int pfnic_destroy_qp(struct ibv_qp *ibqp)
{
	struct pfnic_qp *qp = to_pfnic_qp(ibqp);
	int ret;

	ret = ibv_cmd_destroy_qp(ibqp);
	if (ret)
		return ret;
	pfnic_rs_qp_free(qp->rs);
	pfnic_qp_free_inline_slots(qp);
	free(qp);
	return 0;
}

static int pfnic_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			  int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct ibv_query_qp cmd;
	int ret;

	ret = ibv_cmd_query_qp(qp, attr, attr_mask, init_attr, &cmd,
			       sizeof(cmd));
	if (!ret && to_pfnic_qp(qp)->inline_buf) {
		attr->cap.max_inline_data = pfnic_rs_max_inline_data();
		init_attr->cap.max_inline_data = pfnic_rs_max_inline_data();
	}
	return ret;
}

static int pfnic_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			   struct ibv_send_wr **bad_wr)
{
	return pfnic_rs_post_send(to_pfnic_qp(qp)->rs, wr, bad_wr);
}

static int pfnic_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			   struct ibv_recv_wr **bad_wr)
{
	return pfnic_rs_post_recv(to_pfnic_qp(qp)->rs, wr, bad_wr);
}

static int pfnic_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
	return pfnic_rs_poll_cq(to_pfnic_cq(cq)->rs, num_entries, wc);
}

static int pfnic_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	return pfnic_rs_req_notify_cq(to_pfnic_cq(cq)->rs, solicited_only);
}

static int pfnic_query_device(struct ibv_context *context,
			      const struct ibv_query_device_ex_input *input,
			      struct ibv_device_attr_ex *attr,
			      size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	uint64_t fw;
	int ret;

	ret = ibv_cmd_query_device_any(context, input, attr, attr_size, &resp,
				       &resp_size);
	if (ret)
		return ret;

	/* The driver encodes the version as major 47:32, minor 31:16, patch 15:0. */
	fw = resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver),
		 "%u.%u.%u", (unsigned int)(fw >> 32) & 0xffff,
		 (unsigned int)(fw >> 16) & 0xffff, (unsigned int)fw & 0xffff);
	return 0;
}

static int pfnic_query_port(struct ibv_context *context, uint8_t port,
			    struct ibv_port_attr *attr)
{
	struct ibv_query_port cmd = {};

	return ibv_cmd_query_port(context, port, attr, &cmd, sizeof(cmd));
}

static void pfnic_free_context(struct ibv_context *ibctx)
{
	struct pfnic_context *ctx = to_pfnic_ctx(ibctx);

	pfnic_rs_context_free(ctx->rs);
	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
}

static const struct verbs_context_ops pfnic_context_ops = {
	.free_context = pfnic_free_context,
	.query_device_ex = pfnic_query_device,
	.query_port = pfnic_query_port,
	.alloc_pd = pfnic_alloc_pd,
	.dealloc_pd = pfnic_dealloc_pd,
	.reg_mr = pfnic_reg_mr,
	.dereg_mr = pfnic_dereg_mr,
	.create_cq = pfnic_create_cq,
	.destroy_cq = pfnic_destroy_cq,
	.create_qp = pfnic_create_qp,
	.modify_qp = pfnic_modify_qp,
	.query_qp = pfnic_query_qp,
	.destroy_qp = pfnic_destroy_qp,
	.post_send = pfnic_post_send,
	.post_recv = pfnic_post_recv,
	.poll_cq = pfnic_poll_cq,
	.req_notify_cq = pfnic_req_notify_cq,
	.create_srq = pfnic_create_srq,
	.modify_srq = pfnic_modify_srq,
	.query_srq = pfnic_query_srq,
	.destroy_srq = pfnic_destroy_srq,
	.post_srq_recv = pfnic_post_srq_recv,
};

static struct verbs_context *pfnic_alloc_context(struct ibv_device *ibdev,
						 int cmd_fd, void *private_data)
{
	struct pfnic_get_context_resp resp = {};
	struct ibv_query_port port_cmd = {};
	struct ibv_get_context cmd = {};
	struct ibv_port_attr port;
	struct pfnic_context *ctx;

	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, ibv_ctx,
					   RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;

	if (ibv_cmd_get_context(&ctx->ibv_ctx, &cmd, sizeof(cmd),
				&resp.ibv_resp, sizeof(resp)))
		goto err;

	ctx->info = resp.drv;
	if (ibv_cmd_query_port(&ctx->ibv_ctx.context, 1, &port, &port_cmd,
			       sizeof(port_cmd)))
		goto err;
	ctx->rs = pfnic_rs_context_new(cmd_fd, resp.drv.caps, port.lid);
	if (!ctx->rs)
		goto err;
	verbs_set_ops(&ctx->ibv_ctx, &pfnic_context_ops);
	return &ctx->ibv_ctx;

err:
	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
	return NULL;
}

static struct verbs_device *pfnic_device_alloc(struct verbs_sysfs_dev *sysfs_dev)
{
	struct pfnic_device *dev;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;
	return &dev->ibv_dev;
}

static void pfnic_device_free(struct verbs_device *verbs_dev)
{
	free(container_of(verbs_dev, struct pfnic_device, ibv_dev));
}

static const struct verbs_match_ent pfnic_match_table[] = {
	VERBS_PCI_MATCH(PCI_VENDOR_ID_REDHAT_QUMRANET, PCI_DEVICE_ID_PFNIC, NULL),
	{},
};

static const struct verbs_device_ops pfnic_dev_ops = {
	.name = "pfnic",
	.match_min_abi_version = PFNIC_IB_ABI_VERSION,
	.match_max_abi_version = PFNIC_IB_ABI_VERSION,
	.match_table = pfnic_match_table,
	.alloc_device = pfnic_device_alloc,
	.uninit_device = pfnic_device_free,
	.alloc_context = pfnic_alloc_context,
};

PROVIDER_DRIVER(pfnic, pfnic_dev_ops);
