// SPDX-License-Identifier: GPL-2.0

//! Descriptor rings: the format the device executes (`docs/registers.md`, "Descriptor rings
//! and doorbells") and the driver-owned memory that holds them.
//!
//! One coherent allocation holds every context's ring, made at probe time (DMA allocations
//! need a bound device, which an `open()` cannot prove) and freed at unbind (a device-managed
//! resource: open files cannot keep it). The driver writes a descriptor, rings the context's
//! doorbell and waits for the device to set `DONE` in its status; the device only writes back
//! `status`, `result` and `page_requests`.

use kernel::{
    device::{Bound, Device},
    devres::Devres,
    dma::{Coherent, DmaAddress},
    io::{io_project, io_read, Io},
    prelude::*,
};
use zerocopy_derive::{FromBytes as ZFromBytes, Immutable, IntoBytes as ZIntoBytes};

/// Descriptors per context ring: a submission, and the prefetches of an `ADVISE_MR` queued
/// ahead of it.
pub(crate) const RING_SIZE: u32 = 16;

/// Device opcodes.
pub(crate) const OP_COPY: u8 = 1;
pub(crate) const OP_FILL: u8 = 2;
pub(crate) const OP_COMPARE: u8 = 3;
/// Make the pages of a range of an MR present (docs/verbs.md, "Prefetch"); `src` is the key.
pub(crate) const OP_PREFETCH: u8 = 4;
/// `PREFETCH` flags: for writing; without faulting (ATS only).
pub(crate) const PREFETCH_WRITE: u8 = 1 << 0;
pub(crate) const PREFETCH_NO_FAULT: u8 = 1 << 1;
/// Completion codes (status bits 7:0).
pub(crate) const STATUS_SUCCESS: u32 = 1;
/// Set by the device in `status` once the descriptor completed.
pub(crate) const DESC_DONE: u32 = 1 << 31;
/// Longest transfer one descriptor may describe.
pub(crate) const MAX_LEN: u64 = 1 << 30;

/// One descriptor, as the device reads it.
#[repr(C)]
#[derive(Clone, Copy, Default, ZFromBytes, ZIntoBytes, Immutable)]
pub(crate) struct Desc {
    pub(crate) opcode: u8,
    pub(crate) flags: u8,
    pub(crate) reserved0: u16,
    pub(crate) status: u32,
    pub(crate) src: u64,
    pub(crate) dst: u64,
    pub(crate) len: u64,
    pub(crate) pattern: u64,
    pub(crate) result: u64,
    pub(crate) page_requests: u32,
    pub(crate) reserved1: u32,
    pub(crate) cookie: u64,
}

kernel::static_assert!(core::mem::size_of::<Desc>() == 64);

// SAFETY: `Desc` is `repr(C)` with integer fields only and no padding (the zerocopy
// `IntoBytes` derive above proves it), so every bit pattern is valid.
unsafe impl kernel::transmute::FromBytes for Desc {}
// SAFETY: as above: no padding, so every byte of a `Desc` is initialized.
unsafe impl kernel::transmute::AsBytes for Desc {}

/// The slot of descriptor position `pos` (free-running) in a context's ring.
pub(crate) fn slot_index(pos: u32) -> usize {
    (pos % RING_SIZE) as usize
}

/// The rings of every context of one device. Accesses fail with `ENODEV` once the device is
/// unbound: the device was reset by then, and the memory is freed.
pub(crate) struct Rings {
    mem: Devres<Coherent<[Desc]>>,
    /// The DMA address of the allocation, kept to program the device after a reset.
    base: DmaAddress,
}

impl Rings {
    pub(crate) fn new(dev: &Device<Bound>, contexts: u32) -> Result<Self> {
        let len = (contexts as usize)
            .checked_mul(RING_SIZE as usize)
            .ok_or(EINVAL)?;
        let mem = Coherent::zeroed_slice(dev, len, GFP_KERNEL)?;
        let base = mem.dma_address();
        Ok(Self {
            mem: Devres::new(dev, mem)?,
            base,
        })
    }

    /// The DMA address of context `ctx`'s ring, for `CTX_RING_LO/HI`.
    pub(crate) fn dma_address(&self, ctx: u32) -> Option<u64> {
        let offset = u64::from(ctx)
            .checked_mul(u64::from(RING_SIZE))?
            .checked_mul(size_of::<Desc>() as u64)?;
        self.base.checked_add(offset)
    }

    fn slot(ctx: u32, index: u32) -> usize {
        ctx as usize * RING_SIZE as usize + slot_index(index)
    }

    /// Writes descriptor `index` of context `ctx`'s ring (the device does not own it yet).
    pub(crate) fn write(&self, ctx: u32, index: u32, desc: Desc) -> Result {
        self.mem
            .try_access_with(|mem| {
                io_project!(mem, [panic: Self::slot(ctx, index)]).copy_write(desc);
            })
            .ok_or(ENODEV)
    }

    /// Reads descriptor `index` of context `ctx`'s ring back.
    pub(crate) fn read(&self, ctx: u32, index: u32) -> Result<Desc> {
        self.mem
            .try_access_with(|mem| io_project!(mem, [panic: Self::slot(ctx, index)]).copy_read())
            .ok_or(ENODEV)
    }

    /// The status word of descriptor `index` of context `ctx`.
    pub(crate) fn status(&self, ctx: u32, index: u32) -> Result<u32> {
        self.mem
            .try_access_with(|mem| io_read!(mem, [panic: Self::slot(ctx, index)].status))
            .ok_or(ENODEV)
    }
}
