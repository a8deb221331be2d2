//! Protection domains and memory regions: `ibv_pd`, `ibv_mr`.

use std::io;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::dm::DmInner;
use crate::{check, destroy_shared, non_null, sys, Buffer, Context, Sge, ACCESS_ON_DEMAND};

/// An allocated PD; deallocated once nothing made in it is left.
pub(crate) struct PdInner {
    pub(crate) ptr: NonNull<sys::ibv_pd>,
    pub(crate) ctx: Context,
    /// Not yet deallocated by [`Pd::dealloc`].
    live: bool,
}

// SAFETY: libibverbs' PDs may be used from any thread.
unsafe impl Send for PdInner {}
// SAFETY: as for `Send`.
unsafe impl Sync for PdInner {}

impl crate::Destroyable for PdInner {
    fn destroyed(&mut self) {
        self.live = false;
    }
}

impl Drop for PdInner {
    fn drop(&mut self) {
        if self.live {
            // SAFETY: the PD is allocated, and every object in it is gone (they hold `self`).
            unsafe { sys::ibv_dealloc_pd(self.ptr.as_ptr()) };
        }
    }
}

/// A protection domain: `ibv_pd`. Cloning gives another handle on the same PD.
#[derive(Clone)]
pub struct Pd {
    pub(crate) inner: Arc<PdInner>,
}

impl Pd {
    pub(crate) fn alloc(ctx: &Context) -> io::Result<Self> {
        // SAFETY: the context is open.
        let ptr = non_null(unsafe { sys::ibv_alloc_pd(ctx.as_ptr()) })?;
        Ok(Self {
            inner: Arc::new(PdInner {
                ptr,
                ctx: ctx.clone(),
                live: true,
            }),
        })
    }

    /// The `ibv_pd` pointer, for calls this crate does not wrap.
    pub fn as_ptr(&self) -> *mut sys::ibv_pd {
        self.inner.ptr.as_ptr()
    }

    /// The PD's handle in the uverbs file.
    pub fn handle(&self) -> u32 {
        // SAFETY: the PD is allocated.
        unsafe { (*self.as_ptr()).handle }
    }

    /// The context the PD is in.
    pub fn context(&self) -> Context {
        self.inner.ctx.clone()
    }

    /// `ibv_dealloc_pd`: `EBUSY` (and the PD back) while this handle is not the last one or
    /// an MR or QP is still in it.
    pub fn dealloc(self) -> Result<(), (Pd, io::Error)> {
        destroy_shared(
            self.inner,
            |inner| Pd { inner },
            // SAFETY: the PD is allocated, and no handle on it is left but this one.
            |inner| unsafe { sys::ibv_dealloc_pd(inner.ptr.as_ptr()) },
        )
    }

    /// `ibv_reg_mr` of all of `buf`, which the MR keeps alive.
    pub fn reg_mr(&self, buf: &Arc<Buffer>, access: u32) -> io::Result<Mr> {
        self.reg_mr_range(buf, 0, buf.len(), access)
    }

    /// `ibv_reg_mr` of `[offset, offset + len)` of `buf`, which the MR keeps alive.
    pub fn reg_mr_range(
        &self,
        buf: &Arc<Buffer>,
        offset: usize,
        len: usize,
        access: u32,
    ) -> io::Result<Mr> {
        if offset.checked_add(len).is_none_or(|end| end > buf.len()) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: the range is inside `buf`, which the MR keeps mapped; `Buffer` is only
        // accessed by atomic copies, so the device writing it is no undefined behaviour.
        let mut mr = unsafe { self.reg_mr_raw(buf.addr() + offset as u64, len as u64, access) }?;
        mr.buf = Some(buf.clone());
        Ok(mr)
    }

    /// `ibv_reg_mr` of `[addr, addr + len)`.
    ///
    /// # Safety
    ///
    /// The device, and remote peers the MR's rkey is given to, may write the range while the
    /// MR lives: it must be memory Rust code does not own, or only touches through copies the
    /// device may race with.
    pub unsafe fn reg_mr_raw(&self, addr: u64, len: u64, access: u32) -> io::Result<Mr> {
        let len = usize::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: the PD is allocated; the caller vouches for the range; libibverbs only
        // passes the address to the kernel.
        let ptr = non_null(unsafe {
            sys::ibv_reg_mr(self.as_ptr(), addr as *mut libc::c_void, len, access as i32)
        })?;
        Ok(Mr::new(ptr, self, None, None, access))
    }

    /// The implicit on-demand MR over the whole address space: `ibv_reg_mr(pd, NULL,
    /// SIZE_MAX, access | IBV_ACCESS_ON_DEMAND)`.
    ///
    /// # Safety
    ///
    /// As for [`Pd::reg_mr_raw`], for every address of the process.
    pub unsafe fn reg_implicit_mr(&self, access: u32) -> io::Result<Mr> {
        // SAFETY: the caller vouches for the whole address space.
        unsafe { self.reg_mr_raw(0, usize::MAX as u64, access | ACCESS_ON_DEMAND) }
    }

    /// `ibv_advise_mr` of the ranges `sges` (lkeys of on-demand MRs of this PD).
    pub fn advise_mr(&self, advice: u32, flags: u32, sges: &[Sge]) -> io::Result<()> {
        let mut list: Vec<sys::ibv_sge> = sges
            .iter()
            .map(|s| sys::ibv_sge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            })
            .collect();
        let n =
            u32::try_from(list.len()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: the PD is allocated and `list` holds `n` SGEs.
        check(unsafe { sys::ibv_advise_mr(self.as_ptr(), advice, flags, list.as_mut_ptr(), n) })
    }
}

/// A registered memory region: `ibv_mr`. Deregistered on drop.
pub struct Mr {
    ptr: NonNull<sys::ibv_mr>,
    pd: Arc<PdInner>,
    /// The buffer of a safe registration, kept mapped while the MR lives.
    buf: Option<Arc<Buffer>>,
    /// The device memory of an MR over it, kept allocated while the MR lives.
    _dm: Option<Arc<DmInner>>,
    /// The access flags it was registered with.
    access: u32,
    /// Not yet deregistered by [`Mr::dereg`].
    live: bool,
}

// SAFETY: libibverbs' MRs may be used from any thread.
unsafe impl Send for Mr {}
// SAFETY: as for `Send`; `&Mr` only reads the MR's fields.
unsafe impl Sync for Mr {}

impl Mr {
    pub(crate) fn new(
        ptr: NonNull<sys::ibv_mr>,
        pd: &Pd,
        buf: Option<Arc<Buffer>>,
        dm: Option<Arc<DmInner>>,
        access: u32,
    ) -> Self {
        Self {
            ptr,
            pd: pd.inner.clone(),
            buf,
            _dm: dm,
            access,
            live: true,
        }
    }

    fn mr(&self) -> &sys::ibv_mr {
        // SAFETY: the MR is registered until `self` goes, and libibverbs does not change it.
        unsafe { self.ptr.as_ref() }
    }

    /// The MR's handle in the uverbs file.
    pub fn handle(&self) -> u32 {
        self.mr().handle
    }

    /// The local key, for SGEs.
    pub fn lkey(&self) -> u32 {
        self.mr().lkey
    }

    /// The remote key, for peers' RDMA and atomics.
    pub fn rkey(&self) -> u32 {
        self.mr().rkey
    }

    /// The registered range's start.
    pub fn addr(&self) -> u64 {
        self.mr().addr as u64
    }

    /// The registered range's length.
    pub fn len(&self) -> u64 {
        self.mr().length as u64
    }

    /// Whether the range is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The access flags it was registered with (`IBV_ACCESS_*`).
    pub fn access(&self) -> u32 {
        self.access
    }

    /// The buffer of a safe registration.
    pub fn buffer(&self) -> Option<&Arc<Buffer>> {
        self.buf.as_ref()
    }

    /// The PD the MR is in.
    pub fn pd(&self) -> Pd {
        Pd {
            inner: self.pd.clone(),
        }
    }

    /// An SGE over `[offset, offset + len)` of the range, with the MR's lkey.
    pub fn sge(&self, offset: u64, len: u32) -> Sge {
        Sge {
            addr: self.addr() + offset,
            length: len,
            lkey: self.lkey(),
        }
    }

    /// `ibv_dereg_mr`; the MR back with the errno on failure.
    pub fn dereg(mut self) -> Result<(), (Mr, io::Error)> {
        // SAFETY: the MR is registered; on success it is not used again (dropped below).
        match check(unsafe { sys::ibv_dereg_mr(self.ptr.as_ptr()) }) {
            Ok(()) => {
                // Deregistered: the drop lets go of the rest only.
                self.live = false;
                Ok(())
            }
            Err(e) => Err((self, e)),
        }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        if self.live {
            // SAFETY: the MR is registered and not used after this.
            unsafe { sys::ibv_dereg_mr(self.ptr.as_ptr()) };
        }
    }
}
