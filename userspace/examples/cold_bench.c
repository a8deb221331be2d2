/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Warm against cold RDMA WRITEs on on-demand memory, through libibverbs
 * (on pfnic: Debian's libibverbs.so.1, pfnic's provider and the RDMA
 * core). scripts/bench.sh runs it once in each memory mode that faults on
 * demand (PFNIC_MEM_MODE=sva, odp), in one guest, and sets the runs side
 * by side.
 *
 * One process, two RC QPs on the first port of one device, connected to
 * each other; a source and a target buffer, each an on-demand MR
 * (IBV_ACCESS_ON_DEMAND). For each size, each repetition times:
 *   - the CPU's own first touch, on 64 pages of a scratch buffer of each
 *     kind (whatever the size): dropped (MADV_DONTNEED), then one byte
 *     loaded from each page of one and stored to each page of the other,
 *     every access timed alone;
 *   - warm: both buffers touched, then ITERS WRITEs from source to target,
 *     each from its post to its completion (polled);
 *   - cold: ITERS times, both buffers dropped, then one WRITE timed the
 *     same way: the device faults in every page of both.
 * and reports the medians, the device's added cost per faulted page
 * ((cold - warm) / (2 * pages)) and its ratio to the CPU's (the mean of a
 * first load and a first store).
 *
 * usage: pfnic-cold-bench [-d DEVICE] [-g GID_INDEX] [-n ITERS] [-r REPS]
 *                         [-l LABEL] [SIZE...]
 * Prints one JSON object on stdout (the rows), a table on stderr.
 */

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define PAGE 4096
#define MAX_SIZES 8
/* Pages of each kind of CPU first touch timed per repetition. */
#define TOUCH_PAGES 64

static void die(const char *what)
{
    fprintf(stderr, "pfnic-cold-bench: %s: %s\n", what, strerror(errno));
    exit(1);
}

static double now_us(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct bench {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp[2];
    struct ibv_port_attr port;
    int gid_index;
};

static void connect_qp(struct bench *b, struct ibv_qp *qp, uint32_t dest)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT,
        .port_num = 1,
        .qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
    };

    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                      IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        die("ibv_modify_qp to INIT");
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = b->port.active_mtu;
    a.dest_qp_num = dest;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = 1;
    if (b->port.link_layer == IBV_LINK_LAYER_ETHERNET) {
        /* RoCE: to this port's own GID. */
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.sgid_index = b->gid_index;
        a.ah_attr.grh.hop_limit = 1;
        if (ibv_query_gid(b->ctx, 1, b->gid_index, &a.ah_attr.grh.dgid))
            die("ibv_query_gid");
    } else {
        a.ah_attr.dlid = b->port.lid;
    }
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        die("ibv_modify_qp to RTR");
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
                      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                      IBV_QP_MAX_QP_RD_ATOMIC))
        die("ibv_modify_qp to RTS");
}

static void setup(struct bench *b, const char *name)
{
    struct ibv_device **list = ibv_get_device_list(NULL), *dev = NULL;
    struct ibv_qp_init_attr init = {
        .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 4, .max_recv_wr = 1, .max_send_sge = 1,
                 .max_recv_sge = 1 },
    };

    if (!list)
        die("ibv_get_device_list");
    for (int i = 0; list[i]; i++)
        if (!name || !strcmp(ibv_get_device_name(list[i]), name)) {
            dev = list[i];
            break;
        }
    if (!dev) {
        errno = ENODEV;
        die(name ? name : "no RDMA device");
    }
    b->ctx = ibv_open_device(dev);
    if (!b->ctx)
        die("ibv_open_device");
    ibv_free_device_list(list);
    if (ibv_query_port(b->ctx, 1, &b->port))
        die("ibv_query_port");
    b->pd = ibv_alloc_pd(b->ctx);
    b->cq = ibv_create_cq(b->ctx, 8, NULL, NULL, 0);
    if (!b->pd || !b->cq)
        die("ibv_alloc_pd / ibv_create_cq");
    init.send_cq = init.recv_cq = b->cq;
    for (int i = 0; i < 2; i++) {
        b->qp[i] = ibv_create_qp(b->pd, &init);
        if (!b->qp[i])
            die("ibv_create_qp");
    }
    connect_qp(b, b->qp[0], b->qp[1]->qp_num);
    connect_qp(b, b->qp[1], b->qp[0]->qp_num);
}

/* One WRITE of @len bytes from @src to @dst, timed from its post to its completion. */
static double write_once(struct bench *b, struct ibv_mr *src, struct ibv_mr *dst,
                         size_t len)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t)src->addr, .length = len, .lkey = src->lkey,
    };
    struct ibv_send_wr wr = {
        .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
        .send_flags = IBV_SEND_SIGNALED,
        .wr.rdma = { .remote_addr = (uintptr_t)dst->addr, .rkey = dst->rkey },
    }, *bad;
    struct ibv_wc wc;
    double t0 = now_us();
    int n;

    if (ibv_post_send(b->qp[0], &wr, &bad))
        die("ibv_post_send");
    while ((n = ibv_poll_cq(b->cq, 1, &wc)) == 0)
        if (now_us() - t0 > 60e6) {
            errno = ETIMEDOUT;
            die("no completion in 60 s");
        }
    if (n < 0)
        die("ibv_poll_cq");
    if (wc.status != IBV_WC_SUCCESS) {
        fprintf(stderr, "pfnic-cold-bench: WRITE completed %s\n",
                ibv_wc_status_str(wc.status));
        exit(1);
    }
    return now_us() - t0;
}

static void drop(void *p, size_t len)
{
    if (madvise(p, len, MADV_DONTNEED))
        die("madvise");
}

/* The CPU's first load from each page of @a and first store to each page of @b. */
static void cpu_touch(uint8_t *a, uint8_t *b, size_t len, double *load,
                      double *store)
{
    volatile uint8_t *va = a, *vb = b;

    drop(a, len);
    drop(b, len);
    for (size_t off = 0; off < len; off += PAGE) {
        double t0 = now_us();

        (void)va[off];
        load[off / PAGE] = now_us() - t0;
        t0 = now_us();
        vb[off] = 1;
        store[off / PAGE] = now_us() - t0;
    }
}

int main(int argc, char **argv)
{
    const char *name = NULL, *label = NULL;
    size_t sizes[MAX_SIZES] = { 4096, 65536, 1048576 };
    int nsizes = 3, iters = 10, reps = 3, opt;
    struct bench b = { .gid_index = 1 };
    uint8_t *scratch_a, *scratch_b;

    while ((opt = getopt(argc, argv, "d:g:n:r:l:")) != -1) {
        switch (opt) {
        case 'd': name = optarg; break;
        case 'g': b.gid_index = atoi(optarg); break;
        case 'n': iters = atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        case 'l': label = optarg; break;
        default:
            fprintf(stderr, "usage: pfnic-cold-bench [-d DEVICE] [-g GID_INDEX] "
                    "[-n ITERS] [-r REPS] [-l LABEL] [SIZE...]\n");
            return 2;
        }
    }
    if (optind < argc) {
        nsizes = 0;
        for (; optind < argc && nsizes < MAX_SIZES; optind++) {
            sizes[nsizes] = strtoul(argv[optind], NULL, 0);
            if (sizes[nsizes] < PAGE || sizes[nsizes] % PAGE) {
                fprintf(stderr, "pfnic-cold-bench: sizes are whole pages\n");
                return 2;
            }
            nsizes++;
        }
    }
    if (iters < 1 || reps < 1) {
        fprintf(stderr, "pfnic-cold-bench: -n and -r are at least 1\n");
        return 2;
    }
    scratch_a = mmap(NULL, TOUCH_PAGES * PAGE, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    scratch_b = mmap(NULL, TOUCH_PAGES * PAGE, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (scratch_a == MAP_FAILED || scratch_b == MAP_FAILED)
        die("memory for the CPU's reference");
    setup(&b, name);

    if (!label)
        label = ibv_get_device_name(b.ctx->device);
    printf("{\"label\": \"%s\", \"device\": \"%s\", "
           "\"iters\": %d, \"reps\": %d, \"rows\": [", label,
           ibv_get_device_name(b.ctx->device), iters, reps);
    fprintf(stderr, "%s\n%8s %10s %10s %12s %12s %8s\n", label, "size",
            "warm us", "cold us", "device/page", "CPU/page", "ratio");
    for (int s = 0; s < nsizes; s++) {
        size_t len = sizes[s], pages = len / PAGE, n = (size_t)iters * reps;
        int access = IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE |
                     IBV_ACCESS_REMOTE_WRITE;
        uint8_t *src = mmap(NULL, len, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        uint8_t *dst = mmap(NULL, len, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        double *warm = calloc(n, sizeof(double)), *cold = calloc(n, sizeof(double));
        double *load = calloc(TOUCH_PAGES * reps, sizeof(double));
        double *store = calloc(TOUCH_PAGES * reps, sizeof(double));
        struct ibv_mr *smr, *dmr;
        double w, c, per_page, cpu, cpu_load, cpu_store;

        if (src == MAP_FAILED || dst == MAP_FAILED || !warm || !cold || !load ||
            !store)
            die("memory for the buffers");
        smr = ibv_reg_mr(b.pd, src, len, access);
        dmr = ibv_reg_mr(b.pd, dst, len, access);
        if (!smr || !dmr)
            die("ibv_reg_mr with IBV_ACCESS_ON_DEMAND");
        for (int r = 0; r < reps; r++) {
            cpu_touch(scratch_a, scratch_b, TOUCH_PAGES * PAGE,
                      load + r * TOUCH_PAGES, store + r * TOUCH_PAGES);
            memset(src, r, len);
            memset(dst, r, len);
            write_once(&b, smr, dmr, len); /* the device's translations cached */
            for (int i = 0; i < iters; i++)
                warm[r * iters + i] = write_once(&b, smr, dmr, len);
            for (int i = 0; i < iters; i++) {
                drop(src, len);
                drop(dst, len);
                cold[r * iters + i] = write_once(&b, smr, dmr, len);
            }
        }
        w = median(warm, n);
        c = median(cold, n);
        per_page = (c - w) / (2.0 * pages);
        cpu_load = median(load, TOUCH_PAGES * reps);
        cpu_store = median(store, TOUCH_PAGES * reps);
        cpu = (cpu_load + cpu_store) / 2;
        printf("%s{\"size\": %zu, \"pages\": %zu, \"warm_us\": %.2f, "
               "\"cold_us\": %.2f, \"device_per_page_us\": %.3f, "
               "\"cpu_load_us\": %.3f, \"cpu_store_us\": %.3f, "
               "\"ratio\": %.3f}", s ? ", " : "", len, pages, w, c, per_page,
               cpu_load, cpu_store,
               per_page / cpu);
        fprintf(stderr, "%8zu %10.1f %10.1f %12.2f %12.2f %8.2f\n", len, w, c,
                per_page, cpu, per_page / cpu);
        ibv_dereg_mr(smr);
        ibv_dereg_mr(dmr);
        munmap(src, len);
        munmap(dst, len);
        free(warm);
        free(cold);
        free(load);
        free(store);
    }
    printf("]}\n");
    for (int i = 0; i < 2; i++)
        ibv_destroy_qp(b.qp[i]);
    ibv_destroy_cq(b.cq);
    ibv_dealloc_pd(b.pd);
    ibv_close_device(b.ctx);
    return 0;
}
