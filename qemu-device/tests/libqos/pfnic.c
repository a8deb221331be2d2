/*
 * libqos driver for pfnic, a PCI Express RDMA NIC with ATS, PASID and PRI
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "../libqtest.h"
#include "qemu/module.h"
#include "hw/pci/pci_regs.h"
#include "pfnic.h"

static void qpfnic_route(QPCIBus *bus, int rp_devfn, int secbus, uint64_t win)
{
    QPCIDevice *rp = qpci_device_find(bus, rp_devfn);

    g_assert(rp);
    qpci_config_writel(rp, PCI_PRIMARY_BUS, (secbus << 16) | (secbus << 8));
    qpci_config_writel(rp, PCI_MEMORY_BASE,
                       ((win + QPFNIC_WIN_SIZE - 1) >> 16 & 0xfff0) << 16 |
                       (win >> 16 & 0xfff0));
    qpci_config_writew(rp, PCI_COMMAND,
                       PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
    g_free(rp);
}

void qpfnic_init(QPfnic *d, QPCIBus *bus, int rp_devfn, int secbus)
{
    QPCIAddress addr = {
        .devfn = QPCI_DEVFN(secbus << 5, 0),
        .vendor_id = PFNIC_VENDOR_ID,
        .device_id = PFNIC_DEVICE_ID,
    };

    d->rp_devfn = rp_devfn;
    d->bus = secbus;
    d->win = QEMU_ALIGN_UP(bus->mmio_alloc_ptr, QPFNIC_WIN_ALIGN);
    g_assert(d->win + QPFNIC_WIN_SIZE <= bus->mmio_limit);
    bus->mmio_alloc_ptr = d->win + QPFNIC_WIN_SIZE;

    qpfnic_route(bus, rp_devfn, secbus, d->win);
    qpci_device_init(&d->dev, bus, &addr);
    d->bar0 = (QPCIBar) { .addr = d->win + QPFNIC_BAR0_OFF };
    d->bar1 = (QPCIBar) { .addr = d->win + QPFNIC_BAR1_OFF };
    d->bar2 = (QPCIBar) { .addr = d->win + QPFNIC_BAR2_OFF };
    d->bar4 = (QPCIBar) { .addr = d->win + QPFNIC_BAR4_OFF };
}

void qpfnic_init_peer(QPfnic *peer, QPfnic *d)
{
    qpfnic_init(peer, d->dev.bus, QPFNIC_RP1_DEVFN, d->bus + 1);
}

void qpfnic_map_bars(QPfnic *d)
{
    qpci_config_writel(&d->dev, PCI_BASE_ADDRESS_0, d->bar0.addr);
    qpci_config_writel(&d->dev, PCI_BASE_ADDRESS_1, d->bar1.addr);
    qpci_config_writel(&d->dev, PCI_BASE_ADDRESS_4, d->bar4.addr);
    qpci_config_writel(&d->dev, PCI_BASE_ADDRESS_5, d->bar4.addr >> 32);
    qpci_config_writel(&d->dev, PCI_BASE_ADDRESS_2, d->bar2.addr);
    qpci_config_writel(&d->dev, PCI_BASE_ADDRESS_3, d->bar2.addr >> 32);
    qpci_config_writew(&d->dev, PCI_COMMAND,
                       PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
}

int qpfnic_ext_caps(QPfnic *d, uint16_t *ids, uint16_t *offs, int max)
{
    uint16_t pos = PCI_CFG_SPACE_SIZE;
    int n = 0;

    while (pos && n < max) {
        uint32_t hdr = qpci_config_readl(&d->dev, pos);

        if (hdr == 0 || hdr == 0xffffffff) {
            break;
        }
        ids[n] = PCI_EXT_CAP_ID(hdr);
        offs[n++] = pos;
        pos = PCI_EXT_CAP_NEXT(hdr);
    }
    return n;
}

static void *qpfnic_get_driver(void *obj, const char *interface)
{
    QPfnic *d = obj;

    if (!g_strcmp0(interface, "pfnic")) {
        return d;
    }
    if (!g_strcmp0(interface, "pci-device")) {
        return &d->dev;
    }
    fprintf(stderr, "%s not present in pfnic\n", interface);
    g_assert_not_reached();
}

static void *qpfnic_create(void *pci_bus, QGuestAllocator *alloc, void *addr)
{
    QPfnic *d = g_new0(QPfnic, 1);

    qpfnic_init(d, pci_bus, QPFNIC_RP0_DEVFN, 1);
    d->obj.get_driver = qpfnic_get_driver;
    return &d->obj;
}

static void pfnic_register_nodes(void)
{
    QOSGraphEdgeOptions opts = {
        .before_cmd_line = "-nodefaults " QPFNIC_ROOT_PORTS,
        .extra_device_opts = "bus=rp0",
    };

    qos_node_create_driver("pfnic", qpfnic_create);
    qos_node_consumes("pfnic", "pci-bus", &opts);
    qos_node_produces("pfnic", "pci-device");
}

libqos_init(pfnic_register_nodes);
