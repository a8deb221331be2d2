/*
 * libFuzzer targets "pfnic-iommu" and "pfnic-wire": the op interpreter of
 * pfnic_fuzz_ops.c against a pfnic behind an intel-iommu with SVA (for
 * pfnic-wire with its port on a netdev the interpreter sends frames into),
 * in QEMU's fuzz framework (tests/qtest/fuzz). The qtest (pfnic-test.c)
 * runs the same interpreter.
 *
 * Each input starts from a machine fresh from a system reset: the
 * interpreter clears the guest memory it uses and programs the IOMMU and
 * the device again, so that an input replays alone exactly as it ran in
 * the fuzzing loop. QEMU_FUZZ_ARGS adds arguments (firmware paths).
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/module.h"
#include "tests/qtest/fuzz/fuzz.h"
#include "pfnic_fuzz.h"

static PfnicFuzz *pfnic_fuzz;
static PfnicFuzzWire pfnic_fuzz_wire;

static GString *pfnic_fuzz_cmdline(FuzzTarget *t)
{
    GString *cmd = g_string_new(TARGET_NAME " -display none "
                                "-machine accel=qtest -m 128M "
                                PFNIC_FUZZ_ARGS);

    if (getenv("QEMU_FUZZ_ARGS")) {
        g_string_append_printf(cmd, " %s", getenv("QEMU_FUZZ_ARGS"));
    }
    return cmd;
}

/*
 * pfnic-wire: the same machine, the port's netdev a dgram socket whose
 * other end the interpreter holds (pfnic_fuzz_wire_open).
 */
static GString *pfnic_fuzz_wire_cmdline(FuzzTarget *t)
{
    char *args = pfnic_fuzz_wire_open(&pfnic_fuzz_wire);
    GString *cmd = g_string_new(TARGET_NAME " -display none "
                                "-machine accel=qtest -m 128M ");

    g_string_append(cmd, args);
    g_free(args);
    if (getenv("QEMU_FUZZ_ARGS")) {
        g_string_append_printf(cmd, " %s", getenv("QEMU_FUZZ_ARGS"));
    }
    return cmd;
}

static void pfnic_fuzz_one(QTestState *s, const unsigned char *data,
                           size_t size)
{
    if (!pfnic_fuzz) {
        pfnic_fuzz = pfnic_fuzz_new(s, flush_events);
        if (pfnic_fuzz_wire.dir) {
            pfnic_fuzz_set_wire(pfnic_fuzz, &pfnic_fuzz_wire);
        }
    }
    pfnic_fuzz_setup(pfnic_fuzz);
    flush_events(s);
    pfnic_fuzz_run(pfnic_fuzz, data, size);
    fuzz_reset(s);
}

static void register_pfnic_fuzz_targets(void)
{
    fuzz_add_target(&(FuzzTarget){
        .name = "pfnic-iommu",
        .description = "Fuzz pfnic's ATS, page requests, ATC and QPs "
                       "behind an intel-iommu with first-level tables "
                       "(docs/fuzzing.md), rebooting after each input",
        .get_init_cmdline = pfnic_fuzz_cmdline,
        .fuzz = pfnic_fuzz_one,
    });
    fuzz_add_target(&(FuzzTarget){
        .name = "pfnic-wire",
        .description = "Fuzz what a peer on pfnic's Ethernet link sends: "
                       "raw and shaped RoCEv2 frames and answers to the "
                       "device's requests, beside pfnic-iommu's operations "
                       "(docs/fuzzing.md), rebooting after each input",
        .get_init_cmdline = pfnic_fuzz_wire_cmdline,
        .fuzz = pfnic_fuzz_one,
    });
}

fuzz_target_init(register_pfnic_fuzz_targets);
