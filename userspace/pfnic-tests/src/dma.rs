//! DMA in process memory that nobody pinned: the device faults pages in through PRI.

use crate::common::{
    dmesg, ensure_swap, in_child, meminfo_kb, page_out, resident_pages, sva_nic, vm_pinned_kb,
    Child,
};
use crate::ktap::{Failure, Test, TestResult};
use pfnic_cli::outln;
use pfnic_sys::{uapi, Device, Submit};

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_fill_untouched_memory",
        run: test_fill_untouched_memory,
    },
    &Test {
        name: "test_copy_compare_beyond_atc",
        run: test_copy_compare_beyond_atc,
    },
    &Test {
        name: "test_dontneed_refaults",
        run: test_dontneed_refaults,
    },
    &Test {
        name: "test_protection_faults",
        run: test_protection_faults,
    },
    &Test {
        name: "test_swapped_out_memory",
        run: test_swapped_out_memory,
    },
    &Test {
        name: "test_overcommit_sparse",
        run: test_overcommit_sparse,
    },
    &Test {
        name: "test_processes_isolated",
        run: test_processes_isolated,
    },
    &Test {
        name: "test_killed_during_dma",
        run: test_killed_during_dma,
    },
    &Test {
        name: "test_submit_bad_args",
        run: test_submit_bad_args,
    },
    &Test {
        name: "test_faults_not_logged_as_dmar_faults",
        run: test_faults_not_logged_as_dmar_faults,
    },
    &Test {
        name: "test_fault_latency_histogram",
        run: test_fault_latency_histogram,
    },
    &Test {
        name: "test_stats_per_context_and_debugfs",
        run: test_stats_per_context_and_debugfs,
    },
];

const PAGE: usize = 4096;

/// An anonymous private mapping, unmapped when dropped.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> Result<Self, Failure> {
        Self::with_flags(len, 0)
    }

    /// A mapping that reserves no memory or swap up front (may exceed both).
    fn sparse(len: usize) -> Result<Self, Failure> {
        Self::with_flags(len, libc::MAP_NORESERVE)
    }

    fn with_flags(len: usize, flags: libc::c_int) -> Result<Self, Failure> {
        // SAFETY: a fresh anonymous mapping; nothing else refers to it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            fail!("mmap {len}: {}", std::io::Error::last_os_error());
        }
        Ok(Self {
            ptr: ptr.cast(),
            len,
        })
    }

    fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// The memory as the CPU sees it. Reading it faults pages in, so tests only look after the
    /// device is done.
    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes while `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `bytes`, and `&mut self` makes this the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    fn advise(&self, advice: libc::c_int) -> TestResult {
        // SAFETY: advice on our own mapping.
        if unsafe { libc::madvise(self.ptr.cast(), self.len, advice) } != 0 {
            fail!("madvise {advice}: {}", std::io::Error::last_os_error());
        }
        Ok(())
    }

    fn protect(&self, prot: libc::c_int) -> TestResult {
        // SAFETY: changes the protection of our own mapping.
        if unsafe { libc::mprotect(self.ptr.cast(), self.len, prot) } != 0 {
            fail!("mprotect: {}", std::io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps what `new` mapped.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

fn op(opcode: u32, src: u64, dst: u64, len: usize, pattern: u64) -> Submit {
    Submit {
        opcode,
        src,
        dst,
        len: len as u64,
        pattern,
        ..Default::default()
    }
}

fn run(dev: &Device, mut s: Submit) -> Result<Submit, Failure> {
    dev.submit(&mut s)
        .map_err(|e| Failure::Fail(format!("submit op {}: {e}", s.opcode)))?;
    Ok(s)
}

/// The device writes into memory the CPU never touched: every page comes from a page request,
/// the data is right, and nothing is pinned.
fn test_fill_untouched_memory() -> TestResult {
    let n = sva_nic()?;
    let before = n.dev.query_stats()?;
    let m = Mapping::new(16 * PAGE)?;
    let pattern = 0x0123_4567_89ab_cdef_u64;
    let r = run(&n.dev, op(uapi::PFNIC_OP_FILL, 0, m.addr(), m.len, pattern))?;
    check_eq!(r.status, uapi::PFNIC_STATUS_SUCCESS);
    check_eq!(r.result, m.len as u64);
    check!(
        r.page_requests >= 16,
        "only {} page requests for 16 untouched pages",
        r.page_requests
    );
    check_eq!(vm_pinned_kb()?, 0);
    let after = n.dev.query_stats()?;
    check!(
        after.translation.page_requests >= before.translation.page_requests + 16,
        "device counted no page requests"
    );
    check!(
        after.translation.pri_success >= before.translation.pri_success + 16,
        "no successful page responses counted"
    );
    let want = pattern.to_le_bytes();
    if let Some(i) = m
        .bytes()
        .iter()
        .enumerate()
        .position(|(i, b)| *b != want[i % 8])
    {
        fail!(
            "byte {i} is {:#x}, expected {:#x}",
            m.bytes()[i],
            want[i % 8]
        );
    }
    outln!(
        "# fill of 16 untouched pages: {} page requests, {} us",
        r.page_requests,
        r.latency_ns / 1000
    );
    // Nothing holds the pages: the kernel can reclaim every one of them (a pinned page could
    // not be swapped out).
    ensure_swap()?;
    page_out(m.ptr as usize, m.len)?;
    Ok(())
}

/// The device reads what the CPU wrote; copy and compare work over more pages than the ATC
/// holds; compare finds a planted difference.
fn test_copy_compare_beyond_atc() -> TestResult {
    let n = sva_nic()?;
    let len = 1 << 20;
    let (mut src, mut dst) = (Mapping::new(len)?, Mapping::new(len)?);
    for (i, b) in src.bytes_mut().iter_mut().enumerate() {
        *b = (i * 7 + i / 4096) as u8;
    }
    let before = n.dev.query_stats()?;
    let r = run(
        &n.dev,
        op(uapi::PFNIC_OP_COPY, src.addr(), dst.addr(), len, 0),
    )?;
    check_eq!(r.status, uapi::PFNIC_STATUS_SUCCESS);
    check!(
        dst.bytes() == src.bytes(),
        "the copy differs from the source"
    );
    let c = run(
        &n.dev,
        op(uapi::PFNIC_OP_COMPARE, src.addr(), dst.addr(), len, 0),
    )?;
    check_eq!(
        (c.status, c.result),
        (uapi::PFNIC_STATUS_SUCCESS, len as u64)
    );
    let after = n.dev.query_stats()?;
    let (hits, misses) = (
        after.translation.atc_hits - before.translation.atc_hits,
        after.translation.atc_misses - before.translation.atc_misses,
    );
    outln!(
        "# copy+compare of 1 MiB: ATC hits {hits}, misses {misses} (hit ratio {:.2}), {} page requests",
        f64::from(hits) / f64::from((hits + misses).max(1)),
        r.page_requests + c.page_requests
    );
    dst.bytes_mut()[777_777] ^= 0x5a;
    let c = run(
        &n.dev,
        op(uapi::PFNIC_OP_COMPARE, src.addr(), dst.addr(), len, 0),
    )?;
    check_eq!((c.status, c.result), (uapi::PFNIC_STATUS_MISMATCH, 777_777));
    Ok(())
}

/// After MADV_DONTNEED the device does not use stale translations: it faults again and reads
/// the zero pages the process would see.
fn test_dontneed_refaults() -> TestResult {
    let n = sva_nic()?;
    let len = 8 * PAGE;
    let (buf, out) = (Mapping::new(len)?, Mapping::new(len)?);
    let r = run(
        &n.dev,
        op(uapi::PFNIC_OP_FILL, 0, buf.addr(), len, u64::MAX),
    )?;
    check_eq!(r.status, uapi::PFNIC_STATUS_SUCCESS);
    // Warm the ATC with the device reading the buffer.
    let c = run(
        &n.dev,
        op(uapi::PFNIC_OP_COPY, buf.addr(), out.addr(), len, 0),
    )?;
    check_eq!(c.status, uapi::PFNIC_STATUS_SUCCESS);
    check!(
        out.bytes().iter().all(|b| *b == 0xff),
        "the first copy is wrong"
    );
    let before = n.dev.query_stats()?;
    buf.advise(libc::MADV_DONTNEED)?;
    let after_advice = n.dev.query_stats()?;
    check!(
        after_advice.translation.invalidations > before.translation.invalidations,
        "MADV_DONTNEED caused no device-IOTLB invalidation"
    );
    let c = run(
        &n.dev,
        op(uapi::PFNIC_OP_COPY, buf.addr(), out.addr(), len, 0),
    )?;
    check_eq!(c.status, uapi::PFNIC_STATUS_SUCCESS);
    check!(c.page_requests > 0, "no page request after MADV_DONTNEED");
    check!(
        out.bytes().iter().all(|b| *b == 0),
        "the device read stale data after MADV_DONTNEED"
    );
    Ok(())
}

/// Writes to read-only, PROT_NONE or unmapped memory fail with PAGE_FAULT, change nothing, and
/// the context keeps working.
fn test_protection_faults() -> TestResult {
    let n = sva_nic()?;
    let len = 4 * PAGE;
    let mut ro = Mapping::new(len)?;
    ro.bytes_mut().fill(0x11);
    ro.protect(libc::PROT_READ)?;
    let r = run(&n.dev, op(uapi::PFNIC_OP_FILL, 0, ro.addr(), len, 0))?;
    check_eq!(r.status, uapi::PFNIC_STATUS_PAGE_FAULT);
    check!(
        ro.bytes().iter().all(|b| *b == 0x11),
        "read-only memory changed"
    );

    let none = Mapping::new(len)?;
    none.protect(libc::PROT_NONE)?;
    let r = run(&n.dev, op(uapi::PFNIC_OP_FILL, 0, none.addr(), len, 0))?;
    check_eq!(r.status, uapi::PFNIC_STATUS_PAGE_FAULT);

    let gone = Mapping::new(len)?;
    let addr = gone.addr();
    drop(gone);
    let r = run(&n.dev, op(uapi::PFNIC_OP_FILL, 0, addr, len, 0))?;
    check_eq!(r.status, uapi::PFNIC_STATUS_PAGE_FAULT);
    // Reading the read-only memory is fine.
    let out = Mapping::new(len)?;
    let r = run(
        &n.dev,
        op(uapi::PFNIC_OP_COPY, ro.addr(), out.addr(), len, 0),
    )?;
    check_eq!(r.status, uapi::PFNIC_STATUS_SUCCESS);
    check!(
        out.bytes().iter().all(|b| *b == 0x11),
        "copy from read-only memory is wrong"
    );
    Ok(())
}

fn test_submit_bad_args() -> TestResult {
    let n = sva_nic()?;
    let m = Mapping::new(PAGE)?;
    let cases = [
        ("opcode 0", op(0, 0, m.addr(), PAGE, 0)),
        ("opcode 9", op(9, 0, m.addr(), PAGE, 0)),
        (
            "flags",
            Submit {
                flags: 1,
                ..op(uapi::PFNIC_OP_FILL, 0, m.addr(), PAGE, 0)
            },
        ),
        (
            "len > 1 GiB",
            op(uapi::PFNIC_OP_FILL, 0, m.addr(), (1 << 30) + 1, 0),
        ),
    ];
    for (what, mut s) in cases {
        match n.dev.submit(&mut s) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            other => fail!("{what}: {other:?}, expected EINVAL"),
        }
    }
    // A fork child cannot submit on its parent's context.
    let dev = &n.dev;
    let addr = m.addr();
    let rc = in_child(|| {
        let mut s = op(uapi::PFNIC_OP_FILL, 0, addr, PAGE, 0);
        match dev.submit(&mut s) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => 0,
            _ => 1,
        }
    })?;
    check!(rc == 0, "fork child could submit");
    Ok(())
}

/// The page faults of the tests above are the device's normal operation: the IOMMU must not
/// record them as DMAR faults (the guest would log one per page, and real faults would drown).
fn test_faults_not_logged_as_dmar_faults() -> TestResult {
    let n = sva_nic()?;
    check!(
        n.dev.query_stats()?.translation.page_requests > 0,
        "no page request happened before this test"
    );
    if let Some(line) = dmesg()?.lines().find(|l| l.contains("DMAR: [DMA")) {
        fail!("the IOMMU recorded a fault: {line}");
    }
    Ok(())
}

/// Every page request response is timed; prints the median and p99 round trip.
fn test_fault_latency_histogram() -> TestResult {
    let n = sva_nic()?;
    let st = n.dev.query_stats()?;
    let hist = st.fault_latency_us_log2;
    let total: u64 = hist.iter().map(|&c| u64::from(c)).sum();
    check!(total > 0, "no page request was timed");
    // One response per page request group, timed when its waiter is still there; the
    // responses count the group's pages.
    let (groups, pages) = (
        u64::from(st.translation.page_request_groups),
        u64::from(st.translation.pri_success) + u64::from(st.translation.pri_failed),
    );
    check!(
        total <= groups && groups <= pages,
        "{total} timed responses, {groups} groups sent, {pages} pages answered"
    );
    // The upper bound of the bucket that holds the given fraction of the round trips.
    let bound = |fraction: f64| -> u64 {
        let want = (total as f64 * fraction).ceil() as u64;
        let mut seen = 0;
        for (i, &c) in hist.iter().enumerate() {
            seen += u64::from(c);
            if seen >= want {
                return 1 << (i + 1);
            }
        }
        1 << hist.len()
    };
    outln!(
        "# page request round trip over {total} faults: median < {} us, p99 < {} us",
        bound(0.5),
        bound(0.99)
    );
    Ok(())
}

/// Memory pushed out to swap (zram) comes back through page requests when the device reads it.
fn test_swapped_out_memory() -> TestResult {
    let n = sva_nic()?;
    ensure_swap()?;
    let len = 32 * PAGE;
    let (mut buf, out) = (Mapping::new(len)?, Mapping::new(len)?);
    for (i, b) in buf.bytes_mut().iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let before = n.dev.query_stats()?;
    buf.advise(libc::MADV_PAGEOUT)?;
    let resident = resident_pages(buf.ptr as usize, buf.len)?;
    check!(
        resident < 32,
        "MADV_PAGEOUT swapped nothing out ({resident}/32 pages resident)"
    );
    let r = run(
        &n.dev,
        op(uapi::PFNIC_OP_COPY, buf.addr(), out.addr(), len, 0),
    )?;
    check_eq!(r.status, uapi::PFNIC_STATUS_SUCCESS);
    check!(
        r.page_requests as usize >= 32 - resident,
        "{} page requests for {} swapped-out pages",
        r.page_requests,
        32 - resident
    );
    check!(
        n.dev.query_stats()?.translation.invalidations > before.translation.invalidations,
        "page-out invalidated nothing"
    );
    check!(
        out.bytes() == buf.bytes(),
        "data read back from swap differs"
    );
    Ok(())
}

/// A mapping larger than the guest's RAM and swap together, which no amount of pinning could
/// hold, is usable by the device wherever it touches it.
fn test_overcommit_sparse() -> TestResult {
    let n = sva_nic()?;
    let limit = (meminfo_kb("MemTotal:")? + meminfo_kb("SwapTotal:")?) * 1024;
    let len = (limit as usize + (1 << 30)).next_multiple_of(1 << 28);
    let m = Mapping::sparse(len)?;
    let stride = 1 << 28;
    for (i, off) in (0..len).step_by(stride).enumerate() {
        let pattern = 0x1111_1111_1111_1111_u64.wrapping_mul(i as u64 + 1);
        let r = run(
            &n.dev,
            op(uapi::PFNIC_OP_FILL, 0, m.addr() + off as u64, PAGE, pattern),
        )?;
        check_eq!(r.status, uapi::PFNIC_STATUS_SUCCESS);
        check_eq!(m.bytes()[off + 8..off + 16], pattern.to_le_bytes());
    }
    outln!(
        "# overcommit: {} MiB mapping over {} MiB of RAM+swap, {} pages used by the device",
        len >> 20,
        limit >> 20,
        len / stride
    );
    Ok(())
}

/// Another process reaches only its own memory, whatever address it names: after fork the
/// parent writes a secret, and the child's device operations at the same addresses see and
/// change only the child's copy.
fn test_processes_isolated() -> TestResult {
    let n = sva_nic()?;
    let mut secret = Mapping::new(PAGE)?;
    secret.bytes_mut().fill(0x00);
    let path = n.dev.path().to_path_buf();
    let addr = secret.addr();
    let mut fds = [0; 2];
    // SAFETY: a pipe to hold the child until the parent has written the secret.
    check!(unsafe { libc::pipe(fds.as_mut_ptr()) } == 0, "pipe failed");
    let child = Child::spawn(|| {
        let mut byte = 0u8;
        // SAFETY: reads one byte from the pipe.
        unsafe { libc::read(fds[0], (&raw mut byte).cast(), 1) };
        (|| -> Result<i32, std::io::Error> {
            let dev = Device::open(&path)?;
            let out = Mapping::new(PAGE).map_err(|_| std::io::Error::other("mmap"))?;
            let mut s = op(uapi::PFNIC_OP_COPY, addr, out.addr(), PAGE, 0);
            dev.submit(&mut s)?;
            if s.status != uapi::PFNIC_STATUS_SUCCESS || out.bytes().contains(&0x5e) {
                return Ok(1); // read the parent's secret
            }
            let mut s = op(uapi::PFNIC_OP_FILL, 0, addr, PAGE, u64::MAX);
            dev.submit(&mut s)?;
            Ok(if s.status == uapi::PFNIC_STATUS_SUCCESS {
                0
            } else {
                2
            })
        })()
        .unwrap_or(3)
    })?;
    secret.bytes_mut().fill(0x5e);
    // SAFETY: releases the child.
    unsafe { libc::write(fds[1], [1u8].as_ptr().cast(), 1) };
    let code = child.wait()?;
    check!(
        code == 0,
        "child: status {code} (1: it read the parent's secret, 2: its own fill failed)"
    );
    check!(
        secret.bytes().iter().all(|b| *b == 0x5e),
        "the child's device write reached the parent"
    );
    Ok(())
}

/// A process killed while the device works in its memory, with page requests outstanding:
/// the kill takes effect at once, the context is stopped and freed, and the device serves
/// others. Repeated, since every round takes a new context and PASID.
fn test_killed_during_dma() -> TestResult {
    let n = sva_nic()?;
    let path = n.dev.path().to_path_buf();
    for round in 0..5 {
        let before = n.dev.query_stats()?;
        let p = path.clone();
        let mut child = Child::spawn(move || {
            let len = 256 << 20;
            (|| -> Option<()> {
                let dev = Device::open(&p).ok()?;
                let m = Mapping::sparse(len).ok()?;
                let mut s = op(uapi::PFNIC_OP_FILL, 0, m.addr(), len, 7);
                dev.submit(&mut s).ok()
            })()
            .map_or(1, |()| 0)
        })?;
        // Kill it once the device is faulting pages in for it (page requests outstanding).
        for _ in 0..100 {
            if n.dev.query_stats()?.translation.page_requests
                > before.translation.page_requests + 10
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        if child.try_wait()?.is_some() {
            fail!("round {round}: the child finished before it could be killed");
        }
        let started = std::time::Instant::now();
        child.kill();
        let code = child.wait()?;
        check!(
            code == 128 + libc::SIGKILL,
            "round {round}: the child was not killed (status {code})"
        );
        check!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "round {round}: the kill took {:?}",
            started.elapsed()
        );
        let after = n.dev.query_stats()?;
        check!(
            after.translation.page_requests > before.translation.page_requests,
            "round {round}: the child never faulted"
        );
        check_eq!(after.contexts_active, before.contexts_active);
        // Stopped by the exit, or by the close when the IOMMU's fault worker still held the
        // address space then: either way once, and freed.
        check!(
            after.contexts_stopped_by_exit <= before.contexts_stopped_by_exit + 1,
            "round {round}: stopped by exit {} times",
            after.contexts_stopped_by_exit - before.contexts_stopped_by_exit
        );
        let m = Mapping::new(PAGE)?;
        let r = run(&n.dev, op(uapi::PFNIC_OP_FILL, 0, m.addr(), PAGE, 3))?;
        check_eq!(r.status, uapi::PFNIC_STATUS_SUCCESS);
    }
    Ok(())
}

/// A context's own counters follow its operations, and debugfs shows device and context
/// statistics.
fn test_stats_per_context_and_debugfs() -> TestResult {
    let _ = sva_nic()?;
    // A fresh file: a fresh context whose counters start at zero.
    let dev = Device::open(pfnic_sys::devices()?.first().ok_or("no /dev/pfnicN")?)?;
    let c0 = dev.query_context()?;
    check_eq!(
        (
            c0.translation.page_requests,
            c0.translation.pri_success,
            c0.translation.atc_hits,
            c0.translation.atc_misses
        ),
        (0, 0, 0, 0)
    );
    let m = Mapping::new(8 * PAGE)?;
    let r = run(&dev, op(uapi::PFNIC_OP_FILL, 0, m.addr(), 8 * PAGE, 1))?;
    check_eq!(r.status, uapi::PFNIC_STATUS_SUCCESS);
    let c1 = dev.query_context()?;
    check_eq!(c1.translation.page_requests, r.page_requests);
    check_eq!(c1.translation.pri_success, r.page_requests);
    // The page request group's probe and the refill after its response translate the 8
    // pages in ranges: fewer ATS requests than pages, the rest served by the ATC.
    check!(
        (1..8).contains(&c1.translation.atc_misses) && c1.translation.atc_hits >= 5,
        "{} ATS requests and {} ATC hits for 8 cold pages",
        c1.translation.atc_misses,
        c1.translation.atc_hits
    );

    let text = std::fs::read_to_string("/sys/kernel/debug/pfnic0/stats")?;
    for key in [
        "contexts_active ",
        "page_requests ",
        "atc_hits ",
        "fault_latency_us_log2 ",
    ] {
        check!(
            text.lines().any(|l| l.starts_with(key)),
            "debugfs stats lack {key:?}"
        );
    }
    let mine = format!(
        "context {} pasid {} page_requests {} pri_success {} ",
        c1.context, c1.pasid, c1.translation.page_requests, c1.translation.pri_success
    );
    check!(
        text.lines().any(|l| l.starts_with(&mine)),
        "debugfs has no line {mine:?}:\n{text}"
    );
    Ok(())
}
