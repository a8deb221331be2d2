//! libibverbs for pfnic: the C functions of `userspace/include/infiniband/verbs.h`.
//!
//! Built as `libibverbs.a`, so that a program written against libibverbs links with
//! `-libverbs`. Every function is a thin adapter from the C structures to the safe Rust API of
//! `pfnic-verbs`: each C object (`ibv_context`, `ibv_pd`, ...) is the first field of a boxed
//! wrapper that owns the Rust object, so the pointer handed to C is also the wrapper's.
//!
//! Return conventions are libibverbs': constructors return NULL and set `errno`; most other
//! verbs return 0 or an errno value; `ibv_close_device`, `ibv_query_gid` and
//! `ibv_get_cq_event` return -1 and set `errno`. Unsupported operations fail with
//! `EOPNOTSUPP`.
//!
//! The caller's side of the contract is libibverbs' too: pointers are valid objects of this
//! library (or NULL where allowed), an object is not used after it was destroyed, and a memory
//! region's range stays the caller's to lend to the device. Each `# Safety` section says so.

// Without `cabi` (pfnic's rdma-core provider), most of the library is unused.
#![cfg_attr(not(feature = "cabi"), allow(dead_code, unused_imports))]

mod async_event;
pub mod cq;
pub mod device;
mod dm;
pub mod ffi;
mod helpers;
pub mod inline;
mod kern_abi;
mod mr;
pub mod qp;
pub mod qp_ex;
mod srq;
mod unsupported;

use core::ffi::c_int;
use std::io;
use std::sync::{Mutex, MutexGuard};

use pfnic_verbs::Sge;

use crate::ffi::ibv_sge;

/// Sets the calling thread's `errno`.
pub(crate) fn set_errno(e: i32) {
    // SAFETY: `__errno_location` returns the calling thread's `errno`, always valid to write.
    unsafe { *libc::__errno_location() = e };
}

/// The errno an `io::Error` carries (`EIO` for one that carries none).
pub(crate) fn errno_of(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// Locks `m`, ignoring poisoning: a panic aborts this library, so a poisoned lock is never
/// seen, and the data behind every lock here stays consistent between statements anyway.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The scatter/gather list of a work request (or of `ibv_advise_mr`), as the uAPI's `Sge`s.
///
/// # Safety
///
/// `sg_list` holds `num_sge` readable entries (or `num_sge` is 0), which outlive the use of
/// the returned slice.
pub unsafe fn sges<'a>(sg_list: *const ibv_sge, num_sge: c_int) -> Result<&'a [Sge], c_int> {
    let n = usize::try_from(num_sge).map_err(|_| libc::EINVAL)?;
    if n == 0 {
        return Ok(&[]);
    }
    if sg_list.is_null() {
        return Err(libc::EINVAL);
    }
    const _: () = assert!(
        core::mem::size_of::<ibv_sge>() == core::mem::size_of::<Sge>()
            && core::mem::align_of::<ibv_sge>() == core::mem::align_of::<Sge>()
    );
    // SAFETY: `ibv_sge` and the uAPI's `Sge` are both `#[repr(C)]` `{ u64 addr; u32 length;
    // u32 lkey; }` (size and alignment checked above); the caller passes `n` readable entries.
    Ok(unsafe { core::slice::from_raw_parts(sg_list.cast::<Sge>(), n) })
}

/// Moves `v` to the heap and returns the pointer C gets; [`unbox`] takes it back.
pub(crate) fn into_c<T>(v: T) -> *mut T {
    Box::into_raw(Box::new(v))
}

/// Frees a wrapper made by [`into_c`].
///
/// # Safety
///
/// `p` came from [`into_c`] for the same `T` and is not used afterwards.
pub(crate) unsafe fn unbox<T>(p: *mut T) {
    // SAFETY: forwarded to the caller.
    drop(unsafe { Box::from_raw(p) });
}
