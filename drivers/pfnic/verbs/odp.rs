// SPDX-License-Identifier: GPL-2.0

//! MRs of the `odp` memory mode (`PFNIC_MEM_MODE_ODP`): on-demand paging that the driver
//! manages, as mlx5's does, with neither PRI nor a PASID.
//!
//! The device translates such an MR through a table (docs/verbs.md, "Translation tables") set
//! with `FAULT`: a work that misses an entry waits, and the device queues a `PAGE_FAULT` event
//! ("Driver-managed faults"). The event queue's interrupt thread serves it
//! ([`Nic::serve_fault`]): it faults the pages in (`hmm_range_fault()`), maps them for DMA
//! and, under the MR's table lock and only if the process's mappings did not change since the
//! fault (the interval notifier's sequence), writes their entries (`MTT_WRITE`) and wakes the
//! work (`FAULT_RESUME`). Prefetches take the same path without waking anything.
//!
//! The MR's interval notifier takes the same lock, has the device drop the entries of the
//! changing range (`MTT_INVALIDATE`, which returns once no DMA can use them) and unmaps the
//! pages, all before the kernel changes the mappings. Nothing is pinned: the entries are the
//! only reference the device has, and they go first.
//!
//! The implicit MR (device ABI 1.10) works the same way over the whole user address space: its
//! notifier covers it all, and its table, like every MR's here, holds chunks only where the
//! device faulted.
//!
//! Lock order: the table lock, then the command lock. Nothing allocates memory under the table
//! lock, since reclaim may invalidate, which takes it.

use super::{cmd, eq::PageFault, table};
use crate::nic::Nic;
use kernel::{
    dma::{DataDirection, PageMapping},
    mm::{
        hmm::{self, Access, MirroredPage},
        mmu_notifier::{
            interval::{IntervalNotifier, Registration, SetSeq},
            Range,
        },
        MmWithUser,
    },
    new_mutex,
    page::PAGE_SIZE,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
};

/// Pages per chunk of an MR's mappings; a chunk is allocated at the first fault into it, so a
/// large MR costs little until it is used.
const CHUNK_PAGES: usize = 512;
/// Pages one step of a prefetch fills (one `MTT_WRITE`).
const STEP_PAGES: usize = table::STAGE_ENTRIES;
/// Times a fault is tried again when the mappings changed between the fault and the table
/// write, before the work is left to fault anew.
const FAULT_TRIES: u32 = 16;

/// An MR of the `odp` mode: its interval notifier, with the mirror of its table.
pub(crate) type OdpMr = Registration<Mirror>;

/// What the driver knows of an ODP MR's table.
#[pin_data]
pub(crate) struct Mirror {
    nic: Arc<Nic>,
    /// The MR's index in the device's key table.
    index: u32,
    /// The address of the page of entry 0.
    base: usize,
    /// Entries in the table: pages the MR touches.
    pages: usize,
    /// The MR lets the device write.
    write: bool,
    #[pin]
    table: Mutex<Table>,
    /// Pages made present by prefetches.
    prefetched: Atomic<u64>,
    /// Entries invalidated because the process's mappings changed.
    invalidated: Atomic<u64>,
}

/// A valid entry of the device's table: the page, and its DMA mapping.
struct Entry {
    mapping: PageMapping,
    page: MirroredPage,
    /// The device may write the page.
    write: bool,
}

impl Entry {
    /// Drops the entry, which the device no longer uses, marking the page dirty if the device
    /// could write it (its writes left no dirty bit in the process's page tables).
    ///
    /// # Safety
    ///
    /// The entry is current (published after its fault's sequence held, and not dropped by an
    /// invalidation since), and the caller holds the table lock.
    unsafe fn retire(self) {
        if self.write {
            // SAFETY: The entry is current and the caller holds the lock that the notifier's
            // callback takes, as the function's safety requirements say.
            unsafe { self.page.set_dirty() };
        }
        drop(self.mapping);
    }
}

/// The DMA mappings behind the device's valid entries.
struct Table {
    /// Chunk `c` holds the entries `c * CHUNK_PAGES..`, allocated at the first fault into
    /// them (sparse: an implicit MR's table spans the address space): `Some` where the
    /// device's entry is valid. Every `Some` is current: the notifier's callback removes them
    /// under the table's lock before the kernel changes the mappings behind them.
    chunks: RBTree<usize, KVVec<Option<Entry>>>,
    /// Entries mapped.
    mapped: usize,
    /// The device forgot the MR (its index may name another MR by now): nothing writes its
    /// table or answers for it any more.
    dead: bool,
}

impl Table {
    fn slot(&mut self, page: usize) -> Option<&mut Option<Entry>> {
        self.chunks
            .get_mut(&(page / CHUNK_PAGES))?
            .get_mut(page % CHUNK_PAGES)
    }

    /// For each chunk that holds entries of `first..last`: `f` with the entries' range in the
    /// table and their slots.
    fn for_each_chunk(
        &mut self,
        first: usize,
        last: usize,
        mut f: impl FnMut(usize, &mut [Option<Entry>]),
    ) {
        let mut cursor = self.chunks.cursor_lower_bound_mut(&(first / CHUNK_PAGES));
        while let Some(mut c) = cursor {
            let (&chunk, slots) = c.current_mut();
            let base = chunk * CHUNK_PAGES;
            if base >= last {
                break;
            }
            let lo = first.max(base) - base;
            let hi = last.min(base + slots.len()) - base;
            if lo < hi {
                f(base + lo, &mut slots[lo..hi]);
            }
            cursor = c.move_next();
        }
    }

    /// Has the device drop the mapped entries of `first..last` (with `MTT_INVALIDATE`, per
    /// chunk, over the span of its mapped ones, unless `dead`), then unmaps them; returns how
    /// many were mapped. The caller holds the table lock (this is `&mut`).
    fn invalidate(&mut self, mr: &Mirror, first: usize, last: usize) -> usize {
        let dead = self.dead;
        let mut n = 0;
        self.for_each_chunk(first, last, |at, slots| {
            let Some(lo) = slots.iter().position(Option::is_some) else {
                return;
            };
            let hi = slots
                .iter()
                .rposition(Option::is_some)
                .map_or(lo, |i| i + 1);
            if !dead {
                let [lo32, hi32] = cmd::split((at + lo) as u64);
                // Fails only once the device is gone, reset: it uses no entry any more.
                let _ = mr.nic.command(&cmd::MttInvalidate {
                    index: mr.index,
                    first: lo32,
                    count: (hi - lo) as u32,
                    first_hi: hi32,
                });
            }
            for entry in slots[lo..hi].iter_mut().filter_map(Option::take) {
                // SAFETY: Entries in the table are current (see `chunks`), and the table lock
                // is held.
                unsafe { entry.retire() };
                n += 1;
            }
        });
        self.mapped -= n;
        n
    }
}

/// Bytes an implicit MR's notifier covers from 0: the user address space (at most `2^57`
/// bytes, x86-64 with 5-level paging); the device's implicit table has more entries.
const IMPLICIT_BYTES: usize = 1 << 57;

/// Watches the pages of `[addr, addr + len)` in `mm` (the calling process's; the whole user
/// address space for the implicit MR, `implicit`) for the table of MR `index` on `nic`, with
/// no entry yet; the device may write them if `write`.
pub(crate) fn new(
    nic: &Arc<Nic>,
    mm: &MmWithUser,
    index: u32,
    addr: u64,
    len: u64,
    implicit: bool,
    write: bool,
) -> Result<Arc<OdpMr>> {
    let (base, bytes) = if implicit {
        (0, IMPLICIT_BYTES)
    } else {
        let (start, end) = table::page_span(addr, len)?;
        (usize::try_from(start)?, usize::try_from(end - start)?)
    };
    let table = Table {
        chunks: RBTree::new(),
        mapped: 0,
        dead: false,
    };
    Arc::pin_init(
        Registration::insert(
            mm,
            base,
            bytes,
            pin_init!(Mirror {
                nic: nic.clone(),
                index,
                base,
                pages: bytes / PAGE_SIZE,
                write,
                table <- new_mutex!(table),
                prefetched: Atomic::new(0),
                invalidated: Atomic::new(0),
            }),
        ),
        GFP_KERNEL,
    )
}

impl IntervalNotifier for Mirror {
    fn invalidate(&self, range: &Range, seq: SetSeq<'_>) -> bool {
        let mut t = if range.blockable() {
            self.table.lock()
        } else if let Some(t) = self.table.try_lock() {
            t
        } else {
            return false;
        };
        let start = range.start().max(self.base);
        let end = range.end().min(self.base + self.pages * PAGE_SIZE);
        let (first, last) = if start < end {
            (
                (start - self.base) / PAGE_SIZE,
                (end - self.base).div_ceil(PAGE_SIZE),
            )
        } else {
            (0, 0)
        };
        if !range.blockable() {
            // Telling the device takes a command, which sleeps (as mlx5's does): only a range
            // with nothing mapped can be let go.
            let mut mapped = false;
            t.for_each_chunk(first, last, |_, slots| {
                mapped |= slots.iter().any(Option::is_some);
            });
            if mapped {
                return false;
            }
        }
        seq.set();
        let n = t.invalidate(self, first, last);
        if n == 0 {
            return true;
        }
        self.invalidated.add(n as u64, Relaxed);
        if let Ok(verbs) = self.nic.verbs() {
            verbs.odp_stats.invalidations.add(1, Relaxed);
            verbs.odp_stats.invalidated_pages.add(n as u64, Relaxed);
        }
        true
    }
}

/// How a fill ended.
#[derive(PartialEq, Eq)]
enum Filled {
    /// The entries are in the device's table (and the work woken, if asked).
    Done,
    /// The MR is gone from the device.
    Dead,
}

/// `FAULT_RESUME` statuses: the entries are in the table; they cannot be (fail the work).
const RESUME_RETRY: u32 = 0;
const RESUME_FAIL: u32 = 1;

impl Mirror {
    /// Answers the work waiting for entries `first..first + count` with `status`. The caller
    /// holds the table lock and saw the MR alive.
    fn resume(&self, first: usize, count: usize, status: u32) -> Result {
        let [lo, hi] = cmd::split(first as u64);
        self.nic.command(&cmd::FaultResume {
            index: self.index,
            first: lo,
            count: count as u32,
            status,
            first_hi: hi,
        })?;
        Ok(())
    }

    /// Allocates the chunks that entries `first..first + count` fall in (before the table lock
    /// is taken: nothing allocates under it).
    fn ensure_chunks(&self, first: usize, count: usize) -> Result {
        for c in first / CHUNK_PAGES..=(first + count - 1) / CHUNK_PAGES {
            if self.table.lock().chunks.get(&c).is_some() {
                continue;
            }
            let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
            let mut chunk = KVVec::with_capacity(CHUNK_PAGES, GFP_KERNEL)?;
            for _ in 0..CHUNK_PAGES {
                chunk.push(None, GFP_KERNEL)?;
            }
            let mut t = self.table.lock();
            if t.chunks.get(&c).is_none() {
                t.chunks.insert(node.into_node(c, chunk));
            }
        }
        Ok(())
    }
}

/// Faults entries `first..first + count` of `mr` in for `access`, maps them for DMA and, if the
/// process's mappings did not change in the meantime, writes them into the device's table;
/// then, if `resume`, wakes the work waiting for them.
fn fill(mr: &OdpMr, first: usize, count: usize, access: Access, resume: bool) -> Result<Filled> {
    let m = mr.data();
    m.ensure_chunks(first, count)?;
    let start = m.base + first * PAGE_SIZE;
    let end = start + count * PAGE_SIZE;
    let verbs = m.nic.verbs()?;
    for _ in 0..FAULT_TRIES {
        // `EBUSY`: the range kept being invalidated for a second (`hmm::fault` retried).
        let faulted = hmm::fault(mr, start, end, access)?;
        let mut maps = KVVec::with_capacity(count, GFP_KERNEL)?;
        m.nic.with_bound(|dev| {
            for page in faulted.pages() {
                let write = m.write && page.writable();
                let dir = if write {
                    DataDirection::Bidirectional
                } else {
                    DataDirection::ToDevice
                };
                let entry = Entry {
                    mapping: page.dma_map(dev, dir)?,
                    page: page.mirrored(),
                    write,
                };
                maps.push(entry, GFP_KERNEL)?;
            }
            Ok(())
        })?;
        let mut t = m.table.lock();
        if t.dead {
            return Ok(Filled::Dead);
        }
        if mr.read_retry(faulted.seq()) {
            // An invalidation ran since the fault: the pages may be gone. `maps` unmaps them.
            verbs.odp_stats.fault_retries.add(1, Relaxed);
            continue;
        }
        let entries = maps
            .iter()
            .map(|e| table::entry(e.mapping.dma_address(), e.write));
        if m.nic.write_table(m.index, first as u64, entries)? != count as u64 {
            return Err(EIO);
        }
        // The device has the new entries: those they replace (of the same pages) go.
        let mut added = 0;
        for (page, entry) in (first..).zip(maps) {
            let slot = t.slot(page).ok_or(EINVAL)?;
            match slot.replace(entry) {
                // SAFETY: Entries in the table are current, and the table lock is held.
                Some(old) => unsafe { old.retire() },
                None => added += 1,
            }
        }
        t.mapped += added;
        if resume {
            m.resume(first, count, RESUME_RETRY)?;
        }
        return Ok(Filled::Done);
    }
    Err(EBUSY)
}

/// Answers the work waiting for entries `first..first + count` of `mr` with `status`, unless
/// the MR is gone.
fn answer(mr: &OdpMr, first: usize, count: usize, status: u32) {
    let m = mr.data();
    let t = m.table.lock();
    if !t.dead {
        let _ = m.resume(first, count, status);
    }
}

/// Fails the work waiting for entries `first..first + count` of `mr`.
fn fail(mr: &OdpMr, first: usize, count: usize) {
    answer(mr, first, count, RESUME_FAIL);
}

/// Makes the pages of `[addr, addr + len)` (within `mr`) present in the device's table, for
/// writing if `write`, in steps of [`STEP_PAGES`]. `EFAULT` if the process has not mapped them
/// so (as pinning them would fail).
pub(crate) fn prefetch(mr: &OdpMr, addr: u64, len: u64, write: bool) -> Result {
    let m = mr.data();
    let page = PAGE_SIZE as u64;
    let end = addr.checked_add(len).ok_or(EINVAL)?;
    let base = m.base as u64;
    if len == 0 {
        return Ok(());
    }
    if addr < base || end > base + (m.pages as u64) * page {
        return Err(EINVAL);
    }
    let first = usize::try_from((addr - base) / page)?;
    let last = usize::try_from((end - base).div_ceil(page))?;
    let access = if write { Access::Write } else { Access::Read };
    let mut at = first;
    while at < last {
        let count = (last - at).min(STEP_PAGES);
        let filled =
            fill(mr, at, count, access, false).map_err(|e| if e == EPERM { EFAULT } else { e })?;
        if filled == Filled::Dead {
            return Err(EINVAL);
        }
        m.prefetched.add(count as u64, Relaxed);
        at += count;
    }
    Ok(())
}

/// Clears `mr` in the device, under the table lock so that no fault writes its table or wakes
/// work for its index afterwards (the index may be reused), and unmaps its pages.
pub(crate) fn retire(mr: &OdpMr) -> Result {
    let m = mr.data();
    let mut t = m.table.lock();
    if !t.dead {
        match m.nic.command(&cmd::MrClear { index: m.index }) {
            // Gone with the device's reset.
            Ok(()) => {}
            Err(e) if e == ENODEV => {}
            Err(e) => return Err(e),
        }
        t.dead = true;
    }
    t.invalidate(m, 0, m.pages);
    Ok(())
}

/// An ODP MR's counters for `rdma statistic mr`.
pub(crate) struct OdpMrCounters {
    pub(crate) prefetched: u64,
    pub(crate) invalidated: u64,
    pub(crate) mapped: u64,
}

/// `mr`'s counters.
pub(crate) fn counters(mr: &OdpMr) -> OdpMrCounters {
    let m = mr.data();
    let mapped = m.table.lock().mapped as u64;
    OdpMrCounters {
        prefetched: m.prefetched.load(Relaxed),
        invalidated: m.invalidated.load(Relaxed),
        mapped,
    }
}

/// Device-wide counters of the `odp` mode, for debugfs.
pub(crate) struct OdpStats {
    /// Page-fault events served with success, and their pages.
    pub(crate) faults_served: Atomic<u64>,
    pub(crate) fault_pages: Atomic<u64>,
    /// Page-fault events failed (their work completes in error).
    pub(crate) faults_failed: Atomic<u64>,
    /// Page-fault events for an MR the driver no longer has (the work is gone with it).
    pub(crate) faults_stale: Atomic<u64>,
    /// Faults done again because the mappings changed before the table write.
    pub(crate) fault_retries: Atomic<u64>,
    /// Invalidations that dropped entries, and the entries dropped.
    pub(crate) invalidations: Atomic<u64>,
    pub(crate) invalidated_pages: Atomic<u64>,
}

impl OdpStats {
    pub(crate) fn new() -> Self {
        Self {
            faults_served: Atomic::new(0),
            fault_pages: Atomic::new(0),
            faults_failed: Atomic::new(0),
            faults_stale: Atomic::new(0),
            fault_retries: Atomic::new(0),
            invalidations: Atomic::new(0),
            invalidated_pages: Atomic::new(0),
        }
    }

    pub(crate) fn write(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        for (name, value) in [
            ("odp_faults_served", &self.faults_served),
            ("odp_fault_pages", &self.fault_pages),
            ("odp_faults_failed", &self.faults_failed),
            ("odp_faults_stale", &self.faults_stale),
            ("odp_fault_retries", &self.fault_retries),
            ("odp_invalidations", &self.invalidations),
            ("odp_invalidated_pages", &self.invalidated_pages),
        ] {
            writeln!(f, "{name} {}", value.load(Relaxed))?;
        }
        Ok(())
    }
}

impl Nic {
    /// Serves one `PAGE_FAULT` event (in the event queue's interrupt thread): fills the entries
    /// it names, or, if the process cannot give the pages, the first one alone, so the work
    /// moves the bytes before a hole as it would in the `sva` mode; else fails the work.
    pub(crate) fn serve_fault(&self, fault: PageFault) {
        let Ok(verbs) = self.verbs() else { return };
        let mr: Option<Arc<OdpMr>> = verbs.odp_mrs.lock().get(fault.mr as usize).map(Into::into);
        let Some(mr) = mr else {
            // Cleared: the device woke its work, which failed.
            verbs.odp_stats.faults_stale.add(1, Relaxed);
            return;
        };
        let pages = mr.data().pages;
        let first = fault.first as usize;
        if fault.count == 0 {
            return;
        }
        if first >= pages {
            // Beyond any user address (an implicit MR's table is larger than the address
            // space): no page there, and the work must not wait for one forever.
            verbs.odp_stats.faults_failed.add(1, Relaxed);
            fail(&mr, first, fault.count as usize);
            return;
        }
        let count = (fault.count as usize).min(pages - first);
        let access = if fault.write {
            Access::Write
        } else {
            Access::Read
        };
        let served = match fill(&mr, first, count, access, true) {
            Ok(_) => Ok(count),
            Err(e) if e == EBUSY => Err(e),
            Err(_) if count > 1 => fill(&mr, first, 1, access, true).map(|_| 1),
            Err(e) => Err(e),
        };
        match served {
            Ok(n) => {
                verbs.odp_stats.faults_served.add(1, Relaxed);
                verbs.odp_stats.fault_pages.add(n as u64, Relaxed);
            }
            // The mappings kept changing under the fault (an invalidation racing it, again
            // and again): that fails nothing, as it fails no CPU access. The work translates
            // again and faults anew, as mlx5's does after such a race.
            Err(e) if e == EBUSY => {
                verbs.odp_stats.fault_retries.add(1, Relaxed);
                answer(&mr, first, count, RESUME_RETRY);
            }
            Err(_) => {
                verbs.odp_stats.faults_failed.add(1, Relaxed);
                fail(&mr, first, count);
            }
        }
        // The last reference may be this one (the MR was deregistered meanwhile): dropping it
        // removes the notifier, which this thread may do.
        drop(mr);
    }
}
