//! Allocation failures in the driver's ioctls, forced with fail-nth
//! (Documentation/fault-injection/fault-injection.rst) on the debug kernel, which has failslab
//! and fail_page_alloc: every allocating call (open, which binds the address space, alloc PD,
//! create CQ and QP, register an ODP and a plain MR, and each QP transition) runs with its
//! first, then second, then third ... allocation failing, until it runs through without
//! reaching the armed one. Each failure must be a clean `ENOMEM` that leaves the device's
//! tables (and the QP's state) as they were; afterwards the process still does RDMA and the
//! tables come back to where they started. The calls go straight to the ioctls: nothing
//! between arming and the call may allocate (the test's own heap included).

use pfnic_cli::outln;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::ktap::{Failure, Test, TestResult};
use crate::matrix::table_usage;
use crate::verbs_common::*;
use pfnic_sys::{uapi, Device};
use pfnic_verbs::{qp_attr, QpAttr, QpState};

pub const TESTS: &[&Test] = &[&Test {
    name: "test_matrix_fail_nth",
    run: test_matrix_fail_nth,
}];

const FAIL_NTH: &str = "/proc/thread-self/fail-nth";
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
/// `ENOMEM` (or be survived: then `undo` takes the result back), and `clean` must hold after
/// it: whatever the failed call began is undone.
fn each_failure<T>(
    f: &FailNth,
    what: &str,
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
                "# {what}: {} allocations; {} failed with ENOMEM, {} survived",
                n - 1,
                out.failed,
                out.absorbed
            );
            return Ok((v, out));
        }
        match r {
            Err(e) if e.raw_os_error() == Some(libc::ENOMEM) => out.failed += 1,
            Err(e) => fail!("{what} with allocation {n} failing: {e}, expected ENOMEM"),
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

/// The QP's state as the device reports it.
fn qp_state(dev: &Device, qpn: u32) -> Result<u32, Failure> {
    Ok(dev.query_qp(qpn)?.attr.qp_state)
}

/// The transitions RESET→INIT→RTR→RTS of QP `qpn` connected to `dest` (libibverbs' attribute
/// masks), for the port `port`.
fn transitions(qpn: u32, dest: u32, port: &pfnic_verbs::QueryPort) -> [uapi::ModifyQp; 3] {
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
    [
        uapi::ModifyQp {
            qpn,
            attr_mask: INIT_MASK,
            attr: init,
        },
        uapi::ModifyQp {
            qpn,
            attr_mask: RTR_MASK,
            attr: rtr,
        },
        uapi::ModifyQp {
            qpn,
            attr_mask: RTS_MASK,
            attr: rts,
        },
    ]
}

/// The `CREATE_QP` argument of an RC QP of PD `pd` with `max_wr` work requests of one SGE
/// each way, for tests that drive the ioctls directly.
fn raw_rc_qp(pd: u32, send_cq: u32, recv_cq: u32, max_wr: u32) -> uapi::CreateQp {
    uapi::CreateQp {
        pd,
        send_cq,
        recv_cq,
        qp_type: uapi::PFNIC_QPT_RC,
        cap: uapi::QpCap {
            max_send_wr: max_wr,
            max_recv_wr: max_wr,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        ..Default::default()
    }
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
    let mut totals = Outcome::default();
    let mut add = |o: Outcome| {
        totals.failed += o.failed;
        totals.absorbed += o.absorbed;
    };
    {
        let (dev, o) = each_failure(
            &f,
            "open",
            || Device::open("/dev/pfnic0"),
            |d| {
                drop(d);
                Ok(())
            },
            || tables_are(base),
        )?;
        add(o);
        let opened = plus(base, [0, 0, 0, 1]);
        let (pd, o) = each_failure(
            &f,
            "alloc PD",
            || dev.alloc_pd(),
            |pd| Ok(dev.dealloc_pd(pd)?),
            || tables_are(opened),
        )?;
        add(o);
        let (cq, o) = each_failure(
            &f,
            "create CQ",
            || {
                let mut cq = uapi::CreateCq {
                    cqe: 16,
                    channel: -1,
                    ..Default::default()
                };
                dev.create_cq(&mut cq).map(|()| cq)
            },
            |cq| Ok(dev.destroy_cq(cq.cqn).map(drop)?),
            || tables_are(opened),
        )?;
        add(o);
        let with_cq = plus(opened, [0, 1, 0, 0]);
        let (qp, o) = each_failure(
            &f,
            "create QP",
            || {
                let mut qp = raw_rc_qp(pd, cq.cqn, cq.cqn, 8);
                dev.create_qp(&mut qp).map(|()| qp)
            },
            |qp| Ok(dev.destroy_qp(qp.qpn).map(drop)?),
            || tables_are(with_cq),
        )?;
        add(o);
        let mut peer = raw_rc_qp(pd, cq.cqn, cq.cqn, 8);
        dev.create_qp(&mut peer)?;
        let with_qps = plus(with_cq, [2, 0, 0, 0]);
        let mut mrs = Vec::new();
        for (name, access) in [
            ("reg ODP MR", ACCESS_ALL | pfnic_verbs::ACCESS_ON_DEMAND),
            ("reg MR", ACCESS_ALL),
        ] {
            let with_mrs = plus(with_qps, [0, 0, mrs.len() as u64, 0]);
            let (mr, o) = each_failure(
                &f,
                name,
                || {
                    let mut mr = uapi::RegMr {
                        pd,
                        access,
                        addr: buf.addr(),
                        length: buf.len() as u64,
                        ..Default::default()
                    };
                    dev.reg_mr(&mut mr).map(|()| mr)
                },
                |mr| Ok(dev.dereg_mr(mr.mr)?),
                || tables_are(with_mrs),
            )?;
            add(o);
            mrs.push(mr);
        }
        let port = dev.query_port()?;
        let steps = transitions(qp.qpn, peer.qpn, &port);
        for (i, (name, step)) in ["modify QP to INIT", "modify QP to RTR", "modify QP to RTS"]
            .into_iter()
            .zip(&steps)
            .enumerate()
        {
            let from = qp_state(&dev, qp.qpn)?;
            let ((), o) = each_failure(
                &f,
                name,
                || dev.modify_qp(step),
                // Survived: back to RESET, and through the steps before this one again.
                |()| {
                    let reset = uapi::ModifyQp {
                        qpn: qp.qpn,
                        attr_mask: qp_attr::STATE,
                        attr: QpAttr {
                            qp_state: QpState::Reset as u32,
                            ..Default::default()
                        },
                    };
                    dev.modify_qp(&reset)?;
                    for s in &steps[..i] {
                        dev.modify_qp(s)?;
                    }
                    Ok(())
                },
                || {
                    check_eq!(qp_state(&dev, qp.qpn)?, from);
                    Ok(())
                },
            )?;
            add(o);
        }
        for s in &transitions(peer.qpn, qp.qpn, &port) {
            dev.modify_qp(s)?;
        }
        check_eq!(qp_state(&dev, qp.qpn)?, QpState::Rts as u32);
        check_eq!(qp_state(&dev, peer.qpn)?, QpState::Rts as u32);
        for mr in &mrs {
            check_eq!(dev.query_mr(mr.mr)?.mr, mr.mr);
        }
        tables_are(plus(with_qps, [0, 0, 2, 0]))?;
        // Closed with everything in it, as a process that dies would.
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
        "# {} injected failures returned ENOMEM, {} were survived; tables back to {base:?}",
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
