//! Module unload/reload and device unbind, with and without open files.

use crate::common::{cookie, nic, sh};
use crate::ktap::{Failure, Test, TestResult};
use pfnic_sys::pci;
use std::path::Path;

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
fn need_module() -> TestResult {
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
fn check_working() -> TestResult {
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
