//! Ordinary process memory lent to the device.

use std::io;
use std::sync::atomic::{AtomicU8, Ordering};

/// Page-aligned anonymous private memory (`mmap`), unmapped on drop: ordinary pageable memory
/// that nobody pins. [`crate::Pd::reg_mr`] registers it.
///
/// The device writes it behind the compiler's back, so it is only accessed by copies made of
/// relaxed atomic byte loads and stores (never through references): a CPU access racing with
/// the device, or with another thread, sees some mix of old and new bytes but is not undefined
/// behaviour. Every access is one byte wide, as atomic accesses of different sizes must not
/// race. Nothing is touched at creation: the pages are not present until first used.
pub struct Buffer {
    ptr: *mut u8,
    len: usize,
    map_len: usize,
}

// SAFETY: the memory is plain anonymous memory owned by this value, and every access through
// `&Buffer` is atomic.
unsafe impl Send for Buffer {}
// SAFETY: as for `Send`.
unsafe impl Sync for Buffer {}

/// The page size the buffers are aligned to.
pub const PAGE_SIZE: usize = 4096;

impl Buffer {
    /// Maps `len` bytes (rounded up to whole pages), readable and writable, untouched.
    pub fn new(len: usize) -> io::Result<Self> {
        Self::with_flags(len, 0)
    }

    /// Like [`Buffer::new`] with extra `mmap` flags (e.g. `MAP_NORESERVE`).
    pub fn with_flags(len: usize, flags: libc::c_int) -> io::Result<Self> {
        Self::map(len, libc::MAP_PRIVATE | flags)
    }

    /// Like [`Buffer::new`], shared anonymous memory (shmem): `MADV_DONTNEED` drops the
    /// mapping's pages but not their contents, so the next access faults the same bytes in.
    pub fn shared(len: usize) -> io::Result<Self> {
        Self::map(len, libc::MAP_SHARED)
    }

    fn map(len: usize, flags: libc::c_int) -> io::Result<Self> {
        if len == 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let map_len = len
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        // SAFETY: a fresh anonymous mapping at an address the kernel picks: it overlaps nothing.
        let ptr = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_ANONYMOUS | flags,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            ptr: ptr.cast(),
            len,
            map_len,
        })
    }

    /// Start address, as the device and work requests see it.
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// Start, as a raw pointer.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Bytes requested at creation.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty (never: creation refuses a zero length).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn check(&self, offset: usize, len: usize) {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len),
            "range {offset}+{len} outside a buffer of {} bytes",
            self.len
        );
    }

    /// Copies `out.len()` bytes from `offset` into `out`. Panics if the range is outside.
    pub fn read(&self, offset: usize, out: &mut [u8]) {
        self.check(offset, out.len());
        for (i, o) in out.iter_mut().enumerate() {
            // SAFETY: `offset + i` is inside the mapping (checked above); a byte is always
            // aligned for `AtomicU8`, and the memory is only ever accessed by atomic bytes.
            *o = unsafe { AtomicU8::from_ptr(self.ptr.add(offset + i)) }.load(Ordering::Relaxed);
        }
    }

    /// Copies `data` to `offset`. Panics if the range is outside.
    pub fn write(&self, offset: usize, data: &[u8]) {
        self.check(offset, data.len());
        for (i, &b) in data.iter().enumerate() {
            // SAFETY: as in `read`.
            unsafe { AtomicU8::from_ptr(self.ptr.add(offset + i)) }.store(b, Ordering::Relaxed);
        }
    }

    /// A copy of `len` bytes at `offset`.
    pub fn to_vec(&self, offset: usize, len: usize) -> Vec<u8> {
        let mut v = vec![0; len];
        self.read(offset, &mut v);
        v
    }

    /// Sets every byte to `byte` (touching every page).
    pub fn fill(&self, byte: u8) {
        let chunk = [byte; PAGE_SIZE];
        let mut off = 0;
        while off < self.len {
            let n = chunk.len().min(self.len - off);
            self.write(off, &chunk[..n]);
            off += n;
        }
    }

    /// The little-endian `u64` at `offset` (8-byte aligned).
    pub fn read_u64(&self, offset: usize) -> u64 {
        let mut b = [0; 8];
        self.read(offset, &mut b);
        u64::from_le_bytes(b)
    }

    /// Stores `v` little endian at `offset`.
    pub fn write_u64(&self, offset: usize, v: u64) {
        self.write(offset, &v.to_le_bytes());
    }

    /// `madvise(MADV_DONTNEED)` on the whole buffer: drops its pages (they read as zeros
    /// again) and makes the IOMMU invalidate the device's translations of them.
    pub fn dontneed(&self) -> io::Result<()> {
        self.madvise(libc::MADV_DONTNEED)
    }

    /// `madvise(advice)` on the whole buffer.
    pub fn madvise(&self, advice: libc::c_int) -> io::Result<()> {
        // SAFETY: advice on our own mapping; none of the advice values changes what is mapped
        // in a way that invalidates a reference (we hold none).
        if unsafe { libc::madvise(self.ptr.cast(), self.map_len, advice) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// `mprotect(prot)` on the whole buffer (e.g. `PROT_READ` or `PROT_NONE`, to make the
    /// device fail on it).
    ///
    /// # Safety
    ///
    /// The CPU accessors ([`Buffer::read`], [`Buffer::write`], ...) fault on a protection
    /// that forbids them: the caller must not use them until the protection allows it again.
    pub unsafe fn protect(&self, prot: libc::c_int) -> io::Result<()> {
        // SAFETY: changes the protection of our own mapping; the caller keeps the accessors
        // away from it.
        if unsafe { libc::mprotect(self.ptr.cast(), self.map_len, prot) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: unmaps what `with_flags` mapped; MRs over it hold an `Arc`, so none is left.
        unsafe { libc::munmap(self.ptr.cast(), self.map_len) };
    }
}
