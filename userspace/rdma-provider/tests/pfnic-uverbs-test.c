// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * pfnic's verbs objects through the RDMA core, as a program built against
 * rdma-core's <infiniband/verbs.h> sees them on Debian's own libibverbs.so.1
 * and the pfnic provider: PDs, MRs, CQs, RC and UD QPs and AHs are created, taken
 * through their states and destroyed through /dev/infiniband/uverbsN, and
 * the verbs a device without them would refuse fail with the errno
 * libibverbs users expect.
 *
 *   pfnic-uverbs-test DEVICE          run the checks, print KTAP
 *   pfnic-uverbs-test DEVICE two-devices OTHER
 *                                     open DEVICE and OTHER in this process,
 *                                     an RDMA WRITE on each by GID 1
 *   pfnic-uverbs-test DEVICE hold     create objects, print "ready", wait for
 *                                     a line on stdin (the device is unbound
 *                                     meanwhile), then report what verbs and
 *                                     the mapped rings do and the pages the
 *                                     process has pinned: "after: ..."
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>

#include <infiniband/verbs.h>
/* libibverbs' write() commands (its private interface, as providers use it). */
#include <infiniband/driver.h>


static int tests;
static int failed;

#define CHECK(cond, ...)                                                 \
	do {                                                             \
		if (!(cond)) {                                           \
			printf("# %s:%d: ", __func__, __LINE__);         \
			printf(__VA_ARGS__);                             \
			printf("\n");                                    \
			return 1;                                        \
		}                                                        \
	} while (0)

static void report(const char *name, int ret)
{
	tests++;
	if (ret)
		failed++;
	printf("%sok %d %s\n", ret ? "not " : "", tests, name);
	fflush(stdout);
}

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	return ctx;
}

/* Objects every test starts from. */
struct objs {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	void *buf;
};

static int make_objs(struct objs *o, const char *dev)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};

	memset(o, 0, sizeof(*o));
	o->ctx = open_dev(dev);
	CHECK(o->ctx, "ibv_open_device(%s): %s", dev, strerror(errno));
	o->pd = ibv_alloc_pd(o->ctx);
	CHECK(o->pd, "ibv_alloc_pd: %s", strerror(errno));
	o->buf = aligned_alloc(4096, 4 * 4096);
	CHECK(o->buf, "aligned_alloc");
	memset(o->buf, 0x5a, 4 * 4096);
	o->mr = ibv_reg_mr(o->pd, o->buf, 4 * 4096,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ);
	CHECK(o->mr, "ibv_reg_mr: %s", strerror(errno));
	o->cq = ibv_create_cq(o->ctx, 16, NULL, NULL, 0);
	CHECK(o->cq, "ibv_create_cq: %s", strerror(errno));
	init.send_cq = o->cq;
	init.recv_cq = o->cq;
	o->qp = ibv_create_qp(o->pd, &init);
	CHECK(o->qp, "ibv_create_qp: %s", strerror(errno));
	return 0;
}

static void free_objs(struct objs *o)
{
	if (o->qp)
		ibv_destroy_qp(o->qp);
	if (o->cq)
		ibv_destroy_cq(o->cq);
	if (o->mr)
		ibv_dereg_mr(o->mr);
	if (o->pd)
		ibv_dealloc_pd(o->pd);
	if (o->ctx)
		ibv_close_device(o->ctx);
	free(o->buf);
}

/* The objects are created with what was asked, and keys and numbers are real. */
static int test_objects(const char *dev)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct objs o;
	struct ibv_qp *qp2;
	struct ibv_mr *mr2;
	int ret;

	if (make_objs(&o, dev))
		return 1;
	ret = 1;
	CHECK(o.mr->lkey && o.mr->lkey == o.mr->rkey, "MR keys %#x/%#x",
	      o.mr->lkey, o.mr->rkey);
	CHECK(o.mr->addr == o.buf && o.mr->length == 4 * 4096,
	      "MR covers %p+%zu", o.mr->addr, o.mr->length);
	CHECK(o.cq->cqe >= 16, "CQ has %d entries, 16 asked", o.cq->cqe);
	CHECK(o.qp->qp_num > 1, "QP number %u", o.qp->qp_num);
	CHECK(o.qp->state == IBV_QPS_RESET, "new QP in state %d", o.qp->state);
	init.send_cq = o.cq;
	init.recv_cq = o.cq;
	qp2 = ibv_create_qp(o.pd, &init);
	CHECK(qp2, "second QP: %s", strerror(errno));
	CHECK(qp2->qp_num != o.qp->qp_num, "two QPs numbered %u", qp2->qp_num);
	CHECK(init.cap.max_send_wr >= 16 && init.cap.max_recv_sge >= 1,
	      "granted caps %u/%u", init.cap.max_send_wr, init.cap.max_recv_sge);
	ret = ibv_destroy_qp(qp2);
	CHECK(!ret, "ibv_destroy_qp: %s", strerror(ret));
	/* Optional access flags are hints the device may ignore (perftest asks). */
	mr2 = ibv_reg_mr(o.pd, o.buf, 4096, IBV_ACCESS_LOCAL_WRITE |
			 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_RELAXED_ORDERING);
	CHECK(mr2, "ibv_reg_mr with IBV_ACCESS_RELAXED_ORDERING: %s",
	      strerror(errno));
	CHECK(!ibv_dereg_mr(mr2), "ibv_dereg_mr");
	free_objs(&o);
	return 0;
}

/* Takes qp to RTS, connected to dest_qpn on this port (by its LID). */
/*
 * RESET -> RTS, connected to @dest_qpn on this port: by the port's LID, or
 * with a global route to the port's GID @gid_index (>= 0; a RoCE port).
 */
static int to_rts_av(struct ibv_qp *qp, uint32_t dest_qpn, int gid_index)
{
	struct ibv_port_attr port;
	struct ibv_qp_attr a = {};
	int ret;

	CHECK(!ibv_query_port(qp->context, 1, &port), "ibv_query_port");
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	/* Programs pass their MR flags: ON_DEMAND is ignored on a QP. */
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_ON_DEMAND;
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	CHECK(!ret, "-> INIT with IBV_ACCESS_ON_DEMAND: %s", strerror(ret));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = port.active_mtu;
	a.dest_qp_num = dest_qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = port.lid;
	a.ah_attr.port_num = 1;
	if (gid_index >= 0) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.sgid_index = gid_index;
		a.ah_attr.grh.hop_limit = 1;
		CHECK(!ibv_query_gid(qp->context, 1, gid_index,
				     &a.ah_attr.grh.dgid),
		      "ibv_query_gid(%d)", gid_index);
	}
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV |
			    IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			    IBV_QP_MIN_RNR_TIMER);
	CHECK(!ret, "-> RTR: %s", strerror(ret));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			    IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			    IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	CHECK(!ret, "-> RTS: %s", strerror(ret));
	return 0;
}

static int to_rts(struct ibv_qp *qp, uint32_t dest_qpn)
{
	return to_rts_av(qp, dest_qpn, -1);
}

/*
 * No work request in RESET; RESET -> INIT -> RTR -> RTS, connected to itself
 * by the port's LID.
 */
static int test_qp_states(const char *dev)
{
	struct ibv_send_wr swr = { .opcode = IBV_WR_SEND }, *bad_s = NULL;
	struct ibv_recv_wr rwr = {}, *bad_r = NULL;
	struct ibv_qp_attr a = {};
	struct objs o;
	int ret;

	if (make_objs(&o, dev))
		return 1;
	/* A QP in RESET takes no work request (C10-97.2.1). */
	ret = ibv_post_recv(o.qp, &rwr, &bad_r);
	CHECK(ret == EINVAL && bad_r == &rwr, "receive in RESET: %d", ret);
	ret = ibv_post_send(o.qp, &swr, &bad_s);
	CHECK(ret == EINVAL && bad_s == &swr, "send in RESET: %d", ret);
	/* Not to RTS from RESET. */
	a.qp_state = IBV_QPS_RTS;
	ret = ibv_modify_qp(o.qp, &a, IBV_QP_STATE);
	CHECK(ret == EINVAL, "RESET -> RTS: %d", ret);
	if (to_rts(o.qp, o.qp->qp_num))
		return 1;
	/* Q_Keys belong to datagram QPs. */
	a.qkey = 0x11111111;
	ret = ibv_modify_qp(o.qp, &a, IBV_QP_QKEY);
	CHECK(ret == EINVAL, "Q_Key on an RC QP: %d", ret);
	a.qp_state = IBV_QPS_ERR;
	ret = ibv_modify_qp(o.qp, &a, IBV_QP_STATE);
	CHECK(!ret, "-> ERR: %s", strerror(ret));
	free_objs(&o);
	return 0;
}

/* Polls @cq for @n completions (5 s at most) into @wc; how many came. */
static int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n)
{
	int got = 0;

	for (int spins = 0; got < n && spins < 5000; spins++) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		if (r < 0)
			return got;
		got += r;
		if (got < n)
			usleep(1000);
	}
	return got;
}

/*
 * Inline data: a QP asked for it reports what it got, a send's payload is
 * copied at posting (the buffer is reused at once and has no MR), and it
 * arrives intact, through more sends than the send queue holds; too much
 * inline data asked, and an inline send on a QP without, fail with EINVAL.
 */
static int test_inline(const char *dev)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = 64 },
	};
	struct ibv_send_wr swr = {}, *bad_swr;
	struct ibv_recv_wr rwr = {}, *bad_rwr;
	struct ibv_qp_init_attr qinit;
	struct ibv_sge ssge, rsge;
	struct ibv_qp_attr qa;
	unsigned char payload[256];
	struct ibv_wc wc[2];
	struct ibv_qp *qp;
	struct objs o;
	int ret;

	if (make_objs(&o, dev))
		return 1;
	init.send_cq = o.cq;
	init.recv_cq = o.cq;
	qp = ibv_create_qp(o.pd, &init);
	CHECK(qp, "ibv_create_qp with 64 bytes inline: %s", strerror(errno));
	CHECK(init.cap.max_inline_data >= 64, "granted %u bytes inline",
	      init.cap.max_inline_data);
	ret = ibv_query_qp(qp, &qa, IBV_QP_CAP, &qinit);
	CHECK(!ret && qa.cap.max_inline_data == init.cap.max_inline_data,
	      "ibv_query_qp: %s, %u bytes inline", strerror(ret),
	      qa.cap.max_inline_data);
	if (to_rts(qp, qp->qp_num))
		return 1;
	for (int i = 0; i < 3 * 8; i++) {
		size_t len = 1 + (i * 37) % init.cap.max_inline_data;

		for (size_t k = 0; k < sizeof(payload); k++)
			payload[k] = (unsigned char)(i * 31 + k);
		memset(o.buf, 0, 4096);
		rsge = (struct ibv_sge){ (uintptr_t)o.buf, 4096, o.mr->lkey };
		rwr = (struct ibv_recv_wr){ .wr_id = 2, .sg_list = &rsge,
					    .num_sge = 1 };
		ret = ibv_post_recv(qp, &rwr, &bad_rwr);
		CHECK(!ret, "ibv_post_recv: %s", strerror(ret));
		/* No MR covers the payload: its lkey means nothing. */
		ssge = (struct ibv_sge){ (uintptr_t)payload, len, 0xdeadbeef };
		swr = (struct ibv_send_wr){
			.wr_id = 1, .sg_list = &ssge, .num_sge = 1,
			.opcode = IBV_WR_SEND,
			.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED,
		};
		ret = ibv_post_send(qp, &swr, &bad_swr);
		CHECK(!ret, "inline send %d: %s", i, strerror(ret));
		memset(payload, 0, sizeof(payload));
		CHECK(poll_n(o.cq, wc, 2) == 2, "inline send %d: no completions",
		      i);
		for (int k = 0; k < 2; k++)
			CHECK(wc[k].status == IBV_WC_SUCCESS,
			      "inline send %d: wr %llu: %s", i,
			      (unsigned long long)wc[k].wr_id,
			      ibv_wc_status_str(wc[k].status));
		for (size_t k = 0; k < len; k++)
			CHECK(((unsigned char *)o.buf)[k] ==
			      (unsigned char)(i * 31 + k),
			      "inline send %d of %zu bytes: byte %zu is %#x", i,
			      len, k, ((unsigned char *)o.buf)[k]);
	}
	CHECK(!ibv_destroy_qp(qp), "ibv_destroy_qp");

	init.cap.max_inline_data = 4096;
	qp = ibv_create_qp(o.pd, &init);
	CHECK(!qp && errno == EINVAL, "4096 bytes inline: %s",
	      qp ? "created" : strerror(errno));

	/* A QP created without inline data refuses an inline send. */
	if (to_rts(o.qp, o.qp->qp_num))
		return 1;
	ssge = (struct ibv_sge){ (uintptr_t)payload, 16, 0 };
	swr = (struct ibv_send_wr){ .wr_id = 3, .sg_list = &ssge,
				    .num_sge = 1, .opcode = IBV_WR_SEND,
				    .send_flags = IBV_SEND_INLINE };
	bad_swr = NULL;
	ret = ibv_post_send(o.qp, &swr, &bad_swr);
	CHECK(ret == EINVAL && bad_swr == &swr,
	      "inline send on a QP without inline data: %d", ret);
	free_objs(&o);
	return 0;
}

/*
 * UD QPs and address handles: the kernel's UD attribute rules and the
 * Q_Key in a query, an AH the port cannot reach refused, datagrams from
 * the QP to itself (the payload after the GRH's 40 bytes, a GRH when the
 * AH has a global route), one with another Q_Key lost, and the work
 * request builder's SEND with immediate to the AH (none without it).
 */
/*
 * The kernel verbs' data path serves the RDMA core's kernel clients only:
 * uverbs' write() commands that post, poll and arm (what providers that run
 * no data path in userspace use) reach the same driver operations, and are
 * refused on a process's QP and CQ, which post nothing; the provider's own
 * data path goes on.
 */
static int test_kernel_paths(const char *dev)
{
	struct ibv_recv_wr rwr = {}, *bad_r = NULL;
	struct ibv_send_wr swr = {}, *bad_s = NULL;
	struct ibv_qp_attr attr = {};
	struct ibv_sge sge;
	struct ibv_wc wc;
	struct objs o;
	int ret;

	if (make_objs(&o, dev))
		return 1;
	sge = (struct ibv_sge){ (uintptr_t)o.buf, 64, o.mr->lkey };
	swr.wr_id = 7;
	swr.sg_list = &sge;
	swr.num_sge = 1;
	swr.opcode = IBV_WR_SEND;
	swr.send_flags = IBV_SEND_SIGNALED;
	ret = ibv_cmd_post_send(o.qp, &swr, &bad_s);
	CHECK(ret == EOPNOTSUPP && bad_s == &swr,
	      "post_send by write(): %d (%s), bad %p", ret, strerror(ret),
	      (void *)bad_s);
	rwr.wr_id = 8;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	ret = ibv_cmd_post_recv(o.qp, &rwr, &bad_r);
	CHECK(ret == EOPNOTSUPP && bad_r == &rwr,
	      "post_recv by write(): %d (%s)", ret, strerror(ret));
	errno = 0;
	ret = ibv_cmd_poll_cq(o.cq, 1, &wc);
	CHECK(ret < 0 && errno == EOPNOTSUPP, "poll_cq by write(): %d, errno %d",
	      ret, errno);
	ret = ibv_cmd_req_notify_cq(o.cq, 0);
	CHECK(ret == EOPNOTSUPP, "req_notify_cq by write(): %d (%s)", ret,
	      strerror(ret));
	/* Nothing was posted: the provider's data path finds the queues empty. */
	CHECK(ibv_poll_cq(o.cq, 1, &wc) == 0, "a completion after refused posts");
	attr.qp_state = IBV_QPS_INIT;
	attr.port_num = 1;
	CHECK(!ibv_modify_qp(o.qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), "INIT");
	ret = ibv_post_recv(o.qp, &rwr, &bad_r);
	CHECK(!ret, "ibv_post_recv: %s", strerror(ret));
	free_objs(&o);
	return 0;
}

static int test_ud(const char *dev)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_init_attr_ex initx = {};
	struct ibv_recv_wr rwr = {}, *bad_r;
	struct ibv_send_wr swr = {}, *bad_s;
	struct ibv_qp_init_attr got;
	struct ibv_ah_attr aha = {};
	struct ibv_qp_attr attr = {};
	struct ibv_sge rsge, ssge;
	struct ibv_port_attr port;
	struct ibv_wc wc[2];
	struct ibv_qp *qp, *xqp;
	struct ibv_qp_ex *qpx;
	struct ibv_ah *ah;
	struct objs o;
	char *buf;
	int global;

	if (make_objs(&o, dev))
		return 1;
	CHECK(!ibv_query_port(o.ctx, 1, &port), "ibv_query_port");
	global = port.link_layer == IBV_LINK_LAYER_ETHERNET;
	init.send_cq = o.cq;
	init.recv_cq = o.cq;
	qp = ibv_create_qp(o.pd, &init);
	CHECK(qp, "ibv_create_qp(UD): %s", strerror(errno));
	attr.qp_state = IBV_QPS_INIT;
	attr.port_num = 1;
	attr.qkey = 0x1234;
	CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			    IBV_QP_PORT) == EINVAL, "INIT without a Q_Key");
	CHECK(!ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_QKEY), "INIT");
	attr.qp_state = IBV_QPS_RTR;
	CHECK(!ibv_modify_qp(qp, &attr, IBV_QP_STATE), "RTR");
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = 0x42;
	CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE) == EINVAL,
	      "RTS without the send PSN");
	CHECK(!ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN), "RTS");
	memset(&attr, 0, sizeof(attr));
	CHECK(!ibv_query_qp(qp, &attr, IBV_QP_STATE | IBV_QP_QKEY, &got) &&
	      attr.qp_state == IBV_QPS_RTS && attr.qkey == 0x1234 &&
	      got.qp_type == IBV_QPT_UD,
	      "query: state %d Q_Key 0x%x type %d", attr.qp_state, attr.qkey,
	      got.qp_type);

	aha.port_num = 1;
	if (global) {
		aha.is_global = 1;
		aha.grh.sgid_index = 1;
		aha.grh.hop_limit = 64;
		CHECK(!ibv_query_gid(o.ctx, 1, 1, &aha.grh.dgid), "GID 1");
	} else {
		aha.dlid = port.lid + 1;
		errno = 0;
		CHECK(!ibv_create_ah(o.pd, &aha) && errno == EINVAL,
		      "an AH to LID %u: errno %d", aha.dlid, errno);
		aha.dlid = port.lid;
	}
	ah = ibv_create_ah(o.pd, &aha);
	CHECK(ah, "ibv_create_ah: %s", strerror(errno));

	buf = o.buf;
	memset(buf, 0, 4096);
	strcpy(buf + 2048, "datagram");
	rsge = (struct ibv_sge){ (uintptr_t)buf, 40 + 64, o.mr->lkey };
	rwr.wr_id = 1;
	rwr.sg_list = &rsge;
	rwr.num_sge = 1;
	CHECK(!ibv_post_recv(qp, &rwr, &bad_r), "ibv_post_recv");
	ssge = (struct ibv_sge){ (uintptr_t)buf + 2048, 9, o.mr->lkey };
	swr.wr_id = 2;
	swr.sg_list = &ssge;
	swr.num_sge = 1;
	swr.opcode = IBV_WR_SEND;
	swr.send_flags = IBV_SEND_SIGNALED;
	swr.wr.ud.ah = ah;
	swr.wr.ud.remote_qpn = qp->qp_num;
	swr.wr.ud.remote_qkey = 0x4321;
	CHECK(!ibv_post_send(qp, &swr, &bad_s), "ibv_post_send");
	CHECK(poll_n(o.cq, wc, 1) == 1 && wc[0].wr_id == 2 &&
	      wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_SEND,
	      "another Q_Key: the send completes");
	usleep(100000);
	CHECK(ibv_poll_cq(o.cq, 1, wc) == 0, "another Q_Key: received");
	swr.wr_id = 3;
	swr.wr.ud.remote_qkey = 0x1234;
	CHECK(!ibv_post_send(qp, &swr, &bad_s), "ibv_post_send");
	CHECK(poll_n(o.cq, wc, 2) == 2, "two completions");
	/* The receive, wherever it is of the two */
	if (wc[0].wr_id == 1)
		wc[1] = wc[0];
	CHECK(wc[1].wr_id == 1 && wc[1].status == IBV_WC_SUCCESS &&
	      wc[1].opcode == IBV_WC_RECV && wc[1].byte_len == 40 + 9 &&
	      wc[1].src_qp == qp->qp_num &&
	      !!(wc[1].wc_flags & IBV_WC_GRH) == global,
	      "receive: wr_id %llu status %d byte_len %u src_qp %u flags 0x%x",
	      (unsigned long long)wc[1].wr_id, wc[1].status, wc[1].byte_len,
	      wc[1].src_qp, wc[1].wc_flags);
	CHECK(!strcmp(buf + 40, "datagram"), "received %.9s", buf + 40);
	/* A GRH of RoCEv2 over IPv4: its IPv4 header in the last 20 bytes */
	CHECK(!global || (buf[20] == 0x45 && buf[29] == 17),
	      "GRH: 0x%02x, protocol %d", buf[20] & 0xff, buf[29]);

	/* The work request builder on a UD QP: SEND and SEND with immediate */
	initx.qp_type = IBV_QPT_UD;
	initx.send_cq = o.cq;
	initx.recv_cq = o.cq;
	initx.cap = init.cap;
	initx.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	initx.pd = o.pd;
	initx.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
	errno = 0;
	CHECK(!ibv_create_qp_ex(o.ctx, &initx) && errno == EOPNOTSUPP,
	      "ibv_wr_rdma_write on a UD QP: errno %d", errno);
	initx.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	xqp = ibv_create_qp_ex(o.ctx, &initx);
	CHECK(xqp, "ibv_create_qp_ex(UD): %s", strerror(errno));
	qpx = ibv_qp_to_qp_ex(xqp);
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_INIT;
	attr.port_num = 1;
	attr.qkey = 0x5678;
	CHECK(!ibv_modify_qp(xqp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_QKEY), "extended: INIT");
	attr.qp_state = IBV_QPS_RTR;
	CHECK(!ibv_modify_qp(xqp, &attr, IBV_QP_STATE), "extended: RTR");
	attr.qp_state = IBV_QPS_RTS;
	CHECK(!ibv_modify_qp(xqp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN),
	      "extended: RTS");
	memset(buf, 0, 2048);
	CHECK(!ibv_post_recv(qp, &rwr, &bad_r), "ibv_post_recv");
	ibv_wr_start(qpx);
	qpx->wr_id = 4;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(qpx, htonl(0x1234abcd));
	ibv_wr_set_ud_addr(qpx, ah, qp->qp_num, 0x1234);
	ibv_wr_set_sge(qpx, o.mr->lkey, (uintptr_t)buf + 2048, 9);
	CHECK(!ibv_wr_complete(qpx), "ibv_wr_complete");
	CHECK(poll_n(o.cq, wc, 2) == 2, "extended: two completions");
	/* The send first, then the receive */
	if (wc[0].wr_id == 1) {
		struct ibv_wc t = wc[0];

		wc[0] = wc[1];
		wc[1] = t;
	}
	CHECK(wc[0].wr_id == 4 && wc[0].status == IBV_WC_SUCCESS &&
	      wc[0].opcode == IBV_WC_SEND, "extended: send wr_id %llu status %d",
	      (unsigned long long)wc[0].wr_id, wc[0].status);
	CHECK(wc[1].wr_id == 1 && wc[1].status == IBV_WC_SUCCESS &&
	      wc[1].opcode == IBV_WC_RECV && wc[1].byte_len == 40 + 9 &&
	      wc[1].src_qp == xqp->qp_num &&
	      (wc[1].wc_flags & IBV_WC_WITH_IMM) &&
	      ntohl(wc[1].imm_data) == 0x1234abcd,
	      "extended: receive wr_id %llu status %d byte_len %u src_qp %u "
	      "flags 0x%x imm 0x%x", (unsigned long long)wc[1].wr_id,
	      wc[1].status, wc[1].byte_len, wc[1].src_qp, wc[1].wc_flags,
	      ntohl(wc[1].imm_data));
	CHECK(!strcmp(buf + 40, "datagram"), "extended: received %.9s",
	      buf + 40);
	/* Without a destination nothing of the batch is posted */
	ibv_wr_start(qpx);
	qpx->wr_id = 5;
	ibv_wr_send(qpx);
	ibv_wr_set_sge(qpx, o.mr->lkey, (uintptr_t)buf + 2048, 9);
	CHECK(ibv_wr_complete(qpx) == EINVAL,
	      "a UD work request without ibv_wr_set_ud_addr");
	usleep(100000);
	CHECK(ibv_poll_cq(o.cq, 1, wc) == 0, "the batch without a destination");
	CHECK(!ibv_destroy_qp(xqp), "ibv_destroy_qp(extended)");

	CHECK(!ibv_destroy_ah(ah), "ibv_destroy_ah");
	CHECK(!ibv_destroy_qp(qp), "ibv_destroy_qp");
	free_objs(&o);
	return 0;
}

/* What pfnic does not have is refused with the errno libibverbs users expect. */
static int test_refused(const char *dev)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_UC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_comp_channel *ch;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct objs o;
	int ret;

	if (make_objs(&o, dev))
		return 1;
	init.send_cq = o.cq;
	init.recv_cq = o.cq;
	qp = ibv_create_qp(o.pd, &init);
	CHECK(!qp && errno == EOPNOTSUPP, "UC QP: %p, %s", (void *)qp,
	      strerror(errno));
	/* More than the device has. */
	init.qp_type = IBV_QPT_RC;
	init.cap.max_send_wr = 1 << 30;
	qp = ibv_create_qp(o.pd, &init);
	CHECK(!qp && errno == EINVAL, "2^30 WRs: %p, %s", (void *)qp,
	      strerror(errno));
	cq = ibv_create_cq(o.ctx, 0, NULL, NULL, 0);
	CHECK(!cq && errno == EINVAL, "CQ of 0 entries: %s", strerror(errno));
	/* A channel in use by a CQ cannot go. */
	ch = ibv_create_comp_channel(o.ctx);
	CHECK(ch, "ibv_create_comp_channel: %s", strerror(errno));
	cq = ibv_create_cq(o.ctx, 4, NULL, ch, 0);
	CHECK(cq, "CQ with a channel: %s", strerror(errno));
	ret = ibv_destroy_comp_channel(ch);
	CHECK(ret == EBUSY, "ibv_destroy_comp_channel in use: %d", ret);
	CHECK(!ibv_destroy_cq(cq), "ibv_destroy_cq");
	CHECK(!ibv_destroy_comp_channel(ch), "ibv_destroy_comp_channel");
	/* An MR at another I/O address than its address. */
	mr = ibv_reg_mr_iova(o.pd, o.buf, 4096, 0x10000000,
			     IBV_ACCESS_LOCAL_WRITE);
	CHECK(!mr && errno == EOPNOTSUPP, "MR with its own IOVA: %s",
	      strerror(errno));
	/* No memory windows: binding them is a missing capability. */
	mr = ibv_reg_mr(o.pd, o.buf, 4096, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_MW_BIND);
	CHECK(!mr && errno == EOPNOTSUPP, "IBV_ACCESS_MW_BIND: %s",
	      mr ? "registered" : strerror(errno));
	/* Remote write without local write is invalid (IB spec). */
	mr = ibv_reg_mr(o.pd, o.buf, 4096, IBV_ACCESS_REMOTE_WRITE);
	CHECK(!mr && errno == EINVAL, "remote write alone: %s",
	      strerror(errno));
	/* The PD is in use by the MR and the QP; the CQ by the QP. */
	ret = ibv_dealloc_pd(o.pd);
	CHECK(ret == EBUSY, "ibv_dealloc_pd of a PD in use: %d", ret);
	ret = ibv_destroy_cq(o.cq);
	CHECK(ret == EBUSY, "ibv_destroy_cq of a CQ in use: %d", ret);
	free_objs(&o);
	return 0;
}

/*
 * An SRQ's limit event through the core: armed at 2 with 3 receives
 * posted, two sends from another QP leave 1, and the context's async event
 * file reports IBV_EVENT_SRQ_LIMIT_REACHED naming the SRQ.
 */
static int test_srq_limit_event(const char *dev)
{
	struct ibv_srq_init_attr sattr = {
		.attr = { .max_wr = 16, .max_sge = 1 },
	};
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_srq_attr arm = { .srq_limit = 2 };
	struct ibv_async_event ev;
	struct ibv_qp *qp_srq;
	struct ibv_srq *srq;
	struct pollfd pfd;
	struct ibv_wc wc[4];
	struct objs o;
	int i, got;

	if (make_objs(&o, dev))
		return 1;
	srq = ibv_create_srq(o.pd, &sattr);
	CHECK(srq, "ibv_create_srq: %s", strerror(errno));
	init.send_cq = o.cq;
	init.recv_cq = o.cq;
	init.srq = srq;
	qp_srq = ibv_create_qp(o.pd, &init);
	CHECK(qp_srq, "a QP on the SRQ: %s", strerror(errno));
	if (to_rts(o.qp, qp_srq->qp_num) || to_rts(qp_srq, o.qp->qp_num))
		return 1;
	CHECK(!ibv_modify_srq(srq, &arm, IBV_SRQ_LIMIT), "arming the SRQ");
	for (i = 0; i < 3; i++) {
		struct ibv_sge sge = {
			.addr = (uintptr_t)o.buf + 4096 + i * 64,
			.length = 64, .lkey = o.mr->lkey,
		};
		struct ibv_recv_wr wr = { .wr_id = 100 + i, .sg_list = &sge,
					  .num_sge = 1 }, *bad;

		CHECK(!ibv_post_srq_recv(srq, &wr, &bad), "ibv_post_srq_recv");
	}
	for (i = 0; i < 2; i++) {
		struct ibv_sge sge = {
			.addr = (uintptr_t)o.buf + i * 64,
			.length = 64, .lkey = o.mr->lkey,
		};
		struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sge,
					  .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		CHECK(!ibv_post_send(o.qp, &wr, &bad), "ibv_post_send");
	}
	got = poll_n(o.cq, wc, 4);
	for (int k = 0; k < got; k++)
		CHECK(wc[k].status == IBV_WC_SUCCESS, "wr %llu: %s",
		      (unsigned long long)wc[k].wr_id,
		      ibv_wc_status_str(wc[k].status));
	CHECK(got == 4, "%d of 4 completions", got);
	pfd.fd = o.ctx->async_fd;
	pfd.events = POLLIN;
	CHECK(poll(&pfd, 1, 5000) == 1, "no asynchronous event within 5 s");
	CHECK(!ibv_get_async_event(o.ctx, &ev), "ibv_get_async_event: %s",
	      strerror(errno));
	CHECK(ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED &&
	      ev.element.srq == srq, "event %s (%d) for %p, not the SRQ's limit",
	      ibv_event_type_str(ev.event_type), ev.event_type,
	      (void *)ev.element.srq);
	ibv_ack_async_event(&ev);
	CHECK(!ibv_destroy_qp(qp_srq), "ibv_destroy_qp");
	CHECK(!ibv_destroy_srq(srq), "ibv_destroy_srq");
	free_objs(&o);
	return 0;
}

/*
 * The device's limits are what a context may use: more than a quarter of
 * the QPs (the private interface's per-file share, EDQUOT beyond); the
 * core's rdma cgroup is what limits processes.
 */
static int test_limits(const char *dev)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_device_attr attr;
	struct ibv_qp **qps;
	struct objs o;
	int n, i, ret = 0;

	if (make_objs(&o, dev))
		return 1;
	CHECK(!ibv_query_device(o.ctx, &attr), "ibv_query_device");
	n = attr.max_qp / 4 + 1;
	qps = calloc(n, sizeof(*qps));
	CHECK(qps, "calloc");
	init.send_cq = o.cq;
	init.recv_cq = o.cq;
	/* make_objs made one QP already. */
	for (i = 0; i < n - 1; i++) {
		qps[i] = ibv_create_qp(o.pd, &init);
		if (!qps[i]) {
			printf("# QP %d of max_qp %d: %s\n", i + 2, attr.max_qp,
			       strerror(errno));
			ret = 1;
			break;
		}
	}
	for (i = 0; i < n; i++)
		if (qps[i])
			ibv_destroy_qp(qps[i]);
	free(qps);
	free_objs(&o);
	return ret;
}

/*
 * A fork child cannot use its parent's context (PDs, CQs, MRs: its address
 * space is another), but for device memory, which is in none.
 */
static int test_fork_child(const char *dev)
{
	struct objs o;
	int status;
	pid_t pid;

	struct ibv_device_attr_ex dattr = {};

	if (make_objs(&o, dev))
		return 1;
	CHECK(!ibv_query_device_ex(o.ctx, NULL, &dattr), "ibv_query_device_ex");
	fflush(stdout);
	pid = fork();
	if (!pid) {
		struct ibv_alloc_dm_attr dm_attr = { .length = 64 };
		struct ibv_pd *pd = ibv_alloc_pd(o.ctx);
		uint32_t w = 0x5a5aa5a5, r = 0;
		struct ibv_dm *dm;
		struct ibv_mr *mr;
		struct ibv_cq *cq;

		if (pd || errno != EPERM)
			_exit(1);
		cq = ibv_create_cq(o.ctx, 4, NULL, NULL, 0);
		if (cq || errno != EPERM)
			_exit(2);
		mr = ibv_reg_mr(o.pd, o.buf, 4096, IBV_ACCESS_LOCAL_WRITE);
		if (mr || errno != EPERM)
			_exit(3);
		if (!dattr.max_dm_size)
			_exit(0);
		/* Device memory is in no address space: the child may have some. */
		dm = ibv_alloc_dm(o.ctx, &dm_attr);
		if (!dm)
			_exit(4);
		if (ibv_memcpy_to_dm(dm, 0, &w, 4) ||
		    ibv_memcpy_from_dm(&r, dm, 0, 4) || r != w)
			_exit(5);
		_exit(ibv_free_dm(dm) ? 6 : 0);
	}
	CHECK(pid > 0, "fork: %s", strerror(errno));
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the child's verbs on the parent's context did not fail with "
	      "EPERM, or its device memory failed (status %#x)", status);
	/* The parent's context still works. */
	{
		struct ibv_pd *pd = ibv_alloc_pd(o.ctx);

		CHECK(pd, "the parent's PD after the child: %s",
		      strerror(errno));
		ibv_dealloc_pd(pd);
	}
	free_objs(&o);
	return 0;
}

/*
 * The extended CQ (ibv_create_cq_ex): a SEND to itself polled with
 * ibv_start_poll/next_poll/end_poll, each completion read field by field,
 * stamped with the device clock inside completion_timestamp_mask; a CQ
 * without timestamps has no reader for them; wall-clock timestamps are
 * refused (EOPNOTSUPP), as on a device without a clock are timestamps.
 */
static int test_cq_ex(const char *dev)
{
	struct ibv_cq_init_attr_ex cattr = {
		.cqe = 16,
		.wc_flags = IBV_WC_STANDARD_FLAGS |
			    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
	};
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_send_wr swr, *bad_swr;
	struct ibv_recv_wr rwr, *bad_rwr;
	struct ibv_poll_cq_attr pattr = {};
	struct ibv_device_attr_ex attr = {};
	int got = 0, sends = 0, recvs = 0;
	struct ibv_sge ssge, rsge;
	struct ibv_cq_ex *cq, *cq2;
	struct ibv_qp *qp;
	struct objs o;

	if (make_objs(&o, dev))
		return 1;
	CHECK(!ibv_query_device_ex(o.ctx, NULL, &attr), "ibv_query_device_ex");
	if (!attr.completion_timestamp_mask) {
		cq = ibv_create_cq_ex(o.ctx, &cattr);
		CHECK(!cq && errno == EOPNOTSUPP,
		      "timestamps on a device without a clock: %s",
		      cq ? "created" : strerror(errno));
		printf("# the device has no clock\n");
		free_objs(&o);
		return 0;
	}
	cq = ibv_create_cq_ex(o.ctx, &cattr);
	CHECK(cq, "ibv_create_cq_ex with timestamps: %s", strerror(errno));
	CHECK(cq->read_completion_ts, "no ibv_wc_read_completion_ts");
	init.send_cq = ibv_cq_ex_to_cq(cq);
	init.recv_cq = ibv_cq_ex_to_cq(cq);
	qp = ibv_create_qp(o.pd, &init);
	CHECK(qp, "a QP on the extended CQ: %s", strerror(errno));
	if (to_rts(qp, qp->qp_num))
		return 1;
	rsge = (struct ibv_sge){ (uintptr_t)o.buf + 4096, 64, o.mr->lkey };
	rwr = (struct ibv_recv_wr){ .wr_id = 2, .sg_list = &rsge, .num_sge = 1 };
	CHECK(!ibv_post_recv(qp, &rwr, &bad_rwr), "ibv_post_recv");
	ssge = (struct ibv_sge){ (uintptr_t)o.buf, 48, o.mr->lkey };
	swr = (struct ibv_send_wr){ .wr_id = 1, .sg_list = &ssge, .num_sge = 1,
				    .opcode = IBV_WR_SEND,
				    .send_flags = IBV_SEND_SIGNALED };
	CHECK(!ibv_post_send(qp, &swr, &bad_swr), "ibv_post_send");
	for (int spins = 0; got < 2 && spins < 5000; spins++) {
		int ret = ibv_start_poll(cq, &pattr);

		if (ret == ENOENT) {
			usleep(1000);
			continue;
		}
		CHECK(!ret, "ibv_start_poll: %s", strerror(ret));
		do {
			uint64_t ts = ibv_wc_read_completion_ts(cq);
			enum ibv_wc_opcode op = ibv_wc_read_opcode(cq);

			CHECK(cq->status == IBV_WC_SUCCESS, "wr %llu: %s",
			      (unsigned long long)cq->wr_id,
			      ibv_wc_status_str(cq->status));
			CHECK(ibv_wc_read_qp_num(cq) == qp->qp_num,
			      "completion of QP %u", ibv_wc_read_qp_num(cq));
			CHECK(ts && !(ts & ~attr.completion_timestamp_mask),
			      "timestamp %#llx, mask %#llx",
			      (unsigned long long)ts,
			      (unsigned long long)attr.completion_timestamp_mask);
			if (op == IBV_WC_SEND && cq->wr_id == 1) {
				sends++;
			} else {
				CHECK(op == IBV_WC_RECV && cq->wr_id == 2 &&
				      ibv_wc_read_byte_len(cq) == 48,
				      "opcode %d, wr %llu, %u bytes", op,
				      (unsigned long long)cq->wr_id,
				      ibv_wc_read_byte_len(cq));
				recvs++;
			}
			got++;
		} while (!(ibv_next_poll(cq)));
		ibv_end_poll(cq);
	}
	CHECK(sends == 1 && recvs == 1, "%d sends and %d receives completed",
	      sends, recvs);
	CHECK(!ibv_destroy_qp(qp), "ibv_destroy_qp");
	CHECK(!ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), "ibv_destroy_cq");

	cattr.wc_flags = IBV_WC_STANDARD_FLAGS;
	cq2 = ibv_create_cq_ex(o.ctx, &cattr);
	CHECK(cq2, "ibv_create_cq_ex: %s", strerror(errno));
	CHECK(!cq2->read_completion_ts,
	      "a reader of timestamps on a CQ without them");
	CHECK(!ibv_destroy_cq(ibv_cq_ex_to_cq(cq2)), "ibv_destroy_cq");
	cattr.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
	cq2 = ibv_create_cq_ex(o.ctx, &cattr);
	CHECK(!cq2 && errno == EOPNOTSUPP, "wall-clock timestamps: %s",
	      cq2 ? "created" : strerror(errno));
	free_objs(&o);
	return 0;
}

static long vm_pin_kb(void);

/* Pages of [p, p + len) resident in memory (mincore). */
static int resident_pages(void *p, size_t len)
{
	unsigned char vec[64];
	int n = 0;

	if (len / 4096 > sizeof(vec) || mincore(p, len, vec))
		return -1;
	for (size_t i = 0; i < len / 4096; i++)
		n += vec[i] & 1;
	return n;
}

/*
 * ibv_advise_mr through the core: PREFETCH_WRITE with FLUSH makes an
 * on-demand MR's untouched pages resident before it returns, pinning
 * nothing; what it cannot advise is refused with EINVAL: an unknown key,
 * a range past the MR, an ordinary MR, writing a read-only MR, another
 * PD's MR, an unknown advice. Where the context has no on-demand paging,
 * there is nothing to advise.
 */
static int test_advise_mr(const char *dev)
{
	const size_t len = 16 * 4096;
	struct ibv_device_attr_ex attr = {};
	struct ibv_mr *odp, *ro, *other_mr;
	struct ibv_pd *other;
	struct ibv_sge sge;
	struct objs o;
	long pin;
	void *mem;
	int ret;

	if (make_objs(&o, dev))
		return 1;
	CHECK(!ibv_query_device_ex(o.ctx, NULL, &attr), "ibv_query_device_ex");
	if (!(attr.odp_caps.general_caps & IBV_ODP_SUPPORT)) {
		printf("# no on-demand paging in this memory mode\n");
		free_objs(&o);
		return 0;
	}
	mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(mem != MAP_FAILED, "mmap: %s", strerror(errno));
	odp = ibv_reg_mr(o.pd, mem, len, IBV_ACCESS_LOCAL_WRITE |
			 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ON_DEMAND);
	CHECK(odp, "ODP MR: %s", strerror(errno));
	CHECK(resident_pages(mem, len) == 0, "%d pages resident before",
	      resident_pages(mem, len));
	pin = vm_pin_kb();
	sge = (struct ibv_sge){ (uintptr_t)mem, len, odp->lkey };
	ret = ibv_advise_mr(o.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
			    IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1);
	CHECK(!ret, "ibv_advise_mr: %s", strerror(ret));
	CHECK(resident_pages(mem, len) == (int)(len / 4096),
	      "%d of %zu pages resident after PREFETCH_WRITE with FLUSH",
	      resident_pages(mem, len), len / 4096);
	CHECK(vm_pin_kb() == pin, "advise_mr pinned %ld kB", vm_pin_kb() - pin);

	ro = ibv_reg_mr(o.pd, mem, 4096, IBV_ACCESS_ON_DEMAND);
	CHECK(ro, "read-only ODP MR: %s", strerror(errno));
	other = ibv_alloc_pd(o.ctx);
	CHECK(other, "ibv_alloc_pd: %s", strerror(errno));
	other_mr = ibv_reg_mr(other, mem, len, IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_ON_DEMAND);
	CHECK(other_mr, "ODP MR of another PD: %s", strerror(errno));
	{
		struct {
			const char *what;
			struct ibv_sge sge;
			int advice;
		} bad[] = {
			{ "an unknown key", { (uintptr_t)mem, 4096, 0x7fffff },
			  IBV_ADVISE_MR_ADVICE_PREFETCH },
			{ "a range past the MR",
			  { (uintptr_t)mem + len - 4096, 8192, odp->lkey },
			  IBV_ADVISE_MR_ADVICE_PREFETCH },
			{ "an ordinary MR", { (uintptr_t)o.buf, 4096, o.mr->lkey },
			  IBV_ADVISE_MR_ADVICE_PREFETCH },
			{ "writing a read-only MR",
			  { (uintptr_t)mem, 4096, ro->lkey },
			  IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE },
			{ "another PD's MR",
			  { (uintptr_t)mem, 4096, other_mr->lkey },
			  IBV_ADVISE_MR_ADVICE_PREFETCH },
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			ret = ibv_advise_mr(o.pd, bad[i].advice,
					    IBV_ADVISE_MR_FLAG_FLUSH,
					    &bad[i].sge, 1);
			CHECK(ret == EINVAL, "advising %s: %d (%s)", bad[i].what,
			      ret, strerror(ret));
		}
	}
	ret = ibv_advise_mr(o.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 1u << 5, &sge,
			    1);
	CHECK(ret == EINVAL, "an unknown flag: %d", ret);
	CHECK(!ibv_dereg_mr(other_mr) && !ibv_dealloc_pd(other),
	      "freeing the other PD");
	CHECK(!ibv_dereg_mr(ro) && !ibv_dereg_mr(odp), "ibv_dereg_mr");
	munmap(mem, len);
	free_objs(&o);
	return 0;
}

/* The process's VmPin in kB (/proc/self/status), or -1. */
static long vm_pin_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Drops CAP_IPC_LOCK from the effective set: RLIMIT_MEMLOCK applies. */
static int drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -1;
	d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	return syscall(SYS_capset, &h, d);
}

/* Whether the memory mode @mode pins ordinary MRs through the core. */
static int mode_pins(const char *mode)
{
	return strcmp(mode, "sva") != 0;
}

/*
 * One memory mode, in a context opened with PFNIC_MEM_MODE=@mode: its ODP
 * caps; an ordinary MR pinned (VmPin) where the mode pins, nothing pinned
 * otherwise and by an ODP MR; an RDMA WRITE through the ordinary MR lands;
 * VmPin back after the context closes.
 */
static int mem_mode_case(const char *dev, const char *mode)
{
	struct ibv_device_attr_ex attr = {};
	struct ibv_send_wr wr = {}, *bad;
	struct ibv_mr *odp_mr = NULL;
	long pin0, pin1, pin2;
	struct ibv_sge sge;
	struct ibv_wc wc;
	unsigned char *b;
	struct objs o;
	int odp;

	pin0 = vm_pin_kb();
	CHECK(pin0 >= 0, "no VmPin in /proc/self/status");
	if (make_objs(&o, dev))
		return 1;
	CHECK(!ibv_query_device_ex(o.ctx, NULL, &attr), "ibv_query_device_ex");
	odp = !!(attr.odp_caps.general_caps & IBV_ODP_SUPPORT);
	if (!mode_pins(mode) || !strcmp(mode, "odp"))
		CHECK(odp && (attr.odp_caps.per_transport_caps.rc_odp_caps &
			      IBV_ODP_SUPPORT_WRITE),
		      "%s: ODP caps %#llx, RC %#x", mode,
		      (unsigned long long)attr.odp_caps.general_caps,
		      attr.odp_caps.per_transport_caps.rc_odp_caps);
	else
		CHECK(!attr.odp_caps.general_caps &&
		      !attr.odp_caps.per_transport_caps.rc_odp_caps,
		      "%s: ODP caps %#llx, RC %#x where nothing is on demand",
		      mode, (unsigned long long)attr.odp_caps.general_caps,
		      attr.odp_caps.per_transport_caps.rc_odp_caps);
	/* make_objs registered 16 KiB of ordinary memory. */
	pin1 = vm_pin_kb();
	if (mode_pins(mode))
		CHECK(pin1 - pin0 >= 16, "%s: a 16 KiB ordinary MR pinned %ld kB",
		      mode, pin1 - pin0);
	else
		CHECK(pin1 == pin0, "%s: an ordinary MR pinned %ld kB", mode,
		      pin1 - pin0);
	if (odp) {
		odp_mr = ibv_reg_mr(o.pd, o.buf, 4 * 4096, IBV_ACCESS_LOCAL_WRITE |
				    IBV_ACCESS_ON_DEMAND);
		CHECK(odp_mr, "%s: ODP MR: %s", mode, strerror(errno));
		pin2 = vm_pin_kb();
		CHECK(pin2 == pin1, "%s: an ODP MR pinned %ld kB", mode,
		      pin2 - pin1);
	} else {
		odp_mr = ibv_reg_mr(o.pd, o.buf, 4096, IBV_ACCESS_LOCAL_WRITE |
				    IBV_ACCESS_ON_DEMAND);
		CHECK(!odp_mr && errno == EOPNOTSUPP, "%s: ODP MR: %s", mode,
		      odp_mr ? "registered" : strerror(errno));
	}
	/* The device reaches the ordinary MR's memory: an RDMA WRITE to itself. */
	if (to_rts(o.qp, o.qp->qp_num))
		return 1;
	b = o.buf;
	for (int i = 0; i < 4096; i++)
		b[i] = (unsigned char)(i * 7 + 3);
	memset(b + 8192, 0, 4096);
	sge = (struct ibv_sge){ (uintptr_t)b, 4096, o.mr->lkey };
	wr = (struct ibv_send_wr){
		.wr_id = 9, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { (uintptr_t)(b + 8192), o.mr->rkey },
	};
	CHECK(!ibv_post_send(o.qp, &wr, &bad), "ibv_post_send");
	CHECK(poll_n(o.cq, &wc, 1) == 1 && wc.status == IBV_WC_SUCCESS,
	      "%s: RDMA WRITE: %s", mode, ibv_wc_status_str(wc.status));
	CHECK(!memcmp(b, b + 8192, 4096), "%s: the RDMA WRITE's data differs",
	      mode);
	if (odp_mr)
		CHECK(!ibv_dereg_mr(odp_mr), "ibv_dereg_mr");
	free_objs(&o);
	CHECK(vm_pin_kb() == pin0, "%s: VmPin %ld kB after closing, %ld before",
	      mode, vm_pin_kb(), pin0);
	return 0;
}

/*
 * Without CAP_IPC_LOCK, under 64 KiB of RLIMIT_MEMLOCK: where the mode pins,
 * ordinary MRs of 1 MiB and of 4 GiB (more than the guest) fail at once
 * with ENOMEM and pin nothing, and a small one registers; an ODP MR of
 * 4 GiB registers and pins nothing. In a child: the limit is its own.
 */
static int mem_mode_limit_child(const char *dev, const char *mode)
{
	const size_t big = 4ull << 30;
	struct rlimit lim = { 64 << 10, 64 << 10 };
	struct ibv_device_attr_ex attr = {};
	struct ibv_mr *mr;
	struct objs o;
	double t;
	void *mem;

	CHECK(!drop_ipc_lock(), "capset: %s", strerror(errno));
	CHECK(!setrlimit(RLIMIT_MEMLOCK, &lim), "setrlimit: %s",
	      strerror(errno));
	if (make_objs(&o, dev))
		return 1;
	mem = mmap(NULL, big, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	CHECK(mem != MAP_FAILED, "mmap of 4 GiB: %s", strerror(errno));
	CHECK(!ibv_query_device_ex(o.ctx, NULL, &attr), "ibv_query_device_ex");
	if (mode_pins(mode)) {
		size_t lens[] = { 1 << 20, big };

		for (int i = 0; i < 2; i++) {
			t = now_s();
			mr = ibv_reg_mr(o.pd, mem, lens[i], IBV_ACCESS_LOCAL_WRITE);
			t = now_s() - t;
			CHECK(!mr && errno == ENOMEM,
			      "%s: an ordinary MR of %zu bytes over RLIMIT_MEMLOCK: %s",
			      mode, lens[i], mr ? "registered" : strerror(errno));
			CHECK(t < 2, "%s: ENOMEM for %zu bytes took %.1f s", mode,
			      lens[i], t);
			CHECK(vm_pin_kb() == 16, "%s: VmPin %ld kB after a refusal",
			      mode, vm_pin_kb());
		}
	}
	mr = ibv_reg_mr(o.pd, mem, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "%s: a 4 KiB MR under RLIMIT_MEMLOCK: %s", mode,
	      strerror(errno));
	CHECK(!ibv_dereg_mr(mr), "ibv_dereg_mr");
	if (attr.odp_caps.general_caps & IBV_ODP_SUPPORT) {
		long pin = vm_pin_kb();

		mr = ibv_reg_mr(o.pd, mem, big, IBV_ACCESS_LOCAL_WRITE |
				IBV_ACCESS_ON_DEMAND);
		CHECK(mr, "%s: an ODP MR of 4 GiB: %s", mode, strerror(errno));
		CHECK(vm_pin_kb() == pin, "%s: an ODP MR of 4 GiB pinned %ld kB",
		      mode, vm_pin_kb() - pin);
		CHECK(!ibv_dereg_mr(mr), "ibv_dereg_mr");
	}
	munmap(mem, big);
	free_objs(&o);
	return 0;
}

/*
 * PFNIC_MEM_MODE chooses a context's memory mode through the core: each
 * mode the platform has (EOPNOTSUPP for the others) behaves as its name
 * says, in the parent and in a child under RLIMIT_MEMLOCK; a name that is
 * no mode fails ibv_open_device with EINVAL.
 */
static int test_mem_modes(const char *dev)
{
	const char *modes[] = { "sva", "odp", "pinned" };
	struct ibv_context *ctx;
	int ran = 0, status;

	for (int i = 0; i < 3; i++) {
		pid_t pid;

		setenv("PFNIC_MEM_MODE", modes[i], 1);
		ctx = open_dev(dev);
		if (!ctx && errno == EOPNOTSUPP) {
			printf("# %s: not on this platform\n", modes[i]);
			continue;
		}
		CHECK(ctx, "ibv_open_device with PFNIC_MEM_MODE=%s: %s",
		      modes[i], strerror(errno));
		ibv_close_device(ctx);
		if (mem_mode_case(dev, modes[i]))
			return 1;
		fflush(stdout);
		pid = fork();
		if (!pid)
			_exit(mem_mode_limit_child(dev, modes[i]));
		CHECK(pid > 0, "fork: %s", strerror(errno));
		CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
		CHECK(WIFEXITED(status) && !WEXITSTATUS(status),
		      "%s under RLIMIT_MEMLOCK: status %#x", modes[i], status);
		ran++;
	}
	setenv("PFNIC_MEM_MODE", "swap", 1);
	ctx = open_dev(dev);
	CHECK(!ctx && errno == EINVAL, "PFNIC_MEM_MODE=swap: %s",
	      ctx ? "opened" : strerror(errno));
	unsetenv("PFNIC_MEM_MODE");
	CHECK(ran >= 2, "only %d memory modes", ran);
	return 0;
}

/*
 * PFNIC_RECV_FAULT: rnr and backup open a context whose RC QPs are created
 * as ever (on a port without a wire, backup asks the driver for nothing);
 * another value fails ibv_open_device with EINVAL.
 */
static int test_recv_fault_env(const char *dev)
{
	const char *ok[] = { "rnr", "backup" };
	struct ibv_context *ctx;
	struct objs o;
	int err;

	for (int i = 0; i < 2; i++) {
		int ret;

		setenv("PFNIC_RECV_FAULT", ok[i], 1);
		ret = make_objs(&o, dev);
		free_objs(&o);
		unsetenv("PFNIC_RECV_FAULT");
		CHECK(!ret, "a QP with PFNIC_RECV_FAULT=%s", ok[i]);
	}
	setenv("PFNIC_RECV_FAULT", "park", 1);
	ctx = open_dev(dev);
	err = errno;
	unsetenv("PFNIC_RECV_FAULT");
	if (ctx)
		ibv_close_device(ctx);
	CHECK(!ctx && err == EINVAL, "PFNIC_RECV_FAULT=park: %s",
	      ctx ? "opened" : strerror(err));
	return 0;
}

/* What the child of test_cross_process_keys hands over. */
struct foreign_mr {
	uint64_t addr;
	uint32_t lkey, rkey;
};

/* Polls @cq for one completion and returns its status, or -1. */
static int one_status(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	return poll_n(cq, &wc, 1) == 1 ? (int)wc.status : -1;
}

/*
 * Another process's MR, through the core: a child registers a buffer for
 * remote write and hands its address and keys over a pipe. The parent's QP,
 * connected to itself, cannot write there with the child's rkey
 * (REM_ACCESS_ERR) nor send with the child's lkey (LOC_PROT_ERR): keys
 * are their context's. The child's bytes are unchanged.
 */
static int test_cross_process_keys(const char *dev)
{
	int to_parent[2], to_child[2], status;
	struct ibv_send_wr wr, *bad;
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
	struct foreign_mr f;
	struct ibv_sge sge;
	struct objs o;
	char go = 1;
	pid_t pid;

	CHECK(!pipe(to_parent) && !pipe(to_child), "pipe: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	if (!pid) {
		unsigned char *b;

		if (make_objs(&o, dev))
			_exit(2);
		f = (struct foreign_mr){ (uintptr_t)o.buf, o.mr->lkey,
					 o.mr->rkey };
		if (write(to_parent[1], &f, sizeof(f)) != sizeof(f) ||
		    read(to_child[0], &go, 1) != 1)
			_exit(2);
		b = o.buf;
		for (int i = 0; i < 4 * 4096; i++)
			if (b[i] != 0x5a)
				_exit(3);
		free_objs(&o);
		_exit(0);
	}
	CHECK(pid > 0, "fork: %s", strerror(errno));
	CHECK(read(to_parent[0], &f, sizeof(f)) == sizeof(f),
	      "the child's MR never came");
	if (make_objs(&o, dev) || to_rts(o.qp, o.qp->qp_num))
		return 1;
	memset(o.buf, 0xc3, 4096);
	sge = (struct ibv_sge){ (uintptr_t)o.buf, 64, o.mr->lkey };
	wr = (struct ibv_send_wr){
		.wr_id = 1, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { f.addr, f.rkey },
	};
	CHECK(!ibv_post_send(o.qp, &wr, &bad), "ibv_post_send");
	status = one_status(o.cq);
	CHECK(status == IBV_WC_REM_ACCESS_ERR,
	      "an RDMA WRITE with another process's rkey: %s",
	      status < 0 ? "no completion" : ibv_wc_status_str(status));
	CHECK(!ibv_modify_qp(o.qp, &reset, IBV_QP_STATE), "-> RESET");
	if (to_rts(o.qp, o.qp->qp_num))
		return 1;
	sge = (struct ibv_sge){ (uintptr_t)o.buf, 64, f.lkey };
	wr.wr_id = 2;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)o.buf + 8192;
	wr.wr.rdma.rkey = o.mr->rkey;
	CHECK(!ibv_post_send(o.qp, &wr, &bad), "ibv_post_send");
	status = one_status(o.cq);
	CHECK(status == IBV_WC_LOC_PROT_ERR,
	      "an RDMA WRITE from another process's lkey: %s",
	      status < 0 ? "no completion" : ibv_wc_status_str(status));
	free_objs(&o);
	CHECK(write(to_child[1], &go, 1) == 1, "waking the child");
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && !WEXITSTATUS(status),
	      "the child's buffer changed or its verbs failed (status %#x)",
	      status);
	for (int i = 0; i < 2; i++) {
		close(to_parent[i]);
		close(to_child[i]);
	}
	return 0;
}

/*
 * Device memory through the core: ibv_alloc_dm() within max_dm_size,
 * ibv_memcpy_to_dm()/_from_dm() at offsets and of lengths that are
 * multiples of 4, within the allocation (EINVAL otherwise, as rdma-core's
 * own tests want of a device: mlx5's rule), zero-based MRs over it
 * (a zero-length one too)
 * (EINVAL without IBV_ACCESS_ZERO_BASED or past the end), RDMA WRITE into
 * it and READ back out of it by its MR, EBUSY freeing it under an MR, and
 * a new allocation starts zeroed: no bytes of an earlier one reach it.
 */
static int test_dm(const char *dev)
{
	const unsigned int acc = IBV_ACCESS_ZERO_BASED |
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		IBV_ACCESS_REMOTE_READ;
	struct ibv_alloc_dm_attr attr = { .length = 100 };
	struct ibv_device_attr_ex dattr = {};
	struct ibv_send_wr wr, *bad;
	unsigned char in[100], out[100];
	struct ibv_mr *mr;
	struct ibv_sge sge;
	struct ibv_dm *dm;
	struct objs o;
	int ret, st;

	if (make_objs(&o, dev))
		return 1;
	CHECK(!ibv_query_device_ex(o.ctx, NULL, &dattr), "ibv_query_device_ex");
	CHECK(dattr.max_dm_size >= 4096, "max_dm_size %llu",
	      (unsigned long long)dattr.max_dm_size);
	attr.length = dattr.max_dm_size + 1;
	dm = ibv_alloc_dm(o.ctx, &attr);
	CHECK(!dm && errno == EINVAL, "more than max_dm_size: %s",
	      dm ? "allocated" : strerror(errno));
	attr.length = 100;
	dm = ibv_alloc_dm(o.ctx, &attr);
	CHECK(dm, "ibv_alloc_dm(100): %s", strerror(errno));
	ret = ibv_memcpy_from_dm(out, dm, 0, sizeof(out));
	CHECK(!ret, "ibv_memcpy_from_dm: %s", strerror(ret));
	for (int i = 0; i < 100; i++)
		CHECK(!out[i], "a new allocation's byte %d is %#x", i, out[i]);
	for (int i = 0; i < 100; i++)
		in[i] = 0x30 + i;
	CHECK(!ibv_memcpy_to_dm(dm, 0, in, sizeof(in)), "ibv_memcpy_to_dm");
	CHECK(!ibv_memcpy_from_dm(out, dm, 0, sizeof(out)) &&
	      !memcmp(in, out, sizeof(in)), "the bytes did not come back");
	/* Offsets and lengths go by 4 bytes. */
	CHECK(!ibv_memcpy_from_dm(out, dm, 96, 4) && !memcmp(out, in + 96, 4),
	      "4 bytes at 96");
	ret = ibv_memcpy_from_dm(out, dm, 96, 3);
	CHECK(ret == EINVAL, "ibv_memcpy_from_dm of 3 bytes: %d", ret);
	ret = ibv_memcpy_to_dm(dm, 4, in, 3);
	CHECK(ret == EINVAL, "ibv_memcpy_to_dm of 3 bytes: %d", ret);
	ret = ibv_memcpy_to_dm(dm, 2, in, 4);
	CHECK(ret == EINVAL, "ibv_memcpy_to_dm at offset 2: %d", ret);
	ret = ibv_memcpy_from_dm(out, dm, 96, 8);
	CHECK(ret == EINVAL, "ibv_memcpy_from_dm past the end: %d", ret);
	ret = ibv_memcpy_to_dm(dm, UINT64_MAX - 3, in, 8);
	CHECK(ret == EINVAL, "ibv_memcpy_to_dm at 2^64-4: %d", ret);

	mr = ibv_reg_dm_mr(o.pd, dm, 0, 100, acc & ~IBV_ACCESS_ZERO_BASED);
	CHECK(!mr && errno == EINVAL, "a DM MR that is not zero-based: %s",
	      mr ? "registered" : strerror(errno));
	mr = ibv_reg_dm_mr(o.pd, dm, 8, 100, acc);
	CHECK(!mr && errno == EINVAL, "a DM MR past the end: %s",
	      mr ? "registered" : strerror(errno));
	mr = ibv_reg_dm_mr(o.pd, dm, 2, 8, acc);
	CHECK(!mr && errno == EINVAL, "a DM MR at offset 2: %s",
	      mr ? "registered" : strerror(errno));
	/* An empty one is a key that covers no byte (rdma-core registers some). */
	mr = ibv_reg_dm_mr(o.pd, dm, 4, 0, acc);
	CHECK(mr && mr->length == 0, "an empty DM MR: %s", strerror(errno));
	CHECK(!ibv_dereg_mr(mr), "ibv_dereg_mr of the empty DM MR");
	mr = ibv_reg_dm_mr(o.pd, dm, 100, 0, acc);
	CHECK(!mr && errno == EINVAL, "an empty DM MR at the end: %s",
	      mr ? "registered" : strerror(errno));
	mr = ibv_reg_dm_mr(o.pd, dm, 4, 96, acc);
	CHECK(mr, "ibv_reg_dm_mr(4, 96): %s", strerror(errno));
	ret = ibv_free_dm(dm);
	CHECK(ret == EBUSY, "ibv_free_dm under an MR: %d", ret);

	/* RDMA WRITE from host memory into the MR's bytes 8..72 (dm 12..76). */
	if (to_rts(o.qp, o.qp->qp_num))
		return 1;
	memset(o.buf, 0xa7, 64);
	sge = (struct ibv_sge){ (uintptr_t)o.buf, 64, o.mr->lkey };
	wr = (struct ibv_send_wr){
		.wr_id = 1, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { 8, mr->rkey },
	};
	CHECK(!ibv_post_send(o.qp, &wr, &bad), "ibv_post_send");
	st = one_status(o.cq);
	CHECK(st == IBV_WC_SUCCESS, "RDMA WRITE into device memory: %s",
	      st < 0 ? "no completion" : ibv_wc_status_str(st));
	CHECK(!ibv_memcpy_from_dm(out, dm, 0, sizeof(out)), "read back");
	for (int i = 0; i < 100; i++) {
		unsigned char want = i >= 12 && i < 76 ? 0xa7 : in[i];

		CHECK(out[i] == want, "dm byte %d is %#x, not %#x", i, out[i],
		      want);
	}
	/* RDMA READ of the MR's first 16 bytes (dm 4..20) into host memory. */
	sge.length = 16;
	wr.wr_id = 2;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = 0;
	CHECK(!ibv_post_send(o.qp, &wr, &bad), "ibv_post_send");
	st = one_status(o.cq);
	CHECK(st == IBV_WC_SUCCESS, "RDMA READ of device memory: %s",
	      st < 0 ? "no completion" : ibv_wc_status_str(st));
	CHECK(!memcmp(o.buf, out + 4, 16), "the READ brought other bytes");
	/* Past the MR's 96 bytes: the key does not reach the rest. */
	wr.wr_id = 3;
	wr.wr.rdma.remote_addr = 90;
	CHECK(!ibv_post_send(o.qp, &wr, &bad), "ibv_post_send");
	st = one_status(o.cq);
	CHECK(st == IBV_WC_REM_ACCESS_ERR, "a READ past the DM MR: %s",
	      st < 0 ? "no completion" : ibv_wc_status_str(st));

	CHECK(!ibv_dereg_mr(mr), "ibv_dereg_mr");
	CHECK(!ibv_free_dm(dm), "ibv_free_dm");
	/* Another context's allocation of the same memory starts zeroed. */
	free_objs(&o);
	if (make_objs(&o, dev))
		return 1;
	dm = ibv_alloc_dm(o.ctx, &attr);
	CHECK(dm, "ibv_alloc_dm again: %s", strerror(errno));
	CHECK(!ibv_memcpy_from_dm(out, dm, 0, sizeof(out)), "read");
	for (int i = 0; i < 100; i++)
		CHECK(!out[i], "byte %d of an earlier allocation reached a new one",
		      i);
	CHECK(!ibv_free_dm(dm), "ibv_free_dm");
	free_objs(&o);
	return 0;
}

/* An RDMA WRITE of 64 bytes of @o's buffer to @addr with @rkey: its status. */
static int write_64(struct objs *o, uint64_t addr, uint32_t rkey)
{
	struct ibv_sge sge = { (uintptr_t)o->buf, 64, o->mr->lkey };
	struct ibv_send_wr *bad, wr = {
		.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED, .wr.rdma = { addr, rkey },
	};

	if (ibv_post_send(o->qp, &wr, &bad))
		return -1;
	return one_status(o->cq);
}

/* The QP again from RESET to RTS, connected to itself, after an error. */
static int reconnect(struct ibv_qp *qp)
{
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };

	CHECK(!ibv_modify_qp(qp, &reset, IBV_QP_STATE), "-> RESET");
	return to_rts(qp, qp->qp_num);
}

/*
 * ibv_rereg_mr() through the core. An MR moved to another buffer and given
 * remote write (CHANGE_TRANSLATION | CHANGE_ACCESS) takes an RDMA WRITE by
 * its new rkey into the new buffer; the old rkey reaches nothing. A
 * re-registration that fails (remote write without local write; no flags)
 * leaves the MR as it was. Moved to another PD (CHANGE_PD), in place with
 * its keys, the first PD's QP cannot reach it (REM_ACCESS_ERR); moved back,
 * it can again by the same rkey.
 */
static int test_rereg_mr(const char *dev)
{
	unsigned char *a, *b;
	uint32_t old_rkey;
	struct ibv_pd *pd2;
	struct ibv_mr *mr;
	struct objs o;
	int ret, st;

	if (make_objs(&o, dev) || to_rts(o.qp, o.qp->qp_num))
		return 1;
	a = aligned_alloc(4096, 4096);
	b = aligned_alloc(4096, 2 * 4096);
	CHECK(a && b, "aligned_alloc");
	memset(a, 0x11, 4096);
	memset(b, 0x22, 2 * 4096);
	mr = ibv_reg_mr(o.pd, a, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "ibv_reg_mr: %s", strerror(errno));
	old_rkey = mr->rkey;
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION |
			   IBV_REREG_MR_CHANGE_ACCESS, NULL, b, 2 * 4096,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(!ret, "ibv_rereg_mr to another buffer: %d, %s", ret,
	      strerror(errno));
	CHECK(mr->addr == b && mr->length == 2 * 4096, "the MR is not over b");
	memset(o.buf, 0x77, 64);
	st = write_64(&o, (uintptr_t)b + 4096, mr->rkey);
	CHECK(st == IBV_WC_SUCCESS, "WRITE by the new rkey: %s",
	      st < 0 ? "no completion" : ibv_wc_status_str(st));
	for (int i = 0; i < 2 * 4096; i++)
		CHECK(b[i] == (i >= 4096 && i < 4096 + 64 ? 0x77 : 0x22),
		      "b[%d] is %#x", i, b[i]);

	/* Failures change nothing: the WRITE still lands. */
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_REMOTE_WRITE);
	CHECK(ret && errno == EINVAL, "remote write alone: %d, %s", ret,
	      strerror(errno));
	ret = ibv_rereg_mr(mr, 0, NULL, NULL, 0, 0);
	CHECK(ret && errno == EINVAL, "no flags: %d, %s", ret,
	      strerror(errno));
	memset(o.buf, 0x78, 64);
	st = write_64(&o, (uintptr_t)b, mr->rkey);
	CHECK(st == IBV_WC_SUCCESS && b[0] == 0x78,
	      "WRITE after failed re-registrations: %s",
	      st < 0 ? "no completion" : ibv_wc_status_str(st));

	if (old_rkey != mr->rkey) {
		st = write_64(&o, (uintptr_t)a, old_rkey);
		CHECK(st == IBV_WC_REM_ACCESS_ERR, "WRITE by the old rkey: %s",
		      st < 0 ? "no completion" : ibv_wc_status_str(st));
		CHECK(a[0] == 0x11, "the old buffer changed");
		if (reconnect(o.qp))
			return 1;
	}

	pd2 = ibv_alloc_pd(o.ctx);
	CHECK(pd2, "ibv_alloc_pd: %s", strerror(errno));
	old_rkey = mr->rkey;
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0);
	CHECK(!ret && mr->pd == pd2, "ibv_rereg_mr to another PD: %d, %s",
	      ret, strerror(errno));
	/* Without a new translation the MR changes in place, keys and all. */
	CHECK(mr->rkey == old_rkey && mr->lkey == old_rkey,
	      "CHANGE_PD gave new keys: %#x, was %#x", mr->rkey, old_rkey);
	st = write_64(&o, (uintptr_t)b, mr->rkey);
	CHECK(st == IBV_WC_REM_ACCESS_ERR, "WRITE from another PD's QP: %s",
	      st < 0 ? "no completion" : ibv_wc_status_str(st));
	if (reconnect(o.qp))
		return 1;
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, o.pd, NULL, 0, 0);
	CHECK(!ret && mr->pd == o.pd && mr->rkey == old_rkey,
	      "ibv_rereg_mr back to the first PD: %d, %s", ret, strerror(errno));
	memset(o.buf, 0x79, 64);
	st = write_64(&o, (uintptr_t)b, mr->rkey);
	CHECK(st == IBV_WC_SUCCESS && b[0] == 0x79,
	      "WRITE by the same rkey, back in the first PD: %s",
	      st < 0 ? "no completion" : ibv_wc_status_str(st));
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0);
	CHECK(!ret && mr->pd == pd2, "ibv_rereg_mr to another PD again: %d, %s",
	      ret, strerror(errno));
	ret = ibv_dealloc_pd(pd2);
	CHECK(ret == EBUSY, "ibv_dealloc_pd of the MR's new PD: %d", ret);
	CHECK(!ibv_dereg_mr(mr), "ibv_dereg_mr");
	CHECK(!ibv_dealloc_pd(pd2), "ibv_dealloc_pd");
	free_objs(&o);
	free(a);
	free(b);
	return 0;
}

#define CGROUP_ROOT "/sys/fs/cgroup"
#define CGROUP_TEST CGROUP_ROOT "/pfnic-uverbs-test"

/* Writes @text to the file @path; 0 or an errno value. */
static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	int err = 0;

	if (!f)
		return errno;
	if (fputs(text, f) < 0)
		err = errno;
	if (fclose(f) && !err)
		err = errno;
	return err;
}

/* Whether the file @path has the word @word. */
static int has_word(const char *path, const char *word)
{
	FILE *f = fopen(path, "r");
	char w[64];
	int found = 0;

	if (!f)
		return 0;
	while (!found && fscanf(f, "%63s", w) == 1)
		found = !strcmp(w, word);
	fclose(f);
	return found;
}

/* @key's value (key=value) on @dev's line of the cgroup file @path, or -1. */
static long cgroup_value(const char *path, const char *dev, const char *key)
{
	FILE *f = fopen(path, "r");
	char line[256], *p;
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, dev, strlen(dev)) || line[strlen(dev)] != ' ')
			continue;
		p = strstr(line, key);
		if (p && p[strlen(key)] == '=')
			v = strtol(p + strlen(key) + 1, NULL, 10);
	}
	fclose(f);
	return v;
}

/*
 * In the child: in the test cgroup, limited to one context and 3 objects
 * more than the context has (rdma.max), a second context and a fourth PD
 * fail with EAGAIN, rdma.current counts them, and a freed PD makes room.
 */
static int rdma_cgroup_child(const char *dev)
{
	struct ibv_context *ctx, *second;
	struct ibv_pd *pds[4];
	char max[128];
	long base;

	CHECK(!write_file(CGROUP_TEST "/cgroup.procs", "0"),
	      "joining the cgroup: %s", strerror(errno));
	snprintf(max, sizeof(max), "%s hca_handle=1\n", dev);
	CHECK(!write_file(CGROUP_TEST "/rdma.max", max), "rdma.max: %s",
	      strerror(errno));
	ctx = open_dev(dev);
	CHECK(ctx, "the first context: %s", strerror(errno));
	CHECK(cgroup_value(CGROUP_TEST "/rdma.current", dev, "hca_handle") == 1,
	      "rdma.current: hca_handle %ld",
	      cgroup_value(CGROUP_TEST "/rdma.current", dev, "hca_handle"));
	second = open_dev(dev);
	CHECK(!second && errno == EAGAIN, "a second context over hca_handle=1: %s",
	      second ? "opened" : strerror(errno));
	base = cgroup_value(CGROUP_TEST "/rdma.current", dev, "hca_object");
	CHECK(base >= 0, "no hca_object in rdma.current");
	snprintf(max, sizeof(max), "%s hca_handle=1 hca_object=%ld\n", dev,
		 base + 3);
	CHECK(!write_file(CGROUP_TEST "/rdma.max", max), "rdma.max: %s",
	      strerror(errno));
	for (int i = 0; i < 3; i++) {
		pds[i] = ibv_alloc_pd(ctx);
		CHECK(pds[i], "PD %d of 3 the limit allows: %s", i + 1,
		      strerror(errno));
	}
	pds[3] = ibv_alloc_pd(ctx);
	CHECK(!pds[3] && errno == EAGAIN, "a PD over hca_object: %s",
	      pds[3] ? "allocated" : strerror(errno));
	CHECK(cgroup_value(CGROUP_TEST "/rdma.current", dev, "hca_object") ==
	      base + 3, "rdma.current: hca_object %ld, %ld expected",
	      cgroup_value(CGROUP_TEST "/rdma.current", dev, "hca_object"),
	      base + 3);
	CHECK(!ibv_dealloc_pd(pds[0]), "ibv_dealloc_pd");
	pds[0] = ibv_alloc_pd(ctx);
	CHECK(pds[0], "a PD after one was freed: %s", strerror(errno));
	for (int i = 0; i < 3; i++)
		ibv_dealloc_pd(pds[i]);
	ibv_close_device(ctx);
	return 0;
}

/*
 * Per-process limits are the RDMA core's rdma cgroup's, as for every RDMA
 * device: rdma.max bounds a process's contexts and verbs objects on pfnic.
 */
static int test_rdma_cgroup(const char *dev)
{
	int status, ret;
	pid_t pid;

	if (access(CGROUP_ROOT "/cgroup.controllers", F_OK))
		CHECK(!mount("none", CGROUP_ROOT, "cgroup2", 0, NULL),
		      "mounting cgroup2: %s", strerror(errno));
	CHECK(has_word(CGROUP_ROOT "/cgroup.controllers", "rdma"),
	      "no rdma controller in %s/cgroup.controllers", CGROUP_ROOT);
	ret = write_file(CGROUP_ROOT "/cgroup.subtree_control", "+rdma");
	CHECK(!ret, "enabling the rdma controller: %s", strerror(ret));
	rmdir(CGROUP_TEST);
	CHECK(!mkdir(CGROUP_TEST, 0755), "mkdir %s: %s", CGROUP_TEST,
	      strerror(errno));
	fflush(stdout);
	pid = fork();
	if (!pid)
		_exit(rdma_cgroup_child(dev));
	CHECK(pid > 0, "fork: %s", strerror(errno));
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(!rmdir(CGROUP_TEST), "rmdir %s: %s", CGROUP_TEST, strerror(errno));
	CHECK(WIFEXITED(status) && !WEXITSTATUS(status),
	      "in the limited cgroup: status %#x", status);
	return 0;
}

static sigjmp_buf bus_jmp;

static void on_sigbus(int sig)
{
	siglongjmp(bus_jmp, 1);
}

/* Whether reading *p raises SIGBUS. */
static int faults(volatile const unsigned int *p)
{
	struct sigaction sa = { .sa_handler = on_sigbus }, old;
	int bus = 0;

	sigaction(SIGBUS, &sa, &old);
	if (sigsetjmp(bus_jmp, 1))
		bus = 1;
	else
		(void)*p;
	sigaction(SIGBUS, &old, NULL);
	return bus;
}

/*
 * Reads every mapping of a uverbs file (the provider's doorbell page and
 * rings); returns how many there are and, in *bus, how many raise SIGBUS.
 */
static int uverbs_mappings(int *bus)
{
	FILE *maps = fopen("/proc/self/maps", "r");
	unsigned long start;
	char line[512];
	int n = 0;

	*bus = 0;
	if (!maps)
		return -1;
	while (fgets(line, sizeof(line), maps)) {
		if (!strstr(line, "/dev/infiniband/uverbs") ||
		    sscanf(line, "%lx-", &start) != 1)
			continue;
		n++;
		*bus += faults((volatile const unsigned int *)start);
	}
	fclose(maps);
	return n;
}

/*
 * Two RDMA devices in one process (two providers under one libibverbs):
 * both are opened, then on each a QP connected to itself by the port's
 * GID 1 moves 4 KiB by RDMA WRITE between two of its MRs, the contexts of
 * both open throughout. Prints "both: DEV (GID 1 ...) OTHER (GID 1 ...)".
 */
static int two_devices(const char *dev, const char *other)
{
	const char *names[2] = { dev, other };
	struct objs o[2];

	for (int i = 0; i < 2; i++)
		if (make_objs(&o[i], names[i]))
			return 1;
	for (int i = 0; i < 2; i++) {
		unsigned char *b = o[i].buf;
		struct ibv_sge sge = { (uintptr_t)b, 4096, o[i].mr->lkey };
		struct ibv_send_wr *bad, wr = {
			.sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { (uintptr_t)b + 8192, o[i].mr->rkey },
		};
		int st;

		if (to_rts_av(o[i].qp, o[i].qp->qp_num, 1))
			return 1;
		for (int j = 0; j < 4096; j++)
			b[j] = (unsigned char)(j * 7 + i);
		CHECK(!ibv_post_send(o[i].qp, &wr, &bad), "%s: ibv_post_send",
		      names[i]);
		st = one_status(o[i].cq);
		CHECK(st == IBV_WC_SUCCESS, "%s: RDMA WRITE: %s", names[i],
		      st < 0 ? "no completion" : ibv_wc_status_str(st));
		CHECK(!memcmp(b, b + 8192, 4096), "%s: the bytes differ",
		      names[i]);
	}
	printf("both:");
	for (int i = 0; i < 2; i++) {
		char addr[INET6_ADDRSTRLEN] = "?";
		union ibv_gid gid;

		if (!ibv_query_gid(o[i].ctx, 1, 1, &gid))
			inet_ntop(AF_INET6, gid.raw, addr, sizeof(addr));
		printf(" %s (GID 1 %s)", names[i], addr);
	}
	printf("\n");
	for (int i = 0; i < 2; i++)
		free_objs(&o[i]);
	return 0;
}

static int hold(const char *dev)
{
	struct ibv_alloc_dm_attr dm_attr = { .length = 4096 };
	struct ibv_device_attr_ex dattr = {};
	struct ibv_dm *dm = NULL;
	struct ibv_pd *pd;
	struct objs o;
	char line[16];
	int n, bus;

	if (make_objs(&o, dev))
		return 1;
	/* Device memory too, where the device has it: a fourth mapping. */
	if (!ibv_query_device_ex(o.ctx, NULL, &dattr) && dattr.max_dm_size)
		dm = ibv_alloc_dm(o.ctx, &dm_attr);
	n = uverbs_mappings(&bus);
	printf("ready: %d mappings, %d raise SIGBUS, VmPin %ld kB\n", n, bus,
	       vm_pin_kb());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	pd = ibv_alloc_pd(o.ctx);
	n = uverbs_mappings(&bus);
	printf("after: alloc_pd %s, %d mappings, %d raise SIGBUS, VmPin %ld kB\n",
	       pd ? "works" : strerror(errno), n, bus, vm_pin_kb());
	/* Closing after the device went away must not fail or hang. */
	if (dm)
		ibv_free_dm(dm);
	free_objs(&o);
	printf("closed\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[2], "hold"))
		return hold(argv[1]);
	if (argc == 4 && !strcmp(argv[2], "two-devices"))
		return two_devices(argv[1], argv[3]);
	if (argc != 2) {
		fprintf(stderr, "usage: %s DEVICE [hold | two-devices OTHER]\n",
			argv[0]);
		return 2;
	}
	printf("TAP version 13\n1..17\n");
	report("objects", test_objects(argv[1]));
	report("qp_states", test_qp_states(argv[1]));
	report("refused", test_refused(argv[1]));
	report("fork_child", test_fork_child(argv[1]));
	report("limits", test_limits(argv[1]));
	report("srq_limit_event", test_srq_limit_event(argv[1]));
	report("inline", test_inline(argv[1]));
	report("mem_modes", test_mem_modes(argv[1]));
	report("recv_fault_env", test_recv_fault_env(argv[1]));
	report("cq_ex", test_cq_ex(argv[1]));
	report("advise_mr", test_advise_mr(argv[1]));
	report("rdma_cgroup", test_rdma_cgroup(argv[1]));
	report("cross_process_keys", test_cross_process_keys(argv[1]));
	report("dm", test_dm(argv[1]));
	report("rereg_mr", test_rereg_mr(argv[1]));
	report("ud", test_ud(argv[1]));
	report("kernel_paths", test_kernel_paths(argv[1]));
	return failed ? 1 : 0;
}
