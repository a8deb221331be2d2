//! The device's page fault path under load (docs/registers.md, "Page request groups"): the
//! groups of one work request all out at once, look-ahead over the work requests posted
//! after one that waits, a failed group failing only the work that needs its pages, and a
//! small PRI allocation that holds requests back without losing any.

use crate::ibv_common::*;
use crate::ktap::{Failure, Test, TestResult};
use crate::verbs_common::{fail, ACCESS_ALL, PAGE};
use ibv::{SendWr, Sge, WcStatus, WrOpcode, ACCESS_ON_DEMAND};
use pfnic_cli::outln;

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_fault_path_groups_in_flight",
        run: test_fault_path_groups_in_flight,
    },
    &Test {
        name: "test_fault_path_lookahead",
        run: test_fault_path_lookahead,
    },
    &Test {
        name: "test_fault_path_lookahead_failure_fails_nothing",
        run: test_fault_path_lookahead_failure_fails_nothing,
    },
    &Test {
        name: "test_fault_path_failed_group_fails_only_its_work",
        run: test_fault_path_failed_group_fails_only_its_work,
    },
    &Test {
        name: "test_fault_path_small_pri_allocation",
        run: test_fault_path_small_pri_allocation,
    },
];

/// A pair with ODP MRs for RDMA WRITEs over buffers of base pages only. These tests count
/// page requests: with transparent huge pages (the guest's default), one fault may bring in
/// up to 2 MiB, and khugepaged may collapse a dropped buffer back in before the device
/// touches it (a run saw 256 dropped pages translated without a single page request).
fn cold_pair(len: usize) -> Result<Pair, Failure> {
    let p = Pair::odp(ODP_WRITE, len)?;
    for buf in [&p.a.buf, &p.b.buf] {
        buf.madvise(libc::MADV_NOHUGEPAGE)?;
    }
    Ok(p)
}

/// An RDMA WRITE of `len` bytes at `off` of `a`'s buffer to the same offset of `b`'s.
fn write_wr<'a>(p: &Pair, wr_id: u64, sge: &'a [Sge], off: usize) -> SendWr<'a> {
    SendWr::new(wr_id, WrOpcode::RdmaWrite, sge).remote(p.b.buf.addr() + off as u64, p.b.mr.rkey())
}

/// A cold 1 MiB RDMA WRITE: the 256 target pages go out as 4 groups at once, not one group at
/// a time (the target context's `page_request_groups_max`), and arrive whole.
fn test_fault_path_groups_in_flight() -> TestResult {
    const LEN: usize = 256 * PAGE;
    let p = cold_pair(LEN)?;
    let data = pattern(0x31, LEN);
    p.b.buf.dontneed()?;
    p.a.buf.write(0, &data);
    // The target's faults count for its context (its PASID's page requests).
    let target = CtxDetails::of(&p.b.ctx)?;
    let before = target.translation()?;
    let sge = [p.a.sge(0, LEN)];
    check_wc(
        &p.a.post_ok(write_wr(&p, 1, &sge, 0))?,
        WcStatus::SUCCESS,
        None,
    )?;
    check_bytes("the cold 1 MiB WRITE", &p.b.buf, 0, &data)?;
    let t = target.translation()?;
    outln!(
        "# {} page requests in {} groups, at most {} out at once",
        t.page_requests - before.page_requests,
        t.page_request_groups - before.page_request_groups,
        t.page_request_groups_max
    );
    check!(
        t.page_request_groups_max >= 4,
        "256 cold pages, at most {} groups out at once: {t:?}",
        t.page_request_groups_max
    );
    Ok(())
}

/// Four cold 64 KiB RDMA WRITEs posted with one doorbell: while the first waits for its pages,
/// the device asks for the pages of the three after it. They start with their pages asked for
/// already, so they send no page request of their own (their completions' `vendor_err`), the
/// context counts 48 look-ahead pages, all used, and every byte arrives.
fn test_fault_path_lookahead() -> TestResult {
    const N: usize = 4;
    const CHUNK: usize = 16 * PAGE;
    let p = cold_pair(N * CHUNK)?;
    let data = pattern(0x42, N * CHUNK);
    p.b.buf.dontneed()?;
    p.a.buf.write(0, &data);
    let requester = CtxDetails::of(&p.a.ctx)?;
    let before = requester.translation()?;
    let sges: Vec<_> = (0..N).map(|i| [p.a.sge(i * CHUNK, CHUNK)]).collect();
    let wrs: Vec<_> = (0..N)
        .map(|i| write_wr(&p, i as u64, &sges[i], i * CHUNK))
        .collect();
    p.a.qp
        .post_send(&wrs)
        .map_err(|e| fail("post_send of 4 WRITEs", e))?;
    let wcs = wait_cq(&p.a.cq, N)?;
    for wc in &wcs {
        check_wc(wc, WcStatus::SUCCESS, None)?;
    }
    check_bytes("four cold WRITEs", &p.b.buf, 0, &data)?;
    let t = requester.translation()?;
    let (ahead, used, wasted) = (
        t.lookahead_pages - before.lookahead_pages,
        t.lookahead_used - before.lookahead_used,
        t.lookahead_wasted - before.lookahead_wasted,
    );
    let own: Vec<u32> = wcs.iter().map(|wc| wc.vendor_err).collect();
    outln!("# page requests of each WRITE's own: {own:?}; look-ahead {ahead} pages, {used} used, {wasted} wasted");
    check_eq!(own[0], 16);
    check!(
        own[1..].iter().all(|&n| n == 0),
        "the WRITEs after the first asked for pages themselves: {own:?}"
    );
    check_eq!((ahead, used, wasted), (48, 48, 0));
    Ok(())
}

/// Memory of the address space that no access may reach (`PROT_NONE`): the OS answers a
/// page request for it with a failure. Kept reserved until dropped, so nothing else is
/// mapped there meanwhile.
struct NoAccess {
    ptr: *mut libc::c_void,
    len: usize,
}

impl NoAccess {
    fn new(len: usize) -> Result<Self, Failure> {
        // SAFETY: a fresh anonymous mapping that nothing else refers to.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            fail!("mmap {len}: {}", std::io::Error::last_os_error());
        }
        Ok(Self { ptr, len })
    }

    fn addr(&self) -> u64 {
        self.ptr as u64
    }
}

impl Drop for NoAccess {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// A cold WRITE followed by one into memory the OS cannot make present (an on-demand MR over
/// `PROT_NONE` memory), posted together: the look-ahead for the second fails, which fails
/// nothing (the first completes whole); the second fails with `REM_ACCESS_ERR` when it runs
/// and asks itself; its look-ahead pages count as wasted.
fn test_fault_path_lookahead_failure_fails_nothing() -> TestResult {
    const CHUNK: usize = 16 * PAGE;
    let p = cold_pair(CHUNK)?;
    let bad = NoAccess::new(CHUNK)?;
    // SAFETY: nothing can access the memory (PROT_NONE), and the MR goes before it.
    let bad_mr = unsafe {
        p.b.pd
            .reg_mr_raw(bad.addr(), CHUNK as u64, ACCESS_ALL | ACCESS_ON_DEMAND)
    }
    .map_err(|e| fail("reg_mr over PROT_NONE memory", e))?;
    let data = pattern(0x53, CHUNK);
    p.b.buf.dontneed()?;
    p.a.buf.write(0, &data);
    let requester = CtxDetails::of(&p.a.ctx)?;
    let before = requester.translation()?;
    let sge = [p.a.sge(0, CHUNK)];
    let wrs = [
        write_wr(&p, 1, &sge, 0),
        SendWr::new(2, WrOpcode::RdmaWrite, &sge).remote(bad.addr(), bad_mr.rkey()),
    ];
    p.a.qp.post_send(&wrs).map_err(|e| fail("post_send", e))?;
    let wcs = wait_cq(&p.a.cq, 2)?;
    check_wc(&wcs[0], WcStatus::SUCCESS, None)?;
    check_bytes("the WRITE before the bad one", &p.b.buf, 0, &data)?;
    check_wc(&wcs[1], WcStatus::REM_ACCESS_ERR, None)?;
    let t = requester.translation()?;
    let (ahead, wasted) = (
        t.lookahead_pages - before.lookahead_pages,
        t.lookahead_wasted - before.lookahead_wasted,
    );
    outln!("# look-ahead {ahead} pages, {wasted} wasted");
    check!(
        ahead >= 16 && wasted == ahead,
        "look-ahead {ahead} pages, {wasted} wasted: want the bad WRITE's 16, all wasted"
    );
    drop(bad_mr);
    Ok(())
}

/// One WRITE over 32 pages whose last 8 the OS cannot make present: the whole range is asked
/// for in one group, which the OS answers with a failure (one code for the group). The device
/// probes again and moves the 24 good pages before it fails at the first bad one; the
/// completion reports `REM_ACCESS_ERR` and the QP is still usable after a reset.
fn test_fault_path_failed_group_fails_only_its_work() -> TestResult {
    const GOOD: usize = 24 * PAGE;
    const LEN: usize = 32 * PAGE;
    let p = cold_pair(LEN)?;
    // The target: 24 good pages, then 8 that refuse every access.
    // SAFETY: a fresh anonymous mapping nothing else refers to.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            LEN,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        fail!("mmap: {}", std::io::Error::last_os_error());
    }
    let region = NoAccess { ptr, len: LEN };
    // SAFETY: the last 8 pages of our own mapping.
    if unsafe {
        libc::mprotect(
            ptr.cast::<u8>().add(GOOD).cast(),
            LEN - GOOD,
            libc::PROT_NONE,
        )
    } != 0
    {
        fail!("mprotect: {}", std::io::Error::last_os_error());
    }
    // SAFETY: the device writes the range only through this MR, which goes before `region`;
    // the test reads it back with volatile reads.
    let mr = unsafe {
        p.b.pd
            .reg_mr_raw(region.addr(), LEN as u64, ACCESS_ALL | ACCESS_ON_DEMAND)
    }
    .map_err(|e| fail("reg_mr", e))?;
    let data = pattern(0x64, LEN);
    p.a.buf.write(0, &data);
    let target = CtxDetails::of(&p.b.ctx)?;
    let before = target.translation()?;
    let sge = [p.a.sge(0, LEN)];
    p.a.post(SendWr::new(1, WrOpcode::RdmaWrite, &sge).remote(region.addr(), mr.rkey()))?;
    let wc = wait_cq(&p.a.cq, 1)?[0];
    check_wc(&wc, WcStatus::REM_ACCESS_ERR, None)?;
    // The good pages were written before the failure.
    let got: Vec<u8> = (0..GOOD)
        // SAFETY: inside the readable part of our own mapping.
        .map(|i| unsafe { core::ptr::read_volatile(ptr.cast::<u8>().add(i)) })
        .collect();
    check!(
        got == data[..GOOD],
        "the 24 good pages before the bad ones were not all written"
    );
    let t = target.translation()?;
    check!(
        t.pri_failed > before.pri_failed,
        "no failed page response counted: {t:?}"
    );
    drop(mr);
    drop(region);
    p.a.reconnect(p.b.qp.qp_num())?;
    p.write_ok(0x75, PAGE, "a WRITE after the failure")
}

/// The OS allocates the device only 16 outstanding page requests (a device with
/// `pri-requests=16`; a context gets a quarter): eight QPs fault 64 pages each at once, so
/// most requests wait their turn (`prq_held`), groups are cut to what fits, and every
/// transfer still completes with the right bytes.
fn test_fault_path_small_pri_allocation() -> TestResult {
    const PAIRS: usize = 8;
    const LEN: usize = 64 * PAGE;
    const ROUNDS: u8 = 4;
    let cmdline = std::fs::read_to_string("/proc/cmdline")?;
    if !cmdline
        .split_whitespace()
        .any(|w| w == "pfnic_pri_requests=16")
    {
        skip!("the device has the default PRI capacity (scripts/test.sh boots one with 16)");
    }
    let pairs = (0..PAIRS)
        .map(|_| cold_pair(LEN))
        .collect::<Result<Vec<_>, _>>()?;
    let targets = pairs
        .iter()
        .map(|p| CtxDetails::of(&p.b.ctx))
        .collect::<Result<Vec<_>, _>>()?;
    let sges: Vec<_> = pairs.iter().map(|p| [p.a.sge(0, LEN)]).collect();
    // Whether the device runs enough QPs at once to exhaust the allocation depends on how the
    // host schedules its threads: a loaded host ran them one after another in one round
    // (2026-11-27). A few rounds, until one holds requests back.
    let mut held = 0;
    for round in 0..ROUNDS {
        for (i, p) in pairs.iter().enumerate() {
            p.b.buf.dontneed()?;
            p.a.buf.write(0, &pattern(i as u8 ^ round, LEN));
        }
        for (i, p) in pairs.iter().enumerate() {
            p.a.post(write_wr(p, i as u64, &sges[i], 0))?;
        }
        for (i, p) in pairs.iter().enumerate() {
            check_wc(&wait_cq(&p.a.cq, 1)?[0], WcStatus::SUCCESS, None)?;
            check_bytes(
                &format!("round {round}, pair {i}"),
                &p.b.buf,
                0,
                &pattern(i as u8 ^ round, LEN),
            )?;
            let t = targets[i].translation()?;
            held += t.prq_held;
            check_eq!(t.pri_failed, 0);
        }
        if held > 0 {
            break;
        }
    }
    // The device's own counters are on its device file (docs/uapi.md).
    let dev = crate::common::nic()?.dev.query_stats()?;
    outln!(
        "# {held} page requests held back; groups by pages (log2): {:?}",
        dev.group_pages_log2
    );
    check!(
        held > 0,
        "8 QPs faulting 64 pages each on an allocation of 16, {ROUNDS} times: none held back"
    );
    // No group was bigger than a context's share of the allocation (4 pages).
    check!(
        dev.group_pages_log2[3..].iter().all(|&n| n == 0),
        "groups of 8 pages or more on an allocation of 16: {:?}",
        dev.group_pages_log2
    );
    Ok(())
}
