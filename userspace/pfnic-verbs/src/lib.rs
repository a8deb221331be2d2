//! Safe RDMA verbs over pfnic, shaped after libibverbs.
//!
//! Objects are layered as in libibverbs: a [`Context`] (one open `/dev/pfnicN`, with its own
//! hardware context and PASID), [`Pd`]s, [`Mr`]s in a PD, [`Cq`]s, and RC [`Qp`]s in a PD using
//! two CQs. Every object keeps what it depends on alive (`Arc`), so dropping them in any order
//! is safe: the kernel objects go away in dependency order (QP, then its CQs and PD, then the
//! file). Each object also has an explicit destroy (`Pd::dealloc`, `Mr::dereg`, `Cq::destroy`,
//! `Qp::destroy`) that reports the kernel's errno (`EBUSY` while in use) and gives the object
//! back on failure, as the libibverbs calls do.
//!
//! The data path never enters the kernel: [`Qp::post_send`] and [`Qp::post_recv`] write
//! 128-byte WQEs into the queues mapped from the driver and ring the context's doorbell page
//! (BAR2); [`Cq::poll`] reads CQEs from the mapped ring by their owner bit and publishes the
//! consumer index in the CQ record; [`Cq::req_notify`] arms the CQ through the doorbell page.
//! Completion events are read from completion channels ([`CompChannel`]), a file each. Formats: docs/verbs.md.
//!
//! Memory is not pinned in the default memory mode (SVA, [`MemMode`]). [`Buffer`] is ordinary
//! anonymous memory that a safe [`Pd::reg_mr`] borrows for the MR's lifetime; the device faults
//! its pages in through the IOMMU (PRI). In the `pinned` mode, registration pins them.
//! [`Pd::reg_mr_raw`] and [`Pd::reg_implicit_mr`] register arbitrary ranges and are `unsafe`:
//! they let the device (and remote peers) write memory that Rust code may own.
//!
//! Errors are `std::io::Error`s carrying the errno libibverbs would return.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub use pfnic_sys;
use pfnic_sys::uapi;
pub use pfnic_sys::{
    AsyncEvent, CqEvent, QpAttr, QpCap, QpStats, QueryDevice, QueryPort, QueryQp, QueryVerbs,
};
use pfnic_sys::{Device, Mapping};

mod buffer;
mod cq;
mod dm;
mod qp;
mod queue;
mod srq;
mod types;

pub use buffer::Buffer;
pub use cq::Cq;
pub use dm::{Dm, DmMap};
pub use qp::{set_global_route, ConnectAttr, GlobalRoute, Qp, QpInitAttr};
pub use srq::{Srq, SrqAttr, SrqInitAttr};
pub use types::*;

/// The MR counters of mlx5 ODP (`page_faults`, ...), as [`Mr::stats`] returns them.
pub type MrStats = pfnic_sys::QueryMr;

/// `ibv_qp_attr_mask` bits ([`Qp::modify`]).
pub mod qp_attr {
    pub use pfnic_sys::uapi::{
        PFNIC_QP_ACCESS_FLAGS as ACCESS_FLAGS, PFNIC_QP_AV as AV, PFNIC_QP_CUR_STATE as CUR_STATE,
        PFNIC_QP_DEST_QPN as DEST_QPN, PFNIC_QP_MAX_DEST_RD_ATOMIC as MAX_DEST_RD_ATOMIC,
        PFNIC_QP_MAX_QP_RD_ATOMIC as MAX_QP_RD_ATOMIC, PFNIC_QP_MIN_RNR_TIMER as MIN_RNR_TIMER,
        PFNIC_QP_PATH_MTU as PATH_MTU, PFNIC_QP_PKEY_INDEX as PKEY_INDEX, PFNIC_QP_PORT as PORT,
        PFNIC_QP_RETRY_CNT as RETRY_CNT, PFNIC_QP_RNR_RETRY as RNR_RETRY,
        PFNIC_QP_RQ_PSN as RQ_PSN, PFNIC_QP_SQ_PSN as SQ_PSN, PFNIC_QP_STATE as STATE,
        PFNIC_QP_TIMEOUT as TIMEOUT,
    };
}

/// The environment variable that chooses the memory mode of every context a process opens
/// (`sva`, `odp` or `pinned`; unset: the driver's default, `sva` where the platform has SVA,
/// else `odp` where the device has driver-managed faults, else `pinned`). An
/// unknown name fails the open with `EINVAL`, a mode the platform cannot run with
/// `EOPNOTSUPP`.
pub const MEM_MODE_ENV: &str = "PFNIC_MEM_MODE";

/// Size of the doorbell page.
const DOORBELL_PAGE: usize = 4096;
/// Doorbell offsets in the context's page (docs/verbs.md, "User doorbells").
pub(crate) const DB_SQ: usize = 0x008;
pub(crate) const DB_RQ: usize = 0x00c;
pub(crate) const DB_CQ_ARM: usize = 0x010;
pub(crate) const DB_SRQ: usize = 0x014;

/// `enum ibv_event_type` values of [`AsyncEvent::event_type`].
pub mod event_type {
    pub use pfnic_sys::uapi::{
        PFNIC_EVENT_CQ_ERR as CQ_ERR, PFNIC_EVENT_DEVICE_FATAL as DEVICE_FATAL,
        PFNIC_EVENT_GID_CHANGE as GID_CHANGE, PFNIC_EVENT_PORT_ACTIVE as PORT_ACTIVE,
        PFNIC_EVENT_PORT_ERR as PORT_ERR, PFNIC_EVENT_QP_FATAL as QP_FATAL,
        PFNIC_EVENT_QP_LAST_WQE_REACHED as QP_LAST_WQE_REACHED,
        PFNIC_EVENT_SRQ_LIMIT_REACHED as SRQ_LIMIT_REACHED,
    };
}

pub(crate) fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

/// State shared by a context and every object created from it.
pub(crate) struct Ctx {
    /// Unmapped before the file closes (fields drop in order).
    doorbell: Mapping,
    pub(crate) dev: Device,
    device: QueryDevice,
}

impl Ctx {
    /// Reads the 32-bit register at `offset` of the context's BAR2 page.
    fn read_db(&self, offset: usize) -> u32 {
        debug_assert!(offset + 4 <= self.doorbell.len() && offset.is_multiple_of(4));
        // SAFETY: `offset` is an aligned register inside the mapped page, which lives as long
        // as `self`; device registers need a volatile access.
        unsafe {
            self.doorbell
                .as_ptr()
                .add(offset)
                .cast::<u32>()
                .read_volatile()
        }
    }

    /// The device clock: the high half, the low half, and the high half again, until the two
    /// high halves agree (the low half did not wrap in between).
    fn read_clock(&self) -> u64 {
        loop {
            let hi = self.read_db(uapi::PFNIC_DB_CLOCK_HI);
            let lo = self.read_db(uapi::PFNIC_DB_CLOCK_LO);
            if self.read_db(uapi::PFNIC_DB_CLOCK_HI) == hi {
                return u64::from(hi) << 32 | u64::from(lo);
            }
        }
    }

    /// Writes `value` to the 32-bit doorbell register at `offset` of the context's BAR2 page.
    pub(crate) fn ring(&self, offset: usize, value: u32) {
        debug_assert!(offset + 4 <= self.doorbell.len() && offset.is_multiple_of(4));
        // Queue memory written before the doorbell must be visible to the device first.
        std::sync::atomic::fence(Ordering::Release);
        // SAFETY: `offset` is one of the aligned doorbell registers inside the mapped page,
        // which lives as long as `self`; device registers need a volatile access.
        unsafe {
            self.doorbell
                .as_ptr()
                .add(offset)
                .cast::<u32>()
                .write_volatile(value)
        };
    }
}

/// An open pfnic device: `ibv_context`.
///
/// Cloning gives another handle on the same context (same file, same objects).
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<Ctx>,
}

/// What `ibv_query_device_ex` reports: the device's identity and its verbs limits, including
/// the on-demand-paging capabilities.
#[derive(Clone, Copy, Debug)]
pub struct DeviceAttr {
    pub device: QueryDevice,
    pub verbs: QueryVerbs,
}

impl Context {
    /// Opens `/dev/pfnic<index>`.
    pub fn open(index: u32) -> io::Result<Self> {
        Self::open_path(format!("/dev/pfnic{index}"))
    }

    /// Opens a pfnic device node. Fails with `EOPNOTSUPP` if the device has no verbs
    /// (`PFNIC_CAP_VERBS`).
    pub fn open_path(path: impl AsRef<Path>) -> io::Result<Self> {
        Self::from_device(Device::open(path)?)
    }

    /// A context over a user context of Linux's RDMA core (`/dev/infiniband/uverbsN`), which
    /// libibverbs opened and pfnic's rdma-core provider drives: `fd` is a duplicate of its
    /// command file, whose first page is the context's doorbell page; `caps` the driver's
    /// `PFNIC_CAP_*`. The core creates the objects ([`Cq::from_core`], [`Qp::from_core`]);
    /// this context only posts to and polls them, and the private ioctls fail on it.
    pub fn from_core(fd: std::os::fd::OwnedFd, caps: u64) -> io::Result<Self> {
        let dev = Device::from_fd(fd);
        let doorbell = dev.mmap(uapi::PFNIC_MMAP_DOORBELL, DOORBELL_PAGE)?;
        Ok(Self {
            inner: Arc::new(Ctx {
                dev,
                doorbell,
                device: QueryDevice {
                    caps,
                    ..Default::default()
                },
            }),
        })
    }

    /// The start of the mapped doorbell page (for diagnostics).
    pub fn doorbell_ptr(&self) -> *mut u8 {
        self.inner.doorbell.as_ptr()
    }

    /// Wraps an open device: checks for verbs, applies `PFNIC_MEM_MODE` (see
    /// [`MEM_MODE_ENV`]) and maps the doorbell page.
    pub fn from_device(dev: Device) -> io::Result<Self> {
        let device = dev.query()?;
        if device.caps & uapi::PFNIC_CAP_VERBS == 0 {
            return Err(errno(libc::EOPNOTSUPP));
        }
        if let Some(name) = std::env::var_os(MEM_MODE_ENV) {
            let mode = MemMode::parse(&name.to_string_lossy())?;
            dev.set_mem_mode(mode.raw())?;
        }
        let doorbell = dev.mmap(uapi::PFNIC_MMAP_DOORBELL, DOORBELL_PAGE)?;
        Ok(Self {
            inner: Arc::new(Ctx {
                dev,
                doorbell,
                device,
            }),
        })
    }

    /// Chooses how this context's MRs reach memory; only before its first MR (`EBUSY`
    /// after), `EOPNOTSUPP` for a mode the platform cannot run.
    pub fn set_mem_mode(&self, mode: MemMode) -> io::Result<()> {
        self.inner.dev.set_mem_mode(mode.raw())
    }

    /// The context's memory mode.
    pub fn mem_mode(&self) -> io::Result<MemMode> {
        let raw = self.inner.dev.query_context()?.mem_mode;
        MemMode::from_raw(raw).ok_or_else(|| errno(libc::EPROTO))
    }

    /// The underlying device file, for raw ioctls.
    pub fn device(&self) -> &Device {
        &self.inner.dev
    }

    /// `ibv_query_device`: identity and capabilities (as read at open).
    pub fn query_device(&self) -> QueryDevice {
        self.inner.device
    }

    /// `ibv_query_device_ex`: identity, limits and ODP capabilities.
    pub fn query_device_ex(&self) -> io::Result<DeviceAttr> {
        Ok(DeviceAttr {
            device: self.inner.dev.query()?,
            verbs: self.inner.dev.query_verbs()?,
        })
    }

    /// `ibv_query_port`. The device has one port, 1 (`EINVAL` for another).
    pub fn query_port(&self, port: u8) -> io::Result<QueryPort> {
        if port != 1 {
            return Err(errno(libc::EINVAL));
        }
        self.inner.dev.query_port()
    }

    /// `ibv_query_gid`: GID `index` of port 1, below its `gid_tbl_len` (`EINVAL` otherwise).
    /// Index 0 is the link-local GID; index 1, on a device with the port registers, the
    /// IPv4-mapped address of the port (zero while it has none).
    pub fn query_gid(&self, port: u8, index: u32) -> io::Result<[u8; 16]> {
        let p = self.query_port(port)?;
        if index >= p.gid_tbl_len {
            return Err(errno(libc::EINVAL));
        }
        p.gids
            .get(index as usize)
            .copied()
            .ok_or_else(|| errno(libc::EINVAL))
    }

    /// The attributes of port 1 beyond `ibv_query_port`'s: link layer, MAC and IPv4
    /// addresses, GIDs and counters ([`PortAttr`]).
    pub fn port_attr(&self) -> io::Result<PortAttr> {
        Ok(PortAttr(self.inner.dev.query_port()?))
    }

    /// Sets (or, with `None`, clears) the port's IPv4 address, which becomes GID 1. Needs
    /// `CAP_NET_ADMIN` (`EPERM`); `EINVAL` for an address no host can have, `EOPNOTSUPP` on a
    /// device without the port registers.
    pub fn set_port_ipv4(&self, addr: Option<std::net::Ipv4Addr>) -> io::Result<()> {
        self.inner.dev.set_port_ipv4(addr)
    }

    /// `ibv_alloc_pd`.
    pub fn alloc_pd(&self) -> io::Result<Pd> {
        let handle = self.inner.dev.alloc_pd()?;
        Ok(Pd {
            inner: Arc::new(PdInner {
                ctx: self.inner.clone(),
                handle,
                freed: AtomicBool::new(false),
            }),
        })
    }

    /// `ibv_create_comp_channel`: a file of its own that gets the completion events of the CQs
    /// created with it, and only those.
    pub fn create_comp_channel(&self) -> io::Result<CompChannel> {
        Ok(EventChannel {
            file: self.inner.dev.create_comp_channel()?,
            _ctx: self.inner.clone(),
        })
    }

    /// The context's asynchronous events (`ibv_get_async_event`): QP fatal errors, CQ errors,
    /// SRQ limits and last-WQE events of its objects. One per context: `EBUSY` for a second.
    pub fn async_events(&self) -> io::Result<AsyncEvents> {
        Ok(EventChannel {
            file: self.inner.dev.get_async_fd()?,
            _ctx: self.inner.clone(),
        })
    }

    /// `ibv_create_cq`: a CQ of at least `cqe` entries. `cq_context` comes back with each of
    /// its completion events, which go to `channel` (with `None`, an armed CQ raises none).
    pub fn create_cq(
        &self,
        cqe: u32,
        channel: Option<&CompChannel>,
        cq_context: u64,
    ) -> io::Result<Cq> {
        Cq::create(&self.inner, cqe, channel.map(|c| c.fd()), cq_context, false)
    }

    /// [`Context::create_cq`] whose completions carry the device clock when they were
    /// written ([`Wc::completion_ts`]; `ibv_create_cq_ex` with
    /// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`). `EOPNOTSUPP` without
    /// `PFNIC_CAP_TIMESTAMPS`.
    pub fn create_cq_timestamped(
        &self,
        cqe: u32,
        channel: Option<&CompChannel>,
        cq_context: u64,
    ) -> io::Result<Cq> {
        Cq::create(&self.inner, cqe, channel.map(|c| c.fd()), cq_context, true)
    }

    /// `ibv_alloc_dm`: `length` bytes of device memory (whole pages), aligned to
    /// `2^log_align_req` bytes. `EOPNOTSUPP` without `PFNIC_CAP_DM`, `EDQUOT` beyond the
    /// context's share (`max_dm_size`), `ENOMEM` when the device has no such run left.
    pub fn alloc_dm(&self, length: u64, log_align_req: u32) -> io::Result<Dm> {
        Dm::alloc(&self.inner, length, log_align_req)
    }

    /// The device clock, in nanoseconds (`ibv_query_rt_values_ex`'s raw clock), read from the
    /// doorbell page without a system call; `EOPNOTSUPP` without `PFNIC_CAP_TIMESTAMPS`.
    pub fn read_clock(&self) -> io::Result<u64> {
        if self.inner.device.caps & uapi::PFNIC_CAP_TIMESTAMPS == 0 {
            return Err(errno(libc::EOPNOTSUPP));
        }
        Ok(self.inner.read_clock())
    }
}

/// A file of events of a context, read one at a time.
pub struct EventChannel<E> {
    file: pfnic_sys::EventFile<E>,
    _ctx: Arc<Ctx>,
}

/// `ibv_comp_channel`: the completion events of the CQs created with it.
pub type CompChannel = EventChannel<CqEvent>;

/// A context's asynchronous events (`ibv_context.async_fd`).
pub type AsyncEvents = EventChannel<AsyncEvent>;

impl<E: pfnic_sys::Event> EventChannel<E> {
    /// The file descriptor to `poll()` (`POLLIN` when an event is queued).
    pub fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.file.as_raw_fd()
    }

    /// `ibv_get_cq_event` (`ibv_get_async_event`): blocks until an event arrives (unless the
    /// file is non-blocking: then `EAGAIN`).
    pub fn get_event(&self) -> io::Result<E> {
        self.file.read_event()?.ok_or_else(|| errno(libc::EAGAIN))
    }

    /// Waits up to `timeout_ms` for an event: `Ok(None)` if none came.
    pub fn get_event_timeout(&self, timeout_ms: i32) -> io::Result<Option<E>> {
        if !self.file.poll_event(timeout_ms)? {
            return Ok(None);
        }
        // Non-blocking for this read only: the caller's own setting comes back afterwards.
        let was = self.file.set_nonblocking(true)?;
        let ev = self.file.read_event();
        if !was {
            self.file.set_nonblocking(false)?;
        }
        ev
    }

    /// Makes [`EventChannel::get_event`] return `EAGAIN` instead of blocking.
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        self.file.set_nonblocking(on)?;
        Ok(())
    }
}

pub(crate) struct PdInner {
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) handle: u32,
    freed: AtomicBool,
}

impl Drop for PdInner {
    fn drop(&mut self) {
        if !self.freed.load(Ordering::Relaxed) {
            // Nothing of ours uses the PD any more (MRs and QPs hold this `Arc`); a failure
            // cannot be reported from drop and the file's release frees the PD anyway.
            let _ = self.ctx.dev.dealloc_pd(self.handle);
        }
    }
}

/// A protection domain: `ibv_pd`.
pub struct Pd {
    pub(crate) inner: Arc<PdInner>,
}

impl Pd {
    /// The PD's handle in the file.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// The context this PD belongs to.
    pub fn context(&self) -> Context {
        Context {
            inner: self.inner.ctx.clone(),
        }
    }

    /// `ibv_dealloc_pd`: `EBUSY` (and the PD back) while MRs or QPs use it.
    pub fn dealloc(self) -> Result<(), (Pd, io::Error)> {
        match self.inner.ctx.dev.dealloc_pd(self.inner.handle) {
            Ok(()) => {
                self.inner.freed.store(true, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err((self, e)),
        }
    }

    /// `ibv_reg_mr` over all of `buf`, which the MR keeps alive.
    pub fn reg_mr(&self, buf: &Arc<Buffer>, access: u32) -> io::Result<Mr> {
        self.reg_mr_range(buf, 0, buf.len(), access)
    }

    /// `ibv_reg_mr` over `buf[offset..offset + len]`, which the MR keeps alive.
    pub fn reg_mr_range(
        &self,
        buf: &Arc<Buffer>,
        offset: usize,
        len: usize,
        access: u32,
    ) -> io::Result<Mr> {
        if offset.checked_add(len).is_none_or(|end| end > buf.len()) {
            return Err(errno(libc::EINVAL));
        }
        // SAFETY: the range is inside `buf`, which the MR keeps mapped; `Buffer` is only
        // accessed through atomic copies, so device writes race with no Rust reference.
        let mut mr = unsafe { self.reg_mr_raw(buf.addr() + offset as u64, len as u64, access) }?;
        mr.buf = Some(buf.clone());
        Ok(mr)
    }

    /// `ibv_reg_mr` over `[addr, addr + len)` of this process.
    ///
    /// # Safety
    ///
    /// For as long as the MR exists, the device may read and (with write access) write the
    /// range on behalf of local work requests and remote peers. The caller must make sure no
    /// Rust reference to that memory is invalidated by it (the memory should be owned by
    /// something that only accesses it through raw pointers or atomics).
    pub unsafe fn reg_mr_raw(&self, addr: u64, len: u64, access: u32) -> io::Result<Mr> {
        let mut arg = uapi::RegMr {
            pd: self.inner.handle,
            access,
            addr,
            length: len,
            ..Default::default()
        };
        self.inner.ctx.dev.reg_mr(&mut arg)?;
        Ok(Mr {
            pd: self.inner.clone(),
            handle: arg.mr,
            lkey: arg.lkey,
            rkey: arg.rkey,
            addr,
            len,
            access,
            buf: None,
            _dm: None,
            live: true,
        })
    }

    /// `ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND | access)`: the implicit MR, the
    /// whole address space.
    ///
    /// # Safety
    ///
    /// As [`Pd::reg_mr_raw`], for every byte of the process.
    pub unsafe fn reg_implicit_mr(&self, access: u32) -> io::Result<Mr> {
        // SAFETY: forwarded to the caller.
        unsafe { self.reg_mr_raw(0, u64::MAX, access | ACCESS_ON_DEMAND) }
    }

    /// `ibv_advise_mr`: prefetch (`ADVISE_PREFETCH*`) the ranges of `sges` (1..=8 entries, each
    /// inside an on-demand MR of this context), synchronously with [`ADVISE_FLAG_FLUSH`].
    pub fn advise_mr(&self, advice: u32, flags: u32, sges: &[Sge]) -> io::Result<()> {
        if sges.is_empty() || sges.len() > uapi::PFNIC_ADVISE_MAX_SGE {
            return Err(errno(libc::EINVAL));
        }
        let mut arg = uapi::AdviseMr {
            advice,
            flags,
            num_sge: sges.len() as u32,
            ..Default::default()
        };
        arg.sge[..sges.len()].copy_from_slice(sges);
        self.inner.ctx.dev.advise_mr(&arg)
    }

    /// `ibv_create_qp`: an RC QP of this PD, in RESET.
    pub fn create_qp(&self, attr: &QpInitAttr<'_>) -> io::Result<Qp> {
        Qp::create(self, attr)
    }

    /// `ibv_create_srq`: a shared receive queue of this PD (`EOPNOTSUPP` on a device without
    /// SRQs, `EINVAL` for a size or limit out of range).
    pub fn create_srq(&self, attr: &SrqInitAttr) -> io::Result<Srq> {
        Srq::create(self, attr)
    }
}

/// A memory region: `ibv_mr`. Deregistered on drop.
pub struct Mr {
    pd: Arc<PdInner>,
    handle: u32,
    lkey: u32,
    rkey: u32,
    addr: u64,
    len: u64,
    access: u32,
    buf: Option<Arc<Buffer>>,
    /// The device memory the MR is over, kept allocated while it lives.
    _dm: Option<Arc<dm::DmInner>>,
    live: bool,
}

impl Mr {
    /// The MR's handle in the file.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    pub fn lkey(&self) -> u32 {
        self.lkey
    }

    pub fn rkey(&self) -> u32 {
        self.rkey
    }

    /// Start address (0 for the implicit MR).
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Length in bytes (`u64::MAX` for the implicit MR).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the MR is empty (never: registration refuses a zero length).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The access flags it was registered with.
    pub fn access(&self) -> u32 {
        self.access
    }

    /// The buffer a safe registration borrowed.
    pub fn buffer(&self) -> Option<&Arc<Buffer>> {
        self.buf.as_ref()
    }

    /// An SGE for `[addr() + offset, addr() + offset + len)` with this MR's lkey.
    pub fn sge(&self, offset: u64, len: u32) -> Sge {
        Sge {
            addr: self.addr.wrapping_add(offset),
            length: len,
            lkey: self.lkey,
        }
    }

    /// The MR's page fault, invalidation and prefetch counters (`PFNIC_IOCTL_QUERY_MR`).
    pub fn stats(&self) -> io::Result<MrStats> {
        self.pd.ctx.dev.query_mr(self.handle)
    }

    /// `ibv_dereg_mr`, reporting the error (and giving the MR back) if it fails.
    pub fn dereg(mut self) -> Result<(), (Mr, io::Error)> {
        match self.pd.ctx.dev.dereg_mr(self.handle) {
            Ok(()) => {
                self.live = false;
                Ok(())
            }
            Err(e) => Err((self, e)),
        }
    }
}

impl Mr {
    /// The MR [`Pd::reg_dm_mr`] registered.
    pub(crate) fn from_dm(pd: &Pd, arg: &uapi::RegDmMr, dm: Arc<dm::DmInner>) -> Self {
        Self {
            pd: pd.inner.clone(),
            handle: arg.mr,
            lkey: arg.lkey,
            rkey: arg.rkey,
            // Zero-based.
            addr: 0,
            len: arg.length,
            access: arg.access,
            buf: None,
            _dm: Some(dm),
            live: true,
        }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        if self.live {
            // The file's release deregisters it anyway if this fails.
            let _ = self.pd.ctx.dev.dereg_mr(self.handle);
        }
    }
}
