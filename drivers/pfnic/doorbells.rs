// SPDX-License-Identifier: GPL-2.0

//! BAR2, the doorbell pages: one page per hardware context, which the process that owns the
//! context maps to ring its queues (docs/verbs.md, "User doorbells").
//!
//! Mapping I/O memory into a process is unsafe in general (the process reaches whatever
//! registers the range holds). [`DoorbellPages`] states once, where the BAR is known to be
//! the device's, that every page of it holds nothing but one context's doorbells, and then
//! maps single pages by context number, bounds-checked.

use crate::regs;
use kernel::{device::Bound, io::PhysAddr, mm::virt::VmaNew, pci, prelude::*};

/// The BAR that holds the doorbell pages.
const BAR: u32 = 2;

/// The physical extent of BAR2.
///
/// # Invariants
///
/// `[start, start + len)` is BAR2 of a pfnic, and every [`regs::DB_PAGE_SIZE`] page of it holds
/// only the doorbells of one hardware context, which the device checks against that context: a
/// process that maps its context's page reaches nothing but its own queues.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DoorbellPages {
    start: PhysAddr,
    len: u64,
}

impl DoorbellPages {
    /// Finds BAR2 of `pdev`, and claims and maps it for as long as the device is bound (the
    /// returned mapping; the driver never accesses it).
    pub(crate) fn new(pdev: &pci::Device<Bound>) -> Result<(Self, pci::DevresBar)> {
        let bar = pdev.iomap_region(BAR, c"pfnic/doorbells")?.into_devres()?;
        // INVARIANT: `pdev` is a pfnic (the driver matched its IDs and checked its ID
        // register), whose BAR2 is made of doorbell pages (docs/registers.md).
        Ok((
            Self {
                start: pdev.resource_start(BAR)?,
                len: pdev.resource_len(BAR)?,
            },
            bar,
        ))
    }

    /// Maps context `ctx`'s doorbell page into `vma`, uncached. `EINVAL` if BAR2 has no such
    /// page. The caller keeps the BAR assigned while the mapping exists: it removes the
    /// mapping at unbind, before it lets the BAR go.
    pub(crate) fn map(&self, ctx: u32, vma: &VmaNew) -> Result {
        let offset = PhysAddr::from(ctx) * regs::DB_PAGE_SIZE as PhysAddr;
        if offset + regs::DB_PAGE_SIZE as PhysAddr > self.len {
            return Err(EINVAL);
        }
        // SAFETY: `[start + offset, start + offset + DB_PAGE_SIZE)` lies inside BAR2 (checked
        // above) and is one context's doorbell page, which the device guards per context (type
        // invariant): user space may access it, and reaches nothing else through it.
        unsafe { vma.iomap_uncached(self.start + offset, regs::DB_PAGE_SIZE) }
    }
}
