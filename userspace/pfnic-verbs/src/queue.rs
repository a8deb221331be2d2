//! What QPs and SRQs share: the queue memory mapped from the driver (WQE slots and a record
//! the device writes) and the posting of work requests into it.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

use pfnic_sys::Mapping;

use crate::types::{PostError, RecvWr, Sge};
use crate::{errno, Ctx};

/// Bytes per WQE (docs/verbs.md, "Work queue entry").
pub(crate) const WQE_SIZE: usize = 128;
/// SGEs a WQE holds.
pub(crate) const WQE_MAX_SGE: usize = 4;

/// A WQE as 16 little-endian words.
pub(crate) type Wqe = [u64; WQE_SIZE / 8];

/// Maps the `len` bytes at `offset` the driver gave for a new object, once `consistent` says
/// its layout can be trusted; on any failure, `destroy` removes the object.
pub(crate) fn map_queue(
    ctx: &Ctx,
    consistent: Result<(), String>,
    offset: u64,
    len: u64,
    destroy: impl FnOnce(),
) -> io::Result<Mapping> {
    let mapped = consistent
        .map_err(|what| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("driver returned an inconsistent {what}"),
            )
        })
        .and_then(|()| {
            let len = usize::try_from(len).map_err(|_| errno(libc::EINVAL))?;
            ctx.dev.mmap(offset, len)
        });
    if mapped.is_err() {
        destroy();
    }
    mapped
}

/// The 32-bit word at `offset` of a record the device writes.
///
/// # Safety
///
/// `offset` is 4-byte aligned and 4 bytes fit inside `map` there.
pub(crate) unsafe fn record_word(map: &Mapping, offset: usize) -> &AtomicU32 {
    // SAFETY: the caller guarantees an aligned word inside the mapping, which lives as long
    // as the borrow; the device writes it, so it is only accessed atomically.
    unsafe { AtomicU32::from_ptr(map.as_ptr().add(offset).cast()) }
}

/// Writes `wqe` at byte `offset` of `map`.
///
/// # Safety
///
/// The 128 bytes at `offset` lie inside `map`, in a queue slot the device does not read
/// before the doorbell that follows.
pub(crate) unsafe fn write_wqe(map: &Mapping, offset: usize, wqe: &Wqe) {
    // SAFETY: forwarded to the caller; volatile stores, as the device reads the memory.
    unsafe {
        let p = map.as_ptr().add(offset).cast::<u64>();
        for (i, w) in wqe.iter().enumerate() {
            p.add(i).write_volatile(w.to_le());
        }
    }
}

/// A work queue (a QP's send or receive queue, or an SRQ) as its poster sees it.
pub(crate) struct Poster<'q> {
    /// Work requests posted, free-running (the doorbell carries its low 16 bits).
    pub(crate) tail: &'q mut u32,
    /// Slots (a power of two).
    pub(crate) entries: u32,
    /// The device's free-running 16-bit head.
    pub(crate) head: &'q AtomicU32,
}

impl Poster<'_> {
    /// Writes `wrs` into the queue in order, each as `wqe` makes it, with `write(slot, wqe)`,
    /// and returns whether it posted any (the caller rings the doorbell once). Fails at the
    /// first work request `valid` refuses, or a `None` (`EINVAL`), or that finds the queue full
    /// (`ENOMEM`); those before it are posted.
    pub(crate) fn post<W>(
        &mut self,
        wrs: impl IntoIterator<Item = Option<W>>,
        valid: impl Fn(&W) -> bool,
        wqe: impl Fn(&W) -> Wqe,
        mut write: impl FnMut(u32, &Wqe),
    ) -> (Result<(), PostError>, bool) {
        let start = *self.tail;
        let mut result = Ok(());
        let mut head = self.head.load(Ordering::Acquire);
        for (i, wr) in wrs.into_iter().enumerate() {
            let Some(wr) = wr.filter(&valid) else {
                result = Err(PostError::new(i, libc::EINVAL));
                break;
            };
            if self.tail.wrapping_sub(head) & 0xffff >= self.entries {
                head = self.head.load(Ordering::Acquire);
                if self.tail.wrapping_sub(head) & 0xffff >= self.entries {
                    result = Err(PostError::new(i, libc::ENOMEM));
                    break;
                }
            }
            write(*self.tail & (self.entries - 1), &wqe(&wr));
            *self.tail = self.tail.wrapping_add(1);
        }
        (result, *self.tail != start)
    }

    /// [`Poster::post`] of receive work requests of at most `max_sge` SGEs.
    pub(crate) fn post_recv<'b>(
        &mut self,
        wrs: impl IntoIterator<Item = Option<RecvWr<'b>>>,
        max_sge: u32,
        write: impl FnMut(u32, &Wqe),
    ) -> (Result<(), PostError>, bool) {
        let valid = |wr: &RecvWr<'_>| wr.sg_list.len() <= max_sge as usize;
        self.post(wrs, valid, recv_wqe, write)
    }
}

/// Fills the SGE part (words 8..16) of a WQE.
pub(crate) fn put_sges(wqe: &mut Wqe, sges: &[Sge]) {
    for (i, s) in sges.iter().take(WQE_MAX_SGE).enumerate() {
        wqe[8 + 2 * i] = s.addr;
        wqe[8 + 2 * i + 1] = u64::from(s.length) | u64::from(s.lkey) << 32;
    }
}

/// A receive WQE: `num_sge`, `wr_id` and the SGEs.
pub(crate) fn recv_wqe(wr: &RecvWr<'_>) -> Wqe {
    let mut wqe = [0u64; WQE_SIZE / 8];
    wqe[0] = (wr.sg_list.len() as u64) << 16;
    wqe[1] = wr.wr_id;
    put_sges(&mut wqe, wr.sg_list);
    wqe
}
