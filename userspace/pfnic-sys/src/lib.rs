//! Raw access to pfnic character devices.
//!
//! The structures and ioctl numbers are the driver's own `uapi.rs`, compiled here unchanged.

use std::ffi::c_void;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, RawFd};
use std::path::{Path, PathBuf};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
use rustix::io::Errno;
use rustix::ioctl::{Ioctl, IoctlOutput, Opcode};
use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};

#[path = "../../../drivers/pfnic/uapi.rs"]
pub mod uapi;

pub mod pci;

#[cfg(test)]
mod cmd_abi_check;
#[cfg(test)]
mod rdma_abi_check;

pub use uapi::{
    AdviseMr, AllocDm, AsyncEvent, CqEvent, CreateCq, CreateQp, CreateSrq, DeviceStats, ModifyQp,
    ModifySrq, PortIpv4, QpAttr, QpCap, QpStats, QueryContext, QueryDevice, QueryMr, QueryPort,
    QueryQp, QuerySrq, QueryVerbs, RegMr, Selftest, Sge, Submit,
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

    /// `PFNIC_IOCTL_CREATE_COMP_CHANNEL`: a new completion channel of this file.
    pub fn create_comp_channel(&self) -> io::Result<CompChannel> {
        let mut arg = uapi::CompChannel::default();
        // SAFETY: `arg` is a valid, writable `CompChannel`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_CREATE_COMP_CHANNEL, (&raw mut arg).cast()) }?;
        // SAFETY: the driver just installed `arg.fd` for us; nothing else owns it.
        let file = unsafe { File::from_raw_fd(arg.fd) };
        Ok(EventFile::new(file))
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

    /// `PFNIC_IOCTL_ALLOC_PD`: a new protection domain; its handle.
    pub fn alloc_pd(&self) -> io::Result<u32> {
        let mut out = uapi::PdHandle::default();
        // SAFETY: `out` is a valid, writable `PdHandle`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_ALLOC_PD, (&raw mut out).cast()) }?;
        Ok(out.pd)
    }

    /// `PFNIC_IOCTL_DEALLOC_PD` (`EBUSY` while MRs or QPs use it).
    pub fn dealloc_pd(&self, pd: u32) -> io::Result<()> {
        let mut arg = uapi::PdHandle { pd, reserved: 0 };
        // SAFETY: `arg` is a valid `PdHandle`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_DEALLOC_PD, (&raw mut arg).cast()) }?;
        Ok(())
    }

    /// `PFNIC_IOCTL_REG_MR`: fills `mr`, `lkey` and `rkey` of `arg`.
    pub fn reg_mr(&self, arg: &mut RegMr) -> io::Result<()> {
        // SAFETY: `arg` is a valid, writable `RegMr`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_REG_MR, (arg as *mut RegMr).cast()) }?;
        Ok(())
    }

    /// `PFNIC_IOCTL_SET_MEM_MODE`: `uapi::PFNIC_MEM_MODE_*`, before the first MR.
    pub fn set_mem_mode(&self, mode: u32) -> io::Result<()> {
        let mut arg = uapi::MemMode { mode, reserved: 0 };
        // SAFETY: `arg` is a valid `MemMode`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_SET_MEM_MODE, (&raw mut arg).cast()) }?;
        Ok(())
    }

    /// `PFNIC_IOCTL_DEREG_MR`.
    pub fn dereg_mr(&self, mr: u32) -> io::Result<()> {
        let mut arg = uapi::MrHandle { mr, reserved: 0 };
        // SAFETY: `arg` is a valid `MrHandle`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_DEREG_MR, (&raw mut arg).cast()) }?;
        Ok(())
    }

    /// `PFNIC_IOCTL_ADVISE_MR`: prefetch ranges of on-demand MRs.
    pub fn advise_mr(&self, arg: &AdviseMr) -> io::Result<()> {
        let mut arg = *arg;
        // SAFETY: `arg` is a valid `AdviseMr`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_ADVISE_MR, (&raw mut arg).cast()) }?;
        Ok(())
    }

    /// `PFNIC_IOCTL_QUERY_MR`: the MR's page fault counters.
    pub fn query_mr(&self, mr: u32) -> io::Result<QueryMr> {
        let mut out = QueryMr {
            mr,
            ..Default::default()
        };
        // SAFETY: `out` is a valid, writable `QueryMr`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_QUERY_MR, (&raw mut out).cast()) }?;
        Ok(out)
    }

    /// `PFNIC_IOCTL_CREATE_CQ`: fills the outputs of `arg`.
    pub fn create_cq(&self, arg: &mut CreateCq) -> io::Result<()> {
        // SAFETY: `arg` is a valid, writable `CreateCq`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_CREATE_CQ, (arg as *mut CreateCq).cast()) }?;
        Ok(())
    }

    /// `PFNIC_IOCTL_DESTROY_CQ` (`EBUSY` while a QP uses it): the CQ's asynchronous events the
    /// file read.
    pub fn destroy_cq(&self, cqn: u32) -> io::Result<u32> {
        self.destroy_object(uapi::PFNIC_IOCTL_DESTROY_CQ, cqn)
    }

    /// A `DESTROY_*` ioctl of object `num`: its asynchronous events the file read.
    fn destroy_object(&self, cmd: u32, num: u32) -> io::Result<u32> {
        let mut arg = uapi::ObjectNumber {
            num,
            events_reported: 0,
        };
        // SAFETY: `arg` is a valid, writable `ObjectNumber`, the size every `DESTROY_*` ioctl
        // number encodes.
        unsafe { self.ioctl(cmd, (&raw mut arg).cast()) }?;
        Ok(arg.events_reported)
    }

    /// `PFNIC_IOCTL_CREATE_QP`: fills the outputs of `arg`.
    pub fn create_qp(&self, arg: &mut CreateQp) -> io::Result<()> {
        // SAFETY: `arg` is a valid, writable `CreateQp`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_CREATE_QP, (arg as *mut CreateQp).cast()) }?;
        Ok(())
    }

    /// `PFNIC_IOCTL_MODIFY_QP`.
    pub fn modify_qp(&self, arg: &ModifyQp) -> io::Result<()> {
        let mut arg = *arg;
        // SAFETY: `arg` is a valid `ModifyQp`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_MODIFY_QP, (&raw mut arg).cast()) }?;
        Ok(())
    }

    /// `PFNIC_IOCTL_QUERY_QP`: attributes, capabilities and counters of QP `qpn`.
    pub fn query_qp(&self, qpn: u32) -> io::Result<QueryQp> {
        let mut out = QueryQp {
            qpn,
            ..Default::default()
        };
        // SAFETY: `out` is a valid, writable `QueryQp`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_QUERY_QP, (&raw mut out).cast()) }?;
        Ok(out)
    }

    /// `PFNIC_IOCTL_DESTROY_QP`: the QP's asynchronous events the file read.
    pub fn destroy_qp(&self, qpn: u32) -> io::Result<u32> {
        self.destroy_object(uapi::PFNIC_IOCTL_DESTROY_QP, qpn)
    }

    /// `PFNIC_IOCTL_CREATE_SRQ`: fills the outputs of `arg`.
    pub fn create_srq(&self, arg: &mut CreateSrq) -> io::Result<()> {
        // SAFETY: `arg` is a valid, writable `CreateSrq`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_CREATE_SRQ, (arg as *mut CreateSrq).cast()) }?;
        Ok(())
    }

    /// `PFNIC_IOCTL_MODIFY_SRQ`.
    pub fn modify_srq(&self, arg: &ModifySrq) -> io::Result<()> {
        let mut arg = *arg;
        // SAFETY: `arg` is a valid `ModifySrq`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_MODIFY_SRQ, (&raw mut arg).cast()) }?;
        Ok(())
    }

    /// `PFNIC_IOCTL_QUERY_SRQ`: attributes and the device's view of SRQ `srqn`.
    pub fn query_srq(&self, srqn: u32) -> io::Result<QuerySrq> {
        let mut out = QuerySrq {
            srqn,
            ..Default::default()
        };
        // SAFETY: `out` is a valid, writable `QuerySrq`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_QUERY_SRQ, (&raw mut out).cast()) }?;
        Ok(out)
    }

    /// `PFNIC_IOCTL_DESTROY_SRQ` (`EBUSY` while a QP uses it): the SRQ's asynchronous events
    /// the file read.
    pub fn destroy_srq(&self, srqn: u32) -> io::Result<u32> {
        self.destroy_object(uapi::PFNIC_IOCTL_DESTROY_SRQ, srqn)
    }

    /// `PFNIC_IOCTL_ALLOC_DM`: fills the outputs of `arg`.
    pub fn alloc_dm(&self, arg: &mut AllocDm) -> io::Result<()> {
        // SAFETY: `arg` is a valid, writable `AllocDm`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_ALLOC_DM, (arg as *mut AllocDm).cast()) }?;
        Ok(())
    }

    /// `PFNIC_IOCTL_FREE_DM` (`EBUSY` while an MR uses it).
    pub fn free_dm(&self, dm: u32) -> io::Result<()> {
        let mut arg = uapi::DmHandle { dm, reserved: 0 };
        // SAFETY: `arg` is a valid `DmHandle`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_FREE_DM, (&raw mut arg).cast()) }?;
        Ok(())
    }

    /// `PFNIC_IOCTL_REG_DM_MR`: fills the outputs of `arg`.
    pub fn reg_dm_mr(&self, arg: &mut uapi::RegDmMr) -> io::Result<()> {
        // SAFETY: `arg` is a valid, writable `RegDmMr`, the size the ioctl number encodes.
        unsafe {
            self.ioctl(
                uapi::PFNIC_IOCTL_REG_DM_MR,
                (arg as *mut uapi::RegDmMr).cast(),
            )
        }?;
        Ok(())
    }

    /// `PFNIC_IOCTL_GET_ASYNC_FD`: the file that reads this file's asynchronous events
    /// ([`AsyncEvent`] records); `EBUSY` for a second one.
    pub fn get_async_fd(&self) -> io::Result<AsyncEventFile> {
        let mut arg = uapi::AsyncFd::default();
        // SAFETY: `arg` is a valid, writable `AsyncFd`, the size the ioctl number encodes.
        unsafe { self.ioctl(uapi::PFNIC_IOCTL_GET_ASYNC_FD, (&raw mut arg).cast()) }?;
        // SAFETY: the driver just installed `arg.fd` for us; nothing else owns it.
        Ok(EventFile::new(unsafe { File::from_raw_fd(arg.fd) }))
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

/// A record an event file returns: plain bytes, any bit pattern valid.
pub trait Event: zerocopy::FromBytes + zerocopy::IntoBytes + Default {}
impl Event for CqEvent {}
impl Event for AsyncEvent {}

/// A file that reads events of type `E`, one record per `read()`.
#[derive(Debug)]
pub struct EventFile<E> {
    file: File,
    _event: core::marker::PhantomData<E>,
}

/// A completion channel (`PFNIC_IOCTL_CREATE_COMP_CHANNEL`): a file of its own that reads the
/// completion events of the CQs created with it.
pub type CompChannel = EventFile<CqEvent>;

/// The asynchronous events of a device file (`PFNIC_IOCTL_GET_ASYNC_FD`).
pub type AsyncEventFile = EventFile<AsyncEvent>;

impl<E: Event> EventFile<E> {
    fn new(file: File) -> Self {
        Self {
            file,
            _event: core::marker::PhantomData,
        }
    }

    /// Reads one event. Blocks until one is queued unless the file is non-blocking
    /// ([`EventFile::set_nonblocking`]), in which case `Ok(None)` means none is queued.
    pub fn read_event(&self) -> io::Result<Option<E>> {
        let mut ev = E::default();
        let size = core::mem::size_of::<E>();
        loop {
            match rustix::io::read(&self.file, ev.as_mut_bytes()) {
                Err(Errno::INTR) => continue,
                Err(Errno::AGAIN) => return Ok(None),
                Err(e) => return Err(e.into()),
                Ok(n) if n != size => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("read {n} bytes of an event, expected {size}"),
                    ))
                }
                Ok(_) => return Ok(Some(ev)),
            }
        }
    }

    /// Sets or clears `O_NONBLOCK` on the file (shared by every handle of it): whether it was
    /// set before.
    pub fn set_nonblocking(&self, on: bool) -> io::Result<bool> {
        let mut fl = fcntl_getfl(&self.file)?;
        let was = fl.contains(OFlags::NONBLOCK);
        fl.set(OFlags::NONBLOCK, on);
        fcntl_setfl(&self.file, fl)?;
        Ok(was)
    }

    /// Waits up to `timeout_ms` (negative: forever) for an event to be readable:
    /// whether one is.
    pub fn poll_event(&self, timeout_ms: i32) -> io::Result<bool> {
        let timeout = (timeout_ms >= 0).then(|| Timespec {
            tv_sec: i64::from(timeout_ms / 1000),
            tv_nsec: i64::from(timeout_ms % 1000) * 1_000_000,
        });
        let mut fds = [PollFd::new(&self.file, PollFlags::IN)];
        loop {
            match poll(&mut fds, timeout.as_ref()) {
                Err(Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
                Ok(n) => {
                    let revents = fds[0].revents();
                    if revents.intersects(PollFlags::ERR | PollFlags::HUP | PollFlags::NVAL) {
                        return Err(io::Error::other(format!("poll: revents {revents:?}")));
                    }
                    return Ok(n > 0 && revents.contains(PollFlags::IN));
                }
            }
        }
    }
}

impl<E> AsFd for EventFile<E> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl<E> AsRawFd for EventFile<E> {
    fn as_raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
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
        assert_eq!(size_of::<TranslationStats>(), 56);
        assert_eq!(size_of::<QueryContext>(), 80);
        assert_eq!(size_of::<DeviceStats>(), 208);
        assert_eq!(size_of::<QueryDevice>(), 88);
        assert_eq!(size_of::<Submit>(), 64);
        assert_eq!(size_of::<CreateCq>(), 56);
        assert_eq!(size_of::<QueryMr>(), 80);
        assert_eq!(size_of::<MemMode>(), 8);
        assert_eq!(size_of::<QueryVerbs>(), 104);
        assert_eq!(size_of::<ObjectNumber>(), 8);
        assert_eq!(size_of::<CreateQp>(), 104);
        assert_eq!(size_of::<AsyncFd>(), 8);
        assert_eq!(size_of::<AsyncEvent>(), 16);
        assert_eq!(size_of::<CreateSrq>(), 56);
        assert_eq!(size_of::<ModifySrq>(), 16);
        assert_eq!(size_of::<QuerySrq>(), 32);
        assert_eq!(size_of::<AllocDm>(), 32);
        assert_eq!(size_of::<DmHandle>(), 8);
        assert_eq!(size_of::<RegDmMr>(), 48);
    }
}
