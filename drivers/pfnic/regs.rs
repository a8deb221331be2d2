// SPDX-License-Identifier: GPL-2.0

//! BAR0 register definitions, mirroring `docs/registers.md`, the verbs
//! registers of `docs/verbs.md` (limits, admin command mailbox, event queue) and the port
//! registers of `docs/wire.md` (ABI 1.5), plus the offsets of the user doorbells in each
//! context's BAR2 page.

use kernel::io::register;

/// Size of the BAR0 register window the driver maps.
pub(crate) const BAR0_SIZE: usize = 0x1000;

/// Value of [`ID`] on every pfnic.
pub(crate) const ID_VALUE: u32 = 0x434e_4650;

/// Counters in each block of `COUNTERS` / `CTX_COUNTERS` (docs/registers.md).
pub(crate) const COUNTERS_NR: usize = 13;

/// Arguments of the admin command mailbox ([`CMD_ARG`]).
pub(crate) const CMD_ARGS_NR: usize = 16;

/// Size of one context's BAR2 doorbell page (docs/verbs.md, "User doorbells"; its offsets are
/// `queue_abi`'s). A process writes its page through its mapping, the driver its kernel
/// clients' context's; the driver rings its descriptor rings through [`RING_DB`] in BAR0,
/// which no process can reach.
pub(crate) const DB_PAGE_SIZE: usize = 0x1000;

/// The device ABI major version this driver implements.
pub(crate) const ABI_MAJOR: u32 = 1;
/// The oldest minor version it drives: 1.4 moved the ring doorbell into BAR0.
pub(crate) const ABI_MINOR_MIN: u32 = 4;
/// The minor version that added the port registers and `QP_MODIFY`'s wire arguments
/// (docs/wire.md). An older device is a loopback-only port without them.
pub(crate) const ABI_MINOR_PORT: u32 = 5;
/// The minor version that added driver-managed faults: `MR_SET`'s `FAULT` flag, `PAGE_FAULT`
/// events and `FAULT_RESUME` (docs/verbs.md). An older device's table MRs fail at a miss.
pub(crate) const ABI_MINOR_FAULTS: u32 = 9;
/// The minor version that lets the implicit MR have a (sparse) table, with 64-bit entry
/// indexes in the table commands and `PAGE_FAULT` (docs/verbs.md): the `odp` mode's implicit
/// MR.
pub(crate) const ABI_MINOR_IMPLICIT_TABLES: u32 = 10;
/// The minor version that added shared receive queues (docs/verbs.md): `MAX_SRQS`, the `SRQ_*`
/// commands, `QP_CREATE`'s SRQ, `SRQ_DB`, and the `SRQ_LIMIT` and `LAST_WQE_REACHED` events.
pub(crate) const ABI_MINOR_SRQ: u32 = 11;
/// The minor version that added the device clock (readable in the doorbell pages) and
/// `CQ_CREATE`'s `TIMESTAMP` flag: 64-byte CQEs with the completion's time.
pub(crate) const ABI_MINOR_TIMESTAMPS: u32 = 12;
/// The minor version that added device memory: BAR1, `DM_SIZE` and `MR_SET`'s `DM` flag.
pub(crate) const ABI_MINOR_DM: u32 = 13;
/// The minor version that added the port's Ethernet queues (`CAPS.ETH`, `ETH_*`).
pub(crate) const ABI_MINOR_ETH: u32 = 16;
/// The minor version that added `QP_SET_DMAC`: the MAC a QP sends to, as the operating system
/// resolved it, instead of the device's neighbour cache.
pub(crate) const ABI_MINOR_DMAC: u32 = 17;
/// The minor version that added `MR_MODIFY` (an MR's PD and access changed in place, its key
/// kept) and empty device memory MRs.
pub(crate) const ABI_MINOR_MR_MODIFY: u32 = 18;
/// The minor version that added UD QPs: `QP_CREATE`'s `UD` flag, address vectors in the send
/// work queue entries, GRHs in the receives.
pub(crate) const ABI_MINOR_UD: u32 = 19;
/// The minor version that added DMA MRs (`MR_SET`'s `DMA`) and UD QPs numbered 0 and 1 (the
/// special QPs): what the RDMA core's kernel clients need.
pub(crate) const ABI_MINOR_KERNEL_VERBS: u32 = 20;
/// The minor version that added fast registration: `MR_SET`'s `FAST` flag, the `REG_MR`,
/// `LOCAL_INV` and `SEND_WITH_INV` work requests (what NVMe over RDMA needs).
pub(crate) const ABI_MINOR_FAST_REG: u32 = 21;

/// Port counters (`PORT_COUNTERS`, docs/wire.md), in the order of
/// [`uapi::QueryPort::counters`](crate::uapi::QueryPort::counters).
pub(crate) const PORT_COUNTERS_NR: usize = 20;

register! {
    /// Identifies a pfnic.
    pub(crate) ID(u32) @ 0x000 {
        31:0 value;
    }

    /// Device ABI (register map) version.
    pub(crate) VERSION(u32) @ 0x004 {
        /// Incompatible changes bump the major.
        31:16 major;
        15:0 minor;
    }

    /// Model (firmware) revision.
    pub(crate) FW_VERSION(u32) @ 0x008 {
        31:0 value;
    }

    /// Features the device was built with.
    pub(crate) CAPS(u32) @ 0x00c {
        0:0 ats => bool;
        1:1 pasid => bool;
        2:2 pri => bool;
        3:3 selftest => bool;
        /// The verbs engine of docs/verbs.md.
        4:4 verbs => bool;
        /// An Ethernet port (a QEMU netdev) speaking RoCEv2, docs/wire.md (ABI 1.5).
        5:5 wire => bool;
        /// Translation tables and contexts without a PASID, docs/verbs.md (ABI 1.8).
        6:6 tables => bool;
        /// Shared receive queues, docs/verbs.md (ABI 1.11).
        8:8 srq => bool;
        /// The device clock and timestamped CQEs, docs/verbs.md (ABI 1.12).
        9:9 timestamps => bool;
        /// Device memory in BAR1, docs/verbs.md (ABI 1.13).
        10:10 dm => bool;
        /// The Ethernet queues of the port, docs/wire.md (ABI 1.16).
        11:11 eth => bool;
    }

    /// MSI-X vectors implemented.
    pub(crate) NUM_VECTORS(u32) @ 0x010 {
        31:0 value;
    }

    /// Hardware contexts (doorbell pages in BAR2).
    pub(crate) NUM_CONTEXTS(u32) @ 0x014 {
        31:0 value;
    }

    /// Width of the PASIDs the device tags requests with.
    pub(crate) PASID_WIDTH(u32) @ 0x018 {
        31:0 value;
    }

    /// Device control.
    pub(crate) CONTROL(u32) @ 0x020 {
        /// Write 1 to reset the device; self-clearing.
        0:0 reset => bool;
    }

    /// Device status.
    pub(crate) STATUS(u32) @ 0x024 {
        /// A reset has completed.
        0:0 ready => bool;
        /// A programming error was detected since the last reset.
        1:1 error => bool;
    }

    /// Interrupt causes, write 1 to clear.
    pub(crate) IRQ_STATUS(u32) @ 0x030 {
        0:0 selftest => bool;
    }

    /// Value the next self-test echoes back inverted.
    pub(crate) SELFTEST_COOKIE(u32) @ 0x040 {
        31:0 value;
    }

    /// Writing a vector number starts a self-test that signals that vector.
    pub(crate) SELFTEST_TRIGGER(u32) @ 0x044 {
        31:0 vector;
    }

    /// `!SELFTEST_COOKIE` as of the last completed self-test.
    pub(crate) SELFTEST_ECHO(u32) @ 0x048 {
        31:0 value;
    }

    /// Self-tests completed since reset.
    pub(crate) SELFTEST_COUNT(u32) @ 0x04c {
        31:0 value;
    }

    /// Hardware context the other `CTX_*` registers address.
    pub(crate) CTX_SELECT(u32) @ 0x060 {
        31:0 context;
    }

    /// PASID of the selected context; only writable while it is disabled.
    pub(crate) CTX_PASID(u32) @ 0x064 {
        19:0 pasid;
    }

    /// Control of the selected context.
    pub(crate) CTX_CTRL(u32) @ 0x068 {
        /// The context may work in its PASID's address space.
        0:0 enable => bool;
        /// With `enable`: the context has no PASID and reaches memory only through
        /// translation tables (ABI 1.8).
        1:1 no_pasid => bool;
    }

    /// State of the selected context.
    pub(crate) CTX_STATUS(u32) @ 0x06c {
        /// Enabled: the device may use the context's PASID.
        0:0 active => bool;
        /// Its current descriptor waits for a page request response.
        1:1 waiting => bool;
        /// It runs without a PASID (ABI 1.8).
        2:2 no_pasid => bool;
    }

    /// Descriptor ring of the selected context, DMA address bits 31:0.
    pub(crate) CTX_RING_LO(u32) @ 0x070 {
        31:0 addr;
    }

    /// Descriptor ring of the selected context, DMA address bits 63:32.
    pub(crate) CTX_RING_HI(u32) @ 0x074 {
        31:0 addr;
    }

    /// Descriptors in the selected context's ring.
    pub(crate) CTX_RING_SIZE(u32) @ 0x078 {
        31:0 entries;
    }

    /// MSI-X vector signalled on the selected context's completions.
    pub(crate) CTX_VECTOR(u32) @ 0x07c {
        31:0 vector;
    }

    /// Next descriptor the device executes in the selected context.
    pub(crate) CTX_HEAD(u32) @ 0x080 {
        31:0 index;
    }

    /// Counters of the selected context since it started, in the order of
    /// [`uapi::TranslationStats`](crate::uapi::TranslationStats).
    pub(crate) CTX_COUNTERS(u32)[COUNTERS_NR] @ 0x090 {
        31:0 count;
    }

    /// The device's counters since reset, in the same order.
    pub(crate) COUNTERS(u32)[COUNTERS_NR] @ 0x100 {
        31:0 count;
    }

    /// Page request round trips in [2^i, 2^(i+1)) microseconds.
    pub(crate) STAT_FAULT_LAT(u32)[16] @ 0x140 {
        31:0 count;
    }

    /// Page request groups of [2^i, 2^(i+1)) pages (ABI 1.7).
    pub(crate) STAT_GROUP_PAGES(u32)[8] @ 0x180 {
        31:0 count;
    }

    /// Admin command arguments; some commands write results back.
    pub(crate) CMD_ARG(u32)[CMD_ARGS_NR] @ 0x200 {
        31:0 value;
    }

    /// Writing an opcode executes the admin command synchronously.
    pub(crate) CMD_OP(u32) @ 0x240 {
        31:0 op;
    }

    /// Result of the last admin command, 0 when it succeeded.
    pub(crate) CMD_STATUS(u32) @ 0x244 {
        31:0 status;
    }

    /// Event queue DMA address, bits 31:0.
    pub(crate) EQ_BASE_LO(u32) @ 0x248 {
        31:0 addr;
    }

    /// Event queue DMA address, bits 63:32.
    pub(crate) EQ_BASE_HI(u32) @ 0x24c {
        31:0 addr;
    }

    /// Event queue entries (a power of two), 0 disables it; writing resets both counters.
    pub(crate) EQ_SIZE(u32) @ 0x250 {
        31:0 entries;
    }

    /// Event queue entries the driver consumed (free-running).
    pub(crate) EQ_HEAD(u32) @ 0x254 {
        31:0 consumed;
    }

    /// MSI-X vector signalled after the device writes events.
    pub(crate) EQ_VECTOR(u32) @ 0x258 {
        31:0 vector;
    }

    /// Events dropped because the queue was full.
    pub(crate) EQ_OVERFLOW(u32) @ 0x25c {
        31:0 count;
    }

    /// QP table entries (QPNs 0 and 1 are never used).
    pub(crate) MAX_QPS(u32) @ 0x260 {
        31:0 value;
    }

    /// CQ table entries.
    pub(crate) MAX_CQS(u32) @ 0x264 {
        31:0 value;
    }

    /// Memory key table entries.
    pub(crate) MAX_MRS(u32) @ 0x268 {
        31:0 value;
    }

    /// Entries of a send or receive queue.
    pub(crate) MAX_WQES(u32) @ 0x26c {
        31:0 value;
    }

    /// Entries of a completion queue.
    pub(crate) MAX_CQES(u32) @ 0x270 {
        31:0 value;
    }

    /// Scatter/gather entries per work request.
    pub(crate) MAX_SGE(u32) @ 0x274 {
        31:0 value;
    }

    /// Rings a context's descriptor ring: the low 16 bits of its new tail. The device refuses
    /// a tail that moves back or past the ring.
    pub(crate) RING_DB(u32) @ 0x278 {
        31:16 context;
        15:0 tail;
    }

    /// SRQ table entries (ABI 1.11).
    pub(crate) MAX_SRQS(u32) @ 0x27c {
        31:0 value;
    }

    /// Port MAC address bytes 0..3, byte 0 in bits 7:0 (ABI 1.5).
    pub(crate) PORT_MAC_LO(u32) @ 0x280 {
        31:0 value;
    }

    /// Port MAC address bytes 4..5, byte 4 in bits 7:0 (ABI 1.5).
    pub(crate) PORT_MAC_HI(u32) @ 0x284 {
        15:0 value;
    }

    /// The port's IPv4 address, `a.b.c.d` as `a << 24 | b << 16 | c << 8 | d`; 0: none, the
    /// port answers and sends nothing (ABI 1.5).
    pub(crate) PORT_IPV4(u32) @ 0x288 {
        31:0 addr;
    }

    /// Port state (ABI 1.5).
    pub(crate) PORT_STATUS(u32) @ 0x28c {
        /// A netdev is attached.
        0:0 wire => bool;
        /// And its link is up.
        1:1 link_up => bool;
    }

    /// Bytes of device memory, BAR1 (ABI 1.13).
    pub(crate) DM_SIZE(u32) @ 0x290 {
        31:0 value;
    }

    /// Port counters since reset, 32 bits, wrapping (ABI 1.5).
    pub(crate) PORT_COUNTERS(u32)[PORT_COUNTERS_NR] @ 0x2c0 {
        31:0 count;
    }

    /// Port counter 22 (ABI 1.16): frames for the Ethernet receive ring the device dropped,
    /// having no buffer posted for them (or one too short). 32 bits, wrapping.
    pub(crate) PORT_ETH_RX_DROPPED(u32) @ 0x318 {
        31:0 count;
    }

    /// The Ethernet queues' control (docs/wire.md, "Ethernet queues"; ABI 1.16).
    pub(crate) ETH_CTRL(u32) @ 0x380 {
        /// The queues run.
        0:0 enable => bool;
        /// Signal [`ETH_VECTOR`] at the next completion (cleared when the device does).
        1:1 irq_enable => bool;
        /// Receive frames for any destination MAC.
        2:2 promisc => bool;
    }

    /// MSI-X vector of the Ethernet queues.
    pub(crate) ETH_VECTOR(u32) @ 0x384 {
        31:0 vector;
    }

    /// Transmit ring DMA address, bits 31:0 (16-byte aligned).
    pub(crate) ETH_TX_LO(u32) @ 0x388 {
        31:0 addr;
    }

    /// Transmit ring DMA address, bits 63:32.
    pub(crate) ETH_TX_HI(u32) @ 0x38c {
        31:0 addr;
    }

    /// Descriptors in the transmit ring, a power of two, 2..4096.
    pub(crate) ETH_TX_SIZE(u32) @ 0x390 {
        31:0 value;
    }

    /// One past the last transmit descriptor posted.
    pub(crate) ETH_TX_TAIL(u32) @ 0x394 {
        31:0 index;
    }

    /// Receive ring DMA address, bits 31:0 (16-byte aligned).
    pub(crate) ETH_RX_LO(u32) @ 0x39c {
        31:0 addr;
    }

    /// Receive ring DMA address, bits 63:32.
    pub(crate) ETH_RX_HI(u32) @ 0x3a0 {
        31:0 addr;
    }

    /// Descriptors in the receive ring, a power of two, 2..4096.
    pub(crate) ETH_RX_SIZE(u32) @ 0x3a4 {
        31:0 value;
    }

    /// One past the last receive buffer posted.
    pub(crate) ETH_RX_TAIL(u32) @ 0x3a8 {
        31:0 index;
    }
}
