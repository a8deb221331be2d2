//! Shared receive queues: `ibv_create_srq`, `ibv_modify_srq`, `ibv_query_srq`,
//! `ibv_destroy_srq` and `ops.post_srq_recv` (what `ibv_post_srq_recv` calls).

use core::cell::UnsafeCell;
use core::ffi::c_int;

use pfnic_verbs::{Srq, SrqInitAttr};

use crate::async_event::AsyncAcks;
use crate::ffi::*;
use crate::mr::pd_wrap;
use crate::qp::{post_list, recv_wr_of};
use crate::{errno_of, into_c, set_errno, unbox};

/// `struct ibv_srq` and the SRQ behind it.
#[repr(C)]
pub(crate) struct SrqWrap {
    /// C reads it; set before the SRQ is handed out.
    ibv: UnsafeCell<ibv_srq>,
    /// `None` until `ibv_create_srq` has it, and while `ibv_destroy_srq` hands it to the
    /// driver: only those write it, while the caller does not use the SRQ (but
    /// `ibv_ack_async_event`, which does not read it).
    srq: UnsafeCell<Option<Srq>>,
    /// Its asynchronous events acknowledged.
    async_acks: AsyncAcks,
}

impl SrqWrap {
    /// The SRQ, unless it is being created or destroyed.
    pub(crate) fn srq(&self) -> Option<&Srq> {
        // SAFETY: only creation and `ibv_destroy_srq` write the cell, never while the SRQ is
        // otherwise used (see the field).
        unsafe { (*self.srq.get()).as_ref() }
    }
}

/// The wrapper of `srq`.
///
/// # Safety
///
/// `srq` is NULL or an SRQ this library created and not yet destroyed.
pub(crate) unsafe fn srq_wrap<'a>(srq: *mut ibv_srq) -> Option<&'a SrqWrap> {
    // SAFETY: `ibv` (an `UnsafeCell`, transparent) is the first field of the `#[repr(C)]`
    // `SrqWrap` that `ibv_create_srq` boxed; the caller guarantees it is alive.
    unsafe { srq.cast::<SrqWrap>().as_ref() }
}

/// The acknowledgements of SRQ `srq`'s asynchronous events.
///
/// # Safety
///
/// `srq` is NULL or an SRQ this library created and not yet freed.
pub(crate) unsafe fn srq_acks<'a>(srq: *mut ibv_srq) -> Option<&'a AsyncAcks> {
    // SAFETY: forwarded to the caller.
    unsafe { srq_wrap(srq) }.map(|w| &w.async_acks)
}

/// `ibv_create_srq`: an SRQ of `pd` holding at least `attr.max_wr` receives of `attr.max_sge`
/// SGEs, its limit armed with `attr.srq_limit` (0: not armed); the actual sizes are written
/// back. NULL with `errno`: `EINVAL` for a bad PD or sizes, `EOPNOTSUPP` on a device without
/// SRQs.
///
/// # Safety
///
/// `pd` is NULL or a live PD of this library; `srq_init_attr` is NULL or valid for reads and
/// writes.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_create_srq(
    pd: *mut ibv_pd,
    srq_init_attr: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    // SAFETY: the caller passes NULL or a live PD, and NULL or a valid attribute structure.
    let (Some(Some(p)), Some(init)) = (unsafe { pd_wrap(pd) }.map(|w| w.pd.as_ref()), unsafe {
        srq_init_attr.as_mut()
    }) else {
        set_errno(libc::EINVAL);
        return core::ptr::null_mut();
    };
    // The wrapper first: its address is the SRQ's handle in its asynchronous events.
    let wrap = into_c(SrqWrap {
        // SAFETY: `ibv_srq` is pointers, integers and glibc's mutex and condition variable,
        // whose initializers are all zeroes.
        ibv: UnsafeCell::new(unsafe { core::mem::zeroed() }),
        srq: UnsafeCell::new(None),
        async_acks: AsyncAcks::default(),
    });
    let attr = SrqInitAttr {
        max_wr: init.attr.max_wr,
        max_sge: init.attr.max_sge,
        srq_limit: init.attr.srq_limit,
        srq_context: wrap as usize as u64,
    };
    let srq = match p.create_srq(&attr) {
        Ok(srq) => srq,
        Err(e) => {
            // SAFETY: `wrap` was boxed above and never handed out.
            unsafe { unbox(wrap) };
            set_errno(errno_of(&e));
            return core::ptr::null_mut();
        }
    };
    let (max_wr, max_sge) = srq.cap();
    init.attr.max_wr = max_wr;
    init.attr.max_sge = max_sge;
    // SAFETY: `wrap` was boxed above and is not shared yet.
    let w = unsafe { &mut *wrap };
    *w.ibv.get_mut() = ibv_srq {
        // SAFETY: the caller passes a live PD.
        context: unsafe { (*pd).context },
        srq_context: init.srq_context,
        pd,
        handle: srq.srq_num(),
        mutex: libc::PTHREAD_MUTEX_INITIALIZER,
        cond: libc::PTHREAD_COND_INITIALIZER,
        events_completed: 0,
    };
    *w.srq.get_mut() = Some(srq);
    wrap.cast()
}

/// `ibv_modify_srq`: 0 or an errno value. `IBV_SRQ_LIMIT` arms the limit (0 disarms it;
/// `EINVAL` above the SRQ's size); `IBV_SRQ_MAX_WR` (resizing) is `EOPNOTSUPP`, other bits
/// `EINVAL`.
///
/// # Safety
///
/// `srq` is NULL or a live SRQ of this library; `srq_attr` is NULL or valid for a read.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_modify_srq(
    srq: *mut ibv_srq,
    srq_attr: *mut ibv_srq_attr,
    srq_attr_mask: c_int,
) -> c_int {
    // SAFETY: the caller passes NULL or a live SRQ, and NULL or a readable attribute.
    let (Some(Some(s)), Some(a)) = (unsafe { srq_wrap(srq) }.map(SrqWrap::srq), unsafe {
        srq_attr.as_ref()
    }) else {
        return libc::EINVAL;
    };
    let Ok(mask) = u32::try_from(srq_attr_mask) else {
        return libc::EINVAL;
    };
    match s.modify(mask, a.max_wr, a.srq_limit) {
        Ok(()) => 0,
        Err(e) => errno_of(&e),
    }
}

/// `ibv_query_srq`: 0 or an errno value; the sizes and the armed limit (0 when disarmed or
/// once it fired).
///
/// # Safety
///
/// `srq` is NULL or a live SRQ of this library; `srq_attr` is NULL or valid for a write.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_query_srq(srq: *mut ibv_srq, srq_attr: *mut ibv_srq_attr) -> c_int {
    // SAFETY: the caller passes NULL or a live SRQ.
    let Some(Some(s)) = unsafe { srq_wrap(srq) }.map(SrqWrap::srq) else {
        return libc::EINVAL;
    };
    if srq_attr.is_null() {
        return libc::EINVAL;
    }
    match s.query() {
        Ok(q) => {
            // SAFETY: the caller passes a writable attribute.
            unsafe {
                srq_attr.write(ibv_srq_attr {
                    max_wr: q.max_wr,
                    max_sge: q.max_sge,
                    srq_limit: q.srq_limit,
                })
            };
            0
        }
        Err(e) => errno_of(&e),
    }
}

/// `ibv_destroy_srq`: 0 or an errno value (`EBUSY` while a QP uses it; it stays). Waits until
/// every asynchronous event handed out for it was acknowledged, as libibverbs does.
///
/// # Safety
///
/// `srq` is NULL or a live SRQ of this library; on success it is not used afterwards.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    // SAFETY: the caller passes a live SRQ (or NULL). Other threads may still acknowledge its
    // events, so the wrapper is only shared.
    let Some(w) = (unsafe { srq_wrap(srq) }) else {
        return libc::EINVAL;
    };
    // SAFETY: nothing else uses the SRQ while it is destroyed (but `ibv_ack_async_event`,
    // which does not touch this cell).
    let slot = unsafe { &mut *w.srq.get() };
    let ret = w.async_acks.destroy(slot, Srq::destroy);
    if ret == 0 {
        // SAFETY: the boxed `SrqWrap`, which the caller no longer uses.
        unsafe { unbox(srq.cast::<SrqWrap>()) };
    }
    ret
}

/// `ops.post_srq_recv` (what `ibv_post_srq_recv` calls): queues the list of receive work
/// requests and rings the doorbell; no system call. 0, or an errno value with `*bad_recv_wr`
/// the first work request not posted (`EINVAL`: too many SGEs; `ENOMEM`: the SRQ is full).
///
/// # Safety
///
/// `srq` is NULL or a live SRQ of this library; `wr` is NULL or a valid list of work
/// requests; `bad_recv_wr` is NULL or valid for a write.
pub(crate) unsafe extern "C" fn post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_recv_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: the caller passes a live SRQ or NULL.
    let s = unsafe { srq_wrap(srq) }.and_then(SrqWrap::srq);
    // SAFETY: the caller's work requests and their SGE lists.
    let convert = |w: &ibv_recv_wr| unsafe { recv_wr_of(w) };
    // SAFETY: the caller passes a valid list or NULL, and NULL or a writable `bad_recv_wr`.
    unsafe {
        post_list(
            s,
            wr,
            bad_recv_wr,
            |w| w.next,
            convert,
            |s, w| s.post_recv_iter(w),
        )
    }
}
