/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The verbs API from C, the way libibverbs programs use it: queries, the
 * return and errno conventions of bad calls, and every RC operation over
 * loopback (RDMA WRITE with two SGEs, RDMA READ, WRITE and SEND with
 * immediate data, both atomics), then a bad rkey: the failing QP completes
 * with IBV_WC_REM_ACCESS_ERR and flushes what follows; shared receive
 * queues and asynchronous events.
 *
 * Written against rdma-core's <infiniband/verbs.h> only. Prints TAP
 * ("ok N name" / "not ok N name"), one line per check group, with "# "
 * lines explaining failures; exits 0 only if all passed.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define BUF_SIZE 8192

/* libibverbs exports it; rdma-core declares it in <infiniband/driver.h>. */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
                        size_t size);

static bool group_failed;

static void fail(int line, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void fail(int line, const char *fmt, ...)
{
    va_list ap;

    printf("# line %d: ", line);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    group_failed = true;
}

/* Checks `cond`; on failure reports it and returns from the group. */
#define CHECK(cond, fmt, ...)                                                \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fail(__LINE__, "%s: " fmt, #cond, ##__VA_ARGS__);               \
            return;                                                          \
        }                                                                    \
    } while (0)

/* Everything the groups share: two QPs of one context, connected. */
struct fixture {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq_a, *cq_b;
    struct ibv_qp *qp_a, *qp_b;
    unsigned char *buf_a, *buf_b;
    struct ibv_mr *mr_a, *mr_b;
    __be64 guid;
    uint16_t lid;
    int odp;    /* the device has RC on-demand paging (test_device) */
};

static struct fixture fx;

static int connect_qp(struct ibv_qp *qp, uint32_t dest, uint16_t dlid)
{
    struct ibv_qp_attr a;
    int ret;

    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                        IBV_ACCESS_REMOTE_ATOMIC;
    ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                        IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (ret) {
        return ret;
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = dest;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.dlid = dlid;
    a.ah_attr.port_num = 1;
    ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                        IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (ret) {
        return ret;
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
                         IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                         IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Polls `cq` for one completion, for up to 60 s; 1 if one came. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
    time_t end = time(NULL) + 60;
    int n;

    do {
        n = ibv_poll_cq(cq, 1, wc);
        if (n) {
            return n;
        }
    } while (time(NULL) < end);
    return 0;
}

static struct ibv_qp *make_qp(struct ibv_cq *cq, uint32_t max_sge)
{
    struct ibv_qp_init_attr init = {
        .send_cq = cq,
        .recv_cq = cq,
        .cap = {
            .max_send_wr = 8,
            .max_recv_wr = 8,
            .max_send_sge = max_sge,
            .max_recv_sge = max_sge,
        },
        .qp_type = IBV_QPT_RC,
    };

    return ibv_create_qp(fx.pd, &init);
}

static void test_device(void)
{
    struct ibv_device **list;
    struct ibv_device_attr attr;
    struct ibv_device_attr_ex ex;
    struct ibv_query_device_ex_input in = { .comp_mask = 1 };
    struct ibv_port_attr port;
    union ibv_gid gid;
    int n = -1, gids;

    list = ibv_get_device_list(&n);
    CHECK(list && n >= 1, "%d devices", n);
    CHECK(!list[n], "the list is not NULL-terminated");
    CHECK(!strncmp(ibv_get_device_name(list[0]), "pfnic", 5), "name %s",
          ibv_get_device_name(list[0]));
    fx.guid = ibv_get_device_guid(list[0]);
    CHECK(fx.guid != 0, "GUID 0 (%s)", strerror(errno));
    fx.ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    CHECK(fx.ctx, "ibv_open_device: %s", strerror(errno));
    CHECK(fx.ctx->device && fx.ctx->num_comp_vectors >= 1,
          "context fields");

    CHECK(!ibv_query_device(fx.ctx, &attr), "ibv_query_device");
    CHECK(attr.node_guid == fx.guid, "node GUID differs from the device's");
    CHECK(attr.max_qp > 0 && attr.max_qp_wr > 0 && attr.max_sge >= 2 &&
          attr.max_cqe > 0 && attr.max_mr > 0 && attr.phys_port_cnt == 1,
          "limits: qp %d wr %d sge %d cqe %d mr %d ports %d", attr.max_qp,
          attr.max_qp_wr, attr.max_sge, attr.max_cqe, attr.max_mr,
          attr.phys_port_cnt);
    CHECK(attr.atomic_cap == IBV_ATOMIC_HCA, "atomic_cap %d",
          attr.atomic_cap);
    CHECK(attr.fw_ver[0] != '\0', "no firmware version");

    CHECK(!ibv_query_device_ex(fx.ctx, NULL, &ex), "ibv_query_device_ex");
    CHECK(ex.orig_attr.node_guid == fx.guid, "ex: node GUID");
    /* A device without ODP (pfnic's pinned memory mode) says so in both. */
    fx.odp = !!(ex.odp_caps.general_caps & IBV_ODP_SUPPORT);
    CHECK(fx.odp == !!(ex.odp_caps.per_transport_caps.rc_odp_caps &
                       IBV_ODP_SUPPORT_SEND),
          "ODP general caps %#llx but RC caps %#x",
          (unsigned long long)ex.odp_caps.general_caps,
          ex.odp_caps.per_transport_caps.rc_odp_caps);
    CHECK(ibv_query_device_ex(fx.ctx, &in, &ex) == EINVAL,
          "comp_mask 1 is not EINVAL");

    /* The loopback port of a device without a wire (a RoCE port has no LID). */
    CHECK(!ibv_query_port(fx.ctx, 1, &port), "ibv_query_port");
    CHECK(port.state == IBV_PORT_ACTIVE && port.lid != 0 &&
          port.link_layer == IBV_LINK_LAYER_INFINIBAND &&
          port.active_mtu >= IBV_MTU_1024 && port.gid_tbl_len >= 1,
          "port: state %d lid %u link %u mtu %d gids %d", port.state,
          port.lid, port.link_layer, port.active_mtu, port.gid_tbl_len);
    fx.lid = port.lid;
    gids = port.gid_tbl_len;
    CHECK(ibv_query_port(fx.ctx, 2, &port) == EINVAL, "port 2 is not EINVAL");
    /*
     * The exported ibv_query_port (the macro's fallback, and what programs
     * built against old headers call) writes only the fields those headers
     * had: nothing from port_cap_flags2 on.
     */
    memset(&port, 0xa5, sizeof(port));
    CHECK(!(ibv_query_port)(fx.ctx, 1, (struct _compat_ibv_port_attr *)&port),
          "the exported ibv_query_port");
    CHECK(port.lid == fx.lid && port.state == IBV_PORT_ACTIVE,
          "exported: lid %u state %d", port.lid, port.state);
    for (size_t i = offsetof(struct ibv_port_attr, port_cap_flags2);
         i < sizeof(port); i++)
        CHECK(((unsigned char *)&port)[i] == 0xa5,
              "the exported ibv_query_port wrote byte %zu", i);

    CHECK(!ibv_query_gid(fx.ctx, 1, 0, &gid), "ibv_query_gid");
    CHECK(gid.global.interface_id == fx.guid, "GID 0 is not the node GUID");
    errno = 0;
    CHECK(ibv_query_gid(fx.ctx, 1, gids, &gid) == -1 && errno == EINVAL,
          "GID %d (beyond the table): errno %d", gids, errno);
}

static void test_bad_calls(void)
{
    struct ibv_comp_channel *ch;
    struct ibv_qp_init_attr init = { .qp_type = IBV_QPT_UC };
    struct ibv_qp_attr attr;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    struct ibv_pd *pd;

    CHECK(fx.ctx, "no context");
    pd = ibv_alloc_pd(fx.ctx);
    CHECK(pd, "ibv_alloc_pd: %s", strerror(errno));
    errno = 0;
    CHECK(!ibv_reg_mr(pd, fx.buf_a, 0, IBV_ACCESS_LOCAL_WRITE) &&
          errno == EINVAL, "zero length: errno %d", errno);
    errno = 0;
    CHECK(!ibv_reg_mr(pd, fx.buf_a, BUF_SIZE, IBV_ACCESS_REMOTE_WRITE) &&
          errno == EINVAL, "REMOTE_WRITE without LOCAL_WRITE: errno %d",
          errno);
    mr = ibv_reg_mr(pd, fx.buf_a, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
    CHECK(mr && mr->lkey == mr->rkey && mr->pd == pd &&
          mr->addr == fx.buf_a && mr->length == BUF_SIZE, "ibv_reg_mr");
    CHECK(ibv_dealloc_pd(pd) == EBUSY, "dealloc of a PD with an MR");
    CHECK(!ibv_dereg_mr(mr), "ibv_dereg_mr");

    ch = ibv_create_comp_channel(fx.ctx);
    CHECK(ch && ch->fd >= 0, "ibv_create_comp_channel: %s", strerror(errno));
    errno = 0;
    CHECK(!ibv_create_cq(fx.ctx, 0, NULL, ch, 0) && errno == EINVAL,
          "0 CQEs: errno %d", errno);
    errno = 0;
    CHECK(!ibv_create_cq(fx.ctx, 4, NULL, ch, fx.ctx->num_comp_vectors) &&
          errno == EINVAL, "bad comp_vector: errno %d", errno);
    cq = ibv_create_cq(fx.ctx, 4, NULL, ch, 0);
    CHECK(cq && cq->cqe >= 4 && cq->channel == ch, "ibv_create_cq");
    CHECK(ibv_destroy_comp_channel(ch) == EBUSY, "channel with a CQ");

    init.send_cq = cq;
    init.recv_cq = cq;
    errno = 0;
    CHECK(!ibv_create_qp(pd, &init) && errno == EOPNOTSUPP,
          "UC QP: errno %d", errno);
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = init.cap.max_recv_wr = 1;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    qp = ibv_create_qp(pd, &init);
    CHECK(qp && qp->state == IBV_QPS_RESET && qp->qp_num > 1,
          "ibv_create_qp: %s", strerror(errno));
    CHECK(ibv_destroy_cq(cq) == EBUSY, "CQ used by a QP");
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RTR;
    CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE) == EINVAL,
          "RESET to RTR is not EINVAL");
    CHECK(!ibv_destroy_qp(qp), "ibv_destroy_qp");
    CHECK(!ibv_destroy_cq(cq), "ibv_destroy_cq");
    CHECK(!ibv_destroy_comp_channel(ch), "ibv_destroy_comp_channel");
    CHECK(!ibv_dealloc_pd(pd), "ibv_dealloc_pd");
    CHECK(!strcmp(ibv_wc_status_str(IBV_WC_SUCCESS), "success") &&
          !strcmp(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR),
                  "remote access error") &&
          !strcmp(ibv_wc_status_str((enum ibv_wc_status)999), "unknown"),
          "ibv_wc_status_str");
}

static void test_setup(void)
{
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    struct ibv_qp_init_attr init;
    struct ibv_qp_attr attr;

    CHECK(fx.ctx, "no context");
    fx.pd = ibv_alloc_pd(fx.ctx);
    CHECK(fx.pd, "ibv_alloc_pd: %s", strerror(errno));
    /* One on-demand MR where the device has ODP, so both kinds meet. */
    fx.mr_a = ibv_reg_mr(fx.pd, fx.buf_a, BUF_SIZE,
                         access | (fx.odp ? IBV_ACCESS_ON_DEMAND : 0));
    fx.mr_b = ibv_reg_mr(fx.pd, fx.buf_b, BUF_SIZE, access);
    CHECK(fx.mr_a && fx.mr_b, "ibv_reg_mr: %s", strerror(errno));
    fx.cq_a = ibv_create_cq(fx.ctx, 16, NULL, NULL, 0);
    fx.cq_b = ibv_create_cq(fx.ctx, 16, NULL, NULL, 0);
    CHECK(fx.cq_a && fx.cq_b, "ibv_create_cq: %s", strerror(errno));
    fx.qp_a = make_qp(fx.cq_a, 2);
    fx.qp_b = make_qp(fx.cq_b, 2);
    CHECK(fx.qp_a && fx.qp_b, "ibv_create_qp: %s", strerror(errno));
    CHECK(!connect_qp(fx.qp_a, fx.qp_b->qp_num, fx.lid) &&
          !connect_qp(fx.qp_b, fx.qp_a->qp_num, fx.lid), "connect");
    CHECK(!ibv_query_qp(fx.qp_a, &attr, IBV_QP_STATE | IBV_QP_CAP, &init),
          "ibv_query_qp");
    CHECK(attr.qp_state == IBV_QPS_RTS && fx.qp_a->state == IBV_QPS_RTS &&
          attr.dest_qp_num == fx.qp_b->qp_num && init.cap.max_send_sge >= 2 &&
          init.send_cq == fx.cq_a && init.qp_type == IBV_QPT_RC,
          "query: state %d dest %u sge %u", attr.qp_state, attr.dest_qp_num,
          init.cap.max_send_sge);
}

/*
 * The rest of libibverbs' exported API and its ABI: the verbs_context before
 * the context, the helpers, P_Keys, fork support, sysfs, and registration
 * at an IOVA.
 */
static void test_library_abi(void)
{
    struct verbs_context *vctx;
    struct ibv_mr *mr;
    __be16 pkey = 0;
    char buf[64], want[32], node[256], sysdir[256];
    struct stat st;
    int n;

    CHECK(fx.pd, "no PD");
    vctx = verbs_get_ctx(fx.ctx);
    CHECK(vctx && &vctx->context == fx.ctx,
          "no verbs_context before the context");
    CHECK(fx.ctx->ops.post_send && fx.ctx->ops.post_recv &&
          fx.ctx->ops.poll_cq && fx.ctx->ops.req_notify_cq,
          "a data-path op is missing");

    CHECK(!ibv_query_pkey(fx.ctx, 1, 0, &pkey) && pkey == htons(0xffff),
          "P_Key 0: %#x", ntohs(pkey));
    /* Past the table of one: libibverbs reads the entry from sysfs, which
     * has none (ENOENT). */
    errno = 0;
    CHECK(ibv_query_pkey(fx.ctx, 1, 1, &pkey) == -1 && errno == ENOENT,
          "P_Key 1: errno %d", errno);

    CHECK(!strcmp(ibv_node_type_str(fx.ctx->device->node_type),
                  "InfiniBand channel adapter"),
          "node type '%s'", ibv_node_type_str(fx.ctx->device->node_type));
    CHECK(!strcmp(ibv_port_state_str(IBV_PORT_ACTIVE), "active") &&
          !strcmp(ibv_port_state_str((enum ibv_port_state)99), "unknown"),
          "port state strings");
    /* Fork support is not checked: libibverbs asks the kernel each time by
     * netlink, and bookworm's (44) got a different answer from one call to
     * the next on this kernel: not pfnic's to check. */

    /* The GID table: every valid GID, GID 0 first; too small an array fails. */
    {
        struct ibv_gid_entry tbl[8], one;
        union ibv_gid gid0;
        ssize_t got = ibv_query_gid_table(fx.ctx, tbl, 8, 0);

        CHECK(got >= 1 && !ibv_query_gid(fx.ctx, 1, 0, &gid0) &&
              !memcmp(&tbl[0].gid, &gid0, sizeof(gid0)) &&
              tbl[0].gid_index == 0 && tbl[0].port_num == 1,
              "ibv_query_gid_table: %zd", got);
        CHECK(!ibv_query_gid_ex(fx.ctx, 1, 0, &one, 0) &&
              one.gid_type == tbl[0].gid_type, "ibv_query_gid_ex");
        CHECK(ibv_query_gid_table(fx.ctx, tbl, got - 1, 0) == -EINVAL,
              "%zd GIDs fit in %zd entries", got, got - 1);
        CHECK(ibv_query_gid_table(fx.ctx, tbl, 8, 1) == -EINVAL, "flags 1");
    }
    /* ibv_rereg_mr of the access alone changes the MR in place: it keeps its
     * keys, as on mlx5 and rxe (rdma-core's own tests count on it). */
    errno = 0;
    {
        uint32_t old_rkey = fx.mr_b->rkey;

        CHECK(!ibv_rereg_mr(fx.mr_b, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
                            0, IBV_ACCESS_LOCAL_WRITE |
                            IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                            IBV_ACCESS_REMOTE_ATOMIC) &&
              fx.mr_b->rkey == old_rkey && fx.mr_b->lkey == fx.mr_b->rkey,
              "ibv_rereg_mr: %s, rkey %#x was %#x", strerror(errno),
              fx.mr_b->rkey, old_rkey);
    }
    /* What pfnic does not have, refused with the objects left as they were. */
    CHECK(ibv_resize_cq(fx.cq_a, 64) == EOPNOTSUPP, "ibv_resize_cq");
    errno = 0;
    CHECK(!ibv_import_device(fx.ctx->cmd_fd) && errno == EOPNOTSUPP,
          "ibv_import_device: %s", strerror(errno));
    CHECK(!ibv_query_qp_data_in_order(fx.qp_a, IBV_WR_RDMA_WRITE, 0),
          "data in order");
    CHECK(ibv_rate_to_mbps(IBV_RATE_100_GBPS) == 103125 &&
          mult_to_ibv_rate(4) == IBV_RATE_10_GBPS, "rates");
    /* The device clock, where the device has one; values it does not know. */
    {
        struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
        struct ibv_device_attr_ex ax;

        CHECK(!ibv_query_device_ex(fx.ctx, NULL, &ax), "ibv_query_device_ex");
        CHECK(ibv_query_rt_values_ex(fx.ctx, &v) ==
              (ax.completion_timestamp_mask ? 0 : EOPNOTSUPP),
              "ibv_query_rt_values_ex, timestamp mask 0x%" PRIx64,
              (uint64_t)ax.completion_timestamp_mask);
        v.comp_mask = IBV_VALUES_MASK_RESERVED;
        CHECK(ibv_query_rt_values_ex(fx.ctx, &v) ==
              (ax.completion_timestamp_mask ? EINVAL : EOPNOTSUPP),
              "ibv_query_rt_values_ex of an unknown value");
    }

    /* No asynchronous event is queued: a non-blocking read says so. */
    {
        struct ibv_async_event ev;
        int fl = fcntl(fx.ctx->async_fd, F_GETFL);

        CHECK(fl >= 0 && !fcntl(fx.ctx->async_fd, F_SETFL, fl | O_NONBLOCK),
              "async_fd %d: %s", fx.ctx->async_fd, strerror(errno));
        errno = 0;
        CHECK(ibv_get_async_event(fx.ctx, &ev) == -1 && errno == EAGAIN,
              "ibv_get_async_event: %s", strerror(errno));
        CHECK(!fcntl(fx.ctx->async_fd, F_SETFL, fl), "fcntl");
        CHECK(!strcmp(ibv_event_type_str(IBV_EVENT_PORT_ACTIVE), "port active") &&
              !strcmp(ibv_event_type_str((enum ibv_event_type)99), "unknown"),
              "event type strings");
    }

    /* The device file's number, through its sysfs directory: dev_path is
     * the sysfs directory of the core's uverbs file,
     * /dev/infiniband/<dev_name>. */
    snprintf(node, sizeof(node), "/dev/infiniband/%s", fx.ctx->device->dev_name);
    snprintf(sysdir, sizeof(sysdir), "%s", fx.ctx->device->dev_path);
    CHECK(!stat(node, &st) && S_ISCHR(st.st_mode), "stat %s: %s", node,
          strerror(errno));
    snprintf(want, sizeof(want), "%u:%u", major(st.st_rdev),
             minor(st.st_rdev));
    n = ibv_read_sysfs_file(sysdir, "dev", buf, sizeof(buf));
    CHECK(n == (int)strlen(want) && !strcmp(buf, want),
          "%s/dev: %d '%s', not '%s'", sysdir, n, n > 0 ? buf : "", want);
    errno = 0;
    CHECK(ibv_read_sysfs_file(sysdir, "no-such-file", buf, sizeof(buf)) ==
          -1 && errno == ENOENT, "a missing attribute: errno %d", errno);
    /* A value with no room for its terminator fails, not truncates. */
    CHECK(ibv_read_sysfs_file(sysdir, "dev", buf, 2) == -1,
          "a value longer than the buffer");

    errno = 0;
    mr = ibv_reg_mr_iova2(fx.pd, fx.buf_b, BUF_SIZE,
                          (uintptr_t)fx.buf_b + 4096, IBV_ACCESS_LOCAL_WRITE);
    CHECK(!mr && errno == EOPNOTSUPP, "an IOVA other than the address: %s",
          mr ? "registered" : strerror(errno));
    mr = ibv_reg_mr_iova2(fx.pd, fx.buf_b, BUF_SIZE, (uintptr_t)fx.buf_b,
                          IBV_ACCESS_LOCAL_WRITE);
    CHECK(mr && mr->addr == fx.buf_b && mr->length == BUF_SIZE,
          "the IOVA of the address: %s", strerror(errno));
    CHECK(!ibv_dereg_mr(mr), "ibv_dereg_mr");
}

/* Posts `wr` on A and expects one successful completion of `opcode`. */
static int run_wr(struct ibv_send_wr *wr, enum ibv_wc_opcode opcode,
                  uint32_t byte_len, int line)
{
    struct ibv_send_wr *bad = NULL;
    struct ibv_wc wc;
    int ret;

    ret = ibv_post_send(fx.qp_a, wr, &bad);
    if (ret) {
        fail(line, "ibv_post_send: %s", strerror(ret));
        return -1;
    }
    if (!poll_one(fx.cq_a, &wc)) {
        fail(line, "no completion");
        return -1;
    }
    if (wc.status != IBV_WC_SUCCESS || wc.opcode != opcode ||
        wc.wr_id != wr->wr_id || wc.qp_num != fx.qp_a->qp_num ||
        (opcode != IBV_WC_COMP_SWAP && opcode != IBV_WC_FETCH_ADD &&
         wc.byte_len != byte_len)) {
        fail(line, "completion: %s, opcode %d, wr_id %" PRIu64 ", %u bytes",
             ibv_wc_status_str(wc.status), wc.opcode, wc.wr_id,
             wc.byte_len);
        return -1;
    }
    return 0;
}

static void test_rdma(void)
{
    struct ibv_sge sge[2] = {
        { (uintptr_t)fx.buf_a, 100, 0 },
        { (uintptr_t)fx.buf_a + 4096, 200, 0 },
    };
    struct ibv_send_wr wr = {
        .wr_id = 1,
        .sg_list = sge,
        .num_sge = 2,
        .opcode = IBV_WR_RDMA_WRITE,
        .send_flags = IBV_SEND_SIGNALED,
    };

    CHECK(fx.qp_a, "no QPs");
    sge[0].lkey = sge[1].lkey = fx.mr_a->lkey;
    for (int i = 0; i < 300; i++) {
        fx.buf_a[i < 100 ? i : 4096 + i - 100] = (unsigned char)(i * 7 + 3);
    }
    memset(fx.buf_b, 0, BUF_SIZE);
    wr.wr.rdma.remote_addr = (uintptr_t)fx.buf_b + 16;
    wr.wr.rdma.rkey = fx.mr_b->rkey;
    if (run_wr(&wr, IBV_WC_RDMA_WRITE, 300, __LINE__)) {
        return;
    }
    for (int i = 0; i < 300; i++) {
        CHECK(fx.buf_b[16 + i] == (unsigned char)(i * 7 + 3),
              "written byte %d is %u", i, fx.buf_b[16 + i]);
    }
    CHECK(fx.buf_b[15] == 0 && fx.buf_b[316] == 0, "wrote outside");

    /* READ it back into one SGE. */
    memset(fx.buf_a, 0, BUF_SIZE);
    sge[0].length = 300;
    wr.wr_id = 2;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_READ;
    if (run_wr(&wr, IBV_WC_RDMA_READ, 300, __LINE__)) {
        return;
    }
    CHECK(!memcmp(fx.buf_a, fx.buf_b + 16, 300), "read data differs");
}

static void test_imm(void)
{
    struct ibv_sge rsge = { (uintptr_t)fx.buf_b, BUF_SIZE, 0 };
    struct ibv_recv_wr rwr = { .wr_id = 77, .sg_list = &rsge, .num_sge = 1 };
    struct ibv_sge sge = { (uintptr_t)fx.buf_a, 64, 0 };
    struct ibv_send_wr wr = {
        .wr_id = 3,
        .sg_list = &sge,
        .num_sge = 1,
        .opcode = IBV_WR_SEND_WITH_IMM,
        .send_flags = IBV_SEND_SIGNALED,
        .imm_data = htonl(0x12345678),
    };
    struct ibv_recv_wr *rbad;
    struct ibv_wc wc;

    CHECK(fx.qp_a, "no QPs");
    rsge.lkey = fx.mr_b->lkey;
    sge.lkey = fx.mr_a->lkey;
    memset(fx.buf_a, 0x3c, 64);

    CHECK(!ibv_post_recv(fx.qp_b, &rwr, &rbad), "ibv_post_recv");
    if (run_wr(&wr, IBV_WC_SEND, 64, __LINE__)) {
        return;
    }
    CHECK(poll_one(fx.cq_b, &wc), "no receive completion");
    CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
          wc.wr_id == 77 && wc.byte_len == 64 &&
          (wc.wc_flags & IBV_WC_WITH_IMM) && wc.imm_data == htonl(0x12345678) &&
          wc.src_qp == fx.qp_a->qp_num && wc.qp_num == fx.qp_b->qp_num,
          "SEND_WITH_IMM receive: %s op %d len %u flags 0x%x imm 0x%x src %u",
          ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len, wc.wc_flags,
          ntohl(wc.imm_data), wc.src_qp);
    CHECK(fx.buf_b[0] == 0x3c && fx.buf_b[63] == 0x3c, "received data");

    /* RDMA WRITE with immediate: data in place, and a receive consumed. */
    rwr.wr_id = 78;
    CHECK(!ibv_post_recv(fx.qp_b, &rwr, &rbad), "ibv_post_recv");
    memset(fx.buf_a, 0x4d, 64);
    wr.wr_id = 4;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.imm_data = htonl(0xcafe);
    wr.wr.rdma.remote_addr = (uintptr_t)fx.buf_b + 1024;
    wr.wr.rdma.rkey = fx.mr_b->rkey;
    if (run_wr(&wr, IBV_WC_RDMA_WRITE, 64, __LINE__)) {
        return;
    }
    CHECK(poll_one(fx.cq_b, &wc), "no receive completion");
    CHECK(wc.status == IBV_WC_SUCCESS &&
          wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.wr_id == 78 &&
          (wc.wc_flags & IBV_WC_WITH_IMM) && wc.imm_data == htonl(0xcafe),
          "WRITE_WITH_IMM receive: %s op %d flags 0x%x imm 0x%x",
          ibv_wc_status_str(wc.status), wc.opcode, wc.wc_flags,
          ntohl(wc.imm_data));
    CHECK(fx.buf_b[1024] == 0x4d && fx.buf_b[1087] == 0x4d, "written data");
}

static void test_atomics(void)
{
    uint64_t *remote = (uint64_t *)(fx.buf_b + 256);
    uint64_t *local = (uint64_t *)fx.buf_a;
    struct ibv_sge sge = { (uintptr_t)local, 8, 0 };
    struct ibv_send_wr wr = {
        .wr_id = 5,
        .sg_list = &sge,
        .num_sge = 1,
        .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
        .send_flags = IBV_SEND_SIGNALED,
    };

    CHECK(fx.qp_a, "no QPs");
    sge.lkey = fx.mr_a->lkey;
    *remote = 1000;
    *local = 0;
    wr.wr.atomic.remote_addr = (uintptr_t)remote;
    wr.wr.atomic.rkey = fx.mr_b->rkey;
    wr.wr.atomic.compare_add = 234;
    if (run_wr(&wr, IBV_WC_FETCH_ADD, 8, __LINE__)) {
        return;
    }
    CHECK(*local == 1000 && *remote == 1234, "fetch-add: got %" PRIu64
          ", now %" PRIu64, *local, *remote);

    /* Compare-and-swap that matches, then one that does not. */
    wr.wr_id = 6;
    wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
    wr.wr.atomic.compare_add = 1234;
    wr.wr.atomic.swap = 42;
    if (run_wr(&wr, IBV_WC_COMP_SWAP, 8, __LINE__)) {
        return;
    }
    CHECK(*local == 1234 && *remote == 42, "cmp-swap: got %" PRIu64
          ", now %" PRIu64, *local, *remote);
    wr.wr_id = 7;
    wr.wr.atomic.swap = 7;
    if (run_wr(&wr, IBV_WC_COMP_SWAP, 8, __LINE__)) {
        return;
    }
    CHECK(*local == 42 && *remote == 42, "failed cmp-swap: got %" PRIu64
          ", now %" PRIu64, *local, *remote);
}

/* Polls the extended CQ `cq` for one completion, for up to 60 s: 0 if one came. */
/*
 * Shared receive queues and asynchronous events: two receives posted to an
 * SRQ are taken by the QP created with it, in order; an armed limit raises
 * IBV_EVENT_SRQ_LIMIT_REACHED (naming the SRQ) once; a QP with an SRQ that
 * enters ERR raises IBV_EVENT_QP_LAST_WQE_REACHED; every event is
 * acknowledged before its object is destroyed, as libibverbs requires.
 */
static void test_srq(void)
{
    struct ibv_srq_init_attr sinit = { .attr = { .max_wr = 4, .max_sge = 1 } };
    struct ibv_sge rsge = { (uintptr_t)fx.buf_b, 512, 0 };
    struct ibv_recv_wr rwr = { .sg_list = &rsge, .num_sge = 1 };
    struct ibv_sge sge = { (uintptr_t)fx.buf_a, 32, 0 };
    struct ibv_send_wr wr = {
        .sg_list = &sge,
        .num_sge = 1,
        .opcode = IBV_WR_SEND,
        .send_flags = IBV_SEND_SIGNALED,
    };
    struct ibv_qp_init_attr qinit = {
        .send_cq = fx.cq_b,
        .recv_cq = fx.cq_b,
        .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
                 .max_recv_sge = 1 },
        .qp_type = IBV_QPT_RC,
    };
    struct ibv_recv_wr *rbad = NULL;
    struct ibv_send_wr *bad;
    struct ibv_device_attr dattr;
    struct ibv_srq_attr sattr;
    struct ibv_async_event ev;
    struct ibv_qp *recv_qp, *send_qp;
    struct ibv_srq *srq;
    struct ibv_wc wc;
    int flags;

    CHECK(fx.qp_a, "no QPs");
    CHECK(!ibv_query_device(fx.ctx, &dattr), "ibv_query_device");
    if (dattr.max_srq == 0) {
        errno = 0;
        CHECK(!ibv_create_srq(fx.pd, &sinit) && errno == EOPNOTSUPP,
              "ibv_create_srq without SRQs: errno %d", errno);
        return;
    }
    CHECK(dattr.max_srq_wr >= 4 && dattr.max_srq_sge >= 1,
          "max_srq_wr %d max_srq_sge %d", dattr.max_srq_wr,
          dattr.max_srq_sge);
    sinit.srq_context = &sinit;
    srq = ibv_create_srq(fx.pd, &sinit);
    CHECK(srq, "ibv_create_srq: %s", strerror(errno));
    CHECK(srq->context == fx.ctx && srq->pd == fx.pd &&
          srq->srq_context == &sinit && sinit.attr.max_wr >= 4,
          "the SRQ's fields, max_wr %u", sinit.attr.max_wr);
    qinit.srq = srq;
    recv_qp = ibv_create_qp(fx.pd, &qinit);
    CHECK(recv_qp && recv_qp->srq == srq, "ibv_create_qp with an SRQ: %s",
          strerror(errno));
    send_qp = make_qp(fx.cq_a, 1);
    CHECK(send_qp, "ibv_create_qp: %s", strerror(errno));
    CHECK(!connect_qp(recv_qp, send_qp->qp_num, fx.lid) &&
          !connect_qp(send_qp, recv_qp->qp_num, fx.lid), "connect");
    CHECK(ibv_destroy_srq(srq) == EBUSY, "destroying an SRQ in use");

    rsge.lkey = fx.mr_b->lkey;
    sge.lkey = fx.mr_a->lkey;
    CHECK(ibv_post_recv(recv_qp, &rwr, &rbad) == EINVAL && rbad == &rwr,
          "ibv_post_recv on a QP with an SRQ");
    for (int i = 0; i < 2; i++) {
        rwr.wr_id = 300 + i;
        rsge.addr = (uintptr_t)fx.buf_b + 512 * i;
        CHECK(!ibv_post_srq_recv(srq, &rwr, &rbad), "ibv_post_srq_recv");
    }
    memset(&sattr, 0, sizeof(sattr));
    sattr.srq_limit = 2;
    CHECK(!ibv_modify_srq(srq, &sattr, IBV_SRQ_LIMIT), "arm the limit");
    sattr.max_wr = 64;
    CHECK(ibv_modify_srq(srq, &sattr, IBV_SRQ_MAX_WR) == EOPNOTSUPP,
          "resizing an SRQ");
    CHECK(!ibv_query_srq(srq, &sattr) && sattr.srq_limit == 2,
          "ibv_query_srq: limit %u", sattr.srq_limit);

    for (int i = 0; i < 2; i++) {
        memset(fx.buf_a, 0x60 + i, 32);
        wr.wr_id = 400 + i;
        CHECK(!ibv_post_send(send_qp, &wr, &bad), "ibv_post_send");
        CHECK(poll_one(fx.cq_a, &wc) && wc.status == IBV_WC_SUCCESS,
              "send: %s", ibv_wc_status_str(wc.status));
        CHECK(poll_one(fx.cq_b, &wc), "no receive completion");
        CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
              wc.wr_id == (uint64_t)(300 + i) && wc.byte_len == 32 &&
              wc.qp_num == recv_qp->qp_num &&
              fx.buf_b[512 * i] == 0x60 + i,
              "SRQ receive %d: %s wr_id %" PRIu64 " qp %u", i,
              ibv_wc_status_str(wc.status), wc.wr_id, wc.qp_num);
        if (i == 0) {
            /* 2 -> 1: below the limit, one event naming the SRQ. */
            CHECK(!ibv_get_async_event(fx.ctx, &ev), "ibv_get_async_event: %s",
                  strerror(errno));
            CHECK(ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED &&
                  ev.element.srq == srq, "event %s",
                  ibv_event_type_str(ev.event_type));
            ibv_ack_async_event(&ev);
            CHECK(!ibv_query_srq(srq, &sattr) && sattr.srq_limit == 0,
                  "the limit after it fired: %u", sattr.srq_limit);
        }
    }

    /* Nothing more is queued: a non-blocking read says EAGAIN. */
    flags = fcntl(fx.ctx->async_fd, F_GETFL);
    CHECK(flags >= 0 &&
          !fcntl(fx.ctx->async_fd, F_SETFL, flags | O_NONBLOCK), "fcntl");
    errno = 0;
    CHECK(ibv_get_async_event(fx.ctx, &ev) == -1 && errno == EAGAIN,
          "a non-blocking ibv_get_async_event of nothing: errno %d", errno);
    CHECK(!fcntl(fx.ctx->async_fd, F_SETFL, flags), "fcntl");

    /* The QP with the SRQ enters ERR: the last-WQE event. */
    {
        struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

        CHECK(!ibv_modify_qp(recv_qp, &a, IBV_QP_STATE), "to ERR");
    }
    CHECK(!ibv_get_async_event(fx.ctx, &ev), "ibv_get_async_event");
    CHECK(ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED &&
          ev.element.qp == recv_qp, "event %s",
          ibv_event_type_str(ev.event_type));
    ibv_ack_async_event(&ev);
    CHECK(!ibv_destroy_qp(recv_qp) && !ibv_destroy_qp(send_qp),
          "ibv_destroy_qp");
    CHECK(!ibv_destroy_srq(srq), "ibv_destroy_srq");
}

/*
 * Device memory: ibv_alloc_dm, ibv_memcpy_to_dm/_from_dm, and an MR over
 * it (ibv_reg_dm_mr, zero-based) used as the target of an RDMA WRITE and
 * the source of an RDMA READ; ibv_free_dm refused while the MR lives. A
 * device without it refuses ibv_alloc_dm with EOPNOTSUPP.
 */
static void test_dm(void)
{
    struct ibv_alloc_dm_attr dattr = { .length = 4096 };
    struct ibv_sge sge = { (uintptr_t)fx.buf_a, 64, 0 };
    struct ibv_send_wr wr = {
        .wr_id = 600,
        .sg_list = &sge,
        .num_sge = 1,
        .opcode = IBV_WR_RDMA_WRITE,
        .send_flags = IBV_SEND_SIGNALED,
    };
    unsigned char got[64], want[64];
    struct ibv_device_attr_ex ax;
    struct ibv_mr *mr;
    struct ibv_dm *dm;

    CHECK(fx.qp_a, "no QPs");
    CHECK(!ibv_query_device_ex(fx.ctx, NULL, &ax), "ibv_query_device_ex");
    if (!ax.max_dm_size) {
        errno = 0;
        CHECK(!ibv_alloc_dm(fx.ctx, &dattr) && errno == EOPNOTSUPP,
              "ibv_alloc_dm without device memory: %s", strerror(errno));
        return;
    }
    dattr.length = ax.max_dm_size + 1;
    errno = 0;
    CHECK(!ibv_alloc_dm(fx.ctx, &dattr) && errno == EINVAL,
          "more than max_dm_size: %s", strerror(errno));
    dattr.length = 4096;
    dm = ibv_alloc_dm(fx.ctx, &dattr);
    CHECK(dm && dm->context == fx.ctx, "ibv_alloc_dm: %s", strerror(errno));
    for (int i = 0; i < 64; i++) {
        want[i] = 0x40 + i;
    }
    CHECK(!ibv_memcpy_to_dm(dm, 100, want, 64) &&
          !ibv_memcpy_from_dm(got, dm, 100, 64) && !memcmp(got, want, 64),
          "a round trip through device memory");
    CHECK(ibv_memcpy_to_dm(dm, 4088, want, 64) == EINVAL, "a copy past the end");
    /* Device memory is reached in aligned words, offsets and lengths, as on
     * mlx5 (and as rdma-core's own tests want of any device). */
    CHECK(ibv_memcpy_to_dm(dm, 102, want, 4) == EINVAL &&
          ibv_memcpy_from_dm(got, dm, 101, 4) == EINVAL,
          "a copy at an offset that is not a multiple of 4");
    CHECK(ibv_memcpy_to_dm(dm, 200, want, 3) == EINVAL &&
          ibv_memcpy_from_dm(got, dm, 200, 3) == EINVAL,
          "a copy of 3 bytes");
    errno = 0;
    CHECK(!ibv_reg_dm_mr(fx.pd, dm, 1026, 64,
                         IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE) &&
          errno == EINVAL, "ibv_reg_dm_mr at offset 1026");
    errno = 0;
    CHECK(!ibv_reg_dm_mr(fx.pd, dm, 0, 4096, IBV_ACCESS_LOCAL_WRITE) &&
          errno == EINVAL, "ibv_reg_dm_mr without IBV_ACCESS_ZERO_BASED");
    mr = ibv_reg_dm_mr(fx.pd, dm, 1024, 2048,
                       IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE |
                       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    CHECK(mr && mr->length == 2048, "ibv_reg_dm_mr: %s", strerror(errno));
    CHECK(ibv_free_dm(dm) == EBUSY, "ibv_free_dm under an MR");

    /* qp_a WRITEs 64 bytes to address 8 of the MR: byte 1032 of dm. */
    sge.lkey = fx.mr_a->lkey;
    memset(fx.buf_a, 0x5c, 64);
    wr.wr.rdma.remote_addr = 8;
    wr.wr.rdma.rkey = mr->rkey;
    if (run_wr(&wr, IBV_WC_RDMA_WRITE, 64, __LINE__)) {
        return;
    }
    memset(want, 0x5c, 64);
    CHECK(!ibv_memcpy_from_dm(got, dm, 1032, 64) && !memcmp(got, want, 64),
          "an RDMA WRITE into device memory");
    /* And READs it back into buf_a + 1024. */
    memset(fx.buf_a + 1024, 0, 64);
    sge.addr = (uintptr_t)fx.buf_a + 1024;
    wr.wr_id = 601;
    wr.opcode = IBV_WR_RDMA_READ;
    if (run_wr(&wr, IBV_WC_RDMA_READ, 64, __LINE__)) {
        return;
    }
    CHECK(!memcmp(fx.buf_a + 1024, want, 64), "an RDMA READ of device memory");
    CHECK(!ibv_dereg_mr(mr) && !ibv_free_dm(dm), "dereg and free");
}

static int start_poll_one(struct ibv_cq_ex *cq);

static uint64_t raw_clock_ns(void)
{
    struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };

    if (ibv_query_rt_values_ex(fx.ctx, &v) ||
        !(v.comp_mask & IBV_VALUES_MASK_RAW_CLOCK)) {
        return 0;
    }
    return (uint64_t)v.raw_clock.tv_sec * 1000000000ull + v.raw_clock.tv_nsec;
}

/*
 * Completion timestamps: a CQ made with IBV_WC_EX_WITH_COMPLETION_TIMESTAMP
 * gives each completion the device clock (ibv_wc_read_completion_ts), which
 * lies between ibv_query_rt_values_ex reads before the post and after the
 * poll, in nondecreasing order; a device without a clock refuses such a CQ.
 */
static void test_timestamps(void)
{
    struct ibv_cq_init_attr_ex cq_attr = {
        .cqe = 2,
        .wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
    };
    struct ibv_sge sge = { (uintptr_t)fx.buf_a, 16, 0 };
    struct ibv_send_wr wr = {
        .sg_list = &sge,
        .num_sge = 1,
        .opcode = IBV_WR_RDMA_WRITE,
        .send_flags = IBV_SEND_SIGNALED,
    };
    struct ibv_device_attr_ex ax;
    struct ibv_send_wr *bad;
    struct ibv_qp *qp, *peer;
    struct ibv_cq_ex *cq;
    uint64_t prev = 0;

    CHECK(fx.qp_b, "no QPs");
    CHECK(!ibv_query_device_ex(fx.ctx, NULL, &ax), "ibv_query_device_ex");
    if (!ax.completion_timestamp_mask) {
        errno = 0;
        CHECK(!ibv_create_cq_ex(fx.ctx, &cq_attr) && errno == EOPNOTSUPP,
              "a timestamped CQ without a clock: %s", strerror(errno));
        return;
    }
    CHECK(ax.completion_timestamp_mask == UINT64_MAX &&
          ax.hca_core_clock == 1000000, "mask 0x%" PRIx64 ", clock %" PRIu64,
          (uint64_t)ax.completion_timestamp_mask, (uint64_t)ax.hca_core_clock);
    cq = ibv_create_cq_ex(fx.ctx, &cq_attr);
    CHECK(cq && cq->read_completion_ts, "ibv_create_cq_ex with timestamps: %s",
          strerror(errno));
    qp = make_qp(ibv_cq_ex_to_cq(cq), 1);
    peer = make_qp(fx.cq_b, 1);
    CHECK(qp && peer, "ibv_create_qp");
    CHECK(!connect_qp(qp, peer->qp_num, fx.lid) &&
          !connect_qp(peer, qp->qp_num, fx.lid), "connect");
    sge.lkey = fx.mr_a->lkey;
    wr.wr.rdma.remote_addr = (uintptr_t)fx.buf_b + 2048;
    wr.wr.rdma.rkey = fx.mr_b->rkey;
    /* Five laps of a ring of two. */
    for (int i = 0; i < 10; i++) {
        uint64_t before = raw_clock_ns(), after, ts;

        wr.wr_id = 500 + i;
        CHECK(before, "ibv_query_rt_values_ex");
        CHECK(!ibv_post_send(qp, &wr, &bad), "ibv_post_send");
        CHECK(!start_poll_one(cq), "no completion");
        ts = ibv_wc_read_completion_ts(cq);
        CHECK(cq->status == IBV_WC_SUCCESS && cq->wr_id == (uint64_t)(500 + i),
              "completion %d: %s", i, ibv_wc_status_str(cq->status));
        ibv_end_poll(cq);
        after = raw_clock_ns();
        CHECK(before <= ts && ts <= after && ts >= prev,
              "completion %d at %" PRIu64 ", outside [%" PRIu64 ", %" PRIu64
              "] or before %" PRIu64, i, ts, before, after, prev);
        prev = ts;
    }
    CHECK(!ibv_destroy_qp(qp) && !ibv_destroy_qp(peer) &&
          !ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), "destroy");
}

static int start_poll_one(struct ibv_cq_ex *cq)
{
    struct ibv_poll_cq_attr attr = { 0 };
    time_t end = time(NULL) + 60;
    int ret;

    do {
        ret = ibv_start_poll(cq, &attr);
        if (ret != ENOENT) {
            return ret;
        }
    } while (time(NULL) < end);
    return ENOENT;
}

/*
 * The extended verbs: CQs created with ibv_create_cq_ex and polled with
 * ibv_start_poll/ibv_next_poll/ibv_end_poll, and QPs created with
 * ibv_create_qp_ex whose work requests are built with ibv_wr_*: a batch of
 * an RDMA WRITE, a SEND with immediate data and a fetch-and-add, each
 * completion read field by field; what pfnic does not have refused.
 */
static void test_extended(void)
{
    struct ibv_cq_init_attr_ex cq_attr = {
        .cqe = 16,
        .wc_flags = IBV_WC_STANDARD_FLAGS,
    };
    struct ibv_qp_init_attr_ex qp_attr = {
        .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 2,
                 .max_recv_sge = 2 },
        .qp_type = IBV_QPT_RC,
        .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
        .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND_WITH_IMM |
                          IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
    };
    uint64_t *remote = (uint64_t *)(fx.buf_b + 512), *local = (uint64_t *)(fx.buf_a + 512);
    struct ibv_sge rsge = { (uintptr_t)fx.buf_b + 1024, 64, 0 };
    struct ibv_recv_wr rwr = { .wr_id = 77, .sg_list = &rsge, .num_sge = 1 };
    struct ibv_recv_wr *bad_rwr;
    struct ibv_cq_ex *cq_a = NULL, *cq_b = NULL, *bad;
    struct ibv_qp *qp_a = NULL, *qp_b = NULL, *plain;
    struct ibv_qp_ex *qpx;
    struct ibv_poll_cq_attr pattr = { 0 };
    uint64_t seen = 0;
    int ret, n = 0;

    CHECK(fx.pd, "no PD");
    /* What pfnic's completions do not carry, and attributes that do not exist. */
    cq_attr.wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
    errno = 0;
    bad = ibv_create_cq_ex(fx.ctx, &cq_attr);
    CHECK(!bad && errno == EOPNOTSUPP, "wall-clock timestamps: %s",
          strerror(errno));
    cq_attr.wc_flags = IBV_WC_STANDARD_FLAGS;
    cq_attr.comp_mask = 1 << 7;
    errno = 0;
    bad = ibv_create_cq_ex(fx.ctx, &cq_attr);
    CHECK(!bad && errno == EINVAL, "unknown comp_mask: %s", strerror(errno));
    cq_attr.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
    cq_attr.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;

    cq_a = ibv_create_cq_ex(fx.ctx, &cq_attr);
    cq_b = ibv_create_cq_ex(fx.ctx, &cq_attr);
    CHECK(cq_a && cq_b, "ibv_create_cq_ex: %s", strerror(errno));
    CHECK(ibv_cq_ex_to_cq(cq_a)->cqe >= 16, "cqe %d", ibv_cq_ex_to_cq(cq_a)->cqe);
    CHECK(ibv_start_poll(cq_a, &pattr) == ENOENT, "an empty CQ polled something");

    /* A QP with send operations pfnic does not have is refused. */
    qp_attr.send_cq = qp_attr.recv_cq = ibv_cq_ex_to_cq(cq_a);
    qp_attr.pd = fx.pd;
    qp_attr.send_ops_flags |= IBV_QP_EX_WITH_LOCAL_INV;
    errno = 0;
    plain = ibv_create_qp_ex(fx.ctx, &qp_attr);
    CHECK(!plain && errno == EOPNOTSUPP, "LOCAL_INV: %s", strerror(errno));
    qp_attr.send_ops_flags &= ~IBV_QP_EX_WITH_LOCAL_INV;
    qp_a = ibv_create_qp_ex(fx.ctx, &qp_attr);
    qp_attr.send_cq = qp_attr.recv_cq = ibv_cq_ex_to_cq(cq_b);
    qp_b = ibv_create_qp_ex(fx.ctx, &qp_attr);
    CHECK(qp_a && qp_b, "ibv_create_qp_ex: %s", strerror(errno));
    CHECK(!ibv_qp_to_qp_ex(fx.qp_a), "an ordinary QP is extended");
    qpx = ibv_qp_to_qp_ex(qp_a);
    CHECK(qpx && &qpx->qp_base == qp_a, "no extended QP");
    CHECK(!connect_qp(qp_a, qp_b->qp_num, fx.lid) &&
          !connect_qp(qp_b, qp_a->qp_num, fx.lid), "connect");

    /* An operation pfnic does not have fails the batch, and nothing is posted. */
    ibv_wr_start(qpx);
    qpx->wr_id = 1;
    qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(qpx, fx.mr_b->rkey, (uintptr_t)fx.buf_b);
    ibv_wr_set_sge(qpx, fx.mr_a->lkey, (uintptr_t)fx.buf_a, 8);
    qpx->wr_id = 2;
    qpx->wr_local_inv(qpx, 0);
    ret = ibv_wr_complete(qpx);
    CHECK(ret == EOPNOTSUPP, "local invalidate: %s", strerror(ret));
    /* Inline data on a QP created without max_inline_data. */
    ibv_wr_start(qpx);
    ibv_wr_rdma_write(qpx, fx.mr_b->rkey, (uintptr_t)fx.buf_b);
    ibv_wr_set_inline_data(qpx, fx.buf_a, 8);
    ret = ibv_wr_complete(qpx);
    CHECK(ret == EINVAL, "inline data without max_inline_data: %s", strerror(ret));
    /* Data before any operation. */
    ibv_wr_start(qpx);
    ibv_wr_set_sge(qpx, fx.mr_a->lkey, (uintptr_t)fx.buf_a, 8);
    ret = ibv_wr_complete(qpx);
    CHECK(ret == EINVAL, "an SGE without a work request: %s", strerror(ret));
    /* An aborted batch posts nothing either. */
    ibv_wr_start(qpx);
    qpx->wr_id = 2;
    ibv_wr_send(qpx);
    ibv_wr_set_sge(qpx, fx.mr_a->lkey, (uintptr_t)fx.buf_a, 8);
    ibv_wr_abort(qpx);
    usleep(100000);
    CHECK(ibv_start_poll(cq_a, &pattr) == ENOENT, "a refused batch completed");

    /* The batch: WRITE 256 bytes, SEND 64 with immediate data, fetch-and-add. */
    memset(fx.buf_a, 0x5a, 256);
    memset(fx.buf_b, 0, 256);
    *remote = 100;
    *local = 0;
    rsge.lkey = fx.mr_b->lkey;
    CHECK(!ibv_post_recv(qp_b, &rwr, &bad_rwr), "ibv_post_recv");
    ibv_wr_start(qpx);
    qpx->wr_id = 10;
    qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(qpx, fx.mr_b->rkey, (uintptr_t)fx.buf_b);
    ibv_wr_set_sge(qpx, fx.mr_a->lkey, (uintptr_t)fx.buf_a, 256);
    qpx->wr_id = 11;
    ibv_wr_send_imm(qpx, htonl(0xabcd));
    ibv_wr_set_sge(qpx, fx.mr_a->lkey, (uintptr_t)fx.buf_a + 256, 64);
    qpx->wr_id = 12;
    ibv_wr_atomic_fetch_add(qpx, fx.mr_b->rkey, (uintptr_t)remote, 23);
    {
        struct ibv_sge l = { (uintptr_t)local, 8, fx.mr_a->lkey };

        ibv_wr_set_sge_list(qpx, 1, &l);
    }
    ret = ibv_wr_complete(qpx);
    CHECK(!ret, "ibv_wr_complete: %s", strerror(ret));

    /* The sender's three completions, in order, read one field at a time. */
    ret = start_poll_one(cq_a);
    while (!ret) {
        CHECK(cq_a->status == IBV_WC_SUCCESS, "wr %" PRIu64 ": %s", cq_a->wr_id,
              ibv_wc_status_str(cq_a->status));
        CHECK(cq_a->wr_id == 10 + (uint64_t)n, "completion %d is wr %" PRIu64, n,
              cq_a->wr_id);
        CHECK(ibv_wc_read_qp_num(cq_a) == qp_a->qp_num, "qp_num %u",
              ibv_wc_read_qp_num(cq_a));
        CHECK(ibv_wc_read_opcode(cq_a) == (n == 0 ? IBV_WC_RDMA_WRITE :
                                           n == 1 ? IBV_WC_SEND : IBV_WC_FETCH_ADD),
              "completion %d: opcode %d", n, ibv_wc_read_opcode(cq_a));
        seen |= 1u << n;
        if (++n == 3) {
            break;
        }
        ret = ibv_next_poll(cq_a);
        if (ret == ENOENT) {
            /* Not there yet: end this poll and start another. */
            ibv_end_poll(cq_a);
            ret = start_poll_one(cq_a);
        }
    }
    if (!ret) {
        ibv_end_poll(cq_a);
    }
    CHECK(seen == 7, "completions seen: %#" PRIx64 " (%s)", seen, strerror(ret));
    CHECK(!memcmp(fx.buf_a, fx.buf_b, 256), "WRITE's bytes differ");
    CHECK(*local == 100 && *remote == 123, "fetch-add: got %" PRIu64 ", now %" PRIu64,
          *local, *remote);

    /* The receiver's completion: every standard field. */
    ret = start_poll_one(cq_b);
    CHECK(!ret, "no receive completion: %s", strerror(ret));
    CHECK(cq_b->status == IBV_WC_SUCCESS && cq_b->wr_id == 77 &&
          ibv_wc_read_opcode(cq_b) == IBV_WC_RECV &&
          ibv_wc_read_byte_len(cq_b) == 64 &&
          (ibv_wc_read_wc_flags(cq_b) & IBV_WC_WITH_IMM) &&
          ntohl(ibv_wc_read_imm_data(cq_b)) == 0xabcd &&
          ibv_wc_read_qp_num(cq_b) == qp_b->qp_num &&
          ibv_wc_read_src_qp(cq_b) == qp_a->qp_num &&
          ibv_wc_read_slid(cq_b) == fx.lid,
          "receive: status %d wr %" PRIu64 " opcode %d len %u flags %#x imm %#x qp %u src %u slid %u",
          cq_b->status, cq_b->wr_id, ibv_wc_read_opcode(cq_b),
          ibv_wc_read_byte_len(cq_b), ibv_wc_read_wc_flags(cq_b),
          ntohl(ibv_wc_read_imm_data(cq_b)), ibv_wc_read_qp_num(cq_b),
          ibv_wc_read_src_qp(cq_b), ibv_wc_read_slid(cq_b));
    CHECK(ibv_next_poll(cq_b) == ENOENT, "a second receive completion");
    ibv_end_poll(cq_b);
    CHECK(!memcmp(fx.buf_a + 256, fx.buf_b + 1024, 64), "SEND's bytes differ");

    CHECK(!ibv_destroy_qp(qp_a) && !ibv_destroy_qp(qp_b), "ibv_destroy_qp");
    CHECK(!ibv_destroy_cq(ibv_cq_ex_to_cq(cq_a)) &&
          !ibv_destroy_cq(ibv_cq_ex_to_cq(cq_b)), "ibv_destroy_cq");
}

/*
 * Inline data (IBV_SEND_INLINE): payloads from memory no MR covers, the
 * buffer reused at once; the limits; a full send queue of inline SENDs,
 * each payload arriving intact (the slots are not reused too early); the
 * same through ibv_wr_set_inline_data.
 */
static void test_inline(void)
{
    enum { DEPTH = 8, ROUNDS = 5 };
    struct ibv_qp_init_attr init = {
        .cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH,
                 .max_send_sge = 2, .max_recv_sge = 1,
                 .max_inline_data = 64 },
        .qp_type = IBV_QPT_RC,
    };
    struct ibv_qp_init_attr_ex xinit = {
        .cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH,
                 .max_send_sge = 1, .max_recv_sge = 1,
                 .max_inline_data = 16 },
        .qp_type = IBV_QPT_RC,
        .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
        .send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE,
    };
    char unregistered[300], part2[32];
    struct ibv_sge sge[2];
    struct ibv_send_wr wr, *bad;
    struct ibv_recv_wr rwr, *rbad;
    struct ibv_sge rsge;
    struct ibv_qp_attr attr;
    struct ibv_qp_init_attr got;
    struct ibv_cq *cq_a, *cq_b;
    struct ibv_qp *qp_a, *qp_b, *big, *xa, *xb;
    struct ibv_qp_ex *qpx;
    struct ibv_wc wc;
    int ret;

    CHECK(fx.pd, "no PD");
    cq_a = ibv_create_cq(fx.ctx, 4 * DEPTH, NULL, NULL, 0);
    cq_b = ibv_create_cq(fx.ctx, 4 * DEPTH, NULL, NULL, 0);
    CHECK(cq_a && cq_b, "ibv_create_cq: %s", strerror(errno));
    init.send_cq = init.recv_cq = cq_a;
    init.cap.max_inline_data = 1024;
    errno = 0;
    big = ibv_create_qp(fx.pd, &init);
    CHECK(!big && errno == EINVAL, "max_inline_data 1024: %s", strerror(errno));
    init.cap.max_inline_data = 64;
    qp_a = ibv_create_qp(fx.pd, &init);
    CHECK(qp_a, "ibv_create_qp: %s", strerror(errno));
    CHECK(init.cap.max_inline_data >= 64, "max_inline_data %u",
          init.cap.max_inline_data);
    CHECK(!ibv_query_qp(qp_a, &attr, IBV_QP_CAP, &got) &&
          got.cap.max_inline_data == init.cap.max_inline_data,
          "query: max_inline_data %u", got.cap.max_inline_data);
    init.send_cq = init.recv_cq = cq_b;
    qp_b = ibv_create_qp(fx.pd, &init);
    CHECK(qp_b, "ibv_create_qp: %s", strerror(errno));
    CHECK(!connect_qp(qp_a, qp_b->qp_num, fx.lid) &&
          !connect_qp(qp_b, qp_a->qp_num, fx.lid), "connect");

    /* RDMA WRITE of two pieces of unregistered memory, reused at once. */
    memset(unregistered, 'u', sizeof(unregistered));
    memset(part2, 'v', sizeof(part2));
    memset(fx.buf_b, 0, 128);
    sge[0] = (struct ibv_sge){ (uintptr_t)unregistered, 40, 0 };
    sge[1] = (struct ibv_sge){ (uintptr_t)part2, 24, 0 };
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = 1;
    wr.sg_list = sge;
    wr.num_sge = 2;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = (uintptr_t)fx.buf_b;
    wr.wr.rdma.rkey = fx.mr_b->rkey;
    CHECK(!ibv_post_send(qp_a, &wr, &bad), "inline WRITE: %s", strerror(errno));
    memset(unregistered, 'x', sizeof(unregistered));
    memset(part2, 'x', sizeof(part2));
    CHECK(poll_one(cq_a, &wc) && wc.status == IBV_WC_SUCCESS,
          "inline WRITE: %s", ibv_wc_status_str(wc.status));
    for (int i = 0; i < 64; i++) {
        CHECK(fx.buf_b[i] == (i < 40 ? 'u' : 'v'), "byte %d is %#x", i,
              fx.buf_b[i]);
    }
    CHECK(fx.buf_b[64] == 0, "byte 64 written");

    /* Too long for a slot, and a READ (no payload to send): EINVAL. */
    sge[0].length = 257;
    wr.num_sge = 1;
    bad = NULL;
    CHECK(ibv_post_send(qp_a, &wr, &bad) == EINVAL && bad == &wr,
          "257 inline bytes were posted");
    sge[0].length = 8;
    wr.opcode = IBV_WR_RDMA_READ;
    bad = NULL;
    CHECK(ibv_post_send(qp_a, &wr, &bad) == EINVAL && bad == &wr,
          "an inline READ was posted");

    /* Full send queues of inline SENDs, each payload its own. */
    rsge = (struct ibv_sge){ 0, 64, fx.mr_b->lkey };
    memset(&rwr, 0, sizeof(rwr));
    rwr.sg_list = &rsge;
    rwr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < DEPTH; i++) {
            rwr.wr_id = 100 + i;
            rsge.addr = (uintptr_t)fx.buf_b + 1024 + 64 * i;
            CHECK(!ibv_post_recv(qp_b, &rwr, &rbad), "ibv_post_recv");
        }
        for (int i = 0; i < DEPTH; i++) {
            memset(unregistered, 'A' + (round * DEPTH + i) % 26, 64);
            sge[0] = (struct ibv_sge){ (uintptr_t)unregistered, 64, 0 };
            wr.wr_id = 200 + i;
            CHECK(!ibv_post_send(qp_a, &wr, &bad), "inline SEND %d: %s", i,
                  strerror(errno));
        }
        for (int n = 0; n < 2 * DEPTH; n++) {
            CHECK(poll_one(n < DEPTH ? cq_a : cq_b, &wc) &&
                  wc.status == IBV_WC_SUCCESS,
                  "round %d completion %d: %s", round, n,
                  ibv_wc_status_str(wc.status));
        }
        for (int i = 0; i < DEPTH; i++) {
            const unsigned char *m = fx.buf_b + 1024 + 64 * i;
            char want = 'A' + (round * DEPTH + i) % 26;

            CHECK(m[0] == want && m[63] == want, "round %d message %d: %c, not %c",
                  round, i, m[0], want);
        }
    }

    /* ibv_wr_set_inline_data on an extended QP: a 16-byte WRITE. */
    xinit.pd = fx.pd;
    xinit.send_cq = xinit.recv_cq = cq_a;
    xa = ibv_create_qp_ex(fx.ctx, &xinit);
    CHECK(xa, "ibv_create_qp_ex: %s", strerror(errno));
    /* Its own peer: a responder takes only the QP it is connected to. */
    xb = ibv_create_qp(fx.pd, &init);
    CHECK(xb, "ibv_create_qp: %s", strerror(errno));
    CHECK(!connect_qp(xa, xb->qp_num, fx.lid) &&
          !connect_qp(xb, xa->qp_num, fx.lid), "connect");
    qpx = ibv_qp_to_qp_ex(xa);
    memset(unregistered, 'q', 16);
    memset(fx.buf_b + 512, 0, 32);
    ibv_wr_start(qpx);
    qpx->wr_id = 7;
    qpx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    ibv_wr_rdma_write(qpx, fx.mr_b->rkey, (uintptr_t)fx.buf_b + 512);
    ibv_wr_set_inline_data(qpx, unregistered, 16);
    ret = ibv_wr_complete(qpx);
    memset(unregistered, 'x', 16);
    CHECK(!ret, "ibv_wr_complete: %s", strerror(ret));
    CHECK(poll_one(cq_a, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7,
          "inline ibv_wr: %s", ibv_wc_status_str(wc.status));
    CHECK(fx.buf_b[512] == 'q' && fx.buf_b[527] == 'q' && fx.buf_b[528] == 0,
          "inline ibv_wr bytes");

    CHECK(!ibv_destroy_qp(xa) && !ibv_destroy_qp(xb) && !ibv_destroy_qp(qp_a) &&
          !ibv_destroy_qp(qp_b), "ibv_destroy_qp");
    CHECK(!ibv_destroy_cq(cq_a) && !ibv_destroy_cq(cq_b), "ibv_destroy_cq");
}

static void test_post_errors(void)
{
    struct ibv_sge sge[5];
    struct ibv_send_wr wr[2];
    struct ibv_send_wr *bad = NULL;
    struct ibv_wc wc;

    CHECK(fx.qp_a, "no QPs");
    for (int i = 0; i < 5; i++) {
        sge[i] = (struct ibv_sge){ (uintptr_t)fx.buf_a, 8, fx.mr_a->lkey };
    }
    memset(wr, 0, sizeof(wr));
    wr[0].wr_id = 10;
    wr[0].sg_list = sge;
    wr[0].num_sge = 1;
    wr[0].opcode = IBV_WR_RDMA_WRITE;
    wr[0].send_flags = IBV_SEND_SIGNALED;
    wr[0].wr.rdma.remote_addr = (uintptr_t)fx.buf_b;
    wr[0].wr.rdma.rkey = fx.mr_b->rkey;
    wr[0].next = &wr[1];
    wr[1] = wr[0];
    wr[1].next = NULL;
    wr[1].wr_id = 11;
    wr[1].num_sge = 5;
    /* The first is posted, the second (more SGEs than the QP has) is not. */
    CHECK(ibv_post_send(fx.qp_a, wr, &bad) == EINVAL && bad == &wr[1],
          "too many SGEs: bad_wr %p", (void *)bad);
    CHECK(poll_one(fx.cq_a, &wc) && wc.wr_id == 10 &&
          wc.status == IBV_WC_SUCCESS, "the first work request");

    /* A bad rkey: REM_ACCESS_ERR, the QP in ERR, then flushes. */
    wr[0].next = NULL;
    wr[0].wr_id = 12;
    wr[0].wr.rdma.rkey = fx.mr_b->rkey ^ 0x80;
    CHECK(!ibv_post_send(fx.qp_a, wr, &bad), "post");
    CHECK(poll_one(fx.cq_a, &wc), "no completion for a bad rkey");
    CHECK(wc.wr_id == 12 && wc.status == IBV_WC_REM_ACCESS_ERR,
          "bad rkey: %s (%d)", ibv_wc_status_str(wc.status), wc.status);
    {
        struct ibv_qp_init_attr init;
        struct ibv_qp_attr attr;

        CHECK(!ibv_query_qp(fx.qp_a, &attr, IBV_QP_STATE, &init) &&
              attr.qp_state == IBV_QPS_ERR, "QP state %d after the error",
              attr.qp_state);
    }
    wr[0].wr_id = 13;
    wr[0].wr.rdma.rkey = fx.mr_b->rkey;
    CHECK(!ibv_post_send(fx.qp_a, wr, &bad), "post in ERR");
    CHECK(poll_one(fx.cq_a, &wc) && wc.wr_id == 13 &&
          wc.status == IBV_WC_WR_FLUSH_ERR, "in ERR: %s",
          ibv_wc_status_str(wc.status));
}

static void test_teardown(void)
{
    CHECK(fx.ctx, "no context");
    if (fx.qp_a) {
        CHECK(!ibv_destroy_qp(fx.qp_a) && !ibv_destroy_qp(fx.qp_b),
              "ibv_destroy_qp");
        CHECK(!ibv_destroy_cq(fx.cq_a) && !ibv_destroy_cq(fx.cq_b),
              "ibv_destroy_cq");
        CHECK(!ibv_dereg_mr(fx.mr_a) && !ibv_dereg_mr(fx.mr_b),
              "ibv_dereg_mr");
        CHECK(!ibv_dealloc_pd(fx.pd), "ibv_dealloc_pd");
    }
    CHECK(!ibv_close_device(fx.ctx), "ibv_close_device");
}

int main(void)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } groups[] = {
        { "device_and_port_queries", test_device },
        { "bad_calls_and_errnos", test_bad_calls },
        { "connect_two_qps", test_setup },
        { "library_abi", test_library_abi },
        { "rdma_write_two_sges_and_read", test_rdma },
        { "send_and_write_with_imm", test_imm },
        { "atomics", test_atomics },
        { "shared_receive_queue_and_async_events", test_srq },
        { "extended_cq_and_qp", test_extended },
        { "completion_timestamps", test_timestamps },
        { "device_memory", test_dm },
        { "inline_data", test_inline },
        { "post_errors_and_error_completions", test_post_errors },
        { "teardown", test_teardown },
    };
    int n = sizeof(groups) / sizeof(groups[0]), failed = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    fx.buf_a = mmap(NULL, BUF_SIZE, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    fx.buf_b = mmap(NULL, BUF_SIZE, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (fx.buf_a == MAP_FAILED || fx.buf_b == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    printf("1..%d\n", n);
    for (int i = 0; i < n; i++) {
        group_failed = false;
        groups[i].fn();
        printf("%sok %d %s\n", group_failed ? "not " : "", i + 1,
               groups[i].name);
        failed += group_failed;
    }
    return failed ? 1 : 0;
}
