//! Device memory: `ibv_dm`. Memory on the device (BAR1), mapped into the process, which
//! work requests reach through MRs over it (`ibv_reg_dm_mr`), zero-based.

use std::io;
use std::sync::atomic::Ordering;

use pfnic_sys::uapi;
use pfnic_sys::{Device, Mapping};

use crate::errno;

/// Device memory mapped into the process: `length` bytes, reached by copies checked against
/// them: an allocation of the RDMA core's, which its provider maps ([`DmMap::from_core`]).
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
