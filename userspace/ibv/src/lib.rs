//! Safe Rust over rdma-core's `libibverbs.so.1`.
//!
//! The guest suite drives pfnic the way every RDMA program does: through Debian's own,
//! unmodified libibverbs, which loads pfnic's provider (`libpfnic-rdmav34.so`) and reaches the
//! driver through the RDMA core's uverbs file. Nothing here knows pfnic: any RDMA device (rxe,
//! say) works alike.
//!
//! Objects are layered as in libibverbs: a [`Context`] (`ibv_open_device`), [`Pd`]s, [`Mr`]s
//! in a PD, [`Cq`]s (with [`CompChannel`]s for their events), and [`Qp`]s in a PD using two
//! CQs. Every object keeps what it depends on alive, so dropping them in any order is safe:
//! libibverbs sees them destroyed in dependency order. The explicit destroys (`Pd::dealloc`,
//! `Mr::dereg`, `Cq::destroy`, `Qp::destroy`) report libibverbs' errno and give the object
//! back on failure.
//!
//! The work request and completion types are `pfnic-verbs`' (libibverbs' numbers and names),
//! so one test reads the same whichever way it reaches the device.
//!
//! Errors are `std::io::Error`s carrying the errno libibverbs returned.

use std::ffi::CStr;
use std::io;
use std::ptr::NonNull;
use std::sync::Arc;

mod ah;
mod cq;
mod dm;
mod events;
mod mr;
mod qp;
mod srq;
pub mod sys;

pub use ah::{Ah, UdPeer};
pub use cq::{CompChannel, Cq, CqEvent};
pub use dm::Dm;
pub use events::{event_type, AsyncEvent, Element};
pub use mr::{Mr, Pd};
pub use pfnic_verbs::{
    gid_from_ipv4, gid_to_ipv4, Buffer, ConnectAttr, Gid, GlobalRoute, PostError, QpAttr, QpCap,
    QpState, RecvWr, SendWr, Sge, Wc, WcOpcode, WcStatus, WrOpcode, ACCESS_LOCAL_WRITE,
    ACCESS_ON_DEMAND, ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE, SEND_FENCE,
    SEND_SIGNALED, SEND_SOLICITED, WC_WITH_IMM,
};
pub use qp::{Qp, QpInitAttr, QpQuery, QpType};
pub use srq::{Srq, SrqAttr, SrqInitAttr};

/// `ibv_qp_attr_mask` bits ([`Qp::modify`]): the numbers are libibverbs'.
pub use pfnic_verbs::qp_attr;

/// A libibverbs call's `int` result: 0, or an errno (positive, or -1 with `errno` set).
pub(crate) fn check(rc: libc::c_int) -> io::Result<()> {
    match rc {
        0 => Ok(()),
        rc if rc > 0 => Err(io::Error::from_raw_os_error(rc)),
        _ => Err(last_error()),
    }
}

/// An object that other handles may share (`Arc`), destroyed by its drop unless an explicit
/// destroy did it first.
pub(crate) trait Destroyable {
    /// Says the object is destroyed: its drop lets go of what it holds only.
    fn destroyed(&mut self);
}

/// The explicit destroy of the shared object `inner` (`ibv_dealloc_pd`, `ibv_destroy_cq`,
/// ...): `EBUSY`, and the object back (`wrap`), while another handle on it is left; else
/// `destroy`'s result, the object back if it failed.
pub(crate) fn destroy_shared<I: Destroyable, T>(
    inner: Arc<I>,
    wrap: impl Fn(Arc<I>) -> T,
    destroy: impl FnOnce(&I) -> libc::c_int,
) -> Result<(), (T, io::Error)> {
    let mut inner = match Arc::try_unwrap(inner) {
        Ok(inner) => inner,
        Err(inner) => return Err((wrap(inner), io::Error::from_raw_os_error(libc::EBUSY))),
    };
    match check(destroy(&inner)) {
        Ok(()) => {
            inner.destroyed();
            Ok(())
        }
        Err(e) => Err((wrap(Arc::new(inner)), e)),
    }
}

/// `errno` after a libibverbs call that failed; `EIO` if the library set none.
pub(crate) fn last_error() -> io::Error {
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(0) | None => io::Error::from_raw_os_error(libc::EIO),
        _ => e,
    }
}

/// A pointer libibverbs returned, or its errno.
pub(crate) fn non_null<T>(p: *mut T) -> io::Result<NonNull<T>> {
    NonNull::new(p).ok_or_else(last_error)
}

/// Waits until `fd` is readable, for `timeout` at most (`None`: for ever): whether it is.
pub(crate) fn wait_readable(
    fd: std::os::fd::RawFd,
    timeout: Option<std::time::Duration>,
) -> io::Result<bool> {
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `pfd` is one valid pollfd.
    match unsafe { libc::poll(&mut pfd, 1, ms) } {
        0 => Ok(false),
        n if n < 0 => Err(io::Error::last_os_error()),
        _ => Ok(true),
    }
}

/// The RDMA devices libibverbs finds (`ibv_get_device_list`), freed when this drops. Opening
/// a device from a list the caller made first does nothing but `ibv_open_device` (the list
/// reads sysfs; a test that counts the kernel's allocations of an open wants only those).
pub struct DeviceList {
    list: NonNull<*mut sys::ibv_device>,
    len: usize,
}

impl DeviceList {
    /// `ibv_get_device_list`.
    pub fn new() -> io::Result<Self> {
        let mut n = 0;
        // SAFETY: `n` is writable; the list is freed by `drop`.
        let list = non_null(unsafe { sys::ibv_get_device_list(&mut n) })?;
        Ok(Self {
            list,
            len: n.max(0) as usize,
        })
    }

    /// The devices, in libibverbs' order.
    fn devices(&self) -> impl Iterator<Item = *mut sys::ibv_device> + '_ {
        // SAFETY: the list has `len` device pointers, alive as long as the list.
        (0..self.len).map(|i| unsafe { *self.list.as_ptr().add(i) })
    }

    /// The devices' names (`pfnic0`, `rxe0`).
    pub fn names(&self) -> Vec<String> {
        self.devices()
            // SAFETY: a device's name is a C string alive as long as the list.
            .map(|d| unsafe { CStr::from_ptr(sys::ibv_get_device_name(d)) })
            .map(|n| n.to_string_lossy().into_owned())
            .collect()
    }

    /// `ibv_open_device` of the device named `name`: `ENODEV` if the list has none.
    pub fn open(&self, name: &str) -> io::Result<Context> {
        let dev = self
            .devices()
            // SAFETY: as in `names`.
            .find(|&d| {
                unsafe { CStr::from_ptr(sys::ibv_get_device_name(d)) }.to_bytes() == name.as_bytes()
            })
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))?;
        // SAFETY: `dev` is a device of the list, which is alive; an open context does not
        // need the list.
        let ptr = non_null(unsafe { sys::ibv_open_device(dev) })?;
        Ok(Context {
            inner: Arc::new(ContextInner { ptr }),
        })
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: the list came from ibv_get_device_list and is not used after this.
        unsafe { sys::ibv_free_device_list(self.list.as_ptr()) };
    }
}

/// The RDMA devices libibverbs finds, by name.
pub fn device_names() -> io::Result<Vec<String>> {
    Ok(DeviceList::new()?.names())
}

/// An open device context (`ibv_context`), closed when the last handle and every object made
/// in it are gone.
struct ContextInner {
    ptr: NonNull<sys::ibv_context>,
}

// SAFETY: libibverbs' contexts may be used from any thread (its calls lock what they share).
unsafe impl Send for ContextInner {}
// SAFETY: as for `Send`.
unsafe impl Sync for ContextInner {}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // SAFETY: the context is open, and every object of it is gone (they hold `self`).
        unsafe { sys::ibv_close_device(self.ptr.as_ptr()) };
    }
}

/// An open RDMA device: `ibv_context`. Cloning gives another handle on the same context.
#[derive(Clone)]
pub struct Context {
    inner: Arc<ContextInner>,
}

impl Context {
    /// Opens the device named `name` (`pfnic0`, `rxe0`): `ENODEV` if libibverbs has none.
    pub fn open(name: &str) -> io::Result<Self> {
        DeviceList::new()?.open(name)
    }

    /// Opens the device named `name` with the environment variables `env` set, as a program
    /// started with them opens it (providers read their knobs when they open a device: pfnic's
    /// `PFNIC_MEM_MODE`, say), and puts the environment back as it was.
    ///
    /// The environment is the process's: call this where no other thread reads or changes it
    /// at the same time (a tool's start, a test suite's main thread).
    pub fn open_with_env(name: &str, env: &[(&str, &str)]) -> io::Result<Self> {
        let saved: Vec<_> = env.iter().map(|(k, _)| (*k, std::env::var_os(k))).collect();
        for (k, v) in env {
            std::env::set_var(k, v);
        }
        let ctx = Self::open(name);
        for (k, v) in saved {
            match v {
                Some(v) => std::env::set_var(k, v),
                None => std::env::remove_var(k),
            }
        }
        ctx
    }

    /// The `ibv_context` pointer, for calls this crate does not wrap.
    pub fn as_ptr(&self) -> *mut sys::ibv_context {
        self.inner.ptr.as_ptr()
    }

    /// The file libibverbs reaches the device's driver through (the RDMA core's uverbs file),
    /// for what this crate does not wrap: a provider's own mappings, say.
    pub fn cmd_fd(&self) -> std::os::fd::RawFd {
        // SAFETY: the context is open.
        unsafe { (*self.as_ptr()).cmd_fd }
    }

    /// The device's name.
    pub fn name(&self) -> String {
        // SAFETY: an open context's device and its name live as long as the context.
        unsafe { CStr::from_ptr(sys::ibv_get_device_name((*self.as_ptr()).device)) }
            .to_string_lossy()
            .into_owned()
    }

    /// `ibv_query_device`.
    pub fn query_device(&self) -> io::Result<sys::ibv_device_attr> {
        // SAFETY: all-zero bytes are a valid `ibv_device_attr` (integers and arrays).
        let mut attr: sys::ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: the context is open and `attr` writable.
        check(unsafe { sys::ibv_query_device(self.as_ptr(), &mut attr) })?;
        Ok(attr)
    }

    /// `ibv_query_device_ex`: the limits, and the on-demand paging capabilities.
    pub fn query_device_ex(&self) -> io::Result<sys::ibv_device_attr_ex> {
        // SAFETY: all-zero bytes are a valid `ibv_device_attr_ex` (integers and arrays).
        let mut attr: sys::ibv_device_attr_ex = unsafe { std::mem::zeroed() };
        // SAFETY: the context is open, `attr` writable; no input attributes.
        check(unsafe { sys::ibv_query_device_ex(self.as_ptr(), std::ptr::null(), &mut attr) })?;
        Ok(attr)
    }

    /// `ibv_query_port`.
    pub fn query_port(&self, port: u8) -> io::Result<sys::ibv_port_attr> {
        // SAFETY: all-zero bytes are a valid `ibv_port_attr` (integers).
        let mut attr: sys::ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: the context is open and `attr` a whole `ibv_port_attr`, as the macro
        // `ibv_query_port()` passes it.
        check(unsafe { sys::___ibv_query_port(self.as_ptr(), port, &mut attr) })?;
        Ok(attr)
    }

    /// `ibv_query_gid`.
    pub fn query_gid(&self, port: u8, index: u32) -> io::Result<Gid> {
        // SAFETY: all-zero bytes are a valid `ibv_gid` (a byte array).
        let mut gid: sys::ibv_gid = unsafe { std::mem::zeroed() };
        let index =
            libc::c_int::try_from(index).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: the context is open and `gid` writable.
        check(unsafe { sys::ibv_query_gid(self.as_ptr(), port, index, &mut gid) })?;
        // SAFETY: every bit pattern is a valid byte array.
        Ok(unsafe { gid.raw })
    }

    /// `ibv_alloc_pd`.
    pub fn alloc_pd(&self) -> io::Result<Pd> {
        Pd::alloc(self)
    }

    /// `ibv_create_comp_channel`.
    pub fn create_comp_channel(&self) -> io::Result<CompChannel> {
        CompChannel::create(self)
    }

    /// `ibv_create_cq` of at least `cqe` entries. `cq_context` comes back with each of its
    /// completion events, which go to `channel` (with `None`, an armed CQ raises none).
    pub fn create_cq(
        &self,
        cqe: u32,
        channel: Option<&CompChannel>,
        cq_context: u64,
    ) -> io::Result<Cq> {
        Cq::create(self, cqe, channel, cq_context)
    }

    /// [`Context::create_cq`] whose completions carry the device clock when they were written
    /// ([`Wc::completion_ts`]; `ibv_create_cq_ex` with `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`).
    pub fn create_cq_timestamped(
        &self,
        cqe: u32,
        channel: Option<&CompChannel>,
        cq_context: u64,
    ) -> io::Result<Cq> {
        Cq::create_timestamped(self, cqe, channel, cq_context)
    }

    /// The device clock in nanoseconds (`ibv_query_rt_values_ex`'s raw clock).
    pub fn read_clock(&self) -> io::Result<u64> {
        // SAFETY: all-zero bytes are a valid `ibv_values_ex` (integers).
        let mut v: sys::ibv_values_ex = unsafe { std::mem::zeroed() };
        v.comp_mask = sys::ibv_values_mask_IBV_VALUES_MASK_RAW_CLOCK;
        // SAFETY: the context is open and `v` writable.
        check(unsafe { sys::ibv_query_rt_values_ex(self.as_ptr(), &mut v) })?;
        Ok(v.raw_clock.tv_sec as u64 * 1_000_000_000 + v.raw_clock.tv_nsec as u64)
    }
}
