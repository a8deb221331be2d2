//! Device memory: `ibv_alloc_dm`, `ibv_free_dm`, `ibv_reg_dm_mr` (through the
//! `verbs_context`, as rdma-core's header calls them), and `ibv_memcpy_to_dm` /
//! `ibv_memcpy_from_dm` (through the `ibv_dm`).

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_uint, c_void};

use pfnic_verbs::Dm;

use crate::device::ctx_wrap;
use crate::ffi::*;
use crate::mr::{pd_wrap, MrWrap};
use crate::{errno_of, into_c, set_errno, unbox};

/// `IBV_ACCESS_ZERO_BASED`: an MR over device memory is addressed from 0 (required).
const ACCESS_ZERO_BASED: c_uint = 1 << 5;

/// `struct ibv_dm` and the allocation behind it.
#[repr(C)]
struct DmWrap {
    /// C reads it; set before the allocation is handed out.
    ibv: ibv_dm,
    /// `None` only while `ibv_free_dm` hands it to the driver, when the caller does not use
    /// it otherwise.
    dm: UnsafeCell<Option<Dm>>,
}

/// The allocation behind `dm`.
///
/// # Safety
///
/// `dm` is NULL or an allocation of this library not yet freed, not being freed.
unsafe fn dm_of<'a>(dm: *mut ibv_dm) -> Option<&'a Dm> {
    // SAFETY: `ibv` is the first field of the `#[repr(C)]` `DmWrap` that `alloc_dm` boxed;
    // the caller guarantees it is alive and not being freed, so the cell is not written.
    unsafe {
        dm.cast::<DmWrap>()
            .as_ref()
            .and_then(|w| (*w.dm.get()).as_ref())
    }
}

/// `verbs_context.alloc_dm` (what `ibv_alloc_dm` calls): `attr->length` bytes of device
/// memory. NULL with `errno`: `EINVAL` for NULL, a length of 0 or beyond `max_dm_size`, or
/// `comp_mask` bits; `EOPNOTSUPP` on a device without device memory; `ENOMEM` when the device
/// has no such run left.
///
/// # Safety
///
/// `context` is NULL or a live context of this library; `attr` is NULL or readable.
pub(crate) unsafe extern "C" fn alloc_dm(
    context: *mut ibv_context,
    attr: *mut ibv_alloc_dm_attr,
) -> *mut ibv_dm {
    // SAFETY: the caller passes NULL or a live context, and NULL or a readable `attr`.
    let (Some(w), Some(a)) = (unsafe { ctx_wrap(context) }, unsafe { attr.as_ref() }) else {
        set_errno(libc::EINVAL);
        return core::ptr::null_mut();
    };
    if a.comp_mask != 0 {
        set_errno(libc::EINVAL);
        return core::ptr::null_mut();
    }
    match w.shared.ctx.alloc_dm(a.length as u64, a.log_align_req) {
        Ok(dm) => into_c(DmWrap {
            ibv: ibv_dm {
                context,
                memcpy_to_dm: Some(memcpy_to_dm),
                memcpy_from_dm: Some(memcpy_from_dm),
                comp_mask: 0,
                handle: 0,
            },
            dm: UnsafeCell::new(Some(dm)),
        })
        .cast(),
        Err(e) => {
            set_errno(errno_of(&e));
            core::ptr::null_mut()
        }
    }
}

/// `verbs_context.free_dm` (what `ibv_free_dm` calls): 0, or an errno value (`EBUSY` while an
/// MR uses it; it stays).
///
/// # Safety
///
/// `dm` is NULL or a live allocation of this library; on success it is not used afterwards.
pub(crate) unsafe extern "C" fn free_dm(dm: *mut ibv_dm) -> c_int {
    // SAFETY: `ibv` is the first field of the boxed `DmWrap`; the caller passes a live
    // allocation (or NULL), which nothing else uses while it is freed.
    let Some(w) = (unsafe { dm.cast::<DmWrap>().as_mut() }) else {
        return libc::EINVAL;
    };
    let Some(inner) = w.dm.get_mut().take() else {
        return libc::EINVAL;
    };
    match inner.free() {
        Ok(()) => {
            // SAFETY: the boxed `DmWrap`, which the caller no longer uses.
            unsafe { unbox(dm.cast::<DmWrap>()) };
            0
        }
        Err((inner, e)) => {
            *w.dm.get_mut() = Some(inner);
            errno_of(&e)
        }
    }
}

/// Runs `copy` on the allocation behind `dm`: 0, or the errno value it failed with
/// (`EINVAL` for a range outside the allocation).
///
/// # Safety
///
/// `dm` is a live allocation of this library.
unsafe fn dm_copy(dm: *mut ibv_dm, copy: impl FnOnce(&Dm) -> std::io::Result<()>) -> c_int {
    // SAFETY: the caller passes a live allocation.
    let Some(d) = (unsafe { dm_of(dm) }) else {
        return libc::EINVAL;
    };
    match copy(d) {
        Ok(()) => 0,
        Err(e) => errno_of(&e),
    }
}

/// `ibv_dm.memcpy_to_dm` (what `ibv_memcpy_to_dm` calls): 0, or `EINVAL` for a range outside
/// the allocation.
///
/// # Safety
///
/// `dm` is a live allocation of this library; `host_addr` is readable for `length` bytes.
unsafe extern "C" fn memcpy_to_dm(
    dm: *mut ibv_dm,
    dm_offset: u64,
    host_addr: *const c_void,
    length: usize,
) -> c_int {
    // SAFETY: forwarded to the caller.
    unsafe {
        dm_copy(dm, |d| {
            if length == 0 {
                return Ok(());
            }
            // SAFETY: the caller passes `length` readable bytes.
            let data = core::slice::from_raw_parts(host_addr.cast::<u8>(), length);
            d.copy_to(dm_offset, data)
        })
    }
}

/// `ibv_dm.memcpy_from_dm` (what `ibv_memcpy_from_dm` calls): 0, or `EINVAL` for a range
/// outside the allocation.
///
/// # Safety
///
/// `dm` is a live allocation of this library; `host_addr` is writable for `length` bytes.
unsafe extern "C" fn memcpy_from_dm(
    host_addr: *mut c_void,
    dm: *mut ibv_dm,
    dm_offset: u64,
    length: usize,
) -> c_int {
    // SAFETY: forwarded to the caller.
    unsafe {
        dm_copy(dm, |d| {
            if length == 0 {
                return Ok(());
            }
            // SAFETY: the caller passes `length` writable bytes.
            let out = core::slice::from_raw_parts_mut(host_addr.cast::<u8>(), length);
            d.copy_from(dm_offset, out)
        })
    }
}

/// `verbs_context.reg_dm_mr` (what `ibv_reg_dm_mr` calls): an MR over
/// `[dm_offset, dm_offset + length)` of `dm`, zero-based: `access` must have
/// `IBV_ACCESS_ZERO_BASED` (`EINVAL` otherwise, as rdma-core's providers require) and no
/// `IBV_ACCESS_ON_DEMAND`. NULL with `errno` on failure.
///
/// # Safety
///
/// `pd` is NULL or a live PD of this library; `dm` NULL or a live allocation of the same
/// context.
pub(crate) unsafe extern "C" fn reg_dm_mr(
    pd: *mut ibv_pd,
    dm: *mut ibv_dm,
    dm_offset: u64,
    length: usize,
    access: c_uint,
) -> *mut ibv_mr {
    // SAFETY: the caller passes NULL or a live PD, and NULL or a live allocation.
    let (Some(Some(p)), Some(d)) = (unsafe { pd_wrap(pd) }.map(|w| w.pd.as_ref()), unsafe {
        dm_of(dm)
    }) else {
        set_errno(libc::EINVAL);
        return core::ptr::null_mut();
    };
    if access & ACCESS_ZERO_BASED == 0 {
        set_errno(libc::EINVAL);
        return core::ptr::null_mut();
    }
    match p.reg_dm_mr(d, dm_offset, length as u64, access & !ACCESS_ZERO_BASED) {
        Ok(mr) => into_c(MrWrap {
            ibv: ibv_mr {
                // SAFETY: the caller passes a live PD.
                context: unsafe { (*pd).context },
                pd,
                // Zero-based: the MR's addresses start at 0.
                addr: core::ptr::null_mut(),
                length,
                handle: mr.handle(),
                lkey: mr.lkey(),
                rkey: mr.rkey(),
            },
            mr: Some(mr),
        })
        .cast(),
        Err(e) => {
            set_errno(errno_of(&e));
            core::ptr::null_mut()
        }
    }
}
