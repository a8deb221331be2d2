//! Inline data (`IBV_SEND_INLINE`, `cap.max_inline_data`): the payload of a send or RDMA WRITE
//! is copied at posting, so the caller may reuse its buffer at once and needs no MR for it.
//!
//! The device reads every payload through an MR, so the provider copies inline payloads into a
//! ring of slots that its C part allocated and registered on the QP's PD, through the RDMA
//! core: one slot per send queue entry, plus one. Slots are taken in order, under the ring's
//! lock, by the posts that use them, and a slot is taken again only after `depth + 1` later
//! inline posts succeeded; since the send queue never holds more than `depth` work requests,
//! the work request that used a slot has completed (the device is done with its payload) by
//! the time the slot is written again.

use core::ffi::c_int;
use std::sync::Mutex;

use pfnic_verbs::{Qp, SendWr, Sge, WrOpcode};

/// `IBV_SEND_INLINE`.
pub(crate) const SEND_INLINE: u32 = 1 << 3;
/// The inline payload a work request may carry (`cap.max_inline_data`, at most).
pub(crate) const MAX_INLINE_DATA: u32 = 256;

/// Whether work requests of `opcode` carry a payload that may be inline (not READ, atomics).
pub(crate) fn carries_payload(opcode: WrOpcode) -> bool {
    matches!(
        opcode,
        WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm
    )
}

/// A work request for [`InlineRing::post`]: the request (`None`: a bad one, where the post
/// stops), and for an inline one its payload, which a slot replaces as the request's SGEs.
pub(crate) struct InlinePost<'a> {
    pub(crate) wr: Option<SendWr<'a>>,
    pub(crate) payload: Option<&'a [Sge]>,
}

/// A QP's inline slots.
pub(crate) struct InlineRing {
    /// The slots' memory, lent by the caller of [`InlineRing::lent`], and the key the device
    /// reads it through.
    addr: *mut u8,
    lkey: u32,
    slots: u64,
    /// The next slot to take (a count; the slot is this modulo `slots`). Held across a post
    /// that takes slots, and advanced only by the slots its posted work requests used.
    next: Mutex<u64>,
}

// SAFETY: the lent memory is only written under the ring's lock, and the lender keeps it (and
// its registration) for the ring's life ([`InlineRing::lent`]).
unsafe impl Send for InlineRing {}
// SAFETY: As above.
unsafe impl Sync for InlineRing {}

impl InlineRing {
    /// The bytes of slots a send queue of `depth` entries needs ([`InlineRing::lent`]).
    pub(crate) fn bytes_for(depth: u32) -> usize {
        (depth as usize + 1) * MAX_INLINE_DATA as usize
    }

    /// Slots for a send queue of `depth` entries in memory the caller registered: `addr`,
    /// [`InlineRing::bytes_for`]`(depth)` bytes, readable by the device through `lkey`.
    ///
    /// # Safety
    ///
    /// The memory stays writable, and registered under `lkey`, until the ring is dropped and
    /// the QP's work requests are done; nothing else writes it meanwhile.
    pub(crate) unsafe fn lent(addr: *mut u8, lkey: u32, depth: u32) -> Self {
        Self {
            addr,
            lkey,
            slots: u64::from(depth) + 1,
            next: Mutex::new(0),
        }
    }

    /// Posts `wrs` on `q` in order, as `Qp::post_send_iter` does, each inline one (with a
    /// `payload`) over a slot into which its payload is copied first: under the ring's lock,
    /// slots are taken in order, and the ring advances by the slots of the work requests
    /// posted. A work request that is `None`, or whose payload does not fit in a slot or
    /// belongs to an opcode that carries none, stops the post there with `EINVAL`. `Err`
    /// holds the index of the first work request not posted and the errno value.
    ///
    /// # Safety
    ///
    /// Every payload's ranges are readable (the CPU copies them: their lkeys are not used).
    pub(crate) unsafe fn post(&self, q: &Qp, wrs: &[InlinePost<'_>]) -> Result<(), (usize, c_int)> {
        let mut next = crate::lock(&self.next);
        // Every slot is filled before any work request refers to it.
        let mut slots: Vec<Option<Sge>> = Vec::with_capacity(wrs.len());
        let mut taken = 0;
        for w in wrs {
            let Some(wr) = &w.wr else { break };
            let slot = match w.payload {
                // SAFETY: the caller's readable payload; the ring is locked and the slot is
                // past every slot taken.
                Some(p) => match unsafe { self.fill(*next + taken, wr.opcode, p) } {
                    Ok(s) => Some(s),
                    Err(_) => break,
                },
                None => None,
            };
            taken += u64::from(slot.is_some());
            slots.push(slot);
        }
        // The work requests before the first bad one, then that one (`None`) if there is one.
        let good = slots.len();
        let sends = wrs.iter().take(good + 1).enumerate().map(|(i, w)| {
            let wr = w.wr.as_ref().filter(|_| i < good)?;
            Some(SendWr {
                send_flags: wr.send_flags & !SEND_INLINE,
                sg_list: slots[i].as_ref().map_or(wr.sg_list, core::slice::from_ref),
                ..*wr
            })
        });
        let r = q.post_send_iter(sends).map_err(|e| (e.bad_wr, e.errno()));
        let posted = r.as_ref().map_or_else(|&(i, _)| i, |()| wrs.len());
        *next += slots[..posted.min(good)].iter().flatten().count() as u64;
        r
    }

    /// Copies the payload `sg_list` into slot `n` and returns the SGE of the slot.
    /// `EINVAL` for a payload longer than a slot, or an opcode that carries none.
    ///
    /// # Safety
    ///
    /// Each SGE's range is readable, and the caller holds the ring's lock with `n` at or past
    /// its value.
    unsafe fn fill(&self, n: u64, opcode: WrOpcode, sg_list: &[Sge]) -> Result<Sge, c_int> {
        if !carries_payload(opcode) {
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
            // SAFETY: `off + len` is within slot `n` (the total fits one), inside the lent
            // memory, which only this ring writes, under its lock (`lent`'s contract).
            unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), self.addr.add(off), len) };
            off += len;
        }
        Ok(Sge {
            addr: self.addr as u64 + base as u64,
            length: u32::try_from(total).map_err(|_| libc::EINVAL)?,
            lkey: self.lkey,
        })
    }
}
