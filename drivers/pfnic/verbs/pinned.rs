// SPDX-License-Identifier: GPL-2.0

//! Pinned MRs, the `pinned` memory mode (`PFNIC_MEM_MODE_PINNED`): the classic registration
//! that the on-demand modes are compared against, and the mode of platforms without SVA.
//!
//! Registration pins the MR's pages through the RDMA core (`ib_umem`: long-term pins charged
//! to the process's `VmPin` against `RLIMIT_MEMLOCK`, mapped for the device's DMA), and writes
//! one translation table entry per page. The device then reaches them without a PASID, through
//! the IOMMU's DMA domain like any driver's DMA, and never faults. Dropping a [`PinnedMr`]
//! unmaps the pages, then unpins them; the device's MR must be cleared before, so nothing can
//! use them.

use super::table;
use crate::nic::Nic;
use kernel::{
    prelude::*,
    rdma::{udata::UData, umem::Umem},
};

/// The pinned, DMA-mapped pages of one MR. Dropping it unmaps the pages, then unpins them
/// (and gives back their `VmPin`).
pub(crate) struct PinnedMr(Umem);

impl PinnedMr {
    /// Pins the pages `[addr, addr + len)` of the calling process (the context's owner, in
    /// the verb `udata` belongs to), writable if the MR's `access` (`IB_ACCESS_*`, as
    /// `PFNIC_ACCESS_*`) lets the device write, and maps them for the device's DMA.
    ///
    /// `ENOMEM` beyond `RLIMIT_MEMLOCK` (without `CAP_IPC_LOCK`), `EFAULT` when a page is not
    /// mapped (or not writable, when the device may write).
    pub(crate) fn pin(udata: &UData<'_>, addr: u64, len: u64, access: u32) -> Result<Self> {
        // The range as the device's table takes it (the same checks as every MR's).
        table::page_span(addr, len)?;
        Ok(Self(Umem::get(udata, addr, len, access)?))
    }

    /// Pages pinned.
    pub(crate) fn pages(&self) -> u64 {
        self.0.pages() as u64
    }

    /// Writes one entry per page, in order, into the table of the device's MR `index` (set
    /// with `TABLE` over the same range).
    pub(crate) fn write_table(&self, nic: &Nic, index: u32) -> Result {
        let write = self.0.writable();
        let entries = self.0.dma_pages().map(|dma| table::entry(dma, write));
        // The mapping covers exactly the pinned pages, or the table would have holes (the
        // caller clears the MR on this error).
        if nic.write_table(index, 0, entries)? != self.pages() {
            return Err(EIO);
        }
        Ok(())
    }
}
