/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * RC ping-pong over a loopback port, written against rdma-core's
 * <infiniband/verbs.h> only: it runs on any libibverbs provider.
 *
 * Two RC queue pairs on the first (or the named) device exchange SEND
 * messages: the client sends message 2i, the server checks it and answers
 * with message 2i+1, which the client checks. Every message has its own
 * byte pattern, so a stale or misplaced buffer fails the check. The two QPs
 * live in one process, or in two (--fork: the parent is the server, the
 * child the client; they swap QP numbers over pipes), or on two machines
 * (--server, and a client given the server's host name): then the two
 * exchange their addresses over TCP exactly as rdma-core's ibv_rc_pingpong
 * does (port 18515, the message "LID:QPN:PSN:GID"), so either side can be
 * rdma-core's own program, on any RDMA device. With -g the address vector
 * carries a global route to the peer's GID (RoCE needs it: -g 1, the
 * IPv4-mapped GID); in one machine that GID is the port's own (loopback).
 *
 * Exits 0 when every iteration completed and checked, 1 on any failure, 2 on
 * bad usage. The last line of a successful run starts with "ok:".
 */

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define PROG "pfnic-rc-pingpong"

struct options {
    const char *device;
    size_t size;
    unsigned int iters;
    bool odp;
    bool implicit;
    bool prefetch;
    bool events;
    bool fork;
    bool cold;
    unsigned int timeout_s;
    /* Source GID index (-g), -1: no global route. */
    int gid_index;
    enum ibv_mtu mtu;
    /* TCP: run as the server (--server), or the client of `host`. */
    bool server;
    const char *host;
    unsigned int tcp_port;
    /* Check every received message's bytes (off against another program). */
    bool check;
};

/* What each side tells the other: rdma-core's pingpong_dest. */
struct dest {
    uint16_t lid;
    uint32_t qpn;
    uint32_t psn;
    union ibv_gid gid;
};

/* What one process opened: the device, its PD and completion channel. */
struct proc {
    const struct options *opt;
    const char *role;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_comp_channel *channel;
    struct ibv_mr *implicit_mr;
    uint16_t lid;
    enum ibv_mtu active_mtu;
    /* GID `opt->gid_index` of port 1 (zero without -g). */
    union ibv_gid gid;
    uint64_t page_requests;
    uint64_t events;
};

/* One queue pair with its buffers: [recv | send], each `size` bytes. */
struct end {
    struct proc *proc;
    const char *name;
    unsigned char *buf;
    size_t buf_len;
    unsigned char *recv_buf;
    unsigned char *send_buf;
    struct ibv_mr *mr;
    uint32_t lkey;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    /* Events mode: an event came for the CQ since it was last found empty. */
    bool event_seen;
    /*
     * Receives that completed while a send's completion was awaited: a
     * peer that acknowledges late (rxe) lets the next message arrive
     * before the ACK of ours.
     */
    unsigned int early_recvs;
};

static const char *who = PROG;

static void err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void err(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", who);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static double now_us(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static size_t page_size(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

/* The byte pattern of message `seq`: differs in every byte and message. */
static unsigned char pattern(unsigned int seq, size_t i)
{
    return (unsigned char)(seq * 131u + i * 7u + (i >> 8) + 1u);
}

static void fill(unsigned char *p, size_t len, unsigned int seq)
{
    for (size_t i = 0; i < len; i++) {
        p[i] = pattern(seq, i);
    }
}

static int check(const struct end *e, unsigned int seq)
{
    size_t len = e->proc->opt->size;

    if (!e->proc->opt->check) {
        return 0;
    }
    for (size_t i = 0; i < len; i++) {
        if (e->recv_buf[i] != pattern(seq, i)) {
            err("%s: message %u: byte %zu is 0x%02x, expected 0x%02x", e->name,
                seq, i, e->recv_buf[i], pattern(seq, i));
            return -1;
        }
    }
    return 0;
}

static int proc_open(struct proc *p, const struct options *opt,
                     const char *role)
{
    struct ibv_device **list;
    struct ibv_device *dev = NULL;
    struct ibv_port_attr port;
    int n, ret;

    memset(p, 0, sizeof(*p));
    p->opt = opt;
    p->role = role;
    list = ibv_get_device_list(&n);
    if (!list) {
        err("ibv_get_device_list: %s", strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const char *name = ibv_get_device_name(list[i]);

        if (!opt->device || (name && !strcmp(name, opt->device))) {
            dev = list[i];
            break;
        }
    }
    if (!dev) {
        err(opt->device ? "no device named %s" : "no RDMA device%s",
            opt->device ? opt->device : "");
        ibv_free_device_list(list);
        return -1;
    }
    p->ctx = ibv_open_device(dev);
    ibv_free_device_list(list);
    if (!p->ctx) {
        err("ibv_open_device: %s", strerror(errno));
        return -1;
    }

    if (opt->odp) {
        struct ibv_device_attr_ex attr;
        uint64_t need = IBV_ODP_SUPPORT;

        ret = ibv_query_device_ex(p->ctx, NULL, &attr);
        if (ret) {
            err("ibv_query_device_ex: %s", strerror(ret));
            return -1;
        }
        if (opt->implicit) {
            need |= IBV_ODP_SUPPORT_IMPLICIT;
        }
        if ((attr.odp_caps.general_caps & need) != need ||
            (attr.odp_caps.per_transport_caps.rc_odp_caps &
             (IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV)) !=
            (IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV)) {
            err("the device has no %son-demand paging for RC SEND/RECV",
                opt->implicit ? "implicit " : "");
            return -1;
        }
    }

    ret = ibv_query_port(p->ctx, 1, &port);
    if (ret) {
        err("ibv_query_port: %s", strerror(ret));
        return -1;
    }
    if (port.state != IBV_PORT_ACTIVE) {
        err("port 1 is not active (state %d)", port.state);
        return -1;
    }
    p->lid = port.lid;
    p->active_mtu = port.active_mtu;
    if (port.link_layer != IBV_LINK_LAYER_ETHERNET && !p->lid) {
        err("port 1 has no LID");
        return -1;
    }
    if (opt->gid_index >= 0) {
        if (opt->gid_index >= port.gid_tbl_len) {
            err("-g %d: port 1 has %d GIDs", opt->gid_index, port.gid_tbl_len);
            return -1;
        }
        if (ibv_query_gid(p->ctx, 1, opt->gid_index, &p->gid)) {
            err("ibv_query_gid(%d): %s", opt->gid_index, strerror(errno));
            return -1;
        }
    } else if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {
        err("port 1 is Ethernet (RoCE): give a source GID with -g "
            "(1: the IPv4 address)");
        return -1;
    }

    p->pd = ibv_alloc_pd(p->ctx);
    if (!p->pd) {
        err("ibv_alloc_pd: %s", strerror(errno));
        return -1;
    }
    if (opt->events) {
        p->channel = ibv_create_comp_channel(p->ctx);
        if (!p->channel) {
            err("ibv_create_comp_channel: %s", strerror(errno));
            return -1;
        }
    }
    if (opt->implicit) {
        p->implicit_mr = ibv_reg_mr(p->pd, NULL, SIZE_MAX,
                                    IBV_ACCESS_LOCAL_WRITE |
                                    IBV_ACCESS_ON_DEMAND);
        if (!p->implicit_mr) {
            err("ibv_reg_mr (implicit): %s", strerror(errno));
            return -1;
        }
    }
    return 0;
}

static int proc_close(struct proc *p)
{
    int ret, rc = 0;

    if (p->implicit_mr) {
        ret = ibv_dereg_mr(p->implicit_mr);
        if (ret) {
            err("ibv_dereg_mr (implicit): %s", strerror(ret));
            rc = -1;
        }
    }
    if (p->channel) {
        ret = ibv_destroy_comp_channel(p->channel);
        if (ret) {
            err("ibv_destroy_comp_channel: %s", strerror(ret));
            rc = -1;
        }
    }
    if (p->pd) {
        ret = ibv_dealloc_pd(p->pd);
        if (ret) {
            err("ibv_dealloc_pd: %s", strerror(ret));
            rc = -1;
        }
    }
    if (p->ctx && ibv_close_device(p->ctx)) {
        err("ibv_close_device: %s", strerror(errno));
        rc = -1;
    }
    return rc;
}

static int end_open(struct end *e, struct proc *p, const char *name)
{
    const struct options *opt = p->opt;
    struct ibv_qp_init_attr init = {
        .cap = {
            .max_send_wr = 2,
            .max_recv_wr = 2,
            .max_send_sge = 1,
            .max_recv_sge = 1,
        },
        .qp_type = IBV_QPT_RC,
    };
    size_t half = (opt->size + page_size() - 1) / page_size() * page_size();

    memset(e, 0, sizeof(*e));
    e->proc = p;
    e->name = name;
    /* Page-aligned, never touched: the first DMA faults the pages in. */
    e->buf_len = 2 * half;
    e->buf = mmap(NULL, e->buf_len, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (e->buf == MAP_FAILED) {
        e->buf = NULL;
        err("%s: mmap %zu bytes: %s", name, e->buf_len, strerror(errno));
        return -1;
    }
    e->recv_buf = e->buf;
    e->send_buf = e->buf + half;

    if (p->implicit_mr) {
        e->lkey = p->implicit_mr->lkey;
    } else {
        int access = IBV_ACCESS_LOCAL_WRITE;

        if (opt->odp) {
            access |= IBV_ACCESS_ON_DEMAND;
        }
        e->mr = ibv_reg_mr(p->pd, e->buf, e->buf_len, access);
        if (!e->mr) {
            err("%s: ibv_reg_mr: %s", name, strerror(errno));
            return -1;
        }
        if (e->mr->addr != e->buf || e->mr->length != e->buf_len) {
            err("%s: the MR covers %p+%zu, not %p+%zu", name, e->mr->addr,
                e->mr->length, (void *)e->buf, e->buf_len);
            return -1;
        }
        e->lkey = e->mr->lkey;
    }

    e->cq = ibv_create_cq(p->ctx, 4, e, p->channel, 0);
    if (!e->cq) {
        err("%s: ibv_create_cq: %s", name, strerror(errno));
        return -1;
    }
    if (p->channel && ibv_req_notify_cq(e->cq, 0)) {
        err("%s: ibv_req_notify_cq failed", name);
        return -1;
    }
    init.send_cq = e->cq;
    init.recv_cq = e->cq;
    e->qp = ibv_create_qp(p->pd, &init);
    if (!e->qp) {
        err("%s: ibv_create_qp: %s", name, strerror(errno));
        return -1;
    }
    if (init.cap.max_send_wr < 2 || init.cap.max_recv_wr < 2) {
        err("%s: ibv_create_qp gave fewer work requests than asked", name);
        return -1;
    }
    return 0;
}

static int end_close(struct end *e)
{
    int ret, rc = 0;

    if (e->qp) {
        ret = ibv_destroy_qp(e->qp);
        if (ret) {
            err("%s: ibv_destroy_qp: %s", e->name, strerror(ret));
            rc = -1;
        }
    }
    if (e->cq) {
        ret = ibv_destroy_cq(e->cq);
        if (ret) {
            err("%s: ibv_destroy_cq: %s", e->name, strerror(ret));
            rc = -1;
        }
    }
    if (e->mr) {
        ret = ibv_dereg_mr(e->mr);
        if (ret) {
            err("%s: ibv_dereg_mr: %s", e->name, strerror(ret));
            rc = -1;
        }
    }
    if (e->buf) {
        munmap(e->buf, e->buf_len);
    }
    return rc;
}

/*
 * RESET -> INIT -> RTR -> RTS, sending from PSN `my_psn` to the QP `d`
 * names: at its LID, and with a global route to its GID when it has one
 * (rdma-core's rule: a nonzero interface ID), as rdma-core's pp_connect_ctx;
 * the first receive is posted in INIT.
 */
static int post_recv(struct end *e);

static int end_connect(struct end *e, uint32_t my_psn, const struct dest *d)
{
    const struct options *opt = e->proc->opt;
    uint32_t dest_qpn = d->qpn;
    struct ibv_qp_attr attr;
    int ret;

    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = 1;
    attr.qp_access_flags = 0;
    ret = ibv_modify_qp(e->qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                        IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (ret) {
        err("%s: ibv_modify_qp to INIT: %s", e->name, strerror(ret));
        return -1;
    }
    /* The first receive, once out of RESET (which takes no work request). */
    if (post_recv(e)) {
        return -1;
    }

    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = opt->mtu;
    attr.dest_qp_num = dest_qpn;
    attr.rq_psn = d->psn;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;
    attr.ah_attr.dlid = d->lid;
    attr.ah_attr.port_num = 1;
    if (d->gid.global.interface_id) {
        attr.ah_attr.is_global = 1;
        attr.ah_attr.grh.hop_limit = 1;
        attr.ah_attr.grh.dgid = d->gid;
        attr.ah_attr.grh.sgid_index = (uint8_t)(opt->gid_index < 0 ? 0 : opt->gid_index);
    }
    ret = ibv_modify_qp(e->qp, &attr, IBV_QP_STATE | IBV_QP_AV |
                        IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (ret) {
        err("%s: ibv_modify_qp to RTR: %s", e->name, strerror(ret));
        return -1;
    }

    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    attr.sq_psn = my_psn;
    attr.max_rd_atomic = 1;
    ret = ibv_modify_qp(e->qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT |
                        IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                        IBV_QP_MAX_QP_RD_ATOMIC);
    if (ret) {
        err("%s: ibv_modify_qp to RTS: %s", e->name, strerror(ret));
        return -1;
    }

    /* The device must agree on where the QP is and whom it talks to. */
    {
        struct ibv_qp_init_attr init;

        memset(&attr, 0, sizeof(attr));
        ret = ibv_query_qp(e->qp, &attr, IBV_QP_STATE | IBV_QP_DEST_QPN,
                           &init);
        if (ret) {
            err("%s: ibv_query_qp: %s", e->name, strerror(ret));
            return -1;
        }
        if (attr.qp_state != IBV_QPS_RTS || attr.dest_qp_num != dest_qpn) {
            err("%s: ibv_query_qp: state %d, dest QP %u; expected RTS, %u",
                e->name, attr.qp_state, attr.dest_qp_num, dest_qpn);
            return -1;
        }
    }
    return 0;
}

static int post_recv(struct end *e)
{
    const struct options *opt = e->proc->opt;
    struct ibv_sge sge = {
        .addr = (uintptr_t)e->recv_buf,
        .length = (uint32_t)opt->size,
        .lkey = e->lkey,
    };
    struct ibv_recv_wr wr = {
        .wr_id = (uintptr_t)e->recv_buf,
        .sg_list = &sge,
        .num_sge = 1,
    };
    struct ibv_recv_wr *bad = NULL;
    int ret;

    if (opt->cold) {
        /* Drop the pages: the device must fault them back in. */
        if (madvise(e->recv_buf, e->buf_len / 2, MADV_DONTNEED)) {
            err("%s: madvise: %s", e->name, strerror(errno));
            return -1;
        }
    }
    if (opt->prefetch) {
        ret = ibv_advise_mr(e->proc->pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
                            IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1);
        if (ret) {
            err("%s: ibv_advise_mr: %s", e->name, strerror(ret));
            return -1;
        }
    }
    ret = ibv_post_recv(e->qp, &wr, &bad);
    if (ret) {
        err("%s: ibv_post_recv: %s", e->name, strerror(ret));
        return -1;
    }
    return 0;
}

static int post_send(struct end *e, unsigned int seq)
{
    const struct options *opt = e->proc->opt;
    struct ibv_sge sge = {
        .addr = (uintptr_t)e->send_buf,
        .length = (uint32_t)opt->size,
        .lkey = e->lkey,
    };
    struct ibv_send_wr wr = {
        .wr_id = seq,
        .sg_list = &sge,
        .num_sge = 1,
        .opcode = IBV_WR_SEND,
        .send_flags = IBV_SEND_SIGNALED,
    };
    struct ibv_send_wr *bad = NULL;
    int ret;

    fill(e->send_buf, opt->size, seq);
    ret = ibv_post_send(e->qp, &wr, &bad);
    if (ret) {
        err("%s: ibv_post_send: %s", e->name, strerror(ret));
        return -1;
    }
    if (bad) {
        err("%s: ibv_post_send succeeded but set bad_wr", e->name);
        return -1;
    }
    return 0;
}

/*
 * Waits for an event on the process's channel, acknowledges it and re-arms
 * the CQ it names, which may be any of the process's CQs.
 */
static int wait_event(struct proc *p, const char *name)
{
    struct pollfd pfd = { .fd = p->channel->fd, .events = POLLIN };
    struct ibv_cq *cq;
    struct end *owner;
    void *cq_context;
    int ret;

    ret = poll(&pfd, 1, (int)p->opt->timeout_s * 1000);
    if (ret < 0) {
        err("%s: poll on the completion channel: %s", name, strerror(errno));
        return -1;
    }
    if (ret == 0) {
        err("%s: no completion event within %u s", name, p->opt->timeout_s);
        return -1;
    }
    if (ibv_get_cq_event(p->channel, &cq, &cq_context)) {
        err("%s: ibv_get_cq_event: %s", name, strerror(errno));
        return -1;
    }
    owner = cq_context;
    if (owner->cq != cq) {
        err("%s: the event's cq_context is not the CQ's", name);
        return -1;
    }
    p->events++;
    owner->event_seen = true;
    ibv_ack_cq_events(cq, 1);
    ret = ibv_req_notify_cq(cq, 0);
    if (ret) {
        err("%s: ibv_req_notify_cq: %s", name, strerror(ret));
        return -1;
    }
    return 0;
}

/*
 * The next completion of `e`: a successful `opcode`. A receive may also
 * complete while a send's completion is awaited (in any order, as in
 * rdma-core's ibv_rc_pingpong): it is counted and taken by the next wait
 * for a receive.
 *
 * With events, the CQ is only polled after an event said it got a
 * completion: the CQ is re-armed right after each event, so a completion
 * that arrives while it is found empty always raises a new one.
 */
static int wait_wc(struct end *e, enum ibv_wc_opcode opcode)
{
    struct proc *p = e->proc;
    double deadline = now_us() + p->opt->timeout_s * 1e6;
    struct ibv_wc wc;
    int n;

    if (opcode == IBV_WC_RECV && e->early_recvs) {
        e->early_recvs--;
        return 0;
    }
again:

    for (;;) {
        if (p->channel && !e->event_seen) {
            if (wait_event(p, e->name)) {
                return -1;
            }
            continue;
        }
        n = ibv_poll_cq(e->cq, 1, &wc);
        if (n < 0) {
            err("%s: ibv_poll_cq failed (%d)", e->name, n);
            return -1;
        }
        if (n == 1) {
            break;
        }
        if (p->channel) {
            /* Empty: what the last event announced is consumed. */
            e->event_seen = false;
        } else if (now_us() > deadline) {
            err("%s: no completion within %u s", e->name, p->opt->timeout_s);
            return -1;
        }
    }
    p->page_requests += wc.vendor_err;
    if (wc.status != IBV_WC_SUCCESS) {
        err("%s: completion of wr_id %" PRIu64 ": %s (status %d)", e->name,
            wc.wr_id, ibv_wc_status_str(wc.status), wc.status);
        return -1;
    }
    if (wc.qp_num != e->qp->qp_num) {
        err("%s: completion for QP %u, expected %u", e->name, wc.qp_num,
            e->qp->qp_num);
        return -1;
    }
    if (wc.opcode == IBV_WC_RECV && wc.byte_len != p->opt->size) {
        err("%s: received %u bytes, expected %zu", e->name, wc.byte_len,
            p->opt->size);
        return -1;
    }
    if (wc.opcode == IBV_WC_RECV && opcode == IBV_WC_SEND &&
        !e->early_recvs) {
        e->early_recvs++;
        goto again;
    }
    if (wc.opcode != opcode) {
        err("%s: completion opcode %d, expected %d", e->name, wc.opcode,
            opcode);
        return -1;
    }
    return 0;
}

/* The client's half of iteration i: send 2i, receive and check 2i+1. */
static int client_step(struct end *e, unsigned int i)
{
    if (post_send(e, 2 * i) || wait_wc(e, IBV_WC_SEND)) {
        return -1;
    }
    if (wait_wc(e, IBV_WC_RECV) || check(e, 2 * i + 1)) {
        return -1;
    }
    return post_recv(e);
}

/* The server's half: receive and check 2i, answer with 2i+1. */
static int server_step(struct end *e, unsigned int i)
{
    if (wait_wc(e, IBV_WC_RECV) || check(e, 2 * i) || post_recv(e)) {
        return -1;
    }
    return post_send(e, 2 * i + 1) || wait_wc(e, IBV_WC_SEND) ? -1 : 0;
}

static void report(const struct options *opt, const char *mode, double us,
                   uint64_t page_requests, uint64_t events)
{
    printf("ok: %u iterations of %zu bytes, %s%s%s%s%s: %.1f us per round "
           "trip, %" PRIu64 " page requests, %" PRIu64 " completion events\n",
           opt->iters, opt->size, mode,
           opt->implicit ? ", implicit ODP MR" : opt->odp ? ", ODP MRs" : "",
           opt->cold ? ", cold" : "", opt->prefetch ? ", prefetch" : "",
           opt->events ? ", events" : "", us / opt->iters, page_requests,
           events);
}

static int run_one_process(const struct options *opt)
{
    struct proc p;
    struct end a, b;
    int rc = -1;
    double t0;

    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    if (proc_open(&p, opt, "both")) {
        goto out;
    }
    if (end_open(&a, &p, "client") || end_open(&b, &p, "server")) {
        goto out;
    }
    {
        struct dest da = { .lid = p.lid, .qpn = a.qp->qp_num, .psn = 0x1234,
                           .gid = p.gid };
        struct dest db = { .lid = p.lid, .qpn = b.qp->qp_num, .psn = 0xabcdef,
                           .gid = p.gid };

        if (end_connect(&a, da.psn, &db) || end_connect(&b, db.psn, &da)) {
            goto out;
        }
    }
    t0 = now_us();
    for (unsigned int i = 0; i < opt->iters; i++) {
        /* client_step/server_step interleaved by hand: one thread. */
        if (post_send(&a, 2 * i) || wait_wc(&a, IBV_WC_SEND)) {
            goto out;
        }
        if (server_step(&b, i)) {
            goto out;
        }
        if (wait_wc(&a, IBV_WC_RECV) || check(&a, 2 * i + 1) ||
            post_recv(&a)) {
            goto out;
        }
    }
    report(opt, "1 process", now_us() - t0, p.page_requests, p.events);
    rc = 0;
out:
    /* Teardown errors fail the run too. */
    if (end_close(&a) | end_close(&b) | proc_close(&p)) {
        rc = -1;
    }
    return rc;
}

struct peer_info {
    struct dest dest;
    uint32_t ready;
};

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len) {
        ssize_t n = write(fd, p, len);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            err("pipe write: %s", n < 0 ? strerror(errno) : "closed");
            return -1;
        }
        p += n;
        len -= n;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
    char *p = buf;

    while (len) {
        ssize_t n = read(fd, p, len);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            err("pipe read: %s", n < 0 ? strerror(errno) : "the peer exited");
            return -1;
        }
        p += n;
        len -= n;
    }
    return 0;
}

/*
 * One side of the two-process run. The device is opened after fork(): a
 * verbs context belongs to the process that opened it.
 */
static int run_side(const struct options *opt, bool client, int rfd, int wfd,
                    uint64_t *page_requests, uint64_t *events, double *us)
{
    struct proc p;
    struct end e;
    struct peer_info me = { 0 }, peer;
    int rc = -1;
    double t0;

    memset(&e, 0, sizeof(e));
    if (proc_open(&p, opt, client ? "client" : "server") ||
        end_open(&e, &p, client ? "client" : "server")) {
        goto out;
    }
    me.dest.qpn = e.qp->qp_num;
    me.dest.lid = p.lid;
    me.dest.psn = client ? 0x10203 : 0x40506;
    me.dest.gid = p.gid;
    if (write_all(wfd, &me, sizeof(me)) || read_all(rfd, &peer, sizeof(peer))) {
        goto out;
    }
    if (end_connect(&e, me.dest.psn, &peer.dest)) {
        goto out;
    }
    /* Neither side sends before the other's QP is ready to receive. */
    me.ready = 1;
    if (write_all(wfd, &me, sizeof(me)) || read_all(rfd, &peer, sizeof(peer))) {
        goto out;
    }
    if (!peer.ready) {
        err("the peer did not report ready");
        goto out;
    }
    t0 = now_us();
    for (unsigned int i = 0; i < opt->iters; i++) {
        if (client ? client_step(&e, i) : server_step(&e, i)) {
            goto out;
        }
    }
    *us = now_us() - t0;
    rc = 0;
out:
    if (end_close(&e) | proc_close(&p)) {
        rc = -1;
    }
    *page_requests = p.page_requests;
    *events = p.events;
    return rc;
}

static int run_two_processes(const struct options *opt)
{
    int to_child[2], to_parent[2], result[2];
    uint64_t preq, ev, child_counts[2];
    double us;
    int status, rc;
    pid_t pid;

    if (pipe(to_child) || pipe(to_parent) || pipe(result)) {
        err("pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        err("fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        who = PROG " (client)";
        close(to_child[1]);
        close(to_parent[0]);
        close(result[0]);
        rc = run_side(opt, true, to_child[0], to_parent[1], &preq, &ev, &us);
        child_counts[0] = preq;
        child_counts[1] = ev;
        if (rc == 0 && write_all(result[1], child_counts,
                                 sizeof(child_counts))) {
            rc = -1;
        }
        fflush(NULL);
        _exit(rc ? 1 : 0);
    }
    who = PROG " (server)";
    close(to_child[0]);
    close(to_parent[1]);
    close(result[1]);
    rc = run_side(opt, false, to_parent[0], to_child[1], &preq, &ev, &us);
    /* Unblock a client still waiting on us, then reap it. */
    close(to_child[1]);
    close(to_parent[0]);
    if (rc) {
        kill(pid, SIGKILL);
    }
    if (waitpid(pid, &status, 0) != pid) {
        err("waitpid: %s", strerror(errno));
        return -1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status)) {
        err("the client failed (wait status 0x%x)", status);
        return -1;
    }
    if (rc || read_all(result[0], child_counts, sizeof(child_counts))) {
        return -1;
    }
    close(result[0]);
    report(opt, "2 processes", us, preq + child_counts[0],
           ev + child_counts[1]);
    return 0;
}

/*
 * The TCP exchange of rdma-core's ibv_rc_pingpong (and of its pingpong.c):
 * each side sends "LID:QPN:PSN:GID" as "%04x:%06x:%06x:%s", NUL included,
 * the GID as 32 hex digits, one group of 8 per 32-bit word of its raw bytes
 * in network order. The client writes its address, reads the server's and
 * writes "done"; the server reads the client's address, connects its QP,
 * answers with its own and waits for the "done".
 */
#define WIRE_MSG_SIZE sizeof("0000:000000:000000:00000000000000000000000000000000")
#define WIRE_DONE "done"

static void dest_to_wire(const struct dest *d, char msg[WIRE_MSG_SIZE])
{
    char gid[33];

    for (int i = 0; i < 4; i++) {
        const uint8_t *w = d->gid.raw + 4 * i;
        uint32_t v = (uint32_t)w[0] << 24 | (uint32_t)w[1] << 16 |
                     (uint32_t)w[2] << 8 | w[3];

        snprintf(gid + 8 * i, sizeof(gid) - 8 * i, "%08x", v);
    }
    snprintf(msg, WIRE_MSG_SIZE, "%04x:%06x:%06x:%s", d->lid, d->qpn, d->psn,
             gid);
}

static int dest_from_wire(const char *msg, struct dest *d)
{
    unsigned int lid, qpn, psn;
    char gid[33];

    if (memchr(msg, '\0', WIRE_MSG_SIZE) == NULL ||
        sscanf(msg, "%x:%x:%x:%32s", &lid, &qpn, &psn, gid) != 4 ||
        strlen(gid) != 32 || lid > 0xffff || qpn > 0xffffff ||
        psn > 0xffffff) {
        err("malformed peer address '%.*s'", (int)WIRE_MSG_SIZE, msg);
        return -1;
    }
    memset(d, 0, sizeof(*d));
    d->lid = (uint16_t)lid;
    d->qpn = qpn;
    d->psn = psn;
    for (int i = 0; i < 4; i++) {
        char word[9];
        unsigned int v;

        memcpy(word, gid + 8 * i, 8);
        word[8] = '\0';
        if (sscanf(word, "%x", &v) != 1) {
            err("malformed peer GID '%s'", gid);
            return -1;
        }
        d->gid.raw[4 * i] = (uint8_t)(v >> 24);
        d->gid.raw[4 * i + 1] = (uint8_t)(v >> 16);
        d->gid.raw[4 * i + 2] = (uint8_t)(v >> 8);
        d->gid.raw[4 * i + 3] = (uint8_t)v;
    }
    return 0;
}

static void print_dest(const char *what, const struct dest *d)
{
    char gid[INET6_ADDRSTRLEN];

    if (!inet_ntop(AF_INET6, d->gid.raw, gid, sizeof(gid))) {
        snprintf(gid, sizeof(gid), "?");
    }
    printf("  %s LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", what, d->lid,
           d->qpn, d->psn, gid);
}

/* Reads exactly `len` bytes, or fails (the peer closed, or `timeout_s`). */
static int sock_read(int fd, void *buf, size_t len, unsigned int timeout_s)
{
    char *p = buf;

    while (len) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        ssize_t n;
        int r = poll(&pfd, 1, (int)timeout_s * 1000);

        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            err("TCP read: %s", r < 0 ? strerror(errno) : "timed out");
            return -1;
        }
        n = read(fd, p, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            err("TCP read: %s", n < 0 ? strerror(errno) : "the peer closed");
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The client's TCP connection to `host`:`port`, or -1. */
static int tcp_connect(const char *host, unsigned int port)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM };
    struct addrinfo *res, *t;
    char service[16];
    int fd = -1, r;

    snprintf(service, sizeof(service), "%u", port);
    r = getaddrinfo(host, service, &hints, &res);
    if (r) {
        err("%s:%u: %s", host, port, gai_strerror(r));
        return -1;
    }
    for (t = res; t; t = t->ai_next) {
        fd = socket(t->ai_family, t->ai_socktype, t->ai_protocol);
        if (fd >= 0) {
            if (!connect(fd, t->ai_addr, t->ai_addrlen)) {
                break;
            }
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        err("cannot connect to %s:%u", host, port);
    }
    return fd;
}

/* The server's accepted connection on `port`, or -1. */
static int tcp_accept(unsigned int port, unsigned int timeout_s)
{
    struct addrinfo hints = { .ai_flags = AI_PASSIVE,
                              .ai_family = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM };
    struct addrinfo *res, *t;
    struct pollfd pfd;
    char service[16];
    int fd = -1, conn, r, one = 1;

    snprintf(service, sizeof(service), "%u", port);
    r = getaddrinfo(NULL, service, &hints, &res);
    if (r) {
        err("port %u: %s", port, gai_strerror(r));
        return -1;
    }
    for (t = res; t; t = t->ai_next) {
        fd = socket(t->ai_family, t->ai_socktype, t->ai_protocol);
        if (fd >= 0) {
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
            if (!bind(fd, t->ai_addr, t->ai_addrlen) && !listen(fd, 1)) {
                break;
            }
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        err("cannot listen on port %u", port);
        return -1;
    }
    pfd.fd = fd;
    pfd.events = POLLIN;
    do {
        r = poll(&pfd, 1, (int)timeout_s * 1000);
    } while (r < 0 && errno == EINTR);
    conn = r > 0 ? accept(fd, NULL, NULL) : -1;
    if (conn < 0) {
        err("no client on port %u: %s", port,
            r == 0 ? "timed out" : strerror(errno));
    }
    close(fd);
    return conn;
}

/*
 * One side of a run between two machines, its addresses exchanged over TCP
 * as rdma-core's programs do. The server connects its QP before it answers,
 * the client after the exchange: the client sends first.
 */
static int run_network(const struct options *opt)
{
    bool client = !opt->server;
    struct proc p;
    struct end e;
    struct dest me, peer;
    char msg[WIRE_MSG_SIZE], done[sizeof(WIRE_DONE)];
    int fd = -1, rc = -1;
    double t0, us;

    who = client ? PROG " (client)" : PROG " (server)";
    /* A peer that goes away fails a write, not the process. */
    signal(SIGPIPE, SIG_IGN);
    memset(&e, 0, sizeof(e));
    if (proc_open(&p, opt, client ? "client" : "server") ||
        end_open(&e, &p, client ? "client" : "server")) {
        goto out;
    }
    memset(&me, 0, sizeof(me));
    me.lid = p.lid;
    me.qpn = e.qp->qp_num;
    me.psn = (uint32_t)lrand48() & 0xffffff;
    me.gid = p.gid;
    print_dest("local address: ", &me);
    dest_to_wire(&me, msg);
    if (client) {
        fd = tcp_connect(opt->host, opt->tcp_port);
        if (fd < 0 || write_all(fd, msg, sizeof(msg)) ||
            sock_read(fd, msg, sizeof(msg), opt->timeout_s) ||
            write_all(fd, WIRE_DONE, sizeof(WIRE_DONE)) ||
            dest_from_wire(msg, &peer)) {
            goto out;
        }
        print_dest("remote address:", &peer);
        if (end_connect(&e, me.psn, &peer)) {
            goto out;
        }
    } else {
        char mine[WIRE_MSG_SIZE];

        memcpy(mine, msg, sizeof(mine));
        fd = tcp_accept(opt->tcp_port, opt->timeout_s);
        if (fd < 0 || sock_read(fd, msg, sizeof(msg), opt->timeout_s) ||
            dest_from_wire(msg, &peer)) {
            goto out;
        }
        print_dest("remote address:", &peer);
        if (end_connect(&e, me.psn, &peer) ||
            write_all(fd, mine, sizeof(mine)) ||
            sock_read(fd, done, sizeof(done), opt->timeout_s)) {
            goto out;
        }
    }
    t0 = now_us();
    for (unsigned int i = 0; i < opt->iters; i++) {
        if (client ? client_step(&e, i) : server_step(&e, i)) {
            goto out;
        }
    }
    us = now_us() - t0;
    printf("%llu bytes in %.2f seconds = %.2f Mbit/sec\n",
           (unsigned long long)opt->size * opt->iters * 2, us / 1e6,
           (double)opt->size * opt->iters * 2 * 8 / us);
    printf("%u iters in %.2f seconds = %.2f usec/iter\n", opt->iters,
           us / 1e6, us / opt->iters);
    report(opt, client ? "TCP client" : "TCP server", us, p.page_requests,
           p.events);
    rc = 0;
out:
    if (fd >= 0) {
        close(fd);
    }
    if (end_close(&e) | proc_close(&p)) {
        rc = -1;
    }
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " [options]                 both QPs here (or --fork)\n"
            "       " PROG " [options] --server        wait for a client over "
            "TCP\n"
            "       " PROG " [options] HOST            connect to the server on "
            "HOST\n"
            "  -d, --ib-dev=DEV     use device DEV (default: the first)\n"
            "  -s, --size=BYTES     message size (default 4096)\n"
            "  -n, --iters=N        round trips (default 100)\n"
            "  -o, --odp            on-demand paging MRs (IBV_ACCESS_ON_DEMAND)\n"
            "  -i, --implicit       one implicit ODP MR for the whole address "
            "space\n"
            "  -p, --prefetch       ibv_advise_mr(PREFETCH_WRITE, FLUSH) each "
            "receive buffer\n"
            "  -c, --cold           madvise(MADV_DONTNEED) each receive buffer "
            "before posting it\n"
            "  -e, --events         wait on a completion channel instead of "
            "busy polling\n"
            "  -f, --fork           two processes (fork), one QP each\n"
            "  -t, --timeout=SEC    fail when a completion takes longer "
            "(default 60)\n"
            "  -g, --gid-idx=N      source GID index; send the GID and connect "
            "with a global\n"
            "                       route to the peer's (RoCE: -g 1, the IPv4 "
            "address)\n"
            "  -m, --mtu=BYTES      path MTU, 256..4096 (default 1024)\n"
            "  -S, --server         TCP server, rdma-core's exchange "
            "(ibv_rc_pingpong)\n"
            "      --port=PORT      TCP port (default 18515)\n"
            "      --check          check each message's bytes across TCP too "
            "(both sides\n"
            "                       this program; rdma-core's echoes its "
            "buffer)\n"
            "Across TCP both sides need the same -s and -n (rdma-core's "
            "ibv_rc_pingpong\n"
            "defaults to -n 1000) and -m.\n"
            "  -h, --help           this text\n");
}

static int parse_number(const char *name, const char *s, unsigned long max,
                        unsigned long *out)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 0);
    if (errno || end == s || *end || s[0] == '-' || v == 0 || v > max) {
        err("--%s: '%s' is not a number in 1..%lu", name, s, max);
        return -1;
    }
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "ib-dev", required_argument, NULL, 'd' },
        { "size", required_argument, NULL, 's' },
        { "iters", required_argument, NULL, 'n' },
        { "odp", no_argument, NULL, 'o' },
        { "implicit", no_argument, NULL, 'i' },
        { "prefetch", no_argument, NULL, 'p' },
        { "cold", no_argument, NULL, 'c' },
        { "events", no_argument, NULL, 'e' },
        { "fork", no_argument, NULL, 'f' },
        { "timeout", required_argument, NULL, 't' },
        { "gid-idx", required_argument, NULL, 'g' },
        { "mtu", required_argument, NULL, 'm' },
        { "server", no_argument, NULL, 'S' },
        { "port", required_argument, NULL, 'P' },
        { "check", no_argument, NULL, 'C' },
        { "help", no_argument, NULL, 'h' },
        { 0 },
    };
    struct options opt = {
        .size = 4096,
        .iters = 100,
        .timeout_s = 60,
        .gid_index = -1,
        .mtu = IBV_MTU_1024,
        .tcp_port = 18515,
    };
    bool check = false;
    unsigned long v;
    int c;

    while ((c = getopt_long(argc, argv, "d:s:n:oipceft:g:m:Sh", longopts,
                            NULL)) != -1) {
        switch (c) {
        case 'd':
            opt.device = optarg;
            break;
        case 's':
            if (parse_number("size", optarg, 1ul << 30, &v)) {
                return 2;
            }
            opt.size = v;
            break;
        case 'n':
            if (parse_number("iters", optarg, 1ul << 30, &v)) {
                return 2;
            }
            opt.iters = (unsigned int)v;
            break;
        case 'o':
            opt.odp = true;
            break;
        case 'i':
            opt.odp = true;
            opt.implicit = true;
            break;
        case 'p':
            opt.prefetch = true;
            break;
        case 'c':
            opt.cold = true;
            break;
        case 'e':
            opt.events = true;
            break;
        case 'f':
            opt.fork = true;
            break;
        case 't':
            if (parse_number("timeout", optarg, 3600, &v)) {
                return 2;
            }
            opt.timeout_s = (unsigned int)v;
            break;
        case 'g':
            errno = 0;
            v = strtoul(optarg, NULL, 0);
            if (errno || optarg[0] < '0' || optarg[0] > '9' || v > 255) {
                err("--gid-idx: '%s' is not an index in 0..255", optarg);
                return 2;
            }
            opt.gid_index = (int)v;
            break;
        case 'm':
            if (parse_number("mtu", optarg, 4096, &v)) {
                return 2;
            }
            switch (v) {
            case 256: opt.mtu = IBV_MTU_256; break;
            case 512: opt.mtu = IBV_MTU_512; break;
            case 1024: opt.mtu = IBV_MTU_1024; break;
            case 2048: opt.mtu = IBV_MTU_2048; break;
            case 4096: opt.mtu = IBV_MTU_4096; break;
            default:
                err("--mtu: %lu is not 256, 512, 1024, 2048 or 4096", v);
                return 2;
            }
            break;
        case 'S':
            opt.server = true;
            break;
        case 'P':
            if (parse_number("port", optarg, 65535, &v)) {
                return 2;
            }
            opt.tcp_port = (unsigned int)v;
            break;
        case 'C':
            check = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind + 1 == argc) {
        opt.host = argv[optind];
    } else if (optind != argc) {
        err("unexpected argument '%s'", argv[optind + 1]);
        usage(stderr);
        return 2;
    }
    if ((opt.host || opt.server) && opt.fork) {
        err("--fork is for one machine; --server and HOST are for two");
        return 2;
    }
    if (opt.host && opt.server) {
        err("--server takes no HOST");
        return 2;
    }
    /* Across TCP the peer may be rdma-core's program, which echoes. */
    opt.check = !(opt.host || opt.server) || check;
    if (opt.prefetch && !opt.odp) {
        err("--prefetch needs --odp or --implicit (ibv_advise_mr works on "
            "ODP MRs)");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    srand48((long)getpid() ^ (long)time(NULL));
    if (opt.host || opt.server) {
        return run_network(&opt) ? 1 : 0;
    }
    if (opt.fork ? run_two_processes(&opt) : run_one_process(&opt)) {
        return 1;
    }
    return 0;
}
