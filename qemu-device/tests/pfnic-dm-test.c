/*
 * QTest for pfnic: device memory (BAR1, ABI 1.13).
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "pfnic-test.h"

/* --- device memory (ABI 1.13) ------------------------------------------ */
#define DM_SIZE_DEFAULT (256 * 1024)

/* What a BAR register reads after all ones are written (then restored) */
static uint32_t bar_probe(uint16_t reg)
{
    uint32_t old = nic_cfg_readl(reg), val;

    nic_cfg_writel(reg, 0xffffffff);
    val = nic_cfg_readl(reg);
    nic_cfg_writel(reg, old);
    return val;
}

/*
 * BAR1: a 32-bit prefetchable memory BAR of dm-size bytes, DM_SIZE and
 * CAPS.DM; the CPU reads back what it wrote, and a CONTROL reset or a
 * device reset zeroes it. Other sizes, and dm-size=0: no BAR1, DM_SIZE 0,
 * no CAPS.DM, and MR_SET with DM refused.
 */
static void test_dm_bar(void *obj, void *data,
                        QGuestAllocator *alloc)
{
    static uint8_t buf[0x1000], got[0x1000], zero[0x1000];

    pfnic_qos_start(obj, alloc);
    g_assert_cmphex(bar_probe(PCI_BASE_ADDRESS_1), ==,
                    (uint32_t)~(DM_SIZE_DEFAULT - 1) |
                    PCI_BASE_ADDRESS_MEM_PREFETCH);
    map_bars();
    g_assert_cmpint(reg_read(PFNIC_REG_DM_SIZE), ==, DM_SIZE_DEFAULT);
    g_assert_true(reg_read(PFNIC_REG_CAPS) & PFNIC_CAPS_DM);

    /* Its first and last bytes, and a page across two of them */
    g_assert_cmphex(readl(BAR1_ADDR), ==, 0);
    writel(BAR1_ADDR, 0x12345678);
    writel(BAR1_ADDR + DM_SIZE_DEFAULT - 4, 0x9abcdef0);
    pattern(buf, sizeof(buf), 7);
    dm_write(0x1800, buf, sizeof(buf));
    g_assert_cmphex(readl(BAR1_ADDR), ==, 0x12345678);
    g_assert_cmphex(readl(BAR1_ADDR + DM_SIZE_DEFAULT - 4), ==, 0x9abcdef0);
    g_assert_cmphex(readq(BAR1_ADDR + 0x1800), ==, ldq_le_p(buf));
    dm_read(0x1800, got, sizeof(got));
    g_assert_cmpmem(got, sizeof(got), buf, sizeof(buf));

    /* CONTROL.RESET zeroes it. */
    reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    g_assert_cmphex(readl(BAR1_ADDR), ==, 0);
    g_assert_cmphex(readl(BAR1_ADDR + DM_SIZE_DEFAULT - 4), ==, 0);
    dm_read(0x1800, got, sizeof(got));
    g_assert_cmpmem(got, sizeof(got), zero, sizeof(zero));

    /* So does a device reset (the system's). */
    dm_write(0x1800, buf, sizeof(buf));
    qtest_system_reset(global_qtest);
    setup_topology();
    map_bars();
    dm_read(0x1800, got, sizeof(got));
    g_assert_cmpmem(got, sizeof(got), zero, sizeof(zero));
    pfnic_qos_restart(",dm-size=4096");
    g_assert_cmphex(bar_probe(PCI_BASE_ADDRESS_1), ==,
                    0xfffff000 | PCI_BASE_ADDRESS_MEM_PREFETCH);
    map_bars();
    g_assert_cmpint(reg_read(PFNIC_REG_DM_SIZE), ==, 4096);
    writel(BAR1_ADDR + 4092, 0x55aa55aa);
    g_assert_cmphex(readl(BAR1_ADDR + 4092), ==, 0x55aa55aa);
    pfnic_qos_restart(",dm-size=16777216");
    g_assert_cmphex(bar_probe(PCI_BASE_ADDRESS_1), ==,
                    0xff000000 | PCI_BASE_ADDRESS_MEM_PREFETCH);
    pfnic_qos_restart(",dm-size=0");
    g_assert_cmphex(bar_probe(PCI_BASE_ADDRESS_1), ==, 0);
    map_bars();
    g_assert_cmpint(reg_read(PFNIC_REG_DM_SIZE), ==, 0);
    g_assert_false(reg_read(PFNIC_REG_CAPS) & PFNIC_CAPS_DM);
    g_assert_cmpint(dm_mr(1, 1, 7, 0, 0, 0x1000, NULL), ==,
                    PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_QUERY, 1), ==, PFNIC_CMD_BAD_STATE);
    pfnic_qos_end();
}

/*
 * MR_SET with DM: alone, inside DM_SIZE (overflow-safe), empty only inside
 * it (ABI 1.18), never on demand, never the implicit MR's pattern; a
 * context without a PASID may have one; the table commands refuse it.
 */
static void test_dm_mr_set(void *obj, void *data,
                           QGuestAllocator *alloc)
{
    static const struct {
        uint32_t access, flags;
        uint64_t start, len;
    } bad[] = {
        { 0, PFNIC_MR_FLAG_DM | PFNIC_MR_FLAG_TABLE, 0, 0x1000 },
        { 0, PFNIC_MR_FLAG_DM | PFNIC_MR_FLAG_FAULT, 0, 0x1000 },
        { 0, PFNIC_MR_FLAG_DM | PFNIC_MR_FLAG_TABLE | PFNIC_MR_FLAG_FAULT,
          0, 0x1000 },
        { 0, PFNIC_MR_FLAG_DM | 8, 0, 0x1000 },
        { 0, PFNIC_MR_FLAG_DM, DM_SIZE_DEFAULT - 0x1000, 0x1001 },
        { 0, PFNIC_MR_FLAG_DM, DM_SIZE_DEFAULT, 1 },
        { 0, PFNIC_MR_FLAG_DM, 0, DM_SIZE_DEFAULT + 1 },
        { 0, PFNIC_MR_FLAG_DM, 1ULL << 32, 0x1000 },
        { 0, PFNIC_MR_FLAG_DM, 0x1000, 1ULL << 32 },
        { 0, PFNIC_MR_FLAG_DM, 0xfffffffffffff000ULL, 0x2000 },
        { 0, PFNIC_MR_FLAG_DM, 0x1000, 0xfffffffffffff000ULL },
        { 0, PFNIC_MR_FLAG_DM, 0xffffffffffffffffULL, 1 },
        { 0, PFNIC_MR_FLAG_DM, DM_SIZE_DEFAULT, 0 },
        { PFNIC_ACCESS_ON_DEMAND, PFNIC_MR_FLAG_DM, 0, 0x1000 },
        { PFNIC_ACCESS_LOCAL_WRITE | PFNIC_ACCESS_ON_DEMAND,
          PFNIC_MR_FLAG_DM, 0x1000, 0x1000 },
        { 0, PFNIC_MR_FLAG_DM, 0, UINT64_MAX },
    };
    uint32_t key, key2;

    pfnic_qos_start(obj, alloc);
    map_bars();
    for (int i = 0; i < ARRAY_SIZE(bad); i++) {
        g_test_message("bad MR_SET DM %d", i);
        g_assert_cmpint(mr_set_flags(3, 1, 7, bad[i].access, bad[i].start,
                                     bad[i].len, bad[i].flags, NULL), ==,
                        PFNIC_CMD_BAD_ARG);
        g_assert_cmpint(cmd1(PFNIC_CMD_MR_QUERY, 3), ==,
                        PFNIC_CMD_BAD_STATE);
    }
    /* The whole memory, its last byte, and overlapping ranges */
    g_assert_cmpint(dm_mr(1, 1, 7, ALL_ACCESS, 0, DM_SIZE_DEFAULT, &key), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(dm_mr(2, 1, 7, 0, DM_SIZE_DEFAULT - 1, 1, &key2), ==,
                    PFNIC_CMD_OK);
    g_assert_cmphex(key, !=, key2);
    g_assert_cmpint(dm_mr(2, 1, 7, 0, 0, 1, NULL), ==, PFNIC_CMD_BAD_STATE);
    /* An empty one: a key that covers no byte */
    g_assert_cmpint(dm_mr(6, 1, 7, 0, 0x1000, 0, &key2), ==, PFNIC_CMD_OK);
    g_assert_cmphex(key2, !=, 0);
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_CLEAR, 6), ==, PFNIC_CMD_OK);
    assert_mr_no_pages(1);
    /* Not a table MR: MTT_WRITE and MTT_INVALIDATE refuse it. */
    g_assert_cmpint(mtt_write(1, 0, 1, MTT_SRC), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(mtt_invalidate(1, 0, 1), ==, PFNIC_CMD_BAD_STATE);
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_CLEAR, 1), ==, PFNIC_CMD_OK);
    g_assert_cmpint(cmd1(PFNIC_CMD_MR_QUERY, 1), ==, PFNIC_CMD_BAD_STATE);
    /* A context without a PASID: a DM MR, but no MR without a table */
    start_ctx_no_pasid(2, RING_ADDR);
    g_assert_cmpint(mr_set(4, 2, 7, ALL_ACCESS, 0x10000000, 0x1000, NULL),
                    ==, PFNIC_CMD_BAD_ARG);
    g_assert_cmpint(dm_mr(4, 2, 7, ALL_ACCESS, 0x1000, 0x1000, NULL), ==,
                    PFNIC_CMD_OK);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    pfnic_qos_end();
}

#define DM_L_START      0x2000          /* MR 5 (context 1): 3 pages */

#define DM_L_LEN        0x3000

#define DM_R_START      0x8000          /* MR 6 (context 2): 2 pages */

#define DM_R_LEN        0x2000

/* A signaled CMP_AND_SWP on QP 2 of context 1 (table_post() has no swap) */
static void dm_post_cas(uint64_t wr_id, uint64_t laddr, uint32_t lkey,
                        uint64_t raddr, uint32_t rkey, uint64_t compare,
                        uint64_t swap)
{
    uint16_t slot = sq_next[2]++;
    PfnicWqe w = {
        .opcode = PFNIC_WR_ATOMIC_CMP_AND_SWP, .flags = PFNIC_SEND_SIGNALED,
        .num_sge = 1, .wr_id = cpu_to_le64(wr_id),
        .remote_addr = cpu_to_le64(raddr), .rkey = cpu_to_le32(rkey),
        .compare_add = cpu_to_le64(compare), .swap = cpu_to_le64(swap),
        .sge[0] = {
            .addr = cpu_to_le64(laddr), .length = cpu_to_le32(8),
            .lkey = cpu_to_le32(lkey),
        },
    };

    memwrite(SQ_ADDR + 2 * 0x10000 + (slot % 16) * PFNIC_WQE_SIZE, &w,
             sizeof(w));
    verbs_db(1, PFNIC_DB_SQ, 2 << 16 | (uint16_t)(slot + 1));
}

/*
 * Loopback with DM MRs (zero-based) beside table MRs over host memory, in
 * contexts without a PASID: SENDs from and into device memory, RDMA WRITE
 * into it and READ from it, device memory to device memory, atomics on it;
 * the key checks of [x, x + len) against [0, length), and the PD; no page
 * request, no translation, no page counted.
 */
static void test_dm_loopback(void *obj, void *data,
                             QGuestAllocator *alloc)
{
    static uint8_t src[0x2000], got[0x2000], zero[0x2000];
    uint32_t lkey, rkey, ldm, rdm, odm, lodm;
    uint64_t v;
    PfnicCqe c;

    pfnic_qos_start(obj, alloc);
    map_bars();
    tables_setup(&lkey, &rkey);
    g_assert_cmpint(dm_mr(5, 1, 7, ALL_ACCESS, DM_L_START, DM_L_LEN, &ldm),
                    ==, PFNIC_CMD_OK);
    g_assert_cmpint(dm_mr(6, 2, 7, ALL_ACCESS, DM_R_START, DM_R_LEN, &rdm),
                    ==, PFNIC_CMD_OK);
    /* The same memory in PD 8, remotely and locally */
    g_assert_cmpint(dm_mr(7, 2, 8, ALL_ACCESS, DM_R_START, DM_R_LEN, &odm),
                    ==, PFNIC_CMD_OK);
    g_assert_cmpint(dm_mr(8, 1, 8, ALL_ACCESS, DM_L_START, DM_L_LEN, &lodm),
                    ==, PFNIC_CMD_OK);

    /* SEND from device memory (MR 5's 0x100: byte 0x2100) into host memory */
    pattern(src, 0x1800, 11);
    dm_write(DM_L_START + 0x100, src, 0x1800);
    table_recv(2, 3, 0x61, TR_VA + 0x100, 0x2000, rkey);
    table_post(1, 2, PFNIC_WR_SEND, 0x51, 0x100, 0x1800, ldm, 0, 0, 0);
    table_cqe(1, 0x51, PFNIC_WC_SUCCESS);
    c = table_cqe(2, 0x61, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.byte_len, ==, 0x1800);
    table_rw(tr_pages, TR_VA, TR_VA + 0x100, got, 0x1800, false);
    g_assert_cmpmem(got, 0x1800, src, 0x1800);

    /* SEND from host memory into a receive buffer in device memory */
    pattern(src, 0x900, 12);
    table_rw(tl_pages, TL_VA, TL_VA, src, 0x900, true);
    table_recv(2, 3, 0x62, 0x200, 0x1000, rdm);
    table_post(1, 2, PFNIC_WR_SEND, 0x52, TL_VA, 0x900, lkey, 0, 0, 0);
    table_cqe(1, 0x52, PFNIC_WC_SUCCESS);
    c = table_cqe(2, 0x62, PFNIC_WC_SUCCESS);
    g_assert_cmpint(c.byte_len, ==, 0x900);
    dm_read(DM_R_START + 0x200, got, 0x900);
    g_assert_cmpmem(got, 0x900, src, 0x900);
    dm_read(DM_R_START, got, 0x200);
    g_assert_cmpmem(got, 0x200, zero, 0x200);

    /* RDMA WRITE from host memory to MR 6's 0x1000 */
    pattern(src, 0xc00, 13);
    table_rw(tl_pages, TL_VA, TL_VA + 0x1000, src, 0xc00, true);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x53, TL_VA + 0x1000, 0xc00, lkey,
               0x1000, rdm, 0);
    table_cqe(1, 0x53, PFNIC_WC_SUCCESS);
    dm_read(DM_R_START + 0x1000, got, 0xc00);
    g_assert_cmpmem(got, 0xc00, src, 0xc00);
    dm_read(DM_R_START + 0x1c00, got, 0x400);
    g_assert_cmpmem(got, 0x400, zero, 0x400);
    /* Nothing at byte 0x1000 of the memory itself */
    dm_read(0x1000, got, 0x1000);
    g_assert_cmpmem(got, 0x1000, zero, 0x1000);

    /* RDMA READ from device memory across its pages into host memory */
    pattern(src, 0x1100, 14);
    dm_write(DM_R_START + 0xe00, src, 0x1100);
    table_post(1, 2, PFNIC_WR_RDMA_READ, 0x54, TL_VA + 0x2000, 0x1100, lkey,
               0xe00, rdm, 0);
    table_cqe(1, 0x54, PFNIC_WC_SUCCESS);
    table_rw(tl_pages, TL_VA, TL_VA + 0x2000, got, 0x1100, false);
    g_assert_cmpmem(got, 0x1100, src, 0x1100);

    /* RDMA WRITE from device memory to device memory */
    pattern(src, 0x800, 15);
    dm_write(DM_L_START + 0x2800, src, 0x800);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x55, 0x2800, 0x800, ldm, 0x1800,
               rdm, 0);
    table_cqe(1, 0x55, PFNIC_WC_SUCCESS);
    dm_read(DM_R_START + 0x1800, got, 0x800);
    g_assert_cmpmem(got, 0x800, src, 0x800);

    /* Atomics on MR 6's last 8 bytes: the original to host memory, to DM */
    v = cpu_to_le64(1000);
    dm_write(DM_R_START + DM_R_LEN - 8, &v, 8);
    table_post(1, 2, PFNIC_WR_ATOMIC_FETCH_AND_ADD, 0x56, TL_VA + 0x3000, 8,
               lkey, DM_R_LEN - 8, rdm, 24);
    g_assert_cmpint(table_cqe(1, 0x56, PFNIC_WC_SUCCESS).opcode, ==,
                    PFNIC_WC_FETCH_ADD);
    dm_read(DM_R_START + DM_R_LEN - 8, &v, 8);
    g_assert_cmpint(le64_to_cpu(v), ==, 1024);
    table_rw(tl_pages, TL_VA, TL_VA + 0x3000, &v, 8, false);
    g_assert_cmpint(le64_to_cpu(v), ==, 1000);
    dm_post_cas(0x57, 8, ldm, DM_R_LEN - 8, rdm, 1024, 0x5555);
    g_assert_cmpint(table_cqe(1, 0x57, PFNIC_WC_SUCCESS).opcode, ==,
                    PFNIC_WC_COMP_SWAP);
    dm_read(DM_R_START + DM_R_LEN - 8, &v, 8);
    g_assert_cmphex(le64_to_cpu(v), ==, 0x5555);
    dm_read(DM_L_START + 8, &v, 8);
    g_assert_cmpint(le64_to_cpu(v), ==, 1024);
    /* A compare that fails swaps nothing. */
    dm_post_cas(0x58, 16, ldm, DM_R_LEN - 8, rdm, 1024, 1);
    table_cqe(1, 0x58, PFNIC_WC_SUCCESS);
    dm_read(DM_R_START + DM_R_LEN - 8, &v, 8);
    g_assert_cmphex(le64_to_cpu(v), ==, 0x5555);

    /* x + len past the MR: LOC_PROT_ERR locally, REM_ACCESS_ERR remotely */
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x59, DM_L_LEN - 0x100, 0x200, ldm,
               0, rdm, 0);
    table_cqe(1, 0x59, PFNIC_WC_LOC_PROT_ERR);
    qp_reconnect(2, 3);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x5a, TL_VA, 0x200, lkey,
               DM_R_LEN - 0x100, rdm, 0);
    table_cqe(1, 0x5a, PFNIC_WC_REM_ACCESS_ERR);
    qp_reconnect(2, 3);
    /* Zero-based: the MR's start in device memory is no address of it. */
    table_post(1, 2, PFNIC_WR_RDMA_READ, 0x5b, TL_VA, 0x100, lkey,
               DM_R_START, rdm, 0);
    table_cqe(1, 0x5b, PFNIC_WC_REM_ACCESS_ERR);
    qp_reconnect(2, 3);
    table_post(1, 2, PFNIC_WR_ATOMIC_FETCH_AND_ADD, 0x5c, TL_VA, 8, lkey,
               DM_R_LEN, rdm, 1);
    table_cqe(1, 0x5c, PFNIC_WC_REM_ACCESS_ERR);
    qp_reconnect(2, 3);
    /* Another PD's DM MR: refused remotely and locally */
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x5d, TL_VA, 0x100, lkey, 0, odm,
               0);
    table_cqe(1, 0x5d, PFNIC_WC_REM_ACCESS_ERR);
    qp_reconnect(2, 3);
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x5e, 0, 0x100, lodm, 0, rdm, 0);
    table_cqe(1, 0x5e, PFNIC_WC_LOC_PROT_ERR);
    qp_reconnect(2, 3);
    /* None of them wrote anything. */
    dm_read(DM_R_START, got, 0x200);
    g_assert_cmpmem(got, 0x200, zero, 0x200);
    /* And the QPs work on. */
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x5f, 0x2800, 0x10, ldm, 0x10, rdm,
               0);
    table_cqe(1, 0x5f, PFNIC_WC_SUCCESS);
    dm_read(DM_R_START + 0x10, got, 0x10);
    g_assert_cmpmem(got, 0x10, src, 0x10);

    assert_no_ats_pri();
    assert_mr_no_pages(5);
    assert_mr_no_pages(6);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    pfnic_qos_end();
}

/*
 * DM MRs of a context with a PASID, without an IOMMU (where no other MR's
 * page can be made present): data moves without translation, a PREFETCH
 * succeeds at once (within the MR), nothing goes to ATS or PRI.
 */
static void test_dm_pasid(void *obj, void *data,
                          QGuestAllocator *alloc)
{
    static uint8_t src[0x1400], got[0x1400];
    uint32_t k1, k2;
    PfnicDesc d = {
        .opcode = PFNIC_OP_PREFETCH, .flags = PFNIC_PREFETCH_WRITE,
        .dst = cpu_to_le64(0x800), .len = cpu_to_le64(0x1800),
    };

    pfnic_qos_start(obj, alloc);
    map_bars();
    verbs_setup(7);
    table_counts_reset();
    g_assert_cmpint(dm_mr(5, 1, 7, ALL_ACCESS, 0x4000, 0x2000, &k1), ==,
                    PFNIC_CMD_OK);
    g_assert_cmpint(dm_mr(6, 1, 7, ALL_ACCESS, 0x10000, 0x2000, &k2), ==,
                    PFNIC_CMD_OK);
    pattern(src, sizeof(src), 21);
    dm_write(0x4000 + 0x300, src, sizeof(src));
    table_post(1, 2, PFNIC_WR_RDMA_WRITE, 0x71, 0x300, sizeof(src), k1,
               0x500, k2, 0);
    table_cqe(1, 0x71, PFNIC_WC_SUCCESS);
    dm_read(0x10000 + 0x500, got, sizeof(got));
    g_assert_cmpmem(got, sizeof(got), src, sizeof(src));

    d.src = cpu_to_le64(k1);
    g_assert_cmphex(run_desc(0, &d), ==, PFNIC_DESC_DONE | PFNIC_ST_SUCCESS);
    d.len = cpu_to_le64(0x1801);
    g_assert_cmphex(run_desc(1, &d), ==, PFNIC_DESC_DONE |
                    PFNIC_ST_PROTECTION);
    assert_no_ats_pri();
    assert_mr_no_pages(5);
    assert_mr_no_pages(6);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    pfnic_qos_end();
}

static void register_pfnic_dm_tests(void)
{
    pfnic_add_test("dm/bar", test_dm_bar, NULL, NULL);
    pfnic_add_test("dm/mr-set", test_dm_mr_set, "contexts=4", NULL);
    pfnic_add_test("dm/loopback", test_dm_loopback,
                   "contexts=4,ats=off,pasid=off,pri=off", NULL);
    pfnic_add_test("dm/pasid", test_dm_pasid, "contexts=4", NULL);
}

libqos_init(register_pfnic_dm_tests);
