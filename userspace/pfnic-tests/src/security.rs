//! Trust boundaries between processes: a QP accepts work only from the QP it was connected to,
//! remote keys cannot be guessed and guessing is visible to the victim, a completion channel
//! carries only the events of its own CQs and cannot be borrowed by another context, and one
//! process's faults cannot take every page request the device has.
//!
//! Each "attacker" here is a context of its own (a separate open of the device), which is what
//! a separate process is to the device and the driver.

use crate::common::{dmesg, expect_errno};
use crate::ktap::{Failure, Test, TestResult};
use crate::verbs_common::*;
use pfnic_cli::outln;
use pfnic_verbs::{ConnectAttr, QpState, SendWr, WcStatus, WrOpcode};

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_sec_qp_only_from_peer",
        run: test_sec_qp_only_from_peer,
    },
    &Test {
        name: "test_sec_rkey_scan",
        run: test_sec_rkey_scan,
    },
    &Test {
        name: "test_sec_uverbs_channel_isolation",
        run: test_sec_uverbs_channel_isolation,
    },
    &Test {
        name: "test_sec_page_request_share",
        run: test_sec_page_request_share,
    },
];

/// Random 32-bit values, from the kernel (no crate needed for a handful of keys).
fn random_u32s(n: usize) -> Result<Vec<u32>, Failure> {
    let mut bytes = vec![0u8; 4 * n];
    let mut done = 0;
    while done < bytes.len() {
        // SAFETY: the pointer and length describe the unfilled tail of `bytes`.
        let r =
            unsafe { libc::getrandom(bytes[done..].as_mut_ptr().cast(), bytes.len() - done, 0) };
        if r <= 0 {
            fail!("getrandom: {}", std::io::Error::last_os_error());
        }
        done += r as usize;
    }
    Ok(bytes
        .chunks(4)
        .map(|c| u32::from_ne_bytes(c.try_into().unwrap()))
        .collect())
}

/// A third process's context (through libibverbs, as any program) connects a QP of its own
/// to a connected QP of another context and tries SEND, RDMA WRITE and RDMA READ with the
/// victim's real address and key: every one completes `RETRY_EXC_ERR` (the responder drops
/// what is not from its peer, as on a wire), the victim's memory, receive queue and state are
/// untouched, its QP counts the refusals (`rdma resource show qp -dd`), and its real peer
/// still gets through to the receive the intruder could not take.
fn test_sec_qp_only_from_peer() -> TestResult {
    use crate::ibv_common as core;
    let p = core::Pair::new(&core::PairOpts::default())?;
    let victim = &p.b;
    victim.buf.fill(0x5a);
    victim.post_recv(77, 0, PAGE)?;
    let intruder = core::Side::basic(&core::ibv_ctx()?, 4 * PAGE, MrKind::Plain)?;
    intruder.buf.fill(0xee);
    intruder
        .qp
        .connect(victim.qp.qp_num(), &ConnectAttr::default())
        .map_err(|e| fail("connect the intruder", e))?;
    let sge = [intruder.sge(0, 64)];
    let tries = [
        SendWr::new(1, WrOpcode::Send, &sge),
        intruder.rdma_wr(2, WrOpcode::RdmaWrite, &sge, victim, 0),
        intruder.rdma_wr(3, WrOpcode::RdmaRead, &sge, victim, 0),
    ];
    for (i, wr) in tries.into_iter().enumerate() {
        if i > 0 {
            intruder.reconnect(victim.qp.qp_num())?;
        }
        intruder.post(wr)?;
        intruder.wait_wc(WcStatus::RETRY_EXC_ERR, None)?;
    }
    check_bytes("the victim's memory", &victim.buf, 0, &[0x5a; 4 * PAGE])?;
    check_bytes("the intruder's read target", &intruder.buf, 0, &[0xee; 64])?;
    check_eq!(victim.state()?, QpState::Rts);
    core::check_cq_empty(&victim.cq)?;
    check_eq!(core::qp_counter(&victim.ctx, &victim.qp, "refused")?, 3);
    // The peer's SEND takes the receive the intruder could not.
    p.a.buf.write(0, &pattern(3, 64));
    p.a.post_ok(SendWr::new(4, WrOpcode::Send, &[p.a.sge(0, 64)]))?;
    let wc = victim.wait_wc(WcStatus::SUCCESS, None)?;
    check_eq!(wc.wr_id, 77);
    check_eq!(wc.src_qp, p.a.qp.qp_num());
    check_bytes("sent by the peer", &victim.buf, 0, &pattern(3, 64))?;
    Ok(())
}

/// Completion channels of contexts opened through libibverbs: a channel carries only its own
/// CQs' events (two channels and a CQ without one, each armed, each completing), and another
/// process's context cannot make a CQ on it: the RDMA core looks the channel up in the
/// caller's own uverbs file (`EBADF`), and the channel works on.
fn test_sec_uverbs_channel_isolation() -> TestResult {
    use crate::ibv_common as core;
    let ctx = core::ibv_ctx()?;
    let peer = core::ibv_ctx()?;
    let (ch1, ch2) = (ctx.create_comp_channel()?, ctx.create_comp_channel()?);
    check!(
        ch1.fd() != ch2.fd() && ch1.fd() != ctx.cmd_fd(),
        "channels share a file"
    );
    let s = core::Side::basic(&ctx, PAGE, MrKind::Plain)?;
    let cq1 = ctx.create_cq(16, Some(&ch1), 1)?;
    let cq2 = ctx.create_cq(16, Some(&ch2), 2)?;
    let qp1 = s.pd.create_qp(&ibv::QpInitAttr::new(&cq1, &cq1, 8, 1))?;
    let qp2 = s.pd.create_qp(&ibv::QpInitAttr::new(&cq2, &cq2, 8, 1))?;
    let d = [
        core::Side::basic(&peer, PAGE, MrKind::Plain)?,
        core::Side::basic(&peer, PAGE, MrKind::Plain)?,
        core::Side::basic(&peer, PAGE, MrKind::Plain)?,
    ];
    for (qp, b) in [(&qp1, &d[0]), (&qp2, &d[1]), (&s.qp, &d[2])] {
        qp.connect(b.qp.qp_num(), &ConnectAttr::default())?;
        b.qp.connect(qp.qp_num(), &ConnectAttr::default())?;
    }
    let sge = [s.sge(0, 8)];
    for (i, (qp, cq, dst)) in [
        (&qp1, &cq1, &d[0]),
        (&qp2, &cq2, &d[1]),
        (&s.qp, &s.cq, &d[2]),
    ]
    .into_iter()
    .enumerate()
    {
        cq.req_notify(false)?;
        qp.post_send(&[s.rdma_wr(i as u64, WrOpcode::RdmaWrite, &sge, dst, 0)])?;
        let wc = core::wait_cq(cq, 1)?[0];
        check_eq!((wc.wr_id, wc.status), (i as u64, WcStatus::SUCCESS));
    }
    for (name, ch, cq, context) in [("first", &ch1, &cq1, 1), ("second", &ch2, &cq2, 2)] {
        let ev = ch
            .get_event(Some(WC_TIMEOUT))?
            .ok_or_else(|| Failure::Fail(format!("no event on the {name} channel")))?;
        check_eq!((ev.cq_handle, ev.cq_context), (cq.handle(), context));
    }
    // Every event has had time to arrive; none more on either channel (the channel-less CQ's
    // included).
    std::thread::sleep(std::time::Duration::from_millis(300));
    for ch in [&ch1, &ch2] {
        let ev = ch.get_event(Some(std::time::Duration::ZERO))?;
        check!(ev.is_none(), "an event of another CQ on a channel: {ev:?}");
    }
    // Borrowing: the channel's descriptor is valid in this process, but the RDMA core finds
    // no channel of the other context's file behind it (EBADF).
    expect_errno(
        "ibv_create_cq on another context's channel",
        peer.create_cq(4, Some(&ch1), 0).map(drop),
        libc::EBADF,
    )?;
    // The channel and the peer's context work on.
    cq1.req_notify(false)?;
    qp1.post_send(&[s.rdma_wr(9, WrOpcode::RdmaWrite, &sge, &d[0], 0)])?;
    check_eq!(core::wait_cq(&cq1, 1)?[0].status, WcStatus::SUCCESS);
    check!(
        ch1.get_event(Some(WC_TIMEOUT))?
            .is_some_and(|ev| ev.cq_handle == cq1.handle()),
        "no event on the channel after the attempt"
    );
    Ok(())
}

/// Attempts of the rkey scan (each is a work request, a completion and a QP reset).
const SCAN_ATTEMPTS: usize = 100_000;

/// A connected peer (a context opened through libibverbs, as any program's) tries random
/// rkeys against the other side's buffer: none works, the victim's memory is untouched, the
/// kernel log reports every refusal in the victim's context (rate-limited), and a real key
/// used past its MR counts on that MR (`rdma statistic mr`).
fn test_sec_rkey_scan() -> TestResult {
    use crate::ibv_common as core;
    let p = core::Pair::new(&core::PairOpts::default())?;
    let (scanner, victim) = (&p.a, &p.b);
    victim.buf.fill(0x33);
    check_eq!(
        core::mr_counter(&victim.ctx, &victim.mr, "remote_access_errors")?,
        0
    );
    let log_before = dmesg()?.lines().count();
    let started = std::time::Instant::now();
    let real = victim.mr.rkey();
    let keys: Vec<u32> = random_u32s(SCAN_ATTEMPTS)?
        .into_iter()
        .map(|k| if k == real { k ^ 1 } else { k })
        .collect();
    let sge = [scanner.sge(0, 8)];
    // Most of the scan is the QP's way back to RTS (four ibv_modify_qp): said apart.
    let mut resetting = std::time::Duration::ZERO;
    for (i, &key) in keys.iter().enumerate() {
        if i > 0 {
            let reset = std::time::Instant::now();
            scanner.reconnect(victim.qp.qp_num())?;
            resetting += reset.elapsed();
        }
        scanner.post(
            SendWr::new(i as u64, WrOpcode::RdmaWrite, &sge).remote(victim.buf.addr(), key),
        )?;
        scanner
            .wait_wc(WcStatus::REM_ACCESS_ERR, None)
            .map_err(|e| match e {
                Failure::Fail(m) => Failure::Fail(format!("key {key:#x} (attempt {i}): {m}")),
                other => other,
            })?;
    }
    let scan_time = started.elapsed();
    outln!(
        "# rkey scan: {SCAN_ATTEMPTS} keys in {:.1} s, {:.1} s of them resetting the QP",
        scan_time.as_secs_f64(),
        resetting.as_secs_f64()
    );
    check_bytes("the scanned buffer", &victim.buf, 0, &[0x33; 4 * PAGE])?;
    check_eq!(
        core::mr_counter(&victim.ctx, &victim.mr, "remote_access_errors")?,
        0
    );
    // The real key, past the end of its MR: refused, and counted by the MR as well.
    scanner.reconnect(victim.qp.qp_num())?;
    scanner.post(
        SendWr::new(1 << 40, WrOpcode::RdmaWrite, &[scanner.sge(0, 16)])
            .remote(victim.buf.addr() + 4 * PAGE as u64 - 8, real),
    )?;
    scanner.wait_wc(WcStatus::REM_ACCESS_ERR, None)?;
    check_eq!(
        core::mr_counter(&victim.ctx, &victim.mr, "remote_access_errors")?,
        1
    );
    let total = SCAN_ATTEMPTS as u64 + 1;
    // The kernel log says so: once the rate limit's second has passed, the driver's next
    // command reports the count so far, for the victim's (hardware) context.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    scanner.reconnect(victim.qp.qp_num())?;
    let lines: Vec<String> = dmesg()?
        .lines()
        .skip(log_before)
        .filter(|l| l.contains("remote accesses refused"))
        .map(str::to_owned)
        .collect();
    check!(
        lines
            .iter()
            .any(|l| l.contains(&format!(": {total} remote accesses refused"))),
        "no kernel message with the count {total}: {lines:?}"
    );
    // At most one line a second (and one at the start).
    let allowed = scan_time.as_secs() as usize + 3;
    check!(
        lines.len() <= allowed,
        "{} kernel messages in {scan_time:?}: not rate-limited",
        lines.len()
    );
    Ok(())
}

/// One process with twelve QPs whose cold transfers all fault at once may have only a quarter
/// of the device's outstanding page requests: the rest wait their turn (counted in
/// `prq_held`), every transfer still completes with the right bytes, and another process's
/// cold transfer meanwhile completes too.
fn test_sec_page_request_share() -> TestResult {
    const PAIRS: usize = 12;
    // A group of 64 pages per QP: 12 of them are far beyond a context's share.
    const LEN: usize = 64 * PAGE;
    use crate::ibv_common as core;
    let hog = core::ibv_ctx()?;
    core::requires_odp(&hog, ODP_WRITE, false)?;
    let o = core::PairOpts {
        len: LEN,
        kind: MrKind::Odp,
        ..Default::default()
    };
    let pairs = (0..PAIRS)
        .map(|_| core::Pair::build(&hog, &hog, &o))
        .collect::<Result<Vec<_>, _>>()?;
    let other = core::Pair::odp(ODP_WRITE, LEN)?;
    let details = core::CtxDetails::of(&hog)?;
    // Whether the hog's groups are all out at once depends on how fast the IOMMU answers: a
    // burst may find the first answered before the last is sent. Bursts until one reached
    // the share (a few at most).
    const BURSTS: u64 = 8;
    let mut t = details.translation()?;
    for burst in 0..BURSTS {
        for (i, p) in pairs.iter().enumerate() {
            p.dontneed()?;
            // The source present again, the target cold: every page of it faults.
            p.a.buf.write(0, &pattern(i as u8 ^ burst as u8, LEN));
        }
        other.dontneed()?;
        other.a.buf.write(0, &pattern(0x77, LEN));
        // All at once: every QP faults on its first page.
        for (i, p) in pairs.iter().enumerate() {
            p.a.post(
                ibv::SendWr::new(i as u64, WrOpcode::RdmaWrite, &[p.a.sge(0, LEN)])
                    .remote(p.b.buf.addr(), p.b.mr.rkey()),
            )?;
        }
        other.a.post_ok(
            ibv::SendWr::new(99, WrOpcode::RdmaWrite, &[other.a.sge(0, LEN)])
                .remote(other.b.buf.addr(), other.b.mr.rkey()),
        )?;
        check_bytes(
            "the other process's transfer",
            &other.b.buf,
            0,
            &pattern(0x77, LEN),
        )?;
        for (i, p) in pairs.iter().enumerate() {
            check_wc(&core::wait_cq(&p.a.cq, 1)?[0], WcStatus::SUCCESS, None)?;
            let want = pattern(i as u8 ^ burst as u8, LEN);
            check_bytes(&format!("burst {burst}, pair {i}"), &p.b.buf, 0, &want)?;
        }
        t = details.translation()?;
        if t.prq_held > 0 {
            outln!("# burst {burst} reached the context's share");
            break;
        }
    }
    check!(
        t.prq_held > 0,
        "{PAIRS} QPs faulting at once, {BURSTS} times, none held back: {t:?}"
    );
    // Each QP waits for its own group: several are out at once, up to the context's share.
    check!(
        t.page_request_groups_max > 1,
        "{PAIRS} QPs faulting at once, never more than one page request group out: {t:?}"
    );
    outln!(
        "# {} page requests held back, {} sent in {} groups, at most {} groups out at once",
        t.prq_held,
        t.page_requests,
        t.page_request_groups,
        t.page_request_groups_max
    );
    Ok(())
}
