/*
 * libqos driver for pfnic, a PCI Express RDMA NIC with ATS, PASID and PRI
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef QGRAPH_PFNIC_H
#define QGRAPH_PFNIC_H

#include "qgraph.h"
#include "pci.h"

#define PFNIC_VENDOR_ID         0x1af4
#define PFNIC_DEVICE_ID         0x10f5

/*
 * pfnic is an endpoint: the graph puts it behind a pcie-root-port (rp0,
 * 02.0, bus 1), with a second root port (rp1, 03.0, bus 2) for a second
 * pfnic (the wire tests' peer, qpfnic_init_peer()).
 */
#define QPFNIC_RP0_DEVFN        QPCI_DEVFN(2, 0)
#define QPFNIC_RP1_DEVFN        QPCI_DEVFN(3, 0)
#define QPFNIC_ROOT_PORTS \
    "-device pcie-root-port,id=rp0,chassis=1,addr=2.0 " \
    "-device pcie-root-port,id=rp1,chassis=2,addr=3.0"

/*
 * Each root port forwards a 16 MiB memory window, 256 MiB apart (rp0's at
 * 0xc0000000 on q35); the BARs sit at fixed offsets in it.
 */
#define QPFNIC_WIN_SIZE         0x1000000ULL
#define QPFNIC_WIN_ALIGN        0x10000000ULL
#define QPFNIC_BAR0_OFF         0x000000ULL     /* control registers */
#define QPFNIC_BAR4_OFF         0x100000ULL     /* MSI-X */
#define QPFNIC_BAR2_OFF         0x200000ULL     /* doorbell pages */
#define QPFNIC_BAR1_OFF         0x400000ULL     /* device memory */

typedef struct QPfnic {
    QOSGraphObject obj;
    QPCIDevice dev;
    int rp_devfn;               /* its root port, on bus 0 */
    int bus;                    /* the root port's secondary bus */
    uint64_t win;               /* the root port's memory window */
    QPCIBar bar0, bar1, bar2, bar4;
} QPfnic;

/*
 * Route @secbus and a memory window through the root port at @rp_devfn
 * of @bus, and reach the pfnic at @secbus:00.0 through it. BARs are not
 * programmed (qpfnic_map_bars()).
 */
void qpfnic_init(QPfnic *d, QPCIBus *bus, int rp_devfn, int secbus);
/* The second pfnic, on rp1, of a machine whose first is @d */
void qpfnic_init_peer(QPfnic *peer, QPfnic *d);
/*
 * Program BAR0, BAR1 (device memory, when there is some), BAR2 and BAR4
 * (both 64-bit) at their place in the window, and enable memory decoding
 * and bus mastering.
 */
void qpfnic_map_bars(QPfnic *d);
/*
 * Fill @ids and @offs with the function's extended capabilities in list
 * order; returns how many (at most @max).
 */
int qpfnic_ext_caps(QPfnic *d, uint16_t *ids, uint16_t *offs, int max);

#endif
