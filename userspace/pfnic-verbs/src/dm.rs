//! Device memory: `ibv_dm`. Memory on the device (BAR1), mapped into the process, which
//! work requests reach through MRs over it ([`crate::Pd::reg_dm_mr`]), zero-based.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pfnic_sys::uapi;
use pfnic_sys::{Device, Mapping};

use crate::{errno, Ctx, Mr, Pd};

/// Device memory mapped into the process: `length` bytes, reached by copies checked against
/// them. An allocation of the private interface ([`Dm`]) has one, and so has one of the RDMA
/// core's, which its provider maps ([`DmMap::from_core`]).
pub struct DmMap {
    map: Mapping,
    length: u64,
}

impl DmMap {
    /// Maps `map_len` bytes of `dev` at `offset` for an allocation of `length` bytes.
    fn new(dev: &Device, offset: u64, map_len: u64, length: u64) -> io::Result<Self> {
        if map_len < length {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "driver returned an inconsistent device memory layout: {map_len} bytes \
                     to map at {offset:#x} for {length}"
                ),
            ));
        }
        let len = usize::try_from(map_len).map_err(|_| errno(libc::EINVAL))?;
        Ok(Self {
            map: dev.mmap(offset, len)?,
            length,
        })
    }

    /// Maps an allocation of `length` bytes that the RDMA core made, `layout` the driver's
    /// answer, from the context's uverbs file ([`crate::Context::from_core`]).
    pub fn from_core(
        ctx: &crate::Context,
        layout: &uapi::IbAllocDmResp,
        length: u64,
    ) -> io::Result<Self> {
        Self::new(&ctx.inner.dev, layout.mmap_offset, layout.mmap_len, length)
    }

    /// Bytes allocated.
    pub fn len(&self) -> u64 {
        self.length
    }

    /// Whether it has no bytes (never: an allocation has at least one).
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// The bytes at `offset..offset + len`, checked against the allocation and for an
    /// aligned offset (`EINVAL`, [`uapi::PFNIC_DM_ALIGN`]).
    fn range(&self, offset: u64, len: usize) -> io::Result<*mut u8> {
        if !offset.is_multiple_of(uapi::PFNIC_DM_ALIGN) {
            return Err(errno(libc::EINVAL));
        }
        let end = offset
            .checked_add(len as u64)
            .filter(|&end| end <= self.length)
            .ok_or_else(|| errno(libc::EINVAL))?;
        debug_assert!(end as usize <= self.map.len());
        // SAFETY: `offset < length <= mapping length` (checked above and at mapping).
        Ok(unsafe { self.map.as_ptr().add(offset as usize) })
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
}

pub(crate) struct DmInner {
    ctx: Arc<Ctx>,
    pub(crate) handle: u32,
    map: DmMap,
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
        let map = match DmMap::new(&ctx.dev, arg.mmap_offset, arg.mmap_len, length) {
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
                map,
                freed: AtomicBool::new(false),
            }),
        })
    }

    /// Bytes allocated.
    pub fn len(&self) -> u64 {
        self.inner.map.len()
    }

    /// Whether it has no bytes (never: an allocation has at least one).
    pub fn is_empty(&self) -> bool {
        self.inner.map.is_empty()
    }

    /// `ibv_memcpy_to_dm`: copies `data` to `offset` ([`DmMap::copy_to`]).
    pub fn copy_to(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.inner.map.copy_to(offset, data)
    }

    /// `ibv_memcpy_from_dm`: copies `out.len()` bytes from `offset` ([`DmMap::copy_from`]).
    pub fn copy_from(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.inner.map.copy_from(offset, out)
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
