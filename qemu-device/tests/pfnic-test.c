/*
 * pfnic qtests: the helpers the areas share (pfnic-test.h).
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "pfnic-test.h"

QPfnic *pfnic_nic;
/*
 * pfnic A: the graph's, or the one setup_topology() reaches on a machine
 * the test started; B: the wire tests' second, on rp1.
 */
static QPfnic *pfnic_nic_a;
static QPCIBusPC pfnic_bus;
static QPfnic pfnic_a, pfnic_b;
static char *pfnic_cmdline;
uint64_t pfnic_mem;
uint64_t tl_pages[4], tr_pages[4];

uint32_t nic_cfg_readl(uint16_t off)
{
    return qpci_config_readl(&pfnic_nic->dev, off);
}

uint16_t nic_cfg_readw(uint16_t off)
{
    return qpci_config_readw(&pfnic_nic->dev, off);
}

void nic_cfg_writel(uint16_t off, uint32_t val)
{
    qpci_config_writel(&pfnic_nic->dev, off, val);
}

void nic_cfg_writew(uint16_t off, uint16_t val)
{
    qpci_config_writew(&pfnic_nic->dev, off, val);
}

void setup_topology(void)
{
    qpci_init_q35(&pfnic_bus, global_qtest, NULL);
    qpfnic_init(&pfnic_a, &pfnic_bus.bus, QPFNIC_RP0_DEVFN, 1);
    pfnic_nic = pfnic_nic_a = &pfnic_a;
}

void *pfnic_qos_before(GString *cmd_line, void *arg)
{
    g_free(pfnic_cmdline);
    pfnic_cmdline = g_strdup(cmd_line->str);
    return arg;
}

const char *pfnic_qos_cmdline(void)
{
    return pfnic_cmdline;
}

void pfnic_add_test(const char *name, QOSTestFunc fn, const char *device_opts,
                    QOSBeforeTest before)
{
    QOSGraphTestOptions opts = {
        .edge.extra_device_opts = device_opts,
        .before = before ? before : pfnic_qos_before,
    };

    qos_add_test(name, "pfnic", fn, &opts);
}

void pfnic_add_wire_test(const char *name, QOSTestFunc fn, const char *a_opts,
                         const char *b_opts, QOSBeforeTest before)
{
    g_autofree char *a = g_strconcat("netdev=w0,mac=52:54:00:00:00:0a",
                                     a_opts ? "," : NULL, a_opts, NULL);
    g_autofree char *b = g_strconcat("-netdev hubport,id=w0,hubid=0 "
                                     "-netdev hubport,id=w1,hubid=0 "
                                     "-device pfnic,bus=rp1,netdev=w1,"
                                     "mac=52:54:00:00:00:0b",
                                     b_opts ? "," : NULL, b_opts, NULL);
    QOSGraphTestOptions opts = {
        .edge.extra_device_opts = a,
        .edge.after_cmd_line = b,
        .before = before ? before : pfnic_qos_before,
    };

    qos_add_test(name, "pfnic", fn, &opts);
}

void pfnic_qos_start(void *obj, QGuestAllocator *alloc)
{
    uint64_t align = 16 * MiB;
    static const int tl[4] = { 5, 2, 9, 7 }, tr[4] = { 12, 20, 15, 11 };

    pfnic_nic = pfnic_nic_a = obj;
    pfnic_mem = QEMU_ALIGN_UP(guest_alloc(alloc, PFNIC_MEM_SIZE + align),
                              align);
    for (int i = 0; i < 4; i++) {
        tl_pages[i] = DATA_PAGE(tl[i]);
        tr_pages[i] = DATA_PAGE(tr[i]);
    }
}

void pfnic_qos_end(void)
{
    qtest_end();
    /* The next test starts a QEMU of its own, as each did before qos. */
    qos_invalidate_command_line();
}

void pfnic_qos_restart(const char *extra)
{
    qtest_end();
    qtest_start(g_strdup_printf("%s%s", pfnic_cmdline, extra));
    setup_topology();
}

void map_bars(void)
{
    qpfnic_map_bars(pfnic_nic);
}

uint32_t reg_read(uint32_t reg)
{
    return qpci_io_readl(&pfnic_nic->dev, pfnic_nic->bar0, reg);
}

void reg_write(uint32_t reg, uint32_t val)
{
    qpci_io_writel(&pfnic_nic->dev, pfnic_nic->bar0, reg, val);
}

int ext_caps(uint16_t *ids, uint16_t *offs, int max)
{
    return qpfnic_ext_caps(pfnic_nic, ids, offs, max);
}

void use_nic(int n)
{
    pfnic_nic = n ? &pfnic_b : pfnic_nic_a;
}

void wire_qos_start(void *obj, QGuestAllocator *alloc)
{
    pfnic_qos_start(obj, alloc);
    qpfnic_init_peer(&pfnic_b, obj);
    use_nic(1);
    map_bars();
    use_nic(0);
    map_bars();
}

uint16_t find_cap(uint8_t id)
{
    uint8_t pos = nic_cfg_readw(PCI_CAPABILITY_LIST) & 0xfc;

    while (pos) {
        uint16_t hdr = nic_cfg_readw(pos);

        if ((hdr & 0xff) == id) {
            return pos;
        }
        pos = (hdr >> 8) & 0xfc;
    }
    return 0;
}

uint32_t msix_enable_masked(void)
{
    uint16_t msix = find_cap(PCI_CAP_ID_MSIX);

    nic_cfg_writew(msix + PCI_MSIX_FLAGS,
                   PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL);
    return nic_cfg_readl(msix + PCI_MSIX_PBA) & ~PCI_MSIX_PBA_BIR;
}

void ctx_select(uint32_t ctx)
{
    reg_write(PFNIC_REG_CTX_SELECT, ctx);
}

bool ctx_active(uint32_t ctx)
{
    ctx_select(ctx);
    return reg_read(PFNIC_REG_CTX_STATUS) & PFNIC_CTX_STATUS_ACTIVE;
}

void enable_ext_cap(uint16_t id)
{
    uint16_t ids[8], offs[8];
    int n = ext_caps(ids, offs, 8);

    for (int i = 0; i < n; i++) {
        if (ids[i] != id) {
            continue;
        }
        switch (id) {
        case PCI_EXT_CAP_ID_PASID:
            nic_cfg_writew(offs[i] + PCI_PASID_CTRL, PCI_PASID_CTRL_ENABLE);
            break;
        case PCI_EXT_CAP_ID_ATS:
            nic_cfg_writew(offs[i] + PCI_ATS_CTRL, PCI_ATS_CTRL_ENABLE);
            break;
        case PCI_EXT_CAP_ID_PRI:
            nic_cfg_writew(offs[i] + PCI_PRI_CTRL, PCI_PRI_CTRL_ENABLE);
            break;
        }
    }
}

void enable_sva_caps(void)
{
    enable_ext_cap(PCI_EXT_CAP_ID_PASID);
    enable_ext_cap(PCI_EXT_CAP_ID_ATS);
    enable_ext_cap(PCI_EXT_CAP_ID_PRI);
}

void assert_refused(void)
{
    g_assert_true(reg_read(PFNIC_REG_STATUS) & PFNIC_STATUS_ERROR);
    reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
}

void start_ctx(uint32_t ctx, uint64_t ring)
{
    ctx_select(ctx);
    reg_write(PFNIC_REG_CTX_RING_LO, ring);
    reg_write(PFNIC_REG_CTX_RING_HI, ring >> 32);
    reg_write(PFNIC_REG_CTX_RING_SIZE, 8);
    reg_write(PFNIC_REG_CTX_VECTOR, 2);
    reg_write(PFNIC_REG_CTX_PASID, 5);
    reg_write(PFNIC_REG_CTX_CTRL, PFNIC_CTX_CTRL_ENABLE);
    g_assert_true(ctx_active(ctx));
}

void doorbell(uint32_t ctx, uint32_t tail)
{
    reg_write(PFNIC_REG_RING_DB, ctx << 16 | (tail & 0xffff));
}

void start_ctx_no_pasid(uint32_t ctx, uint64_t ring)
{
    ctx_select(ctx);
    reg_write(PFNIC_REG_CTX_RING_LO, ring);
    reg_write(PFNIC_REG_CTX_RING_HI, ring >> 32);
    reg_write(PFNIC_REG_CTX_RING_SIZE, 8);
    reg_write(PFNIC_REG_CTX_VECTOR, 2);
    reg_write(PFNIC_REG_CTX_CTRL,
              PFNIC_CTX_CTRL_ENABLE | PFNIC_CTX_CTRL_NO_PASID);
    g_assert_cmphex(reg_read(PFNIC_REG_CTX_STATUS), ==,
                    PFNIC_CTX_STATUS_ACTIVE | PFNIC_CTX_STATUS_NO_PASID);
}

void assert_no_ats_pri(void)
{
    for (int c = 0; c < PFNIC_CNT_NR; c++) {
        g_assert_cmpint(reg_read(PFNIC_REG_COUNTERS + 4 * c), ==, 0);
    }
}

/*
 * The arguments go in and come back in one qtest command each; the device
 * still sees 4-byte accesses, the only size its control BAR takes.
 */
uint32_t cmd(uint32_t op, uint32_t *args, int n)
{
    uint32_t le[PFNIC_CMD_ARGS];

    g_assert(n <= PFNIC_CMD_ARGS);
    for (int i = 0; i < n; i++) {
        le[i] = cpu_to_le32(args[i]);
    }
    if (n) {
        qpci_memwrite(&pfnic_nic->dev, pfnic_nic->bar0, PFNIC_REG_CMD_ARG,
                      le, 4 * n);
    }
    reg_write(PFNIC_REG_CMD_OP, op);
    if (args) {
        qpci_memread(&pfnic_nic->dev, pfnic_nic->bar0, PFNIC_REG_CMD_ARG,
                     le, sizeof(le));
        for (int i = 0; i < PFNIC_CMD_ARGS; i++) {
            args[i] = le32_to_cpu(le[i]);
        }
    }
    return reg_read(PFNIC_REG_CMD_STATUS);
}

uint32_t cmd1(uint32_t op, uint32_t a0)
{
    uint32_t a[PFNIC_CMD_ARGS] = { a0 };

    return cmd(op, a, 1);
}

uint32_t mr_set_flags(uint32_t index, uint32_t ctx, uint32_t pd,
                             uint32_t access, uint64_t addr, uint64_t len,
                             uint32_t flags, uint32_t *key)
{
    uint32_t a[PFNIC_CMD_ARGS] = {
        index, ctx, pd, access, addr, addr >> 32, len, len >> 32, flags,
    };
    uint32_t st = cmd(PFNIC_CMD_MR_SET, a, PFNIC_CMD_ARGS);

    if (key) {
        *key = a[0];
    }
    return st;
}

uint32_t mr_set(uint32_t index, uint32_t ctx, uint32_t pd,
                       uint32_t access, uint64_t addr, uint64_t len,
                       uint32_t *key)
{
    return mr_set_flags(index, ctx, pd, access, addr, len, 0, key);
}

bool cq_ts[PFNIC_MAX_CQS];

uint32_t cq_create_flags(uint32_t cqn, uint32_t ctx, uint32_t log2,
                                uint32_t flags)
{
    uint64_t ring = CQ_RING + cqn * 0x10000ULL, rec = CQ_REC + cqn * 0x100;
    uint32_t a[PFNIC_CMD_ARGS] = {
        cqn, ctx, ring, ring >> 32, log2, rec, rec >> 32, flags,
    };
    uint8_t zero[0x10000] = { };
    uint32_t st;

    memwrite(ring, zero, sizeof(zero));
    memwrite(rec, zero, 16);
    st = cmd(PFNIC_CMD_CQ_CREATE, a, PFNIC_CMD_ARGS);
    if (st == PFNIC_CMD_OK) {
        cq_ts[cqn] = flags & PFNIC_CQ_FLAG_TIMESTAMP;
    }
    return st;
}

uint32_t cq_create(uint32_t cqn, uint32_t ctx, uint32_t log2)
{
    return cq_create_flags(cqn, ctx, log2, 0);
}

uint32_t qp_create_full(uint32_t qpn, uint32_t ctx, uint32_t pd,
                               uint32_t scq, uint32_t rcq, uint32_t log2,
                               uint32_t rq_log2, uint32_t flags,
                               uint32_t srqn)
{
    uint64_t sq = SQ_ADDR + qpn * 0x10000ULL, rq = RQ_ADDR + qpn * 0x10000ULL;
    uint64_t rec = QP_REC + qpn * 0x100;
    uint32_t a[PFNIC_CMD_ARGS] = {
        qpn, ctx, pd, scq, rcq, sq, sq >> 32, log2, rq, rq >> 32, rq_log2,
        rec, rec >> 32, flags, srqn,
    };

    /* All arguments: a14 (ABI 1.11, the SRQ) must not be a stale value. */
    return cmd(PFNIC_CMD_QP_CREATE, a, PFNIC_CMD_ARGS);
}

uint32_t qp_create(uint32_t qpn, uint32_t ctx, uint32_t pd,
                          uint32_t scq, uint32_t rcq, uint32_t log2,
                          uint32_t flags)
{
    return qp_create_full(qpn, ctx, pd, scq, rcq, log2, log2, flags, 0);
}

uint32_t qp_create_srq(uint32_t qpn, uint32_t ctx, uint32_t pd,
                              uint32_t scq, uint32_t rcq, uint32_t srqn)
{
    return qp_create_full(qpn, ctx, pd, scq, rcq, 4, 4, PFNIC_QP_FLAG_SRQ,
                          srqn);
}

uint32_t qp_modify_full(uint32_t qpn, uint32_t state, uint32_t access,
                               uint32_t dest, uint32_t rnr_timer,
                               uint32_t rnr_retry, uint32_t retry_cnt,
                               uint32_t timeout)
{
    uint32_t a[PFNIC_CMD_ARGS] = {
        qpn, state, access, dest, rnr_timer, rnr_retry, retry_cnt,
        [11] = timeout,
    };

    /* All arguments: a7.. (the wire's) must not be stale values. */
    return cmd(PFNIC_CMD_QP_MODIFY, a, PFNIC_CMD_ARGS);
}

uint32_t qp_modify(uint32_t qpn, uint32_t state, uint32_t access,
                          uint32_t dest, uint32_t rnr_timer,
                          uint32_t rnr_retry)
{
    return qp_modify_full(qpn, state, access, dest, rnr_timer, rnr_retry, 7,
                          TEST_ACK_TIMEOUT);
}

void qp_connect(uint32_t qpn, uint32_t dest, uint32_t rnr_retry)
{
    uint32_t acc = PFNIC_ACCESS_REMOTE_WRITE | PFNIC_ACCESS_REMOTE_READ |
                   PFNIC_ACCESS_REMOTE_ATOMIC;

    g_assert_cmpint(qp_modify(qpn, PFNIC_QPS_INIT, acc, dest, 1, rnr_retry),
                    ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_modify(qpn, PFNIC_QPS_RTR, acc, dest, 1, rnr_retry),
                    ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_modify(qpn, PFNIC_QPS_RTS, acc, dest, 1, rnr_retry),
                    ==, PFNIC_CMD_OK);
}

uint32_t qp_query(uint32_t qpn, uint32_t *a)
{
    a[0] = qpn;
    return cmd(PFNIC_CMD_QP_QUERY, a, 1);
}

uint32_t qp_state(uint32_t qpn)
{
    uint32_t a[PFNIC_CMD_ARGS];

    g_assert_cmpint(qp_query(qpn, a), ==, PFNIC_CMD_OK);
    return a[0];
}

void post_wqe(uint64_t queue, uint32_t slot, uint8_t opcode,
                     uint8_t flags, uint64_t wr_id, int num_sge,
                     uint64_t addr, uint32_t len, uint32_t key)
{
    PfnicWqe w = {
        .opcode = opcode, .flags = flags, .num_sge = num_sge,
        .imm_data = 0x78563412, .wr_id = cpu_to_le64(wr_id),
        .remote_addr = cpu_to_le64(0x20000000), .rkey = cpu_to_le32(key),
        .sge[0] = {
            .addr = cpu_to_le64(addr), .length = cpu_to_le32(len),
            .lkey = cpu_to_le32(key),
        },
    };

    memwrite(queue + slot * PFNIC_WQE_SIZE, &w, sizeof(w));
}

void verbs_db(uint32_t ctx, uint32_t off, uint32_t val)
{
    writel(BAR2_ADDR + ctx * PFNIC_DOORBELL_PAGE_SIZE + off, val);
}

uint64_t clock_read(uint32_t ctx)
{
    uint64_t page = BAR2_ADDR + ctx * PFNIC_DOORBELL_PAGE_SIZE;
    uint32_t hi, lo;

    do {
        hi = readl(page + PFNIC_DB_CLOCK_HI);
        lo = readl(page + PFNIC_DB_CLOCK_LO);
    } while (hi != readl(page + PFNIC_DB_CLOCK_HI));
    return (uint64_t)hi << 32 | lo;
}

uint64_t cqe_addr(uint32_t cqn, uint32_t slot)
{
    return CQ_RING + cqn * 0x10000ULL +
           slot * (cq_ts[cqn] ? PFNIC_CQE_TS_SIZE : PFNIC_CQE_SIZE);
}

PfnicCqe read_cqe(uint32_t cqn, uint32_t slot)
{
    PfnicCqe c;

    memread(cqe_addr(cqn, slot), &c, sizeof(c));
    c.wr_id = le64_to_cpu(c.wr_id);
    c.byte_len = le32_to_cpu(c.byte_len);
    c.qp_num = le32_to_cpu(c.qp_num);
    c.src_qp = le32_to_cpu(c.src_qp);
    c.vendor_err = le32_to_cpu(c.vendor_err);
    return c;
}

PfnicCqe wait_cqe(uint32_t cqn, uint32_t slot, uint8_t owner)
{
    PfnicCqe c = read_cqe(cqn, slot);

    for (int i = 0; i < 1000 && c.owner != owner; i++) {
        clock_step(10000);
        c = read_cqe(cqn, slot);
    }
    g_assert_cmpint(c.owner, ==, owner);
    return c;
}

void read_eqe(uint32_t slot, uint8_t *type, uint8_t *owner,
                     uint32_t *object)
{
    uint8_t e[PFNIC_EQE_SIZE];

    memread(EQ_ADDR + slot * PFNIC_EQE_SIZE, e, sizeof(e));
    *type = e[0];
    *owner = e[3];
    *object = ldl_le_p(&e[4]);
}

void eq_setup(uint32_t size)
{
    uint8_t zero[PFNIC_EQE_SIZE * 16] = { };

    memwrite(EQ_ADDR, zero, sizeof(zero));
    reg_write(PFNIC_REG_EQ_BASE_LO, EQ_ADDR);
    reg_write(PFNIC_REG_EQ_BASE_HI, 0);
    reg_write(PFNIC_REG_EQ_VECTOR, EQ_VEC);
    reg_write(PFNIC_REG_EQ_SIZE, size);
}

uint32_t ctx_and_mr_setup(void)
{
    uint32_t key;

    enable_sva_caps();
    start_ctx(1, RING_ADDR);
    g_assert_cmpint(mr_set(1, 1, 7, PFNIC_ACCESS_LOCAL_WRITE |
                           PFNIC_ACCESS_REMOTE_WRITE |
                           PFNIC_ACCESS_REMOTE_READ |
                           PFNIC_ACCESS_REMOTE_ATOMIC |
                           PFNIC_ACCESS_ON_DEMAND,
                           0x10000000, 0x20000000, &key), ==, PFNIC_CMD_OK);
    return key;
}

uint32_t verbs_setup(uint32_t rnr_retry)
{
    uint32_t key;

    key = ctx_and_mr_setup();
    g_assert_cmpint(cq_create(1, 1, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create(2, 1, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(2, 1, 7, 1, 2, 4, 0), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(3, 1, 7, 1, 2, 4, 0), ==, PFNIC_CMD_OK);
    qp_connect(2, 3, rnr_retry);
    qp_connect(3, 2, rnr_retry);
    return key;
}

void post_write(uint32_t qpn, uint32_t slot, uint64_t wr_id,
                       uint32_t lkey, uint32_t rkey, uint64_t raddr,
                       uint32_t len)
{
    PfnicWqe w = {
        .opcode = PFNIC_WR_RDMA_WRITE, .flags = PFNIC_SEND_SIGNALED,
        .num_sge = 1, .wr_id = cpu_to_le64(wr_id),
        .remote_addr = cpu_to_le64(raddr), .rkey = cpu_to_le32(rkey),
        .sge[0] = {
            .addr = cpu_to_le64(0x10000000), .length = cpu_to_le32(len),
            .lkey = cpu_to_le32(lkey),
        },
    };

    memwrite(SQ_ADDR + qpn * 0x10000 + slot * PFNIC_WQE_SIZE, &w, sizeof(w));
    verbs_db(1, PFNIC_DB_SQ, qpn << 16 | (slot + 1));
}

void post_send0(uint32_t qpn, uint32_t slot, uint64_t wr_id,
                       uint32_t key)
{
    post_wqe(SQ_ADDR + qpn * 0x10000, slot, PFNIC_WR_SEND,
             PFNIC_SEND_SIGNALED, wr_id, 0, 0, 0, key);
    verbs_db(1, PFNIC_DB_SQ, qpn << 16 | (slot + 1));
}

void post_recv0(uint32_t qpn, uint32_t slot, uint64_t wr_id,
                       uint32_t key)
{
    post_wqe(RQ_ADDR + qpn * 0x10000, slot, 0, 0, wr_id, 0, 0, 0, key);
    verbs_db(1, PFNIC_DB_RQ, qpn << 16 | (slot + 1));
}

void qp_reconnect(uint32_t qpn, uint32_t dest)
{
    g_assert_cmpint(qp_modify(qpn, PFNIC_QPS_RESET, 0, 0, 0, 0), ==,
                    PFNIC_CMD_OK);
    qp_connect(qpn, dest, 7);
}

uint64_t ctx_access_errors(uint32_t ctx)
{
    uint32_t a[PFNIC_CMD_ARGS] = { ctx };

    g_assert_cmpint(cmd(PFNIC_CMD_CTX_QUERY, a, 1), ==, PFNIC_CMD_OK);
    return a[0] | (uint64_t)a[1] << 32;
}

uint32_t run_desc(uint32_t n, PfnicDesc *d)
{
    uint64_t addr = RING_ADDR + (n % 8) * PFNIC_DESC_SIZE;
    uint32_t status = 0;

    memwrite(addr, d, sizeof(*d));
    doorbell(1, n + 1);
    for (int i = 0; i < 1000 && !(status & PFNIC_DESC_DONE); i++) {
        clock_step(1000);
        memread(addr + offsetof(PfnicDesc, status), &status, 4);
        status = le32_to_cpu(status);
    }
    return status;
}

uint32_t mtt_write(uint32_t mr, uint64_t first, uint32_t count,
                          uint64_t src)
{
    uint32_t a[PFNIC_CMD_ARGS] = {
        mr, first, count, src, src >> 32, first >> 32,
    };

    return cmd(PFNIC_CMD_MTT_WRITE, a, PFNIC_CMD_ARGS);
}

uint32_t mtt_invalidate(uint32_t mr, uint64_t first, uint32_t count)
{
    uint32_t a[PFNIC_CMD_ARGS] = { mr, first, count, first >> 32 };

    return cmd(PFNIC_CMD_MTT_INVALIDATE, a, PFNIC_CMD_ARGS);
}

uint32_t mtt_map(uint32_t mr, uint64_t first, const uint64_t *pages,
                        uint32_t n, uint64_t bits)
{
    uint64_t e[16];

    g_assert_cmpint(n, <=, ARRAY_SIZE(e));
    for (uint32_t i = 0; i < n; i++) {
        e[i] = cpu_to_le64(pages[i] | bits);
    }
    memwrite(MTT_SRC, e, n * sizeof(e[0]));
    return mtt_write(mr, first, n, MTT_SRC);
}

uint32_t table_mr(uint32_t index, uint32_t ctx, uint64_t addr,
                         uint64_t len, const uint64_t *pages, uint32_t n)
{
    uint32_t key;

    g_assert_cmpint(mr_set_flags(index, ctx, 7, ALL_ACCESS, addr, len,
                                 PFNIC_MR_FLAG_TABLE, &key), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(mtt_map(index, 0, pages, n, MTT_RW), ==, PFNIC_CMD_OK);
    return key;
}

void table_rw(const uint64_t *pages, uint64_t base, uint64_t va,
                     void *buf, size_t len, bool write)
{
    uint8_t *p = buf;

    while (len) {
        uint64_t i = va / 4096 - base / 4096;
        size_t n = MIN(len, 4096 - va % 4096);
        uint64_t gpa = pages[i] + va % 4096;

        if (write) {
            memwrite(gpa, p, n);
        } else {
            memread(gpa, p, n);
        }
        va += n;
        p += n;
        len -= n;
    }
}

uint16_t sq_next[PFNIC_MAX_QPS], rq_next[PFNIC_MAX_QPS];

uint32_t cq_seen[8];

void table_counts_reset(void)
{
    memset(sq_next, 0, sizeof(sq_next));
    memset(rq_next, 0, sizeof(rq_next));
    memset(cq_seen, 0, sizeof(cq_seen));
}

void table_post_wqe(uint32_t ctx, uint32_t qpn, const PfnicWqe *w)
{
    uint16_t slot = sq_next[qpn]++;

    memwrite(SQ_ADDR + qpn * 0x10000 + (slot % 16) * PFNIC_WQE_SIZE, w,
             sizeof(*w));
    verbs_db(ctx, PFNIC_DB_SQ, qpn << 16 | (uint16_t)(slot + 1));
}

void table_post(uint32_t ctx, uint32_t qpn, uint8_t op, uint64_t wr_id,
                       uint64_t laddr, uint32_t len, uint32_t lkey,
                       uint64_t raddr, uint32_t rkey, uint64_t add)
{
    PfnicWqe w = {
        .opcode = op, .flags = PFNIC_SEND_SIGNALED, .num_sge = 1,
        .wr_id = cpu_to_le64(wr_id), .remote_addr = cpu_to_le64(raddr),
        .rkey = cpu_to_le32(rkey), .compare_add = cpu_to_le64(add),
        .sge[0] = {
            .addr = cpu_to_le64(laddr), .length = cpu_to_le32(len),
            .lkey = cpu_to_le32(lkey),
        },
    };

    table_post_wqe(ctx, qpn, &w);
}

void table_recv(uint32_t ctx, uint32_t qpn, uint64_t wr_id,
                       uint64_t addr, uint32_t len, uint32_t key)
{
    uint16_t slot = rq_next[qpn]++;

    post_wqe(RQ_ADDR + qpn * 0x10000, slot % 16, 0, 0, wr_id, 1, addr, len,
             key);
    verbs_db(ctx, PFNIC_DB_RQ, qpn << 16 | (uint16_t)(slot + 1));
}

PfnicCqe table_cqe(uint32_t cqn, uint64_t wr_id, uint8_t status)
{
    uint32_t n = cq_seen[cqn]++;
    uint32_t cons = cpu_to_le32(cq_seen[cqn]);
    PfnicCqe c = wait_cqe(cqn, n % 16, ((n / 16) & 1) ^ 1);

    memwrite(CQ_REC + cqn * 0x100, &cons, sizeof(cons));
    g_assert_cmphex(c.wr_id, ==, wr_id);
    g_assert_cmpint(c.status, ==, status);
    return c;
}

void table_pair_start(void)
{
    uint8_t zero[4096] = { };

    table_counts_reset();
    for (int i = 0; i < 32; i++) {
        memwrite(DATA_PAGE(i), zero, sizeof(zero));
    }
    start_ctx_no_pasid(1, RING_ADDR);
    start_ctx_no_pasid(2, RING_ADDR + 0x1000);
}

void table_pair_connect(void)
{
    g_assert_cmpint(cq_create(1, 1, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create(2, 2, 4), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(2, 1, 7, 1, 1, 4, 0), ==, PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(3, 2, 7, 2, 2, 4, 0), ==, PFNIC_CMD_OK);
    qp_connect(2, 3, 7);
    qp_connect(3, 2, 7);
}

void tables_setup(uint32_t *lkey, uint32_t *rkey)
{
    table_pair_start();
    *lkey = table_mr(1, 1, TL_VA, TL_LEN, tl_pages, 4);
    *rkey = table_mr(2, 2, TR_VA, TR_LEN, tr_pages, 4);
    table_pair_connect();
}

uint32_t fast_mr(uint32_t index, uint32_t ctx, uint32_t pd, uint32_t pages,
                 uint32_t *key)
{
    return mr_set_flags(index, ctx, pd, 0, 0, pages * 4096ULL,
                        PFNIC_MR_FLAG_FAST, key);
}

PfnicWqe reg_mr_wqe(uint64_t wr_id, uint32_t key, uint64_t iova,
                    uint64_t len, uint32_t access, uint64_t pbl,
                    uint32_t pages)
{
    return (PfnicWqe) {
        .opcode = PFNIC_WR_REG_MR, .flags = PFNIC_SEND_SIGNALED,
        .wr_id = cpu_to_le64(wr_id),
        .reg = {
            .iova = cpu_to_le64(iova), .key = cpu_to_le32(key),
            .access = cpu_to_le32(access), .length = cpu_to_le64(len),
            .pbl = cpu_to_le64(pbl), .pages = cpu_to_le32(pages),
        },
    };
}

PfnicWqe local_inv_wqe(uint64_t wr_id, uint32_t key)
{
    return (PfnicWqe) {
        .opcode = PFNIC_WR_LOCAL_INV, .flags = PFNIC_SEND_SIGNALED,
        .imm_data = cpu_to_le32(key), .wr_id = cpu_to_le64(wr_id),
    };
}

PfnicWqe send_inv_wqe(uint64_t wr_id, uint64_t laddr, uint32_t len,
                      uint32_t lkey, uint32_t key)
{
    return (PfnicWqe) {
        .opcode = PFNIC_WR_SEND_WITH_INV, .flags = PFNIC_SEND_SIGNALED,
        .num_sge = len ? 1 : 0, .imm_data = cpu_to_le32(key),
        .wr_id = cpu_to_le64(wr_id),
        .sge[0] = {
            .addr = cpu_to_le64(laddr), .length = cpu_to_le32(len),
            .lkey = cpu_to_le32(lkey),
        },
    };
}

void fast_pbl(uint64_t pbl, const uint64_t *pages, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint64_t e = cpu_to_le64(pages[i]);

        memwrite(pbl + i * sizeof(e), &e, sizeof(e));
    }
}

void pattern(uint8_t *p, size_t len, uint8_t seed)
{
    for (size_t i = 0; i < len; i++) {
        p[i] = seed + i * 7 + (i >> 8);
    }
}

TestEq eq;

void test_eq_setup(TestEq *q, uint64_t base, uint32_t size)
{
    uint8_t zero[PFNIC_EQE_SIZE * 16] = { };

    g_assert_cmpint(size, <=, 16);
    *q = (TestEq) { .base = base, .size = size };
    memwrite(base, zero, sizeof(zero));
    reg_write(PFNIC_REG_EQ_BASE_LO, base);
    reg_write(PFNIC_REG_EQ_BASE_HI, base >> 32);
    reg_write(PFNIC_REG_EQ_VECTOR, EQ_VEC);
    reg_write(PFNIC_REG_EQ_SIZE, size);
}

bool test_eq_peek(TestEq *q, TestEqe *ev)
{
    uint8_t e[PFNIC_EQE_SIZE];

    memread(q->base + (q->seen % q->size) * PFNIC_EQE_SIZE, e, sizeof(e));
    if (e[PFNIC_EQE_OWNER] != (((q->seen / q->size) & 1) ^ 1)) {
        return false;
    }
    *ev = (TestEqe) {
        .type = e[0], .flags = e[PFNIC_EQE_FLAGS], .object = ldl_le_p(&e[4]),
        .data = ldq_le_p(&e[PFNIC_EQE_DATA]),
    };
    return true;
}

TestEqe test_eq_next(TestEq *q)
{
    TestEqe ev;

    for (int i = 0; i < 1000 && !test_eq_peek(q, &ev); i++) {
        clock_step(10000);
    }
    g_assert_true(test_eq_peek(q, &ev));
    q->seen++;
    reg_write(PFNIC_REG_EQ_HEAD, q->seen);
    return ev;
}

void test_eq_none(TestEq *q)
{
    TestEqe ev;

    clock_step(1000000);
    g_assert_false(test_eq_peek(q, &ev));
}

void expect_fault_on(TestEq *q, uint32_t mr, uint64_t first,
                            uint32_t count, bool write)
{
    TestEqe ev = test_eq_next(q);

    g_assert_cmpint(ev.type, ==, PFNIC_EV_PAGE_FAULT);
    g_assert_cmpint(ev.object, ==, mr);
    g_assert_cmphex(ev.flags, ==, write ? PFNIC_EQE_FAULT_WRITE : 0);
    g_assert_cmphex(ev.data, ==, (first & UINT32_MAX) |
                                 (uint64_t)count << 32 | (first >> 32) << 48);
}

uint32_t fault_resume(uint32_t mr, uint64_t first, uint32_t count,
                             uint32_t status)
{
    uint32_t a[PFNIC_CMD_ARGS] = { mr, first, count, status, first >> 32 };

    return cmd(PFNIC_CMD_FAULT_RESUME, a, PFNIC_CMD_ARGS);
}

void fault_serve(uint32_t mr, uint64_t first, const uint64_t *pages,
                        uint32_t n)
{
    g_assert_cmpint(mtt_map(mr, first, pages, n, MTT_RW), ==, PFNIC_CMD_OK);
    g_assert_cmpint(fault_resume(mr, first, n, PFNIC_FAULT_RESUME_RETRY), ==,
                    PFNIC_CMD_OK);
}

void assert_no_cqe(uint32_t cqn)
{
    uint32_t n = cq_seen[cqn];

    clock_step(1000000);
    g_assert_cmpint(read_cqe(cqn, n % 16).owner, !=, ((n / 16) & 1) ^ 1);
}

void assert_mr_faults(uint32_t mr, uint64_t faults, uint64_t handled,
                             uint64_t groups)
{
    uint32_t a[PFNIC_CMD_ARGS] = { mr };

    g_assert_cmpint(cmd(PFNIC_CMD_MR_QUERY, a, 1), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[0] | (uint64_t)a[1] << 32, ==, faults);
    g_assert_cmpint(a[2] | (uint64_t)a[3] << 32, ==, handled);
    g_assert_cmpint(a[12] | (uint64_t)a[13] << 32, ==, groups);
    /* invalidations, prefetch and refused keys: none */
    for (int i = 4; i < 12; i++) {
        g_assert_cmpint(a[i], ==, 0);
    }
}

uint32_t fault_mr(uint32_t index, uint32_t ctx, uint64_t addr,
                         uint64_t len)
{
    uint32_t key;

    g_assert_cmpint(mr_set_flags(index, ctx, 7, ALL_ACCESS, addr, len,
                                 FAULT_TABLE, &key), ==, PFNIC_CMD_OK);
    return key;
}

uint16_t srq_next[PFNIC_MAX_SRQS];

uint32_t srq_create_at(uint32_t srqn, uint32_t ctx, uint32_t pd,
                              uint64_t ring, uint32_t log2, uint64_t rec)
{
    uint32_t a[PFNIC_CMD_ARGS] = {
        srqn, ctx, pd, ring, ring >> 32, log2, rec, rec >> 32,
    };

    return cmd(PFNIC_CMD_SRQ_CREATE, a, PFNIC_CMD_ARGS);
}

uint32_t srq_create(uint32_t srqn, uint32_t ctx, uint32_t pd,
                           uint32_t log2)
{
    uint32_t ones = UINT32_MAX;

    g_assert_cmpint(srqn, <, PFNIC_MAX_SRQS);
    memwrite(SRQ_REC + srqn * 0x100, &ones, sizeof(ones));
    srq_next[srqn] = 0;
    return srq_create_at(srqn, ctx, pd, SRQ_RING + srqn * 0x2000ULL, log2,
                         SRQ_REC + srqn * 0x100);
}

void srq_query(uint32_t srqn, uint32_t *a)
{
    a[0] = srqn;
    g_assert_cmpint(cmd(PFNIC_CMD_SRQ_QUERY, a, 1), ==, PFNIC_CMD_OK);
}

uint32_t srq_rec_head(uint32_t srqn)
{
    uint32_t head;

    memread(SRQ_REC + srqn * 0x100, &head, sizeof(head));
    return le32_to_cpu(head);
}

void srq_post(uint32_t ctx, uint32_t srqn, uint64_t wr_id,
                     uint64_t addr, uint32_t len, uint32_t key)
{
    uint16_t slot = srq_next[srqn]++;

    post_wqe(SRQ_RING + srqn * 0x2000ULL, slot % 16, 0, 0, wr_id, 1, addr,
             len, key);
    verbs_db(ctx, PFNIC_DB_SRQ, srqn << 16 | (uint16_t)(slot + 1));
}

void table_post_imm(uint32_t ctx, uint32_t qpn, uint64_t wr_id,
                           uint64_t laddr, uint32_t len, uint32_t lkey,
                           uint64_t raddr, uint32_t rkey)
{
    uint16_t slot = sq_next[qpn]++;
    PfnicWqe w = {
        .opcode = PFNIC_WR_RDMA_WRITE_WITH_IMM, .flags = PFNIC_SEND_SIGNALED,
        .num_sge = len ? 1 : 0, .imm_data = 0x78563412,
        .wr_id = cpu_to_le64(wr_id), .remote_addr = cpu_to_le64(raddr),
        .rkey = cpu_to_le32(rkey),
        .sge[0] = {
            .addr = cpu_to_le64(laddr), .length = cpu_to_le32(len),
            .lkey = cpu_to_le32(lkey),
        },
    };

    memwrite(SQ_ADDR + qpn * 0x10000 + (slot % 16) * PFNIC_WQE_SIZE, &w,
             sizeof(w));
    verbs_db(ctx, PFNIC_DB_SQ, qpn << 16 | (uint16_t)(slot + 1));
}

PfnicCqe ts_cqe(uint32_t cqn, uint32_t log2, uint32_t n, uint64_t *ts)
{
    static const uint8_t zero[sizeof(((PfnicCqeTs *)0)->reserved)];
    uint32_t entries = 1u << log2, cons = cpu_to_le32(n + 1);
    PfnicCqe c = wait_cqe(cqn, n % entries, ((n / entries) & 1) ^ 1);

    if (cq_ts[cqn]) {
        PfnicCqeTs t;

        memread(cqe_addr(cqn, n % entries), &t, sizeof(t));
        g_assert_cmpmem(t.reserved, sizeof(t.reserved), zero, sizeof(zero));
        *ts = le64_to_cpu(t.timestamp);
    }
    memwrite(CQ_REC + cqn * 0x100, &cons, sizeof(cons));
    return c;
}

uint32_t dm_mr(uint32_t index, uint32_t ctx, uint32_t pd,
                      uint32_t access, uint64_t start, uint64_t len,
                      uint32_t *key)
{
    return mr_set_flags(index, ctx, pd, access, start, len, PFNIC_MR_FLAG_DM,
                        key);
}

void dm_write(uint64_t off, const void *buf, size_t len)
{
    memwrite(BAR1_ADDR + off, buf, len);
}

void dm_read(uint64_t off, void *buf, size_t len)
{
    memread(BAR1_ADDR + off, buf, len);
}

void assert_mr_no_pages(uint32_t mr)
{
    uint32_t a[PFNIC_CMD_ARGS] = { mr };

    g_assert_cmpint(cmd(PFNIC_CMD_MR_QUERY, a, 1), ==, PFNIC_CMD_OK);
    for (int i = 0; i < 14; i++) {
        if (i != 10 && i != 11) {
            g_assert_cmpint(a[i], ==, 0);
        }
    }
}

/* --- the wire (docs/wire.md) ------------------------------------------- */

uint32_t wire_modify(uint32_t qpn, uint32_t state, uint32_t dest,
                     uint32_t dest_ip, uint32_t sq_psn, uint32_t rq_psn,
                     uint32_t timeout, uint32_t retry,
                     uint32_t rnr_retry)
{
    uint32_t a[PFNIC_CMD_ARGS] = {
        qpn, state, PFNIC_ACCESS_REMOTE_WRITE | PFNIC_ACCESS_REMOTE_READ |
        PFNIC_ACCESS_REMOTE_ATOMIC, dest, 1, rnr_retry, retry, dest_ip,
        sq_psn, rq_psn, 3 /* IBV_MTU_1024 */, timeout, 4, 64, 4,
    };

    return cmd(PFNIC_CMD_QP_MODIFY, a, PFNIC_CMD_ARGS);
}

/*
 * On the current NIC: CQs @cq and @cq + 1 of context 1, and its QP @qpn
 * (PD 7), connected to QP @dest at @dest_ip.
 */
void wire_qp_flags(uint32_t cq, uint32_t qpn, uint32_t dest,
                   uint32_t dest_ip, uint32_t sq_psn, uint32_t rq_psn,
                   uint32_t timeout, uint32_t scq_flags,
                   uint32_t rcq_flags)
{
    g_assert_cmpint(cq_create_flags(cq, 1, 4, scq_flags), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cq_create_flags(cq + 1, 1, 4, rcq_flags), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(qp_create(qpn, 1, 7, cq, cq + 1, 4, 0), ==, PFNIC_CMD_OK);
    for (uint32_t st = PFNIC_QPS_INIT; st <= PFNIC_QPS_RTS; st++) {
        g_assert_cmpint(wire_modify(qpn, st, dest, dest_ip, sq_psn, rq_psn,
                                    timeout, 2, 7), ==, PFNIC_CMD_OK);
    }
}

void wire_qp(uint32_t cq, uint32_t qpn, uint32_t dest,
             uint32_t dest_ip, uint32_t sq_psn, uint32_t rq_psn,
             uint32_t timeout)
{
    wire_qp_flags(cq, qpn, dest, dest_ip, sq_psn, rq_psn, timeout, 0, 0);
}

/*
 * On the current NIC: context 1, MR 1 (PD 7), and wire_qp()'s CQs and QP.
 * Returns the MR's key.
 */
uint32_t wire_side(uint32_t cq, uint32_t qpn, uint32_t dest,
                   uint32_t ip, uint32_t dest_ip, uint32_t sq_psn,
                   uint32_t rq_psn, uint32_t timeout)
{
    uint32_t key;

    reg_write(PFNIC_REG_PORT_IPV4, ip);
    key = ctx_and_mr_setup();
    wire_qp(cq, qpn, dest, dest_ip, sq_psn, rq_psn, timeout);
    return key;
}

/* A's QP 2 (CQs 1, 2) and B's QP 3 (CQs 3, 4), connected over the wire. */
void wire_setup(uint32_t timeout, uint32_t *key_a, uint32_t *key_b)
{
    use_nic(1);
    *key_b = wire_side(3, 3, 2, IP_B, IP_A, WIRE_SQ_PSN_B, WIRE_SQ_PSN_A,
                       timeout);
    use_nic(0);
    *key_a = wire_side(1, 2, 3, IP_A, IP_B, WIRE_SQ_PSN_A, WIRE_SQ_PSN_B,
                       timeout);
}

uint32_t port_counter(int c)
{
    return reg_read(PFNIC_REG_PORT_COUNTERS + 4 * c);
}

/* Wait up to @ms of virtual time for the CQE in @slot. */
PfnicCqe wait_cqe_ms(uint32_t cqn, uint32_t slot, uint32_t ms)
{
    PfnicCqe c = read_cqe(cqn, slot);

    for (uint32_t i = 0; i < ms * 10 && c.owner != 1; i++) {
        clock_step(100000);
        c = read_cqe(cqn, slot);
    }
    g_assert_cmpint(c.owner, ==, 1);
    return c;
}

void set_link(const char *name, bool up)
{
    qtest_qmp_assert_success(global_qtest,
                             "{'execute': 'set_link', 'arguments': "
                             "{'name': %s, 'up': %i}}", name, up);
}

const uint8_t mac_a[6] = { 0x52, 0x54, 0, 0, 0, 0x0a };
const uint8_t mac_b[6] = { 0x52, 0x54, 0, 0, 0, 0x0b };
const uint8_t mac_s[6] = { 0x52, 0x54, 0, 0, 0, 0x99 };
const uint8_t mac_bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
const uint8_t mac_zero[6];

uint16_t ip_csum(const uint8_t *p, size_t n)
{
    uint32_t sum = 0;

    for (size_t i = 0; i < n; i += 2) {
        sum += p[i] << 8 | p[i + 1];
    }
    while (sum >> 16) {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    return ~sum;
}

size_t arp_frame(uint8_t *f, uint16_t op, const uint8_t *dmac,
                 const uint8_t *smac, uint32_t sip, const uint8_t *tmac,
                 uint32_t tip)
{
    memcpy(f, dmac, 6);
    memcpy(f + 6, smac, 6);
    stw_be_p(f + 12, 0x0806);
    stw_be_p(f + 14, 1);                        /* Ethernet */
    stw_be_p(f + 16, 0x0800);                   /* IPv4 */
    f[18] = 6;
    f[19] = 4;
    stw_be_p(f + 20, op);
    memcpy(f + 22, smac, 6);
    stl_be_p(f + 28, sip);
    memcpy(f + 32, tmac, 6);
    stl_be_p(f + 38, tip);
    return 42;
}

char *stranger_open(Stranger *st)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    char *dir = g_dir_make_tmp("pfnic-wire-XXXXXX", NULL);

    st->ours = g_strdup_printf("%s/test.sock", dir);
    st->qemus = g_strdup_printf("%s/qemu.sock", dir);
    g_free(dir);
    st->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    g_assert_cmpint(st->fd, >=, 0);
    g_strlcpy(sa.sun_path, st->ours, sizeof(sa.sun_path));
    g_assert_cmpint(bind(st->fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
    return g_strdup_printf("-netdev dgram,id=inj,local.type=unix,"
                           "local.path=%s,remote.type=unix,remote.path=%s "
                           "-netdev hubport,id=w2,hubid=0,netdev=inj",
                           st->qemus, st->ours);
}

void stranger_send(Stranger *st, const uint8_t *f, size_t len)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    uint8_t drop[4096];

    g_strlcpy(sa.sun_path, st->qemus, sizeof(sa.sun_path));
    for (int i = 0; i < 1000; i++) {
        ssize_t n = sendto(st->fd, f, len, 0, (struct sockaddr *)&sa,
                           sizeof(sa));

        if (n >= 0 || errno != EAGAIN) {
            g_assert_cmpint(n, ==, len);
            break;
        }
        /*
         * QEMU's socket queue is full: its main loop may itself wait for
         * room in ours (the hub stops while a port cannot take a frame).
         */
        while (recv(st->fd, drop, sizeof(drop), 0) > 0) {
            /* what the devices sent meanwhile */
        }
        g_usleep(1000);
    }
    clock_step(100000);
}

ssize_t stranger_recv(Stranger *st, uint16_t type, uint8_t *f, size_t max)
{
    for (int i = 0; i < 100; i++) {
        ssize_t n = recv(st->fd, f, max, 0);

        if (n >= 14 && lduw_be_p(f + 12) == type) {
            return n;
        }
        if (n < 0) {
            clock_step(100000);
        }
    }
    return 0;
}

void stranger_drain(Stranger *st)
{
    uint8_t drop[4096];

    while (recv(st->fd, drop, sizeof(drop), 0) > 0) {
        /* unread */
    }
}

void stranger_close(Stranger *st)
{
    unlink(st->ours);
    unlink(st->qemus);
    close(st->fd);
    g_free(st->ours);
    g_free(st->qemus);
}

void *stranger_qos_before(GString *cmd_line, void *arg)
{
    Stranger *st = g_new0(Stranger, 1);
    g_autofree char *more = stranger_open(st);

    g_string_append_printf(cmd_line, " %s", more);
    pfnic_qos_before(cmd_line, arg);
    return st;
}

void wire_ctx_no_pasid(int n, uint32_t ip)
{
    use_nic(n);
    reg_write(PFNIC_REG_PORT_IPV4, ip);
    start_ctx_no_pasid(1, RING_ADDR);
}
