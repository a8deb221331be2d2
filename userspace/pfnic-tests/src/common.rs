//! Shared setup: find the one pfnic under test.

use crate::ktap::Failure;
use pfnic_sys::pci;
use pfnic_sys::Device;

/// The first pfnic: its PCI address and an open handle on its character device.
pub struct Nic {
    pub bdf: String,
    pub dev: Device,
}

pub fn nic() -> Result<Nic, Failure> {
    let bdf = match pci::functions()?.into_iter().next() {
        Some(b) => b,
        None => return Err(Failure::Fail("no pfnic PCI function in the guest".into())),
    };
    let path = pfnic_sys::devices()?.into_iter().next().ok_or_else(|| {
        Failure::Fail(format!(
            "{bdf} has no /dev/pfnicN (driver: {:?})",
            pci::driver(&bdf)
        ))
    })?;
    let dev = Device::open(&path).map_err(|e| Failure::Fail(format!("open {path:?}: {e}")))?;
    Ok(Nic { bdf, dev })
}

/// A cookie that differs from run to run, so a stale echo cannot pass.
pub fn cookie() -> u32 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_nsec as u32).rotate_left(13) ^ 0xa5a5_0f0f ^ (t.tv_sec as u32)
}
