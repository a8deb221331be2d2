/*
 * QTest for pfnic: behind intel-iommu with SVA: the op interpreter the
 * fuzz targets run (docs/fuzzing.md), its random inputs, and the
 * regression tests of what it found.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "pfnic-test.h"

/* --- behind an IOMMU: the op interpreter (docs/fuzzing.md) -------------- */

/*
 * A pfnic behind intel-iommu with SVA, programmed by the interpreter that
 * the libFuzzer target runs (hw/net/pfnic/pfnic_fuzz_ops.c). Each input
 * runs on a machine fresh from a system reset, as in the fuzzer.
 */
/*
 * The interpreter's machine (PFNIC_FUZZ_ARGS): the graph's, with the
 * intel-iommu it programs created before the PCI devices.
 */
static void *iommu_before(GString *cmd_line, void *arg)
{
    g_string_prepend(cmd_line, PFNIC_FUZZ_IOMMU " ");
    return pfnic_qos_before(cmd_line, arg);
}

/*
 * The interpreter on the test's machine, set up; after a qtest_end() on a
 * new one.
 */
static PfnicFuzz *iommu_start(void)
{
    PfnicFuzz *f;

    if (!global_qtest) {
        qtest_start(pfnic_qos_cmdline());
    }
    setup_topology();   /* the interpreter's topology is the driver's */
    f = pfnic_fuzz_new(global_qtest, NULL);
    pfnic_fuzz_setup(f);
    return f;
}

static void iommu_input(PfnicFuzz *f, const uint8_t *data, size_t len)
{
    qtest_system_reset(global_qtest);
    pfnic_fuzz_setup(f);
    pfnic_fuzz_run(f, data, len);
}

/*
 * The tables are right: a WRITE lands at the translated page, a fault on a
 * page that is not present is served through the page request queue, a
 * failed response fails the descriptor.
 */
static void test_iommu_known_good(void *obj, void *data,
                                  QGuestAllocator *alloc)
{
    PfnicFuzz *f = iommu_start();

    pfnic_fuzz_known_good(f);
    /* A reset brings the device back to ready, and it works again. */
    iommu_input(f, NULL, 0);
    pfnic_fuzz_known_good(f);
    pfnic_fuzz_free(f);
    pfnic_qos_end();
}

/*
 * Random inputs from a seeded PRNG: PFNIC_FUZZ_SEED replays a run,
 * PFNIC_FUZZ_INPUTS sets how many (default 200); PFNIC_FUZZ_INPUT=FILE
 * runs that input instead, under the ordinary build.
 */
static void fuzz_random(PfnicFuzz *f, unsigned int seed, int inputs,
                        size_t max_len)
{
    GRand *rand;
    uint8_t buf[2048];

    g_assert_cmpint(max_len, <=, sizeof(buf));

    if (getenv("PFNIC_FUZZ_SEED")) {
        g_assert_cmpint(qemu_strtoui(getenv("PFNIC_FUZZ_SEED"), NULL, 0,
                                     &seed), ==, 0);
    }
    if (getenv("PFNIC_FUZZ_INPUTS")) {
        g_assert_cmpint(qemu_strtoi(getenv("PFNIC_FUZZ_INPUTS"), NULL, 0,
                                    &inputs), ==, 0);
    }
    rand = g_rand_new_with_seed(seed);
    if (getenv("PFNIC_FUZZ_INPUT")) {
        /* One saved input (a fuzzer's crash-*), then a reset after it. */
        gchar *data;
        gsize len;

        g_assert_true(g_file_get_contents(getenv("PFNIC_FUZZ_INPUT"), &data,
                                          &len, NULL));
        iommu_input(f, (uint8_t *)data, len);
        qtest_system_reset(global_qtest);
        g_free(data);
        inputs = 0;
    }

    g_test_message("PFNIC_FUZZ_SEED=%u (%d inputs)", seed, inputs);
    for (int i = 0; i < inputs; i++) {
        size_t len = g_rand_int_range(rand, 1, max_len + 1);

        for (size_t j = 0; j < len; j++) {
            buf[j] = g_rand_int(rand);
        }
        fprintf(stderr, "# input %d of seed %u\n", i, seed);
        if (getenv("PFNIC_FUZZ_SAVE")) {
            g_assert_true(g_file_set_contents(getenv("PFNIC_FUZZ_SAVE"),
                                              (char *)buf, len, NULL));
        }
        iommu_input(f, buf, len);
    }
    g_rand_free(rand);
}

static void test_iommu_random(void *obj, void *data,
                              QGuestAllocator *alloc)
{
    PfnicFuzz *f = iommu_start();

    fuzz_random(f, g_random_int(), 200, 512);
    pfnic_fuzz_free(f);
    pfnic_qos_end();
}

/*
 * The wire target's machine (pfnic-wire): the interpreter's, with the
 * port on a dgram netdev whose other end the interpreter holds.
 */
/*
 * The wire target's machine (pfnic-wire): the interpreter's, with the
 * port on a dgram netdev whose other end the interpreter holds (the
 * test's data).
 */
static void *wire_fuzz_before(GString *cmd_line, void *arg)
{
    PfnicFuzzWire *w = g_new0(PfnicFuzzWire, 1);
    g_autofree char *args = pfnic_fuzz_wire_open(w);
    g_autofree char *netdev = pfnic_fuzz_wire_netdev(w);

    g_string_append_printf(cmd_line, " %s", netdev);
    iommu_before(cmd_line, arg);
    return w;
}

static PfnicFuzz *wire_fuzz_start(PfnicFuzzWire *w)
{
    PfnicFuzz *f;

    setup_topology();
    f = pfnic_fuzz_new(global_qtest, NULL);
    pfnic_fuzz_set_wire(f, w);
    pfnic_fuzz_setup(f);
    return f;
}

/*
 * Random inputs of the wire interpreter (frames from the link, answers to
 * the device's requests, and the IOMMU target's operations), with the
 * same PFNIC_FUZZ_* variables as /pfnic/iommu/random; 200 inputs of up
 * to 2 KiB by default, seed 4791 (so that make test is repeatable).
 */
static void test_wire_random(void *obj, void *data,
                             QGuestAllocator *alloc)
{
    PfnicFuzzWire *w = data;
    PfnicFuzz *f = wire_fuzz_start(w);

    fuzz_random(f, 4791, 200, 2048);
    pfnic_fuzz_free(f);
    pfnic_qos_end();
    pfnic_fuzz_wire_close(w);
    g_free(w);
}

/* Append @n bytes of @v, little endian, to @in at *@len. */
static void input_put(uint8_t *in, size_t *len, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) {
        in[(*len)++] = v >> (8 * i);
    }
}

/*
 * The interpreter's SRQ shapes (ABI 1.11, docs/fuzzing.md's command
 * operation): QP 5 taking its receive WQEs from SRQ 0 of context 1, four
 * WQEs posted on it, and three SENDs from QP 4, behind the IOMMU: the
 * buffers on both sides fault and are served through the page request
 * queue, and each SEND takes the SRQ's next WQE.
 */
static void test_iommu_srq(void *obj, void *data,
                           QGuestAllocator *alloc)
{
    uint32_t a[PFNIC_CMD_ARGS];
    uint8_t in[256];
    size_t len = 0;
    PfnicFuzz *f;

    input_put(in, &len, 0, 1);          /* not only well-formed operations */
    input_put(in, &len, 12, 1);         /* a command: */
    input_put(in, &len, 77, 1);         /* QP_CREATE, shaped, ... */
    input_put(in, &len, 0, 16 + 2);     /* ... with SRQ 0 */
    input_put(in, &len, 4, 1);          /* 4 WQEs on it, one SGE each */
    for (int i = 0; i < 4; i++) {
        input_put(in, &len, 1, 1);
        input_put(in, &len, i, 2);      /* VA page i */
        input_put(in, &len, 0, 2);
        input_put(in, &len, 0x100, 2);
        input_put(in, &len, 2, 1);      /* the context's key */
    }
    for (int i = 0; i < 3; i++) {
        input_put(in, &len, 0, 1);      /* a work request: */
        input_put(in, &len, 2, 1);      /* on QP 4 */
        input_put(in, &len, PFNIC_WR_SEND, 1);
        input_put(in, &len, 0, 1);
        input_put(in, &len, 1, 1);      /* one SGE */
        input_put(in, &len, 0, 2 + 2 + 1 + 1);
        input_put(in, &len, 8 + i, 2);  /* VA page 8 + i */
        input_put(in, &len, 0, 2);
        input_put(in, &len, 0x80, 2);
        input_put(in, &len, 2, 1);
        input_put(in, &len, 6, 1);      /* the clock */
        input_put(in, &len, 100, 2);
        input_put(in, &len, 10, 1);
    }
    g_assert_cmpint(len, <=, sizeof(in));

    f = iommu_start();
    iommu_input(f, in, len);
    a[0] = 0;
    g_assert_cmpint(cmd(PFNIC_CMD_SRQ_QUERY, a, 1), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[1], ==, 3);       /* head */
    g_assert_cmpint(a[2], ==, 4);       /* tail */
    g_assert_cmpint(a[3], ==, 1);       /* QP 5 */
    g_assert_cmpint(qp_query(5, a), ==, PFNIC_CMD_OK);
    g_assert_cmpint(a[0], ==, PFNIC_QPS_RTS);
    g_assert_cmpint(a[2], ==, 0);       /* no receive queue of its own */
    g_assert_cmpint(a[5], ==, 3);       /* three receives completed */
    pfnic_fuzz_free(f);
    pfnic_qos_end();
}

/* Write @val to the control register of the extended capability @id. */
static void ext_cap_ctrl(uint16_t id, uint16_t val)
{
    uint16_t ids[8], offs[8];
    int n = ext_caps(ids, offs, 8);

    for (int i = 0; i < n; i++) {
        if (ids[i] == id) {
            /* ATS_CTRL, PASID_CTRL and PRI_CTRL are all at offset 4/6. */
            nic_cfg_writew(offs[i] + (id == PCI_EXT_CAP_ID_ATS ?
                                      PCI_ATS_CTRL : id == PCI_EXT_CAP_ID_PRI ?
                                      PCI_PRI_CTRL : PCI_PASID_CTRL), val);
            return;
        }
    }
    g_assert_not_reached();
}

/*
 * Found by the fuzzer (docs/fuzzing.md, finding 1): the guest disables
 * PASID while contexts are bound to PASIDs. A reset stopped them, but
 * pci_iommu_unregister_iotlb_notifier() refused to unregister without
 * PASID, so intel-iommu kept the contexts' notifiers, which the reset then
 * cleared: the next system reset (or root table change) walked them and
 * aborted (an assertion in vtd_address_space_unmap). Patch 0004.
 */
static void test_iommu_pasid_disabled(void *obj, void *data,
                                      QGuestAllocator *alloc)
{
    PfnicFuzz *f = iommu_start();

    ext_cap_ctrl(PCI_EXT_CAP_ID_PASID, 0);
    reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    qtest_system_reset(global_qtest);
    /* QEMU is alive, and the device works behind the IOMMU again. */
    pfnic_fuzz_setup(f);
    pfnic_fuzz_known_good(f);
    pfnic_fuzz_free(f);
    pfnic_qos_end();
}

/*
 * Found reviewing the paths the fuzzer reaches (docs/fuzzing.md, finding
 * 2): a page-selective PASID-based IOTLB invalidation with an address mask
 * above the capability's MAMV (18) was taken, and intel-iommu computed
 * 1 << am in int (undefined from 31 on; on x86 a much smaller range was
 * invalidated). Linux 7.3 sends such descriptors (an AM of 21 in the guest
 * suite), so they must invalidate at least the range asked for: the whole
 * PASID (patch 0005). A remapped page's new translation must be seen.
 */
static void test_iommu_piotlb_am(void *obj, void *data,
                                 QGuestAllocator *alloc)
{
    const unsigned ams[] = { 0, 18, 21, 52 };

    for (int i = 0; i < ARRAY_SIZE(ams); i++) {
        PfnicFuzz *f = iommu_start();

        g_assert_true(pfnic_fuzz_remap_seen(f, ams[i]));
        pfnic_fuzz_free(f);
        pfnic_qos_end();
    }
}

/*
 * intel-iommu keeps the present PASID entries translations read (patch
 * 0006): a PASID-cache invalidation must drop them, so that a changed
 * entry is read again. Without that invalidation the cached entry may be
 * used, as on hardware, which this test only prints.
 */
static void test_iommu_pasid_cache(void *obj, void *data,
                                   QGuestAllocator *alloc)
{
    PfnicFuzz *f = iommu_start();

    g_assert_true(pfnic_fuzz_pasid_switch_seen(f, true));
    pfnic_fuzz_free(f);
    qtest_end();

    f = iommu_start();
    g_test_message("without a PASID-cache invalidation the new entry is %s",
                   pfnic_fuzz_pasid_switch_seen(f, false) ? "seen" :
                   "not seen (the cached one is used)");
    pfnic_fuzz_free(f);
    pfnic_qos_end();
}

/*
 * intel-iommu keeps the page tables first-stage walks reached (patch
 * 0007): an IOTLB invalidation must drop them, so that a changed page
 * directory entry is walked again.
 */
static void test_iommu_pde_cache(void *obj, void *data,
                                 QGuestAllocator *alloc)
{
    PfnicFuzz *f = iommu_start();

    g_assert_true(pfnic_fuzz_pde_switch_seen(f));
    pfnic_fuzz_free(f);
    pfnic_qos_end();
}

static void register_pfnic_iommu_tests(void)
{
    pfnic_add_test("iommu/known-good", test_iommu_known_good,
                   "contexts=4", iommu_before);
    pfnic_add_test("iommu/random", test_iommu_random,
                   "contexts=4", iommu_before);
    pfnic_add_test("wire/random", test_wire_random,
                   "contexts=4,netdev=wire0,mac=" PFNIC_FUZZ_WIRE_MAC,
                   wire_fuzz_before);
    pfnic_add_test("iommu/pasid-disabled", test_iommu_pasid_disabled,
                   "contexts=4", iommu_before);
    pfnic_add_test("iommu/piotlb-am", test_iommu_piotlb_am,
                   "contexts=4", iommu_before);
    pfnic_add_test("iommu/pasid-cache", test_iommu_pasid_cache,
                   "contexts=4", iommu_before);
    pfnic_add_test("iommu/pde-cache", test_iommu_pde_cache,
                   "contexts=4", iommu_before);
    pfnic_add_test("iommu/srq", test_iommu_srq, "contexts=4", iommu_before);
}

libqos_init(register_pfnic_iommu_tests);
