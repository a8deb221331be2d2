// SPDX-License-Identifier: GPL-2.0

//! The driver-owned descriptor rings: posting descriptors, ringing `RING_DB`, and waiting for
//! their completion (woken by the completion interrupts).

use super::{contexts::Slot, Nic};
use crate::{
    regs,
    ring::{self, Desc},
};
use kernel::{
    io::Io,
    num::Bounded,
    prelude::*,
    sync::CondVarTimeoutResult,
    time::{msecs_to_jiffies, Delta, Instant, Monotonic},
};

/// How long one submitted descriptor may take: 1 GiB of faulting pages under TCG is slow.
const SUBMIT_TIMEOUT: Delta = Delta::from_secs(120);

impl Nic {
    /// Points every context at its ring and completion vector. The device keeps these over a
    /// context's start and stop; a reset clears them.
    pub(crate) fn program_rings(&self) -> Result {
        let completion_vectors = self.info.num_vectors.saturating_sub(1).max(1);
        self.with_bar(|bar| {
            // Vector 0 is the device's own; contexts take the others in turn.
            let mut vector = 1;
            for ctx in 0..self.info.num_contexts {
                let addr = self.rings.dma_address(ctx).ok_or(EINVAL)?;
                bar.write_reg(regs::CTX_SELECT::zeroed().with_context(ctx));
                bar.write_reg(regs::CTX_RING_LO::zeroed().with_addr(addr as u32));
                bar.write_reg(regs::CTX_RING_HI::zeroed().with_addr((addr >> 32) as u32));
                bar.write_reg(regs::CTX_RING_SIZE::zeroed().with_entries(ring::RING_SIZE));
                bar.write_reg(regs::CTX_VECTOR::zeroed().with_vector(vector));
                vector = if vector >= completion_vectors {
                    1
                } else {
                    vector + 1
                };
            }
            if let Some(verbs) = &self.verbs {
                verbs.eq.program(bar);
            }
            Ok(())
        })?
    }

    /// Has context `index` execute `desc` and waits for it; returns the completed descriptor
    /// and the time it took.
    ///
    /// Descriptors queued before (asynchronous prefetches) run first. `EINTR` if a signal
    /// arrives while waiting (the device goes on, and the ring slot is reclaimed once the
    /// descriptor is done); `ETIMEDOUT` if the device does not complete it in time.
    pub(crate) fn submit(&self, index: u32, desc: Desc) -> Result<(Desc, Delta)> {
        let pos = self.post(index, desc, true)?;
        let start = Instant::<Monotonic>::now();
        let done = self.wait_desc(index, pos)?;
        Ok((done, start.elapsed()))
    }

    /// Posts `desc` on context `index`'s ring and rings its doorbell; returns its position.
    /// With `claim`, the caller must collect it with [`Nic::wait_desc`]; without, the ring slot
    /// is reclaimed once the device is done with it. Waits while the ring is full.
    pub(crate) fn post(&self, index: u32, desc: Desc, claim: bool) -> Result<u32> {
        self.wait_ring(|| {
            let mut table = self.contexts.lock();
            let slot = table.slot_mut(index).ok_or(ENODEV)?;
            self.reap(index, slot);
            if slot.tail.wrapping_sub(slot.head) >= ring::RING_SIZE {
                return Ok(None);
            }
            let pos = slot.tail;
            self.rings.write(index, pos, desc)?;
            slot.claimed[ring::slot_index(pos)] = claim;
            slot.tail = pos.wrapping_add(1);
            // The tail is rung under the lock, so the device sees it only grow.
            let context = Bounded::<u32, 16>::try_new(index).ok_or(EINVAL)?;
            // The device takes the low 16 bits and finds the rest from its head.
            let tail = Bounded::<u32, 16>::try_new(slot.tail & 0xffff).ok_or(EINVAL)?;
            self.with_bar(|bar| {
                bar.write_reg(
                    regs::RING_DB::zeroed()
                        .with_context(context)
                        .with_tail(tail),
                )
            })?;
            Ok(Some(pos))
        })
    }

    /// Sleeps until `ready` yields a value, evaluating it again after every descriptor
    /// completion interrupt and every released ring slot. `EINTR` if a signal arrives while
    /// waiting, `ETIMEDOUT` after [`SUBMIT_TIMEOUT`], `ENODEV` as soon as the device is unbound.
    fn wait_ring<T>(&self, mut ready: impl FnMut() -> Result<Option<T>>) -> Result<T> {
        let start = Instant::<Monotonic>::now();
        loop {
            let seen = *self.ring_progress.lock();
            // An unbound device completes nothing more (its reset stopped every context).
            if self.contexts.lock().revoked {
                return Err(ENODEV);
            }
            if let Some(value) = ready()? {
                return Ok(value);
            }
            let left = SUBMIT_TIMEOUT - start.elapsed();
            if left.is_negative() || left.is_zero() {
                return Err(ETIMEDOUT);
            }
            let jiffies =
                msecs_to_jiffies(u32::try_from(left.as_millis_ceil()).unwrap_or(u32::MAX));
            let mut progress = self.ring_progress.lock();
            // Progress after `seen` may have been missed by `ready`: look again. Otherwise the
            // interrupt handler that makes progress takes the lock only once we are queued.
            if *progress == seen {
                let woke = self
                    .ring_wait
                    .wait_interruptible_timeout(&mut progress, jiffies);
                if let CondVarTimeoutResult::Signal { .. } = woke {
                    return Err(EINTR);
                }
            }
        }
    }

    /// Wakes the ring waiters: a descriptor completed or a ring slot was released.
    pub(super) fn ring_progressed(&self) {
        let mut progress = self.ring_progress.lock();
        *progress = progress.wrapping_add(1);
        drop(progress);
        self.ring_wait.notify_all();
    }

    /// Advances `slot.head` past descriptors that are done and not claimed.
    fn reap(&self, index: u32, slot: &mut Slot) {
        while slot.head != slot.tail {
            let head = slot.head;
            // An unbound device's ring is gone, and its reset stopped every descriptor.
            let done = self
                .rings
                .status(index, head)
                .is_ok_and(|status| status & ring::DESC_DONE != 0);
            if slot.claimed[ring::slot_index(head)] || !done {
                break;
            }
            slot.head = head.wrapping_add(1);
        }
    }

    /// Waits for the claimed descriptor at `pos` of context `index` and returns it completed.
    /// Releases the claim in every case.
    pub(crate) fn wait_desc(&self, index: u32, pos: u32) -> Result<Desc> {
        let done = self.wait_ring(|| {
            if self.rings.status(index, pos)? & ring::DESC_DONE == 0 {
                return Ok(None);
            }
            self.rings.read(index, pos).map(Some)
        });
        let mut table = self.contexts.lock();
        if let Some(slot) = table.slot_mut(index) {
            slot.claimed[ring::slot_index(pos)] = false;
            self.reap(index, slot);
        }
        drop(table);
        // A poster may be waiting for this slot.
        self.ring_progressed();
        done
    }
}
