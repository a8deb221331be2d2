//! Raw access to pfnic character devices.
//!
//! The structures and ioctl numbers are the driver's own `uapi.rs`, compiled here unchanged.

use std::ffi::c_void;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

use rustix::io::Errno;
use rustix::ioctl::{Ioctl, IoctlOutput, Opcode};
use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};

#[path = "../../../drivers/pfnic/uapi.rs"]
pub mod uapi;

pub mod pci;

#[cfg(test)]
mod cmd_abi_check;
#[cfg(test)]
mod queue_abi_check;
#[cfg(test)]
mod rdma_abi_check;

pub use uapi::{
    DeviceStats, PortIpv4, QueryContext, QueryDevice, QueryPort, QueryVerbs, Selftest, Submit,
};

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

    /// Wraps a file of the device opened elsewhere (a uverbs file of the RDMA core that
    /// libibverbs opened): only [`Device::mmap`] applies to it, the private ioctls fail.
    pub fn from_fd(fd: std::os::fd::OwnedFd) -> Self {
        Self {
            file: File::from(fd),
            path: PathBuf::from("/dev/infiniband/uverbs"),
        }
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

    /// A second handle on the same open file (`dup()`): same context, same objects, same event
    /// queue.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(Self {
            file: self.file.try_clone()?,
            path: self.path.clone(),
        })
    }

    /// `PFNIC_IOCTL_QUERY_VERBS`: the verbs limits and on-demand-paging capabilities.
    pub fn query_verbs(&self) -> io::Result<QueryVerbs> {
        let mut out = QueryVerbs::default();
        // SAFETY: `out` is a valid, writable `QueryVerbs`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_QUERY_VERBS, (&raw mut out).cast()) }?;
        Ok(out)
    }

    /// `PFNIC_IOCTL_QUERY_PORT`: port 1, its GIDs, addresses and counters.
    pub fn query_port(&self) -> io::Result<QueryPort> {
        let mut out = QueryPort::default();
        // SAFETY: `out` is a valid, writable `QueryPort`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_QUERY_PORT, (&raw mut out).cast()) }?;
        Ok(out)
    }

    /// `PFNIC_IOCTL_SET_PORT_IPV4`: sets the port's IPv4 address (`None` clears it). Needs
    /// `CAP_NET_ADMIN` (`EPERM`); `EINVAL` for an address no host can have.
    pub fn set_port_ipv4(&self, addr: Option<std::net::Ipv4Addr>) -> io::Result<()> {
        let mut arg = PortIpv4 {
            ipv4: addr.map_or(0, u32::from),
            reserved: 0,
        };
        // SAFETY: `arg` is a valid `PortIpv4`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_SET_PORT_IPV4, (&raw mut arg).cast()) }?;
        Ok(())
    }

    /// Maps `len` bytes of the file at `offset` (shared, read/write): the doorbell page
    /// ([`uapi::PFNIC_MMAP_DOORBELL`]) or a queue the driver allocated.
    pub fn mmap(&self, offset: u64, len: usize) -> io::Result<Mapping> {
        if len == 0 {
            return Err(Errno::INVAL.into());
        }
        // SAFETY: a new shared mapping of our own file; the kernel picks the address, so it
        // overlaps nothing.
        let ptr = unsafe {
            mmap(
                core::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &self.file,
                offset,
            )
        }?;
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }

    /// Issues a raw ioctl, for callers (tests) that need to pass arbitrary arguments.
    ///
    /// # Safety
    ///
    /// `arg` must be whatever `cmd` expects, or the kernel may write through it.
    pub unsafe fn ioctl(&self, cmd: u32, arg: *mut c_void) -> io::Result<IoctlOutput> {
        // SAFETY: forwarded to the caller.
        Ok(unsafe { rustix::ioctl::ioctl(&self.file, RawIoctl { cmd, arg }) }?)
    }
}

/// An ioctl whose number is known at run time, with its argument as the raw pointer the
/// number implies (or any other, for the tests that pass bad ones), giving back the return
/// value.
struct RawIoctl {
    cmd: Opcode,
    arg: *mut c_void,
}

// SAFETY: `as_ptr` is the caller's pointer, which `Device::ioctl`'s contract makes what `cmd`
// expects; the kernel may write through it (`IS_MUTATING`), and the output is the return value
// alone.
unsafe impl Ioctl for RawIoctl {
    type Output = IoctlOutput;

    const IS_MUTATING: bool = true;

    fn opcode(&self) -> Opcode {
        self.cmd
    }

    fn as_ptr(&mut self) -> *mut c_void {
        self.arg
    }

    unsafe fn output_from_ptr(out: IoctlOutput, _: *mut c_void) -> rustix::io::Result<IoctlOutput> {
        Ok(out)
    }
}

impl AsRawFd for Device {
    fn as_raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

/// A shared mapping of a pfnic file (doorbell page or queue memory), unmapped on drop.
///
/// Both the device and the process access this memory; it is only reachable through raw
/// pointers, and callers use volatile or atomic accesses on it.
#[derive(Debug)]
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory, not tied to a thread; it is only accessed through
// raw pointers by the users, who synchronize (atomics, fences) as the device protocol requires.
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`: `&Mapping` gives out nothing but the raw pointer and the length.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// The start of the mapping (page aligned).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never: `mmap` refuses a zero length).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `Device::mmap` mapped; nothing refers to it any more.
        // Unmapping a mapping of ours cannot fail.
        let _ = unsafe { munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::uapi::*;
    use core::mem::size_of;

    /// The sizes `fuzz/syzkaller/include/pfnic_uapi.h` asserts for its C mirror of the uAPI
    /// (and its ioctl numbers encode): a change here needs that header updated too.
    #[test]
    fn layouts_match_the_c_mirror() {
        assert_eq!(size_of::<QueryDevice>(), 88);
        assert_eq!(size_of::<Selftest>(), 32);
        assert_eq!(size_of::<QueryContext>(), 80);
        assert_eq!(size_of::<TranslationStats>(), 56);
        assert_eq!(size_of::<DeviceStats>(), 208);
        assert_eq!(size_of::<Submit>(), 64);
        assert_eq!(size_of::<QueryVerbs>(), 104);
        assert_eq!(size_of::<QueryPort>(), 176);
        assert_eq!(size_of::<PortIpv4>(), 8);
    }
}
