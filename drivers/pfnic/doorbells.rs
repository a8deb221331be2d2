// SPDX-License-Identifier: GPL-2.0

//! BAR2, the doorbell pages: one page per hardware context, which the process that owns the
//! context maps to ring its queues (docs/verbs.md, "User doorbells").
//!
//! Mapping I/O memory into a process is unsafe in general (the process reaches whatever
//! registers the range holds). [`DoorbellPages::new`] states once, where the BAR is claimed,
//! that every page of it holds nothing but one context's doorbells; mappings are then made
//! by context number, bounds-checked by the range.

use crate::regs;
use kernel::{device::Bound, mm::virt::VmaNew, pci, prelude::*};

/// The BAR that holds the doorbell pages.
const BAR: u32 = 2;

/// BAR2, the doorbell pages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DoorbellPages {
    pages: pci::UserIoRange,
}

impl DoorbellPages {
    /// Finds BAR2 of `pdev`, and claims and maps it for as long as the device is bound (the
    /// returned mapping; the driver never accesses it).
    pub(crate) fn new(pdev: &pci::Device<Bound>) -> Result<(Self, pci::DevresBar)> {
        let bar = pdev.iomap_region(BAR, c"pfnic/doorbells")?;
        let len = pdev.resource_len(BAR)?;
        // SAFETY: `pdev` is a pfnic (the driver matched its IDs and checked its ID register),
        // whose BAR2 is made of doorbell pages (docs/registers.md), each holding only the
        // doorbells of one hardware context, which the device checks against that context: a
        // process that maps its context's page reaches nothing but its own queues. The driver
        // removes every file's mappings at unbind (`Nic::revoke_contexts`), before the BAR is
        // released.
        let pages = unsafe { bar.user_io(0, len) }?;
        Ok((Self { pages }, bar.into_devres()?))
    }

    /// Maps context `ctx`'s doorbell page into `vma`, uncached. `EINVAL` if BAR2 has no such
    /// page.
    pub(crate) fn map(&self, ctx: u32, vma: &VmaNew) -> Result {
        let offset = u64::from(ctx) * regs::DB_PAGE_SIZE as u64;
        self.pages.map(vma, offset, regs::DB_PAGE_SIZE)
    }
}
