// SPDX-License-Identifier: GPL-2.0

//! Device-wide table indices: QPNs, CQNs and memory key indices. Only the driver chooses them
//! (docs/verbs.md), so every open file draws from the same allocators.

use kernel::prelude::*;

/// A set of indices in `[first, end)`, each free or in use.
pub(crate) struct IndexAllocator {
    used: KVec<bool>,
    first: u32,
    /// Where the next search starts: indices are handed out round robin, so a number just
    /// freed is not reused at once (a stale QPN or key then names nothing rather than a new
    /// object).
    next: u32,
    in_use: u32,
}

impl IndexAllocator {
    /// Indices `first..end`.
    pub(crate) fn new(first: u32, end: u32) -> Result<Self> {
        let mut used = KVec::with_capacity(end as usize, GFP_KERNEL)?;
        for _ in 0..end {
            used.push(false, GFP_KERNEL)?;
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
        let end = self.used.len() as u32;
        if self.first >= end {
            return Err(ENOSPC);
        }
        let span = end - self.first;
        for i in 0..span {
            let index = self.first + (self.next - self.first + i) % span;
            if !self.used[index as usize] {
                self.used[index as usize] = true;
                self.next = if index + 1 >= end {
                    self.first
                } else {
                    index + 1
                };
                self.in_use += 1;
                return Ok(index);
            }
        }
        Err(ENOSPC)
    }

    /// Returns `index` to the free set.
    pub(crate) fn free(&mut self, index: u32) {
        if let Some(used) = self.used.get_mut(index as usize) {
            if *used {
                *used = false;
                self.in_use -= 1;
            }
        }
    }

    /// Whether `index` is in use.
    pub(crate) fn is_used(&self, index: u32) -> bool {
        index >= self.first && self.used.get(index as usize).copied().unwrap_or(false)
    }

    /// Indices in use.
    pub(crate) fn in_use(&self) -> u32 {
        self.in_use
    }
}
