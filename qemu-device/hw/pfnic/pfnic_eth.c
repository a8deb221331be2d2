/*
 * pfnic Ethernet queues (device ABI 1.16): the port as a NIC for the
 * operating system
 *
 * docs/wire.md ("Ethernet queues") is the definition: a transmit and a
 * receive ring of 16-byte descriptors in driver memory, reached with DMA
 * without a PASID (pci_dma_*, as the descriptor rings and the backup
 * buffer), for the frames that are not RoCE. The transmit ring runs in a
 * bottom half once the driver moved its tail, as hardware works after the
 * store that rang it; the receive ring is filled from the port's receive
 * bottom half (pfnic_net.c) with what the RC transport does not take.
 *
 * Nothing the driver writes is trusted: a register value out of range is
 * a guest error and ignored, a bad descriptor completes BAD, and a ring
 * the device cannot read or write stops the queues.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "hw/pci/msix.h"
#include "net/eth.h"
#include "pfnic.h"
#include "pfnic_regs.h"
#include "trace.h"

QEMU_BUILD_BUG_ON(sizeof(PfnicEthDesc) != PFNIC_ETH_DESC_SIZE);
/* The receive ring's registers are the transmit ring's, further on. */
QEMU_BUILD_BUG_ON(PFNIC_REG_ETH_RX_HEAD - PFNIC_REG_ETH_RX_LO !=
                  PFNIC_REG_ETH_TX_HEAD - PFNIC_REG_ETH_TX_LO);

static const char *pfnic_eth_name(const PfnicState *s, const PfnicEthRing *r)
{
    return r == &s->eth_tx ? "transmit" : "receive";
}

/*
 * The ring whose register @addr is, and in *@reg the transmit ring's
 * register at the same place (PFNIC_REG_ETH_TX_*)
 */
static PfnicEthRing *pfnic_eth_ring(PfnicState *s, hwaddr addr, hwaddr *reg)
{
    if (addr >= PFNIC_REG_ETH_RX_LO) {
        *reg = addr - PFNIC_REG_ETH_RX_LO + PFNIC_REG_ETH_TX_LO;
        return &s->eth_rx;
    }
    *reg = addr;
    return &s->eth_tx;
}

static hwaddr pfnic_eth_desc_addr(const PfnicEthRing *r)
{
    return r->base + (hwaddr)r->head * PFNIC_ETH_DESC_SIZE;
}

/* Stop both rings; descriptors posted and not done stay not done. */
static void pfnic_eth_stop(PfnicState *s, const char *why)
{
    trace_pfnic_eth_stop(why);
    s->eth_ctrl &= ~PFNIC_ETH_CTRL_ENABLE;
    qemu_bh_cancel(s->eth_tx_bh);
}

/* A ring the device cannot read or write: a guest error, the queues stop. */
static void pfnic_eth_fail(PfnicState *s, const char *what)
{
    pfnic_guest_error(s, what);
    pfnic_eth_stop(s, what);
}

/* Signal ETH_VECTOR once; the driver re-arms with IRQ_ENABLE. */
static void pfnic_eth_signal(PfnicState *s)
{
    PCIDevice *pdev = PCI_DEVICE(s);

    s->eth_ctrl &= ~PFNIC_ETH_CTRL_IRQ_ENABLE;
    s->eth_pending = false;
    trace_pfnic_eth_irq(s->eth_vector);
    /* msix_notify() records a pending bit if the vector is masked. */
    if (msix_enabled(pdev) && s->eth_vector < s->num_vectors) {
        msix_notify(pdev, s->eth_vector);
    }
}

/* Read the descriptor at @r's head; false (the queues stopped) if it fails. */
static bool pfnic_eth_desc_read(PfnicState *s, PfnicEthRing *r,
                                PfnicEthDesc *d)
{
    if (pci_dma_read(PCI_DEVICE(s), pfnic_eth_desc_addr(r), d,
                     sizeof(*d)) != MEMTX_OK) {
        pfnic_eth_fail(s, r == &s->eth_tx ?
                       "Ethernet transmit ring unreadable" :
                       "Ethernet receive ring unreadable");
        return false;
    }
    d->addr = le64_to_cpu(d->addr);
    d->len = le16_to_cpu(d->len);
    d->flags = le16_to_cpu(d->flags);
    return true;
}

/*
 * Complete the descriptor at @r's head with @code and @len (a received
 * frame's), move the head on, and signal or remember the completion.
 * False (the queues stopped) if the status cannot be written.
 */
static bool pfnic_eth_desc_complete(PfnicState *s, PfnicEthRing *r,
                                    uint32_t code, uint32_t len)
{
    uint32_t status = cpu_to_le32(PFNIC_ETH_DONE |
                                  code << PFNIC_ETH_CODE_SHIFT |
                                  (len & PFNIC_ETH_LEN_MASK));

    if (pci_dma_write(PCI_DEVICE(s), pfnic_eth_desc_addr(r) +
                      offsetof(PfnicEthDesc, status), &status,
                      sizeof(status)) != MEMTX_OK) {
        pfnic_eth_fail(s, r == &s->eth_tx ?
                       "Ethernet transmit ring unwritable" :
                       "Ethernet receive ring unwritable");
        return false;
    }
    r->head = (r->head + 1) & (r->size - 1);
    if (s->eth_ctrl & PFNIC_ETH_CTRL_IRQ_ENABLE) {
        pfnic_eth_signal(s);
    } else {
        s->eth_pending = true;
    }
    return true;
}

/* Log a descriptor the driver filled in wrong (it completes BAD). */
static void pfnic_eth_bad_desc(PfnicState *s, PfnicEthRing *r,
                               const PfnicEthDesc *d, const char *why)
{
    qemu_log_mask(LOG_GUEST_ERROR,
                  "pfnic: Ethernet %s descriptor %u (addr 0x%" PRIx64
                  " len %u flags 0x%x): %s\n", pfnic_eth_name(s, r),
                  r->head, d->addr, d->len, d->flags, why);
}

/*
 * Send the frames the driver posted, in order, each completed in its
 * descriptor: OK once on the wire, BAD for a length out of range or a
 * buffer that cannot be read, NO_LINK without a wire or link.
 */
static void pfnic_eth_tx_bh(void *opaque)
{
    PfnicState *s = opaque;
    PfnicEthRing *r = &s->eth_tx;
    uint8_t frame[PFNIC_ETH_FRAME_MAX];
    PfnicEthDesc d;

    while (pfnic_eth_enabled(s) && r->head != r->tail) {
        uint32_t code = PFNIC_ETH_OK;

        if (!pfnic_eth_desc_read(s, r, &d)) {
            return;
        }
        if (d.flags) {
            pfnic_eth_bad_desc(s, r, &d, "flags are not 0");
            code = PFNIC_ETH_BAD;
        } else if (d.len < PFNIC_ETH_FRAME_MIN ||
                   d.len > PFNIC_ETH_FRAME_MAX) {
            pfnic_eth_bad_desc(s, r, &d, "length out of range");
            code = PFNIC_ETH_BAD;
        } else if (!(pfnic_port_status(s) & PFNIC_PORT_STATUS_LINK_UP)) {
            code = PFNIC_ETH_NO_LINK;
        } else if (pci_dma_read(PCI_DEVICE(s), d.addr, frame,
                                d.len) != MEMTX_OK) {
            pfnic_eth_bad_desc(s, r, &d, "buffer unreadable");
            code = PFNIC_ETH_BAD;
        } else {
            pfnic_net_send_frame(s, frame, d.len);
            pfnic_port_count(s, PFNIC_PORT_ETH_TX);
        }
        trace_pfnic_eth_tx(r->head, d.len, code);
        if (!pfnic_eth_desc_complete(s, r, code, 0)) {
            return;
        }
    }
}

/*
 * A frame from the wire (at least an Ethernet header) that is not RoCE for
 * this port. When the queues run and its destination MAC is ours,
 * broadcast or multicast (any with PROMISC), it is the receive ring's:
 * copied into the buffer at the head, or dropped when none is posted or
 * it is too short. Returns whether the frame was the ring's, placed or
 * not (then the port counts it nowhere else).
 */
bool pfnic_eth_rx(PfnicState *s, const uint8_t *frame, size_t len)
{
    PfnicEthRing *r = &s->eth_rx;
    uint32_t code = PFNIC_ETH_OK;
    PfnicEthDesc d;

    if (!pfnic_eth_enabled(s) ||
        (!(s->eth_ctrl & PFNIC_ETH_CTRL_PROMISC) &&
         !is_multicast_ether_addr(frame) &&
         memcmp(frame, s->conf.macaddr.a, ETH_ALEN))) {
        return false;
    }
    if (r->head == r->tail) {
        pfnic_port_count(s, PFNIC_PORT_ETH_RX_DROPPED);
        trace_pfnic_eth_rx_drop("no buffer posted", len);
        return true;
    }
    if (!pfnic_eth_desc_read(s, r, &d)) {
        return true;
    }
    if (d.flags) {
        pfnic_eth_bad_desc(s, r, &d, "flags are not 0");
        code = PFNIC_ETH_BAD;
    } else if (len > d.len) {
        /* The buffer stays posted for a frame that fits. */
        pfnic_port_count(s, PFNIC_PORT_ETH_RX_DROPPED);
        trace_pfnic_eth_rx_drop("buffer too short", len);
        return true;
    } else if (pci_dma_write(PCI_DEVICE(s), d.addr, frame,
                             len) != MEMTX_OK) {
        pfnic_eth_bad_desc(s, r, &d, "buffer unwritable");
        code = PFNIC_ETH_BAD;
    }
    trace_pfnic_eth_rx(r->head, len, code);
    if (pfnic_eth_desc_complete(s, r, code,
                                code == PFNIC_ETH_OK ? len : 0) &&
        code == PFNIC_ETH_OK) {
        pfnic_port_count(s, PFNIC_PORT_ETH_RX);
    }
    return true;
}

/* --- registers ---------------------------------------------------------- */

static bool pfnic_eth_ring_usable(const PfnicEthRing *r)
{
    return r->base && !(r->base % PFNIC_ETH_RING_ALIGN) && r->size;
}

/*
 * ETH_CTRL: setting ENABLE starts both rings at head 0 (both must be
 * programmed), clearing it stops them; IRQ_ENABLE with completions since
 * the last signal signals at once.
 */
static void pfnic_eth_set_ctrl(PfnicState *s, uint32_t val)
{
    bool enable = val & PFNIC_ETH_CTRL_ENABLE;

    if (val & ~PFNIC_ETH_CTRL_MASK) {
        pfnic_guest_error(s, "reserved ETH_CTRL bits set");
        return;
    }
    if (enable && !pfnic_eth_enabled(s)) {
        if (!pfnic_eth_ring_usable(&s->eth_tx) ||
            !pfnic_eth_ring_usable(&s->eth_rx)) {
            pfnic_guest_error(s, "Ethernet queues enabled without a ring "
                              "(address 0 or unaligned, or no size)");
            return;
        }
        s->eth_tx.head = s->eth_tx.tail = 0;
        s->eth_rx.head = s->eth_rx.tail = 0;
        s->eth_pending = false;
    } else if (!enable && pfnic_eth_enabled(s)) {
        pfnic_eth_stop(s, "ETH_CTRL");
    }
    s->eth_ctrl = val;
    trace_pfnic_eth_ctrl(val, s->eth_pending);
    if ((val & PFNIC_ETH_CTRL_IRQ_ENABLE) && s->eth_pending) {
        pfnic_eth_signal(s);
    }
}

/*
 * A ring's tail: below its size, and only forward from where it is up to
 * the head (what is posted stays posted; size - 1 descriptors at most).
 */
static void pfnic_eth_set_tail(PfnicState *s, PfnicEthRing *r, uint32_t val)
{
    uint32_t mask = r->size - 1;

    if (!pfnic_eth_enabled(s)) {
        pfnic_guest_error(s, "Ethernet ring tail written while the queues "
                          "are stopped");
        return;
    }
    if (val >= r->size) {
        pfnic_guest_error(s, "Ethernet ring tail out of range");
        return;
    }
    if (((val - r->head) & mask) < ((r->tail - r->head) & mask)) {
        pfnic_guest_error(s, "Ethernet ring tail moved back");
        return;
    }
    r->tail = val;
    if (r == &s->eth_tx) {
        qemu_bh_schedule(s->eth_tx_bh);
    }
}

void pfnic_eth_write(PfnicState *s, hwaddr addr, uint32_t val)
{
    PfnicEthRing *r;
    hwaddr reg;

    switch (addr) {
    case PFNIC_REG_ETH_CTRL:
        pfnic_eth_set_ctrl(s, val);
        return;
    case PFNIC_REG_ETH_VECTOR:
        if (val >= s->num_vectors) {
            pfnic_guest_error(s, "Ethernet vector out of range");
            return;
        }
        s->eth_vector = val;
        return;
    }
    r = pfnic_eth_ring(s, addr, &reg);
    switch (reg) {
    case PFNIC_REG_ETH_TX_LO:
    case PFNIC_REG_ETH_TX_HI:
    case PFNIC_REG_ETH_TX_SIZE:
        if (pfnic_eth_enabled(s)) {
            pfnic_guest_error(s, "Ethernet ring changed while enabled");
            return;
        }
        if (reg == PFNIC_REG_ETH_TX_LO) {
            r->base = deposit64(r->base, 0, 32, val);
        } else if (reg == PFNIC_REG_ETH_TX_HI) {
            r->base = deposit64(r->base, 32, 32, val);
        } else if (val < PFNIC_RING_MIN || val > PFNIC_RING_MAX ||
                   !is_power_of_2(val)) {
            pfnic_guest_error(s, "bad Ethernet ring size");
        } else {
            r->size = val;
        }
        break;
    case PFNIC_REG_ETH_TX_TAIL:
        pfnic_eth_set_tail(s, r, val);
        break;
    case PFNIC_REG_ETH_TX_HEAD:
        pfnic_guest_error(s, "write to a read-only register");
        break;
    default:
        /* pfnic_ctrl.c gives aligned registers of the block only */
        pfnic_guest_error(s, "write of an unknown Ethernet register");
        break;
    }
}

uint32_t pfnic_eth_read(PfnicState *s, hwaddr addr)
{
    PfnicEthRing *r;
    hwaddr reg;

    switch (addr) {
    case PFNIC_REG_ETH_CTRL:
        return s->eth_ctrl;
    case PFNIC_REG_ETH_VECTOR:
        return s->eth_vector;
    }
    r = pfnic_eth_ring(s, addr, &reg);
    switch (reg) {
    case PFNIC_REG_ETH_TX_LO:
        return r->base;
    case PFNIC_REG_ETH_TX_HI:
        return r->base >> 32;
    case PFNIC_REG_ETH_TX_SIZE:
        return r->size;
    case PFNIC_REG_ETH_TX_TAIL:
        return r->tail;
    case PFNIC_REG_ETH_TX_HEAD:
        return r->head;
    default:
        return 0;
    }
}

/* --- lifecycle ---------------------------------------------------------- */

void pfnic_eth_init(PfnicState *s)
{
    s->eth_tx_bh = aio_bh_new_guarded(qemu_get_aio_context(),
                                      pfnic_eth_tx_bh, s,
                                      &DEVICE(s)->mem_reentrancy_guard);
}

void pfnic_eth_exit(PfnicState *s)
{
    qemu_bh_delete(s->eth_tx_bh);
}

/* Reset clears the Ethernet registers and disables the queues. */
void pfnic_eth_reset(PfnicState *s)
{
    qemu_bh_cancel(s->eth_tx_bh);
    s->eth_ctrl = 0;
    s->eth_vector = 0;
    s->eth_pending = false;
    s->eth_tx = (PfnicEthRing) { };
    s->eth_rx = (PfnicEthRing) { };
}
