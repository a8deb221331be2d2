//! Memory modes (docs/uapi.md, "Memory modes"), as a program on libibverbs gets them
//! (`PFNIC_MEM_MODE` when it opens the device): choosing one, the `pinned` mode's
//! registration (pins accounted in `VmPin` against `RLIMIT_MEMLOCK`, released at
//! deregistration and at process death, RDMA through the device's translation tables), and
//! the on-demand modes' paging.

use pfnic_cli::{errln, outln};
use std::sync::Arc;

use crate::common::{in_child, Child};
use crate::ibv_common::{
    check_bytes, ibv_ctx, ibv_ctx_in_mode, ibv_open_with_mem_mode, pattern, requires_odp,
    CtxDetails, MrStatsExt, Pair, PairOpts, Side, ODP_WRITE,
};
use crate::ktap::{Failure, Test, TestResult};
use crate::verbs_common::{fail, MrKind, ACCESS_ALL, PAGE};
use ibv::{
    Buffer, Context, QpInitAttr, SendWr, WcStatus, WrOpcode, ACCESS_LOCAL_WRITE, ACCESS_ON_DEMAND,
    ACCESS_REMOTE_READ,
};
use pfnic_sys::uapi;
use pfnic_verbs::MemMode;

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_mode_choice_rules",
        run: test_mode_choice_rules,
    },
    &Test {
        name: "test_mode_pinned_rdma",
        run: test_mode_pinned_rdma,
    },
    &Test {
        name: "test_mode_pinned_bad_ranges",
        run: test_mode_pinned_bad_ranges,
    },
    &Test {
        name: "test_mode_pinned_vmpin",
        run: test_mode_pinned_vmpin,
    },
    &Test {
        name: "test_mode_pinned_memlock",
        run: test_mode_pinned_memlock,
    },
    &Test {
        name: "test_mode_pinned_released_at_exit",
        run: test_mode_pinned_released_at_exit,
    },
    &Test {
        name: "test_mode_pinned_fork",
        run: test_mode_pinned_fork,
    },
    &Test {
        name: "test_mode_overcommit",
        run: test_mode_overcommit,
    },
    &Test {
        name: "test_mode_odp_counters",
        run: test_mode_odp_counters,
    },
    &Test {
        name: "test_mode_odp_coherence",
        run: test_mode_odp_coherence,
    },
    &Test {
        name: "test_mode_odp_swap",
        run: test_mode_odp_swap,
    },
    &Test {
        name: "test_mode_on_demand_mremap",
        run: test_mode_on_demand_mremap,
    },
];

/// A context in memory mode `mode`; skips on a device without `cap` (named `what`), which
/// the mode needs. With it, the mode must open.
fn mode_ctx(mode: MemMode, cap: u64, what: &str) -> Result<Context, Failure> {
    if device()?.caps & cap == 0 {
        skip!("the device has no {what}");
    }
    ibv_open_with_mem_mode(mode.name())?
        .map_err(|e| Failure::Fail(format!("PFNIC_MEM_MODE={}: {e}", mode.name())))
}

/// A context in the `pinned` mode; skips on a device without translation tables.
pub fn pinned_ctx() -> Result<Context, Failure> {
    mode_ctx(
        MemMode::Pinned,
        uapi::PFNIC_CAP_TABLES,
        "translation tables (PFNIC_CAP_TABLES)",
    )
}

/// A context in the `odp` mode; skips on a device without driver-managed faults.
pub fn odp_ctx() -> Result<Context, Failure> {
    mode_ctx(
        MemMode::Odp,
        uapi::PFNIC_CAP_FAULTS,
        "driver-managed faults (PFNIC_CAP_FAULTS)",
    )
}

/// Whether the device (its identity, `/dev/pfnicN`'s query) may give the implicit MR a table
/// (device ABI 1.10 on, with driver-managed faults): the `odp` mode's implicit ODP.
pub fn implicit_tables(q: &uapi::QueryDevice) -> bool {
    q.caps & uapi::PFNIC_CAP_FAULTS != 0 && q.device_abi & 0xffff >= 10
}

/// The identity of the device under test (`/dev/pfnicN`).
fn device() -> Result<uapi::QueryDevice, Failure> {
    Ok(crate::common::nic()?.dev.query()?)
}

/// A pair of `odp` contexts with ODP MRs of `len` bytes.
fn odp_pair(len: usize) -> Result<Pair, Failure> {
    Pair::build(
        &odp_ctx()?,
        &odp_ctx()?,
        &PairOpts {
            len,
            kind: MrKind::Odp,
            ..Default::default()
        },
    )
}

/// The errno of `r`, or a failure naming `what` if it succeeded.
fn errno_of<T>(what: &str, r: std::io::Result<T>) -> Result<i32, Failure> {
    match r {
        Ok(_) => Err(Failure::Fail(format!("{what} succeeded"))),
        Err(e) => Ok(e.raw_os_error().unwrap_or(0)),
    }
}

/// This process's `VmPin` (/proc/self/status), in KiB.
fn vm_pin_kib() -> Result<u64, Failure> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmPin:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| Failure::Fail("no VmPin in /proc/self/status".into()))
}

/// How far [`pins_held`] may be off: vmstat counters are kept per CPU and folded into the
/// global ones only past a threshold (at most 125 per CPU), so each of the two counters lags
/// by up to that; this allows for 32 CPUs.
const PINS_SLACK: i64 = 2 * 125 * 32;

/// Pages pinned with `FOLL_PIN` in the whole system and not yet released (/proc/vmstat), to
/// within [`PINS_SLACK`].
fn pins_held() -> Result<i64, Failure> {
    let vmstat = std::fs::read_to_string("/proc/vmstat")?;
    let get = |name: &str| -> Result<i64, Failure> {
        vmstat
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .ok_or_else(|| Failure::Fail(format!("no {name} in /proc/vmstat")))
    };
    Ok(get("nr_foll_pin_acquired")? - get("nr_foll_pin_released")?)
}

/// The memory modes a program gets through libibverbs: by default `sva` where contexts get a
/// PASID, else `odp` where the device has driver-managed faults, else `pinned`;
/// `PFNIC_MEM_MODE` chooses one when the device is opened (an unknown name: `EINVAL`; a mode
/// the platform lacks: `EOPNOTSUPP`); the context's entry in the RDMA core (`rdma resource
/// show ctx -dd`) and its ODP capabilities say which it got; ODP MRs are refused in the
/// `pinned` mode, where an ordinary MR pins its pages.
fn test_mode_choice_rules() -> TestResult {
    let q = device()?;
    let tables = q.caps & uapi::PFNIC_CAP_TABLES != 0;
    let faults = q.caps & uapi::PFNIC_CAP_FAULTS != 0;
    let ctx = ibv_ctx()?;
    let details = CtxDetails::of(&ctx)?;
    let sva = details.pasid()? != 0;
    let want = if let Some(name) = std::env::var_os(pfnic_verbs::MEM_MODE_ENV) {
        // The provider applied the environment's choice.
        MemMode::parse(&name.to_string_lossy())?
    } else if sva {
        MemMode::Sva
    } else if faults {
        MemMode::Odp
    } else {
        MemMode::Pinned
    };
    check_eq!(details.mem_mode()?, want);

    let refused = |name: &str| -> Result<i32, Failure> {
        errno_of(
            &format!("PFNIC_MEM_MODE={name}"),
            ibv_open_with_mem_mode(name)?,
        )
    };
    check_eq!(refused("bogus")?, libc::EINVAL);
    if sva {
        let ctx = ibv_open_with_mem_mode("sva")?.map_err(|e| fail("PFNIC_MEM_MODE=sva", e))?;
        let d = CtxDetails::of(&ctx)?;
        check_eq!(d.mem_mode()?, MemMode::Sva);
        check!(d.pasid()? != 0, "an sva context without a PASID");
        requires_odp(&ctx, ODP_WRITE, true)?;
    } else {
        check_eq!(refused("sva")?, libc::EOPNOTSUPP);
    }
    if !tables {
        skip!("the device has no translation tables (PFNIC_CAP_TABLES)");
    }
    if faults {
        // The `odp` mode has on-demand paging, and the implicit MR where the device keeps its
        // table sparse.
        let ctx = odp_ctx()?;
        check_eq!(CtxDetails::of(&ctx)?.mem_mode()?, MemMode::Odp);
        let odp = ctx.query_device_ex()?.odp_caps;
        let implicit = if implicit_tables(&q) {
            uapi::PFNIC_ODP_SUPPORT_IMPLICIT
        } else {
            0
        };
        check_eq!(odp.general_caps, uapi::PFNIC_ODP_SUPPORT | implicit);
        check_eq!(odp.per_transport_caps.rc_odp_caps, uapi::PFNIC_ODP_RC_CAPS);
    } else {
        check_eq!(refused("odp")?, libc::EOPNOTSUPP);
    }
    let ctx = pinned_ctx()?;
    check_eq!(CtxDetails::of(&ctx)?.mem_mode()?, MemMode::Pinned);
    let odp = ctx.query_device_ex()?.odp_caps;
    check_eq!(
        (odp.general_caps, odp.per_transport_caps.rc_odp_caps),
        (0, 0)
    );
    let pd = ctx.alloc_pd()?;
    let buf = Arc::new(Buffer::new(4 * PAGE)?);
    buf.fill(1);
    check_eq!(
        errno_of(
            "ODP MR in the pinned mode",
            pd.reg_mr(&buf, ACCESS_LOCAL_WRITE | ACCESS_ON_DEMAND)
        )?,
        libc::EOPNOTSUPP
    );
    let mr = pd.reg_mr(&buf, ACCESS_ALL)?;
    check_eq!(mr.stats()?.pages_pinned, 4);
    Ok(())
}

/// Every RDMA operation between two pinned contexts, with an MR that starts and ends inside a
/// page; no page request is ever sent, and the MR counters say how many pages are pinned.
fn test_mode_pinned_rdma() -> TestResult {
    let o = PairOpts {
        len: 16 * PAGE,
        ..Default::default()
    };
    let p = Pair::build(&pinned_ctx()?, &pinned_ctx()?, &o)?;
    for side in [&p.a, &p.b] {
        let s = side.mr.stats()?;
        check_eq!(s.pages_pinned, 16);
        check_eq!(s.page_faults, 0);
    }
    p.write_ok(7, 16 * PAGE, "pinned WRITE a -> b")?;

    // READ b into a.
    let want = pattern(9, 5 * PAGE + 17);
    p.b.buf.write(100, &want);
    p.a.post_ok(
        SendWr::new(2, WrOpcode::RdmaRead, &[p.a.sge(300, want.len())])
            .remote(p.b.buf.addr() + 100, p.b.mr.rkey()),
    )?;
    check_bytes("pinned READ", &p.a.buf, 300, &want)?;

    // SEND a -> b.
    let want = pattern(11, 3 * PAGE + 5);
    p.a.buf.write(8, &want);
    p.b.post_recv(3, 2 * PAGE + 1, want.len())?;
    let wc = p.a.send_ok(
        &p.b,
        SendWr::new(4, WrOpcode::Send, &[p.a.sge(8, want.len())]),
    )?;
    check_eq!(wc.byte_len as usize, want.len());
    check_bytes("pinned SEND", &p.b.buf, 2 * PAGE + 1, &want)?;

    // FETCH_ADD on b.
    p.b.buf.write_u64(8 * PAGE, 40);
    let sge = [p.a.sge(0, 8)];
    let mut wr = SendWr::new(5, WrOpcode::AtomicFetchAndAdd, &sge)
        .remote(p.b.buf.addr() + 8 * PAGE as u64, p.b.mr.rkey());
    wr.compare_add = 2;
    p.a.post_ok(wr)?;
    check_eq!(p.a.buf.read_u64(0), 40);
    check_eq!(p.b.buf.read_u64(8 * PAGE), 42);

    // An MR over bytes 100 .. 2 pages + 100 of a buffer touches 3 pages.
    let side = Side::basic(&pinned_ctx()?, 4 * PAGE, MrKind::Plain)?;
    let mr = side.pd.reg_mr_range(&side.buf, 100, 2 * PAGE, ACCESS_ALL)?;
    check_eq!(mr.stats()?.pages_pinned, 3);
    let want = pattern(13, 2 * PAGE);
    p.a.buf.write(0, &want);
    side.qp.connect(p.a.qp.qp_num(), &Default::default())?;
    p.a.reconnect(side.qp.qp_num())?;
    p.a.post_ok(
        SendWr::new(6, WrOpcode::RdmaWrite, &[p.a.sge(0, want.len())])
            .remote(side.buf.addr() + 100, mr.rkey()),
    )?;
    check_bytes("WRITE into the unaligned MR", &side.buf, 100, &want)?;
    // One byte past the MR is refused.
    p.a.post(
        SendWr::new(7, WrOpcode::RdmaWrite, &[p.a.sge(0, 1)])
            .remote(side.buf.addr() + 100 + 2 * PAGE as u64, mr.rkey()),
    )?;
    p.a.wait_wc(WcStatus::REM_ACCESS_ERR, None)?;
    check_eq!(side.buf.to_vec(100 + 2 * PAGE, 1)[0], 0);
    Ok(())
}

/// Registrations the pinning refuses: unmapped memory (`EFAULT`), a read-only mapping with
/// local write (`EFAULT`); a read-only mapping without write access pins, and the device
/// reads it.
fn test_mode_pinned_bad_ranges() -> TestResult {
    let ctx = pinned_ctx()?;
    let pd = ctx.alloc_pd()?;
    let vm_before = vm_pin_kib()?;

    // An address range with nothing mapped: map 4 pages, unmap them.
    let hole = Buffer::new(4 * PAGE)?;
    let addr = hole.addr();
    drop(hole);
    // SAFETY: nothing is mapped there; the registration must fail and map nothing.
    let r = unsafe { pd.reg_mr_raw(addr, 4 * PAGE as u64, ACCESS_LOCAL_WRITE) };
    check_eq!(errno_of("unmapped range", r)?, libc::EFAULT);

    let ro = Arc::new(Buffer::new(4 * PAGE)?);
    ro.fill(0x5a);
    // SAFETY: the buffer is only read from here on.
    unsafe { ro.protect(libc::PROT_READ)? };
    check_eq!(
        errno_of(
            "local write on a read-only mapping",
            pd.reg_mr(&ro, ACCESS_LOCAL_WRITE)
        )?,
        libc::EFAULT
    );
    check_eq!(vm_pin_kib()?, vm_before);

    // Read-only registration of the read-only mapping: a peer READs it.
    let mr = pd.reg_mr(&ro, ACCESS_REMOTE_READ)?;
    check_eq!(mr.stats()?.pages_pinned, 4);
    let peer = Side::basic(&pinned_ctx()?, 4 * PAGE, MrKind::Plain)?;
    let cq = ctx.create_cq(8, None, 0)?;
    let qp = pd.create_qp(&QpInitAttr::new(&cq, &cq, 4, 1))?;
    qp.connect(peer.qp.qp_num(), &Default::default())?;
    peer.qp.connect(qp.qp_num(), &Default::default())?;
    peer.post_ok(
        SendWr::new(1, WrOpcode::RdmaRead, &[peer.sge(0, 4 * PAGE)]).remote(ro.addr(), mr.rkey()),
    )?;
    check_bytes(
        "READ of a read-only pinned MR",
        &peer.buf,
        0,
        &[0x5a; 4 * PAGE],
    )?;
    // A WRITE into it is refused, and it is not written.
    peer.post(SendWr::new(2, WrOpcode::RdmaWrite, &[peer.sge(0, 8)]).remote(ro.addr(), mr.rkey()))?;
    peer.wait_wc(WcStatus::REM_ACCESS_ERR, None)?;
    check_eq!(ro.to_vec(0, 8), vec![0x5a; 8]);
    Ok(())
}

/// Pinned pages show in the process's `VmPin`, once per registration (two MRs over one buffer
/// pin it twice, as `ib_umem` does), and go at deregistration.
fn test_mode_pinned_vmpin() -> TestResult {
    let ctx = pinned_ctx()?;
    let pd = ctx.alloc_pd()?;
    let buf = Arc::new(Buffer::new(64 * PAGE)?);
    buf.fill(3);
    let before = vm_pin_kib()?;
    let a = pd.reg_mr(&buf, ACCESS_ALL)?;
    check_eq!(vm_pin_kib()? - before, 256);
    let b = pd.reg_mr_range(&buf, PAGE, 8 * PAGE, ACCESS_LOCAL_WRITE)?;
    check_eq!(vm_pin_kib()? - before, 256 + 32);
    a.dereg().map_err(|(_, e)| e)?;
    check_eq!(vm_pin_kib()? - before, 32);
    b.dereg().map_err(|(_, e)| e)?;
    check_eq!(vm_pin_kib()?, before);
    Ok(())
}

/// In a forked child: `RLIMIT_MEMLOCK` at `bytes`, then every capability dropped (as
/// `CAP_IPC_LOCK` lifts the limit) by becoming nobody; devices opened before stay open.
fn limit_memlock_as_nobody(bytes: u64) -> Result<(), String> {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: plain system calls on this (child) process.
    unsafe {
        if libc::setrlimit(libc::RLIMIT_MEMLOCK, &limit) != 0
            || libc::setgid(65534) != 0
            || libc::setuid(65534) != 0
        {
            return Err(format!(
                "setrlimit/setuid: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// A child's exit code for the outcome `r` of `test`'s child code, which it explains on
/// standard error.
fn child_exit(test: &str, r: Result<(), String>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => {
            errln!("# {test} child: {e}");
            1
        }
    }
}

/// Without `CAP_IPC_LOCK`, `RLIMIT_MEMLOCK` bounds what a process may pin: a registration
/// beyond it fails with `ENOMEM` and pins nothing; one that fits again after a
/// deregistration works.
fn test_mode_pinned_memlock() -> TestResult {
    pinned_ctx()?; // skips without tables
    const LIMIT_PAGES: usize = 16;
    let code = in_child(|| {
        let run = || -> Result<(), String> {
            let ctx = pinned_ctx().map_err(|e| format!("{e:?}"))?;
            limit_memlock_as_nobody((LIMIT_PAGES * PAGE) as u64)?;
            let pd = ctx.alloc_pd().map_err(|e| e.to_string())?;
            let buf = Arc::new(Buffer::new((LIMIT_PAGES + 1) * PAGE).map_err(|e| e.to_string())?);
            buf.fill(1);
            let all = pd
                .reg_mr_range(&buf, 0, LIMIT_PAGES * PAGE, ACCESS_ALL)
                .map_err(|e| format!("registration within the limit: {e}"))?;
            let before = vm_pin_kib().map_err(|e| format!("{e:?}"))?;
            match pd.reg_mr_range(&buf, LIMIT_PAGES * PAGE, PAGE, ACCESS_ALL) {
                Ok(_) => return Err("a registration beyond RLIMIT_MEMLOCK succeeded".into()),
                Err(e) if e.raw_os_error() == Some(libc::ENOMEM) => {}
                Err(e) => return Err(format!("beyond the limit: {e}, expected ENOMEM")),
            }
            if vm_pin_kib().map_err(|e| format!("{e:?}"))? != before {
                return Err("a refused registration changed VmPin".into());
            }
            all.dereg().map_err(|(_, e)| e.to_string())?;
            pd.reg_mr_range(&buf, PAGE, LIMIT_PAGES * PAGE, ACCESS_ALL)
                .map_err(|e| format!("registration after the deregistration: {e}"))?;
            Ok(())
        };
        child_exit("test_mode_pinned_memlock", run())
    })?;
    check_eq!(code, 0);
    Ok(())
}

/// A process killed with registrations pinned gives every pin back when it dies.
fn test_mode_pinned_released_at_exit() -> TestResult {
    // Skips without tables.
    pinned_ctx()?;
    // Well above what the per-CPU counters can hide.
    const PAGES: usize = 16384;
    let baseline = pins_held()?;
    let (tx, rx) = pipe()?;
    let child = Child::spawn(move || {
        let run = || -> Result<(), String> {
            let ctx = pinned_ctx().map_err(|e| format!("{e:?}"))?;
            let pd = ctx.alloc_pd().map_err(|e| e.to_string())?;
            let buf = Arc::new(Buffer::new(PAGES * PAGE).map_err(|e| e.to_string())?);
            buf.fill(2);
            let mrs: Vec<_> = (0..2)
                .map(|_| pd.reg_mr(&buf, ACCESS_ALL))
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?;
            // Tell the parent, then wait to be killed with everything registered.
            // SAFETY: writes one byte from a valid buffer to our pipe.
            unsafe { libc::write(tx, [1u8].as_ptr().cast(), 1) };
            std::thread::sleep(std::time::Duration::from_secs(600));
            drop(mrs);
            Ok(())
        };
        // Only a SIGKILL ends it well; reaching here is a failure either way.
        child_exit("test_mode_pinned_released_at_exit", run()).max(1)
    })?;
    let mut byte = [0u8; 1];
    // SAFETY: reads one byte into a valid buffer from our pipe.
    let n = unsafe { libc::read(rx, byte.as_mut_ptr().cast(), 1) };
    check_eq!(n, 1);
    let held = pins_held()? - baseline;
    let want = (2 * PAGES) as i64;
    check!(
        held >= want - PINS_SLACK,
        "{held} pins held, expected {want}"
    );
    child.kill();
    check_eq!(child.wait()?, 128 + libc::SIGKILL);
    // The file closes as the process dies; give the release a moment on a slow guest.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let held = pins_held()? - baseline;
        if held < PINS_SLACK {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            fail!("{held} pins still held 30 s after the process died");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Pinned memory across fork: the child gets copies of the pinned pages (Linux copies pinned
/// anonymous pages at fork), so the device keeps writing the parent's pages, whatever the
/// child does with its own.
fn test_mode_pinned_fork() -> TestResult {
    let p = Pair::build(
        &pinned_ctx()?,
        &pinned_ctx()?,
        &PairOpts {
            len: 8 * PAGE,
            ..Default::default()
        },
    )?;
    p.b.buf.fill(0x11);
    let child_buf = p.b.buf.clone();
    let code = in_child(move || {
        // The child writes its copy of the buffer; the parent's must not change.
        child_buf.fill(0x22);
        i32::from(child_buf.to_vec(0, 1)[0] != 0x22)
    })?;
    check_eq!(code, 0);
    check_eq!(p.b.buf.to_vec(0, 8 * PAGE), vec![0x11; 8 * PAGE]);
    p.write_ok(
        21,
        8 * PAGE,
        "WRITE into the parent's pinned pages after a fork",
    )?;
    // The parent's CPU writes after the fork reach the pages the device reads.
    let want = pattern(23, 8 * PAGE);
    p.b.buf.write(0, &want);
    p.b.reconnect(p.a.qp.qp_num())?;
    p.a.reconnect(p.b.qp.qp_num())?;
    p.a.post_ok(
        SendWr::new(9, WrOpcode::RdmaRead, &[p.a.sge(0, 8 * PAGE)])
            .remote(p.b.buf.addr(), p.b.mr.rkey()),
    )?;
    check_bytes(
        "READ of the parent's pages after a fork",
        &p.a.buf,
        0,
        &want,
    )?;
    Ok(())
}

/// A pipe: (write end, read end).
fn pipe() -> Result<(libc::c_int, libc::c_int), Failure> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok((fds[1], fds[0]))
}

/// An MR larger than the guest's memory (4 GiB, 2 GiB of RAM): an on-demand MR in the `sva`
/// and `odp` modes (each where the platform has it) registers at once and takes RDMA anywhere
/// in it, only the pages touched becoming present; the same registration in the `pinned` mode,
/// under `RLIMIT_MEMLOCK`, fails cleanly with `ENOMEM` before it touches a page.
fn test_mode_overcommit() -> TestResult {
    const BIG: usize = 4 << 30;
    let caps = device()?.caps;
    let mut ran = Vec::new();
    for mode in [MemMode::Sva, MemMode::Odp] {
        let Some(ctx) = ibv_ctx_in_mode(mode)? else {
            continue;
        };
        ran.push(mode.name());
        requires_odp(&ctx, ODP_WRITE, false)?;
        let big = Arc::new(Buffer::with_flags(BIG, libc::MAP_NORESERVE)?);
        let peer = Side::basic(&ctx, PAGE, MrKind::Plain)?;
        let pd = ctx.alloc_pd()?;
        let cq = ctx.create_cq(8, None, 0)?;
        let qp = pd.create_qp(&QpInitAttr::new(&cq, &cq, 4, 1))?;
        let mr = pd.reg_mr(&big, ACCESS_ALL | ACCESS_ON_DEMAND)?;
        qp.connect(peer.qp.qp_num(), &Default::default())?;
        peer.qp.connect(qp.qp_num(), &Default::default())?;
        for (i, off) in [0usize, 1 << 30, (7 << 29) + 5 * PAGE]
            .into_iter()
            .enumerate()
        {
            let want = pattern(31 + i as u8, PAGE);
            peer.buf.write(0, &want);
            peer.post_ok(
                SendWr::new(i as u64, WrOpcode::RdmaWrite, &[peer.sge(0, PAGE)])
                    .remote(big.addr() + off as u64, mr.rkey()),
            )?;
            check_bytes(
                &format!("{}: 4 GiB MR at {off:#x}", mode.name()),
                &big,
                off,
                &want,
            )?;
        }
        let s = mr.stats()?;
        check_eq!(s.pages_pinned, 0);
        if mode == MemMode::Odp {
            // Only the three pages written are in the device's table.
            check_eq!(s.pages_mapped, 3);
        }
    }
    outln!("# on-demand modes: {}", ran.join(", "));
    if caps & uapi::PFNIC_CAP_TABLES == 0 {
        return Ok(());
    }
    let code = in_child(|| {
        let run = || -> Result<(), String> {
            let ctx = pinned_ctx().map_err(|e| format!("{e:?}"))?;
            limit_memlock_as_nobody(64 << 20)?;
            let big =
                Arc::new(Buffer::with_flags(BIG, libc::MAP_NORESERVE).map_err(|e| e.to_string())?);
            let pd = ctx.alloc_pd().map_err(|e| e.to_string())?;
            match pd.reg_mr(&big, ACCESS_ALL) {
                Ok(_) => Err("a 4 GiB pinned registration succeeded".into()),
                Err(e) if e.raw_os_error() == Some(libc::ENOMEM) => Ok(()),
                Err(e) => Err(format!("4 GiB pinned: {e}, expected ENOMEM")),
            }
        };
        child_exit("test_mode_overcommit", run())
    })?;
    check_eq!(code, 0);
    Ok(())
}

/// The `odp` mode's counters follow what the device and the kernel do: a WRITE into untouched
/// pages faults every one of them in through page-fault events, all handled, and maps them
/// in the device's table; `MADV_DONTNEED` invalidates them all; a flushed prefetch maps them
/// again without a fault; an ordinary MR is mapped whole at registration; the implicit MR
/// maps only the pages the device used through it. Nothing is pinned.
fn test_mode_odp_counters() -> TestResult {
    const PAGES: usize = 16;
    let p = odp_pair(PAGES * PAGE)?;
    let vm_before = vm_pin_kib()?;
    let mr = &p.b.mr;
    let s0 = mr.stats()?;
    check_eq!(
        (s0.page_faults, s0.pages_mapped, s0.pages_pinned),
        (0, 0, 0)
    );

    p.write_ok(3, PAGES * PAGE, "WRITE into untouched ODP pages")?;
    let s1 = mr.stats()?;
    check_eq!(s1.page_faults, PAGES as u64);
    check_eq!(s1.page_faults_handled, s1.page_faults);
    // One event covers up to 64 entries.
    check_eq!(s1.page_fault_groups, 1);
    check_eq!(s1.pages_mapped, PAGES as u64);
    check_eq!(s1.pages_pinned, 0);

    // Warm: no more faults.
    p.write_ok(4, PAGES * PAGE, "WRITE into mapped ODP pages")?;
    check_eq!(mr.stats()?.page_faults, PAGES as u64);

    p.b.buf.dontneed()?;
    let s2 = mr.stats()?;
    check_eq!(s2.page_invalidations - s1.page_invalidations, PAGES as u64);
    check_eq!(s2.page_invalidations_handled, s2.page_invalidations);
    check_eq!(s2.pages_mapped, 0);

    p.b.pd.advise_mr(
        pfnic_verbs::ADVISE_PREFETCH_WRITE,
        pfnic_verbs::ADVISE_FLAG_FLUSH,
        &[p.b.sge(0, PAGES * PAGE)],
    )?;
    let s3 = mr.stats()?;
    check_eq!(s3.page_prefetch - s2.page_prefetch, PAGES as u64);
    check_eq!(s3.pages_mapped, PAGES as u64);
    p.write_ok(5, PAGES * PAGE, "WRITE into prefetched ODP pages")?;
    check_eq!(mr.stats()?.page_faults, PAGES as u64);

    check_eq!(vm_pin_kib()?, vm_before);
    // An ordinary MR pins its pages, as on every RDMA device (only `sva` shares the address
    // space): mapped whole at registration, counted in `VmPin`, released at deregistration.
    let buf = Arc::new(Buffer::new(8 * PAGE)?);
    let plain = p.b.pd.reg_mr(&buf, ACCESS_ALL)?;
    let s = plain.stats()?;
    check_eq!((s.pages_mapped, s.pages_pinned), (8, 8));
    check_eq!(vm_pin_kib()? - vm_before, 32);
    plain.dereg().map_err(|(_, e)| e)?;
    check_eq!(vm_pin_kib()?, vm_before);
    // The implicit MR: the whole address space, its table filled on demand too.
    if !implicit_tables(&device()?) {
        return Ok(());
    }
    // SAFETY: the MR covers the process's memory; the device writes only `buf` through it.
    let implicit = unsafe { p.b.pd.reg_implicit_mr(ACCESS_ALL | ACCESS_ON_DEMAND)? };
    check_eq!(implicit.stats()?.pages_mapped, 0);
    let want = pattern(6, 2 * PAGE);
    p.a.buf.write(0, &want);
    p.a.post_ok(
        SendWr::new(7, WrOpcode::RdmaWrite, &[p.a.sge(0, 2 * PAGE)])
            .remote(buf.addr() + 100, implicit.rkey()),
    )?;
    check_bytes("WRITE through the implicit MR", &buf, 100, &want)?;
    let s = implicit.stats()?;
    check_eq!(
        (s.page_faults, s.page_faults_handled, s.pages_mapped),
        (3, 3, 3)
    );
    buf.dontneed()?;
    let s = implicit.stats()?;
    check_eq!((s.pages_mapped, s.page_invalidations), (0, 3));
    // Beyond any user address: refused, not waited for.
    p.a.post(
        SendWr::new(8, WrOpcode::RdmaWrite, &[p.a.sge(0, 8)]).remote(1 << 58, implicit.rkey()),
    )?;
    p.a.wait_wc(WcStatus::REM_ACCESS_ERR, None)?;
    Ok(())
}

/// The `odp` mode keeps the device's table coherent with the process: after `mprotect`
/// read-only, a WRITE is refused (`REM_ACCESS_ERR`) and changes nothing while a READ works;
/// after `munmap` and a new mapping at the same address, the device writes the new pages,
/// which the process sees; after a fork, the parent's CPU write (breaking copy-on-write) is
/// what the device reads, and the device's write reaches the parent, not the child.
fn test_mode_odp_coherence() -> TestResult {
    const LEN: usize = 8 * PAGE;
    let p = odp_pair(LEN)?;
    p.write_ok(1, LEN, "first WRITE")?;

    // mprotect: read-only for the process, so for the device.
    // SAFETY: the test's own buffer; the CPU does not write it while it is read-only.
    unsafe { p.b.buf.protect(libc::PROT_READ)? };
    let before = p.b.buf.to_vec(0, LEN);
    p.a.buf.write(0, &pattern(2, LEN));
    p.a.post(
        SendWr::new(10, WrOpcode::RdmaWrite, &[p.a.sge(0, LEN)])
            .remote(p.b.buf.addr(), p.b.mr.rkey()),
    )?;
    p.a.wait_wc(WcStatus::REM_ACCESS_ERR, None)?;
    check_eq!(p.b.buf.to_vec(0, LEN), before);
    p.a.reconnect(p.b.qp.qp_num())?;
    p.a.post_ok(
        SendWr::new(11, WrOpcode::RdmaRead, &[p.a.sge(0, LEN)])
            .remote(p.b.buf.addr(), p.b.mr.rkey()),
    )?;
    check_bytes("READ of the read-only pages", &p.a.buf, 0, &before)?;
    // SAFETY: as above; writable again.
    unsafe { p.b.buf.protect(libc::PROT_READ | libc::PROT_WRITE)? };

    // munmap and a fresh mapping at the same address: the device must write the new pages.
    let addr = p.b.buf.addr() as usize;
    // SAFETY: replaces the test's own buffer with fresh anonymous memory at the same address;
    // nothing else uses it meanwhile.
    check!(
        unsafe { crate::matrix::remap_fresh(addr, LEN) },
        "no remap at {addr:#x}"
    );
    check_eq!(p.b.mr.stats()?.pages_mapped, 0);
    p.write_ok(3, LEN, "WRITE into the new mapping")?;

    // fork: the parent's CPU write breaks copy-on-write; the device follows the parent.
    let child_buf = p.b.buf.clone();
    let (tx, rx) = pipe()?;
    let (tx2, rx2) = pipe()?;
    let child = Child::spawn(move || {
        let mut byte = [0u8; 1];
        // SAFETY: one byte from our pipe into a valid buffer.
        unsafe { libc::read(rx, byte.as_mut_ptr().cast(), 1) };
        // The child's copy still holds what the device wrote before the fork.
        let ok = child_buf.to_vec(0, LEN) == pattern(3, LEN);
        // SAFETY: one byte from a valid buffer to our pipe.
        unsafe { libc::write(tx2, [u8::from(ok)].as_ptr().cast(), 1) };
        i32::from(!ok)
    })?;
    let cpu = pattern(4, LEN);
    p.b.buf.write(0, &cpu);
    p.a.post_ok(
        SendWr::new(12, WrOpcode::RdmaRead, &[p.a.sge(0, LEN)])
            .remote(p.b.buf.addr(), p.b.mr.rkey()),
    )?;
    check_bytes("READ after the parent's CPU write", &p.a.buf, 0, &cpu)?;
    p.write_ok(5, LEN, "device WRITE after the fork")?;
    // SAFETY: one byte from a valid buffer to our pipe.
    unsafe { libc::write(tx, [1u8].as_ptr().cast(), 1) };
    let mut byte = [0u8; 1];
    // SAFETY: one byte from our pipe into a valid buffer.
    unsafe { libc::read(rx2, byte.as_mut_ptr().cast(), 1) };
    check_eq!(child.wait()?, 0);
    check_eq!(byte[0], 1);
    Ok(())
}

/// Swap in the `odp` mode: nothing pins the pages, so the kernel swaps them out, the
/// driver's entries going first; a device READ brings them back with the bytes the CPU wrote,
/// and what the device WRITEs survives a second trip through swap.
fn test_mode_odp_swap() -> TestResult {
    const LEN: usize = 32 * PAGE;
    let p = odp_pair(LEN)?;
    crate::common::ensure_swap()?;
    let want = pattern(7, LEN);
    p.b.buf.write(0, &want);
    p.a.post_ok(
        SendWr::new(1, WrOpcode::RdmaRead, &[p.a.sge(0, LEN)])
            .remote(p.b.buf.addr(), p.b.mr.rkey()),
    )?;
    let s0 = p.b.mr.stats()?;
    check_eq!(s0.pages_mapped, (LEN / PAGE) as u64);

    crate::common::page_out(p.b.buf.addr() as usize, LEN)?;
    let s1 = p.b.mr.stats()?;
    check_eq!(s1.pages_mapped, 0);
    check!(
        s1.page_invalidations >= s0.page_invalidations + (LEN / PAGE) as u64,
        "swapping out invalidated {} entries, expected {}",
        s1.page_invalidations - s0.page_invalidations,
        LEN / PAGE
    );
    p.a.buf.fill(0);
    p.a.post_ok(
        SendWr::new(2, WrOpcode::RdmaRead, &[p.a.sge(0, LEN)])
            .remote(p.b.buf.addr(), p.b.mr.rkey()),
    )?;
    check_bytes("READ of swapped-out pages", &p.a.buf, 0, &want)?;

    p.write_ok(9, LEN, "WRITE into swapped-in pages")?;
    crate::common::page_out(p.b.buf.addr() as usize, LEN)?;
    check_bytes(
        "the device's bytes after swap",
        &p.b.buf,
        0,
        &pattern(9, LEN),
    )?;
    Ok(())
}

/// `mremap()` moves an ODP MR's pages elsewhere, in each on-demand mode the platform has: the
/// device's WRITE to the MR's (now unmapped) range fails with `REM_ACCESS_ERR`, and the pages at
/// their new place keep their bytes (the device never writes them through a stale entry); with
/// fresh memory mapped at the old place, the WRITE lands there.
fn test_mode_on_demand_mremap() -> TestResult {
    const LEN: usize = 8 * PAGE;
    let mut ran = Vec::new();
    for mode in [MemMode::Odp, MemMode::Sva] {
        let (Some(ca), Some(cb)) = (ibv_ctx_in_mode(mode)?, ibv_ctx_in_mode(mode)?) else {
            continue;
        };
        ran.push(mode.name());
        let p = Pair::build(
            &ca,
            &cb,
            &PairOpts {
                len: LEN,
                kind: MrKind::Odp,
                ..Default::default()
            },
        )?;
        p.write_ok(1, LEN, "WRITE before the move")?;
        let old = p.b.buf.addr() as usize;
        // Somewhere free for the pages to go.
        let spare = Buffer::new(LEN)?;
        let new = spare.addr() as usize;
        // SAFETY: moves the test's own pages onto the test's own spare mapping, which they
        // replace (MREMAP_FIXED); dropping `spare` unmaps them at the end.
        let moved = unsafe {
            libc::mremap(
                old as *mut libc::c_void,
                LEN,
                LEN,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                new as *mut libc::c_void,
            )
        };
        check_eq!(moved as usize, new);
        let moved_bytes = spare.to_vec(0, LEN);
        check_eq!(moved_bytes, pattern(1, LEN));
        p.a.buf.write(0, &pattern(2, LEN));
        p.a.post(
            SendWr::new(2, WrOpcode::RdmaWrite, &[p.a.sge(0, LEN)])
                .remote(old as u64, p.b.mr.rkey()),
        )?;
        p.a.wait_wc(WcStatus::REM_ACCESS_ERR, None)?;
        check_eq!(spare.to_vec(0, LEN), moved_bytes);

        // Fresh memory at the old place: the MR reaches it.
        // SAFETY: the old range is unmapped (moved away); this maps it again for the buffer
        // that owns it.
        check!(
            unsafe { crate::matrix::remap_fresh(old, LEN) },
            "no remap at {old:#x}"
        );
        p.a.reconnect(p.b.qp.qp_num())?;
        p.write_ok(3, LEN, "WRITE into the new mapping at the old place")?;
        check_eq!(spare.to_vec(0, LEN), moved_bytes);
    }
    if ran.is_empty() {
        skip!("no on-demand memory mode here");
    }
    outln!("# modes: {}", ran.join(", "));
    Ok(())
}
