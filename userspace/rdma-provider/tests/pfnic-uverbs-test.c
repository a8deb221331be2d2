// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * pfnic's verbs objects through the RDMA core, as a program built against
 * rdma-core's <infiniband/verbs.h> sees them on Debian's own libibverbs.so.1
 * and the pfnic provider: PDs, MRs, CQs and RC QPs are created, taken
 * through their states and destroyed through /dev/infiniband/uverbsN, and
 * the verbs a device without them would refuse fail with the errno
 * libibverbs users expect.
 *
 *   pfnic-uverbs-test DEVICE          run the checks, print KTAP
 *   pfnic-uverbs-test DEVICE hold     create objects, print "ready", wait for
 *                                     a line on stdin (the device is unbound
 *                                     meanwhile), then report what verbs and
 *                                     the mapped rings do: "after: ..."
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>


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
static int to_rts(struct ibv_qp *qp, uint32_t dest_qpn)
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

/* RESET -> INIT -> RTR -> RTS, connected to itself by the port's LID. */
static int test_qp_states(const char *dev)
{
	struct ibv_qp_attr a = {};
	struct objs o;
	int ret;

	if (make_objs(&o, dev))
		return 1;
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

/* What pfnic does not have is refused with the errno libibverbs users expect. */
static int test_refused(const char *dev)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_UD,
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
	CHECK(!qp && errno == EOPNOTSUPP, "UD QP: %p, %s", (void *)qp,
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

/* A fork child cannot use its parent's context: its address space is another. */
static int test_fork_child(const char *dev)
{
	struct objs o;
	int status;
	pid_t pid;

	if (make_objs(&o, dev))
		return 1;
	pid = fork();
	if (!pid) {
		struct ibv_pd *pd = ibv_alloc_pd(o.ctx);
		struct ibv_cq *cq;

		if (pd || errno != EPERM)
			_exit(1);
		cq = ibv_create_cq(o.ctx, 4, NULL, NULL, 0);
		_exit(!cq && errno == EPERM ? 0 : 2);
	}
	CHECK(pid > 0, "fork: %s", strerror(errno));
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the child's verbs on the parent's context did not fail with "
	      "EPERM (status %#x)", status);
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

static int hold(const char *dev)
{
	struct ibv_pd *pd;
	struct objs o;
	char line[16];
	int n, bus;

	if (make_objs(&o, dev))
		return 1;
	n = uverbs_mappings(&bus);
	printf("ready: %d mappings, %d raise SIGBUS\n", n, bus);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	pd = ibv_alloc_pd(o.ctx);
	n = uverbs_mappings(&bus);
	printf("after: alloc_pd %s, %d mappings, %d raise SIGBUS\n",
	       pd ? "works" : strerror(errno), n, bus);
	/* Closing after the device went away must not fail or hang. */
	free_objs(&o);
	printf("closed\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[2], "hold"))
		return hold(argv[1]);
	if (argc != 2) {
		fprintf(stderr, "usage: %s DEVICE [hold]\n", argv[0]);
		return 2;
	}
	printf("TAP version 13\n1..7\n");
	report("objects", test_objects(argv[1]));
	report("qp_states", test_qp_states(argv[1]));
	report("refused", test_refused(argv[1]));
	report("fork_child", test_fork_child(argv[1]));
	report("limits", test_limits(argv[1]));
	report("srq_limit_event", test_srq_limit_event(argv[1]));
	report("inline", test_inline(argv[1]));
	return failed ? 1 : 0;
}
