//! Fault injection: what the device does when the IOMMU cannot queue its page requests, and
//! when page responses fail. `scripts/test.sh` boots a guest of its own for each, with the
//! device's `x-inject-*` property set and `pfnic_inject=<what>` on the kernel command line;
//! elsewhere these tests skip.

use crate::common::{sva_nic, Nic};
use crate::ibv_common::*;
use crate::ktap::{Failure, Test, TestResult};
use crate::verbs_common::PAGE;
use ibv::{Buffer, SendWr, WcStatus, WrOpcode};
use pfnic_cli::outln;
use pfnic_sys::uapi;

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_inject_prq_full",
        run: test_inject_prq_full,
    },
    &Test {
        name: "test_inject_pri_failure",
        run: test_inject_pri_failure,
    },
    &Test {
        name: "test_inject_ctx_stuck",
        run: test_inject_ctx_stuck,
    },
    &Test {
        name: "test_inject_destroy_busy",
        run: test_inject_destroy_busy,
    },
];

/// Skips unless this guest's device injects `what`.
fn requires_injection(what: &str) -> TestResult {
    let cmdline = std::fs::read_to_string("/proc/cmdline")?;
    if cmdline
        .split_whitespace()
        .any(|w| w == format!("pfnic_inject={what}"))
    {
        Ok(())
    } else {
        Err(Failure::Skip(format!(
            "the device does not inject {what} (scripts/test.sh boots a guest that does)"
        )))
    }
}

/// A cold FILL of `pages` pages through SUBMIT: its status.
fn cold_fill(dev: &pfnic_sys::Device, buf: &Buffer, pages: usize) -> Result<u32, Failure> {
    buf.dontneed()?;
    let mut op = uapi::Submit {
        opcode: uapi::PFNIC_OP_FILL,
        dst: buf.addr(),
        len: (pages * PAGE) as u64,
        pattern: 0x6b6b_6b6b_6b6b_6b6b,
        ..Default::default()
    };
    dev.submit(&mut op)?;
    Ok(op.status)
}

/// Every second page request is refused as if the IOMMU's queue were full: the device retries
/// it, so every transfer still succeeds with the right bytes, and the refusals are counted.
fn test_inject_prq_full() -> TestResult {
    requires_injection("prq-full")?;
    let p = Pair::odp(ODP_WRITE, 16 * PAGE)?;
    let target = CtxDetails::of(&p.b.ctx)?;
    for i in 0..10u8 {
        p.dontneed()?;
        let want = pattern(i, 16 * PAGE);
        p.a.buf.write(0, &want);
        p.a.post_ok(
            SendWr::new(u64::from(i), WrOpcode::RdmaWrite, &[p.a.sge(0, 16 * PAGE)])
                .remote(p.b.buf.addr(), p.b.mr.rkey()),
        )?;
        check_bytes(&format!("write {i}"), &p.b.buf, 0, &want)?;
    }
    let t = target.translation()?;
    check!(t.prq_full > 0, "no refused page request counted: {t:?}");
    check_eq!(t.pri_failed, 0);
    // The descriptor ring's faults are retried the same way.
    let n = sva_nic()?;
    let buf = Buffer::new(16 * PAGE)?;
    for _ in 0..4 {
        check_eq!(cold_fill(&n.dev, &buf, 16)?, uapi::PFNIC_STATUS_SUCCESS);
        check_bytes("filled", &buf, 0, &[0x6b; 16 * PAGE])?;
    }
    check!(
        n.dev.query_context()?.translation.prq_full > 0,
        "SUBMIT: no refused page request counted"
    );
    Ok(())
}

/// Every third page response fails: a one-page RDMA WRITE into a cold page then completes with
/// `REM_ACCESS_ERR` (the QP recovers after a reset), the others land whole; a cold FILL
/// completes `PAGE_FAULT` or `SUCCESS`. Nothing hangs, nothing else is written, and the
/// failures are counted.
fn test_inject_pri_failure() -> TestResult {
    requires_injection("pri-failure")?;
    let p = Pair::odp(ODP_WRITE, 4 * PAGE)?;
    let target = CtxDetails::of(&p.b.ctx)?;
    let (mut ok, mut failed) = (0, 0);
    for i in 0..30u8 {
        p.b.buf.dontneed()?;
        let want = pattern(i, PAGE);
        p.a.buf.write(0, &want);
        p.a.post(
            SendWr::new(u64::from(i), WrOpcode::RdmaWrite, &[p.a.sge(0, PAGE)])
                .remote(p.b.buf.addr() + PAGE as u64, p.b.mr.rkey()),
        )?;
        let wc = wait_cq(&p.a.cq, 1)?[0];
        if wc.status == WcStatus::SUCCESS {
            ok += 1;
            check_bytes(&format!("write {i}"), &p.b.buf, PAGE, &want)?;
        } else if wc.status == WcStatus::REM_ACCESS_ERR || wc.status == WcStatus::LOC_PROT_ERR {
            failed += 1;
            p.a.reconnect(p.b.qp.qp_num())?;
        } else {
            fail!("write {i}: {:?}", wc.status);
        }
        // Nothing outside the target page (dropped: zeros) was written.
        check_bytes(&format!("write {i}, before"), &p.b.buf, 0, &[0; PAGE])?;
        check_bytes(&format!("write {i}, after"), &p.b.buf, 2 * PAGE, &[0; PAGE])?;
    }
    outln!("# {ok} writes, {failed} failed on an injected page response failure");
    check!(
        ok > 0 && failed > 0,
        "{ok} writes succeeded and {failed} failed: expected both"
    );
    check!(
        target.translation()?.pri_failed > 0,
        "no failed response counted"
    );
    let n = sva_nic()?;
    let buf = Buffer::new(PAGE)?;
    let mut statuses = Vec::new();
    for _ in 0..6 {
        statuses.push(cold_fill(&n.dev, &buf, 1)?);
    }
    check!(
        statuses.contains(&uapi::PFNIC_STATUS_SUCCESS)
            && statuses.contains(&uapi::PFNIC_STATUS_PAGE_FAULT)
            && statuses
                .iter()
                .all(|&s| s == uapi::PFNIC_STATUS_SUCCESS || s == uapi::PFNIC_STATUS_PAGE_FAULT),
        "cold FILL statuses {statuses:?}"
    );
    Ok(())
}

/// Every second context stop never completes (the device keeps reporting the context active):
/// the driver keeps that context's PASID bound and its slot out of use, says so, and goes on
/// with the other contexts; an unbind (which resets the device) frees them all.
fn test_inject_ctx_stuck() -> TestResult {
    requires_injection("ctx-stuck")?;
    let n = sva_nic()?;
    let before = n.dev.query_stats()?;
    let log_before = crate::common::dmesg()?.lines().count();
    for _ in 0..4 {
        drop(pfnic_sys::Device::open("/dev/pfnic0")?);
    }
    let after = n.dev.query_stats()?;
    check_eq!(after.contexts_stuck - before.contexts_stuck, 2);
    check_eq!(after.contexts_active, before.contexts_active + 2);
    check_eq!(log_lines_since(log_before, "did not stop")?.len(), 2);
    // The other contexts work.
    let p = Pair::odp(ODP_WRITE, 4 * PAGE)?;
    p.write_ok(1, 4 * PAGE, "a pair beside the stuck contexts")?;
    drop(p);
    // The reset at unbind stops them: after a rebind, none is in use.
    rebind_with_no_context_left(n)?;
    Ok(())
}

/// Closes `n`, unbinds and binds its device again (the reset at unbind frees what the device
/// kept), and checks that only the reopened NIC's own context is in use then (and the
/// driver's, for the RDMA core's kernel clients).
fn rebind_with_no_context_left(n: Nic) -> Result<Nic, Failure> {
    let bdf = n.bdf.clone();
    drop(n);
    crate::common::unbind(&bdf)?;
    crate::common::bind(&bdf)?;
    let n = sva_nic()?;
    let driver = crate::common::driver_contexts(&n.bdf)?;
    check_eq!(n.dev.query_stats()?.contexts_active, 1 + driver);
    Ok(n)
}

/// The kernel log's lines after the first `from` that contain `what`.
fn log_lines_since(from: usize, what: &str) -> Result<Vec<String>, Failure> {
    Ok(crate::common::dmesg()?
        .lines()
        .skip(from)
        .filter(|l| l.contains(what))
        .map(str::to_string)
        .collect())
}

/// The numbers of the objects of `kind` the kernel log says were quarantined since line `from`.
fn quarantined_in_log(from: usize, kind: &str) -> Result<Vec<u32>, Failure> {
    let pat = format!("did not destroy {kind} ");
    Ok(log_lines_since(from, &pat)?
        .iter()
        .filter_map(|l| l.split_once(&pat))
        .filter_map(|(_, rest)| rest.split(':').next()?.trim().parse().ok())
        .collect())
}

/// Every second QP, SRQ or CQ destroy and MR clear is refused by the device, which keeps the
/// object: the driver quarantines it (its memory, its number and its context's slot stay out
/// of use until the device is reset), counts and reports it, and the owner's destroy
/// succeeds; new objects never get a quarantined number, the device goes on working, through
/// pfnic's interface and through the RDMA core (Debian's `ibv_rc_pingpong` on Debian's
/// library, whose close sees refusals too: the core would warn if a destroy failed there),
/// and an unbind frees them.
fn test_inject_destroy_busy() -> TestResult {
    requires_injection("destroy-busy")?;
    let n = sva_nic()?;
    let stats = n.dev.query_stats()?;
    let (before, active) = (stats.objects_quarantined, stats.contexts_active);
    let log_before = crate::common::dmesg()?.lines().count();
    let ctx = ibv_ctx()?;
    for _ in 0..4 {
        drop(Side::from_opts(&ctx, &PairOpts::default())?);
    }
    // The context the objects name stays taken after its file closes.
    drop(ctx);
    let stats = n.dev.query_stats()?;
    check_eq!(stats.contexts_active, active + 1);
    let kept = "stays out of use until the device is reset: the device keeps";
    check_eq!(log_lines_since(log_before, kept)?.len(), 1);
    let quarantined = stats.objects_quarantined - before;
    let qps = quarantined_in_log(log_before, "QP")?;
    let said = log_lines_since(log_before, "did not destroy ")?.len();
    outln!("# {quarantined} objects quarantined, QPs {qps:?}");
    check!(
        quarantined >= 4,
        "{quarantined} objects quarantined, want 4 or more"
    );
    check_eq!(said as u64, quarantined);
    // A quarantined QPN stays taken.
    let ctx = ibv_ctx()?;
    let sides = (0..8)
        .map(|_| Side::from_opts(&ctx, &PairOpts::default()))
        .collect::<Result<Vec<_>, _>>()?;
    for s in &sides {
        check!(
            !qps.contains(&s.qp.qp_num()),
            "QP {} was handed out again while quarantined",
            s.qp.qp_num()
        );
    }
    drop(sides);
    drop(ctx);
    let p = Pair::odp(ODP_WRITE, 4 * PAGE)?;
    p.write_ok(1, 4 * PAGE, "a pair beside the quarantined objects")?;
    drop(p);
    // Through the RDMA core too.
    let tool = "/usr/bin/ibv_rc_pingpong";
    if std::path::Path::new(tool).exists() {
        let mid = n.dev.query_stats()?.objects_quarantined;
        let script = format!(
            "{tool} -n 20 -p 18777 >/dev/null 2>&1 & sleep 1; \
             {tool} -n 20 -p 18777 127.0.0.1 && wait $!"
        );
        let (ok, out) = crate::common::sh("sh", &["-c", &script])?;
        check!(ok, "Debian's ibv_rc_pingpong on Debian's library: {out}");
        check!(
            n.dev.query_stats()?.objects_quarantined > mid,
            "the ping-pong's objects were all destroyed: no refusal through the core"
        );
    }
    // The reset at unbind frees them and their contexts: after a rebind, only this test's
    // own is in use, and the device works.
    let _n = rebind_with_no_context_left(n)?;
    let p = Pair::odp(ODP_WRITE, 4 * PAGE)?;
    p.write_ok(2, 4 * PAGE, "a pair after the rebind")
}
