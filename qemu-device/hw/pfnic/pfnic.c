/*
 * pfnic: a PCIe RDMA NIC with ATS, PASID and PRI
 *
 * QOM and PCI glue: properties, config space and capabilities, BARs,
 * MSI-X and reset. The register semantics live in pfnic_ctrl.c; the
 * layout is defined in docs/registers.md.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/main-loop.h"
#include "qemu/module.h"
#include "qemu/timer.h"
#include "qemu/units.h"
#include "qapi/error.h"
#include "hw/pci/msix.h"
#include "hw/pci/pcie.h"
#include "hw/qdev-properties.h"
#include "hw/qdev-properties-system.h"
#include "migration/vmstate.h"
#include "pfnic.h"
#include "pfnic_regs.h"
#include "trace.h"

#define PFNIC_PCIE_CAP_OFFSET       0x80
#define PFNIC_MAX_VECTORS           64
#define PFNIC_MAX_CONTEXTS          1024
#define PFNIC_DM_SIZE_DEFAULT       (256 * KiB)
#define PFNIC_DM_SIZE_MIN           (4 * KiB)
#define PFNIC_DM_SIZE_MAX           (16 * MiB)

static bool pfnic_check_props(PfnicState *s, Error **errp)
{
    if (s->num_vectors < 2 || s->num_vectors > PFNIC_MAX_VECTORS) {
        error_setg(errp, "pfnic: vectors must be in 2..%d",
                   PFNIC_MAX_VECTORS);
        return false;
    }
    if (s->num_contexts < 1 || s->num_contexts > PFNIC_MAX_CONTEXTS ||
        !is_power_of_2(s->num_contexts)) {
        error_setg(errp, "pfnic: contexts must be a power of two in 1..%d",
                   PFNIC_MAX_CONTEXTS);
        return false;
    }
    if (s->wire_loss > 1000000 || s->wire_reorder > 1000000) {
        error_setg(errp, "pfnic: x-wire-loss and x-wire-reorder are per "
                   "million (0..1000000)");
        return false;
    }
    if (s->pri && !s->ats) {
        error_setg(errp, "pfnic: pri=on requires ats=on");
        return false;
    }
    if (s->pri_requests < 1 || s->pri_requests > PFNIC_PRI_OUTSTANDING) {
        error_setg(errp, "pfnic: pri-requests must be in 1..%d",
                   PFNIC_PRI_OUTSTANDING);
        return false;
    }
    /* The tables are QEMU memory the guest allocates: 8 bytes an entry. */
    if (s->table_entries < 1 || s->table_entries > PFNIC_TABLE_ENTRIES_MAX) {
        error_setg(errp, "pfnic: table-entries must be in 1..%u",
                   PFNIC_TABLE_ENTRIES_MAX);
        return false;
    }
    /* ABI 1.13: device memory is QEMU RAM behind BAR1 (0: none). */
    if (s->dm_size && (s->dm_size < PFNIC_DM_SIZE_MIN ||
                       s->dm_size > PFNIC_DM_SIZE_MAX ||
                       !is_power_of_2(s->dm_size))) {
        error_setg(errp, "pfnic: dm-size must be 0 or a power of two in "
                   "%u..%u", (unsigned)PFNIC_DM_SIZE_MIN,
                   (unsigned)PFNIC_DM_SIZE_MAX);
        return false;
    }
    return true;
}

/*
 * Extended capabilities, in the documented order (ATS, PASID, PRI), each
 * placed right after the previous one so that any subset stays a valid
 * chain starting at 0x100.
 */
static void pfnic_init_ext_caps(PfnicState *s)
{
    PCIDevice *pdev = PCI_DEVICE(s);
    uint16_t offset = PCI_CONFIG_SPACE_SIZE;

    if (s->ats) {
        pcie_ats_init(pdev, offset, true);
        offset += PCI_EXT_CAP_ATS_SIZEOF;
    }
    if (s->pasid) {
        pcie_pasid_init(pdev, offset, PFNIC_PASID_WIDTH, false, false);
        offset += PCI_EXT_CAP_PASID_SIZEOF;
    }
    if (s->pri) {
        /* Responses must carry the PASID whenever requests can have one. */
        pcie_pri_init(pdev, offset, s->pri_requests, s->pasid);
        offset += PCI_EXT_CAP_PRI_SIZEOF;
    }
}

static void pfnic_dm_exit(PfnicState *s)
{
    if (s->dm_size) {
        address_space_destroy(&s->dm_as);
    }
}

static void pfnic_realize(PCIDevice *pdev, Error **errp)
{
    PfnicState *s = PFNIC(pdev);

    if (!pfnic_check_props(s, errp)) {
        return;
    }

    pdev->config[PCI_INTERRUPT_PIN] = 0; /* MSI-X only */

    memory_region_init_io(&s->ctrl, OBJECT(s), &pfnic_ctrl_ops, s,
                          "pfnic-ctrl", PFNIC_CTRL_SIZE);
    pci_register_bar(pdev, PFNIC_BAR_CTRL, PCI_BASE_ADDRESS_SPACE_MEMORY,
                     &s->ctrl);

    /*
     * Device memory (ABI 1.13): RAM, as the exchange buffer BAR of
     * hw/acpi/erst.c, that the CPU reaches directly through BAR1 (an alias
     * of it) and the engine through dm_as, whose root it is (so it stays
     * at 0 there wherever the guest puts BAR1).
     */
    if (s->dm_size) {
        if (!memory_region_init_ram(&s->dm, OBJECT(s), "pfnic-dm",
                                    s->dm_size, errp)) {
            return;
        }
        memory_region_init_alias(&s->dm_bar, OBJECT(s), "pfnic-dm-bar",
                                 &s->dm, 0, s->dm_size);
        pci_register_bar(pdev, PFNIC_BAR_DM,
                         PCI_BASE_ADDRESS_SPACE_MEMORY |
                         PCI_BASE_ADDRESS_MEM_PREFETCH, &s->dm_bar);
        address_space_init(&s->dm_as, &s->dm, "pfnic-dm");
    }

    memory_region_init_io(&s->doorbell, OBJECT(s), &pfnic_doorbell_ops, s,
                          "pfnic-doorbell",
                          (uint64_t)s->num_contexts * PFNIC_DOORBELL_PAGE_SIZE);
    pci_register_bar(pdev, PFNIC_BAR_DOORBELL,
                     PCI_BASE_ADDRESS_SPACE_MEMORY |
                     PCI_BASE_ADDRESS_MEM_TYPE_64 |
                     PCI_BASE_ADDRESS_MEM_PREFETCH, &s->doorbell);

    /* Standard capabilities: PCI Express first, then MSI-X. */
    if (pcie_endpoint_cap_init(pdev, PFNIC_PCIE_CAP_OFFSET) < 0) {
        error_setg(errp, "pfnic: failed to add the PCI Express capability");
        pfnic_dm_exit(s);
        return;
    }
    if (msix_init_exclusive_bar(pdev, s->num_vectors, PFNIC_BAR_MSIX,
                                errp)) {
        pcie_cap_exit(pdev);
        pfnic_dm_exit(s);
        return;
    }
    for (uint32_t v = 0; v < s->num_vectors; v++) {
        msix_vector_use(pdev, v);
    }

    pfnic_init_ext_caps(s);

    /* The device clock starts now; no reset restarts it. */
    s->clock_base = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    s->contexts = g_new0(PfnicContext, s->num_contexts);
    pfnic_net_realize(s, DEVICE(pdev));
    pfnic_eth_init(s);
    pfnic_roce_init(s);
    pfnic_engine_init(s);
    s->selftest_bh = aio_bh_new_guarded(qemu_get_aio_context(),
                                        pfnic_selftest_bh, s,
                                        &DEVICE(pdev)->mem_reentrancy_guard);
    pfnic_ctrl_reset(s);
    trace_pfnic_realize(pfnic_caps(s), s->num_vectors, s->num_contexts,
                        s->dm_size);
}

static void pfnic_exit(PCIDevice *pdev)
{
    PfnicState *s = PFNIC(pdev);

    qemu_bh_delete(s->selftest_bh);
    pfnic_engine_exit(s);
    pfnic_roce_exit(s);
    pfnic_eth_exit(s);
    pfnic_net_exit(s);
    g_free(s->contexts);
    msix_unuse_all_vectors(pdev);
    msix_uninit_exclusive_bar(pdev);
    pcie_cap_exit(pdev);
    pfnic_dm_exit(s);
}

static void pfnic_reset_hold(Object *obj, ResetType type)
{
    PfnicState *s = PFNIC(obj);

    trace_pfnic_reset("device reset");
    pfnic_ctrl_reset(s);
}

static const Property pfnic_properties[] = {
    DEFINE_PROP_BOOL("ats", PfnicState, ats, true),
    DEFINE_PROP_BOOL("pasid", PfnicState, pasid, true),
    DEFINE_PROP_BOOL("pri", PfnicState, pri, true),
    DEFINE_PROP_UINT32("pri-requests", PfnicState, pri_requests,
                       PFNIC_PRI_OUTSTANDING),
    DEFINE_PROP_UINT32("vectors", PfnicState, num_vectors, 8),
    DEFINE_PROP_UINT32("contexts", PfnicState, num_contexts, 64),
    DEFINE_PROP_UINT32("table-entries", PfnicState, table_entries,
                       PFNIC_TABLE_ENTRIES),
    DEFINE_PROP_UINT32("dm-size", PfnicState, dm_size, PFNIC_DM_SIZE_DEFAULT),
    /* Fault injection (0: off): every Nth page request or response. */
    DEFINE_PROP_UINT32("x-inject-prq-full", PfnicState, inject_prq_full, 0),
    DEFINE_PROP_UINT32("x-inject-pri-failure", PfnicState, inject_pri_failure,
                       0),
    DEFINE_PROP_UINT32("x-inject-ctx-stuck", PfnicState, inject_ctx_stuck, 0),
    DEFINE_PROP_UINT32("x-inject-destroy-busy", PfnicState,
                       inject_destroy_busy, 0),
    /* The port (docs/wire.md): no netdev means loopback only. */
    DEFINE_NIC_PROPERTIES(PfnicState, conf),
    /* Wire faults for tests, per million RoCE frames sent (0: off). */
    DEFINE_PROP_UINT32("x-wire-loss", PfnicState, wire_loss, 0),
    DEFINE_PROP_UINT32("x-wire-reorder", PfnicState, wire_reorder, 0),
};

/* Live migration is not supported until the engine state is described. */
static const VMStateDescription vmstate_pfnic = {
    .name = TYPE_PFNIC,
    .unmigratable = 1,
};

static void pfnic_class_init(ObjectClass *klass, const void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    PCIDeviceClass *k = PCI_DEVICE_CLASS(klass);
    ResettableClass *rc = RESETTABLE_CLASS(klass);

    k->realize = pfnic_realize;
    k->exit = pfnic_exit;
    k->vendor_id = PFNIC_PCI_VENDOR_ID;
    k->device_id = PFNIC_PCI_DEVICE_ID;
    k->subsystem_vendor_id = PFNIC_PCI_VENDOR_ID;
    k->subsystem_id = PFNIC_PCI_SUBSYS_ID;
    k->revision = PFNIC_PCI_REVISION;
    k->class_id = PCI_CLASS_NETWORK_OTHER;
    rc->phases.hold = pfnic_reset_hold;
    dc->desc = "pfnic RDMA NIC with ATS, PASID and PRI";
    dc->vmsd = &vmstate_pfnic;
    device_class_set_props(dc, pfnic_properties);
    set_bit(DEVICE_CATEGORY_NETWORK, dc->categories);
}

static const TypeInfo pfnic_types[] = {
    {
        .name = TYPE_PFNIC,
        .parent = TYPE_PCI_DEVICE,
        .instance_size = sizeof(PfnicState),
        .class_init = pfnic_class_init,
        .interfaces = (const InterfaceInfo[]) {
            { INTERFACE_PCIE_DEVICE },
            { }
        },
    },
};

DEFINE_TYPES(pfnic_types)
