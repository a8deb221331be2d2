//! Device memory: `ibv_dm`. Memory on the device (BAR1), mapped into the process, which
//! work requests reach through MRs over it ([`crate::Pd::reg_dm_mr`]), zero-based.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pfnic_sys::uapi;
use pfnic_sys::Mapping;

use crate::{errno, Ctx, Mr, Pd};

pub(crate) struct DmInner {
    ctx: Arc<Ctx>,
    pub(crate) handle: u32,
    length: u64,
    map: Mapping,
    freed: AtomicBool,
}

impl Drop for DmInner {
    fn drop(&mut self) {
        if !self.freed.load(Ordering::Relaxed) {
            // No MR of ours uses it (they hold this `Arc`); the file's release takes it back
            // anyway if this fails.
            let _ = self.ctx.dev.free_dm(self.handle);
        }
    }
}

/// A device memory allocation: `ibv_dm`. Freed when it and its MRs are dropped.
pub struct Dm {
    pub(crate) inner: Arc<DmInner>,
}

impl Dm {
    pub(crate) fn alloc(ctx: &Arc<Ctx>, length: u64, log_align_req: u32) -> io::Result<Self> {
        let mut arg = uapi::AllocDm {
            length,
            log_align_req,
            ..Default::default()
        };
        ctx.dev.alloc_dm(&mut arg)?;
        let mapped = (|| {
            if arg.mmap_len < length {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("driver returned an inconsistent device memory layout: {arg:?}"),
                ));
            }
            let len = usize::try_from(arg.mmap_len).map_err(|_| errno(libc::EINVAL))?;
            ctx.dev.mmap(arg.mmap_offset, len)
        })();
        let map = match mapped {
            Ok(m) => m,
            Err(e) => {
                let _ = ctx.dev.free_dm(arg.dm);
                return Err(e);
            }
        };
        Ok(Self {
            inner: Arc::new(DmInner {
                ctx: ctx.clone(),
                handle: arg.dm,
                length,
                map,
                freed: AtomicBool::new(false),
            }),
        })
    }

    /// Bytes allocated.
    pub fn len(&self) -> u64 {
        self.inner.length
    }

    /// Whether it has no bytes (never: an allocation has at least one).
    pub fn is_empty(&self) -> bool {
        self.inner.length == 0
    }

    /// The bytes at `offset..offset + len`, checked against the allocation and for an
    /// aligned offset (`EINVAL`, [`uapi::PFNIC_DM_ALIGN`]).
    fn range(&self, offset: u64, len: usize) -> io::Result<*mut u8> {
        if !offset.is_multiple_of(uapi::PFNIC_DM_ALIGN) {
            return Err(errno(libc::EINVAL));
        }
        let end = offset
            .checked_add(len as u64)
            .filter(|&end| end <= self.inner.length)
            .ok_or_else(|| errno(libc::EINVAL))?;
        debug_assert!(end as usize <= self.inner.map.len());
        // SAFETY: `offset < length <= mapping length` (checked above and at allocation).
        Ok(unsafe { self.inner.map.as_ptr().add(offset as usize) })
    }

    /// `ibv_memcpy_to_dm`: copies `data` to `offset`.
    pub fn copy_to(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let p = self.range(offset, data.len())?;
        for (i, b) in data.iter().enumerate() {
            // SAFETY: inside the checked range of the mapping, which lives as long as `self`;
            // the device reads this memory too, hence volatile stores.
            unsafe { p.add(i).write_volatile(*b) };
        }
        // The device sees the bytes before any doorbell rung after this.
        std::sync::atomic::fence(Ordering::Release);
        Ok(())
    }

    /// `ibv_memcpy_from_dm`: copies `out.len()` bytes from `offset`.
    pub fn copy_from(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let p = self.range(offset, out.len())?;
        std::sync::atomic::fence(Ordering::Acquire);
        for (i, b) in out.iter_mut().enumerate() {
            // SAFETY: as in `copy_to`; volatile, as the device writes this memory.
            *b = unsafe { p.add(i).read_volatile() };
        }
        Ok(())
    }

    /// `ibv_free_dm`: `EBUSY` (and the allocation back) while an MR of this process uses it.
    #[allow(clippy::result_large_err)]
    pub fn free(self) -> Result<(), (Dm, io::Error)> {
        if Arc::strong_count(&self.inner) > 1 {
            return Err((self, errno(libc::EBUSY)));
        }
        match self.inner.ctx.dev.free_dm(self.inner.handle) {
            Ok(()) => {
                self.inner.freed.store(true, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err((self, e)),
        }
    }
}

impl Pd {
    /// `ibv_reg_dm_mr`: an MR over `dm[offset..offset + len]`, zero-based (its addresses are
    /// offsets into the MR); it keeps `dm` allocated. `access` without `ON_DEMAND`.
    pub fn reg_dm_mr(&self, dm: &Dm, offset: u64, len: u64, access: u32) -> io::Result<Mr> {
        if !Arc::ptr_eq(&dm.inner.ctx, &self.inner.ctx) {
            return Err(errno(libc::EINVAL));
        }
        let mut arg = uapi::RegDmMr {
            pd: self.inner.handle,
            dm: dm.inner.handle,
            access,
            dm_offset: offset,
            length: len,
            ..Default::default()
        };
        self.inner.ctx.dev.reg_dm_mr(&mut arg)?;
        Ok(Mr::from_dm(self, &arg, dm.inner.clone()))
    }
}
