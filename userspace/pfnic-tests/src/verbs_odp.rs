//! On-demand paging through Debian's libibverbs and pfnic's provider (rdma-core's
//! test_odp.py): traffic on ODP MRs whose pages are dropped with `madvise(MADV_DONTNEED)` on
//! both sides before every iteration, mixed ODP and plain SGEs, the implicit MR, and each
//! prefetch variant; the MRs' counters as `rdma statistic mr` shows them.

use pfnic_cli::outln;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::expect_errno;
use crate::ibv_common::*;
use crate::ktap::{Failure, Test, TestResult};
use crate::verbs_common::{fail, ACCESS_ALL, ODP_ATOMIC, ODP_SEND, PAGE};
use ibv::{Buffer, Mr, RecvWr, SendWr, Sge, WrOpcode, ACCESS_ON_DEMAND};
use pfnic_verbs::{
    ADVISE_FLAG_FLUSH, ADVISE_PREFETCH, ADVISE_PREFETCH_NO_FAULT, ADVISE_PREFETCH_WRITE,
};

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_verbs_odp_rc_send",
        run: test_verbs_odp_rc_send,
    },
    &Test {
        name: "test_verbs_odp_rc_rdma_write",
        run: test_verbs_odp_rc_rdma_write,
    },
    &Test {
        name: "test_verbs_odp_rc_rdma_read",
        run: test_verbs_odp_rc_rdma_read,
    },
    &Test {
        name: "test_verbs_odp_rc_atomics",
        run: test_verbs_odp_rc_atomics,
    },
    &Test {
        name: "test_verbs_odp_groups_per_work_request",
        run: test_verbs_odp_groups_per_work_request,
    },
    &Test {
        name: "test_verbs_odp_mixed_sges",
        run: test_verbs_odp_mixed_sges,
    },
    &Test {
        name: "test_verbs_odp_implicit_traffic",
        run: test_verbs_odp_implicit_traffic,
    },
    &Test {
        name: "test_verbs_odp_across_2mib",
        run: test_verbs_odp_across_2mib,
    },
    &Test {
        name: "test_verbs_odp_prefetch",
        run: test_verbs_odp_prefetch,
    },
    &Test {
        name: "test_verbs_odp_prefetch_no_fault",
        run: test_verbs_odp_prefetch_no_fault,
    },
    &Test {
        name: "test_verbs_odp_advise_errors",
        run: test_verbs_odp_advise_errors,
    },
];

const ITERS: usize = 4;
const LEN: usize = 4 * PAGE;

/// Fails unless `after` counted at least `pages` more page faults than `before`, all handled.
fn check_faulted(what: &str, before: &MrStats, after: &MrStats, pages: u64) -> TestResult {
    let (f, h) = (
        after.page_faults - before.page_faults,
        after.page_faults_handled - before.page_faults_handled,
    );
    check!(
        f >= pages,
        "{what}: {f} page faults for {pages} pages the device had not seen"
    );
    check!(h >= pages, "{what}: {h} of {f} page faults handled");
    Ok(())
}

/// One iteration's view of the MRs: `moves` runs the transfer from `src` to `dst` (which may
/// be the same side's buffers as the MRs); checks that the untouched side faulted.
///
/// Even iterations: the CPU writes the source (present again), the destination is untouched,
/// so the destination's MR must fault. Odd ones: the source is left untouched (reads as zeros,
/// faulting its MR), the CPU pre-fills the destination.
fn odp_iterations(
    p: &Pair,
    src: (&Buffer, &Mr),
    dst: (&Buffer, &Mr),
    len: usize,
    moves: impl Fn(usize) -> TestResult,
) -> TestResult {
    let mut last: Option<(MrStats, MrStats)> = None;
    for i in 0..ITERS {
        p.dontneed()?;
        let (s0, d0) = (src.1.stats()?, dst.1.stats()?);
        if let Some((ls, ld)) = last {
            // The device used both MRs in the last iteration; dropping the pages must have
            // invalidated its translations.
            check!(
                s0.page_invalidations > ls.page_invalidations
                    && d0.page_invalidations > ld.page_invalidations,
                "iteration {i}: MADV_DONTNEED caused no invalidation (source {} → {}, destination {} → {})",
                ls.page_invalidations,
                s0.page_invalidations,
                ld.page_invalidations,
                d0.page_invalidations
            );
        }
        let want = if i % 2 == 0 {
            let data = pattern(i as u8 + 40, len);
            src.0.write(0, &data);
            data
        } else {
            dst.0.fill(0xee);
            vec![0; len]
        };
        moves(i)?;
        let (s1, d1) = (src.1.stats()?, dst.1.stats()?);
        let pages = len.div_ceil(PAGE) as u64;
        if i % 2 == 0 {
            check_faulted(&format!("iteration {i}, destination"), &d0, &d1, pages)?;
        } else {
            check_faulted(&format!("iteration {i}, source"), &s0, &s1, pages)?;
        }
        check_bytes(&format!("iteration {i}"), dst.0, 0, &want)?;
        last = Some((s1, d1));
    }
    Ok(())
}

/// SEND/RECV between ODP MRs.
fn test_verbs_odp_rc_send() -> TestResult {
    let p = Pair::odp(ODP_SEND | ODP_RECV, LEN)?;
    odp_iterations(&p, (&p.a.buf, &p.a.mr), (&p.b.buf, &p.b.mr), LEN, |i| {
        p.b.post_recv(i as u64, 0, LEN)?;
        let r = p.a.send_ok(
            &p.b,
            SendWr::new(i as u64, WrOpcode::Send, &[p.a.sge(0, LEN)]),
        )?;
        check_eq!(r.byte_len, LEN as u32);
        Ok(())
    })?;
    // Receive-side faults are waits of the sender, never of other QPs (the QPs count page
    // requests, which only the `sva` mode sends).
    if sva_mode()? {
        let requests = qp_counter(&p.a.ctx, &p.a.qp, "page_requests")?;
        check!(requests > 0, "sender QP counted no page requests");
    }
    Ok(())
}

/// RDMA WRITE between ODP MRs.
fn test_verbs_odp_rc_rdma_write() -> TestResult {
    let p = Pair::odp(ODP_WRITE, LEN)?;
    let sva = sva_mode()?;
    odp_iterations(&p, (&p.a.buf, &p.a.mr), (&p.b.buf, &p.b.mr), LEN, |i| {
        let sge = [p.a.sge(0, LEN)];
        let wc =
            p.a.post_ok(p.a.rdma_wr(i as u64, WrOpcode::RdmaWrite, &sge, &p.b, 0))?;
        // Either side was untouched: the WQE itself caused the page requests (counted by
        // the completion in the `sva` mode; `odp_iterations` checks the MRs' counts).
        check!(
            !sva || wc.vendor_err >= (LEN / PAGE) as u32,
            "iteration {i}: the completion reports {} page requests for {} untouched pages",
            wc.vendor_err,
            LEN / PAGE
        );
        Ok(())
    })
}

/// Page request groups: an RDMA WRITE or READ over N untouched pages on each side requests
/// every page once, in one group per side for every 64 pages (the device's group size), not
/// one request per page. The source is shared memory, whose dropped pages keep their bytes,
/// so the data moved is checked too.
fn test_verbs_odp_groups_per_work_request() -> TestResult {
    const GROUP: u64 = 64;
    const MAX: usize = 256 * PAGE;
    let p = Pair::odp(ODP_WRITE | ODP_READ, MAX)?;
    let access = ACCESS_ALL | ACCESS_ON_DEMAND;
    let src_a = Arc::new(Buffer::shared(MAX)?);
    let src_b = Arc::new(Buffer::shared(MAX)?);
    let (mr_a, mr_b) = (
        p.a.pd.reg_mr(&src_a, access)?,
        p.b.pd.reg_mr(&src_b, access)?,
    );
    for (k, (op, n)) in [
        (WrOpcode::RdmaWrite, 1),
        (WrOpcode::RdmaWrite, 16),
        (WrOpcode::RdmaWrite, 256),
        (WrOpcode::RdmaRead, 16),
        (WrOpcode::RdmaRead, 256),
    ]
    .into_iter()
    .enumerate()
    {
        let len = n * PAGE;
        let data = pattern(k as u8 + 1, len);
        // WRITE: a's shared source to b's private buffer; READ: b's shared source to a's.
        let (src, src_mr, dst, dst_mr) = match op {
            WrOpcode::RdmaWrite => (&src_a, &mr_a, &p.b.buf, &p.b.mr),
            _ => (&src_b, &mr_b, &p.a.buf, &p.a.mr),
        };
        src.write(0, &data);
        dst.fill(0);
        src.dontneed()?;
        dst.dontneed()?;
        let (s0, d0) = (src_mr.stats()?, dst_mr.stats()?);
        let wr = match op {
            WrOpcode::RdmaWrite => {
                let sge = [mr_a.sge(0, len as u32)];
                p.a.post_ok(p.a.rdma_wr(k as u64, op, &sge, &p.b, 0))?
            }
            _ => {
                let sge = [p.a.sge(0, len)];
                p.a.post_ok(SendWr::new(k as u64, op, &sge).remote(src_b.addr(), mr_b.rkey()))?
            }
        };
        // Pages present early (the source's fault-around) let the work complete while a
        // group of them is still with the OS: wait for every answer before counting.
        let answered = |m: &Mr| -> Result<MrStats, Failure> {
            let start = Instant::now();
            loop {
                let st = m.stats()?;
                if st.page_faults_handled == st.page_faults
                    || start.elapsed() > Duration::from_secs(5)
                {
                    return Ok(st);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        let (s1, d1) = (answered(src_mr)?, answered(dst_mr)?);
        let what = format!("{op:?} of {n} untouched pages");
        check_bytes(&what, dst, 0, &data)?;
        let groups = (n as u64).div_ceil(GROUP);
        for (side, b, a) in [("source", &s0, &s1), ("target", &d0, &d1)] {
            let (pages, grouped, handled) = (
                a.page_faults - b.page_faults,
                a.page_fault_groups - b.page_fault_groups,
                a.page_faults_handled - b.page_faults_handled,
            );
            // The private target's pages are all requested. The shared source's read faults
            // may map neighbours already in the page cache (the kernel's fault-around), which
            // the next group then finds present.
            let exact = side == "target";
            check!(
                handled == pages
                    && if exact {
                        pages == n as u64 && grouped == groups
                    } else {
                        pages <= n as u64 && (1..=groups).contains(&grouped)
                    },
                "{what}: the {side} MR counted {pages} pages requested in {grouped} groups, \
                 {handled} handled; want {}{n} in {}{groups}, all handled",
                if exact { "" } else { "at most " },
                if exact { "" } else { "1 to " }
            );
        }
        outln!(
            "# {what}: source {} pages in {} groups, target {} pages in {} groups (completion: {} requests)",
            s1.page_faults - s0.page_faults,
            s1.page_fault_groups - s0.page_fault_groups,
            d1.page_faults - d0.page_faults,
            d1.page_fault_groups - d0.page_fault_groups,
            wr.vendor_err
        );
    }
    Ok(())
}

/// RDMA READ between ODP MRs (the remote side is the source).
fn test_verbs_odp_rc_rdma_read() -> TestResult {
    let p = Pair::odp(ODP_READ, LEN)?;
    odp_iterations(&p, (&p.b.buf, &p.b.mr), (&p.a.buf, &p.a.mr), LEN, |i| {
        let sge = [p.a.sge(0, LEN)];
        p.a.post_ok(p.a.rdma_wr(i as u64, WrOpcode::RdmaRead, &sge, &p.b, 0))?;
        Ok(())
    })
}

/// Atomics between ODP MRs: the remote word and the local result page fault in turn.
fn test_verbs_odp_rc_atomics() -> TestResult {
    let p = Pair::odp(ODP_ATOMIC, LEN)?;
    let local = [p.a.sge(0, 8)];
    for i in 0..ITERS {
        p.dontneed()?;
        let (a0, b0) = (p.a.mr.stats()?, p.b.mr.stats()?);
        // Even: the remote word holds a value, the local result page is untouched.
        // Odd: the remote word is untouched (zero), the local page pre-filled.
        let old = if i % 2 == 0 {
            p.b.buf.write_u64(0, 1000 + i as u64);
            1000 + i as u64
        } else {
            p.a.buf.write_u64(0, u64::MAX);
            0
        };
        let wr = if i < 2 {
            let mut w =
                p.a.rdma_wr(i as u64, WrOpcode::AtomicCmpAndSwp, &local, &p.b, 0);
            w.compare_add = old;
            w.swap = 0x5555_0000 + i as u64;
            w
        } else {
            let mut w =
                p.a.rdma_wr(i as u64, WrOpcode::AtomicFetchAndAdd, &local, &p.b, 0);
            w.compare_add = 7;
            w
        };
        p.a.post_ok(wr)?;
        check_eq!(p.a.buf.read_u64(0), old);
        let new = if i < 2 {
            0x5555_0000 + i as u64
        } else {
            old + 7
        };
        check_eq!(p.b.buf.read_u64(0), new);
        let (a1, b1) = (p.a.mr.stats()?, p.b.mr.stats()?);
        if i % 2 == 0 {
            check_faulted(&format!("iteration {i}, local result"), &a0, &a1, 1)?;
        } else {
            check_faulted(&format!("iteration {i}, remote word"), &b0, &b1, 1)?;
        }
    }
    Ok(())
}

/// Work requests mixing SGEs of ODP and ordinary MRs, on both the gather and scatter sides.
fn test_verbs_odp_mixed_sges() -> TestResult {
    let p = Pair::odp(ODP_SEND | ODP_RECV | ODP_WRITE, LEN)?;
    let plain_a = filled_buffer(2 * PAGE, 0)?;
    let plain_b = filled_buffer(2 * PAGE, 0)?;
    let ma = p.a.pd.reg_mr(&plain_a, ACCESS_ALL)?;
    let mb = p.b.pd.reg_mr(&plain_b, ACCESS_ALL)?;
    for i in 0..ITERS {
        p.dontneed()?;
        let odp_data = pattern(60 + i as u8, 2 * PAGE);
        let plain_data = pattern(70 + i as u8, 2 * PAGE);
        p.a.buf.write(0, &odp_data);
        plain_a.write(0, &plain_data);
        plain_b.fill(0);
        let b0 = p.b.mr.stats()?;
        // ODP, plain, ODP, plain: PAGE + 100 + PAGE + 50 bytes.
        let gather = [
            p.a.sge(0, PAGE),
            ma.sge(0, 100),
            p.a.sge(PAGE, PAGE),
            ma.sge(PAGE as u64, 50),
        ];
        let mut expect = odp_data[..PAGE].to_vec();
        expect.extend_from_slice(&plain_data[..100]);
        expect.extend_from_slice(&odp_data[PAGE..]);
        expect.extend_from_slice(&plain_data[PAGE..PAGE + 50]);
        // Receive: plain (1000 bytes), then ODP (the rest).
        let scatter = [mb.sge(0, 1000), p.b.sge(0, 3 * PAGE)];
        p.b.qp.post_recv(&[RecvWr {
            wr_id: i as u64,
            sg_list: &scatter,
        }])?;
        let r =
            p.a.send_ok(&p.b, SendWr::new(i as u64, WrOpcode::Send, &gather))?;
        check_eq!(r.byte_len, expect.len() as u32);
        check_bytes("plain receive SGE", &plain_b, 0, &expect[..1000])?;
        check_bytes("ODP receive SGE", &p.b.buf, 0, &expect[1000..])?;
        check_faulted("ODP receive SGE", &b0, &p.b.mr.stats()?, 2)?;
        // RDMA write from mixed SGEs into the ODP target.
        p.b.buf.dontneed()?;
        let b1 = p.b.mr.stats()?;
        p.a.post_ok(p.a.rdma_wr(100 + i as u64, WrOpcode::RdmaWrite, &gather, &p.b, 0))?;
        check_bytes("mixed RDMA write", &p.b.buf, 0, &expect)?;
        check_faulted("ODP RDMA write target", &b1, &p.b.mr.stats()?, 2)?;
    }
    Ok(())
}

/// Traffic through implicit MRs on both sides, pages dropped before every iteration.
fn test_verbs_odp_implicit_traffic() -> TestResult {
    let ctx = ibv_ctx()?;
    requires_odp(&ctx, ODP_SEND | ODP_RECV | ODP_WRITE | ODP_READ, true)?;
    let p = Pair::build(&ctx, &ibv_ctx()?, &PairOpts::default())?;
    // SAFETY: the implicit MRs let the device reach all of this process; the test only posts
    // work requests into the `Buffer`s below, which are accessed atomically.
    let (ia, ib) = unsafe {
        (
            p.a.pd.reg_implicit_mr(ACCESS_ALL)?,
            p.b.pd.reg_implicit_mr(ACCESS_ALL)?,
        )
    };
    let (src, dst) = (Buffer::new(LEN)?, Buffer::new(LEN)?);
    let sge = |b: &Buffer, mr: &Mr, off: usize, len: usize| Sge {
        addr: b.addr() + off as u64,
        length: len as u32,
        lkey: mr.lkey(),
    };
    for i in 0..ITERS {
        src.dontneed()?;
        dst.dontneed()?;
        let data = pattern(80 + i as u8, LEN);
        src.write(0, &data);
        let (a0, b0) = (ia.stats()?, ib.stats()?);
        match i % 3 {
            0 => {
                p.b.qp.post_recv(&[RecvWr {
                    wr_id: 1,
                    sg_list: &[sge(&dst, &ib, 0, LEN)],
                }])?;
                p.a.send_ok(
                    &p.b,
                    SendWr::new(2, WrOpcode::Send, &[sge(&src, &ia, 0, LEN)]),
                )?;
                check_faulted("implicit receive", &b0, &ib.stats()?, 4)?;
            }
            1 => {
                p.a.post_ok(
                    SendWr::new(3, WrOpcode::RdmaWrite, &[sge(&src, &ia, 0, LEN)])
                        .remote(dst.addr(), ib.rkey()),
                )?;
                check_faulted("implicit write target", &b0, &ib.stats()?, 4)?;
            }
            _ => {
                // Read back into a's untouched destination from b's source.
                p.a.post_ok(
                    SendWr::new(4, WrOpcode::RdmaRead, &[sge(&dst, &ia, 0, LEN)])
                        .remote(src.addr(), ib.rkey()),
                )?;
                check_faulted("implicit read destination", &a0, &ia.stats()?, 4)?;
            }
        }
        check_bytes(&format!("implicit iteration {i}"), &dst, 0, &data)?;
    }
    Ok(())
}

/// Where the `odp` mode's MRs change from one of the RDMA core's umems to the next: every
/// 2 MiB of the address space (drivers/pfnic/verbs/odp.rs).
const CHILD: usize = 2 << 20;

/// The offset in `buf` (of at least `3 * CHILD` bytes) of a `len`-byte span centred on a
/// 2 MiB boundary.
fn straddling(buf: &Buffer, len: usize) -> usize {
    let at = buf.addr() as usize;
    (at + CHILD).next_multiple_of(CHILD) - len / 2 - at
}

/// Cold RDMA WRITEs and READs of 64 KiB straddling a 2 MiB boundary on both sides (through ODP
/// MRs of 6 MiB, then the implicit MR), their pages dropped before each: every one faults in
/// the pages on both sides of the boundary, moves the right bytes and nothing beside them.
fn test_verbs_odp_across_2mib() -> TestResult {
    const BIG: usize = 3 * CHILD;
    const SPAN: usize = 64 << 10;
    let ctx = ibv_ctx()?;
    requires_odp(&ctx, ODP_WRITE | ODP_READ, true)?;
    let p = Pair::odp(ODP_WRITE | ODP_READ, BIG)?;
    // SAFETY: the implicit MRs let the device reach all of this process; the test only posts
    // work requests into the `Buffer`s below, which are accessed atomically.
    let (ia, ib) = unsafe {
        (
            p.a.pd.reg_implicit_mr(ACCESS_ALL)?,
            p.b.pd.reg_implicit_mr(ACCESS_ALL)?,
        )
    };
    let (src, dst) = (Buffer::new(BIG)?, Buffer::new(BIG)?);
    // Every page of the span faulted in, in at most two groups (the device reports up to 64
    // pages a fault): pages on both sides of the boundary are served together.
    let together = |step: &str, before: &MrStats, after: &MrStats| -> TestResult {
        check_faulted(step, before, after, (SPAN / PAGE) as u64)?;
        let groups = after.page_fault_groups - before.page_fault_groups;
        check!(
            groups <= 2,
            "{step}: {groups} fault groups for {} pages across the boundary",
            SPAN / PAGE
        );
        Ok(())
    };
    let ways: [(&str, &Buffer, &Mr, &Buffer, &Mr); 2] = [
        ("ODP MRs", &p.a.buf, &p.a.mr, &p.b.buf, &p.b.mr),
        ("the implicit MRs", &src, &ia, &dst, &ib),
    ];
    for (what, a, amr, b, bmr) in ways {
        // Small pages: a transparent huge page made present by a sentinel's write would bring
        // half the span with it, and the device would find it present.
        for buf in [a, b] {
            buf.madvise(libc::MADV_NOHUGEPAGE)
                .map_err(|e| fail("madvise(MADV_NOHUGEPAGE)", e))?;
        }
        let (oa, ob) = (straddling(a, SPAN), straddling(b, SPAN));
        for i in 0..ITERS {
            a.dontneed()?;
            b.dontneed()?;
            let data = pattern(0x51 + i as u8, SPAN);
            a.write(oa, &data);
            // Moves the span from `a` to `b` (a WRITE) or back (a READ) into `dst`'s span,
            // whose pages are absent; sentinels in the pages on each side of it.
            let moved = |step: String, op: WrOpcode, dst: &Buffer, off: usize, mr: &Mr| {
                dst.write(off - 8, &[0xa5; 8]);
                dst.write(off + SPAN, &[0xa5; 8]);
                let before = mr.stats()?;
                let local = Sge {
                    addr: a.addr() + oa as u64,
                    length: SPAN as u32,
                    lkey: amr.lkey(),
                };
                p.a.post_ok(
                    SendWr::new(i as u64, op, &[local]).remote(b.addr() + ob as u64, bmr.rkey()),
                )?;
                together(&step, &before, &mr.stats()?)?;
                check_bytes(&step, dst, off, &data)?;
                check_bytes(&step, dst, off - 8, &[0xa5; 8])?;
                check_bytes(&step, dst, off + SPAN, &[0xa5; 8])
            };
            moved(
                format!("{what}, write {i}"),
                WrOpcode::RdmaWrite,
                b,
                ob,
                bmr,
            )?;
            // Back the other way, into `a`'s span dropped again.
            a.dontneed()?;
            moved(format!("{what}, read {i}"), WrOpcode::RdmaRead, a, oa, amr)?;
        }
    }
    outln!("# {ITERS} cold writes and reads of {SPAN} bytes across a 2 MiB boundary, both ways");
    Ok(())
}

/// Waits until `mr`'s `page_prefetch` reaches `want` (asynchronous prefetch).
fn wait_prefetch(mr: &Mr, want: u64) -> Result<MrStats, Failure> {
    let start = Instant::now();
    loop {
        let s = mr.stats()?;
        if s.page_prefetch >= want {
            return Ok(s);
        }
        if start.elapsed() > Duration::from_secs(30) {
            fail!(
                "page_prefetch is {} after 30 s, expected {want}",
                s.page_prefetch
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Prefetches `range` (all of `p.b`'s MR) with `advice` (named `what`) and `flags`, waits
/// until its pages count in `page_prefetch`, then runs `wr` on `p.a`: fails if that traffic
/// faulted on the prefetched pages.
fn prefetched_traffic(
    p: &Pair,
    (what, advice, flags): (&str, u32, u32),
    range: &[Sge],
    wr: SendWr<'_>,
) -> TestResult {
    let b0 = p.b.mr.stats()?;
    p.b.pd.advise_mr(advice, flags, range)?;
    let b1 = wait_prefetch(&p.b.mr, b0.page_prefetch + (LEN / PAGE) as u64)?;
    p.a.post_ok(wr)?;
    let b2 = p.b.mr.stats()?;
    check!(
        b2.page_faults == b1.page_faults,
        "flags {flags}: {} page faults on pages {what} made present",
        b2.page_faults - b1.page_faults
    );
    Ok(())
}

/// `PREFETCH` and `PREFETCH_WRITE`, synchronous (`FLUSH`) and not: the pages count in
/// `page_prefetch`, and the traffic that follows takes no page fault on them.
fn test_verbs_odp_prefetch() -> TestResult {
    let p = Pair::odp(ODP_WRITE | ODP_READ, LEN)?;
    let pages = (LEN / PAGE) as u64;
    let whole = [p.a.sge(0, LEN)];
    for flags in [ADVISE_FLAG_FLUSH, 0] {
        // PREFETCH_WRITE of an RDMA write's target.
        p.dontneed()?;
        let data = pattern(90, LEN);
        p.a.buf.write(0, &data);
        prefetched_traffic(
            &p,
            ("PREFETCH_WRITE", ADVISE_PREFETCH_WRITE, flags),
            &[p.b.sge(0, LEN)],
            p.a.rdma_wr(1, WrOpcode::RdmaWrite, &whole, &p.b, 0),
        )?;
        check_bytes("after PREFETCH_WRITE", &p.b.buf, 0, &data)?;
        // PREFETCH of an RDMA read's remote source (untouched: reads as zeros).
        p.a.buf.fill(0xee);
        p.b.buf.dontneed()?;
        prefetched_traffic(
            &p,
            ("PREFETCH", ADVISE_PREFETCH, flags),
            &[p.b.sge(0, 2 * PAGE), p.b.sge(2 * PAGE, 2 * PAGE)],
            p.a.rdma_wr(2, WrOpcode::RdmaRead, &whole, &p.b, 0),
        )?;
        check_bytes("after PREFETCH", &p.a.buf, 0, &vec![0; LEN])?;
    }
    // Without a prefetch the same write faults: the checks above can fail.
    p.b.buf.dontneed()?;
    let b0 = p.b.mr.stats()?;
    p.a.post_ok(p.a.rdma_wr(3, WrOpcode::RdmaWrite, &whole, &p.b, 0))?;
    check_faulted("write without prefetch", &b0, &p.b.mr.stats()?, pages)?;
    Ok(())
}

/// `PREFETCH_NO_FAULT` never sends a page request: on dropped pages it does nothing (the
/// traffic that follows faults), on present pages it succeeds.
fn test_verbs_odp_prefetch_no_fault() -> TestResult {
    let p = Pair::odp(ODP_WRITE, LEN)?;
    let pages = (LEN / PAGE) as u64;
    p.b.buf.dontneed()?;
    let ctx0 = device_translation()?;
    let b0 = p.b.mr.stats()?;
    // Asynchronous, then synchronous: the ring runs them in order, so both are done after
    // the second returns.
    let target = [p.b.sge(0, LEN)];
    p.b.pd.advise_mr(ADVISE_PREFETCH_NO_FAULT, 0, &target)?;
    p.b.pd
        .advise_mr(ADVISE_PREFETCH_NO_FAULT, ADVISE_FLAG_FLUSH, &target)?;
    let b1 = p.b.mr.stats()?;
    let ctx1 = device_translation()?;
    check_eq!(b1.page_prefetch, b0.page_prefetch);
    check_eq!(b1.page_faults, b0.page_faults);
    check_eq!(ctx1.page_requests, ctx0.page_requests);
    let data = pattern(95, LEN);
    p.a.buf.write(0, &data);
    let sge = [p.a.sge(0, LEN)];
    p.a.post_ok(p.a.rdma_wr(1, WrOpcode::RdmaWrite, &sge, &p.b, 0))?;
    check_faulted(
        "write after PREFETCH_NO_FAULT of dropped pages",
        &b1,
        &p.b.mr.stats()?,
        pages,
    )?;
    check_bytes("after PREFETCH_NO_FAULT", &p.b.buf, 0, &data)?;
    // Present pages: still no page request.
    let ctx2 = device_translation()?;
    p.b.pd
        .advise_mr(ADVISE_PREFETCH_NO_FAULT, ADVISE_FLAG_FLUSH, &target)?;
    check_eq!(device_translation()?.page_requests, ctx2.page_requests);
    Ok(())
}

/// The device's address translation counters (its own query on `/dev/pfnicN`).
fn device_translation() -> Result<pfnic_sys::uapi::TranslationStats, Failure> {
    Ok(crate::common::nic()?.dev.query_stats()?.translation)
}

/// Bad advice: unknown advice or flags, no SGE, a key that is not an MR of the context, a
/// range outside the MR.
fn test_verbs_odp_advise_errors() -> TestResult {
    let p = Pair::odp(ODP_WRITE, LEN)?;
    let pd = &p.b.pd;
    let good = p.b.sge(0, PAGE);
    expect_errno(
        "advice 3",
        pd.advise_mr(3, ADVISE_FLAG_FLUSH, &[good]),
        libc::EINVAL,
    )?;
    expect_errno(
        "flags 2",
        pd.advise_mr(ADVISE_PREFETCH, 2, &[good]),
        libc::EINVAL,
    )?;
    expect_errno(
        "no SGE",
        pd.advise_mr(ADVISE_PREFETCH, 0, &[]),
        libc::EINVAL,
    )?;
    // The RDMA core takes any number of ranges (the private ioctl took 8 at most).
    pd.advise_mr(ADVISE_PREFETCH, ADVISE_FLAG_FLUSH, &[good; 9])?;
    let bad_key = Sge {
        lkey: good.lkey ^ 0x80,
        ..good
    };
    expect_errno(
        "bad lkey",
        pd.advise_mr(ADVISE_PREFETCH, ADVISE_FLAG_FLUSH, &[bad_key]),
        libc::EINVAL,
    )?;
    let other_ctx = p.a.sge(0, PAGE);
    expect_errno(
        "lkey of another context",
        pd.advise_mr(ADVISE_PREFETCH, ADVISE_FLAG_FLUSH, &[other_ctx]),
        libc::EINVAL,
    )?;
    let outside = p.b.sge(LEN - PAGE, 2 * PAGE);
    expect_errno(
        "range beyond the MR",
        pd.advise_mr(ADVISE_PREFETCH, ADVISE_FLAG_FLUSH, &[outside]),
        libc::EINVAL,
    )?;
    // Still works.
    pd.advise_mr(ADVISE_PREFETCH, ADVISE_FLAG_FLUSH, &[good])?;
    Ok(())
}
