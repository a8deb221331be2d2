//! Protection domains and memory regions.

use core::ffi::{c_int, c_uint, c_void};

use pfnic_verbs::pfnic_sys::uapi::PFNIC_ADVISE_MAX_SGE;
use pfnic_verbs::{Mr, Pd};

use crate::device::ctx_wrap;
use crate::ffi::*;
use crate::{errno_of, into_c, set_errno, sges, unbox};

/// `IBV_ACCESS_OPTIONAL_RANGE`: access bits a device may ignore (as libibverbs masks them
/// for a kernel that does not know them).
const ACCESS_OPTIONAL_RANGE: c_int = 0x3ff0_0000;

/// `struct ibv_pd` and the PD behind it.
#[repr(C)]
pub(crate) struct PdWrap {
    pub(crate) ibv: ibv_pd,
    /// `None` only while `ibv_dealloc_pd` hands it to the driver.
    pub(crate) pd: Option<Pd>,
}

/// The PD wrapper of `pd`.
///
/// # Safety
///
/// `pd` is NULL or a PD this library allocated and not yet freed.
pub(crate) unsafe fn pd_wrap<'a>(pd: *mut ibv_pd) -> Option<&'a PdWrap> {
    // SAFETY: `ibv` is the first field of the `#[repr(C)]` `PdWrap` that `ibv_alloc_pd` boxed;
    // the caller guarantees it is alive.
    unsafe { pd.cast::<PdWrap>().as_ref() }
}

/// `struct ibv_mr` and the MR behind it.
#[repr(C)]
pub(crate) struct MrWrap {
    pub(crate) ibv: ibv_mr,
    pub(crate) mr: Option<Mr>,
}

/// `ibv_alloc_pd`.
///
/// # Safety
///
/// `context` is NULL or a live context of this library.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    // SAFETY: the caller passes a live context or NULL.
    let Some(w) = (unsafe { ctx_wrap(context) }) else {
        set_errno(libc::EINVAL);
        return core::ptr::null_mut();
    };
    match w.shared.ctx.alloc_pd() {
        Ok(pd) => into_c(PdWrap {
            ibv: ibv_pd {
                context,
                handle: pd.handle(),
            },
            pd: Some(pd),
        })
        .cast(),
        Err(e) => {
            set_errno(errno_of(&e));
            core::ptr::null_mut()
        }
    }
}

/// `ibv_dealloc_pd`: 0 or an errno value (`EBUSY` while MRs or QPs use the PD; it stays
/// allocated).
///
/// # Safety
///
/// `pd` is NULL or a live PD of this library; on success it is not used afterwards.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    // SAFETY: the caller passes a live PD or NULL, which nothing else uses while it is
    // deallocated (as with libibverbs); `ibv` is the first field of the boxed `PdWrap`.
    let Some(w) = (unsafe { pd.cast::<PdWrap>().as_mut() }) else {
        return libc::EINVAL;
    };
    let Some(inner) = w.pd.take() else {
        return libc::EINVAL;
    };
    match inner.dealloc() {
        Ok(()) => {
            // SAFETY: `pd` is the boxed `PdWrap`, which the caller no longer uses.
            unsafe { unbox(pd.cast::<PdWrap>()) };
            0
        }
        Err((inner, e)) => {
            w.pd = Some(inner);
            errno_of(&e)
        }
    }
}

/// `ibv_reg_mr`: registers `[addr, addr + length)`; nothing is pinned. With
/// `IBV_ACCESS_ON_DEMAND`, `addr` NULL and `length` `SIZE_MAX` register the whole address
/// space (the implicit MR). NULL with `errno` on failure.
///
/// # Safety
///
/// `pd` is NULL or a live PD of this library. The range is the caller's: for the MR's
/// lifetime the device may read it, and (with write access) local work requests and remote
/// peers may write it, as with libibverbs.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: the caller passes a live PD or NULL.
    let Some(Some(p)) = (unsafe { pd_wrap(pd) }).map(|w| w.pd.as_ref()) else {
        set_errno(libc::EINVAL);
        return core::ptr::null_mut();
    };
    let access = (access & !ACCESS_OPTIONAL_RANGE) as u32;
    // SAFETY: the caller lends the range to the device for the MR's lifetime (see above).
    match unsafe { p.reg_mr_raw(addr as u64, length as u64, access) } {
        Ok(mr) => {
            // SAFETY: the caller passes a live PD.
            let context = unsafe { (*pd).context };
            into_c(MrWrap {
                ibv: ibv_mr {
                    context,
                    pd,
                    addr,
                    length,
                    handle: mr.handle(),
                    lkey: mr.lkey(),
                    rkey: mr.rkey(),
                },
                mr: Some(mr),
            })
            .cast()
        }
        Err(e) => {
            set_errno(errno_of(&e));
            core::ptr::null_mut()
        }
    }
}

/// `ibv_reg_mr_iova2`: `ibv_reg_mr` with the address the MR has for the device. pfnic's MRs
/// are addressed by their virtual addresses, so `iova` must be `addr` (`EOPNOTSUPP`
/// otherwise). rdma-core's header calls it for `ibv_reg_mr` with flags not known at compile
/// time.
///
/// # Safety
///
/// As [`ibv_reg_mr`].
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    if iova != addr as u64 {
        set_errno(libc::EOPNOTSUPP);
        return core::ptr::null_mut();
    }
    // SAFETY: forwarded to the caller; the flags are a C `int` bit for bit.
    unsafe { ibv_reg_mr(pd, addr, length, access as c_int) }
}

/// `ibv_reg_mr_iova`: as [`ibv_reg_mr_iova2`].
///
/// # Safety
///
/// As [`ibv_reg_mr`].
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: forwarded to the caller.
    unsafe { ibv_reg_mr_iova2(pd, addr, length, iova, access as c_uint) }
}

/// `ibv_dereg_mr`: 0 or an errno value (the MR stays registered on failure).
///
/// # Safety
///
/// `mr` is NULL or a live MR of this library; on success it is not used afterwards.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    // SAFETY: `ibv` is the first field of the boxed `MrWrap`; the caller passes a live MR (or
    // NULL), which nothing else uses while it is deregistered.
    let Some(w) = (unsafe { mr.cast::<MrWrap>().as_mut() }) else {
        return libc::EINVAL;
    };
    let Some(inner) = w.mr.take() else {
        return libc::EINVAL;
    };
    match inner.dereg() {
        Ok(()) => {
            // SAFETY: `mr` is the boxed `MrWrap`, which the caller no longer uses.
            unsafe { unbox(mr.cast::<MrWrap>()) };
            0
        }
        Err((inner, e)) => {
            w.mr = Some(inner);
            errno_of(&e)
        }
    }
}

/// `verbs_context.advise_mr` (what `ibv_advise_mr` calls): prefetch ranges of on-demand MRs of `pd`'s context (`PREFETCH`,
/// `PREFETCH_WRITE`, `PREFETCH_NO_FAULT`; synchronous with `IBV_ADVISE_MR_FLAG_FLUSH`). 0 or
/// an errno value.
///
/// # Safety
///
/// `pd` is NULL or a live PD of this library; `sg_list` holds `num_sge` readable entries.
pub(crate) unsafe extern "C" fn advise_mr(
    pd: *mut ibv_pd,
    advice: c_int,
    flags: u32,
    sg_list: *mut ibv_sge,
    num_sge: u32,
) -> c_int {
    // SAFETY: the caller passes a live PD or NULL.
    let Some(Some(p)) = (unsafe { pd_wrap(pd) }).map(|w| w.pd.as_ref()) else {
        return libc::EINVAL;
    };
    let Ok(advice) = u32::try_from(advice) else {
        return libc::EINVAL;
    };
    let Ok(num_sge) = c_int::try_from(num_sge) else {
        return libc::EINVAL;
    };
    // SAFETY: the caller passes `num_sge` readable entries.
    let sges = match unsafe { sges(sg_list, num_sge) } {
        Ok(s) if !s.is_empty() => s,
        _ => return libc::EINVAL,
    };
    // The driver takes a bounded number of entries per call; longer lists go in several.
    for chunk in sges.chunks(PFNIC_ADVISE_MAX_SGE) {
        if let Err(e) = p.advise_mr(advice, flags, chunk) {
            return errno_of(&e);
        }
    }
    0
}
