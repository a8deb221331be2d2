// SPDX-License-Identifier: GPL-2.0

//! MRs of the `odp` memory mode (`PFNIC_MEM_MODE_ODP`): on-demand paging that the driver
//! manages through the core's ODP umems (`ib_umem_odp`), as mlx5's does, with neither PRI nor a
//! PASID.
//!
//! The device translates such an MR through a table (docs/verbs.md, "Translation tables") set
//! with `FAULT`: a work that misses an entry waits, and the device queues a `PAGE_FAULT` event
//! ("Driver-managed faults"). The event queue's interrupt thread serves it
//! ([`Nic::serve_fault`]): the core faults the pages in and returns with the umem's lock held
//! and the pages current ([`Odp::map_and_lock`]); the driver maps them for DMA, writes their
//! entries (`MTT_WRITE`) and wakes the work (`FAULT_RESUME`) before the lock goes. Prefetches
//! take the same path without waking anything.
//!
//! The umem's interval notifier takes the same lock and calls [`Mirror::invalidate`], which
//! has the device drop the entries of the changing range (`MTT_INVALIDATE`, which returns once
//! no DMA can use them); the core then unmaps the pages, all before the kernel changes the
//! mappings. Nothing is pinned: the entries are the only reference the device has, and they go
//! first.
//!
//! An MR's umem is the core's implicit umem with children of [`CHILD_BYTES`], made where the
//! device faults, each with its notifier (clipped to the MR's range; the implicit MR, device ABI
//! 1.10, covers the whole user address space): registering costs the same whatever the MR's
//! size, and the core's per-page entries, like the device's table, exist only where the device
//! faulted.
//!
//! Lock order: the umem's lock, then the MR's `alive` lock, then the command lock. Nothing
//! allocates memory under the umem's lock, since reclaim may invalidate, which takes it.

use super::{args, cmd, eq::PageFault, table};
use crate::nic::Nic;
use kernel::{
    new_mutex,
    page::PAGE_SIZE,
    prelude::*,
    rdma::{
        udata::UData,
        umem_odp::{Invalidate, Locked, UmemOdp},
    },
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
};

/// Bytes of each child of an MR's umem: a child (its notifier, and the core's array of its
/// pages) is made at the first fault into it, so memory costs little until it is used.
const CHILD_BYTES: u64 = 2 << 20;
/// Pages one step of a prefetch or fault fills (one `MTT_WRITE`).
const STEP_PAGES: usize = table::STAGE_ENTRIES;
/// Bytes an implicit MR covers from 0: the user address space (at most `2^57` bytes, x86-64
/// with 5-level paging); the device's implicit table has more entries.
const IMPLICIT_BYTES: usize = 1 << 57;

/// An MR of the `odp` mode: its umems, with what the driver knows of its table.
pub(crate) struct OdpMr(Pin<KBox<UmemOdp<Mirror>>>);

impl OdpMr {
    fn data(&self) -> &Mirror {
        self.0.data()
    }
}

/// What the driver knows of an ODP MR's table.
#[pin_data]
pub(crate) struct Mirror {
    nic: Arc<Nic>,
    /// The MR's index in the device's key table.
    index: u32,
    /// The address of the page of entry 0.
    base: u64,
    /// Entries in the table: pages the MR touches.
    pages: u64,
    /// The MR lets the device write.
    write: bool,
    /// Whether the device still has the MR (cleared, its index may name another MR by now):
    /// held while its table is written or its work woken, so that nothing does either after
    /// it is cleared.
    #[pin]
    alive: Mutex<bool>,
    /// Pages made present by prefetches.
    prefetched: Atomic<u64>,
    /// Entries invalidated because the process's mappings changed.
    invalidated: Atomic<u64>,
}

/// Watches the pages `reg` names in the calling process (the whole user address space for the
/// implicit MR, `implicit`) for the table of MR `index` on `nic`, with no entry yet; the device
/// may write them if `write`. `udata` is the registration's.
pub(crate) fn new(
    nic: &Arc<Nic>,
    udata: &UData<'_>,
    index: u32,
    reg: &args::RegMr,
    implicit: bool,
    write: bool,
) -> Result<Arc<OdpMr>> {
    let (base, bytes) = if implicit {
        (0, IMPLICIT_BYTES as u64)
    } else {
        let (start, end) = table::page_span(reg.addr, reg.length)?;
        (start, end - start)
    };
    let mirror = pin_init!(Mirror {
        nic: nic.clone(),
        index,
        base,
        pages: bytes / PAGE_SIZE as u64,
        write,
        alive <- new_mutex!(true),
        prefetched: Atomic::new(0),
        invalidated: Atomic::new(0),
    });
    let umem = if implicit {
        UmemOdp::<Mirror>::implicit(udata, reg.access, CHILD_BYTES, mirror)?
    } else {
        UmemOdp::<Mirror>::range(udata, reg.addr, reg.length, reg.access, CHILD_BYTES, mirror)?
    };
    Ok(Arc::new(OdpMr(umem), GFP_KERNEL)?)
}

impl Mirror {
    /// The table entry of the page at `addr`.
    fn entry_of(&self, addr: u64) -> u64 {
        (addr - self.base) / PAGE_SIZE as u64
    }
}

impl Invalidate for Mirror {
    fn invalidate(&self, umem: &Locked<'_>, start: u64, end: u64) {
        // The span of the mapped entries, and how many there are, in one pass.
        let (mut lo, mut hi, mut n) = (usize::MAX, 0, 0);
        for i in (umem.index(start)..umem.index(end - 1) + 1).filter(|&i| umem.is_mapped(i)) {
            lo = lo.min(i);
            hi = i + 1;
            n += 1;
        }
        if n == 0 {
            return;
        }
        let page = PAGE_SIZE as u64;
        let at = self.entry_of(umem.start() + lo as u64 * page);
        let alive = self.alive.lock();
        if *alive {
            let [lo32, hi32] = cmd::split(at);
            // Fails only once the device is gone, reset: it uses no entry any more.
            let _ = self.nic.command(&cmd::MttInvalidate {
                index: self.index,
                first: lo32,
                count: (hi - lo) as u32,
                first_hi: hi32,
            });
        }
        drop(alive);
        self.invalidated.add(n as u64, Relaxed);
        if let Ok(verbs) = self.nic.verbs() {
            verbs.odp_stats.invalidations.add(1, Relaxed);
            verbs.odp_stats.invalidated_pages.add(n as u64, Relaxed);
        }
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
    /// Answers the work waiting for entries `first..first + count` with `status`, unless the
    /// MR is gone.
    fn answer(&self, first: u64, count: u64, status: u32) -> Result {
        let alive = self.alive.lock();
        if !*alive {
            return Ok(());
        }
        let [lo, hi] = cmd::split(first);
        self.nic.command(&cmd::FaultResume {
            index: self.index,
            first: lo,
            count: count as u32,
            status,
            first_hi: hi,
        })?;
        drop(alive);
        Ok(())
    }
}

/// Faults entries `first..first + count` of `mr` in (for writing if `write`), maps them for DMA
/// and writes them into the device's table, a step at a time; then, if `resume`, wakes the work
/// waiting for them.
fn fill(mr: &OdpMr, first: u64, count: u64, write: bool, resume: bool) -> Result<Filled> {
    let m = mr.data();
    let page = PAGE_SIZE as u64;
    let end = m.base + (first + count) * page;
    let mut at = m.base + first * page;
    // Taken before the umem's lock, under which nothing allocates.
    let mut dmas = KVVec::with_capacity(STEP_PAGES, GFP_KERNEL)?;
    while at < end {
        let umem = mr.0.child(at)?;
        let step = (end.min(umem.end()) - at).min(STEP_PAGES as u64 * page);
        // `EBUSY`: the range kept being invalidated for a second.
        let (mut locked, n) = umem.map_and_lock(at, step, write, true)?;
        if n as u64 != step / page {
            return Err(EFAULT);
        }
        dmas.clear();
        let from = locked.index(at);
        for i in from..from + n {
            let entry = table::entry(locked.dma_map(i)?, m.write && locked.writable(i));
            dmas.push_within_capacity(entry).map_err(|_| ENOMEM)?;
        }
        let alive = m.alive.lock();
        if !*alive {
            return Ok(Filled::Dead);
        }
        if m.nic
            .write_table(m.index, m.entry_of(at), dmas.iter().copied())?
            != n as u64
        {
            return Err(EIO);
        }
        drop(alive);
        drop(locked);
        at += step;
    }
    if resume {
        m.answer(first, count, RESUME_RETRY)?;
    }
    Ok(Filled::Done)
}

/// Fails the work waiting for entries `first..first + count` of `mr`.
fn fail(mr: &OdpMr, first: u64, count: u64) {
    let _ = mr.data().answer(first, count, RESUME_FAIL);
}

/// Makes the pages of `[addr, addr + len)` (within `mr`) present in the device's table, for
/// writing if `write`. `EFAULT` if the process has not mapped them so (as pinning them would
/// fail).
pub(crate) fn prefetch(mr: &OdpMr, addr: u64, len: u64, write: bool) -> Result {
    let m = mr.data();
    let page = PAGE_SIZE as u64;
    let end = addr.checked_add(len).ok_or(EINVAL)?;
    if len == 0 {
        return Ok(());
    }
    if addr < m.base || end > m.base + m.pages * page {
        return Err(EINVAL);
    }
    let first = m.entry_of(addr);
    let last = (end - m.base).div_ceil(page);
    let filled =
        fill(mr, first, last - first, write, false)
            .map_err(|e| if e == EPERM { EFAULT } else { e })?;
    if filled == Filled::Dead {
        return Err(EINVAL);
    }
    m.prefetched.add(last - first, Relaxed);
    Ok(())
}

/// Clears `mr` in the device, under its `alive` lock so that no fault writes its table or
/// wakes work for its index afterwards (the index may be reused). Its pages are unmapped when
/// the last reference to it goes.
pub(crate) fn retire(mr: &OdpMr) -> Result {
    let m = mr.data();
    let mut alive = m.alive.lock();
    if *alive {
        match m.nic.command(&cmd::MrClear { index: m.index }) {
            // Gone with the device's reset.
            Ok(()) => {}
            Err(e) if e == ENODEV => {}
            Err(e) => return Err(e),
        }
        *alive = false;
    }
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
    let mut mapped = 0;
    mr.0.for_each_child(|u| mapped += u.lock().mapped_pages() as u64);
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
    /// Faults the core gave up on because the mappings kept changing under them for a second
    /// (the work faults anew).
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
        let first = fault.first;
        if fault.count == 0 {
            return;
        }
        if first >= pages {
            // Beyond any user address (an implicit MR's table is larger than the address
            // space): no page there, and the work must not wait for one forever.
            verbs.odp_stats.faults_failed.add(1, Relaxed);
            fail(&mr, first, u64::from(fault.count));
            return;
        }
        let count = u64::from(fault.count).min(pages - first);
        let served = match fill(&mr, first, count, fault.write, true) {
            Ok(_) => Ok(count),
            Err(e) if e == EBUSY => Err(e),
            Err(_) if count > 1 => fill(&mr, first, 1, fault.write, true).map(|_| 1),
            Err(e) => Err(e),
        };
        match served {
            Ok(n) => {
                verbs.odp_stats.faults_served.add(1, Relaxed);
                verbs.odp_stats.fault_pages.add(n, Relaxed);
            }
            // The mappings kept changing under the fault (an invalidation racing it, again
            // and again): that fails nothing, as it fails no CPU access. The work translates
            // again and faults anew, as mlx5's does after such a race.
            Err(e) if e == EBUSY => {
                verbs.odp_stats.fault_retries.add(1, Relaxed);
                let _ = mr.data().answer(first, count, RESUME_RETRY);
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
