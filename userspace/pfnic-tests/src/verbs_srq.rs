//! Shared receive queues through Debian's libibverbs and pfnic's provider (rdma-core's
//! test_srq.py): several QPs take receives from one SRQ in the order they were posted, an
//! empty SRQ is an RNR wait, the limit event, the last-WQE event, and bad arguments at every
//! layer (the private ioctls' own too, while they exist).

use std::sync::Arc;

use std::time::Duration;

use crate::common::expect_errno;
use crate::ibv_common::*;
use crate::ktap::{Failure, Test, TestResult};
use crate::verbs_common::{fail, MrKind, ACCESS_ALL, PAGE};
use ibv::{
    event_type, AsyncEvent, Buffer, ConnectAttr, Context, Cq, Element, Mr, Qp, QpInitAttr, QpState,
    RecvWr, SendWr, Srq, SrqInitAttr, WcOpcode, WcStatus, WrOpcode,
};

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_verbs_srq_shared",
        run: test_verbs_srq_shared,
    },
    &Test {
        name: "test_verbs_srq_rnr",
        run: test_verbs_srq_rnr,
    },
    &Test {
        name: "test_verbs_srq_limit",
        run: test_verbs_srq_limit,
    },
    &Test {
        name: "test_verbs_srq_last_wqe",
        run: test_verbs_srq_last_wqe,
    },
    &Test {
        name: "test_verbs_srq_other_pd_key",
        run: test_verbs_srq_other_pd_key,
    },
    &Test {
        name: "test_verbs_srq_bad_args",
        run: test_verbs_srq_bad_args,
    },
];

/// Bytes of each receive buffer slot.
const SLOT: usize = 256;

/// The receiving side: a context with an SRQ, a CQ and `n` QPs taking receives from the SRQ,
/// each connected to a QP of a sending side in another context.
struct SrqSetup {
    senders: Vec<Side>,
    qps: Vec<Qp>,
    srq: Srq,
    cq: Cq,
    mr: Mr,
    buf: Arc<Buffer>,
    ctx: Context,
}

/// A context whose device has SRQs (skips otherwise).
fn srq_ctx() -> Result<Context, Failure> {
    let ctx = ibv_ctx()?;
    if ctx.query_device()?.max_srq == 0 {
        return Err(Failure::Skip("the device has no SRQs (max_srq 0)".into()));
    }
    Ok(ctx)
}

/// The context's next asynchronous event within `ms` milliseconds.
fn event(ctx: &Context, ms: u64) -> Result<Option<AsyncEvent>, Failure> {
    Ok(ctx.get_async_event(Some(Duration::from_millis(ms)))?)
}

impl SrqSetup {
    fn new(n: usize, srq_attr: SrqInitAttr, connect: ConnectAttr) -> Result<Self, Failure> {
        let ctx = srq_ctx()?;
        let pd = ctx.alloc_pd()?;
        let cq = ctx.create_cq(64, None, 0)?;
        let srq = pd
            .create_srq(&srq_attr)
            .map_err(|e| fail("create_srq", e))?;
        let buf = Arc::new(Buffer::new(16 * PAGE)?);
        buf.fill(0);
        let mr = pd.reg_mr(&buf, ACCESS_ALL)?;
        let mut senders = Vec::new();
        let mut qps = Vec::new();
        for i in 0..n {
            let sender = Side::basic(&ibv_ctx()?, PAGE, MrKind::Plain)?;
            let qp = pd
                .create_qp(&QpInitAttr {
                    srq: Some(&srq),
                    qp_context: 0x5100 + i as u64,
                    ..QpInitAttr::new(&cq, &cq, 8, 1)
                })
                .map_err(|e| fail("create_qp with an SRQ", e))?;
            check_eq!(qp.cap().max_recv_wr, 0);
            qp.connect(sender.qp.qp_num(), &connect)?;
            sender.qp.connect(qp.qp_num(), &connect)?;
            senders.push(sender);
            qps.push(qp);
        }
        Ok(Self {
            senders,
            qps,
            srq,
            cq,
            mr,
            buf,
            ctx,
        })
    }

    /// Posts receive `wr_id` into slot `slot` of the buffer.
    fn post_recv(&self, wr_id: u64, slot: usize) -> TestResult {
        let sge = [self.mr.sge((slot * SLOT) as u64, SLOT as u32)];
        self.srq
            .post_recv(&[RecvWr {
                wr_id,
                sg_list: &sge,
            }])
            .map_err(|e| Failure::Fail(format!("post_srq_recv: {e}")))
    }

    /// Sender `i` SENDs `len` bytes of pattern `seed` and completes.
    fn send(&self, i: usize, seed: u8, len: usize) -> TestResult {
        let s = &self.senders[i];
        s.buf.write(0, &pattern(seed, len));
        s.post_ok(SendWr::new(
            u64::from(seed),
            WrOpcode::Send,
            &[s.sge(0, len)],
        ))?;
        Ok(())
    }
}

/// `srq_attr` of `max_wr` receives of one SGE.
fn srq_attr(max_wr: u32, srq_limit: u32) -> SrqInitAttr {
    SrqInitAttr {
        max_wr,
        max_sge: 1,
        srq_limit,
        srq_context: 0x5a5a,
    }
}

/// Two QPs share one SRQ: SENDs to either take its receives in the order they were posted,
/// each completing on the receive CQ with the QP that took it; a QP with an SRQ has no
/// receive queue of its own.
fn test_verbs_srq_shared() -> TestResult {
    let t = SrqSetup::new(2, srq_attr(16, 0), ConnectAttr::default())?;
    for i in 0..4 {
        t.post_recv(100 + i, i as usize)?;
    }
    let order = [
        (0usize, 11u8, 64usize),
        (1, 22, 200),
        (0, 33, 1),
        (1, 44, SLOT),
    ];
    for (k, &(sender, seed, len)) in order.iter().enumerate() {
        t.send(sender, seed, len)?;
        let wc = wait_cq(&t.cq, 1)?[0];
        check_wc(&wc, WcStatus::SUCCESS, Some(WcOpcode::RECV))?;
        check_eq!(wc.wr_id, 100 + k as u64);
        check_eq!(wc.qp_num, t.qps[sender].qp_num());
        check_eq!(wc.src_qp, t.senders[sender].qp.qp_num());
        check_eq!(wc.byte_len as usize, len);
        check_bytes("an SRQ receive", &t.buf, k * SLOT, &pattern(seed, len))?;
    }
    // An SRQ's receives take as many SGEs as the device's (what was asked, or more).
    let q = t.srq.query()?;
    let max_sge = t.ctx.query_device()?.max_srq_sge as u32;
    check_eq!((q.max_wr, q.max_sge, q.srq_limit), (16, max_sge, 0));
    let sge = [t.mr.sge(0, 8)];
    let r = t.qps[0].post_recv(&[RecvWr {
        wr_id: 1,
        sg_list: &sge,
    }]);
    check!(
        r.as_ref().is_err_and(|e| e.errno() == libc::EINVAL),
        "post_recv on a QP with an SRQ: {r:?}"
    );
    check_cq_empty(&t.cq)?;
    Ok(())
}

/// An empty SRQ makes the sender wait (RNR) instead of failing; a post to the SRQ lets the
/// waiting SEND complete.
fn test_verbs_srq_rnr() -> TestResult {
    let t = SrqSetup::new(1, srq_attr(4, 0), ConnectAttr::default())?;
    let s = &t.senders[0];
    s.buf.write(0, &pattern(7, 100));
    s.post(SendWr::new(7, WrOpcode::Send, &[s.sge(0, 100)]))?;
    std::thread::sleep(std::time::Duration::from_millis(300));
    check_cq_empty(&s.cq)?;
    check_cq_empty(&t.cq)?;
    check!(
        qp_counter(&t.ctx, &t.qps[0], "rnr_waits")? == 0,
        "the receiver counts RNR waits, the sender does"
    );
    check!(
        qp_counter(&s.ctx, &s.qp, "rnr_waits")? > 0,
        "the sender never waited"
    );
    t.post_recv(9, 3)?;
    s.wait_wc(WcStatus::SUCCESS, Some(WcOpcode::SEND))?;
    let wc = wait_cq(&t.cq, 1)?[0];
    check_wc(&wc, WcStatus::SUCCESS, Some(WcOpcode::RECV))?;
    check_eq!(wc.wr_id, 9);
    check_bytes(
        "the receive after an RNR wait",
        &t.buf,
        3 * SLOT,
        &pattern(7, 100),
    )?;
    Ok(())
}

/// The limit: armed at creation, it fires once when a take leaves fewer receives than the
/// limit, naming the SRQ and its `srq_context`, and reads 0 afterwards; re-armed, it fires
/// again; a limit above the SRQ's size is `EINVAL`.
fn test_verbs_srq_limit() -> TestResult {
    let t = SrqSetup::new(1, srq_attr(8, 2), ConnectAttr::default())?;
    check_eq!(t.srq.query()?.srq_limit, 2);
    for i in 0..4 {
        t.post_recv(i, i as usize)?;
    }
    // 4 -> 3 -> 2 posted: not below 2.
    t.send(0, 1, 8)?;
    t.send(0, 2, 8)?;
    wait_cq(&t.cq, 2)?;
    if let Some(ev) = event(&t.ctx, 300)? {
        fail!("an event before the SRQ fell below its limit: {ev:?}");
    }
    // 2 -> 1: below the limit.
    t.send(0, 3, 8)?;
    wait_cq(&t.cq, 1)?;
    let ev = event(&t.ctx, 10_000)?.ok_or_else(|| Failure::Fail("no SRQ limit event".into()))?;
    check_eq!(ev.event_type, event_type::SRQ_LIMIT_REACHED);
    check_eq!(
        ev.element,
        Element::Srq {
            handle: t.srq.handle(),
            srq_context: 0x5a5a
        }
    );
    check_eq!(t.srq.query()?.srq_limit, 0);
    // Disarmed: the last take raises nothing.
    t.send(0, 4, 8)?;
    wait_cq(&t.cq, 1)?;
    if let Some(ev) = event(&t.ctx, 300)? {
        fail!("a second limit event without re-arming: {ev:?}");
    }
    // Re-armed with 1: the next take that leaves none fires it.
    expect_errno(
        "a limit above the SRQ's size",
        t.srq.arm_limit(9),
        libc::EINVAL,
    )?;
    t.srq.arm_limit(1)?;
    t.post_recv(10, 5)?;
    t.send(0, 5, 8)?;
    wait_cq(&t.cq, 1)?;
    let ev = event(&t.ctx, 10_000)?
        .ok_or_else(|| Failure::Fail("no SRQ limit event after re-arming".into()))?;
    check_eq!(ev.event_type, event_type::SRQ_LIMIT_REACHED);
    Ok(())
}

/// A QP with an SRQ that enters ERR raises `IBV_EVENT_QP_LAST_WQE_REACHED`; the SRQ's
/// receives stay for the other QPs, and none is flushed by the QP in ERR.
fn test_verbs_srq_last_wqe() -> TestResult {
    let t = SrqSetup::new(2, srq_attr(8, 0), ConnectAttr::default())?;
    for i in 0..2 {
        t.post_recv(200 + i, i as usize)?;
    }
    let attr = ibv::QpAttr {
        qp_state: QpState::Err as u32,
        ..Default::default()
    };
    t.qps[0].modify(&attr, ibv::qp_attr::STATE)?;
    let ev = event(&t.ctx, 10_000)?.ok_or_else(|| Failure::Fail("no last-WQE event".into()))?;
    check_eq!(ev.event_type, event_type::QP_LAST_WQE_REACHED);
    check_eq!(
        ev.element,
        Element::Qp {
            qp_num: t.qps[0].qp_num(),
            qp_context: 0x5100
        }
    );
    check_cq_empty(&t.cq)?;
    t.send(1, 9, 32)?;
    let wc = wait_cq(&t.cq, 1)?[0];
    check_wc(&wc, WcStatus::SUCCESS, Some(WcOpcode::RECV))?;
    check_eq!((wc.wr_id, wc.qp_num), (200, t.qps[1].qp_num()));
    Ok(())
}

/// A receive posted to the SRQ with the key of an MR of another PD than the SRQ's: the
/// receiver completes `LOC_PROT_ERR`, the sender `REM_OP_ERR`.
fn test_verbs_srq_other_pd_key() -> TestResult {
    let t = SrqSetup::new(1, srq_attr(4, 0), ConnectAttr::default())?;
    let other_pd = t.ctx.alloc_pd()?;
    let other_buf = Arc::new(Buffer::new(PAGE)?);
    other_buf.fill(0);
    let other_mr = other_pd.reg_mr(&other_buf, ACCESS_ALL)?;
    let sge = [other_mr.sge(0, 64)];
    t.srq
        .post_recv(&[RecvWr {
            wr_id: 77,
            sg_list: &sge,
        }])
        .map_err(|e| Failure::Fail(format!("post_srq_recv: {e}")))?;
    let s = &t.senders[0];
    s.post(SendWr::new(1, WrOpcode::Send, &[s.sge(0, 16)]))?;
    s.wait_wc(WcStatus::REM_OP_ERR, Some(WcOpcode::SEND))?;
    let wc = wait_cq(&t.cq, 1)?[0];
    check_wc(&wc, WcStatus::LOC_PROT_ERR, None)?;
    check_eq!(wc.wr_id, 77);
    check_bytes(
        "a buffer behind another PD's key",
        &other_buf,
        0,
        &[0u8; 16],
    )?;
    Ok(())
}

/// Bad arguments, each with its errno, through libibverbs and at the private ioctls.
fn test_verbs_srq_bad_args() -> TestResult {
    let ctx = srq_ctx()?;
    let v = ctx.query_device()?;
    let (max_wr, max_sge) = (v.max_srq_wr as u32, v.max_srq_sge as u32);
    let pd = ctx.alloc_pd()?;
    let attr = |max_wr, max_sge, srq_limit| SrqInitAttr {
        max_wr,
        max_sge,
        srq_limit,
        srq_context: 0,
    };
    for (what, a) in [
        ("max_wr 0", attr(0, 1, 0)),
        ("max_wr above max_srq_wr", attr(max_wr + 1, 1, 0)),
        ("max_sge above max_srq_sge", attr(4, max_sge + 1, 0)),
        ("a limit above max_wr", attr(4, 1, 5)),
    ] {
        expect_errno(what, pd.create_srq(&a).map(drop), libc::EINVAL)?;
    }
    let srq = pd.create_srq(&attr(4, 1, 0))?;
    let q = srq.query()?;
    check_eq!((q.max_wr, q.max_sge), (4, max_sge));
    expect_errno(
        "resizing an SRQ",
        srq.modify(ibv::sys::ibv_srq_attr_mask_IBV_SRQ_MAX_WR, 8, 0),
        libc::EOPNOTSUPP,
    )?;
    // Full: the fifth receive of four is ENOMEM, and the four before it are posted.
    let buf = Arc::new(Buffer::new(PAGE)?);
    buf.fill(0);
    let mr = pd.reg_mr(&buf, ACCESS_ALL)?;
    let sge = [mr.sge(0, 8)];
    let wrs: Vec<RecvWr<'_>> = (0..5)
        .map(|wr_id| RecvWr {
            wr_id,
            sg_list: &sge,
        })
        .collect();
    let r = srq.post_recv(&wrs);
    check!(
        r.as_ref()
            .is_err_and(|e| e.errno() == libc::ENOMEM && e.bad_wr == 4),
        "posting 5 receives to an SRQ of 4: {r:?}"
    );
    let many = [mr.sge(0, 8); 5];
    let r = srq.post_recv(&[RecvWr {
        wr_id: 9,
        sg_list: &many,
    }]);
    check!(
        r.as_ref().is_err_and(|e| e.errno() == libc::EINVAL),
        "a receive with 5 SGEs: {r:?}"
    );
    Ok(())
}
