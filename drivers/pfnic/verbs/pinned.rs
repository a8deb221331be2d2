// SPDX-License-Identifier: GPL-2.0

//! Pinned MRs, the `pinned` memory mode (`PFNIC_MEM_MODE_PINNED`): the classic registration
//! that the on-demand modes are compared against, and the mode of platforms without SVA.
//!
//! Registration pins the MR's pages for the long term (accounted in the process's `VmPin`
//! against `RLIMIT_MEMLOCK`), maps them for the device's DMA, and writes one translation table
//! entry per page. The device then reaches them without a PASID, through the IOMMU's DMA
//! domain like any driver's DMA, and never faults. Dropping a [`PinnedMr`] unmaps the pages,
//! then unpins them; the device's MR must be cleared before, so nothing can use them.

use super::table;
use crate::nic::Nic;
use kernel::{
    dma::DataDirection,
    mm::pin::{Access, PinnedPages},
    page::PAGE_SIZE,
    prelude::*,
    scatterlist::{Owned, SGTable},
    uaccess::UserPtr,
};

/// The pinned, DMA-mapped pages of one MR.
pub(crate) struct PinnedMr {
    /// Dropping it unmaps the pages, then unpins them (and gives back their `VmPin`). The DMA
    /// mapping is also removed when the device is unbound.
    sgt: Pin<KBox<SGTable<Owned<PinnedPages>>>>,
    /// Pages pinned.
    pages: usize,
    /// Whether the device may write them.
    write: bool,
}

impl PinnedMr {
    /// Pins the pages `[addr, addr + len)` of the calling process touches (it must be the
    /// context's owner), writable if `write`, and maps them for `nic`'s DMA.
    ///
    /// `ENOMEM` beyond `RLIMIT_MEMLOCK` (without `CAP_IPC_LOCK`), `EFAULT` when a page is not
    /// mapped (or not writable, for `write`), `ENODEV` once the device is unbound.
    pub(crate) fn pin(nic: &Nic, addr: u64, len: u64, write: bool) -> Result<Self> {
        let (start, end) = table::page_span(addr, len)?;
        let pages = usize::try_from((end - start) / PAGE_SIZE as u64)?;
        let access = if write {
            Access::ReadWrite
        } else {
            Access::ReadOnly
        };
        let pinned = PinnedPages::pin(UserPtr::from_addr(usize::try_from(start)?), pages, access)?;
        let dir = if write {
            DataDirection::Bidirectional
        } else {
            DataDirection::ToDevice
        };
        let sgt = nic.with_bound(|dev| {
            KBox::pin_init(SGTable::new(dev, pinned, dir, GFP_KERNEL), GFP_KERNEL)
        })?;
        Ok(Self { sgt, pages, write })
    }

    /// Pages pinned.
    pub(crate) fn pages(&self) -> u64 {
        self.pages as u64
    }

    /// Writes one entry per page, in order, into the table of the device's MR `index` (set
    /// with `TABLE` over the same range).
    pub(crate) fn write_table(&self, nic: &Nic, index: u32) -> Result {
        let page = PAGE_SIZE as u64;
        // Whole pages were mapped from offset 0, so every segment is whole pages.
        if self
            .sgt
            .iter()
            .any(|seg| seg.dma_address() % page != 0 || seg.dma_len() % page != 0)
        {
            return Err(EIO);
        }
        let write = self.write;
        let entries = self.sgt.iter().flat_map(|seg| {
            let dma = seg.dma_address();
            (0..seg.dma_len())
                .step_by(PAGE_SIZE)
                .map(move |off| table::entry(dma.wrapping_add(off), write))
        });
        // The mapping covers exactly the pinned pages, or the table would have holes (the
        // caller clears the MR on this error).
        if nic.write_table(index, 0, entries)? != self.pages() {
            return Err(EIO);
        }
        Ok(())
    }
}
