// SPDX-License-Identifier: GPL-2.0

//! Translation tables (docs/verbs.md, "Translation tables"): the per-page entries of an MR
//! that the device translates through a table the driver fills instead of the process's PASID.
//!
//! The driver stages up to [`STAGE_ENTRIES`] entries in one coherent buffer and has the device
//! read them with `MTT_WRITE`; the buffer is used under the command lock, so one staging area
//! serves every file of the device.

use super::{cmd, Verbs};
use crate::nic::Nic;
use kernel::{
    device::{Bound, Device},
    devres::Devres,
    dma::{Coherent, DmaAddress},
    io::{io_project, Io},
    page::PAGE_SIZE,
    prelude::*,
};

/// Entries one `MTT_WRITE` takes at most (the device's limit).
pub(crate) const STAGE_ENTRIES: usize = 512;

/// Entry bits.
const ENTRY_VALID: u64 = 1 << 0;
const ENTRY_READ: u64 = 1 << 1;
const ENTRY_WRITE: u64 = 1 << 2;
/// The page's DMA address occupies bits 63:12.
const ENTRY_ADDR_MASK: u64 = !0xfff;

/// The page-aligned span `[start, end)` of the pages that `[addr, addr + len)` touches: the range
/// a table for it covers. `EINVAL` if it wraps.
pub(crate) fn page_span(addr: u64, len: u64) -> Result<(u64, u64)> {
    let page = PAGE_SIZE as u64;
    let end = addr
        .checked_add(len)
        .and_then(|end| end.checked_next_multiple_of(page))
        .ok_or(EINVAL)?;
    Ok((addr & !(page - 1), end))
}

/// The entry of a page at DMA address `dma` (page aligned) that the device may read, and write
/// if `write`.
pub(crate) fn entry(dma: DmaAddress, write: bool) -> u64 {
    let perm = if write {
        ENTRY_READ | ENTRY_WRITE
    } else {
        ENTRY_READ
    };
    (dma & ENTRY_ADDR_MASK) | ENTRY_VALID | perm
}

/// The staging buffer `MTT_WRITE` reads entries from.
pub(crate) struct TableStage {
    mem: Devres<Coherent<[u64]>>,
    base: DmaAddress,
}

impl TableStage {
    pub(crate) fn new(dev: &Device<Bound>) -> Result<Self> {
        let mem = Coherent::zeroed_slice(dev, STAGE_ENTRIES, GFP_KERNEL)?;
        let base = mem.dma_address();
        Ok(Self {
            mem: Devres::new(dev, mem)?,
            base,
        })
    }
}

impl Nic {
    /// Writes the entries `entries` yields into the table of MR `index` from entry `first`
    /// on, staging [`STAGE_ENTRIES`] at a time; returns how many it wrote.
    pub(crate) fn write_table(
        &self,
        index: u32,
        first: u64,
        mut entries: impl Iterator<Item = u64>,
    ) -> Result<u64> {
        let verbs: &Verbs = self.verbs()?;
        let stage = &verbs.table_stage;
        let mut done = 0u64;
        loop {
            let [at, at_hi] = cmd::split(first + done);
            let _state = verbs.cmd_lock.lock();
            let staged = stage
                .mem
                .try_access_with(|mem| {
                    let mut n = 0;
                    for e in entries.by_ref().take(STAGE_ENTRIES) {
                        io_project!(mem, [panic: n]).copy_write(e);
                        n += 1;
                    }
                    n
                })
                .ok_or(ENODEV)?;
            if staged == 0 {
                return Ok(done);
            }
            let [lo, hi] = cmd::split(stage.base);
            self.execute(&cmd::MttWrite {
                index,
                first: at,
                count: staged as u32,
                entries_lo: lo,
                entries_hi: hi,
                first_hi: at_hi,
            })?;
            done += staged as u64;
        }
    }
}
