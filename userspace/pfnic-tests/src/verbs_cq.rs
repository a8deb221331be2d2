//! Completion queues through Debian's libibverbs and pfnic's provider (rdma-core's
//! test_cq.py): completion events through a channel, arming, solicited-only, overflow,
//! destroying a CQ in use, and completion timestamps from the device clock.

use std::time::Duration;

use crate::common::expect_errno;
use crate::ibv_common::*;
use crate::ktap::{Failure, Test, TestResult};
use crate::verbs_common::{fail, MrKind, PAGE, WC_TIMEOUT};
use ibv::{
    CompChannel, ConnectAttr, CqEvent, QpInitAttr, QpState, SendWr, Wc, WcOpcode, WcStatus,
    WrOpcode, SEND_SIGNALED, SEND_SOLICITED,
};
use pfnic_sys::uapi;

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_verbs_cq_events",
        run: test_verbs_cq_events,
    },
    &Test {
        name: "test_verbs_cq_solicited_only",
        run: test_verbs_cq_solicited_only,
    },
    &Test {
        name: "test_verbs_cq_overflow",
        run: test_verbs_cq_overflow,
    },
    &Test {
        name: "test_verbs_cq_destroy_in_use",
        run: test_verbs_cq_destroy_in_use,
    },
    &Test {
        name: "test_verbs_cq_bad_args",
        run: test_verbs_cq_bad_args,
    },
    &Test {
        name: "test_verbs_cq_timestamps",
        run: test_verbs_cq_timestamps,
    },
];

/// Posts a signaled 8-byte RDMA write on `qp` (a QP of `src`'s PD connected to `dst`'s QP)
/// from `src`'s buffer into `dst`'s.
fn post_write(qp: &ibv::Qp, src: &Side, dst: &Side, wr_id: u64) -> TestResult {
    let sge = [src.sge(0, 8)];
    qp.post_send(&[src.rdma_wr(wr_id, WrOpcode::RdmaWrite, &sge, dst, 64)])?;
    Ok(())
}

/// The channel's next event within `ms` milliseconds.
fn event(ch: &CompChannel, ms: u64) -> Result<Option<CqEvent>, Failure> {
    Ok(ch.get_event(Some(Duration::from_millis(ms)))?)
}

/// A side of 16 CQ entries and 8 work requests in `ctx`, its buffer registered with every
/// access.
fn side(ctx: &ibv::Context) -> Result<Side, Failure> {
    Side::basic(ctx, PAGE, MrKind::Plain)
}

/// `ibv_req_notify_cq` + `poll()` + `ibv_get_cq_event`: no event unarmed or before a
/// completion; one event per arming, naming the CQ by its `cq_context` and number; none for
/// completions that were there before the arming (as `ibv_req_notify_cq`: only a new CQE
/// raises one); two CQs of one channel are told apart.
fn test_verbs_cq_events() -> TestResult {
    let ctx = ibv_ctx()?;
    let ch = ctx.create_comp_channel()?;
    let cq = ctx.create_cq(16, Some(&ch), 0x1234_5678_9abc_def0)?;
    let s = side(&ctx)?;
    let d = side(&ibv_ctx()?)?;
    let qp = s.pd.create_qp(&QpInitAttr::new(&cq, &cq, 8, 4))?;
    qp.connect(d.qp.qp_num(), &ConnectAttr::default())?;
    d.qp.connect(qp.qp_num(), &ConnectAttr::default())?;
    check!(event(&ch, 0)?.is_none(), "event before anything happened");
    // Unarmed: a completion queues no event.
    post_write(&qp, &s, &d, 1)?;
    check_wc(
        &wait_cq(&cq, 1)?[0],
        WcStatus::SUCCESS,
        Some(WcOpcode::RDMA_WRITE),
    )?;
    check!(event(&ch, 200)?.is_none(), "event from an unarmed CQ");
    // Armed: nothing until the completion.
    cq.req_notify(false)?;
    check!(event(&ch, 200)?.is_none(), "event from an armed, empty CQ");
    post_write(&qp, &s, &d, 2)?;
    let ev = event(&ch, WC_TIMEOUT.as_millis() as u64)?
        .ok_or_else(|| Failure::Fail("no completion event within the timeout".into()))?;
    check_eq!(ev.cq_context, 0x1234_5678_9abc_def0);
    check_eq!(ev.cq_handle, cq.handle());
    check_eq!(wait_cq(&cq, 1)?[0].wr_id, 2);
    // One event per arming.
    post_write(&qp, &s, &d, 3)?;
    wait_cq(&cq, 1)?;
    check!(event(&ch, 200)?.is_none(), "second event for one arming");
    // Blocking wait: a thread waits for the channel (poll(), then ibv_get_cq_event) until the
    // armed CQ completes; should no event come, it gives up after the timeout.
    std::thread::scope(|scope| -> TestResult {
        let waiter = scope.spawn(|| ch.get_event(Some(WC_TIMEOUT)));
        std::thread::sleep(Duration::from_millis(100));
        check!(
            !waiter.is_finished(),
            "the wait ended before any completion"
        );
        cq.req_notify(false)?;
        post_write(&qp, &s, &d, 4)?;
        let ev = waiter
            .join()
            .map_err(|_| Failure::Fail("the waiting thread panicked".into()))??;
        check!(
            ev.is_some_and(|ev| ev.cq_handle == cq.handle()),
            "the waiting thread got {ev:?}"
        );
        Ok(())
    })?;
    check_eq!(wait_cq(&cq, 1)?[0].wr_id, 4);
    // Armed with a completion waiting: no event for it, one for the next.
    post_write(&qp, &s, &d, 5)?;
    std::thread::sleep(Duration::from_millis(100));
    let mut wc = [Wc::default(); 1];
    let deadline = std::time::Instant::now() + WC_TIMEOUT;
    // Wait until the CQE is there without consuming it: the QP's send head moves when the
    // device completes the WQE.
    while qp_counter(&s.ctx, &qp, "wqes")? < 5 {
        if std::time::Instant::now() > deadline {
            fail!("the fifth write did not complete");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cq.req_notify(false)?;
    if let Some(ev) = event(&ch, 300)? {
        fail!("an event for a completion written before the arming: {ev:?}");
    }
    check_eq!(cq.poll(&mut wc), 1);
    check_eq!(wc[0].wr_id, 5);
    post_write(&qp, &s, &d, 55)?;
    check!(
        event(&ch, WC_TIMEOUT.as_millis() as u64)?.is_some_and(|ev| ev.cq_handle == cq.handle()),
        "no event for the completion after the arming"
    );
    check_eq!(wait_cq(&cq, 1)?[0].wr_id, 55);
    // Two CQs on one channel.
    let cq2 = ctx.create_cq(4, Some(&ch), 77)?;
    let qp2 = s.pd.create_qp(&QpInitAttr::new(&cq2, &cq2, 4, 1))?;
    let d2 = side(&d.ctx)?;
    qp2.connect(d2.qp.qp_num(), &ConnectAttr::default())?;
    d2.qp.connect(qp2.qp_num(), &ConnectAttr::default())?;
    cq2.req_notify(false)?;
    cq.req_notify(false)?;
    post_write(&qp2, &s, &d2, 6)?;
    let ev = event(&ch, WC_TIMEOUT.as_millis() as u64)?
        .ok_or_else(|| Failure::Fail("no event for the second CQ".into()))?;
    check_eq!((ev.cq_context, ev.cq_handle), (77, cq2.handle()));
    check!(event(&ch, 200)?.is_none(), "event for the idle CQ");
    check_eq!(wait_cq(&cq2, 1)?[0].wr_id, 6);
    Ok(())
}

/// Armed for solicited completions only: an ordinary receive queues no event, a solicited
/// one does.
fn test_verbs_cq_solicited_only() -> TestResult {
    let ctx = ibv_ctx()?;
    let ch = ctx.create_comp_channel()?;
    let rcq = ctx.create_cq(16, Some(&ch), 5)?;
    let r = side(&ctx)?;
    let rqp = r.pd.create_qp(&QpInitAttr::new(&r.cq, &rcq, 8, 4))?;
    let s = side(&ibv_ctx()?)?;
    rqp.connect(s.qp.qp_num(), &ConnectAttr::default())?;
    s.qp.connect(rqp.qp_num(), &ConnectAttr::default())?;
    let recv = |id: u64| {
        let sge = [r.sge(0, 64)];
        rqp.post_recv(&[ibv::RecvWr {
            wr_id: id,
            sg_list: &sge,
        }])
    };
    recv(1)?;
    recv(2)?;
    rcq.req_notify(true)?;
    s.post(SendWr::new(10, WrOpcode::Send, &[s.sge(0, 16)]))?;
    check_wc(&s.wait(1)?[0], WcStatus::SUCCESS, Some(WcOpcode::SEND))?;
    check!(
        event(&ch, 300)?.is_none(),
        "an unsolicited receive raised a solicited-only event"
    );
    s.post(SendWr::new(11, WrOpcode::Send, &[s.sge(0, 16)]).flags(SEND_SIGNALED | SEND_SOLICITED))?;
    let ev = event(&ch, WC_TIMEOUT.as_millis() as u64)?
        .ok_or_else(|| Failure::Fail("no event for a solicited receive".into()))?;
    check_eq!((ev.cq_context, ev.cq_handle), (5, rcq.handle()));
    let wcs = wait_cq(&rcq, 2)?;
    check_eq!((wcs[0].wr_id, wcs[1].wr_id), (1, 2));
    Ok(())
}

/// More completions than the CQ holds: no CQE is lost silently, the CQ's QP enters ERR, the
/// QP at the other end is untouched.
fn test_verbs_cq_overflow() -> TestResult {
    let ctx = ibv_ctx()?;
    let cq = ctx.create_cq(2, None, 0)?;
    let n = cq.entries() as usize;
    check!(n >= 2 && n.is_power_of_two(), "{n} entries for 2");
    let s = side(&ctx)?;
    let d = side(&ibv_ctx()?)?;
    let qp =
        s.pd.create_qp(&QpInitAttr::new(&cq, &cq, (n + 2) as u32, 1))?;
    qp.connect(d.qp.qp_num(), &ConnectAttr::default())?;
    d.qp.connect(qp.qp_num(), &ConnectAttr::default())?;
    for i in 0..=n as u64 {
        post_write(&qp, &s, &d, i)?;
    }
    let deadline = std::time::Instant::now() + WC_TIMEOUT;
    while qp.state()? != QpState::Err {
        if std::time::Instant::now() > deadline {
            fail!("the QP of an overflowing CQ is in {:?}", qp.state()?);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut wcs = vec![Wc::default(); 2 * n + 2];
    let got = cq.poll(&mut wcs);
    check_eq!(got, n);
    for (i, w) in wcs[..n].iter().enumerate() {
        check_eq!(w.wr_id, i as u64);
        check_eq!(w.status, WcStatus::SUCCESS);
    }
    check_eq!(d.state()?, QpState::Rts);
    Ok(())
}

/// `ibv_destroy_cq` is `EBUSY` while a QP uses the CQ (as send or receive CQ) and works
/// after the QP is gone.
fn test_verbs_cq_destroy_in_use() -> TestResult {
    let ctx = ibv_ctx()?;
    let pd = ctx.alloc_pd()?;
    let scq = ctx.create_cq(4, None, 0)?;
    let rcq = ctx.create_cq(4, None, 0)?;
    let qp = pd.create_qp(&QpInitAttr::new(&scq, &rcq, 4, 1))?;
    let scq = match scq.destroy() {
        Ok(_) => fail!("destroying the send CQ of a QP succeeded"),
        Err((cq, e)) => {
            check_eq!(e.raw_os_error(), Some(libc::EBUSY));
            cq
        }
    };
    let rcq = match rcq.destroy() {
        Ok(_) => fail!("destroying the receive CQ of a QP succeeded"),
        Err((cq, e)) => {
            check_eq!(e.raw_os_error(), Some(libc::EBUSY));
            cq
        }
    };
    qp.destroy().map_err(|(_, e)| fail("destroy_qp", e))?;
    scq.destroy().map_err(|(_, e)| fail("destroy send CQ", e))?;
    rcq.destroy()
        .map_err(|(_, e)| fail("destroy receive CQ", e))?;
    Ok(())
}

/// CQ sizes out of range are refused; sizes are rounded up to a power of two.
fn test_verbs_cq_bad_args() -> TestResult {
    let ctx = ibv_ctx()?;
    let max = ctx.query_device()?.max_cqe as u32;
    expect_errno("ibv_create_cq(0)", ctx.create_cq(0, None, 0), libc::EINVAL)?;
    expect_errno(
        "ibv_create_cq(max + 1)",
        ctx.create_cq(max + 1, None, 0),
        libc::EINVAL,
    )?;
    let big = ctx.create_cq(max, None, 0)?;
    check_eq!(big.entries(), max);
    let odd = ctx.create_cq(5, None, 0)?;
    check_eq!(odd.entries(), 8);
    drop((big, odd));

    Ok(())
}

/// Completion timestamps: the device clock (`ibv_query_rt_values_ex`) never goes back; a
/// timestamped CQ's completions (`ibv_create_cq_ex`) carry the clock between a read before the
/// work was posted and one after its completion was seen, in nondecreasing order, across
/// several wraps of a small ring (64-byte CQEs); a plain CQ's carry none.
fn test_verbs_cq_timestamps() -> TestResult {
    let ctx = ibv_ctx()?;
    if crate::common::nic()?.dev.query()?.caps & uapi::PFNIC_CAP_TIMESTAMPS == 0 {
        expect_errno(
            "ibv_create_cq_ex with timestamps on a device without",
            ctx.create_cq_timestamped(4, None, 0),
            libc::EOPNOTSUPP,
        )?;
        return Err(Failure::Skip(
            "the device has no timestamps (PFNIC_CAP_TIMESTAMPS)".into(),
        ));
    }
    let mut last = ctx.read_clock()?;
    for _ in 0..100 {
        let now = ctx.read_clock()?;
        check!(now >= last, "the clock went back: {last} then {now}");
        last = now;
    }
    let d = side(&ibv_ctx()?)?;
    let s = side(&ctx)?;
    let tcq = ctx.create_cq_timestamped(4, None, 0)?;
    check!(tcq.timestamps(), "a timestamped CQ without timestamps");
    check_eq!(tcq.entries(), 4);
    let qp = s.pd.create_qp(&QpInitAttr::new(&tcq, &s.cq, 4, 1))?;
    qp.connect(d.qp.qp_num(), &ConnectAttr::default())?;
    d.qp.connect(qp.qp_num(), &ConnectAttr::default())?;
    let mut prev = 0;
    for i in 0..13u64 {
        let before = ctx.read_clock()?;
        post_write(&qp, &s, &d, i)?;
        let wc = wait_cq(&tcq, 1)?[0];
        let after = ctx.read_clock()?;
        check_eq!((wc.wr_id, wc.status), (i, WcStatus::SUCCESS));
        check_eq!(wc.opcode, WcOpcode::RDMA_WRITE);
        check_eq!(wc.qp_num, qp.qp_num());
        check!(
            before <= wc.completion_ts && wc.completion_ts <= after,
            "completion {i} at {} outside [{before}, {after}]",
            wc.completion_ts
        );
        check!(
            wc.completion_ts >= prev,
            "completion {i} before the one ahead of it"
        );
        prev = wc.completion_ts;
    }
    // A plain CQ on the same QP (its receive CQ) has none.
    let rqp = s.pd.create_qp(&QpInitAttr::new(&s.cq, &s.cq, 4, 1))?;
    rqp.connect(d.qp.qp_num(), &ConnectAttr::default())?;
    post_write(&rqp, &s, &d, 99)?;
    let wc = s.wait(1)?[0];
    check_eq!((wc.wr_id, wc.completion_ts), (99, 0));
    Ok(())
}
