//! Allocation failures under the verbs, forced with fail-nth
//! (Documentation/fault-injection/fault-injection.rst) on the debug kernel, which has failslab
//! and fail_page_alloc: every verb that allocates in the kernel (`ibv_open_device`, which makes
//! a user context of the RDMA core and binds the address space, alloc PD, create CQ and QP,
//! register an on-demand and an ordinary MR, and each QP transition), called through Debian's
//! libibverbs and pfnic's provider as a program calls it, runs with the kernel's first, then
//! second, then third ... allocation of the thread failing, until it runs through without
//! reaching the armed one. Each failure must come back from libibverbs as a clean `ENOMEM` (an
//! open: what libibverbs and the kernel make of some failures, [`OPEN_ERRNOS`]) that leaves
//! the device's tables (and the QP's state) as they were: the RDMA core, the driver and the
//! provider each undo what they began. Afterwards the process still does RDMA and the
//! tables come back to where they started.
//!
//! Only the verb runs between arming and disarming. The library allocates in the process's own
//! heap too, whose first touch of a new page would be an allocation of the thread's: the whole
//! sequence runs once unarmed first, so that the heap has its pages.

use pfnic_cli::outln;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::ktap::{Failure, Test, TestResult};
use crate::matrix::table_usage;
use crate::verbs_common::*;
use ibv::{qp_attr, DeviceList, QpAttr, QpInitAttr, QpState, ACCESS_ON_DEMAND};

pub const TESTS: &[&Test] = &[&Test {
    name: "test_matrix_fail_nth",
    run: test_matrix_fail_nth,
}];

const FAIL_NTH: &str = "/proc/thread-self/fail-nth";
/// What a verb whose allocation failed must answer: `ENOMEM`.
const ENOMEM_ONLY: &[i32] = &[libc::ENOMEM];
/// `ibv_open_device` too, or what others make of it: libibverbs of a failed `open()` of the
/// uverbs file (it then looks for the device node another way, rdma-core's
/// `open_cdev_robust`, whose failure is `ENOSYS`), and the kernel of a failed allocation in
/// `remap_pfn_range()` of the doorbell page (`pfnmap_track_ctx_alloc()` answers any error of
/// the PAT memtype reservation with `EINVAL`).
const OPEN_ERRNOS: &[i32] = &[libc::ENOMEM, libc::ENOSYS, libc::EINVAL];
/// Enough for any of the calls: one that still fails at this depth does not converge.
const MAX_NTH: u32 = 2000;

/// Debugfs knobs of the fault injection, put back on drop.
struct Knobs(Vec<(String, String)>);

impl Knobs {
    fn set(&mut self, path: &str, value: &str) -> TestResult {
        let old = std::fs::read_to_string(path).map_err(|e| fail(path, e))?;
        std::fs::write(path, value).map_err(|e| fail(path, e))?;
        self.0.push((path.into(), old.trim().into()));
        Ok(())
    }
}

impl Drop for Knobs {
    fn drop(&mut self) {
        for (path, old) in self.0.iter().rev() {
            let _ = std::fs::write(path, old);
        }
    }
}

/// This thread's fail-nth: arming it makes the n-th allocation of the thread fail.
struct FailNth(File);

impl FailNth {
    /// Writes `n` (formatted by the caller beforehand: nothing may allocate once armed).
    fn arm(&self, n: &[u8]) -> std::io::Result<()> {
        self.0.write_at(n, 0).map(|_| ())
    }

    /// Reads the value back and disarms: 0 if the armed failure was injected, else how many
    /// allocations were still to go.
    fn disarm(&self) -> Result<u32, Failure> {
        let mut b = [0u8; 16];
        let n = self.0.read_at(&mut b, 0)?;
        self.0.write_at(b"0", 0)?;
        let left = std::str::from_utf8(&b[..n])
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| fail("fail-nth", format!("unreadable: {:?}", &b[..n])))?;
        Ok(left)
    }
}

/// What the injection did to one call.
#[derive(Default)]
struct Outcome {
    /// Injected failures the call returned as an error.
    failed: u32,
    /// Injected failures the call survived: allocations with a fallback, such as kmemleak's
    /// record of each allocation (it falls back to its pool), about every other one here.
    absorbed: u32,
}

/// Runs `call` with the n-th allocation failing, for n = 1, 2, ... until a run does not reach
/// the armed one; returns that run's result. Each injected failure must come back as
/// one of `errnos` (or be survived: then `undo` takes the result back), and `clean` must hold after
/// it: whatever the failed call began is undone.
fn each_failure<T>(
    f: &FailNth,
    what: &str,
    errnos: &[i32],
    mut call: impl FnMut() -> std::io::Result<T>,
    mut undo: impl FnMut(T) -> TestResult,
    clean: impl Fn() -> TestResult,
) -> Result<(T, Outcome), Failure> {
    let mut out = Outcome::default();
    for n in 1..=MAX_NTH {
        let armed = n.to_string();
        f.arm(armed.as_bytes())?;
        let r = call();
        let left = f.disarm()?;
        if left != 0 {
            let v = r.map_err(|e| fail(&format!("{what} with nothing injected"), e))?;
            outln!(
                "# {what}: {} allocations; {} failed cleanly, {} survived",
                n - 1,
                out.failed,
                out.absorbed
            );
            return Ok((v, out));
        }
        match r {
            Err(e) if e.raw_os_error().is_some_and(|e| errnos.contains(&e)) => out.failed += 1,
            Err(e) => fail!("{what} with allocation {n} failing: {e}, expected one of {errnos:?}"),
            Ok(v) => {
                out.absorbed += 1;
                undo(v)?;
            }
        }
        clean().map_err(|e| match e {
            Failure::Fail(m) => Failure::Fail(format!("{what} with allocation {n} failing: {m}")),
            s => s,
        })?;
    }
    fail!("{what}: still failing with allocation {MAX_NTH}")
}

/// Fails unless the device's tables hold `want` (QPs, CQs, MRs, contexts).
fn tables_are(want: [u64; 4]) -> TestResult {
    check_eq!(table_usage()?, want);
    Ok(())
}

/// Table usage `base` with `d` added.
fn plus(base: [u64; 4], d: [u64; 4]) -> [u64; 4] {
    std::array::from_fn(|i| base[i] + d[i])
}

/// The QP's state, as `ibv_query_qp` reports it.
fn qp_state(qp: &ibv::Qp) -> Result<QpState, Failure> {
    Ok(qp.state()?)
}

/// The transitions RESET→INIT→RTR→RTS of a QP connected to `dest` (libibverbs' attribute
/// masks) on port 1, whose attributes are `port`.
fn transitions(dest: u32, port: &ibv::sys::ibv_port_attr) -> [(QpAttr, u32); 3] {
    let init = QpAttr {
        qp_state: QpState::Init as u32,
        port_num: 1,
        qp_access_flags: ACCESS_ALL,
        ..Default::default()
    };
    let rtr = QpAttr {
        qp_state: QpState::Rtr as u32,
        path_mtu: port.active_mtu,
        dest_qp_num: dest,
        max_dest_rd_atomic: 1,
        dlid: port.lid.into(),
        ..init
    };
    let rts = QpAttr {
        qp_state: QpState::Rts as u32,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 1,
        ..rtr
    };
    [(init, INIT_MASK), (rtr, RTR_MASK), (rts, RTS_MASK)]
}

/// The sequence once, nothing armed: the library's and the provider's heap gets its pages.
fn warm_up(devices: &DeviceList, name: &str, buf: &std::sync::Arc<ibv::Buffer>) -> TestResult {
    let ctx = devices.open(name)?;
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(16, None, 0)?;
    let qp = pd.create_qp(&QpInitAttr::new(&cq, &cq, 8, 1))?;
    let peer = pd.create_qp(&QpInitAttr::new(&cq, &cq, 8, 1))?;
    let mrs = vec![
        pd.reg_mr(buf, ACCESS_ALL | ACCESS_ON_DEMAND)?,
        pd.reg_mr(buf, ACCESS_ALL)?,
    ];
    let port = ctx.query_port(1)?;
    for (a, mask) in transitions(peer.qp_num(), &port) {
        qp.modify(&a, mask)?;
    }
    // A tuple drops in order: the QPs and MRs before their PD and CQ, all before the context.
    drop((qp, peer, mrs, cq, pd, ctx));
    Ok(())
}

fn test_matrix_fail_nth() -> TestResult {
    if !Path::new(FAIL_NTH).exists() {
        skip!("no {FAIL_NTH}: this kernel has no fault injection (make test-debug has)");
    }
    // Skips where the device has no verbs.
    drop(crate::ibv_common::ibv_ctx()?);
    let mut knobs = Knobs(Vec::new());
    for dir in ["failslab", "fail_page_alloc"] {
        let d = format!("/sys/kernel/debug/{dir}");
        // Quiet (a verbose injection prints a stack trace, which fails the run), and on for
        // the allocations that may sleep, GFP_KERNEL, which are most of the driver's.
        knobs.set(&format!("{d}/verbose"), "0")?;
        knobs.set(&format!("{d}/ignore-gfp-wait"), "N")?;
    }
    // Single pages too (the rings and the DMA memory of the driver are order 0 or more).
    knobs.set("/sys/kernel/debug/fail_page_alloc/min-order", "0")?;
    let f = FailNth(
        File::options()
            .read(true)
            .write(true)
            .open(FAIL_NTH)
            .map_err(|e| fail(FAIL_NTH, e))?,
    );
    let bind_msgs = || -> Result<usize, Failure> {
        Ok(crate::common::dmesg()?
            .matches("cannot bind the process's address space")
            .count())
    };
    let bind_msgs_before = bind_msgs()?;
    let base = table_usage()?;
    let buf = filled_buffer(4 * PAGE, 0x5a)?;
    let name = crate::rdma_core::ib_name()?;
    // Listed before any arming: the list reads sysfs, which is not the verbs' business.
    let devices = DeviceList::new()?;
    warm_up(&devices, &name, &buf)?;
    let mut totals = Outcome::default();
    let mut add = |o: Outcome| {
        totals.failed += o.failed;
        totals.absorbed += o.absorbed;
    };
    {
        let (ctx, o) = each_failure(
            &f,
            "ibv_open_device",
            OPEN_ERRNOS,
            || devices.open(&name),
            |c| {
                drop(c);
                Ok(())
            },
            || tables_are(base),
        )?;
        add(o);
        let opened = plus(base, [0, 0, 0, 1]);
        let (pd, o) = each_failure(
            &f,
            "ibv_alloc_pd",
            ENOMEM_ONLY,
            || ctx.alloc_pd(),
            |pd| Ok(pd.dealloc().map_err(|(_, e)| e)?),
            || tables_are(opened),
        )?;
        add(o);
        let (cq, o) = each_failure(
            &f,
            "ibv_create_cq",
            ENOMEM_ONLY,
            || ctx.create_cq(16, None, 0),
            |cq| Ok(cq.destroy().map_err(|(_, e)| e)?),
            || tables_are(opened),
        )?;
        add(o);
        let with_cq = plus(opened, [0, 1, 0, 0]);
        let (qp, o) = each_failure(
            &f,
            "ibv_create_qp",
            ENOMEM_ONLY,
            || pd.create_qp(&QpInitAttr::new(&cq, &cq, 8, 1)),
            |qp| Ok(qp.destroy().map_err(|(_, e)| e)?),
            || tables_are(with_cq),
        )?;
        add(o);
        let peer = pd.create_qp(&QpInitAttr::new(&cq, &cq, 8, 1))?;
        let with_qps = plus(with_cq, [2, 0, 0, 0]);
        let mut mrs = Vec::new();
        for (what, access) in [
            ("ibv_reg_mr, on demand", ACCESS_ALL | ACCESS_ON_DEMAND),
            ("ibv_reg_mr", ACCESS_ALL),
        ] {
            let with_mrs = plus(with_qps, [0, 0, mrs.len() as u64, 0]);
            let (mr, o) = each_failure(
                &f,
                what,
                ENOMEM_ONLY,
                || pd.reg_mr(&buf, access),
                |mr| Ok(mr.dereg().map_err(|(_, e)| e)?),
                || tables_are(with_mrs),
            )?;
            add(o);
            mrs.push(mr);
        }
        let port = ctx.query_port(1)?;
        let steps = transitions(peer.qp_num(), &port);
        for (i, (what, (attr, mask))) in [
            "ibv_modify_qp to INIT",
            "ibv_modify_qp to RTR",
            "ibv_modify_qp to RTS",
        ]
        .into_iter()
        .zip(&steps)
        .enumerate()
        {
            let from = qp_state(&qp)?;
            let ((), o) = each_failure(
                &f,
                what,
                ENOMEM_ONLY,
                || qp.modify(attr, *mask),
                // Survived: back to RESET, and through the steps before this one again.
                |()| {
                    let reset = QpAttr {
                        qp_state: QpState::Reset as u32,
                        ..Default::default()
                    };
                    qp.modify(&reset, qp_attr::STATE)?;
                    for (a, m) in &steps[..i] {
                        qp.modify(a, *m)?;
                    }
                    Ok(())
                },
                || {
                    check_eq!(qp_state(&qp)?, from);
                    Ok(())
                },
            )?;
            add(o);
        }
        for (a, m) in &transitions(qp.qp_num(), &port) {
            peer.modify(a, *m)?;
        }
        check_eq!(qp_state(&qp)?, QpState::Rts);
        check_eq!(qp_state(&peer)?, QpState::Rts);
        tables_are(plus(with_qps, [0, 0, 2, 0]))?;
        // Closed with everything in it, as a process that exits would (in dependency order).
        drop((qp, peer, mrs, cq, pd, ctx));
    }
    tables_are(base)?;
    drop(knobs);
    // The process still does RDMA, with every allocation allowed again.
    crate::ibv_common::Pair::odp(ODP_WRITE, 16 * PAGE)?.write_ok(
        0x3b,
        16 * PAGE,
        "after the injected failures",
    )?;
    tables_are(base)?;
    outln!(
        "# {} injected failures failed cleanly, {} were survived; tables back to {base:?}",
        totals.failed,
        totals.absorbed
    );
    // An allocation failure is not reported as a platform without SVA.
    check_eq!(bind_msgs()?, bind_msgs_before);
    check!(
        totals.failed > 0,
        "no injected failure reached the driver's calls"
    );
    Ok(())
}
