//! Inline data (`IBV_SEND_INLINE`, `cap.max_inline_data`): the payload of a send or RDMA WRITE
//! is copied at posting, so the caller may reuse its buffer at once and needs no MR for it.
//!
//! The device reads every payload through an MR, so the library copies inline payloads into a
//! ring of slots of its own, registered on the QP's PD: one slot per send queue entry, plus
//! one. Slots are taken in order, under the ring's lock, by the posts that use them, and a
//! slot is taken again only after `depth + 1` later inline posts succeeded; since the send
//! queue never holds more than `depth` work requests, the work request that used a slot has
//! completed (the device is done with its payload) by the time the slot is written again.

use core::ffi::c_int;
use std::io;
use std::sync::{Arc, Mutex};

use pfnic_verbs::{Buffer, Mr, Pd, Sge, WrOpcode};

use crate::ffi::ibv_sge;

/// `IBV_SEND_INLINE`.
pub(crate) const SEND_INLINE: u32 = 1 << 3;
/// The inline payload a work request may carry (`cap.max_inline_data`, at most).
pub(crate) const MAX_INLINE_DATA: u32 = 256;
/// `IBV_ACCESS_LOCAL_WRITE`: the slots' MR (the device only reads it).
const ACCESS_LOCAL_WRITE: u32 = 1;

/// A QP's inline slots.
pub(crate) struct InlineRing {
    buf: Arc<Buffer>,
    mr: Mr,
    slots: u64,
    /// The next slot to take (a count; the slot is this modulo `slots`). Held across a post
    /// that takes slots, and advanced only by the slots its posted work requests used.
    next: Mutex<u64>,
}

impl InlineRing {
    /// Slots for a send queue of `depth` entries, registered on `pd`.
    pub(crate) fn new(pd: &Pd, depth: u32) -> io::Result<Self> {
        let slots = u64::from(depth) + 1;
        let len = usize::try_from(slots * u64::from(MAX_INLINE_DATA)).map_err(io::Error::other)?;
        let buf = Arc::new(Buffer::new(len)?);
        let mr = pd.reg_mr(&buf, ACCESS_LOCAL_WRITE)?;
        Ok(Self {
            buf,
            mr,
            slots,
            next: Mutex::new(0),
        })
    }

    /// Takes the ring for a post; the guard holds the next slot.
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, u64> {
        crate::lock(&self.next)
    }

    /// Copies the payload of `sg_list` (the caller's memory, read by the CPU: the SGEs' lkeys
    /// are not used) into slot `n` and returns the SGE of the slot. `EINVAL` for a payload
    /// longer than a slot, or an opcode that carries none (READ, atomics).
    ///
    /// # Safety
    ///
    /// Each SGE's range is readable, and the caller holds the ring's lock with `n` at or past
    /// its value.
    pub(crate) unsafe fn fill(
        &self,
        n: u64,
        opcode: WrOpcode,
        sg_list: &[ibv_sge],
    ) -> Result<Sge, c_int> {
        if !matches!(
            opcode,
            WrOpcode::Send
                | WrOpcode::SendWithImm
                | WrOpcode::RdmaWrite
                | WrOpcode::RdmaWriteWithImm
        ) {
            return Err(libc::EINVAL);
        }
        let total: u64 = sg_list.iter().map(|s| u64::from(s.length)).sum();
        if total > u64::from(MAX_INLINE_DATA) {
            return Err(libc::EINVAL);
        }
        let base = usize::try_from((n % self.slots) * u64::from(MAX_INLINE_DATA))
            .map_err(|_| libc::EINVAL)?;
        let mut off = base;
        for s in sg_list {
            let len = s.length as usize;
            if len == 0 {
                continue;
            }
            // SAFETY: the caller's range, readable (see above); it stays the caller's.
            let data = unsafe { core::slice::from_raw_parts(s.addr as usize as *const u8, len) };
            self.buf.write(off, data);
            off += len;
        }
        Ok(Sge {
            addr: self.buf.addr() + base as u64,
            length: u32::try_from(total).map_err(|_| libc::EINVAL)?,
            lkey: self.mr.lkey(),
        })
    }
}
