/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * pfnic's rdma-core provider: the userspace half of the RDMA device the
 * driver registers with the RDMA core (pfnicN, /dev/infiniband/uverbsN).
 */
#ifndef PFNIC_PROVIDER_H
#define PFNIC_PROVIDER_H

#include <pthread.h>
#include <stddef.h>

#include <infiniband/driver.h>
#include <rdma/pfnic-abi.h>

struct pfnic_device {
	struct verbs_device ibv_dev;
};

/*
 * The data path, in Rust (userspace/pfnic-provider): it maps the doorbell
 * page and the rings from the uverbs file and posts and polls on them.
 */
struct pfnic_rs_context;
struct pfnic_rs_cq;
struct pfnic_rs_qp;
struct pfnic_rs_srq;
struct pfnic_rs_dm;

int pfnic_rs_env_mem_mode(uint32_t *mode);
int pfnic_rs_env_recv_fault(int wire, uint32_t *flags);
int pfnic_rs_cq_clean(const struct pfnic_rs_cq *cq, uint32_t qp_num);
struct pfnic_rs_context *pfnic_rs_context_new(int cmd_fd, uint64_t caps,
					      uint16_t lid);
void pfnic_rs_context_free(struct pfnic_rs_context *ctx);
void *pfnic_rs_context_doorbell(const struct pfnic_rs_context *ctx);
struct pfnic_rs_cq *pfnic_rs_cq_new(const struct pfnic_rs_context *ctx,
				    const struct pfnic_ib_create_cq_resp *layout,
				    uint32_t cqe);
void pfnic_rs_cq_free(struct pfnic_rs_cq *cq);
void *pfnic_rs_cq_ring(const struct pfnic_rs_cq *cq);
int pfnic_rs_poll_cq(const struct pfnic_rs_cq *cq, int num_entries,
		     struct ibv_wc *wc);
int pfnic_rs_poll_one(const struct pfnic_rs_cq *cq, struct ibv_wc *wc,
		      uint64_t *ts);
int pfnic_rs_cq_ex_timestamps(const struct ibv_cq_init_attr_ex *attr,
			      uint64_t caps);
int pfnic_rs_req_notify_cq(const struct pfnic_rs_cq *cq, int solicited_only);
struct pfnic_rs_srq *pfnic_rs_srq_new(const struct pfnic_rs_context *ctx,
				      const struct pfnic_ib_create_srq_resp *layout,
				      uint32_t max_wr, uint32_t max_sge);
void pfnic_rs_srq_free(struct pfnic_rs_srq *srq);
int pfnic_rs_post_srq_recv(const struct pfnic_rs_srq *srq,
			   struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
struct pfnic_rs_qp *pfnic_rs_qp_new(const struct pfnic_rs_cq *send_cq,
				    const struct pfnic_rs_cq *recv_cq,
				    const struct pfnic_rs_srq *srq,
				    uint32_t qpn, const struct ibv_qp_cap *cap,
				    int sq_sig_all, int ud,
				    const struct pfnic_ib_create_qp_resp *layout);
void pfnic_rs_qp_free(struct pfnic_rs_qp *qp);
size_t pfnic_rs_qp_inline_bytes(const struct pfnic_rs_qp *qp);
uint32_t pfnic_rs_max_inline_data(void);
void pfnic_rs_qp_set_inline(struct pfnic_rs_qp *qp, void *addr, uint32_t lkey);
int pfnic_rs_post_send(const struct pfnic_rs_qp *qp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad_wr);
int pfnic_rs_post_recv(const struct pfnic_rs_qp *qp, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad_wr);

int pfnic_rs_check_qp_init_attr_ex(const struct ibv_qp_init_attr_ex *attr);
void pfnic_rs_qp_ex_install(struct ibv_qp_ex *qpx);
int pfnic_rs_query_rt_values(const struct pfnic_rs_context *ctx,
			     struct ibv_values_ex *values);
struct pfnic_rs_dm *pfnic_rs_dm_new(const struct pfnic_rs_context *ctx,
				    const struct pfnic_ib_alloc_dm_resp *layout,
				    uint64_t length);
void pfnic_rs_dm_free(struct pfnic_rs_dm *dm);
int pfnic_rs_dm_copy_to(const struct pfnic_rs_dm *dm, uint64_t offset,
			const void *src, size_t len);
int pfnic_rs_dm_copy_from(const struct pfnic_rs_dm *dm, void *dst,
			  uint64_t offset, size_t len);

struct pfnic_context {
	struct verbs_context ibv_ctx;
	/* What the driver said of itself when the context was opened. */
	struct pfnic_ib_alloc_ucontext_resp info;
	/* pfnic_ib_create_qp_req.flags of its QPs (PFNIC_RECV_FAULT). */
	uint32_t qp_flags;
	struct pfnic_rs_context *rs;
};

struct pfnic_cq {
	/* An ibv_cq, or the ibv_cq_ex of ibv_create_cq_ex(). */
	struct verbs_cq vcq;
	struct pfnic_rs_cq *rs;
	/*
	 * The extended poll: held from start_poll to end_poll, the current
	 * completion and its device clock.
	 */
	pthread_spinlock_t lock;
	struct ibv_wc cur;
	uint64_t cur_ts;
};

struct pfnic_qp {
	struct verbs_qp vqp;	/* qp_ex too, with VERBS_QP_EX */
	struct pfnic_rs_qp *rs;
	/*
	 * Inline data: the device reads every payload through an MR, so an
	 * inline payload is copied into a slot of this buffer, registered on
	 * the QP's PD (NULL without inline data).
	 */
	void *inline_buf;
	struct verbs_mr inline_mr;
};

struct pfnic_srq {
	struct ibv_srq ibv_srq;
	struct pfnic_rs_srq *rs;
};

struct pfnic_dm {
	struct verbs_dm vdm;
	struct pfnic_rs_dm *rs;
};

/*
 * Marks @vqp extended (VERBS_QP_EX) for ibv_qp_to_qp_ex() of Debian
 * bookworm's libibverbs (rdma-core 44), which loads this provider: its
 * struct ibv_qp_ex ends before wr_flush, which the rdma-core 56.1 headers
 * this builds against add, so its verbs_qp.comp_mask is where 56.1's
 * wr_flush is (the one member 56.1 adds, checked below).
 */
_Static_assert(offsetof(struct ibv_qp_ex, wr_flush) + sizeof(void *) ==
		       sizeof(struct ibv_qp_ex),
	       "struct ibv_qp_ex differs from rdma-core 44's by more than wr_flush");
static inline void pfnic_vqp_set_ex(struct verbs_qp *vqp)
{
	uint32_t *comp_mask44 = (uint32_t *)((char *)vqp +
			offsetof(struct ibv_qp_ex, wr_flush));

	*comp_mask44 |= VERBS_QP_EX;
}

/*
 * An address handle: the driver's answer to its creation is the address
 * vector a UD work request carries, copied into each (pfnic_ah_av()).
 */
struct pfnic_ah {
	struct ibv_ah ibv_ah;
	struct pfnic_ib_create_ah_resp av;
};

const struct pfnic_ib_create_ah_resp *pfnic_ah_av(const struct ibv_ah *ah);

static inline struct pfnic_dm *to_pfnic_dm(struct ibv_dm *ibdm)
{
	return container_of(ibdm, struct pfnic_dm, vdm.dm);
}

static inline struct pfnic_srq *to_pfnic_srq(struct ibv_srq *ibsrq)
{
	return container_of(ibsrq, struct pfnic_srq, ibv_srq);
}

static inline struct pfnic_context *to_pfnic_ctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct pfnic_context, ibv_ctx.context);
}

static inline struct pfnic_cq *to_pfnic_cq(struct ibv_cq *ibcq)
{
	return container_of(ibcq, struct pfnic_cq, vcq.cq);
}

static inline struct pfnic_qp *to_pfnic_qp(struct ibv_qp *ibqp)
{
	return container_of(ibqp, struct pfnic_qp, vqp.qp);
}

#endif /* PFNIC_PROVIDER_H */
