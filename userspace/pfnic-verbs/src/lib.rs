//! pfnic's verbs data path, shaped after libibverbs: the provider (`libpfnic-rdmav34.so`, in
//! `userspace/pfnic-provider`) posts work requests and polls completions in user space, on
//! the objects the RDMA core created for a user context ([`Context::from_core`],
//! [`Cq::from_core`], [`Qp::from_core`], [`Srq::from_core`], [`DmMap::from_core`]).
//!
//! The data path never enters the kernel: [`Qp::post_send`] and [`Qp::post_recv`] write
//! 128-byte WQEs into the queues mapped from the driver and ring the context's doorbell page
//! (BAR2); [`Cq::poll`] reads CQEs from the mapped ring by their owner bit and publishes the
//! consumer index in the CQ record; [`Cq::req_notify`] arms the CQ through the doorbell page.
//! Formats: docs/verbs.md.
//!
//! The value types (work requests, completions, attributes, [`Buffer`]) are libibverbs' own,
//! and the `ibv` crate, safe Rust over libibverbs, shares them. Errors are `std::io::Error`s
//! carrying the errno libibverbs would return.

use std::io;

use std::sync::atomic::Ordering;
use std::sync::Arc;

pub use pfnic_sys;
use pfnic_sys::uapi;
use pfnic_sys::{Device, Mapping};
pub use pfnic_sys::{QueryDevice, QueryPort, QueryVerbs};

mod buffer;
mod cq;
mod dm;
mod qp;
mod queue;
mod srq;
mod types;

pub use buffer::Buffer;
pub use cq::Cq;
pub use dm::DmMap;
pub use qp::{set_global_route, ConnectAttr, GlobalRoute, Qp, QpInitAttr};
pub use srq::{Srq, SrqInitAttr};
pub use types::*;

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

/// `enum ibv_event_type` values.
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

/// A user context of the RDMA core on a pfnic (`ibv_context`), as the provider sees it: its
/// doorbell page, mapped from the uverbs file.
///
/// Cloning gives another handle on the same context.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<Ctx>,
}

impl Context {
    /// A context over a user context of Linux's RDMA core (`/dev/infiniband/uverbsN`), which
    /// libibverbs opened and pfnic's rdma-core provider drives: `fd` is a duplicate of its
    /// command file, whose first page is the context's doorbell page; `caps` the driver's
    /// `PFNIC_CAP_*`. The core creates the objects ([`Cq::from_core`], [`Qp::from_core`]);
    /// this context only posts to and polls them.
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

    /// The device clock, in nanoseconds (`ibv_query_rt_values_ex`'s raw clock), read from the
    /// doorbell page without a system call; `EOPNOTSUPP` without `PFNIC_CAP_TIMESTAMPS`.
    pub fn read_clock(&self) -> io::Result<u64> {
        if self.inner.device.caps & uapi::PFNIC_CAP_TIMESTAMPS == 0 {
            return Err(errno(libc::EOPNOTSUPP));
        }
        Ok(self.inner.read_clock())
    }
}
