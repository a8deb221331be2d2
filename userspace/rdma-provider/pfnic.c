// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * pfnic's rdma-core provider (libpfnic-rdmav34.so): Debian's own
 * libibverbs.so.1 loads it for the RDMA devices the pfnic driver registers
 * with the RDMA core, matched by their PCI function's IDs.
 *
 * It opens a context through the core (GET_CONTEXT, checking the driver's
 * ABI), answers the device and port queries with the core's commands, and
 * creates PDs, MRs, CQs, SRQs, RC QPs and device memory through the core.
 * The data path is Rust's (userspace/pfnic-provider, on pfnic-verbs): it
 * maps the context's doorbell page, each CQ's ring and QP's queues and
 * device memory from the uverbs file, and posts and polls there without a
 * system call.
 *
 * It uses only provider calls whose signature is the same in rdma-core 44
 * (Debian bookworm's libibverbs) and 56.1 (the source it is built in), both
 * private ABI 34: it is built against 56.1's headers and loaded by 44. The
 * one layout that differs, struct verbs_qp's, is handled in pfnic.h
 * (pfnic_vqp_set_ex).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>

#include <rdma/ib_user_ioctl_cmds.h>

#include "pfnic.h"

/* The PCI IDs of the pfnic function (docs/registers.md). */
#define PCI_VENDOR_ID_REDHAT_QUMRANET 0x1af4
#define PCI_DEVICE_ID_PFNIC 0x10f5

_Static_assert(sizeof(struct pfnic_ib_alloc_ucontext_resp) == 40,
	       "struct pfnic_ib_alloc_ucontext_resp differs from the driver's");

struct pfnic_get_context_cmd {
	struct ibv_get_context ibv_cmd;
	struct pfnic_ib_alloc_ucontext_req drv;
};

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

/*
 * ibv_rereg_mr(): the driver registers the MR again with what @flags
 * changes, under new keys, which the core answers into @vmr.
 */
static int pfnic_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
			  void *addr, size_t length, int access)
{
	struct ib_uverbs_rereg_mr_resp resp;
	struct ibv_rereg_mr cmd;
	int ret;

	ret = ibv_cmd_rereg_mr(vmr, flags, addr, length, (uintptr_t)addr,
			       access, pd, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	/* libibverbs answers IBV_REREG_MR_ERR_CMD: errno says why. */
	if (ret)
		errno = ret;
	return ret;
}

/* ibv_advise_mr(): the driver prefetches ranges of the PD's on-demand MRs. */
static int pfnic_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
			   uint32_t flags, struct ibv_sge *sg_list,
			   uint32_t num_sge)
{
	return ibv_cmd_advise_mr(pd, advice, flags, sg_list, num_sge);
}

static int pfnic_dereg_mr(struct verbs_mr *vmr)
{
	int ret = ibv_cmd_dereg_mr(vmr);

	if (!ret)
		free(vmr);
	return ret;
}

static int pfnic_memcpy_to_dm(struct ibv_dm *ibdm, uint64_t dm_offset,
			      const void *host_addr, size_t length)
{
	return pfnic_rs_dm_copy_to(to_pfnic_dm(ibdm)->rs, dm_offset, host_addr,
				   length);
}

static int pfnic_memcpy_from_dm(void *host_addr, struct ibv_dm *ibdm,
				uint64_t dm_offset, size_t length)
{
	return pfnic_rs_dm_copy_from(to_pfnic_dm(ibdm)->rs, host_addr,
				     dm_offset, length);
}

/*
 * ibv_alloc_dm(): the core's DM_ALLOC, with the driver's answer (where to
 * map the memory) in the udata attribute it takes for pfnic.
 */
static struct ibv_dm *pfnic_alloc_dm(struct ibv_context *context,
				     struct ibv_alloc_dm_attr *attr)
{
	DECLARE_COMMAND_BUFFER(cmdb, UVERBS_OBJECT_DM, UVERBS_METHOD_DM_ALLOC, 1);
	struct pfnic_ib_alloc_dm_resp resp = {};
	struct pfnic_dm *dm;
	int err;

	if (attr->comp_mask) {
		errno = EINVAL;
		return NULL;
	}
	dm = calloc(1, sizeof(*dm));
	if (!dm)
		return NULL;
	fill_attr_out(cmdb, UVERBS_ATTR_UHW_OUT, &resp, sizeof(resp));
	err = ibv_cmd_alloc_dm(context, attr, &dm->vdm, cmdb);
	if (err) {
		free(dm);
		errno = err;
		return NULL;
	}
	dm->rs = pfnic_rs_dm_new(to_pfnic_ctx(context)->rs, &resp,
				 attr->length);
	if (!dm->rs) {
		err = errno;
		ibv_cmd_free_dm(&dm->vdm);
		free(dm);
		errno = err;
		return NULL;
	}
	dm->vdm.dm.memcpy_to_dm = pfnic_memcpy_to_dm;
	dm->vdm.dm.memcpy_from_dm = pfnic_memcpy_from_dm;
	return &dm->vdm.dm;
}

/* EBUSY while an MR uses it (the core counts them). */
static int pfnic_free_dm(struct ibv_dm *ibdm)
{
	struct pfnic_dm *dm = to_pfnic_dm(ibdm);
	int ret;

	ret = ibv_cmd_free_dm(&dm->vdm);
	if (ret)
		return ret;
	pfnic_rs_dm_free(dm->rs);
	free(dm);
	return 0;
}

/* ibv_reg_dm_mr(): zero-based, as the core requires; the driver checks the rest. */
static struct ibv_mr *pfnic_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *ibdm,
				      uint64_t dm_offset, size_t length,
				      unsigned int access)
{
	struct verbs_mr *vmr;
	int err;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;
	err = ibv_cmd_reg_dm_mr(pd, &to_pfnic_dm(ibdm)->vdm, dm_offset, length,
				access, vmr, NULL);
	if (err) {
		free(vmr);
		errno = err;
		return NULL;
	}
	return &vmr->ibv_mr;
}

/* Maps the ring of a CQ the core made: 0, or an errno value (CQ destroyed). */
static int pfnic_cq_map(struct ibv_context *context, struct pfnic_cq *cq,
			const struct pfnic_ib_create_cq_resp *layout, int cqe)
{
	int err;

	cq->rs = pfnic_rs_cq_new(to_pfnic_ctx(context)->rs, layout, cqe);
	if (!cq->rs) {
		err = errno;
		ibv_cmd_destroy_cq(&cq->vcq.cq);
		return err;
	}
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	return 0;
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
				  &cq->vcq.cq, &cmd.ibv_cmd, sizeof(cmd),
				  &resp.ibv_resp, sizeof(resp));
	if (!errno)
		errno = pfnic_cq_map(context, cq, &resp.drv, cqe);
	if (errno) {
		free(cq);
		return NULL;
	}
	return &cq->vcq.cq;
}

/* The extended poll: the next completion made current; 0, or ENOENT. */
static int pfnic_cq_next(struct pfnic_cq *cq)
{
	if (!pfnic_rs_poll_one(cq->rs, &cq->cur, &cq->cur_ts))
		return ENOENT;
	cq->vcq.cq_ex.status = cq->cur.status;
	cq->vcq.cq_ex.wr_id = cq->cur.wr_id;
	return 0;
}

static inline struct pfnic_cq *to_pfnic_cq_ex(struct ibv_cq_ex *ibcq)
{
	return container_of(ibcq, struct pfnic_cq, vcq.cq_ex);
}

/* Takes the CQ until end_poll(); released at once when there is nothing. */
static int pfnic_start_poll(struct ibv_cq_ex *ibcq,
			    struct ibv_poll_cq_attr *attr)
{
	struct pfnic_cq *cq = to_pfnic_cq_ex(ibcq);
	int ret;

	if (attr && attr->comp_mask)
		return EINVAL;
	pthread_spin_lock(&cq->lock);
	ret = pfnic_cq_next(cq);
	if (ret)
		pthread_spin_unlock(&cq->lock);
	return ret;
}

static int pfnic_next_poll(struct ibv_cq_ex *ibcq)
{
	return pfnic_cq_next(to_pfnic_cq_ex(ibcq));
}

static void pfnic_end_poll(struct ibv_cq_ex *ibcq)
{
	pthread_spin_unlock(&to_pfnic_cq_ex(ibcq)->lock);
}

/* The ibv_wc_read_*() of the current completion. */
#define PFNIC_WC_READER(field, type)                                   \
	static type pfnic_read_##field(struct ibv_cq_ex *ibcq)           \
	{                                                                \
		return to_pfnic_cq_ex(ibcq)->cur.field;                  \
	}

PFNIC_WC_READER(vendor_err, uint32_t)
PFNIC_WC_READER(byte_len, uint32_t)
PFNIC_WC_READER(qp_num, uint32_t)
PFNIC_WC_READER(src_qp, uint32_t)
PFNIC_WC_READER(wc_flags, unsigned int)
PFNIC_WC_READER(slid, uint32_t)
PFNIC_WC_READER(sl, uint8_t)
PFNIC_WC_READER(dlid_path_bits, uint8_t)

static enum ibv_wc_opcode pfnic_read_opcode(struct ibv_cq_ex *ibcq)
{
	return to_pfnic_cq_ex(ibcq)->cur.opcode;
}

static __be32 pfnic_read_imm_data(struct ibv_cq_ex *ibcq)
{
	return to_pfnic_cq_ex(ibcq)->cur.imm_data;
}

static uint64_t pfnic_read_completion_ts(struct ibv_cq_ex *ibcq)
{
	return to_pfnic_cq_ex(ibcq)->cur_ts;
}

/*
 * ibv_create_cq_ex(): the standard completion fields, and the device clock
 * of each completion where asked (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP).
 * What pfnic refuses, the Rust side decides as pfnic's library does.
 */
static struct ibv_cq_ex *pfnic_create_cq_ex(struct ibv_context *context,
					    struct ibv_cq_init_attr_ex *attr)
{
	struct pfnic_context *ctx = to_pfnic_ctx(context);
	struct {
		struct ibv_create_cq_ex ibv_cmd;
		struct pfnic_ib_create_cq_req drv;
	} cmd = {};
	struct {
		struct ib_uverbs_ex_create_cq_resp ibv_resp;
		struct pfnic_ib_create_cq_resp drv;
	} resp = {};
	struct ibv_cq_ex *ex;
	struct pfnic_cq *cq;
	int ts;

	ts = pfnic_rs_cq_ex_timestamps(attr, ctx->info.caps);
	if (ts < 0) {
		errno = -ts;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	if (ts)
		cmd.drv.flags = PFNIC_IB_CQ_CREATE_TIMESTAMP;
	errno = ibv_cmd_create_cq_ex(context, attr, &cq->vcq, &cmd.ibv_cmd,
				     sizeof(cmd), &resp.ibv_resp, sizeof(resp),
				     0);
	if (!errno)
		errno = pfnic_cq_map(context, cq, &resp.drv, attr->cqe);
	if (errno) {
		free(cq);
		return NULL;
	}
	ex = &cq->vcq.cq_ex;
	ex->start_poll = pfnic_start_poll;
	ex->next_poll = pfnic_next_poll;
	ex->end_poll = pfnic_end_poll;
	ex->read_opcode = pfnic_read_opcode;
	ex->read_vendor_err = pfnic_read_vendor_err;
	ex->read_byte_len = pfnic_read_byte_len;
	ex->read_imm_data = pfnic_read_imm_data;
	ex->read_qp_num = pfnic_read_qp_num;
	ex->read_src_qp = pfnic_read_src_qp;
	ex->read_wc_flags = pfnic_read_wc_flags;
	ex->read_slid = pfnic_read_slid;
	ex->read_sl = pfnic_read_sl;
	ex->read_dlid_path_bits = pfnic_read_dlid_path_bits;
	/* As rdma-core's providers: only a CQ asked for timestamps reads them. */
	if (ts)
		ex->read_completion_ts = pfnic_read_completion_ts;
	return ex;
}

static int pfnic_destroy_cq(struct ibv_cq *ibcq)
{
	struct pfnic_cq *cq = to_pfnic_cq(ibcq);
	int ret;

	ret = ibv_cmd_destroy_cq(ibcq);
	if (ret)
		return ret;
	pfnic_rs_cq_free(cq->rs);
	pthread_spin_destroy(&cq->lock);
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

/*
 * The data path of a QP the core made: its queues mapped, and inline slots
 * when @want_inline bytes were asked for (@cap, what the driver granted,
 * then says so). 0, or an errno value with the QP destroyed.
 */
static int pfnic_qp_setup(struct ibv_pd *pd, struct pfnic_qp *qp,
			  struct ibv_cq *send_cq, struct ibv_cq *recv_cq,
			  struct ibv_srq *srq, struct ibv_qp_cap *cap,
			  int sq_sig_all, uint32_t want_inline,
			  const struct pfnic_ib_create_qp_resp *layout)
{
	int err;

	qp->rs = pfnic_rs_qp_new(to_pfnic_cq(send_cq)->rs,
				 to_pfnic_cq(recv_cq)->rs,
				 srq ? to_pfnic_srq(srq)->rs : NULL,
				 qp->vqp.qp.qp_num, cap, sq_sig_all,
				 qp->vqp.qp.qp_type == IBV_QPT_UD, layout);
	if (!qp->rs) {
		err = errno;
		goto err_destroy;
	}
	if (want_inline) {
		err = pfnic_qp_inline_slots(pd, qp);
		if (err)
			goto err_free_rs;
		cap->max_inline_data = pfnic_rs_max_inline_data();
	}
	return 0;

err_free_rs:
	pfnic_rs_qp_free(qp->rs);
err_destroy:
	ibv_cmd_destroy_qp(&qp->vqp.qp);
	return err;
}

/* Where the extended QP's builder (Rust) finds the QP's data path. */
struct pfnic_rs_qp *pfnic_qp_ex_rs(struct ibv_qp_ex *qpx)
{
	return container_of(qpx, struct pfnic_qp, vqp.qp_ex)->rs;
}

/*
 * ibv_create_qp_ex() (and ibv_create_qp(), below): an RC or UD QP, with
 * the work request builder (ibv_wr_*, RC only) when
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS asks for it; the attribute rules are
 * pfnic's library's (Rust). @attr->cap gets the capabilities the driver
 * granted.
 */
static struct ibv_qp *pfnic_create_qp_ex(struct ibv_context *context,
					 struct ibv_qp_init_attr_ex *attr)
{
	struct pfnic_create_qp_resp resp = {};
	struct pfnic_create_qp_cmd cmd = {};
	uint32_t want_inline = attr->cap.max_inline_data;
	struct ibv_qp_init_attr_ex core;
	struct pfnic_qp *qp;
	int extended;

	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd ||
	    attr->pd->context != context) {
		errno = EINVAL;
		return NULL;
	}
	extended = pfnic_rs_check_qp_init_attr_ex(attr);
	if (extended < 0) {
		errno = -extended;
		return NULL;
	}
	/* The device has no inline data of its own: the provider copies it. */
	if (want_inline > pfnic_rs_max_inline_data()) {
		errno = EINVAL;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	/* The core gets the PD alone; the builder is the provider's. */
	core = *attr;
	core.comp_mask = IBV_QP_INIT_ATTR_PD;
	core.cap.max_inline_data = 0;
	cmd.drv.flags = to_pfnic_ctx(context)->qp_flags;
	errno = ibv_cmd_create_qp_ex(context, &qp->vqp, &core, &cmd.ibv_cmd,
				     sizeof(cmd), &resp.ibv_resp,
				     sizeof(resp));
	if (!errno)
		errno = pfnic_qp_setup(attr->pd, qp, core.send_cq,
				       core.recv_cq, core.srq, &core.cap,
				       core.sq_sig_all, want_inline,
				       &resp.drv);
	if (errno) {
		free(qp);
		return NULL;
	}
	attr->cap = core.cap;
	if (extended) {
		pfnic_vqp_set_ex(&qp->vqp);
		pfnic_rs_qp_ex_install(&qp->vqp.qp_ex);
	}
	return &qp->vqp.qp;
}

/* ibv_create_qp(): ibv_create_qp_ex() with the PD alone. */
static struct ibv_qp *pfnic_create_qp(struct ibv_pd *pd,
				      struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ex = {
		.qp_context = attr->qp_context,
		.send_cq = attr->send_cq,
		.recv_cq = attr->recv_cq,
		.srq = attr->srq,
		.cap = attr->cap,
		.qp_type = attr->qp_type,
		.sq_sig_all = attr->sq_sig_all,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = pd,
	};
	struct ibv_qp *qp = pfnic_create_qp_ex(pd->context, &ex);

	if (qp)
		attr->cap = ex.cap;
	return qp;
}

struct pfnic_create_ah_resp {
	struct ib_uverbs_create_ah_resp ibv_resp;
	struct pfnic_ib_create_ah_resp drv;
};

/* ibv_create_ah(): the driver resolves the address vector for the device. */
static struct ibv_ah *pfnic_create_ah(struct ibv_pd *pd,
				      struct ibv_ah_attr *attr)
{
	struct pfnic_create_ah_resp resp = {};
	struct pfnic_ah *ah;

	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return NULL;
	errno = ibv_cmd_create_ah(pd, &ah->ibv_ah, attr, &resp.ibv_resp,
				  sizeof(resp));
	if (errno) {
		free(ah);
		return NULL;
	}
	ah->av = resp.drv;
	return &ah->ibv_ah;
}

static int pfnic_destroy_ah(struct ibv_ah *ibah)
{
	int ret = ibv_cmd_destroy_ah(ibah);

	if (ret)
		return ret;
	free(container_of(ibah, struct pfnic_ah, ibv_ah));
	return 0;
}

/* Where a UD work request (Rust) finds its address handle's vector. */
const struct pfnic_ib_create_ah_resp *pfnic_ah_av(const struct ibv_ah *ah)
{
	return &container_of(ah, struct pfnic_ah, ibv_ah)->av;
}

/* ibv_query_rt_values_ex(): the device clock, from the doorbell page. */
static int pfnic_query_rt_values(struct ibv_context *context,
				 struct ibv_values_ex *values)
{
	return pfnic_rs_query_rt_values(to_pfnic_ctx(context)->rs, values);
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

/*
 * The completions of @qp still in its CQs go, as mlx5's provider drops
 * them: a QP reset starts again with none of its earlier life. The device
 * writes no more for it by then. (Not at destroy, unlike mlx5: the rings
 * are the device's mappings, which fault once the device is gone, and a
 * destroy succeeds then too.)
 */
static void pfnic_qp_clean_cqs(struct ibv_qp *qp)
{
	struct ibv_cq *cqs[2] = { qp->send_cq, qp->recv_cq };

	for (int i = 0; i < 2; i++) {
		struct pfnic_cq *cq;

		if (!cqs[i] || (i == 1 && cqs[1] == cqs[0]))
			continue;
		cq = to_pfnic_cq(cqs[i]);
		/* Not under an extended poll's start_poll .. end_poll. */
		pthread_spin_lock(&cq->lock);
		pfnic_rs_cq_clean(cq->rs, qp->qp_num);
		pthread_spin_unlock(&cq->lock);
	}
}

static int pfnic_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			   int attr_mask)
{
	struct ibv_modify_qp cmd;
	int ret;

	ret = ibv_cmd_modify_qp(qp, attr, attr_mask, &cmd, sizeof(cmd));
	if (!ret && (attr_mask & IBV_QP_STATE) &&
	    attr->qp_state == IBV_QPS_RESET)
		pfnic_qp_clean_cqs(qp);
	return ret;
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

/*
 * A work request posted to a QP in the RESET state is an immediate error
 * (C10-97.2.1), as rxe and mlx5 answer it; libibverbs keeps qp->state.
 */
static int pfnic_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			   struct ibv_send_wr **bad_wr)
{
	if (qp->state == IBV_QPS_RESET) {
		if (bad_wr)
			*bad_wr = wr;
		return EINVAL;
	}
	return pfnic_rs_post_send(to_pfnic_qp(qp)->rs, wr, bad_wr);
}

static int pfnic_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			   struct ibv_recv_wr **bad_wr)
{
	if (qp->state == IBV_QPS_RESET) {
		if (bad_wr)
			*bad_wr = wr;
		return EINVAL;
	}
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

	/*
	 * The core reports the device's on-demand paging; this context has
	 * what its memory mode gives (none when pinned). A driver without
	 * memory modes through the core answered no mode: the core's stand.
	 */
	if (to_pfnic_ctx(context)->info.mem_mode &&
	    attr_size >= offsetof(struct ibv_device_attr_ex, odp_caps) +
			 sizeof(attr->odp_caps)) {
		struct pfnic_context *ctx = to_pfnic_ctx(context);

		attr->odp_caps.general_caps = ctx->info.odp_general_caps;
		attr->odp_caps.per_transport_caps.rc_odp_caps =
			ctx->info.odp_rc_caps;
	}

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
	.rereg_mr = pfnic_rereg_mr,
	.advise_mr = pfnic_advise_mr,
	.alloc_dm = pfnic_alloc_dm,
	.free_dm = pfnic_free_dm,
	.reg_dm_mr = pfnic_reg_dm_mr,
	.create_cq = pfnic_create_cq,
	.create_cq_ex = pfnic_create_cq_ex,
	.destroy_cq = pfnic_destroy_cq,
	.create_qp = pfnic_create_qp,
	.create_qp_ex = pfnic_create_qp_ex,
	.create_ah = pfnic_create_ah,
	.destroy_ah = pfnic_destroy_ah,
	.query_rt_values = pfnic_query_rt_values,
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
	struct pfnic_get_context_cmd cmd = {};
	struct ibv_query_port port_cmd = {};
	struct ibv_port_attr port;
	struct pfnic_context *ctx;
	int err;

	/* PFNIC_MEM_MODE chooses the context's memory mode, as in pfnic's tools. */
	err = pfnic_rs_env_mem_mode(&cmd.drv.mem_mode);
	if (err) {
		errno = err;
		return NULL;
	}
	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, ibv_ctx,
					   RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;

	err = ibv_cmd_get_context(&ctx->ibv_ctx, &cmd.ibv_cmd, sizeof(cmd),
				  &resp.ibv_resp, sizeof(resp));
	if (err)
		goto err;

	ctx->info = resp.drv;
	err = ibv_cmd_query_port(&ctx->ibv_ctx.context, 1, &port, &port_cmd,
				 sizeof(port_cmd));
	if (err)
		goto err;
	/* A port with a wire is RoCE: its link layer is Ethernet. */
	err = pfnic_rs_env_recv_fault(port.link_layer == IBV_LINK_LAYER_ETHERNET,
				      &ctx->qp_flags);
	if (err)
		goto err;
	ctx->rs = pfnic_rs_context_new(cmd_fd, resp.drv.caps, port.lid);
	if (!ctx->rs) {
		err = errno;
		goto err;
	}
	verbs_set_ops(&ctx->ibv_ctx, &pfnic_context_ops);
	return &ctx->ibv_ctx;

err:
	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
	errno = err;
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
