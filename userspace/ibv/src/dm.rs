//! Device memory: `ibv_dm`, and MRs over it.

use std::io;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::{check, non_null, sys, Context, Mr, Pd};

/// An allocation of device memory; freed once no MR uses it.
pub(crate) struct DmInner {
    ptr: NonNull<sys::ibv_dm>,
    len: u64,
    _ctx: Context,
}

// SAFETY: libibverbs' device memory may be used from any thread.
unsafe impl Send for DmInner {}
// SAFETY: as for `Send`.
unsafe impl Sync for DmInner {}

impl Drop for DmInner {
    fn drop(&mut self) {
        // SAFETY: the allocation exists and no MR uses it any more (they hold `self`).
        unsafe { sys::ibv_free_dm(self.ptr.as_ptr()) };
    }
}

/// Device memory: `ibv_dm`, freed on drop.
pub struct Dm {
    inner: Arc<DmInner>,
}

impl Context {
    /// `ibv_alloc_dm`: `length` bytes of device memory aligned to `2^log_align_req` bytes.
    pub fn alloc_dm(&self, length: u64, log_align_req: u32) -> io::Result<Dm> {
        let mut attr = sys::ibv_alloc_dm_attr {
            length: usize::try_from(length)
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?,
            log_align_req,
            comp_mask: 0,
        };
        // SAFETY: the context is open and `attr` complete.
        let ptr = non_null(unsafe { sys::ibv_alloc_dm(self.as_ptr(), &mut attr) })?;
        Ok(Dm {
            inner: Arc::new(DmInner {
                ptr,
                len: length,
                _ctx: self.clone(),
            }),
        })
    }
}

impl Dm {
    /// The allocation's length.
    pub fn len(&self) -> u64 {
        self.inner.len
    }

    /// Whether the allocation is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `ibv_memcpy_to_dm`: `data` to byte `offset` of the allocation.
    pub fn copy_to(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        // SAFETY: the allocation exists; `data` is readable for its length; libibverbs checks
        // the range against the allocation.
        check(unsafe {
            sys::ibv_memcpy_to_dm(
                self.inner.ptr.as_ptr(),
                offset,
                data.as_ptr().cast(),
                data.len(),
            )
        })
    }

    /// `ibv_memcpy_from_dm`: bytes from `offset` of the allocation into `out`.
    pub fn copy_from(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        // SAFETY: as in `copy_to`; `out` is writable for its length.
        check(unsafe {
            sys::ibv_memcpy_from_dm(
                out.as_mut_ptr().cast(),
                self.inner.ptr.as_ptr(),
                offset,
                out.len(),
            )
        })
    }
}

impl Pd {
    /// `ibv_reg_dm_mr` of `[offset, offset + len)` of `dm`, zero-based (its address `x` is
    /// byte `offset + x` of the allocation, as libibverbs requires for device memory); the MR
    /// keeps the allocation.
    pub fn reg_dm_mr(&self, dm: &Dm, offset: u64, len: u64, access: u32) -> io::Result<Mr> {
        let len = usize::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let access = access | sys::ibv_access_flags_IBV_ACCESS_ZERO_BASED;
        // SAFETY: the PD and the allocation exist (the MR keeps both).
        let ptr = non_null(unsafe {
            sys::ibv_reg_dm_mr(self.as_ptr(), dm.inner.ptr.as_ptr(), offset, len, access)
        })?;
        Ok(Mr::new(ptr, self, None, Some(dm.inner.clone()), access))
    }
}
