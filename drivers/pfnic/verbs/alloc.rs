// SPDX-License-Identifier: GPL-2.0

//! Device-wide table indices: QPNs, CQNs and memory key indices. Only the driver chooses them
//! (docs/verbs.md), so every open file draws from the same allocators.

use kernel::{bitmap::BitmapVec, prelude::*};

/// A set of indices in `[first, end)`, each free or in use: the kernel's bitmap, with the bits
/// below `first` set for good.
pub(crate) struct IndexAllocator {
    used: BitmapVec,
    first: u32,
    /// Where the next search starts: indices are handed out round robin, so a number just
    /// freed is not reused at once (a stale QPN then names nothing rather than a new object).
    next: u32,
    in_use: u32,
}

impl IndexAllocator {
    /// Indices `first..end`.
    pub(crate) fn new(first: u32, end: u32) -> Result<Self> {
        let mut used = BitmapVec::new(end as usize, GFP_KERNEL)?;
        for reserved in 0..first.min(end) {
            used.set_bit(reserved as usize);
        }
        Ok(Self {
            used,
            first,
            next: first,
            in_use: 0,
        })
    }

    /// Takes a free index, or fails with `ENOSPC` when all are in use.
    pub(crate) fn alloc(&mut self) -> Result<u32> {
        let end = self.used.len();
        if self.first as usize >= end {
            return Err(ENOSPC);
        }
        let start = (self.next as usize).clamp(self.first as usize, end - 1);
        let index = self
            .used
            .next_zero_bit(start)
            .or_else(|| self.used.next_zero_bit(self.first as usize))
            .ok_or(ENOSPC)?;
        self.used.set_bit(index);
        self.next = if index + 1 >= end {
            self.first
        } else {
            (index + 1) as u32
        };
        self.in_use += 1;
        Ok(index as u32)
    }

    /// Returns `index` to the free set.
    pub(crate) fn free(&mut self, index: u32) {
        if self.is_used(index) {
            self.used.clear_bit(index as usize);
            self.in_use -= 1;
        }
    }

    /// Whether `index` is in use.
    pub(crate) fn is_used(&self, index: u32) -> bool {
        let i = index as usize;
        index >= self.first && i < self.used.len() && self.used.next_bit(i) == Some(i)
    }

    /// Indices in use.
    pub(crate) fn in_use(&self) -> u32 {
        self.in_use
    }
}
