// SPDX-License-Identifier: GPL-2.0 OR MIT

//! pfnic user-space ABI: ioctl numbers and argument structures.
//!
//! This file is the single definition of the interface between the driver and user space. The
//! driver compiles it as a module; user space includes the same file
//! (`userspace/pfnic-sys`), so the two can never disagree. It depends only on `core` and
//! `zerocopy` (which the kernel ships and user space gets from crates.io): the derives reject any
//! structure with padding at compile time, on both sides.
//!
//! Conventions, shared by every ioctl:
//! - the structure size is part of the ioctl number, so a caller built against another layout
//!   gets `ENOTTY`;
//! - `reserved` and `flags` fields must be zero on input (`EINVAL` otherwise), which keeps them
//!   usable by later versions;
//! - arguments are copied in exactly once, validated, and copied out once.

use zerocopy_derive::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Version of this interface, reported by [`PFNIC_IOCTL_QUERY_DEVICE`]. Bumped for every change.
pub const PFNIC_UAPI_VERSION: u32 = 21;

/// The ioctl "type" byte of every pfnic ioctl.
pub const PFNIC_IOCTL_MAGIC: u32 = 0xf5;

/// Device capability bits ([`QueryDevice::caps`]): the feature is both implemented by the device
/// and advertised in its PCI configuration space.
pub const PFNIC_CAP_ATS: u64 = 1 << 0;
/// PASID TLP prefixes (see [`QueryDevice::pasid_width`]).
pub const PFNIC_CAP_PASID: u64 = 1 << 1;
/// Page request interface (see [`QueryDevice::pri_max_requests`]).
pub const PFNIC_CAP_PRI: u64 = 1 << 2;
/// Interrupt self-test ([`PFNIC_IOCTL_SELFTEST`]).
pub const PFNIC_CAP_SELFTEST: u64 = 1 << 3;
/// RDMA verbs: PDs, MRs, CQs and RC QPs (docs/verbs.md).
pub const PFNIC_CAP_VERBS: u64 = 1 << 4;
/// An Ethernet port speaking RoCEv2 (docs/wire.md): QPs can connect to other machines.
pub const PFNIC_CAP_WIRE: u64 = 1 << 5;
/// Translation tables the driver fills (docs/verbs.md): the `pinned` memory mode, and contexts
/// without a PASID on platforms without SVA (`PFNIC_MEM_MODE`).
pub const PFNIC_CAP_TABLES: u64 = 1 << 6;
/// Translation tables whose misses the driver serves (docs/verbs.md, "Driver-managed faults"):
/// the `odp` memory mode ([`PFNIC_MEM_MODE_ODP`]).
pub const PFNIC_CAP_FAULTS: u64 = 1 << 7;
/// Shared receive queues (`ibv_create_srq`; docs/verbs.md, "Shared receive queues").
pub const PFNIC_CAP_SRQ: u64 = 1 << 8;
/// Completion timestamps ([`PFNIC_CQ_CREATE_TIMESTAMP`]) from the device clock, which the
/// doorbell page reads ([`PFNIC_DB_CLOCK_LO`]; docs/verbs.md, "The device clock").
pub const PFNIC_CAP_TIMESTAMPS: u64 = 1 << 9;
/// Device memory (`ibv_alloc_dm`; docs/verbs.md, "Device memory").
pub const PFNIC_CAP_DM: u64 = 1 << 10;

/// Argument of [`PFNIC_IOCTL_QUERY_DEVICE`] (output only).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct QueryDevice {
    /// [`PFNIC_UAPI_VERSION`] of the running driver.
    pub uapi_version: u32,
    /// Device ABI (register map) version: major in bits 31:16, minor in 15:0.
    pub device_abi: u32,
    /// Device firmware version: major 31:24, minor 23:16, patch 15:0.
    pub fw_version: u32,
    /// PCI revision ID.
    pub revision: u32,
    /// PCI vendor ID.
    pub vendor_id: u16,
    /// PCI device ID.
    pub device_id: u16,
    /// PCI subsystem vendor ID.
    pub subsystem_vendor_id: u16,
    /// PCI subsystem ID.
    pub subsystem_id: u16,
    /// PCI requester ID (bus << 8 | devfn).
    pub pci_rid: u32,
    /// Index `N` of `/dev/pfnicN`.
    pub index: u32,
    /// `PFNIC_CAP_*` bits.
    pub caps: u64,
    /// Width in bits of the PASIDs the device can use, 0 without PASID.
    pub pasid_width: u32,
    /// Outstanding page requests the device can issue, 0 without PRI.
    pub pri_max_requests: u32,
    /// MSI-X vectors the driver allocated.
    pub num_vectors: u32,
    /// Hardware contexts (doorbell pages) the device has.
    pub num_contexts: u32,
    /// Reserved, zero.
    pub reserved: [u64; 4],
}

/// Argument of [`PFNIC_IOCTL_SELFTEST`]: raise an interrupt on one MSI-X vector and wait for it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Selftest {
    /// In: MSI-X vector to signal, below [`QueryDevice::num_vectors`].
    pub vector: u32,
    /// In: value the device must echo back inverted.
    pub cookie: u32,
    /// In: must be zero.
    pub flags: u32,
    /// Out: the value the device echoed (`!cookie` when it works).
    pub echo: u32,
    /// Out: time from the trigger to the interrupt handler having run, in nanoseconds.
    pub latency_ns: u64,
    /// Out: interrupts handled on `vector` since the driver bound, including this one.
    pub interrupts: u64,
}

/// Argument of [`PFNIC_IOCTL_QUERY_CONTEXT`] (output only): the hardware context this open
/// file owns. Every `open()` creates one, bound to the opener's address space through the
/// IOMMU (SVA) where the platform can, else without a PASID (`pasid` 0: only MRs the driver
/// translates, [`PFNIC_MEM_MODE_PINNED`]); only that address space may use it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct QueryContext {
    /// The device's number for the context, below [`QueryDevice::num_contexts`].
    pub context: u32,
    /// The PASID the device tags this context's DMA with.
    pub pasid: u32,
    /// This context's counters, since it was created.
    pub translation: TranslationStats,
    /// Remote accesses to this context's memory the device refused (a key that names no MR
    /// of the context, or an MR, range or QP access that does not allow the operation).
    pub remote_access_errors: u64,
    /// The file's memory mode, `PFNIC_MEM_MODE_*`.
    pub mem_mode: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// Address translation and page request counters, kept by the device for each context and for
/// itself ([`QueryContext::translation`], [`DeviceStats::translation`]).
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct TranslationStats {
    /// Page requests the device sent (a page not present, or not writable, when it needed it):
    /// one per page.
    pub page_requests: u32,
    /// Pages whose page request group was answered with success.
    pub pri_success: u32,
    /// Pages whose page request group was answered with invalid request or failure.
    pub pri_failed: u32,
    /// Translations served by the device's address translation cache.
    pub atc_hits: u32,
    /// ATS translation requests (cache misses).
    pub atc_misses: u32,
    /// Device-IOTLB invalidations the device received from the IOMMU.
    pub invalidations: u32,
    /// Page requests the IOMMU could not queue at first (retried).
    pub prq_full: u32,
    /// Page requests held back (and sent later) because the context already had its share
    /// of the device's outstanding page requests out.
    pub prq_held: u32,
    /// Page request groups sent: the missing pages of one side of a work item (up to 64),
    /// answered together.
    pub page_request_groups: u32,
    /// The most page request groups outstanding at once (a maximum, not a count).
    pub page_request_groups_max: u32,
    /// Page requests of look-ahead groups: pages of posted work requests after the one that
    /// waits, asked for ahead of time (uAPI 13).
    pub lookahead_pages: u32,
    /// Of those, pages for work requests that then completed successfully.
    pub lookahead_used: u32,
    /// Of those, pages for work requests that failed or were flushed.
    pub lookahead_wasted: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// Argument of [`PFNIC_IOCTL_QUERY_STATS`] (output only): device-wide counters since the driver
/// bound the device.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct DeviceStats {
    /// Contexts created (successful opens).
    pub contexts_created: u64,
    /// Contexts whose address space was torn down while the file was still open (the owner
    /// exited or exec'd): the device was stopped before the memory went away.
    pub contexts_stopped_by_exit: u64,
    /// Opens that could not create a context: no ATS/PASID/PRI, address space not bindable,
    /// context refused by the device, or none free.
    pub context_failures: u64,
    /// Interrupts handled, all vectors.
    pub interrupts: u64,
    /// Contexts in use now.
    pub contexts_active: u32,
    /// The device's counters, all contexts, since the driver bound it.
    pub translation: TranslationStats,
    /// Page request round trips: entry `i` counts those answered within [2^i, 2^(i+1))
    /// microseconds (entry 0 includes faster ones, entry 15 slower ones), guest time.
    pub fault_latency_us_log2: [u32; 16],
    /// Reserved, zero.
    pub reserved0: u32,
    /// Contexts that did not stop when their file was closed: their PASID stays bound and
    /// their slot taken (counted in `contexts_active`) until the device is reset (unbind).
    pub contexts_stuck: u64,
    /// Verbs objects (QPs, SRQs, CQs, MRs) whose destruction the device refused: their memory
    /// and numbers stay out of use until the device is reset (unbind), and the destroy
    /// succeeded for their owner (uAPI 20).
    pub objects_quarantined: u64,
    /// Page request groups sent: entry `i` counts those of [2^i, 2^(i+1)) pages (entry 7
    /// includes bigger ones; uAPI 13).
    pub group_pages_log2: [u32; 8],
}

/// Operations of [`PFNIC_IOCTL_SUBMIT`].
pub const PFNIC_OP_COPY: u32 = 1;
/// Fill `len` bytes at `dst` with `pattern` repeated every 8 bytes.
pub const PFNIC_OP_FILL: u32 = 2;
/// Compare `len` bytes at `src` and `dst`.
pub const PFNIC_OP_COMPARE: u32 = 3;

/// Completion statuses of [`PFNIC_IOCTL_SUBMIT`].
pub const PFNIC_STATUS_SUCCESS: u32 = 1;
/// A page was unmapped or lacked the permission the operation needs; `result` bytes were done.
pub const PFNIC_STATUS_PAGE_FAULT: u32 = 2;
/// The device rejected the descriptor.
pub const PFNIC_STATUS_BAD_DESCRIPTOR: u32 = 3;
/// `PREFETCH`: the key does not name an MR of this context covering the range with the access.
pub const PFNIC_STATUS_PROTECTION: u32 = 5;
/// `COMPARE` found a difference at offset `result`.
pub const PFNIC_STATUS_MISMATCH: u32 = 4;

/// Argument of [`PFNIC_IOCTL_SUBMIT`]: one DMA operation in the caller's address space, done by
/// the device through the IOMMU. The memory need not be touched, pinned or even present: the
/// device faults pages in with page requests.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Submit {
    /// In: `PFNIC_OP_*`.
    pub opcode: u32,
    /// In: must be zero.
    pub flags: u32,
    /// In: source address (`COPY`, `COMPARE`).
    pub src: u64,
    /// In: destination address.
    pub dst: u64,
    /// In: bytes, at most 1 GiB.
    pub len: u64,
    /// In: fill pattern (`FILL`).
    pub pattern: u64,
    /// Out: `PFNIC_STATUS_*`.
    pub status: u32,
    /// Out: page requests the operation caused.
    pub page_requests: u32,
    /// Out: bytes done; for `COMPARE` the offset of the first difference, or `len`.
    pub result: u64,
    /// Out: time from the doorbell to the completion, in nanoseconds.
    pub latency_ns: u64,
}

// Linux's generic ioctl number encoding (include/uapi/asm-generic/ioctl.h).
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

const fn ioc(dir: u32, nr: u32, size: usize) -> u32 {
    (dir << 30) | ((size as u32) << 16) | (PFNIC_IOCTL_MAGIC << 8) | nr
}

/// Query identity, versions and capabilities: `_IOR(0xf5, 0x00, struct pfnic_query_device)`.
pub const PFNIC_IOCTL_QUERY_DEVICE: u32 = ioc(IOC_READ, 0x00, core::mem::size_of::<QueryDevice>());

/// The open file's context: `_IOR(0xf5, 0x02, struct pfnic_query_context)`.
pub const PFNIC_IOCTL_QUERY_CONTEXT: u32 =
    ioc(IOC_READ, 0x02, core::mem::size_of::<QueryContext>());

/// Device statistics: `_IOR(0xf5, 0x03, struct pfnic_device_stats)`.
pub const PFNIC_IOCTL_QUERY_STATS: u32 = ioc(IOC_READ, 0x03, core::mem::size_of::<DeviceStats>());

/// A DMA operation in the caller's address space: `_IOWR(0xf5, 0x04, struct pfnic_submit)`.
pub const PFNIC_IOCTL_SUBMIT: u32 = ioc(IOC_READ | IOC_WRITE, 0x04, core::mem::size_of::<Submit>());

/// Interrupt round trip: `_IOWR(0xf5, 0x01, struct pfnic_selftest)`.
pub const PFNIC_IOCTL_SELFTEST: u32 =
    ioc(IOC_READ | IOC_WRITE, 0x01, core::mem::size_of::<Selftest>());

// ---------------------------------------------------------------------------------------------
// RDMA verbs (uAPI 8, the wire in 10). Numbers and flags are libibverbs' own (`IBV_*`), so the libraries pass
// them through. Handles (PD, MR) are per open file; CQNs and QPNs are device-wide numbers (a QP
// number is what a peer needs to connect). See docs/uapi.md and docs/verbs.md.
// ---------------------------------------------------------------------------------------------

/// `mmap()` offset of the context's doorbell page (one page, shared, read/write).
pub const PFNIC_MMAP_DOORBELL: u64 = 0;

/// `IBV_ACCESS_*` bits of an MR and of a QP's `qp_access_flags`, as the verbs take them.
pub const PFNIC_ACCESS_LOCAL_WRITE: u32 = 1;
/// `IBV_ACCESS_REMOTE_WRITE` (requires `LOCAL_WRITE` in an MR).
pub const PFNIC_ACCESS_REMOTE_WRITE: u32 = 2;
/// `IBV_ACCESS_REMOTE_READ`.
pub const PFNIC_ACCESS_REMOTE_READ: u32 = 4;
/// `IBV_ACCESS_REMOTE_ATOMIC` (requires `LOCAL_WRITE` in an MR).
pub const PFNIC_ACCESS_REMOTE_ATOMIC: u32 = 8;
/// `IBV_ACCESS_MW_BIND`: refused with `EOPNOTSUPP` (pfnic has no memory windows), as
/// rdma-core reports a capability the device lacks.
pub const PFNIC_ACCESS_MW_BIND: u32 = 0x10;
/// `IBV_ACCESS_ON_DEMAND`: no population at registration.
pub const PFNIC_ACCESS_ON_DEMAND: u32 = 0x40;

/// `ibv_odp_general_caps`: `IBV_ODP_SUPPORT`.
pub const PFNIC_ODP_SUPPORT: u64 = 1 << 0;
/// `IBV_ODP_SUPPORT_IMPLICIT`.
pub const PFNIC_ODP_SUPPORT_IMPLICIT: u64 = 1 << 1;
/// `ibv_odp_transport_cap_bits`: SEND, RECV, WRITE, READ, ATOMIC (bits 0..4).
pub const PFNIC_ODP_RC_CAPS: u32 = 0x1f;

/// Argument of [`PFNIC_IOCTL_QUERY_VERBS`] (output only): what `ibv_query_device_ex` reports.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct QueryVerbs {
    /// Node GUID (also the system image GUID), host order.
    pub node_guid: u64,
    /// Largest MR, bytes.
    pub max_mr_size: u64,
    /// Page sizes the device translates (bit n: 2^n bytes).
    pub page_size_cap: u64,
    /// `PFNIC_ODP_SUPPORT*` bits.
    pub odp_general_caps: u64,
    /// `ibv_odp_transport_cap_bits` for RC.
    pub odp_rc_caps: u32,
    /// QPs the device has (two of them, 0 and 1, are never handed out).
    pub max_qp: u32,
    /// Work requests per queue.
    pub max_qp_wr: u32,
    /// Scatter/gather entries per work request.
    pub max_sge: u32,
    /// CQs.
    pub max_cq: u32,
    /// Entries per CQ.
    pub max_cqe: u32,
    /// MRs.
    pub max_mr: u32,
    /// PDs.
    pub max_pd: u32,
    /// Outstanding RDMA READ/atomic requests per QP.
    pub max_qp_rd_atom: u32,
    /// `IBV_ATOMIC_HCA` (1).
    pub atomic_cap: u32,
    /// SRQs (0: the device has none, [`PFNIC_CAP_SRQ`]).
    pub max_srq: u32,
    /// Work requests per SRQ.
    pub max_srq_wr: u32,
    /// Scatter/gather entries per SRQ work request.
    pub max_srq_sge: u32,
    /// Bytes of device memory one user context may allocate (`ibv_alloc_dm`; 0: none).
    pub max_dm_size: u32,
    /// The bits of a completion timestamp (0: the device has none, [`PFNIC_CAP_TIMESTAMPS`]).
    pub completion_timestamp_mask: u64,
    /// The device clock's frequency, kHz (1,000,000: it counts nanoseconds; 0 without one).
    pub hca_core_clock: u64,
}

/// `IBV_LINK_LAYER_INFINIBAND`: [`QueryPort::link_layer`] of a port without a wire.
pub const PFNIC_LINK_LAYER_INFINIBAND: u32 = 1;
/// `IBV_LINK_LAYER_ETHERNET`: a port with a wire (RoCEv2).
pub const PFNIC_LINK_LAYER_ETHERNET: u32 = 2;

/// [`QueryPort::port_flags`]: the device has a wire (a netdev is attached).
pub const PFNIC_PORT_WIRE: u32 = 1 << 0;
/// [`QueryPort::port_flags`]: the wire's link is up.
pub const PFNIC_PORT_LINK_UP: u32 = 1 << 1;
/// [`QueryPort::port_flags`]: the device has the port registers (device ABI 1.5): an IPv4
/// address can be set ([`PFNIC_IOCTL_SET_PORT_IPV4`]) and GID 1 exists.
pub const PFNIC_PORT_ADDRESSES: u32 = 1 << 2;

/// Entries of [`QueryPort::gids`].
pub const PFNIC_GID_TBL_LEN: usize = 2;
/// Entries of [`QueryPort::counters`].
pub const PFNIC_PORT_COUNTERS: usize = 20;

/// Port counters, the indices of [`QueryPort::counters`] (docs/wire.md): frames sent (RoCE
/// and ARP).
pub const PFNIC_PORT_TX_FRAMES: usize = 0;
/// Frames the netdev delivered to the port.
pub const PFNIC_PORT_RX_FRAMES: usize = 1;
/// RoCE packets accepted by a QP (new or duplicate).
pub const PFNIC_PORT_RX_ROCE: usize = 2;
/// Dropped: another MAC, not IPv4/ARP, another IP, not UDP 4791.
pub const PFNIC_PORT_RX_NOT_OURS: usize = 3;
/// Dropped: a malformed frame.
pub const PFNIC_PORT_RX_MALFORMED: usize = 4;
/// Dropped: ICRC mismatch.
pub const PFNIC_PORT_RX_BAD_ICRC: usize = 5;
/// Dropped: destination QP absent, not a wire QP, or not in RTR/RTS.
pub const PFNIC_PORT_RX_NO_QP: usize = 6;
/// Dropped: the source IP is not the QP's destination.
pub const PFNIC_PORT_RX_NOT_PEER: usize = 7;
/// Requests with a PSN older than expected.
pub const PFNIC_PORT_RX_DUPLICATE: usize = 8;
/// Responder: PSN sequence error NAKs sent.
pub const PFNIC_PORT_TX_SEQ_NAKS: usize = 9;
/// Responder: RNR NAKs sent.
pub const PFNIC_PORT_TX_RNR_NAKS: usize = 10;
/// Requester: RNR NAKs received.
pub const PFNIC_PORT_RX_RNR_NAKS: usize = 11;
/// Requester: go-back-N restarts.
pub const PFNIC_PORT_RETRANSMITS: usize = 12;
/// Requester: local ACK timeouts.
pub const PFNIC_PORT_TIMEOUTS: usize = 13;
/// ARP requests sent to resolve a peer.
pub const PFNIC_PORT_ARP_REQUESTS: usize = 14;
/// Frames dropped or delayed by the device's loss and reordering properties.
pub const PFNIC_PORT_INJECTED: usize = 15;
/// The names the RDMA core's device shows (`rdma statistic`), after the port's own counters,
/// for these fields of [`TranslationStats`], in this order: `page_requests`, `pri_success`,
/// `pri_failed`, `atc_hits`, `atc_misses`, `invalidations`.
pub const PFNIC_TRANSLATION_COUNTER_NAMES: [&str; 6] = [
    "page_requests",
    "page_requests_ok",
    "page_requests_failed",
    "atc_hits",
    "atc_misses",
    "atc_invalidations",
];

/// The names of the port counters, in index order (docs/wire.md).
pub const PFNIC_PORT_COUNTER_NAMES: [&str; PFNIC_PORT_COUNTERS] = [
    "tx_frames",
    "rx_frames",
    "rx_roce",
    "rx_not_ours",
    "rx_malformed",
    "rx_bad_icrc",
    "rx_no_qp",
    "rx_not_peer",
    "rx_duplicate",
    "tx_seq_naks",
    "tx_rnr_naks",
    "rx_rnr_naks",
    "retransmits",
    "timeouts",
    "arp_requests",
    "injected",
    "backup_packets",
    "backup_bytes",
    "backup_placed",
    "backup_full",
];

/// Argument of [`PFNIC_IOCTL_QUERY_PORT`] (output only): port 1. Without a wire it is an
/// InfiniBand-style port alone on its subnet that loops back to itself; with one
/// ([`PFNIC_PORT_WIRE`]) it is a RoCEv2 Ethernet port, as rxe's.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct QueryPort {
    /// `IBV_PORT_ACTIVE` (4); with a wire whose link is down, `IBV_PORT_DOWN` (1).
    pub state: u32,
    /// `IBV_MTU_4096` (5).
    pub max_mtu: u32,
    /// `IBV_MTU_4096` (5) without a wire, `IBV_MTU_1024` (3) with one (1500-byte Ethernet).
    pub active_mtu: u32,
    /// [`PFNIC_LINK_LAYER_INFINIBAND`] without a wire, [`PFNIC_LINK_LAYER_ETHERNET`] with one.
    pub link_layer: u32,
    /// Largest message, bytes.
    pub max_msg_sz: u32,
    /// GID table entries: 2 on a device with the port registers, else 1.
    pub gid_tbl_len: u32,
    /// The port's LID (0 on Ethernet).
    pub lid: u16,
    /// The subnet manager's LID (the port's own without a wire: it is alone on its subnet).
    pub sm_lid: u16,
    /// `IBV_WIDTH_4X` (2).
    pub active_width: u8,
    /// `IBV_SPEED_EDR` (32).
    pub active_speed: u8,
    /// `IBV_PORT_*` capability flags (0).
    pub reserved0: u16,
    /// The GID table, network order (as `ibv_gid::raw`). GID 0: `fe80::` and the EUI-64 of
    /// the MAC with a wire, else the node GUID. GID 1: `::ffff:a.b.c.d`, the port's IPv4
    /// address, when one is set, else zero (and absent without the port registers).
    pub gids: [[u8; 16]; PFNIC_GID_TBL_LEN],
    /// `PFNIC_PORT_*` flags.
    pub port_flags: u32,
    /// The port's IPv4 address, `a.b.c.d` = `a << 24 | b << 16 | c << 8 | d`; 0: none.
    pub ipv4: u32,
    /// The port's MAC address (zero without the port registers).
    pub mac: [u8; 6],
    /// Reserved, zero.
    pub reserved1: u16,
    /// The port counters (`PFNIC_PORT_*` indices, docs/wire.md): 32 bits, wrapping, since the
    /// device was reset; zero without the port registers.
    pub counters: [u32; PFNIC_PORT_COUNTERS],
    /// Reserved, zero.
    pub reserved: [u64; 2],
}

/// Argument of [`PFNIC_IOCTL_SET_PORT_IPV4`] (input only).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct PortIpv4 {
    /// The address, `a.b.c.d` = `a << 24 | b << 16 | c << 8 | d`; 0 clears it.
    pub ipv4: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// `ibv_advise_mr` advice: `IBV_ADVISE_MR_ADVICE_PREFETCH`.
pub const PFNIC_ADVISE_PREFETCH: u32 = 0;
/// `IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE`.
pub const PFNIC_ADVISE_PREFETCH_WRITE: u32 = 1;
/// `IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT`.
pub const PFNIC_ADVISE_PREFETCH_NO_FAULT: u32 = 2;
/// `IBV_ADVISE_MR_FLAG_FLUSH`: return after the pages are present.
pub const PFNIC_ADVISE_FLAG_FLUSH: u32 = 1;
/// Entries in `AdviseMr::sge`.
pub const PFNIC_ADVISE_MAX_SGE: usize = 8;

/// Memory modes (`PFNIC_MEM_MODE`): how a user context's MRs reach its memory.
///
/// `SVA`: through the IOMMU in the process's PASID; ODP MRs fault pages in with page
/// requests, other MRs are made present at registration and never pinned. Needs ATS, PASID and
/// PRI, and an IOMMU that binds the process (the default where it works).
pub const PFNIC_MEM_MODE_SVA: u32 = 1;
/// `PINNED`: registration pins the pages (`RLIMIT_MEMLOCK` accounted in `VmPin`, `ENOMEM`
/// beyond it without `CAP_IPC_LOCK`), maps them for DMA and writes the device's translation
/// table; deregistration unpins. ODP MRs are `EOPNOTSUPP`. Works without PRI, PASID or ATS
/// (the default where neither SVA nor `ODP` works).
pub const PFNIC_MEM_MODE_PINNED: u32 = 2;
/// `ODP`: the driver fills the device's translation table on demand, as mlx5's on-demand
/// paging does, through the RDMA core's ODP umems (`ib_umem_odp`): the device reports a
/// missing page to the driver, which has the core fault it in (`hmm_range_fault()`), maps it
/// for DMA and writes its entry; the umem's `mmu_interval_notifier` has the driver remove
/// entries before the kernel changes the mappings behind them. ODP MRs pin nothing
/// and are filled only by faults and prefetches; other MRs are pinned, as in `PINNED` (as
/// every RDMA device pins them). The implicit ODP MR needs device ABI
/// 1.10 (a sparse table; `EOPNOTSUPP` before). Needs [`PFNIC_CAP_FAULTS`], not PRI (the default
/// where SVA does not work).
pub const PFNIC_MEM_MODE_ODP: u32 = 3;

/// `CreateCq::flags`: 64-byte CQEs that carry the device clock when the completion was
/// written (docs/verbs.md, "Completion queue entry"). `EOPNOTSUPP` without
/// [`PFNIC_CAP_TIMESTAMPS`].
pub const PFNIC_CQ_CREATE_TIMESTAMP: u32 = 1 << 0;

/// The device clock's low 32 bits, read from the doorbell page ([`PFNIC_MMAP_DOORBELL`]) at
/// this offset; the high 32 bits at [`PFNIC_DB_CLOCK_HI`]. Read high, low, high again, and
/// retry while the two high halves differ.
pub const PFNIC_DB_CLOCK_LO: usize = 0x020;
/// See [`PFNIC_DB_CLOCK_LO`].
pub const PFNIC_DB_CLOCK_HI: usize = 0x024;

/// `IBV_QPT_RC`.
pub const PFNIC_QPT_RC: u32 = 2;
/// `IBV_QPT_UD`: through the RDMA core only (its address handles name the destinations).
pub const PFNIC_QPT_UD: u32 = 4;

/// `CreateQp::flags`: the QP takes its receives from `CreateQp::srq` (an SRQ of this file;
/// `EINVAL` otherwise). `cap.max_recv_wr` and `cap.max_recv_sge` are ignored.
pub const PFNIC_QP_CREATE_SRQ: u32 = 1 << 1;

/// `CreateQp::flags`: when a page where a request lands is not present, park the payload
/// in the driver's backup buffer and acknowledge it, instead of answering RNR NAK (a wire QP
/// only; docs/wire.md, "Receive faults"). `EOPNOTSUPP` on a device without a wire.
pub const PFNIC_QP_CREATE_RECV_FAULT_BACKUP: u32 = 1 << 0;

/// `ibv_qp_attr_mask` bits the driver accepts in `ModifyQp::attr_mask`.
pub const PFNIC_QP_STATE: u32 = 1 << 0;
/// `IBV_QP_CUR_STATE`.
pub const PFNIC_QP_CUR_STATE: u32 = 1 << 1;
/// `IBV_QP_ACCESS_FLAGS`.
pub const PFNIC_QP_ACCESS_FLAGS: u32 = 1 << 3;
/// `IBV_QP_PKEY_INDEX`.
pub const PFNIC_QP_PKEY_INDEX: u32 = 1 << 4;
/// `IBV_QP_PORT`.
pub const PFNIC_QP_PORT: u32 = 1 << 5;
/// `IBV_QP_AV`.
pub const PFNIC_QP_AV: u32 = 1 << 7;
/// `IBV_QP_PATH_MTU`.
pub const PFNIC_QP_PATH_MTU: u32 = 1 << 8;
/// `IBV_QP_TIMEOUT`.
pub const PFNIC_QP_TIMEOUT: u32 = 1 << 9;
/// `IBV_QP_RETRY_CNT`.
pub const PFNIC_QP_RETRY_CNT: u32 = 1 << 10;
/// `IBV_QP_RNR_RETRY`.
pub const PFNIC_QP_RNR_RETRY: u32 = 1 << 11;
/// `IBV_QP_RQ_PSN`.
pub const PFNIC_QP_RQ_PSN: u32 = 1 << 12;
/// `IBV_QP_MAX_QP_RD_ATOMIC`.
pub const PFNIC_QP_MAX_QP_RD_ATOMIC: u32 = 1 << 13;
/// `IBV_QP_MIN_RNR_TIMER`.
pub const PFNIC_QP_MIN_RNR_TIMER: u32 = 1 << 15;
/// `IBV_QP_SQ_PSN`.
pub const PFNIC_QP_SQ_PSN: u32 = 1 << 16;
/// `IBV_QP_MAX_DEST_RD_ATOMIC`.
pub const PFNIC_QP_MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
/// `IBV_QP_DEST_QPN`.
pub const PFNIC_QP_DEST_QPN: u32 = 1 << 20;

/// `IBV_EVENT_CQ_ERR`: a CQ overflowed; its QPs entered ERR.
pub const PFNIC_EVENT_CQ_ERR: u32 = 0;
/// `IBV_EVENT_QP_FATAL`: a QP entered ERR for an error no completion reports (a bad
/// doorbell, an unreadable queue).
pub const PFNIC_EVENT_QP_FATAL: u32 = 1;
/// `IBV_EVENT_DEVICE_FATAL` (uAPI 19): the device is gone (unbound); it is the last event
/// of every open file, whose event file then returns `EIO`. `element` and `object` are 0.
pub const PFNIC_EVENT_DEVICE_FATAL: u32 = 8;
/// `IBV_EVENT_PORT_ACTIVE` (uAPI 19): the port's link came up. Every open file gets it.
pub const PFNIC_EVENT_PORT_ACTIVE: u32 = 9;
/// `IBV_EVENT_PORT_ERR` (uAPI 19): the port's link went down. Every open file gets it.
pub const PFNIC_EVENT_PORT_ERR: u32 = 10;
/// `IBV_EVENT_GID_CHANGE` (uAPI 19): the port's GID table changed (its IPv4 address was set or
/// cleared, [`PFNIC_IOCTL_SET_PORT_IPV4`]). Every open file gets it.
pub const PFNIC_EVENT_GID_CHANGE: u32 = 18;
/// `IBV_EVENT_SRQ_LIMIT_REACHED`: an armed SRQ fell below its limit (and is disarmed).
pub const PFNIC_EVENT_SRQ_LIMIT_REACHED: u32 = 15;
/// `IBV_EVENT_QP_LAST_WQE_REACHED`: a QP with an SRQ entered ERR; it takes no more receives.
pub const PFNIC_EVENT_QP_LAST_WQE_REACHED: u32 = 16;

/// Device memory is reached in aligned words: `ibv_memcpy_to_dm`/`_from_dm` offsets and an
/// MR's `dm_offset` are multiples of this (`EINVAL` otherwise, as on mlx5); lengths are free.
pub const PFNIC_DM_ALIGN: u64 = 4;

/// `IBV_SRQ_MAX_WR`: resizing, which pfnic does not do (`EOPNOTSUPP`).
pub const PFNIC_SRQ_MAX_WR: u32 = 1 << 0;
/// `IBV_SRQ_LIMIT`: arm the limit.
pub const PFNIC_SRQ_LIMIT: u32 = 1 << 1;

/// `ibv_query_device_ex` and friends: `_IOR(0xf5, 0x05, struct pfnic_query_verbs)`.
pub const PFNIC_IOCTL_QUERY_VERBS: u32 = ioc(IOC_READ, 0x05, core::mem::size_of::<QueryVerbs>());
/// `ibv_query_port`/`ibv_query_gid` of port 1, with its addresses and counters:
/// `_IOR(0xf5, 0x06, struct pfnic_query_port)`.
pub const PFNIC_IOCTL_QUERY_PORT: u32 = ioc(IOC_READ, 0x06, core::mem::size_of::<QueryPort>());
// The verbs objects' ioctls of uAPI 8 to 20 (numbers 0x07..0x12 and 0x14..0x1d: PDs, MRs,
// CQs, QPs, completion channels, the memory mode, the event file, SRQs, device memory) are
// retired in uAPI 21: verbs are the RDMA core's, through uverbs and pfnic's rdma-core
// provider. Their numbers are not reused; `/dev/pfnicN` answers them `ENOTTY`. Their argument
// structures are now the verbs engine's, inside the driver (`verbs/args.rs`).

/// Sets or clears the port's IPv4 address (`CAP_NET_ADMIN`):
/// `_IOW(0xf5, 0x13, struct pfnic_port_ipv4)`.
pub const PFNIC_IOCTL_SET_PORT_IPV4: u32 = ioc(IOC_WRITE, 0x13, core::mem::size_of::<PortIpv4>());

// --- The RDMA core's device `pfnicN`: the driver data of its verbs -------------------------
//
// Through `/dev/infiniband/uverbsN` the rdma-core provider (`libpfnic-rdmav34.so`) exchanges
// these with the driver after the core's own arguments (`struct ib_udata`). Their C
// declarations, for the provider, are `userspace/include/rdma/pfnic-abi.h`, which pfnic-sys'
// tests compile against the layout of these (`rdma_abi_check.rs`).

/// The version of the ABI between the driver's RDMA device and its provider, shown as the
/// uverbs device's `abi_version` in sysfs; the provider refuses any other.
pub const PFNIC_IB_ABI_VERSION: u32 = 1;

/// The provider's request in `ibv_open_device()` (the core's `GET_CONTEXT`). A provider that
/// sends none gets the platform's default memory mode.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct IbAllocUcontextReq {
    /// The context's memory mode, `PFNIC_MEM_MODE_*` (`PFNIC_MEM_MODE` in the provider's
    /// environment), or 0 for the default; fixed for the context's life. `EINVAL` for an
    /// unknown mode, `EOPNOTSUPP` for one the platform cannot run.
    pub mem_mode: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// The driver's part of the answer to `ibv_open_device()` (the core's `GET_CONTEXT`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct IbAllocUcontextResp {
    /// [`PFNIC_UAPI_VERSION`] of the running driver.
    pub uapi_version: u32,
    /// Device ABI (register map) version: major in bits 31:16, minor in 15:0.
    pub device_abi: u32,
    /// `PFNIC_CAP_*` bits.
    pub caps: u64,
    /// Index `N` of the device's `/dev/pfnicN`.
    pub index: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// The context's memory mode, `PFNIC_MEM_MODE_*`.
    pub mem_mode: u32,
    /// The on-demand paging of RC QPs in that mode (`IBV_ODP_SUPPORT_*` of `ibv_odp_caps`;
    /// 0 in the `pinned` mode).
    pub odp_rc_caps: u32,
    /// `PFNIC_ODP_SUPPORT*` in that mode (0 in the `pinned` mode).
    pub odp_general_caps: u64,
}

/// The provider's request in `ibv_create_cq()`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct IbCreateCqReq {
    /// `PFNIC_CQ_CREATE_*` flags.
    pub flags: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// The driver's part of the answer to `ibv_create_cq()`: map `mmap_len` bytes of the uverbs
/// file at `mmap_offset` for the ring, with the CQ record at `record_offset` of the mapping
/// (as `CreateCq`'s).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct IbCreateCqResp {
    /// The CQ number, which CQEs and doorbells name.
    pub cqn: u32,
    /// CQEs in the ring (a power of 2).
    pub entries: u32,
    /// `mmap()` offset of the ring.
    pub mmap_offset: u64,
    /// Bytes to map.
    pub mmap_len: u64,
    /// Offset of the CQ record in the mapping.
    pub record_offset: u64,
    /// Bytes per CQE: 32, or 64 with [`PFNIC_CQ_CREATE_TIMESTAMP`].
    pub cqe_size: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// The provider's request in `ibv_create_qp()`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct IbCreateQpReq {
    /// `PFNIC_QP_CREATE_*` flags ([`PFNIC_QP_CREATE_RECV_FAULT_BACKUP`]).
    pub flags: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// The driver's part of the answer to `ibv_create_qp()`: map `mmap_len` bytes of the uverbs
/// file at `mmap_offset`: the send queue at offset 0, the receive queue at `rq_offset`, the
/// QP record at `record_offset` (as `CreateQp`'s). The QP number and capabilities are in
/// the core's part of the answer.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct IbCreateQpResp {
    /// Send queue entries (a power of 2).
    pub sq_entries: u32,
    /// Receive queue entries (a power of 2).
    pub rq_entries: u32,
    /// `mmap()` offset of the queues.
    pub mmap_offset: u64,
    /// Bytes to map.
    pub mmap_len: u64,
    /// Offset of the receive queue in the mapping.
    pub rq_offset: u64,
    /// Offset of the QP record in the mapping.
    pub record_offset: u64,
}

/// The driver's part of the answer to `ibv_create_srq()`: map `mmap_len` bytes of the uverbs
/// file at `mmap_offset` for the queue, with the SRQ record at `record_offset` (as
/// `CreateSrq`'s). The granted work requests and SGEs are in the core's part.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct IbCreateSrqResp {
    /// The SRQ number.
    pub srqn: u32,
    /// Entries in the queue (a power of 2).
    pub entries: u32,
    /// `mmap()` offset of the queue.
    pub mmap_offset: u64,
    /// Bytes to map.
    pub mmap_len: u64,
    /// Offset of the SRQ record in the mapping.
    pub record_offset: u64,
}

/// The driver's part of the answer to `ibv_alloc_dm()` (in the core's `DM_ALLOC`, whose
/// driver data rides in the attributes `UVERBS_ATTR_UHW_IN`/`_OUT`): map `mmap_len` bytes of
/// the uverbs file at `mmap_offset` to reach the memory. The provider sends no request.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct IbAllocDmResp {
    /// `mmap()` offset of the memory.
    pub mmap_offset: u64,
    /// Bytes to map: the length asked for, rounded up to pages.
    pub mmap_len: u64,
}

/// The driver's part of the answer to `ibv_create_ah()`: the address vector a UD send work
/// queue entry carries at bytes 0x18..0x3f (docs/verbs.md, "Work queue entry"), as the device
/// reads it; the provider copies it into each work request to the address handle.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct IbCreateAhResp {
    /// The destination's IPv4 address; 0: this device.
    pub dest_ip: u32,
    /// The GRH's traffic class (IPv4 TOS on the wire).
    pub traffic_class: u8,
    /// The GRH's hop limit (IPv4 TTL on the wire); 0: 64.
    pub hop_limit: u8,
    /// `PFNIC_AH_FLAG_*`.
    pub ah_flags: u8,
    /// Reserved, zero.
    pub reserved0: u8,
    /// The destination's MAC on the wire, as the core resolved it (zero: none).
    pub dmac: [u8; 6],
    /// Reserved, zero.
    pub reserved1: [u8; 10],
    /// The destination GID (the receiver's GRH).
    pub dgid: [u8; 16],
}

/// [`IbCreateAhResp::ah_flags`]: the receiver gets a GRH.
pub const PFNIC_AH_FLAG_GRH: u8 = 1 << 0;
/// [`IbCreateAhResp::ah_flags`]: of RoCEv2 over IPv4 (an IPv4 header).
pub const PFNIC_AH_FLAG_IPV4: u8 = 1 << 1;
