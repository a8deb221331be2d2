//! Raw access to pfnic character devices.
//!
//! The structures and ioctl numbers are the driver's own `uapi.rs`, compiled here unchanged.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

#[path = "../../../drivers/pfnic/uapi.rs"]
pub mod uapi;

pub mod pci;

pub use uapi::{DeviceStats, QueryContext, QueryDevice, Selftest, Submit};

/// An open `/dev/pfnicN`.
#[derive(Debug)]
pub struct Device {
    file: File,
    path: PathBuf,
}

/// The pfnic character devices present, in index order.
pub fn devices() -> io::Result<Vec<PathBuf>> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/dev")?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let index = name.strip_prefix("pfnic")?.parse().ok()?;
            Some((index, e.path()))
        })
        .collect();
    found.sort();
    Ok(found.into_iter().map(|(_, p)| p).collect())
}

impl Device {
    /// Opens a pfnic character device.
    pub fn open(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new().read(true).write(true).open(&path)?;
        Ok(Self { file, path })
    }

    /// The device node this was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `PFNIC_IOCTL_QUERY_DEVICE`.
    pub fn query(&self) -> io::Result<QueryDevice> {
        let mut out = QueryDevice::default();
        // SAFETY: `out` is a valid, writable `QueryDevice`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_QUERY_DEVICE, (&raw mut out).cast()) }?;
        Ok(out)
    }

    /// `PFNIC_IOCTL_QUERY_CONTEXT`: the hardware context and PASID this open file owns.
    pub fn query_context(&self) -> io::Result<QueryContext> {
        let mut out = QueryContext::default();
        // SAFETY: `out` is a valid, writable `QueryContext`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_QUERY_CONTEXT, (&raw mut out).cast()) }?;
        Ok(out)
    }

    /// `PFNIC_IOCTL_SUBMIT`: one DMA operation in this process's address space; waits for it.
    pub fn submit(&self, op: &mut Submit) -> io::Result<()> {
        // SAFETY: `op` is a valid, writable `Submit`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_SUBMIT, (op as *mut Submit).cast()) }?;
        Ok(())
    }

    /// `PFNIC_IOCTL_QUERY_STATS`: device-wide counters.
    pub fn query_stats(&self) -> io::Result<DeviceStats> {
        let mut out = DeviceStats::default();
        // SAFETY: `out` is a valid, writable `DeviceStats`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_QUERY_STATS, (&raw mut out).cast()) }?;
        Ok(out)
    }

    /// `PFNIC_IOCTL_SELFTEST`: have the device raise `vector` and wait for the interrupt.
    pub fn selftest(&self, vector: u32, cookie: u32) -> io::Result<Selftest> {
        let mut arg = Selftest {
            vector,
            cookie,
            ..Default::default()
        };
        // SAFETY: `arg` is a valid, writable `Selftest`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_SELFTEST, (&raw mut arg).cast()) }?;
        Ok(arg)
    }

    /// Issues a raw ioctl, for callers (tests) that need to pass arbitrary arguments.
    ///
    /// # Safety
    ///
    /// `arg` must be whatever `cmd` expects, or the kernel may write through it.
    pub unsafe fn ioctl(&self, cmd: u32, arg: *mut libc::c_void) -> io::Result<libc::c_int> {
        // SAFETY: forwarded to the caller.
        let ret = unsafe { libc::ioctl(self.file.as_raw_fd(), cmd as libc::c_ulong, arg) };
        if ret < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(ret)
        }
    }
}

impl AsRawFd for Device {
    fn as_raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}
