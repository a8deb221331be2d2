//! Shared receive queues: `ibv_srq`.

use std::io;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::mr::PdInner;
use crate::qp::post_recv_list;
use crate::{check, destroy_shared, non_null, sys, Pd, PostError, RecvWr};

/// `ibv_srq_init_attr`.
#[derive(Clone, Copy, Debug)]
pub struct SrqInitAttr {
    pub max_wr: u32,
    pub max_sge: u32,
    /// Armed at creation when nonzero: `IBV_EVENT_SRQ_LIMIT_REACHED` once fewer receives are
    /// left.
    pub srq_limit: u32,
    /// Returned with the SRQ's asynchronous events.
    pub srq_context: u64,
}

/// What `ibv_query_srq` returns (`struct ibv_srq_attr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqAttr {
    pub max_wr: u32,
    pub max_sge: u32,
    /// The armed limit, 0 once it fired.
    pub srq_limit: u32,
}

/// An SRQ; destroyed once no QP takes from it.
pub(crate) struct SrqInner {
    pub(crate) ptr: NonNull<sys::ibv_srq>,
    _pd: Arc<PdInner>,
    /// Not yet destroyed by [`Srq::destroy`].
    live: bool,
}

// SAFETY: libibverbs' SRQs may be used from any thread (the provider locks its queue).
unsafe impl Send for SrqInner {}
// SAFETY: as for `Send`.
unsafe impl Sync for SrqInner {}

impl crate::Destroyable for SrqInner {
    fn destroyed(&mut self) {
        self.live = false;
    }
}

impl Drop for SrqInner {
    fn drop(&mut self) {
        if self.live {
            // SAFETY: the SRQ exists and no QP takes from it any more (they hold `self`).
            unsafe { sys::ibv_destroy_srq(self.ptr.as_ptr()) };
        }
    }
}

/// A shared receive queue: `ibv_srq`.
pub struct Srq {
    pub(crate) inner: Arc<SrqInner>,
}

impl Pd {
    /// `ibv_create_srq` in this PD.
    pub fn create_srq(&self, attr: &SrqInitAttr) -> io::Result<Srq> {
        let mut init = sys::ibv_srq_init_attr {
            srq_context: attr.srq_context as *mut libc::c_void,
            attr: sys::ibv_srq_attr {
                max_wr: attr.max_wr,
                max_sge: attr.max_sge,
                srq_limit: attr.srq_limit,
            },
        };
        // SAFETY: the PD exists (the SRQ keeps it) and `init` is complete.
        let ptr = non_null(unsafe { sys::ibv_create_srq(self.as_ptr(), &mut init) })?;
        Ok(Srq {
            inner: Arc::new(SrqInner {
                ptr,
                _pd: self.inner.clone(),
                live: true,
            }),
        })
    }
}

impl Srq {
    /// The `ibv_srq` pointer, for calls this crate does not wrap.
    pub fn as_ptr(&self) -> *mut sys::ibv_srq {
        self.inner.ptr.as_ptr()
    }

    /// The SRQ's handle in the uverbs file.
    pub fn handle(&self) -> u32 {
        // SAFETY: the SRQ exists.
        unsafe { (*self.as_ptr()).handle }
    }

    /// `ibv_query_srq`.
    pub fn query(&self) -> io::Result<SrqAttr> {
        let mut a = sys::ibv_srq_attr {
            max_wr: 0,
            max_sge: 0,
            srq_limit: 0,
        };
        // SAFETY: the SRQ exists and `a` is writable.
        check(unsafe { sys::ibv_query_srq(self.as_ptr(), &mut a) })?;
        Ok(SrqAttr {
            max_wr: a.max_wr,
            max_sge: a.max_sge,
            srq_limit: a.srq_limit,
        })
    }

    /// `ibv_modify_srq` of what `attr_mask` names (`IBV_SRQ_MAX_WR`, `IBV_SRQ_LIMIT`).
    pub fn modify(&self, attr_mask: u32, max_wr: u32, srq_limit: u32) -> io::Result<()> {
        let mut a = sys::ibv_srq_attr {
            max_wr,
            max_sge: 0,
            srq_limit,
        };
        // SAFETY: the SRQ exists and `a` is complete.
        check(unsafe { sys::ibv_modify_srq(self.as_ptr(), &mut a, attr_mask as i32) })
    }

    /// Arms the limit: [`Srq::modify`] of `IBV_SRQ_LIMIT`.
    pub fn arm_limit(&self, limit: u32) -> io::Result<()> {
        self.modify(sys::ibv_srq_attr_mask_IBV_SRQ_LIMIT, 0, limit)
    }

    /// `ibv_post_srq_recv` of `wrs`, as one list.
    pub fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        post_recv_list(wrs, |base, bad| {
            // SAFETY: the SRQ exists; the list is valid for the call.
            unsafe { sys::ibv_post_srq_recv(self.as_ptr(), base, bad) }
        })
    }

    /// `ibv_destroy_srq`: `EBUSY` (and the SRQ back) while a QP takes from it.
    pub fn destroy(self) -> Result<(), (Srq, io::Error)> {
        destroy_shared(
            self.inner,
            |inner| Srq { inner },
            // SAFETY: the SRQ exists and no other handle on it is left.
            |inner| unsafe { sys::ibv_destroy_srq(inner.ptr.as_ptr()) },
        )
    }
}
