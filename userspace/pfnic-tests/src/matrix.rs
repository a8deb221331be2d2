//! The fault matrix on the verbs path (docs/research/perf-reliability.md): what the kernel does
//! to a process's memory while the device is moving data into or out of it. A racing thread
//! drops, unmaps, write-protects or migrates the pages of an ODP MR while RDMA runs; a fork
//! shares them copy-on-write with a child. Every transfer must complete with success or a
//! clean remote access error, never touch a byte outside its range (sentinels of 1 to 8 bytes
//! on each side), and move the right bytes once the race stops.

use pfnic_cli::outln;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{pipe, Child};
use crate::ibv_common::*;
use crate::ktap::{Failure, Test, TestResult};
use crate::verbs_common::{fail, MrKind, PAGE};
use ibv::{Buffer, SendWr, Sge, WcStatus, WrOpcode};
use std::io::{Read, Write};

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_matrix_dontneed_race",
        run: test_matrix_dontneed_race,
    },
    &Test {
        name: "test_matrix_munmap_race",
        run: test_matrix_munmap_race,
    },
    &Test {
        name: "test_matrix_madv_free_write",
        run: test_matrix_madv_free_write,
    },
    &Test {
        name: "test_matrix_madv_free_race",
        run: test_matrix_madv_free_race,
    },
    &Test {
        name: "test_matrix_mprotect_race",
        run: test_matrix_mprotect_race,
    },
    &Test {
        name: "test_matrix_migration",
        run: test_matrix_migration,
    },
    &Test {
        name: "test_matrix_move_pages",
        run: test_matrix_move_pages,
    },
    &Test {
        name: "test_matrix_fork_cow",
        run: test_matrix_fork_cow,
    },
    &Test {
        name: "test_matrix_cow_by_cpu",
        run: test_matrix_cow_by_cpu,
    },
    &Test {
        name: "test_matrix_thp",
        run: test_matrix_thp,
    },
    &Test {
        name: "test_matrix_ksm",
        run: test_matrix_ksm,
    },
    &Test {
        name: "test_matrix_kill_mid_rdma",
        run: test_matrix_kill_mid_rdma,
    },
    &Test {
        name: "test_matrix_open_close_cycles",
        run: test_matrix_open_close_cycles,
    },
];

/// Pages of the target buffer: the first and the last hold the sentinels and are never raced.
pub const PAGES: usize = 34;
pub const LEN: usize = PAGES * PAGE;
/// Transfers per race.
const ITERS: usize = 40;
/// Sentinel widths: the transfer's edges sit 1, 2, 4 and 8 bytes inside the outer pages.
pub const EDGES: [usize; 4] = [1, 2, 4, 8];
pub const SENTINEL: u8 = 0xa5;

/// The byte range iteration `i` writes: from `e` bytes before the end of the first page to `e`
/// bytes into the last one.
pub fn span(i: usize) -> (usize, usize) {
    let e = EDGES[i % EDGES.len()];
    (PAGE - e, LEN - 2 * PAGE + 2 * e)
}

/// Fails unless the 8 bytes on each side of `[off, off + len)` of `buf` still hold the sentinel.
pub fn check_sentinels(what: &str, buf: &Buffer, off: usize, len: usize) -> TestResult {
    for (side, at) in [("before", off - 8), ("after", off + len)] {
        let got = buf.to_vec(at, 8);
        check!(
            got == [SENTINEL; 8],
            "{what}: the 8 bytes {side} the transfer changed: {got:02x?}"
        );
    }
    Ok(())
}

/// Fills the first and the last page of a `LEN`-byte buffer with the sentinel (transfers with
/// wider edges reach further into them).
pub fn reset_sentinels(buf: &Buffer) {
    buf.write(0, &[SENTINEL; PAGE]);
    buf.write(LEN - PAGE, &[SENTINEL; PAGE]);
}

/// A thread that runs `step` until stopped; counts its rounds.
struct Racer {
    stop: Arc<AtomicBool>,
    rounds: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Racer {
    fn start(mut step: impl FnMut() + Send + 'static) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(AtomicU64::new(0));
        let (s, r) = (stop.clone(), rounds.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                step();
                r.fetch_add(1, Ordering::Relaxed);
            }
        });
        Self {
            stop,
            rounds,
            thread: Some(thread),
        }
    }

    /// Stops the thread; returns its rounds.
    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.rounds.load(Ordering::Relaxed)
    }
}

impl Drop for Racer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The interior pages of `buf` (all but the first and the last), as an address and length.
pub fn interior(buf: &Buffer) -> (usize, usize) {
    (buf.addr() as usize + PAGE, LEN - 2 * PAGE)
}

/// Runs `ITERS` RDMA WRITEs from `p.a` into `p.b` while `racer` (if any) runs, calling `during(i)` after
/// posting write `i`; each must complete with success, or with `REM_ACCESS_ERR` when
/// `may_fail` (the target page was unmapped or read-only at that moment; the QP is then
/// reconnected), and leave the sentinels alone. Then, with the race stopped, one more write
/// must deliver every byte. Returns (successes, errors, racer rounds).
fn race_writes(
    p: &Pair,
    racer: Option<Racer>,
    mut during: impl FnMut(usize),
    may_fail: bool,
) -> Result<(usize, usize, u64), Failure> {
    let (mut ok, mut failed) = (0, 0);
    let r = (|| -> Result<(), Failure> {
        for i in 0..ITERS {
            let (off, len) = span(i);
            // Earlier transfers reached further into the outer pages: sentinels anew.
            reset_sentinels(&p.b.buf);
            p.a.buf.write(0, &pattern(i as u8, len));
            p.a.post(
                SendWr::new(i as u64, WrOpcode::RdmaWrite, &[p.a.sge(0, len)])
                    .remote(p.b.buf.addr() + off as u64, p.b.mr.rkey()),
            )?;
            during(i);
            let wc = wait_cq(&p.a.cq, 1)?[0];
            check_eq!(wc.wr_id, i as u64);
            if wc.status == WcStatus::SUCCESS {
                ok += 1;
            } else if may_fail && wc.status == WcStatus::REM_ACCESS_ERR {
                failed += 1;
                p.a.reconnect(p.b.qp.qp_num())?;
            } else {
                fail!("write {i}: {:?}", wc.status);
            }
            check_sentinels(&format!("write {i}"), &p.b.buf, off, len)?;
        }
        Ok(())
    })();
    let rounds = racer.map_or(0, Racer::finish);
    r?;
    // The race is over: a last write must land whole.
    let (off, len) = span(0);
    reset_sentinels(&p.b.buf);
    p.a.buf.write(0, &pattern(0xee, len));
    p.a.post_ok(
        SendWr::new(1 << 32, WrOpcode::RdmaWrite, &[p.a.sge(0, len)])
            .remote(p.b.buf.addr() + off as u64, p.b.mr.rkey()),
    )?;
    check_bytes("after the race", &p.b.buf, off, &pattern(0xee, len))?;
    check_sentinels("after the race", &p.b.buf, off, len)?;
    Ok((ok, failed, rounds))
}

/// An ODP pair whose target buffer is `LEN` bytes with sentinels everywhere.
pub fn matrix_pair() -> Result<Pair, Failure> {
    let p = Pair::odp(ODP_WRITE, LEN)?;
    p.b.buf.fill(SENTINEL);
    Ok(p)
}

/// `MADV_DONTNEED` on the target's interior pages, again and again, during the writes: the
/// device faults them back each time; nothing fails.
fn test_matrix_dontneed_race() -> TestResult {
    let p = matrix_pair()?;
    let (addr, len) = interior(&p.b.buf);
    let racer = Racer::start(move || {
        // SAFETY: drops pages of the test's own buffer; it stays mapped.
        unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTNEED) };
        std::thread::sleep(Duration::from_micros(200));
    });
    let (ok, failed, rounds) = race_writes(&p, Some(racer), |_| {}, false)?;
    outln!("# {ok} writes, {failed} failed, {rounds} MADV_DONTNEED rounds");
    check!(rounds > 0, "the racer never ran");
    Ok(())
}

/// The target's interior pages unmapped and mapped again (fresh zero pages at the same
/// address) at moments spread over the writes, from right after the post to after the end: a
/// write that finds a hole fails with `REM_ACCESS_ERR`, none writes outside its range, and the
/// QP recovers.
fn test_matrix_munmap_race() -> TestResult {
    let p = matrix_pair()?;
    let (addr, len) = interior(&p.b.buf);
    let remaps = AtomicU64::new(0);
    let (ok, failed, _) = race_writes(
        &p,
        None,
        |i| {
            std::thread::sleep(Duration::from_micros((i as u64 * 397) % 4000));
            // SAFETY: part of the test's own buffer, which the CPU does not touch meanwhile
            // (the device is what races).
            unsafe { remap_fresh(addr, len) };
            remaps.fetch_add(1, Ordering::Relaxed);
        },
        true,
    )?;
    outln!(
        "# {ok} writes, {failed} failed on a hole, {} munmap/mmap",
        remaps.load(Ordering::Relaxed)
    );
    Ok(())
}

/// Unmaps `[addr, addr + len)` and maps fresh anonymous memory at the same place; returns
/// whether it got that place.
///
/// # Safety
///
/// The range is the caller's own memory, which nothing else uses meanwhile.
pub unsafe fn remap_fresh(addr: usize, len: usize) -> bool {
    // SAFETY: the caller's own range (function's safety requirements).
    unsafe {
        libc::munmap(addr as *mut libc::c_void, len);
        libc::mmap(
            addr as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
            -1,
            0,
        ) as usize
            == addr
    }
}

/// `madvise(advice)` on the interior pages of the target.
fn advise_interior(addr: usize, len: usize, advice: libc::c_int) -> Result<(), Failure> {
    // SAFETY: advice on part of the test's own buffer, which stays mapped; MADV_FREE and
    // MADV_PAGEOUT at most make its pages read as zeros again.
    if unsafe { libc::madvise(addr as *mut libc::c_void, len, advice) } != 0 {
        fail!("madvise({advice}): {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// `MADV_FREE` lets the kernel discard pages that are not written again; a device write is a
/// write: it must survive the reclaim that `MADV_PAGEOUT` forces right after. (The IOMMU marks
/// the page dirty when the device writes through a translation it handed out, as the CPU's MMU
/// does; a lost dirty bit would lose the device's bytes here.)
fn test_matrix_madv_free_write() -> TestResult {
    let p = matrix_pair()?;
    let (addr, len) = interior(&p.b.buf);
    for i in 0..ITERS / 4 {
        let (off, n) = span(i);
        reset_sentinels(&p.b.buf);
        p.b.buf.write(PAGE, &vec![0x5a; LEN - 2 * PAGE]); // dirty, then freed lazily
        advise_interior(addr, len, libc::MADV_FREE)?;
        let want = pattern(i as u8 ^ 0x3c, n);
        p.a.buf.write(0, &want);
        p.a.post_ok(
            SendWr::new(i as u64, WrOpcode::RdmaWrite, &[p.a.sge(0, n)])
                .remote(p.b.buf.addr() + off as u64, p.b.mr.rkey()),
        )?;
        advise_interior(addr, len, libc::MADV_PAGEOUT)?;
        check_bytes(&format!("round {i}, after reclaim"), &p.b.buf, off, &want)?;
        check_sentinels(&format!("round {i}"), &p.b.buf, off, n)?;
    }
    // The same reclaim does discard what nobody wrote after MADV_FREE (the test can fail).
    p.b.buf.write(PAGE, &vec![0x77; PAGE]);
    advise_interior(addr, len, libc::MADV_FREE)?;
    advise_interior(addr, len, libc::MADV_PAGEOUT)?;
    check_eq!(p.b.buf.to_vec(PAGE, 1)[0], 0);
    Ok(())
}

/// `MADV_FREE` and forced reclaim of the target's interior pages, again and again, during the
/// writes: nothing fails, nothing outside a write's range changes, and once the race is over
/// a write lands whole.
fn test_matrix_madv_free_race() -> TestResult {
    let p = matrix_pair()?;
    let (addr, len) = interior(&p.b.buf);
    let racer = Racer::start(move || {
        // SAFETY: lazy-frees and reclaims pages of the test's own buffer; it stays mapped.
        unsafe {
            libc::madvise(addr as *mut libc::c_void, len, libc::MADV_FREE);
            libc::madvise(addr as *mut libc::c_void, len, libc::MADV_PAGEOUT);
        }
        std::thread::sleep(Duration::from_micros(200));
    });
    let (ok, failed, rounds) = race_writes(&p, Some(racer), |_| {}, false)?;
    outln!("# {ok} writes, {failed} failed, {rounds} MADV_FREE + MADV_PAGEOUT rounds");
    check!(rounds > 0, "the racer never ran");
    Ok(())
}

/// The target's interior pages made read-only and writable again during the writes: a write
/// that meets a read-only page fails with `REM_ACCESS_ERR`.
fn test_matrix_mprotect_race() -> TestResult {
    let p = matrix_pair()?;
    let (addr, len) = interior(&p.b.buf);
    let racer = Racer::start(move || {
        // SAFETY: changes the protection of part of the test's own buffer, which the test
        // only touches again (on the CPU) after the racer has stopped and made it writable.
        unsafe {
            libc::mprotect(addr as *mut libc::c_void, len, libc::PROT_READ);
            std::thread::sleep(Duration::from_micros(200));
            libc::mprotect(
                addr as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
            );
        }
        std::thread::sleep(Duration::from_micros(300));
    });
    let (ok, failed, rounds) = race_writes(&p, Some(racer), |_| {}, true)?;
    outln!("# {ok} writes, {failed} failed on a read-only page, {rounds} mprotect rounds");
    check!(rounds > 0, "the racer never ran");
    Ok(())
}

/// Pages migrated by compaction (`/proc/sys/vm/compact_memory`) while the device reads them:
/// every RDMA READ returns exactly what the CPU wrote.
fn test_matrix_migration() -> TestResult {
    let compact = std::path::Path::new("/proc/sys/vm/compact_memory");
    if !compact.exists() {
        return Err(Failure::Skip("no /proc/sys/vm/compact_memory".into()));
    }
    let p = Pair::odp(ODP_READ, LEN)?;
    let racer = Racer::start(|| {
        let _ = std::fs::write("/proc/sys/vm/compact_memory", "1");
    });
    let r = (|| -> TestResult {
        for i in 0..ITERS / 2 {
            let want = pattern(i as u8 ^ 0x5c, LEN);
            p.b.buf.write(0, &want);
            p.a.post_ok(
                SendWr::new(i as u64, WrOpcode::RdmaRead, &[p.a.sge(0, LEN)])
                    .remote(p.b.buf.addr(), p.b.mr.rkey()),
            )?;
            check_bytes(&format!("read {i}"), &p.a.buf, 0, &want)?;
        }
        Ok(())
    })();
    let rounds = racer.finish();
    r?;
    outln!("# {} reads, {rounds} compaction rounds", ITERS / 2);
    check!(rounds > 0, "compaction never ran");
    Ok(())
}

/// `move_pages(2)`'s flag to move the pages (of this process only).
const MPOL_MF_MOVE: libc::c_int = 1 << 1;

/// `move_pages(2)` on the interior pages of `buf` to `node` (or, with `None`, only where they
/// are): the node of each page after the call (negative: an errno, e.g. `-ENOENT` for a page
/// not present).
fn move_pages(buf: &Buffer, node: Option<i32>) -> Result<Vec<i32>, Failure> {
    let (addr, len) = interior(buf);
    let pages: Vec<*mut libc::c_void> = (0..len / PAGE)
        .map(|i| (addr + i * PAGE) as *mut libc::c_void)
        .collect();
    let nodes = vec![node.unwrap_or(0); pages.len()];
    let mut status = vec![0i32; pages.len()];
    // SAFETY: the arrays hold `pages.len()` entries each; the pages are the test's own.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0,
            pages.len(),
            pages.as_ptr(),
            if node.is_some() {
                nodes.as_ptr()
            } else {
                core::ptr::null()
            },
            status.as_mut_ptr(),
            MPOL_MF_MOVE,
        )
    };
    if r < 0 {
        fail!("move_pages: {}", std::io::Error::last_os_error());
    }
    Ok(status)
}

/// Pages moved between two NUMA nodes with `move_pages(2)` while the device reads and writes
/// them: every RDMA READ returns what the CPU wrote, every RDMA WRITE lands whole within its
/// sentinels, and the pages really change nodes meanwhile.
fn test_matrix_move_pages() -> TestResult {
    if !std::path::Path::new("/sys/devices/system/node/node1").exists() {
        return Err(Failure::Skip(
            "one NUMA node (the test guest has two)".into(),
        ));
    }
    let p = Pair::odp(ODP_READ | ODP_WRITE, LEN)?;
    p.b.buf.fill(SENTINEL);
    let target = p.b.buf.clone();
    let moved = Arc::new(AtomicU64::new(0));
    let m = moved.clone();
    let mut node = 1;
    let racer = Racer::start(move || {
        // Pages the device has not faulted in yet are not there to move (-ENOENT).
        if let Ok(status) = move_pages(&target, Some(node)) {
            let n = status.iter().filter(|&&s| s == node).count();
            m.fetch_add(n as u64, Ordering::Relaxed);
        }
        node ^= 1;
        std::thread::sleep(Duration::from_micros(500));
    });
    let r = (|| -> TestResult {
        for i in 0..ITERS {
            let (off, len) = span(i);
            if i % 2 == 0 {
                // The device reads the moving pages.
                let want = pattern(i as u8 ^ 0x3c, len);
                p.b.buf.write(off, &want);
                p.a.post_ok(
                    SendWr::new(i as u64, WrOpcode::RdmaRead, &[p.a.sge(0, len)])
                        .remote(p.b.buf.addr() + off as u64, p.b.mr.rkey()),
                )?;
                check_bytes(&format!("read {i}"), &p.a.buf, 0, &want)?;
            } else {
                // The device writes them.
                reset_sentinels(&p.b.buf);
                let want = pattern(i as u8, len);
                p.a.buf.write(0, &want);
                p.a.post_ok(
                    SendWr::new(i as u64, WrOpcode::RdmaWrite, &[p.a.sge(0, len)])
                        .remote(p.b.buf.addr() + off as u64, p.b.mr.rkey()),
                )?;
                check_bytes(&format!("write {i}"), &p.b.buf, off, &want)?;
                check_sentinels(&format!("write {i}"), &p.b.buf, off, len)?;
            }
        }
        Ok(())
    })();
    let rounds = racer.finish();
    r?;
    let moved = moved.load(Ordering::Relaxed);
    let now = move_pages(&p.b.buf, None)?;
    outln!(
        "# {ITERS} transfers, {rounds} move_pages rounds, {moved} pages moved; now on nodes {:?}",
        now.iter().fold([0usize; 2], |mut c, &n| {
            if (0..2).contains(&n) {
                c[n as usize] += 1;
            }
            c
        })
    );
    check!(moved > 0, "no page changed nodes: the race did not happen");
    Ok(())
}

/// A child forked to watch its copy-on-write snapshot of a buffer: it reads the snapshot at
/// once and again 300 ms later, and reports whether the first read was wrong (by the
/// caller's judgement) and whether the snapshot changed in between.
struct ForkWitness {
    child: Child,
    verdict: std::fs::File,
}

impl ForkWitness {
    fn spawn(buf: Arc<Buffer>, wrong: impl FnOnce(&[u8]) -> bool) -> Result<Self, Failure> {
        let (verdict, tx) = pipe()?;
        let child = Child::spawn(move || {
            let mut tx = tx;
            let first = buf.to_vec(0, LEN);
            std::thread::sleep(Duration::from_millis(300));
            let second = buf.to_vec(0, LEN);
            let _ = tx.write_all(&[u8::from(wrong(&first)), u8::from(first != second)]);
            0
        })?;
        Ok(Self { child, verdict })
    }

    /// Fails if the snapshot was wrong (`what_wrong` says how) or the device wrote into it.
    fn check(mut self, round: u8, what_wrong: &str) -> TestResult {
        let mut verdict = [0u8; 2];
        self.verdict
            .read_exact(&mut verdict)
            .map_err(|e| fail("the child's verdict", e))?;
        check_eq!(self.child.wait()?, 0);
        check!(verdict[0] == 0, "round {round}: {what_wrong}");
        check!(
            verdict[1] == 0,
            "round {round}: the device wrote into the child's copy after the fork"
        );
        Ok(())
    }
}

/// Forks around the device's writes into the parent's buffer, which make its pages
/// copy-on-write: the device's writes must break the sharing and land in the parent's copies
/// only. Even rounds fork before the write is posted: the child's snapshot is all old, for
/// good. Odd rounds fork while it runs: each page of the snapshot is all old or all new, and
/// never changes afterwards. The parent sees every new byte.
fn test_matrix_fork_cow() -> TestResult {
    let p = Pair::odp(ODP_WRITE, LEN)?;
    for i in 0..8u8 {
        let (old, new) = (i, 0x80 | i);
        let before = i % 2 == 0;
        p.b.buf.fill(old);
        p.a.buf.fill(new);
        let post = || {
            p.a.post(
                SendWr::new(u64::from(i), WrOpcode::RdmaWrite, &[p.a.sge(0, LEN)])
                    .remote(p.b.buf.addr(), p.b.mr.rkey()),
            )
        };
        if !before {
            post()?;
        }
        let witness = ForkWitness::spawn(p.b.buf.clone(), |snapshot| {
            snapshot.chunks(PAGE).any(|pg| {
                let all = |v: u8| pg.iter().all(|&b| b == v);
                !(all(old) || (!before && all(new)))
            })
        })?;
        if before {
            post()?;
        }
        let wc = wait_cq(&p.a.cq, 1)?[0];
        check_wc(&wc, WcStatus::SUCCESS, None)?;
        witness.check(
            i,
            "the child's snapshot has pages that are not what they were at the fork",
        )?;
        check_bytes(&format!("round {i}, parent"), &p.b.buf, 0, &[new; LEN])?;
    }
    Ok(())
}

/// Copy-on-write broken by the parent's CPU while the device writes the same pages: after a
/// fork, the device writes the first half of every interior page (one RDMA WRITE each) while
/// the parent's CPU writes the second halves. Each CPU write copies its page away from the
/// child; the device's writes must follow to the parent's new copy, not land in the page the
/// child keeps. The parent ends with both halves of every page; the child's snapshot stays
/// all old.
fn test_matrix_cow_by_cpu() -> TestResult {
    let p = Pair::odp(ODP_WRITE, LEN)?;
    let pages = PAGES - 2;
    let half = PAGE / 2;
    for round in 0..8u8 {
        let (old, dev, cpu) = (round, 0x40 | round, 0x80 | round);
        p.b.buf.fill(old);
        p.a.buf.fill(dev);
        // The device's pages are present before the fork, so the fork shares them.
        p.a.post_ok(
            SendWr::new(u64::MAX, WrOpcode::RdmaWrite, &[p.a.sge(0, 8)])
                .remote(p.b.buf.addr(), p.b.mr.rkey()),
        )?;
        p.b.buf.write(0, &[old; 8]);
        let witness = ForkWitness::spawn(p.b.buf.clone(), |snapshot| {
            snapshot.iter().any(|&b| b != old)
        })?;
        let sges: Vec<[Sge; 1]> = (1..=pages).map(|i| [p.a.sge(i * PAGE, half)]).collect();
        let wrs: Vec<SendWr> = sges
            .iter()
            .enumerate()
            .map(|(i, sge)| {
                SendWr::new(i as u64, WrOpcode::RdmaWrite, sge)
                    .remote(p.b.buf.addr() + ((i + 1) * PAGE) as u64, p.b.mr.rkey())
            })
            .collect();
        p.a.qp.post_send(&wrs).map_err(|e| fail("post_send", e))?;
        // Odd rounds: the CPU goes from the last page down, meeting the device in the middle.
        for k in 0..pages {
            let i = if round % 2 == 0 { k } else { pages - 1 - k };
            p.b.buf.write((i + 1) * PAGE + half, &[cpu; PAGE / 2]);
        }
        for wc in wait_cq(&p.a.cq, pages)? {
            check_wc(&wc, WcStatus::SUCCESS, None)?;
        }
        witness.check(
            round,
            "the child's snapshot is not what the parent had at the fork",
        )?;
        for i in 1..=pages {
            let at = i * PAGE;
            check_bytes(
                &format!("round {round}, page {i}, device half"),
                &p.b.buf,
                at,
                &[dev; PAGE / 2],
            )?;
            check_bytes(
                &format!("round {round}, page {i}, CPU half"),
                &p.b.buf,
                at + half,
                &[cpu; PAGE / 2],
            )?;
        }
    }
    Ok(())
}

/// Transparent huge pages: a 4 MiB target backed by huge pages receives writes whole, and
/// still does after `MADV_DONTNEED` on 4 KiB in the middle of a huge page splits it.
fn test_matrix_thp() -> TestResult {
    let thp = std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled");
    let mode = std::fs::read_to_string(thp).map_err(|_| Failure::Skip("no THP".into()))?;
    if mode.contains("[never]") {
        std::fs::write(thp, "madvise")?;
    }
    const HUGE: usize = 2 << 20;
    let ctx = ibv_ctx()?;
    requires_odp(&ctx, ODP_WRITE, false)?;
    let cb = ibv_ctx()?;
    let o = PairOpts {
        len: 3 * HUGE,
        kind: MrKind::Odp,
        ..Default::default()
    };
    let p = Pair::build(&ctx, &cb, &o)?;
    // The 2 MiB-aligned 4 MiB inside the target buffer.
    let base = (p.b.buf.addr() as usize).next_multiple_of(HUGE) - p.b.buf.addr() as usize;
    // SAFETY: advice on the test's own buffer.
    unsafe {
        libc::madvise(
            p.b.buf.as_ptr().add(base).cast(),
            2 * HUGE,
            libc::MADV_HUGEPAGE,
        )
    };
    p.b.buf.write(base, &vec![1u8; 2 * HUGE]);
    let huge_kb = crate::common::meminfo_kb("AnonHugePages")?;
    if huge_kb == 0 {
        return Err(Failure::Skip("no huge page was allocated".into()));
    }
    for round in 0..2u8 {
        if round == 1 {
            // Split one huge page by dropping 4 KiB in its middle.
            // SAFETY: drops one page of the test's own buffer.
            unsafe {
                libc::madvise(
                    p.b.buf.as_ptr().add(base + HUGE / 2).cast(),
                    PAGE,
                    libc::MADV_DONTNEED,
                )
            };
        }
        let want = pattern(0x30 + round, 2 * HUGE - 16);
        p.a.buf.write(0, &want);
        p.a.post_ok(
            SendWr::new(
                u64::from(round),
                WrOpcode::RdmaWrite,
                &[p.a.sge(0, want.len())],
            )
            .remote(p.b.buf.addr() + (base + 8) as u64, p.b.mr.rkey()),
        )?;
        check_bytes(&format!("round {round}"), &p.b.buf, base + 8, &want)?;
    }
    outln!("# AnonHugePages {huge_kb} kB");
    Ok(())
}

/// ksmd's knobs and counters (Documentation/admin-guide/mm/ksm.rst).
const KSM: &str = "/sys/kernel/mm/ksm";

fn ksm_get(name: &str) -> Result<u64, Failure> {
    let v = std::fs::read_to_string(format!("{KSM}/{name}"))?;
    Ok(v.trim().parse()?)
}

fn ksm_set(name: &str, v: u64) -> TestResult {
    std::fs::write(format!("{KSM}/{name}"), v.to_string())
        .map_err(|e| fail(&format!("{KSM}/{name}"), e))
}

/// ksmd running fast for a test; on drop every page is unmerged (`run` 2) and the knobs go
/// back to what they were.
struct Ksmd {
    saved: Vec<(&'static str, u64)>,
}

impl Ksmd {
    fn start() -> Result<Self, Failure> {
        let mut k = Self { saved: Vec::new() };
        for (name, v) in [("pages_to_scan", 4096), ("sleep_millisecs", 10), ("run", 1)] {
            k.saved.push((name, ksm_get(name)?));
            ksm_set(name, v)?;
        }
        Ok(k)
    }
}

impl Drop for Ksmd {
    fn drop(&mut self) {
        let _ = ksm_set("run", 2);
        for &(name, v) in self.saved.iter().rev() {
            let _ = ksm_set(name, v);
        }
    }
}

/// Kernel samepage merging under the device. A target buffer, written by the device (so its
/// translations were writable), and a twin the CPU filled with the same pages are merged by
/// ksmd (each page pair then shares one frame, seen in /proc/self/pagemap). An RDMA READ of
/// the merged pages returns their bytes and leaves them merged; an RDMA WRITE into the middle
/// pages breaks their sharing: the twin keeps every byte, the target has the new ones, and the
/// pages it did not touch stay merged.
fn test_matrix_ksm() -> TestResult {
    const K: usize = 16;
    const MERGE_WAIT: Duration = Duration::from_secs(120);
    if !std::path::Path::new(KSM).exists() {
        skip!("no {KSM}: the kernel has no KSM (CONFIG_KSM)");
    }
    let p = Pair::odp(ODP_WRITE | ODP_READ, K * PAGE)?;
    let twin = Buffer::new(K * PAGE)?;
    let orig: Vec<u8> = (0..K).flat_map(|i| pattern(0xc0 ^ i as u8, PAGE)).collect();
    twin.write(0, &orig);
    p.a.buf.write(0, &orig);
    p.a.post_ok(
        SendWr::new(1, WrOpcode::RdmaWrite, &[p.a.sge(0, K * PAGE)])
            .remote(p.b.buf.addr(), p.b.mr.rkey()),
    )?;
    check_bytes("the device's first write", &p.b.buf, 0, &orig)?;
    p.b.buf.madvise(libc::MADV_MERGEABLE)?;
    twin.madvise(libc::MADV_MERGEABLE)?;
    // Which of the K page pairs share a frame.
    let shared = || -> Result<Vec<bool>, Failure> {
        (0..K)
            .map(|i| {
                let x = crate::common::pagemap(p.b.buf.addr() + (i * PAGE) as u64)?;
                let y = crate::common::pagemap(twin.addr() + (i * PAGE) as u64)?;
                Ok(crate::common::pm_present(x)
                    && crate::common::pm_pfn(x) == crate::common::pm_pfn(y))
            })
            .collect()
    };
    let ksmd = Ksmd::start()?;
    let t0 = Instant::now();
    loop {
        let n = shared()?.iter().filter(|&&s| s).count();
        if n == K {
            break;
        }
        check!(
            t0.elapsed() < MERGE_WAIT,
            "KSM merged {n} of {K} page pairs within {MERGE_WAIT:?} (pages_sharing {}, full_scans {})",
            ksm_get("pages_sharing")?,
            ksm_get("full_scans")?
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Stop scanning (merged pages stay merged): what follows is the device's doing alone.
    ksm_set("run", 0)?;
    let sharing = ksm_get("pages_sharing")?;
    outln!(
        "# KSM merged all {K} page pairs in {} ms (pages_sharing {sharing}, full_scans {})",
        t0.elapsed().as_millis(),
        ksm_get("full_scans")?
    );
    check!(sharing >= K as u64, "pages_sharing {sharing} < {K}");

    p.a.buf.fill(0);
    p.a.post_ok(
        SendWr::new(2, WrOpcode::RdmaRead, &[p.a.sge(0, K * PAGE)])
            .remote(p.b.buf.addr(), p.b.mr.rkey()),
    )?;
    check_bytes("RDMA READ of merged pages", &p.a.buf, 0, &orig)?;
    check_eq!(shared()?, vec![true; K]);

    // Pages 1..K-1 written, 8 bytes at each end of that run spared.
    let (off, len) = (PAGE + 8, (K - 2) * PAGE - 16);
    let new = pattern(0x11, len);
    p.a.buf.write(0, &new);
    p.a.post_ok(
        SendWr::new(3, WrOpcode::RdmaWrite, &[p.a.sge(0, len)])
            .remote(p.b.buf.addr() + off as u64, p.b.mr.rkey()),
    )?;
    let mut want = orig.clone();
    want[off..off + len].copy_from_slice(&new);
    check_bytes("target after the write", &p.b.buf, 0, &want)?;
    check_bytes("twin after the write", &twin, 0, &orig)?;
    let after = shared()?;
    let still = after.iter().filter(|&&s| s).count();
    outln!("# after the device's write: {still} of {K} page pairs still merged");
    check!(
        after
            .iter()
            .enumerate()
            .all(|(i, &s)| s == (i == 0 || i == K - 1)),
        "merged page pairs after the write {after:?}: expected only the first and the last"
    );
    drop(ksmd);
    Ok(())
}

/// Children (20; 1000 in a soak run) killed at random points of cold RDMA traffic between two contexts of their own,
/// with page requests outstanding: the device and the driver recover every time (the contexts
/// are freed, the next pair works).
fn test_matrix_kill_mid_rdma() -> TestResult {
    let kills = crate::common::iterations(20, 1000);
    requires_odp(&ibv_ctx()?, ODP_WRITE, false)?;
    let n = crate::common::nic()?;
    let before = n.dev.query_stats()?.contexts_active;
    for k in 0..kills {
        let (mut rx, tx) = pipe()?;
        let child = Child::spawn(move || {
            let mut tx = tx;
            let r = (|| -> Result<(), Failure> {
                let p = Pair::odp(ODP_WRITE, 64 * PAGE)?;
                let _ = tx.write_all(&[1]);
                for i in 0u64.. {
                    p.dontneed()?;
                    p.a.post_ok(
                        SendWr::new(i, WrOpcode::RdmaWrite, &[p.a.sge(0, 64 * PAGE)])
                            .remote(p.b.buf.addr(), p.b.mr.rkey()),
                    )?;
                }
                Ok(())
            })();
            i32::from(r.is_err())
        })?;
        let mut ready = [0u8];
        rx.read_exact(&mut ready)
            .map_err(|e| fail(&format!("kill {k}: the child did not start"), e))?;
        // Moments spread over the first few transfers (the same ones every run).
        let us = 200 + (k as u64 * 7919) % 20_000;
        std::thread::sleep(Duration::from_micros(us));
        child.kill();
        check_eq!(child.wait()?, 128 + libc::SIGKILL);
    }
    outln!("# {kills} children killed mid-RDMA");
    // Every killed child's contexts were freed.
    let deadline = Instant::now() + Duration::from_secs(30);
    while n.dev.query_stats()?.contexts_active != before {
        check!(
            Instant::now() < deadline,
            "{} contexts active after the kills, {before} before",
            n.dev.query_stats()?.contexts_active
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Pair::odp(ODP_WRITE, 16 * PAGE)?.write_ok(9, 16 * PAGE, "after the kills")?;
    Ok(())
}

/// The verbs table usage the driver reports in debugfs: (QPs, CQs, MRs, contexts).
pub fn table_usage() -> Result<[u64; 4], Failure> {
    use crate::common::debugfs_stat;
    Ok([
        debugfs_stat("verbs_qps")?,
        debugfs_stat("verbs_cqs")?,
        debugfs_stat("verbs_mrs")?,
        debugfs_stat("contexts_active")?,
    ])
}

/// Contexts (200; 1000 in a soak run) opened by processes that each make a PD, a CQ (its
/// rings mapped), a QP and an MR and exit without destroying anything: the RDMA core's
/// cleanup of the closed uverbs file must, with the driver. The device's tables and
/// contexts come back to where they were.
fn test_matrix_open_close_cycles() -> TestResult {
    let cycles = crate::common::iterations(200, 1000);
    requires_odp(&ibv_ctx()?, ODP_WRITE, false)?;
    let before = table_usage()?;
    for i in 0..cycles {
        let (mut rx, tx) = pipe()?;
        let child = Child::spawn(move || {
            let mut tx = tx;
            let r = (|| -> Result<(), Failure> {
                let side = Side::from_opts(
                    &ibv_ctx()?,
                    &PairOpts {
                        len: PAGE,
                        kind: MrKind::Odp,
                        ..Default::default()
                    },
                )?;
                // The first child sees its objects in the device's tables.
                if i == 0 {
                    let during = table_usage()?;
                    check_eq!(during, before.map(|n| n + 1));
                }
                let _ = tx.write_all(&[1]);
                // Gone without a destroy: the process ends here.
                std::mem::forget(side);
                Ok(())
            })();
            if let Err(e) = &r {
                pfnic_cli::errln!("# cycle {i}: {e:?}");
            }
            i32::from(r.is_err())
        })?;
        let mut ready = [0u8];
        // A child that failed before writing closes the pipe: read_exact fails.
        rx.read_exact(&mut ready)
            .map_err(|e| fail(&format!("cycle {i}: the child made no objects"), e))?;
        check_eq!(child.wait()?, 0);
        if i == 0 {
            wait_tables(before, "after the first cycle")?;
        }
    }
    wait_tables(before, &format!("after {cycles} cycles"))
}

/// Waits (10 s at most) until the device's tables are back at `before`.
fn wait_tables(before: [u64; 4], when: &str) -> TestResult {
    let deadline = Instant::now() + Duration::from_secs(10);
    while table_usage()? != before {
        check!(
            Instant::now() < deadline,
            "tables (QPs, CQs, MRs, contexts) {:?} {when}, {before:?} before",
            table_usage()?
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}
