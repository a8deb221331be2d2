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
pub const PFNIC_UAPI_VERSION: u32 = 7;

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
/// IOMMU (SVA); only that address space may use it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct QueryContext {
    /// The device's number for the context, below [`QueryDevice::num_contexts`].
    pub context: u32,
    /// The PASID the device tags this context's DMA with.
    pub pasid: u32,
    /// This context's counters, since it was created.
    pub translation: TranslationStats,
    /// Reserved, zero.
    pub reserved0: u32,
    /// Reserved, zero.
    pub reserved: [u64; 2],
}

/// Address translation and page request counters, kept by the device for each context and for
/// itself ([`QueryContext::translation`], [`DeviceStats::translation`]).
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct TranslationStats {
    /// Page requests the device sent (a page not present, or not writable, when it needed it).
    pub page_requests: u32,
    /// Page request responses: success.
    pub pri_success: u32,
    /// Page request responses: invalid request or failure.
    pub pri_failed: u32,
    /// Translations served by the device's address translation cache.
    pub atc_hits: u32,
    /// ATS translation requests (cache misses).
    pub atc_misses: u32,
    /// Device-IOTLB invalidations the device received from the IOMMU.
    pub invalidations: u32,
    /// Page requests the IOMMU could not queue at first (retried).
    pub prq_full: u32,
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
    pub reserved: [u64; 2],
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
