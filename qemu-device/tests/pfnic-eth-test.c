/*
 * QTest for pfnic: the Ethernet queues (device ABI 1.16, docs/wire.md,
 * "Ethernet queues"): their registers and the guest errors, frames sent
 * from the transmit ring as they were posted, frames for the operating
 * system in the receive ring and what is dropped or left to the RC
 * transport, ARP left to the operating system while they run, the
 * interrupt's auto-mask and re-arm, a ring the device cannot reach, and
 * reset. The test is the driver, and a stranger on the wire tests' hub
 * (a unix datagram socket it holds) the other end of the wire.
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "pfnic-test.h"

#define ETH_VEC         6
#define ETH_RING        8                       /* descriptors a ring */
#define ETH_TX_RING     PFNIC_GPA(0xa00000ULL)
#define ETH_RX_RING     PFNIC_GPA(0xa10000ULL)
#define ETH_BUF_SIZE    0x800
/* Buffers: one a slot of each ring */
#define ETH_TX_BUF(n)   PFNIC_GPA(0xa20000ULL + (n) % ETH_RING * ETH_BUF_SIZE)
#define ETH_RX_BUF(n)   PFNIC_GPA(0xa80000ULL + (n) % ETH_RING * ETH_BUF_SIZE)
#define ETH_MSG         PFNIC_GPA(0xaff000ULL)  /* ETH_VEC's MSI-X message */
#define ETH_MSG_DATA    0x600d
#define UNBACKED        0xfffff0000000ULL       /* no memory there */
#define ETH_P_TEST      0x88b5                  /* local experimental */
#define ETH_P_ARP       0x0806

/* A descriptor's status once done */
#define DONE(code, len) (PFNIC_ETH_DONE | (code) << PFNIC_ETH_CODE_SHIFT | \
                         (len))

/* Descriptors the test posted on each ring, free-running */
static uint32_t tx_next, rx_next;
/* ETH_VEC: its pending bit in the PBA, its MSI-X table entry */
static uint32_t eth_pba;
static uint64_t eth_entry;

static void eth_desc(uint64_t ring, uint32_t n, uint64_t addr, uint16_t len,
                     uint16_t flags)
{
    PfnicEthDesc d = {
        .addr = cpu_to_le64(addr), .len = cpu_to_le16(len),
        .flags = cpu_to_le16(flags),
    };

    memwrite(ring + n % ETH_RING * PFNIC_ETH_DESC_SIZE, &d, sizeof(d));
}

static uint32_t eth_status(uint64_t ring, uint32_t n)
{
    uint32_t st;

    memread(ring + n % ETH_RING * PFNIC_ETH_DESC_SIZE +
            offsetof(PfnicEthDesc, status), &st, sizeof(st));
    return le32_to_cpu(st);
}

/* Descriptor @n's status, once done (or after 10 ms of virtual time) */
static uint32_t eth_wait(uint64_t ring, uint32_t n)
{
    uint32_t st = eth_status(ring, n);

    for (int i = 0; i < 1000 && !(st & PFNIC_ETH_DONE); i++) {
        clock_step(10000);
        st = eth_status(ring, n);
    }
    return st;
}

static void eth_rings(uint64_t tx, uint64_t rx)
{
    reg_write(PFNIC_REG_ETH_TX_LO, tx);
    reg_write(PFNIC_REG_ETH_TX_HI, tx >> 32);
    reg_write(PFNIC_REG_ETH_TX_SIZE, ETH_RING);
    reg_write(PFNIC_REG_ETH_RX_LO, rx);
    reg_write(PFNIC_REG_ETH_RX_HI, rx >> 32);
    reg_write(PFNIC_REG_ETH_RX_SIZE, ETH_RING);
}

/* Both rings at their place (cleared), ETH_VEC, and ENABLE | @ctrl */
static void eth_start(uint32_t ctrl)
{
    static const uint8_t zero[ETH_RING * PFNIC_ETH_DESC_SIZE];

    memwrite(ETH_TX_RING, zero, sizeof(zero));
    memwrite(ETH_RX_RING, zero, sizeof(zero));
    eth_rings(ETH_TX_RING, ETH_RX_RING);
    reg_write(PFNIC_REG_ETH_VECTOR, ETH_VEC);
    reg_write(PFNIC_REG_ETH_CTRL, PFNIC_ETH_CTRL_ENABLE | ctrl);
    g_assert_cmphex(reg_read(PFNIC_REG_ETH_CTRL), ==,
                    PFNIC_ETH_CTRL_ENABLE | ctrl);
    tx_next = rx_next = 0;
}

/* Post one transmit descriptor and move the tail: its status once done */
static uint32_t eth_tx_desc(uint64_t addr, uint16_t len, uint16_t flags)
{
    uint32_t n = tx_next++;

    eth_desc(ETH_TX_RING, n, addr, len, flags);
    reg_write(PFNIC_REG_ETH_TX_TAIL, tx_next % ETH_RING);
    return eth_wait(ETH_TX_RING, n);
}

static uint32_t eth_tx(const uint8_t *f, size_t len)
{
    memwrite(ETH_TX_BUF(tx_next), f, len);
    return eth_tx_desc(ETH_TX_BUF(tx_next), len, 0);
}

/* Post a receive buffer of @len bytes (its slot filled with 0xee) */
static void eth_rx_post(uint16_t len)
{
    uint8_t junk[ETH_BUF_SIZE];

    memset(junk, 0xee, sizeof(junk));
    memwrite(ETH_RX_BUF(rx_next), junk, sizeof(junk));
    eth_desc(ETH_RX_RING, rx_next, ETH_RX_BUF(rx_next), len, 0);
    rx_next++;
    reg_write(PFNIC_REG_ETH_RX_TAIL, rx_next % ETH_RING);
}

/* Receive descriptor @n completed OK with @f, and nothing past it */
static void eth_rx_expect(uint32_t n, const uint8_t *f, size_t len)
{
    uint8_t got[ETH_BUF_SIZE];

    g_assert_cmphex(eth_wait(ETH_RX_RING, n), ==, DONE(PFNIC_ETH_OK, len));
    memread(ETH_RX_BUF(n), got, len + 1);
    g_assert_cmpmem(got, len, f, len);
    g_assert_cmphex(got[len], ==, 0xee);
}

/* A frame of @len bytes from @src to @dst, @type, a pattern after */
static size_t eth_frame(uint8_t *f, const uint8_t *dst, const uint8_t *src,
                        uint16_t type, size_t len, uint8_t seed)
{
    memcpy(f, dst, 6);
    memcpy(f + 6, src, 6);
    stw_be_p(f + 12, type);
    pattern(f + 14, len - 14, seed);
    return len;
}

/*
 * From the stranger to @dst: an IPv4 datagram of @proto from IP_S to
 * @dip, @payload bytes after its header (UDP: a header to @dport first)
 */
static size_t ipv4_frame(uint8_t *f, const uint8_t *dst, uint32_t dip,
                         uint8_t proto, uint16_t dport, size_t payload)
{
    uint8_t *ip = f + 14, *udp = ip + 20;

    eth_frame(f, dst, mac_s, 0x0800, 14 + 20 + payload, proto);
    ip[0] = 0x45;
    ip[1] = 0;
    stw_be_p(ip + 2, 20 + payload);
    stw_be_p(ip + 4, 0);
    stw_be_p(ip + 6, 0x4000);                   /* DF */
    ip[8] = 64;
    ip[9] = proto;
    stw_be_p(ip + 10, 0);
    stl_be_p(ip + 12, IP_S);
    stl_be_p(ip + 16, dip);
    stw_be_p(ip + 10, ip_csum(ip, 20));
    if (proto == 17) {
        stw_be_p(udp, 0xc000);
        stw_be_p(udp + 2, dport);
        stw_be_p(udp + 4, payload);
        stw_be_p(udp + 6, 0);
    }
    return 14 + 20 + payload;
}

/* The stranger sends @f; wait for A's port to have taken it in. */
static void eth_from_stranger(Stranger *st, const uint8_t *f, size_t len)
{
    uint32_t before = port_counter(PFNIC_PORT_RX_FRAMES);

    stranger_send(st, f, len);
    for (int i = 0; i < 100 && port_counter(PFNIC_PORT_RX_FRAMES) == before;
         i++) {
        clock_step(100000);
    }
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_FRAMES), >, before);
}

/* The stranger sends @f, which lands in receive descriptor @n. */
static void eth_rx_placed(Stranger *st, const uint8_t *f, size_t len,
                          uint32_t n)
{
    eth_from_stranger(st, f, len);
    eth_rx_expect(n, f, len);
}

/*
 * The stranger sends @f, which receive descriptor @n does not get: port
 * counter @c says why (it reaches @count).
 */
static void eth_rx_not_placed(Stranger *st, const uint8_t *f, size_t len,
                              uint32_t n, int c, uint32_t count)
{
    eth_from_stranger(st, f, len);
    g_assert_cmpint(port_counter(c), ==, count);
    g_assert_cmphex(eth_status(ETH_RX_RING, n), ==, 0);
}

/* A sends no ARP reply (for a while): its queues leave ARP to the OS. */
static void assert_no_arp_reply(Stranger *st)
{
    uint8_t g[4096];

    while (stranger_recv(st, ETH_P_ARP, g, sizeof(g))) {
        g_assert_false(lduw_be_p(g + 20) == 2 && !memcmp(g + 6, mac_a, 6));
    }
}

/*
 * MSI-X on with every vector masked (msix_enable_masked()), the function
 * mask off, and ETH_VEC's message going to ETH_MSG once let go
 */
static void eth_msix(void)
{
    uint16_t msix = find_cap(PCI_CAP_ID_MSIX);
    uint32_t table;

    eth_pba = msix_enable_masked();
    table = nic_cfg_readl(msix + PCI_MSIX_TABLE) & ~PCI_MSIX_TABLE_BIR;
    eth_entry = BAR4_ADDR + table + ETH_VEC * PCI_MSIX_ENTRY_SIZE;
    writel(eth_entry + PCI_MSIX_ENTRY_LOWER_ADDR, ETH_MSG);
    writel(eth_entry + PCI_MSIX_ENTRY_UPPER_ADDR, ETH_MSG >> 32);
    writel(eth_entry + PCI_MSIX_ENTRY_DATA, ETH_MSG_DATA);
    nic_cfg_writew(msix + PCI_MSIX_FLAGS, PCI_MSIX_FLAGS_ENABLE);
    g_assert_cmphex(readl(BAR4_ADDR + eth_pba), ==, 0);
}

/*
 * Whether ETH_VEC fired since the last look: its pending bit. A pending
 * message is let go (unmasked a moment: it lands at ETH_MSG), which
 * clears the bit for the next look.
 */
static bool eth_fired(void)
{
    bool fired = readl(BAR4_ADDR + eth_pba) & 1u << ETH_VEC;

    if (fired) {
        writel(ETH_MSG, 0);
        writel(eth_entry + PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
        writel(eth_entry + PCI_MSIX_ENTRY_VECTOR_CTRL,
               PCI_MSIX_ENTRY_CTRL_MASKBIT);
        g_assert_cmphex(readl(ETH_MSG), ==, ETH_MSG_DATA);
        g_assert_cmphex(readl(BAR4_ADDR + eth_pba), ==, 0);
    }
    return fired;
}

/* Everything as after a reset: registers and counters 0, no error */
static void eth_assert_reset(void)
{
    for (uint32_t reg = PFNIC_REG_ETH_CTRL; reg <= PFNIC_REG_ETH_RX_HEAD;
         reg += 4) {
        g_assert_cmphex(reg_read(reg), ==, 0);
    }
    g_assert_cmpint(port_counter(PFNIC_PORT_ETH_TX), ==, 0);
    g_assert_cmpint(port_counter(PFNIC_PORT_ETH_RX), ==, 0);
    g_assert_cmpint(port_counter(PFNIC_PORT_ETH_RX_DROPPED), ==, 0);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
}

/* Write @val to @reg: refused (read back as @keep, a guest error). */
static void eth_refused(uint32_t reg, uint32_t val, uint32_t keep)
{
    reg_write(reg, val);
    g_assert_cmphex(reg_read(reg), ==, keep);
    assert_refused();
}

/*
 * The registers on a pfnic without a wire: every value the spec refuses
 * is a guest error that changes nothing; every frame completes NO_LINK
 * (or BAD); a transmit ring the device cannot read stops the queues;
 * reset clears them.
 */
static void test_eth_registers(void *obj, void *data, QGuestAllocator *alloc)
{
    static const uint32_t bad_sizes[] = { 0, 1, 3, 12, 8192 };
    uint8_t f[64];

    pfnic_qos_start(obj, alloc);
    map_bars();
    g_assert_true(reg_read(PFNIC_REG_CAPS) & PFNIC_CAPS_ETH);
    g_assert_false(reg_read(PFNIC_REG_CAPS) & PFNIC_CAPS_WIRE);
    eth_assert_reset();

    /* Sizes: powers of two in 2..4096 */
    for (size_t i = 0; i < ARRAY_SIZE(bad_sizes); i++) {
        eth_refused(PFNIC_REG_ETH_TX_SIZE, bad_sizes[i], 0);
        eth_refused(PFNIC_REG_ETH_RX_SIZE, bad_sizes[i], 0);
    }
    reg_write(PFNIC_REG_ETH_TX_SIZE, 4096);
    reg_write(PFNIC_REG_ETH_RX_SIZE, 2);
    g_assert_cmpint(reg_read(PFNIC_REG_ETH_TX_SIZE), ==, 4096);
    g_assert_cmpint(reg_read(PFNIC_REG_ETH_RX_SIZE), ==, 2);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);
    /* The vector, one of NUM_VECTORS (8); ETH_CTRL's reserved bits */
    eth_refused(PFNIC_REG_ETH_VECTOR, 8, 0);
    eth_refused(PFNIC_REG_ETH_CTRL, 1u << 3, 0);

    /* ENABLE wants both rings: no address, unaligned ones, no size */
    eth_rings(0, ETH_RX_RING);
    eth_refused(PFNIC_REG_ETH_CTRL, PFNIC_ETH_CTRL_ENABLE, 0);
    eth_rings(ETH_TX_RING, 0);
    eth_refused(PFNIC_REG_ETH_CTRL, PFNIC_ETH_CTRL_ENABLE, 0);
    eth_rings(ETH_TX_RING + 8, ETH_RX_RING);
    eth_refused(PFNIC_REG_ETH_CTRL, PFNIC_ETH_CTRL_ENABLE, 0);
    eth_rings(ETH_TX_RING, ETH_RX_RING + 4);
    eth_refused(PFNIC_REG_ETH_CTRL, PFNIC_ETH_CTRL_ENABLE, 0);
    eth_rings(ETH_TX_RING, ETH_RX_RING);
    eth_refused(PFNIC_REG_ETH_TX_SIZE, 6, ETH_RING);
    reg_write(PFNIC_REG_ETH_TX_LO, ETH_TX_RING);
    reg_write(PFNIC_REG_ETH_TX_HI, ETH_TX_RING >> 32);
    reg_write(PFNIC_REG_ETH_TX_SIZE, ETH_RING);
    reg_write(PFNIC_REG_ETH_RX_LO, ETH_RX_RING);
    reg_write(PFNIC_REG_ETH_RX_HI, ETH_RX_RING >> 32);
    eth_refused(PFNIC_REG_ETH_CTRL,
                PFNIC_ETH_CTRL_ENABLE | PFNIC_ETH_CTRL_IRQ_ENABLE, 0);
    /* The tails move only while the queues run. */
    eth_refused(PFNIC_REG_ETH_TX_TAIL, 1, 0);
    eth_refused(PFNIC_REG_ETH_RX_TAIL, 1, 0);

    /* Running: the ring registers are locked, and read back */
    eth_start(PFNIC_ETH_CTRL_PROMISC);
    g_assert_cmphex(reg_read(PFNIC_REG_ETH_TX_LO), ==, (uint32_t)ETH_TX_RING);
    g_assert_cmphex(reg_read(PFNIC_REG_ETH_RX_LO), ==, (uint32_t)ETH_RX_RING);
    g_assert_cmphex(reg_read(PFNIC_REG_ETH_VECTOR), ==, ETH_VEC);
    eth_refused(PFNIC_REG_ETH_TX_LO, ETH_RX_RING, ETH_TX_RING);
    eth_start(0);
    eth_refused(PFNIC_REG_ETH_RX_HI, 1, ETH_RX_RING >> 32);
    eth_start(0);
    eth_refused(PFNIC_REG_ETH_RX_SIZE, 16, ETH_RING);
    /* A tail past the ring, a head written */
    eth_start(0);
    eth_refused(PFNIC_REG_ETH_TX_TAIL, ETH_RING, 0);
    eth_start(0);
    eth_refused(PFNIC_REG_ETH_RX_TAIL, 0x10003, 0);
    eth_start(0);
    eth_refused(PFNIC_REG_ETH_TX_HEAD, 1, 0);
    eth_start(0);
    eth_refused(PFNIC_REG_ETH_RX_HEAD, 1, 0);
    /* What is posted stays posted: the tail does not move back. */
    eth_start(0);
    reg_write(PFNIC_REG_ETH_RX_TAIL, 3);
    eth_refused(PFNIC_REG_ETH_RX_TAIL, 1, 3);
    eth_start(0);
    reg_write(PFNIC_REG_ETH_RX_TAIL, ETH_RING - 1);     /* full */
    eth_refused(PFNIC_REG_ETH_RX_TAIL, 0, ETH_RING - 1);

    /* No wire: every frame completes NO_LINK and nothing is counted. */
    eth_start(0);
    eth_frame(f, mac_bcast, mac_a, ETH_P_TEST, sizeof(f), 1);
    g_assert_cmphex(eth_tx(f, sizeof(f)), ==, DONE(PFNIC_ETH_NO_LINK, 0));
    g_assert_cmphex(eth_tx_desc(ETH_TX_BUF(tx_next), 13, 0), ==,
                    DONE(PFNIC_ETH_BAD, 0));
    /* A full ring at once, across its end */
    for (int i = 0; i < ETH_RING - 1; i++) {
        eth_desc(ETH_TX_RING, tx_next + i, ETH_TX_BUF(0), sizeof(f), 0);
    }
    tx_next += ETH_RING - 1;
    reg_write(PFNIC_REG_ETH_TX_TAIL, tx_next % ETH_RING);
    for (int i = 1; i <= ETH_RING - 1; i++) {
        g_assert_cmphex(eth_wait(ETH_TX_RING, tx_next - i), ==,
                        DONE(PFNIC_ETH_NO_LINK, 0));
    }
    g_assert_cmpint(reg_read(PFNIC_REG_ETH_TX_HEAD), ==, tx_next % ETH_RING);
    g_assert_cmpint(port_counter(PFNIC_PORT_TX_FRAMES), ==, 0);
    g_assert_cmpint(port_counter(PFNIC_PORT_ETH_TX), ==, 0);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);

    /* A transmit ring the device cannot read stops the queues. */
    reg_write(PFNIC_REG_ETH_CTRL, 0);
    eth_rings(UNBACKED, ETH_RX_RING);
    reg_write(PFNIC_REG_ETH_CTRL, PFNIC_ETH_CTRL_ENABLE);
    g_assert_cmphex(reg_read(PFNIC_REG_ETH_CTRL), ==, PFNIC_ETH_CTRL_ENABLE);
    reg_write(PFNIC_REG_ETH_TX_TAIL, 1);
    clock_step(1000000);
    g_assert_cmphex(reg_read(PFNIC_REG_ETH_CTRL), ==, 0);
    g_assert_cmpint(reg_read(PFNIC_REG_ETH_TX_HEAD), ==, 0);
    assert_refused();

    /* Reset clears the queues. */
    eth_start(PFNIC_ETH_CTRL_IRQ_ENABLE | PFNIC_ETH_CTRL_PROMISC);
    reg_write(PFNIC_REG_ETH_RX_TAIL, 3);
    reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    eth_assert_reset();
    pfnic_qos_end();
}

/*
 * Frames on a wire (pfnic A on the hub, the stranger at the other end):
 * sent as posted, or BAD, or NO_LINK with the link down; received for
 * our MAC, broadcast and multicast (any with PROMISC), the rest not ours,
 * RoCE for us left to the RC transport; no buffer or a short one drops;
 * ARP is not answered; the interrupt masks itself and re-arms; a receive
 * ring the device cannot read stops the queues; reset clears them.
 */
static void test_eth_frames(void *obj, void *data, QGuestAllocator *alloc)
{
    static const uint8_t mac_other[6] = { 0x52, 0x54, 0, 0, 0, 0x77 };
    static const uint8_t mac_ipv6_all[6] = { 0x33, 0x33, 0, 0, 0, 1 };
    static const uint16_t lens[3] = { 14, 1518, 61 };
    uint8_t f[2048], g[4096], three[3][1518];
    Stranger st = *(Stranger *)data;
    size_t len;
    ssize_t n;

    g_free(data);
    wire_qos_start(obj, alloc);
    reg_write(PFNIC_REG_PORT_IPV4, IP_A);
    eth_msix();
    eth_start(0);

    /* Transmit: the frame on the wire as posted */
    len = eth_frame(f, mac_s, mac_a, ETH_P_TEST, 100, 1);
    g_assert_cmphex(eth_tx(f, len), ==, DONE(PFNIC_ETH_OK, 0));
    n = stranger_recv(&st, ETH_P_TEST, g, sizeof(g));
    g_assert_cmpmem(g, n, f, len);
    g_assert_cmpint(reg_read(PFNIC_REG_ETH_TX_HEAD), ==, 1);
    g_assert_cmpint(port_counter(PFNIC_PORT_TX_FRAMES), ==, 1);
    g_assert_cmpint(port_counter(PFNIC_PORT_ETH_TX), ==, 1);

    /* Three with one tail: the shortest, the longest, in order */
    for (int i = 0; i < 3; i++) {
        eth_frame(three[i], mac_bcast, mac_a, ETH_P_TEST, lens[i], i);
        memwrite(ETH_TX_BUF(tx_next + i), three[i], lens[i]);
        eth_desc(ETH_TX_RING, tx_next + i, ETH_TX_BUF(tx_next + i), lens[i],
                 0);
    }
    tx_next += 3;
    reg_write(PFNIC_REG_ETH_TX_TAIL, tx_next % ETH_RING);
    for (int i = 0; i < 3; i++) {
        g_assert_cmphex(eth_wait(ETH_TX_RING, tx_next - 3 + i), ==,
                        DONE(PFNIC_ETH_OK, 0));
        n = stranger_recv(&st, ETH_P_TEST, g, sizeof(g));
        g_assert_cmpmem(g, n, three[i], lens[i]);
    }
    g_assert_cmpint(port_counter(PFNIC_PORT_TX_FRAMES), ==, 4);
    g_assert_cmpint(port_counter(PFNIC_PORT_ETH_TX), ==, 4);

    /*
     * Bad descriptors (lengths out of range, flags, a buffer not there)
     * complete BAD and send nothing; the ring goes on.
     */
    g_assert_cmphex(eth_tx_desc(ETH_TX_BUF(0), 13, 0), ==,
                    DONE(PFNIC_ETH_BAD, 0));
    g_assert_cmphex(eth_tx_desc(ETH_TX_BUF(0), 1519, 0), ==,
                    DONE(PFNIC_ETH_BAD, 0));
    g_assert_cmphex(eth_tx_desc(ETH_TX_BUF(0), 100, 1), ==,
                    DONE(PFNIC_ETH_BAD, 0));
    g_assert_cmphex(eth_tx_desc(UNBACKED, 100, 0), ==,
                    DONE(PFNIC_ETH_BAD, 0));
    g_assert_cmpint(stranger_recv(&st, ETH_P_TEST, g, sizeof(g)), ==, 0);
    g_assert_cmpint(port_counter(PFNIC_PORT_ETH_TX), ==, 4);
    g_assert_cmphex(reg_read(PFNIC_REG_ETH_CTRL), ==, PFNIC_ETH_CTRL_ENABLE);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);

    /* The link down: NO_LINK, nothing sent; up again: sent */
    set_link("w0", false);
    g_assert_cmphex(eth_tx(f, len), ==, DONE(PFNIC_ETH_NO_LINK, 0));
    g_assert_cmpint(stranger_recv(&st, ETH_P_TEST, g, sizeof(g)), ==, 0);
    set_link("w0", true);
    g_assert_cmphex(eth_tx(f, len), ==, DONE(PFNIC_ETH_OK, 0));
    n = stranger_recv(&st, ETH_P_TEST, g, sizeof(g));
    g_assert_cmpmem(g, n, f, len);
    g_assert_cmpint(port_counter(PFNIC_PORT_ETH_TX), ==, 5);

    /*
     * Receive: an ARP request for A (not answered: the OS does), a
     * broadcast, an ICMP datagram to our MAC, IPv6 multicast
     */
    for (int i = 0; i < 4; i++) {
        eth_rx_post(ETH_BUF_SIZE);
    }
    stranger_drain(&st);
    len = arp_frame(f, 1, mac_bcast, mac_s, IP_S, mac_zero, IP_A);
    eth_rx_placed(&st, f, len, 0);
    assert_no_arp_reply(&st);
    len = eth_frame(f, mac_bcast, mac_s, ETH_P_TEST, 60, 2);
    eth_rx_placed(&st, f, len, 1);
    len = ipv4_frame(f, mac_a, IP_A, 1, 0, 64);
    eth_rx_placed(&st, f, len, 2);
    len = eth_frame(f, mac_ipv6_all, mac_s, 0x86dd, 90, 3);
    eth_rx_placed(&st, f, len, 3);
    g_assert_cmpint(reg_read(PFNIC_REG_ETH_RX_HEAD), ==, 4);
    g_assert_cmpint(port_counter(PFNIC_PORT_ETH_RX), ==, 4);

    /* No buffer posted: dropped */
    eth_rx_not_placed(&st, f, len, 4, PFNIC_PORT_ETH_RX_DROPPED, 1);
    g_assert_cmpint(reg_read(PFNIC_REG_ETH_RX_HEAD), ==, 4);

    /* For another MAC: not ours, not the ring's; with PROMISC, the ring's */
    eth_rx_post(ETH_BUF_SIZE);
    len = eth_frame(f, mac_other, mac_s, ETH_P_TEST, 80, 4);
    eth_rx_not_placed(&st, f, len, 4, PFNIC_PORT_RX_NOT_OURS, 1);
    reg_write(PFNIC_REG_ETH_CTRL,
              PFNIC_ETH_CTRL_ENABLE | PFNIC_ETH_CTRL_PROMISC);
    eth_rx_placed(&st, f, len, 4);
    reg_write(PFNIC_REG_ETH_CTRL, PFNIC_ETH_CTRL_ENABLE);

    /* UDP to port 4791 of PORT_IPV4 is the RC transport's (a bad ICRC). */
    eth_rx_post(ETH_BUF_SIZE);
    len = ipv4_frame(f, mac_a, IP_A, 17, 4791, 8 + 12 + 4);
    eth_rx_not_placed(&st, f, len, 5, PFNIC_PORT_RX_BAD_ICRC, 1);
    len = eth_frame(f, mac_a, mac_s, ETH_P_TEST, 60, 5);
    eth_rx_placed(&st, f, len, 5);

    /* A frame longer than the buffer is dropped; the buffer stays posted. */
    eth_rx_post(64);
    len = eth_frame(f, mac_a, mac_s, ETH_P_TEST, 65, 6);
    eth_rx_not_placed(&st, f, len, 6, PFNIC_PORT_ETH_RX_DROPPED, 2);
    len = eth_frame(f, mac_a, mac_s, ETH_P_TEST, 64, 7);
    eth_rx_placed(&st, f, len, 6);
    g_assert_cmpint(port_counter(PFNIC_PORT_ETH_RX), ==, 7);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_NOT_OURS), ==, 1);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_MALFORMED), ==, 0);

    /*
     * The interrupt: completions came while IRQ_ENABLE was clear, so
     * arming signals at once, and disarms. Armed with nothing pending,
     * it stays armed until a completion (transmit or receive), which
     * signals once.
     */
    g_assert_false(eth_fired());
    reg_write(PFNIC_REG_ETH_CTRL,
              PFNIC_ETH_CTRL_ENABLE | PFNIC_ETH_CTRL_IRQ_ENABLE);
    g_assert_true(eth_fired());
    g_assert_cmphex(reg_read(PFNIC_REG_ETH_CTRL), ==, PFNIC_ETH_CTRL_ENABLE);
    reg_write(PFNIC_REG_ETH_CTRL,
              PFNIC_ETH_CTRL_ENABLE | PFNIC_ETH_CTRL_IRQ_ENABLE);
    clock_step(1000000);
    g_assert_false(eth_fired());
    g_assert_cmphex(reg_read(PFNIC_REG_ETH_CTRL), ==,
                    PFNIC_ETH_CTRL_ENABLE | PFNIC_ETH_CTRL_IRQ_ENABLE);
    len = eth_frame(f, mac_s, mac_a, ETH_P_TEST, 60, 8);
    g_assert_cmphex(eth_tx(f, len), ==, DONE(PFNIC_ETH_OK, 0));
    g_assert_true(eth_fired());
    g_assert_cmphex(reg_read(PFNIC_REG_ETH_CTRL), ==, PFNIC_ETH_CTRL_ENABLE);
    /* Masked: further completions do not signal... */
    g_assert_cmphex(eth_tx(f, len), ==, DONE(PFNIC_ETH_OK, 0));
    eth_rx_post(ETH_BUF_SIZE);
    len = eth_frame(f, mac_a, mac_s, ETH_P_TEST, 60, 9);
    eth_rx_placed(&st, f, len, 7);
    g_assert_false(eth_fired());
    /* ... until the driver re-arms: then at once. */
    reg_write(PFNIC_REG_ETH_CTRL,
              PFNIC_ETH_CTRL_ENABLE | PFNIC_ETH_CTRL_IRQ_ENABLE);
    g_assert_true(eth_fired());
    reg_write(PFNIC_REG_ETH_CTRL,
              PFNIC_ETH_CTRL_ENABLE | PFNIC_ETH_CTRL_IRQ_ENABLE);
    g_assert_false(eth_fired());
    eth_rx_post(ETH_BUF_SIZE);                  /* across the ring's end */
    eth_rx_placed(&st, f, len, 8);
    g_assert_true(eth_fired());
    g_assert_false(eth_fired());
    g_assert_cmphex(reg_read(PFNIC_REG_ETH_CTRL), ==, PFNIC_ETH_CTRL_ENABLE);
    g_assert_cmphex(reg_read(PFNIC_REG_STATUS), ==, PFNIC_STATUS_READY);

    /* A receive ring the device cannot read stops the queues. */
    reg_write(PFNIC_REG_ETH_CTRL, 0);
    eth_rings(ETH_TX_RING, UNBACKED);
    reg_write(PFNIC_REG_ETH_CTRL, PFNIC_ETH_CTRL_ENABLE);
    reg_write(PFNIC_REG_ETH_RX_TAIL, 1);
    eth_from_stranger(&st, f, len);
    g_assert_cmphex(reg_read(PFNIC_REG_ETH_CTRL), ==, 0);
    g_assert_true(reg_read(PFNIC_REG_STATUS) & PFNIC_STATUS_ERROR);
    g_assert_cmpint(reg_read(PFNIC_REG_ETH_RX_HEAD), ==, 0);
    g_assert_cmpint(port_counter(PFNIC_PORT_ETH_RX), ==, 9);

    /* Reset clears the queues and their counters. */
    reg_write(PFNIC_REG_CONTROL, PFNIC_CONTROL_RESET);
    eth_assert_reset();
    pfnic_qos_end();
    stranger_close(&st);
}

/*
 * Two pfnics on the hub, A with its queues running: A still resolves its
 * peer by ARP (the answer is the ring's, and A learns from it); RoCE to
 * PORT_IPV4 is the RC transport's alone while UDP to port 4791 of another
 * address is the ring's; A answers no ARP request (the test, A's OS,
 * answers through the transmit ring) until the queues stop.
 */
static void test_eth_roce(void *obj, void *data, QGuestAllocator *alloc)
{
    Stranger st = *(Stranger *)data;
    uint32_t key_a, key_b;
    uint8_t f[2048], g[4096];
    size_t len;
    ssize_t n;

    g_free(data);
    wire_qos_start(obj, alloc);
    wire_setup(10, &key_a, &key_b);
    eth_start(0);
    for (int i = 0; i < 4; i++) {
        eth_rx_post(ETH_BUF_SIZE);
    }

    /* A to B: A's own ARP request, B's reply in A's ring */
    use_nic(1);
    post_recv0(3, 0, 0x300, key_b);
    use_nic(0);
    post_send0(2, 0, 0x200, key_a);
    g_assert_cmpint(wait_cqe_ms(1, 0, 100).status, ==, PFNIC_WC_SUCCESS);
    g_assert_cmpint(port_counter(PFNIC_PORT_ARP_REQUESTS), ==, 1);
    arp_frame(g, 2, mac_a, mac_b, IP_B, mac_a, IP_A);
    eth_rx_expect(0, g, 42);
    use_nic(1);
    g_assert_cmpint(wait_cqe_ms(4, 0, 10).status, ==, PFNIC_WC_SUCCESS);

    /* B to A: B learnt A's MAC from A's request; RoCE is not the ring's. */
    use_nic(0);
    post_recv0(2, 0, 0x210, key_a);
    use_nic(1);
    post_send0(3, 0, 0x310, key_b);
    g_assert_cmpint(wait_cqe_ms(3, 0, 100).status, ==, PFNIC_WC_SUCCESS);
    g_assert_cmpint(port_counter(PFNIC_PORT_ARP_REQUESTS), ==, 0);
    use_nic(0);
    g_assert_cmpint(wait_cqe_ms(2, 0, 10).status, ==, PFNIC_WC_SUCCESS);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_ROCE), ==, 2);
    g_assert_cmpint(port_counter(PFNIC_PORT_ETH_RX), ==, 1);
    g_assert_cmphex(eth_status(ETH_RX_RING, 1), ==, 0);

    /* Who has A's address? The ring has the question; A does not answer. */
    stranger_drain(&st);
    len = arp_frame(f, 1, mac_bcast, mac_s, IP_S, mac_zero, IP_A);
    eth_rx_placed(&st, f, len, 1);
    assert_no_arp_reply(&st);
    /* A's OS answers through the transmit ring. */
    len = arp_frame(f, 2, mac_s, mac_a, IP_A, mac_s, IP_S);
    g_assert_cmphex(eth_tx(f, len), ==, DONE(PFNIC_ETH_OK, 0));
    n = stranger_recv(&st, ETH_P_ARP, g, sizeof(g));
    g_assert_cmpmem(g, n, f, len);

    /* UDP to port 4791: of another address the ring's, of A's not */
    len = ipv4_frame(f, mac_a, IP_S + 1, 17, 4791, 8 + 12 + 4);
    eth_rx_placed(&st, f, len, 2);
    len = ipv4_frame(f, mac_a, IP_A, 17, 4791, 8 + 12 + 4);
    eth_rx_not_placed(&st, f, len, 3, PFNIC_PORT_RX_BAD_ICRC, 1);
    /* Every frame A took was the ring's or RoCE. */
    g_assert_cmpint(port_counter(PFNIC_PORT_ETH_RX), ==, 3);
    g_assert_cmpint(port_counter(PFNIC_PORT_ETH_RX_DROPPED), ==, 0);
    g_assert_cmpint(port_counter(PFNIC_PORT_RX_NOT_OURS), ==, 0);

    /* The queues stopped, A answers ARP again. */
    reg_write(PFNIC_REG_ETH_CTRL, 0);
    len = arp_frame(f, 1, mac_bcast, mac_s, IP_S, mac_zero, IP_A);
    eth_from_stranger(&st, f, len);
    do {
        n = stranger_recv(&st, ETH_P_ARP, g, sizeof(g));
        g_assert_cmpint(n, >=, 42);
    } while (lduw_be_p(g + 20) != 2);
    arp_frame(f, 2, mac_s, mac_a, IP_A, mac_s, IP_S);
    g_assert_cmpmem(g, 42, f, 42);
    g_assert_cmphex(eth_status(ETH_RX_RING, 3), ==, 0);
    g_assert_cmpint(port_counter(PFNIC_PORT_ETH_RX), ==, 3);
    pfnic_qos_end();
    stranger_close(&st);
}

static void register_pfnic_eth_tests(void)
{
    pfnic_add_test("eth/registers", test_eth_registers, NULL, NULL);
    pfnic_add_wire_test("eth/frames", test_eth_frames, NULL, NULL,
                        stranger_qos_before);
    pfnic_add_wire_test("eth/roce", test_eth_roce, NULL, NULL,
                        stranger_qos_before);
}

libqos_init(register_pfnic_eth_tests);
