//! Hardware contexts: one per open file, bound to the opener's address space through SVA.

use crate::common::{dmesg, in_child, nic, platform_has_pri, sva_nic};
use crate::ktap::{Test, TestResult};
use pfnic_sys::pci::{self, Config};
use pfnic_sys::{uapi, Device};

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_context_sva_bound",
        run: test_context_sva_bound,
    },
    &Test {
        name: "test_context_per_address_space",
        run: test_context_per_address_space,
    },
    &Test {
        name: "test_fork_child_refused",
        run: test_fork_child_refused,
    },
    &Test {
        name: "test_contexts_released",
        run: test_contexts_released,
    },
    &Test {
        name: "test_context_stopped_on_exit",
        run: test_context_stopped_on_exit,
    },
    &Test {
        name: "test_open_without_sva",
        run: test_open_without_sva,
    },
];

/// Opening binds the process's address space: the context has a PASID, and the PCI functions
/// the IOMMU driver turns on for SVA (PASID, ATS, PRI) are enabled in config space.
fn test_context_sva_bound() -> TestResult {
    let n = sva_nic()?;
    let q = n.dev.query()?;
    let c = n.dev.query_context()?;
    check!(c.pasid > 0, "PASID 0 is reserved");
    check!(
        c.context < q.num_contexts,
        "context {} of {}",
        c.context,
        q.num_contexts
    );
    check_eq!(c.reserved, 0);
    check_eq!(c.remote_access_errors, 0);

    let cfg = Config::read(&n.bdf)?;
    let pasid = cfg
        .ext_cap(pci::EXT_CAP_PASID)
        .ok_or("no PASID capability")?;
    let ats = cfg.ext_cap(pci::EXT_CAP_ATS).ok_or("no ATS capability")?;
    let pri = cfg.ext_cap(pci::EXT_CAP_PRI).ok_or("no PRI capability")?;
    check!(
        cfg.u16(pasid + 6) & 1 != 0,
        "PASID not enabled in config space"
    );
    check!(
        cfg.u16(ats + 6) & 0x8000 != 0,
        "ATS not enabled in config space"
    );
    check!(cfg.u16(pri + 4) & 1 != 0, "PRI not enabled in config space");

    let log = dmesg()?;
    check!(
        log.lines().any(|l| l.contains("pfnic0: SVA bound, PASID")),
        "no 'pfnic0: SVA bound' line in the kernel log"
    );
    Ok(())
}

/// Two files of one process share the PASID (one address space) but not the context; another
/// process gets another PASID.
fn test_context_per_address_space() -> TestResult {
    let a = sva_nic()?;
    let b = Device::open(a.dev.path())?;
    let (ca, cb) = (a.dev.query_context()?, b.query_context()?);
    check_eq!(ca.pasid, cb.pasid);
    check!(
        ca.context != cb.context,
        "two files share context {}",
        ca.context
    );

    let path = a.dev.path().to_path_buf();
    let parent_pasid = ca.pasid;
    let rc = in_child(
        move || match Device::open(&path).and_then(|d| d.query_context()) {
            Ok(c) if c.pasid != parent_pasid && c.pasid != 0 => 0,
            Ok(_) => 1,
            Err(_) => 2,
        },
    )?;
    check!(
        rc == 0,
        "child's own context: status {rc} (1: same PASID as the parent, 2: error)"
    );
    Ok(())
}

/// A child that inherits the file across fork cannot use the parent's context.
fn test_fork_child_refused() -> TestResult {
    let n = sva_nic()?;
    let before = n.dev.query_context()?;
    let dev = &n.dev;
    let rc = in_child(|| match dev.query_context() {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => 0,
        Err(_) => 1,
        Ok(_) => 2,
    })?;
    check!(
        rc == 0,
        "child using the parent's context: status {rc} (1: wrong errno, 2: allowed)"
    );
    // The parent's context is untouched.
    let after = n.dev.query_context()?;
    check_eq!((after.context, after.pasid), (before.context, before.pasid));
    Ok(())
}

/// Contexts are a bounded resource: all can be taken (one more open gets EBUSY), and they come
/// back when files are closed or their process dies.
fn test_contexts_released() -> TestResult {
    let first = sva_nic()?;
    // The driver's own context (the RDMA core's kernel clients') is not the files' to take.
    let held = crate::common::driver_contexts(&first.bdf)? as usize;
    let total = first.dev.query()?.num_contexts as usize - held;
    // The lowest free slot, which comes back once every file is closed.
    let lowest = first.dev.query_context()?.context;
    let path = first.dev.path().to_path_buf();
    let mut files = vec![first.dev];
    while files.len() < total {
        files.push(Device::open(&path).map_err(|e| format!("open #{}: {e}", files.len() + 1))?);
    }
    match Device::open(&path) {
        Ok(_) => fail!("open #{} succeeded with every context in use", total + 1),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
        Err(e) => fail!("open with every context in use: {e}, expected EBUSY"),
    }
    files.truncate(total - 2);
    // A process that dies holding contexts gives them back.
    let p = path.clone();
    let rc = in_child(move || {
        let held: Vec<_> = (0..2).filter_map(|_| Device::open(&p).ok()).collect();
        if held.len() == 2 {
            0
        } else {
            1
        }
    })?;
    check!(rc == 0, "the child could not take the 2 free contexts");
    files.push(Device::open(&path)?);
    files.push(Device::open(&path)?);
    drop(files);
    check_eq!(nic()?.dev.query_context()?.context, lowest);
    Ok(())
}

/// A process that exits with the file open tears its address space down before its files are
/// closed: the driver's MMU notifier stops the context first, and the close frees it later.
fn test_context_stopped_on_exit() -> TestResult {
    let n = sva_nic()?;
    let mine = n.dev.query_context()?;
    // An ordinary close is not an exit.
    let before_close = n.dev.query_stats()?;
    drop(Device::open(n.dev.path())?);
    check_eq!(
        n.dev.query_stats()?.contexts_stopped_by_exit,
        before_close.contexts_stopped_by_exit
    );
    let before = n.dev.query_stats()?;
    let path = n.dev.path().to_path_buf();
    let rc = in_child(move || match Device::open(&path) {
        // Exit holding the file: _exit releases the address space, then closes the file.
        Ok(dev) => {
            std::mem::forget(dev);
            0
        }
        Err(_) => 1,
    })?;
    check!(rc == 0, "the child could not open the device");
    let after = n.dev.query_stats()?;
    check_eq!(after.contexts_created, before.contexts_created + 1);
    check_eq!(
        after.contexts_stopped_by_exit,
        before.contexts_stopped_by_exit + 1
    );
    check_eq!(after.contexts_active, before.contexts_active);
    // Our own context was not touched.
    let again = n.dev.query_context()?;
    check_eq!((again.context, again.pasid), (mine.context, mine.pasid));
    Ok(())
}

/// Without PRI the device cannot fault on process memory, so there is no SVA: open gives a
/// context without a PASID, whose user contexts get the `odp` memory mode (`pinned` on a
/// device without driver-managed faults), and says so in the kernel log; what needs a PASID
/// (`SUBMIT`) is `EOPNOTSUPP` (the SVA mode through the core: `test_mode_*`). `make test` runs this in a
/// second guest whose pfnic has pri=off, with the verbs suite.
fn test_open_without_sva() -> TestResult {
    let bdf = pci::functions()?
        .into_iter()
        .next()
        .ok_or("no pfnic function")?;
    if platform_has_pri(&bdf)? {
        skip!("this platform has PRI: open() must work (test_context_sva_bound)");
    }
    let path = pfnic_sys::devices()?
        .into_iter()
        .next()
        .ok_or("no /dev/pfnicN")?;
    let dev = Device::open(&path).map_err(|e| format!("open without PRI: {e}"))?;
    let q = dev.query()?;
    check!(
        q.caps & uapi::PFNIC_CAP_PRI == 0,
        "PRI in the caps with pri=off"
    );
    check!(
        q.caps & uapi::PFNIC_CAP_TABLES != 0,
        "no translation tables"
    );
    let c = dev.query_context()?;
    check_eq!(c.pasid, 0);
    let want = if q.caps & uapi::PFNIC_CAP_FAULTS != 0 {
        uapi::PFNIC_MEM_MODE_ODP
    } else {
        uapi::PFNIC_MEM_MODE_PINNED
    };
    check_eq!(c.mem_mode, want);
    let mut op = uapi::Submit {
        opcode: uapi::PFNIC_OP_FILL,
        len: 8,
        ..Default::default()
    };
    match dev.submit(&mut op) {
        Ok(()) => fail!("SUBMIT succeeded without a PASID"),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {}
        Err(e) => fail!("SUBMIT without a PASID: {e}, expected EOPNOTSUPP"),
    }
    let log = dmesg()?;
    check!(
        log.contains("runs without a PASID (no SVA here): memory modes odp and pinned"),
        "no kernel message says the context has no PASID"
    );
    Ok(())
}
