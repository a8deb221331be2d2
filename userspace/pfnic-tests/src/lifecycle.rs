//! Module unload/reload and device unbind, with and without open files.

use crate::common::{bind, cookie, join_within, nic, sh, spawn_event_reader, unbind};
use crate::ktap::{Failure, Test, TestResult};
use ibv::event_type;
use pfnic_cli::outln;
use pfnic_sys::{pci, uapi};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_rmmod_busy_while_open",
        run: test_rmmod_busy_while_open,
    },
    &Test {
        name: "test_unbind_with_open_file",
        run: test_unbind_with_open_file,
    },
    &Test {
        name: "test_unbind_wakes_submit",
        run: test_unbind_wakes_submit,
    },
    &Test {
        name: "test_unbind_frees_ring_memory",
        run: test_unbind_frees_ring_memory,
    },
    &Test {
        name: "test_unbind_device_fatal",
        run: test_unbind_device_fatal,
    },
    &Test {
        name: "test_wire_unbind_frees_device_memory",
        run: test_wire_unbind_frees_device_memory,
    },
    &Test {
        name: "test_unbind_rdma_core_device",
        run: test_unbind_rdma_core_device,
    },
    &Test {
        name: "test_unbind_open_uverbs_context",
        run: test_unbind_open_uverbs_context,
    },
    &Test {
        name: "test_unbind_pinned_context",
        run: test_unbind_pinned_context,
    },
    &Test {
        name: "test_unbind_bind_cycles",
        run: test_unbind_bind_cycles,
    },
    &Test {
        name: "test_rmmod_insmod_cycles",
        run: test_rmmod_insmod_cycles,
    },
];

const CYCLES: usize = 5;

fn module_path() -> String {
    std::env::var("PFNIC_MODULE").unwrap_or_else(|_| "/lib/modules/pfnic.ko".into())
}

fn loaded() -> bool {
    Path::new("/sys/module/pfnic").exists()
}

/// The lifecycle tests reload the module: without its file there is nothing to reload.
pub(crate) fn need_module() -> TestResult {
    if !Path::new(&module_path()).exists() {
        skip!("no module file at {} (set PFNIC_MODULE)", module_path());
    }
    Ok(())
}

fn insmod() -> TestResult {
    let (ok, out) = sh("insmod", &[&module_path()])?;
    check!(ok, "insmod failed: {out}");
    Ok(())
}

fn rmmod() -> TestResult {
    let (ok, out) = sh("rmmod", &["pfnic"])?;
    check!(ok, "rmmod failed: {out}");
    Ok(())
}

/// A working device: bound, its node present, query and an interrupt round trip work.
pub(crate) fn check_working() -> TestResult {
    let n = nic()?;
    check_eq!(pci::driver(&n.bdf).as_deref(), Some("pfnic"));
    let c = cookie();
    check_eq!(n.dev.selftest(1, c)?.echo, !c);
    Ok(())
}

/// An open file pins the module: rmmod fails with EBUSY and the device keeps working.
fn test_rmmod_busy_while_open() -> TestResult {
    need_module()?;
    let n = nic()?;
    let (ok, out) = sh("rmmod", &["pfnic"])?;
    check!(!ok, "rmmod succeeded with /dev/pfnic0 open");
    check!(
        out.contains("in use") || out.contains("busy") || out.contains("Resource"),
        "unexpected rmmod error: {out}"
    );
    check!(loaded(), "module gone after a failed rmmod");
    let c = cookie();
    check_eq!(n.dev.selftest(0, c)?.echo, !c);
    Ok(())
}

/// Unbinding the PCI device under an open file: the file's ioctls fail with ENODEV (nothing
/// touches the unmapped BAR), closing it is fine, and rebinding brings the device back.
fn test_unbind_with_open_file() -> TestResult {
    need_module()?;
    let n = nic()?;
    let drv = Path::new("/sys/bus/pci/drivers/pfnic");
    std::fs::write(drv.join("unbind"), &n.bdf)?;
    check!(pci::driver(&n.bdf).is_none(), "still bound after unbind");
    check!(
        !Path::new("/dev/pfnic0").exists(),
        "/dev/pfnic0 survived unbind"
    );
    for (what, r) in [
        ("query", n.dev.query().map(|_| ())),
        ("selftest", n.dev.selftest(0, 1).map(|_| ())),
    ] {
        match r {
            Ok(()) => fail!("{what} succeeded on an unbound device"),
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {}
            Err(e) => fail!("{what} on an unbound device: {e}, expected ENODEV"),
        }
    }
    drop(n);
    std::fs::write(
        drv.join("bind"),
        pci::functions()?.first().ok_or("no pfnic function")?,
    )?;
    check_working()
}

/// Free memory in KiB, from /proc/zoneinfo: the buddy allocator's free pages of every zone
/// plus the pages on the per-CPU lists, where freed pages go first (`MemFree` leaves those
/// out, and they can hold megabytes).
fn free_kib() -> Result<u64, Failure> {
    let info = std::fs::read_to_string("/proc/zoneinfo")?;
    let pages: u64 = info
        .lines()
        .map(str::trim)
        .filter_map(|l| {
            l.strip_prefix("pages free")
                .or_else(|| l.strip_prefix("count:"))
        })
        .filter_map(|v| v.trim().parse::<u64>().ok())
        .sum();
    check!(pages > 0, "no free pages in /proc/zoneinfo");
    Ok(pages * 4)
}

/// The DMA memory of a user context's rings does not outlive the device: a process holds its
/// context (through libibverbs) and the mappings of 64 big CQs (about 8 MiB of rings) across
/// an unbind, and the memory comes back at the unbind (the core disassociates the context),
/// not when the process closes it. A completion channel's reader blocked at the unbind wakes
/// with `EIO`.
fn test_unbind_frees_ring_memory() -> TestResult {
    need_module()?;
    let n = nic()?;
    let bdf = n.bdf.clone();
    drop(n);
    let ctx = crate::ibv_common::ibv_ctx()?;
    let max_cqe = ctx.query_device()?.max_cqe as u32;
    let ch = ctx.create_comp_channel()?;
    let cqs = (0..64)
        .map(|i| {
            ctx.create_cq(max_cqe, Some(&ch), 0)
                .map_err(|e| Failure::Fail(format!("create_cq {i}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    // A CQE is 32 bytes; each ring has a page for its record besides.
    let ring_kib = cqs.len() as u64 * (u64::from(max_cqe) * 32 + 4096) / 1024;
    check!(
        ring_kib >= 4096,
        "only {ring_kib} KiB of rings: no measurable difference"
    );
    let reader = spawn_event_reader(ch.fd())?;
    let before = free_kib()?;
    unbind(&bdf)?;
    let after = free_kib()?;
    let r = (|| -> TestResult {
        let freed = after.saturating_sub(before);
        outln!(
            "# {} CQs, {ring_kib} KiB of rings; free memory {before} -> {after} KiB",
            cqs.len()
        );
        check!(
            freed >= ring_kib * 3 / 4,
            "the unbind freed {freed} KiB, not the {ring_kib} KiB of rings the open file holds"
        );
        let (n, e, _) = join_within(
            reader,
            Duration::from_secs(5),
            "a channel reader did not wake at the unbind",
        )?;
        check_eq!((n, e), (-1, Some(libc::EIO)));
        Ok(())
    })();
    bind(&bdf)?;
    r?;
    drop(cqs);
    drop(ch);
    drop(ctx);
    check_working()
}

/// An unbind ends every user context with `IBV_EVENT_DEVICE_FATAL`: a reader blocked in
/// `read()` of the context's event file wakes with it, the context's verbs fail with `EIO`
/// and no other event follows; Debian's `ibv_asyncwatch` (a context of its own) prints it.
fn test_unbind_device_fatal() -> TestResult {
    need_module()?;
    let n = nic()?;
    let bdf = n.bdf.clone();
    drop(n);
    let ctx = crate::ibv_common::ibv_ctx()?;
    // SAFETY: the context is open; its event file lives as long as it.
    let async_fd = unsafe { (*ctx.as_ptr()).async_fd };
    let reader = spawn_event_reader(async_fd)?;
    let watch = crate::debian_tools::AsyncWatch::debian(&ctx.name())?;
    unbind(&bdf)?;
    let r = (|| -> TestResult {
        let (n, e, ev) = join_within(
            reader,
            Duration::from_secs(5),
            "a reader of the asynchronous events did not wake at the unbind",
        )?;
        check!(n == 16, "read {n} bytes ({e:?}), expected one event");
        let kind = u32::from_ne_bytes([ev[8], ev[9], ev[10], ev[11]]);
        check_eq!(kind, event_type::DEVICE_FATAL);
        // The context is dead: its verbs fail with EIO. Its event file stays open until the
        // program closes the context (the core's rule), with nothing more than
        // IBV_EVENT_DEVICE_FATAL in it (the core reports it once more as it destroys the
        // file's part of the context).
        check_eq!(
            ctx.alloc_pd().err().and_then(|e| e.raw_os_error()),
            Some(libc::EIO)
        );
        while let Some(ev) = ctx.get_async_event(Some(Duration::from_millis(500)))? {
            check_eq!(ev.event_type, event_type::DEVICE_FATAL);
        }
        match watch {
            Some(w) => w.expect(&["event_type IBV_EVENT_DEVICE_FATAL (8)"]),
            None => Ok(()),
        }
    })();
    bind(&bdf)?;
    r?;
    drop(ctx);
    check_working()
}

/// The driver's own DMA memory does not outlive the device either: a process holds a user
/// context (and with it the driver's state) across an unbind, and the device's 1 MiB backup
/// buffer, event queue and descriptor rings come back at the unbind, not at the close. Needs
/// a device with a wire (the backup buffer; the rest is too small to measure).
fn test_wire_unbind_frees_device_memory() -> TestResult {
    need_module()?;
    let n = nic()?;
    let bdf = n.bdf.clone();
    drop(n);
    let ctx = crate::ibv_common::ibv_ctx()?;
    // A port with a wire is a RoCE port: its link layer is Ethernet.
    if u32::from(ctx.query_port(1)?.link_layer) != ibv::sys::IBV_LINK_LAYER_ETHERNET {
        skip!("no wire: the device has no backup buffer to measure");
    }
    let before = free_kib()?;
    unbind(&bdf)?;
    let at_unbind = free_kib()?;
    drop(ctx);
    let at_close = free_kib()?;
    bind(&bdf)?;
    let freed = at_unbind.saturating_sub(before);
    outln!(
        "# free memory {before} KiB, {at_unbind} KiB after the unbind, {at_close} KiB after \
         the close"
    );
    let backup_kib = 1024;
    check!(
        freed >= backup_kib * 3 / 4,
        "the unbind freed {freed} KiB with a file open, less than the {backup_kib} KiB backup \
         buffer alone"
    );
    check_working()
}

/// A SUBMIT that waits for a long, faulting operation when the device is unbound returns at
/// once with ENODEV (the unbind's reset stopped the operation), not after its timeout.
fn test_unbind_wakes_submit() -> TestResult {
    need_module()?;
    let n = nic()?;
    let bdf = n.bdf.clone();
    // 256 MiB never touched: every page is a page request.
    const LEN: usize = 256 << 20;
    let buf = ibv::Buffer::with_flags(LEN, libc::MAP_NORESERVE)?;
    let addr = buf.addr();
    let dev = n.dev.try_clone()?;
    let worker = std::thread::spawn(move || {
        let mut op = uapi::Submit {
            opcode: uapi::PFNIC_OP_FILL,
            dst: addr,
            len: LEN as u64,
            pattern: 0x5a,
            ..Default::default()
        };
        let r = dev.submit(&mut op);
        (r.map_err(|e| e.raw_os_error()), Instant::now())
    });
    // Unbind as soon as the fill is under way (its first page requests went out), however
    // fast the guest is.
    let before = n.dev.query_stats()?.translation.page_requests;
    let deadline = Instant::now() + Duration::from_secs(20);
    while n.dev.query_stats()?.translation.page_requests < before + 64 {
        check!(
            Instant::now() < deadline,
            "the fill sent no page request within 20 s"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    let unbound = Instant::now();
    unbind(&bdf)?;
    let (r, returned) = worker
        .join()
        .map_err(|_| Failure::Fail("the SUBMIT thread panicked".into()))?;
    // The device no longer uses it: the thread is done.
    drop(buf);
    drop(n);
    bind(&bdf)?;
    // Ok(()) here would mean the fill finished before the unbind: nothing was tested.
    check_eq!(r, Err(Some(libc::ENODEV)));
    let waited = returned.saturating_duration_since(unbound);
    check!(
        waited < Duration::from_secs(20),
        "SUBMIT returned {waited:?} after the unbind"
    );
    check_working()
}

/// Unbind and bind 100 times (1000 in a soak run), each time with two user contexts open, a
/// QP connected and the doorbell pages mapped (by the provider): the device comes back
/// working, with no context or table entry left over (the debug kernel's kmemleak scan after
/// the suite checks that nothing leaked either).
fn test_unbind_bind_cycles() -> TestResult {
    let cycles = crate::common::iterations(100, 1000);
    need_module()?;
    let bdf = nic()?.bdf.clone();
    for i in 0..cycles {
        {
            let p = crate::ibv_common::Pair::new(&Default::default())?;
            unbind(&bdf)?;
            drop(p);
        }
        bind(&bdf).map_err(|e| match e {
            Failure::Fail(m) => Failure::Fail(format!("cycle {i}: {m}")),
            other => other,
        })?;
    }
    let n = nic()?;
    let st = n.dev.query_stats()?;
    // This file's context and the driver's own (the RDMA core's kernel clients').
    check_eq!(
        st.contexts_active,
        1 + crate::common::driver_contexts(&n.bdf)?
    );
    check_working()
}

/// Unbinding a pfnic takes its RDMA device out of the core (sysfs and the `rdma` tool's
/// netlink); binding it again brings the device back under the same name.
/// A process holds a user context with a PD, an MR, a CQ and a QP, its doorbell page and
/// rings mapped, and device memory, while the device is unbound: the unbind does not wait for
/// it (the core disassociates the context), its verbs then fail, its mapped doorbell page,
/// rings and device memory (the uverbs file's four mappings) raise SIGBUS, and it closes
/// everything without an error; the device comes back working.
fn test_unbind_open_uverbs_context() -> TestResult {
    need_module()?;
    let bdf = nic()?.bdf.clone();
    uverbs_context_across(None, || unbind(&bdf), || bind(&bdf)).map(|_| ())
}

/// The same with the context in the `pinned` memory mode, whose MR the RDMA core pinned
/// (`ib_umem`): the disassociation at unbind releases the pins, so the holder's `VmPin` is
/// back to 0 before it closes anything.
fn test_unbind_pinned_context() -> TestResult {
    need_module()?;
    crate::mem_modes::pinned_ctx()?;
    let bdf = nic()?.bdf.clone();
    let pinned = uverbs_context_across(Some("pinned"), || unbind(&bdf), || bind(&bdf))?;
    check!(
        pinned > 0,
        "the holder's MR pinned nothing (VmPin {pinned} kB)"
    );
    outln!("# {pinned} kB pinned before the unbind, 0 after");
    Ok(())
}

/// A process holds a user context (in the memory mode `mode`, else the default) with its
/// objects and mappings of the RDMA device `pfnicN` while `detach` takes the RDMA device away
/// (and `attach` brings it back): the context is disassociated (its verbs fail, its mappings
/// raise SIGBUS, its pinned pages are released), it closes everything without an error, and
/// the device comes back under its name, working. Returns the memory the process had pinned
/// before (`VmPin`, kB).
pub(crate) fn uverbs_context_across(
    mode: Option<&str>,
    detach: impl FnOnce() -> Result<(), Failure>,
    attach: impl FnOnce() -> Result<(), Failure>,
) -> Result<u64, Failure> {
    use std::io::{BufRead, BufReader};
    let name = crate::rdma_core::ib_name()?;
    let mut cmd = crate::rdma_core::uverbs_test(&[&name, "hold"])?;
    if let Some(mode) = mode {
        cmd.env("PFNIC_MEM_MODE", mode);
    }
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| Failure::Fail(format!("{}: {e}", crate::rdma_core::UVERBS_TEST)))?;
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut stdin = child.stdin.take().expect("piped");
    let first = lines.next().transpose()?.unwrap_or_default();
    // The doorbell page, the CQ's ring and the QP's queues, and device memory where the
    // device has it, readable.
    let dm = crate::common::nic()?.dev.query()?.caps & uapi::PFNIC_CAP_DM != 0;
    let maps = 3 + usize::from(dm);
    let pinned = first
        .strip_prefix(&format!("ready: {maps} mappings, 0 raise SIGBUS, VmPin "))
        .and_then(|kb| kb.strip_suffix(" kB"))
        .and_then(|kb| kb.parse::<u64>().ok());
    let Some(pinned) = pinned else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(Failure::Fail(format!(
            "the holder said {first:?}, not ready"
        )));
    };
    let detached = detach();
    writeln!(stdin, "go")?;
    let after = lines.next().transpose()?.unwrap_or_default();
    let closed = lines.next().transpose()?.unwrap_or_default();
    let status = child.wait()?;
    if detached.is_ok() {
        attach()?;
    }
    detached?;
    check_eq!(
        after,
        format!(
            "after: alloc_pd Input/output error, {maps} mappings, {maps} raise SIGBUS, VmPin 0 kB"
        )
    );
    check!(
        closed == "closed" && status.success(),
        "the holder's close: {closed:?}, {status}"
    );
    check_eq!(crate::rdma_core::ib_name()?, name);
    check_working()?;
    Ok(pinned)
}

fn test_unbind_rdma_core_device() -> TestResult {
    need_module()?;
    let bdf = nic()?.bdf.clone();
    let name = crate::rdma_core::ib_name()?;
    let dir = crate::rdma_core::ib_sysfs(&name);
    check!(
        dir.exists(),
        "{} does not exist before unbinding",
        dir.display()
    );
    unbind(&bdf)?;
    let gone = !dir.exists();
    let listed = std::process::Command::new("/usr/bin/rdma")
        .args(["dev", "show", &name])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    bind(&bdf)?;
    check!(gone, "{} survived the unbind", dir.display());
    check!(!listed, "`rdma dev show {name}` found it after the unbind");
    check!(dir.exists(), "{} did not come back", dir.display());
    check_eq!(crate::rdma_core::ib_name()?, name);
    check_working()
}

/// rmmod + insmod, repeatedly: the device goes and comes back each time, fully working.
fn test_rmmod_insmod_cycles() -> TestResult {
    need_module()?;
    for i in 0..CYCLES {
        rmmod()?;
        check!(!loaded(), "cycle {i}: module still loaded");
        check!(
            !Path::new("/dev/pfnic0").exists(),
            "cycle {i}: /dev/pfnic0 survived rmmod"
        );
        check!(
            pci::driver(&pci::functions()?[0]).is_none(),
            "cycle {i}: still bound"
        );
        insmod()?;
        check_working().map_err(|e| match e {
            Failure::Fail(m) => Failure::Fail(format!("cycle {i}: {m}")),
            other => other,
        })?;
    }
    Ok(())
}
