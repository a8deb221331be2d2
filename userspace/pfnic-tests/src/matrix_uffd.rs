//! The fault matrix's userfaultfd cases: an ODP MR over memory a userfaultfd handles, in
//! missing mode and in write-protect mode.
//!
//! What the kernel does: the device's page request reaches `iommu_sva_handle_mm()`
//! (drivers/iommu/iommu-sva.c), which calls `handle_mm_fault()` from the IOMMU's fault
//! workqueue without `FAULT_FLAG_ALLOW_RETRY`. On a uffd-registered range, `handle_userfault()`
//! (mm/userfaultfd.c) can then not wait for the handler: it returns `VM_FAULT_SIGBUS` without
//! queueing an event, the IOMMU answers the page request with Invalid Request, and the work
//! request fails cleanly (`REM_ACCESS_ERR` on the remote side, `LOC_PROT_ERR` on the local
//! side; `EFAULT` for what the driver populates synchronously: an ordinary MR, a flushed
//! prefetch). The handler never hears of the device's access. Once the handler (or anyone) has
//! made the pages present, or writable, the same transfer succeeds. The tests check all of that
//! end to end, with a handler thread that answers every event it gets, and a CPU access that
//! shows the handler works.
//!
//! The `odp` mode differs, as mlx5's ODP does: the driver's faults go through the RDMA core's
//! `ib_umem_odp_map_dma_and_lock()`, whose `hmm_range_fault_unlocked_timeout()` lets
//! `handle_mm_fault()` drop the mmap lock and so lets `handle_userfault()` wait for the
//! handler. The device's access to a missing or write-protected page reaches the handler as a
//! CPU access would, and once the handler answered, the transfer completes with the right
//! bytes. In that mode the tests check that instead.

use pfnic_cli::outln;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{expect_errno, pagemap, pm_present};
use crate::ibv_common::*;
use crate::ktap::{Failure, Test, TestResult};
use crate::matrix::{check_sentinels, interior, reset_sentinels, span, EDGES, LEN, SENTINEL};
use crate::verbs_common::{fail, ACCESS_ALL, PAGE};
use ibv::{Buffer, QpState, SendWr, WcStatus, WrOpcode};
use pfnic_verbs::{ADVISE_FLAG_FLUSH, ADVISE_PREFETCH, ADVISE_PREFETCH_WRITE};

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_matrix_uffd_missing",
        run: test_matrix_uffd_missing,
    },
    &Test {
        name: "test_matrix_uffd_wp",
        run: test_matrix_uffd_wp,
    },
];

// include/uapi/linux/userfaultfd.h (the libc crate has only the system call number).
const UFFD_API: u64 = 0xaa;
const UFFDIO_REGISTER_MODE_MISSING: u64 = 1 << 0;
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;
const UFFD_PAGEFAULT_FLAG_WRITE: u64 = 1 << 0;
const UFFD_PAGEFAULT_FLAG_WP: u64 = 1 << 1;

/// `_IOC(dir, 0xaa, nr, size)` of the userfaultfd ioctls (`dir` 3: read and write, 2: read).
const fn uffd_ioc(dir: libc::c_ulong, nr: libc::c_ulong, size: usize) -> libc::c_ulong {
    (dir << 30) | ((size as libc::c_ulong) << 16) | (0xaa << 8) | nr
}
const UFFDIO_API: libc::c_ulong = uffd_ioc(3, 0x3f, size_of::<UffdioApi>());
const UFFDIO_REGISTER: libc::c_ulong = uffd_ioc(3, 0x00, size_of::<UffdioRegister>());
const UFFDIO_COPY: libc::c_ulong = uffd_ioc(3, 0x03, size_of::<UffdioCopy>());
const UFFDIO_ZEROPAGE: libc::c_ulong = uffd_ioc(3, 0x04, size_of::<UffdioZeropage>());
const UFFDIO_WRITEPROTECT: libc::c_ulong = uffd_ioc(3, 0x06, size_of::<UffdioWriteprotect>());

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioCopy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}

#[repr(C)]
struct UffdioZeropage {
    range: UffdioRange,
    mode: u64,
    zeropage: i64,
}

#[repr(C)]
struct UffdioWriteprotect {
    range: UffdioRange,
    mode: u64,
}

/// A page fault the handler received: (`UFFD_PAGEFAULT_FLAG_*`, address).
type Event = (u64, u64);

/// A userfaultfd of this process (non-blocking, close-on-exec).
struct Uffd {
    fd: OwnedFd,
}

impl Uffd {
    /// Opens one and agrees on the API; skips when the kernel has no userfaultfd.
    fn new() -> Result<Self, Failure> {
        // SAFETY: the system call takes flags only and returns a new descriptor or -1.
        let fd =
            unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | libc::O_NONBLOCK) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOSYS) {
                skip!("no userfaultfd in this kernel (CONFIG_USERFAULTFD)");
            }
            fail!("userfaultfd: {e}");
        }
        // SAFETY: `fd` is a descriptor the system call just returned; nothing else owns it.
        let u = Self {
            fd: unsafe { OwnedFd::from_raw_fd(fd as i32) },
        };
        let mut api = UffdioApi {
            api: UFFD_API,
            features: 0,
            ioctls: 0,
        };
        // SAFETY: `api` is the `struct uffdio_api` that UFFDIO_API encodes.
        unsafe { u.ioctl(UFFDIO_API, &mut api) }.map_err(|e| fail("UFFDIO_API", e))?;
        Ok(u)
    }

    /// # Safety
    ///
    /// `arg` must be the structure that `req` encodes (its size and layout).
    unsafe fn ioctl<T>(&self, req: libc::c_ulong, arg: &mut T) -> std::io::Result<()> {
        // SAFETY: the caller passes the structure `req` expects; it is valid for the call.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), req, std::ptr::from_mut(arg)) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// UFFDIO_REGISTER of `[start, start + len)` in `mode`.
    fn register(&self, start: usize, len: usize, mode: u64) -> Result<(), Failure> {
        let mut r = UffdioRegister {
            range: range(start, len),
            mode,
            ioctls: 0,
        };
        // SAFETY: `r` is the `struct uffdio_register` that UFFDIO_REGISTER encodes.
        unsafe { self.ioctl(UFFDIO_REGISTER, &mut r) }
            .map_err(|e| fail(&format!("UFFDIO_REGISTER mode {mode}"), e))
    }

    /// UFFDIO_COPY of `src` (whole pages) to `dst`, waking whoever waits for them.
    fn copy(&self, dst: usize, src: &[u8]) -> std::io::Result<()> {
        let mut c = UffdioCopy {
            dst: dst as u64,
            src: src.as_ptr() as u64,
            len: src.len() as u64,
            mode: 0,
            copy: 0,
        };
        // SAFETY: `c` is the `struct uffdio_copy` that UFFDIO_COPY encodes; the kernel only
        // reads `src`, which outlives the call.
        unsafe { self.ioctl(UFFDIO_COPY, &mut c) }
    }

    /// UFFDIO_ZEROPAGE over `[start, start + len)`.
    fn zeropage(&self, start: usize, len: usize) -> Result<(), Failure> {
        let mut z = UffdioZeropage {
            range: range(start, len),
            mode: 0,
            zeropage: 0,
        };
        // SAFETY: `z` is the `struct uffdio_zeropage` that UFFDIO_ZEROPAGE encodes.
        unsafe { self.ioctl(UFFDIO_ZEROPAGE, &mut z) }.map_err(|e| fail("UFFDIO_ZEROPAGE", e))
    }

    /// UFFDIO_WRITEPROTECT of `[start, start + len)`: on, or off (waking writers).
    fn write_protect(&self, start: usize, len: usize, on: bool) -> std::io::Result<()> {
        let mut w = UffdioWriteprotect {
            range: range(start, len),
            mode: if on { UFFDIO_WRITEPROTECT_MODE_WP } else { 0 },
        };
        // SAFETY: `w` is the `struct uffdio_writeprotect` that UFFDIO_WRITEPROTECT encodes.
        unsafe { self.ioctl(UFFDIO_WRITEPROTECT, &mut w) }
    }

    /// The next page fault, if one comes within `timeout_ms`.
    fn next_fault(&self, timeout_ms: i32) -> Result<Option<Event>, Failure> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, timeout_ms) } <= 0 {
            return Ok(None);
        }
        // `struct uffd_msg`: 32 packed bytes; a page fault has its flags at 8, address at 16.
        let mut m = [0u8; 32];
        // SAFETY: reads at most `m.len()` bytes into `m`.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), m.as_mut_ptr().cast(), m.len()) };
        if n != m.len() as isize {
            return Ok(None);
        }
        if m[0] != UFFD_EVENT_PAGEFAULT {
            fail!("userfaultfd event {:#x}, expected only page faults", m[0]);
        }
        let word = |at: usize| u64::from_le_bytes(m[at..at + 8].try_into().unwrap_or_default());
        Ok(Some((word(8), word(16))))
    }
}

fn range(start: usize, len: usize) -> UffdioRange {
    UffdioRange {
        start: start as u64,
        len: len as u64,
    }
}

/// What the handler puts in a missing page at `addr`: a pattern of its page number.
fn filler(addr: u64) -> Vec<u8> {
    pattern((addr / PAGE as u64) as u8 ^ 0x3c, PAGE)
}

/// The handler thread: answers every fault it reads, as a real handler would (a missing page
/// gets [`filler`], a write-protected one loses its protection), and records it.
struct Handler {
    uffd: Arc<Uffd>,
    stop: Arc<AtomicBool>,
    events: Arc<Mutex<Vec<Event>>>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
}

impl Handler {
    fn start(uffd: Uffd) -> Self {
        let uffd = Arc::new(uffd);
        let stop = Arc::new(AtomicBool::new(false));
        let events = Arc::new(Mutex::new(Vec::new()));
        let (u, s, ev) = (uffd.clone(), stop.clone(), events.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Some((flags, addr)) = u.next_fault(20).map_err(|e| format!("{e:?}"))? else {
                    continue;
                };
                ev.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((flags, addr));
                let page = (addr as usize) & !(PAGE - 1);
                let r = if flags & UFFD_PAGEFAULT_FLAG_WP != 0 {
                    u.write_protect(page, PAGE, false)
                } else {
                    u.copy(page, &filler(page as u64))
                };
                // EEXIST: someone resolved the page meanwhile; the faulting access retries.
                if let Err(e) = r {
                    if e.raw_os_error() != Some(libc::EEXIST) {
                        return Err(format!("resolving the fault at {addr:#x}: {e}"));
                    }
                }
            }
            Ok(())
        });
        Self {
            uffd,
            stop,
            events,
            thread: Some(thread),
        }
    }

    fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stops the thread: the faults it answered, or why it failed.
    fn finish(mut self) -> Result<Vec<Event>, Failure> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join()
                .map_err(|_| Failure::Fail("the handler thread panicked".into()))?
                .map_err(Failure::Fail)?;
        }
        Ok(self.events())
    }
}

impl Drop for Handler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A CPU access from another thread to the uffd-registered page at `addr` (a read, or a write
/// of `byte`): it blocks until the handler has answered. Returns the byte read or written back.
fn cpu_touch(buf: &Arc<Buffer>, off: usize, write: Option<u8>) -> Result<u8, Failure> {
    let (tx, rx) = std::sync::mpsc::channel();
    let b = buf.clone();
    std::thread::spawn(move || {
        if let Some(v) = write {
            b.write(off, &[v]);
        }
        let _ = tx.send(b.to_vec(off, 1)[0]);
    });
    rx.recv_timeout(Duration::from_secs(30))
        .map_err(|_| Failure::Fail("the CPU access to the registered page never completed".into()))
}

/// How many of the pages of `[addr, addr + len)` are present.
fn present_pages(addr: u64, len: usize) -> Result<usize, Failure> {
    let mut n = 0;
    for p in 0..len / PAGE {
        n += usize::from(pm_present(pagemap(addr + (p * PAGE) as u64)?));
    }
    Ok(n)
}

/// Posts `wr` from `p.a`, expects exactly `status`, and (on an error) checks that only the
/// requester went to ERR and reconnects it.
fn post_expect(p: &Pair, wr: SendWr<'_>, status: WcStatus) -> TestResult {
    p.a.post(wr)?;
    let wc = p.a.wait(1)?[0];
    check_wc(&wc, status, None)?;
    if status != WcStatus::SUCCESS {
        check_eq!(p.a.state()?, QpState::Err);
        check_eq!(p.b.state()?, QpState::Rts);
        p.a.reconnect(p.b.qp.qp_num())?;
    }
    Ok(())
}

/// The device's RDMA WRITEs of every edge span into `p.b`'s buffer, now that its pages are
/// present: each lands whole, the sentinels around it untouched.
fn writes_land(p: &Pair, what: &str) -> TestResult {
    for (i, _) in EDGES.iter().enumerate() {
        let (off, len) = span(i);
        reset_sentinels(&p.b.buf);
        let want = pattern(0x40 + i as u8, len);
        p.a.buf.write(0, &want);
        p.a.post_ok(
            SendWr::new(20 + i as u64, WrOpcode::RdmaWrite, &[p.a.sge(0, len)])
                .remote(p.b.buf.addr() + off as u64, p.b.mr.rkey()),
        )?;
        check_bytes(&format!("write {i} {what}"), &p.b.buf, off, &want)?;
        check_sentinels(&format!("write {i} {what}"), &p.b.buf, off, len)?;
    }
    Ok(())
}

/// Missing mode. The target's interior pages are registered with a userfaultfd before anything
/// touched them. The device's RDMA WRITE into them and RDMA READ from them complete with
/// `REM_ACCESS_ERR`, its WRITE from a missing local source with `LOC_PROT_ERR`, the
/// registration of an ordinary MR and flushed prefetches with `EFAULT`; nothing outside
/// the transfers changes, the pages stay absent, the handler hears of none of it, and the QP
/// works again once reconnected. A CPU read of one page reaches the handler (which fills the
/// page); after UFFDIO_ZEROPAGE and UFFDIO_COPY of the rest, the same transfers move the right
/// bytes.
fn test_matrix_uffd_missing() -> TestResult {
    let p = Pair::odp(ODP_WRITE | ODP_READ, LEN)?;
    // Sentinels in the outer pages only: the interior must stay untouched until registered.
    reset_sentinels(&p.b.buf);
    let (addr, ilen) = interior(&p.b.buf);
    let uffd = Uffd::new()?;
    uffd.register(addr, ilen, UFFDIO_REGISTER_MODE_MISSING)?;
    let handler = Handler::start(uffd);
    if mem_mode()? == pfnic_verbs::MemMode::Odp {
        return uffd_missing_served(&p, handler, addr, ilen);
    }
    let u = handler.uffd.clone();

    // The device's accesses to the missing pages.
    for (i, _) in EDGES.iter().enumerate() {
        let (off, len) = span(i);
        reset_sentinels(&p.b.buf);
        p.a.buf.write(0, &pattern(i as u8, len));
        post_expect(
            &p,
            SendWr::new(i as u64, WrOpcode::RdmaWrite, &[p.a.sge(0, len)])
                .remote(p.b.buf.addr() + off as u64, p.b.mr.rkey()),
            WcStatus::REM_ACCESS_ERR,
        )?;
        check_sentinels(&format!("write {i}"), &p.b.buf, off, len)?;
    }
    p.a.buf.fill(SENTINEL);
    let (off, len) = span(1);
    post_expect(
        &p,
        SendWr::new(10, WrOpcode::RdmaRead, &[p.a.sge(off, len)])
            .remote(p.b.buf.addr() + off as u64, p.b.mr.rkey()),
        WcStatus::REM_ACCESS_ERR,
    )?;
    check_sentinels("read", &p.a.buf, off, len)?;
    // An ordinary MR is populated at registration by the device in the `sva` mode: that
    // fails the same way. (In the modes where it pins, the pinning faults the pages in as
    // the process would, which waits for the handler: not the device's access.)
    if !plain_mrs_pin()? {
        expect_errno(
            "an ordinary MR over the missing pages",
            p.b.pd.reg_mr_range(&p.b.buf, PAGE, ilen, ACCESS_ALL),
            libc::EFAULT,
        )?;
    }
    // So does a flushed prefetch of the ODP MR's pages, for reading or for writing.
    for advice in [ADVISE_PREFETCH, ADVISE_PREFETCH_WRITE] {
        expect_errno(
            &format!("advice {advice} over the missing pages"),
            p.b.pd
                .advise_mr(advice, ADVISE_FLAG_FLUSH, &[p.b.sge(PAGE, ilen)]),
            libc::EFAULT,
        )?;
    }
    let present = present_pages(addr as u64, ilen)?;
    let device_events = handler.events().len();
    outln!(
        "# missing pages: 4 RDMA WRITEs and 1 RDMA READ: REM_ACCESS_ERR, an ordinary MR \
         and two flushed prefetches: EFAULT; {present} of {} pages present after them; {device_events} userfaultfd events",
        ilen / PAGE
    );
    check_eq!(present, 0);
    check_eq!(device_events, 0);

    // The handler works: a CPU read of the first page reaches it, and it fills the page.
    let got = cpu_touch(&p.b.buf, PAGE + 5, None)?;
    let events = handler.events();
    outln!("# a CPU read of one page: events {events:x?}");
    check_eq!(events.len(), 1);
    check_eq!(events[0].1 & !(PAGE as u64 - 1), addr as u64);
    check_eq!(events[0].0 & UFFD_PAGEFAULT_FLAG_WRITE, 0);
    check_eq!(got, filler(addr as u64)[5]);

    // Resolved: the next half zero pages, the rest copied in.
    let half = (ilen / PAGE / 2) * PAGE;
    u.zeropage(addr + PAGE, half - PAGE)?;
    let copied = pattern(0x77, ilen - half);
    u.copy(addr + half, &copied)
        .map_err(|e| fail("UFFDIO_COPY", e))?;
    check_eq!(present_pages(addr as u64, ilen)?, ilen / PAGE);
    let mut want = filler(addr as u64);
    want.resize(half, 0);
    want.extend_from_slice(&copied);
    p.a.buf.fill(SENTINEL);
    p.a.post_ok(
        SendWr::new(11, WrOpcode::RdmaRead, &[p.a.sge(PAGE, ilen)])
            .remote(addr as u64, p.b.mr.rkey()),
    )?;
    check_bytes("read after UFFDIO_ZEROPAGE/COPY", &p.a.buf, PAGE, &want)?;
    check_sentinels("read after UFFDIO_ZEROPAGE/COPY", &p.a.buf, PAGE, ilen)?;
    p.b.pd
        .reg_mr_range(&p.b.buf, PAGE, ilen, ACCESS_ALL)
        .map_err(|e| fail("an ordinary MR over the resolved pages", e))?;
    writes_land(&p, "after resolving")?;

    // The local side: a WRITE whose source pages are missing fails with LOC_PROT_ERR and
    // writes nothing; once copied in, it succeeds.
    reset_sentinels(&p.b.buf);
    let before = p.b.buf.to_vec(0, LEN);
    let (src, slen) = (p.a.buf.addr() as usize + 8 * PAGE, 8 * PAGE);
    // SAFETY: drops pages of the test's own buffer, which stays mapped.
    unsafe { libc::madvise(src as *mut libc::c_void, slen, libc::MADV_DONTNEED) };
    u.register(src, slen, UFFDIO_REGISTER_MODE_MISSING)?;
    post_expect(
        &p,
        SendWr::new(30, WrOpcode::RdmaWrite, &[p.a.sge(8 * PAGE, slen)])
            .remote(addr as u64, p.b.mr.rkey()),
        WcStatus::LOC_PROT_ERR,
    )?;
    check_bytes("after the local fault", &p.b.buf, 0, &before)?;
    check_eq!(present_pages(src as u64, slen)?, 0);
    let data = pattern(0x99, slen);
    u.copy(src, &data).map_err(|e| fail("UFFDIO_COPY", e))?;
    p.a.post_ok(
        SendWr::new(31, WrOpcode::RdmaWrite, &[p.a.sge(8 * PAGE, slen)])
            .remote(addr as u64, p.b.mr.rkey()),
    )?;
    check_bytes("write from the copied source", &p.b.buf, PAGE, &data)?;
    check_bytes(
        "behind the write from the copied source",
        &p.b.buf,
        PAGE + slen,
        &before[PAGE + slen..],
    )?;

    let events = handler.finish()?;
    outln!(
        "# local source missing: LOC_PROT_ERR; {} userfaultfd events in all (the CPU read's)",
        events.len()
    );
    check_eq!(events.len(), 1);
    Ok(())
}

/// Fails unless `events` are one fault for each page of `[addr, addr + len)` (a fault may be
/// reported again while the handler answers the first), each with exactly `flags` of
/// `UFFD_PAGEFAULT_FLAG_WP | UFFD_PAGEFAULT_FLAG_WRITE`.
fn check_served(events: &[Event], addr: usize, len: usize, flags: u64) -> TestResult {
    let mut pages = std::collections::BTreeSet::new();
    for &(f, at) in events {
        check!(
            (addr as u64..(addr + len) as u64).contains(&at),
            "a userfaultfd event at {at:#x}, outside the registered {addr:#x}+{len:#x}"
        );
        check_eq!(
            f & (UFFD_PAGEFAULT_FLAG_WP | UFFD_PAGEFAULT_FLAG_WRITE),
            flags
        );
        pages.insert(at / PAGE as u64);
    }
    check_eq!(pages.len(), len / PAGE);
    Ok(())
}

/// Missing mode in the `odp` mode: the device's RDMA READ of the missing pages reaches the
/// handler (read faults), which fills them, and returns what it filled them with; its RDMA
/// WRITEs over them then need nothing more; its WRITE from a missing local source reaches the
/// handler too (the source's ODP MR) and moves what the handler put there.
fn uffd_missing_served(p: &Pair, handler: Handler, addr: usize, ilen: usize) -> TestResult {
    let u = handler.uffd.clone();
    let (off, len) = span(1);
    p.a.buf.fill(SENTINEL);
    p.a.post_ok(
        SendWr::new(10, WrOpcode::RdmaRead, &[p.a.sge(off, len)])
            .remote(p.b.buf.addr() + off as u64, p.b.mr.rkey()),
    )?;
    let mut want = vec![SENTINEL; PAGE - off];
    for pg in 0..ilen / PAGE {
        want.extend_from_slice(&filler((addr + pg * PAGE) as u64));
    }
    want.resize(len, SENTINEL);
    check_bytes("read of the missing pages", &p.a.buf, off, &want)?;
    check_sentinels("read of the missing pages", &p.a.buf, off, len)?;
    let events = handler.events();
    outln!(
        "# missing pages, odp mode: RDMA READ ok after {} userfaultfd events, {} of {} pages \
         present",
        events.len(),
        present_pages(addr as u64, ilen)?,
        ilen / PAGE
    );
    check_served(&events, addr, ilen, 0)?;
    check_eq!(present_pages(addr as u64, ilen)?, ilen / PAGE);
    writes_land(p, "over the served pages")?;
    check_eq!(handler.events().len(), events.len());

    // The local side: the source pages are missing; the device's read of them reaches the
    // handler through the source's ODP MR, and the write moves what the handler put there.
    let (src, slen) = (p.a.buf.addr() as usize + 8 * PAGE, 8 * PAGE);
    // SAFETY: drops pages of the test's own buffer, which stays mapped.
    unsafe { libc::madvise(src as *mut libc::c_void, slen, libc::MADV_DONTNEED) };
    u.register(src, slen, UFFDIO_REGISTER_MODE_MISSING)?;
    p.a.post_ok(
        SendWr::new(31, WrOpcode::RdmaWrite, &[p.a.sge(8 * PAGE, slen)])
            .remote(addr as u64, p.b.mr.rkey()),
    )?;
    let mut want = Vec::new();
    for pg in 0..slen / PAGE {
        want.extend_from_slice(&filler((src + pg * PAGE) as u64));
    }
    check_bytes("write from the missing source", &p.b.buf, PAGE, &want)?;
    let all = handler.finish()?;
    check_served(&all[events.len()..], src, slen, 0)?;
    outln!(
        "# local source missing, odp mode: the write moved what the handler filled in after {} \
         events",
        all.len() - events.len()
    );
    Ok(())
}

/// Write-protect mode. The target's interior pages, populated and already written by the
/// device once (so its translations were writable), are write-protected through the
/// userfaultfd: the device's RDMA WRITEs complete with `REM_ACCESS_ERR` and change none of
/// their bytes, its RDMA READ of them succeeds, the handler hears of none of it. A CPU write
/// reaches the handler (which lifts the protection of that page). Once UFFDIO_WRITEPROTECT
/// lifts it everywhere the write succeeds; protected again, the device is refused again.
fn test_matrix_uffd_wp() -> TestResult {
    let p = Pair::odp(ODP_WRITE | ODP_READ, LEN)?;
    p.b.buf.fill(SENTINEL);
    let (addr, ilen) = interior(&p.b.buf);
    let write = |seed: u8, i: usize, status: WcStatus| -> TestResult {
        let (off, len) = span(i);
        reset_sentinels(&p.b.buf);
        let before = p.b.buf.to_vec(0, LEN);
        let want = pattern(seed, len);
        p.a.buf.write(0, &want);
        post_expect(
            &p,
            SendWr::new(u64::from(seed), WrOpcode::RdmaWrite, &[p.a.sge(0, len)])
                .remote(p.b.buf.addr() + off as u64, p.b.mr.rkey()),
            status,
        )?;
        let what = format!("write {seed:#x} ({status:?})");
        check_sentinels(&what, &p.b.buf, off, len)?;
        if status == WcStatus::SUCCESS {
            check_bytes(&what, &p.b.buf, off, &want)
        } else {
            check_bytes(&what, &p.b.buf, PAGE, &before[PAGE..LEN - PAGE])
        }
    };
    // An RDMA READ of protected pages needs no write access: it moves the bytes as they are.
    let read_protected = || -> TestResult {
        let (off, len) = span(2);
        let want = p.b.buf.to_vec(off, len);
        p.a.buf.fill(SENTINEL);
        p.a.post_ok(
            SendWr::new(0x30, WrOpcode::RdmaRead, &[p.a.sge(off, len)])
                .remote(p.b.buf.addr() + off as u64, p.b.mr.rkey()),
        )?;
        check_bytes("read of protected pages", &p.a.buf, off, &want)?;
        check_sentinels("read of protected pages", &p.a.buf, off, len)
    };
    let wp_pages = || -> Result<usize, Failure> {
        let mut n = 0;
        for pg in 0..ilen / PAGE {
            n += usize::from(pagemap((addr + pg * PAGE) as u64)? >> 57 & 1 == 1);
        }
        Ok(n)
    };
    // The device's translations of the interior are writable now.
    write(0x10, 0, WcStatus::SUCCESS)?;

    let uffd = Uffd::new()?;
    uffd.register(addr, ilen, UFFDIO_REGISTER_MODE_WP)?;
    uffd.write_protect(addr, ilen, true)
        .map_err(|e| fail("UFFDIO_WRITEPROTECT", e))?;
    let handler = Handler::start(uffd);
    let u = handler.uffd.clone();
    check_eq!(wp_pages()?, ilen / PAGE);
    if mem_mode()? == pfnic_verbs::MemMode::Odp {
        // The device's write reaches the handler, page by page, which lifts the protection.
        write(0x20, 0, WcStatus::SUCCESS)?;
        let events = handler.events();
        outln!(
            "# protected pages, odp mode: RDMA WRITE ok after {} userfaultfd events; {} of {} \
             pages still protected",
            events.len(),
            wp_pages()?,
            ilen / PAGE
        );
        check_served(
            &events,
            addr,
            ilen,
            UFFD_PAGEFAULT_FLAG_WP | UFFD_PAGEFAULT_FLAG_WRITE,
        )?;
        check_eq!(wp_pages()?, 0);
        // Protected again: a read reaches nothing.
        u.write_protect(addr, ilen, true)
            .map_err(|e| fail("UFFDIO_WRITEPROTECT on again", e))?;
        read_protected()?;
        check_eq!(handler.finish()?.len(), events.len());
        return Ok(());
    }
    for (i, _) in EDGES.iter().enumerate() {
        write(0x20 + i as u8, i, WcStatus::REM_ACCESS_ERR)?;
    }
    read_protected()?;
    let device_events = handler.events().len();
    let still = wp_pages()?;
    outln!(
        "# protected pages: 4 RDMA WRITEs REM_ACCESS_ERR, their bytes unchanged, RDMA READ ok; \
         {still} of {} pages still protected; {device_events} userfaultfd events",
        ilen / PAGE
    );
    check_eq!(still, ilen / PAGE);
    check_eq!(device_events, 0);

    // The handler works: a CPU write of the first page reaches it, and it lifts the protection.
    check_eq!(cpu_touch(&p.b.buf, PAGE + 3, Some(0x5a))?, 0x5a);
    let events = handler.events();
    outln!("# a CPU write of one page: events {events:x?}");
    check_eq!(events.len(), 1);
    check_eq!(events[0].1 & !(PAGE as u64 - 1), addr as u64);
    check_eq!(
        events[0].0 & (UFFD_PAGEFAULT_FLAG_WP | UFFD_PAGEFAULT_FLAG_WRITE),
        UFFD_PAGEFAULT_FLAG_WP | UFFD_PAGEFAULT_FLAG_WRITE
    );
    check_eq!(wp_pages()?, ilen / PAGE - 1);

    // Unprotected: the device writes. Protected again: refused again.
    u.write_protect(addr, ilen, false)
        .map_err(|e| fail("UFFDIO_WRITEPROTECT off", e))?;
    write(0x40, 1, WcStatus::SUCCESS)?;
    u.write_protect(addr, ilen, true)
        .map_err(|e| fail("UFFDIO_WRITEPROTECT on again", e))?;
    write(0x50, 3, WcStatus::REM_ACCESS_ERR)?;
    u.write_protect(addr, ilen, false)
        .map_err(|e| fail("UFFDIO_WRITEPROTECT off again", e))?;
    write(0x60, 0, WcStatus::SUCCESS)?;
    let events = handler.finish()?;
    check_eq!(events.len(), 1);
    outln!("# protection lifted: write ok; protected again: REM_ACCESS_ERR; lifted: ok");
    Ok(())
}
