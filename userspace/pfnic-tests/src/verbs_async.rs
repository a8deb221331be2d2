//! Asynchronous events (rdma-core's `ibv_get_async_event`): a QP's fatal error and a CQ's
//! overflow reach the context that owns them, and only it, naming the object by the context
//! given at creation, through Debian's libibverbs and pfnic's provider; destroying an object
//! drops its events nobody read. The port's events (a GID table change here; the link's in
//! `test_wire_port_events`) reach every context of the device.

use std::time::Duration;

use crate::common::nic;
use crate::ibv_common::{ibv_ctx, Pair, PairOpts, Side};
use crate::ktap::{Failure, Test, TestResult};
use crate::verbs_common::{check_bytes, pattern, port_attr, MrKind, PortAddress, PAGE, WC_TIMEOUT};
use ibv::{event_type, ConnectAttr, Context, Element, Qp, QpInitAttr, QpState, WrOpcode};

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_verbs_async_qp_fatal",
        run: test_verbs_async_qp_fatal,
    },
    &Test {
        name: "test_verbs_async_cq_error",
        run: test_verbs_async_cq_error,
    },
    &Test {
        name: "test_verbs_async_unread_dropped",
        run: test_verbs_async_unread_dropped,
    },
    &Test {
        name: "test_verbs_async_gid_change",
        run: test_verbs_async_gid_change,
    },
];

/// How long a test waits for an event that must come (the device raises it at once).
const EVENT_MS: i32 = 10_000;
/// How long a test waits for an event that must not come.
const QUIET_MS: i32 = 300;

/// The send doorbell register in the context's BAR2 page (docs/verbs.md, "User doorbells").
const DB_SQ: usize = 0x008;

/// Rings QP `qp`'s send doorbell in `ctx`'s doorbell page, mapped from the uverbs file where
/// the provider maps it (`PFNIC_IB_MMAP_DOORBELL`, offset 0), with a tail past any send queue:
/// the device puts the QP in ERR and raises `QP_FATAL` (docs/verbs.md), as for a provider that
/// went wrong.
fn ring_bad_send_tail(ctx: &Context, qp: &Qp) -> TestResult {
    // SAFETY: a new shared mapping of one page of the uverbs file, at an address the kernel
    // picks; unmapped below.
    let db = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            ctx.cmd_fd(),
            0,
        )
    };
    if db == libc::MAP_FAILED {
        fail!("map the doorbell page: {}", std::io::Error::last_os_error());
    }
    // Queues hold at most 2^15 entries: a tail of 2^16 - 1 is past any of them.
    let tail = 0xffff;
    // SAFETY: the send doorbell is an aligned 32-bit register inside the mapped page; device
    // registers take volatile stores; the page is unmapped once, after.
    unsafe {
        core::ptr::write_volatile(
            db.cast::<u8>().add(DB_SQ).cast::<u32>(),
            qp.qp_num() << 16 | tail,
        );
        libc::munmap(db, PAGE);
    }
    Ok(())
}

/// The next event of a context of libibverbs, which must come.
fn ibv_next_event(ctx: &Context, what: &str) -> Result<ibv::AsyncEvent, Failure> {
    match ctx.get_async_event(Some(Duration::from_millis(EVENT_MS as u64)))? {
        Some(ev) => Ok(ev),
        None => fail!("no asynchronous event within {EVENT_MS} ms after {what}"),
    }
}

/// No event of a context of libibverbs within [`QUIET_MS`].
fn ibv_no_event(ctx: &Context, after: &str) -> TestResult {
    if let Some(ev) = ctx.get_async_event(Some(Duration::from_millis(QUIET_MS as u64)))? {
        fail!("unexpected asynchronous event after {after}: {ev:?}");
    }
    Ok(())
}

/// A bad send doorbell makes the QP fatal: one `IBV_EVENT_QP_FATAL` naming the QP and its
/// `qp_context`, to its own context only; another context stays quiet; the context's other
/// QPs work on.
fn test_verbs_async_qp_fatal() -> TestResult {
    let pair = Pair::new(&PairOpts::default())?;
    let qp = pair.a.pd.create_qp(&QpInitAttr {
        qp_context: 0xfeed_f00d_0bad_cafe,
        ..QpInitAttr::new(&pair.a.cq, &pair.a.cq, 8, 1)
    })?;
    qp.connect(pair.b.qp.qp_num(), &ConnectAttr::default())?;
    ibv_no_event(&pair.a.ctx, "connecting")?;
    ring_bad_send_tail(&pair.a.ctx, &qp)?;
    let ev = ibv_next_event(&pair.a.ctx, "a bad send doorbell")?;
    check_eq!(ev.event_type, event_type::QP_FATAL);
    check_eq!(
        ev.element,
        Element::Qp {
            qp_num: qp.qp_num(),
            qp_context: 0xfeed_f00d_0bad_cafe
        }
    );
    check_eq!(qp.state()?, QpState::Err);
    ibv_no_event(&pair.a.ctx, "the QP_FATAL event")?;
    ibv_no_event(&pair.b.ctx, "a QP of another context became fatal")?;
    // The other QPs of the context work on.
    let data = pattern(0x3c, 64);
    pair.a.buf.write(0, &data);
    let sge = [pair.a.sge(0, 64)];
    pair.a
        .post_ok(pair.a.rdma_wr(1, WrOpcode::RdmaWrite, &sge, &pair.b, 0))?;
    check_bytes(
        "a write after another QP became fatal",
        &pair.b.buf,
        0,
        &data,
    )?;
    qp.destroy().map_err(|(_, e)| e)?;
    Ok(())
}

/// A CQ that overflows raises one `IBV_EVENT_CQ_ERR` naming it and its `cq_context` (its QP
/// enters ERR without a `QP_FATAL` of its own: the error is the CQ's).
fn test_verbs_async_cq_error() -> TestResult {
    let ctx = ibv_ctx()?;
    let cq = ctx.create_cq(2, None, 0x00c0_ffee)?;
    let n = cq.entries() as usize;
    let s = Side::basic(&ctx, PAGE, MrKind::Plain)?;
    let d = Side::basic(&ibv_ctx()?, PAGE, MrKind::Plain)?;
    let qp =
        s.pd.create_qp(&QpInitAttr::new(&cq, &cq, (n + 2) as u32, 1))?;
    qp.connect(d.qp.qp_num(), &ConnectAttr::default())?;
    d.qp.connect(qp.qp_num(), &ConnectAttr::default())?;
    let sge = [s.sge(0, 8)];
    for i in 0..=n as u64 {
        qp.post_send(&[s.rdma_wr(i, WrOpcode::RdmaWrite, &sge, &d, 64)])?;
    }
    let ev = ibv_next_event(&ctx, "overflowing a CQ")?;
    check_eq!(ev.event_type, event_type::CQ_ERR);
    check_eq!(
        ev.element,
        Element::Cq {
            handle: cq.handle(),
            cq_context: 0x00c0_ffee
        }
    );
    check_eq!(qp.state()?, QpState::Err);
    ibv_no_event(&ctx, "the CQ_ERR event")?;
    qp.destroy().map_err(|(_, e)| e)?;
    cq.destroy().map_err(|(_, e)| e)?;
    Ok(())
}

/// Events nobody read are dropped with their object: the context does not return them after
/// its destruction (libibverbs would hand out a freed object).
fn test_verbs_async_unread_dropped() -> TestResult {
    let pair = Pair::new(&PairOpts::default())?;
    let make = |context: u64| {
        pair.a.pd.create_qp(&QpInitAttr {
            qp_context: context,
            ..QpInitAttr::new(&pair.a.cq, &pair.a.cq, 8, 1)
        })
    };
    let (unread, read) = (make(1)?, make(2)?);
    for qp in [&unread, &read] {
        qp.connect(pair.b.qp.qp_num(), &ConnectAttr::default())?;
    }
    ring_bad_send_tail(&pair.a.ctx, &unread)?;
    ring_bad_send_tail(&pair.a.ctx, &read)?;
    // Both events are queued once both QPs are in ERR (the device raises the event as the
    // QP enters ERR).
    let deadline = std::time::Instant::now() + WC_TIMEOUT;
    while unread.state()? != QpState::Err || read.state()? != QpState::Err {
        if std::time::Instant::now() > deadline {
            fail!("the QPs did not enter ERR after bad doorbells");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    unread.destroy().map_err(|(_, e)| e)?;
    let ev = ibv_next_event(&pair.a.ctx, "two QPs became fatal")?;
    check_eq!(ev.event_type, event_type::QP_FATAL);
    check!(
        matches!(ev.element, Element::Qp { qp_context: 2, .. }),
        "the event is not the remaining QP's: {ev:?}"
    );
    ibv_no_event(&pair.a.ctx, "the event of the destroyed QP was dropped")?;
    read.destroy().map_err(|(_, e)| e)?;
    Ok(())
}

/// The next event of `ctx` is the port event `kind` for port 1, and nothing follows it.
fn port_event(ctx: &Context, kind: u32, after: &str) -> TestResult {
    let ev = ibv_next_event(ctx, after)?;
    check!(
        ev.event_type == kind && ev.element == Element::Port(1),
        "after {after}: {ev:?}, expected event type {kind} for port 1"
    );
    ibv_no_event(ctx, after)
}

/// Setting the port's IPv4 address (the device file's knob of a port without a wire) changes
/// GID 1: each of two contexts of the device gets one `IBV_EVENT_GID_CHANGE` for port 1, and
/// only one, and reads the new GID; setting the address the port already has changes nothing
/// and raises nothing; clearing it raises one more.
fn test_verbs_async_gid_change() -> TestResult {
    if port_attr()?.has_wire() {
        skip!("a RoCE port's GIDs are its netdev's addresses (test_wire_netdev_*)");
    }
    let a = ibv_ctx()?;
    let b = ibv_ctx()?;
    let (set, first) = PortAddress::change()?;
    port_event(&a, event_type::GID_CHANGE, "setting the port's address")?;
    port_event(&b, event_type::GID_CHANGE, "setting the port's address")?;
    check_eq!(b.query_gid(1, 1)?, ibv::gid_from_ipv4(first));
    let dev = nic()?.dev;
    dev.set_port_ipv4(Some(first))?;
    ibv_no_event(&a, "setting the address the port has")?;
    ibv_no_event(&b, "setting the address the port has")?;
    dev.set_port_ipv4(None)?;
    port_event(&a, event_type::GID_CHANGE, "clearing the port's address")?;
    port_event(&b, event_type::GID_CHANGE, "clearing the port's address")?;
    check_eq!(port_attr()?.ipv4(), None);
    check_eq!(a.query_gid(1, 1)?, [0u8; 16]);
    // Putting the address back is a change too, when there was one.
    let had = set.before();
    drop(set);
    if had.is_some() {
        port_event(&a, event_type::GID_CHANGE, "restoring the port's address")?;
    }
    check_eq!(port_attr()?.ipv4(), had);
    Ok(())
}
